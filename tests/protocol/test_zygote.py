"""The worker zygote (protocol.zygote): workers forked from one process that imported the runtime once.

A stand-in for ``launch.py`` (a module with ``main(argv)``) shows what the worker sees: the runtime already
imported when its ``launch.py`` starts, a session of its own, the zygote as its parent, and its exit code,
signal and wait as :class:`subprocess.Popen` gives them.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from protocol.zygote import RUNTIME, ForkedWorker, start

FAKE_LAUNCH = '''
import json, os, sys, time
from protocol.zygote import RUNTIME  # (imported: the zygote's own module is there already)
_seen = {m: m in sys.modules for m in RUNTIME}


def main(argv):
    out, seconds, code = argv
    Path = __import__("pathlib").Path
    cmdline = open("/proc/self/cmdline", "rb").read().replace(b"\\0", b" ").decode()
    Path(out).write_text(json.dumps({"preloaded": _seen, "pid": os.getpid(), "ppid": os.getppid(),
                                     "sid": os.getsid(0), "cmdline": cmdline}))
    time.sleep(float(seconds))
    return int(code)
'''


@pytest.fixture
def fake_launch(tmp_path: Path) -> Path:
    p = tmp_path / "launch.py"
    p.write_text(FAKE_LAUNCH)
    return p


def _report(path: Path, deadline_s: float = 30.0) -> dict:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if path.exists() and path.read_text():
            return json.loads(path.read_text())
        time.sleep(0.01)
    raise AssertionError(f"the worker wrote no {path}")


def test_a_forked_worker_finds_the_runtime_imported_and_runs_in_a_session_of_its_own(fake_launch, tmp_path):
    start()
    out = tmp_path / "seen.json"
    w = ForkedWorker(str(fake_launch), [str(out), "0", "7"])
    assert w.wait(30.0) == 7 and w.returncode == 7 and w.poll() == 7
    seen = _report(out)
    assert seen["preloaded"] == {m: True for m in RUNTIME}
    assert seen["pid"] == w.pid and seen["sid"] == w.pid  # its own session, as start_new_session made it
    assert seen["ppid"] != os.getpid()  # forked by the zygote, not by this process
    assert seen["cmdline"].split() == [sys.executable, str(fake_launch), str(out), "0", "7"]  # in a process list


def test_a_forked_worker_is_stopped_and_waited_for_as_a_popen(fake_launch, tmp_path):
    out = tmp_path / "seen.json"
    w = ForkedWorker(str(fake_launch), [str(out), "60", "0"])
    _report(out)
    assert w.poll() is None and w.returncode is None
    with pytest.raises(subprocess.TimeoutExpired):
        w.wait(0.05)
    w.terminate()
    assert w.wait(10.0) == -signal.SIGTERM
    w.kill()  # ended already: nothing to signal, no error
    assert w.returncode == -signal.SIGTERM


def test_a_worker_left_running_when_its_launcher_exits_is_stopped_not_waited_for(fake_launch, tmp_path):
    """A process that forked a worker and exits without stopping it does not hang on it (multiprocessing would
    wait for its children): the worker gets SIGTERM, as a started worker got its parent's death signal."""
    out = tmp_path / "seen.json"
    script = "\n".join([
        "import pathlib, sys, time",
        f"sys.path[:0] = {sys.path!r}",
        "from protocol.zygote import ForkedWorker",
        f"w = ForkedWorker({str(fake_launch)!r}, [{str(out)!r}, '60', '0'])",
        "print(w.pid, flush=True)",
        "end = time.monotonic() + 30",
        f"while not pathlib.Path({str(out)!r}).exists() and time.monotonic() < end:",
        "    time.sleep(0.01)",
    ])
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - t0 < 20.0  # not the worker's 60 s
    pid = int(done.stdout.split()[0])
    assert _report(out)["pid"] == pid
    end = time.monotonic() + 10.0
    while Path(f"/proc/{pid}").exists() and time.monotonic() < end:
        time.sleep(0.02)
    assert not Path(f"/proc/{pid}").exists()


def test_stopping_the_zygote_after_a_run_counts_its_workers_cpu_in_the_launchers_children(tmp_path):
    """After ``stop`` the zygote was waited for: a worker's CPU time is in the launcher's children's
    (``getrusage``), as a started worker's was: benches and ``time`` see it."""
    burner = tmp_path / "launch.py"
    burner.write_text("import time\n\ndef main(argv):\n    end = time.process_time() + float(argv[0])\n"
                      "    while time.process_time() < end:\n        pass\n    return 0\n")
    script = "\n".join([
        "import resource, sys",
        f"sys.path[:0] = {sys.path!r}",
        "from protocol.zygote import ForkedWorker, stop",
        f"w = ForkedWorker({str(burner)!r}, ['0.4'])",
        "assert w.wait(30.0) == 0",
        "stop()",
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime)",
    ])
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert float(done.stdout.split()[-1]) >= 0.4
