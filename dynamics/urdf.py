"""URDF → :class:`dynamics.chain.ChainModel` (``xml.etree``; no I/O beyond reading the file).

Supported: links with ``<inertial>``; joints ``revolute``, ``continuous`` (revolute
without limits), ``prismatic`` and ``fixed``. Fixed joints are merged: the child's mass
properties are added to the body it is welded to, and joints below it are re-attached
with the composed placement. Bodies are numbered depth-first from the root link (body
0); a moving body's frame is its URDF link frame; a merged link's frame is kept in
:attr:`dynamics.chain.ChainModel.fixed_frames` (:func:`dynamics.chain.fixed_frame`).
``floating`` and ``planar`` joints, and links reached twice, are refused.

URDF conventions: ``<origin xyz rpy>`` gives the child frame in the parent link frame
with ``R = Rz(yaw) Ry(pitch) Rx(roll)``; ``<inertial><origin>`` gives the CoM frame in
the link frame, the inertia tensor being about the CoM in that frame.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from os import PathLike

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dynamics.chain import ChainModel, FixedFrame, chain_from_table, pose_xyz_rpy
from dynamics.chain import merge_mass_properties as _merge
from dynamics.chain import transform_mass_properties as _transform
from errors import ModelError

__all__ = ["chain_from_urdf", "chain_from_urdf_string"]

Array = NDArray[np.float64]


def _floats(text: str | None, n: int, default: tuple[float, ...], what: str) -> Array:
    if text is None:
        return np.array(default, dtype=np.float64)
    try:
        vals = np.array([float(t) for t in text.split()], dtype=np.float64)
    except ValueError as err:
        raise ModelError(f"{what}: cannot read numbers from {text!r}") from err
    if vals.shape != (n,):
        raise ModelError(f"{what}: expected {n} numbers, got {text!r}")
    return vals


def _origin(elem: ET.Element | None, what: str) -> Array:
    if elem is None:
        return np.eye(4)
    xyz = _floats(elem.get("xyz"), 3, (0.0, 0.0, 0.0), f"{what} origin xyz")
    rpy = _floats(elem.get("rpy"), 3, (0.0, 0.0, 0.0), f"{what} origin rpy")
    return pose_xyz_rpy(xyz, rpy)


def _inertial(link: ET.Element) -> tuple[float, Array, Array]:
    """(mass, p_BoBcm_B, I_Bcm_B) of a URDF link; zeros if it has no <inertial>."""
    name = link.get("name")
    inert = link.find("inertial")
    if inert is None:
        return 0.0, np.zeros(3), np.zeros((3, 3))
    X = _origin(inert.find("origin"), f"link {name!r} inertial")
    m_el = inert.find("mass")
    m = float(m_el.get("value", "0")) if m_el is not None else 0.0
    i_el = inert.find("inertia")
    I = np.zeros((3, 3))
    if i_el is not None:
        g = {k: float(i_el.get(k, "0")) for k in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")}
        I = np.array(
            [[g["ixx"], g["ixy"], g["ixz"]], [g["ixy"], g["iyy"], g["iyz"]], [g["ixz"], g["iyz"], g["izz"]]]
        )
    R = X[:3, :3]
    return m, X[:3, 3].copy(), R @ I @ R.T


def chain_from_urdf_string(
    text: str,
    *,
    floating_base: bool = True,
    base_mass: float | None = None,
    base_inertia: ArrayLike | None = None,
    base_com: ArrayLike | None = None,
    X_WBase: ArrayLike | None = None,
    source: str = "<string>",
) -> ChainModel:
    """As :func:`chain_from_urdf`, from URDF text."""
    try:
        root = ET.fromstring(text)
    except ET.ParseError as err:
        raise ModelError(f"{source}: not well-formed XML ({err})") from err
    links: dict[str, ET.Element] = {}
    for el in root.findall("link"):
        lname = el.get("name")
        if lname is None:
            raise ModelError(f"{source}: a <link> has no name")
        links[lname] = el
    joints = root.findall("joint")
    children: dict[str, list[tuple[ET.Element, str]]] = {name: [] for name in links}  # (joint, child link)
    child_links = set()
    for j in joints:
        jname = j.get("name")
        p_el, c_el = j.find("parent"), j.find("child")
        if p_el is None or c_el is None:
            raise ModelError(f"{source}: joint {jname!r} lacks <parent> or <child>")
        p, c = p_el.get("link"), c_el.get("link")
        if p is None or c is None or p not in links or c not in links:
            raise ModelError(f"{source}: joint {jname!r} connects unknown links {p!r} -> {c!r}")
        if c in child_links:
            raise ModelError(f"{source}: link {c!r} is the child of more than one joint")
        child_links.add(c)
        children[p].append((j, c))
    roots = [name for name in links if name not in child_links]
    if len(roots) != 1:
        raise ModelError(f"{source}: expected one root link, found {roots}")

    names: list[str] = []
    parent: list[int] = []
    jtype: list[str] = []
    X_PJ: list[Array] = []
    axes: list[Array] = []
    props: list[tuple[float, Array, Array]] = []
    lower: list[float] = []
    upper: list[float] = []
    vel: list[float] = []
    eff: list[float] = []
    jnames: list[str] = []
    frames: list[FixedFrame] = []

    root_name = roots[0]
    base_props = _inertial(links[root_name])
    if base_mass is not None or base_inertia is not None or base_com is not None:
        m0, c0, I0 = base_props
        base_props = (
            float(base_mass) if base_mass is not None else m0,
            np.asarray(base_com, dtype=np.float64) if base_com is not None else c0,
            np.asarray(base_inertia, dtype=np.float64) if base_inertia is not None else I0,
        )
    names.append(root_name)
    parent.append(-1)
    jtype.append("free" if floating_base else "fixed_base")
    X_PJ.append(np.eye(4) if X_WBase is None or floating_base else np.asarray(X_WBase, dtype=np.float64))
    axes.append(np.zeros(3))
    props.append(base_props)

    # Depth-first walk; ``anchor`` is (body index, pose of this link in that body frame).
    stack: list[tuple[str, int, Array]] = [(root_name, 0, np.eye(4))]
    visited = {root_name}
    while stack:
        link, body, X_BL = stack.pop()
        for j, child in reversed(children[link]):
            jname = j.get("name", "")
            typ = j.get("type")
            if child in visited:
                raise ModelError(f"{source}: link {child!r} reached twice (closed loop)")
            visited.add(child)
            X_LJ = _origin(j.find("origin"), f"joint {jname!r}")
            if typ == "fixed":
                X_BC = X_BL @ X_LJ
                props[body] = _merge(props[body], _transform(_inertial(links[child]), X_BC))
                frames.append(FixedFrame(child, body, X_BC))
                stack.append((child, body, X_BC))
                continue
            if typ not in ("revolute", "continuous", "prismatic"):
                raise ModelError(f"{source}: joint {jname!r} has unsupported type {typ!r}")
            axis_el = j.find("axis")
            ax = _floats(axis_el.get("xyz") if axis_el is not None else None, 3, (1.0, 0.0, 0.0),
                         f"joint {jname!r} axis")
            lim = j.find("limit")
            lo, hi, v_max, t_max = -np.inf, np.inf, np.inf, np.inf
            if lim is not None:
                if typ != "continuous":
                    lo = float(lim.get("lower", "-inf"))
                    hi = float(lim.get("upper", "inf"))
                v_max = float(lim.get("velocity", "inf"))
                t_max = float(lim.get("effort", "inf"))
            names.append(child)
            parent.append(body)
            jtype.append("prismatic" if typ == "prismatic" else "revolute")
            X_PJ.append(X_BL @ X_LJ)
            axes.append(ax)
            props.append(_inertial(links[child]))
            lower.append(lo)
            upper.append(hi)
            vel.append(v_max)
            eff.append(t_max)
            jnames.append(jname)
            stack.append((child, len(names) - 1, np.eye(4)))

    for b, (m, _, _) in enumerate(props):
        if not m > 0.0 and not (b == 0 and not floating_base):
            raise ModelError(f"{source}: body {names[b]!r}: mass must be positive, got {m} kg")
    return chain_from_table(
        names,
        parent,
        jtype,
        np.array(X_PJ),
        np.array(axes),
        np.array([p[0] for p in props]),
        np.array([p[1] for p in props]),
        np.array([p[2] for p in props]),
        q_lower=lower,
        q_upper=upper,
        qd_max=vel,
        tau_max=eff,
        joint_names=jnames,
        fixed_frames=frames,
    )


def chain_from_urdf(
    path: str | PathLike[str],
    *,
    floating_base: bool = True,
    base_mass: float | None = None,
    base_inertia: ArrayLike | None = None,
    base_com: ArrayLike | None = None,
    X_WBase: ArrayLike | None = None,
) -> ChainModel:
    """Read a URDF serial chain (or tree) into a :class:`ChainModel`.

    Parameters
    ----------
    path : path-like
        URDF file.
    floating_base : bool
        ``True``: body 0 is free (``q`` has a base pose); ``False``: ground-based arm.
    base_mass : float, optional
        Replaces the root link's own mass (e.g. the orbiter under an SRMS). [kg]
    base_inertia : array_like, shape (3, 3), optional
        Replaces the root link's inertia about its CoM, in the root link frame. [kg·m²]
    base_com : array_like, shape (3,), optional
        Replaces the root link's CoM, in the root link frame. [m]
    X_WBase : array_like, shape (4, 4), optional
        Pose of a fixed base in W (ground-based only; default identity).

    Returns
    -------
    ChainModel
        Body 0 frame = the root link frame; links welded by fixed joints are merged.

    Raises
    ------
    ModelError
        On unreadable XML, unsupported joints, topology errors, or inadmissible mass
        properties (the link and value are named).
    OSError
        If the file cannot be read.
    """
    with open(path, encoding="utf-8") as f:
        text = f.read()
    return chain_from_urdf_string(
        text,
        floating_base=floating_base,
        base_mass=base_mass,
        base_inertia=base_inertia,
        base_com=base_com,
        X_WBase=X_WBase,
        source=str(path),
    )
