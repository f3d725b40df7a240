"""The lockstep input rule, pure (no sockets): readiness, selection, impulse, pruning."""

import itertools
import math

import numpy as np
import pytest

from errors import ConfigError
from protocol.service import Inputs, Port, Sample
from protocol.stepping import InputBuffer, event_progress

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


def test_a_duplicate_timestamp_never_replaces_the_held_sample():
    buf = InputBuffer([Port("s", "state")])
    assert buf.add("s", S(0, MS, v=1))
    assert buf.add("s", S(MS, MS, v=3))
    assert not buf.add("s", S(0, MS, v=2))  # a copy stamped like the first: refused, the first stays
    assert buf.count("s") == 2 and buf.select(0, MS).state("s").body["v"] == 1


def test_realtime_latest():
    buf = InputBuffer([Port("s", "state"), Port("f", "flow"), Port("e", "event")], {"s": MS, "f": MS, "e": MS})
    assert buf.latest(0, MS).mean("f", "F") == 0.0  # the span before the start: no flow
    assert buf.latest(MS, MS).mean("f", "F") == 0.0  # [0, 1) ms, nothing received: owed
    assert buf.latest(2 * MS, MS).mean("f", "F") == 0.0  # [1, 2) ms owed
    for k in range(3):
        buf.add("s", S(k * MS, MS, v=k))
        buf.add("f", S(k * MS, MS, F=float(k)))
        buf.add("e", S(k * MS, MS, events=[{"kind": str(k)}]))
    u = buf.latest(3 * MS, MS)  # flow of [2, 3) ms, and the owed spans [0, 2) ms (nothing held): added in full
    assert u.state("s").body["v"] == 2 and len(u.events("e")) == 3
    assert u.mean("f", "F") == 0.0 + 1.0 + 2.0
    u = buf.latest(4 * MS, MS)  # [3, 4) ms not received: the latest held
    assert u.state("s").body["v"] == 2 and u.events("e") == [] and u.mean("f", "F") == 2.0
    buf.add("f", S(3 * MS, MS, F=10.0))
    buf.add("f", S(4 * MS, MS, F=20.0))
    u = buf.latest(5 * MS, MS)  # [4, 5) ms, and [3, 4) corrected: 10 instead of the 2 held
    assert [o for _, o in u.flow("f")] == [MS, -MS, MS]
    assert u.mean("f", "F") == 20.0 + 10.0 - 2.0


@pytest.mark.parametrize("h, H", [(2 * MS, 10 * MS), (10 * MS, 10 * MS), (4 * MS, 10 * MS), (20 * MS, 10 * MS)])
def test_realtime_flow_applies_every_impulse_once_however_late(h, H):
    """Samples of a flow arrive late by random amounts (and sometimes several at once): the
    consumer's impulse, Σ mean·h, equals the producer's, Σ value·H, to round-off, whatever the
    lateness (the last intervals on time, so that every owed span is settled by the end); with
    every sample on time a step applies the lagged samples alone, never a correction."""
    rng = np.random.default_rng(7)
    n_late, n = 200, 220
    values = rng.normal(size=n)
    lag = h + H - math.gcd(h, H)
    for late in (0, 25 * MS):
        arrival = [(k + 1) * H + (int(rng.integers(0, late)) if late and k < n_late else 0) for k in range(n)]
        buf = InputBuffer([Port("f", "flow")], {"f": H})
        got, negative, t, k_next = 0.0, 0, 0, 0
        order = sorted(range(n), key=lambda k: arrival[k])
        while t - lag + h <= n * H:  # the consumer's span ends at the producer's last interval
            while k_next < n and arrival[order[k_next]] <= t:
                k = order[k_next]
                buf.add("f", S(k * H, H, F=float(values[k])))
                k_next += 1
            u = buf.latest(t, h)
            got += u.mean("f", "F") * h
            negative += sum(o < 0 for _, o in u.flow("f"))
            t += h
        assert got == pytest.approx(float(np.sum(values)) * H, rel=1e-12, abs=1e-3)
        assert (negative == 0) == (not late)



# ---------------------------------------------------------------- sparse events: progress from witnesses
def _svc(role, inputs=(), outputs=()):
    return {"role": role, "inputs": [list(p) for p in inputs], "outputs": [list(p) for p in outputs]}


MAIN_JOB = {
    "contact": _svc("model", [("orbiter/state", "state"), ("arm/state", "state"), ("arm/wrench", "flow"),
                              ("operator/command", "event")],
                    [("payload/state", "state"), ("contact/wrench", "flow"), ("contact/event", "event")]),
    "arm": _svc("model", [("orbiter/state", "state"), ("payload/state", "state"), ("operator/command", "event"),
                          ("contact/event", "event")], [("arm/state", "state"), ("arm/wrench", "flow")]),
    "operator": _svc("model", [], [("operator/command", "event")]),
    "orbiter": _svc("model", [("arm/wrench", "flow"), ("contact/wrench", "flow")],
                    [("orbiter/state", "state"), ("orbiter/event", "event")]),
    "logger": _svc("sink"),
}


def test_event_progress_sparse_only_where_every_consumer_has_a_witness():
    sparse, wit = event_progress("contact", MAIN_JOB)
    assert sparse == {"contact/event"} and wit == {}  # operator/command: events-only producer, no witness
    assert event_progress("orbiter", MAIN_JOB)[0] == {"orbiter/event"}  # nobody steps on it
    assert event_progress("operator", MAIN_JOB)[0] == set()  # events only: sent every step
    assert event_progress("arm", MAIN_JOB) == (frozenset(), {"contact/event": (("payload/state",), False)})
    # a consumer that takes nothing else of contact: contact keeps sending empty samples
    lone = dict(MAIN_JOB, probe=_svc("model", [("contact/event", "event")]))
    assert event_progress("contact", lone)[0] == set() and event_progress("probe", lone)[1] == {}
    # the same topics from a replay source: strict bound
    rep = {k: v for k, v in MAIN_JOB.items() if k in ("arm", "logger")}
    rep["replay"] = _svc("source", [], MAIN_JOB["contact"]["outputs"] + MAIN_JOB["orbiter"]["outputs"]
                         + MAIN_JOB["operator"]["outputs"])
    assert event_progress("arm", rep)[1] == {"contact/event": (("orbiter/state", "payload/state"), True),
                                             "operator/command": (("orbiter/state", "payload/state"), True)}


def test_witnesses_must_be_inputs_of_the_right_kinds():
    with pytest.raises(ConfigError, match="'w'"):
        InputBuffer([Port("e", "event")], {"e": MS}).set_producers({"e": MS}, {"e": (("w",), False)})
    with pytest.raises(ConfigError, match="'s'"):
        InputBuffer([Port("s", "state")], {"s": MS}).set_producers({"s": MS}, {"s": (("s",), False)})


def test_witness_bound_tight_and_strict():
    ports = [Port("w", "state"), Port("e", "event")]
    buf = InputBuffer(ports, {"w": MS, "e": MS})
    buf.set_producers({"w": MS, "e": MS}, {"e": (("w",), False)})
    buf.add("w", S(0, MS))
    assert buf.ready(0, 2 * MS) and buf.select(0, 2 * MS).events("e") == []
    buf.add("w", S(MS, MS))
    assert not buf.ready(2 * MS, 2 * MS)  # the producer may still send an event stamped 2 ms
    buf.add("w", S(2 * MS, MS))
    assert buf.ready(2 * MS, 2 * MS)
    buf.add("e", S(3 * MS, MS, events=[{"kind": "x"}]))
    assert not buf.ready(4 * MS, 2 * MS)  # the event's own bound is 4 ms: not past 4 ms
    buf.add("w", S(3 * MS, MS))
    buf.add("w", S(4 * MS, MS))
    assert buf.ready(4 * MS, 2 * MS) and [s.t_ns for s in buf.select(4 * MS, 2 * MS).events("e")] == [3 * MS]
    # strict (a source): a witness stamped t_s vouches only for events before t_s
    src = InputBuffer(ports)
    src.set_producers({"w": MS, "e": MS}, {"e": (("w",), True)})
    src.add("w", S(MS, MS))
    src.add("w", S(2 * MS, MS))
    assert src.ready(MS, MS) and not src.ready(2 * MS, MS)
    src.add("e", S(2 * MS, MS, events=[{"kind": "tie"}]))  # a tie published after the witness
    assert src.ready(2 * MS, MS) and len(src.select(2 * MS, MS).events("e")) == 1


@pytest.mark.parametrize("seed", range(6))
def test_sparse_events_with_witness_select_exactly_what_a_full_record_would(seed):
    """A producer (period hp) sends each step's events (when any) before its state; the consumer
    (period hc) steps whenever ready, fed in arrival order with its other producer interleaved at
    random. Every step's events are those of the full record in (t - hc, t], never fewer."""
    rng = np.random.default_rng(seed)
    hp, hc = int(rng.choice([1, 2, 5])) * MS, int(rng.choice([1, 3, 10])) * MS
    steps = 200
    stream = []  # producer's messages in send order
    events = {}
    for k in range(steps + 1):
        t = k * hp
        if k and rng.random() < 0.2:
            events[t] = [{"kind": str(k)}]
            stream.append(("e", S(t, hp, events=events[t])))
        stream.append(("w", S(t, hp)))
    other = [("o", S(k * MS, MS)) for k in range(steps * hp // MS + 1)]
    merged, i, j = [], 0, 0
    ahead = 0.5 if seed % 2 else 0.02  # odd seeds: even mix; even: the other producer runs ahead
    while i < len(stream) or j < len(other):  # two pipes, each in order, interleaved at random
        if j >= len(other) or (i < len(stream) and rng.random() < ahead):
            merged.append(stream[i])
            i += 1
        else:
            merged.append(other[j])
            j += 1
    buf = InputBuffer([Port("w", "state"), Port("e", "event"), Port("o", "state")])
    buf.set_producers({"w": hp, "e": hp, "o": MS}, {"e": (("w",), False)})
    t, seen = 0, []
    for topic, s in merged:
        buf.add(topic, s)
        while t + hc <= steps * hp and buf.ready(t, hc):
            got = [x.t_ns for x in buf.select(t, hc).events("e")]
            assert got == [te for te in sorted(events) if t - hc < te <= t], (t, got)
            seen += got
            buf.prune(t + hc, hc)
            t += hc
    assert t + hc > steps * hp and seen == [te for te in sorted(events) if te <= t - hc]


def _same_inputs(a, b):
    assert (a.t_ns, a.h_ns) == (b.t_ns, b.h_ns)
    assert a._state == b._state and a._flow == b._flow and a._events == b._events


@pytest.mark.parametrize("seed", range(6))
def test_take_is_ready_then_select_whatever_the_arrivals(seed):
    """take(t, h) gives what ready(t, h) and select(t, h) give, on every wake-up of a consumer
    whose producers deliver out of order, repeat timestamps and move the event bound by witness."""
    rng = np.random.default_rng(seed)
    ports = [Port("s", "state"), Port("f", "flow"), Port("e", "event"), Port("w", "state"), Port("gone", "state")]
    period = {"s": 3 * MS, "f": MS, "e": 2 * MS, "w": 2 * MS}
    a, b = InputBuffer(ports), InputBuffer(ports)
    for buf in (a, b):
        buf.set_producers(period, {"e": (("w",), False)})
    arrivals = []
    for topic, hp in period.items():
        for k in range(0, 40 * MS // hp):
            if topic == "e" and rng.random() < 0.5:
                continue  # sparse events: the witness carries the bound
            arrivals.append((topic, Sample(k * hp, hp, "p", k, {"v": float(rng.normal()), "n": k})))
    # locally shuffled: each sample arrives within a few others of its place in time order
    arrivals.sort(key=lambda x: x[1].t_ns + rng.integers(0, 4) * MS)
    h = 2 * MS
    t, i, steps = 0, 0, 0
    while t < 30 * MS and i < len(arrivals):
        got = a.take(t, h)
        if b.ready(t, h):
            _same_inputs(got, b.select(t, h))
            if rng.random() < 0.3:  # a repeated take of the same step selects afresh, the same
                for parts in got._flow.values():
                    parts.clear()  # (a model scribbling on its inputs changes nothing later)
                _same_inputs(a.take(t, h), b.select(t, h))
            t += h
            steps += 1
            if rng.random() < 0.7:
                a.prune(t, h)
                b.prune(t, h)
        else:
            assert got is None
            topic, s = arrivals[i]
            i += 1
            again = rng.random() < 0.1  # the same instant again (a replacement)
            for buf in (a, b):
                buf.add(topic, s)
                if again:
                    buf.add(topic, s._replace(body={"v": 1.0, "n": -1}))
    assert steps >= 10


def test_take_selects_again_a_topic_that_changed_after_its_check():
    buf = InputBuffer([Port("x", "state"), Port("f", "flow")])
    buf.add("x", S(0, 10 * MS, v=0.0))
    buf.add("x", S(2 * MS, 10 * MS, v=1.0))  # a newer sample of x after x was checked
    buf.add("x", S(0, 10 * MS, v=1.0))  # replaces x's sample after it was checked
    buf.add("f", S(5 * MS, MS, F=2.0))
    u = buf.take(5 * MS, MS)
    assert u.state("x").body["v"] == 1.0 and u.flow("f")[0][1] == MS
    buf.add("x", S(3 * MS, MS, v=2.0))  # a later sample that does not cover t: x is no longer ready
    assert buf.ready(5 * MS, MS)  # as ready() says (a port found ready is not checked again) ...
    with pytest.raises(KeyError, match="'x' not ready for step t=5000000"):
        buf.take(5 * MS, MS)  # ... while the selection raises as select() does
    with pytest.raises(KeyError, match="'x' not ready for step t=5000000"):
        buf.select(5 * MS, MS)


def test_oldest_wall_ns_is_the_earliest_send_time_of_the_held_states_and_the_last_flow_samples():
    """Input age (realtime): the smallest ``wall_ns`` among the selected state samples and, per flow,
    its newest overlapping sample; events do not count, and no state or flow gives None."""
    ports = [Port("a", "state"), Port("b", "state"), Port("f", "flow"), Port("e", "event")]
    buf = InputBuffer(ports)
    buf.add("a", Sample(0, 10 * MS, "p", 0, {}, 500))
    buf.add("b", Sample(0, 10 * MS, "p", 0, {}, 300))
    buf.add("f", Sample(0, MS, "p", 0, {}, 100))  # older than the flow's newest part: not counted
    buf.add("f", Sample(MS, MS, "p", 1, {}, 400))
    buf.add("e", Sample(2 * MS, 2 * MS, "p", 0, {}, 1))  # an event's send time is not an input's age
    assert buf.select(0, 2 * MS).oldest_wall_ns() == 300
    only_flow = InputBuffer([Port("f", "flow")])
    only_flow.add("f", Sample(0, MS, "p", 0, {}, 700))
    assert only_flow.select(0, MS).oldest_wall_ns() == 700
    only_events = InputBuffer([Port("e", "event")])
    only_events.add("e", Sample(0, MS, "p", 0, {}, 9))
    assert only_events.latest(0, MS).oldest_wall_ns() is None


def _held_by_rule(buf, t, h, end, u):
    """How far the steps of ``h`` from ``t`` see ``u``'s samples and no event, by asking the rule step by step
    (the reference for ``InputBuffer.hold``)."""
    if any(s.body["events"] for s in u.events("e")):  # an event sample with an empty list carries no event
        return t + h
    k = 1
    while t + (k + 1) * h <= end:
        s = t + k * h
        if not buf.ready(s, h):
            break
        v = buf.select(s, h)
        if v.state("s") is not u.state("s") or any(s.body["events"] for s in v.events("e")):
            break
        fu, fv = u.flow("f"), v.flow("f")
        if len(fu) != 1 or len(fv) != 1 or fv[0][0] is not fu[0][0]:
            break
        k += 1
    return t + k * h


@pytest.mark.parametrize("seed", range(6))
def test_hold_is_how_far_the_rule_selects_the_same_samples_and_no_event(seed):
    """hold() against the rule itself asked step by step: states of random coupling periods that end early, a flow
    in pieces of random lengths, events at random instants and their progress bound from the state (a witness)."""
    rng = np.random.default_rng(seed)
    h = MS
    checked = strided = 0
    for _ in range(60):
        buf = InputBuffer([Port("s", "state"), Port("f", "flow"), Port("e", "event")])
        Hs, He = int(rng.integers(1, 12)) * MS, int(rng.integers(1, 6)) * MS
        buf.set_producers({"s": Hs, "f": MS, "e": He}, {"e": (("s",), False)})  # s witnesses e's progress
        for k in range(0, int(rng.integers(30, 60)) * MS, Hs):
            buf.add("s", S(k, Hs, v=0.0))
        t = 0
        while t < 60 * MS:
            n = int(rng.integers(1, 15)) * MS
            buf.add("f", S(t, n, F=1.0))
            t += n
        for k in range(30):  # at every coupling instant: empty (none) or carrying an event
            buf.add("e", S(k * He, He, events=[{"kind": "x"}] if rng.random() < 0.08 else []))
        for t in range(0, 40 * MS, MS):
            if not buf.ready(t, h):
                continue
            u = buf.select(t, h)
            end = t + int(rng.integers(1, 20)) * h
            got = buf.hold(t, h, end, u)
            assert got == _held_by_rule(buf, t, h, end, u), (t, end)
            checked += 1
            strided += got > t + h
    assert checked > 1000 and strided > 300
