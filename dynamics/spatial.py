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

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from errors import ShapeError

__all__ = [
    "as_vector",
    "cross3",
    "cross_batch",
    "cross_rows",
    "dexp_inv",
    "dexp_inv_rows",
    "mat_mat_rows",
    "mat_mat_t_rows",
    "mat_t_mat_rows",
    "mat_t_vec_rows",
    "mat_vec_rows",
    "norm3",
    "pose",
    "pose_apply_inverse_rows",
    "pose_apply_rows",
    "pose_from_rows",
    "pose_from_vector",
    "pose_inverse",
    "pose_rows",
    "pose_vector",
    "quat_angle",
    "quat_conjugate",
    "quat_integrate",
    "quat_integrate_rows",
    "quat_multiply",
    "quat_normalize",
    "quat_rate",
    "quat_rotate",
    "quat_to_rotation",
    "quat_to_rotvec",
    "rotate_spatial",
    "rotation_rows",
    "rotation_to_quat",
    "rotation_vector",
    "rotation_vector_rows",
    "rotation_error_rows",
    "refer_wrench_rows",
    "shift_twist",
    "shift_wrench",
    "shift_wrench_rows",
    "skew",
    "skew_rows",
]

Array = NDArray[np.float64]


def as_vector(x: ArrayLike, n: int, name: str) -> Array:
    """Return ``x`` as a finite float64 array of shape (n,), else raise ShapeError naming ``name``."""
    a = np.asarray(x, dtype=np.float64)
    if a.shape != (n,):
        raise ShapeError(f"{name}: expected shape ({n},), got {a.shape}")
    # float loop for short vectors: ~0.3 µs against numpy's ~3 µs per call (hot path)
    finite = all(map(math.isfinite, a.tolist())) if n <= 16 else bool(np.isfinite(a).all())
    if not finite:
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


def skew_rows(a: Array) -> Array:
    """Cross-product matrices of a stack of vectors (batched :func:`skew`, no checks): ``skew_rows(a)[k] @ x ==
    np.cross(a[k], x)``.

    Parameters
    ----------
    a : ndarray, shape (..., 3)

    Returns
    -------
    ndarray, shape (..., 3, 3)
    """
    out = np.zeros(a.shape[:-1] + (3, 3))
    out[..., 0, 1] = -a[..., 2]
    out[..., 0, 2] = a[..., 1]
    out[..., 1, 0] = a[..., 2]
    out[..., 1, 2] = -a[..., 0]
    out[..., 2, 0] = -a[..., 1]
    out[..., 2, 1] = a[..., 0]
    return out


def cross_batch(a: Array, b: Array) -> Array:
    """Row-wise ``a × b`` of (..., 3) arrays, broadcast (``numpy.cross`` without its generic
    overhead, ~10× faster on a few rows).

    Parameters
    ----------
    a, b : ndarray, shape (..., 3)
        Broadcast against each other.

    Returns
    -------
    ndarray, shape (..., 3)
    """
    out = np.empty(a.shape if a.shape == b.shape else np.broadcast_shapes(a.shape, b.shape))
    out[..., 0] = a[..., 1] * b[..., 2] - a[..., 2] * b[..., 1]
    out[..., 1] = a[..., 2] * b[..., 0] - a[..., 0] * b[..., 2]
    out[..., 2] = a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0]
    return out


def cross3(a: Array | Sequence[float], b: Array | Sequence[float]) -> Array:
    """``a × b`` for two (3,) vectors, without ``numpy.cross``'s ~25 µs of generic overhead.

    The contact and rigid-body steps run at ≥ 1 kHz and need a dozen cross products per
    step; this unpacks the components and does plain float arithmetic.

    Parameters
    ----------
    a, b : ndarray or sequence of float, shape (3,)

    Returns
    -------
    ndarray, shape (3,)

    Raises
    ------
    ShapeError
        If ``a`` or ``b`` does not have exactly three components.
    """
    try:  # ndarray.tolist(): Python floats, several times faster than numpy scalars
        a0, a1, a2 = a.tolist() if isinstance(a, np.ndarray) else a
        b0, b1, b2 = b.tolist() if isinstance(b, np.ndarray) else b
    except (TypeError, ValueError) as err:
        raise ShapeError(f"cross3: expected two (3,) vectors, got {np.shape(a)} and {np.shape(b)}") from err
    return np.array([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], dtype=np.float64)


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


def rotation_rows(w: float, x: float, y: float, z: float) -> tuple[float, ...]:
    """``R_AB`` of the unit quaternion ``q_AB = [w, x, y, z]``, row-major, nine floats.

    The float kernel of :func:`quat_to_rotation` (SVDS seed 003 eq. 2-7), for hot loops
    that work on Python floats.
    """
    return (1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
            2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
            2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y))


def mat_vec_rows(R: Sequence[float], x0: float, x1: float, x2: float) -> list[float]:
    """``R x`` for a 3×3 matrix given row-major as nine floats (the float kernel of ``R @ x``)."""
    return [R[0] * x0 + R[1] * x1 + R[2] * x2, R[3] * x0 + R[4] * x1 + R[5] * x2, R[6] * x0 + R[7] * x1 + R[8] * x2]


def mat_t_vec_rows(R: Sequence[float], x0: float, x1: float, x2: float) -> list[float]:
    """``Rᵀ x`` for a 3×3 matrix given row-major as nine floats."""
    return [R[0] * x0 + R[3] * x1 + R[6] * x2, R[1] * x0 + R[4] * x1 + R[7] * x2, R[2] * x0 + R[5] * x1 + R[8] * x2]


def mat_mat_rows(A: Sequence[float], B: Sequence[float]) -> tuple[float, ...]:
    """``A B`` for two 3×3 matrices given row-major as nine floats each; nine floats."""
    a00, a01, a02, a10, a11, a12, a20, a21, a22 = A
    b00, b01, b02, b10, b11, b12, b20, b21, b22 = B
    return (a00 * b00 + a01 * b10 + a02 * b20, a00 * b01 + a01 * b11 + a02 * b21, a00 * b02 + a01 * b12 + a02 * b22,
            a10 * b00 + a11 * b10 + a12 * b20, a10 * b01 + a11 * b11 + a12 * b21, a10 * b02 + a11 * b12 + a12 * b22,
            a20 * b00 + a21 * b10 + a22 * b20, a20 * b01 + a21 * b11 + a22 * b21, a20 * b02 + a21 * b12 + a22 * b22)


def mat_mat_t_rows(A: Sequence[float], B: Sequence[float]) -> tuple[float, ...]:
    """``A Bᵀ`` for two 3×3 matrices given row-major as nine floats each; nine floats, row-major.

    Element (i, j) is the dot product of row i of A with row j of B, summed left to right
    (``A[i,0] B[j,0] + A[i,1] B[j,1] + A[i,2] B[j,2]``). With ``A = R_OA`` and ``B = R_OB``
    it is ``R_OA R_BO``, the rotation taking B's attitude to A's, in O (the argument of
    :func:`rotation_vector` for an attitude error).
    """
    a00, a01, a02, a10, a11, a12, a20, a21, a22 = A
    b00, b01, b02, b10, b11, b12, b20, b21, b22 = B
    return (a00 * b00 + a01 * b01 + a02 * b02, a00 * b10 + a01 * b11 + a02 * b12, a00 * b20 + a01 * b21 + a02 * b22,
            a10 * b00 + a11 * b01 + a12 * b02, a10 * b10 + a11 * b11 + a12 * b12, a10 * b20 + a11 * b21 + a12 * b22,
            a20 * b00 + a21 * b01 + a22 * b02, a20 * b10 + a21 * b11 + a22 * b12, a20 * b20 + a21 * b21 + a22 * b22)


def mat_t_mat_rows(A: Sequence[float], B: Sequence[float]) -> tuple[float, ...]:
    """``Aᵀ B`` for two 3×3 matrices given row-major as nine floats each; nine floats, row-major.

    Element (i, j) is column i of A dotted with column j of B, summed over the rows in order. With
    ``A = R_WL`` and ``B = R_WB`` it is ``R_LB``.
    """
    a00, a01, a02, a10, a11, a12, a20, a21, a22 = A
    b00, b01, b02, b10, b11, b12, b20, b21, b22 = B
    return (a00 * b00 + a10 * b10 + a20 * b20, a00 * b01 + a10 * b11 + a20 * b21, a00 * b02 + a10 * b12 + a20 * b22,
            a01 * b00 + a11 * b10 + a21 * b20, a01 * b01 + a11 * b11 + a21 * b21, a01 * b02 + a11 * b12 + a21 * b22,
            a02 * b00 + a12 * b10 + a22 * b20, a02 * b01 + a12 * b11 + a22 * b21, a02 * b02 + a12 * b12 + a22 * b22)


def norm3(x: Sequence[float]) -> float:
    """Euclidean norm ``sqrt(x0² + x1² + x2²)`` of three floats (a sequence or a (3,) array).

    The float kernel of ``numpy.linalg.norm`` for one 3-vector, ~10× cheaper on Python floats.
    It is not ``math.hypot`` (which rounds differently): the hot loops' results depend on this
    exact sum.

    Raises
    ------
    ShapeError
        If ``x`` does not have exactly three components.
    """
    try:
        x0, x1, x2 = x
    except (TypeError, ValueError) as err:
        raise ShapeError(f"norm3: expected three components, got {np.shape(x)}") from err
    return math.sqrt(x0 * x0 + x1 * x1 + x2 * x2)


def cross_rows(a0: float, a1: float, a2: float, b0: float, b1: float, b2: float) -> list[float]:
    """``a × b`` on six floats (the kernel of :func:`cross3`)."""
    return [a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0]


def quat_integrate_rows(q: Sequence[float], wx: float, wy: float, wz: float,
                        h: float) -> tuple[float, float, float, float]:
    """``q ⊗ exp(½ ω h)`` normalised, scalar ≥ 0: :func:`quat_integrate` on floats (its kernel).

    Parameters
    ----------
    q : sequence of 4 float
        ``q_WB`` [w, x, y, z] at t (unit).
    wx, wy, wz : float
        Body rate ω_B. [rad/s]
    h : float
        [s]

    Raises
    ------
    ShapeError
        If the result is not finite or has zero norm.
    """
    w1, x1, y1, z1 = q
    norm_w = math.sqrt(wx * wx + wy * wy + wz * wz)
    angle = norm_w * h
    if angle < 1e-12:
        w2, x2, y2, z2 = 1.0, 0.5 * h * wx, 0.5 * h * wy, 0.5 * h * wz
    else:
        s = math.sin(0.5 * angle)
        w2, x2, y2, z2 = math.cos(0.5 * angle), s * (wx / norm_w), s * (wy / norm_w), s * (wz / norm_w)
    rw = w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2
    rx = w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2
    ry = w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2
    rz = w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2
    n = math.sqrt(rw * rw + rx * rx + ry * ry + rz * rz)
    if not math.isfinite(n) or n < 1e-12:
        raise ShapeError(f"quat_wxyz: integrated quaternion not finite or zero norm: {[rw, rx, ry, rz]}")
    if rw < 0.0:
        n = -n
    return rw / n, rx / n, ry / n, rz / n


def dexp_inv_rows(p0: float, p1: float, p2: float, w0: float, w1: float, w2: float) -> list[float]:
    """:func:`dexp_inv` on floats (its kernel): ``φ̇`` for ``q = q_k ⊗ exp(φ)``."""
    th2 = p0 * p0 + p1 * p1 + p2 * p2
    if th2 < 1e-8:
        c = 1.0 / 12.0 + th2 / 720.0
    else:
        th = math.sqrt(th2)
        c = 1.0 / th2 - (1.0 + math.cos(th)) / (2.0 * th * math.sin(th))
    a0, a1, a2 = p1 * w2 - p2 * w1, p2 * w0 - p0 * w2, p0 * w1 - p1 * w0  # φ × w
    b0, b1, b2 = p1 * a2 - p2 * a1, p2 * a0 - p0 * a2, p0 * a1 - p1 * a0  # φ × (φ × w)
    return [w0 + 0.5 * a0 + c * b0, w1 + 0.5 * a1 + c * b1, w2 + 0.5 * a2 + c * b2]


def quat_to_rotation(q: ArrayLike) -> Array:
    """Rotation matrix ``R_AB`` (3, 3) of the unit quaternion ``q_AB`` [w, x, y, z].

    SVDS seed 003 eq. (2-7): ``R = I + 2 e1 [e2x] + 2 [e2x]^2`` for a unit quaternion.
    """
    a = np.asarray(q, dtype=np.float64)
    if a.shape != (4,):
        raise ShapeError(f"quat_wxyz: expected shape (4,), got {a.shape}")
    return np.array(rotation_rows(*a.tolist())).reshape(3, 3)


def rotation_to_quat(R: ArrayLike) -> Array:
    """Unit ``quat_wxyz`` (scalar part ≥ 0) of the rotation matrix ``R_AB`` (3, 3)."""
    from scipy.spatial.transform import Rotation  # here, not at the top: importing it takes ~0.4 s

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

    ``q(t+h) = q(t) ⊗ exp(½ ω_B h)``: exact for constant ω_B, stays unit norm (the result
    is normalised, scalar part ≥ 0, as :func:`quat_normalize`). Plain float arithmetic
    inside: it runs in every stage of :func:`dynamics.rigid_body.step`.

    Parameters
    ----------
    q : array_like, shape (4,)
        ``q_WB`` at t.
    w_B : array_like, shape (3,)
        Angular velocity of B in W, expressed in B. [rad/s]
    h : float
        Time step. [s]

    Returns
    -------
    ndarray, shape (4,)
        ``q_WB`` at t + h.

    Raises
    ------
    ShapeError
        If ``q`` is not (4,) or ``w_B`` not (3,), or the result is not finite or has zero norm.
    """
    a = np.asarray(q, dtype=np.float64)
    w = np.asarray(w_B, dtype=np.float64)
    if a.shape != (4,) or w.shape != (3,):
        raise ShapeError(f"q, w_B: expected shapes (4,), (3,), got {a.shape}, {w.shape}")
    wx, wy, wz = w.tolist()
    return np.array(quat_integrate_rows(a.tolist(), wx, wy, wz, float(h)))


def quat_angle(q1: ArrayLike, q2: ArrayLike) -> float:
    """Rotation angle [rad] in [0, π] between two orientations ``q_WA`` and ``q_WB``."""
    d = quat_multiply(quat_conjugate(q1), q2)
    return float(2.0 * np.arctan2(np.linalg.norm(d[1:]), abs(d[0])))


def quat_to_rotvec(q: ArrayLike) -> Array:
    """Rotation vector θ (3,) of a ``quat_wxyz`` (SO(3) log map), angle |θ| in [0, π]. [rad]

    ``θ = 2 atan2(|e2|, e1) e2 / |e2|`` for the unit quaternion ``[e1, e2]`` with ``e1 ≥ 0``
    (the inverse of ``quat_integrate([1, 0, 0, 0], θ, 1)``); zero for the identity.

    Parameters
    ----------
    q : array_like, shape (4,)
        ``q_AB``; normalised here.

    Returns
    -------
    ndarray, shape (3,)
        θ such that ``R_AB = exp([θ×])``, in A (equal in B: θ is on the rotation axis). [rad]

    Raises
    ------
    ShapeError
        If ``q`` is not a finite (4,) array with non-zero norm.
    """
    q = quat_normalize(q)
    s = float(np.linalg.norm(q[1:]))
    return np.zeros(3) if s < 1e-15 else q[1:] / s * 2.0 * math.atan2(s, q[0])


def rotation_vector(R: ArrayLike) -> Array:
    """Rotation vector θ (3,) of a rotation matrix: ``R = exp([θ×])`` (SO(3) log map). [rad]

    ``θ = φ/(2 sin φ) vee(R − Rᵀ)`` with ``cos φ = (tr R − 1)/2``; first order
    ``θ = ½ vee(R − Rᵀ)`` for φ < 1e-6, and through the quaternion
    (:func:`quat_to_rotvec`) within 1e-3 of φ = π where ``sin φ`` vanishes.

    Parameters
    ----------
    R : array_like, shape (3, 3)
        Rotation matrix ``R_AB``.

    Returns
    -------
    ndarray, shape (3,)
        θ, angle |θ| in [0, π]. [rad]

    Raises
    ------
    ShapeError
        If ``R`` is not (3, 3).
    """
    R = _as_matrix(R, (3, 3), "R")
    th = rotation_vector_rows(*R.ravel().tolist())
    return quat_to_rotvec(rotation_to_quat(R)) if th is None else np.array(th)


def rotation_vector_rows(r00: float, r01: float, r02: float, r10: float, r11: float, r12: float, r20: float,
                         r21: float, r22: float) -> list[float] | None:
    """The float kernel of :func:`rotation_vector` (``R`` row-major, nine floats): θ as three
    floats, or None within 1e-3 of φ = π (where :func:`rotation_vector` goes through the
    quaternion). [rad]
    """
    c = min(1.0, max(-1.0, 0.5 * (r00 + r11 + r22 - 1.0)))
    v0, v1, v2 = r21 - r12, r02 - r20, r10 - r01
    phi = math.acos(c)
    if phi < 1e-6:
        return [0.5 * v0, 0.5 * v1, 0.5 * v2]
    if phi < math.pi - 1e-3:
        f = phi / (2.0 * math.sin(phi))
        return [f * v0, f * v1, f * v2]
    return None


def rotation_error_rows(R_WA: Sequence[float], R_WB: Sequence[float]) -> list[float]:
    """Rotation vector θ (in W) that takes A's attitude to B's, ``R_WB = exp([θ×]) R_WA``, on floats. [rad]

    The float kernel of :func:`dynamics.contact.rotation_error` (equal to round-off): the SO(3)
    log map (:func:`rotation_vector`) of ``R_WB R_WAᵀ`` (:func:`mat_mat_t_rows`), both rotations
    row-major as nine floats. Within 1e-3 of φ = π it goes through the quaternion as
    :func:`rotation_vector` does.

    Returns
    -------
    list of 3 float
        θ, angle in [0, π]. [rad]
    """
    R = mat_mat_t_rows(R_WB, R_WA)
    th = rotation_vector_rows(*R)
    return th if th is not None else rotation_vector(np.reshape(R, (3, 3))).tolist()


def dexp_inv(phi: ArrayLike, w: ArrayLike) -> Array:
    """Inverse right Jacobian of SO(3) applied to a body rate: ``φ̇`` for ``q = q_k ⊗ exp(φ)``.

    ``φ̇ = J_r⁻¹(φ) w = w + ½ φ × w + c(θ) φ × (φ × w)``, θ = |φ|,
    ``c = 1/θ² − (1 + cos θ)/(2 θ sin θ) = (1 − (θ/2) cot(θ/2))/θ²``; for θ² < 1e-8 the
    series ``c = 1/12 + θ²/720`` (next term θ⁴/30240, below round-off there).

    Left and right: the left Jacobian is ``J_l(φ) = J_r(−φ)``, so for ``R = exp([φ×]) R_k``
    moving at a world-frame rate w, ``φ̇ = J_l⁻¹(φ) w = dexp_inv(-φ, w)``
    (:func:`dynamics.chain.step_rk4` uses this form for its free base). Valid for θ < 2π.

    Parameters
    ----------
    phi : array_like, shape (3,)
        Rotation vector φ of the increment. [rad]
    w : array_like, shape (3,)
        Angular velocity (body frame for the right form, world frame for the left). [rad/s]

    Returns
    -------
    ndarray, shape (3,)
        ``φ̇``. [rad/s]

    Raises
    ------
    ShapeError
        If ``phi`` or ``w`` is not (3,).

    References
    ----------
    Munthe-Kaas, BIT 38 (1998) (dexp⁻¹ in the RKMK method); Chirikjian, *Stochastic Models,
    Information Theory, and Lie Groups* vol. 2 (2011), §10.6 (J_l, J_r of SO(3)).
    """
    pa = np.asarray(phi, dtype=np.float64)
    wa = np.asarray(w, dtype=np.float64)
    if pa.shape != (3,) or wa.shape != (3,):
        raise ShapeError(f"phi, w: expected shapes (3,), (3,), got {pa.shape}, {wa.shape}")
    return np.array(dexp_inv_rows(*pa.tolist(), *wa.tolist()))


def pose(R_AB: ArrayLike, p_AoBo_A: ArrayLike) -> Array:
    """Homogeneous pose ``X_AB`` (4, 4) from ``R_AB`` (3, 3) and ``p_AoBo_A`` (3,) [m]."""
    X = np.eye(4)
    X[:3, :3] = _as_matrix(R_AB, (3, 3), "R_AB")
    X[:3, 3] = as_vector(p_AoBo_A, 3, "p_AoBo_A")
    return X


def pose_rows(X_AB: ArrayLike) -> tuple[list[float], tuple[float, ...]]:
    """A pose ``X_AB`` (4, 4) as the float kernels take it: ``p_AoBo_A`` (3 floats) and ``R_AB`` (nine floats,
    row-major). [m]

    Raises
    ------
    ShapeError
        If ``X_AB`` is not (4, 4).
    """
    X = _as_matrix(X_AB, (4, 4), "X_AB")
    return X[:3, 3].tolist(), tuple(X[:3, :3].ravel().tolist())


def pose_from_rows(p_AoBo_A: Sequence[float], R_AB: Sequence[float]) -> Array:
    """Inverse of :func:`pose_rows`: ``X_AB`` (4, 4) from ``p_AoBo_A`` (3 floats) and ``R_AB`` (nine floats,
    row-major). [m]

    Raises
    ------
    ShapeError
        If ``p_AoBo_A`` does not have 3 values or ``R_AB`` 9.
    """
    if len(p_AoBo_A) != 3 or len(R_AB) != 9:
        raise ShapeError(f"p_AoBo_A, R_AB: expected 3 and 9 values, got {len(p_AoBo_A)} and {len(R_AB)}")
    X = np.eye(4)
    X[:3, :3] = np.reshape(R_AB, (3, 3))
    X[:3, 3] = p_AoBo_A
    return X


def pose_apply_rows(p_AoBo_A: Sequence[float], R_AB: Sequence[float], p_BoQo_B: Sequence[float]) -> list[float]:
    """``p_AoQo_A = p_AoBo_A + R_AB p_BoQo_B``: a point given in B, in A (``X_AB`` applied to it), on floats
    (``R_AB`` nine floats row-major). The float kernel of ``(X_AB @ [p; 1])[:3]``. [m]"""
    d0, d1, d2 = mat_vec_rows(R_AB, p_BoQo_B[0], p_BoQo_B[1], p_BoQo_B[2])
    return [p_AoBo_A[0] + d0, p_AoBo_A[1] + d1, p_AoBo_A[2] + d2]


def pose_apply_inverse_rows(p_AoBo_A: Sequence[float], R_AB: Sequence[float], p_AoQo_A: Sequence[float]
                            ) -> list[float]:
    """``p_BoQo_B = R_ABᵀ (p_AoQo_A − p_AoBo_A)``: a point given in A, in B (``X_BA`` applied to it), on floats
    (``R_AB`` nine floats row-major). The float kernel of ``(pose_inverse(X_AB) @ [p; 1])[:3]``. [m]"""
    return mat_t_vec_rows(R_AB, p_AoQo_A[0] - p_AoBo_A[0], p_AoQo_A[1] - p_AoBo_A[1], p_AoQo_A[2] - p_AoBo_A[2])


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
    return np.array(shift_wrench_rows(F.tolist(), p.tolist()))


def shift_wrench_rows(F_A: Sequence[float], p_AoBo: Sequence[float]) -> list[float]:
    """:func:`shift_wrench` on Python floats (its kernel; no checks): ``[τ − p_AoBo × f; f]``.

    Parameters
    ----------
    F_A : sequence of 6 float
        [τ; f] about Ao. [N·m, N]
    p_AoBo : sequence of 3 float
        From Ao to the new reference point Bo, same frame. [m]

    Returns
    -------
    F_B : list of 6 float
        [τ; f] about Bo. [N·m, N]
    """
    t0, t1, t2, f0, f1, f2 = F_A
    p0, p1, p2 = p_AoBo
    return [t0 - (p1 * f2 - p2 * f1), t1 - (p2 * f0 - p0 * f2), t2 - (p0 * f1 - p1 * f0), f0, f1, f2]


def refer_wrench_rows(F_A: Sequence[float], p_BoAo: Sequence[float]) -> list[float]:
    """A wrench about Ao referred to Bo, given Ao *from* Bo: ``[τ + p_BoAo × f; f]`` on Python floats (no checks).

    The form of the moment about an origin of a wrench applied at a point whose position from it is
    known (``p_WoPo`` to refer to Wo). :func:`shift_wrench_rows` with the opposite lever, to the bit
    but for the sign of a zero result: each caller keeps the form (sum or difference) it was written in.

    Parameters
    ----------
    F_A : sequence of 6 float
        [τ; f] about Ao. [N·m, N]
    p_BoAo : sequence of 3 float
        From the new reference point Bo to Ao, same frame. [m]

    Returns
    -------
    F_B : list of 6 float
        [τ; f] about Bo. [N·m, N]
    """
    t0, t1, t2, f0, f1, f2 = F_A
    p0, p1, p2 = p_BoAo
    return [t0 + (p1 * f2 - p2 * f1), t1 + (p2 * f0 - p0 * f2), t2 + (p0 * f1 - p1 * f0), f0, f1, f2]


def rotate_spatial(R_AB: ArrayLike, S_B: ArrayLike) -> Array:
    """Re-express a spatial vector ([ω; v] or [τ; f], shape (6,)) from frame B into A."""
    R = _as_matrix(R_AB, (3, 3), "R_AB")
    S = np.asarray(S_B, dtype=np.float64)
    if S.shape != (6,):
        raise ShapeError(f"S_B: expected shape (6,), got {S.shape}")
    return np.concatenate([R @ S[:3], R @ S[3:]])


def pose_vector(X_AB: ArrayLike) -> Array:
    """Pose 6-vector ``[p_AoBo_A (3); θ (3)]`` of ``X_AB`` (4, 4), θ the rotation vector of ``R_AB``.

    The form in which configs and the rig mapping write poses. [m, rad]

    Raises
    ------
    ShapeError
        If ``X_AB`` is not (4, 4).
    """
    X = _as_matrix(X_AB, (4, 4), "X_AB")
    return np.concatenate([X[:3, 3], quat_to_rotvec(rotation_to_quat(X[:3, :3]))])


def pose_from_vector(x: ArrayLike) -> Array:
    """Inverse of :func:`pose_vector`: ``X_AB`` (4, 4) from ``[p (3); θ (3)]`` [m, rad].

    Raises
    ------
    ShapeError
        If ``x`` is not (6,) or not finite; the message names "pose vector".
    """
    v = as_vector(x, 6, "pose vector")
    q = quat_integrate(np.array([1.0, 0.0, 0.0, 0.0]), v[3:], 1.0)
    return pose(quat_to_rotation(q), v[:3])
