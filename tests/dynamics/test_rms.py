"""SRMS kinematics, the App. A Jacobian, RMSFM relations and the multibody arm (dynamics.rms)."""

from __future__ import annotations

import numpy as np
import pytest

from dynamics import chain as ch
from dynamics import rms
from dynamics import spatial as sp
from dynamics.cases import reference_path, srms_on_orbiter
from dynamics.urdf import chain_from_urdf
from errors import ModelError, ShapeError

FIXED = chain_from_urdf(reference_path("SRMS_Canadarm.urdf"), floating_base=False)
R_OS = sp.quat_to_rotation(sp.quat_normalize([0.9, 0.1, -0.2, 0.3]))  # a tilted shoulder, to test the frames
X_OS = sp.pose(R_OS, [10.7, -2.74, -1.70])
GEOM = rms.rms_geometry(FIXED, X_OS)


def random_theta(rng: np.random.Generator) -> np.ndarray:
    lo = np.maximum(GEOM.q_lower, -3.0)
    hi = np.minimum(GEOM.q_upper, 3.0)
    return rng.uniform(lo, hi)


def test_kinematics_and_app_a_jacobian_match_the_chain_core():
    """App. A's sum form vs dynamics.chain.frame_jacobian (motion-subspace form) on the same URDF."""
    rng = np.random.default_rng(1)
    data = ch.make_data(FIXED)
    R6 = np.kron(np.eye(2), R_OS)
    for _ in range(20):
        th = random_theta(rng)
        pose = rms.rms_kinematics(GEOM, th)
        X_SB = ch.forward_kinematics(FIXED, data, th)
        np.testing.assert_allclose(pose.X_OB, X_OS @ X_SB, atol=1e-12)
        J_S = ch.frame_jacobian(FIXED, data, th, 6, rms.EE_TIP_B6)
        np.testing.assert_allclose(rms.rms_jacobian(pose), R6 @ J_S, atol=1e-10)


def test_jacobian_matches_finite_differences_of_the_end_effector_pose():
    rng = np.random.default_rng(2)
    th = random_theta(rng)
    J = rms.rms_jacobian(rms.rms_kinematics(GEOM, th))
    eps = 1e-7
    for i in range(6):
        d = np.zeros(6)
        d[i] = eps
        Xp = rms.rms_kinematics(GEOM, th + d).X_OE
        Xm = rms.rms_kinematics(GEOM, th - d).X_OE
        v = (Xp[:3, 3] - Xm[:3, 3]) / (2 * eps)
        dR = (Xp[:3, :3] - Xm[:3, :3]) / (2 * eps) @ rms.rms_kinematics(GEOM, th).X_OE[:3, :3].T
        w = np.array([dR[2, 1], dR[0, 2], dR[1, 0]])
        np.testing.assert_allclose(J[:, i], np.concatenate([w, v]), atol=1e-6)


def test_power_balance_tau_dot_theta_equals_wrench_dot_relative_velocity():
    """Duality of 2-1 and 2-2: τ·θ̇ = F_e·V_R for F_e = J^-T τ and θ̇ = J^-1 V_R."""
    rng = np.random.default_rng(3)
    for _ in range(20):
        J = rms.rms_jacobian(rms.rms_kinematics(GEOM, random_theta(rng)))
        tau = rng.normal(scale=500.0, size=6)
        V = rng.normal(scale=0.05, size=6)
        F, _, _ = rms.tip_wrench(J, tau)
        thd, _, _ = rms.joint_rates(J, V)
        np.testing.assert_allclose(J.T @ F, tau, rtol=1e-9, atol=1e-9)
        assert abs(tau @ thd - F @ V) <= 1e-9 * (abs(tau) @ abs(thd) + 1e-12)


def test_relative_twist_is_the_derivative_of_the_relative_pose():
    """2-10/2-11 against the finite difference of the end-effector pose seen from the orbiter."""
    rng = np.random.default_rng(4)
    qO = sp.quat_normalize(rng.normal(size=4))
    qT = sp.quat_normalize(rng.normal(size=4))
    pO, pT = rng.normal(size=3), rng.normal(size=3) * 10
    wO, wT = rng.normal(scale=0.01, size=3), rng.normal(scale=0.02, size=3)
    vO, vT = rng.normal(scale=0.1, size=3), rng.normal(scale=0.1, size=3)
    pTE = rng.normal(size=3) * 3
    pOE = sp.quat_to_rotation(qO).T @ (pT + sp.quat_to_rotation(qT) @ pTE - pO)

    def rel(t):
        RO = sp.quat_to_rotation(sp.quat_integrate(qO, wO, t))
        RT = sp.quat_to_rotation(sp.quat_integrate(qT, wT, t))
        p = RO.T @ (pT + vT * t + RT @ pTE - pO - vO * t)
        return p, RO.T @ RT

    dt = 1e-5
    (p1, R1), (p0, R0) = rel(dt), rel(-dt)
    v_fd = (p1 - p0) / (2 * dt)
    dR = (R1 - R0) / (2 * dt) @ rel(0.0)[1].T
    w_fd = np.array([dR[2, 1], dR[0, 2], dR[1, 0]])
    V = rms.relative_twist(sp.quat_to_rotation(qO), wO, vO, pOE, sp.quat_to_rotation(qT), wT, vT, pTE)
    np.testing.assert_allclose(V, np.concatenate([w_fd, v_fd]), atol=1e-8)


def test_damped_least_squares_near_the_elbow_singularity():
    th = np.array([0.3, 0.8, -1e-4, 0.5, 0.2, 0.1])  # elbow straight: arm fully stretched
    J = rms.rms_jacobian(rms.rms_kinematics(GEOM, th))
    b = np.array([0.0, 0.0, 0.0, 0.05, 0.0, 0.0])
    x, smin, damped = rms.dls_solve(J, b, 0.05, 0.05)
    assert damped and smin < 0.05
    x_exact = np.linalg.solve(J, b)
    assert np.linalg.norm(x) < np.linalg.norm(x_exact)
    # away from a singularity: the exact solution
    J2 = rms.rms_jacobian(rms.rms_kinematics(GEOM, np.array([0.3, 0.8, -1.2, 0.5, 0.2, 0.1])))
    x2, s2, d2 = rms.dls_solve(J2, b, 0.05, 0.05)
    assert not d2 and s2 > 0.05
    np.testing.assert_allclose(x2, np.linalg.solve(J2, b), rtol=1e-10)


def test_bad_input_refused():
    with pytest.raises(ShapeError):
        rms.rms_kinematics(GEOM, [0.0] * 5)
    with pytest.raises(ShapeError):
        rms.rms_kinematics(GEOM, [0.0, np.nan, 0, 0, 0, 0])
    with pytest.raises(ModelError):
        rms.rms_geometry(srms_on_orbiter().model.__class__(
            names=("a", "b"), parent=(-1, 0), joint_type=("fixed_base", "revolute"),
            X_PJ=np.stack([np.eye(4)] * 2), axis_J=np.array([[0, 0, 0], [0, 0, 1.0]]), mass=np.array([0.0, 1.0]),
            p_BoBcm_B=np.zeros((2, 3)), I_Bcm_B=np.stack([np.eye(3)] * 2), q_lower=[-1.0], q_upper=[1.0],
            qd_max=[1.0], tau_max=[1.0]), np.eye(4))


def _orbiter_state(rng):
    case = srms_on_orbiter()
    q = case.q.copy()
    q[3:7] = sp.quat_normalize(rng.normal(size=4))
    q[:3] = rng.normal(size=3)
    v = np.concatenate([rng.normal(scale=0.01, size=3), rng.normal(scale=0.1, size=3),
                        rng.normal(scale=0.02, size=6)])
    return case, q, v


def test_prescribed_base_dynamics_agrees_with_free_floating_forward_dynamics():
    """Give the base the acceleration Saha's O(n) solver finds for the free system: the joint
    accelerations must agree, and the reaction must be exactly what accelerates the orbiter."""
    rng = np.random.default_rng(5)
    case, q, v = _orbiter_state(rng)
    model = case.model
    data = ch.make_data(model)
    tau = np.concatenate([np.zeros(6), rng.normal(scale=300.0, size=6)])
    vdot = ch.forward_dynamics(model, data, q, v, tau).copy()
    thdd, F_on_base = rms.prescribed_base_dynamics(model, data, q, v, vdot[:6], tau[6:])
    np.testing.assert_allclose(thdd, vdot[6:], rtol=1e-8, atol=1e-12)
    # the orbiter (base body alone) under the reaction: I a + v×*Iv = F
    own = rms._own_base_wrench(data, v[:6], vdot[:6])
    np.testing.assert_allclose(F_on_base, own, rtol=1e-7, atol=1e-9 * np.abs(own).max())


def test_multibody_tends_to_the_massless_arm_as_link_masses_vanish():
    """grappled_inverse_dynamics → (J^-T τ at Eo, its opposite at the shoulder) linearly in the mass scale."""
    rng = np.random.default_rng(6)
    case, q, v = _orbiter_state(rng)
    vdot = np.concatenate([rng.normal(scale=1e-3, size=6), rng.normal(scale=1e-3, size=6)])
    tau = rng.normal(scale=300.0, size=6)
    data = ch.make_data(case.model)
    X = ch.forward_kinematics(case.model, data, q)
    R_WB = X[0, :3, :3]
    # massless reference from the App. A Jacobian, expressed in W (the base frame is S, at q[:3])
    geom = rms.rms_geometry(case.model, sp.pose(R_WB, q[:3]), rms.EE_TIP_B6)
    pose = rms.rms_kinematics(geom, q[7:])
    F_ref, _, _ = rms.tip_wrench(rms.rms_jacobian(pose), tau)   # here "O" = W
    p_WoEo_W = pose.X_OE[:3, 3]
    F_base_ref = sp.shift_wrench(-F_ref, q[:3] - p_WoEo_W)
    errs = []
    for eps in (1e-2, 1e-3, 1e-4):
        m = rms.scale_link_masses(case.model, eps)
        F_E, F_B = rms.grappled_inverse_dynamics(m, ch.make_data(m), q, v, vdot, tau, rms.EE_TIP_B6)
        errs.append((np.abs(F_E - F_ref).max(), np.abs(F_B - F_base_ref).max()))
    scale = np.abs(F_ref).max()
    assert errs[-1][0] < 1e-3 * scale and errs[-1][1] < 1e-2 * np.abs(F_base_ref).max()
    # the error shrinks in proportion to the mass scale
    assert errs[0][0] / errs[1][0] == pytest.approx(10.0, rel=0.05)
    assert errs[1][1] / errs[2][1] == pytest.approx(10.0, rel=0.05)


def test_grappled_inverse_dynamics_is_consistent_with_forward_dynamics():
    """Apply the computed hand wrench back as an external force: forward dynamics reproduces v̇."""
    rng = np.random.default_rng(7)
    case, q, v = _orbiter_state(rng)
    model = case.model
    data = ch.make_data(model)
    vdot = np.concatenate([rng.normal(scale=1e-3, size=6), rng.normal(scale=1e-3, size=6)])
    tau = rng.normal(scale=300.0, size=6)
    F_E, F_B = rms.grappled_inverse_dynamics(model, data, q, v, vdot, tau, rms.EE_TIP_B6)
    X = ch.forward_kinematics(model, data, q)
    pE = X[6, :3, 3] + X[6, :3, :3] @ rms.EE_TIP_B6
    F_ext = np.zeros((model.nb, 6))
    F_ext[6] = sp.shift_wrench(-F_E, X[6, :3, 3] - pE)          # on the hand, about its origin
    own = rms._own_base_wrench(data, v[:6], vdot[:6])
    F_ext[0] = own - F_B                                         # the orbiter's push on the base
    acc = ch.forward_dynamics(model, data, q, v, np.concatenate([np.zeros(6), tau]), F_ext)
    np.testing.assert_allclose(acc, vdot, atol=1e-9)


# ---------------------------------------------------------------- auto-sequence profile


@pytest.mark.parametrize("d,phi,v,w,a,alpha", [
    (1.0, 0.05, 0.06, 0.0087, 0.001, 0.0001),     # long: reaches the peak speed, linear limits bind
    (0.05, 0.0, 0.05, 0.0785, 0.2, 0.05),         # short: two ramps
    (0.0, 0.2, 0.6, 0.0087, 0.2, 0.0002),         # attitude only
])
def test_auto_profile_respects_its_rate_and_acceleration_limits(d, phi, v, w, a, alpha):
    """σ from 0 to 1, monotone, smooth; speeds and accelerations by finite differences within the limits,
    and one of them at its limit (the profile is as fast as the limits allow)."""
    prof = rms.auto_profile(d, phi, v, w, a, alpha)
    t = np.linspace(-1.0, prof.duration + 1.0, 20001)
    s = np.array([prof.sigma(x) for x in t])
    dt = t[1] - t[0]
    sd = np.gradient(s, dt)
    sdd = np.gradient(sd, dt)
    assert s[0] == 0.0 and s[-1] == 1.0 and np.all(np.diff(s) >= -1e-15)
    assert np.max(np.abs(np.diff(sd))) < 1e-3 * np.max(sd)          # the rate is continuous
    peak_v, peak_a = np.max(sd), np.max(np.abs(sdd))
    assert peak_v * d <= v * (1 + 1e-3) and peak_v * phi <= w * (1 + 1e-3)
    assert peak_a * d <= a * (1 + 1e-2) and peak_a * phi <= alpha * (1 + 1e-2)
    at_limit = max(peak_v * d / v, peak_v * phi / w, peak_a * d / a, peak_a * phi / alpha)
    assert at_limit == pytest.approx(1.0, rel=1e-2)
    assert prof.duration >= 2.0 * prof.t_ramp


def test_auto_profile_refuses_bad_limits_and_handles_a_null_segment():
    assert rms.auto_profile(0.0, 0.0, 0.1, 0.1, 0.1, 0.1).duration == 0.0
    with pytest.raises(ModelError, match="a_max"):
        rms.auto_profile(1.0, 0.0, 0.1, 0.1, 0.0, 0.1)
    with pytest.raises(ModelError, match="distance"):
        rms.auto_profile(float("nan"), 0.0, 0.1, 0.1, 0.1, 0.1)


def test_regular_inverse_matches_numpy_and_reports_singular():
    rng = np.random.default_rng(11)
    A = rng.normal(size=(6, 6))
    np.testing.assert_allclose(rms.regular_inverse(A) @ A, np.eye(6), rtol=0, atol=1e-12)
    np.testing.assert_allclose(rms.regular_inverse(A), np.linalg.inv(A), rtol=1e-10, atol=1e-12)
    S = A.copy()
    S[:, 3] = 0.0
    assert rms.regular_inverse(S) is None
    with pytest.raises(ShapeError, match="square"):
        rms.regular_inverse(np.zeros((6, 5)))


def test_end_effector_twist_against_finite_differences():
    """E's twist in W, independently: differentiate E's position p_O(t) + R_WO(t) p_OE(t) and attitude
    R_WO(t) R_OE(t) numerically, the orbiter turning at ω_O (in O), E moving in O at v_R and turning at
    ω_R (in O) — the relative twist of 2-10, 2-11."""
    from scipy.spatial.transform import Rotation

    rng = np.random.default_rng(5)
    R0, R_OE0 = Rotation.random(2, random_state=rng)
    p_O0, v_O, w_O, p_OE0, v_R, w_R = (rng.normal(size=3) for _ in range(6))

    def R_WO(t):
        return (R0 * Rotation.from_rotvec(w_O * t)).as_matrix()

    def R_WE(t):
        return R_WO(t) @ (Rotation.from_rotvec(w_R * t) * R_OE0).as_matrix()

    def p_E(t):
        return p_O0 + v_O * t + R_WO(t) @ (p_OE0 + v_R * t)

    h = 1e-5
    W = (R_WE(h) - R_WE(-h)) / (2 * h) @ R_WE(0.0).T
    V_ref = np.array([W[2, 1], W[0, 2], W[1, 0], *((p_E(h) - p_E(-h)) / (2 * h))])
    V = rms.end_effector_twist(R_WO(0.0), w_O, v_O, p_O0, p_E(0.0), np.concatenate([w_R, v_R]))
    np.testing.assert_allclose(V, V_ref, rtol=0, atol=1e-8)
    with pytest.raises(ShapeError, match="V_R_O"):
        rms.end_effector_twist(R_WO(0.0), w_O, v_O, p_O0, p_E(0.0), w_R)


def test_shoulder_reaction_is_the_opposite_wrench_moved_to_the_shoulder():
    """Equal and opposite: the wrench on the payload at Eo plus the reaction at So sum to zero about any point."""
    rng = np.random.default_rng(9)
    F_E, p_E, p_S, x = rng.normal(size=6), rng.normal(size=3), rng.normal(size=3), rng.normal(size=3)
    F_S = rms.shoulder_reaction(F_E, p_E, p_S)

    def about_x(F, p):   # [τ + (p − x) × f; f], numpy's cross
        return np.concatenate([F[:3] + np.cross(p - x, F[3:]), F[3:]])

    np.testing.assert_allclose(about_x(F_E, p_E) + about_x(F_S, p_S), np.zeros(6), rtol=0, atol=1e-13)
    np.testing.assert_allclose(F_S, sp.shift_wrench(-F_E, p_S - p_E), rtol=0, atol=1e-14)
    with pytest.raises(ShapeError, match="p_WoSo_W"):
        rms.shoulder_reaction(F_E, p_E, [0.0, 0.0])
