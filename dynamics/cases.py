"""Builders for the seed and reference systems: Yoshida's 3 rods, Cyril's 5 bodies, SRMS, ETS-VII.

The robot models are package data of :mod:`dynamics` (``dynamics/data/``, each file
with its source in its header, the figures and their sources in ``dynamics/data/README.md``),
found with :mod:`importlib.resources` by :func:`reference_path`. The builders that read a
URDF (:func:`srms_on_orbiter`, :func:`srms_holding_payload`, :func:`srms_latched_and_grappled`,
:func:`etsvii`) take ``model_path``: another URDF of the same robot (same bodies, e.g. with
other mass properties), or ``None`` for the packaged one. Every value not given by a source
is marked **assumed** here and in the case description.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from dynamics import chain as ch
from dynamics import closed_chain as cc
from dynamics import spatial as sp
from dynamics.beam import BeamLink
from dynamics.spatial import pose
from dynamics.urdf import chain_from_urdf
from errors import ConfigError, ModelError, SingularityError

__all__ = [
    "ChainCase",
    "RigidPayload",
    "reference_path",
    "yoshida_three_rod",
    "yoshida_direction",
    "cyril_1998_system",
    "cyril_1998_captured",
    "CYRIL_EI",
    "srms_on_orbiter",
    "srms_holding_payload",
    "srms_booms",
    "with_flexible_booms",
    "srms_latched_and_grappled",
    "etsvii",
    "ORBITER_MASS",
    "PAYLOAD_MASS",
    "ORBITER_INERTIA",
    "SRMS_BASE_TO_ORBITER_COM",
]

Array = NDArray[np.float64]

#: Orbiter mass [kg] — **assumed** (``dynamics/data/README.md``: not in public sources).
ORBITER_MASS = 1.0e5
#: Payload mass of the berthing scenario [kg] — **assumed** (a module-class payload).
PAYLOAD_MASS = 12000.0
#: Orbiter inertia about its CoM, orbiter body axes [kg·m²] — **assumed** (same README).
ORBITER_INERTIA = np.diag([1.2e6, 8.0e6, 8.5e6])
#: Orbiter CoM from the SRMS base frame origin, in that frame [m] — **assumed**: shoulder
#: on the port sill about 10.7 m forward of, 2.74 m to port of and 1.70 m above the
#: orbiter CoM, base frame axes aligned with the orbiter body axes (x fwd, y stbd, z down).
SRMS_BASE_TO_ORBITER_COM = np.array([-10.7, 2.74, 1.70])


@dataclass(frozen=True)
class ChainCase:
    """A chain model with an initial state and a hand (point of contact).

    Attributes
    ----------
    model : ChainModel
    q : ndarray, shape (nq,)
    v : ndarray, shape (nv,)
    hand_body : int
        Body the hand point is fixed in.
    p_BoHo_B : ndarray, shape (3,)
        Hand point in that body frame. [m]
    description : str
        Sources and assumptions.
    """

    model: ch.ChainModel
    q: Array
    v: Array
    hand_body: int
    p_BoHo_B: Array
    description: str


@dataclass(frozen=True)
class RigidPayload:
    """A rigid target body B (Cyril's payload).

    Attributes
    ----------
    mass : float
        [kg]
    I_Bcm_W : ndarray, shape (3, 3)
        Inertia about its CoM, in W. [kg·m²]
    p_BcmC_W : ndarray, shape (3,)
        From its CoM to the contact point, in W. [m]
    V_WBcm_W : ndarray, shape (6,)
        Twist [ω; v_Bcm] in W. [rad/s, m/s]
    """

    mass: float
    I_Bcm_W: Array
    p_BcmC_W: Array
    V_WBcm_W: Array


def reference_path(name: str) -> Path:
    """Path of a reference file shipped as package data (``dynamics/data/NAME``).

    Parameters
    ----------
    name : str
        File name, e.g. ``"SRMS_Canadarm.urdf"``, ``"ETSVII.urdf"``, ``"README.md"``.

    Returns
    -------
    Path
        The file on the file system (the package is installed as files, not zipped).

    Raises
    ------
    ConfigError
        If the package has no such data file (the name and where it was looked for are named).
    """
    res = resources.files("dynamics").joinpath("data", name)
    if not res.is_file():
        raise ConfigError(f"reference file {name!r}: not in the package data of dynamics ({res})")
    return Path(str(res))


def _rod_inertia(m: float, L: float) -> Array:
    """Thin uniform rod along x, about its CoM."""
    return np.diag([0.0, m * L * L / 12.0, m * L * L / 12.0])


def _planar_chain(names: list[str], base_mass: tuple[float, list[float]], base_I: Array, lengths: list[float],
                  masses: list[float], I_cm: list[Array], mount_x: float) -> ch.ChainModel:
    nb = len(names)
    X = np.zeros((nb, 4, 4))
    X[0] = np.eye(4)
    X[1] = pose(np.eye(3), [mount_x, 0.0, 0.0])
    for b in range(2, nb):
        X[b] = pose(np.eye(3), [lengths[b - 2], 0.0, 0.0])
    axes = np.zeros((nb, 3))
    axes[1:, 2] = 1.0
    com = np.zeros((nb, 3))
    com[0] = base_mass[1]
    for b in range(1, nb):
        com[b, 0] = 0.5 * lengths[b - 1]
    mass = np.array([base_mass[0]] + list(masses))
    inertia = np.array([base_I] + list(I_cm))
    return ch.chain_from_table(names, [-1] + list(range(nb - 1)), ["free"] + ["revolute"] * (nb - 1),
                               X, axes, mass, com, inertia)


def yoshida_three_rod() -> ChainCase:
    """Yoshida 1992 (seed 000) section 6: three uniform rods, 1.0 m and 1.0 kg, two revolute joints.

    Rod 1 is the free base (frame at its start end, rod along x), the joints (about z)
    at the rod ends, the hand at the end of rod 3; motion in the xy plane. The rods are
    thin: inertia about their own axis is zero. The posture of Fig. 5 is not in the OCR
    text; the joint angles (90°, 105°) are **chosen** so that the paper's stated
    geometry holds: the line from the hand through the total CoM makes 39° with the end
    link, i.e. θ = 51° with θ = 90° along the end link (see :func:`yoshida_direction`).
    The chain is at rest.
    """
    rod = _rod_inertia(1.0, 1.0)
    model = _planar_chain(["rod1", "rod2", "rod3"], (1.0, [0.5, 0.0, 0.0]), rod,
                          [1.0, 1.0, 1.0], [1.0, 1.0], [rod, rod], 1.0)
    q = ch.neutral(model)
    q[7:] = np.radians([90.0, 105.0])
    return ChainCase(model, q, np.zeros(model.nv), 2, np.array([1.0, 0.0, 0.0]),
                     "Yoshida 1992 sec. 6 three-rod chain; posture (90°, 105°) chosen (Fig. 5 not in OCR)")


def yoshida_direction(case: ChainCase, theta: float) -> Array:
    """Impulse direction n(θ) (3,) in W for the three-rod case, θ in radians.

    ``n = cos θ e_⊥ + sin θ e_link``: ``e_link`` along the end link from the hand toward
    the last joint (θ = 90°), ``e_⊥`` perpendicular to it in the plane, on the side of the
    total CoM. With :func:`yoshida_three_rod`'s posture the CoM line is θ = 51°.
    """
    model, q = case.model, case.q
    data = ch.make_data(model)
    X = ch.forward_kinematics(model, data, q)
    hb = case.hand_body
    p_hand = X[hb, :3, 3] + X[hb, :3, :3] @ case.p_BoHo_B
    e_link = X[hb, :3, 3] - p_hand
    e_link /= np.linalg.norm(e_link)
    w = ch.center_of_mass(model, data, q) - p_hand
    e_perp = w - (w @ e_link) * e_link
    e_perp /= np.linalg.norm(e_perp)
    return np.cos(theta) * e_perp + np.sin(theta) * e_link


#: Bending stiffness of Cyril's links, Table 1 of seed 002. [N·m²]
CYRIL_EI = 881.0


def cyril_1998_system(n_modes: int = 0, mount_x: float = 0.0) -> tuple[ChainCase, RigidPayload]:
    """Cyril et al. 1998 (seed 002) Tables 1–2: spacecraft, two links, hand; and the payload.

    ``n_modes = 0``: rigid links. ``n_modes > 0``: both links are Euler–Bernoulli beams
    (:mod:`dynamics.beam`) with ``EI = 881 N·m²`` (:data:`CYRIL_EI`), 20 kg spread
    uniformly over 8.13 m, and ``n_modes`` clamped–free modes bending in the plane of
    the motion (seed 002 §2: the links' elastic coordinates join the generalized
    coordinates); q and v end with the elastic coordinates, all zero at the start
    (Table 2 lists none). ``mount_x``: the shoulder joint this far from the spacecraft
    CoM along the spacecraft x axis [m] (default 0: at the CoM, where free joints exert
    no moment on the spacecraft). Table 1's ``I_zz`` of the links and the hand
    equal ``m L²/3`` (about the joint); the CoM inertia used is ``m L²/12`` about z (thin
    rods). Table 2's angles are taken as relative joint angles, degrees → radians, all
    other initial values zero. **Assumed** (not in the seed): manipulator mounted
    ``mount_x`` from the spacecraft CoM (Fig. 1 is not in the OCR); out-of-plane inertias
    (spacecraft diag(20000, 20000, 40000), payload diag(250, 250, 500)); the contact point
    at the hand tip, 1.0 m from the payload CoM along the hand axis; motion in the xy plane.
    """
    L, m_l = 8.13, 20.0
    model = _planar_chain(
        ["spacecraft", "link1", "link2", "hand"],
        (10000.0, [0.0, 0.0, 0.0]),
        np.diag([20000.0, 20000.0, 40000.0]),
        [L, L, 0.2],
        [m_l, m_l, 0.2],
        [_rod_inertia(m_l, L), _rod_inertia(m_l, L), _rod_inertia(0.2, 0.2)],
        float(mount_x),
    )
    if n_modes:
        link = BeamLink(L, m_l / L, CYRIL_EI, modes_y=n_modes)
        model = ch.with_beams(model, {1: link, 2: link})
    q = ch.neutral(model)
    q[7:10] = np.radians([67.3, 45.4, 0.0])
    v = np.zeros(model.nv)
    v[6:9] = np.radians([8.36e-1, -1.81, 9.03e-1])
    links = f"flexible links ({n_modes} modes each)" if n_modes else "rigid links"
    case = ChainCase(model, q, v, 3, np.array([0.2, 0.0, 0.0]),
                     f"Cyril et al. 1998 Tables 1-2, {links}; mount at spacecraft CoM assumed")
    data = ch.make_data(model)
    X = ch.forward_kinematics(model, data, q)
    e_hand = X[3, :3, 0]
    payload = RigidPayload(
        mass=1000.0,
        I_Bcm_W=np.diag([250.0, 250.0, 500.0]),
        p_BcmC_W=-1.0 * e_hand,
        V_WBcm_W=np.array([0.0, 0.0, np.radians(-3.00), 0.0, 0.0, 0.0]),
    )
    return case, payload


def cyril_1998_captured(case: ChainCase, payload: RigidPayload, q: Array, v: Array,
                        w_p_W: Array) -> ChainCase:
    """Cyril's system after a plastic capture: the payload hinged to the hand at the contact point.

    The capture transmits no moment (seed 002 §3, second assumption): the contact points
    move together afterwards, the payload keeps its own spin. It is therefore a fifth
    body on a revolute joint about z at the hand tip (planar motion), its CoM
    ``−p_BcmC_W`` beyond it; the joint rate is the payload's spin relative to the hand.

    Parameters
    ----------
    case, payload
        From :func:`cyril_1998_system` (rigid or flexible).
    q, v : ndarray, shapes (nq,), (nv,)
        The chaser's configuration and its post-impact generalized velocity.
    w_p_W : ndarray, shape (3,)
        The payload's post-impact angular velocity in W. [rad/s]

    Returns
    -------
    ChainCase
        Bodies spacecraft, link1, link2, hand, payload; q and v with the payload joint
        after the hand joint (elastic coordinates last); the hand point unchanged.
    """
    m = case.model
    X = np.concatenate([m.X_PJ, pose(np.eye(3), case.p_BoHo_B)[None]])
    axes = np.concatenate([m.axis_J, [[0.0, 0.0, 1.0]]])
    data = ch.make_data(m)
    R_WH = ch.forward_kinematics(m, data, q)[case.hand_body, :3, :3]
    com = np.concatenate([m.p_BoBcm_B, [R_WH.T @ -payload.p_BcmC_W]])
    inertia = np.concatenate([m.I_Bcm_B, [R_WH.T @ payload.I_Bcm_W @ R_WH]])
    model = ch.chain_from_table(list(m.names) + ["payload"], list(m.parent) + [case.hand_body],
                                list(m.joint_type) + ["revolute"], X, axes,
                                np.concatenate([m.mass, [payload.mass]]), com, inertia,
                                beams=list(m.beams) + [None] if m.beams else None)
    nj = 7 + m.n
    w_hand = ch.frame_jacobian(m, data, q, case.hand_body)[:3] @ v
    q2 = np.concatenate([q[:nj], [0.0], q[nj:]])
    v2 = np.concatenate([v[:nj - 1], [float(w_p_W[2] - w_hand[2])], v[nj - 1:]])
    return ChainCase(model, q2, v2, case.hand_body, case.p_BoHo_B,
                     case.description + "; payload hinged to the hand after a plastic capture")


def srms_on_orbiter(
    *, orbiter_mass: float = ORBITER_MASS, orbiter_inertia: NDArray | None = None,
    p_BoOcm_B: NDArray | None = None, model_path: str | PathLike[str] | None = None,
) -> ChainCase:
    """The Shuttle RMS (``SRMS_Canadarm.urdf``) on a free-floating orbiter base (6 + 6 DOF).

    The URDF's placeholder base link gets the orbiter's mass properties (all
    **assumed**: :data:`ORBITER_MASS`, :data:`ORBITER_INERTIA`, CoM at
    :data:`SRMS_BASE_TO_ORBITER_COM` from the SRMS base frame). Body 0's frame is the
    SRMS base frame; the shoulder mount B1 is welded to it. Hand: the end-effector
    point, 0.6604 m along x of B7. Posture (rad): shoulder yaw 0, shoulder pitch 0.5,
    elbow −1.0, wrist pitch 0.5, wrist yaw 0, wrist roll 0; at rest.

    ``model_path``: a URDF to read instead of the packaged ``SRMS_Canadarm.urdf`` (six moving
    joints, the last body the end effector's; ``None``: the packaged file).

    Raises
    ------
    ModelError, OSError
        If ``model_path`` cannot be read as a six-joint chain.
    """
    model = chain_from_urdf(
        reference_path("SRMS_Canadarm.urdf") if model_path is None else model_path,
        floating_base=True,
        base_mass=orbiter_mass,
        base_inertia=ORBITER_INERTIA if orbiter_inertia is None else orbiter_inertia,
        base_com=SRMS_BASE_TO_ORBITER_COM if p_BoOcm_B is None else p_BoOcm_B,
    )
    if model.n != 6:
        raise ModelError(f"srms_on_orbiter: {model_path}: {model.n} moving joints, the SRMS has 6")
    q = ch.neutral(model)
    q[7:] = [0.0, 0.5, -1.0, 0.5, 0.0, 0.0]
    return ChainCase(model, q, np.zeros(model.nv), model.nb - 1, np.array([0.6604, 0.0, 0.0]),
                     "SRMS (Nguyen & Hughes 1994) on an orbiter base; orbiter properties assumed")


#: SRMS booms as beam links — **ASSUMED** section (no public figures found): graphite-epoxy
#: tubes 0.33 m in diameter (the booms' published diameter, 13 in) with a 2.0 mm wall, axial
#: modulus 100 GPa, shear modulus 30 GPa, density 1600 kg/m³: ρA 3.3 kg/m, EI 2.8e6 N·m²,
#: GJ 1.7e6 N·m². Lengths: the URDF's shoulder-to-elbow 6.377 m (B3, upper) and
#: elbow-to-wrist 7.06 m (B4, lower).
SRMS_BOOM_DIAMETER, SRMS_BOOM_WALL = 0.33, 0.002
SRMS_BOOM_E, SRMS_BOOM_G, SRMS_BOOM_DENSITY = 1.0e11, 3.0e10, 1600.0
SRMS_BOOM_LINKS = ("B3", "B4")


def srms_booms(n_modes: int = 1, *, torsion: bool = False, damping_ratio: float = 0.005) -> tuple[BeamLink, BeamLink]:
    """The SRMS upper and lower booms as Euler–Bernoulli beam links (section **ASSUMED**, see
    :data:`SRMS_BOOM_DIAMETER`): ``n_modes`` clamped–free modes in each bending plane, optionally
    one torsion mode, structural damping ratio ``damping_ratio`` (assumed 0.5 %).

    Returns
    -------
    (upper, lower) : tuple of BeamLink
        For bodies B3 and B4 of ``SRMS_Canadarm.urdf`` (:func:`with_flexible_booms`).
    """
    r, t = 0.5 * SRMS_BOOM_DIAMETER, SRMS_BOOM_WALL
    A = 2.0 * np.pi * r * t
    I = np.pi * r ** 3 * t
    kw: dict[str, Any] = dict(modes_y=n_modes, modes_z=n_modes, modes_torsion=1 if torsion else 0,
              GJ=SRMS_BOOM_G * 2.0 * I, polar_mass_per_length=SRMS_BOOM_DENSITY * A * r * r,
              damping_ratio=damping_ratio)
    rho_A = SRMS_BOOM_DENSITY * A
    return (BeamLink(6.377, rho_A, SRMS_BOOM_E * I, **kw), BeamLink(7.06, rho_A, SRMS_BOOM_E * I, **kw))


def with_flexible_booms(model: ch.ChainModel, booms: tuple[BeamLink, BeamLink]) -> ch.ChainModel:
    """The SRMS chain with B3 and B4 as beam links that carry their tubes' mass only.

    The rest of each link (joints, motors, fittings) stays a rigid part on the beam's
    root frame, with the mass properties that keep the link's total mass, CoM and
    inertia those of the URDF: ``m_r = m − m_t``, ``c_r = (m c − m_t c_t)/m_r``, inertia by
    the parallel-axis theorem.

    Raises
    ------
    ModelError
        If a tube outweighs its link, or the remainder's inertia is not positive semi-definite.
    """
    mass, com, inertia = np.array(model.mass), np.array(model.p_BoBcm_B), np.array(model.I_Bcm_B)
    bodies = [model.names.index(name) for name in SRMS_BOOM_LINKS]
    for b, bk in zip(bodies, booms, strict=True):
        m, c, I = float(mass[b]), com[b], inertia[b]
        mt, L = bk.mass, bk.length
        ct = np.array([0.5 * L, 0.0, 0.0])
        It = np.diag([bk.polar_mass_per_length * L, mt * L * L / 12.0, mt * L * L / 12.0])
        mr = m - mt
        if not mr > 0.0:
            raise ModelError(f"body {model.names[b]!r}: boom tube {mt:.3g} kg outweighs the link's {m:.3g} kg")
        cr = (m * c - mt * ct) / mr

        def shift(mi: float, ci: NDArray, ref: NDArray) -> NDArray:
            d = ci - ref
            return mi * (float(d @ d) * np.eye(3) - np.outer(d, d))

        Ir = I + shift(m, c, cr) - It - shift(mt, ct, cr)
        Ir = 0.5 * (Ir + Ir.T)
        if np.linalg.eigvalsh(Ir)[0] < -1e-9 * np.abs(I).max():
            raise ModelError(f"body {model.names[b]!r}: boom tube {mt:.3g} kg leaves an inadmissible remainder "
                             f"(inertia eigenvalues {np.linalg.eigvalsh(Ir).tolist()} kg m^2)")
        mass[b], com[b], inertia[b] = mr, cr, Ir
    rigid = ch.chain_from_table(model.names, model.parent, model.joint_type, model.X_PJ, model.axis_J, mass, com,
                                inertia, q_lower=model.q_lower, q_upper=model.q_upper, qd_max=model.qd_max,
                                tau_max=model.tau_max, joint_names=model.joint_names,
                                fixed_frames=model.fixed_frames)
    return ch.with_beams(rigid, dict(zip(bodies, booms, strict=True)), keep_rigid_inertia=True)


def _pose_of(x: NDArray) -> NDArray:
    a = np.asarray(x, dtype=np.float64)
    return sp.pose_from_vector(a) if a.shape == (6,) else a


def srms_holding_payload(
    *,
    payload_mass: float,
    payload_inertia_T: NDArray,
    X_TG: NDArray,
    X_OS: NDArray,
    X_OT: NDArray,
    theta_guess: NDArray,
    booms: tuple[BeamLink, BeamLink] | None = None,
    tol: float = 1e-12,
    model_path: str | PathLike[str] | None = None,
) -> ChainCase:
    """The SRMS on the orbiter holding (grappled, rigidized) a payload at a given pose.

    :func:`srms_on_orbiter` with the payload rigidly merged into the last body B7 (the end
    effector E, 0.6604 m along B7's x, coincides with the grapple fixture G) and the joint
    angles solved (Newton on the frame Jacobian, from ``theta_guess``) so that E meets G
    with the payload at ``X_OT`` relative to the orbiter. The base frame (SRMS base S) sits
    at ``X_WS = X_OS`` (W = O); at rest.

    Parameters
    ----------
    payload_mass : float
        [kg]
    payload_inertia_T : ndarray, shape (3,) or (3, 3)
        About the payload CoM, in its body frame T. [kg·m²]
    X_TG : ndarray, shape (4, 4) or pose vector (6,)
        Grapple fixture in T.
    X_OS, X_OT : ndarray, shape (4, 4) or (6,)
        SRMS base frame and payload in the orbiter frame O (origin at its CoM).
    theta_guess : ndarray, shape (6,)
        Start of the solve. [rad]
    booms : (BeamLink, BeamLink), optional
        Upper (B3) and lower (B4) booms as beam links (:func:`srms_booms`,
        :func:`with_flexible_booms`).
    tol : float
        Pose tolerance of the solve. [m, rad]
    model_path : path-like, optional
        The arm's URDF (:func:`srms_on_orbiter`; default the packaged one).

    Returns
    -------
    ChainCase
        Hand: the end effector point on B7.

    Raises
    ------
    SingularityError
        If the solve does not converge from ``theta_guess``.
    """
    X_TG_, X_OS_, X_OT_ = (_pose_of(x) for x in (X_TG, X_OS, X_OT))
    base = srms_on_orbiter(model_path=model_path)
    m0 = base.model
    e = m0.nb - 1
    X_EE = sp.pose(np.eye(3), base.p_BoHo_B)                      # E in B7
    X_BT = X_EE @ sp.pose_inverse(X_TG_)                           # T in B7 (E = G)
    I_T = np.asarray(payload_inertia_T, dtype=np.float64)
    I_T = np.diag(I_T) if I_T.shape == (3,) else I_T
    m, c, I = ch.merge_mass_properties((float(m0.mass[e]), m0.p_BoBcm_B[e], m0.I_Bcm_B[e]),
                                       ch.transform_mass_properties((float(payload_mass), np.zeros(3), I_T), X_BT))
    mass, com, inertia = np.array(m0.mass), np.array(m0.p_BoBcm_B), np.array(m0.I_Bcm_B)
    mass[e], com[e], inertia[e] = m, c, 0.5 * (I + I.T)
    model = ch.chain_from_table(m0.names, m0.parent, m0.joint_type, m0.X_PJ, m0.axis_J, mass, com, inertia,
                                q_lower=m0.q_lower, q_upper=m0.q_upper, qd_max=m0.qd_max, tau_max=m0.tau_max,
                                joint_names=m0.joint_names, fixed_frames=m0.fixed_frames)
    if booms is not None:
        model = with_flexible_booms(model, booms)
    # the payload frame T, fixed in B7, must sit at X_ST = X_SO X_OT: a loop to the base
    target = cc.LoopClosure(e, X_BT, 0, sp.pose_inverse(X_OS_) @ X_OT_)
    q = ch.neutral(model)
    q[:3] = X_OS_[:3, 3]
    q[3:7] = sp.rotation_to_quat(X_OS_[:3, :3])
    q[7:13] = theta_guess
    data = ch.make_data(model)
    err = cc.constraint_error(model, data, q, target)
    for _ in range(30):  # Newton on the joints, base and beams held
        if np.abs(err).max() < tol:
            break
        J = cc.constraint_jacobian(model, data, q, target)[:, 6:12]
        q[7:13] -= np.linalg.lstsq(J, err, rcond=None)[0]
        err = cc.constraint_error(model, data, q, target)
    else:
        raise SingularityError(f"srms_holding_payload: joint solve did not converge from {list(theta_guess)} "
                               f"(error {np.abs(err).max():.3g})")
    return ChainCase(model, q, np.zeros(model.nv), e, base.p_BoHo_B.copy(),
                     "SRMS on an orbiter base holding a payload; orbiter and payload properties assumed")


def srms_latched_and_grappled(
    *,
    payload_mass: float,
    payload_inertia_T: NDArray,
    X_TG: NDArray,
    X_TB: NDArray,
    X_OL: NDArray,
    X_OS: NDArray,
    theta_guess: NDArray,
    booms: tuple[BeamLink, BeamLink] | None = None,
    tol: float = 1e-12,
    model_path: str | PathLike[str] | None = None,
) -> tuple[ChainCase, cc.LoopClosure]:
    """The SRMS holding a payload that is also latched to the orbiter: a closed kinematic chain.

    :func:`srms_holding_payload` at the berthed pose (the payload's berthing interface B on
    the orbiter's latch frame L), and the loop closure welding B to L (seed 004, closed
    kinematic chains).

    Parameters
    ----------
    X_TB : ndarray, shape (4, 4) or (6,)
        Berthing interface in the payload frame T.
    X_OL : ndarray, shape (4, 4) or (6,)
        Latch frame in the orbiter frame O.
    payload_mass, payload_inertia_T, X_TG, X_OS, theta_guess, booms, tol, model_path
        As :func:`srms_holding_payload`.

    Returns
    -------
    case : ChainCase
    loop : LoopClosure
        B (on B7) welded to L (on the base).

    Raises
    ------
    SingularityError
        If the joint solve does not converge from ``theta_guess``.
    """
    X_TG_, X_TB_, X_OL_, X_OS_ = (_pose_of(x) for x in (X_TG, X_TB, X_OL, X_OS))
    case = srms_holding_payload(payload_mass=payload_mass, payload_inertia_T=payload_inertia_T, X_TG=X_TG_,
                                X_OS=X_OS_, X_OT=X_OL_ @ sp.pose_inverse(X_TB_), theta_guess=theta_guess, booms=booms,
                                tol=tol, model_path=model_path)
    X_BT = sp.pose(np.eye(3), case.p_BoHo_B) @ sp.pose_inverse(X_TG_)
    loop = cc.LoopClosure(case.hand_body, X_BT @ X_TB_, 0, sp.pose_inverse(X_OS_) @ X_OL_)
    return (ChainCase(case.model, case.q, case.v, case.hand_body, case.p_BoHo_B,
                      "SRMS on an orbiter base holding a latched payload (closed chain); orbiter and payload "
                      "properties assumed"), loop)


def etsvii(*, model_path: str | PathLike[str] | None = None) -> ChainCase:
    """ETS-VII (``ETSVII.urdf``): 2550 kg base and a six-link arm, free-floating.

    Hand: 0.53 m along z of Link_6. Posture (rad): (0, 0.5, −1.0, 0.5, 0.3, 0.0); at rest.
    ``model_path``: a URDF to read instead of the packaged one (six moving joints).

    Raises
    ------
    ModelError, OSError
        If ``model_path`` cannot be read as a six-joint chain.
    """
    model = chain_from_urdf(reference_path("ETSVII.urdf") if model_path is None else model_path,
                            floating_base=True)
    if model.n != 6:
        raise ModelError(f"etsvii: {model_path}: {model.n} moving joints, ETS-VII has 6")
    q = ch.neutral(model)
    q[7:] = [0.0, 0.5, -1.0, 0.5, 0.3, 0.0]
    return ChainCase(model, q, np.zeros(model.nv), model.nb - 1, np.array([0.0, 0.0, 0.53]),
                     "ETS-VII (Yoshida 2003; Yoshida & Abiko 2002)")


if not TYPE_CHECKING:  # the checker sees no alias: the project itself uses the new names

    def __getattr__(name: str) -> Any:
        """Deprecated aliases (PEP 562): ``REFERENCE_DIR`` (removed in 0.2.0; the models are package data)."""
        if name == "REFERENCE_DIR":
            from dynamics import _deprecated

            _deprecated("dynamics.cases.REFERENCE_DIR", "dynamics.cases.reference_path(name), or model_path= of the "
                        "case builders for another model")
            return reference_path("README.md").parent
        raise AttributeError(f"module 'dynamics.cases' has no attribute {name!r}")
