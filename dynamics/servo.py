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

Direct drive (per joint, the SRMS's backup mode): a fixed motor current replaces the rate
loop. Brakes (per joint): the servo is off (``i = 0``, integrator reset); the train is held
while ``|τ_L|`` is at most the slip torque, and slips against it beyond.

Values that are not published (gear ratios, motor constants and inertias, friction,
gains, slip torques) are **ASSUMED** (:func:`srms_servo_params`); the current limit is
chosen so that ``N K_t i_max`` equals the published joint torque limit
(``dynamics/data/README.md``). The integration is semi-implicit Euler with
``n_sub`` substeps per call.

No I/O, clock or globals.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import ModuleType

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dynamics import kernel_module
from dynamics import spatial as sp
from errors import ModelError, ShapeError

__all__ = ["ServoParams", "ServoState", "srms_servo_params", "servo_initial", "servo_step", "servo_step_arrays",
           "servo_step_rows", "load_kernels", "hold_stiffness",
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
    per_joint: tuple[tuple[float, ...], ...] = field(init=False, repr=False)
    kernel_rows: Array = field(init=False, repr=False, compare=False)

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
        # per joint, as Python floats for the substep loop: N K_t, J_r, i_max, kp, ki, τ_c, b, slip
        object.__setattr__(self, "per_joint", tuple(zip(
            (self.gear_ratio * self.torque_constant).tolist(), self.reflected_inertia.tolist(),
            self.current_limit.tolist(), self.kp.tolist(), self.ki.tolist(), self.coulomb.tolist(),
            self.viscous.tolist(), self.slip_torque.tolist(), strict=True)))
        # the same per joint as rows of an array, for the compiled kernel (dynamics.arm_kernels.servo_step)
        object.__setattr__(self, "kernel_rows", np.array(self.per_joint, dtype=np.float64))


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

    def copy(self) -> ServoState:
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


def servo_step(p: ServoParams, s: ServoState, rate_cmd: ArrayLike, brakes: Sequence[bool] | NDArray[np.bool_],
               h: float, *, k: ArrayLike | None = None, c: ArrayLike | None = None, theta: ArrayLike | None = None,
               theta_dot: ArrayLike | None = None, n_sub: int = 1,
               direct: Sequence[float | None] | None = None) -> tuple[ServoState, Array, Array]:
    """Advance the six servos by ``h`` seconds.

    The inputs are checked once; the substeps run in the compiled kernel (:func:`servo_step_arrays`), bit for bit
    :func:`servo_step_rows`, the readable reference on Python floats.

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
    direct : sequence of (float or None), length 6, optional
        Direct drive: per joint a motor current [A] applied in place of the rate loop
        (limited to ±i_max, integrator reset), or None for the rate loop.

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
    br = [bool(b) for b in brakes]
    if len(br) != 6:
        raise ShapeError(f"brakes: expected 6 flags, got {len(br)}")
    if k is not None:
        if theta is None or theta_dot is None:
            raise ShapeError("theta, theta_dot: required with k (the loaded joint's angle and rate)")
        loaded = (sp.as_vector(k, 6, "k"), sp.as_vector(c if c is not None else np.zeros(6), 6, "c"),
                  sp.as_vector(theta, 6, "theta"), sp.as_vector(theta_dot, 6, "theta_dot"))
    else:
        loaded = None
    if direct is not None and len(direct) != 6:
        raise ShapeError(f"direct: expected 6 entries, got {len(direct)}")
    state, tau = servo_step_arrays(p, s, cmd, np.array(br), h, n_sub, loaded, direct)
    return state, tau, (p.gear_ratio * p.torque_constant) * state.current


# the kernel's inputs when unloaded or without direct drive; never written (and not read-only: numba compiles a
# read-only array apart, and the arm's own arrays are writable)
_ZEROS6 = np.zeros(6)
_NO_DIRECT = np.zeros(6, dtype=np.bool_)


def _kernels() -> ModuleType:
    """The compiled kernels (:mod:`dynamics.arm_kernels`), imported on first use (:func:`dynamics.kernel_module`;
    a built arm has them loaded: :func:`load_kernels`)."""
    return kernel_module("arm_kernels")


def load_kernels() -> None:
    """Import the servo's compiled kernel and load its machine code now (compile it if numba's cache has none), for
    the argument types the arm passes; otherwise the first :func:`servo_step_arrays` pays for it (numba's import
    and the load, a few tenths of a second; the compile, seconds). The arm calls it when it is built."""
    p = srms_servo_params(np.ones(6), np.ones(6))
    s = servo_initial(np.zeros(6))
    servo_step_arrays(p, s, np.zeros(6), _NO_DIRECT, 0.001, 1, (np.ones(6), np.ones(6), np.zeros(6), np.zeros(6)),
                      [0.0, None, None, None, None, None])


def servo_step_arrays(p: ServoParams, s: ServoState, rate_cmd: Array, brakes: NDArray[np.bool_], h: float,
                      n_sub: int = 1, loaded: tuple[Array, Array, Array, Array] | None = None,
                      direct: Sequence[float | None] | None = None) -> tuple[ServoState, Array]:
    """:func:`servo_step` without its checks, for the arm's step loop: the compiled kernel
    :func:`dynamics.arm_kernels.servo_step`, bit for bit :func:`servo_step_rows` (the same operations on Python
    floats; the tests hold them equal).

    Parameters
    ----------
    p : ServoParams
    s : ServoState
        Not modified.
    rate_cmd : ndarray, shape (6,)
        [rad/s]
    brakes : ndarray of bool, shape (6,)
    h : float
        [s]
    n_sub : int
    loaded : tuple (k, c, theta, theta_dot) of ndarray, shape (6,), optional
        The loaded case of :func:`servo_step`; None unloaded.
    direct : sequence of (float or None), length 6, optional
        As :func:`servo_step`.

    Returns
    -------
    state : ServoState
        After the step (new arrays: rows of one, with ``tau_load``).
    tau_load : ndarray, shape (6,)
        The mean load torque over the step (0 unloaded). [N·m]
    """
    if direct is None:
        on, cur = _NO_DIRECT, _ZEROS6
    else:
        on = np.array([d is not None for d in direct])
        cur = np.array([0.0 if d is None else float(d) for d in direct])
    ka, ca, th, thd = (_ZEROS6, _ZEROS6, _ZEROS6, _ZEROS6) if loaded is None else loaded
    out = np.empty((5, 6))
    _kernels().servo_step(p.kernel_rows, float(p.friction_rate), s.theta_m, s.omega, s.integ, rate_cmd, brakes,
                          float(h), int(n_sub), loaded is not None, ka, ca, th, thd, on, cur, out)
    return ServoState(out[0], out[1], out[2], out[3]), out[4]


def servo_step_rows(p: ServoParams, theta_m: list[float], omega: list[float], integ: list[float],
                    rate_cmd: list[float], brakes: Sequence[bool], h: float, n_sub: int = 1,
                    loaded: tuple[list[float], list[float], list[float], list[float]] | None = None,
                    direct: Sequence[float | None] | None = None
                    ) -> tuple[list[float], list[float], list[float], list[float], list[float]]:
    """:func:`servo_step` on Python floats (no shape checks): the readable reference that the compiled kernel
    :func:`dynamics.arm_kernels.servo_step` (what :func:`servo_step` and :func:`servo_step_arrays` run) is tested
    equal to, bit for bit.

    Parameters
    ----------
    p : ServoParams
    theta_m, omega, integ : list of 6 float
        The servo state (:class:`ServoState` fields). [rad, rad/s, rad]
    rate_cmd : list of 6 float
        [rad/s]
    brakes : sequence of 6 bool
    h : float
        [s]
    n_sub : int
    loaded : tuple (k, c, theta, theta_dot) of lists of 6 float, optional
        The loaded case of :func:`servo_step`; None unloaded.
    direct : sequence of (float or None), length 6, optional
        As :func:`servo_step`.

    Returns
    -------
    theta_m, omega, integ, current, tau_load : list of 6 float
        The state after the step, the last substep's current [A] and the mean load torque [N·m].
    """
    if loaded is not None:
        ka, ca, th0, thd = loaded
    else:
        ka = ca = th0 = thd = [0.0] * 6
    hs = h / n_sub
    ws = p.friction_rate
    tm_out, w_out, integ_out, i_out, tau_out = [0.0] * 6, [0.0] * 6, [0.0] * 6, [0.0] * 6, [0.0] * 6
    # the six servos are independent: joint by joint, substeps inside
    for j, (gain, Jr, i_max, kp, ki, tau_c, b, slip) in enumerate(p.per_joint):
        tm, w, integ_j = theta_m[j], omega[j], integ[j]
        kj, cj, th, thdj = ka[j], ca[j], th0[j], thd[j]
        i_direct = None if direct is None else direct[j]
        braked = brakes[j]
        cmd = rate_cmd[j]
        hJ = hs / Jr
        i = 0.0
        tau_acc = 0.0
        for _ in range(n_sub):
            spring = kj * (tm - th)
            if braked:
                # servo off; the train is held while the torque it transmits at rest is within the slip
                # torque, else it slips against it (the damper implicitly)
                i, integ_j = 0.0, 0.0
                tau_hold = spring - cj * thdj
                if abs(w) < 1e-9 and abs(tau_hold) <= slip:
                    w_new = 0.0
                else:
                    dirn = math.copysign(1.0, w) if abs(w) > 1e-9 else -math.copysign(1.0, tau_hold)
                    w_new = (w + hJ * (-spring + cj * thdj - slip * dirn)) / (1.0 + hJ * cj)
                    if w_new * dirn < 0.0:          # crossed zero: the brake grips
                        w_new = 0.0
            else:
                if i_direct is not None:            # direct drive: the rate loop bypassed
                    i, integ_j = max(-i_max, min(i_max, float(i_direct))), 0.0
                else:
                    e = cmd - w
                    i_un = ki * integ_j - kp * w    # I-P form: no closed-loop zero, hence no overshoot
                    i = min(i_max, max(-i_max, i_un))
                    # anti-windup: integrate unless saturated and the error pushes further into saturation
                    if not (i != i_un and e * i_un > 0.0):
                        integ_j += e * hs
                tau_f = tau_c * math.tanh(w / ws) + b * w
                # the joint damper implicitly (stable for any c h / J_r), the rest explicitly
                w_new = (w + hJ * (gain * i - tau_f - spring + cj * thdj)) / (1.0 + hJ * cj)
            if loaded is not None:
                tau_acc += spring + cj * (w_new - thdj)
                th += hs * thdj
            w = w_new
            tm += hs * w
        tm_out[j], w_out[j], integ_out[j], i_out[j], tau_out[j] = tm, w, integ_j, i, tau_acc / n_sub
    return tm_out, w_out, integ_out, i_out, tau_out
