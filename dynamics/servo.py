"""Joint servo model of the SRMS: rate loop → current limit → motor torque through the gear.

One servo per joint, all quantities referred to the joint (output) side of the gearbox
unless named ``_motor``. Per joint::

    i      = sat(ki ∫(θ̇_c − ω) dt − kp ω, ±i_max)                 rate loop (I-P form), current limit
    τ_m    = N K_t i                                                motor torque through the gear
    J_r ω̇  = τ_m − τ_f(ω) − τ_L                                    J_r = N² J_motor (motor-side inertia)
    τ_f    = τ_c tanh(ω / ω_s) + b ω                                Coulomb (smoothed) + viscous friction
    θ̇_m    = ω

``ω`` is the output-side rate of the motor/gear train, ``θ_m`` its angle. The load
torque ``τ_L`` is what the train transmits to the arm joint: with the arm grappled
(massless arm, SVDS section 3 "active" flexibility) the joint is a spring and damper
between ``θ_m`` and the arm angle θ, ``τ_L = k (θ_m − θ) + c (ω − θ̇)`` with
``k = 1/γ_i^e`` (SVDS 3-7); with the arm free (no payload, massless links) ``τ_L = 0``
and the arm angle is ``θ_m``. The damper is integrated implicitly (semi-implicit Euler
otherwise), so a stiff structural damping does not limit the step.

Brakes (per joint): the servo is off (``i = 0``, integrator reset); the train is held
while ``|τ_L|`` is at most the slip torque, and slips against it beyond.

Values that are not published (gear ratios, motor constants and inertias, friction,
gains, slip torques) are **ASSUMED** (:func:`srms_servo_params`); the current limit is
chosen so that ``N K_t i_max`` equals the published joint torque limit
(``../shared/reference/README.md``). The integration is semi-implicit Euler with
``n_sub`` substeps per call.

No I/O, clock or globals.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dynamics import spatial as sp
from errors import ModelError

__all__ = ["ServoParams", "ServoState", "srms_servo_params", "servo_initial", "servo_step", "hold_stiffness",
           "ASSUMED_GEAR_RATIO", "ASSUMED_MOTOR_INERTIA", "ASSUMED_TORQUE_CONSTANT"]

Array = NDArray[np.float64]

#: Gear ratios, SVDS joint order. **ASSUMED** (commonly quoted SRMS values, not in our sources).
ASSUMED_GEAR_RATIO = np.array([1842.0, 1842.0, 1260.0, 739.0, 739.0, 739.0])
#: Motor rotor inertia, motor side. [kg·m²] **ASSUMED**.
ASSUMED_MOTOR_INERTIA = np.full(6, 1.0e-4)
#: Motor torque constant, motor side. [N·m/A] **ASSUMED**.
ASSUMED_TORQUE_CONSTANT = np.full(6, 0.1)


@dataclass(frozen=True)
class ServoParams:
    """Parameters of the six joint servos (arrays of shape (6,), SVDS joint order).

    Attributes
    ----------
    gear_ratio : N [-]
    torque_constant : K_t, motor side [N·m/A]
    current_limit : i_max [A]
    motor_inertia : J_motor, motor side [kg·m²]
    coulomb : τ_c, output side [N·m]
    viscous : b, output side [N·m·s/rad]
    kp : rate-loop proportional gain [A/(rad/s)]
    ki : rate-loop integral gain [A/rad]
    slip_torque : brake slip torque, output side [N·m]
    rate_limit : joint rate limit [rad/s]
    friction_rate : ω_s of the smoothed Coulomb law [rad/s] (scalar)
    """

    gear_ratio: Array
    torque_constant: Array
    current_limit: Array
    motor_inertia: Array
    coulomb: Array
    viscous: Array
    kp: Array
    ki: Array
    slip_torque: Array
    rate_limit: Array
    friction_rate: float = 1.0e-3
    reflected_inertia: Array = field(init=False)
    torque_limit: Array = field(init=False)

    def __post_init__(self) -> None:
        for name in ("gear_ratio", "torque_constant", "current_limit", "motor_inertia", "coulomb", "viscous",
                     "kp", "ki", "slip_torque", "rate_limit"):
            a = sp.as_vector(getattr(self, name), 6, name).copy()
            positive = name in ("gear_ratio", "torque_constant", "current_limit", "motor_inertia", "rate_limit")
            if np.any(a < 0.0) or (positive and np.any(a <= 0.0)):
                what = "positive" if positive else "non-negative"
                raise ModelError(f"servo.{name}: must be {what}, got {a.tolist()}")
            object.__setattr__(self, name, a)
        if not self.friction_rate > 0.0:
            raise ModelError(f"servo.friction_rate: must be positive, got {self.friction_rate!r}")
        object.__setattr__(self, "reflected_inertia", self.gear_ratio ** 2 * self.motor_inertia)
        object.__setattr__(self, "torque_limit", self.gear_ratio * self.torque_constant * self.current_limit)


@dataclass
class ServoState:
    """State of the six servos (arrays of shape (6,)).

    Attributes
    ----------
    theta_m : output-side angle of the motor/gear train [rad]
    omega : its rate [rad/s]
    integ : integral of the rate error [rad]
    current : motor current of the last substep [A]
    """

    theta_m: Array
    omega: Array
    integ: Array
    current: Array

    def copy(self) -> "ServoState":
        """A deep copy."""
        return ServoState(self.theta_m.copy(), self.omega.copy(), self.integ.copy(), self.current.copy())


def srms_servo_params(tau_max: ArrayLike, rate_limit: ArrayLike, *, bandwidth: float = 60.0,
                      gear_ratio: ArrayLike = ASSUMED_GEAR_RATIO,
                      motor_inertia: ArrayLike = ASSUMED_MOTOR_INERTIA,
                      torque_constant: ArrayLike = ASSUMED_TORQUE_CONSTANT,
                      coulomb_fraction: float = 0.02, viscous_fraction: float = 0.05,
                      slip_fraction: float = 1.2) -> ServoParams:
    """SRMS servo parameters: published torque and rate limits, everything else **ASSUMED**.

    The rate loop is an I-P controller (integral on the error, proportional on the
    measured rate) placed for a double closed-loop pole at ``-bandwidth``
    (``kp = 2 J_r ω_b / (N K_t)``, ``ki = J_r ω_b² / (N K_t)``): critically damped and
    without a closed-loop zero, so a rate step does not overshoot.

    Parameters
    ----------
    tau_max : array_like, shape (6,)
        Published joint torque limits. [N·m]
    rate_limit : array_like, shape (6,)
        Published joint rate limits. [rad/s]
    bandwidth : float
        Rate-loop bandwidth ω_b. [rad/s] (assumed; 60 rad/s makes the servos' holding
        stiffness, :func:`hold_stiffness`, a few times the joint stiffness, so that the
        loaded and unloaded first modes stay in the published bands)
    gear_ratio, motor_inertia, torque_constant : array_like, shape (6,)
        (assumed)
    coulomb_fraction : float
        Coulomb friction as a fraction of the torque limit (assumed).
    viscous_fraction : float
        Viscous friction torque at the rate limit as a fraction of the torque limit (assumed).
    slip_fraction : float
        Brake slip torque as a fraction of the torque limit (assumed).
    """
    tmax = sp.as_vector(tau_max, 6, "tau_max")
    rl = sp.as_vector(rate_limit, 6, "rate_limit")
    N = sp.as_vector(gear_ratio, 6, "gear_ratio")
    Jm = sp.as_vector(motor_inertia, 6, "motor_inertia")
    Kt = sp.as_vector(torque_constant, 6, "torque_constant")
    for name, a in (("tau_max", tmax), ("rate_limit", rl), ("gear_ratio", N), ("motor_inertia", Jm),
                    ("torque_constant", Kt)):
        if np.any(a <= 0.0):
            raise ModelError(f"servo.{name}: must be positive, got {a.tolist()}")
    Jr = N * N * Jm
    gain = N * Kt
    return ServoParams(
        gear_ratio=N, torque_constant=Kt, current_limit=tmax / gain, motor_inertia=Jm,
        coulomb=coulomb_fraction * tmax, viscous=viscous_fraction * tmax / rl,
        kp=2.0 * Jr * bandwidth / gain, ki=Jr * bandwidth ** 2 / gain,
        slip_torque=slip_fraction * tmax, rate_limit=rl,
    )


def hold_stiffness(p: ServoParams) -> Array:
    """Static stiffness of a servo holding position at zero commanded rate, ``N K_t ki`` (6,).

    With the I-P loop the current settles at ``ki ∫(0 − ω) dt = −ki (θ_m − θ_m0)``: the
    servo holds like a spring of ``N K_t ki = J_r ω_b²`` in series with the joint. [N·m/rad]
    """
    return p.gear_ratio * p.torque_constant * p.ki


def servo_initial(theta: ArrayLike) -> ServoState:
    """Servos at rest at the joint angles ``theta`` (6,) [rad]."""
    th = sp.as_vector(theta, 6, "theta")
    z = np.zeros(6)
    return ServoState(th.copy(), z.copy(), z.copy(), z.copy())


def servo_step(p: ServoParams, s: ServoState, rate_cmd: ArrayLike, brakes: ArrayLike, h: float, *,
               k: ArrayLike | None = None, c: ArrayLike | None = None, theta: ArrayLike | None = None,
               theta_dot: ArrayLike | None = None, n_sub: int = 1) -> tuple[ServoState, Array, Array]:
    """Advance the six servos by ``h`` seconds.

    Parameters
    ----------
    p : ServoParams
    s : ServoState
        Not modified.
    rate_cmd : array_like, shape (6,)
        Commanded joint rates (already limited by the caller). [rad/s]
    brakes : array_like of bool, shape (6,)
        Brake engaged per joint.
    h : float
        [s]
    k, c : array_like, shape (6,), optional
        Joint spring stiffness [N·m/rad] and damping [N·m·s/rad] to the arm (loaded
        case); None: unloaded (free massless arm), ``τ_L = 0``.
    theta, theta_dot : array_like, shape (6,), optional
        Arm joint angles at the step start and their rate over the step (loaded case). [rad, rad/s]
    n_sub : int
        Substeps.

    Returns
    -------
    state : ServoState
        After the step.
    tau_load : ndarray, shape (6,)
        Mean torque transmitted to the arm joints over the step (0 unloaded). [N·m]
    tau_motor : ndarray, shape (6,)
        Motor torque through the gear ``N K_t i`` of the last substep. [N·m]
    """
    cmd = sp.as_vector(rate_cmd, 6, "rate_cmd")
    br = np.asarray(brakes, dtype=bool)
    loaded = k is not None
    if loaded:
        ka = sp.as_vector(k, 6, "k")
        ca = sp.as_vector(c if c is not None else np.zeros(6), 6, "c")
        th = sp.as_vector(theta, 6, "theta").copy()
        thd = sp.as_vector(theta_dot, 6, "theta_dot")
    hs = h / n_sub
    tm, w, integ = s.theta_m.copy(), s.omega.copy(), s.integ.copy()
    i = np.zeros(6)
    tau_acc = np.zeros(6)
    tau_L = np.zeros(6)
    gain = p.gear_ratio * p.torque_constant
    hJ = hs / p.reflected_inertia
    any_brake = bool(br.any())
    for _ in range(n_sub):
        e = cmd - w
        i_un = p.ki * integ - p.kp * w          # I-P form: no closed-loop zero, hence no overshoot
        i = np.clip(i_un, -p.current_limit, p.current_limit)
        # anti-windup: integrate unless saturated and the error pushes further into saturation
        sat = (i != i_un) & (e * i_un > 0.0)
        integ = integ + np.where(sat, 0.0, e * hs)
        if any_brake:
            i = np.where(br, 0.0, i)
            integ = np.where(br, 0.0, integ)
        tau_f = p.coulomb * np.tanh(w / p.friction_rate) + p.viscous * w
        if loaded:
            # the joint damper implicitly (stable for any c h / J_r), the rest explicitly
            w_new = (w + hJ * (gain * i - tau_f - ka * (tm - th) + ca * thd)) / (1.0 + hJ * ca)
            tau_L = ka * (tm - th) + ca * (w_new - thd)
        else:
            w_new = w + hJ * (gain * i - tau_f)
        # brakes: hold while the transmitted torque is within the slip torque, else slip against it
        if any_brake:
            spring = ka * (tm - th) if loaded else np.zeros(6)
            damp_c = ca if loaded else np.zeros(6)
            thd_ = thd if loaded else np.zeros(6)
            tau_hold = spring - damp_c * thd_                     # transmitted with the train at rest
            held = br & (np.abs(w) < 1e-9) & (np.abs(tau_hold) <= p.slip_torque)
            dirn = np.where(np.abs(w) > 1e-9, np.sign(w), -np.sign(tau_hold))
            w_slip = (w + hJ * (-spring + damp_c * thd_ - p.slip_torque * dirn)) / (1.0 + hJ * damp_c)
            stopped = np.sign(w_slip) * dirn < 0.0               # crossed zero: the brake grips
            w_slip = np.where(stopped, 0.0, w_slip)
            w_new = np.where(br, np.where(held, 0.0, w_slip), w_new)
            if loaded:
                tau_L = spring + damp_c * (w_new - thd_)
        w = w_new
        tm = tm + hs * w
        if loaded:
            th = th + hs * thd
        tau_acc += tau_L
    return ServoState(tm, w, integ, i), tau_acc / n_sub, gain * i

