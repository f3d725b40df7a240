"""Probes of who may speak on the bus and of runs that wait (real processes, real sockets).

- A sample in the producer's name that passes every check of its own fields, stamped at
  the run's end and published mid-run, is refused (its producer cannot have reached it):
  the run completes and its data topics are bit-identical to a clean run's (before: it
  was accepted, every genuine sample after it refused, and the run waited forever).
- Over tcp with one CurveZMQ key pair per process, a process holding a's key that publishes
  in b's name (and in another's) is refused by every subscriber, whatever the samples' fields
  and timing: the envelope's sender must be one the publisher's authenticated key speaks for.
- A lockstep run whose producer stops (SIGSTOP) stops after ``sim.stall_timeout`` with
  exit 1, naming the input, its producer and the last sample of it accepted (before: it
  waited forever).
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from protocol.bus import open_bus
from protocol.codec import decode
from protocol.logfile import open_log
from testkit.ports import free_base_port
from testkit.procs import argv_of
from testkit.toys import FORGERY_KINDS
from tests.compare_logs import differences
from tests.test_probes import FORGER, LOGGER, launch, start, toys

pytestmark = pytest.mark.integration

FUTURE = """[services.forger]
kind = "testkit.toys"
rate_hz = 1000
role = "forger"
forge = "toy/state1"
producer = "b"
forge_hz = 100
forge_at = 0.5
forge_t = 1.0
"""


def test_a_forged_end_of_run_sample_is_refused_and_the_run_completes_unchanged(tmp_path):
    """b's toy/state1 (coupled at 100 Hz) forged once: in b's name, h_ns = 10 ms, t_ns = 1 s (the
    run's end) and seq = 100, published at 0.5 s of a run paced at speed 1. Dropped and counted by
    its consumer and by the logger; the log's data topics equal a clean run's, bit for bit."""
    runs = {}
    for label, extra in (("clean", LOGGER), ("forged", LOGGER + FUTURE)):
        d = tmp_path / label
        d.mkdir()
        rc, out, err = launch("run", toys(d, sim="duration = 1.0\nspeed = 1.0", extra=extra), "--json",
                              "--log", d / "run.mcap", timeout=60)  # before: no end (TimeoutExpired)
        assert rc == 0, err
        runs[label] = (d / "run.mcap", json.loads(out.strip().splitlines()[-1]), err)
    (clean, _, _), (forged, summary, err) = runs["clean"], runs["forged"]
    assert differences(clean, forged) == []
    assert summary["services"]["a"]["msgs_invalid"] == 1
    assert "[a] dropped a sample of 'toy/state1': t_ns 1000000000 ahead of the next instant" in err
    with open_log(forged) as lg:
        close = lg.metadata()["berthsim.close"]
        xs = [decode("toy/state1", m.payload).body["x"] for m in lg.messages(["toy/state1"])]
    assert close["rejected.toy/state1"] == "1"
    assert len(xs) == 101 and 5.0 not in xs


def _worker_pid(config: Path, name: str, timeout: float = 30.0) -> int:
    """The pid of the worker process running service ``name`` of the run of ``config``."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        for d in Path("/proc").iterdir():
            if not d.name.isdigit():
                continue
            try:
                argv = argv_of(d.name)
            except OSError:
                continue
            if b"_worker" in argv and name.encode() in argv and any(str(config.parent).encode() in a for a in argv):
                return int(d.name)
        time.sleep(0.05)
    raise AssertionError(f"no worker process of {name!r}")


def test_a_lockstep_run_whose_producer_stops_fails_naming_what_it_waits_on(tmp_path):
    """b stopped (SIGSTOP) once the paced 30 s run is under way (a's first samples seen on the
    bus): a cannot step; after sim.stall_timeout (10 s by default) it fails the run with exit 1,
    naming toy/state1, its producer b and the last sample of it accepted."""
    bus = tmp_path / "bus"
    cfg = toys(tmp_path, sim=f'duration = 30.0\nspeed = 1.0\nbus = "ipc://{bus}"')
    run = start("run", cfg)
    pid = None
    try:
        pid = _worker_pid(cfg, "b")
        with open_bus(None, [f"ipc://{bus}.a.pub"], ["toy/state0"]) as watch:
            end = time.monotonic() + 60
            while watch.recv(0.1) is None:  # before the start, sim.ready_timeout is the bound
                assert time.monotonic() < end and run.poll() is None, "the run did not start"
        time.sleep(0.5)
        os.kill(pid, signal.SIGSTOP)
        stopped = time.monotonic()
        out, err = run.communicate(timeout=40)  # before: no end (the service waits forever)
        took = time.monotonic() - stopped
    finally:
        if pid is not None:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.returncode == 1, err
    line = next(x for x in err.splitlines() if "stalled: no step for" in x)
    assert "(sim.stall_timeout)" in line, line
    assert "waiting on 'toy/state1' from 'b'; the last sample of it accepted: t = " in line, line
    assert took < 20.0, took


def test_a_process_holding_another_services_key_cannot_speak_for_a_third(tmp_path):
    """Per-process keys (launch.py keys DIR --config), a toy run over tcp on loopback; the forger's
    process holds a's key pair (security.identities: a = ["a", "forger"]) and publishes b's
    toy/state1 in b's name (a period of 1e15 ns, off the grid, t < 0, a huge seq, after the end)
    and 20 copies in the name 'x'. Every subscriber refuses all of them (the key is a's, the
    sender is not a service of a's key) and counts them; the data topics equal a clean run's."""
    runs = {}
    for label, extra in (("clean", LOGGER), ("forged", LOGGER + FORGER)):
        d = tmp_path / label
        d.mkdir()
        base = toys(d, extra=extra)
        rc, table, err = launch("keys", d / "keys", "--config", base)
        assert rc == 0, err
        assert 'keys_dir = "keys"' in table and "[security.identities]" in table
        if label == "forged":
            assert 'forger = [\n    "forger",\n]\n' in table
            table = table.replace('forger = [\n    "forger",\n]\n', "")
            table = table.replace('a = [\n    "a",\n]', 'a = ["a", "forger"]')  # the forger holds a's key pair
        tcp = f'duration = 0.2\ntransport = "tcp"\nbus = "tcp://127.0.0.1:{free_base_port()}"'
        cfg = toys(d, name="tcp.toml", sim=tcp, extra=extra + table)
        rc, out, err = launch("run", cfg, "--json", "--log", d / "run.mcap", timeout=90)
        assert rc == 0, err
        runs[label] = (d / "run.mcap", json.loads(out.strip().splitlines()[-1]), err)
    (clean, _, _), (forged, summary, err) = runs["clean"], runs["forged"]
    assert differences(clean, forged) == []
    n = 20 + FORGERY_KINDS
    a, b = summary["services"]["a"], summary["services"]["b"]
    assert a["msgs_invalid"] == n and b["msgs_invalid"] == 0
    assert "[a] dropped a sample of 'toy/state1': sender 'x' is not spoken for by the authenticated peer 'a'" in err
    with open_log(forged) as lg:
        assert {decode("toy/state1", m.payload).sender for m in lg.messages(["toy/state1"])} == {"b"}


def test_the_runs_ipc_directory_is_private_to_its_user(tmp_path):
    """On ipc the socket directory is the boundary: the launcher's own (no sim.bus) is made 0700
    and owned by the user who runs it, so no other user can connect to a socket in it."""
    cfg = toys(tmp_path, sim="duration = 3.0\nspeed = 1.0")
    run = start("run", cfg)
    try:
        pid = _worker_pid(cfg, "a")
        argv = argv_of(pid)
        bus = argv[argv.index(b"--bus") + 1].decode()
        assert bus.startswith("ipc://")
        st = Path(bus[6:]).parent.stat()
        out, err = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.returncode == 0, err
    assert st.st_mode & 0o777 == 0o700 and st.st_uid == os.getuid()
    assert not Path(bus[6:]).parent.exists()  # removed with the run
