"""Compiled kernels of the rigid chain's recursions (numba), used by :mod:`dynamics.chain`.

The same algorithms as the numpy code of :mod:`dynamics.chain` and :mod:`dynamics.udu`
(which stay as the reference: :func:`dynamics.chain.forward_dynamics_numpy` and
:func:`dynamics.chain.mass_matrix_numpy`), written as loops over the bodies with 3- and
6-vectors unrolled, so that one configuration costs a few microseconds instead of the
hundreds of small numpy calls (each ~1 µs of overhead) the vectorized code makes:

- :func:`kinematics`: poses ``X_WB``, CoMs, motion subspace ``S`` at ``Bo`` and body spatial
  inertias ``I_ref`` at ``Bo`` (the module docstring of :mod:`dynamics.chain`).
- :func:`mass_matrix`: composite inertias (MBDYN seed 004 eq. 17 with ``r_s`` the identity)
  and ``M[k, l] = P_kᵀ M*_{body(k)} P_l`` (eqs. 19, 21).
- :func:`rnea`: ``C(q, v) v`` (+ ``M v̇``) by Newton–Euler at the point coinciding with ``Bo``.
- :func:`gen_forces`: ``Σ_b J_bᵀ F_b``.
- :func:`forward_dynamics`: the right-hand side and Saha's UDU^T factorization and solve
  (seed 001 eqs. 13–27, :mod:`dynamics.udu`); the free base's 6×6 block by a Cholesky
  solve (the numpy reference multiplies by its inverse: equal to round-off).

Compiled on first use and cached on disk (``cache=True``, numba's ``__pycache__`` next to
this file, or ``NUMBA_CACHE_DIR``): the first process compiles once (a few seconds), the
next ones load the machine code. All arrays are float64 (int64 for indices), C-contiguous;
outputs are written into the caller's arrays. Errors are returned as codes (numba raises no
project errors): the caller turns them into :class:`errors.SingularityError`.

No I/O, clock or globals.
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numpy.typing import NDArray

__all__ = ["PIVOT_RTOL", "kinematics", "mass_matrix", "rnea", "gen_forces", "forward_dynamics", "BASE_NOT_PD"]

Array = NDArray[np.float64]

PIVOT_RTOL = 1e-13  # as dynamics.udu._PIVOT_RTOL
BASE_NOT_PD = -1  # forward_dynamics: the base's articulated inertia is not positive definite


@njit(cache=True)
def kinematics(floating: bool, q: Array, X_PJ: Array, T_PB: Array, rev_f: Array, pri_f: Array,
               parent: NDArray[np.int64], axis_J: Array, p_BoBcm_B: Array, I_Bcm_B: Array, mass: Array,
               X_WB: Array, com_W: Array, p_ref: Array, S: Array, I_ref: Array) -> None:
    """Fill ``X_WB`` (nb, 4, 4), ``com_W`` (nb, 3), ``p_ref`` (3,), ``S`` (6, nv) and ``I_ref`` (nb, 6, 6).

    ``T_PB`` (n, 4, 4, 4): ``X_PB(θ) = T0 + sin θ T1 + (1 − cos θ) T2`` (revolute, Rodrigues) or
    ``T0 + θ T3`` (prismatic), precomputed in :class:`dynamics.chain.ChainModel`.
    """
    nb = X_WB.shape[0]
    if floating:
        w, x, y, z = q[3], q[4], q[5], q[6]
        X_WB[0, 0, 0] = 1 - 2 * (y * y + z * z)
        X_WB[0, 0, 1] = 2 * (x * y - w * z)
        X_WB[0, 0, 2] = 2 * (x * z + w * y)
        X_WB[0, 1, 0] = 2 * (x * y + w * z)
        X_WB[0, 1, 1] = 1 - 2 * (x * x + z * z)
        X_WB[0, 1, 2] = 2 * (y * z - w * x)
        X_WB[0, 2, 0] = 2 * (x * z - w * y)
        X_WB[0, 2, 1] = 2 * (y * z + w * x)
        X_WB[0, 2, 2] = 1 - 2 * (x * x + y * y)
        for i in range(3):
            X_WB[0, i, 3] = q[i]
        off = 7
        col0 = 6
    else:
        for i in range(4):
            for j in range(4):
                X_WB[0, i, j] = X_PJ[0, i, j]
        off = 0
        col0 = 0
    X_PB = np.empty((4, 4))
    for b in range(1, nb):
        th = q[off + b - 1]
        c1 = np.sin(th) * rev_f[b - 1]
        c2 = (1.0 - np.cos(th)) * rev_f[b - 1]
        c3 = th * pri_f[b - 1]
        T = T_PB[b - 1]
        for i in range(4):
            for j in range(4):
                X_PB[i, j] = T[0, i, j] + c1 * T[1, i, j] + c2 * T[2, i, j] + c3 * T[3, i, j]
        P = X_WB[parent[b]]
        for i in range(3):
            for j in range(4):
                X_WB[b, i, j] = P[i, 0] * X_PB[0, j] + P[i, 1] * X_PB[1, j] + P[i, 2] * X_PB[2, j] \
                    + P[i, 3] * X_PB[3, j]
    for i in range(3):
        p_ref[i] = X_WB[0, i, 3]
    RI = np.empty((3, 3))
    for b in range(nb):
        R = X_WB[b]
        for i in range(3):
            com_W[b, i] = R[i, 3] + R[i, 0] * p_BoBcm_B[b, 0] + R[i, 1] * p_BoBcm_B[b, 1] + R[i, 2] * p_BoBcm_B[b, 2]
        if b > 0:
            k = col0 + b - 1
            a0 = R[0, 0] * axis_J[b, 0] + R[0, 1] * axis_J[b, 1] + R[0, 2] * axis_J[b, 2]
            a1 = R[1, 0] * axis_J[b, 0] + R[1, 1] * axis_J[b, 1] + R[1, 2] * axis_J[b, 2]
            a2 = R[2, 0] * axis_J[b, 0] + R[2, 1] * axis_J[b, 1] + R[2, 2] * axis_J[b, 2]
            if rev_f[b - 1] > 0.0:
                r0, r1, r2 = R[0, 3] - p_ref[0], R[1, 3] - p_ref[1], R[2, 3] - p_ref[2]
                S[0, k], S[1, k], S[2, k] = a0, a1, a2
                S[3, k] = r1 * a2 - r2 * a1
                S[4, k] = r2 * a0 - r0 * a2
                S[5, k] = r0 * a1 - r1 * a0
            else:
                S[0, k], S[1, k], S[2, k] = 0.0, 0.0, 0.0
                S[3, k], S[4, k], S[5, k] = a0, a1, a2
        # I_ref = [[R I Rᵀ − m c̃ c̃, m c̃], [−m c̃, m E]] with c = com − p_ref
        Ib = I_Bcm_B[b]
        for i in range(3):
            for j in range(3):
                RI[i, j] = R[i, 0] * Ib[0, j] + R[i, 1] * Ib[1, j] + R[i, 2] * Ib[2, j]
        m = mass[b]
        c0, c1_, c2_ = com_W[b, 0] - p_ref[0], com_W[b, 1] - p_ref[1], com_W[b, 2] - p_ref[2]
        cc = c0 * c0 + c1_ * c1_ + c2_ * c2_
        cv = (c0, c1_, c2_)
        Ir = I_ref[b]
        for i in range(3):
            for j in range(3):
                # −c̃ c̃ = |c|² E − c cᵀ
                Ir[i, j] = RI[i, 0] * R[j, 0] + RI[i, 1] * R[j, 1] + RI[i, 2] * R[j, 2] \
                    + m * ((cc if i == j else 0.0) - cv[i] * cv[j])
                Ir[3 + i, 3 + j] = m if i == j else 0.0
        Ir[0, 3], Ir[0, 4], Ir[0, 5] = 0.0, -m * c2_, m * c1_
        Ir[1, 3], Ir[1, 4], Ir[1, 5] = m * c2_, 0.0, -m * c0
        Ir[2, 3], Ir[2, 4], Ir[2, 5] = -m * c1_, m * c0, 0.0
        for i in range(3):
            for j in range(3):
                Ir[3 + i, j] = -Ir[i, 3 + j]


@njit(cache=True)
def mass_matrix(floating: bool, parent: NDArray[np.int64], S: Array, I_ref: Array, M: Array) -> None:
    """Fill ``M`` (nv, nv) from ``S`` and ``I_ref`` (composite-body recursion)."""
    nb = I_ref.shape[0]
    nv = S.shape[1]
    col0 = 6 if floating else 0
    Ic = I_ref.copy()
    for b in range(nb - 1, 0, -1):
        Ic[parent[b]] += Ic[b]
    body = np.empty(nv, dtype=np.int64)
    for k in range(col0):
        body[k] = 0
    for b in range(1, nb):
        body[col0 + b - 1] = b
    F = np.zeros((6, nv))
    for k in range(nv):
        Icb = Ic[body[k]]
        for i in range(6):
            s = 0.0
            for j in range(6):
                s += Icb[i, j] * S[j, k]
            F[i, k] = s
    M[:, :] = 0.0
    for k in range(nv):
        # columns l on the path from body(k) to the base, l ≤ k
        b = body[k]
        if b == 0:
            for l in range(k + 1):
                s = 0.0
                for i in range(6):
                    s += F[i, k] * S[i, l]
                M[k, l] = s
                M[l, k] = s
            continue
        a = b
        while a >= 0:
            if a == 0:
                lo, hi = 0, col0
            else:
                lo, hi = col0 + a - 1, col0 + a
            for l in range(lo, hi):
                s = 0.0
                for i in range(6):
                    s += F[i, k] * S[i, l]
                M[k, l] = s
                M[l, k] = s
            a = parent[a]


@njit(cache=True)
def rnea(floating: bool, parent: NDArray[np.int64], S: Array, I_ref: Array, v: Array, vdot: Array,
         with_vdot: bool, out: Array) -> None:
    """``out`` (nv,) = ``C(q, v) v`` (+ ``M v̇`` if ``with_vdot``), Newton–Euler with spatial vectors at ``Bo``.

    Body twists ``V_b = V_parent + S_k v_k``, accelerations of the point coinciding with ``Bo``
    ``a_b = a_parent + V_parent × S_k v_k (+ S_k v̇_k)`` (a free base's: ``v̇_0 − [0; ω × v]``, the
    classical-to-spatial shift), forces ``f_b = I_b a_b + V_b ×* I_b V_b`` summed over subtrees.
    """
    nb = I_ref.shape[0]
    col0 = 6 if floating else 0
    V = np.zeros((nb, 6))
    A = np.zeros((nb, 6))
    if floating:
        for i in range(6):
            V[0, i] = v[i]
            if with_vdot:
                A[0, i] = vdot[i]
        w0, w1, w2 = v[0], v[1], v[2]
        u0, u1, u2 = v[3], v[4], v[5]
        A[0, 3] -= w1 * u2 - w2 * u1
        A[0, 4] -= w2 * u0 - w0 * u2
        A[0, 5] -= w0 * u1 - w1 * u0
    for b in range(1, nb):
        k = col0 + b - 1
        p = parent[b]
        vk = v[k]
        s0, s1, s2 = S[0, k] * vk, S[1, k] * vk, S[2, k] * vk
        s3, s4, s5 = S[3, k] * vk, S[4, k] * vk, S[5, k] * vk
        w0, w1, w2 = V[p, 0], V[p, 1], V[p, 2]
        u0, u1, u2 = V[p, 3], V[p, 4], V[p, 5]
        # crm(V_p) (S_k v_k) = [ω × s_ω; u × s_ω + ω × s_v]
        c0 = w1 * s2 - w2 * s1
        c1 = w2 * s0 - w0 * s2
        c2 = w0 * s1 - w1 * s0
        c3 = (u1 * s2 - u2 * s1) + (w1 * s5 - w2 * s4)
        c4 = (u2 * s0 - u0 * s2) + (w2 * s3 - w0 * s5)
        c5 = (u0 * s1 - u1 * s0) + (w0 * s4 - w1 * s3)
        if with_vdot:
            ak = vdot[k]
            c0 += S[0, k] * ak
            c1 += S[1, k] * ak
            c2 += S[2, k] * ak
            c3 += S[3, k] * ak
            c4 += S[4, k] * ak
            c5 += S[5, k] * ak
        V[b, 0], V[b, 1], V[b, 2] = w0 + s0, w1 + s1, w2 + s2
        V[b, 3], V[b, 4], V[b, 5] = u0 + s3, u1 + s4, u2 + s5
        A[b, 0], A[b, 1], A[b, 2] = A[p, 0] + c0, A[p, 1] + c1, A[p, 2] + c2
        A[b, 3], A[b, 4], A[b, 5] = A[p, 3] + c3, A[p, 4] + c4, A[p, 5] + c5
    f = np.zeros((nb, 6))
    h = np.empty(6)
    for b in range(nb):
        Ib = I_ref[b]
        for i in range(6):
            sh = 0.0
            sa = 0.0
            for j in range(6):
                sh += Ib[i, j] * V[b, j]
                sa += Ib[i, j] * A[b, j]
            h[i] = sh
            f[b, i] = sa
        w0, w1, w2 = V[b, 0], V[b, 1], V[b, 2]
        u0, u1, u2 = V[b, 3], V[b, 4], V[b, 5]
        # V ×* h = [ω × h_ω + u × h_v; ω × h_v]
        f[b, 0] += (w1 * h[2] - w2 * h[1]) + (u1 * h[5] - u2 * h[4])
        f[b, 1] += (w2 * h[0] - w0 * h[2]) + (u2 * h[3] - u0 * h[5])
        f[b, 2] += (w0 * h[1] - w1 * h[0]) + (u0 * h[4] - u1 * h[3])
        f[b, 3] += w1 * h[5] - w2 * h[4]
        f[b, 4] += w2 * h[3] - w0 * h[5]
        f[b, 5] += w0 * h[4] - w1 * h[3]
    for b in range(nb - 1, 0, -1):
        for i in range(6):
            f[parent[b], i] += f[b, i]
    if floating:
        for i in range(6):
            out[i] = f[0, i]
    for b in range(1, nb):
        k = col0 + b - 1
        out[k] = S[0, k] * f[b, 0] + S[1, k] * f[b, 1] + S[2, k] * f[b, 2] \
            + S[3, k] * f[b, 3] + S[4, k] * f[b, 4] + S[5, k] * f[b, 5]


@njit(cache=True)
def gen_forces(floating: bool, parent: NDArray[np.int64], S: Array, X_WB: Array, p_ref: Array, F_ext: Array,
               out: Array) -> None:
    """``out`` (nv,) = ``Σ_b J_bᵀ F_b`` for ``F_ext`` (nb, 6): ``[τ; f]`` about each body origin
    (``X_WB[b, :3, 3]``), in W."""
    nb = F_ext.shape[0]
    col0 = 6 if floating else 0
    W = np.empty((nb, 6))
    for b in range(nb):
        r0, r1, r2 = X_WB[b, 0, 3] - p_ref[0], X_WB[b, 1, 3] - p_ref[1], X_WB[b, 2, 3] - p_ref[2]
        f0, f1, f2 = F_ext[b, 3], F_ext[b, 4], F_ext[b, 5]
        W[b, 0] = F_ext[b, 0] + (r1 * f2 - r2 * f1)
        W[b, 1] = F_ext[b, 1] + (r2 * f0 - r0 * f2)
        W[b, 2] = F_ext[b, 2] + (r0 * f1 - r1 * f0)
        W[b, 3], W[b, 4], W[b, 5] = f0, f1, f2
    for b in range(nb - 1, 0, -1):
        for i in range(6):
            W[parent[b], i] += W[b, i]
    if floating:
        for i in range(6):
            out[i] = W[0, i]
    for b in range(1, nb):
        k = col0 + b - 1
        out[k] = S[0, k] * W[b, 0] + S[1, k] * W[b, 1] + S[2, k] * W[b, 2] \
            + S[3, k] * W[b, 3] + S[4, k] * W[b, 4] + S[5, k] * W[b, 5]


@njit(cache=True)
def forward_dynamics(floating: bool, parent: NDArray[np.int64], S: Array, I_ref: Array, X_WB: Array,
                     p_ref: Array, v: Array, tau: Array, F_ext: Array, with_F: bool, vdot: Array) -> int:
    """``vdot`` (nv,) solving ``M v̇ = τ − C v + Σ J_bᵀ F_b`` by Saha's recursive UDU^T (seed 001).

    Returns
    -------
    int
        0; ``b ≥ 1`` if body b's articulated pivot ``m̂`` is not positive (relative to the trace
        of its spatial inertia, :data:`PIVOT_RTOL`); :data:`BASE_NOT_PD` if the base's
        articulated inertia is not positive definite.
    """
    nb = I_ref.shape[0]
    nv = v.shape[0]
    col0 = 6 if floating else 0
    bias = np.empty(nv)
    rnea(floating, parent, S, I_ref, v, v, False, bias)
    phi = np.empty(nv)
    for k in range(nv):
        phi[k] = tau[k] - bias[k]
    if with_F:
        g = np.empty(nv)
        gen_forces(floating, parent, S, X_WB, p_ref, F_ext, g)
        for k in range(nv):
            phi[k] += g[k]
    # Factor: Î_b = I_b + Σ_children Ī_c, ψ̂ = Î_b p_k, m̂ = p_kᵀ ψ̂, ψ̄ = ψ̂ / m̂, Ī_b = Î_b − ψ̂ ψ̄ᵀ
    Ihat = I_ref.copy()
    psi_bar = np.zeros((nb, 6))
    d = np.zeros(nv)
    psi = np.empty(6)
    for b in range(nb - 1, 0, -1):
        k = col0 + b - 1
        Ib = Ihat[b]
        m_hat = 0.0
        for i in range(6):
            s = 0.0
            for j in range(6):
                s += Ib[i, j] * S[j, k]
            psi[i] = s
            m_hat += S[i, k] * s
        scale = I_ref[b, 0, 0] + I_ref[b, 1, 1] + I_ref[b, 2, 2] + I_ref[b, 3, 3] + I_ref[b, 4, 4] + I_ref[b, 5, 5]
        if not m_hat > PIVOT_RTOL * scale:
            return b
        d[k] = m_hat
        p = parent[b]
        for i in range(6):
            psi_bar[b, i] = psi[i] / m_hat
        for i in range(6):
            for j in range(6):
                Ihat[p, i, j] += Ib[i, j] - psi[i] * psi_bar[b, j]
    # U ŷ = φ from the tip
    yhat = np.empty(nv)
    eta = np.zeros((nb, 6))
    for b in range(nb - 1, 0, -1):
        k = col0 + b - 1
        yk = phi[k]
        for i in range(6):
            yk -= S[i, k] * eta[b, i]
        yhat[k] = yk
        p = parent[b]
        for i in range(6):
            eta[p, i] += eta[b, i] + psi_bar[b, i] * yk
    mu = np.zeros((nb, 6))
    if floating:
        # Î_0 x_0 = φ_0 − η_0 by Cholesky (Î_0 = L Lᵀ)
        L = np.zeros((6, 6))
        A0 = Ihat[0]
        for j in range(6):
            s = A0[j, j]
            for m in range(j):
                s -= L[j, m] * L[j, m]
            if not s > 0.0:
                return BASE_NOT_PD
            L[j, j] = np.sqrt(s)
            for i in range(j + 1, 6):
                t = A0[i, j]
                for m in range(j):
                    t -= L[i, m] * L[j, m]
                L[i, j] = t / L[j, j]
        y = np.empty(6)
        for i in range(6):
            t = phi[i] - eta[0, i]
            for m in range(i):
                t -= L[i, m] * y[m]
            y[i] = t / L[i, i]
        for i in range(5, -1, -1):
            t = y[i]
            for m in range(i + 1, 6):
                t -= L[m, i] * vdot[m]
            vdot[i] = t / L[i, i]
        for i in range(6):
            mu[0, i] = vdot[i]
    # y = D⁻¹ ŷ and Uᵀ x = y from the base
    for b in range(1, nb):
        k = col0 + b - 1
        p = parent[b]
        xk = yhat[k] / d[k]
        for i in range(6):
            xk -= psi_bar[b, i] * mu[p, i]
        vdot[k] = xk
        for i in range(6):
            mu[b, i] = mu[p, i] + S[i, k] * xk
    return 0
