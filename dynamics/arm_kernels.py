"""Compiled kernels of the arm's step (numba): the joint servos and the RMS kinematics with its Jacobian.

- :func:`servo_step` is :func:`dynamics.servo.servo_step_rows` (the readable reference, on
  Python floats): the six servos, joint by joint, ``n_sub`` semi-implicit Euler substeps inside,
  with its branches (brakes holding or slipping, direct drive, the rate loop saturated or not).
- :func:`rms_kinematics` is :func:`dynamics.rms.rms_kinematics_rows` followed by
  :func:`dynamics.rms.rms_jacobian_rows` (the references): the link rotations, joint points and
  axes down the chain and the App. A Jacobian at the point of resolution; and, asked for, its
  inverse as :func:`dynamics.rms.regular_inverse` (LAPACK) gives it.
- :func:`limit_joint_rates` is :func:`dynamics.rms.limit_joint_rates_rows`: the commanded joint
  rates scaled into their rate limits, then stopped short of the angle limits.
- :func:`auto_rates` is :func:`dynamics.rms.auto_rates_rows`: one step of an auto-sequence segment,
  the error on its reference and the rates that fly it; where the reference goes through numpy
  (an attitude error near π) or raises, it says so and the caller runs the reference.
- :func:`predict_state` is :func:`dynamics.rigid_body.predict_rows`: a rigid body's state a little
  ahead of its sample (the arm's predicted inputs, the orbiter's and the payload's states).
- :func:`static_loads` is :func:`dynamics.loads.static_loads_rows` (RMLOAD): the nine station loads from the
  end-effector wrench.
- :func:`grappled_twist` is :func:`dynamics.rms.grappled_twist_rows`: E's relative twist while grappled, from the
  orbiter's and the payload's states.
- :func:`massless_wrench` is :func:`dynamics.rms.massless_wrench_rows`: the massless arm's outputs in W at a step's
  end (the orbiter propagated, E and So in W, the tip wrench and the shoulder's reaction).
- :func:`grappled_step` is the grappled massless arm's step made of the kernels above (the twist, the servos, the
  kinematics) and its few products, in one call; :func:`auto_command` the same for the auto sequence's joint-rate
  command (E's pose, the segment's rates, the clip, ``J⁻¹ V``, the joint limits).
- :func:`flex_terms` is RMSFLX's terms (the arm's flexibility, ``γ_J``, the 3-7 springs) at a regular
  configuration, as the arm computes them from :func:`dynamics.flexibility.arm_flexibility` and numpy.

Each is written with the same operations in the same order as its reference. Numba compiles
without fast-math (no reassociation, no fused multiply-add), ``sin``, ``cos``, ``acos`` and ``tanh``
are the C library's, and Python's ``min``/``max`` of two floats are spelled out (:func:`_min`,
:func:`_max`: the same result for ties of signed zeros and for NaN), so the results are bit for
bit the references'; the tests (``tests/dynamics/test_arm_kernels.py``) hold them so. In the
arm's 500 Hz step each costs a few microseconds (most of it numba's dispatch of the arguments)
instead of the references' ten to twenty (Python float arithmetic).

Arguments are float64 arrays (and ints, floats, bools), C-contiguous; the results are written into
arrays the caller passes, new ones for each call (the arm's context never writes an array in place):
a numba function pays more to return an array it allocated (~1 µs each) than its arithmetic here.
Numba raises no project errors: the callers check shapes, as the references' callers do.

Compiled on first use and cached on disk (``cache=True``, numba's ``__pycache__`` next to this
file, or ``NUMBA_CACHE_DIR``): the first process compiles once (seconds), the next ones load the
machine code. The modules that use them import this one on first use (:func:`dynamics.servo.load_kernels`,
:func:`dynamics.rms.load_kernels`), so that a configuration check imports no numba.

No I/O, clock or globals.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit
from numpy.typing import NDArray

from dynamics.flexibility import beams_terms, gamma_rows
from dynamics.rigid_body_kernels import _quat_integrate, _rotation  # the rigid body's own quaternion kernels

__all__ = ["SERVO_COLUMNS", "GEOMETRY_COLUMNS", "servo_step", "rms_kinematics", "limit_joint_rates",
           "auto_rates", "predict_state", "static_loads", "grappled_twist", "massless_wrench",
           "grappled_step", "auto_command", "flex_terms"]

_STATION_POINT = (1, 1, 2, 2, 3, 3, 4, 4, 6)
_STATION_LINK = (1, 2, 2, 3, 3, 4, 4, 5, 5)
_STATION_SIGN = (-1.0, 1.0, -1.0, 1.0, -1.0, 1.0, -1.0, 1.0, -1.0)
""":data:`dynamics.loads.STATION_POINT`, ``STATION_LINK`` and ``STATION_SIGN`` (copied, as numba's constants; the
tests hold them equal)."""

Array = NDArray[np.float64]

SERVO_COLUMNS = 8
"""Columns of the servo parameters (:attr:`dynamics.servo.ServoParams.kernel_rows`, one row per joint):
``N K_t, J_r, i_max, kp, ki, τ_c, b, slip`` (the order of :attr:`dynamics.servo.ServoParams.per_joint`)."""

GEOMETRY_COLUMNS = 35
"""Columns of the geometry (:attr:`dynamics.rms.RmsGeometry.kernel_rows`, shape (7, 35)). Row 0: ``R_OS``
row-major (0:9), ``p_OS`` (9:12), the point of resolution ``p_B6oEo_B6`` (12:15), zeros. Row 1 + i, joint i
(:attr:`dynamics.rms.RmsGeometry.fixed`): the axis kind (0), whether ``R_PJ`` is not the identity (1: 1.0 or
0.0), ``R_PJ`` (2:11, the identity when it is), ``R_PJ K`` (11:20), ``R_PJ K²`` (20:29), ``p_PJ`` (29:32), the
axis (32:35)."""


_beams_terms = njit(cache=True)(beams_terms)
"""The compiled :func:`dynamics.flexibility.beams_terms` (the beams' part of γ, B-6/B-7): the reference's own code."""
_gamma_rows = njit(cache=True)(gamma_rows)
"""The compiled :func:`dynamics.flexibility.gamma_rows` (γ's 6×6 rows from those 21 sums)."""


@njit(cache=True)
def _min(a: float, b: float) -> float:
    """Python's ``min(a, b)`` of two floats (``a`` unless ``b < a``)."""
    return b if b < a else a


@njit(cache=True)
def _max(a: float, b: float) -> float:
    """Python's ``max(a, b)`` of two floats (``a`` unless ``b > a``)."""
    return b if b > a else a


@njit(cache=True)
def servo_step(P: Array, friction_rate: float, theta_m: Array, omega: Array, integ: Array, rate_cmd: Array,
               brakes: NDArray[np.bool_], h: float, n_sub: int, loaded: bool, k: Array, c: Array, theta: Array,
               theta_dot: Array, direct_on: NDArray[np.bool_], direct_i: Array, out: Array) -> None:
    """:func:`dynamics.servo.servo_step_rows`, compiled (same operations, same order).

    Parameters
    ----------
    P : ndarray, shape (6, 8)
        Per joint ``N K_t, J_r, i_max, kp, ki, τ_c, b, slip`` (:data:`SERVO_COLUMNS`).
    friction_rate : float
        ω_s of the smoothed Coulomb law. [rad/s]
    theta_m, omega, integ : ndarray, shape (6,)
        The servo state. [rad, rad/s, rad]
    rate_cmd : ndarray, shape (6,)
        [rad/s]
    brakes : ndarray of bool, shape (6,)
    h : float
        [s]
    n_sub : int
        ≥ 1.
    loaded : bool
        The loaded case (``k``, ``c``, ``theta``, ``theta_dot`` given); unloaded, they are zeros (as the
        reference's).
    k, c, theta, theta_dot : ndarray, shape (6,)
        Joint springs [N·m/rad] and dampers [N·m·s/rad], the arm's angles and rates [rad, rad/s].
    direct_on : ndarray of bool, shape (6,)
        Direct drive per joint (the reference's ``direct[j] is not None``).
    direct_i : ndarray, shape (6,)
        Its motor current [A] where ``direct_on``.
    out : ndarray, shape (5, 6)
        Written: the rows ``theta_m``, ``omega``, ``integ`` after the step, the last substep's ``current`` [A] and
        the mean load torque ``tau_load`` [N·m] (the reference's five lists).
    """
    hs = h / n_sub
    ws = friction_rate
    for j in range(6):
        gain, Jr, i_max, kp, ki = P[j, 0], P[j, 1], P[j, 2], P[j, 3], P[j, 4]
        tau_c, b, slip = P[j, 5], P[j, 6], P[j, 7]
        tm, w, integ_j = theta_m[j], omega[j], integ[j]
        kj, cj, th, thdj = k[j], c[j], theta[j], theta_dot[j]
        braked = brakes[j]
        cmd = rate_cmd[j]
        hJ = hs / Jr
        i = 0.0
        tau_acc = 0.0
        for _ in range(n_sub):
            spring = kj * (tm - th)
            if braked:
                i, integ_j = 0.0, 0.0
                tau_hold = spring - cj * thdj
                if abs(w) < 1e-9 and abs(tau_hold) <= slip:
                    w_new = 0.0
                else:
                    dirn = math.copysign(1.0, w) if abs(w) > 1e-9 else -math.copysign(1.0, tau_hold)
                    w_new = (w + hJ * (-spring + cj * thdj - slip * dirn)) / (1.0 + hJ * cj)
                    if w_new * dirn < 0.0:
                        w_new = 0.0
            else:
                if direct_on[j]:
                    i, integ_j = _max(-i_max, _min(i_max, direct_i[j])), 0.0
                else:
                    e = cmd - w
                    i_un = ki * integ_j - kp * w
                    i = _min(i_max, _max(-i_max, i_un))
                    if not (i != i_un and e * i_un > 0.0):
                        integ_j += e * hs
                tau_f = tau_c * math.tanh(w / ws) + b * w
                w_new = (w + hJ * (gain * i - tau_f - spring + cj * thdj)) / (1.0 + hJ * cj)
            if loaded:
                tau_acc += spring + cj * (w_new - thdj)
                th += hs * thdj
            w = w_new
            tm += hs * w
        out[0, j], out[1, j], out[2, j], out[3, j], out[4, j] = tm, w, integ_j, i, tau_acc / n_sub


@njit(cache=True)
def _jacobian_columns(ps: Array, us: Array, ex: float, ey: float, ez: float, J: Array) -> None:
    """:func:`dynamics.rms.rms_jacobian_rows` (same operations): column i of ``J`` is ``[u_i; u_i × (p_E − p_i)]``, from
    the joint points ``ps`` (rows 0..5), the axes ``us`` and ``p_E = (ex, ey, ez)``."""
    for j in range(6):
        ux, uy, uz = us[j, 0], us[j, 1], us[j, 2]
        rx, ry, rz = ex - ps[j, 0], ey - ps[j, 1], ez - ps[j, 2]
        J[0, j], J[1, j], J[2, j] = ux, uy, uz
        J[3, j] = uy * rz - uz * ry
        J[4, j] = uz * rx - ux * rz
        J[5, j] = ux * ry - uy * rx


@njit(cache=True)
def rms_kinematics(G: Array, theta: Array, Rs: Array, ps: Array, us: Array, J: Array, invert: bool,
                   J_inv: Array) -> bool:
    """:func:`dynamics.rms.rms_kinematics_rows` and :func:`dynamics.rms.rms_jacobian_rows`, compiled, and the
    Jacobian's inverse as :func:`dynamics.rms.regular_inverse` gives it (LAPACK's getrf and getri, the same
    routines of the same library: numba's ``numpy.linalg.inv`` calls SciPy's LAPACK) if asked for.

    Parameters
    ----------
    G : ndarray, shape (7, 35)
        The geometry (:data:`GEOMETRY_COLUMNS`).
    theta : ndarray, shape (6,)
        Joint angles. [rad]
    Rs : ndarray, shape (7, 9)
        Written: the link rotations in O, row-major (row 0 the shoulder S).
    ps : ndarray, shape (7, 3)
        Written: the joint points 1..6 then the point of resolution, in O. [m]
    us : ndarray, shape (6, 3)
        Written: the unit joint axes in O.
    J : ndarray, shape (6, 6)
        Written: the Jacobian, rows ``[ω; v]`` in O, columns the joints.
    invert : bool
        Whether to invert J.
    J_inv : ndarray, shape (6, 6), Fortran order
        Written if ``invert``: J⁻¹, in the order of ``regular_inverse``'s (LAPACK's): numpy's ``J_inv @ x`` takes
        another BLAS path (another order of the sums) for another memory order.

    Returns
    -------
    bool
        False if J⁻¹ was asked for and LAPACK found J singular (or J is not finite: numba refuses it where
        ``regular_inverse`` goes on), ``J_inv`` unwritten: the caller runs the reference.
    """
    a0, a1, a2, a3, a4, a5, a6, a7, a8 = G[0, 0], G[0, 1], G[0, 2], G[0, 3], G[0, 4], G[0, 5], G[0, 6], G[0, 7], \
        G[0, 8]
    px, py, pz = G[0, 9], G[0, 10], G[0, 11]
    for m in range(9):
        Rs[0, m] = G[0, m]
    for j in range(6):
        g = G[1 + j]
        ti = theta[j]
        kind = int(g[0])
        qx, qy, qz = g[29], g[30], g[31]
        px, py, pz = (px + a0 * qx + a1 * qy + a2 * qz, py + a3 * qx + a4 * qy + a5 * qz,
                      pz + a6 * qx + a7 * qy + a8 * qz)
        ps[j, 0], ps[j, 1], ps[j, 2] = px, py, pz
        if kind < 0:
            sn, cn = math.sin(ti), 1.0 - math.cos(ti)
            b0, b1, b2 = g[2] + sn * g[11] + cn * g[20], g[3] + sn * g[12] + cn * g[21], g[4] + sn * g[13] + cn * g[22]
            b3, b4, b5 = g[5] + sn * g[14] + cn * g[23], g[6] + sn * g[15] + cn * g[24], g[7] + sn * g[16] + cn * g[25]
            b6, b7, b8 = g[8] + sn * g[17] + cn * g[26], g[9] + sn * g[18] + cn * g[27], g[10] + sn * g[19] + cn * g[28]
            a0, a1, a2, a3, a4, a5, a6, a7, a8 = (
                a0 * b0 + a1 * b3 + a2 * b6, a0 * b1 + a1 * b4 + a2 * b7, a0 * b2 + a1 * b5 + a2 * b8,
                a3 * b0 + a4 * b3 + a5 * b6, a3 * b1 + a4 * b4 + a5 * b7, a3 * b2 + a4 * b5 + a5 * b8,
                a6 * b0 + a7 * b3 + a8 * b6, a6 * b1 + a7 * b4 + a8 * b7, a6 * b2 + a7 * b5 + a8 * b8)
            x, y, z = g[32], g[33], g[34]
            us[j, 0], us[j, 1], us[j, 2] = a0 * x + a1 * y + a2 * z, a3 * x + a4 * y + a5 * z, a6 * x + a7 * y + a8 * z
        else:
            if g[1] != 0.0:
                r0, r1, r2, r3, r4, r5, r6, r7, r8 = g[2], g[3], g[4], g[5], g[6], g[7], g[8], g[9], g[10]
                a0, a1, a2, a3, a4, a5, a6, a7, a8 = (
                    a0 * r0 + a1 * r3 + a2 * r6, a0 * r1 + a1 * r4 + a2 * r7, a0 * r2 + a1 * r5 + a2 * r8,
                    a3 * r0 + a4 * r3 + a5 * r6, a3 * r1 + a4 * r4 + a5 * r7, a3 * r2 + a4 * r5 + a5 * r8,
                    a6 * r0 + a7 * r3 + a8 * r6, a6 * r1 + a7 * r4 + a8 * r7, a6 * r2 + a7 * r5 + a8 * r8)
            c, sn = math.cos(ti), math.sin(ti)
            if kind == 2:       # R_z
                a0, a1, a3, a4, a6, a7 = (c * a0 + sn * a1, c * a1 - sn * a0, c * a3 + sn * a4, c * a4 - sn * a3,
                                          c * a6 + sn * a7, c * a7 - sn * a6)
                us[j, 0], us[j, 1], us[j, 2] = a2, a5, a8
            elif kind == 1:     # R_y
                a0, a2, a3, a5, a6, a8 = (c * a0 - sn * a2, sn * a0 + c * a2, c * a3 - sn * a5, sn * a3 + c * a5,
                                          c * a6 - sn * a8, sn * a6 + c * a8)
                us[j, 0], us[j, 1], us[j, 2] = a1, a4, a7
            else:               # R_x
                a1, a2, a4, a5, a7, a8 = (c * a1 + sn * a2, c * a2 - sn * a1, c * a4 + sn * a5, c * a5 - sn * a4,
                                          c * a7 + sn * a8, c * a8 - sn * a7)
                us[j, 0], us[j, 1], us[j, 2] = a0, a3, a6
        Rs[1 + j, 0], Rs[1 + j, 1], Rs[1 + j, 2] = a0, a1, a2
        Rs[1 + j, 3], Rs[1 + j, 4], Rs[1 + j, 5] = a3, a4, a5
        Rs[1 + j, 6], Rs[1 + j, 7], Rs[1 + j, 8] = a6, a7, a8
    d0, d1, d2 = G[0, 12], G[0, 13], G[0, 14]                   # the point of resolution in the last link
    ex, ey, ez = px + a0 * d0 + a1 * d1 + a2 * d2, py + a3 * d0 + a4 * d1 + a5 * d2, pz + a6 * d0 + a7 * d1 + a8 * d2
    ps[6, 0], ps[6, 1], ps[6, 2] = ex, ey, ez
    _jacobian_columns(ps, us, ex, ey, ez, J)
    if invert:
        try:
            inv = np.linalg.inv(J)
        except Exception:       # numba's LinAlgError: singular (getrf's pivot exactly zero) or not finite
            return False
        J_inv[:, :] = inv
    return True


@njit(cache=True)
def limit_joint_rates(qd: Array, theta: Array, limits: Array, gain: float, out: Array) -> tuple[float, int, int]:
    """:func:`dynamics.rms.limit_joint_rates_rows`, compiled (same operations, same order).

    Parameters
    ----------
    qd, theta : ndarray, shape (6,)
        Commanded joint rates [rad/s] and joint angles [rad].
    limits : ndarray, shape (3, 6)
        Rows ``qd_max``, ``stop_lower``, ``stop_upper``. [rad/s, rad, rad]
    gain : float
        [1/s]
    out : ndarray, shape (2, 6)
        Written: the rows ``scaled`` and ``limited``. [rad/s]

    Returns
    -------
    r_max, j, clipped
        As the reference's.
    """
    ratio = np.empty(6)
    for i in range(6):
        ratio[i] = abs(qd[i]) / limits[0, i]
    r_max = ratio[0]
    for i in range(1, 6):
        r_max = _max(r_max, ratio[i])
    j = -1
    for i in range(6):
        out[0, i] = qd[i]
    if r_max > 1.0 + 1e-12:
        for i in range(6):
            if ratio[i] == r_max:
                j = i
                break
        for i in range(6):
            out[0, i] = out[0, i] / r_max
    clipped = 0
    for i in range(6):
        x, t = out[0, i], theta[i]
        lim = _min(_max(x, _min(gain * (limits[1, i] - t), 0.0)), _max(gain * (limits[2, i] - t), 0.0))
        out[1, i] = lim
        if abs(lim - x) > 1e-12:
            clipped |= 1 << i
    return r_max, j, clipped


@njit(cache=True)
def auto_rates(seg: Array, s0: float, s1: float, h: float, p_m: Array, R_m: Array, gain: float, v_lim: float,
               w_lim: float, out: Array) -> tuple[int, float, float]:
    """:func:`dynamics.rms.auto_rates_rows`, compiled (same operations, same order, with
    :func:`dynamics.spatial.quat_integrate_rows`, ``rotation_rows``, ``mat_mat_rows``, ``mat_mat_t_rows``,
    ``rotation_vector_rows`` and ``norm3`` written out).

    Parameters
    ----------
    seg : ndarray, shape (18,)
        ``p0`` (0:3), ``dp`` (3:6), ``R0`` row-major (6:15), ``rot`` (15:18).
    s0, s1, h, gain, v_lim, w_lim : float
        As the reference's.
    p_m, R_m : ndarray, shape (3,) and (9,)
        As the reference's.
    out : ndarray, shape (6,)
        Written: ``V`` (code 0).

    Returns
    -------
    code : int
        0; 1 where the reference goes through numpy (an attitude error within 1e-3 of π) or raises (the reference
        attitude not finite): the caller runs the reference.
    e_p, e_r : float
        As the reference's (code 0).
    """
    e0, e1, e2 = seg[0] + s0 * seg[3] - p_m[0], seg[1] + s0 * seg[4] - p_m[1], seg[2] + s0 * seg[5] - p_m[2]
    ok, qw, qx, qy, qz = _quat_integrate(1.0, 0.0, 0.0, 0.0, seg[15], seg[16], seg[17], s0)
    if not ok:
        return 1, 0.0, 0.0
    # rotation_rows(q_ref), then R_ref = that R0 (mat_mat_rows)
    a00, a01, a02, a10, a11, a12, a20, a21, a22 = _rotation(qw, qx, qy, qz)
    b00, b01, b02, b10, b11, b12, b20, b21, b22 = seg[6], seg[7], seg[8], seg[9], seg[10], seg[11], seg[12], \
        seg[13], seg[14]
    f00 = a00 * b00 + a01 * b10 + a02 * b20
    f01 = a00 * b01 + a01 * b11 + a02 * b21
    f02 = a00 * b02 + a01 * b12 + a02 * b22
    f10 = a10 * b00 + a11 * b10 + a12 * b20
    f11 = a10 * b01 + a11 * b11 + a12 * b21
    f12 = a10 * b02 + a11 * b12 + a12 * b22
    f20 = a20 * b00 + a21 * b10 + a22 * b20
    f21 = a20 * b01 + a21 * b11 + a22 * b21
    f22 = a20 * b02 + a21 * b12 + a22 * b22
    # rotation_error_rows(R_m, R_ref): the log map of R_ref R_mᵀ (mat_mat_t_rows, rotation_vector_rows)
    m00, m01, m02, m10, m11, m12, m20, m21, m22 = R_m[0], R_m[1], R_m[2], R_m[3], R_m[4], R_m[5], R_m[6], R_m[7], \
        R_m[8]
    r00 = f00 * m00 + f01 * m01 + f02 * m02
    r01 = f00 * m10 + f01 * m11 + f02 * m12
    r02 = f00 * m20 + f01 * m21 + f02 * m22
    r10 = f10 * m00 + f11 * m01 + f12 * m02
    r11 = f10 * m10 + f11 * m11 + f12 * m12
    r12 = f10 * m20 + f11 * m21 + f12 * m22
    r20 = f20 * m00 + f21 * m01 + f22 * m02
    r21 = f20 * m10 + f21 * m11 + f22 * m12
    r22 = f20 * m20 + f21 * m21 + f22 * m22
    c = _min(1.0, _max(-1.0, 0.5 * (r00 + r11 + r22 - 1.0)))
    v0, v1, v2 = r21 - r12, r02 - r20, r10 - r01
    phi = math.acos(c)
    if phi < 1e-6:
        t0, t1, t2 = 0.5 * v0, 0.5 * v1, 0.5 * v2
    elif phi < math.pi - 1e-3:
        f = phi / (2.0 * math.sin(phi))
        t0, t1, t2 = f * v0, f * v1, f * v2
    else:
        return 1, 0.0, 0.0
    ds = (s1 - s0) / h
    vx, vy, vz = ds * seg[3] + gain * e0, ds * seg[4] + gain * e1, ds * seg[5] + gain * e2
    wx, wy, wz = ds * seg[15] + gain * t0, ds * seg[16] + gain * t1, ds * seg[17] + gain * t2
    nv = math.sqrt(vx * vx + vy * vy + vz * vz)
    nw = math.sqrt(wx * wx + wy * wy + wz * wz)
    if nv > v_lim:
        vx, vy, vz = vx * (v_lim / nv), vy * (v_lim / nv), vz * (v_lim / nv)
    if nw > w_lim:
        wx, wy, wz = wx * (w_lim / nw), wy * (w_lim / nw), wz * (w_lim / nw)
    out[0], out[1], out[2], out[3], out[4], out[5] = wx, wy, wz, vx, vy, vz
    return 0, math.sqrt(e0 * e0 + e1 * e1 + e2 * e2), math.sqrt(t0 * t0 + t1 * t1 + t2 * t2)


@njit(cache=True)
def predict_state(p: Array, q: Array, v: Array, w: Array, a: Array, wdot: Array, dt: float, out: Array) -> bool:
    """:func:`dynamics.rigid_body.predict_rows` for ``dt > 0``, compiled (same operations, same order, with
    :func:`dynamics.spatial.quat_integrate_rows` written out).

    Parameters
    ----------
    p, v, a : ndarray, shape (3,)
        CoM position, velocity, acceleration in W. [m, m/s, m/s²]
    q : ndarray, shape (4,)
        Attitude [w, x, y, z].
    w, wdot : ndarray, shape (3,)
        Body rate and its derivative, in B. [rad/s, rad/s²]
    dt : float
        [s]
    out : ndarray, shape (13,)
        Written: ``[p, quat, v, w]`` at ``t + dt``.

    Returns
    -------
    bool
        False where the reference raises (a field of another size, the quaternion not finite or of zero norm;
        ``out`` meaningless then).
    """
    if p.size != 3 or q.size != 4 or v.size != 3 or w.size != 3 or a.size != 3 or wdot.size != 3:
        return False
    p0, p1, p2, v0, v1, v2 = p[0], p[1], p[2], v[0], v[1], v[2]
    w0, w1, w2, a0, a1, a2, d0, d1, d2 = w[0], w[1], w[2], a[0], a[1], a[2], wdot[0], wdot[1], wdot[2]
    out[0] = p0 + v0 * dt + 0.5 * a0 * dt * dt
    out[1] = p1 + v1 * dt + 0.5 * a1 * dt * dt
    out[2] = p2 + v2 * dt + 0.5 * a2 * dt * dt
    out[7], out[8], out[9] = v0 + a0 * dt, v1 + a1 * dt, v2 + a2 * dt
    out[10], out[11], out[12] = w0 + d0 * dt, w1 + d1 * dt, w2 + d2 * dt
    ok, out[3], out[4], out[5], out[6] = _quat_integrate(q[0], q[1], q[2], q[3], w0 + 0.5 * d0 * dt,
                                                         w1 + 0.5 * d1 * dt, w2 + 0.5 * d2 * dt, dt)
    return ok


@njit(cache=True)
def static_loads(pts: Array, Rs: Array, F: Array, out: Array) -> None:
    """:func:`dynamics.loads.static_loads_rows`, compiled (same operations, same order: each sum from a zero start).

    Parameters
    ----------
    pts : ndarray, shape (7, 3)
        Joint points 1..6 then Eo, in O. [m]
    Rs : ndarray, shape (7, 9)
        Link rotations in O, row-major.
    F : ndarray, shape (6,)
        ``[M_e; F_e]`` at Eo, in O. [N·m, N]
    out : ndarray, shape (9, 6)
        Written: the station loads ``[M_k; V_k]``. [N·m, N]
    """
    m0, m1, m2, f0, f1, f2 = F[0], F[1], F[2], F[3], F[4], F[5]
    e0, e1, e2 = pts[6, 0], pts[6, 1], pts[6, 2]
    for k in range(9):
        j = _STATION_POINT[k]
        r0, r1, r2 = e0 - pts[j, 0], e1 - pts[j, 1], e2 - pts[j, 2]
        M0, M1, M2 = m0 + (r1 * f2 - r2 * f1), m1 + (r2 * f0 - r0 * f2), m2 + (r0 * f1 - r1 * f0)
        t = Rs[_STATION_LINK[k]]
        s = _STATION_SIGN[k]
        out[k, 0] = s * (((0.0 + t[0] * M0) + t[3] * M1) + t[6] * M2)
        out[k, 1] = s * (((0.0 + t[1] * M0) + t[4] * M1) + t[7] * M2)
        out[k, 2] = s * (((0.0 + t[2] * M0) + t[5] * M1) + t[8] * M2)
        out[k, 3] = s * (((0.0 + f0 * t[0]) + f1 * t[3]) + f2 * t[6])
        out[k, 4] = s * (((0.0 + f0 * t[1]) + f1 * t[4]) + f2 * t[7])
        out[k, 5] = s * (((0.0 + f0 * t[2]) + f1 * t[5]) + f2 * t[8])


@njit(cache=True)
def grappled_twist(orb: Array, pay: Array, e: Array, out: Array) -> None:
    """:func:`dynamics.rms.grappled_twist_rows`, compiled (same operations, same order, with
    :func:`dynamics.spatial.rotation_rows`, ``mat_vec_rows``, ``mat_t_vec_rows`` and
    :func:`dynamics.rms.relative_twist_rows` written out).

    Parameters
    ----------
    orb, pay : ndarray, shape (13,)
        ``[p, quat, v, w]`` of the orbiter and the payload (the reference's). [m, -, m/s, rad/s]
    e : ndarray, shape (3,)
        ``p_ToEo_T``. [m]
    out : ndarray, shape (6,)
        Written: ``V_R_O = [ω_R; v_R]`` in O. [rad/s, m/s]
    """
    o0, o1, o2, o3, o4, o5, o6, o7, o8 = _rotation(orb[3], orb[4], orb[5], orb[6])
    t0, t1, t2, t3, t4, t5, t6, t7, t8 = _rotation(pay[3], pay[4], pay[5], pay[6])
    pt0, pt1, pt2 = e[0], e[1], e[2]
    x0, x1, x2 = t0 * pt0 + t1 * pt1 + t2 * pt2, t3 * pt0 + t4 * pt1 + t5 * pt2, t6 * pt0 + t7 * pt1 + t8 * pt2
    d0, d1, d2 = pay[0] + x0 - orb[0], pay[1] + x1 - orb[1], pay[2] + x2 - orb[2]
    po0, po1, po2 = o0 * d0 + o3 * d1 + o6 * d2, o1 * d0 + o4 * d1 + o7 * d2, o2 * d0 + o5 * d1 + o8 * d2
    wo0, wo1, wo2 = orb[10], orb[11], orb[12]
    wt0, wt1, wt2 = pay[10], pay[11], pay[12]
    a0, a1, a2 = t0 * wt0 + t1 * wt1 + t2 * wt2, t3 * wt0 + t4 * wt1 + t5 * wt2, t6 * wt0 + t7 * wt1 + t8 * wt2
    c0, c1, c2 = wt1 * pt2 - wt2 * pt1, wt2 * pt0 - wt0 * pt2, wt0 * pt1 - wt1 * pt0
    b0 = pay[7] + (t0 * c0 + t1 * c1 + t2 * c2) - orb[7]
    b1 = pay[8] + (t3 * c0 + t4 * c1 + t5 * c2) - orb[8]
    b2 = pay[9] + (t6 * c0 + t7 * c1 + t8 * c2) - orb[9]
    out[0] = o0 * a0 + o3 * a1 + o6 * a2 - wo0
    out[1] = o1 * a0 + o4 * a1 + o7 * a2 - wo1
    out[2] = o2 * a0 + o5 * a1 + o8 * a2 - wo2
    out[3] = o0 * b0 + o3 * b1 + o6 * b2 - (wo1 * po2 - wo2 * po1)
    out[4] = o1 * b0 + o4 * b1 + o7 * b2 - (wo2 * po0 - wo0 * po2)
    out[5] = o2 * b0 + o5 * b1 + o8 * b2 - (wo0 * po1 - wo1 * po0)


@njit(cache=True)
def massless_wrench(orb: Array, h: float, propagate: bool, pE: Array, pS: Array, F: Array, out: Array) -> bool:
    """:func:`dynamics.rms.massless_wrench_rows`, compiled (same operations, same order, with
    :func:`dynamics.spatial.quat_integrate_rows`, ``rotation_rows``, ``mat_vec_rows`` and
    :func:`dynamics.rms.shoulder_reaction_rows` written out).

    Parameters
    ----------
    orb : ndarray, shape (13,)
        ``[p_WoOo_W, quat_WO, v_WOo_W, w_WO_O]``. [m, -, m/s, rad/s]
    h : float
        [s]
    propagate : bool
    pE, pS : ndarray, shape (3,)
        ``p_OoEo_O``, ``p_OoSo_O``. [m]
    F : ndarray, shape (6,)
        ``F_Eo_O``. [N·m, N]
    out : ndarray, shape (34,)
        Written: the reference's 34 floats.

    Returns
    -------
    bool
        False where the reference returns None (``out`` meaningless then).
    """
    p0, p1, p2 = orb[0], orb[1], orb[2]
    qw, qx, qy, qz = orb[3], orb[4], orb[5], orb[6]
    if propagate:
        p0, p1, p2 = p0 + orb[7] * h, p1 + orb[8] * h, p2 + orb[9] * h
        ok, qw, qx, qy, qz = _quat_integrate(qw, qx, qy, qz, orb[10], orb[11], orb[12], h)
        if not ok:
            return False
    r0, r1, r2, r3, r4, r5, r6, r7, r8 = _rotation(qw, qx, qy, qz)
    x0, x1, x2 = pE[0], pE[1], pE[2]
    e0 = (r0 * x0 + r1 * x1 + r2 * x2) + p0
    e1 = (r3 * x0 + r4 * x1 + r5 * x2) + p1
    e2 = (r6 * x0 + r7 * x1 + r8 * x2) + p2
    x0, x1, x2 = pS[0], pS[1], pS[2]
    s0 = (r0 * x0 + r1 * x1 + r2 * x2) + p0
    s1 = (r3 * x0 + r4 * x1 + r5 * x2) + p1
    s2 = (r6 * x0 + r7 * x1 + r8 * x2) + p2
    x0, x1, x2 = F[0], F[1], F[2]
    m0, m1, m2 = r0 * x0 + r1 * x1 + r2 * x2, r3 * x0 + r4 * x1 + r5 * x2, r6 * x0 + r7 * x1 + r8 * x2
    x0, x1, x2 = F[3], F[4], F[5]
    f0, f1, f2 = r0 * x0 + r1 * x1 + r2 * x2, r3 * x0 + r4 * x1 + r5 * x2, r6 * x0 + r7 * x1 + r8 * x2
    out[0], out[1], out[2], out[3], out[4], out[5] = e0, e1, e2, s0, s1, s2
    out[6], out[7], out[8], out[9], out[10], out[11] = m0, m1, m2, f0, f1, f2
    # shoulder_reaction_rows: −F_E referred from Eo to So, the lever −(So − Eo)
    d0, d1, d2 = -(s0 - e0), -(s1 - e1), -(s2 - e2)
    n0, n1, n2 = -f0, -f1, -f2
    out[12] = -m0 + (d1 * n2 - d2 * n1)
    out[13] = -m1 + (d2 * n0 - d0 * n2)
    out[14] = -m2 + (d0 * n1 - d1 * n0)
    out[15], out[16], out[17] = n0, n1, n2
    out[18], out[19], out[20], out[21], out[22], out[23], out[24], out[25], out[26] = r0, r1, r2, r3, r4, r5, r6, r7, r8
    out[27], out[28], out[29], out[30], out[31], out[32], out[33] = p0, p1, p2, qw, qx, qy, qz
    return True


@njit(cache=True)
def grappled_step(orb: Array, pay: Array, e: Array, J_inv: Array, P: Array, friction_rate: float, theta_m: Array,
                  omega: Array, integ: Array, rate_cmd: Array, brakes: NDArray[np.bool_], h: float, n_sub: int,
                  k: Array, c: Array, theta: Array, direct_on: NDArray[np.bool_], direct_i: Array, G: Array,
                  regular: bool, J_svd: Array, sigma: float, sigma_min: float, V: Array, servo: Array,
                  theta_new: Array, Rs: Array, ps: Array, us: Array, J: Array, J_inv_new: Array,
                  theta_dot: Array, tau: Array) -> tuple[int, bool]:
    """One step of the grappled massless arm (:meth:`services.arm.MasslessPlant.step`, the servos on the 3-7
    springs): :func:`grappled_twist`, the joint rates ``J⁻¹ V_R`` (2-12), :func:`servo_step` loaded, the joints
    advanced, :func:`rms_kinematics` at the new angles with Weyl's test of the last SVD
    (:meth:`services.arm.ArmKinematics.update`), the new rates and the torques the springs transmit; the same
    operations in the same order as those steps.

    The products ``J⁻¹ V_R`` and ``ΔJ·ΔJ`` are numba's ``numpy.dot``, which calls BLAS (``dgemv``, ``ddot``) as
    numpy's ``@`` does; the tests hold the step equal to the one made of the separate kernels and numpy.

    Parameters
    ----------
    orb, pay, e
        As :func:`grappled_twist`.
    J_inv : ndarray, shape (6, 6)
        The inverse (or damped inverse) of the last kinematics.
    P, friction_rate, theta_m, omega, integ, rate_cmd, brakes, h, n_sub, k, c, direct_on, direct_i
        As :func:`servo_step` (loaded, on the springs ``k`` and dampers ``c``).
    theta : ndarray, shape (6,)
        The joint angles at the step's start. [rad]
    G : ndarray, shape (7, 35)
        The geometry.
    regular : bool
        Whether the last SVD's J is at hand and its inverse undamped (``J_svd``, ``sigma``; ``J_svd`` any (6, 6) if
        not).
    sigma_min : float
    V, servo, theta_new, Rs, ps, us, J, J_inv_new, theta_dot, tau
        Written: the twist (6,); the servos' ``theta_m, omega, integ, current, tau_load`` (5, 6); the new angles;
        the kinematics and Jacobian as :func:`rms_kinematics`; its inverse (Fortran order); the new joint rates and
        torques (6,) each (the last three only if the status is 0).

    Returns
    -------
    status : int
        0 done; 1 the inverse is the caller's to make (no SVD at hand, Weyl's test failed, or LU could not): the
        caller goes on from the kinematics as :meth:`services.arm.ArmKinematics.update` does.
    inverted : bool
        Whether ``J_inv_new`` holds the LU inverse.
    """
    grappled_twist(orb, pay, e, V)
    thd = np.dot(J_inv, V)
    servo_step(P, friction_rate, theta_m, omega, integ, rate_cmd, brakes, h, n_sub, True, k, c, theta, thd,
               direct_on, direct_i, servo)
    for i in range(6):
        theta_new[i] = theta[i] + h * thd[i]
    ok = rms_kinematics(G, theta_new, Rs, ps, us, J, regular, J_inv_new)
    if not regular:
        return 1, False
    d = (J - J_svd).ravel()
    if not sigma - math.sqrt(np.dot(d, d)) > sigma_min or not ok:
        return 1, ok
    thd2 = np.dot(J_inv_new, V)
    for i in range(6):
        theta_dot[i] = thd2[i]
        tau[i] = k[i] * (servo[0, i] - theta_new[i]) + c[i] * (servo[1, i] - thd2[i])
    return 0, True


@njit(cache=True)
def auto_command(G: Array, theta_m: Array, motor: bool, R_E: Array, p_E: Array, seg: Array, s0: float, s1: float,
                 h: float, gain: float, v_lim: float, w_lim: float, tol_p: float, tol_r: float, v_max: float,
                 w_max: float, J_inv: Array, theta: Array, limits: Array, limit_gain: float,
                 out: Array) -> tuple[int, float, float, float, float, float, int, int]:
    """One step of the auto sequence's joint-rate command (:meth:`services.arm.ModeController.rates` in ``auto``
    mode with a segment under way): the end effector's pose the servos command (:func:`rms_kinematics` at the motor
    angles, grappled), :func:`auto_rates`, the point of resolution's speed and rate clipped, ``J⁻¹ V`` (numba's
    ``numpy.dot``: BLAS's ``dgemv``, as numpy's ``@``) and :func:`limit_joint_rates`; the same operations in the
    same order.

    Parameters
    ----------
    G : ndarray, shape (7, 35)
        The geometry.
    theta_m : ndarray, shape (6,)
        The motor-side angles (read if ``motor``). [rad]
    motor : bool
        Whether E's pose is that of the motor angles (grappled), else ``R_E``, ``p_E``.
    R_E, p_E : ndarray, shape (9,) and (3,)
        E's rotation (row-major) and position in O at the joint angles.
    seg, s0, s1, h, gain, v_lim, w_lim
        As :func:`auto_rates`.
    tol_p, tol_r : float
        The waypoint's tolerances. [m, rad]
    v_max, w_max : float
        The speed and rate limits of the point of resolution. [m/s, rad/s]
    J_inv : ndarray, shape (6, 6)
        The Jacobian's (or damped) inverse at the joint angles (O, at the point of resolution).
    theta : ndarray, shape (6,)
        Joint angles. [rad]
    limits, limit_gain
        As :func:`limit_joint_rates`.
    out : ndarray, shape (4, 6)
        Written (code 0): ``V = [ω; v]`` clipped [rad/s, m/s], ``qd = J⁻¹ V`` [rad/s], then
        :func:`limit_joint_rates`'s two rows [rad/s].

    Returns
    -------
    code : int
        0 done; 1 :func:`auto_rates` hands over to its reference; 2 the waypoint is reached (the caller goes on
        with the next). The rest only with code 0 (``e_p``, ``e_r`` also with code 2).
    e_p, e_r : float
        The motor-side error on the reference. [m, rad]
    nv, nw : float
        The speed and rate ``V`` asked for before the clip. [m/s, rad/s]
    r_max, j, clipped
        As :func:`limit_joint_rates`.
    """
    if motor:
        Rs, ps = np.empty((7, 9)), np.empty((7, 3))
        rms_kinematics(G, theta_m, Rs, ps, np.empty((6, 3)), np.empty((6, 6)), False, np.empty((6, 6)))
        R_m, p_m = Rs[6], ps[6]
    else:
        R_m, p_m = R_E, p_E
    V = out[0]
    code, e_p, e_r = auto_rates(seg, s0, s1, h, p_m, R_m, gain, v_lim, w_lim, V)
    if code != 0:
        return 1, 0.0, 0.0, 0.0, 0.0, 0.0, -1, 0
    if s0 >= 1.0 and e_p <= tol_p and e_r <= tol_r:
        return 2, e_p, e_r, 0.0, 0.0, 0.0, -1, 0
    nv = math.sqrt(V[3] * V[3] + V[4] * V[4] + V[5] * V[5])
    nw = math.sqrt(V[0] * V[0] + V[1] * V[1] + V[2] * V[2])
    if nv > v_max * (1 + 1e-12):
        for i in range(3, 6):
            V[i] = V[i] * (v_max / nv)
    if nw > w_max * (1 + 1e-12):
        for i in range(3):
            V[i] = V[i] * (w_max / nw)
    qd = np.dot(J_inv, V)
    for i in range(6):
        out[1, i] = qd[i]
    r_max, j, clipped = limit_joint_rates(out[1], theta, limits, limit_gain, out[2:4])
    return 0, e_p, e_r, nv, nw, r_max, j, clipped


@njit(cache=True)
def flex_terms(pts: Array, us: Array, beams: Array, k_joint: Array, J_inv: Array, gamma_J: Array,
               k_servo: Array) -> bool:
    """RMSFLX's terms at a configuration with J regular (:meth:`services.arm.ArmKinematics.flex_terms`): the arm's
    flexibility γ at the point of resolution (:func:`dynamics.flexibility.arm_flexibility`: the beams' closed form
    of :func:`dynamics.flexibility.beams_flexibility_rows`, the joints' ``u uᵀ/k`` carried by the Jacobian's
    columns, symmetrized), ``γ_J = J⁻¹ γ J⁻ᵀ`` symmetrized (3-4) and the 3-7 springs ``1/γ_i^e = [(γ_J)⁻¹]_ii``;
    the same operations in the same order. The products are numba's ``numpy.dot`` (BLAS's ``dgemm``, as numpy's
    ``@``), the inverse ``numpy.linalg.inv`` (LAPACK's getrf and getri, as :func:`dynamics.rms.regular_inverse`).

    Parameters
    ----------
    pts, us, k_joint : ndarray, shapes (7, 3), (6, 3), (6,)
        :func:`dynamics.flexibility.arm_flexibility`'s ``points_O``, ``u_O`` and ``joint_stiffness``.
    beams : ndarray, shape (n, 4)
        Per beam ``root, tip, EI, GJ`` (:class:`dynamics.flexibility.Beam`; n may be 0). [-, -, N·m², N·m²]
    J_inv : ndarray, shape (6, 6)
        The Jacobian's (undamped) inverse at the configuration.
    gamma_J, k_servo : ndarray, shape (6, 6) and (6,)
        Written (True only): γ_J [rad/(N·m)] and the springs [N·m/rad].

    Returns
    -------
    bool
        False where the reference raises or keeps the last terms (a beam's or a joint's stiffness not positive
        and finite, γ_J singular, a spring not positive and finite): the caller runs it.
    """
    nb = beams.shape[0]
    for b in range(nb):
        EI, GJ = beams[b, 2], beams[b, 3]
        if not (EI > 0.0 and GJ > 0.0 and math.isfinite(EI) and math.isfinite(GJ)):
            return False
    t = _beams_terms(pts, beams)
    gamma = np.array(_gamma_rows(t))
    kmin = k_joint[0]
    for i in range(6):
        if not math.isfinite(k_joint[i]):
            return False
        kmin = _min(kmin, k_joint[i])
    if not kmin > 0.0:
        return False
    # the joints' compliance u uᵀ/k carried to the tip: the columns [u; u × (tip − p)] (rms_jacobian_rows)
    Jc = np.empty((6, 6))
    _jacobian_columns(pts, us, pts[6, 0], pts[6, 1], pts[6, 2], Jc)
    gamma = gamma + np.dot(Jc / k_joint, Jc.T)
    g = 0.5 * (gamma + gamma.T)
    X = np.dot(np.dot(J_inv, g), J_inv.T)
    G = 0.5 * (X + X.T)
    try:
        K = np.linalg.inv(G)
    except Exception:       # numba's LinAlgError: γ_J singular (getrf's pivot exactly zero)
        return False
    for i in range(6):
        ki = K[i, i]
        if not (math.isfinite(ki) and ki > 0.0):
            return False
        k_servo[i] = ki
    gamma_J[:, :] = G
    return True
