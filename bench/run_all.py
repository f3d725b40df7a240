#!/usr/bin/env python3
"""Run every benchmark and print one JSON object of all their figures.

Each ``bench/bench_*.py`` prints one JSON object (its last stdout line that parses as
one); it is run with short durations where it offers them (``--seconds``,
``--lockstep-seconds``, ``--repeat``, ``--number``, ``--steps``, ``--calls``,
``--messages``, ``--duration``, ``--record-seconds``, ``--floor-ticks``, ``--sim-seconds``,
``--floor-seconds``: the values of :data:`SHORT`, applied only to the options its ``--help``
lists). The main job's figures come from two of them: ``bench_mainjob.py`` (the default
scenario in lockstep in its three process layouts: simulated seconds per wall second, CPU
seconds per simulated second per process, messages) and ``bench_realtime.py`` (the realtime
scenario: overruns, jitter, input age, utilization, and the host's floor). The machine's
load average is printed with them, since other work on the machine changes every figure.

    python bench/run_all.py [--duration S] [--only NAME[,NAME]]

``--duration`` sets the simulated seconds of the scenario benchmarks (default 10; 45 is the
whole scenario). A benchmark that fails is reported as ``{"error": ...}`` under its name;
the exit code is then 1.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"

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
    "--sim-seconds": "10",
    "--floor-seconds": "5",
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


def short_options(script: Path, overrides: dict[str, str] | None = None) -> list[str]:
    """The :data:`SHORT` options (with ``overrides``) that ``script --help`` lists, as command-line arguments."""
    try:
        out = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, check=False,
                             timeout=120, cwd=ROOT).stdout
    except subprocess.TimeoutExpired:
        return []
    offered = set(re.findall(r"--[a-z][a-z0-9-]*", out))
    args: list[str] = []
    for opt, value in {**SHORT, **(overrides or {})}.items():
        if opt in offered:
            args += [opt, value]
    return args


def run_bench(script: Path, overrides: dict[str, str] | None = None) -> dict[str, Any]:
    """Run one benchmark with short options (``overrides`` replace values of :data:`SHORT`); its
    JSON object, or ``{"error": ...}``."""
    cmd = [sys.executable, str(script), *short_options(script, overrides)]
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=None,
                    help="simulated seconds of the scenario benchmarks (default 10; 45: the whole scenario)")
    ap.add_argument("--only", help="comma-separated benchmark names (e.g. bench_runtime)")
    a = ap.parse_args(argv)
    only = {n.strip() for n in a.only.split(",")} if a.only else None
    figures: dict[str, Any] = {"machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                                           "load_avg_before": [round(x, 2) for x in os.getloadavg()]}}
    failed = False
    for script in sorted(BENCH.glob("bench_*.py")):
        if only is not None and script.stem not in only:
            continue
        figures[script.stem] = run_bench(script, {"--sim-seconds": f"{a.duration:g}"} if a.duration else None)
        failed |= "error" in figures[script.stem]
    figures["machine"]["load_avg_after"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(figures))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
