"""The serial link to a rig: any pyserial URL, native frames, link statistics.

:class:`SerialLink` wraps anything with ``read``, ``write``, ``close`` and ``timeout``
(:class:`SerialPort`); tests pass ``serial.serial_for_url("loop://")`` or a pty, the
bridge gets one from :func:`open_port`. Nothing here subclasses ``serial.Serial``.
"""

from __future__ import annotations

import math
import os
import select
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import serial
import serial.serialposix

from errors import ConfigError, RigFault
from hil.delay import DelayEstimator
from hil.framing import (
    CRC_SIZE,
    HEADER_SIZE,
    NO_ECHO,
    Frame,
    FrameDecoder,
    Message,
    Nak,
    SeqTracker,
    Telemetry,
    encode_frame,
    wire_size,
)
from protocol.realtime import set_priority

__all__ = ["SerialPort", "SerialLink", "LinkStats", "open_port", "check_line_budget", "URL_SCHEMES", "bits_per_byte"]

#: pyserial URL schemes accepted (a URL without ``://`` is a device or pty path).
URL_SCHEMES = ("loop", "socket", "rfc2217", "spy", "alt", "hwgrep")


@runtime_checkable
class SerialPort(Protocol):
    """What :class:`SerialLink` needs of a port (``serial.Serial`` and its URL handlers fit)."""

    timeout: float | None

    def read(self, size: int = 1) -> bytes:
        """Up to ``size`` bytes; fewer after ``timeout`` s."""
        ...

    def write(self, data: bytes) -> int | None:
        """Write all of ``data``."""
        ...

    def close(self) -> None:
        """Release the port."""
        ...


def bits_per_byte(bytesize: int = 8, parity: str = "N", stopbits: float = 1) -> float:
    """Bit times per byte on an asynchronous line: start + data + parity + stop."""
    return 1 + bytesize + (0 if parity.upper() == "N" else 1) + stopbits


def check_line_budget(
    rate_hz: float, raw_frame_bytes: int, baud: int, *, bits: float = 10.0, max_fraction: float = 0.7,
    field: str = "hil",
) -> float:
    """Fraction of the line a stream of frames uses; refuse more than ``max_fraction``.

    Parameters
    ----------
    rate_hz : float
        Frames per second.
    raw_frame_bytes : int
        Frame size before COBS [bytes]; COBS overhead and the delimiter are added.
    baud : int
        Line rate [bit/s].
    bits : float
        Bit times per byte (10 for 8N1), see :func:`bits_per_byte`.

    Returns
    -------
    float
        The used fraction of the line.

    Raises
    ------
    ConfigError
        Naming the rate, the frame size and the baud, if the fraction exceeds the limit
        or an argument is not positive.
    """
    if not (rate_hz > 0 and raw_frame_bytes > 0 and baud > 0):
        raise ConfigError(f"{field}: rate {rate_hz} Hz, frame {raw_frame_bytes} B and baud {baud} must be > 0")
    wire = wire_size(raw_frame_bytes)
    frac = rate_hz * wire * bits / baud
    if frac > max_fraction:
        raise ConfigError(
            f"{field}: rate {rate_hz:g} Hz × frame {wire} B on the wire ({raw_frame_bytes} B + COBS) × {bits:g} bits"
            f" = {rate_hz * wire * bits:.0f} bit/s exceeds {max_fraction:.0%} of baud {baud}"
        )
    return frac


def open_port(url: str, baud: int, timeout: float = 0.005, **kwargs: Any) -> SerialPort:
    """Open a pyserial URL (``/dev/tty…``, a pty path, ``loop://``, ``socket://host:port``…).

    Raises
    ------
    ConfigError
        If the URL scheme is unknown or the baud is not a positive integer.
    RigFault
        If the port cannot be opened.
    """
    if "://" in url and url.split("://", 1)[0] not in URL_SCHEMES:
        scheme = url.split("://", 1)[0]
        raise ConfigError(f"hil.url: unknown scheme {scheme!r} in {url!r}; expected one of {URL_SCHEMES}")
    if not isinstance(baud, int) or baud <= 0:
        raise ConfigError(f"hil.baud: must be a positive integer, got {baud!r}")
    try:
        port = serial.serial_for_url(url, baudrate=baud, timeout=timeout, **kwargs)
    except (serial.SerialException, OSError, ValueError) as err:
        raise RigFault(f"hil.url: cannot open {url!r}: {err}") from err
    sock = getattr(port, "_socket", None)  # socket://: small frames must not wait for Nagle's algorithm
    if isinstance(sock, socket.socket) and sock.family in (socket.AF_INET, socket.AF_INET6):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return port


@dataclass
class LinkStats:
    """Counters and windows of one link; ``as_map()`` is what ``hil/status`` carries."""

    tx_frames: int = 0
    tx_bytes: int = 0
    rx_frames: int = 0
    rx_bytes: int = 0
    rx_times: deque = field(default_factory=lambda: deque(maxlen=1000))
    rig_rejected: int = 0  # chunks the rig says it rejected (the latest NAK's count)
    naks: int = 0  # NAK frames received

    def as_map(self, decoder: FrameDecoder, seq: SeqTracker, delay: DelayEstimator) -> dict[str, float | int]:
        """Flat map: frames/s, counts (ours and, from its NAKs, the rig's rejections), seq gaps,
        delay p50/p99 [s]."""
        t = self.rx_times
        fps = (len(t) - 1) / (t[-1] - t[0]) if len(t) > 1 and t[-1] > t[0] else 0.0
        out: dict[str, float | int] = {
            "tx_frames": self.tx_frames,
            "rx_frames": self.rx_frames,
            "rx_fps": float(fps),
            "bad_frames": decoder.bad,
            "crc_errors": decoder.counts.get("crc", 0),
            "seq_gaps": seq.gaps,
            "seq_lost": seq.lost,
            "seq_stale": seq.stale,
            "rig_rejected": self.rig_rejected,
            "naks": self.naks,
        }
        p50, p99 = delay.percentile_s(50), delay.percentile_s(99)
        out["rtt_p50_s"] = p50 if math.isfinite(p50) else -1.0
        out["rtt_p99_s"] = p99 if math.isfinite(p99) else -1.0
        return out


class SerialLink:
    """Native-protocol endpoint on an injected port.

    Parameters
    ----------
    port : SerialPort
        An open port (``serial.serial_for_url(...)`` or any object with the same four members).
    clock : callable, optional
        Seconds, monotonic; host time stamps are ``clock()`` in µs modulo 2**32. Lockstep
        runs pass the simulation time instead.

    Notes
    -----
    ``send`` stamps each frame with the next seq and the host time; ``receive`` returns
    valid frames and, for telemetry, records the round-trip delay
    ``now − echo_time − hold`` into the statistics.
    """

    def __init__(self, port: SerialPort, clock: Callable[[], float] = time.monotonic) -> None:
        for member in ("read", "write", "close"):
            if not callable(getattr(port, member, None)):
                raise ConfigError(f"hil.port: {type(port).__name__} has no {member}()")
        self.port = port
        self.clock = clock
        # a port whose in_waiting counts the bytes (a tty, loop://, not socket://): setting the
        # timeout of a tty reconfigures it (tcsetattr), so read the count instead
        self._counts_waiting = hasattr(port, "in_waiting") and not hasattr(port, "_socket")
        # a device or pty: read and write its descriptor directly
        self._fd: int | None = port.fileno() if isinstance(port, serial.serialposix.Serial) else None
        self._nonblocking = self._fd is not None and not os.get_blocking(self._fd)
        self._reads = 0  # reads of the descriptor (_read_fd)
        self._first_hits = 8  # how well reading before the select has done lately (0..8; 0: seldom finds bytes)
        self.decoder = FrameDecoder()
        self.rx_seq = SeqTracker()
        self.stats = LinkStats()
        self.delay = DelayEstimator()
        self._seq = 0
        self._closed = False
        self._reader: threading.Thread | None = None
        self._reader_error: RigFault | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._inbox: deque[Frame] = deque()

    @property
    def seq(self) -> int:
        """The seq the next frame sent will carry (u16)."""
        return self._seq

    def now_us(self) -> int:
        """Host time [µs] modulo 2**32."""
        return int(round(self.clock() * 1e6)) & 0xFFFFFFFF

    def send(self, msg: Message, time_us: int | None = None, *, guard: bool = False) -> bytes:
        """Encode, stamp and write one message; returns the bytes written.

        With ``guard`` a second delimiter follows the frame (an empty chunk, which every
        decoder skips): should the frame's own delimiter be lost or corrupted, the frame
        still ends there, is rejected (and NAKed by a rig) instead of merging with the
        next frame.

        Raises
        ------
        FrameError
            If the message does not encode (non-finite value, out-of-range field).
        RigFault
            If the port fails.
        """
        frame = encode_frame(msg, self._seq, self.now_us() if time_us is None else time_us)
        if guard:
            frame += b"\x00"
        fd = self._fd
        try:
            if fd is None:
                self.port.write(frame)
            else:
                try:
                    n = os.write(fd, frame)  # (all of it, as a rule)
                except BlockingIOError:
                    n = 0
                if n < len(frame):  # the line's buffer is full: the rest as it drains
                    self._write_fd(fd, frame[n:])
        except (serial.SerialException, OSError) as err:
            raise RigFault(f"hil link: write failed: {err}") from err
        self._seq = (self._seq + 1) & 0xFFFF
        stats = self.stats
        stats.tx_frames += 1
        stats.tx_bytes += len(frame)
        return frame

    def write_raw(self, data: bytes) -> bytes:
        """Write ``data`` as it is (a frame of another format than the native one, :mod:`hil.rigproto`),
        counted as one frame sent; returns it.

        Raises
        ------
        RigFault
            If the port fails.
        """
        try:
            if self._fd is None:
                self.port.write(data)
            else:
                self._write_fd(self._fd, data)
        except (serial.SerialException, OSError) as err:
            raise RigFault(f"hil link: write failed: {err}") from err
        self.stats.tx_frames += 1
        self.stats.tx_bytes += len(data)
        return data

    @staticmethod
    def _write_fd(fd: int, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(fd, view):]
            except BlockingIOError:  # the line's buffer is full: wait until it drains
                select.select([], [fd], [], 0.1)

    def start_reader(self, timeout: float = 0.05, priority: int = 0) -> None:
        """Read in a background thread from now on, so that frames are time-stamped on arrival.

        Realtime use: the round-trip delay is then measured to the frame's arrival rather
        than to the next :meth:`receive` call. :meth:`receive` returns what the thread has
        decoded; :meth:`close` stops it. ``timeout`` is the port read timeout it sets [s]:
        a frame wakes the thread when it arrives, the timeout only bounds how long :meth:`close`
        waits for it (a short one would wake it for nothing, holding the GIL each time).
        ``priority`` > 0: the thread runs under SCHED_FIFO at it (the link's I/O, like a
        driver's interrupt thread, above the loop that steps; :func:`protocol.realtime.set_priority`,
        a warning where the OS refuses); 0: the creating thread's scheduling.
        """
        if self._reader is not None:
            return
        self.port.timeout = timeout
        self._stop = threading.Event()
        self._reader = threading.Thread(target=self._read_loop, args=(priority,), name="hil-link-reader", daemon=True)
        self._reader.start()

    def _read_loop(self, priority: int = 0) -> None:
        if priority > 0:
            set_priority(priority)
        while not self._stop.is_set():
            try:
                frames = self._read_once(4096)
            except RigFault as err:
                self._reader_error = err
                return
            with self._lock:
                self._inbox.extend(frames)

    def receive(self, max_bytes: int = 4096, timeout: float | None = None) -> list[Frame]:
        """Frames that have arrived (waits up to ``timeout``, default the port's, for the first byte).

        ``timeout`` is honoured on a device or pty (a port read by file descriptor); other
        ports wait their own ``timeout``.

        Returns
        -------
        list of Frame
            Valid frames, oldest first. Stale or duplicate frames (reordered) are dropped
            here; gaps are counted in ``rx_seq``.

        Raises
        ------
        RigFault
            If the port fails (also a failure seen by the reader thread).
        """
        if self._reader is not None:
            if self._reader_error is not None:
                raise self._reader_error
            with self._lock:
                out = list(self._inbox)
                self._inbox.clear()
            return out
        return self._read_once(max_bytes, timeout)

    def _read_fd(self, fd: int, max_bytes: int, timeout: float | None) -> bytes:
        """select + read on the port's descriptor (what pyserial's read does, minus its
        per-call bookkeeping, which dominated the bridge's step). A non-blocking descriptor (pyserial
        opens its ports so) is read first while that finds bytes there as a rule (a pipelined step's
        reply, while the other services stepped): they then cost no select. Nothing read (no byte yet,
        or the other end gone: a tty in raw mode tells them apart only through select) goes the
        select's way; where the first read finds nothing as a rule (steps back to back), it is tried
        on every eighth call only."""
        self._reads += 1
        if self._nonblocking and (self._first_hits > 0 or not self._reads & 7):
            try:
                data = os.read(fd, max_bytes)
            except BlockingIOError:
                data = b""
            if data:
                self._first_hits = min(self._first_hits + 1, 8)
                return data
            self._first_hits = max(self._first_hits - 2, 0)
        if not select.select([fd], [], [], self.port.timeout if timeout is None else timeout)[0]:
            return b""
        try:
            data = os.read(fd, max_bytes)
        except BlockingIOError:
            return b""
        if not data:  # readable but empty: the other end is gone (as pyserial reports it)
            raise serial.SerialException("device reports readiness to read but returned no data")
        return data

    def _read_port(self, max_bytes: int) -> bytes:
        data = self.port.read(1)  # waits up to the port's timeout
        if data and self._counts_waiting:  # then whatever else is there, without waiting
            n = self.port.in_waiting  # type: ignore[attr-defined]
            if n:
                data += self.port.read(min(n, max_bytes))
        elif data:  # in_waiting is 0/1 on socket://: read with no timeout instead
            timeout = self.port.timeout
            self.port.timeout = 0
            try:
                data += self.port.read(max_bytes)
            finally:
                self.port.timeout = timeout
        return data

    def _read_once(self, max_bytes: int, timeout: float | None = None) -> list[Frame]:
        try:
            if self._fd is not None:
                data = self._read_fd(self._fd, max_bytes, timeout)
            else:
                data = self._read_port(max_bytes)
        except (serial.SerialException, OSError) as err:
            raise RigFault(f"hil link: read failed: {err}") from err
        if not data:
            return []
        stats = self.stats
        stats.rx_bytes += len(data)
        out = []
        now_us = self.now_us()
        check, clock = self.rx_seq.check, self.clock
        for f in self.decoder.feed(data):
            if check(f.seq) in ("stale", "dup"):
                continue
            out.append(f)
            stats.rx_frames += 1
            stats.rx_times.append(clock())
            msg = f.msg
            if isinstance(msg, Telemetry):
                if msg.hold_us != NO_ECHO:
                    self.delay.update(now_us, msg.echo_time_us, msg.hold_us)
            elif isinstance(msg, Nak):
                stats.naks += 1
                stats.rig_rejected = msg.rejected
        return out

    def readable(self) -> bool:
        """Whether something waits to be read now (bytes, or the far end's hang-up), found without reading or
        waiting: the descriptor's select with no timeout, the port's ``in_waiting`` count, or the reader
        thread's inbox. True where the port tells neither (``socket://``, whose count is 0 or 1): a read finds
        out. Reads no clock and changes no statistics."""
        if self._reader is not None:
            return bool(self._inbox) or self._reader_error is not None
        try:
            if self._fd is not None:
                return bool(select.select([self._fd], [], [], 0)[0])
            if self._counts_waiting:
                return self.port.in_waiting > 0  # type: ignore[attr-defined]
        except (OSError, ValueError, serial.SerialException):
            pass  # a closed or failed port: a read reports it
        return True

    def status(self) -> dict[str, float | int]:
        """Link statistics as a flat map (see :meth:`LinkStats.as_map`)."""
        return self.stats.as_map(self.decoder, self.rx_seq, self.delay)

    def close(self) -> None:
        """Close the port; safe to call twice."""
        if not self._closed:
            self._closed = True
            if self._reader is not None:
                self._stop.set()
                self._reader.join(1.0)
            self.port.close()

    def __enter__(self) -> SerialLink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


#: Raw size of a native setpoint frame (pose) and of a 6-axis telemetry frame [bytes].
SETPOINT_POSE_RAW = HEADER_SIZE + 28 + CRC_SIZE
TELEMETRY6_RAW = HEADER_SIZE + 38 + 4 * 6 + CRC_SIZE
