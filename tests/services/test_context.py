"""Models whose state is a context (protocol.service): a model built afresh and given a running model's
context takes up the run bit-identically.

Reference: the uninterrupted run of the same scenario, topic by topic and byte by byte.
"""

from __future__ import annotations

import copy
import pickle
from pathlib import Path

import pytest

from protocol.config import load, service_module
from protocol.scheduler import advance, start
from services.sweep import build_models, sweep_config, validate

ROOT = Path(__file__).resolve().parents[2]
S = 1_000_000_000


def _scenario() -> dict:
    """The default scenario with the orbiter's attitude hold on, stiff and undamped, and a rate to stop: its jets
    fire on and off every few tenths of a second (every field of its context moves)."""
    base, _ = sweep_config(load(ROOT / "configs" / "srms_berthing.toml"),
                           {"orbiter.attitude": "hold", "orbiter.dead_band": 0.0005,
                            "orbiter.w_WO_O": [0.002, -0.003, 0.0025], "orbiter.kd": [0.0, 0.0, 0.0],
                            "orbiter.kp": [1.2e8, 8e8, 8.5e8], "orbiter.torque_max": [1e5, 4e5, 4e5]})
    return base


def _by_topic(frames: list[bytes]) -> dict[bytes, list[bytes]]:
    out: dict[bytes, list[bytes]] = {}
    for f in frames:
        i = f.index(b"\0")
        out.setdefault(f[:i], []).append(f[i + 1:])
    return out


@pytest.mark.parametrize("name", ["orbiter", "operator"])
def test_a_fresh_model_given_the_context_takes_up_the_run(name):
    cfg = _scenario()
    plan = validate(cfg)
    coupling = {n: s.coupling_ns for n, s in plan.services.items()}
    t_swap, t_end = S, 2 * S
    whole: list[bytes] = []
    advance(start(build_models(cfg), coupling=coupling), t_end, whole.append)
    got: list[bytes] = []
    sched = advance(start(build_models(cfg), coupling=coupling), t_swap, got.append)
    member = next(m for m in sched.members if m.name == name)
    fresh = service_module(plan.services[name].kind).build(copy.deepcopy(cfg), name, plan.services[name].period_ns)
    assert pickle.dumps(fresh.context) != pickle.dumps(member.obj.context)  # the run has moved on
    fresh.context = pickle.loads(pickle.dumps(member.obj.context))
    member.obj = fresh
    advance(sched, t_end, got.append)
    a, b = _by_topic(whole), _by_topic(got)
    assert sorted(a) == sorted(b)
    for topic in a:
        assert a[topic] == b[topic], topic
    if name == "orbiter":  # the jets went on and off on both sides of the swap
        from protocol.logfile import decode_bodies
        ev = decode_bodies("orbiter/event", a[b"orbiter/event"])
        times = [e["t"] for evs in ev["events"] for e in evs]
        assert min(times) < t_swap / S < max(times), times
