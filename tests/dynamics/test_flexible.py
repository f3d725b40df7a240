"""Chains with assumed-mode beam links (dynamics.flexible through dynamics.chain).

References: closed-form beam frequencies (clamped–free and hinged–free), Pinocchio on the
rigid equivalent chain (instantaneously at zero deflection, and as EI → ∞ along a
trajectory), Lagrange's equations from the mass matrix alone (finite differences),
conservation of energy and momentum, and the Ex-GIT identity G* = J M⁻¹ Jᵀ.
"""

from dataclasses import replace

import numpy as np
import pinocchio as pin
import pytest
import scipy.linalg as sla
from conftest import base_T, pin_from_chain, pin_q, pin_vdot_to_ours, random_chain, rel_err, sym_upper
from scipy.integrate import solve_ivp
from scipy.optimize import brentq

from dynamics import beam as bm
from dynamics import cases, exgit, impact
from dynamics import chain as ch
from errors import ModelError, ShapeError

L_C, RHO_A_C, EI_C = 8.13, 20.0 / 8.13, 881.0  # Cyril et al. 1998, Table 1


def one_link(beam: bm.BeamLink) -> ch.ChainModel:
    """A ground-based revolute joint about z carrying one beam link (no other mass)."""
    X = np.tile(np.eye(4), (2, 1, 1))
    m = ch.chain_from_table(["ground", "link"], [-1, 0], ["fixed_base", "revolute"], X, [[0, 0, 1], [0, 0, 1]],
                            [0.0, 1.0], np.zeros((2, 3)), np.zeros((2, 3, 3)))
    return ch.with_beams(m, {1: beam})


def frequencies(model: ch.ChainModel, q: np.ndarray, locked: int = 0) -> np.ndarray:
    """Linearized frequencies [Hz] about q (at rest) with the first ``locked`` coordinates held."""
    data = ch.make_data(model)
    M = ch.mass_matrix(model, data, q)[locked:, locked:]
    K = np.zeros_like(M)
    K[-model.ne:, -model.ne:] = model.flex.K
    lam = sla.eigh(K, M, eigvals_only=True)
    return np.sqrt(np.maximum(lam, 0.0)) / (2.0 * np.pi)


# ----------------------------------------------------------------------------- beam modes


@pytest.mark.parametrize("field", ["y", "z", "torsion"])
def test_clamped_free_frequencies_match_closed_form(field):
    kw = {"modes_y": 0}
    if field == "y":
        kw = {"modes_y": 3}
    elif field == "z":
        kw = {"modes_y": 0, "modes_z": 3, "EI_z": 2.5 * EI_C}
    else:
        kw = {"modes_y": 0, "modes_torsion": 3, "GJ": 700.0, "polar_mass_per_length": 0.04}
    model = one_link(bm.BeamLink(L_C, RHO_A_C, EI_C, **kw))
    f = frequencies(model, ch.neutral(model), locked=1)[:3]
    if field == "torsion":
        ref = bm.clamped_free_torsion_frequencies(L_C, 700.0, 0.04, 3)
    else:
        EI = EI_C if field == "y" else 2.5 * EI_C
        ref = np.array([1.8751, 4.6941, 7.8548]) ** 2 * np.sqrt(EI / (RHO_A_C * L_C ** 4)) / (2 * np.pi)
    assert np.all(np.abs(f / ref - 1.0) < 0.005), (f, ref)


def test_polynomial_basis_converges_to_clamped_free_closed_form():
    """Rayleigh–Ritz with (x/L)^(k+1): from above, monotone in N, within 0.5 % from N = 6."""
    ref = np.array([1.8751, 4.6941, 7.8548]) ** 2 * np.sqrt(EI_C / (RHO_A_C * L_C ** 4)) / (2 * np.pi)
    prev = np.full(3, np.inf)
    errs = {}
    for N in range(3, 9):
        model = one_link(bm.BeamLink(L_C, RHO_A_C, EI_C, modes_y=N, shape="polynomial"))
        f = frequencies(model, ch.neutral(model), locked=1)[:3]
        assert np.all(f >= ref * (1 - 1e-4)) and np.all(f <= prev * (1 + 1e-12))
        errs[N] = f / ref - 1.0
        prev = f
    assert errs[3][2] > 0.5 and errs[5][2] > 0.005  # not yet converged
    assert all(np.all(np.abs(errs[N]) < 0.005) for N in (6, 7, 8))


def test_hinged_free_frequencies_converge_in_N():
    """The same link on a free joint: clamped–free modes plus the rigid rotation converge to the
    hinged–free beam, tan βL = tanh βL (βL = 3.9266, 7.0686, 10.2102), from above as N grows."""
    bl = [brentq(lambda x: np.tan(x) - np.tanh(x), k * np.pi + 0.1, (k + 0.25) * np.pi + 0.01) for k in (1, 2, 3)]
    ref = np.array(bl) ** 2 * np.sqrt(EI_C / (RHO_A_C * L_C ** 4)) / (2 * np.pi)
    np.testing.assert_allclose(bl, [3.9266, 7.0686, 10.2102], atol=1e-4)
    prev = np.full(3, np.inf)
    for N in range(3, 9):
        model = one_link(bm.BeamLink(L_C, RHO_A_C, EI_C, modes_y=N))
        f = frequencies(model, ch.neutral(model))[1:4]  # [0] is the rigid rotation
        assert np.all(f >= ref * (1 - 1e-9)) and np.all(f <= prev)
        if N >= 4:
            assert np.all(f / ref - 1.0 < 0.005), (N, f, ref)
        prev = f


def test_static_tip_loads_match_cantilever_theory():
    """A rigid body on the tip of a clamped beam loaded by a force or a moment: K η = Q_e gives
    the beam-theory tip deflections and slopes (exact with the quadratic and cubic shapes)."""
    L, EIy, EIz = 2.0, 300.0, 500.0
    X = np.tile(np.eye(4), (3, 1, 1))
    X[2, :3, 3] = [L, 0.0, 0.0]  # child at the tip
    base = ch.chain_from_table(["ground", "link", "tip"], [-1, 0, 1], ["fixed_base", "revolute", "revolute"], X,
                               [[0, 0, 1], [0, 0, 1], [1, 0, 0]], [0.0, 1.0, 0.5], np.zeros((3, 3)),
                               np.tile(0.01 * np.eye(3), (3, 1, 1)))
    fm = ch.with_beams(base, {1: bm.BeamLink(L, 1.0, EIy, EI_z=EIz, modes_y=2, modes_z=2, shape="polynomial")})
    d = ch.make_data(fm)
    q = ch.neutral(fm)
    for F_tip, u_ref, psi_ref in (
        ([0, 0, 0, 0, 3.0, 0], [0, 3.0 * L ** 3 / (3 * EIy), 0], [0, 0, 3.0 * L ** 2 / (2 * EIy)]),
        ([0, 0, 0, 0, 0, 2.0], [0, 0, 2.0 * L ** 3 / (3 * EIz)], [0, -2.0 * L ** 2 / (2 * EIz), 0]),
        ([0, 0, 5.0, 0, 0, 0], [0, 5.0 * L ** 2 / (2 * EIy), 0], [0, 0, 5.0 * L / EIy]),
        ([0, 4.0, 0, 0, 0, 0], [0, 0, -4.0 * L ** 2 / (2 * EIz)], [0, 4.0 * L / EIz, 0]),
    ):
        F = np.zeros((3, 6))
        F[2] = F_tip
        Q = ch.generalized_forces(fm, d, q, F)
        eta = np.linalg.solve(fm.flex.K, Q[-fm.ne:])
        qe = q.copy()
        qe[-fm.ne:] = eta
        u, psi = ch.tip_deflection(fm, qe, 1)
        np.testing.assert_allclose(u, u_ref, atol=1e-12)
        np.testing.assert_allclose(psi, psi_ref, atol=1e-12)
        X_tip = ch.forward_kinematics(fm, d, qe)[2]
        np.testing.assert_allclose(X_tip[:3, 3], [L, u_ref[1], u_ref[2]], atol=1e-12)


# ----------------------------------------------------------------------------- rigid limit


def beams_for(model: ch.ChainModel, scale: float = 1.0, **kw) -> dict[int, bm.BeamLink]:
    """Beam links on bodies 1 and 2 of a random chain (bending in both planes)."""
    return {1: bm.BeamLink(1.0, 2.0, 50.0 * scale, modes_y=1, modes_z=1, **kw),
            2: bm.BeamLink(0.8, 1.5, 40.0 * scale, modes_y=1, modes_z=1, **kw)}


def rigid_equivalent(model: ch.ChainModel, beams: dict[int, bm.BeamLink]) -> ch.ChainModel:
    """The chain with each beam's straight-rod inertia merged into its body's table inertia."""
    mass, com, inertia = np.array(model.mass), np.array(model.p_BoBcm_B), np.array(model.I_Bcm_B)
    for b, bk in beams.items():
        rod = np.diag([bk.polar_mass_per_length * bk.length, bk.mass * bk.length ** 2 / 12,
                       bk.mass * bk.length ** 2 / 12])
        total = pin.Inertia(float(mass[b]), com[b], inertia[b]) + pin.Inertia(
            bk.mass, np.array([0.5 * bk.length, 0.0, 0.0]), rod)
        mass[b], com[b], inertia[b] = total.mass, total.lever, total.inertia
    return ch.chain_from_table(model.names, model.parent, model.joint_type, model.X_PJ, model.axis_J, mass, com,
                               inertia)


@pytest.mark.parametrize("floating", [True, False])
def test_zero_deflection_matches_pinocchio_on_the_rigid_equivalent(rng, floating):
    """At η = 0, η̇ = 0 the base and joint blocks of M, the bias, Jacobians, momentum and KE
    are those of the rigid chain with straight-rod links."""
    for _ in range(3):
        base = random_chain(rng, 4, floating=floating, tree=True)
        bms = beams_for(base, polar_mass_per_length=0.3, modes_torsion=1, GJ=30.0)
        fm = ch.with_beams(base, bms, keep_rigid_inertia=True)
        rig = rigid_equivalent(base, bms)
        pm = pin_from_chain(rig)
        pd = pm.createData()
        q = ch.neutral(rig)
        if floating:
            q[:3] = rng.uniform(-1, 1, 3)
            q[3:7] = rng.normal(size=4)
            q[3:7] /= np.linalg.norm(q[3:7])
        q[-rig.n:] = rng.uniform(-np.pi, np.pi, rig.n)
        v = rng.normal(size=rig.nv)
        qf = np.concatenate([q, np.zeros(fm.ne)])
        vf = np.concatenate([v, np.zeros(fm.ne)])
        nr = rig.nv
        d = ch.make_data(fm)
        T = base_T(rig, q)
        Ti = np.linalg.inv(T)
        qp, vp = pin_q(pm, rig, q), Ti @ v
        M_pin = Ti.T @ sym_upper(pin.crba(pm, pd, qp)) @ Ti
        assert rel_err(ch.mass_matrix(fm, d, qf)[:nr, :nr], M_pin) <= 1e-9
        c = np.zeros(nr)
        if floating:
            c[3:6] = np.cross(v[:3], v[3:6])
        b_pin = Ti.T @ pin.rnea(pm, pd, qp, vp, np.zeros(pm.nv)) - M_pin @ c
        assert rel_err(ch.bias_forces(fm, d, qf, vf)[:nr], b_pin, np.abs(M_pin).max() * np.abs(v).max() ** 2) <= 1e-9
        # generalized accelerations with the elastic coordinates held (their rows dropped)
        tau = rng.normal(size=nr)
        Mf = ch.mass_matrix(fm, d, qf)
        rhs = tau - ch.bias_forces(fm, d, qf, vf)[:nr]
        a_pin = pin_vdot_to_ours(rig, q, v, pin.aba(pm, pd, qp, vp, T.T @ tau))
        assert rel_err(np.linalg.solve(Mf[:nr, :nr], rhs), a_pin) <= 1e-8
        P, L = ch.momentum(fm, d, qf, vf)
        P0, L0 = ch.momentum(rig, ch.make_data(rig), q, v)
        assert rel_err(np.concatenate([P, L]), np.concatenate([P0, L0])) <= 1e-10
        assert abs(ch.kinetic_energy(fm, d, qf, vf) - pin.computeKineticEnergy(pm, pd, qp, vp)) <= 1e-10 * abs(
            pin.computeKineticEnergy(pm, pd, qp, vp))
        X = ch.forward_kinematics(fm, d, qf)
        np.testing.assert_allclose(X, ch.forward_kinematics(rig, ch.make_data(rig), q), atol=1e-12)


def test_stiff_beams_converge_to_the_rigid_chain_along_a_trajectory(rng):
    """EI → ∞: the joint motion of the flexible chain tends to Pinocchio's rigid one, error ∝ 1/EI."""
    base = random_chain(np.random.default_rng(5), 3, floating=False, prismatic=False)
    rig = rigid_equivalent(base, beams_for(base))
    pm = pin_from_chain(rig)
    pd = pm.createData()
    q0, v0 = np.array([0.3, -0.7, 1.1]), np.array([0.3, -0.4, 0.2])
    ts = np.linspace(0.0, 1.0, 11)
    ref = solve_ivp(lambda t, y: np.concatenate([y[3:], pin.aba(pm, pd, y[:3], y[3:], np.zeros(3))]),
                    (0.0, 1.0), np.concatenate([q0, v0]), method="DOP853", t_eval=ts, rtol=1e-11, atol=1e-12).y[:3].T
    errs = []
    for scale in (1.0, 10.0, 100.0):
        fm = ch.with_beams(base, beams_for(base, scale), keep_rigid_inertia=True)
        tr = ch.simulate(fm, ch.make_data(fm), np.concatenate([q0, np.zeros(fm.ne)]),
                         np.concatenate([v0, np.zeros(fm.ne)]), ts, rtol=1e-10, atol=1e-12)
        errs.append(np.abs(tr.q[:, :3] - ref).max())
    assert errs[0] > 1e-3  # the flexibility shows at the base stiffness
    assert errs[1] < errs[0] / 5 and errs[2] < errs[1] / 5, errs  # ∝ 1/EI: a factor 10 per decade


# ----------------------------------------------------------------------------- Lagrange, conservation


def test_bias_forces_are_lagrange_from_the_mass_matrix(rng):
    """C(q, v) v = Ṁ v − ½ ∂(vᵀ M v)/∂q, by central differences of M alone (fixed base)."""
    base = random_chain(rng, 3, floating=False, prismatic=True)
    fm = ch.with_beams(base, beams_for(base, polar_mass_per_length=0.2, modes_torsion=1, GJ=20.0))
    d = ch.make_data(fm)
    q = rng.uniform(-1, 1, fm.nq)
    q[fm.n:] *= 0.05
    v = rng.normal(size=fm.nv)
    h = 1e-6
    Mdot_v = (ch.mass_matrix(fm, d, q + h * v).copy() - ch.mass_matrix(fm, d, q - h * v).copy()) @ v / (2 * h)
    dT = np.array([(v @ ch.mass_matrix(fm, d, q + h * e) @ v - v @ ch.mass_matrix(fm, d, q - h * e) @ v) / (2 * h)
                   for e in np.eye(fm.nq)])
    lag = Mdot_v - 0.5 * dT
    assert rel_err(ch.bias_forces(fm, d, q, v), lag, np.abs(lag).max()) < 1e-7


def test_frame_jacobian_is_the_derivative_of_the_point(rng):
    base = random_chain(rng, 4, floating=True)
    fm = ch.with_beams(base, beams_for(base, polar_mass_per_length=0.2, modes_torsion=1, GJ=20.0))
    d = ch.make_data(fm)
    q = ch.neutral(fm)
    q[3:7] = [0.9, 0.1, -0.3, 0.2]
    q[3:7] /= np.linalg.norm(q[3:7])
    q[7:] = rng.uniform(-1, 1, fm.nq - 7)
    v = rng.normal(size=fm.nv)
    h = 1e-6
    for body, p in ((3, np.array([0.2, -0.1, 0.3])), (2, np.array([0.5, 0.0, 0.0])), (4, np.zeros(3))):
        J = ch.frame_jacobian(fm, d, q, body, p).copy()

        def point(qq, body=body, p=p):
            X = ch.forward_kinematics(fm, d, qq)
            if fm.beams[body] is not None:  # neutral axis at station x, displaced
                return ch.beam_points(fm, d, qq, body, [p[0]])[0]
            return X[body, :3, 3] + X[body, :3, :3] @ p

        vel = (point(ch.integrate(fm, q, v, h)) - point(ch.integrate(fm, q, v, -h))) / (2 * h)
        np.testing.assert_allclose(J[3:] @ v, vel, rtol=0, atol=1e-7 * np.abs(vel).max())


def test_external_wrench_and_inverse_dynamics(rng):
    """Σ J_bᵀ F_b by virtual power, and inverse dynamics undoes forward dynamics (damped beams)."""
    base = random_chain(rng, 4, floating=True)
    fm = ch.with_beams(base, beams_for(base, damping_ratio=0.05))
    d = ch.make_data(fm)
    q = ch.neutral(fm)
    q[7:] = rng.uniform(-1, 1, fm.nq - 7) * 0.3
    v = rng.normal(size=fm.nv)
    F = rng.normal(size=(fm.nb, 6))
    J_all = [ch.frame_jacobian(fm, d, q, b).copy() for b in range(fm.nb) if fm.beams[b] is None]
    rigid = [b for b in range(fm.nb) if fm.beams[b] is None]
    Fr = np.zeros_like(F)
    Fr[rigid] = F[rigid]
    virtual_power = sum(J.T @ F[b] for J, b in zip(J_all, rigid, strict=True))
    assert rel_err(ch.generalized_forces(fm, d, q, Fr), virtual_power) < 1e-12
    tau = rng.normal(size=fm.nv)
    a = ch.forward_dynamics(fm, d, q, v, tau, F).copy()
    assert rel_err(a, ch.forward_dynamics_dense(fm, d, q, v, tau, F)) < 1e-10
    assert rel_err(ch.inverse_dynamics(fm, d, q, v, a, F), tau) < 1e-10
    U, dd = ch.mass_matrix_udu(fm, d, q)
    assert rel_err(U @ np.diag(dd) @ U.T, ch.mass_matrix(fm, d, q)) < 1e-12


def test_torque_free_flexible_chain_conserves_energy_and_momentum_over_60_s():
    """Cyril's spacecraft with two flexible links (bending in and out of plane, torsion) and a
    hand, tumbling in 3D with the links vibrating: energy, linear and angular momentum to 1e-9."""
    case, _ = cases.cyril_1998_system()
    beam = bm.BeamLink(L_C, RHO_A_C, EI_C, modes_y=1, modes_z=1, modes_torsion=1, GJ=5.0,
                       polar_mass_per_length=0.05)
    fm = ch.with_beams(case.model, {1: beam, 2: beam})
    d = ch.make_data(fm)
    rng = np.random.default_rng(3)
    q = np.concatenate([case.q, rng.normal(scale=0.05, size=fm.ne)])
    v = np.concatenate([case.v, rng.normal(scale=0.05, size=fm.ne)])
    v[:6] = [0.001, -0.002, 0.003, 0.01, 0.02, -0.01]

    def invariants(qq, vv):
        P, L = ch.momentum(fm, d, qq, vv)
        return ch.kinetic_energy(fm, d, qq, vv) + ch.potential_energy(fm, qq), P, L

    E0, P0, L0 = invariants(q, v)
    tr = ch.simulate(fm, d, q, v, np.linspace(0.0, 60.0, 31), rtol=1e-10, atol=1e-12)
    assert np.abs(tr.q[:, -fm.ne:]).max() > 0.02  # the links do vibrate
    for k in range(tr.t.size):
        E, P, L = invariants(tr.q[k], tr.v[k])
        assert abs(E - E0) <= 1e-9 * E0
        assert np.linalg.norm(P - P0) <= 1e-9 * np.linalg.norm(P0)
        assert np.linalg.norm(L - L0) <= 1e-9 * np.linalg.norm(L0)


def test_structural_damping_decays_a_clamped_mode_at_its_ratio():
    """With the joint held the link's free vibration is linear: its first mode decays as
    exp(−ζ ω t) cos(ω_d t), ω_d = ω √(1 − ζ²), with ω the closed-form clamped frequency."""
    zeta = 0.02
    model = one_link(bm.BeamLink(L_C, RHO_A_C, EI_C, modes_y=2, damping_ratio=zeta))
    w1 = 2 * np.pi * bm.clamped_free_frequencies(L_C, EI_C, RHO_A_C, 1)[0]
    Mee = ch.mass_matrix(model, ch.make_data(model), ch.neutral(model))[1:, 1:]
    K, D = model.flex.K, model.flex.D
    A = np.block([[np.zeros((2, 2)), np.eye(2)], [-np.linalg.solve(Mee, K), -np.linalg.solve(Mee, D)]])
    for t in (1.0, 7.3, 20.0):
        x = sla.expm(A * t) @ np.array([0.1, 0.0, 0.0, 0.0])
        wd = w1 * np.sqrt(1 - zeta ** 2)
        ref = 0.1 * np.exp(-zeta * w1 * t) * (np.cos(wd * t) + zeta / np.sqrt(1 - zeta ** 2) * np.sin(wd * t))
        assert abs(x[0] - ref) < 1e-9


# ----------------------------------------------------------------------------- Ex-GIT and impact


def test_exgit_with_elastic_coordinates_is_the_hand_mobility():
    """With free joints and free elastic coordinates G* = J M⁻¹ Jᵀ (Yoshida seed 000 eqs. 8–13)."""
    case, _ = cases.cyril_1998_system()
    beam = bm.BeamLink(L_C, RHO_A_C, EI_C, modes_y=2, modes_z=1)
    fm = ch.with_beams(case.model, {1: beam, 2: beam})
    d = ch.make_data(fm)
    q = np.concatenate([case.q, 0.01 * np.arange(fm.ne)])
    G = exgit.exgit(fm, d, q, case.hand_body, case.p_BoHo_B)
    J = ch.frame_jacobian(fm, d, q, case.hand_body, case.p_BoHo_B)
    assert rel_err(G, J @ np.linalg.solve(ch.mass_matrix(fm, d, q), J.T)) < 1e-9
    # undeformed: the rigid chain is the flexible one with η̇ held at 0, so it is less mobile
    q = np.concatenate([case.q, np.zeros(fm.ne)])
    G = exgit.exgit(fm, d, q, case.hand_body, case.p_BoHo_B)
    G_rigid = exgit.exgit(case.model, ch.make_data(case.model), case.q, case.hand_body, case.p_BoHo_B)
    n = np.array([0.6, 0.8, 0.0])
    assert n @ G[3:, 3:] @ n > n @ G_rigid[3:, 3:] @ n  # the flexible hand is lighter (smaller virtual mass)
    Gl = exgit.exgit(fm, d, q, case.hand_body, case.p_BoHo_B, mu=1.0)  # joints locked, links still flexible
    Gl_rigid = exgit.exgit(case.model, ch.make_data(case.model), case.q, case.hand_body, case.p_BoHo_B, mu=1.0)
    assert n @ Gl[3:, 3:] @ n > n @ Gl_rigid[3:, 3:] @ n


def test_plastic_capture_gives_post_impact_elastic_rates_and_conserves_momentum():
    case, pl = cases.cyril_1998_system()
    beam = bm.BeamLink(L_C, RHO_A_C, EI_C, modes_y=2)
    fm = ch.with_beams(case.model, {1: beam, 2: beam})
    d = ch.make_data(fm)
    q = np.concatenate([case.q, np.zeros(fm.ne)])
    v = np.concatenate([case.v, np.zeros(fm.ne)])
    M = ch.mass_matrix(fm, d, q).copy()
    J = ch.frame_jacobian(fm, d, q, case.hand_body, case.p_BoHo_B)[3:].copy()
    res = impact.plastic_impact_payload(M, J, v, pl.mass, pl.I_Bcm_W, pl.p_BcmC_W, pl.V_WBcm_W[3:], pl.V_WBcm_W[:3])
    assert np.abs(res.psid_f[-fm.ne:]).max() > 1e-4  # the impact sets the links vibrating
    # contact points move together after a plastic impact
    np.testing.assert_allclose(J @ res.psid_f, res.v_pf + np.cross(res.w_pf, pl.p_BcmC_W), atol=1e-12)
    P0, L0 = ch.momentum(fm, d, q, v)
    P1, L1 = ch.momentum(fm, d, q, res.psid_f)
    X = ch.forward_kinematics(fm, d, q)
    p_cm = X[case.hand_body, :3, 3] + X[case.hand_body, :3, :3] @ case.p_BoHo_B - pl.p_BcmC_W
    P0 = P0 + pl.mass * pl.V_WBcm_W[3:]
    L0 = L0 + np.cross(p_cm, pl.mass * pl.V_WBcm_W[3:]) + pl.I_Bcm_W @ pl.V_WBcm_W[:3]
    P1 = P1 + pl.mass * res.v_pf
    L1 = L1 + np.cross(p_cm, pl.mass * res.v_pf) + pl.I_Bcm_W @ res.w_pf
    assert np.linalg.norm(P1 - P0) < 1e-10 * np.linalg.norm(P0)
    assert np.linalg.norm(L1 - L0) < 1e-10 * np.linalg.norm(L0)


# ----------------------------------------------------------------------------- input


def test_bad_beam_tables_are_refused():
    case, _ = cases.cyril_1998_system()
    beam = bm.BeamLink(L_C, RHO_A_C, EI_C)
    with pytest.raises(ModelError, match="base cannot be a beam"):
        ch.with_beams(case.model, {0: beam})
    with pytest.raises(ModelError, match="no body 'boom'"):
        ch.with_beams(case.model, {"boom": beam})
    with pytest.raises(ModelError, match="beams: 2 entries for 4 bodies"):
        replace(case.model, beams=(None, beam))
    fm = ch.with_beams(case.model, {"link1": beam})
    with pytest.raises(ShapeError, match="q: expected shape"):
        ch.mass_matrix(fm, ch.make_data(fm), case.q)
    with pytest.raises(ModelError, match="not a beam link"):
        ch.tip_deflection(fm, np.concatenate([case.q, np.zeros(fm.ne)]), 3)
