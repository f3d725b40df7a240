#!/usr/bin/env python3
"""The realtime scenario on this host: how late its steps were, and what the host itself holds.

Parts (``--parts``, default both):

``runs``
    ``launch.py run configs/srms_berthing_realtime.toml --no-report --json`` (``--runs`` times in
    a row, ``--sim-seconds`` each, default the scenario's 45 s), its processes under SCHED_FIFO
    rate-monotonically (:mod:`protocol.realtime`). Per run: exit code, the phases, latch time and
    peak interface force and moment (to compare with the lockstep run, printed once with
    ``--lockstep``), the rig link's counters and the rig's final state; per service: overrun rate
    [%] (steps that ended after their period), step-start jitter p50 / p99 / max [µs], input age
    p99 [ms], modules first imported during the run; per process: CPU seconds per wall second
    (its utilization of one core, sampled from ``/proc``).
``floor``
    The host floor: bare loops without a bus, one per stepping process of the realtime config
    at its SCHED_FIFO priority and fastest rate (:func:`protocol.realtime.priorities`), busy for
    the process's measured step cost (p50, :func:`protocol.realtime.calibrate`) per step, all at
    once for ``--floor-seconds``: the lateness this host gives loops that do nothing else.

Prints one JSON object. On a shared 2-core machine the figures drift with the other load; the
load average and the kernel's preemption model are printed with them.
``python bench/bench_realtime.py [--runs 3] [--sim-seconds S] [--lockstep] [--parts runs,floor]``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench_mainjob import launch_sampled  # noqa: E402  (bench/ is the script's directory)
from bench_runtime import bare_loops  # noqa: E402

REALTIME = ROOT / "configs" / "srms_berthing_realtime.toml"


def _figures(summary_json: Path) -> dict[str, Any]:
    fig = json.loads(summary_json.read_text())
    out: dict[str, Any] = {"phases": fig.get("phases"), "completed_as_scripted": fig.get("ok")}
    if "diverged" in fig:
        out["diverged"] = fig["diverged"]
        return out
    out["latch_t"] = fig.get("latch", {}).get("t")
    peak = fig.get("interface_peak", {})
    out["peak_force_N"], out["peak_moment_Nm"] = peak.get("force_N"), peak.get("moment_Nm")
    out["momentum_drift_end_Ns"] = fig.get("momentum_drift_end_Ns")
    out["rig"] = fig.get("rig")
    return out


def run(sim_seconds: float | None, mode: str = "realtime") -> dict[str, Any]:
    """One run of the realtime scenario (``mode`` "lockstep": the same config in lockstep)."""
    with tempfile.TemporaryDirectory(prefix="berthsim-bench-rt-") as tmp:
        log = Path(tmp) / "run.mcap"
        cmd = [sys.executable, str(ROOT / "launch.py"), "run", str(REALTIME), "--no-report", "--json", "--log",
               str(log), "--mode", mode]
        if sim_seconds:
            cmd += ["--duration", str(sim_seconds)]
        code, out, err, wall, sampler = launch_sampled(cmd)
        lines = [ln for ln in out.splitlines() if ln.startswith("{")]
        if not lines:
            return {"exit_code": code, "stderr_tail": err.strip().splitlines()[-6:]}
        summary = json.loads(lines[-1])
        res: dict[str, Any] = {"exit_code": code, "wall_s": round(wall, 1)}
        if (Path(tmp) / "run.summary.json").exists():
            res.update(_figures(Path(tmp) / "run.summary.json"))
    if mode != "realtime":
        return res
    services = {}
    for name, s in summary["services"].items():
        if not s or not s.get("steps"):
            continue
        services[name] = {"steps": s["steps"], "overrun_pct": round(100.0 * s["overruns"] / s["steps"], 3),
                          "jitter_p50_us": round(s["jitter_p50_ns"] / 1e3, 1),
                          "jitter_p99_us": round(s["jitter_p99_ns"] / 1e3, 1),
                          "jitter_max_us": round(s.get("jitter_max_ns", 0) / 1e3, 1),
                          "input_age_p99_ms": round(s.get("input_age_p99_ns", 0) / 1e6, 2),
                          "late_imports": s.get("late_imports")}
    res["services"] = services
    loop_wall = summary.get("wall_s") or wall
    res["utilization_per_process"] = {k: round(v / loop_wall, 3) for k, v in sampler.by_name().items()}
    return res


def floor(seconds: float) -> dict[str, Any]:
    """Bare loops at the realtime config's priorities, rates and step costs (module docstring)."""
    from protocol.config import load, validate
    from protocol.realtime import calibrate, priorities

    plan = validate(load(REALTIME), path=REALTIME)
    prio = priorities(plan)
    costs = calibrate(plan.config, plan.services)
    loops, names = [], []
    for proc, members in plan.processes.items():
        stepping = [n for n in members if n in costs]
        if not stepping or not prio.get(proc):
            continue
        period = min(plan.services[n].period_ns for n in stepping)
        busy_us = sum(costs[n][0] * period / plan.services[n].period_ns for n in stepping)  # p50, per fastest step
        loops.append((1e9 / period, prio[proc], busy_us))
        names.append(proc)
    res = bare_loops(seconds, loops)
    return {name: {"rate_hz": round(rate), "priority": pr, "busy_us_per_step": round(busy, 1), **r}
            for name, (rate, pr, busy), r in zip(names, loops, res, strict=True)}


def main(argv: list[str] | None = None) -> int:
    from protocol.realtime import kernel_preemption

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=1, help="realtime runs in a row")
    ap.add_argument("--sim-seconds", type=float, default=None, help="simulated seconds per run (default: 45)")
    ap.add_argument("--floor-seconds", type=float, default=20.0, help="length of the bare-loop floor run [s]")
    ap.add_argument("--lockstep", action="store_true", help="also run the config once in lockstep (the reference)")
    ap.add_argument("--parts", default="runs,floor", help="comma-separated: runs, floor")
    a = ap.parse_args(argv)
    parts = set(a.parts.split(","))
    fig: dict[str, Any] = {"cpus": os.cpu_count(), "kernel_preemption": kernel_preemption(),
                           "load_avg_1min_before": round(os.getloadavg()[0], 2)}
    if a.lockstep:
        fig["lockstep_reference"] = run(a.sim_seconds, "lockstep")
    if "runs" in parts:
        fig["realtime_runs"] = [run(a.sim_seconds) for _ in range(a.runs)]
    if "floor" in parts:
        fig["host_floor_bare_loops"] = floor(a.floor_seconds)
    fig["load_avg_1min_after"] = round(os.getloadavg()[0], 2)
    print(json.dumps(fig, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
