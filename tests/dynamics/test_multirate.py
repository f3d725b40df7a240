"""dynamics.multirate: the held-matrix step of an arm between two moving bodies.

Its physics against the chain run as one system is checked in tests/services/test_arm_flexible.py; here the
step's own properties: Newmark's average acceleration conserves the energy of the held linear system, the hand
constraint holds at the acceleration and velocity level, and bad calls are refused.
"""

from __future__ import annotations

import numpy as np
import pytest

from dynamics import cases
from dynamics import chain as ch
from dynamics import multirate as mr
from errors import ShapeError


def _arm(n_modes: int = 2) -> tuple[ch.ChainModel, np.ndarray]:
    case = cases.srms_on_orbiter()
    model = cases.with_flexible_booms(case.model, cases.srms_booms(n_modes))
    return model, np.concatenate([case.q, np.zeros(model.ne)])


def _springs(model: ch.ChainModel, damped: bool) -> tuple[np.ndarray, np.ndarray]:
    na = model.nv - 6
    K, D = np.zeros((na, na)), np.zeros((na, na))
    K[:6, :6] = np.diag([3e5, 3e5, 2e5, 1e5, 1e5, 1e5])
    K[6:, 6:] = model.flex.K
    if damped:
        D[:6, :6] = np.diag([6e3, 6e3, 4e3, 2e3, 2e3, 2e3])
        D[6:, 6:] = model.flex.D
    return K, D


def test_free_held_step_conserves_the_energy_of_the_held_linear_system():
    """Held at rest (no velocity products), no damping, no drive, the base still: ½vᵀM_aa v + ½xᵀKx is conserved
    by the trapezoidal rule to round-off over 2000 steps (the beams' modes up to ~60 Hz, h = 2 ms)."""
    model, q = _arm()
    na = model.nv - 6
    K, D = _springs(model, damped=False)
    held = mr.hold(model, ch.make_data(model), q, np.zeros(model.nv), K, D, 0.002)
    M = ch.mass_matrix(model, ch.make_data(model), q)[6:, 6:]
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal(scale=1e-3, size=6), rng.normal(scale=1e-3, size=na - 6)])
    v = rng.normal(scale=1e-3, size=na)
    z6, Q = np.zeros(6), np.zeros(na)
    a = mr.held_accelerations(held, x, v, Q, z6)
    E0 = 0.5 * v @ M @ v + 0.5 * x @ K @ x
    for _ in range(2000):
        x, v, a, lam, _ = mr.held_step(held, x, v, a, Q, z6, z6)
        assert not lam.any()
    E1 = 0.5 * v @ M @ v + 0.5 * x @ K @ x
    assert E1 == pytest.approx(E0, rel=1e-10)
    # with the beams' damping and the gear dampers it decays
    K, D = _springs(model, damped=True)
    held = mr.hold(model, ch.make_data(model), q, np.zeros(model.nv), K, D, 0.002)
    for _ in range(200):
        x, v, a, _, _ = mr.held_step(held, x, v, a, Q, z6, z6)
    assert 0.5 * v @ M @ v + 0.5 * x @ K @ x < 0.9 * E1


def test_hand_constraint_holds_at_the_acceleration_and_velocity_level():
    """With the hand on a body whose grasp point accelerates at A_G (no Baumgarte): every step's accelerations give
    the hand A_G (J_a v̇_a + J_b A_b + J̇v), and the hand's velocity grows by exactly their integral (the trapezoid
    of a constant), to round-off."""
    model, q = _arm()
    data = ch.make_data(model)
    na = model.nv - 6
    K, D = _springs(model, damped=True)
    p = np.array([0.6604, 0.0, 0.0])
    rng = np.random.default_rng(1)
    V_b, A_b = rng.normal(scale=1e-4, size=6), rng.normal(scale=1e-5, size=6)
    v = np.concatenate([V_b, rng.normal(scale=1e-3, size=na)])
    held = mr.hold(model, data, q, v, K, D, 0.001, hand=(model.nb - 1, p))
    J = held.J
    x, v_a = np.zeros(na), v[6:].copy()
    # the hand's velocity as the arm has it, and a grasp point accelerating
    V_G = J[:, :6] @ V_b + J[:, 6:] @ v_a
    A_G = rng.normal(scale=1e-4, size=6)
    Q = rng.normal(scale=10.0, size=na)
    hand = (V_G, A_G, np.zeros(6))
    a = mr.held_accelerations(held, x, v_a, Q, A_b, hand, V_b)
    np.testing.assert_allclose(J[:, 6:] @ a + J[:, :6] @ A_b + held.Jdv, A_G, atol=1e-12)
    for _ in range(1, 101):
        x, v_a, a, lam, _ = mr.held_step(held, x, v_a, a, Q, V_b, A_b, hand)
        np.testing.assert_allclose(J[:, 6:] @ a + J[:, :6] @ A_b + held.Jdv, A_G, atol=1e-10)
    # the arm's share of the hand's velocity grows by what the accelerations give it over 0.1 s, exactly
    drift = J[:, 6:] @ v_a + J[:, :6] @ V_b - V_G
    np.testing.assert_allclose(drift, 100 * 0.001 * (A_G - J[:, :6] @ A_b - held.Jdv), rtol=1e-9, atol=1e-15)
    assert np.abs(lam).max() > 0.0


def test_bad_calls_are_refused():
    model, q = _arm(1)
    data = ch.make_data(model)
    na = model.nv - 6
    K, D = _springs(model, damped=False)
    with pytest.raises(ShapeError, match="K, D"):
        mr.hold(model, data, q, np.zeros(model.nv), K[:-1, :-1], D, 0.002)
    with pytest.raises(ShapeError, match="h:"):
        mr.hold(model, data, q, np.zeros(model.nv), K, D, 0.0)
    free = mr.hold(model, data, q, np.zeros(model.nv), K, D, 0.002)
    held = mr.hold(model, data, q, np.zeros(model.nv), K, D, 0.002, hand=(model.nb - 1, [0.6604, 0.0, 0.0]))
    z = np.zeros(na)
    with pytest.raises(ShapeError, match="held free"):
        mr.held_step(free, z, z, z, z, np.zeros(6), np.zeros(6), (np.zeros(6), np.zeros(6), np.zeros(6)))
    with pytest.raises(ShapeError, match="give"):
        mr.held_step(held, z, z, z, z, np.zeros(6), np.zeros(6))
