"""Which samples a run accepts: from the topic's producer, on its coupling grid, in order, reached.

A participant of the bus can publish anything; a sample that is well formed (the codec
checked its envelope, its fields and their finiteness) is not yet a sample of this run.
Every process checks what reaches it from the bus against the run's start message
(:class:`SampleGate`) before it stores, counts or records it:

=========  ==============================================================================
peer       under CurveZMQ with an identity per process (:mod:`protocol.security`), the
           key that the transport authenticated for the frame must be one that speaks
           for ``sender`` (:meth:`SampleGate.impostor`); the envelope's own word is not
           enough
sender     the topic's producer (the service whose output port it is)
h_ns       the port's coupling period ``H`` (``TOPIC/full``: the producer's period ``h``)
t_ns       on the port's grid (``t mod H = 0``), not negative, not after the run's end,
           and after the topic's last accepted sample: a second sample with the same
           ``t_ns`` never replaces the first, a sample from the past never enters
reached    not beyond what the producer can have computed (below): a sample stamped in
           the producer's future can no longer shadow the genuine ones that follow
seq        at most ``t_ns / H`` (one sample per coupling instant from ``t0 = 0``): a
           forged sequence number cannot make a sequence-gap counter report bogus losses
=========  ==============================================================================

What a producer can have reached
--------------------------------
A model publishes every *dense* port at every coupling instant, in order: its state and
flow ports, and the event ports it sends empty too (every event port that is not sparse,
:func:`protocol.stepping.event_progress`); a step that has no body for one of them fails
the run (:meth:`protocol.scheduler.Scheduler.publish`). The bus keeps each producer's
order (one PUB per process, one pipe to each SUB, high-water mark 0: nothing dropped). So
once a dense topic has an accepted sample at ``t``, the producer's next genuine sample of
it is stamped exactly ``t + H``:

- a dense sample stamped later than ``last + H`` is refused (``ahead of the next
  instant``). It can only be forged or come from a broken producer; a genuine one never
  arrives before its predecessor. Holding it for later would not help: when its turn
  came it could not be told from the genuine sample of that instant, which follows its
  predecessor on the producer's own pipe, and which must then win; so it is refused at
  once and counted, and the genuine samples go on being accepted. A forged sample
  stamped exactly ``last + H`` in the producer's name still takes that one instant
  (the first copy of an instant is kept) — beyond what timestamps can see, and what
  per-process keys close (``peer`` above).
- a sample of a *sparse* port of the same producer (an event port sent only when it
  carries events; a ``TOPIC/full`` twin, which skips the steps that build no body) is
  published before the producer's next sample of each of its dense ports, whose
  ``h_ns = H``: a state sample stamped ``t`` follows the step ending ``t``, a flow
  sample stamped ``T`` the step ending ``T + H - h``. So with ``last`` the last accepted
  sample of a dense port of the producer, a sparse sample is stamped at most
  ``last + 2 H``; the least of these bounds over the producer's dense ports that this
  gate has accepted samples of is checked (none yet: not checked).

These two rules hold in lockstep. In realtime the gate only orders (``lockstep=False``): a
link between hosts that drops and is made again loses what its PUB had queued, so a
producer's samples may skip instants there, and a consumer takes the latest it has (it
never waits); a forged future sample there is kept off by per-process keys only.

The first sample of a dense topic may be any instant of its grid (a sink added to a
restored run starts in its middle): a forged sample that reaches a process before the
producer's first one is accepted there, and the topic's genuine samples are then refused
as "not after the last accepted"; the consumer waits, and the run stops after
``sim.stall_timeout`` naming the topic, its producer and that sample
(:mod:`protocol.shell`), instead of waiting forever.

A source (replay) re-publishes a log's messages as they were, with the senders and
periods of the run that wrote it: its topics are checked for time only (not negative,
not after the end, in order). Topics that no port of the run produces (``sim/*``) pass.

The shell drops and counts (``msgs_invalid``) what fails, before its sequence-gap count;
the logger holds its own gate of the same rule, fed the same frames in the same order,
and writes nothing a consumer would reject (a gate that sees more of a producer's dense
ports, as the logger does, may refuse more forged sparse samples, never a genuine one).
Local deliveries inside a process (a group) do not cross the bus and are not checked.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from protocol.coupling import full_rate_topic
from protocol.stepping import event_progress

__all__ = ["SampleGate"]

_NO_END = 2 ** 63 - 1


class SampleGate:
    """The acceptance rule of one run (module docstring), with the last accepted time per topic.

    Parameters
    ----------
    producers : Mapping[str, int]
        Topic -> coupling period ``H`` [ns] of every topic produced in the run (the start
        message's ``producers``).
    services : Mapping[str, Mapping[str, Any]]
        Every participant by name: ``role``, ``period_ns``, ``inputs`` and ``outputs`` as
        sequences of ``(topic, kind)`` (the start message's ``services``).
    t_end_ns : int, optional
        The run's end [ns]; 0 (default): no end.
    full_rate : Iterable[str], optional
        Services that publish every step of their state and flow ports on ``TOPIC/full``.
    speaks_for : Mapping[str, Iterable[str]], optional
        Authenticated peer identity -> the senders it may use (:attr:`protocol.security.Security.identities`);
        empty (default): no identity is known (no keys, or one key shared by every client).
    lockstep : bool, optional
        Whether a sample must also be one its producer can have reached (default; a realtime
        run's gate: False, see the module docstring).

    Notes
    -----
    One gate per receiving stream: it keeps each topic's last accepted ``t_ns``, so the
    shell and a logger beside it hold one each.
    """

    __slots__ = ("rules", "t_end_ns", "last", "dense_of", "speaks_for", "lockstep")

    def __init__(self, producers: Mapping[str, int], services: Mapping[str, Mapping[str, Any]],
                 t_end_ns: int = 0, full_rate: Iterable[str] = (),
                 speaks_for: Mapping[str, Iterable[str]] | None = None, lockstep: bool = True) -> None:
        full = set(full_rate)
        # topic -> (producer's name, period H, dense) for a model's port; (None, 0, False) for a source's
        self.rules: dict[str, tuple[str | None, int, bool]] = {}
        # producer -> its dense topics with their periods (the bound of its sparse samples)
        self.dense_of: dict[str, list[tuple[str, int]]] = {}
        for name, svc in services.items():
            model = svc.get("role", "model") == "model"
            h = int(svc.get("period_ns") or 0)
            sparse = event_progress(name, services)[0] if model else frozenset()
            for topic, kind in svc.get("outputs", ()):
                topic = str(topic)
                H = int(producers.get(topic) or 0)
                if not (model and H > 0):
                    self.rules[topic] = (None, 0, False)
                    continue
                dense = kind != "event" or topic not in sparse
                self.rules[topic] = (name, H, dense)
                if dense:
                    self.dense_of.setdefault(name, []).append((topic, H))
                if name in full and kind != "event" and h > 0:
                    self.rules[full_rate_topic(topic)] = (name, h, False)  # a step may build no body
        self.t_end_ns = int(t_end_ns) or _NO_END
        self.last: dict[str, int] = {}
        self.speaks_for: dict[str, frozenset[str]] = {k: frozenset(v) for k, v in (speaks_for or {}).items()}
        self.lockstep = bool(lockstep)

    def impostor(self, sender: str, peer: str | None) -> str | None:
        """Why a frame whose envelope says ``sender`` is refused from the authenticated ``peer``
        (the transport's identity of its publisher, ZeroMQ's ``User-Id``), or None.

        Only identities of :attr:`speaks_for` are checked: with no keys, or the one client key
        every process shares, the transport names no service and the envelope is all there is.
        """
        allowed = self.speaks_for.get(peer) if peer is not None else None
        if allowed is None or sender in allowed:
            return None
        return f"sender {sender!r} is not spoken for by the authenticated peer {peer!r}"

    def reach(self, producer: str) -> int | None:
        """The latest instant a sparse sample of ``producer`` can be stamped with, from the dense
        samples of it accepted so far (module docstring); None if there are none yet."""
        bound = None
        last = self.last
        for topic, H in self.dense_of.get(producer, ()):
            t = last.get(topic)
            if t is not None and (bound is None or t + 2 * H < bound):
                bound = t + 2 * H
        return bound

    def _unreached(self, owner: str, dense: bool, H: int, last: int, t_ns: int) -> str | None:
        """Why a sample stamped ``t_ns`` is beyond what its producer can have reached, or None (lockstep)."""
        if dense:
            if last >= 0 and t_ns != last + H:
                return (f"t_ns {t_ns} ahead of the next instant {last + H} after the last accepted {last} "
                        "(its producer cannot have reached it)")
        elif (bound := self.reach(owner)) is not None and t_ns > bound:
            return f"t_ns {t_ns} beyond {bound}, the latest its producer can have reached"
        return None

    def reject(self, topic: str, sender: str, seq: int, t_ns: int, h_ns: int) -> str | None:
        """Why a sample of ``topic`` is not accepted (a phrase naming the field), or None.

        An accepted sample becomes the topic's last: a later one must be stamped after it,
        and in lockstep, for a dense topic, exactly one coupling period after it.
        """
        rule = self.rules.get(topic)
        if rule is None:
            return None
        owner, H, dense = rule
        if t_ns < 0 or t_ns > self.t_end_ns:
            return f"t_ns {t_ns} outside the run [0, {self.t_end_ns}]"
        last = self.last.get(topic, -1)
        if t_ns <= last:
            return f"t_ns {t_ns} not after the last accepted {last}"
        if owner is not None:
            if sender != owner:
                return f"sender {sender!r} is not the producer {owner!r}"
            if h_ns != H:
                return f"h_ns {h_ns} is not the coupling period {H}"
            if t_ns % H:
                return f"t_ns {t_ns} not on the coupling grid (period {H})"
            if seq > t_ns // H:
                return f"seq {seq} beyond the {t_ns // H + 1} samples due by t_ns {t_ns}"
            if self.lockstep and (why := self._unreached(owner, dense, H, last, t_ns)) is not None:
                return why
        self.last[topic] = t_ns
        return None
