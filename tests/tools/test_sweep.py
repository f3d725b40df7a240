"""tools.sweep: the sweep file, a run from a snapshot, the parameters set at the window's start,
the table; sweeps on Dask (seeded, a worker killed, Ctrl-C, an external scheduler).

References: the uninterrupted run of the default scenario (snapshot), a run from t0 with the
parameter's value (transplant), the grapple fixture's axes computed here from the scenario's
poses (body changes), the run's own MCAP log read back by ``run_figures`` (figures from frames).
"""

from __future__ import annotations

import json
import math
import os
import pickle
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from errors import ConfigError, LifecycleError
from protocol.config import load
from protocol.logfile import decode_bodies
from protocol.scheduler import advance, restore, simulate, snapshot, start
from protocol.service import BoundModel
from tools import sweep as sw

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "configs" / "srms_berthing.toml"
TOY = ROOT / "configs" / "toy_chain4.toml"

CAPTURE = """
[sweep]
scenario = "{scenario}"
runs = {runs}
seed = 7
start = 6.0
end = {end}
require = {require}

[[parameter]]
name = "closing_rate"
body = "payload"
change = "velocity"
frame = "G"
axis = "-x"
unit = "m/s"
distribution = "uniform"
low = -0.01
high = 0.04

[[parameter]]
name = "lateral_offset"
body = "payload"
change = "position"
frame = "G"
axis = "y"
unit = "m"
distribution = "normal"
mean = 0.0
std = 0.06

[[parameter]]
name = "mass"
key = "payload.mass"
distribution = "truncnorm"
mean = 12000.0
std = 2000.0
low = 8000.0
high = 16000.0
"""


def _capture_sweep(tmp_path: Path, runs: int = 4, end: float = 7.2, name: str = "capture") -> Path:
    """The capture window of the default scenario: from 6 s (1 s before the capture command) to ``end``."""
    p = tmp_path / f"{name}.toml"
    p.write_text(_capture_text(runs, end))
    return p


def _capture_text(runs: int, end: float) -> str:
    require = '["capture", "rigidize"]' if end > 7.5 else '["capture"]'
    return CAPTURE.format(scenario=SCENARIO, runs=runs, end=end, require=require)


def _toy_sweep(tmp_path: Path, body: str, name: str = "toy") -> Path:
    p = tmp_path / f"{name}.toml"
    p.write_text(f'[sweep]\nscenario = "{TOY}"\n' + body)
    return p


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "BERTHSIM_NO_PROGRESS": "1"}


# ---------------------------------------------------------------- the sweep file
@pytest.mark.parametrize("text, problem", [
    ('runs = 0\n', "sweep.runs: expected a whole number >= 1"),
    ('runs = 2\nstart = 0.0105\n', "sweep.start: 0.0105 s is not a coupling instant"),
    ('runs = 2\nend = 0.0\n', "sweep.end: expected after sweep.start"),
    ('runs = 3\n[[parameter]]\nname = "k"\nkey = "toy.k[0]"\ndistribution = "grid"\nvalues = [1.0, 2.0]\n',
     "sweep.runs: 3 is not a whole multiple of the grid's 2 points"),
    ('runs = 2\n[[parameter]]\nname = "k"\nkey = "toy.q"\ndistribution = "uniform"\nlow = 1\nhigh = 2\n',
     "parameter 'k' = 1 (toy.q): services.m0: toy.q: unknown key"),
    ('runs = 2\n[[parameter]]\nname = "k"\nkey = "toy.k[9]"\ndistribution = "uniform"\nlow = 1\nhigh = 2\n',
     "parameter 'k'.key: toy.k[9]: no list item 9"),
    (('runs = 2\n[[parameter]]\nname = "k"\nkey = "toy.k[0]"\nbody = "payload"\ndistribution = "uniform"\n'
      'low = 1\nhigh = 2\n'), "give either key (a scenario value) or body"),
    (('runs = 2\n[[parameter]]\nname = "x"\nbody = "payload"\nchange = "position"\naxis = "y"\n'
      'distribution = "uniform"\nlow = 1\nhigh = 2\n'), "no service of the scenario publishes payload/state"),
    ('runs = 2\n[[parameter]]\nname = "ok"\nkey = "toy.k[0]"\ndistribution = "uniform"\nlow = 1\nhigh = 2\n',
     "parameter[0].name: 'ok' is a column of the table already"),
    ('runs = 2\nrequire = ["latched"]\n', "sweep.require: expected contact events"),
    ('runs = 2\nfigures = ["nothing.*"]\n', "sweep.figures: 'nothing.*' matches no figure"),
    ('runs = 2\n[set]\n"toy.nope[0]" = 1\n', "[set]: toy.nope[0]: not in the scenario"),
    ('runs = 100001\n', "sweep.runs: 100001 runs, more than 100000"),
    ('runs = 2\n[[parameter]]\nname = "k"\nkey = "toy.k[0]"\ndistribution = "grid"\nlow = 1\nhigh = 2\n'
     'n = 1000000000\n', "parameter 'k'.n: a grid of 1000000000 points, more than 100000"),
    ('runs = 2\n' + ''.join(f'[[parameter]]\nname = "k{i}"\nkey = "toy.k[0]"\ndistribution = "grid"\nlow = 1\n'
                             f'high = 2\nn = 1000\n' for i in range(2)),
     "[[parameter]]: the grid parameters span 1000000 points, more than 100000"),
])
def test_a_bad_sweep_file_is_refused_naming_the_key(tmp_path, text, problem):
    with pytest.raises(ConfigError) as e:
        sw.load_sweep(_toy_sweep(tmp_path, text))
    assert any(p.startswith(problem) or problem in p for p in e.value.problems), e.value.problems


def test_check_validates_a_sweep_file_and_the_shipped_one(tmp_path):
    ok = subprocess.run([sys.executable, str(ROOT / "launch.py"), "check",
                         str(ROOT / "configs" / "sweeps" / "capture_envelope.toml")],
                        check=False, capture_output=True, text=True, env=_env(), cwd=tmp_path, timeout=120)
    assert ok.returncode == 0, ok.stderr
    plan = json.loads(ok.stdout)
    assert plan["runs"] == 200 and plan["left_out"] == ["hil", "logger"] and len(plan["parameters"]) >= 3
    bad = _toy_sweep(tmp_path, 'runs = -1\n[[parameter]]\nname = "k"\nkey = "toy.k[0]"\ndistribution = "normal"\n')
    r = subprocess.run([sys.executable, str(ROOT / "launch.py"), "check", str(bad)], check=False,
                       capture_output=True, text=True, env=_env(), cwd=tmp_path, timeout=120)
    assert r.returncode == 2 and "sweep.runs" in r.stderr and "parameter 'k'.mean" in r.stderr, r.stderr


def test_the_runs_leave_out_the_rig_and_the_logger_and_their_tables():
    base, out = sw.sweep_config(load(SCENARIO), {"contact.alpha": 5.0})
    assert out == ("hil", "logger") and "hil" not in base and set(base["services"]) == {
        "orbiter", "arm", "contact", "operator"}
    assert base["contact"]["alpha"] == 5.0 and load(SCENARIO)["contact"]["alpha"] == 20.0
    cfg = {"a": {"b": [1.0, {"c": 2.0}]}}
    sw.set_key(cfg, "a.b[1].c", 0.5, add=True)
    sw.set_key(cfg, "a.b[0]", 3.0)
    sw.set_key(cfg, "a.d", 4.0)
    assert cfg == {"a": {"b": [3.0, {"c": 2.5}], "d": 4.0}} and sw.get_key(cfg, "a.b[1].c") == 2.5
    with pytest.raises(KeyError, match="no list item 2"):
        sw.set_key(cfg, "a.b[2]", 1.0)


# ---------------------------------------------------------------- snapshot of the default scenario
_CONTINUE = """
import pickle, sys
from protocol.scheduler import advance, restore
frames = []
advance(restore(open(sys.argv[1], "rb").read()), int(sys.argv[2]), frames.append)
open(sys.argv[3], "wb").write(pickle.dumps(frames))
"""


@pytest.mark.slow
def test_the_default_scenario_restored_at_6_5_s_in_another_process_continues_bit_identically(tmp_path):
    """Through the capture at 7 s and the rigidize at 7.5 s: every topic's messages, byte for byte."""
    base, _ = sw.sweep_config(load(SCENARIO), {})
    plan = sw.validate(base)
    coupling = {n: s.coupling_ns for n, s in plan.services.items()}
    t_s, t_end = 6_500_000_000, 7_600_000_000
    whole: list[bytes] = []
    simulate(sw.build_models(base), t_end, coupling=coupling, on_frame=whole.append)
    first: list[bytes] = []
    (tmp_path / "snap").write_bytes(snapshot(advance(start(sw.build_models(base), coupling=coupling), t_s,
                                                     first.append)))
    subprocess.run([sys.executable, "-c", _CONTINUE, str(tmp_path / "snap"), str(t_end), str(tmp_path / "rest")],
                   check=True, cwd=ROOT, env=_env(), timeout=120)
    rest = pickle.loads((tmp_path / "rest").read_bytes())

    def by_topic(frames):
        out: dict[bytes, list[bytes]] = {}
        for f in frames:
            i = f.index(b"\0")
            out.setdefault(f[:i], []).append(f[i + 1:])
        return out

    a, b = by_topic(whole), by_topic(first + rest)
    assert sorted(a) == sorted(b)
    for topic in a:
        assert a[topic] == b[topic], topic
    kinds = [e["kind"] for evs in decode_bodies("contact/event", a[b"contact/event"])["events"] for e in evs]
    assert kinds == ["capture", "rigidize"] and len(rest) > 500


# ---------------------------------------------------------------- parameters at the window's start
def test_a_scenario_value_is_set_at_the_start_exactly_or_refused(tmp_path):
    """contact.alpha (berthing guides) and payload.mass do not act before 0.5 s: a run from t0 with the value
    has the same state there; payload.inertia does (the payload's free rotation), and is refused."""
    text = _capture_text(2, 1.0).replace("start = 6.0", "start = 0.5")
    text += ('\n[[parameter]]\nname = "alpha"\nkey = "contact.alpha"\ndistribution = "uniform"\nlow = 5.0\n'
             'high = 60.0\n[[parameter]]\nname = "I_x"\nkey = "payload.inertia[0]"\nadd = true\n'
             'distribution = "uniform"\nlow = -2000.0\nhigh = 2000.0\n')
    (tmp_path / "w.toml").write_text(text)
    plan = sw.load_sweep(tmp_path / "w.toml")
    blob = sw.prefix(plan)
    names = plan.names
    assert sw.check_parameter(plan, blob, names.index("alpha"), 60.0) is None
    assert sw.check_parameter(plan, blob, names.index("mass"), 16000.0) is None
    why = sw.check_parameter(plan, blob, names.index("I_x"), 2000.0)
    assert why is not None and "acts before the window's start (t = 0.5 s)" in why, why
    assert re.search(r"\): (arm|contact|orbiter)('s context)?\.\w+ differs there$", why), why  # names what changed
    # what transplant did to the restored run: the models whose tables hold the changed keys (contact: payload.mass
    # and contact.alpha; the arm: payload.mass) built from the run's scenario, with the restored models' contexts
    got = restore(blob)
    before = {m.name: m.obj for m in got.models}
    contexts = {m.name: m.ctx for m in got.models}
    cfg = sw.run_config(plan, [0.0, 0.0, 16000.0, 60.0, 0.0], 1)
    done = sw.transplant(got, plan.base, cfg, sw.build_models(plan.base), sw.build_models(cfg))
    assert sorted(done) == ["arm: payload.mass", "contact: contact.alpha", "contact: payload.mass"], done
    after = {m.name: m.obj for m in got.models}
    assert after["orbiter"] is before["orbiter"] and after["contact"] is not before["contact"]
    assert after["arm"] is not before["arm"]
    # the replaced models go on with the run's contexts, the very objects
    assert all(m.ctx is contexts[m.name] for m in got.models) and contexts["arm"] is not None
    assert after["contact"].law.alpha == 60.0 and before["contact"].law.alpha != 60.0


def test_a_body_change_moves_the_payload_along_the_grapple_fixture_axes(tmp_path):
    from dynamics.spatial import pose_from_vector, quat_to_rotation
    plan = sw.load_sweep(_capture_sweep(tmp_path, runs=1, end=7.6))
    base = plan.base
    models = [BoundModel(m) for m in sw.build_models(base)]
    contact = next(m for m in models if m.name == "contact")
    before = contact.ctx.body
    sw.perturb(models, plan, [0.02, 0.05, 9000.0], base)  # closing rate, lateral offset; the mass is no body
    after = contact.ctx.body
    # G's axes in W from the scenario's poses: R_WG = R_WT R_TG
    R_WT = pose_from_vector(base["payload"]["X_WT"])[:3, :3]
    R_WG = R_WT @ pose_from_vector(base["payload"]["X_TG"])[:3, :3]
    assert np.allclose(quat_to_rotation(before.quat_WB), R_WT, atol=1e-12)
    assert np.allclose(after.p_WoBo_W - before.p_WoBo_W, 0.05 * R_WG[:, 1], atol=1e-15)
    assert np.allclose(after.v_WBo_W - before.v_WBo_W, -0.02 * R_WG[:, 0], atol=1e-15)
    assert np.array_equal(after.quat_WB, before.quat_WB) and np.array_equal(after.w_WB_B, before.w_WB_B)


def test_a_run_that_raises_or_diverges_is_a_row(tmp_path):
    plan = sw.load_sweep(_toy_sweep(tmp_path, 'runs = 2\nend = 0.5\n'
                                    '[set]\n"toy.fail_index" = 2\n'
                                    '[[parameter]]\nname = "fail_at"\nkey = "toy.fail_at"\ndistribution = "grid"\n'
                                    'values = [0.2, 5.0]\n'))
    rows = [sw.execute(plan, k) for k in range(2)]
    assert rows[0]["outcome"] == "error" and "injected failure at t=200000000 ns" in rows[0]["error"]
    assert rows[1]["outcome"] == "ok" and rows[1]["error"] is None and rows[1]["t_end_s"] == 0.5
    plan = sw.load_sweep(_toy_sweep(tmp_path, 'runs = 1\nend = 2.0\n[[parameter]]\nname = "k"\nkey = "toy.k[1]"\n'
                                    'distribution = "grid"\nvalues = [1e9]\n', "div"))
    row = sw.execute(plan, 0)
    assert row["outcome"] == "diverged" and "finite" in row["error"] and row["t_end_s"] < 2.0


# ---------------------------------------------------------------- sweeps on Dask
def _table(path: Path) -> list[dict]:
    return sw.read_table(path)


def _strip(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in sw.WALL_COLUMNS} for r in rows]


def _equal(a: list[dict], b: list[dict]) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if x.keys() != y.keys():
            return False
        for k in x:
            u, v = x[k], y[k]
            if not (u == v or (isinstance(u, float) and isinstance(v, float) and math.isnan(u) and math.isnan(v))):
                return False
    return True


@pytest.mark.slow
def test_seeded_sweeps_give_identical_tables_resume_and_rerun_one_run_with_its_log(tmp_path):
    """One worker or two, the same table apart from the wall-time columns; a longer sweep adds only its new
    runs; --rerun K writes K's log, whose figures (read back from the log) are the table's."""
    from tools.report import run_figures
    plan = sw.load_sweep(_capture_sweep(tmp_path))
    r1 = sw.run_sweep(plan, tmp_path / "one", workers=1)
    r2 = sw.run_sweep(plan, tmp_path / "two", workers=2)
    t1, t2 = _table(r1.table), _table(r2.table)
    assert r1.ran == r2.ran == 4 and [r["run"] for r in t1] == [0, 1, 2, 3]
    assert _equal(_strip(t1), _strip(t2))
    assert all(r["worker"].startswith("tcp://127.0.0.1:") and r["wall_s"] > 0 for r in t2)
    assert {r["outcome"] for r in t1} >= {"ok", "miss"}  # the dispersion reaches past the envelope
    # resume: the same sweep with 6 runs runs 2
    longer = sw.load_sweep(_capture_sweep(tmp_path, runs=6, name="capture"))
    assert longer.fingerprint == plan.fingerprint
    r3 = sw.run_sweep(longer, tmp_path / "one", workers=2)
    assert (r3.ran, r3.skipped) == (2, 4)
    t3 = _table(r3.table)
    assert _equal(_strip(t3[:4]), _strip(t1)) and len(t3) == 6
    # a different seed is another sweep: refused
    other = _capture_sweep(tmp_path, name="other")
    other.write_text(other.read_text().replace("seed = 7", "seed = 8"))
    with pytest.raises(ConfigError, match="made by a different sweep"):
        sw.run_sweep(sw.load_sweep(other), tmp_path / "one", workers=1)
    # --rerun K --log PATH: the same row; the figures from its log are those of the row
    k = next(r["run"] for r in t1 if r["outcome"] == "ok")
    log = tmp_path / "run.mcap"
    cli = subprocess.run([sys.executable, str(ROOT / "launch.py"), "sweep", str(_capture_sweep(tmp_path)),
                          "--out", str(tmp_path / "one"), "--rerun", str(k), "--log", str(log)],
                         check=False, capture_output=True, text=True, env=_env(), cwd=tmp_path, timeout=300)
    assert cli.returncode == 0, cli.stderr
    out = json.loads(cli.stdout.strip().splitlines()[-1])
    assert out["same_as_table"] is True, out
    fig = run_figures(log)
    row = t1[k]
    assert fig["phases"]["capture"] == row["phases.capture"] and fig["capture"]["v_rel_m_s"] == row["capture.v_rel_m_s"]
    assert fig["capture"]["lateral"] == row["capture.lateral"]
    assert max(fig["joint_peak_Nm"]) == row["joint_peak_Nm.max"]


@pytest.mark.slow
def test_a_sweep_with_a_worker_killed_finishes_and_reports_the_run(tmp_path):
    """The first time a row arrives, the worker that has just begun the run submitted after it is killed
    (SIGKILL): that run is a ``died`` row, every other run has its result, and resuming runs the died one
    again."""
    from distributed import Client
    plan = sw.load_sweep(_capture_sweep(tmp_path, runs=6, end=9.0))
    cluster = sw.local_cluster(2)
    client = Client(cluster)
    pids = client.run(os.getpid)
    killed: list[int] = []

    def run_number(key: object) -> int | None:
        k = str(key)
        return int(k.rsplit("-", 1)[1]) if k.startswith("berthsim-run-") else None

    def on_result(row):
        if killed:
            return
        # the victim is the worker of the run submitted just before this row: it has just begun, seconds from its
        # end (the other worker's run began with the first one and may be ending, its result already on its way).
        # That run may not have reached the scheduler yet: wait until a worker holds it (the sweep waits meanwhile)
        newest = max(n for k in client.futures if (n := run_number(k)) is not None)
        deadline = time.monotonic() + 30.0
        while time.monotonic() < deadline:
            held = {w: {run_number(k) for k in keys} - {None} for w, keys in client.processing().items() if w in pids}
            victim = next((w for w, runs in held.items() if newest in runs), None)
            if victim is not None:
                os.kill(pids[victim], signal.SIGKILL)
                killed.extend(held[victim])
                return
            time.sleep(0.01)

    try:
        res = sw.run_sweep(plan, tmp_path / "out", client=client, on_result=on_result)
    finally:
        client.close()
        cluster.close()
    rows = _table(res.table)
    assert [r["run"] for r in rows] == list(range(6)) and killed
    # the killed worker's runs (its running one, and one the scheduler may have queued behind it
    # on a loaded machine) are died rows, or were run again elsewhere; no other run is touched
    died = [r["run"] for r in rows if r["outcome"] == "died"]
    assert died and set(died) <= set(killed) and res.runs_with(["died"]) == died, \
        ([(r["run"], r["outcome"]) for r in rows], killed)
    assert all("KilledWorker" in rows[k]["error"] for k in died)
    assert all(r["outcome"] in ("ok", "miss") for r in rows if r["run"] not in died)
    # resuming runs the died runs again
    again = sw.run_sweep(plan, tmp_path / "out", workers=1)
    assert again.ran == len(died) and not again.runs_with(["died"])


@pytest.mark.slow
def test_ctrl_c_stops_the_sweep_with_the_table_so_far_and_the_same_command_resumes(tmp_path):
    runs = 8
    sweep = _capture_sweep(tmp_path, runs=runs, end=9.0)
    cmd = [sys.executable, str(ROOT / "launch.py"), "sweep", str(sweep), "--out", str(tmp_path / "out"),
           "--workers", "2", "--no-plots"]
    # as at a terminal: SIGINT at its default, whatever the test runner inherited (a shell's background job starts
    # with SIGINT ignored, and Python keeps an ignored SIGINT ignored: the Ctrl-C would never arrive)
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(), cwd=tmp_path,
                         start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    table = tmp_path / "out" / "runs.parquet"
    deadline = time.monotonic() + 120
    while not table.exists() and time.monotonic() < deadline and p.poll() is None:
        time.sleep(0.1)
    assert p.poll() is None, p.communicate()
    os.killpg(p.pid, signal.SIGINT)  # Ctrl-C at a terminal: the whole process group
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130, (out, err)
    assert "interrupted" in err
    n = len(_table(table))
    assert 1 <= n < runs
    again = subprocess.run(cmd, check=False, capture_output=True, text=True, env=_env(), cwd=tmp_path, timeout=300)
    assert again.returncode == 0, again.stderr
    assert f"({runs - n} run now, {n} from the table)" in again.stdout, again.stdout
    assert [r["run"] for r in _table(table)] == list(range(runs))


def _free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_a_sweep_on_an_external_scheduler_and_worker(tmp_path):
    """``dask scheduler`` and one ``dask worker`` as processes of their own (loopback), then
    ``launch.py sweep --scheduler``: 4 runs, all on that worker."""
    dask = str(Path(sys.executable).with_name("dask"))
    port = _free_port()
    url = f"tcp://127.0.0.1:{port}"
    procs = [subprocess.Popen([dask, "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=_env(), cwd=tmp_path)]
    try:
        procs.append(subprocess.Popen([dask, "worker", url, "--nthreads", "1", "--nworkers", "1", "--no-dashboard",
                                       "--host", "127.0.0.1", "--name", "far"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=_env(), cwd=tmp_path))
        r = subprocess.run([sys.executable, str(ROOT / "launch.py"), "sweep", str(_capture_sweep(tmp_path)),
                            "--scheduler", url, "--out", str(tmp_path / "out"), "--json"],
                           check=False, capture_output=True, text=True, env=_env(), cwd=tmp_path, timeout=300)
        assert r.returncode == 0, r.stderr
        rows = _table(tmp_path / "out" / "runs.parquet")
        assert len(rows) == 4 and len({x["worker"] for x in rows}) == 1
        assert rows[0]["worker"].startswith("tcp://127.0.0.1:") and all(x["outcome"] in ("ok", "miss") for x in rows)
        assert (tmp_path / "out" / "sweep.pdf").exists() and (tmp_path / "out" / "envelope.png").exists()
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()


@pytest.mark.slow
def test_a_rerun_writes_the_same_log_twice_and_another_run_a_different_one(tmp_path):
    """--rerun K --log twice: logs bit-identical but the wall clock (tests.compare_logs); run K' differs."""
    from tests.compare_logs import differences
    sweep = _toy_sweep(tmp_path, 'runs = 2\nend = 0.3\n[[parameter]]\nname = "k"\nkey = "toy.k[1]"\n'
                                 'distribution = "uniform"\nlow = 30.0\nhigh = 50.0\n')
    for k, name in ((0, "a"), (0, "b"), (1, "c")):
        r = subprocess.run([sys.executable, str(ROOT / "launch.py"), "sweep", str(sweep), "--rerun", str(k),
                            "--log", str(tmp_path / f"{name}.mcap")], check=False, capture_output=True, text=True,
                           env=_env(), cwd=tmp_path, timeout=120)
        assert r.returncode == 0, r.stderr
    assert differences(tmp_path / "a.mcap", tmp_path / "b.mcap") == []
    diff = differences(tmp_path / "a.mcap", tmp_path / "c.mcap")
    assert diff and all(d.startswith("toy/") for d in diff), diff


def test_a_rotation_about_the_grapple_fixture_turns_it_in_place(tmp_path):
    from dynamics.spatial import pose_from_vector, quat_to_rotation
    p = tmp_path / "roll.toml"
    p.write_text(f'[sweep]\nscenario = "{SCENARIO}"\nruns = 1\nstart = 6.0\nend = 7.2\n'
                 '[[parameter]]\nname = "roll"\nbody = "payload"\nchange = "rotation"\nframe = "G"\naxis = "x"\n'
                 'distribution = "uniform"\nlow = -0.1\nhigh = 0.1\n')
    plan = sw.load_sweep(p)
    models = [BoundModel(m) for m in sw.build_models(plan.base)]
    contact = next(m for m in models if m.name == "contact")
    X_TG = pose_from_vector(plan.base["payload"]["X_TG"])

    def X_WG(st):
        X = np.eye(4)
        X[:3, :3], X[:3, 3] = quat_to_rotation(st.quat_WB), st.p_WoBo_W
        return X @ X_TG

    before = X_WG(contact.ctx.body)
    sw.perturb(models, plan, [0.08], plan.base)
    after = X_WG(contact.ctx.body)
    assert np.allclose(after[:3, 3], before[:3, 3], atol=1e-12)          # G's origin stays
    assert np.allclose(after[:3, 0], before[:3, 0], atol=1e-12)          # its x axis too
    c, s = np.cos(0.08), np.sin(0.08)                                     # y turns about x by 0.08 rad
    assert np.allclose(after[:3, 1], c * before[:3, 1] + s * before[:3, 2], atol=1e-12)


def test_a_body_change_of_the_orbiter_moves_its_context_as_the_changed_scenario_starts_it(tmp_path):
    """The orbiter's state is its context's body: a velocity change along W's x and a position change along O's z
    (its frame at the start) give the body the scenario with ``v_WOo_W`` and ``X_WO`` changed by as much starts with."""
    from dynamics.spatial import pose_from_vector
    p = tmp_path / "orb.toml"
    p.write_text(f'[sweep]\nscenario = "{SCENARIO}"\nruns = 1\nend = 1.0\n'
                 '[[parameter]]\nname = "vx"\nbody = "orbiter"\nchange = "velocity"\naxis = "x"\n'
                 'distribution = "uniform"\nlow = -0.1\nhigh = 0.1\n'
                 '[[parameter]]\nname = "dz"\nbody = "orbiter"\nchange = "position"\nframe = "O"\naxis = "z"\n'
                 'distribution = "uniform"\nlow = -0.1\nhigh = 0.1\n')
    plan = sw.load_sweep(p)
    bound = [BoundModel(m) for m in sw.build_models(plan.base)]
    sw.perturb(bound, plan, [0.03, -0.05], plan.base)
    got = next(b for b in bound if b.name == "orbiter").ctx.body
    orb = dict(plan.base.get("orbiter", {}))
    X = orb.get("X_WO", [0.0] * 6)
    R_WO = pose_from_vector(X)[:3, :3]
    v = np.asarray(orb.get("v_WOo_W", [0.0] * 3), float) + [0.03, 0.0, 0.0]
    pos = pose_from_vector(X)[:3, 3] - 0.05 * R_WO[:, 2]
    changed = {**plan.base, "orbiter": {**orb, "v_WOo_W": v.tolist(), "X_WO": [*pos.tolist(), *X[3:]]}}
    ref = next(m for m in sw.build_models(changed) if m.name == "orbiter").new_context().body
    assert np.allclose(got.v_WBo_W, ref.v_WBo_W, atol=1e-15) and np.allclose(got.p_WoBo_W, ref.p_WoBo_W, atol=1e-12)
    assert np.allclose(got.quat_WB, ref.quat_WB, atol=1e-15) and np.array_equal(got.w_WB_B, ref.w_WB_B)
    assert not np.allclose(got.v_WBo_W, next(b for b in bound if b.name == "orbiter").new_context().body.v_WBo_W)
    with pytest.raises(LifecycleError, match=r"orbiter's state is its context: pass the run's members or the models "
                                             r"bound to their contexts"):
        sw.perturb(sw.build_models(plan.base), plan, [0.03, -0.05], plan.base)  # bare models: no context to set
