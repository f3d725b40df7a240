"""Rotations, quaternions, poses and spatial-vector algebra: the one place for them.

Conventions (DESIGN §8, STYLE):

- Quaternions ``quat_wxyz`` are scalar first, Hamilton product; ``q_WB`` rotates
  vectors in B into W: ``v_W = R(q_WB) @ v_B``. Its matrix is SVDS seed 003 eq. (2-7):
  ``R = I + 2 e1 [e2x] + 2 [e2x]^2`` with ``e1`` the scalar and ``e2`` the vector part.
- Poses ``X_AB`` (4, 4) homogeneous; ``X_AC = X_AB @ X_BC``.
- Spatial velocity ``V`` (6,) = [ω; v]; wrench ``F`` (6,) = [τ; f] (SVDS ordering).

No I/O, no globals. Shapes are checked on entry and a wrong shape raises
:class:`errors.ShapeError`.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.spatial.transform import Rotation

from errors import ShapeError

__all__ = [
    "as_vector",
    "skew",
    "quat_multiply",
    "quat_conjugate",
    "quat_normalize",
    "quat_to_rotation",
    "rotation_to_quat",
    "quat_rotate",
    "quat_rate",
    "quat_integrate",
    "quat_angle",
    "pose",
    "pose_inverse",
    "shift_twist",
    "shift_wrench",
    "rotate_spatial",
]

Array = NDArray[np.float64]


def as_vector(x: ArrayLike, n: int, name: str) -> Array:
    """Return ``x`` as a finite float64 array of shape (n,), else raise ShapeError naming ``name``."""
    a = np.asarray(x, dtype=np.float64)
    if a.shape != (n,):
        raise ShapeError(f"{name}: expected shape ({n},), got {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ShapeError(f"{name}: not finite: {a.tolist()}")
    return a


def _as_matrix(x: ArrayLike, shape: tuple[int, int], name: str) -> Array:
    a = np.asarray(x, dtype=np.float64)
    if a.shape != shape:
        raise ShapeError(f"{name}: expected shape {shape}, got {a.shape}")
    return a


def skew(w: ArrayLike) -> Array:
    """Cross-product matrix: ``skew(w) @ x == np.cross(w, x)``.

    Parameters
    ----------
    w : array_like, shape (3,)

    Returns
    -------
    ndarray, shape (3, 3)
    """
    a = np.asarray(w, dtype=np.float64)
    if a.shape != (3,):
        raise ShapeError(f"w: expected shape (3,), got {a.shape}")
    return np.array([[0.0, -a[2], a[1]], [a[2], 0.0, -a[0]], [-a[1], a[0], 0.0]])


def quat_multiply(q1: ArrayLike, q2: ArrayLike) -> Array:
    """Hamilton product ``q1 ⊗ q2`` of two ``quat_wxyz``; ``q_AC = q_AB ⊗ q_BC``."""
    a = np.asarray(q1, dtype=np.float64)
    b = np.asarray(q2, dtype=np.float64)
    if a.shape != (4,) or b.shape != (4,):
        raise ShapeError(f"quaternions: expected shape (4,), got {a.shape} and {b.shape}")
    w1, x1, y1, z1 = a
    w2, x2, y2, z2 = b
    return np.array(
        [
            w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2,
            w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
            w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
            w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2,
        ]
    )


def quat_conjugate(q: ArrayLike) -> Array:
    """Conjugate (the inverse of a unit quaternion): ``q_BA`` from ``q_AB``."""
    a = np.asarray(q, dtype=np.float64)
    if a.shape != (4,):
        raise ShapeError(f"quat_wxyz: expected shape (4,), got {a.shape}")
    return np.array([a[0], -a[1], -a[2], -a[3]])


def quat_normalize(q: ArrayLike) -> Array:
    """Unit quaternion with a non-negative scalar part.

    Raises
    ------
    ShapeError
        If ``q`` is not shape (4,), not finite, or has (near) zero norm.
    """
    a = as_vector(q, 4, "quat_wxyz")
    n = float(np.linalg.norm(a))
    if n < 1e-12:
        raise ShapeError(f"quat_wxyz: zero norm quaternion {a.tolist()}")
    a = a / n
    return -a if a[0] < 0.0 else a


def quat_to_rotation(q: ArrayLike) -> Array:
    """Rotation matrix ``R_AB`` (3, 3) of the unit quaternion ``q_AB`` [w, x, y, z].

    SVDS seed 003 eq. (2-7): ``R = I + 2 e1 [e2x] + 2 [e2x]^2`` for a unit quaternion.
    """
    a = np.asarray(q, dtype=np.float64)
    if a.shape != (4,):
        raise ShapeError(f"quat_wxyz: expected shape (4,), got {a.shape}")
    w, x, y, z = a
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )


def rotation_to_quat(R: ArrayLike) -> Array:
    """Unit ``quat_wxyz`` (scalar part ≥ 0) of the rotation matrix ``R_AB`` (3, 3)."""
    m = _as_matrix(R, (3, 3), "R")
    x, y, z, w = Rotation.from_matrix(m).as_quat()
    return quat_normalize([w, x, y, z])


def quat_rotate(q: ArrayLike, v: ArrayLike) -> Array:
    """``v_A = R(q_AB) @ v_B`` for a vector (3,) or a stack of vectors (n, 3)."""
    R = quat_to_rotation(q)
    a = np.asarray(v, dtype=np.float64)
    if a.shape[-1:] != (3,):
        raise ShapeError(f"v: expected shape (3,) or (n, 3), got {a.shape}")
    return a @ R.T


def quat_rate(q: ArrayLike, w_B: ArrayLike) -> Array:
    """Quaternion rate ``q̇_WB = ½ q_WB ⊗ [0, ω_WB_B]``, SVDS seed 003 eq. (2-6).

    Parameters
    ----------
    q : array_like, shape (4,)
        ``q_WB``.
    w_B : array_like, shape (3,)
        Angular velocity of B in W, expressed in B. [rad/s]

    Returns
    -------
    ndarray, shape (4,)
        [1/s]
    """
    w = np.asarray(w_B, dtype=np.float64)
    if w.shape != (3,):
        raise ShapeError(f"w_B: expected shape (3,), got {w.shape}")
    return 0.5 * quat_multiply(q, np.array([0.0, w[0], w[1], w[2]]))


def quat_integrate(q: ArrayLike, w_B: ArrayLike, h: float) -> Array:
    """Advance ``q_WB`` by a constant body-frame rate over ``h`` seconds (exponential map).

    ``q(t+h) = q(t) ⊗ exp(½ ω_B h)``: exact for constant ω_B, stays unit norm.
    """
    w = np.asarray(w_B, dtype=np.float64)
    if w.shape != (3,):
        raise ShapeError(f"w_B: expected shape (3,), got {w.shape}")
    angle = float(np.linalg.norm(w)) * h
    if angle < 1e-12:
        dq = np.array([1.0, 0.5 * h * w[0], 0.5 * h * w[1], 0.5 * h * w[2]])
    else:
        axis = w / np.linalg.norm(w)
        s = np.sin(0.5 * angle)
        dq = np.array([np.cos(0.5 * angle), s * axis[0], s * axis[1], s * axis[2]])
    return quat_normalize(quat_multiply(q, dq))


def quat_angle(q1: ArrayLike, q2: ArrayLike) -> float:
    """Rotation angle [rad] in [0, π] between two orientations ``q_WA`` and ``q_WB``."""
    d = quat_multiply(quat_conjugate(q1), q2)
    return float(2.0 * np.arctan2(np.linalg.norm(d[1:]), abs(d[0])))


def pose(R_AB: ArrayLike, p_AoBo_A: ArrayLike) -> Array:
    """Homogeneous pose ``X_AB`` (4, 4) from ``R_AB`` (3, 3) and ``p_AoBo_A`` (3,) [m]."""
    X = np.eye(4)
    X[:3, :3] = _as_matrix(R_AB, (3, 3), "R_AB")
    X[:3, 3] = as_vector(p_AoBo_A, 3, "p_AoBo_A")
    return X


def pose_inverse(X_AB: ArrayLike) -> Array:
    """``X_BA`` (4, 4) from ``X_AB`` (4, 4)."""
    X = _as_matrix(X_AB, (4, 4), "X_AB")
    R = X[:3, :3]
    out = np.eye(4)
    out[:3, :3] = R.T
    out[:3, 3] = -R.T @ X[:3, 3]
    return out


def shift_twist(V_A: ArrayLike, p_AoBo: ArrayLike) -> Array:
    """Spatial velocity of a frame rigidly attached at B from the one at A.

    ``[ω; v_B] = [ω; v_A + ω × p_AoBo]``; all vectors expressed in the same frame.

    Parameters
    ----------
    V_A : array_like, shape (6,)
        [ω; v] at point Ao. [rad/s, m/s]
    p_AoBo : array_like, shape (3,)
        From Ao to Bo, same frame. [m]
    """
    V = np.asarray(V_A, dtype=np.float64)
    p = np.asarray(p_AoBo, dtype=np.float64)
    if V.shape != (6,) or p.shape != (3,):
        raise ShapeError(f"V_A, p_AoBo: expected (6,), (3,), got {V.shape}, {p.shape}")
    return np.concatenate([V[:3], V[3:] + np.cross(V[:3], p)])


def shift_wrench(F_A: ArrayLike, p_AoBo: ArrayLike) -> Array:
    """The same wrench [τ; f] referred to point Bo instead of Ao.

    ``τ_B = τ_A + p_BoAo × f = τ_A − p_AoBo × f``; all vectors in the same frame.

    Parameters
    ----------
    F_A : array_like, shape (6,)
        [τ; f] about Ao. [N·m, N]
    p_AoBo : array_like, shape (3,)
        From Ao to Bo. [m]
    """
    F = np.asarray(F_A, dtype=np.float64)
    p = np.asarray(p_AoBo, dtype=np.float64)
    if F.shape != (6,) or p.shape != (3,):
        raise ShapeError(f"F_A, p_AoBo: expected (6,), (3,), got {F.shape}, {p.shape}")
    return np.concatenate([F[:3] - np.cross(p, F[3:]), F[3:]])


def rotate_spatial(R_AB: ArrayLike, S_B: ArrayLike) -> Array:
    """Re-express a spatial vector ([ω; v] or [τ; f], shape (6,)) from frame B into A."""
    R = _as_matrix(R_AB, (3, 3), "R_AB")
    S = np.asarray(S_B, dtype=np.float64)
    if S.shape != (6,):
        raise ShapeError(f"S_B: expected shape (6,), got {S.shape}")
    return np.concatenate([R @ S[:3], R @ S[3:]])
