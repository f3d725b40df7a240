"""Generalized Jacobian J*, inertia H*, Ex-GIT G*, virtual masses and collision.

Yoshida, Kurazume, Sashida, Umetani, ICRA 1992 (seed 000). The paper orders hand
velocities [v; ω] and hand forces (f; n); berthsim orders [ω; v] and [τ; f]
(DESIGN §8). Every function here takes and returns our ordering; the paper's block
matrices (R_h, M, R_b, M_b) are built in the paper's ordering and permuted at the
boundary. ``G*`` maps a hand wrench ``F_Ho_W = [τ; f]`` to the hand acceleration
``[ω̇; v̇_Ho]`` (velocity-dependent terms d* excluded), all in W.

The hand H is a point fixed in a body (``body``, ``p_BoHo_B``); J* and H* refer to the
joint coordinates θ of a :class:`dynamics.chain.ChainModel`.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dynamics import chain as ch
from dynamics import spatial as sp
from dynamics.udu import spd_solve
from errors import ModelError, ShapeError, SingularityError

__all__ = [
    "generalized_jacobian",
    "generalized_inertia",
    "rigid_mobility",
    "exgit",
    "virtual_mass",
    "contact_inertia",
    "collision",
    "velocity_jump",
    "resolved_rates",
]

Array = NDArray[np.float64]

# [v; ω] <-> [ω; v] (and (f; n) <-> [τ; f]); its own inverse.
_P = np.block([[np.zeros((3, 3)), np.eye(3)], [np.eye(3), np.zeros((3, 3))]])

_COND_MAX = 1e12


def _parts(model: ch.ChainModel, data: ch.ChainData, q: ArrayLike, body: int,
           p_BoHo_B: ArrayLike) -> tuple[Array, Array, Array | None]:
    """Hand Jacobian J (6, nv), mass matrix M, and X = H_b⁻¹ H_bm (6, n) (None for a fixed base)."""
    J = ch.frame_jacobian(model, data, q, body, p_BoHo_B)
    M = ch.mass_matrix(model, data, q)
    X = spd_solve(M[:6, :6], M[:6, 6:], "H_b") if model.floating else None
    return J, M, X


def _j_star(model: ch.ChainModel, J: Array, X: Array | None) -> Array:
    return J.copy() if X is None else J[:, 6:] - J[:, :6] @ X


def _h_star(model: ch.ChainModel, M: Array, X: Array | None) -> Array:
    if X is None:
        return M.copy()
    H = M[6:, 6:] - M[:6, 6:].T @ X
    return 0.5 * (H + H.T)


def generalized_jacobian(
    model: ch.ChainModel, data: ch.ChainData, q: ArrayLike, body: int, p_BoHo_B: ArrayLike = (0.0, 0.0, 0.0)
) -> Array:
    """Generalized Jacobian matrix J* (Yoshida seed 000 eq. 3; Umetani & Yoshida 1989).

    ``V_WH_W = J* θ̇ + R_h [v_g; ω_g]``: the hand twist caused by joint rates when the
    total momentum is zero. With ``M = [[H_b, H_bm], [H_bmᵀ, H_m]]`` partitioned into base
    and joints and ``J = [J_b, J_m]``, ``J* = J_m − J_b H_b⁻¹ H_bm``. For a ground-based
    arm J* is the ordinary Jacobian (eq. 15's limit).

    Parameters
    ----------
    q : array_like, shape (nq,)
    body : int
        Body the hand point is fixed in.
    p_BoHo_B : array_like, shape (3,)
        Hand point H from the body origin, body frame. [m]

    Returns
    -------
    J_star : ndarray, shape (6, n)
        Rows [ω; v_Ho] in W (the paper's [v; ω] reordered). [rad/s, m/s per joint rate]

    Raises
    ------
    ShapeError
        On wrong shapes.
    """
    J, _, X = _parts(model, data, q, body, p_BoHo_B)
    return _j_star(model, J, X)


def generalized_inertia(model: ch.ChainModel, data: ch.ChainData, q: ArrayLike) -> Array:
    """Inertia matrix for free-floating systems about the joints, H* (seed 000 eq. 6).

    ``H* = H_m − H_bmᵀ H_b⁻¹ H_bm`` (the Schur complement of the base block: the joint
    inertia with the base free and momentum conserved; Masutani et al. 1989). For a
    ground-based arm H* is the joint-space mass matrix.

    Returns
    -------
    H_star : ndarray, shape (n, n)
        [kg·m², kg·m, kg]
    """
    M = ch.mass_matrix(model, data, q)
    X = spd_solve(M[:6, :6], M[:6, 6:], "H_b") if model.floating else None
    return _h_star(model, M, X)


def rigid_mobility(model: ch.ChainModel, data: ch.ChainData, q: ArrayLike, body: int,
                   p_BoHo_B: ArrayLike = (0.0, 0.0, 0.0)) -> Array:
    """``R_h M⁻¹ R_hᵀ`` of the united rigid body (seed 000 eqs. 4, 9, 14), our ordering.

    ``M = diag(w E, I_g)`` with total mass w and inertia ``I_g`` about the total CoM G
    (eq. 2), ``R_h = [[E, −r̃_gh], [0, E]]``, ``r_gh`` from G to the hand. Zero for a
    ground-based arm (eq. 15: w, I_g → ∞).

    Returns
    -------
    ndarray, shape (6, 6)
        Maps ``[τ; f]`` at H to ``[ω̇; v̇_Ho]``.

    Raises
    ------
    SingularityError
        If ``I_g`` is singular (all mass on a line).
    """
    if not model.floating:
        return np.zeros((6, 6))
    X = ch.forward_kinematics(model, data, q)
    p_H = X[body, :3, 3] + X[body, :3, :3] @ sp.as_vector(p_BoHo_B, 3, "p_BoHo_B")
    w = model.total_mass
    G = ch.center_of_mass(model, data, q)
    # Eq. (2), I_g = Σ (I_i − m_i r̃_gi r̃_gi), by the parallel-axis theorem from the
    # bodies' inertias about the base origin (rotational blocks of data.I_ref).
    g = sp.skew(G - data.p_ref)
    Ig = data.I_ref[:, :3, :3].sum(axis=0) + w * (g @ g)
    try:
        np.linalg.cholesky(Ig)
    except np.linalg.LinAlgError as err:
        raise SingularityError(f"I_g: inertia about the total CoM is singular: {Ig.tolist()}") from err
    Rh = np.eye(6)
    Rh[:3, 3:] = -sp.skew(p_H - G)
    Minv = np.zeros((6, 6))
    Minv[:3, :3] = np.eye(3) / w
    Minv[3:, 3:] = np.linalg.inv(Ig)
    return _P @ (Rh @ Minv @ Rh.T) @ _P


def _mu_matrix(mu: ArrayLike | float | None, n: int) -> Array:
    if mu is None:
        return np.zeros((n, n))
    a = np.asarray(mu, dtype=np.float64)
    if a.ndim == 0:
        a = np.full(n, float(a))
    if a.shape == (n,):
        a = np.diag(a)
    if a.shape != (n, n) or not np.all(np.isfinite(a)):
        raise ShapeError(f"mu: expected a scalar, ({n},) or ({n}, {n}), got shape {a.shape}")
    d = np.diag(a)
    if np.any(d < 0.0) or np.any(d > 1.0):
        raise ModelError(f"mu: joint resistance factors must lie in [0, 1], got {d.tolist()}")
    return a


def exgit(
    model: ch.ChainModel,
    data: ch.ChainData,
    q: ArrayLike,
    body: int,
    p_BoHo_B: ArrayLike = (0.0, 0.0, 0.0),
    mu: ArrayLike | float | None = None,
) -> Array:
    """Extended generalized inertia tensor G* with joint resistance mu (seed 000 eqs. 8–15).

    ``G* = J* H*⁻¹ (I − μ) J*ᵀ + R_h M⁻¹ R_hᵀ``. The OCR of eq. (12) prints
    ``(I − μ) J* H*⁻¹ J*ᵀ``, which does not conform (μ is n×n, J* is 6×n); the order
    above follows from substituting eq. (10), ``τ = −μ J*ᵀ F``, into eq. (8). Limits:
    μ = 0 free joints (13), μ = I locked joints (14: the united rigid body), ground-based
    arm ``J H⁻¹ (I − μ) Jᵀ`` (15).

    Parameters
    ----------
    q : array_like, shape (nq,)
    body : int
    p_BoHo_B : array_like, shape (3,)
        Hand point. [m]
    mu : float, array_like (n,) or (n, n), optional
        Joint resistance factor(s) in [0, 1]; default 0 (free joints). With beam links
        J* and H* also span the elastic coordinates, which are free (Cyril et al. 1998,
        seed 002 eq. 2: the impulse acts on all generalized velocities).

    Returns
    -------
    G_star : ndarray, shape (6, 6)
        Maps the hand wrench ``[τ; f]`` to ``[ω̇; v̇_Ho]`` in W. [1/(kg·m²), 1/(kg·m), 1/kg]

    Raises
    ------
    ShapeError
        On wrong shapes.
    ModelError
        If a resistance factor lies outside [0, 1].
    SingularityError
        If H* or I_g is singular.
    """
    J, M, X = _parts(model, data, q, body, p_BoHo_B)
    Js = _j_star(model, J, X)
    Hs = _h_star(model, M, X)
    mu_m = _mu_matrix(mu, model.n)
    if model.ne:  # beam links: their elastic coordinates offer no joint resistance (mu = 0)
        mu_m = np.pad(mu_m, (0, model.ne))
    X = spd_solve(Hs, (np.eye(Hs.shape[0]) - mu_m) @ Js.T, "H*")
    return Js @ X + rigid_mobility(model, data, q, body, p_BoHo_B)


def virtual_mass(
    G_star: ArrayLike, direction: ArrayLike, normal: ArrayLike | None = None
) -> tuple[float, float, float]:
    """Projected and absolute virtual masses and the angle psi (seed 000 eqs. 16–19).

    For a pure force f along the unit vector n at the hand, the hand acceleration is
    ``v̇ = G*_11 n f`` with ``G*_11`` the translational block (``G_star[3:, 3:]`` in our
    ordering). ``m_p* = f / (v̇·n) = 1 / (nᵀ G*_11 n)`` (17); ``m_a* = f / |v̇| =
    1 / |G*_11 n|`` (18, by its definition; the printed ``1/(kᵀ G*_11 k)`` agrees only
    when n is an eigenvector); ``psi`` the angle between n and the acceleration
    direction k (19).

    Parameters
    ----------
    G_star : array_like, shape (6, 6)
        From :func:`exgit`.
    direction : array_like, shape (3,)
        Force direction n in W (normalized here).
    normal : array_like, shape (3,), optional
        If given, psi is signed: positive when ``(n × k) · normal > 0`` (planar cases).

    Returns
    -------
    m_p : float
        [kg]
    m_a : float
        [kg]
    psi : float
        [rad], in [0, π] (or [−π, π] when signed).

    Raises
    ------
    ShapeError
        On wrong shapes or a zero direction.
    """
    G = np.asarray(G_star, dtype=np.float64)
    if G.shape != (6, 6):
        raise ShapeError(f"G_star: expected shape (6, 6), got {G.shape}")
    n = sp.as_vector(direction, 3, "direction")
    nn = float(np.linalg.norm(n))
    if nn < 1e-300:
        raise ShapeError(f"direction: zero vector {n.tolist()}")
    n = n / nn
    a = G[3:, 3:] @ n
    an = float(np.linalg.norm(a))
    m_p = 1.0 / float(n @ a)
    m_a = 1.0 / an
    psi = float(np.arctan2(np.linalg.norm(np.cross(n, a)), n @ a))
    if normal is not None:
        nrm = sp.as_vector(normal, 3, "normal")
        if float(np.cross(n, a) @ nrm) < 0.0:
            psi = -psi
    return m_p, m_a, psi


def contact_inertia(m_b: float, I_Bcm_W: ArrayLike, p_BcmC_W: ArrayLike) -> Array:
    """Inertia of a rigid body B seen at its contact point C, ``R_b⁻ᵀ M_b R_b⁻¹`` (seed 000 eqs. 21–23).

    Parameters
    ----------
    m_b : float
        [kg], > 0.
    I_Bcm_W : array_like, shape (3, 3)
        Inertia of B about its CoM, in W. [kg·m²]
    p_BcmC_W : array_like, shape (3,)
        ``r_bc``: from B's CoM to the contact point, in W. [m]

    Returns
    -------
    K_b : ndarray, shape (6, 6)
        Maps B's twist at C ``[ω; v_C]`` to its momentum about C ``[L_C; P]`` (our ordering).

    Raises
    ------
    ModelError
        On a non-positive mass or an inadmissible inertia.
    """
    if not (np.isfinite(m_b) and m_b > 0.0):
        raise ModelError(f"m_b: mass must be positive, got {m_b} kg")
    I = np.asarray(I_Bcm_W, dtype=np.float64)
    if I.shape != (3, 3):
        raise ShapeError(f"I_Bcm_W: expected shape (3, 3), got {I.shape}")
    ch.check_inertia(I, "B")
    r = sp.as_vector(p_BcmC_W, 3, "p_BcmC_W")
    Rb_inv = np.eye(6)
    Rb_inv[:3, 3:] = sp.skew(r)  # inverse of [[E, −r̃], [0, E]]
    Mb = np.zeros((6, 6))
    Mb[:3, :3] = m_b * np.eye(3)
    Mb[3:, 3:] = I
    return _P @ (Rb_inv.T @ Mb @ Rb_inv) @ _P


def _inv(A: Array, name: str) -> Array:
    c = np.linalg.cond(A)
    if not np.isfinite(c) or c > _COND_MAX:
        raise SingularityError(f"{name}: singular (condition number {c:.3g})")
    return np.linalg.inv(A)  # type: ignore[return-value]  # numpy stubs: float64 in, floating out


def collision(
    G_star: ArrayLike,
    K_b: ArrayLike,
    V_WH_W: ArrayLike,
    V_WC_W: ArrayLike,
    kind: Literal["plastic", "elastic"] = "plastic",
) -> tuple[Array, Array, Array]:
    """Post-impact hand and body velocities (seed 000 eqs. 24–30).

    Momentum balance (26): ``K_b V_b + G*⁻¹ V_h = K_b V_b' + G*⁻¹ V_h'``.
    Plastic (27–28): ``V_b' = V_h' = (K_b + G*⁻¹)⁻¹ (K_b V_b + G*⁻¹ V_h)``.
    Elastic (29–30): the relative velocity is reversed, ``V_b' − V_h' = V_h − V_b``, so
    ``V_h' = (K_b + G*⁻¹)⁻¹ (2 K_b V_b + (G*⁻¹ − K_b) V_h)``. The OCR of (26), (27) and
    (29) lost the primes; they are re-derived from the text as above.

    Parameters
    ----------
    G_star : array_like, shape (6, 6)
        Ex-GIT of the chain at the hand (:func:`exgit`).
    K_b : array_like, shape (6, 6)
        Inertia of B at the contact point (:func:`contact_inertia`).
    V_WH_W : array_like, shape (6,)
        Hand twist before impact, [ω; v_Ho] in W.
    V_WC_W : array_like, shape (6,)
        Twist of B at the contact point before impact, [ω_b; v_C] in W.
    kind : {"plastic", "elastic"}

    Returns
    -------
    V_h_post : ndarray, shape (6,)
    V_b_post : ndarray, shape (6,)
    impulse : ndarray, shape (6,)
        ``∫F dt`` on the hand, [τ; f] about H in W (eqs. 24–25). [N·m·s, N·s]

    Raises
    ------
    SingularityError
        If G* (e.g. a ground-based arm at a singular posture) or ``K_b + G*⁻¹`` is singular.
    ShapeError
        On wrong shapes.
    """
    G = np.asarray(G_star, dtype=np.float64)
    K = np.asarray(K_b, dtype=np.float64)
    if G.shape != (6, 6) or K.shape != (6, 6):
        raise ShapeError(f"G_star, K_b: expected (6, 6), got {G.shape}, {K.shape}")
    Vh = sp.as_vector(V_WH_W, 6, "V_WH_W")
    Vb = sp.as_vector(V_WC_W, 6, "V_WC_W")
    Gi = _inv(G, "G*")
    A = _inv(K + Gi, "K_b + G*^-1")
    if kind == "plastic":
        Vh1 = A @ (K @ Vb + Gi @ Vh)
        Vb1 = Vh1.copy()
    elif kind == "elastic":
        Vh1 = A @ (2.0 * K @ Vb + (Gi - K) @ Vh)
        Vb1 = Vh - Vb + Vh1
    else:
        raise ValueError(f"kind: {kind!r} not 'plastic' or 'elastic'")
    return Vh1, Vb1, Gi @ (Vh1 - Vh)


def velocity_jump(
    model: ch.ChainModel, data: ch.ChainData, q: ArrayLike, body: int, p_BoHo_B: ArrayLike, impulse_W: ArrayLike
) -> Array:
    """Change of generalized velocity ``Δv = M⁻¹ Jᵀ Λ`` for an impulse at a hand point (free joints).

    Parameters
    ----------
    impulse_W : array_like, shape (6,)
        ``Λ = ∫F dt``, [τ; f] about H in W. [N·m·s, N·s]

    Returns
    -------
    ndarray, shape (nv,)
    """
    J, M, _ = _parts(model, data, q, body, p_BoHo_B)
    return spd_solve(M, J.T @ sp.as_vector(impulse_W, 6, "impulse_W"), "M")


def resolved_rates(
    model: ch.ChainModel,
    data: ch.ChainData,
    q: ArrayLike,
    body: int,
    p_BoHo_B: ArrayLike,
    V_WH_W: ArrayLike,
    *,
    cond_max: float = 1e5,
) -> Array:
    """Joint rates giving a hand twist, through the generalized Jacobian (resolved-rate control).

    Solves ``J* θ̇ = V_WH_W`` (Umetani & Yoshida 1989, cited as [4] in seed 000; eq. 3 with
    zero momentum). For a ground-based arm J* is the ordinary Jacobian.

    Parameters
    ----------
    q : array_like, shape (nq,)
    body : int
    p_BoHo_B : array_like, shape (3,)
        Hand point (the point of resolution). [m]
    V_WH_W : array_like, shape (6,)
        Desired hand twist [ω; v_Ho] in W. [rad/s, m/s]
    cond_max : float
        Largest admissible condition number of J* (default 1e5: with the orbiter base the
        SRMS wrist singularity, wrist yaw 90°, gives ~4e5, a ground-based arm's ~1e17).

    Returns
    -------
    theta_dot : ndarray, shape (n,)
        [rad/s or m/s]

    Raises
    ------
    ModelError
        If the chain does not have exactly six joints.
    SingularityError
        If J* is singular (kinematic or, with a free base, dynamic singularity): its
        condition number, the body and the joint values are named.
    """
    if model.n != 6:
        raise ModelError(f"resolved_rates: needs exactly 6 joints, the chain has n = {model.n}")
    Js = generalized_jacobian(model, data, q, body, p_BoHo_B)[:, :model.n]  # beam links: elastic rates taken as 0
    c = float(np.linalg.cond(Js))
    if not np.isfinite(c) or c > cond_max:
        theta = np.asarray(q, dtype=np.float64)[model.nq - model.ne - model.n:model.nq - model.ne]
        raise SingularityError(
            f"J* at body {model.names[body]!r} is singular (condition number {c:.3g} > {cond_max:.3g}) "
            f"at joint values {theta.tolist()} rad"
        )
    return np.linalg.solve(Js, sp.as_vector(V_WH_W, 6, "V_WH_W"))  # type: ignore[return-value]  # numpy stubs: float64 in, floating out
