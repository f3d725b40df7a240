"""The arm service's model stepped without processes, and once as a real process under the launcher."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import msgpack
import numpy as np
import pytest

from dynamics import chain as ch
from dynamics import loads as ld
from dynamics import rms
from dynamics import spatial as sp
from errors import ConfigError
from protocol.codec import decode
from protocol.service import BoundModel, Sample
from protocol.stepping import StepInputs
from services import arm

H_NS = 2_000_000
H = H_NS * 1e-9
ROOT = Path(__file__).resolve().parents[2]


def orbiter(p=(0.0, 0.0, 0.0), quat=(1.0, 0.0, 0.0, 0.0), w=(0.0, 0.0, 0.0), v=(0.0, 0.0, 0.0), t_ns=0):
    z = np.zeros(3)
    return Sample(t_ns, 10_000_000, "orbiter", 0, {"p_WoOo_W": np.array(p, float), "quat_WO": np.array(quat, float),
                                                   "w_WO_O": np.array(w, float), "v_WOo_W": np.array(v, float),
                                                   "a_WOo_W": z, "wdot_WO_O": z})


def payload(p, quat=(1.0, 0.0, 0.0, 0.0), w=(0.0, 0.0, 0.0), v=(0.0, 0.0, 0.0), t_ns=0):
    z = np.zeros(3)
    return Sample(t_ns, 1_000_000, "contact", 0, {"p_WoTo_W": np.array(p, float), "quat_WT": np.array(quat, float),
                                                  "w_WT_T": np.array(w, float), "v_WTo_W": np.array(v, float),
                                                  "a_WTo_W": z, "wdot_WT_T": z, "grappled": False,
                                                  "berthed": False})


def events(*evs, t_ns=0):
    return [Sample(t_ns, H_NS, "x", 0, {"events": list(evs)})]


def inputs(t_ns, orb=None, pay=None, cmds=(), contact=()):
    state = {"orbiter/state": orb or orbiter()}
    if pay is not None:
        state["payload/state"] = pay
    ev = {}
    if cmds:
        ev["operator/command"] = events(*cmds, t_ns=t_ns)
    if contact:
        ev["contact/event"] = events(*contact, t_ns=t_ns)
    return StepInputs(t_ns, H_NS, state, {}, ev)


def run(model, n, t0=0, **kw):
    out = None
    for k in range(n):
        t = t0 + k * H_NS
        out = model.step(t, H_NS, inputs(t, **(kw if k == 0 else {key: v for key, v in kw.items()
                                                                  if key in ("orb", "pay")})))
    return out


def make(**table):
    """The arm's model of ``[arm] table`` with a fresh context (``m.ctx``)."""
    return BoundModel(arm.build({"arm": table}, "arm", H_NS))


# ---------------------------------------------------------------- free arm, modes, limits


def test_manual_augmented_rate_in_orbiter_and_end_effector_frames():
    m = make()
    m.initial(0)
    out = run(m, 400, cmds=[{"kind": "mode", "mode": "manual"}, {"kind": "rate", "v": [0.05, 0.0, 0.0]}])
    st = out["arm/state"]
    assert st["warnings"] == [] and st["mode"] == "manual"
    np.testing.assert_allclose(m.ctx.J @ st["qd"], [0, 0, 0, 0.05, 0, 0], atol=2e-4)
    np.testing.assert_allclose(st["V_WE_W"], [0, 0, 0, 0.05, 0, 0], atol=2e-4)
    np.testing.assert_allclose(out["arm/wrench"]["F_Eo_W"], 0.0)   # free massless arm: no wrench
    # the same command in the end-effector frame moves along E's x axis
    m2 = make()
    m2.initial(0)
    out = run(m2, 400, cmds=[{"kind": "mode", "mode": "manual", "frame": "end_effector"},
                             {"kind": "rate", "v": [0.05, 0.0, 0.0]}])
    R_OE = m2.pose(m2.ctx).X_OE[:3, :3]
    np.testing.assert_allclose(m2.ctx.J @ out["arm/state"]["qd"], np.concatenate([[0, 0, 0], R_OE[:, 0] * 0.05]),
                               atol=3e-4)


def test_commands_beyond_limits_are_clipped_and_reported():
    m = make(v_max=0.05)
    m.initial(0)
    out = run(m, 300, cmds=[{"kind": "mode", "mode": "manual"}, {"kind": "rate", "v": [0.5, 0.0, 0.0]}])
    st = out["arm/state"]
    assert any(w.startswith("clipped: point-of-resolution speed") for w in st["warnings"])
    assert np.linalg.norm(m.ctx.J @ st["qd"]) <= 0.05 * 1.01
    # single joint faster than its limit: clipped to the limit and reported
    m = make()
    m.initial(0)
    out = run(m, 300, cmds=[{"kind": "joint", "joint": "elbow_pitch", "rate": -1.0}])
    st = out["arm/state"]
    assert st["mode"] == "single"
    assert any(w.startswith("clipped: joint rates scaled") for w in st["warnings"])
    assert st["qd_cmd"][2] == pytest.approx(-m.ctx.geom.qd_max[2])
    assert abs(st["qd"][2]) <= m.ctx.geom.qd_max[2] * 1.001


def test_joint_stops_at_its_angle_limit_and_says_so():
    m = make(q0=[0.0, 0.01, -1.0, 0.5, 0.0, 0.0])
    m.initial(0)
    out = run(m, 500, cmds=[{"kind": "joint", "joint": 1, "rate": -0.03}])
    st = out["arm/state"]
    assert st["q"][1] >= m.ctx.geom.q_lower[1] - 1e-3
    assert any("shoulder_pitch stopped at its angle limit" in w for w in st["warnings"])


@pytest.mark.parametrize("cmd,reason", [
    ({"kind": "rate", "v": [float("nan"), 0.0, 0.0]}, "finite"),
    ({"kind": "warp", "speed": 9}, "unknown command"),
    ({"kind": "joint", "joint": 7, "rate": 0.01}, "no such joint"),
    ({"kind": "joint", "joint": "elbow_roll", "rate": 0.01}, "no such joint"),
    ({"kind": "joint", "joint": "elbow_pitch"}, "missing"),
    ({"kind": "mode", "mode": "dance"}, "expected one of"),
])
def test_bad_commands_are_refused_with_a_reason(cmd, reason):
    m = make()
    m.initial(0)
    out = run(m, 3, cmds=[{"kind": "mode", "mode": "manual"}, cmd])
    refused = [w for w in out["arm/state"]["warnings"] if w.startswith("refused:")]
    assert len(refused) == 1 and reason in refused[0], out["arm/state"]["warnings"]
    assert np.all(out["arm/state"]["qd_cmd"] == 0.0)


def test_rate_command_outside_manual_mode_is_refused():
    m = make()
    m.initial(0)
    out = run(m, 2, cmds=[{"kind": "rate", "v": [0.01, 0.0, 0.0]}])
    assert any("not 'manual'" in w for w in out["arm/state"]["warnings"])


def test_singularity_is_damped_and_warned():
    m = make(q0=[0.0, 0.8, -0.002, 0.5, 0.0, 0.0])     # elbow nearly straight
    m.initial(0)
    out = run(m, 20, cmds=[{"kind": "mode", "mode": "manual"}, {"kind": "rate", "v": [0.05, 0.0, 0.0]}])
    st = out["arm/state"]
    assert any(w.startswith("singular:") for w in st["warnings"])
    assert np.all(np.abs(st["qd_cmd"]) <= m.ctx.geom.qd_max * (1 + 1e-9))


def test_auto_sequence_reaches_its_waypoints():
    m = make(auto_gain=2.0)
    m.initial(0)
    p0 = m.pose(m.ctx).X_OE[:3, 3].copy()
    wps = [{"p": (p0 + [0.05, 0.0, 0.0]).tolist(), "v": 0.05}, {"p": (p0 + [0.05, 0.0, -0.04]).tolist()}]
    out = None
    for k in range(1500):
        out = m.step(k * H_NS, H_NS, inputs(k * H_NS, cmds=[{"kind": "auto", "waypoints": wps}] if k == 0 else ()))
        if not m.ctx.waypoints:
            break
    assert not m.ctx.waypoints, "auto sequence did not finish in 3 s"
    assert np.linalg.norm(m.pose(m.ctx).X_OE[:3, 3] - wps[1]["p"]) < 0.011
    assert any(w.startswith("auto: waypoint reached") for w in out["arm/state"]["warnings"])


def test_brakes_stop_the_free_arm():
    m = make()
    m.initial(0)
    run(m, 100, cmds=[{"kind": "joint", "joint": 0, "rate": 0.03}])
    q_before = m.ctx.theta.copy()
    out = run(m, 200, t0=100 * H_NS, cmds=[{"kind": "brakes", "on": True}])
    st = out["arm/state"]
    assert st["brakes"] and st["mode"] == "brakes"
    np.testing.assert_allclose(st["qd"], 0.0, atol=0)
    assert abs(st["q"][0] - q_before[0]) < 0.03 * 0.05        # stopped within a short slip


def test_direct_drive_moves_one_joint_at_the_friction_balanced_rate_and_stops_at_its_limit():
    """Direct mode: the elbow's motor at 3 % of its current limit, rate loop bypassed, settles at
    ω* = (N K_t i − τ_c)/b (the servo's friction law, closed form); the other joints hold; a drive
    beyond ±1 is clipped and reported; near the angle limit the drive is cut."""
    m = make()
    m.initial(0)
    out = run(m, 1000, cmds=[{"kind": "direct", "joint": "elbow_pitch", "drive": 0.03}])
    st = out["arm/state"]
    p = m.servo_p
    w_star = (p.gear_ratio[2] * p.torque_constant[2] * 0.03 * p.current_limit[2] - p.coulomb[2]) / p.viscous[2]
    assert st["mode"] == "direct" and st["warnings"] == []
    assert st["qd"][2] == pytest.approx(w_star, rel=1e-4)      # 2 s: 12 time constants J_r/b, e^-12
    np.testing.assert_allclose(np.delete(st["qd"], 2), 0.0, atol=1e-9)
    out = run(m, 2, t0=1000 * H_NS, cmds=[{"kind": "direct", "joint": 2, "drive": -1.5}])
    assert any(w.startswith("clipped: direct drive of elbow_pitch") for w in out["arm/state"]["warnings"])
    # driven into its limit: the drive is cut at limit_margin and the servos hold, within the range
    m2 = make(q0=[0.0, 0.5, -0.02, 0.5, 0.0, 0.0])
    m2.initial(0)
    out = run(m2, 1000, cmds=[{"kind": "direct", "joint": "elbow_pitch", "drive": 0.03}])
    assert any("elbow_pitch stopped at its angle limit" in w for w in out["arm/state"]["warnings"])
    assert out["arm/state"]["mode"] == "hold"
    assert m2.ctx.theta[2] <= m2.ctx.geom.q_upper[2]
    assert abs(out["arm/state"]["qd"][2]) < 0.01 * w_star                 # stopped to 1 % of the drive rate


# ---------------------------------------------------------------- grappled: RMSFM


def grappled_model(**table):
    """Arm grappled to a 29,484 kg payload whose CoM is 3 m beyond the tip; orbiter at rest at W."""
    m = make(**table)
    m.initial(0)
    X_OE = m.pose(m.ctx).X_OE
    p_T = X_OE[:3, 3] + X_OE[:3, :3] @ [3.0, 0.0, 0.0]
    m.step(0, H_NS, inputs(0, pay=payload(p_T), contact=[{"kind": "capture"}]))
    assert m.ctx.grappled
    return m, p_T


def test_grappled_joint_rates_follow_the_payload_and_power_balances():
    """2-10…2-12 and 2-3: τ·θ̇ = F_e·V_R every step; the power the arm puts into the two bodies,
    computed in W from the published wrenches and the bodies' own point velocities, equals τ·θ̇."""
    m, p_T = grappled_model()
    w_T = np.array([0.0, 0.002, 0.001])
    v_T = np.array([0.01, -0.005, 0.002])
    w_O = np.array([0.0005, 0.0, -0.0003])
    v_O = np.array([0.001, 0.0, 0.0])
    for k in range(1, 200):
        t = k * H_NS
        # samples stamped t: nothing to propagate, the attitudes stay at identity
        out = m.step(t, H_NS, inputs(t, orb=orbiter(w=w_O, v=v_O, t_ns=t), pay=payload(p_T, w=w_T, v=v_T, t_ns=t)))
        tau, thd = m.ctx.tau, m.ctx.theta_dot
        F, V = m.ctx.F_Eo_O, m.ctx.V_R_O
        assert abs(tau @ thd - F @ V) <= 1e-9 * (np.abs(tau) @ np.abs(thd) + 1e-9)
    # relative motion: θ̇ = J^-1 V_R with V_R from the bodies (independent: FD of the grasp point)
    p_E_W = p_T + m.ctx.p_ToEo_T
    v_E_W = v_T + np.cross(w_T, m.ctx.p_ToEo_T)
    v_R = v_E_W - v_O - np.cross(w_O, p_E_W)
    np.testing.assert_allclose(m.ctx.V_R_O, np.concatenate([w_T - w_O, v_R]), atol=1e-12)
    # power through the published wrenches (orbiter at So, payload at Eo)
    wr = out["arm/wrench"]
    p_So = wr["p_WoSo_W"]
    V_pay = np.concatenate([w_T, v_T + np.cross(w_T, wr["p_WoEo_W"] - p_T)])
    V_orb = np.concatenate([w_O, v_O + np.cross(w_O, p_So)])
    P_bodies = wr["F_Eo_W"] @ V_pay + wr["F_So_W"] @ V_orb
    assert P_bodies == pytest.approx(m.ctx.tau @ m.ctx.theta_dot, rel=1e-3, abs=1e-9)
    # equal and opposite: the two wrenches referred to one point cancel
    F_sum = wr["F_Eo_W"] + sp.shift_wrench(wr["F_So_W"], wr["p_WoEo_W"] - p_So)
    np.testing.assert_allclose(F_sum, 0.0, atol=1e-9 * np.abs(wr["F_Eo_W"]).max())
    assert np.abs(wr["F_Eo_W"]).max() > 1.0          # the servos do push


def test_static_loads_published_are_those_of_the_wrench():
    m, p_T = grappled_model(loads_every=5)
    out = run(m, 4, t0=H_NS, pay=payload(p_T, v=(0.01, 0.0, 0.0)))
    st = out["arm/state"]
    pose = m.pose(m.ctx)
    pts = np.vstack([pose.p_OoJo_O, pose.X_OE[:3, 3]])
    # to round-off of the loads' scale: numpy's matmul may fuse multiply-adds (by CPU), so an entry that cancels to
    # ~0 differs in its relative last bits
    scale = np.abs(st["loads"]).max()
    np.testing.assert_allclose(st["loads"], ld.static_loads(pts, pose.X_OB[:, :3, :3], m.ctx.F_Eo_O), rtol=1e-12,
                               atol=1e-12 * scale)
    assert scale > 0.0


def test_release_frees_the_arm():
    m, p_T = grappled_model()
    run(m, 10, t0=H_NS, pay=payload(p_T, v=(0.01, 0.0, 0.0)))
    out = run(m, 5, t0=11 * H_NS, pay=payload(p_T), contact=[{"kind": "release"}])
    assert not out["arm/state"]["grappled"]
    np.testing.assert_allclose(out["arm/wrench"]["F_Eo_W"], 0.0)


def test_passive_flexibility_with_brakes_gives_3_6_torques():
    m, p_T = grappled_model(flexibility="passive")
    m.command(m.ctx, {"kind": "brakes", "on": True})
    out = run(m, 50, t0=H_NS, pay=payload(p_T, v=(0.0005, 0.0, 0.0)))
    dth = m.ctx.theta - m.ctx.theta_n
    np.testing.assert_allclose(out["arm/state"]["tau"], -np.linalg.solve(m.gamma_J(m.ctx), dth), rtol=1e-9)
    assert np.all(np.abs(out["arm/state"]["tau"]) <= m.servo_p.slip_torque * (1 + 1e-9))


def test_multibody_grappled_agrees_with_massless_as_link_masses_vanish():
    outs = {}
    for model, scale in (("massless", 1.0), ("multibody", 1e-6)):
        m, p_T = grappled_model(model=model, link_mass_scale=scale)
        outs[model] = run(m, 50, t0=H_NS, orb=orbiter(w=(0.0, 0.0003, 0.0)),
                          pay=payload(p_T, w=(0.0, 0.001, 0.0), v=(0.01, 0.0, 0.0)))["arm/wrench"]
    a, b = outs["massless"], outs["multibody"]
    for key in ("F_Eo_W", "F_So_W"):
        np.testing.assert_allclose(b[key], a[key], rtol=1e-4, atol=1e-4 * np.abs(a[key]).max())


def test_multibody_free_arm_reaction_impulse_equals_link_momentum_change():
    """Orbiter held still: ∫F_So dt on the orbiter = −Δ(momentum of the links), linear and about So."""
    m = make(model="multibody")
    m.initial(0)
    imp = np.zeros(6)
    p_So = None
    for k in range(400):
        t = k * H_NS
        out = m.step(t, H_NS, inputs(t, cmds=[{"kind": "joint", "joint": "shoulder_pitch", "rate": 0.03}]
                                     if k == 0 else ()))
        if k < 399:
            imp += out["arm/wrench"]["F_So_W"] * H    # holds over the next step
        p_So = out["arm/wrench"]["p_WoSo_W"]
    # link momentum now (base at rest; the base's own momentum is zero)
    X_WS = sp.pose(np.eye(3), [0, 0, 0]) @ m.ctx.geom.X_OS
    q = np.concatenate([X_WS[:3, 3], sp.rotation_to_quat(X_WS[:3, :3]), m.ctx.theta])
    v = np.concatenate([np.zeros(6), m.ctx.theta_dot])
    P, L_Wo = ch.momentum(m.chain, ch.make_data(m.chain), q, v)
    L_So = L_Wo - np.cross(p_So, P)
    # the last published wrench is applied after this instant: exclude it, and compare
    assert np.linalg.norm(P) > 1.0
    np.testing.assert_allclose(imp[3:], -P, rtol=0.02, atol=1e-3 * np.linalg.norm(P))
    np.testing.assert_allclose(imp[:3], -L_So, rtol=0.02, atol=1e-3 * np.linalg.norm(L_So))


# ---------------------------------------------------------------- config


def test_config_problems_listed():
    problems = arm.validate({"arm": {"q0": [0.0, -0.5, -1.0, 0.5, 0.0, 0.0], "model": "rigid", "bogus": 1,
                                     "flex_every": 0, "assumed": {"gear_ratio": [1, 2], "nope": 3}}}, "arm")
    text = "\n".join(problems)
    for frag in ("arm.q0[1]: shoulder_pitch = -0.5 rad is outside its range", "arm.model", "arm.bogus",
                 "arm.flex_every", "arm.assumed.gear_ratio", "arm.assumed.nope"):
        assert frag in text, text
    assert arm.validate({"arm": {}}, "arm") == []
    with pytest.raises(ConfigError, match="elbow_pitch = 0.5 rad is outside its range"):
        make(q0=[0.0, 0.5, 0.5, 0.0, 0.0, 0.0])


@pytest.mark.integration
def test_arm_runs_as_a_process_under_the_launcher(tmp_path):
    """operator + arm as real processes (no orbiter: the arm holds the orbiter at W), lockstep, bounded."""
    cfg = tmp_path / "arm.toml"
    cfg.write_text("""
[sim]
duration = 0.5
[services.arm]
kind = "arm"
rate_hz = 500
[services.operator]
kind = "operator"
rate_hz = 100
[services.rec]
kind = "testkit.toys"
rate_hz = 500
role = "sink"
topics = ["arm/state"]
[toy]
mass = [1.0, 1.0]
k = [1.0]
rest = [1.0]
x0 = [0.0, 1.0]
v0 = [0.0, 0.0]
out_dir = "OUT_DIR"
[operator]
script = [
  { t = 0.0, cmd = "mode", mode = "manual" },
  { t = 0.1, cmd = "rate", v = [0.02, 0.0, 0.0] },
  { t = 0.2, cmd = "joint", joint = "elbow_roll", rate = 0.01 },
]
""".replace("OUT_DIR", str(tmp_path)))
    p = subprocess.run([sys.executable, str(ROOT / "launch.py"), "run", str(cfg)], capture_output=True, text=True,
                       timeout=60, cwd=ROOT)
    # the script is refused at config time: the joint does not exist
    assert p.returncode != 0 and "no such joint 'elbow_roll'" in (p.stdout + p.stderr)
    cfg.write_text(cfg.read_text().replace('joint = "elbow_roll"', 'joint = "elbow_pitch"'))
    p = subprocess.run([sys.executable, str(ROOT / "launch.py"), "run", str(cfg)], capture_output=True, text=True,
                       timeout=60, cwd=ROOT)
    assert p.returncode == 0, p.stderr[-2000:]
    rec = msgpack.unpackb((tmp_path / "rec.rec").read_bytes(), raw=False)
    states = [decode(t, pl) for t, pl in rec if t == "arm/state"]
    assert [s.t_ns for s in states] == [k * H_NS for k in range(251)]       # every step, t0 … 0.5 s
    first_rate = next(s for s in states if s.body["qd_cmd"].any())
    assert 0.1e9 < first_rate.t_ns <= 0.1e9 + 2 * H_NS
    assert states[-1].body["mode"] == "single" and states[-1].body["qd_cmd"][2] == pytest.approx(0.01)


@pytest.mark.slow
def test_closed_loop_heavy_payload_oscillates_at_the_linearized_first_mode():
    """The whole massless-arm loop (2-10…2-12 → servos and 3-7 springs → 2-3 → both bodies) with the
    orbiter and the 29,484 kg payload integrated here as rigid bodies. Started in the first mode
    shape of the linearized system (two rigid bodies joined by the arm flexibility
    J diag(γ^e + 1/k_hold) Jᵀ), the arm oscillates at that mode's frequency, inside the published
    0.027–0.047 Hz band; the two bodies' total linear momentum is conserved (massless arm: its
    wrenches are equal and opposite)."""
    from dynamics import flexibility as fx
    from dynamics import rigid_body as rb
    from dynamics import servo as sv
    from dynamics.cases import ORBITER_INERTIA, ORBITER_MASS

    h_ns = 50_000_000
    h = h_ns * 1e-9
    m = BoundModel(arm.build({"arm": {"servo_substeps": 10}}, "arm", h_ns))
    m.initial(0)
    R_WE = m.pose(m.ctx).X_OE[:3, :3]
    p_E = m.pose(m.ctx).X_OE[:3, 3]
    M2, R2, L2 = 29484.0, 2.25, 18.3
    I2 = np.diag([0.5 * M2 * R2 ** 2, M2 * (3 * R2 ** 2 + L2 ** 2) / 12, M2 * (3 * R2 ** 2 + L2 ** 2) / 12])
    p_T = p_E + R_WE @ [3.0, 0.0, 0.0]
    hold = sv.hold_stiffness(m.servo_p)
    gamma = m.ctx.J @ np.diag(1 / m.k_servo(m.ctx) + 1 / hold) @ m.ctx.J.T
    f, phi = fx.modes_two_body(ORBITER_MASS, ORBITER_INERTIA, p_E, M2, R_WE @ I2 @ R_WE.T, p_E - p_T, gamma)
    assert 0.027 <= f[0] <= 0.047, f[0]
    x = phi[:, 0] * 2e-3 / np.abs(phi[9:, 0]).max()      # velocities in the first mode shape, 2 mm/s
    orb_m = rb.RigidBodyModel("orbiter", ORBITER_MASS, ORBITER_INERTIA)
    pay_m = rb.RigidBodyModel("payload", M2, I2)
    orb = rb.RigidBodyState(np.zeros(3), [1.0, 0, 0, 0], x[3:6], x[0:3])
    pay = rb.RigidBodyState(p_T, sp.rotation_to_quat(R_WE), x[9:12], R_WE.T @ x[6:9])

    def states(t):
        return {"orbiter/state": orbiter(orb.p_WoBo_W, orb.quat_WB, orb.w_WB_B, orb.v_WBo_W, t_ns=t),
                "payload/state": payload(pay.p_WoBo_W, pay.quat_WB, pay.w_WB_B, pay.v_WBo_W, t_ns=t)}

    P0 = ORBITER_MASS * orb.v_WBo_W + M2 * pay.v_WBo_W
    # the servos hold (capture_control "brakes" sets the brakes at the capture: released at once)
    out = m.step(0, h_ns, StepInputs(0, h_ns, states(0), {},
                                     {"contact/event": events({"kind": "capture"}),
                                      "operator/command": events({"kind": "brakes", "on": False})}))
    assert m.ctx.mode == "hold" and not m.ctx.brakes
    tau = []
    for k in range(1, int(60.0 / h)):
        wr = out["arm/wrench"]                      # holds over [t_k, t_k + h)
        pay = rb.step(pay_m, pay, rb.wrench_at_com(wr["F_Eo_W"], wr["p_WoEo_W"], pay), h)
        orb = rb.step(orb_m, orb, rb.wrench_at_com(wr["F_So_W"], wr["p_WoSo_W"], orb), h)
        out = m.step(k * h_ns, h_ns, StepInputs(k * h_ns, h_ns, states(k * h_ns), {}, {}))
        tau.append(m.ctx.tau.copy())
    P = ORBITER_MASS * orb.v_WBo_W + M2 * pay.v_WBo_W
    np.testing.assert_allclose(P, P0, atol=1e-9 * M2 * 2e-3)
    tau = np.array(tau)
    sig = tau[:, int(np.argmax(np.abs(tau).max(axis=0)))]
    z = np.flatnonzero(np.sign(sig[1:]) != np.sign(sig[:-1]))
    assert len(z) >= 3, z
    t_cross = (z + 1) * h
    f_sim = (len(z) - 1) / 2.0 / (t_cross[-1] - t_cross[0])
    assert f_sim == pytest.approx(f[0], rel=0.05), (f_sim, f[0])


@pytest.mark.slow
def test_unloaded_multibody_arm_oscillates_at_its_linearized_first_mode():
    """Multibody mode, links with mass on joint springs (assumed gearbox stiffness in series with the
    servos' holding stiffness), orbiter held still: started in the first mode shape of the linearized
    fixed-base arm, the arm oscillates at that mode's frequency, inside the published unloaded band
    0.35–0.71 Hz."""
    import scipy.linalg

    from dynamics import servo as sv

    h_ns = 5_000_000
    m = BoundModel(arm.build({"arm": {"model": "multibody", "servo_substeps": 5}}, "arm", h_ns))
    m.initial(0)
    X_WS = m.ctx.geom.X_OS
    q = np.concatenate([X_WS[:3, 3], sp.rotation_to_quat(X_WS[:3, :3]), m.ctx.theta])
    M = ch.mass_matrix(m.chain, ch.make_data(m.chain), q)[6:, 6:]
    k = 1 / (1 / m.joint_stiffness + 1 / sv.hold_stiffness(m.servo_p))
    lam, phi = scipy.linalg.eigh(np.diag(k), M)
    f0 = np.sqrt(lam[0]) / (2 * np.pi)
    assert 0.35 <= f0 <= 0.71, f0
    m.ctx.theta_dot = phi[:, 0] * 0.002 / np.abs(phi[:, 0]).max()  # links moving in the mode shape, motors held
    th0 = m.ctx.theta.copy()
    x = []
    for kk in range(int(5.0 / (h_ns * 1e-9))):
        m.step(kk * h_ns, h_ns, StepInputs(kk * h_ns, h_ns, {"orbiter/state": orbiter()}, {}, {}))
        x.append(phi[:, 0] @ M @ (m.ctx.theta - th0))             # modal coordinate
    x = np.array(x) - np.mean(x)
    z = np.flatnonzero(np.sign(x[1:]) != np.sign(x[:-1]))
    assert len(z) >= 4, z
    t_cross = (z + 1) * h_ns * 1e-9
    f_sim = (len(z) - 1) / 2.0 / (t_cross[-1] - t_cross[0])
    assert f_sim == pytest.approx(f0, rel=0.05), (f_sim, f0)


def test_moving_the_point_of_resolution_while_grappled_keeps_the_grasp():
    m, p_T = grappled_model()
    run(m, 5, t0=H_NS, pay=payload(p_T, w=(0.0, 0.001, 0.0)))
    V_before, thd_before = m.ctx.V_R_O.copy(), m.ctx.theta_dot.copy()
    m.command(m.ctx, {"kind": "por", "p": [1.5, 0.0, 0.2]})
    run(m, 1, t0=6 * H_NS, pay=payload(p_T, w=(0.0, 0.001, 0.0)))
    # the same relative motion seen at another point: the joint rates do not change
    np.testing.assert_allclose(m.ctx.theta_dot, thd_before, rtol=1e-3, atol=1e-9)
    assert not np.allclose(m.ctx.V_R_O[3:], V_before[3:])
    pose = m.pose(m.ctx)
    np.testing.assert_allclose(pose.X_OE[:3, 3], pose.X_OB[6, :3, 3] + pose.X_OB[6, :3, :3] @ [1.5, 0.0, 0.2])


def test_rmsflx_runs_at_its_integer_multiple_of_the_step(monkeypatch):
    """Grappled, RMSFLX runs on every ``flex_every``-th step; free, its terms (unused) wait for the
    capture and are then those of the configuration of the last tick."""
    calls = []
    real, fused = arm.fx.arm_flexibility, arm.rms.flex_terms_arrays

    def compiled(*a):                          # RMSFLX in one call (None: the reference then runs, and is counted)
        out = fused(*a)
        if out is not None:
            calls.append(a[0].copy())
        return out

    monkeypatch.setattr(arm.fx, "arm_flexibility", lambda *a, **k: calls.append(a[0].copy()) or real(*a, **k))
    monkeypatch.setattr(arm.rms, "flex_terms_arrays", compiled)
    m, p_T = grappled_model(flex_every=7)     # step 0 (a tick) grapples: the terms of the build's tick
    assert len(calls) == 1
    m0 = make()
    np.testing.assert_array_equal(calls[0][:6], m0.pose(m0.ctx).p_OoJo_O)
    run(m, 20, t0=H_NS, pay=payload(p_T, v=(0.01, 0.0, 0.0)))   # steps 1…20: ticks at 7 and 14
    assert len(calls) == 3
    free = make(flex_every=7)
    free.initial(0)
    n0 = len(calls)
    run(free, 14, cmds=[{"kind": "joint", "joint": "elbow_pitch", "rate": 0.01}])   # steps 0…13, moving
    theta_tick = free.ctx.theta.copy()        # the configuration of the tick of step 14
    run(free, 7, t0=14 * H_NS)
    assert free.ctx.theta[2] != theta_tick[2] and len(calls) == n0      # free: nothing computed
    k = free.k_servo(free.ctx)                # asked for: computed now, at the tick's configuration
    assert len(calls) == n0 + 1 and np.all(k > 0)
    np.testing.assert_array_equal(calls[-1][:6], rms.rms_kinematics(free.ctx.geom, theta_tick).p_OoJo_O)
