"""dynamics.impact against Pinocchio's impulseDynamics, conservation laws and the seed's stated results.

Pinocchio (a test-only dependency) builds the chaser (a free-floating chain) and the
payload (a second floating root) in one model with gravity zeroed; its generalized mass
matrix, contact Jacobians, velocities and centroidal momentum are the independent
reference. Conventions: Pinocchio's free-flyer v is [v, ω] in the local frame; the impact
laws only need M and J consistent with v, so Pinocchio's own coordinates are used as-is.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pinocchio as pin
import pytest
from conftest import random_chain, random_state
from scipy.spatial.transform import Rotation

from dynamics import chain as ch
from dynamics import impact as im
from dynamics import rigid_body as rb
from dynamics.spatial import quat_normalize
from errors import ModelError, NoSolutionError, ShapeError, SingularityError
from testkit.pin_oracle import base_T, pin_from_chain, pin_q


def _inertia(rng, mass, planar):
    lam = np.sort(rng.uniform(0.2, 2.0, 3)) * mass
    lam[2] = min(lam[2], lam[0] + lam[1])
    if planar:
        I = np.diag([lam[0], lam[1], lam[2]])
        com = np.r_[rng.uniform(-0.3, 0.3, 2), 0.0]
    else:
        R = Rotation.random(random_state=rng.integers(1 << 31)).as_matrix()
        I = R @ np.diag(lam) @ R.T
        com = rng.uniform(-0.3, 0.3, 3)
    return pin.Inertia(float(mass), com, 0.5 * (I + I.T))


@dataclass
class System:
    model: pin.Model
    data: pin.Data
    q: np.ndarray
    v: np.ndarray
    nvc: int  # chaser velocity size; the payload's follow
    hand: int
    b: int
    pj: int
    planar: bool
    m_p: float
    I_p_B: np.ndarray
    r_pb_B: np.ndarray

    def kin(self, v=None):
        v = self.v if v is None else v
        pin.forwardKinematics(self.model, self.data, self.q, v)
        pin.computeJointJacobians(self.model, self.data, self.q)
        pin.updateFramePlacements(self.model, self.data)

    def M(self):
        M = pin.crba(self.model, self.data, self.q)
        return np.triu(M) + np.triu(M, 1).T

    def J(self, frame):
        self.kin()
        return pin.getFrameJacobian(self.model, self.data, frame, pin.LOCAL_WORLD_ALIGNED)[:3].copy()

    def payload_W(self, v=None):
        """(v_p, ω_p) of the payload CoM in W, and R_WP."""
        self.kin(v)
        R = self.data.oMi[self.pj].rotation.copy()
        m = self.data.v[self.pj]
        return R @ m.linear, R @ m.angular, R

    def payload_v(self, v_W, w_W):
        R = self.data.oMi[self.pj].rotation
        lin, ang = R.T @ v_W, R.T @ w_W
        return np.r_[lin[:2], ang[2]] if self.planar else np.r_[lin, ang]

    def momentum(self, v):
        h = pin.computeCentroidalMomentum(self.model, self.data, self.q, v)
        return np.r_[h.linear, h.angular]

    def ke(self, v):
        return 0.5 * v @ self.M() @ v

    def cyril_args(self):
        """Arguments of the Cyril payload functions: M, J, ψ̇_i, m_p, I_p_W, r_pb_W, v_pi, ω_pi."""
        M, J = self.M(), self.J(self.hand)
        v_p, w_p, R = self.payload_W()
        c = self.nvc
        return (M[:c, :c], J[:, :c], self.v[:c], self.m_p, R @ self.I_p_B @ R.T, R @ self.r_pb_B, v_p, w_p)


def build(rng, n_links=3, planar=False, m_p=None, scale=1.0) -> System:
    m = pin.Model()
    m.gravity = pin.Motion.Zero()
    jid = m.addJoint(0, pin.JointModelPlanar() if planar else pin.JointModelFreeFlyer(), pin.SE3.Identity(), "base")
    m.appendBodyToJoint(jid, _inertia(rng, rng.uniform(50.0, 100.0), planar), pin.SE3.Identity())
    for k in range(n_links):
        if planar:
            joint, place = pin.JointModelRZ(), pin.SE3(np.eye(3), np.array([rng.uniform(0.5, 2.0), 0.0, 0.0]))
        else:
            axis = rng.normal(size=3)
            joint = pin.JointModelRevoluteUnaligned(axis / np.linalg.norm(axis))
            place = pin.SE3(Rotation.random(random_state=rng.integers(1 << 31)).as_matrix(), rng.uniform(-1, 1, 3))
        jid = m.addJoint(jid, joint, place, f"j{k}")
        m.appendBodyToJoint(jid, _inertia(rng, rng.uniform(2.0, 20.0), planar), pin.SE3.Identity())
    tip = np.array([rng.uniform(0.3, 1.0), 0.0, 0.0])
    hand = m.addFrame(pin.Frame("hand", jid, pin.SE3(np.eye(3), tip), pin.FrameType.OP_FRAME))
    nvc = m.nv
    pj = m.addJoint(0, pin.JointModelPlanar() if planar else pin.JointModelFreeFlyer(), pin.SE3.Identity(), "payload")
    m_p = float(rng.uniform(20.0, 200.0)) if m_p is None else m_p
    Ip = _inertia(rng, m_p, planar)
    I_p_B = np.array(Ip.inertia)
    m.appendBodyToJoint(pj, pin.Inertia(m_p, np.zeros(3), I_p_B), pin.SE3.Identity())
    r_pb_B = np.r_[rng.uniform(-1.5, 1.5, 2), 0.0] if planar else rng.uniform(-1.5, 1.5, 3)
    b = m.addFrame(pin.Frame("b", pj, pin.SE3(np.eye(3), r_pb_B), pin.FrameType.OP_FRAME))
    d = m.createData()
    # chaser configuration, then place the payload so that b coincides with the hand point
    q = pin.integrate(m, pin.neutral(m), rng.normal(size=m.nv))
    pin.forwardKinematics(m, d, q)
    pin.updateFramePlacements(m, d)
    p_h = d.oMf[hand].translation.copy()
    if planar:
        th = rng.uniform(-np.pi, np.pi)
        R = Rotation.from_rotvec([0, 0, th]).as_matrix()
        o = p_h - R @ r_pb_B
        q[m.idx_qs[pj]:m.idx_qs[pj] + 4] = [o[0], o[1], np.cos(th), np.sin(th)]
    else:
        Rr = Rotation.random(random_state=rng.integers(1 << 31))
        o = p_h - Rr.as_matrix() @ r_pb_B
        q[m.idx_qs[pj]:m.idx_qs[pj] + 7] = np.r_[o, Rr.as_quat()]
    v = scale * rng.normal(size=m.nv)
    s = System(m, d, q, v, nvc, hand, b, pj, planar, m_p, I_p_B, r_pb_B)
    s.kin()
    assert np.allclose(d.oMf[hand].translation, d.oMf[b].translation)
    return s


def _approaching_normal(s: System, rng) -> np.ndarray:
    """A contact normal (payload → hand) along which the hand approaches the payload."""
    s.kin()
    rel = (pin.getFrameVelocity(s.model, s.data, s.hand, pin.LOCAL_WORLD_ALIGNED).linear
           - pin.getFrameVelocity(s.model, s.data, s.b, pin.LOCAL_WORLD_ALIGNED).linear)
    t = rng.normal(size=3)
    if s.planar:
        t[2] = 0.0
    n = -rel / np.linalg.norm(rel) + 0.6 * t / np.linalg.norm(t)  # oblique: slip as well as approach
    n /= np.linalg.norm(n)
    assert n @ rel < 0
    return n


def _setup(seed: int, planar: bool, n_links: int = 3):
    """A random system, the Cyril payload-function arguments and an approaching contact normal."""
    rng = np.random.default_rng(seed)
    s = build(rng, n_links=n_links, planar=planar)
    return s, s.cyril_args(), _approaching_normal(s, rng)


def _full_v(s: System, psid_f, v_pf, w_pf):
    s.kin()
    return np.r_[psid_f, s.payload_v(v_pf, w_pf)]


# ------------------------------------------------------------------ plastic


@pytest.mark.parametrize("seed", range(4))
def test_plastic_multibody_matches_pinocchio_and_conserves_momentum(seed):
    rng = np.random.default_rng(100 + seed)
    s = build(rng, n_links=3)
    M, c = s.M(), s.nvc
    Jh, Jb = s.J(s.hand), s.J(s.b)
    res = im.plastic_impact_multibody(M[:c, :c], Jh[:, :c], s.v[:c], M[c:, c:], Jb[:, c:], s.v[c:])
    v_ref = pin.impulseDynamics(s.model, s.data, s.q, s.v, Jh - Jb, 0.0, 0.0)
    v_f = np.r_[res.psid_f, res.psid_pf]
    np.testing.assert_allclose(v_f, v_ref, atol=1e-9 * np.linalg.norm(s.v))
    np.testing.assert_allclose((Jh - Jb) @ v_f, 0.0, atol=1e-9 * np.linalg.norm(s.v))
    np.testing.assert_allclose(res.lambda_rows, s.data.impulse_c, rtol=1e-8)
    np.testing.assert_allclose(s.momentum(v_f), s.momentum(s.v), atol=1e-9 * np.abs(s.momentum(s.v)).max())
    assert s.ke(v_f) <= s.ke(s.v)


def test_plastic_multibody_equals_seed_eqs_9_to_12_for_square_Jp():
    # The seed's closed form (9)-(12) holds when P = J_p J_pᵀ and Q = J_pᵀ J_p are regular.
    rng = np.random.default_rng(5)
    n = 6
    A = rng.normal(size=(n, n))
    M = A @ A.T + n * np.eye(n)
    B = rng.normal(size=(3, 3))
    Mp = B @ B.T + 3 * np.eye(3)
    J, Jp = rng.normal(size=(3, n)), rng.normal(size=(3, 3))
    v, vp = rng.normal(size=n), rng.normal(size=3)
    P, Q = Jp @ Jp.T, Jp.T @ Jp
    G = J.T @ np.linalg.inv(P) @ Jp @ Mp @ np.linalg.inv(Q) @ Jp.T @ J + M  # (11)
    H = J.T @ np.linalg.inv(P) @ Jp @ Mp @ vp + M @ v  # (12)
    psid_f = np.linalg.solve(G, H)  # (10)
    psid_pf = np.linalg.solve(Q, Jp.T @ J @ psid_f)  # (9)
    res = im.plastic_impact_multibody(M, J, v, Mp, Jp, vp)
    np.testing.assert_allclose(res.psid_f, psid_f, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(res.psid_pf, psid_pf, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize(("seed", "planar"), [(0, False), (1, False), (2, True)])
def test_plastic_payload_matches_pinocchio_and_multibody_form(seed, planar):
    rng = np.random.default_rng(200 + seed)
    s = build(rng, n_links=3, planar=planar)
    args = s.cyril_args()
    res = im.plastic_impact_payload(*args)
    v_f = _full_v(s, res.psid_f, res.v_pf, res.w_pf)
    Jrel = s.J(s.hand) - s.J(s.b)
    rows = [0, 1] if planar else [0, 1, 2]
    v_ref = pin.impulseDynamics(s.model, s.data, s.q, s.v, Jrel[rows], 0.0, 0.0)
    np.testing.assert_allclose(v_f, v_ref, atol=1e-9 * np.linalg.norm(s.v))
    np.testing.assert_allclose(s.momentum(v_f), s.momentum(s.v), atol=1e-9 * np.abs(s.momentum(s.v)).max())
    # the payload as a 6-DOF "multibody" with w_p = [v; ω] (seed eq. 14, 15): same answer
    M, J, v, m_p, I_p, r, v_p, w_p = args
    Jp = np.hstack([np.eye(3), -np.cross(np.eye(3), r)])  # v_b = v_p + ω × r = v_p − [r×] ω
    Mp = np.block([[m_p * np.eye(3), np.zeros((3, 3))], [np.zeros((3, 3)), I_p]])
    if not planar:
        mb = im.plastic_impact_multibody(M, J, v, Mp, Jp, np.r_[v_p, w_p])
        np.testing.assert_allclose(mb.psid_f, res.psid_f, atol=1e-10 * np.linalg.norm(v))
        np.testing.assert_allclose(mb.psid_pf, np.r_[res.v_pf, res.w_pf], atol=1e-10 * np.linalg.norm(v))
        np.testing.assert_allclose(mb.lambda_rows, res.impulse_W, rtol=1e-8)


def test_locked_coordinate_keeps_its_rate_and_momentum():
    rng = np.random.default_rng(7)
    s = build(rng, n_links=3)
    k = s.nvc - 1  # the last joint: the "end effector" joint
    s.v[k] = 0.0  # so that Pinocchio's extra row e_kᵀ v⁺ = 0 means "rate unchanged"
    args = s.cyril_args()
    res = im.plastic_impact_payload(*args, locked=[k])
    assert res.psid_f[k] == s.v[k]
    v_f = _full_v(s, res.psid_f, res.v_pf, res.w_pf)
    np.testing.assert_allclose(s.momentum(v_f), s.momentum(s.v), atol=1e-9 * np.abs(s.momentum(s.v)).max())
    Jrel = s.J(s.hand) - s.J(s.b)
    lock_row = np.zeros((1, s.model.nv))
    lock_row[0, k] = 1.0
    v_ref = pin.impulseDynamics(s.model, s.data, s.q, s.v, np.vstack([Jrel, lock_row]), 0.0, 0.0)
    np.testing.assert_allclose(v_f, v_ref, atol=1e-9 * np.linalg.norm(s.v))
    # and the impulse form agrees with the G/H form under the lock
    M, J, v, m_p, I_p, r, v_p, w_p = args
    Jp = np.hstack([np.eye(3), -np.cross(np.eye(3), r)])
    Mp = np.block([[m_p * np.eye(3), np.zeros((3, 3))], [np.zeros((3, 3)), I_p]])
    mb = im.plastic_impact_multibody(M, J, v, Mp, Jp, np.r_[v_p, w_p], locked=[k])
    np.testing.assert_allclose(mb.psid_f, res.psid_f, atol=1e-10 * np.linalg.norm(v))


# ------------------------------------------------------------------ non-plastic (r_E, r_f)


CASES = [(1.0, 1.0), (0.0, 0.0), (0.5, 0.5), (0.5, 0.8), (0.2, 0.5)]


@pytest.mark.parametrize("seed", range(3))
def test_nonplastic_momentum_energy_and_limits_planar(seed):
    s, args, n = _setup(300 + seed, planar=True)
    KE_i, L_i = s.ke(s.v), s.momentum(s.v)
    pl = im.plastic_impact_payload(*args)
    dKE_p = s.ke(_full_v(s, pl.psid_f, pl.v_pf, pl.w_pf)) - KE_i
    assert dKE_p < 0
    for r_E, r_f in CASES:
        res = im.nonplastic_impact_payload(*args, n, r_E, r_f)
        v_f = _full_v(s, res.psid_f, res.v_pf, res.w_pf)
        np.testing.assert_allclose(s.momentum(v_f), L_i, atol=1e-9 * np.abs(L_i).max())
        # energy lost = r_E × plastic loss (eqs. 21, 45), with Pinocchio's kinetic energy
        assert s.ke(v_f) - KE_i == pytest.approx(r_E * dKE_p, rel=1e-7, abs=1e-9 * KE_i)
        # contact separating (or, plastic, closing no more)
        s.kin(v_f)
        sep = n @ (pin.getFrameVelocity(s.model, s.data, s.hand, pin.LOCAL_WORLD_ALIGNED).linear
                   - pin.getFrameVelocity(s.model, s.data, s.b, pin.LOCAL_WORLD_ALIGNED).linear)
        assert sep >= -1e-7 * np.linalg.norm(s.v)
    # r_E = 1, r_f = 1 reproduces the plastic result. It is a double root of eq. (49): the square
    # root amplifies rounding in the discriminant to ~3e-8 relative (seen), hence 2e-7.
    res = im.nonplastic_impact_payload(*args, n, 1.0, 1.0)
    scale = np.linalg.norm(s.v)
    np.testing.assert_allclose(res.psid_f, pl.psid_f, atol=2e-7 * scale)
    np.testing.assert_allclose(res.v_pf, pl.v_pf, atol=2e-7 * scale)
    np.testing.assert_allclose(res.w_pf, pl.w_pf, atol=2e-7 * scale)


@pytest.mark.parametrize("seed", range(3))
def test_nonplastic_elastic_frictionless_matches_pinocchio_restitution_1(seed):
    s, args, n = _setup(400 + seed, planar=False)
    res = im.nonplastic_impact_payload(*args, n, 0.0, 0.0)
    v_f = _full_v(s, res.psid_f, res.v_pf, res.w_pf)
    assert s.ke(v_f) == pytest.approx(s.ke(s.v), rel=1e-10)
    Jn = n @ (s.J(s.hand) - s.J(s.b))
    v_ref = pin.impulseDynamics(s.model, s.data, s.q, s.v, Jn[None, :], 1.0, 0.0)
    np.testing.assert_allclose(v_f, v_ref, atol=1e-9 * np.linalg.norm(s.v))
    # and the frictionless normal-only plastic limit (Pinocchio, restitution 0) has half the impulse
    v0 = pin.impulseDynamics(s.model, s.data, s.q, s.v, Jn[None, :], 0.0, 0.0)
    np.testing.assert_allclose(v_f - s.v, 2.0 * (v0 - s.v), atol=1e-9 * np.linalg.norm(s.v))


def test_nonplastic_3d_energy_ratio_and_root_ordering():
    s, args, n = _setup(77, planar=False, n_links=4)
    KE_i = s.ke(s.v)
    pl = im.plastic_impact_payload(*args)
    dKE_p = s.ke(_full_v(s, pl.psid_f, pl.v_pf, pl.w_pf)) - KE_i
    x = float(args[6] @ n)
    prev = np.inf
    for r_E in (0.0, 0.2, 0.4, 0.6):
        res = im.nonplastic_impact_payload(*args, n, r_E, 0.5)
        v_f = _full_v(s, res.psid_f, res.v_pf, res.w_pf)
        assert s.ke(v_f) - KE_i == pytest.approx(r_E * dKE_p, rel=1e-7, abs=1e-9 * KE_i)
        # seed eq. (52): |e + x| decreases as the energy loss grows
        assert abs(res.v_recede + x) < prev
        prev = abs(res.v_recede + x)
        assert res.roots[0] <= res.roots[1]
        assert res.v_recede + x == pytest.approx(res.roots[1] / args[3])


def test_nonplastic_no_impact_when_not_closing():
    s, args, n = _setup(31, planar=False)
    res = im.nonplastic_impact_payload(*args, -n, 0.5, 0.5)  # the hand recedes along -n
    np.testing.assert_array_equal(res.impulse_W, 0.0)
    np.testing.assert_array_equal(res.psid_f, args[2])
    np.testing.assert_array_equal(res.w_pf, args[7])


def test_no_real_root_raises_naming_parameters():
    # r_E = 1 with r_f = 0: the plastic loss needs the friction impulse (seed 002, §3.2).
    s, args, n = _setup(9, planar=True)
    with pytest.raises(NoSolutionError, match=r"r_E=1\.0, r_f=0\.0"):
        im.nonplastic_impact_payload(*args, n, 1.0, 0.0)


def test_bad_input_refused():
    M, J, v = np.eye(3), np.eye(3), np.ones(3)
    with pytest.raises(ShapeError, match="J"):
        im.plastic_impact_payload(M, np.ones((2, 3)), v, 1.0, np.eye(3), np.zeros(3), np.zeros(3), np.zeros(3))
    with pytest.raises(ModelError, match="m_p"):
        im.plastic_impact_payload(M, J, v, -1.0, np.eye(3), np.zeros(3), np.zeros(3), np.zeros(3))
    with pytest.raises(ModelError, match="I_p_W"):
        im.plastic_impact_payload(M, J, v, 1.0, -np.eye(3), np.zeros(3), np.zeros(3), np.zeros(3))
    with pytest.raises(ModelError, match="not positive definite"):
        im.plastic_impact_multibody(np.diag([1.0, -1.0, 1.0]), J, v, np.eye(3), J, v)
    with pytest.raises(ModelError, match="not symmetric"):
        im.plastic_impact_multibody(np.triu(np.ones((3, 3))), J, v, np.eye(3), J, v)
    with pytest.raises(ShapeError, match="psid_i"):
        im.plastic_impact_multibody(M, J, np.ones(2), np.eye(3), J, v)
    with pytest.raises(ShapeError, match="locked"):
        im.plastic_impact_multibody(M, J, v, np.eye(3), J, v, locked=[5])
    with pytest.raises(SingularityError):
        im.plastic_impact_multibody(M, np.zeros((3, 3)), v, np.eye(3), np.zeros((3, 3)), v)
    with pytest.raises(ValueError, match="r_E"):
        im.nonplastic_impact_payload(M, J, v, 1.0, np.eye(3), np.zeros(3), np.zeros(3), np.zeros(3),
                                     [1, 0, 0], -0.1, 0.5)
    with pytest.raises(ShapeError, match="n_W"):
        im.nonplastic_impact_payload(M, J, v, 1.0, np.eye(3), np.zeros(3), np.zeros(3), np.zeros(3),
                                     [0, 0, 0], 0.1, 0.5)


# ------------------------------------------------------------------ rigid-body point impact


def _two_bodies(rng):
    A = rb.RigidBodyModel("A", 30.0, np.diag([2.0, 3.0, 4.0]))
    B = rb.RigidBodyModel("B", 80.0, np.diag([10.0, 12.0, 15.0]))
    sA = rb.RigidBodyState([0.5, 0.2, 1.0], quat_normalize(rng.normal(size=4)), [-0.3, 0.1, 0.05],
                           rng.normal(size=3) * 0.2)
    sB = rb.RigidBodyState([-0.8, 0.1, -0.6], quat_normalize(rng.normal(size=4)), [0.1, 0.0, -0.02],
                           rng.normal(size=3) * 0.2)
    return A, sA, B, sB


def _total_momentum(pairs):
    P, L = np.zeros(3), np.zeros(3)
    for m, s in pairs:
        p, l_ = rb.momentum(m, s)
        P, L = P + p, L + l_
    return P, L


def _pin_two_bodies(A, sA, B, sB, c):
    """The same two bodies as Pinocchio free-flyers; returns model, data, q, v, J_rel (3, 12) at C."""
    m = pin.Model()
    m.gravity = pin.Motion.Zero()
    q, v, fr = [], [], []
    for mod, st in ((A, sA), (B, sB)):
        j = m.addJoint(0, pin.JointModelFreeFlyer(), pin.SE3.Identity(), mod.name)
        m.appendBodyToJoint(j, pin.Inertia(mod.mass, np.zeros(3), np.array(mod.I_Bcm_B)), pin.SE3.Identity())
        R = st.R_WB
        fr.append(m.addFrame(pin.Frame(mod.name + "c", j, pin.SE3(np.eye(3), R.T @ (c - st.p_WoBo_W)),
                                       pin.FrameType.OP_FRAME)))
        w, x, y, z = st.quat_WB
        q.append(np.r_[st.p_WoBo_W, x, y, z, w])
        v.append(np.r_[R.T @ st.v_WBo_W, st.w_WB_B])
    d = m.createData()
    q, v = np.concatenate(q), np.concatenate(v)
    pin.computeJointJacobians(m, d, q)
    pin.updateFramePlacements(m, d)
    Jr = (pin.getFrameJacobian(m, d, fr[0], pin.LOCAL_WORLD_ALIGNED)[:3]
          - pin.getFrameJacobian(m, d, fr[1], pin.LOCAL_WORLD_ALIGNED)[:3])
    return m, d, q, v, Jr


def _rb_from_pin_v(sA, sB, v):
    out = []
    for st, vv in zip((sA, sB), (v[:6], v[6:]), strict=True):
        out.append(rb.RigidBodyState(st.p_WoBo_W, st.quat_WB, st.R_WB @ vv[:3], vv[3:]))
    return out


def test_point_impact_limits_match_pinocchio():
    rng = np.random.default_rng(21)
    A, sA, B, sB = _two_bodies(rng)
    c = np.array([0.0, 0.1, 0.2])
    u = rb.point_velocity(sA, sA.R_WB.T @ (c - sA.p_WoBo_W)) - rb.point_velocity(sB, sB.R_WB.T @ (c - sB.p_WoBo_W))
    n = -u / np.linalg.norm(u) + np.array([0.3, -0.2, 0.1])
    n /= np.linalg.norm(n)
    model, data, q, v, Jr = _pin_two_bodies(A, sA, B, sB, c)
    # plastic sticking capture: e = 0, no slip
    res = im.point_impact(A, sA, B, sB, c, n, 0.0, np.inf)
    ref = _rb_from_pin_v(sA, sB, pin.impulseDynamics(model, data, q, v, Jr, 0.0, 0.0))
    for got, exp in zip((res.state_A, res.state_B), ref, strict=True):
        np.testing.assert_allclose(got.v_WBo_W, exp.v_WBo_W, atol=1e-12)
        np.testing.assert_allclose(got.w_WB_B, exp.w_WB_B, atol=1e-12)
    # elastic frictionless: e = 1, mu = 0 is Pinocchio's restitution 1 on the normal row
    res = im.point_impact(A, sA, B, sB, c, n, 1.0, 0.0)
    ref = _rb_from_pin_v(sA, sB, pin.impulseDynamics(model, data, q, v, (n @ Jr)[None, :], 1.0, 0.0))
    for got, exp in zip((res.state_A, res.state_B), ref, strict=True):
        np.testing.assert_allclose(got.v_WBo_W, exp.v_WBo_W, atol=1e-12)
        np.testing.assert_allclose(got.w_WB_B, exp.w_WB_B, atol=1e-12)
    E0 = rb.kinetic_energy(A, sA) + rb.kinetic_energy(B, sB)
    assert rb.kinetic_energy(A, res.state_A) + rb.kinetic_energy(B, res.state_B) == pytest.approx(E0, rel=1e-12)


def test_point_impact_sliding_momentum_and_cone():
    rng = np.random.default_rng(22)
    A, sA, B, sB = _two_bodies(rng)
    c = np.array([0.0, 0.1, 0.2])
    rA, rB = c - sA.p_WoBo_W, c - sB.p_WoBo_W
    u = rb.point_velocity(sA, sA.R_WB.T @ rA) - rb.point_velocity(sB, sB.R_WB.T @ rB)
    n = -u / np.linalg.norm(u) + np.array([1.0, -0.5, 0.5])  # strongly oblique: slips
    n /= np.linalg.norm(n)
    e, mu = 0.4, 0.2
    res = im.point_impact(A, sA, B, sB, c, n, e, mu)
    assert res.sliding
    Pn = res.P_W @ n
    assert np.linalg.norm(res.P_W - Pn * n) == pytest.approx(mu * Pn, rel=1e-12)
    u2 = (rb.point_velocity(res.state_A, res.state_A.R_WB.T @ rA)
          - rb.point_velocity(res.state_B, res.state_B.R_WB.T @ rB))
    assert u2 @ n == pytest.approx(-e * (u @ n), rel=1e-10)
    P0, L0 = _total_momentum([(A, sA), (B, sB)])
    P1, L1 = _total_momentum([(A, res.state_A), (B, res.state_B)])
    np.testing.assert_allclose(P1, P0, atol=1e-12)
    np.testing.assert_allclose(L1, L0, atol=1e-12)
    assert rb.kinetic_energy(A, res.state_A) + rb.kinetic_energy(B, res.state_B) < (
        rb.kinetic_energy(A, sA) + rb.kinetic_energy(B, sB))


def test_point_impact_fixed_body_separating_and_bad_input():
    rng = np.random.default_rng(23)
    A, sA, _, _ = _two_bodies(rng)
    c = sA.p_WoBo_W + np.array([0.0, 0.0, -0.5])
    # A falls onto a fixed floor (normal +z) with e = 1, mu = 0: normal point velocity reverses
    sA = rb.RigidBodyState(sA.p_WoBo_W, sA.quat_WB, [0.1, 0.0, -1.0], sA.w_WB_B)
    r_B = sA.R_WB.T @ (c - sA.p_WoBo_W)
    res = im.point_impact(A, sA, None, None, c, [0, 0, 1], 1.0, 0.0)
    assert res.state_B is None
    assert rb.point_velocity(res.state_A, r_B)[2] == pytest.approx(-rb.point_velocity(sA, r_B)[2], rel=1e-12)
    # separating: no impulse
    res = im.point_impact(A, sA, None, None, c, [0, 0, -1], 1.0, 0.5)
    np.testing.assert_array_equal(res.P_W, 0.0)
    with pytest.raises(ValueError, match="restitution"):
        im.point_impact(A, sA, None, None, c, [0, 0, 1], 1.5, 0.0)
    with pytest.raises(ValueError, match="mu"):
        im.point_impact(A, sA, None, None, c, [0, 0, 1], 0.5, -1.0)
    with pytest.raises(ShapeError, match="n_W"):
        im.point_impact(A, sA, None, None, c, [0, 0, 0], 0.5, 0.0)
    with pytest.raises(ValueError, match="both"):
        im.point_impact(A, sA, A, None, c, [0, 0, 1], 0.5, 0.0)


# ---------------------------------------------------------------- an arm tip strikes a free body
def _tip_case(seed: int):
    """A random free-floating chain (ours and Pinocchio's from the same table) with a target body
    whose point C coincides with a point of the last link, an approaching normal and the velocities."""
    rng = np.random.default_rng(seed)
    model = random_chain(rng, 4, prismatic=False)
    q, v = random_state(rng, model, 0.3)
    data = ch.make_data(model)
    body, p_BoC_B = model.nb - 1, rng.uniform(-0.5, 0.5, 3)
    X = ch.forward_kinematics(model, data, q)
    p_C = X[body, :3, 3] + X[body, :3, :3] @ p_BoC_B
    m_T = float(rng.uniform(5.0, 50.0))
    R_T = Rotation.random(random_state=rng.integers(1 << 31)).as_matrix()
    I_T_B = np.diag(rng.uniform(1.0, 5.0, 3))
    p_T = p_C - R_T @ rng.uniform(-1.0, 1.0, 3)  # its CoM, away from C
    V_T = rng.normal(size=6) * 0.2
    # Pinocchio: the chain, and the target as a second free-flyer with its CoM at the joint origin
    pm = pin_from_chain(model)
    tj = pm.addJoint(0, pin.JointModelFreeFlyer(), pin.SE3.Identity(), "target")
    pm.appendBodyToJoint(tj, pin.Inertia(m_T, np.zeros(3), I_T_B), pin.SE3.Identity())
    qp = np.r_[pin_q(pm, model, q), p_T, Rotation.from_matrix(R_T).as_quat()]
    vp = np.r_[np.linalg.solve(base_T(model, q), v), R_T.T @ V_T[3:], R_T.T @ V_T[:3]]
    pd = pm.createData()
    pin.forwardKinematics(pm, pd, qp, vp)
    pin.computeJointJacobians(pm, pd, qp)
    jid = pm.getJointId(model.names[body])

    def point_J(j, p_local):  # translational Jacobian of a point fixed in joint j's body, in W
        Jj = pin.getJointJacobian(pm, pd, j, pin.LOCAL_WORLD_ALIGNED)
        r = pd.oMi[j].rotation @ p_local
        return Jj[:3] - np.cross(r[:, None], Jj[3:], axis=0)

    J_rel = point_J(jid, p_BoC_B) - point_J(tj, R_T.T @ (p_C - p_T))
    u_rel = J_rel @ vp
    t = rng.normal(size=3)
    t -= (t @ u_rel) / (u_rel @ u_rel) * u_rel
    n = -u_rel / np.linalg.norm(u_rel) + 0.7 * t / np.linalg.norm(t)  # oblique (slip too), approaching
    n /= np.linalg.norm(n)
    assert n @ u_rel < 0
    return dict(model=model, data=data, q=q, v=v, body=body, p_BoC_B=p_BoC_B, n=n, m_T=m_T,
                I_T_W=R_T @ I_T_B @ R_T.T, p_T=p_T, V_T=V_T, R_T=R_T, pm=pm, pd=pd, qp=qp, vp=vp,
                J_n=(n @ J_rel)[None, :], T=base_T(model, q))


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("e", [0.0, 0.4, 1.0])
def test_arm_tip_impact_matches_pinocchio_impulse_dynamics(seed, e):
    """Against Pinocchio's own mass matrix and impulse solver on one model holding arm and target."""
    c = _tip_case(seed)
    res = im.arm_tip_impact(c["model"], c["data"], c["q"], c["v"], c["body"], c["p_BoC_B"], c["n"], c["m_T"],
                            c["I_T_W"], c["p_T"], c["V_T"], e)
    v_ref = pin.impulseDynamics(c["pm"], c["pd"], c["qp"], c["vp"], c["J_n"], e, 0.0)
    nva = c["model"].nv
    scale = np.abs(c["vp"]).max()
    np.testing.assert_allclose(c["T"] @ v_ref[:nva], res.v_f, atol=1e-9 * scale)
    R = c["R_T"]
    np.testing.assert_allclose(np.r_[R @ v_ref[nva + 3:], R @ v_ref[nva:nva + 3]], res.V_WT_W_f, atol=1e-9 * scale)
    np.testing.assert_allclose(res.P_W, c["pd"].impulse_c[0] * c["n"], rtol=1e-8)
    assert res.u_n_f == pytest.approx(-e * res.u_n_i, rel=1e-9)


@pytest.mark.parametrize("e", [0.0, 0.5, 1.0])
def test_arm_tip_impact_conserves_momentum_and_loses_the_restitution_energy(e):
    c = _tip_case(7)
    model, data, q = c["model"], c["data"], c["q"]
    res = im.arm_tip_impact(model, data, q, c["v"], c["body"], c["p_BoC_B"], c["n"], c["m_T"], c["I_T_W"],
                            c["p_T"], c["V_T"], e)

    def total(v_arm, V_T):  # momentum (linear; angular about Wo) and kinetic energy of arm + target
        P, L = ch.momentum(model, data, q, v_arm)
        P_T = c["m_T"] * V_T[3:]
        L_T = c["I_T_W"] @ V_T[:3] + np.cross(c["p_T"], P_T)
        T = ch.kinetic_energy(model, data, q, v_arm) + 0.5 * V_T[3:] @ P_T + 0.5 * V_T[:3] @ c["I_T_W"] @ V_T[:3]
        return P + P_T, L + L_T, T

    P0, L0, T0 = total(c["v"], c["V_T"])
    P1, L1, T1 = total(res.v_f, res.V_WT_W_f)
    np.testing.assert_allclose(P1, P0, atol=1e-12 * (np.abs(P0).max() + 1))
    np.testing.assert_allclose(L1, L0, atol=1e-11 * (np.abs(L0).max() + 1))
    assert T0 - T1 == pytest.approx(res.energy_loss, rel=1e-9, abs=1e-12 * T0)
    # the loss is (1 − e²) of the normal relative motion's energy ½ u_n² / k, k from λ = −(1 + e) u_n / k
    lam = float(res.P_W @ c["n"])
    if e < 1.0:
        k = -(1.0 + e) * res.u_n_i / lam
        assert res.energy_loss == pytest.approx(0.5 * (1.0 - e * e) * res.u_n_i**2 / k, rel=1e-9)
    else:
        assert abs(res.energy_loss) <= 1e-12 * T0
    np.testing.assert_allclose(np.cross(res.P_W, c["n"]), 0.0, atol=1e-15)  # frictionless: along n only


def test_arm_tip_impact_head_on_is_newtons_two_body_collision():
    """A one-body "arm" (a free rigid body, the chain's base) hits a ball head on: the 1-D closed form."""
    m1, m2, v1, v2, e = 3.0, 2.0, 0.4, -0.1, 0.6
    model = ch.chain_from_table(["a"], [-1], ["free"], np.eye(4)[None], np.zeros((1, 3)), np.array([m1]),
                                np.zeros((1, 3)), np.eye(3)[None])
    data = ch.make_data(model)
    q = ch.neutral(model)
    v = np.r_[0.0, 0.0, 0.0, v1, 0.0, 0.0]  # [ω; v] of the body along x
    n = np.array([-1.0, 0.0, 0.0])  # the ball sits ahead (+x): from it to the arm is −x
    res = im.arm_tip_impact(model, data, q, v, 0, [0.5, 0.0, 0.0], n, m2, 0.1 * np.eye(3), [0.7, 0.0, 0.0],
                            [0.0, 0.0, 0.0, v2, 0.0, 0.0], e)
    v1f = (m1 * v1 + m2 * v2 + m2 * e * (v2 - v1)) / (m1 + m2)
    v2f = (m1 * v1 + m2 * v2 + m1 * e * (v1 - v2)) / (m1 + m2)
    np.testing.assert_allclose(res.v_f, [0, 0, 0, v1f, 0, 0], atol=1e-15)
    np.testing.assert_allclose(res.V_WT_W_f, [0, 0, 0, v2f, 0, 0], atol=1e-15)
    mu = m1 * m2 / (m1 + m2)
    assert res.energy_loss == pytest.approx(0.5 * mu * (1 - e * e) * (v1 - v2) ** 2, rel=1e-12)
    # receding: nothing happens
    away = im.arm_tip_impact(model, data, q, -v, 0, [0.5, 0.0, 0.0], n, m2, 0.1 * np.eye(3), [0.7, 0.0, 0.0],
                             [0.0, 0.0, 0.0, v2, 0.0, 0.0], e)
    assert np.all(away.P_W == 0.0) and np.array_equal(away.v_f, -v) and away.energy_loss == 0.0
    with pytest.raises(ValueError, match="restitution"):
        im.arm_tip_impact(model, data, q, v, 0, [0.5, 0, 0], n, m2, np.eye(3), [0.7, 0, 0], np.zeros(6), 1.5)
    with pytest.raises(ModelError, match="m_T"):
        im.arm_tip_impact(model, data, q, v, 0, [0.5, 0, 0], n, 0.0, np.eye(3), [0.7, 0, 0], np.zeros(6), 0.5)
    with pytest.raises(ShapeError, match="V_WT_W"):
        im.arm_tip_impact(model, data, q, v, 0, [0.5, 0, 0], n, m2, np.eye(3), [0.7, 0, 0], np.zeros(5), 0.5)


def test_impact_results_are_read_only_and_the_docstring_example_holds():
    import doctest

    c = _tip_case(3)
    res = im.arm_tip_impact(c["model"], c["data"], c["q"], c["v"], c["body"], c["p_BoC_B"], c["n"], c["m_T"],
                            c["I_T_W"], c["p_T"], c["V_T"], 0.5)
    for a in (res.P_W, res.v_f, res.V_WT_W_f):
        with pytest.raises(ValueError):
            a[0] = 1.0
    # results do not alias the chain's data buffers: a later call leaves them as they were
    before = res.v_f.copy()
    im.arm_tip_impact(c["model"], c["data"], c["q"], 2 * c["v"], c["body"], c["p_BoC_B"], c["n"], c["m_T"],
                      c["I_T_W"], c["p_T"], c["V_T"], 0.5)
    assert np.array_equal(res.v_f, before)
    s, args, n = _setup(11, planar=False)
    pl = im.plastic_impact_payload(*args, n_W=n)
    with pytest.raises(ValueError):
        pl.v_pf[0] = 1.0
    failures, tried = doctest.testmod(im, verbose=False)
    assert tried >= 5 and failures == 0
