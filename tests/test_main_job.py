"""The main job end to end: real processes, real sockets, the rig emulator on a real pty.

- ``python3 launch.py run`` on the embedded default, shortened to its first seconds to keep
  the suite bounded: exit code 0, the log under ``runs/<timestamp>/`` with the report and
  the figures beside it, every state and flow topic at its rate (``contact/event`` only when
  it carries events), the rig link clean; its log replays at ``--max``;
- the capture, from a *late start* of the same scenario: the default's bodies and arm as
  they are 1 s before its capture command (propagated here with the scenario's own kinematics,
  :func:`tests.test_configs.approach`) and the rest of its script, so that the snare comes
  1 s into the run. With the orbital terms off (W inertial, no external force), two
  lockstep runs give logs that are bit-identical apart from the wall-clock fields
  (``wall_ns`` of every envelope and the ``sim/*`` runtime statistics; the rig's
  measurements over the pty are compared too, :data:`WALL_FIELDS`), and the total linear momentum of
  orbiter + payload (the SVDS arm is massless, seed 003 eqs. 2-4…2-9) and their angular momentum about Wo are conserved
  across the capture impulse and the arm's forces, to the bound stated in
  :func:`test_capture_deterministic_and_momentum_conserved`;
- realtime with the rig emulator started here on its own pty: kill one service process;
  the launcher names it, the others stop within a second, the log up to the kill is
  readable, the rig parks inside its limits.

Every process started here is stopped in a ``finally`` and every wait has a timeout.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import tomllib
from pathlib import Path

import msgpack
import numpy as np
import pytest
import tomli_w

from dynamics.spatial import pose_vector, quat_to_rotation
from errors import LogError
from protocol.codec import decode
from protocol.config import processes_of
from protocol.logfile import open_log
from protocol.logrecover import recover
from testkit.procs import argv_of, descends_from
from tests.test_configs import approach, arm_geometry

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
LAUNCH = ROOT / "launch.py"
DEFAULT = ROOT / "configs" / "srms_berthing.toml"
REALTIME = ROOT / "configs" / "srms_berthing_realtime.toml"
T_SHORT = 2.0
"""Simulated seconds of each lockstep run here (the suite runs on a shared 2-core machine)."""
T_LATE = 6.0
"""Where the late start picks the default scenario up: 1 s before its capture command (7 s)."""

WALL_FIELDS: dict[str, tuple[str, ...]] = {}
"""Fields left out of bit-identity besides ``wall_ns`` and ``sim/*``: none. In lockstep the HIL
bridge waits for the rig's reply to each step's setpoint and reports its link and delay
figures in simulated time (hil/bridge.py), so what the rig measures over the pty is
deterministic too."""


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "BERTHSIM_NO_PROGRESS": "1"}


def _launch(args: list[str], cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(LAUNCH), *args], cwd=cwd, env=_env(), capture_output=True,
                          text=True, timeout=timeout, check=False)


def _default() -> dict:
    with DEFAULT.open("rb") as f:
        return tomllib.load(f)


def late_start_config(t_late: float = T_LATE, orbit_altitude: float = 0.0) -> dict:
    """The default scenario picked up at ``t_late``: bodies and arm as the script leaves them then.

    The orbiter and the payload are propagated as free rigid bodies (the free massless arm
    exerts nothing) and the arm's angles by its scripted rates through ``J^-1``
    (:func:`tests.test_configs.approach`); the script keeps the rate command active at
    ``t_late`` and everything after it, shifted by ``-t_late``.
    """
    cfg = _default()
    cfg["orbiter"]["orbit_altitude"] = orbit_altitude
    q, _, X_WO, X_WT, s_O, s_T = approach(cfg, arm_geometry(cfg), t_late)
    cfg["arm"]["q0"] = [float(x) for x in q]
    cfg["orbiter"].update(X_WO=pose_vector(X_WO).tolist(), v_WOo_W=s_O.v_WBo_W.tolist(), w_WO_O=s_O.w_WB_B.tolist())
    cfg["payload"].update(X_WT=pose_vector(X_WT).tolist(), v_WTo_W=s_T.v_WBo_W.tolist(), w_WT_T=s_T.w_WB_B.tolist())
    script = cfg["operator"]["script"]
    active = [[c for c in script if c["t"] <= t_late and c["cmd"] == cmd][-1] for cmd in ("mode", "rate")]
    later = [{**c, "t": round(c["t"] - t_late, 9)} for c in script if c["t"] > t_late]
    cfg["operator"]["script"] = [{**c, "t": 0.0} for c in active] + later
    return cfg


# ---------------------------------------------------------------- the default run
def test_default_run_and_replay(tmp_path: Path) -> None:
    p = _launch(["run", "--duration", str(T_SHORT), "--json"], tmp_path, timeout=400)
    assert p.returncode == 0, p.stderr[-3000:]
    logs = sorted((tmp_path / "runs").glob("*/run.mcap"))
    assert len(logs) == 1, list((tmp_path / "runs").rglob("*"))
    run_dir = logs[0].parent
    # the table on stdout, then (--json) the JSON summary; the figures and the report beside the log
    table, last = p.stdout.strip().rsplit("\n", 1)
    assert "completed as scripted" in table and "peak interface force" in table and "{" not in table
    fig = json.loads((run_dir / "run.summary.json").read_text())
    assert json.loads(last) == fig["run"] and fig["run"]["t_end_ns"] == int(T_SHORT * 1e9)
    assert fig["ok"] is True and list(fig["phases"]) == ["approach"]
    assert fig["rig"]["crc_errors"] == 0 and fig["rig"]["bad_frames"] == 0 and fig["rig"]["seq_lost"] == 0
    assert fig["rig"]["tx_frames"] >= int(T_SHORT * 250) and fig["rig"]["state"] == "ENGAGED"
    assert any((run_dir / "report").glob("*.png"))
    # every service's topics are in the log, each port at its coupling rate (configs/srms_berthing.toml):
    # a state at t = 0 and at every coupling instant; a flow once per coupling interval (their means),
    # the last interval ending at the run's end
    with open_log(logs[0]) as log:
        for topic, hz, flow in (("orbiter/state", 100, False), ("arm/state", 100, False), ("arm/wrench", 100, True),
                                ("payload/state", 100, False), ("contact/wrench", 100, True),
                                ("operator/command", 50, False), ("hil/command", 50, False),
                                ("hil/feedback", 50, False), ("hil/status", 50, False)):
            n = sum(1 for _ in log.messages([topic]))
            assert n == int(T_SHORT * hz) + (0 if flow else 1), (topic, n)
        # contact/event goes out only when it carries events (its consumers take contact's state
        # and flow as witnesses, protocol/stepping.py); the approach has none
        assert sum(1 for _ in log.messages(["contact/event"])) == 0
    # the log replays as fast as possible
    r = _launch(["replay", str(logs[0]), "--max", "--quiet"], tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]


def test_run_refuses_a_bad_config_with_code_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    text = DEFAULT.read_text()
    contact = text.index("[services.contact]")
    bad.write_text(text[:contact] + text[contact:].replace("rate_hz = 1000", "rate_hz = 1001", 1))
    p = _launch(["run", str(bad)], tmp_path, timeout=60)
    assert p.returncode == 2 and "contact" in p.stderr
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").rglob("*.mcap"))


# ---------------------------------------------------------------- capture: determinism and momentum
def _messages(path: Path) -> dict[str, list[tuple[int, int, bytes]]]:
    """topic -> [(t_ns, seq, envelope without wall_ns and wall-clock fields)], sim/* left out."""
    out: dict[str, list[tuple[int, int, bytes]]] = {}
    with open_log(path) as log:
        for m in log.messages():
            if m.topic.startswith("sim/"):
                continue
            env = msgpack.unpackb(m.payload, raw=False)
            env[5] = 0                                               # wall_ns
            for f in WALL_FIELDS.get(m.topic, ()):
                env[6].pop(f, None)
            out.setdefault(m.topic, []).append((m.t_ns, m.seq, msgpack.packb(env)))
    return out


def _momentum(path: Path, cfg: dict, skip_ns: set[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Times, total linear momentum (n, 3) and angular momentum about Wo (n, 3) of orbiter + payload.

    Sampled where both states exist (the orbiter's 10 ms grid), except at the instants in
    ``skip_ns``: an impulsive exchange applied to the payload at the end of a contact step
    reaches the orbiter over the next one (services/contact.py), so at that instant alone
    it is in flight.
    """
    I_O = np.diag(cfg["orbiter"]["inertia"])
    I_T = np.diag(cfg["payload"]["inertia"])
    m_O, m_T = cfg["orbiter"]["mass"], cfg["payload"]["mass"]
    states: dict[str, dict[int, dict]] = {"orbiter/state": {}, "payload/state": {}}
    with open_log(path) as log:
        for m in log.messages(list(states)):
            s = decode(m.topic, m.payload)
            states[m.topic][s.t_ns] = s.body
    orb, pay = states["orbiter/state"], states["payload/state"]
    ts, P, L = [], [], []
    for t_ns in sorted(set(orb) & set(pay) - skip_ns):
        o, b = orb[t_ns], pay[t_ns]
        R_WO, R_WT = quat_to_rotation(o["quat_WO"]), quat_to_rotation(b["quat_WT"])
        p_O, v_O, p_T, v_T = o["p_WoOo_W"], o["v_WOo_W"], b["p_WoTo_W"], b["v_WTo_W"]
        ts.append(t_ns * 1e-9)
        P.append(m_O * v_O + m_T * v_T)
        L.append(m_O * np.cross(p_O, v_O) + R_WO @ I_O @ o["w_WO_O"]
                 + m_T * np.cross(p_T, v_T) + R_WT @ I_T @ b["w_WT_T"])
    return np.array(ts), np.array(P), np.array(L)


def test_capture_deterministic_and_momentum_conserved(tmp_path: Path) -> None:
    """Two lockstep runs of the late start (capture 1 s in) with the orbital terms off.

    Bit-identity: every message of every model topic, every field but the wall-clock ones.

    Momentum bound: every exchanged wrench sample is applied over the same interval to both
    bodies and referred to the same point (the runtime's flow rule; orbiter.py and contact.py
    module docs), and the snare's impulse is applied to the payload at once and to the
    orbiter as one flow sample of impulse/h, so the exchange cancels to round-off. What is
    left is round-off of ~10⁴ steps of sums of magnitude |P| + J (J the snare impulse), of
    order 10⁴ · 1e-16 ≈ 1e-12 relative; the RK4 error of torque-free rotation at these rates
    (< 1e-3 rad/s, h ≤ 10 ms) is far below it. We require ≤ 1e-9 relative, for P and for L
    about Wo (with lever arm |p_WoEo| of the capture point).
    """
    (t_cap,) = [c["t"] for c in _default()["operator"]["script"] if c["cmd"] == "capture"]
    assert t_cap == T_LATE + 1.0, "T_LATE must stay 1 s before the default's capture command"
    cfg = late_start_config()
    cfg_path = tmp_path / "late_start.toml"
    cfg_path.write_text(tomli_w.dumps(cfg))
    logs = []
    for k in range(2):
        log = tmp_path / f"run{k}.mcap"
        p = _launch(["run", str(cfg_path), "--duration", str(T_SHORT), "--log", str(log), "--no-report"],
                    tmp_path, timeout=400)
        assert p.returncode == 0, p.stderr[-3000:]
        logs.append(log)
    fig = json.loads((tmp_path / "run1.summary.json").read_text())
    assert list(fig["phases"]) == ["approach", "capture", "berthing move"]
    env = cfg["contact"]["envelope"]
    assert fig["capture"]["v_rel_m_s"] < env["rate_lin"] and fig["capture"]["lateral"] < env["lateral"]
    a, b = _messages(logs[0]), _messages(logs[1])
    assert sorted(a) == sorted(b)
    for topic in a:
        assert len(a[topic]) == len(b[topic]), topic
        diff = [i for i, (x, y) in enumerate(zip(a[topic], b[topic], strict=True)) if x != y]
        assert not diff, f"{topic}: {len(diff)} messages differ, first at t = {a[topic][diff[0]][0]} ns"
    with open_log(logs[0]) as log:
        events = [e for m in log.messages(["contact/event"]) for e in decode(m.topic, m.payload).body["events"]]
    (cap,) = [e for e in events if e["kind"] == "capture"]
    J = float(np.linalg.norm(cap["impulse_Wo_W"][3:]))               # the snare's impulse [N·s]
    assert J > 1.0                                                   # a real exchange to conserve
    t, P, L = _momentum(logs[0], cfg, {int(e["t_ns"]) for e in events})
    assert t[-1] >= T_SHORT - 0.01 and len(t) >= int(T_SHORT * 100) - 1
    dP = np.linalg.norm(P - P[0], axis=1).max()
    dL = np.linalg.norm(L - L[0], axis=1).max()
    scale_P = J + np.linalg.norm(P[0])
    r = max(float(np.linalg.norm(cap["p_WoEo_W"])), 1.0)
    assert dP <= 1e-9 * scale_P, f"linear momentum drift {dP:.3g} N·s > {1e-9 * scale_P:.3g}"
    assert dL <= 1e-9 * (r * scale_P + np.linalg.norm(L[0])), f"angular momentum drift {dL:.3g} N·m·s"


# ---------------------------------------------------------------- realtime: kill one process
def _start_emulator(tmp: Path) -> tuple[subprocess.Popen[str], str, Path]:
    stats = tmp / "rig_stats.json"
    emu = subprocess.Popen([sys.executable, "-m", "hil.emulator", "--pty", "--config", str(REALTIME),
                            "--stats", str(stats), "--max-seconds", "120"], cwd=ROOT, env=_env(),
                           stdout=subprocess.PIPE, text=True)
    line = emu.stdout.readline() if emu.stdout else ""
    assert line.startswith("PTY "), line
    return emu, line.split()[1], stats


def _stop(proc: subprocess.Popen, timeout: float = 5.0) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout)


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, dead but not yet reaped, counts as stopped)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _workers(launcher_pid: int) -> dict[str, int]:
    """name -> pid of the launcher's worker processes (``launch.py _worker CONFIG NAME``)."""
    out = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            argv = argv_of(d.name)
        except (OSError, ValueError, IndexError):
            continue
        if b"_worker" in argv and descends_from(d.name, launcher_pid):
            out[argv[argv.index(b"_worker") + 2].decode()] = int(d.name)
    return out


@pytest.fixture(scope="module")
def killed_run(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A realtime run of the default scenario with the emulator on its own pty; ``arm`` killed.

    Returns the timings (s after the kill: when the launcher said which process died, when
    each other service process ended), the launcher's exit code and stderr, the log path
    and the emulator's final statistics.
    """
    tmp = tmp_path_factory.mktemp("killed")
    emu, pty, stats = _start_emulator(tmp)
    log = tmp / "rt.mcap"
    launcher = None
    workers: dict[str, int] = {}
    out: dict = {"log": log}
    try:
        launcher = subprocess.Popen([sys.executable, str(LAUNCH), "run", str(REALTIME), "--hil", pty,
                                     "--duration", "30", "--log", str(log), "--no-report"], cwd=tmp,
                                    env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        lines: list[tuple[float, str]] = []
        reader = threading.Thread(target=lambda: lines.extend((time.monotonic(), ln) for ln in launcher.stderr),
                                  daemon=True)
        reader.start()
        procs = processes_of(tomllib.loads(REALTIME.read_text()))  # the realtime config's process groups
        victim = next(p for p, members in procs.items() if "arm" in members)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(workers) < len(procs):
            workers = _workers(launcher.pid)
            time.sleep(0.2)
        assert set(workers) >= set(procs), workers
        # running: the logger has written its first chunks of messages (about 1 s of data)
        while time.monotonic() < deadline + 30 and launcher.poll() is None and \
                (not log.exists() or log.stat().st_size < 100_000):
            time.sleep(0.1)
        time.sleep(1.0)
        assert launcher.poll() is None, "".join(line for _, line in lines)
        os.kill(workers[victim], signal.SIGKILL)
        t_kill = time.monotonic()
        stopped: dict[str, float] = {}
        while time.monotonic() - t_kill < 10.0 and len(stopped) < len(workers) - 1:
            for n, pid in workers.items():
                if n != victim and n not in stopped and not _alive(pid):
                    stopped[n] = time.monotonic() - t_kill
            time.sleep(0.005)
        out["code"] = launcher.wait(120)
        reader.join(5.0)
        out["stderr"] = "".join(line for _, line in lines)
        out["said"] = [t - t_kill for t, line in lines if "'arm'" in line and "died" in line]
        out["others"] = len(workers) - 1
        out["stopped"] = stopped
    finally:
        if launcher is not None:
            _stop(launcher)
            for pid in workers.values():                              # none should be left; be sure
                if _alive(pid) and b"_worker" in Path(f"/proc/{pid}/cmdline").read_bytes():
                    os.kill(pid, signal.SIGKILL)
        time.sleep(3.0)                                              # the rig's watchdog and ramp to neutral
        _stop(emu)
    out["rig"] = json.loads(stats.read_text())
    return out


def test_realtime_kill_one_process(killed_run: dict) -> None:
    """The launcher says which process died and exits 1; the log up to the kill is readable;
    the rig parks inside its limits."""
    r = killed_run
    assert r["code"] == 1
    assert r["said"] and "SIGKILL" in r["stderr"], r["stderr"][-2000:]
    assert len(r["stopped"]) == r["others"], r["stopped"]
    # the log up to the kill is readable (rebuilt if the logger could not finish it)
    try:
        lf = open_log(r["log"])
    except LogError:
        recover(r["log"])
        lf = open_log(r["log"])
    with lf:
        n = sum(1 for _ in lf.messages(["orbiter/state"]))
    assert n > 100
    # the rig parked inside its limits
    st = r["rig"]
    limits = tomllib.loads(REALTIME.read_text()).get("hil", {}).get("limits", {})
    lo, hi = limits.get("lo", 0.40), limits.get("hi", 0.70)
    assert st["state"] in ("ARMED", "PARKING", "FAULT"), st["state"]  # parked (ARMED at neutral), parking, or
    # ramped to neutral by its watchdog (FAULT)
    assert all(lo <= x <= hi for x in st["axes"]), st["axes"]
    np.testing.assert_allclose(st["axes"], st["neutral"], atol=0.01)


def test_realtime_kill_others_stop_within_1s(killed_run: dict) -> None:
    r = killed_run
    timing = f"launcher said so after {r['said'][0]:.3f} s; the others stopped after {r['stopped']}"
    print(timing)
    assert r["said"][0] < 1.0, timing                                # the death is noticed promptly
    assert max(r["stopped"].values()) - r["said"][0] < 1.0, timing   # the others stop within 1 s
