"""Static loads at the nine stations (SVDS section 4): equilibrium and the joint torques."""

from __future__ import annotations

import numpy as np
import pytest

from dynamics import loads as ld
from dynamics import rms
from dynamics import spatial as sp
from dynamics.cases import reference_path
from dynamics.urdf import chain_from_urdf
from errors import ShapeError

FIXED = chain_from_urdf(reference_path("SRMS_Canadarm.urdf"), floating_base=False)
X_OS = sp.pose(sp.quat_to_rotation(sp.quat_normalize([0.8, -0.1, 0.3, 0.2])), [10.7, -2.7, -1.7])
GEOM = rms.rms_geometry(FIXED, X_OS)


def setup(seed):
    rng = np.random.default_rng(seed)
    th = rng.uniform(np.maximum(GEOM.q_lower, -2.5), np.minimum(GEOM.q_upper, 2.5))
    pose = rms.rms_kinematics(GEOM, th)
    pts = np.vstack([pose.p_OoJo_O, pose.X_OE[:3, 3]])
    F = rng.normal(size=6) * np.array([200, 200, 200, 50, 50, 50])
    return pose, pts, F, ld.static_loads(pts, pose.X_OB[:, :3, :3], F)


def in_O(pose, pts, loads, k):
    """Station k's load in O, about the point of resolution."""
    R = pose.X_OB[ld.STATION_LINK[k], :3, :3]
    P = sp.rotate_spatial(R, loads[k])
    return sp.shift_wrench(P, pts[6] - pts[ld.STATION_POINT[k]])


@pytest.mark.parametrize("seed", range(5))
def test_every_member_in_equilibrium_and_joints_action_reaction(seed):
    pose, pts, F, loads = setup(seed)
    P = [in_O(pose, pts, loads, k) for k in range(9)]
    scale = np.abs(P).max()
    for a, b in ((1, 2), (3, 4), (5, 6), (7, 8)):          # members: upper arm, lower arm, wrist, hand
        np.testing.assert_allclose(P[a] + P[b], 0.0, atol=1e-12 * scale)
    for a, b in ((0, 1), (2, 3), (4, 5), (6, 7)):          # the two sides of each joint
        np.testing.assert_allclose(P[a] + P[b], 0.0, atol=1e-12 * scale)
    np.testing.assert_allclose(P[8], -F, atol=1e-12 * scale)   # the payload's reaction on the hand


@pytest.mark.parametrize("seed", range(5))
def test_moments_about_the_joint_axes_are_the_joint_torques(seed):
    """u_i · M at the joint = (Jᵀ F_e)_i: the loads and the App. A Jacobian agree."""
    pose, pts, F, loads = setup(seed)
    tau = rms.rms_jacobian(pose).T @ F
    for k, joint in ((1, 1), (3, 2), (5, 3), (7, 4)):       # inboard ends: shoulder pitch, elbow, wrist pitch/yaw
        M_O = pose.X_OB[ld.STATION_LINK[k], :3, :3] @ loads[k, :3]
        assert pose.u_O[joint] @ M_O == pytest.approx(tau[joint], rel=1e-10, abs=1e-9)


def test_bad_shapes_refused():
    with pytest.raises(ShapeError):
        ld.static_loads(np.zeros((6, 3)), np.zeros((7, 3, 3)), np.zeros(6))
    with pytest.raises(ShapeError):
        ld.static_loads(np.zeros((7, 3)), np.zeros((7, 3, 3)), [np.nan] * 6)
