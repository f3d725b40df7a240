#!/usr/bin/env python3
"""berthsim's one entry point.

Subcommands live in :data:`COMMANDS`, a table ``name -> (help, add_arguments, handler)``;
add one with a one-line entry (``help=None`` hides it). ``python3 launch.py`` with no
arguments runs :data:`DEFAULT_CONFIG`, the SRMS berthing scenario (the main job).

    launch.py run [CONFIG] [--only a,b] [--inprocess] [--mode lockstep|realtime]
                           [--duration S] [--speed X] [--transport ipc|tcp|inproc] [--log PATH]
                           [--overwrite] [--hil URL] [--view [PORT]] [--no-report] [--json]
    launch.py check CONFIG|SWEEP [--only a,b]
    launch.py sweep SWEEP [--out DIR] [--scheduler URL] [--workers N] [--overwrite] [--rerun K --log PATH]
    launch.py keys DIR [--names server,client]
    launch.py recover LOG [--out PATH]

The main job (``run`` of a scenario with a contact service and a logger): a progress bar
on stderr on a terminal (simulation time, real-time factor, phase; ``BERTHSIM_NO_PROGRESS=1``
turns it off), the log under ``runs/<timestamp>/run.mcap`` unless ``--log`` or ``sim.log``
says otherwise, and beside it the report (``report/``) and the JSON summary
(``run.summary.json``, named after the log: the run's figures and every service's final statistics); on stdout, the
table of the figures (:func:`tools.report.run_figures`,
:func:`tools.report.summary_table`), and the JSON summary too with ``--json``. Any other
run prints a table of the services' statistics (and ``LOG.summary.json`` beside its log).

Exit codes: 0 success (for a scripted scenario: it went as scripted), 1 a service failed,
2 invalid configuration or usage, 3 the run ended but not as scripted (a phase missing,
a capture missed, the rig faulted), 128+signal when interrupted. The config layout is documented in
:mod:`protocol.config`, the run in :mod:`protocol.launcher`.
"""

from __future__ import annotations

import argparse
import importlib
import io
import json
import os
import shlex
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from errors import ConfigError

HERE = Path(__file__).resolve().parent
DEFAULT_CONFIG = HERE / "configs" / "srms_berthing.toml"


def _only(text: str | None) -> tuple[str, ...]:
    return tuple(n.strip() for n in text.split(",") if n.strip()) if text else ()


def _overrides(a: argparse.Namespace) -> dict[str, Any]:
    o = {"mode": a.mode, "duration": a.duration, "speed": a.speed, "log": a.log, "transport": a.transport,
         "overwrite": True if a.overwrite else None}
    if a.inprocess:
        o["transport"] = "inproc"
    return {k: v for k, v in o.items() if v is not None}


def _plan(config_path: str, only: tuple[str, ...], overrides: dict[str, Any] | None = None) -> Any:
    from protocol.config import load, validate
    # the config file's path in [sim] from the first validation on (a service may resolve files against it)
    overrides = {"config_file": str(Path(config_path).resolve()), **(overrides or {})}
    return validate(load(config_path), path=config_path, only=only, overrides=overrides)


def _config_problems(err: ConfigError) -> int:
    """Report a refused configuration on stderr (one line for one problem, else one per problem); 2."""
    if len(err.problems) == 1:
        print(f"berthsim: invalid configuration: {err.problems[0]}", file=sys.stderr)
        return 2
    print(f"berthsim: invalid configuration: {len(err.problems)} problem(s):", file=sys.stderr)
    for p in err.problems:
        print(f"  - {p}", file=sys.stderr)
    return 2


# ---------------------------------------------------------------- run
def _run_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", nargs="?", default=str(DEFAULT_CONFIG), help="TOML scenario (default: the embedded one)")
    p.add_argument("--only", help="comma-separated services to run on this host")
    p.add_argument("--inprocess", action="store_true", help="every service as a thread over inproc://")
    p.add_argument("--mode", choices=("lockstep", "realtime"))
    p.add_argument("--duration", type=float, help="simulation seconds (0 = until stopped)")
    p.add_argument("--speed", type=float, help="lockstep real-time factor (0 = as fast as possible)")
    p.add_argument("--transport", choices=("ipc", "tcp", "inproc"))
    p.add_argument("--log", help="MCAP log path (default runs/<timestamp>/run.mcap when the run has a logger)")
    p.add_argument("--overwrite", action="store_true", help="replace the log if it exists (else the run is refused)")
    p.add_argument("--hil", metavar="URL", help="the rig's serial port or pyserial URL instead of [hil] url")
    p.add_argument("--view", nargs="?", type=int, const=8765, default=None, metavar="PORT",
                   help="watch the run live: a viewer service on a Foxglove WebSocket, ws://127.0.0.1:PORT (default "
                        "8765), for Foxglove, Lichtblick or PlotJuggler (a lockstep run: pair with --speed 1)")
    p.add_argument("--no-report", action="store_true", help="no report and figures after the run")
    p.add_argument("--json", action="store_true",
                   help="also print the JSON summary (figures, every service's statistics) on stdout")


def _run_dir() -> Path:
    """A new ``runs/<timestamp>`` directory under the working directory."""
    base = Path("runs") / time.strftime("%Y%m%d-%H%M%S")
    d, k = base, 1
    while d.exists():
        d, k = base.with_name(f"{base.name}-{k}"), k + 1
    d.mkdir(parents=True)
    return d


def _with_hil_url(config: dict[str, Any], url: str) -> dict[str, Any]:
    """The config with ``[hil] url`` replaced (``run --hil URL``), in memory: the workers get the plan made of it."""
    hil = config.get("hil")
    return {**config, "hil": {**(hil if isinstance(hil, dict) else {}), "url": url}}


def cmd_run(a: argparse.Namespace) -> int:
    """Validate, then launch and supervise the run; after it, its summary.

    The human summary goes to stdout: for the main job (a scenario with a contact service
    and a log) the table of its figures (:func:`tools.report.summary_table`), else a
    table of the services' statistics. The JSON summary — the figures and every service's
    final statistics — goes into ``LOG.summary.json`` beside the log (:func:`summary_path`), and onto stdout only
    with ``--json``. Exit code 0 only when every service ran to the end and, for a scripted
    scenario, the run went as scripted (:func:`tools.report.expected_events`); 3 when
    it ran to the end but did not.
    """
    from protocol.config import load, validate
    from protocol.registry import has_capability
    only = _only(a.only)
    try:
        config = load(a.config)
    except ConfigError as err:
        return _config_problems(err)
    if a.hil:
        config = _with_hil_url(config, a.hil)
    if getattr(a, "view", None) is not None and isinstance(config.get("services"), dict):
        from tools.resim import add_viewer
        config = {**config, "services": dict(config["services"])}  # in memory, as --hil
        add_viewer(config["services"], a.view)
    # where the log goes is decided before the one validation (which checks it): a logger of this host and
    # no sim.log or --log: a new runs/<timestamp>/run.mcap
    services, sim_in = config.get("services"), config.get("sim")
    has_logger = isinstance(services, dict) and any(
        has_capability(s, "records") and (not only or n in only) for n, s in services.items())
    run_dir, made_runs = None, not Path("runs").exists()
    if a.log is None and has_logger and (sim_in if isinstance(sim_in, dict) else {}).get("log") is None:
        run_dir = _run_dir()
        a.log = str(run_dir / "run.mcap")
    overrides = _overrides(a)
    # provenance for the logger (it records them; it does not read the process's command line)
    overrides.update(command_line=a.command_line, config_file=str(Path(a.config).resolve()))
    if not a.inprocess and isinstance(services, dict):  # the workers' zygote imports while the config is checked
        from protocol.registry import kind_modules
        from protocol.zygote import start as start_zygote
        start_zygote(kind_modules(s.get("kind") for s in services.values() if isinstance(s, dict)))
    try:
        plan = validate(config, path=a.config, only=only, overrides=overrides)
    except ConfigError as err:
        if run_dir is not None:  # made for the log of a run that does not start: nothing is left behind
            run_dir.rmdir()
            if made_runs:
                run_dir.parent.rmdir()
        return _config_problems(err)
    show = os.environ.get("BERTHSIM_NO_PROGRESS", "") in ("", "0")
    from protocol.launcher import Launcher

    main_job = "contact" in plan.config.get("services", {})
    hooks: dict[str, Any] = {}
    progress = None
    if show:
        progress = Progress(sys.stderr, plan.duration_ns, phases=main_job)
        hooks = {"on_tick": progress.on_tick, "on_message": progress.on_message,
                 "subscribe": PROGRESS_TOPICS if main_job and "contact" in plan.services else ()}
    out = io.StringIO()  # the launcher's JSON summary line
    launcher = Launcher(plan, inprocess=a.inprocess, launch_py=__file__, out=out, **hooks)
    code = launcher.run()
    if progress is not None:
        progress.close()
    lines = out.getvalue().strip().splitlines()
    summary: dict[str, Any] = json.loads(lines[-1]) if lines else {}
    # the log of this host's logger (another host's is read there: on a shared disk it may still be open)
    log = Path(plan.sim["log"]) if plan.sim.get("log") and has_logger else None
    if code in (0, 1) and log is not None and log.exists() and main_job:
        code = _after_run(plan, log, launcher, code, summary, report=not a.no_report)
    else:
        if log is not None and log.exists():
            summary_path(log).write_text(json.dumps({"run": summary}, indent=1))
        if summary.get("services"):
            print(services_table(summary["services"]))
    several_hosts = any(not r.local for r in launcher.records.values())
    if several_hosts and plan.sim.get("mode") == "realtime":  # every service's timing, by host
        print(hosts_table(launcher))
    if a.json and summary:
        print(json.dumps(summary), flush=True)
    return code


def summary_path(log: Path) -> Path:
    """The JSON summary of a run, beside its log and named after it (``run.mcap`` -> ``run.summary.json``):
    two runs logging into one directory keep one each."""
    return log.with_name(f"{log.stem}.summary.json")


def _after_run(plan: Any, log: Path, launcher: Any, code: int, summary: dict[str, Any], report: bool) -> int:
    """Figures, table, the JSON summary (:func:`summary_path`) and report beside the log; the run's exit code."""
    from errors import LogError
    from tools.report import expected_events, make_report, mark_diverged, run_figures, summary_table
    try:
        fig = run_figures(log, plan.config)
    except LogError as err:
        print(f"berthsim: cannot read the log for the summary: {err}", file=sys.stderr)
        return code or 1
    if summary.get("diverged") and "diverged" not in fig:  # the logger stopped before the launcher's word
        mark_diverged(fig, summary["diverged"])
    t_end_ns = plan.duration_ns if code == 0 else max((r.t_ns for r in launcher.records.values()), default=0)
    t_end_s = t_end_ns * 1e-9
    expected = expected_events(plan.config, t_end_s)
    seen = [k for _, k in fig["events"]]
    it = iter(seen)
    rig_fault = fig.get("rig", {}).get("fault")  # a faulted rig did not run the scenario
    as_scripted = all(k in it for k in expected) and "miss" not in seen and not rig_fault  # in order (a subsequence)
    fig["ok"] = code == 0 and as_scripted
    fig["expected_events"] = expected
    stats = {n: r.stats or r.live for n, r in launcher.records.items()}  # final, else the latest sim/stats
    fig["overruns"] = {n: int(s.get("overruns", 0)) for n, s in stats.items() if s}
    fig["run"] = summary
    if report:
        try:
            rep = make_report(log, log.parent / "report")
            fig["report"] = str(rep.pdf)
        except Exception as err:  # noqa: BLE001 - the run's result stands without its plots
            print(f"berthsim: report failed: {type(err).__name__}: {err}", file=sys.stderr)
    summary_path(log).write_text(json.dumps(fig, indent=1, default=float))
    where = f"log {log}" + (f", report {fig['report']}" if "report" in fig else "")
    verdict = "completed as scripted" if fig["ok"] else "did NOT complete as scripted"
    print(f"berthsim: run {verdict}; {where}; figures in {summary_path(log)}")
    print(summary_table(fig, stats, fig["ok"]), flush=True)
    if code == 0 and not as_scripted:
        missing = [k for k in expected if k not in seen]
        miss = f"; capture missed: {fig['miss']['reason']}" if "miss" in fig else ""
        if rig_fault:
            print(f"berthsim: the rig faulted at t = {rig_fault['t']:.3f} s: {rig_fault['reason']}", file=sys.stderr)
        if missing or miss or not rig_fault:
            print(f"berthsim: expected events missing: {', '.join(missing) or 'order'}{miss}", file=sys.stderr)
        return 3
    return code


def hosts_table(launcher: Any) -> str:
    """Realtime over several hosts: per service (this host's and the others', as the master knows them)
    its overruns, step-start jitter p99 and input age p99, by host; and how each other host's clock
    followed the master's (offset, drift, round trip, uncertainty)."""
    stats = {n: r.stats or r.live for n, r in launcher.records.items()}
    lines = ["  host  service     steps  overruns  jitter p99  input age p99"]
    for name, st in stats.items():
        if not st or not st.get("steps"):
            continue
        host = launcher.plan.services[name].host or launcher.host
        lines.append(f"  {host:<5} {name:<10} {st.get('steps', 0):>6} {st.get('overruns', 0):>9} "
                     f"{st.get('jitter_p99_ns', 0) / 1e3:>8.0f} us {st.get('input_age_p99_ns', 0) / 1e6:>10.1f} ms")
    clocks: dict[str, dict[str, Any]] = {}
    for name, st in stats.items():  # a process on another host reports how it followed the master's clock
        if st and st.get("clock"):
            clocks.setdefault(launcher.plan.services[name].host or "remote", st["clock"])
    for host, c in clocks.items():
        lines.append(f"  host {host} clock: offset {c['offset_ns'] / 1e6:+.3f} ms, drift {c['drift_ppm']:+.1f} "
                     f"ppm, round trip p50 {c['rtt_p50_ns'] / 1e3:.0f} us / p99 {c['rtt_p99_ns'] / 1e3:.0f} us, "
                     f"uncertainty {c['uncertainty_ns'] / 1e3:.0f} us ({c['sync_samples']} round trips)")
    return "\n".join(lines)


def services_table(stats: dict[str, dict[str, Any]]) -> str:
    """The end-of-run table of a run that is not the main job: each service's final statistics."""
    cols = ("steps", "overruns", "msgs_received", "msgs_dropped", "msgs_invalid")
    rows: list[tuple[str, ...]] = [("service", "state", *cols)]
    rows += [(n, str(s.get("state", "—")), *(str(s.get(c, "—")) for c in cols)) for n, s in stats.items() if s]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  " + "  ".join(v.rjust(w) if i > 1 else v.ljust(w)
                                      for i, (v, w) in enumerate(zip(r, widths, strict=True)))
                     for r in rows)


class Progress:
    """The run's progress bar (``tqdm``) on a stream: simulation time, real-time factor, phase.

    Plugs into :class:`protocol.launcher.Launcher` through its public hooks: ``on_tick``
    moves the bar, ``on_message`` follows the phase of a berthing run from the
    ``contact/event`` topic (:data:`PROGRESS_TOPICS`; :func:`tools.report.phase_after`).
    Drawn on a terminal only (tqdm's rule), at most every 0.25 s.
    """

    def __init__(self, stream: Any, t_end_ns: int, phases: bool = True) -> None:
        from tqdm import tqdm
        self.t_end_ns = int(t_end_ns)
        self.phase, self.t_ns = 0, 0
        self._phases = None
        if phases:
            from tools.report import PHASES, phase_after
            self._phases, self._after = PHASES, phase_after
        end = self.t_end_ns > 0
        self._next = 0.0
        self.bar = tqdm(total=round(self.t_end_ns * 1e-9, 3) if end else None, unit="s", file=stream,
                        disable=None, dynamic_ncols=True,
                        bar_format="{percentage:3.0f}%|{bar}| {desc}" if end else "{desc}")

    def on_message(self, topic: str, sample: Any) -> None:
        """Follow the phase from a ``contact/event`` sample."""
        self.t_ns = max(self.t_ns, sample.t_ns)
        if self._phases is not None:
            for ev in sample.body["events"]:
                self.phase = self._after(self.phase, ev.get("kind", ""))

    def on_tick(self, t_ns: int, wall_s: float, stats: dict[str, dict[str, Any]]) -> None:
        """Move the bar to the least simulation time the services have reached."""
        now = time.monotonic()
        end = t_ns >= self.t_end_ns > 0
        if self.bar.disable or (now < self._next and not end):
            return
        self._next = now + 0.25
        t = max(t_ns, self.t_ns) if t_ns else self.t_ns
        end_s = f"/{self.t_end_ns * 1e-9:.0f}" if self.t_end_ns > 0 else ""
        text = f"t = {t * 1e-9:.2f}{end_s} s  {t * 1e-9 / max(wall_s, 1e-9):5.2f}x real time"
        if self._phases is not None:
            text += f"  phase: {self._phases[self.phase]}"
        self.bar.n = round(t * 1e-9, 3)
        self.bar.set_description_str(text, refresh=False)
        self.bar.refresh()

    def close(self) -> None:
        """End the bar."""
        self.bar.close()


PROGRESS_TOPICS = ("contact/event",)
"""The topics :class:`Progress` follows."""


# ---------------------------------------------------------------- check
def _check_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", nargs="?", default=str(DEFAULT_CONFIG), help="TOML scenario or sweep file")
    p.add_argument("--only", help="comma-separated services of this host")
    p.add_argument("--realtime", action="store_true",
                   help="also time each service's step here and print the realtime admission table "
                        "(priorities, utilization per core); exit 2 if the run would be refused")


def cmd_check(a: argparse.Namespace) -> int:
    """Validate a config, or a sweep file (:func:`tools.sweep.check`); print the plan (and, with
    ``--realtime``, the admission table)."""
    try:
        from protocol.config import check_sweep_size, load
        raw = load(a.config)
        if isinstance(raw.get("sweep"), dict):  # a sweep file (tools.sweep.is_sweep_file)
            if too_big := check_sweep_size(raw):  # before tools.sweep (and anything it could build) is loaded
                raise ConfigError("; ".join(too_big), too_big)
            from tools.sweep import check
            print(json.dumps(check(a.config)))
            return 0
        plan = _plan(a.config, _only(a.only))
    except ConfigError as err:
        return _config_problems(err)
    if a.realtime:
        from dataclasses import replace

        from protocol.realtime import realtime_plan
        # admission per host: with --only, this host's processes (the other hosts' models are built for
        # the calibration's inputs, not admitted here)
        sim = {**plan.sim, "rt_priority": plan.sim.get("rt_priority") or 10}
        ok, table, _ = realtime_plan(replace(plan, sim=sim), local=plan.only or None)
        if plan.only:
            print(f"host of {', '.join(plan.only)}:")
        print("\n".join(table))
        if not ok:
            return 2
    print(json.dumps({"ok": True, "base_tick_ns": plan.base_tick_ns, "mode": plan.sim["mode"],
                      "transport": plan.sim["transport"], "processes": {p: list(m) for p, m in plan.processes.items()},
                      "services": {n: {"kind": s.kind, "period_ns": s.period_ns, "coupling_ns": s.coupling_ns}
                                   for n, s in plan.services.items()}}))
    return 0


# ---------------------------------------------------------------- keys
def _keys_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir", help="directory for the key files")
    p.add_argument("--names", default="server,client",
                   help="key pair names (default server,client: one client key shared by every process, the weaker "
                        "layout)")
    p.add_argument("--config", help="one key pair per process of this config (or per host, --per host), and one "
                                    "for the launchers; prints the [security] table to put in the config")
    p.add_argument("--per", choices=("process", "host"), default="process",
                   help="with --config: a key pair per process (default), or per host (the services' host labels)")


def cmd_keys(a: argparse.Namespace) -> int:
    """Write CurveZMQ key pairs: the names given, or with ``--config`` the server's, the launchers' and one
    per process of the config (or per host: its services' ``host`` labels, ``local`` for those without;
    :func:`protocol.security.identities_of`), then print the ``[security]`` table."""
    from protocol.security import identities_of, write_keys
    if not a.config:
        for pub in write_keys(a.dir, _only(a.names)):
            print(pub)
        return 0
    import tomli_w

    from protocol.config import load, processes_of
    config = load(a.config)
    procs = processes_of(config)
    if a.per == "host":
        services = config.get("services", {})
        hosts: dict[str, list[str]] = {}
        for members in procs.values():
            hosts.setdefault(str(services[members[0]].get("host") or "local"), []).extend(members)
        procs = {h: tuple(m) for h, m in hosts.items()}
    ids = identities_of(procs)
    write_keys(a.dir, ("server", *ids))
    keys_dir, base = Path(a.dir).resolve(), Path(a.config).resolve().parent  # as the config reads it
    if keys_dir.is_relative_to(base):
        keys_dir = keys_dir.relative_to(base)
    print(tomli_w.dumps({"security": {"keys_dir": str(keys_dir), "server": "server", "identities": ids}}), end="")
    return 0


# ---------------------------------------------------------------- recover
def _recover_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("log", help="MCAP log whose writer died")
    p.add_argument("--out", help="write the rebuilt log here (default: replace LOG)")


def cmd_recover(a: argparse.Namespace) -> int:
    """Rebuild a killed run's log (:func:`protocol.logrecover.recover`): 0 rebuilt, 2 bad input (one line naming it)."""
    from errors import LogError
    from protocol.logrecover import recover
    try:
        r = recover(a.log, a.out)
    except LogError as err:
        print(f"berthsim recover: {err}", file=sys.stderr)
        return 2
    print(json.dumps({"event": "recover", "out": str(r.out), "messages": r.messages, "chunks": r.chunks,
                      "dropped_bytes": r.dropped_bytes, "was_complete": r.complete}))
    return 0


# ---------------------------------------------------------------- analyze
def _analyze_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("case", help="yoshida1992, cyril1998 (tools.analysis.CASES) or modes")
    p.add_argument("config", nargs="?", help="modes: the scenario config")
    p.add_argument("--at", default=None, help="modes: capture (initial posture, payload grappled) or berthed")
    p.add_argument("--out", help="directory for CSV and PNG files (default: print only)")
    p.add_argument("--flexible", action="store_true",
                   help="cyril1998: post-impact simulations with flexible links, against rigid ones")


def cmd_analyze(a: argparse.Namespace) -> int:
    """Reproduce a seed's worked example (:mod:`tools.analysis`)."""
    from tools.analysis import main as analyze
    return analyze([a.case] + ([a.config] if a.config else []) + (["--at", a.at] if a.at else [])
                   + (["--out", a.out] if a.out else []) + (["--flexible"] if a.flexible else []))


# ---------------------------------------------------------------- worker (hidden)
def _worker_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", help="the scenario's file, shown in process lists (the plan file is what is read)")
    p.add_argument("name")
    p.add_argument("--plan", required=True, help="the run plan the launcher wrote (protocol.config.write_plan)")
    p.add_argument("--bus", required=True)
    p.add_argument("--rt-priority", type=int, default=0, help="realtime: this process's SCHED_FIFO priority")
    p.add_argument("--clock", choices=("local", "sync"), default="local",
                   help="sync: this host follows the master launcher's clock (protocol.clocksync)")


def cmd_worker(a: argparse.Namespace) -> int:
    """One OS process of a run: build its services from the config, run them under the process shell."""
    from protocol.realtime import die_with_parent
    die_with_parent()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda s, f: stop.set())
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from protocol.bus import ControlClient
    from protocol.config import peers_of, read_plan, register_schemas
    from protocol.realtime import io_context, lock_memory, pin_cpus, preload
    from protocol.registry import BuildFailed, build_members
    from protocol.shell import run_process
    try:
        plan = read_plan(a.plan)  # the launcher's validated plan, as it runs it: nothing loaded or validated again
    except ConfigError as err:
        print(f"[{a.name}] error: {err}", file=sys.stderr)
        return 1
    config = plan.config
    sec = plan.security if plan.sim.get("transport") == "tcp" else None
    members = plan.processes.get(a.name, (a.name,))
    register_schemas(config)  # every topic of the run decodable here (a kind's config-made topics too)
    services = plan.services
    try:
        objs = build_members(config, [(n, services[n].kind, services[n].period_ns) for n in members])
    except BuildFailed as err:  # reported to the launcher, then exit non-zero
        for n in members:
            with ControlClient(a.bus, n, security=sec) as c:
                c.send({"op": "error", "reason": str(err)})
        time.sleep(0.1)
        print(f"[{err.service}] build failed: {type(err.error).__name__}: {err.error}", file=sys.stderr)
        return 1
    sim = config.get("sim", {})
    ctx = None
    if sim.get("mode") == "realtime":
        preload()  # the physics' lazy imports now, not in the first steps
    if sim.get("mode") == "realtime" and a.rt_priority > 0:  # protocol.realtime: affinity, locked memory, I/O thread
        pin_cpus({c for n in members for c in config["services"][n].get("cpus", [])})
        lock_memory()
        ctx = io_context(a.rt_priority)
    return run_process(objs, a.bus, peers_of(config, a.bus), name=a.name, security=sec, stop_event=stop, context=ctx,
                       rt_priority=a.rt_priority if sim.get("mode") == "realtime" else 0, clock=a.clock)


Handler = Callable[[argparse.Namespace], int]


def _lazy(module: str, add: str, run: str, *extra: Any) -> tuple[Callable[[argparse.ArgumentParser], None], Handler]:
    """``(add_arguments, handler)`` of a command that lives in ``module``, imported only when used.

    ``add`` and ``run`` name the module's functions; ``extra`` is passed to ``run`` after the
    parsed arguments. Keeps ``launch.py --help`` and ``run`` free of the plotting and export imports.
    """

    def add_arguments(p: argparse.ArgumentParser) -> None:
        getattr(importlib.import_module(module), add)(p)

    def handler(a: argparse.Namespace) -> int:
        return getattr(importlib.import_module(module), run)(a, *extra)

    return add_arguments, handler


COMMANDS: dict[str, tuple[str | None, Callable[[argparse.ArgumentParser], None], Handler]] = {
    "run": ("run a scenario", _run_args, cmd_run),
    "check": ("validate a scenario and print its plan", _check_args, cmd_check),
    "keys": ("write CurveZMQ key pairs", _keys_args, cmd_keys),
    "replay": ("replay a log onto the bus, or re-simulate one service (--resim)",
               *_lazy("tools.resim", "add_arguments", "main", __file__)),
    "report": ("plot a log: PNG figures and a multi-page PDF", *_lazy("tools.report", "add_arguments", "main")),
    "export": ("export a log to Parquet or CSV, or to MCAP for Foxglove or ROS 2",
               *_lazy("tools.export", "add_arguments", "main")),
    "sweep": ("Monte Carlo sweep of a scenario on Dask: a Parquet table and plots",
              *_lazy("tools.sweep", "add_arguments", "main")),
    "fmu": ("FMI: export one service's model as a co-simulation FMU (fmu export SERVICE CONFIG -o NAME.fmu)",
            *_lazy("tools.fmu_export", "add_arguments", "main")),
    "recover": ("rebuild the index and summary of a log whose logger died", _recover_args, cmd_recover),
    "analyze": ("reproduce a seed's worked example", _analyze_args, cmd_analyze),
    "_worker": (None, _worker_args, cmd_worker),
}


def main(argv: list[str] | None = None) -> int:
    """Parse the command line and dispatch through :data:`COMMANDS`.

    What a command does not handle itself ends here as one line on stderr, never a
    traceback: a :class:`errors.ConfigError` with exit code 2, any other exception with
    its type, message and the run's log path (if it has one) and exit code 1.
    ``BERTHSIM_TRACEBACK=1`` lets the exception through instead (for debugging).
    """
    a = argparse.Namespace()
    try:
        return _dispatch(argv, a)
    except ConfigError as err:
        if os.environ.get("BERTHSIM_TRACEBACK"):
            raise
        return _config_problems(err)
    except Exception as err:  # noqa: BLE001 - the last line of defence: one line, no traceback
        if os.environ.get("BERTHSIM_TRACEBACK"):
            raise
        text = (str(err).strip().splitlines() or [""])[0]
        log = getattr(a, "log", None) or getattr(a, "out_log", None)
        where = f"; log {log}" if log else ""
        print(f"berthsim: error: {type(err).__name__}: {text}{where}", file=sys.stderr)
        return 1


def _dispatch(argv: list[str] | None, a: argparse.Namespace) -> int:
    """:func:`main` without its handler; parses into ``a``, so that the handler sees what was set."""
    prog = sys.argv[0] if argv is None else "launch.py"
    argv = list(sys.argv[1:] if argv is None else argv)
    command_line = shlex.join([prog, *argv])  # as typed: recorded by the logger
    if not argv:
        argv = ["run"]
    name = argv[0]
    entry = COMMANDS.get(name)
    if entry is not None and entry[0] is None:  # hidden command: own parser
        p = argparse.ArgumentParser(prog=f"launch.py {name}")
        entry[1](p)
        a.command_line = command_line
        return entry[2](p.parse_args(argv[1:], a))
    parser = argparse.ArgumentParser(prog="launch.py", description="berthsim: co-simulation of on-orbit berthing")
    sub = parser.add_subparsers(dest="command", required=True)
    for cname, (help_, add, handler) in COMMANDS.items():
        if help_ is None:
            continue
        sp = sub.add_parser(cname, help=help_)
        if cname == name:  # only the chosen command's options: the others' modules stay unimported
            add(sp)
        sp.set_defaults(handler=handler)
    a.command_line = command_line
    parser.parse_args(argv, a)
    return a.handler(a)


if __name__ == "__main__":
    sys.exit(main())
