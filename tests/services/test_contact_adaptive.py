"""The contact service's adaptive step: the no-contact bound, free flight at the coupling step, the exact switch.

References are independent of the adaptive code: the law itself (:func:`dynamics.contact.point_plane_rows`) for
the slack, the kinematic equation for the reach time, and the same model run at its fixed 1 kHz step
(``[contact] adaptive = false``) for everything the service outputs.
"""

from __future__ import annotations

import math
import tomllib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dynamics import contact as dc
from protocol.service import BoundModel, Sample
from protocol.stepping import StepInputs
from services import contact as sc

ROOT = Path(__file__).resolve().parents[2]
H_C = 1_000_000
H = 10_000_000
PERIODS = {"payload/state": H, "contact/wrench": H, "contact/event": H}
LAW = dc.ContactLaw(2.0e5, 1.0, 0.5, 0.3, 0.2, 0.002)


# ---------------------------------------------------------------- the bound's pieces
def test_surface_slack_keeps_the_law_inactive_for_any_smaller_move() -> None:
    """Any move shorter than the slack leaves point_plane_rows inactive (checked against the law itself)."""
    rng = np.random.default_rng(7)
    checked = 0
    for _ in range(400):
        n = rng.normal(size=3)
        n /= np.linalg.norm(n)
        d = rng.uniform(-0.3, 0.3, size=3)
        radius, depth = rng.uniform(0.05, 0.3), rng.uniform(0.02, 0.2)
        s = dc.surface_slack(*d, *n, radius, depth)
        active = dc.point_plane_rows(*d, 0.0, 0.0, 0.0, *n, LAW, radius, depth)[0]
        if s > 0.0:
            assert not active
            for _ in range(20):
                e = rng.normal(size=3)
                moved = d + 0.999 * s * e / np.linalg.norm(e)
                assert not dc.point_plane_rows(*moved, 0.0, 0.0, 0.0, *n, LAW, radius, depth)[0]
                checked += 1
    assert checked > 1000


def test_surface_slack_is_tight_above_the_footprint() -> None:
    """Above the footprint the slack is the height: a move a little longer, along −n, makes the law act."""
    n = np.array([0.0, 0.6, 0.8])
    d = 0.04 * n + np.array([0.05, 0.0, 0.0])  # 4 cm in front, 5 cm off the normal through S
    s = dc.surface_slack(*d, *n, 0.15, 0.1)
    assert s == pytest.approx(0.04, rel=1e-12)
    assert dc.point_plane_rows(*(d - 1.001 * s * n), 0.0, 0.0, 0.0, *n, LAW, 0.15, 0.1)[0]


def test_reach_time_solves_the_motion() -> None:
    for v, a, s in ((0.02, 0.003, 0.01), (0.0, 0.5, 1e-4), (3.0, 0.0, 0.2), (1e-9, 1e-9, 1e-3)):
        tau = dc.reach_time(v, a, s)
        assert v * tau + 0.5 * a * tau * tau == pytest.approx(s, rel=1e-12)
    assert dc.reach_time(0.1, 0.1, -1e-3) == 0.0
    assert dc.reach_time(0.0, 0.0, 1.0) == math.inf
    with pytest.raises(ValueError, match="accel"):
        dc.reach_time(0.1, -1.0, 1.0)


# ---------------------------------------------------------------- the service, stepped by hand
def _approach_config(adaptive: bool, z0: float, vz: float) -> dict[str, Any]:
    """Three payload points 1 m below its CoM over a latch plane at z = 2 m (normal +z), approaching at ``vz``."""
    pts = [[1.5, 0.0, 0.0], [-1.5, 0.0, 0.0], [0.0, 1.5, 0.0]]
    return {
        "orbiter": {"mass": 1.0e5, "inertia": [1.2e6, 8.0e6, 8.5e6], "X_OL": [0.0, 0.0, 2.0, 0.0, 0.0, 0.0]},
        "payload": {"mass": 12000.0, "inertia": [2.0e4, 3.0e4, 3.5e4], "X_WT": [0.0, 0.0, z0, 0.002, -0.003, 0.0],
                    "X_TB": [0.0, 0.0, -1.0, 0.0, 0.0, 0.0], "points_B": pts, "v_WTo_W": [0.001, 0.0, vz],
                    "w_WT_T": [0.001, -0.002, 0.003]},
        "contact": {"adaptive": adaptive, "latch": {"position": 1e-9},
                    "surfaces": [{"point": i, "p_LoSo_L": p, "n_L": [0.0, 0.0, 1.0], "radius": 0.2, "depth": 0.1}
                                 for i, p in enumerate(pts)]},
    }


def _inputs(t: int) -> StepInputs:
    """The inputs of the step from ``t`` [ns]: a constant arm wrench and an orbiter at rest, both coupled at H."""
    z = np.zeros(3)
    F = np.array([3.0, -2.0, 1.0, 20.0, -10.0, 5.0])
    arm = Sample(t - t % H, H, "arm", 0, {"F_Eo_W": F, "p_WoEo_W": np.array([0.5, 0.2, 4.0]), "F_So_W": -F,
                                           "p_WoSo_W": z, "grappled": True})
    o = Sample(t - t % H, H, "orbiter", 0, {"p_WoOo_W": z, "quat_WO": np.array([1.0, 0.0, 0.0, 0.0]), "w_WO_O": z,
                                            "v_WOo_W": z, "a_WOo_W": z, "wdot_WO_O": z})
    return StepInputs(t, H_C, {"orbiter/state": o}, {"arm/wrench": [(arm, H_C)]}, {})


def _run(cfg: dict[str, Any], steps: int) -> tuple[BoundModel, list[dict[str, Any]], int]:
    """Step the model ``steps`` ms with a constant arm wrench and an orbiter at rest (:func:`_inputs`): the model
    with its context, its outputs, and the steps it coasted through."""
    m = BoundModel(sc.build(cfg, "contact", H_C))
    m.set_coupling(PERIODS)
    m.initial(0)
    outs, coasted = [], 0
    for k in range(steps):
        outs.append(m.step(k * H_C, H_C, _inputs(k * H_C)))
        coasted += bool(m.ctx.pending)
    return m, outs, coasted


def test_free_flight_at_the_coupling_step_matches_the_fixed_step() -> None:
    """Far from the guides the payload coasts 9 steps in 10; its state matches the 1 kHz run's to 1e-12 m,
    1e-13 m/s and rad/s, 1e-10 in the quaternion after 0.5 s."""
    fixed, outs_f, n_f = _run(_approach_config(False, 10.0, 0.01), 500)
    adapt, outs_a, n_a = _run(_approach_config(True, 10.0, 0.01), 500)
    assert n_f == 0 and n_a >= 0.85 * 500
    sf, sa = fixed.payload(fixed.ctx), adapt.payload(adapt.ctx)
    np.testing.assert_allclose(sa.p_WoBo_W, sf.p_WoBo_W, rtol=0, atol=1e-12)
    np.testing.assert_allclose(sa.v_WBo_W, sf.v_WBo_W, rtol=0, atol=1e-13)
    np.testing.assert_allclose(sa.w_WB_B, sf.w_WB_B, rtol=0, atol=1e-13)
    # the arm's moment about the moving CoM is held per piece (referred to its mean CoM), per 1 ms step in the
    # fixed run: the attitudes part by the fixed step's own hold error (v × f / I · h² per step), not RK4's
    np.testing.assert_allclose(sa.quat_WB, sf.quat_WB, rtol=0, atol=1e-10)
    for of, oa in zip(outs_f, outs_a, strict=True):  # the published state, at the coupling instants
        assert ("payload/state" in of) == ("payload/state" in oa)
        if "payload/state" in of:
            for key in ("p_WoTo_W", "v_WTo_W", "w_WT_T", "a_WTo_W", "wdot_WT_T"):
                np.testing.assert_allclose(oa["payload/state"][key], of["payload/state"][key], rtol=1e-9,
                                           atol=1e-13)


def test_the_switch_to_the_fine_step_comes_before_the_first_contact() -> None:
    """Approaching the plates at 5 cm/s from 2.5 cm: the first contact at the same step, and every wrench of the
    contact the same as the fixed step's within 1e-4 of its peak; the payload coasted while it was far enough."""
    _, outs_f, _ = _run(_approach_config(False, 3.03, -0.05), 800)
    _, outs_a, n_a = _run(_approach_config(True, 3.03, -0.05), 800)
    first = [next(k for k, o in enumerate(outs) if o["contact/wrench"]["active"]) for outs in (outs_f, outs_a)]
    assert first[0] == first[1] and 300 < first[0] < 650
    assert n_a > 0.7 * first[0]
    Ff = np.array([o["contact/wrench"]["F_Lo_W"] for o in outs_f])
    Fa = np.array([o["contact/wrench"]["F_Lo_W"] for o in outs_a])
    assert np.all(Fa[:first[0]] == 0.0) and np.all(Ff[:first[0]] == 0.0)
    # the states part by ~1e-11 before contact (the moment's hold, test above); the stiff contact's force
    # carries that at its first steps (δ of a few µm): within 1e-4 of its peak all along
    peak = np.max(np.abs(Ff))
    assert peak > 1.0
    np.testing.assert_allclose(Fa, Ff, rtol=0, atol=1e-4 * peak)
    for of, oa in zip(outs_f, outs_a, strict=True):
        assert [e["kind"] for e in oa["contact/event"]["events"]] == [e["kind"] for e in of["contact/event"]["events"]]


def test_a_payload_state_set_while_it_coasts_is_stepped_from_at_once() -> None:
    """The payload's state set in its context mid-coast (what a sweep's body change does): the next step drops the
    intervals coasted through and the bound and is evaluated from the new state, as from a context holding that
    state with nothing coasted (the reference: those fields set by hand), output for output to the coupling
    instant; without the drop it would coast on and integrate the old intervals from the new state."""
    import copy

    from dynamics import rigid_body as rb

    m, _, _ = _run(_approach_config(True, 10.0, 0.01), 14)  # the steps ending at 11 to 14 ms coasted
    assert m.ctx.pending and m.ctx.coast is not None
    new = rb.state_from_pose([0.02, -0.01, 9.9, 0.01, 0.0, -0.02], [0.003, 0.0, -0.01], [0.0, 0.002, 0.0])
    ref = BoundModel(m.obj, copy.deepcopy(m.ctx))
    ref.ctx.body, ref.ctx.pending, ref.ctx.coast = new, [], None
    m.ctx.body = new
    for k in range(14, 20):
        out, out_ref = m.step(k * H_C, H_C, _inputs(k * H_C)), ref.step(k * H_C, H_C, _inputs(k * H_C))
        assert out.keys() == out_ref.keys(), k
        for topic, body in out_ref.items():
            for key, value in body.items():
                assert np.array_equal(out[topic][key], value), (k, topic, key)
    assert "payload/state" in out  # the coupling instant (20 ms)
    for a, b in zip(m.payload(m.ctx).floats, ref.payload(ref.ctx).floats, strict=True):
        assert a == b


def test_adaptive_false_never_coasts_and_hil_never_coasts() -> None:
    cfg = _approach_config(True, 10.0, 0.0)
    assert sc.build(cfg, "contact", H_C).adaptive
    assert not sc.build(_approach_config(False, 10.0, 0.0), "contact", H_C).adaptive
    cfg["contact"]["source"] = "hil"
    assert not sc.build(cfg, "contact", H_C).adaptive


# ---------------------------------------------------------------- the default scenario
def _scenario(adaptive: bool) -> dict[str, Any]:
    from protocol.config import service_module
    from protocol.scheduler import simulate
    from protocol.timebase import period_ns

    with (ROOT / "configs" / "srms_berthing.toml").open("rb") as f:
        cfg = tomllib.load(f)
    cfg["contact"]["adaptive"] = adaptive
    models, coupling = [], {}
    for name in ("orbiter", "arm", "contact", "operator"):
        svc = cfg["services"][name]
        models.append(service_module(svc["kind"]).build(cfg, name, period_ns(svc["rate_hz"])))
        if "coupling_hz" in svc:
            coupling[name] = {"*": period_ns(svc["coupling_hz"])}
    m = models[2]
    seen: dict[str, Any] = {"events": {}, "peak_N": 0.0, "peak_Nm": 0.0, "coasted": 0}
    step = m.step

    def watched(t_ns: int, h_ns: int, c: Any, u: Any) -> dict[str, Any]:
        out = step(t_ns, h_ns, c, u)
        seen["coasted"] += bool(c.pending) * (h_ns // m.period_ns)  # a stride: that many steps coasted
        F = out["contact/wrench"]["F_Lo_W"]
        seen["peak_N"] = max(seen["peak_N"], float(np.linalg.norm(F[3:])))
        seen["peak_Nm"] = max(seen["peak_Nm"], float(np.linalg.norm(F[:3])))
        for e in out["contact/event"]["events"]:
            seen["events"].setdefault(e["kind"], e["t_ns"])
        return out

    m.step = watched  # type: ignore[method-assign]
    sched = simulate(models, 45_000_000_000, coupling=coupling)
    seen["final"] = m.payload(next(x.ctx for x in sched.members if x.name == "contact"))
    return seen


@pytest.fixture(scope="module")
def scenario_runs() -> tuple[dict[str, Any], dict[str, Any]]:
    return _scenario(False), _scenario(True)


def test_default_scenario_figures_within_tolerance(scenario_runs) -> None:
    """The stated tolerances against the fixed step: capture, first contact, latch start and latch within 1 ms,
    peak interface force and moment within 0.5 %; the payload coasts most of its free flight."""
    fixed, adapt = scenario_runs
    assert set(fixed["events"]) == set(adapt["events"]) >= {"capture", "rigidize", "first_contact", "latch_start",
                                                            "latch", "release"}
    for kind in fixed["events"]:
        assert abs(adapt["events"][kind] - fixed["events"][kind]) <= 1_000_000, kind
    assert adapt["peak_N"] == pytest.approx(fixed["peak_N"], rel=5e-3)
    assert adapt["peak_Nm"] == pytest.approx(fixed["peak_Nm"], rel=5e-3)
    assert fixed["coasted"] == 0
    assert adapt["coasted"] > 0.8 * 0.9 * fixed["events"]["first_contact"] / 1_000_000
    np.testing.assert_allclose(adapt["final"].p_WoBo_W, fixed["final"].p_WoBo_W, rtol=0, atol=1e-6)


def test_the_default_scenarios_strides_change_no_frame(monkeypatch) -> None:
    """The default scenario's models (no rig, no logger) over 3 s in one process: the contact's coasting steps
    taken as strides (:meth:`services.contact.ContactModel.stride`) publish every topic byte for byte as step by
    step, the contact's context ends the same, and the strides cover most of the free flight."""
    from protocol.config import load, validate
    from protocol.scheduler import advance, start
    from tools.sweep import build_models

    cfg = load(ROOT / "configs" / "srms_berthing.toml")
    plan = validate(cfg)
    names = [(n, s.kind, s.period_ns) for n, s in plan.services.items() if s.kind not in ("logger", "hil.bridge")]
    coupling = {n: s.coupling_ns for n, s in plan.services.items()}
    runs = []
    for strides in (True, False):
        if not strides:
            monkeypatch.setattr(sc.ContactModel, "stride", None)
        frames: list[bytes] = []
        sched = start(build_models(cfg, names), coupling=coupling)
        c = next(m for m in sched.models if m.name == "contact")
        calls = [0]
        step = c.obj.step

        def counted(*a: Any, _step: Any = step, calls: list[int] = calls) -> Any:
            calls[0] += 1
            return _step(*a)

        c.obj.step = counted
        advance(sched, 3 * 10**9, frames.append)
        by_topic: dict[bytes, list[bytes]] = {}
        for f in frames:
            topic, body = f.split(b"\0", 1)
            by_topic.setdefault(topic, []).append(body)
        runs.append((by_topic, c.ctx, c.steps, calls[0]))
    (fa, ca, na, ka), (fb, cb, nb, kb) = runs
    assert fa == fb and na == nb == 3000 and kb == 3000
    # strides: 2 calls per 10 ms of free flight instead of 10: one from each coupling instant (where the orbiter's
    # and the arm's new samples come) through the step that gives the contact wrench's interval its last value, and
    # the evaluated step
    assert ka < 0.25 * kb
    assert ca.body.p_WoBo_W.tolist() == cb.body.p_WoBo_W.tolist() and ca.pending == cb.pending
