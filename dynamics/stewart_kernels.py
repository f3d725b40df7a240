"""Compiled kernels of the Stewart platform's workspace check and clamp (numba), used by :mod:`dynamics.stewart`.

:func:`assess` is :meth:`dynamics.stewart.StewartRig._margin` and the Weyl bound of
:meth:`dynamics.stewart.StewartRig._conditioned` (the readable references, on Python floats)
on a pose given as an array; :func:`clamp_search` is :func:`dynamics.stewart.last_feasible` on
the margin along :class:`dynamics.stewart.GeodesicPath` (its expansion and :meth:`floats`), the
search :meth:`dynamics.stewart.PoseMap.to_rig` runs for a pose outside the workspace. Both are
written with the references' operations in the same order. Numba compiles without fast-math (no
reassociation, no fused multiply-add), ``sqrt``, ``sin`` and ``cos`` are the C library's, so the
results are bit for bit the references'; the tests hold them so. In the ``hil`` bridge's 250 Hz
step they cost microseconds instead of the references' tens (Python float arithmetic over six
legs, a dozen times per clamped step).

What stays in Python: the 6×6 singular values (``numpy.linalg.svd``, where the bound cannot
decide, :data:`UNDECIDED`), the rotation vector of the path (:func:`dynamics.spatial.rotation_vector`
on numpy's matrix product) and the project's errors: a pose that is not finite is returned as
:data:`NOT_FINITE`, and the caller runs the reference, which raises the error naming the field.

Loaded by :meth:`dynamics.stewart.StewartRig.load_kernels` (a model that steps a rig calls it when
it is built; a configuration check does not, so it imports no numba). Compiled on first use and
cached on disk (``cache=True``).

No I/O, clock or globals.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit
from numpy.typing import NDArray

__all__ = ["NOT_FINITE", "OUTSIDE", "CONDITIONED", "UNDECIDED", "assess", "clamp_search"]

NOT_FINITE = -1
"""Returned by :func:`assess` for a pose with a number that is not finite (the reference raises)."""
OUTSIDE = 0
"""The stroke or a joint cone is broken (margin < 0): the conditioning is not looked at."""
CONDITIONED = 1
"""Within the stroke and the cones, and the Weyl bound shows the condition number ≤ ``cond_max``."""
UNDECIDED = 2
"""Within the stroke and the cones; the bound does not decide: the caller computes the singular values of ``J``."""

Array = NDArray[np.float64]


@njit(cache=True)
def _margin(r00: float, r01: float, r02: float, r10: float, r11: float, r12: float, r20: float, r21: float,
            r22: float, tx: float, ty: float, tz: float, rows: Array, L0: float, cb: float, cp: float,
            lengths: Array, J: Array) -> float:
    """:meth:`dynamics.stewart.StewartRig._margin` (same operations) of the pose (R row-major, T): the margin;
    the leg lengths into ``lengths`` (6,) and the inverse Jacobian rows ``[(R p_k × u_k)ᵀ, u_kᵀ]``
    (:meth:`~dynamics.stewart.StewartRig._jacobian_of`) into ``J`` (6, 6)."""
    m = math.inf
    for k in range(6):
        px, py, bx, by, bz = rows[k, 0], rows[k, 1], rows[k, 2], rows[k, 3], rows[k, 4]
        wx, wy, wz, lo, hi = rows[k, 5], rows[k, 6], rows[k, 7], rows[k, 8], rows[k, 9]
        rx = r00 * px + r01 * py
        ry = r10 * px + r11 * py
        rz = r20 * px + r21 * py
        x, y, z = tx + rx - bx, ty + ry - by, tz + rz - bz
        n = math.sqrt(x * x + y * y + z * z)
        x, y, z = x / n, y / n, z / n
        ax = r00 * wx + r01 * wy + r02 * wz
        ay = r10 * wx + r11 * wy + r12 * wz
        az = r20 * wx + r21 * wy + r22 * wz
        c = n - lo
        if c < m:
            m = c
        c = hi - n
        if c < m:
            m = c
        c = L0 * (x * wx + y * wy + z * wz - cb)
        if c < m:
            m = c
        c = L0 * (x * ax + y * ay + z * az - cp)
        if c < m:
            m = c
        lengths[k] = n
        J[k, 0] = ry * z - rz * y
        J[k, 1] = rz * x - rx * z
        J[k, 2] = rx * y - ry * x
        J[k, 3] = x
        J[k, 4] = y
        J[k, 5] = z
    return m


@njit(cache=True)
def _verdict(m: float, J: Array, has_ref: bool, J0: Array, s_max: float, s_min: float, cond_max: float) -> int:
    """:data:`OUTSIDE` for ``m < 0``; else the Weyl bound of :meth:`dynamics.stewart.StewartRig._conditioned`
    (same operations) against the reference Jacobian ``J0`` and its extreme singular values: :data:`CONDITIONED`
    where it shows ``cond J ≤ cond_max``, else :data:`UNDECIDED`."""
    if not m >= 0.0:
        return OUTSIDE
    if not has_ref:
        return UNDECIDED
    d2 = 0.0
    for k in range(6):
        e0, e1, e2 = J[k, 0] - J0[k, 0], J[k, 1] - J0[k, 1], J[k, 2] - J0[k, 2]
        e3, e4, e5 = J[k, 3] - J0[k, 3], J[k, 4] - J0[k, 4], J[k, 5] - J0[k, 5]
        d2 += e0 * e0 + e1 * e1 + e2 * e2 + e3 * e3 + e4 * e4 + e5 * e5
    d = math.sqrt(d2)
    if d < s_min and s_max + d <= cond_max * (s_min - d):
        return CONDITIONED
    return UNDECIDED


@njit(cache=True)
def assess(X: Array, rows: Array, L0: float, cb: float, cp: float, has_ref: bool, J0: Array, s_max: float,
           s_min: float, cond_max: float, lengths: Array, J: Array) -> tuple[int, float]:
    """The workspace check of the pose ``X`` (4, 4) up to the singular values.

    Parameters
    ----------
    X : ndarray, shape (4, 4)
        ``X_RP``.
    rows : ndarray, shape (6, 10)
        Per leg ``p_k`` (x, y), ``b_k``, ``u⁰_k``, stroke ``lo``, ``hi`` (:attr:`dynamics.stewart.StewartRig._rows`).
    L0, cb, cp : float
        The mean neutral leg length [m] and the cosines of the base and platform cones (``-inf``: no cone).
    has_ref, J0, s_max, s_min : bool, ndarray (6, 6), float, float
        The last Jacobian whose singular values were computed, and those (``has_ref`` False: none yet).
    cond_max : float
    lengths : ndarray, shape (6,)
        Out: the leg lengths [m] (untouched for :data:`NOT_FINITE`).
    J : ndarray, shape (6, 6)
        Out: the inverse Jacobian (untouched for :data:`NOT_FINITE`); not ``J0``.

    Returns
    -------
    verdict : int
        :data:`NOT_FINITE` (nothing else meaningful), :data:`OUTSIDE`, :data:`CONDITIONED` or :data:`UNDECIDED`.
    m : float
        The stroke and joint-cone margin (:meth:`dynamics.stewart.StewartRig._margin`). [m]

    The outputs are the caller's arrays, not new ones: numba makes each array it returns a new numpy object,
    which costs more than the arithmetic here.
    """
    for i in range(4):
        for j in range(4):
            if not math.isfinite(X[i, j]):
                return NOT_FINITE, math.nan
    m = _margin(X[0, 0], X[0, 1], X[0, 2], X[1, 0], X[1, 1], X[1, 2], X[2, 0], X[2, 1], X[2, 2],
                X[0, 3], X[1, 3], X[2, 3], rows, L0, cb, cp, lengths, J)
    return _verdict(m, J, has_ref, J0, s_max, s_min, cond_max), m


@njit(cache=True)
def clamp_search(X_a: Array, X_b: Array, tx: float, ty: float, tz: float, rows: Array, L0: float, cb: float,
                 cp: float, g0: float, g1: float, tol: float, max_iter: int, has_ref: bool, J0: Array, s_max: float,
                 s_min: float, cond_max: float, X: Array, best_len: Array, best_J: Array) -> tuple[float, int, float]:
    """The edge of the workspace's stroke and joint cones on the geodesic from ``X_a`` (s = 0) to ``X_b`` (s = 1):
    :func:`dynamics.stewart.last_feasible` (same operations) on ``g(s)``, the margin at
    :meth:`dynamics.stewart.GeodesicPath.floats` ``(s)``.

    Parameters
    ----------
    X_a, X_b : ndarray, shape (4, 4)
        The path's ends (neutral, the requested pose).
    tx, ty, tz : float
        The rotation vector of ``R_aᵀ R_b`` (:class:`dynamics.stewart.GeodesicPath`). [rad]
    rows, L0, cb, cp : as :func:`assess`
    g0, g1 : float
        The margins at s = 0 and s = 1 (``g0 ≥ 0``).
    tol, max_iter : float, int
        :func:`dynamics.stewart.last_feasible`'s.
    has_ref, J0, s_max, s_min, cond_max : as :func:`assess`
    X : ndarray, shape (4, 4)
        Out: the pose at ``s``, where evaluated (its last row is set to ``[0, 0, 0, 1]`` in any case).
    best_len : ndarray, shape (6,)
        Out: the leg lengths there.
    best_J : ndarray, shape (6, 6)
        Out: the inverse Jacobian there; not ``J0``.

    Returns
    -------
    s : float
        The edge (feasible side; 1.0 if ``g1 ≥ 0``).
    verdict : int
        :func:`assess`'s at ``s`` if the margin was evaluated there, else :data:`NOT_FINITE` (s is 0 or 1; the
        outputs other than ``X``'s last row then untouched).
    m : float
        The margin there.
    """
    # GeodesicPath.__init__: R(s) row by row = a cos φ + b sin φ + e (1 − cos φ), φ = s |θ|
    phi = math.sqrt(tx * tx + ty * ty + tz * tz)
    if phi > 0:
        kx, ky, kz = tx / phi, ty / phi, tz / phi
    else:
        kx, ky, kz = 0.0, 0.0, 0.0
    terms = np.empty((9, 3))
    for i in range(3):
        a0, a1, a2 = X_a[i, 0], X_a[i, 1], X_a[i, 2]
        ak = a0 * kx + a1 * ky + a2 * kz
        terms[3 * i, 0], terms[3 * i, 1], terms[3 * i, 2] = a0, a1 * kz - a2 * ky, ak * kx
        terms[3 * i + 1, 0], terms[3 * i + 1, 1], terms[3 * i + 1, 2] = a1, a2 * kx - a0 * kz, ak * ky
        terms[3 * i + 2, 0], terms[3 * i + 2, 1], terms[3 * i + 2, 2] = a2, a0 * ky - a1 * kx, ak * kz
    pa0, pa1, pa2 = X_a[0, 3], X_a[1, 3], X_a[2, 3]
    d0, d1, d2 = X_b[0, 3] - X_a[0, 3], X_b[1, 3] - X_a[1, 3], X_b[2, 3] - X_a[2, 3]
    r = np.empty(9)
    lengths, J = np.empty(6), np.empty((6, 6))
    X[3, 0], X[3, 1], X[3, 2], X[3, 3] = 0.0, 0.0, 0.0, 1.0
    best_m = math.nan
    found = False
    # last_feasible
    a, b = 0.0, 1.0
    ga, gb = g0, g1
    if gb >= 0.0:
        return 1.0, NOT_FINITE, best_m
    side, margin = 0, ga
    for _ in range(max_iter):
        if b - a < tol or margin < tol:
            break
        s = (a * gb - b * ga) / (gb - ga)
        if not a < s < b:
            s = 0.5 * (a + b)
        # g(s): GeodesicPath.floats(s), then the margin
        c, sn = math.cos(s * phi), math.sin(s * phi)
        c1 = 1.0 - c
        for i in range(9):
            r[i] = terms[i, 0] * c + terms[i, 1] * sn + terms[i, 2] * c1
        p0, p1, p2 = pa0 + s * d0, pa1 + s * d1, pa2 + s * d2
        gs = _margin(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], p0, p1, p2, rows, L0, cb, cp, lengths, J)
        if gs >= 0.0:
            a, ga, margin = s, gs, gs
            if side == 1:
                gb *= 0.5
            side = 1
            found = True
            best_m = gs
            best_len[:] = lengths
            best_J[:, :] = J
            X[0, 0], X[0, 1], X[0, 2], X[0, 3] = r[0], r[1], r[2], p0
            X[1, 0], X[1, 1], X[1, 2], X[1, 3] = r[3], r[4], r[5], p1
            X[2, 0], X[2, 1], X[2, 2], X[2, 3] = r[6], r[7], r[8], p2
        else:
            b, gb = s, gs
            if side == -1:
                ga *= 0.5
            side = -1
    if not found:
        return a, NOT_FINITE, best_m
    return a, _verdict(best_m, best_J, has_ref, J0, s_max, s_min, cond_max), best_m
