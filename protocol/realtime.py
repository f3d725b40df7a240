"""Real-time scheduling of a run, as a real-time executive does it (after NASA Trick's).

The one module that touches the OS scheduler: SCHED_FIFO priorities assigned
rate-monotonically, CPU affinity, locked memory, the ZeroMQ I/O thread's priority, and the
admission check that refuses a run whose measured utilization the host's cores cannot
schedule. Every other module asks it (the shell, the launcher, the rig emulator, the bench).

Priorities (realtime mode)
--------------------------
Every OS process of a run is one task: its period is its fastest service's, and the
process holding a device kind (capability ``device`` in :mod:`protocol.registry`: the hil
bridge) counts as the fastest of the run whatever its rate (a rig link's watchdog does
not wait). Rate-monotonic assignment gives shorter periods higher SCHED_FIFO priorities,
from :data:`SERVICE_PRIORITY_LOW` up to :data:`SERVICE_PRIORITY_HIGH` (``sim.rt_priority``
shifts the band; 0 turns real-time scheduling off). A process's ZeroMQ I/O thread runs at
the process's priority (:func:`io_context`).

The supervisor and the logger are never starved, by two different means:

- the launcher runs at :data:`SUPERVISOR_PRIORITY`, above every service: it sleeps in its
  poll almost all the time, wakes for control messages and its 0.1 s checks, so it takes
  little and always gets the core when it needs it;
- the logger (and anything else not real-time) stays under normal scheduling; it runs when
  the real-time tasks sleep, which on the scenario's budget is most of the time, and the
  kernel's RT throttling (``/proc/sys/kernel/sched_rt_runtime_us``, 95 % by default)
  guarantees normal tasks a share even if a real-time task spun.

The rig emulator stands for a rig's firmware, which is real-time on its own hardware: it
runs at :data:`RIG_PRIORITY`, above the services.

Where the OS refuses a priority (no CAP_SYS_NICE), :func:`set_priority` says so once per
process and the run goes on under normal scheduling.

Admission
---------
:func:`calibrate` times each service's step on this host (a short lockstep run of the
models in one thread: :func:`protocol.scheduler.simulate`); :func:`admission` assigns the
processes to the cores (first fit, largest utilization first; ``cpus`` pins respected)
and checks each core with the hyperbolic bound of Bini et al. (2003), ``Π (1 + U_i) ≤ 2``
for rate-monotonic scheduling, less pessimistic than Liu–Layland's ``n (2^(1/n) − 1)``
(both are printed). A process's utilization is the sum of its services' ``C_p99 / T``.

The emulated rig is charged to the rig, not to the bridge. A calibration model may run in-process
a stand-in for work that, in a run, another process does: the hil bridge's
(:func:`hil.bridge.calibration_model`) answers its frames with the rig emulator's core in its own
thread, so that it steps on real replies, and the emulated firmware's work (decoding the frames,
the rig's steps, its telemetry) would otherwise be timed as the bridge's. Such a model carries an
:class:`EmbeddedRig` (attribute ``embedded_rig``): the thread CPU time spent in the stand-in,
which :class:`TimedModel` subtracts from the model's step and keeps apart. Where the run's rig is
the emulator (``[hil] url = "emulator"``) that work is a realtime process on this host, at
:data:`RIG_PRIORITY`, so its load stays in the admission: its own row, service
``<bridge>`` + :data:`RIG_KEY` in process ``<bridge>-emulator``, its cost per bridge period (one
exchange per frame; its realtime loop also wakes at the rig core's rate between frames, which this
does not count). It runs above every service, not at its rate-monotonic rank, so on its core it is
counted at the shortest period there (``C / T_min``: a task of that period at the top of the
rate-monotonic order interferes with every other at least as much as it does), and the bound holds
for it too. A real rig (any other ``url``) runs its firmware on its own hardware: its cost is
neither the bridge's nor this host's and is left out.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from errors import ConfigError
from protocol.registry import capabilities, kind_module

__all__ = [
    "SERVICE_PRIORITY_LOW", "SERVICE_PRIORITY_HIGH", "SUPERVISOR_PRIORITY", "RIG_PRIORITY",
    "die_with_parent", "set_thread_name", "fine_timer_slack", "fifo_permitted", "kernel_preemption", "set_priority",
    "set_normal",
    "pin_cpus", "lock_memory", "io_context", "rate_monotonic", "Task", "admission", "calibrate",
    "hyperbolic_ok", "liu_layland_bound", "priorities", "realtime_plan", "PRIORITY_BAND", "LAZY_IMPORTS", "preload",
    "TimedModel", "EmbeddedRig", "RIG_KEY",
]

SERVICE_PRIORITY_LOW = 10
"""SCHED_FIFO priority of the slowest process of a run (``sim.rt_priority``'s default)."""
SERVICE_PRIORITY_HIGH = 70
"""SCHED_FIFO priority of the fastest (and of the rig link's process)."""
RIG_PRIORITY = 80
"""The rig emulator (a rig's firmware): above the services."""
SUPERVISOR_PRIORITY = 90
"""The launcher: above everything, and asleep almost all the time."""
RIG_KEY = "/rig"
"""A calibration's cost of a model's in-process rig emulation is keyed ``<service>/rig`` (:func:`calibrate`)."""

# prctl(2) options (linux/prctl.h)
PR_SET_PDEATHSIG = 1
PR_SET_NAME = 15
PR_SET_TIMERSLACK = 29
# mlockall(2) flags (sys/mman.h)
MCL_CURRENT = 1
MCL_FUTURE = 2

_said: set[str] = set()  # notes already printed by this process


def _note(key: str, text: str) -> None:
    if key not in _said:
        _said.add(key)
        print(f"berthsim: note: {text}", file=sys.stderr, flush=True)


def _libc() -> Any:
    return ctypes.CDLL(None, use_errno=True)


def die_with_parent(sig: int = signal.SIGTERM) -> None:
    """Linux: get ``sig`` when the parent process dies (``PR_SET_PDEATHSIG``): no orphans."""
    try:
        _libc().prctl(PR_SET_PDEATHSIG, int(sig))
    except (OSError, AttributeError):
        pass


def set_thread_name(name: str) -> None:
    """Linux: the calling thread's name as ``top`` and ``ps`` show it (``PR_SET_NAME``, 15 bytes)."""
    try:
        _libc().prctl(PR_SET_NAME, ctypes.c_char_p(name.encode()[:15]), 0, 0, 0)
    except (OSError, AttributeError):
        pass


def fine_timer_slack() -> None:
    """Linux: let the calling thread's sleeps end within a microsecond of their deadline
    (``PR_SET_TIMERSLACK`` = 1 ns; the default slack is 50 µs)."""
    try:
        _libc().prctl(PR_SET_TIMERSLACK, 1)
    except (OSError, AttributeError):
        pass


_permitted: tuple[bool, str] | None = None


def fifo_permitted() -> tuple[bool, str]:
    """Whether this process may use SCHED_FIFO (tried once, on a scratch thread), and why not."""
    global _permitted
    if _permitted is not None:
        return _permitted
    if not hasattr(os, "sched_setscheduler"):
        _permitted = (False, "this OS has no sched_setscheduler")
        return _permitted
    out: list[tuple[bool, str]] = []

    def probe() -> None:
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
            out.append((True, ""))
        except OSError as err:
            out.append((False, f"{err.strerror or err} (needs CAP_SYS_NICE or an RLIMIT_RTPRIO)"))

    t = threading.Thread(target=probe)
    t.start()
    t.join()
    _permitted = out[0] if out else (False, "the probe did not run")
    return _permitted


def set_priority(priority: int, *, reset_on_fork: bool = False) -> bool:
    """Run the calling thread SCHED_FIFO at ``priority`` (1…99); 0 leaves it as it is.

    ``reset_on_fork``: the processes it starts begin under normal scheduling. Where the OS
    refuses, a note is printed once per process and False returned: the caller runs on
    under normal scheduling.
    """
    if priority <= 0:
        return False
    ok, why = fifo_permitted()
    if not ok:
        _note("fifo", f"SCHED_FIFO not available ({why}); running under normal scheduling")
        return False
    policy = os.SCHED_FIFO | (getattr(os, "SCHED_RESET_ON_FORK", 0) if reset_on_fork else 0)
    try:
        os.sched_setscheduler(0, policy, os.sched_param(min(int(priority), 99)))
        return True
    except OSError as err:
        _note("fifo", f"SCHED_FIFO priority {priority} refused ({err}); running under normal scheduling")
        return False


def kernel_preemption() -> str:
    """This kernel's preemption model: ``"rt"``, ``"full"``, ``"voluntary"``, ``"none"`` or ``"unknown"``.

    Read from, in order: ``uname -v`` (``PREEMPT_RT``), the dynamic setting
    (``/sys/kernel/debug/sched/preempt``, the current one in parentheses; needs debugfs), the
    boot line's ``preempt=``, and the build's default (``/proc/config.gz``, else ``uname -v``).
    Under ``"none"`` or ``"voluntary"`` a SCHED_FIFO thread that wakes up waits until the task
    running on its core leaves the kernel or yields: behind another process's long system call,
    wake-ups are late by milliseconds whatever the priority (measured on a 2-core host under a
    test-suite load: 1 kHz loops late by up to 8 ms, a rig emulator's 2 ms poll by up to 90 ms).
    """
    version = os.uname().version
    if "PREEMPT_RT" in version:
        return "rt"
    try:
        with open("/sys/kernel/debug/sched/preempt") as f:
            text = f.read()
        for word in text.split():
            if word.startswith("(") and word.endswith(")"):
                return word[1:-1]
    except OSError:
        pass
    try:
        with open("/proc/cmdline") as f:
            cmdline = f.read()
        for arg in cmdline.split():
            if arg.startswith("preempt="):
                return arg.split("=", 1)[1]
    except OSError:
        pass
    try:
        import gzip

        with gzip.open("/proc/config.gz", "rt") as f:
            config = f.read()
        for key, model in (("CONFIG_PREEMPT_RT=y", "rt"), ("CONFIG_PREEMPT=y", "full"),
                           ("CONFIG_PREEMPT_VOLUNTARY=y", "voluntary"), ("CONFIG_PREEMPT_NONE=y", "none")):
            if key in config:
                return model
    except OSError:
        pass
    if "PREEMPT " in version + " " and "PREEMPT_DYNAMIC" not in version:
        return "full"
    return "unknown"


def set_normal() -> None:
    """The calling thread back under normal scheduling (SCHED_OTHER)."""
    try:
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
    except (OSError, AttributeError):
        pass


def pin_cpus(cpus: Iterable[int]) -> bool:
    """Pin the calling process to ``cpus`` (none: leave it); a note if the OS refuses."""
    cpus = {int(c) for c in cpus}
    if not cpus or not hasattr(os, "sched_setaffinity"):
        return False
    try:
        os.sched_setaffinity(0, cpus)
        return True
    except OSError as err:
        _note("cpus", f"CPU affinity {sorted(cpus)} refused ({err}); running on any CPU")
        return False


def lock_memory() -> bool:
    """Lock the process's memory, present and future (``mlockall``): no page fault in a step."""
    try:
        libc = _libc()
        if libc.mlockall(MCL_CURRENT | MCL_FUTURE) != 0:
            err = ctypes.get_errno()
            _note("mlock", f"mlockall refused ({os.strerror(err)}; raise RLIMIT_MEMLOCK or run with "
                           "CAP_IPC_LOCK); memory not locked")
            return False
        return True
    except (OSError, AttributeError):
        return False


def io_context(priority: int) -> Any:
    """A bus context whose ZeroMQ I/O thread runs SCHED_FIFO at ``priority``, or None (the default context).

    The same priority as the process's stepping thread: the I/O thread gets the core whenever
    that thread sleeps or yields, and the stepping loop yields once per step even when late,
    so an overrunning service still receives the launcher's pings and its inputs. libzmq
    aborts if it cannot apply the policy, so the permission is tried first.
    """
    if priority <= 0 or not fifo_permitted()[0]:
        return None
    from protocol.bus import new_context

    return new_context(io_priority=priority)


LAZY_IMPORTS = ("scipy.spatial.transform", "scipy.integrate", "scipy.optimize", "scipy.linalg")
"""Modules the physics imports inside functions (each takes 0.1–0.4 s, which a command-line start
should not pay when it does not need them); a realtime process imports them while it is built
(:func:`preload`): the first call would otherwise cost a step tens to hundreds of ms."""


def preload() -> None:
    """Import :data:`LAZY_IMPORTS` now (a realtime worker after building its services; the launcher
    before an ``--inprocess`` realtime run)."""
    import importlib

    for name in LAZY_IMPORTS:
        importlib.import_module(name)


def rate_monotonic(periods: Mapping[str, int], fastest: Iterable[str] = (), base: int = SERVICE_PRIORITY_LOW,
                   top: int = SERVICE_PRIORITY_HIGH) -> dict[str, int]:
    """Rate-monotonic SCHED_FIFO priorities: the shorter a task's period, the higher its priority.

    Parameters
    ----------
    periods : Mapping[str, int]
        Task (OS process) -> its period [ns] (its fastest service's).
    fastest : iterable of str
        Tasks ranked with the shortest period whatever theirs (the rig link's process).
    base, top : int
        The slowest task's priority and the fastest's; distinct periods get distinct
        priorities in between, evenly spread (equal periods share one).

    Returns
    -------
    dict[str, int]
    """
    fastest = set(fastest)
    shortest = min(periods.values(), default=1)
    eff = {n: (shortest if n in fastest else int(p)) for n, p in periods.items()}
    levels = sorted(set(eff.values()), reverse=True)  # longest period first: lowest priority
    if len(levels) == 1:
        return {n: top for n in eff}
    step = (top - base) / (len(levels) - 1)
    prio = {p: round(base + i * step) for i, p in enumerate(levels)}
    return {n: prio[p] for n, p in eff.items()}


def liu_layland_bound(n: int) -> float:
    """Liu & Layland (1973): n tasks are rate-monotonic schedulable if ``Σ U ≤ n (2^(1/n) − 1)``."""
    return n * (2.0 ** (1.0 / n) - 1.0) if n > 0 else 1.0


def hyperbolic_ok(utilizations: Sequence[float]) -> bool:
    """Bini, Buttazzo & Buttazzo (2003): rate-monotonic schedulable if ``Π (1 + U_i) ≤ 2``."""
    p = 1.0
    for u in utilizations:
        p *= 1.0 + u
    return p <= 2.0


@dataclass
class Task:
    """One OS process of a realtime run, as the admission check sees it.

    Attributes
    ----------
    name : str
    services : tuple of str
    period_ns : int
        Its fastest service's period.
    utilization : float
        Σ over its services of step cost (p99) / period.
    cpus : tuple of int
        Pinned CPUs (empty: any).
    priority : int
    costs : dict
        Service -> (period [ns], step p50 [µs], step p99 [µs]).
    top : bool
        It runs above every rate-monotonic task whatever its period (the rig emulator): on its core it is
        counted at the core's shortest period (:func:`admission`).
    """

    name: str
    services: tuple[str, ...]
    period_ns: int
    utilization: float
    cpus: tuple[int, ...] = ()
    priority: int = 0
    costs: dict[str, tuple[int, float, float]] = field(default_factory=dict)
    top: bool = False


def _core_utilizations(tasks: Sequence[Task]) -> list[float]:
    """The utilizations the bound takes for ``tasks`` on one core: each its own, but a task above the
    rate-monotonic order (:attr:`Task.top`) at the core's shortest period, ``C / T_min`` (module docstring)."""
    shortest = min((t.period_ns for t in tasks), default=0)
    return [t.utilization * t.period_ns / shortest if t.top and 0 < shortest < t.period_ns else t.utilization
            for t in tasks]


def admission(tasks: Sequence[Task], cores: int) -> tuple[bool, list[str], dict[str, int]]:
    """Assign tasks to cores and check each core's rate-monotonic bound (module docstring).

    Returns
    -------
    ok : bool
        Every core passes the hyperbolic bound.
    table : list of str
        The utilization table, one line per service, task and core, and the verdict.
    core_of : dict[str, int]
        Task -> the core it was assigned.
    """
    load = [0.0] * max(cores, 1)
    on: list[list[Task]] = [[] for _ in load]
    core_of: dict[str, int] = {}
    for t in sorted(tasks, key=lambda x: -x.utilization):
        allowed = [c for c in (t.cpus or range(len(load))) if 0 <= c < len(load)] or list(range(len(load)))
        fits = [c for c in allowed if hyperbolic_ok(_core_utilizations([*on[c], t]))]
        c = min(fits or allowed, key=lambda k: load[k])
        on[c].append(t)
        load[c] += t.utilization
        core_of[t.name] = c
    lines = [(f"{'process':<14} {'service':<10} {'rate':>8} {'step p50':>10} {'step p99':>10} {'U':>7} "
              f"{'prio':>5} {'core':>5}")]
    for t in sorted(tasks, key=lambda x: (core_of[x.name], -x.priority)):
        for s in t.services:
            period, p50, p99 = t.costs.get(s, (t.period_ns, 0.0, 0.0))
            lines.append(f"{t.name:<14} {s:<10} {1e9 / period:>6.0f}Hz {p50:>8.1f}us {p99:>8.1f}us "
                         f"{p99 * 1e3 / period:>7.3f} {t.priority:>5} {core_of[t.name]:>5}")
    ok = True
    for c, ts in enumerate(on):
        us = _core_utilizations(ts)
        prod = 1.0
        for u in us:
            prod *= 1.0 + u
        good = hyperbolic_ok(us)
        ok &= good
        lines.append(f"core {c}: U = {sum(us):.3f} ({len(us)} processes), Π(1+U) = {prod:.3f} (bound 2), "
                     f"Liu–Layland bound {liu_layland_bound(len(us)):.3f}: "
                     f"{'schedulable' if good else 'NOT schedulable'}")
        for t, u in zip(ts, us, strict=True):
            if u != t.utilization:
                lines.append(f"  {t.name}: above the services (priority {t.priority}), counted at core {c}'s "
                             f"shortest period: U = {u:.3f}")
    lines.append("admitted: every core is schedulable" if ok else
                 "refused: the services' measured steps do not fit this host's cores at these rates")
    return ok, lines, core_of


def calibrate(config: Mapping[str, Any], services: Mapping[str, Any],
              seconds: float = 0.5) -> dict[str, tuple[float, float]]:
    """Each model's step cost on this host: (p50, p99) [µs] over a short lockstep run.

    The run's models (sinks and sources left out) are built from ``config`` (a module's
    ``calibration_model(config, name, period_ns)`` when it has one, e.g. the hil bridge with
    an in-process rig instead of a serial link, else its ``build``) and run by
    :func:`protocol.scheduler.simulate` for ``seconds`` of simulated time, with the run's
    coupling; every step is timed in this thread's CPU time (``time.thread_time_ns``: what the step
demands of a core, not the time other load on this host took it away; the first 20 % left out
as warm-up). A model's in-process rig emulation (:class:`EmbeddedRig`) is not its step's: its time is
subtracted, and, where it stands for the rig emulator's process on this host, returned under
``<service>/rig`` (:data:`RIG_KEY`).

    Parameters
    ----------
    config : Mapping
    services : Mapping[str, ServiceSpec]
        The plan's services (:class:`protocol.config.ServiceSpec`).
    seconds : float
        Simulated seconds of the calibration run.
    """
    from protocol.scheduler import simulate
    from protocol.service import role_of

    models = []
    for name, spec in services.items():
        mod = kind_module(spec.kind)
        if mod.ports(config, name).role != "model":
            continue  # sinks and sources are not built (a logger would open its log)
        make = getattr(mod, "calibration_model", None) or mod.build
        obj = make(dict(config), name, spec.period_ns)
        if role_of(obj) != "model":  # its ports() said model: a module that contradicts itself
            raise ConfigError(f"services.{name}: kind {spec.kind!r} declares the role 'model' in ports() but "
                              f"built a {role_of(obj)}")
        models.append(TimedModel(obj))
    longest = max((s.period_ns for s in services.values()), default=1)
    t_end = max(1, round(seconds * 1e9 / longest)) * longest
    try:
        import math

        coupling = {n: s.coupling_ns for n, s in services.items() if s.coupling_ns}
        grid = math.lcm(longest, *(p for c in coupling.values() for p in c.values()))
        simulate(models, ((t_end + grid - 1) // grid) * grid, coupling=coupling)
    finally:
        for m in models:
            closer = getattr(m.model, "close", None)
            if callable(closer):
                closer()
    out = {}
    for m in models:
        out[m.model.name] = _percentiles(m.step_s)
        if m.rig is not None and m.rig.on_host:
            out[m.model.name + RIG_KEY] = _percentiles(m.rig_s)
    return out


def _percentiles(step_s: Sequence[float]) -> tuple[float, float]:
    """(p50, p99) [µs] of step times [s], the first 20 % left out as warm-up."""
    ts = sorted(step_s[len(step_s) // 5:]) or [0.0]
    return ts[len(ts) // 2] * 1e6, ts[min(len(ts) - 1, int(0.99 * len(ts)))] * 1e6


@dataclass(frozen=True)
class EmbeddedRig:
    """A calibration model's in-process stand-in for the rig's firmware (its attribute ``embedded_rig``).

    Attributes
    ----------
    cpu_ns : callable
        The calibrating thread's CPU time spent in the emulated firmware so far [ns] (cumulative).
    on_host : bool
        In a run the firmware is the rig emulator's process on this host (``[hil] url = "emulator"``),
        at :data:`RIG_PRIORITY`: admitted on its own row. False: a real rig's own hardware, not this host's.
    """

    cpu_ns: Callable[[], int]
    on_host: bool


class TimedModel:
    """A model whose every ``step`` is timed in this thread's CPU time (``time.thread_time_ns``);
    everything else passes through to it.

    Attributes
    ----------
    model : ServiceModel
        The model timed.
    step_s : list of float
        CPU time of each step so far, in order, less its in-process rig emulation's. [s]
    rig : EmbeddedRig or None
        The model's in-process rig emulation (its ``embedded_rig``), if any.
    rig_s : list of float
        CPU time of that emulation in each step. [s]
    """

    def __init__(self, model: Any) -> None:
        self.model = model
        self.step_s: list[float] = []
        rig = getattr(model, "embedded_rig", None)
        self.rig: EmbeddedRig | None = rig if isinstance(rig, EmbeddedRig) else None
        self.rig_s: list[float] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.model, name)

    def initial(self, *args: Any) -> Any:
        """The model's ``initial`` (``(t0)``, or ``(t0, ctx)`` for a model with a context)."""
        return self.model.initial(*args)

    def step(self, *args: Any) -> Any:
        """The model's ``step`` (``(t, h, u)``, or ``(t, h, ctx, u)`` for a model with a context), timed."""
        if self.rig is None:
            c = time.thread_time_ns()
            out = self.model.step(*args)
            self.step_s.append((time.thread_time_ns() - c) * 1e-9)
            return out
        r = self.rig.cpu_ns()
        c = time.thread_time_ns()
        out = self.model.step(*args)
        c = time.thread_time_ns() - c
        r = self.rig.cpu_ns() - r
        self.step_s.append((c - r) * 1e-9)
        self.rig_s.append(r * 1e-9)
        return out


PRIORITY_BAND = 60
"""The services' priorities span ``sim.rt_priority`` (the slowest) to ``sim.rt_priority + 60`` (the fastest)."""


def priorities(plan: Any) -> dict[str, int]:
    """Each OS process's SCHED_FIFO priority in a realtime run of ``plan`` (0 each: normal scheduling).

    Rate-monotonic over the processes that step (sinks stay under normal scheduling, 0):
    a process's period is its fastest service's; a process holding a hil bridge counts as the
    fastest. Deterministic from the plan, so every process computes its own.

    Parameters
    ----------
    plan : RunPlan
        :func:`protocol.config.validate`'s plan (``processes``, ``services``, ``sim.rt_priority``).
    """
    base = int(plan.sim.get("rt_priority", 0) or 0)
    procs = plan.processes or {n: (n,) for n in plan.services}
    if base <= 0:
        return dict.fromkeys(procs, 0)
    stepping = {p: m for p, m in procs.items() if any(_steps(plan, n) for n in m)}
    periods = {p: min(plan.services[n].period_ns for n in m) for p, m in stepping.items()}
    rig = [p for p, m in stepping.items() if any("device" in capabilities(plan.services[n].kind) for n in m)]
    prio = rate_monotonic(periods, rig, base=base, top=base + PRIORITY_BAND)
    return {p: prio.get(p, 0) for p in procs}


def _steps(plan: Any, name: str) -> bool:
    """Whether service ``name`` steps (a model or a source; not a sink): from its module's ports."""
    mod = kind_module(plan.services[name].kind)
    ports = getattr(mod, "ports", None)
    if ports is None:
        return True
    try:
        return ports(plan.config, name).role != "sink"
    except Exception:  # noqa: BLE001 - a module that cannot say: assume it steps
        return True


def realtime_plan(plan: Any, cores: int | None = None, costs: Mapping[str, tuple[float, float]] | None = None,
                  local: Iterable[str] | None = None) -> tuple[bool, list[str], dict[str, int]]:
    """The admission check of a realtime run on this host: calibrate (unless ``costs`` are given), assign, check.

    A measured plan that does not fit is measured once more before it is refused: each service's step cost is
    then the lower of the two calibrations (a passing disturbance of the host inflates one of them, not both; a
    run that does not fit fails both), and the table says so.

    Admission is per host: only the processes whose services all run here (``local``,
    ``--only``) are placed on this host's cores. The calibration still runs every model of
    the plan, those of other hosts built here too, so that the local ones step on the inputs
    they will have in the run (a hil bridge alone has no orbiter state to map); only the
    local ones' costs count. Priorities come from the whole plan, so every host assigns the
    same ones.

    Parameters
    ----------
    plan : RunPlan
    cores : int, optional
        This host's cores (default :func:`os.cpu_count`).
    costs : Mapping[str, (p50, p99)], optional
        Step costs [µs] by service (default: measured by :func:`calibrate`).
    local : iterable of str, optional
        The services this host runs (default: all of the plan's).

    Returns
    -------
    ok : bool
    table : list of str
        :func:`admission`'s table, preceded by the priorities' origin.
    prio : dict[str, int]
        Process -> SCHED_FIFO priority (:func:`priorities`).
    """
    prio = priorities(plan)
    measured = costs is None
    costs = dict(costs) if costs is not None else calibrate(plan.config, plan.services)
    ok, head, table = _plan_on(plan, costs, cores, local, prio)
    if not ok and measured:
        # a refusal is confirmed by a second calibration: each step cost the lower of the two, since a passing
        # disturbance of this host (another process's burst, a cold cache) inflates one measurement, not both
        again = calibrate(plan.config, plan.services)
        costs = {n: (min(c[0], again.get(n, c)[0]), min(c[1], again.get(n, c)[1])) for n, c in costs.items()}
        ok, head, table = _plan_on(plan, costs, cores, local, prio)
        head.append("note: the first calibration did not fit; measured again, each step cost the lower of the two")
    return ok, head + table, prio


def _plan_on(plan: Any, costs: Mapping[str, tuple[float, float]], cores: int | None, local: Iterable[str] | None,
             prio: Mapping[str, int]) -> tuple[bool, list[str], list[str]]:
    """:func:`realtime_plan`'s check with given step costs: (ok, head lines, admission table)."""
    here = set(local) if local else set(plan.services)
    procs = plan.processes or {n: (n,) for n in plan.services}
    tasks = []
    for p, members in procs.items():
        if not all(n in here for n in members):
            continue  # another host's process: admitted there
        steppers = [n for n in members if n in costs]
        if not steppers:
            continue
        cpus = tuple(sorted({c for n in members for c in plan.services[n].cpus}))
        period = min(plan.services[n].period_ns for n in steppers)
        t_costs = {n: (plan.services[n].period_ns, costs[n][0], costs[n][1]) for n in steppers}
        u = sum(c99 * 1e3 / per for per, _, c99 in t_costs.values())
        tasks.append(Task(p, tuple(steppers), period, u, cpus, prio.get(p, 0), t_costs))
    for key, (c50, c99) in costs.items():  # the rig emulators of the local bridges (module docstring)
        svc = key[:-len(RIG_KEY)] if key.endswith(RIG_KEY) else ""
        if svc in here and svc in plan.services:
            per = plan.services[svc].period_ns
            tasks.append(Task(f"{svc}-emulator", (key,), per, c99 * 1e3 / per, (), RIG_PRIORITY,
                              {key: (per, c50, c99)}, top=True))
    ok, table, _ = admission(tasks, cores or os.cpu_count() or 1)
    head = [(f"realtime plan: {cores or os.cpu_count()} cores; SCHED_FIFO priorities rate-monotonic from "
             f"sim.rt_priority = {plan.sim.get('rt_priority', 0)} (hil: the fastest), launcher "
             f"{SUPERVISOR_PRIORITY}, rig emulator {RIG_PRIORITY}, logger normal scheduling; step costs measured "
             "here (p99)")]
    model = kernel_preemption()
    if model in ("none", "voluntary", "unknown"):
        head.append(f"note: kernel preemption {model!r}: a waking realtime loop waits for the running task to leave "
                    f"the kernel, so under other load its wake-ups can be late by milliseconds at any priority "
                    f"(a PREEMPT_RT kernel, or booting with preempt=full, bounds that)")
    return ok, head, table
