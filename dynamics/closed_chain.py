"""Closed kinematic chains: a loop closed by a weld, a point, a revolute or a planar pin; constraint forces, drift.

MBDYN (Quiocho, Huynh, Crues, seed 004, "Closed Kinematic Chains", eqs. 22–30). A
:class:`dynamics.chain.ChainModel` (a tree, rigid or with beam links) is closed by a
:class:`LoopClosure`: a frame Ca fixed in body a must coincide with a frame Cb fixed in
body b (or in W) — six constraints, as when the payload held by the arm is also latched
to the orbiter (``a`` = the end effector body carrying the payload, ``b`` = the orbiter
base: the latched-and-grappled state)::

    M v̇ + J_Cᵀ λ = τ − C v − K η − D η̇ + Σ J_bᵀ F_b        (eqs. 22–23, 27)
    J_C v̇ = σ*_C = −J̇_C v − 2α J_C v − β² ΔX_C             (eqs. 24, 26, 28)

``J_C = J_a(Ca) − J_b(Cb)`` (6, nv) is the Jacobian of the relative twist of Ca in Cb,
rows ``[ω; v]`` in W; ``ΔX_C = [θ; p_Ca − p_Cb]`` the pose error (eq. 30: θ the rotation
vector of ``R_WCa R_WCbᵀ``, in W); ``ΔẊ_C = J_C v``. The gains of eq. (26) are written as
Baumgarte's ``D_err = 2α``, ``K_err = β²`` (critically damped error dynamics for α = β).
``−λ`` is the wrench the loop exerts on body a at Ca (``λ`` on body b), [τ; f] in W.

Sign relative to Pinocchio: for the same weld as ``pin.RigidConstraintModel(CONTACT_6D,
model, joint_a, X_AC, joint_b, X_BC, LOCAL_WORLD_ALIGNED)``, Pinocchio's ``data.lambda_c``
(``[f; τ]``, the wrench *on* body a) is ``−λ`` reordered: ``λ = −[λ_pin[3:]; λ_pin[:3]]``.
Pinocchio's 6-D contact holds the *spatial* relative acceleration at zero where eq. (24)
holds the classical one: the two agree on the constraint manifold (``J_C v = 0``, as after
:func:`project`) and differ off it (tests/dynamics/test_closed_chain.py checks both).

Drift correction (eq. 26 only bounds the drift): :func:`project` puts (q, v) back on the
constraint manifold — positions by Gauss–Newton steps of least kinetic metric
``Δv = −M⁻¹J_Cᵀ (J_C M⁻¹ J_Cᵀ)⁻¹ ΔX_C`` applied with :func:`dynamics.chain.integrate`,
velocities by the M-orthogonal projection onto ``J_C v = 0`` (the kinetic energy of the
correction is the least possible). :func:`step_rk4` integrates one fixed step with both;
:func:`step_rk4_report` also returns the constraint impulse over the step and the energy
the projection changed.

Energy: with no joint torques, no damping and no external wrench the closed system is
conservative (the weld does no work: ``λᵀ J_C v = 0`` on the manifold). The velocity
projection removes exactly ``½ Δvᵀ M Δv ≥ 0`` of kinetic energy (M at the projected q; the
least of any correction onto ``J_C v = 0``); the position projection moves q by the step's
drift (RK4: O(h⁵) per step without Baumgarte gains) and changes the energy by that drift
times ∂E/∂q. :class:`ClosedStep` reports the sum (``energy_change``, negative when removed).

Closure kinds (``LoopClosure.kind``), each a selection ``S`` (k, 6) of the relative twist
``J_C v`` (rows ``[ω; v]`` in W), its rows fixed in Cb (``x, y, z`` its axes in W)::

    "weld"      k = 6   S = I₆                           the equations above (λ: [τ; f] in W)
    "point"     k = 3   S = [0 I₃]                       Ca's origin on Cb's (a ball joint; λ: f in W)
    "revolute"  k = 5   S = [[xᵀ 0], [yᵀ 0], [0 I₃]]      free rotation about z (λ: [τ_x, τ_y] about x, y; f in W)
    "planar"    k = 2   S = [[0 xᵀ], [0 yᵀ]]              a planar mechanism's pin in Cb's x–y plane (λ: f_x, f_y)

The constraint is ``S J_C v = 0``, so ``S J_C v̇ = −S J̇_C v − Ṡ J_C v`` with ``Ṡ`` the rows
turning with body b (``ẋ = ω_b × x``). Position errors for :func:`project` and Baumgarte:
``S`` applied to ``ΔX_C`` (for a revolute, the rotation vector's components along x and
y vanish exactly when Ca's z is Cb's z). A ``"planar"`` closure leaves the out-of-plane
directions to the mechanism: with every joint axis along z they are held by the tree
itself (a three-dimensional pin there would add rows that are identically zero and make
``J_C`` rank-deficient, which :func:`forward_dynamics` refuses).

A loop with more constraints than the chain can move (the six-joint SRMS closed by six
constraints leaves it no motion but the whole system's and the beams') is fine as long
as ``J_C`` has full row rank: the arm's joints then carry internal loads only.

No I/O, clock or globals.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla
from numpy.typing import ArrayLike, NDArray

from dynamics import chain as ch
from dynamics import spatial as sp
from errors import ModelError, ShapeError, SingularityError

__all__ = [
    "KINDS",
    "LoopClosure",
    "ClosedStep",
    "step_rk4_report",
    "constraint_error",
    "constraint_jacobian",
    "constraint_bias",
    "forward_dynamics",
    "project",
    "step_rk4",
]

Array = NDArray[np.float64]

_COND_MAX = 1e12

#: Closure kinds and their number of constraint rows (module docstring).
KINDS = {"weld": 6, "point": 3, "revolute": 5, "planar": 2}


@dataclass(frozen=True, slots=True, eq=False)
class LoopClosure:
    """A closure of a loop between frame Ca on body a and frame Cb on body b: a weld (they coincide), or a
    point, revolute or planar pin (``kind``, module docstring).

    Attributes
    ----------
    body_a : int
        Body of Ca (a rigid body).
    X_AC : ndarray, shape (4, 4)
        Ca in body a's frame.
    body_b : int
        Body of Cb (a rigid body), or -1: Cb fixed in W.
    X_BC : ndarray, shape (4, 4)
        Cb in body b's frame (in W if ``body_b == -1``).
    kind : str
        ``"weld"`` (default), ``"point"``, ``"revolute"`` (about Cb's z) or ``"planar"`` (a pin
        in Cb's x–y plane): :data:`KINDS`.

    Raises
    ------
    ShapeError
        If a pose is not (4, 4) and rigid.
    ModelError
        On an unknown kind, or a and b the same body.
    """

    body_a: int
    X_AC: Array
    body_b: int
    X_BC: Array
    kind: str = "weld"

    @property
    def rows(self) -> int:
        """Number of constraint rows k (6 weld, 3 point, 5 revolute, 2 planar)."""
        return KINDS[self.kind]

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ModelError(f"LoopClosure.kind: {self.kind!r} not one of {list(KINDS)}")
        for name in ("X_AC", "X_BC"):
            X = np.array(getattr(self, name), dtype=np.float64)
            if X.shape != (4, 4) or not np.all(np.isfinite(X)):
                raise ShapeError(f"{name}: expected a finite (4, 4) pose, got shape {X.shape}")
            R = X[:3, :3]
            if np.abs(R.T @ R - np.eye(3)).max() > 1e-9 or np.linalg.det(R) < 0.0:
                raise ShapeError(f"{name}: rotation not proper orthonormal: {R.tolist()}")
            X.setflags(write=False)
            object.__setattr__(self, name, X)
        if self.body_a == self.body_b:
            raise ModelError(f"LoopClosure: body_a and body_b are both {self.body_a}: no loop")


def _check(model: ch.ChainModel, loop: LoopClosure) -> None:
    for name, b in (("body_a", loop.body_a), ("body_b", loop.body_b)):
        if not (-1 <= b < model.nb) or (name == "body_a" and b < 0):
            raise ShapeError(f"LoopClosure.{name}: {b} is not a body of the chain (nb = {model.nb})")
        if b >= 0 and model.beams and model.beams[b] is not None:
            raise ModelError(f"LoopClosure.{name}: body {model.names[b]!r} is a beam link (rigid bodies only)")


def _frames(model: ch.ChainModel, data: ch.ChainData, q: Array, loop: LoopClosure) -> tuple[Array, Array]:
    X = ch.forward_kinematics(model, data, q)
    X_Ca = X[loop.body_a] @ loop.X_AC
    X_Cb = loop.X_BC.copy() if loop.body_b < 0 else X[loop.body_b] @ loop.X_BC
    return X_Ca, X_Cb


def _selection(loop: LoopClosure, R_WCb: Array) -> Array | None:
    """S (k, 6) of the closure's kind (module docstring); None for a weld (the identity)."""
    if loop.kind == "weld":
        return None
    S = np.zeros((loop.rows, 6))
    x, y = R_WCb[:, 0], R_WCb[:, 1]
    if loop.kind == "point":
        S[:, 3:] = np.eye(3)
    elif loop.kind == "revolute":
        S[0, :3], S[1, :3], S[2:, 3:] = x, y, np.eye(3)
    else:  # planar
        S[0, 3:], S[1, 3:] = x, y
    return S


def _R_WCb(model: ch.ChainModel, data: ch.ChainData, q: Array, loop: LoopClosure) -> Array:
    if loop.body_b < 0:
        return loop.X_BC[:3, :3]
    return ch.forward_kinematics(model, data, q)[loop.body_b, :3, :3] @ loop.X_BC[:3, :3]


def constraint_error(model: ch.ChainModel, data: ch.ChainData, q: ArrayLike, loop: LoopClosure) -> Array:
    """Error of the loop: for a weld the pose error ``ΔX_C = [θ; p_Ca − p_Cb]`` (seed 004 eq. 30), in W;
    for the other kinds ``S ΔX_C`` (k,) (module docstring).

    Parameters
    ----------
    q : array_like, shape (nq,)
    loop : LoopClosure

    Returns
    -------
    dX : ndarray, shape (k,)
        Weld: θ, the rotation vector of ``R_WCa R_WCbᵀ`` [rad], and the position error [m];
        other kinds: ``S`` applied to those.

    Raises
    ------
    ShapeError, ModelError
        On bad input (see :class:`LoopClosure`).
    """
    _check(model, loop)
    X_Ca, X_Cb = _frames(model, data, np.asarray(q, dtype=np.float64), loop)
    th = sp.rotation_vector(X_Ca[:3, :3] @ X_Cb[:3, :3].T)
    e = np.concatenate([th, X_Ca[:3, 3] - X_Cb[:3, 3]])
    S = _selection(loop, X_Cb[:3, :3])
    return e if S is None else S @ e


def constraint_jacobian(model: ch.ChainModel, data: ch.ChainData, q: ArrayLike, loop: LoopClosure) -> Array:
    """``J_C = J_a(Ca) − J_b(Cb)`` (6, nv): the twist of Ca relative to Cb, ``[ω; v]`` in W (seed 004 eq. 25);
    ``S J_C`` (k, nv) for the kinds other than a weld (module docstring)."""
    _check(model, loop)
    qa = np.asarray(q, dtype=np.float64)
    J = ch.frame_jacobian(model, data, qa, loop.body_a, loop.X_AC[:3, 3]).copy()
    if loop.body_b >= 0:
        J -= ch.frame_jacobian(model, data, qa, loop.body_b, loop.X_BC[:3, 3])
    S = _selection(loop, _R_WCb(model, data, qa, loop))
    return J if S is None else S @ J


def constraint_bias(model: ch.ChainModel, data: ch.ChainData, q: ArrayLike, v: ArrayLike, loop: LoopClosure) -> Array:
    """``J̇_C v`` (6,): the relative acceleration of Ca in Cb at zero v̇ (the velocity-product part of eq. 24's σ_C);
    ``S J̇_C v + Ṡ J_C v`` (k,) for the kinds other than a weld (module docstring)."""
    _check(model, loop)
    qa = np.asarray(q, dtype=np.float64)
    va = np.asarray(v, dtype=np.float64)
    z = np.zeros(model.nv)
    A = ch.frame_acceleration(model, data, qa, va, z, loop.body_a, loop.X_AC[:3, 3])
    if loop.body_b >= 0:
        A = A - ch.frame_acceleration(model, data, qa, va, z, loop.body_b, loop.X_BC[:3, 3])
    S = _selection(loop, _R_WCb(model, data, qa, loop))
    if S is None:
        return A
    if loop.kind == "point":  # rows fixed in W
        return S @ A
    J = ch.frame_jacobian(model, data, qa, loop.body_a, loop.X_AC[:3, 3]).copy()
    w_b = np.zeros(3)
    if loop.body_b >= 0:
        Jb = ch.frame_jacobian(model, data, qa, loop.body_b, loop.X_BC[:3, 3])
        J -= Jb
        w_b = Jb[:3] @ va
    V = J @ va
    S_dot = np.zeros_like(S)
    S_dot[:, :3] = np.cross(w_b, S[:, :3])
    S_dot[:, 3:] = np.cross(w_b, S[:, 3:])
    return S @ A + S_dot @ V


def _kkt(M: Array, J: Array, rhs_v: Array, rhs_c: Array) -> tuple[Array, Array]:
    """Solve ``[[M, Jᵀ], [J, 0]] [x; λ] = [rhs_v; rhs_c]`` by the Schur complement ``J M⁻¹ Jᵀ``."""
    try:
        cM = sla.cho_factor(M, check_finite=False)
    except np.linalg.LinAlgError as err:
        raise SingularityError(f"mass matrix not positive definite ({err})") from err
    MiJt = sla.cho_solve(cM, J.T, check_finite=False)
    Mi_r = sla.cho_solve(cM, rhs_v, check_finite=False)
    S = J @ MiJt
    c = np.linalg.cond(S)
    if not np.isfinite(c) or c > _COND_MAX:
        raise SingularityError(f"loop closure: J_C M^-1 J_C^T singular (condition number {c:.3g}): "
                               "the chain cannot move the constraint in some direction (singular posture)")
    lam = np.linalg.solve(S, J @ Mi_r - rhs_c)
    return Mi_r - MiJt @ lam, lam  # type: ignore[return-value]  # numpy stubs: float64 in, floating out


def forward_dynamics(
    model: ch.ChainModel,
    data: ch.ChainData,
    q: ArrayLike,
    v: ArrayLike,
    tau: ArrayLike,
    loop: LoopClosure,
    F_ext: ArrayLike | None = None,
    *,
    alpha: float = 0.0,
    beta: float = 0.0,
) -> tuple[Array, Array]:
    """Accelerations and constraint wrench of the closed chain (seed 004 eqs. 22–28).

    Parameters
    ----------
    q : array_like, shape (nq,)
    v : array_like, shape (nv,)
    tau : array_like, shape (nv,)
        Generalized forces (as :func:`dynamics.chain.forward_dynamics`).
    loop : LoopClosure
    F_ext : array_like, shape (nb, 6), optional
        ``F_Bo_W`` per body.
    alpha, beta : float
        Baumgarte gains of eq. (26): ``D_err = 2α``, ``K_err = β²``. [1/s]

    Returns
    -------
    vdot : ndarray, shape (nv,)
    lam : ndarray, shape (k,)
        Constraint wrench: ``−λ`` acts on body a at Ca, ``+λ`` on body b at Cb, [τ; f] in W for a
        weld (k = 6); for the other kinds the components along S's rows, the wrench on b
        being ``Sᵀ λ`` (module docstring). [N·m, N]

    Raises
    ------
    ShapeError, ModelError
        On bad input.
    SingularityError
        If ``J_C`` loses rank (a singular posture of the loop).
    """
    _check(model, loop)
    qa = np.asarray(q, dtype=np.float64)
    va = sp.as_vector(v, model.nv, "v")
    ta = sp.as_vector(tau, model.nv, "tau")
    M = ch.mass_matrix(model, data, qa).copy()
    phi = ta - ch.inverse_dynamics(model, data, qa, va, np.zeros(model.nv), F_ext)
    J = constraint_jacobian(model, data, qa, loop)
    sigma = -constraint_bias(model, data, qa, va, loop)
    if alpha or beta:
        sigma = sigma - 2.0 * alpha * (J @ va) - beta * beta * constraint_error(model, data, qa, loop)
    return _kkt(M, J, phi, sigma)


def project(
    model: ch.ChainModel,
    data: ch.ChainData,
    q: ArrayLike,
    v: ArrayLike,
    loop: LoopClosure,
    *,
    tol: float = 1e-12,
    max_iter: int = 8,
    velocities: bool = True,
) -> tuple[Array, Array]:
    """Put (q, v) back on the constraint manifold: ``ΔX_C = 0``, then ``J_C v = 0``.

    Positions by Gauss–Newton steps of least kinetic metric, velocities by the
    M-orthogonal projection (module docstring).

    Parameters
    ----------
    q : array_like, shape (nq,)
    v : array_like, shape (nv,)
    loop : LoopClosure
    tol : float
        Largest admissible |ΔX_C| component after projection. [m, rad]
    max_iter : int
    velocities : bool
        False: project the positions only (v returned as given).

    Returns
    -------
    q, v : ndarray
        Projected.

    Raises
    ------
    SingularityError
        If the position iteration does not reach ``tol`` (a singular posture or a
        violation too large to correct).
    """
    _check(model, loop)
    qa = np.array(q, dtype=np.float64)
    va = np.array(v, dtype=np.float64)
    e = constraint_error(model, data, qa, loop)
    it = 0
    while np.abs(e).max() > tol:
        if it >= max_iter:
            raise SingularityError(f"loop closure: position projection did not converge in {max_iter} iterations "
                                   f"(error {np.abs(e).max():.3g})")
        M = ch.mass_matrix(model, data, qa).copy()
        J = constraint_jacobian(model, data, qa, loop)
        dv, _ = _kkt(M, J, np.zeros(model.nv), -e)
        qa = ch.integrate(model, qa, dv, 1.0)
        e = constraint_error(model, data, qa, loop)
        it += 1
    if not velocities:
        return qa, va
    M = ch.mass_matrix(model, data, qa).copy()
    J = constraint_jacobian(model, data, qa, loop)
    dv, _ = _kkt(M, J, np.zeros(model.nv), -(J @ va))
    return qa, va + dv


@dataclass(frozen=True, slots=True, eq=False)
class ClosedStep:
    """One step of :func:`step_rk4_report`.

    Attributes
    ----------
    q, v : ndarray, shapes (nq,), (nv,)
        The state at the step's end, projected onto the constraint manifold.
    lam_start : ndarray, shape (k,)
        The constraint wrench λ at the step's start (on body b at Cb, [τ; f] in W for a weld;
        module docstring for the sign and the other kinds). [N·m, N]
    impulse : ndarray, shape (k,)
        ``∫ λ dt`` over the step by the RK4 weights (h/6 (λ₁ + 2λ₂ + 2λ₃ + λ₄), the stages'
        λ, each in W at the stage's configuration); ``−impulse`` acts on body a. [N·m·s, N·s]
    energy_change : float
        Mechanical energy (:func:`dynamics.chain.kinetic_energy` plus
        :func:`dynamics.chain.potential_energy`) after the projection minus before it. [J]
    kinetic_removed : float
        ``½ Δvᵀ M Δv`` of the velocity projection (≥ 0). [J]
    """

    q: Array
    v: Array
    lam_start: Array
    impulse: Array
    energy_change: float
    kinetic_removed: float


def step_rk4_report(
    model: ch.ChainModel,
    data: ch.ChainData,
    q: ArrayLike,
    v: ArrayLike,
    tau: ArrayLike,
    h: float,
    loop: LoopClosure,
    F_ext: ArrayLike | None = None,
    *,
    alpha: float = 0.0,
    beta: float = 0.0,
    tol: float = 1e-12,
) -> ClosedStep:
    """:func:`step_rk4` with the step's constraint impulse and the energy its projection changed.

    Parameters and errors as :func:`step_rk4`.

    Returns
    -------
    ClosedStep
    """
    q0 = np.array(q, dtype=np.float64)
    v0 = sp.as_vector(v, model.nv, "v").copy()
    lams: list[Array] = []

    def accel(qq: Array, vv: Array) -> Array:
        a, lam = forward_dynamics(model, data, qq, vv, tau, loop, F_ext, alpha=alpha, beta=beta)
        lams.append(lam)
        return a

    q1, v1 = ch.step_rk4_with(model, q0, v0, h, accel)
    e_before = ch.kinetic_energy(model, data, q1, v1) + ch.potential_energy(model, q1)
    q2, v_mid = project(model, data, q1, v1, loop, tol=tol, velocities=False)
    q2, v2 = project(model, data, q2, v_mid, loop, tol=tol)
    dv = v2 - v_mid
    removed = 0.5 * float(dv @ ch.mass_matrix(model, data, q2) @ dv)
    e_after = ch.kinetic_energy(model, data, q2, v2) + ch.potential_energy(model, q2)
    impulse = h / 6.0 * (lams[0] + 2.0 * lams[1] + 2.0 * lams[2] + lams[3])
    return ClosedStep(q2, v2, lams[0], impulse, e_after - e_before, removed)


def step_rk4(
    model: ch.ChainModel,
    data: ch.ChainData,
    q: ArrayLike,
    v: ArrayLike,
    tau: ArrayLike,
    h: float,
    loop: LoopClosure,
    F_ext: ArrayLike | None = None,
    *,
    alpha: float = 0.0,
    beta: float = 0.0,
    tol: float = 1e-12,
) -> tuple[Array, Array, Array]:
    """One RK4 step of the closed chain with inputs held, then :func:`project`.

    Runge–Kutta–Munthe-Kaas on the base attitude as :func:`dynamics.chain.step_rk4`.

    Parameters
    ----------
    q, v, tau, loop, F_ext, alpha, beta
        As :func:`forward_dynamics`.
    h : float
        [s]
    tol : float
        Projection tolerance. [m, rad]

    Returns
    -------
    q_next, v_next : ndarray
    lam : ndarray, shape (k,)
        The constraint wrench at the start of the step only (on body b at Cb; module
        docstring), not a mean over the step: for the impulse over the step and the energy
        the projection changed, :func:`step_rk4_report`.
    """
    q0 = np.array(q, dtype=np.float64)
    v0 = sp.as_vector(v, model.nv, "v").copy()
    lam0: list[Array] = []

    def accel(qq: Array, vv: Array) -> Array:
        a, lam = forward_dynamics(model, data, qq, vv, tau, loop, F_ext, alpha=alpha, beta=beta)
        if not lam0:
            lam0.append(lam)
        return a

    q1, v1 = ch.step_rk4_with(model, q0, v0, h, accel)
    q1, v1 = project(model, data, q1, v1, loop, tol=tol)
    return q1, v1, lam0[0]
