"""The launcher's public hooks (progress and event tap), in-process, no worker processes."""

from __future__ import annotations

import io
import json

import pytest

import testkit.toys  # noqa: F401  (registers the toy topics)
from protocol.bus import ControlClient
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


def test_a_forged_follower_and_a_stranger_are_ignored_and_counted():
    """A single-host run expects no follower launcher: a DEALER calling itself ``follower:x``
    that reports a service as dead, and one with a name of no service, change nothing."""
    clients: list[ControlClient] = []

    def forge(t_ns, wall_s, stats):
        if not clients:  # on the launcher's thread, once the run has started
            for ident, msgs in (("follower:x", [{"op": "hello"}, {"op": "died", "name": "a", "reason": "forged"}]),
                                ("c", [{"op": "error", "reason": "forged"}])):
                c = ControlClient(launcher.url, ident)
                for m in msgs:
                    c.send(m)
                clients.append(c)
            clients[-1].sock.send(b"\xc1 not msgpack")

    out, err = io.StringIO(), io.StringIO()
    launcher = Launcher(_plan(3.0), inprocess=True, out=out, err=err, tick_period=0.0, on_tick=forge)
    try:
        code = launcher.run()
    finally:
        for c in clients:
            c.close()
    assert code == 0, err.getvalue()
    summary = json.loads(out.getvalue().strip().splitlines()[-1])
    assert summary["control_ignored"] == {"follower:x": 2, "c": 1, "(not a msgpack map)": 1}
    assert "ignored a control message from 'follower:x'" in err.getvalue()


def test_an_expected_follower_reports_a_death_on_its_host():
    """With b placed on another host (``--only a``), a follower launcher's word that b died fails the run."""
    import threading
    import time

    plan = _plan(3.0)
    plan.only = ("a",)
    err = io.StringIO()
    launcher = Launcher(plan, inprocess=True, out=io.StringIO(), err=err)
    result: list[int] = []
    th = threading.Thread(target=lambda: result.append(launcher.run()))
    th.start()
    try:
        t_end = time.monotonic() + 10.0
        while getattr(launcher, "server", None) is None and time.monotonic() < t_end:
            time.sleep(0.01)
        with ControlClient(launcher.url, "follower:y") as c:
            c.send({"op": "died", "name": "a", "reason": "not remote"})  # a runs here: ignored
            c.send({"op": "hello"})
            c.send({"op": "died", "name": "b", "reason": "killed by SIGKILL"})
            th.join(10.0)
    finally:
        th.join(10.0)
    assert result == [1]
    assert "service 'b' died on y: killed by SIGKILL" in err.getvalue()
    assert "ignored a control message from 'follower:y'" in err.getvalue()
