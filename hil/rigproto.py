"""Rig protocols as backends: what the bridge says to a rig, whatever the rig's wire format.

A :class:`RigProtocol` is the host end of one wire format on a :class:`hil.link.SerialLink`:
it starts the rig (:meth:`~RigProtocol.handshake`, :meth:`~RigProtocol.engage`), sends one
commanded pose (:meth:`~RigProtocol.setpoint`), keeps it (:meth:`~RigProtocol.hold`), parks it
(:meth:`~RigProtocol.park`) and reads what the rig says (:meth:`~RigProtocol.poll`). What a
format can do at all is in its :class:`Capabilities`; the bridge (:mod:`hil.bridge`) checks
them where the behaviour differs (no replies: no sensed feedback, no delay, no prediction).

Backends are registered by name, as pyserial's URL handlers are (``[hil] format`` selects one):

- ``native`` (:class:`NativeProtocol`) — the framed protocol of ``hil/PROTOCOL.md`` §1–2:
  sequence numbers, time stamps, CRC, the ARM/HELLO/ENGAGE handshake, heartbeats, PARK,
  telemetry with the sensed axes and wrench;
- ``binary6`` and ``ascii`` (:class:`AxisProtocol`) — the hobby formats of §3–4
  (:mod:`hil.encoders`): axis values only, no handshake, no replies.

:func:`register_protocol` adds a backend; :func:`open_protocol` makes one on a link. A backend
also names the rig end of its format (:meth:`RigProtocol.rig_parser`), which the emulator
(:mod:`hil.emulator`) uses to speak it. Replies are expressed in the native messages
(:class:`hil.framing.Telemetry`, :class:`~hil.framing.Hello`, :class:`~hil.framing.Nak` in
:class:`~hil.framing.Frame`), the bridge's vocabulary for what a rig reports.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from dynamics.spatial import quat_integrate, rotation_vector
from errors import ConfigError, FrameError, ShapeError
from hil.encoders import AsciiAxisEncoder, BinaryAxisEncoder, make_encoder
from hil.framing import (
    CRC_SIZE,
    HEADER_SIZE,
    Arm,
    Engage,
    Frame,
    Heartbeat,
    Message,
    Park,
    SetpointAxes,
    SetpointPose,
    Telemetry,
)
from hil.link import SerialLink, SerialPort, open_port

__all__ = ["Capabilities", "Sent", "RigProtocol", "RigParser", "NativeProtocol", "AxisProtocol", "AxisParser",
           "register_protocol", "protocol_class", "protocol_names", "open_protocol"]

Array = NDArray[np.float64]
Sent = tuple[int, int] | None
"""What a send returns: ``(seq, time_us)`` of a frame whose reply is awaited (:meth:`RigProtocol.answers`),
None if none is."""
_ONE = np.array([1.0, 0.0, 0.0, 0.0])


@dataclass(frozen=True)
class Capabilities:
    """What a wire format carries.

    Attributes
    ----------
    has_handshake : bool
        The rig has the firmware state machine: ARM/HELLO (fingerprint), ENGAGE, PARK, and a
        watchdog fed by every frame (heartbeats while there is no setpoint).
    has_replies : bool
        The rig answers: telemetry with its sensed axes, state and fault bits, echoing the host's
        frames (so the round-trip delay is measured), and NAKs.
    has_wrench : bool
        The replies carry the force/torque reading (``F_Po_P``).
    has_time : bool
        Host frames carry the host's time (the emulator can run in lockstep on it).
    """

    has_handshake: bool
    has_replies: bool
    has_wrench: bool
    has_time: bool


class RigParser(ABC):
    """The rig end of a format without a state machine: host bytes in, commanded axis values out."""

    bad: int = 0
    """Chunks rejected so far (bad checksum, syntax, length)."""

    @abstractmethod
    def feed(self, data: bytes) -> list[Array]:
        """The axis setpoints (n,) completed by ``data``, oldest first; partial bytes are kept."""


class RigProtocol(ABC):
    """The host end of one rig wire format on a link (see the module docstring).

    Parameters
    ----------
    link : SerialLink
        The open link; the backend writes and reads through it (its statistics count the frames).
    cfg : HilConfig
        The ``[hil]`` configuration (axis ranges, setpoint kind, neutral pose).

    Every send method takes ``t_us``: the frame's time stamp [µs] (lockstep: the simulation time;
    None: the link's clock), and ``awaited``: in lockstep (``t_us`` given) its reply is awaited
    (then the returned :data:`Sent` names the frame, and a frame that can be lost is guarded).
    A format without replies returns None.
    """

    name: ClassVar[str] = ""
    capabilities: ClassVar[Capabilities]

    def __init__(self, link: SerialLink, cfg: Any) -> None:
        self.link = link
        self.cfg = cfg

    @classmethod
    @abstractmethod
    def frame_sizes(cls, cfg: Any) -> tuple[int, int, bool]:
        """``(command bytes, reply bytes, COBS framed)``: the largest command frame (raw, before COBS when
        framed), the reply frame (0: none), for the line budget (:func:`hil.link.check_line_budget`)."""

    @classmethod
    def rig_parser(cls, cfg: Any) -> RigParser | None:
        """The rig end's parser of this format (:mod:`hil.emulator`); None: the rig speaks the native
        protocol itself (:class:`hil.rig.RigCore`)."""
        return None

    @abstractmethod
    def handshake(self, fingerprint: int, watchdog_ms: int, t_us: int | None, awaited: bool = True) -> Sent:
        """Ask the rig to arm (fingerprint u32, the host's watchdog [ms]); nothing without a handshake."""

    @abstractmethod
    def engage(self, t_us: int | None, awaited: bool = True) -> Sent:
        """Ask an armed rig to follow the setpoints; nothing without a handshake."""

    @abstractmethod
    def setpoint(self, axes: Array, X_RP: Array, t_us: int | None, awaited: bool = True) -> Sent:
        """Send one commanded pose: ``axes`` (n,) the axis values [m or axis unit], ``X_RP`` (4, 4) the same
        pose as the platform's in the rig frame (a backend sends whichever its format takes).

        Raises
        ------
        FrameError
            If the values do not encode (not finite, wrong count).
        RigFault
            If the port fails.
        """

    @abstractmethod
    def hold(self, t_us: int | None, awaited: bool = True) -> Sent:
        """Keep the rig at its last setpoint (a heartbeat where the rig has a watchdog; else nothing)."""

    @abstractmethod
    def park(self, t_us: int | None, awaited: bool = True) -> Sent:
        """Bring the rig to neutral within its limits (PARK; else a setpoint at the neutral axes)."""

    def poll(self, timeout: float | None = None) -> list[Frame]:
        """The rig's valid frames that have arrived (waiting up to ``timeout`` s for the first byte where
        the port honours it); [] for a format without replies."""
        return []

    def answers(self, frame: Frame, sent: Sent) -> bool:
        """Whether ``frame`` is the reply to the frame ``sent`` named."""
        return False

    def resend(self) -> Sent:
        """Send the last awaited frame again (same message and time stamp); None if there is none."""
        return None

    @property
    def rejected(self) -> int:
        """Chunks from the rig the host has rejected so far."""
        return 0


class NativeProtocol(RigProtocol):
    """The native framed protocol (``hil/PROTOCOL.md`` §1–2) on a :class:`hil.link.SerialLink`.

    Setpoints are SETPOINT_AXES, or SETPOINT_POSE with ``[hil] setpoint = "pose"``. An awaited frame in
    lockstep is followed by a second delimiter (:meth:`hil.link.SerialLink.send`) and kept for
    :meth:`resend`; its reply is the telemetry that echoes its seq or carries its time stamp.
    """

    name = "native"
    capabilities = Capabilities(has_handshake=True, has_replies=True, has_wrench=True, has_time=True)

    def __init__(self, link: SerialLink, cfg: Any) -> None:
        super().__init__(link, cfg)
        self._pose = cfg.table["setpoint"] == "pose"
        self._last: tuple[Message, int] | None = None

    @classmethod
    def frame_sizes(cls, cfg: Any) -> tuple[int, int, bool]:
        n = cfg.rig.n_axes
        payload = 28 if cfg.table["setpoint"] == "pose" else 1 + 4 * n
        return HEADER_SIZE + payload + CRC_SIZE, HEADER_SIZE + 38 + 4 * n + CRC_SIZE, True

    def _send(self, msg: Message, t_us: int | None, awaited: bool) -> Sent:
        if not awaited:
            self.link.send(msg, t_us)
            return None
        seq = self.link.seq
        self.link.send(msg, t_us, guard=t_us is not None)
        if t_us is None:
            return None
        self._last = (msg, t_us)
        return seq, t_us & 0xFFFFFFFF

    def handshake(self, fingerprint: int, watchdog_ms: int, t_us: int | None, awaited: bool = True) -> Sent:
        return self._send(Arm(fingerprint, watchdog_ms), t_us, awaited)

    def engage(self, t_us: int | None, awaited: bool = True) -> Sent:
        self.link.delay.clear()  # the handshake's round trips include the rig's start-up
        return self._send(Engage(), t_us, awaited)

    def setpoint(self, axes: Array, X_RP: Array, t_us: int | None, awaited: bool = True) -> Sent:
        if self._pose:
            q = quat_integrate(_ONE, rotation_vector(X_RP[:3, :3]), 1.0)  # scipy-free matrix → quaternion
            return self._send(SetpointPose(tuple(X_RP[:3, 3]), tuple(q)), t_us, awaited)
        return self._send(SetpointAxes(tuple(axes.tolist())), t_us, awaited)

    def hold(self, t_us: int | None, awaited: bool = True) -> Sent:
        return self._send(Heartbeat(), t_us, awaited)

    def park(self, t_us: int | None, awaited: bool = True) -> Sent:
        return self._send(Park(), t_us, awaited)

    def poll(self, timeout: float | None = None) -> list[Frame]:
        return self.link.receive(timeout=timeout)

    def answers(self, frame: Frame, sent: Sent) -> bool:
        return sent is not None and isinstance(frame.msg, Telemetry) and (frame.msg.echo_seq == sent[0]
                                                                          or frame.time_us == sent[1])

    def resend(self) -> Sent:
        if self._last is None:
            return None
        msg, t_us = self._last
        return self._send(msg, t_us, True)

    @property
    def rejected(self) -> int:
        return self.link.decoder.bad


class AxisParser(RigParser):
    """The rig end of an axis format: binary frames found by their start bytes (a bad one skipped
    byte by byte), or ASCII lines split at their terminator."""

    def __init__(self, encoder: BinaryAxisEncoder | AsciiAxisEncoder) -> None:
        self.encoder = encoder
        self.bad = 0
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[Array]:
        self._buf += data
        out: list[Array] = []
        enc = self.encoder
        if isinstance(enc, BinaryAxisEncoder):
            size = enc.frame_size
            while True:
                i = self._buf.find(enc.start)
                if i < 0:
                    del self._buf[: max(0, len(self._buf) - len(enc.start) + 1)]
                    return out
                if i:
                    self.bad += 1  # bytes before a start: the rest of a broken frame
                    del self._buf[:i]
                if len(self._buf) < size:
                    return out
                try:
                    out.append(enc.decode(bytes(self._buf[:size])))
                    del self._buf[:size]
                except FrameError:
                    del self._buf[:1]  # resynchronise on the next start
        term = enc.terminator.encode("ascii")
        while (j := self._buf.find(term)) >= 0:
            line = bytes(self._buf[: j + len(term)])
            del self._buf[: j + len(term)]
            try:
                out.append(enc.decode(line))
            except FrameError:
                self.bad += 1
        if len(self._buf) > 4 * enc.frame_size:  # no terminator for too long: garbage
            self.bad += 1
            self._buf.clear()
        return out


class AxisProtocol(RigProtocol):
    """An axis-value format of :mod:`hil.encoders` (``binary6``, ``ascii``): setpoints only.

    No handshake (the bridge arms itself), no replies; :meth:`hold` sends nothing (such a rig holds its
    last value), :meth:`park` sends the neutral axes (the rig moves there at its own speed).
    """

    name = ""
    capabilities = Capabilities(has_handshake=False, has_replies=False, has_wrench=False, has_time=False)

    def __init__(self, link: SerialLink, cfg: Any) -> None:
        super().__init__(link, cfg)
        self.encoder = self.make_encoder(cfg)
        self.neutral_axes = cfg.rig.inverse(cfg.pose_map.X_RP0)

    @classmethod
    def make_encoder(cls, cfg: Any) -> BinaryAxisEncoder | AsciiAxisEncoder:
        """This format's encoder over the rig's axis ranges (``[hil.limits]``; ``ascii_bits``)."""
        return make_encoder(cls.name, cfg.limits.lo, cfg.limits.hi, bits=int(cfg.table["ascii_bits"]))

    @classmethod
    def frame_sizes(cls, cfg: Any) -> tuple[int, int, bool]:
        return cls.make_encoder(cfg).frame_size, 0, False

    @classmethod
    def rig_parser(cls, cfg: Any) -> RigParser | None:
        return AxisParser(cls.make_encoder(cfg))

    def handshake(self, fingerprint: int, watchdog_ms: int, t_us: int | None, awaited: bool = True) -> Sent:
        return None

    def engage(self, t_us: int | None, awaited: bool = True) -> Sent:
        return None

    def setpoint(self, axes: Array, X_RP: Array, t_us: int | None, awaited: bool = True) -> Sent:
        try:
            data = self.encoder.encode(axes)
        except ShapeError as err:  # not finite, or not one value per axis
            raise FrameError(f"hil.format {self.name}: setpoint {np.asarray(axes).tolist()}: {err}") from err
        self.link.write_raw(data)
        return None

    def hold(self, t_us: int | None, awaited: bool = True) -> Sent:
        return None

    def park(self, t_us: int | None, awaited: bool = True) -> Sent:
        return self.setpoint(self.neutral_axes, self.cfg.pose_map.X_RP0, t_us, awaited)


class Binary6Protocol(AxisProtocol):
    """``binary6``: ``AA 55 | 6 × u16 big-endian | checksum`` (``hil/PROTOCOL.md`` §3)."""

    name = "binary6"


class AsciiProtocol(AxisProtocol):
    """``ascii``: ``A<v1>B<v2>…\\n`` (``hil/PROTOCOL.md`` §4)."""

    name = "ascii"


_PROTOCOLS: dict[str, type[RigProtocol]] = {}


def register_protocol(name: str, cls: type[RigProtocol]) -> None:
    """Register backend ``cls`` as ``[hil] format = name`` (a later registration of a name replaces it).

    Raises
    ------
    ConfigError
        If ``name`` is not a non-empty identifier or ``cls`` is not a :class:`RigProtocol` subclass.
    """
    if not (isinstance(name, str) and name.isidentifier()):
        raise ConfigError(f"hil.format: a rig protocol's name must be an identifier, got {name!r}")
    if not (isinstance(cls, type) and issubclass(cls, RigProtocol)) or getattr(cls, "capabilities", None) is None:
        raise ConfigError(f"hil.format: {name!r}: {cls!r} is not a RigProtocol subclass with capabilities")
    _PROTOCOLS[name] = cls


def protocol_names() -> tuple[str, ...]:
    """The registered format names, in registration order."""
    return tuple(_PROTOCOLS)


def protocol_class(name: str) -> type[RigProtocol]:
    """The backend registered as ``name``.

    Raises
    ------
    ConfigError
        Naming the format and the known ones, if none is.
    """
    try:
        return _PROTOCOLS[name]
    except (KeyError, TypeError):
        raise ConfigError(f"hil.format: unknown rig protocol {name!r}, expected one of {protocol_names()}") \
            from None


def open_protocol(name: str, link: SerialLink | SerialPort | str, cfg: Any) -> RigProtocol:
    """Backend ``name`` on ``link``: a :class:`hil.link.SerialLink`, an open port (wrapped in one), or a
    pyserial URL (opened at ``[hil] baud``).

    Raises
    ------
    ConfigError
        If ``name`` is not registered (or the URL's scheme is unknown).
    RigFault
        If the URL cannot be opened.
    """
    cls = protocol_class(name)
    if isinstance(link, str):
        link = open_port(link, int(cfg.table["baud"]))
    if not isinstance(link, SerialLink):
        link = SerialLink(link)
    return cls(link, cfg)


register_protocol("native", NativeProtocol)
register_protocol("binary6", Binary6Protocol)
register_protocol("ascii", AsciiProtocol)
