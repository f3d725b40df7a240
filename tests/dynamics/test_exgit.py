"""Ex-GIT (dynamics.exgit) against Pinocchio, Yoshida's stated results, and conservation laws.

Pinocchio gives J*, H* and G* independently: J* is the hand twist per joint rate when
Pinocchio's centroidal momentum is zero (``computeCentroidalMap``), H* the kinetic
energy's Hessian on that subspace, G*(mu = 0) the hand mobility ``J M⁻¹ Jᵀ``
(``computeMinverse``), G*(mu = I) the locked system's. Collisions are checked against
``pin.impulseDynamics`` on one model holding the chain and the target body.
"""

import numpy as np
import pinocchio as pin
import pytest
from conftest import pin_from_chain, pin_from_urdf, pin_q, random_chain, random_state, rel_err, swap_wv, sym_upper

from dynamics import cases, exgit
from dynamics import chain as ch
from dynamics import spatial as sp
from dynamics.urdf import chain_from_urdf
from errors import ModelError, ShapeError, SingularityError

TOL = 1e-9
P6 = swap_wv()


def _pin_hand(pm, pd, qp, joint_id, p_JoHo_J):
    """Pinocchio's hand Jacobian in ITS coordinates, rows [v; ω] in W."""
    pin.computeJointJacobians(pm, pd, qp)
    Jp = np.array(pin.getJointJacobian(pm, pd, joint_id, pin.ReferenceFrame.LOCAL_WORLD_ALIGNED)).reshape(6, -1)
    r = pd.oMi[joint_id].rotation @ np.asarray(p_JoHo_J, dtype=float)
    Jp[:3] -= sp.skew(r) @ Jp[3:]
    return Jp


def _pin_exgit_parts(pm, model, q, joint_id, p_hand):
    """J*, H*, G*(0), G*(I) from Pinocchio, in our ordering ([ω; v] rows)."""
    pd = pm.createData()
    qp = pin_q(pm, model, q)
    J = _pin_hand(pm, pd, qp, joint_id, p_hand)
    Ag = pin.computeCentroidalMap(pm, pd, qp)
    X = -np.linalg.solve(Ag[:, :6], Ag[:, 6:])  # base velocity (pin coords) per joint rate at zero momentum
    Z = np.vstack([X, np.eye(model.n)])
    J_star = P6 @ J @ Z
    M = sym_upper(pin.crba(pm, pd, qp))
    H_star = Z.T @ M @ Z
    Minv = sym_upper(pin.computeMinverse(pm, pd, qp))
    G0 = P6 @ J @ Minv @ J.T @ P6
    Gl = P6 @ J[:, :6] @ np.linalg.solve(M[:6, :6], J[:, :6].T) @ P6
    return J_star, H_star, G0, Gl


def _check_against_pin(model, pm, q, joint_id, hand_body, p_hand, rng):
    data = ch.make_data(model)
    Js_pin, Hs_pin, G0_pin, Gl_pin = _pin_exgit_parts(pm, model, q, joint_id, p_hand)
    assert rel_err(exgit.generalized_jacobian(model, data, q, hand_body, p_hand), Js_pin) <= TOL
    assert rel_err(exgit.generalized_inertia(model, data, q), Hs_pin) <= TOL
    assert rel_err(exgit.exgit(model, data, q, hand_body, p_hand, mu=0.0), G0_pin) <= TOL
    assert rel_err(exgit.exgit(model, data, q, hand_body, p_hand, mu=1.0), Gl_pin) <= TOL
    assert rel_err(exgit.rigid_mobility(model, data, q, hand_body, p_hand), Gl_pin) <= TOL
    mu = rng.uniform(0.0, 1.0, model.n)
    G_mu = Js_pin @ np.linalg.solve(Hs_pin, np.diag(1.0 - mu) @ Js_pin.T) + Gl_pin
    assert rel_err(exgit.exgit(model, data, q, hand_body, p_hand, mu=mu), G_mu) <= TOL


@pytest.mark.parametrize("n", [2, 6, 12])
def test_random_chains_against_pinocchio(rng, n):
    for _ in range(2):
        model = random_chain(rng, n)
        pm = pin_from_chain(model)
        q, _ = random_state(rng, model)
        _check_against_pin(model, pm, q, model.nb, model.nb - 1, rng.uniform(-1, 1, 3), rng)


@pytest.mark.parametrize("which", ["srms", "etsvii"])
def test_reference_systems_against_pinocchio(rng, which):
    if which == "srms":
        case = cases.srms_on_orbiter()
        pm = pin_from_urdf(cases.reference_path("SRMS_Canadarm.urdf"), base_mass=cases.ORBITER_MASS,
                           base_com=cases.SRMS_BASE_TO_ORBITER_COM, base_inertia=cases.ORBITER_INERTIA)
    else:
        case = cases.etsvii()
        pm = pin_from_urdf(cases.reference_path("ETSVII.urdf"))
    jid = pm.getJointId(case.model.joint_names[-1])
    q, _ = random_state(rng, case.model)
    for qq in (case.q, q):
        _check_against_pin(case.model, pm, qq, jid, case.hand_body, case.p_BoHo_B, rng)


def test_ground_based_limit_is_conventional_git(rng):
    """Eq. (15): a fixed base gives G* = J H⁻¹ (I − mu) Jᵀ with J, H of the arm (Pinocchio)."""
    model = random_chain(rng, 7, floating=False)
    pm = pin_from_chain(model)
    pd = pm.createData()
    q, _ = random_state(rng, model)
    qp = pin_q(pm, model, q)
    p_hand = np.array([0.3, -0.2, 0.1])
    J = P6 @ _pin_hand(pm, pd, qp, model.nb - 1, p_hand)
    M = sym_upper(pin.crba(pm, pd, qp))
    for mu in (0.0, 0.3, 1.0):
        G = J @ np.linalg.solve(M, (1.0 - mu) * J.T)
        data = ch.make_data(model)
        G_ours = exgit.exgit(model, data, q, model.nb - 1, p_hand, mu=mu)
        if mu < 1.0:
            assert rel_err(G_ours, G) <= TOL
        else:  # locked joints on a fixed base: nothing moves
            assert np.abs(G_ours).max() <= 1e-12


# --------------------------------------------------------------------------- Yoshida's stated results


def _fibonacci_sphere(k):
    i = np.arange(k) + 0.5
    phi = np.arccos(1 - 2 * i / k)
    th = np.pi * (1 + 5**0.5) * i
    return np.stack([np.cos(th) * np.sin(phi), np.sin(th) * np.sin(phi), np.cos(phi)], axis=1)


def _postures(rng):
    """The three-rod chain in random planar postures, and random 3-D chains."""
    rod = cases.yoshida_three_rod()
    for _ in range(4):
        q = rod.q.copy()
        q[3:7] = sp.quat_normalize(np.concatenate([rng.normal(size=1), [0, 0], rng.normal(size=1)]))
        q[7:] = rng.uniform(-2.8, 2.8, 2)
        yield rod.model, q, rod.hand_body, rod.p_BoHo_B
    for n in (3, 6):
        model = random_chain(rng, n)
        q, _ = random_state(rng, model)
        yield model, q, model.nb - 1, rng.uniform(-1, 1, 3)


def test_locked_joints_peak_is_total_mass_through_the_mass_centre(rng):
    """mu = I: max over directions of m_a* (and m_p*) = total mass, at the line hand→G, psi = 0."""
    dirs = _fibonacci_sphere(400)
    for model, q, hb, ph in _postures(rng):
        data = ch.make_data(model)
        G = exgit.exgit(model, data, q, hb, ph, mu=1.0)
        w = model.total_mass
        X = ch.forward_kinematics(model, data, q)
        p_hand = X[hb, :3, 3] + X[hb, :3, :3] @ ph
        n_g = ch.center_of_mass(model, data, q) - p_hand
        m_p, m_a, psi = exgit.virtual_mass(G, n_g)
        assert abs(m_a - w) <= TOL * w and abs(m_p - w) <= TOL * w
        assert abs(psi) <= 1e-7
        for n in dirs:
            m_p, m_a, _ = exgit.virtual_mass(G, n)
            assert m_a <= w * (1 + 1e-12) and m_p <= w * (1 + 1e-12)


def test_half_resistance_lies_between_free_and_locked(rng):
    dirs = _fibonacci_sphere(200)
    for model, q, hb, ph in _postures(rng):
        data = ch.make_data(model)
        Gs = [exgit.exgit(model, data, q, hb, ph, mu=mu) for mu in (0.0, 0.5, 1.0)]
        for n in dirs:
            m0, mh, m1 = (exgit.virtual_mass(G, n)[0] for G in Gs)
            assert min(m0, m1) * (1 - 1e-12) <= mh <= max(m0, m1) * (1 + 1e-12)


def test_three_rod_example_of_section_6():
    """Fig. 6: locked peak 3.0 kg at theta = 51°, free peak along the end link (90°), mu = 0.5 between.

    The posture is chosen to make the locked peak 51° (Fig. 5 is not in the text); that
    the free-joint peak then lies along the end link, with psi = 0 there, and that
    mu = 0.5 peaks between, are the paper's results checked here.
    """
    case = cases.yoshida_three_rod()
    data = ch.make_data(case.model)
    theta = np.radians(np.arange(0.0, 180.0001, 0.25))
    peaks = {}
    for mu in (0.0, 0.5, 1.0):
        G = exgit.exgit(case.model, data, case.q, case.hand_body, case.p_BoHo_B, mu=mu)
        res = np.array([exgit.virtual_mass(G, cases.yoshida_direction(case, t), normal=[0, 0, 1]) for t in theta])
        i = int(np.argmax(res[:, 1]))
        peaks[mu] = (np.degrees(theta[i]), res[i, 1], np.degrees(res[i, 2]))
    assert abs(peaks[1.0][0] - 51.0) <= 0.5 and abs(peaks[1.0][1] - 3.0) <= 1e-6
    assert abs(peaks[0.0][0] - 90.0) <= 2.0 and abs(peaks[0.0][2]) <= 2.0
    assert peaks[0.0][1] < 0.5 * 3.0  # "much smaller than the total mass"
    assert peaks[1.0][0] < peaks[0.5][0] < peaks[0.0][0]


# --------------------------------------------------------------------------- collision


def _two_body_pin(model, m_b, I_b, p_WBcm):
    """Pinocchio model: the chain, plus body B on its own free-flyer (frame at its CoM, axes = W)."""
    pm = pin_from_chain(model)
    jb = pm.addJoint(0, pin.JointModelFreeFlyer(), pin.SE3.Identity(), "target")
    pm.appendBodyToJoint(jb, pin.Inertia(m_b, np.zeros(3), I_b), pin.SE3.Identity())
    return pm, jb


@pytest.mark.parametrize("kind,r", [("plastic", 0.0), ("elastic", 1.0)])
def test_collision_against_pinocchio_impulse_dynamics(rng, kind, r):
    """Eqs. (27–28) plastic and (29–30) elastic vs pin.impulseDynamics (restitution 0 and 1).

    Free joints (mu = 0), where G* is the exact hand mobility; momentum is conserved, and
    the elastic impact also conserves kinetic energy.
    """
    for trial in range(3):
        model = random_chain(rng, 6 if trial else 3)
        data = ch.make_data(model)
        q, v = random_state(rng, model, scale=0.3)
        hb, ph = model.nb - 1, rng.uniform(-0.5, 0.5, 3)
        X = ch.forward_kinematics(model, data, q)
        p_H = X[hb, :3, 3] + X[hb, :3, :3] @ ph
        m_b = 7.0
        R = sp.quat_to_rotation(sp.quat_normalize(rng.normal(size=4)))
        I_b = R @ np.diag([0.5, 0.8, 1.1]) @ R.T
        r_bc = rng.normal(size=3) * 0.4
        p_Bcm = p_H - r_bc
        w_b, v_b = rng.normal(size=3) * 0.2, rng.normal(size=3)
        V_b = np.concatenate([w_b, v_b + np.cross(w_b, r_bc)])
        J = ch.frame_jacobian(model, data, q, hb, ph)
        V_h = J @ v
        G = exgit.exgit(model, data, q, hb, ph, mu=0.0)
        K = exgit.contact_inertia(m_b, I_b, r_bc)
        Vh1, Vb1, imp = exgit.collision(G, K, V_h, V_b, kind)

        pm, jb = _two_body_pin(model, m_b, I_b, p_Bcm)
        pd = pm.createData()
        qp = np.concatenate([pin_q(pm, model, q)[: model.nq], p_Bcm, [0, 0, 0, 1]])
        R0 = sp.quat_to_rotation(q[3:7])
        vp = np.concatenate([R0.T @ v[3:6], R0.T @ v[:3], v[6:], v_b, w_b])
        J_H = _pin_hand(pm, pd, qp, model.nb, ph)
        J_C = _pin_hand(pm, pd, qp, jb, r_bc)
        v_after = pin.impulseDynamics(pm, pd, qp, vp, J_H - J_C, r)
        assert rel_err(Vh1, P6 @ J_H @ v_after) <= TOL
        assert rel_err(Vb1, P6 @ J_C @ v_after) <= TOL

        # momentum (about W origin) and energy of chain + B, with the chain updated by the impulse
        v1 = v + exgit.velocity_jump(model, data, q, hb, ph, imp)
        assert rel_err(J @ v1, Vh1) <= TOL
        w1 = Vb1[:3]
        vb1 = Vb1[3:] - np.cross(w1, r_bc)

        def total(vc, wb, vb):  # called in this iteration only, so the loop's values are the ones meant
            P, L = ch.momentum(model, data, q, vc)  # noqa: B023
            return np.concatenate([P + m_b * vb, L + I_b @ wb + np.cross(p_Bcm, m_b * vb)])  # noqa: B023

        h0, h1 = total(v, w_b, v_b), total(v1, w1, vb1)
        assert rel_err(h1, h0) <= TOL
        E0 = ch.kinetic_energy(model, data, q, v) + 0.5 * (m_b * v_b @ v_b + w_b @ I_b @ w_b)
        E1 = ch.kinetic_energy(model, data, q, v1) + 0.5 * (m_b * vb1 @ vb1 + w1 @ I_b @ w1)
        if kind == "elastic":
            assert abs(E1 - E0) <= TOL * E0
        else:
            assert E1 < E0


# --------------------------------------------------------------------------- bad input


def test_singular_ground_based_posture_refused():
    """The SRMS on a fixed base with wrist yaw at 90°: roll and pitch axes align, G* is singular."""
    model = chain_from_urdf(cases.reference_path("SRMS_Canadarm.urdf"), floating_base=False)
    data = ch.make_data(model)
    q = np.array([0.0, 0.5, -1.0, 0.5, np.pi / 2, 0.0])
    G = exgit.exgit(model, data, q, model.nb - 1, [0.6604, 0, 0])
    K = exgit.contact_inertia(100.0, np.eye(3) * 10.0, [1.0, 0, 0])
    with pytest.raises(SingularityError, match=r"G\*.*condition number"):
        exgit.collision(G, K, np.zeros(6), np.ones(6))


def test_resolved_rates_and_their_singularity(rng):
    """SRMS on the orbiter: J* θ̇ reproduces the twist (zero momentum, checked with Pinocchio's
    centroidal map), and the wrist-yaw-90° posture is refused as singular."""
    case = cases.srms_on_orbiter()
    model, data = case.model, ch.make_data(case.model)
    V = np.array([0.001, -0.002, 0.0015, 0.01, 0.02, -0.005])
    th_dot = exgit.resolved_rates(model, data, case.q, case.hand_body, case.p_BoHo_B, V)
    pm = pin_from_urdf(cases.reference_path("SRMS_Canadarm.urdf"), base_mass=cases.ORBITER_MASS,
                       base_com=cases.SRMS_BASE_TO_ORBITER_COM, base_inertia=cases.ORBITER_INERTIA)
    Js_pin = _pin_exgit_parts(pm, model, case.q, pm.getJointId(model.joint_names[-1]), case.p_BoHo_B)[0]
    assert rel_err(Js_pin @ th_dot, V) <= TOL
    q = case.q.copy()
    q[7:] = [0.0, 0.5, -1.0, 0.5, np.pi / 2, 0.0]
    with pytest.raises(SingularityError, match=r"'B7'.*condition number"):
        exgit.resolved_rates(model, data, q, case.hand_body, case.p_BoHo_B, V)
    ground = chain_from_urdf(cases.reference_path("SRMS_Canadarm.urdf"), floating_base=False)
    with pytest.raises(SingularityError, match=r"'B7'.*condition number"):
        exgit.resolved_rates(ground, ch.make_data(ground), q[7:], case.hand_body, case.p_BoHo_B, V)
    three = cases.yoshida_three_rod()
    with pytest.raises(ModelError, match="n = 2"):
        exgit.resolved_rates(three.model, ch.make_data(three.model), three.q, 2, three.p_BoHo_B, V)


def test_bad_parameters_refused(rng):
    case = cases.yoshida_three_rod()
    data = ch.make_data(case.model)
    with pytest.raises(ModelError, match=r"mu.*1\.5"):
        exgit.exgit(case.model, data, case.q, 2, case.p_BoHo_B, mu=1.5)
    with pytest.raises(ShapeError, match="mu"):
        exgit.exgit(case.model, data, case.q, 2, case.p_BoHo_B, mu=np.zeros(5))
    G = exgit.exgit(case.model, data, case.q, 2, case.p_BoHo_B)
    with pytest.raises(ShapeError, match="direction"):
        exgit.virtual_mass(G, [0.0, 0.0, 0.0])
    with pytest.raises(ModelError, match=r"m_b.*-1"):
        exgit.contact_inertia(-1.0, np.eye(3), np.zeros(3))
    with pytest.raises(ModelError, match="indefinite"):
        exgit.contact_inertia(1.0, np.diag([1.0, 1.0, -1.0]), np.zeros(3))
