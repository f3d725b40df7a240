"""The Shuttle RMS as the SVDS massless arm (seed 003): kinematics, App. A Jacobian, RMSFM.

Frames (STYLE): O orbiter body (origin Oo at its CoM), S shoulder = the SRMS base frame
(fixed in O at ``X_OS``), B1…B6 the six moving links after shoulder yaw, shoulder pitch,
elbow pitch, wrist pitch, wrist yaw and wrist roll (SVDS 2-14 order; the URDF links
B2…B7 of ``dynamics/data/SRMS_Canadarm.urdf``), E the end effector: the frame of
the last link moved to the *point of resolution* ``p_B6oEo_B6`` (configurable; the
end-effector tip, 0.6604 m along the roll axis, by default).

The SVDS Jacobian ``J`` (6, 6) maps joint rates to the relative spatial velocity of E
with respect to the orbiter, ``V_R = [ω_R; v_R]``, both **expressed in O** and with the
linear part that of the point Eo (SVDS 2-2, A-13). Its transpose maps the end-effector
wrench ``[M_e; F_e]`` (in O, about Eo) to the joint torques (2-1, A-15).

Massless-arm dynamics (section 2, routine RMSFM of section 5):

- :func:`tip_wrench` — ``[M_e; F_e] = J^-T τ`` (2-3), the wrench the arm applies to the
  payload at Eo; the orbiter receives the opposite (2-4, 2-5, 2-8, 2-9);
- :func:`relative_twist` — ``V_R`` from the motion of the two bodies (2-10, 2-11);
- :func:`joint_rates` — ``θ̇ = J^-1 V_R`` (2-12), by damped least squares near a
  singularity.

The multibody alternative (links with mass on a moving orbiter, seed 004 and the
dynamics core) is :func:`prescribed_base_dynamics`.

Auto sequence: :func:`auto_profile` times one straight-line segment of the point of
resolution (position and attitude slew on one path parameter) with raised-cosine rate
ramps under a rate and an acceleration limit.

No I/O, clock or globals. Shapes are checked (:class:`errors.ShapeError`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import ModuleType

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.linalg.lapack import dgetrf, dgetri

from dynamics import chain as ch
from dynamics import kernel_module
from dynamics import spatial as sp
from dynamics.multirate import own_base_wrench
from errors import ModelError, ShapeError

__all__ = [
    "N_JOINTS",
    "JOINT_NAMES",
    "RmsGeometry",
    "RmsPose",
    "rms_geometry",
    "rms_kinematics",
    "rms_kinematics_rows",
    "rms_kinematics_arrays",
    "limit_joint_rates_rows",
    "limit_joint_rates",
    "predict_state_arrays",
    "grappled_twist_rows",
    "grappled_twist_arrays",
    "massless_wrench_rows",
    "massless_wrench_arrays",
    "grappled_step_arrays",
    "auto_command_arrays",
    "flex_terms_arrays",
    "load_kernels",
    "rms_pose_from_rows",
    "rms_jacobian",
    "rms_jacobian_rows",
    "dls_solve",
    "jacobian_inverse",
    "jacobian_inverse_arrays",
    "regular_inverse",
    "tip_wrench",
    "relative_twist",
    "relative_twist_rows",
    "end_effector_twist",
    "end_effector_twist_rows",
    "shoulder_reaction",
    "shoulder_reaction_rows",
    "joint_rates",
    "prescribed_base_dynamics",
    "prescribed_base_affine",
    "grappled_inverse_dynamics",
    "scale_link_masses",
    "AutoProfile",
    "auto_profile",
    "auto_rates_rows",
    "auto_rates",
]

Array = NDArray[np.float64]

try:    # the routine numpy.linalg.svd runs for a real matrix with U and Vᵀ (LAPACK dgesdd, jobz 'A')
    from numpy.linalg import _umath_linalg
    _SVD_GUFUNC = getattr(_umath_linalg, "svd_f", None)
except ImportError:                                     # pragma: no cover - another numpy's layout
    _SVD_GUFUNC = None

N_JOINTS = 6
JOINT_NAMES = ("shoulder_yaw", "shoulder_pitch", "elbow_pitch", "wrist_pitch", "wrist_yaw", "wrist_roll")
#: Default point of resolution: the end-effector tip, 0.6604 m along the roll axis of the
#: last link (``joint_ee_fixed`` of ``SRMS_Canadarm.urdf``). [m]
EE_TIP_B6 = np.array([0.6604, 0.0, 0.0])


@dataclass(frozen=True)
class RmsGeometry:
    """Fixed geometry of the arm on the orbiter.

    Attributes
    ----------
    X_OS : ndarray, shape (4, 4)
        Shoulder (SRMS base) frame in the orbiter body frame.
    X_PJ : ndarray, shape (6, 4, 4)
        Joint frame of joint i in its parent link frame at zero angle (parent of joint
        0 is S). The link frame of link i is the joint frame rotated by θ_i.
    axis_J : ndarray, shape (6, 3)
        Unit joint axes in the joint frames.
    p_B6oEo_B6 : ndarray, shape (3,)
        Point of resolution in the last link frame. [m]
    q_lower, q_upper : ndarray, shape (6,)
        Joint angle range. [rad]
    qd_max, tau_max : ndarray, shape (6,)
        Joint rate and torque limits. [rad/s, N·m]
    """

    X_OS: Array
    X_PJ: Array
    axis_J: Array
    p_B6oEo_B6: Array
    q_lower: Array
    q_upper: Array
    qd_max: Array
    tau_max: Array
    fixed: tuple = field(init=False, repr=False)
    kernel_rows: Array = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # for rms_kinematics_rows, as Python floats: R_OS, p_OS, the point of resolution, then per joint
        # (k, R_PJ, R_PJ K, R_PJ K², p_PJ, axis) with k = 0, 1, 2 for an axis along x, y, z of the joint
        # frame (R_PJ None when it is the identity) and k = -1 otherwise (the link's rotation in its parent
        # is then R_PJ + sin θ R_PJ K + (1 − cos θ) R_PJ K², Rodrigues premultiplied)
        joints = []
        for X, a in zip(self.X_PJ, self.axis_J, strict=True):
            R = X[:3, :3]
            K = sp.skew(a)
            unit = [k for k in range(3) if np.array_equal(a, np.eye(3)[k])]
            joints.append((unit[0] if unit else -1, None if np.array_equal(R, np.eye(3)) else tuple(R.ravel().tolist()),
                           tuple((R @ K).ravel().tolist()), tuple((R @ K @ K).ravel().tolist()),
                           tuple(X[:3, 3].tolist()), tuple(a.tolist())))
        object.__setattr__(self, "fixed", (tuple(self.X_OS[:3, :3].ravel().tolist()), tuple(self.X_OS[:3, 3].tolist()),
                                           tuple(self.p_B6oEo_B6.tolist()), tuple(joints)))
        # the same numbers as one array for the compiled kernel (dynamics.arm_kernels.GEOMETRY_COLUMNS)
        G = np.zeros((N_JOINTS + 1, 35))
        G[0, :9], G[0, 9:12], G[0, 12:15] = self.fixed[0], self.fixed[1], self.fixed[2]
        for g, (kind, R_PJ, RK, RK2, p_PJ, a) in zip(G[1:], joints, strict=True):
            g[0], g[1] = kind, R_PJ is not None
            g[2:11] = R_PJ if R_PJ is not None else (1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0)
            g[11:20], g[20:29], g[29:32], g[32:35] = RK, RK2, p_PJ, a
        object.__setattr__(self, "kernel_rows", G)


@dataclass(frozen=True)
class RmsPose:
    """Kinematics of the arm at one configuration, everything in O.

    Attributes
    ----------
    X_OB : ndarray, shape (7, 4, 4)
        Link frames in O; index 0 is S, index i the link after joint i.
    p_OoJo_O : ndarray, shape (6, 3)
        Joint points (joint frame origins). [m]
    u_O : ndarray, shape (6, 3)
        Unit joint axes in O.
    X_OE : ndarray, shape (4, 4)
        End-effector frame (last link frame at the point of resolution) in O.
    """

    X_OB: Array
    p_OoJo_O: Array
    u_O: Array
    X_OE: Array


def rms_geometry(model: ch.ChainModel, X_OS: ArrayLike, p_B6oEo_B6: ArrayLike = EE_TIP_B6) -> RmsGeometry:
    """The arm geometry from a chain model of the SRMS (six revolute joints after the base).

    Parameters
    ----------
    model : ChainModel
        The SRMS chain (fixed or floating base; body 0's frame is S), e.g.
        ``chain_from_urdf(reference_path("SRMS_Canadarm.urdf"), floating_base=False)``.
    X_OS : array_like, shape (4, 4)
        Shoulder frame in O.
    p_B6oEo_B6 : array_like, shape (3,)
        Point of resolution in the last link frame. [m]

    Raises
    ------
    ModelError
        If the chain is not a serial chain of six revolute joints.
    ShapeError
        On a bad shape or non-finite value.
    """
    if model.n != N_JOINTS or not model.serial or not all(model.revolute[1:]):
        raise ModelError(f"model: the RMS needs a serial chain of 6 revolute joints, got {model.n} joints "
                         f"{model.joint_type[1:]}")
    X = np.asarray(X_OS, dtype=np.float64)
    if X.shape != (4, 4) or not np.all(np.isfinite(X)):
        raise ShapeError(f"X_OS: expected a finite (4, 4) pose, got shape {X.shape}")
    return RmsGeometry(
        X_OS=X.copy(),
        X_PJ=np.array(model.X_PJ[1:]),
        axis_J=np.array(model.axis_J[1:]),
        p_B6oEo_B6=sp.as_vector(p_B6oEo_B6, 3, "p_B6oEo_B6").copy(),
        q_lower=np.array(model.q_lower),
        q_upper=np.array(model.q_upper),
        qd_max=np.array(model.qd_max),
        tau_max=np.array(model.tau_max),
    )


def rms_kinematics_rows(geom: RmsGeometry, theta: list[float]) -> tuple[list[tuple[float, ...]],
                                                                         list[tuple[float, float, float]],
                                                                         list[tuple[float, float, float]],
                                                                         tuple[float, float, float]]:
    """:func:`rms_kinematics` on Python floats (its kernel; no shape check): the readable reference of the compiled
    :func:`rms_kinematics_arrays`, which the arm's step loop runs.

    Parameters
    ----------
    geom : RmsGeometry
    theta : list of 6 float
        Joint angles. [rad]

    Returns
    -------
    R_OB : list of 7 tuples of 9 float
        Link rotations in O, row-major (index 0 the shoulder S).
    p_OoJo_O : list of 6 tuples of 3 float
        Joint points. [m]
    u_O : list of 6 tuples of 3 float
        Unit joint axes in O.
    p_OoEo_O : tuple of 3 float
        The point of resolution. [m]
    """
    # Down the chain on Python floats (row-major 3×3 as 9-tuples): several times faster than numpy on
    # 3-vectors. The link's rotation in O is R_OP R_PJ R_J(θ) (A-21 is its transpose); about a joint
    # frame axis R_J turns two columns of R_OP R_PJ and leaves the axis column, which is u.
    a0, a1, a2, a3, a4, a5, a6, a7, a8 = geom.fixed[0]
    px, py, pz = geom.fixed[1]
    Rs = [geom.fixed[0]]
    ps = []
    us = []
    cos, sin = math.cos, math.sin
    for ti, (kind, R_PJ, RK, RK2, (qx, qy, qz), (x, y, z)) in zip(theta, geom.fixed[3], strict=True):
        px, py, pz = (px + a0 * qx + a1 * qy + a2 * qz, py + a3 * qx + a4 * qy + a5 * qz,
                      pz + a6 * qx + a7 * qy + a8 * qz)
        ps.append((px, py, pz))
        if kind < 0:
            sn, cn = sin(ti), 1.0 - cos(ti)
            r0, r1, r2, r3, r4, r5, r6, r7, r8 = (R_PJ if R_PJ is not None
                                                  else (1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0))
            k0, k1, k2, k3, k4, k5, k6, k7, k8 = RK
            c0, c1, c2, c3, c4, c5, c6, c7, c8 = RK2
            b0, b1, b2 = r0 + sn * k0 + cn * c0, r1 + sn * k1 + cn * c1, r2 + sn * k2 + cn * c2
            b3, b4, b5 = r3 + sn * k3 + cn * c3, r4 + sn * k4 + cn * c4, r5 + sn * k5 + cn * c5
            b6, b7, b8 = r6 + sn * k6 + cn * c6, r7 + sn * k7 + cn * c7, r8 + sn * k8 + cn * c8
            a0, a1, a2, a3, a4, a5, a6, a7, a8 = (
                a0 * b0 + a1 * b3 + a2 * b6, a0 * b1 + a1 * b4 + a2 * b7, a0 * b2 + a1 * b5 + a2 * b8,
                a3 * b0 + a4 * b3 + a5 * b6, a3 * b1 + a4 * b4 + a5 * b7, a3 * b2 + a4 * b5 + a5 * b8,
                a6 * b0 + a7 * b3 + a8 * b6, a6 * b1 + a7 * b4 + a8 * b7, a6 * b2 + a7 * b5 + a8 * b8)
            Rs.append((a0, a1, a2, a3, a4, a5, a6, a7, a8))
            us.append((a0 * x + a1 * y + a2 * z, a3 * x + a4 * y + a5 * z, a6 * x + a7 * y + a8 * z))  # u = R_OB a
            continue
        if R_PJ is not None:
            r0, r1, r2, r3, r4, r5, r6, r7, r8 = R_PJ
            a0, a1, a2, a3, a4, a5, a6, a7, a8 = (
                a0 * r0 + a1 * r3 + a2 * r6, a0 * r1 + a1 * r4 + a2 * r7, a0 * r2 + a1 * r5 + a2 * r8,
                a3 * r0 + a4 * r3 + a5 * r6, a3 * r1 + a4 * r4 + a5 * r7, a3 * r2 + a4 * r5 + a5 * r8,
                a6 * r0 + a7 * r3 + a8 * r6, a6 * r1 + a7 * r4 + a8 * r7, a6 * r2 + a7 * r5 + a8 * r8)
        c, sn = cos(ti), sin(ti)
        if kind == 2:       # R_z: x' = c x + s y, y' = −s x + c y
            a0, a1, a3, a4, a6, a7 = (c * a0 + sn * a1, c * a1 - sn * a0, c * a3 + sn * a4, c * a4 - sn * a3,
                                      c * a6 + sn * a7, c * a7 - sn * a6)
            us.append((a2, a5, a8))
        elif kind == 1:     # R_y: x' = c x − s z, z' = s x + c z
            a0, a2, a3, a5, a6, a8 = (c * a0 - sn * a2, sn * a0 + c * a2, c * a3 - sn * a5, sn * a3 + c * a5,
                                      c * a6 - sn * a8, sn * a6 + c * a8)
            us.append((a1, a4, a7))
        else:               # R_x: y' = c y + s z, z' = −s y + c z
            a1, a2, a4, a5, a7, a8 = (c * a1 + sn * a2, c * a2 - sn * a1, c * a4 + sn * a5, c * a5 - sn * a4,
                                      c * a7 + sn * a8, c * a8 - sn * a7)
            us.append((a0, a3, a6))
        Rs.append((a0, a1, a2, a3, a4, a5, a6, a7, a8))
    ex, ey, ez = geom.fixed[2]
    return Rs, ps, us, (px + a0 * ex + a1 * ey + a2 * ez, py + a3 * ex + a4 * ey + a5 * ez,
                        pz + a6 * ex + a7 * ey + a8 * ez)


def _kernels() -> ModuleType:
    """The compiled kernels (:mod:`dynamics.arm_kernels`), imported on first use (:func:`dynamics.kernel_module`;
    a built arm has them loaded: :func:`load_kernels`)."""
    return kernel_module("arm_kernels")


def load_kernels() -> None:
    """Import the compiled kernels of :func:`rms_kinematics_arrays`, :func:`limit_joint_rates`, :func:`auto_rates`,
    :func:`predict_state_arrays`, :func:`grappled_twist_arrays`, :func:`massless_wrench_arrays`,
    :func:`grappled_step_arrays`, :func:`auto_command_arrays` and :func:`flex_terms_arrays` and load their machine
    code now (compile it if numba's cache has none), for the argument types the arm passes; otherwise their first
    call pays for it (numba's import and the load, a few tenths of a second; the compile, seconds). The arm calls it
    when it is built."""
    _kernels().rms_kinematics(np.zeros((N_JOINTS + 1, 35)), np.zeros(N_JOINTS), np.empty((N_JOINTS + 1, 9)),
                              np.empty((N_JOINTS + 1, 3)), np.empty((N_JOINTS, 3)), np.empty((6, N_JOINTS)), True,
                              np.empty((N_JOINTS, 6), order="F"))
    limit_joint_rates(np.zeros(N_JOINTS), np.zeros(N_JOINTS), np.ones((3, N_JOINTS)), 1.0)
    eye = np.eye(3).ravel()
    auto_rates(np.concatenate([np.zeros(6), eye, np.zeros(3)]), 0.0, 0.0, 1.0, np.zeros(3), eye, 1.0, 1.0, 1.0)
    z, q = np.zeros(3), np.array([1.0, 0.0, 0.0, 0.0])
    predict_state_arrays(z, q, z, z, z, z, 1.0)
    z, q = z.copy(), q.copy()                   # as the bus decodes them (protocol.codec: views of the frame)
    z.flags.writeable = q.flags.writeable = False
    predict_state_arrays(z, q, z, z, z, z, 1.0)
    x = np.concatenate([np.zeros(3), [1.0, 0.0, 0.0, 0.0], np.zeros(6)])    # the arm's own arrays (writable)
    grappled_twist_arrays(x, x, np.zeros(3))
    massless_wrench_arrays(x, 1.0, True, np.zeros(3), np.zeros(3), np.zeros(6))
    G, P, z6 = np.zeros((N_JOINTS + 1, 35)), np.ones((N_JOINTS, 8)), np.zeros(6)
    for J_inv in (np.eye(6), np.asfortranarray(np.eye(6))):   # the SVD's inverse (C order) and LU's (Fortran)
        grappled_step_arrays(x, x, np.zeros(3), J_inv, P, 1.0, z6, z6, z6, z6, np.zeros(6, dtype=np.bool_), 1e-3, 1,
                             z6, z6, z6, None, G, True, np.eye(6), 0.0, 1.0)
        auto_command_arrays(G, z6, True, eye, np.zeros(3), np.concatenate([np.zeros(6), eye, np.zeros(3)]), 0.0, 0.0,
                            1e-3, 1.0, 1.0, 1.0, 0.0, 0.0, 1.0, 1.0, J_inv, z6, np.ones((3, N_JOINTS)), 1.0,
                            np.empty((4, N_JOINTS)))
        _kernels().flex_terms(np.eye(7, 3), np.eye(6, 3), np.zeros((0, 4)), np.ones(6), J_inv, np.empty((6, 6)),
                              np.empty(6))


def rms_kinematics_arrays(geom: RmsGeometry, theta: Array, invert: bool = False
                          ) -> tuple[Array, Array, Array, Array, Array | None]:
    """:func:`rms_kinematics_rows` and :func:`rms_jacobian_rows` at once as arrays, and ``invert``: the Jacobian's
    inverse (:func:`regular_inverse`), for the arm's step loop: the compiled kernel
    :func:`dynamics.arm_kernels.rms_kinematics`, bit for bit those (the same operations on Python floats, the same
    LAPACK routines; the tests hold them equal). No shape check. New arrays.

    Parameters
    ----------
    geom : RmsGeometry
    theta : ndarray, shape (6,)
        Joint angles, float64. [rad]
    invert : bool
        Whether to invert J.

    Returns
    -------
    R_OB : ndarray, shape (7, 9)
        Link rotations in O, row-major (row 0 the shoulder S).
    p : ndarray, shape (7, 3)
        Joint points 1..6, then the point of resolution, in O. [m]
    u_O : ndarray, shape (6, 3)
        Unit joint axes in O.
    J : ndarray, shape (6, 6)
        The Jacobian (:func:`rms_jacobian`).
    J_inv : ndarray, shape (6, 6), or None
        ``regular_inverse(J)`` (in its Fortran order) if ``invert`` and it is not None; else None (then
        ``regular_inverse`` tells: J singular, or not finite).
    """
    R_OB, p, u, J = np.empty((N_JOINTS + 1, 9)), np.empty((N_JOINTS + 1, 3)), np.empty((N_JOINTS, 3)), np.empty((6, 6))
    J_inv = np.empty((6, 6), order="F")          # as regular_inverse's (LAPACK's): J_inv @ x the same sums
    ok = _kernels().rms_kinematics(geom.kernel_rows, theta, R_OB, p, u, J, invert, J_inv)
    return R_OB, p, u, J, J_inv if invert and ok else None


def limit_joint_rates_rows(qd: Sequence[float], theta: Sequence[float], qd_max: Sequence[float],
                           stop_lower: Sequence[float], stop_upper: Sequence[float], gain: float
                           ) -> tuple[list[float], list[float], float, int, int]:
    """Commanded joint rates into their rate limits and away from their angle limits, on floats (no checks).

    Every rate is scaled by ``r = max_i |θ̇_i| / θ̇max_i`` when ``r > 1 + 1e-12`` (the direction of the
    motion kept); then a rate toward an angle limit is at most ``gain`` times the distance to its stop
    (zero at the stop and beyond): ``θ̇_i ∈ [min(gain (stop_lower_i − θ_i), 0), max(gain (stop_upper_i − θ_i), 0)]``.
    The readable reference of the compiled :func:`limit_joint_rates`, which the arm runs.

    Parameters
    ----------
    qd : sequence of 6 float
        Commanded joint rates. [rad/s]
    theta : sequence of 6 float
        Joint angles. [rad]
    qd_max : sequence of 6 float
        Rate limits (> 0). [rad/s]
    stop_lower, stop_upper : sequence of 6 float
        Where the rate toward a limit reaches zero. [rad]
    gain : float
        [1/s]

    Returns
    -------
    scaled : list of 6 float
        The rates after the scaling (as given when not scaled). [rad/s]
    limited : list of 6 float
        Then within the angle limits: the rates to command. [rad/s]
    r_max : float
        The largest ``|θ̇_i| / θ̇max_i``.
    j : int
        The joint of ``r_max`` (the first) if the rates were scaled, else -1.
    clipped : int
        Bit i set where ``|limited_i − scaled_i| > 1e-12`` (joint i stopped by an angle limit).
    """
    ratio = [abs(x) / m for x, m in zip(qd, qd_max, strict=True)]
    r_max = max(ratio)
    j = -1
    scaled = list(qd)
    if r_max > 1.0 + 1e-12:
        j = ratio.index(r_max)
        scaled = [x / r_max for x in scaled]
    limited = [min(max(x, min(gain * (lo - t), 0.0)), max(gain * (hi - t), 0.0))
               for x, t, lo, hi in zip(scaled, theta, stop_lower, stop_upper, strict=True)]
    clipped = sum(1 << i for i, (lim, x) in enumerate(zip(limited, scaled, strict=True)) if abs(lim - x) > 1e-12)
    return scaled, limited, r_max, j, clipped


def limit_joint_rates(qd: Array, theta: Array, limits: Array, gain: float) -> tuple[Array, Array, float, int, int]:
    """:func:`limit_joint_rates_rows` on arrays for the arm's step loop: the compiled kernel
    :func:`dynamics.arm_kernels.limit_joint_rates`, bit for bit the reference (the tests hold them equal). No
    shape check.

    Parameters
    ----------
    qd, theta : ndarray, shape (6,)
        [rad/s, rad]
    limits : ndarray, shape (3, 6)
        Rows ``qd_max``, ``stop_lower``, ``stop_upper``. [rad/s, rad, rad]
    gain : float
        [1/s]

    Returns
    -------
    scaled, limited : ndarray, shape (6,)
        New arrays (rows of one). [rad/s]
    r_max, j, clipped
        As :func:`limit_joint_rates_rows`.
    """
    out = np.empty((2, N_JOINTS))
    r_max, j, clipped = _kernels().limit_joint_rates(qd, theta, limits, gain, out)
    return out[0], out[1], r_max, j, clipped


def predict_state_arrays(p: Array, quat: Array, v: Array, w: Array, a: Array, wdot: Array, dt: float) -> Array | None:
    """:func:`dynamics.rigid_body.predict_rows` (a rigid body's state ``dt`` ahead of a sample, its accelerations
    held) for the arm's predicted inputs: the compiled kernel :func:`dynamics.arm_kernels.predict_state`, bit for
    bit the reference (the tests hold them equal).

    Parameters
    ----------
    p, v, a : ndarray, shape (3,)
        CoM position, velocity, acceleration in W. [m, m/s, m/s²]
    quat : ndarray, shape (4,)
        Attitude [w, x, y, z].
    w, wdot : ndarray, shape (3,)
        Body rate and its derivative, in B. [rad/s, rad/s²]
    dt : float
        > 0. [s]

    Returns
    -------
    ndarray, shape (13,) or None
        ``[p, quat, v, w]`` at ``t + dt`` (a new array), or None where the kernel does not follow the reference
        (a field not an ndarray or of another size, the quaternion not finite): the caller runs the reference,
        which refuses what is to be refused. The bus's arrays (read-only) and the services' own (writable) are
        loaded (:func:`load_kernels`); another layout is compiled at its first use.
    """
    nd = np.ndarray
    if not (type(p) is nd and type(quat) is nd and type(v) is nd and type(w) is nd and type(a) is nd
            and type(wdot) is nd):
        return None
    out = np.empty(13)
    try:
        ok = _kernels().predict_state(p, quat, v, w, a, wdot, float(dt), out)
    except Exception:           # numba's typing of an array it cannot index so (another number of dimensions)
        return None
    return out if ok else None


def grappled_twist_arrays(orb: Array, pay: Array, p_ToEo_T: Array) -> Array:
    """:func:`grappled_twist_rows` for the arm's step: the compiled kernel :func:`dynamics.arm_kernels.grappled_twist`,
    bit for bit the reference (the tests hold them equal). Arguments float64, C-contiguous, of their shapes (13,),
    (13,), (3,) (not checked). A new array (6,)."""
    out = np.empty(6)
    _kernels().grappled_twist(orb, pay, p_ToEo_T, out)
    return out


def massless_wrench_arrays(orb: Array, h: float, propagate: bool, p_OoEo_O: Array, p_OoSo_O: Array,
                           F_Eo_O: Array) -> Array | None:
    """:func:`massless_wrench_rows` for the arm's step: the compiled kernel
    :func:`dynamics.arm_kernels.massless_wrench`, bit for bit the reference (the tests hold them equal). Arguments
    float64, C-contiguous, of their shapes (13,), (3,), (3,), (6,) (not checked). A new array (34,), or None where
    the reference returns None."""
    out = np.empty(34)
    return out if _kernels().massless_wrench(orb, float(h), propagate, p_OoEo_O, p_OoSo_O, F_Eo_O, out) else None


_NO_DIRECT = np.zeros(N_JOINTS, dtype=np.bool_)
_NO_CURRENT = np.zeros(N_JOINTS)


def grappled_step_arrays(orb: Array, pay: Array, p_ToEo_T: Array, J_inv: Array, servo_rows: Array,
                         friction_rate: float, theta_m: Array, omega: Array, integ: Array, rate_cmd: Array,
                         brakes: NDArray[np.bool_], h: float, n_sub: int, k: Array, c: Array, theta: Array,
                         direct: Sequence[float | None] | None, G: Array, regular: bool, J_svd: Array | None,
                         sigma: float, sigma_min: float) -> tuple[int, Array, Array, Array, Array, Array, Array,
                                                                   Array, Array | None, Array, Array]:
    """One grappled step of the massless arm with its servos on the 3-7 springs, in one compiled call
    (:func:`dynamics.arm_kernels.grappled_step`): bit for bit the same step made of :func:`grappled_twist_arrays`,
    ``J_inv @ V_R``, :func:`dynamics.servo.servo_step_arrays` loaded, :func:`rms_kinematics_arrays` and Weyl's test
    (the tests hold them equal). No checks; new arrays.

    Parameters
    ----------
    orb, pay : ndarray, shape (13,)
        The orbiter's and the payload's ``[p, quat, v, w]`` at the step's start.
    p_ToEo_T : ndarray, shape (3,)
        Eo in the payload, frozen at the grasp. [m]
    J_inv : ndarray, shape (6, 6)
        The last kinematics' inverse (O, at the point of resolution).
    servo_rows, friction_rate : ndarray (6, 8), float
        :attr:`dynamics.servo.ServoParams.kernel_rows`, ``friction_rate``.
    theta_m, omega, integ : ndarray, shape (6,)
        The servos' state: motor-side angles [rad], rates [rad/s], rate-error integrals [rad].
    rate_cmd : ndarray, shape (6,)
        Commanded joint rates. [rad/s]
    brakes : ndarray of bool, shape (6,)
    h : float
        The step. [s]
    n_sub : int
        Servo substeps.
    k, c : ndarray, shape (6,)
        The springs [N·m/rad] and dampers [N·m·s/rad] (3-7).
    theta : ndarray, shape (6,)
        Joint angles at the step's start. [rad]
    direct : sequence of (float or None), or None
        As :func:`dynamics.servo.servo_step`.
    G : ndarray, shape (7, 35)
        :attr:`RmsGeometry.kernel_rows`.
    regular, J_svd, sigma, sigma_min
        The last SVD (``J_svd`` None: none at hand; ``regular`` False then).

    Returns
    -------
    status : int
        0: done; 1: the new inverse, the rates and the torques are the caller's to make
        (:meth:`services.arm.ArmKinematics.invert` with ``J_inv_new`` if it holds LU's inverse, else None).
    V_R_O, servo, theta, R_OB, p, u_O, J, J_inv_new, theta_dot, tau
        The twist (6,); the servos' rows ``theta_m, omega, integ, current, tau_load`` (5, 6); the new angles (6,);
        the kinematics as :func:`rms_kinematics_arrays`; ``J_inv_new`` (6, 6) LU's inverse or None; the new rates and
        torques (6,) (meaningless unless the status is 0).
    """
    if direct is None:
        on, cur = _NO_DIRECT, _NO_CURRENT
    else:
        on = np.array([d is not None for d in direct])
        cur = np.array([0.0 if d is None else float(d) for d in direct])
    V, servo, theta_new, thd, tau = np.empty(6), np.empty((5, N_JOINTS)), np.empty(6), np.empty(6), np.empty(6)
    R_OB, p, u, J = np.empty((N_JOINTS + 1, 9)), np.empty((N_JOINTS + 1, 3)), np.empty((N_JOINTS, 3)), np.empty((6, 6))
    J_inv_new = np.empty((6, 6), order="F")
    status, inverted = _kernels().grappled_step(
        orb, pay, p_ToEo_T, J_inv, servo_rows, float(friction_rate), theta_m, omega, integ, rate_cmd, brakes,
        float(h), int(n_sub), k, c, theta, on, cur, G, regular, J if J_svd is None else J_svd, float(sigma),
        float(sigma_min), V, servo, theta_new, R_OB, p, u, J, J_inv_new, thd, tau)
    return status, V, servo, theta_new, R_OB, p, u, J, (J_inv_new if inverted else None), thd, tau


def auto_command_arrays(G: Array, theta_m: Array, motor: bool, R_E: Array, p_E: Array, seg: Array, s0: float,
                        s1: float, h: float, gain: float, v_lim: float, w_lim: float, tol_p: float, tol_r: float,
                        v_max: float, w_max: float, J_inv: Array, theta: Array, limits: Array, limit_gain: float,
                        out: Array) -> tuple[int, float, float, float, float, float, int, int]:
    """An auto segment's step of the joint-rate command in one compiled call
    (:func:`dynamics.arm_kernels.auto_command`, whose docstring gives the arguments and results): bit for bit E's
    pose at the motor angles (:func:`rms_kinematics_arrays`), :func:`auto_rates`, the clip of the point of
    resolution's speed and rate, ``J_inv @ V`` and :func:`limit_joint_rates` (the tests hold them equal). No checks;
    ``out`` (4, 6) is written."""
    return _kernels().auto_command(G, theta_m, motor, R_E, p_E, seg, float(s0), float(s1), float(h), float(gain),
                                   float(v_lim), float(w_lim), float(tol_p), float(tol_r), float(v_max),
                                   float(w_max), J_inv, theta, limits, float(limit_gain), out)


def flex_terms_arrays(points_O: Array, u_O: Array, beam_rows: Array, joint_stiffness: Array, J_inv: Array
                      ) -> tuple[Array, Array] | None:
    """RMSFLX's terms at a configuration where J is regular, in one compiled call
    (:func:`dynamics.arm_kernels.flex_terms`, whose docstring gives the arguments): bit for bit
    :func:`dynamics.flexibility.arm_flexibility` of ``points_O``, ``u_O``, the beams (``beam_rows``: ``root, tip, EI,
    GJ`` each) and ``joint_stiffness``, then ``X = J_inv @ γ @ J_inv.T``, ``γ_J = (X + Xᵀ)/2`` (3-4),
    :func:`regular_inverse` and its diagonal (3-7), as the arm computes them (the tests hold them equal). No checks.
    ``(γ_J, k)``, new arrays (6, 6) and (6,), or None where the reference raises or finds γ_J singular or a spring
    not positive (the caller runs it, which says which).
    """
    gamma_J, k = np.empty((6, 6)), np.empty(6)
    ok = _kernels().flex_terms(points_O, u_O, beam_rows, joint_stiffness, J_inv, gamma_J, k)
    return (gamma_J, k) if ok else None


def rms_pose_from_rows(geom: RmsGeometry, Rs: list[tuple[float, ...]], ps: list[tuple[float, float, float]],
                       us: list[tuple[float, float, float]], pE: tuple[float, float, float]) -> RmsPose:
    """The :class:`RmsPose` of the output of :func:`rms_kinematics_rows` (the same numbers as arrays).

    Parameters
    ----------
    geom : RmsGeometry
    Rs, ps, us, pE
        :func:`rms_kinematics_rows`: link rotations (7 × 9 floats, row-major), joint points and
        axes (6 × 3 floats) and the point of resolution (3 floats), all in O. [m]

    Returns
    -------
    RmsPose
    """
    X_OB = np.zeros((N_JOINTS + 1, 4, 4))
    X_OB[:, 3, 3] = 1.0
    X_OB[:, :3, :3] = np.array(Rs).reshape(N_JOINTS + 1, 3, 3)
    p = np.array(ps)
    X_OB[0, :3, 3] = geom.X_OS[:3, 3]
    X_OB[1:, :3, 3] = p
    X_OE = X_OB[N_JOINTS].copy()
    X_OE[:3, 3] = pE
    return RmsPose(X_OB, p, np.array(us), X_OE)


def rms_kinematics(geom: RmsGeometry, theta: ArrayLike) -> RmsPose:
    """Link frames, joint points and axes and the end-effector pose in O (SVDS 2-14, A-21, A-22).

    Parameters
    ----------
    theta : array_like, shape (6,)
        Joint angles, SVDS order. [rad]

    Raises
    ------
    ShapeError
        If ``theta`` is not a finite (6,) vector.
    """
    th = sp.as_vector(theta, N_JOINTS, "theta").tolist()
    return rms_pose_from_rows(geom, *rms_kinematics_rows(geom, th))


def rms_jacobian_rows(ps: list[tuple[float, float, float]], us: list[tuple[float, float, float]],
                      pE: tuple[float, float, float]) -> list[list[float]]:
    """:func:`rms_jacobian` on Python floats from the output of :func:`rms_kinematics_rows`.

    Returns
    -------
    J : list of 6 lists of 6 float
        Rows ``[ω; v]`` in O, columns the joints (the same arithmetic as :func:`rms_jacobian`).
    """
    ex, ey, ez = pE
    r = [(ex - px, ey - py, ez - pz) for px, py, pz in ps]    # Σ_{j≥i} r_j telescopes to p_E − p_i
    w0, w1, w2 = (list(c) for c in zip(*us, strict=True))
    return [w0, w1, w2,                                        # −r × u = u × r
            [uy * rz - uz * ry for (ux, uy, uz), (rx, ry, rz) in zip(us, r, strict=True)],
            [uz * rx - ux * rz for (ux, uy, uz), (rx, ry, rz) in zip(us, r, strict=True)],
            [ux * ry - uy * rx for (ux, uy, uz), (rx, ry, rz) in zip(us, r, strict=True)]]


def rms_jacobian(pose: RmsPose) -> Array:
    """The RMS Jacobian ``J = [S_6][U]`` of SVDS App. A (A-5, A-11, A-14), in O at Eo.

    With ``r_j`` the vector from joint j to joint j+1 (``r_6`` from the last joint to
    the point of resolution), column i is ``[u_i; -Σ_{j≥i} r_j × u_i]`` (the lower row
    of A-5 with the sum running to the end of the chain), so that
    ``[ω_R; v_R] = J θ̇`` (A-13) and ``τ = Jᵀ [M_e; F_e]`` (A-15).

    Returns
    -------
    J : ndarray, shape (6, 6)
        Rows ``[ω; v]`` in O, columns the joints. [rad/s or m/s per rad/s]
    """
    return np.array(rms_jacobian_rows(pose.p_OoJo_O.tolist(), pose.u_O.tolist(), pose.X_OE[:3, 3].tolist()))


def dls_solve(A: ArrayLike, b: ArrayLike, sigma_min: float, damping_max: float,
              svd: tuple[Array, Array, Array] | None = None) -> tuple[Array, float, bool]:
    """Solve ``A x = b`` exactly, or by damped least squares near a singularity.

    With ``σ`` the singular values of A: if ``σ_6 ≥ sigma_min`` the exact solution;
    otherwise ``x = Σ σ_k/(σ_k² + λ²) v_k u_kᵀ b`` with
    ``λ² = damping_max² (1 − (σ_6/sigma_min)²)`` (Nakamura & Hanafusa 1986; Maciejewski
    & Klein 1988), continuous at the threshold.

    Parameters
    ----------
    A : array_like, shape (6, 6)
    b : array_like, shape (6,)
    sigma_min : float
        Threshold on the smallest singular value (same units as A).
    damping_max : float
        Damping at the singularity.
    svd : tuple (U, s, Vt), optional
        ``numpy.linalg.svd(A)`` if already computed.

    Returns
    -------
    x : ndarray, shape (6,)
    sigma : float
        Smallest singular value of A.
    damped : bool
        Whether damping was applied.

    Raises
    ------
    ShapeError
        On bad shapes or non-finite values.
    """
    A = np.asarray(A, dtype=np.float64)
    if A.shape != (6, 6) or not np.all(np.isfinite(A)):
        raise ShapeError(f"A: expected a finite (6, 6) matrix, got shape {A.shape}")
    bb = sp.as_vector(b, 6, "b")
    U, s, Vt = np.linalg.svd(A) if svd is None else svd
    smin = float(s[-1])
    if smin >= sigma_min:
        return Vt.T @ ((U.T @ bb) / s), smin, False
    lam2 = damping_max ** 2 * (1.0 - (smin / sigma_min) ** 2)
    return Vt.T @ ((s / (s * s + lam2)) * (U.T @ bb)), smin, True


def jacobian_inverse(J: ArrayLike, sigma_min: float, damping_max: float,
                     svd: tuple[Array, Array, Array] | None = None) -> tuple[Array, float, bool]:
    """The matrix of :func:`dls_solve`: ``J^-1``, or the damped inverse near a singularity.

    ``J⁺ = Σ σ_k/(σ_k² + λ²) v_k u_kᵀ`` with λ as in :func:`dls_solve` (λ = 0 when
    ``σ_6 ≥ sigma_min``). ``J⁺ V_R`` are the joint rates of 2-12 and ``J⁺ᵀ τ`` the tip wrench of
    2-3, so that one matrix serves both and ``τ·(J⁺V) = (J⁺ᵀτ)·V`` holds to round-off
    (the power balance of 2-1/2-2) damped or not.

    Parameters
    ----------
    J : array_like, shape (6, 6)
    sigma_min, damping_max : float
        As :func:`dls_solve`.
    svd : tuple (U, s, Vt), optional
        ``numpy.linalg.svd(J)`` if already computed.

    Returns
    -------
    J_inv : ndarray, shape (6, 6)
    sigma : float
        Smallest singular value of J.
    damped : bool

    Raises
    ------
    ShapeError
        On a bad shape or non-finite values.
    """
    A = np.asarray(J, dtype=np.float64)
    if A.shape != (6, 6) or not np.all(np.isfinite(A)):
        raise ShapeError(f"J: expected a finite (6, 6) matrix, got shape {A.shape}")
    U, s, Vt = np.linalg.svd(A) if svd is None else svd
    smin = float(s[-1])
    lam2 = 0.0 if smin >= sigma_min else damping_max ** 2 * (1.0 - (smin / sigma_min) ** 2)
    return (Vt.T * (s / (s * s + lam2))) @ U.T, smin, lam2 > 0.0


def jacobian_inverse_arrays(J: Array, sigma_min: float, damping_max: float) -> tuple[Array, float, bool]:
    """:func:`jacobian_inverse` for the arm's step loop, the same results to the bit: the SVD by the routine
    ``numpy.linalg.svd`` runs (its gufunc, LAPACK's dgesdd of numpy's library) without that wrapper's checks and
    error state, the finiteness checked on the sum of J first, the damping's scale on Python floats (the same
    IEEE operations as the ufuncs'). Each of those steps of numpy's costs microseconds more in the arm's step,
    which runs this every ``flex_every`` steps, than in a loop of its own (its code then out of the caches).

    Parameters
    ----------
    J : ndarray, shape (6, 6)
        float64, not checked.
    sigma_min, damping_max : float
        As :func:`dls_solve`.

    Returns
    -------
    J_inv, sigma, damped
        As :func:`jacobian_inverse`.

    Raises
    ------
    ShapeError
        If J is not finite.
    numpy.linalg.LinAlgError
        If the SVD does not converge (numpy's own call then raises it, after the gufunc's warning).
    """
    if not math.isfinite(sum(J.ravel().tolist())):      # a non-finite entry (or a sum that overflowed)
        if not np.all(np.isfinite(J)):
            raise ShapeError(f"J: expected a finite (6, 6) matrix, got shape {J.shape}")
    if _SVD_GUFUNC is None:                             # pragma: no cover - another numpy's layout
        return jacobian_inverse(J, sigma_min, damping_max)
    U, s, Vt = _SVD_GUFUNC(J, signature="d->ddd")
    sl = s.tolist()
    smin = sl[-1]
    if smin != smin:                                    # dgesdd did not converge (NaN): numpy's call raises
        np.linalg.svd(J)
    lam2 = 0.0 if smin >= sigma_min else damping_max ** 2 * (1.0 - (smin / sigma_min) ** 2)
    try:
        d = np.array([x / (x * x + lam2) for x in sl])
    except ZeroDivisionError:                           # σ² + λ² zero: numpy's inf or NaN, as jacobian_inverse's
        d = s / (s * s + lam2)
    return (Vt.T * d) @ U.T, smin, lam2 > 0.0


def regular_inverse(A: ArrayLike) -> Array | None:
    """The inverse of a small square matrix by LU (LAPACK getrf/getri), or None if it is singular.

    For the step loop's 6×6 inverses (J away from a singularity, γ_J of 3-7): about 3× cheaper
    than ``numpy.linalg.inv``, whose checks and error handling dominate at this size, and a
    singular matrix is a return value (the caller falls back), not an exception.

    Parameters
    ----------
    A : array_like, shape (n, n)

    Returns
    -------
    ndarray, shape (n, n), or None
        ``A⁻¹`` (a new array), or None if LU finds an exactly zero pivot.

    Raises
    ------
    ShapeError
        If ``A`` is not a square 2-D array.
    """
    a = np.asarray(A, dtype=np.float64)
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ShapeError(f"A: expected a square matrix, got shape {a.shape}")
    lu, piv, info = dgetrf(a)
    if info != 0:
        return None
    A_inv, info = dgetri(lu, piv)
    return A_inv if info == 0 else None


def tip_wrench(J: ArrayLike, tau: ArrayLike, sigma_min: float = 0.0, damping_max: float = 0.0,
               svd: tuple[Array, Array, Array] | None = None) -> tuple[Array, float, bool]:
    """End-effector wrench from the joint torques, ``[M_e; F_e] = J^-T τ`` (SVDS 2-3).

    Parameters
    ----------
    J : array_like, shape (6, 6)
        :func:`rms_jacobian`.
    tau : array_like, shape (6,)
        Joint (servo output) torques. [N·m]
    sigma_min, damping_max : float
        Singularity handling, as :func:`dls_solve` (0: exact).
    svd : tuple (U, s, Vt), optional
        ``numpy.linalg.svd(J)`` if already computed.

    Returns
    -------
    F_Eo_O : ndarray, shape (6,)
        ``[M_e; F_e]`` the arm applies to the payload at Eo, in O; the orbiter receives
        the opposite. [N·m, N]
    sigma : float
    damped : bool
    """
    Ja = np.asarray(J, dtype=np.float64)
    svd_T = None if svd is None else (svd[2].T, svd[1], svd[0].T)   # Jᵀ = V Σ Uᵀ
    return dls_solve(Ja.T, tau, sigma_min, damping_max, svd_T)


def joint_rates(J: ArrayLike, V_R_O: ArrayLike, sigma_min: float = 0.0, damping_max: float = 0.0,
                svd: tuple[Array, Array, Array] | None = None) -> tuple[Array, float, bool]:
    """Joint rates from the relative motion, ``θ̇ = J^-1 [ω_R; v_R]`` (SVDS 2-12).

    Parameters
    ----------
    J : array_like, shape (6, 6)
    V_R_O : array_like, shape (6,)
        Relative spatial velocity of E in O (:func:`relative_twist`). [rad/s, m/s]
    sigma_min, damping_max : float
        Singularity handling, as :func:`dls_solve`.
    svd : tuple (U, s, Vt), optional
        ``numpy.linalg.svd(J)`` if already computed.

    Returns
    -------
    theta_dot : ndarray, shape (6,)
        [rad/s]
    sigma : float
    damped : bool
    """
    return dls_solve(J, V_R_O, sigma_min, damping_max, svd)


def relative_twist(R_WO: ArrayLike, w_WO_O: ArrayLike, v_WOo_W: ArrayLike, p_OoEo_O: ArrayLike,
                   R_WT: ArrayLike, w_WT_T: ArrayLike, v_WTo_W: ArrayLike, p_ToEo_T: ArrayLike) -> Array:
    """Relative velocity of the end-effector point with respect to the orbiter (SVDS 2-10, 2-11).

    E is rigidly attached to the payload T (grappled). ``v_R`` is the derivative, in the
    orbiter frame, of the position of Eo relative to O::

        v_R = R_OW (v_WTo_W + ω_T × p_ToEo − v_WOo_W) − ω_O × p_OoEo     (2-10)
        ω_R = R_OT ω_T − ω_O                                             (2-11)

    (2-10 written with the payload's lever arm rotated to W; the OCR'd sign of the
    ``p_2`` term follows from ``p_2`` pointing from the payload CM to the tip.)

    Parameters
    ----------
    R_WO, R_WT : array_like, shape (3, 3)
        Orbiter and payload attitudes.
    w_WO_O, w_WT_T : array_like, shape (3,)
        Body angular velocities in their body frames. [rad/s]
    v_WOo_W, v_WTo_W : array_like, shape (3,)
        CoM velocities in W. [m/s]
    p_OoEo_O : array_like, shape (3,)
        From the orbiter CoM to Eo, in O. [m]
    p_ToEo_T : array_like, shape (3,)
        From the payload CoM to Eo, in T. [m]

    Returns
    -------
    V_R_O : ndarray, shape (6,)
        ``[ω_R; v_R]`` in O. [rad/s, m/s]
    """
    RWO = np.asarray(R_WO, dtype=np.float64)
    RWT = np.asarray(R_WT, dtype=np.float64)
    if RWO.shape != (3, 3) or RWT.shape != (3, 3):
        raise ShapeError(f"R_WO, R_WT: expected (3, 3), got {RWO.shape}, {RWT.shape}")
    V = relative_twist_rows(RWO.ravel().tolist(), sp.as_vector(w_WO_O, 3, "w_WO_O").tolist(),
                            sp.as_vector(v_WOo_W, 3, "v_WOo_W").tolist(),
                            sp.as_vector(p_OoEo_O, 3, "p_OoEo_O").tolist(),
                            RWT.ravel().tolist(), sp.as_vector(w_WT_T, 3, "w_WT_T").tolist(),
                            sp.as_vector(v_WTo_W, 3, "v_WTo_W").tolist(),
                            sp.as_vector(p_ToEo_T, 3, "p_ToEo_T").tolist())
    return np.array(V, dtype=np.float64)


def relative_twist_rows(R_WO: Sequence[float], w_WO_O: Sequence[float], v_WOo_W: Sequence[float],
                        p_OoEo_O: Sequence[float], R_WT: Sequence[float], w_WT_T: Sequence[float],
                        v_WTo_W: Sequence[float], p_ToEo_T: Sequence[float]) -> list[float]:
    """:func:`relative_twist` on Python floats (its kernel; no checks), rotations as 9 floats row-major.

    Returns
    -------
    V_R_O : list of 6 float
        ``[ω_R; v_R]`` in O. [rad/s, m/s]
    """
    o0, o1, o2, o3, o4, o5, o6, o7, o8 = R_WO
    t0, t1, t2, t3, t4, t5, t6, t7, t8 = R_WT
    wo0, wo1, wo2 = w_WO_O
    wt0, wt1, wt2 = w_WT_T
    pt0, pt1, pt2 = p_ToEo_T
    po0, po1, po2 = p_OoEo_O
    # in W: the payload's angular velocity and the velocity of Eo relative to Oo's; then both to O
    a0, a1, a2 = t0 * wt0 + t1 * wt1 + t2 * wt2, t3 * wt0 + t4 * wt1 + t5 * wt2, t6 * wt0 + t7 * wt1 + t8 * wt2
    c0, c1, c2 = wt1 * pt2 - wt2 * pt1, wt2 * pt0 - wt0 * pt2, wt0 * pt1 - wt1 * pt0
    b0 = v_WTo_W[0] + (t0 * c0 + t1 * c1 + t2 * c2) - v_WOo_W[0]
    b1 = v_WTo_W[1] + (t3 * c0 + t4 * c1 + t5 * c2) - v_WOo_W[1]
    b2 = v_WTo_W[2] + (t6 * c0 + t7 * c1 + t8 * c2) - v_WOo_W[2]
    return [o0 * a0 + o3 * a1 + o6 * a2 - wo0, o1 * a0 + o4 * a1 + o7 * a2 - wo1, o2 * a0 + o5 * a1 + o8 * a2 - wo2,
            o0 * b0 + o3 * b1 + o6 * b2 - (wo1 * po2 - wo2 * po1),
            o1 * b0 + o4 * b1 + o7 * b2 - (wo2 * po0 - wo0 * po2),
            o2 * b0 + o5 * b1 + o8 * b2 - (wo0 * po1 - wo1 * po0)]


def end_effector_twist(R_WO: ArrayLike, w_WO_O: ArrayLike, v_WOo_W: ArrayLike, p_WoOo_W: ArrayLike,
                       p_WoEo_W: ArrayLike, V_R_O: ArrayLike) -> Array:
    """Spatial velocity of the end effector E in W from the orbiter's motion and E's relative twist.

    The converse of :func:`relative_twist` (SVDS 2-10, 2-11): with ``ω_W = R_WO ω_O`` and
    ``r = p_WoEo_W − p_WoOo_W``::

        ω_E = ω_W + R_WO ω_R,    v_E = v_WOo_W + ω_W × r + R_WO v_R

    Parameters
    ----------
    R_WO : array_like, shape (3, 3)
        Orbiter attitude.
    w_WO_O : array_like, shape (3,)
        Orbiter angular velocity, in O. [rad/s]
    v_WOo_W : array_like, shape (3,)
        Orbiter CoM velocity, in W. [m/s]
    p_WoOo_W, p_WoEo_W : array_like, shape (3,)
        Orbiter CoM and Eo, in W. [m]
    V_R_O : array_like, shape (6,)
        ``[ω_R; v_R]`` of E relative to the orbiter, in O (:func:`relative_twist`). [rad/s, m/s]

    Returns
    -------
    V_WE_W : ndarray, shape (6,)
        ``[ω_WE_W; v_WEo_W]``. [rad/s, m/s]

    Raises
    ------
    ShapeError
        If ``R_WO`` is not (3, 3) or a vector is not finite of its shape.
    """
    R = np.asarray(R_WO, dtype=np.float64)
    if R.shape != (3, 3):
        raise ShapeError(f"R_WO: expected shape (3, 3), got {R.shape}")
    return np.array(end_effector_twist_rows(
        R.ravel().tolist(), sp.as_vector(w_WO_O, 3, "w_WO_O").tolist(), sp.as_vector(v_WOo_W, 3, "v_WOo_W").tolist(),
        sp.as_vector(p_WoOo_W, 3, "p_WoOo_W").tolist(), sp.as_vector(p_WoEo_W, 3, "p_WoEo_W").tolist(),
        sp.as_vector(V_R_O, 6, "V_R_O").tolist()))


def end_effector_twist_rows(R_WO: Sequence[float], w_WO_O: Sequence[float], v_WOo_W: Sequence[float],
                            p_WoOo_W: Sequence[float], p_WoEo_W: Sequence[float], V_R_O: Sequence[float]
                            ) -> list[float]:
    """:func:`end_effector_twist` on Python floats (its kernel; no checks), ``R_WO`` nine floats row-major.

    Returns
    -------
    V_WE_W : list of 6 float
        [rad/s, m/s]
    """
    a0, a1, a2 = sp.mat_vec_rows(R_WO, *w_WO_O)
    b0, b1, b2 = sp.mat_vec_rows(R_WO, V_R_O[0], V_R_O[1], V_R_O[2])
    d0, d1, d2 = sp.mat_vec_rows(R_WO, V_R_O[3], V_R_O[4], V_R_O[5])
    e0, e1, e2 = p_WoEo_W
    o0, o1, o2 = p_WoOo_W
    v0, v1, v2 = v_WOo_W
    r0, r1, r2 = e0 - o0, e1 - o1, e2 - o2
    return [a0 + b0, a1 + b1, a2 + b2, v0 + (a1 * r2 - a2 * r1) + d0, v1 + (a2 * r0 - a0 * r2) + d1,
            v2 + (a0 * r1 - a1 * r0) + d2]


def shoulder_reaction(F_Eo_W: ArrayLike, p_WoEo_W: ArrayLike, p_WoSo_W: ArrayLike) -> Array:
    """The massless arm's wrench on the orbiter at the shoulder So: the tip wrench's opposite, moved to So.

    A massless arm passes the wrench it applies to the payload at Eo, reversed, to its base
    (SVDS 2-4…2-9): ``τ_S = −τ_E + (p_So − p_Eo) × f_E``, ``f_S = −f_E``.

    Parameters
    ----------
    F_Eo_W : array_like, shape (6,)
        ``[τ; f]`` the arm applies to the payload, about Eo, in W. [N·m, N]
    p_WoEo_W, p_WoSo_W : array_like, shape (3,)
        Eo and So, in W. [m]

    Returns
    -------
    F_So_W : ndarray, shape (6,)
        ``[τ; f]`` on the orbiter about So, in W. [N·m, N]

    Raises
    ------
    ShapeError
        If a vector is not finite of its shape.
    """
    return np.array(shoulder_reaction_rows(sp.as_vector(F_Eo_W, 6, "F_Eo_W").tolist(),
                                           sp.as_vector(p_WoEo_W, 3, "p_WoEo_W").tolist(),
                                           sp.as_vector(p_WoSo_W, 3, "p_WoSo_W").tolist()))


def shoulder_reaction_rows(F_Eo_W: Sequence[float], p_WoEo_W: Sequence[float], p_WoSo_W: Sequence[float]
                           ) -> list[float]:
    """:func:`shoulder_reaction` on Python floats (its kernel; no checks).

    Returns
    -------
    F_So_W : list of 6 float
        [N·m, N]
    """
    m0, m1, m2, f0, f1, f2 = F_Eo_W
    e0, e1, e2 = p_WoEo_W
    s0, s1, s2 = p_WoSo_W
    r0, r1, r2 = s0 - e0, s1 - e1, s2 - e2
    # −F_E referred from Eo to So (lever p_SoEo = −r; (−r) × (−f) is r × f to the bit)
    return sp.refer_wrench_rows([-m0, -m1, -m2, -f0, -f1, -f2], [-r0, -r1, -r2])


def grappled_twist_rows(orb: Sequence[float], pay: Sequence[float], p_ToEo_T: Sequence[float]) -> list[float]:
    """E's relative twist while grappled (2-10, 2-11) from the two bodies' states, on Python floats (no checks):
    the point of resolution frozen in the payload at ``p_ToEo_T``, seen from the orbiter, then
    :func:`relative_twist_rows`.

    Parameters
    ----------
    orb, pay : sequence of 13 float
        The orbiter's and the payload's ``[p_Wo·o_W (3), quat_W· (4), v_W·o_W (3), w_W·_· (3)]`` (the layout of
        :func:`predict_state_arrays`). [m, -, m/s, rad/s]
    p_ToEo_T : sequence of 3 float
        Eo in the payload, frozen at the grasp. [m]

    Returns
    -------
    V_R_O : list of 6 float
        ``[ω_R; v_R]`` in O. [rad/s, m/s]
    """
    R_WO = sp.rotation_rows(orb[3], orb[4], orb[5], orb[6])
    R_WT = sp.rotation_rows(pay[3], pay[4], pay[5], pay[6])
    e0, e1, e2 = p_ToEo_T[0], p_ToEo_T[1], p_ToEo_T[2]
    x0, x1, x2 = sp.mat_vec_rows(R_WT, e0, e1, e2)
    p_OoEo_O = sp.mat_t_vec_rows(R_WO, pay[0] + x0 - orb[0], pay[1] + x1 - orb[1], pay[2] + x2 - orb[2])
    return relative_twist_rows(R_WO, orb[10:13], orb[7:10], p_OoEo_O, R_WT, pay[10:13], pay[7:10], (e0, e1, e2))


def massless_wrench_rows(orb: Sequence[float], h: float, propagate: bool, p_OoEo_O: Sequence[float],
                         p_OoSo_O: Sequence[float], F_Eo_O: Sequence[float]) -> list[float] | None:
    """The massless arm's outputs in W (2-4…2-9) at the end of a step, on Python floats (no checks): the orbiter
    propagated by ``h`` (its velocity and body rate held; ``propagate`` False: as given), E and the shoulder So in
    W, the tip wrench to W and its opposite on the orbiter at So (:func:`shoulder_reaction_rows`).

    Parameters
    ----------
    orb : sequence of 13 float
        The orbiter's ``[p_WoOo_W, quat_WO, v_WOo_W, w_WO_O]`` at the step's start. [m, -, m/s, rad/s]
    h : float
        The step. [s]
    propagate : bool
    p_OoEo_O, p_OoSo_O : sequence of 3 float
        E and So in O. [m]
    F_Eo_O : sequence of 6 float
        ``[τ; f]`` the arm applies to the payload about Eo, in O. [N·m, N]

    Returns
    -------
    list of 34 float, or None
        ``p_WoEo_W (3), p_WoSo_W (3), F_Eo_W (6), F_So_W (6), R_WO (9, row-major), p_WoOo_W (3), quat_WO (4)``, the
        last two the propagated orbiter's; None where the propagated quaternion is not finite
        (:func:`dynamics.spatial.quat_integrate_rows` raises).
    """
    p0, p1, p2 = orb[0], orb[1], orb[2]
    q = (orb[3], orb[4], orb[5], orb[6])
    if propagate:
        p0, p1, p2 = p0 + orb[7] * h, p1 + orb[8] * h, p2 + orb[9] * h
        try:
            q = sp.quat_integrate_rows(q, orb[10], orb[11], orb[12], h)
        except ShapeError:
            return None
    R = sp.rotation_rows(*q)
    c0, c1, c2 = sp.mat_vec_rows(R, p_OoEo_O[0], p_OoEo_O[1], p_OoEo_O[2])
    e = [c0 + p0, c1 + p1, c2 + p2]
    s0, s1, s2 = sp.mat_vec_rows(R, p_OoSo_O[0], p_OoSo_O[1], p_OoSo_O[2])
    s = [s0 + p0, s1 + p1, s2 + p2]
    F_W = [*sp.mat_vec_rows(R, F_Eo_O[0], F_Eo_O[1], F_Eo_O[2]), *sp.mat_vec_rows(R, F_Eo_O[3], F_Eo_O[4], F_Eo_O[5])]
    return [*e, *s, *F_W, *shoulder_reaction_rows(F_W, e, s), *R, p0, p1, p2, *q]


def scale_link_masses(model: ch.ChainModel, scale: float) -> ch.ChainModel:
    """The chain with every link's mass and inertia (body 0, the base, excepted) times ``scale``.

    For the limit of vanishing link masses, in which the multibody arm becomes the
    SVDS massless arm (App. C, C-18).

    Raises
    ------
    ModelError
        If ``scale`` is not positive.
    """
    if not (np.isfinite(scale) and scale > 0.0):
        raise ModelError(f"link_mass_scale: must be positive, got {scale!r}")
    mass = model.mass.copy()
    inertia = model.I_Bcm_B.copy()
    mass[1:] *= scale
    inertia[1:] *= scale
    return ch.chain_from_table(model.names, model.parent, model.joint_type, model.X_PJ, model.axis_J, mass,
                               model.p_BoBcm_B, inertia, q_lower=model.q_lower, q_upper=model.q_upper,
                               qd_max=model.qd_max, tau_max=model.tau_max, joint_names=model.joint_names,
                               fixed_frames=model.fixed_frames)


def prescribed_base_dynamics(model: ch.ChainModel, data: ch.ChainData, q: ArrayLike, v: ArrayLike,
                             vdot_base: ArrayLike, tau: ArrayLike, F_ext: ArrayLike | None = None,
                             M_h: tuple[Array, Array] | None = None) -> tuple[Array, Array]:
    """Multibody arm on a moving base: joint accelerations and the base reaction (seed 004).

    The base (the orbiter, body 0) moves as given; the links have mass. With the mass
    matrix and bias of the dynamics core partitioned into base (b) and joint (θ) rows::

        M_θθ θ̈ = τ + J_θᵀF_ext − h_θ − M_θb v̇_b
        F_b    = M_bb v̇_b + M_bθ θ̈ + h_b − J_bᵀF_ext

    ``F_b`` is the wrench the base must exert to move as given; of it, the part due to
    the base body's own inertia is removed, so the returned reaction is what the arm
    applies to the base (``−(F_b − I_b v̇_b − v ×* I_b v)``).

    Parameters
    ----------
    model : ChainModel
        A floating-base chain whose body 0 is the base frame fixed in the orbiter.
    q : array_like, shape (nq,)
    v : array_like, shape (nv,)
    vdot_base : array_like, shape (6,)
        ``[ω̇_WB_W, a_WBo_W]`` classical acceleration of the base origin. [rad/s², m/s²]
    tau : array_like, shape (n,)
        Joint torques. [N·m]
    F_ext : array_like, shape (nb, 6), optional
        External wrenches per body at its origin, in W (as :func:`chain.forward_dynamics`).
    M_h : tuple (M, h), optional
        Mass matrix and bias ``C(q, v) v`` if already computed (e.g. held over substeps);
        ``data`` must then hold the kinematics at ``q``.

    Returns
    -------
    theta_ddot : ndarray, shape (n,)
        [rad/s²]
    F_Bo_W : ndarray, shape (6,)
        Wrench the arm applies to the base at Bo, in W, [τ; f]. [N·m, N]

    Raises
    ------
    ModelError
        If the model does not have a floating base.
    ShapeError
        On bad shapes.
    """
    ta = sp.as_vector(tau, model.n, "tau")
    A, b, C, d = prescribed_base_affine(model, data, q, v, vdot_base, F_ext, M_h)
    thdd = A @ ta + b
    return thdd, C @ thdd + d


def prescribed_base_affine(model: ch.ChainModel, data: ch.ChainData, q: ArrayLike, v: ArrayLike,
                           vdot_base: ArrayLike, F_ext: ArrayLike | None = None,
                           M_h: tuple[Array, Array] | None = None) -> tuple[Array, Array, Array, Array]:
    """:func:`prescribed_base_dynamics` at one ``(q, v)`` as affine maps of the joint torques.

    ``θ̈ = A τ + b`` and ``F_Bo_W = C θ̈ + d``: with the mass matrix and bias held (e.g.
    over the servo substeps of one step) only τ changes, so the 6×6 solve is done once.
    Parameters as :func:`prescribed_base_dynamics`.

    Returns
    -------
    A : ndarray, shape (n, n)
        ``M_θθ^-1``. [1/(kg·m²)]
    b : ndarray, shape (n,)
        ``M_θθ^-1 (J_θᵀF_ext − h_θ − M_θb v̇_b)``. [rad/s²]
    C : ndarray, shape (6, n)
        ``−M_bθ``.
    d : ndarray, shape (6,)
        ``−(M_bb v̇_b + h_b − J_bᵀF_ext − I_b v̇_b − v ×* I_b v)``. [N·m, N]

    Raises
    ------
    ModelError, ShapeError
        As :func:`prescribed_base_dynamics`.
    """
    if not model.floating:
        raise ModelError("model: prescribed_base_dynamics needs a floating-base chain")
    qa = np.asarray(q, dtype=np.float64)
    va = sp.as_vector(v, model.nv, "v")
    ab = sp.as_vector(vdot_base, 6, "vdot_base")
    if M_h is None:
        M = ch.mass_matrix(model, data, qa)
        h = ch.bias_forces(model, data, qa, va)
    else:
        M, h = M_h
    g = np.zeros(model.nv) if F_ext is None else ch.generalized_forces(model, data, qa, F_ext)
    A = np.linalg.inv(M[6:, 6:])
    b = A @ (g[6:] - h[6:] - M[6:, :6] @ ab)
    d = -(M[:6, :6] @ ab + h[:6] - g[:6] - _own_base_wrench(data, va[:6], ab))
    return A, b, -M[:6, 6:], d  # type: ignore[return-value]  # numpy stubs: float64 in, floating out


def _own_base_wrench(data: ch.ChainData, V0: Array, a0: Array) -> Array:
    """Wrench that moves the base body alone (:func:`dynamics.multirate.own_base_wrench`)."""
    return own_base_wrench(data.I_ref[0], V0, a0)


def grappled_inverse_dynamics(model: ch.ChainModel, data: ch.ChainData, q: ArrayLike, v: ArrayLike,
                              vdot: ArrayLike, tau: ArrayLike, p_BnoEo_Bn: ArrayLike) -> tuple[Array, Array]:
    """Multibody arm whose motion is fixed by the two bodies it holds: the wrenches it applies.

    With the base motion and the joint motion ``(q, v, v̇)`` given (the joint motion
    from the relative motion of orbiter and payload, SVDS 2-10…2-12), the joint rows of
    ``M v̇ + h = [F_b; τ] + J_Eᵀ F_E`` give the wrench ``F_E`` the payload exerts on
    the hand at Eo, and the base rows the wrench ``F_b`` the orbiter exerts on the base::

        J_Eθᵀ F_E = M_θ v̇ + h_θ − τ
        F_b       = M_b v̇ + h_b − J_Ebᵀ F_E

    As the link masses go to zero, ``−F_E → J^-T τ`` (SVDS 2-3) and the base reaction
    tends to the massless arm's (2-4, 2-5).

    Parameters
    ----------
    model : ChainModel
        Floating-base chain (body 0 fixed in the orbiter), last body the hand.
    q : array_like, shape (nq,)
    v, vdot : array_like, shape (nv,)
        Velocities and classical accelerations (:mod:`dynamics.chain` conventions).
    tau : array_like, shape (n,)
        Joint torques. [N·m]
    p_BnoEo_Bn : array_like, shape (3,)
        Point of resolution in the last body's frame. [m]

    Returns
    -------
    F_Eo_W : ndarray, shape (6,)
        Wrench the arm applies to the payload at Eo, in W. [N·m, N]
    F_Bo_W : ndarray, shape (6,)
        Wrench the arm applies to the base (orbiter) at Bo, in W, the base body's own
        inertia removed. [N·m, N]

    Raises
    ------
    ModelError
        If the model has no floating base or not six joints.
    """
    if not model.floating or model.n != N_JOINTS:
        raise ModelError("model: grappled_inverse_dynamics needs a floating-base chain with 6 joints")
    qa = np.asarray(q, dtype=np.float64)
    va = sp.as_vector(v, model.nv, "v")
    ad = sp.as_vector(vdot, model.nv, "vdot")
    ta = sp.as_vector(tau, N_JOINTS, "tau")
    M = ch.mass_matrix(model, data, qa)
    h = ch.bias_forces(model, data, qa, va)
    JE = ch.frame_jacobian(model, data, qa, model.nb - 1, p_BnoEo_Bn)   # [ω; v_E] in W
    rhs = M[6:] @ ad + h[6:] - ta
    F_on_hand = np.linalg.solve(JE[:, 6:].T, rhs)
    F_b = M[:6] @ ad + h[:6] - JE[:, :6].T @ F_on_hand
    return -F_on_hand, -(F_b - _own_base_wrench(data, va[:6], ad[:6]))  # type: ignore[return-value]  # numpy stubs: float64 in, floating out


@dataclass(frozen=True)
class AutoProfile:
    """Timing of one auto-sequence segment: the path parameter σ(t) from 0 to 1.

    The rate σ̇ rises from 0 to ``rate`` along a raised cosine over ``t_ramp`` (the
    acceleration a half sine, continuous at both ends of the ramp), holds, and falls the
    same way to 0 at ``duration``; ``duration ≥ 2 t_ramp``.

    Attributes
    ----------
    duration : float
        [s]
    t_ramp : float
        [s]
    rate : float
        Peak σ̇ = 1 / (duration − t_ramp). [1/s]
    """

    duration: float
    t_ramp: float
    rate: float

    def sigma(self, t: float) -> float:
        """σ(t) in [0, 1] (0 before the start, 1 after the end); t from the segment start. [s]"""
        if t <= 0.0:
            return 0.0
        if t >= self.duration:
            return 1.0
        Ta, r = self.t_ramp, self.rate
        if t < Ta:
            return r * (0.5 * t - Ta / (2.0 * math.pi) * math.sin(math.pi * t / Ta))
        if t <= self.duration - Ta:
            return r * (t - 0.5 * Ta)
        return 1.0 - self.sigma(self.duration - t)


def auto_rates_rows(p0: Sequence[float], dp: Sequence[float], R0: Sequence[float], rot: Sequence[float], s0: float,
                    s1: float, h: float, p_m: Sequence[float], R_m: Sequence[float], gain: float, v_lim: float,
                    w_lim: float) -> tuple[float, float, list[float]]:
    """One step of an auto-sequence segment (:class:`AutoProfile`) on floats: the error of a pose on the segment's
    reference and the point-of-resolution rates that fly it.

    The reference at σ: ``p(σ) = p0 + σ dp`` and ``R(σ) = exp(σ [rot×]) R0`` (a straight line and a slew about a
    fixed axis, in O). The rates are the reference's mean rate over the step, ``(s1 − s0)/h`` times ``(rot, dp)``,
    plus ``gain`` times the error at ``s0``, each part clipped to its limit (its direction kept). The readable
    reference of the compiled :func:`auto_rates`, which the arm runs.

    Parameters
    ----------
    p0, dp : sequence of 3 float
        The segment's start and its displacement, in O. [m]
    R0 : sequence of 9 float
        The start attitude ``R_OE``, row-major.
    rot : sequence of 3 float
        The slew as a rotation vector, in O. [rad]
    s0, s1 : float
        σ at the step's start and end.
    h : float
        The step. [s]
    p_m, R_m : sequence of 3 and 9 float
        The pose flown (the arm's motor-side E), in O. [m]
    gain : float
        [1/s]
    v_lim, w_lim : float
        Speed and angular-rate limits. [m/s, rad/s]

    Returns
    -------
    e_p, e_r : float
        The position and attitude errors' norms at ``s0``. [m, rad]
    V : list of 6 float
        ``[ω; v]`` to command, in O. [rad/s, m/s]

    Raises
    ------
    ShapeError
        If the reference's attitude is not finite.
    """
    e_p = [a + s0 * d - pm for a, d, pm in zip(p0, dp, p_m, strict=True)]
    q_ref = sp.quat_integrate_rows((1.0, 0.0, 0.0, 0.0), rot[0], rot[1], rot[2], s0)
    R_ref = sp.mat_mat_rows(sp.rotation_rows(*q_ref), R0)
    e_r = sp.rotation_error_rows(R_m, R_ref)
    ds = (s1 - s0) / h
    v = [ds * d + gain * e for d, e in zip(dp, e_p, strict=True)]
    w = [ds * d + gain * e for d, e in zip(rot, e_r, strict=True)]
    nv, nw = sp.norm3(v), sp.norm3(w)
    if nv > v_lim:
        v = [x * (v_lim / nv) for x in v]
    if nw > w_lim:
        w = [x * (w_lim / nw) for x in w]
    return sp.norm3(e_p), sp.norm3(e_r), w + v


def auto_rates(seg: Array, s0: float, s1: float, h: float, p_m: Array, R_m: Array, gain: float, v_lim: float,
               w_lim: float) -> tuple[float, float, list[float]]:
    """:func:`auto_rates_rows` for the arm's step loop: the compiled kernel :func:`dynamics.arm_kernels.auto_rates`,
    bit for bit the reference (the tests hold them equal), which runs instead where the kernel cannot follow it
    (an attitude error within 1e-3 of π, where the reference goes through numpy; a reference attitude not finite,
    which it refuses). No shape check.

    Parameters
    ----------
    seg : ndarray, shape (18,)
        ``p0``, ``dp``, ``R0`` (row-major), ``rot`` of :func:`auto_rates_rows`.
    s0, s1, h, gain, v_lim, w_lim : float
        As :func:`auto_rates_rows`.
    p_m, R_m : ndarray, shape (3,) and (9,)
        As :func:`auto_rates_rows`.

    Returns
    -------
    e_p, e_r, V
        As :func:`auto_rates_rows`.
    """
    V = np.empty(6)
    code, e_p, e_r = _kernels().auto_rates(seg, s0, s1, h, p_m, R_m, gain, v_lim, w_lim, V)
    if code == 0:
        return e_p, e_r, V.tolist()
    rows = seg.tolist()
    return auto_rates_rows(rows[0:3], rows[3:6], rows[6:15], rows[15:18], s0, s1, h, p_m.tolist(), R_m.tolist(),
                           gain, v_lim, w_lim)


def auto_profile(distance: float, angle: float, v_max: float, w_max: float, a_max: float,
                 alpha_max: float) -> AutoProfile:
    """Timing of a straight-line segment with raised-cosine rate ramps (auto sequence).

    The point of resolution moves ``distance`` along a straight line while its attitude
    slews ``angle`` about a fixed axis, both proportional to one path parameter σ
    (:class:`AutoProfile`). The peak rate is the largest at which neither the speed nor
    the angular rate exceeds its limit, ``σ̇ = min(v_max/d, w_max/φ)``; the ramp time
    the shortest at which neither acceleration exceeds its limit: the half-sine
    acceleration of a ramp peaks at ``π σ̇ / (2 t_ramp)``, hence
    ``t_ramp = π σ̇ / (2 min(a_max/d, alpha_max/φ))``. A segment too short to reach the
    peak rate is two ramps (``t_ramp = sqrt(π / (2 q))``, ``σ̇ = 1/t_ramp``).

    A rate ramp that lasts several periods of a structural mode excites it little: the
    residual of a raised-cosine ramp of length T at ω falls as ``1/((ωT/π)² − 1)``
    (its Fourier transform), against ``1/(ωT)`` for a constant-acceleration ramp. This is
    the point of the acceleration limit with a heavy payload (first loaded mode of the
    SRMS 0.03–0.05 Hz, ``dynamics/data/README.md``).

    Parameters
    ----------
    distance : float
        Straight-line distance. [m]
    angle : float
        Slew angle. [rad]
    v_max, w_max : float
        Speed and angular-rate limits (> 0). [m/s, rad/s]
    a_max, alpha_max : float
        Acceleration limits (> 0). [m/s², rad/s²]

    Returns
    -------
    AutoProfile
        ``duration`` 0 for a segment of zero length.

    Raises
    ------
    ModelError
        If a distance is negative or non-finite, or a limit not positive.
    """
    for name, x in (("v_max", v_max), ("w_max", w_max), ("a_max", a_max), ("alpha_max", alpha_max)):
        if not (np.isfinite(x) and x > 0.0):
            raise ModelError(f"auto_profile: {name} must be positive, got {x!r}")
    for name, x in (("distance", distance), ("angle", angle)):
        if not (np.isfinite(x) and x >= 0.0):
            raise ModelError(f"auto_profile: {name} must be finite and >= 0, got {x!r}")
    if distance == 0.0 and angle == 0.0:
        return AutoProfile(0.0, 0.0, 0.0)
    inf = float("inf")
    rate = min(v_max / distance if distance > 0.0 else inf, w_max / angle if angle > 0.0 else inf)
    q = min(a_max / distance if distance > 0.0 else inf, alpha_max / angle if angle > 0.0 else inf)
    t_ramp = np.pi * rate / (2.0 * q)
    if rate * t_ramp > 1.0:                 # never at the peak rate: two ramps
        t_ramp = float(np.sqrt(np.pi / (2.0 * q)))
        rate = 1.0 / t_ramp
    return AutoProfile(1.0 / rate + t_ramp, float(t_ramp), float(rate))
