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

No I/O, clock or globals.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dynamics import spatial as sp
from errors import ShapeError

__all__ = ["N_STATIONS", "STATION_NAMES", "STATION_POINT", "STATION_LINK", "STATION_SIGN", "static_loads"]

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
