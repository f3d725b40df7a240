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
    for k in range(51):
        assert g.reject("arm/wrench", "arm", k, 2 * k * MS, 2 * MS) is None
    assert g.reject("arm/events", "arm", 0, 30 * MS, 10 * MS) is None  # sparse: fewer samples than instants
    assert g.reject("arm/events", "arm", 1, 60 * MS, 10 * MS) is None


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


END = 10_000 * MS  # a 10 s run


def test_a_forged_end_of_run_sample_is_refused_and_the_genuine_ones_go_on():
    """The repro of issue 31: in the producer's name, on the grid at the run's end, with the
    coupling period and seq = t / H, published once mid-run. Before: accepted, and every genuine
    sample after it refused as "not after the last accepted" (the consumers waited forever)."""
    g = gate(t_end_ns=END)
    for k in range(480):
        assert g.reject("orbiter/state", "orbiter", k, 10 * k * MS, 10 * MS) is None
    why = g.reject("orbiter/state", "orbiter", END // (10 * MS), END, 10 * MS)
    assert why is not None and "ahead of the next instant 4800000000" in why
    for k in range(480, 1001):
        assert g.reject("orbiter/state", "orbiter", k, 10 * k * MS, 10 * MS) is None
    assert g.last["orbiter/state"] == END


@pytest.mark.parametrize("ahead", [1, 2, 479])
def test_a_dense_topic_takes_exactly_its_next_instant(ahead):
    g = gate(t_end_ns=END)
    for k in range(3):
        assert g.reject("arm/state", "arm", k, 10 * k * MS, 10 * MS) is None
    if ahead > 1:
        assert "ahead of the next instant 30000000" in g.reject("arm/state", "arm", 2 + ahead, 10 * (2 + ahead) * MS,
                                                                10 * MS)
    assert g.reject("arm/state", "arm", 3, 30 * MS, 10 * MS) is None


def test_the_first_sample_of_a_dense_topic_may_be_any_instant():
    """A sink added to a restored run starts in the middle of it."""
    g = gate(t_end_ns=END)
    assert g.reject("orbiter/state", "orbiter", 70, 700 * MS, 10 * MS) is None
    assert g.reject("orbiter/state", "orbiter", 71, 710 * MS, 10 * MS) is None


def test_a_sparse_sample_is_bounded_by_its_producers_dense_progress():
    """arm/events is sparse (sent only with events): at most last + 2 H of each dense arm port
    this gate has accepted, the least of them (module docstring)."""
    g = gate(t_end_ns=END)
    assert g.reject("arm/events", "arm", 0, 900 * MS, 10 * MS) is None  # nothing of the arm seen yet: no bound
    g = gate(t_end_ns=END)
    for k in range(3):
        assert g.reject("arm/state", "arm", k, 10 * k * MS, 10 * MS) is None  # last 20 ms: bound 40 ms
    assert "beyond 40000000" in g.reject("arm/events", "arm", 5, 50 * MS, 10 * MS)
    assert g.reject("arm/events", "arm", 4, 40 * MS, 10 * MS) is None
    for k in range(11):
        assert g.reject("arm/wrench", "arm", k, 2 * k * MS, 2 * MS) is None  # last 20 ms: bound 24 ms
    g.last["arm/events"] = 0
    assert "beyond 24000000" in g.reject("arm/events", "arm", 3, 30 * MS, 10 * MS)
    assert g.reject("arm/events", "arm", 2, 20 * MS, 10 * MS) is None


def test_event_ports_sent_at_every_instant_are_dense():
    """An events-only producer (the operator) sends every event port at every instant."""
    services = {"op": {"role": "model", "period_ns": 10 * MS, "outputs": [("op/cmd", "event")]},
                "arm": {"role": "model", "period_ns": 10 * MS, "inputs": [("op/cmd", "event")],
                        "outputs": [("arm/state", "state")]}}
    g = SampleGate({"op/cmd": 10 * MS, "arm/state": 10 * MS}, services, END)
    assert g.rules["op/cmd"] == ("op", 10 * MS, True)
    assert g.reject("op/cmd", "op", 0, 0, 10 * MS) is None
    assert "ahead of the next instant" in g.reject("op/cmd", "op", 900, 9000 * MS, 10 * MS)
    assert g.reject("op/cmd", "op", 1, 10 * MS, 10 * MS) is None


def test_an_authenticated_peer_speaks_only_for_its_own_services():
    g = gate(speaks_for={"arm": ["arm"], "physics": ["orbiter", "arm"]})
    assert g.impostor("arm", "arm") is None and g.impostor("orbiter", "physics") is None
    assert g.impostor("orbiter", "arm") == "sender 'orbiter' is not spoken for by the authenticated peer 'arm'"
    assert g.impostor("orbiter", None) is None  # no keys: the transport names nobody
    assert g.impostor("orbiter", "client") is None  # the shared client key: names no service
    assert gate().impostor("orbiter", "arm") is None  # no identities known


def test_a_realtime_gate_only_orders():
    """In realtime a reconnected link may skip instants: the gate takes any later instant on the grid."""
    g = gate(t_end_ns=END, lockstep=False)
    assert g.reject("orbiter/state", "orbiter", 0, 0, 10 * MS) is None
    assert g.reject("orbiter/state", "orbiter", 5, 50 * MS, 10 * MS) is None  # a gap
    assert g.reject("arm/state", "arm", 0, 0, 10 * MS) is None
    assert g.reject("arm/events", "arm", 9, 90 * MS, 10 * MS) is None
    assert g.reject("orbiter/state", "orbiter", 5, 50 * MS, 10 * MS) is not None  # still in order
