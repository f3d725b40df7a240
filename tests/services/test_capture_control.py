"""Post-capture control (``[arm] capture_control``): the arm's model alone, then the capture scenario in lockstep.

The scenario runs are the services' models stepped by the runtime's own scheduler in one process
(:func:`protocol.scheduler.simulate`), as ``launch.py run --inprocess`` steps them.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dynamics import rigid_body as rb
from dynamics import spatial as sp
from protocol import config as pc
from protocol.codec import decode
from protocol.scheduler import simulate
from protocol.service import BoundModel, Sample
from protocol.stepping import StepInputs
from services import arm

ROOT = Path(__file__).resolve().parents[2]
VARIANT = ROOT / "configs" / "examples" / "srms_capture_damp.toml"
H_NS = 2_000_000
H = H_NS * 1e-9
M_T, I_T = 12000.0, np.diag([2.0e4, 4.6e4, 4.6e4])
X_TG = sp.pose_from_vector([1.0, 0.0, -2.05, 0.0, -np.pi / 2, 0.0])
Z3 = np.zeros(3)


def _orbiter_at_rest() -> Sample:
    return Sample(0, 10_000_000, "orbiter", 0, {"p_WoOo_W": Z3, "quat_WO": np.array([1.0, 0, 0, 0]), "w_WO_O": Z3,
                                                "v_WOo_W": Z3, "a_WOo_W": Z3, "wdot_WO_O": Z3})


def _payload_sample(t_ns: int, s: rb.RigidBodyState) -> Sample:
    return Sample(t_ns, H_NS, "contact", 0, {"p_WoTo_W": s.p_WoBo_W, "quat_WT": s.quat_WB, "w_WT_T": s.w_WB_B,
                                             "v_WTo_W": s.v_WBo_W, "a_WTo_W": Z3, "wdot_WT_T": Z3})


def _grappled(table: dict[str, Any], V0_E: np.ndarray) -> tuple[BoundModel, rb.RigidBodyState, dict[str, Any]]:
    """The arm at its default pose holding a 12 t payload (G on E) whose twist at Eo is ``V0_E`` ([ω; v], W = O);
    the capture event applied. Returns the model with its context (``m.ctx``), the payload's state and the first
    step's outputs."""
    m = BoundModel(arm.build({"arm": table, "payload": {"mass": M_T, "inertia": np.diag(I_T).tolist()}}, "arm", H_NS))
    m.initial(0)
    X_OE = m.pose(m.ctx).X_OE.copy()
    X_OT = X_OE @ sp.pose_inverse(X_TG)
    w0, vE = V0_E[:3], V0_E[3:]
    pay = rb.RigidBodyState(X_OT[:3, 3], sp.rotation_to_quat(X_OT[:3, :3]),
                            vE + np.cross(w0, X_OT[:3, 3] - X_OE[:3, 3]), X_OT[:3, :3].T @ w0)
    ev = {"contact/event": [Sample(0, H_NS, "contact", 0, {"events": [{"kind": "capture"}]})]}
    out = m.step(0, H_NS, StepInputs(0, H_NS, {"orbiter/state": _orbiter_at_rest(),
                                               "payload/state": _payload_sample(0, pay)}, {}, ev))
    return m, pay, out


def test_damper_inertia_is_the_payloads_kinetic_energy_at_the_end_effector():
    """½ Vᵀ M_E V, the spatial inertia the damper scales, is the payload's kinetic energy when it moves with the
    twist V at Eo (computed from its CoM velocity and body rates by dynamics.rigid_body)."""
    rng = np.random.default_rng(3)
    m, pay, _ = _grappled({"capture_control": "damp"}, np.zeros(6))
    M_E = m.payload_inertia_E(m.ctx)
    np.testing.assert_allclose(M_E, M_E.T, atol=1e-9 * np.abs(M_E).max())
    model = rb.RigidBodyModel("payload", M_T, I_T)
    p_E = m.pose(m.ctx).X_OE[:3, 3]
    R_WT = sp.quat_to_rotation(pay.quat_WB)
    for _ in range(5):
        V = rng.normal(size=6) * [1e-3, 1e-3, 1e-3, 1e-2, 1e-2, 1e-2]
        s = rb.RigidBodyState(pay.p_WoBo_W, pay.quat_WB, V[3:] + np.cross(V[:3], pay.p_WoBo_W - p_E), R_WT.T @ V[:3])
        assert 0.5 * V @ M_E @ V == pytest.approx(rb.kinetic_energy(model, s), rel=1e-10)


def test_brakes_control_sets_the_brakes_at_capture_damp_releases_them():
    m, _, _ = _grappled({}, np.zeros(6))
    assert m.ctx.grappled and m.ctx.brakes and m.ctx.mode == "brakes"
    m, _, _ = _grappled({"capture_control": "damp"}, np.zeros(6))
    assert m.ctx.grappled and not m.ctx.brakes and m.ctx.mode == "damp"


def test_damped_relative_twist_follows_the_loops_closed_form():
    """Orbiter held still, the payload integrated here under the arm's wrench. With servos that track their rate
    command closely (bandwidth 600 rad/s, no friction: [arm.assumed]) the commanded rates
    θ̇ + λK⁻¹(τ_d − τ) make the transmitted torque τ = k(θ_m − θ) + βk(θ̇_m − θ̇) obey
    (1 + βλ) τ̇ = λ(τ_d − τ) + βλ τ̇_d, and with τ_d = −Jᵀ(M_E/T)V and M_E V̇ = J⁻ᵀτ (2-3) every component of the
    relative twist V at Eo obeys the same scalar equation

        (1 + βλ) V̈ + (λ + βλ/T) V̇ + (λ/T) V = 0,  V(0) = V0,  V̇(0) = −βλ/((1 + βλ) T) · V0

    (the damper jumps the torque to βλ/(1 + βλ) τ_d as the motors start). Each of the six components follows
    that solution within 3 % of its start (measured: 2.3 %, at 1 s, the servos' own lag); then the brakes go
    on at rest."""
    V0 = np.array([4e-4, -3e-4, 5e-4, 2e-3, -1e-3, 1.5e-3])
    lam, T = 1.0, 2.0
    m, pay, out = _grappled({"capture_control": "damp", "damp_bandwidth": lam, "damp_time": T, "servo_substeps": 8,
                             "assumed": {"bandwidth": 600.0, "coulomb_fraction": 0.0, "viscous_fraction": 0.0}}, V0)
    beta = m.beta
    a, b, c = 1.0 + beta * lam, lam + beta * lam / T, lam / T
    sig = b / (2 * a)
    wd = np.sqrt(c / a - sig * sig)
    x0d = -beta * lam / ((1.0 + beta * lam) * T)
    model = rb.RigidBodyModel("payload", M_T, I_T)
    worst = 0.0
    for k in range(1, 7000):
        t = k * H_NS
        wr = out["arm/wrench"]                      # holds over [t, t + h)
        pay = rb.step(model, pay, rb.wrench_at_com(wr["F_Eo_W"], wr["p_WoEo_W"], pay), H)
        out = m.step(t, H_NS, StepInputs(t, H_NS, {"orbiter/state": _orbiter_at_rest(),
                                                   "payload/state": _payload_sample(t, pay)}, {}, {}))
        tt = (k + 1) * H
        if k % 100 == 0 and tt <= 10.0:
            ref = np.exp(-sig * tt) * (np.cos(wd * tt) + (sig + x0d) / wd * np.sin(wd * tt))
            worst = max(worst, float(np.max(np.abs(m.ctx.V_R_O / V0 - ref))))
    assert worst < 0.03, worst
    assert m.ctx.mode == "brakes" and m.ctx.brakes  # at rest (damp_rest) for damp_time: braked
    assert np.linalg.norm(m.ctx.V_R_O[3:]) < 1e-4 and np.linalg.norm(m.ctx.V_R_O[:3]) < np.radians(0.001)


# ---------------------------------------------------------------- the capture scenario, brakes against damp


def _run_scenario(control: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str], BoundModel]:
    """The capture variant with ``[arm] capture_control = control``, in lockstep (no logger).

    Returns the payload's motion relative to the orbiter at each orbiter/payload state instant (t [s],
    |v| of its CoM in O [m/s], |ω_T − ω_O| [rad/s]), the arm's torques and joint rates from the capture on, its
    modes, and the arm model with its context at the end."""
    cfg = pc.load(VARIANT)
    cfg = copy.deepcopy(cfg)
    cfg["arm"]["capture_control"] = control
    plan = pc.validate(cfg, path=VARIANT)
    models = [pc.service_module(s.kind).build(plan.config, n, s.period_ns) for n, s in plan.services.items()
              if s.kind != "logger"]
    coupling = {n: s.coupling_ns for n, s in plan.services.items() if s.coupling_ns}
    states: dict[str, dict[int, dict[str, Any]]] = {"orbiter/state": {}, "payload/state": {}}
    arm_states: list[tuple[int, dict[str, Any]]] = []

    def frame(f: bytes) -> None:
        i = f.index(b"\0")
        topic = f[:i].decode()
        if topic in states:
            s = decode(topic, f[i + 1:])
            states[topic][s.t_ns] = s.body
        elif topic == "arm/state":
            s = decode(topic, f[i + 1:])
            arm_states.append((s.t_ns, s.body))

    sched = simulate(models, plan.duration_ns, coupling=coupling, on_frame=frame)
    rel = []
    for t in sorted(set(states["orbiter/state"]) & set(states["payload/state"])):
        o, p = states["orbiter/state"][t], states["payload/state"][t]
        R_WO, R_WT = sp.quat_to_rotation(o["quat_WO"]), sp.quat_to_rotation(p["quat_WT"])
        w_O, w_T = R_WO @ o["w_WO_O"], R_WT @ p["w_WT_T"]
        v = R_WO.T @ (p["v_WTo_W"] - o["v_WOo_W"] - np.cross(w_O, p["p_WoTo_W"] - o["p_WoOo_W"]))
        rel.append((t * 1e-9, np.linalg.norm(v), np.linalg.norm(w_T - w_O)))
    t_cap = 7.0
    after = [b for t, b in arm_states if t * 1e-9 > t_cap + 0.05]   # the capture event reaches the arm by then
    tau = np.array([b["tau"] for b in after])
    qd = np.array([b["qd"] for b in after])
    arm_member = next(m for m in sched.members if isinstance(m.obj, arm.ArmModel))
    return np.array(rel), tau, qd, [b["mode"] for b in after], BoundModel(arm_member.obj, arm_member.ctx)


@pytest.mark.slow
def test_damp_brings_the_captured_payload_to_rest_within_limits_faster_than_brakes():
    """The capture on the servos (no impulse: the payload keeps ~3 mm/s, 0.04°/s relative to the orbiter).
    damp: below 1 mm/s and 0.01°/s from 10 s after the capture on (the issue asks 30 s), below 0.1 mm/s and
    0.001°/s over the last 10 of the 30 s, then braked; joint torques and rates within the SRMS limits.
    brakes: the same capture left on the braked arm's compliance is still above 1 mm/s or 0.01°/s after 10 s,
    and over the last 10 s moves at least ten times faster than the damped one."""
    t_cap, v_lim, w_lim = 7.0, 1e-3, np.radians(0.01)
    out = {c: _run_scenario(c) for c in ("damp", "brakes")}
    rel, tau, qd, modes, m = out["damp"]
    t = rel[:, 0]
    assert t[-1] >= t_cap + 30.0 - 1e-9
    before = rel[(t > t_cap - 0.5) & (t <= t_cap)]
    assert before[:, 1].min() > 2.5e-3 and before[:, 2].min() > np.radians(0.03)    # what there is to damp
    settled = rel[t >= t_cap + 10.0]
    assert settled[:, 1].max() < v_lim and settled[:, 2].max() < w_lim, settled[:, 1:].max(axis=0)
    last = rel[t >= t_cap + 20.0]
    assert last[:, 1].max() < 0.1 * v_lim and last[:, 2].max() < 0.1 * w_lim, last[:, 1:].max(axis=0)
    assert "damp" in modes and modes[-1] == "brakes"
    assert np.all(np.abs(tau) <= m.servo_p.torque_limit * (1 + 1e-9)), np.abs(tau).max(axis=0)
    assert np.all(np.abs(qd) <= m.ctx.geom.qd_max * (1 + 1e-9)), np.abs(qd).max(axis=0)
    rel_b = out["brakes"][0]
    tb = rel_b[:, 0]
    early_b = rel_b[(tb >= t_cap + 5.0) & (tb <= t_cap + 10.0)]
    assert early_b[:, 1].max() > v_lim or early_b[:, 2].max() > w_lim
    last_b = rel_b[tb >= t_cap + 20.0]
    assert last_b[:, 1].max() > 10.0 * last[:, 1].max() and last_b[:, 2].max() > 10.0 * last[:, 2].max()
    assert set(out["brakes"][3]) == {"brakes"}
