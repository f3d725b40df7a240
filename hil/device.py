"""The rig as a device: the link, the rig protocol's backend on it, and the wall-clock waits for replies.

:class:`RigDevice` is the bridge's (:mod:`hil.bridge`) only way to the rig. It owns the
:class:`hil.link.SerialLink` and the backend of ``[hil] format`` (:mod:`hil.rigproto`) opened on
it, stamps the frames it sends (lockstep: the simulation time the bridge gives; realtime: the
link's wall clock), and, in lockstep, waits — bounded, on its own clock — for the reply to the
frame it sent last, resending it on a NAK or after ``[hil] resend_after``. Every wall-clock read
of the HIL service is here (and in the link and the emulator's plumbing): the bridge's model
reads none, it hands the device the simulation time and gets the rig's frames back
(:meth:`RigDevice.receive`), in the order they came.

:meth:`RigDevice.open` opens one on a pyserial URL (:func:`hil.link.open_port`); tests make one
on ``loop://``, a pty or a :class:`hil.emulator.LockstepPort` wrapped in a
:class:`hil.link.SerialLink`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import serial
from numpy.typing import NDArray

from errors import ConfigError, FrameError, RigFault
from hil.config import HilConfig
from hil.framing import Frame, Nak, Telemetry
from hil.link import SerialLink, SerialPort, open_port
from hil.rigproto import Capabilities, RigProtocol, Sent, open_protocol

__all__ = ["Batch", "RigDevice", "wait_ready"]

Array = NDArray[np.float64]


class Batch(NamedTuple):
    """What one read of the link brought, or a resend that failed.

    Attributes
    ----------
    frames : list of Frame
        The rig's valid frames of one read, oldest first (:meth:`hil.rigproto.RigProtocol.poll`).
    bad : int
        Chunks from the rig the host rejected since the previous batch (bad CRC, framing, length).
    error : FrameError or RigFault or None
        A resend of the awaited frame that failed (then ``frames`` is empty and ``bad`` 0); None otherwise.
    """

    frames: list[Frame]
    bad: int
    error: FrameError | RigFault | None = None


class RigDevice:
    """The rig's link and protocol backend, with the lockstep exchange (see the module docstring).

    Parameters
    ----------
    link : SerialLink
        The open link. In lockstep its clock (frame time stamps, arrival times, the round trip it
        measures) is set to the simulation time given to the last call here.
    cfg : HilConfig
        ``[hil]``: ``format`` (the backend), ``resend_after`` [s], ``reply_timeout`` [s] and
        ``bad_frames_max`` (the most resends of one frame).
    realtime : bool
        Realtime: frames are stamped with the link's (wall) clock and :meth:`receive` is called
        without waiting. Lockstep (False): frames are stamped with the simulation time [µs] and a
        frame's reply is awaited.
    clock : callable, optional
        Seconds, monotonic: the clock of the waits' deadlines (default :func:`time.monotonic`;
        tests pass a fake one).

    Raises
    ------
    ConfigError
        If ``[hil] format`` names no registered backend.

    Attributes
    ----------
    resent : int
        Frames sent again (a NAK, or no reply within ``resend_after``).
    reply_timeouts : int
        Waits of ``resend_after`` (or what was left of ``reply_timeout``) that ended without a reply.
    replies_missed : int
        Waits that ended without their reply (``bad_frames_max`` resends or ``reply_timeout`` spent).
    """

    def __init__(self, link: SerialLink, cfg: HilConfig, *, realtime: bool = False,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if not isinstance(link, SerialLink):
            raise ConfigError(f"hil.url: a rig device needs a SerialLink, got {type(link).__name__}")
        p = cfg.params
        self.link = link
        self.protocol: RigProtocol = open_protocol(p.format, link, cfg)
        self.caps: Capabilities = self.protocol.capabilities
        self.realtime = realtime
        self.clock = clock
        self.resend_after = float(p.resend_after)
        self.reply_timeout = float(p.reply_timeout)
        self.resends_max = int(p.bad_frames_max)
        self._t = 0.0  # the simulation time of the last call [s]: the link's clock in lockstep
        if not realtime:
            link.clock = lambda: self._t
        self._awaiting: Sent = None  # (seq, time_us) of the frame whose reply is due
        self._starting: tuple[Any, Any, float] | None = None  # an emulator's (port, process, timeout) not waited for
        self._bad_seen = 0
        self.resent = 0
        self.reply_timeouts = 0
        self.replies_missed = 0

    @classmethod
    def open(cls, url: str, cfg: HilConfig, *, realtime: bool = False, reader_priority: int = 0,
             emulator: Any = None, clock: Callable[[], float] = time.monotonic) -> RigDevice:
        """A device on the pyserial URL ``url`` at ``[hil] baud``.

        ``emulator``: the emulator process serving the URL's pty (:func:`hil.emulator.spawn_emulator`), waited for
        until it serves (:func:`wait_ready`, ``[hil] start_timeout``): in realtime here, in lockstep by
        :meth:`wait_started` (the bridge's ``initial``, else the first frame), so that its start-up overlaps the
        rest of the run's. Realtime: the link reads in a background
        thread (:meth:`hil.link.SerialLink.start_reader`, at ``reader_priority``), so that frames are time-stamped
        on arrival.

        Raises
        ------
        ConfigError
            If the URL's scheme or the format is unknown, or the baud not a positive integer.
        RigFault
            If the port cannot be opened or the emulator does not serve within ``start_timeout``.
        """
        port = open_port(url, cfg.params.baud, timeout=0.0005)
        if emulator is not None and realtime:
            wait_ready(port, emulator, cfg.params.start_timeout, clock)
        link = SerialLink(port)
        if realtime:
            link.start_reader(priority=reader_priority)
        device = cls(link, cfg, realtime=realtime, clock=clock)
        if emulator is not None and not realtime:
            device._starting = (port, emulator, float(cfg.params.start_timeout))
        return device

    def wait_started(self) -> None:
        """Wait until the emulator the device was opened on serves (:func:`wait_ready`), if it has not been waited
        for yet; nothing for a rig. Every frame sent or read waits for it first.

        Raises
        ------
        RigFault
            If it does not serve within ``[hil] start_timeout`` or its process ends.
        """
        if self._starting is not None:
            port, emulator, timeout = self._starting
            self._starting = None
            wait_ready(port, emulator, timeout, self.clock)

    # ------------------------------------------------------------------ sending
    def _stamp(self, t_s: float) -> int | None:
        """A frame's time stamp [µs] at simulation time ``t_s`` [s] (None in realtime: the link's clock)."""
        self.wait_started()
        self._t = t_s
        return None if self.realtime else int(round(t_s * 1e6))

    def _sent(self, sent: Sent) -> None:
        if sent is not None:
            self._awaiting = sent

    def reply_due(self) -> bool:
        """Whether a frame's reply is awaited and nothing from the rig is there to read yet
        (:meth:`hil.link.SerialLink.readable`): :meth:`receive` with ``wait`` would wait now. Reads nothing
        and no clock."""
        return self._awaiting is not None and not self.link.readable()

    def handshake(self, t_s: float, fingerprint: int, watchdog_ms: int) -> None:
        """ARM (the configuration's ``fingerprint`` u32, the host's watchdog [ms]) at ``t_s`` [s]; its reply awaited.

        Raises
        ------
        FrameError
            If a field is out of range.
        RigFault
            If the port fails.
        """
        self._sent(self.protocol.handshake(fingerprint, watchdog_ms, self._stamp(t_s)))

    def engage(self, t_s: float) -> None:
        """ENGAGE at ``t_s`` [s]; its reply awaited. Raises as :meth:`handshake`."""
        self._sent(self.protocol.engage(self._stamp(t_s)))

    def setpoint(self, t_s: float, axes: Array, X_RP: Array) -> None:
        """One setpoint at ``t_s`` [s]: ``axes`` (n,) [m or axis unit], ``X_RP`` (4, 4) the same pose as the
        platform's in the rig frame (:meth:`hil.rigproto.RigProtocol.setpoint`); its reply awaited.

        Raises
        ------
        FrameError
            If the values do not encode (not finite, wrong count).
        RigFault
            If the port fails.
        """
        self._sent(self.protocol.setpoint(axes, X_RP, self._stamp(t_s)))

    def hold(self, t_s: float, awaited: bool = True) -> None:
        """A heartbeat at ``t_s`` [s] (nothing for a format without one); its reply awaited if ``awaited``.
        Raises as :meth:`handshake`."""
        self._sent(self.protocol.hold(self._stamp(t_s), awaited=awaited))

    def park(self, t_s: float, awaited: bool = True) -> None:
        """PARK at ``t_s`` [s] (the neutral setpoint for a format without it); its reply awaited if
        ``awaited``. Raises as :meth:`handshake`."""
        self._sent(self.protocol.park(self._stamp(t_s), awaited=awaited))

    # ------------------------------------------------------------------ receiving
    def receive(self, t_s: float, wait: bool) -> list[Batch]:
        """The rig's frames that have arrived, at simulation time ``t_s`` [s]; with ``wait``, until the reply to
        the awaited frame (the last one sent with its reply awaited).

        Its reply is the telemetry that answers it (:meth:`hil.rigproto.RigProtocol.answers`: it echoes the
        frame's seq or carries its time stamp). Waiting, the frame is sent again at once when the rig rejects
        what it got (a NAK), or when ``resend_after`` passes without a reply (counted in
        :attr:`reply_timeouts`); at most ``bad_frames_max`` times (:attr:`resent`), and for ``reply_timeout``
        in all, on :attr:`clock`. A wait that ends without the reply is counted in :attr:`replies_missed`, and
        the frame is no longer awaited. Without ``wait`` (or nothing awaited) one read, and no clock is read.

        Returns
        -------
        list of Batch
            Each read's frames and the count of chunks rejected since the previous batch (reads that brought
            neither are left out), with the resends that failed in between, in the order they happened.
            [] for a format without replies.

        Raises
        ------
        RigFault
            If the port fails while reading.
        """
        if not self.caps.has_replies:
            return []
        self.wait_started()
        self._t = t_s
        proto = self.protocol
        out: list[Batch] = []
        now = self.clock() if wait else 0.0
        deadline = now + self.reply_timeout
        retry_at = now + self.resend_after
        resends = 0
        while True:
            wait_s = max(0.0, min(deadline, retry_at) - self.clock()) if wait else None
            frames = proto.poll(timeout=wait_s)
            nak = False
            for f in frames:
                if isinstance(f.msg, Telemetry):
                    if self._awaiting is not None and proto.answers(f, self._awaiting):
                        self._awaiting = None
                elif isinstance(f.msg, Nak):
                    nak = True
            bad = proto.rejected - self._bad_seen
            if frames or bad:
                self._bad_seen += bad
                out.append(Batch(frames, bad))
            if not wait or self._awaiting is None:
                return out
            now = self.clock()
            if not nak and now < min(retry_at, deadline):
                continue  # no word from the rig yet
            self.reply_timeouts += not nak
            if resends < self.resends_max and now < deadline:
                resends += 1
                error = self._resend()
                if error is not None:
                    out.append(Batch([], 0, error))
                retry_at = self.clock() + self.resend_after
                continue
            self.replies_missed += 1
            self._awaiting = None
            return out

    def _resend(self) -> FrameError | RigFault | None:
        """Send the awaited frame again (a new seq; the same message and time stamp); the error if that failed."""
        error: FrameError | RigFault | None = None
        try:
            self._awaiting = self.protocol.resend() or self._awaiting
        except (FrameError, RigFault) as err:
            error = err
        self.resent += 1
        return error

    # ------------------------------------------------------------------ closing
    def close(self, t_s: float, park: bool = False) -> None:
        """Close the link (safe to call twice); first, with ``park``, send a PARK stamped ``t_s`` [s], its reply
        not awaited, ignoring a failure (should it not arrive, the rig's watchdog trips and it ramps to neutral
        anyway). An emulator never waited for is not: it has had no frame to move the rig."""
        if self._starting is not None:
            self._starting = None
            park = False
        if park:
            try:
                self.protocol.park(self._stamp(t_s), awaited=False)
            except (FrameError, RigFault):
                pass
        self.link.close()


def wait_ready(port: SerialPort, emu: Any, timeout: float, clock: Callable[[], float] = time.monotonic) -> None:
    """Wait until the emulator has started serving (its first byte, :data:`hil.emulator.READY`).

    So that its start-up (a Python process importing numpy) is not taken for a rig that
    does not answer: in lockstep the first replies would otherwise miss their steps.
    ``emu`` has ``proc`` (a :class:`subprocess.Popen`); ``timeout`` [s] on ``clock``.

    Raises
    ------
    RigFault
        If nothing arrives within ``timeout`` s or the process ends.
    """
    deadline = clock() + timeout
    saved, port.timeout = port.timeout, 0.05
    try:
        while clock() < deadline:
            if port.read(1):
                return
            if emu.proc.poll() is not None:
                raise RigFault(f"hil emulator: exited with code {emu.proc.returncode} before serving")
    except (OSError, serial.SerialException) as err:
        raise RigFault(f"hil.url: emulator pty read failed: {err}") from err
    finally:
        port.timeout = saved
    raise RigFault(f"hil.start_timeout: the emulator did not start serving within {timeout:g} s")
