"""The ROS 2 export read back by decoders that are not ours: ``rosbags`` (and ``mcap-ros2-support``'s decoder).

One short lockstep run with the capture in it per module
(:func:`tests.services.test_export_foxglove.record_capture_run`), exported once through
``launch.py export --format ros2``; references from the raw log (``mcap`` + ``msgpack``)
and the configuration with scipy's ``Rotation``:

- every topic's generated message, the standard-typed companions and ``/tf`` +
  ``/tf_static`` decode with rosbags from the definitions in the file; stamps and
  ``log_time`` are simulation time; ``offered_qos_profiles`` parse as rosbag2's;
- the capture's ``WrenchStamped`` and generated ``contact/wrench`` equal the raw log's;
- ``/tf`` + ``/tf_static`` compose to ``X_LB = (X_WO X_OL)⁻¹ X_WT X_TB`` to 1e-9;
- the name table of ``docs/field_tools.md`` is :func:`services.ros2_encoding.ros2_name`'s, and
  every name it gives is a valid ROS 2 field name;
- the live viewer's CDR encoding (:func:`services.ros2_encoding.cdr_encoder` of the log's
  decoded columns) gives the export's bytes, message for message.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from mcap.reader import make_reader
from mcap_ros2.decoder import DecoderFactory
from rosbags.highlevel import AnyReader
from rosbags.interfaces import QosDurability, QosReliability
from scipy.spatial.transform import Rotation

from errors import ConfigError
from protocol.logfile import open_log, read_topics, schema_from_json
from protocol.messages import SCHEMAS, TopicSchema
from services.ros2_encoding import cdr_encoder, generated_messages
from tests.services.test_export_foxglove import (
    DURATION,
    capture_instant,
    export_cli,
    f8,
    pose,
    raw_messages,
    record_capture_run,
    reference_X_LB,
)
from tools.export_ros2 import msg_definition, ros2_name

ROOT = Path(__file__).resolve().parents[2]
ROS2_FIELD = re.compile(r"[a-z][a-z0-9]*(_[a-z0-9]+)*")
"""A valid ROS 2 message field name (lowercase alphanumerics and single inner underscores)."""


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, dict]:
    log, cfg = record_capture_run(tmp_path_factory.mktemp("ros2"))
    return log, cfg, raw_messages(log)


@pytest.fixture(scope="module")
def bag(run: tuple[Path, dict, dict]) -> tuple[Path, dict, dict[str, list], dict[str, object]]:
    """The export, decoded with rosbags: (file, JSON line, channel -> [(log_time, msgtype, message)], connections)."""
    path, line = export_cli(run[0], "ros2")
    out: dict[str, list] = {}
    with AnyReader([path]) as reader:
        conns = {c.topic: c for c in reader.connections}
        for c, t, data in reader.messages():
            out.setdefault(c.topic, []).append((t, c.msgtype, reader.deserialize(data, c.msgtype)))
    return path, line, out, conns


def stamp(m: object) -> int:
    s = m.header.stamp  # type: ignore[attr-defined]
    return int(s.sec) * 1_000_000_000 + int(s.nanosec)


@pytest.mark.integration
@pytest.mark.slow
def test_every_channel_decodes_with_rosbags_on_simulation_time(run, bag):
    _, _, raw = run
    path, line, dec, conns = bag
    assert path.name == "run.ros2.mcap" and line["format"] == "ros2"
    with path.open("rb") as f:
        assert make_reader(f).get_header().profile == "ros2"
    for topic, msgs in raw.items():
        channels = {f"/sim/stats/{e[1]}" for *_, e in msgs} if topic == "sim/stats" else {f"/{topic}"}
        assert sum(len(dec[c]) for c in channels) == len(msgs), topic
        for c in channels:
            assert all(t == stamp(m) == m.t_ns for t, _, m in dec[c])
            assert dec[c][0][1].startswith("berthsim_msgs/msg/")
    standard = {"/orbiter/state/pose": "geometry_msgs/msg/PoseStamped",
                "/payload/state/twist": "geometry_msgs/msg/TwistStamped",
                "/arm/state/joint_states": "sensor_msgs/msg/JointState",
                "/contact/wrench/stamped": "geometry_msgs/msg/WrenchStamped",
                "/hil/feedback/wrench": "geometry_msgs/msg/WrenchStamped",
                "/tf": "tf2_msgs/msg/TFMessage", "/tf_static": "tf2_msgs/msg/TFMessage"}
    for channel, typ in standard.items():
        assert conns[channel].msgtype == typ
    # generated messages carry the raw values under their ROS 2 names; the joint states by joint name
    for (_, _, m), (*_, env) in zip(dec["/orbiter/state"], raw["orbiter/state"], strict=True):
        assert m.p_wo_oo_w.tolist() == f8(env[6]["p_WoOo_W"]).tolist()
        assert m.v_w_oo_w.tolist() == f8(env[6]["v_WOo_W"]).tolist()
    for (_, _, m), (*_, env) in zip(dec["/arm/state/joint_states"], raw["arm/state"], strict=True):
        assert m.name[0] == "shoulder_yaw" and m.position.tolist() == f8(env[6]["q"]).tolist()
        assert m.effort.tolist() == f8(env[6]["tau"]).tolist()
    # QoS as rosbag2 writes it: reliable everywhere, /tf_static transient local
    for channel, durability in (("/tf", QosDurability.VOLATILE), ("/tf_static", QosDurability.TRANSIENT_LOCAL),
                                ("/contact/wrench", QosDurability.VOLATILE)):
        (qos,) = conns[channel].ext.offered_qos_profiles
        assert qos.reliability == QosReliability.RELIABLE and qos.durability == durability


@pytest.mark.integration
@pytest.mark.slow
def test_capture_wrench_equals_the_raw_log(run, bag):
    _, _, raw = run
    path, _, dec, _ = bag
    t_cap = capture_instant(raw)
    (env,) = [e for *_, e in raw["contact/wrench"] if e[3] <= t_cap < e[3] + e[4]]
    F = f8(env[6]["F_Lo_W"])
    assert np.linalg.norm(F[3:]) > 100.0
    (w,) = [m for t, _, m in dec["/contact/wrench/stamped"] if t == env[3]]
    assert w.header.frame_id == "lvlh"
    f, tq = w.wrench.force, w.wrench.torque
    assert [tq.x, tq.y, tq.z, f.x, f.y, f.z] == F.tolist()
    (g,) = [m for t, _, m in dec["/contact/wrench"] if t == env[3]]
    assert g.f_lo_w.tolist() == F.tolist() and g.active == env[6]["active"]
    # a second decoder, mcap-ros2-support's, reads the same sample
    with path.open("rb") as fh:
        got = [d for _, ch, msg, d in make_reader(fh, decoder_factories=[DecoderFactory()]).iter_decoded_messages(
            topics=["/contact/wrench/stamped"]) if msg.log_time == env[3]]
    assert [got[0].wrench.force.x, got[0].wrench.force.y, got[0].wrench.force.z] == F[3:].tolist()


@pytest.mark.integration
@pytest.mark.slow
def test_tf_composes_to_X_LB(run, bag):
    _, cfg, raw = run
    _, _, dec, _ = bag
    tf: dict[tuple[str, str], dict[int, np.ndarray]] = {}
    static: dict[tuple[str, str], np.ndarray] = {}
    for channel in ("/tf", "/tf_static"):
        for _, _, m in dec[channel]:
            for ts in m.transforms:
                r, p = ts.transform.rotation, ts.transform.translation
                X = pose(np.array([p.x, p.y, p.z]), Rotation.from_quat([r.x, r.y, r.z, r.w]).as_matrix())
                key = (ts.header.frame_id, ts.child_frame_id)
                if channel == "/tf_static":
                    static[key] = X
                else:
                    tf.setdefault(key, {})[stamp(ts)] = X
    assert set(static) >= {("orbiter", "latch"), ("payload", "berthing_interface"), ("payload", "grapple")}
    W_O, W_T = tf[("lvlh", "orbiter")], tf[("lvlh", "payload")]
    instants = sorted(set(W_O) & set(W_T))
    assert len(instants) == int(DURATION * 100) + 1
    X_OL, X_TB = static[("orbiter", "latch")], static[("payload", "berthing_interface")]
    worst = max(float(np.abs(np.linalg.inv(W_O[t] @ X_OL) @ W_T[t] @ X_TB - reference_X_LB(raw, cfg, t)).max())
                for t in instants)
    assert worst < 1e-9


@pytest.mark.integration
@pytest.mark.slow
def test_the_viewers_encoding_is_the_exports_bytes(run, bag):
    path = bag[0]
    topics = ("contact/wrench", "orbiter/state", "arm/state", "contact/event")
    with open_log(run[0]) as log:
        cols = read_topics(log, list(topics))
        schemas = {t: schema_from_json(log.schema_data[t]) for t in topics}
    with path.open("rb") as f:
        written: dict[str, list[bytes]] = {}
        for _, ch, msg in make_reader(f).iter_messages(topics=[f"/{t}" for t in topics], log_time_order=True):
            written.setdefault(ch.topic, []).append(msg.data)
    for topic in topics:
        encode = cdr_encoder(*msg_definition(schemas[topic]))
        ours = [encode(m) for m in generated_messages(schemas[topic], cols[topic])]
        assert len(ours) == len(written[f"/{topic}"]) > 0 and ours == written[f"/{topic}"], topic


def documented_names() -> dict[str, str]:
    """The name table of docs/field_tools.md (section "Field names")."""
    text = (ROOT / "docs" / "field_tools.md").read_text()
    section = text.split("### Field names", 1)[1]
    return dict(re.findall(r"^\| `([^`]+)` \| `([^`]+)` \|$", section, flags=re.M))


def test_name_table_is_the_code_and_every_name_is_valid():
    # the project's topics (other test modules register their own in the same table: testkit.toys' toy/*, an FMU's
    # rig/actuator, the docs' sensor/range)
    shipped = {"orbiter", "payload", "arm", "contact", "operator", "hil", "sim"}
    fields = {f for t, s in SCHEMAS.items() if t.split("/")[0] in shipped for f in s.fields}
    renamed = {f: ros2_name(f) for f in fields if ros2_name(f) != f}
    assert documented_names() == renamed and len(renamed) == 25
    assert all(ROS2_FIELD.fullmatch(ros2_name(f)) for f in fields)
    assert ros2_name("p_WoOo_W") == "p_wo_oo_w" and ros2_name("v_WOo_W") == "v_w_oo_w"
    for topic, schema in SCHEMAS.items():
        name, text = msg_definition(schema)
        assert name.startswith("berthsim_msgs/msg/") and "MSG: builtin_interfaces/Time" in text, topic


def test_names_that_collide_or_are_invalid_are_refused():
    with pytest.raises(ConfigError, match="twice"):
        msg_definition(TopicSchema("berthsim.Clash", 1, "state", {"F_Lo_W": ("f8", (6,)), "f_lo_w": ("f8", (6,))}))
    with pytest.raises(ConfigError, match="'_x'"):
        ros2_name("_x")
