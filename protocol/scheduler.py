"""The services of one OS process, stepped by one scheduler (process groups, DESIGN §2).

A process runs one or more *members* (:class:`Member`): models, sinks and sources
(:mod:`protocol.service`). One :class:`Scheduler` steps its models directly in timestamp
order — whichever ready model is furthest behind goes next — and hands the samples one
member publishes to the others over memory: no socket, no decode
(:meth:`protocol.codec.TopicCodec.encode_local` gives the consumer's sample together with
the bytes that leave the process). Between processes the bus carries the same bytes, and
a sink in the process (the logger) gets every frame, local or not.

Grouping changes cost, never results: every member publishes through the same
:class:`protocol.coupling.PortCoupler` whatever the layout, and the lockstep rule
(:mod:`protocol.stepping`) depends on timestamps only, so a lockstep run's log is
bit-identical for every grouping (one process per service, a few groups, one process
for everything).

This module is pure: no sockets, no clock. :mod:`protocol.shell` owns those and calls
:meth:`Scheduler.run_lockstep` (or steps members itself in realtime mode) between its
waits on the bus.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable, Mapping, Sequence
from operator import attrgetter
from typing import Any

from errors import LifecycleError
from protocol.codec import TopicCodec, topic_codec
from protocol.coupling import PortCoupler, full_rate_topic
from protocol.messages import SEPARATOR, schema_for
from protocol.provenance import SampleGate
from protocol.service import Port, Sample, new_context, role_of
from protocol.stepping import InputBuffer, event_progress

__all__ = ["Member", "Output", "Scheduler", "advance", "restore", "simulate", "snapshot", "start"]


class Output:
    """One output port of a member, as it is published (see :meth:`Scheduler.configure`)."""

    __slots__ = ("topic", "kind", "prefix", "codec", "coupler", "sparse", "empty", "full_prefix", "local", "seq",
                 "full_seq")

    def __init__(self, port: Port, step_ns: int, coupling_ns: int, sparse: bool, full_rate: bool) -> None:
        schema = schema_for(port.topic)
        self.topic = port.topic
        self.kind = port.kind
        self.prefix = port.topic.encode() + SEPARATOR
        self.codec: TopicCodec = topic_codec(port.topic)
        self.coupler = PortCoupler(port.topic, port.kind, step_ns, coupling_ns, schema)
        self.empty: dict[str, Any] | None = {"events": []} if tuple(schema.fields) == ("events",) else None
        self.sparse = sparse and self.empty is not None
        self.full_prefix = (full_rate_topic(port.topic).encode() + SEPARATOR
                            if full_rate and port.kind != "event" else None)
        self.local: list[Member] = []   # members of this process that take the topic as an input
        self.seq = 0
        self.full_seq = 0

    def __getstate__(self) -> dict[str, Any]:
        """Every slot but the codec, which holds closures (a snapshot rebuilds it from the topic)."""
        return {k: getattr(self, k) for k in self.__slots__ if k != "codec"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        for k, v in state.items():
            setattr(self, k, v)
        self.codec = topic_codec(self.topic)


class Member:
    """One service of a process: what it runs, its input buffer, its outputs and its statistics.

    Parameters
    ----------
    obj : ServiceModel | ContextModel | Sink | Source
        What it runs (:func:`protocol.service.role_of`); its ``name`` is the service's
        control identity and the ``sender`` of its messages.
    ctx : object, optional
        The context a model with one starts from (default: a fresh one, ``obj.new_context()``).

    Attributes
    ----------
    ctx : object or None
        A model's context (:mod:`protocol.service`, "State in a context"), made when the member is; None for
        a model whose attributes are its state, a sink or a source.
    """

    __slots__ = ("obj", "ctx", "role", "name", "period_ns", "inputs", "outputs", "buf", "outs", "t_ns", "state", "done",
                 "stopped", "steps", "overruns", "received", "invalid", "dropped", "jitter", "age", "win", "ctl",
                 "stats_seq", "produced", "grid", "waits")

    def __init__(self, obj: Any, ctx: Any = None) -> None:
        self.obj = obj
        self.role = role_of(obj)
        self.ctx = ctx if ctx is not None else new_context(obj) if self.role == "model" else None
        self.name: str = obj.name
        self.period_ns = int(getattr(obj, "period_ns", 0) or 0)
        self.inputs: tuple[Port, ...] = tuple(getattr(obj, "inputs", ()))
        self.outputs: tuple[Port, ...] = tuple(getattr(obj, "outputs", ()))
        self.produced = frozenset(p.topic for p in self.outputs)
        self.buf = InputBuffer(self.inputs)
        self.outs: tuple[Output, ...] = ()
        self.t_ns = 0
        self.state = "configured"
        self.done = False       # reached the run's end (steppers), or nothing to step (sinks)
        self.stopped = False    # told to stop
        self.steps = 0
        self.overruns = 0
        self.received = 0
        self.invalid = 0
        self.dropped = 0
        self.jitter = array("q")
        self.age = array("q")
        self.win = 0
        self.ctl: Any = None    # its control client (the shell's)
        self.stats_seq = 0
        self.grid: tuple[tuple[int, int], ...] = ()  # a model that strides: where its ports publish (_stride_grid)
        self.waits = _waits_hook(obj)  # a model whose step may wait on a device: whether it would now

    def hello(self, pid: int) -> dict[str, Any]:
        """The control-plane ``hello`` of this service."""
        return {"op": "hello", "name": self.name, "role": self.role, "period_ns": self.period_ns,
                "inputs": [[p.topic, p.kind] for p in self.inputs],
                "outputs": [[p.topic, p.kind] for p in self.outputs], "pid": pid}


class Scheduler:
    """Steps the models of one process in timestamp order; publishes through the coupling rule.

    Parameters
    ----------
    members : sequence of Member
        Every service of the process, in a fixed order (the tie-break among models at the
        same instant, so that a run's order of publication is reproducible).

    Attributes
    ----------
    outbox : list of bytes
        Frames (``topic\\0body``) published since the caller last took them, in order: for the bus.
    sink_frames : list of bytes
        The same frames plus the bus's, for the process's sinks (only kept when it has any).
    """

    def __init__(self, members: Sequence[Member]) -> None:
        self.members = tuple(members)
        names = [m.name for m in self.members]
        if len(set(names)) != len(names):
            raise LifecycleError(f"a process runs each service once, got {names}")
        self.models = tuple(m for m in self.members if m.role == "model")
        self.sinks = tuple(m for m in self.members if m.role == "sink")
        self.sources = tuple(m for m in self.members if m.role == "source")
        self.outbox: list[bytes] = []
        self.sink_frames: list[bytes] = []
        by_topic: dict[str, list[Member]] = {}
        for m in self.models:
            for p in m.inputs:
                by_topic.setdefault(p.topic, []).append(m)
        self._consumers = by_topic  # input topic -> models of this process that take it
        self.local_topics = frozenset(t for m in self.members for t in m.produced)  # topics produced here
        self.current: Member | None = None  # the member being stepped (names the culprit of an exception)
        # the run as configure applied it (producers, services, t_end, full-rate services), for the sinks' gates
        self._run: tuple[dict[str, int], dict[str, dict[str, Any]], int, tuple[str, ...]] | None = None

    # ------------------------------------------------------------------ start
    def configure(self, producers: Mapping[str, int], services: Mapping[str, Mapping[str, Any]],
                  full_rate: Iterable[str] = (), t_end_ns: int = 0) -> None:
        """Apply the start message: every produced topic's coupling period, every participant's ports.

        Sets each member's producers and event witnesses (:func:`protocol.stepping.event_progress`),
        plans its outputs (coupling, sparse event ports, full-rate twins), tells a model that
        has ``set_coupling`` its periods (every step's with ``log_full_rate``) and gives a sink
        that has ``set_gate`` its own :class:`protocol.provenance.SampleGate` of the run
        (``t_end_ns``: the run's end, 0 if open).
        """
        full = set(full_rate)
        self._run = (dict(producers), {n: dict(v) for n, v in services.items()}, int(t_end_ns), tuple(full))
        self.gate_sinks(self.sinks)
        by_topic = self._consumers
        for m in self.members:
            sparse, witnesses = event_progress(m.name, services)
            m.buf.set_producers(producers, witnesses)
            h = m.period_ns or 1
            outs = []
            for events_first in (True, False):  # event ports first: a later output of a step witnesses them
                for p in m.outputs:
                    if (p.kind == "event") == events_first:
                        out = Output(p, h, int(producers.get(p.topic) or h), p.topic in sparse,
                                     m.role == "model" and m.name in full)
                        out.local = [c for c in by_topic.get(p.topic, ()) if c is not m]
                        outs.append(out)
            m.outs = tuple(outs)
            m.grid = _stride_grid(m)
            setter = getattr(m.obj, "set_coupling", None)
            if m.role == "model" and callable(setter):
                setter({o.topic: (h if m.name in full else o.coupler.H) for o in outs})

    def replace_model(self, name: str, obj: Any) -> Any:
        """Put ``obj`` in the place of model ``name`` (a model of the same ports, e.g. built afresh from a changed
        configuration), told its coupling periods as :meth:`configure` told the one it replaces; the replaced
        model. The member's context stays (:mod:`protocol.service`): the new model takes up the run where the
        old one was, with its own parameters.

        Raises
        ------
        LifecycleError
            If ``name`` is not a model of this process, or ``obj`` has other ports or another period.
        """
        m = next((x for x in self.models if x.name == name), None)
        if m is None:
            raise LifecycleError(f"replace_model: no model {name!r} in this process")
        if (tuple(getattr(obj, "inputs", ())), tuple(getattr(obj, "outputs", ())),
                int(getattr(obj, "period_ns", 0) or 0)) != (m.inputs, m.outputs, m.period_ns):
            raise LifecycleError(f"replace_model: {name!r}: the new model's ports or period differ from the running "
                                 "one's")
        if (m.ctx is None) != (not callable(getattr(obj, "new_context", None))):
            raise LifecycleError(f"replace_model: {name!r}: one of the two models has a context and the other "
                                 "does not")
        full = set(self._run[3]) if self._run is not None else set()
        setter = getattr(obj, "set_coupling", None)
        if callable(setter):
            setter({o.topic: (m.period_ns if name in full else o.coupler.H) for o in m.outs})
        old, m.obj = m.obj, obj
        m.grid = _stride_grid(m)
        m.waits = _waits_hook(obj)
        return old

    def gate_sinks(self, sinks: Iterable[Member]) -> None:
        """Give each sink that has ``set_gate`` a fresh :class:`protocol.provenance.SampleGate`
        of the run :meth:`configure` applied (nothing before it)."""
        run = self._run
        if run is None:
            return
        for m in sinks:
            setter = getattr(m.obj, "set_gate", None)
            if callable(setter):
                setter(SampleGate(*run))

    def consumers(self, topic: str) -> list[Member]:
        """Members of this process that take ``topic`` as an input."""
        return self._consumers.get(topic, [])

    # ------------------------------------------------------------------ publishing
    def publish(self, m: Member, outs: Mapping[str, Any], t_ns: int, wall_ns: int, initial: bool = False) -> None:
        """Publish what ``initial`` (at ``t_ns``) or the step ending ``t_ns`` of ``m`` returned.

        Each port goes through its coupler; each sample is encoded once: its frame goes to
        :attr:`outbox` (and :attr:`sink_frames` if the process has sinks) and, for members of
        this process that take the topic, its sample into their input buffers.

        Raises
        ------
        LifecycleError
            An output topic that is not a declared port, or a state (or non-sparse event
            port with a non-``events`` schema) with no body when one is due.
        MessageError
            A body that does not fit its schema (a non-finite value, a missing field).
        """
        if len(outs) != len(m.outs) and any(k not in m.produced for k in outs):
            bad = [k for k in outs if k not in m.produced]
            raise LifecycleError(f"{m.name}: output topic {bad[0]!r} is not a declared output port")
        name = m.name
        outbox = self.outbox
        sinks = self.sink_frames if self.sinks else None
        get = outs.get
        for o in m.outs:
            fields = get(o.topic)
            coupler = o.coupler
            if o.full_prefix is not None and fields is not None:
                frame = o.full_prefix + o.codec.encode(coupler.full(fields), name, o.full_seq, t_ns, m.period_ns,
                                                       wall_ns)
                o.full_seq += 1
                outbox.append(frame)
                if sinks is not None:
                    sinks.append(frame)
            for ts, hs, body in (coupler.initial(t_ns, fields) if initial else coupler.step(t_ns, fields)):
                if body is None or (o.empty is not None and not body.get("events", True)):
                    if o.sparse:
                        continue
                    if body is None:
                        body = o.empty
                        if body is None:
                            raise LifecycleError(f"{name}: step returned no body for output {o.topic!r} at t={ts} ns")
                if o.local:
                    payload, sample = o.codec.encode_local(body, name, o.seq, ts, hs, wall_ns)
                    for c in o.local:
                        c.buf.add(o.topic, sample)
                        c.received += 1
                else:
                    payload = o.codec.encode(body, name, o.seq, ts, hs, wall_ns)
                o.seq += 1
                frame = o.prefix + payload
                outbox.append(frame)
                if sinks is not None:
                    sinks.append(frame)

    def publish_frame(self, m: Member, topic: str, payload: bytes, decode: Callable[[str, bytes], Sample]) -> None:
        """A source's already-encoded message: onto the bus, to the sinks, and decoded to the members here
        that take its topic (a source in a group is rare: it is decoded once, for all of them)."""
        frame = topic.encode() + SEPARATOR + payload
        self.outbox.append(frame)
        if self.sinks:
            self.sink_frames.append(frame)
        local = self._consumers.get(topic)
        if local:
            s = decode(topic, payload)
            for c in local:
                c.buf.add(topic, s)
                c.received += 1

    def deliver(self, topic: str, sample: Sample) -> None:
        """A sample from another process, to every member here that takes ``topic``."""
        for c in self._consumers.get(topic, ()):
            c.buf.add(topic, sample)
            c.received += 1

    # ------------------------------------------------------------------ lockstep
    def initial(self, t0_ns: int, wall_ns: int) -> None:
        """Every model's ``initial`` outputs at ``t0_ns`` (each model's time set to ``t0_ns``)."""
        for m in self.models:
            m.t_ns = t0_ns
            self.current = m
            outs = m.obj.initial(t0_ns) if m.ctx is None else m.obj.initial(t0_ns, m.ctx)
            self.publish(m, outs, t0_ns, wall_ns, initial=True)
        self.current = None

    def run_lockstep(self, t_end_ns: int, wall_ns: Callable[[], int],
                     may_step: Callable[[Member], bool] | None = None, limit: int = 1 << 30) -> int:
        """Step every model that is ready, in timestamp order, until none is (or ``limit`` steps).

        Whichever ready model is furthest behind steps next (ties in any order: the input rule makes
        the results the same); its outputs reach the others here at once. A model whose step would now
        wait on a device (``waits_on_device()``: a rig's reply still on its way) lets the ready models
        that are behind its next step's end step first, and steps when none is: the device works
        meanwhile, and the order changes no result. A model at ``t_end_ns`` is done (``t_end_ns`` 0: no
        end).

        Parameters
        ----------
        t_end_ns : int
        wall_ns : callable
            The wall clock for the ``wall_ns`` field of published messages.
        may_step : callable, optional
            Pacing: False holds a model back (its wall instant has not come).
        limit : int
            At most this many steps in this call.

        Returns
        -------
        int
            Steps made.
        """
        models = [m for m in self.models if not m.done]
        publish = self.publish
        n = 0
        while models and n < limit:
            if len(models) > 1:
                models.sort(key=_by_time)  # nearly sorted already, so cheap; ties in any order (same results)
            m = u = held = None
            until = 0
            for c in models:
                if may_step is not None and not may_step(c):
                    continue
                if held is not None and c.t_ns >= until:
                    break  # not so far ahead that the device's model falls behind the others
                if c.waits is not None and held is None and c.waits():
                    held = c  # its step would wait on a device: a ready model behind its next step's end first
                    until = c.t_ns + c.period_ns
                    continue
                u = c.buf.take(c.t_ns, c.period_ns)
                if u is not None:
                    m = c
                    break
            if m is None:  # none is ready (before the end of the next step of a model waiting on its device)
                if held is None or (u := held.buf.take(held.t_ns, held.period_ns)) is None:
                    break
                m = held
            t, h = m.t_ns, m.period_ns
            self.current = m
            if m.grid and may_step is None and (k := m.obj.stride(t, h, m.ctx, u)) > 1:
                end = self._stride_end(m, t, h, t + k * h, t_end_ns, u)
                if end > t + h:
                    outs = m.obj.step(t, end - t, m.ctx, u)
                    self._hold_outputs(m, outs, t + h, end, h)
                    m.steps += (end - t) // h - 1
                    t = end - h  # the stride's last period is published below, as a step's
                else:
                    outs = m.obj.step(t, h, m.ctx, u)
            else:
                outs = m.obj.step(t, h, u) if m.ctx is None else m.obj.step(t, h, m.ctx, u)
            t += h
            m.t_ns = t
            publish(m, outs, t, wall_ns())
            self.current = None
            m.buf.prune(t, h)
            m.steps += 1
            n += 1
            if t_end_ns and t >= t_end_ns:
                m.done = True
                models.remove(m)
        return n

    @staticmethod
    def _stride_end(m: Member, t: int, h: int, end: int, t_end_ns: int, u: Any) -> int:
        """Where a stride of ``m`` from ``t`` asked to reach ``end`` may end: at the run's end, at the next step
        whose end one of its ports publishes at (:func:`_stride_grid`), and where its inputs stop holding
        (:meth:`protocol.stepping.InputBuffer.hold`)."""
        if t_end_ns and t_end_ns < end:
            end = t_end_ns
        for H, off in m.grid:
            nxt = (t - off) // H * H + H + off  # the next end of a step whose port publishes
            if nxt < end:
                end = nxt
        return m.buf.hold(t, h, end, u) if end > t + h else end

    @staticmethod
    def _hold_outputs(m: Member, outs: Mapping[str, Any], t_ns: int, end_ns: int, h: int) -> None:
        """The couplers of ``m``'s ports take ``outs`` as the bodies of its steps ending ``t_ns``, ``t_ns + h``,
        … before ``end_ns`` (none of them a coupling instant: nothing is published)."""
        get = outs.get
        for o in m.outs:
            body = get(o.topic)
            step = o.coupler.step
            for tj in range(t_ns, end_ns, h):
                if step(tj, body):
                    raise LifecycleError(f"{m.name}: a stride published {o.topic!r} at t={tj} ns, inside it")


_by_time = attrgetter("t_ns")  # a member's sort key: its time


def _waits_hook(obj: Any) -> Callable[[], bool] | None:
    """``obj.waits_on_device`` if the model declares it (:mod:`protocol.service`, "A step that waits on a
    device"), else None."""
    hook = getattr(obj, "waits_on_device", None)
    return hook if callable(hook) else None


def _stride_grid(m: Member) -> tuple[tuple[int, int], ...]:
    """Where ``m``'s output ports publish, if it may stride (a model with a context whose class declares ``stride``,
    every output port coupled over more than one step, none at full rate), else ``()`` (:mod:`protocol.service`,
    "Strides"): per coupling period ``H``, the offset of the ends of the steps that publish (``t mod H``): 0 for a
    state or event port, ``H − h`` for a flow, whose interval's mean goes out after the step that computes its last
    value (:mod:`protocol.coupling`). The class, not the object: a wrapper that times each step (the realtime
    calibration's) passes attributes through, and must step the model period by period."""
    if m.ctx is None or not callable(getattr(type(m.obj), "stride", None)) or not m.outs:
        return ()
    if any(o.coupler.n < 2 or o.full_prefix is not None for o in m.outs):
        return ()
    return tuple(sorted({(o.coupler.H, o.coupler.H - o.coupler.h if o.kind == "flow" else 0) for o in m.outs}))


def ports_of(members: Iterable[Member]) -> dict[str, dict[str, Any]]:
    """Every member's role, period and ports as its ``hello`` says them (the start message's ``services``)."""
    return {m.name: {"role": m.role, "period_ns": m.period_ns, "inputs": [[p.topic, p.kind] for p in m.inputs],
                     "outputs": [[p.topic, p.kind] for p in m.outputs]} for m in members}


def simulate(models: Sequence[Any], t_end_ns: int, *, coupling: Mapping[str, Mapping[str, int]] | None = None,
             t0_ns: int = 0, full_rate: Iterable[str] = (),
             on_frame: Callable[[bytes], None] | None = None) -> Scheduler:
    """Run ``models`` in lockstep from ``t0_ns`` to ``t_end_ns`` in this thread, with no bus and no clock.

    The same scheduler, coupling rule and input rule as a run of ``launch.py`` with every
    service in one process, so the models compute what they compute there (the wall-clock
    field of every message is 0). For tests, analyses and many runs in one process.
    ``simulate`` is :func:`start` then :func:`advance`; a run can stop at an instant, be
    saved (:func:`snapshot`), restored elsewhere (:func:`restore`) and go on from it.

    Parameters
    ----------
    models : sequence
        :class:`protocol.service.ServiceModel` objects (and sinks, which get every frame).
    t_end_ns : int
        End of the run; ``t_end_ns - t0_ns`` must be a whole number of every period and
        coupling period. [ns]
    coupling : Mapping[str, Mapping[str, int]], optional
        Per service, coupling periods [ns] by output topic or ``"*"``
        (:func:`protocol.coupling.coupling_periods`); default: from the consumers' periods.
    t0_ns : int
    full_rate : iterable of str
        Services with ``log_full_rate``.
    on_frame : callable, optional
        Sees every published frame (``topic\\0body``), in publication order.

    Returns
    -------
    Scheduler
        After the run (its members hold the final statistics).

    Raises
    ------
    LifecycleError
        If no model can step before the end (the coupling periods make a cycle wait on itself).
    """
    return advance(start(models, coupling=coupling, t0_ns=t0_ns, full_rate=full_rate), t_end_ns, on_frame)


def start(models: Sequence[Any], *, coupling: Mapping[str, Mapping[str, int]] | None = None, t0_ns: int = 0,
          full_rate: Iterable[str] = (), contexts: Mapping[str, Any] | None = None) -> Scheduler:
    """A lockstep run of ``models`` at ``t0_ns``, its initial outputs published (not yet handed to anyone).

    The parameters are :func:`simulate`'s; :func:`advance` runs it on and hands the frames over.
    ``contexts`` gives models with a context the one to start from, by service name (default: fresh ones).
    """
    from protocol.coupling import coupling_periods

    given = contexts or {}
    members = [Member(m, given.get(m.name)) for m in models]
    sched = Scheduler(members)
    services = ports_of(members)
    sched.configure(coupling_periods(services, coupling or {}), services, full_rate)
    sched.initial(t0_ns, 0)
    return sched


def advance(sched: Scheduler, t_end_ns: int, on_frame: Callable[[bytes], None] | None = None) -> Scheduler:
    """Step every model of ``sched`` to ``t_end_ns`` (lockstep, this thread, no clock).

    Frames published since the last call (the initial outputs after :func:`start`) and on
    the way go to ``on_frame`` and to the scheduler's sinks, in publication order. Stopping
    at an instant and going on from it changes nothing a model computes: the input rule
    depends on timestamps only (:mod:`protocol.stepping`); only the interleaving of
    different topics' frames may differ from an uninterrupted run's.

    Returns
    -------
    Scheduler
        ``sched``, every model at ``t_end_ns``.

    Raises
    ------
    LifecycleError
        If no model can step before the end (the coupling periods make a cycle wait on itself).
    """
    def flush() -> None:
        frames = sched.outbox
        if frames:
            if on_frame is not None:
                for f in frames:
                    on_frame(f)
            sched.outbox = []
        if sched.sinks and sched.sink_frames:
            batch, sched.sink_frames = sched.sink_frames, []
            for s in sched.sinks:
                on_frames = getattr(s.obj, "on_frames", None)
                if on_frames is not None:
                    on_frames(batch)
                else:
                    for f in batch:
                        i = f.find(SEPARATOR)
                        s.obj.on_message(f[:i].decode(), f[i + 1:])

    for m in sched.models:
        m.done = m.t_ns >= t_end_ns
    zero = _zero_wall
    flush()
    while not all(m.done for m in sched.models):
        n = sched.run_lockstep(t_end_ns, zero)
        flush()
        if n == 0 and not all(m.done for m in sched.models):
            waiting = {m.name: (m.t_ns, m.buf.missing(m.t_ns, m.period_ns)) for m in sched.models if not m.done}
            raise LifecycleError(f"lockstep cannot go on: each model waits for an input no other can give yet "
                                 f"(t [ns] and missing inputs: {waiting})")
    return sched


def snapshot(sched: Scheduler) -> bytes:
    """The whole state of a lockstep run at one instant, as bytes (pickle): every model's context (a
    model without one: its attributes), its input buffer, its outputs' couplers and sequence numbers,
    with the models (their parameters) to go on with; not the sinks (they only record).

    :func:`restore` gives a scheduler that goes on from the instant bit-identically to the run
    it was taken from (in another process too, with the same code). Anything a context or a
    model holds must pickle (no open files, sockets or threads).

    Raises
    ------
    LifecycleError
        If the models are not all at one instant, that instant is not a coupling instant of
        every output port (a flow's interval would be cut), frames are still waiting in the
        outbox, or the run has a source (replay).
    """
    models = sched.models
    if sched.sources:
        raise LifecycleError(f"snapshot: a run with a source ({sched.sources[0].name}) cannot be saved")
    times = {m.name: m.t_ns for m in models}
    if len(set(times.values())) != 1:
        raise LifecycleError(f"snapshot: the models are not at one instant (t [ns]: {times})")
    t = next(iter(times.values()))
    for m in models:
        for o in m.outs:
            if t % o.coupler.H:
                raise LifecycleError(f"snapshot: t = {t} ns is not a coupling instant of {m.name}'s "
                                     f"{o.topic} (every {o.coupler.H} ns)")
    if sched.outbox or sched.sink_frames:
        raise LifecycleError("snapshot: frames not yet handed over (advance the run first)")
    import copy
    import pickle

    bare = copy.copy(sched)
    bare.members = tuple(m for m in sched.members if m.role == "model")
    bare.sinks = ()
    bare.current = None
    return pickle.dumps(bare, protocol=pickle.HIGHEST_PROTOCOL)


def restore(blob: bytes, sinks: Sequence[Any] = ()) -> Scheduler:
    """The run saved by :func:`snapshot`, with ``sinks`` (e.g. a logger) to get its frames from now on.

    Run it on with :func:`advance`.
    """
    import pickle

    sched: Scheduler = pickle.loads(blob)
    if not isinstance(sched, Scheduler):
        raise LifecycleError(f"restore: not a snapshot of a run (a {type(sched).__name__})")
    if sinks:
        added = [Member(s) for s in sinks]
        if any(m.role != "sink" for m in added):
            raise LifecycleError("restore: only sinks can be added to a saved run")
        sched.members = sched.members + tuple(added)
        sched.sinks = tuple(added)
        sched.gate_sinks(added)
        for m in added:
            m.done = True
    return sched


def _zero_wall() -> int:
    return 0
