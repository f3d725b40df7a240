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


def test_as_vector_refuses_non_finite_long_vectors():
    x = np.zeros(40)
    x[-1] = np.inf
    with pytest.raises(ShapeError, match="x: not finite"):
        sp.as_vector(x, 40, "x")
    assert sp.as_vector(np.arange(40.0), 40, "x").shape == (40,)


def test_cross3_matches_numpy():
    for _ in range(20):
        a, b = rng.normal(size=3), rng.normal(size=3)
        np.testing.assert_allclose(sp.cross3(a, b), np.cross(a, b), rtol=0, atol=1e-15)
    np.testing.assert_array_equal(sp.cross3([1, 0, 0], (0, 1, 0)), [0, 0, 1])
    with pytest.raises(ShapeError, match="cross3"):
        sp.cross3([1, 2], [1, 2, 3])


def test_rotation_vector_matches_scipy():
    # random, tiny (first-order branch) and near-π (quaternion branch) angles
    angles = [*rng.uniform(0, np.pi, 20), 1e-9, 3e-7, np.pi - 1e-4, np.pi - 2e-3, np.pi]
    for angle in angles:
        axis = rng.normal(size=3)
        theta = angle * axis / np.linalg.norm(axis)
        R = Rotation.from_rotvec(theta)
        ref = R.as_rotvec()
        got_R = sp.rotation_vector(R.as_matrix())
        x, y, z, w = R.as_quat()
        got_q = sp.quat_to_rotvec([w, x, y, z])
        for got in (got_R, got_q):
            if angle > np.pi - 1e-6:  # θ and −θ are the same rotation at π
                got = got if np.dot(got, ref) >= 0 else -got
            np.testing.assert_allclose(got, ref, atol=1e-10)
    np.testing.assert_array_equal(sp.quat_to_rotvec([1, 0, 0, 0]), np.zeros(3))
    np.testing.assert_array_equal(sp.rotation_vector(np.eye(3)), np.zeros(3))
    with pytest.raises(ShapeError, match="R"):
        sp.rotation_vector(np.eye(4))


def _rotvec_rate_numeric(phi, phidot, eps=1e-6):
    """Body and world rates of R(t) = exp([φ(t)×]) by central differences (scipy's exp/log)."""
    Rp = Rotation.from_rotvec(phi + eps * phidot)
    Rm = Rotation.from_rotvec(phi - eps * phidot)
    w_body = (Rm.inv() * Rp).as_rotvec() / (2 * eps)
    w_world = (Rp * Rm.inv()).as_rotvec() / (2 * eps)
    return w_body, w_world


def test_dexp_inv_right_and_left_against_finite_differences():
    # phi spans the series branch (θ² < 1e-8), the closed form, and θ up to 3 rad
    for theta in [0.0, 1e-6, 5e-5, 1e-3, 0.3, 1.5, 3.0]:
        axis = rng.normal(size=3)
        phi = theta * axis / np.linalg.norm(axis)
        w = rng.normal(size=3)
        # right: R = R_k exp(φ) with body rate w
        phidot = sp.dexp_inv(phi, w)
        w_body, _ = _rotvec_rate_numeric(phi, phidot)
        np.testing.assert_allclose(w_body, w, atol=1e-8)
        # left: R = exp(φ) R_k with world rate w
        phidot = sp.dexp_inv(-phi, w)
        _, w_world = _rotvec_rate_numeric(phi, phidot)
        np.testing.assert_allclose(w_world, w, atol=1e-8)


def test_dexp_inv_coefficient_closed_forms_agree():
    # c = 1/θ² − (1 + cos θ)/(2θ sin θ) = (1 − (θ/2)cot(θ/2))/θ² → 1/12 as θ → 0
    w = np.array([0.0, 1.0, 0.0])
    for theta in [1e-5, 1e-4, 0.1, 1.0, 2.5]:
        phi = np.array([theta, 0.0, 0.0])
        # φ × (φ × w) = −θ² w for w ⟂ φ, and φ × w = θ e_z
        c = (1.0 - 0.5 * theta / np.tan(0.5 * theta)) / theta**2 if theta > 1e-3 else 1 / 12 + theta**2 / 720
        expected = w + 0.5 * np.array([0.0, 0.0, theta]) - c * theta**2 * w
        np.testing.assert_allclose(sp.dexp_inv(phi, w), expected, rtol=0, atol=1e-12)
    with pytest.raises(ShapeError, match="phi, w"):
        sp.dexp_inv([0.0, 0.0], w)


def test_pose_vector_round_trip_and_rotation_vector_meaning():
    x = np.array([1.0, -2.0, 0.5, 0.3, -0.2, 0.1])
    X = sp.pose_from_vector(x)
    np.testing.assert_allclose(X[:3, :3], Rotation.from_rotvec(x[3:]).as_matrix(), atol=1e-14)
    np.testing.assert_allclose(sp.pose_vector(X), x, atol=1e-13)
    with pytest.raises(ShapeError, match="pose vector"):
        sp.pose_from_vector([0, 0, 0])


def test_mat_mat_t_rows_and_norm3_match_numpy_and_scipy():
    for _ in range(20):
        A = Rotation.random(random_state=rng).as_matrix()   # B within 2 rad of A: away from π, where
        B = Rotation.from_rotvec(rng.uniform(-1.1, 1.1, size=3)).as_matrix() @ A  # the log map loses digits
        ABt = sp.mat_mat_t_rows(A.ravel().tolist(), B.ravel().tolist())
        np.testing.assert_allclose(np.reshape(ABt, (3, 3)), A @ B.T, rtol=0, atol=1e-15)
        # the attitude error it feeds: the rotation vector taking B to A, in the common frame (scipy)
        ref = (Rotation.from_matrix(A) * Rotation.from_matrix(B).inv()).as_rotvec()
        np.testing.assert_allclose(sp.rotation_vector(np.reshape(ABt, (3, 3))), ref, rtol=0, atol=1e-12)
        x = rng.normal(size=3)
        assert sp.norm3(x.tolist()) == pytest.approx(float(np.linalg.norm(x)), rel=1e-15)
        assert sp.norm3(x) == pytest.approx(float(np.linalg.norm(x)), rel=1e-15)
    with pytest.raises(ShapeError, match="norm3"):
        sp.norm3([1.0, 2.0])


def test_rotation_error_rows_matches_scipy_also_near_pi():
    from dynamics.contact import rotation_error

    for angle in (0.0, 1e-8, 0.3, 2.0, np.pi - 1e-4, np.pi):
        axis = rng.normal(size=3)
        theta = angle * axis / np.linalg.norm(axis)
        R_WA = Rotation.random(random_state=rng)
        R_WB = Rotation.from_rotvec(theta) * R_WA
        th = sp.rotation_error_rows(R_WA.as_matrix().ravel().tolist(), R_WB.as_matrix().ravel().tolist())
        ref = (R_WB * R_WA.inv()).as_rotvec()
        if angle > np.pi - 1e-3 and th @ ref < 0:   # at π, θ and −θ are the same rotation
            ref = -ref
        np.testing.assert_allclose(th, ref, rtol=0, atol=1e-10)
        np.testing.assert_allclose(th, rotation_error(R_WA.as_matrix(), R_WB.as_matrix()), rtol=0, atol=1e-10)


def test_pose_rows_and_pose_application_kernels_match_scipy():
    for _ in range(10):
        rot = Rotation.random(random_state=rng)
        p, q = rng.normal(size=3), rng.normal(size=3)
        X = sp.pose(rot.as_matrix(), p)
        p_rows, R_rows = sp.pose_rows(X)
        np.testing.assert_array_equal(sp.pose_from_rows(p_rows, R_rows), X)
        np.testing.assert_allclose(sp.pose_apply_rows(p_rows, R_rows, q.tolist()), p + rot.apply(q), rtol=0, atol=1e-14)
        np.testing.assert_allclose(sp.pose_apply_inverse_rows(p_rows, R_rows, q.tolist()), rot.inv().apply(q - p),
                                   rtol=0, atol=1e-14)
        B = Rotation.random(random_state=rng).as_matrix()
        np.testing.assert_allclose(np.reshape(sp.mat_t_mat_rows(R_rows, B.ravel().tolist()), (3, 3)),
                                   (rot.inv() * Rotation.from_matrix(B)).as_matrix(), rtol=0, atol=1e-14)
    with pytest.raises(ShapeError, match="X_AB"):
        sp.pose_rows(np.eye(3))
    with pytest.raises(ShapeError, match="R_AB"):
        sp.pose_from_rows([0.0, 0.0, 0.0], [1.0] * 8)
