"""The rig emulator's rig: firmware and physics of a Stewart platform (or servo rig), stepped by explicit times.

No I/O and no clock of its own: :mod:`hil.emulator` runs it at the far end of a link (the
realtime loop over a port, the lockstep port, the emulator process).

- :class:`RigCore` — the state machine of :mod:`hil.safety` with its watchdog,
  N-bad-frames fault, arming handshake (fingerprint), latched e-stop; actuators with
  stroke, speed and acceleration limits (ideal within the limits, or a critically damped
  servo of given bandwidth); the ramp to neutral on a fault; the step gate on setpoints;
  a force/torque sensor on a contact spring–damper between the platform and a fixed plane
  (the other docking half), or between the docking mock-ups.
- :class:`ContactPlane` — that contact: spring–dampers between probe points on the
  platform and the plane.
- :class:`ContactGuides` — the docking interface's mock-ups: the trunnions on the platform
  against the latch guides' walls on the fixed half, with the law and geometry of
  ``[contact]`` (:func:`dynamics.contact.point_plane_rows`, the contact service's own law).
- :class:`ForceTorqueSensor` — a 6-axis F/T sensor: its own sample rate, a first-order
  low-pass, noise, bias and drift, range; it reads the contact on the mock-up plus the
  mock-up's weight and inertial load (:func:`mockup_load`).
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from dynamics import contact as dc
from dynamics.spatial import cross3, quat_to_rotation, rotation_to_quat
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


@dataclass(frozen=True)
class ContactGuides:
    """The docking interface's mock-ups: trunnions on the platform, latch guide walls on the fixed half.

    Each trunnion point (in P) is tested against each of its guide's walls (in R) with
    :func:`dynamics.contact.point_plane_rows`: Hunt–Crossley normal force and regularised Coulomb
    friction, bounded by the wall's footprint radius and catch depth — the contact service's law
    (``[contact]`` k, exponent, alpha, mu_s, mu_k, v_stick; ``surfaces``; ``[payload] points_B``), so
    that the rig's contact is the simulated one (:func:`hil.config.hil_table` fills ``[hil.guides]``
    from those tables). The fixed half is at rest in R.

    Attributes
    ----------
    law : dynamics.contact.ContactLaw
    points_P : tuple of (x, y, z)
        Trunnion points in P [m].
    walls : tuple of (point, (sx, sy, sz), (nx, ny, nz), radius, depth)
        Per wall: the trunnion's index, a point of the wall and its unit normal (out of the fixed
        half, toward the platform) in R, footprint radius and catch depth [m].
    """

    law: dc.ContactLaw
    points_P: tuple[tuple[float, float, float], ...]
    walls: tuple[tuple[int, tuple[float, float, float], tuple[float, float, float], float, float], ...]

    def wrench(self, R_RP: Array, p_RoPo_R: Array, V_RP_R: Array) -> Array:
        """Contact wrench on the platform at Po, expressed in P, [τ; f] (6,), as :meth:`ContactPlane.wrench`."""
        R = R_RP.tolist()
        px, py, pz = p_RoPo_R.tolist()
        wx, wy, wz, vx, vy, vz = V_RP_R.tolist()
        tx = ty = tz = fx = fy = fz = 0.0
        for i, (sx, sy, sz), (nx, ny, nz), radius, depth in self.walls:
            bx, by, bz = self.points_P[i]
            rx = R[0][0] * bx + R[0][1] * by + R[0][2] * bz  # Po → trunnion, in R
            ry = R[1][0] * bx + R[1][1] * by + R[1][2] * bz
            rz = R[2][0] * bx + R[2][1] * by + R[2][2] * bz
            ux, uy, uz = vx + wy * rz - wz * ry, vy + wz * rx - wx * rz, vz + wx * ry - wy * rx
            on, _, _, gx, gy, gz, _ = dc.point_plane_rows(px + rx - sx, py + ry - sy, pz + rz - sz, ux, uy, uz,
                                                          nx, ny, nz, self.law, radius, depth)
            if on:
                fx, fy, fz = fx + gx, fy + gy, fz + gz
                tx, ty, tz = tx + ry * gz - rz * gy, ty + rz * gx - rx * gz, tz + rx * gy - ry * gx
        if not (fx or fy or fz):
            return np.zeros(6)
        return np.concatenate([R_RP.T @ np.array([tx, ty, tz]), R_RP.T @ np.array([fx, fy, fz])])


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


def mockup_load(R_RP: Array, a_RPo_R: Array, w_RP_R: Array, wdot_RP_R: Array, mass: float, com_P: Array,
                inertia_P: Array, gravity: float) -> Array:
    """What the mock-up's own mass puts on the F/T sensor: its weight less its inertial load.

    The sensor between the platform (at Po) and the mock-up reads the wrench the mock-up
    exerts on it, ``contact + weight − d/dt(momentum)``; this is the part that is not contact
    (Newton–Euler about the mock-up's CoM C, moved to Po).

    Parameters
    ----------
    R_RP : ndarray, shape (3, 3)
    a_RPo_R, w_RP_R, wdot_RP_R : ndarray, shape (3,)
        The platform's acceleration at Po, angular velocity and acceleration, in R. [m/s², rad/s, rad/s²]
    mass : float
        [kg]
    com_P : ndarray, shape (3,)
        C from Po, in P. [m]
    inertia_P : ndarray, shape (3,)
        Principal moments about C along P's axes. [kg·m²]
    gravity : float
        Along −z of R. [m/s²]

    Returns
    -------
    ndarray, shape (6,)
        [τ; f] at Po, in P. [N·m, N]
    """
    if mass == 0.0:
        return np.zeros(6)
    w_P, wd_P = R_RP.T @ w_RP_R, R_RP.T @ wdot_RP_R
    a_C_P = R_RP.T @ a_RPo_R + cross3(wd_P, com_P) + cross3(w_P, cross3(w_P, com_P))  # (numpy's cross: ~25 µs)
    f = mass * (R_RP.T @ np.array([0.0, 0.0, -gravity]) - a_C_P)
    tau = cross3(com_P, f) - (inertia_P * wd_P + cross3(w_P, inertia_P * w_P))
    return np.concatenate([tau, f])


class ForceTorqueSensor:
    """A 6-axis force/torque sensor: sampled at its own rate, low-pass filtered, with noise, bias, drift and range.

    Each sample (every ``1 / rate`` s of rig time) passes the wrench through a first-order
    low-pass of cutoff ``cutoff`` (discretised exactly for the sample period), adds the bias
    ``bias + drift · t`` and white Gaussian noise (``noise``: force and torque standard
    deviations), and saturates each component at the range. The reading is held between
    samples. The generator is seeded (``[hil.emulator] seed``): runs are repeatable.

    Parameters
    ----------
    rate, cutoff : float
        [Hz] (cutoff 0: no filter).
    noise, full_range : (float, float)
        Force [N] and torque [N·m] (range 0: none).
    bias, drift : array_like, shape (6,)
        [τ; f] [N·m, N] and per second.
    rng : numpy.random.Generator
    """

    def __init__(self, rate: float, cutoff: float, noise: tuple[float, float], bias: Array, drift: Array,
                 full_range: tuple[float, float], rng: np.random.Generator) -> None:
        self.period = 1.0 / rate
        self.gain = self._gain(cutoff, self.period)
        f_noise, t_noise = noise
        self.sigma = np.array([t_noise] * 3 + [f_noise] * 3)
        self.bias = np.asarray(bias, dtype=np.float64)
        self.drift = np.asarray(drift, dtype=np.float64)
        f_max, t_max = full_range
        self.limit = np.array([t_max or np.inf] * 3 + [f_max or np.inf] * 3)
        self.rng = rng
        self._bias, self._drift = self.bias.tolist(), self.drift.tolist()
        self._sigma, self._limit = self.sigma.tolist(), self.limit.tolist()
        self.state: list[float] | None = None  # the filter's state
        self.reading = self.bias.copy()
        self.next_t = 0.0
        self.saturated = 0  # samples with a component at the range

    def sample(self, t: float, wrench: Array) -> None:
        """Take one sample of the true ``wrench`` [τ; f] at rig time ``t`` [s]."""
        # plain floats on the six components (numpy's per-call cost exceeded the arithmetic at 1 kHz): the
        # same elementwise operations, in the same order, as on arrays, so the same numbers
        w, g = wrench.tolist(), self.gain
        y = w if self.state is None else [s + g * (x - s) for s, x in zip(self.state, w, strict=True)]
        self.state = y
        out = [yi + b + d * t + sd * n for yi, b, d, sd, n in zip(y, self._bias, self._drift, self._sigma,
                                                                  self.rng.standard_normal(6).tolist(), strict=True)]
        clipped = [min(max(o, -lim), lim) for o, lim in zip(out, self._limit, strict=True)]
        self.saturated += int(clipped != out)
        self.reading = np.array(clipped)
        self.next_t = t + self.period

    @staticmethod
    def _gain(cutoff: float, period: float) -> float:
        """The first-order low-pass's gain per sample, exact for the sample period (cutoff 0: 1, no filter)."""
        return 1.0 - np.exp(-2.0 * np.pi * cutoff * period) if cutoff > 0 else 1.0

    @staticmethod
    def _lag(period: float, gain: float) -> float:
        tc = -period / np.log(1.0 - gain) if gain < 1.0 else 0.0
        return float(tc + 0.5 * period)

    @property
    def lag(self) -> float:
        """The sensor's delay at low frequency: its filter's time constant plus half a sample. [s]"""
        return self._lag(self.period, self.gain)

    @classmethod
    def lag_of(cls, rate: float, cutoff: float) -> float:
        """:attr:`lag` of a sensor sampling at ``rate`` with a low-pass at ``cutoff`` [Hz], without building one
        (rate 0: an ideal sensor, no lag). [s]"""
        if rate <= 0:
            return 0.0
        period = 1.0 / rate
        return cls._lag(period, cls._gain(cutoff, period))


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
