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
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dynamics.spatial import (
    as_vector,
    pose,
    pose_from_vector,
    pose_vector,
    quat_conjugate,
    quat_integrate,
    quat_multiply,
    quat_to_rotation,
    quat_to_rotvec,
    rotation_to_quat,
)
from errors import ConfigError, NoSolutionError, ShapeError

__all__ = [
    "RigLimits",
    "StewartRig",
    "ServoRig",
    "PoseMap",
    "ClampResult",
    "pose_vector",
    "pose_from_vector",
    "axis_map_matrix",
]

Array = NDArray[np.float64]


def _as_pose(X: ArrayLike, name: str) -> Array:
    a = np.asarray(X, dtype=np.float64)
    if a.shape != (4, 4) or not np.all(np.isfinite(a)):
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

    def __post_init__(self) -> None:
        n = np.asarray(self.lo).shape
        problems = []
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

    @classmethod
    def uniform(cls, n: int, lo: float, hi: float, v_max: float, a_max: float, j_max: float) -> "RigLimits":
        """The same limits on all ``n`` axes."""
        f = np.full
        return cls(f(n, lo), f(n, hi), f(n, v_max), f(n, a_max), f(n, j_max))

    def violations(self, axes: ArrayLike) -> list[str]:
        """Stroke violations of axis values (n,), one line per axis; empty if within."""
        a = np.asarray(axes, dtype=np.float64)
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
    """

    r_base: float
    r_platform: float
    base_pair_angle: float
    platform_pair_angle: float
    neutral_height: float
    limits: RigLimits
    cond_max: float = 50.0
    b_R: Array = field(init=False, repr=False)
    p_P: Array = field(init=False, repr=False)

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
        return binascii.crc32(("stewart6:" + ",".join(f"{v:.6e}" for v in vals)).encode())

    def leg_vectors(self, X_RP: ArrayLike) -> Array:
        """Leg vectors ``l_k = T + R p_k − b_k`` in R, shape (6, 3) [m] (Merlet §3.1)."""
        X = _as_pose(X_RP, "X_RP")
        return X[:3, 3] + self.p_P @ X[:3, :3].T - self.b_R

    def inverse(self, X_RP: ArrayLike) -> Array:
        """Leg lengths (6,) [m] of the platform pose ``X_RP``."""
        return np.linalg.norm(self.leg_vectors(X_RP), axis=1)

    def lengths_jacobian(self, R: Array, T: Array) -> tuple[Array, Array]:
        """Leg lengths (6,) and inverse Jacobian (6, 6) at rotation R, translation T."""
        Rp = self.p_P @ R.T
        legs = T + Rp - self.b_R
        n = np.sqrt(np.einsum("ij,ij->i", legs, legs))
        u = legs / n[:, None]
        J = np.empty((6, 6))
        J[:, 0] = Rp[:, 1] * u[:, 2] - Rp[:, 2] * u[:, 1]  # (R p_k) × u_k, written out: np.cross is slow
        J[:, 1] = Rp[:, 2] * u[:, 0] - Rp[:, 0] * u[:, 2]
        J[:, 2] = Rp[:, 0] * u[:, 1] - Rp[:, 1] * u[:, 0]
        J[:, 3:] = u
        return n, J

    def jacobian(self, X_RP: ArrayLike) -> Array:
        """Inverse Jacobian (6, 6): leg rates ``l̇ = J V_RP_R``, ``V`` = [ω; v] of P at Po in R.

        Row k is ``[(R p_k × u_k)ᵀ, u_kᵀ]`` with ``u_k`` the unit leg vector (Merlet §6.1).
        """
        X = _as_pose(X_RP, "X_RP")
        return self.lengths_jacobian(X[:3, :3], X[:3, 3])[1]

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
            Stop when the pose correction is below ``tol`` [m, rad].
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
        q, T = np.asarray(q_RP, dtype=np.float64), np.array(p_RoPo_R, dtype=np.float64)
        R = quat_to_rotation(q)
        for it in range(1, max_iter + 1):
            n, J = self.lengths_jacobian(R, T)
            try:
                dx = np.linalg.solve(J, legs - n)
            except np.linalg.LinAlgError as err:
                raise NoSolutionError(f"stewart.forward: singular Jacobian at iteration {it}") from err
            T += dx[3:]
            q = quat_integrate(q, R.T @ dx[:3], 1.0)  # δθ is expressed in R; quat_integrate wants P
            R = quat_to_rotation(q)
            if float(np.max(np.abs(dx))) < tol:
                return q, T, it
        raise NoSolutionError(f"stewart.forward: no convergence in {max_iter} iterations for legs "
                              f"{np.asarray(legs).tolist()}")

    def workspace_problems(self, X_RP: ArrayLike) -> list[str]:
        """Why ``X_RP`` is outside the workspace: stroke and conditioning; empty if inside."""
        X = _as_pose(X_RP, "X_RP")
        legs, J = self.lengths_jacobian(X[:3, :3], X[:3, 3])
        out = self.limits.violations(legs)
        c = float(np.linalg.cond(J))
        if not c <= self.cond_max:
            out.append(f"condition number {c:.3g} above cond_max {self.cond_max:.3g}")
        return out


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
        1.0 if unclamped; else the fraction of the way from neutral that was kept.
    problems : list of str
        Why the requested pose was outside (empty if it was inside).
    """

    X_RP: Array
    axes: Array
    fraction: float
    problems: list[str]

    @property
    def clamped(self) -> bool:
        """True if the requested pose was outside the workspace."""
        return bool(self.problems)


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

    def __post_init__(self) -> None:
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

    def rig_pose(self, X_LB: ArrayLike) -> Array:
        """Unclamped rig pose ``X_RP`` (4, 4) of the relative pose ``X_LB``."""
        X = _as_pose(X_LB, "X_LB")
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
        return np.concatenate([self.M.T @ F[:3] / self.scale, self.M.T @ F[3:]])

    def to_rig(self, X_LB: ArrayLike) -> ClampResult:
        """Rig pose and axes for ``X_LB``, clamped toward neutral if outside the workspace.

        Clamping bisects (30 halvings) the fraction s of the way from ``X_RP0`` toward the
        requested pose (translation linear, rotation along the geodesic) and keeps the
        largest feasible s; the requested pose is never returned when it is infeasible.
        """
        target = self.rig_pose(X_LB)
        problems = self.rig.workspace_problems(target)
        if not problems:
            return ClampResult(target, self.rig.inverse(target), 1.0, [])
        q0 = rotation_to_quat(self.X_RP0[:3, :3])
        w = quat_to_rotvec(quat_multiply(quat_conjugate(q0), rotation_to_quat(target[:3, :3])))
        p0, p1 = self.X_RP0[:3, 3], target[:3, 3]

        def between(s: float) -> Array:  # translation linear, rotation along the geodesic
            return pose(quat_to_rotation(quat_integrate(q0, s * w, 1.0)), (1 - s) * p0 + s * p1)

        lo, hi = 0.0, 1.0
        for _ in range(24):  # 6e-8 of the way
            mid = 0.5 * (lo + hi)
            if self.rig.workspace_problems(between(mid)):
                hi = mid
            else:
                lo = mid
        X = between(lo)
        return ClampResult(X, self.rig.inverse(X), lo, problems)
