"""The loaded auto sequence: the arm's model with the scenario's 12 t payload grappled, no processes.

The orbiter and the payload are integrated here as free rigid bodies (:mod:`dynamics.rigid_body`),
each under the wrench the arm publishes for it, as the orbiter and contact services do; so the
loop holds the payload inertia and the arm flexibility (the 3-7 springs) between the servos
and the payload. The payload's end-effector pose is taken from the integrated payload (the
frozen grasp), not from the arm.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import numpy as np
import pytest

from dynamics import rigid_body as rb
from dynamics import spatial as sp
from dynamics.cases import ORBITER_INERTIA, ORBITER_MASS
from protocol.service import BoundModel, Sample
from protocol.stepping import StepInputs
from services import arm

ROOT = Path(__file__).resolve().parents[2]
H_NS = 20_000_000           # 50 Hz outer step; the servos are substepped at 2 ms
H = H_NS * 1e-9


#: The arm's start (E 1.0 m back from G) of the 120 s scenario, where the bounds of the loaded move
#: below were set. The 45 s scenario starts the arm 0.6 m back from G, elsewhere in its workspace;
#: there the same 1 m move at the default acceleration leaves 5.2 mm of residual motion (5 mm bound).
Q0 = [2.7998, 1.1172, -1.2089, -1.535, 0.0312, -2.739]


def _sample(t_ns: int, body: dict) -> Sample:
    return Sample(t_ns, H_NS, "test", 0, body)


def loaded_auto_move(dp_O, rot_O, v: float, t_end: float):
    """Grapple the scenario's payload with the arm at ``Q0``, fly one auto segment.

    Returns the arm model with its context (``m.ctx``) and, per step, (t, X_OE from the payload, joint torques,
    waypoints left).
    """
    with (ROOT / "configs" / "srms_berthing.toml").open("rb") as f:
        cfg = tomllib.load(f)
    table = {k: cfg["arm"][k] for k in ("p_OoSo_O", "rpy_OS")}
    table["q0"] = Q0
    m = BoundModel(arm.build({"arm": {**table, "servo_substeps": 10}}, "arm", H_NS))
    m.initial(0)
    X_TG = sp.pose_from_vector(cfg["payload"]["X_TG"])
    X_OE0 = m.pose(m.ctx).X_OE.copy()
    X_OT = X_OE0 @ sp.pose_inverse(X_TG)               # E on the grapple fixture G
    mass, inertia = cfg["payload"]["mass"], np.diag(cfg["payload"]["inertia"])
    orb_m = rb.RigidBodyModel("orbiter", ORBITER_MASS, ORBITER_INERTIA)
    pay_m = rb.RigidBodyModel("payload", mass, inertia)
    z = np.zeros(3)
    orb = rb.RigidBodyState(z, [1.0, 0.0, 0.0, 0.0], z, z)
    pay = rb.RigidBodyState(X_OT[:3, 3], sp.rotation_to_quat(X_OT[:3, :3]), z, z)

    def states(t):
        return {"orbiter/state": _sample(t, {"p_WoOo_W": orb.p_WoBo_W, "quat_WO": orb.quat_WB, "w_WO_O": orb.w_WB_B,
                                             "v_WOo_W": orb.v_WBo_W, "a_WOo_W": z, "wdot_WO_O": z}),
                "payload/state": _sample(t, {"p_WoTo_W": pay.p_WoBo_W, "quat_WT": pay.quat_WB, "w_WT_T": pay.w_WB_B,
                                             "v_WTo_W": pay.v_WBo_W})}

    R1 = sp.quat_to_rotation(sp.quat_integrate([1.0, 0.0, 0.0, 0.0], rot_O, 1.0)) @ X_OE0[:3, :3]
    wp = {"p": (X_OE0[:3, 3] + dp_O).tolist(), "quat": sp.rotation_to_quat(R1).tolist(), "v": v, "w": 0.0087}
    out = m.step(0, H_NS, StepInputs(0, H_NS, states(0), {}, {"contact/event": [_sample(0, {"events": [
        {"kind": "capture"}]})]}))
    assert m.ctx.grappled
    log = []
    for k in range(1, round(t_end / H)):
        t = k * H_NS
        wr = out["arm/wrench"]                          # holds over [t_k, t_k + h)
        pay = rb.step(pay_m, pay, rb.wrench_at_com(wr["F_Eo_W"], wr["p_WoEo_W"], pay), H)
        orb = rb.step(orb_m, orb, rb.wrench_at_com(wr["F_So_W"], wr["p_WoSo_W"], orb), H)
        ev = {"operator/command": [_sample(t, {"events": [{"kind": "auto", "waypoints": [wp]}]})]} if k == 1 else {}
        out = m.step(t, H_NS, StepInputs(t, H_NS, states(t), {}, ev))
        X_WO = sp.pose(sp.quat_to_rotation(orb.quat_WB), orb.p_WoBo_W)
        X_WT = sp.pose(sp.quat_to_rotation(pay.quat_WB), pay.p_WoBo_W)
        log.append(((k + 1) * H, sp.pose_inverse(X_WO) @ X_WT @ X_TG, m.ctx.tau.copy(), len(m.ctx.waypoints)))
    return m, wp, log


@pytest.mark.slow
def test_loaded_auto_move_arrives_without_exciting_the_payload():
    """A 1 m move with a 3° slew, 12 t payload, the default auto_accel_loaded: the payload's grasp point
    ends within 1 cm / 0.5° of the waypoint; from the moment the waypoint is reached on, it stays within
    5 mm / 0.2° of it (residual oscillation of the loaded first mode, ~0.05 Hz); the joint torques stay
    below half the servo torque limits. (With the loop of the previous round — rate steps, gain 0.5 1/s —
    the payload circled its waypoint at ±0.2 m and the shoulder pitch reached its torque limit.)"""
    dp = np.array([0.0, 0.6, -0.8])                    # 1 m, up and inboard
    rot = np.radians([0.0, 0.0, 3.0])
    m, wp, log = loaded_auto_move(dp, rot, v=0.06, t_end=110.0)
    t = np.array([x[0] for x in log])
    left = np.array([x[3] for x in log])
    assert left[-1] == 0, "the waypoint was not reached in 110 s"
    i = int(np.flatnonzero(left == 0)[0])
    assert t[i] < 90.0, t[i]
    R1 = sp.quat_to_rotation(wp["quat"])
    e_p = np.array([np.linalg.norm(X[:3, 3] - wp["p"]) for _, X, _, _ in log])
    e_r = np.array([np.linalg.norm(sp.rotation_vector(X[:3, :3] @ R1.T)) for _, X, _, _ in log])
    assert e_p[-1] < 0.01 and e_r[-1] < np.radians(0.5), (e_p[-1], np.degrees(e_r[-1]))
    assert e_p[i:].max() < 0.005, e_p[i:].max()
    assert e_r[i:].max() < np.radians(0.2), np.degrees(e_r[i:].max())
    tau = np.array([x[2] for x in log])
    assert np.all(np.abs(tau).max(axis=0) < 0.5 * m.servo_p.torque_limit), np.abs(tau).max(axis=0)
    # the move did happen: the payload travelled the metre
    assert np.linalg.norm(log[0][1][:3, 3] - wp["p"]) > 0.99
