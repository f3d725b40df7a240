"""The rig emulator's rig: firmware and physics of a Stewart platform (or servo rig), stepped by explicit times.

No I/O and no clock of its own: :mod:`hil.emulator` runs it at the far end of a link (the
realtime loop over a port, the lockstep port, the emulator process).

- :class:`RigCore` — the state machine of :mod:`hil.safety` with its watchdog,
  N-bad-frames fault, arming handshake (fingerprint), latched e-stop; actuators with
  stroke, speed and acceleration limits (ideal within the limits, or a critically damped
  servo of given bandwidth); the ramp to neutral on a fault; the step gate on setpoints;
  a force/torque sensor on a contact spring–damper between the platform and a fixed plane
  (the other docking half), or between the docking mock-ups.
- :func:`guides_of` — the docking interface's mock-ups of ``[hil.guides]`` on the rig.

The mock-ups' physics — the contact (:class:`dynamics.mockup.ContactPlane`,
:class:`dynamics.mockup.ContactGuides`), the mock-up's load (:func:`dynamics.mockup.mockup_load`)
and the F/T sensor (:class:`dynamics.mockup.ForceTorqueSensor`) — are pure float kernels in
:mod:`dynamics.mockup`; this module's names for them are that module's.
"""

from __future__ import annotations

import time
from collections import deque

import numpy as np
from numpy.typing import NDArray

from dynamics import contact as dc
from dynamics.mockup import ContactGuides, ContactPlane, ForceTorqueSensor, mockup_load
from dynamics.spatial import quat_to_rotation, rotation_to_quat
from dynamics.stewart import RigLimits, StewartRig, pose
from errors import NoSolutionError
from hil.config import HilConfig
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
)
from hil.safety import ramp_step, rate_limit_rows, transition

__all__ = ["ContactPlane", "ContactGuides", "ForceTorqueSensor", "LoopStalls", "RigCore", "mockup_load"]

Array = NDArray[np.float64]


def guides_of(cfg: HilConfig) -> ContactGuides:
    """The mock-ups of ``[hil.guides]`` on the rig: trunnions ``P = M B``, walls ``R = X_RP0 (M L)`` (the pose
    map's neutral and axis map; its scales are 1, :func:`hil.config.parse` checks it)."""
    g = cfg.table["guides"]
    M, X0 = cfg.pose_map.M, cfg.pose_map.X_RP0
    law = dc.ContactLaw(float(g["k"]), float(g["exponent"]), float(g["alpha"]), float(g["mu_s"]), float(g["mu_k"]),
                        float(g["v_stick"]))
    pts = tuple(tuple((M @ np.asarray(p, dtype=np.float64)).tolist()) for p in g["points"])
    walls = []
    for w in g["surfaces"]:
        n = M @ np.asarray(w["n_L"], dtype=np.float64)
        p_R = X0[:3, :3] @ (M @ np.asarray(w["p_LoSo_L"], dtype=np.float64)) + X0[:3, 3]
        walls.append((int(w["point"]), tuple(p_R.tolist()), tuple((X0[:3, :3] @ n / np.linalg.norm(n)).tolist()),
                      float(w.get("radius", np.inf)), float(w.get("depth", np.inf))))
    return ContactGuides(law, pts, tuple(walls))


class LoopStalls:
    """Pauses of the wall-clock loop that steps a rig core (the emulator's own scheduling, not the link).

    :meth:`record` is called once per loop iteration with the loop's clock [s]; an interval between two
    calls longer than :attr:`threshold_s` is a pause: counted, and the longest is kept with when it
    ended. A real rig's controller has no such pauses; an emulator sharing a host's cores has them,
    and a pause as long as the host's watchdog reads to the host as a silent rig.
    """

    threshold_s = 0.02

    def __init__(self) -> None:
        self.count = 0
        self.longest = 0.0  # s
        self.at = 0.0  # s on the loop's clock: the end of the longest pause
        self._prev: float | None = None

    def record(self, now: float) -> None:
        """One loop iteration at ``now`` [s]."""
        if self._prev is not None and (gap := now - self._prev) > self.threshold_s:
            self.count += 1
            if gap > self.longest:
                self.longest, self.at = gap, now
        self._prev = now

    def describe(self) -> str:
        """The pauses in words."""
        return (f"the emulated rig's loop did not run for {self.longest * 1e3:.0f} ms at {self.at:.2f} s "
                f"({self.count} pauses over {self.threshold_s * 1e3:.0f} ms)")

    def as_map(self) -> dict[str, float | int]:
        """``count``, ``longest_s``, ``at_s``."""
        return {"count": self.count, "longest_s": self.longest, "at_s": self.at}


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
        em = cfg.params.emulator
        self.rig = cfg.rig
        f = em.hard_limits  # the actuators' own limits lie outside the host's soft limits
        lim = cfg.limits
        self.limits = RigLimits(lim.lo, lim.hi, f * lim.v_max, f * lim.a_max, f * lim.j_max)
        self.fingerprint = cfg.fingerprint
        self.bad_frames_max = cfg.params.bad_frames_max
        self.dt = 1.0 / em.rate
        self.bandwidth = em.bandwidth
        rad = em.probe_radius
        probes = np.zeros((1, 3)) if rad == 0 else rad * np.array(
            [[np.cos(a), np.sin(a), 0.0] for a in np.radians([0.0, 120.0, 240.0])])
        self.contact: ContactPlane | ContactGuides = ContactPlane(
            np.asarray(em.plane_normal, dtype=np.float64), em.plane_offset, em.stiffness, em.damping, probes)
        if em.contact == "guides":
            self.contact = guides_of(cfg)
        mk = cfg.params.mockup
        self.mockup = (mk.mass, np.asarray(mk.com, dtype=np.float64), np.asarray(mk.inertia, dtype=np.float64),
                       mk.gravity)
        self.ft: ForceTorqueSensor | None = None
        if em.ft_rate > 0:
            self.ft = ForceTorqueSensor(em.ft_rate, em.ft_cutoff, (em.ft_noise[0], em.ft_noise[1]),
                                        np.asarray(em.ft_bias, dtype=np.float64),
                                        np.asarray(em.ft_drift, dtype=np.float64), (em.ft_range[0], em.ft_range[1]),
                                        np.random.default_rng([em.seed, 1]))
        self._ft_pose: tuple[Array, Array, Array, float] | None = None  # (q, p, V, t) of its last sample
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
        self.stalls = LoopStalls()  # the loop stepping this core on the wall clock (hil.emulator.serve)
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
                # the servo follows the setpoints interpolated over their period (the drives' interpolated
                # position mode, as below): on the raw staircase its acceleration would ripple at the setpoint
                # rate, w² × the step (0.2 m/s² at 10 Hz and 1.5 cm/s of a leg at 250 Hz), and a sensor read at
                # that rate would see a steady part of the ripple on the mock-up's mass as a force
                s = min(1.0, max(0.0, (t - self.target_t) / self.target_T))
                x_set = self.target_prev + s * (self.target - self.target_prev)
                w = 2 * np.pi * self.bandwidth
                a = np.clip(w * w * (x_set - self.x) - 2 * w * self.v, -self.limits.a_max, self.limits.a_max)
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
                x_rows, v_rows, a_rows, _ = rate_limit_rows(target, self.x.tolist(), self.v.tolist(), self.limits, dt,
                                                            v_seg)
                self.x, self.v, self.a = np.array(x_rows), np.array(v_rows), np.array(a_rows)
        elif self.state in (RigState.PARKING, RigState.FAULT):
            self.x, self.v, self.a = ramp_step(self.x, self.v, self.a, self.neutral_axes, self.limits, dt)
            if self.state == RigState.PARKING and np.all(np.abs(self.x - self.neutral_axes) < 1e-6) \
                    and np.all(np.abs(self.v) < 1e-6):
                self.state = transition(self.state, "parked")
        else:  # IDLE, ARMED: hold; ESTOP: brakes on
            self.v[:] = 0.0
            self.a[:] = 0.0
        self.t = t
        if self.ft is not None and t >= self.ft.next_t - 1e-12:
            self._sample_ft(t)

    def _sample_ft(self, t: float) -> None:
        """One sample of the F/T sensor: the platform's pose and twist (forward kinematics), its
        acceleration (the twist's change since the last sample), the contact on the mock-up plus the
        mock-up's weight and inertial load."""
        assert self.ft is not None
        if self._ft_pose is None:
            q, p, V, t0 = self.q, self.p, np.zeros(6), t - self.ft.period
        else:
            q, p, V, t0 = self._ft_pose
        try:
            if isinstance(self.rig, StewartRig):
                q1, p1, _, V1 = self.rig.newton(self.x, q, p, self.v)
                V1 = np.zeros(6) if V1 is None else V1
            else:
                X, _ = self.rig.forward(self.x)
                q1, p1, V1 = rotation_to_quat(X[:3, :3]), X[:3, 3], np.zeros(6)
        except NoSolutionError:
            self._fault(Fault.LIMIT)
            return
        R = quat_to_rotation(q1)
        dV = (V1 - V) / max(t - t0, 1e-9)
        m, c, inertia, g = self.mockup
        W = self.contact.wrench(R, p1, V1) + mockup_load(R, dV[3:], V1[:3], dV[:3], m, c, inertia, g)
        self.ft.sample(t, W)
        self._ft_pose = (q1, p1, V1, t)

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
        if self.ft is not None:  # the sensor's held reading; the pose as the ideal path below
            self.F = self.ft.reading
        if x == self._sensed_x and not any(self.v.tolist()):
            return  # unchanged and at rest
        self._sensed_x = x
        if self._ft_pose is not None and self._ft_pose[3] == self.t:  # the sensor sampled these legs and rates
            q, p, self.V = self._ft_pose[0], self._ft_pose[1], self._ft_pose[2]  # at this step: its kinematics
        elif isinstance(self.rig, StewartRig):
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
        if self.ft is None:
            self.F = self.contact.wrench(R, p, self.V)
