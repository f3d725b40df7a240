"""Cost of the field-tool exports of a run's log (``launch.py export --format foxglove|ros2``): prints one JSON object.

The target (docs/field_tools.md): exporting the default scenario's 45 s log for Foxglove
costs under 10 s on the 2-core machine. Each format is exported once through the command
line, as a user runs it (a fresh interpreter: its imports included): wall seconds, CPU
seconds of that process (``RUSAGE_CHILDREN``, which a shared machine disturbs less than
wall time; ``load_avg_1min`` says how shared it was), the file's size and message count.

    python bench/bench_export.py [--log RUN.mcap] [--duration S] [--formats foxglove,ros2]

Without ``--log`` the default scenario is recorded first (``launch.py run --duration S
--inprocess --no-report``; default 45 s, the whole scenario).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAUNCH = ROOT / "launch.py"
TARGET_S = 10.0
"""The Foxglove export of the default 45 s log, at most (wall seconds)."""


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "BERTHSIM_NO_PROGRESS": "1"}


def _child_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def record(out: Path, duration: float) -> None:
    """The default scenario's log of ``duration`` simulated seconds, in one process."""
    p = subprocess.run([sys.executable, str(LAUNCH), "run", "--duration", str(duration), "--log", str(out),
                        "--no-report", "--inprocess", "--overwrite"], cwd=out.parent, env=_env(),
                       capture_output=True, text=True, check=False)
    if p.returncode != 0:
        raise SystemExit(f"bench_export: the run failed: {p.stderr[-2000:]}")


def export(log: Path, fmt: str, out: Path) -> dict[str, object]:
    """One ``launch.py export`` of ``log``: its figures."""
    cpu0, t0 = _child_cpu(), time.perf_counter()
    p = subprocess.run([sys.executable, str(LAUNCH), "export", str(log), "--format", fmt, "--out", str(out)],
                       env=_env(), capture_output=True, text=True, check=False)
    wall, cpu = time.perf_counter() - t0, _child_cpu() - cpu0
    if p.returncode != 0:
        return {"error": p.stderr.strip()[-500:]}
    line = json.loads(p.stdout.strip().splitlines()[-1])
    return {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "export_s": line["seconds"],
            "messages": line["messages"], "channels": len(line["channels"]),
            "mb": round(out.stat().st_size / 1e6, 2)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--log", help="the log to export (default: record the default scenario)")
    ap.add_argument("--duration", type=float, default=45.0, help="simulated seconds recorded without --log")
    ap.add_argument("--formats", default="foxglove,ros2")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(a.log) if a.log else Path(tmp) / "run.mcap"
        if not a.log:
            record(log, a.duration)
        fig: dict[str, object] = {"log": str(log) if a.log else f"default scenario, {a.duration:g} s",
                                  "log_mb": round(log.stat().st_size / 1e6, 2), "cpus": os.cpu_count()}
        for fmt in a.formats.split(","):
            fig[fmt] = export(log, fmt, Path(tmp) / f"out.{fmt}.mcap")
        fig["load_avg_1min"] = round(os.getloadavg()[0], 2)
        fox = fig.get("foxglove")
        if isinstance(fox, dict) and "wall_s" in fox:
            fig["foxglove_target_s"] = TARGET_S
            fig["foxglove_within_target"] = bool(fox["wall_s"] <= TARGET_S)
    print(json.dumps(fig))
    return 0


if __name__ == "__main__":
    sys.exit(main())
