"""The launcher's public hooks (progress and event tap), in-process, no worker processes."""

from __future__ import annotations

import io

import pytest

import testkit.toys  # noqa: F401  (registers the toy topics)
from protocol.config import validate
from protocol.launcher import Launcher

pytestmark = pytest.mark.integration


def _plan(duration: float = 0.3):
    cfg = {"sim": {"duration": duration, "transport": "inproc", "stats_period": 0.05},
           "toy": {"mass": [1.0, 4.0], "k": [40.0], "rest": [1.0], "x0": [0.0, 1.1], "v0": [0.0, 0.0]},
           "services": {"a": {"kind": "testkit.toys", "rate_hz": 1000, "index": 0},
                        "b": {"kind": "testkit.toys", "rate_hz": 100, "index": 1}}}
    return validate(cfg)


def test_on_tick_and_on_message_hooks():
    ticks: list[tuple[int, float, dict]] = []
    seen: list[tuple[str, int, str]] = []
    plan = _plan()
    code = Launcher(plan, inprocess=True, out=io.StringIO(), err=io.StringIO(), tick_period=0.0,
                    on_tick=lambda t, w, st: ticks.append((t, w, st)),
                    on_message=lambda topic, s: seen.append((topic, s.t_ns, s.sender)),
                    subscribe=("toy/state1",)).run()
    assert code == 0
    # every sample of b's state, in order, decoded, from t0 to the end (100 Hz over 0.3 s)
    assert seen == [("toy/state1", k * 10_000_000, "b") for k in range(31)]
    times = [t for t, _, _ in ticks]
    assert times == sorted(times) and times[-1] == plan.duration_ns  # the final call has the end time
    assert all(w >= 0.0 for _, w, _ in ticks) and set(ticks[-1][2]) == {"a", "b"}


def test_a_raising_hook_fails_the_run():
    def boom(*_):
        raise RuntimeError("hook")

    err = io.StringIO()
    code = Launcher(_plan(5.0), inprocess=True, out=io.StringIO(), err=err, on_message=boom,
                    subscribe=("toy/state0",)).run()
    assert code == 1 and "hook on_message raised RuntimeError: hook" in err.getvalue()
