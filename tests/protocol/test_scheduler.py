"""The scheduler's publication: each port by its coupling rule, as the process publishes it."""

from __future__ import annotations

import numpy as np
import pytest

import testkit.toys  # noqa: F401  (registers the toy topics)
from errors import LifecycleError
from protocol.codec import decode
from protocol.scheduler import simulate
from protocol.service import Port

MS = 1_000_000


class _Counter:
    """A model of period 1 ms: a state ``x = step count`` on ``toy/state6`` and, on the steps that
    end at ``events_at`` [ms], one event on ``toy/event6``; no state body on the steps in ``skip_at``."""

    def __init__(self, events_at: tuple[int, ...] = (), skip_at: tuple[int, ...] = ()) -> None:
        self.name = "c"
        self.period_ns = MS
        self.inputs: tuple[Port, ...] = ()
        self.outputs = (Port("toy/state6", "state"), Port("toy/event6", "event"))
        self.k = 0
        self.events_at = events_at
        self.skip_at = skip_at

    def initial(self, t0_ns: int) -> dict:
        return {"toy/state6": {"x": 0.0, "v": 0.0}}

    def step(self, t_ns: int, h_ns: int, u: object) -> dict:
        self.k += 1
        t_end = (t_ns + h_ns) // MS
        out: dict = {}
        if t_end not in self.skip_at:
            out["toy/state6"] = {"x": float(self.k), "v": 0.0}
        if t_end in self.events_at:
            out["toy/event6"] = {"events": [{"kind": "tick", "t": t_end * 1e-3}]}
        return out


def _published(model: _Counter, t_end_ns: int, coupling: dict) -> dict[str, list[tuple[int, int, dict]]]:
    frames: list[bytes] = []
    simulate([model], t_end_ns, coupling=coupling, on_frame=frames.append)
    out: dict[str, list[tuple[int, int, dict]]] = {}
    for f in frames:
        topic, payload = f.split(b"\0", 1)
        s = decode(topic.decode(), payload)
        out.setdefault(topic.decode(), []).append((s.t_ns, s.h_ns, s.body))
    return out


def test_a_coupled_state_port_publishes_the_body_of_its_coupling_instants_only():
    got = _published(_Counter(skip_at=(1, 2, 4, 5)), 9 * MS, {"c": {"toy/state6": 3 * MS}})
    # stamped at t0 and every 3 ms, h_ns the coupling period, x the steps made by then
    assert [(t // MS, h // MS, b["x"]) for t, h, b in got["toy/state6"]] == [(0, 3, 0.0), (3, 3, 3.0), (6, 3, 6.0),
                                                                          (9, 3, 9.0)]


def test_an_uncoupled_event_port_without_consumers_sends_only_the_steps_that_carry_events():
    got = _published(_Counter(events_at=(2, 5)), 6 * MS, {})
    assert [(t // MS, h // MS, [e["t"] for e in b["events"]]) for t, h, b in got["toy/event6"]] == [
        (2, 1, [0.002]), (5, 1, [0.005])]
    assert [t // MS for t, _, _ in got["toy/state6"]] == [0, 1, 2, 3, 4, 5, 6]  # uncoupled: every step


def test_a_state_port_without_a_body_at_its_coupling_instant_is_refused_naming_it():
    with pytest.raises(LifecycleError, match=r"c: step returned no body for output 'toy/state6' at t=6000000 ns"):
        _published(_Counter(skip_at=(6,)), 9 * MS, {"c": {"toy/state6": 3 * MS}})


# ---------------------------------------------------------------- strides
class _Pulse:
    """A producer of period 2 ms: ``x`` = the step's end in ms mod 40 on ``toy/state3`` (coupled 6 ms), a flow
    ``F`` that changes every step on ``toy/spring3`` (coupled 4 ms), one event at the steps ending at ``events_at``
    [ms] on ``toy/event3``."""

    def __init__(self, events_at: tuple[int, ...]) -> None:
        self.name = "p"
        self.period_ns = 2 * MS
        self.inputs: tuple[Port, ...] = ()
        self.outputs = (Port("toy/state3", "state"), Port("toy/spring3", "flow"), Port("toy/event3", "event"))
        self.events_at = events_at

    def _out(self, t_end: int) -> dict:
        ms = t_end // MS
        out = {"toy/state3": {"x": float(ms % 40), "v": 0.0},
               "toy/spring3": {"F": 1.0 + 1e-3 * ms, "x": np.array([float(ms)])}}
        if ms in self.events_at:
            out["toy/event3"] = {"events": [{"kind": "tick", "t": ms * 1e-3}]}
        return out

    def initial(self, t0_ns: int) -> dict:
        return self._out(t0_ns)

    def step(self, t_ns: int, h_ns: int, u: object) -> dict:
        return self._out(t_ns + h_ns)


class _CoastCtx:
    def __init__(self) -> None:
        self.y = 0.0
        self.pending = 0
        self.seen = 0
        self.strides: list[tuple[int, int]] = []


class _Coaster:
    """A model with a context, period 1 ms, that coasts (only counts the time) while the producer's ``x`` is below
    20 and no event comes, and otherwise integrates ``y' = F + x`` over what it coasted and the step: the stride's
    promise holds (the same context and the same outputs as step by step)."""

    def __init__(self) -> None:
        self.name = "k"
        self.period_ns = MS
        self.inputs = (Port("toy/state3", "state"), Port("toy/spring3", "flow"), Port("toy/event3", "event"))
        self.outputs = (Port("toy/state4", "state"), Port("toy/spring4", "flow"))

    def new_context(self) -> _CoastCtx:
        return _CoastCtx()

    def _out(self, c: _CoastCtx, F: float) -> dict:
        return {"toy/state4": {"x": c.y, "v": F}, "toy/spring4": {"F": F, "x": np.array([c.y])}}

    def initial(self, t0_ns: int, c: _CoastCtx) -> dict:
        return self._out(c, 0.0)

    @staticmethod
    def _quiet(u) -> bool:
        return u.state("toy/state3").body["x"] < 20.0 and not any(s.body["events"] for s in u.events("toy/event3"))

    def stride(self, t_ns: int, h_ns: int, c: _CoastCtx, u) -> int:
        return 1000 if self._quiet(u) else 1

    def step(self, t_ns: int, h_ns: int, c: _CoastCtx, u) -> dict:
        if h_ns != self.period_ns:
            c.strides.append((t_ns, t_ns + h_ns))
        c.seen += sum(len(s.body["events"]) for s in u.events("toy/event3"))
        if self._quiet(u):
            c.pending += h_ns
            return self._out(c, 0.0)
        F = u.mean("toy/spring3", "F")
        c.y += (c.pending + h_ns) * 1e-9 * (F + u.state("toy/state3").body["x"])
        c.pending = 0
        return self._out(c, F)


class _CoasterStepByStep(_Coaster):
    stride = None  # type: ignore[assignment]


def _by_topic(frames: list[bytes]) -> dict[bytes, list[bytes]]:
    out: dict[bytes, list[bytes]] = {}
    for f in frames:
        topic, payload = f.split(b"\0", 1)
        out.setdefault(topic, []).append(payload)
    return out


def test_a_model_that_strides_publishes_what_it_publishes_step_by_step():
    """Strides change no frame (per topic, byte for byte) and no context; none crosses an output's coupling
    instant, an input sample's end, an event or the end of an ``advance``; and they happen."""
    from protocol.scheduler import advance, start

    events = (24, 26, 62, 102)
    coupling = {"p": {"toy/state3": 6 * MS, "toy/spring3": 4 * MS, "toy/event3": 12 * MS}, "k": {"*": 10 * MS}}
    runs = {}
    for cls in (_Coaster, _CoasterStepByStep):
        frames: list[bytes] = []
        sched = start([_Pulse(events), cls()], coupling=coupling)
        for t_end in (46 * MS, 120 * MS):  # two calls: a stride stops at the first one's end
            advance(sched, t_end, frames.append)
        k = next(m for m in sched.models if m.name == "k")
        runs[cls] = (_by_topic(frames), k.ctx, k.steps)
    (fa, ca, na), (fb, cb, nb) = runs[_Coaster], runs[_CoasterStepByStep]
    assert fa == fb and na == nb == 120
    assert (ca.y, ca.pending, ca.seen) == (cb.y, cb.pending, cb.seen) and ca.seen == len(events)
    assert cb.strides == [] and len(ca.strides) >= 10
    for a, b in ca.strides:
        assert b - a > MS
        assert (a // (10 * MS)) == ((b - 1) // (10 * MS))          # within one coupling interval of its outputs
        assert (a // (6 * MS)) == ((b - 1) // (6 * MS))            # within one state sample of its input
        assert not (a < 46 * MS < b)                               # not across the end of an advance
        assert not any(a < e * MS <= b - MS for e in events)       # no event in a later step's window


# ---------------------------------------------------------------- a step that waits on a device
class _Logged(_Pulse):
    """:class:`_Pulse` that logs its steps' start times as ``("p", t)``."""

    def __init__(self, log: list[tuple[str, int]]) -> None:
        super().__init__(())
        self.log = log

    def step(self, t_ns: int, h_ns: int, u: object) -> dict:
        self.log.append(("p", t_ns))
        return super().step(t_ns, h_ns, u)


class _Device:
    """A model of period 4 ms that takes ``toy/state3`` and publishes it back as ``toy/state5``; after each step
    its next one would wait on its device for the next ``busy`` questions (a reply on its way; -1: always)."""

    def __init__(self, log: list[tuple[str, int]], busy: int) -> None:
        self.name = "d"
        self.period_ns = 4 * MS
        self.inputs = (Port("toy/state3", "state"),)
        self.outputs = (Port("toy/state5", "state"),)
        self.log = log
        self.busy = busy
        self.left = 0
        self.asked = 0

    def waits_on_device(self) -> bool:
        self.asked += 1
        if self.left:
            self.left -= 1
            return True
        return False

    def initial(self, t0_ns: int) -> dict:
        return {"toy/state5": {"x": -1.0, "v": 0.0}}

    def step(self, t_ns: int, h_ns: int, u) -> dict:
        self.log.append(("d", t_ns))
        self.left = self.busy
        return {"toy/state5": {"x": u.state("toy/state3").body["x"], "v": float(t_ns)}}


def test_a_model_waiting_on_its_device_lets_the_others_step_first_and_changes_no_frame():
    """While the device model's reply is on its way the others step, up to the end of its next step and no
    further; with nothing else to step it steps anyway (its own wait then); per topic the frames are those of
    a run where it never waits."""
    coupling = {"p": {"toy/state3": 6 * MS, "toy/spring3": 4 * MS}}
    runs = {}
    for busy in (0, 1, -1):
        log: list[tuple[str, int]] = []
        frames: list[bytes] = []
        device = _Device(log, busy)
        sched = simulate([_Logged(log), device], 60 * MS, coupling=coupling, on_frame=frames.append)
        assert {m.name: m.steps for m in sched.models} == {"p": 30, "d": 15}
        assert device.asked > 0
        runs[busy] = (_by_topic(frames), log)
    for busy in (1, -1):
        assert runs[busy][0] == runs[0][0]
        assert runs[busy][1] != runs[0][1]  # another order
    p_t = 0  # always waiting: p's time when d steps from t > 0 is d's step end t + 4 ms (no further)
    for who, t in runs[-1][1]:
        if who == "p":
            p_t = t + 2 * MS
        elif t > 0:
            assert p_t == t + 4 * MS, (t, p_t)
    assert p_t == 60 * MS
