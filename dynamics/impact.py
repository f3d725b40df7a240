"""Impulsive impact between multibody systems and rigid bodies (Cyril et al., seed 002).

All vectors are expressed in one frame W (LVLH or inertial) at the instant of impact;
generalized coordinates do not change over the impact (seed 002, assumption of §3), only
the generalized velocities jump. The contact transmits a force impulse but no moment
(seed 002, second assumption of §3), so contact Jacobians are the translational
Jacobians of the contact points, shape (3, n) — (m, n) with any m is accepted by the
multibody–multibody law.

Names follow the seed: chaser (manipulator-carrying system) with generalized mass
``M`` (n, n), generalized velocity ``psid`` (ψ̇, n) and contact Jacobian ``J`` (3, n)
giving the velocity of its contact point h, ``v_h = J ψ̇``; target (payload) ``p``. The
impulse returned is always the impulse **on the chaser** at its contact point; the
target receives its opposite. Subscripts ``i`` / ``f``: before / after the impact.

Locked joints
-------------
``locked`` lists chaser coordinates whose rates the impact leaves unchanged (a braked
or position-held joint, e.g. the "locked end effector" of seed 002 §4): the brake takes
whatever internal impulse that needs, so momentum is still conserved. Internally the
chaser's mobility ``W = S (Sᵀ M S)⁻¹ Sᵀ`` (S selects the free coordinates) replaces
``M⁻¹``; with nothing locked ``W = M⁻¹``.

Contents
--------
- :func:`plastic_impact_multibody` — two multibody systems, plastic (eqs. 7–12);
- :func:`plastic_impact_payload` — chaser vs rigid payload, plastic (eqs. 13–20);
- :func:`nonplastic_impact_payload` — chaser vs rigid payload with energy-loss ``r_E``
  and friction ``r_f`` (eqs. 21–53), with the root choice of eqs. 50–53;
- :func:`point_impact` — two rigid bodies (:mod:`dynamics.rigid_body`) at a point with
  Newton restitution ``e`` and Coulomb friction ``mu``; what the contact service uses;
- :func:`arm_tip_impact` — the simplest case in one call: a point of an arm
  (:mod:`dynamics.chain`) strikes a free rigid body, frictionless, restitution ``e``.

Results are values: their arrays are new and read-only.

No I/O, no globals.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla
from numpy.typing import ArrayLike, NDArray

from dynamics import chain as ch
from dynamics.rigid_body import (
    RigidBodyModel,
    RigidBodyState,
    apply_impulse,
    point_mobility,
    point_velocity,
)
from dynamics.spatial import as_vector, skew
from errors import ModelError, NoSolutionError, ShapeError, SingularityError

__all__ = [
    "MultibodyImpact",
    "PayloadImpact",
    "PointImpact",
    "TipImpact",
    "arm_tip_impact",
    "kinetic_energy",
    "nonplastic_impact_payload",
    "plastic_impact_multibody",
    "plastic_impact_payload",
    "point_impact",
]

Array = NDArray[np.float64]


# ---------------------------------------------------------------- results


def _freeze(*arrays: Array) -> None:
    """Make result arrays read-only (a result is a value: nothing of the caller's aliases it)."""
    for a in arrays:
        a.setflags(write=False)


@dataclass(frozen=True, slots=True)
class MultibodyImpact:
    """Post-impact state of two multibody systems.

    Attributes
    ----------
    psid_f : ndarray, shape (n,)
        Chaser generalized velocity after the impact.
    psid_pf : ndarray, shape (n_p,)
        Target generalized velocity after the impact.
    lambda_rows : ndarray, shape (m,)
        The impulse along each row of the contact Jacobians (the constraint's multipliers):
        the chaser receives the generalized impulse ``Jᵀ λ``, the target ``−J_pᵀ λ``. With
        ``J`` the translational Jacobian of the contact point in W (m = 3) it is the impulse
        on the chaser's contact point, in W; with one row (a normal-only contact) it is the
        normal impulse, an array of shape (1,). [N·s for point rows]

    All arrays are new and read-only.
    """

    psid_f: Array
    psid_pf: Array
    lambda_rows: Array

    def __post_init__(self) -> None:
        _freeze(self.psid_f, self.psid_pf, self.lambda_rows)

    @property
    def impulse_W(self) -> Array:
        """Deprecated alias of :attr:`lambda_rows` (renamed in dynamics 0.2.0; warns)."""
        from dynamics import _deprecated

        _deprecated("MultibodyImpact.impulse_W", "MultibodyImpact.lambda_rows")
        return self.lambda_rows


@dataclass(frozen=True, slots=True)
class PayloadImpact:
    """Post-impact state of a chaser and a rigid payload.

    Attributes
    ----------
    psid_f : ndarray, shape (n,)
        Chaser generalized velocity after the impact.
    v_pf : ndarray, shape (3,)
        Payload CoM velocity after the impact, in W. [m/s]
    w_pf : ndarray, shape (3,)
        Payload angular velocity after the impact, in W. [rad/s]
    impulse_W : ndarray, shape (3,)
        Impulse on the chaser at the contact point, in W; the payload receives its
        opposite at its contact point b. [N·s]
    v_recede : float
        ``−v_pf·n``: the payload CoM's velocity away from the end effector along the line
        of impact n (n from payload to end effector) after the impact. Seed 002 calls it
        ``e`` (eq. 28); it is a velocity, not a coefficient of restitution. For a plastic
        impact it is computed only if ``n_W`` is given, else 0. [m/s]
    roots : tuple[float, float]
        Both roots of the energy equation (49) as normal impulses ``e* = m_p (v_recede + x)``,
        ``x = v_pi·n`` [N·s], smaller first; for a plastic impact ``(f·n, f·n)`` (0 without
        ``n_W``).

    All arrays are new and read-only.
    """

    psid_f: Array
    v_pf: Array
    w_pf: Array
    impulse_W: Array
    v_recede: float
    roots: tuple[float, float]

    def __post_init__(self) -> None:
        _freeze(self.psid_f, self.v_pf, self.w_pf, self.impulse_W)


@dataclass(frozen=True, slots=True)
class PointImpact:
    """Result of :func:`point_impact`.

    Attributes
    ----------
    P_W : ndarray, shape (3,)
        Impulse on body A at the contact point C, in W; B receives −P_W. [N·s]
    state_A, state_B : RigidBodyState
        States just after the impact (``state_B`` is None for a fixed B).
    sliding : bool
        True if the friction cone limited the tangential impulse.

    ``P_W`` is new and read-only.
    """

    P_W: Array
    state_A: RigidBodyState
    state_B: RigidBodyState | None
    sliding: bool

    def __post_init__(self) -> None:
        _freeze(self.P_W)


@dataclass(frozen=True, slots=True)
class TipImpact:
    """Result of :func:`arm_tip_impact`.

    Attributes
    ----------
    P_W : ndarray, shape (3,)
        Impulse on the arm at the contact point C, in W, along the normal (``λ n``, λ ≥ 0);
        the target receives ``−P_W`` at C. [N·s]
    v_f : ndarray, shape (nv,)
        The arm's generalized velocity after the impact (:mod:`dynamics.chain` coordinates).
    V_WT_W_f : ndarray, shape (6,)
        The target's twist after the impact, ``[ω_WT_W; v_WTcm_W]`` (its CoM's velocity),
        in W. [rad/s, m/s]
    energy_loss : float
        Kinetic energy of arm and target before minus after, ``½ (1 − e²) u_n² / k`` ≥ 0
        (``k`` the effective inverse mass along n). [J]
    u_n_i, u_n_f : float
        Normal velocity of the arm's point C relative to the target's point C, along n,
        before (< 0: approaching) and after (``−e u_n_i``). [m/s]

    All arrays are new and read-only.
    """

    P_W: Array
    v_f: Array
    V_WT_W_f: Array
    energy_loss: float
    u_n_i: float
    u_n_f: float

    def __post_init__(self) -> None:
        _freeze(self.P_W, self.v_f, self.V_WT_W_f)


# ---------------------------------------------------------------- input checks


def _matrix(x: ArrayLike, rows: int | None, cols: int | None, name: str) -> Array:
    a = np.asarray(x, dtype=np.float64)
    if a.ndim != 2 or (rows is not None and a.shape[0] != rows) or (cols is not None and a.shape[1] != cols):
        want = f"({rows if rows is not None else 'm'}, {cols if cols is not None else 'n'})"
        raise ShapeError(f"{name}: expected shape {want}, got {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ShapeError(f"{name}: not finite")
    return a


def _mass_matrix(M: ArrayLike, name: str) -> Array:
    a = np.asarray(M, dtype=np.float64)
    if a.ndim != 2 or a.shape[0] != a.shape[1] or a.shape[0] == 0:
        raise ShapeError(f"{name}: expected a square (n, n) matrix, got {a.shape}")
    a = _matrix(a, None, None, name)
    if np.max(np.abs(a - a.T)) > 1e-9 * max(float(np.max(np.abs(a))), 1e-300):
        raise ModelError(f"{name}: generalized mass matrix is not symmetric")
    return 0.5 * (a + a.T)


def _mobility(M: Array, locked: Sequence[int], name: str) -> Array:
    """``S (Sᵀ M S)⁻¹ Sᵀ`` with S selecting the coordinates not in ``locked``."""
    n = M.shape[0]
    lk = sorted({int(k) for k in locked})
    if any(k < 0 or k >= n for k in lk):
        raise ShapeError(f"locked: indices must lie in [0, {n}), got {list(locked)}")
    free = np.setdiff1d(np.arange(n), lk)
    W = np.zeros((n, n))
    if free.size == 0:
        return W
    try:
        c = sla.cho_factor(M[np.ix_(free, free)])
    except np.linalg.LinAlgError as err:
        raise ModelError(f"{name}: generalized mass matrix is not positive definite") from err
    W[np.ix_(free, free)] = sla.cho_solve(c, np.eye(free.size))
    return W


def _unit(x: ArrayLike, name: str) -> Array:
    a = as_vector(x, 3, name)
    nrm = float(np.linalg.norm(a))
    if nrm < 1e-12:
        raise ShapeError(f"{name}: zero vector cannot give a direction: {a.tolist()}")
    return a / nrm


def kinetic_energy(M: ArrayLike, psid: ArrayLike) -> float:
    """``½ ψ̇ᵀ M ψ̇`` [J] for a generalized mass matrix (n, n) and velocity (n,)."""
    Ma = np.asarray(M, dtype=np.float64)
    v = np.asarray(psid, dtype=np.float64)
    return float(0.5 * v @ Ma @ v)


# ---------------------------------------------------------------- Cyril, plastic


def plastic_impact_multibody(
    M: ArrayLike,
    J: ArrayLike,
    psid_i: ArrayLike,
    M_p: ArrayLike,
    J_p: ArrayLike,
    psid_pi: ArrayLike,
    *,
    locked: Sequence[int] = (),
) -> MultibodyImpact:
    """Plastic impact of two multibody systems: the contact points move together after it.

    Seed 002 eqs. (2), (3), (7), (8): ``M Δψ̇ = Jᵀ f̂``, ``M_p Δψ̇_p = −J_pᵀ f̂`` and
    ``J ψ̇_f = J_p ψ̇_pf``. Solved in impulse form::

        f̂ = −(J W Jᵀ + J_p M_p⁻¹ J_pᵀ)⁻¹ (J ψ̇_i − J_p ψ̇_pi)
        ψ̇_f = ψ̇_i + W Jᵀ f̂,   ψ̇_pf = ψ̇_pi − M_p⁻¹ J_pᵀ f̂

    (W = M⁻¹ unless coordinates are locked). When ``J_p`` is square and invertible
    (P = J_p J_pᵀ and Q = J_pᵀ J_p non-singular, the seed's condition) this is exactly
    eqs. (9)–(12), ``ψ̇_f = G⁻¹ H``; the impulse form also holds for a target with more
    coordinates than contact directions, where eq. (9) would not determine ``ψ̇_pf``.

    Parameters
    ----------
    M : array_like, shape (n, n)
        Chaser generalized mass matrix (symmetric positive definite).
    J : array_like, shape (m, n)
        Chaser contact-point Jacobian in W (m = 3 for a force-only contact).
    psid_i : array_like, shape (n,)
        Chaser generalized velocity before impact.
    M_p, J_p, psid_pi : array_like, shapes (n_p, n_p), (m, n_p), (n_p,)
        The same for the target.
    locked : sequence of int
        Chaser coordinates whose rates the impact leaves unchanged (module docstring).

    Returns
    -------
    MultibodyImpact

    Raises
    ------
    ShapeError
        On inconsistent shapes or non-finite input.
    ModelError
        If a mass matrix is not symmetric positive definite.
    SingularityError
        If neither system can move the contact point in some direction
        (``J W Jᵀ + J_p M_p⁻¹ J_pᵀ`` singular).
    """
    Mc = _mass_matrix(M, "M")
    n = Mc.shape[0]
    Jc = _matrix(J, None, n, "J")
    m = Jc.shape[0]
    v = as_vector(psid_i, n, "psid_i")
    Mp = _mass_matrix(M_p, "M_p")
    npp = Mp.shape[0]
    Jp = _matrix(J_p, m, npp, "J_p")
    vp = as_vector(psid_pi, npp, "psid_pi")
    W = _mobility(Mc, locked, "M")
    Wp = _mobility(Mp, (), "M_p")
    A = Jc @ W @ Jc.T + Jp @ Wp @ Jp.T
    try:
        c = sla.cho_factor(A)
    except np.linalg.LinAlgError as err:
        raise SingularityError(
            "plastic impact: the contact point cannot be moved in some direction by either system "
            f"(J W Jᵀ + J_p M_p⁻¹ J_pᵀ singular, eigenvalues {np.linalg.eigvalsh(A).tolist()})"
        ) from err
    f = -sla.cho_solve(c, Jc @ v - Jp @ vp)
    return MultibodyImpact(v + W @ (Jc.T @ f), vp - Wp @ (Jp.T @ f), f)


def _payload_inputs(
    M: ArrayLike, J: ArrayLike, psid_i: ArrayLike, m_p: float, I_p_W: ArrayLike, r_pb_W: ArrayLike,
    v_pi: ArrayLike, w_pi: ArrayLike,
) -> tuple[Array, Array, Array, float, Array, Array, Array, Array]:
    Mc = _mass_matrix(M, "M")
    n = Mc.shape[0]
    Jc = _matrix(J, 3, n, "J")
    v = as_vector(psid_i, n, "psid_i")
    mp = float(m_p)
    if not (np.isfinite(mp) and mp > 0.0):
        raise ModelError(f"payload mass m_p must be > 0, got {m_p}")
    Ip = _matrix(I_p_W, 3, 3, "I_p_W")
    if np.max(np.abs(Ip - Ip.T)) > 1e-9 * float(np.max(np.abs(Ip))) or np.linalg.eigvalsh(0.5 * (Ip + Ip.T))[0] <= 0:
        raise ModelError(f"payload inertia I_p_W must be symmetric positive definite, got {Ip.tolist()}")
    return (
        Mc, Jc, v, mp, 0.5 * (Ip + Ip.T), as_vector(r_pb_W, 3, "r_pb_W"),
        as_vector(v_pi, 3, "v_pi"), as_vector(w_pi, 3, "w_pi"),
    )


def _solve_locked(G: Array, H: Array, psid_i: Array, locked: Sequence[int]) -> Array:
    """Solve ``G x = H`` on the free coordinates, holding the locked ones at ``psid_i``."""
    n = G.shape[0]
    lk = sorted({int(k) for k in locked})
    if any(k < 0 or k >= n for k in lk):
        raise ShapeError(f"locked: indices must lie in [0, {n}), got {list(locked)}")
    free = np.setdiff1d(np.arange(n), lk)
    x = psid_i.copy()
    if free.size:
        lk_a = np.asarray(lk, dtype=np.intp)
        rhs = H[free] - G[np.ix_(free, lk_a)] @ psid_i[lk_a] if lk else H[free]
        x[free] = sla.solve(G[np.ix_(free, free)], rhs, assume_a="pos")
    return x


def plastic_impact_payload(
    M: ArrayLike,
    J: ArrayLike,
    psid_i: ArrayLike,
    m_p: float,
    I_p_W: ArrayLike,
    r_pb_W: ArrayLike,
    v_pi: ArrayLike,
    w_pi: ArrayLike,
    *,
    n_W: ArrayLike | None = None,
    locked: Sequence[int] = (),
) -> PayloadImpact:
    """Plastic impact (capture) of a rigid payload by a multibody chaser, seed 002 eqs. (13)–(20).

    With ``R_pb = [r_pb×]`` and ``K = I₃ − m_p R_pb I_p⁻¹ R_pb`` (18)::

        G = m_p Jᵀ K⁻¹ J + M                                               (16)
        H = −m_p Jᵀ [K⁻¹(−m_p R_pb I_p⁻¹ R_pb v_pi + R_pb ω_pi) − v_pi] + M ψ̇_i   (17)
        ψ̇_f = G⁻¹ H                                                        (10)
        v_pf = K⁻¹ (J ψ̇_f − m_p R_pb I_p⁻¹ R_pb v_pi + R_pb ω_pi)            (19)
        ω_pf = m_p I_p⁻¹ R_pb (v_pf − v_pi) + ω_pi                          (20)

    The OCR of eq. (17) is garbled (a hat on the last M, bracket placement); the form
    above is re-derived from (19), (20) and the integrated chaser equation (39),
    ``m_p Jᵀ (v_pf − v_pi) + M (ψ̇_f − ψ̇_i) = 0``, and agrees with the legible parts.
    With ``locked`` coordinates only the free rows of ``G ψ̇_f = H`` hold.

    Parameters
    ----------
    M : array_like, shape (n, n)
        Chaser generalized mass matrix.
    J : array_like, shape (3, n)
        Jacobian of the chaser's contact point h, in W: ``v_h = J ψ̇``.
    psid_i : array_like, shape (n,)
        Chaser generalized velocity before impact.
    m_p : float
        Payload mass. [kg]
    I_p_W : array_like, shape (3, 3)
        Payload inertia about its CoM, expressed in W. [kg·m²]
    r_pb_W : array_like, shape (3,)
        From the payload CoM to its contact point b, in W. [m]
    v_pi, w_pi : array_like, shape (3,)
        Payload CoM velocity and angular velocity before impact, in W. [m/s, rad/s]
    n_W : array_like, shape (3,), optional
        Contact normal from payload to end effector; only used to report ``e``.
    locked : sequence of int
        Chaser coordinates whose rates the impact leaves unchanged.

    Returns
    -------
    PayloadImpact

    Raises
    ------
    ShapeError, ModelError
        On bad shapes, non-finite values, non-positive mass or inertia.
    """
    Mc, Jc, v, mp, Ip, r, vp, wp = _payload_inputs(M, J, psid_i, m_p, I_p_W, r_pb_W, v_pi, w_pi)
    R = skew(r)
    Ip_inv = np.linalg.inv(Ip)
    K = np.eye(3) - mp * R @ Ip_inv @ R
    c_p = -mp * R @ Ip_inv @ R @ vp + R @ wp
    G = mp * Jc.T @ np.linalg.solve(K, Jc) + Mc
    H = -mp * Jc.T @ (np.linalg.solve(K, c_p) - vp) + Mc @ v
    psid_f = _solve_locked(G, H, v, locked)
    v_pf = np.linalg.solve(K, Jc @ psid_f + c_p)
    w_pf = mp * Ip_inv @ R @ (v_pf - vp) + wp
    f = -mp * (v_pf - vp)
    e = 0.0 if n_W is None else float(-v_pf @ _unit(n_W, "n_W"))
    lam = 0.0 if n_W is None else float(f @ _unit(n_W, "n_W"))
    return PayloadImpact(psid_f, v_pf, w_pf, f, e, (lam, lam))  # type: ignore[arg-type]  # numpy stubs: float64 in, floating out


# ---------------------------------------------------------------- Cyril, non-plastic


def nonplastic_impact_payload(
    M: ArrayLike,
    J: ArrayLike,
    psid_i: ArrayLike,
    m_p: float,
    I_p_W: ArrayLike,
    r_pb_W: ArrayLike,
    v_pi: ArrayLike,
    w_pi: ArrayLike,
    n_W: ArrayLike,
    r_E: float,
    r_f: float,
    *,
    locked: Sequence[int] = (),
) -> PayloadImpact:
    """Non-plastic impact with a rigid payload: energy-loss ``r_E`` and friction ``r_f``, seed 002 eqs. (21)–(53).

    ``r_E`` is the fraction of the plastic impact's kinetic-energy loss that is lost
    (21); ``r_f`` the fraction of the plastic impact's friction impulse that acts (22).
    Steps, as in the seed:

    1. The plastic impact (:func:`plastic_impact_payload`) gives its loss ``ΔKE_p`` (27)
       and its impulse on the chaser; its friction part is ``p_t,p = (f̂·t) t`` (23)–(25),
       with ``t`` the direction of the pre-impact tangential slip of the hand relative to
       the payload (26). If there is no slip, ``t`` is taken along the tangential part of
       the plastic impulse (the seed leaves this case open).
    2. The impulse on the chaser is ``e* n + r_f p_t,p`` with the normal impulse
       ``e* = m_p (e + x)`` (35), ``x = v_pi·n``, ``e = −v_pf·n`` (28); the payload
       velocity follows (32), (34)/(38), the chaser's (40)–(43) (``M⁻¹`` → the mobility
       ``W`` when coordinates are locked).
    3. The final kinetic energy must be ``KE_i − r_E |ΔKE_p|`` (44), (45): a quadratic
       in ``e*``, equivalent to the seed's (49) in ``e`` (its ``p`` is ``2 m_p²`` times ours).
       It is formed here directly from the kinetic energy of the three parts because
       the OCR of eq. (47) is garbled (a term ``−2e² I_p z`` that cannot be a scalar);
       the coefficients of (49) that are legible agree with it.
    4. Root choice (50)–(53): the normal impulse must not pull the bodies together and
       must leave them separating, so the root with the larger normal impulse is taken
       (post-impact normal separation velocity ``n·(v_h − v_b)`` increases with ``e*``;
       at the smaller root the contact would still be closing). This satisfies (52)
       (``|e + x|`` shrinks as ``r_E`` grows, down to the double root of the plastic
       case) and, whenever the approach is driven by the payload, the sign rules
       (50)/(51). Where the seed's (51) would demand a pulling impulse (payload CoM
       receding, ``x < 0``, while the hand catches up) the physical, separating root
       is kept; ``e`` is reported either way.

    If the contact is not closing along n (``n·(v_h − v_b) ≥ 0`` before impact) there is
    no impact: the pre-impact velocities are returned with a zero impulse.

    A double root within rounding is accepted (``r_E = r_f = 1`` reproduces the plastic
    result in the plane of the motion). Parameters with no real root, or whose only
    roots leave the contact closing, raise :class:`NoSolutionError` naming ``r_E``
    and ``r_f`` (e.g. ``r_E = 1, r_f = 0``: the plastic loss needs friction).

    Parameters
    ----------
    M, J, psid_i, m_p, I_p_W, r_pb_W, v_pi, w_pi
        As in :func:`plastic_impact_payload` (frames W, SI units).
    n_W : array_like, shape (3,)
        Line of impact, from the payload towards the end effector (normalised here).
    r_E : float
        Energy-loss parameter, 0 (elastic) … 1 (plastic loss).
    r_f : float
        Friction parameter, 0 (frictionless) … 1 (plastic friction impulse).
    locked : sequence of int
        Chaser coordinates whose rates the impact leaves unchanged.

    Returns
    -------
    PayloadImpact
        With ``e`` and both roots ``roots`` (normal impulses e*, ascending).

    Raises
    ------
    NoSolutionError
        If ``(r_E, r_f)`` admit no real, separating solution; the message names both.
    ShapeError, ModelError
        On bad input.
    ValueError
        If ``r_E`` or ``r_f`` is not finite and non-negative.

    References
    ----------
    Cyril, Kim, Ingham, Misra, Jaar, Acta Astronautica (1998), seed 002, eqs. (21)–(53).
    """
    for name, val in (("r_E", r_E), ("r_f", r_f)):
        if not (np.isfinite(val) and val >= 0.0):
            raise ValueError(f"{name} must be finite and >= 0, got {val}")
    Mc, Jc, v, mp, Ip, r, vp, wp = _payload_inputs(M, J, psid_i, m_p, I_p_W, r_pb_W, v_pi, w_pi)
    n = _unit(n_W, "n_W")
    slip = Jc @ v - (vp + np.cross(wp, r))  # hand point relative to payload point, before impact
    if slip @ n >= 0.0:  # not closing: no impact
        return PayloadImpact(v.copy(), vp.copy(), wp.copy(), np.zeros(3), float(-vp @ n), (0.0, 0.0))
    plastic = plastic_impact_payload(Mc, Jc, v, mp, Ip, r, vp, wp, locked=locked)

    def ke(psid: Array, v_p: Array, w_p: Array) -> float:
        return float(0.5 * psid @ Mc @ psid + 0.5 * mp * v_p @ v_p + 0.5 * w_p @ Ip @ w_p)

    KE_i = ke(v, vp, wp)
    dKE_p = ke(plastic.psid_f, plastic.v_pf, plastic.w_pf) - KE_i  # (27), ≤ 0
    target = KE_i - r_E * abs(dKE_p)  # (45)

    # friction direction t (26) and plastic friction impulse p_t,p (23)-(25)
    slip_t = slip - (slip @ n) * n
    f_t = plastic.impulse_W - (plastic.impulse_W @ n) * n
    ref = slip_t if float(np.linalg.norm(slip_t)) > 1e-12 * float(np.linalg.norm(slip)) else f_t
    nt = float(np.linalg.norm(ref))
    p_tp = np.zeros(3) if nt == 0.0 else (plastic.impulse_W @ (ref / nt)) * (ref / nt)

    W = _mobility(Mc, locked, "M")
    Ip_inv = np.linalg.inv(Ip)
    u = W @ (Jc.T @ n)  # (41)
    u_star = v + r_f * (W @ (Jc.T @ p_tp))  # (42)
    s = Ip_inv @ np.cross(r, n)  # (36)
    z = wp - r_f * (Ip_inv @ np.cross(r, p_tp))  # (37)
    v0 = vp - r_f * p_tp / mp  # payload CoM velocity at e* = 0, (32)
    # KE(e*) = a e*² + b e* + ke(u*, v0, z)
    a = float(0.5 * (1.0 / mp + s @ Ip @ s + u @ Mc @ u))
    b = float(-(n @ v0) - s @ Ip @ z + u @ Mc @ u_star)
    c = ke(u_star, v0, z) - target
    disc = b * b - 4.0 * a * c
    if disc < 0.0:
        if disc >= -1e-9 * (b * b + abs(4.0 * a * c)):
            disc = 0.0
        else:
            raise NoSolutionError(
                f"no real post-impact velocity for r_E={r_E}, r_f={r_f}: the energy loss asked "
                f"({r_E} x {abs(dKE_p):.6g} J) cannot be reached with this friction impulse "
                f"(discriminant {disc:.6g})"
            )
    sq = float(np.sqrt(disc))
    roots = ((-b - sq) / (2.0 * a), (-b + sq) / (2.0 * a))
    lam = roots[1]

    impulse = lam * n + r_f * p_tp
    psid_f = u_star + lam * u  # (43)
    v_pf = vp - impulse / mp  # (32)
    w_pf = wp - Ip_inv @ np.cross(r, impulse)  # (34)/(38)
    sep = float(n @ (Jc @ psid_f - (v_pf + np.cross(w_pf, r))))
    tol = 1e-9 * (np.linalg.norm(slip) + np.linalg.norm(vp) + np.linalg.norm(Jc @ v) + 1e-300)
    if sep < -tol:
        raise NoSolutionError(
            f"no separating post-impact velocity for r_E={r_E}, r_f={r_f}: both roots of eq. (49) "
            f"leave the contact closing (normal separation velocity {sep:.6g} m/s)"
        )
    x = float(vp @ n)
    return PayloadImpact(psid_f, v_pf, w_pf, impulse, lam / mp - x, (float(roots[0]), float(roots[1])))


# ---------------------------------------------------------------- rigid body point impact


def point_impact(
    model_A: RigidBodyModel,
    state_A: RigidBodyState,
    model_B: RigidBodyModel | None,
    state_B: RigidBodyState | None,
    p_WoCo_W: ArrayLike,
    n_W: ArrayLike,
    e: float,
    mu: float,
) -> PointImpact:
    """Impulsive contact of two rigid bodies at point C: Newton restitution and Coulomb friction.

    ``u = v_A(C) − v_B(C)`` is the pre-impact relative velocity at C, ``n`` points from B
    to A, and ``K = K_A + K_B`` the summed point mobilities
    (:func:`dynamics.rigid_body.point_mobility`), so ``Δu = K P`` for an impulse P on A.

    1. If ``u·n ≥ 0`` the bodies are not approaching: no impulse.
    2. Sticking: ``P = K⁻¹(−e (u·n) n − u)`` — the tangential slip stops and the normal
       velocity reverses with ratio e.
    3. If that lies outside the friction cone ``|P_t| ≤ mu P_n``, sliding:
       ``P = P_n (n + mu t̂)`` with t̂ along the sticking impulse's tangential part and
       ``P_n`` chosen so that the normal restitution still holds (a projection onto the
       cone, as in Chatterjee & Ruina, J. Appl. Mech. 65(4) 1998). Should ``n·K·d ≤ 0``
       (``d = n + mu t̂``, strongly coupled bodies), the friction part is dropped.

    Momentum is conserved exactly; with ``mu = 0`` kinetic energy changes by the
    factor ``e²`` on the normal relative motion (conserved for ``e = 1``); ``e = 0``
    with large ``mu`` is a plastic, sticking capture.

    Parameters
    ----------
    model_A, state_A : RigidBodyModel, RigidBodyState
        Body A (frames as in :mod:`dynamics.rigid_body`).
    model_B, state_B : RigidBodyModel, RigidBodyState, or both None
        Body B; None for an immovable B (fixed in W, at rest).
    p_WoCo_W : array_like, shape (3,)
        Contact point C in W. [m]
    n_W : array_like, shape (3,)
        Contact normal from B to A, in W (normalised here).
    e : float
        Coefficient of restitution, 0 … 1.
    mu : float
        Coulomb friction coefficient, ≥ 0 (``inf`` for no slip).

    Returns
    -------
    PointImpact

    Raises
    ------
    ShapeError
        On bad shapes or a zero normal.
    ValueError
        If ``e`` is outside [0, 1], ``mu`` negative, or only one of model_B/state_B given.
    """
    if not (0.0 <= e <= 1.0):
        raise ValueError(f"restitution e must lie in [0, 1], got {e}")
    if not mu >= 0.0:
        raise ValueError(f"friction mu must be >= 0, got {mu}")
    if (model_B is None) != (state_B is None):
        raise ValueError("model_B and state_B must both be given or both be None (fixed B)")
    n = _unit(n_W, "n_W")
    c = as_vector(p_WoCo_W, 3, "p_WoCo_W")
    r_A = c - state_A.p_WoBo_W
    u = point_velocity(state_A, state_A.R_WB.T @ r_A)
    K = point_mobility(model_A, state_A, r_A)
    r_B = np.zeros(3)
    if model_B is not None and state_B is not None:
        r_B = c - state_B.p_WoBo_W
        u = u - point_velocity(state_B, state_B.R_WB.T @ r_B)
        K = K + point_mobility(model_B, state_B, r_B)
    un = float(u @ n)
    sliding = False
    if un >= 0.0:
        P = np.zeros(3)
    else:
        P = np.linalg.solve(K, -e * un * n - u)  # type: ignore[assignment]  # numpy stubs: float64 in, floating out
        Pn = float(P @ n)
        Pt = P - Pn * n
        if np.linalg.norm(Pt) > mu * Pn:
            t_hat = Pt / np.linalg.norm(Pt)
            d = n + mu * t_hat
            nKd = float(n @ K @ d)
            if nKd <= 0.0:  # friction so strong, coupled so, that no normal impulse restores contact
                d, nKd = n, float(n @ K @ n)  # (Kane's paradox region): drop the friction part
            P = (-(1.0 + e) * un / nKd) * d
            sliding = True
    new_A = apply_impulse(model_A, state_A, np.concatenate([np.cross(r_A, P), P]))
    new_B = None
    if model_B is not None and state_B is not None:
        new_B = apply_impulse(model_B, state_B, np.concatenate([np.cross(r_B, -P), -P]))
    return PointImpact(P, new_A, new_B, sliding)


# ---------------------------------------------------------------- an arm tip strikes a free body


def arm_tip_impact(
    model: ch.ChainModel,
    data: ch.ChainData,
    q: ArrayLike,
    v: ArrayLike,
    body: int,
    p_BoCo_B: ArrayLike,
    n_W: ArrayLike,
    m_T: float,
    I_Tcm_W: ArrayLike,
    p_WoTcm_W: ArrayLike,
    V_WT_W: ArrayLike,
    e: float,
) -> TipImpact:
    """A point C of an arm strikes a free rigid body T: frictionless, Newton restitution ``e``.

    The arm is a :mod:`dynamics.chain` model (fixed or free-floating base) at ``(q, v)``;
    C is fixed in arm body ``body``. With ``J`` the translational rows of C's Jacobian
    (:func:`dynamics.chain.frame_jacobian`), ``M`` the arm's mass matrix, ``r`` from T's
    CoM to C and ``u_n = n·(J v − v_T − ω_T × r)`` the normal approach velocity::

        k   = nᵀ J M⁻¹ Jᵀ n + 1/m_T + (r × n)ᵀ I_T⁻¹ (r × n)    effective inverse mass along n
        λ   = −(1 + e) u_n / k                                    normal impulse on the arm
        v⁺  = v + M⁻¹ Jᵀ n λ,   v_T⁺ = v_T − n λ / m_T,   ω_T⁺ = ω_T − I_T⁻¹ (r × n) λ
        ΔT  = ½ (1 − e²) u_n² / k                                 kinetic energy lost

    which is Yoshida's collision with the Ex-GIT for joints that do not resist (mu = 0,
    seed 000 eqs. 26–30, the impulse along n only) and Newton's restitution law; total
    linear and angular momentum of arm and target are conserved. If C is not approaching
    (``u_n ≥ 0``) nothing happens: zero impulse, velocities unchanged.

    Parameters
    ----------
    model, data : ChainModel, ChainData
        The arm (``data`` is scratch space; its buffers are overwritten).
    q : array_like, shape (nq,)
        Arm configuration.
    v : array_like, shape (nv,)
        Arm generalized velocity.
    body : int
        Arm body that C is fixed in.
    p_BoCo_B : array_like, shape (3,)
        C from that body's origin, in the body frame. [m]
    n_W : array_like, shape (3,)
        Contact normal in W, from the target towards the arm (normalised here).
    m_T : float
        Target mass, > 0. [kg]
    I_Tcm_W : array_like, shape (3, 3)
        Target inertia about its CoM, in W, symmetric positive definite. [kg·m²]
    p_WoTcm_W : array_like, shape (3,)
        Target CoM in W. [m]
    V_WT_W : array_like, shape (6,)
        Target twist ``[ω_WT_W; v_WTcm_W]`` in W. [rad/s, m/s]
    e : float
        Coefficient of restitution, 0 (plastic along n) … 1 (elastic).

    Returns
    -------
    TipImpact

    Raises
    ------
    ShapeError
        On wrong shapes, non-finite values, a bad body index or a zero normal.
    ModelError
        If ``m_T`` is not > 0 or ``I_Tcm_W`` not symmetric positive definite.
    SingularityError
        If neither body can move C along n (``k`` = 0: e.g. a fixed-base arm at a
        singular posture striking a body of infinite mass).
    ValueError
        If ``e`` is outside [0, 1].

    Examples
    --------
    Yoshida's three rods (1 m, 1 kg each; seed 000 section 6) at rest, struck at the hand
    along the end link by a 1 kg ball (I = 0.004 kg·m²) at 0.1 m/s; half the approach
    speed comes back (e = 0.5):

    >>> import numpy as np
    >>> from dynamics import cases, chain as ch
    >>> arm = cases.yoshida_three_rod()
    >>> data = ch.make_data(arm.model)
    >>> X = ch.forward_kinematics(arm.model, data, arm.q)
    >>> p_C = X[2, :3, 3] + X[2, :3, :3] @ arm.p_BoHo_B   # the hand, in W
    >>> n = -X[2, :3, 0]                                  # from the ball, beyond the hand, to the arm
    >>> res = arm_tip_impact(arm.model, data, arm.q, arm.v, arm.hand_body, arm.p_BoHo_B, n,
    ...                      1.0, 0.004 * np.eye(3), p_C - 0.1 * n, np.r_[0, 0, 0, 0.1 * n], 0.5)
    >>> lam = float(res.P_W @ n)                          # normal impulse on the arm [N·s]
    >>> round(lam, 6), round(res.u_n_i, 6), round(res.u_n_f, 6), round(res.energy_loss, 7)
    (0.085817, -0.1, 0.05, 0.0021454)

    The ball's CoM lies on the line of impact, so it does not spin, and it keeps
    ``0.1 − λ/1 kg`` of its speed. From ``λ = 1.5 · 0.1 / k`` the hand's virtual mass along
    the end link with free joints is ``1 / (k − 1/1 kg)`` = 1.337 kg (seed 000 eq. 16,
    mu = 0):

    >>> round(float(np.linalg.norm(res.V_WT_W_f[:3])), 12), round(1 / (0.15 / lam - 1.0), 4)
    (0.0, 1.3371)
    """
    if not (0.0 <= e <= 1.0):
        raise ValueError(f"restitution e must lie in [0, 1], got {e}")
    mT = float(m_T)
    if not (np.isfinite(mT) and mT > 0.0):
        raise ModelError(f"target mass m_T must be > 0, got {m_T}")
    IT = _matrix(I_Tcm_W, 3, 3, "I_Tcm_W")
    if np.max(np.abs(IT - IT.T)) > 1e-9 * float(np.max(np.abs(IT))) or np.linalg.eigvalsh(0.5 * (IT + IT.T))[0] <= 0:
        raise ModelError(f"target inertia I_Tcm_W must be symmetric positive definite, got {IT.tolist()}")
    IT = 0.5 * (IT + IT.T)
    n = _unit(n_W, "n_W")
    VT = as_vector(V_WT_W, 6, "V_WT_W")
    if not np.all(np.isfinite(VT)):
        raise ShapeError("V_WT_W: not finite")
    va = as_vector(v, model.nv, "v")
    J = ch.frame_jacobian(model, data, q, body, p_BoCo_B)[3:]  # (3, nv): v_C = J v
    M = np.array(ch.mass_matrix(model, data, q))
    X = ch.forward_kinematics(model, data, q)
    p_C = X[body, :3, 3] + X[body, :3, :3] @ as_vector(p_BoCo_B, 3, "p_BoCo_B")
    r = p_C - as_vector(p_WoTcm_W, 3, "p_WoTcm_W")
    w_T, v_T = VT[:3], VT[3:]
    u_n = float(n @ (J @ va - v_T - np.cross(w_T, r)))
    Jn = J.T @ n  # (nv,): the generalized impulse of a unit normal impulse on the arm
    try:
        Minv_Jn = sla.cho_solve(sla.cho_factor(M), Jn)
    except np.linalg.LinAlgError as err:
        raise ModelError("arm mass matrix is not positive definite") from err
    rxn = np.cross(r, n)
    IT_inv_rxn = np.linalg.solve(IT, rxn)
    k = float(Jn @ Minv_Jn + 1.0 / mT + rxn @ IT_inv_rxn)
    if not k > 0.0:
        raise SingularityError(f"arm_tip_impact: neither body can move the contact point along n (k = {k})")
    lam = -(1.0 + e) * u_n / k if u_n < 0.0 else 0.0
    v_f = va + Minv_Jn * lam
    VT_f = np.concatenate([w_T - IT_inv_rxn * lam, v_T - n * (lam / mT)])

    def energy(v_arm: Array, V: Array) -> float:
        return float(0.5 * v_arm @ M @ v_arm + 0.5 * mT * V[3:] @ V[3:] + 0.5 * V[:3] @ IT @ V[:3])

    loss = energy(va, VT) - energy(v_f, VT_f)
    return TipImpact(n * lam, v_f, VT_f, loss, u_n, u_n + k * lam)
