"""Arm flexibility (SVDS App. B, section 3) and the first modes against the published bands."""

from __future__ import annotations

import numpy as np
import pytest

from dynamics import chain as ch
from dynamics import flexibility as fx
from dynamics import rms
from dynamics import servo as sv
from dynamics import spatial as sp
from dynamics.cases import ORBITER_INERTIA, ORBITER_MASS, SRMS_BASE_TO_ORBITER_COM, reference_path, srms_on_orbiter
from dynamics.urdf import chain_from_urdf
from errors import ModelError

FIXED = chain_from_urdf(reference_path("SRMS_Canadarm.urdf"), floating_base=False)
GEOM = rms.rms_geometry(FIXED, sp.pose(np.eye(3), -SRMS_BASE_TO_ORBITER_COM))
POSES = ([0.0, 0.5, -1.0, 0.5, 0.0, 0.0], [0.0, 1.2, -2.0, 0.8, 0.0, 0.0], [0.3, 0.9, -1.5, 0.6, 0.2, 0.1],
         [-0.5, 0.7, -0.8, -0.4, 0.3, 1.0])

# Design payload (reference README): 29,484 kg; a uniform cylinder 18.3 m long, 4.5 m in
# diameter (the largest payload), its CoM 3 m from the point of resolution along the
# end-effector axis (assumed).
M2 = 29484.0
R2, L2 = 2.25, 18.3
I2 = np.diag([0.5 * M2 * R2 ** 2, M2 * (3 * R2 ** 2 + L2 ** 2) / 12, M2 * (3 * R2 ** 2 + L2 ** 2) / 12])


def arm(theta):
    pose = rms.rms_kinematics(GEOM, theta)
    pts = np.vstack([pose.p_OoJo_O, pose.X_OE[:3, 3]])
    return pose, pts, rms.rms_jacobian(pose)


def test_beam_compliance_equals_the_sum_of_many_short_hinges():
    """B-7 closed form vs B-6 applied to a beam cut into 2000 short rotational hinges."""
    L, EI, GJ = 6.4, 1.2e7, 1.0e7
    n = 2000
    ds = L / n
    g = np.zeros((6, 6))
    for k in range(n):
        s = (k + 0.5) * ds
        gi = np.zeros((6, 6))
        gi[:3, :3] = np.diag([ds / GJ, ds / EI, ds / EI])
        Ls = fx.shift_matrix([L - s, 0.0, 0.0])
        g += Ls @ gi @ Ls.T
    np.testing.assert_allclose(g, fx.beam_compliance(L, EI, GJ), rtol=1e-6, atol=1e-18)
    gb = fx.beam_compliance(L, EI, GJ)
    assert gb[1, 5] < 0 and gb[2, 4] > 0 and np.all(gb[3] == 0.0)   # B-7 signs and sparsity
    assert np.count_nonzero(np.triu(gb)) == 7


@pytest.mark.parametrize("theta", POSES)
def test_gamma_and_gamma_J_symmetric_psd_and_3_7_terms(theta):
    pose, pts, J = arm(theta)
    g = fx.arm_flexibility(pts, pose.u_O)
    gJ = fx.joint_flexibility(J, g)
    for m in (g, gJ):
        np.testing.assert_allclose(m, m.T, rtol=0, atol=1e-12 * np.abs(m).max())
        assert np.linalg.eigvalsh(m).min() > -1e-12 * np.abs(m).max()
    ge = fx.servo_flexibility_terms(gJ)
    np.testing.assert_allclose(ge, 1.0 / np.diag(np.linalg.inv(gJ)), rtol=1e-9)
    assert np.all(ge > 0) and np.all(ge <= np.diag(gJ) * (1 + 1e-12))


def test_joint_flexibility_of_joint_springs_alone_is_diagonal():
    """γ from joint springs only is J diag(1/k) Jᵀ, so 3-4 must return diag(1/k) exactly."""
    k = np.array([3e5, 2e5, 1e5, 5e4, 4e4, 3e4])
    pose, pts, J = arm(POSES[2])
    g = fx.arm_flexibility(pts, pose.u_O, beams=(), joint_stiffness=k)
    np.testing.assert_allclose(fx.joint_flexibility(J, g), np.diag(1 / k), rtol=1e-8, atol=1e-14)
    np.testing.assert_allclose(fx.servo_flexibility_terms(np.diag(1 / k)), 1 / k, rtol=1e-12)


def test_passive_torques_balance_the_tip_load():
    """A tip load P deflects the tip by γP (3-1); δθ = J^-1 δ (3-3); 3-6 must give τ_F = −JᵀP (3-2)."""
    rng = np.random.default_rng(1)
    pose, pts, J = arm(POSES[1])
    g = fx.arm_flexibility(pts, pose.u_O)
    gJ = fx.joint_flexibility(J, g)
    P = rng.normal(size=6) * np.array([100, 100, 100, 20, 20, 20])
    dtheta = np.linalg.solve(J, g @ P)
    np.testing.assert_allclose(fx.passive_torques(gJ, dtheta), -J.T @ P, rtol=1e-8)


def test_two_body_mode_closed_form():
    """Two point-like bodies on a translational spring at their common point: √(k/μ)."""
    k = 2.0e4
    g = np.diag([1e-12, 1e-12, 1e-12, 1 / k, 1 / k, 1 / k])  # rotations stiff
    m1, m2 = 1.0e5, 3.0e4
    f = fx.first_mode_two_body(m1, np.eye(3) * 1e9, np.zeros(3), m2, np.eye(3) * 1e9, np.zeros(3), g)
    assert f == pytest.approx(np.sqrt(k * (m1 + m2) / (m1 * m2)) / (2 * np.pi), rel=1e-9)


def test_chain_mode_closed_form():
    """Two rotors on a free base, joint on both CoMs (decoupled): √(k (I1+I2)/(I1 I2))."""
    I1, I2, k = 50.0, 8.0, 300.0
    model = ch.chain_from_table(["a", "b"], [-1, 0], ["free", "revolute"], np.stack([np.eye(4)] * 2),
                                [[0, 0, 0], [0, 0, 1]], [10.0, 2.0], np.zeros((2, 3)),
                                [np.diag([1.0, 1.0, I1]), np.diag([1.0, 1.0, I2])])
    M = ch.mass_matrix(model, ch.make_data(model), ch.neutral(model))
    f = fx.first_mode_chain(M, [k])
    assert f == pytest.approx(np.sqrt(k * (I1 + I2) / (I1 * I2)) / (2 * np.pi), rel=1e-9)


HOLD = sv.hold_stiffness(sv.srms_servo_params(GEOM.tau_max, GEOM.qd_max))   # servos holding, in series


@pytest.mark.parametrize("theta", POSES)
def test_first_mode_with_the_design_payload_in_the_published_band(theta):
    """Massless flexible arm, orbiter and the 29,484 kg payload: 0.027–0.047 Hz (reference README).
    Motors locked: the full γ (passive) and the per-servo terms (active, diag(γ^e) in joint space);
    servos holding: each servo's holding stiffness in series with its 3-7 spring."""
    pose, pts, J = arm(theta)
    g = fx.arm_flexibility(pts, pose.u_O)
    gJ = fx.joint_flexibility(J, g)
    ge = fx.servo_flexibility_terms(gJ)
    pE = pose.X_OE[:3, 3]
    p2 = -pose.X_OE[:3, :3] @ np.array([3.0, 0.0, 0.0])
    for gg in (g, J @ np.diag(ge) @ J.T, J @ np.diag(ge + 1 / HOLD) @ J.T):
        f = fx.first_mode_two_body(ORBITER_MASS, ORBITER_INERTIA, pE, M2, I2, p2, gg)
        assert 0.027 <= f <= 0.047, f


@pytest.mark.parametrize("theta", POSES)
def test_first_mode_unloaded_multibody_in_the_published_band(theta):
    """Multibody arm (link masses) on the free orbiter, assumed joint stiffness: 0.35–0.71 Hz,
    motors locked and with the servos' holding stiffness in series."""
    case = srms_on_orbiter()
    q = case.q.copy()
    q[7:] = theta
    M = ch.mass_matrix(case.model, ch.make_data(case.model), q)
    k = fx.ASSUMED_JOINT_STIFFNESS
    for kk in (k, 1 / (1 / k + 1 / HOLD)):
        f = fx.first_mode_chain(M, kk)
        assert 0.35 <= f <= 0.71, f


def test_bad_beam_refused():
    with pytest.raises(ModelError):
        fx.beam_compliance(1.0, 0.0, 1.0)
    pose, pts, _ = arm(POSES[0])
    with pytest.raises(ModelError):
        fx.arm_flexibility(pts, pose.u_O, joint_stiffness=[1, 1, 1, 1, 1, -1])


def test_arm_flexibility_equals_hinge_discretization_of_the_five_beams():
    """B-6 over the five B-7 beams and the joints vs every beam cut into 400 short hinges in 3D."""
    pose, pts, J = arm(POSES[3])
    R_links = pose.X_OB[:, :3, :3]
    k = fx.ASSUMED_JOINT_STIFFNESS
    g_ref = J @ np.diag(1 / k) @ J.T
    n = 400
    for b in fx.ASSUMED_BEAMS:
        d = pts[b.tip] - pts[b.root]
        L = np.linalg.norm(d)
        R = fx.beam_frame(d, R_links[min(b.root + 1, 6)])
        C = R @ np.diag([L / n / b.GJ, L / n / b.EI, L / n / b.EI]) @ R.T
        for s in (np.arange(n) + 0.5) / n:
            G = np.zeros((6, 6))
            G[:3, :3] = C
            Ls = fx.shift_matrix(pts[6] - (pts[b.root] + s * d))
            g_ref += Ls @ G @ Ls.T
    g = fx.arm_flexibility(pts, pose.u_O)
    np.testing.assert_allclose(g, g_ref, rtol=1e-5, atol=1e-6 * np.abs(g).max())


# ---------------------------------------------------------------- flexible booms (assumed-mode beams)

def _capture_case(booms, mass=None, inertia=None):
    """The default scenario's arm holding its 12,000 kg payload (or another) where it captures it
    (E on G with the payload at its start pose), the payload merged into B7."""
    import tomllib
    from pathlib import Path

    from dynamics import cases

    cfg = tomllib.loads((Path(__file__).resolve().parents[2] / "configs" / "srms_berthing.toml").read_text())
    X_OT = sp.pose_inverse(sp.pose_from_vector(cfg["orbiter"]["X_WO"])) @ sp.pose_from_vector(cfg["payload"]["X_WT"])
    return cases.srms_holding_payload(
        payload_mass=cfg["payload"]["mass"] if mass is None else mass,
        payload_inertia_T=cfg["payload"]["inertia"] if inertia is None else inertia,
        X_TG=cfg["payload"]["X_TG"], X_OS=ch.pose_xyz_rpy(cfg["arm"]["p_OoSo_O"], cfg["arm"]["rpy_OS"]), X_OT=X_OT,
        theta_guess=np.array(cfg["arm"]["q0"]), booms=booms)


def _f1(model, q, k_joints):
    """First elastic frequency of the chain with joint springs (and the beams' own stiffness). [Hz]"""
    M = ch.mass_matrix(model, ch.make_data(model), q)
    K = np.zeros_like(M)
    K[6:12, 6:12] = np.diag(k_joints)
    if model.ne:
        K[12:, 12:] = model.flex.K
    import scipy.linalg

    lam = scipy.linalg.eigh(K, M, eigvals_only=True)
    return float(np.sqrt(max(lam[6], 0.0)) / (2 * np.pi))


def test_flexible_booms_first_modes_in_the_published_bands():
    """The multibody SRMS with its booms as beams (assumed section, 2 modes per plane) and the
    servos holding in series with the assumed gearbox springs: loaded by the scenario's payload at
    the capture pose, 0.027–0.047 Hz; unloaded, 0.35–0.71 Hz (reference README); the booms'
    flexibility lowers both against rigid booms."""
    from dynamics import cases

    k = fx.ASSUMED_JOINT_STIFFNESS
    k_hold = 1 / (1 / k + 1 / HOLD)
    booms = cases.srms_booms(2)
    rigid, flex = _capture_case(None), _capture_case(booms)
    f_rigid, f_flex = _f1(rigid.model, rigid.q, k_hold), _f1(flex.model, flex.q, k_hold)
    assert 0.027 <= f_flex <= 0.047, f_flex
    assert f_flex < 0.95 * f_rigid
    # motors locked (gearbox springs only) the design payload's mode lies in the band too
    M2_inertia = np.diag(I2)
    design = _capture_case(booms, mass=M2, inertia=M2_inertia)
    assert 0.027 <= _f1(design.model, design.q, k) <= 0.047
    case = srms_on_orbiter()
    model = cases.with_flexible_booms(case.model, booms)
    q = np.concatenate([case.q, np.zeros(model.ne)])
    for kk in (k, k_hold):
        assert 0.35 <= _f1(model, q, kk) <= 0.71
        assert _f1(model, q, kk) < _f1(case.model, case.q, kk)


def test_flexible_booms_keep_the_links_mass_properties():
    """The tube on the beam and the rigid rest together are the URDF link (mass, CoM, inertia)."""
    from dynamics import cases

    case = srms_on_orbiter()
    model = cases.with_flexible_booms(case.model, cases.srms_booms(1))
    q = np.concatenate([case.q, np.zeros(model.ne)])
    d0, d1 = ch.make_data(case.model), ch.make_data(model)
    M0, M1 = ch.mass_matrix(case.model, d0, case.q), ch.mass_matrix(model, d1, q)
    np.testing.assert_allclose(M1[:12, :12], M0, rtol=1e-10, atol=1e-9 * np.abs(M0).max())
    assert model.total_mass == pytest.approx(case.model.total_mass, rel=1e-12)
