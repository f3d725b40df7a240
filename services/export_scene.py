"""The 3D scene of a logged run: named frames, their poses at each logged instant, and the bodies' shapes.

What the field's viewers (Foxglove, Lichtblick, RViz) draw from a berthsim log, shared by
the Foxglove and ROS 2 exports (:mod:`services.export_foxglove`, :mod:`tools.export_ros2`).
Everything comes from the log: the poses from its state topics, the fixed frames and
shapes from the run's configuration (the ``config.json`` attachment), with the services'
defaults for what the configuration leaves out.

Frames (parent -> child, the pose ``X_parent_child``)
-----------------------------------------------------
==========================  ==========================  =============================================
parent                      child                       from
==========================  ==========================  =============================================
``lvlh`` (W)                ``orbiter`` (O)             ``orbiter/state``: ``p_WoOo_W``, ``quat_WO``
``orbiter``                 ``latch`` (L)               ``[orbiter] X_OL``
``lvlh``                    ``payload`` (T)             ``payload/state``: ``p_WoTo_W``, ``quat_WT``
``payload``                 ``grapple`` (G)             ``[payload] X_TG``
``payload``                 ``berthing_interface`` (B)  ``[payload] X_TB``
``orbiter``                 ``shoulder`` (S)            ``[arm] p_OoSo_O``, ``rpy_OS`` (URDF rpy)
``orbiter``                 ``srms_link1`` … ``6``      ``arm/state`` ``q`` through
                                                        :func:`dynamics.rms.rms_kinematics` (the links
                                                        after shoulder yaw … wrist roll, SVDS 2-14)
``orbiter``                 ``end_effector`` (E)        ``arm/state`` ``X_OE`` (the point of resolution)
``rig_base`` (R)            ``rig_platform`` (P)        ``hil/command`` ``X_LB`` through the rig's
                                                        pose map (:meth:`dynamics.stewart.PoseMap.to_rig`:
                                                        the pose the bridge commands, clamped)
``rig_base``                ``rig_platform_measured``   ``hil/feedback`` ``legs`` through the rig's
                                                        forward kinematics (Stewart rigs, legs logged)
==========================  ==========================  =============================================

The rig is a separate tree (its base ``rig_base`` is not placed in LVLH): a 3D view shows
it with ``rig_base`` as its display frame.

Shapes (:class:`Scene`): the payload as the solid cylinder along T x of the same mass and
inertia (``r² = 2 I_xx / m``, ``L² = 12 I_yy / m − 3 r²``), the orbiter as the uniform box
of the same inertia (``a² = 6 (I_yy + I_zz − I_xx) / m``, …), the trunnions ``[payload]
points_B``, the latch guides ``[contact] surfaces`` (discs of their radius, normal
``n_L``), the arm's links as segments from each joint to the next, the rig's joints.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.spatial.transform import Rotation

from dynamics import chain as ch
from dynamics import rms
from dynamics.cases import reference_path
from dynamics.spatial import pose, pose_from_vector, quat_to_rotation, rotation_to_quat
from dynamics.urdf import chain_from_urdf
from protocol.config import check_table, check_values

__all__ = ["LINKS", "Scene", "Transform", "scene_of", "transforms", "xyzw"]

Array = NDArray[np.float64]

LINKS = tuple(f"srms_link{i + 1}" for i in range(rms.N_JOINTS))
"""Frame names of the SRMS's six moving links (SVDS order, :data:`dynamics.rms.JOINT_NAMES`)."""

Transform = tuple[str, str, Array]
"""(parent frame, child frame, pose ``X_parent_child`` (4, 4))."""


@dataclass(frozen=True)
class Scene:
    """The fixed frames and shapes of a run (all poses (4, 4), lengths in m).

    Attributes
    ----------
    X_OL, X_TG, X_TB : ndarray, shape (4, 4)
        Latch frame in O, grapple fixture and berthing interface in T.
    arm : dynamics.rms.RmsGeometry or None
        The SRMS on the orbiter (None without an ``[arm]`` in the log's configuration and
        no ``arm/state``).
    bones : ndarray, shape (6, 3)
        Per link, the next joint's origin (the last: the point of resolution) in the link frame.
    payload_radius, payload_length : float
        The payload's equivalent solid cylinder (along T x).
    orbiter_box : ndarray, shape (3,)
        The orbiter's equivalent uniform box, edge lengths along O x, y, z.
    points_B : ndarray, shape (n, 3)
        Trunnions in B.
    guides : list of (ndarray (3,), ndarray (3,), float)
        Latch guide walls in L: point, unit outward normal, radius (a disc of 0.15 m if unbounded).
    pose_map : dynamics.stewart.PoseMap or None
        The rig's pose map (None without ``[hil]``).
    """

    X_OL: Array
    X_TG: Array
    X_TB: Array
    arm: rms.RmsGeometry | None
    bones: Array
    payload_radius: float
    payload_length: float
    orbiter_box: Array
    points_B: Array
    guides: list[tuple[Array, Array, float]]
    pose_map: Any


def _inertia_diag(value: Any) -> Array:
    I = np.asarray(value, dtype=np.float64)
    return np.diag(I).copy() if I.shape == (3, 3) else I.reshape(3)


def scene_of(config: Mapping[str, Any] | None, with_arm: bool = True, with_rig: bool = True) -> Scene:
    """The :class:`Scene` of a run's configuration (the services' defaults where it is silent).

    Parameters
    ----------
    config : Mapping or None
        The log's ``config.json`` (None: every default).
    with_arm, with_rig : bool
        Build the arm's geometry and the rig's pose map (the log has ``arm/state``, ``hil/command``).

    Raises
    ------
    errors.ConfigError
        The ``[hil]`` table does not parse (naming the key).
    """
    from protocol.config import service_module, table_values

    # the tables as the kinds that own them declare them, through the registry of kinds (an offline tool
    # imports no service module)
    ARM_KEYS = service_module("arm").ARM_KEYS
    contact = service_module("contact")
    SURFACE_KEYS = contact.SURFACE_KEYS

    cfg = dict(config or {})
    ignored: list[str] = []  # the services reported their tables' problems when the run started
    orb = table_values(cfg, "orbiter")
    pay = table_values(cfg, "payload")
    surfaces = table_values(cfg, "contact")["surfaces"]
    guides = []
    for i, s in enumerate(surfaces if isinstance(surfaces, list) else []):
        v = check_values(s if isinstance(s, Mapping) else {}, f"contact.surfaces[{i}]", SURFACE_KEYS, ignored)
        n = np.asarray(v["n_L"], dtype=np.float64)
        r = float(v["radius"])
        guides.append((np.asarray(v["p_LoSo_L"], dtype=np.float64), n / np.linalg.norm(n),
                       r if math.isfinite(r) else 0.15))
    m_T, I_T = float(pay["mass"]), _inertia_diag(pay["inertia"])
    r2 = 2.0 * I_T[0] / m_T
    L2 = max(12.0 * I_T[1] / m_T - 3.0 * r2, 0.0)
    m_O, I_O = float(orb["mass"]), _inertia_diag(orb["inertia"])
    box = np.sqrt(np.maximum(6.0 / m_O * np.array([I_O[1] + I_O[2] - I_O[0], I_O[0] + I_O[2] - I_O[1],
                                                   I_O[0] + I_O[1] - I_O[2]]), 0.0))
    geom = None
    bones = np.zeros((rms.N_JOINTS, 3))
    if with_arm:
        a = check_table(cfg, "arm", ARM_KEYS, ignored)
        X_OS = ch.pose_xyz_rpy(a["p_OoSo_O"], a["rpy_OS"])  # URDF: R = Rz(y) Ry(p) Rx(r), as the arm service
        geom = rms.rms_geometry(chain_from_urdf(reference_path("SRMS_Canadarm.urdf"), floating_base=False), X_OS,
                                a["por"])
        bones = np.array([*(X[:3, 3] for X in geom.X_PJ[1:]), geom.p_B6oEo_B6])
    pose_map = None
    if with_rig and "hil" in cfg:
        bridge = service_module("hil.bridge")  # the rig's pose map, as the hil kind parses its table
        pose_map = bridge.parse(bridge.hil_table(cfg)).pose_map
    pts = np.asarray(pay["points_B"], dtype=np.float64).reshape(-1, 3)
    return Scene(pose_from_vector(orb["X_OL"]), pose_from_vector(pay["X_TG"]), pose_from_vector(pay["X_TB"]), geom,
                 bones, math.sqrt(r2), math.sqrt(L2), box, pts, guides, pose_map)


def _poses(p: Array, quat_wxyz: Array) -> Array:
    """Poses (n, 4, 4) from positions (n, 3) and unit quaternions (n, 4) ``[w, x, y, z]``."""
    X = np.zeros((len(p), 4, 4))
    X[:, :3, :3] = Rotation.from_quat(quat_wxyz, scalar_first=True).as_matrix()
    X[:, :3, 3] = p
    X[:, 3, 3] = 1.0
    return X


def transforms(scene: Scene, arrays: Mapping[str, Mapping[str, Any]]) -> Iterator[tuple[int, str, list[Transform]]]:
    """The frame tree's poses, one set per logged state message (see the module docstring).

    Parameters
    ----------
    scene : Scene
    arrays : Mapping
        :func:`protocol.logfile.read_topics` columns of the topics at hand among ``orbiter/state``,
        ``payload/state``, ``arm/state``, ``hil/command`` and ``hil/feedback``.

    Yields
    ------
    t_ns : int
        The message's simulation time. [ns]
    topic : str
        The topic it comes from.
    transforms : list of (parent, child, X (4, 4))
        Each body's fixed frames ride along with its pose, so each set is complete for its body.
    """
    if (o := arrays.get("orbiter/state")) is not None:
        X = _poses(o["p_WoOo_W"], o["quat_WO"])
        for t, X_WO in zip(o["t_ns"].tolist(), X, strict=True):
            yield t, "orbiter/state", [("lvlh", "orbiter", X_WO), ("orbiter", "latch", scene.X_OL)]
    if (p := arrays.get("payload/state")) is not None:
        X = _poses(p["p_WoTo_W"], p["quat_WT"])
        for t, X_WT in zip(p["t_ns"].tolist(), X, strict=True):
            yield t, "payload/state", [("lvlh", "payload", X_WT), ("payload", "grapple", scene.X_TG),
                                       ("payload", "berthing_interface", scene.X_TB)]
    if (a := arrays.get("arm/state")) is not None and scene.arm is not None:
        for t, q, X_OE in zip(a["t_ns"].tolist(), a["q"], a["X_OE"], strict=True):
            X_OB = rms.rms_kinematics(scene.arm, q).X_OB
            yield t, "arm/state", [("orbiter", "shoulder", X_OB[0]),
                                   *(("orbiter", name, X_OB[i + 1]) for i, name in enumerate(LINKS)),
                                   ("orbiter", "end_effector", X_OE)]
    if scene.pose_map is None:
        return
    if (h := arrays.get("hil/command")) is not None:
        for t, X_LB in zip(h["t_ns"].tolist(), h["X_LB"], strict=True):
            yield t, "hil/command", [("rig_base", "rig_platform", scene.pose_map.to_rig(X_LB).X_RP)]
    rig = scene.pose_map.rig
    if (f := arrays.get("hil/feedback")) is not None and hasattr(rig, "b_R"):
        X0 = scene.pose_map.X_RP0
        q, p = rotation_to_quat(X0[:3, :3]), X0[:3, 3]
        for t, legs in zip(f["t_ns"].tolist(), f["legs"], strict=True):
            if not np.any(legs):  # no telemetry yet
                continue
            try:  # warm-started from the last solution
                q, p, _ = rig.forward_quat(legs, q, p)
            except (ValueError, ArithmeticError):  # legs no pose fits (a faulted rig): left out
                continue
            yield t, "hil/feedback", [("rig_base", "rig_platform_measured", pose(quat_to_rotation(q), p))]


def xyzw(X: Array) -> tuple[Array, Array]:
    """Translations (n, 3) and quaternions ``[x, y, z, w]`` (n, 4) (the viewers' order) of poses (n, 4, 4), at once."""
    X = np.asarray(X, dtype=np.float64).reshape(-1, 4, 4)
    return X[:, :3, 3].copy(), Rotation.from_matrix(X[:, :3, :3]).as_quat()
