"""The acceptance rule of a run's samples (protocol.provenance): each rule refuses what it names."""

from __future__ import annotations

import pytest

from protocol.provenance import SampleGate

MS = 1_000_000
SERVICES = {
    "orbiter": {"role": "model", "period_ns": 10 * MS, "outputs": [("orbiter/state", "state")]},
    "arm": {"role": "model", "period_ns": 2 * MS,
            "outputs": [("arm/state", "state"), ("arm/wrench", "flow"), ("arm/events", "event")]},
    "replay": {"role": "source", "period_ns": MS, "outputs": [("payload/state", "state")]},
}
PRODUCERS = {"orbiter/state": 10 * MS, "arm/state": 10 * MS, "arm/wrench": 2 * MS, "arm/events": 10 * MS,
             "payload/state": MS}


def gate(**kw) -> SampleGate:
    return SampleGate(PRODUCERS, SERVICES, **kw)


def test_the_producers_samples_on_their_grid_pass_in_order():
    g = gate(t_end_ns=100 * MS)
    for k in range(11):
        assert g.reject("orbiter/state", "orbiter", k, 10 * k * MS, 10 * MS) is None
        assert g.reject("arm/wrench", "arm", 5 * k, 10 * k * MS, 2 * MS) is None
    assert g.reject("arm/events", "arm", 0, 30 * MS, 10 * MS) is None  # sparse: fewer samples than instants


@pytest.mark.parametrize("sender, seq, t, h, field", [
    ("x", 1, 10 * MS, 10 * MS, "sender 'x' is not the producer 'orbiter'"),
    ("orbiter", 1, 10 * MS, 10**15, "h_ns 1000000000000000 is not the coupling period 10000000"),
    ("orbiter", 1, 15 * MS, 10 * MS, "not on the coupling grid"),
    ("orbiter", 0, -5, 10 * MS, "t_ns -5 outside the run"),
    ("orbiter", 10**6, 10 * MS, 10 * MS, "seq 1000000 beyond the 2 samples due by t_ns 10000000"),
    ("orbiter", 20, 200 * MS, 10 * MS, "t_ns 200000000 outside the run [0, 100000000]"),
])
def test_each_rule_refuses_what_it_names(sender, seq, t, h, field):
    g = gate(t_end_ns=100 * MS)
    why = g.reject("orbiter/state", sender, seq, t, h)
    assert why is not None and field in why
    assert g.reject("orbiter/state", "orbiter", 1, 10 * MS, 10 * MS) is None  # a refusal moves nothing


def test_a_second_copy_of_an_instant_and_the_past_are_refused():
    g = gate()
    assert g.reject("orbiter/state", "orbiter", 2, 20 * MS, 10 * MS) is None
    assert "not after the last accepted 20000000" in g.reject("orbiter/state", "orbiter", 2, 20 * MS, 10 * MS)
    assert g.reject("orbiter/state", "orbiter", 1, 10 * MS, 10 * MS) is not None
    assert g.reject("orbiter/state", "orbiter", 3, 30 * MS, 10 * MS) is None


def test_a_sources_topics_are_checked_for_time_only_and_unproduced_topics_pass():
    g = gate(t_end_ns=100 * MS)
    assert g.reject("payload/state", "contact", 7, 3 * MS + 1, 1) is None  # a log's senders and periods
    assert g.reject("payload/state", "contact", 8, 3 * MS + 1, 1) is not None  # but in order
    assert g.reject("payload/state", "contact", 9, -1, 1) is not None
    assert g.reject("sim/stats", "anyone", 5, -5, 1) is None


def test_full_rate_twins_are_checked_against_the_producers_own_period():
    g = gate(full_rate=["arm"])
    assert g.reject("arm/state/full", "arm", 3, 6 * MS, 2 * MS) is None
    assert g.reject("arm/state/full", "arm", 4, 8 * MS, 10 * MS) is not None
    assert "arm/events/full" not in g.rules  # event ports have no full-rate twin
    assert "orbiter/state/full" not in g.rules
