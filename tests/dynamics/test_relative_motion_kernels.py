"""The compiled relative motion (dynamics.relative_motion_kernels) against its Python-float references.

:func:`dynamics.relative_motion_kernels.relative_motion` is what the hil bridge's step does with
:func:`dynamics.rigid_body.predict_rows` (each body predicted from its sample) and ``hil.bridge._relative_motion``
(the pose and twist of B relative to L), on Python floats. Compiled without fast-math, it must agree with them bit
for bit (``==`` on every number, NaN where NaN) over random bodies and frames, and take every branch: a sample not
predicted (its age 0) and predicted, the rotation's increment below the small-angle threshold and above, the
quaternion's sign flipped and not, a result finite and not, and a quaternion the prediction cannot integrate, which
the kernel refuses (the references raise the error). The bridge with the kernel gives the references' outputs.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dynamics import relative_motion_kernels as rk
from dynamics.rigid_body import predict_rows
from dynamics.spatial import pose_from_vector
from errors import ShapeError
from hil.bridge import _frame_rows, _relative_motion


def _body(rng: np.random.Generator) -> np.ndarray:
    q = rng.normal(size=4)
    q /= np.linalg.norm(q)
    scale = rng.choice([1e-9, 1e-3, 1.0])  # rates from below the small-angle threshold to fast
    return np.concatenate([rng.normal(size=3) * 10.0, q, rng.normal(size=3), rng.normal(size=3) * scale,
                           rng.normal(size=3) * 0.1, rng.normal(size=3) * scale])


def _reference(s: np.ndarray, dt: float) -> tuple:
    """The bridge's body state at the step (hil.bridge._BodyInput.at's arithmetic)."""
    p, q, v, w, a, wd = (s[i:j].tolist() for i, j in ((0, 3), (3, 7), (7, 10), (10, 13), (13, 16), (16, 19)))
    return (p, q, v, w) if dt <= 0.0 else predict_rows(p, q, v, w, a, wd, dt)


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and all(x == y or (math.isnan(x) and math.isnan(y))
                                      for x, y in zip(a.ravel().tolist(), b.ravel().tolist(), strict=True))


def _branches(s: np.ndarray, dt: float) -> set[str]:
    if not dt > 0.0:
        return {"held"}
    w = s[10:13] + 0.5 * s[16:19] * dt
    angle = math.sqrt(float(w @ w)) * dt
    return {"predicted", "small angle" if angle < 1e-12 else "angle"}


def test_relative_motion_kernel_is_the_reference_bit_for_bit():
    rng = np.random.default_rng(11)
    seen: set[str] = set()
    for trial in range(5000):
        o, t = _body(rng), _body(rng)
        dt_o, dt_t = (float(rng.choice([0.0, -0.002, 0.004, 0.01 * rng.uniform()])) for _ in range(2))
        if trial % 50 == 0:  # a number that is not finite: the result neither
            (o if trial % 100 else t)[int(rng.choice([0, 7, 10]))] = rng.choice([math.nan, math.inf])
        L = _frame_rows(pose_from_vector(rng.normal(size=6)))
        B = _frame_rows(pose_from_vector(rng.normal(size=6)))
        try:
            X, V, finite = _relative_motion(_reference(o, dt_o), _reference(t, dt_t), L, B)
        except (ShapeError, ValueError):
            X = None
        Xk, Vk = np.full((4, 4), 7.0), np.full(6, 7.0)  # every number overwritten
        status = rk.relative_motion(o, dt_o, t, dt_t, np.array([*L[0], *L[1]]), np.array([*B[0], *B[1]]), Xk, Vk)
        if X is None:
            assert status == rk.NO_QUATERNION, trial
            seen.add("refused")
            continue
        assert status == (1 if finite else 0) and _same(X, Xk) and _same(V, Vk), trial
        seen |= _branches(o, dt_o) | _branches(t, dt_t) | {"finite" if finite else "not finite"}
        if dt_o > 0.0:  # the integrated quaternion's scalar part came out negative: flipped
            q = o[3:7]
            w = o[10:13] + 0.5 * o[16:19] * dt_o
            n = math.sqrt(float(w @ w))
            e = np.r_[math.cos(0.5 * n * dt_o), (math.sin(0.5 * n * dt_o) / n) * w] if n * dt_o >= 1e-12 else None
            if e is not None:
                rw = q[0] * e[0] - q[1] * e[1] - q[2] * e[2] - q[3] * e[3]
                seen.add("flipped" if rw < 0 else "kept")
    # a quaternion that integrates to zero norm: the references raise, the kernel refuses
    o = _body(rng)
    o[3:7] = 0.0
    with pytest.raises(ShapeError):
        _relative_motion(_reference(o, 0.004), _reference(_body(rng), 0.0), L, B)
    assert rk.relative_motion(o, 0.004, _body(rng), 0.0, np.array([*L[0], *L[1]]), np.array([*B[0], *B[1]]),
                              np.empty((4, 4)), np.empty(6)) == rk.NO_QUATERNION
    every = {"held", "predicted", "small angle", "angle", "finite", "not finite", "refused", "flipped", "kept"}
    assert every <= seen, every - seen
