"""The main job's end-of-run table (``services.report.summary_table``): what a user reads first."""

from __future__ import annotations

from services.report import summary_table

FIG = {"phases": {"approach": 0.0}, "interface_peak": {"force_N": 1.0, "moment_Nm": 2.0, "rig_force_N": 0.0},
       "momentum_drift_Ns": 0.0, "momentum_P0_Ns": 36.0, "rig": {}}


def _row(table: str, key: str) -> str:
    line = next(x for x in table.splitlines() if x.strip().startswith(key))
    return line.split(key, 1)[1].strip()


def test_overruns_name_each_stepping_service_and_its_step_count_when_nonzero() -> None:
    stats = {"arm": {"steps": 500, "overruns": 0}, "contact": {"steps": 1000, "overruns": 987},
             "logger": {"steps": 0, "overruns": 0}, "hil": {}}
    row = _row(summary_table(FIG, stats, ok=False), "overruns")
    assert row == "arm 0, contact 987 of 1000 steps"


def test_overruns_without_statistics_show_a_dash() -> None:
    assert _row(summary_table(FIG, {"arm": {}}, ok=True), "overruns") == "—"
