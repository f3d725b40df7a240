"""The scheduler's publication: each port by its coupling rule, as the process publishes it."""

from __future__ import annotations

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
