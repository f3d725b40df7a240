"""Integer-ns time base: exact periods, base tick, refusal naming the rates."""

import pytest

from errors import ConfigError
from protocol.timebase import align_up, base_tick_ns, check_rates, period_ns, seconds_to_ns


def test_period_exact():
    assert period_ns(1000) == 1_000_000
    assert period_ns(100.0) == 10_000_000
    assert period_ns(0.5) == 2_000_000_000
    assert period_ns(1_000_000_000) == 1
    assert period_ns(1.6e3) == 625_000


@pytest.mark.parametrize("rate", [3, 7.0, 333.3, 0, -5, float("nan"), "x", True])
def test_period_refused_naming_rate(rate):
    with pytest.raises(ConfigError, match="services.arm.rate_hz"):
        period_ns(rate, "services.arm.rate_hz")


def test_seconds_to_ns():
    assert seconds_to_ns(0.001) == 1_000_000
    assert seconds_to_ns(2) == 2 * 10**9
    with pytest.raises(ConfigError):
        seconds_to_ns(1e-10)
    with pytest.raises(ConfigError):
        seconds_to_ns(-1)


def test_base_tick_and_dividing_rates():
    assert base_tick_ns([1_000_000, 10_000_000, 2_000_000]) == 1_000_000
    assert check_rates({"orbiter": 100, "arm": 1000, "contact": 500}) == {
        "orbiter": 10_000_000, "arm": 1_000_000, "contact": 2_000_000}


def test_non_dividing_rates_named():
    with pytest.raises(ConfigError) as ei:
        check_rates({"a": 1000, "b": 250, "c": 3, "d": 100})
    msg = str(ei.value)
    assert "b (250 Hz)" in msg and "c.rate_hz" in msg and "do not divide" in msg
    assert len(ei.value.problems) == 2


def test_declared_base_tick():
    assert check_rates({"a": 1000, "b": 500}, base_tick=500_000) == {"a": 1_000_000, "b": 2_000_000}
    with pytest.raises(ConfigError, match=r"base tick 300000 ns: a \(1000 Hz\), b \(500 Hz\)"):
        check_rates({"a": 1000, "b": 500}, base_tick=300_000)


def test_align_up():
    assert align_up(0, 10) == 0 and align_up(1, 10) == 10 and align_up(10, 10) == 10
    assert align_up(-1, 10) == 0 and align_up(7, 10, origin=5) == 15


def test_every_time_fits_int64_ns():
    from protocol.timebase import MAX_NS, check_seconds
    assert MAX_NS == 2**63 - 1
    assert seconds_to_ns(9_223_372_036) == 9_223_372_036 * 10**9  # the last whole second
    with pytest.raises(ConfigError, match="sim.duration: 1000000000000.0 s is beyond int64 ns"):
        seconds_to_ns(1e12, "sim.duration")
    with pytest.raises(ConfigError, match="b.rate_hz: 1e-12 Hz has a period of 1e\\+21 ns, beyond int64"):
        period_ns(1e-12, "b.rate_hz")
    with pytest.raises(ConfigError, match="base_tick_ns"):
        check_rates({"a": 1000}, 2**63)
    assert check_seconds(0.5, "t") is None and check_seconds(0, "t") is None
    assert "expected > 0, got 0" in check_seconds(0, "sim.ready_timeout", positive=True)
    for bad in (-1.0, float("inf"), float("nan"), 1e10, True, "1"):
        assert check_seconds(bad, "t") is not None, bad
