"""The launcher: starts, supervises and stops the services of a run (DESIGN §3–4).

The launcher is the DCP master. It binds the control ROUTER and its own PUB of the
mesh (:mod:`protocol.bus`), starts one OS process per local service (or one thread each
over ``inproc://`` with ``inprocess=True``) — forked from the zygote (:mod:`protocol.zygote`), each running
``launch.py _worker …`` (:func:`worker_command`) —, runs the ready handshake of
:mod:`protocol.shell`, broadcasts start / freeze / resume / stop, pings every
service, and stops everything when one fails.

Several machines: every host runs ``launch.py run CONFIG --only …`` with the same
config. The launcher that can bind the control address (``sim.bus``) is the master;
one on a host that does not own that address (bind fails with EADDRNOTAVAIL) is a
*follower*: it starts and watches its local services (which bind their ``endpoint``
on this host and talk to the master's control ROUTER directly), reports a local
death to the master, and leaves when the master says stop or falls silent.

The master takes control messages only from whom the plan expects: its services, and
follower launchers (identity ``follower:…``) only when ``--only`` places services on
other hosts, and then only about those services. Anything else on the control socket
(any process of the user can reach an ipc socket, any local user a loopback tcp one
without keys) is ignored, noted once per identity on stderr and counted in the
summary's ``control_ignored`` (identity → messages).

Playback control (a replay watched live, ``launch.py replay LOG --view``): a ``playback``
request from a service of kind ``viewer`` (``{"op": "playback", "cmd": "pause" | "play" |
"seek" | "rate", "t_ns": int, "rate": float}``) is checked and forwarded to every service
of kind ``replay`` (with ``co_simulated`` when the run has models: the replay then refuses a
seek, which they cannot follow), ``pause`` and ``play`` also to every model (its stall watchdog waits while paused),
and put on ``sim/control`` (``playback``) so that a log of the run records it. A request
from any other service, or a malformed one, is ignored and counted like a foreign message.

Stop order: models and sources first, sinks (the logger) last so they record
everything. A service that dies (non-zero exit, signal, error report, or a thread
that ends) makes the launcher print which one and why, stop the others (within 1 s)
and return 1. SIGINT/SIGTERM stop everything in order and return 130 / 143;
SIGUSR1 freezes, SIGUSR2 resumes. A service that freezes the run itself (realtime
overload, :mod:`protocol.shell`) freezes every service; without a resume within
``sim.freeze_stop_after`` the run stops and returns 1, naming the service and the
figure. The last stdout line of a run is a JSON summary
(``{"event": "summary", ...}``, with every service's final statistics).

Hooks (progress lines, event taps)
----------------------------------
``Launcher(plan, on_tick=f, on_message=g, subscribe=("contact/event",))``:

``on_tick(t_ns, wall_s, stats)``
    Called from the launcher's loop every ``tick_period`` s (wall) once the run has
    started, and once more when it ends. ``t_ns`` is the least simulation time the
    stepping services (models and sources) are known to have reached (from their state
    reports and their ``sim/stats``), ``wall_s`` the wall time since the start, and
    ``stats`` maps each service to its latest ``sim/stats`` fields (empty until its first).
``on_message(topic, sample)``
    Called for every message of the ``subscribe`` topics that the launcher's own SUB
    receives, decoded and validated (:class:`protocol.service.Sample`; invalid ones are
    dropped). The launcher subscribes to these topics on top of its own.

Both run on the launcher's thread and must return quickly; an exception they raise
stops the run like a failed service. Subclasses may instead override the methods of
the same names.

Real time
---------
With ``sim.mode = "realtime"`` and ``sim.rt_priority > 0`` (:mod:`protocol.realtime`):
before anything starts, the admission check times every local service's step on this
host and refuses the run (exit 2, the utilization table on stderr) when the processes do
not fit the cores under rate-monotonic scheduling; every process then runs SCHED_FIFO at
its rate-monotonic priority (its ZeroMQ I/O thread too, pinned to its ``cpus``, memory
locked), and the launcher's thread runs at :data:`protocol.realtime.SUPERVISOR_PRIORITY`,
above them all (it sleeps almost all the time), so services that overrun without pause
cannot starve the supervisor or its pings. Its priority is not inherited by the processes
it starts (SCHED_RESET_ON_FORK).
"""

from __future__ import annotations

import gc
import json
import math
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

from errors import BusError, ConfigError, LifecycleError, MessageError
from protocol.bus import (
    LAUNCHER,
    Bus,
    Context,
    ControlClient,
    ControlServer,
    EndpointInUse,
    EndpointNotLocal,
    Poller,
    claim_ipc,
    control_endpoint,
    default_context,
    destroy_context,
    open_bus,
)
from protocol.clocksync import wall_ns
from protocol.codec import decode, encode
from protocol.config import INPROCESS, RunPlan, peers_of, with_overrides, write_plan
from protocol.coupling import coupling_periods
from protocol.realtime import SUPERVISOR_PRIORITY, io_context, preload, realtime_plan, set_priority
from protocol.registry import BuildFailed, build_members, capabilities, kind_modules
from protocol.service import Sample
from protocol.shell import SINK_DRAIN_LIMIT_NS, run_process
from protocol.timebase import align_up
from protocol.zygote import ForkedWorker
from protocol.zygote import start as start_zygote
from protocol.zygote import stop as stop_zygote

__all__ = ["Launcher", "ServiceRecord", "worker_command"]

_S = 1_000_000_000
_CHECK_S = 0.1  # s between looks at deaths, signals and the ping clock


def worker_command(launch_py: str | os.PathLike[str], config: str | os.PathLike[str] | None, name: str, url: str,
                   plan_file: str | os.PathLike[str], rt_priority: int = 0, clock: str = "local") -> list[str]:
    """The command line of one OS process of the run (``launch.py _worker CONFIG NAME --plan FILE ...``).

    The worker reads the run plan the launcher wrote once (:func:`protocol.config.write_plan`); the config's
    path is on the line only to show in a process list which scenario the process belongs to (``-``: a plan
    made in memory, e.g. a replay's).
    """
    return [sys.executable, str(launch_py), "_worker", str(config) if config is not None else "-", name,
            "--plan", str(plan_file), "--bus", url, "--rt-priority", str(int(rt_priority)), "--clock", clock]


def master_host(plan: RunPlan) -> str | None:
    """The ``sim.hosts`` label whose address the control endpoint ``sim.bus`` names (the master's host), if any."""
    bus = str(plan.sim.get("bus") or "")
    return next((str(label) for label, addr in (plan.sim.get("hosts") or {}).items() if f"//{addr}:" in bus), None)


def host_of(plan: RunPlan) -> str:
    """The label of the host this launcher runs on: its ``--only`` services' ``host``, else (every service
    here) the master's host, else this machine's name."""
    labels = {plan.services[n].host for n in plan.only if plan.services[n].host}
    if len(labels) == 1:
        return str(labels.pop())
    return (None if plan.only else master_host(plan)) or os.uname().nodename


@dataclass
class ServiceRecord:
    """What the launcher knows of one service."""

    name: str
    local: bool
    role: str = "model"
    hello: dict[str, Any] | None = None
    probed: bool = False
    acked: bool = False
    state: str = "configured"
    done: bool = False
    stopped: bool = False
    t_ns: int = 0
    stats: dict[str, Any] = field(default_factory=dict)
    live: dict[str, Any] = field(default_factory=dict)
    proc: ForkedWorker | None = None
    thread: threading.Thread | None = None
    result: list[int] = field(default_factory=list)

    def alive(self) -> bool:
        """Whether the local process or thread still runs (True for remote services)."""
        if self.proc is not None:
            return self.proc.poll() is None
        if self.thread is not None:
            return self.thread.is_alive()
        return not self.local

    def exit_reason(self) -> str:
        """How a local process or thread ended."""
        if self.proc is not None and self.proc.returncode is not None:
            rc = self.proc.returncode
            if rc < 0:
                try:
                    return f"killed by {signal.Signals(-rc).name} (pid {self.proc.pid})"
                except ValueError:
                    return f"killed by signal {-rc} (pid {self.proc.pid})"
            return f"exited with code {rc} (pid {self.proc.pid})"
        if self.thread is not None:
            return f"thread ended with code {self.result[0] if self.result else 'unknown (raised)'}"
        return "unknown"


class _Failed(Exception):
    pass


class Launcher:
    """Run a validated plan (see the module docstring).

    Parameters
    ----------
    plan : RunPlan
        From :func:`protocol.config.validate`; ``plan.sim`` already holds command-line overrides.
    inprocess : bool
        Every service as a thread of this process over ``inproc://``.
    launch_py : path
        The ``launch.py`` that starts worker processes; they read ``plan`` from the file the launcher
        writes once (:func:`protocol.config.write_plan`).
    out, err : text streams
        Where the summary and the diagnostics go.
    on_tick : callable ``(t_ns, wall_s, stats) -> None``, optional
        Progress hook, see the module docstring (default: :meth:`on_tick`, which does nothing).
    on_message : callable ``(topic, sample) -> None``, optional
        Tap of the ``subscribe`` topics, see the module docstring (default: :meth:`on_message`).
    subscribe : sequence of str
        Extra topics for ``on_message``.
    tick_period : float
        Wall seconds between ``on_tick`` calls. [s]
    """

    def __init__(self, plan: RunPlan, *, inprocess: bool = False, launch_py: str | os.PathLike[str] = "launch.py",
                 out: TextIO | None = None, err: TextIO | None = None,
                 on_tick: Callable[[int, float, dict[str, dict[str, Any]]], None] | None = None,
                 on_message: Callable[[str, Sample], None] | None = None, subscribe: tuple[str, ...] | list[str] = (),
                 tick_period: float = 0.25) -> None:
        if on_tick is not None:
            self.on_tick = on_tick  # type: ignore[method-assign, assignment]  # the hook given replaces the method
        if on_message is not None:
            self.on_message = on_message  # type: ignore[method-assign, assignment]  # as on_tick
        self.subscribe = tuple(t for t in subscribe if t not in ("sim/stats", "sim/control"))
        self.tick_period = float(tick_period)
        self._next_tick = 0.0
        self._wall0 = 0.0
        self.plan = plan
        self.inprocess = inprocess
        self.launch_py = launch_py
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        local = plan.only or tuple(plan.services)
        self.records = {n: ServiceRecord(n, n in local) for n in plan.services}
        # the OS processes this launcher starts: name -> services (--inprocess: one, in this process)
        procs = plan.processes or {n: (n,) for n in plan.services}
        self.processes: dict[str, tuple[str, ...]] = (
            {INPROCESS: tuple(n for n in plan.services if n in local)} if inprocess
            else {p: m for p, m in procs.items() if all(n in local for n in m)})
        self._signal: int | None = None
        self._probes_seen: set[str] = set()
        self.frozen = False
        self._overload: tuple[str, float] | None = None  # (why, when to stop) of a freeze by an overload
        self.diverged: dict[str, Any] | None = None  # {"service", "t" [s], "reason"}: a model's output was not finite
        self._started = False
        self._next_ping = 0.0
        self._next_check = 0.0
        self._poller: Poller | None = None
        self._followers: set[str] = set()
        self._remote = [n for n, r in self.records.items() if not r.local]  # services placed on other hosts
        self.control_ignored: dict[str, int] = {}  # identity -> control messages the plan does not expect
        self._ctl_seq = 0
        # bound by run() (None until then, or on a follower); checked where it matters
        self.server: ControlServer = None  # type: ignore[assignment]
        self.bus: Bus = None  # type: ignore[assignment]
        self._tmpdir: str | None = None
        self._plan_dir: str | None = None  # the run plan written for the worker processes (write_plan)
        self._plan_file: str | None = None
        self.exit_code = 0
        self._prio: dict[str, int] = {}  # realtime: each local process's SCHED_FIFO priority (set by _admit)
        self.host = host_of(plan)
        self.admission: dict[str, Any] | None = None  # realtime: this host's {"ok", "table"} (set by _admit)
        self.hosts: dict[str, dict[str, Any]] = {}  # several hosts: label -> {"services", "admission", "clock"}
        self._clock = "local"  # how the processes this launcher starts keep time ("sync" on a follower)
        self._heard: dict[str, float] = {}  # identity (service or follower) -> when it last said anything [s]
        self._refused = False  # a follower's admission refused the run: exit 2
        self._follower_host: dict[str, str] = {}  # follower launcher identity -> its host label
        self.lost: dict[str, Any] | None = None  # {"host", "t", "services"}: a host fell silent
        self.stats_from_master: dict[str, dict[str, Any]] = {}  # follower: every service's statistics at the stop

    # ------------------------------------------------------------------ hooks
    def on_tick(self, t_ns: int, wall_s: float, stats: dict[str, dict[str, Any]]) -> None:
        """Progress hook (see the module docstring); does nothing unless given or overridden."""

    def on_message(self, topic: str, sample: Sample) -> None:
        """Tap of the ``subscribe`` topics (see the module docstring); does nothing unless given or overridden."""

    def sim_time_ns(self) -> int:
        """The least simulation time the stepping services are known to have reached. [ns]"""
        return min((r.t_ns for r in self.records.values() if r.role != "sink"), default=0)

    def _tick(self, final: bool = False) -> None:
        now = time.monotonic()
        if final or now >= self._next_tick:
            self._next_tick = now + self.tick_period
            try:
                self.on_tick(self.sim_time_ns(), now - self._wall0, {n: r.live for n, r in self.records.items()})
            except Exception as err:  # noqa: BLE001 - a failing hook fails the run, reported like a service
                raise _Failed(f"launcher hook on_tick raised {type(err).__name__}: {err}") from err

    # ------------------------------------------------------------------ helpers
    def _say(self, text: str) -> None:
        print(f"berthsim: {text}", file=self.err, flush=True)

    def _url(self) -> str:
        if self.inprocess:
            return f"inproc://berthsim-{os.getpid()}-{id(self)}"
        if self.plan.sim.get("bus"):
            return self.plan.sim["bus"]
        self._tmpdir = tempfile.mkdtemp(prefix="berthsim-")
        return f"ipc://{self._tmpdir}/bus"

    def _on_signal(self, signum: int, frame: Any) -> None:
        self._signal = signum

    def _install_signals(self) -> dict[int, Any]:
        old: dict[int, Any] = {}
        if threading.current_thread() is threading.main_thread():
            for s in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2):
                old[s] = signal.signal(s, self._on_signal)
        return old

    # ------------------------------------------------------------------ entry
    def run(self) -> int:
        """Run to the end; the exit code (0 ok, 1 a service failed, 2 an ipc endpoint of this run is
        served by another live run, 130/143 interrupted)."""
        old = self._install_signals()
        self.url = self._url()
        sec = self.plan.security if self.plan.sim["transport"] == "tcp" else None
        realtime = self.plan.sim.get("mode") == "realtime" and int(self.plan.sim.get("rt_priority", 0)) > 0
        admitted = self._admit() if realtime else True
        if not admitted and not (self.plan.only and self._remote):
            return 2  # one host (or this host is the master): refused before anything starts
        if self.inprocess and self.plan.sim.get("mode") == "realtime":
            preload()  # the physics' lazy imports now, not in the first steps (a worker does its own)
        rt_ctx = io_context(SUPERVISOR_PRIORITY) if realtime and not self.inprocess else None
        self.ctx: Context = rt_ctx or default_context()
        if realtime:
            gc.collect()  # the calibration's objects: a full collection of them at this priority would
            gc.freeze()   # stall a core for tens of ms (what exists now is never scanned again)
            set_priority(SUPERVISOR_PRIORITY, reset_on_fork=True)
        self.auth: Any = None
        self.peers = peers_of(with_overrides(self.plan.config, {"transport": "inproc"}) if self.inprocess
                              else self.plan.config, self.url)
        try:
            self._claim_endpoints()
            if sec is not None:
                missing = sec.problems(server_side=True)
                if missing:
                    self._say("error: " + "; ".join(missing))
                    return 2
                self.auth = sec.start_authenticator(self.ctx)
            try:
                self.server = ControlServer(self.url, security=sec, context=self.ctx)
            except EndpointNotLocal:  # another host binds the control endpoint: follow its launcher
                if self.plan.only:
                    return self._run_follower(sec, admitted)
                raise
            if not admitted:
                self._tell_followers_refused()
                return 2
            self.bus = open_bus(self.peers[LAUNCHER], sorted({ep for n, ep in self.peers.items() if n != LAUNCHER}),
                                ["sim/stats", "sim/control", *self.subscribe], security=sec, context=self.ctx)
            self._poller = Poller()
            self._poller.register(self.server, self.bus)
            return self._run_master()
        except EndpointInUse as e:
            self._say(f"error: {e}")
            return 2
        except (BusError, LifecycleError) as e:
            self._say(f"error: {e}")
            self._stop_all(fast=True)
            return 1
        finally:
            if self._remote and self.server is not None:
                time.sleep(0.3)  # the last words to other hosts (stop, with the figures) leave before the close
            for sock in (self.bus, self.server):
                if sock is not None:
                    sock.close()
            if self.auth is not None:
                self.auth.stop()
            if rt_ctx is not None:
                destroy_context(rt_ctx)
            for folder in (self._tmpdir, self._plan_dir):
                if folder:
                    shutil.rmtree(folder, ignore_errors=True)
            if not self.inprocess:
                stop_zygote()  # its workers have ended: waited for, it and they count in this process's children
            for signum, handler in old.items():
                signal.signal(signum, handler)

    def _tell_followers_refused(self) -> None:
        """The master's admission refused the run: answer every other host's launcher that says hello
        (until each host with services of the plan has, or ``sim.ready_timeout``) with a stop that says
        why, so that they exit 2 at once instead of waiting for a master that will not start."""
        hosts = {self.plan.services[n].host or "remote" for n in self._remote}
        told: set[str] = set()
        end = time.monotonic() + float(self.plan.sim["ready_timeout"])
        while time.monotonic() < end and not hosts <= told:
            got = self.server.recv(0.1)
            if got is None:
                continue
            ident, msg = got
            if ident.startswith("follower:") and msg.get("op") in ("hello", "refused"):
                self.server.send(ident, {"op": "stop", "refused": f"realtime admission on host {self.host} "
                                                                 "refused the run"})
                told.add(str(msg.get("host") or ident[9:]))
        time.sleep(0.1)  # the stops on their way before the socket closes

    def _claim_endpoints(self) -> None:
        """Before anything binds: refuse ipc endpoints of this host that a live run serves, remove
        those a dead run left (:func:`protocol.bus.claim_ipc`; EndpointInUse naming the path)."""
        if self.inprocess or not self.url.startswith("ipc://"):
            return
        claim_ipc(control_endpoint(self.url))
        for name, ep in self.peers.items():
            if name == LAUNCHER or self.records[name].local:
                claim_ipc(ep)

    def _admit(self) -> bool:
        """Realtime: the admission check of the local processes (:func:`protocol.realtime.realtime_plan`);
        their priorities kept for the start. False (the table said on stderr) if refused."""
        from dataclasses import replace

        local = self.plan.only or tuple(self.plan.services)
        plan = replace(self.plan, processes=self.plan.processes or {n: (n,) for n in self.plan.services}) \
            if self.inprocess else self.plan
        try:
            ok, table, self._prio = realtime_plan(plan, local=local)
        except Exception as err:  # noqa: BLE001 - a calibration that fails refuses the run, saying why
            self._say(f"realtime admission on host {self.host}: the calibration failed: {type(err).__name__}: {err}")
            self.admission = {"ok": False, "table": [f"the calibration failed: {type(err).__name__}: {err}"]}
            return False
        self.admission = {"ok": ok, "table": table}
        if not ok:
            self._say(f"realtime admission on host {self.host} refused the run:\n  " + "\n  ".join(table))
        return ok

    # ------------------------------------------------------------------ starting
    def _start_local(self) -> None:
        """One OS process per local process of the plan (``--inprocess``: one thread here, for all)."""
        for proc, members in self.processes.items():
            recs = [self.records[n] for n in members]
            result: list[int] = []
            if self.inprocess:
                thread = threading.Thread(target=self._thread_main, args=(proc, members, result),
                                          name=f"proc-{proc}", daemon=True)
                for rec in recs:
                    rec.thread, rec.result = thread, result
                thread.start()
            else:
                if self._plan_file is None:  # written once; every worker reads it (no reload, no re-validation)
                    self._plan_dir = tempfile.mkdtemp(prefix="berthsim-plan-")
                    self._plan_file = str(write_plan(self.plan, self._plan_dir))
                    # (launch.py run started it while validating; another caller here, importing now)
                    start_zygote(kind_modules(spec.kind for spec in self.plan.services.values()))
                cmd = worker_command(self.launch_py, self.plan.path, proc, self.url, self._plan_file,
                                     self._prio.get(proc, 0), self._clock)
                worker = ForkedWorker(cmd[1], cmd[2:])  # forked from the zygote: as the command line would run
                for rec in recs:
                    rec.proc = worker

    def _thread_main(self, proc: str, members: tuple[str, ...], result: list[int]) -> None:
        services = self.plan.services
        try:
            objs = build_members(self.plan.config, [(n, services[n].kind, services[n].period_ns) for n in members])
        except BuildFailed as e:  # reported to the launcher like a process death
            for n in members:
                with ControlClient(self.url, n, context=self.ctx) as c:
                    c.send({"op": "error", "reason": str(e)})
            time.sleep(0.05)
            result.append(1)
            return
        result.append(run_process(objs, self.url, self.peers, name=proc, context=self.ctx,
                                  rt_priority=max(self._prio.values(), default=0)))

    # ------------------------------------------------------------------ master
    def _ignore(self, ident: str, why: str) -> None:
        """Count a control message the plan does not expect (the first of each peer is reported)."""
        if ident not in self.control_ignored:
            self._say(f"note: ignored a control message from {ident!r}: {why}")
        self.control_ignored[ident] = self.control_ignored.get(ident, 0) + 1

    def _handle(self, ident: str, msg: dict[str, Any]) -> None:
        op = msg.get("op")
        if op == "sync" and ident.startswith("clock:") and ident[6:] in self._remote:
            # a process of another host follows this clock (protocol.clocksync): t2 = t3, answered at once
            now = wall_ns()
            self.server.send(ident, {"op": "sync", "t1": msg.get("t1", 0), "t2": now, "t3": now})
            self._heard[ident[6:]] = time.monotonic()
            return
        rec = self.records.get(ident)
        if rec is not None or ident in self._followers:
            self._heard[ident] = time.monotonic()
        if op in ("sync", "alive"):
            return
        if ident.startswith("follower:"):
            # a follower launcher speaks only for services this plan places on other hosts
            if not self._remote:
                self._ignore(ident, "this run has no services on other hosts")
            elif op in ("hello", "refused"):
                self._followers.add(ident)
                self._heard[ident] = time.monotonic()
                host = str(msg.get("host") or ident[9:])
                self._follower_host[ident] = host
                self.hosts.setdefault(host, {})["services"] = [n for n in msg.get("services", ()) if n in self._remote]
                if msg.get("admission") is not None:
                    self.hosts[host]["admission"] = msg["admission"]
                if op == "refused":
                    self._refused = True
                    table = "\n  ".join((msg.get("admission") or {}).get("table") or ())
                    raise _Failed(f"realtime admission on host {host} refused the run:\n  {table}")
            elif op == "died" and ident in self._followers and msg.get("name") in self._remote:
                raise _Failed(f"service {msg.get('name')!r} died on {ident[9:]}: {msg.get('reason')}")
            else:
                self._ignore(ident, f"op {op!r} for {msg.get('name')!r} (remote services: {', '.join(self._remote)})")
            return
        if rec is None:
            self._ignore(ident, "not a service of this run")
            return
        if op == "hello":
            rec.hello = msg
            rec.role = msg.get("role", "model")
        elif op == "probed":
            rec.probed = True
        elif op == "state":
            rec.state = msg.get("state", rec.state)
            rec.t_ns = int(msg.get("t_ns", rec.t_ns))
        elif op == "done":
            rec.done = True
            rec.stats = msg.get("stats", {})
        elif op == "stats" and rec.stats:  # the totals at stop: what arrived after done is counted too
            rec.stats = {**rec.stats, **msg.get("stats", {})}
        elif op == "frozen":
            t_s = int(msg.get("t_ns", 0)) * 1e-9
            after = float(self.plan.sim.get("freeze_stop_after", 0.0))
            self._say(f"service {ident!r} froze the run at t = {t_s:.3f} s ({msg.get('reason')}); every service "
                      f"holds, the rig parks after {float(self.plan.sim.get('freeze_park_after', 0.0)):g} s; "
                      + (f"SIGUSR2 resumes, else the run stops after {after:g} s" if after > 0 else
                         "SIGUSR2 resumes, Ctrl-C stops"))
            self._broadcast({"op": "freeze"})
            self._announce("freeze", {"t_ns": int(msg.get("t_ns", 0)), "by": ident, "reason": str(msg.get("reason"))})
            if self._overload is None:
                self._overload = (f"service {ident!r} froze the run at t = {t_s:.3f} s: {msg.get('reason')}",
                                  time.monotonic() + after if after > 0 else math.inf)
        elif op == "error" and msg.get("diverged"):
            t_s = int(msg.get("t_ns", 0)) * 1e-9
            self.diverged = {"service": ident, "t": t_s, "reason": str(msg.get("reason"))}
            if self.bus is not None:  # into the log too (the logger stops last): a report of it says so
                self._ctl_seq += 1
                self._control_pub("diverged", self._ctl_seq, dict(self.diverged))
            raise _Failed(f"service {ident!r} diverged at t = {t_s:.3f} s: {msg.get('reason')}")
        elif op == "error":
            raise _Failed(f"service {ident!r} failed: {msg.get('reason')}")
        elif op == "playback":
            self._playback(ident, msg)
        elif op == "held":  # what a service says while frozen (the rig holds, parks): into the log
            status = {str(k): v for k, v in dict(msg.get("status") or {}).items()
                      if isinstance(v, (str, int, float, bool)) and k not in ("service", "t_ns", "frozen_s")}
            self._announce("held", {"service": ident, "t_ns": int(msg.get("t_ns", 0)),
                                    "frozen_s": float(msg.get("frozen_s", 0.0)), **status})

    def _playback(self, ident: str, msg: dict[str, Any]) -> None:
        """A viewer's playback request: checked, forwarded to the replays (and pause/play to the models), logged
        (see the module docstring). Anything else is ignored and counted (:meth:`_ignore`)."""
        spec = self.plan.services.get(ident)
        if spec is None or "playback_control" not in capabilities(spec.kind):
            self._ignore(ident, "a playback request from a service that is not a viewer (capability playback_control)")
            return
        cmd = msg.get("cmd")
        out: dict[str, Any] = {"op": "playback", "cmd": cmd}
        t, rate = msg.get("t_ns"), msg.get("rate")
        if cmd == "seek" and not (isinstance(t, int) and not isinstance(t, bool) and 0 <= t < 2**63):
            self._ignore(ident, f"playback seek: t_ns: expected a time in [0, 2**63) ns, got {t!r}")
            return
        if cmd == "rate" and not (isinstance(rate, (int, float)) and not isinstance(rate, bool)
                                  and math.isfinite(rate) and rate >= 0):
            self._ignore(ident, f"playback rate: expected a finite pace >= 0, got {rate!r}")
            return
        if cmd not in ("pause", "play", "seek", "rate"):
            self._ignore(ident, f"playback: cmd: expected pause, play, seek or rate, got {cmd!r}")
            return
        replays = [n for n, s in self.plan.services.items() if "plays_back" in capabilities(s.kind)]
        if not replays:
            self._ignore(ident, "a playback request in a run without a replay")
            return
        models = [n for n, r in self.records.items() if r.role == "model"]
        if cmd == "seek":
            out["t_ns"] = int(t)  # type: ignore[arg-type]  # checked above
        if cmd == "rate":
            out["rate"] = float(rate)  # type: ignore[arg-type]  # checked above
        out["co_simulated"] = bool(models)
        for n in replays:
            self.server.send(n, out)
        if cmd in ("pause", "play"):
            for n in models:
                self.server.send(n, {"op": "playback", "cmd": cmd})
        self._announce("playback", {k: v for k, v in out.items() if k != "op"} | {"by": ident})

    def _broadcast(self, msg: dict[str, Any], names: list[str] | None = None) -> None:
        for n in names if names is not None else list(self.records):
            self.server.send(n, msg)
        for f in self._followers:
            if msg.get("op") in ("stop", "ping"):
                self.server.send(f, msg)

    def _stats_for_followers(self) -> dict[str, dict[str, Any]]:
        return {n: r.stats or r.live for n, r in self.records.items()}

    def _poll(self, timeout: float) -> None:
        """Handle control messages, bus messages, deaths, signals, pings and hooks for up to ``timeout`` s.

        One poller over the control ROUTER and the SUB (built once) wakes the loop for
        messages; deaths, signals and pings are looked at every :data:`_CHECK_S` (0.1 s).
        """
        end = time.monotonic() + timeout
        while True:
            now = time.monotonic()
            wait = max(0.0, min(end, self._next_check) - now)
            got = self._poller.poll(int(wait * 1000 + 0.999)) if self._poller is not None else []
            handled = False
            while (msg := self.server.recv(0.0)) is not None:
                self._handle(*msg)
                handled = True
            if got:
                self._drain_bus()
            now = time.monotonic()
            if now >= self._next_check:
                self._next_check = now + _CHECK_S
                self._check()
            if self._started:
                self._tick()
            if now >= end and not handled:
                return

    def _check(self) -> None:
        """Deaths, signals and the heartbeat ping."""
        for rec in self.records.values():
            if rec.local and not rec.stopped and (rec.proc or rec.thread) and not rec.alive():
                handle = rec.proc if rec.proc is not None else rec.thread
                mates = [r.name for r in self.records.values() if (r.proc if r.proc is not None else r.thread)
                         is handle]
                who = f"service {rec.name!r}" if len(mates) == 1 else \
                    f"process of services {', '.join(map(repr, mates))}"
                raise _Failed(f"{who} died: {rec.exit_reason()}")
        if self._signal is not None:
            s, self._signal = self._signal, None
            if s in (signal.SIGINT, signal.SIGTERM):
                raise KeyboardInterrupt(s)
            self.frozen = s == signal.SIGUSR1
            if not self.frozen:
                self._overload = None  # resumed by the operator
            if self._started and self.frozen:
                self._broadcast({"op": "freeze"})
                self._announce("freeze", {"t_ns": self.sim_time_ns(), "by": "operator", "reason": "SIGUSR1"})
            elif self._started:  # realtime re-anchors: sim time t_ns at wall_ns, the same for all
                t_common = max([r.t_ns for r in self.records.values()] or [0])
                self._broadcast({"op": "resume", "wall_ns": wall_ns() + 50_000_000, "t_ns": t_common})
                self._announce("resume", {"t_ns": t_common, "by": "operator", "reason": "SIGUSR2"})
        now = time.monotonic()
        if self._started:
            self._check_hosts(now)
        if self._overload is not None and now >= self._overload[1]:
            raise _Failed(f"{self._overload[0]}; no resume within sim.freeze_stop_after "
                          f"({float(self.plan.sim.get('freeze_stop_after', 0.0)):g} s): stopped")
        if now >= self._next_ping:
            self._next_ping = now + min(0.5, float(self.plan.sim["heartbeat_timeout"]) / 4)
            self._broadcast({"op": "ping", "t_ns": self.sim_time_ns()})

    def _check_hosts(self, now: float) -> None:
        """Every other host's liveness: its services and its launcher answer the pings (and, on
        ``clock = "sync"``, ask the time); one silent for ``sim.heartbeat_timeout`` is lost, and
        the run stops, naming the host, its services and the instant (its rig parks on its side, whose
        launcher stops its services when the master falls silent). A run never goes on unrecorded:
        a lost host that ran the logger stops it the same way."""
        hb = float(self.plan.sim["heartbeat_timeout"])
        host = None
        for name in self._remote:
            rec = self.records[name]
            if rec.stopped or rec.done and rec.role != "sink":
                continue
            last = self._heard.get(name)
            if last is not None and now - last > hb:
                host = self.plan.services[name].host or "remote"
                break
        for f, h in self._follower_host.items():
            last = self._heard.get(f)
            if host is None and last is not None and now - last > hb:
                host = h
        if host is None:
            return
        names = [n for n in self._remote if (self.plan.services[n].host or "remote") == host] or \
            [n for n in self._remote if n in self.hosts.get(host, {}).get("services", ())]
        t_s = self.sim_time_ns() * 1e-9
        self.lost = {"host": host, "t": t_s, "services": names}
        logger = [n for n in names if self.records[n].role == "sink"]
        raise _Failed(f"host {host} lost at t = {t_s:.3f} s: no word from "
                      + (f"its services {', '.join(names)}" if names else "its launcher")
                      + f" for {hb:g} s (sim.heartbeat_timeout)"
                      + (f"; the logger ({', '.join(logger)}) is gone, so nothing more would be recorded"
                         if logger else "") + "; its rig parks on its side")

    def _drain_bus(self) -> None:
        """Every queued bus message: probes, live statistics, and the ``subscribe`` topics for the hook."""
        while self.bus is not None and (m := self.bus.recv(0.0)) is not None:
            try:
                st = decode(m.topic, m.payload)
            except MessageError:
                continue
            if m.topic == "sim/control":  # a probe: that publisher reaches our SUB
                self._probes_seen.add(st.sender)
            elif m.topic == "sim/stats":
                rec = self.records.get(st.sender)
                if rec is not None:  # the latest live statistics
                    rec.live = dict(st.body)
                    rec.t_ns = max(rec.t_ns, st.t_ns)
            else:
                try:
                    self.on_message(m.topic, st)
                except Exception as err:  # noqa: BLE001 - a failing hook fails the run, reported like a service
                    raise _Failed(f"launcher hook on_message raised {type(err).__name__}: {err}") from err

    def _announce(self, cmd: str, info: dict[str, Any]) -> None:
        """Put a lifecycle event (freeze, resume, what a frozen service said) on ``sim/control``: the logger
        records it, so the frozen interval shows in the log."""
        if self.bus is not None:
            self._ctl_seq += 1
            try:
                self._control_pub(cmd, self._ctl_seq, info)
            except MessageError as err:  # not for want of a record: the run goes on, the note says what
                self._say(f"note: could not log {cmd!r}: {err}")

    def _control_pub(self, cmd: str, seq: int, info: dict[str, Any] | None = None) -> None:
        self.bus.send("sim/control", encode("sim/control", {"cmd": cmd, "info": info or {}}, sender="launcher",
                                            seq=seq, t_ns=0, h_ns=self.plan.base_tick_ns or 1))

    def _handshake(self) -> None:
        """Probe until every service's SUB has seen every PUB (and ours has seen theirs); then ack."""
        deadline = time.monotonic() + float(self.plan.sim["ready_timeout"])
        seq = 0
        seen = self._probes_seen
        names = set(self.records)
        while not (seen >= names and all(r.probed for r in self.records.values())):
            if time.monotonic() > deadline:
                missing = [f"{r.name} ({'no hello' if not r.hello else 'not probed' if not r.probed else 'no probe'})"
                           for r in self.records.values() if not (r.probed and r.name in seen)]
                raise _Failed(f"not ready within {self.plan.sim['ready_timeout']} s: {', '.join(missing)}")
            self._control_pub("probe", seq)
            seq += 1
            self._poll(0.01)  # also collects the probes our SUB sees
        for rec in self.records.values():
            rec.acked = self.server.send(rec.name, {"op": "ack"})
        self._ctl_seq = seq

    def _producers(self) -> dict[str, int]:
        """Every produced topic's coupling period [ns] (:func:`protocol.coupling.coupling_periods`)."""
        owner: dict[str, str] = {}
        hellos = {n: r.hello or {} for n, r in self.records.items()}  # every one said hello by now
        for name, hello in hellos.items():
            for topic, _kind in hello.get("outputs", []):
                if topic in owner:
                    raise _Failed(f"topic {topic!r} is produced by both {owner[topic]!r} and {name!r}")
                owner[topic] = name
        try:
            producers = coupling_periods(self._ports(), {n: s.coupling_ns for n, s in self.plan.services.items()})
        except ConfigError as err:
            raise _Failed(f"coupling: {err}") from err
        for rec in self.records.values():
            absent = [t for t, _ in hellos[rec.name].get("inputs", []) if t not in producers]
            if absent:
                self._say(f"note: {rec.name!r} inputs with no producer in this run: {', '.join(absent)}")
        return producers

    def _ports(self) -> dict[str, dict[str, Any]]:
        """Every service's role and ports, as its hello said (for :func:`protocol.stepping.event_progress`)."""
        return {n: {"role": (r.hello or {}).get("role", "model"), "period_ns": (r.hello or {}).get("period_ns", 0),
                    "inputs": (r.hello or {}).get("inputs", []), "outputs": (r.hello or {}).get("outputs", [])}
                for n, r in self.records.items()}

    def _run_master(self) -> int:
        sim = self.plan.sim
        try:
            self._start_local()
            self._handshake()
            producers = self._producers()
            if self._remote and self.admission is not None:
                self._print_tables()
            t0 = 0
            dur = self.plan.duration_ns
            # every service and every coupling interval ends at t_end (a flow's last mean is then complete)
            grid = math.lcm(self.plan.longest_period_ns, *(p for p in producers.values() if p > 0))
            t_end = t0 + align_up(dur, grid) if dur else 0
            start = {"op": "start", "t0_ns": t0, "t_end_ns": t_end, "mode": sim["mode"],
                     "speed": float(sim["speed"]),
                     # the agreed start instant on the time base (this clock); other hosts' processes have
                     # followed it since their hello (protocol.clocksync), so they start at the same instant
                     "start_wall_ns": wall_ns() + (500_000_000 if self._remote else 300_000_000),
                     "producers": producers, "services": self._ports(), "overrun_policy": sim["overrun_policy"],
                     "overrun_limit": sim["overrun_limit"], "max_lag_ns": int(sim["max_lag"] * _S),
                     "max_input_age_ns": int(sim["max_input_age"] * _S),
                     "freeze_park_after_ns": int(sim["freeze_park_after"] * _S),
                     "stats_period_ns": int(sim["stats_period"] * _S),
                     "heartbeat_timeout_ns": int(sim["heartbeat_timeout"] * _S), "seed": sim["seed"],
                     "stall_timeout_ns": int(sim["stall_timeout"] * _S),
                     "rt_priority": sim["rt_priority"],
                     "full_rate": [n for n, spec in self.plan.services.items() if spec.full_rate]}
            self._control_pub("start", self._ctl_seq, {"t_end_ns": t_end, "mode": sim["mode"]})
            wall0 = self._wall0 = time.monotonic()
            self._broadcast(start)
            self._started = True
            if self.frozen:  # SIGUSR1 before the start: start frozen
                self._broadcast({"op": "freeze"})
            steppers = [r for r in self.records.values() if r.role != "sink"]
            while not (t_end and all(r.done for r in steppers)):
                self._poll(0.05)
            wall = time.monotonic() - wall0
            self._tick(final=True)
            self._stop_all()
            self._summary(t_end, wall)
            return 0
        except _Failed as e:
            self._say(f"{e}; stopping the others")
            self._stop_all(fast=True)
            self._summary(None, None)
            return 2 if self._refused else 1
        except KeyboardInterrupt as e:
            s = e.args[0] if e.args else signal.SIGINT
            self._say(f"{signal.Signals(s).name}: stopping every service")
            self._stop_all()
            self._summary(None, None)
            return 128 + int(s)

    def _stop_all(self, fast: bool = False) -> None:
        """Stop models/sources, then sinks; terminate, then kill, stragglers.

        In order (normal stop): models and sources first, so that the sinks (the logger)
        still see their last messages, then the sinks, which get as long as they need to
        take what is still queued (:data:`protocol.shell.SINK_DRAIN_LIMIT_NS` at most). After a failure (``fast``) every
        service is told to stop at once and all are reaped together, so the whole stop
        takes at most ~0.7 s (0.4 s grace, SIGTERM, 0.2 s, SIGKILL).
        """
        if fast:
            everyone = list(self.records.values())
            self._send_stop(everyone)
            self._reap(everyone, 0.4)
            return
        groups = [[r for r in self.records.values() if r.role != "sink"],
                  [r for r in self.records.values() if r.role == "sink"]]
        for group, grace in zip(groups, (3.0, SINK_DRAIN_LIMIT_NS / _S + 1.0), strict=True):
            self._send_stop(group)
            self._reap(group, grace)
        self._reap(list(self.records.values()), 0.2)

    def _send_stop(self, group: list[ServiceRecord]) -> None:
        """Tell ``group`` and every follower launcher to stop (no-op without a control server)."""
        if self.server is None:
            return
        for r in group:
            self.server.send(r.name, {"op": "stop"})
        for f in getattr(self, "_followers", ()):  # with what the master knows of every service (their tables)
            self.server.send(f, {"op": "stop", "stats": self._stats_for_followers()})

    def _reap(self, group: list[ServiceRecord], grace: float) -> None:
        """Wait (at most ``grace`` s) until every service of ``group`` has stopped and every process
        whose services are all stopped has ended; then SIGTERM, and SIGKILL 0.2 s later, those
        processes that are still there. A process that also runs services outside ``group`` (a
        process group holding the logger) is left running."""
        end = time.monotonic() + grace
        for r in group:
            r.stopped = True
        mates: dict[int, list[ServiceRecord]] = {}
        for r in self.records.values():
            handle = r.proc if r.proc is not None else r.thread
            if handle is not None:
                mates.setdefault(id(handle), []).append(r)

        def finished(r: ServiceRecord) -> bool:
            """Its process may end now: every service it runs is stopped."""
            handle = r.proc if r.proc is not None else r.thread
            return handle is None or all(x.stopped for x in mates[id(handle)])

        def waiting(r: ServiceRecord) -> bool:
            if not r.local or not r.alive():
                return False
            return finished(r) or r.state not in ("stopped", "error")

        while time.monotonic() < end and any(waiting(r) for r in group):
            if self.server is not None:
                got = self.server.recv(0.01)
                if got is not None:
                    try:
                        self._handle(*got)
                    except _Failed:
                        pass
            else:
                time.sleep(0.01)
        stuck = list({id(r.proc): r.proc for r in group if r.proc is not None and r.proc.poll() is None
                      and finished(r)}.values())
        for p in stuck:  # SIGTERM all at once, then SIGKILL whoever is left after 0.2 s
            p.terminate()
        end = time.monotonic() + 0.2
        while stuck and time.monotonic() < end:
            stuck = [p for p in stuck if p.poll() is None]
            time.sleep(0.005)
        for p in stuck:
            p.kill()
        for p in stuck:
            p.wait(1.0)
        for thread in {id(r.thread): r.thread for r in group if r.thread is not None and finished(r)}.values():
            thread.join(0.5)

    def _summary(self, t_end: int | None, wall: float | None) -> None:
        out: dict[str, Any] = {"event": "summary", "t_end_ns": t_end, "wall_s": wall,
               "services": {n: r.stats or r.live for n, r in self.records.items()}}
        if self.diverged:
            out["diverged"] = dict(self.diverged)
        if self.lost:
            out["lost"] = dict(self.lost)
        hosts = self._host_summary()
        if hosts:
            out["hosts"] = hosts
        ignored = dict(self.control_ignored)
        if self.server is not None and self.server.malformed:
            ignored["(not a msgpack map)"] = self.server.malformed
        if ignored:
            out["control_ignored"] = ignored
        print(json.dumps(out), file=self.out, flush=True)

    def _host_summary(self) -> dict[str, dict[str, Any]]:
        """Several hosts: per host, its services, its admission table and how its clock followed the master's
        (offset, drift, round trips: from its processes' final statistics)."""
        if not self._remote and not self.hosts:
            return {}
        out: dict[str, dict[str, Any]] = {}
        for name, spec in self.plan.services.items():
            host = spec.host or (self.host if self.records[name].local else "remote")
            h = out.setdefault(host, {"services": []})
            h["services"].append(name)
            stats = self.records[name].stats or self.records[name].live
            if stats.get("clock") and "clock" not in h:
                h["clock"] = stats["clock"]
        if self.admission is not None:
            out.setdefault(self.host, {"services": []})["admission"] = self.admission
        for host, info in self.hosts.items():
            if info.get("admission") is not None:
                out.setdefault(host, {"services": []})["admission"] = info["admission"]
        return out

    def _print_tables(self) -> None:
        """Realtime over several hosts: every host's admission table, the master's first."""
        tables = [(self.host, self.admission)] + [(h, v.get("admission")) for h, v in self.hosts.items()]
        for host, adm in tables:
            if adm:
                self._say(f"realtime admission, host {host}:\n  " + "\n  ".join(adm.get("table") or ()))

    # ------------------------------------------------------------------ follower
    def _run_follower(self, sec: Any, admitted: bool = True) -> int:
        """Follow the master: say hello (with this host's admission table), start the local processes
        (on the master's time base, ``sim.clock = "sync"``), report a local death, and stop them when the
        master says stop or falls silent for ``sim.heartbeat_timeout`` (their rig parks). 2 if this
        host's admission refused the run (the master is told, and stops too)."""
        self._say(f"{self.url} is not on this host: following its launcher with {', '.join(self.plan.only)}")
        ident = f"follower:{os.uname().nodename}-{os.getpid()}"
        if self.plan.sim.get("clock", "sync") == "sync":
            self._clock = "sync"
        master = master_host(self.plan) or "the master's"
        with ControlClient(self.url, ident, security=sec, context=self.ctx) as ctl:
            hello = {"op": "hello" if admitted else "refused", "host": self.host, "services": list(self.plan.only),
                     "admission": self.admission}
            ctl.send(hello)
            if not admitted:
                time.sleep(0.2)  # the refusal on its way before the socket closes
                return 2
            self._start_local()
            last = time.monotonic()
            # until the master's first word allow for its start-up; then its pings must go on
            hb = float(self.plan.sim["heartbeat_timeout"]) + float(self.plan.sim["ready_timeout"])
            code = 0
            t_ns = 0
            while True:
                msg = ctl.recv(0.05)
                if msg is not None:
                    last = time.monotonic()
                    hb = float(self.plan.sim["heartbeat_timeout"])
                    op = msg.get("op")
                    if op == "ping":
                        t_ns = int(msg.get("t_ns", t_ns))
                        ctl.send({"op": "alive"})
                    if op == "stop" and msg.get("refused"):
                        self._say(f"{msg['refused']}: not starting the services of host {self.host}")
                        code = 2
                        break
                    if op == "stop":
                        self.stats_from_master = dict(msg.get("stats") or {})
                        for n, st in self.stats_from_master.items():
                            if n in self.records and st:
                                self.records[n].stats = dict(st)
                        break
                dead = [r for r in self.records.values() if r.local and r.proc is not None and not r.alive()
                        and r.proc.returncode != 0]
                if dead:
                    r = dead[0]
                    ctl.send({"op": "died", "name": r.name, "reason": r.exit_reason()})
                    self._say(f"service {r.name!r} died: {r.exit_reason()}; told the master")
                    code = 1
                    time.sleep(0.05)
                    break
                if self._signal in (signal.SIGINT, signal.SIGTERM):
                    code = 128 + int(self._signal)
                    break
                if time.monotonic() - last > hb:
                    self.lost = {"host": master, "t": t_ns * 1e-9, "services": []}
                    self._say(f"host {master} (the master launcher) lost at t = {t_ns * 1e-9:.3f} s: no word for "
                              f"{hb:g} s (sim.heartbeat_timeout); stopping the services of host {self.host} "
                              "(the rig parks)")
                    code = 1
                    break
                if all(r.proc is not None and r.proc.poll() == 0 for r in self.records.values() if r.local):
                    break
            if code == 0:  # stopped by the master, which stops each of them too (sinks last): let them finish
                self._reap([r for r in self.records.values() if r.local], SINK_DRAIN_LIMIT_NS / _S + 2.0)
            else:
                self._stop_local()
        return code

    def _stop_local(self) -> None:
        """Follower: SIGTERM the local processes at once (each stops cleanly: the logger closes its log, the
        bridge parks the rig), then reap them."""
        for r in self.records.values():
            if r.local and r.proc is not None and r.proc.poll() is None:
                try:
                    r.proc.send_signal(signal.SIGTERM)
                except ProcessLookupError:
                    pass
        self._reap([r for r in self.records.values() if r.local], 2.0)
