"""Compiled kernel of the berthing guides' compliant wrench (numba): :func:`guides_wrench`.

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

Compiled on first use and cached on disk (``cache=True``, numba's ``__pycache__`` next to this
file, or ``NUMBA_CACHE_DIR``). No I/O, clock or globals.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numba import njit
from numpy.typing import NDArray

__all__ = ["guide_tables", "guides_wrench", "GuideTables"]

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
    tR = T[3:12]
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
        # the point in W (pose_apply_rows) and in L
        P0 = tp0 + (tR[0] * q0 + tR[1] * q1 + tR[2] * q2)
        P1 = tp1 + (tR[3] * q0 + tR[4] * q1 + tR[5] * q2)
        P2 = tp2 + (tR[6] * q0 + tR[7] * q1 + tR[8] * q2)
        a0, a1, a2 = P0 - l0, P1 - l1, P2 - l2
        x0 = R[0] * a0 + R[3] * a1 + R[6] * a2
        x1 = R[1] * a0 + R[4] * a1 + R[7] * a2
        x2 = R[2] * a0 + R[5] * a1 + R[8] * a2
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
