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
        return ["replay", toy_log, "--rate", "-1"], "services.replay.rate (--rate): expected >= 0"
    if case == "replay empty window":
        return ["replay", toy_log, "--start", "0.8", "--end", "0.5"], "the window [0.8, 0.5] s is empty"
    if case == "replay --end inf":
        return ["replay", toy_log, "--end", "inf"], "services.replay.end: expected a finite int or float, got inf"
    raise AssertionError(case)


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


BAD_INPUTS = ["non-UTF-8 config", "duration beyond int64 ns", "--duration beyond int64 ns", "seed beyond u64",
              "period beyond int64 ns", "/dev/zero", "a FIFO", "ready_timeout = 0", "two producers of a topic",
              "log path a directory", "log path exists", "two loggers on one path", "replay --rate -1",
              "replay empty window", "replay --end inf"]


@pytest.mark.parametrize("case", BAD_INPUTS)
def test_bad_input_is_refused_with_exit_2_and_one_line_naming_it(case, tmp_path, toy_log):
    args, needle = _bad_input(case, tmp_path, toy_log)
    rc, _, err = launch(*args, timeout=30)  # a FIFO used to hang here; /dev/zero to exhaust memory
    refused(rc, err, needle)
    if case == "log path exists":
        assert (tmp_path / "old.mcap").read_bytes() == b"keep"


def test_a_second_writer_of_a_log_is_refused_and_the_first_log_stays_whole(tmp_path):
    cfg = toys(tmp_path, sim="duration = 2.0\nspeed = 1.0", extra=LOGGER)
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
    assert seqs == list(range(2001))


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
    rig = json.loads((tmp_path / "summary.json").read_text())["rig"]
    assert rig["rig_rejected"] >= 20 and rig["resent"] >= rig["rig_rejected"] - 5 and rig["replies_missed"] == 0
    assert f"rejected by the rig {rig['rig_rejected']}, resent {rig['resent']}" in out  # the table
    assert wall < 0.5 * rig["rig_rejected"] * 1.0  # before: every rejected frame waited reply_timeout (1 s)
