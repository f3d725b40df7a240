"""The orbiter service's step without processes: exact impulse of flows, free drift, CW, attitude hold.

References: momentum balance (the impulse of the samples, independent of our integrator),
the Clohessy–Wiltshire closed form (:func:`dynamics.orbit.cw_solution`), conservation
of momentum and energy in free drift, and the hold law's limits (torque bound, dead band).
"""

from __future__ import annotations

import numpy as np
import pytest

from dynamics import rigid_body as rb
from dynamics.orbit import CircularOrbit, cw_solution
from dynamics.spatial import quat_angle
from protocol.service import BoundModel, Sample
from protocol.stepping import StepInputs
from services import orbiter as so

H = 10_000_000  # ns, 100 Hz


def make(**over):
    cfg = {"orbiter": {"mass": 1.0e5, "inertia": [1.2e6, 8.0e6, 8.5e6], **over}}
    return cfg, BoundModel(so.build(cfg, "orbiter", H))


def inputs(t, flows=None):
    return StepInputs(t, H, {}, flows or {}, {})


def contact_sample(t, h, F, p):
    return Sample(t, h, "contact", 0, {"F_Lo_W": np.asarray(F, float), "p_WoLo_W": np.asarray(p, float),
                                       "active": True})


def arm_sample(t, h, F, p):
    z = np.zeros(6)
    return Sample(t, h, "arm", 0, {"F_Eo_W": z, "p_WoEo_W": np.zeros(3), "F_So_W": np.asarray(F, float),
                                   "p_WoSo_W": np.asarray(p, float), "grappled": False})


def momentum(m):
    P, L = rb.momentum(m.model, m.ctx.body)
    return np.concatenate([L, P])  # [L about Wo; P], ordered like a wrench [τ; f]


def test_flows_deliver_exactly_their_impulse_about_W_origin():
    # a fast-moving, spinning orbiter; ten 1 ms contact samples at moving points plus one 2 ms arm sample
    _, m = make(v_WOo_W=[3.0, -2.0, 1.0], w_WO_O=[0.02, -0.01, 0.03], X_WO=[5.0, 1.0, -2.0, 0.1, 0.2, 0.3])
    m.initial(0)
    rng = np.random.default_rng(1)
    t = 0
    cs = [(contact_sample(t + k * 1_000_000, 1_000_000, rng.normal(size=6) * 1e3, rng.normal(size=3) * 5), 1_000_000)
          for k in range(10)]
    arm = [(arm_sample(t + k * 2_000_000, 2_000_000, rng.normal(size=6) * 1e3, rng.normal(size=3) * 5), 2_000_000)
           for k in range(5)]
    expected = np.zeros(6)
    for s, o in cs:
        F, p = s.body["F_Lo_W"], s.body["p_WoLo_W"]
        expected += o * 1e-9 * np.r_[F[:3] + np.cross(p, F[3:]), F[3:]]
    for s, o in arm:
        F, p = s.body["F_So_W"], s.body["p_WoSo_W"]
        expected += o * 1e-9 * np.r_[F[:3] + np.cross(p, F[3:]), F[3:]]
    M0 = momentum(m)
    m.step(t, H, inputs(t, {"contact/wrench": cs, "arm/wrench": arm}))
    dM = momentum(m) - M0
    scale = np.max(np.abs(M0)) + np.max(np.abs(expected))
    np.testing.assert_allclose(dM, expected, rtol=0, atol=1e-12 * scale)
    # the mean-CoM reference point matters: the start-of-step CoM misses by ~ v h/2 × f h
    naive_miss = np.linalg.norm(np.cross(np.array([3.0, -2.0, 1.0]) * 0.005, expected[3:]))
    assert naive_miss > 1e3 * 1e-12 * scale


def test_free_drift_conserves_momentum_and_energy_and_reports_no_firings():
    _, m = make(v_WOo_W=[0.1, 0.0, -0.05], w_WO_O=[0.01, 0.02, -0.005])
    out = m.initial(0)
    assert out["orbiter/event"]["events"] == []
    M0, E0 = momentum(m), rb.kinetic_energy(m.model, m.ctx.body)
    for k in range(200):
        out = m.step(k * H, H, inputs(k * H))
        assert out["orbiter/event"]["events"] == []
    np.testing.assert_allclose(momentum(m), M0, atol=1e-9 * np.max(np.abs(M0)))
    assert rb.kinetic_energy(m.model, m.ctx.body) == pytest.approx(E0, rel=1e-9)
    np.testing.assert_allclose(out["orbiter/state"]["a_WOo_W"], 0.0, atol=1e-15)


def test_orbit_terms_follow_clohessy_wiltshire():
    p0, v0 = np.array([10.0, -20.0, 5.0]), np.array([0.01, -0.02, 0.005])
    _, m = make(orbit_altitude=400e3, X_WO=[*p0, 0.0, 0.0, 0.0], v_WOo_W=list(v0))
    m.initial(0)
    N = 600  # 6 s
    for k in range(N):
        out = m.step(k * H, H, inputs(k * H))
    n = CircularOrbit.from_altitude(400e3).n
    p, v = cw_solution(n, p0, v0, N * H * 1e-9)
    np.testing.assert_allclose(out["orbiter/state"]["p_WoOo_W"], p, atol=1e-9)
    np.testing.assert_allclose(out["orbiter/state"]["v_WOo_W"], v, atol=1e-11)


def test_attitude_hold_brings_the_error_into_the_dead_band_within_torque_limits():
    tmax = [1.0e4, 2.0e4, 2.0e4]
    theta = np.radians(3.0)
    I = np.array([1.2e6, 8.0e6, 8.5e6])  # ω_n = 0.5 rad/s, ζ = 0.7
    _, m = make(attitude="hold", quat_ref=[1.0, 0.0, 0.0, 0.0], X_WO=[0, 0, 0, 0.3 * theta, -0.5 * theta, theta],
                  torque_max=tmax, dead_band=0.0087, kp=list(0.25 * I), kd=list(0.7 * I))
    out = m.initial(0)
    events = list(out["orbiter/event"]["events"])
    assert {e["kind"] for e in events} == {"rcs_on"}
    for k in range(2000):  # 20 s
        out = m.step(k * H, H, inputs(k * H))
        events += out["orbiter/event"]["events"]
        assert np.all(np.abs(m.ctx.tau_rcs_O) <= np.asarray(tmax) * (1 + 1e-12))
    assert any(e["kind"] == "rcs_off" for e in events)
    assert all(abs(e["torque"]) <= tmax["xyz".index(e["axis"])] * (1 + 1e-12) for e in events)
    # final attitude error: inside the dead band per axis (phase-plane variable), so < √3 × dead band
    err = quat_angle([1.0, 0.0, 0.0, 0.0], out["orbiter/state"]["quat_WO"])
    assert err < np.sqrt(3) * 0.0087 + 1e-6
    assert err < 0.5 * theta
    # the jets are a real external torque: angular momentum is not conserved while they fire
    assert m.ctx.rcs_on_time.sum() > 0


def test_validate_names_key_and_value():
    problems = so.validate({"orbiter": {"mass": -1.0, "attitude": "spin", "kp": [1, 2], "bogus": 1}}, "orbiter")
    text = "\n".join(problems)
    assert "orbiter.attitude" in text and "spin" in text
    assert "orbiter.kp" in text and "orbiter.bogus: unknown key" in text
    problems = so.validate({"orbiter": {"mass": -1.0}}, "orbiter")
    assert any("mass" in p and "-1" in p for p in problems)
    assert so.validate({}, "orbiter") == []
