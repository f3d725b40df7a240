"""The main job's end-of-run table (``tools.report.summary_table``): what a user reads first."""

from __future__ import annotations

from tools.report import mark_diverged, summary_table

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


def test_an_unexpected_error_is_one_line_with_the_log_path_and_exit_1(monkeypatch, capsys) -> None:
    import launch

    def boom(a):
        a.log = "runs/x/run.mcap"  # what cmd_run sets once it knows the log
        raise RuntimeError("disk on fire\nsecond line")

    monkeypatch.setitem(launch.COMMANDS, "check", ("validate", launch._check_args, boom))
    monkeypatch.delenv("BERTHSIM_TRACEBACK", raising=False)
    assert launch.main(["check", "x.toml"]) == 1
    err = capsys.readouterr().err
    assert err == "berthsim: error: RuntimeError: disk on fire; log runs/x/run.mcap\n"


def test_a_config_error_that_escapes_a_command_is_one_line_and_exit_2(monkeypatch, capsys) -> None:
    import launch
    from errors import ConfigError

    def refuse(a):
        raise ConfigError("sim.duration: 1e12 s is beyond int64 ns")

    monkeypatch.setitem(launch.COMMANDS, "check", ("validate", launch._check_args, refuse))
    assert launch.main(["check", "x.toml"]) == 2
    assert capsys.readouterr().err == "berthsim: invalid configuration: sim.duration: 1e12 s is beyond int64 ns\n"


def test_a_diverged_run_shows_where_and_no_physical_figure() -> None:
    fig = mark_diverged({**FIG, "phases": {"approach": 0.0, "capture": 7.0},
                         "interface_peak": {"force_N": 7.3e73, "moment_Nm": 1e70, "rig_force_N": 0.0},
                         "momentum_drift_Ns": 2.45e8},
                        {"service": "contact", "t": 38.012,
                         "reason": "topic 'payload/state', field 'quat_WT': not finite"})
    table = summary_table(fig, {"contact": {"steps": 38012, "overruns": 0}}, ok=False)
    assert _row(table, "DIVERGED").startswith("at t = 38.012 s in contact: topic 'payload/state'")
    assert _row(table, "phase: capture") == "from t =    7.00 s"
    assert "e+73" not in table and "peak interface" not in table and "momentum drift" not in table
    assert "interface_peak" not in fig and "momentum_drift_Ns" not in fig  # nor in summary.json


def test_a_refused_config_leaves_no_run_folder_behind(tmp_path):
    """``run`` validates once, before anything starts; the runs/<timestamp> folder made for the log goes again."""
    import subprocess
    import sys
    from pathlib import Path
    bad = tmp_path / "bad.toml"
    bad.write_text('[sim]\nduration = -1\n[services.logger]\nkind = "logger"\nrate_hz = 100\n')
    r = subprocess.run([sys.executable, str(Path(__file__).resolve().parents[1] / "launch.py"), "run", str(bad)],
                       capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert r.returncode == 2 and "sim.duration: expected >= 0, got -1" in r.stderr, r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.toml"]
