"""A multibody arm between two moving bodies, its mass matrix held over several steps (multi-rate).

The arm is a :class:`dynamics.chain.ChainModel` with a floating base (body 0, fixed in the
orbiter) whose links may be beams (:mod:`dynamics.flexible`): ``v = [V_b; v_a]`` with the base
twist ``V_b`` (6,) and the arm coordinates ``v_a`` (the joints, then the elastic
coordinates). The base moves as given (the orbiter, integrated elsewhere); while the arm
holds the payload, its hand point E (on the last body) moves with the payload's grasp point
G, also as given. The arm's equations (seed 004 eqs. 14–16, 22–28, partitioned into base (b)
and arm (a) rows, ``F_h`` the wrench the payload exerts on the hand at E, W)::

    M_aa v̇_a + M_ab A_b + h_a = Q − K x − D v_a + J_aᵀ F_h
    J_a v̇_a + J_b A_b + J̇v = A_G − 2α (J v − V_G) − β² ΔX           (hand on the payload)
    F_b = M_ba v̇_a + M_bb A_b + h_b − J_bᵀ F_h                          (the orbiter's wrench on the base)

``K``, ``D`` are the stiffness and damping that act on the arm coordinates linearly (the
joints' gear springs and dampers to the motors, whose side ``Q = [k θ_m + c θ̇_m; 0]``
drives; the beams' ``K``, ``D``); ``A_b``, ``A_G`` the classical accelerations of the base and
of G, ``ΔX = [θ; p_E − p_G]`` the hand's pose error (as :func:`dynamics.closed_chain.constraint_error`),
``α``, ``β`` Baumgarte's gains (eq. 26).

Multi-rate (MBDYN, seed 004: "a set of subroutines that can be executed independently, at
different frequencies"): :func:`hold` evaluates ``M``, the bias ``h = C(q, v) v``, the hand
Jacobian ``J`` and ``J̇v`` at one configuration and factors the hand constraint's KKT system
(Schur complement, as :func:`dynamics.closed_chain.forward_dynamics`); :func:`held_step` then
advances the arm coordinates over many steps with those matrices, evaluating only what
changes fast — the motors' drive, the base's and the payload's accelerations, the linear
spring and damper forces — at each step. The step is Newmark's average acceleration
(trapezoidal: β = 1/4, γ = 1/2) with the linear forces ``K x + D v`` at the step end, solved
with the held constraint projector: unconditionally stable and without numerical damping on
the linear part (the beams' modes and the gear dampers do not bound the step; the relative
frequency error is (ωh)²/12, 1.2 % for a 60 Hz boom mode at 1 ms); the forces held over the
step (drive, bias, the bodies' accelerations) are explicit. The held matrices
change with the configuration, which an arm moves by ~1e-4 rad in a 2 ms step and by the
booms' deflection (millimetres): holding them over ``n`` steps is first order in the motion
over those steps, and :func:`hold` again puts the next interval on the new configuration.

No I/O, clock or globals.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dynamics import chain as ch
from dynamics import spatial as sp
from errors import ModelError, ShapeError, SingularityError

__all__ = ["HeldArm", "hand_pose_error", "held_accelerations", "held_step", "hold", "own_base_wrench"]

Array = NDArray[np.float64]

_COND_MAX = 1e12


@dataclass(frozen=True, slots=True, eq=False)
class HeldArm:
    """The arm's matrices at one configuration, for :func:`held_step` (arrays read-only).

    Attributes
    ----------
    na : int
        Arm coordinates (joints and elastic), ``nv − 6``.
    M_ab : ndarray, shape (na, 6)
    M_bb, M_ba : ndarray, shape (6, 6), (6, na)
        Blocks of the mass matrix, ``M_bb`` without the base body's own inertia (the base's
        reaction is the arm's). [kg, kg·m, kg·m²]
    h : ndarray, shape (nv,)
        Bias forces ``C(q, v) v`` at the held velocity; the base rows without the base body's
        own velocity-product wrench.
    J : ndarray, shape (6, nv) or None
        The hand's Jacobian ``[ω; v_E]`` in W; None for a free arm.
    Jdv : ndarray, shape (6,)
        ``J̇ v`` (classical acceleration of E at zero v̇).
    K, D : ndarray, shape (na, na)
        Linear stiffness and damping on the arm coordinates.
    h_step : float
        The step the implicit factor is for. [s]
    G1, G2, F1, F2, W : ndarray
        ``v̇_a = W (G1 r + G2 c)`` (r the arm rows' forces, c the constraint's right side) and
        ``λ = F1 r + F2 c`` (``−λ = F_h``); ``W = (I + G1 (h/2 D + h²/4 K))⁻¹`` (Newmark).
    """

    na: int
    M_ab: Array
    M_bb: Array
    M_ba: Array
    h: Array
    J: Array | None
    Jdv: Array
    K: Array
    D: Array
    h_step: float
    G1: Array
    G2: Array
    F1: Array
    F2: Array
    W: Array


def _ro(a: ArrayLike) -> Array:
    out = np.array(a, dtype=np.float64)
    out.setflags(write=False)
    return out


def hold(model: ch.ChainModel, data: ch.ChainData, q: ArrayLike, v: ArrayLike, K: ArrayLike, D: ArrayLike,
         h: float, hand: tuple[int, ArrayLike] | None = None) -> HeldArm:
    """Evaluate and factor the arm's matrices at ``(q, v)`` for steps of ``h`` (module docstring).

    Parameters
    ----------
    model : ChainModel
        Floating base (body 0 fixed in the orbiter); links may be beams.
    q : array_like, shape (nq,)
    v : array_like, shape (nv,)
    K, D : array_like, shape (na, na)
        Stiffness and damping acting linearly on the arm coordinates. [N·m/rad, N·m·s/rad, ...]
    h : float
        The step :func:`held_step` will take. [s]
    hand : (int, array_like (3,)), optional
        The hand's body and the point E in it [m]: the arm holds the payload there. None: free.

    Returns
    -------
    HeldArm

    Raises
    ------
    ModelError
        If the chain has no floating base, or the hand's body is a beam link.
    ShapeError
        On bad shapes.
    SingularityError
        If the hand constraint loses rank (a singular posture) or the mass matrix is not
        positive definite.
    """
    if not model.floating:
        raise ModelError("model: the held arm needs a floating-base chain (body 0 fixed in the orbiter)")
    qa = np.asarray(q, dtype=np.float64)
    va = sp.as_vector(v, model.nv, "v")
    na = model.nv - 6
    Ka = np.asarray(K, dtype=np.float64)
    Da = np.asarray(D, dtype=np.float64)
    if Ka.shape != (na, na) or Da.shape != (na, na):
        raise ShapeError(f"K, D: expected ({na}, {na}) each, got {Ka.shape} and {Da.shape}")
    if not (np.isfinite(h) and h > 0.0):
        raise ShapeError(f"h: expected a positive step, got {h!r}")
    M = ch.mass_matrix(model, data, qa)
    bias = ch.bias_forces(model, data, qa, va).copy()
    I_base = data.I_ref[0]
    # the reaction on the orbiter is the arm's: the base body's own inertia and velocity products out
    M_bb = M[:6, :6] - I_base
    bias[:6] -= own_base_wrench(I_base, va[:6], np.zeros(6))
    Maa = M[6:, 6:]
    try:
        Mi = np.linalg.inv(Maa)
    except np.linalg.LinAlgError as err:
        raise SingularityError(f"arm mass matrix singular ({err})") from err
    if hand is None:
        J, Jdv = None, np.zeros(6)
        G1, G2, F1, F2 = Mi, np.zeros((na, 6)), np.zeros((6, na)), np.zeros((6, 6))
    else:
        body, p = hand
        pE = sp.as_vector(p, 3, "hand point")
        J = ch.frame_jacobian(model, data, qa, body, pE).copy()
        Jdv = ch.frame_acceleration(model, data, qa, va, np.zeros(model.nv), body, pE).copy()
        X = Mi @ J[:, 6:].T
        S = J[:, 6:] @ X
        c = np.linalg.cond(S)
        if not np.isfinite(c) or c > _COND_MAX:
            raise SingularityError(f"hand constraint singular (condition number {c:.3g}): the arm cannot move its "
                                   "hand in some direction")
        Si = np.linalg.inv(S)
        G2 = X @ Si
        G1 = Mi - G2 @ X.T
        F1, F2 = G2.T, -Si  # type: ignore[assignment]  # numpy stubs: float64 in, floating out
    W = np.linalg.inv(np.eye(na) + G1 @ (0.5 * h * Da + 0.25 * h * h * Ka))
    return HeldArm(na, _ro(M[6:, :6]), _ro(M_bb), _ro(M[:6, 6:]), _ro(bias), None if J is None else _ro(J),
                   _ro(Jdv), _ro(Ka), _ro(Da), float(h), _ro(G1), _ro(G2), _ro(F1), _ro(F2), _ro(W))


def own_base_wrench(I_base: Array, V0: Array, a0: Array) -> Array:
    """Wrench that moves the base body alone: ``I a_sp + V ×* I V`` at Bo in W (a0 classical). [N·m, N]"""
    w = V0[:3]
    a_sp = np.array(a0, dtype=np.float64)
    a_sp[3:] -= sp.cross3(w, V0[3:])
    mom = I_base @ V0
    out = I_base @ a_sp
    out[:3] += sp.cross3(w, mom[:3]) + sp.cross3(V0[3:], mom[3:])
    out[3:] += sp.cross3(w, mom[3:])
    return out


def _constraint_rhs(held: HeldArm, v_a: Array, V_b: Array, A_b: Array, hand: tuple[Array, Array, Array] | None,
                    alpha: float, beta: float) -> Array:
    if held.J is None:
        if hand is not None:
            raise ShapeError("hand: the arm was held free (no hand constraint)")
        return np.zeros(6)
    if hand is None:
        raise ShapeError("hand: the arm was held with its hand on the payload: give (V_G, A_G, error)")
    V_G, A_G, err = hand
    Jb, Ja = held.J[:, :6], held.J[:, 6:]
    return A_G - Jb @ A_b - held.Jdv - 2.0 * alpha * (Ja @ v_a + Jb @ V_b - V_G) - beta * beta * err


def held_accelerations(held: HeldArm, x_a: Array, v_a: Array, Q: Array, A_b: Array,
                       hand: tuple[Array, Array, Array] | None = None, V_b: Array | None = None,
                       alpha: float = 0.0, beta: float = 0.0) -> Array:
    """The arm coordinates' accelerations at ``(x_a, v_a)`` with the held matrices (no step): the start value
    :func:`held_step` needs (at the first step, and when the hand is put on or taken off the payload).
    Parameters as :func:`held_step` (``V_b`` only with a hand). [rad/s², 1/s²]"""
    c = _constraint_rhs(held, v_a, np.zeros(6) if V_b is None else V_b, A_b, hand, alpha, beta)
    r = Q - held.h[6:] - held.M_ab @ A_b - held.K @ x_a - held.D @ v_a
    return held.G1 @ r + held.G2 @ c


def held_step(held: HeldArm, x_a: Array, v_a: Array, vdot_a: Array, Q: Array, V_b: Array, A_b: Array,
              hand: tuple[Array, Array, Array] | None = None, alpha: float = 0.0,
              beta: float = 0.0) -> tuple[Array, Array, Array, Array, Array]:
    """One step ``h = held.h_step`` of the arm coordinates with the held matrices (Newmark, module docstring).

    Parameters
    ----------
    held : HeldArm
    x_a : ndarray, shape (na,)
        Arm coordinates (joint angles, elastic coordinates) at the step start. [rad, -]
    v_a, vdot_a : ndarray, shape (na,)
        Their rates and accelerations at the step start (the previous step's results).
    Q : ndarray, shape (na,)
        Generalized forces other than ``−K x − D v`` (the motors' drive through the gear springs),
        held over the step.
    V_b, A_b : ndarray, shape (6,)
        The base's twist and classical acceleration, ``[ω; v_Bo]`` in W. [rad/s, m/s; rad/s², m/s²]
    hand : (V_G, A_G, ΔX), optional
        The grasp point's twist and classical acceleration (W) and the hand's pose error
        ``[θ; p_E − p_G]`` (W); required when the arm was held with a hand.
    alpha, beta : float
        Baumgarte gains. [1/s]

    Returns
    -------
    x_a, v_a, vdot_a : ndarray, shape (na,)
        At the step end.
    F_Eo_W : ndarray, shape (6,)
        Wrench the arm applies to the payload at E, in W, at the step end (zero when free). [N·m, N]
    F_Bo_W : ndarray, shape (6,)
        Wrench the arm applies to the base (the orbiter) at Bo, in W, at the step end (the base
        body's own velocity products as of the hold: the orbiter turns at ~1e-4 rad/s). [N·m, N]

    Raises
    ------
    ShapeError
        If ``hand`` is missing for a held hand or given for a free arm.
    """
    h = held.h_step
    rhs0 = Q - held.h[6:] - held.M_ab @ A_b
    c = _constraint_rhs(held, v_a, V_b, A_b, hand, alpha, beta)
    x_pred = x_a + h * v_a + 0.25 * h * h * vdot_a        # Newmark's predictors (β = 1/4, γ = 1/2)
    v_pred = v_a + 0.5 * h * vdot_a
    vdot = held.W @ (held.G1 @ (rhs0 - held.K @ x_pred - held.D @ v_pred) + held.G2 @ c)
    x1 = x_pred + 0.25 * h * h * vdot
    v1 = v_pred + 0.5 * h * vdot
    r = rhs0 - held.K @ x1 - held.D @ v1                 # the arm rows' forces at the step end
    lam = held.F1 @ r + held.F2 @ c                      # −λ: the payload's wrench on the hand
    F_base = held.M_ba @ vdot + held.M_bb @ A_b + held.h[:6]    # the base body's own terms held out
    if held.J is not None:
        F_base = F_base + held.J[:, :6].T @ lam
    return x1, v1, vdot, lam, -F_base


def hand_pose_error(X_WE: ArrayLike, X_WG: ArrayLike) -> Array:
    """``ΔX = [θ; p_E − p_G]`` (6,) in W, θ the rotation vector of ``R_WE R_WGᵀ`` (seed 004 eq. 30)."""
    XE = np.asarray(X_WE, dtype=np.float64)
    XG = np.asarray(X_WG, dtype=np.float64)
    return np.concatenate([sp.rotation_vector(XE[:3, :3] @ XG[:3, :3].T), XE[:3, 3] - XG[:3, 3]])
