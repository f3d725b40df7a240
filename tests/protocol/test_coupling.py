"""Coupling steps (protocol.coupling) and the in-process scheduler (protocol.scheduler).

Independent references: sums and maxima written out here by hand; momentum conservation
of the toy chain (Σ m v, no external force) across processes at any coupling; the
codec's own decode for the in-process hand-over.
"""

from __future__ import annotations

import numpy as np
import pytest

from errors import ConfigError, LifecycleError
from protocol.codec import decode, encode, topic_codec
from protocol.coupling import PortCoupler, complete, coupling_periods, is_due
from protocol.messages import SCHEMAS, schema_for
from protocol.scheduler import simulate
from testkit.toys import ChainMass

MS = 1_000_000


def _wrench(rng: np.random.Generator) -> dict:
    return {"F_Lo_W": rng.normal(size=6) * 100, "p_WoLo_W": rng.normal(size=3), "active": bool(rng.random() < 0.3)}


def test_flow_mean_over_the_interval_keeps_the_impulse_about_wo_and_the_peaks():
    """contact/wrench at 1 ms coupled at 5 ms: one sample per interval, stamped at its start, published after
    its last value; its wrench about Wo times H is the sum of the steps' wrenches about Wo times h."""
    rng = np.random.default_rng(1)
    c = PortCoupler("contact/wrench", "flow", MS, 5 * MS, schema_for("contact/wrench"))
    values = [_wrench(rng) for _ in range(15)]
    out = c.initial(0, values[0])
    assert out == []
    published = []
    for k in range(1, 15):  # the value returned by the step ending k ms holds over [k, k + 1) ms
        got = c.step(k * MS, values[k])
        if (k + 1) % 5:
            assert got == []
        else:
            assert len(got) == 1
            published.append((k, got[0]))
    assert [(k, t, h) for k, (t, h, _) in published] == [(4, 0, 5 * MS), (9, 5 * MS, 5 * MS), (14, 10 * MS, 5 * MS)]
    for j, (_, (t, h, body)) in enumerate(published):
        part = values[5 * j: 5 * j + 5]
        about_wo = sum(np.concatenate([v["F_Lo_W"][:3] + np.cross(v["p_WoLo_W"], v["F_Lo_W"][3:]), v["F_Lo_W"][3:]])
                       for v in part) / 5
        p = body["p_WoLo_W"]
        assert np.array_equal(p, part[-1]["p_WoLo_W"])  # referred to the interval's last point
        got = np.concatenate([body["F_Lo_W"][:3] + np.cross(p, body["F_Lo_W"][3:]), body["F_Lo_W"][3:]])
        np.testing.assert_allclose(got, about_wo, rtol=1e-13, atol=1e-10)
        assert body["active"] == any(v["active"] for v in part)
        assert body["F_peak"].tolist() == [max(np.linalg.norm(v["F_Lo_W"][:3]) for v in part),
                                           max(np.linalg.norm(v["F_Lo_W"][3:]) for v in part)]
        decode("contact/wrench", encode("contact/wrench", body, sender="c", seq=j, t_ns=t, h_ns=h))


def test_state_at_the_coupling_instants_with_the_interval_peak():
    rng = np.random.default_rng(2)
    c = PortCoupler("arm/state", "state", 2 * MS, 10 * MS, schema_for("arm/state"))
    taus = [rng.normal(size=6) * 50 for _ in range(11)]

    def body(k: int) -> dict:
        return {"tau": taus[k]}

    t0 = c.initial(0, {"tau": taus[0], "q": np.zeros(6)})
    assert [(t, h) for t, h, _ in t0] == [(0, 10 * MS)] and np.array_equal(t0[0][2]["tau_peak"], np.abs(taus[0]))
    for k in range(1, 5):  # not coupling instants: a partial body (the peak's source) is enough
        assert c.step(2 * MS * k, body(k)) == []
    full = {"tau": taus[5], "q": np.ones(6)}
    (t, h, out), = c.step(10 * MS, full)
    assert (t, h) == (10 * MS, 10 * MS) and np.array_equal(out["q"], np.ones(6))
    assert np.array_equal(out["tau_peak"], np.max(np.abs(taus[1:6]), axis=0))  # steps ending in (0, 10] ms
    assert c.step(12 * MS, None) == []
    assert c.step(20 * MS, None) == [(20 * MS, 10 * MS, None)]  # due with no body: the caller reports it


def test_events_of_the_interval_travel_together_at_its_instant():
    c = PortCoupler("contact/event", "event", MS, 10 * MS, schema_for("contact/event"))
    assert c.initial(0, {"events": []}) == [(0, 10 * MS, {"events": []})]
    got = []
    for k in range(1, 21):
        evs = {"events": [{"kind": "first_contact", "t": k * 1e-3}]} if k in (3, 7, 12) else None
        got += c.step(k * MS, evs)
    assert [(t, [e["t"] for e in b["events"]]) for t, _, b in got] == [(10 * MS, [0.003, 0.007]), (20 * MS, [0.012])]


def test_one_step_coupling_publishes_the_model_body_unchanged():
    rng = np.random.default_rng(3)
    c = PortCoupler("contact/wrench", "flow", MS, MS, schema_for("contact/wrench"))
    v = _wrench(rng)
    (t, h, body), = c.step(7 * MS, v)
    assert (t, h) == (7 * MS, MS) and all(body[k] is v[k] for k in v)
    assert body["F_peak"].tolist() == [np.linalg.norm(v["F_Lo_W"][:3]), np.linalg.norm(v["F_Lo_W"][3:])]
    assert complete("contact/wrench", v)["F_peak"].tolist() == body["F_peak"].tolist()


def test_a_run_must_start_on_every_port_grid_and_periods_must_be_whole_multiples():
    with pytest.raises(ConfigError, match="whole multiple"):
        PortCoupler("arm/state", "state", 2 * MS, 5 * MS)
    with pytest.raises(ConfigError, match="coupling grid"):
        PortCoupler("arm/state", "state", 2 * MS, 10 * MS).initial(4 * MS, {"q": 0})
    assert is_due(20 * MS, 10 * MS) and not is_due(22 * MS, 10 * MS)


def test_default_coupling_is_the_fastest_consumer_rounded_to_the_producer_steps():
    services = {
        "p": {"role": "model", "period_ns": 2 * MS, "inputs": [],
              "outputs": [["x/state", "state"], ["x/flow", "flow"], ["x/log", "state"], ["x/ev", "event"]]},
        "fast": {"role": "model", "period_ns": MS, "inputs": [["x/flow", "flow"]], "outputs": []},
        "slow": {"role": "model", "period_ns": 25 * MS, "inputs": [["x/state", "state"], ["x/ev", "event"]],
                 "outputs": []},
        "log": {"role": "sink", "period_ns": MS, "inputs": [["x/log", "state"]], "outputs": []},
    }
    got = coupling_periods(services)
    # slow's 25 ms rounds down to 24 ms (12 steps); a faster consumer than the producer: its step; the logger
    # is no stepping consumer: every step
    assert got == {"x/state": 24 * MS, "x/flow": 2 * MS, "x/log": 2 * MS, "x/ev": 24 * MS}
    assert coupling_periods(services, {"p": {"*": 10 * MS, "x/flow": 4 * MS}})["x/flow"] == 4 * MS
    with pytest.raises(ConfigError, match="not a whole multiple"):
        coupling_periods(services, {"p": {"x/state": 3 * MS}})
    with pytest.raises(ConfigError, match="not an output"):
        coupling_periods(services, {"p": {"y/state": 4 * MS}})


@pytest.mark.parametrize("topic", sorted(t for t in SCHEMAS if not t.endswith("/full")))
def test_in_process_hand_over_equals_what_another_process_decodes(topic):
    """encode_local's sample equals decode(encode(...)): values bit for bit, types, read-only arrays."""
    rng = np.random.default_rng(abs(hash(topic)) % 2**32)
    values = {"f8": None, "int": -(1 << 40), "bool": True, "str": "auto", "list[str]": ("a", "b"),
              "map": {"tx": 3, "rate": 0.5, "port": "/dev/ttyUSB0", "ok": False},
              "events": [{"kind": "capture", "t": 1.5, "who": ["arm"], "m": {"a": [1, 2.5]}}]}
    body = {}
    for k, (ftype, shape) in SCHEMAS[topic].fields.items():
        body[k] = (float(rng.normal()) if shape == () else rng.normal(size=shape)) if ftype == "f8" else values[ftype]
    codec = topic_codec(topic)
    payload, local = codec.encode_local(body, "svc", 9, 40 * MS, 10 * MS, 123)
    remote = decode(topic, payload)
    assert payload == codec.encode(body, "svc", 9, 40 * MS, 10 * MS, 123)
    assert local[:4] == remote[:4] and local.wall_ns == remote.wall_ns
    for k, v in remote.body.items():
        w = local.body[k]
        assert type(w) is type(v), k
        if isinstance(v, np.ndarray):
            assert w.dtype == v.dtype and w.shape == v.shape and w.tobytes() == v.tobytes() and not w.flags.writeable
        else:
            assert w == v, k
    if "events" in body:  # a fresh copy: the producer's later changes do not reach the consumer
        body["events"][0]["t"] = -1.0
        assert local.body["events"][0]["t"] == 1.5


CHAIN = {"toy": {"mass": [1.0, 4.0, 2.0], "k": [40.0, 25.0], "rest": [1.0, 1.0], "x0": [0.0, 1.1, 2.3],
                 "v0": [0.3, -0.2, 0.1], "events": True},
         "services": {"a": {"index": 0}, "b": {"index": 1}, "c": {"index": 2}}}


def _chain(periods: dict[str, int]) -> list[ChainMass]:
    return [ChainMass(CHAIN, n, periods[n]) for n in ("a", "b", "c")]


@pytest.mark.parametrize("coupling", [None, {"a": {"*": 10 * MS}, "b": {"*": 10 * MS}},
                                      {"a": {"*": 20 * MS}, "b": {"*": 20 * MS}, "c": {"*": 20 * MS}}])
def test_momentum_is_conserved_to_round_off_whatever_the_coupling(coupling):
    """Three masses on springs at 1 kHz, 500 Hz and 100 Hz; each spring computed by one service and its
    opposite applied by the other as a mean over coupling intervals: Σ m v stays at its initial value."""
    models = _chain({"a": MS, "b": 2 * MS, "c": 10 * MS})
    m = CHAIN["toy"]["mass"]
    p0 = sum(mi * vi for mi, vi in zip(m, CHAIN["toy"]["v0"], strict=True))
    simulate(models, 2000 * MS, coupling=coupling)
    p1 = sum(mi * mod.v for mi, mod in zip(m, models, strict=True))
    assert abs(p1 - p0) < 1e-12 * max(1.0, abs(p0)) + 1e-13
    assert all(mod.rows[-1][0] == pytest.approx(2.0) for mod in models)  # every one reached the end
    if coupling is not None:  # a coarse coupling is a different discretization: not the same trajectory
        ref = _chain({"a": MS, "b": 2 * MS, "c": 10 * MS})
        simulate(ref, 2000 * MS)
        assert any(r.x != x.x for r, x in zip(ref, models, strict=True))


def test_a_coupling_that_makes_a_cycle_wait_on_itself_is_reported_not_hung():
    """b reads a's state every 1 ms while a needs b's 20 ms spring mean: neither can go on."""
    models = _chain({"a": MS, "b": MS, "c": MS})
    with pytest.raises(LifecycleError, match="cannot go on"):
        simulate(models, 100 * MS, coupling={"b": {"*": 20 * MS}, "a": {"*": MS}})


def test_a_float_fields_flow_mean_is_the_float64_sum_oldest_first_over_the_count():
    """A flow's float field is averaged as float64 values summed oldest first (numpy's sequential
    accumulation is the reference), bit for bit, and published as a float."""
    import testkit.toys  # noqa: F401  (registers the toy topics)
    c = PortCoupler("toy/spring7", "flow", MS, 4 * MS, schema_for("toy/spring7"))
    F = [0.1, 1e16, 0.7, -1e16, 3.3, 2.0 / 3.0, 1e-3, 5.5]  # sums whose value depends on the order
    got = c.initial(0, {"F": F[0], "x": np.array([0.0])})
    for k in range(1, 8):
        got += c.step(k * MS, {"F": F[k], "x": np.array([float(k)])})
    assert [(t, h) for t, h, _ in got] == [(0, 4 * MS), (4 * MS, 4 * MS)]
    for j, (_, _, body) in enumerate(got):
        part = np.array(F[4 * j: 4 * j + 4])
        ref = np.add.accumulate(part)[-1] / 4
        assert type(body["F"]) is float and body["F"] == ref
        x = np.arange(4.0 * j, 4.0 * j + 4)
        assert np.array_equal(body["x"], [np.add.accumulate(x)[-1] / 4])
