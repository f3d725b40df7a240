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

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dynamics import kernel_module
from dynamics.orbit import CircularOrbit, cw_acceleration_rows, gravity_gradient_rows
from dynamics.spatial import (
    as_vector,
    cross_rows,
    dexp_inv_rows,
    mat_vec_rows,
    pose_from_vector,
    quat_integrate_rows,
    quat_normalize,
    quat_rate,
    quat_to_rotation,
    refer_wrench_rows,
    rotation_rows,
    rotation_to_quat,
    shift_wrench,
    shift_wrench_rows,
    skew,
)
from errors import ModelError, ShapeError

__all__ = [
    "RigidBodyModel",
    "RigidBodyState",
    "as_floats",
    "body_model",
    "cw_floats",
    "mean_wrench_Wo",
    "state_from_pose",
    "wrench_about_mean_com",
    "wrench_about_origin",
    "accelerations",
    "accelerations_rows",
    "apply_impulse",
    "derivative",
    "inertia_W",
    "kinetic_energy",
    "load_kernels",
    "momentum",
    "point_mobility",
    "point_motion",
    "point_motion_rows",
    "velocity_at",
    "velocity_at_rows",
    "point_position",
    "point_velocity",
    "predict_rows",
    "quat_integrate_rows",
    "rotation_rows",
    "spatial_velocity",
    "step",
    "step_reference",
    "wrench_at_com",
]

Array = NDArray[np.float64]


def _readonly(a: Array) -> Array:
    a = np.array(a, dtype=np.float64, copy=True)
    a.setflags(write=False)
    return a


# ---------------------------------------------------------------- float kernels (the hot path)
#
# Python-float twins of dynamics.spatial.quat_to_rotation, quat_integrate and dexp_inv, with
# the same expressions in the same order (so the same results, bit for bit; the tests hold
# them equal). They take and return floats: a 1 kHz step calls them a dozen times, and
# numpy's per-call cost on (3,) and (4,) arrays was most of the step.


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
    I_rows, I_inv_rows : tuple of 9 float
        ``I_Bcm_B`` and ``I_inv_B`` row-major as Python floats (derived; the float path of
        :func:`step_reference`).
    kernel_rows : tuple of 19 float
        ``(mass, *I_rows, *I_inv_rows)`` (derived; the compiled kernel's model argument,
        :func:`dynamics.rigid_body_kernels.rkmk4`).

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
    I_rows: tuple[float, ...] = field(init=False, repr=False, compare=False)
    I_inv_rows: tuple[float, ...] = field(init=False, repr=False, compare=False)
    kernel_rows: tuple[float, ...] = field(init=False, repr=False, compare=False)

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
        object.__setattr__(self, "I_inv_B", _readonly(np.linalg.inv(I)))  # type: ignore[arg-type]  # numpy stubs: float64 in, floating out
        object.__setattr__(self, "I_rows", tuple(self.I_Bcm_B.ravel().tolist()))
        object.__setattr__(self, "I_inv_rows", tuple(self.I_inv_B.ravel().tolist()))
        object.__setattr__(self, "kernel_rows", (m, *self.I_rows, *self.I_inv_rows))


@dataclass(frozen=True, slots=True)
class RigidBodyState:
    """State of one rigid body in W (see the module docstring for frames and units).

    The quaternion is normalised on construction (scalar part ≥ 0); arrays are read-only
    copies. Shapes: ``p_WoBo_W`` (3,), ``quat_WB`` (4,), ``v_WBo_W`` (3,), ``w_WB_B`` (3,).
    :attr:`R_rows` is ``R_WB`` as nine Python floats and :attr:`floats` the thirteen state
    values as Python floats, each computed once per state.

    Raises
    ------
    ShapeError
        If a field has the wrong shape, is not finite, or the quaternion has zero norm.
    """

    p_WoBo_W: Array
    quat_WB: Array
    v_WBo_W: Array
    w_WB_B: Array
    _R: tuple[float, ...] | None = field(default=None, init=False, repr=False, compare=False)
    _F: tuple[float, ...] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "p_WoBo_W", _readonly(as_vector(self.p_WoBo_W, 3, "p_WoBo_W")))
        object.__setattr__(self, "quat_WB", _readonly(quat_normalize(self.quat_WB)))
        object.__setattr__(self, "v_WBo_W", _readonly(as_vector(self.v_WBo_W, 3, "v_WBo_W")))
        object.__setattr__(self, "w_WB_B", _readonly(as_vector(self.w_WB_B, 3, "w_WB_B")))

    @classmethod
    def from_floats(cls, p: Sequence[float], quat_WB: Any, v: Sequence[float], w: Sequence[float]) -> RigidBodyState:
        """State from Python floats: ``p``, ``v``, ``w`` 3 each, ``quat_WB`` 4, already unit with scalar ≥ 0.

        Skips the shape checks and renormalisation of the constructor (the hot path of
        :func:`step`; the caller guarantees the quaternion, e.g. from
        :func:`quat_integrate_rows`) but still refuses a non-finite value, naming the field.

        Raises
        ------
        ShapeError
            If ``p``, ``v`` or ``w`` is not finite.
        """
        x = (*p, *quat_WB, *v, *w)
        if not all(map(math.isfinite, x)):
            for name, y in (("p_WoBo_W", p), ("v_WBo_W", v), ("w_WB_B", w)):
                if not all(map(math.isfinite, y)):
                    raise ShapeError(f"{name}: not finite: {list(y)}")
            raise ShapeError(f"quat_WB: not finite: {list(quat_WB)}")
        return cls._owning(np.array(x, dtype=np.float64), x)

    @classmethod
    def _trusted(cls, a: Array) -> RigidBodyState:
        """State owning ``a``, the thirteen values of :meth:`to_vector` (a new float64 array, made
        read-only here), all finite and the quaternion unit with scalar ≥ 0: what
        :func:`dynamics.rigid_body_kernels.rkmk4` returns with code 0. No checks (:meth:`from_floats`
        without them)."""
        return cls._owning(a, tuple(a.tolist()))

    @classmethod
    def _owning(cls, a: Array, x: tuple[float, ...]) -> RigidBodyState:
        """State whose fields are views of ``a`` (thirteen values, made read-only here) and whose floats are ``x``
        (the same values); no checks."""
        a.setflags(write=False)
        self = object.__new__(cls)
        object.__setattr__(self, "p_WoBo_W", a[0:3])
        object.__setattr__(self, "quat_WB", a[3:7])
        object.__setattr__(self, "v_WBo_W", a[7:10])
        object.__setattr__(self, "w_WB_B", a[10:13])
        object.__setattr__(self, "_R", None)
        object.__setattr__(self, "_F", x)
        return self

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

    @property
    def R_rows(self) -> tuple[float, ...]:
        """``R_WB`` row-major as nine Python floats (equal to :attr:`R_WB`; cached)."""
        if self._R is None:
            object.__setattr__(self, "_R", rotation_rows(*self.floats[3:7]))
        return self._R  # type: ignore[return-value]

    @property
    def floats(self) -> tuple[float, ...]:
        """``[p_WoBo_W, quat_WB, v_WBo_W, w_WB_B]`` as thirteen Python floats (equal to
        :meth:`to_vector`; cached), for the float paths of the hot loops."""
        if self._F is None:
            object.__setattr__(self, "_F", tuple(self.to_vector().tolist()))
        return self._F  # type: ignore[return-value]

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


def _rates(
    model: RigidBodyModel, p: Sequence[float], v: Sequence[float], R_WB: tuple[float, ...], w: Sequence[float],
    F_W: Sequence[float], orbit: CircularOrbit | None,
) -> tuple[list[float], list[float]]:
    """(v̇_W, ẇ_WB_B) as float lists for the given state parts; see the module docstring.

    Plain float arithmetic on 3-vectors (``R_WB`` row-major, nine floats): numpy's per-call
    overhead on (3,) arrays dominated the 1 kHz contact step. The orbital terms are the float
    kernels of :func:`dynamics.orbit.cw_acceleration` and
    :func:`dynamics.orbit.gravity_gradient_torque` (the latter only when the orbit has it on).
    Inputs are trusted (checked by callers).
    """
    r00, r01, r02, r10, r11, r12, r20, r21, r22 = R_WB
    t0, t1, t2, f0, f1, f2 = F_W
    m = model.mass
    tb0, tb1, tb2 = r00 * t0 + r10 * t1 + r20 * t2, r01 * t0 + r11 * t1 + r21 * t2, r02 * t0 + r12 * t1 + r22 * t2
    vdot = [f0 / m, f1 / m, f2 / m]
    w0, w1, w2 = w
    i00, i01, i02, i10, i11, i12, i20, i21, i22 = model.I_rows
    if orbit is None:
        n0, n1, n2 = w0, w1, w2
    else:
        n = orbit.n
        a0, a1, a2 = cw_acceleration_rows(n, p[0], p[2], v[0], v[1])
        vdot = [vdot[0] + a0, vdot[1] + a1, vdot[2] + a2]
        o0, o1, o2 = r20 * n, r21 * n, r22 * n  # ω_NW_B = R_BW [0, 0, n]
        n0, n1, n2 = w0 + o0, w1 + o1, w2 + o2
        if orbit.gravity_gradient:  # r̂ = R_BW x̂, the first row of R_WB
            g0, g1, g2 = gravity_gradient_rows(n, model.I_rows, r00, r01, r02)
            tb0, tb1, tb2 = tb0 + g0, tb1 + g1, tb2 + g2
    h0 = i00 * n0 + i01 * n1 + i02 * n2  # I ω_N
    h1 = i10 * n0 + i11 * n1 + i12 * n2
    h2 = i20 * n0 + i21 * n1 + i22 * n2
    g0 = tb0 - (n1 * h2 - n2 * h1)  # τ − ω_N × I ω_N
    g1 = tb1 - (n2 * h0 - n0 * h2)
    g2 = tb2 - (n0 * h1 - n1 * h0)
    j00, j01, j02, j10, j11, j12, j20, j21, j22 = model.I_inv_rows
    d0 = j00 * g0 + j01 * g1 + j02 * g2
    d1 = j10 * g0 + j11 * g1 + j12 * g2
    d2 = j20 * g0 + j21 * g1 + j22 * g2
    if orbit is None:
        return vdot, [d0, d1, d2]
    return vdot, [d0 + (w1 * o2 - w2 * o1), d1 + (w2 * o0 - w0 * o2), d2 + (w0 * o1 - w1 * o0)]


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
    vdot, wdot = accelerations_rows(model, state, _as_wrench(F_Bo_W, "F_Bo_W").tolist(), orbit)
    return np.array(vdot), np.array(wdot)


def accelerations_rows(model: RigidBodyModel, state: RigidBodyState, F_Bo_W: list[float],
                       orbit: CircularOrbit | None = None) -> tuple[list[float], list[float]]:
    """:func:`accelerations` on floats: ``F_Bo_W`` six trusted floats; returns two float lists."""
    x = state.floats
    return _rates(model, x[0:3], x[7:10], state.R_rows, x[10:13], F_Bo_W, orbit)


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


def _kernels() -> ModuleType:
    """The compiled kernel (:mod:`dynamics.rigid_body_kernels`), imported on first use
    (:func:`dynamics.kernel_module`): processes that never step a rigid body do not pay for numba."""
    return kernel_module("rigid_body_kernels")


def load_kernels() -> None:
    """Import :func:`step`'s compiled kernel and load its machine code now (compile it if numba's cache has none).

    Otherwise the first :func:`step` pays for it (numba's import and the load, a few tenths of a second; the
    compile, seconds): a realtime step must not. A service that steps bodies calls it when it is built (the
    orbiter's and the contact's models); a configuration check builds none, so it imports no numba.
    """
    kern = _kernels()
    eye = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0)
    kern.rkmk4((0.0, 0.0, 0.0, 1.0, *(0.0,) * 9), (0.0,) * 6, (1.0, *eye, *eye), 1.0, 0.0, kern.NO_ORBIT, 1)


def step(
    model: RigidBodyModel,
    state: RigidBodyState,
    F_Bo_W: ArrayLike | list[float],  # (a list of six floats takes the float path as it is)
    h: float,
    orbit: CircularOrbit | None = None,
    substeps: int = 1,
) -> RigidBodyState:
    """Advance one rigid body by ``h`` with the wrench held constant (in W) over the step.

    RK4 in Runge–Kutta–Munthe-Kaas form (module docstring): fourth order, quaternion
    advanced with :func:`dynamics.spatial.quat_integrate`, unit by construction. The inputs
    are checked once; the stages run in the compiled kernel
    :func:`dynamics.rigid_body_kernels.rkmk4`, bit for bit :func:`step_reference` (the same
    operations on Python floats; the tests hold them equal), which is what keeps a 1 kHz
    co-simulation step cheap.

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
        If ``F_Bo_W`` is not a finite (6,) array, or the result is not finite (overflow).
    ValueError
        If ``h`` is not positive and finite or ``substeps`` < 1.
    """
    Fl, dt, k = _step_args(F_Bo_W, h, substeps)
    kern = _kernels()
    if orbit is None:
        code, x = kern.rkmk4(state.floats, tuple(Fl), model.kernel_rows, dt, 0.0, kern.NO_ORBIT, k)
    else:
        code, x = kern.rkmk4(state.floats, tuple(Fl), model.kernel_rows, dt, float(orbit.n),
                             kern.ORBIT_GG if orbit.gravity_gradient else kern.ORBIT, k)
    if code:  # not finite: the reference raises the error naming the field
        return step_reference(model, state, Fl, h, orbit, substeps)
    return RigidBodyState._trusted(x)


def _step_args(F_Bo_W: ArrayLike | list[float], h: float, substeps: int) -> tuple[list[float], float, int]:
    """:func:`step`'s checked arguments: the wrench as six floats, the sub-step [s] and their number."""
    if type(F_Bo_W) is list and len(F_Bo_W) == 6 and all(map(math.isfinite, F_Bo_W)):
        Fl = [float(x) for x in F_Bo_W]  # the float path's own wrench (six floats)
    else:
        Fl = _as_wrench(F_Bo_W, "F_Bo_W").tolist()
    if not (math.isfinite(h) and h > 0.0):
        raise ValueError(f"h must be > 0 and finite, got {h}")
    if int(substeps) != substeps or substeps < 1:
        raise ValueError(f"substeps must be an integer >= 1, got {substeps}")
    return Fl, h / int(substeps), int(substeps)


def step_reference(
    model: RigidBodyModel,
    state: RigidBodyState,
    F_Bo_W: ArrayLike | list[float],
    h: float,
    orbit: CircularOrbit | None = None,
    substeps: int = 1,
) -> RigidBodyState:
    """:func:`step` on Python floats (:func:`_rkmk4`): the readable reference of its compiled kernel.

    Same parameters, result (bit for bit) and errors as :func:`step`.
    """
    Fl, dt, k = _step_args(F_Bo_W, h, substeps)
    x: Sequence[float] = state.floats
    p, q, v, w = x[0:3], x[3:7], x[7:10], x[10:13]
    R0: tuple[float, ...] | None = state.R_rows
    for _ in range(k):
        p, q, v, w = _rkmk4(model, p, q, R0, v, w, Fl, dt, orbit)
        R0 = None
    return RigidBodyState.from_floats(p, q, v, w)


def _rkmk4(
    model: RigidBodyModel, p0: Sequence[float], q0: Sequence[float], R0: tuple[float, ...] | None,
    v0: Sequence[float], w0: Sequence[float], F: Sequence[float], dt: float, orbit: CircularOrbit | None,
) -> tuple[list[float], tuple[float, ...], list[float], list[float]]:
    """One RK4 Munthe-Kaas step on floats (p, v, w, φ as 3-lists, the quaternion as four floats).

    ``R0`` is ``R(q0)`` if known (nine floats), else None. Stage i has the derivatives
    ``(ṗ, v̇, ẇ, φ̇) = (v_i, vd_i, wd_i, ph_i)``. This is the innermost loop of every 1 kHz
    step, so :func:`_rates` and :func:`dynamics.spatial.rotation_rows` are written out here on
    scalar locals, with their operations in the same order (the result is bit for bit theirs,
    which the tests check); the stage loop keeps one copy of each and calls
    :func:`dynamics.spatial.dexp_inv_rows`.
    """
    P0, P1, P2 = p0
    V0, V1, V2 = v0
    W0, W1, W2 = w0
    t0, t1, t2, f0, f1, f2 = F
    m = model.mass
    i00, i01, i02, i10, i11, i12, i20, i21, i22 = model.I_rows
    j00, j01, j02, j10, j11, j12, j20, j21, j22 = model.I_inv_rows
    fm0, fm1, fm2 = f0 / m, f1 / m, f2 / m
    if orbit is None:
        n = 0.0
        on = gg = False
        cx = cy = cz = cv = gc = 0.0
    else:
        n = orbit.n
        on, gg = True, orbit.gravity_gradient
        n2 = n * n
        cx, cv, cy, cz = 3.0 * n2, 2.0 * n, -2.0 * n, -n2  # cw_acceleration_rows' factors
        gc = 3.0 * n * n  # gravity_gradient_rows' factor
    r00, r01, r02, r10, r11, r12, r20, r21, r22 = (
        R0 if R0 is not None else rotation_rows(*q0))
    half = 0.5 * dt
    # stage state (x position, u velocity, s rate) and the previous stage's derivatives
    x0, x2, u0, u1, u2, s0, s1, s2 = P0, P2, V0, V1, V2, W0, W1, W2  # (x1: no force depends on it)
    pd0 = pd1 = pd2 = vd0 = vd1 = vd2 = wd0 = wd1 = wd2 = ph0 = ph1 = ph2 = 0.0
    e0 = e1 = e2 = 0.0  # φ of the stage
    # k1 + 2 k2 + 2 k3 + k4, summed left to right
    ap0 = ap1 = ap2 = av0 = av1 = av2 = aw0 = aw1 = aw2 = ah0 = ah1 = ah2 = 0.0
    for i in range(4):
        if i:  # stage i at (state + c k_{i-1}), c = h/2, h/2, h
            c = dt if i == 3 else half
            u0, u1, u2 = V0 + c * vd0, V1 + c * vd1, V2 + c * vd2
            s0, s1, s2 = W0 + c * wd0, W1 + c * wd1, W2 + c * wd2
            e0, e1, e2 = c * ph0, c * ph1, c * ph2
            x0, x2 = P0 + c * pd0, P2 + c * pd2  # (the along-track position enters no force)
            w, x, y, z = quat_integrate_rows(q0, e0, e1, e2, 1.0)  # q0 ⊗ exp(φ); its R (rotation_rows):
            r00, r01, r02 = 1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)
            r10, r11, r12 = 2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)
            r20, r21, r22 = 2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)
        # _rates at (x, u, R, s)
        tb0 = r00 * t0 + r10 * t1 + r20 * t2
        tb1 = r01 * t0 + r11 * t1 + r21 * t2
        tb2 = r02 * t0 + r12 * t1 + r22 * t2
        if on:
            vd0, vd1, vd2 = fm0 + (cx * x0 + cv * u1), fm1 + cy * u0, fm2 + cz * x2
            o0, o1, o2 = r20 * n, r21 * n, r22 * n
            n0, n1, n2 = s0 + o0, s1 + o1, s2 + o2
            if gg:
                g0 = i00 * r00 + i01 * r01 + i02 * r02
                g1 = i10 * r00 + i11 * r01 + i12 * r02
                g2 = i20 * r00 + i21 * r01 + i22 * r02
                tb0 = tb0 + gc * (r01 * g2 - r02 * g1)
                tb1 = tb1 + gc * (r02 * g0 - r00 * g2)
                tb2 = tb2 + gc * (r00 * g1 - r01 * g0)
        else:
            vd0, vd1, vd2 = fm0, fm1, fm2
            n0, n1, n2 = s0, s1, s2
        h0 = i00 * n0 + i01 * n1 + i02 * n2
        h1 = i10 * n0 + i11 * n1 + i12 * n2
        h2 = i20 * n0 + i21 * n1 + i22 * n2
        g0 = tb0 - (n1 * h2 - n2 * h1)
        g1 = tb1 - (n2 * h0 - n0 * h2)
        g2 = tb2 - (n0 * h1 - n1 * h0)
        wd0 = j00 * g0 + j01 * g1 + j02 * g2
        wd1 = j10 * g0 + j11 * g1 + j12 * g2
        wd2 = j20 * g0 + j21 * g1 + j22 * g2
        if on:
            wd0, wd1, wd2 = wd0 + (s1 * o2 - s2 * o1), wd1 + (s2 * o0 - s0 * o2), wd2 + (s0 * o1 - s1 * o0)
        if i == 0:
            pd0, pd1, pd2, ph0, ph1, ph2 = V0, V1, V2, W0, W1, W2
            ap0, ap1, ap2, av0, av1, av2 = pd0, pd1, pd2, vd0, vd1, vd2
            aw0, aw1, aw2, ah0, ah1, ah2 = wd0, wd1, wd2, ph0, ph1, ph2
            continue
        pd0, pd1, pd2 = u0, u1, u2
        ph0, ph1, ph2 = dexp_inv_rows(e0, e1, e2, s0, s1, s2)  # φ̇ = dexp⁻¹_φ(w)
        if i == 3:
            ap0, ap1, ap2, av0, av1, av2 = ap0 + pd0, ap1 + pd1, ap2 + pd2, av0 + vd0, av1 + vd1, av2 + vd2
            aw0, aw1, aw2, ah0, ah1, ah2 = aw0 + wd0, aw1 + wd1, aw2 + wd2, ah0 + ph0, ah1 + ph1, ah2 + ph2
        else:
            ap0, ap1, ap2 = ap0 + 2.0 * pd0, ap1 + 2.0 * pd1, ap2 + 2.0 * pd2
            av0, av1, av2 = av0 + 2.0 * vd0, av1 + 2.0 * vd1, av2 + 2.0 * vd2
            aw0, aw1, aw2 = aw0 + 2.0 * wd0, aw1 + 2.0 * wd1, aw2 + 2.0 * wd2
            ah0, ah1, ah2 = ah0 + 2.0 * ph0, ah1 + 2.0 * ph1, ah2 + 2.0 * ph2
    c = dt / 6.0
    return ([P0 + c * ap0, P1 + c * ap1, P2 + c * ap2],
            quat_integrate_rows(q0, c * ah0, c * ah1, c * ah2, 1.0),
            [V0 + c * av0, V1 + c * av1, V2 + c * av2], [W0 + c * aw0, W1 + c * aw1, W2 + c * aw2])


def predict_rows(p_WoBo_W: Sequence[float], quat_WB: Sequence[float], v_WBo_W: Sequence[float],
                 w_WB_B: Sequence[float], a_WBo_W: Sequence[float], wdot_WB_B: Sequence[float],
                 dt: float) -> tuple[list[float], tuple[float, ...], list[float], list[float]]:
    """A rigid body's state ``dt`` ahead of a sample, its accelerations held (on Python floats).

    What a consumer does between a producer's coupling instants when its input port says
    ``between = "predict"`` (:mod:`protocol.coupling`): ``p + v dt + a dt²/2``,
    ``v + a dt``, ``ω + ω̇ dt`` and the attitude turned by the mean rate ``ω + ω̇ dt/2``
    over ``dt``. Exact for constant accelerations in translation; second order in ``dt``
    in rotation.

    Parameters
    ----------
    p_WoBo_W, v_WBo_W, a_WBo_W : sequence of 3 float
        CoM position, velocity, acceleration in W. [m, m/s, m/s²]
    quat_WB : sequence of 4 float
        Attitude [w, x, y, z].
    w_WB_B, wdot_WB_B : sequence of 3 float
        Body rate and its derivative, in B. [rad/s, rad/s²]
    dt : float
        [s]; 0 gives the sample (``dt < 0`` is not a prediction and is not accepted).

    Returns
    -------
    p, quat, v, w : list, tuple, list, list of float
        The state at ``t + dt`` (the quaternion unit, scalar ≥ 0).

    Raises
    ------
    ShapeError
        If ``dt`` is negative or not finite.
    """
    if not dt >= 0.0 or not math.isfinite(dt):
        raise ShapeError(f"dt: expected a finite time >= 0, got {dt!r}")
    p0, p1, p2 = p_WoBo_W
    v0, v1, v2 = v_WBo_W
    a0, a1, a2 = a_WBo_W
    w0, w1, w2 = w_WB_B
    d0, d1, d2 = wdot_WB_B
    if dt == 0.0:
        return [p0, p1, p2], tuple(quat_WB), [v0, v1, v2], [w0, w1, w2]
    p = [p0 + v0 * dt + 0.5 * a0 * dt * dt, p1 + v1 * dt + 0.5 * a1 * dt * dt, p2 + v2 * dt + 0.5 * a2 * dt * dt]
    v = [v0 + a0 * dt, v1 + a1 * dt, v2 + a2 * dt]
    w = [w0 + d0 * dt, w1 + d1 * dt, w2 + d2 * dt]
    q = quat_integrate_rows(quat_WB, w0 + 0.5 * d0 * dt, w1 + 0.5 * d1 * dt, w2 + 0.5 * d2 * dt, dt)
    return p, q, v, w


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


def point_motion(R_WB: ArrayLike, w_WB_B: ArrayLike, v_WBo_W: ArrayLike, a_WBo_W: ArrayLike,
                 wdot_WB_B: ArrayLike, p_BoQo_B: ArrayLike) -> tuple[Array, Array, Array]:
    """Lever arm, twist and classical acceleration of a body-fixed point Q from the body's CoM motion.

    ``r = R_WB p_BoQo_B``, ``ω = R_WB ω_B``, ``ω̇ = R_WB ω̇_B``, ``v_Q = v + ω × r``,
    ``a_Q = a + ω̇ × r + ω × (ω × r)`` (rigid-body kinematics; ω̇ is the same in W and B
    since ``ω̇_W = R ω̇_B`` for ``ω_W = R ω_B``). The arm uses it for the shoulder's motion on the
    orbiter and the grapple point's on the payload.

    Parameters
    ----------
    R_WB : array_like, shape (3, 3)
        The body's attitude.
    w_WB_B : array_like, shape (3,)
        Angular velocity of B in W, expressed in B. [rad/s]
    v_WBo_W, a_WBo_W : array_like, shape (3,)
        Velocity and acceleration of the CoM Bo in W. [m/s, m/s²]
    wdot_WB_B : array_like, shape (3,)
        Angular acceleration, expressed in B. [rad/s²]
    p_BoQo_B : array_like, shape (3,)
        From the CoM to Q, in B. [m]

    Returns
    -------
    p_BoQo_W : ndarray, shape (3,)
        The lever arm in W. [m]
    V_WQ_W : ndarray, shape (6,)
        ``[ω_WB_W; v_WQo_W]``. [rad/s, m/s]
    A_WQ_W : ndarray, shape (6,)
        ``[ω̇_WB_W; a_WQo_W]`` (classical acceleration of Qo). [rad/s², m/s²]

    Raises
    ------
    ShapeError
        If ``R_WB`` is not (3, 3) or a vector is not a finite (3,) array.
    """
    R = np.asarray(R_WB, dtype=np.float64)
    if R.shape != (3, 3):
        raise ShapeError(f"R_WB: expected shape (3, 3), got {R.shape}")
    r, w, v, wd, a = point_motion_rows(
        R.ravel().tolist(), as_vector(w_WB_B, 3, "w_WB_B").tolist(), as_vector(v_WBo_W, 3, "v_WBo_W").tolist(),
        as_vector(a_WBo_W, 3, "a_WBo_W").tolist(), as_vector(wdot_WB_B, 3, "wdot_WB_B").tolist(),
        as_vector(p_BoQo_B, 3, "p_BoQo_B").tolist())
    return np.array(r), np.array([*w, *v]), np.array([*wd, *a])


def point_motion_rows(R_WB: Sequence[float], w_WB_B: Sequence[float], v_WBo_W: Sequence[float],
                      a_WBo_W: Sequence[float], wdot_WB_B: Sequence[float], p_BoQo_B: Sequence[float]
                      ) -> tuple[list[float], list[float], list[float], list[float], list[float]]:
    """:func:`point_motion` on Python floats (its kernel; no checks), ``R_WB`` as nine floats row-major.

    Returns
    -------
    p_BoQo_W, w_WB_W, v_WQo_W, wdot_WB_W, a_WQo_W : list of 3 float
        [m, rad/s, m/s, rad/s², m/s²], in W.
    """
    r = mat_vec_rows(R_WB, *p_BoQo_B)
    w = mat_vec_rows(R_WB, *w_WB_B)
    wd = mat_vec_rows(R_WB, *wdot_WB_B)
    wr = cross_rows(*w, *r)
    v = [a + b for a, b in zip(v_WBo_W, wr, strict=True)]
    a = [x + y + z for x, y, z in zip(a_WBo_W, cross_rows(*wd, *r), cross_rows(*w, *wr), strict=True)]
    return r, w, v, wd, a


def velocity_at(p_WoBo_W: ArrayLike, v_WBo_W: ArrayLike, w_WB_W: ArrayLike, p_WoQo_W: ArrayLike) -> Array:
    """Velocity of the body's material point at Q: ``v_WQo_W = v_WBo_W + ω_WB_W × (p_WoQo_W − p_WoBo_W)``.

    Parameters
    ----------
    p_WoBo_W, v_WBo_W : array_like, shape (3,)
        The CoM's position and velocity, in W. [m, m/s]
    w_WB_W : array_like, shape (3,)
        The body's angular velocity, expressed in W. [rad/s]
    p_WoQo_W : array_like, shape (3,)
        The point, in W. [m]

    Returns
    -------
    ndarray, shape (3,)
        [m/s], in W.

    Raises
    ------
    ShapeError
        If a vector is not a finite (3,) array.
    """
    return np.array(velocity_at_rows(as_vector(p_WoBo_W, 3, "p_WoBo_W").tolist(),
                                     as_vector(v_WBo_W, 3, "v_WBo_W").tolist(),
                                     as_vector(w_WB_W, 3, "w_WB_W").tolist(),
                                     as_vector(p_WoQo_W, 3, "p_WoQo_W").tolist()))


def velocity_at_rows(p_WoBo_W: Sequence[float], v_WBo_W: Sequence[float], w_WB_W: Sequence[float],
                     p_WoQo_W: Sequence[float]) -> list[float]:
    """:func:`velocity_at` on Python floats (its kernel; no checks): three floats. [m/s]"""
    w0, w1, w2 = w_WB_W
    r0, r1, r2 = p_WoQo_W[0] - p_WoBo_W[0], p_WoQo_W[1] - p_WoBo_W[1], p_WoQo_W[2] - p_WoBo_W[2]
    v = v_WBo_W
    return [v[0] + (w1 * r2 - w2 * r1), v[1] + (w2 * r0 - w0 * r2), v[2] + (w0 * r1 - w1 * r0)]


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


# ---------------------------------------------------------------- bodies from config values, wrenches on floats
def body_model(name: str, mass: Any, inertia: Any) -> RigidBodyModel:
    """A :class:`RigidBodyModel` from config values: ``inertia`` as 3 principal moments or 3×3 rows
    about the CoM, in B. [kg, kg·m²]

    Raises
    ------
    ModelError
        If the mass or inertia is inadmissible.
    """
    I = np.asarray(inertia, dtype=np.float64)
    return RigidBodyModel(name, float(mass), np.diag(I) if I.shape == (3,) else I)


def state_from_pose(X_WB: Any, v_WBo_W: Any, w_WB_B: Any) -> RigidBodyState:
    """A state from a pose 6-vector ``[x, y, z, θx, θy, θz]`` (m, rotation vector rad; W), the CoM
    velocity in W [m/s] and the body rates in B [rad/s]."""
    X = pose_from_vector(X_WB)
    return RigidBodyState(X[:3, 3], rotation_to_quat(X[:3, :3]), np.asarray(v_WBo_W, float),
                          np.asarray(w_WB_B, float))


def as_floats(x: Any) -> list[float]:
    """A vector (ndarray or sequence of numbers) as a list of Python floats (the float kernels' input)."""
    return x.tolist() if isinstance(x, np.ndarray) else [float(v) for v in x]


def mean_wrench_Wo(parts: Any, F_field: str, p_field: str, h_ns: int) -> list[float]:
    """Time-average over a step of wrench samples, each referred to W's origin.

    ``Σ_k o_k · [τ_k + p_k × f_k; f_k] / h``: its product with h is exactly the linear impulse
    and the angular impulse about Wo of the samples over the step (the runtime's exact-impulse
    rule for flows). Plain floats.

    Parameters
    ----------
    parts : iterable of (sample, overlap)
        Each a sample with a ``body`` mapping holding ``F_field`` (a wrench [τ; f] (6,) about
        the point ``p_field`` (3,), in W) and its overlap with the step [ns]
        (``protocol.service.Inputs.flow``).
    F_field, p_field : str
    h_ns : int
        The step. [ns]

    Returns
    -------
    F_Wo_W : list of 6 float
        [τ about Wo; f], in W; zero without parts. [N·m, N]
    """
    t0 = t1 = t2 = f0 = f1 = f2 = 0.0
    ndarray = np.ndarray
    for s, o in parts:
        body = s.body
        F, p = body[F_field], body[p_field]
        Fl = F.tolist() if type(F) is ndarray else as_floats(F)
        a0, a1, a2, b0, b1, b2 = Fl
        if b0 == b1 == b2 == a0 == a1 == a2 == 0.0:
            continue                                    # no force, no moment (contact apart)
        w0, w1, w2, _, _, _ = refer_wrench_rows(Fl, p.tolist() if type(p) is ndarray else as_floats(p))
        t0 += o * w0
        t1 += o * w1
        t2 += o * w2
        f0 += o * b0
        f1 += o * b1
        f2 += o * b2
    return [t0 / h_ns, t1 / h_ns, t2 / h_ns, f0 / h_ns, f1 / h_ns, f2 / h_ns]


def wrench_about_origin(F_Po_W: Any, p_WoPo_W: Any) -> Array:
    """A wrench [τ; f] about point P referred to W's origin: ``[τ + p × f; f]`` (6,). [N·m, N]

    Same as ``shift_wrench(F, -p)`` (:mod:`dynamics.spatial`); its kernel is
    :func:`dynamics.spatial.refer_wrench_rows`.
    """
    return np.array(refer_wrench_rows(np.asarray(F_Po_W, dtype=np.float64).tolist(), as_floats(p_WoPo_W)))


def cw_floats(orbit: CircularOrbit | None, state: RigidBodyState) -> list[float] | None:
    """:func:`dynamics.orbit.cw_acceleration` of a body's CoM on floats; None without an orbit. [m/s²]"""
    if orbit is None:
        return None
    p0, _, p2 = state.p_WoBo_W.tolist()
    v0, v1, _ = state.v_WBo_W.tolist()
    return list(cw_acceleration_rows(orbit.n, p0, p2, v0, v1))


def wrench_about_mean_com(F_Wo_W: Any, state: RigidBodyState, mass: float, h: float,
                          a_ext_W: Any = None) -> list[float]:
    """The wrench [τ about Wo; f] referred to the CoM's mean position over the next step.

    ``τ_c = τ_Wo − c̄ × f``, ``c̄ = c₀ + v₀ h/2 + (f/m + a_ext) h²/6``: exact for a force held
    over the step, so the body's angular momentum about Wo changes by exactly ``τ_Wo h`` (the
    services exchange wrenches about Wo; momentum is then conserved to round-off across them).

    Parameters
    ----------
    F_Wo_W : sequence of 6 float
        [τ about Wo; f], in W. [N·m, N]
    state : RigidBodyState
        The body at the start of the step.
    mass : float
        [kg]
    h : float
        Step. [s]
    a_ext_W : sequence of 3 float or None
        Acceleration not due to f (the CW terms). [m/s²]

    Returns
    -------
    list of 6 float
        [τ about the mean CoM; f], in W. [N·m, N]
    """
    t0, t1, t2, f0, f1, f2 = F_Wo_W
    a0, a1, a2 = f0 / mass, f1 / mass, f2 / mass
    if a_ext_W is not None:
        a0, a1, a2 = a0 + a_ext_W[0], a1 + a_ext_W[1], a2 + a_ext_W[2]
    p0, p1, p2 = state.p_WoBo_W.tolist()
    v0, v1, v2 = state.v_WBo_W.tolist()
    hh, h6 = 0.5 * h, h * h / 6.0
    c0, c1, c2 = p0 + v0 * hh + a0 * h6, p1 + v1 * hh + a1 * h6, p2 + v2 * hh + a2 * h6
    return shift_wrench_rows(F_Wo_W, (c0, c1, c2))
