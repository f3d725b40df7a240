"""Arm flexibility (SVDS seed 003 section 3, App. B; routine RMSFLX) and linearized modes.

Deflections and loads are spatial 6-vectors in the SVDS order: a load ``P = [M; F]``
(moment, force) at a point and the deflection ``δ = [δψ; δ]`` (small rotation,
translation) of that point, both expressed in one frame (O for the arm quantities).

- :func:`beam_compliance` — the compliance of one cantilevered beam at its tip with the
  sparsity of B-7 (seven independent terms; γ26 = γ62 < 0).
- :func:`arm_flexibility` — ``γ = Σ_i L_in γ_i L_inᵀ`` (B-6): the beams' (and joints')
  compliances carried to the arm tip.
- :func:`joint_flexibility` — ``γ_J = J^-1 γ J^-T`` (3-4); :func:`passive_torques`
  ``τ_F = −γ_J^-1 δθ`` (3-6); :func:`servo_flexibility_terms` the active per-servo terms
  ``γ_i^e = γ_J,ii − γ21ᵀ (γ22)^-1 γ21`` (3-7).
- :func:`first_mode_two_body` and :func:`first_mode_chain` — the first elastic mode of
  the linearized orbiter–arm–payload system (massless arm) and of the multibody arm
  with joint springs, for the checks against the published bands
  (``dynamics/data/README.md``).

The SRMS beam and joint stiffnesses are not published: the defaults here are
**ASSUMED** (see :data:`ASSUMED_BEAMS`, :data:`ASSUMED_JOINT_STIFFNESS`) and were chosen
so that the first modes fall inside the published bands (tests/dynamics/test_flexibility.py).

No I/O, clock or globals.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.linalg
from numpy.typing import ArrayLike, NDArray

from dynamics import spatial as sp
from dynamics.rms import rms_jacobian_rows
from errors import ModelError, ShapeError, SingularityError

__all__ = [
    "Beam",
    "ASSUMED_BEAMS",
    "ASSUMED_JOINT_STIFFNESS",
    "beam_compliance",
    "shift_matrix",
    "beam_frame",
    "arm_flexibility",
    "beams_flexibility_rows",
    "beams_terms",
    "gamma_rows",
    "joint_flexibility",
    "passive_torques",
    "servo_flexibility_terms",
    "modes_two_body",
    "first_mode_two_body",
    "first_mode_chain",
]

Array = NDArray[np.float64]


@dataclass(frozen=True)
class Beam:
    """One of the SVDS's five arm beams (section 1), a uniform cantilever.

    Attributes
    ----------
    name : str
    root, tip : int
        Stations of the beam: index into the points ``[joint 1..6, Eo]`` (0..6) of
        :class:`dynamics.rms.RmsPose` (joint points, then the point of resolution).
    EI : float
        Bending stiffness (both axes). [N·m²]
    GJ : float
        Torsional stiffness. [N·m²]
    """

    name: str
    root: int
    tip: int
    EI: float
    GJ: float


#: The five beams of SVDS section 1 with **ASSUMED** stiffnesses: (1) longeron and
#: shoulder to the shoulder pitch joint, (2) upper arm, (3) lower arm (graphite-epoxy
#: booms of 0.33 m diameter, EI of order 1e7 N·m²), (4) wrist, (5) hand to the point of
#: resolution. Stations: 0 shoulder yaw joint, 1 shoulder pitch, 2 elbow, 3 wrist
#: pitch, 4 wrist yaw, 5 wrist roll, 6 point of resolution.
ASSUMED_BEAMS: tuple[Beam, ...] = (
    Beam("longeron_shoulder", 0, 1, 2.0e7, 2.0e7),
    Beam("upper_arm", 1, 2, 1.2e7, 1.0e7),
    Beam("lower_arm", 2, 3, 1.2e7, 1.0e7),
    Beam("wrist", 3, 4, 5.0e6, 5.0e6),
    Beam("hand", 4, 6, 5.0e6, 5.0e6),
)

#: Joint (gearbox) stiffnesses, SVDS order. [N·m/rad] — **ASSUMED** (not published);
#: chosen so that the unloaded multibody arm (joint flexibility, rigid links) has its first
#: mode in 0.35–0.71 Hz and the massless arm with the ~29,500 kg design payload in
#: 0.027–0.047 Hz (tests/dynamics/test_flexibility.py).
ASSUMED_JOINT_STIFFNESS = np.array([3.0e5, 3.0e5, 2.0e5, 1.0e5, 1.0e5, 1.0e5])


def beam_compliance(L: ArrayLike, EI: ArrayLike, GJ: ArrayLike) -> Array:
    """Tip compliance of a uniform cantilever along its x axis, the form of SVDS B-7.

    Euler–Bernoulli: ``γ11 = L/GJ`` (torsion), ``γ22 = γ33 = L/EI``, ``γ55 = γ66 = L³/3EI``,
    ``γ35 = γ53 = L²/2EI``, ``γ26 = γ62 = −L²/2EI``; axial (row/column 4) rigid. In the
    order ``[δψ; δ] = γ [M; F]``.

    Parameters
    ----------
    L : float or array_like, shape (n,)
        Length. [m]
    EI, GJ : float or array_like, shape (n,)
        Bending and torsional stiffness. [N·m²]

    Returns
    -------
    gamma_i : ndarray, shape (6, 6) or (n, 6, 6)
        [rad/(N·m), rad/N, m/(N·m), m/N]

    Raises
    ------
    ModelError
        If a value is not positive and finite.
    """
    Ls, EIs, GJs = (np.asarray(x, dtype=np.float64) for x in (L, EI, GJ))
    for name, val in (("L", Ls), ("EI", EIs), ("GJ", GJs)):
        if not np.all(np.isfinite(val) & (val > 0.0)):
            raise ModelError(f"beam {name}: must be positive, got {val.tolist()!r}")
    Ls, EIs, GJs = np.broadcast_arrays(Ls, EIs, GJs)
    g = np.zeros(Ls.shape + (6, 6))
    g[..., 0, 0] = Ls / GJs
    g[..., 1, 1] = g[..., 2, 2] = Ls / EIs
    g[..., 4, 4] = g[..., 5, 5] = Ls ** 3 / (3.0 * EIs)
    g[..., 2, 4] = g[..., 4, 2] = Ls ** 2 / (2.0 * EIs)
    g[..., 1, 5] = g[..., 5, 1] = -(Ls ** 2) / (2.0 * EIs)
    return g


def shift_matrix(r: ArrayLike) -> Array:
    """``L = [[I, 0], [−[r×], I]]`` (A-6): a small deflection ``[δψ; δ]`` at a point carried to
    the point ``r`` away; ``Lᵀ`` carries a load back (A-20).

    Parameters
    ----------
    r : array_like, shape (3,)
        From the point to the far point. [m]
    """
    L = np.eye(6)
    L[3:, :3] = -sp.skew(sp.as_vector(r, 3, "r"))
    return L


def beam_frame(x_dir: ArrayLike, R_ref: ArrayLike) -> Array:
    """Rotation ``R_OK`` of a beam frame K: x along ``x_dir``, z the reference z made orthogonal.

    Parameters
    ----------
    x_dir : array_like, shape (3,) or (n, 3)
        Beam axis (root to tip), in O.
    R_ref : array_like, shape (3, 3) or (n, 3, 3)
        Reference frame in O (the link the beam belongs to); if its z axis is along the
        beam, its y axis is used instead.

    Returns
    -------
    R_OK : ndarray, shape (3, 3) or (n, 3, 3)
    """
    x = np.asarray(x_dir, dtype=np.float64)
    R = np.asarray(R_ref, dtype=np.float64)
    x = x / np.sqrt((x * x).sum(axis=-1))[..., None]
    zr, yr = R[..., :, 2], R[..., :, 1]
    z = zr - (zr * x).sum(axis=-1)[..., None] * x
    nz = np.sqrt((z * z).sum(axis=-1))
    along = nz < 1e-6
    if np.any(along):
        alt = sp.cross_batch(x, yr - (yr * x).sum(axis=-1)[..., None] * x)
        z = np.where(along[..., None], alt, z)
        nz = np.sqrt((z * z).sum(axis=-1))
    z = z / nz[..., None]
    out = np.empty(x.shape + (3,))
    out[..., :, 0] = x
    out[..., :, 1] = sp.cross_batch(z, x)
    out[..., :, 2] = z
    return out


def arm_flexibility(points_O: ArrayLike, u_O: ArrayLike, beams: Sequence[Beam] = ASSUMED_BEAMS,
                    joint_stiffness: ArrayLike | None = ASSUMED_JOINT_STIFFNESS) -> Array:
    """Arm flexibility matrix at the point of resolution, SVDS B-6 with B-7 beams.

    ``γ = Σ_i L_in γ_i L_inᵀ``: each beam's tip compliance (:func:`beam_compliance`,
    rotated from its beam frame to O) carried from the beam tip to the arm tip; each
    joint's compliance ``u uᵀ / k`` (rotation about its axis) carried from the joint
    point. The arm is cantilevered at the shoulder (orbiter side).

    A beam bends alike about both cross-section axes (one EI), so its compliance rotated
    to O depends on its axis ``x`` alone, not on how its frame is turned about it
    (:func:`beam_frame`): with ``α = L/EI``, ``β = L/GJ − α``, ``a = L²/2EI``, ``b = L³/3EI``
    (B-7) the blocks ``[[γ_rr, γ_rt], [γ_rtᵀ, γ_tt]]`` are ``γ_rr = α I + β x xᵀ``,
    ``γ_rt = a [x×]``, ``γ_tt = b (I − x xᵀ)``. Carried by ``r`` (beam tip → arm tip,
    ``L = [[I, 0], [−[r×], I]]``) they become, with ``q = α r + a x`` and ``m = x × r``::

        γ_rr' = α I + β x xᵀ
        γ_rt' = [q×] + β x mᵀ
        γ_tt' = (α r·r + 2a x·r + b) I − α r rᵀ − a (x rᵀ + r xᵀ) + β m mᵀ − b x xᵀ

    (expanding ``L γ Lᵀ`` with ``[r×][q×] = q rᵀ − (r·q) I``), summed on Python floats
    (:func:`beams_flexibility_rows`).

    Parameters
    ----------
    points_O : array_like, shape (7, 3)
        Joint points 1..6 then the point of resolution, in O. [m]
    u_O : array_like, shape (6, 3)
        Joint axes in O.
    beams : sequence of Beam
    joint_stiffness : array_like, shape (6,), optional
        [N·m/rad]; None: rigid joints.

    Returns
    -------
    gamma : ndarray, shape (6, 6)
        Maps a tip load ``[M; F]`` in O about the point of resolution to the tip
        deflection ``[δψ; δ]`` in O. Symmetric positive semi-definite.

    Raises
    ------
    ShapeError
        On bad shapes.
    ModelError
        If a stiffness is not positive.
    """
    pts = np.asarray(points_O, dtype=np.float64)
    u = np.asarray(u_O, dtype=np.float64)
    if pts.shape != (7, 3) or u.shape != (6, 3):
        raise ShapeError(f"points_O, u_O: expected (7, 3), (6, 3), got {pts.shape}, {u.shape}")
    for bm in beams:
        if not (bm.EI > 0.0 and bm.GJ > 0.0 and math.isfinite(bm.EI) and math.isfinite(bm.GJ)):
            raise ModelError(f"beam {bm.name}: EI and GJ must be positive, got {bm.EI!r}, {bm.GJ!r}")
    pl = pts.tolist()
    gamma = np.array(beams_flexibility_rows(pl, beams))
    if joint_stiffness is not None:
        k = sp.as_vector(joint_stiffness, 6, "joint_stiffness")
        if not k.min() > 0.0:
            raise ModelError(f"joint_stiffness: must be positive, got {k.tolist()}")
        # each joint's rotation compliance u uᵀ/k carried to the tip: the columns [u; u × (tip − p)]
        # are those of the RMS Jacobian at the tip
        Jc = np.array(rms_jacobian_rows(pl[:6], u.tolist(), pl[6]))
        gamma += (Jc / k) @ Jc.T
    return 0.5 * (gamma + gamma.T)


def beams_flexibility_rows(points: list[list[float]], beams: Sequence[Beam]) -> list[list[float]]:
    """The beams' part of :func:`arm_flexibility` on Python floats (its kernel; no checks).

    SVDS B-6 with B-7 beams, in the closed form of :func:`arm_flexibility`'s notes.

    Parameters
    ----------
    points : list of 7 sequences of 3 float
        Joint points 1..6 then the point of resolution, in O. [m]
    beams : sequence of Beam

    Returns
    -------
    gamma_beams : list of 6 lists of 6 float
        Symmetric; maps a tip load ``[M; F]`` in O about the point of resolution to the tip
        deflection ``[δψ; δ]`` in O. [rad/(N·m), rad/N, m/(N·m), m/N]
    """
    return gamma_rows(beams_terms(points, [(bm.root, bm.tip, bm.EI, bm.GJ) for bm in beams]))


def beams_terms(points: Sequence[Sequence[float]] | NDArray[np.float64],
                beam_rows: Sequence[Sequence[float]] | NDArray[np.float64]) -> tuple[float, ...]:
    """The beams' part of γ (:func:`beams_flexibility_rows`: B-6 with B-7, the closed form of :func:`arm_flexibility`'s
    notes) as its 21 distinct sums, on floats: ``γ_rr`` (row-major entries 0, 1, 2, 4, 5, 8), ``γ_rt`` (all nine),
    ``γ_tt`` (0, 1, 2, 4, 5, 8). [rad/(N·m), rad/N, m/N]

    ``points``: joint points 1..6 then the point of resolution, in O [m] (seven rows of 3); ``beam_rows``: each beam's
    ``root, tip, EI, GJ`` (:class:`Beam`). The same code compiled is the arm's RMSFLX kernel's
    (:func:`dynamics.arm_kernels.flex_terms`), so the two are one sum.
    """
    tx, ty, tz = points[6][0], points[6][1], points[6][2]
    rr0 = rr1 = rr2 = rr4 = rr5 = rr8 = 0.0                       # γ_rr (symmetric), row-major indices
    rt0 = rt1 = rt2 = rt3 = rt4 = rt5 = rt6 = rt7 = rt8 = 0.0     # γ_rt
    tt0 = tt1 = tt2 = tt4 = tt5 = tt8 = 0.0                       # γ_tt (symmetric)
    for i in range(len(beam_rows)):
        bm = beam_rows[i]
        root, tip, EI, GJ = int(bm[0]), int(bm[1]), bm[2], bm[3]
        x0, x1, x2 = points[root][0], points[root][1], points[root][2]
        p0, p1, p2 = points[tip][0], points[tip][1], points[tip][2]
        d0, d1, d2 = p0 - x0, p1 - x1, p2 - x2
        L = math.sqrt(d0 * d0 + d1 * d1 + d2 * d2)
        if L <= 1e-9:
            continue
        x0, x1, x2 = d0 / L, d1 / L, d2 / L
        alpha = L / EI
        beta = L / GJ - alpha
        a = L * L / (2.0 * EI)
        b = L * L * L / (3.0 * EI)
        r0, r1, r2 = tx - p0, ty - p1, tz - p2
        q0, q1, q2 = alpha * r0 + a * x0, alpha * r1 + a * x1, alpha * r2 + a * x2
        m0, m1, m2 = x1 * r2 - x2 * r1, x2 * r0 - x0 * r2, x0 * r1 - x1 * r0
        s = alpha * (r0 * r0 + r1 * r1 + r2 * r2) + 2.0 * a * (x0 * r0 + x1 * r1 + x2 * r2) + b
        bx0, bx1, bx2 = beta * x0, beta * x1, beta * x2
        # γ_rr' = α I + β x xᵀ
        rr0 += alpha + bx0 * x0
        rr1 += bx0 * x1
        rr2 += bx0 * x2
        rr4 += alpha + bx1 * x1
        rr5 += bx1 * x2
        rr8 += alpha + bx2 * x2
        # γ_rt' = [q×] + β x mᵀ
        rt0 += bx0 * m0
        rt1 += -q2 + bx0 * m1
        rt2 += q1 + bx0 * m2
        rt3 += q2 + bx1 * m0
        rt4 += bx1 * m1
        rt5 += -q0 + bx1 * m2
        rt6 += -q1 + bx2 * m0
        rt7 += q0 + bx2 * m1
        rt8 += bx2 * m2
        # γ_tt' = s I − α r rᵀ − a (x rᵀ + r xᵀ) + β m mᵀ − b x xᵀ
        ar0, ar1, ar2 = alpha * r0, alpha * r1, alpha * r2
        bm0, bm1, bm2 = beta * m0, beta * m1, beta * m2
        bb0, bb1, bb2 = b * x0, b * x1, b * x2
        tt0 += s - ar0 * r0 - 2.0 * a * x0 * r0 + bm0 * m0 - bb0 * x0
        tt1 += -ar0 * r1 - a * (x0 * r1 + r0 * x1) + bm0 * m1 - bb0 * x1
        tt2 += -ar0 * r2 - a * (x0 * r2 + r0 * x2) + bm0 * m2 - bb0 * x2
        tt4 += s - ar1 * r1 - 2.0 * a * x1 * r1 + bm1 * m1 - bb1 * x1
        tt5 += -ar1 * r2 - a * (x1 * r2 + r1 * x2) + bm1 * m2 - bb1 * x2
        tt8 += s - ar2 * r2 - 2.0 * a * x2 * r2 + bm2 * m2 - bb2 * x2
    return (rr0, rr1, rr2, rr4, rr5, rr8, rt0, rt1, rt2, rt3, rt4, rt5, rt6, rt7, rt8, tt0, tt1, tt2, tt4, tt5, tt8)


def gamma_rows(t: Sequence[float]) -> list[list[float]]:
    """The beams' symmetric 6×6 γ (rows; in O, a tip load ``[M; F]`` about the point of resolution to the deflection
    ``[δψ; δ]``, B-6) from :func:`beams_terms`' 21 sums. [rad/(N·m), rad/N, m/(N·m), m/N]"""
    rr0, rr1, rr2, rr4, rr5, rr8, rt0, rt1, rt2, rt3, rt4, rt5, rt6, rt7, rt8, tt0, tt1, tt2, tt4, tt5, tt8 = t
    return [[rr0, rr1, rr2, rt0, rt1, rt2], [rr1, rr4, rr5, rt3, rt4, rt5], [rr2, rr5, rr8, rt6, rt7, rt8],
            [rt0, rt3, rt6, tt0, tt1, tt2], [rt1, rt4, rt7, tt1, tt4, tt5], [rt2, rt5, rt8, tt2, tt5, tt8]]


def joint_flexibility(J: ArrayLike, gamma: ArrayLike) -> Array:
    """Joint flexibility matrix ``γ_J = J^-1 γ J^-T`` (SVDS 3-4, 3-5).

    Parameters
    ----------
    J : array_like, shape (6, 6)
        The RMS Jacobian (:func:`dynamics.rms.rms_jacobian`), same frame and point as γ.
    gamma : array_like, shape (6, 6)
        :func:`arm_flexibility`.

    Returns
    -------
    gamma_J : ndarray, shape (6, 6)
        ``δθ = −γ_J τ_F``. [rad/(N·m)]

    Raises
    ------
    ShapeError
        On bad shapes.
    SingularityError
        If J is singular.
    """
    Ja = np.asarray(J, dtype=np.float64)
    g = np.asarray(gamma, dtype=np.float64)
    if Ja.shape != (6, 6) or g.shape != (6, 6):
        raise ShapeError(f"J, gamma: expected (6, 6), got {Ja.shape}, {g.shape}")
    try:
        X = np.linalg.solve(Ja, g)                    # J^-1 γ
        GJ = np.linalg.solve(Ja, X.T).T               # (J^-1 (J^-1 γ)ᵀ)ᵀ = J^-1 γ J^-T (γ symmetric)
    except np.linalg.LinAlgError as err:
        raise SingularityError("J: singular, no joint flexibility matrix (3-4)") from err
    if not np.all(np.isfinite(GJ)):
        raise SingularityError("J: singular, the joint flexibility matrix is not finite")
    return 0.5 * (GJ + GJ.T)


def passive_torques(gamma_J: ArrayLike, dtheta: ArrayLike) -> Array:
    """Passive joint torques from elastic joint rotations, ``τ_F = −γ_J^-1 δθ`` (SVDS 3-6).

    Parameters
    ----------
    gamma_J : array_like, shape (6, 6)
    dtheta : array_like, shape (6,)
        Current minus neutral (locked) joint angles. [rad]

    Returns
    -------
    tau_F : ndarray, shape (6,)
        [N·m]
    """
    return -np.linalg.solve(  # type: ignore[return-value]  # numpy stubs: float64 in, floating out
        np.asarray(gamma_J, dtype=np.float64), sp.as_vector(dtheta, 6, "dtheta"))


def servo_flexibility_terms(gamma_J: ArrayLike) -> Array:
    """Active per-servo flexibility terms, SVDS 3-7, by the formula as written.

    ``γ_i^e = γ_J,ii − (γ21_i)ᵀ (γ22_i)^-1 γ21_i`` with ``γ22_i`` the 5×5 matrix of γ_J
    without row and column i and ``γ21_i`` the i-th column without its i-th element
    (the 3-7 text says "row"; γ_J is symmetric). It equals ``1/[(γ_J)^-1]_ii``: the
    compliance of joint i with the other five joints held.

    Parameters
    ----------
    gamma_J : array_like, shape (6, 6)

    Returns
    -------
    gamma_e : ndarray, shape (6,)
        [rad/(N·m)]
    """
    G = np.asarray(gamma_J, dtype=np.float64)
    if G.shape != (6, 6):
        raise ShapeError(f"gamma_J: expected (6, 6), got {G.shape}")
    out = np.empty(6)
    for i in range(6):
        keep = [j for j in range(6) if j != i]
        g21 = G[keep, i]
        g22 = G[np.ix_(keep, keep)]
        out[i] = G[i, i] - g21 @ np.linalg.solve(g22, g21)
    return out


def _rigid_body_mass(m: float, inertia: Array) -> Array:
    M = np.zeros((6, 6))
    M[:3, :3] = inertia
    M[3:, 3:] = m * np.eye(3)
    return M


def _elastic_frequencies(M: Array, K: Array, n_rigid: int) -> Array:
    lam = scipy.linalg.eigh(K, M, eigvals_only=True)
    lam = np.sort(lam)[n_rigid:]
    return np.sqrt(np.maximum(lam, 0.0)) / (2.0 * np.pi)


def modes_two_body(m1: float, I1: ArrayLike, p_1cmEo: ArrayLike, m2: float, I2: ArrayLike,
                   p_2cmEo: ArrayLike, gamma: ArrayLike) -> tuple[Array, Array]:
    """Elastic modes of two rigid bodies joined at Eo by a massless flexible arm.

    Small motions ``x_k = [δψ_k; δr_k]`` (rotation, CoM translation, k = 1 orbiter,
    2 payload); the point Eo of each body moves by ``D_k x_k`` with
    ``D_k = [[I, 0], [−[p_kcmEo×], I]]``; the arm (cantilevered on body 1) stores
    ``½ (D2x2 − D1x1)ᵀ γ^-1 (D2x2 − D1x1)``. The generalized eigenproblem
    ``K φ = ω² M φ`` has six rigid-body modes; the six elastic ones are returned. All in
    one frame.

    Parameters
    ----------
    m1, m2 : float
        [kg]
    I1, I2 : array_like, shape (3, 3)
        Inertias about the CoMs. [kg·m²]
    p_1cmEo, p_2cmEo : array_like, shape (3,)
        From each CoM to Eo. [m]
    gamma : array_like, shape (6, 6)
        Arm flexibility at Eo (:func:`arm_flexibility`), positive definite.

    Returns
    -------
    f : ndarray, shape (6,)
        Elastic frequencies, ascending. [Hz]
    phi : ndarray, shape (12, 6)
        Mode shapes ``[δψ1; δr1; δψ2; δr2]`` (mass-normalized), one column per mode.
    """
    Ke = np.linalg.inv(np.asarray(gamma, dtype=np.float64))
    B = np.hstack([-shift_matrix(p_1cmEo), shift_matrix(p_2cmEo)])
    K = B.T @ Ke @ B
    M = scipy.linalg.block_diag(_rigid_body_mass(m1, np.asarray(I1, float)),
                                _rigid_body_mass(m2, np.asarray(I2, float)))
    lam, phi = scipy.linalg.eigh(0.5 * (K + K.T), M)
    return np.sqrt(np.maximum(lam[6:], 0.0)) / (2.0 * np.pi), phi[:, 6:]


def first_mode_two_body(m1: float, I1: ArrayLike, p_1cmEo: ArrayLike, m2: float, I2: ArrayLike,
                        p_2cmEo: ArrayLike, gamma: ArrayLike) -> float:
    """First elastic frequency [Hz] of :func:`modes_two_body` (same parameters)."""
    return float(modes_two_body(m1, I1, p_1cmEo, m2, I2, p_2cmEo, gamma)[0][0])


def first_mode_chain(M: ArrayLike, joint_stiffness: ArrayLike, n_free: int = 6) -> float:
    """First elastic frequency of a chain with joint springs (motors held), ``K = diag(0, k)``.

    Parameters
    ----------
    M : array_like, shape (nv, nv)
        Mass matrix of the chain (:func:`dynamics.chain.mass_matrix`), free base first.
    joint_stiffness : array_like, shape (nv - n_free,)
        [N·m/rad]
    n_free : int
        Number of unconstrained (rigid-body) coordinates: 6 for a free base.

    Returns
    -------
    f1 : float
        [Hz]
    """
    Ma = np.asarray(M, dtype=np.float64)
    k = np.asarray(joint_stiffness, dtype=np.float64)
    nv = Ma.shape[0]
    if Ma.shape != (nv, nv) or k.shape != (nv - n_free,):
        raise ShapeError(f"M, joint_stiffness: expected (nv, nv), (nv - {n_free},), got {Ma.shape}, {k.shape}")
    K = np.zeros((nv, nv))
    K[n_free:, n_free:] = np.diag(k)
    return float(_elastic_frequencies(Ma, K, n_free)[0])
