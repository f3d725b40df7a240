"""The rig emulator: a Stewart platform (or servo rig) with its firmware, on the far end of a link.

Run as its own process on the master side of a pty, a serial URL or a TCP socket::

    python -m hil.emulator --pty                      # makes a pty, prints "PTY <path>"
    python -m hil.emulator --port fd:7 [--delay-ms D] [--drop P] [--bit-error P] [--lockstep]
    python -m hil.emulator --port socket://... | /dev/ttyUSB1 | --listen 127.0.0.1:5555

:func:`spawn_emulator` makes the pty pair with ``os.openpty``, starts the process on
the master and returns the host-side path (tests, the bridge's ``url = "emulator"``).

Parts:

- :class:`RigCore` — firmware and physics, stepped with explicit times: the state
  machine of :mod:`hil.safety` with its watchdog, N-bad-frames fault, arming handshake
  (fingerprint), latched e-stop; actuators with stroke, speed and acceleration limits
  (ideal within the limits, or a critically damped servo of given bandwidth); the
  ramp to neutral on a fault; a force/torque sensor on a contact spring–damper
  between the platform and a fixed plane (the other docking half).
- :class:`Channel` — transport delay, byte drops and bit errors.
- :class:`LockstepRig` — steps the core by the time stamps of the host's frames (no
  wall clock), deterministic; :class:`LockstepPort` exposes it as an in-process port.
- :func:`serve` — the realtime loop over a port.
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

from dynamics.spatial import quat_to_rotation, rotation_to_quat
from errors import ConfigError, FrameError, NoSolutionError, RigFault
from hil.config import HilConfig, parse
from hil.framing import (
    NO_ECHO,
    REJECT_REASONS,
    Arm,
    Engage,
    EStop,
    Fault,
    Frame,
    FrameDecoder,
    Hello,
    Nak,
    Park,
    Reset,
    RigState,
    SeqTracker,
    SetpointAxes,
    SetpointPose,
    Telemetry,
    encode_frame,
    rejection_kind,
    wire_size,
)
from hil.link import TELEMETRY6_RAW, open_port
from hil.safety import ramp_step, rate_limit_rows, transition
from hil.stewart import RigLimits, StewartRig, pose
from protocol.realtime import set_priority

__all__ = ["READY", "ContactPlane", "RigCore", "Channel", "LockstepRig", "LockstepPort", "FdPort", "SocketPort", "serve",
           "spawn_emulator", "EmulatorProcess", "main"]

Array = NDArray[np.float64]

#: What the emulator writes first, once its rig core exists and it serves: an empty frame (a
#: lone delimiter), which every decoder skips as an idle line, so that the host can wait for it
#: to be up.
READY = b"\x00"


@dataclass(frozen=True)
class ContactPlane:
    """Contact spring–damper between probe points on the platform and a fixed plane.

    The fixed docking half fills ``n·y > offset`` (y in R); a probe point y_i that enters it
    is pushed back with ``f_i = −n max(0, k δ_i + c δ̇_i)``, ``δ_i = n·y_i − offset``
    (a Kelvin–Voigt contact that never pulls).

    Attributes
    ----------
    normal : ndarray, shape (3,)
        Unit normal in R, pointing into the fixed half.
    offset : float
        Plane offset along the normal [m].
    stiffness, damping : float
        [N/m], [N·s/m] per probe point.
    probes_P : ndarray, shape (m, 3)
        Probe points in P [m].
    """

    normal: Array
    offset: float
    stiffness: float
    damping: float
    probes_P: Array

    def wrench(self, R_RP: Array, p_RoPo_R: Array, V_RP_R: Array) -> Array:
        """Contact wrench on the platform at Po, expressed in P, [τ; f] (6,). [N·m, N]

        Parameters
        ----------
        R_RP : ndarray, shape (3, 3)
        p_RoPo_R : ndarray, shape (3,)
        V_RP_R : ndarray, shape (6,)
            Platform twist [ω; v] at Po, in R. [rad/s, m/s]
        """
        r = self.probes_P @ R_RP.T  # Po → probe, in R
        depth = ((p_RoPo_R + r) @ self.normal - self.offset).tolist()
        if max(depth) <= 0:
            return np.zeros(6)
        nx, ny, nz = self.normal.tolist()
        wx, wy, wz, vx, vy, vz = V_RP_R.tolist()
        f_n = 0.0  # total force magnitude along −n, and its moment Σ r × (−n f) about Po, in R
        tx = ty = tz = 0.0
        for (rx, ry, rz), d in zip(r.tolist(), depth, strict=True):  # plain floats: 1…3 probes
            if d <= 0:
                continue
            # probe velocity v + ω × r, its normal component
            vn = (vx + wy * rz - wz * ry) * nx + (vy + wz * rx - wx * rz) * ny + (vz + wx * ry - wy * rx) * nz
            mag = max(0.0, self.stiffness * d + self.damping * vn)
            f_n += mag
            tx -= mag * (ry * nz - rz * ny)
            ty -= mag * (rz * nx - rx * nz)
            tz -= mag * (rx * ny - ry * nx)
        return np.concatenate([R_RP.T @ np.array([tx, ty, tz]), R_RP.T @ (-f_n * self.normal)])


class RigCore:
    """The rig: firmware state machine, actuators and the force/torque sensor.

    Times are arguments (seconds on the rig's clock); no I/O. Feed host frames with
    :meth:`handle` (or raw bytes with :meth:`receive_bytes`), advance with :meth:`advance`,
    and read what the rig sends from :attr:`outbox` (encoded frames with their send time).

    Rejections are answered with a :class:`hil.framing.Nak`: chunks that fail to decode
    (:meth:`receive_bytes`) and setpoints that pass every check of the frame but would move
    an axis farther than the actuators' speed limit allows within the watchdog, the longest
    a host may leave between two frames (the *step gate*: ``counts["implausible"]``; the
    residual errors of the CRC, see ``hil/PROTOCOL.md``).

    Parameters
    ----------
    cfg : HilConfig
        Geometry, limits, fingerprint and ``[hil.emulator]`` (contact, bandwidth, rate).
    """

    def __init__(self, cfg: HilConfig) -> None:
        em = cfg.emulator
        self.rig = cfg.rig
        f = float(em["hard_limits"])  # the actuators' own limits lie outside the host's soft limits
        lim = cfg.limits
        self.limits = RigLimits(lim.lo, lim.hi, f * lim.v_max, f * lim.a_max, f * lim.j_max)
        self.fingerprint = cfg.fingerprint
        self.bad_frames_max = int(cfg.table["bad_frames_max"])
        self.dt = 1.0 / float(em["rate"])
        self.bandwidth = float(em["bandwidth"])
        rad = float(em["probe_radius"])
        probes = np.zeros((1, 3)) if rad == 0 else rad * np.array(
            [[np.cos(a), np.sin(a), 0.0] for a in np.radians([0.0, 120.0, 240.0])])
        self.contact = ContactPlane(np.asarray(em["plane_normal"], dtype=np.float64), float(em["plane_offset"]),
                                    float(em["stiffness"]), float(em["damping"]), probes)
        self.neutral_axes = self.rig.inverse(self.rig.neutral)
        self.state = RigState.IDLE
        self.faults = Fault.NONE
        self.x = self.neutral_axes.copy()
        self.v = np.zeros_like(self.x)
        self.a = np.zeros_like(self.x)
        self.target = self.x.copy()
        self.target_prev = self.x.copy()  # interpolation start (see _setpoint)
        self.target_T = self.dt  # setpoint period, measured
        self.target_t = 0.0
        self._setpoint_t: float | None = None
        self.q = rotation_to_quat(self.rig.neutral[:3, :3])
        self.p = self.rig.neutral[:3, 3].copy()
        self.V = np.zeros(6)
        self.F = np.zeros(6)
        self._sensed_x: list[float] | None = None
        self.t = 0.0
        self.watchdog_s = 0.1
        self.decoder = FrameDecoder()
        self.rx_seq = SeqTracker()
        self.last_rx: tuple[int, int, float] | None = None  # seq, host time, rig receive time
        self.tx_seq = 0
        self.outbox: deque[tuple[float, Hello | Telemetry | Nak]] = deque()
        self.applied: deque[tuple[int, tuple[float, ...]]] = deque(maxlen=100_000)
        self.arrivals: deque[tuple[int, int]] = deque(maxlen=100_000)  # (seq, monotonic ns) of valid frames
        self.fault_log: list[tuple[float, int, float]] = []  # (t, bits, time since the last host frame)
        self.counts = {"frames": 0, "applied": 0, "refused": 0, "stale": 0, "bad_run_faults": 0, "implausible": 0}
        self._bad_seen = 0
        self._bad_run = 0

    # ------------------------------------------------------------------ frames
    def send(self, msg: Hello | Telemetry | Nak, t: float) -> None:
        """Queue one rig message made at rig time ``t`` (encoded by :meth:`encode` when it leaves)."""
        self.outbox.append((t, msg))

    def encode(self, msg: Hello | Telemetry | Nak, t: float) -> bytes:
        """The wire frame of ``msg`` with the next rig seq, stamped ``t`` (in leaving order)."""
        frame = encode_frame(msg, self.tx_seq, int(round(t * 1e6)))
        self.tx_seq = (self.tx_seq + 1) & 0xFFFF
        return frame

    def telemetry(self, t: float) -> Telemetry:
        """The measurement at rig time ``t`` (the current state; the sensor is read now)."""
        self.sense()
        if self.last_rx is None:
            es, et, hold = 0, 0, NO_ECHO
        else:
            es, et, trx = self.last_rx
            hold = min(max(0, int(round((t - trx) * 1e6))), NO_ECHO - 1)
        return Telemetry(es, et, hold, self.state, self.faults, tuple(self.x.tolist()),
                         tuple(self.F.tolist()))  # type: ignore[arg-type]

    def nak(self, rejected_chunks: int, reason: str) -> Nak:
        """The NAK for ``rejected_chunks`` chunks rejected by a decoder so far (plus the
        implausible setpoints), the latest for ``reason`` (a key of :data:`REJECT_REASONS`)."""
        echo = self.last_rx[0] if self.last_rx is not None else 0
        return Nak((rejected_chunks + self.counts["implausible"]) & 0xFFFFFFFF, echo, REJECT_REASONS.get(reason, 0))

    def receive_bytes(self, data: bytes, t: float, reply: bool = True, wall_ns: int | None = None) -> list[Frame]:
        """Decode raw host bytes arrived at ``t``; handle each valid frame; count bad ones.

        Rejected chunks are answered with one NAK, queued before the answer to the next
        valid frame (or last). ``wall_ns`` is when the bytes were read
        (``time.monotonic_ns``), recorded in :attr:`arrivals`; now if omitted.
        """
        items = self.decoder.feed_all(data)
        frames = [x for x in items if isinstance(x, Frame)]
        self._count_bad(frames, t)
        rejected = self.decoder.bad - (len(items) - len(frames))
        reason = None
        for x in items:
            if not isinstance(x, Frame):
                rejected, reason = rejected + 1, rejection_kind(x)
                continue
            if reason is not None:
                self.send(self.nak(rejected, reason), t)
                reason = None
            self.handle(x, t, reply=reply, wall_ns=wall_ns)
        if reason is not None:
            self.send(self.nak(rejected, reason), t)
        return frames

    def _count_bad(self, frames: list[Frame], t: float) -> None:
        bad = self.decoder.bad - self._bad_seen
        self._bad_seen = self.decoder.bad
        if self.decoder.counts.get("version", 0) and bad and self.state == RigState.IDLE:
            self._fault(Fault.VERSION)
        self._bad_run = 0 if frames else self._bad_run + bad
        if self._bad_run >= self.bad_frames_max and self.state not in (RigState.FAULT, RigState.ESTOP, RigState.IDLE):
            self.counts["bad_run_faults"] += 1
            self._fault(Fault.BAD_FRAMES)

    def count_bad(self, n: int, t: float) -> None:
        """Account for ``n`` bad frames seen by an outside decoder (lockstep)."""
        self._bad_run += n
        if self._bad_run >= self.bad_frames_max and self.state not in (RigState.FAULT, RigState.ESTOP, RigState.IDLE):
            self.counts["bad_run_faults"] += 1
            self._fault(Fault.BAD_FRAMES)

    def _fault(self, bits: Fault, t: float | None = None) -> None:
        t = self.t if t is None else t
        since = t - self.last_rx[2] if self.last_rx is not None else float("nan")
        self.fault_log.append((t, int(bits), since))
        self.faults |= bits
        self.state = transition(self.state, "fault")

    def handle(self, frame: Frame, t: float, reply: bool = True, wall_ns: int | None = None) -> None:
        """Act on one valid host frame received at rig time ``t``.

        Stale or duplicate frames (reordered) are dropped unapplied; every other frame
        feeds the watchdog. Setpoints are applied only in ENGAGED, only if plausible (the
        step gate, else a NAK is queued) and only if within the stroke (else a LIMIT
        fault). With ``reply``, a telemetry frame (HELLO for ARM) is queued in the outbox.
        """
        self._bad_run = 0
        self.counts["frames"] += 1
        if self.rx_seq.check(frame.seq) in ("stale", "dup"):
            self.counts["stale"] += 1
            return
        self.arrivals.append((frame.seq, time.monotonic_ns() if wall_ns is None else wall_ns))
        self.last_rx = (frame.seq, frame.time_us, t)
        msg = frame.msg
        if isinstance(msg, Arm):
            if self.state == RigState.IDLE:
                if msg.fingerprint != self.fingerprint:
                    self._fault(Fault.FINGERPRINT)
                else:
                    self.watchdog_s = max(msg.watchdog_ms, 1) * 1e-3
                    self.state = transition(self.state, "arm")
            if reply:
                self.send(Hello(self.fingerprint, self.rig.n_axes, int(round(self.watchdog_s * 1e3))), t)
            return
        if isinstance(msg, EStop):
            self.state = transition(self.state, "estop")
            self.faults |= Fault.ESTOP
            self.v[:] = 0.0
            self.a[:] = 0.0
        elif isinstance(msg, Reset) and self.state in (RigState.FAULT, RigState.ESTOP):
            self.state = transition(self.state, "reset")
            self.faults = Fault.NONE
        elif isinstance(msg, Engage) and self.state == RigState.ARMED:
            self.state = transition(self.state, "engage")
            self.target = self.x.copy()
            self.target_prev = self.x.copy()
            self._setpoint_t = None
        elif isinstance(msg, Park) and self.state == RigState.ENGAGED:
            self.state = transition(self.state, "park")
        elif isinstance(msg, (SetpointAxes, SetpointPose)):
            self._setpoint(frame.seq, msg, t)
        if reply:
            self.send(self.telemetry(t), t)

    def _setpoint(self, seq: int, msg: SetpointAxes | SetpointPose, t: float) -> None:
        if self.state != RigState.ENGAGED:
            self.counts["refused"] += 1
            return
        if isinstance(msg, SetpointPose):
            axes = self.rig.inverse(pose(quat_to_rotation(np.asarray(msg.quat_wxyz) / np.linalg.norm(msg.quat_wxyz)),
                                         msg.p_RoPo_R))
        else:
            axes = np.asarray(msg.values, dtype=np.float64)
        if axes.shape == self.x.shape and not self.plausible(axes):
            self.counts["implausible"] += 1
            self.send(self.nak(self.decoder.bad, "step"), t)
            return
        if axes.shape != self.x.shape or self.limits.violations(axes):
            self.counts["refused"] += 1
            self._fault(Fault.LIMIT)
            return
        # interpolation from where the axis is headed now to the new setpoint, over the
        # setpoint period (as servo drives' interpolated position mode, one period late)
        s = min(1.0, max(0.0, (t - self.target_t) / self.target_T))
        a0, a1 = self.target_prev.tolist(), self.target.tolist()
        self.target_prev = np.array([p + s * (q - p) for p, q in zip(a0, a1, strict=True)])
        if self._setpoint_t is not None and t > self._setpoint_t:
            self.target_T = min(t - self._setpoint_t, 0.1)
        self.target = axes
        self.target_t = self._setpoint_t = t
        self.counts["applied"] += 1
        self.applied.append((seq, tuple(axes.tolist())))

    def plausible(self, axes: Array) -> bool:
        """The step gate: whether no axis of a setpoint lies farther from the current setpoint
        than the actuators' speed limit covers within the watchdog (plus 1e-6 for float32).

        A host streams setpoints rate-limited to its soft limits, inside these, at least once
        per watchdog; a setpoint outside the gate is a corrupted frame that passed the CRC."""
        reach = (self.limits.v_max * self.watchdog_s + 1e-6).tolist()
        return all(abs(a - b) <= r for a, b, r in zip(axes.tolist(), self.target.tolist(), reach, strict=True))

    # ------------------------------------------------------------------ physics
    def advance(self, t: float) -> None:
        """Step actuators, watchdog and sensor from the current time to ``t`` [s]."""
        while self.t + self.dt <= t + 1e-12:
            self._step(self.t + self.dt)

    def _step(self, t: float) -> None:
        dt = self.dt
        if self.state == RigState.ENGAGED and self.last_rx is not None and t - self.last_rx[2] > self.watchdog_s:
            self._fault(Fault.WATCHDOG, t)  # (parking needs no host: it finishes on its own)
        if self.state == RigState.ENGAGED:
            if self.bandwidth > 0:
                w = 2 * np.pi * self.bandwidth
                a = np.clip(w * w * (self.target - self.x) - 2 * w * self.v, -self.limits.a_max, self.limits.a_max)
                v = np.clip(self.v + a * dt, -self.limits.v_max, self.limits.v_max)
                self.x = np.clip(self.x + 0.5 * (self.v + v) * dt, self.limits.lo, self.limits.hi)
                self.a, self.v = (v - self.v) / dt, v
            else:  # follows the setpoints, linearly interpolated one setpoint period late
                s = min(1.0, max(0.0, (t - self.target_t) / self.target_T))
                # plain floats on the six axes (numpy's per-call cost exceeded the arithmetic); the
                # same elementwise operations as on arrays, so the same numbers
                a0, a1, T = self.target_prev.tolist(), self.target.tolist(), self.target_T
                target = [p + s * (q - p) for p, q in zip(a0, a1, strict=True)]
                v_seg = [(q - p) / T for p, q in zip(a0, a1, strict=True)] if s < 1.0 else [0.0] * len(a0)
                x, v, a, _ = rate_limit_rows(target, self.x.tolist(), self.v.tolist(), self.limits, dt, v_seg)
                self.x, self.v, self.a = np.array(x), np.array(v), np.array(a)
        elif self.state in (RigState.PARKING, RigState.FAULT):
            self.x, self.v, self.a = ramp_step(self.x, self.v, self.a, self.neutral_axes, self.limits, dt)
            if self.state == RigState.PARKING and np.all(np.abs(self.x - self.neutral_axes) < 1e-6) \
                    and np.all(np.abs(self.v) < 1e-6):
                self.state = transition(self.state, "parked")
        else:  # IDLE, ARMED: hold; ESTOP: brakes on
            self.v[:] = 0.0
            self.a[:] = 0.0
        self.t = t

    @property
    def at_rest(self) -> bool:
        """True unless the actuators are moving or the rig is engaged (it may move any time)."""
        if self.state in (RigState.ENGAGED, RigState.PARKING) or np.any(np.abs(self.v) > 1e-6):
            return False
        return self.state != RigState.FAULT or bool(np.all(np.abs(self.x - self.neutral_axes) < 1e-6))

    def sense(self) -> None:
        """Read the sensors: platform pose by forward kinematics (warm-started from the last
        reading), its twist from the leg rates, and the contact wrench.

        The contact is a spring–damper on the prescribed platform motion (no state of its
        own), so reading it only when telemetry is made loses nothing.
        """
        x = self.x.tolist()
        if x == self._sensed_x and not any(self.v.tolist()):
            return  # unchanged and at rest
        self._sensed_x = x
        if isinstance(self.rig, StewartRig):
            try:
                q, p, _, V = self.rig.newton(self.x, self.q, self.p, self.v)  # and V from the leg rates
            except NoSolutionError:
                self._fault(Fault.LIMIT)
                return
            self.V = np.zeros(6) if V is None else V
        else:
            X, _ = self.rig.forward(self.x)
            q, p = rotation_to_quat(X[:3, :3]), X[:3, 3]
            self.V = np.zeros(6)
        R = quat_to_rotation(q)
        self.q, self.p = q, p
        self.F = self.contact.wrench(R, p, self.V)


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
    em = cfg.emulator
    rng = np.random.default_rng(int(em["seed"]))
    return (Channel(float(em["delay"]), float(em["drop"]), float(em["bit_error"]), rng, baud=baud),
            Channel(float(em["delay"]), baud=baud))


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
    """

    def __init__(self, cfg: HilConfig) -> None:
        self.core = RigCore(cfg)
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
    """An in-process port (read/write/close/timeout) in front of a :class:`LockstepRig`."""

    def __init__(self, rig: LockstepRig) -> None:
        self.rig = rig
        self.timeout: float | None = 0.0
        self._rx = bytearray()

    def write(self, data: bytes) -> int:
        self._rx += self.rig.exchange(bytes(data))
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


def serve(port, cfg: HilConfig, *, lockstep: bool = False, stop: threading.Event | None = None,
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
    directions (:class:`Channel`). Lockstep: see :class:`LockstepRig`.

    Returns the core (its counters and applied setpoints) when done.
    """
    stop = stop or threading.Event()
    t0 = time.monotonic()
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
    up, down = _channels(cfg, baud)
    port.write(READY)
    last_tx = 0.0
    # replies at most at 500 Hz and within half the line (a real rig answers at its own rate)
    reply_hz = 500.0 if baud <= 0 else min(500.0, 0.5 * baud / (down.bits * wire_size(TELEMETRY6_RAW)))
    last_reply = -1.0
    gone_at: float | None = None  # when the host went away: the rig parks on its own, then we stop
    while not stop.is_set():
        now = time.monotonic() - t0
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
        core.receive_bytes(up.pop(now), now, wall_ns=time.monotonic_ns())
        if not core.outbox and now - last_tx > 1.0 / telemetry_hz:
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

    def __enter__(self) -> "EmulatorProcess":
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
    if cfg.emulator["rt_priority"]:
        args += ["--rt-priority", str(cfg.emulator["rt_priority"])]
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
        port = FdPort(master)
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
