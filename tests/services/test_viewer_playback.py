"""Playback control of a replay from a live view: ``launch.py replay LOG --view PORT``.

A 6 s toy run is recorded (:func:`tests.services.test_logger.record_toy_run`: ``toy/state0`` at
1 kHz, ``toy/state1`` at 100 Hz), then replayed at the recorded pace with a viewer, one process
per service, real sockets. A plain ``websockets`` client (not foxglove-sdk) speaks
``foxglove.sdk.v1`` as Foxglove's player does: the server info advertises ``playbackControl``
and ``time`` with the log's span (read back with :func:`protocol.logfile.open_log`); playback
control requests are the binary opcode 3 (command u8: 0 play, 1 pause; speed f32; had_seek u8;
seek time u64; request id u32 + UTF-8), the states the binary opcode 5 (status u8: 0 playing,
1 paused, 3 ended; current time u64; speed f32; did_seek u8; request id). Pause stops the
current time (two states 0.5 s apart are equal), play moves it on, speed 2 moves it about
twice as fast in wall time as speed 1, a seek to the middle moves it there and the data shown
from then on is the log's from there. With a co-simulated service (``--config --only b``) a
seek, back or forward, is refused (``did_seek`` false, a warning status saying why) while pause
and play work, and the run ends normally. The launcher's checks of the requests are tested
alone (its control server reduced to what it sent).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import websockets

from protocol.logfile import open_log
from tests.services.test_logger import record_toy_run, toy_config

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
S = 1_000_000_000
PLAYING, PAUSED, ENDED = 0, 1, 3


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _replay(log: Path, port: int, *extra: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "BERTHSIM_NO_PROGRESS": "1"}
    return subprocess.Popen([sys.executable, str(ROOT / "launch.py"), "replay", str(log), "--view", str(port), *extra],
                            cwd=log.parent, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def request(command: int, speed: float, seek_ns: int | None = None, rid: str = "") -> bytes:
    """A playback control request (binary opcode 3) as Foxglove's player sends it."""
    r = rid.encode()
    return struct.pack("<BBfBQI", 3, command, speed, seek_ns is not None, seek_ns or 0, len(r)) + r


@dataclass
class Player:
    """What the client saw: server info, playback states (wall time, status, t, speed, did_seek, request id),
    status messages, and the log times of the subscribed channel's messages (wall time, log time)."""

    ws: Any
    info: dict[str, Any] = field(default_factory=dict)
    states: list[tuple[float, int, int, float, bool, str]] = field(default_factory=list)
    statuses: list[dict[str, Any]] = field(default_factory=list)
    data: list[tuple[float, int]] = field(default_factory=list)
    channel: str = "/toy/state0"

    async def read(self) -> None:
        subscribed = False
        async for msg in self.ws:
            now = time.monotonic()
            if isinstance(msg, str):
                m = json.loads(msg)
                if m["op"] == "serverInfo":
                    self.info = m
                elif m["op"] == "status":
                    self.statuses.append(m)
                elif m["op"] == "advertise" and not subscribed:
                    for c in m["channels"]:
                        if c["topic"] == self.channel:
                            subscribed = True
                            await self.ws.send(json.dumps({"op": "subscribe",
                                                           "subscriptions": [{"id": 1, "channelId": c["id"]}]}))
            elif msg[0] == 0x05:  # playback state
                status, t, speed, did_seek, n = struct.unpack_from("<BQfBI", msg, 1)
                self.states.append((now, status, t, speed, bool(did_seek), msg[19:19 + n].decode()))
            elif msg[0] == 0x01:  # message data: subscription id u32, log time u64, payload
                _, log_time = struct.unpack_from("<IQ", msg, 1)
                self.data.append((now, log_time))

    def latest(self) -> tuple[float, int, int, float, bool, str]:
        return self.states[-1]

    async def until(self, what: Any, timeout: float = 30.0) -> Any:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.states and (got := what(self)):
                return got
            await asyncio.sleep(0.02)
        raise AssertionError(f"timed out; last state {self.states[-1:]}, statuses {self.statuses[-2:]}")

    async def answer(self, rid: str, timeout: float = 10.0) -> tuple[float, int, int, float, bool, str]:
        return await self.until(lambda p: next((s for s in p.states if s[5] == rid), None), timeout)


async def _connect(port: int, deadline_s: float = 120.0) -> Any:
    end = time.monotonic() + deadline_s
    while True:
        try:
            return await websockets.connect(f"ws://127.0.0.1:{port}", subprotocols=["foxglove.sdk.v1"],
                                            max_size=None)
        except OSError:
            if time.monotonic() > end:
                raise
            await asyncio.sleep(0.1)


def _rate(p: Player, seconds: float) -> float:
    """Log seconds per wall second over the last ``seconds`` of states."""
    now = p.states[-1][0]
    window = [s for s in p.states if s[0] >= now - seconds]
    return (window[-1][2] - window[0][2]) / S / (window[-1][0] - window[0][0])


async def _drive(port: int, span: tuple[int, int]) -> dict[str, float]:
    ws = await _connect(port)
    p = Player(ws)
    reader = asyncio.create_task(p.read())
    figures: dict[str, float] = {}
    try:
        async with ws:
            # the server advertises playback control over the log's span
            await p.until(lambda q: q.info and q.states)
            assert {"playbackControl", "time"} <= set(p.info["capabilities"])
            start = p.info["dataStartTime"]["sec"] * S + p.info["dataStartTime"]["nsec"]
            end = p.info["dataEndTime"]["sec"] * S + p.info["dataEndTime"]["nsec"]
            assert (start, end) == span
            await p.until(lambda q: q.latest()[1] == PLAYING and q.latest()[2] > start + S // 5)
            # pause: the current time stops
            sent = time.monotonic()
            await ws.send(request(1, 1.0, rid="pause"))
            assert (await p.answer("pause"))[1] == PAUSED
            await asyncio.sleep(0.7)
            moving = [s for s in p.states if s[0] > sent]
            last_change = max((b[0] for a, b in zip(moving, moving[1:], strict=False) if b[2] != a[2]), default=sent)
            figures["pause_latency_s"] = last_change - sent
            t1 = p.latest()
            await asyncio.sleep(0.5)
            t2 = p.latest()
            assert t2[0] - t1[0] > 0.4 and t1[2] == t2[2] and t2[1] == PAUSED, (t1, t2)
            # play: it moves on at the recorded pace
            sent = time.monotonic()
            await ws.send(request(0, 1.0, rid="play"))
            assert (await p.answer("play"))[1] == PLAYING
            await p.until(lambda q: q.latest()[2] > t2[2])
            figures["play_latency_s"] = p.latest()[0] - sent
            await asyncio.sleep(1.2)
            figures["rate_at_1"] = _rate(p, 0.9)
            # speed 2: about twice as fast in wall time
            await ws.send(request(0, 2.0, rid="fast"))
            assert (await p.answer("fast"))[3] == 2.0
            await asyncio.sleep(1.2)
            figures["rate_at_2"] = _rate(p, 0.9)
            assert p.latest()[3] == 2.0
            assert figures["rate_at_1"] > 0.3 and figures["rate_at_2"] > 1.4 * figures["rate_at_1"], figures
            # seek to the middle: the current time jumps there and the data shown is the log's from there
            mid = (start + end) // 2
            sent = time.monotonic()
            await ws.send(request(0, 2.0, seek_ns=mid, rid="seek"))
            answer = await p.answer("seek")
            assert answer[4] and answer[2] == mid, answer
            # the playback state and the data travel apart: wait for the data shown from mid (what is measured),
            # not only for the state's time to pass it (under load the state came first and no data yet)
            await p.until(lambda q: q.latest()[0] > sent + 0.5 and q.latest()[2] > mid
                          and any(w > sent and mid <= lt for w, lt in q.data))
            figures["seek_latency_s"] = next(w for w, lt in p.data if w > sent and mid <= lt) - sent
            after = [lt for w, lt in p.data if w > sent + figures["seek_latency_s"]]
            assert after and all(mid <= lt < mid + 3 * S for lt in after), (mid, after[:5], after[-5:])
            assert mid <= p.latest()[2] < mid + 3 * S
            # held at the end: Ended, and the time stays at the end
            await p.until(lambda q: q.latest()[1] == ENDED, timeout=30)
            assert p.latest()[2] == end
    finally:
        reader.cancel()
    return figures


@pytest.fixture(scope="module")
def toy_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return record_toy_run(tmp_path_factory.mktemp("recorded"), duration=6.0)


def test_the_player_pauses_plays_speeds_up_and_seeks_the_replay(toy_log: Path) -> None:
    with open_log(toy_log) as log:
        span = (log.start_ns, log.end_ns)
    port = _free_port()
    run = _replay(toy_log, port)
    try:
        figures = asyncio.run(_drive(port, span))
        run.send_signal(signal.SIGINT)  # held at the end: the run lasts until Ctrl-C
        out, err = run.communicate(timeout=60)
    finally:
        run.kill()
    assert run.returncode == 130, err[-3000:]
    summary = json.loads(out.strip().splitlines()[-1])
    assert "control_ignored" not in summary, summary
    print("playback:", ", ".join(f"{k} {v:.3f}" for k, v in figures.items()))


async def _drive_co_simulated(port: int) -> dict[str, float]:
    ws = await _connect(port)
    p = Player(ws)
    reader = asyncio.create_task(p.read())
    figures: dict[str, float] = {}
    try:
        async with ws:
            await p.until(lambda q: q.info and q.states and q.latest()[2] > S // 2)
            assert "playbackControl" in p.info["capabilities"]
            # pause and play work beside the co-simulated service (whose stall watchdog waits meanwhile)
            await ws.send(request(1, 1.0, rid="pause"))
            await p.answer("pause")
            await asyncio.sleep(0.5)
            t1 = p.latest()
            await asyncio.sleep(0.5)
            assert p.latest()[2] == t1[2] and p.latest()[1] == PAUSED
            await ws.send(request(0, 1.0, rid="play"))
            await p.answer("play")
            await p.until(lambda q: q.latest()[2] > t1[2])
            # a seek back or forward is refused: did_seek false, a warning that says why, and the replay goes on
            now = p.latest()[2]
            await ws.send(request(0, 1.0, seek_ns=now // 2, rid="back"))
            answer = await p.answer("back")
            assert not answer[4] and answer[2] >= now, answer
            await p.until(lambda q: any("cannot go back" in s["message"] for s in q.statuses))
            assert p.statuses[-1]["level"] == 1  # warning
            await ws.send(request(0, 1.0, seek_ns=5 * S, rid="forward"))
            assert not (await p.answer("forward"))[4]
            await asyncio.sleep(0.5)
            assert now < p.latest()[2] < 4 * S
            assert not any(lt < now // 2 + S // 10 or lt >= 5 * S for w, lt in p.data if w > answer[0])
            figures["t_after_refusal_s"] = p.latest()[2] / S
    finally:
        reader.cancel()
    return figures


def test_with_a_co_simulated_service_a_seek_is_refused_and_pause_works(toy_log: Path, tmp_path: Path) -> None:
    config = toy_config(tmp_path, duration=6.0)
    port = _free_port()
    run = _replay(toy_log, port, "--config", str(config), "--only", "b")
    try:
        figures = asyncio.run(_drive_co_simulated(port))
        out, err = run.communicate(timeout=120)  # the co-simulated run ends at the log's end
    finally:
        run.kill()
    assert run.returncode == 0, err[-3000:]
    summary = json.loads(out.strip().splitlines()[-1])
    assert "control_ignored" not in summary, summary
    assert summary["services"]["b"]["t_ns"] >= 5 * S and summary["services"]["replay"]["msgs_invalid"] == 0
    print("co-simulated:", figures)


class _Sent:
    """The launcher's control server, reduced to what it sent (the launcher's checks alone, no run)."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []
        self.malformed = 0

    def send(self, ident: str, msg: dict[str, Any]) -> bool:
        self.sent.append((ident, msg))
        return True


def test_the_launcher_forwards_a_viewers_requests_and_ignores_others(toy_log: Path, tmp_path: Path) -> None:
    import io
    import tomllib

    from protocol.config import validate
    from protocol.launcher import Launcher
    from tools.resim import replay_config

    base = tomllib.loads(toy_config(tmp_path).read_text())
    plan = validate(replay_config(toy_log, base=base, only=["b"], view=_free_port()))
    err = io.StringIO()
    launcher = Launcher(plan, out=io.StringIO(), err=err)
    for name, role in (("replay", "source"), ("viewer", "sink"), ("b", "model")):
        launcher.records[name].role = role
    launcher.server = server = _Sent()  # type: ignore[assignment]
    launcher._handle("viewer", {"op": "playback", "cmd": "seek", "t_ns": 2 * S})
    launcher._handle("viewer", {"op": "playback", "cmd": "pause"})
    launcher._handle("viewer", {"op": "playback", "cmd": "rate", "rate": 2})
    assert server.sent == [("replay", {"op": "playback", "cmd": "seek", "t_ns": 2 * S, "co_simulated": True}),
                           ("replay", {"op": "playback", "cmd": "pause", "co_simulated": True}),
                           ("b", {"op": "playback", "cmd": "pause"}),
                           ("replay", {"op": "playback", "cmd": "rate", "rate": 2.0, "co_simulated": True})]
    server.sent.clear()
    for ident, msg in (("b", {"op": "playback", "cmd": "pause"}),           # not a viewer
                       ("viewer", {"op": "playback", "cmd": "rewind"}),    # malformed
                       ("viewer", {"op": "playback", "cmd": "seek", "t_ns": -1}),
                       ("viewer", {"op": "playback", "cmd": "seek", "t_ns": 1.5}),
                       ("viewer", {"op": "playback", "cmd": "rate", "rate": float("nan")}),
                       ("viewer", {"op": "playback", "cmd": "rate", "rate": True})):
        launcher._handle(ident, msg)
    assert server.sent == [] and launcher.control_ignored == {"b": 1, "viewer": 5}
    assert "a playback request from a service that is not a viewer" in err.getvalue()
