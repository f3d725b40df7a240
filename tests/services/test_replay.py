"""Replay: topic selection, pacing and controls (no bus), replay and re-simulation end to end."""

from __future__ import annotations

import io
import json
import threading
import time
import tomllib
from pathlib import Path

import numpy as np
import pytest
import tomli_w

import testkit.toys  # noqa: F401  (registers the toy topics)
from errors import ConfigError, LogError
from protocol.codec import decode, encode
from protocol.logfile import open_log, select_topics
from services.logger import McapLogger
from services.replay import ReplaySource
from tests.services.test_logger import cli, launch, record_toy_run, toy_config
from tools.resim import compare_outputs, replay_config

MS = 1_000_000


@pytest.fixture()
def small_log(tmp_path) -> tuple[Path, list[tuple[int, str, bytes]]]:
    """Two toy topics at 1 kHz and 100 Hz over 1 s, plus sim/stats; the expected time order."""
    path = tmp_path / "small.mcap"
    lg = McapLogger(path)
    expected = []
    for i in range(1001):
        p = encode("toy/state0", {"x": float(i), "v": 0.0}, sender="a", seq=i, t_ns=i * MS, h_ns=MS)
        lg.on_message("toy/state0", p)
        expected.append((i * MS, "toy/state0", p))
        if i % 10 == 0:
            q = encode("toy/state1", {"x": -float(i), "v": 0.0}, sender="b", seq=i // 10, t_ns=i * MS, h_ns=10 * MS)
            lg.on_message("toy/state1", q)
            expected.append((i * MS, "toy/state1", q))
    stats = {"state": "running", "mode": "lockstep", "steps": 1, "overruns": 0, "jitter_p50_ns": 0,
             "jitter_p99_ns": 0, "input_age_ns": 0, "msgs_received": 0, "msgs_dropped": 0, "msgs_invalid": 0}
    lg.on_message("sim/stats", encode("sim/stats", stats, sender="a", seq=0, t_ns=5 * MS, h_ns=MS))
    lg.close()
    return path, expected


class FakeClock:
    """A monotonic clock that only sleep() advances."""

    def __init__(self) -> None:
        self.t = 0
        self.slept = 0.0

    def clock(self) -> int:
        return self.t

    def sleep(self, s: float) -> None:
        self.slept += s
        self.t += int(s * 1e9)


def drain(src: ReplaySource) -> list[tuple[int, str, bytes]]:
    out = []
    while (item := src.read()) is not None:
        out.append(item)
    return out


# ---------------------------------------------------------------- selection
def test_select_topics_patterns_defaults_and_unknown_reported():
    logged = ["arm/state", "arm/wrench", "orbiter/state", "sim/control", "sim/stats"]
    assert select_topics(logged) == ["arm/state", "arm/wrench", "orbiter/state"]  # sim/* only when named
    assert select_topics(logged, ["arm/*"], ["arm/wrench"]) == ["arm/state"]
    assert select_topics(logged, ["sim/stats", "orbiter/state"]) == ["orbiter/state", "sim/stats"]
    assert select_topics(logged, ["*"]) == ["arm/state", "arm/wrench", "orbiter/state"]
    with pytest.raises(ConfigError) as e:
        select_topics(logged, ["arm/*", "contact/*", "payload/state"], ["hil/*"])
    assert "contact/*" in str(e.value) and "payload/state" in str(e.value) and "hil/*" in str(e.value)
    assert len(e.value.problems) == 3


# ---------------------------------------------------------------- the source alone
def test_max_rate_reproduces_the_log_in_time_order(small_log):
    path, expected = small_log
    src = ReplaySource(path)
    got = drain(src)
    src.close()
    assert got == expected
    assert [o.topic for o in src.outputs] == ["toy/state0", "toy/state1"]


def test_window_and_topic_filter(small_log):
    path, expected = small_log
    src = ReplaySource(path, topics=["toy/state1"], start_ns=200 * MS, end_ns=300 * MS)
    assert drain(src) == [e for e in expected if e[1] == "toy/state1" and 200 * MS <= e[0] <= 300 * MS]
    with pytest.raises(ConfigError, match="empty"):
        ReplaySource(path, start_ns=900 * MS, end_ns=800 * MS)
    with pytest.raises(ConfigError, match="toy/nothing"):
        ReplaySource(path, topics=["toy/nothing"])
    with pytest.raises(LogError, match="no such file"):
        ReplaySource(path.with_name("missing.mcap"))


def test_rate_paces_against_the_recorded_time(small_log):
    path, expected = small_log
    fc = FakeClock()
    src = ReplaySource(path, rate=4.0, clock=fc.clock, sleep=fc.sleep)
    got = drain(src)
    assert got == expected
    assert fc.t == pytest.approx(1.0e9 / 4, abs=2 * MS)  # 1 s of log at 4x: 0.25 s of wall time


def test_paced_replay_keeps_the_recorded_timing_from_one_anchor_and_reports_lateness(small_log):
    path, expected = small_log

    class Jittery(FakeClock):
        """Every sleep overshoots by 0.2 ms (as a real one does): no drift may build up from it."""

        def sleep(self, s: float) -> None:
            super().sleep(s)
            self.t += 200_000

    fc = Jittery()
    out = io.StringIO()
    src = ReplaySource(path, rate=1.0, clock=fc.clock, sleep=fc.sleep, report=out)
    sent_at = []
    while (item := src.read()) is not None:
        sent_at.append((fc.t, item[0]))
    assert [t for _, t in sent_at] == [e[0] for e in expected]
    w0, t0 = sent_at[0]
    late = np.array([w - (w0 + (t - t0)) for w, t in sent_at])  # against the recorded timing, from one anchor
    assert late.min() >= 0 and late.max() <= 200_000  # one overshoot at most: no accumulated drift
    lt = src.lateness.summary()
    assert lt["messages"] == len(expected) and lt["max_ms"] == pytest.approx(late.max() / MS)
    assert lt["p99_ms"] <= lt["max_ms"] and src.status.slowdowns == 0
    line = out.getvalue()
    assert "paced at x1" in line and "p99" in line and line.count("\n") == 1


def test_lateness_percentiles_of_a_known_sample():
    from services.replay import Lateness
    lt = Lateness()
    for k in range(1000):  # 0, 0.01, ..., 9.99 ms
        lt.add(k * 10_000)
    lt.add(-5)  # early counts as on time
    assert lt.count == 1001 and lt.max_ns == 9_990_000
    assert lt.percentile(50) == pytest.approx(5_000_000, abs=20_000)
    assert lt.percentile(99) == pytest.approx(9_900_000, abs=20_000)
    assert lt.percentile(100) == 9_990_000


def test_saturation_slows_down_proportionally_never_drops_or_reorders(small_log):
    path, expected = small_log

    class Slow(FakeClock):
        def clock(self) -> int:  # every message costs 3 ms of wall time: only 1/3 of the 1x pace is possible
            self.t += 3 * MS
            return self.t

    fc = Slow()
    src = ReplaySource(path, rate=1.0, clock=fc.clock, sleep=fc.sleep)
    got = drain(src)
    assert got == expected
    assert 0.1 < src.status.rate < 0.9 and src.status.slowed_by == "toy/state0"
    assert src.status.slowdowns >= 1 and src.lateness.max_ns > 50 * MS  # the late message that set it off


def test_pause_step_resume_seek_through_the_keyboard_function(small_log):
    path, expected = small_log
    src = ReplaySource(path, paused=True, sleep=lambda s: time.sleep(min(s, 0.005)))
    got: list = []
    done = threading.Event()

    def reader() -> None:
        while (item := src.read()) is not None:
            got.append(item)
        done.set()

    th = threading.Thread(target=reader, daemon=True)
    th.start()
    time.sleep(0.1)
    assert got == []  # paused: nothing
    assert src.handle_key("s") and src.handle_key(".")
    end = time.monotonic() + 5
    while len(got) < 2 and time.monotonic() < end:
        time.sleep(0.005)
    time.sleep(0.05)
    assert got == expected[:2]  # two steps, still paused
    src.seek(900 * MS)
    assert src.handle_key(" ")  # resume
    assert done.wait(5)
    assert got[2:] == [e for e in expected if e[0] >= 900 * MS]
    assert not src.handle_key("x")


def test_quit_key_ends_a_paused_replay(small_log):
    src = ReplaySource(small_log[0], paused=True, sleep=lambda s: time.sleep(0.001))
    src.handle_key("q")
    assert src.read() is None


def test_loop_starts_again(small_log):
    path, expected = small_log
    src = ReplaySource(path, loop=True, topics=["toy/state1"])
    n = len([e for e in expected if e[1] == "toy/state1"])
    got = [src.read() for _ in range(2 * n + 1)]
    assert got[:n] == got[n:2 * n] and got[2 * n] == got[0]


def test_rate_keys_double_and_halve(small_log):
    src = ReplaySource(small_log[0], rate=1.0)
    src.handle_key("+")
    assert src.status.rate == 2.0
    src.handle_key("-")
    src.handle_key("-")
    assert src.status.rate == 0.5
    with pytest.raises(ConfigError):
        src.set_rate(-1.0)
    for bad in (1e-9, 1e4, float("inf")):  # 0 (as fast as possible) or within [RATE_MIN, RATE_MAX]
        with pytest.raises(ConfigError, match=r"expected 0 \(as fast as possible\) or within \[0.001, 1000\]"):
            src.set_rate(bad)
    src.set_rate(0.001)
    src.handle_key("-")  # the keys stay within the bounds
    assert src.status.rate == 0.001
    src.set_rate(1000.0)
    src.handle_key("+")
    assert src.status.rate == 1000.0
    src.close()


# ---------------------------------------------------------------- configs
def test_replay_config_excludes_the_co_simulated_outputs(small_log, tmp_path):
    log = small_log[0]
    base = tomllib.loads(toy_config(tmp_path).read_text())
    cfg = replay_config(log, base=base, only=["b"], out_log=str(tmp_path / "o.mcap"))
    assert set(cfg["services"]) == {"b", "replay", "logger"}
    assert cfg["services"]["replay"]["topics"] == ["toy/state0"]  # not b's toy/state1, not sim/*
    assert cfg["toy"] == base["toy"] and cfg["sim"]["duration"] == pytest.approx(1.0)
    assert tomllib.loads(tomli_w.dumps(cfg)) == cfg
    with pytest.raises(ConfigError, match="start at t = 0"):
        replay_config(log, base=base, only=["b"], start=0.1)
    with pytest.raises(ConfigError, match="back in time"):
        replay_config(log, base=base, only=["b"], loop=True)
    with pytest.raises(ConfigError, match="nope"):
        replay_config(log, base=base, only=["nope"])


# ---------------------------------------------------------------- end to end
@pytest.mark.integration
def test_replay_at_max_reproduces_the_recorded_messages_in_order(tmp_path):
    log = record_toy_run(tmp_path, duration=0.5)
    out = tmp_path / "again.mcap"
    p = launch("replay", str(log), "--max", "--log", str(out), "--quiet")
    assert p.returncode == 0, p.stderr
    with open_log(log) as a, open_log(out) as b:
        topics = [t for t in a.topics if not t.startswith("sim/")]
        assert sorted(t for t in b.topics if not t.startswith("sim/")) == sorted(topics)
        for t in topics:
            assert [m.payload for m in a.messages([t])] == [m.payload for m in b.messages([t])], t
        times = [m.t_ns for m in b.messages(topics)]
        assert times == sorted(times)


def test_unknown_topics_are_reported_not_ignored(small_log, capsys):
    rc, _, err = cli(capsys, "replay", str(small_log[0]), "--topics", "toy/state0,arm/*", "--quiet")
    assert rc == 2 and "arm/*" in err and len(err.strip().splitlines()) == 1


@pytest.mark.integration
@pytest.mark.slow
def test_resim_unchanged_is_bit_identical_and_a_changed_parameter_changes_outputs(tmp_path):
    log = record_toy_run(tmp_path, duration=0.5)
    full_b = np.load(tmp_path / "out" / "b.npy")
    p = launch("replay", str(log), "--resim", "b", "--log", str(tmp_path / "same.mcap"))
    assert p.returncode == 0, p.stderr
    verdict = json.loads(p.stdout.strip().splitlines()[-1])
    assert verdict["identical"] and verdict["compared"] == 51 and verdict["topics"] == ["toy/state1"]
    assert np.load(tmp_path / "out" / "b.npy").tobytes() == full_b.tobytes()  # b's own trajectory too
    # independent of the verdict: decode and compare b's outputs field by field
    with open_log(log) as a, open_log(tmp_path / "same.mcap") as s:
        for ma, ms in zip(a.messages(["toy/state1"]), s.messages(["toy/state1"]), strict=True):
            da, ds = decode("toy/state1", ma.payload), decode("toy/state1", ms.payload)
            assert (da.t_ns, da.seq, da.body["x"], da.body["v"]) == (ds.t_ns, ds.seq, ds.body["x"], ds.body["v"])
    p = launch("replay", str(log), "--resim", "b", "--set", "toy.mass=[1.0, 5.0]", "--log", str(tmp_path / "c.mcap"))
    assert p.returncode == 0, p.stderr
    verdict = json.loads(p.stdout.strip().splitlines()[-1])
    assert not verdict["identical"] and "toy/state1" in verdict["first_difference"]
    assert not compare_outputs(log, tmp_path / "c.mcap", "b").identical
    assert compare_outputs(log, tmp_path / "same.mcap", "b").identical


def test_resim_needs_a_known_service(tmp_path, capsys):
    log = tmp_path / "x.mcap"
    McapLogger(log, config=tomllib.loads(toy_config(tmp_path).read_text())).close()
    rc, _, err = cli(capsys, "replay", str(log), "--resim", "zz")
    assert rc == 2 and "zz" in err


def test_channels_that_are_not_berthsims_are_skipped_and_counted(tmp_path):
    """A valid MCAP file with a channel of another tool (JSON, a foreign schema) beside a berthsim
    topic: the log's topics and every read leave it out, it is counted by name, and the replay
    publishes only the berthsim messages (before: it was refused, and replay exited 1 on its bytes)."""
    from mcap.writer import Writer

    from protocol.logfile import json_schema
    from protocol.messages import SCHEMAS
    path = tmp_path / "foreign.mcap"
    body = encode("toy/state0", {"x": 1.0, "v": 0.0}, sender="a", seq=0, t_ns=0, h_ns=MS)
    with path.open("wb") as f:
        w = Writer(f)
        w.start()
        cid = w.register_channel("foreign/topic", "json", w.register_schema("Foreign", "jsonschema", b"{}"))
        ours = w.register_channel("toy/state0", "msgpack", w.register_schema(
            SCHEMAS["toy/state0"].name, "jsonschema", json_schema(SCHEMAS["toy/state0"])))
        w.add_message(cid, 0, b"\xff{}", 0)
        w.add_message(ours, 0, body, 0)
        w.add_message(cid, MS, b"{}{}", 0)
        w.finish()
    with open_log(path) as log:
        assert log.topics == {"toy/state0": 1} and log.foreign == {"foreign/topic": 2}
        assert [m.topic for m in log.messages()] == ["toy/state0"]
        assert "skipped 1 channel(s) that are not berthsim's (2 messages): 'foreign/topic'" in log.foreign_note()
    src = ReplaySource(path)
    try:
        assert src.read() == (0, "toy/state0", body) and src.read() is None
    finally:
        src.close()


# ---------------------------------------------------------------- playback control (a live view's player)
def test_playback_messages_pause_play_seek_and_rate(small_log):
    path, expected = small_log
    src = ReplaySource(path, topics=["toy/state1"], sleep=lambda s: None)
    first = src.read()
    assert first == next(e for e in expected if e[1] == "toy/state1") and not src.holding()
    src.playback({"cmd": "pause"})
    assert src.holding()  # the shell does not read a paused source: its process keeps answering control
    src.playback({"cmd": "seek", "t_ns": 500 * MS})
    assert src.holding()  # a seek while paused stays paused
    src.playback({"cmd": "rate", "rate": 2.0})
    assert src.status.rate == 2.0
    src.playback({"cmd": "play"})
    assert not src.holding()
    assert [e[0] for e in drain(src)] == [e[0] for e in expected if e[1] == "toy/state1" and e[0] >= 500 * MS]


def test_malformed_or_refused_playback_messages_raise_naming_the_field(small_log):
    src = ReplaySource(small_log[0])
    for _ in range(10):
        src.read()
    t = src.status.t_ns
    for msg, words in (({"cmd": "jump"}, "cmd"), ({"cmd": "seek", "t_ns": "1"}, "t_ns"),
                       ({"cmd": "seek", "t_ns": True}, "t_ns"), ({"cmd": "rate", "rate": 5000.0}, "rate"),
                       ({"cmd": "rate"}, "rate"), ([1, 2], "map"),
                       ({"cmd": "seek", "t_ns": t + MS, "co_simulated": True}, "cannot go back")):
        with pytest.raises(ConfigError, match=words):
            src.playback(msg)
    assert not src.holding() and src.status.rate == 0.0  # nothing applied
    src.playback({"cmd": "seek", "t_ns": t + 100 * MS, "co_simulated": False})
    assert src.read()[0] == t + 100 * MS


def test_hold_end_holds_at_the_end_until_a_seek_or_play(small_log):
    path, expected = small_log
    state1 = [e for e in expected if e[1] == "toy/state1"]
    src = ReplaySource(path, topics=["toy/state1"], hold_end=True, sleep=lambda s: None)
    assert drain(src) == state1
    assert src.ended and src.holding() and src.status.paused  # held, not ended: None is "nothing now"
    src.seek(700 * MS)
    assert not src.ended and src.holding()  # sought back, paused there
    src.resume()
    assert drain(src) == [e for e in state1 if e[0] >= 700 * MS] and src.ended
    src.playback({"cmd": "play"})  # play at the end starts again from the start
    assert drain(src) == state1
    src.stop()
    assert not src.holding() and src.read() is None



@pytest.mark.integration
@pytest.mark.slow
def test_a_resim_builds_each_shipped_kind_as_the_run_did_and_the_hil_bridge_is_bit_identical(tmp_path):
    """A re-simulation keeps only the re-simulated service's ``TABLES`` (and the runtime's): a kind that reads a
    table it does not declare builds another model there. On a log of 1 s of the default scenario, each model
    is built from the whole configuration and from :func:`replay_config`'s (the same, pickled), and the HIL
    bridge, which reads ``[orbiter]``'s ``X_OL`` and ``[payload]``'s ``X_TB`` (and with the mock-up guides
    ``[contact]``'s law), re-simulated, commands the rig as it did."""
    import pickle

    from protocol.config import kind_module, load, validate
    from tests.test_main_job import DEFAULT

    log = tmp_path / "run.mcap"
    p = launch("run", str(DEFAULT), "--inprocess", "--duration", "1.0", "--log", str(log), "--no-report")
    assert p.returncode == 0, p.stderr
    config = load(DEFAULT)
    checked = []
    for name, spec in validate(config).services.items():
        if spec.kind in ("logger", "hil.bridge"):  # a sink; a device, never pickled (re-simulated below)
            continue
        reduced = replay_config(log, base=config, only=[name], out_log=str(tmp_path / "x.mcap"))
        build = kind_module(spec.kind).build
        alone, whole = build(reduced, name, spec.period_ns), build(config, name, spec.period_ns)
        assert pickle.dumps(alone) == pickle.dumps(whole), name
        checked.append(name)
    assert sorted(checked) == ["arm", "contact", "operator", "orbiter"]
    p = launch("replay", str(log), "--resim", "hil", "--log", str(tmp_path / "same.mcap"))
    assert p.returncode == 0, p.stderr
    verdict = json.loads(p.stdout.strip().splitlines()[-1])
    assert verdict["identical"] and verdict["compared"] > 100 and "hil/command" in verdict["topics"], verdict
