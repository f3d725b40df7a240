"""Compiled kernel of the rigid body's RK4 Munthe-Kaas step (numba), used by :func:`dynamics.rigid_body.step`.

:func:`rkmk4` is :func:`dynamics.rigid_body._rkmk4` (the readable reference, on Python floats)
run ``substeps`` times, with :func:`dynamics.spatial.quat_integrate_rows`,
:func:`dynamics.spatial.rotation_rows`, :func:`dynamics.spatial.dexp_inv_rows` and the orbital
terms of :func:`dynamics.orbit.cw_acceleration_rows` and
:func:`dynamics.orbit.gravity_gradient_rows` written with the same operations in the same
order. Numba compiles without fast-math (no reassociation, no fused multiply-add), ``sin``,
``cos`` and ``sqrt`` are the C library's, so the result is bit for bit the reference's; the tests
hold it so. In the contact service's 1 kHz step it costs a few microseconds instead of the
reference's tens (Python float arithmetic and a dozen small calls per stage).

Arguments are tuples of floats (numba's dispatch types a tuple of floats far faster than as
many separate float arguments) and it returns ``(code, x)``: ``code`` 0 and ``x`` a new (13,)
array of the state values at ``t + h`` (what the state keeps; returning it costs less than
building it from a tuple), or ``code`` :data:`NOT_FINITE` where the reference would raise
(a stage's quaternion or the result not finite): the caller then runs the reference, which
raises the project's error naming the field (numba raises no project errors).

Compiled on first use and cached on disk (``cache=True``, numba's ``__pycache__`` next to
this file, or ``NUMBA_CACHE_DIR``): the first process compiles once (seconds), the next ones
load the machine code.

No I/O, clock or globals.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit
from numpy.typing import NDArray

__all__ = ["NOT_FINITE", "rkmk4"]

NOT_FINITE = 1  # a quaternion or the result is not finite (the reference raises ShapeError)

NO_ORBIT, ORBIT, ORBIT_GG = 0, 1, 2  # rkmk4's ``orbit``: none, CW terms, CW terms and gravity gradient


@njit(cache=True)
def _quat_integrate(w1: float, x1: float, y1: float, z1: float, wx: float, wy: float, wz: float,
                    h: float) -> tuple[bool, float, float, float, float]:
    """:func:`dynamics.spatial.quat_integrate_rows` (same operations): ``(ok, w, x, y, z)``."""
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
        return False, rw, rx, ry, rz
    if rw < 0.0:
        n = -n
    return True, rw / n, rx / n, ry / n, rz / n


@njit(cache=True)
def _rotation(w: float, x: float, y: float, z: float) -> tuple[float, float, float, float, float, float, float,
                                                                 float, float]:
    """:func:`dynamics.spatial.rotation_rows` of a unit quaternion (same operations): ``R`` row-major."""
    return (1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
            2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
            2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y))


@njit(cache=True)
def _dexp_inv(p0: float, p1: float, p2: float, w0: float, w1: float, w2: float) -> tuple[float, float, float]:
    """:func:`dynamics.spatial.dexp_inv_rows` (same operations)."""
    th2 = p0 * p0 + p1 * p1 + p2 * p2
    if th2 < 1e-8:
        c = 1.0 / 12.0 + th2 / 720.0
    else:
        th = math.sqrt(th2)
        c = 1.0 / th2 - (1.0 + math.cos(th)) / (2.0 * th * math.sin(th))
    a0, a1, a2 = p1 * w2 - p2 * w1, p2 * w0 - p0 * w2, p0 * w1 - p1 * w0
    b0, b1, b2 = p1 * a2 - p2 * a1, p2 * a0 - p0 * a2, p0 * a1 - p1 * a0
    return w0 + 0.5 * a0 + c * b0, w1 + 0.5 * a1 + c * b1, w2 + 0.5 * a2 + c * b2


@njit(cache=True)
def rkmk4(x: tuple[float, ...], F: tuple[float, ...], K: tuple[float, ...], dt: float, n: float, orbit: int,
          substeps: int) -> tuple[int, NDArray[np.float64]]:
    """``substeps`` RK4 Munthe-Kaas steps of ``dt`` [s] with the wrench held (:func:`dynamics.rigid_body.step`).

    Parameters
    ----------
    x : tuple of 13 float
        ``[p_WoBo_W, quat_WB, v_WBo_W, w_WB_B]`` at t (:attr:`dynamics.rigid_body.RigidBodyState.floats`).
    F : tuple of 6 float
        ``F_Bo_W`` [τ; f] about the CoM, in W. [N·m, N]
    K : tuple of 19 float
        Mass [kg], ``I_Bcm_B`` and its inverse row-major
        (:attr:`dynamics.rigid_body.RigidBodyModel.kernel_rows`).
    dt : float
        One sub-step. [s]
    n : float
        The orbit's mean motion [rad/s] (unused with ``orbit`` :data:`NO_ORBIT`).
    orbit : int
        :data:`NO_ORBIT`, :data:`ORBIT` (Clohessy–Wiltshire terms) or :data:`ORBIT_GG` (and gravity gradient).
    substeps : int
        ≥ 1.

    Returns
    -------
    code : int
        0, or :data:`NOT_FINITE`.
    x : ndarray, shape (13,)
        The state at ``t + substeps·dt``, a new array (meaningless unless ``code`` is 0).
    """
    m = K[0]
    i00, i01, i02, i10, i11, i12, i20, i21, i22 = K[1], K[2], K[3], K[4], K[5], K[6], K[7], K[8], K[9]
    j00, j01, j02, j10, j11, j12, j20, j21, j22 = K[10], K[11], K[12], K[13], K[14], K[15], K[16], K[17], K[18]
    t0, t1, t2, f0, f1, f2 = F[0], F[1], F[2], F[3], F[4], F[5]
    on = orbit != NO_ORBIT
    gg = orbit == ORBIT_GG
    fm0, fm1, fm2 = f0 / m, f1 / m, f2 / m
    if on:
        n2 = n * n
        cx, cv, cy, cz = 3.0 * n2, 2.0 * n, -2.0 * n, -n2
        gc = 3.0 * n * n
    else:
        cx = cv = cy = cz = gc = 0.0
    P0, P1, P2 = x[0], x[1], x[2]
    q0w, q0x, q0y, q0z = x[3], x[4], x[5], x[6]
    V0, V1, V2 = x[7], x[8], x[9]
    W0, W1, W2 = x[10], x[11], x[12]
    half = 0.5 * dt
    for _ in range(substeps):
        r00, r01, r02, r10, r11, r12, r20, r21, r22 = _rotation(q0w, q0x, q0y, q0z)
        x0, x2, u0, u1, u2, s0, s1, s2 = P0, P2, V0, V1, V2, W0, W1, W2
        pd0 = pd1 = pd2 = vd0 = vd1 = vd2 = wd0 = wd1 = wd2 = ph0 = ph1 = ph2 = 0.0
        e0 = e1 = e2 = 0.0
        ap0 = ap1 = ap2 = av0 = av1 = av2 = aw0 = aw1 = aw2 = ah0 = ah1 = ah2 = 0.0
        o0 = o1 = o2 = 0.0
        for i in range(4):
            if i:
                c = dt if i == 3 else half
                u0, u1, u2 = V0 + c * vd0, V1 + c * vd1, V2 + c * vd2
                s0, s1, s2 = W0 + c * wd0, W1 + c * wd1, W2 + c * wd2
                e0, e1, e2 = c * ph0, c * ph1, c * ph2
                x0, x2 = P0 + c * pd0, P2 + c * pd2
                ok, w, xq, y, z = _quat_integrate(q0w, q0x, q0y, q0z, e0, e1, e2, 1.0)
                if not ok:
                    return NOT_FINITE, np.empty(13)
                r00, r01, r02, r10, r11, r12, r20, r21, r22 = _rotation(w, xq, y, z)
            tb0 = r00 * t0 + r10 * t1 + r20 * t2
            tb1 = r01 * t0 + r11 * t1 + r21 * t2
            tb2 = r02 * t0 + r12 * t1 + r22 * t2
            if on:
                vd0, vd1, vd2 = fm0 + (cx * x0 + cv * u1), fm1 + cy * u0, fm2 + cz * x2
                o0, o1, o2 = r20 * n, r21 * n, r22 * n
                n0, n1, n2_ = s0 + o0, s1 + o1, s2 + o2
                if gg:
                    g0 = i00 * r00 + i01 * r01 + i02 * r02
                    g1 = i10 * r00 + i11 * r01 + i12 * r02
                    g2 = i20 * r00 + i21 * r01 + i22 * r02
                    tb0 = tb0 + gc * (r01 * g2 - r02 * g1)
                    tb1 = tb1 + gc * (r02 * g0 - r00 * g2)
                    tb2 = tb2 + gc * (r00 * g1 - r01 * g0)
            else:
                vd0, vd1, vd2 = fm0, fm1, fm2
                n0, n1, n2_ = s0, s1, s2
            h0 = i00 * n0 + i01 * n1 + i02 * n2_
            h1 = i10 * n0 + i11 * n1 + i12 * n2_
            h2 = i20 * n0 + i21 * n1 + i22 * n2_
            g0 = tb0 - (n1 * h2 - n2_ * h1)
            g1 = tb1 - (n2_ * h0 - n0 * h2)
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
            ph0, ph1, ph2 = _dexp_inv(e0, e1, e2, s0, s1, s2)
            if i == 3:
                ap0, ap1, ap2, av0, av1, av2 = ap0 + pd0, ap1 + pd1, ap2 + pd2, av0 + vd0, av1 + vd1, av2 + vd2
                aw0, aw1, aw2, ah0, ah1, ah2 = aw0 + wd0, aw1 + wd1, aw2 + wd2, ah0 + ph0, ah1 + ph1, ah2 + ph2
            else:
                ap0, ap1, ap2 = ap0 + 2.0 * pd0, ap1 + 2.0 * pd1, ap2 + 2.0 * pd2
                av0, av1, av2 = av0 + 2.0 * vd0, av1 + 2.0 * vd1, av2 + 2.0 * vd2
                aw0, aw1, aw2 = aw0 + 2.0 * wd0, aw1 + 2.0 * wd1, aw2 + 2.0 * wd2
                ah0, ah1, ah2 = ah0 + 2.0 * ph0, ah1 + 2.0 * ph1, ah2 + 2.0 * ph2
        c = dt / 6.0
        ok, q0w, q0x, q0y, q0z = _quat_integrate(q0w, q0x, q0y, q0z, c * ah0, c * ah1, c * ah2, 1.0)
        if not ok:
            return NOT_FINITE, np.empty(13)
        P0, P1, P2 = P0 + c * ap0, P1 + c * ap1, P2 + c * ap2
        V0, V1, V2 = V0 + c * av0, V1 + c * av1, V2 + c * av2
        W0, W1, W2 = W0 + c * aw0, W1 + c * aw1, W2 + c * aw2
    out = np.empty(13)
    out[0], out[1], out[2], out[3], out[4], out[5], out[6] = P0, P1, P2, q0w, q0x, q0y, q0z
    out[7], out[8], out[9], out[10], out[11], out[12] = V0, V1, V2, W0, W1, W2
    for i in range(13):
        if not math.isfinite(out[i]):
            return NOT_FINITE, out
    return 0, out
