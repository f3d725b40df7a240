"""dynamics.chain against Pinocchio (an independent implementation), conservation laws and bad input.

Pinocchio models are built independently: from the same parameter table for random
chains, and by Pinocchio's own URDF reader for the SRMS (orbiter base) and ETS-VII.
"""

import numpy as np
import pinocchio as pin
import pytest
from conftest import (
    base_T,
    pin_from_chain,
    pin_from_urdf,
    pin_point_jacobian,
    pin_q,
    pin_vdot_to_ours,
    random_chain,
    random_state,
    rel_err,
    sym_upper,
)

from dynamics import cases
from dynamics import chain as ch
from dynamics import spatial as sp
from errors import ModelError, ShapeError

TOL = 1e-9


def _compare_all(model, pm, q, v, tau, joint_of_body, hand_body, p_hand):
    """M, C v, forward dynamics (UDU^T and dense), FK, Jacobian, momentum, KE vs Pinocchio."""
    pd = pm.createData()
    data = ch.make_data(model)
    qp = pin_q(pm, model, q)
    T = base_T(model, q)
    Ti = np.linalg.inv(T)
    vp = Ti @ v
    # mass matrix: M_pin = T^T M T
    M = ch.mass_matrix(model, data, q)
    assert rel_err(M, Ti.T @ sym_upper(pin.crba(pm, pd, qp)) @ Ti) <= TOL
    # forward dynamics, with base wrench and joint torques
    a = ch.forward_dynamics(model, data, q, v, tau).copy()
    a_dense = ch.forward_dynamics_dense(model, data, q, v, tau)
    a_pin = pin_vdot_to_ours(model, q, v, pin.aba(pm, pd, qp, vp, T.T @ tau))
    assert rel_err(a, a_pin) <= TOL
    assert rel_err(a_dense, a_pin) <= TOL
    # bias: pin's rnea with zero *spatial* acceleration = ours with v̇ = [0, ω×v_Bo, 0]
    c = np.zeros(model.nv)
    if model.floating:
        c[3:6] = np.cross(v[:3], v[3:6])
    b_pin = Ti.T @ pin.rnea(pm, pd, qp, vp, np.zeros(pm.nv)) - M @ c
    floor = np.abs(M).max() * np.abs(v).max() ** 2  # the bias may vanish (one joint)
    assert rel_err(ch.bias_forces(model, data, q, v), b_pin, floor) <= TOL
    # inverse dynamics: pin.rnea at pin's (spatial) acceleration of our v̇
    tau_id = ch.inverse_dynamics(model, data, q, v, a_pin)
    a_sp = np.linalg.solve(T, a_pin - c)  # our v̇ → Pinocchio's spatial acceleration
    assert rel_err(tau_id, Ti.T @ pin.rnea(pm, pd, qp, vp, a_sp)) <= TOL
    assert rel_err(tau_id, tau) <= TOL
    # kinematics
    pin.forwardKinematics(pm, pd, qp, vp)
    pin.computeJointJacobians(pm, pd, qp)
    X = ch.forward_kinematics(model, data, q)
    for b in range(1, model.nb):
        jid = joint_of_body[b]
        np.testing.assert_allclose(X[b], pd.oMi[jid].homogeneous, atol=1e-12 * max(1.0, np.abs(X[b]).max()))
    J = ch.frame_jacobian(model, data, q, hand_body, p_hand)
    assert rel_err(J, pin_point_jacobian(pm, pd, model, q, joint_of_body[hand_body], p_hand)) <= TOL
    # centroidal momentum and CoM
    hg = pin.computeCentroidalMomentum(pm, pd, qp, vp)
    G_pin = pin.centerOfMass(pm, pd, qp)
    G = ch.center_of_mass(model, data, q)
    np.testing.assert_allclose(G, G_pin, rtol=0, atol=1e-12 * max(1.0, np.abs(G).max()))
    P, L = ch.momentum(model, data, q, v)
    L_G = L - np.cross(G, P)
    assert rel_err(np.concatenate([P, L_G]), np.concatenate([hg.linear, hg.angular])) <= TOL
    # kinetic energy
    ke_pin = pin.computeKineticEnergy(pm, pd, qp, vp)
    assert abs(ch.kinetic_energy(model, data, q, v) - ke_pin) <= TOL * abs(ke_pin)


@pytest.mark.parametrize("n", [1, 2, 6, 12])
@pytest.mark.parametrize("floating", [True, False])
def test_random_chains_match_pinocchio(rng, n, floating):
    for trial in range(3):
        model = random_chain(rng, n, floating=floating, tree=(trial == 2 and n > 2))
        pm = pin_from_chain(model)
        q, v = random_state(rng, model)
        tau = rng.normal(size=model.nv)
        if floating:
            tau[:6] = rng.normal(size=6)  # a base wrench too
        joint_of_body = [1 if floating else 0] + [b + (1 if floating else 0) for b in range(1, model.nb)]
        _compare_all(model, pm, q, v, tau, joint_of_body, model.nb - 1, rng.uniform(-1, 1, 3))


def _urdf_case(case, pm):
    joint_of_body = [1] + [pm.getJointId(jn) for jn in case.model.joint_names]
    return joint_of_body


def test_srms_on_orbiter_matches_pinocchio(rng):
    case = cases.srms_on_orbiter()
    pm = pin_from_urdf(cases.reference_path("SRMS_Canadarm.urdf"), base_mass=cases.ORBITER_MASS,
                       base_com=cases.SRMS_BASE_TO_ORBITER_COM, base_inertia=cases.ORBITER_INERTIA)
    for _ in range(3):
        q, v = random_state(rng, case.model, scale=0.05)
        tau = np.concatenate([np.zeros(6), rng.normal(scale=100.0, size=6)])
        _compare_all(case.model, pm, q, v, tau, _urdf_case(case, pm), case.hand_body, case.p_BoHo_B)


def test_etsvii_matches_pinocchio(rng):
    case = cases.etsvii()
    pm = pin_from_urdf(cases.reference_path("ETSVII.urdf"))
    for _ in range(3):
        q, v = random_state(rng, case.model, scale=0.2)
        tau = np.concatenate([np.zeros(6), rng.normal(scale=10.0, size=6)])
        _compare_all(case.model, pm, q, v, tau, _urdf_case(case, pm), case.hand_body, case.p_BoHo_B)


def test_external_wrench_equals_jacobian_transpose(rng):
    """F_ext on a body = the generalized force J_bᵀ F (checked against Pinocchio's fext in aba)."""
    model = random_chain(rng, 5)
    pm = pin_from_chain(model)
    pd = pm.createData()
    data = ch.make_data(model)
    q, v = random_state(rng, model)
    F = rng.normal(size=(model.nb, 6))
    tau = np.zeros(model.nv)
    a = ch.forward_dynamics(model, data, q, v, tau, F_ext=F).copy()
    # Pinocchio: fext per joint, in the joint (body) frame, about its origin, [f; τ].
    X = ch.forward_kinematics(model, data, q)
    fext = [pin.Force.Zero() for _ in range(pm.njoints)]
    for b in range(model.nb):
        R = X[b, :3, :3]
        fext[b + 1] = pin.Force(R.T @ F[b, 3:], R.T @ F[b, :3])
    qp = pin_q(pm, model, q)
    T = base_T(model, q)
    a_pin = pin_vdot_to_ours(model, q, v, pin.aba(pm, pd, qp, np.linalg.inv(T) @ v, np.zeros(pm.nv), fext))
    assert rel_err(a, a_pin) <= TOL
    scale = np.abs(ch.generalized_forces(model, data, q, F)).max()
    assert np.abs(ch.inverse_dynamics(model, data, q, v, a, F_ext=F)).max() <= TOL * scale
    gen = sum(ch.frame_jacobian(model, data, q, b).T @ F[b] for b in range(model.nb))
    assert rel_err(ch.generalized_forces(model, data, q, F), gen) <= 1e-12


def test_integrate_is_consistent_with_the_jacobian(rng):
    """d/dh of the body poses along integrate(q, v, h) equals J v (central differences)."""
    model = random_chain(rng, 4)
    data = ch.make_data(model)
    q, v = random_state(rng, model)
    h = 1e-6
    Xp = ch.forward_kinematics(model, data, ch.integrate(model, q, v, h)).copy()
    Xm = ch.forward_kinematics(model, data, ch.integrate(model, q, v, -h)).copy()
    for b in range(model.nb):
        V = ch.frame_jacobian(model, data, q, b) @ v
        dp = (Xp[b, :3, 3] - Xm[b, :3, 3]) / (2 * h)
        dR = (Xp[b, :3, :3] - Xm[b, :3, :3]) / (2 * h)
        R = ch.forward_kinematics(model, data, q)[b, :3, :3]
        np.testing.assert_allclose(dp, V[3:], atol=1e-7)
        np.testing.assert_allclose(dR, sp.skew(V[:3]) @ R, atol=1e-7)


def _simulate(model, q, v, tau_fn, h, t_end, every=10):
    """RK4 (chain.step_rk4) from (q, v); the largest |ΔP|, |ΔL|, |ΔE| seen every ``every`` steps."""
    data = ch.make_data(model)
    P0, L0 = ch.momentum(model, data, q, v)
    E0 = ch.kinetic_energy(model, data, q, v)
    dP = dL = dE = 0.0
    steps = int(round(t_end / h))
    for k in range(steps):
        q, v = ch.step_rk4(model, data, q, v, tau_fn(k * h, q, v), h)
        if k % every == 0 or k == steps - 1:
            P, L = ch.momentum(model, data, q, v)
            dP = max(dP, float(np.linalg.norm(P - P0)))
            dL = max(dL, float(np.linalg.norm(L - L0)))
            dE = max(dE, abs(ch.kinetic_energy(model, data, q, v) - E0))
    return q, v, (P0, L0, E0), (dP, dL, dE)


def test_rk4_is_fourth_order():
    """step_rk4 (RKMK on the base attitude): errors at h = 0.1, 0.05, 0.025 s against h = 0.8/256 s
    fall by ~16 per halving (reached 15.2 and 15.6) on ETS-VII tumbling under joint torques."""
    case = cases.etsvii()
    model, data = case.model, ch.make_data(case.model)
    v0 = np.concatenate([[0.3, -0.2, 0.4, 0.1, 0.2, -0.1], [1.0, -0.8, 0.6, 1.2, -1.0, 0.9]])
    tau = np.concatenate([np.zeros(6), [5.0, -3.0, 2.0, 1.0, -1.0, 0.5]])

    def run(h, t_end=0.8):
        q, v = case.q.copy(), v0.copy()
        for _ in range(int(round(t_end / h))):
            q, v = ch.step_rk4(model, data, q, v, tau, h)
        return np.concatenate([q, v])

    ref = run(0.8 / 256)
    e = [np.abs(run(h) - ref).max() for h in (0.1, 0.05, 0.025)]
    assert 12.0 < e[0] / e[1] < 20.0
    assert 12.0 < e[1] / e[2] < 20.0


@pytest.mark.slow
def test_torque_free_conserves_momentum_and_energy():
    """ETS-VII tumbling with moving joints, no torque, RK4 h = 20 ms over 20 s.

    Reached (relative to the initial values): |ΔP| 1.4e-10, |ΔL| 2.7e-10, |ΔE| 2.2e-10
    (RK4 truncation: 9e-12, 1.7e-11, 1.4e-11 at h = 10 ms, i.e. fourth order).
    Asserted: 1e-9 each. The joints turn through ~8 rad in all.
    """
    case = cases.etsvii()
    v = np.concatenate([[0.01, -0.02, 0.015, 0.05, -0.02, 0.03], [0.1, -0.2, 0.15, 0.3, -0.25, 0.4]])
    q, _, (P0, L0, E0), (dP, dL, dE) = _simulate(case.model, case.q, v, lambda t, q, v: np.zeros(12), 0.02, 20.0)
    assert np.linalg.norm(q[7:] - case.q[7:]) > 1.0  # the joints really moved
    assert dP <= 1e-9 * np.linalg.norm(P0)
    assert dL <= 1e-9 * np.linalg.norm(L0)
    assert dE <= 1e-9 * E0


@pytest.mark.slow
def test_internal_torques_conserve_momentum_not_energy():
    """SRMS on the orbiter, sinusoidal joint torques (≤ 8 N·m), RK4 h = 20 ms over 20 s.

    Reached: |ΔP|/|P0| 3.6e-12, |ΔL|/|L0| 1.9e-12 (asserted 1e-10); the kinetic energy
    changes by ~17 % (the torques do work).
    """
    case = cases.srms_on_orbiter()
    v = np.zeros(12)
    v[:6] = [1e-4, -2e-4, 5e-5, 0.01, 0.02, -0.01]
    amp = np.array([5.0, 8.0, 6.0, 2.0, 1.0, 0.5])

    def tau(t, q, v):
        return np.concatenate([np.zeros(6), amp * np.sin(0.3 * t + np.arange(6))])

    q, v, (P0, L0, E0), (dP, dL, dE) = _simulate(case.model, case.q, v, tau, 0.02, 20.0)
    assert dE > 0.05 * E0  # the torques did work
    assert dP <= 1e-10 * np.linalg.norm(P0)
    assert dL <= 1e-10 * np.linalg.norm(L0)


# --------------------------------------------------------------------------- bad input


def _table(**over):
    nb = 3
    X = np.tile(np.eye(4), (nb, 1, 1))
    X[1:, 0, 3] = 1.0
    args = dict(
        names=["base", "l1", "l2"],
        parent=[-1, 0, 1],
        joint_type=["free", "revolute", "prismatic"],
        X_PJ=X,
        axis_J=np.array([[0, 0, 0], [0, 0, 1.0], [1.0, 0, 0]]),
        mass=np.array([10.0, 2.0, 1.0]),
        p_BoBcm_B=np.zeros((nb, 3)),
        I_Bcm_B=np.tile(np.eye(3), (nb, 1, 1)),
    )
    args.update(over)
    return args


def test_good_table_builds():
    model = ch.chain_from_table(**_table())
    assert (model.nb, model.n, model.nq, model.nv) == (3, 2, 9, 8)
    assert model.total_mass == 13.0
    with pytest.raises(ValueError):
        model.mass[0] = 1.0  # read-only


@pytest.mark.parametrize("m", [0.0, -1.0, np.nan])
def test_non_positive_mass_refused(m):
    with pytest.raises(ModelError, match=r"l1.*mass"):
        ch.chain_from_table(**_table(mass=np.array([10.0, m, 1.0])))


def test_non_symmetric_inertia_refused():
    I = np.tile(np.eye(3), (3, 1, 1))
    I[2, 0, 1] = 0.3
    with pytest.raises(ModelError, match=r"'l2'.*not symmetric.*0\.3"):
        ch.chain_from_table(**_table(I_Bcm_B=I))


def test_indefinite_inertia_refused():
    I = np.tile(np.eye(3), (3, 1, 1))
    I[0] = np.diag([1.0, 1.0, -0.5])
    with pytest.raises(ModelError, match=r"'base'.*indefinite.*-0\.5"):
        ch.chain_from_table(**_table(I_Bcm_B=I))


def test_bad_topology_and_axes_refused():
    with pytest.raises(ModelError, match="parent"):
        ch.chain_from_table(**_table(parent=[-1, 2, 1]))
    with pytest.raises(ModelError, match="joint_type"):
        ch.chain_from_table(**_table(joint_type=["free", "spherical", "revolute"]))
    with pytest.raises(ModelError, match=r"'l1'.*zero length"):
        ch.chain_from_table(**_table(axis_J=np.zeros((3, 3))))


def test_bad_state_shapes_refused():
    model = ch.chain_from_table(**_table())
    data = ch.make_data(model)
    q = ch.neutral(model)
    with pytest.raises(ShapeError, match="q"):
        ch.mass_matrix(model, data, q[:-1])
    with pytest.raises(ShapeError, match="quat"):
        ch.mass_matrix(model, data, np.concatenate([q[:3], [2.0, 0, 0, 0], q[7:]]))
    with pytest.raises(ShapeError, match="v"):
        ch.forward_dynamics(model, data, q, np.zeros(3), np.zeros(8))
    with pytest.raises(ShapeError, match="F_ext"):
        ch.forward_dynamics(model, data, q, np.zeros(8), np.zeros(8), F_ext=np.zeros((2, 6)))
    with pytest.raises(ShapeError, match="body"):
        ch.frame_jacobian(model, data, q, 7)


def test_config_rows_build_the_same_model_as_urdf():
    """The ETS-VII written as a config table (values from dynamics/data/ETSVII.urdf)."""
    from dynamics.urdf import chain_from_urdf

    rows = [
        {"name": "Base_SC", "joint": "free", "mass": 2550.0,
         "inertia": [6200.0, 3540.0, 7090.0, 48.2, 78.5, -29.2]},
        {"name": "Link_1", "joint": "revolute", "xyz": [-0.79, -0.29, 1.0], "rpy": [0, 0, 3.1416],
         "axis": [0, 0, 1], "mass": 35.0, "com": [0, 0, 0.175], "inertia": [0.25, 0.25, 1.69, 0, 0, 0]},
        {"name": "Link_2", "joint": "revolute", "xyz": [0, -0.275, 0.35], "rpy": [-1.570796, 0, 0],
         "axis": [0, 0, 1], "mass": 22.5, "com": [0, -0.435, 0], "inertia": [0.1, 1.31, 3.75, 0, 0, 0]},
        {"name": "Link_3", "joint": "revolute", "xyz": [0, -0.87, 0.0], "axis": [0, 0, 1], "mass": 21.9,
         "com": [-0.275, 0, 0], "inertia": [0.1, 0.71, 2.53, 0, 0, 0]},
        {"name": "Link_4", "joint": "revolute", "xyz": [-0.63, 0, 0], "axis": [0, 0, 1], "mass": 16.5,
         "com": [0, 0, 0.1335], "inertia": [0.15, 0.15, 0.073, 0, 0, 0]},
        {"name": "Link_5", "joint": "revolute", "xyz": [0, 0, 0.26], "rpy": [1.5708, 0, 0], "axis": [0, 0, 1],
         "mass": 26.0, "com": [0, 0, 0.1385], "inertia": [0.15, 0.15, 0.13, 0, 0, 0]},
        {"name": "Link_6", "joint": "revolute", "xyz": [0, 0, 0.28], "rpy": [0, -1.5708, 0], "axis": [0, 0, 1],
         "mass": 18.5, "com": [0, 0, 0.133], "inertia": [0.97, 0.97, 0.26, 0, 0, 0]},
    ]
    a = ch.chain_from_rows(rows)
    b = chain_from_urdf(cases.reference_path("ETSVII.urdf"))
    assert a.names == b.names and a.parent == b.parent and a.joint_type == b.joint_type
    for f in ("X_PJ", "axis_J", "mass", "p_BoBcm_B", "I_Bcm_B"):
        np.testing.assert_allclose(getattr(a, f), getattr(b, f), atol=1e-15)


def test_config_rows_problems_are_listed():
    from errors import ConfigError

    rows = [
        {"name": "base", "joint": "free", "mass": 1.0},
        {"name": "l1", "joint": "revolute", "parent": "nope", "axis": [0, 0, 1], "mass": 1.0,
         "inertia": [1, 1, 1, 0, 0, 0]},
    ]
    with pytest.raises(ConfigError, match="inertia") as err:
        ch.chain_from_rows(rows)
    assert len(err.value.problems) == 2
    assert "'base'" in err.value.problems[0] and "'nope'" in err.value.problems[1]
