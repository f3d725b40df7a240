"""The follower's estimate of the master's clock (protocol.clocksync), against clocks made up here.

The master's clock is the truth; the local one runs fast by a known rate and starts at a
known offset; round trips have random, asymmetric queueing delays. The estimate must find
the rate and the offset within what the least round trips allow, and convert both ways.
"""

from __future__ import annotations

import numpy as np
import pytest

from protocol.clocksync import ClockSync


def _exchange(sync: ClockSync, rng: np.random.Generator, ppm: float, offset_ns: float, seconds: float,
              period_s: float = 0.1, queue_ms: float = 0.2) -> None:
    """Requests every ``period_s`` of master time; each leg 50 µs plus exponential queueing."""
    rate = 1.0 + ppm * 1e-6
    local = lambda m: int((m - offset_ns) * rate)  # noqa: E731  local reading at master instant m
    for k in range(int(seconds / period_s)):
        m1 = 1e9 + k * period_s * 1e9
        m2 = m1 + 50e3 + rng.exponential(queue_ms * 1e6)    # request leg
        m3 = m2 + 20e3                                      # the master's handling
        m4 = m3 + 50e3 + rng.exponential(queue_ms * 1e6)    # reply leg
        sync.on_reply({"t1": local(m1), "t2": int(m2), "t3": int(m3)}, local(m4))


@pytest.mark.parametrize("ppm", [200.0, -50.0, 0.0])
def test_drift_and_offset_recovered(ppm: float) -> None:
    rng = np.random.default_rng(7)
    sync = ClockSync()
    offset = -3.2e6  # the local clock reads 3.2 ms ahead of the master's at master 0 ... and drifts
    _exchange(sync, rng, ppm, offset, 60.0)
    rep = sync.report(0)
    assert abs(rep["drift_ppm"] - ppm) < 2.0, rep
    # at a local instant: the master time it estimates vs the truth (local = (m - offset) * rate)
    rate = 1.0 + ppm * 1e-6
    for m in (30e9, 61e9):
        loc = int((m - offset) * rate)
        err = rep["uncertainty_ns"]
        assert abs(sync.to_master(loc) - m) <= err, (m, sync.to_master(loc) - m, err)
        assert abs(sync.to_local(int(m)) - loc) <= err
    assert rep["uncertainty_ns"] < 1e6 and rep["rtt_p50_ns"] > 100e3


def test_the_minimum_rtt_filter_cuts_the_bias_of_asymmetric_queueing() -> None:
    """Queueing only on the reply leg biases each sample by half its delay (the mean of the samples by
    half the mean delay); the least round trip of each bucket is far less delayed, and the estimate's
    error stays within the uncertainty it reports."""
    rng = np.random.default_rng(3)
    sync = ClockSync()
    thetas = []
    for k in range(600):
        m1 = 1e9 + k * 1e8
        m2 = m1 + 50e3
        m4 = m2 + 50e3 + rng.exponential(5e6)
        thetas.append(((m2 - m1) + (m2 - m4)) / 2)
        sync.on_reply({"t1": int(m1), "t2": int(m2), "t3": int(m2)}, int(m4))
    naive = abs(np.mean(thetas))                     # the true offset is 0
    err = abs(sync.offset_ns(int(40e9)))
    assert naive > 2e6 and err < naive / 3, (naive, err)
    assert err <= sync.report(int(40e9))["uncertainty_ns"]


def test_a_reply_that_cannot_be_one_is_ignored() -> None:
    sync = ClockSync()
    sync.on_reply({"t1": 100, "t2": 50, "t3": 10_000}, 200)  # the master held it longer than the round trip
    assert sync.samples == 0 and not sync.fitted
