"""The worker zygote: the local worker processes of a run forked from one process that imported the runtime once.

A run with one OS process per service (the default; not ``--inprocess``) starts several workers on a machine
of a few cores. As fresh interpreters (``launch.py _worker ...``) each would import numpy, SciPy, numba, ZeroMQ,
the runtime and the service kinds again: about a second of CPU per process, seven processes on two cores before
the first step. The zygote is :mod:`multiprocessing`'s fork server (Python's own ``forkserver`` start method):
one process that imports :data:`RUNTIME` and the run's kind modules once (:func:`start`, given those by the
caller, which has them from :func:`protocol.registry.kind_modules`), then forks a worker for each request. The
worker runs the same ``launch.py _worker`` command line (:class:`ForkedWorker`) and shows it as its process
title; it builds its services, validates nothing again and runs as a started worker did. The fork server holds
no ZeroMQ context, no thread and nothing of a run when it forks (it imports modules and waits), so its children
start clean: each makes its own context, as a new process does.

``launch.py run`` starts it while the launcher validates the configuration: it imports meanwhile, runs no
service and reads nothing of the configuration. After the run the launcher stops it and waits for it
(:func:`stop`), so that its CPU time and its workers' count in the launcher's children, as started workers'
did; it also ends when the launcher does (the fork server's own rule). A worker's parent is the zygote:
:func:`protocol.realtime.die_with_parent` ends the workers with it, and a worker still running when the
launcher exits gets SIGTERM, then SIGKILL. Each worker is put in a session of its own (as
``start_new_session`` did), so that a terminal's Ctrl-C reaches the launcher only, which stops the run in order.
"""

from __future__ import annotations

import atexit
import importlib.util
import multiprocessing
import os
import shlex
import signal
import subprocess
import sys
import time
import weakref
from collections.abc import Sequence
from multiprocessing import forkserver
from typing import Any

from setproctitle import setproctitle

__all__ = ["RUNTIME", "ForkedWorker", "start", "stop"]

RUNTIME: tuple[str, ...] = ("numpy", "scipy.linalg", "numba", "msgpack", "protocol.bus", "protocol.config",
                            "protocol.registry", "protocol.shell", "protocol.realtime")
"""What every worker imports, whatever its kinds: preloaded by the zygote."""

_CONTEXT: Any = None


def start(modules: Sequence[str] = ()) -> None:
    """Start the zygote, importing :data:`RUNTIME` and ``modules`` (the run's kind modules, by name), unless it
    runs already (then ``modules`` are not added: a process has one). Returns at once: the zygote imports while
    the caller goes on; the first :class:`ForkedWorker` waits for it."""
    global _CONTEXT
    if _CONTEXT is None:
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(list(dict.fromkeys([*RUNTIME, *modules])))
        _CONTEXT = ctx
    forkserver.ensure_running()


_LIVE: weakref.WeakSet[ForkedWorker] = weakref.WeakSet()


def _stop_left(grace_s: float = 1.0) -> None:
    """At this process's exit, the workers it forked that still run: SIGTERM, then SIGKILL after ``grace_s``, as
    a started worker's parent death signal did (:func:`protocol.realtime.die_with_parent`; here the parent is the
    zygote, which outlives this hook), and not left for multiprocessing's exit to wait on."""
    left = [w for w in list(_LIVE) if w.poll() is None]
    for w in left:
        w.terminate()
    end = time.monotonic() + grace_s
    while left and time.monotonic() < end:
        left = [w for w in left if w.poll() is None]
        time.sleep(0.01)
    for w in left:
        w.kill()


atexit.register(_stop_left)  # after multiprocessing's own exit hook (imported above), so it runs first


def stop() -> None:
    """End the zygote, if it runs, and wait for it (after a run, its workers ended): its CPU time and its workers'
    then count in this process's children's, as a started worker's did (``getrusage``, ``time``). A worker still
    running gets its parent's death signal (:func:`protocol.realtime.die_with_parent`)."""
    server: Any = getattr(forkserver, "_forkserver", None)
    end = getattr(server, "_stop", None)  # multiprocessing's own (3.8 on): closes its pipe to it, waits for it
    if callable(end) and getattr(server, "_forkserver_pid", None) is not None:
        end()


def _worker_main(launch_py: str, argv: list[str]) -> None:
    """In the forked worker: a session of its own, the command line it runs as its title in a process list
    (``ps``, ``/proc/PID/cmdline``: which run and service it is), then ``launch.py`` ``argv``; its exit code is
    the process's."""
    os.setsid()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    setproctitle(shlex.join([sys.executable, launch_py, *argv]))
    spec = importlib.util.spec_from_file_location("launch", launch_py)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["launch"] = mod
    spec.loader.exec_module(mod)
    sys.exit(mod.main(argv))


class ForkedWorker:
    """A worker process forked from the zygote, running ``launch_py argv``; what the launcher uses of
    :class:`subprocess.Popen` (``pid``, ``returncode``, ``poll``, ``wait``, ``terminate``, ``kill``,
    ``send_signal``), with the same meanings (a negative return code: the signal that ended it).

    Parameters
    ----------
    launch_py : str
        The path of ``launch.py``.
    argv : list of str
        Its arguments (``["_worker", CONFIG, NAME, "--plan", FILE, ...]``).
    """

    def __init__(self, launch_py: str, argv: Sequence[str]) -> None:
        start()
        # not daemonic: a worker may start processes of its own (the logger's writer)
        self._p = _CONTEXT.Process(target=_worker_main, args=(str(launch_py), list(argv)), daemon=False)
        self._p.start()
        self.pid: int = int(self._p.pid)
        _LIVE.add(self)

    @property
    def returncode(self) -> int | None:
        """The exit code once it has ended (-N: killed by signal N), else None."""
        return self._p.exitcode

    def poll(self) -> int | None:
        """:attr:`returncode`, looked at now."""
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Wait for it to end; its return code.

        Raises
        ------
        subprocess.TimeoutExpired
            If it still runs after ``timeout`` s.
        """
        self._p.join(timeout)
        if self._p.exitcode is None:
            raise subprocess.TimeoutExpired(f"worker pid {self.pid}", timeout or 0.0)
        return int(self._p.exitcode)

    def send_signal(self, sig: int) -> None:
        """Send ``sig`` unless it has ended."""
        if self._p.exitcode is None:
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        """SIGTERM."""
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL."""
        self.send_signal(signal.SIGKILL)
