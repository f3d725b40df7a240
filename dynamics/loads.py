"""Static loads in the arm at nine stations (SVDS seed 003 section 4, routine RMLOAD).

The arm is massless, so each member is in static equilibrium under the loads at its two
ends; every load follows from the end-effector wrench ``[M_e; F_e]`` (A-20). With
``r_2…r_5`` the shoulder pitch, elbow, wrist pitch and wrist yaw joint points and
``r_6`` the point of resolution, the nine loads ``{M_k; V_k}`` are (section 4, with the
OCR's ``r_GB`` read as ``r_6B`` and ``M_9 = −T_6B M_e``, both garbled)::

    k  acts                                  about  sign  frame
    1  on the shoulder at the shoulder pitch r_2   −     shoulder yaw link (B1)
    2  on the upper arm at the shoulder      r_2   +     upper arm (B2)
    3  on the upper arm at the elbow         r_3   −     upper arm (B2)
    4  on the lower arm at the elbow         r_3   +     lower arm (B3)
    5  on the lower arm at the wrist pitch   r_4   −     lower arm (B3)
    6  on the wrist at the wrist pitch       r_4   +     wrist (B4)
    7  on the wrist at the wrist yaw         r_5   −     wrist (B4)
    8  on the hand at the wrist yaw          r_5   +     hand (B5)
    9  on the hand at the end effector       r_6   −     hand (B5)

``M_k = ±T_k (M_e + (r_6 − r_k) × F_e)``, ``V_k = ±T_k F_e``, with ``T_k`` the rotation
from O to the station frame (link numbering of :mod:`dynamics.rms`: B1 after shoulder
yaw … B5 after wrist yaw). Each member (2–3, 4–5, 6–7, 8–9) is in equilibrium; each
joint pair (1–2, 3–4, 5–6, 7–8) is action and reaction.

:func:`static_loads` is the checked function on arrays; :func:`static_loads_rows` the same numbers on Python
floats (its readable reference, the sums in numpy's order), and :func:`static_loads_arrays` its compiled kernel
(:func:`dynamics.arm_kernels.static_loads`), which the arm's step runs.

No I/O, clock or globals.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dynamics import kernel_module
from dynamics import spatial as sp
from errors import ShapeError

__all__ = ["N_STATIONS", "STATION_NAMES", "STATION_POINT", "STATION_LINK", "STATION_SIGN", "static_loads",
           "static_loads_rows", "static_loads_arrays", "load_kernels"]

Array = NDArray[np.float64]

N_STATIONS = 9
STATION_NAMES = (
    "shoulder_at_shoulder_pitch", "upper_arm_at_shoulder", "upper_arm_at_elbow", "lower_arm_at_elbow",
    "lower_arm_at_wrist_pitch", "wrist_at_wrist_pitch", "wrist_at_wrist_yaw", "hand_at_wrist_yaw",
    "hand_at_end_effector",
)
#: Point of each station: index into ``[joint 1..6, Eo]`` (0..6).
STATION_POINT = (1, 1, 2, 2, 3, 3, 4, 4, 6)
#: Link frame of each station: index into ``RmsPose.X_OB`` (1 = after shoulder yaw …).
STATION_LINK = (1, 2, 2, 3, 3, 4, 4, 5, 5)
STATION_SIGN = (-1.0, 1.0, -1.0, 1.0, -1.0, 1.0, -1.0, 1.0, -1.0)
_POINT = np.array(STATION_POINT)
_LINK = np.array(STATION_LINK)
_SIGN = np.array(STATION_SIGN)


def static_loads(points_O: ArrayLike, R_links_O: ArrayLike, F_Eo_O: ArrayLike) -> Array:
    """Loads at the nine stations from the end-effector wrench (SVDS section 4, A-20).

    Parameters
    ----------
    points_O : array_like, shape (7, 3)
        Joint points 1..6 then the point of resolution Eo, in O. [m]
    R_links_O : array_like, shape (7, 3, 3)
        Link frames in O (``RmsPose.X_OB[:, :3, :3]``).
    F_Eo_O : array_like, shape (6,)
        ``[M_e; F_e]``: wrench the arm applies to the payload at Eo, in O. [N·m, N]

    Returns
    -------
    loads : ndarray, shape (9, 6)
        Row k: ``[M_k; V_k]`` acting on the member named by :data:`STATION_NAMES`,
        about the station point, in the station's link frame. [N·m, N]

    Raises
    ------
    ShapeError
        On bad shapes or non-finite values.
    """
    pts = np.asarray(points_O, dtype=np.float64)
    R = np.asarray(R_links_O, dtype=np.float64)
    if pts.shape != (7, 3) or R.shape != (7, 3, 3):
        raise ShapeError(f"points_O, R_links_O: expected (7, 3), (7, 3, 3), got {pts.shape}, {R.shape}")
    F = sp.as_vector(F_Eo_O, 6, "F_Eo_O")
    Me, Fe = F[:3], F[3:]
    r = pts[6] - pts[_POINT]                                   # (9, 3) station → Eo
    M_O = Me + sp.cross_batch(r, Fe)                                # moment about each station, in O
    out = np.empty((N_STATIONS, 6))
    T = R[_LINK]                                                # (9, 3, 3) R_O<station>
    out[:, :3] = _SIGN[:, None] * np.einsum("kji,kj->ki", T, M_O)     # T_kᵀ M
    out[:, 3:] = _SIGN[:, None] * (Fe @ T)                            # T_kᵀ F_e
    return out


def static_loads_rows(points_O: Sequence[Sequence[float]], R_links_O: Sequence[Sequence[float]],
                      F_Eo_O: Sequence[float]) -> list[list[float]]:
    """:func:`static_loads` on Python floats, to the bit (no checks): the moment about each station
    ``M_e + r × F_e`` component by component, then each row of ``T_kᵀ M`` and ``T_kᵀ F_e`` summed from zero in
    the order of the rotation's rows, as numpy's ``einsum`` and ``matmul`` sum them there (the zero start gives
    a zero sum's sign as theirs), times the station's sign.

    Parameters
    ----------
    points_O : sequence of 7 sequences of 3 float
        Joint points 1..6 then Eo, in O. [m]
    R_links_O : sequence of 7 sequences of 9 float
        Link rotations in O, row-major (:func:`dynamics.rms.rms_kinematics_arrays`' ``R_OB``).
    F_Eo_O : sequence of 6 float
        ``[M_e; F_e]`` at Eo, in O. [N·m, N]

    Returns
    -------
    list of 9 lists of 6 float
        As :func:`static_loads`. [N·m, N]
    """
    m0, m1, m2, f0, f1, f2 = F_Eo_O
    e0, e1, e2 = points_O[6]
    out = []
    for k in range(N_STATIONS):
        p0, p1, p2 = points_O[STATION_POINT[k]]
        r0, r1, r2 = e0 - p0, e1 - p1, e2 - p2                    # station → Eo
        M0, M1, M2 = m0 + (r1 * f2 - r2 * f1), m1 + (r2 * f0 - r0 * f2), m2 + (r0 * f1 - r1 * f0)
        t0, t1, t2, t3, t4, t5, t6, t7, t8 = R_links_O[STATION_LINK[k]]
        s = STATION_SIGN[k]
        out.append([s * (((0.0 + t0 * M0) + t3 * M1) + t6 * M2), s * (((0.0 + t1 * M0) + t4 * M1) + t7 * M2),
                    s * (((0.0 + t2 * M0) + t5 * M1) + t8 * M2), s * (((0.0 + f0 * t0) + f1 * t3) + f2 * t6),
                    s * (((0.0 + f0 * t1) + f1 * t4) + f2 * t7), s * (((0.0 + f0 * t2) + f1 * t5) + f2 * t8)])
    return out


def load_kernels() -> None:
    """Import :func:`static_loads_arrays`' compiled kernel and load its machine code now (compile it if numba's
    cache has none); otherwise its first call pays for it. The arm calls it when it is built."""
    static_loads_arrays(np.zeros((7, 3)), np.zeros((7, 9)), np.zeros(6))


def static_loads_arrays(points_O: Array, R_links_O: Array, F_Eo_O: Array) -> Array:
    """:func:`static_loads_rows` for the arm's step: the compiled kernel :func:`dynamics.arm_kernels.static_loads`,
    bit for bit the reference (the tests hold them equal, and the reference equal to :func:`static_loads`). No
    checks.

    Parameters
    ----------
    points_O : ndarray, shape (7, 3)
        float64, C-contiguous. [m]
    R_links_O : ndarray, shape (7, 9)
        Link rotations in O, row-major, float64, C-contiguous.
    F_Eo_O : ndarray, shape (6,)
        float64. [N·m, N]

    Returns
    -------
    ndarray, shape (9, 6)
        A new array. [N·m, N]
    """
    out = np.empty((N_STATIONS, 6))
    kernel_module("arm_kernels").static_loads(points_O, R_links_O, F_Eo_O, out)
    return out
