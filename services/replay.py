"""Replay: publish a logged session back onto the bus, and re-simulate one service (DESIGN §6).

``launch.py replay LOG`` runs a launcher whose run holds a *replay source* (this
module's :class:`ReplaySource`, a source of :mod:`protocol.shell`) that publishes the
logged messages, byte for byte, in ``log_time`` order, optionally together with
services from a config (``--config CFG --only a,b``) and a logger (``--log OUT``).
Topics produced by a co-simulated service are never replayed (it produces them now);
``sim/*`` topics are replayed only when a pattern names them explicitly.

Pacing is the source's own: ``--rate R`` publishes at R times the recorded pace
(``--max``, the default, as fast as possible; ``--realtime`` = ``--rate 1``, to re-drive
a rig). A paced replay schedules every message from one anchor, (wall instant of the
first message, its log time): message k is due at ``wall0 + (t_k - t_0) / R``, so the
recorded inter-message timing is kept without drift; at the end it prints how late
the messages went out against that schedule (p50, p99, max; measured when the source
hands a message to the shell, which publishes it next). The run itself is lockstep, so
services consume the replayed messages by their timestamps, exactly as in the recorded
run, whatever the pace: that is the deterministic lockstep mode. When the source cannot
keep the pace (more than ``LAG_TOLERANCE_NS`` behind: a topic saturates the bus or the
consumers), it slows down the whole replay proportionally — re-anchoring the clock,
never dropping or reordering — and says which topic was busiest. At ``--max`` the log
is read a chunk at a time (:meth:`services.logger.LogFile.blocks`) and the wire bytes
go out as logged, nothing decoded.

Options (all of ``launch.py replay``): ``--start S`` / ``--end S`` (inclusive window
of simulation time), ``--topics P,..`` / ``--exclude P,..`` (fnmatch patterns; a
pattern that matches no logged topic is an error that names it), ``--loop``,
``--paused`` (start paused; needs a terminal), a progress readout on stderr, and the
keyboard on a terminal (:data:`KEYS`): space pause/resume, ``s`` step one message,
``+``/``-`` rate ×2/÷2, ``]``/``[`` seek ±5 s, ``q`` quit. Tests drive the same
controls through :meth:`ReplaySource.handle_key`, :meth:`~ReplaySource.pause`,
:meth:`~ReplaySource.step`, :meth:`~ReplaySource.seek`.

Re-simulation
-------------
``launch.py replay LOG --resim SERVICE [--config CFG] [--set table.key=value ...]``
re-runs SERVICE (from the logged configuration, attachment ``config.json``, or CFG,
with ``--set`` changes) in lockstep against the logged outputs of every other service,
and writes a new log (``--log``, default ``LOG-resim-SERVICE.mcap``). It then compares
SERVICE's outputs with the recorded ones (every envelope field but ``wall_ns``, the
fields bit for bit) and prints the verdict: unchanged, they are bit-identical. The
re-run lasts the logged run's ``duration``, or, for a log cut short, the log's span in
whole periods of the slowest co-simulated service (it cannot step past its inputs).
Bit-identity holds for runs recorded in lockstep mode; a realtime run consumed the
latest samples as they arrived, which a re-run cannot reproduce (a note says so).

Exit codes: 0 success (resim: also when the outputs differ — the comparison is
reported), 1 a service failed, 2 bad usage or a bad log (one line naming the file).
"""

from __future__ import annotations

import argparse
import fnmatch
import itertools
import json
import math
import os
import select
import signal
import sys
import tempfile
import threading
import time
import tomllib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import msgpack
import numpy as np

from errors import ConfigError, LogError, MessageError
from protocol.codec import envelope
from protocol.messages import SCHEMAS
from protocol.service import Port
from services.logger import LogFile, open_log

__all__ = [
    "KEYS",
    "OPTIONS",
    "TABLES",
    "Lateness",
    "OutputComparison",
    "ReplaySource",
    "add_arguments",
    "build",
    "compare_outputs",
    "main",
    "producers",
    "replay_config",
    "resim_config",
    "select_topics",
    "toml_dumps",
    "validate",
]

TABLES: tuple[str, ...] = ()
Num = (int, float)
OPTIONS: dict[str, Any] = {"log": str, "topics": list, "exclude": list, "start": Num, "end": Num, "rate": Num,
                           "loop": bool, "paused": bool, "keyboard": bool, "progress": bool}

KEYS: dict[str, str] = {" ": "pause/resume", "p": "pause/resume", "s": "step one message", ".": "step one message",
                        "+": "rate x2", "-": "rate /2", "]": "seek +5 s", "[": "seek -5 s", "q": "quit"}
"""Keyboard commands of a replay on a terminal."""

_S = 1_000_000_000
_MS = 1_000_000
SEEK_STEP_NS = 5 * _S
LAG_TOLERANCE_NS = 50 * _MS
"""Behind schedule by more than this, the replay slows down instead of bursting. [ns]"""


# ---------------------------------------------------------------- topic selection
def select_topics(available: Iterable[str], topics: Iterable[str] | None = None,
                  exclude: Iterable[str] = ()) -> list[str]:
    """Logged topics selected by ``topics`` patterns minus ``exclude`` patterns (fnmatch).

    ``sim/*`` topics are selected only by a pattern that starts with ``sim/``.

    Parameters
    ----------
    available : iterable of str
        The log's topics.
    topics : iterable of str, optional
        Patterns to include (default: every topic but ``sim/*``).
    exclude : iterable of str
        Patterns to leave out.

    Returns
    -------
    list of str
        Sorted selected topics.

    Raises
    ------
    ConfigError
        If a pattern of ``topics`` or ``exclude`` matches no logged topic (every such
        pattern is named, with the logged topics).
    """
    avail = sorted(available)
    pats = list(topics) if topics else []
    excl = list(exclude)
    unknown = [p for p in pats + excl if not any(fnmatch.fnmatchcase(t, p) for t in avail)]
    if unknown:
        raise ConfigError(f"unknown topics {unknown}: no logged topic matches (logged: {', '.join(avail)})",
                          [f"topic pattern {p!r} matches no logged topic" for p in unknown])
    if pats:
        chosen = [t for t in avail if any(fnmatch.fnmatchcase(t, p) and (not t.startswith("sim/")
                                                                          or p.startswith("sim/")) for p in pats)]
    else:
        chosen = [t for t in avail if not t.startswith("sim/")]
    return [t for t in chosen if not any(fnmatch.fnmatchcase(t, p) for p in excl)]


# ---------------------------------------------------------------- the source
@dataclass
class _Status:
    t_ns: int = 0
    sent: int = 0
    rate: float = 0.0
    paused: bool = False
    slowed_by: str = ""
    slowdowns: int = 0


class Lateness:
    """Histogram of how late paced messages went out against their schedule (10 µs bins, to 1 s).

    Attributes
    ----------
    count : int
        Messages recorded.
    max_ns : int
        The largest lateness recorded (exact). [ns]
    """

    BIN_NS = 10_000
    BINS = 100_000

    def __init__(self) -> None:
        self._hist = np.zeros(self.BINS, dtype=np.int64)
        self.count = 0
        self.max_ns = 0

    def add(self, late_ns: int) -> None:
        """Record one message ``late_ns`` late (negative: early, counted as 0). [ns]"""
        late_ns = max(int(late_ns), 0)
        self._hist[min(late_ns // self.BIN_NS, self.BINS - 1)] += 1
        self.count += 1
        self.max_ns = max(self.max_ns, late_ns)

    def percentile(self, q: float) -> int:
        """The ``q``-th percentile (0..100), as the upper edge of its bin (at most ``max_ns``). [ns]"""
        if not self.count:
            return 0
        k = int(np.searchsorted(np.cumsum(self._hist), math.ceil(q / 100.0 * self.count), side="left"))
        return min((k + 1) * self.BIN_NS, self.max_ns)

    def summary(self) -> dict[str, float]:
        """``messages``, ``p50_ms``, ``p99_ms``, ``max_ms``."""
        return {"messages": self.count, "p50_ms": self.percentile(50) / _MS, "p99_ms": self.percentile(99) / _MS,
                "max_ms": self.max_ns / _MS}


class ReplaySource:
    """Publishes the messages of a log in ``log_time`` order (a source of :mod:`protocol.shell`).

    Parameters
    ----------
    log : str, Path or LogFile
        The log to replay.
    name : str
        Service name.
    period_ns : int
        The period it announces (the launcher needs one; it never steps). [ns]
    topics, exclude : iterable of str
        Patterns (:func:`select_topics`).
    start_ns, end_ns : int, optional
        Inclusive window of simulation time. [ns]
    rate : float
        Pace as a multiple of the recorded one; 0 = as fast as possible.
    loop : bool
        Start again at the end (until stopped).
    paused : bool
        Start paused.
    progress : text stream, optional
        Where the progress readout goes (``\\r``-updated on a terminal); None: none.
    keyboard : bool
        Read :data:`KEYS` from stdin if it is a terminal.
    report : text stream, optional
        At the end of a paced replay (``rate`` > 0), one line with the lateness of the
        messages against their schedule (p50, p99, max) goes here.
    clock, sleep : callables
        ``clock() -> int`` monotonic ns and ``sleep(seconds)``; tests inject fakes.

    Raises
    ------
    LogError
        Bad log (named). ConfigError: unknown topic patterns, or an empty window.
    """

    def __init__(self, log: str | os.PathLike[str] | LogFile, *, name: str = "replay", period_ns: int = _MS,
                 topics: Iterable[str] | None = None, exclude: Iterable[str] = (), start_ns: int | None = None,
                 end_ns: int | None = None, rate: float = 0.0, loop: bool = False, paused: bool = False,
                 progress: TextIO | None = None, keyboard: bool = False, report: TextIO | None = None,
                 clock: Callable[[], int] = time.monotonic_ns, sleep: Callable[[float], None] = time.sleep) -> None:
        self.log = log if isinstance(log, LogFile) else open_log(log)
        self.log.register_schemas()
        self.name = name
        self.period_ns = int(period_ns)
        self.selected = select_topics(self.log.topics, topics, exclude)
        unknown = [t for t in self.selected if t not in SCHEMAS]
        if unknown:
            raise LogError(f"log {str(self.log.path)!r}: no usable schema for topics {unknown} (not in this "
                           "program, not a berthsim JSON schema in the log); --exclude them")
        self.outputs = tuple(Port(t, SCHEMAS[t].kind) for t in self.selected)
        self.start_ns = self.log.start_ns if start_ns is None else max(int(start_ns), self.log.start_ns)
        self.end_ns = self.log.end_ns if end_ns is None else min(int(end_ns), self.log.end_ns)
        if self.end_ns < self.start_ns:
            raise ConfigError(f"replay window [{self.start_ns / _S:g}, {self.end_ns / _S:g}] s is empty "
                              f"(log {str(self.log.path)!r} spans [{self.log.start_ns / _S:g}, "
                              f"{self.log.end_ns / _S:g}] s)")
        if rate < 0 or not math.isfinite(rate):
            raise ConfigError(f"rate: expected a finite value >= 0, got {rate!r}")
        self.loop = loop
        self._clock, self._sleep = clock, sleep
        self._lock = threading.Lock()
        self.status = _Status(t_ns=self.start_ns, rate=float(rate), paused=paused)
        self.lateness = Lateness()
        self._report = report
        self._reported = False
        self._rate0 = float(rate)
        self._steps = 0
        self._seek_to: int | None = None
        self._stop = threading.Event()
        self._touched = paused  # a control call since the last read: take the full path
        self._it: Iterator[tuple[int, str, bytes]] = self._open(self.start_ns)
        self._anchor: tuple[int, int] | None = None   # (wall ns, t ns) the pace counts from
        self._window: Counter[str] = Counter()
        self._progress = progress
        self._tty = bool(progress is not None and hasattr(progress, "isatty") and progress.isatty())
        self._next_progress = 0
        self._keyboard: threading.Thread | None = None
        self._termios: Any = None
        self._chain_sigterm()
        if keyboard and sys.stdin.isatty():
            self._start_keyboard()

    # ---------------------------------------------------------------- control (thread-safe)
    def pause(self) -> None:
        """Stop publishing until :meth:`resume` or :meth:`step`."""
        with self._lock:
            self.status.paused = True
            self._touched = True

    def resume(self) -> None:
        """Continue publishing (the pace re-anchors at the current message)."""
        with self._lock:
            self.status.paused = False
            self._steps = 0
            self._anchor = None
            self._touched = True

    def toggle(self) -> None:
        """Pause if running, resume if paused."""
        if self.status.paused:
            self.resume()
        else:
            self.pause()

    def step(self, n: int = 1) -> None:
        """While paused: publish the next ``n`` messages, then stay paused."""
        with self._lock:
            self._steps += int(n)
            self._touched = True

    def seek(self, t_ns: int) -> None:
        """Continue from the first message at or after ``t_ns`` (clamped to the window). [ns]"""
        with self._lock:
            self._seek_to = min(max(int(t_ns), self.start_ns), self.end_ns)
            self._touched = True

    def set_rate(self, rate: float) -> None:
        """New pace (multiple of the recorded one; 0 = as fast as possible)."""
        if rate < 0 or not math.isfinite(rate):
            raise ConfigError(f"rate: expected a finite value >= 0, got {rate!r}")
        with self._lock:
            self.status.rate = self._rate0 = float(rate)
            self._anchor = None
            self._touched = True

    def stop(self) -> None:
        """End the replay: the next :meth:`read` returns None."""
        self._stop.set()
        self._touched = True

    def handle_key(self, key: str) -> bool:
        """Apply one keyboard command (:data:`KEYS`); False for a key that means nothing."""
        if key in (" ", "p"):
            self.toggle()
        elif key in ("s", "."):
            self.step()
        elif key == "+":
            self.set_rate(self.status.rate * 2 if self.status.rate else 0.0)
        elif key == "-":
            self.set_rate(self.status.rate / 2 if self.status.rate else 1.0)
        elif key == "]":
            self.seek(self.status.t_ns + SEEK_STEP_NS)
        elif key == "[":
            self.seek(self.status.t_ns - SEEK_STEP_NS)
        elif key == "q":
            self.stop()
        else:
            return False
        return True

    # ---------------------------------------------------------------- source
    def _open(self, t_ns: int) -> Iterator[tuple[int, str, bytes]]:
        """``(t_ns, topic, payload)`` from ``t_ns`` on: the log read a block (chunk) at a time."""
        blocks = self.log.blocks(self.selected, t_ns, self.end_ns)
        return itertools.chain.from_iterable(zip(b.t_ns.tolist(), b.topic.tolist(), b.payload.tolist())
                                             for b in blocks)

    def _wait_unpaused(self) -> bool:
        """Block while paused (no step pending); False if stopped meanwhile."""
        while True:
            with self._lock:
                if not self.status.paused:
                    return True
                if self._steps > 0:
                    self._steps -= 1
                    self._anchor = None
                    return True
            if self._stop.is_set():
                return False
            self._show(force=False)
            self._sleep(0.02)

    def read(self) -> tuple[int, str, bytes] | None:
        """The next ``(t_ns, topic, payload)`` when its wall instant comes, or None at the end."""
        st = self.status
        if not self._touched and st.rate <= 0 and not st.paused:  # --max, no control call since: fast path
            msg = next(self._it, None)
            if msg is not None:
                st.t_ns = msg[0]
                st.sent += 1
                if self._progress is not None and not st.sent & 1023:
                    self._show(force=False)
                return msg
            if not self.loop:
                self._end()
                return None
        self._touched = False
        if not self._wait_unpaused():
            self._end()
            return None
        with self._lock:
            seek, self._seek_to = self._seek_to, None
        if seek is not None:
            self._it = self._open(seek)
            self._anchor = None
        msg = next(self._it, None)
        if msg is None and self.loop and not self._stop.is_set():
            self._it = self._open(self.start_ns)
            self._anchor = None
            msg = next(self._it, None)
        if msg is None or self._stop.is_set():
            self._end()
            return None
        self._pace(msg[0], msg[1])
        st.t_ns = msg[0]
        st.sent += 1
        self._show(force=False)
        return msg

    def _pace(self, t_ns: int, topic: str) -> None:
        """Wait for the wall instant of the message at ``t_ns``; record how late it goes out."""
        rate = self.status.rate
        if rate <= 0:
            return
        now = self._clock()
        if self._anchor is None:
            self._anchor = (now, t_ns)
            self._window.clear()
            self.lateness.add(0)
            return
        w0, t0 = self._anchor
        self._window[topic] += 1
        due = w0 + int((t_ns - t0) / rate)
        lag = now - due
        if lag > LAG_TOLERANCE_NS and t_ns > t0:
            # cannot keep the pace: slow the whole replay down to what was achieved, from here on
            achieved = (t_ns - t0) / max(now - w0, 1)
            self.status.rate = min(rate, achieved)
            self.status.slowed_by = self._window.most_common(1)[0][0] if self._window else ""
            self.status.slowdowns += 1
            self._anchor = (now, t_ns)
            self._window.clear()
            self.lateness.add(lag)
            return
        while due > now and not self._stop.is_set():
            self._sleep(min(due - now, 50 * _MS) / 1e9)
            now = self._clock()
            if self.status.paused or self._anchor is None:
                break
        self.lateness.add(now - due)

    def _end(self) -> None:
        """At the end: the final progress line and the pacing report (``read`` then returns None)."""
        self._show(force=True, final=True)
        if self._report is None or self._reported or not self.lateness.count:
            return
        self._reported = True
        lt, st = self.lateness.summary(), self.status
        line = (f"replay paced at x{self._rate0:g}: lateness p50 {lt['p50_ms']:.3f} ms, p99 {lt['p99_ms']:.3f} ms, "
                f"max {lt['max_ms']:.3f} ms over {lt['messages']} messages")
        if st.slowdowns:
            line += f"; slowed down {st.slowdowns} times to x{st.rate:.3g} (busiest topic {st.slowed_by})"
        try:
            self._report.write(f"berthsim {line}\n")
            self._report.flush()
        except (OSError, ValueError):
            pass

    def _show(self, force: bool, final: bool = False) -> None:
        out = self._progress
        if out is None:
            return
        now = self._clock()
        if not force and now < self._next_progress:
            return
        self._next_progress = now + (200 if self._tty else 2000) * _MS
        st = self.status
        span = max(self.end_ns - self.start_ns, 1)
        pct = 100.0 * (st.t_ns - self.start_ns) / span
        rate = "max" if st.rate <= 0 else f"x{st.rate:.3g}"
        extra = "  PAUSED" if st.paused else ""
        if st.slowed_by:
            extra += f"  slowed (busiest topic {st.slowed_by})"
        line = (f"replay t={st.t_ns / _S:.3f}/{self.end_ns / _S:.3f} s ({pct:5.1f}%)  {rate}  "
                f"{st.sent} msgs{extra}")
        try:
            if self._tty:
                out.write("\r\x1b[K" + line + ("\n" if final else ""))
            else:
                out.write(line + "\n")
            out.flush()
        except (OSError, ValueError):
            self._progress = None

    # ---------------------------------------------------------------- keyboard and signals
    def _chain_sigterm(self) -> None:
        """In a worker's main thread: SIGTERM also ends a paused replay (then the shell's handler runs)."""
        if threading.current_thread() is not threading.main_thread():
            return
        prev = signal.getsignal(signal.SIGTERM)
        if not callable(prev):  # nobody handles SIGTERM in Python here: leave the default alone
            return

        def handler(signum: int, frame: Any) -> None:
            self._stop.set()
            prev(signum, frame)

        try:
            signal.signal(signal.SIGTERM, handler)
        except ValueError:
            pass

    def _start_keyboard(self) -> None:
        import termios
        import tty
        fd = sys.stdin.fileno()
        try:
            self._termios = termios.tcgetattr(fd)
            tty.setcbreak(fd)
        except termios.error:
            self._termios = None
            return
        self._keyboard = threading.Thread(target=self._read_keys, args=(fd,), name=f"{self.name}-keys", daemon=True)
        self._keyboard.start()

    def _read_keys(self, fd: int) -> None:
        while not self._stop.is_set():
            ready, _, _ = select.select([fd], [], [], 0.1)
            if ready:
                ch = os.read(fd, 1).decode(errors="ignore")
                if ch:
                    self.handle_key(ch)

    def close(self) -> None:
        """Restore the terminal, close the log (idempotent)."""
        self._stop.set()
        if self._termios is not None:
            import termios
            try:
                termios.tcsetattr(sys.stdin.fileno(), termios.TCSADRAIN, self._termios)
            except termios.error:
                pass
            self._termios = None
        self.log.close()


# ---------------------------------------------------------------- service module
def validate(config: dict[str, Any], name: str) -> list[str]:
    """Problems of a replay service's ``[services.NAME]``: the log and the topic patterns."""
    svc = config["services"][name]
    if "log" not in svc:
        return ["log: missing (the MCAP file to replay)"]
    try:
        with open_log(svc["log"]) as log:
            select_topics(log.topics, svc.get("topics") or None, svc.get("exclude", ()))
    except LogError as err:
        return [str(err)]
    except ConfigError as err:
        return list(err.problems)
    if svc.get("paused") and not svc.get("keyboard"):
        return ["paused: a paused replay needs the keyboard (a terminal)"]
    return []


def _ns(seconds: Any) -> int | None:
    return None if seconds is None else int(round(float(seconds) * _S))


def build(config: dict[str, Any], name: str, period_ns: int) -> ReplaySource:
    """The replay source of service ``name``."""
    svc = config["services"][name]
    return ReplaySource(svc["log"], name=name, period_ns=period_ns, topics=svc.get("topics") or None,
                        exclude=svc.get("exclude", ()), start_ns=_ns(svc.get("start")), end_ns=_ns(svc.get("end")),
                        rate=float(svc.get("rate", 0.0)), loop=bool(svc.get("loop", False)),
                        paused=bool(svc.get("paused", False)),
                        progress=sys.stderr if svc.get("progress", False) else None,
                        keyboard=bool(svc.get("keyboard", False)),
                        report=sys.stderr if float(svc.get("rate", 0.0)) > 0 else None)


# ---------------------------------------------------------------- configs
def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, Mapping):
        return "{" + ", ".join(f"{json.dumps(str(k))} = {_toml_value(x)}" for k, x in v.items()) + "}"
    raise ConfigError(f"config value {v!r}: type {type(v).__name__} cannot be written as TOML")


def toml_dumps(config: Mapping[str, Any]) -> str:
    """A config dict as TOML text (``tomllib.loads`` gives it back); tables as ``[a.b]`` headers.

    Raises
    ------
    ConfigError
        For a value TOML cannot hold (named).
    """
    lines: list[str] = []

    def table(d: Mapping[str, Any], path: tuple[str, ...]) -> None:
        scalars = [(k, v) for k, v in d.items() if not isinstance(v, Mapping)]
        subs = [(k, v) for k, v in d.items() if isinstance(v, Mapping)]
        if path and (scalars or not subs):
            lines.append("[" + ".".join(json.dumps(p) for p in path) + "]")
        for k, v in scalars:
            lines.append(f"{json.dumps(str(k))} = {_toml_value(v)}")
        for k, v in subs:
            table(v, path + (str(k),))

    table(config, ())
    return "\n".join(lines) + "\n"


def _module_tables(kind: str) -> tuple[str, ...]:
    from protocol.config import service_module
    return tuple(getattr(service_module(kind), "TABLES", ()))


def producers(log: LogFile, topics: Iterable[str] | None = None) -> dict[str, str]:
    """Topic -> sender of its first logged message (the service that produced it).

    Raises
    ------
    LogError
        If a message cannot be read (the file is named).
    """
    want = list(topics if topics is not None else log.topics)
    first: dict[str, bytes] = {}
    for b in log.blocks(want):  # one pass, until every topic has shown up
        for topic, payload in zip(b.topic.tolist(), b.payload.tolist()):
            first.setdefault(topic, payload)
        if len(first) == len(want):
            break
    out: dict[str, str] = {}
    for topic in want:
        payload = first.get(topic)
        if payload is None:
            continue
        try:
            out[topic] = envelope(topic, payload)[1]
        except MessageError:
            out[topic] = msgpack.unpackb(payload, raw=False)[1] if payload else ""
    return out


def _fastest_rate(services: Mapping[str, Any]) -> float:
    rates = [float(s["rate_hz"]) for s in services.values() if isinstance(s, Mapping) and "rate_hz" in s]
    return max(rates) if rates else 1000.0


def replay_config(log_path: str | os.PathLike[str], *, base: Mapping[str, Any] | None = None,
                  only: Iterable[str] = (), topics: Iterable[str] | None = None, exclude: Iterable[str] = (),
                  start: float | None = None, end: float | None = None, rate: float = 0.0, loop: bool = False,
                  paused: bool = False, keyboard: bool = False, progress: bool = False, out_log: str | None = None,
                  transport: str | None = None, bus: str | None = None) -> dict[str, Any]:
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
        span_end = log.end_ns if end is None else min(_ns(end), log.end_ns)
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
    if start is not None:
        src["start"] = float(start)
    if end is not None:
        src["end"] = float(end)
    name = "replay"
    while name in services:
        name += "_"
    services[name] = src
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
        Bad log, or no configuration in it and none given (named).
    ConfigError
        Unknown service, bad ``--set``.
    """
    if base is None:
        with open_log(log_path) as log:
            base = log.config()
        if base is None:
            raise LogError(f"log {str(log_path)!r}: has no config.json attachment; give --config")
    base = json.loads(json.dumps(base))
    for s in sets:
        _set_value(base, s)
    services = base.get("services", {})
    if service not in services:
        raise ConfigError(f"--resim {service!r}: no such service (configured: {', '.join(services)})")
    cfg = replay_config(log_path, base=base, only=[service], out_log=out_log, transport=transport)
    dur = base.get("sim", {}).get("duration")
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
    pace.add_argument("--rate", type=float, default=0.0, help="pace as a multiple of the recorded one")
    pace.add_argument("--max", action="store_true", help="as fast as possible (default)")
    pace.add_argument("--realtime", action="store_true",
                      help="--rate 1: the recorded timing on the wall clock (re-drive a rig); prints the lateness")
    p.add_argument("--start", type=float, help="simulation time to start at [s]")
    p.add_argument("--end", type=float, help="simulation time to end at [s]")
    p.add_argument("--topics", help="comma-separated topic patterns to replay (fnmatch)")
    p.add_argument("--exclude", help="comma-separated topic patterns to leave out")
    p.add_argument("--loop", action="store_true", help="start again at the end (until Ctrl-C)")
    p.add_argument("--paused", action="store_true", help="start paused (keyboard: space, s, +, -, [, ], q)")
    p.add_argument("--log", dest="out_log", help="also record the replayed run into this MCAP file")
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
    fd, tmp = tempfile.mkstemp(prefix="berthsim-replay-", suffix=".toml")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(toml_dumps(config))
        plan = validate(config, path=tmp)
        return Launcher(plan, inprocess=inprocess, launch_py=launch_py).run()
    finally:
        os.unlink(tmp)


def main(a: argparse.Namespace, launch_py: str | os.PathLike[str] | None = None) -> int:
    """``launch.py replay``: 0 success, 1 a service failed, 2 bad usage or log (one line on stderr)."""
    from protocol.config import load
    launch_py = launch_py or Path(__file__).resolve().parents[1] / "launch.py"
    try:
        base = load(a.config) if a.config else None
        if a.resim:
            out = a.out_log or str(Path(a.log).with_name(f"{Path(a.log).stem}-resim-{a.resim}.mcap"))
            config = resim_config(a.log, a.resim, base=base, sets=a.set, out_log=out, transport=a.transport)
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
                                   rate=0.0 if a.max else 1.0 if a.realtime else a.rate, loop=a.loop, paused=a.paused,
                                   keyboard=tty, progress=not (a.quiet or os.environ.get("BERTHSIM_NO_PROGRESS")),
                                   out_log=a.out_log,
                                   transport=a.transport, bus=a.bus)
    except (LogError, ConfigError) as err:
        print(f"berthsim replay: {str(err).splitlines()[0]}", file=sys.stderr)
        return 2
    try:
        code = _run_plan(config, a.inprocess or a.transport == "inproc", launch_py)
    except ConfigError as err:
        print(f"berthsim replay: invalid run: {'; '.join(err.problems)}", file=sys.stderr)
        return 2
    if a.resim and code == 0:
        out = next(s["path"] for s in config["services"].values() if s.get("kind") == "logger")
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
