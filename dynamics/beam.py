"""Euler–Bernoulli beam links by assumed modes: shape functions, quadrature, stiffness.

A flexible link is a uniform, initially straight beam along the x axis of its body
frame B, clamped at B's origin (the joint) and free at ``x = L``. Its small elastic
displacement field, in B, is the sum of assumed modes (Cyril et al. 1998, seed 002 §2;
MBDYN flexible bodies, Quiocho et al., seed 004 eqs. 5–8)::

    u_y(x) = Σ_k φ_k(x) η_y,k      (bending in the x–y plane, stiffness EI_y)
    u_z(x) = Σ_k φ_k(x) η_z,k      (bending in the x–z plane, stiffness EI_z)
    ϑ(x)   = Σ_k χ_k(x) η_t,k      (torsion about x, stiffness GJ)

with φ_k the clamped–free eigenfunctions (``cos βL cosh βL = −1``, βL = 1.8751,
4.6941, 7.8548, …; normalized to ``∫₀ᴸ φ² dx = L``) or, for convergence studies, the
admissible polynomials ``(x/L)^(k+1)``, and ``χ_k = sin((2k − 1)π x / 2L)``. The
elastic coordinates η are ordered ``[η_y (n_y), η_z (n_z), η_t (n_t)]``.

Sign convention of the clamped–free shapes (k = 1, 2, …)::

    φ_k(x) = cosh β_k x − cos β_k x − σ_k (sinh β_k x − sin β_k x),
    σ_k = (cosh β_k L + cos β_k L) / (sinh β_k L + sin β_k L),     φ_k(L) = 2(−1)^(k+1)

(+2, −2, +2, …: positive curvature at the root, φ_k''(0) = 2β_k²). A positive η_y,1
deflects the tip by +2 η_y,1 along body y; a reference that takes every φ_k(L) > 0 has
the even modes' coordinates of the opposite sign (their momenta and tip motions too).
The torsion shapes have χ_k(L) = (−1)^(k+1).

Convergence, by basis: with the clamped–free shapes (the default) a bare clamped–free
beam's N modes are exact (its eigenfunctions); a beam carrying a tip body or on a free
joint converges from above (Rayleigh–Ritz): with a 1000 kg point mass on a 10 m, 500 kg
beam, modes 1–2 are within 0.1 % at N = 6 (0.0075 %, 0.082 %; mode 3 0.29 %), since the
shapes have no shear at the tip. With the polynomials, a clamped–free beam's 2nd and 3rd
frequencies are 0.56 % and 2.7 % high at N = 4 and within 0.5 % from N = 6; with the tip
mass they converge faster (mode 1 exact to round-off at N = 6). Checked in
``tests/dynamics/test_flexible.py`` and ``tests/dynamics/test_modal.py``.

Mass is discretized by Gauss–Legendre quadrature: element i at station ``x_i`` with
mass ``m_i = ρA w_i`` and axial (polar) inertia ``J_i = ρJ w_i`` about the beam axis.
Each element moves as a point with the deflection at its station and spins about the
beam axis with the torsion there; rotary inertia of the sections in bending is
neglected (Euler–Bernoulli). Integrals of the kinetic energy are thus Gauss sums,
exact for the polynomial parts and converged to round-off for the eigenfunctions with
the default number of points. Strain energy ``½ ηᵀ K η`` with
``K = blockdiag(EI_y ∫φ''φ'', EI_z ∫φ''φ'', GJ ∫χ'χ')``, by the same quadrature.

The free end carries the children of the link: the tip frame T is B translated to
``(L, u_y(L), u_z(L))`` and turned by the tip slopes, ``R_BT = Rz(ψ_z) Ry(ψ_y) Rx(ψ_x)``
with ``ψ_z = u_y'(L)``, ``ψ_y = −u_z'(L)``, ``ψ_x = ϑ(L)``. To first order in η this is
the linear beam's tip rotation; the finite sequence makes the tip a chain of one
translation and three rotations about body-fixed axes, so the kinematics (and hence the
equations of motion, :mod:`dynamics.flexible`) are exact for the model as stated.

No I/O, clock or globals.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from errors import ModelError

__all__ = [
    "BeamLink",
    "BeamTables",
    "SHAPES",
    "clamped_free_beta_L",
    "clamped_free_frequencies",
    "clamped_free_torsion_frequencies",
    "shape_functions",
    "torsion_functions",
    "beam_tables",
    "tip_transform",
]

Array = NDArray[np.float64]

SHAPES = ("clamped_free", "polynomial")

_MAX_MODES = 12


def clamped_free_beta_L(k: int) -> float:
    """The k-th root (k = 1, 2, …) of ``cos βL cosh βL = −1``: 1.8751, 4.6941, 7.8548, …

    Found by Brent's method in ``((k − 1)π, kπ)`` on ``cos x + 1/cosh x`` (the same
    roots, well scaled).

    Raises
    ------
    ModelError
        If ``k`` is not a positive integer.
    """
    if not isinstance(k, (int, np.integer)) or k < 1:
        raise ModelError(f"mode number k must be a positive integer, got {k!r}")
    f = lambda x: math.cos(x) + 1.0 / math.cosh(x)  # noqa: E731
    from scipy.optimize import brentq  # here: importing scipy.optimize costs ~0.2 s, and few callers need it

    return float(brentq(f, (k - 1) * math.pi + 1e-9, k * math.pi - 1e-9, xtol=1e-15, rtol=1e-15, maxiter=200))


def clamped_free_frequencies(L: float, EI: float, rho_A: float, n: int) -> Array:
    """First n bending frequencies of a clamped–free uniform beam, ``(βL)² √(EI / (ρA L⁴)) / 2π``.

    Parameters
    ----------
    L : float
        Length. [m]
    EI : float
        Bending stiffness. [N·m²]
    rho_A : float
        Mass per length. [kg/m]
    n : int

    Returns
    -------
    f : ndarray, shape (n,)
        [Hz]
    """
    bl = np.array([clamped_free_beta_L(k) for k in range(1, n + 1)])
    return bl ** 2 * math.sqrt(EI / (rho_A * L ** 4)) / (2.0 * math.pi)


def clamped_free_torsion_frequencies(L: float, GJ: float, rho_J: float, n: int) -> Array:
    """First n torsion frequencies of a clamped–free uniform shaft, ``(2k − 1)π/(2L) √(GJ/ρJ) / 2π`` [Hz]."""
    k = np.arange(1, n + 1)
    return (2 * k - 1) * math.pi / (2.0 * L) * math.sqrt(GJ / rho_J) / (2.0 * math.pi)  # type: ignore[return-value]  # numpy stubs: int64 times float, floating out


def _positive(name: str, val: float, allow_zero: bool = False) -> float:
    v = float(val)
    if not math.isfinite(v) or v < 0.0 or (v == 0.0 and not allow_zero):
        raise ModelError(f"beam {name}: must be {'non-negative' if allow_zero else 'positive'} and finite, got {val!r}")
    return v


@dataclass(frozen=True, slots=True, eq=False)
class BeamLink:
    """A uniform Euler–Bernoulli beam link along body x, clamped at the body origin.

    Attributes
    ----------
    length : float
        L. [m]
    mass_per_length : float
        ρA. [kg/m]
    EI_y : float
        Bending stiffness for deflection along body y (bending in the x–y plane). [N·m²]
    EI_z : float or None
        The same for deflection along body z; None: equal to ``EI_y`` (round section).
    modes_y, modes_z, modes_torsion : int
        Number of assumed modes in each field (0 … 12).
    GJ : float
        Torsional stiffness; needed (> 0) only with torsion modes. [N·m²]
    polar_mass_per_length : float
        ρJ, the mass moment of inertia per length about the beam axis (thin tube of
        mean radius r: ρA r²); needed (> 0) with torsion modes. [kg·m]
    damping_ratio : float
        Structural damping: modal damping ratio ζ of the clamped–free modes, ≥ 0.
    shape : {"clamped_free", "polynomial"}
        Bending shape functions: the clamped–free eigenfunctions, or the admissible
        polynomials ``(x/L)^(k+1)`` (Rayleigh–Ritz; for convergence studies).
    n_quad : int
        Gauss–Legendre points along the beam; 0 chooses ``max(12, 4 n_max + 8)``.

    Raises
    ------
    ModelError
        On a non-positive length, mass or stiffness, mode counts out of range, or an
        unknown shape (the field and value are named).
    """

    length: float
    mass_per_length: float
    EI_y: float
    EI_z: float | None = None
    modes_y: int = 2
    modes_z: int = 0
    modes_torsion: int = 0
    GJ: float = 0.0
    polar_mass_per_length: float = 0.0
    damping_ratio: float = 0.0
    shape: str = "clamped_free"
    n_quad: int = 0

    def __post_init__(self) -> None:
        _positive("length", self.length)
        _positive("mass_per_length", self.mass_per_length)
        _positive("EI_y", self.EI_y)
        if self.EI_z is not None:
            _positive("EI_z", self.EI_z)
        for name in ("modes_y", "modes_z", "modes_torsion"):
            k = getattr(self, name)
            if not isinstance(k, (int, np.integer)) or not 0 <= k <= _MAX_MODES:
                raise ModelError(f"beam {name}: must be an integer in [0, {_MAX_MODES}], got {k!r}")
        _positive("GJ", self.GJ, allow_zero=True)
        _positive("polar_mass_per_length", self.polar_mass_per_length, allow_zero=True)
        if self.modes_torsion > 0 and not (self.GJ > 0.0 and self.polar_mass_per_length > 0.0):
            raise ModelError(
                f"beam: torsion modes need GJ > 0 and polar_mass_per_length > 0, got GJ={self.GJ!r}, "
                f"polar_mass_per_length={self.polar_mass_per_length!r}"
            )
        _positive("damping_ratio", self.damping_ratio, allow_zero=True)
        if self.shape not in SHAPES:
            raise ModelError(f"beam shape: {self.shape!r} not one of {SHAPES}")
        if not isinstance(self.n_quad, (int, np.integer)) or self.n_quad < 0 or 0 < self.n_quad < 2:
            raise ModelError(f"beam n_quad: must be 0 (automatic) or an integer >= 2, got {self.n_quad!r}")

    @property
    def n_modes(self) -> int:
        """Number of elastic coordinates ``n_y + n_z + n_t``."""
        return int(self.modes_y + self.modes_z + self.modes_torsion)

    @property
    def mass(self) -> float:
        """ρA L. [kg]"""
        return float(self.mass_per_length * self.length)

    @property
    def EI_z_eff(self) -> float:
        """EI_z, or EI_y when not given. [N·m²]"""
        return float(self.EI_y if self.EI_z is None else self.EI_z)

    @property
    def quad_points(self) -> int:
        """Number of Gauss–Legendre points used."""
        if self.n_quad:
            return int(self.n_quad)
        return max(12, 4 * max(self.modes_y, self.modes_z, self.modes_torsion) + 8)


def _bending_eigen(x: Array, L: float, n: int) -> tuple[Array, Array, Array]:
    """Clamped–free eigenfunctions φ, φ', φ'' at x (k, m), in an overflow-free form.

    ``φ = cosh βx − cos βx − σ (sinh βx − sin βx)``, ``σ = (sinh βL − sin βL)/(cosh βL + cos βL)``.
    With ``a = βx``, ``cosh a − σ sinh a = ½(1 − σ)eᵃ + ½(1 + σ)e⁻ᵃ`` and
    ``1 − σ = (e^−βL + cos βL + sin βL)/(cosh βL + cos βL)``, so the growing exponential
    appears only as ``e^(a − βL)`` (no cancellation for large βL).
    """
    phi = np.empty((n, x.size))
    d1 = np.empty_like(phi)
    d2 = np.empty_like(phi)
    for k in range(n):
        bl = clamped_free_beta_L(k + 1)
        b = bl / L
        a = b * x
        den = 1.0 + math.exp(-2.0 * bl) + 2.0 * math.cos(bl) * math.exp(-bl)  # 2 e^-βL (cosh βL + cos βL)
        one_minus = 2.0 * (math.exp(-2.0 * bl) + (math.cos(bl) + math.sin(bl)) * math.exp(-bl)) / den
        sigma = 1.0 - one_minus
        gp = 0.5 * one_minus * np.exp(a)  # ½(1 − σ) e^a, bounded: (1 − σ) ~ e^−βL
        gm = 0.5 * (1.0 + sigma) * np.exp(-a)
        ch_s = gp + gm          # cosh a − σ sinh a
        sh_s = gp - gm          # sinh a − σ cosh a
        phi[k] = ch_s - np.cos(a) + sigma * np.sin(a)
        d1[k] = b * (sh_s + np.sin(a) + sigma * np.cos(a))
        d2[k] = b * b * (ch_s + np.cos(a) - sigma * np.sin(a))
    return phi, d1, d2


def shape_functions(x: Array, L: float, n: int, shape: str = "clamped_free") -> tuple[Array, Array, Array]:
    """Bending shape functions and their first two derivatives at stations x.

    Parameters
    ----------
    x : ndarray, shape (m,)
        Stations from the clamped end. [m]
    L : float
        Length. [m]
    n : int
        Number of functions.
    shape : {"clamped_free", "polynomial"}

    Returns
    -------
    phi, dphi, ddphi : ndarray, shape (n, m)
        φ_k(x) [-], φ_k'(x) [1/m], φ_k''(x) [1/m²]. Clamped–free: ``∫₀ᴸ φ_k² dx = L``,
        ``φ_k(L) = 2(−1)^(k+1)`` (module docstring); polynomial: ``φ_k(L) = 1``.

    Raises
    ------
    ModelError
        On an unknown shape.
    """
    xa = np.asarray(x, dtype=np.float64).reshape(-1)
    if shape == "clamped_free":
        return _bending_eigen(xa, L, n)
    if shape == "polynomial":
        s = xa / L
        k = np.arange(2, n + 2)[:, None].astype(np.float64)
        phi = s[None, :] ** k
        d1 = k * s[None, :] ** (k - 1) / L
        d2 = k * (k - 1) * s[None, :] ** (k - 2) / L ** 2
        return phi, d1, d2
    raise ModelError(f"beam shape: {shape!r} not one of {SHAPES}")


def torsion_functions(x: Array, L: float, n: int) -> tuple[Array, Array]:
    """Clamped–free torsion modes ``χ_k = sin((2k − 1)π x / 2L)`` and χ_k' at x, each (n, m)."""
    xa = np.asarray(x, dtype=np.float64).reshape(-1)
    c = (2 * np.arange(1, n + 1) - 1)[:, None] * math.pi / (2.0 * L)
    return np.sin(c * xa[None, :]), c * np.cos(c * xa[None, :])  # type: ignore[return-value]  # numpy stubs: float64 in, floating out


@dataclass(frozen=True, slots=True, eq=False)
class BeamTables:
    """Everything constant about one beam link, precomputed (arrays read-only).

    Attributes
    ----------
    ne : int
        Number of elastic coordinates.
    x : ndarray, shape (m,)
        Element stations. [m]
    m : ndarray, shape (m,)
        Element masses ``ρA w_i``. [kg]
    J : ndarray, shape (m,)
        Element axial inertias ``ρJ w_i``. [kg·m²]
    Phi_t : ndarray, shape (m, 3, ne)
        Element displacement per unit elastic coordinate, in B: ``ρ_i = (x_i, 0, 0) + Phi_t[i] η``.
    Phi_w : ndarray, shape (m, ne)
        Element torsion angle per unit elastic coordinate (about B's x).
    tip_u : ndarray, shape (3, ne)
        Tip displacement per unit η, in B.
    tip_psi : ndarray, shape (3, ne)
        Tip slope angles (ψ_x, ψ_y, ψ_z) per unit η.
    K : ndarray, shape (ne, ne)
        Stiffness. [N/m, N·m/rad as fits the coordinates]
    D : ndarray, shape (ne, ne)
        Structural damping (modal ratio ζ of the clamped–free modes). [N·s/m …]
    M_ee0 : ndarray, shape (ne, ne)
        Elastic mass matrix of the clamped beam, ``M_pt + M_w``.
    m_tot, J_tot, sx, sxx : float
        ``Σ m_i``, ``Σ J_i``, ``Σ m_i x_i``, ``Σ m_i x_i²``. [kg, kg·m², kg·m, kg·m²]
    C1 : ndarray, shape (3, ne)
        ``Σ m_i Φ_i``: first moment per unit η (``Phi_t[i]`` written Φ_i). [kg]
    Sx : ndarray, shape (3, ne)
        ``Σ m_i x_i Φ_i``. [kg·m]
    Q2 : ndarray, shape (3, ne, 3, ne)
        ``Σ m_i Φ_i[a, k] Φ_i[b, l]``. [kg]
    G : ndarray, shape (ne, ne, 3)
        ``G[l, k] = Σ m_i Φ_i[:, l] × Φ_i[:, k]``. [kg]
    Jw : ndarray, shape (ne,)
        ``Σ J_i Phi_w[i]``. [kg·m²]
    M_pt, M_w : ndarray, shape (ne, ne)
        ``Σ m_i Φ_iᵀ Φ_i`` and ``Σ J_i Phi_w[i] Phi_w[i]ᵀ``.

    Notes
    -----
    The sums over the elements are the beam's inertia invariants (the modal integrals of
    the floating-frame formulation; Shabana, "Dynamics of Multibody Systems", 2005,
    ch. 5): with them the beam's mass properties and inertia forces at any η cost a few
    small products, independent of the number of quadrature points.
    """

    ne: int
    x: Array
    m: Array
    J: Array
    Phi_t: Array
    Phi_w: Array
    tip_u: Array
    tip_psi: Array
    K: Array
    D: Array
    M_ee0: Array
    m_tot: float
    J_tot: float
    sx: float
    sxx: float
    C1: Array
    Sx: Array
    Q2: Array
    G: Array
    Jw: Array
    M_pt: Array
    M_w: Array


def beam_tables(beam: BeamLink) -> BeamTables:
    """Precompute a beam's quadrature elements, mode tables, stiffness and damping.

    Parameters
    ----------
    beam : BeamLink

    Returns
    -------
    BeamTables

    Notes
    -----
    The damping matrix is ``D = M_ee0 Φ diag(2ζω) Φᵀ M_ee0`` with ``(ω², Φ)`` the
    mass-normalized eigenpairs of ``(K, M_ee0)``, the clamped beam: each clamped–free
    mode gets the ratio ζ.
    """
    L = float(beam.length)
    ny, nz, nt = int(beam.modes_y), int(beam.modes_z), int(beam.modes_torsion)
    ne = ny + nz + nt
    xg, wg = np.polynomial.legendre.leggauss(beam.quad_points)
    x = 0.5 * L * (xg + 1.0)
    w = 0.5 * L * wg
    m = beam.mass_per_length * w
    J = beam.polar_mass_per_length * w
    nb = max(ny, nz)
    xe = np.concatenate([x, [L]])
    if nb:
        phi, d1, d2 = shape_functions(xe, L, nb, beam.shape)
    else:
        phi = d1 = d2 = np.zeros((0, xe.size))
    chi, dchi = torsion_functions(xe, L, nt) if nt else (np.zeros((0, xe.size)), np.zeros((0, xe.size)))
    mq = x.size
    Phi_t = np.zeros((mq, 3, ne))
    Phi_w = np.zeros((mq, ne))
    tip_u = np.zeros((3, ne))
    tip_psi = np.zeros((3, ne))
    K = np.zeros((ne, ne))
    sy = slice(0, ny)
    sz = slice(ny, ny + nz)
    st = slice(ny + nz, ne)
    Phi_t[:, 1, sy] = phi[:ny, :mq].T
    Phi_t[:, 2, sz] = phi[:nz, :mq].T
    Phi_w[:, st] = chi[:, :mq].T
    tip_u[1, sy] = phi[:ny, mq]
    tip_u[2, sz] = phi[:nz, mq]
    tip_psi[2, sy] = d1[:ny, mq]       # ψ_z = u_y'(L)
    tip_psi[1, sz] = -d1[:nz, mq]      # ψ_y = −u_z'(L)
    tip_psi[0, st] = chi[:, mq]        # ψ_x = ϑ(L)
    # Strain energy by quadrature (exact for the polynomials, converged for the eigenfunctions).
    K[sy, sy] = beam.EI_y * (d2[:ny, :mq] * w) @ d2[:ny, :mq].T
    K[sz, sz] = beam.EI_z_eff * (d2[:nz, :mq] * w) @ d2[:nz, :mq].T
    K[st, st] = beam.GJ * (dchi[:, :mq] * w) @ dchi[:, :mq].T
    K = 0.5 * (K + K.T)
    M_pt = np.einsum("i,iak,ial->kl", m, Phi_t, Phi_t)
    M_w = np.einsum("i,ik,il->kl", J, Phi_w, Phi_w)
    M_pt = 0.5 * (M_pt + M_pt.T)
    M_w = 0.5 * (M_w + M_w.T)
    M_ee0 = M_pt + M_w
    D = np.zeros((ne, ne))
    if ne and beam.damping_ratio > 0.0:
        import scipy.linalg

        lam, V = scipy.linalg.eigh(K, M_ee0)
        om = np.sqrt(np.maximum(lam, 0.0))
        MV = M_ee0 @ V
        D = MV @ np.diag(2.0 * beam.damping_ratio * om) @ MV.T
        D = 0.5 * (D + D.T)
    C1 = np.einsum("i,iak->ak", m, Phi_t)
    Sx = np.einsum("i,iak->ak", m * x, Phi_t)
    Q2 = np.einsum("i,iak,ibl->akbl", m, Phi_t, Phi_t)
    P = np.moveaxis(Phi_t, 1, 2)  # (m, ne, 3): P[i, k] = Φ_i[:, k]
    G = np.einsum("i,ilkc->lkc", m, np.cross(P[:, :, None, :], P[:, None, :, :]))
    Jw = J @ Phi_w
    arrays = (x, m, J, Phi_t, Phi_w, tip_u, tip_psi, K, D, M_ee0)
    for a in arrays + (C1, Sx, Q2, G, Jw, M_pt, M_w):
        a.setflags(write=False)
    return BeamTables(ne, *arrays, float(m.sum()), float(J.sum()), float(m @ x), float(m @ (x * x)),
                      C1, Sx, Q2, G, Jw, M_pt, M_w)


def _rot(axis: int, a: float) -> Array:
    c, s = math.cos(a), math.sin(a)
    if axis == 0:
        return np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])
    if axis == 1:
        return np.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def tip_transform(tables: BeamTables, L: float, eta: Array) -> tuple[Array, Array, Array, Array]:
    """Tip frame of a deformed beam in its body frame B, and its intermediate rotations.

    Parameters
    ----------
    tables : BeamTables
    L : float
        Length. [m]
    eta : ndarray, shape (ne,)
        Elastic coordinates.

    Returns
    -------
    p_BoTo_B : ndarray, shape (3,)
        Tip position ``(L, u_y(L), u_z(L))``. [m]
    R_BT1, R_BT2, R_BT : ndarray, shape (3, 3)
        ``Rz(ψ_z)``, ``Rz(ψ_z) Ry(ψ_y)``, ``Rz(ψ_z) Ry(ψ_y) Rx(ψ_x)`` (module docstring).
    """
    u = tables.tip_u @ eta
    psi = tables.tip_psi @ eta
    p = np.array([L, u[1], u[2]])
    R1 = _rot(2, float(psi[2]))
    R2 = R1 @ _rot(1, float(psi[1]))
    R3 = R2 @ _rot(0, float(psi[0]))
    return p, R1, R2, R3
