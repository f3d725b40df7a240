"""Probes at the boundaries, as a hostile or careless user would try them (real processes).

- Every bad input is refused before anything starts, with exit code 2 and one line on
  stderr naming the key (or the file), never a traceback or a hang: config files that are
  not regular UTF-8 files, times beyond int64 ns, a seed beyond u64, a zero timeout, two
  producers of a topic, log paths that are directories, exist or are shared, replay
  windows and rates.
- A second writer of a log is refused; the first run's log stays whole.
- A DEALER calling itself a follower launcher is ignored and counted.
- Well-formed samples that are not the run's (another sender, a wrong period, off the
  coupling grid, before the start or after the end, a sequence number beyond the instants)
  are dropped and counted by their consumer and by the logger, and change nothing.
- An ipc endpoint that a live run serves is refused; a run leaves no socket files.
- A lossy rig link in lockstep is bounded and reported.
- Limits on everything a file can ask for, checked before anything starts (exit 2, one line
  naming the key and the limit): sweep runs and grids (a 10⁹-point grid refused in well
  under 200 MB, nothing materialised), ipc socket paths of service and process-group names,
  TOML nesting and array sizes, freeze_park_after before freeze_stop_after, replay rates,
  empty process groups, the sweep's scheduler URL.
- Log tools on valid MCAP with foreign content: channels that are not berthsim's are
  skipped and counted by name; a malformed config.json is one line naming it; --resim never
  imports a module the log names.
- A killed log writer stops the run with its cause named; two runs logging into one
  directory keep their own summary; a frame larger than the bus takes is never allocated.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from protocol.bus import ControlClient
from protocol.codec import decode, encode
from protocol.logfile import open_log
from services.logger import McapLogger
from testkit.toys import FORGERY_KINDS  # (also registers the toy topics)
from tests.compare_logs import differences

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[1]
LAUNCH = ROOT / "launch.py"
ENV = {**os.environ, "BERTHSIM_NO_PROGRESS": "1", "PYTHONPATH": str(ROOT)}
ENV.pop("BERTHSIM_TRACEBACK", None)


def toys(tmp: Path, *, sim: str = "duration = 0.2", extra: str = "", name: str = "c.toml", b_index: int = 1) -> Path:
    """A two-mass toy run (two services, optionally more in ``extra``)."""
    p = tmp / name
    p.write_text(f"""[sim]
{sim}
[services.a]
kind = "testkit.toys"
rate_hz = 1000
index = 0
[services.b]
kind = "testkit.toys"
rate_hz = 100
index = {b_index}
{extra}
[toy]
mass = [1.0, 4.0]
k = [40.0]
rest = [1.0]
x0 = [0.0, 1.1]
v0 = [0.0, 0.0]
""")
    return p


LOGGER = '[services.logger]\nkind = "logger"\nrate_hz = 1000\n'


def launch(*args: str | Path, timeout: float = 60.0, cwd: Path | None = None) -> tuple[int, str, str]:
    p = subprocess.run([sys.executable, str(LAUNCH), *map(str, args)], capture_output=True, text=True,
                       timeout=timeout, cwd=cwd or ROOT, env=ENV)
    return p.returncode, p.stdout, p.stderr


def start(*args: str | Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(LAUNCH), *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT, env=ENV)


def refused(rc: int, err: str, needle: str) -> None:
    """Exit 2 and exactly one line on stderr, which holds ``needle``."""
    lines = [x for x in err.splitlines() if x.strip()]
    assert rc == 2 and len(lines) == 1 and needle in lines[0], (rc, err)


@pytest.fixture(scope="module")
def toy_log(tmp_path_factory) -> Path:
    """A 1 s log of toy/state0 at 100 Hz, to replay."""
    path = tmp_path_factory.mktemp("log") / "toy.mcap"
    lg = McapLogger(path)
    for i in range(101):
        lg.on_message("toy/state0", encode("toy/state0", {"x": 0.0, "v": 0.0}, sender="a", seq=i, t_ns=i * 10**7,
                                           h_ns=10**7))
    lg.close()
    return path


def _bad_input(case: str, tmp: Path, toy_log: Path) -> tuple[list[str | Path], str]:
    """The command line of a probe and what its one line must say."""
    if case == "non-UTF-8 config":
        p = toys(tmp)
        p.write_bytes(p.read_bytes().replace(b"duration = 0.2", b"duration = 0.2 # caf\xe9"))
        return ["check", p], "not UTF-8: byte 0xe9 at line 2"
    if case == "duration beyond int64 ns":
        return ["check", toys(tmp, sim="duration = 1e12")], "sim.duration: 1000000000000.0 s is beyond int64 ns"
    if case == "--duration beyond int64 ns":
        return ["run", toys(tmp), "--duration", "1e10"], "sim.duration: 10000000000.0 s is beyond int64 ns"
    if case == "seed beyond u64":
        return ["check", toys(tmp, sim="seed = 18446744073709551616")], "sim.seed: expected an unsigned 64-bit int"
    if case == "period beyond int64 ns":
        p = toys(tmp)
        p.write_text(p.read_text().replace("rate_hz = 100\n", "rate_hz = 1e-12\n"))
        return ["check", p], "b.rate_hz: 1e-12 Hz has a period of 1e+21 ns, beyond int64"
    if case == "/dev/zero":
        return ["check", "/dev/zero"], "config '/dev/zero': not a regular file (a device)"
    if case == "a FIFO":
        os.mkfifo(tmp / "fifo")
        return ["check", tmp / "fifo"], "not a regular file (a FIFO)"
    if case == "ready_timeout = 0":
        return ["check", toys(tmp, sim="ready_timeout = 0")], "sim.ready_timeout: expected > 0, got 0"
    if case == "two producers of a topic":
        return ["check", toys(tmp, b_index=0)], "services.b: 'toy/state0', 'toy/spring0' also produced by services.a"
    if case == "log path a directory":
        return ["run", toys(tmp, extra=LOGGER), "--log", tmp], "is a directory"
    if case == "log path exists":
        (tmp / "old.mcap").write_bytes(b"keep")
        return ["run", toys(tmp, extra=LOGGER), "--log", tmp / "old.mcap"], "exists (launch.py run --overwrite"
    if case == "two loggers on one path":
        extra = LOGGER + LOGGER.replace("logger]", "logger2]")
        return ["run", toys(tmp, extra=extra), "--log", tmp / "x.mcap"], "is also written by services.logger"
    if case == "replay --rate -1":
        return ["replay", toy_log, "--rate", "-1"], "services.replay.rate (--rate): expected 0 (as fast as possible)"
    if case == "replay --rate 1e-9":
        return ["replay", toy_log, "--rate", "1e-9"], ("services.replay.rate (--rate): expected 0 (as fast as "
                                                       "possible) or within [0.001, 1000], got 1e-09")
    if case == "sweep runs = 10⁹":
        return ["check", _sweep(tmp, "runs = 1000000000\n")], "sweep.runs: 1000000000 runs, more than 100000"
    if case == "sweep --scheduler foo://bar":
        return (["sweep", _sweep(tmp, "runs = 2\n"), "--scheduler", "foo://bar"],
                "--scheduler 'foo://bar': expected SCHEME://HOST:PORT with a scheme among tcp, tls")
    if case == "a service name beyond the ipc path limit":
        p = toys(tmp)
        p.write_text(p.read_text().replace("[services.b]", f"[services.{'b' * 110}]"))
        return ["check", p], f"services.{'b' * 110}: its ipc endpoint path is"
    if case == "a process group name beyond the ipc path limit":
        g = "g" * 110
        return (["run", toys(tmp, sim=f'duration = 0.2\nprocesses = {{{g} = ["a", "b"]}}')],
                f"sim.processes.{g}: its ipc endpoint path is")
    if case == "TOML nested 4,000 deep":
        p = toys(tmp)
        p.write_text(p.read_text() + "deep = " + "[" * 4000 + "]" * 4000 + "\n")
        return ["check", p], "nested deeper than 16 levels"
    if case == "a 10⁶-element orbiter.inertia":
        p = toys(tmp)
        p.write_text(p.read_text() + "[orbiter]\ninertia = [" + ", ".join(["1.0"] * 1_000_000) + "]\n")
        return ["check", p], "orbiter.inertia: an array of 1000000 items, more than 100000"
    if case == "freeze_park_after after freeze_stop_after":
        return (["check", toys(tmp, sim="freeze_park_after = 9.0\nfreeze_stop_after = 5.0")],
                "sim.freeze_park_after: expected < sim.freeze_stop_after (5.0 s), got 9.0 s")
    if case == "an empty process group":
        return (["check", toys(tmp, sim="processes = {g = []}")],
                "sim.processes.g: an empty process group")
    if case == "replay empty window":
        return ["replay", toy_log, "--start", "0.8", "--end", "0.5"], "the window [0.8, 0.5] s is empty"
    if case == "replay --end inf":
        return ["replay", toy_log, "--end", "inf"], "services.replay.end: expected a finite int or float, got inf"
    raise AssertionError(case)


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def _sweep(tmp: Path, body: str) -> Path:
    """A sweep file of the two-mass toy run (:func:`toys`)."""
    toys(tmp, name="base.toml")
    p = tmp / "sweep.toml"
    p.write_text('[sweep]\nscenario = "base.toml"\n' + body)
    return p


BAD_INPUTS = ["non-UTF-8 config", "duration beyond int64 ns", "--duration beyond int64 ns", "seed beyond u64",
              "period beyond int64 ns", "/dev/zero", "a FIFO", "ready_timeout = 0", "two producers of a topic",
              "log path a directory", "log path exists", "two loggers on one path", "replay --rate -1",
              "replay empty window", "replay --end inf",
              # limits on what a file can ask for (issue 31); before: accepted, or exit 1 with a traceback's line
              "replay --rate 1e-9", "sweep runs = 10⁹", "sweep --scheduler foo://bar",
              "a service name beyond the ipc path limit", "a process group name beyond the ipc path limit",
              "TOML nested 4,000 deep", "a 10⁶-element orbiter.inertia", "freeze_park_after after freeze_stop_after",
              "an empty process group"]


@pytest.mark.parametrize("case", BAD_INPUTS)
def test_bad_input_is_refused_with_exit_2_and_one_line_naming_it(case, tmp_path, toy_log):
    args, needle = _bad_input(case, tmp_path, toy_log)
    rc, _, err = launch(*args, timeout=30)  # a FIFO used to hang here; /dev/zero to exhaust memory
    refused(rc, err, needle)
    assert len(err) < 400  # (a 10⁶-element array's problem was a 5 MB line)
    if case == "log path exists":
        assert (tmp_path / "old.mcap").read_bytes() == b"keep"


def test_a_second_writer_of_a_log_is_refused_and_the_first_log_stays_whole(tmp_path):
    # the first run lasts 6 s of wall time: the two refused launches (a Python process each) start and end within
    # it on a loaded host too (with 2 s, the first run had ended before the second launch under a load of 6)
    cfg = toys(tmp_path, sim="duration = 6.0\nspeed = 1.0", extra=LOGGER)
    log = tmp_path / "run.mcap"
    first = start("run", cfg, "--log", log)
    try:
        end = time.monotonic() + 30
        while not log.exists() and time.monotonic() < end:
            time.sleep(0.05)
        for extra in ((), ("--overwrite",)):
            rc, _, err = launch("run", cfg, "--log", log, *extra)
            refused(rc, err, "is being written by another run")
        out, err = first.communicate(timeout=60)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == 0, err
    with open_log(log) as lg:  # before: both runs wrote the file; both exited 1 with "corrupt MCAP"
        seqs = [m.seq for m in lg.messages(["toy/state0"])]
    assert seqs == list(range(6001))


def test_a_live_ipc_run_keeps_its_endpoints_and_ignores_a_forged_follower(tmp_path):
    """A second run, and a replay, on a live run's ipc endpoints are refused (before: they took
    them over silently); a DEALER calling itself follower:x and reporting a death is ignored and
    counted (before: the run stopped with exit 1); no socket file is left behind."""
    bus = tmp_path / "bus"
    cfg = toys(tmp_path, sim=f'duration = 2.0\nspeed = 1.0\nbus = "ipc://{bus}"')
    live = start("run", cfg, "--json")
    try:
        end = time.monotonic() + 30
        while not Path(f"{bus}.b.pub").exists() and time.monotonic() < end:
            time.sleep(0.05)
        with ControlClient(f"ipc://{bus}", "follower:x") as forger:
            forger.send({"op": "died", "name": "a", "reason": "forged"})
            rc, _, err = launch("run", toys(tmp_path, name="d.toml", sim=f'duration = 0.2\nbus = "ipc://{bus}"'))
            refused(rc, err, f"ipc endpoint '{bus}.ctl' is served by another live run")
            forger.send({"op": "died", "name": "b", "reason": "forged"})
            out, err = live.communicate(timeout=60)
    finally:
        if live.poll() is None:
            live.kill()
    assert live.returncode == 0, err
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["control_ignored"] == {"follower:x": 2}
    assert "ignored a control message from 'follower:x'" in err
    assert list(tmp_path.glob("bus*")) == []  # no socket file left
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # what a killed run leaves: nobody listens
    stale.bind(f"{bus}.ctl")
    stale.close()
    rc, _, err = launch("run", toys(tmp_path, name="e.toml", sim=f'duration = 0.2\nbus = "ipc://{bus}"'))
    assert rc == 0, err
    assert list(tmp_path.glob("bus*")) == []


FORGER = """[services.forger]
kind = "testkit.toys"
rate_hz = 1000
role = "forger"
forge = "toy/state1"
producer = "b"
forge_hz = 100
"""


def test_forged_samples_are_dropped_counted_and_not_logged_and_change_nothing(tmp_path):
    """Well-formed, finite forgeries of b's toy/state1 (coupled at 100 Hz): copies in another
    sender's name with x moved by 5 m, and in b's name a period of 1e15 ns, a time off the grid,
    t = -5 ns, seq = 10⁶, a time after the end (before: the consumer took them, the run still
    exited 0, and the log held them with a bogus loss count). Every one is dropped and counted
    by the consumer and by the logger; the data topics are bit-identical to a clean run's."""
    runs = {}
    for label, extra in (("clean", LOGGER), ("forged", LOGGER + FORGER)):
        d = tmp_path / label
        d.mkdir()
        rc, out, err = launch("run", toys(d, extra=extra), "--json", "--log", d / "run.mcap")
        assert rc == 0, err
        runs[label] = (d / "run.mcap", json.loads(out.strip().splitlines()[-1]), err)
    (clean, _, _), (forged, summary, err) = runs["clean"], runs["forged"]
    assert differences(clean, forged) == []
    n = 20 + FORGERY_KINDS
    a, b = summary["services"]["a"], summary["services"]["b"]
    assert a["msgs_invalid"] == n and a["msgs_dropped"] == 0  # the consumer of toy/state1
    assert b["msgs_invalid"] == 0 and b["msgs_dropped"] == 0
    assert "[a] dropped a sample of 'toy/state1'" in err
    with open_log(forged) as lg:
        close = lg.metadata()["berthsim.close"]
        assert {decode("toy/state1", m.payload).sender for m in lg.messages(["toy/state1"])} == {"b"}
    assert close["rejected"] == str(n) and close["rejected.toy/state1"] == str(n)
    assert close["lost"] == "0" and close["negative_t_ns"] == "0"


@pytest.mark.slow
def test_a_lossy_rig_link_in_lockstep_is_bounded_and_reported(tmp_path):
    """The berthing scenario with bit errors and drops on the rig link: each rejected frame
    costs a resend, not reply_timeout (1 s), and the end-of-run table reports them."""
    text = (ROOT / "configs" / "srms_berthing.toml").read_text()
    cfg = _write(tmp_path / "lossy.toml", text.replace("[hil.emulator]\n", "[hil.emulator]\nbit_error = 0.001\n"
                                                                          "drop = 0.001\n", 1))
    t0 = time.monotonic()
    rc, out, err = launch("run", cfg, "--duration", "3", "--log", tmp_path / "run.mcap", "--no-report", timeout=300)
    wall = time.monotonic() - t0
    assert rc == 0, err
    rig = json.loads((tmp_path / "run.summary.json").read_text())["rig"]
    assert rig["rig_rejected"] >= 20 and rig["resent"] >= rig["rig_rejected"] - 5 and rig["replies_missed"] == 0
    assert f"rejected by the rig {rig['rig_rejected']}, resent {rig['resent']}" in out  # the table
    assert wall < 0.5 * rig["rig_rejected"] * 1.0  # before: every rejected frame waited reply_timeout (1 s)


# ---------------------------------------------------------------- issue 31: limits, foreign logs, smaller items
def test_check_refuses_a_sweep_grid_of_a_billion_points_without_making_it(tmp_path):
    """Before: check allocated the grid (16.5 GB in 60 s on a 23 GB host; here, under a 3 GiB
    address-space limit, exit 1 with a MemoryError). After: exit 2, one line, well under 200 MB."""
    import resource

    sweep = _sweep(tmp_path, 'runs = 2\n[[parameter]]\nname = "k"\nkey = "toy.k[0]"\ndistribution = "grid"\n'
                             'low = 1.0\nhigh = 2.0\nn = 1000000000\n')

    def limit() -> None:  # the old behaviour must not take the shared machine's memory
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))

    hwm = tmp_path / "hwm"
    # launch.py check, then its own peak resident memory (VmHWM: this process's, not inherited like ru_maxrss)
    wrapper = (f"import runpy, sys\nsys.argv = [{str(LAUNCH)!r}, 'check', {str(sweep)!r}]\ntry:\n"
               f"    runpy.run_path(sys.argv[0], run_name='__main__')\nfinally:\n"
               f"    open({str(hwm)!r}, 'w').write(next(x.split()[1] for x in open('/proc/self/status')"
               f" if x.startswith('VmHWM')))\n")
    p = subprocess.run([sys.executable, "-c", wrapper], capture_output=True, text=True, cwd=ROOT, env=ENV,
                       preexec_fn=limit, timeout=60)
    refused(p.returncode, p.stderr, "parameter 'k'.n: a grid of 1000000000 points, more than 100000")
    assert int(hwm.read_text()) < 200 * 1024, hwm.read_text()  # [kB]


@pytest.fixture(scope="module")
def toy_run_log(tmp_path_factory) -> Path:
    """A 0.2 s toy run's log, recorded by a run (config.json attached)."""
    d = tmp_path_factory.mktemp("run")
    rc, _, err = launch("run", toys(d, extra=LOGGER), "--log", d / "run.mcap")
    assert rc == 0, err
    return d / "run.mcap"


def _rewrite(src: Path, dst: Path, *, foreign: bool = False, config: bytes | None = None) -> Path:
    """A copy of a log with two channels of another tool (protobuf bytes, JSON), or another config.json."""
    from mcap.reader import make_reader
    from mcap.writer import Writer
    with src.open("rb") as f, dst.open("wb") as g:
        r = make_reader(f)
        w = Writer(g)
        w.start(profile="", library="another tool")
        summ = r.get_summary()
        sids = {sid: w.register_schema(x.name, x.encoding, x.data) for sid, x in summ.schemas.items()}
        cids = {cid: w.register_channel(c.topic, c.message_encoding, sids[c.schema_id], dict(c.metadata))
                for cid, c in summ.channels.items()}
        for a in r.iter_attachments():
            data = config if a.name == "config.json" and config is not None else a.data
            w.add_attachment(a.log_time, a.create_time, a.name, a.media_type, data)
        image = w.register_channel("camera/image", "protobuf", w.register_schema("vendor.Image", "protobuf", b"\x0a"))
        other = w.register_channel("other/json", "json", w.register_schema("other.Json", "jsonschema", b"{}"))
        for _, _, m in r.iter_messages(log_time_order=False):
            w.add_message(cids[m.channel_id], m.log_time, m.data, m.publish_time, m.sequence)
            if foreign:
                w.add_message(image, m.log_time, b"\xff\xfe\x00binary\x81", m.publish_time, 0)
                w.add_message(other, m.log_time, b'{"a": 1}{"b": 2}', m.publish_time, 0)
        for md in r.iter_metadata():
            w.add_metadata(md.name, dict(md.metadata))
        w.finish()
    return dst


def test_log_tools_skip_and_count_channels_that_are_not_berthsims(tmp_path, toy_run_log):
    """A valid MCAP file with two extra channels of another tool (before: replay and --resim exited 1
    with ExtraData, export exited 2 refusing the file). Every tool skips them and says so in one line
    naming them; --resim is still bit-identical."""
    log = _rewrite(toy_run_log, tmp_path / "foreign.mcap", foreign=True)
    with open_log(toy_run_log) as lg:  # one message of each foreign channel per logged message
        n = lg.message_count
    note = f"skipped 2 channel(s) that are not berthsim's ({2 * n} messages): 'camera/image', 'other/json'"
    for args in (("replay", log), ("replay", log, "--resim", "b", "--log", tmp_path / "re.mcap"),
                 ("report", log, "--out", tmp_path / "report"), ("export", log, "--out", tmp_path / "export")):
        rc, out, err = launch(*args, timeout=120)
        assert rc == 0 and note in err and "Traceback" not in err, (args, rc, err)
    assert "b outputs bit-identical" in launch("replay", log, "--resim", "b", "--log", tmp_path / "re2.mcap")[2]


@pytest.mark.parametrize("config, needle", [
    (b"{not json", "attachment 'config.json': not JSON (JSONDecodeError"),
    (b"[1, 2]", "attachment 'config.json': expected a JSON object, got list"),
    (b"[" * 100_000 + b"]" * 100_000, "attachment 'config.json': nested too deeply to read"),
    (b'{"services": {"a": 5}}', "attachment 'config.json': services ['a'] are not objects"),
])
def test_a_malformed_config_attachment_is_one_line_naming_it(tmp_path, toy_run_log, config, needle):
    """Before: report and --resim exited 1 with JSONDecodeError, AttributeError or RecursionError."""
    log = _rewrite(toy_run_log, tmp_path / "bad.mcap", config=config)
    for args in (("report", log, "--out", tmp_path / "report"), ("replay", log, "--resim", "b")):
        rc, _, err = launch(*args, timeout=120)
        refused(rc, err, needle)


def test_resim_never_imports_a_module_the_log_names(tmp_path, toy_run_log):
    """A log whose config.json gives service b the kind 'probe_marker', a module on the path that
    leaves a file when imported (before: --resim imported it, then failed on it, exit 2)."""
    (tmp_path / "probe_marker.py").write_text(f"open({str(tmp_path / 'imported')!r}, 'w').close()\n")
    with open_log(toy_run_log) as lg:
        cfg = lg.config()
    assert cfg is not None
    cfg["services"]["b"]["kind"] = "probe_marker"
    log = _rewrite(toy_run_log, tmp_path / "kind.mcap", config=json.dumps(cfg).encode())
    p = subprocess.run([sys.executable, str(LAUNCH), "replay", str(log), "--resim", "b"], capture_output=True,
                       text=True, timeout=60, cwd=ROOT, env={**ENV, "PYTHONPATH": f"{ROOT}:{tmp_path}"})
    refused(p.returncode, p.stderr, "services.b: kind 'probe_marker' is not a service kind berthsim ships")
    assert not (tmp_path / "imported").exists()


def test_two_runs_logging_into_one_directory_keep_their_summaries(tmp_path):
    """Before: both wrote summary.json, the second over the first."""
    cfg = toys(tmp_path, extra=LOGGER)
    for name in ("one", "two"):
        rc, _, err = launch("run", cfg, "--log", tmp_path / f"{name}.mcap", *(("--duration", "0.1") if name == "two"
                                                                               else ()))
        assert rc == 0, err
    one, two = (json.loads((tmp_path / f"{n}.summary.json").read_text())["run"] for n in ("one", "two"))
    assert (one["t_end_ns"], two["t_end_ns"]) == (200_000_000, 100_000_000)
    assert not (tmp_path / "summary.json").exists()


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _descendants(pid: int) -> list[int]:
    """The processes under ``pid`` (children, grandchildren, ...), from /proc."""
    parent: dict[int, int] = {}
    for stat_file in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat_file.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        parent[int(stat_file.parent.name)] = int(fields[1])
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        kids = [c for c, pp in parent.items() if pp == p]
        out += kids
        todo += kids
    return out


def test_a_killed_log_writer_stops_the_run_naming_the_cause(tmp_path):
    """SIGKILL to the logger's writer process (before: 'exited without a word' and two tracebacks,
    the second from the logger's close). The run stops, exit 1, the cause named; the log's complete
    chunks stay readable once recovered."""
    import signal
    logger = LOGGER.replace("rate_hz = 1000\n", "rate_hz = 1000\nflush_interval = 0.1\n")
    cfg = toys(tmp_path, sim="duration = 20.0\nspeed = 1.0", extra=logger)
    log = tmp_path / "run.mcap"
    run = start("run", cfg, "--log", log)
    try:
        writer = None
        end = time.monotonic() + 30
        while writer is None and time.monotonic() < end:
            time.sleep(0.2)
            writer = next((pid for pid in _descendants(run.pid) if _comm(pid) == "logwriter"), None)
        assert writer is not None
        time.sleep(1.0)
        os.kill(writer, signal.SIGKILL)
        _, err = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 1, err
    assert f"log {str(log)!r}: writer failed: the writer process died (SIGKILL)" in err
    assert "Traceback" not in err
    rc, out, _ = launch("recover", log)
    assert rc == 0 and json.loads(out)["messages"] > 0


def test_a_frame_larger_than_the_bus_takes_is_never_allocated(tmp_path):
    """A publisher sends a 50 MB frame between two small ones (before: every subscriber received
    and allocated it). The subscriber, a process of its own, never gets it, nor anything from that
    publisher after it (ZeroMQ closes the connection on the protocol error); its peak memory stays small."""
    url = f"ipc://{tmp_path}/pub"
    sub = subprocess.Popen([sys.executable, "-c", f"""
import json, time
from protocol.bus import ZmqBus
bus = ZmqBus(None, [{url!r}], ["t"])
sizes, end = [], time.monotonic() + 4
while time.monotonic() < end:
    m = bus.recv(0.1)
    if m is not None:
        sizes.append(len(m.payload))
hwm = next(int(x.split()[1]) for x in open("/proc/self/status") if x.startswith("VmHWM"))
print(json.dumps({{"sizes": sizes, "peak_kB": hwm}}))
"""], stdout=subprocess.PIPE, text=True, cwd=ROOT, env=ENV)
    pub = subprocess.run([sys.executable, "-c", f"""
import time
from protocol.bus import ZmqBus
bus = ZmqBus({url!r}, [])
time.sleep(1.5)
bus.send("t", b"s" * 10)
bus.send("t", b"x" * (50 << 20))
bus.send("t", b"s" * 11)
time.sleep(1.0)
bus.send("t", b"s" * 12)
time.sleep(0.5)
"""], capture_output=True, text=True, cwd=ROOT, env=ENV, timeout=60)
    assert pub.returncode == 0, pub.stderr
    got = json.loads(sub.communicate(timeout=60)[0])
    assert got["sizes"] == [10], got  # the small frame before; nothing of this publisher after the refusal
    assert got["peak_kB"] < 100 * 1024, got  # [kB] (before: above 100 MB, the frame and its copy)
