"""The realtime scenario end to end: real processes under SCHED_FIFO, the rig emulator on a real pty.

- a 10 s realtime run of ``configs/srms_berthing_realtime.toml`` (approach, capture at 7 s,
  berthing move from 7.5 s): it completes as scripted, every service makes every step, no
  message is dropped or invalid, no module is first imported once the run has started (a step
  would pay for it: protocol.realtime.preload), the phases are the lockstep run's, the rig stays engaged
  with a clean link and its emulator reports no fault. Delivery, phases and safety only:
  how late the steps were is measured in ``bench/bench_realtime.py``, not asserted here;
- overload (the test-only knob :data:`protocol.shell.BUSY_ENV` adds 3 ms to every 1 ms step of
  the contact service from t = 2 s): the run freezes within 0.1 s of simulated time, names the
  service and the figure, stops after ``sim.freeze_stop_after`` without a resume, its log has
  nothing non-finite, and the rig, held then parked during the freeze, ends at neutral inside its
  limits without a fault.

Every process started here is stopped in a ``finally`` and every wait has a timeout.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest
import tomli_w

from protocol.logfile import open_log, read_topics
from protocol.shell import BUSY_ENV
from testkit.procs import argv_of

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
LAUNCH = ROOT / "launch.py"
REALTIME = ROOT / "configs" / "srms_berthing_realtime.toml"


def _config(tmp: Path, **sim: float) -> tuple[Path, Path]:
    """The realtime scenario with ``sim`` overrides, its emulator writing its statistics to a file."""
    cfg = tomllib.loads(REALTIME.read_text())
    cfg["sim"].update(sim)
    stats = tmp / "rig_stats.json"
    cfg["hil"].setdefault("emulator", {})["stats"] = str(stats)
    path = tmp / "realtime.toml"
    path.write_bytes(tomli_w.dumps(cfg).encode())
    return path, stats


def _run(config: Path, tmp: Path, duration: float, env: dict[str, str] | None = None
         ) -> tuple[subprocess.CompletedProcess[str], Path]:
    log = tmp / "run.mcap"
    p = subprocess.run([sys.executable, str(LAUNCH), "run", str(config), "--duration", str(duration), "--log",
                        str(log), "--no-report", "--json"], cwd=tmp, capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PYTHONPATH": str(ROOT), "BERTHSIM_NO_PROGRESS": "1", **(env or {})})
    return p, log


def _summary(p: subprocess.CompletedProcess[str]) -> dict:
    return json.loads(p.stdout.strip().splitlines()[-1])


def _limits() -> tuple[float, float]:
    limits = tomllib.loads(REALTIME.read_text()).get("hil", {}).get("limits", {})
    return limits.get("lo", 0.40), limits.get("hi", 0.70)


def test_realtime_scenario_10s_delivery_phases_and_safety(tmp_path: Path) -> None:
    config, stats = _config(tmp_path)
    p, log = _run(config, tmp_path, 10.0)
    assert p.returncode == 0, p.stderr[-3000:]
    summary = _summary(p)
    rates = {"orbiter": 100, "arm": 500, "contact": 1000, "hil": 250, "operator": 50}
    for name, hz in rates.items():  # every step made, nothing lost or malformed on the way
        s = summary["services"][name]
        assert s["steps"] == 10 * hz and s["t_ns"] == 10_000_000_000, (name, s)
        assert s["msgs_dropped"] == 0 and s["msgs_invalid"] == 0, (name, s)
        assert s["late_imports"] == 0, (name, p.stderr[-2000:])  # no step paid for an import (preload)
    assert summary["services"]["logger"]["msgs_invalid"] == 0
    fig = json.loads((tmp_path / "run.summary.json").read_text())
    assert fig["ok"] and "diverged" not in fig
    # the phases of the lockstep run (the operator's script: capture 7.0 s, rigidize 7.5 s)
    assert fig["phases"]["capture"] == pytest.approx(7.0, abs=0.05)
    assert fig["phases"]["berthing move"] == pytest.approx(7.5, abs=0.05)
    assert fig["capture"]["v_rel_m_s"] == pytest.approx(3.5e-3, abs=0.3e-3)
    # delivery into the log: each state topic at its coupling rate, all of it finite (decoded and checked)
    with open_log(log) as lf:
        d = read_topics(lf, ["orbiter/state", "payload/state", "arm/state", "hil/status"])
    for topic, hz in (("orbiter/state", 100), ("payload/state", 100), ("arm/state", 100), ("hil/status", 50)):
        t = d[topic]["t_ns"]
        assert len(t) == 10 * hz + 1 and np.all(np.diff(t) == 1_000_000_000 // hz), topic
    # safety: the rig engaged to the end, a clean link, no fault on either end
    assert d["hil/status"]["state"][-1] == "ENGAGED"
    link = d["hil/status"]["link"][-1]
    assert link["crc_errors"] == 0 and link["seq_lost"] == 0 and link["bad_frames"] == 0, link
    rig = json.loads(stats.read_text())
    assert rig["faults"] == 0 and not rig["fault_log"], rig["fault_log"]
    lo, hi = _limits()
    assert all(lo <= x <= hi for _, axes in rig["applied"] for x in axes)


def test_realtime_overload_freezes_names_the_service_and_parks_the_rig(tmp_path: Path) -> None:
    config, stats = _config(tmp_path, freeze_park_after=0.5, freeze_stop_after=2.0)
    p, log = _run(config, tmp_path, 10.0, env={BUSY_ENV: "contact=3@2.0"})
    assert p.returncode == 1, p.stderr[-3000:]
    err = p.stderr
    assert "service 'contact' froze the run at t = " in err, err[-3000:]
    assert "consecutive steps longer than its 1 ms period (sim.overrun_limit 10)" in err
    assert "no resume within sim.freeze_stop_after (2 s): stopped" in err
    t_freeze = float(err.split("service 'contact' froze the run at t = ", 1)[1].split(" s", 1)[0])
    assert 2.0 <= t_freeze < 2.1  # within 0.1 s of the overload's onset
    # the log: readable, nothing non-finite (every body decoded and checked), nothing past the freeze
    with open_log(log) as lf:
        topics = [t for t in lf.topics if not t.startswith("sim/")]
        d = read_topics(lf, topics)
    for topic, cols in d.items():
        for name, col in cols.items():
            if isinstance(col, np.ndarray) and col.dtype.kind == "f":
                assert np.isfinite(col).all(), (topic, name)
        if len(cols.get("t_ns", ())):
            assert cols["t_ns"][-1] <= (t_freeze + 0.1) * 1e9, topic  # every service held within 0.1 s
    # the rig: held through the freeze (no watchdog fault), then parked: at neutral inside its limits
    rig = json.loads(stats.read_text())
    assert rig["faults"] == 0 and not rig["fault_log"], rig["fault_log"]
    assert rig["state"] in ("PARKING", "ARMED"), rig["state"]  # parked: ramping to neutral, or there (ARMED)
    lo, hi = _limits()
    assert all(lo <= x <= hi for x in rig["axes"]) and all(lo <= x <= hi for _, a in rig["applied"] for x in a)
    np.testing.assert_allclose(rig["axes"], rig["neutral"], atol=1e-3)


def _run_with_signals(config: Path, tmp: Path, duration: float,
                      signals: list[tuple[float, int, str]]) -> tuple[int, str, str, Path]:
    """A realtime run; each ``(after, signal, target)`` is sent ``after`` s after the run has started (its
    physics process runs SCHED_FIFO) to the launcher (target ``"launcher"``) or to that process group's
    worker (SIGSTOP / SIGCONT)."""
    import time

    log = tmp / "run.mcap"
    p = subprocess.Popen([sys.executable, str(LAUNCH), "run", str(config), "--duration", str(duration), "--log",
                          str(log), "--no-report", "--json"], cwd=tmp, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT), "BERTHSIM_NO_PROGRESS": "1"})
    try:
        t0 = time.monotonic()
        while time.monotonic() - t0 < 90 and not _stepping(config):  # the physics loop has begun: it runs
            time.sleep(0.05)                                          # SCHED_FIFO from its first step on
        start = time.monotonic()
        for after, s, target in signals:
            time.sleep(max(0.0, start + after - time.monotonic()))
            if target == "launcher":
                p.send_signal(s)
            else:
                for pid in _worker_pids(config, target):
                    os.kill(pid, s)
        out, err = p.communicate(timeout=300)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    return p.returncode, out, err, log


def _stepping(config: Path) -> bool:
    """Whether the physics process's realtime loop has begun (it sets SCHED_FIFO at its first step)."""
    for pid in _worker_pids(config, "physics"):
        try:
            if os.sched_getscheduler(pid) == os.SCHED_FIFO:
                return True
        except OSError:
            pass
    return False


def _worker_pids(config: Path, proc: str) -> list[int]:
    pids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                cmd = argv_of(d.name)
            except OSError:
                continue
            if b"_worker" in cmd and str(config).encode() in cmd and proc.encode() in cmd:
                pids.append(int(d.name))
    return pids


@pytest.mark.parametrize("frozen_s", [1.0, 3.0])
def test_freeze_and_resume_completes_as_scripted_and_the_freeze_is_in_the_log(tmp_path: Path, frozen_s: float) -> None:
    import signal

    config, stats = _config(tmp_path, freeze_park_after=2.0, freeze_stop_after=10.0)
    rc, out, err, log = _run_with_signals(config, tmp_path, 10.0,
                                          [(3.0, signal.SIGUSR1, "launcher"),
                                           (3.0 + frozen_s, signal.SIGUSR2, "launcher")])
    assert rc == 0, err[-3000:]
    assert "froze the run" not in err  # no overload after the resume: ages and lag paused while frozen
    with open_log(log) as lf:
        ctl = [decode_control(m.payload) for m in lf.messages(["sim/control"])]
        state = [(m.t_ns, m.wall_ns) for m in lf.messages(["orbiter/state"])]
    cmds = [c["cmd"] for c in ctl]
    assert "freeze" in cmds and "resume" in cmds, cmds
    # simulated time stood still while the wall clock ran: one coupling period of orbiter/state across the
    # longest wall gap between its samples, and that gap the freeze's length
    t, wall = np.array(state).T
    k = int(np.argmax(np.diff(wall)))
    assert frozen_s - 0.2 <= (wall[k + 1] - wall[k]) * 1e-9 <= frozen_s + 1.0, (wall[k + 1] - wall[k]) * 1e-9
    assert t[k + 1] - t[k] == 10_000_000
    if frozen_s > 2.0:  # held past freeze_park_after: the rig parked, and the log says so
        held = [c["info"] for c in ctl if c["cmd"] == "held"]
        assert any(h.get("rig") in ("PARKING", "ARMED") for h in held), held


def test_a_stopped_process_is_told_apart_from_a_slow_one(tmp_path: Path) -> None:
    import signal

    config, _ = _config(tmp_path, freeze_stop_after=10.0)
    rc, out, err, log = _run_with_signals(config, tmp_path, 10.0,
                                          [(3.0, signal.SIGSTOP, "physics"), (5.5, signal.SIGCONT, "physics"),
                                           (7.0, signal.SIGUSR2, "launcher")])
    # the stopped process says so when it wakes (another may have frozen the run first, on the inputs the
    # stopped one no longer sent): the run froze and resumed, and nothing is called too slow for real time.
    # (The rig, whose commands stopped with the physics for 2.5 s, may have faulted on its watchdog: then the
    # run did not go as scripted, exit 3, as any run whose rig faulted.)
    assert "did not run for" in err and "not a slow step" in err, err[-3000:]
    assert "run it in lockstep" not in err and "behind the wall clock" not in err
    assert rc in (0, 3), err[-3000:]


def decode_control(payload: bytes) -> dict:
    from protocol.codec import decode

    return dict(decode("sim/control", payload).body)
