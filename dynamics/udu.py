"""Saha's UDU^T decomposition of the generalized inertia matrix and the O(n) solve.

Saha, "A Decomposition of the Manipulator Inertia Matrix", IEEE T-RA 13(2) 1997
(seed 001). The GIM is factored ``M = U D Uᵀ`` (U unit upper triangular, D diagonal)
by reverse Gaussian elimination (RGE, seed 001 Appendix eqs. 20–24), starting from the
last link. Done symbolically the RGE becomes a recursion over the links (eqs. 24–27):

- ``Î_b = M_b + Σ_children Ī_c`` (articulated-body inertia of b, eq. 27),
- ``ψ̂_k = Î_b p_k``, ``m̂_k = p_kᵀ ψ̂_k`` (= ``D_kk``), ``ψ̄_k = ψ̂_k / m̂_k`` (eq. 25),
- ``Ī_b = Î_b − ψ̂_k ψ̄_kᵀ`` (eq. 26),
- ``U_jk = p_jᵀ ψ̄_k`` for every column j on the path from k to the base (eq. 24).

The OCR of eqs. (16)–(27) is garbled (the symbols are lost); the recursion above is
re-derived from the RGE definition in the text: the reduced matrix after eliminating
the columns beyond k is the GIM of the chain whose outboard part is replaced by its
articulated inertia. Here all spatial quantities (``p_k`` = joint motion columns,
``M_b`` = body spatial inertias) are referred to one point in one frame (the base
origin in W, see :mod:`dynamics.chain`), so Saha's twist-propagation matrices
``A_ij`` are the identity. A free base has six columns ``p = I₆`` on body 0; its 6×6
block ``Î_0`` (the articulated inertia of the whole system at the base) is solved
densely in :func:`saha_solve` and factored by the dense RGE (:func:`udu_decompose`)
when explicit factors are asked for (:func:`saha_udu`).

The solve of ``M x = φ`` (eqs. 15–19) is three recursions: ``U ŷ = φ`` from the tip
(with ``η_b = Σ_{descendants k} ψ̄_k ŷ_k``, eq. 17), ``y = D⁻¹ ŷ``, and ``Uᵀ x = y``
from the base (with ``μ_b = Σ_{ancestors j} p_j x_j``, eqs. 18–19): O(n).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from errors import ShapeError, SingularityError

__all__ = ["SahaFactor", "saha_factor", "saha_solve", "saha_udu", "udu_decompose", "spd_solve"]

Array = NDArray[np.float64]

_PIVOT_RTOL = 1e-13


@dataclass(slots=True)
class SahaFactor:
    """The recursive UDU^T factors of one configuration.

    Attributes
    ----------
    psi_bar : ndarray, shape (nb, 6)
        ``ψ̄_k`` of the joint of each body (row 0 unused); ``U_jk = p_jᵀ ψ̄_k``.
    d : ndarray, shape (nv,)
        Diagonal of D for the joint columns (``m̂_k``); the first six (free base) are
        filled by :func:`saha_udu`.
    I_hat0 : ndarray, shape (6, 6)
        Articulated inertia of the base (the whole system seen at the base).
    I_hat0_inv : ndarray, shape (6, 6) or (0, 0)
        Its inverse: the base block's substitutions ``U0 D0 U0ᵀ x0 = r`` in one product.
    floating : bool
    """

    psi_bar: Array
    d: Array
    I_hat0: Array
    I_hat0_inv: Array
    floating: bool


def udu_decompose(A: ArrayLike, name: str = "M") -> tuple[Array, Array]:
    """``A = U diag(d) Uᵀ`` by reverse Gaussian elimination (seed 001 Appendix, eqs. 20–24).

    Annihilates from the last column (the elementary upper triangular matrices of
    eq. 20), which yields a unit *upper* triangular U, the same factorization as
    ``pinocchio.cholesky.decompose``.

    Parameters
    ----------
    A : array_like, shape (m, m)
        Symmetric positive definite.
    name : str
        Name of the matrix, for messages.

    Returns
    -------
    U : ndarray, shape (m, m)
        Unit upper triangular.
    d : ndarray, shape (m,)
        Positive diagonal of D.

    Raises
    ------
    ShapeError
        If ``A`` is not square and finite.
    SingularityError
        If a pivot is not positive (A not positive definite).
    """
    W = np.array(A, dtype=np.float64)
    if W.ndim != 2 or W.shape[0] != W.shape[1] or not np.all(np.isfinite(W)):
        raise ShapeError(f"{name}: expected a finite square matrix, got shape {W.shape}")
    # The RGE of A is the ordinary (forward) elimination of the index-reversed matrix:
    # reverse(A) = L D Lᵀ  ⇔  A = U D' Uᵀ with U = reverse(L), D' = reverse(D).
    # LAPACK's Cholesky does that elimination: C = L √D.
    try:
        C = np.linalg.cholesky(W[::-1, ::-1])
    except np.linalg.LinAlgError as err:
        raise SingularityError(f"{name}: not positive definite ({err})") from err
    c = np.diag(C)
    scale = float(np.abs(np.diag(W)).max()) if W.size else 1.0
    if W.size and not c.min() ** 2 > _PIVOT_RTOL * scale:
        k = W.shape[0] - 1 - int(np.argmin(c))
        raise SingularityError(f"{name}: pivot {k} is {c.min() ** 2} (not positive definite)")
    L = C / c[None, :]
    return np.ascontiguousarray(L[::-1, ::-1]), (c * c)[::-1].copy()


def spd_solve(A: ArrayLike, b: ArrayLike, name: str = "M") -> Array:
    """Solve ``A x = b`` for symmetric positive definite A (Cholesky test, then LAPACK solve).

    Raises
    ------
    SingularityError
        If ``A`` is not (numerically) positive definite.
    """
    A, b = np.asarray(A, dtype=np.float64), np.asarray(b, dtype=np.float64)
    try:
        np.linalg.cholesky(A)  # the positive-definiteness test
    except np.linalg.LinAlgError as err:
        raise SingularityError(f"{name}: not positive definite ({err})") from err
    return np.linalg.solve(A, b)  # LAPACK gesv: cheaper from Python than two triangular solves


def saha_factor(
    parent: Sequence[int],
    v_index: NDArray[np.int64],
    S: Array,
    I_ref: Array,
    floating: bool,
    names: Sequence[str] = (),
) -> SahaFactor:
    """Recursive UDU^T factorization of the GIM (seed 001 eqs. 24–27, re-derived).

    Parameters
    ----------
    parent : sequence of int, (nb,)
        Parent body, ``parent[b] < b``, -1 for the base.
    v_index : ndarray of int, (nb,)
        Column of each body's joint in v (-1 for the base).
    S : ndarray, shape (6, nv)
        Motion columns referred to one point in one frame (base block = I₆ if floating).
    I_ref : ndarray, shape (nb, 6, 6)
        Body spatial inertias referred to the same point and frame.
    floating : bool
        Whether the base has the six columns 0..5.
    names : sequence of str
        Body names, for messages.

    Returns
    -------
    SahaFactor

    Raises
    ------
    SingularityError
        If an articulated pivot ``m̂_k`` is not positive (a degenerate body or axis).
    """
    nb = len(parent)
    nv = S.shape[1]
    Ihat = I_ref.copy()
    psi_bar = np.zeros((nb, 6))
    d = np.zeros(nv)
    scales = np.einsum("bii->b", I_ref)
    for b in range(nb - 1, 0, -1):
        k = v_index[b]
        s = S[:, k]
        psi = Ihat[b] @ s
        m_hat = float(s @ psi)
        if not m_hat > _PIVOT_RTOL * scales[b]:
            who = names[b] if names else str(b)
            raise SingularityError(f"body {who!r}: articulated pivot m_hat = {m_hat} is not positive")
        d[k] = m_hat
        pb = psi / m_hat
        psi_bar[b] = pb
        Ihat[parent[b]] += Ihat[b] - psi[:, None] * pb[None, :]
    if floating:
        try:
            np.linalg.cholesky(Ihat[0])
        except np.linalg.LinAlgError as err:
            raise SingularityError(f"articulated inertia of the base: not positive definite ({err})") from err
        I_hat0_inv = np.linalg.inv(Ihat[0])
    else:
        I_hat0_inv = np.zeros((0, 0))
    return SahaFactor(psi_bar=psi_bar, d=d, I_hat0=Ihat[0], I_hat0_inv=I_hat0_inv, floating=floating)


def saha_solve(
    factor: SahaFactor, parent: Sequence[int], v_index: NDArray[np.int64], S: Array, phi: ArrayLike
) -> Array:
    """Solve ``M x = φ`` with the recursive factors, O(n) (seed 001 eqs. 15–19).

    Parameters
    ----------
    factor : SahaFactor
        From :func:`saha_factor` for the same configuration.
    parent, v_index, S
        As for :func:`saha_factor`.
    phi : array_like, shape (nv,)

    Returns
    -------
    x : ndarray, shape (nv,)
    """
    nb = len(parent)
    phi = np.asarray(phi, dtype=np.float64)
    nv = phi.shape[0]
    x = np.empty(nv)
    yhat = np.empty(nv)
    eta = np.zeros((nb, 6))
    pbar = factor.psi_bar
    # 1) U ŷ = φ from the tip (eqs. 16–17).
    for b in range(nb - 1, 0, -1):
        k = v_index[b]
        yk = phi[k] - S[:, k] @ eta[b]
        yhat[k] = yk
        eta[parent[b]] += eta[b] + pbar[b] * yk
    mu = np.zeros((nb, 6))
    if factor.floating:
        # Base block: U0 ŷ0 = φ0 − η0, y0 = D0⁻¹ ŷ0, U0ᵀ x0 = y0, as one product.
        x[:6] = factor.I_hat0_inv @ (phi[:6] - eta[0])
        mu[0] = x[:6]
    # 2) y = D⁻¹ ŷ and 3) Uᵀ x = y from the base (eqs. 18–19).
    for b in range(1, nb):
        k = v_index[b]
        xk = yhat[k] / factor.d[k] - pbar[b] @ mu[parent[b]]
        x[k] = xk
        mu[b] = mu[parent[b]] + S[:, k] * xk
    return x


def saha_udu(factor: SahaFactor, parent: Sequence[int], v_index: NDArray[np.int64], S: Array) -> tuple[Array, Array]:
    """The explicit factors ``U`` (nv, nv) and ``d`` (nv,) with ``M = U diag(d) Uᵀ``.

    ``U_jk = p_jᵀ ψ̄_k`` for j on the path from k to the base (seed 001 eq. 24); the
    base block from :func:`udu_decompose`. O(n²) to fill; for checking and analysis.
    """
    nb = len(parent)
    nv = S.shape[1]
    U = np.eye(nv)
    d = factor.d.copy()
    if factor.floating:
        U[:6, :6], d[:6] = udu_decompose(factor.I_hat0, "articulated inertia of the base")
    for b in range(1, nb):
        k = v_index[b]
        a = parent[b]
        while a > 0:
            j = v_index[a]
            U[j, k] = S[:, j] @ factor.psi_bar[b]
            a = parent[a]
        if factor.floating:
            U[:6, k] = factor.psi_bar[b]  # base columns are the unit vectors
    return U, d
