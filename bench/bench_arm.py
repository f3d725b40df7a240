"""Arm service cost: CPU fraction of one core at 500 Hz and per-call cost of RMSFM, RMSFLX, RMLOAD.

Prints one JSON object. The step is timed with ``time.process_time`` (CPU, not wall) over
``--steps`` steps after a warm-up (the least of ``--repeat`` runs): the default scenario's two
arm phases (``scenario``: the free approach under its first manual rate command, and the loaded
berthing move, grappled and flying its auto sequence, with the scenario's [arm], orbiter attitude
and payload, also with flexible booms), then the massless, the multibody and the multibody arm with
flexible booms, free and grappled (a heavy payload drifting at 1 cm/s), alone and with the msgpack
encoding of its two output messages (the bus I/O of the shell is not included). The CPU fraction is
the cost times 500 Hz. ``kernels``: per call, each compiled kernel of the step (:mod:`dynamics.arm_kernels`) and its
Python-float reference. ``--process``: the arm's whole process in a lockstep run of the default scenario,
CPU-s per simulated second (the budget with flexible booms: 0.25).
On a shared machine the figures vary with its load; ``load_avg_1min`` is printed with them.
Run from the repository root: ``python bench/bench_arm.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import tomllib
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dynamics import flexibility as fx  # noqa: E402
from dynamics import loads as ld  # noqa: E402
from dynamics import rigid_body as rb  # noqa: E402
from dynamics import rms  # noqa: E402
from dynamics import servo as sv  # noqa: E402
from dynamics import spatial as sp  # noqa: E402
from protocol.codec import encode
from protocol.coupling import complete  # noqa: E402
from protocol.service import Sample  # noqa: E402
from protocol.stepping import StepInputs  # noqa: E402
from services import arm  # noqa: E402

SCENARIO = Path(__file__).resolve().parents[1] / "configs" / "srms_berthing.toml"

H_NS = 2_000_000  # 500 Hz


def _state(topic: str, body: dict) -> Sample:
    return Sample(0, 10_000_000, topic.split("/")[0], 0, body)


def _inputs(t: int, pay: bool, events: dict | None = None) -> StepInputs:
    z = np.zeros(3)
    st = {"orbiter/state": _state("orbiter/state", {"p_WoOo_W": z, "quat_WO": np.array([1.0, 0, 0, 0]),
                                                    "w_WO_O": z, "v_WOo_W": z, "a_WOo_W": z, "wdot_WO_O": z})}
    if pay:
        st["payload/state"] = _state("payload/state", {
            "p_WoTo_W": np.array([27.0, -2.74, -0.44]), "quat_WT": np.array([1.0, 0, 0, 0]), "w_WT_T": z,
            "v_WTo_W": np.array([0.01, 0.0, 0.0]), "a_WTo_W": z, "wdot_WT_T": z, "grappled": True, "berthed": False})
    return StepInputs(t, H_NS, st, {}, events or {})


FLEXIBLE = {"model": "multibody", "booms": "flexible"}


def step_cost(model: str, grappled: bool, steps: int, codec: bool = False, booms: str = "rigid") -> float:
    """CPU seconds per step (with ``codec``: plus encoding both output messages)."""
    m = arm.build({"arm": {"model": model, "booms": booms}}, "arm", H_NS)
    c = m.new_context()                      # the arm's state, held and passed in as the runtime does
    m.initial(0, c)
    ev = Sample(0, H_NS, "x", 0, {"events": [{"kind": "capture"}]})
    cmd = Sample(0, H_NS, "x", 0, {"events": [{"kind": "joint", "joint": "shoulder_pitch", "rate": 0.02}]})
    m.step(0, H_NS, c, _inputs(0, grappled, {"contact/event": [ev]} if grappled else {"operator/command": [cmd]}))
    for k in range(1, 50):
        m.step(k * H_NS, H_NS, c, _inputs(k * H_NS, grappled))
    t0 = time.process_time()
    for k in range(50, 50 + steps):
        out = m.step(k * H_NS, H_NS, c, _inputs(k * H_NS, grappled))
        if codec:
            for topic, body in out.items():
                encode(topic, complete(topic, body), sender="arm", seq=k, t_ns=(k + 1) * H_NS, h_ns=H_NS)
    return (time.process_time() - t0) / steps


def scenario_cost(phase: str, steps: int, flexible: bool = False) -> float:
    """CPU seconds per step of the default scenario's arm in ``phase``: ``"approach"`` (free, its first
    manual rate command) or ``"loaded_move"`` (the payload captured where the scenario starts it, drifting,
    and the scenario's auto sequence flown); ``flexible``: with ``[arm] model = "multibody", booms = "flexible"``."""
    with SCENARIO.open("rb") as f:
        cfg = tomllib.load(f)
    if flexible:
        cfg["arm"].update(FLEXIBLE)
    m = arm.build(cfg, "arm", H_NS)
    c = m.new_context()
    m.initial(0, c)
    z = np.zeros(3)
    X_WO, X_WT = sp.pose_from_vector(cfg["orbiter"]["X_WO"]), sp.pose_from_vector(cfg["payload"]["X_WT"])
    state = {"orbiter/state": _state("orbiter/state", {
        "p_WoOo_W": X_WO[:3, 3], "quat_WO": sp.rotation_to_quat(X_WO[:3, :3]), "w_WO_O": z, "v_WOo_W": z,
        "a_WOo_W": z, "wdot_WO_O": z})}
    if phase == "loaded_move":
        state["payload/state"] = _state("payload/state", {
            "p_WoTo_W": X_WT[:3, 3], "quat_WT": sp.rotation_to_quat(X_WT[:3, :3]),
            "w_WT_T": np.array(cfg["payload"]["w_WT_T"], float), "v_WTo_W": np.array(cfg["payload"]["v_WTo_W"], float),
            "a_WTo_W": z, "wdot_WT_T": z, "grappled": True, "berthed": False})
    script = cfg["operator"]["script"]
    first = {"approach": [script[0], next(e for e in script if e["cmd"] == "rate")],
             "loaded_move": [next(e for e in script if e["cmd"] == "auto")]}[phase]
    cmds = [{("kind" if k == "cmd" else k): v for k, v in e.items() if k != "t"} for e in first]
    capture = {"contact/event": [Sample(0, H_NS, "contact", 0, {"events": [{"kind": "capture"}]})]}
    m.step(0, H_NS, c, StepInputs(0, H_NS, state, {}, capture if phase == "loaded_move" else {}))
    m.step(H_NS, H_NS, c, StepInputs(H_NS, H_NS, state, {}, {
        "operator/command": [Sample(H_NS, H_NS, "operator", 0, {"events": cmds})]}))
    for k in range(2, 50):
        m.step(k * H_NS, H_NS, c, StepInputs(k * H_NS, H_NS, state, {}, {}))
    t0 = time.process_time()
    for k in range(50, 50 + steps):
        m.step(k * H_NS, H_NS, c, StepInputs(k * H_NS, H_NS, state, {}, {}))
    return (time.process_time() - t0) / steps


def routine_costs(n: int) -> dict[str, float]:
    """CPU seconds per call of RMSFM (kinematics, Jacobian, its inverse, 2-10/2-11, 2-12, 2-3) as the
    arm runs it away from a singularity (``np.linalg.inv``) and with the SVD (``rms.jacobian_inverse``,
    every ``flex_every`` steps or near a singularity), RMSFLX (B-6, 3-4, 3-7 as diag((γ_J)^-1)), RMLOAD."""
    c = arm.build({"arm": {}}, "arm", H_NS).new_context()
    geom = c.geom
    theta = c.theta.copy()
    R = np.eye(3)
    z = np.zeros(3)
    tau = np.array([100.0, -50.0, 30.0, 10.0, -5.0, 2.0])
    out = {}
    for key, inverse in (("RMSFM_us", lambda J: np.linalg.inv(J)),
                         ("RMSFM_svd_us", lambda J: rms.jacobian_inverse(J, 0.05, 0.05)[0])):
        t0 = time.process_time()
        for _ in range(n):
            pose = rms.rms_kinematics(geom, theta)
            J = rms.rms_jacobian(pose)
            J_inv = inverse(J)
            V = rms.relative_twist(R, z, z, pose.X_OE[:3, 3], R, z, np.array([0.01, 0, 0]), np.array([-3.0, 0, 0]))
            J_inv @ V                                         # 2-12
            J_inv.T @ tau                                     # 2-3
        out[key] = (time.process_time() - t0) / n * 1e6
    pts = np.vstack([pose.p_OoJo_O, pose.X_OE[:3, 3]])
    t0 = time.process_time()
    for _ in range(n):
        g = fx.arm_flexibility(pts, pose.u_O)
        gJ = fx.joint_flexibility(J, g)
        np.diagonal(np.linalg.inv(gJ))
    t_flx = (time.process_time() - t0) / n
    F = rms.tip_wrench(J, tau)[0]
    t0 = time.process_time()
    for _ in range(n):
        ld.static_loads(pts, pose.X_OB[:, :3, :3], F)
    t_ld = (time.process_time() - t0) / n
    return {**out, "RMSFLX_us": t_flx * 1e6, "RMLOAD_us": t_ld * 1e6}


def kernel_costs(n: int) -> dict[str, dict[str, float]]:
    """CPU microseconds per call of each compiled kernel of the arm's step (:mod:`dynamics.arm_kernels`, through
    the wrapper the step calls) and of its Python-float reference, at the default arm's start (the servos loaded
    by its 3-7 springs, the kinematics with J⁻¹, the auto step on a slew): the kernels' share of the per-step
    cost, A/B."""
    m = arm.build({"arm": {}}, "arm", H_NS)
    c = m.new_context()
    p, s, geom, h = m.servo_p, c.servo, c.geom, H_NS * 1e-9
    k, d = m.k_servo(c), m.c_servo(c)
    cmd, th, thd = np.full(6, 0.01), c.theta, np.full(6, 1e-3)
    brakes = np.zeros(6, dtype=bool)
    loaded = (k.tolist(), d.tolist(), th.tolist(), thd.tolist())
    R_m, p_m = c.rows[0][rms.N_JOINTS], c.rows[1][rms.N_JOINTS]
    seg = np.concatenate([p_m + 0.01, [0.5, 0.0, 0.1], R_m, [0.0, 0.01, 0.02]])
    sl = seg.tolist()
    lim = np.array([c.geom.qd_max, c.geom.q_lower + 0.0017, c.geom.q_upper - 0.0017])
    qd = np.array([0.01, -0.05, 0.02, 0.0, 0.3, -0.01])
    z3, q1 = np.zeros(3), np.array([1.0, 0.0, 0.0, 0.0])
    pairs = {
        "servo_step": (lambda: sv.servo_step_arrays(p, s, cmd, brakes, h, 2, (k, d, th, thd), None),
                       lambda: sv.servo_step_rows(p, s.theta_m.tolist(), s.omega.tolist(), s.integ.tolist(),
                                                  cmd.tolist(), [False] * 6, h, 2, loaded, None)),
        "rms_kinematics": (lambda: rms.rms_kinematics_arrays(geom, th, True),
                           lambda: (lambda r: rms.regular_inverse(np.array(rms.rms_jacobian_rows(r[1], r[2], r[3]))))(
                               rms.rms_kinematics_rows(geom, th.tolist()))),
        "limit_joint_rates": (lambda: rms.limit_joint_rates(qd, th, lim, 2.0),
                              lambda: rms.limit_joint_rates_rows(qd.tolist(), th.tolist(), *lim.tolist(), 2.0)),
        "auto_rates": (lambda: rms.auto_rates(seg, 0.3, 0.3001, h, p_m, R_m, 0.05, 0.06, 0.0087),
                       lambda: rms.auto_rates_rows(sl[0:3], sl[3:6], sl[6:15], sl[15:18], 0.3, 0.3001, h,
                                                   p_m.tolist(), R_m.tolist(), 0.05, 0.06, 0.0087)),
        "predict_state": (lambda: rms.predict_state_arrays(p_m, q1, z3, thd[:3], z3, z3, 0.004),
                          lambda: rb.predict_rows(p_m.tolist(), q1.tolist(), [0.0] * 3, thd[:3].tolist(), [0.0] * 3,
                                                  [0.0] * 3, 0.004)),
    }
    out = {}
    for name, (kernel, reference) in pairs.items():
        row = {}
        for key, f in (("compiled_us", kernel), ("reference_us", reference)):
            t0 = time.process_time()
            for _ in range(n):
                f()
            row[key] = round((time.process_time() - t0) / n * 1e6, 2)
        out[name] = row
    return out


REALTIME_CFG = """
[sim]
mode = "realtime"
duration = {duration}
[services.arm]
kind = "arm"
rate_hz = 500
[services.operator]
kind = "operator"
rate_hz = 100
[arm]
model = "{model}"
[operator]
script = [{{ t = 0.0, cmd = "joint", joint = "wrist_pitch", rate = 0.02 }}]
"""


def _cpu_seconds(pid: int) -> float:
    """utime + stime of a process from /proc (Linux). [s]"""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def realtime_cpu(model: str, duration: float = 8.0, window: float = 4.0) -> dict[str, object]:
    """CPU fraction of the arm *process* (shell, bus, codec and model) in a realtime run at 500 Hz.

    Runs ``launch.py run`` (arm + operator, realtime) and samples the arm worker's CPU time over
    ``window`` seconds in the middle of the run (Linux /proc).
    """
    import subprocess
    import tempfile

    root = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory() as tmp:
        cfg = Path(tmp) / f"rt_{model}.toml"
        cfg.write_text(REALTIME_CFG.format(duration=duration, model=model))
        proc = subprocess.Popen([sys.executable, str(root / "launch.py"), "run", str(cfg)], cwd=root,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        pid = None
        try:
            deadline = time.monotonic() + 30.0
            while pid is None and time.monotonic() < deadline and proc.poll() is None:
                ps = subprocess.run(["ps", "-eo", "pid=,args="], capture_output=True, text=True).stdout
                for line in ps.splitlines():
                    if "_worker" in line and str(cfg) in line and " arm " in line:
                        pid = int(line.split()[0])
                time.sleep(0.1)
            result: dict[str, object] = {}
            if pid is not None:
                time.sleep(2.0)                       # past start-up
                c0, w0 = _cpu_seconds(pid), time.monotonic()
                time.sleep(window)
                c1, w1 = _cpu_seconds(pid), time.monotonic()
                result["cpu_fraction"] = round((c1 - c0) / (w1 - w0), 3)
            out, _ = proc.communicate(timeout=duration + 60.0)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        try:
            summary = json.loads(out.strip().splitlines()[-1])
            st = summary["services"]["arm"]
            result.update(steps=st.get("steps"), overruns=st.get("overruns"),
                          jitter_p99_us=round(st.get("jitter_p99_ns", 0) / 1e3, 1))
        except (ValueError, KeyError, IndexError):
            result["summary"] = "unavailable"
        return result


def process_cpu(flexible: bool) -> dict[str, object]:
    """CPU seconds per simulated second of the arm's *process* (shell, bus, codec and model) in a lockstep run of
    the default scenario (one process per service, as fast as possible), with flexible booms or as shipped;
    sampled from /proc (Linux) as ``bench_mainjob.py`` samples every process of a run."""
    import subprocess
    import tempfile

    from bench_mainjob import _Sampler

    root = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory(prefix="berthsim-bench-arm-") as tmp:
        cfg = SCENARIO
        if flexible:
            text = SCENARIO.read_text(encoding="utf-8").replace(
                'model = "massless"', 'model = "multibody"\nbooms = "flexible"', 1)
            cfg = Path(tmp) / "flexible.toml"
            cfg.write_text(text, encoding="utf-8")
        cmd = [sys.executable, str(root / "launch.py"), "run", str(cfg), "--no-report", "--json", "--log",
               str(Path(tmp) / "run.mcap")]
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=root,
                             env={**os.environ, "BERTHSIM_NO_PROGRESS": "1"})
        sampler = _Sampler(p.pid)
        sampler.start()
        out, err = p.communicate(timeout=1800)
        sampler.stop.set()
        sampler.join()
    if p.returncode != 0:
        return {"error": f"exit code {p.returncode}", "stderr_tail": err.strip().splitlines()[-3:]}
    sim_s = float(tomllib.loads(SCENARIO.read_text(encoding="utf-8"))["sim"]["duration"])
    per = sampler.by_name()
    return {"arm_cpu_s_per_sim_s": round(per.get("arm", float("nan")) / sim_s, 3), "sim_s": sim_s,
            "every_process_cpu_s_per_sim_s": {k: round(v / sim_s, 3) for k, v in per.items()}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=3, help="runs per figure; the least is printed")
    ap.add_argument("--realtime", action="store_true", help="also measure the arm process in a realtime run")
    ap.add_argument("--process", action="store_true",
                    help="also the arm process's CPU-s per simulated second in a lockstep run of the default scenario, "
                         "with flexible booms and as shipped (~1 min)")
    a = ap.parse_args(argv)
    out: dict[str, object] = {"rate_hz": 500, "steps": a.steps, "load_avg_1min": os.getloadavg()[0],
                              "cpus": os.cpu_count()}
    out["scenario"] = {}
    for flexible in (False, True):
        for phase in ("approach", "loaded_move"):
            c = min(scenario_cost(phase, a.steps, flexible) for _ in range(a.repeat))
            out["scenario"][phase + ("_flexible_booms" if flexible else "")] = {
                "step_us": round(c * 1e6, 1), "cpu_fraction_at_500Hz": round(c * 500, 3)}
    cpu = {}
    for model, booms in (("massless", "rigid"), ("multibody", "rigid"), ("multibody", "flexible")):
        for grappled in (False, True):
            # the least of --repeat runs: on a shared machine the others' load only ever adds
            c = min(step_cost(model, grappled, a.steps, booms=booms) for _ in range(a.repeat))
            cc = min(step_cost(model, grappled, a.steps, codec=True, booms=booms) for _ in range(a.repeat))
            key = f"{model}{'_flexible' if booms == 'flexible' else ''}_{'grappled' if grappled else 'free'}"
            cpu[key] = {"step_us": round(c * 1e6, 1), "cpu_fraction_at_500Hz": round(c * 500, 3),
                        "step_and_encode_us": round(cc * 1e6, 1), "cpu_fraction_with_encode": round(cc * 500, 3)}
    out["arm_step"] = cpu
    out["routines"] = {k: round(v, 1) for k, v in routine_costs(a.calls).items()}
    out["kernels"] = kernel_costs(a.calls)
    if a.realtime:
        out["realtime_process"] = {model: realtime_cpu(model) for model in ("massless", "multibody")}
    if a.process:
        out["scenario_process"] = {"flexible_booms": process_cpu(True), "as_shipped": process_cpu(False)}
    defaults = arm.DEFAULTS
    out["call_rates"] = {"RMSFM": "every step", "RMSFLX": f"every {defaults['flex_every']} steps",
                         "RMLOAD": f"every {defaults['loads_every']} steps"}
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
