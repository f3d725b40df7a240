"""Compliant and impulsive contact between the orbiter and the payload (pure functions).

Frames (STYLE): W inertial/LVLH; O orbiter body (origin at its CoM Oo); T payload body
(origin at its CoM To); E end effector, G grapple fixture; L orbiter latch frame, B
payload berthing interface. Spatial vectors are ``[ω; v]`` and ``[τ; f]``; every
vector here is expressed in W unless its name says otherwise.

Contents
--------
- :func:`hunt_crossley` — normal force ``F_n = k δⁿ (1 + 3/2 α δ̇)`` (Hunt & Crossley,
  J. Appl. Mech. 42 (1975); the ``λ = 3/2 α k`` form of Marhefka & Orin, IEEE SMC-A 29(6)
  1999, eq. 4), never pulling (clamped at 0);
- :func:`friction_coefficient` — regularized Coulomb stick–slip ``μ(|u_t|)``;
- :func:`point_plane` — a payload point against a bounded plane on the orbiter: force,
  penetration, rates and the power dissipated (damping + friction); :func:`guides_wrench_rows` —
  the berthing guides' wrench from it (compiled: :func:`dynamics.contact_kernels.guides_wrench`);
- :func:`surface_slack`, :func:`reach_time` — where and for how long a point cannot touch a wall;
  :func:`coast_bound_rows` — the contact service's no-contact bound from them (compiled:
  :func:`dynamics.contact_kernels.coast_bound`);
- :class:`CaptureEnvelope`, :func:`capture_check` — end effector vs grapple fixture;
- :func:`plastic_lock` — impulsive 6-DOF plastic capture of two rigid bodies at a point
  (Yoshida seed 000 eqs. 26–28 with the orbiter's mobility as G*, i.e. mu = I);
- :func:`latch_check`, :func:`latch_wrench` — latch criteria and the stiff 6-DOF latch
  spring–damper that holds a berthed payload; :class:`LatchDrive` — the latches' closing
  stroke, a set point that draws the trunnions home (:func:`smooth_stroke`);
- :func:`orbiter_chaser` — the orbiter as a 6-coordinate "chaser" (M, J, ψ̇) for Cyril's
  impact laws (:mod:`dynamics.impact`, seed 002).

Energy bookkeeping of a compliant contact
-----------------------------------------
With ``u = v_P − v_O(P)`` the velocity of the payload point relative to the coincident
orbiter point and ``n`` the surface normal (out of the orbiter), ``δ = −(p_P − p_S)·n``
and ``δ̇ = −u·n``. The force on the payload ``f = F_n n + f_t`` does power ``f·u`` on
the pair; with ``U = k δⁿ⁺¹ / (n+1)`` the elastic energy,
``d(KE + U)/dt = −P_d``, ``P_d = (F_n − k δⁿ) δ̇ + μ F_n |u_t| ≥ 0``
(:attr:`PointContact.power_dissipated`). Integrating ``P_d`` gives the loss a test can
compare against the kinetic-energy change.

No I/O, no globals.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dynamics.exgit import collision, contact_inertia
from dynamics.spatial import (
    as_vector,
    cross_rows,
    mat_mat_t_rows,
    mat_t_vec_rows,
    mat_vec_rows,
    quat_integrate_rows,
    rotation_rows,
    rotation_to_quat,
    rotation_vector,
    rotation_vector_rows,
    skew,
)
from errors import ModelError, ShapeError

__all__ = [
    "CaptureEnvelope",
    "ContactLaw",
    "LatchCriteria",
    "LatchDrive",
    "LockResult",
    "PointContact",
    "capture_check",
    "coast_bound_rows",
    "dist3",
    "friction_coefficient",
    "guides_wrench_rows",
    "hunt_crossley",
    "latch_check",
    "latch_constraint_wrench_rows",
    "latch_wrench",
    "latch_wrench_rows",
    "orbiter_chaser",
    "plastic_lock",
    "point_plane",
    "point_plane_rows",
    "reach_time",
    "surface_slack",
    "rotation_error",
    "smooth_stroke",
]

Array = NDArray[np.float64]


def _vec3(x: ArrayLike, name: str) -> Array:
    """``x`` as a float (3,) array; shape checked only (NaN propagates into the result)."""
    a = np.asarray(x, dtype=np.float64)
    if a.shape != (3,):
        raise ShapeError(f"{name}: expected shape (3,), got {a.shape}")
    return a


@dataclass(frozen=True, slots=True)
class ContactLaw:
    """Parameters of one compliant contact (normal Hunt–Crossley, regularized Coulomb).

    Attributes
    ----------
    k : float
        Stiffness, ``F_n = k δⁿ`` for a slow contact, > 0. [N/mⁿ]
    exponent : float
        ``n``: 1 linear spring, 1.5 Hertzian, ≥ 1.
    alpha : float
        Hunt–Crossley damping factor α ≥ 0, ``λ = 3/2 α k``; for small α the coefficient
        of restitution is ``e ≈ 1 − α v_in`` (Hunt & Crossley 1975). [s/m]
    mu_s, mu_k : float
        Static (peak) and kinetic Coulomb coefficients, ``mu_s ≥ mu_k ≥ 0``.
    v_stick : float
        Regularization velocity: below it the friction is a stiff viscous "stick"
        ``μ = mu_s |u_t| / v_stick``, > 0. [m/s]

    Raises
    ------
    ModelError
        Naming the parameter and value if one is inadmissible.
    """

    k: float
    exponent: float = 1.0
    alpha: float = 0.0
    mu_s: float = 0.0
    mu_k: float = 0.0
    v_stick: float = 1e-3

    def __post_init__(self) -> None:
        checks = (("k", self.k > 0.0), ("exponent", self.exponent >= 1.0), ("alpha", self.alpha >= 0.0),
                  ("mu_k", self.mu_k >= 0.0), ("mu_s", self.mu_s >= self.mu_k), ("v_stick", self.v_stick > 0.0))
        for name, ok in checks:
            value = getattr(self, name)
            if not (np.isfinite(value) and ok):
                raise ModelError(f"ContactLaw.{name}: inadmissible value {value!r}")


def hunt_crossley(delta: float, delta_dot: float, law: ContactLaw) -> tuple[float, float]:
    """Normal contact force of the Hunt–Crossley model, never pulling.

    ``F_n = max(0, k δⁿ + λ δⁿ δ̇)``, ``λ = 3/2 α k`` (Marhefka & Orin 1999, eq. 4; Hunt &
    Crossley 1975). The damping vanishes with the penetration, so the force is continuous
    at first contact and the energy loss per impact grows with the approach speed.

    Parameters
    ----------
    delta : float
        Penetration δ (> 0 in contact). [m]
    delta_dot : float
        Its rate (> 0 approaching). [m/s]
    law : ContactLaw

    Returns
    -------
    F_n : float
        Normal force magnitude, ≥ 0 (0 when δ ≤ 0). [N]
    F_elastic : float
        Its elastic part ``k δⁿ`` (0 when δ ≤ 0); ``F_n − F_elastic`` is the damping
        force including the no-pull clamp. [N]
    """
    if delta <= 0.0:
        return 0.0, 0.0
    fe = law.k * (delta if law.exponent == 1.0 else delta ** law.exponent)
    F_n = fe * (1.0 + 1.5 * law.alpha * delta_dot)
    return max(0.0, F_n), fe


def friction_coefficient(speed: float, law: ContactLaw) -> float:
    """Regularized Coulomb coefficient for a tangential slip speed ``|u_t|``.

    ``μ = mu_s s/v_s`` for ``s ≤ v_s`` (stick: a stiff viscous law that stops slip without
    a discontinuity), ``μ = mu_k + (mu_s − mu_k) exp(−(s − v_s)/v_s)`` above it (slip, a
    Stribeck-like decay from the static peak to the kinetic value). Continuous in s.

    Parameters
    ----------
    speed : float
        Tangential slip speed ``|u_t|`` ≥ 0. [m/s]
    law : ContactLaw

    Returns
    -------
    float
        μ ≥ 0.
    """
    vs = law.v_stick
    if speed <= vs:
        return law.mu_s * speed / vs
    return law.mu_k + (law.mu_s - law.mu_k) * math.exp(-(speed - vs) / vs)


@dataclass(frozen=True, slots=True)
class PointContact:
    """Result of :func:`point_plane`.

    Attributes
    ----------
    active : bool
        The point is inside the surface's footprint and penetrating.
    delta, delta_dot : float
        Penetration [m] and its rate [m/s] (positive approaching).
    f_W : ndarray, shape (3,)
        Force on the payload at the point P, in W (the orbiter receives −f_W at P). [N]
    power_dissipated : float
        ``P_d = (F_n − k δⁿ) δ̇ + μ F_n |u_t|`` ≥ 0 (module docstring). [W]
    u_W : ndarray, shape (3,)
        Velocity of P relative to the coincident orbiter point, in W. [m/s]
    """

    active: bool
    delta: float
    delta_dot: float
    f_W: Array
    power_dissipated: float
    u_W: Array


_ZERO3 = np.zeros(3)
_ZERO3.setflags(write=False)


def point_plane(p_WoPo_W: ArrayLike, v_WPo_W: ArrayLike, p_WoSo_W: ArrayLike, n_W: ArrayLike,
                v_WS_W: ArrayLike, law: ContactLaw, radius: float = np.inf, depth: float = np.inf) -> PointContact:
    """A payload point P against a bounded plane (a disc) on the orbiter.

    The plane passes through S with unit normal n pointing out of the orbiter; it acts
    only on points within ``radius`` of S laterally and at most ``depth`` behind it
    (so a latch face does not catch a point that went around it).

    Parameters
    ----------
    p_WoPo_W, v_WPo_W : array_like, shape (3,)
        Position and velocity of the payload point P. [m, m/s]
    p_WoSo_W : array_like, shape (3,)
        A point S of the plane. [m]
    n_W : array_like, shape (3,)
        Outward normal (normalised here).
    v_WS_W : array_like, shape (3,)
        Velocity of the orbiter's material point that coincides with P. [m/s]
    law : ContactLaw
    radius, depth : float
        Footprint radius and catch depth. [m]

    Returns
    -------
    PointContact

    Raises
    ------
    ShapeError
        On a wrong shape or a zero normal (non-finite values are not checked here, for
        speed: they propagate into the result).
    """
    px, py, pz = _vec3(p_WoPo_W, "p_WoPo_W").tolist()
    sx, sy, sz = _vec3(p_WoSo_W, "p_WoSo_W").tolist()
    nx, ny, nz = _vec3(n_W, "n_W").tolist()
    nn = math.sqrt(nx * nx + ny * ny + nz * nz)
    if not nn > 1e-12:
        raise ShapeError(f"n_W: zero normal {[nx, ny, nz]}")
    u = _vec3(v_WPo_W, "v_WPo_W") - _vec3(v_WS_W, "v_WS_W")
    ux, uy, uz = u.tolist()
    active, delta, delta_dot, fx, fy, fz, P_d = point_plane_rows(px - sx, py - sy, pz - sz, ux, uy, uz, nx / nn,
                                                                 ny / nn, nz / nn, law, radius, depth)
    return PointContact(active, delta, delta_dot, np.array([fx, fy, fz]) if active else _ZERO3, P_d, u)


def point_plane_rows(dx: float, dy: float, dz: float, ux: float, uy: float, uz: float, nx: float, ny: float,
                     nz: float, law: ContactLaw, radius: float = math.inf,
                     depth: float = math.inf) -> tuple[bool, float, float, float, float, float, float]:
    """:func:`point_plane` on Python floats, in any one frame (the hot path of the contact service).

    The normal force is :func:`hunt_crossley`'s, the friction coefficient
    :func:`friction_coefficient`'s: the documented law is the law the service runs.

    Parameters
    ----------
    dx, dy, dz : float
        ``p_P − p_S``: from the plane's point S to the payload point P. [m]
    ux, uy, uz : float
        ``u = v_P − v_S``: velocity of P relative to the coincident orbiter point. [m/s]
    nx, ny, nz : float
        Unit outward normal (not normalised here).
    law : ContactLaw
    radius, depth : float
        Footprint radius and catch depth. [m]

    Returns
    -------
    active : bool
    delta, delta_dot : float
        Penetration [m] and its rate [m/s].
    fx, fy, fz : float
        Force on the payload at P, in the frame of the inputs (zero when inactive). [N]
    power_dissipated : float
        ``P_d`` ≥ 0. [W]
    """
    dn = dx * nx + dy * ny + dz * nz
    delta = -dn
    delta_dot = -(ux * nx + uy * ny + uz * nz)
    lx, ly, lz = dx - dn * nx, dy - dn * ny, dz - dn * nz
    if delta <= 0.0 or delta > depth or lx * lx + ly * ly + lz * lz > radius * radius:
        return False, delta, delta_dot, 0.0, 0.0, 0.0, 0.0
    F_n, F_e = hunt_crossley(delta, delta_dot, law)  # the one contact law (no copy of it here)
    tx, ty, tz = ux + delta_dot * nx, uy + delta_dot * ny, uz + delta_dot * nz  # tangential slip u_t
    st = math.sqrt(tx * tx + ty * ty + tz * tz)
    fx, fy, fz = F_n * nx, F_n * ny, F_n * nz
    P_f = 0.0
    if st > 0.0 and F_n > 0.0 and law.mu_s > 0.0:
        mu = friction_coefficient(st, law)
        k = mu * F_n / st
        fx, fy, fz = fx - k * tx, fy - k * ty, fz - k * tz
        P_f = mu * F_n * st
    return True, delta, delta_dot, fx, fy, fz, (F_n - F_e) * delta_dot + P_f


def guides_wrench_rows(T: Sequence[float], O: Sequence[float], L: Sequence[float], lead: float, law: Any,
                       margin: float, near: Sequence[float],
                       guides: Sequence[tuple[Sequence[float], Sequence[float], float, Sequence[Sequence[float]]]],
                       point_law: Callable[..., tuple[Any, ...]] | None = None) -> tuple[bool, float, list[float]]:
    """The berthing guides' compliant wrench on the payload, on Python floats: the reference of the compiled
    :func:`dynamics.contact_kernels.guides_wrench` (same arguments but ``law`` and the guides; equal bit for bit).

    The payload points inside their guide's bounding sphere are tested against the guide's walls: a wall the
    point is at least ``margin`` in front of is skipped, else :func:`point_plane_rows` acts (in L) at the point
    extrapolated by ``u · lead`` (u its velocity relative to the orbiter's coincident point), and the forces'
    wrench about W's origin is summed (the contact service's compliant berthing contact).

    Parameters
    ----------
    T, O : sequence of 18 float
        The payload's and the orbiter's CoM position (3), ``R_WB`` row-major (9), CoM velocity (3) and angular
        velocity in W (3). [m, -, m/s, rad/s]
    L : sequence of 12 float
        L's origin in W (3) and ``R_WL`` row-major (9). [m, -]
    lead : float
        [s]
    law : ContactLaw
        Or what ``point_law`` takes as its law.
    margin : float
        [m]
    near : sequence of 4 float
        A sphere in L (centre, squared radius) outside which the payload's CoM has no point near a guide. [m, m²]
    guides : sequence of (p_ToPo_T, center_L, reach2, surfaces)
        Each guide's payload point in T [m], its bounding sphere in L [m, m²], and its walls, each
        ``(sx, sy, sz, nx, ny, nz, radius, depth)`` in L (a point S, the unit outward normal, footprint and depth).
    point_law : callable, optional
        The point–plane law, with :func:`point_plane_rows`'s signature and result (default: it; the contact
        service passes a registered one).

    Returns
    -------
    active : bool
    power : float
        Power dissipated, summed. [W]
    F_Wo_W : list of 6 float
        [τ about W's origin; f] on the payload, in W. [N·m, N]
    """
    from dynamics.rigid_body import velocity_at_rows  # (rigid_body does not import this module)
    from dynamics.spatial import pose_apply_inverse_rows, pose_apply_rows

    point_law = point_plane_rows if point_law is None else point_law
    F = [0.0] * 6
    power = 0.0
    active = False
    pT, RT, vT, wT = T[0:3], T[3:12], T[12:15], T[15:18]
    pO, vO, wO = O[0:3], O[12:15], O[15:18]
    p_L, R_WL = L[0:3], L[3:12]
    x0, x1, x2 = pose_apply_inverse_rows(p_L, R_WL, pT)
    if (x0 - near[0]) ** 2 + (x1 - near[1]) ** 2 + (x2 - near[2]) ** 2 > near[3]:
        return active, power, F
    for p_ToPo_T, ctr, reach2, surfaces in guides:
        P = pose_apply_rows(pT, RT, p_ToPo_T)
        x0, x1, x2 = pose_apply_inverse_rows(p_L, R_WL, P)
        if not (x0 - ctr[0]) ** 2 + (x1 - ctr[1]) ** 2 + (x2 - ctr[2]) ** 2 <= reach2:
            continue
        u: list[float] | None = None
        fx = fy = fz = 0.0
        for sx, sy, sz, nx, ny, nz, radius, depth in surfaces:
            dx, dy, dz = x0 - sx, x1 - sy, x2 - sz
            if dx * nx + dy * ny + dz * nz >= margin:
                continue
            if u is None:
                vP, vS = velocity_at_rows(pT, vT, wT, P), velocity_at_rows(pO, vO, wO, P)
                u = mat_t_vec_rows(R_WL, vP[0] - vS[0], vP[1] - vS[1], vP[2] - vS[2])
            ok, _, _, f0, f1, f2, P_d = point_law(dx + u[0] * lead, dy + u[1] * lead, dz + u[2] * lead,
                                                         u[0], u[1], u[2], nx, ny, nz, law, radius, depth)
            if not ok:
                continue
            active = True
            fx, fy, fz = fx + f0, fy + f1, fz + f2
            power += P_d
        if fx or fy or fz:
            f = mat_vec_rows(R_WL, fx, fy, fz)
            tau = cross_rows(P[0], P[1], P[2], f[0], f[1], f[2])
            F = [F[0] + tau[0], F[1] + tau[1], F[2] + tau[2], F[3] + f[0], F[4] + f[1], F[5] + f[2]]
    return active, power, F


T27 = 134217729.0
"""2²⁷ + 1: Veltkamp's splitting constant (:func:`dist3`)."""


def dist3(a0: float, a1: float, a2: float, b0: float, b1: float, b2: float) -> float:
    """The distance between two points [m] as CPython 3.11's ``math.dist`` computes it, bit for bit: its
    ``vector_norm`` (Modules/mathmodule.c) for three coordinates — the differences scaled by the largest one's
    power of two, their squares summed exactly in parts (Veltkamp's split, compensated sums), the root corrected
    once; below 2⁻¹⁰²⁴ (where that power of two overflows) the differences divided by the largest instead.

    The no-contact bound's distances (:func:`coast_bound_rows`, compiled in :mod:`dynamics.contact_kernels`):
    written out so that the kernel equals its reference on every Python (from 3.12 ``math.dist`` takes another
    route, python/cpython#102734) and the bound is the one ``math.dist`` gave on 3.11."""
    x0, x1, x2 = abs(a0 - b0), abs(a1 - b1), abs(a2 - b2)
    mx = 0.0  # the largest, NaN aside (CPython's order: an infinity wins over a NaN)
    if x0 > mx:
        mx = x0
    if x1 > mx:
        mx = x1
    if x2 > mx:
        mx = x2
    if math.isinf(mx):
        return mx
    if math.isnan(x0) or math.isnan(x1) or math.isnan(x2):
        return math.nan
    if mx == 0.0:
        return mx
    _, e = math.frexp(mx)
    if e < -1023:  # 2 ** -e would overflow: CPython divides by the largest instead
        csum = 1.0
        f1 = 0.0
        for x in (x0, x1, x2):
            x /= mx
            x = x * x
            old = csum
            csum += x
            f1 += (old - csum) + x
        return mx * math.sqrt(csum - 1.0 + f1)
    scale = math.ldexp(1.0, -e)
    csum = 1.0
    f1 = f2 = f3 = 0.0
    for x in (x0, x1, x2):
        x *= scale
        t = x * T27
        hi = t - (t - x)
        lo = x - hi
        x = hi * hi
        old = csum
        csum += x
        f1 += (old - csum) + x
        x = 2.0 * hi * lo
        old = csum
        csum += x
        f2 += (old - csum) + x
        f3 += lo * lo
    hn = math.sqrt(csum - 1.0 + (f1 + f2 + f3))
    t = hn * T27
    hi = t - (t - hn)
    lo = hn - hi
    x = -hi * hi
    old = csum
    csum += x
    f1 += (old - csum) + x
    x = -2.0 * hi * lo
    old = csum
    csum += x
    f2 += (old - csum) + x
    x = -lo * lo
    old = csum
    csum += x
    f3 += (old - csum) + x
    x = csum - 1.0 + (f1 + f2 + f3)
    return (hn + x / (2.0 * hn)) / scale



def surface_slack(dx: float, dy: float, dz: float, nx: float, ny: float, nz: float, radius: float = math.inf,
                  depth: float = math.inf) -> float:
    """How far a point may move, in any direction, while :func:`point_plane_rows` stays inactive on it.

    :func:`point_plane_rows` acts only where ``0 < δ ≤ depth`` (``δ = −d·n``) and the lateral offset
    ``|d − (d·n) n| ≤ radius``. Each of ``d·n``, ``−d·n − depth`` and the lateral offset minus
    ``radius`` changes by at most the distance the point moves (each is 1-Lipschitz in ``d``), and
    the law is inactive where any of them is positive: so it stays inactive while the point moves
    less than the largest of the three. The contact service's no-contact bound (the adaptive step,
    :mod:`services.contact`) is built on it.

    Parameters
    ----------
    dx, dy, dz : float
        ``p_P − p_S``: from the plane's point S to the payload point P. [m]
    nx, ny, nz : float
        Unit outward normal.
    radius, depth : float
        Footprint radius and catch depth, as :func:`point_plane_rows`. [m]

    Returns
    -------
    float
        The slack [m]; ≤ 0 where the law may act now (a point in or at its footprint).
    """
    dn = dx * nx + dy * ny + dz * nz
    lx, ly, lz = dx - dn * nx, dy - dn * ny, dz - dn * nz
    return max(dn, -dn - depth, math.sqrt(lx * lx + ly * ly + lz * lz) - radius)


def reach_time(speed: float, accel: float, slack: float) -> float:
    """The longest time over which a point starting at ``speed`` and accelerating by at most ``accel`` moves
    less than ``slack``: the root of ``speed τ + accel τ²/2 = slack``.

    Parameters
    ----------
    speed : float
        ≥ 0. [m/s]
    accel : float
        ≥ 0, a bound on the acceleration's magnitude over the time. [m/s²]
    slack : float
        [m]

    Returns
    -------
    float
        [s]; 0 if ``slack ≤ 0``, inf if the point cannot move (``speed = accel = 0``).

    Raises
    ------
    ValueError
        If ``speed`` or ``accel`` is negative or not finite.
    """
    if not (math.isfinite(speed) and speed >= 0.0 and math.isfinite(accel) and accel >= 0.0):
        raise ValueError(f"reach_time: speed and accel must be finite and >= 0, got speed={speed!r}, "
                         f"accel={accel!r}")
    if slack <= 0.0:
        return 0.0
    if accel == 0.0:
        return slack / speed if speed > 0.0 else math.inf
    # the root written without cancellation: 2 s / (v + sqrt(v² + 2 a s))
    return 2.0 * slack / (speed + math.sqrt(speed * speed + 2.0 * accel * slack))


def coast_bound_rows(T: Sequence[float], O: Sequence[float], L: Sequence[float], F_T: Sequence[float],
                     a_T: Sequence[float], a_O: Sequence[float], wd_O: Sequence[float], scalars: Sequence[float],
                     mode: int,
                     points: Sequence[tuple[Sequence[float], Sequence[float], float, Sequence[Sequence[float]]]]
                     ) -> tuple[int, float, float, float, float, float]:
    """The contact service's no-contact bound (:mod:`services.contact`, the adaptive step) on Python floats: the
    reference of the compiled :func:`dynamics.contact_kernels.coast_bound` (equal bit for bit).

    The arm's and the orbiter's limits a coasting step is checked against (twice today's wrench about the CoM and
    the orbiter sample's accelerations, plus a floor), then for each payload point its slack (how far it may move
    with every wall still unable to act: :func:`surface_slack` with ``mode`` 0, its distance beyond ``margin`` in
    front of each wall with ``mode`` 1, or outside its ball, the larger; with ``mode`` 2 outside its ball only),
    its speed relative to the orbiter's coincident point and a bound ``A`` on that speed's rate (the payload's and
    the orbiter's accelerations at the point, their centripetal and Coriolis terms, plus ``accel_floor``): no
    point reaches a wall within :func:`reach_time` of the speed, ``A`` and the slack less ``pos_floor`` and the
    orbiter's prediction error over a sample. The evaluated contact leads by ``h/2``: the span is that time less
    ``h``, at most ``coast_max``.

    Parameters
    ----------
    T, O : sequence of 18 float
        The payload's and the orbiter's CoM position (3), ``R_WB`` row-major (9), CoM velocity (3) and angular
        velocity in W (3). [m, -, m/s, rad/s]
    L : sequence of 12 float
        L's origin in W (3) and ``R_WL`` row-major (9). [m, -]
    F_T : sequence of 6 float
        The wrench on the payload about its CoM over the last step, ``[τ; f]`` in W (the arm's alone). [N·m, N]
    a_T : sequence of 3 float
        The payload's CoM acceleration under it (:func:`dynamics.rigid_body.accelerations_rows`). [m/s²]
    a_O, wd_O : sequence of 3 float
        The orbiter sample's CoM acceleration in W and ``ẇ_WO_O``. [m/s², rad/s²]
    scalars : sequence of 10 float
        ``(H_O, h, mass, I_min, I_max, coast_max, drift, accel_floor, pos_floor, margin)``: the orbiter's coupling
        period and the step [s], the payload's mass [kg] and smallest and largest principal moments [kg·m²], the
        longest coasting span [s], how far the payload's CoM may move over it [m], the floors of the acceleration
        [m/s²] and displacement [m] bounds, and the margin in front of a wall (``mode`` 1) [m].
    mode : int
        0 footprint (:func:`surface_slack`), 1 front, 2 the ball only (no walls).
    points : sequence of (p_ToPo_T, center_L, radius, walls)
        Each payload point in T [m], its ball in L (centre [m], radius [m]; the slack is outside it) and its walls,
        each ``(sx, sy, sz, nx, ny, nz, radius, depth)`` in L (:func:`point_plane_rows`'s).

    Returns
    -------
    code : int
        0 the payload may coast ``span``; 1 it may not (too fast, or the span is shorter than ``h``).
    span, f_max, tau_max, a_O_max, wd_O_max : float
        The span [s] (0 with code 1), the arm's force [N] and moment about the CoM [N·m] a coasting step allows,
        and the orbiter sample's acceleration [m/s²] and angular acceleration [rad/s²] it allows.

    Raises
    ------
    ValueError
        If a point's speed or acceleration bound is not finite (:func:`reach_time`).
    """
    from dynamics.rigid_body import velocity_at_rows  # (rigid_body does not import this module)
    from dynamics.spatial import pose_apply_inverse_rows, pose_apply_rows

    H_O, h, mass, I_min, I_max, coast_max, drift, accel_floor, pos_floor, margin = scalars
    pT, RT, vT, wT_W = T[0:3], T[3:12], T[12:15], T[15:18]
    pO, vO, wO_W = O[0:3], O[12:15], O[15:18]
    p_L, R_WL = L[0:3], L[3:12]
    a_O_max = 2.0 * _norm3(a_O) + 1.0e-4
    wd_O_max = 2.0 * _norm3(wd_O) + 1.0e-6
    f, tau = _norm3(F_T[3:]), _norm3(F_T[:3])
    f_max, tau_max = 2.0 * f + 1.0, 2.0 * tau + 1.0
    if _norm3(vT) * coast_max > drift:
        return 1, 0.0, f_max, tau_max, a_O_max, wd_O_max
    a_T_max = _norm3(a_T) + (f + f_max) / mass
    wT, wO = _norm3(wT_W), _norm3(wO_W)
    wd_T_max = (tau_max + I_max * wT * wT) / I_min
    wT_max, wO_max = wT + wd_T_max * coast_max, wO + wd_O_max * coast_max
    tau_c = math.inf
    for p_ToPo_T, ctr, radius_ball, walls in points:
        P = pose_apply_rows(pT, RT, p_ToPo_T)
        x0, x1, x2 = pose_apply_inverse_rows(p_L, R_WL, P)
        slack = dist3(x0, x1, x2, ctr[0], ctr[1], ctr[2]) - radius_ball  # outside the ball
        if mode != 2:
            near = math.inf
            for sx, sy, sz, nx, ny, nz, radius, depth in walls:
                dx, dy, dz = x0 - sx, x1 - sy, x2 - sz
                if mode == 0:
                    near = min(near, surface_slack(dx, dy, dz, nx, ny, nz, radius, depth))
                else:
                    near = min(near, dx * nx + dy * ny + dz * nz - margin)
            slack = max(slack, near)
        vP, vS = velocity_at_rows(pT, vT, wT_W, P), velocity_at_rows(pO, vO, wO_W, P)
        speed = math.sqrt((vP[0] - vS[0]) ** 2 + (vP[1] - vS[1]) ** 2 + (vP[2] - vS[2]) ** 2)
        rho = _norm3(p_ToPo_T)
        r_O = dist3(P[0], P[1], P[2], pO[0], pO[1], pO[2]) + 1.0  # within 1 m of here (speed below 10 m/s)
        if speed * coast_max > 1.0:
            return 1, 0.0, f_max, tau_max, a_O_max, wd_O_max
        A = (a_T_max + wd_T_max * rho + wT_max * wT_max * rho
             + a_O_max + wd_O_max * r_O + wO_max * wO_max * r_O + 2.0 * wO_max * (speed + 1.0)
             + accel_floor)
        # the orbiter seen through its samples' predictions: a new sample moves L by at most this
        jump = (a_O_max + wd_O_max * r_O) * (H_O * H_O + 2.0 * H_O * coast_max)
        tau_c = min(tau_c, reach_time(speed, A, slack - pos_floor - jump))
    span = min(tau_c - h, coast_max)
    if span < h:
        return 1, 0.0, f_max, tau_max, a_O_max, wd_O_max
    return 0, span, f_max, tau_max, a_O_max, wd_O_max


def _norm3(x: Sequence[float]) -> float:
    """Euclidean norm of three floats (``sqrt(x0² + x1² + x2²)``, products summed left to right)."""
    return math.sqrt(x[0] * x[0] + x[1] * x[1] + x[2] * x[2])


# ---------------------------------------------------------------- capture


@dataclass(frozen=True, slots=True)
class CaptureEnvelope:
    """Capture envelope of the end effector around the grapple fixture.

    The approach axis is E's x axis (the wrist roll axis of the SRMS); at nominal capture
    E and G coincide. Defaults: ±0.10 m lateral, ±10° tilt (reference README, assumed),
    ±15° roll, 0.15 m along the axis, 0.03 m/s and 0.5 °/s relative rates (assumed).

    Attributes
    ----------
    lateral : float
        Largest offset of Go from E's x axis. [m]
    axial : float
        Largest ``|x|`` of Go in E (snare depth). [m]
    tilt : float
        Largest angle between E's and G's x axes (pitch/yaw misalignment). [rad]
    roll : float
        Largest roll misalignment about the axis. [rad]
    rate_lin, rate_ang : float
        Largest relative translational [m/s] and angular [rad/s] rate of G with respect to E.
    """

    lateral: float = 0.10
    axial: float = 0.15
    tilt: float = float(np.radians(10.0))
    roll: float = float(np.radians(15.0))
    rate_lin: float = 0.03
    rate_ang: float = float(np.radians(0.5))


def _as_pose(X: ArrayLike, name: str) -> Array:
    a = np.asarray(X, dtype=np.float64)
    if a.shape != (4, 4) or not np.all(np.isfinite(a)):
        raise ShapeError(f"{name}: expected a finite (4, 4) pose, got shape {a.shape}")
    return a


def capture_check(X_WE: ArrayLike, X_WG: ArrayLike, V_WE_W: ArrayLike, V_WG_W: ArrayLike,
                  env: CaptureEnvelope) -> tuple[bool, str, dict[str, float]]:
    """Is the grapple fixture G inside the end effector's capture envelope?

    Parameters
    ----------
    X_WE, X_WG : array_like, shape (4, 4)
        Poses of the end effector and the grapple fixture.
    V_WE_W : array_like, shape (6,)
        Spatial velocity of E at Eo, [ω; v]. [rad/s, m/s]
    V_WG_W : array_like, shape (6,)
        Spatial velocity of the payload at the point Eo (the material point of the
        payload that coincides with Eo), [ω; v]. [rad/s, m/s]
    env : CaptureEnvelope

    Returns
    -------
    ok : bool
    reason : str
        "" when inside; otherwise every violated limit, "; "-joined, with value and limit.
    metrics : dict[str, float]
        lateral, axial [m], tilt, roll [rad], rate_lin [m/s], rate_ang [rad/s].

    Raises
    ------
    ShapeError
        On wrong shapes.
    """
    XE = _as_pose(X_WE, "X_WE")
    XG = _as_pose(X_WG, "X_WG")
    R_EG = XE[:3, :3].T @ XG[:3, :3]
    p = XE[:3, :3].T @ (XG[:3, 3] - XE[:3, 3])
    xg = R_EG[:, 0]
    tilt = float(np.arctan2(np.linalg.norm(np.cross([1.0, 0.0, 0.0], xg)), xg[0]))
    # roll: rotation about x left after removing the tilt (swing-twist decomposition)
    q = rotation_to_quat(R_EG)
    roll = float(2.0 * np.arctan2(abs(q[1]), abs(q[0])))
    dV = as_vector(V_WG_W, 6, "V_WG_W") - as_vector(V_WE_W, 6, "V_WE_W")
    m = {"lateral": float(np.hypot(p[1], p[2])), "axial": float(abs(p[0])), "tilt": tilt, "roll": roll,
         "rate_lin": float(np.linalg.norm(dV[3:])), "rate_ang": float(np.linalg.norm(dV[:3]))}
    units = {"lateral": "m", "axial": "m", "tilt": "rad", "roll": "rad", "rate_lin": "m/s", "rate_ang": "rad/s"}
    bad = [f"{k} {m[k]:.4g} {units[k]} > {getattr(env, k):.4g}" for k in units if m[k] > getattr(env, k)]
    return not bad, "; ".join(bad), m


@dataclass(frozen=True, slots=True)
class LockResult:
    """Result of :func:`plastic_lock`.

    Attributes
    ----------
    V_O_post, V_T_post : ndarray, shape (6,)
        Twists of the orbiter and the payload at the lock point C after the lock, equal.
    impulse_O : ndarray, shape (6,)
        Impulse on the orbiter about C, ``[∫τ; ∫f]``; the payload receives its opposite. [N·m·s, N·s]
    energy_loss : float
        Kinetic energy lost, ``½ ΔVᵀ (K_O⁻¹ + K_T⁻¹)⁻¹ ΔV`` ≥ 0 with ΔV the pre-lock relative twist. [J]
    """

    V_O_post: Array
    V_T_post: Array
    impulse_O: Array
    energy_loss: float


def plastic_lock(m_O: float, I_O_W: ArrayLike, p_OoC_W: ArrayLike, V_O_C: ArrayLike,
                 m_T: float, I_T_W: ArrayLike, p_ToC_W: ArrayLike, V_T_C: ArrayLike) -> LockResult:
    """Plastic 6-DOF lock of two rigid bodies at point C (snare closed on a braked arm).

    With the arm massless and its brakes on (joint resistance mu = I) the end effector is
    rigid with the orbiter, so the Ex-GIT of the chaser at the hand is the orbiter's
    rigid-body mobility at C, ``G* = K_O⁻¹`` (Yoshida seed 000 eq. 14 with eq. 15's
    massless arm), and the payload's inertia at C is ``K_T`` (eqs. 21–23,
    :func:`dynamics.exgit.contact_inertia`). The plastic collision (eqs. 26–28,
    :func:`dynamics.exgit.collision`) then gives the common post-impact twist.
    With the brakes off a massless arm transmits no impulse (``G* → ∞``); the caller
    skips the lock then.

    Parameters
    ----------
    m_O, m_T : float
        Masses. [kg]
    I_O_W, I_T_W : array_like, shape (3, 3)
        Inertias about the CoMs, in W. [kg·m²]
    p_OoC_W, p_ToC_W : array_like, shape (3,)
        From each CoM to C. [m]
    V_O_C, V_T_C : array_like, shape (6,)
        Twists of each body at C, [ω; v_C]. [rad/s, m/s]

    Returns
    -------
    LockResult

    Raises
    ------
    ModelError, ShapeError, SingularityError
        On inadmissible masses or inertias, wrong shapes.
    """
    K_O = contact_inertia(m_O, I_O_W, p_OoC_W)
    K_T = contact_inertia(m_T, I_T_W, p_ToC_W)
    Vo = as_vector(V_O_C, 6, "V_O_C")
    Vt = as_vector(V_T_C, 6, "V_T_C")
    G_star = np.linalg.inv(K_O)
    Vo1, Vt1, imp = collision(G_star, K_T, Vo, Vt, "plastic")
    dV = Vt - Vo
    Mred = np.linalg.inv(np.linalg.inv(K_O) + np.linalg.inv(K_T))
    return LockResult(Vo1, Vt1, imp, float(0.5 * dV @ Mred @ dV))


# ---------------------------------------------------------------- latches


@dataclass(frozen=True, slots=True)
class LatchCriteria:
    """When the latches may close: B close to its berthed pose in L and slow.

    Attributes
    ----------
    position : float
        Largest distance of Bo from its berthed position. [m]
    angle : float
        Largest rotation of B from its berthed attitude. [rad]
    rate_lin, rate_ang : float
        Largest relative rates of B with respect to L. [m/s, rad/s]
    """

    position: float = 0.02
    angle: float = float(np.radians(1.0))
    rate_lin: float = 0.01
    rate_ang: float = float(np.radians(0.2))


def latch_check(X_LB: ArrayLike, V_LB_L: ArrayLike, X_LB_berthed: ArrayLike,
                crit: LatchCriteria) -> tuple[bool, str]:
    """Latch criteria: pose error and relative rates within :class:`LatchCriteria`.

    Parameters
    ----------
    X_LB : array_like, shape (4, 4)
        Pose of the berthing interface B in the latch frame L.
    V_LB_L : array_like, shape (6,)
        Twist of B relative to L at Bo, in L, [ω; v]. [rad/s, m/s]
    X_LB_berthed : array_like, shape (4, 4)
        Berthed pose of B in L.
    crit : LatchCriteria

    Returns
    -------
    ok : bool
    reason : str
        The violated criteria with values, "" if none.
    """
    X = _as_pose(X_LB, "X_LB")
    Xb = _as_pose(X_LB_berthed, "X_LB_berthed")
    V = as_vector(V_LB_L, 6, "V_LB_L")
    vals = {"position": float(np.linalg.norm(X[:3, 3] - Xb[:3, 3])),
            "angle": float(np.linalg.norm(rotation_error(Xb[:3, :3], X[:3, :3]))),
            "rate_lin": float(np.linalg.norm(V[3:])), "rate_ang": float(np.linalg.norm(V[:3]))}
    bad = [f"{k} {v:.4g} > {getattr(crit, k):.4g}" for k, v in vals.items() if v > getattr(crit, k)]
    return not bad, "; ".join(bad)


def rotation_error(R_WA: ArrayLike, R_WB: ArrayLike) -> Array:
    """Rotation vector θ (in W) that takes A's attitude to B's: ``R_WB = exp([θ×]) R_WA``. [rad]

    The SO(3) log map of ``R = R_WB R_WAᵀ`` (:func:`dynamics.spatial.rotation_vector`).

    Raises
    ------
    ShapeError
        If ``R_WA`` or ``R_WB`` is not (3, 3).
    """
    R_A = np.asarray(R_WA, dtype=np.float64)
    R_B = np.asarray(R_WB, dtype=np.float64)
    if R_A.shape != (3, 3) or R_B.shape != (3, 3):
        raise ShapeError(f"R_WA, R_WB: expected shapes (3, 3), got {R_A.shape}, {R_B.shape}")
    return rotation_vector(R_B @ R_A.T)


def latch_wrench(X_WL: ArrayLike, V_WL_B: ArrayLike, X_WB: ArrayLike, V_WB_W: ArrayLike, X_LB_ref: ArrayLike,
                 k_lin: float, k_rot: float, c_lin: float, c_rot: float) -> Array:
    """Wrench of the closed latches on the payload: a stiff 6-DOF spring–damper about a frozen X_LB.

    ``f = −k_lin (p_B − p_B,ref) − c_lin (v_B − v_L(Bo))``, ``τ = −k_rot θ − c_rot (ω_B − ω_L)``
    with θ the rotation vector from the reference attitude of B to its actual attitude
    (:func:`rotation_error`). The orbiter receives the opposite wrench about Bo.

    Parameters
    ----------
    X_WL : array_like, shape (4, 4)
        Latch frame pose.
    V_WL_B : array_like, shape (6,)
        Twist of the orbiter at the point Bo, [ω_O; v_O(Bo)]. [rad/s, m/s]
    X_WB : array_like, shape (4, 4)
        Berthing interface pose.
    V_WB_W : array_like, shape (6,)
        Twist of the payload at Bo. [rad/s, m/s]
    X_LB_ref : array_like, shape (4, 4)
        Frozen pose of B in L held by the latches.
    k_lin, k_rot, c_lin, c_rot : float
        Stiffness [N/m, N·m/rad] and damping [N·s/m, N·m·s/rad].

    Returns
    -------
    F_Bo_W : ndarray, shape (6,)
        Wrench on the payload about Bo, [τ; f]. [N·m, N]
    """
    XL = _as_pose(X_WL, "X_WL")
    XB = _as_pose(X_WB, "X_WB")
    Xr = XL @ _as_pose(X_LB_ref, "X_LB_ref")
    V_ref = as_vector(V_WL_B, 6, "V_WL_B").tolist()
    F = latch_wrench_rows(XB[:3, 3].tolist(), tuple(XB[:3, :3].ravel().tolist()),
                          as_vector(V_WB_W, 6, "V_WB_W").tolist(), Xr[:3, 3].tolist(),
                          tuple(Xr[:3, :3].ravel().tolist()), V_ref, k_lin, k_rot, c_lin, c_rot)
    return np.array(F)


def latch_wrench_rows(p_WoBo_W: list[float], R_WB: tuple[float, ...], V_WB_W: list[float], p_WoRo_W: list[float],
                      R_WR: tuple[float, ...], V_WR_W: list[float], k_lin: float, k_rot: float, c_lin: float,
                      c_rot: float) -> list[float]:
    """:func:`latch_wrench` on Python floats, about a set-point frame R (the hot path).

    ``f = −k_lin (p_Bo − p_Ro) − c_lin (v_B − v_R)``, ``τ = −k_rot θ − c_rot (ω_B − ω_R)``,
    θ the rotation vector from R's attitude to B's (:func:`rotation_error`).

    Parameters
    ----------
    p_WoBo_W : list of 3 float
        Position of Bo. [m]
    R_WB : tuple of 9 float
        ``R_WB`` row-major.
    V_WB_W : list of 6 float
        Twist of the payload at Bo, [ω; v]. [rad/s, m/s]
    p_WoRo_W, R_WR : list of 3 float, tuple of 9 float
        Pose of the set point R (where the latches hold Bo). [m]
    V_WR_W : list of 6 float
        Twist of the set point, [ω; v] at Bo: the orbiter's motion at Bo plus the latch
        drive's own rate. [rad/s, m/s]
    k_lin, k_rot, c_lin, c_rot : float
        Stiffness [N/m, N·m/rad] and damping [N·s/m, N·m·s/rad].

    Returns
    -------
    list of 6 float
        Wrench on the payload about Bo, in W, [τ; f]. [N·m, N]
    """
    M = mat_mat_t_rows(R_WB, R_WR)
    th = rotation_vector_rows(*M)  # R_WB R_WRᵀ = exp([θ×])
    th0, th1, th2 = rotation_vector(np.reshape(M, (3, 3))).tolist() if th is None else th
    dV = [a - b for a, b in zip(V_WB_W, V_WR_W, strict=True)]
    return [-k_rot * th0 - c_rot * dV[0], -k_rot * th1 - c_rot * dV[1], -k_rot * th2 - c_rot * dV[2],
            -k_lin * (p_WoBo_W[0] - p_WoRo_W[0]) - c_lin * dV[3], -k_lin * (p_WoBo_W[1] - p_WoRo_W[1]) - c_lin * dV[4],
            -k_lin * (p_WoBo_W[2] - p_WoRo_W[2]) - c_lin * dV[5]]


def latch_constraint_wrench_rows(mass: float, I_T_T: tuple[float, ...], p_WoTo_W: Sequence[float],
                                 R_WT: tuple[float, ...], w_WT_W: Sequence[float], a_free_W: list[float],
                                 wdot_free_W: list[float],
                                 p_WoBo_W: list[float], R_WB: tuple[float, ...], V_WB_W: list[float],
                                 p_WoRo_W: list[float], R_WR: tuple[float, ...], V_WR_W: list[float],
                                 A_WR_W: list[float], alpha: float, beta: float) -> list[float]:
    """The latches as a constraint: the wrench that makes a free rigid body's frame B follow a set point R.

    A loop closed by a weld of B (on the payload T) to R (moving with the orbiter, plus the
    latches' stroke), solved for the one free body it leaves here (seed 004 eqs. 22–30, with the
    other side's motion given: the KKT system reduces to T's own inertia). The body's
    acceleration is set to R's with Baumgarte's correction (eq. 26, ``D_err = 2α``, ``K_err = β²``)::

        ω̇_T = ω̇_R − 2α (ω_B − ω_R) − β² θ,   a_B = a_R − 2α (v_B − v_R) − β² (p_B − p_R)

    (θ the rotation vector of ``R_WB R_WRᵀ``; a_B classical), ``a_T = a_B − ω̇ × r − ω × (ω × r)``
    with ``r = p_B − p_T``, and the wrench is what changes T's free accelerations (under every
    other force) into those: ``f = m (a_T − a_free)``, ``τ_T = I_W (ω̇_T − ω̇_free)``, the
    accelerations being linear in the applied wrench.

    Parameters
    ----------
    mass : float
        [kg]
    I_T_T : tuple of 9 float
        Inertia about the CoM in T, row-major. [kg·m²]
    p_WoTo_W, R_WT, w_WT_W : list of 3 float, tuple of 9 float, list of 3 float
        T's CoM, attitude and angular velocity (in W). [m, -, rad/s]
    a_free_W, wdot_free_W : list of 3 float
        T's CoM acceleration and angular acceleration (in W) under every force but this one. [m/s², rad/s²]
    p_WoBo_W, R_WB, V_WB_W : list of 3 float, tuple of 9 float, list of 6 float
        B's pose and its twist at Bo, [ω; v]. [m, -, rad/s, m/s]
    p_WoRo_W, R_WR, V_WR_W, A_WR_W : list of 3 float, tuple of 9 float, list of 6 float, list of 6 float
        The set point's pose, and its twist and classical acceleration at the point of it at Bo,
        [ω; v] and [ω̇; a]. [m, -, rad/s, m/s, rad/s², m/s²]
    alpha, beta : float
        Baumgarte's gains. [1/s]

    Returns
    -------
    list of 6 float
        Wrench on T about Bo, in W, [τ; f]. [N·m, N]
    """
    M = mat_mat_t_rows(R_WB, R_WR)
    th = rotation_vector_rows(*M)  # R_WB R_WRᵀ = exp([θ×])
    th = rotation_vector(np.reshape(M, (3, 3))).tolist() if th is None else th
    d2a, b2 = 2.0 * alpha, beta * beta
    wd = [A_WR_W[i] - d2a * (V_WB_W[i] - V_WR_W[i]) - b2 * th[i] for i in range(3)]
    aB = [A_WR_W[3 + i] - d2a * (V_WB_W[3 + i] - V_WR_W[3 + i]) - b2 * (p_WoBo_W[i] - p_WoRo_W[i]) for i in range(3)]
    r = [p_WoBo_W[i] - p_WoTo_W[i] for i in range(3)]
    w = w_WT_W
    wr = cross_rows(w[0], w[1], w[2], r[0], r[1], r[2])
    c1 = cross_rows(wd[0], wd[1], wd[2], r[0], r[1], r[2])
    c2 = cross_rows(w[0], w[1], w[2], wr[0], wr[1], wr[2])
    f = [mass * (aB[i] - c1[i] - c2[i] - a_free_W[i]) for i in range(3)]
    dw = mat_t_vec_rows(R_WT, wd[0] - wdot_free_W[0], wd[1] - wdot_free_W[1], wd[2] - wdot_free_W[2])
    tT = mat_vec_rows(I_T_T, *dw)
    t = mat_vec_rows(R_WT, *tT)                        # about the CoM, in W
    m_ = cross_rows(-r[0], -r[1], -r[2], f[0], f[1], f[2])   # referred to Bo: τ_B = τ_T + (p_T − p_B) × f
    return [t[0] + m_[0], t[1] + m_[1], t[2] + m_[2], f[0], f[1], f[2]]


def smooth_stroke(tau: float) -> tuple[float, float]:
    """Quintic rest-to-rest profile ``s(τ) = 10τ³ − 15τ⁴ + 6τ⁵`` on [0, 1] and its slope ``ds/dτ``.

    Zero velocity and acceleration at both ends, jerk bounded (``|d³s/dτ³| ≤ 60``); clamped
    outside [0, 1] (``s = 0`` before, ``1`` after, slope 0).
    """
    if tau <= 0.0:
        return 0.0, 0.0
    if tau >= 1.0:
        return 1.0, 0.0
    t2 = tau * tau
    return t2 * tau * (10.0 + tau * (-15.0 + 6.0 * tau)), 30.0 * t2 * (1.0 - tau) * (1.0 - tau)


@dataclass(frozen=True, slots=True)
class LatchDrive:
    """The latches' closing stroke: the set point of B in L driven from its capture pose to the berthed pose.

    Real berthing latches draw the trunnions home as they close. The latch spring–damper
    (:func:`latch_wrench_rows`) holds B at a set point that moves, over ``close_time``, from
    the pose in which the latches closed, ``X_LB_start``, to ``X_LB_end`` along
    :func:`smooth_stroke`: the position on the straight line, the attitude on the geodesic
    ``R(s) = R₀ exp(s [θ×])``, ``θ = log(R₀ᵀ R₁)`` (in B₀). The set point's rate is part of the
    damper's reference, so the drive pulls without a velocity lag.

    Attributes
    ----------
    X_LB_start, X_LB_end : ndarray, shape (4, 4)
        Set point at the start and the end of the stroke.
    close_time : float
        Stroke time, > 0. [s]

    Raises
    ------
    ModelError
        If ``close_time`` is not positive and finite.
    ShapeError
        If a pose is not a finite (4, 4) array.
    """

    X_LB_start: Array
    X_LB_end: Array
    close_time: float
    _q0: tuple[float, ...] = field(init=False, repr=False, compare=False)
    _theta: tuple[float, ...] = field(init=False, repr=False, compare=False)
    _R0_theta: tuple[float, ...] = field(init=False, repr=False, compare=False)
    _p0: tuple[float, ...] = field(init=False, repr=False, compare=False)
    _dp: tuple[float, ...] = field(init=False, repr=False, compare=False)
    _end: tuple[list[float], tuple[float, ...]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not (math.isfinite(self.close_time) and self.close_time > 0.0):
            raise ModelError(f"LatchDrive.close_time: expected > 0 s, got {self.close_time!r}")
        X0 = _as_pose(self.X_LB_start, "X_LB_start")
        X1 = _as_pose(self.X_LB_end, "X_LB_end")
        theta = rotation_vector(X0[:3, :3].T @ X1[:3, :3])
        object.__setattr__(self, "X_LB_start", X0.copy())
        object.__setattr__(self, "X_LB_end", X1.copy())
        object.__setattr__(self, "_q0", tuple(rotation_to_quat(X0[:3, :3]).tolist()))
        object.__setattr__(self, "_theta", tuple(theta.tolist()))
        object.__setattr__(self, "_R0_theta", tuple((X0[:3, :3] @ theta).tolist()))
        object.__setattr__(self, "_p0", tuple(X0[:3, 3].tolist()))
        object.__setattr__(self, "_dp", tuple((X1[:3, 3] - X0[:3, 3]).tolist()))
        object.__setattr__(self, "_end", (X1[:3, 3].tolist(), tuple(X1[:3, :3].ravel().tolist())))

    def setpoint(self, t: float) -> tuple[list[float], tuple[float, ...], list[float], list[float]]:
        """Set point of B in L at ``t`` [s] since the latches closed.

        Returns
        -------
        p_LoRo_L : list of 3 float
            [m]
        R_LR : tuple of 9 float
            Row-major.
        v_LRo_L, w_LR_L : list of 3 float
            Its velocity and angular velocity relative to L, in L. [m/s, rad/s]
        """
        s, ds = smooth_stroke(t / self.close_time)
        if s >= 1.0:
            return list(self._end[0]), self._end[1], [0.0] * 3, [0.0] * 3
        sd = ds / self.close_time
        p = [a + s * d for a, d in zip(self._p0, self._dp, strict=True)]
        v = [sd * d for d in self._dp]
        th = self._theta
        q = quat_integrate_rows(self._q0, th[0], th[1], th[2], s)
        return p, rotation_rows(*q), v, [sd * x for x in self._R0_theta]

    def acceleration(self, t: float) -> tuple[list[float], list[float]]:
        """The set point's acceleration relative to L, in L, at ``t`` [s]: ``(a_LRo_L, ẇ_LR_L)``
        (the quintic's ``s̈ = 60 τ (1 − τ)(1 − 2τ) / T²`` along the line and the fixed rotation axis). [m/s², rad/s²]"""
        tau = t / self.close_time
        if not 0.0 < tau < 1.0:
            return [0.0] * 3, [0.0] * 3
        sdd = 60.0 * tau * (1.0 - tau) * (1.0 - 2.0 * tau) / (self.close_time * self.close_time)
        return [sdd * d for d in self._dp], [sdd * x for x in self._R0_theta]


# ---------------------------------------------------------------- Cyril's chaser


def orbiter_chaser(m_O: float, I_O_W: ArrayLike, p_OoC_W: ArrayLike) -> tuple[Array, Array]:
    """The orbiter as a chaser for :mod:`dynamics.impact`: generalized mass and contact Jacobian.

    Generalized velocity ``ψ̇ = [ω_O_W; v_Oo_W]`` (6,), so ``M = diag(I_O_W, m_O I₃)`` and the
    contact-point velocity ``v_C = v_Oo + ω × r = J ψ̇`` with ``J = [−[r×], I₃]``.

    Parameters
    ----------
    m_O : float
        [kg], > 0.
    I_O_W : array_like, shape (3, 3)
        [kg·m²], about the CoM, in W.
    p_OoC_W : array_like, shape (3,)
        r, from the CoM to the contact point. [m]

    Returns
    -------
    M : ndarray, shape (6, 6)
    J : ndarray, shape (3, 6)

    Raises
    ------
    ModelError
        If the mass is not positive.
    """
    if not (np.isfinite(m_O) and m_O > 0.0):
        raise ModelError(f"m_O: mass must be > 0, got {m_O}")
    I = np.asarray(I_O_W, dtype=np.float64)
    if I.shape != (3, 3):
        raise ShapeError(f"I_O_W: expected shape (3, 3), got {I.shape}")
    M = np.zeros((6, 6))
    M[:3, :3] = I
    M[3:, 3:] = m_O * np.eye(3)
    J = np.hstack([-skew(as_vector(p_OoC_W, 3, "p_OoC_W")), np.eye(3)])
    return M, J
