"""The rig emulator: a Stewart platform (or servo rig) with its firmware, on the far end of a link.

Run as its own process on the master side of a pty, a serial URL or a TCP socket::

    python -m hil.emulator --pty                      # makes a pty, prints "PTY <path>"
    python -m hil.emulator --port fd:7 [--delay-ms D] [--drop P] [--bit-error P] [--lockstep]
    python -m hil.emulator --port socket://... | /dev/ttyUSB1 | --listen 127.0.0.1:5555

:func:`spawn_emulator` makes the pty pair with ``os.openpty``, starts the process on
the master and returns the host-side path (tests, the bridge's ``url = "emulator"``).

Parts (the rig itself, :class:`hil.rig.RigCore`, is stepped by explicit times and does no I/O):

- the wire format it parses is ``[hil] format`` (:mod:`hil.rigproto`, default ``native``): the native
  protocol is the core's own; a format without a state machine (``binary6``, ``ascii``) goes through
  :class:`AxisFirmware`, which decodes the setpoints with the format's rig parser and moves the axes
  (no handshake, no replies: such a rig is engaged from power-up and holds its last value);
- :class:`Channel` — transport delay, byte drops and bit errors.
- :class:`LockstepRig` — steps the core by the time stamps of the host's frames (no
  wall clock), deterministic; :class:`LockstepPort` exposes it as an in-process port.
- :func:`serve` — the realtime loop over a port; :func:`spawn_emulator` and
  :class:`EmulatorProcess` — the emulator as a process on a pty.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import tty
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from errors import ConfigError, FrameError, RigFault
from hil.config import HilConfig, parse
from hil.framing import (
    Arm,
    Engage,
    Frame,
    SetpointAxes,
    Telemetry,
    rejection_kind,
    wire_size,
)
from hil.link import TELEMETRY6_RAW, SerialPort, open_port
from hil.rig import RigCore
from hil.rigproto import RigParser, protocol_class
from protocol.realtime import set_priority

__all__ = ["READY", "Channel", "AxisFirmware", "firmware", "LockstepRig", "LockstepPort", "FdPort", "SocketPort",
           "serve", "spawn_emulator", "EmulatorProcess", "main"]

Array = NDArray[np.float64]

#: What the emulator writes first, once its rig core exists and it serves: an empty frame (a
#: lone delimiter), which every decoder skips as an idle line, so that the host can wait for it
#: to be up.
READY = b"\x00"


@dataclass
class Channel:
    """One direction of the transport: delay, byte drops and bit errors.

    Attributes
    ----------
    delay : float
        Transport delay [s].
    drop, bit_error : float
        Per-byte probabilities of being dropped / of one random bit flipped.
    rng : numpy.random.Generator
    """

    delay: float = 0.0
    drop: float = 0.0
    bit_error: float = 0.0
    rng: np.random.Generator = field(default_factory=lambda: np.random.default_rng(0))
    baud: float = 0.0
    bits: float = 10.0
    queue: deque = field(default_factory=deque)
    dropped: int = 0
    flipped: int = 0
    _line_free: float = 0.0

    def push(self, t: float, data: bytes) -> None:
        """Bytes entering the channel at ``t`` (corrupted here, released at ``t + delay``).

        With ``baud`` > 0 the line is emulated too (a pty has no baud rate): the bytes
        leave one after another at ``bits / baud`` s each, so a burst queues behind the
        previous one and is released when its last byte is through.
        """
        if self.baud > 0:
            self._line_free = max(t, self._line_free) + len(data) * self.bits / self.baud
            t = self._line_free
        if self.drop or self.bit_error:
            arr = np.frombuffer(data, dtype=np.uint8).copy()
            if self.bit_error:
                hit = self.rng.random(arr.size) < self.bit_error
                arr[hit] ^= (1 << self.rng.integers(0, 8, int(hit.sum()))).astype(np.uint8)
                self.flipped += int(hit.sum())
            if self.drop:
                keep = self.rng.random(arr.size) >= self.drop
                self.dropped += int((~keep).sum())
                arr = arr[keep]
            data = arr.tobytes()
        if data:
            self.queue.append((t + self.delay, data))

    def pop(self, t: float) -> bytes:
        """All bytes due at ``t``."""
        out = b""
        while self.queue and self.queue[0][0] <= t + 1e-12:
            out += self.queue.popleft()[1]
        return out

    def next_due(self) -> float | None:
        """Release time of the oldest queued bytes."""
        return self.queue[0][0] if self.queue else None


def _channels(cfg: HilConfig, baud: float = 0.0) -> tuple[Channel, Channel]:
    """(host → rig, rig → host) channels of the ``[hil.emulator]`` table; ``baud`` > 0 paces both."""
    em = cfg.params.emulator
    rng = np.random.default_rng(em.seed)
    return (Channel(em.delay, em.drop, em.bit_error, rng, baud=baud), Channel(em.delay, baud=baud))


class AxisFirmware:
    """A rig's firmware for a format without a state machine (``binary6``, ``ascii``): host bytes are
    decoded by the format's rig parser (:meth:`hil.rigproto.RigProtocol.rig_parser`) into axis setpoints,
    which the core applies as it would native SETPOINT_AXES.

    Such a rig has no handshake, no watchdog and no replies: it is armed and engaged from power-up
    and holds its last setpoint; any setpoint within the stroke is taken (the native step gate needs
    the watchdog: none here) and reached within the actuators' limits; one beyond the stroke faults
    the core (LIMIT), which ramps to neutral. Rejected chunks are counted in ``parser.bad``.

    Parameters
    ----------
    core : RigCore
    parser : RigParser
    """

    HOLD_MS = 10 ** 12
    """The watchdog given to the core [ms]: none that a run reaches (the rig holds its last value)."""

    def __init__(self, core: RigCore, parser: RigParser) -> None:
        self.core = core
        self.parser = parser
        self._seq = 0
        self._handle(Arm(core.fingerprint, self.HOLD_MS), 0.0)
        self._handle(Engage(), 0.0)

    def _handle(self, msg: Arm | Engage | SetpointAxes, t: float, wall_ns: int | None = None) -> None:
        self.core.handle(Frame(self._seq, int(round(t * 1e6)) & 0xFFFFFFFF, msg), t, reply=False, wall_ns=wall_ns)
        self._seq = (self._seq + 1) & 0xFFFF

    def apply(self, axes: Array, t: float, wall_ns: int | None = None) -> None:
        """One decoded setpoint (n,) received at rig time ``t``."""
        self._handle(SetpointAxes(tuple(axes.tolist())), t, wall_ns)
        self.core.outbox.clear()  # (the format has no replies)

    def receive_bytes(self, data: bytes, t: float, reply: bool = True, wall_ns: int | None = None) -> list[Array]:
        """Decode host bytes arrived at ``t`` and apply each complete setpoint; returns them."""
        out = self.parser.feed(data)
        for axes in out:
            self.apply(axes, t, wall_ns)
        return out


def firmware(cfg: HilConfig, core: RigCore) -> AxisFirmware | None:
    """The firmware for ``[hil] format`` around ``core``: None for a format the core speaks itself (native)."""
    parser = protocol_class(cfg.table["format"]).rig_parser(cfg)
    return None if parser is None else AxisFirmware(core, parser)


class LockstepRig:
    """The rig stepped by the host's time stamps, deterministically.

    Each host frame carries the simulation time (µs) it was sent at, ``t``. It is
    handled by the core at ``t + delay`` (the host → rig delay, in simulation time);
    the core is advanced to ``t``; the reply is exactly one telemetry frame, the rig's
    measurement at the latest host instant ``≤ t − delay`` (the rig → host delay), plus
    any HELLO that is due. So every host frame gets one reply, and the round trip the
    host measures is the configured one rounded up to its own steps. Chunks that do not
    decode (bit errors, drops) are answered at once with a NAK, so that the host resends
    without waiting. No wall clock is read; byte drops and bit errors come from a seeded
    generator.

    A format without time stamps (``[hil] format``, :class:`AxisFirmware`): each decoded setpoint is
    taken to arrive one rig step (``1 / [hil.emulator] rate``) after the previous one; nothing is sent back.
    """

    def __init__(self, cfg: HilConfig) -> None:
        self.core = RigCore(cfg)
        self.firmware = firmware(cfg, self.core)
        self.up, self.down = _channels(cfg)
        self.decoder = self.core.decoder  # one count of rejected chunks for the NAKs
        self.pending: deque[tuple[float, Frame]] = deque()
        self.history: deque[tuple[float, Telemetry]] = deque()
        self._epoch = 0
        self._last_us: int | None = None

    def _unwrap(self, time_us: int) -> float:
        if self._last_us is not None and time_us < self._last_us - 0x80000000:
            self._epoch += 1
        self._last_us = time_us
        return (self._epoch * 0x100000000 + time_us) * 1e-6

    def exchange(self, data: bytes) -> bytes:
        """Host bytes in; the rig's reply bytes out (one telemetry per valid host frame; one NAK
        for the chunks rejected before a valid frame, or at the end, before its telemetry)."""
        self.up.push(0.0, data)  # corruption only; the delay is applied per frame below
        raw = b"".join(chunk for _, chunk in self.up.queue)
        self.up.queue.clear()
        if self.firmware is not None:
            for axes in self.firmware.parser.feed(raw):
                t = self.core.t + self.core.dt
                self.core.advance(t)
                self.firmware.apply(axes, t)
            return b""
        bad_before = self.decoder.bad
        items = self.decoder.feed_all(raw)
        if self.decoder.bad > bad_before:
            self.core.count_bad(self.decoder.bad - bad_before, self.core.t)
        out = b""
        rejected, reason = bad_before, None
        for f in items:
            if not isinstance(f, Frame):
                rejected, reason = rejected + 1, rejection_kind(f)
                continue
            if reason is not None:
                out += self.core.encode(self.core.nak(rejected, reason), self.core.t)
                reason = None
            t_host = self._unwrap(f.time_us)
            self.pending.append((t_host + self.up.delay, f))
            self._advance(t_host)
            self.history.append((t_host, self.core.telemetry(t_host)))
            while self.core.outbox:  # HELLOs, NAKs of implausible setpoints
                ts, msg = self.core.outbox.popleft()
                self.down.queue.append((ts + self.down.delay, msg))
            while self.down.queue and self.down.queue[0][0] <= t_host + 1e-12:
                out += self.core.encode(self.down.queue.popleft()[1], t_host)
            while len(self.history) > 1 and self.history[1][0] <= t_host - self.down.delay + 1e-9:
                self.history.popleft()
            out += self.core.encode(self.history[0][1], t_host)
        if reason is not None:
            out += self.core.encode(self.core.nak(rejected, reason), self.core.t)
        return out

    def _advance(self, t: float) -> None:
        while self.pending and self.pending[0][0] <= t + 1e-12:
            due, frame = self.pending.popleft()
            self.core.advance(due)
            self.core.handle(frame, due, reply=isinstance(frame.msg, Arm))
        self.core.advance(t)


class LockstepPort:
    """An in-process port (read/write/close/timeout) in front of a :class:`LockstepRig`.

    Attributes
    ----------
    cpu_ns : int
        The calling thread's CPU time spent in the rig's :meth:`LockstepRig.exchange` so far
        (``time.thread_time_ns``) [ns]: the emulated firmware's work, which in a run is the rig's (the
        emulator's own process, or a real rig's hardware), not its host's. The realtime calibration
        (:func:`protocol.realtime.calibrate`) charges it to the rig emulator instead of the bridge.
    """

    def __init__(self, rig: LockstepRig) -> None:
        self.rig = rig
        self.timeout: float | None = 0.0
        self._rx = bytearray()
        self.cpu_ns = 0

    def write(self, data: bytes) -> int:
        c = time.thread_time_ns()
        reply = self.rig.exchange(bytes(data))
        self.cpu_ns += time.thread_time_ns() - c
        self._rx += reply
        return len(data)

    @property
    def in_waiting(self) -> int:
        return len(self._rx)

    def read(self, size: int = 1) -> bytes:
        out = bytes(self._rx[:size])
        del self._rx[:size]
        return out

    def close(self) -> None:
        pass


class FdPort:
    """A port on a file descriptor (the pty master), with a read timeout."""

    def __init__(self, fd: int, timeout: float = 0.001) -> None:
        self.fd = fd
        self.timeout: float | None = timeout

    def read(self, size: int = 1) -> bytes:
        r, _, _ = select.select([self.fd], [], [], self.timeout)
        if not r:
            return b""
        try:
            return os.read(self.fd, max(size, 4096))
        except OSError as err:  # EIO: no process has the slave open any more: the host is gone
            raise ConnectionError(f"pty master fd {self.fd}: {err}") from err

    def write(self, data: bytes) -> int:
        view = memoryview(data)
        while view:
            try:
                n = os.write(self.fd, view)
            except BlockingIOError:
                select.select([], [self.fd], [], 0.01)
                continue
            view = view[n:]
        return len(data)

    def close(self) -> None:
        try:
            os.close(self.fd)
        except OSError:
            pass


class SocketPort:
    """A port on a connected TCP socket."""

    def __init__(self, sock: socket.socket, timeout: float = 0.001) -> None:
        self.sock = sock
        self.timeout: float | None = timeout
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def read(self, size: int = 1) -> bytes:
        r, _, _ = select.select([self.sock], [], [], self.timeout)
        if not r:
            return b""
        data = self.sock.recv(max(size, 4096))
        if not data:
            raise ConnectionError("peer closed")
        return data

    def write(self, data: bytes) -> int:
        self.sock.sendall(data)
        return len(data)

    def close(self) -> None:
        self.sock.close()


def serve(port: SerialPort, cfg: HilConfig, *, lockstep: bool = False, stop: threading.Event | None = None,
          telemetry_hz: float = 50.0, max_seconds: float | None = None, baud: float = 0.0) -> RigCore:
    """Run the emulator on ``port`` until ``stop`` is set, the peer closes, or ``max_seconds``.

    It first builds the rig core, then writes :data:`READY` (a lone frame delimiter) to say
    it is up: the host's first frame is answered without the core's start-up on top.

    Realtime: the rig clock is ``time.monotonic()``; host bytes pass the host → rig
    channel (delay, drops, bit errors) before decoding; each valid host frame gets a
    reply, and telemetry goes out at ``telemetry_hz`` while the host is silent (so a
    host sees the watchdog fault). When the host goes away (the pty's other end closed,
    the socket shut), the rig carries on — its watchdog trips and it ramps to neutral —
    and the loop ends once it is at rest. ``baud`` > 0 emulates the line's byte rate in both
    directions (:class:`Channel`). Lockstep: see :class:`LockstepRig`. A format without replies
    (``[hil] format``, :class:`AxisFirmware`) gets nothing back but :data:`READY`.

    Returns the core (its counters and applied setpoints) when done.
    """
    stop = stop or threading.Event()
    t0 = time.monotonic()
    replies = protocol_class(cfg.table["format"]).capabilities.has_replies
    if lockstep:
        rig = LockstepRig(cfg)
        port.write(READY)  # once the core exists: building it imports and sets up (0.2 s and more)
        port.timeout = 0.05  # purely data-driven: no need to wake up often
        while not stop.is_set() and (max_seconds is None or time.monotonic() - t0 < max_seconds):
            try:
                data = port.read(4096)
            except (OSError, ConnectionError):
                break
            if data:
                reply = rig.exchange(data)
                if reply:
                    port.write(reply)
        return rig.core
    core = RigCore(cfg)
    fw = firmware(cfg, core)
    rx = core if fw is None else fw  # who decodes the host's bytes
    up, down = _channels(cfg, baud)
    port.write(READY)
    last_tx = 0.0
    # replies at most at 500 Hz and within half the line (a real rig answers at its own rate)
    reply_hz = 500.0 if baud <= 0 else min(500.0, 0.5 * baud / (down.bits * wire_size(TELEMETRY6_RAW)))
    last_reply = -1.0
    gone_at: float | None = None  # when the host went away: the rig parks on its own, then we stop
    stalls = core.stalls  # the loop's own pauses (this host's scheduling, not the link): see LoopStalls
    while not stop.is_set():
        now = time.monotonic() - t0
        stalls.record(now)
        if max_seconds is not None and now > max_seconds:
            break
        if gone_at is not None and (core.at_rest or now - gone_at > 10.0):
            break
        due = [d for d in (up.next_due(), down.next_due()) if d is not None]
        port.timeout = max(0.0, min([core.dt] + [d - now for d in due]))
        data = b""
        if gone_at is None:
            try:
                data = port.read(4096)
            except (OSError, ConnectionError):
                gone_at = now
        else:
            time.sleep(core.dt)
        now = time.monotonic() - t0
        if data:
            up.push(now, data)
        core.advance(now)
        rx.receive_bytes(up.pop(now), now, wall_ns=time.monotonic_ns())
        if replies and not core.outbox and now - last_tx > 1.0 / telemetry_hz:
            core.send(core.telemetry(now), now)
        while core.outbox:
            ts, msg = core.outbox.popleft()
            if isinstance(msg, Telemetry):
                if now - last_reply < 1.0 / reply_hz:
                    continue
                last_reply = now
            down.push(ts, core.encode(msg, ts))
            last_tx = now
        out = down.pop(now)
        if out and gone_at is None:
            try:
                port.write(out)
            except OSError:
                gone_at = now
    if stalls.longest >= 0.5 * core.watchdog_s:
        print(f"hil.emulator: {stalls.describe()}; a host watchdog of {core.watchdog_s:g} s sees such a pause as a "
              "silent rig", file=sys.stderr, flush=True)
    return core


@dataclass
class EmulatorProcess:
    """A running emulator subprocess and the host-side path of its pty."""

    host_path: str
    proc: subprocess.Popen
    stats_path: Path | None
    _slave_fd: int

    def stats(self) -> dict:
        """The JSON statistics the emulator wrote at exit (after :meth:`close`)."""
        if self.stats_path is None or not self.stats_path.exists():
            return {}
        return json.loads(self.stats_path.read_text())

    def close(self, timeout: float = 5.0) -> int:
        """Stop the process (SIGTERM, then SIGKILL after ``timeout``), release the pty."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout)
        if self._slave_fd >= 0:
            try:
                os.close(self._slave_fd)
            except OSError:
                pass
            self._slave_fd = -1
        return int(self.proc.returncode)

    def __enter__(self) -> EmulatorProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def spawn_emulator(table: dict | None = None, *, lockstep: bool = False, stats_path: str | Path | None = None,
                   extra_args: list[str] | None = None) -> EmulatorProcess:
    """Make a pty pair (``os.openpty``), start ``python -m hil.emulator`` on its master end.

    Parameters
    ----------
    table : dict, optional
        The ``[hil]`` table (passed to the child as JSON); defaults otherwise.
    lockstep : bool
        Step by the host frames' time stamps instead of the wall clock.
    stats_path : path, optional
        Where the child writes its statistics (JSON) at exit.

    Returns
    -------
    EmulatorProcess
        ``host_path`` is the pty slave to open with pyserial.

    Raises
    ------
    ConfigError
        If ``table`` is invalid (checked here, before anything starts).
    """
    cfg = parse(table)
    master, slave = os.openpty()  # the slave stays open here until close(): EIO on the master means gone
    tty.setraw(slave)
    os.set_blocking(master, False)
    args = [sys.executable, "-m", "hil.emulator", "--port", f"fd:{master}", "--config-json", json.dumps(table or {})]
    if lockstep:
        args.append("--lockstep")
    if stats_path is not None:
        args += ["--stats", str(stats_path)]
    if cfg.params.emulator.rt_priority:
        args += ["--rt-priority", str(cfg.params.emulator.rt_priority)]
    args += extra_args or []
    root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
    try:
        proc = subprocess.Popen(args, pass_fds=(master,), env=env, cwd=root)
    finally:
        os.close(master)
    return EmulatorProcess(os.ttyname(slave), proc, Path(stats_path) if stats_path else None, slave)


def _stats(core: RigCore) -> dict:
    return {
        "counts": core.counts,
        "decoder": dict(core.decoder.counts),
        "seq": {"gaps": core.rx_seq.gaps, "lost": core.rx_seq.lost, "stale": core.rx_seq.stale},
        "state": core.state.name,
        "faults": int(core.faults),
        "fault_log": core.fault_log,
        "watchdog_s": core.watchdog_s,
        "dt": core.dt,
        "axes": core.x.tolist(),
        "neutral": core.neutral_axes.tolist(),
        "applied": [[s, list(v)] for s, v in core.applied],
        "arrivals": [[s, t] for s, t in core.arrivals],
        "stalls": core.stalls.as_map(),
    }


def main(argv: list[str] | None = None) -> int:
    """Command line: see the module docstring."""
    ap = argparse.ArgumentParser(prog="python -m hil.emulator", description="berthsim rig emulator")
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--port", help="pyserial URL or path, or fd:N (an inherited pty master)")
    where.add_argument("--pty", action="store_true", help="make a pty and print 'PTY <path>'")
    where.add_argument("--listen", help="HOST:PORT, serve one TCP connection")
    ap.add_argument("--config", help="TOML file with a [hil] table")
    ap.add_argument("--config-json", help="the [hil] table as JSON")
    ap.add_argument("--delay-ms", type=float, help="one-way transport delay, each direction [ms]")
    ap.add_argument("--drop", type=float, help="byte drop probability (host → rig)")
    ap.add_argument("--bit-error", type=float, help="byte bit-error probability (host → rig)")
    ap.add_argument("--seed", type=int)
    ap.add_argument("--lockstep", action="store_true", help="step by the host frames' time stamps")
    ap.add_argument("--baud", type=int, help="line rate (default [hil] baud); emulated on a pty or socket")
    ap.add_argument("--no-line", action="store_true", help="do not emulate the line rate")
    ap.add_argument("--stats", help="write statistics (JSON) here at exit")
    ap.add_argument("--max-seconds", type=float)
    ap.add_argument("--rt-priority", type=int, default=0,
                    help="run under SCHED_FIFO at this priority (a rig's firmware is real-time); 0: normal")
    a = ap.parse_args(argv)
    if a.rt_priority:
        set_priority(a.rt_priority)
    table: dict = {}
    if a.config:
        from protocol.config import load  # (here: the pty emulator's start-up need not import the bus)
        try:
            table = load(a.config).get("hil", {})
        except ConfigError as err:
            print(f"hil.emulator: {err}", file=sys.stderr)
            return 2
    if a.config_json:
        table = json.loads(a.config_json)
    em = dict(table.get("emulator", {}))
    for key, val in (("delay", None if a.delay_ms is None else a.delay_ms * 1e-3), ("drop", a.drop),
                     ("bit_error", a.bit_error), ("seed", a.seed)):
        if val is not None:
            em[key] = val
    table = {**table, "emulator": em}
    try:
        cfg = parse(table)
    except ConfigError as err:
        print(f"hil.emulator: {err}", file=sys.stderr)
        return 2
    baud = int(a.baud or cfg.table["baud"])
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    cleanup = []
    if a.pty:
        master, slave = os.openpty()
        tty.setraw(slave)
        print(f"PTY {os.ttyname(slave)}", flush=True)
        port: SerialPort = FdPort(master)
        cleanup.append(lambda: os.close(slave))
    elif a.listen:
        host, _, p = a.listen.rpartition(":")
        srv = socket.create_server((host, int(p)))
        srv.settimeout(30.0)
        conn, _ = srv.accept()
        srv.close()
        port = SocketPort(conn)
    elif a.port.startswith("fd:"):
        port = FdPort(int(a.port[3:]))
    else:
        try:
            port = open_port(a.port, baud)
        except (ConfigError, RigFault) as err:
            print(f"hil.emulator: {err}", file=sys.stderr)
            return 2
    gc.collect()  # what exists now (numpy, scipy, the config) is never scanned again: a full collection
    gc.freeze()   # of it took 10–100 ms, a stall of the rig's loop (its watchdog is 20 ms at 250 Hz)
    try:
        line = 0.0 if (a.no_line or not (a.pty or a.listen or a.port.startswith("fd:"))) else float(baud)
        core = serve(port, cfg, lockstep=a.lockstep, stop=stop, max_seconds=a.max_seconds, baud=line)
    except FrameError as err:
        print(f"hil.emulator: {err}", file=sys.stderr)
        return 1
    finally:
        port.close()
        for c in cleanup:
            c()
    if a.stats:
        Path(a.stats).write_text(json.dumps(_stats(core)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
