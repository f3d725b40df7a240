"""The live viewer's ROS 2 channels, read as PlotJuggler's Foxglove bridge client reads them.

A 4 s lockstep run of the capture (:mod:`tests.services.test_viewer`'s, with a log) paced at
real time, with a ``viewer`` of ``encodings = ["protobuf", "ros2"]`` in its own process. A
``websockets`` client (not foxglove-sdk) speaking ``foxglove.sdk.v1`` finds
``/ros2/contact/wrench`` in the server's ``advertise`` (encoding ``cdr``, schema encoding
``ros2msg``, next to the protobuf ``/contact/wrench``), subscribes to it and keeps the
``messageData`` payloads. They are decoded with ``rosbags`` (an independent CDR decoder), its
types registered from the advertised schema text only (split at the ``MSG:`` separators):
each message's ``f_lo_w`` and ``p_wo_lo_w`` equal, bit for bit, the raw log's ``F_Lo_W`` and
``p_WoLo_W`` of the same sample (same ``t_ns`` and sender, read with ``mcap`` + ``msgpack``),
and ``header.stamp`` and the message's log time are that ``t_ns``. The default viewer
advertises no ``/ros2/`` channel (checked by :mod:`tests.services.test_viewer`).
"""

from __future__ import annotations

import asyncio
import json
import struct
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import websockets
from rosbags.typesys import Stores, get_types_from_msg, get_typestore

from tests.services.test_export_foxglove import T_LATE, f8, raw_messages
from tests.services.test_viewer import _free_port, _start, resubscribe, subscribe
from tests.test_main_job import late_start_config

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CHANNEL = "/ros2/contact/wrench"
STAMPED = "/ros2/contact/wrench/stamped"  # geometry_msgs/WrenchStamped
TF = "/ros2/tf"  # tf2_msgs/TFMessage
SEP = "=" * 80 + "\n"


async def _take(port: int, deadline_s: float) -> tuple[dict[str, dict[str, Any]], dict[str, list[tuple[int, bytes]]],
                                                       set[str]]:
    """Subscribe to :data:`CHANNEL`, :data:`STAMPED` and :data:`TF`: (their advertised channels, their
    [(log time, payload)], every advertised topic)."""
    wanted = (CHANNEL, STAMPED, TF)
    end = time.monotonic() + deadline_s
    while True:
        try:
            ws = await websockets.connect(f"ws://127.0.0.1:{port}", subprotocols=["foxglove.sdk.v1"], max_size=None)
            break
        except OSError:
            if time.monotonic() > end:
                raise
            await asyncio.sleep(0.05)
    advertised: dict[str, dict[str, Any]] = {}
    by_channel: dict[int, int] = {}  # channel id -> subscription id
    got: dict[str, list[tuple[int, bytes]]] = {c: [] for c in wanted}
    async with ws:
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
                    advertised[c["topic"]] = c
                    if c["topic"] in wanted:
                        by_channel[c["id"]] = wanted.index(c["topic"]) + 1
                        await subscribe(ws, by_channel[c["id"]], c["id"])
            elif msg[0] == 0x01:  # messageData: opcode, subscription id u32, log time u64, payload
                sid, t = struct.unpack_from("<IQ", msg, 1)
                got[wanted[sid - 1]].append((t, bytes(msg[13:])))
    return {c: advertised[c] for c in wanted if c in advertised}, got, set(advertised)


def typestore_of(name: str, text: str) -> Any:
    """A rosbags typestore knowing only the types of a ``ros2msg`` schema text (root ``name``, then ``MSG:`` parts)."""
    store = get_typestore(Stores.EMPTY)
    root, *deps = text.split(SEP)
    types = dict(get_types_from_msg(root, name))
    for part in deps:
        first, _, body = part.partition("\n")
        assert first.startswith("MSG: "), first
        pkg, short = first[5:].split("/")
        types.update(get_types_from_msg(body, f"{pkg}/msg/{short}"))
    store.register(types)
    return store


def test_a_ros2_channel_decodes_with_rosbags_to_the_raw_log(tmp_path: Path) -> None:
    base = late_start_config(T_LATE)
    port = _free_port()
    cfg = {**base, "services": {**base["services"], "viewer": {
        "kind": "viewer", "rate_hz": 50, "port": port, "display_hz": 30, "encodings": ["protobuf", "ros2"]}}}
    run = _start(cfg, tmp_path, "viewed", 1.0)
    try:
        channels, gots, topics = asyncio.run(_take(port, deadline_s=240.0))
        _, err = run.communicate(timeout=300)
    finally:
        run.kill()
    assert run.returncode == 0, err[-3000:]
    assert set(channels) == {CHANNEL, STAMPED, TF}, sorted(topics)
    channel, got = channels[CHANNEL], gots[CHANNEL]
    assert {"/contact/wrench", "/ros2/orbiter/state", "/orbiter/state", "/tf"} <= topics
    assert channel["encoding"] == "cdr" and channel["schemaEncoding"] == "ros2msg"
    assert channel["schemaName"] == "berthsim_msgs/msg/ContactWrench"
    text = channel["schema"]  # the definition as text, where PlotJuggler's client reads it
    assert "\n" + SEP + "MSG: std_msgs/Header\n" in text and "float64[6] f_lo_w" in text
    assert len(got) >= 3, len(got)

    store = typestore_of(channel["schemaName"], text)
    raw = {(env[3], env[1]): env for *_, env in raw_messages(tmp_path / "viewed.mcap")["contact/wrench"]}
    loaded, positions = 0, set()
    for t, data in got:
        m = store.deserialize_cdr(data, channel["schemaName"])
        env = raw[(m.t_ns, m.sender)]
        assert t == m.t_ns == m.header.stamp.sec * 1_000_000_000 + m.header.stamp.nanosec
        assert m.f_lo_w.tolist() == f8(env[6]["F_Lo_W"]).tolist()
        assert m.p_wo_lo_w.tolist() == f8(env[6]["p_WoLo_W"]).tolist()
        assert bool(m.active) == env[6]["active"]
        loaded += bool(np.linalg.norm(m.f_lo_w[3:]) > 0.0)
        positions.add(tuple(m.p_wo_lo_w.tolist()))
    assert len(positions) > 1  # the latch moves with the orbiter: the values compared are not one constant
    print(f"viewer ros2: {len(got)} messages on {CHANNEL}, {loaded} with a contact force, all equal to the log")

    # the standard types, decoded from their advertised text alone: WrenchStamped's torque and force are F_Lo_W's
    # (about Lo, in the LVLH frame W), its stamp the sample's time; /ros2/tf's lvlh -> payload translation is the
    # payload's logged CoM position p_WoTo_W at that instant
    stamped = channels[STAMPED]
    assert (stamped["schemaName"], stamped["encoding"]) == ("geometry_msgs/msg/WrenchStamped", "cdr")
    store = typestore_of(stamped["schemaName"], stamped["schema"])
    by_t = {env[3]: env for env in raw.values()}
    assert len(gots[STAMPED]) >= 3, len(gots[STAMPED])
    for t, data in gots[STAMPED]:
        m = store.deserialize_cdr(data, stamped["schemaName"])
        F = f8(by_t[t][6]["F_Lo_W"])
        assert m.header.frame_id == "lvlh" and m.header.stamp.sec * 1_000_000_000 + m.header.stamp.nanosec == t
        w = m.wrench
        assert [w.torque.x, w.torque.y, w.torque.z, w.force.x, w.force.y, w.force.z] == F.tolist()
    tf = channels[TF]
    assert tf["schemaName"] == "tf2_msgs/msg/TFMessage"
    store = typestore_of(tf["schemaName"], tf["schema"])
    pay = {env[3]: f8(env[6]["p_WoTo_W"]) for *_, env in raw_messages(tmp_path / "viewed.mcap")["payload/state"]}
    checked = 0
    for t, data in gots[TF]:
        for x in store.deserialize_cdr(data, tf["schemaName"]).transforms:
            if (x.header.frame_id, x.child_frame_id) == ("lvlh", "payload") and t in pay:
                tr = x.transform.translation
                assert [tr.x, tr.y, tr.z] == pay[t].tolist(), t
                checked += 1
    assert checked >= 3, checked
