"""Rig kinematics: the 6-6 Stewart platform and a generic servo rig, and the pose mapping.

Frames: R rig base, P platform; ``X_RP`` (4, 4) is the platform pose in the base.
A rig maps ``X_RP`` to axis values (leg lengths [m] for a Stewart platform) by
``inverse`` and back by ``forward``; both rigs share the limit and workspace checks
(:class:`RigLimits`). :class:`PoseMap` turns the relative pose of two simulated frames
(e.g. payload berthing interface B in orbiter latch L, ``X_LB``) into a rig pose and
clamps poses outside the workspace toward neutral.

Rotations use :mod:`dynamics.spatial`; no I/O.

Such a platform is how docking and berthing mechanisms are tested in the loop: seed
004_f37f37f891176823.txt (Quiocho et al., facilities list) names the SDTS, a Stewart
platform simulating SRMS/SSRMS docking and berthing interaction.

References
----------
Stewart, "A platform with six degrees of freedom", Proc. IMechE 180 (1965).
Merlet, *Parallel Robots*, 2nd ed., Springer 2006: inverse kinematics §3.1 (leg vector
``T + R p_k − b_k``), inverse Jacobian §6.1 (rows ``[(R p_k × u_k)ᵀ, u_kᵀ]`` for a
twist [ω; v]), forward kinematics by Newton–Raphson §4.3.
"""

from __future__ import annotations

import binascii
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.linalg.lapack import dgesv as _dgesv

from dynamics import kernel_module
from dynamics.spatial import (
    as_vector,
    mat_t_vec_rows,
    pose,
    pose_from_vector,
    pose_vector,
    quat_integrate_rows,
    quat_to_rotation,
    rotation_rows,
    rotation_to_quat,
    rotation_vector,
    rotation_vector_rows,
)
from errors import ConfigError, NoSolutionError, ShapeError

__all__ = [
    "RigLimits",
    "StewartRig",
    "ServoRig",
    "PoseMap",
    "ClampResult",
    "GeodesicPath",
    "last_feasible",
    "pose_vector",
    "pose_from_vector",
    "axis_map_matrix",
]

Array = NDArray[np.float64]

LAST_FEASIBLE_TOL = 1e-10
"""The default ``tol`` of :func:`last_feasible` (the clamp's search). [-]"""
LAST_FEASIBLE_MAX_ITER = 60
"""The default ``max_iter`` of :func:`last_feasible`."""
_NO_REF = np.zeros((6, 6))
"""The kernels' reference Jacobian argument before any singular values were computed (not read)."""


def _kernels() -> ModuleType:
    """The compiled kernels (:mod:`dynamics.stewart_kernels`), imported on first use
    (:func:`dynamics.kernel_module`): a configuration check builds rigs and steps none."""
    return kernel_module("stewart_kernels")


def _solve(A: Array, B: Array) -> Array:
    """``np.linalg.solve(A, B)`` for float64 ``A`` (n, n) and ``B`` (n, k): LAPACK's ``dgesv``
    through :mod:`scipy.linalg.lapack`, without ``np.linalg.solve``'s per-call checks (a
    quarter of its cost for 6×6).

    Raises
    ------
    numpy.linalg.LinAlgError
        If ``A`` is singular, or the solution is not finite.
    """
    _, _, x, info = _dgesv(A, B)
    if info != 0 or not np.isfinite(x).all():
        raise np.linalg.LinAlgError(f"dgesv: singular matrix (info {info})" if info else "dgesv: not finite")
    return x


def _as_pose(X: ArrayLike, name: str) -> Array:
    a = np.asarray(X, dtype=np.float64)
    if a.shape != (4, 4) or not all(map(math.isfinite, a.ravel().tolist())):  # (floats: cheaper than numpy's)
        raise ShapeError(f"{name}: expected a finite (4, 4) pose, got shape {a.shape}")
    return a


@dataclass(frozen=True)
class RigLimits:
    """Axis limits shared by every rig.

    Attributes
    ----------
    lo, hi : ndarray, shape (n,)
        Stroke (axis range) per axis [m or rad].
    v_max, a_max : ndarray, shape (n,)
        Axis speed and acceleration limits [m/s, m/s² or rad/s, rad/s²].
    j_max : ndarray, shape (n,)
        Jerk limit used by the safety ramp [m/s³ or rad/s³].
    columns : tuple of 5 lists
        The same as Python floats (lo, hi, v_max, a_max, j_max), for per-axis loops.

    Raises
    ------
    ConfigError
        If shapes differ, ``hi <= lo`` or a rate limit is not positive; the message
        names the field and its value.
    """

    lo: Array
    hi: Array
    v_max: Array
    a_max: Array
    j_max: Array
    columns: tuple = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        n = np.asarray(self.lo).shape
        problems = []
        for name in ("lo", "hi", "v_max", "a_max", "j_max"):  # plain arrays, float64
            object.__setattr__(self, name, np.asarray(getattr(self, name), dtype=np.float64))
        for name in ("lo", "hi", "v_max", "a_max", "j_max"):
            val = np.asarray(getattr(self, name), dtype=np.float64)
            if val.shape != n or not np.all(np.isfinite(val)):
                problems.append(f"limits.{name}: expected {n} finite values, got {val.tolist()}")
            elif name not in ("lo", "hi") and not np.all(val > 0):
                problems.append(f"limits.{name}: must be > 0, got {val.tolist()}")
        if not problems and not np.all(np.asarray(self.hi) > np.asarray(self.lo)):
            problems.append(f"limits.hi {np.asarray(self.hi).tolist()} must exceed "
                            f"limits.lo {np.asarray(self.lo).tolist()}")
        if problems:
            raise ConfigError("; ".join(problems), problems)
        object.__setattr__(self, "columns", tuple(getattr(self, k).tolist()
                                                  for k in ("lo", "hi", "v_max", "a_max", "j_max")))

    @classmethod
    def uniform(cls, n: int, lo: float, hi: float, v_max: float, a_max: float, j_max: float) -> RigLimits:
        """The same limits on all ``n`` axes."""
        f = np.full
        return cls(f(n, lo), f(n, hi), f(n, v_max), f(n, a_max), f(n, j_max))

    def within(self, axes: Array) -> bool:
        """True if every axis value (n,) is finite and inside its stroke (the cheap form of
        :meth:`violations`, for loops)."""
        lo, hi = self.columns[:2]
        try:
            return all(a <= h and a >= lo_ for a, lo_, h in zip(axes.tolist(), lo, hi, strict=True))  # NaN: False
        except (ValueError, TypeError):  # another number or shape of axes
            return False

    def violations(self, axes: ArrayLike) -> list[str]:
        """Stroke violations of axis values (n,), one line per axis; empty if within."""
        a = np.asarray(axes, dtype=np.float64)
        if self.within(a):
            return []
        out = [f"axis {i}: {a[i]:.6g} below {self.lo[i]:.6g}" for i in np.flatnonzero(a < self.lo)]
        out += [f"axis {i}: {a[i]:.6g} above {self.hi[i]:.6g}" for i in np.flatnonzero(a > self.hi)]
        if not np.all(np.isfinite(a)):
            out.append(f"axes not finite: {a.tolist()}")
        return out


@dataclass(frozen=True)
class StewartRig:
    """A 6-6 Stewart platform (Gough–Stewart hexapod) in the classic paired layout.

    Base joints ``b_k`` lie on a circle of radius ``r_base`` in the base plane z = 0
    of R; platform joints ``p_k`` on a circle of radius ``r_platform`` in the platform
    plane z = 0 of P. Leg k (pair i = k // 2, sign s = −1 for even k, +1 for odd)
    runs from the base joint at angle ``120° i + s β/2`` to the platform joint at
    ``120° i + s (60° − γ/2)``, with β = ``base_pair_angle`` and γ =
    ``platform_pair_angle`` the angular spacing within a pair (Merlet 2006, §2.2).

    The workspace (:meth:`in_workspace`) is bounded by the leg stroke, the joints'
    cone angles and the conditioning of the inverse Jacobian. Each leg's joints (base
    and platform; spherical or universal) are mounted with their axis along the leg at
    neutral (the usual mounting, which centres the joint's range), and a joint's cone
    angle is the largest angle the leg may make with that axis: at the base
    ``∠(u_k, u_k⁰) ≤ joint_cone_base`` in R, at the platform ``∠(R_RPᵀ u_k, u_k⁰) ≤
    joint_cone_platform`` in P, with ``u_k`` the unit leg vector and ``u_k⁰`` its value at
    neutral (Merlet 2006, §5.2.1: the passive joints' limited mobility as a workspace
    constraint).

    Attributes
    ----------
    r_base, r_platform : float
        Joint circle radii [m].
    base_pair_angle, platform_pair_angle : float
        Angular spacing of the two joints of a pair [rad].
    neutral_height : float
        Height of Po above Ro at neutral (``X_RP0`` = translation (0, 0, h)) [m].
    limits : RigLimits
        Leg stroke (absolute leg lengths [m]), speed, acceleration and jerk limits.
    cond_max : float
        Largest admissible condition number of the inverse Jacobian (workspace check).
    joint_cone_base, joint_cone_platform : float
        Joint cone half-angles, in (0, π] [rad]; π puts no limit.
    """

    r_base: float
    r_platform: float
    base_pair_angle: float
    platform_pair_angle: float
    neutral_height: float
    limits: RigLimits
    cond_max: float = 50.0
    joint_cone_base: float = math.pi
    joint_cone_platform: float = math.pi
    b_R: Array = field(init=False, repr=False)
    p_P: Array = field(init=False, repr=False)
    u0: Array = field(init=False, repr=False)
    _rows: list = field(init=False, repr=False, compare=False)
    _rows_array: Array = field(init=False, repr=False, compare=False)
    _cone_scale: float = field(init=False, repr=False, compare=False)
    _cos_base: float = field(init=False, repr=False, compare=False)
    _cos_platform: float = field(init=False, repr=False, compare=False)
    _cond_ref: tuple | None = field(init=False, repr=False, compare=False, default=None)
    _compiled: bool = field(init=False, repr=False, compare=False, default=False)
    _kargs: tuple = field(init=False, repr=False, compare=False, default=())
    _J: Array = field(init=False, repr=False, compare=False, default_factory=lambda: np.empty((6, 6)))

    def __post_init__(self) -> None:
        problems = []
        for name in ("r_base", "r_platform", "neutral_height", "cond_max"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v > 0):
                problems.append(f"stewart.{name}: must be finite and > 0, got {v}")
        for name in ("base_pair_angle", "platform_pair_angle"):
            v = getattr(self, name)
            if not (math.isfinite(v) and 0 <= v < math.radians(120)):
                problems.append(f"stewart.{name}: must be in [0, 2π/3) rad, got {v}")
        for name in ("joint_cone_base", "joint_cone_platform"):
            v = getattr(self, name)
            if not (math.isfinite(v) and 0 < v <= math.pi):
                problems.append(f"stewart.{name}: must be in (0, π] rad, got {v}")
        if np.asarray(self.limits.lo).shape != (6,):
            problems.append(f"stewart.limits: need 6 legs, got {np.asarray(self.limits.lo).shape}")
        if problems:
            raise ConfigError("; ".join(problems), problems)
        k = np.arange(6)
        s = np.where(k % 2 == 0, -1.0, 1.0)
        base = np.radians(120.0) * (k // 2) + s * self.base_pair_angle / 2
        plat = np.radians(120.0) * (k // 2) + s * (np.radians(60.0) - self.platform_pair_angle / 2)
        object.__setattr__(self, "b_R", self.r_base * np.stack([np.cos(base), np.sin(base), np.zeros(6)], axis=1))
        object.__setattr__(self, "p_P", self.r_platform * np.stack([np.cos(plat), np.sin(plat), np.zeros(6)], axis=1))
        legs0 = self.leg_vectors(self.neutral)
        object.__setattr__(self, "u0", legs0 / np.linalg.norm(legs0, axis=1)[:, None])
        # plain-float copies for _margin: per leg p_k (x, y), b_k, u⁰_k, lo_k, hi_k (ten floats); the cone cosines
        object.__setattr__(self, "_rows", [(*p, *b, *u, lo, hi) for p, b, u, lo, hi in zip(
            self.p_P[:, :2].tolist(), self.b_R.tolist(), self.u0.tolist(), self.limits.lo.tolist(),
            self.limits.hi.tolist(), strict=True)])
        object.__setattr__(self, "_rows_array", np.array(self._rows, dtype=np.float64))  # the kernels' copy
        object.__setattr__(self, "_cone_scale", float(np.mean(np.linalg.norm(legs0, axis=1))))
        for name in ("base", "platform"):
            cone = getattr(self, f"joint_cone_{name}")
            object.__setattr__(self, f"_cos_{name}", math.cos(cone) if cone < math.pi else -math.inf)
        legs = self.inverse(self.neutral)
        bad = self.limits.violations(legs)
        if bad:
            raise ConfigError(f"stewart: neutral pose outside the leg stroke: {bad}", bad)

    @property
    def n_axes(self) -> int:
        """Number of axes (legs)."""
        return 6

    @property
    def neutral(self) -> Array:
        """Neutral platform pose ``X_RP0`` (4, 4)."""
        return pose(np.eye(3), [0.0, 0.0, self.neutral_height])

    @property
    def fingerprint(self) -> int:
        """u32 identifying the geometry and limits (CRC-32 of their rounded values)."""
        vals = [self.r_base, self.r_platform, self.base_pair_angle, self.platform_pair_angle, self.neutral_height]
        vals += np.concatenate([self.limits.lo, self.limits.hi, self.limits.v_max, self.limits.a_max]).tolist()
        text = "stewart6:" + ",".join(f"{v:.6e}" for v in vals)
        if self.joint_cone_base < math.pi or self.joint_cone_platform < math.pi:
            text += f";cones:{self.joint_cone_base:.6e},{self.joint_cone_platform:.6e}"
        return binascii.crc32(text.encode())

    def leg_vectors(self, X_RP: ArrayLike) -> Array:
        """Leg vectors ``l_k = T + R p_k − b_k`` in R, shape (6, 3) [m] (Merlet §3.1)."""
        X = _as_pose(X_RP, "X_RP")
        return X[:3, 3] + self.p_P @ X[:3, :3].T - self.b_R

    def inverse(self, X_RP: ArrayLike) -> Array:
        """Leg lengths (6,) [m] of the platform pose ``X_RP``."""
        return np.linalg.norm(self.leg_vectors(X_RP), axis=1)

    def lengths_jacobian(self, R: Array, T: Array) -> tuple[Array, Array]:
        """Leg lengths (6,) and inverse Jacobian (6, 6) at rotation R, translation T."""
        legs = self._margin(R.tolist(), T.tolist())[1]
        return np.array([leg[0] for leg in legs]), self._jacobian_of(legs)

    @staticmethod
    def _jacobian_of(legs: list[tuple[float, ...]]) -> Array:
        """Inverse Jacobian (6, 6) from :meth:`_margin`'s per-leg values: rows
        ``[(R p_k × u_k)ᵀ, u_kᵀ]``."""
        return np.array([(ry * z - rz * y, rz * x - rx * z, rx * y - ry * x, x, y, z)
                         for _, x, y, z, rx, ry, rz in legs])

    def jacobian(self, X_RP: ArrayLike) -> Array:
        """Inverse Jacobian (6, 6): leg rates ``l̇ = J V_RP_R``, ``V`` = [ω; v] of P at Po in R.

        Row k is ``[(R p_k × u_k)ᵀ, u_kᵀ]`` with ``u_k`` the unit leg vector (Merlet §6.1).
        """
        X = _as_pose(X_RP, "X_RP")
        return self.lengths_jacobian(X[:3, :3], X[:3, 3])[1]

    def joint_angles(self, X_RP: ArrayLike) -> tuple[Array, Array]:
        """Angles (6,), (6,) of each leg to its base and platform joint axes (see the class) [rad]."""
        X = _as_pose(X_RP, "X_RP")
        legs = self.leg_vectors(X)
        u = legs / np.linalg.norm(legs, axis=1)[:, None]
        cb = np.einsum("ij,ij->i", u, self.u0)
        cp = np.einsum("ij,ij->i", u @ X[:3, :3], self.u0)
        return np.arccos(np.clip(cb, -1.0, 1.0)), np.arccos(np.clip(cp, -1.0, 1.0))

    def forward(
        self, legs: ArrayLike, guess: ArrayLike | None = None, *, tol: float = 1e-12, max_iter: int = 20
    ) -> tuple[Array, int]:
        """Platform pose from leg lengths by Newton iteration, warm-started.

        Parameters
        ----------
        legs : array_like, shape (6,)
            Leg lengths [m].
        guess : array_like, shape (4, 4), optional
            Starting pose (the last solution); neutral if omitted.
        tol : float
            Stop when the pose correction, or the next one as predicted from the observed
            quadratic contraction, is below ``tol`` [m, rad].
        max_iter : int
            Iteration cap.

        Returns
        -------
        X_RP : ndarray, shape (4, 4)
        iterations : int
            Newton iterations used.

        Raises
        ------
        NoSolutionError
            If Newton does not converge within ``max_iter`` (no assembly near the guess).
        """
        L = as_vector(legs, 6, "legs")
        X = self.neutral if guess is None else _as_pose(guess, "guess")
        q, T, it = self.forward_quat(L, rotation_to_quat(X[:3, :3]), X[:3, 3], tol=tol, max_iter=max_iter)
        return pose(quat_to_rotation(q), T), it

    def forward_quat(
        self, legs: Array, q_RP: Array, p_RoPo_R: Array, *, tol: float = 1e-12, max_iter: int = 20
    ) -> tuple[Array, Array, int]:
        """:meth:`forward` on a (``quat_wxyz``, position) guess, without matrix conversions.

        The fast path for a caller that keeps the pose as a quaternion (the emulator
        steps it at kHz rates). Returns ``(q_RP, p_RoPo_R, iterations)``; raises as
        :meth:`forward`.
        """
        q, T, it, _ = self.newton(legs, q_RP, p_RoPo_R, tol=tol, max_iter=max_iter)
        return q, T, it

    def newton(
        self, legs: Array, q_RP: Array, p_RoPo_R: Array, rates: Array | None = None, *, tol: float = 1e-12,
        max_iter: int = 20,
    ) -> tuple[Array, Array, int, Array | None]:
        """:meth:`forward_quat`, and the platform twist of given leg rates.

        Returns ``(q_RP, p_RoPo_R, iterations, V_RP_R)``: with ``rates`` (6,) [m/s], ``V``
        (6,) = [ω; v] of P at Po in R solves ``J V = rates`` (Merlet §6.1) with the Jacobian
        of the last iterate, which lies within the last Newton correction of the solution
        (the relative error of V is of that order) — each Newton solve carries it as a
        second right-hand side, so it costs no factorization of its own; else None. Raises as
        :meth:`forward`.
        """
        # the pose as Python floats between the solves (numpy's per-call cost on 3-vectors and
        # 3×3 matrices exceeded the arithmetic); the 6×6 solves stay with LAPACK
        q = tuple(np.asarray(q_RP, dtype=np.float64).tolist())
        T = np.array(p_RoPo_R, dtype=np.float64).tolist()
        Rf = rotation_rows(*q)
        lg = np.asarray(legs, dtype=np.float64).tolist()
        prev = math.inf
        rhs = np.empty((6, 2))
        rhs[:, 1] = 0.0 if rates is None else rates
        for it in range(1, max_iter + 1):
            lengths, rows = self._legs(Rf, T)
            rhs[:, 0] = [a - n for a, n in zip(lg, lengths, strict=True)]
            try:
                sol = _solve(np.array(rows), rhs)
            except (np.linalg.LinAlgError, FloatingPointError) as err:
                raise NoSolutionError(f"stewart.forward: singular Jacobian at iteration {it}") from err
            dx = sol[:, 0].tolist()
            T = [T[0] + dx[3], T[1] + dx[4], T[2] + dx[5]]
            # δθ is expressed in R; quat_integrate wants it in P
            wx, wy, wz = mat_t_vec_rows(Rf, dx[0], dx[1], dx[2])
            q = quat_integrate_rows(q, wx, wy, wz, 1.0)
            Rf = rotation_rows(*q)
            step = max(map(abs, dx))
            # converged: this correction, or the next one as quadratic convergence predicts it
            # from the observed contraction (|δ_k+1| ≈ |δ_k|³ / |δ_k−1|², Deuflhard 2004, §2.1.1)
            if step < tol or (it > 1 and step < 0.1 * prev and step**3 < tol * prev * prev):
                return (np.array(q), np.array(T), it,
                        None if rates is None else np.array(sol[:, 1], dtype=np.float64))
            prev = step
        raise NoSolutionError(f"stewart.forward: no convergence in {max_iter} iterations for legs "
                              f"{np.asarray(legs).tolist()}")

    def _legs(self, R: tuple[float, ...], T: list[float]) -> tuple[list[float], list[tuple[float, ...]]]:
        """Leg lengths (6) and inverse Jacobian rows ``[(R p_k × u_k)ᵀ, u_kᵀ]`` (6 × 6) of the
        pose (R row-major as nine floats, T), in plain floats: :meth:`_margin`'s legs (the same
        arithmetic) without the margin, for the Newton iteration."""
        r00, r01, _, r10, r11, _, r20, r21, _ = R
        tx, ty, tz = T
        lengths: list[float] = []
        rows: list[tuple[float, ...]] = []
        sqrt = math.sqrt
        for px, py, bx, by, bz, _, _, _, _, _ in self._rows:
            rx = r00 * px + r01 * py  # p_k lies in the platform plane z = 0
            ry = r10 * px + r11 * py
            rz = r20 * px + r21 * py
            x, y, z = tx + rx - bx, ty + ry - by, tz + rz - bz
            n = sqrt(x * x + y * y + z * z)
            x, y, z = x / n, y / n, z / n
            lengths.append(n)
            rows.append((ry * z - rz * y, rz * x - rx * z, rx * y - ry * x, x, y, z))
        return lengths, rows

    def _margin(self, R: list[list[float]], T: list[float]) -> tuple[float, list[tuple[float, ...]]]:
        """Stroke and joint-cone margin of the pose (R, T) in plain floats, and per leg
        ``(length, u_x, u_y, u_z, (R p)_x, (R p)_y, (R p)_z)`` for the Jacobian.

        The margin is the smallest of the legs' stroke margins [m] and of the joints'
        ``cos ∠ − cos cone`` (times the mean neutral leg length, to be metres too); it is
        negative where a limit is broken. Plain floats: for six legs numpy's per-call cost
        exceeds the arithmetic (this runs several times per bridge step).
        """
        (r00, r01, r02), (r10, r11, r12), (r20, r21, r22) = R
        tx, ty, tz = T
        m = math.inf
        L0, cb, cp = self._cone_scale, self._cos_base, self._cos_platform
        legs: list[tuple[float, ...]] = []
        for px, py, bx, by, bz, wx, wy, wz, lo, hi in self._rows:
            rx = r00 * px + r01 * py  # p_k lies in the platform plane z = 0
            ry = r10 * px + r11 * py
            rz = r20 * px + r21 * py
            x, y, z = tx + rx - bx, ty + ry - by, tz + rz - bz
            n = math.sqrt(x * x + y * y + z * z)
            x, y, z = x / n, y / n, z / n
            # base joint: the angle of u to u⁰ in R; platform joint: of Rᵀu to u⁰, i.e. u·(R u⁰)
            ax = r00 * wx + r01 * wy + r02 * wz
            ay = r10 * wx + r11 * wy + r12 * wz
            az = r20 * wx + r21 * wy + r22 * wz
            # m = min(m, …) as comparisons (min's own call cost was a third of this loop)
            c = n - lo
            if c < m:
                m = c
            c = hi - n
            if c < m:
                m = c
            c = L0 * (x * wx + y * wy + z * wz - cb)
            if c < m:
                m = c
            c = L0 * (x * ax + y * ay + z * az - cp)
            if c < m:
                m = c
            legs.append((n, x, y, z, rx, ry, rz))
        return m, legs

    def _conditioned(self, legs: list[tuple[float, ...]]) -> bool:
        """True if the inverse Jacobian (rows ``[(R p_k × u_k)ᵀ, u_kᵀ]``) has condition
        number ≤ ``cond_max``.

        The singular values are computed only when a cheaper bound cannot decide: by Weyl's
        inequality ``|σ_i(J) − σ_i(J₀)| ≤ ‖J − J₀‖₂ ≤ ‖J − J₀‖_F =: δ`` (Golub & Van Loan,
        *Matrix Computations*, 4th ed., Cor. 8.6.2), so with J₀ the last Jacobian whose
        singular values were computed, ``cond J ≤ (σ_max(J₀) + δ) / (σ_min(J₀) − δ)``; where
        that is ≤ ``cond_max`` the pose passes without an SVD. Consecutive poses of a stream
        are close, so most calls end there. The answer is the exact test's either way.
        """
        rows = [(ry * z - rz * y, rz * x - rx * z, rx * y - ry * x, x, y, z) for _, x, y, z, rx, ry, rz in legs]
        ref = self._cond_ref
        if ref is not None:
            J0, s_max, s_min = ref
            d2 = 0.0
            for (a0, a1, a2, a3, a4, a5), (b0, b1, b2, b3, b4, b5) in zip(rows, J0.tolist(), strict=True):
                d2 += ((a0 - b0) * (a0 - b0) + (a1 - b1) * (a1 - b1) + (a2 - b2) * (a2 - b2)
                       + (a3 - b3) * (a3 - b3) + (a4 - b4) * (a4 - b4) + (a5 - b5) * (a5 - b5))
            d = math.sqrt(d2)
            if d < s_min and s_max + d <= self.cond_max * (s_min - d):
                return True
        return self._singular_check(np.array(rows))

    def _singular_check(self, J: Array) -> bool:
        """``cond J ≤ cond_max`` from the singular values of the inverse Jacobian ``J`` (6, 6); ``J`` and its
        extreme singular values become the reference of the bound (:meth:`_conditioned`)."""
        sv = np.linalg.svd(J, compute_uv=False)
        object.__setattr__(self, "_cond_ref", (J, float(sv[0]), float(sv[-1])))
        object.__setattr__(self, "_kargs", ())  # (the kernels' arguments hold the reference: made anew)
        return bool(sv[0] <= self.cond_max * sv[-1])

    def load_kernels(self) -> None:
        """From now on, :meth:`assess` and the search of :meth:`PoseMap.to_rig` run the compiled kernels
        (:mod:`dynamics.stewart_kernels`: bit for bit :meth:`_margin`, :meth:`_conditioned`'s bound and
        :func:`last_feasible` on :class:`GeodesicPath`, the readable references, which run until then); their
        machine code is loaded now (compiled if numba's cache has none), so that no step pays for it.

        A model that steps the rig calls it when it is built (the ``hil`` bridge); a configuration check builds
        rigs but steps none, so it imports no numba.
        """
        kern = _kernels()
        X = np.ascontiguousarray(self.neutral)
        rows, L0, cb, cp, *ref = self._kernel_args()
        J = np.empty((6, 6))
        kern.assess(X, rows, L0, cb, cp, *ref, np.empty(6), J)
        kern.clamp_search(X, X, 0.0, 0.0, 0.0, rows, L0, cb, cp, 0.0, -1.0, LAST_FEASIBLE_TOL, LAST_FEASIBLE_MAX_ITER,
                          *ref, np.empty((4, 4)), np.empty(6), J)
        object.__setattr__(self, "_J", J)  # the kernels' Jacobian, reused (copied where it becomes the reference)
        object.__setattr__(self, "_compiled", True)

    @property
    def compiled(self) -> bool:
        """True once :meth:`load_kernels` ran: the workspace check and the clamp run compiled."""
        return self._compiled

    def _kernel_args(self) -> tuple:
        """The kernels' constants (rows, ``L0``, the cone cosines) and the bound's reference
        (``has_ref, J0, s_max, s_min, cond_max``; :func:`dynamics.stewart_kernels.assess`); made once per
        reference."""
        if not self._kargs:
            ref = self._cond_ref
            J0, s_max, s_min = (_NO_REF, 0.0, 0.0) if ref is None else ref
            object.__setattr__(self, "_kargs", (self._rows_array, self._cone_scale, self._cos_base,
                                                self._cos_platform, ref is not None, J0, s_max, s_min,
                                                float(self.cond_max)))
        return self._kargs

    def _inside(self, verdict: int, J: Array) -> bool:
        """A kernel's verdict (:mod:`dynamics.stewart_kernels`) as :meth:`assess`'s ``inside``: the singular
        values of ``J`` (a copy: the kernels reuse theirs) where the bound did not decide."""
        kern = _kernels()
        return verdict == kern.CONDITIONED or (verdict == kern.UNDECIDED and self._singular_check(J.copy()))

    def _clamp_search(self, X_a: Array, X_b: Array, g0: float, g1: float) -> tuple[float, tuple | None]:
        """:meth:`PoseMap.to_rig`'s search on the compiled kernel: the edge ``s`` of ``g ≥ 0`` on the geodesic from
        ``X_a`` to ``X_b`` (margins ``g0``, ``g1`` at its ends; :func:`last_feasible` on :meth:`_margin` at
        :meth:`GeodesicPath.floats`), and ``(X, lengths, inside)`` there, or None where the margin was not
        evaluated at ``s`` (0 or 1)."""
        kern = _kernels()
        tx, ty, tz = _geodesic_theta(X_a, X_b)
        X_a = np.ascontiguousarray(X_a, dtype=np.float64)
        X_b = np.ascontiguousarray(X_b, dtype=np.float64)
        rows, L0, cb, cp, *ref = self._kernel_args()
        X, lengths = np.empty((4, 4)), np.empty(6)
        s, verdict, _ = kern.clamp_search(X_a, X_b, tx, ty, tz, rows, L0, cb, cp, float(g0), float(g1),
                                          LAST_FEASIBLE_TOL, LAST_FEASIBLE_MAX_ITER, *ref, X, lengths, self._J)
        if verdict == kern.NOT_FINITE:
            return s, None
        return s, (X, lengths, self._inside(verdict, self._J))

    def assess(self, X_RP: ArrayLike) -> tuple[Array, float, bool]:
        """Leg lengths (6,) [m] of ``X_RP``, its stroke and joint margin (see :meth:`_margin`)
        and whether it is inside the workspace (stroke, joint cones, conditioning).

        The stroke and joint margins come first (plain floats); the singular values of the
        6×6 inverse Jacobian are computed only for a pose that passes them. Once
        :meth:`load_kernels` ran, the compiled :func:`dynamics.stewart_kernels.assess` (the same
        arithmetic).
        """
        if self._compiled:
            X = np.ascontiguousarray(X_RP, dtype=np.float64)
            if X.shape == (4, 4):
                kern = _kernels()
                lengths, J = np.empty(6), self._J
                verdict, m = kern.assess(X, *self._kargs or self._kernel_args(), lengths, J)
                if verdict != kern.NOT_FINITE:  # (else the reference raises, naming the field)
                    return lengths, m, self._inside(verdict, J)
        X = _as_pose(X_RP, "X_RP")
        m, legs = self._margin(X[:3, :3].tolist(), X[:3, 3].tolist())
        return np.array([leg[0] for leg in legs]), m, bool(m >= 0.0 and self._conditioned(legs))

    def in_workspace(self, X_RP: ArrayLike) -> bool:
        """True if ``X_RP`` is inside the workspace (see :meth:`assess`)."""
        return self.assess(X_RP)[2]

    def workspace_problems(self, X_RP: ArrayLike) -> list[str]:
        """Why ``X_RP`` is outside the workspace: stroke, joint cones, conditioning (the last
        only once the others pass); empty if inside."""
        X = _as_pose(X_RP, "X_RP")
        m, legs = self._margin(X[:3, :3].tolist(), X[:3, 3].tolist())
        if m >= 0.0:
            if self._conditioned(legs):
                return []
            c = np.linalg.cond(self._jacobian_of(legs))
            return [f"condition number {c:.3g} above cond_max {self.cond_max:.3g}"]
        out = self.limits.violations([leg[0] for leg in legs])
        ang_b, ang_p = self.joint_angles(X)
        for name, ang in (("base", ang_b), ("platform", ang_p)):
            cone = getattr(self, f"joint_cone_{name}")
            out += [f"leg {i}: {name} joint angle {ang[i]:.4g} rad above joint_cone_{name} {cone:.4g}"
                    for i in np.flatnonzero(ang > cone)]
        return out

    def path_margin(self, path: GeodesicPath) -> Callable[[float], float]:
        """The stroke and joint-cone margin ``g(s)`` along ``path`` (that of :meth:`_margin`,
        negative where a limit is broken), in plain floats."""
        def g(s: float) -> float:
            return self._margin(*path.floats(s))[0]

        return g


@dataclass(frozen=True)
class ServoRig:
    """A generic servo rig: N axes, each a linear function of one pose component.

    ``axis_i = scale_i · x[component_i] + offset_i`` with
    ``x = pose_vector(X_RP) = [p_RoPo_R; θ]`` (θ the rotation vector of ``R_RP``; equal to
    roll, pitch, yaw to first order).

    Attributes
    ----------
    component : tuple of int
        Index 0…5 into ``x`` for each axis; an index used twice is refused.
    scale, offset : tuple of float
        Per axis [axis unit per m or rad], [axis unit].
    limits : RigLimits
    """

    component: tuple[int, ...]
    scale: tuple[float, ...]
    offset: tuple[float, ...]
    limits: RigLimits

    def __post_init__(self) -> None:
        n = len(self.component)
        problems = []
        if not 1 <= n <= 6 or len(set(self.component)) != n or not all(0 <= c <= 5 for c in self.component):
            problems.append(f"servo.component: need 1..6 distinct indices in 0..5, got {list(self.component)}")
        if len(self.scale) != n or len(self.offset) != n or any(s == 0 or not math.isfinite(s) for s in self.scale):
            problems.append(f"servo.scale/offset: need {n} values, scale non-zero, got {list(self.scale)}, "
                            f"{list(self.offset)}")
        if np.asarray(self.limits.lo).shape != (n,):
            problems.append(f"servo.limits: need {n} axes, got {np.asarray(self.limits.lo).shape}")
        if problems:
            raise ConfigError("; ".join(problems), problems)

    @property
    def n_axes(self) -> int:
        """Number of axes."""
        return len(self.component)

    @property
    def neutral(self) -> Array:
        """Neutral platform pose: identity."""
        return np.eye(4)

    @property
    def fingerprint(self) -> int:
        """u32 identifying the axis map and limits."""
        vals = list(self.component) + list(self.scale) + list(self.offset)
        vals += np.concatenate([self.limits.lo, self.limits.hi, self.limits.v_max, self.limits.a_max]).tolist()
        return binascii.crc32(("servo:" + ",".join(f"{v:.6e}" for v in vals)).encode())

    def inverse(self, X_RP: ArrayLike) -> Array:
        """Axis values (n,) of the pose ``X_RP``."""
        x = pose_vector(X_RP)
        return np.asarray(self.scale) * x[list(self.component)] + np.asarray(self.offset)

    def forward(self, axes: ArrayLike, guess: ArrayLike | None = None, **_: object) -> tuple[Array, int]:
        """Pose from axis values (the unmapped components are taken from ``guess``, else 0)."""
        a = as_vector(axes, self.n_axes, "axes")
        x = np.zeros(6) if guess is None else pose_vector(guess)
        x[list(self.component)] = (a - np.asarray(self.offset)) / np.asarray(self.scale)
        return pose_from_vector(x), 0

    def workspace_problems(self, X_RP: ArrayLike) -> list[str]:
        """Stroke violations of the pose; empty if inside."""
        return self.limits.violations(self.inverse(X_RP))

    def assess(self, X_RP: ArrayLike) -> tuple[Array, float, bool]:
        """Axis values (n,) of the pose, the smallest stroke margin and whether all are inside."""
        a = self.inverse(X_RP)
        m = float(min(np.min(a - self.limits.lo), np.min(self.limits.hi - a)))
        return a, m, self.limits.within(a)

    def in_workspace(self, X_RP: ArrayLike) -> bool:
        """True if every axis of the pose is inside its stroke."""
        return self.assess(X_RP)[2]

    def path_margin(self, path: GeodesicPath) -> Callable[[float], float]:
        """The smallest stroke margin ``g(s)`` along ``path``."""
        lo, hi = self.limits.lo, self.limits.hi

        def g(s: float) -> float:
            a = self.inverse(path.pose(s))
            return float(min(np.min(a - lo), np.min(hi - a)))

        return g


def axis_map_matrix(axes: list[str] | tuple[str, ...]) -> Array:
    """Signed permutation ``M`` (3, 3) from names like ``("x", "-z", "y")``: row i picks the
    source axis that drives rig axis i.

    Raises
    ------
    ConfigError
        If the names are not a permutation of x, y, z with signs, or ``det M != +1``
        (a reflection would turn rotations the wrong way).
    """
    M = np.zeros((3, 3))
    try:
        for i, name in enumerate(axes):
            sign = -1.0 if name.startswith("-") else 1.0
            M[i, "xyz".index(name.lstrip("+-"))] = sign
    except (ValueError, AttributeError, IndexError) as err:
        raise ConfigError(f"hil.axis_map: bad axis name in {list(axes)!r}") from err
    if len(axes) != 3 or not np.allclose(np.abs(M).sum(axis=0), 1) or not np.isclose(np.linalg.det(M), 1.0):
        raise ConfigError(f"hil.axis_map: {list(axes)!r} is not a proper rotation (need a signed permutation, det +1)")
    return M


@dataclass(frozen=True)
class ClampResult:
    """The outcome of :meth:`PoseMap.to_rig`.

    Attributes
    ----------
    X_RP : ndarray, shape (4, 4)
        Rig pose to send (inside the workspace).
    axes : ndarray, shape (n,)
        Its axis values.
    fraction : float
        1.0 if unclamped; else the fraction of the way from neutral that was kept (< 1).
    requested : ndarray, shape (4, 4)
        The rig pose asked for (outside the workspace if clamped).
    rig : StewartRig or ServoRig
    """

    X_RP: Array
    axes: Array
    fraction: float
    requested: Array
    rig: StewartRig | ServoRig

    @property
    def clamped(self) -> bool:
        """True if the requested pose was outside the workspace."""
        return self.fraction < 1.0

    @property
    def problems(self) -> list[str]:
        """Why the requested pose was outside (empty if it was inside); computed on demand."""
        return self.rig.workspace_problems(self.requested) if self.clamped else []


@dataclass(frozen=True)
class PoseMap:
    """Relative pose of two simulated frames → rig pose, clamped to the workspace.

    ``X_RP = X_RP0 · S(X_LB)`` where ``S`` re-expresses ``X_LB`` through the axis map M
    (``R ↦ M R Mᵀ``, ``p ↦ M p``) and scales the translation by ``scale`` and the
    rotation angle by ``rot_scale``.

    Attributes
    ----------
    rig : StewartRig or ServoRig
    X_RP0 : ndarray, shape (4, 4)
        Rig pose when the two frames coincide (defaults to the rig's neutral).
    scale, rot_scale : float
        Translation and rotation scale factors [-].
    M : ndarray, shape (3, 3)
        Axis map, see :func:`axis_map_matrix`.
    """

    rig: StewartRig | ServoRig
    X_RP0: Array
    scale: float = 1.0
    rot_scale: float = 1.0
    M: Array = field(default_factory=lambda: np.eye(3))
    _plain: bool = field(init=False, repr=False, compare=False)
    _margin0: float = field(init=False, repr=False, compare=False)
    _fast: bool = field(init=False, repr=False, compare=False, default=False)

    def __post_init__(self) -> None:
        # the identity map (no axis swap, no scale) is one matrix product in rig_pose
        plain = self.scale == 1.0 and self.rot_scale == 1.0 and bool(np.array_equal(self.M, np.eye(3)))
        object.__setattr__(self, "_plain", plain)
        self._set_fast()
        object.__setattr__(self, "_margin0", self.rig.assess(_as_pose(self.X_RP0, "X_RP0"))[1])
        problems = []
        for name in ("scale", "rot_scale"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v > 0):
                problems.append(f"hil.{name}: must be finite and > 0, got {v}")
        bad = self.rig.workspace_problems(_as_pose(self.X_RP0, "X_RP0"))
        if bad:
            problems.append(f"hil.neutral: neutral pose outside the workspace: {bad}")
        if problems:
            raise ConfigError("; ".join(problems), problems)

    def load_kernels(self) -> None:
        """The rig's compiled workspace check and clamp, loaded now (:meth:`StewartRig.load_kernels`; a
        :class:`ServoRig` has none)."""
        if isinstance(self.rig, StewartRig):
            self.rig.load_kernels()
        self._set_fast()

    def _set_fast(self) -> None:
        """:meth:`to_rig`'s short way (a plain map on a compiled Stewart rig: the map's product and the kernel's
        check, without the checks and conversions on the way) where it applies."""
        object.__setattr__(self, "_fast", self._plain and isinstance(self.rig, StewartRig) and self.rig.compiled)

    def rig_pose(self, X_LB: ArrayLike) -> Array:
        """Unclamped rig pose ``X_RP`` (4, 4) of the relative pose ``X_LB``."""
        X = _as_pose(X_LB, "X_LB")
        if self._plain:
            return self.X_RP0 @ X
        R, p = self.M @ X[:3, :3] @ self.M.T, self.scale * (self.M @ X[:3, 3])
        if self.rot_scale != 1.0:
            R = pose_from_vector(np.r_[0.0, 0.0, 0.0, self.rot_scale * pose_vector(pose(R, p))[3:]])[:3, :3]
        return self.X_RP0 @ pose(R, p)

    def wrench_to_body(self, F_Po_P: ArrayLike) -> Array:
        """The rig's force/torque reading → the wrench on B at Bo, expressed in B (6,).

        P is the image of B under the map: components of a vector fixed in B are ``M``
        times its components in P (for ``rot_scale = 1``), so ``f_B = Mᵀ f_P``. Lever arms
        on the rig are ``scale`` times the simulated ones, so ``τ_B = Mᵀ τ_P / scale``;
        forces are not scaled. [N·m, N]
        """
        F = as_vector(F_Po_P, 6, "F_Po_P")
        if self._plain:
            return F.copy()
        return np.concatenate([self.M.T @ F[:3] / self.scale, self.M.T @ F[3:]])

    def to_rig(self, X_LB: ArrayLike, finite: bool = False) -> ClampResult:
        """Rig pose and axes for ``X_LB``, clamped toward neutral if outside the workspace; ``finite``: the caller
        knows ``X_LB`` to be finite (not checked again; one that is not still raises the error below).

        Clamping searches the fraction s of the way from ``X_RP0`` toward the requested
        pose (:func:`geodesic`: translation linear, rotation along the geodesic) for the
        edge of the workspace: first on the rig's stroke and joint margin
        (:func:`last_feasible` on ``rig.path_margin``), then, should the pose found there be
        ill-conditioned, by bisection (24 halvings, 6e-8 of the way) on the full check. The
        requested pose is never returned when it is infeasible.
        """
        rig = self.rig
        found = False
        if self._fast and type(X_LB) is np.ndarray and X_LB.dtype == np.float64 and X_LB.shape == (4, 4) \
                and (finite or all(map(math.isfinite, X_LB.ravel().tolist()))):
            # rig_pose and rig.assess as they run on a plain map and a compiled rig, without their checks and
            # conversions (should X_LB not be finite after all, neither is the pose's last row: the kernel says
            # so, and the reference way below raises the error naming X_LB)
            assert isinstance(rig, StewartRig)
            target = self.X_RP0 @ X_LB
            kern = _kernels()
            axes, J = np.empty(6), rig._J
            verdict, margin = kern.assess(target, *rig._kargs or rig._kernel_args(), axes, J)
            if verdict != kern.NOT_FINITE:
                inside = verdict == kern.CONDITIONED or rig._inside(verdict, J)
                found = True
        if not found:
            target = self.rig_pose(X_LB)
            axes, margin, inside = rig.assess(target)
        if inside:
            return ClampResult(target, axes, 1.0, target, rig)
        path: GeodesicPath | None = None
        at_s = None  # (X, axes, inside) at the s found, where the search evaluated the margin there
        if isinstance(rig, StewartRig) and rig.compiled:  # the search below, compiled (the same arithmetic)
            s, at_s = rig._clamp_search(self.X_RP0, target, self._margin0, margin)
        elif isinstance(rig, StewartRig):  # the margin's legs at each s tried, for the one kept
            path = geodesic = GeodesicPath(self.X_RP0, target)
            seen: dict[float, tuple[list[list[float]], list[float], float, list[tuple[float, ...]]]] = {}

            def g(s: float) -> float:
                R, p = geodesic.floats(s)
                m, legs = rig._margin(R, p)
                seen[s] = (R, p, m, legs)
                return m

            s = last_feasible(g, g0=self._margin0, g1=margin)
            if s in seen:  # rig.assess(between(s)) without redoing the margin
                R, p, m, legs = seen[s]
                at_s = (_pose_array(R, p), np.array([leg[0] for leg in legs]),
                        bool(m >= 0.0 and rig._conditioned(legs)))
        else:
            path = GeodesicPath(self.X_RP0, target)
            s = last_feasible(rig.path_margin(path), g0=self._margin0, g1=margin)
        if at_s is not None:
            X, axes, inside = at_s
        else:
            path = path or GeodesicPath(self.X_RP0, target)
            X = path.pose(s)
            axes, _, inside = rig.assess(X)
        if not inside:  # the conditioning bound comes first on this path
            between = (path or GeodesicPath(self.X_RP0, target)).pose
            lo, hi = 0.0, s
            for _ in range(24):
                mid = 0.5 * (lo + hi)
                if self.rig.in_workspace(between(mid)):
                    lo = mid
                else:
                    hi = mid
            s, X = lo, between(lo)
            axes = self.rig.inverse(X)
        return ClampResult(X, axes, min(s, 1.0 - 1e-12), target, self.rig)


class GeodesicPath:
    """The pose path from ``X_a`` (s = 0) to ``X_b`` (s = 1) along which poses are clamped:
    translation linear, rotation along the geodesic ``R(s) = R_a exp(s [θ×])``, θ the
    rotation vector of ``R_aᵀ R_b`` (the shortest rotation).

    Rodrigues' formula ``exp(φ[k×]) = I cos φ + [k×] sin φ + k kᵀ (1 − cos φ)`` (φ = s|θ|,
    k = θ/|θ|) is expanded once, so that a point of the path costs a few float operations.
    """

    def __init__(self, X_a: Array, X_b: Array) -> None:
        R_a = X_a[:3, :3]
        tx, ty, tz = _geodesic_theta(X_a, X_b)
        self.phi = phi = math.sqrt(tx * tx + ty * ty + tz * tz)
        kx, ky, kz = (tx / phi, ty / phi, tz / phi) if phi > 0 else (0.0, 0.0, 0.0)
        Ra = R_a.tolist()
        terms = []
        for a0, a1, a2 in Ra:  # row i of R_a, R_a [k×] and R_a k kᵀ
            ak = a0 * kx + a1 * ky + a2 * kz
            terms += [(a0, a1 * kz - a2 * ky, ak * kx), (a1, a2 * kx - a0 * kz, ak * ky),
                      (a2, a0 * ky - a1 * kx, ak * kz)]
        self._terms = terms
        self._p_a = X_a[:3, 3].tolist()
        self._d = (X_b[:3, 3] - X_a[:3, 3]).tolist()

    def floats(self, s: float) -> tuple[list[list[float]], list[float]]:
        """``R(s)`` as nested lists (3 × 3) and ``p(s)`` (3) [m]."""
        c, sn = math.cos(s * self.phi), math.sin(s * self.phi)
        c1 = 1.0 - c
        r = [a * c + b * sn + e * c1 for a, b, e in self._terms]
        pa, d = self._p_a, self._d
        return [r[0:3], r[3:6], r[6:9]], [pa[0] + s * d[0], pa[1] + s * d[1], pa[2] + s * d[2]]

    def pose(self, s: float) -> Array:
        """``X(s)`` (4, 4)."""
        return _pose_array(*self.floats(s))


def _geodesic_theta(X_a: Array, X_b: Array) -> list[float]:
    """The rotation vector θ of ``R_aᵀ R_b`` (3 floats): the geodesic's axis and angle. [rad]"""
    R = X_a[:3, :3].T @ X_b[:3, :3]
    th = rotation_vector_rows(*R.ravel().tolist())  # (rotation_vector's arithmetic, without its array round trip)
    return th if th is not None else rotation_vector(R).tolist()


def _pose_array(R: list[list[float]], p: list[float]) -> Array:
    """Pose (4, 4) from rotation rows (3 × 3 nested lists) and position (3 floats)."""
    return np.array([R[0] + [p[0]], R[1] + [p[1]], R[2] + [p[2]], [0.0, 0.0, 0.0, 1.0]])


def last_feasible(g: Callable[[float], float], *, tol: float = LAST_FEASIBLE_TOL,
                  max_iter: int = LAST_FEASIBLE_MAX_ITER, g0: float | None = None, g1: float | None = None) -> float:
    """The edge of ``g ≥ 0`` on [0, 1] (``g(0) ≥ 0``), from the feasible side.

    Regula falsi with the Illinois modification (Dowell & Jarratt, BIT 11, 1971): it keeps
    a bracket ``[a, b]`` with ``g(a) ≥ 0 > g(b)`` and converges superlinearly on a smooth
    ``g``; it stops when ``0 ≤ g(a) < tol`` or ``b − a < tol``, and returns ``a``, so the
    result is always feasible. (A library root finder such as ``scipy.optimize.brentq``
    returns a point near the root on either side.) Returns 1.0 if ``g(1) ≥ 0``. ``g0``,
    ``g1``: ``g(0)``, ``g(1)`` if the caller knows them.
    """
    a, b = 0.0, 1.0
    ga = g(a) if g0 is None else g0
    gb = g(b) if g1 is None else g1
    if gb >= 0.0:
        return 1.0
    side, margin = 0, ga  # margin: g(a) itself (ga may be halved)
    for _ in range(max_iter):
        if b - a < tol or margin < tol:
            break
        s = (a * gb - b * ga) / (gb - ga)
        if not a < s < b:
            s = 0.5 * (a + b)
        gs = g(s)
        if gs >= 0.0:
            a, ga, margin = s, gs, gs
            if side == 1:
                gb *= 0.5
            side = 1
        else:
            b, gb = s, gs
            if side == -1:
                ga *= 0.5
            side = -1
    return a
