#!/usr/bin/env python3
"""Sweep figures (printed as JSON; not a test): the capture-window sweep on a LocalCluster.

``configs/sweeps/capture_envelope.toml`` with fewer runs (``--runs``), each a restored
snapshot at 6 s run to the window's end (``--seconds`` shortens the window), on a
LocalCluster of 1 and of 2 workers, alternately (``--rounds`` times each: A B A B):

- ``runs_per_hour_2w``: runs per hour on 2 workers, from the first run submitted to the
  last row (steady state: the cluster's start, the snapshot and the parameter checks are
  ``setup_s``, paid once per sweep);
- ``speedup_1_to_2``: the ratio of those run phases, 1 worker over 2 (per round);
- per run (medians), in the worker: ``sim_s`` (the models stepped) and ``engine_in_worker_s``
  (``wall_s − sim_s``: restoring the snapshot, setting the parameters, the figures from the
  frames; a worker's first run also imports the models' modules); on the client's side
  ``engine_dask_s`` (each run's share of the run phase, ``runs_wall · workers / runs −
  mean(wall_s)``: scheduling, transfers, the table, and a worker idle at the end); and
  ``overhead_fraction`` = (engine_in_worker_s + engine_dask_s) / sim_s;
- ``worker_cpu_s_per_run_2w``: the CPU time of the 2 workers' processes (every thread: the runs,
  the snapshot and the parameter checks, Dask's own) over the sweep, per run: less sensitive than
  the wall times to the other work on a shared machine.

Timing on a shared machine drifts by ±15 % and more; the rounds give ranges.

With ``--workers 2`` only the 2-worker sweeps run (``runs_per_hour_1w`` and
``speedup_1_to_2`` are then empty).

    python bench/bench_sweep.py [--runs 6] [--rounds 1] [--seconds S] [--workers 1,2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SWEEP = ROOT / "configs" / "sweeps" / "capture_envelope.toml"


def _sweep_file(where: Path, runs: int, seconds: float | None) -> Path:
    text = SWEEP.read_text().replace('scenario = "../srms_berthing.toml"',
                                     f'scenario = "{ROOT / "configs" / "srms_berthing.toml"}"')
    text = text.replace("runs = 200", f"runs = {runs}")
    if seconds is not None:
        text = text.replace("end = 40.0", f"end = {6.0 + seconds:g}")
    p = where / "bench_sweep.toml"
    p.write_text(text)
    return p


def _one(plan, out: Path, workers: int) -> dict:
    from distributed import Client

    from tools.sweep import local_cluster, run_sweep
    cluster = local_cluster(workers)
    try:
        with Client(cluster) as client, open(os.devnull, "w") as quiet:
            client.wait_for_workers(workers, timeout=120)
            cpu0 = client.run(time.process_time)
            res = run_sweep(plan, out, client=client, overwrite=True, progress=quiet)
            cpu1 = client.run(time.process_time)
    finally:
        cluster.close()
    rows = [r for r in res.rows if r["outcome"] not in ("error", "died")]
    n = len(res.rows)
    sim = statistics.median(r["sim_s"] for r in rows)
    # in the worker, the median (a worker's first run also imports the models' modules); Dask's share
    # from the run phase's total, so against the mean
    in_worker = statistics.median(r["wall_s"] - r["sim_s"] for r in rows)
    wall_mean = statistics.mean(r["wall_s"] for r in rows)
    return {"workers": workers, "runs": n, "setup_s": round(res.wall_s - res.runs_wall_s, 2),
            "runs_wall_s": round(res.runs_wall_s, 2), "runs_per_hour": round(n / res.runs_wall_s * 3600, 1),
            "sim_s": round(sim, 3), "engine_in_worker_s": round(in_worker, 4),
            "engine_dask_s": round(res.runs_wall_s * res.workers / n - wall_mean, 4),
            "worker_cpu_s_per_run": round(sum(cpu1[w] - cpu0[w] for w in cpu0) / n, 3),
            "outcomes": res.counts()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=None, help="window length (default: the file's, 34 s)")
    ap.add_argument("--workers", default="1,2", help="LocalCluster sizes run in each round, in order (default 1,2)")
    a = ap.parse_args()
    sizes = [int(w) for w in a.workers.split(",")]
    if not sizes or any(w < 1 for w in sizes) or 2 not in sizes:
        ap.error(f"--workers: expected sizes >= 1 separated by commas, among them 2, got {a.workers!r}")
    from tools.sweep import load_sweep
    with tempfile.TemporaryDirectory(prefix="berthsim-bench-sweep-") as d:
        plan = load_sweep(_sweep_file(Path(d), a.runs, a.seconds))
        rounds = []
        for _ in range(a.rounds):
            got = {w: _one(plan, Path(d) / f"w{w}", w) for w in sizes}
            rounds.append((got.get(1), got[2]))
    two = [t for _, t in rounds]
    out = {
        "window_s": round((plan.end_ns - plan.start_ns) * 1e-9, 3),
        "runs_per_hour_2w": [t["runs_per_hour"] for t in two],
        "runs_per_hour_1w": [o["runs_per_hour"] for o, _ in rounds if o is not None],
        "speedup_1_to_2": [round(o["runs_wall_s"] / t["runs_wall_s"], 3) for o, t in rounds if o is not None],
        "sim_s_per_run": [t["sim_s"] for t in two],
        "engine_in_worker_s_per_run": [t["engine_in_worker_s"] for t in two],
        "engine_dask_s_per_run": [t["engine_dask_s"] for t in two],
        "overhead_fraction": [round((t["engine_in_worker_s"] + t["engine_dask_s"]) / t["sim_s"], 4) for t in two],
        "worker_cpu_s_per_run_2w": [t["worker_cpu_s_per_run"] for t in two],
        "setup_s": [t["setup_s"] for t in two],
        "rounds": [{"1_worker": o, "2_workers": t} for o, t in rounds],
        "load_average": list(os.getloadavg()),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
