"""Which samples a run accepts: from the topic's producer, on its coupling grid, in order.

A participant of the bus can publish anything; a sample that is well formed (the codec
checked its envelope, its fields and their finiteness) is not yet a sample of this run.
Every process checks what reaches it from the bus against the run's start message
(:class:`SampleGate`) before it stores, counts or records it:

=========  ==============================================================================
sender     the topic's producer (the service whose output port it is)
h_ns       the port's coupling period ``H`` (``TOPIC/full``: the producer's period ``h``)
t_ns       on the port's grid (``t mod H = 0``), not negative, not after the run's end,
           and after the topic's last accepted sample: a second sample with the same
           ``t_ns`` never replaces the first, a sample from the past never enters
seq        at most ``t_ns / H`` (one sample per coupling instant from ``t0 = 0``): a
           forged sequence number cannot make a sequence-gap counter report bogus losses
=========  ==============================================================================

A source (replay) re-publishes a log's messages as they were, with the senders and
periods of the run that wrote it: its topics are checked for time only (not negative,
not after the end, in order). Topics that no port of the run produces (``sim/*``) pass.

The shell drops and counts (``msgs_invalid``) what fails, before its sequence-gap count;
the logger does the same and writes nothing a consumer would reject. Local deliveries
inside a process (a group) do not cross the bus and are not checked.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from protocol.coupling import full_rate_topic

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
        Every participant by name: ``role``, ``period_ns`` and ``outputs`` as sequences of
        ``(topic, kind)`` (the start message's ``services``).
    t_end_ns : int, optional
        The run's end [ns]; 0 (default): no end.
    full_rate : Iterable[str], optional
        Services that publish every step of their state and flow ports on ``TOPIC/full``.

    Notes
    -----
    One gate per receiving stream: it keeps each topic's last accepted ``t_ns``, so the
    shell and a logger beside it hold one each.
    """

    __slots__ = ("rules", "t_end_ns", "last")

    def __init__(self, producers: Mapping[str, int], services: Mapping[str, Mapping[str, Any]],
                 t_end_ns: int = 0, full_rate: Iterable[str] = ()) -> None:
        full = set(full_rate)
        # topic -> (producer's name, period H) for a model's port; (None, 0) for a source's
        self.rules: dict[str, tuple[str | None, int]] = {}
        for name, svc in services.items():
            model = svc.get("role", "model") == "model"
            h = int(svc.get("period_ns") or 0)
            for topic, kind in svc.get("outputs", ()):
                topic = str(topic)
                H = int(producers.get(topic) or 0)
                self.rules[topic] = (name, H) if model and H > 0 else (None, 0)
                if model and name in full and kind != "event" and h > 0:
                    self.rules[full_rate_topic(topic)] = (name, h)
        self.t_end_ns = int(t_end_ns) or _NO_END
        self.last: dict[str, int] = {}

    def reject(self, topic: str, sender: str, seq: int, t_ns: int, h_ns: int) -> str | None:
        """Why a sample of ``topic`` is not accepted (a phrase naming the field), or None.

        An accepted sample becomes the topic's last: a later one must be stamped after it.
        """
        rule = self.rules.get(topic)
        if rule is None:
            return None
        owner, H = rule
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
        self.last[topic] = t_ns
        return None
