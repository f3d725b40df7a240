"""dynamics.closed_chain: the latched-and-grappled SRMS as a closed kinematic chain.

References: Pinocchio (classical frame accelerations, and the KKT solve of the loop built
from its own Jacobians and accelerations), finite differences of the frame velocity, and
the invariants of the closed system (momentum with internal joint torques; energy without).
"""

import tomllib
from dataclasses import replace
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest
from conftest import base_T, pin_from_chain, pin_q, random_chain, random_state, rel_err, swap_wv, sym_upper

from dynamics import beam as bm
from dynamics import cases
from dynamics import chain as ch
from dynamics import closed_chain as cc
from errors import ModelError, ShapeError

CONFIG = Path(__file__).resolve().parents[2] / "configs" / "srms_berthing.toml"


def latched(booms=None):
    """The default scenario's payload held by the SRMS and latched in the bay (its numbers, from its config)."""
    cfg = tomllib.loads(CONFIG.read_text())
    return cases.srms_latched_and_grappled(
        payload_mass=cfg["payload"]["mass"], payload_inertia_T=cfg["payload"]["inertia"],
        X_TG=cfg["payload"]["X_TG"], X_TB=cfg["payload"]["X_TB"], X_OL=cfg["orbiter"]["X_OL"],
        X_OS=ch.pose_xyz_rpy(cfg["arm"]["p_OoSo_O"], cfg["arm"]["rpy_OS"]),
        theta_guess=np.array(cfg["arm"]["q0"]), booms=booms)


def pin_vdot_ours_to_spatial(model, q, v, vdot):
    """Our v̇ (classical base acceleration, W) → Pinocchio's a (spatial, base frame)."""
    c = np.zeros(model.nv)
    if model.floating:
        c[3:6] = np.cross(v[:3], v[3:6])
    return np.linalg.solve(base_T(model, q), vdot - c)


def test_frame_acceleration_matches_pinocchio(rng):
    for floating in (True, False):
        model = random_chain(rng, 5, floating=floating)
        pm = pin_from_chain(model)
        pd = pm.createData()
        data = ch.make_data(model)
        q, v = random_state(rng, model)
        vdot = rng.normal(size=model.nv)
        qp, vp = pin_q(pm, model, q), np.linalg.solve(base_T(model, q), v)
        pin.forwardKinematics(pm, pd, qp, vp, pin_vdot_ours_to_spatial(model, q, v, vdot))
        for b in range(model.nb):
            p = rng.uniform(-1, 1, 3)
            jid = b + 1 if floating else b
            if jid == 0:
                continue
            fid = pm.addFrame(pin.Frame(f"P{b}", jid, 0, pin.SE3(np.eye(3), p), pin.FrameType.OP_FRAME))
            pd = pm.createData()
            pin.forwardKinematics(pm, pd, qp, vp, pin_vdot_ours_to_spatial(model, q, v, vdot))
            a_pin = pin.getFrameClassicalAcceleration(pm, pd, fid, pin.ReferenceFrame.LOCAL_WORLD_ALIGNED)
            ref = np.concatenate([a_pin.angular, a_pin.linear])
            assert rel_err(ch.frame_acceleration(model, data, q, v, vdot, b, p), ref) < 1e-10


def test_frame_acceleration_is_the_derivative_of_the_frame_velocity_with_beams(rng):
    base = random_chain(rng, 4, floating=True)
    fm = ch.with_beams(base, {1: bm.BeamLink(1.0, 2.0, 40.0, modes_y=2, modes_z=1, modes_torsion=1, GJ=9.0,
                                              polar_mass_per_length=0.1),
                              3: bm.BeamLink(0.7, 1.0, 30.0, modes_y=1, modes_z=1)})
    d = ch.make_data(fm)
    q = ch.neutral(fm)
    q[3:7] = [0.8, -0.2, 0.4, 0.4]
    q[3:7] /= np.linalg.norm(q[3:7])
    q[7:] = rng.uniform(-0.5, 0.5, fm.nq - 7)
    v, vdot = rng.normal(size=fm.nv), rng.normal(size=fm.nv)
    h = 1e-6
    for body in (2, 4):
        p = rng.uniform(-0.5, 0.5, 3)

        def twist(s, body=body, p=p):
            return ch.frame_jacobian(fm, d, ch.integrate(fm, q, v + 0.5 * s * vdot, s), body, p) @ (v + s * vdot)

        fd = (twist(h) - twist(-h)) / (2 * h)
        assert rel_err(ch.frame_acceleration(fm, d, q, v, vdot, body, p), fd) < 1e-7
    with pytest.raises(ModelError, match="beam link"):
        ch.frame_acceleration(fm, d, q, v, vdot, 1)


def test_loop_dynamics_match_a_kkt_solve_from_pinocchio():
    """v̇ and λ of the latched SRMS from Pinocchio's M, bias, frame Jacobians and frame accelerations."""
    case, loop = latched()
    model, data = case.model, ch.make_data(case.model)
    rng = np.random.default_rng(7)
    q = case.q.copy()
    v = rng.normal(scale=0.01, size=model.nv)  # not on the constraint (J̇v would vanish there: the loop is rigid)
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
    LWA = pin.ReferenceFrame.LOCAL_WORLD_ALIGNED
    J = (pin.getFrameJacobian(pm, pd, fa, LWA) - pin.getFrameJacobian(pm, pd, fb, LWA))  # [v; ω]
    gam_a, gam_b = (pin.getFrameClassicalAcceleration(pm, pd, f, LWA) for f in (fa, fb))
    gamma = np.concatenate([gam_a.linear - gam_b.linear, gam_a.angular - gam_b.angular])
    K = np.block([[M, J.T], [J, np.zeros((6, 6))]])
    sol = np.linalg.solve(K, np.concatenate([T.T @ tau - nle, -gamma]))
    a_ref = T @ sol[: pm.nv]
    if model.floating:
        a_ref[3:6] += np.cross(v[:3], v[3:6])
    assert rel_err(a, a_ref) < 1e-8
    assert rel_err(lam, swap_wv() @ sol[pm.nv:]) < 1e-8
    assert rel_err(cc.constraint_bias(model, data, q, v, loop), swap_wv() @ gamma) < 1e-10


SOFT_BOOMS = tuple(replace(b, EI_y=2.0e4, damping_ratio=0.0) for b in cases.srms_booms(1))
TAU_J = [300.0, -200.0, 150.0, 80.0, -40.0, 40.0]  # joints loading the loop [N·m]


def _run(case, loop, h, t_end, *, project=True, every=10, **kw):
    """Step the closed chain. Per step: loop errors, λ at the step start, λ at the step end before
    the projection; every ``every`` steps: momentum and energy."""
    model, data = case.model, ch.make_data(case.model)
    tau = np.zeros(model.nv)
    tau[6:12] = TAU_J
    v = np.zeros(model.nv)
    v[:6] = [0.002, -0.001, 0.003, 0.01, 0.0, -0.005]  # the latched system tumbles and drifts
    if model.ne:
        v[-model.ne:] = np.random.default_rng(11).normal(scale=0.01, size=model.ne)  # the booms vibrate
    q, v = cc.project(model, data, case.q, v, loop)
    out = {"err_p": [], "err_r": [], "lam": [], "lam_raw": [], "P": [], "L": []}
    for k in range(int(round(t_end / h))):
        first: list[np.ndarray] = []

        def accel(qq, vv, first=first):
            a, lam = cc.forward_dynamics(model, data, qq, vv, tau, loop, **kw)
            if not first:
                first.append(lam)
            return a

        q, v = ch.step_rk4_with(model, q, v, h, accel)
        out["lam"].append(first[0])
        if project:
            out["lam_raw"].append(cc.forward_dynamics(model, data, q, v, tau, loop, **kw)[1])
            q, v = cc.project(model, data, q, v, loop)
        e = cc.constraint_error(model, data, q, loop)
        out["err_r"].append(np.abs(e[:3]).max())
        out["err_p"].append(np.abs(e[3:]).max())
        if k % every == 0:
            P, L = ch.momentum(model, data, q, v)
            out["P"].append(P)
            out["L"].append(L)
    return {key: np.array(x) for key, x in out.items()}


@pytest.mark.parametrize("flexible", [False, True])
def test_latched_and_grappled_loop_stays_closed_for_60_s(flexible):
    """Constraint error < 1e-9 m and 1e-9 rad over 60 s, and no jump of the constraint wrench across
    the projections (beyond the integrator's local error, see the next test).

    With booms (1 mode per plane) they are softened to EI = 2e4 N·m² so that their modes in
    the closed loop (a few Hz) suit the 50 ms test step (the assumed booms' need ~2 ms)."""
    case, loop = latched(SOFT_BOOMS if flexible else None)
    r = _run(case, loop, 0.05 if flexible else 0.1, 60.0)
    assert r["err_p"].max() < 1e-9 and r["err_r"].max() < 1e-9
    scale = np.abs(r["lam"]).max(axis=0)
    assert np.all(scale > 1.0)  # the loop carries load
    jump = np.abs(r["lam_raw"][:-1] - r["lam"][1:]).max()
    per_step = np.abs(np.diff(r["lam"], axis=0)).max()
    assert jump < 1e-3 * per_step, (jump, per_step)
    if not flexible:  # (with the booms, RK4 at 50 ms resolves their modes too coarsely for this)
        P0, L0 = r["P"][0], r["L"][0]
        assert np.abs(r["P"] - P0).max() < 1e-6 * np.linalg.norm(P0)
        assert np.abs(r["L"] - L0).max() < 1e-6 * np.linalg.norm(L0)
    if flexible:
        assert np.ptp(r["lam"], axis=0).max() > 0.1 * scale.max()  # the vibrating booms load the loop


def test_constraint_wrench_is_continuous_as_the_step_shrinks():
    """What the projection removes at a step boundary is the integrator's local error: the jump of
    λ there falls like h⁴ or faster (RK4), so λ(t) is continuous in the limit."""
    case, loop = latched(SOFT_BOOMS)
    jumps = []
    for h in (0.05, 0.025):
        r = _run(case, loop, h, 2.0, every=1000)
        jumps.append(np.abs(r["lam_raw"][:-1] - r["lam"][1:]).max())
    assert jumps[1] < jumps[0] / 8, jumps


def test_closed_flexible_system_conserves_momentum():
    """The loop's constraint wrench and the joint torques are internal: with a step that resolves the
    booms' modes (5 ms) the momentum of the whole latched system stays put to 1e-8."""
    case, loop = latched(SOFT_BOOMS)
    r = _run(case, loop, 0.005, 1.0, every=5)
    P0, L0 = r["P"][0], r["L"][0]
    assert np.abs(r["P"] - P0).max() < 1e-8 * np.linalg.norm(P0)
    assert np.abs(r["L"] - L0).max() < 1e-8 * np.linalg.norm(L0)


def test_without_drift_correction_the_loop_drifts_and_baumgarte_bounds_it():
    """No projection: the uncorrected loop error keeps growing; with Baumgarte's terms (eq. 26,
    α = β = 5/s) it stays bounded at its early level and ends far below."""
    case, loop = latched(SOFT_BOOMS)
    plain = _run(case, loop, 0.05, 20.0, project=False, every=1000)
    baum = _run(case, loop, 0.05, 20.0, project=False, every=1000, alpha=5.0, beta=5.0)
    early = slice(0, 100)  # the first 5 s
    for key in ("err_p", "err_r"):
        assert plain[key].max() > 1e-9 and plain[key].max() > 3.0 * plain[key][early].max()  # growing
        assert baum[key].max() < 1.2 * baum[key][early].max()  # bounded
        assert baum[key][-1] < plain[key][-1] / 5


def test_bad_loops_are_refused():
    case, loop = latched()
    with pytest.raises(ModelError, match="no loop"):
        cc.LoopClosure(3, np.eye(4), 3, np.eye(4))
    with pytest.raises(ShapeError, match="X_AC"):
        cc.LoopClosure(3, np.eye(3), 0, np.eye(4))
    with pytest.raises(ShapeError, match="not a body"):
        cc.constraint_error(case.model, ch.make_data(case.model), case.q, cc.LoopClosure(9, np.eye(4), 0, np.eye(4)))
    fm = ch.with_beams(case.model, {3: bm.BeamLink(6.377, 20.0, 1e7)})
    with pytest.raises(ModelError, match="beam link"):
        cc.constraint_jacobian(fm, ch.make_data(fm), ch.neutral(fm), cc.LoopClosure(3, np.eye(4), 0, np.eye(4)))


def test_weld_matches_pinocchio_constraint_dynamics_on_the_manifold_with_the_opposite_sign():
    """pin.constraintDynamics (CONTACT_6D, LOCAL_WORLD_ALIGNED) on the latched SRMS at a v with J_C v = 0: v̇ to 1e-9
    and λ = −[λ_pin[3:]; λ_pin[:3]] (its force acts on body a, ours on body b). Off the manifold its 6-D contact
    holds the spatial relative acceleration, ours the classical one (seed 004 eq. 24): they differ."""
    case, loop = latched()
    model, data = case.model, ch.make_data(case.model)
    rng = np.random.default_rng(7)
    q = case.q.copy()
    v_off = rng.normal(scale=0.01, size=model.nv)
    J = cc.constraint_jacobian(model, data, q, loop)
    v_on = v_off - np.linalg.pinv(J) @ (J @ v_off)
    tau = np.zeros(model.nv)
    tau[6:] = rng.normal(scale=200.0, size=6)
    pm = pin_from_chain(model)
    pd = pm.createData()
    se3 = [pin.SE3(X[:3, :3], X[:3, 3]) for X in (loop.X_AC, loop.X_BC)]
    cm = pin.RigidConstraintModel(pin.ContactType.CONTACT_6D, pm, model.nb, se3[0], 1, se3[1],
                                  pin.ReferenceFrame.LOCAL_WORLD_ALIGNED)
    models, datas = pin.StdVec_RigidConstraintModel(), pin.StdVec_RigidConstraintData()
    models.append(cm)
    datas.append(cm.createData())
    pin.initConstraintDynamics(pm, pd, models, datas)
    T = base_T(model, q)
    errs = []
    for v in (v_on, v_off):
        a, lam = cc.forward_dynamics(model, data, q, v, tau, loop)
        a_pin = T @ pin.constraintDynamics(pm, pd, pin_q(pm, model, q), np.linalg.solve(T, v), T.T @ tau, models,
                                           datas, pin.ProximalSettings(1e-14, 0.0, 1))
        a_pin[3:6] += np.cross(v[:3], v[3:6])                     # spatial -> classical base acceleration
        errs.append((rel_err(a, a_pin), rel_err(lam, -swap_wv() @ pd.lambda_c)))
    assert errs[0][0] < 1e-9 and errs[0][1] < 1e-9, errs
    assert errs[1][0] > 1e-3, errs


def test_step_report_impulse_is_the_momentum_the_weld_gave_and_the_energy_the_projection_changed():
    """The SRMS holding a payload welded to W, joints driven: over 1 s the system's momentum changes by −Σ impulse
    (linear, and angular about Wo with the moment of the force at Cb) to 1e-9. Flexible latched loop, no torques
    and no damping: the energy drifts by the RK4 stages plus the reported projection changes, 1e-11 of E over 2 s."""
    case, loop = latched()
    model, data = case.model, ch.make_data(case.model)
    X = ch.forward_kinematics(model, data, case.q)
    weld = cc.LoopClosure(loop.body_a, loop.X_AC, -1, X[loop.body_a] @ loop.X_AC)
    v = np.zeros(model.nv)
    v[:6] = [0.002, -0.001, 0.003, 0.01, 0.0, -0.005]
    tau = np.zeros(model.nv)
    tau[6:12] = TAU_J
    q, v = cc.project(model, data, case.q, v, weld)
    P0, L0 = ch.momentum(model, data, q, v)
    imp = np.zeros(6)
    for _ in range(100):
        r = cc.step_rk4_report(model, data, q, v, tau, 0.01, weld)
        q, v, imp = r.q, r.v, imp + r.impulse
        assert r.kinetic_removed >= 0.0
    P1, L1 = ch.momentum(model, data, q, v)
    p_Cb = weld.X_BC[:3, 3]
    assert rel_err(P1 - P0, -imp[3:]) < 1e-9
    assert rel_err(L1 - L0, -(imp[:3] + np.cross(p_Cb, imp[3:]))) < 1e-9
    assert np.abs(imp).max() > 1.0                                # the weld did work against the joints

    case, loop = latched(SOFT_BOOMS)
    model, data = case.model, ch.make_data(case.model)
    v = np.zeros(model.nv)
    v[:6] = [0.002, -0.001, 0.003, 0.01, 0.0, -0.005]
    v[-model.ne:] = np.random.default_rng(11).normal(scale=0.01, size=model.ne)
    q, v = cc.project(model, data, case.q, v, loop)

    def energy(q, v):
        return ch.kinetic_energy(model, data, q, v) + ch.potential_energy(model, q)

    E0, stages, proj = energy(q, v), 0.0, 0.0
    zero = np.zeros(model.nv)
    for _ in range(200):
        q1, v1 = ch.step_rk4_with(model, q, v, 0.01, lambda a, b: cc.forward_dynamics(model, data, a, b, zero, loop)[0])
        stages += energy(q1, v1) - energy(q, v)
        r = cc.step_rk4_report(model, data, q, v, zero, 0.01, loop)
        assert np.array_equal(r.q, cc.project(model, data, q1, v1, loop)[0])
        q, v, proj = r.q, r.v, proj + r.energy_change
    assert abs(energy(q, v) - E0 - stages - proj) < 1e-12 * E0
    assert abs(energy(q, v) - E0) < 1e-11 * E0
