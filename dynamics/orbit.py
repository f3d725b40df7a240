"""Circular reference orbit: mean motion, Clohessy–Wiltshire relative motion, gravity gradient.

Frame convention (one for the whole project)
--------------------------------------------
W is the LVLH frame of a circular reference orbit in **Hill's axes**:

- ``x`` radial, pointing away from the Earth's centre (zenith);
- ``y`` along-track, in the direction of the orbital velocity;
- ``z`` orbit normal, along the orbital angular momentum (``z = x × y``).

W's origin moves on the reference orbit and W rotates, relative to inertial space N, at
the constant rate ``ω_NW_W = [0, 0, n]`` about its own ``z`` axis. (The Shuttle's LVLH —
``x`` along-track, ``y`` opposite the orbit normal, ``z`` nadir — is a fixed relabelling:
``x_sh = y``, ``y_sh = −z``, ``z_sh = −x``.)

Attitude in the rotating frame
------------------------------
A body's attitude is ``quat_WB`` (relative to LVLH) and its angular velocity is stored as
``w_WB_B`` (relative to LVLH, expressed in B). Euler's equations hold for the rate relative
to inertial space, ``ω_NB_B = w_WB_B + R_BW ω_NW_W``; the integrator
(:mod:`dynamics.rigid_body`) integrates Euler's equations for ``ω_NB`` and converts with
``ẇ_WB_B = ω̇_NB_B + w_WB_B × (R_BW ω_NW_W)``, which follows from differentiating that sum
with ``ω_NW_W`` constant in W and ``Ṙ_BW = −[w_WB_B×] R_BW``. With no orbit (``n = 0``) W is inertial and the two rates
coincide; this is how orbital terms are switched off for momentum checks.

Sources: Clohessy & Wiltshire, J. Aerospace Sci. 27(9) 1960 (linearised relative motion
about a circular orbit); gravity-gradient torque as in Hughes, *Spacecraft Attitude
Dynamics* (1986), ch. 8. No I/O, no globals.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dynamics.spatial import as_vector, quat_to_rotation
from errors import ModelError, ShapeError

__all__ = [
    "MU_EARTH",
    "R_EARTH",
    "SHUTTLE_LVLH_IN_HILL",
    "CircularOrbit",
    "cw_acceleration",
    "cw_acceleration_rows",
    "cw_solution",
    "gravity_gradient_rows",
    "gravity_gradient_torque",
    "lvlh_rate_W",
    "mean_motion",
]

Array = NDArray[np.float64]

MU_EARTH: float = 3.986004418e14
"""Earth's gravitational parameter. [m³/s²] (WGS-84 / IERS)"""
R_EARTH: float = 6.378137e6
"""Earth's equatorial radius. [m] (WGS-84)"""

SHUTTLE_LVLH_IN_HILL: NDArray[np.float64] = np.array([[0.0, 0.0, -1.0], [1.0, 0.0, 0.0], [0.0, -1.0, 0.0]])
"""Rotation (3, 3) mapping vectors in the Shuttle's LVLH axes (x along-track, y opposite the
orbit normal, z nadir) into W (Hill axes). An orbiter whose body axes (x forward, y
starboard, z down) are aligned with the Shuttle LVLH — nose along-track, payload bay to
zenith — has ``R_WO = SHUTTLE_LVLH_IN_HILL``."""
SHUTTLE_LVLH_IN_HILL.setflags(write=False)


def mean_motion(altitude_m: float, mu: float = MU_EARTH, R: float = R_EARTH) -> float:
    """Mean motion ``n = sqrt(mu / a³)`` of a circular orbit at ``altitude_m`` above radius ``R``.

    Parameters
    ----------
    altitude_m : float
        Altitude above the reference radius. [m]
    mu : float
        Gravitational parameter. [m³/s²]
    R : float
        Reference (equatorial) radius. [m]

    Returns
    -------
    float
        Mean motion n. [rad/s]

    Raises
    ------
    ModelError
        If ``mu`` or the orbit radius ``R + altitude_m`` is not positive and finite.
    """
    a = float(R) + float(altitude_m)
    if not (np.isfinite(a) and a > 0.0):
        raise ModelError(f"orbit radius R + altitude_m must be > 0, got {a} (altitude_m={altitude_m}, R={R})")
    if not (np.isfinite(mu) and mu > 0.0):
        raise ModelError(f"mu must be > 0, got {mu}")
    return float(np.sqrt(mu / a**3))


@dataclass(frozen=True, slots=True)
class CircularOrbit:
    """A circular reference orbit, described by its mean motion.

    Attributes
    ----------
    n : float
        Mean motion, the rotation rate of LVLH relative to inertial space. [rad/s]
    gravity_gradient : bool
        Whether bodies feel the gravity-gradient torque (the Clohessy–Wiltshire
        translation terms are always on when an orbit is given).
    """

    n: float
    gravity_gradient: bool = True

    def __post_init__(self) -> None:
        if not (np.isfinite(self.n) and self.n > 0.0):
            raise ModelError(f"CircularOrbit.n must be a positive mean motion [rad/s], got {self.n}")

    @classmethod
    def from_altitude(
        cls, altitude_m: float, mu: float = MU_EARTH, R: float = R_EARTH, gravity_gradient: bool = True
    ) -> CircularOrbit:
        """Orbit at ``altitude_m`` [m] above ``R`` [m] for the gravitational parameter ``mu`` [m³/s²]."""
        return cls(mean_motion(altitude_m, mu, R), gravity_gradient)

    @property
    def period(self) -> float:
        """Orbital period ``2π / n``. [s]"""
        return 2.0 * np.pi / self.n


def lvlh_rate_W(n: float) -> Array:
    """Angular velocity of LVLH W relative to inertial space, expressed in W: ``[0, 0, n]``. [rad/s]"""
    return np.array([0.0, 0.0, float(n)])


def cw_acceleration(n: float, p_WoBo_W: ArrayLike, v_WBo_W: ArrayLike) -> Array:
    """Clohessy–Wiltshire acceleration of a point relative to LVLH, with no applied force.

    In Hill's axes (module docstring): ``ẍ = 3n²x + 2nẏ``, ``ÿ = −2nẋ``, ``z̈ = −n²z``.
    These are the Coriolis, centrifugal and linearised gravity terms seen in the rotating
    frame; add ``f/m`` for an applied force.

    Parameters
    ----------
    n : float
        Mean motion. [rad/s]
    p_WoBo_W : array_like, shape (3,)
        Position relative to the LVLH origin, in W. [m]
    v_WBo_W : array_like, shape (3,)
        Velocity relative to (as seen in) W, in W. [m/s]

    Returns
    -------
    ndarray, shape (3,)
        Acceleration relative to W, in W. [m/s²]

    Raises
    ------
    ShapeError
        If an input has the wrong shape or is not finite.
    """
    p = as_vector(p_WoBo_W, 3, "p_WoBo_W")
    v = as_vector(v_WBo_W, 3, "v_WBo_W")
    return np.array(cw_acceleration_rows(float(n), float(p[0]), float(p[2]), float(v[0]), float(v[1])))


def cw_acceleration_rows(n: float, x: float, z: float, vx: float, vy: float) -> tuple[float, float, float]:
    """The float kernel of :func:`cw_acceleration`, for hot loops on Python floats.

    ``(3n²x + 2nẏ, −2nẋ, −n²z)`` [m/s²] from the mean motion ``n`` [rad/s], the position
    components ``x``, ``z`` [m] and the velocity components ``vx``, ``vy`` [m/s] in W
    (Hill's axes). Inputs are trusted.
    """
    n2 = n * n
    return 3.0 * n2 * x + 2.0 * n * vy, -2.0 * n * vx, -n2 * z


def cw_solution(n: float, p0_W: ArrayLike, v0_W: ArrayLike, t: float) -> tuple[Array, Array]:
    """Closed-form solution of the free Clohessy–Wiltshire equations (Hill's axes).

    With ``c = cos nt``, ``s = sin nt``::

        x = (4 − 3c) x0 + s/n ẋ0 + 2(1 − c)/n ẏ0
        y = 6(s − nt) x0 + y0 − 2(1 − c)/n ẋ0 + (4s − 3nt)/n ẏ0
        z = c z0 + s/n ż0

    Parameters
    ----------
    n : float
        Mean motion, > 0. [rad/s]
    p0_W, v0_W : array_like, shape (3,)
        Initial position and velocity relative to LVLH, in W. [m, m/s]
    t : float
        Time since the initial state. [s]

    Returns
    -------
    p_W, v_W : ndarray, shape (3,)
        Position and velocity at ``t``. [m, m/s]

    Raises
    ------
    ShapeError
        If an input has the wrong shape or is not finite.
    ModelError
        If ``n`` is not positive.

    References
    ----------
    Clohessy & Wiltshire (1960), eqs. (5)–(7), rewritten for Hill's axes.
    """
    if not n > 0.0:
        raise ModelError(f"n must be > 0 for the CW solution, got {n}")
    x0, y0, z0 = as_vector(p0_W, 3, "p0_W")
    u0, v0, w0 = as_vector(v0_W, 3, "v0_W")
    nt = n * t
    c, s = np.cos(nt), np.sin(nt)
    p = np.array(
        [
            (4.0 - 3.0 * c) * x0 + s / n * u0 + 2.0 * (1.0 - c) / n * v0,
            6.0 * (s - nt) * x0 + y0 - 2.0 * (1.0 - c) / n * u0 + (4.0 * s - 3.0 * nt) / n * v0,
            c * z0 + s / n * w0,
        ]
    )
    v = np.array(
        [
            3.0 * n * s * x0 + c * u0 + 2.0 * s * v0,
            -6.0 * n * (1.0 - c) * x0 - 2.0 * s * u0 + (4.0 * c - 3.0) * v0,
            -n * s * z0 + c * w0,
        ]
    )
    return p, v


def gravity_gradient_torque(n: float, I_Bcm_B: ArrayLike, quat_WB: ArrayLike) -> Array:
    """Gravity-gradient torque about the CoM of a body in a circular orbit, in the body frame.

    ``τ_B = 3 n² (r̂_B × I r̂_B)`` with ``r̂_B = R_BW x̂`` the local zenith (Hill ``x``)
    expressed in B. Zero when a principal axis points along the zenith. The small offset
    of the body from the LVLH origin is neglected (it changes r̂ by ~|p|/a).

    Parameters
    ----------
    n : float
        Mean motion. [rad/s]
    I_Bcm_B : array_like, shape (3, 3)
        Inertia about the CoM, in B. [kg·m²]
    quat_WB : array_like, shape (4,)
        Attitude of B relative to LVLH W, [w, x, y, z].

    Returns
    -------
    tau_B : ndarray, shape (3,)
        Torque about the CoM, expressed in B. [N·m]

    Raises
    ------
    ShapeError
        If an input has the wrong shape.

    References
    ----------
    Hughes, *Spacecraft Attitude Dynamics* (1986), ch. 8 (gravitational torque), in Hill's axes.
    """
    I = np.asarray(I_Bcm_B, dtype=np.float64)
    if I.shape != (3, 3):
        raise ShapeError(f"I_Bcm_B: expected shape (3, 3), got {I.shape}")
    R_WB = quat_to_rotation(as_vector(quat_WB, 4, "quat_WB"))
    r_B = R_WB[0, :].tolist()  # R_BW @ [1, 0, 0] = first row of R_WB
    return np.array(gravity_gradient_rows(float(n), tuple(I.ravel().tolist()), *r_B))


def gravity_gradient_rows(n: float, I_rows: tuple[float, ...] | list[float], r0: float, r1: float,
                          r2: float) -> tuple[float, float, float]:
    """The float kernel of :func:`gravity_gradient_torque`: ``3 n² (r̂ × I r̂)`` in B. [N·m]

    ``n`` the mean motion [rad/s]; ``I_rows`` the inertia about the CoM in B, row-major,
    nine floats [kg·m²]; ``r0, r1, r2`` the zenith unit vector in B (the first row of
    ``R_WB``). Inputs are trusted.
    """
    i00, i01, i02, i10, i11, i12, i20, i21, i22 = I_rows
    c = 3.0 * n * n
    e0 = i00 * r0 + i01 * r1 + i02 * r2
    e1 = i10 * r0 + i11 * r1 + i12 * r2
    e2 = i20 * r0 + i21 * r1 + i22 * r2
    return c * (r1 * e2 - r2 * e1), c * (r2 * e0 - r0 * e2), c * (r0 * e1 - r1 * e0)
