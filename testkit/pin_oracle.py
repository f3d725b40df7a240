"""Pinocchio as an independent oracle for the chain dynamics: models built from the same data, and
the conversions between its conventions and ours.

Needs the ``pin`` package (the ``test`` extra). Used by the tests of :mod:`dynamics` and by
``bench/bench_dynamics.py``.

Conventions (``dynamics/data/README.md``, *Independent engines*): Pinocchio's free-flyer q is
[xyz, quat x,y,z,w], its v is [v, ω] of the base origin in the *base body* frame, and
its acceleration is spatial (add ω×v for the classical one). Ours: q = [xyz, quat
w,x,y,z, θ], v = [ω_W, v_Bo_W, θ̇], v̇ classical. Gravity is zeroed.
"""

from __future__ import annotations

import os

import numpy as np
import pinocchio as pin
from numpy.typing import ArrayLike

from dynamics import chain as ch
from dynamics import spatial as sp
from errors import ModelError

__all__ = ["base_T", "pin_from_chain", "pin_from_urdf", "pin_point_jacobian", "pin_q", "pin_vdot_to_ours",
           "swap_wv", "sym_upper"]


def pin_from_chain(model: ch.ChainModel) -> pin.Model:
    """Build a Pinocchio model from the same table (independent kinematics and dynamics)."""
    pm = pin.Model()
    pm.gravity = pin.Motion.Zero()
    jid = [0] * model.nb

    def inertia(b: int) -> pin.Inertia:
        return pin.Inertia(float(model.mass[b]), np.array(model.p_BoBcm_B[b]), np.array(model.I_Bcm_B[b]))

    if model.floating:
        jid[0] = pm.addJoint(0, pin.JointModelFreeFlyer(), pin.SE3.Identity(), "base")
        pm.appendBodyToJoint(jid[0], inertia(0), pin.SE3.Identity())
    for b in range(1, model.nb):
        p = model.parent[b]
        X = np.array(model.X_PJ[b])
        if p == 0 and not model.floating:
            X = np.array(model.X_PJ[0]) @ X
        a = np.array(model.axis_J[b])
        if model.joint_type[b] == "revolute":
            jm = pin.JointModelRevoluteUnaligned(a)
        else:
            jm = pin.JointModelPrismaticUnaligned(a)
        jid[b] = pm.addJoint(jid[p], jm, pin.SE3(X[:3, :3], X[:3, 3]), model.names[b])
        pm.appendBodyToJoint(jid[b], inertia(b), pin.SE3.Identity())
    return pm


def sym_upper(A: ArrayLike) -> np.ndarray:
    """Pinocchio fills only the upper triangle of M (crba) and M⁻¹ (computeMinverse): symmetrize."""
    A = np.asarray(A)
    return np.triu(A) + np.triu(A, 1).T


def pin_q(pm: pin.Model, model: ch.ChainModel, q: np.ndarray) -> np.ndarray:
    """Our q → Pinocchio's q (quaternion order; cos/sin for continuous joints)."""
    out = []
    off = 0
    if model.floating:
        w, x, y, z = q[3:7]
        out += list(q[:3]) + [x, y, z, w]
        off = 7
    th = q[off:]
    j = 0
    for jm in pm.joints[1:]:
        if jm.shortname() == "JointModelFreeFlyer":
            continue
        if jm.nq == 2:
            out += [np.cos(th[j]), np.sin(th[j])]
        else:
            out.append(th[j])
        j += 1
    return np.array(out)


def base_T(model: ch.ChainModel, q: np.ndarray) -> np.ndarray:
    """T with v_ours = T @ v_pin: blockdiag([[0, R], [R, 0]], I)."""
    T = np.eye(model.nv)
    if model.floating:
        R = sp.quat_to_rotation(q[3:7])
        T[:6, :6] = 0.0
        T[:3, 3:6] = R
        T[3:6, :3] = R
    return T


def pin_vdot_to_ours(model: ch.ChainModel, q: np.ndarray, v: np.ndarray, a_pin: np.ndarray) -> np.ndarray:
    """Pinocchio's (spatial, body-frame) base acceleration → ours (classical, W)."""
    out = np.array(a_pin, dtype=float)
    if model.floating:
        R = sp.quat_to_rotation(q[3:7])
        w_B = R.T @ v[:3]
        v_B = R.T @ v[3:6]
        out[:3] = R @ a_pin[3:6]
        out[3:6] = R @ (a_pin[:3] + np.cross(w_B, v_B))
    return out


def pin_from_urdf(path: str | os.PathLike[str], *, base_mass: float | None = None, base_com: ArrayLike | None = None,
                  base_inertia: ArrayLike | None = None) -> pin.Model:
    """Pinocchio's own URDF reader on the file, the root link's inertial replaced as given."""
    import xml.etree.ElementTree as ET

    def child(el: ET.Element, tag: str) -> ET.Element:
        found = el.find(tag)
        if found is None:
            raise ModelError(f"{path}: <{el.tag} name={el.get('name')!r}> has no <{tag}>")
        return found

    root = ET.parse(path).getroot()
    child_links = {child(j, "child").get("link") for j in root.findall("joint")}
    base = next(lk for lk in root.findall("link") if lk.get("name") not in child_links)
    inert = child(base, "inertial")
    if base_mass is not None:
        child(inert, "mass").set("value", repr(float(base_mass)))
    if base_com is not None:
        child(inert, "origin").set("xyz", " ".join(repr(float(x)) for x in np.asarray(base_com).tolist()))
        child(inert, "origin").set("rpy", "0 0 0")
    if base_inertia is not None:
        I = np.asarray(base_inertia, dtype=float)
        el = child(inert, "inertia")
        for k, (i, j) in {"ixx": (0, 0), "ixy": (0, 1), "ixz": (0, 2), "iyy": (1, 1), "iyz": (1, 2),
                          "izz": (2, 2)}.items():
            el.set(k, repr(float(I[i, j])))
    pm = pin.buildModelFromXML(ET.tostring(root, encoding="unicode"), pin.JointModelFreeFlyer())
    pm.gravity = pin.Motion.Zero()
    return pm


def swap_wv() -> np.ndarray:
    """P with [ω; v] = P @ [v; ω] (its own inverse)."""
    P = np.zeros((6, 6))
    P[:3, 3:] = np.eye(3)
    P[3:, :3] = np.eye(3)
    return P


def pin_point_jacobian(pm: pin.Model, pd: pin.Data, model: ch.ChainModel, q: np.ndarray, joint_id: int,
                       p_JoPo_J: ArrayLike) -> np.ndarray:
    """Pinocchio's Jacobian of a point on a joint's body, in OUR coordinates and [ω; v] order.

    Requires pin.computeJointJacobians / forwardKinematics to have been run at q.
    """
    Jp = pin.getJointJacobian(pm, pd, joint_id, pin.ReferenceFrame.LOCAL_WORLD_ALIGNED)  # [v_o; ω]
    R = pd.oMi[joint_id].rotation
    r = R @ np.asarray(p_JoPo_J, dtype=float)
    Jp = np.array(Jp).reshape(6, -1)
    Jp[:3] += -sp.skew(r) @ Jp[3:]
    Jp = Jp[:, : pm.nv]
    T = base_T(model, q)
    return swap_wv() @ Jp @ np.linalg.inv(T)
