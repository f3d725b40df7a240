"""Models whose state is a context (protocol.service): a model built afresh and given a running model's
context takes up the run bit-identically.

Reference: the uninterrupted run of the same scenario, topic by topic and byte by byte. The swap instants are
picked where the model's state moves: the orbiter's jets firing; the arm slewing free (1 s), grappled and braked
(7.2 s) and flying its loaded auto segment (10 s); the payload in the compliant snare (7.2 s), in the guides
(35.3 s) and in the latches' stroke held by the latch constraint (36.2 s). Each is 10 ms off the 20 ms grid, so
that the step counters' phases (RMSFLX every 10 arm steps, RMLOAD every 50, the flexible booms' matrices every 20)
move too. And a run saved (:func:`protocol.scheduler.snapshot`) with the multibody arm goes on as the
uninterrupted one.
"""

from __future__ import annotations

import copy
import pickle
from pathlib import Path
from typing import Any

import pytest

from protocol.config import load, service_module
from protocol.logfile import decode_bodies
from protocol.scheduler import advance, restore, snapshot, start
from tests.compare_logs import by_topic
from tools.sweep import build_models, sweep_config, validate

ROOT = Path(__file__).resolve().parents[2]
S = 1_000_000_000

JETS = {"orbiter.attitude": "hold", "orbiter.dead_band": 0.0005, "orbiter.w_WO_O": [0.002, -0.003, 0.0025],
        "orbiter.kd": [0.0, 0.0, 0.0], "orbiter.kp": [1.2e8, 8e8, 8.5e8], "orbiter.torque_max": [1e5, 4e5, 4e5]}
"""The orbiter's attitude hold on, stiff and undamped, and a rate to stop: its jets fire on and off every few
tenths of a second (every field of its context moves)."""

CASES: dict[str, tuple[str, dict[str, Any], tuple[float, ...], float]] = {
    # case: (service, scenario changes, swap instants [s], end [s]); the last two take ~10 s each (slow)
    "orbiter": ("orbiter", JETS, (1.0,), 2.0),
    "operator": ("operator", JETS, (1.0,), 2.0),
    "arm": ("arm", {}, (1.01, 7.21, 10.01), 10.5),
    "arm-flexible": ("arm", {"arm.model": "multibody", "arm.booms": "flexible"}, (1.01, 7.21, 10.01), 10.5),
    "contact": ("contact", {"contact.capture": "compliant", "contact.latch.model": "constraint"},
                (1.01, 7.21, 35.31, 36.21), 36.4),
}


def _events(frames: dict[bytes, list[bytes]], topic: str) -> list[tuple[str, float]]:
    ev = decode_bodies(topic, frames[topic.encode()])
    return [(e["kind"], e["t"]) for evs in ev["events"] for e in evs]


SLOW = ("arm-flexible", "contact")


@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.slow) if c in SLOW else c for c in CASES])
def test_a_fresh_model_given_the_context_takes_up_the_run(case):
    name, changes, swaps, t_end = CASES[case]
    cfg, _ = sweep_config(load(ROOT / "configs" / "srms_berthing.toml"), changes)
    plan = validate(cfg)
    coupling = {n: s.coupling_ns for n, s in plan.services.items()}
    whole: list[bytes] = []
    advance(start(build_models(cfg), coupling=coupling), round(t_end * S), whole.append)
    got: list[bytes] = []
    sched = start(build_models(cfg), coupling=coupling)
    for t_swap in swaps:
        advance(sched, round(t_swap * S), got.append)
        member = next(m for m in sched.members if m.name == name)
        fresh = service_module(plan.services[name].kind).build(copy.deepcopy(cfg), name, plan.services[name].period_ns)
        assert pickle.dumps(fresh.new_context()) != pickle.dumps(member.ctx)  # the run has moved on
        assert sched.replace_model(name, fresh) is not fresh  # told its couplings as at the start
        member.ctx = pickle.loads(pickle.dumps(member.ctx))  # a copy: nothing shared with the old model
    advance(sched, round(t_end * S), got.append)
    a, b = by_topic(whole), by_topic(got)
    assert sorted(a) == sorted(b)
    for topic in a:
        assert a[topic] == b[topic], topic
    # the swaps fell where the state moves
    if name == "orbiter":  # the jets went on and off on both sides of the swap
        times = [t for _, t in _events(a, "orbiter/event")]
        assert min(times) < swaps[0] < max(times), times
    if name == "arm":  # slewing free, grappled with the brakes on, flying the loaded auto segment
        st = decode_bodies("arm/state", a[b"arm/state"])
        at = {round(t * 1e-9, 3): (bool(g), m, float(abs(qd).max()))
              for t, g, m, qd in zip(st["t_ns"], st["grappled"], st["mode"], st["qd"], strict=True)}
        (g1, m1, qd1), (g2, m2, _), (g3, m3, qd3) = at[swaps[0]], at[swaps[1]], at[swaps[2]]
        assert (g1, m1, g2, m2, g3, m3) == (False, "manual", True, "brakes", True, "auto"), at[swaps[2]]
        assert qd1 > 1e-3 and qd3 > 1e-5, (qd1, qd3)
    if name == "contact":  # the snare closing, the payload in the guides, the latches' stroke
        kinds = _events(a, "contact/event")
        assert [k for k, t in kinds if t < swaps[1]] == ["capture"]
        assert [k for k, t in kinds if swaps[2] < t < swaps[3]] == ["rebound", "first_contact", "latch_start"]


@pytest.mark.parametrize("changes", [{"arm.model": "multibody"}, {"arm.model": "multibody", "arm.booms": "flexible"}],
                         ids=["multibody", "flexible"])
def test_a_saved_multibody_arm_goes_on_bit_identically(changes):
    """A snapshot (pickle) of the run holds the arm without its chain's scratch data (whose arrays are views of one
    another, which pickling parts): the restored run makes its own and goes on as the uninterrupted one."""
    cfg, _ = sweep_config(load(ROOT / "configs" / "srms_berthing.toml"), changes)
    plan = validate(cfg)
    coupling = {n: s.coupling_ns for n, s in plan.services.items()}
    whole: list[bytes] = []
    advance(start(build_models(cfg), coupling=coupling), 2 * S, whole.append)
    got: list[bytes] = []
    sched = restore(snapshot(advance(start(build_models(cfg), coupling=coupling), S, got.append)))
    advance(sched, 2 * S, got.append)
    a, b = by_topic(whole), by_topic(got)
    assert sorted(a) == sorted(b)
    for topic in a:
        assert a[topic] == b[topic], topic


@pytest.mark.parametrize("changes", [{}, {"arm.model": "multibody", "arm.booms": "flexible"}],
                         ids=["default", "flexible"])
def test_a_model_with_a_context_keeps_no_state_of_its_own(changes):
    """The models with a context change nothing on themselves as they run: after 7.5 s of the scenario (the arm has
    slewed and captured, the payload is in the snare, the jets and the script have moved on) every attribute of each
    equals, pickled, the one of a model built afresh from the scenario and told its couplings. (The reference is
    the fresh build; a state kept on a model, e.g. a counter or a cache written by ``step``, fails it.)"""
    from tools.sweep import _fields, _same_attr
    cfg, _ = sweep_config(load(ROOT / "configs" / "srms_berthing.toml"), {"orbiter.attitude": "hold", **changes})
    plan = validate(cfg)
    coupling = {n: s.coupling_ns for n, s in plan.services.items()}
    sched = advance(start(build_models(cfg), coupling=coupling), round(7.5 * S))
    checked = []
    for m in sched.models:
        if m.ctx is None:
            continue
        fresh = service_module(plan.services[m.name].kind).build(copy.deepcopy(cfg), m.name, m.period_ns)
        if hasattr(fresh, "set_coupling"):
            fresh.set_coupling({o.topic: o.coupler.H for o in m.outs})
        fa, fb = _fields(m.obj), _fields(fresh)
        assert sorted(fa) == sorted(fb), m.name
        changed = [k for k in sorted(fa) if not _same_attr(fa[k], fb[k])]
        assert not changed, f"{m.name}: stepping changed {changed}"
        assert pickle.dumps(m.ctx) != pickle.dumps(fresh.new_context()), m.name  # the run did move its context
        checked.append(m.name)
    assert sorted(checked) == ["arm", "contact", "operator", "orbiter"]
