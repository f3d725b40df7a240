"""Host safety: state machine, watchdogs, guards, and the jerk-bounded ramp to neutral."""

from __future__ import annotations

import numpy as np
import pytest

from dynamics.stewart import RigLimits
from errors import LifecycleError
from hil.framing import Fault, Hello, RigState, Telemetry
from hil.safety import SafetySupervisor, ramp_to, rate_limit, rate_limit_rows, transition, watchdog_timeout

LIM = RigLimits.uniform(6, 0.40, 0.70, 0.5, 5.0, 100.0)
NEUTRAL = np.full(6, 0.55)
DT = 0.004


def engaged(fp=1234) -> SafetySupervisor:
    s = SafetySupervisor(LIM, NEUTRAL, DT, fp)
    s.request_arm()
    s.on_hello(Hello(fp, 6, 20))
    s.engage()
    return s


def test_watchdog_timeout_spec():
    assert watchdog_timeout(0.004) == pytest.approx(0.020)
    assert watchdog_timeout(0.010) == pytest.approx(0.030)


def test_boots_motion_gated_and_needs_handshake():
    s = SafetySupervisor(LIM, NEUTRAL, DT, fingerprint=1234)
    assert s.state == RigState.IDLE
    assert s.tick(0.0, NEUTRAL + 0.01, 0.0, 0.0) is None  # nothing moves in IDLE
    with pytest.raises(LifecycleError, match="engage"):
        s.engage()
    s.request_arm()
    s.on_hello(Hello(999, 6, 20))  # wrong rig
    assert s.state == RigState.FAULT and s.faults & Fault.FINGERPRINT
    s.reset()
    s.request_arm()
    s.on_hello(Hello(1234, 6, 20))
    assert s.state == RigState.ARMED
    assert s.tick(0.0, NEUTRAL + 0.01, 0.0, 0.0) is None  # armed: still gated
    s.engage()
    out = s.tick(0.0, NEUTRAL + 1e-5, 0.0, 0.0)  # feasible within the limits: followed exactly
    np.testing.assert_allclose(out, NEUTRAL + 1e-5, rtol=0, atol=1e-15)


def test_transition_table_refuses_unknown():
    assert transition(RigState.ENGAGED, "estop") == RigState.ESTOP
    assert transition(RigState.ESTOP, "fault") == RigState.ESTOP  # stays latched
    with pytest.raises(LifecycleError, match="ESTOP"):
        transition(RigState.ESTOP, "engage")


def _run(s, t0, t1, cmd_fn, cmd_alive_until, rx_alive_until):
    out = []
    t = t0
    while t < t1:
        cmd_t = min(t, cmd_alive_until)
        rx_t = min(t, rx_alive_until)
        out.append((t, s.tick(t, cmd_fn(cmd_t), cmd_t, rx_t), s.state))
        t += DT
    return out


@pytest.mark.parametrize("what", ["sim", "rig"])
def test_stale_input_or_silent_rig_faults_within_spec_and_parks(what):
    s = engaged()
    def cmd(t):
        return NEUTRAL + 0.03 * np.sin(2 * np.pi * 0.5 * t) * np.array([1, -1, 1, -1, 1, -1])
    stop = 0.5
    trace = _run(s, 0.0, 3.0, cmd, stop if what == "sim" else 1e9, stop if what == "rig" else 1e9)
    t_fault = next(t for t, _, st in trace if st == RigState.FAULT)
    assert stop < t_fault <= stop + watchdog_timeout(DT) + DT + 1e-9
    assert s.faults & (Fault.HOST if what == "sim" else Fault.WATCHDOG)
    x = np.array([o for _, o, _ in trace if o is not None])
    v = np.diff(x, axis=0) / DT
    assert np.all(np.abs(v) <= LIM.v_max + 1e-9)
    assert np.all(np.abs(np.diff(v, axis=0) / DT) <= LIM.a_max + 1e-6)
    np.testing.assert_allclose(x[-1], NEUTRAL, atol=1e-6)  # parked at neutral


def test_nan_command_faults():
    s = engaged()
    s.tick(0.0, NEUTRAL, 0.0, 0.0)
    s.tick(DT, np.full(6, np.nan), DT, DT)
    assert s.state == RigState.FAULT and s.faults & Fault.NAN


def test_estop_latched_until_reset_and_then_rearm_needed():
    s = engaged()
    s.tick(0.0, NEUTRAL, 0.0, 0.0)
    s.estop()
    assert s.tick(DT, NEUTRAL + 0.01, DT, DT) is None
    s.fault(Fault.WATCHDOG)
    assert s.state == RigState.ESTOP
    with pytest.raises(LifecycleError):
        s.engage()
    s.reset()
    assert s.state == RigState.IDLE and s.faults == Fault.NONE
    assert s.tick(2 * DT, NEUTRAL + 0.01, 2 * DT, 2 * DT) is None


def test_consecutive_bad_frames_fault_but_isolated_ones_do_not():
    s = engaged()
    for _ in range(10):
        s.on_frames(good=1, bad=4)
    assert s.state == RigState.ENGAGED
    s.on_frames(good=0, bad=3)
    s.on_frames(good=0, bad=2)
    assert s.state == RigState.FAULT and s.faults & Fault.BAD_FRAMES


def test_rig_fault_reported_in_telemetry_faults_host():
    s = engaged()
    s.on_telemetry(Telemetry(0, 0, 0, RigState.FAULT, Fault.WATCHDOG, (0.55,) * 6, (0.0,) * 6))
    assert s.state == RigState.FAULT and s.faults & Fault.WATCHDOG


def test_park_ramps_then_armed():
    s = engaged()
    t = 0.0
    for _ in range(100):
        s.tick(t, NEUTRAL + 0.05, t, t)
        t += DT
    s.park()
    for _ in range(1000):
        s.tick(t, None, None, t)
        t += DT
        if s.state == RigState.ARMED:
            break
    assert s.state == RigState.ARMED and s.at_neutral


def test_soft_limits_follow_feasible_commands_exactly_and_clip_others():
    x, v = NEUTRAL.copy(), np.zeros(6)
    x1, v1, a1, hit = rate_limit(NEUTRAL + 1e-5, x, v, LIM, DT)
    assert not hit and np.allclose(x1, NEUTRAL + 1e-5)
    x2, v2, a2, hit = rate_limit(NEUTRAL + 0.1, x, v, LIM, DT)
    assert hit and np.all(np.abs(a2) <= LIM.a_max + 1e-12)


def test_ramp_never_exceeds_limits_from_states_of_real_commands():
    rng = np.random.default_rng(5)
    for _ in range(12):
        # a state the soft limiter produces from a random smooth command
        x, v, a = NEUTRAL.copy(), np.zeros(6), np.zeros(6)
        f = rng.uniform(0.2, 2.0, 6)
        amp = rng.uniform(0.0, 0.14, 6)
        for k in range(rng.integers(10, 300)):
            x, v, a, _ = rate_limit(NEUTRAL + amp * np.sin(2 * np.pi * f * k * DT), x, v, LIM, DT)
        xs, vs, as_ = ramp_to(x, v, np.zeros(6), NEUTRAL, LIM, DT)
        assert np.all(np.abs(vs) <= LIM.v_max + 1e-12)
        assert np.all(np.abs(as_) <= LIM.a_max + 1e-9)
        assert np.all(np.abs(np.diff(as_, axis=0)) / DT <= LIM.j_max + 1e-6)
        assert np.all(xs >= LIM.lo - 1e-9) and np.all(xs <= LIM.hi + 1e-9)
        # positions agree with integrated speeds (the profile is self-consistent)
        np.testing.assert_allclose(np.diff(xs, axis=0), 0.5 * (vs[1:] + vs[:-1]) * DT, atol=1e-12)
        np.testing.assert_allclose(xs[-1], NEUTRAL, atol=1e-6)
        assert len(xs) * DT < 3.0


def test_ramp_from_arbitrary_state_keeps_speed_and_acceleration_limits():
    rng = np.random.default_rng(9)
    for _ in range(12):
        xs, vs, as_ = ramp_to(rng.uniform(0.45, 0.65, 6), rng.uniform(-0.5, 0.5, 6), rng.uniform(-5, 5, 6),
                              NEUTRAL, LIM, DT)
        assert np.all(np.abs(vs) <= LIM.v_max + 1e-12) and np.all(np.abs(as_) <= LIM.a_max + 1e-9)
        np.testing.assert_allclose(xs[-1], NEUTRAL, atol=1e-6)


def test_consecutive_clamped_commands_fault_the_host_and_ramp_to_neutral():
    s = SafetySupervisor(LIM, NEUTRAL, DT, 1234, clamp_fault_after=3)
    s.request_arm()
    s.on_hello(Hello(1234, 6, 20))
    s.engage()
    cmd = NEUTRAL + 0.001
    t = 0.0
    for clamped in (True, True, False, True, True):  # a free step resets the count
        assert s.tick(t, cmd, t, t, clamped=clamped) is not None
        assert s.state == RigState.ENGAGED
        t += DT
    s.tick(t, cmd, t, t, clamped=True)  # the third in a row
    assert s.state == RigState.FAULT and s.faults == Fault.LIMIT
    xs = [s.tick(t + k * DT, cmd, t + k * DT, t + k * DT, clamped=False) for k in range(1, 400)]
    np.testing.assert_allclose(xs[-1], NEUTRAL, atol=1e-6)  # the ramp, not the command
    never = engaged()  # clamp_fault_after = 0: clamping alone never faults
    for k in range(50):
        never.tick(k * DT, cmd, k * DT, k * DT, clamped=True)
    assert never.state == RigState.ENGAGED


def _limited(cmds, v_cmds=None, x0=NEUTRAL, v0=None):
    """rate_limit over a command stream from (x0, v0): rows of (x, v, a, hit) per step."""
    x, v, out = np.array(x0, dtype=float), np.zeros(6) if v0 is None else np.array(v0, dtype=float), []
    for k, cmd in enumerate(cmds):
        x, v, a, hit = rate_limit(np.asarray(cmd, dtype=float), x, v, LIM, DT,
                                  None if v_cmds is None else np.asarray(v_cmds[k], dtype=float))
        out.append((x, v, a, hit))
    return out


def test_rate_limit_keeps_the_limits_follows_what_it_can_and_approaches_a_jump_without_overshoot():
    """rate_limit against its specification (not against its float kernel): limits on every step,
    exact tracking of a followable command, no overshoot on a jump, braking before a stroke end."""
    lo, hi, vm, am = 0.40, 0.70, 0.5, 5.0  # LIM
    rng = np.random.default_rng(3)
    # any stream, however wild: speed, acceleration and stroke are kept, and the state integrates
    cmds = NEUTRAL + rng.uniform(-0.4, 0.4, (400, 6))
    prev_x, prev_v = NEUTRAL, np.zeros(6)
    for x, v, a, _ in _limited(cmds, rng.normal(size=(400, 6))):
        assert np.all(np.abs(v) <= vm * (1 + 1e-12)) and np.all(np.abs(a) <= am * (1 + 1e-12))
        assert np.all(x >= lo) and np.all(x <= hi)
        np.testing.assert_allclose(v, prev_v + a * DT, rtol=0, atol=1e-15)
        np.testing.assert_allclose(x, np.clip(prev_x + v * DT, lo, hi), rtol=0, atol=1e-15)
        prev_x, prev_v = x, v
    # a command the axes can follow (0.05 m, 0.5 Hz: 0.16 m/s, 0.5 m/s² peak), with its speed: followed exactly
    t = np.arange(1, 500) * DT
    w = 2 * np.pi * 0.5
    follow = NEUTRAL + 0.05 * np.sin(w * t)[:, None] * np.ones(6)
    speed = 0.05 * w * np.cos(w * t)[:, None] * np.ones(6)
    rows = _limited(follow, speed, v0=speed[0])
    assert not any(hit for *_, hit in rows)
    np.testing.assert_allclose([x for x, *_ in rows], follow, rtol=0, atol=1e-12)
    # a jump of 0.1 m: approached monotonically, never passed, reached, at rest
    target = NEUTRAL + 0.1 * np.array([1, -1, 1, -1, 1, -1])
    rows = _limited([target] * 300)
    xs = np.array([x for x, *_ in rows])
    side = np.sign(target - NEUTRAL)
    assert np.all(np.diff(xs * side, axis=0) >= -1e-15) and np.all((target - xs) * side >= -1e-12)
    k_reached = next(k for k, (x, *_) in enumerate(rows) if np.allclose(x, target, atol=1e-12))
    assert k_reached * DT < 2 * np.sqrt(0.1 / am) + 10 * DT  # near the bang-bang time (0.28 s)
    np.testing.assert_allclose(rows[-1][0], target, rtol=0, atol=1e-12)
    np.testing.assert_allclose(rows[-1][1], 0.0, rtol=0, atol=1e-12)
    # a command beyond the stroke end at full speed: the axis brakes and stops inside its stroke
    rows = _limited([np.full(6, hi + 0.2)] * 300, x0=np.full(6, hi - 0.1), v0=np.full(6, vm))
    assert all(hit for *_, hit in rows)
    assert max(x.max() for x, *_ in rows) < hi
    np.testing.assert_allclose(rows[-1][1], 0.0, rtol=0, atol=1e-12)


def test_rate_limit_rows_refuses_lists_that_do_not_match_the_limits():
    with pytest.raises(ValueError):
        rate_limit_rows([0.5] * 5, [0.5] * 6, [0.0] * 6, LIM, DT, [0.0] * 6)


def test_supervisor_setpoints_are_rate_limit_of_the_command_stream():
    """The supervisor's float path gives rate_limit's numbers on the command and its difference quotient."""
    s = engaged()
    x, v, prev = NEUTRAL.copy(), np.zeros(6), None
    for k in range(300):
        cmd = NEUTRAL + 0.03 * np.sin(0.03 * k + np.arange(6)) * (1.0 if k < 150 else 4.0)
        out = s.tick(k * DT, cmd, k * DT, k * DT)
        v_cmd = None if prev is None else (cmd - prev) / DT
        x, v, a, _ = rate_limit(cmd, x, v, LIM, DT, v_cmd)
        prev = cmd
        assert out.tolist() == x.tolist() and s.v.tolist() == v.tolist() and s.a.tolist() == a.tolist()
    assert s.state == RigState.ENGAGED and s.limit_hits > 0
