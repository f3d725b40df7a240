"""Loop closures other than a weld: a 3-D point, a revolute and a planar pin (dynamics.closed_chain kinds).

References: pin.constraintDynamics with its CONTACT_3D model (a planar four-bar closed by a pin, where
Pinocchio's third row is redundant, and the SRMS holding its payload at a point of the orbiter), on
the constraint manifold; for the revolute closure, which Pinocchio's contact models do not have, a
KKT solve built from Pinocchio's frame Jacobians and classical accelerations, and the closure staying
closed when integrated without projection (a wrong drift term Ṡ J_C v opens it at once).
"""

import numpy as np
import pinocchio as pin
import pytest
from conftest import base_T, pin_from_chain, pin_q, rel_err, sym_upper
from test_closed_chain import latched

from dynamics import chain as ch
from dynamics import closed_chain as cc
from dynamics import spatial as sp
from errors import ModelError

LWA = pin.ReferenceFrame.LOCAL_WORLD_ALIGNED


def four_bar():
    """Crank 1 m, coupler 2.5 m, rocker 2 m on ground pivots 3 m apart, every axis along z; the rocker's tip pinned
    to the second ground pivot (a planar closure), closed from a guess by the projection."""
    lengths, masses = [1.0, 2.5, 2.0], [2.0, 5.0, 4.0]
    X = np.tile(np.eye(4), (4, 1, 1))
    for b in (2, 3):
        X[b, 0, 3] = lengths[b - 2]
    com = np.array([[0.0, 0.0, 0.0]] + [[0.5 * L, 0.0, 0.0] for L in lengths])
    inertia = np.array([np.zeros((3, 3))] + [np.diag([1e-3, m * L * L / 12, m * L * L / 12])
                                             for m, L in zip(masses, lengths, strict=True)])
    model = ch.chain_from_table(["ground", "crank", "coupler", "rocker"], [-1, 0, 1, 2],
                                ["fixed_base", "revolute", "revolute", "revolute"], X, [[0.0, 0.0, 1.0]] * 4,
                                [0.0, *masses], com, inertia)
    loop = cc.LoopClosure(3, sp.pose(np.eye(3), [2.0, 0.0, 0.0]), -1, sp.pose(np.eye(3), [3.0, 0.0, 0.0]), "planar")
    data = ch.make_data(model)
    q, v = cc.project(model, data, [1.0, -0.6, -2.0], [0.5, 0.0, 0.0], loop)
    return model, data, loop, q, v


def pin_contact(pm, kind, joint_a, X_AC, joint_b, X_BC):
    cm = pin.RigidConstraintModel(kind, pm, joint_a, pin.SE3(X_AC[:3, :3], X_AC[:3, 3]), joint_b,
                                  pin.SE3(X_BC[:3, :3], X_BC[:3, 3]), LWA)
    models, datas = pin.StdVec_RigidConstraintModel(), pin.StdVec_RigidConstraintData()
    models.append(cm)
    datas.append(cm.createData())
    return models, datas


def test_planar_four_bar_matches_pinocchio_3d_contact():
    """v̇ to 1e-9 against pin.constraintDynamics (its redundant out-of-plane row solved by the proximal iterations);
    λ (the pin's force on the ground, in W) is minus Pinocchio's on the rocker, whose z component vanishes."""
    model, data, loop, q, v = four_bar()
    assert np.abs(cc.constraint_error(model, data, q, loop)).max() < 1e-12
    assert np.linalg.matrix_rank(cc.constraint_jacobian(model, data, q, loop)) == 2
    tau = np.array([5.0, -1.0, 2.0])
    a, lam = cc.forward_dynamics(model, data, q, v, tau, loop)
    pm = pin_from_chain(model)
    pd = pm.createData()
    models, datas = pin_contact(pm, pin.ContactType.CONTACT_3D, 3, loop.X_AC, 0, loop.X_BC)
    pin.initConstraintDynamics(pm, pd, models, datas)
    a_pin = pin.constraintDynamics(pm, pd, q, v, tau, models, datas, pin.ProximalSettings(1e-13, 1e-9, 200))
    assert rel_err(a, a_pin) < 1e-9
    assert rel_err(lam, -pd.lambda_c[:2]) < 1e-9
    assert abs(pd.lambda_c[2]) < 1e-9 * np.abs(lam).max()
    # and the crank really drives the loop: the rocker turns
    assert abs(a[2]) > 0.1


def test_srms_held_at_a_point_matches_pinocchio_3d_contact():
    """The latched SRMS's payload held at one point of the orbiter instead of a weld (a ball joint: 3 rows, the arm
    keeps 3 internal motions): v̇ and λ against pin.constraintDynamics CONTACT_3D to 1e-9 on the manifold."""
    case, weld = latched()
    loop = cc.LoopClosure(weld.body_a, weld.X_AC, weld.body_b, weld.X_BC, "point")
    model, data = case.model, ch.make_data(case.model)
    rng = np.random.default_rng(3)
    q = case.q
    J = cc.constraint_jacobian(model, data, q, loop)
    assert J.shape == (3, model.nv)
    v = rng.normal(scale=0.01, size=model.nv)
    v -= np.linalg.pinv(J) @ (J @ v)
    tau = np.zeros(model.nv)
    tau[6:] = rng.normal(scale=200.0, size=6)
    a, lam = cc.forward_dynamics(model, data, q, v, tau, loop)
    pm = pin_from_chain(model)
    pd = pm.createData()
    models, datas = pin_contact(pm, pin.ContactType.CONTACT_3D, model.nb, loop.X_AC, 1, loop.X_BC)
    pin.initConstraintDynamics(pm, pd, models, datas)
    T = base_T(model, q)
    a_pin = T @ pin.constraintDynamics(pm, pd, pin_q(pm, model, q), np.linalg.solve(T, v), T.T @ tau, models, datas,
                                       pin.ProximalSettings(1e-14, 0.0, 1))
    a_pin[3:6] += np.cross(v[:3], v[3:6])
    assert rel_err(a, a_pin) < 1e-9
    assert rel_err(lam, -pd.lambda_c) < 1e-9
    assert rel_err(a, cc.forward_dynamics(model, data, q, v, tau, weld)[0]) > 1e-3   # not the weld's motion


def test_revolute_closure_against_a_kkt_solve_from_pinocchio_and_it_stays_closed():
    """SRMS payload hinged to the orbiter about the latch frame's z (5 rows): v̇ and λ against the KKT solve from
    Pinocchio's M, bias, frame Jacobians and classical accelerations, the rows S (x, y of Cb; translations) and
    their rate Ṡ = ω_b × S written here; integrated 2 s without projection, it stays closed to 1e-9."""
    case, weld = latched()
    loop = cc.LoopClosure(weld.body_a, weld.X_AC, weld.body_b, weld.X_BC, "revolute")
    model, data = case.model, ch.make_data(case.model)
    rng = np.random.default_rng(5)
    q = case.q
    J = cc.constraint_jacobian(model, data, q, loop)
    v = rng.normal(scale=0.01, size=model.nv)
    v -= np.linalg.pinv(J) @ (J @ v)
    tau = np.zeros(model.nv)
    tau[6:] = rng.normal(scale=200.0, size=6)
    a, lam = cc.forward_dynamics(model, data, q, v, tau, loop)
    pm = pin_from_chain(model)
    fa = pm.addFrame(pin.Frame("Ca", model.nb, 0, pin.SE3(loop.X_AC[:3, :3], loop.X_AC[:3, 3]), pin.FrameType.OP_FRAME))
    fb = pm.addFrame(pin.Frame("Cb", 1, 0, pin.SE3(loop.X_BC[:3, :3], loop.X_BC[:3, 3]), pin.FrameType.OP_FRAME))
    pd = pm.createData()
    T = base_T(model, q)
    qp, vp = pin_q(pm, model, q), np.linalg.solve(T, v)
    M = sym_upper(pin.crba(pm, pd, qp))
    nle = pin.rnea(pm, pd, qp, vp, np.zeros(pm.nv))
    pin.computeJointJacobians(pm, pd, qp)
    pin.forwardKinematics(pm, pd, qp, vp, np.zeros(pm.nv))
    pin.updateFramePlacements(pm, pd)
    Ja, Jb = (pin.getFrameJacobian(pm, pd, f, LWA) for f in (fa, fb))        # [v; ω]
    ga, gb = (pin.getFrameClassicalAcceleration(pm, pd, f, LWA) for f in (fa, fb))
    R = pd.oMf[fb].rotation
    x, y = R[:, 0], R[:, 1]
    w_b = (Jb @ vp)[3:]
    dw, dv = ((Ja - Jb) @ vp)[3:], ((Ja - Jb) @ vp)[:3]
    S = np.zeros((5, 6))                                                     # on Pinocchio's [v; ω]
    S[0, 3:], S[1, 3:], S[2:, :3] = x, y, np.eye(3)
    gamma = np.r_[x @ (ga.angular - gb.angular) + np.cross(w_b, x) @ dw,
                  y @ (ga.angular - gb.angular) + np.cross(w_b, y) @ dw, ga.linear - gb.linear]
    Jc = S @ (Ja - Jb)
    K = np.block([[M, Jc.T], [Jc, np.zeros((5, 5))]])
    sol = np.linalg.solve(K, np.concatenate([T.T @ tau - nle, -gamma]))
    a_ref = T @ sol[:pm.nv]
    a_ref[3:6] += np.cross(v[:3], v[3:6])
    assert np.abs(dv).max() < 1e-12                                          # on the manifold
    assert rel_err(a, a_ref) < 1e-9
    assert rel_err(lam, sol[pm.nv:]) < 1e-9
    qq, vv = q.copy(), v.copy()
    for _ in range(200):
        qq, vv = ch.step_rk4_with(model, qq, vv, 0.01,
                                  lambda a_, b_: cc.forward_dynamics(model, data, a_, b_, tau, loop)[0])
    assert np.abs(cc.constraint_error(model, data, qq, loop)).max() < 1e-9
    assert np.abs(cc.constraint_jacobian(model, data, qq, loop) @ vv).max() < 1e-9
    e = cc.constraint_error(model, data, qq, weld)                            # the hinge did turn
    assert np.abs(e[:3]).max() > 1e-4


def test_unknown_kind_is_refused():
    with pytest.raises(ModelError, match="kind"):
        cc.LoopClosure(1, np.eye(4), 0, np.eye(4), "ball")
    assert cc.LoopClosure(1, np.eye(4), 0, np.eye(4), "planar").rows == 2
