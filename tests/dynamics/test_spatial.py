"""dynamics.spatial against scipy's Rotation (an independent implementation) and identities."""

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from dynamics import spatial as sp
from errors import ShapeError

rng = np.random.default_rng(7)


def _random_quat():
    return sp.quat_normalize(rng.normal(size=4))


def test_rotation_matches_scipy():
    for _ in range(50):
        q = _random_quat()
        R_ref = Rotation.from_quat([q[1], q[2], q[3], q[0]]).as_matrix()
        np.testing.assert_allclose(sp.quat_to_rotation(q), R_ref, atol=1e-14)
        np.testing.assert_allclose(sp.rotation_to_quat(R_ref), q, atol=1e-12)


def test_svds_2_7_form():
    q = _random_quat()
    e1, e2 = q[0], q[1:]
    S = sp.skew(e2)
    np.testing.assert_allclose(sp.quat_to_rotation(q), np.eye(3) + 2 * e1 * S + 2 * S @ S, atol=1e-14)


def test_hamilton_product_composes_rotations():
    a, b = _random_quat(), _random_quat()
    np.testing.assert_allclose(
        sp.quat_to_rotation(sp.quat_multiply(a, b)), sp.quat_to_rotation(a) @ sp.quat_to_rotation(b), atol=1e-14
    )


def test_integrate_constant_rate_matches_closed_form():
    q0 = _random_quat()
    w = np.array([0.1, -0.2, 0.3])
    h = 2.0
    q1 = sp.quat_integrate(q0, w, h)
    R_ref = sp.quat_to_rotation(q0) @ Rotation.from_rotvec(w * h).as_matrix()
    np.testing.assert_allclose(sp.quat_to_rotation(q1), R_ref, atol=1e-13)
    # derivative consistency: small step equals q + h * q_rate
    dq = (sp.quat_integrate(q0, w, 1e-6) - q0) / 1e-6
    qd = sp.quat_rate(q0, w)
    if np.dot(dq, qd) < 0:  # sign fix of quat_normalize
        dq = -dq
    np.testing.assert_allclose(dq, qd, atol=1e-6)


def test_shift_wrench_and_twist_are_dual():
    V = rng.normal(size=6)
    F = rng.normal(size=6)
    p = rng.normal(size=3)
    # power is invariant under change of reference point
    assert np.dot(sp.shift_twist(V, p), sp.shift_wrench(F, p)) == pytest.approx(np.dot(V, F), rel=1e-12)


def test_pose_inverse():
    X = sp.pose(sp.quat_to_rotation(_random_quat()), rng.normal(size=3))
    np.testing.assert_allclose(X @ sp.pose_inverse(X), np.eye(4), atol=1e-14)


def test_bad_shapes_are_refused():
    with pytest.raises(ShapeError, match="quat_wxyz"):
        sp.quat_normalize([0, 0, 0, 0])
    with pytest.raises(ShapeError, match="p_AoBo_A"):
        sp.pose(np.eye(3), [1, 2])
    with pytest.raises(ShapeError, match="not finite"):
        sp.as_vector([1, np.nan, 0], 3, "v")
