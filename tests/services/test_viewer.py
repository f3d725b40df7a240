"""The live viewer: a plain WebSocket client speaking ``foxglove.sdk.v1`` watches a lockstep run.

A 4 s lockstep run of the capture (:func:`tests.services.test_export_foxglove.record_capture_run`'s
scenario) paced at real time, watched with ``launch.py run --view PORT`` (a ``viewer`` service
added on a free loopback port, its defaults: 50 Hz drain, 30 Hz display), one process
per service (the viewer's process drains the bus every 20 ms; in one process with the models
it is handed frames as the models' loop gets to it). A ``websockets`` client (not
foxglove-sdk) connects, subscribes to ``/tf`` and ``/orbiter/state`` from the server's
``advertise``, and counts the binary ``messageData`` frames: both arrive, decimated
(``orbiter/state`` is published at 100 Hz; the viewer shows at most ``display_hz`` = 30 per
second). The run's data topics are bit-identical to the same run's without the viewer, in
one process as fast as possible (lockstep; ``wall_ns`` and ``sim/*`` aside,
:func:`tests.compare_logs.differences`). A non-loopback address without ``allow_remote`` is
refused before anything starts.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import tomli_w
import websockets

from protocol.config import registered_kind
from tests.compare_logs import differences
from tests.services.test_export_foxglove import T_LATE
from tests.test_main_job import late_start_config

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
DISPLAY_HZ = 30.0
SECONDS = 4.0


UNKNOWN_CHANNEL = re.compile(r"Unknown channel ID: (\d+)")


async def subscribe(ws: Any, sid: int, channel_id: int) -> None:
    """Subscribe (``foxglove.sdk.v1``) to channel ``channel_id`` as subscription ``sid``."""
    await ws.send(json.dumps({"op": "subscribe", "subscriptions": [{"id": sid, "channelId": channel_id}]}))


async def resubscribe(ws: Any, status: dict[str, Any], subscribed: dict[int, int]) -> None:
    """Send again a subscription the server refused with "Unknown channel ID: N" (any other message: nothing).

    foxglove-sdk's server advertises a channel created while a client is connected a moment
    before it takes subscriptions to it: a client that subscribes as soon as it sees the
    advertise is sometimes answered with that status, and the subscription is dropped (seen
    about once in ten runs, on ``/ros2/tf`` and ``/ros2/contact/wrench/stamped``). A client
    that asks again a little later gets it. ``subscribed`` maps channel id to subscription id.
    """
    found = UNKNOWN_CHANNEL.search(status.get("message", "")) if status.get("op") == "status" else None
    if found is not None and int(found[1]) in subscribed:
        await asyncio.sleep(0.05)
        await subscribe(ws, subscribed[int(found[1])], int(found[1]))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(cfg: dict, tmp: Path, name: str, speed: float, *layout: str) -> subprocess.Popen[str]:
    cfg = {**cfg, "sim": {**cfg["sim"], "speed": speed}}
    (tmp / f"{name}.toml").write_bytes(tomli_w.dumps(cfg).encode())
    env = {**os.environ, "PYTHONPATH": str(ROOT), "BERTHSIM_NO_PROGRESS": "1"}
    return subprocess.Popen([sys.executable, str(ROOT / "launch.py"), "run", str(tmp / f"{name}.toml"), "--duration",
                             str(SECONDS), "--log", str(tmp / f"{name}.mcap"), "--no-report", *layout],
                            cwd=tmp, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


async def _watch(port: int, deadline_s: float) -> dict[str, list[float]]:
    """Subscribe to /tf and /orbiter/state; the arrival times of their messageData frames until the server closes."""
    end = time.monotonic() + deadline_s
    while True:
        try:
            ws = await websockets.connect(f"ws://127.0.0.1:{port}", subprotocols=["foxglove.sdk.v1"], max_size=None)
            break
        except OSError:
            if time.monotonic() > end:
                raise
            await asyncio.sleep(0.05)
    subs: dict[int, str] = {}
    by_channel: dict[int, int] = {}  # channel id -> subscription id
    got: dict[str, list[float]] = {"/tf": [], "/orbiter/state": [], "connected": [time.monotonic()]}
    async with ws:
        assert ws.subprotocol == "foxglove.sdk.v1"
        while time.monotonic() < end:
            try:
                msg = await asyncio.wait_for(ws.recv(), timeout=1.0)
            except TimeoutError:
                continue
            except websockets.ConnectionClosed:
                break
            if isinstance(msg, str):
                m = json.loads(msg)
                await resubscribe(ws, m, by_channel)
                for c in m.get("channels", []) if m["op"] == "advertise" else []:
                    assert not c["topic"].startswith("/ros2/")  # the ROS 2 twins are off by default
                    if c["topic"] in got and c["topic"] not in subs.values():
                        subs[len(subs) + 1] = c["topic"]
                        assert c["encoding"] == "protobuf"
                        by_channel[c["id"]] = len(subs)
                        await subscribe(ws, len(subs), c["id"])
            elif msg[0] == 0x01:  # messageData: opcode, subscription id u32, log time u64, payload
                sid, _ = struct.unpack_from("<IQ", msg, 1)
                got[subs[sid]].append(time.monotonic())
    got["connected"].append(time.monotonic())
    return got


def test_a_client_watches_the_run_decimated_and_the_run_is_unchanged(tmp_path: Path) -> None:
    base = late_start_config(T_LATE)
    port = _free_port()
    run = _start(base, tmp_path, "viewed", 1.0, "--view", str(port))  # its display rate: the default DISPLAY_HZ
    try:
        got = asyncio.run(_watch(port, deadline_s=240.0))
        out, err = run.communicate(timeout=300)
    finally:
        run.kill()
    assert run.returncode == 0, err[-3000:]
    assert "berthsim viewer viewer:" in err and "dropped" in err
    for channel in ("/tf", "/orbiter/state"):
        assert len(got[channel]) >= 3, (channel, len(got[channel]))
    # decimated: orbiter/state is published at 100 Hz; the client gets at most one per display tick while connected
    t, (t0, t1) = got["/orbiter/state"], got["connected"]
    assert len(t) <= DISPLAY_HZ * (t1 - t0) + 1
    print(f"viewer: /tf {len(got['/tf'])}, /orbiter/state {len(t)} in {t[-1] - t[0]:.2f} s, connected {t1 - t0:.2f} s")
    # the same run without the viewer, as fast as possible: the data topics are bit-identical
    plain = _start(base, tmp_path, "plain", 0.0, "--inprocess")
    _, err = plain.communicate(timeout=300)
    assert plain.returncode == 0, err[-3000:]
    assert differences(tmp_path / "viewed.mcap", tmp_path / "plain.mcap") == []


def test_a_remote_address_needs_allow_remote(tmp_path: Path) -> None:
    assert registered_kind("viewer", "services.viewer") is None  # a log of a viewed run re-simulates
    cfg = late_start_config(T_LATE)
    cfg["services"]["viewer"] = {"kind": "viewer", "rate_hz": 50, "host": "0.0.0.0"}
    (tmp_path / "remote.toml").write_bytes(tomli_w.dumps(cfg).encode())
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.run([sys.executable, str(ROOT / "launch.py"), "check", str(tmp_path / "remote.toml")], env=env,
                       capture_output=True, text=True, timeout=120, check=False)
    assert p.returncode == 2 and "services.viewer.host" in p.stderr + p.stdout and "allow_remote" in p.stderr + p.stdout


def test_the_viewer_reads_a_replays_window_as_the_replay_does() -> None:
    """The replay's window and pace from the replay kind's declared parameters: the values written, the replay's
    defaults where none is (not a copy of them in the viewer), and a clear error for a kind without them."""
    from errors import ConfigError
    from services.replay import DEFAULTS as REPLAY_DEFAULTS
    from services.viewer import _replay_params

    cfg = {"services": {"rp": {"kind": "replay", "log": "x.mcap", "start": 1.5, "end": 4, "rate": 2}}}
    p = _replay_params(cfg, "rp")
    assert (p.log, p.start, p.end, p.rate, p.paused) == ("x.mcap", 1.5, 4.0, 2.0, REPLAY_DEFAULTS["paused"])
    q = _replay_params({"services": {"rp": {"kind": "replay", "log": "x.mcap"}}}, "rp")
    assert (q.start, q.end, q.rate) == (None, None, 0.0)
    with pytest.raises(ConfigError, match="services.toy: kind 'testkit.toys' plays a log back but declares no"):
        _replay_params({"services": {"toy": {"kind": "testkit.toys"}}}, "toy")
