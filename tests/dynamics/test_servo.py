"""Joint servos: step response within the limits, current limit under load, brakes and slip."""

from __future__ import annotations

import numpy as np
import pytest

from dynamics import servo as sv
from errors import ModelError

TAU_MAX = np.array([1570.0, 1570.0, 1074.0, 470.0, 470.0, 470.0])
RATE = np.array([0.03997, 0.03997, 0.0560, 0.0831, 0.0831, 0.0831])
P = sv.srms_servo_params(TAU_MAX, RATE)
H = 0.002


def test_current_limit_gives_the_published_torque_limit():
    np.testing.assert_allclose(P.torque_limit, TAU_MAX, rtol=1e-12)


def test_free_step_response_respects_rate_torque_and_current_limits():
    s = sv.servo_initial(np.zeros(6))
    w, i, tm = [], [], []
    for _ in range(500):  # 1 s
        s, tau_L, tau_m = sv.servo_step(P, s, RATE, np.zeros(6, bool), H)
        w.append(s.omega)
        i.append(s.current)
        tm.append(tau_m)
        assert np.all(tau_L == 0.0)
    w, i, tm = map(np.array, (w, i, tm))
    assert np.all(np.abs(i) <= P.current_limit * (1 + 1e-12))
    assert np.all(np.abs(tm) <= TAU_MAX * (1 + 1e-12))
    assert np.all(w <= RATE * (1 + 1e-3))                     # no overshoot beyond the commanded limit
    np.testing.assert_allclose(w[-1], RATE, rtol=1e-3)       # and it gets there
    assert np.all(w[200] >= 0.95 * RATE)                      # within 0.4 s (double pole at 20 rad/s)


def test_against_a_locked_joint_the_torque_saturates_at_the_limit():
    s = sv.servo_initial(np.zeros(6))
    k = np.full(6, 3e5)
    c = 2 * 0.3 * np.sqrt(k * P.reflected_inertia)
    for _ in range(1500):
        s, tau_L, tau_m = sv.servo_step(P, s, RATE, np.zeros(6, bool), H, k=k, c=c, theta=np.zeros(6),
                                        theta_dot=np.zeros(6))
        assert np.all(np.abs(s.current) <= P.current_limit * (1 + 1e-12))
    # at rest against the spring: transmitted = motor torque − Coulomb friction (static) ≤ limit
    assert np.all(np.abs(tau_L) <= TAU_MAX * (1 + 1e-9))
    np.testing.assert_allclose(tau_L, TAU_MAX, rtol=0.03)


@pytest.mark.parametrize("ratio,slips", [(0.9, False), (1.1, True)])
def test_brakes_hold_up_to_the_slip_torque(ratio, slips):
    k = np.full(6, 3e5)
    theta = -ratio * P.slip_torque / k                     # spring pre-loaded to ratio × slip torque
    s = sv.servo_initial(np.zeros(6))
    for _ in range(500):
        s, tau_L, _ = sv.servo_step(P, s, np.zeros(6), np.ones(6, bool), H, k=k, c=np.zeros(6), theta=theta,
                                    theta_dot=np.zeros(6), n_sub=4)
        assert np.all(s.current == 0.0)
    moved = np.abs(s.theta_m) > 1e-9
    assert np.all(moved == slips)
    if slips:
        assert np.all(np.abs(tau_L) <= P.slip_torque * (1 + 1e-6))
    else:
        assert np.abs(tau_L) == pytest.approx(ratio * P.slip_torque)
    assert np.all(s.omega == 0.0)                            # it grips again once below the slip torque


def test_at_rest_with_no_command_it_stays():
    s = sv.servo_initial(np.full(6, 0.3))
    for _ in range(100):
        s, _, _ = sv.servo_step(P, s, np.zeros(6), np.zeros(6, bool), H)
    np.testing.assert_allclose(s.theta_m, 0.3, atol=1e-15)


def test_bad_parameters_refused():
    with pytest.raises(ModelError):
        sv.srms_servo_params(TAU_MAX, RATE, gear_ratio=[0, 1, 1, 1, 1, 1])


def test_direct_drive_bypasses_the_rate_loop_and_settles_where_friction_balances_the_motor():
    """A fixed current on a free joint: J_r ω̇ = N K_t i − τ_c tanh(ω/ω_s) − b ω settles at
    ω* = (N K_t i − τ_c)/b (ω* ≫ ω_s), whatever the commanded rate; the other joints' loops hold them."""
    frac = 0.03
    i_d = frac * P.current_limit[2]
    direct = [None, None, i_d, None, None, None]
    s = sv.servo_initial(np.zeros(6))
    for _ in range(1500):  # 3 s, ~17 time constants J_r/b
        s, _, tau_m = sv.servo_step(P, s, np.zeros(6), np.zeros(6, bool), H, n_sub=2, direct=direct)
    w_star = (P.gear_ratio[2] * P.torque_constant[2] * i_d - P.coulomb[2]) / P.viscous[2]
    assert s.omega[2] == pytest.approx(w_star, rel=1e-6)
    assert s.current[2] == i_d and s.integ[2] == 0.0
    np.testing.assert_allclose(np.delete(s.omega, 2), 0.0, atol=1e-12)
    # beyond the current limit: limited
    s, _, tau_m = sv.servo_step(P, s, np.zeros(6), np.zeros(6, bool), H, direct=[None, None, 1e9, None, None, None])
    assert tau_m[2] == pytest.approx(TAU_MAX[2])
