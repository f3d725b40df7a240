"""dynamics.contact against closed forms, conservation laws and independent integration (scipy).

References: Hunt & Crossley (1975) restitution of the damped contact, e ≈ 1 − α v_in for
small α v_in; the energy balance d(KE + U)/dt = −P_d integrated by scipy's solve_ivp at
tight tolerance (independent of the project's integrator); momentum conservation and the
reduced-mass energy loss of a plastic lock.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.integrate import solve_ivp
from scipy.spatial.transform import Rotation

from dynamics import contact as dc
from dynamics import impact as im
from dynamics import rigid_body as rb
from dynamics.spatial import pose, shift_twist
from errors import ModelError, ShapeError


def test_hunt_crossley_closed_form_and_no_pull():
    law = dc.ContactLaw(k=1e5, exponent=1.5, alpha=0.4)
    assert dc.hunt_crossley(-1e-3, 0.1, law) == (0.0, 0.0)
    F, Fe = dc.hunt_crossley(4e-3, 0.0, law)
    assert F == pytest.approx(1e5 * 4e-3**1.5) and Fe == F
    F, Fe = dc.hunt_crossley(4e-3, 0.2, law)
    assert F == pytest.approx(Fe * (1 + 1.5 * 0.4 * 0.2))
    F, _ = dc.hunt_crossley(4e-3, -10.0, law)  # fast separation: the damper would pull
    assert F == 0.0


def test_friction_coefficient_continuous_and_limits():
    law = dc.ContactLaw(k=1.0, mu_s=0.5, mu_k=0.3, v_stick=1e-3)
    assert dc.friction_coefficient(0.0, law) == 0.0
    assert dc.friction_coefficient(0.5e-3, law) == pytest.approx(0.25)
    eps = 1e-12
    assert dc.friction_coefficient(1e-3 - eps, law) == pytest.approx(dc.friction_coefficient(1e-3 + eps, law), abs=1e-8)
    assert dc.friction_coefficient(1.0, law) == pytest.approx(0.3, abs=1e-12)


def test_contact_law_rejects_bad_parameters():
    with pytest.raises(ModelError, match="k"):
        dc.ContactLaw(k=-1.0)
    with pytest.raises(ModelError, match="mu_s"):
        dc.ContactLaw(k=1.0, mu_s=0.1, mu_k=0.2)
    with pytest.raises(ShapeError, match="n_W"):
        dc.point_plane(np.zeros(3), np.zeros(3), np.zeros(3), np.zeros(3), np.zeros(3), dc.ContactLaw(k=1.0))


def _point_mass_impact(law, m, v_in, v_t=0.0, t_end=0.5):
    """A point mass onto the fixed plane z = 0 (normal +z): solve_ivp on [z, y, vz, vy, E_d]."""

    def f(t, x):
        pc = dc.point_plane([0.0, x[1], x[0]], [0.0, x[3], x[2]], np.zeros(3), [0, 0, 1], np.zeros(3), law)
        return [x[2], x[3], pc.f_W[2] / m, pc.f_W[1] / m, pc.power_dissipated]

    def leave(t, x):
        return x[0] - 1e-3
    leave.terminal, leave.direction = True, 1
    sol = solve_ivp(f, (0, t_end), [1e-3, 0.0, -v_in, v_t, 0.0], rtol=1e-10, atol=1e-13, events=leave,
                    max_step=1e-4)
    assert sol.status == 1, "the mass must leave the surface"
    return sol.y[:, -1]


def test_hunt_crossley_restitution_matches_the_papers_small_damping_law():
    # Hunt & Crossley (1975): e ≈ 1 − α v_in for α v_in ≪ 1 (error O((α v_in)²)).
    m, v_in = 10.0, 0.1
    for alpha in (0.1, 0.3):
        law = dc.ContactLaw(k=1e6, exponent=1.5, alpha=alpha)
        x = _point_mass_impact(law, m, v_in)
        e = x[2] / v_in
        assert abs(e - (1 - alpha * v_in)) < 2 * (alpha * v_in) ** 2


@pytest.mark.parametrize("mu", [0.0, 0.4])
def test_compliant_energy_loss_equals_integrated_dissipation(mu):
    m, v_in, v_t = 20.0, 0.2, 0.05
    law = dc.ContactLaw(k=2e5, exponent=1.0, alpha=2.0, mu_s=mu * 1.2, mu_k=mu, v_stick=1e-3)
    x = _point_mass_impact(law, m, v_in, v_t)
    # U = 0 at the end (the mass left the surface)
    loss = 0.5 * m * (v_in**2 + v_t**2) - 0.5 * m * (x[2] ** 2 + x[3] ** 2)
    assert loss > 0.1 * 0.5 * m * v_in**2  # a real loss, not a round-off one
    assert x[4] == pytest.approx(loss, rel=1e-6)
    if mu > 0:
        assert abs(x[3]) < v_t  # friction slowed the slip


def _random_body(rng, name, mass):
    lam = np.sort(rng.uniform(0.5, 2.0, 3)) * mass
    lam[2] = min(lam[2], lam[0] + lam[1])
    R = Rotation.random(random_state=rng.integers(1 << 31)).as_matrix()
    model = rb.RigidBodyModel(name, mass, R @ np.diag(lam) @ R.T)
    q = Rotation.random(random_state=rng.integers(1 << 31)).as_quat()
    state = rb.RigidBodyState(rng.normal(size=3), np.r_[q[3], q[:3]], rng.normal(size=3) * 0.1,
                              rng.normal(size=3) * 0.05)
    return model, state


def test_plastic_lock_conserves_momentum_zeroes_relative_twist_and_loses_predicted_energy():
    rng = np.random.default_rng(3)
    mO, sO = _random_body(rng, "O", 1000.0)
    mT, sT = _random_body(rng, "T", 300.0)
    c = rng.normal(size=3)
    VO = shift_twist(rb.spatial_velocity(sO), c - sO.p_WoBo_W)
    VT = shift_twist(rb.spatial_velocity(sT), c - sT.p_WoBo_W)
    lock = dc.plastic_lock(mO.mass, rb.inertia_W(mO, sO), c - sO.p_WoBo_W, VO,
                           mT.mass, rb.inertia_W(mT, sT), c - sT.p_WoBo_W, VT)
    np.testing.assert_allclose(lock.V_O_post, lock.V_T_post, atol=1e-12)
    imp = lock.impulse_O
    sO1 = rb.apply_impulse(mO, sO, np.r_[imp[:3] - np.cross(sO.p_WoBo_W - c, imp[3:]), imp[3:]])
    sT1 = rb.apply_impulse(mT, sT, np.r_[-imp[:3] + np.cross(sT.p_WoBo_W - c, imp[3:]), -imp[3:]])
    # post-lock twists from the impulse agree with the lock's
    np.testing.assert_allclose(shift_twist(rb.spatial_velocity(sO1), c - sO.p_WoBo_W), lock.V_O_post, atol=1e-10)
    np.testing.assert_allclose(shift_twist(rb.spatial_velocity(sT1), c - sT.p_WoBo_W), lock.V_T_post, atol=1e-10)
    P0 = [a + b for a, b in zip(rb.momentum(mO, sO), rb.momentum(mT, sT), strict=True)]
    P1 = [a + b for a, b in zip(rb.momentum(mO, sO1), rb.momentum(mT, sT1), strict=True)]
    np.testing.assert_allclose(P1[0], P0[0], atol=1e-9)
    np.testing.assert_allclose(P1[1], P0[1], atol=1e-9)
    dKE = (rb.kinetic_energy(mO, sO) + rb.kinetic_energy(mT, sT)
           - rb.kinetic_energy(mO, sO1) - rb.kinetic_energy(mT, sT1))
    # the loss is that of the united body: KE before − KE of the common motion (independent formula)
    assert dKE == pytest.approx(lock.energy_loss, rel=1e-9)
    assert lock.energy_loss > 0


def test_cyril_elastic_conserves_and_plastic_loses_predicted_energy_with_orbiter_chaser():
    rng = np.random.default_rng(5)
    mO, sO = _random_body(rng, "O", 5000.0)
    mT, sT = _random_body(rng, "T", 800.0)
    n = np.array([0.0, 0.0, 1.0])  # from payload towards orbiter
    c = sT.p_WoBo_W + np.array([0.2, -0.1, 0.5])
    sT = rb.RigidBodyState(sT.p_WoBo_W, sT.quat_WB, np.array([0.0, 0.0, 1.0]), sT.w_WB_B)
    M, J = dc.orbiter_chaser(mO.mass, rb.inertia_W(mO, sO), c - sO.p_WoBo_W)
    psid = np.r_[sO.R_WB @ sO.w_WB_B, sO.v_WBo_W]
    KE0 = rb.kinetic_energy(mO, sO) + rb.kinetic_energy(mT, sT)
    args = (M, J, psid, mT.mass, rb.inertia_W(mT, sT), c - sT.p_WoBo_W, sT.v_WBo_W, sT.R_WB @ sT.w_WB_B)
    el = im.nonplastic_impact_payload(*args, n, 0.0, 0.0)
    KE_el = 0.5 * el.psid_f @ M @ el.psid_f + 0.5 * mT.mass * el.v_pf @ el.v_pf \
        + 0.5 * el.w_pf @ rb.inertia_W(mT, sT) @ el.w_pf
    assert KE_el == pytest.approx(KE0, rel=1e-9)
    assert np.linalg.norm(el.impulse_W) > 0
    pl = im.plastic_impact_payload(*args)
    KE_pl = 0.5 * pl.psid_f @ M @ pl.psid_f + 0.5 * mT.mass * pl.v_pf @ pl.v_pf \
        + 0.5 * pl.w_pf @ rb.inertia_W(mT, sT) @ pl.w_pf
    # point (3-DOF) plastic contact: loss = ½ uᵀ (K_O + K_T)⁻¹ u with u the contact-point relative velocity
    KO = rb.point_mobility(mO, sO, c - sO.p_WoBo_W)
    KT = rb.point_mobility(mT, sT, c - sT.p_WoBo_W)
    u = J @ psid - rb.point_velocity(sT, sT.R_WB.T @ (c - sT.p_WoBo_W))
    assert KE0 - KE_pl == pytest.approx(0.5 * u @ np.linalg.solve(KO + KT, u), rel=1e-9)


def test_capture_check_reports_each_violated_limit():
    env = dc.CaptureEnvelope()
    XE = np.eye(4)
    XG = pose(Rotation.from_rotvec([0, 0, np.radians(5)]).as_matrix(), [0.05, 0.05, 0.0])
    ok, reason, m = dc.capture_check(XE, XG, np.zeros(6), np.zeros(6), env)
    assert ok and reason == "" and m["lateral"] == pytest.approx(0.05) and m["tilt"] == pytest.approx(np.radians(5))
    XG = pose(Rotation.from_rotvec([np.radians(20), 0, 0]).as_matrix(), [0.0, 0.3, 0.0])
    ok, reason, m = dc.capture_check(XE, XG, np.zeros(6), np.r_[0, 0, 0, 0.1, 0, 0], env)
    assert not ok
    assert "lateral 0.3" in reason and "roll 0.349" in reason and "rate_lin 0.1" in reason
    assert "tilt" not in reason and m["roll"] == pytest.approx(np.radians(20))


def test_latch_check_and_latch_wrench_restore_the_frozen_pose():
    crit = dc.LatchCriteria()
    ok, reason = dc.latch_check(pose(np.eye(3), [0.0, 0.0, 0.05]), np.zeros(6), np.eye(4), crit)
    assert not ok and "position 0.05" in reason
    ok, _ = dc.latch_check(pose(np.eye(3), [0.0, 0.0, 0.005]), np.r_[0, 0, 0, 0, 0, 0.005], np.eye(4), crit)
    assert ok
    R = Rotation.from_rotvec([0.0, 0.01, 0.0]).as_matrix()
    F = dc.latch_wrench(np.eye(4), np.zeros(6), pose(R, [0.001, 0, 0]), np.zeros(6), np.eye(4), 1e6, 1e7, 0, 0)
    np.testing.assert_allclose(F, [0, -1e5, 0, -1e3, 0, 0], atol=1e-6)


def test_smooth_stroke_is_rest_to_rest_and_its_slope_is_its_derivative():
    assert dc.smooth_stroke(-0.1) == (0.0, 0.0) and dc.smooth_stroke(0.0) == (0.0, 0.0)
    assert dc.smooth_stroke(1.0) == (1.0, 0.0) and dc.smooth_stroke(1.7) == (1.0, 0.0)
    tau = np.linspace(0.001, 0.999, 500)
    s = np.array([dc.smooth_stroke(t)[0] for t in tau])
    ds = np.array([dc.smooth_stroke(t)[1] for t in tau])
    assert np.all(np.diff(s) > 0) and dc.smooth_stroke(0.5)[0] == pytest.approx(0.5, abs=1e-15)
    e = 1e-6  # central differences of s against the reported slope (closed form 30 τ² (1 − τ)²)
    fd = [(dc.smooth_stroke(t + e)[0] - dc.smooth_stroke(t - e)[0]) / (2 * e) for t in tau]
    np.testing.assert_allclose(ds, fd, atol=1e-8)
    assert max(ds) == pytest.approx(1.875, rel=1e-4)  # peak at τ = ½: 30/16
    # rest at both ends: slope and acceleration vanish there
    assert dc.smooth_stroke(1e-4)[1] < 1e-6 and dc.smooth_stroke(1 - 1e-4)[1] < 1e-6


def test_latch_drive_moves_the_set_point_home_along_the_line_and_the_geodesic():
    R0 = Rotation.from_rotvec([0.02, -0.01, 0.03])
    X0 = pose(R0.as_matrix(), [0.03, -0.04, 0.01])
    X1 = pose(np.eye(3), [0.0, 0.0, 0.0])
    drive = dc.LatchDrive(X0, X1, 4.0)
    p, R, v, w = drive.setpoint(0.0)
    np.testing.assert_allclose(p, X0[:3, 3], atol=1e-15)
    np.testing.assert_allclose(np.reshape(R, (3, 3)), X0[:3, :3], atol=1e-15)
    assert v == [0.0] * 3 and w == [0.0] * 3
    p, R, v, w = drive.setpoint(4.0)
    assert p == X1[:3, 3].tolist() and np.array_equal(np.reshape(R, (3, 3)), X1[:3, :3]) and v == w == [0.0] * 3
    angle0 = R0.magnitude()
    for t in (0.7, 2.0, 3.1):
        s, _ = dc.smooth_stroke(t / 4.0)
        p, R, v, w = drive.setpoint(t)
        np.testing.assert_allclose(p, (1 - s) * X0[:3, 3], atol=1e-15)  # on the straight line
        # on the geodesic: the angle to each end is s and 1 − s of the whole
        a_start = Rotation.from_matrix(X0[:3, :3].T @ np.reshape(R, (3, 3))).magnitude()
        a_end = Rotation.from_matrix(np.reshape(R, (3, 3))).magnitude()
        assert a_start == pytest.approx(s * angle0, rel=1e-9) and a_end == pytest.approx((1 - s) * angle0, rel=1e-9)
        # the reported rates are the set point's time derivatives (central differences)
        e = 1e-5
        pa, Ra, _, _ = drive.setpoint(t + e)
        pb, Rb, _, _ = drive.setpoint(t - e)
        np.testing.assert_allclose(v, (np.array(pa) - np.array(pb)) / (2 * e), atol=1e-9)
        dR = (np.reshape(Ra, (3, 3)) - np.reshape(Rb, (3, 3))) / (2 * e) @ np.reshape(R, (3, 3)).T  # [ω×]
        np.testing.assert_allclose(w, [dR[2, 1], dR[0, 2], dR[1, 0]], atol=1e-9)
    with pytest.raises(ModelError, match="close_time"):
        dc.LatchDrive(X0, X1, 0.0)


@pytest.mark.parametrize("exponent", [1.0, 1.5])
def test_point_plane_forces_are_hunt_crossley_and_friction_coefficient(exponent):
    """What the contact service runs (point_plane_rows, in any frame; point_plane in W) is the
    documented law: the normal part of the force is hunt_crossley's F_n, the tangential part
    friction_coefficient's μ F_n against the slip, the power the law's P_d; nothing else."""
    rng = np.random.default_rng(5)
    law = dc.ContactLaw(2e5, exponent, 5.0, 0.3, 0.2, 0.002)
    Rm = Rotation.random(random_state=7).as_matrix()  # the plane's frame, as the service uses L
    hits = slips = 0
    for _ in range(400):
        p, s, n = rng.normal(size=3) * 0.05, rng.normal(size=3) * 0.05, rng.normal(size=3)
        n /= np.linalg.norm(n)
        scale = rng.choice([0.0005, 0.01])  # slips below and above v_stick
        vP, vS = rng.normal(size=3) * scale, rng.normal(size=3) * scale
        d, u = p - s, vP - vS
        delta, delta_dot = -d @ n, -u @ n
        lateral = np.linalg.norm(d - (d @ n) * n)
        inside = delta > 0.0 and delta <= 0.1 and lateral <= 0.15
        F_n, F_e = dc.hunt_crossley(delta, delta_dot, law)
        u_t = u - (u @ n) * n
        slip = float(np.linalg.norm(u_t))
        mu = dc.friction_coefficient(slip, law)
        f_expect = F_n * n - (mu * F_n / slip) * u_t if inside else np.zeros(3)
        P_expect = (F_n - F_e) * delta_dot + mu * F_n * slip if inside else 0.0
        pc = dc.point_plane(p, vP, s, n, vS, law, 0.15, 0.1)
        assert pc.active == inside
        np.testing.assert_allclose(pc.f_W, f_expect, rtol=1e-12, atol=1e-9)
        assert pc.power_dissipated == pytest.approx(P_expect, rel=1e-12, abs=1e-12)
        r = dc.point_plane_rows(*(Rm.T @ d), *(Rm.T @ u), *(Rm.T @ n), law, 0.15, 0.1)
        assert r[0] == inside
        np.testing.assert_allclose(Rm @ np.array(r[3:6]), f_expect, rtol=1e-12, atol=1e-9)
        assert r[6] == pytest.approx(P_expect, rel=1e-12, abs=1e-12)
        hits += inside
        slips += inside and slip > law.v_stick
    assert 40 < hits < 360 and 0 < slips < hits  # contacts, in stick and in slip


# ---------------------------------------------------------------- the latches as a constraint


def test_latch_drive_acceleration_is_the_derivative_of_its_rates():
    drive = dc.LatchDrive(pose(Rotation.from_rotvec([0.01, -0.02, 0.015]).as_matrix(), [0.03, -0.02, 0.04]),
                          np.eye(4), 3.0)
    dt = 1e-6
    for t in (0.1, 0.7, 1.5, 2.2, 2.9):
        _, _, v0, w0 = drive.setpoint(t - dt)
        _, _, v1, w1 = drive.setpoint(t + dt)
        a, wd = drive.acceleration(t)
        np.testing.assert_allclose(a, (np.array(v1) - v0) / (2 * dt), rtol=1e-6, atol=1e-12)
        np.testing.assert_allclose(wd, (np.array(w1) - w0) / (2 * dt), rtol=1e-6, atol=1e-12)
    assert drive.acceleration(-0.1) == ([0.0] * 3, [0.0] * 3) and drive.acceleration(3.1) == ([0.0] * 3, [0.0] * 3)


def test_latch_constraint_wrench_gives_the_body_the_set_points_motion_with_baumgartes_correction():
    """Applied with the other forces to a rigid body in orbit (dynamics.rigid_body's own equations, gravity
    gradient and Clohessy–Wiltshire on), the wrench makes B's classical acceleration that of the set point
    corrected by Baumgarte: ω̇ = ω̇_R − 2α Δω − β² θ, a_B = a_R − 2α Δv − β² Δp, to round-off."""
    from dynamics.orbit import CircularOrbit
    from dynamics.spatial import rotation_vector

    rng = np.random.default_rng(7)
    orbit = CircularOrbit.from_altitude(400e3, gravity_gradient=True)
    I_T = np.array([[2.0e4, 300.0, -200.0], [300.0, 4.6e4, 150.0], [-200.0, 150.0, 4.5e4]])
    model = rb.RigidBodyModel("payload", 12000.0, I_T)
    R_WT = Rotation.from_rotvec([0.3, -0.2, 0.5]).as_matrix()
    st = rb.RigidBodyState(np.array([1.0, -2.0, 3.0]), Rotation.from_matrix(R_WT).as_quat(scalar_first=True),
                           rng.normal(scale=1e-3, size=3), rng.normal(scale=1e-3, size=3))
    p_TB_T, R_TB = np.array([-0.5, 0.1, 0.2]), Rotation.from_rotvec([0.0, 0.1, 0.0]).as_matrix()
    w_W = R_WT @ st.w_WB_B
    p_B = st.p_WoBo_W + R_WT @ p_TB_T
    R_WB = R_WT @ R_TB
    V_B = np.concatenate([w_W, st.v_WBo_W + np.cross(w_W, p_B - st.p_WoBo_W)])
    # a set point 2 mm and 1 mrad away, moving and accelerating; other forces on the body
    p_R = p_B + [0.002, -0.001, 0.0005]
    R_WR = Rotation.from_rotvec([1e-3, 0.0, -5e-4]).as_matrix() @ R_WB
    V_R = V_B + rng.normal(scale=1e-3, size=6)
    A_R = rng.normal(scale=1e-3, size=6)
    F_other = rng.normal(scale=50.0, size=6)                # about the CoM, in W
    a_free, wd_free_T = rb.accelerations_rows(model, st, F_other.tolist(), orbit)
    alpha, beta = 15.0, 20.0
    F_B = dc.latch_constraint_wrench_rows(12000.0, tuple(I_T.ravel()), st.p_WoBo_W.tolist(),
                                          tuple(R_WT.ravel()), w_W.tolist(), a_free, (R_WT @ wd_free_T).tolist(),
                                          p_B.tolist(), tuple(R_WB.ravel()), V_B.tolist(), p_R.tolist(),
                                          tuple(R_WR.ravel()), V_R.tolist(), A_R.tolist(), alpha, beta)
    F_c = np.concatenate([np.asarray(F_B[:3]) + np.cross(p_B - st.p_WoBo_W, F_B[3:]), F_B[3:]])   # about the CoM
    a_T, wd_T = rb.accelerations_rows(model, st, (F_other + F_c).tolist(), orbit)
    wd = R_WT @ wd_T
    rB = p_B - st.p_WoBo_W
    a_B = np.asarray(a_T) + np.cross(wd, rB) + np.cross(w_W, np.cross(w_W, rB))
    th = rotation_vector(R_WB @ R_WR.T)
    np.testing.assert_allclose(wd, A_R[:3] - 2 * alpha * (V_B[:3] - V_R[:3]) - beta**2 * th, rtol=1e-9, atol=1e-13)
    np.testing.assert_allclose(a_B, A_R[3:] - 2 * alpha * (V_B[3:] - V_R[3:]) - beta**2 * (p_B - p_R), rtol=1e-9,
                               atol=1e-13)
