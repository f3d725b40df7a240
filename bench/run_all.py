#!/usr/bin/env python3
"""Run every benchmark and print one JSON object of all their figures.

Each ``bench/bench_*.py`` prints one JSON object (its last stdout line that parses as
one); it is run with short durations where it offers them (``--seconds``,
``--lockstep-seconds``, ``--repeat``, ``--number``, ``--steps``, ``--calls``,
``--messages``, ``--duration``, ``--record-seconds``, ``--floor-ticks``: the values of :data:`SHORT`, applied only to the options its ``--help`` lists). Beside them,
the main job's figure: the default scenario (``configs/srms_berthing.toml``) run in
lockstep as fast as possible, all services as separate processes and again ``--inprocess``
(every service a thread of one process), each giving simulated seconds per wall second
(target ≥ 2 on a 2-core machine). The machine's load average is printed with them,
since other work on the machine changes every figure.

    python bench/run_all.py [--duration S] [--skip-main] [--only NAME[,NAME]]

``--duration`` shortens the scenario runs (default: the whole scenario). A benchmark
that fails is reported as ``{"error": ...}`` under its name; the exit code is then 1.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
SCENARIO = ROOT / "configs" / "srms_berthing.toml"

SHORT: dict[str, str] = {
    "--seconds": "2",
    "--lockstep-seconds": "2",
    "--repeat": "3",
    "--number": "50",
    "--steps": "300",
    "--calls": "300",
    "--messages": "20000",
    "--duration": "2",
    "--record-seconds": "3",
    "--floor-ticks": "5000",
}
"""Short values for the options a benchmark offers (applied if its ``--help`` lists them)."""

TIMEOUT_S = 900.0


def _last_json(text: str) -> dict[str, Any] | None:
    """The last JSON object printed: on one line, or spread over the last lines (indented)."""
    lines = text.strip().splitlines()
    for i in range(len(lines) - 1, -1, -1):
        if not lines[i].startswith("{"):
            continue
        for candidate in (lines[i], "\n".join(lines[i:])):
            try:
                obj = json.loads(candidate)
            except json.JSONDecodeError:
                continue
            if isinstance(obj, dict):
                return obj
    return None


def short_options(script: Path) -> list[str]:
    """The :data:`SHORT` options that ``script --help`` lists, as command-line arguments."""
    try:
        out = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, check=False,
                             timeout=120, cwd=ROOT).stdout
    except subprocess.TimeoutExpired:
        return []
    offered = set(re.findall(r"--[a-z][a-z0-9-]*", out))
    args: list[str] = []
    for opt, value in SHORT.items():
        if opt in offered:
            args += [opt, value]
    return args


def run_bench(script: Path) -> dict[str, Any]:
    """Run one benchmark with short options; its JSON object, or ``{"error": ...}``."""
    cmd = [sys.executable, str(script), *short_options(script)]
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S, cwd=ROOT, check=False)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {TIMEOUT_S:.0f} s", "command": cmd[1:]}
    obj = _last_json(p.stdout)
    if p.returncode != 0 or obj is None:
        tail = (p.stderr or p.stdout).strip().splitlines()[-3:]
        return {"error": f"exit code {p.returncode}" + ("" if obj is not None else ", no JSON object"),
                "stderr_tail": tail, "command": cmd[1:]}
    obj.setdefault("_wall_s", round(time.monotonic() - t0, 2))
    obj.setdefault("_args", cmd[2:])
    return obj


def run_scenario(inprocess: bool, duration: float | None) -> dict[str, Any]:
    """The default scenario in lockstep at full speed: simulated seconds per wall second.

    Reads the launcher's JSON summary line (``t_end_ns``, ``wall_s``: wall time from the
    start broadcast to the last service done, so start-up and shutdown are excluded; the
    figure with them is ``ratio_with_startup``).
    """
    with tempfile.TemporaryDirectory(prefix="berthsim-bench-") as tmp:
        cmd = [sys.executable, str(ROOT / "launch.py"), "run", str(SCENARIO), "--speed", "0",
               "--log", str(Path(tmp) / "run.mcap")]
        if duration:
            cmd += ["--duration", str(duration)]
        if inprocess:
            cmd.append("--inprocess")
        t0 = time.monotonic()
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S, cwd=ROOT, check=False,
                               env={**os.environ, "BERTHSIM_NO_PROGRESS": "1"})
        except subprocess.TimeoutExpired:
            return {"error": f"timed out after {TIMEOUT_S:.0f} s"}
        total = time.monotonic() - t0
    summary = None
    for line in p.stdout.splitlines():
        obj = _last_json(line)
        if obj and obj.get("event") == "summary":
            summary = obj
    if summary is None or not summary.get("wall_s") or not summary.get("t_end_ns"):
        return {"error": f"exit code {p.returncode}, no summary", "stderr_tail": p.stderr.strip().splitlines()[-3:]}
    sim_s = summary["t_end_ns"] * 1e-9
    return {"sim_s": sim_s, "wall_s": round(summary["wall_s"], 3),
            "sim_per_wall": round(sim_s / summary["wall_s"], 3),
            "ratio_with_startup": round(sim_s / total, 3), "exit_code": p.returncode}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=None, help="simulated seconds of the scenario runs")
    ap.add_argument("--skip-main", action="store_true", help="only the bench_*.py scripts")
    ap.add_argument("--only", help="comma-separated benchmark names (e.g. bench_runtime)")
    a = ap.parse_args(argv)
    only = {n.strip() for n in a.only.split(",")} if a.only else None
    figures: dict[str, Any] = {"machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                                           "load_avg_before": [round(x, 2) for x in os.getloadavg()]}}
    failed = False
    for script in sorted(BENCH.glob("bench_*.py")):
        if only is not None and script.stem not in only:
            continue
        figures[script.stem] = run_bench(script)
        failed |= "error" in figures[script.stem]
    if not a.skip_main:
        main_job = {mode: run_scenario(mode == "inprocess", a.duration) for mode in ("multiprocess", "inprocess")}
        main_job["target_sim_per_wall"] = 2.0
        figures["main_job"] = main_job
        failed |= any("error" in v for v in main_job.values() if isinstance(v, dict))
    figures["machine"]["load_avg_after"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(figures))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
