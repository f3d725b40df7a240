"""dynamics.orbit and the orbital terms of dynamics.rigid_body against closed forms."""

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from dynamics import orbit as ob
from dynamics import rigid_body as rb
from dynamics.spatial import quat_angle, quat_to_rotation, rotation_to_quat
from errors import ModelError, ShapeError

N_LEO = ob.mean_motion(400e3)


def test_mean_motion_iss_like():
    # 400 km circular: period 92.56 min (Kepler's third law, a = 6778.137 km)
    T = 2 * np.pi / ob.mean_motion(400e3)
    assert abs(T - 5553.6) < 0.5
    assert ob.CircularOrbit.from_altitude(400e3).period == pytest.approx(T)
    with pytest.raises(ModelError, match="altitude_m"):
        ob.mean_motion(-7e6)
    with pytest.raises(ModelError, match="CircularOrbit.n"):
        ob.CircularOrbit(0.0)


def test_cw_closed_form_known_properties():
    n, T = N_LEO, 2 * np.pi / N_LEO
    # a radial offset at rest drifts along-track by -12π x0 per orbit, radial returns to x0
    p, v = ob.cw_solution(n, [10.0, 0, 0], [0, 0, 0], T)
    np.testing.assert_allclose(p, [10.0, -12 * np.pi * 10.0, 0], atol=1e-9)
    # ẏ0 = -2 n x0 gives the closed 2:1 relative ellipse (no drift)
    p, v = ob.cw_solution(n, [10.0, 0, 0], [0, -2 * n * 10.0, 0], T)
    np.testing.assert_allclose(p, [10.0, 0, 0], atol=1e-9)
    p, _ = ob.cw_solution(n, [10.0, 0, 0], [0, -2 * n * 10.0, 0], T / 2)
    np.testing.assert_allclose(p, [-10.0, 0, 0], atol=1e-9)
    # out-of-plane: harmonic at n
    p, _ = ob.cw_solution(n, [0, 0, 3.0], [0, 0, 0], T / 2)
    np.testing.assert_allclose(p, [0, 0, -3.0], atol=1e-9)


def test_integrated_relative_motion_matches_cw_closed_form():
    orbit = ob.CircularOrbit(N_LEO, gravity_gradient=False)
    model = rb.RigidBodyModel("payload", 1000.0, np.diag([500.0, 600.0, 700.0]))
    p0, v0 = np.array([20.0, -50.0, 5.0]), np.array([0.01, -0.02, 0.005])
    s = rb.RigidBodyState(p0, [1, 0, 0, 0], v0, np.zeros(3))
    h, T = 20.0, 2 * np.pi / N_LEO
    for _ in range(int(T // h)):
        s = rb.step(model, s, np.zeros(6), h, orbit=orbit)
    t = int(T // h) * h
    p_ref, v_ref = ob.cw_solution(N_LEO, p0, v0, t)
    np.testing.assert_allclose(s.p_WoBo_W, p_ref, rtol=0, atol=1e-6 * np.linalg.norm(p_ref))
    np.testing.assert_allclose(s.v_WBo_W, v_ref, rtol=0, atol=1e-6 * np.linalg.norm(v_ref))


def test_cw_acceleration_terms_and_shape_check():
    a = ob.cw_acceleration(N_LEO, [1.0, 2.0, 3.0], [0.1, 0.2, 0.3])
    n = N_LEO
    np.testing.assert_allclose(a, [3 * n * n * 1.0 + 2 * n * 0.2, -2 * n * 0.1, -n * n * 3.0])
    with pytest.raises(ShapeError, match="p_WoBo_W"):
        ob.cw_acceleration(n, [1.0, 2.0], [0, 0, 0])


def _rz(a):
    return np.array([np.cos(a / 2), 0, 0, np.sin(a / 2)])


def test_gravity_gradient_equilibria_give_zero_torque():
    I = np.diag([3000.0, 5000.0, 6000.0])
    # principal axes along LVLH axes, in every one of the 24 axis-aligned orientations
    for R in Rotation.create_group("O").as_matrix():
        x, y, z, w = Rotation.from_matrix(R).as_quat()
        np.testing.assert_allclose(ob.gravity_gradient_torque(N_LEO, I, [w, x, y, z]), 0.0, atol=1e-12)
    # away from equilibrium it is not zero, and has the closed form about the pitch axis (z)
    th = 0.1
    tau = ob.gravity_gradient_torque(N_LEO, I, _rz(th))
    np.testing.assert_allclose(tau, [0, 0, -3 * N_LEO**2 * (5000.0 - 3000.0) * np.sin(th) * np.cos(th)], atol=1e-15)


def test_body_at_rest_in_lvlh_stays_at_rest():
    # co-rotating with LVLH (inertial rate n about z), principal axes aligned: an equilibrium
    orbit = ob.CircularOrbit(N_LEO)
    model = rb.RigidBodyModel("orbiter", 1e5, np.diag([1.2e6, 8.0e6, 8.5e6]))
    s = rb.RigidBodyState.at_rest()
    for _ in range(100):
        s = rb.step(model, s, np.zeros(6), 10.0, orbit=orbit)
    assert quat_angle(s.quat_WB, [1, 0, 0, 0]) < 1e-12
    np.testing.assert_allclose(s.w_WB_B, 0.0, atol=1e-15)


def test_inertial_angular_momentum_conserved_in_rotating_frame():
    # With gravity gradient off, the body's inertial angular momentum is constant. In W it is
    # R_NW(t)ᵀ L_N with R_NW = Rz(n t), and w_WB_B is the rate relative to LVLH.
    n = 0.01  # fast orbit, so that the frame rotation matters over the run
    orbit = ob.CircularOrbit(n, gravity_gradient=False)
    model = rb.RigidBodyModel("b", 10.0, np.diag([2.0, 3.0, 4.0]))
    s = rb.RigidBodyState(np.zeros(3), [0.9, 0.1, -0.3, 0.2], np.zeros(3), [0.05, -0.1, 0.08])

    def L_N(state, t):
        R_WB = quat_to_rotation(state.quat_WB)
        w_N_B = state.w_WB_B + R_WB.T @ np.array([0, 0, n])
        return quat_to_rotation(_rz(n * t)) @ R_WB @ model.I_Bcm_B @ w_N_B

    L0 = L_N(s, 0.0)
    h = 0.25  # |ΔL|/|L| after 200 s: 1.6e-7 at h = 0.5, 9.9e-9 at 0.25 (RK4 truncation, 16x per halving)
    for _ in range(800):
        s = rb.step(model, s, np.zeros(6), h, orbit=orbit)
    np.testing.assert_allclose(L_N(s, 800 * h), L0, atol=2e-8 * np.linalg.norm(L0))


def test_pitch_libration_frequency():
    # Hill axes: pitch is about z (orbit normal), zenith x; small-angle libration at n sqrt(3 (Iy - Ix) / Iz).
    # (In the Shuttle's LVLH axes, pitch about y and nadir z, this is the familiar n sqrt(3 (Ix - Iz) / Iy).)
    Ix, Iy, Iz = 4000.0, 9000.0, 10000.0
    n = N_LEO
    orbit = ob.CircularOrbit(n)
    model = rb.RigidBodyModel("gg", 500.0, np.diag([Ix, Iy, Iz]))
    s = rb.RigidBodyState(np.zeros(3), _rz(0.01), np.zeros(3), np.zeros(3))
    h, theta, t = 10.0, [], []
    w_lib = n * np.sqrt(3 * (Iy - Ix) / Iz)
    steps = int(2.2 * 2 * np.pi / w_lib / h)
    for k in range(steps):
        s = rb.step(model, s, np.zeros(6), h, orbit=orbit)
        theta.append(2 * np.arctan2(s.quat_WB[3], s.quat_WB[0]))
        t.append((k + 1) * h)
    theta, t = np.array(theta), np.array(t)
    # downward zero crossings, linearly interpolated
    idx = np.nonzero((theta[:-1] > 0) & (theta[1:] <= 0))[0]
    tc = t[idx] + h * theta[idx] / (theta[idx] - theta[idx + 1])
    assert len(tc) >= 2
    period = tc[1] - tc[0]
    assert period == pytest.approx(2 * np.pi / w_lib, rel=1e-3)
    assert np.max(np.abs(theta)) == pytest.approx(0.01, rel=1e-3)


def test_shuttle_lvlh_axes_in_hill():
    R = ob.SHUTTLE_LVLH_IN_HILL
    np.testing.assert_allclose(R @ R.T, np.eye(3), atol=0)
    assert np.linalg.det(R) == pytest.approx(1.0)
    np.testing.assert_array_equal(R @ [1, 0, 0], [0, 1, 0])  # along-track
    np.testing.assert_array_equal(R @ [0, 1, 0], [0, 0, -1])  # opposite the orbit normal
    np.testing.assert_array_equal(R @ [0, 0, 1], [-1, 0, 0])  # nadir
    # LVLH hold of a Shuttle-like orbiter is a gravity-gradient equilibrium
    I = np.diag([1.2e6, 8.0e6, 8.5e6])
    np.testing.assert_allclose(ob.gravity_gradient_torque(N_LEO, I, rotation_to_quat(R)), 0.0, atol=1e-6)
