"""Coupling steps: when a service publishes each output port, and what the sample holds.

A service *integrates* at its period ``h`` (``rate_hz``) and *publishes* each output
port at the port's *coupling period* ``H = n·h`` (``n ≥ 1``), the communication step of
FMI and DCP. ``H`` is chosen from what the consumers' physics needs, not from the
producer's step (``coupling_hz`` in ``[services.NAME]``; defaults below).

The rule (the same in every layout: a service's own process, a process group, one
process for everything — :class:`PortCoupler` is the one implementation)
---------------------------------------------------------------------------
Coupling instants are the multiples of ``H`` (absolute simulation time, so every
consumer finds them on the same grid); a run starts on every port's grid.

state — the value at the coupling instant
    Published at ``t0`` and at every coupling instant ``t`` (``t mod H = 0``): the body
    the model returned for the step ending at ``t``, stamped ``t`` with ``h_ns = H``.
    A consumer holds it over ``[t, t + H)`` (:mod:`protocol.stepping`, state rule), or
    propagates it from its rates: each input port declares which
    (:attr:`protocol.service.Port.between`).
flow — the mean over the coupling interval
    A model's flow value returned at the end of a step ending ``t_e`` (or by
    ``initial`` at ``t0``) holds over ``[t_e, t_e + h)``. The values of the interval
    ``[T, T + H)`` (computed at ``T, T + h, …, T + H − h``) are averaged, oldest first, and
    published once the last one is known — after the step ending ``T + H − h`` — stamped
    ``T`` with ``h_ns = H``. So the consumer's impulse over the interval, ``mean · H``,
    is exactly the sum of the producer's ``value · h``: the producer applies the
    opposite of each value to its own body over its own step, and momentum is conserved
    to round-off across processes whatever the coupling. Per field: ``f8`` → the mean;
    a wrench about a moving point (:attr:`protocol.messages.TopicSchema.wrenches`, e.g.
    ``F_Lo_W`` about ``p_WoLo_W``) is referred to Wo step by step, averaged, and
    referred back to the point of the interval's last value, which the sample carries
    (the angular impulse about Wo is then exact too); ``bool`` → any; other fields → the
    last value.
event — every event of the interval, once
    The events of the steps ending in ``(t − H, t]`` (each carries its own time in its
    fields) are published together at the coupling instant ``t``, stamped ``t`` with
    ``h_ns = H``; so a consumer's progress bound from a witness stamped ``t_s`` is the
    port's next coupling instant after ``t_s`` (:mod:`protocol.stepping`). An empty
    list is sent, or not at all when every consumer has a witness (sparse ports).
    Coupled event ports carry only ``events``.

With ``H = h`` the model's body is published as it is (no arithmetic): that is the
runtime without coupling, bit for bit.

Peaks — nothing the report or a summary shows loses resolution
    Fields a schema derives (:attr:`protocol.messages.TopicSchema.derived`) are filled
    in here from every step of the interval, not by the model: ``"abs_max"`` is the
    element-wise largest magnitude of a field over the interval's steps, ``"wrench_max"``
    ``[max ‖τ‖, max ‖f‖]`` of a ``[τ; f]`` field. A state sample's interval is the steps
    ending in ``(t − H, t]``; a flow sample's the values of ``[T, T + H)``.

A model may skip building a state body at a step that is not a coupling instant (it
knows its periods from ``set_coupling``, see :func:`is_due`); if that port has derived
fields it must then still return the fields they are derived from (a partial body),
or the step is missing from the peak.

Default coupling period
-----------------------
For a port without an explicit ``coupling_hz``: the shortest period among the stepping
consumers of the topic (the models that take it as an input), rounded down to a whole
multiple of the producer's period, and at least that period: a state consumer reads one
sample per step and a flow consumer the mean over its step, so publishing faster than
the fastest consumer steps only costs. A port no model consumes (only the logger) is
published every step. (:func:`coupling_periods`.)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from math import sqrt
from typing import Any

import numpy as np

from errors import ConfigError
from protocol.messages import FULL_RATE_SUFFIX, TopicSchema, schema_for

__all__ = ["PortCoupler", "Schedule", "complete", "coupling_periods", "is_due", "DERIVED_KINDS", "full_rate_topic",
           "FULL_RATE_SUFFIX"]

DERIVED_KINDS = ("abs_max", "wrench_max")
"""How a derived (peak) field is computed from its source field over a coupling interval."""



def full_rate_topic(topic: str) -> str:
    """The topic a port's every-step samples go to with ``log_full_rate = true`` (``topic + "/full"``):
    the model's body of every integration step, stamped with its step (``h_ns = h``), for the
    logger and for debugging; no model consumes it."""
    return topic + FULL_RATE_SUFFIX


def complete(topic: str, body: Mapping[str, Any]) -> Mapping[str, Any]:
    """One step's body of ``topic`` with its derived (peak) fields filled in from that body alone,
    as a coupling period of one step publishes it (for encoding a model's output directly)."""
    schema = schema_for(topic)
    if not schema.derived:
        return body
    return PortCoupler(topic, schema.kind, 1, 1, schema).full(body)


def is_due(t_ns: int, coupling_ns: int) -> bool:
    """Whether ``t_ns`` is a coupling instant of a port of period ``coupling_ns`` (``t mod H = 0``)."""
    return t_ns % coupling_ns == 0


class Schedule:
    """A model's view of its output ports' coupling periods, as ``set_coupling`` gives them.

    A model keeps one (``schedule = Schedule()`` until the shell calls ``set_coupling``) to
    skip building a state body that will not be published: :meth:`due` is True at every
    step for a port it was not told about, so a model run without a shell publishes every
    step, as before.
    """

    __slots__ = ("periods",)

    def __init__(self, periods: Mapping[str, int] | None = None) -> None:
        self.periods = dict(periods or {})

    def due(self, topic: str, t_ns: int) -> bool:
        """Whether ``topic`` is published at ``t_ns`` (a coupling instant of the port)."""
        H = self.periods.get(topic)
        return H is None or t_ns % H == 0


def coupling_periods(services: Mapping[str, Mapping[str, Any]],
                     explicit: Mapping[str, Mapping[str, int]] | None = None) -> dict[str, int]:
    """The coupling period of every state and flow output of a run (module docstring).

    Parameters
    ----------
    services : Mapping[str, Mapping[str, Any]]
        Every participant by name, as its ``hello`` says: ``role`` (``"model"``,
        ``"source"``, ``"sink"``), ``period_ns`` and ``inputs``/``outputs`` as sequences
        of ``(topic, kind)``.
    explicit : Mapping[str, Mapping[str, int]], optional
        Per service, configured periods [ns]: by output topic, or ``"*"`` for every
        state and flow output of the service.

    Returns
    -------
    dict[str, int]
        Output topic -> coupling period [ns].

    Raises
    ------
    ConfigError
        If an explicit period is not a whole multiple (≥ 1) of its service's period, or
        names a topic that is not a state or flow output of that service.
    """
    explicit = explicit or {}
    consumers: dict[str, list[int]] = {}
    for svc in services.values():
        if svc.get("role") == "model":
            for topic, _kind in svc.get("inputs", ()):
                consumers.setdefault(str(topic), []).append(int(svc.get("period_ns") or 0))
    out: dict[str, int] = {}
    problems: list[str] = []
    for name, svc in services.items():
        h = int(svc.get("period_ns") or 0)
        given = dict(explicit.get(name, {}))
        mine = {str(t) for t, _ in svc.get("outputs", ())}
        for topic in given:
            if topic != "*" and topic not in mine:
                problems.append(f"services.{name}.coupling_hz: {topic!r} is not an output of "
                                f"{name!r} (its outputs: {', '.join(sorted(mine)) or 'none'})")
        for topic, _kind in svc.get("outputs", ()):
            topic = str(topic)
            if h <= 0 or svc.get("role") != "model":
                out[topic] = h
                continue
            H = given.get(topic, given.get("*"))
            if H is not None:
                if H < h or H % h:
                    problems.append(f"services.{name}.coupling_hz: {topic!r} at period {H} ns is not a whole "
                                    f"multiple of the service's period {h} ns")
                    H = h
                out[topic] = int(H)
                continue
            periods = [p for p in consumers.get(topic, ()) if p > 0]
            out[topic] = max(h, (min(periods) // h) * h) if periods else h
    if problems:
        raise ConfigError("; ".join(problems), problems)
    return out


# The flow mean's wrench transports, on floats. protocol imports nothing of dynamics (its layering): these
# are the twins of dynamics.spatial.refer_wrench_rows and shift_wrench_rows, which the tests hold equal to
# the bit (tests/protocol/test_coupling_kernels.py).
def _refer_wrench_rows(F_A: Sequence[float], p_BoAo: Sequence[float]) -> list[float]:
    """``[τ + p_BoAo × f; f]``: the wrench [τ; f] about Ao referred to Bo, Ao given from Bo."""
    t0, t1, t2, f0, f1, f2 = F_A
    p0, p1, p2 = p_BoAo
    return [t0 + (p1 * f2 - p2 * f1), t1 + (p2 * f0 - p0 * f2), t2 + (p0 * f1 - p1 * f0), f0, f1, f2]


def _shift_wrench_rows(F_A: Sequence[float], p_AoBo: Sequence[float]) -> list[float]:
    """``[τ − p_AoBo × f; f]``: the wrench [τ; f] about Ao referred to Bo, Bo given from Ao."""
    t0, t1, t2, f0, f1, f2 = F_A
    p0, p1, p2 = p_AoBo
    return [t0 - (p1 * f2 - p2 * f1), t1 - (p2 * f0 - p0 * f2), t2 - (p0 * f1 - p1 * f0), f0, f1, f2]


class PortCoupler:
    """One output port's coupling (module docstring): what to publish after ``initial`` and each step.

    Parameters
    ----------
    topic : str
    kind : {"state", "flow", "event"}
    step_ns : int
        The producer's period ``h``. [ns]
    coupling_ns : int
        The port's coupling period ``H``, a whole multiple of ``h``. [ns]
    schema : TopicSchema, optional
        Its ``wrenches`` and ``derived`` drive the flow mean and the peaks.

    Raises
    ------
    ConfigError
        If ``coupling_ns`` is not a whole multiple (≥ 1) of ``step_ns``.
    """

    __slots__ = ("topic", "kind", "h", "H", "n", "derived", "wrenches", "points", "_T", "_count", "_acc", "_peak",
                 "_last", "_direct", "_events", "_skip")

    def __init__(self, topic: str, kind: str, step_ns: int, coupling_ns: int,
                 schema: TopicSchema | None = None) -> None:
        if step_ns <= 0 or coupling_ns < step_ns or coupling_ns % step_ns:
            raise ConfigError(f"{topic}: coupling period {coupling_ns} ns is not a whole multiple of the "
                              f"producer's period {step_ns} ns")
        if kind == "event" and coupling_ns != step_ns and schema is not None and tuple(schema.fields) != ("events",):
            raise ConfigError(f"{topic}: only an event port whose one field is 'events' can be coupled "
                              f"(fields: {', '.join(schema.fields)})")
        self.topic = topic
        self.kind = kind
        self.h = int(step_ns)
        self.H = int(coupling_ns)
        self.n = self.H // self.h
        self.derived: tuple[tuple[str, str, str], ...] = tuple(
            (name, src, how) for name, (src, how) in (schema.derived.items() if schema is not None else ()))
        self.wrenches: tuple[tuple[str, str], ...] = tuple(schema.wrenches) if schema is not None else ()
        self.points = {p for _, p in self.wrenches}
        self._skip = frozenset(f for f, _ in self.wrenches) | self.points  # not summed field by field
        # a state port with no peaks, or any port at H = h: bodies pass through, peaks from one body
        self._direct = self.n == 1
        self._T: int | None = None       # flow: start of the interval being accumulated
        self._count = 0                  # flow: values accumulated
        self._acc: dict[str, Any] = {}   # flow: running sums (floats, floats lists or arrays), bools (any)
        self._peak: dict[str, Any] = {}  # derived field -> running value
        self._last: Any = None           # flow: the interval's last body
        self._events: list[Any] = []     # event: the interval's events so far

    # ------------------------------------------------------------------ peaks
    def _update_peaks(self, body: Mapping[str, Any]) -> None:
        peak = self._peak
        for name, src, how in self.derived:
            v = body.get(src)
            if v is None:
                continue
            if how == "wrench_max":
                a0, a1, a2, b0, b1, b2 = v.tolist() if type(v) is np.ndarray else v
                tn, fn = sqrt(a0 * a0 + a1 * a1 + a2 * a2), sqrt(b0 * b0 + b1 * b1 + b2 * b2)  # |τ|, |f|
                cur = peak.get(name)
                peak[name] = [tn, fn] if cur is None else [max(cur[0], tn), max(cur[1], fn)]
            else:  # abs_max
                m = np.abs(np.asarray(v, dtype=np.float64))
                cur = peak.get(name)
                peak[name] = m if cur is None else np.maximum(cur, m)

    def _with_peaks(self, body: Mapping[str, Any]) -> dict[str, Any]:
        out = dict(body)
        for name, _src, _how in self.derived:
            v = self._peak.get(name)
            if v is None:
                raise ConfigError(f"{self.topic}: no value of {_src!r} in the interval to derive {name!r} from")
            out[name] = np.array(v, dtype=np.float64)
        self._peak = {}
        return out

    def full(self, body: Mapping[str, Any]) -> Mapping[str, Any]:
        """One step's body as its full-rate twin publishes it: derived fields from this body alone."""
        if not self.derived:
            return body
        keep, self._peak = self._peak, {}
        self._update_peaks(body)
        out = self._with_peaks(body)
        self._peak = keep
        return out

    # ------------------------------------------------------------------ flow sums
    def _accumulate(self, body: Mapping[str, Any]) -> None:
        acc = self._acc
        first = self._count == 0
        for F_name, p_name in self.wrenches:  # referred to Wo: [τ + p × f; f]
            F, p = body[F_name], body[p_name]
            w = _refer_wrench_rows(F.tolist() if type(F) is np.ndarray else [float(x) for x in F],
                                   p.tolist() if type(p) is np.ndarray else [float(x) for x in p])
            if first:
                acc[F_name] = w
            else:
                s = acc[F_name]
                acc[F_name] = [s[0] + w[0], s[1] + w[1], s[2] + w[2], s[3] + w[3], s[4] + w[4], s[5] + w[5]]
        skip = self._skip
        for key, v in body.items():
            if key in skip:
                continue
            if type(v) is bool:
                acc[key] = v if first else (acc[key] or v)
            elif type(v) is float:  # summed as a Python float: the same float64 additions as a 0-d array's
                acc[key] = v if first else acc[key] + v
            elif type(v) is np.ndarray or isinstance(v, float):
                acc[key] = np.array(v, dtype=np.float64) if first else acc[key] + v
        self._last = body
        self._count += 1

    def _mean(self) -> dict[str, Any]:
        body = dict(self._last)
        n = self._count
        for F_name, p_name in self.wrenches:
            s = self._acc[F_name]
            p = body[p_name]
            body[F_name] = np.array(_shift_wrench_rows([x / n for x in s],
                                                       p.tolist() if type(p) is np.ndarray else [float(x) for x in p]))
        wrench_fields = self._skip - self.points
        for key, v in self._acc.items():
            if key in body and key not in wrench_fields:
                if type(v) is bool:
                    body[key] = v
                elif type(v) is float:
                    body[key] = v / n
                else:
                    body[key] = float(v / n) if v.ndim == 0 else v / n
        self._acc = {}
        self._count = 0
        return body

    # ------------------------------------------------------------------ the rule
    def initial(self, t0_ns: int, body: Mapping[str, Any] | None) -> list[tuple[int, int, Mapping[str, Any]]]:
        """Samples to publish at ``t0``: ``(t_ns, h_ns, fields)``, each a whole body of the topic.

        Raises
        ------
        ConfigError
            If ``t0`` is not on the port's coupling grid.
        """
        if t0_ns % self.H:
            raise ConfigError(f"{self.topic}: the run starts at t0 = {t0_ns} ns, not on the port's coupling grid "
                              f"(period {self.H} ns)")
        if self.kind == "event":
            return [(t0_ns, self.H, body)]  # type: ignore[list-item]
        if body is None:
            return []
        if self.derived:
            self._update_peaks(body)
        if self.kind == "state":
            return [(t0_ns, self.H, self._with_peaks(body) if self.derived else body)]
        self._T = t0_ns
        return self._flow(t0_ns, body)

    def step(self, t_end_ns: int, body: Mapping[str, Any] | None) -> list[tuple[int, int, Mapping[str, Any]]]:
        """Samples to publish after the step ending ``t_end_ns``, given the body the model returned
        for this port (None if it returned none): ``(t_ns, h_ns, fields)``, zero or one of them.

        An event port gives, at its coupling instants, ``{"events": [...]}`` with the interval's
        events (possibly none), or — when it is not coupled (``H = h``) — the body as returned
        (None if none was: the caller sends an empty list or nothing). A state port gives None
        as the body when the model returned none at a coupling instant (the caller reports it).
        """
        if self.kind == "event":
            if self._direct:
                return [(t_end_ns, self.h, body)]  # type: ignore[list-item]
            if body is not None:
                self._events.extend(body.get("events", ()))
            if t_end_ns % self.H:
                return []
            events, self._events = self._events, []
            return [(t_end_ns, self.H, {"events": events})]
        if body is not None and self.derived:
            self._update_peaks(body)
        if self.kind == "state":
            if self._direct or t_end_ns % self.H == 0:
                if body is None:
                    return [(t_end_ns, self.H, None)]  # type: ignore[list-item]
                return [(t_end_ns, self.H, self._with_peaks(body) if self.derived else body)]
            return []
        if body is None:
            return []
        if self._T is None:
            self._T = t_end_ns
        return self._flow(t_end_ns, body)

    def _flow(self, t_ns: int, body: Mapping[str, Any]) -> list[tuple[int, int, Mapping[str, Any]]]:
        """Take a flow value for ``[t, t + h)``; the mean sample once its interval is complete."""
        if self._direct:
            self._T = t_ns + self.h
            return [(t_ns, self.h, self._with_peaks(body) if self.derived else body)]
        self._accumulate(body)
        if (t_ns + self.h) % self.H:
            return []
        T = t_ns + self.h - self.H
        out = self._mean()
        self._T = t_ns + self.h
        return [(T, self.H, self._with_peaks(out) if self.derived else out)]


def check_schedule(services: Mapping[str, Mapping[str, Any]], periods: Mapping[str, int],
                   horizon_ns: int | None = None) -> list[str]:
    """Whether a lockstep run with these coupling periods can always go on: problems, one line each.

    A dry run of the input rule (:mod:`protocol.stepping`) on time stamps alone: every model
    steps as soon as what it needs is published, each producer publishing by the coupling
    rule (module docstring). A cycle of consumers in which a flow is coupled more slowly than
    the state its producer reads back waits on itself (the flow's mean needs steps the
    producer cannot take yet); found here, before a run starts, instead of hanging.

    Parameters
    ----------
    services : Mapping[str, Mapping[str, Any]]
        As :func:`coupling_periods`.
    periods : Mapping[str, int]
        Output topic -> coupling period [ns] (:func:`coupling_periods`).
    horizon_ns : int, optional
        How far to run it; default: four times the least common multiple of every period. [ns]

    Returns
    -------
    list of str
        Empty if the run can always go on; else one line naming the time and, for each model
        that waits, the input it waits for.
    """
    from protocol.stepping import event_progress

    models = {n: s for n, s in services.items() if s.get("role") == "model" and int(s.get("period_ns") or 0) > 0}
    if not models:
        return []
    owner = {str(t): n for n, s in services.items() for t, _ in s.get("outputs", ())}
    h = {n: int(s["period_ns"]) for n, s in models.items()}
    grid = math.lcm(*h.values(), *(p for p in periods.values() if p > 0))
    horizon = horizon_ns if horizon_ns is not None else 4 * grid
    sparse_of = {n: event_progress(n, services)[0] for n in models}
    witnesses = {n: event_progress(n, services)[1] for n in models}
    tau = dict.fromkeys(models, 0)

    def latest_state(p: str, topic: str) -> int:
        H = periods[topic]
        return (tau[p] // H) * H

    def flow_covered(p: str, topic: str) -> int:  # published flow intervals cover [0, this)
        H = periods[topic]
        last_T = ((tau[p] + h[p] - H) // H) * H
        return last_T + H

    def needs(c: str) -> str | None:
        t, hc = tau[c], h[c]
        for topic, kind in models[c].get("inputs", ()):
            p = owner.get(str(topic))
            if p is None or p == c or p not in models:
                continue  # absent, its own, or a source (published as fast as it can)
            if kind == "state":
                H = periods[topic]
                if latest_state(p, topic) < (t // H) * H:
                    return f"{topic} (state) from {p}"
            elif kind == "flow":
                if flow_covered(p, topic) < t + hc:
                    return f"{topic} (flow, coupled at {periods[topic] / 1e6:g} ms) from {p}"
            else:
                H = periods[topic]
                bound = -1
                if topic not in sparse_of[p]:  # sent at every coupling instant, empty or not
                    bound = latest_state(p, topic) + H
                ws, strict = witnesses[c].get(str(topic), ((), False))
                for w in ws:
                    kw = dict((str(a), b) for a, b in models[c].get("inputs", ()))[w]
                    s = latest_state(p, w) if kw == "state" else flow_covered(p, w) - periods[w]
                    bound = max(bound, s if strict else (s // H + 1) * H)
                if bound <= t:
                    return f"{topic} (events, coupled at {H / 1e6:g} ms) from {p}"
        return None

    steps = 0
    while True:
        progress = False
        for c in models:
            while tau[c] < horizon and needs(c) is None:
                tau[c] += h[c]
                progress = True
                steps += 1
        if all(v >= horizon for v in tau.values()) or steps > 1_000_000:
            return []
        if not progress:
            waits = [f"{c} at t = {tau[c] / 1e6:g} ms waits for {needs(c)}" for c in models if tau[c] < horizon]
            return ["lockstep would wait on itself with these coupling periods: " + "; ".join(waits)
                    + " (a flow's coupling period may not be longer than that of the state its producer "
                      "reads back from its consumer; see protocol/coupling.py)"]
