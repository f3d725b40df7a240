"""Stiff couplings (protocol.stability): the computed limit against the runtime itself, and `check`.

The reference is the real runtime: two toy services (testkit.toys.ChainMass) joined by a
spring–damper, one integrating each mass, run by the real scheduler and coupling rule
(protocol.scheduler.simulate) with the spring's force coupled just below and just above the
limit protocol.stability computes; the coupled oscillation's energy must decay below it
and grow above it.
"""

from __future__ import annotations

import pytest

from protocol.scheduler import simulate
from protocol.stability import StiffCoupling, check_stiff, energy_ratio, stable_limit
from testkit.toys import ChainMass

MS = 1_000_000
K, C, M_A, M_B = 400.0, 2.0, 4.0, 1.0   # a heavy producer, a light consumer: the coupling carries the mode


def _runtime_energy_ratio(H_ns: int, t_end_ns: int) -> float:
    cfg = {"toy": {"mass": [M_A, M_B], "k": [K], "c": [C], "rest": [1.0], "x0": [0.0, 1.001], "v0": [0.0, 0.0]},
           "services": {"a": {"index": 0}, "b": {"index": 1}}}
    a, b = ChainMass(cfg, "a", MS), ChainMass(cfg, "b", MS)

    def energy(x_a: float, v_a: float, x_b: float, v_b: float) -> float:
        return 0.5 * M_A * v_a**2 + 0.5 * M_B * v_b**2 + 0.5 * K * (x_b - x_a - 1.0) ** 2

    e0 = energy(0.0, 0.0, 1.001, 0.0)
    simulate([a, b], t_end_ns, coupling={"a": {"*": H_ns}, "b": {"*": H_ns}})
    return energy(a.x, a.v, b.x, b.v) / e0


def test_the_computed_limit_separates_decay_from_growth_in_the_runtime():
    model = StiffCoupling("toy spring", "toy/spring0", "toy/state1", K, C, M_A, M_B, predict=1)
    limit = stable_limit(model, 1e-3, 1e-3)
    assert 0.01 < limit < 0.2
    below, above = round(limit * 1e9) - 5 * MS, round(limit * 1e9) + 5 * MS
    assert energy_ratio(model, 1e-3, 1e-3, below * 1e-9) < 1.0 < energy_ratio(model, 1e-3, 1e-3, above * 1e-9)
    # many coupling intervals, tens of the spring's periods; each run ends on its coupling grid
    assert _runtime_energy_ratio(below, 200 * below) < 1.0
    assert _runtime_energy_ratio(above, 200 * above) > 1.0


def test_an_undamped_spring_grows_at_any_coupling_a_damped_one_has_a_limit():
    """Explicit coupling feeds energy into the spring at every coupling period: only damping can take it out."""
    base = dict(what="s", topic="t", state_topic="s", k=K, m_producer=M_A,
                m_consumer=M_B, predict=2)
    lim = [stable_limit(StiffCoupling(c=c, **base), 1e-3, 1e-3) for c in (0.0, 0.5, 2.0, 8.0)]
    assert lim[0] == 0.0 and all(x > 0.01 for x in lim[1:])


def test_a_massless_producer_holding_the_spring_is_analysed_too():
    arm = StiffCoupling("grapple", "arm/wrench", "payload/state", 1e4, 2e3, 0.0, 12000.0)
    assert arm.omega == pytest.approx((1e4 / 12000.0) ** 0.5)
    assert stable_limit(arm, 2e-3, 1e-3) > 0.05


def test_a_constraint_feeding_the_consumers_acceleration_forward_diverges_when_its_body_is_the_heavier():
    """A weld with Baumgarte's correction (k = m β², c = 2 β m on the producer's mass m) and the consumer's
    acceleration fed forward: the acceleration term is an algebraic loop across the coupling, a(n) =
    −(m_p/m_c) a(n−1) + …, so it settles at every coupling up to the search's end when m_p/m_c < 1 and grows at
    every coupling when m_p/m_c > 1 (check then says so)."""
    beta = 20.0

    def weld(m_p: float, m_c: float) -> StiffCoupling:
        return StiffCoupling("weld", "c/w", "o/s", m_p * beta**2, 2 * beta * m_p, m_p, m_c, feedforward=True)

    light, heavy = weld(12000.0, 80000.0), weld(80000.0, 12000.0)
    for H in (0.001, 0.01, 0.1):
        assert energy_ratio(light, 1e-3, 1e-3, H) < 1.0
        assert energy_ratio(heavy, 1e-3, 1e-3, H) > 1.0
    # without the feed-forward the heavy one is only a damped spring: stable at 1-5 ms, where the weld is not
    spring = StiffCoupling("spring", "c/w", "o/s", heavy.k, heavy.c, heavy.m_producer, heavy.m_consumer)
    assert energy_ratio(spring, 1e-3, 1e-3, 0.001) < 1.0 and energy_ratio(spring, 1e-3, 1e-3, 0.005) < 1.0
    services = {"p": {"role": "model", "period_ns": MS, "inputs": [["o/s", "state"]], "outputs": [["c/w", "flow"]]},
                "c": {"role": "model", "period_ns": MS, "inputs": [["c/w", "flow"]], "outputs": [["o/s", "state"]]}}
    lines = check_stiff(heavy, "p", {"c/w": 10 * MS, "o/s": 10 * MS}, services)
    assert len(lines) == 1 and "algebraic loop of gain 6.67" in lines[0], lines
    assert check_stiff(light, "p", {"c/w": 10 * MS, "o/s": 10 * MS}, services) == []


def _toy_config(tmp_path, coupling_ms: int) -> str:
    cfg = tmp_path / f"toy{coupling_ms}.toml"
    cfg.write_text(f"""
[sim]
duration = 1.0
[services.a]
kind = "testkit.toys"
rate_hz = 1000
index = 0
coupling_hz = {1000 / coupling_ms:g}
[services.b]
kind = "testkit.toys"
rate_hz = 1000
index = 1
coupling_hz = {1000 / coupling_ms:g}
[toy]
mass = [{M_A}, {M_B}]
k = [{K}]
c = [{C}]
rest = [1.0]
x0 = [0.0, 1.001]
v0 = [0.0, 0.0]
""")
    return str(cfg)


def test_check_refuses_a_coupling_too_slow_for_a_stiff_port_naming_it_and_the_limit(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    from errors import ConfigError
    from protocol.config import load, validate

    limit_ms = round(stable_limit(StiffCoupling("toy", "t", "s", K, C, M_A, M_B, predict=1), 1e-3, 1e-3) * 1e3)
    validate(load(_toy_config(tmp_path, 25)))  # 40 Hz, far below the limit: fine
    slow = _toy_config(tmp_path, 125)           # 8 Hz: the coupled oscillation grows
    with pytest.raises(ConfigError) as e:
        validate(load(slow))
    msg = " ".join(e.value.problems)
    assert "toy/spring0 at 8 Hz (125 ms) is too slow for the toy spring 0" in msg and f"above {limit_ms} ms" in msg
    root = Path(__file__).resolve().parents[2]
    p = subprocess.run([sys.executable, str(root / "launch.py"), "check", slow], capture_output=True, text=True,
                       timeout=60, cwd=root)
    assert p.returncode == 2 and "too slow for the toy spring 0" in p.stderr
