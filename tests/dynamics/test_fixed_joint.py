"""Fixed joints: a body welded to its parent is merged for the algorithms.

References: the same chain with the welded inertia merged by hand here (6×6 spatial inertias
summed in the parent frame, not the chain's parallel-axis helper), and Pinocchio's URDF reader
(it merges fixed joints too: appendBodyToJoint) for the mass matrix and forward dynamics.
"""

import numpy as np
import pinocchio as pin
import pytest
from conftest import base_T, pin_from_urdf, pin_q, pin_vdot_to_ours, random_chain, random_state, rel_err, sym_upper

from dynamics import chain as ch
from dynamics import modal
from dynamics import spatial as sp
from errors import ModelError


def spatial_inertia(m, c, I):
    """6×6 spatial inertia about the frame origin, [ω; v] order: [[I_c + m c̃ c̃ᵀ, m c̃], [m c̃ᵀ, m 1]]."""
    C = sp.skew(c)
    return np.block([[I + m * C @ C.T, m * C], [m * C.T, m * np.eye(3)]])


def shift(X_AB, G_B):
    """A spatial inertia given about B's origin in B, moved to A: Ad_X_BAᵀ G Ad_X_BA."""
    R, p = X_AB[:3, :3], X_AB[:3, 3]
    Ad = np.block([[R, np.zeros((3, 3))], [sp.skew(p) @ R, R]])   # twist B -> A, [ω; v]
    Ai = np.linalg.inv(Ad)
    return Ai.T @ G_B @ Ai


def mass_props(G):
    """(m, c, I_c) back from a spatial inertia about the frame origin."""
    m = G[3, 3]
    C = G[:3, 3:] / m
    c = np.array([C[2, 1], C[0, 2], C[1, 0]])
    return m, c, G[:3, :3] - m * C @ C.T


def welded_and_merged(rng, floating):
    """A random 4-joint chain with two welded bodies inserted (one mid-chain with a moving child, one at the tip),
    and the same chain with their inertias merged by hand."""
    base = random_chain(rng, 4, floating=floating, prismatic=True)
    nb = base.nb
    X = list(base.X_PJ)
    mass, com, inertia = list(base.mass), list(base.p_BoBcm_B), list(base.I_Bcm_B)
    names, parent, jt, ax = list(base.names), list(base.parent), list(base.joint_type), list(base.axis_J)
    # weld W2 onto body 2; body 3 now hangs on W2; weld TIP onto the last body
    Xw = sp.pose(sp.quat_to_rotation(sp.quat_normalize(rng.normal(size=4))), rng.uniform(-0.5, 0.5, 3))
    Xt = sp.pose(sp.quat_to_rotation(sp.quat_normalize(rng.normal(size=4))), rng.uniform(-0.5, 0.5, 3))
    Iw = np.diag(rng.uniform(0.1, 1.0, 3))
    It = np.zeros((3, 3))                                   # a point mass at the tip (singular on its own joint)
    mw, cw, mt, ct = 3.0, rng.uniform(-0.3, 0.3, 3), 50.0, rng.uniform(-0.3, 0.3, 3)
    order = [0, 1, 2, "W2", 3, 4, "TIP"]
    rows = []
    for b in order:
        if b == "W2":
            rows.append(("W2", 2, "fixed", Xw, [0.0, 0.0, 1.0], mw, cw, Iw))
        elif b == "TIP":
            rows.append(("TIP", nb - 1, "fixed", Xt, [0.0, 0.0, 1.0], mt, ct, It))
        else:
            rows.append((names[b], parent[b], jt[b], X[b], ax[b], mass[b], com[b], inertia[b]))
    idx = {r[0]: i for i, r in enumerate(rows)}
    par = [-1] + [idx[names[p]] if isinstance(p, int) and p >= 0 else -1 for p in [r[1] for r in rows[1:]]]
    par[idx[names[3]]] = idx["W2"]                          # body 3 hangs on W2, at X_W2,3 = Xw⁻¹ X_2,3
    Xs = [r[3] for r in rows]
    Xs[idx[names[3]]] = sp.pose_inverse(Xw) @ X[3]
    lim = np.arange(len(rows) - 1, dtype=float) + 10.0
    welded = ch.chain_from_table([r[0] for r in rows], par, [r[2] for r in rows], np.array(Xs),
                                 np.array([r[4] for r in rows]), [r[5] for r in rows], np.array([r[6] for r in rows]),
                                 np.array([r[7] for r in rows]), tau_max=lim)
    # by hand: spatial inertias summed in the parent frame
    G2 = spatial_inertia(mass[2], com[2], inertia[2]) + shift(Xw, spatial_inertia(mw, cw, Iw))
    Gt = spatial_inertia(mass[nb - 1], com[nb - 1], inertia[nb - 1]) + shift(Xt, spatial_inertia(mt, ct, It))
    for b, G in ((2, G2), (nb - 1, Gt)):
        mass[b], com[b], inertia[b] = mass_props(G)
    merged = ch.chain_from_table(names, parent, jt, np.array(X), np.array(ax), mass, np.array(com),
                                 np.array(inertia))
    return welded, merged, lim


@pytest.mark.parametrize("floating", [True, False])
def test_welded_bodies_equal_their_inertia_merged_by_hand(rng, floating):
    welded, merged, lim = welded_and_merged(rng, floating)
    assert welded.names == merged.names and welded.nv == merged.nv
    assert [f.name for f in welded.fixed_frames] == ["W2", "TIP"]
    assert welded.tau_max.tolist() == [lim[0], lim[1], lim[3], lim[4]]     # the welded rows' entries dropped
    for name in ("X_PJ", "mass", "p_BoBcm_B", "I_Bcm_B"):
        assert rel_err(getattr(welded, name), getattr(merged, name)) < 1e-12, name
    dw, dm = ch.make_data(welded), ch.make_data(merged)
    for _ in range(3):
        q, v = random_state(rng, welded)
        tau = rng.normal(size=welded.nv)
        assert rel_err(ch.mass_matrix(welded, dw, q), ch.mass_matrix(merged, dm, q)) < 1e-12
        assert rel_err(ch.forward_dynamics(welded, dw, q, v, tau), ch.forward_dynamics(merged, dm, q, v, tau)) < 1e-10
        f = ch.fixed_frame(welded, "TIP")
        X_tip = ch.forward_kinematics(welded, dw, q)[f.body] @ f.X_BF
        assert f.body == welded.nb - 1
        assert np.allclose(X_tip[:3, :3].T @ X_tip[:3, :3], np.eye(3))


URDF = """<robot name="welded">
  <link name="base"><inertial><origin xyz="0.1 -0.2 0.05" rpy="0 0 0"/><mass value="400"/>
    <inertia ixx="60" iyy="80" izz="70" ixy="2" ixz="-1" iyz="3"/></inertial></link>
  <link name="l1"><inertial><origin xyz="0.5 0 0" rpy="0.1 0 0"/><mass value="20"/>
    <inertia ixx="0.5" iyy="4" izz="4.2" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <link name="plate"><inertial><origin xyz="0.05 0.02 0" rpy="0 0.3 0"/><mass value="6"/>
    <inertia ixx="0.3" iyy="0.2" izz="0.4" ixy="0.01" ixz="0" iyz="0"/></inertial></link>
  <link name="l2"><inertial><origin xyz="0.4 0.01 0" rpy="0 0 0"/><mass value="12"/>
    <inertia ixx="0.2" iyy="1.5" izz="1.6" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <link name="tool"><inertial><origin xyz="0.1 0 0.2" rpy="0 0 0"/><mass value="1000"/>
    <inertia ixx="0" iyy="0" izz="0" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <link name="camera"><inertial><origin xyz="0.02 0 0.01" rpy="0 0 0.7"/><mass value="5"/>
    <inertia ixx="0.05" iyy="0.06" izz="0.07" ixy="0" ixz="0.01" iyz="0"/></inertial></link>
  <joint name="j1" type="revolute"><parent link="base"/><child link="l1"/><origin xyz="0.3 0 0.2" rpy="0 0.2 0"/>
    <axis xyz="0 0 1"/><limit lower="-3" upper="3" effort="100" velocity="1"/></joint>
  <joint name="weld" type="fixed"><parent link="l1"/><child link="plate"/><origin xyz="1.0 0 0" rpy="0.3 -0.1 0.5"/>
  </joint>
  <joint name="j2" type="revolute"><parent link="plate"/><child link="l2"/><origin xyz="0.1 0.05 0" rpy="0 0 0.4"/>
    <axis xyz="0 1 0"/><limit lower="-3" upper="3" effort="100" velocity="1"/></joint>
  <joint name="grasp" type="fixed"><parent link="l2"/><child link="tool"/><origin xyz="0.8 0 0" rpy="0 1.0 0"/>
  </joint>
  <joint name="mount" type="fixed"><parent link="tool"/><child link="camera"/><origin xyz="0 0.2 0.1" rpy="0.2 0 0"/>
  </joint>
</robot>"""


def rows_of_urdf():
    """The same robot as config rows (chain_from_rows), fixed joints included: not through our URDF reader."""
    I = {"base": [60, 80, 70, 2, -1, 3], "l1": [0.5, 4, 4.2, 0, 0, 0], "plate": [0.3, 0.2, 0.4, 0.01, 0, 0],
         "l2": [0.2, 1.5, 1.6, 0, 0, 0], "tool": [0, 0, 0, 0, 0, 0], "camera": [0.05, 0.06, 0.07, 0, 0.01, 0]}

    def inertial(name, xyz, rpy, m):
        R = ch.pose_xyz_rpy(xyz, rpy)[:3, :3]
        a = I[name]
        Ic = np.array([[a[0], a[3], a[4]], [a[3], a[1], a[5]], [a[4], a[5], a[2]]], dtype=float)
        return {"name": name, "mass": m, "com": list(xyz), "inertia": (R @ Ic @ R.T).tolist()}

    return [
        {**inertial("base", [0.1, -0.2, 0.05], [0, 0, 0], 400.0), "joint": "free"},
        {**inertial("l1", [0.5, 0, 0], [0.1, 0, 0], 20.0), "joint": "revolute", "parent": "base",
         "xyz": [0.3, 0, 0.2], "rpy": [0, 0.2, 0], "axis": [0, 0, 1]},
        {**inertial("plate", [0.05, 0.02, 0], [0, 0.3, 0], 6.0), "joint": "fixed", "parent": "l1",
         "xyz": [1.0, 0, 0], "rpy": [0.3, -0.1, 0.5]},
        {**inertial("l2", [0.4, 0.01, 0], [0, 0, 0], 12.0), "joint": "revolute", "parent": "plate",
         "xyz": [0.1, 0.05, 0], "rpy": [0, 0, 0.4], "axis": [0, 1, 0]},
        {**inertial("tool", [0.1, 0, 0.2], [0, 0, 0], 1000.0), "joint": "fixed", "parent": "l2",
         "xyz": [0.8, 0, 0], "rpy": [0, 1.0, 0]},
        {**inertial("camera", [0.02, 0, 0.01], [0, 0, 0.7], 5.0), "joint": "fixed", "parent": "tool",
         "xyz": [0, 0.2, 0.1], "rpy": [0.2, 0, 0]},
    ]


def test_fixed_joints_match_pinocchio_mass_matrix_and_forward_dynamics(rng, tmp_path):
    """Config rows with fixed joints vs Pinocchio's URDF reader on the same robot: M and v̇ to 1e-9; a 1000 kg
    point mass welded at the tip (a camera welded to it) leaves M regular; the welded frames are Pinocchio's."""
    path = tmp_path / "welded.urdf"
    path.write_text(URDF)
    model = ch.chain_from_rows(rows_of_urdf())
    assert model.names == ("base", "l1", "l2") and model.n == 2
    pm = pin_from_urdf(path)
    pd = pm.createData()
    data = ch.make_data(model)
    for _ in range(3):
        q, v = random_state(rng, model, scale=0.5)
        qp = pin_q(pm, model, q)
        T = base_T(model, q)
        Ti = np.linalg.inv(T)
        assert rel_err(ch.mass_matrix(model, data, q), Ti.T @ sym_upper(pin.crba(pm, pd, qp)) @ Ti) <= 1e-9
        tau = rng.normal(size=model.nv) * 10.0
        a = ch.forward_dynamics(model, data, q, v, tau)
        a_pin = pin_vdot_to_ours(model, q, v, pin.aba(pm, pd, qp, Ti @ v, T.T @ tau))
        assert rel_err(a, a_pin) <= 1e-9
        pin.framesForwardKinematics(pm, pd, qp)
        for name in ("plate", "tool", "camera"):                    # camera: welded to a welded body
            f = ch.fixed_frame(model, name)
            X_F = ch.forward_kinematics(model, data, q)[f.body] @ f.X_BF
            assert np.abs(X_F - pd.oMf[pm.getFrameId(name)].homogeneous).max() < 1e-12, name
    assert np.linalg.eigvalsh(ch.mass_matrix(model, data, q)).min() > 0.0
    # the modes of the welded arm with joint springs are those of Pinocchio's M (the tool as a fixed body)
    md = modal.modes(model, q, joint_stiffness=[1e4, 2e4], lock_base=True)
    M_pin = (Ti.T @ sym_upper(pin.crba(pm, pd, qp)) @ Ti)[6:, 6:]
    lam = np.sort(np.linalg.eigvals(np.linalg.solve(M_pin, np.diag([1e4, 2e4]))).real)
    assert rel_err(md.omega, np.sqrt(lam)) < 1e-9


def test_a_fixed_joint_is_refused_where_it_cannot_be_merged():
    model = ch.chain_from_rows(rows_of_urdf())
    with pytest.raises(ModelError, match="'nozzle'"):
        ch.fixed_frame(model, "nozzle")
    from dataclasses import replace

    with pytest.raises(ModelError, match="merged by chain_from_table"):
        replace(model, joint_type=("free", "fixed", "revolute"))
    rows = rows_of_urdf()
    rows[4]["inertia"] = [1.0, -1.0, 1.0, 0.0, 0.0, 0.0]     # a negative principal moment
    with pytest.raises(ModelError, match="'tool'"):
        ch.chain_from_rows(rows)
