#!/usr/bin/env python3
"""berthsim's one entry point.

Subcommands live in :data:`COMMANDS`, a table ``name -> (help, add_arguments, handler)``;
add one with a one-line entry (``help=None`` hides it). ``python3 launch.py`` with no
arguments runs :data:`DEFAULT_CONFIG`.

    launch.py run CONFIG [--only a,b] [--inprocess] [--mode lockstep|realtime]
                         [--duration S] [--speed X] [--transport ipc|tcp|inproc] [--log PATH]
    launch.py check CONFIG [--only a,b]
    launch.py keys DIR [--names server,client]

Exit codes: 0 success, 1 a service failed, 2 invalid configuration or usage,
128+signal when interrupted. The config layout is documented in :mod:`protocol.config`,
the run in :mod:`protocol.launcher`.
"""

from __future__ import annotations

import argparse
import ctypes
import json
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
    o = {"mode": a.mode, "duration": a.duration, "speed": a.speed, "log": a.log, "transport": a.transport}
    if a.inprocess:
        o["transport"] = "inproc"
    return {k: v for k, v in o.items() if v is not None}


def _plan(config_path: str, only: tuple[str, ...], overrides: dict[str, Any] | None = None) -> Any:
    from protocol.config import load, validate
    return validate(load(config_path), path=config_path, only=only, overrides=overrides)


def _config_problems(err: ConfigError) -> int:
    print(f"berthsim: invalid configuration: {len(err.problems)} problem(s):", file=sys.stderr)
    for p in err.problems:
        print(f"  - {p}", file=sys.stderr)
    return 2


# ---------------------------------------------------------------- run
def _run_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", nargs="?", default=str(DEFAULT_CONFIG), help="TOML scenario")
    p.add_argument("--only", help="comma-separated services to run on this host")
    p.add_argument("--inprocess", action="store_true", help="every service as a thread over inproc://")
    p.add_argument("--mode", choices=("lockstep", "realtime"))
    p.add_argument("--duration", type=float, help="simulation seconds (0 = until stopped)")
    p.add_argument("--speed", type=float, help="lockstep real-time factor (0 = as fast as possible)")
    p.add_argument("--transport", choices=("ipc", "tcp", "inproc"))
    p.add_argument("--log", help="MCAP log path (read by the logger service as sim.log)")


def cmd_run(a: argparse.Namespace) -> int:
    """Validate, then launch and supervise the run."""
    from protocol.launcher import Launcher
    overrides = _overrides(a)
    try:
        plan = _plan(a.config, _only(a.only), overrides)
    except ConfigError as err:
        return _config_problems(err)
    return Launcher(plan, inprocess=a.inprocess, launch_py=__file__, overrides=overrides).run()


# ---------------------------------------------------------------- check
def _check_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", nargs="?", default=str(DEFAULT_CONFIG), help="TOML scenario")
    p.add_argument("--only", help="comma-separated services of this host")


def cmd_check(a: argparse.Namespace) -> int:
    """Validate a config; print the plan."""
    try:
        plan = _plan(a.config, _only(a.only))
    except ConfigError as err:
        return _config_problems(err)
    print(json.dumps({"ok": True, "base_tick_ns": plan.base_tick_ns, "mode": plan.sim["mode"],
                      "transport": plan.sim["transport"],
                      "services": {n: {"kind": s.kind, "period_ns": s.period_ns} for n, s in plan.services.items()}}))
    return 0


# ---------------------------------------------------------------- keys
def _keys_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir", help="directory for the key files")
    p.add_argument("--names", default="server,client", help="key pair names (default server,client)")


def cmd_keys(a: argparse.Namespace) -> int:
    """Write CurveZMQ key pairs."""
    from protocol.security import write_keys
    for pub in write_keys(a.dir, _only(a.names)):
        print(pub)
    return 0


# ---------------------------------------------------------------- worker (hidden)
def _worker_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("config")
    p.add_argument("name")
    p.add_argument("--bus", required=True)
    p.add_argument("--overrides", default="{}")
    p.add_argument("--client-key", default=None)


def _die_with_parent() -> None:
    """Linux: get SIGTERM when the launcher dies (no orphans)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def cmd_worker(a: argparse.Namespace) -> int:
    """One service process: build the model from the config, run it under the shell."""
    _die_with_parent()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda s, f: stop.set())
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from protocol.bus import ControlClient
    from protocol.config import load, peers_of, service_module, with_overrides
    from protocol.security import Security
    from protocol.shell import realtime_context, run_service
    from protocol.timebase import period_ns
    config = with_overrides(load(a.config), json.loads(a.overrides))
    sec = None
    if config.get("sim", {}).get("transport") == "tcp" and "security" in config:
        sec = Security.from_table(config["security"], Path(a.config).parent, a.client_key)
    try:
        svc = config["services"][a.name]
        obj = service_module(svc["kind"]).build(config, a.name, period_ns(svc["rate_hz"], f"services.{a.name}.rate_hz"))
    except Exception as err:  # noqa: BLE001 - reported to the launcher, then exit non-zero
        with ControlClient(a.bus, a.name, security=sec) as c:
            c.send({"op": "error", "reason": f"build failed: {type(err).__name__}: {err}"})
            time.sleep(0.1)
        print(f"[{a.name}] build failed: {type(err).__name__}: {err}", file=sys.stderr)
        return 1
    sim = config.get("sim", {})
    ctx = realtime_context(int(sim.get("rt_priority", 10))) if sim.get("mode") == "realtime" else None
    return run_service(obj, a.bus, peers_of(config, a.bus), security=sec, stop_event=stop, context=ctx)


Handler = Callable[[argparse.Namespace], int]
COMMANDS: dict[str, tuple[str | None, Callable[[argparse.ArgumentParser], None], Handler]] = {
    "run": ("run a scenario", _run_args, cmd_run),
    "check": ("validate a scenario and print its plan", _check_args, cmd_check),
    "keys": ("write CurveZMQ key pairs", _keys_args, cmd_keys),
    "replay": ("replay a log onto the bus, or re-simulate one service (--resim)",
               lambda p: __import__("services.replay", fromlist=["main"]).add_arguments(p),
               lambda a: __import__("services.replay", fromlist=["main"]).main(a, __file__)),
    "report": ("plot a log: PNG figures and a multi-page PDF",
               lambda p: __import__("services.report", fromlist=["main"]).add_arguments(p),
               lambda a: __import__("services.report", fromlist=["main"]).main(a)),
    "export": ("export a log to Parquet or CSV",
               lambda p: __import__("services.export", fromlist=["main"]).add_arguments(p),
               lambda a: __import__("services.export", fromlist=["main"]).main(a)),
    "recover": ("rebuild the index and summary of a log whose logger died",
                lambda p: __import__("services.logger", fromlist=["main"]).add_recover_arguments(p),
                lambda a: __import__("services.logger", fromlist=["main"]).recover_main(a)),
    "_worker": (None, _worker_args, cmd_worker),
}


def main(argv: list[str] | None = None) -> int:
    """Parse the command line and dispatch through :data:`COMMANDS`."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv:
        argv = ["run"]
    name = argv[0]
    entry = COMMANDS.get(name)
    if entry is not None and entry[0] is None:  # hidden command: own parser
        p = argparse.ArgumentParser(prog=f"launch.py {name}")
        entry[1](p)
        return entry[2](p.parse_args(argv[1:]))
    parser = argparse.ArgumentParser(prog="launch.py", description="berthsim: co-simulation of on-orbit berthing")
    sub = parser.add_subparsers(dest="command", required=True)
    for cname, (help_, add, handler) in COMMANDS.items():
        if help_ is None:
            continue
        sp = sub.add_parser(cname, help=help_)
        add(sp)
        sp.set_defaults(handler=handler)
    a = parser.parse_args(argv)
    return a.handler(a)


if __name__ == "__main__":
    sys.exit(main())
