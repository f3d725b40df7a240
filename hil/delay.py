"""Delay measurement and compensation on the HIL loop, and impact restitution.

- :class:`DelayEstimator`: round-trip delay from the host time the rig echoes in
  telemetry (``rtt = now − echo_time − hold``); one-way = rtt / 2 (symmetric line).
- :func:`predict_pose`: the command advanced by the measured delay at constant twist.
- :class:`PassivityController`: a time-domain passivity observer on the contact port
  with a passivity controller that adds damping when the port would create energy
  (Hannaford & Ryu 2002), generalised to a restitution budget.
- :class:`ImpactMonitor`: the restitution of every rig impact (separation over
  approach normal speed).
- :class:`ContactGate`: contact or not from the sensed force's magnitude, with hysteresis,
  its thresholds above the noise floor measured while taring (:func:`noise_floor`).

Pure: no I/O, no clock (time stamps are arguments).

References
----------
Hannaford, B. and Ryu, J.-H., "Time-domain passivity control of haptic interfaces",
IEEE Trans. Robotics and Automation 18(1), 2002: passivity observer eq. (6)
``E_obs(n) = ΔT Σ f(k) v(k)``, passivity controller eqs. (8)–(10): when the observed
energy shows the port generating energy, a series/parallel damper ``α(n) =
−E_obs(n) / (ΔT v(n)²)`` dissipates exactly the excess.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections import deque
from dataclasses import dataclass, field
from typing import cast

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dynamics.spatial import as_vector, rotation_rows
from errors import ConfigError

__all__ = ["DelayEstimator", "predict_pose", "PassivityController", "Impact", "ImpactMonitor", "restitution",
           "ContactGate", "noise_floor"]

Array = NDArray[np.float64]


@dataclass
class DelayEstimator:
    """Online round-trip and one-way delay from echoed host time stamps.

    Attributes
    ----------
    window : int
        Samples kept for the percentiles.
    median_of : int
        The estimate is the median of this many latest samples (robust to one late frame).
    """

    window: int = 1000
    median_of: int = 15
    samples_us: deque = field(init=False)
    _sorted: list = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.window < 1 or not 1 <= self.median_of <= self.window:
            raise ConfigError(f"delay: window {self.window} and median_of {self.median_of} must satisfy "
                              "1 <= median_of <= window")
        self.samples_us = deque(maxlen=self.window)
        self._sorted = []  # the window's samples in order, kept by bisection (percentiles every step)

    def update(self, now_us: int, echo_time_us: int, hold_us: int = 0) -> float:
        """Add one telemetry sample; returns its round-trip delay [s] (nan, not kept, if negative).

        ``now_us`` and ``echo_time_us`` are u32 host times (modular); ``hold_us`` the
        rig's holding time between receipt of the echoed frame and the reply.
        """
        rtt = ((int(now_us) - int(echo_time_us)) & 0xFFFFFFFF) - int(hold_us)
        if rtt < 0:  # inconsistent stamps (a rig clock running fast): not a delay
            return math.nan
        if len(self.samples_us) == self.window:
            del self._sorted[bisect.bisect_left(self._sorted, self.samples_us[0])]
        self.samples_us.append(rtt)
        bisect.insort(self._sorted, rtt)
        return rtt * 1e-6

    def clear(self) -> None:
        """Forget every sample."""
        self.samples_us.clear()
        self._sorted.clear()

    @property
    def rtt_s(self) -> float:
        """Current round-trip estimate [s] (median of the latest ``median_of``); nan if none."""
        if not self.samples_us:
            return math.nan
        for _ in range(100):
            try:
                recent = sorted(itertools.islice(reversed(self.samples_us), self.median_of))
                break
            except RuntimeError:  # appended to meanwhile by the link's reader thread (realtime): read again
                continue
        else:
            return math.nan
        n = len(recent)
        mid = 0.5 * (recent[(n - 1) // 2] + recent[n // 2])
        return mid * 1e-6

    @property
    def one_way_s(self) -> float:
        """One-way delay estimate [s]: half the round trip."""
        return 0.5 * self.rtt_s

    def percentile_s(self, q: float) -> float:
        """Percentile ``q`` (0…100) of the round-trip samples in the window [s]; nan if none.

        Linear interpolation between order statistics (numpy's default method).
        """
        s = self._sorted
        if not s:
            return math.nan
        x = q / 100.0 * (len(s) - 1)
        i = min(int(x), len(s) - 1)
        j = min(i + 1, len(s) - 1)
        return (s[i] + (x - i) * (s[j] - s[i])) * 1e-6


def predict_pose(X_LB: ArrayLike, V_LB_L: ArrayLike, horizon_s: float) -> Array:
    """Pose ``X_LB`` advanced by ``horizon_s`` at constant relative twist.

    Parameters
    ----------
    X_LB : array_like, shape (4, 4)
        Pose of B in L.
    V_LB_L : array_like, shape (6,)
        [ω; v]: angular velocity of B in L and velocity of Bo in L, both expressed in L.
        [rad/s, m/s]
    horizon_s : float
        Prediction horizon [s] (the measured delay; ≤ 0 or nan returns ``X_LB``).

    Returns
    -------
    ndarray, shape (4, 4)
    """
    X = np.asarray(X_LB, dtype=np.float64)
    V = as_vector(V_LB_L, 6, "V_LB_L")
    if not horizon_s > 0:
        return X.copy()
    Vt = V * horizon_s
    wx, wy, wz = Vt[:3].tolist()
    out = X.copy()
    th = math.sqrt(wx * wx + wy * wy + wz * wz)
    if th > 0.0:  # R turned by exp([ω τ]×) in L (the rate is constant in L): the unit quaternion's rotation
        s = math.sin(0.5 * th) / th
        E = np.array(rotation_rows(math.cos(0.5 * th), s * wx, s * wy, s * wz)).reshape(3, 3)
        out[:3, :3] = E @ X[:3, :3]
    out[3, :] = (0.0, 0.0, 0.0, 1.0)
    out[:3, 3] += Vt[3:]
    return out


@dataclass
class PassivityController:
    """Passivity observer and controller on one 6-DOF contact port.

    The port is the simulated body's side: ``F`` is the wrench the rig (environment)
    applies on the body, ``V`` the body's twist at the same point, same frame, so
    ``F·V`` is the power flowing *into* the simulation. A passive environment with
    restitution at most ``e_max`` can give back at most ``e_max²`` of the energy it
    absorbed:

        E_net(n) ≤ −(1 − e_max²) · E_abs(n)

    with ``E_net`` the net energy into the body and ``E_abs`` the energy the body gave
    to the port. For ``e_max = 1`` this is Hannaford & Ryu's condition ``E_obs ≥ 0``
    (their sign: energy into the environment). When a step would break it, a damper
    ``F ← F − α W V`` removes exactly the excess (H&R eqs. 8–10), with ``W =
    diag(ℓ², ℓ², ℓ², 1, 1, 1)`` making the angular and linear parts commensurate.

    The damper is limited to cancelling the power of the step (``F·V`` → 0, the force
    is scaled back, never reversed): an unlimited α (H&R eq. 10) with a sampled body
    of unknown mass can exceed ``m/ΔT`` and diverge. As generated energy is possible
    only while ``F·V > 0``, removing it then keeps the budget; an excess left over
    carries to the next steps.

    Timing: the wrench returned by the call at step n acts on the body over step
    ``n + lag`` (``lag = 0``: over the coming step, as when the caller integrates the
    body itself; ``lag = 1``: one step later, as between two lockstep services, where
    the body steps from ``t + h`` with the bridge's output stamped ``t + h``). The energy
    of each step is booked with the trapezoid ``F·(V(n−1) + V(n))/2 ΔT`` of the wrench
    that acted over it, once ``V(n)`` is known — exact for a body integrated with
    constant force over the step. The new wrench and those emitted but not yet acting
    are bounded with the twist extrapolated linearly to the middle of their step (so
    that a step in which the velocity reverses is not mistaken for an absorbing one).

    Attributes
    ----------
    dt : float
        Step [s].
    e_max : float
        Restitution budget, 0 ≤ e_max ≤ 1.
    length : float
        ℓ, the characteristic length weighting rotation against translation [m].
    enabled : bool
        If False the observer still runs and reports, the controller adds no damping.
    lag : int
        Steps between emitting a wrench and its acting on the body (see above).
    """

    dt: float
    e_max: float = 1.0
    length: float = 1.0
    enabled: bool = True
    lag: int = 0
    e_net: float = 0.0
    e_abs: float = 0.0
    e_dissipated: float = 0.0
    alpha: float = 0.0
    _V_prev: Array | None = field(default=None, repr=False)
    _emitted: deque = field(default_factory=deque, repr=False)
    _live: int = field(default=0, repr=False)  # non-zero wrenches in _emitted
    _w: tuple = field(default=(math.nan, None), repr=False)  # (ℓ, the weights W of that ℓ)

    def __post_init__(self) -> None:
        if not self.dt > 0 or not 0.0 <= self.e_max <= 1.0 or not self.length > 0 or self.lag not in (0, 1, 2):
            raise ConfigError(f"passivity: dt {self.dt}, e_max {self.e_max} (0..1), length {self.length} and "
                              f"lag {self.lag} (0..2) out of range")

    def _book(self, p0: float, p1: float) -> None:
        """Book a step whose power went linearly from p0 to p1 (constant F, linear V)."""
        self.e_net += 0.5 * (p0 + p1) * self.dt
        if p0 < 0.0 and p1 < 0.0:
            self.e_abs -= 0.5 * (p0 + p1) * self.dt
        elif p0 * p1 < 0.0:  # the power changed sign: only the negative triangle was absorbed
            neg = p0 if p0 < 0.0 else p1
            self.e_abs += 0.5 * neg * neg / abs(p1 - p0) * self.dt

    def step(self, F: ArrayLike, V: ArrayLike) -> Array:
        """Observe one step and return the wrench to apply (damped if needed).

        Parameters
        ----------
        F : array_like, shape (6,)
            Wrench on the body [τ; f] from the rig. [N·m, N]
        V : array_like, shape (6,)
            The body's twist [ω; v] now, same point and frame. [rad/s, m/s]

        Returns
        -------
        ndarray, shape (6,)
            The wrench to apply over the coming step.
        """
        F = as_vector(F, 6, "F")
        V = as_vector(V, 6, "V")
        if not self._live and not any(F.tolist()):
            # no wrench, none emitted: every power below is zero, nothing to book or damp (the
            # bridge's usual step while the rig's reading is not valid)
            if self._V_prev is not None and len(self._emitted) > self.lag:
                self._emitted.popleft()
            self.alpha = 0.0
            self._emitted.append(F)
            self._V_prev = V
            return F
        dV = np.zeros(6)
        if self._V_prev is not None:
            dV = V - self._V_prev
            if len(self._emitted) > self.lag:  # the wrench that acted over the step just ended
                Fa = self._emitted.popleft()
                self._live -= any(Fa.tolist())
                self._book(float(Fa @ self._V_prev), float(Fa @ V))
        # wrenches emitted but not yet acting, each over a later step: their likely energy
        net, absorbed = self.e_net, self.e_abs
        k = len(self._emitted) - self.lag  # step offset of the oldest pending one (≤ 0: acting now)
        for Fp in self._emitted:
            p = float(Fp @ (V + (k + 0.5) * dV)) * self.dt
            net += p
            absorbed += max(-p, 0.0)
            k += 1
        V_mid = V + (self.lag + 0.5) * dV  # the twist in the middle of the step this wrench acts on
        power = float(F @ V_mid)
        excess = net + power * self.dt + (1.0 - self.e_max**2) * (absorbed + max(-power, 0.0) * self.dt)
        self.alpha = 0.0
        if self._w[0] != self.length:  # diag(ℓ², ℓ², ℓ², 1, 1, 1), made once per ℓ
            self._w = (self.length, np.array([self.length**2] * 3 + [1.0] * 3))
        w: Array = self._w[1]
        vwv = float(V_mid @ (w * V_mid))
        if self.enabled and excess > 0.0 and vwv > 1e-18 and power > 0.0:
            # at most cancel this step's power (F·V → 0): a larger α reverses the force and,
            # on a sampled body, can destabilise it; an unpaid excess carries to later steps
            self.alpha = min(excess / self.dt, power) / vwv
            F = F - self.alpha * w * V_mid
            self.e_dissipated += self.alpha * vwv * self.dt
        self._emitted.append(F)
        self._live += any(F.tolist())
        self._V_prev = V
        return F


@dataclass(frozen=True)
class Impact:
    """One rig impact.

    Attributes
    ----------
    t_start, t_end : float
        Contact start and end [s].
    v_approach, v_separation : float
        Normal speed toward the surface before, away from it after [m/s].
    restitution : float
        ``v_separation / v_approach`` [-].
    peak_force : float
        Largest contact force magnitude [N].
    """

    t_start: float
    t_end: float
    v_approach: float
    v_separation: float
    restitution: float
    peak_force: float


def restitution(v_approach: float, v_separation: float) -> float:
    """``v_separation / v_approach`` (Newton's coefficient); nan if the approach speed is 0."""
    return v_separation / v_approach if v_approach > 0 else math.nan


@dataclass
class ImpactMonitor:
    """Finds impacts in a stream of (time, contact wrench, body twist) and reports each one.

    Contact is on while the contact force exceeds ``threshold``. The normal is the
    direction of the peak contact force (it pushes the body away from the surface);
    approach speed is the body's speed into the surface at the last sample before
    contact, separation speed its speed away at the first sample after.

    Attributes
    ----------
    threshold : float
        Force magnitude that counts as contact [N].
    impacts : list of Impact
    """

    threshold: float = 1.0
    impacts: list[Impact] = field(default_factory=list)
    _prev_v: Array | None = None
    _start: tuple[float, Array] | None = None
    _peak: Array | None = None
    _peak_norm: float = 0.0  # |_peak|, kept with it

    def update(self, t: float, F: ArrayLike, V: ArrayLike, checked: bool = False) -> Impact | None:
        """Feed one sample; returns the impact that ended with it, else None.

        Parameters
        ----------
        t : float
            Time [s].
        F : array_like, shape (6,)
            Contact wrench on the body [τ; f]. [N·m, N]
        V : array_like, shape (6,)
            Body twist [ω; v]. [rad/s, m/s]
        checked : bool
            ``F`` and ``V`` are finite float arrays of shape (6,) already (the caller checked them,
            :func:`dynamics.spatial.as_vector`): not checked again.

        Raises
        ------
        ShapeError
            If ``F`` or ``V`` (not ``checked``) is not six finite numbers.
        """
        if checked:
            f, v = cast(Array, F)[3:], cast(Array, V)[3:]
        else:
            f = as_vector(F, 6, "F")[3:]
            v = as_vector(V, 6, "V")[3:]
        if self._start is None and self.threshold >= 0.0 and not any(f.tolist()):  # no contact, none going on
            self._prev_v = v.copy()
            return None
        done = None
        f_norm = math.sqrt(f.dot(f))  # |f| (np.linalg.norm's arithmetic; once per sample: the peak's is kept with it)
        touching = f_norm > self.threshold
        if touching and self._start is None:
            self._start = (t, self._prev_v if self._prev_v is not None else v)
            self._peak, self._peak_norm = f.copy(), f_norm
        elif touching and self._peak is not None and f_norm > self._peak_norm:
            self._peak, self._peak_norm = f.copy(), f_norm
        elif not touching and self._start is not None and self._peak is not None:
            t0, v0 = self._start
            n = self._peak / self._peak_norm
            v_app, v_sep = float(-v0 @ n), float(v @ n)
            done = Impact(t0, t, v_app, v_sep, restitution(v_app, v_sep), self._peak_norm)
            self.impacts.append(done)
            self._start = self._peak = None
        self._prev_v = v.copy()
        return done


def noise_floor(samples: list[list[float]], gain: float) -> float:
    """RMS magnitude of the force noise left after the bridge's filter, from readings at rest. [N]

    ``samples``: force readings ``[fx, fy, fz]`` (or wrenches ``[τ; f]``: the last three taken) at the
    bridge's rate, out of contact (the tare); ``gain``: the first-order filter's gain per step
    (1: none). Each component's deviation from its mean is run through the filter and the RMS of
    the filtered vector's magnitude, ``sqrt(Σ σ_i²)``, is returned (the filter's first ``1 / gain``
    steps, its settling, left out). 0 with fewer than three samples.
    """
    rows = [r[-3:] for r in samples]
    n = len(rows)
    if n < 3:
        return 0.0
    mean = [sum(r[i] for r in rows) / n for i in range(3)]
    y = [0.0, 0.0, 0.0]
    skip = min(n - 2, int(math.ceil(1.0 / gain)))
    acc, k = 0.0, 0
    for j, r in enumerate(rows):
        y = [y[i] + gain * (r[i] - mean[i] - y[i]) for i in range(3)]
        if j >= skip:
            acc += y[0] * y[0] + y[1] * y[1] + y[2] * y[2]
            k += 1
    return math.sqrt(acc / k)


@dataclass
class ContactGate:
    """Contact from the magnitude of a sensed force, with hysteresis.

    A contact starts when the force exceeds ``on`` and ends when it falls below ``off``
    (``off ≤ on``): a noisy reading hovering about one threshold does not make a train of
    touches, and a contact is not cut short while its force is still above the noise. The
    rig bridge sets ``on`` above the noise floor measured while taring (:meth:`thresholds`).

    Attributes
    ----------
    on, off : float
        Thresholds [N]; ``on = 0``: any non-zero force is contact.
    touching : bool
    """

    on: float = 0.0
    off: float = 0.0
    touching: bool = False

    def __post_init__(self) -> None:
        if not 0.0 <= self.off <= self.on:
            raise ConfigError(f"contact gate: thresholds on {self.on} and off {self.off} must satisfy 0 <= off <= on")

    @staticmethod
    def thresholds(deadband: float, noise: float, release: float, k_sigma: float = 5.0) -> tuple[float, float]:
        """``(on, off)``: ``on = max(deadband, k_sigma × noise)`` and ``off = release × on``. [N]

        Gaussian noise of RMS magnitude ``noise`` (:func:`noise_floor`) exceeds 5 times it with a
        probability below 6e-7 per sample: 5.7e-7 when one component carries it all (P(|N| > 5)),
        under 1e-15 when three equal ones share it (P(χ²₃ > 75)).
        """
        on = max(float(deadband), k_sigma * float(noise))
        return on, float(release) * on

    def update(self, f_norm: float) -> bool:
        """Feed one force magnitude [N]; returns whether it is contact."""
        self.touching = f_norm > (self.off if self.touching else self.on)
        return self.touching
