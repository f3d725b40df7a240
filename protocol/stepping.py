"""The input rule: which received samples one step of a service sees (DESIGN §3).

This module is pure (no sockets, no clock): an :class:`InputBuffer` stores the samples
a service has received, by topic and ``t_ns``; it decides from timestamps alone
whether the step ``t → t + h`` may run, selects that step's inputs as a
:class:`StepInputs` (which implements :class:`protocol.service.Inputs`) and prunes
what no later step can need.

Timing conventions (see :mod:`protocol.service` and :mod:`protocol.coupling`)
------------------------------------------------------------------------------
A producer of period ``h_p`` publishes each output port at the port's *coupling
period* ``H`` (a whole multiple of ``h_p``; ``H = h_p`` is the runtime without coupling),
and every sample says it in ``h_ns``:

- a ``state`` sample stamped ``t_s`` (a coupling instant, ``t_s mod H = 0``) is the
  producer's state at ``t_s``;
- a ``flow`` sample stamped ``T`` holds over ``[T, T + H)``: the mean of the values the
  producer computed for that interval (each value holds over one producer step and was
  computed from the state at that step's start); it is published once the producer has
  computed the interval's last value, i.e. after its step ending ``T + H − h_p``;
- an ``event`` sample stamped ``t_s`` (a coupling instant) carries the events of the
  producer's steps ending in ``(t_s − H, t_s]``.

So a consumer never needs a sample from its producer's future beyond one coupling
interval. A cycle of consumers can still wait on itself when a flow's coupling period is
longer than the state period its producer reads back from the consumer;
:func:`protocol.coupling.check_schedule` finds that before a run starts.

The multi-rate input rule (lockstep)
------------------------------------
For a consumer stepping ``t → t + h`` and an input topic whose producer has period
``h_p`` (announced at start; ``h_ns`` in every sample):

state — hold
    The sample stamped ``t_s = floor(t / H) · H``, i.e. the latest at or before ``t`` (a
    sample with ``t_s <= t < t_s + H``). A faster consumer of a slower state stream holds
    that sample over all its steps inside ``[t_s, t_s + H)``, or *propagates* it itself
    from the sample's rates (e.g. ``p + v·(t − t_s)``; ``t_s`` is in the sample): each
    input port says which (:attr:`protocol.service.Port.between`). A slower consumer of a
    faster state stream sees the sample at its own step start.
flow — exact impulse
    Every sample whose interval ``[t_k, t_k + H)`` overlaps ``[t, t + h)``, each with its
    overlap ``o_k`` [ns], oldest first. The step runs only when these intervals cover
    ``[t, t + h)`` without a gap. The step's time-average is ``mean = Σ_k value_k · o_k / h``
    (summed oldest first, so bit-reproducible): a slower consumer of a faster wrench
    stream receives the impulse of every sample in its step, ``∫ F dt = mean · h``
    exactly; a faster consumer of a slower stream holds the covering sample (one
    sample, ``o = h``), whose value is itself the mean of the producer's values over
    ``[t_k, t_k + H)``. Applying the same values over the same intervals on both sides of
    an equal-and-opposite force pair makes the exchanged impulses cancel, so total
    momentum is conserved to round-off across processes whatever the rates and the
    coupling periods.
event — all of them, once
    Every event sample with ``t - h < t_ns <= t``. The step runs once the consumer
    knows that the topic's producer has passed ``t``: it holds a *progress bound*
    ``b > t``, meaning that every event sample stamped before ``b`` has been received.
    Bounds come from (see :func:`event_progress`):

    - a sample of the event topic itself stamped ``t_s``: ``b = t_s + H`` (the bus keeps
      each topic in order, and the producer stamps nothing in ``(t_s, t_s + H)``);
    - a sample stamped ``t_s`` of a *witness*: a non-event input of the consumer that
      the same producer publishes. A model publishes a step's event samples before its
      other outputs, and the bus keeps order per producer (one PUB per process; ZeroMQ
      keeps order per PUB→SUB pipe across topics), so a witness stamped ``t_s`` follows
      every event stamped up to ``t_s``, and the next event sample is stamped at the
      event port's next coupling instant: ``b = (floor(t_s / H) + 1) · H`` with ``H`` the
      event port's coupling period. A source (replay) publishes in non-decreasing
      ``t_ns`` order, but its ties follow the log and not a producer's step: there
      ``b = t_s`` (everything stamped before ``t_s``).

    A model that has a non-event output publishes an event port only when it carries
    events, provided every stepping consumer of that port has a witness from it;
    otherwise (e.g. a producer of events only: the operator) it publishes every event
    port at every coupling instant, empty or not, and its own samples carry the bound.
    Only sent samples take a ``seq``, so per-topic sequences stay gap-free.

An input topic that no service of the run produces is *absent*: it is not waited for;
``state`` raises ``KeyError``, ``flow``/``events`` return ``[]``, ``mean`` returns 0.

The rule depends on timestamps only, never on arrival order or process layout, so
lockstep results are bit-identical across runs, layouts and transports.

Realtime selection
------------------
In realtime mode a step never waits: state → the latest sample held; events → every
event sample received since the previous step and stamped at or before the step's start,
oldest first (a later-stamped one waits for its instant); flow → the flow one coupling
lag earlier, impulse-exact:

- the step ``[t, t + h)`` applies the flow of ``[t − D, t − D + h)``, with
  ``D = h + H − gcd(h, H)`` (``H`` the flow's coupling period): the shortest lag at which
  that span has been published by the wall instant ``t`` (for ``h`` and ``H`` multiples of
  one another, ``D = max(h, H)``; a span before the first sample — the run's start — has
  no flow);
- a span not (wholly) received yet — the producer late — takes the latest sample held
  over it, and once the span's samples arrive, the next step adds what was missing:
  the true samples with their overlaps and the held one with the opposite (a negative
  overlap). So every consumer applies each produced impulse exactly once, late or not
  (the producer's ``mean · H`` per interval); two consumers of one flow apply the same
  total, and momentum exchanged through a flow is conserved across processes in realtime
  as in lockstep. :meth:`StepInputs.mean` and every impulse sum are linear in the overlaps.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from errors import ConfigError
from protocol.service import Port, Sample

__all__ = ["StepInputs", "InputBuffer", "event_progress"]

Witnesses = dict[str, tuple[tuple[str, ...], bool]]
"""Event input topic -> (its witness topics, whether their bound is strict ``b = t_s``)."""


def event_progress(name: str, services: Mapping[str, Mapping[str, Any]]) -> tuple[frozenset[str], Witnesses]:
    """Which event outputs of ``name`` may go unsent when empty, and its event inputs' witnesses.

    Implements the event part of the input rule (module docstring). Every participant
    computes it from the same announcement, so producer and consumers agree.

    Parameters
    ----------
    name : str
        The service asking.
    services : Mapping[str, Mapping[str, Any]]
        Every participant of the run by name: ``role`` (``"model"``, ``"source"``,
        ``"sink"``), ``inputs`` and ``outputs`` as sequences of ``(topic, kind)``
        (what each service's ``hello`` says).

    Returns
    -------
    sparse : frozenset[str]
        Event outputs of ``name`` to publish only when they carry events: ``name`` is a
        model with a non-event output, and every other model that takes the topic as
        an input also takes a non-event output of ``name`` (its witness).
    witnesses : dict[str, tuple[tuple[str, ...], bool]]
        For each event input of ``name`` whose producer publishes a non-event topic
        that ``name`` takes as an input: those topics, and True if the producer is a
        source (bound ``t_s``) or False for a model (bound ``t_s + h_p``).
    """
    def ports(svc: Mapping[str, Any], key: str) -> list[tuple[str, str]]:
        return [(str(t), str(k)) for t, k in svc.get(key, ())]

    owner = {t: n for n, svc in services.items() for t, _ in ports(svc, "outputs")}
    me = services.get(name, {})

    def witness_topics(consumer: Sequence[tuple[str, str]], producer: str) -> tuple[str, ...]:
        return tuple(t for t, k in consumer if k != "event" and owner.get(t) == producer)

    sparse: set[str] = set()
    mine = ports(me, "outputs")
    if me.get("role") == "model" and any(k != "event" for _, k in mine):
        for topic, kind in mine:
            if kind != "event":
                continue
            consumers = [ports(svc, "inputs") for n, svc in services.items()
                         if n != name and svc.get("role") == "model"
                         and any(t == topic for t, _ in ports(svc, "inputs"))]
            if all(witness_topics(ins, name) for ins in consumers):
                sparse.add(topic)
    witnesses: Witnesses = {}
    inputs = ports(me, "inputs")
    for topic, kind in inputs:
        producer = owner.get(topic)
        if kind != "event" or producer is None or producer == name:
            continue
        found = witness_topics(inputs, producer)
        if found:
            witnesses[topic] = (found, services[producer].get("role") == "source")
    return frozenset(sparse), witnesses


class StepInputs:
    """The inputs of one step ``t → t + h``, as selected by :class:`InputBuffer`.

    Implements :class:`protocol.service.Inputs`.
    """

    __slots__ = ("t_ns", "h_ns", "_state", "_flow", "_events")

    def __init__(self, t_ns: int, h_ns: int, state: dict[str, Sample],
                 flow: dict[str, list[tuple[Sample, int]]], events: dict[str, list[Sample]]) -> None:
        self.t_ns = t_ns
        self.h_ns = h_ns
        self._state = state
        self._flow = flow
        self._events = events

    def state(self, topic: str) -> Sample:
        """The state sample the rule selects; ``KeyError`` naming the topic if none is held."""
        try:
            return self._state[topic]
        except KeyError:
            raise KeyError(f"no state sample of {topic!r} for step t={self.t_ns} ns "
                           f"(absent producer or not an input port)") from None

    def has(self, topic: str) -> bool:
        """Whether a state or flow sample of ``topic`` is held for this step."""
        return topic in self._state or bool(self._flow.get(topic))

    def flow(self, topic: str) -> list[tuple[Sample, int]]:
        """The flow samples overlapping this step, each with its overlap [ns]; oldest first."""
        return self._flow.get(topic, [])

    def mean(self, topic: str, field_name: str) -> Any:
        """Overlap-weighted time-average of ``body[field_name]`` over the step (impulse / h).

        Returns 0.0 if the topic is absent. ``KeyError`` names the field if a sample lacks it.
        """
        parts = self._flow.get(topic)
        if not parts:
            return 0.0
        if len(parts) == 1 and parts[0][1] == self.h_ns:
            return parts[0][0].body[field_name]
        acc: Any = 0.0
        for s, o in parts:
            acc = acc + s.body[field_name] * o
        return acc / self.h_ns

    def events(self, topic: str) -> list[Sample]:
        """The event samples of this step, oldest first."""
        return self._events.get(topic, [])

    def oldest_wall_ns(self) -> int | None:
        """Smallest ``wall_ns`` among the selected state and flow samples (None if none)."""
        out = None
        for s in self._state.values():
            w = s.wall_ns
            if out is None or w < out:
                out = w
        for parts in self._flow.values():
            if parts:
                w = parts[-1][0].wall_ns
                if out is None or w < out:
                    out = w
        return out


_NO_BOUND = -(1 << 62)  # progress bound of an event topic nothing has been heard of yet
_KINDS = ("state", "flow", "event")  # a port's kind, by the index its InputBuffer entry carries
_Entry = tuple[str, str, list[int], list[Sample], int]
"""An input port as :class:`InputBuffer` reads it: topic, kind, times, samples, index of its kind in _KINDS."""
_NO_END = 1 << 62  # progress bound of an event topic whose source has ended


def _flow_parts(times: list[int], samples: list[Sample], t: int, h: int) -> list[tuple[Sample, int]] | None:
    """Samples of a flow topic overlapping ``[t, t + h)`` with their overlaps, or None if they leave a gap."""
    end = t + h
    i = bisect_right(times, t) - 1
    if i < 0:
        return None
    cur = t
    parts: list[tuple[Sample, int]] = []
    n = len(times)
    while i < n and cur < end:
        s = samples[i]
        lo = s.t_ns
        hi = lo + s.h_ns
        if hi > cur:
            if lo > cur:
                return None
            parts.append((s, min(hi, end) - max(lo, t)))
            cur = hi
        i += 1
    return parts if cur >= end else None


class InputBuffer:
    """Samples received by one service, by topic, sorted by ``t_ns``; the lockstep rule.

    Parameters
    ----------
    ports : Iterable[Port]
        The service's input ports.
    producers : Mapping[str, int], optional
        Topic -> producer period [ns] of every topic produced in this run. Input
        topics missing from it are absent (not waited for). ``None`` (default) treats
        every input as present until :meth:`set_producers` says otherwise.
    """

    def __init__(self, ports: Iterable[Port], producers: Mapping[str, int] | None = None) -> None:
        self.ports: tuple[Port, ...] = tuple(ports)
        self._kind: dict[str, str] = {p.topic: p.kind for p in self.ports}
        self._samples: dict[str, list[Sample]] = {p.topic: [] for p in self.ports}
        self._times: dict[str, list[int]] = {p.topic: [] for p in self.ports}
        # per topic, what add needs in one lookup: (times, samples, is an event topic)
        self._slot: dict[str, tuple[list[int], list[Sample], bool]] = {
            t: (self._times[t], self._samples[t], k == "event") for t, k in self._kind.items()}
        # per port, in port order, what the rule reads: (topic, kind, times, samples, the index of its kind in
        # _KINDS); _live: present ports only
        self._all: tuple[_Entry, ...] = tuple(
            (p.topic, p.kind, self._times[p.topic], self._samples[p.topic], _KINDS.index(p.kind)) for p in self.ports)
        self._live = self._all
        self._hi: dict[str, int] = {}            # event topics: progress bound (events before it all held)
        # witness topic -> [(event topic, strict, the event port's coupling period)]
        self._bounds: dict[str, list[tuple[str, bool, int]]] = {}
        self._present: set[str] = set(self._kind)
        self._pending: list[_Entry] = []  # _live entries not ready
        self._picked: dict[str, Any] = {}    # topic -> its selection, computed by ready() for take()
        self._step_t: int | None = None      # the step ready() last looked at (None: none)
        self._step_h: int | None = None
        self._dirty: set[str] = set()        # topics that received samples since the last ready()
        # realtime flows (latest): spans held while their samples are awaited; each flow's first sample time
        self._owed: dict[str, list[tuple[int, int, Sample | None]]] = {}
        self._flow_start: dict[str, int] = {}
        self._period: dict[str, int] = {}  # topic -> its producer's (coupling) period, from set_producers
        if producers is not None:
            self.set_producers(producers)

    # ------------------------------------------------------------ storing
    def set_producers(self, producers: Mapping[str, int], witnesses: Witnesses | None = None) -> None:
        """Declare which input topics have a producer in this run (others are absent).

        ``witnesses`` (from :func:`event_progress`): event input topic -> (witness
        topics, strict). A witness sample stamped ``t_s`` tells that every event of the
        topic stamped before ``t_s`` (strict) or before the event port's next coupling
        instant after ``t_s`` (its period from ``producers``) has been received. The
        witness topics must be state or flow inputs of this buffer.

        Raises
        ------
        ConfigError
            A witness entry names a topic that is not an event input, or a witness that
            is not a state or flow input.
        """
        self._present = {t for t in self._kind if t in producers}
        self._period = {t: int(producers[t]) for t in self._present if int(producers[t]) > 0}
        self._live = tuple(e for e in self._all if e[0] in self._present)
        self._bounds = {}
        for event, (topics, strict) in (witnesses or {}).items():
            if self._kind.get(event) != "event":
                raise ConfigError(f"witnesses: {event!r} is not an event input of this buffer")
            for w in topics:
                if self._kind.get(w) not in ("state", "flow"):
                    raise ConfigError(f"witnesses of {event!r}: {w!r} is not a state or flow input of this buffer")
                self._bounds.setdefault(w, []).append((event, bool(strict), int(producers.get(event, 0)) or 1))
        self._step_t = self._step_h = None

    def end_of_stream(self, topics: Iterable[str]) -> None:
        """A source published everything it has on ``topics``: their event bounds become unbounded
        (a consumer waits for no further event of theirs)."""
        for topic in topics:
            if self._kind.get(topic) == "event":
                self._hi[topic] = _NO_END
                self._dirty.add(topic)

    def absent(self) -> list[str]:
        """Input topics with no producer in this run."""
        return [p.topic for p in self.ports if p.topic not in self._present]

    def add(self, topic: str, sample: Sample) -> bool:
        """Store a sample; False (and nothing stored) if ``topic`` is not an input port, or if a
        sample of the topic with the same ``t_ns`` is held: the first one stays (a later copy,
        genuine or forged, never replaces what a step may already have read).
        """
        slot = self._slot.get(topic)
        if slot is None:
            return False
        times, samples, event = slot
        t = sample.t_ns
        if not times or t > times[-1]:
            times.append(t)
            samples.append(sample)
        else:
            i = bisect_left(times, t)
            if i < len(times) and times[i] == t:
                return False
            times.insert(i, t)
            samples.insert(i, sample)
        if event:
            hi = t + sample.h_ns
            if hi > self._hi.get(topic, _NO_BOUND):
                self._hi[topic] = hi
        elif self._bounds:
            bounds = self._bounds.get(topic)
            if bounds is not None:
                for event_topic, strict, period in bounds:
                    hi = t if strict else (t // period + 1) * period
                    if hi > self._hi.get(event_topic, _NO_BOUND):
                        self._hi[event_topic] = hi
                        self._dirty.add(event_topic)
        self._dirty.add(topic)
        return True

    def count(self, topic: str) -> int:
        """Number of samples of ``topic`` held."""
        return len(self._times.get(topic, ()))

    # ------------------------------------------------------------ lockstep rule
    def _pick(self, entry: _Entry, t: int, h: int) -> Any:
        """What a present port (an entry of ``_live``) gives the step ``t → t + h``, or None if not ready.

        state: the sample with ``t_k <= t < t_k + h_k``; flow: the overlapping samples with their
        overlaps (:func:`_flow_parts`); event: the samples with ``t - h < t_k <= t``.
        """
        topic, kind, times, samples, _ = entry
        if kind == "state":
            i = bisect_right(times, t) - 1
            if i >= 0:
                s = samples[i]
                if t < s.t_ns + s.h_ns:
                    return s
            return None
        if kind == "flow":
            return _flow_parts(times, samples, t, h)
        if self._hi.get(topic, _NO_BOUND) > t:
            return samples[bisect_right(times, t - h):bisect_right(times, t)]
        return None

    def ready(self, t_ns: int, h_ns: int) -> bool:
        """Whether the buffer holds every input the rule needs for the step ``t → t + h``."""
        pick = self._pick
        if t_ns != self._step_t or h_ns != self._step_h:
            self._step_t = t_ns
            self._step_h = h_ns
            picked: dict[str, Any] = {}
            pending = []
            for e in self._live:
                x = pick(e, t_ns, h_ns)
                if x is None:
                    pending.append(e)
                else:
                    picked[e[0]] = x
            self._picked = picked
            self._pending = pending
            self._dirty.clear()
        elif self._dirty:  # re-check only pending topics that received something
            dirty, picked = self._dirty, self._picked
            for topic in dirty:  # a selection made before a topic's new samples is recomputed by take()
                picked.pop(topic, None)
            if self._pending:
                pending = []
                for e in self._pending:
                    x = pick(e, t_ns, h_ns) if e[0] in dirty else None
                    if x is None:
                        pending.append(e)
                    else:
                        picked[e[0]] = x
                self._pending = pending
            dirty.clear()
        return not self._pending

    def take(self, t_ns: int, h_ns: int) -> StepInputs | None:
        """``select(t_ns, h_ns)`` if ``ready(t_ns, h_ns)``, else None; reuses the readiness checks' work.

        The selection is the one :meth:`select` makes at this call (a topic that received
        samples since it was checked is selected again).

        Raises
        ------
        KeyError
            As :meth:`select` (only if a topic found ready became not ready since).
        """
        if t_ns != self._step_t or h_ns != self._step_h:
            return self._take_new(t_ns, h_ns)
        if not self.ready(t_ns, h_ns):
            return None
        picked, self._picked = self._picked, {}  # taken: another take of this step selects afresh
        return self._selection(t_ns, h_ns, picked)

    def _take_new(self, t_ns: int, h_ns: int) -> StepInputs | None:
        """:meth:`take` of a step not looked at before: :meth:`ready`'s first pass, each port's pick
        going straight into the step's selection (and kept for the later checks if some are not ready)."""
        self._step_t = t_ns
        self._step_h = h_ns
        self._dirty.clear()
        pick = self._pick
        state: dict[str, Sample] = {}
        flow: dict[str, list[tuple[Sample, int]]] = {}
        events: dict[str, list[Sample]] = {}
        by_kind: tuple[dict[str, Any], ...] = (state, flow, events)
        pending: list[_Entry] = []
        for e in self._live:
            x = pick(e, t_ns, h_ns)
            if x is None:
                pending.append(e)
            else:
                by_kind[e[4]][e[0]] = x
        self._pending = pending
        if pending:
            self._picked = {**state, **flow, **events}
            return None
        self._picked = {}  # taken: another take of this step selects afresh
        return StepInputs(t_ns, h_ns, state, flow, events)

    def hold(self, t_ns: int, h_ns: int, end_ns: int, u: StepInputs) -> int:
        """How far, up to ``end_ns``, every step of ``h_ns`` from ``t_ns`` sees the inputs ``u`` (this
        buffer's selection for ``t → t + h``) and no event: the latest ``t + k·h <= end_ns`` (``k >= 1``)
        such that, for each of the steps ``t + i·h → t + (i+1)·h`` with ``i < k``, the rule selects the same
        state sample as ``u``, the one flow sample that covers ``u``'s step (a flow of ``u`` in more than one
        part holds for no further step), and no event (no event sample in ``(t − h, t + (k−1)·h]`` but those
        whose ``events`` list is empty, each event topic's progress bound beyond ``t + (k−1)·h``). ``t + h`` if
        ``u``'s own step has an event.

        What a model's stride is bounded by (:meth:`protocol.scheduler.Scheduler.run_lockstep`,
        :class:`protocol.service.StridingModel`).
        """
        end = end_ns
        for topic, kind, times, samples, _ in self._live:
            if kind == "state":
                s = u._state[topic]
                j = bisect_right(times, t_ns)
                until = min(s.t_ns + s.h_ns, times[j]) if j < len(times) else s.t_ns + s.h_ns
                lim = t_ns + (until - t_ns + h_ns - 1) // h_ns * h_ns  # the last step starts before ``until``
            elif kind == "flow":
                parts = u._flow[topic]
                if len(parts) != 1:
                    return t_ns + h_ns
                s = parts[0][0]
                lim = t_ns + (s.t_ns + s.h_ns - t_ns) // h_ns * h_ns  # the sample covers every step
            else:
                i = bisect_right(times, t_ns - h_ns)
                n = len(times)
                while i < n and not samples[i].body.get("events", True):  # a sample carrying no event is none
                    i += 1
                first = times[i] if i < n else _NO_END
                if first <= t_ns:
                    return t_ns + h_ns
                bound = min(first, self._hi.get(topic, _NO_BOUND))  # the last step's window ends before both
                lim = t_ns + (bound + h_ns - 1 - t_ns) // h_ns * h_ns
            if lim < end:
                end = lim
        return max(end, t_ns + h_ns)

    def missing(self, t_ns: int, h_ns: int) -> list[str]:
        """Input topics not yet ready for the step ``t → t + h`` (diagnostics)."""
        return [e[0] for e in self._live if self._pick(e, t_ns, h_ns) is None]

    def select(self, t_ns: int, h_ns: int) -> StepInputs:
        """The inputs of the step ``t → t + h`` by the lockstep rule.

        Raises
        ------
        KeyError
            Naming the first topic that is not ready (call :meth:`ready` first).
        """
        return self._selection(t_ns, h_ns, {})

    def _selection(self, t_ns: int, h_ns: int, picked: Mapping[str, Any]) -> StepInputs:
        """The step's inputs: each present port's selection from ``picked`` (what :meth:`ready`
        found), else made now by :meth:`_pick`; KeyError naming the first port not ready."""
        state: dict[str, Sample] = {}
        flow: dict[str, list[tuple[Sample, int]]] = {}
        events: dict[str, list[Sample]] = {}
        for e in self._live:
            topic, kind = e[0], e[1]
            x = picked.get(topic)
            if x is None:
                x = self._pick(e, t_ns, h_ns)
                if x is None:
                    span = f", h={h_ns} ns" if kind == "flow" else ""
                    raise KeyError(f"input {topic!r} not ready for step t={t_ns} ns{span}")
            if kind == "state":
                state[topic] = x
            elif kind == "flow":
                flow[topic] = x
            else:
                events[topic] = x
        return StepInputs(t_ns, h_ns, state, flow, events)

    def prune(self, t_next_ns: int, h_next_ns: int | None = None) -> None:
        """Drop samples no step starting at or after ``t_next_ns`` can select.

        State keeps the sample covering ``t_next_ns`` and later ones; flow keeps samples
        ending after ``t_next_ns``; events keep those stamped after ``t_next_ns - h_next_ns``
        (the next step's window; ``h_next_ns`` None keeps those after ``t_next_ns``).
        """
        self._picked = {}
        for _, kind, times, samples, _ in self._all:
            if not times:
                continue
            if kind == "state":
                if len(times) == 1:
                    continue  # the one sample held stays (k would be 0 or -1)
                k = bisect_right(times, t_next_ns) - 1
            elif kind == "flow":
                k = bisect_right(times, t_next_ns) - 1
                if k >= 0:
                    s = samples[k]
                    if s.t_ns + s.h_ns <= t_next_ns:
                        k += 1
            else:
                k = bisect_right(times, t_next_ns - (h_next_ns or 0))
            if k > 0:
                del times[:k]
                del samples[:k]

    # ------------------------------------------------------------ realtime selection
    def latest(self, t_ns: int, h_ns: int) -> StepInputs:
        """Realtime inputs (module docstring, realtime selection): the latest state held, the
        events due, each flow one coupling lag earlier with the corrections of earlier steps.

        Events: every event sample received and stamped at or before ``t_ns`` (those stamped
        later — a producer publishes a step's events stamped with the step's end, possibly
        before the wall clock reaches it — wait for their instant). Consumes the events it
        returns; keeps the latest state sample, and the flow samples a span still needs.
        """
        self._picked = {}
        state: dict[str, Sample] = {}
        flow: dict[str, list[tuple[Sample, int]]] = {}
        events: dict[str, list[Sample]] = {}
        for topic, _, times, samples, kind in self._all:
            if kind == 0:  # state
                if samples:
                    if len(samples) > 1:
                        del samples[:-1]
                        del times[:-1]
                    state[topic] = samples[0]
            elif kind == 2:  # event
                if samples:
                    k = bisect_right(times, t_ns)
                    events[topic] = samples[:k]
                    del samples[:k]
                    del times[:k]
                else:
                    events[topic] = []
            else:
                parts = self._realtime_flow(topic, t_ns, h_ns)
                if parts:
                    flow[topic] = parts
        return StepInputs(t_ns, h_ns, state, flow, events)

    _OWED_MAX = 4096
    """Spans of a flow held while their samples are awaited, at most (the oldest are given up beyond)."""

    def _realtime_flow(self, topic: str, t_ns: int, h_ns: int) -> list[tuple[Sample, int]]:
        """A flow's parts for the realtime step ``[t, t + h)`` (module docstring): corrections of the
        spans held earlier whose samples have arrived, then this step's span (exact, or held)."""
        times, samples = self._times[topic], self._samples[topic]
        owed = self._owed.setdefault(topic, [])  # [(span start, span end, the sample held over it or None)]
        parts: list[tuple[Sample, int]] = []
        if owed and samples:
            keep = []
            for a, b, held in owed:
                true = _flow_parts(times, samples, a, b - a)
                if true is None:
                    keep.append((a, b, held))
                    continue
                parts.extend(true)
                if held is not None:
                    parts.append((held, a - b))
            owed[:] = keep
        first = self._flow_start.setdefault(topic, t_ns)  # the run's start: no flow before it
        H = self._period.get(topic) or (samples[-1].h_ns if samples else h_ns)
        lag = h_ns + H - math.gcd(h_ns, H)
        a, b = max(t_ns - lag, first), t_ns - lag + h_ns
        if b > a:
            true = _flow_parts(times, samples, a, b - a) if samples else None
            if true is not None:
                parts.extend(true)
            else:
                held = samples[-1] if samples else None
                if held is not None:
                    parts.append((held, b - a))
                owed.append((a, b, held))
                if len(owed) > self._OWED_MAX:
                    del owed[0]
        if samples:  # keep what an owed span or the next step's span may still read, and the latest
            need = min([o[0] for o in owed] + [t_ns + h_ns - lag])
            k = bisect_right(times, need) - 1
            if k >= 0 and times[k] + samples[k].h_ns <= need:
                k += 1
            k = min(k, len(samples) - 1)
            if k > 0:
                del times[:k]
                del samples[:k]
        return parts
