#!/usr/bin/env python3
"""berthsim's one entry point.

Subcommands live in :data:`COMMANDS`, a table ``name -> (help, add_arguments, handler)``;
add one with a one-line entry (``help=None`` hides it). ``python3 launch.py`` with no
arguments runs :data:`DEFAULT_CONFIG`, the SRMS berthing scenario (the main job).

    launch.py run [CONFIG] [--only a,b] [--inprocess] [--mode lockstep|realtime]
                           [--duration S] [--speed X] [--transport ipc|tcp|inproc] [--log PATH]
                           [--hil URL] [--no-report]
    launch.py check CONFIG [--only a,b]
    launch.py keys DIR [--names server,client]

The main job (``run`` of a scenario with a contact service and a logger): a progress line
on stderr (simulation time, real-time factor, phase; ``BERTHSIM_NO_PROGRESS=1`` turns it
off), the log under ``runs/<timestamp>/run.mcap`` unless ``--log`` or ``sim.log`` says
otherwise, and beside it the report (``report/``), the figures (``summary.json``) and, on
stderr, a table of them (:func:`run_figures`, :func:`summary_table`).

Exit codes: 0 success (for a scripted scenario: it went as scripted), 1 a service failed,
2 invalid configuration or usage, 3 the run ended but not as scripted (a phase missing,
a capture missed), 128+signal when interrupted. The config layout is documented in
:mod:`protocol.config`, the run in :mod:`protocol.launcher`.
"""

from __future__ import annotations

import argparse
import ctypes
import importlib
import json
import os
import signal
import sys
import tempfile
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


# ---------------------------------------------------------------- the main job: progress, figures, table
PHASES = ("approach", "capture", "berthing move", "berthing contact", "release")
"""The five phases of a berthing run, entered on the contact events of :func:`phase_after`."""
_ENTERS = {"capture": 1, "rigidize": 2, "first_contact": 3, "release": 4}


def phase_after(phase: int, event: str) -> int:
    """Phase index after a ``contact/event`` kind: capture → capture, rigidize → berthing move,
    first_contact (once grappled) → berthing contact, release → release; never backwards."""
    nxt = _ENTERS.get(event, phase)
    if event == "first_contact" and phase < 2:
        return phase
    return max(phase, nxt)


def _expected_events(config: dict[str, Any], t_end_s: float) -> list[str]:
    """Contact events a run to ``t_end_s`` must show to have gone as scripted.

    A scripted ``capture`` before the end must give ``capture`` (and ``rigidize`` once
    ``contact.rigidize_delay`` has passed); a scripted ``release`` must find the payload
    berthed first (``first_contact``, ``latch``) and give ``release``.
    """
    delay = float(config.get("contact", {}).get("rigidize_delay", 0.5))
    out: list[str] = []
    for c in config.get("operator", {}).get("script", []):
        t = float(c.get("t", 0.0))
        if c.get("cmd") == "capture" and t < t_end_s:
            out += ["capture"] + (["rigidize"] if t + delay < t_end_s else [])
        elif c.get("cmd") == "release" and t < t_end_s:
            out += ["first_contact", "latch", "release"]
    return out


def run_figures(log_path: str | Path, config: dict[str, Any] | None = None) -> dict[str, Any]:
    """The main job's figures from a run's log.

    Phase start times, the capture (relative velocity before the snare, the envelope
    metrics), peak berthing-interface force and moment on the orbiter at Lo (from the
    first contact on; the snare's one-step impulse is not an interface load) and the
    rig's sensed peak, the misalignment of B from its berthed pose in L when the
    latches closed, the drift of the total linear momentum of orbiter + payload (the
    SVDS arm is massless, seed 003 2-4…2-9) and the rig link's counters.

    Raises
    ------
    LogError
        If the log is missing, truncated or not MCAP.
    """
    import numpy as np

    from dynamics.spatial import pose_from_vector
    from services.logger import open_log, read_topics

    with open_log(log_path) as log:
        cfg = config if config is not None else (log.config() or {})
        wanted = ["contact/event", "contact/wrench", "hil/feedback", "hil/status", "orbiter/state", "payload/state"]
        d = read_topics(log, [t for t in wanted if t in log.topics])
    empty: dict[str, Any] = {}
    m_O = float(cfg.get("orbiter", {}).get("mass", 0.0))
    m_T = float(cfg.get("payload", {}).get("mass", 0.0))
    events: list[dict[str, Any]] = []
    t_contact = None
    ce = d.get("contact/event", empty)
    for t_ns, evs in zip(ce.get("t_ns", ()), ce.get("events", ())):
        for ev in evs:
            events.append(dict(ev))
            if ev["kind"] == "first_contact" and t_contact is None and any(e["kind"] == "rigidize" for e in events):
                t_contact = int(t_ns)
    F_peak = M_peak = F_rig = 0.0
    cw = d.get("contact/wrench", empty)
    if t_contact is not None and len(cw.get("t_ns", ())):
        on = (cw["t_ns"] >= t_contact) & cw["active"]
        if on.any():
            F = cw["F_Lo_W"][on]
            F_peak = float(np.linalg.norm(F[:, 3:], axis=1).max())
            M_peak = float(np.linalg.norm(F[:, :3], axis=1).max())
    fb = d.get("hil/feedback", empty)
    if len(fb.get("t_ns", ())) and fb["valid"].any():
        F_rig = float(np.linalg.norm(fb["F_Bo_B"][fb["valid"]][:, 3:], axis=1).max())
    st = d.get("hil/status", empty)
    link, hil_state = (dict(st["link"][-1]), st["state"][-1]) if len(st.get("t_ns", ())) else ({}, None)
    # total linear momentum where an orbiter and a payload sample share a time stamp
    P0, dP = None, 0.0
    orb, pay = d.get("orbiter/state", empty), d.get("payload/state", empty)
    if len(orb.get("t_ns", ())) and len(pay.get("t_ns", ())):
        _, i_o, i_p = np.intersect1d(orb["t_ns"], pay["t_ns"], return_indices=True)
        if len(i_o):
            P = m_O * orb["v_WOo_W"][i_o] + m_T * pay["v_WTo_W"][i_p]
            P0 = P[0]
            dP = float(np.linalg.norm(P - P0, axis=1).max())
    first = {}
    for ev in events:
        first.setdefault(ev["kind"], ev)
    phase, starts = 0, {PHASES[0]: 0.0}
    for ev in events:
        nxt = phase_after(phase, ev["kind"])
        if nxt != phase:
            phase = nxt
            starts.setdefault(PHASES[phase], float(ev["t"]))
    out: dict[str, Any] = {"phases": starts, "events": [[round(float(e["t"]), 4), e["kind"]] for e in events],
                           "phases_completed": len(starts)}
    if "capture" in first:
        V = np.asarray(first["capture"]["V_rel_pre_W"], dtype=float)
        out["capture"] = {"t": first["capture"]["t"], "v_rel_m_s": float(np.linalg.norm(V[3:])),
                          "w_rel_deg_s": float(np.degrees(np.linalg.norm(V[:3]))),
                          **{k: first["capture"][k] for k in ("lateral", "axial", "tilt", "roll") if k in first["capture"]}}
    if "miss" in first:
        out["miss"] = {"t": first["miss"]["t"], "reason": first["miss"].get("reason", "")}
    if "latch" in first and "X_LB" in first["latch"]:
        X = np.asarray(first["latch"]["X_LB"], dtype=float)
        Xb = pose_from_vector(cfg.get("contact", {}).get("latch", {}).get("X_LB", [0.0] * 6))
        dR = Xb[:3, :3].T @ X[:3, :3]
        out["latch"] = {"t": first["latch"]["t"],
                        "misalignment_m": float(np.linalg.norm(X[:3, 3] - Xb[:3, 3])),
                        "misalignment_deg": float(np.degrees(np.arccos(np.clip((np.trace(dR) - 1) / 2, -1, 1))))}
    out["interface_peak"] = {"force_N": F_peak, "moment_Nm": M_peak, "rig_force_N": F_rig}
    out["momentum_drift_Ns"] = dP
    out["orbit_on"] = float(cfg.get("orbiter", {}).get("orbit_altitude", 0.0)) > 0.0
    out["momentum_P0_Ns"] = float(np.linalg.norm(P0)) if P0 is not None else 0.0
    out["rig"] = {"state": hil_state, **{k: link[k] for k in ("crc_errors", "bad_frames", "seq_lost", "rx_fps",
                                                           "rtt_p99_s", "tx_frames", "rx_frames") if k in link}}
    return out


def summary_table(fig: dict[str, Any], stats: dict[str, dict[str, Any]], ok: bool) -> str:
    """The end-of-run table (text) from :func:`run_figures` and the services' final statistics."""
    rows: list[tuple[str, str]] = []
    for name in PHASES:
        t = fig["phases"].get(name)
        rows.append((f"phase: {name}", "—" if t is None else f"from t = {t:7.2f} s"))
    if "latch" in fig:
        rows.append(("latches closed", f"t = {fig['latch']['t']:7.2f} s"))
    c = fig.get("capture")
    if c:
        rows.append(("capture relative velocity", f"{c['v_rel_m_s'] * 1e3:.1f} mm/s, {c['w_rel_deg_s']:.3f} °/s"))
    if "miss" in fig:
        rows.append(("capture MISSED", f"t = {fig['miss']['t']:.2f} s: {fig['miss']['reason']}"))
    p = fig["interface_peak"]
    rig = f" (rig sensed {p['rig_force_N']:.0f} N)" if p["rig_force_N"] else ""
    rows.append(("peak interface force / moment", f"{p['force_N']:.0f} N / {p['moment_Nm']:.0f} N·m{rig}"))
    if "latch" in fig:
        lat = fig["latch"]
        rows.append(("misalignment at latch", f"{lat['misalignment_m'] * 1e3:.1f} mm, {lat['misalignment_deg']:.2f}°"))
    orbit = " (orbital terms on: not an invariant)" if fig.get("orbit_on") else ""
    rows.append(("momentum drift (orbiter + payload)",
                 f"{fig['momentum_drift_Ns']:.3g} N·s of {fig['momentum_P0_Ns']:.3g} N·s{orbit}"))
    over = {n: (int(s.get("overruns", 0)), int(s.get("steps", 0))) for n, s in stats.items() if s and "steps" in s}
    rows.append(("overruns", ", ".join(f"{n} {o}" + (f" of {k} steps" if o else "")
                                       for n, (o, k) in over.items() if k) or "—"))
    r = fig["rig"]
    if r.get("state") is not None:
        link = (f"{r.get('tx_frames', 0)} frames out, {r.get('rx_frames', 0)} in, CRC errors "
                f"{r.get('crc_errors', 0)}, bad frames {r.get('bad_frames', 0)}, lost {r.get('seq_lost', 0)}; "
                f"rig {r['state']}")
        rows.append(("rig link", link))
    rows.append(("completed as scripted", "yes" if ok else "NO"))
    w = max(len(k) for k, _ in rows)
    return "\n".join(f"  {k:<{w}}  {v}" for k, v in rows)


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
    p.add_argument("--hil", metavar="URL", help="the rig's serial port or pyserial URL instead of [hil] url")
    p.add_argument("--no-report", action="store_true", help="no report and figures after the run")


def _run_dir() -> Path:
    """A new ``runs/<timestamp>`` directory under the working directory."""
    base = Path("runs") / time.strftime("%Y%m%d-%H%M%S")
    d, k = base, 1
    while d.exists():
        d, k = base.with_name(f"{base.name}-{k}"), k + 1
    d.mkdir(parents=True)
    return d


def _with_hil_url(config_path: str, url: str, where: Path) -> str:
    """A copy of the config with ``[hil] url`` replaced, written into ``where``; its path."""
    from protocol.config import load
    from services.replay import toml_dumps
    cfg = load(config_path)
    cfg["hil"] = {**cfg.get("hil", {}), "url": url}
    sec = cfg.get("security")
    if isinstance(sec, dict) and not Path(sec.get("keys_dir", "keys")).is_absolute():
        sec["keys_dir"] = str(Path(config_path).resolve().parent / sec.get("keys_dir", "keys"))
    out = where / f"{Path(config_path).stem}-hil.toml"
    out.write_text(f"# {config_path} with [hil] url = {url!r} (launch.py run --hil)\n" + toml_dumps(cfg))
    return str(out)


def cmd_run(a: argparse.Namespace) -> int:
    """Validate, then launch and supervise the run; after it, the main job's figures and report.

    Exit code 0 only when every service ran to the end and, for a scripted scenario, the
    run went as scripted (:func:`_expected_events`); 3 when it ran to the end but did not.
    """
    only = _only(a.only)
    try:
        plan = _plan(a.config, only)
    except ConfigError as err:
        return _config_problems(err)
    has_logger = any(s.kind == "logger" and (not only or n in only) for n, s in plan.services.items())
    run_dir = None
    if a.log is None and has_logger and plan.sim.get("log") is None:
        run_dir = _run_dir()
        a.log = str(run_dir / "run.mcap")
    config_path = a.config
    if a.hil:
        config_path = _with_hil_url(a.config, a.hil, run_dir or Path(tempfile.mkdtemp(prefix="berthsim-hil-")))
    overrides = _overrides(a)
    try:
        plan = _plan(config_path, only, overrides)
    except ConfigError as err:
        return _config_problems(err)
    show = os.environ.get("BERTHSIM_NO_PROGRESS", "") in ("", "0")
    from protocol.launcher import Launcher

    hooks: dict[str, Any] = {}
    progress = None
    if show:
        progress = Progress(sys.stderr, plan.duration_ns)
        hooks = {"on_tick": progress.on_tick, "on_message": progress.on_message,
                 "subscribe": PROGRESS_TOPICS if "contact" in plan.services else ()}
    launcher = Launcher(plan, inprocess=a.inprocess, launch_py=__file__, overrides=overrides, **hooks)
    code = launcher.run()
    if progress is not None:
        progress.close()
    log = Path(plan.sim["log"]) if plan.sim.get("log") else None
    if code in (0, 1) and log is not None and log.exists() and "contact" in plan.config.get("services", {}):
        code = _after_run(plan, log, launcher, code, report=not a.no_report)
    return code


def _after_run(plan: Any, log: Path, launcher: Any, code: int, report: bool) -> int:
    """Figures, table, ``summary.json`` and report beside the log; the run's exit code."""
    from errors import LogError
    try:
        fig = run_figures(log, plan.config)
    except LogError as err:
        print(f"berthsim: cannot read the log for the summary: {err}", file=sys.stderr)
        return code or 1
    t_end_s = plan.duration_ns * 1e-9 if code == 0 else max((r.t_ns for r in launcher.records.values()), default=0) * 1e-9
    expected = _expected_events(plan.config, t_end_s)
    seen = [k for _, k in fig["events"]]
    it = iter(seen)
    as_scripted = all(k in it for k in expected) and "miss" not in seen  # in order (a subsequence)
    fig["ok"] = code == 0 and as_scripted
    fig["expected_events"] = expected
    stats = {n: r.stats or r.live for n, r in launcher.records.items()}  # final, else the latest sim/stats
    fig["overruns"] = {n: int(s.get("overruns", 0)) for n, s in stats.items() if s}
    (log.parent / "summary.json").write_text(json.dumps(fig, indent=1, default=float))
    if report:
        try:
            from services.report import make_report
            rep = make_report(log, log.parent / "report")
            fig["report"] = str(rep.pdf)
        except Exception as err:  # noqa: BLE001 - the run's result stands without its plots
            print(f"berthsim: report failed: {type(err).__name__}: {err}", file=sys.stderr)
    where = f"log {log}" + (f", report {fig['report']}" if "report" in fig else "")
    verdict = "completed as scripted" if fig["ok"] else "did NOT complete as scripted"
    print(f"berthsim: run {verdict}; {where}", file=sys.stderr)
    print(summary_table(fig, stats, fig["ok"]), file=sys.stderr)
    if code == 0 and not as_scripted:
        missing = [k for k in expected if k not in seen]
        miss = f"; capture missed: {fig['miss']['reason']}" if "miss" in fig else ""
        print(f"berthsim: expected events missing: {', '.join(missing) or 'order'}{miss}", file=sys.stderr)
        return 3
    return code


class Progress:
    """The main job's progress line on a stream: simulation time, real-time factor, phase.

    Plugs into :class:`protocol.launcher.Launcher` through its public hooks: ``on_tick``
    draws the line (every 0.25 s on a terminal, every 10 s otherwise), ``on_message``
    follows the phase from the ``contact/event`` topic (:data:`PROGRESS_TOPICS`).
    """

    def __init__(self, stream: Any, t_end_ns: int) -> None:
        self.stream, self.t_end_ns = stream, int(t_end_ns)
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        self.phase, self.t_ns, self._next = 0, 0, 0.0

    def on_message(self, topic: str, sample: Any) -> None:
        """Follow the phase from a ``contact/event`` sample."""
        self.t_ns = max(self.t_ns, sample.t_ns)
        for ev in sample.body["events"]:
            self.phase = phase_after(self.phase, ev.get("kind", ""))

    def on_tick(self, t_ns: int, wall_s: float, stats: dict[str, dict[str, Any]]) -> None:
        """Draw the line (rate-limited off a terminal); a final newline once the end is reached."""
        now = time.monotonic()
        end = t_ns >= self.t_end_ns > 0
        if now < self._next and not end:
            return
        self._next = now + (0.25 if self.tty else 10.0)
        t = max(t_ns, self.t_ns) if t_ns else self.t_ns
        frac = min(t / self.t_end_ns, 1.0) if self.t_end_ns else 0.0
        bar = "#" * int(30 * frac) + "-" * (30 - int(30 * frac))
        text = (f"[{bar}] t = {t * 1e-9:7.2f}/{self.t_end_ns * 1e-9:.0f} s  "
                f"{t * 1e-9 / max(wall_s, 1e-9):5.2f}x real time  phase: {PHASES[self.phase]}")
        print("\r" + text if self.tty else text, end="" if self.tty else "\n", file=self.stream, flush=True)

    def close(self) -> None:
        """End the line on a terminal."""
        if self.tty:
            print(file=self.stream, flush=True)


PROGRESS_TOPICS = ("contact/event",)
"""The topics :class:`Progress` follows."""


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


# ---------------------------------------------------------------- analyze
def _analyze_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("case", help="yoshida1992 or cyril1998 (services.analysis.CASES)")
    p.add_argument("--out", help="directory for CSV and PNG files (default: print only)")


def cmd_analyze(a: argparse.Namespace) -> int:
    """Reproduce a seed's worked example (:mod:`services.analysis`)."""
    from services.analysis import main as analyze
    return analyze([a.case] + (["--out", a.out] if a.out else []))


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
               *_lazy("services.replay", "add_arguments", "main", __file__)),
    "report": ("plot a log: PNG figures and a multi-page PDF", *_lazy("services.report", "add_arguments", "main")),
    "export": ("export a log to Parquet or CSV", *_lazy("services.export", "add_arguments", "main")),
    "recover": ("rebuild the index and summary of a log whose logger died",
                *_lazy("services.logger", "add_recover_arguments", "recover_main")),
    "analyze": ("reproduce a seed's worked example", _analyze_args, cmd_analyze),
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
        if cname == name:  # only the chosen command's options: the others' modules stay unimported
            add(sp)
        sp.set_defaults(handler=handler)
    a = parser.parse_args(argv)
    return a.handler(a)


if __name__ == "__main__":
    sys.exit(main())
