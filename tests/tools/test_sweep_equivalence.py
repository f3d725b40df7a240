"""tools.sweep: a sweep run as a Dask task computes it (restored snapshot, the scenario value set by
transplant, the worker made ready once with its objects frozen for the collector) gives the outcome
and figures of the same scenario run plainly.

Reference: a lockstep run of the run's scenario from t0 (models built and validated afresh, the
project's runner :func:`protocol.scheduler.start` / :func:`protocol.scheduler.advance`), the body
changes added at the window's start, its frames decoded and :func:`tools.report.figures` computed
from them; the outcome read here from its contact events.
"""

from __future__ import annotations

import gc
import math
from pathlib import Path

import pytest

from protocol.logfile import decode_bodies
from protocol.scheduler import advance, start
from tools import dispersion
from tools import sweep as sw
from tools.report import FIGURE_TOPICS, figures

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "configs" / "srms_berthing.toml"

# a grid: a slow and a fast closing (the fast one misses the capture envelope's 0.03 m/s), a light and a heavy
# payload (a scenario value: set by transplant at the start)
SWEEP = f"""
[sweep]
scenario = "{SCENARIO}"
runs = 4
seed = 11
start = 6.0
end = 8.0
require = ["capture", "rigidize"]

[[parameter]]
name = "closing_rate"
body = "payload"
change = "velocity"
frame = "G"
axis = "-x"
distribution = "grid"
values = [0.0, 0.035]

[[parameter]]
name = "lateral_offset"
body = "payload"
change = "position"
frame = "G"
axis = "y"
distribution = "grid"
values = [0.03]

[[parameter]]
name = "mass"
key = "payload.mass"
distribution = "grid"
values = [9000.0, 15000.0]
"""


def _plain(plan: sw.SweepPlan, k: int) -> tuple[str, dict]:
    """Run ``k`` without the sweep's snapshot: from t0, its scenario validated and built whole."""
    values, seed = dispersion.run_values([p.dispersion for p in plan.parameters], plan.seed, k)
    cfg = sw.run_config(plan, values, seed)
    sched = start(sw.build_models(cfg), coupling=plan.coupling)
    advance(sched, plan.start_ns)
    sw.perturb(sched.models, plan, values, cfg)
    frames: list[bytes] = []
    advance(sched, plan.end_ns, frames.append)
    by_topic: dict[str, list[bytes]] = {}
    for f in frames:
        i = f.index(b"\0")
        by_topic.setdefault(f[:i].decode(), []).append(f[i + 1:])
    fig = figures({t: decode_bodies(t, b) for t, b in by_topic.items() if t in FIGURE_TOPICS}, cfg)
    kinds = [e["kind"] for evs in decode_bodies("contact/event", by_topic["contact/event"])["events"] for e in evs]
    if "miss" in kinds:
        want = "miss"
    elif "capture" not in kinds:
        want = "no capture"
    elif "rigidize" not in kinds[kinds.index("capture"):]:
        want = "no rigidize"
    else:
        want = "ok"
    return want, fig


@pytest.mark.slow
def test_sweep_tasks_give_the_outcomes_and_figures_of_plain_runs(tmp_path):
    (tmp_path / "eq.toml").write_text(SWEEP)
    plan = sw.load_sweep(tmp_path / "eq.toml")
    blob = sw.prefix(plan)
    try:
        rows = [sw._run_task(plan, k, blob) for k in range(plan.runs)]  # as a worker runs them
    finally:
        gc.unfreeze()  # _ready froze this process's objects
    outcomes = []
    for k, row in enumerate(rows):
        want, fig = _plain(plan, k)
        outcomes.append(row["outcome"])
        assert row["outcome"] == want, (k, row["outcome"], row["error"])
        cap = fig.get("capture", fig.get("miss", {}))
        assert row["capture.t"] == cap["t"] and row["capture.v_rel_m_s"] == cap["v_rel_m_s"], k
        assert row["interface_peak.force_N"] == fig["interface_peak"]["force_N"], k
        assert row["momentum_drift_Ns"] == fig["momentum_drift_Ns"], k
        peaks = [row[f"joint_peak_Nm.j{i + 1}"] for i in range(sw.N_JOINTS)]
        assert peaks == list(fig["joint_peak_Nm"]), k
        assert not math.isnan(row["capture.t"])
    assert sorted(set(outcomes)) == ["miss", "ok"], outcomes  # both ways through the window
