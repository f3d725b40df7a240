"""The compiled orbiter kinematics of a contact step (dynamics.contact_kernels.orbiter_kinematics) against the float
references and the orbiter's predicted state.

The kernel must give, bit for bit, what the contact service computed on Python floats: the prediction
(:func:`dynamics.rigid_body.predict_rows`), the rotation (:func:`dynamics.spatial.rotation_rows`), the angular
velocity in W and L's pose (``mat_vec_rows``, ``pose_apply_rows``, ``mat_mat_rows``), over random samples, short
and long horizons and rates small enough for the quaternion's small-angle branch; and say when the prediction is
not finite (the references raise). Independently, L's origin is checked against numpy's product of the predicted
state's pose and X_OL.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from dynamics import contact_kernels as ck
from dynamics import rigid_body as rb
from dynamics import spatial as sp
from errors import ShapeError


def _sample(rng: np.random.Generator, rate: float) -> tuple[np.ndarray, list[list[float]]]:
    q = Rotation.random(random_state=rng.integers(1 << 31)).as_quat(scalar_first=True)
    q = q if q[0] >= 0 else -q
    p, v, a = rng.normal(size=3) * 10.0, rng.normal(size=3) * 0.1, rng.normal(size=3) * 1e-3
    w, d = rng.normal(size=3) * rate, rng.normal(size=3) * rate * 1e-2
    s = np.concatenate([p, q, v, w, a, d])
    return s, [x.tolist() for x in (p, q, v, w, a, d)]


@pytest.mark.parametrize("rate", [1e-3, 1e-11, 0.5])
def test_kernel_equals_the_references_bit_for_bit(rate):
    rng = np.random.default_rng(int(rate * 1e12) % 1000 + 17)
    for _ in range(2000):
        s, (p0, q0, v0, w0, a0, d0) = _sample(rng, rate)
        dt = float(rng.choice([1e-9, 1e-3, 9e-3, 0.1]))
        X_OL = sp.pose_from_rows(rng.normal(size=3).tolist(),
                                 tuple(Rotation.random(random_state=rng.integers(1 << 31)).as_matrix().ravel()))
        p_OL, R_OL = sp.pose_rows(X_OL)
        ok, O, L = ck.orbiter_kinematics(s, dt, tuple(p_OL), tuple(R_OL))
        p, q, v, w = rb.predict_rows(p0, q0, v0, w0, a0, d0, dt)
        R = sp.rotation_rows(*q)
        assert ok
        assert O == (*p, *R, *v, *sp.mat_vec_rows(R, *w))
        assert L == (*sp.pose_apply_rows(p, R, p_OL), *sp.mat_mat_rows(R, R_OL))
        # independently: L's origin is X_WO X_OL's (numpy), to round-off
        X_WO = sp.pose_from_rows(list(p), R)
        np.testing.assert_allclose(L[:3], (X_WO @ X_OL)[:3, 3], rtol=0, atol=1e-12)


def test_a_prediction_not_finite_is_flagged_as_the_references_raise():
    rng = np.random.default_rng(2)
    s, lists = _sample(rng, 1e-3)
    eye = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0)
    for i, bad in ((13, math.inf), (10, math.nan), (7, math.inf)):
        t = s.copy()
        t[i] = bad
        assert not ck.orbiter_kinematics(t, 1e-3, (0.0, 0.0, 0.0), eye)[0]
        p0, q0, v0, w0, a0, d0 = (t[0:3].tolist(), t[3:7].tolist(), t[7:10].tolist(), t[10:13].tolist(),
                                  t[13:16].tolist(), t[16:19].tolist())
        with pytest.raises(ShapeError):
            p, q, v, w = rb.predict_rows(p0, q0, v0, w0, a0, d0, 1e-3)
            rb.RigidBodyState.from_floats(p, q, v, w)
