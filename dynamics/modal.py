"""Modal analysis of a chain at rest: linearised M, K, D and the constrained modes.

About a configuration q at rest (v = 0), the equations of :mod:`dynamics.chain`
(``M v̇ + C(q, v) v + K η + D η̇ = τ + Σ J_bᵀ F_b``) with joint springs and dampers
``τ = −K_J Δθ − D_J θ̇`` linearise, in the tangent coordinates δ of q (the velocity
coordinates of :mod:`dynamics.chain`: base rotation vector and origin displacement in W,
joint angles, elastic coordinates), to::

    M(q) δ̈ + D δ̇ + K δ = 0,    K = blockdiag(0_base, K_J, K_beams),  D = blockdiag(0_base, D_J, D_beams)

The velocity products vanish at rest, and in orbit there is no gravity (the gravity
gradient, :mod:`dynamics.orbit`, and any preload are not in K: geometric stiffness is
neglected). ``K_beams``, ``D_beams`` are the beam links' own (``model.flex.K``, ``.D``,
:mod:`dynamics.beam`); ``K_J`` and ``D_J`` are the joints' springs and dampers, given
(e.g. a gearbox in series with a servo's holding stiffness,
:func:`dynamics.servo.hold_stiffness`: ``k = 1/(1/k_gear + 1/k_servo)``). The
linearisation is exact about an equilibrium at rest: K is constant in q.

Constrained modes restrict δ to the admissible motions ``δ = T y``: the base held
(``lock_base``), joints locked (``locked``: brakes, a stiff servo), loops closed
(``loops``: :class:`dynamics.closed_chain.LoopClosure`, e.g. a payload latched to the
orbiter while grappled: ``J_C T y = 0``, T from the null space of ``J_C``). A grappled
payload is a body welded to the hand: :func:`dynamics.cases.srms_holding_payload`, or a
``"fixed"`` body in :func:`dynamics.chain.chain_from_table`. Then
``(Tᵀ K T) Y = (Tᵀ M T) Y Ω²`` (generalized symmetric eigenproblem, ``scipy.linalg.eigh``)
and the mode shapes ``Φ = T Y`` in the full coordinates.

Conventions
-----------
- Mode shapes are mass-normalised, ``Φᵀ M Φ = I`` (units: δ per √(kg·m²)), in the
  velocity coordinates ``[ω_WB_W (3), v_WBo_W (3), θ (n), η (ne)]`` (base first when
  floating); the sign is fixed so that each shape's largest entry (by magnitude) is
  positive. Frequencies ascending, in Hz (``f = ω / 2π``); zero-frequency (rigid-body or
  unrestrained joint) modes are reported with f = 0 (eigenvalues below
  ``1e-9 · max|λ|`` are clipped).
- The beam elastic coordinates are amplitudes of the clamped–free shapes normalised
  to ``∫₀ᴸ φ_k² dx = L``, with ``φ_k(L) = 2(−1)^(k+1)`` (k = 1, 2, …: +2, −2, +2, …; the
  default ``shape="clamped_free"`` basis, :mod:`dynamics.beam`): a positive η_1 deflects
  the tip along +y (or +z) of the beam's body frame by 2 η_1.
- Modal damping ``ζ_k = φ_kᵀ D φ_k / (2 ω_k)`` (the diagonal of ΦᵀDΦ: exact for
  proportional damping, the first-order estimate otherwise); NaN for zero-frequency modes.
- Modal participation (floating base only): ``L = Φᵀ M R``, R the six base-motion columns
  (a unit base twist ``[ω; v]`` at Bo in W, i.e. ``R = I[:, :6]``): the modal force each
  mode puts on the base [√kg·m or √kg]. With the base held (``lock_base``: the base is the
  interface, as in Craig–Bampton) the effective masses ``L_kᵀ L_k`` sum over all modes to
  ``M_bf M_ff⁻¹ M_fb``; with a free base the elastic modes have ``L = 0`` (momentum).

Sources: Meirovitch, *Fundamentals of Vibrations* (generalized eigenproblem, modal
participation); Craig & Bampton (1968) for the base-interface participation; the chain's
equations from Quiocho et al. (seed 004 eqs. 14–16) and Cyril et al. (seed 002 §2).

No I/O, clock or globals.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla
from numpy.typing import ArrayLike, NDArray

from dynamics import chain as ch
from dynamics import closed_chain as cc
from dynamics import spatial as sp
from errors import ModelError, ShapeError

__all__ = ["Linearization", "Modes", "linearize", "modes", "joint_coordinates"]

Array = NDArray[np.float64]

_ZERO_EIG = 1e-9


@dataclass(frozen=True, slots=True, eq=False)
class Linearization:
    """The chain linearised at rest about ``q``: ``M δ̈ + D δ̇ + K δ = 0`` (module docstring).

    Attributes
    ----------
    q : ndarray, shape (nq,)
        The configuration.
    M : ndarray, shape (nv, nv)
        Mass matrix :func:`dynamics.chain.mass_matrix` at q. [kg, kg·m, kg·m²]
    K : ndarray, shape (nv, nv)
        Stiffness: joint springs on the joint coordinates, the beams' K on η. [N·m/rad, N/m, …]
    D : ndarray, shape (nv, nv)
        Damping: joint dampers, the beams' structural damping. [N·m·s/rad, …]

    All arrays are new and read-only.
    """

    q: Array
    M: Array
    K: Array
    D: Array

    def __post_init__(self) -> None:
        for a in (self.q, self.M, self.K, self.D):
            a.setflags(write=False)


@dataclass(frozen=True, slots=True, eq=False)
class Modes:
    """Modes of a linearised chain (module docstring for the conventions).

    Attributes
    ----------
    freq_hz : ndarray, shape (m,)
        Natural frequencies, ascending (0 for rigid-body or unrestrained modes). [Hz]
    omega : ndarray, shape (m,)
        The same in rad/s.
    shapes : ndarray, shape (nv, m)
        Mass-normalised mode shapes ``Φ`` in the chain's velocity coordinates (zeros on
        locked coordinates); ``Φᵀ M Φ = I``, ``Φᵀ K Φ = diag(ω²)``.
    damping_ratio : ndarray, shape (m,)
        ``φᵀ D φ / (2ω)``; NaN where ω = 0.
    participation : ndarray, shape (m, 6), or None
        ``Φᵀ M R``: each mode's coupling to a rigid motion of the base, columns
        ``[ω_x, ω_y, ω_z, v_x, v_y, v_z]`` in W. None for a ground-based chain.
    effective_mass : ndarray, shape (m, 6), or None
        ``participation²``: the modal effective masses and inertias. [kg, kg·m²]
    T : ndarray, shape (nv, m)
        Orthonormal basis of the admissible motions (after locks and loops).
    linearization : Linearization

    All arrays are new and read-only.
    """

    freq_hz: Array
    omega: Array
    shapes: Array
    damping_ratio: Array
    participation: Array | None
    effective_mass: Array | None
    T: Array
    linearization: Linearization

    def __post_init__(self) -> None:
        for a in (self.freq_hz, self.omega, self.shapes, self.damping_ratio, self.participation,
                  self.effective_mass, self.T):
            if a is not None:
                a.setflags(write=False)


def joint_coordinates(model: ch.ChainModel, joints: Sequence[int | str]) -> list[int]:
    """Indices in v of joints given by index (0 … n−1) or by joint or child-body name.

    Raises
    ------
    ModelError
        On an unknown joint (the value and the known names are given).
    """
    off = 6 if model.floating else 0
    out = []
    for j in joints:
        if isinstance(j, str):
            if j in model.joint_names:
                k = model.joint_names.index(j)
            elif j in model.names[1:]:
                k = model.names.index(j) - 1
            else:
                raise ModelError(f"joint {j!r}: not a joint of the chain (joints {list(model.joint_names)})")
        else:
            k = int(j)
            if not 0 <= k < model.n:
                raise ModelError(f"joint {j!r}: index not in [0, {model.n})")
        out.append(off + k)
    return out


def _per_joint(x: ArrayLike | None, n: int, name: str) -> Array:
    if x is None:
        return np.zeros(n)
    a = np.asarray(x, dtype=np.float64)
    if a.ndim == 0:
        a = np.full(n, float(a))
    if a.shape != (n,):
        raise ShapeError(f"{name}: expected a scalar or shape ({n},), got {a.shape}")
    if not np.all(np.isfinite(a)) or np.any(a < 0.0):
        raise ModelError(f"{name}: must be finite and >= 0, got {a.tolist()}")
    return a


def linearize(
    model: ch.ChainModel,
    q: ArrayLike,
    *,
    joint_stiffness: ArrayLike | None = None,
    joint_damping: ArrayLike | None = None,
    data: ch.ChainData | None = None,
) -> Linearization:
    """Linearise the chain at rest about ``q`` (module docstring).

    Parameters
    ----------
    model : ChainModel
        Rigid or with beam links.
    q : array_like, shape (nq,)
    joint_stiffness : float or array_like, shape (n,), optional
        Joint springs (0: free joint). [N·m/rad or N/m]
    joint_damping : float or array_like, shape (n,), optional
        Joint dampers. [N·m·s/rad or N·s/m]
    data : ChainData, optional
        Scratch (a fresh one if None).

    Returns
    -------
    Linearization

    Raises
    ------
    ShapeError
        On wrong shapes (q, the joint arrays).
    ModelError
        On negative or non-finite springs or dampers.
    """
    d = ch.make_data(model) if data is None else data
    qa = sp.as_vector(q, model.nq, "q").copy()
    M = np.array(ch.mass_matrix(model, d, qa))
    K = np.zeros_like(M)
    D = np.zeros_like(M)
    j = np.arange(model.n) + (6 if model.floating else 0)
    K[j, j] = _per_joint(joint_stiffness, model.n, "joint_stiffness")
    D[j, j] = _per_joint(joint_damping, model.n, "joint_damping")
    if model.flex is not None and model.ne:
        e = slice(model.flex.n_rigid, model.nv)
        K[e, e] = model.flex.K
        D[e, e] = model.flex.D
    return Linearization(qa, M, K, D)


def modes(
    model: ch.ChainModel,
    q: ArrayLike,
    *,
    joint_stiffness: ArrayLike | None = None,
    joint_damping: ArrayLike | None = None,
    locked: Sequence[int | str] = (),
    lock_base: bool = False,
    loops: Sequence[cc.LoopClosure] = (),
    data: ch.ChainData | None = None,
) -> Modes:
    """Natural modes of the chain at rest about ``q``, with joints locked, base held and loops closed.

    Parameters
    ----------
    model, q, joint_stiffness, joint_damping, data
        As :func:`linearize`.
    locked : sequence of int or str
        Joints held rigid (index 0 … n−1 or name, :func:`joint_coordinates`).
    lock_base : bool
        Hold a floating base (no effect on a ground-based chain).
    loops : sequence of LoopClosure
        Loop closures held (welds, points, revolute or planar pins): the modes move in the
        null space of their Jacobians (:func:`dynamics.closed_chain.constraint_jacobian`).

    Returns
    -------
    Modes
        All ``r`` modes of the admissible motions (r = nv − locked − rank of the loops).

    Raises
    ------
    ShapeError, ModelError
        On bad input (an unknown joint, a loop on a beam body, …).
    SingularityError
        Not raised: a loop that locks everything gives zero modes (empty arrays).
    """
    d = ch.make_data(model) if data is None else data
    lin = linearize(model, q, joint_stiffness=joint_stiffness, joint_damping=joint_damping, data=d)
    nv = model.nv
    fixed = set(joint_coordinates(model, locked))
    if lock_base and model.floating:
        fixed.update(range(6))
    free = [i for i in range(nv) if i not in fixed]
    T = np.eye(nv)[:, free]
    if loops:
        J = np.vstack([cc.constraint_jacobian(model, d, lin.q, lp) for lp in loops])
        T = T @ sla.null_space(J @ T)
    M_r = T.T @ lin.M @ T
    K_r = T.T @ lin.K @ T
    if T.shape[1] == 0:
        lam, Y = np.zeros(0), np.zeros((0, 0))
    else:
        lam, Y = sla.eigh(0.5 * (K_r + K_r.T), 0.5 * (M_r + M_r.T))
    scale = max(float(np.abs(lam).max()) if lam.size else 0.0, 1e-300)
    lam = np.where(np.abs(lam) < _ZERO_EIG * scale, 0.0, lam)
    if np.any(lam < 0.0):
        raise ModelError(f"modes: negative stiffness eigenvalue {lam.min():.3g} (K not positive semi-definite)")
    Phi = T @ Y
    big = np.argmax(np.abs(Phi), axis=0) if Phi.size else np.zeros(0, dtype=int)
    Phi = Phi * np.where(Phi[big, np.arange(Phi.shape[1])] < 0.0, -1.0, 1.0)
    omega = np.sqrt(lam)
    with np.errstate(divide="ignore", invalid="ignore"):
        zeta = np.where(omega > 0.0, np.einsum("ik,ij,jk->k", Phi, lin.D, Phi) / (2.0 * omega), np.nan)
    L = E = None
    if model.floating:
        L = Phi.T @ lin.M[:, :6]
        E = L * L
    return Modes(omega / (2.0 * np.pi), omega, Phi, zeta, L, E, T, lin)
