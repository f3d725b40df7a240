"""Config validation (pure: nothing is started) and the launch.py check / keys commands."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from errors import ConfigError
from protocol.bus import LAUNCHER
from protocol.config import peers_of, validate, with_overrides

ROOT = Path(__file__).resolve().parents[2]

TOY = {"mass": [1.0, 4.0], "k": [40.0], "rest": [1.0], "x0": [0.0, 1.1], "v0": [0.0, 0.0]}


def cfg(**sim):
    return {"sim": dict(sim), "toy": dict(TOY),
            "services": {"a": {"kind": "testkit.toys", "rate_hz": 1000, "index": 0},
                         "b": {"kind": "testkit.toys", "rate_hz": 100, "index": 1}}}


def problems(c, **kw):
    with pytest.raises(ConfigError) as ei:
        validate(c, **kw)
    return ei.value.problems


def test_valid_plan():
    plan = validate(cfg(duration=1.5))
    assert plan.base_tick_ns == 1_000_000 and plan.longest_period_ns == 10_000_000
    assert plan.duration_ns == 1_500_000_000 and plan.sim["mode"] == "lockstep"
    assert {n: s.period_ns for n, s in plan.services.items()} == {"a": 1_000_000, "b": 10_000_000}
    assert plan.sim["max_lag"] == 2.0  # realtime: the default bound on falling behind the wall clock


def test_max_lag_must_not_be_negative():
    assert "sim.max_lag: expected >= 0, got -0.5" in problems(cfg(max_lag=-0.5))
    assert validate(cfg(max_lag=0)).sim["max_lag"] == 0  # 0: no bound


def test_every_problem_listed_at_once():
    c = cfg(mode="fast", duration="1", bogus=1)
    c["services"]["a"]["colour"] = "red"
    c["services"]["b"]["rate_hz"] = 3
    c["services"]["c"] = {"kind": "no.such.module", "rate_hz": 10}
    c["services"][LAUNCHER] = {"kind": "testkit.toys", "rate_hz": 100, "index": 1}
    c["stray"] = {"x": 1}
    c["toy"]["k"] = [1.0, 2.0]
    p = "\n".join(problems(c))
    for needle in ("sim.mode: expected one of", "sim.duration: expected", "sim.bogus: unknown key",
                   "services.a.colour: unknown key", "b.rate_hz: 3 Hz", "services.c.kind: kind 'no.such.module'",
                   f"services.{LAUNCHER}: name", "[stray]: unclaimed", "services.a: toy.k: expected 1 values"):
        assert needle in p, (needle, p)


def test_transport_and_endpoints():
    assert any("missing endpoint" in p for p in problems(cfg(transport="tcp")))
    assert any("does not match transport" in p for p in problems(cfg(transport="ipc", bus="tcp://127.0.0.1:5550")))
    assert any("not loopback" in p for p in problems(cfg(transport="tcp", bus="tcp://10.1.2.3:5550")))
    c = cfg(transport="tcp", bus="tcp://127.0.0.1:5550")
    c["services"]["b"]["endpoint"] = "tcp://10.9.9.9:6000"
    assert any("services.b.endpoint" in p and "not loopback" in p for p in problems(c))
    c["services"]["b"]["endpoint"] = "tcp://127.0.0.1:6000"
    plan = validate(c)
    assert peers_of(plan.config, "tcp://127.0.0.1:5550") == {
        LAUNCHER: "tcp://127.0.0.1:5551", "a": "tcp://127.0.0.1:5552", "b": "tcp://127.0.0.1:6000"}


def test_hosts_table_gives_endpoints(tmp_path):
    c = cfg(transport="tcp", bus="tcp://127.0.0.1:5550", hosts={"a": "127.0.0.1", "b": "127.0.0.2"})
    c["services"]["a"]["host"] = "a"
    c["services"]["b"]["host"] = "b"
    plan = validate(c)
    assert peers_of(plan.config, plan.sim["bus"]) == {
        LAUNCHER: "tcp://127.0.0.1:5551", "a": "tcp://127.0.0.1:5552", "b": "tcp://127.0.0.2:5553"}
    del c["sim"]["hosts"]
    assert any("sim.hosts: services on several hosts (a, b)" in p for p in problems(c))
    c["sim"]["hosts"] = {"a": "127.0.0.1", "b": "127.0.0.2"}
    c["services"]["b"]["host"] = "zz"
    assert any("services.b.host: 'zz' not in sim.hosts" in p for p in problems(c))
    c["services"]["b"]["host"] = "b"
    c["sim"]["hosts"]["b"] = "10.0.0.2"
    assert any("services.b.endpoint" in p and "not loopback" in p for p in problems(c))


def test_missing_keys_named(tmp_path):
    c = cfg(transport="tcp", bus="tcp://127.0.0.1:5550")
    c["security"] = {"keys_dir": str(tmp_path)}
    assert any("server.key_secret" in p and "not found" in p for p in problems(c))


def test_overrides_and_only():
    plan = validate(cfg(), overrides={"mode": "realtime", "speed": None})
    assert plan.sim["mode"] == "realtime" and plan.sim["speed"] == 0.0
    assert with_overrides({"sim": {"a": 1}}, {"a": 2, "b": None}) == {"sim": {"a": 2}}
    assert any("--only: unknown services zz" in p for p in problems(cfg(), only=("a", "zz")))


def test_check_and_keys_commands(tmp_path):
    r = subprocess.run([sys.executable, str(ROOT / "launch.py"), "check", str(ROOT / "configs" / "toy_spring.toml")],
                       capture_output=True, text=True, timeout=30, cwd=ROOT)
    assert r.returncode == 0 and json.loads(r.stdout)["services"]["b"]["period_ns"] == 10_000_000
    r = subprocess.run([sys.executable, str(ROOT / "launch.py"), "keys", str(tmp_path / "k"), "--names", "s,c1"],
                       capture_output=True, text=True, timeout=30, cwd=ROOT)
    assert r.returncode == 0 and sorted(p.name for p in (tmp_path / "k").iterdir()) == [
        "c1.key", "c1.key_secret", "s.key", "s.key_secret"]
    r = subprocess.run([sys.executable, str(ROOT / "launch.py"), "check", str(tmp_path / "none.toml")],
                       capture_output=True, text=True, timeout=30, cwd=ROOT)
    assert r.returncode == 2 and "cannot read" in r.stderr


# ---------------------------------------------------------------- limits checked before anything starts
def test_times_seed_and_timeouts_are_checked_before_anything_starts():
    assert problems(cfg(duration=1e12)) == ["sim.duration: 1000000000000.0 s is beyond int64 ns (at most 9.223e+09 s)"]
    assert problems(cfg(seed=2**64)) == [f"sim.seed: expected an unsigned 64-bit int (0 … 2**64 - 1), got {2**64}"]
    assert problems(cfg(seed=-1))[0].startswith("sim.seed:")
    assert validate(cfg(seed=2**64 - 1)).sim["seed"] == 2**64 - 1
    for key in ("ready_timeout", "heartbeat_timeout", "stats_period"):
        assert problems(cfg(**{key: 0})) == [f"sim.{key}: expected > 0, got 0"]
    assert problems(cfg(max_lag=1e300)) == ["sim.max_lag: 1e+300 s is beyond int64 ns (at most 9.223e+09 s)"]
    c = cfg(duration=9_223_372_036.854)  # a whole number of ns within int64, but the run would end a period later
    assert any("the run would end at" in p for p in problems(c))
    c = cfg()
    c["services"]["b"]["rate_hz"] = 1e-12
    assert any("1e-12 Hz has a period of 1e+21 ns, beyond int64" in p for p in problems(c))


def test_two_producers_of_one_topic_are_refused_naming_both():
    c = cfg()
    c["services"]["b"]["index"] = 0  # b now integrates mass 0 too: toy/state0 and toy/spring0 twice
    assert problems(c) == ["services.b: 'toy/state0', 'toy/spring0' also produced by services.a (one producer per "
                           "topic)"]


def _load_problem(path) -> str:
    from protocol.config import load
    with pytest.raises(ConfigError) as ei:
        load(path)
    (p,) = ei.value.problems
    return p


def test_load_reads_regular_utf8_files_only(tmp_path):
    import os
    import threading

    bad = tmp_path / "latin1.toml"
    bad.write_bytes(b"[sim]\nduration = 1.0\n# caf\xe9\n")
    assert _load_problem(bad) == f"config {str(bad)!r}: not UTF-8: byte 0xe9 at line 3, offset 26"
    assert _load_problem("/dev/zero") == "config '/dev/zero': not a regular file (a device)"
    assert _load_problem(tmp_path) == f"config {str(tmp_path)!r}: not a regular file (a directory)"
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got: list[str] = []
    th = threading.Thread(target=lambda: got.append(_load_problem(fifo)), daemon=True)
    th.start()
    th.join(5.0)  # opening a FIFO for reading would wait for a writer forever
    assert got == [f"config {str(fifo)!r}: not a regular file (a FIFO)"]


# ---------------------------------------------------------------- limits on what a file can ask for
def test_nesting_and_array_sizes_are_bounded_and_named(tmp_path):
    """A TOML nested 4,000 deep (before: a RecursionError escaped, naming no file), nested 17
    deep (parsed, refused by the limit), an array of 10⁶ items (before: a 5 MB problem line)."""
    from protocol.config import MAX_ARRAY, MAX_DEPTH
    deep = tmp_path / "deep.toml"
    deep.write_text("x = " + "[" * 4000 + "]" * 4000 + "\n")
    assert _load_problem(deep) == f"config {str(deep)!r}: nested deeper than {MAX_DEPTH} levels (tables and arrays)"
    d17 = tmp_path / "d17.toml"
    d17.write_text("[a.b]\nc = " + "[" * 16 + "]" * 16 + "\n")
    assert _load_problem(d17).startswith(f"config {str(d17)!r}: a.b.c")
    big = tmp_path / "big.toml"
    big.write_text("[orbiter]\ninertia = [" + ", ".join(["1.0"] * (MAX_ARRAY + 1)) + "]\n")
    assert _load_problem(big) == (f"config {str(big)!r}: orbiter.inertia: an array of {MAX_ARRAY + 1} items, "
                                  f"more than {MAX_ARRAY}")


def test_a_long_value_is_quoted_short():
    from protocol.config import MAX_PROBLEM_CHARS, MAX_VALUE_CHARS, check_value
    line = check_value("orbiter.inertia", [1.0] * 90_000, "inertia")
    assert line is not None and line.startswith("orbiter.inertia: expected 3 principal moments or 3×3 rows")
    assert len(line) < 80 + MAX_VALUE_CHARS and "..." in line
    c = cfg()
    c["toy"]["k"] = ["x" * 100_000]
    assert all(len(p) <= MAX_PROBLEM_CHARS for p in problems(c))


def test_ipc_endpoint_paths_must_fit_a_unix_socket_address(tmp_path, monkeypatch):
    """The run's real socket paths (the launcher's directory under $TMPDIR, or sim.bus) against
    the 107 bytes of sun_path (before: check passed, run exited 1 'File name too long')."""
    import tempfile
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)  # $TMPDIR read again
    base = len(str(tmp_path)) + len("/berthsim-xxxxxxxx/bus.") + len(".pub")
    fits = "b" * (107 - base)
    c = cfg()
    c["services"][fits] = c["services"].pop("b")
    validate(c)
    c["services"][fits + "b"] = c["services"].pop(fits)
    (p,) = problems(c)
    assert p == (f"services.{fits}b: its ipc endpoint path is 108 bytes, more than the 107 of a Unix socket path "
                 f"(here names of at most {len(fits)} bytes fit)")
    long_bus = cfg(bus="ipc://" + str(tmp_path / ("x" * 100)))
    assert any(p.startswith("sim.bus: its ipc endpoint path is") for p in problems(long_bus))
    group = cfg(processes={"g" * 120: ["a", "b"]})
    assert any(p.startswith(f"sim.processes.{'g' * 120}: its ipc endpoint path") for p in problems(group))
    assert validate(cfg(transport="inproc", processes={"g" * 120: ["a", "b"]}))  # no socket file
    given = cfg()
    given["services"]["b"]["endpoint"] = "ipc://" + str(tmp_path / ("e" * 120))
    assert any(p.startswith("services.b.endpoint: its ipc endpoint path is") for p in problems(given))


def test_timing_relations_and_empty_groups():
    assert ("sim.freeze_park_after: expected < sim.freeze_stop_after (5.0 s), got 9.0 s (the rig would not park "
            "before the run stops)") in problems(cfg(freeze_park_after=9.0, freeze_stop_after=5.0))
    validate(cfg(freeze_park_after=9.0, freeze_stop_after=0.0))  # 0: waits for the operator
    assert "sim.processes.g: an empty process group (name its services, or remove it)" in problems(
        cfg(processes={"g": []}))


def test_only_the_shipped_kinds_are_registered():
    from protocol.config import KINDS, registered_kind, service_module
    for kind in KINDS:
        service_module(kind)  # each imports and is a service module
    assert registered_kind("contact", "x") is None
    assert registered_kind("os.path", "x") == (f"x: kind 'os.path' is not a service kind berthsim ships "
                                               f"({', '.join(KINDS)})")


def test_the_run_plan_goes_to_the_workers_as_one_file_only_its_user_can_read(tmp_path):
    """write_plan/read_plan: the launcher's validated plan, as it is, mode 0600; anything else is refused by name."""
    import pickle
    import stat

    from protocol.config import read_plan, write_plan
    plan = validate(cfg(), overrides={"mode": "realtime"})
    path = write_plan(plan, tmp_path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    back = read_plan(path)
    assert back.config == plan.config and back.services == plan.services and back.sim["mode"] == "realtime"
    with pytest.raises(ConfigError, match="cannot write"):
        write_plan(plan, tmp_path)  # never replaced
    other = tmp_path / "other.pickle"
    other.write_bytes(pickle.dumps({"services": {}}))
    with pytest.raises(ConfigError, match=r"other\.pickle'.* holds a dict, not a RunPlan"):
        read_plan(other)
    junk = tmp_path / "junk.pickle"
    junk.write_bytes(b"not a pickle")
    with pytest.raises(ConfigError, match=r"junk\.pickle'.*cannot read"):
        read_plan(junk)
