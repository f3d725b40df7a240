"""Compiled kernels of the berthing contact (numba): the guides' compliant wrench, :func:`guides_wrench`, the adaptive
step's no-contact bound, :func:`coast_bound`, and the orbiter's kinematics at a step, :func:`orbiter_kinematics`.

The contact service's compliant berthing contact, per evaluated step, finds the payload points
inside their guide's bounding sphere and runs :func:`dynamics.contact.point_plane_rows` (the
Hunt–Crossley normal force and the regularized Coulomb friction) on every guide wall a point is
not clearly in front of; the forces' wrench about W's origin is held over the next step. On
Python floats that is a few dozen small calls per step (the proximity test, the relative
velocity, the law), each ~1 µs of interpreter overhead. :func:`guides_wrench` is the same
computation in one compiled call, and :func:`dynamics.contact.guides_wrench_rows` is its
readable reference on Python floats, written as the composition of the float kernels
(:func:`dynamics.spatial.pose_apply_rows`, :func:`dynamics.rigid_body.velocity_at_rows`,
:func:`dynamics.contact.point_plane_rows`); the tests hold the two equal bit for bit (numba
compiles without fast-math: no reassociation, no fused multiply-add; ``exp`` and ``pow`` are
the C library's). One difference of form: a squared distance is ``d * d`` here where the
reference writes ``d ** 2`` (the C library's ``pow``, within half an ulp of it); it only decides
whether a point is inside a bounding sphere that holds every wall's reach with a margin, so the
wrench does not depend on it.

Guides are given as arrays (:func:`guide_tables`): ``pts`` (ng, 3) each guide's payload point in
the payload frame T, ``spheres`` (ng, 4) its bounding sphere in L (centre, squared radius),
``surf`` (ns, 8) the walls ``(sx, sy, sz, nx, ny, nz, radius, depth)`` in L, the walls of guide
``g`` being ``surf[first[g]:first[g + 1]]``.

The no-contact bound
--------------------
The contact service's evaluated steps in free flight end with its no-contact bound (:mod:`services.contact`, the
adaptive step): per payload point a pose, a distance to its guide's ball, a slack to each wall
(:func:`dynamics.contact.surface_slack`), two velocities, a speed and an acceleration bound, then
:func:`dynamics.contact.reach_time`: on Python floats a few hundred small operations and calls per step.
:func:`coast_bound` is the same in one compiled call; :func:`dynamics.contact.coast_bound_rows` is its readable
reference, and the tests hold them equal bit for bit. Two functions are written out to stay so: the distances
(:func:`dynamics.contact.dist3`, CPython 3.11's correctly scaled, compensated ``math.dist``, not ``sqrt`` of the
sum of squares, which differs in the last bit now and then; the reference calls the same function) and the
reference's ``d ** 2`` (the C library's ``pow``), which the kernel calls with the exponent ``two`` given at run time
(LLVM would turn a constant square into a product, not always the same
double). The walls and balls are :func:`bound_tables`.

The orbiter at a step
---------------------
Each evaluated step predicts the orbiter from its ``orbiter/state`` sample
(:func:`dynamics.rigid_body.predict_rows`) and takes its rotation, its angular velocity in W and the latch frame
L's pose from it (:func:`dynamics.spatial.rotation_rows`, ``mat_vec_rows``, ``pose_apply_rows``,
``mat_mat_rows``): :func:`orbiter_kinematics` is the same in one call, with the prediction of
:mod:`dynamics.relative_motion_kernels` (the hil bridge's, the same operations as ``predict_rows``).

Compiled on first use and cached on disk (``cache=True``, numba's ``__pycache__`` next to this
file, or ``NUMBA_CACHE_DIR``). No I/O, clock or globals.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numba import njit
from numpy.typing import NDArray

from dynamics import contact as _dc
from dynamics.relative_motion_kernels import _predict
from dynamics.rigid_body_kernels import _rotation

__all__ = ["bound_tables", "coast_bound", "dist3", "guide_tables", "guides_wrench", "orbiter_kinematics",
           "GuideTables"]

Array = NDArray[np.float64]
GuideTables = tuple[Array, Array, Array, NDArray[np.int64]]
"""``(pts, spheres, surf, first)`` (module docstring)."""


def guide_tables(guides: Sequence[tuple[Sequence[float], Sequence[float], float, Sequence[Sequence[float]]]]
                 ) -> GuideTables:
    """The guides as the kernel's arrays: each guide ``(p_ToPo_T, center_L, reach2, surfaces)``, its surfaces
    eight floats each ``(sx, sy, sz, nx, ny, nz, radius, depth)`` in L. [m, m², -]"""
    pts = np.array([list(g[0]) for g in guides], dtype=np.float64).reshape(-1, 3)
    spheres = np.array([[*g[1], g[2]] for g in guides], dtype=np.float64).reshape(-1, 4)
    surf = np.array([list(s) for g in guides for s in g[3]], dtype=np.float64).reshape(-1, 8)
    first = np.zeros(len(guides) + 1, dtype=np.int64)
    first[1:] = np.cumsum([len(g[3]) for g in guides])
    return pts, spheres, surf, first


@njit(cache=True)
def _point_in_W_and_L(T: tuple[float, ...], L: tuple[float, ...], q0: float, q1: float,
                      q2: float) -> tuple[float, float, float, float, float, float]:
    """A payload point ``q`` (in T) in W (:func:`dynamics.spatial.pose_apply_rows`, same operations) and in L
    (``pose_apply_inverse_rows``): ``(P_W, x_L)``, with T's pose the first 12 of ``T`` and L's the 12 of ``L``. [m]"""
    tR, R = T[3:12], L[3:12]
    P0 = T[0] + (tR[0] * q0 + tR[1] * q1 + tR[2] * q2)
    P1 = T[1] + (tR[3] * q0 + tR[4] * q1 + tR[5] * q2)
    P2 = T[2] + (tR[6] * q0 + tR[7] * q1 + tR[8] * q2)
    a0, a1, a2 = P0 - L[0], P1 - L[1], P2 - L[2]
    return (P0, P1, P2, R[0] * a0 + R[3] * a1 + R[6] * a2, R[1] * a0 + R[4] * a1 + R[7] * a2,
            R[2] * a0 + R[5] * a1 + R[8] * a2)


@njit(cache=True)
def guides_wrench(T: tuple[float, ...], O: tuple[float, ...], L: tuple[float, ...], lead: float,
                  law: tuple[float, ...], margin: float, near: tuple[float, ...], pts: Array, spheres: Array,
                  surf: Array, first: NDArray[np.int64]) -> tuple[bool, float, tuple[float, ...]]:
    """The guides' compliant wrench on the payload (:func:`dynamics.contact.guides_wrench_rows`, bit for bit).

    Parameters
    ----------
    T, O : tuple of 18 float
        The payload's and the orbiter's CoM position (3), ``R_WB`` row-major (9), CoM velocity (3) and
        angular velocity in W (3). [m, -, m/s, rad/s]
    L : tuple of 12 float
        L's origin in W (3) and ``R_WL`` row-major (9). [m, -]
    lead : float
        The time ahead the relative displacement is extrapolated to (half the step). [s]
    law : tuple of 6 float
        :class:`dynamics.contact.ContactLaw`'s ``(k, exponent, alpha, mu_s, mu_k, v_stick)``.
    margin : float
        A wall is skipped when the point is at least this in front of it. [m]
    near : tuple of 4 float
        The sphere in L holding every guide's (centre, squared radius) for the payload's CoM: farther, no guide
        is near. [m, m²]
    pts, spheres, surf, first : ndarray
        The guides (module docstring).

    Returns
    -------
    active : bool
        Some wall acts.
    power : float
        The power dissipated, summed. [W]
    F_Wo_W : tuple of 6 float
        [τ about W's origin; f] on the payload, in W. [N·m, N]
    """
    tp0, tp1, tp2 = T[0], T[1], T[2]
    tv0, tv1, tv2, tw0, tw1, tw2 = T[12], T[13], T[14], T[15], T[16], T[17]
    op0, op1, op2 = O[0], O[1], O[2]
    ov0, ov1, ov2, ow0, ow1, ow2 = O[12], O[13], O[14], O[15], O[16], O[17]
    l0, l1, l2 = L[0], L[1], L[2]
    R = L[3:12]
    F0 = F1 = F2 = F3 = F4 = F5 = 0.0
    power = 0.0
    active = False
    # the payload's CoM in L (pose_apply_inverse_rows)
    a0, a1, a2 = tp0 - l0, tp1 - l1, tp2 - l2
    x0 = R[0] * a0 + R[3] * a1 + R[6] * a2
    x1 = R[1] * a0 + R[4] * a1 + R[7] * a2
    x2 = R[2] * a0 + R[5] * a1 + R[8] * a2
    d0, d1, d2 = x0 - near[0], x1 - near[1], x2 - near[2]
    if d0 * d0 + d1 * d1 + d2 * d2 > near[3]:
        return active, power, (F0, F1, F2, F3, F4, F5)
    k, expo, alpha, mu_s, mu_k, vs = law[0], law[1], law[2], law[3], law[4], law[5]
    for g in range(pts.shape[0]):
        q0, q1, q2 = pts[g, 0], pts[g, 1], pts[g, 2]
        P0, P1, P2, x0, x1, x2 = _point_in_W_and_L(T, L, q0, q1, q2)
        d0, d1, d2 = x0 - spheres[g, 0], x1 - spheres[g, 1], x2 - spheres[g, 2]
        if not d0 * d0 + d1 * d1 + d2 * d2 <= spheres[g, 3]:
            continue
        have_u = False
        u0 = u1 = u2 = 0.0
        fx = fy = fz = 0.0
        for j in range(first[g], first[g + 1]):
            sx, sy, sz, nx, ny, nz, radius, depth = (surf[j, 0], surf[j, 1], surf[j, 2], surf[j, 3], surf[j, 4],
                                                     surf[j, 5], surf[j, 6], surf[j, 7])
            dx, dy, dz = x0 - sx, x1 - sy, x2 - sz
            if dx * nx + dy * ny + dz * nz >= margin:  # in front
                continue
            if not have_u:  # the point's velocity relative to the orbiter (velocity_at_rows), in L
                have_u = True
                r0, r1, r2 = P0 - tp0, P1 - tp1, P2 - tp2
                vP0, vP1, vP2 = tv0 + (tw1 * r2 - tw2 * r1), tv1 + (tw2 * r0 - tw0 * r2), tv2 + (tw0 * r1 - tw1 * r0)
                r0, r1, r2 = P0 - op0, P1 - op1, P2 - op2
                vS0, vS1, vS2 = ov0 + (ow1 * r2 - ow2 * r1), ov1 + (ow2 * r0 - ow0 * r2), ov2 + (ow0 * r1 - ow1 * r0)
                e0, e1, e2 = vP0 - vS0, vP1 - vS1, vP2 - vS2
                u0 = R[0] * e0 + R[3] * e1 + R[6] * e2
                u1 = R[1] * e0 + R[4] * e1 + R[7] * e2
                u2 = R[2] * e0 + R[5] * e1 + R[8] * e2
            # point_plane_rows at the point extrapolated by u·lead
            ex, ey, ez = dx + u0 * lead, dy + u1 * lead, dz + u2 * lead
            dn = ex * nx + ey * ny + ez * nz
            delta = -dn
            delta_dot = -(u0 * nx + u1 * ny + u2 * nz)
            lx, ly, lz = ex - dn * nx, ey - dn * ny, ez - dn * nz
            if delta <= 0.0 or delta > depth or lx * lx + ly * ly + lz * lz > radius * radius:
                continue
            # hunt_crossley (δ > 0 here)
            fe = k * (delta if expo == 1.0 else delta ** expo)
            Fn = fe * (1.0 + 1.5 * alpha * delta_dot)
            Fn = Fn if Fn > 0.0 else 0.0  # max(0.0, F_n)
            tx, ty, tz = u0 + delta_dot * nx, u1 + delta_dot * ny, u2 + delta_dot * nz
            st = math.sqrt(tx * tx + ty * ty + tz * tz)
            f0, f1, f2 = Fn * nx, Fn * ny, Fn * nz
            P_f = 0.0
            if st > 0.0 and Fn > 0.0 and mu_s > 0.0:
                if st <= vs:  # friction_coefficient
                    mu = mu_s * st / vs
                else:
                    mu = mu_k + (mu_s - mu_k) * math.exp(-(st - vs) / vs)
                kf = mu * Fn / st
                f0, f1, f2 = f0 - kf * tx, f1 - kf * ty, f2 - kf * tz
                P_f = mu * Fn * st
            active = True
            fx, fy, fz = fx + f0, fy + f1, fz + f2
            power += (Fn - fe) * delta_dot + P_f
        if fx or fy or fz:
            w0 = R[0] * fx + R[1] * fy + R[2] * fz
            w1 = R[3] * fx + R[4] * fy + R[5] * fz
            w2 = R[6] * fx + R[7] * fy + R[8] * fz
            F0, F1, F2 = F0 + (P1 * w2 - P2 * w1), F1 + (P2 * w0 - P0 * w2), F2 + (P0 * w1 - P1 * w0)
            F3, F4, F5 = F3 + w0, F4 + w1, F5 + w2
    return active, power, (F0, F1, F2, F3, F4, F5)


def bound_tables(points: Sequence[tuple[Sequence[float], Sequence[float], float, Sequence[Sequence[float]]]]
                 ) -> GuideTables:
    """:func:`coast_bound`'s arrays from :func:`dynamics.contact.coast_bound_rows`'s points: ``pts`` (n, 3) each
    payload point in T, ``balls`` (n, 4) its ball in L (centre, radius), ``surf`` (ns, 8) the walls in L, the walls
    of point ``g`` being ``surf[first[g]:first[g + 1]]``. [m]"""
    pts = np.array([list(g[0]) for g in points], dtype=np.float64).reshape(-1, 3)
    balls = np.array([[*g[1], g[2]] for g in points], dtype=np.float64).reshape(-1, 4)
    surf = np.array([list(s) for g in points for s in g[3]], dtype=np.float64).reshape(-1, 8)
    first = np.zeros(len(points) + 1, dtype=np.int64)
    first[1:] = np.cumsum([len(g[3]) for g in points])
    return pts, balls, surf, first


dist3 = njit(cache=True)(_dc.dist3)
"""The compiled :func:`dynamics.contact.dist3` (``math.dist`` of CPython 3.11, bit for bit)."""


@njit(cache=True)
def _norm3(x0: float, x1: float, x2: float) -> float:
    return math.sqrt(x0 * x0 + x1 * x1 + x2 * x2)


@njit(cache=True)
def coast_bound(T: tuple[float, ...], O: tuple[float, ...], L: tuple[float, ...], F_T: tuple[float, ...],
                a_T: tuple[float, ...], a_O: tuple[float, ...], wd_O: tuple[float, ...], scalars: tuple[float, ...],
                mode: int, pts: Array, balls: Array, surf: Array, first: NDArray[np.int64], two: float
                ) -> tuple[int, float, float, float, float, float]:
    """The adaptive step's no-contact bound (:func:`dynamics.contact.coast_bound_rows`, bit for bit).

    Parameters
    ----------
    T, O, L, F_T, a_T, a_O, wd_O, scalars, mode
        As :func:`dynamics.contact.coast_bound_rows` (tuples of floats; ``mode`` 0 footprint, 1 front, 2 balls).
    pts, balls, surf, first : ndarray
        The points, their balls and walls (:func:`bound_tables`).
    two : float
        2.0 (module docstring: the reference's squares by the C library's ``pow``).

    Returns
    -------
    code : int
        0 coast ``span``; 1 not; 2 a speed or acceleration bound is not finite (the reference raises the error).
    span, f_max, tau_max, a_O_max, wd_O_max : float
        As the reference's.
    """
    H_O, h, mass, I_min, I_max = scalars[0], scalars[1], scalars[2], scalars[3], scalars[4]
    coast_max, drift, accel_floor, pos_floor, margin = scalars[5], scalars[6], scalars[7], scalars[8], scalars[9]
    tp0, tp1, tp2 = T[0], T[1], T[2]
    tv0, tv1, tv2, tw0, tw1, tw2 = T[12], T[13], T[14], T[15], T[16], T[17]
    op0, op1, op2 = O[0], O[1], O[2]
    ov0, ov1, ov2, ow0, ow1, ow2 = O[12], O[13], O[14], O[15], O[16], O[17]
    a_O_max = 2.0 * _norm3(a_O[0], a_O[1], a_O[2]) + 1.0e-4
    wd_O_max = 2.0 * _norm3(wd_O[0], wd_O[1], wd_O[2]) + 1.0e-6
    f, tau = _norm3(F_T[3], F_T[4], F_T[5]), _norm3(F_T[0], F_T[1], F_T[2])
    f_max, tau_max = 2.0 * f + 1.0, 2.0 * tau + 1.0
    if _norm3(tv0, tv1, tv2) * coast_max > drift:
        return 1, 0.0, f_max, tau_max, a_O_max, wd_O_max
    a_T_max = _norm3(a_T[0], a_T[1], a_T[2]) + (f + f_max) / mass
    wT, wO = _norm3(tw0, tw1, tw2), _norm3(ow0, ow1, ow2)
    wd_T_max = (tau_max + I_max * wT * wT) / I_min
    wT_max, wO_max = wT + wd_T_max * coast_max, wO + wd_O_max * coast_max
    tau_c = math.inf
    for g in range(pts.shape[0]):
        q0, q1, q2 = pts[g, 0], pts[g, 1], pts[g, 2]
        P0, P1, P2, x0, x1, x2 = _point_in_W_and_L(T, L, q0, q1, q2)
        slack = dist3(x0, x1, x2, balls[g, 0], balls[g, 1], balls[g, 2]) - balls[g, 3]
        if mode != 2:
            near = math.inf
            for j in range(first[g], first[g + 1]):
                sx, sy, sz, nx, ny, nz, radius, depth = (surf[j, 0], surf[j, 1], surf[j, 2], surf[j, 3], surf[j, 4],
                                                         surf[j, 5], surf[j, 6], surf[j, 7])
                dx, dy, dz = x0 - sx, x1 - sy, x2 - sz
                if mode == 0:  # surface_slack: max(dn, -dn - depth, |lateral| - radius)
                    dn = dx * nx + dy * ny + dz * nz
                    lx, ly, lz = dx - dn * nx, dy - dn * ny, dz - dn * nz
                    s = dn
                    b = -dn - depth
                    if b > s:
                        s = b
                    b = math.sqrt(lx * lx + ly * ly + lz * lz) - radius
                    if b > s:
                        s = b
                else:
                    s = dx * nx + dy * ny + dz * nz - margin
                if s < near:  # min(near, s)
                    near = s
            if near > slack:  # max(slack, near)
                slack = near
        # the point's velocity on the payload and on the orbiter (velocity_at_rows)
        r0, r1, r2 = P0 - tp0, P1 - tp1, P2 - tp2
        vP0, vP1, vP2 = tv0 + (tw1 * r2 - tw2 * r1), tv1 + (tw2 * r0 - tw0 * r2), tv2 + (tw0 * r1 - tw1 * r0)
        r0, r1, r2 = P0 - op0, P1 - op1, P2 - op2
        vS0, vS1, vS2 = ov0 + (ow1 * r2 - ow2 * r1), ov1 + (ow2 * r0 - ow0 * r2), ov2 + (ow0 * r1 - ow1 * r0)
        speed = math.sqrt((vP0 - vS0) ** two + (vP1 - vS1) ** two + (vP2 - vS2) ** two)
        rho = _norm3(q0, q1, q2)
        r_O = dist3(P0, P1, P2, op0, op1, op2) + 1.0
        if speed * coast_max > 1.0:
            return 1, 0.0, f_max, tau_max, a_O_max, wd_O_max
        A = (a_T_max + wd_T_max * rho + wT_max * wT_max * rho
             + a_O_max + wd_O_max * r_O + wO_max * wO_max * r_O + 2.0 * wO_max * (speed + 1.0)
             + accel_floor)
        jump = (a_O_max + wd_O_max * r_O) * (H_O * H_O + 2.0 * H_O * coast_max)
        # reach_time(speed, A, slack - pos_floor - jump)
        if not (math.isfinite(speed) and speed >= 0.0 and math.isfinite(A) and A >= 0.0):
            return 2, 0.0, f_max, tau_max, a_O_max, wd_O_max
        sl = slack - pos_floor - jump
        if sl <= 0.0:
            t_reach = 0.0
        elif A == 0.0:
            t_reach = sl / speed if speed > 0.0 else math.inf
        else:
            t_reach = 2.0 * sl / (speed + math.sqrt(speed * speed + 2.0 * A * sl))
        if t_reach < tau_c:  # min(tau_c, t_reach)
            tau_c = t_reach
    span = tau_c - h
    if coast_max < span:  # min(tau_c - h, coast_max)
        span = coast_max
    if span < h:
        return 1, 0.0, f_max, tau_max, a_O_max, wd_O_max
    return 0, span, f_max, tau_max, a_O_max, wd_O_max


@njit(cache=True)
def orbiter_kinematics(s: Array, dt: float, p_OL: tuple[float, ...], R_OL: tuple[float, ...]
                       ) -> tuple[bool, tuple[float, ...], tuple[float, ...]]:
    """The orbiter ``dt`` > 0 after its sample and its latch frame L then (module docstring), bit for bit the
    float references.

    Parameters
    ----------
    s : ndarray, shape (19,)
        The sample: ``p_WoOo_W`` (3), ``quat_WO`` (4), ``v_WOo_W`` (3), ``w_WO_O`` (3), ``a_WOo_W`` (3),
        ``wdot_WO_O`` (3) (:data:`dynamics.relative_motion_kernels.BODY_SIZE`). [m, -, m/s, rad/s, m/s², rad/s²]
    dt : float
        [s]
    p_OL, R_OL : tuple of 3 and 9 float
        L in O: its origin [m] and ``R_OL`` row-major.

    Returns
    -------
    ok : bool
        False if the prediction is not finite or its quaternion could not be integrated (the references raise).
    O : tuple of 18 float
        CoM position (3), ``R_WO`` row-major (9), CoM velocity (3) and angular velocity in W (3).
        [m, -, m/s, rad/s]
    L : tuple of 12 float
        L's origin in W (3) and ``R_WL`` row-major (9). [m, -]
    """
    good, p, q, v, w = _predict(s, dt)
    ok = good
    for x in (p[0], p[1], p[2], q[0], q[1], q[2], q[3], v[0], v[1], v[2], w[0], w[1], w[2]):
        if not math.isfinite(x):
            ok = False
    R = _rotation(q[0], q[1], q[2], q[3])
    w0, w1, w2 = w
    wW = (R[0] * w0 + R[1] * w1 + R[2] * w2, R[3] * w0 + R[4] * w1 + R[5] * w2, R[6] * w0 + R[7] * w1 + R[8] * w2)
    c0, c1, c2 = p_OL[0], p_OL[1], p_OL[2]
    pL = (p[0] + (R[0] * c0 + R[1] * c1 + R[2] * c2), p[1] + (R[3] * c0 + R[4] * c1 + R[5] * c2),
          p[2] + (R[6] * c0 + R[7] * c1 + R[8] * c2))
    a00, a01, a02, a10, a11, a12, a20, a21, a22 = R
    b00, b01, b02, b10, b11, b12, b20, b21, b22 = R_OL
    O = (p[0], p[1], p[2], *R, v[0], v[1], v[2], wW[0], wW[1], wW[2])
    L = (pL[0], pL[1], pL[2],
         a00 * b00 + a01 * b10 + a02 * b20, a00 * b01 + a01 * b11 + a02 * b21, a00 * b02 + a01 * b12 + a02 * b22,
         a10 * b00 + a11 * b10 + a12 * b20, a10 * b01 + a11 * b11 + a12 * b21, a10 * b02 + a11 * b12 + a12 * b22,
         a20 * b00 + a21 * b10 + a22 * b20, a20 * b01 + a21 * b11 + a22 * b21, a20 * b02 + a21 * b12 + a22 * b22)
    return ok, O, L
