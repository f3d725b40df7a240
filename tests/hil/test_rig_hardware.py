"""The emulated rig's hardware: the F/T sensor, the mock-up's load on it, the guides' mock-ups; and what the
bridge removes from the reading (weight and inertia, bias, noise)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from dynamics.mockup import ContactGuides, ForceTorqueSensor, mockup_load
from dynamics.spatial import pose
from hil.bridge import HilBridge
from hil.config import hil_table, parse
from hil.emulator import LockstepPort, LockstepRig
from hil.link import SerialLink
from hil.rig import RigCore, guides_of
from protocol.service import Sample
from tests.hil.test_bridge import Inputs, orbiter, payload


def test_sensor_noise_bias_drift_filter_and_range():
    rng = np.random.default_rng(3)
    bias = np.array([0.1, -0.2, 0.3, 5.0, -4.0, 3.0])
    drift = np.array([0.0, 0.0, 0.0, 0.5, 0.0, 0.0])
    s = ForceTorqueSensor(1000.0, 0.0, (0.8, 0.05), bias, drift, (0.0, 0.0), rng)
    out = []
    for n in range(20000):
        s.sample(n * 1e-3, np.zeros(6))
        out.append(s.reading)
    out = np.array(out)
    resid = out - bias - np.outer(np.arange(20000) * 1e-3, drift)
    np.testing.assert_allclose(resid.std(axis=0), [0.05] * 3 + [0.8] * 3, rtol=0.03)
    np.testing.assert_allclose(resid.mean(axis=0), 0.0, atol=0.03)
    # the low-pass: a step reaches 1 - e^-1 of its height after one time constant 1/(2π fc)
    fc = 50.0
    s = ForceTorqueSensor(10000.0, fc, (0.0, 0.0), np.zeros(6), np.zeros(6), (0.0, 0.0), rng)
    s.sample(0.0, np.zeros(6))
    tau = 1.0 / (2 * math.pi * fc)
    n = round(tau / 1e-4)
    for k in range(1, n + 1):
        s.sample(k * 1e-4, np.ones(6))
    assert s.reading[5] == pytest.approx(1.0 - math.exp(-n * 1e-4 / tau), rel=1e-12)
    assert s.lag == pytest.approx(tau + 0.5e-4, rel=1e-9)
    s = ForceTorqueSensor(1000.0, 0.0, (0.0, 0.0), np.zeros(6), np.zeros(6), (100.0, 10.0), rng)
    s.sample(0.0, np.array([20.0, 0, 0, 150.0, -50.0, -300.0]))
    np.testing.assert_array_equal(s.reading, [10.0, 0, 0, 100.0, -50.0, -100.0])
    assert s.saturated == 1


def test_mockup_load_is_newton_euler_of_the_mockup():
    """At rest, turned: the weight m g along -z_R, in P, and its moment c × f about Po. Moving: the platform's
    acceleration, angular velocity and acceleration give -(m a_C) and -(I ẇ + ω × I ω), checked against the
    mock-up's momentum differentiated numerically (scipy Rotation for the attitude)."""
    m, c, inertia, g = 40.0, np.array([0.1, -0.05, 0.3]), np.array([2.0, 3.0, 4.0]), 9.81
    R = Rotation.from_rotvec([0.3, -0.2, 0.5]).as_matrix()
    W = mockup_load(R, np.zeros(3), np.zeros(3), np.zeros(3), m, c, inertia, g)
    f = m * R.T @ [0.0, 0.0, -g]
    np.testing.assert_allclose(W, np.r_[np.cross(c, f), f], atol=1e-12)
    # a platform moving with w(t) = w0 + wd t, a(t) = a0 at Po, around R(t): the mock-up's momentum rates
    w0, wd, a0 = np.array([0.2, -0.1, 0.3]), np.array([0.5, 0.4, -0.2]), np.array([0.3, -0.7, 1.1])

    # differentiate L_C = R I Rᵀ ω and p = m v_C numerically along an exactly integrated attitude
    dt = 1e-5
    Rs = [R]
    for k in range(2):
        w = w0 + wd * (k * dt)
        Rs.append(Rotation.from_rotvec(w * dt).as_matrix() @ Rs[-1])
    ws = [w0 + wd * (k * dt) for k in range(3)]
    L = [Ri @ np.diag(inertia) @ Ri.T @ wi for Ri, wi in zip(Rs, ws, strict=True)]
    dL_R = (L[2] - L[0]) / (2 * dt)  # about C, in R, at Rs[1]
    R1, w1 = Rs[1], ws[1]
    r = R1 @ c
    a_C = a0 + np.cross(wd, r) + np.cross(w1, np.cross(w1, r))
    W = mockup_load(R1, a0, w1, wd, m, c, inertia, g)
    f_ref = R1.T @ (m * np.array([0.0, 0.0, -g]) - m * a_C)
    tau_ref = np.cross(c, f_ref) - R1.T @ dL_R
    np.testing.assert_allclose(W[3:], f_ref, atol=1e-9)
    np.testing.assert_allclose(W[:3], tau_ref, atol=2e-6)


def _guides_config(**em):
    config = {"payload": {"points_B": [[0.2, 0.1, 0.0], [-0.2, 0.1, 0.0]]},
              "contact": {"k": 3.0e5, "exponent": 1.0, "alpha": 2.0, "mu_s": 0.0, "mu_k": 0.0, "v_stick": 0.002,
                          "surfaces": [{"point": 0, "p_LoSo_L": [0.2, 0.1, 0.0], "n_L": [0.0, 0.0, -1.0],
                                        "radius": 0.05, "depth": 0.05},
                                       {"point": 1, "p_LoSo_L": [-0.2, 0.13, 0.0], "n_L": [0.0, -0.6, -0.8],
                                        "radius": 0.05, "depth": 0.05}]},
              "hil": {"emulator": {"contact": "guides", **em}}}
    return config


def test_guides_mockups_give_the_contact_law_of_the_contact_table():
    """[hil.guides] taken from [contact] and [payload]; a trunnion pressed into its wall by δ at δ̇ gets the
    Hunt–Crossley force k δ (1 + 3/2 α δ̇) along the wall's normal (the contact service's law, Marhefka & Orin
    eq. 4), and its moment about Po; the other trunnion, off its wall, nothing."""
    cfg = parse(hil_table(_guides_config()))
    assert cfg.table["guides"]["k"] == 3.0e5 and len(cfg.table["guides"]["surfaces"]) == 2
    g = guides_of(cfg)
    assert isinstance(g, ContactGuides) and isinstance(RigCore(cfg).contact, ContactGuides)
    X0 = cfg.pose_map.X_RP0
    delta, rate = 0.004, 0.02  # the platform moved down into wall 0 (normal -z in L: up is -z)
    X = X0 @ pose(np.eye(3), [0.0, 0.0, delta])
    V = np.r_[0.0, 0.0, 0.0, X0[:3, :3] @ [0.0, 0.0, rate]]
    W = g.wrench(X[:3, :3], X[:3, 3], V)
    F_n = 3.0e5 * delta * (1.0 + 1.5 * 2.0 * rate)
    f_P = X[:3, :3].T @ (X0[:3, :3] @ [0.0, 0.0, -F_n])
    np.testing.assert_allclose(W[3:], f_P, rtol=1e-12)
    np.testing.assert_allclose(W[:3], np.cross([0.2, 0.1, 0.0], f_P), rtol=1e-12)
    bad = _guides_config()
    bad["contact"]["surfaces"][1]["point"] = 5
    with pytest.raises(Exception, match=r"hil.guides.surfaces\[1\].point"):
        parse(hil_table(bad))


def _pressed(table: dict, steps: int = 400, depth: float = 0.002) -> tuple[HilBridge, list[dict]]:
    """The payload's interface held ``depth`` into the rig's plane from 0.6 s on (after engaging and taring)."""
    cfg = parse(table)
    h_ns = 4_000_000
    b = HilBridge(cfg, "hil", h_ns, SerialLink(LockstepPort(LockstepRig(cfg))))
    outs = [b.initial(0)]
    for n in range(steps):
        t_ns = n * h_ns
        z = 0.0 if n < 150 else min(0.01 + depth, 1e-4 * (n - 150))  # plane 10 mm above neutral
        u = Inputs({"orbiter/state": Sample(t_ns, h_ns, "orbiter", n, orbiter([0, 0, 0], [0, 0, 0])),
                    "payload/state": Sample(t_ns, h_ns, "payload", n, payload([0, 0, z], [0, 0, 0]))})
        outs.append(b.step(t_ns, h_ns, u))
    return b, outs


def test_bridge_removes_the_mockups_weight_the_bias_and_the_noise():
    """A 50 kg mock-up on a noisy, biased, drifting sensor: with gravity compensation, taring and the matched
    filter the fed-back force is the contact's, k δ, within the noise; without gravity compensation (and no tare)
    the reading is off by the weight (490 N), which the run must not take for contact: the rig faults, saying why."""
    k, depth = 2.0e5, 0.002
    sensor = {"ft_rate": 1000.0, "ft_cutoff": 200.0, "ft_noise": [2.0, 0.2],
              "ft_bias": [0.5, -0.3, 0.2, 8.0, -6.0, 12.0],
              "ft_drift": [0.0, 0.0, 0.0, 0.0, 0.0, 0.01], "seed": 4}
    base = {"compensation": {"predict": False, "passivity": False, "tare": 0.4, "filter_hz": 20.0},
            "mockup": {"mass": 50.0, "com": [0.0, 0.0, 0.1], "inertia": [1.0, 1.0, 1.5]},
            "emulator": {"stiffness": k, "plane_offset": 0.51, "rate": 1000.0, **sensor}}
    b, outs = _pressed(base)
    np.testing.assert_allclose(b.bias, [0.5, -0.3, 0.2, 8.0, -6.0, 12.0], atol=0.6)
    f = np.array([o["hil/feedback"]["F_Bo_B"][5] for o in outs[-100:]])
    assert all(o["hil/feedback"]["valid"] for o in outs[-100:])
    assert abs(f.mean() - (-k * depth)) < 5.0 and f.std() < 2.0  # -400 N: the plane pushes B down (-z)
    assert not any(o["hil/feedback"]["valid"] for o in outs[5:100])  # engaged (step 2), taring 0.4 s: no force yet
    # without gravity compensation and without the tare the weight stays in the reading: the bridge does not take
    # it for contact but faults the rig at once, naming the mock-up's load and the setting
    off = {**base, "compensation": {**base["compensation"], "gravity": False, "tare": 0.0}}
    b, outs = _pressed(off)
    faulted = [n for n, o in enumerate(outs) if o["hil/status"]["state"] == "FAULT"]
    assert faulted and faulted[0] < 150  # before the press begins (step 150): the weight alone
    assert abs(b.load_left_N - 50.0 * 9.81) < 5.0
    assert "mock-up's own load" in b.safety.fault_reason and "gravity = false" in b.safety.fault_reason
