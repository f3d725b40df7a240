"""Compiled kernel of the hil bridge's relative motion (numba), used by :class:`hil.bridge.HilBridge`.

:func:`relative_motion` is, on two bodies' samples given as arrays, what the bridge's step does with its
readable references on Python floats: each body predicted from its sample to the step
(:func:`dynamics.rigid_body.predict_rows`, with :func:`dynamics.spatial.quat_integrate_rows`), then the pose
``X_LB`` and twist ``V_LB_L`` of the payload's interface B relative to the orbiter's latch L
(``hil.bridge._relative_motion``, on :func:`dynamics.spatial.rotation_rows`, ``mat_vec_rows``, ``mat_mat_rows``,
``mat_t_vec_rows`` and ``cross_rows``). Written with the references' operations in the same order; numba compiles
without fast-math (no reassociation, no fused multiply-add), and ``sqrt``, ``sin`` and ``cos`` are the C
library's, so the results are bit for bit the references'; tests/dynamics/test_relative_motion_kernels.py holds
them so. In the bridge's 250 Hz step it costs a few microseconds instead of the references' tens.

What stays in Python: the project's errors. A quaternion whose integration is not finite or of zero norm is
returned as :data:`NO_QUATERNION`, and the caller runs the references, which raise the error naming the field.

Loaded by the bridge when it is built (a configuration check does not load it, so it imports no numba). Compiled
on first use and cached on disk (``cache=True``).

No I/O, clock or globals.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit
from numpy.typing import NDArray

from dynamics.rigid_body_kernels import _quat_integrate, _rotation

__all__ = ["BODY_SIZE", "NO_QUATERNION", "relative_motion"]

Array = NDArray[np.float64]

BODY_SIZE = 19
"""A body's sample as an array: position (3), quaternion [w, x, y, z] (4), velocity (3), body rate (3),
acceleration (3), body rate's derivative (3)."""
NO_QUATERNION = -1
"""Returned by :func:`relative_motion` when a body's predicted quaternion is not finite or of zero norm (the
reference raises)."""


@njit(cache=True)
def _predict(s: Array, dt: float) -> tuple[bool, tuple[float, float, float], tuple[float, float, float, float],
                                           tuple[float, float, float], tuple[float, float, float]]:
    """:func:`dynamics.rigid_body.predict_rows` (same operations) of the sample ``s`` (:data:`BODY_SIZE`,) over
    ``dt`` > 0; the sample's own state if ``dt`` ≤ 0 (the bridge does not predict then). First: False if the
    quaternion's integration failed."""
    p0, p1, p2 = s[0], s[1], s[2]
    v0, v1, v2 = s[7], s[8], s[9]
    w0, w1, w2 = s[10], s[11], s[12]
    if not dt > 0.0:
        return True, (p0, p1, p2), (s[3], s[4], s[5], s[6]), (v0, v1, v2), (w0, w1, w2)
    a0, a1, a2 = s[13], s[14], s[15]
    d0, d1, d2 = s[16], s[17], s[18]
    p = (p0 + v0 * dt + 0.5 * a0 * dt * dt, p1 + v1 * dt + 0.5 * a1 * dt * dt, p2 + v2 * dt + 0.5 * a2 * dt * dt)
    v = (v0 + a0 * dt, v1 + a1 * dt, v2 + a2 * dt)
    w = (w0 + d0 * dt, w1 + d1 * dt, w2 + d2 * dt)
    # quat_integrate_rows(q, ω + ω̇ dt/2, dt): the rigid body's compiled step (the same operations)
    ok, rw, rx, ry, rz = _quat_integrate(s[3], s[4], s[5], s[6], w0 + 0.5 * d0 * dt, w1 + 0.5 * d1 * dt,
                                         w2 + 0.5 * d2 * dt, dt)
    return ok, p, (rw, rx, ry, rz), v, w


@njit(cache=True)
def relative_motion(orbiter: Array, dt_o: float, payload: Array, dt_t: float, L: Array, B: Array, X: Array,
                    V: Array) -> int:
    """The pose ``X_LB`` (4, 4) and twist ``V_LB_L`` (6,) of B relative to L, the bodies predicted ahead.

    Parameters
    ----------
    orbiter, payload : ndarray, shape (BODY_SIZE,)
        The bodies' samples (:data:`BODY_SIZE`: the orbiter's ``p_WoOo_W``, ``quat_WO``, ``v_WOo_W``, ``w_WO_O``,
        ``a_WOo_W``, ``wdot_WO_O``; the payload's likewise).
    dt_o, dt_t : float
        Each sample's age at the step [s]: predicted over it if > 0.
    L, B : ndarray, shape (12,)
        The latch L in the orbiter body and the interface B in the payload body: position (3), rotation
        row-major (9).
    X, V : ndarray, shape (4, 4) and (6,)
        Filled with ``X_LB`` and ``V_LB_L`` ([ω_LB; d/dt p_LoBo] in L [rad/s, m/s]): the caller's arrays (a new
        array numba made would cost its return more than the arithmetic).

    Returns
    -------
    int
        1: every number of the result finite; 0: not; :data:`NO_QUATERNION` (``X`` and ``V`` not set).
    """
    ok_o, pO, qO, vO, w_O = _predict(orbiter, dt_o)
    ok_t, pT, qT, vT, w_T = _predict(payload, dt_t)
    if not (ok_o and ok_t):
        return NO_QUATERNION
    o00, o01, o02, o10, o11, o12, o20, o21, o22 = _rotation(qO[0], qO[1], qO[2], qO[3])  # R_WO
    t00, t01, t02, t10, t11, t12, t20, t21, t22 = _rotation(qT[0], qT[1], qT[2], qT[3])  # R_WT
    # r_OL = R_WO p_OL, r_TB = R_WT p_TB
    r0 = o00 * L[0] + o01 * L[1] + o02 * L[2]
    r1 = o10 * L[0] + o11 * L[1] + o12 * L[2]
    r2 = o20 * L[0] + o21 * L[1] + o22 * L[2]
    s0 = t00 * B[0] + t01 * B[1] + t02 * B[2]
    s1 = t10 * B[0] + t11 * B[1] + t12 * B[2]
    s2 = t20 * B[0] + t21 * B[1] + t22 * B[2]
    # R_WL = R_WO R_OL
    b00, b01, b02, b10, b11, b12, b20, b21, b22 = L[3], L[4], L[5], L[6], L[7], L[8], L[9], L[10], L[11]
    l00 = o00 * b00 + o01 * b10 + o02 * b20
    l01 = o00 * b01 + o01 * b11 + o02 * b21
    l02 = o00 * b02 + o01 * b12 + o02 * b22
    l10 = o10 * b00 + o11 * b10 + o12 * b20
    l11 = o10 * b01 + o11 * b11 + o12 * b21
    l12 = o10 * b02 + o11 * b12 + o12 * b22
    l20 = o20 * b00 + o21 * b10 + o22 * b20
    l21 = o20 * b01 + o21 * b11 + o22 * b21
    l22 = o20 * b02 + o21 * b12 + o22 * b22
    d0 = pT[0] + s0 - pO[0] - r0
    d1 = pT[1] + s1 - pO[1] - r1
    d2 = pT[2] + s2 - pO[2] - r2
    # M = R_WT R_TB
    c00, c01, c02, c10, c11, c12, c20, c21, c22 = B[3], B[4], B[5], B[6], B[7], B[8], B[9], B[10], B[11]
    m00 = t00 * c00 + t01 * c10 + t02 * c20
    m01 = t00 * c01 + t01 * c11 + t02 * c21
    m02 = t00 * c02 + t01 * c12 + t02 * c22
    m10 = t10 * c00 + t11 * c10 + t12 * c20
    m11 = t10 * c01 + t11 * c11 + t12 * c21
    m12 = t10 * c02 + t11 * c12 + t12 * c22
    m20 = t20 * c00 + t21 * c10 + t22 * c20
    m21 = t20 * c01 + t21 * c11 + t22 * c21
    m22 = t20 * c02 + t21 * c12 + t22 * c22
    # R_LB = R_WLᵀ M (the rows of R_WLᵀ: R_WL's columns)
    R = (l00 * m00 + l10 * m10 + l20 * m20, l00 * m01 + l10 * m11 + l20 * m21, l00 * m02 + l10 * m12 + l20 * m22,
         l01 * m00 + l11 * m10 + l21 * m20, l01 * m01 + l11 * m11 + l21 * m21, l01 * m02 + l11 * m12 + l21 * m22,
         l02 * m00 + l12 * m10 + l22 * m20, l02 * m01 + l12 * m11 + l22 * m21, l02 * m02 + l12 * m12 + l22 * m22)
    # p_LB = R_WLᵀ d
    p0 = l00 * d0 + l10 * d1 + l20 * d2
    p1 = l01 * d0 + l11 * d1 + l21 * d2
    p2 = l02 * d0 + l12 * d1 + l22 * d2
    # wO = R_WO ω_O, wT = R_WT ω_T
    wo0 = o00 * w_O[0] + o01 * w_O[1] + o02 * w_O[2]
    wo1 = o10 * w_O[0] + o11 * w_O[1] + o12 * w_O[2]
    wo2 = o20 * w_O[0] + o21 * w_O[1] + o22 * w_O[2]
    wt0 = t00 * w_T[0] + t01 * w_T[1] + t02 * w_T[2]
    wt1 = t10 * w_T[0] + t11 * w_T[1] + t12 * w_T[2]
    wt2 = t20 * w_T[0] + t21 * w_T[1] + t22 * w_T[2]
    # a = wO × r_OL, b = wT × r_TB, c = wO × d
    a0, a1, a2 = wo1 * r2 - wo2 * r1, wo2 * r0 - wo0 * r2, wo0 * r1 - wo1 * r0
    e0, e1, e2 = wt1 * s2 - wt2 * s1, wt2 * s0 - wt0 * s2, wt0 * s1 - wt1 * s0
    f0, f1, f2 = wo1 * d2 - wo2 * d1, wo2 * d0 - wo0 * d2, wo0 * d1 - wo1 * d0
    dv0 = (vT[0] + e0) - (vO[0] + a0) - f0
    dv1 = (vT[1] + e1) - (vO[1] + a1) - f1
    dv2 = (vT[2] + e2) - (vO[2] + a2) - f2
    x0, x1, x2 = wt0 - wo0, wt1 - wo1, wt2 - wo2
    V[0] = l00 * x0 + l10 * x1 + l20 * x2
    V[1] = l01 * x0 + l11 * x1 + l21 * x2
    V[2] = l02 * x0 + l12 * x1 + l22 * x2
    V[3] = l00 * dv0 + l10 * dv1 + l20 * dv2
    V[4] = l01 * dv0 + l11 * dv1 + l21 * dv2
    V[5] = l02 * dv0 + l12 * dv1 + l22 * dv2
    finite = True
    for i in range(3):
        for j in range(3):
            X[i, j] = R[3 * i + j]
            finite = finite and math.isfinite(R[3 * i + j])
    X[0, 3], X[1, 3], X[2, 3] = p0, p1, p2
    X[3, 0], X[3, 1], X[3, 2], X[3, 3] = 0.0, 0.0, 0.0, 1.0
    for i in range(6):
        finite = finite and math.isfinite(V[i])
    return 1 if finite and math.isfinite(p0) and math.isfinite(p1) and math.isfinite(p2) else 0
