"""The native serial protocol between the HIL host and a rig: messages, frames, decoder.

A frame on the wire is ``COBS(header ‖ payload ‖ crc) ‖ 0x00``:

- header (8 bytes, little-endian): version u8, type u8, seq u16, time_us u32;
- payload: fixed layout per message type (``hil/PROTOCOL.md`` is byte-exact);
- crc: CRC-16/CCITT-FALSE of header ‖ payload, big-endian (so the CRC of
  header ‖ payload ‖ crc is 0), computed with :func:`binascii.crc_hqx` (init 0xFFFF).

Pure functions and one stateful decoder; no I/O, no clock. COBS comes from the
``cobs`` package.
"""

from __future__ import annotations

import binascii
import enum
import math
import struct
from collections import deque
from dataclasses import dataclass, field
from typing import ClassVar, Self

from cobs import cobs

from errors import FrameError

__all__ = [
    "PROTOCOL_VERSION",
    "MAX_AXES",
    "NO_ECHO",
    "HEADER_SIZE",
    "CRC_SIZE",
    "MsgType",
    "RigState",
    "Fault",
    "Heartbeat",
    "Arm",
    "Engage",
    "Park",
    "Reset",
    "EStop",
    "SetpointPose",
    "SetpointAxes",
    "Telemetry",
    "Hello",
    "Nak",
    "REJECT_REASONS",
    "Message",
    "Frame",
    "crc16",
    "encode_frame",
    "decode_frame",
    "rejection_kind",
    "wire_size",
    "seq_delta",
    "SeqTracker",
    "FrameDecoder",
]

PROTOCOL_VERSION = 1
MAX_AXES = 16
#: ``Telemetry.hold_us`` of a rig that has received no host frame yet: nothing is echoed.
NO_ECHO = 0xFFFFFFFF
HEADER_SIZE = 8
CRC_SIZE = 2
_HEADER = struct.Struct("<BBHI")
_HEADER_FROM = _HEADER.unpack_from
_CRC = struct.Struct(">H")  # the CRC's bytes, big-endian
_crc_hqx = binascii.crc_hqx
_cobs_encode, _cobs_decode = cobs.encode, cobs.decode  # (the per-frame path looks up no module attributes)
#: Longest raw frame (header + largest payload + CRC); longer chunks are garbage.
MAX_RAW_SIZE = HEADER_SIZE + 2 + 4 + 4 + 1 + 2 + 1 + 4 * MAX_AXES + 24 + CRC_SIZE


class MsgType(enum.IntEnum):
    """Message type codes; host→rig below 0x80, rig→host from 0x80."""

    HEARTBEAT = 0x01
    ARM = 0x02
    ENGAGE = 0x03
    PARK = 0x04
    RESET = 0x05
    ESTOP = 0x06
    SETPOINT_POSE = 0x10
    SETPOINT_AXES = 0x11
    TELEMETRY = 0x80
    HELLO = 0x81
    NAK = 0x82


class RigState(enum.IntEnum):
    """Rig state as reported in telemetry (the same states the host safety machine uses)."""

    IDLE = 0  # booted, motion-gated
    ARMED = 1
    ENGAGED = 2
    PARKING = 3
    FAULT = 4
    ESTOP = 5


class Fault(enum.IntFlag):
    """Fault bits reported in telemetry (u16)."""

    NONE = 0
    WATCHDOG = 1 << 0
    BAD_FRAMES = 1 << 1
    LIMIT = 1 << 2
    ESTOP = 1 << 3
    VERSION = 1 << 4
    FINGERPRINT = 1 << 5
    NAN = 1 << 6
    SEQUENCE = 1 << 7
    HOST = 1 << 8  # host-side fault (simulation lost, stale input)


def _finite(values: tuple[float, ...], name: str) -> tuple[float, ...]:
    out = tuple(map(float, values))
    if not all(map(math.isfinite, out)):
        raise FrameError(f"{name}: not finite: {list(out)}")
    return out


#: Lookups for the hot paths (an enum call or a format string per frame cost more than the rest):
#: state and fault bits by value, and per axis count n the structs of a SETPOINT_AXES payload
#: (count u8, n × f32) and of TELEMETRY's values (n × f32 axes, 6 × f32 wrench).
_STATES: dict[int, RigState] = {int(s): s for s in RigState}
_FAULTS: dict[int, Fault] = {}
_AXES_STRUCTS = {n: struct.Struct(f"<B{n}f") for n in range(1, MAX_AXES + 1)}
_TELEMETRY_STRUCTS = {n: struct.Struct(f"<{n}f6f") for n in range(1, MAX_AXES + 1)}


@dataclass(frozen=True, slots=True)
class _Empty:
    """Base of the messages with an empty payload."""

    TYPE: ClassVar[MsgType]

    def pack(self) -> bytes:
        return b""

    @classmethod
    def unpack(cls, payload: bytes) -> Self:
        if payload:
            raise FrameError(f"{cls.TYPE.name}: payload length must be 0, got {len(payload)}")
        return cls()


@dataclass(frozen=True, slots=True)
class Heartbeat(_Empty):
    """Host → rig: keeps the rig watchdog fed when no setpoint is due."""

    TYPE: ClassVar[MsgType] = MsgType.HEARTBEAT


@dataclass(frozen=True, slots=True)
class Engage(_Empty):
    """Host → rig: armed → engaged (setpoints are applied from now on)."""

    TYPE: ClassVar[MsgType] = MsgType.ENGAGE


@dataclass(frozen=True, slots=True)
class Park(_Empty):
    """Host → rig: ramp to neutral and stay there (engaged → parking → armed)."""

    TYPE: ClassVar[MsgType] = MsgType.PARK


@dataclass(frozen=True, slots=True)
class Reset(_Empty):
    """Host → rig: clear a latched fault or e-stop (fault/estop → idle)."""

    TYPE: ClassVar[MsgType] = MsgType.RESET


@dataclass(frozen=True, slots=True)
class EStop(_Empty):
    """Host → rig: emergency stop; latched until :class:`Reset`."""

    TYPE: ClassVar[MsgType] = MsgType.ESTOP


@dataclass(frozen=True, slots=True)
class Arm:
    """Host → rig: arming handshake (idle → armed).

    Attributes
    ----------
    fingerprint : int
        The rig fingerprint (u32) the host expects; a rig with another refuses and faults.
    watchdog_ms : int
        The watchdog timeout the rig shall apply to host frames (u16). [ms]
    """

    fingerprint: int
    watchdog_ms: int
    TYPE: ClassVar[MsgType] = MsgType.ARM
    _S: ClassVar[struct.Struct] = struct.Struct("<IH")

    def pack(self) -> bytes:
        return self._S.pack(self.fingerprint, self.watchdog_ms)

    @classmethod
    def unpack(cls, payload: bytes) -> Arm:
        if len(payload) != cls._S.size:
            raise FrameError(f"ARM: payload length must be {cls._S.size}, got {len(payload)}")
        return cls(*cls._S.unpack(payload))


@dataclass(frozen=True, slots=True)
class SetpointPose:
    """Host → rig: platform pose setpoint ``X_RP`` (platform P in rig base R).

    Attributes
    ----------
    p_RoPo_R : tuple of 3 float
        Platform origin from the base origin, in R. [m]
    quat_wxyz : tuple of 4 float
        ``q_RP``, scalar first, unit norm. [-]
    """

    p_RoPo_R: tuple[float, float, float]
    quat_wxyz: tuple[float, float, float, float]
    TYPE: ClassVar[MsgType] = MsgType.SETPOINT_POSE
    _S: ClassVar[struct.Struct] = struct.Struct("<7f")

    def pack(self) -> bytes:
        vals = _finite(tuple(self.p_RoPo_R) + tuple(self.quat_wxyz), "SETPOINT_POSE")
        if len(vals) != 7:
            raise FrameError(f"SETPOINT_POSE: needs 3 + 4 values, got {len(vals)}")
        return self._S.pack(*vals)

    @classmethod
    def unpack(cls, payload: bytes) -> SetpointPose:
        if len(payload) != cls._S.size:
            raise FrameError(f"SETPOINT_POSE: payload length must be {cls._S.size}, got {len(payload)}")
        x, y, z, qw, qx, qy, qz = _finite(cls._S.unpack(payload), "SETPOINT_POSE")
        return cls(p_RoPo_R=(x, y, z), quat_wxyz=(qw, qx, qy, qz))


@dataclass(frozen=True, slots=True)
class SetpointAxes:
    """Host → rig: joint-space setpoint (Stewart leg lengths [m] or servo axis values).

    Attributes
    ----------
    values : tuple of float
        1 … ``MAX_AXES`` values, in the rig's axis units (m for legs, rad for rotary servos).
    """

    values: tuple[float, ...]
    TYPE: ClassVar[MsgType] = MsgType.SETPOINT_AXES

    def pack(self) -> bytes:
        vals = _finite(tuple(self.values), "SETPOINT_AXES.values")
        if not 1 <= len(vals) <= MAX_AXES:
            raise FrameError(f"SETPOINT_AXES.values: count must be 1..{MAX_AXES}, got {len(vals)}")
        return _AXES_STRUCTS[len(vals)].pack(len(vals), *vals)

    @classmethod
    def unpack(cls, payload: bytes) -> SetpointAxes:
        n = payload[0] if payload else 0
        if not 1 <= n <= MAX_AXES or len(payload) != 1 + 4 * n:
            raise FrameError(f"SETPOINT_AXES: count {n} and payload length {len(payload)} disagree")
        return cls(values=_finite(_AXES_STRUCTS[n].unpack(payload)[1:], "SETPOINT_AXES.values"))


@dataclass(frozen=True, slots=True)
class Telemetry:
    """Rig → host: one measurement.

    Attributes
    ----------
    echo_seq : int
        Seq of the latest host frame the rig had received (u16).
    echo_time_us : int
        That frame's host time (u32). [µs]
    hold_us : int
        Time from that frame's receipt to this telemetry's send at the rig (u32) [µs];
        ``NO_ECHO`` (0xFFFFFFFF) if the rig has received no host frame yet.
    state : RigState
    faults : Fault
        Fault bits (u16).
    axes : tuple of float
        Measured axis values (leg lengths [m]), 1 … ``MAX_AXES``.
    F_Po_P : tuple of 6 float
        Force/torque sensor: wrench the contact applies on the platform at Po, in P,
        [τ; f]. [N·m, N]
    """

    echo_seq: int
    echo_time_us: int
    hold_us: int
    state: RigState
    faults: Fault
    axes: tuple[float, ...]
    F_Po_P: tuple[float, float, float, float, float, float]
    TYPE: ClassVar[MsgType] = MsgType.TELEMETRY
    _H: ClassVar[struct.Struct] = struct.Struct("<HIIBHB")

    def pack(self) -> bytes:
        axes = tuple(map(float, self.axes))
        if not 1 <= len(axes) <= MAX_AXES or len(self.F_Po_P) != 6:
            raise FrameError(f"TELEMETRY: axes count {len(axes)} / wrench size {len(self.F_Po_P)} invalid")
        head = self._H.pack(self.echo_seq, self.echo_time_us, self.hold_us, int(self.state), int(self.faults),
                            len(axes))
        return head + _TELEMETRY_STRUCTS[len(axes)].pack(*axes, *self.F_Po_P)

    @classmethod
    def unpack(cls, payload: bytes) -> Telemetry:
        if len(payload) < cls._H.size:
            raise FrameError(f"TELEMETRY: payload length {len(payload)} shorter than {cls._H.size}")
        es, et, hold, state, faults, n = cls._H.unpack_from(payload)
        if not 1 <= n <= MAX_AXES or len(payload) != cls._H.size + 4 * n + 24:
            raise FrameError(f"TELEMETRY: axes count {n} and payload length {len(payload)} disagree")
        st = _STATES.get(state)
        if st is None:
            raise FrameError(f"TELEMETRY.state: unknown value {state}")
        fault = _FAULTS.get(faults)
        if fault is None:  # a combination not seen before (u16: a handful in practice)
            fault = _FAULTS[faults] = Fault(faults)
        vals = _TELEMETRY_STRUCTS[n].unpack_from(payload, cls._H.size)
        return cls(es, et, hold, st, fault, vals[:n], vals[n:])


@dataclass(frozen=True, slots=True)
class Hello:
    """Rig → host: identification, sent at boot and in answer to :class:`Arm`.

    Attributes
    ----------
    fingerprint : int
        Rig fingerprint (u32): identifies geometry and firmware.
    n_axes : int
        Number of axes (u8).
    watchdog_ms : int
        The rig's current watchdog timeout (u16). [ms]
    """

    fingerprint: int
    n_axes: int
    watchdog_ms: int
    TYPE: ClassVar[MsgType] = MsgType.HELLO
    _S: ClassVar[struct.Struct] = struct.Struct("<IBH")

    def pack(self) -> bytes:
        return self._S.pack(self.fingerprint, self.n_axes, self.watchdog_ms)

    @classmethod
    def unpack(cls, payload: bytes) -> Hello:
        if len(payload) != cls._S.size:
            raise FrameError(f"HELLO: payload length must be {cls._S.size}, got {len(payload)}")
        return cls(*cls._S.unpack(payload))


#: Why a receiver rejected a chunk: the kinds of :class:`FrameDecoder` (and ``step``, a setpoint
#: that passed every check but moves an axis farther than the rig can in the time allowed), as
#: :attr:`Nak.reason` codes.
REJECT_REASONS: dict[str, int] = {"cobs": 1, "length": 2, "crc": 3, "version": 4, "type": 5, "payload": 6,
                                  "overflow": 7, "step": 8}


@dataclass(frozen=True, slots=True)
class Nak:
    """Rig → host: the rig rejected what it received since its last answer.

    Sent after one or more rejected chunks (corrupted, wrong version or type, or an
    implausible setpoint), before the rig's next reply, so that a lockstep host resends
    its frame at once instead of waiting for a reply that will not come.

    Attributes
    ----------
    rejected : int
        Chunks the rig has rejected since it booted (u32, wraps): the rig-side count the
        host reports.
    echo_seq : int
        Seq of the latest host frame the rig accepted (u16).
    reason : int
        Why the latest chunk was rejected (u8): a value of :data:`REJECT_REASONS`.
    """

    rejected: int
    echo_seq: int
    reason: int
    TYPE: ClassVar[MsgType] = MsgType.NAK
    _S: ClassVar[struct.Struct] = struct.Struct("<IHB")

    def pack(self) -> bytes:
        return self._S.pack(self.rejected, self.echo_seq, self.reason)

    @classmethod
    def unpack(cls, payload: bytes) -> Nak:
        if len(payload) != cls._S.size:
            raise FrameError(f"NAK: payload length must be {cls._S.size}, got {len(payload)}")
        return cls(*cls._S.unpack(payload))


Message = Heartbeat | Arm | Engage | Park | Reset | EStop | SetpointPose | SetpointAxes | Telemetry | Hello | Nak
_BY_TYPE: dict[int, type[Message]] = {
    c.TYPE: c for c in (Heartbeat, Arm, Engage, Park, Reset, EStop, SetpointPose, SetpointAxes, Telemetry, Hello, Nak)
}


@dataclass(frozen=True, slots=True)
class Frame:
    """One decoded frame: header fields and the message.

    Attributes
    ----------
    seq : int
        Sender's frame counter (u16, wraps).
    time_us : int
        Sender's clock at send (u32, wraps): the host time for host frames. [µs]
    msg : Message
    version : int
    """

    seq: int
    time_us: int
    msg: Message
    version: int = PROTOCOL_VERSION


def crc16(data: bytes) -> int:
    """CRC-16/CCITT-FALSE (poly 0x1021, init 0xFFFF, no reflection, no xor-out).

    Check value ``crc16(b"123456789") == 0x29B1``.
    """
    return binascii.crc_hqx(data, 0xFFFF)


def encode_frame(msg: Message, seq: int = 0, time_us: int = 0, version: int = PROTOCOL_VERSION) -> bytes:
    """Encode one message as a wire frame: COBS(header ‖ payload ‖ crc) ‖ 0x00.

    Parameters
    ----------
    msg : Message
        One of the message dataclasses of this module.
    seq : int
        Frame counter, taken modulo 2**16.
    time_us : int
        Sender clock [µs], taken modulo 2**32.
    version : int
        Protocol version byte (tests use other values to check rejection).

    Returns
    -------
    bytes
        The frame including its trailing 0x00 delimiter.

    Raises
    ------
    FrameError
        If a field does not fit its wire type or is not finite.
    """
    try:
        raw = _HEADER.pack(version, msg.TYPE, seq & 0xFFFF, time_us & 0xFFFFFFFF) + msg.pack()
    except struct.error as err:
        raise FrameError(f"{type(msg).__name__}: field out of range: {err}") from err
    return _cobs_encode(raw + _CRC.pack(_crc_hqx(raw, 0xFFFF))) + b"\x00"


def decode_frame(encoded: bytes, version: int = PROTOCOL_VERSION) -> Frame:
    """Decode one COBS-encoded frame (without its 0x00 delimiter).

    Raises
    ------
    FrameError
        With ``kind`` in the message prefix: ``cobs``, ``length``, ``crc``, ``version``,
        ``type``, ``payload``.
    """
    try:
        raw = _cobs_decode(encoded)
    except cobs.DecodeError as err:
        raise FrameError(f"cobs: invalid encoding of {len(encoded)} bytes: {err}") from err
    if not HEADER_SIZE + CRC_SIZE <= len(raw) <= MAX_RAW_SIZE:
        raise FrameError(f"length: frame of {len(raw)} bytes outside {HEADER_SIZE + CRC_SIZE}..{MAX_RAW_SIZE}")
    if _crc_hqx(raw, 0xFFFF):  # (crc16: the CRC over the frame and its CRC is 0)
        got = int.from_bytes(raw[-2:], "big")
        raise FrameError(f"crc: frame CRC 0x{got:04X} != computed 0x{crc16(raw[:-2]):04X}")
    ver, typ, seq, t_us = _HEADER_FROM(raw)
    if ver != version:
        raise FrameError(f"version: frame version {ver} != expected {version}")
    cls = _BY_TYPE.get(typ)
    if cls is None:
        raise FrameError(f"type: unknown message type 0x{typ:02X}")
    try:
        msg = cls.unpack(raw[HEADER_SIZE:-CRC_SIZE])
    except FrameError as err:
        raise FrameError(f"payload: {err}") from err
    return Frame(seq, t_us, msg, ver)


def rejection_kind(err: FrameError) -> str:
    """The kind of a rejection raised by :func:`decode_frame` (``crc``, ``cobs``, …): its message's prefix."""
    return str(err).split(":", 1)[0]


def wire_size(raw_size: int) -> int:
    """Worst-case bytes on the wire for a raw frame of ``raw_size`` bytes (COBS + delimiter)."""
    return raw_size + max(1, math.ceil(raw_size / 254)) + 1


def seq_delta(new: int, old: int) -> int:
    """Signed distance ``new − old`` of two u16 sequence numbers (serial arithmetic, RFC 1982)."""
    d = (new - old) & 0xFFFF
    return d - 0x10000 if d >= 0x8000 else d


@dataclass
class SeqTracker:
    """Classifies arriving sequence numbers: in order, after a gap, duplicate or stale.

    Only frames that are ``"ok"`` or ``"gap"`` (newer than everything seen) may be acted on;
    a stale (reordered) or duplicate frame must be dropped.
    """

    last: int | None = None
    gaps: int = 0
    lost: int = 0
    stale: int = 0
    duplicates: int = 0

    def check(self, seq: int) -> str:
        """Classify ``seq`` and update the counters; returns ``ok``, ``gap``, ``dup`` or ``stale``."""
        if self.last is None:
            self.last = seq
            return "ok"
        d = (seq - self.last) & 0xFFFF  # seq_delta(seq, self.last)
        if d >= 0x8000:
            d -= 0x10000
        if d == 1:
            self.last = seq
            return "ok"
        if d > 1:
            self.gaps += 1
            self.lost += d - 1
            self.last = seq
            return "gap"
        if d == 0:
            self.duplicates += 1
            return "dup"
        self.stale += 1
        return "stale"

    def reset(self) -> None:
        """Forget the last seq (after a re-arm)."""
        self.last = None


@dataclass
class FrameDecoder:
    """Incremental decoder: feed it bytes as they arrive, get whole valid frames.

    Keeps partial bytes between calls, resynchronises on every 0x00, and counts every
    rejected chunk by kind (``cobs``, ``length``, ``crc``, ``version``, ``type``,
    ``payload``, ``overflow``). The last rejections are kept in ``errors`` as
    :class:`errors.FrameError` instances.

    Attributes
    ----------
    version : int
        The accepted protocol version.
    frames : int
        Valid frames decoded so far.
    counts : dict[str, int]
        Rejections by kind.
    """

    version: int = PROTOCOL_VERSION
    frames: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    errors: deque = field(default_factory=lambda: deque(maxlen=32))
    _buf: bytearray = field(default_factory=bytearray)
    _bad: int = field(default=0, repr=False)  # the sum of counts, kept (read every step)

    @property
    def bad(self) -> int:
        """Total rejected chunks."""
        return self._bad

    def _reject(self, kind: str, err: FrameError) -> None:
        self.counts[kind] = self.counts.get(kind, 0) + 1
        self._bad += 1
        self.errors.append(err)

    def feed(self, chunk: bytes) -> list[Frame]:
        """Consume ``chunk``; return the valid frames completed by it, oldest first.

        Rejected chunks are counted, never raised: one bad frame must not stop the link.
        An empty chunk between two delimiters is ignored (idle line).
        """
        if self._buf:
            self._buf += chunk
            chunk = bytes(self._buf)
        *parts, rest = bytes(chunk).split(b"\x00")
        self._buf = bytearray(rest)
        out: list[Frame] = []
        version = self.version
        for part in parts:  # (feed_all's loop, the frames alone)
            if part:
                try:
                    out.append(decode_frame(part, version))
                except FrameError as err:
                    self._reject(rejection_kind(err), err)
                    continue
                self.frames += 1
        if len(self._buf) > 2 * MAX_RAW_SIZE:
            self._overflow()
        return out

    def _overflow(self) -> FrameError:
        """Garbage without a delimiter: dropped, counted (``overflow``); the rejection."""
        overflow = FrameError(f"overflow: {len(self._buf)} bytes without a delimiter")
        self._reject("overflow", overflow)
        self._buf.clear()
        return overflow

    def feed_all(self, chunk: bytes) -> list[Frame | FrameError]:
        """:meth:`feed`, with each rejected chunk in its place as the :class:`errors.FrameError`
        it raised (counted as by :meth:`feed`): for a receiver that answers rejections in order."""
        out: list[Frame | FrameError] = []
        if self._buf:
            self._buf += chunk
            chunk = bytes(self._buf)
        *parts, rest = bytes(chunk).split(b"\x00")  # (bytes() of bytes is the object itself)
        self._buf = bytearray(rest)
        for part in parts:
            if not part:
                continue
            try:
                out.append(decode_frame(part, self.version))
            except FrameError as err:
                self._reject(rejection_kind(err), err)
                out.append(err)
                continue
            self.frames += 1
        if len(self._buf) > 2 * MAX_RAW_SIZE:  # garbage without a delimiter: drop it
            out.append(self._overflow())
        return out
