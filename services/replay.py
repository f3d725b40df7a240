"""The replay service: publishes a logged session back onto the bus (DESIGN §6).

``launch.py replay LOG`` (:mod:`tools.resim`, which also makes the run's configuration
and re-simulates one service) runs a launcher whose run holds a *replay source* (this
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
is read a chunk at a time (:meth:`protocol.logfile.LogFile.blocks`) and the wire bytes
go out as logged, nothing decoded.

Options (all of ``launch.py replay``): ``--start S`` / ``--end S`` (inclusive window
of simulation time), ``--topics P,..`` / ``--exclude P,..`` (fnmatch patterns; a
pattern that matches no logged topic is an error that names it), ``--loop``,
``--paused`` (start paused; needs a terminal), a progress bar on stderr (``tqdm``, on a
terminal), and the keyboard on a terminal (:data:`KEYS`): space pause/resume, ``s`` step
one message, ``+``/``-`` rate ×2/÷2, ``]``/``[`` seek ±5 s, ``q`` quit. Tests drive the
same controls through :meth:`ReplaySource.handle_key`, :meth:`~ReplaySource.pause`,
:meth:`~ReplaySource.step`, :meth:`~ReplaySource.seek`.

Playback control from a live view (``launch.py replay LOG --view``, :mod:`services.viewer`):
the viewer's requests reach the replay's process as control messages (``{"op": "playback",
"cmd": "pause" | "play" | "seek" | "rate", ...}``, forwarded by the launcher), which its shell
hands to :meth:`ReplaySource.playback` at its next loop turn. While the replay is paused the
shell does not call :meth:`~ReplaySource.read` (:meth:`~ReplaySource.holding`), so it keeps
answering control. With ``hold = true`` (``--view`` without co-simulated services) the replay
holds at the end of its window instead of ending: the view can seek back, and the run lasts
until Ctrl-C; ``play`` there starts again from the window's start.

The service's keys (``[services.NAME]``, :data:`OPTIONS`) are parsed once into :class:`ReplayParams`, with the
defaults of :data:`DEFAULTS` (frozen, units in its fields' metadata, :mod:`protocol.params`); :data:`PARAMS` names
it for :mod:`protocol.registry`.
"""

from __future__ import annotations

import itertools
import math
import os
import select
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, TextIO

import numpy as np

from errors import ConfigError, LogError
from protocol.config import check_value
from protocol.logfile import LogFile, open_log, select_topics
from protocol.messages import SCHEMAS
from protocol.params import ServiceTableParams, param
from protocol.service import Port, ServicePorts
from protocol.timebase import check_seconds

__all__ = ["DEFAULTS", "KEYS", "OPTIONS", "PARAMS", "PLAYBACK_COMMANDS", "RATE_MAX", "RATE_MIN", "TABLES", "Lateness",
           "ReplayParams", "ReplaySource", "build", "check_rate", "ports", "validate"]

TABLES: tuple[str, ...] = ()
Num = (int, float)
OPTIONS: dict[str, Any] = {"log": str, "topics": list, "exclude": list, "start": Num, "end": Num, "rate": Num,
                           "loop": bool, "paused": bool, "keyboard": bool, "progress": bool, "hold": bool}
DEFAULTS: dict[str, Any] = {"topics": [], "exclude": [], "start": None, "end": None, "rate": 0.0, "loop": False,
                            "paused": False, "keyboard": False, "progress": False, "hold": False}
"""The value of each key of :data:`OPTIONS` that ``[services.NAME]`` leaves out (``log`` has none: it is required;
``start``, ``end`` None: the log's own ends; ``rate`` 0: as fast as possible)."""

PLAYBACK_COMMANDS = ("pause", "play", "seek", "rate")
"""The ``cmd`` of a playback control message (:meth:`ReplaySource.playback`)."""

KEYS: dict[str, str] = {" ": "pause/resume", "p": "pause/resume", "s": "step one message", ".": "step one message",
                        "+": "rate x2", "-": "rate /2", "]": "seek +5 s", "[": "seek -5 s", "q": "quit"}
"""Keyboard commands of a replay on a terminal."""

_S = 1_000_000_000
_MS = 1_000_000
SEEK_STEP_NS = 5 * _S
LAG_TOLERANCE_NS = 50 * _MS
"""Behind schedule by more than this, the replay slows down instead of bursting. [ns]"""
RATE_MIN, RATE_MAX = 1e-3, 1e3
"""The paces a replay takes besides 0 (as fast as possible): 1/1000 to 1000 times the recorded one
(at 1e-3 a 45 s run lasts 12.5 h; faster than about 100x is the machine's --max anyway)."""


def check_rate(rate: Any, where: str = "rate") -> str | None:
    """The problem with a replay pace, or None: 0 (as fast as possible) or a finite number in
    [:data:`RATE_MIN`, :data:`RATE_MAX`]."""
    if isinstance(rate, bool) or not isinstance(rate, Num) or not (rate == 0 or RATE_MIN <= rate <= RATE_MAX):
        return f"{where}: expected 0 (as fast as possible) or within [{RATE_MIN:g}, {RATE_MAX:g}], got {rate!r}"
    return None


@dataclass(frozen=True)
class ReplayParams(ServiceTableParams):
    """``[services.NAME]`` of a replay, parsed once (:data:`OPTIONS`, defaults :data:`DEFAULTS`; the module docstring
    and ``launch.py replay`` say what each key does). Each field's unit is in its metadata
    (:func:`protocol.params.units`)."""

    DEFAULTS: ClassVar[Mapping[str, Any]] = DEFAULTS

    log: str = param("-")                            # the MCAP file to replay
    topics: tuple[str, ...] = param("-")             # fnmatch patterns; () : every logged topic but sim/*
    exclude: tuple[str, ...] = param("-")            # fnmatch patterns
    start: float | None = param("s")                 # inclusive window of simulation time; None: the log's start
    end: float | None = param("s")                   # None: the log's end
    rate: float = param("1")                         # multiple of the recorded pace; 0: as fast as possible
    loop: bool = param("-")
    paused: bool = param("-")
    keyboard: bool = param("-")
    progress: bool = param("-")
    hold: bool = param("-")                          # hold at the window's end instead of ending


PARAMS = ReplayParams
"""The kind's declared parameters (:mod:`protocol.registry`)."""


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
    hold_end : bool
        At the end of the window, hold (paused, :attr:`ended`) instead of ending; a seek or
        :meth:`resume` goes on (not with ``loop``, which never ends).
    progress : text stream, optional
        Where the progress bar goes (``tqdm``, drawn only when the stream is a terminal);
        None: none.
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
                 hold_end: bool = False, progress: TextIO | None = None, keyboard: bool = False,
                 report: TextIO | None = None, clock: Callable[[], int] = time.monotonic_ns,
                 sleep: Callable[[float], None] = time.sleep) -> None:
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
        if (bad := check_rate(rate)) is not None:
            raise ConfigError(bad)
        self.loop = loop
        self.hold_end = bool(hold_end) and not loop
        self.ended = False
        """Held at the end of the window (``hold_end``): paused until a seek or :meth:`resume`."""
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
        self._progress: Any = None  # the progress bar (tqdm), drawn on a terminal only
        if progress is not None:
            from tqdm import tqdm
            self._progress = tqdm(total=round((self.end_ns - self.start_ns) / _S, 3), file=progress, disable=None,
                                  dynamic_ncols=True,
                                  bar_format="replay {percentage:3.0f}%|{bar}| {desc}")
            if self._progress.disable:
                self._progress = None
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
        """Continue publishing (the pace re-anchors at the current message); held at the end
        (:attr:`ended`), start again from the window's start."""
        with self._lock:
            if self.ended:
                self._seek_to = self.start_ns
                self.ended = False
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
            self.ended = False
            self._touched = True

    def set_rate(self, rate: float) -> None:
        """New pace (multiple of the recorded one; 0 = as fast as possible; :func:`check_rate`)."""
        if (bad := check_rate(rate)) is not None:
            raise ConfigError(bad)
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
            self.set_rate(min(self.status.rate * 2, RATE_MAX) if self.status.rate else 0.0)
        elif key == "-":
            self.set_rate(max(self.status.rate / 2, RATE_MIN) if self.status.rate else 1.0)
        elif key == "]":
            self.seek(self.status.t_ns + SEEK_STEP_NS)
        elif key == "[":
            self.seek(self.status.t_ns - SEEK_STEP_NS)
        elif key == "q":
            self.stop()
        else:
            return False
        return True

    def playback(self, msg: Any) -> None:
        """Apply one playback control message (from a live view, through the launcher and the shell).

        ``msg`` is a map with ``cmd`` in :data:`PLAYBACK_COMMANDS`: ``pause``; ``play``
        (:meth:`resume`); ``seek`` with ``t_ns`` (int, log time [ns], clamped to the window);
        ``rate`` with ``rate`` (:func:`check_rate`). ``co_simulated = true`` (the run
        co-simulates services from the replayed topics, which cannot go back in time and, forward,
        would wait for the skipped inputs until their stall timeout) refuses a seek.

        Raises
        ------
        ConfigError
            A malformed message or a refused seek, naming the field and the value (nothing applied).
        """
        if not isinstance(msg, dict):
            raise ConfigError(f"playback: expected a map, got {type(msg).__name__}")
        cmd = msg.get("cmd")
        if cmd == "pause":
            self.pause()
        elif cmd == "play":
            self.resume()
        elif cmd == "seek":
            t = msg.get("t_ns")
            if isinstance(t, bool) or not isinstance(t, int):
                raise ConfigError(f"playback seek: t_ns: expected an integer time [ns], got {t!r}")
            if msg.get("co_simulated"):
                raise ConfigError(f"playback seek: t_ns = {t} refused: services co-simulated from the replayed "
                                  "topics cannot go back in time, nor skip their inputs")
            self.seek(t)
        elif cmd == "rate":
            if (bad := check_rate(msg.get("rate"), "playback rate")) is not None:
                raise ConfigError(bad)
            self.set_rate(float(msg["rate"]))
        else:
            raise ConfigError(f"playback: cmd: expected one of {', '.join(PLAYBACK_COMMANDS)}, got {cmd!r}")

    def holding(self) -> bool:
        """Paused with no step pending, or held at the end (``hold_end``), and not stopped: :meth:`read`
        would wait (or, at the end, return None without ending); the shell asks again later instead."""
        if self._stop.is_set():
            return False
        with self._lock:
            held = self.ended or (self.status.paused and self._steps <= 0)
        if held:
            self._show(force=False)
        return held

    # ---------------------------------------------------------------- source
    def _open(self, t_ns: int) -> Iterator[tuple[int, str, bytes]]:
        """``(t_ns, topic, payload)`` from ``t_ns`` on: the log read a block (chunk) at a time."""
        blocks = self.log.blocks(self.selected, t_ns, self.end_ns)
        return itertools.chain.from_iterable(zip(b.t_ns.tolist(), b.topic.tolist(), b.payload.tolist(), strict=True)
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
                self._at_end()
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
            self._at_end()
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

    def _at_end(self) -> None:
        """The end of the window: held there (``hold_end``: paused, :attr:`ended`), or the end of the replay."""
        if self.hold_end and not self._stop.is_set():
            with self._lock:
                self.ended = self.status.paused = True
                self._steps = 0
                self._touched = True
            self._show(force=True)
            return
        self._end()

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
        """Move the progress bar (at most every 0.2 s unless forced); close it at the end."""
        bar = self._progress
        if bar is None:
            return
        now = self._clock()
        if not force and now < self._next_progress:
            return
        self._next_progress = now + 200 * _MS
        st = self.status
        rate = "max" if st.rate <= 0 else f"x{st.rate:.3g}"
        extra = "  PAUSED" if st.paused else ""
        if st.slowed_by:
            extra += f"  slowed (busiest topic {st.slowed_by})"
        bar.n = round((st.t_ns - self.start_ns) / _S, 3)
        bar.set_description_str(f"t = {st.t_ns / _S:.3f}/{self.end_ns / _S:.3f} s  {rate}  {st.sent} msgs{extra}",
                                refresh=False)
        try:
            bar.refresh()
            if final:
                bar.close()
                self._progress = None
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
    """Problems of a replay service's ``[services.NAME]`` beyond its options' kinds (:data:`OPTIONS`,
    checked by :func:`protocol.config.validate`): the log, the topic patterns, the window (``start``,
    ``end``: times in int64 ns, the window not empty within the log) and the pace (``rate``, :func:`check_rate`).
    Each problem names its full key (``services.NAME.rate``) and the command-line option that sets it."""
    where = f"services.{name}"
    svc = config["services"][name]
    if "log" not in svc:
        return [f"{where}.log: missing (the MCAP file to replay)"]
    if any(check_value(where, svc[k], kind) for k, kind in OPTIONS.items() if k in svc):
        return []  # listed by protocol.config, naming the key
    problems = [bad for key in ("start", "end")
                if key in svc and (bad := check_seconds(svc[key], f"{where}.{key} (--{key})"))]
    if (bad := check_rate({**DEFAULTS, **svc}["rate"], f"{where}.rate (--rate)")) is not None:
        problems.append(bad)
    if problems:
        return problems
    p = ReplayParams.from_service(config, name)
    try:
        with open_log(p.log) as log:
            select_topics(log.topics, p.topics or None, p.exclude)
            start = max(_ns(p.start) or log.start_ns, log.start_ns)
            end_ns = _ns(p.end)
            end = log.end_ns if end_ns is None else min(end_ns, log.end_ns)
            if end < start:
                return [f"{where}.start, {where}.end (--start, --end): the window [{start / _S:g}, {end / _S:g}] s "
                        f"is empty (log {str(log.path)!r} spans [{log.start_ns / _S:g}, {log.end_ns / _S:g}] s)"]
    except LogError as err:
        return [f"{where}.log: {err}"]
    except ConfigError as err:
        return [f"{where}.topics, {where}.exclude: {p}" for p in err.problems]
    if p.paused and not p.keyboard:
        return [f"{where}.paused: a paused replay needs the keyboard (a terminal)"]
    return []


def ports(config: dict[str, Any], name: str) -> ServicePorts:
    """The replay's ports: the log's topics it selects, before it is built (:mod:`protocol.config`)."""
    p = ReplayParams.from_service(config, name)
    with open_log(p.log) as log:
        topics = select_topics(log.topics, p.topics or None, p.exclude)
    return ServicePorts("source", (), tuple(Port(t, SCHEMAS[t].kind if t in SCHEMAS else "state") for t in topics))


def _ns(seconds: float | None) -> int | None:
    """Seconds [s] as int ns, or None for None."""
    return None if seconds is None else int(round(seconds * _S))


def build(config: dict[str, Any], name: str, period_ns: int) -> ReplaySource:
    """The replay source of service ``name`` (its keys: :class:`ReplayParams`).

    Raises
    ------
    LogError, ConfigError
        As :class:`ReplaySource`.
    """
    p = ReplayParams.from_service(config, name)
    return ReplaySource(p.log, name=name, period_ns=period_ns, topics=p.topics or None, exclude=p.exclude,
                        start_ns=_ns(p.start), end_ns=_ns(p.end), rate=p.rate, loop=p.loop, paused=p.paused,
                        hold_end=p.hold, progress=sys.stderr if p.progress else None, keyboard=p.keyboard,
                        report=sys.stderr if p.rate > 0 else None)
