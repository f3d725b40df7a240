"""The lockstep input rule, pure (no sockets): readiness, selection, impulse, pruning."""

import itertools

import numpy as np
import pytest

from protocol.service import Inputs, Port, Sample
from protocol.stepping import InputBuffer

MS = 1_000_000


def S(t, h, **body):
    return Sample(t, h, "p", t // h, body)


def test_state_hold_faster_consumer():
    buf = InputBuffer([Port("x", "state")])
    buf.add("x", S(0, 10 * MS, v=0.0))
    for t in range(0, 10 * MS, MS):
        assert buf.ready(t, MS)
        assert buf.select(t, MS).state("x").t_ns == 0
    assert not buf.ready(10 * MS, MS)
    assert buf.missing(10 * MS, MS) == ["x"]
    buf.add("x", S(10 * MS, 10 * MS, v=1.0))
    assert buf.ready(10 * MS, MS) and buf.select(10 * MS, MS).state("x").body["v"] == 1.0


def test_state_slower_consumer_sees_sample_at_step_start():
    buf = InputBuffer([Port("x", "state")])
    for k in range(25):
        buf.add("x", S(k * MS, MS))
    assert buf.select(10 * MS, 10 * MS).state("x").t_ns == 10 * MS
    assert not buf.ready(25 * MS, 10 * MS)


def test_flow_exact_impulse_slower_consumer():
    buf = InputBuffer([Port("f", "flow")])
    F = np.arange(10.0) ** 2
    for k in range(9):
        buf.add("f", S(k * MS, MS, F=np.array([F[k]])))
    assert not buf.ready(0, 10 * MS)
    buf.add("f", S(9 * MS, MS, F=np.array([F[9]])))
    u = buf.select(0, 10 * MS)
    assert [o for _, o in u.flow("f")] == [MS] * 10
    # impulse over the step equals the sum of the producer's impulses
    assert u.mean("f", "F")[0] * 10 * MS == pytest.approx(F.sum() * MS, rel=1e-15)


def test_flow_faster_consumer_holds_covering_sample():
    buf = InputBuffer([Port("f", "flow")])
    buf.add("f", S(0, 10 * MS, F=2.5))
    for t in range(0, 10 * MS, MS):
        u = buf.select(t, MS)
        assert u.flow("f")[0][1] == MS and u.mean("f", "F") == 2.5
    assert not buf.ready(10 * MS, MS)


def test_flow_partial_overlaps_non_aligned():
    buf = InputBuffer([Port("f", "flow")])
    buf.add("f", S(0, 3, F=1.0))
    buf.add("f", S(3, 3, F=4.0))
    assert not buf.ready(2, 5)  # [2,7) needs [6,9) too
    buf.add("f", S(6, 3, F=10.0))
    u = buf.select(2, 5)
    assert [o for _, o in u.flow("f")] == [1, 3, 1]
    assert u.mean("f", "F") == pytest.approx((1.0 + 12.0 + 10.0) / 5)


def test_flow_gap_not_ready():
    buf = InputBuffer([Port("f", "flow")])
    buf.add("f", S(0, MS, F=1.0))
    buf.add("f", S(2 * MS, MS, F=1.0))
    assert not buf.ready(0, 3 * MS)


def test_mean_independent_of_arrival_order_bitwise():
    rng = np.random.default_rng(1)
    vals = rng.normal(size=(6, 6)) * 1e3
    results = set()
    for perm in itertools.permutations(range(6)):
        buf = InputBuffer([Port("f", "flow"), Port("s", "state")])
        buf.add("s", S(0, 6 * MS, v=1.0))
        for k in perm:
            buf.add("f", S(k * MS, MS, F=vals[k]))
        results.add(buf.select(0, 6 * MS).mean("f", "F").tobytes())
    assert len(results) == 1


def test_events_window_and_readiness():
    buf = InputBuffer([Port("e", "event")])
    buf.add("e", S(0, MS, events=[]))
    buf.add("e", S(MS, MS, events=[{"kind": "a"}]))
    buf.add("e", S(2 * MS, MS, events=[{"kind": "b"}]))
    assert buf.ready(2 * MS, 2 * MS) and not buf.ready(3 * MS, 2 * MS)
    ev = buf.select(2 * MS, 2 * MS).events("e")  # window (0, 2ms]
    assert [s.t_ns for s in ev] == [MS, 2 * MS]
    # slower event producer: sample at 0 with h=10ms covers consumer steps until 10ms
    buf2 = InputBuffer([Port("e", "event")])
    buf2.add("e", S(0, 10 * MS, events=[{"kind": "x"}]))
    assert buf2.ready(9 * MS, MS) and buf2.select(9 * MS, MS).events("e") == []
    assert buf2.select(0, MS).events("e")[0].body["events"][0]["kind"] == "x"


def test_absent_producers_not_waited_for():
    buf = InputBuffer([Port("s", "state"), Port("f", "flow"), Port("e", "event")], producers={})
    assert buf.ready(0, MS) and buf.absent() == ["s", "f", "e"]
    u = buf.select(0, MS)
    assert isinstance(u, Inputs)
    assert u.flow("f") == [] and u.mean("f", "F") == 0.0 and u.events("e") == [] and not u.has("s")
    with pytest.raises(KeyError, match="'s'"):
        u.state("s")


def test_not_an_input_port_ignored_and_select_raises_when_not_ready():
    buf = InputBuffer([Port("s", "state")])
    assert buf.add("other", S(0, MS)) is False
    with pytest.raises(KeyError, match="'s'"):
        buf.select(0, MS)


def test_prune_keeps_what_next_step_needs():
    buf = InputBuffer([Port("s", "state"), Port("f", "flow"), Port("e", "event")])
    for k in range(10):
        buf.add("s", S(k * MS, MS))
        buf.add("f", S(k * MS, MS, F=float(k)))
        buf.add("e", S(k * MS, MS, events=[]))
    buf.prune(5 * MS, MS)
    assert buf.count("s") == 5 and buf.count("f") == 5 and buf.count("e") == 5
    assert buf.ready(5 * MS, MS) and buf.select(5 * MS, MS).state("s").t_ns == 5 * MS
    assert [s.t_ns for s in buf.select(5 * MS, MS).events("e")] == [5 * MS]


def test_duplicate_timestamp_replaces():
    buf = InputBuffer([Port("s", "state")])
    buf.add("s", S(0, MS, v=1))
    buf.add("s", S(0, MS, v=2))
    assert buf.count("s") == 1 and buf.select(0, MS).state("s").body["v"] == 2


def test_realtime_latest():
    buf = InputBuffer([Port("s", "state"), Port("f", "flow"), Port("e", "event")])
    for k in range(3):
        buf.add("s", S(k * MS, MS, v=k))
        buf.add("f", S(k * MS, MS, F=float(k)))
        buf.add("e", S(k * MS, MS, events=[{"kind": str(k)}]))
    u = buf.latest(7 * MS, MS)
    assert u.state("s").body["v"] == 2 and u.mean("f", "F") == 2.0 and len(u.events("e")) == 3
    u = buf.latest(8 * MS, MS)
    assert u.state("s").body["v"] == 2 and u.events("e") == []
