"""The rig's mock-ups and what senses them: the docking halves' contact on a rig, the mock-up's load, the F/T sensor.

Pure float kernels of a hardware-in-the-loop rig's physics (no I/O, no clock): the emulated rig
(:class:`hil.rig.RigCore`) steps them, and the hil bridge removes the mock-up's load from a sensed
wrench with :func:`mockup_load`.

- :class:`ContactPlane` — spring–dampers between probe points on the platform and a fixed plane
  (the other docking half);
- :class:`ContactGuides` — the docking interface's mock-ups: trunnions on the platform against the
  latch guides' walls on the fixed half, with the contact service's law
  (:func:`dynamics.contact.point_plane_rows`);
- :func:`mockup_load` — the mock-up's weight less its inertial load, as the F/T sensor reads it;
- :class:`ForceTorqueSensor` — a 6-axis F/T sensor: its own sample rate, a first-order low-pass,
  noise, bias and drift, range.

Frames: R rig base, P platform (:mod:`dynamics.stewart`); wrenches ``[τ; f]`` at Po in P.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from dynamics import contact as dc
from dynamics.spatial import cross3

__all__ = ["ContactGuides", "ContactPlane", "ForceTorqueSensor", "mockup_load"]

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
