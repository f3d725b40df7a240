"""6-DOF rigid bodies in the LVLH frame: model, state, equations of motion, a fixed-step integrator.

Frames and state (STYLE): W is LVLH in Hill's axes (:mod:`dynamics.orbit`: x radial out,
y along-track, z orbit normal), or an inertial frame when no orbit is given. B is the body
frame with its origin Bo at the centre of mass.

- ``p_WoBo_W`` (3,) CoM position relative to W's origin, in W. [m]
- ``quat_WB`` (4,) attitude, scalar first, ``v_W = R(quat_WB) v_B``.
- ``v_WBo_W`` (3,) CoM velocity relative to (as seen in) W, in W. [m/s]
- ``w_WB_B`` (3,) angular velocity of B relative to W, in B. [rad/s]

Equations of motion (SVDS seed 003 eqs. 2-4, 2-5, 2-6, 2-8, 2-9 for one body, with the
end-effector wrench folded into the external wrench ``F_Bo_W = [τ; f]`` about the CoM,
expressed in W):

- translation (2-4/2-8): ``v̇ = f / m + a_CW(p, v)`` — the Clohessy–Wiltshire terms replace
  the seed's gravity ``g`` when an orbit is given (:func:`dynamics.orbit.cw_acceleration`);
- rotation (2-5/2-9), Euler's equations for the rate relative to inertial space
  ``ω_NB_B = w_WB_B + R_BW ω_NW_W``: ``I ω̇_NB + ω_NB × I ω_NB = R_BW τ + τ_gg``, then
  ``ẇ_WB_B = ω̇_NB_B + w_WB_B × (R_BW ω_NW_W)`` (:mod:`dynamics.orbit`, module docstring);
- attitude (2-6): ``q̇_WB = ½ q_WB ⊗ [0, w_WB_B]`` (:func:`dynamics.spatial.quat_rate`).

With ``orbit=None`` all orbital terms vanish and W is inertial, so momentum and kinetic
energy are conserved under zero wrench (the momentum checks use this).

Integrator (:func:`step`): classical RK4 in the Runge–Kutta–Munthe-Kaas form (Munthe-Kaas,
BIT 38, 1998). The attitude increment over the step is a rotation vector φ in B,
``q(t) = q_k ⊗ exp(φ(t))``, integrated by RK4 together with p, v, w through
``φ̇ = dexp⁻¹_φ(w_WB_B)``; the quaternion is then advanced once with
:func:`dynamics.spatial.quat_integrate`. Fourth order for all variables, the quaternion
unit by construction (no renormalisation drift), explicit and iteration-free so a step
costs a fixed four derivative calls — what a co-simulation step with a wrench held over
the step needs. A symplectic splitting would bound the energy error over very long
free-drift runs, but the wrench changes every step anyway and RK4's O(h⁴) drift is far
below the co-simulation coupling error at the step sizes used (bounds in the tests).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dynamics.orbit import CircularOrbit, cw_acceleration, gravity_gradient_torque, lvlh_rate_W
from dynamics.spatial import as_vector, quat_integrate, quat_normalize, quat_rate, quat_to_rotation, shift_wrench, skew
from errors import ModelError, ShapeError

__all__ = [
    "RigidBodyModel",
    "RigidBodyState",
    "accelerations",
    "derivative",
    "step",
    "wrench_at_com",
    "momentum",
    "kinetic_energy",
    "spatial_velocity",
    "point_position",
    "point_velocity",
    "point_mobility",
    "apply_impulse",
    "inertia_W",
]

Array = NDArray[np.float64]


def _readonly(a: Array) -> Array:
    a = np.array(a, dtype=np.float64, copy=True)
    a.setflags(write=False)
    return a


@dataclass(frozen=True, slots=True)
class RigidBodyModel:
    """Mass properties of one rigid body (immutable; arrays read-only).

    Attributes
    ----------
    name : str
        Body name, used in error messages.
    mass : float
        Mass, > 0. [kg]
    I_Bcm_B : ndarray, shape (3, 3)
        Inertia about the CoM, in B: symmetric, positive definite, principal moments
        satisfying the triangle inequality. [kg·m²]
    I_inv_B : ndarray, shape (3, 3)
        Its inverse (derived, not a constructor argument). [1/(kg·m²)]

    Raises
    ------
    ModelError
        Naming the body and the value, if the mass or inertia is inadmissible.
    ShapeError
        If ``I_Bcm_B`` is not (3, 3).
    """

    name: str
    mass: float
    I_Bcm_B: Array
    I_inv_B: Array = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        m = float(self.mass)
        if not (np.isfinite(m) and m > 0.0):
            raise ModelError(f"body {self.name!r}: mass must be > 0 and finite, got {self.mass}")
        I = np.asarray(self.I_Bcm_B, dtype=np.float64)
        if I.shape != (3, 3):
            raise ShapeError(f"body {self.name!r}: I_Bcm_B expected shape (3, 3), got {I.shape}")
        if not np.all(np.isfinite(I)):
            raise ModelError(f"body {self.name!r}: I_Bcm_B not finite: {I.tolist()}")
        scale = max(float(np.max(np.abs(I))), 1e-300)
        if np.max(np.abs(I - I.T)) > 1e-9 * scale:
            raise ModelError(f"body {self.name!r}: I_Bcm_B is not symmetric: {I.tolist()}")
        I = 0.5 * (I + I.T)
        lam = np.linalg.eigvalsh(I)  # ascending
        if lam[0] <= 0.0:
            raise ModelError(
                f"body {self.name!r}: I_Bcm_B is not positive definite, principal moments {lam.tolist()}"
            )
        if lam[0] + lam[1] < lam[2] * (1.0 - 1e-9):
            raise ModelError(
                f"body {self.name!r}: I_Bcm_B violates the triangle inequality, principal moments {lam.tolist()}"
            )
        object.__setattr__(self, "mass", m)
        object.__setattr__(self, "I_Bcm_B", _readonly(I))
        object.__setattr__(self, "I_inv_B", _readonly(np.linalg.inv(I)))


@dataclass(frozen=True, slots=True)
class RigidBodyState:
    """State of one rigid body in W (see the module docstring for frames and units).

    The quaternion is normalised on construction (scalar part ≥ 0); arrays are read-only
    copies. Shapes: ``p_WoBo_W`` (3,), ``quat_WB`` (4,), ``v_WBo_W`` (3,), ``w_WB_B`` (3,).

    Raises
    ------
    ShapeError
        If a field has the wrong shape, is not finite, or the quaternion has zero norm.
    """

    p_WoBo_W: Array
    quat_WB: Array
    v_WBo_W: Array
    w_WB_B: Array

    def __post_init__(self) -> None:
        object.__setattr__(self, "p_WoBo_W", _readonly(as_vector(self.p_WoBo_W, 3, "p_WoBo_W")))
        object.__setattr__(self, "quat_WB", _readonly(quat_normalize(self.quat_WB)))
        object.__setattr__(self, "v_WBo_W", _readonly(as_vector(self.v_WBo_W, 3, "v_WBo_W")))
        object.__setattr__(self, "w_WB_B", _readonly(as_vector(self.w_WB_B, 3, "w_WB_B")))

    @classmethod
    def at_rest(
        cls, p_WoBo_W: ArrayLike = (0.0, 0.0, 0.0), quat_WB: ArrayLike = (1.0, 0.0, 0.0, 0.0)
    ) -> RigidBodyState:
        """A body at rest relative to W at the given pose."""
        return cls(np.asarray(p_WoBo_W, dtype=float), np.asarray(quat_WB, dtype=float), np.zeros(3), np.zeros(3))

    @property
    def R_WB(self) -> Array:
        """Rotation matrix ``R_WB`` (3, 3)."""
        return quat_to_rotation(self.quat_WB)

    def to_vector(self) -> Array:
        """``[p_WoBo_W, quat_WB, v_WBo_W, w_WB_B]``, shape (13,)."""
        return np.concatenate([self.p_WoBo_W, self.quat_WB, self.v_WBo_W, self.w_WB_B])

    @classmethod
    def from_vector(cls, x: ArrayLike) -> RigidBodyState:
        """Inverse of :meth:`to_vector`; ``x`` shape (13,)."""
        a = as_vector(x, 13, "rigid body state vector")
        return cls(a[0:3], a[3:7], a[7:10], a[10:13])


def _as_wrench(F: ArrayLike, name: str) -> Array:
    return as_vector(F, 6, name)


def _accelerations(
    model: RigidBodyModel, p: Array, v: Array, R_WB: Array, quat_WB: Array, w: Array, F_W: Array,
    orbit: CircularOrbit | None,
) -> tuple[Array, Array]:
    """(v̇_W, ẇ_WB_B) for the given state parts; see the module docstring."""
    I = model.I_Bcm_B
    R_BW = R_WB.T
    tau_B = R_BW @ F_W[:3]
    vdot = F_W[3:] / model.mass
    if orbit is None:
        w_N = w
    else:
        vdot = vdot + cw_acceleration(orbit.n, p, v)
        w_NW_B = R_BW @ lvlh_rate_W(orbit.n)
        w_N = w + w_NW_B
        if orbit.gravity_gradient:
            tau_B = tau_B + gravity_gradient_torque(orbit.n, I, quat_WB)
    wdot_N = model.I_inv_B @ (tau_B - skew(w_N) @ (I @ w_N))
    if orbit is None:
        return vdot, wdot_N
    return vdot, wdot_N + skew(w) @ w_NW_B


def accelerations(
    model: RigidBodyModel, state: RigidBodyState, F_Bo_W: ArrayLike, orbit: CircularOrbit | None = None
) -> tuple[Array, Array]:
    """Linear and angular acceleration of the body relative to W (what state messages carry).

    Parameters
    ----------
    model, state, F_Bo_W, orbit
        As in :func:`derivative`.

    Returns
    -------
    a_WBo_W : ndarray, shape (3,)
        CoM acceleration relative to W, in W (SVDS seed 003 eq. 2-4 plus CW terms). [m/s²]
    wdot_WB_B : ndarray, shape (3,)
        Rate of change of ``w_WB_B`` (eq. 2-5 with the LVLH rotation). [rad/s²]

    Raises
    ------
    ShapeError
        If ``F_Bo_W`` is not a finite (6,) array.
    """
    F = _as_wrench(F_Bo_W, "F_Bo_W")
    return _accelerations(model, state.p_WoBo_W, state.v_WBo_W, state.R_WB, state.quat_WB, state.w_WB_B, F, orbit)


def derivative(
    model: RigidBodyModel, state: RigidBodyState, F_Bo_W: ArrayLike, orbit: CircularOrbit | None = None
) -> Array:
    """Time derivative of the state vector (SVDS seed 003 eqs. 2-4…2-9, one body).

    Parameters
    ----------
    model : RigidBodyModel
    state : RigidBodyState
    F_Bo_W : array_like, shape (6,)
        External wrench [τ; f] about the CoM Bo, expressed in W. [N·m, N]
    orbit : CircularOrbit or None
        Reference orbit for the Clohessy–Wiltshire and gravity-gradient terms; ``None``
        means W is inertial and there is no gravity.

    Returns
    -------
    ndarray, shape (13,)
        ``[ṗ_WoBo_W, q̇_WB, v̇_WBo_W, ẇ_WB_B]`` (ordering of
        :meth:`RigidBodyState.to_vector`). [m/s, 1/s, m/s², rad/s²]

    Raises
    ------
    ShapeError
        If ``F_Bo_W`` is not a finite (6,) array.
    """
    vdot, wdot = accelerations(model, state, F_Bo_W, orbit)
    return np.concatenate([state.v_WBo_W, quat_rate(state.quat_WB, state.w_WB_B), vdot, wdot])


def _dexpinv(phi: Array, w: Array) -> Array:
    """``φ̇`` for ``q = q_k ⊗ exp(φ)`` and body rate ``w``: the inverse right Jacobian of SO(3)."""
    th2 = float(phi @ phi)
    if th2 < 1e-8:
        c = 1.0 / 12.0 + th2 / 720.0
    else:
        th = np.sqrt(th2)
        c = 1.0 / th2 - (1.0 + np.cos(th)) / (2.0 * th * np.sin(th))
    S = skew(phi)
    pxw = S @ w
    return w + 0.5 * pxw + c * (S @ pxw)


def step(
    model: RigidBodyModel,
    state: RigidBodyState,
    F_Bo_W: ArrayLike,
    h: float,
    orbit: CircularOrbit | None = None,
    substeps: int = 1,
) -> RigidBodyState:
    """Advance one rigid body by ``h`` with the wrench held constant (in W) over the step.

    RK4 in Runge–Kutta–Munthe-Kaas form (module docstring): fourth order, quaternion
    advanced with :func:`dynamics.spatial.quat_integrate`, unit by construction.

    Parameters
    ----------
    model : RigidBodyModel
    state : RigidBodyState
        State at t.
    F_Bo_W : array_like, shape (6,)
        External wrench [τ; f] about the CoM, expressed in W, constant over [t, t+h). [N·m, N]
    h : float
        Step, > 0. [s]
    orbit : CircularOrbit or None
        Orbit for Clohessy–Wiltshire translation and gravity gradient; ``None`` = inertial W.
    substeps : int
        Number of equal RK4 sub-steps in ``h`` (≥ 1).

    Returns
    -------
    RigidBodyState
        State at t + h.

    Raises
    ------
    ShapeError
        If ``F_Bo_W`` is not a finite (6,) array.
    ValueError
        If ``h`` is not positive and finite or ``substeps`` < 1.
    """
    F = _as_wrench(F_Bo_W, "F_Bo_W")
    if not (np.isfinite(h) and h > 0.0):
        raise ValueError(f"h must be > 0 and finite, got {h}")
    if int(substeps) != substeps or substeps < 1:
        raise ValueError(f"substeps must be an integer >= 1, got {substeps}")
    dt = h / int(substeps)
    p, q, v, w = state.p_WoBo_W, state.quat_WB, state.v_WBo_W, state.w_WB_B
    for _ in range(int(substeps)):
        p, q, v, w = _rkmk4(model, p, q, v, w, F, dt, orbit)
    return RigidBodyState(p, q, v, w)


def _rkmk4(
    model: RigidBodyModel, p0: Array, q0: Array, v0: Array, w0: Array, F: Array, dt: float,
    orbit: CircularOrbit | None,
) -> tuple[Array, Array, Array, Array]:
    def f(p: Array, v: Array, w: Array, phi: Array) -> tuple[Array, Array, Array, Array]:
        q = quat_integrate(q0, phi, 1.0)
        vdot, wdot = _accelerations(model, p, v, quat_to_rotation(q), q, w, F, orbit)
        return v, vdot, wdot, _dexpinv(phi, w)

    z = np.zeros(3)
    k1 = f(p0, v0, w0, z)
    k2 = f(p0 + 0.5 * dt * k1[0], v0 + 0.5 * dt * k1[1], w0 + 0.5 * dt * k1[2], 0.5 * dt * k1[3])
    k3 = f(p0 + 0.5 * dt * k2[0], v0 + 0.5 * dt * k2[1], w0 + 0.5 * dt * k2[2], 0.5 * dt * k2[3])
    k4 = f(p0 + dt * k3[0], v0 + dt * k3[1], w0 + dt * k3[2], dt * k3[3])
    inc = [dt / 6.0 * (a + 2.0 * b + 2.0 * c + d) for a, b, c, d in zip(k1, k2, k3, k4, strict=True)]
    return p0 + inc[0], quat_integrate(q0, inc[3], 1.0), v0 + inc[1], w0 + inc[2]


def wrench_at_com(F_Po_W: ArrayLike, p_WoPo_W: ArrayLike, state: RigidBodyState) -> Array:
    """The wrench [τ; f] applied at point P, referred to the body's CoM Bo.

    Parameters
    ----------
    F_Po_W : array_like, shape (6,)
        Wrench [τ; f] about P, in W. [N·m, N]
    p_WoPo_W : array_like, shape (3,)
        Position of P in W. [m]
    state : RigidBodyState
        Gives the CoM position ``p_WoBo_W``.

    Returns
    -------
    F_Bo_W : ndarray, shape (6,)
        The same wrench about Bo, in W. [N·m, N]

    Raises
    ------
    ShapeError
        If an input has the wrong shape.
    """
    p_PoBo_W = state.p_WoBo_W - as_vector(p_WoPo_W, 3, "p_WoPo_W")
    return shift_wrench(_as_wrench(F_Po_W, "F_Po_W"), p_PoBo_W)


def inertia_W(model: RigidBodyModel, state: RigidBodyState) -> Array:
    """Inertia about the CoM expressed in W, ``R_WB I_Bcm_B R_WBᵀ``, shape (3, 3). [kg·m²]"""
    R = state.R_WB
    return R @ model.I_Bcm_B @ R.T


def momentum(model: RigidBodyModel, state: RigidBodyState) -> tuple[Array, Array]:
    """Linear momentum and angular momentum about W's origin, both in W.

    Uses the velocities relative to W, so it is the inertial momentum when W is inertial
    (no orbit), which is when it is conserved.

    Returns
    -------
    P_W : ndarray, shape (3,)
        ``m v_WBo_W``. [kg·m/s]
    L_Wo_W : ndarray, shape (3,)
        ``p_WoBo_W × P_W + R_WB I_Bcm_B w_WB_B``. [kg·m²/s]
    """
    P = model.mass * state.v_WBo_W
    L = np.cross(state.p_WoBo_W, P) + state.R_WB @ (model.I_Bcm_B @ state.w_WB_B)
    return P, L


def kinetic_energy(model: RigidBodyModel, state: RigidBodyState) -> float:
    """``½ m |v|² + ½ wᵀ I w`` with the rates relative to W. [J]"""
    w = state.w_WB_B
    return float(0.5 * model.mass * state.v_WBo_W @ state.v_WBo_W + 0.5 * w @ model.I_Bcm_B @ w)


def spatial_velocity(state: RigidBodyState) -> Array:
    """``V_WBo_W = [ω_WB_W; v_WBo_W]``, shape (6,). [rad/s, m/s]"""
    return np.concatenate([state.R_WB @ state.w_WB_B, state.v_WBo_W])


def point_position(state: RigidBodyState, p_BoQo_B: ArrayLike) -> Array:
    """Position ``p_WoQo_W`` (3,) of a body-fixed point Q given ``p_BoQo_B`` (3,). [m]

    Raises ShapeError if ``p_BoQo_B`` is not a finite (3,) array (as do the other point helpers).
    """
    return state.p_WoBo_W + state.R_WB @ as_vector(p_BoQo_B, 3, "p_BoQo_B")


def point_velocity(state: RigidBodyState, p_BoQo_B: ArrayLike) -> Array:
    """Velocity ``v_WQo_W`` (3,) of a body-fixed point Q, ``v + ω × R_WB p_BoQo_B``. [m/s]"""
    R = state.R_WB
    return state.v_WBo_W + np.cross(R @ state.w_WB_B, R @ as_vector(p_BoQo_B, 3, "p_BoQo_B"))


def point_mobility(model: RigidBodyModel, state: RigidBodyState, p_BoCo_W: ArrayLike) -> Array:
    """Inverse apparent mass at point C: ``Δv_C = K P`` for an impulse P applied at C.

    ``K = I₃ / m − [r×] I_W⁻¹ [r×]`` with ``r = p_BoCo_W``; symmetric positive definite.

    Parameters
    ----------
    p_BoCo_W : array_like, shape (3,)
        From the CoM to C, expressed in W. [m]

    Returns
    -------
    ndarray, shape (3, 3)
        [1/kg], in W.
    """
    S = skew(as_vector(p_BoCo_W, 3, "p_BoCo_W"))
    K = np.eye(3) / model.mass - S @ np.linalg.solve(inertia_W(model, state), S)
    return 0.5 * (K + K.T)


def apply_impulse(model: RigidBodyModel, state: RigidBodyState, P_Bo_W: ArrayLike) -> RigidBodyState:
    """State just after an impulsive wrench [∫τ dt; ∫f dt] about the CoM, in W.

    Position and attitude do not change; ``Δv = ∫f / m``, ``Δw_B = I⁻¹ R_BW ∫τ``.

    Parameters
    ----------
    P_Bo_W : array_like, shape (6,)
        Angular and linear impulse about Bo, in W. [N·m·s, N·s]

    Returns
    -------
    RigidBodyState
    """
    P = _as_wrench(P_Bo_W, "P_Bo_W")
    dw_B = model.I_inv_B @ (state.R_WB.T @ P[:3])
    return RigidBodyState(state.p_WoBo_W, state.quat_WB, state.v_WBo_W + P[3:] / model.mass, state.w_WB_B + dw_B)
