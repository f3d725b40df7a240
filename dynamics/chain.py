"""Free-floating (or ground-based) serial chains: kinematics, mass matrix, dynamics.

Pinocchio's Model/Data split: a frozen :class:`ChainModel` built once, a mutable
:class:`ChainData` of scratch arrays per owner, and free functions over both.

Coordinates
-----------
Body 0 is the base. With a floating base (``joint_type[0] == "free"``)::

    q = [p_WoBo_W (3), quat_WB (4, wxyz), θ (n)]          nq = 7 + n
    v = [ω_WB_W (3), v_WBo_W (3), θ̇ (n)]                  nv = 6 + n

``Bo`` is the origin of the base body frame B. It is *not* required to be the base
CoM: the base CoM sits at ``p_BoBcm_B[0]`` (for URDF models B is the root link frame,
for :func:`dynamics.cases.srms_on_orbiter` the SRMS base frame, with the orbiter CoM
offset from it). ``v`` holds the base twist expressed in W with the linear velocity of
``Bo``; ``v̇`` (from :func:`forward_dynamics`) holds ``[ω̇_WB_W, a_WBo_W, θ̈]`` with the
*classical* acceleration of ``Bo`` (d/dt of ``v_WBo_W``). A ground-based arm
(``joint_type[0] == "fixed_base"``) has ``q = θ``, ``v = θ̇`` and its base sits at the
constant pose ``X_PJ[0]`` in W.

Flexible links: bodies named in ``ChainModel.beams`` are assumed-mode Euler–Bernoulli
beams (:mod:`dynamics.beam`); q and v then end with their ``ne`` elastic coordinates η,
η̇ (``q = [base, θ, η]``), the equations gain the strain and structural damping forces
(:func:`elastic_forces`), and every function below dispatches to
:mod:`dynamics.flexible` (Cyril et al. 1998, seed 002 §2; Quiocho et al., seed 004).

Each body b ≥ 1 hangs on one joint (revolute or prismatic) from ``parent[b] < b``.
Fixed joints (a body welded to its parent: a rigid tip, a grappled payload, URDF
``fixed``) are merged when the model is built (:func:`chain_from_table`,
:func:`chain_from_rows`, :mod:`dynamics.urdf`): the welded body's mass properties are
added to the moving body it is welded to (:func:`merge_mass_properties`), its children
re-attached with the composed placement, and its frame kept in
:attr:`ChainModel.fixed_frames` (:func:`fixed_frame`). The algorithms see moving bodies
only (as Pinocchio's ``appendBodyToJoint``).
Its joint frame J is fixed in the parent at ``X_PJ[b]`` for zero joint value, and the
body frame coincides with the joint frame moved by the joint:
``X_WB[b] = X_WB[parent] @ X_PJ[b] @ X_JB(θ_b)``, with ``X_JB`` a rotation by θ about
``axis_J[b]`` (revolute) or a translation θ·axis (prismatic).

Algorithms
----------
All spatial quantities are referred to one point, the base origin ``Bo`` at the
current instant, and expressed in W (spatial vectors [ω; v], wrenches [τ; f]). With one
reference point the shift matrices ``r_s`` of the MBDYN recursion (seed 004, eq. 17)
are the identity, so the composite (``M*_rr,n``) recursion is a sum, joint columns are
the projection matrices ``P_n`` of eq. (19) referred to ``Bo``, and eq. (21) makes each
body's motion the sum of its ancestors' columns. The base block of the motion
subspace is the 6×6 identity.

External wrenches ``F_ext`` (nb, 6) are ``F_Bo_W`` per body: [τ; f] about the body
frame origin, expressed in W. There is no gravity (orbit; gravity gradient and the
LVLH terms belong to :mod:`dynamics.orbit`). :func:`step_rk4` advances (q, v) by one
fixed step with inputs held.

For rigid chains the recursions (kinematics, mass matrix, Newton–Euler, generalized forces,
Saha's factorization and solve) run as compiled kernels (:mod:`dynamics.chain_kernels`,
numba; compiled once per machine and cached). The numpy code stays as the reference they are
tested equal to (round-off): :func:`forward_dynamics_numpy`, :func:`mass_matrix_numpy`.

Functions returning arrays of ``data`` (``forward_kinematics`` → ``data.X_WB``,
``mass_matrix`` → ``data.M``, ``forward_dynamics`` → ``data.vdot``) return read-only
views (not writeable) that the next call on the same ``data`` overwrites: copy to keep. Kinematics are
cached per ``q`` in ``data``.

No I/O, clock or globals. Shapes are checked on entry (:class:`errors.ShapeError`);
inadmissible model data raise :class:`errors.ModelError` naming the body and value.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dynamics import flexible as _flex
from dynamics import spatial as sp
from dynamics import udu
from dynamics.beam import BeamLink
from errors import ConfigError, ModelError, ShapeError, SingularityError

__all__ = [
    "ChainModel",
    "ChainData",
    "FixedFrame",
    "fixed_frame",
    "merge_mass_properties",
    "transform_mass_properties",
    "chain_from_table",
    "chain_from_rows",
    "pose_xyz_rpy",
    "check_inertia",
    "make_data",
    "neutral",
    "integrate",
    "forward_kinematics",
    "frame_jacobian",
    "mass_matrix",
    "bias_forces",
    "inverse_dynamics",
    "generalized_forces",
    "momentum",
    "center_of_mass",
    "frame_acceleration",
    "kinetic_energy",
    "forward_dynamics",
    "forward_dynamics_dense",
    "forward_dynamics_numpy",
    "mass_matrix_numpy",
    "mass_matrix_udu",
    "step_rk4",
    "step_rk4_with",
    "simulate",
    "Trajectory",
    "with_beams",
    "elastic_forces",
    "potential_energy",
    "tip_deflection",
    "beam_points",
]

Array = NDArray[np.float64]

BASE_TYPES = ("free", "fixed_base")
_I3 = np.eye(3)
_NO_F_EXT = np.zeros((0, 6))  # forward_dynamics without F_ext: the kernel's placeholder (no elements)
JOINT_TYPES = ("revolute", "prismatic")
FIXED = "fixed"


def _cross_cols(a: Array, b: Array) -> Array:
    """Cross products of column stacks, (3, k) × (3, k) → (3, k) (np.cross without its overhead).

    ``a`` may be (3, 1) (broadcast); ``b`` must be (3, k).
    """
    out = np.empty_like(b)
    out[0] = a[1] * b[2] - a[2] * b[1]
    out[1] = a[2] * b[0] - a[0] * b[2]
    out[2] = a[0] * b[1] - a[1] * b[0]
    return out


def _ck() -> ModuleType:
    """The compiled kernels (:mod:`dynamics.chain_kernels`), imported on first use: importing numba takes
    ~0.5 s, which processes that never step a multibody chain should not pay."""
    from dynamics import chain_kernels

    return chain_kernels


def _view(a: Array) -> Array:
    """A read-only view of a :class:`ChainData` buffer: what the public functions return. The
    next call on the same data overwrites the buffer (and so the view); copy to keep it."""
    v = a.view()
    v.flags.writeable = False
    return v


def _readonly(a: ArrayLike, shape: tuple[int, ...], name: str) -> Array:
    arr = np.array(a, dtype=np.float64)
    if arr.shape != shape:
        raise ShapeError(f"{name}: expected shape {shape}, got {arr.shape}")
    arr.setflags(write=False)
    return arr


def check_inertia(I: Array, body: str, *, rtol: float = 1e-9) -> None:
    """Refuse a non-symmetric, indefinite or non-physical rotational inertia.

    Parameters
    ----------
    I : ndarray, shape (3, 3)
        Inertia about the CoM. [kg·m²]
    body : str
        Body name, for the message.

    Raises
    ------
    ModelError
        If ``I`` is not finite, not symmetric, or has a negative principal moment.

    Notes
    -----
    The triangle inequality of principal moments (``I1 + I2 ≥ I3``) is *not* enforced:
    the published ETS-VII data (``dynamics/data/ETSVII.urdf``, Link_1: 0.25,
    0.25, 1.69 kg·m²) violate it, and the dynamics stay well defined without it.
    """
    if not np.all(np.isfinite(I)):
        raise ModelError(f"body {body!r}: inertia not finite: {I.tolist()}")
    scale = max(float(np.abs(I).max()), 1e-300)
    if np.abs(I - I.T).max() > rtol * scale:
        raise ModelError(f"body {body!r}: inertia not symmetric: {I.tolist()}")
    lam = np.linalg.eigvalsh(0.5 * (I + I.T))
    tol = rtol * scale
    if lam[0] < -tol:
        raise ModelError(
            f"body {body!r}: inertia indefinite (principal moments {lam.tolist()} kg m^2): {I.tolist()}"
        )


@dataclass(frozen=True, slots=True, eq=False)
class FixedFrame:
    """A body welded to a moving body by a fixed joint, merged into it (module docstring).

    Attributes
    ----------
    name : str
        The welded body's name.
    body : int
        The moving body it is merged into (its index in the model).
    X_BF : ndarray, shape (4, 4)
        Its frame F in that body's frame B (read-only).
    """

    name: str
    body: int
    X_BF: Array

    def __post_init__(self) -> None:
        X = np.array(self.X_BF, dtype=np.float64)
        if X.shape != (4, 4):
            raise ShapeError(f"FixedFrame {self.name!r}: X_BF must be (4, 4), got {X.shape}")
        X.setflags(write=False)
        object.__setattr__(self, "X_BF", X)


@dataclass(frozen=True, slots=True, eq=False)
class ChainModel:
    """A tree of rigid bodies, base first; built once, immutable (arrays read-only).

    Attributes
    ----------
    names : tuple of str, (nb,)
        Body names; body 0 is the base.
    parent : tuple of int, (nb,)
        Parent body index, -1 for the base; ``parent[b] < b``.
    joint_type : tuple of str, (nb,)
        ``"free"`` (floating base) or ``"fixed_base"`` (ground-based arm) for body 0;
        ``"revolute"`` or ``"prismatic"`` after.
    X_PJ : ndarray, (nb, 4, 4)
        Joint frame J in the parent body frame at zero joint value. For a fixed base,
        ``X_PJ[0]`` is the base pose ``X_WB`` in W; for a free base it is unused (identity).
    axis_J : ndarray, (nb, 3)
        Unit joint axis in the joint frame (row 0 unused).
    mass : ndarray, (nb,)
        [kg]
    p_BoBcm_B : ndarray, (nb, 3)
        CoM in the body frame. [m]
    I_Bcm_B : ndarray, (nb, 3, 3)
        Inertia about the CoM, body frame. [kg·m²]
    q_lower, q_upper, qd_max, tau_max : ndarray, (n,)
        Joint limits, ±inf if none. [rad or m, rad/s or m/s, N·m or N]
    joint_names : tuple of str, (n,)
        Names of the joints (default: the child body names).
    beams : tuple of BeamLink or None, (nb,) or ()
        Flexible links (:mod:`dynamics.beam`): body b is an assumed-mode beam along its
        x axis when ``beams[b]`` is a :class:`dynamics.beam.BeamLink`; its children hang
        on the beam's tip (:mod:`dynamics.flexible`). Its table mass and inertia are
        then a rigid part added to the beam's and may be zero. ``()``: all rigid.
        With beams, q and v end with the ``ne`` elastic coordinates (:attr:`ne`).
    fixed_frames : tuple of FixedFrame
        The bodies welded by fixed joints and merged (:func:`chain_from_table`); not
        bodies of the model.

    Raises
    ------
    ModelError
        On inconsistent topology, unknown joint types, non-positive masses, non-unit
        axes, non-rigid ``X_PJ`` or inadmissible inertias (the body and value are named).
    ShapeError
        On arrays of the wrong shape.

    Notes
    -----
    Compared and hashed by identity (``eq=False``): it holds arrays.
    """

    names: tuple[str, ...]
    parent: tuple[int, ...]
    joint_type: tuple[str, ...]
    X_PJ: Array
    axis_J: Array
    mass: Array
    p_BoBcm_B: Array
    I_Bcm_B: Array
    q_lower: Array
    q_upper: Array
    qd_max: Array
    tau_max: Array
    joint_names: tuple[str, ...] = ()
    beams: tuple[BeamLink | None, ...] = ()
    fixed_frames: tuple[FixedFrame, ...] = ()
    # Derived, precomputed in __post_init__ (not part of the constructor).
    flex: _flex.FlexIndex | None = field(init=False, repr=False)
    floating: bool = field(init=False)
    serial: bool = field(init=False)
    v_index: NDArray[np.int64] = field(init=False, repr=False)
    parent_index: NDArray[np.int64] = field(init=False, repr=False)
    body_of_v: NDArray[np.int64] = field(init=False, repr=False)
    anc_b: NDArray[np.bool_] = field(init=False, repr=False)
    anc_v: NDArray[np.bool_] = field(init=False, repr=False)
    body_anc_v: NDArray[np.bool_] = field(init=False, repr=False)
    revolute: NDArray[np.bool_] = field(init=False, repr=False)
    rev_f: Array = field(init=False, repr=False)
    pri_f: Array = field(init=False, repr=False)
    K_J: Array = field(init=False, repr=False)
    K2_J: Array = field(init=False, repr=False)
    T_PB: Array = field(init=False, repr=False)

    def __post_init__(self) -> None:
        nb = len(self.names)
        if nb < 1:
            raise ModelError("names: a chain needs at least one body (the base)")
        if len(self.parent) != nb or len(self.joint_type) != nb:
            raise ModelError(
                f"parent/joint_type: lengths {len(self.parent)}/{len(self.joint_type)} != nb = {nb}"
            )
        if self.parent[0] != -1:
            raise ModelError(f"parent[0]: the base must have parent -1, got {self.parent[0]}")
        for b in range(1, nb):
            if not 0 <= self.parent[b] < b:
                raise ModelError(
                    f"body {self.names[b]!r}: parent index {self.parent[b]} must be in [0, {b})"
                )
        if self.joint_type[0] not in BASE_TYPES:
            raise ModelError(f"joint_type[0]: {self.joint_type[0]!r} not one of {BASE_TYPES}")
        for b in range(1, nb):
            if self.joint_type[b] not in JOINT_TYPES:
                hint = " (a fixed joint is merged by chain_from_table)" if self.joint_type[b] == FIXED else ""
                raise ModelError(
                    f"body {self.names[b]!r}: joint_type {self.joint_type[b]!r} not one of {JOINT_TYPES}{hint}"
                )
        n = nb - 1
        for name, shape in (
            ("X_PJ", (nb, 4, 4)),
            ("axis_J", (nb, 3)),
            ("mass", (nb,)),
            ("p_BoBcm_B", (nb, 3)),
            ("I_Bcm_B", (nb, 3, 3)),
            ("q_lower", (n,)),
            ("q_upper", (n,)),
            ("qd_max", (n,)),
            ("tau_max", (n,)),
        ):
            object.__setattr__(self, name, _readonly(getattr(self, name), shape, name))
        floating = self.joint_type[0] == "free"
        beams = tuple(self.beams) if self.beams else (None,) * nb
        if len(beams) != nb:
            raise ModelError(f"beams: {len(beams)} entries for {nb} bodies (one per body, None for rigid)")
        for b in range(nb):
            X = self.X_PJ[b]
            if not np.all(np.isfinite(X)):
                raise ModelError(f"body {self.names[b]!r}: X_PJ not finite: {X.tolist()}")
            R = X[:3, :3]
            if np.abs(R.T @ R - np.eye(3)).max() > 1e-9 or np.linalg.det(R) < 0.0:
                raise ModelError(f"body {self.names[b]!r}: X_PJ rotation not proper orthonormal: {R.tolist()}")
            if np.abs(X[3] - [0.0, 0.0, 0.0, 1.0]).max() > 0.0:
                raise ModelError(f"body {self.names[b]!r}: X_PJ last row {X[3].tolist()} != [0, 0, 0, 1]")
            m = float(self.mass[b])
            if not (np.isfinite(m) and (m > 0.0 or (m == 0.0 and ((b == 0 and not floating) or beams[b] is not None)))):
                raise ModelError(f"body {self.names[b]!r}: mass must be positive, got {m} kg")
            if not np.all(np.isfinite(self.p_BoBcm_B[b])):
                raise ModelError(f"body {self.names[b]!r}: CoM not finite: {self.p_BoBcm_B[b].tolist()}")
            check_inertia(self.I_Bcm_B[b], self.names[b])
            if b > 0:
                a = self.axis_J[b]
                if not np.all(np.isfinite(a)) or abs(float(np.linalg.norm(a)) - 1.0) > 1e-9:
                    raise ModelError(f"body {self.names[b]!r}: axis_J must be a unit vector, got {a.tolist()}")
        if np.any(self.q_lower > self.q_upper):
            j = int(np.argmax(self.q_lower > self.q_upper))
            raise ModelError(
                f"joint {j}: q_lower {self.q_lower[j]} > q_upper {self.q_upper[j]}"
            )
        for f in self.fixed_frames:
            if not isinstance(f, FixedFrame) or not 0 <= f.body < nb:
                raise ModelError(f"fixed_frames: {f!r} is not a FixedFrame on a body of the chain")
        object.__setattr__(self, "fixed_frames", tuple(self.fixed_frames))
        if not self.joint_names:
            object.__setattr__(self, "joint_names", tuple(self.names[1:]))
        elif len(self.joint_names) != n:
            raise ModelError(f"joint_names: {len(self.joint_names)} names for {n} joints")

        # Derived index data.
        off = 6 if floating else 0
        v_index = np.array([-1] + [off + b - 1 for b in range(1, nb)], dtype=np.int64)
        body_of_v = np.array([0] * off + list(range(1, nb)), dtype=np.int64)
        anc_b = np.zeros((nb, nb), dtype=bool)  # anc_b[c, b]: b is an ancestor of c or c itself
        for c in range(nb):
            b = c
            while b >= 0:
                anc_b[c, b] = True
                b = self.parent[b]
        body_anc_v = anc_b[:, body_of_v]  # (nb, nv): column l belongs to an ancestor-or-self of b
        anc_v = body_anc_v[body_of_v, :]  # (nv, nv)
        revolute = np.array([False] + [t == "revolute" for t in self.joint_type[1:]])
        K = sp.skew_rows(np.asarray(self.axis_J))
        K2 = K @ K
        T_PB = np.zeros((n, 4, 4, 4))  # X_PB(θ) = Σ_k coef_k(θ) T_PB[:, k] (see _kinematics)
        T_PB[:, 0] = self.X_PJ[1:]
        T_PB[:, 1, :, :3] = self.X_PJ[1:, :, :3] @ K[1:]
        T_PB[:, 2, :, :3] = self.X_PJ[1:, :, :3] @ K2[1:]
        T_PB[:, 3, :, 3] = (self.X_PJ[1:, :, :3] @ self.axis_J[1:, :, None])[..., 0]
        flex = None
        if any(bk is not None for bk in beams):
            flex = _flex.derive(tuple(self.names), floating, np.asarray(self.mass), anc_b, beams)
        for name, val in (
            ("beams", beams if flex is not None else ()),
            ("flex", flex),
            ("floating", floating),
            ("serial", all(self.parent[b] == b - 1 for b in range(1, nb))),
            ("v_index", v_index),
            ("parent_index", np.array(self.parent, dtype=np.int64)),
            ("body_of_v", body_of_v),
            ("anc_b", anc_b),
            ("anc_v", anc_v),
            ("body_anc_v", body_anc_v),
            ("revolute", revolute),
            ("rev_f", revolute[1:].astype(np.float64)),
            ("pri_f", (~revolute[1:]).astype(np.float64)),
            ("K_J", K),
            ("K2_J", K2),
            ("T_PB", T_PB),
        ):
            if isinstance(val, np.ndarray):
                val.setflags(write=False)
            object.__setattr__(self, name, val)

    @property
    def nb(self) -> int:
        """Number of bodies, base included."""
        return len(self.names)

    @property
    def n(self) -> int:
        """Number of joints (revolute or prismatic)."""
        return len(self.names) - 1

    @property
    def ne(self) -> int:
        """Number of elastic coordinates of the beam links (0 for a rigid chain)."""
        return 0 if self.flex is None else self.flex.ne

    @property
    def nq(self) -> int:
        """Size of q: 7 + n floating, n ground-based; plus ne with beam links."""
        return self.n + (7 if self.floating else 0) + self.ne

    @property
    def nv(self) -> int:
        """Size of v: 6 + n floating, n ground-based; plus ne with beam links."""
        return self.n + (6 if self.floating else 0) + self.ne

    @property
    def total_mass(self) -> float:
        """Sum of the masses of the moving bodies [kg] (a ground-based arm's base excluded; beams included)."""
        m = self.mass if self.flex is None else self.flex.body_mass
        return float(m.sum() if self.floating else m[1:].sum())


class ChainData:
    """Scratch arrays and cached kinematics for one :class:`ChainModel` (one owner).

    Attributes filled by the functions of this module (all expressed in W; spatial
    quantities referred to the base origin ``Bo`` at the current instant):
    ``R_WB`` (nb, 3, 3), ``p_WoBo_W`` (nb, 3) body origins, ``X_WB`` (nb, 4, 4),
    ``com_W`` (nb, 3) body CoMs, ``S`` (6, nv) motion subspace columns,
    ``I_ref`` (nb, 6, 6) body spatial inertias, ``M`` (nv, nv), ``vdot`` (nv,).
    """

    __slots__ = (
        "q_key",
        "R_WB",
        "p_WoBo_W",
        "X_WB",
        "coef",
        "com_W",
        "p_ref",
        "S",
        "I_ref",
        "M",
        "vdot",
        "factor",
        "flex",
    )

    def __init__(self, model: ChainModel) -> None:
        nb, nv = model.nb, model.nv
        self.q_key: bytes | None = None
        self.X_WB = np.zeros((nb, 4, 4))
        self.X_WB[:, 3, 3] = 1.0
        self.R_WB = self.X_WB[:, :3, :3]  # views into X_WB
        self.p_WoBo_W = self.X_WB[:, :3, 3]
        self.coef = np.zeros((nb - 1, 4))
        self.coef[:, 0] = 1.0
        self.com_W = np.zeros((nb, 3))
        self.p_ref = np.zeros(3)
        self.S = np.zeros((6, nv))
        if model.floating:
            self.S[:, :6] = np.eye(6)
        self.I_ref = np.zeros((nb, 6, 6))
        self.I_ref[:, 3:, 3:] = model.mass[:, None, None] * _I3
        self.M = np.zeros((nv, nv))
        self.vdot = np.zeros(nv)
        self.factor: udu.SahaFactor | None = None
        self.flex = _flex.FlexData(model) if model.flex is not None else None


def make_data(model: ChainModel) -> ChainData:
    """Fresh scratch data for ``model``.

    For a rigid chain the compiled kernels (:mod:`dynamics.chain_kernels`) are loaded here, by one
    call of each at the neutral configuration: a service pays their loading (and, on the machine's
    first use, their compiling) when it is built, not in its first step.
    """
    data = ChainData(model)
    if model.flex is None:
        k = _ck()
        q, v = neutral(model), np.zeros(model.nv)
        k.kinematics(model.floating, q, model.X_PJ, model.T_PB, model.rev_f, model.pri_f, model.parent_index,
                     model.axis_J, model.p_BoBcm_B, model.I_Bcm_B, model.mass, data.X_WB, data.com_W, data.p_ref,
                     data.S, data.I_ref)
        k.mass_matrix(model.floating, model.parent_index, data.S, data.I_ref, data.M)
        k.rnea(model.floating, model.parent_index, data.S, data.I_ref, v, v, True, data.vdot)
        k.gen_forces(model.floating, model.parent_index, data.S, data.X_WB, data.p_ref, np.zeros((model.nb, 6)),
                     data.vdot)
        k.forward_dynamics(model.floating, model.parent_index, data.S, data.I_ref, data.X_WB, data.p_ref, v, v,
                           _NO_F_EXT, False, data.vdot)  # its status is not looked at: a warm-up
    return data


def chain_from_table(
    names: Sequence[str],
    parent: Sequence[int],
    joint_type: Sequence[str],
    X_PJ: ArrayLike,
    axis_J: ArrayLike,
    mass: ArrayLike,
    p_BoBcm_B: ArrayLike,
    I_Bcm_B: ArrayLike,
    *,
    q_lower: ArrayLike | None = None,
    q_upper: ArrayLike | None = None,
    qd_max: ArrayLike | None = None,
    tau_max: ArrayLike | None = None,
    joint_names: Sequence[str] | None = None,
    beams: Sequence[BeamLink | None] | None = None,
    fixed_frames: Sequence[FixedFrame] = (),
) -> ChainModel:
    """Build a :class:`ChainModel` from per-body arrays (a config table).

    Joint axes are normalized (a zero axis on a joint raises); missing limits are ±inf.
    The arguments are those of :class:`ChainModel` (same shapes, units and frames), and
    ``joint_type[b]`` may be ``"fixed"`` for b ≥ 1: body b is welded to its parent at
    ``X_PJ[b]`` (its axis and joint limits are ignored) and merged into the nearest moving
    ancestor: its mass properties added (:func:`merge_mass_properties`), its children
    re-attached, its frame kept in ``fixed_frames`` (module docstring). Joint-indexed
    arguments (limits, ``joint_names``) keep one entry per body b ≥ 1, fixed ones included.

    Raises
    ------
    ModelError, ShapeError
        As :class:`ChainModel`; also for a zero joint axis, and for a fixed body that is a
        beam or is welded to a beam link (its tip moves with η: not supported).
    """
    if any(t == FIXED for t in list(joint_type)[1:]):
        return _welded(names, parent, joint_type, X_PJ, axis_J, mass, p_BoBcm_B, I_Bcm_B, q_lower=q_lower,
                       q_upper=q_upper, qd_max=qd_max, tau_max=tau_max, joint_names=joint_names, beams=beams,
                       fixed_frames=fixed_frames)
    nb = len(names)
    n = nb - 1
    axes = np.array(axis_J, dtype=np.float64)
    if axes.shape != (nb, 3):
        raise ShapeError(f"axis_J: expected shape ({nb}, 3), got {axes.shape}")
    for b in range(1, nb):
        norm = float(np.linalg.norm(axes[b]))
        if not np.isfinite(norm) or norm < 1e-12:
            raise ModelError(f"body {names[b]!r}: joint axis {axes[b].tolist()} has zero length")
        axes[b] /= norm

    def lim(x: ArrayLike | None, fill: float, name: str) -> Array:
        if x is None:
            return np.full(n, fill)
        a = np.array(x, dtype=np.float64)
        if a.shape != (n,):
            raise ShapeError(f"{name}: expected shape ({n},), got {a.shape}")
        return a

    return ChainModel(
        names=tuple(names),
        parent=tuple(int(p) for p in parent),
        joint_type=tuple(joint_type),
        X_PJ=np.asarray(X_PJ, dtype=np.float64),
        axis_J=axes,
        mass=np.asarray(mass, dtype=np.float64),
        p_BoBcm_B=np.asarray(p_BoBcm_B, dtype=np.float64),
        I_Bcm_B=np.asarray(I_Bcm_B, dtype=np.float64),
        q_lower=lim(q_lower, -np.inf, "q_lower"),
        q_upper=lim(q_upper, np.inf, "q_upper"),
        qd_max=lim(qd_max, np.inf, "qd_max"),
        tau_max=lim(tau_max, np.inf, "tau_max"),
        joint_names=tuple(joint_names) if joint_names is not None else (),
        beams=tuple(beams) if beams is not None else (),
        fixed_frames=tuple(fixed_frames),
    )


MassProperties = tuple[float, Array, Array]


def merge_mass_properties(a: MassProperties, b: MassProperties) -> MassProperties:
    """Mass properties of two parts given in the same frame, each ``(m, CoM, inertia about its CoM)``.

    Returns ``(m₁ + m₂, c, I)``: c the joint CoM, I about c by the parallel-axis theorem. [kg, m, kg·m²]
    Two massless parts give mass 0, CoM 0 and the sum of their inertias.
    """
    m1, c1, I1 = a
    m2, c2, I2 = b
    m = m1 + m2
    if m <= 0.0:
        return 0.0, np.zeros(3), I1 + I2
    c = (m1 * c1 + m2 * c2) / m
    out = I1 + I2
    for mi, ci in ((m1, c1), (m2, c2)):
        d = ci - c
        out = out + mi * (float(d @ d) * np.eye(3) - np.outer(d, d))
    return m, c, out


def transform_mass_properties(props: MassProperties, X_AB: Array) -> MassProperties:
    """Mass properties ``(m, CoM, inertia about the CoM)`` given in frame B, re-expressed in frame A (``X_AB``)."""
    m, c, I = props
    R = X_AB[:3, :3]
    return m, X_AB[:3, 3] + R @ c, R @ I @ R.T


def _welded(names: Sequence[str], parent: Sequence[int], joint_type: Sequence[str], X_PJ: ArrayLike,
            axis_J: ArrayLike, mass: ArrayLike, p_BoBcm_B: ArrayLike, I_Bcm_B: ArrayLike, *,
            q_lower: ArrayLike | None, q_upper: ArrayLike | None, qd_max: ArrayLike | None,
            tau_max: ArrayLike | None, joint_names: Sequence[str] | None,
            beams: Sequence[BeamLink | None] | None, fixed_frames: Sequence[FixedFrame]) -> ChainModel:
    """:func:`chain_from_table` with the fixed bodies merged into their moving ancestors."""
    nb = len(names)
    X = np.asarray(X_PJ, dtype=np.float64)
    m_all, c_all, I_all = (np.asarray(x, dtype=np.float64) for x in (mass, p_BoBcm_B, I_Bcm_B))
    ax = np.asarray(axis_J, dtype=np.float64)
    for name, arr, shape in (("X_PJ", X, (nb, 4, 4)), ("axis_J", ax, (nb, 3)), ("mass", m_all, (nb,)),
                             ("p_BoBcm_B", c_all, (nb, 3)), ("I_Bcm_B", I_all, (nb, 3, 3))):
        if arr.shape != shape:
            raise ShapeError(f"{name}: expected shape {shape}, got {arr.shape}")
    if len(parent) != nb or len(joint_type) != nb:
        raise ModelError(f"parent/joint_type: lengths {len(parent)}/{len(joint_type)} != nb = {nb}")
    bk = list(beams) if beams else [None] * nb
    keep: list[int] = []
    anchor: dict[int, tuple[int, Array]] = {}   # body -> (kept body it moves with, its frame in that body)
    props: list[MassProperties] = []
    new_parent: list[int] = []
    new_X: list[Array] = []
    frames = list(fixed_frames)
    for b in range(nb):
        p = int(parent[b])
        if b and not 0 <= p < b:
            raise ModelError(f"body {names[b]!r}: parent index {p} must be in [0, {b})")
        if b == 0 or joint_type[b] != FIXED:
            if b:
                a, X_aP = anchor[p]
                new_parent.append(a)
                new_X.append(X_aP @ X[b])
            else:
                new_parent.append(-1)
                new_X.append(X[0])
            anchor[b] = (len(keep), np.eye(4))
            keep.append(b)
            props.append((float(m_all[b]), c_all[b], I_all[b]))
            continue
        a, X_aP = anchor[p]
        if bk[b] is not None or bk[keep[a]] is not None:
            raise ModelError(f"body {names[b]!r}: a fixed joint on or to a beam link is not supported")
        check_inertia(I_all[b], names[b])
        if not (np.isfinite(m_all[b]) and m_all[b] >= 0.0):
            raise ModelError(f"body {names[b]!r}: mass must be >= 0, got {m_all[b]} kg")
        X_aB = X_aP @ X[b]
        anchor[b] = (a, X_aB)
        props[a] = merge_mass_properties(props[a], transform_mass_properties(
            (float(m_all[b]), c_all[b], I_all[b]), X_aB))
        frames.append(FixedFrame(str(names[b]), a, X_aB))
    joints = [b - 1 for b in keep[1:]]

    def per_joint(x: ArrayLike | None) -> Array | None:
        return None if x is None else np.asarray(x, dtype=np.float64)[joints]

    I_new = np.array([pr[2] for pr in props])
    return chain_from_table(
        [names[b] for b in keep], new_parent, [joint_type[b] for b in keep], np.array(new_X), ax[keep],
        np.array([pr[0] for pr in props]), np.array([pr[1] for pr in props]),
        0.5 * (I_new + I_new.transpose(0, 2, 1)),
        q_lower=per_joint(q_lower), q_upper=per_joint(q_upper), qd_max=per_joint(qd_max), tau_max=per_joint(tau_max),
        joint_names=None if joint_names is None else [joint_names[j] for j in joints],
        beams=[bk[b] for b in keep] if beams else None, fixed_frames=frames)


def fixed_frame(model: ChainModel, name: str) -> FixedFrame:
    """The frame of the welded body ``name`` (:attr:`ChainModel.fixed_frames`): its pose in W is
    ``forward_kinematics(...)[f.body] @ f.X_BF``.

    Raises
    ------
    ModelError
        If no body of that name was welded (the welded names are listed).
    """
    for f in model.fixed_frames:
        if f.name == name:
            return f
    raise ModelError(f"fixed frame {name!r}: not a welded body (welded: {[f.name for f in model.fixed_frames]})")


def pose_xyz_rpy(xyz: ArrayLike, rpy: ArrayLike) -> Array:
    """Pose (4, 4) from a translation [m] and roll-pitch-yaw about fixed axes [rad].

    ``R = Rz(yaw) Ry(pitch) Rx(roll)`` (the URDF ``<origin>`` convention).
    """
    from scipy.spatial.transform import Rotation  # here, not at the top: importing it takes ~0.4 s

    R = Rotation.from_euler("xyz", sp.as_vector(rpy, 3, "rpy")).as_matrix()
    return sp.pose(R, sp.as_vector(xyz, 3, "xyz"))


def _inertia_from_row(val: object, where: str) -> Array:
    a = np.asarray(val, dtype=np.float64)
    if a.shape == (6,):  # [ixx, iyy, izz, ixy, ixz, iyz]
        ixx, iyy, izz, ixy, ixz, iyz = a
        return np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
    if a.shape == (3, 3):
        return a
    raise ConfigError(f"{where}.inertia: expected [ixx, iyy, izz, ixy, ixz, iyz] or 3x3, got shape {a.shape}")


def chain_from_rows(rows: Sequence[dict]) -> ChainModel:
    """Build a :class:`ChainModel` from a config table: one mapping per body, base first.

    Keys (TOML ``[[arm.body]]`` entries): ``name``; ``joint`` (``"free"`` or
    ``"fixed_base"`` for the first row, ``"revolute"``, ``"prismatic"`` or ``"fixed"`` after: a
    fixed body is merged, :func:`chain_from_table`);
    ``parent`` (a body name; default the previous row); ``xyz``, ``rpy`` (joint frame in
    the parent frame at zero joint value, or the fixed base pose in W) [m, rad];
    ``axis`` (joint axis in the joint frame); ``mass`` [kg]; ``com`` (CoM in the body
    frame) [m]; ``inertia`` about the CoM in the body frame, ``[ixx, iyy, izz, ixy, ixz,
    iyz]`` or 3×3 [kg·m²]; optional ``lower``, ``upper``, ``velocity``, ``effort`` limits.

    Raises
    ------
    ConfigError
        Listing every missing or malformed key (``problems``).
    ModelError
        On inadmissible physical data (as :class:`ChainModel`).
    """
    problems: list[str] = []
    names = [str(r.get("name", f"body{i}")) for i, r in enumerate(rows)]
    index = {n: i for i, n in enumerate(names)}
    if len(index) != len(names):
        problems.append(f"name: body names are not unique: {names}")
    nb = len(rows)
    parent, jt, axes = [-1] * nb, [""] * nb, np.zeros((nb, 3))
    X, mass = np.tile(np.eye(4), (nb, 1, 1)), np.zeros(nb)
    com, inertia = np.zeros((nb, 3)), np.zeros((nb, 3, 3))
    lim = {k: np.full(max(nb - 1, 0), np.inf) for k in ("upper", "velocity", "effort")}
    lim["lower"] = np.full(max(nb - 1, 0), -np.inf)
    for i, r in enumerate(rows):
        where = f"body[{i}] {names[i]!r}"
        welded = r.get("joint") == FIXED
        missing = [k for k in ("joint", "mass", "inertia") + (("axis",) if i and not welded else ()) if k not in r]
        problems += [f"{where}: missing key {k!r}" for k in missing]
        if missing:
            continue
        try:
            jt[i] = str(r["joint"])
            if i:
                p = r.get("parent", names[i - 1])
                if p not in index or index[p] >= i:
                    problems.append(f"{where}.parent: {p!r} is not an earlier body")
                    continue
                parent[i] = index[p]
                axes[i] = np.asarray(r.get("axis", (1.0, 0.0, 0.0)), dtype=np.float64)
                for k in lim:
                    if k in r:
                        lim[k][i - 1] = float(r[k])
            X[i] = pose_xyz_rpy(r.get("xyz", (0.0, 0.0, 0.0)), r.get("rpy", (0.0, 0.0, 0.0)))
            mass[i] = float(r["mass"])
            com[i] = sp.as_vector(r.get("com", (0.0, 0.0, 0.0)), 3, f"{where}.com")
            inertia[i] = _inertia_from_row(r["inertia"], where)
        except (TypeError, ValueError) as err:
            problems.append(f"{where}: {err}")
    if problems:
        raise ConfigError(f"chain table: {len(problems)} problem(s): {problems[0]}", problems)
    if jt and jt[0] == "free":
        X[0] = np.eye(4)
    return chain_from_table(names, parent, jt, X, axes, mass, com, inertia, q_lower=lim["lower"],
                            q_upper=lim["upper"], qd_max=lim["velocity"], tau_max=lim["effort"])


# --------------------------------------------------------------------------- state


def neutral(model: ChainModel) -> Array:
    """Neutral configuration: base at the W origin with identity attitude, θ = 0. Shape (nq,)."""
    q = np.zeros(model.nq)
    if model.floating:
        q[3] = 1.0
    return q


def _check_q(model: ChainModel, q: ArrayLike) -> Array:
    qa = sp.as_vector(q, model.nq, "q")
    if model.floating:
        w, x, y, z = qa[3:7].tolist()  # floats: ~0.5 µs against np.linalg.norm's ~3 µs (hot path)
        nrm = math.sqrt(w * w + x * x + y * y + z * z)
        if abs(nrm - 1.0) > 1e-6:
            raise ShapeError(f"q[3:7]: quat_WB must be unit norm, got norm {nrm} ({qa[3:7].tolist()})")
    return qa


def integrate(model: ChainModel, q: ArrayLike, v: ArrayLike, h: float) -> Array:
    """Configuration reached from ``q`` moving at constant ``v`` for ``h`` seconds.

    Base: ``p ← p + h v_WBo_W``, ``quat_WB ← exp(h ω_WB_W) ⊗ quat_WB`` (exact for
    constant ω in W and constant ``v_WBo_W``); joints: ``θ ← θ + h θ̇``.

    Parameters
    ----------
    q : array_like, shape (nq,)
    v : array_like, shape (nv,)
    h : float
        [s]

    Returns
    -------
    ndarray, shape (nq,)

    Raises
    ------
    ShapeError
        If ``q`` or ``v`` has the wrong shape or is not finite.
    """
    qa = _check_q(model, q)
    va = sp.as_vector(v, model.nv, "v")
    out = qa.copy()
    if model.floating:
        out[:3] += h * va[3:6]
        R = sp.quat_to_rotation(qa[3:7])
        out[3:7] = sp.quat_integrate(qa[3:7], R.T @ va[:3], h)
        out[7:] += h * va[6:]
    else:
        out += h * va
    return out


# --------------------------------------------------------------------------- kinematics


def _kinematics(model: ChainModel, data: ChainData, q: Array) -> None:
    """Fill data with poses, CoMs, motion subspace and spatial inertias at ``q`` (cached per q).

    Rigid chains by the compiled kernel (:func:`dynamics.chain_kernels.kinematics`), equal to
    :func:`_kinematics_numpy` to round-off; beam links by :mod:`dynamics.flexible`.
    """
    if model.flex is not None:
        _flex.kinematics(model, data, q)
        return
    key = q.tobytes()
    if data.q_key == key:
        return
    _ck().kinematics(model.floating, q, model.X_PJ, model.T_PB, model.rev_f, model.pri_f, model.parent_index,
                   model.axis_J, model.p_BoBcm_B, model.I_Bcm_B, model.mass, data.X_WB, data.com_W, data.p_ref,
                   data.S, data.I_ref)
    data.factor = None
    data.q_key = key


def _kinematics_numpy(model: ChainModel, data: ChainData, q: Array) -> None:
    """:func:`_kinematics` of a rigid chain with numpy (the reference; always recomputed)."""
    key = q.tobytes()
    nb = model.nb
    X = data.X_WB
    if model.floating:
        X[0, :3, :3] = sp.quat_to_rotation(q[3:7])
        X[0, :3, 3] = q[:3]
        th = q[7:]
    else:
        X[0] = model.X_PJ[0]
        th = q
    if nb > 1:
        # X_PB(θ) = X_PJ X_JB(θ) = T0 + sin θ T1 + (1 − cos θ) T2 (revolute, Rodrigues)
        #                       or T0 + θ T3 (prismatic): one contraction over precomputed T.
        coef = data.coef
        coef[:, 1] = np.sin(th) * model.rev_f
        coef[:, 2] = (1.0 - np.cos(th)) * model.rev_f
        coef[:, 3] = th * model.pri_f
        X_PB = np.einsum("nk,nkij->nij", coef, model.T_PB)
        parent = model.parent
        for b in range(1, nb):
            np.matmul(X[parent[b]], X_PB[b - 1], out=X[b])
    R = data.R_WB
    p = data.p_WoBo_W
    com = p + (R @ model.p_BoBcm_B[:, :, None])[:, :, 0]
    data.com_W[:] = com
    p_ref = p[0]
    data.p_ref[:] = p_ref
    # Motion subspace at Bo, in W.
    if nb > 1:
        a_W = np.einsum("bij,bj->bi", R[1:], model.axis_J[1:])
        r = p[1:] - p_ref
        rev = model.revolute[1:, None]
        cols = slice(6 if model.floating else 0, None)
        data.S[:3, cols] = np.where(rev, a_W, 0.0).T
        data.S[3:, cols] = np.where(rev.T, _cross_cols(r.T, a_W.T), a_W.T)
    # Body spatial inertias at Bo, in W.
    m3 = model.mass[:, None, None]
    cx = sp.skew_rows(com - p_ref)
    mcx = m3 * cx
    I_ref = data.I_ref
    I_ref[:, :3, :3] = R @ model.I_Bcm_B @ R.transpose(0, 2, 1) - mcx @ cx
    I_ref[:, :3, 3:] = mcx
    I_ref[:, 3:, :3] = -mcx  # lower-right block m·E is constant, set in ChainData
    data.factor = None
    data.q_key = key


def forward_kinematics(model: ChainModel, data: ChainData, q: ArrayLike) -> Array:
    """Poses of all bodies in W.

    Parameters
    ----------
    q : array_like, shape (nq,)

    Returns
    -------
    X_WB : ndarray, shape (nb, 4, 4)
        Pose of each body frame in W: a read-only view of ``data.X_WB``, overwritten by the
        next call on ``data`` (copy to keep).

    Raises
    ------
    ShapeError
        If ``q`` has the wrong shape, is not finite, or its quaternion is not unit.
    """
    _kinematics(model, data, _check_q(model, q))
    return _view(data.X_WB)


def _check_body(model: ChainModel, body: int) -> int:
    if not isinstance(body, (int, np.integer)) or not 0 <= int(body) < model.nb:
        raise ShapeError(f"body: index must be in [0, {model.nb}), got {body!r}")
    return int(body)


def frame_jacobian(
    model: ChainModel, data: ChainData, q: ArrayLike, body: int, p_BoPo_B: ArrayLike = (0.0, 0.0, 0.0)
) -> Array:
    """Jacobian of the spatial velocity of a point P fixed in a body.

    ``V_WP_W = J @ v`` with ``V_WP_W = [ω_WB_W; v_WPo_W]`` (ω of the body, linear
    velocity of the point P, both in W).

    Parameters
    ----------
    q : array_like, shape (nq,)
    body : int
        Body index b the point is fixed in.
    p_BoPo_B : array_like, shape (3,)
        Point P from the body origin, in the body frame. [m]

    Returns
    -------
    J : ndarray, shape (6, nv)

    Raises
    ------
    ShapeError
        On a bad index or shapes.
    """
    b = _check_body(model, body)
    pP = sp.as_vector(p_BoPo_B, 3, "p_BoPo_B")
    qa = _check_q(model, q)
    _kinematics(model, data, qa)
    if model.flex is not None:
        return _flex.frame_jacobian(model, data, qa, b, pP)
    r = data.p_WoBo_W[b] + data.R_WB[b] @ pP - data.p_ref
    J = np.where(model.body_anc_v[b][None, :], data.S, 0.0)
    J[3:] -= sp.skew(r) @ J[:3]  # v_P = v + ω × r
    return J


# --------------------------------------------------------------------------- mass matrix


def _composite(model: ChainModel, data: ChainData) -> Array:
    """Composite-body spatial inertias at Bo (MBDYN seed 004 eq. 17 with r_s = identity)."""
    Ic = data.I_ref.copy()
    if model.serial:
        return np.cumsum(Ic[::-1], axis=0)[::-1]
    for b in range(model.nb - 1, 0, -1):
        Ic[model.parent[b]] += Ic[b]
    return Ic


def mass_matrix(model: ChainModel, data: ChainData, q: ArrayLike) -> Array:
    """System mass matrix by one recursive pass over the bodies.

    The composite inertia of each body and its descendants is accumulated from the
    tip inward (MBDYN seed 004 eq. 17, ``M*_n = M_n + r_s M*_s r_s^T``; here every
    inertia is referred to the base origin in W, so ``r_s`` is the identity), and
    ``M[k, l] = P_k^T M*_{body(k)} P_l`` for l on the path to the base (eqs. 19, 21).

    Parameters
    ----------
    q : array_like, shape (nq,)

    Returns
    -------
    M : ndarray, shape (nv, nv)
        Symmetric positive definite, in the coordinates of ``v`` (module docstring);
        a read-only view of ``data.M``, overwritten by the next call on ``data`` (copy to
        keep). [kg, kg·m, kg·m²]

    Raises
    ------
    ShapeError
        If ``q`` has the wrong shape.
    """
    _kinematics(model, data, _check_q(model, q))
    if model.flex is not None:
        return _view(_flex.mass_matrix(model, data))
    _ck().mass_matrix(model.floating, model.parent_index, data.S, data.I_ref, data.M)
    return _view(data.M)


def mass_matrix_numpy(model: ChainModel, data: ChainData, q: ArrayLike) -> Array:
    """:func:`mass_matrix` of a rigid chain by numpy operations: the reference the compiled kernel
    (:mod:`dynamics.chain_kernels`) is tested equal to, and the bench's A/B. Kinematics recomputed.

    Raises
    ------
    ShapeError
        If ``q`` has the wrong shape.
    ModelError
        If the chain has beam links.
    """
    _no_beams(model, "mass_matrix_numpy")
    _kinematics_numpy(model, data, _check_q(model, q))
    Ic = _composite(model, data)
    S = data.S
    F = np.einsum("kij,jk->ik", Ic[model.body_of_v], S)  # (6, nv): M*_{body(k)} P_k
    FtS = F.T @ S
    A = model.anc_v
    M = np.where(A, FtS, np.where(A.T, FtS.T, 0.0))
    data.M[:] = M
    return _view(data.M)


def _no_beams(model: ChainModel, what: str) -> None:
    if model.flex is not None:
        raise ModelError(f"{what}: the numpy reference is for rigid chains (this one has beam links)")


# --------------------------------------------------------------------------- velocities, forces


def _body_twists(model: ChainModel, data: ChainData, v: Array) -> tuple[Array, Array]:
    """Spatial velocities at Bo in W of all bodies (6, nb), and the columns S·v (6, nv)."""
    Sv = data.S * v[None, :]
    return Sv @ model.body_anc_v.T, Sv


def _check_F_ext(model: ChainModel, F_ext: ArrayLike) -> Array:
    F = np.asarray(F_ext, dtype=np.float64)
    if F.shape != (model.nb, 6):
        raise ShapeError(f"F_ext: expected shape ({model.nb}, 6), got {F.shape}")
    if not np.all(np.isfinite(F)):
        raise ShapeError(f"F_ext: not finite: {F.tolist()}")
    return F


def generalized_forces(model: ChainModel, data: ChainData, q: ArrayLike, F_ext: ArrayLike) -> Array:
    """Generalized force ``Σ_b J_b^T F_b`` of wrenches applied to the bodies.

    Parameters
    ----------
    q : array_like, shape (nq,)
    F_ext : array_like, shape (nb, 6)
        ``F_Bo_W`` per body: wrench [τ; f] on body b about its frame origin, in W. [N·m, N]

    Returns
    -------
    ndarray, shape (nv,)

    Raises
    ------
    ShapeError
        On wrong shapes or non-finite values.
    """
    _kinematics(model, data, _check_q(model, q))
    return _gen_forces(model, data, _check_F_ext(model, F_ext))


def _gen_forces(model: ChainModel, data: ChainData, F: Array) -> Array:
    if model.flex is not None:
        return _flex.gen_forces(model, data, F)
    out = np.empty(model.nv)
    _ck().gen_forces(model.floating, model.parent_index, data.S, data.X_WB, data.p_ref, np.ascontiguousarray(F), out)
    return out


def _gen_forces_numpy(model: ChainModel, data: ChainData, F: Array) -> Array:
    r = data.p_WoBo_W - data.p_ref
    W = np.empty((6, model.nb))
    W[:3] = F[:, :3].T + _cross_cols(r.T, F[:, 3:].T)  # shifted to Bo
    W[3:] = F[:, 3:].T
    Wsub = W @ model.anc_b  # (6, nb): sum over each body's subtree
    return np.einsum("ik,ik->k", data.S, Wsub[:, model.body_of_v])


def _accelerations(model: ChainModel, data: ChainData, v: Array,
                   vdot: Array | None = None) -> tuple[Array, Array, Array]:
    """Body twists V (6, nb), spatial accelerations a (6, nb) at the fixed point coinciding with Bo, in W,
    and the spatial cross-product matrices (nb, 6, 6) of V (rigid chains)."""
    V, Sv = _body_twists(model, data, v)
    # Spatial cross-product matrices crm(V_b) = [[ω̃, 0], [ṽ, ω̃]] of every body, (nb, 6, 6).
    wx = sp.skew_rows(V[:3].T)
    X = np.zeros((model.nb, 6, 6))
    X[:, :3, :3] = wx
    X[:, 3:, 3:] = wx
    X[:, 3:, :3] = sp.skew_rows(V[3:].T)
    c = np.einsum("kij,jk->ik", X[model.body_of_v], Sv)  # V_body(k) × S_k v_k; zero for the base
    if vdot is not None:
        c += data.S * vdot[None, :]
    a = c @ model.body_anc_v.T  # (6, nb)
    if model.floating:
        a[3:] -= _cross_cols(v[:3, None], v[3:6, None])  # spatial vs classical base acceleration
    return V, a, X


def _rnea_bias(model: ChainModel, data: ChainData, v: Array, vdot: Array | None = None) -> Array:
    """C(q, v) v (+ M v̇ if given) by Newton–Euler at the fixed point coinciding with Bo (zero gravity)."""
    if model.flex is not None:
        return _flex.rnea(model, data, v, vdot)
    out = np.empty(model.nv)
    _ck().rnea(model.floating, model.parent_index, data.S, data.I_ref, v, v if vdot is None else vdot,
             vdot is not None, out)
    return out


def _rnea_bias_numpy(model: ChainModel, data: ChainData, v: Array, vdot: Array | None = None) -> Array:
    """:func:`_rnea_bias` of a rigid chain with numpy (the reference)."""
    V, a, X = _accelerations(model, data, v, vdot)
    I = data.I_ref
    h = np.einsum("bij,jb->ib", I, V)  # momenta
    f = np.einsum("bij,jb->ib", I, a) - np.einsum("bji,jb->ib", X, h)  # I a + V ×* I V
    fsub = f @ model.anc_b
    return np.einsum("ik,ik->k", data.S, fsub[:, model.body_of_v])


def frame_acceleration(model: ChainModel, data: ChainData, q: ArrayLike, v: ArrayLike, vdot: ArrayLike, body: int,
                       p_BoPo_B: ArrayLike = (0.0, 0.0, 0.0)) -> Array:
    """Classical acceleration of a point P fixed in a body, ``[ω̇_WB_W; a_WPo_W]``.

    ``d/dt (J v) = J v̇ + J̇ v`` for the Jacobian of :func:`frame_jacobian`; with ``v̇ = 0``
    it is the velocity-product term ``J̇ v`` that closed-chain constraints need (MBDYN,
    seed 004 eq. 24's σ_C).

    Parameters
    ----------
    q : array_like, shape (nq,)
    v, vdot : array_like, shape (nv,)
        ``v̇`` as in :func:`forward_dynamics` (classical base acceleration).
    body : int
        A rigid body (not a beam link).
    p_BoPo_B : array_like, shape (3,)
        P from the body origin, in the body frame. [m]

    Returns
    -------
    A_WP_W : ndarray, shape (6,)
        [rad/s², m/s²]

    Raises
    ------
    ShapeError
        On wrong shapes or a bad index.
    ModelError
        If the body is a beam link.
    """
    b = _check_body(model, body)
    pP = sp.as_vector(p_BoPo_B, 3, "p_BoPo_B")
    _kinematics(model, data, _check_q(model, q))
    va = sp.as_vector(v, model.nv, "v")
    vda = sp.as_vector(vdot, model.nv, "vdot")
    if model.flex is not None:
        if model.beams[b] is not None:
            raise ModelError(f"frame_acceleration: body {model.names[b]!r} is a beam link "
                             "(points on rigid bodies only)")
        V, a = _flex.accelerations(model, data, va, vda)
    else:
        V, a, _ = _accelerations(model, data, va, vda)
    r = data.p_WoBo_W[b] + data.R_WB[b] @ pP - data.p_ref
    w, vO = V[:3, b], V[3:, b]
    aP = a[3:, b] + sp.cross3(a[:3, b], r) + sp.cross3(w, vO + sp.cross3(w, r))
    return np.concatenate([a[:3, b], aP])


def bias_forces(model: ChainModel, data: ChainData, q: ArrayLike, v: ArrayLike) -> Array:
    """Coriolis and centrifugal generalized forces ``C(q, v) v`` (zero gravity).

    ``M(q) v̇ + C(q, v) v = τ + Σ J_b^T F_b`` with v̇ as in the module docstring.
    Newton–Euler over the bodies with spatial vectors at the base origin.

    Parameters
    ----------
    q : array_like, shape (nq,)
    v : array_like, shape (nv,)

    Returns
    -------
    ndarray, shape (nv,)
        [N·m, N]

    Raises
    ------
    ShapeError
        On wrong shapes or non-finite values.
    """
    _kinematics(model, data, _check_q(model, q))
    return _rnea_bias(model, data, sp.as_vector(v, model.nv, "v"))


def inverse_dynamics(
    model: ChainModel,
    data: ChainData,
    q: ArrayLike,
    v: ArrayLike,
    vdot: ArrayLike,
    F_ext: ArrayLike | None = None,
) -> Array:
    """Generalized forces for given accelerations, ``τ = M v̇ + C v − Σ J_bᵀ F_b`` (Newton–Euler).

    With beam links the strain and damping forces ``K η + D η̇`` are included, so the
    elastic rows are the modal forces the accelerations need (zero when they came from
    :func:`forward_dynamics` with zero elastic τ).

    For a free base the first six entries are the wrench [τ; f] about ``Bo`` in W that
    must act on the base (zero for a free-floating system whose v̇ came from
    :func:`forward_dynamics`); the rest are the joint torques/forces.

    Parameters
    ----------
    q : array_like, shape (nq,)
    v : array_like, shape (nv,)
    vdot : array_like, shape (nv,)
        ``[ω̇_WB_W, a_WBo_W, θ̈]`` (classical base acceleration).
    F_ext : array_like, shape (nb, 6), optional
        ``F_Bo_W`` per body.

    Returns
    -------
    tau : ndarray, shape (nv,)
        [N·m, N]

    Raises
    ------
    ShapeError
        On wrong shapes or non-finite values.
    """
    qa = _check_q(model, q)
    _kinematics(model, data, qa)
    va = sp.as_vector(v, model.nv, "v")
    tau = _rnea_bias(model, data, va, sp.as_vector(vdot, model.nv, "vdot"))
    if model.flex is not None:
        tau = tau + _flex.elastic_forces(model, qa, va)
    if F_ext is not None:
        tau = tau - _gen_forces(model, data, _check_F_ext(model, F_ext))
    return tau


def momentum(model: ChainModel, data: ChainData, q: ArrayLike, v: ArrayLike) -> tuple[Array, Array]:
    """Total linear and angular momentum (Yoshida seed 000 eqs. 1–2).

    Parameters
    ----------
    q : array_like, shape (nq,)
    v : array_like, shape (nv,)

    Returns
    -------
    P_W : ndarray, shape (3,)
        Linear momentum in W. [kg·m/s]
    L_Wo_W : ndarray, shape (3,)
        Angular momentum about the W origin, in W. [kg·m²/s] (About the total CoM G:
        ``L_G = L_Wo − p_WoG × P``, with G from :func:`center_of_mass`.)

    Raises
    ------
    ShapeError
        On wrong shapes or non-finite values.
    """
    _kinematics(model, data, _check_q(model, q))
    va = sp.as_vector(v, model.nv, "v")
    if model.flex is not None:
        return _flex.momentum(model, data, va)
    V, _ = _body_twists(model, data, va)
    h = np.einsum("bij,jb->i", data.I_ref, V)
    P = h[3:].copy()
    L = h[:3] + np.cross(data.p_ref, P)
    return P, L


def center_of_mass(model: ChainModel, data: ChainData, q: ArrayLike) -> Array:
    """Total CoM ``p_WoG_W`` (3,) of the moving bodies [m] (a ground-based arm's base excluded)."""
    _kinematics(model, data, _check_q(model, q))
    if model.flex is not None:
        return _flex.center_of_mass(model, data)
    if model.floating:
        return (model.mass @ data.com_W) / model.mass.sum()
    return (model.mass[1:] @ data.com_W[1:]) / model.mass[1:].sum()


def kinetic_energy(model: ChainModel, data: ChainData, q: ArrayLike, v: ArrayLike) -> float:
    """Kinetic energy ``½ Σ V_bᵀ I_b V_b`` [J] (with beam links: their elastic motion too)."""
    _kinematics(model, data, _check_q(model, q))
    va = sp.as_vector(v, model.nv, "v")
    if model.flex is not None:
        return _flex.kinetic_energy(model, data, va)
    V, _ = _body_twists(model, data, va)
    return 0.5 * float(np.einsum("ib,bij,jb->", V, data.I_ref, V))


# --------------------------------------------------------------------------- dynamics


def _rhs(model: ChainModel, data: ChainData, v: Array, tau: ArrayLike, F_ext: ArrayLike | None,
         bias: bool = True) -> Array:
    ta = sp.as_vector(tau, model.nv, "tau")
    phi = ta - _rnea_bias(model, data, v) if bias else ta
    if F_ext is not None:
        phi = phi + _gen_forces(model, data, _check_F_ext(model, F_ext))
    return phi


def forward_dynamics(
    model: ChainModel,
    data: ChainData,
    q: ArrayLike,
    v: ArrayLike,
    tau: ArrayLike,
    F_ext: ArrayLike | None = None,
) -> Array:
    """Generalized accelerations by Saha's UDU^T decomposition, O(n) (seed 001).

    Solves ``M v̇ = τ − C(q, v) v + Σ J_bᵀ F_b`` with the recursive factorization and
    the three recursive substitutions of :mod:`dynamics.udu` (seed 001 eqs. 13–19), in one
    compiled kernel (:func:`dynamics.chain_kernels.forward_dynamics`; the numpy reference is
    :func:`forward_dynamics_numpy`).
    With beam links: ``M v̇ = τ − C v − K η − D η̇ + Σ J_bᵀ F_b`` by a dense Cholesky
    factorization of M (:mod:`dynamics.flexible`).

    Parameters
    ----------
    q : array_like, shape (nq,)
    v : array_like, shape (nv,)
    tau : array_like, shape (nv,)
        Generalized forces: for a free base the first six are a wrench [τ; f] on the
        base about ``Bo`` in W (zero for a free-floating system), then the joint
        torques/forces. [N·m, N]
    F_ext : array_like, shape (nb, 6), optional
        ``F_Bo_W`` per body: wrench [τ; f] on body b about its origin, in W.

    Returns
    -------
    vdot : ndarray, shape (nv,)
        ``[ω̇_WB_W, a_WBo_W, θ̈]``: a read-only view of ``data.vdot``, overwritten by the
        next call on ``data`` (copy to keep). [rad/s², m/s², ...]

    Raises
    ------
    ShapeError
        On wrong shapes or non-finite values.
    SingularityError
        If an articulated inertia is not positive definite.
    """
    qa = _check_q(model, q)
    _kinematics(model, data, qa)
    va = sp.as_vector(v, model.nv, "v")
    if model.flex is not None:
        return _view(_flex.forward_dynamics(model, data, qa, va, _rhs(model, data, va, tau, F_ext, bias=False)))
    ta = sp.as_vector(tau, model.nv, "tau")
    F = _NO_F_EXT if F_ext is None else np.ascontiguousarray(_check_F_ext(model, F_ext))
    status = _ck().forward_dynamics(model.floating, model.parent_index, data.S, data.I_ref, data.X_WB, data.p_ref,
                                  va, ta, F, F_ext is not None, data.vdot)
    if status != 0:  # the numpy factorization names the body and the pivot
        udu.saha_factor(model.parent, model.v_index, data.S, data.I_ref, model.floating, model.names)
        raise SingularityError(f"body {model.names[status]!r}: articulated pivot is not positive" if status > 0
                               else "articulated inertia of the base: not positive definite")
    return _view(data.vdot)


def forward_dynamics_numpy(
    model: ChainModel,
    data: ChainData,
    q: ArrayLike,
    v: ArrayLike,
    tau: ArrayLike,
    F_ext: ArrayLike | None = None,
) -> Array:
    """:func:`forward_dynamics` of a rigid chain by numpy operations (:mod:`dynamics.udu`'s recursions):
    the reference the compiled kernel (:mod:`dynamics.chain_kernels`) is tested equal to, and the
    bench's A/B. Kinematics are recomputed (not taken from the cache).

    Returns
    -------
    vdot : ndarray, shape (nv,)
        A read-only view of ``data.vdot``, as :func:`forward_dynamics`.

    Raises
    ------
    ShapeError
        On wrong shapes or non-finite values.
    SingularityError
        If an articulated inertia is not positive definite.
    ModelError
        If the chain has beam links.
    """
    _no_beams(model, "forward_dynamics_numpy")
    qa = _check_q(model, q)
    _kinematics_numpy(model, data, qa)
    va = sp.as_vector(v, model.nv, "v")
    phi = sp.as_vector(tau, model.nv, "tau") - _rnea_bias_numpy(model, data, va)
    if F_ext is not None:
        phi = phi + _gen_forces_numpy(model, data, _check_F_ext(model, F_ext))
    factor = udu.saha_factor(model.parent, model.v_index, data.S, data.I_ref, model.floating, model.names)
    data.vdot[:] = udu.saha_solve(factor, model.parent, model.v_index, data.S, phi)
    return _view(data.vdot)


def mass_matrix_udu(model: ChainModel, data: ChainData, q: ArrayLike) -> tuple[Array, Array]:
    """Saha's factors of the mass matrix, ``M = U diag(d) Uᵀ`` (seed 001 eqs. 9–13, 24–27).

    Computed by the O(n) recursion of :func:`dynamics.udu.saha_factor` (the free base's
    6×6 block by the dense reverse elimination) and filled into explicit matrices.

    Returns
    -------
    U : ndarray, shape (nv, nv)
        Unit upper triangular, in the coordinates of ``v``.
    d : ndarray, shape (nv,)
        Positive diagonal of D.

    Raises
    ------
    SingularityError
        If an articulated pivot is not positive.
    """
    _kinematics(model, data, _check_q(model, q))
    if model.flex is not None:  # beam links: the dense reverse elimination of M
        return udu.udu_decompose(mass_matrix(model, data, q), "M")
    if data.factor is None:
        data.factor = udu.saha_factor(model.parent, model.v_index, data.S, data.I_ref, model.floating, model.names)
    return udu.saha_udu(data.factor, model.parent, model.v_index, data.S)


def forward_dynamics_dense(
    model: ChainModel,
    data: ChainData,
    q: ArrayLike,
    v: ArrayLike,
    tau: ArrayLike,
    F_ext: ArrayLike | None = None,
) -> Array:
    """As :func:`forward_dynamics`, by a dense Cholesky solve of ``M`` (scipy), for checking.

    Raises
    ------
    ShapeError
        On wrong shapes or non-finite values.
    SingularityError
        If ``M`` is not positive definite.
    """
    qa = _check_q(model, q)
    _kinematics(model, data, qa)
    va = sp.as_vector(v, model.nv, "v")
    phi = _rhs(model, data, va, tau, F_ext)
    if model.flex is not None:
        phi = phi - _flex.elastic_forces(model, qa, va)
    M = mass_matrix(model, data, q)
    return udu.spd_solve(M, phi, "M")


def step_rk4(
    model: ChainModel,
    data: ChainData,
    q: ArrayLike,
    v: ArrayLike,
    tau: ArrayLike,
    h: float,
    F_ext: ArrayLike | None = None,
) -> tuple[Array, Array]:
    """One classical Runge–Kutta step of h seconds with τ and F_ext held over the step.

    Runge–Kutta–Munthe-Kaas on the base attitude (rotation vector ξ about the start
    attitude, ``ξ̇ = dexp⁻¹_ξ(ω_WB_W)``), plain RK4 on positions, joints and v: fourth
    order in h. Fit for co-simulation steps (inputs held constant over the step).

    Parameters
    ----------
    q : array_like, shape (nq,)
    v : array_like, shape (nv,)
    tau : array_like, shape (nv,)
    h : float
        [s]
    F_ext : array_like, shape (nb, 6), optional

    Returns
    -------
    q_next : ndarray, shape (nq,)
    v_next : ndarray, shape (nv,)
    """
    return step_rk4_with(model, q, v, h,
                         lambda qq, vv: forward_dynamics(model, data, qq, vv, tau, F_ext).copy())


def step_rk4_with(model: ChainModel, q: ArrayLike, v: ArrayLike, h: float,
                  accel: Callable[[Array, Array], Array]) -> tuple[Array, Array]:
    """:func:`step_rk4` with any acceleration function ``accel(q, v) -> v̇`` (nv,) (e.g. a closed chain's).

    Raises
    ------
    ShapeError
        If ``q`` or ``v`` has the wrong shape.
    """
    q0 = _check_q(model, q).copy()
    v0 = sp.as_vector(v, model.nv, "v").copy()
    nv = model.nv

    def config(dx: Array) -> Array:
        # dx: (nv,) local coordinates: [ξ (3), Δp (3), Δθ (n)] for a free base.
        if not model.floating:
            return q0 + dx
        out = q0.copy()
        out[:3] += dx[3:6]
        R0 = sp.quat_to_rotation(q0[3:7])
        out[3:7] = sp.quat_integrate(q0[3:7], R0.T @ dx[:3], 1.0)
        out[7:] += dx[6:]
        return out

    def dx_dot(dx: Array, vel: Array) -> Array:
        if not model.floating:
            return vel
        out = vel.copy()
        out[:3] = sp.dexp_inv(-dx[:3], vel[:3])  # inverse left Jacobian: world-frame rate
        return out

    x1 = np.zeros(nv)
    k1x, k1v = dx_dot(x1, v0), accel(config(x1), v0)
    x2, v2 = 0.5 * h * k1x, v0 + 0.5 * h * k1v
    k2x, k2v = dx_dot(x2, v2), accel(config(x2), v2)
    x3, v3 = 0.5 * h * k2x, v0 + 0.5 * h * k2v
    k3x, k3v = dx_dot(x3, v3), accel(config(x3), v3)
    x4, v4 = h * k3x, v0 + h * k3v
    k4x, k4v = dx_dot(x4, v4), accel(config(x4), v4)
    dx = h / 6.0 * (k1x + 2 * k2x + 2 * k3x + k4x)
    vn = v0 + h / 6.0 * (k1v + 2 * k2v + 2 * k3v + k4v)
    return config(dx), vn


@dataclass(frozen=True)
class Trajectory:
    """Samples of a simulated chain.

    Attributes
    ----------
    t : ndarray, shape (k,)
        [s]
    q : ndarray, shape (k, nq)
        Configurations (base quaternions renormalized).
    v : ndarray, shape (k, nv)
    n_rhs : int
        Number of forward-dynamics evaluations.
    """

    t: Array
    q: Array
    v: Array
    n_rhs: int


def simulate(
    model: ChainModel,
    data: ChainData,
    q0: ArrayLike,
    v0: ArrayLike,
    t_eval: ArrayLike,
    tau: ArrayLike | Callable[[float, Array, Array], Array] | None = None,
    F_ext: ArrayLike | None = None,
    *,
    rtol: float = 1e-10,
    atol: float = 1e-12,
    max_step: float = np.inf,
    locked: Sequence[int] = (),
) -> Trajectory:
    """Integrate the chain with scipy's adaptive 8th-order Dormand–Prince (DOP853).

    The state is ``[q, v]``; the base quaternion follows ``q̇ = ½ [0; ω_WB_W] ⊗ q`` and
    is renormalized whenever the dynamics are evaluated (its drift is of the order of
    ``rtol``). For accurate reference runs (conservation checks, the seeds' worked
    examples); co-simulation steps use :func:`step_rk4`.

    Parameters
    ----------
    q0 : array_like, shape (nq,)
    v0 : array_like, shape (nv,)
    t_eval : array_like, shape (k,)
        Increasing sample times, the first the start. [s]
    tau : array_like (nv,), or callable ``tau(t, q, v) -> (nv,)``, optional
        Generalized forces (zero if None).
    F_ext : array_like, shape (nb, 6), optional
        ``F_Bo_W`` per body, held.
    rtol, atol : float
        Tolerances of the error control.
    max_step : float
        Largest step. [s]
    locked : sequence of int
        Coordinates of v whose rates are held (zero acceleration: a servo or brake
        supplies whatever generalized force that takes, as ``locked`` in
        :mod:`dynamics.impact`).

    Returns
    -------
    Trajectory

    Raises
    ------
    ShapeError
        On wrong shapes.
    SingularityError
        If the integration fails (its message is passed on).
    """
    from scipy.integrate import solve_ivp  # here: importing it takes ~0.2 s

    qa = _check_q(model, q0).copy()
    va = sp.as_vector(v0, model.nv, "v0").copy()
    ts = np.asarray(t_eval, dtype=np.float64)
    if ts.ndim != 1 or ts.size < 1 or np.any(np.diff(ts) <= 0.0):
        raise ShapeError(f"t_eval: expected increasing sample times, got shape {ts.shape}")
    nq, nv = model.nq, model.nv
    zero = np.zeros(nv)
    tau_const = zero if tau is None or callable(tau) else np.asarray(tau, dtype=np.float64)
    count = [0]
    lk = sorted({int(k) for k in locked})
    if any(not 0 <= k < nv for k in lk):
        raise ShapeError(f"locked: indices must lie in [0, {nv}), got {list(locked)}")
    free = np.setdiff1d(np.arange(nv), lk)

    def accel(q: Array, v: Array, u: Array) -> Array:
        if not lk:
            return forward_dynamics(model, data, q, v, u, F_ext)
        phi = u - inverse_dynamics(model, data, q, v, zero, F_ext)
        out = np.zeros(nv)
        out[free] = udu.spd_solve(mass_matrix(model, data, q)[np.ix_(free, free)], phi[free], "M (free rows)")
        return out

    def rhs(t: float, y: Array) -> Array:
        q = y[:nq].copy()
        v = y[nq:]
        if model.floating:
            q[3:7] /= np.linalg.norm(q[3:7])
        u = tau(t, q, v) if callable(tau) else tau_const
        vd = accel(q, v, u)
        count[0] += 1
        dq = np.empty(nq)
        if model.floating:
            dq[:3] = v[3:6]
            dq[3:7] = 0.5 * sp.quat_multiply(np.concatenate([[0.0], v[:3]]), q[3:7])
            dq[7:] = v[6:]
        else:
            dq[:] = v
        return np.concatenate([dq, vd])

    sol = solve_ivp(rhs, (float(ts[0]), float(ts[-1])), np.concatenate([qa, va]), method="DOP853",
                    t_eval=ts, rtol=rtol, atol=atol, max_step=max_step)
    if sol.status != 0:
        t_fail = sol.t[-1] if sol.t.size else ts[0]
        raise SingularityError(f"simulate: integration failed at t = {t_fail} s: {sol.message}")
    Q = sol.y[:nq].T.copy()
    if model.floating:
        Q[:, 3:7] /= np.linalg.norm(Q[:, 3:7], axis=1)[:, None]
    return Trajectory(sol.t.copy(), Q, sol.y[nq:].T.copy(), count[0])


# --------------------------------------------------------------------------- flexible links


def with_beams(model: ChainModel, beams: Mapping[int | str, BeamLink], *,
               keep_rigid_inertia: bool = False) -> ChainModel:
    """The same chain with some bodies made assumed-mode beam links (:mod:`dynamics.beam`).

    Parameters
    ----------
    model : ChainModel
    beams : mapping of body index or name to BeamLink
        Each beam lies along its body's x axis from the body origin; the children of the
        body hang on its tip (their ``X_PJ`` as given for the undeformed beam).
    keep_rigid_inertia : bool
        False (default): the beam carries the body's mass (its table mass, CoM and
        inertia are set to zero). True: the table inertia stays, a rigid part added to
        the beam's.

    Returns
    -------
    ChainModel
        q and v gain the beams' elastic coordinates at their end.

    Raises
    ------
    ModelError
        On an unknown body, the base, or an inadmissible beam.
    """
    nb = model.nb
    index = {name: i for i, name in enumerate(model.names)}
    out: list[BeamLink | None] = list(model.beams) if model.beams else [None] * nb
    mass = np.array(model.mass)
    com = np.array(model.p_BoBcm_B)
    inertia = np.array(model.I_Bcm_B)
    for key, bk in beams.items():
        b = index.get(key, -1) if isinstance(key, str) else int(key)
        if not 0 <= b < nb:
            raise ModelError(f"beams: no body {key!r} in the chain (bodies {list(model.names)})")
        out[b] = bk
        if not keep_rigid_inertia and b > 0:
            mass[b], com[b], inertia[b] = 0.0, 0.0, 0.0
    return replace(model, beams=tuple(out), mass=mass, p_BoBcm_B=com, I_Bcm_B=inertia)


def elastic_forces(model: ChainModel, q: ArrayLike, v: ArrayLike) -> Array:
    """Stiffness and structural damping forces of the beam links, ``[0; K η + D η̇]``.

    ``M v̇ + C(q, v) v + K η + D η̇ = τ + Σ J_bᵀ F_b`` (Quiocho et al., seed 004 eqs. 14–16).

    Parameters
    ----------
    q : array_like, shape (nq,)
    v : array_like, shape (nv,)

    Returns
    -------
    ndarray, shape (nv,)
        Zero for the base and joints (and for a rigid chain). [N, N·m per unit η]

    Raises
    ------
    ShapeError
        On wrong shapes or non-finite values.
    """
    return _flex.elastic_forces(model, _check_q(model, q), sp.as_vector(v, model.nv, "v"))


def potential_energy(model: ChainModel, q: ArrayLike) -> float:
    """Strain energy ``½ ηᵀ K η`` of the beam links [J]; 0 for a rigid chain (no gravity in orbit)."""
    return _flex.potential_energy(model, _check_q(model, q))


def tip_deflection(model: ChainModel, q: ArrayLike, body: int) -> tuple[Array, Array]:
    """Tip displacement ``u_B`` (3,) [m] and tip angles ``(ψ_x, ψ_y, ψ_z)`` (3,) [rad] of a beam body, in its frame.

    Raises
    ------
    ShapeError
        On a bad index or shape.
    ModelError
        If the body is not a beam.
    """
    return _flex.tip_deflection(model, _check_q(model, q), _check_body(model, body))


def beam_points(model: ChainModel, data: ChainData, q: ArrayLike, body: int, x: ArrayLike) -> Array:
    """Deformed neutral axis of a beam body at stations x (m,) [m], as points ``p_WoPo_W`` (m, 3) [m].

    Raises
    ------
    ShapeError
        On a bad index or shape.
    ModelError
        If the body is not a beam.
    """
    qa = _check_q(model, q)
    b = _check_body(model, body)
    _kinematics(model, data, qa)
    return _flex.beam_points(model, data, qa, b, np.asarray(x, dtype=np.float64))


# --------------------------------------------------------------------------- deprecated names

if not TYPE_CHECKING:  # the checker sees no alias: the project itself uses the new names

    def __getattr__(name: str) -> Any:
        """Deprecated aliases (PEP 562): ``chain_from_urdf`` moved to :func:`dynamics.urdf.chain_from_urdf` (0.2.0)."""
        if name == "chain_from_urdf":  # urdf builds on chain: looked up when asked, no import cycle
            import importlib

            from dynamics import _deprecated

            _deprecated("dynamics.chain.chain_from_urdf", "dynamics.urdf.chain_from_urdf")
            return importlib.import_module("dynamics.urdf").chain_from_urdf
        raise AttributeError(f"module 'dynamics.chain' has no attribute {name!r}")
