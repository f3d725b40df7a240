"""Delay estimator, prediction, passivity controller and impact monitor against closed forms."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dynamics.spatial import pose, quat_integrate, quat_to_rotation
from hil.delay import DelayEstimator, ImpactMonitor, PassivityController, predict_pose


def test_delay_estimator_median_is_robust_to_a_late_frame():
    d = DelayEstimator(median_of=5)
    for k, extra in enumerate([0, 0, 900, 0, 0]):
        d.update(10_000 + 1000 * k + 2000 + extra, 10_000 + 1000 * k, hold_us=500)
    assert d.rtt_s == pytest.approx(1.5e-3)
    assert d.one_way_s == pytest.approx(0.75e-3)
    assert d.percentile_s(100) == pytest.approx(2.4e-3)
    assert math.isnan(DelayEstimator().rtt_s)


def test_predict_pose_exact_for_constant_twist():
    X = pose(quat_to_rotation(quat_integrate([1.0, 0, 0, 0], [0.1, -0.2, 0.3], 1.0)), [1.0, 2.0, 3.0])
    V = np.array([0.2, 0.1, -0.3, 0.01, 0.02, -0.03])
    Xp = predict_pose(X, V, 0.5)
    np.testing.assert_allclose(Xp[:3, 3], X[:3, 3] + 0.5 * V[3:], atol=1e-15)
    # spatial angular velocity ω in L: R(τ) = exp(τ [ω]) R
    ang = np.linalg.norm(V[:3]) * 0.5
    k = V[:3] / np.linalg.norm(V[:3])
    K = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    Rexp = np.eye(3) + math.sin(ang) * K + (1 - math.cos(ang)) * K @ K
    np.testing.assert_allclose(Xp[:3, :3], Rexp @ X[:3, :3], atol=1e-12)
    np.testing.assert_array_equal(predict_pose(X, V, float("nan")), X)


def test_predict_pose_is_the_array_formulation_bit_for_bit():
    """The prediction (the bridge's step makes one per step) is, bit for bit, this arithmetic on arrays:
    ``p + V[3:] τ``, ``R ← E R`` with E the rotation of the quaternion of ``ω τ``, the last row reset — signed
    zeros, a rotation rate of zero and a horizon that is not positive included."""
    from dynamics.spatial import pose_from_vector, rotation_rows

    def reference(X, V, tau):
        if not tau > 0:
            return X.copy()
        out, Vt = X.copy(), V * tau
        wx, wy, wz = Vt[:3].tolist()
        th = math.sqrt(wx * wx + wy * wy + wz * wz)
        if th > 0.0:
            s = math.sin(0.5 * th) / th
            E = np.reshape(rotation_rows(math.cos(0.5 * th), s * wx, s * wy, s * wz), (3, 3))
            out[:3, :3] = E @ X[:3, :3]
        out[3, :] = (0.0, 0.0, 0.0, 1.0)
        out[:3, 3] += Vt[3:]
        return out

    rng = np.random.default_rng(7)
    turned = 0
    for i in range(3000):
        X = pose_from_vector(rng.normal(size=6) * rng.choice([1e-3, 0.1, 1.0, 10.0]))
        V = rng.normal(size=6) * rng.choice([1e-6, 1e-2, 1.0])
        if i % 5 == 0:
            V[:3] = -0.0 if i % 2 else 0.0
        tau = float(rng.choice([0.0, -1.0, math.nan, 1e-3, 0.07, 0.5]))
        want, got = reference(X, V, tau), predict_pose(X, V, tau)
        assert got.tobytes() == want.tobytes(), (X.tolist(), V.tolist(), tau)
        turned += tau > 0 and bool(V[:3].any())
    assert turned > 1000


def spring_damper_impact(zeta: float, h: float = 1e-5, m: float = 2.0, k: float = 8.0e3):
    """Undelayed Kelvin–Voigt contact (force only while compressed and pushing)."""
    c = 2 * zeta * math.sqrt(k * m)
    mon = ImpactMonitor(threshold=1e-9)
    x, v, t = -1e-4, 0.1, 0.0
    while not mon.impacts and t < 1.0:
        f = -max(0.0, k * x + c * v) if x > 0 else 0.0
        mon.update(t, [0, 0, 0, 0, 0, f], [0, 0, 0, 0, 0, v])
        v += f / m * h
        x += v * h
        t += h
    return mon.impacts[0]


@pytest.mark.parametrize("zeta", [0.0, 0.05, 0.2])
def test_impact_restitution_matches_the_linear_oscillator(zeta):
    imp = spring_damper_impact(zeta)
    # Kelvin–Voigt contact whose force cannot pull: it ends when k x + c v = 0, not at x = 0.
    # Closed form: Schwager & Pöschel, Granular Matter 9 (2007) 465, eq. (16), with β = ζ ω0,
    # ω = √(ω0² − β²): e = exp(−(β/ω)(π − arctan(2βω / (ω² − β²)))) for β < ω0/√2.
    w0 = 1.0
    beta = zeta * w0
    w = math.sqrt(w0**2 - beta**2)
    e = math.exp(-(beta / w) * (math.pi - math.atan2(2 * beta * w, w * w - beta * beta)))
    assert imp.v_approach == pytest.approx(0.1, rel=1e-9)
    assert imp.restitution == pytest.approx(e, abs=1e-3)


def test_passivity_controller_books_energy_exactly_and_bounds_a_delayed_spring():
    m, k, h, n_delay, v0 = 1.0, 1.0e4, 1e-3, 10, 0.2
    out = {}
    for enabled in (False, True):
        pc = PassivityController(h, e_max=0.6, enabled=enabled)
        mon = ImpactMonitor(threshold=1e-9)
        x, v = -1e-3, v0
        hist = [0.0] * n_delay  # the environment's force reaches the body n_delay steps late
        for _ in range(400):
            hist.append(-k * x if x > 0 else 0.0)
            f = pc.step([0, 0, 0, 0, 0, hist.pop(0)], [0, 0, 0, 0, 0, v])[5]
            mon.update(0.0, [0, 0, 0, 0, 0, f if enabled else f], [0, 0, 0, 0, 0, v])
            v += f / m * h
            x += v * h
        pc.step([0.0] * 6, [0, 0, 0, 0, 0, v])  # book the last step
        # the observer's net energy is the body's kinetic energy change, exactly
        assert pc.e_net == pytest.approx(0.5 * m * (v * v - v0 * v0), rel=1e-9, abs=1e-12)
        out[enabled] = abs(v) / v0
    assert out[False] > 1.2  # the delay created energy
    assert out[True] <= 0.6 + 1e-9  # the controller kept the budget


def test_delay_percentiles_equal_numpy_over_a_sliding_window():
    rng = np.random.default_rng(4)
    d = DelayEstimator(window=50, median_of=7)
    kept = []
    for k in range(400):
        rtt = int(rng.integers(100, 20_000))
        d.update(1_000_000 + rtt, 1_000_000)
        kept = (kept + [rtt])[-50:]
        if k % 37 == 0 or k == 399:
            for q in (0, 1, 50, 90, 99, 100):
                assert d.percentile_s(q) == pytest.approx(np.percentile(kept, q) * 1e-6, rel=1e-12)
            assert d.rtt_s == pytest.approx(np.median(kept[-7:]) * 1e-6, rel=1e-12)
    d.clear()
    assert math.isnan(d.percentile_s(50)) and math.isnan(d.rtt_s)


def _delayed_loop_grows(m: float, k: float, c: float, tau: float, dt: float = 2e-5, periods: float = 12.0) -> float:
    """m ẍ = −k x(t − τ) − c ẋ(t − τ), integrated with a fine step and a history buffer (semi-implicit Euler):
    the ratio of the late amplitude to the early one (> 1: it grows)."""
    n_tau = int(round(tau / dt))
    w0 = (k / m) ** 0.5
    n = int(periods * 2 * np.pi / w0 / dt)
    x, v = 1e-3, 0.0
    xs, vs = [x] * (n_tau + 1), [v] * (n_tau + 1)
    amp = []
    for _ in range(n):
        a = -(k * xs[-1 - n_tau] + c * vs[-1 - n_tau]) / m
        v += a * dt
        x += v * dt
        xs.append(x)
        vs.append(v)
        amp.append(abs(x))
    q = len(amp) // 4
    return max(amp[-q:]) / max(amp[q:2 * q])


@pytest.mark.parametrize("m, k, c", [(200.0, 2.0e4, 800.0), (20.0, 2.0e5, 3000.0), (12000.0, 8.0e5, 1.2e5)])
def test_critical_delay_is_where_the_delayed_contact_loop_starts_to_grow(m, k, c):
    """The closed form against the delayed loop integrated directly: decays at 0.97 τ_c, grows at 1.03 τ_c."""
    from protocol.stability import critical_delay

    tau_c, w = critical_delay(m, k, c)
    assert m * w * w == pytest.approx(abs(complex(k, c * w)), rel=1e-12)
    assert _delayed_loop_grows(m, k, c, 0.97 * tau_c) < 1.0 < _delayed_loop_grows(m, k, c, 1.03 * tau_c)
    assert critical_delay(m, k, 0.0)[0] == 0.0
    assert critical_delay(m, k, 1e-3 * k)[0] == pytest.approx(1e-3, rel=0.02)  # light damping: c / k


def test_impact_monitor_told_its_inputs_are_checked_finds_the_same_impacts():
    """``update(checked=True)`` (the bridge's, after the passivity step checked the same arrays) finds the impacts the
    checking call finds, number for number, and the peak force is ``np.linalg.norm``'s."""
    rng = np.random.default_rng(11)
    a, b = ImpactMonitor(threshold=1.0), ImpactMonitor(threshold=1.0)
    peaks = []
    for k in range(4000):
        touching = (k // 50) % 3 == 1
        F = rng.normal(size=6) * (40.0 if touching else 0.3) if k % 4 else np.zeros(6)
        V = rng.normal(size=6) * 0.01
        a.update(k * 4e-3, F, V)
        b.update(k * 4e-3, F, V, checked=True)
        if b._peak is not None:
            peaks.append((b._peak_norm, float(np.linalg.norm(b._peak))))
    assert len(a.impacts) > 20 and a.impacts == b.impacts
    assert peaks and all(x == y for x, y in peaks)
