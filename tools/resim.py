"""Runs made from a log: ``launch.py replay`` and re-simulation of one service (DESIGN §6).

A replay run is an ordinary run whose configuration is synthesized from the log: a
replay source (:class:`services.replay.ReplaySource`, ``kind = "replay"``) publishing
the logged topics, optionally services of a config running along (``--config CFG
--only a,b``), and a logger (``--log OUT``). This module makes that configuration
(:func:`replay_config`, :func:`resim_config`), validates it into a run plan (which the
launcher hands to its worker processes, :func:`protocol.config.write_plan`), runs it, and
for a re-simulation compares the outputs (:func:`compare_outputs`). It imports no service:
services are named by their ``kind``; the log is read with :mod:`protocol.logfile`.

Re-simulation
-------------
``launch.py replay LOG --resim SERVICE [--config CFG] [--set table.key=value ...]``
re-runs SERVICE (from the logged configuration, attachment ``config.json``, or CFG, with
``--set`` changes; a logged configuration may name only the service kinds berthsim
ships, :data:`protocol.config.KINDS`, so that a log never imports a module it names) in
lockstep against the logged outputs of every other service, and writes a new log
(``--log``, default ``LOG-resim-SERVICE.mcap``). It then compares SERVICE's outputs with
the recorded ones (every envelope field but ``wall_ns``, the fields bit for bit) and
prints the verdict: unchanged, they are bit-identical. The re-run lasts the logged run's
``duration``, or, for a log cut short, the log's span in whole periods of the slowest
co-simulated service (it cannot step past its inputs). Bit-identity holds for runs
recorded in lockstep mode; a realtime run consumed the latest samples as they arrived,
which a re-run cannot reproduce (a note says so).

Live view
---------
``launch.py replay LOG --view [PORT]`` adds a ``viewer`` service (:mod:`services.viewer`, a
Foxglove WebSocket on ``ws://127.0.0.1:PORT``, default 8765) whose player's controls (play,
pause, seek, speed) drive the replay. It paces the replay at the recorded pace unless
``--rate``, ``--realtime`` or ``--max`` says otherwise; without co-simulated services the
replay holds at the end of its window (the player can seek back) until Ctrl-C. With them
(``--config --only``, ``--resim``) a seek is refused: they cannot go back in time, nor skip
their inputs.

Exit codes: 0 success (resim: also when the outputs differ — the comparison is
reported), 1 a service failed, 2 bad usage or a bad log (one line naming the file).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgpack

from errors import ConfigError, LogError
from protocol.logfile import open_log, producers, select_topics
from protocol.registry import has_capability
from protocol.timebase import check_seconds

__all__ = ["OutputComparison", "add_arguments", "add_viewer", "compare_outputs", "main", "replay_config",
           "resim_config"]

_S = 1_000_000_000


def _module_tables(kind: str) -> tuple[str, ...]:
    from protocol.config import service_module
    return tuple(getattr(service_module(kind), "TABLES", ()))


def _fastest_rate(services: Mapping[str, Any]) -> float:
    rates = [float(s["rate_hz"]) for s in services.values() if isinstance(s, Mapping) and "rate_hz" in s]
    return max(rates) if rates else 1000.0


def replay_config(log_path: str | os.PathLike[str], *, base: Mapping[str, Any] | None = None,
                  only: Iterable[str] = (), topics: Iterable[str] | None = None, exclude: Iterable[str] = (),
                  start: float | None = None, end: float | None = None, rate: float = 0.0, loop: bool = False,
                  paused: bool = False, keyboard: bool = False, progress: bool = False, out_log: str | None = None,
                  transport: str | None = None, bus: str | None = None, view: int | None = None) -> dict[str, Any]:
    """The run configuration of a replay: the source, the co-simulated services, a logger.

    Parameters
    ----------
    log_path : path
        The log to replay.
    base : Mapping, optional
        A configuration whose services ``only`` run along (their output topics are not
        replayed; their tables are kept, ``[sim].seed`` too).
    only : iterable of str
        Services of ``base`` to run (default: none).
    topics, exclude, start, end, rate, loop, paused, keyboard, progress
        As :class:`ReplaySource` (``start``/``end`` in s).
    out_log : str, optional
        Add a logger writing this file.
    transport, bus : str, optional
        ``[sim]`` transport and bus URL.
    view : int, optional
        Add a ``viewer`` on this loopback port (0: any free one) whose player drives the replay; without
        co-simulated services the replay then holds at its end (``hold``) instead of ending the run.

    Returns
    -------
    dict
        A config for :func:`protocol.config.validate`.

    Raises
    ------
    LogError
        Bad log (named). ConfigError: unknown services or topic patterns, or ``--start``
        with co-simulated services (they start at t = 0).
    """
    base = dict(base or {})
    base_services = dict(base.get("services", {}) or {})
    only = [n for n in only]
    unknown = [n for n in only if n not in base_services]
    if unknown:
        raise ConfigError(f"--only: unknown services {unknown} (configured: {', '.join(base_services)})")
    with open_log(log_path) as log:
        made_by = producers(log)
        own: list[str] = []
        for topic, sender in made_by.items():
            if sender in only and not topic.startswith("sim/"):
                own.append(topic)
        chosen = [t for t in select_topics(log.topics, topics, exclude) if t not in own]
        if not chosen:
            raise ConfigError(f"log {str(log_path)!r}: no topic left to replay")
        span_end = log.end_ns
        if end is not None and check_seconds(end, "--end") is None:  # (a bad one: validate names it)
            span_end = min(int(round(float(end) * _S)), log.end_ns)
    if only and start:
        raise ConfigError(f"--start {start}: co-simulated services ({', '.join(only)}) start at t = 0; "
                          "replay them from the beginning")
    if only and loop:
        raise ConfigError(f"--loop: co-simulated services ({', '.join(only)}) cannot go back in time")
    services: dict[str, Any] = {n: dict(base_services[n]) for n in only}
    rate_hz = _fastest_rate(services) if services else _fastest_rate(base_services)
    src = {"kind": "replay", "rate_hz": rate_hz, "log": str(Path(log_path).resolve()), "topics": chosen,
           "rate": float(rate), "loop": bool(loop), "paused": bool(paused), "keyboard": bool(keyboard),
           "progress": bool(progress)}
    if view is not None and not only and not loop:
        src["hold"] = True  # the player can seek back from the end; the run lasts until Ctrl-C
    if start is not None:
        src["start"] = float(start)
    if end is not None:
        src["end"] = float(end)
    name = "replay"
    while name in services:
        name += "_"
    services[name] = src
    if view is not None:
        add_viewer(services, view, rate_hz)
    if out_log:
        lname = "logger"
        while lname in services:
            lname += "_"
        services[lname] = {"kind": "logger", "rate_hz": rate_hz, "path": str(out_log),
                           "schemas_from": str(Path(log_path).resolve())}
    sim_in = dict(base.get("sim", {}) or {})
    if only:  # co-simulated services must not step past the log: whole periods of the slowest
        from protocol.timebase import period_ns
        longest = max(period_ns(s["rate_hz"], f"services.{n}.rate_hz") for n, s in services.items())
        span_end = span_end // longest * longest
    sim: dict[str, Any] = {"mode": "lockstep", "speed": 0.0,
                           "duration": 0.0 if loop else max(span_end, 0) / _S}
    for key in ("seed", "base_tick_ns", "ready_timeout", "stats_period", "heartbeat_timeout"):
        if key in sim_in:
            sim[key] = sim_in[key]
    if transport:
        sim["transport"] = transport
    if bus:
        sim["bus"] = bus
    config: dict[str, Any] = {"sim": sim, "services": services}
    if bus and bus.startswith("tcp://") and "security" in base:
        config["security"] = base["security"]
    for n in only:
        for t in _module_tables(base_services[n]["kind"]):
            if t in base:
                config[t] = base[t]
    return config


def add_viewer(services: dict[str, Any], port: int = 8765, rate_hz: float = 50.0) -> str:
    """Add a ``viewer`` service on loopback ``port`` to a config's ``services`` table, in memory (``run --view``,
    ``replay --view``); its name: ``viewer``, or with ``_`` added until it is new. Its other keys keep their
    defaults (display 30 Hz, protobuf channels)."""
    name = "viewer"
    while name in services:
        name += "_"
    services[name] = {"kind": "viewer", "rate_hz": float(rate_hz), "port": int(port)}
    return name


def _set_value(config: dict[str, Any], assignment: str) -> None:
    key, sep, text = assignment.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"--set {assignment!r}: expected table.key=value")
    try:
        value = tomllib.loads(f"v = {text.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = text.strip()
    node = config
    parts = key.strip().split(".")
    for p in parts[:-1]:
        nxt = node.get(p)
        if not isinstance(nxt, dict):
            raise ConfigError(f"--set {assignment!r}: no table {p!r} in the configuration")
        node = nxt
    node[parts[-1]] = value


def resim_config(log_path: str | os.PathLike[str], service: str, *, base: Mapping[str, Any] | None = None,
                 sets: Iterable[str] = (), out_log: str, transport: str | None = None) -> dict[str, Any]:
    """The run configuration that re-simulates ``service`` against the log (see the module docstring).

    Raises
    ------
    LogError
        Bad log, or no configuration in it and none given, or a configuration in it that is
        malformed or names a service kind berthsim does not ship
        (:func:`protocol.config.registered_kind`: a log never makes this process import a module).
    ConfigError
        Unknown service, bad ``--set``.
    """
    if base is None:
        from protocol.config import check_limits, registered_kind
        with open_log(log_path) as log:
            base = log.config()
        if base is None:
            raise LogError(f"log {str(log_path)!r}: has no config.json attachment; give --config")
        where = f"log {str(log_path)!r}: attachment 'config.json'"
        if (bad := check_limits(base, where)) is not None:
            raise LogError(bad)
        svc = base.get("services", {}).get(service)  # the one service built: a log names no module to import
        if svc is not None and (bad := registered_kind(svc.get("kind"), f"{where}: services.{service}")) is not None:
            raise LogError(f"{bad}; give --config to run other kinds")
    config: dict[str, Any] = json.loads(json.dumps(base))  # a deep copy to edit
    for s in sets:
        _set_value(config, s)
    services = config.get("services", {})
    if service not in services:
        raise ConfigError(f"--resim {service!r}: no such service (configured: {', '.join(services)})")
    cfg = replay_config(log_path, base=config, only=[service], out_log=out_log, transport=transport)
    dur = config.get("sim", {}).get("duration")
    if dur:  # the logged run's length, unless it was cut short (then: the log's, in whole periods)
        cfg["sim"]["duration"] = min(float(dur), cfg["sim"]["duration"])
    return cfg


# ---------------------------------------------------------------- comparing outputs
@dataclass(frozen=True)
class OutputComparison:
    """Outputs of one service in two logs, compared message by message.

    Attributes
    ----------
    topics : list of str
    compared : int
        Messages compared.
    identical : bool
        Same count per topic and every envelope field but ``wall_ns`` equal, fields bit for bit.
    first_difference : str
        Where they first differ ("" if identical).
    """

    topics: list[str]
    compared: int
    identical: bool
    first_difference: str


def _strip_wall(payload: bytes) -> Any:
    env = msgpack.unpackb(payload, raw=False)
    if isinstance(env, list) and len(env) == 7:
        env[5] = 0
    return env


def compare_outputs(a: str | os.PathLike[str], b: str | os.PathLike[str], sender: str) -> OutputComparison:
    """Compare the messages ``sender`` produced in logs ``a`` and ``b``.

    Raises
    ------
    LogError
        A bad log (named).
    """
    with open_log(a) as la, open_log(b) as lb:
        ta = {t for t, s in producers(la).items() if s == sender and not t.startswith("sim/")}
        tb = {t for t, s in producers(lb).items() if s == sender and not t.startswith("sim/")}
        topics = sorted(ta | tb)
        if ta != tb:
            return OutputComparison(topics, 0, False, f"topics differ: {sorted(ta)} vs {sorted(tb)}")
        n = 0
        for topic in topics:
            ia, ib = la.messages([topic]), lb.messages([topic])
            while True:
                ma, mb = next(ia, None), next(ib, None)
                if ma is None and mb is None:
                    break
                if ma is None or mb is None:
                    which = "first" if ma is None else "second"
                    return OutputComparison(topics, n, False, f"{topic}: the {which} log ends earlier")
                n += 1
                if ma.payload != mb.payload and _strip_wall(ma.payload) != _strip_wall(mb.payload):
                    return OutputComparison(topics, n, False, f"{topic}: t={ma.t_ns} ns (seq {ma.seq}) differs")
    return OutputComparison(topics, n, True, "")


# ---------------------------------------------------------------- command line
def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``launch.py replay``."""
    p.add_argument("log", help="MCAP log to replay")
    p.add_argument("--config", help="TOML config of services to run along (with --only), or of --resim")
    p.add_argument("--only", help="comma-separated services of --config to run along")
    pace = p.add_mutually_exclusive_group()
    pace.add_argument("--rate", type=float, default=None,
                      help="pace as a multiple of the recorded one: 0.001 to 1000 (0: as fast as possible)")
    pace.add_argument("--max", action="store_true", help="as fast as possible (default, but with --view)")
    pace.add_argument("--realtime", action="store_true",
                      help="--rate 1: the recorded timing on the wall clock (re-drive a rig); prints the lateness")
    p.add_argument("--start", type=float, help="simulation time to start at [s]")
    p.add_argument("--end", type=float, help="simulation time to end at [s]")
    p.add_argument("--topics", help="comma-separated topic patterns to replay (fnmatch)")
    p.add_argument("--exclude", help="comma-separated topic patterns to leave out")
    p.add_argument("--loop", action="store_true", help="start again at the end (until Ctrl-C)")
    p.add_argument("--paused", action="store_true", help="start paused (keyboard: space, s, +, -, [, ], q)")
    p.add_argument("--view", nargs="?", type=int, const=8765, default=None, metavar="PORT",
                   help="serve the replay live on a Foxglove WebSocket (ws://127.0.0.1:PORT, default 8765) whose "
                        "player (play, pause, seek, speed) drives it; paced at --rate 1 unless told otherwise")
    p.add_argument("--log", dest="out_log", help="also record the replayed run into this MCAP file")
    p.add_argument("--overwrite", action="store_true",
                   help="replace that file if it exists (else refused; --resim's default file is always replaced)")
    p.add_argument("--resim", metavar="SERVICE", help="re-simulate SERVICE against the logged outputs of the others")
    p.add_argument("--set", action="append", default=[], metavar="TABLE.KEY=VALUE",
                   help="change a config value for --resim (repeatable)")
    p.add_argument("--transport", choices=("ipc", "tcp", "inproc"))
    p.add_argument("--bus", help="base URL of the run; outside subscribers connect to the replay's PUB "
                                 "(protocol.bus.mesh_endpoints: tcp PORT+2, ipc URL.replay.pub)")
    p.add_argument("--inprocess", action="store_true", help="every service as a thread")
    p.add_argument("--quiet", action="store_true", help="no progress readout (also: BERTHSIM_NO_PROGRESS=1)")


def _patterns(text: str | None) -> list[str] | None:
    return [s.strip() for s in text.split(",") if s.strip()] if text else None


def _run_plan(config: dict[str, Any], inprocess: bool, launch_py: str | os.PathLike[str]) -> int:
    from protocol.config import validate
    from protocol.launcher import Launcher
    plan = validate(config)  # relative paths (a --config's keys) as the config says, from the working folder
    return Launcher(plan, inprocess=inprocess, launch_py=launch_py).run()


def main(a: argparse.Namespace, launch_py: str | os.PathLike[str] | None = None) -> int:
    """``launch.py replay``: 0 success, 1 a service failed, 2 bad usage or log (one line on stderr)."""
    from protocol.config import load
    launch_py = launch_py or Path(__file__).resolve().parents[1] / "launch.py"
    try:
        base = load(a.config) if a.config else None
        view = getattr(a, "view", None)
        rate = 0.0 if a.max else 1.0 if a.realtime else a.rate if a.rate is not None else 1.0 if view is not None \
            else 0.0
        if a.resim:
            out = a.out_log or str(Path(a.log).with_name(f"{Path(a.log).stem}-resim-{a.resim}.mcap"))
            config = resim_config(a.log, a.resim, base=base, sets=a.set, out_log=out, transport=a.transport)
            if view is not None:  # the re-run watched live: paced, its player drives the replay source
                add_viewer(config["services"], view, 50.0)
                next(s for s in config["services"].values() if has_capability(s, "plays_back"))["rate"] = rate
            with open_log(a.log) as log:
                mode = (log.config() or {}).get("sim", {}).get("mode", "lockstep")
            if mode == "realtime":
                print("berthsim replay: note: the log was recorded in realtime mode; the lockstep re-run takes "
                      "inputs by timestamp, so its outputs may differ from the recorded ones", file=sys.stderr)
        else:
            if a.set:
                raise ConfigError("--set applies to --resim only")
            tty = sys.stdin.isatty()
            if a.paused and not tty:
                raise ConfigError("--paused needs a terminal (the keyboard resumes and steps)")
            only = [s.strip() for s in a.only.split(",") if s.strip()] if a.only else []
            if only and base is None:
                raise ConfigError("--only needs --config")
            config = replay_config(a.log, base=base, only=only, topics=_patterns(a.topics),
                                   exclude=_patterns(a.exclude) or (), start=a.start, end=a.end,
                                   rate=rate, loop=a.loop, paused=a.paused,
                                   keyboard=tty, progress=not (a.quiet or os.environ.get("BERTHSIM_NO_PROGRESS")),
                                   out_log=a.out_log,
                                   transport=a.transport, bus=a.bus, view=view)
        with open_log(a.log) as log:
            if log.foreign:  # skipped: neither replayed nor fed to a re-simulation
                print(f"berthsim replay: note: {log.foreign_note()}", file=sys.stderr)
    except (LogError, ConfigError) as err:
        print(f"berthsim replay: {str(err).splitlines()[0]}", file=sys.stderr)
        return 2
    if getattr(a, "command_line", None):  # provenance for the logger (launch.py sets it)
        config["sim"]["command_line"] = a.command_line
    if a.overwrite or (a.resim and not a.out_log):  # --resim's own LOG-resim-NAME.mcap: made again each time
        config["sim"]["overwrite"] = True
    try:
        code = _run_plan(config, a.inprocess or a.transport == "inproc", launch_py)
    except ConfigError as err:
        print(f"berthsim replay: invalid run: {'; '.join(err.problems)}", file=sys.stderr)
        return 2
    if a.resim and code == 0:
        out = next(s["path"] for s in config["services"].values() if has_capability(s, "records"))
        try:
            cmp = compare_outputs(a.log, out, a.resim)
        except LogError as err:
            print(f"berthsim replay: {err}", file=sys.stderr)
            return 1
        verdict = "bit-identical" if cmp.identical else f"different ({cmp.first_difference})"
        print(json.dumps({"event": "resim", "service": a.resim, "log": out, "topics": cmp.topics,
                          "compared": cmp.compared, "identical": cmp.identical,
                          "first_difference": cmp.first_difference}))
        print(f"berthsim replay: {a.resim} outputs {verdict} vs {a.log} ({cmp.compared} messages); new log {out}",
              file=sys.stderr)
    return code
