"""The Foxglove export read back by decoders that are not ours: ``mcap`` with ``mcap-protobuf-support``.

One short lockstep run per module (the default scenario picked up 1 s before its capture
command, :func:`tests.test_main_job.late_start_config`, 2 s, in one process with the rig
emulator on a pty), exported once through ``launch.py export --format foxglove``. The
references are computed here from the raw log (``mcap`` + ``msgpack``) and the run's
configuration with numpy and scipy's ``Rotation``, never through the exporter's or the
bridge's code:

- every plot channel holds its topic's messages (``sim/stats`` split per service),
  ``log_time`` = ``publish_time`` = ``t_ns``, vector components bit-equal to the log's;
- the capture's ``contact/wrench`` force and torque components equal the raw log's;
- ``/tf`` composes to ``X_LB = (X_WO X_OL)⁻¹ X_WT X_TB`` to 1e-9, and that same formula,
  with the states predicted to the bridge's step as the log's ``hil/command`` holds them,
  gives ``hil/command``'s ``X_LB`` to 1e-9;
- the SRMS link frames end at the arm's published ``X_OE``; the scene has its shapes and
  the force arrow points along the force; ``/events`` has the capture and the rigidize.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import msgpack
import numpy as np
import pytest
import tomli_w
from mcap.reader import make_reader
from mcap_protobuf.decoder import DecoderFactory
from scipy.spatial.transform import Rotation

from tests.test_main_job import late_start_config

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
T_LATE = 6.0
"""The default scenario picked up here: its capture command (7 s) comes 1 s into the run, rigidize at 1.5 s."""
DURATION = 2.0


def record_capture_run(tmp: Path) -> tuple[Path, dict]:
    """A 2 s lockstep run with the capture in it (in one process); (log path, configuration)."""
    cfg = late_start_config(T_LATE)
    toml = tmp / "late.toml"
    toml.write_bytes(tomli_w.dumps(cfg).encode())
    log = tmp / "run.mcap"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "BERTHSIM_NO_PROGRESS": "1"}
    p = subprocess.run([sys.executable, str(ROOT / "launch.py"), "run", str(toml), "--duration", str(DURATION),
                        "--log", str(log), "--no-report", "--inprocess"], cwd=tmp, env=env, capture_output=True,
                       text=True, timeout=600, check=False)
    assert p.returncode == 0, p.stderr[-3000:]
    return log, cfg


def export_cli(log: Path, fmt: str) -> tuple[Path, dict]:
    """``launch.py export LOG --format FMT``: (file written, the JSON line)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.run([sys.executable, str(ROOT / "launch.py"), "export", str(log), "--format", fmt], env=env,
                       capture_output=True, text=True, timeout=600, check=False)
    assert p.returncode == 0, p.stderr[-3000:]
    line = json.loads(p.stdout.strip().splitlines()[-1])
    return Path(line["file"]), line


# ---------------------------------------------------------------- independent references
def raw_messages(path: Path) -> dict[str, list[tuple[int, int, list]]]:
    """topic -> [(log_time, publish_time, msgpack envelope)] of the raw log, read with mcap and msgpack only."""
    out: dict[str, list[tuple[int, int, list]]] = {}
    with path.open("rb") as f:
        for _, ch, msg in make_reader(f).iter_messages(log_time_order=True):
            out.setdefault(ch.topic, []).append((msg.log_time, msg.publish_time, msgpack.unpackb(msg.data)))
    return out


def f8(b: bytes, shape: tuple[int, ...] | None = None) -> np.ndarray:
    """A logged float64 vector (msgpack bin, little-endian, C order)."""
    a = np.frombuffer(b, dtype="<f8")
    return a.reshape(shape) if shape else a


def pose(p: np.ndarray, R: np.ndarray) -> np.ndarray:
    X = np.eye(4)
    X[:3, :3], X[:3, 3] = R, p
    return X


def pose6(v: list[float]) -> np.ndarray:
    """A configuration pose ``[x, y, z, θx, θy, θz]`` (rotation vector)."""
    return pose(np.asarray(v[:3]), Rotation.from_rotvec(v[3:]).as_matrix())


def body_pose(fields: dict, names: tuple[str, ...], dt: float = 0.0) -> np.ndarray:
    """A body's pose from its logged state, predicted ``dt`` ahead with its accelerations held: p + v dt + a dt²/2,
    the attitude turned by the mean body rate ω + ω̇ dt/2 (the coupling rule's prediction, protocol/coupling.py)."""
    p, q, v, w, a, wd = (f8(fields[n]) for n in names)
    R = Rotation.from_quat(q, scalar_first=True)
    if dt:
        p = p + v * dt + 0.5 * a * dt * dt
        R = R * Rotation.from_rotvec((w + 0.5 * wd * dt) * dt)
    return pose(p, R.as_matrix())


ORBITER = ("p_WoOo_W", "quat_WO", "v_WOo_W", "w_WO_O", "a_WOo_W", "wdot_WO_O")
PAYLOAD = ("p_WoTo_W", "quat_WT", "v_WTo_W", "w_WT_T", "a_WTo_W", "wdot_WT_T")


def reference_X_LB(raw: dict, cfg: dict, t_ns: int, predict: bool = False) -> np.ndarray:
    """``X_LB = (X_WO X_OL)⁻¹ X_WT X_TB`` at ``t_ns`` from the raw states (the latest sample at or before, predicted
    to ``t_ns`` when ``predict``) and the configuration's latch and berthing frames."""
    def at(topic: str, names: tuple[str, ...]) -> np.ndarray:
        env = [e for _, _, e in raw[topic] if e[3] <= t_ns][-1]
        assert predict or env[3] == t_ns
        return body_pose(env[6], names, (t_ns - env[3]) * 1e-9)

    X_OL, X_TB = pose6(cfg["orbiter"]["X_OL"]), pose6(cfg["payload"]["X_TB"])
    return np.linalg.inv(at("orbiter/state", ORBITER) @ X_OL) @ at("payload/state", PAYLOAD) @ X_TB


def capture_instant(raw: dict) -> int:
    """The capture event's time [ns]."""
    (t,) = [e["t_ns"] for _, _, env in raw["contact/event"] for e in env[6]["events"] if e["kind"] == "capture"]
    return int(t)


# ---------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, dict]:
    log, cfg = record_capture_run(tmp_path_factory.mktemp("foxglove"))
    return log, cfg, raw_messages(log)


@pytest.fixture(scope="module")
def fox(run: tuple[Path, dict, dict]) -> tuple[Path, dict, dict[str, list]]:
    """The export (through the command line), decoded: channel -> [(log_time, publish_time, schema name, message)]."""
    path, line = export_cli(run[0], "foxglove")
    out: dict[str, list] = {}
    with path.open("rb") as f:
        reader = make_reader(f, decoder_factories=[DecoderFactory()])
        assert reader.get_header().profile == ""
        for schema, ch, msg, dec in reader.iter_decoded_messages(log_time_order=True):
            assert ch.message_encoding == "protobuf" and schema.encoding == "protobuf"
            out.setdefault(ch.topic, []).append((msg.log_time, msg.publish_time, schema.name, dec))
    return path, line, out


# ---------------------------------------------------------------- tests
def test_the_raw_log_is_untouched_and_the_export_lands_beside_it(run, fox):
    log, _, raw = run
    path, line, _ = fox
    assert path == log.with_name("run.foxglove.mcap") and line["format"] == "foxglove"
    assert raw_messages(log).keys() == raw.keys()  # the log still reads as it did


def test_plot_channels_hold_every_message_on_simulation_time(run, fox):
    log, _, raw = run
    _, line, dec = fox
    with log.open("rb") as f:
        summary = make_reader(f).get_summary()
    names = {c.topic: summary.schemas[c.schema_id].name for c in summary.channels.values()}
    for topic, msgs in raw.items():
        if topic == "sim/stats":
            split = {f"/sim/stats/{e[1]}" for _, _, e in msgs}
            assert sum(len(dec[c]) for c in split) == len(msgs) and len(split) >= 4
            continue
        got = dec[f"/{topic}"]
        assert len(got) == len(msgs) == line["channels"][f"/{topic}"], topic
        assert {s for _, _, s, _ in got} == {"berthsim.plot." + names[topic].rsplit(".", 1)[1]}
        for (lt, pt, _, m), (raw_lt, _, env) in zip(got, msgs, strict=True):
            assert lt == pt == m.t_ns == raw_lt == env[3] and m.seq == env[2] and m.sender == env[1]
    # every vector component, bit for bit (orbiter and arm states), and the payload's flags
    for topic, fields in (("orbiter/state", ORBITER), ("arm/state", ("q", "qd", "tau", "X_OE"))):
        for (_, _, _, m), (_, _, env) in zip(dec[f"/{topic}"], raw[topic], strict=True):
            for name in fields:
                assert list(getattr(m, name)) == f8(env[6][name]).tolist(), (topic, name)
    assert [m.grappled for *_, m in dec["/payload/state"]] == [e[6]["grappled"] for *_, e in raw["payload/state"]]
    assert any(m.grappled for *_, m in dec["/payload/state"])  # the capture is in the run


def test_contact_force_at_the_capture_equals_the_raw_log(run, fox):
    _, _, raw = run
    _, _, dec = fox
    t_cap = capture_instant(raw)
    (env,) = [e for _, _, e in raw["contact/wrench"] if e[3] <= t_cap < e[3] + e[4]]
    F = f8(env[6]["F_Lo_W"])
    assert np.linalg.norm(F[3:]) > 100.0  # the snare's impulse, as one flow sample
    (m,) = [m for lt, _, _, m in dec["/contact/wrench"] if lt == env[3]]
    assert list(m.F_Lo_W) == F.tolist() and list(m.p_WoLo_W) == f8(env[6]["p_WoLo_W"]).tolist()
    # the arrow on /scene: from Lo along the force, 1 m per kN
    arrows = [e.arrows[0] for lt, _, _, m in dec["/scene"] if lt == env[3] for e in m.entities
              if e.id == "contact_force"]
    assert len(arrows) == 1
    a = arrows[0]
    q = a.pose.orientation
    x = Rotation.from_quat([q.x, q.y, q.z, q.w]).apply([1.0, 0.0, 0.0])
    np.testing.assert_allclose(x, F[3:] / np.linalg.norm(F[3:]), atol=1e-12)
    assert a.shaft_length == pytest.approx(np.linalg.norm(F[3:]) * 1e-3, rel=1e-12)
    p = a.pose.position
    assert [p.x, p.y, p.z] == f8(env[6]["p_WoLo_W"]).tolist()


def tf_poses(dec: dict) -> dict[tuple[str, str], dict[int, np.ndarray]]:
    """(parent, child) -> t_ns -> pose, from the decoded /tf (quaternions x y z w)."""
    out: dict[tuple[str, str], dict[int, np.ndarray]] = {}
    for _, _, name, m in dec["/tf"]:
        assert name == "foxglove.FrameTransforms"
        for tf in m.transforms:
            t = tf.timestamp.seconds * 1_000_000_000 + tf.timestamp.nanos  # google.protobuf.Timestamp
            r, p = tf.rotation, tf.translation
            out.setdefault((tf.parent_frame_id, tf.child_frame_id), {})[t] = pose(
                np.array([p.x, p.y, p.z]), Rotation.from_quat([r.x, r.y, r.z, r.w]).as_matrix())
    return out


def test_tf_composes_to_the_relative_pose_hil_command_carries(run, fox):
    _, cfg, raw = run
    tf = tf_poses(fox[2])
    W_O, O_L, W_T, T_B = (tf[k] for k in (("lvlh", "orbiter"), ("orbiter", "latch"), ("lvlh", "payload"),
                                          ("payload", "berthing_interface")))
    instants = sorted(set(W_O) & set(W_T))
    assert len(instants) == int(DURATION * 100) + 1
    worst = 0.0
    for t in instants:
        X_LB = np.linalg.inv(W_O[t] @ O_L[t]) @ W_T[t] @ T_B[t]
        worst = max(worst, float(np.abs(X_LB - reference_X_LB(raw, cfg, t)).max()))
    assert worst < 1e-9
    # hil/command at s holds the bridge's step from s - h (its output is stamped at the step's end), the states
    # predicted from their last samples: the same formula gives it
    h_hil = round(1e9 / cfg["services"]["hil"]["rate_hz"])
    cmds = [e for _, _, e in raw["hil/command"] if e[3] > 0]
    assert len(cmds) == int(DURATION * 50)
    errs = [np.abs(f8(e[6]["X_LB"], (4, 4)) - reference_X_LB(raw, cfg, e[3] - h_hil, predict=True)).max()
            for e in cmds]
    assert max(errs) < 1e-9
    assert max(np.abs(f8(e[6]["X_LB"], (4, 4)) - np.eye(4)).max() for e in cmds) > 0.05  # not a trivial pose


def test_srms_links_end_at_the_arms_end_effector(run, fox):
    _, _, raw = run
    tf = tf_poses(fox[2])
    link6, E = tf[("orbiter", "srms_link6")], tf[("orbiter", "end_effector")]
    tip = pose(np.array([0.6604, 0.0, 0.0]), np.eye(3))  # the point of resolution: SRMS_Canadarm.urdf joint_ee_fixed
    for _, _, env in raw["arm/state"][::20]:
        X_OE = f8(env[6]["X_OE"], (4, 4))
        assert np.abs(link6[env[3]] @ tip - X_OE).max() < 1e-9
        assert np.abs(E[env[3]] - X_OE).max() < 1e-12


def test_scene_and_events(run, fox):
    _, cfg, raw = run
    _, _, dec = fox
    first = dec["/scene"][0][3]
    ids = {e.id for e in first.entities}
    assert {"orbiter", "payload", "grapple_fixture", "trunnions", "latch_guides", "srms_link1", "srms_link6",
            "rig_base_joints", "rig_platform_joints"} <= ids
    ents = {e.id: e for e in first.entities}
    assert len(ents["trunnions"].spheres) == len(cfg["payload"]["points_B"])
    assert len(ents["latch_guides"].cylinders) == len(cfg["contact"]["surfaces"])
    # the payload cylinder: 3.6 m across and 6 m long (12 t, solid-cylinder inertia of the config)
    cyl = ents["payload"].cylinders[0]
    assert (cyl.size.x, cyl.size.z) == (pytest.approx(3.6), pytest.approx(6.0))
    legs = [e for *_, m in dec["/scene"] for e in m.entities if e.id == "rig_legs"]
    assert len(legs) == len(raw["hil/command"]) and len(legs[-1].lines[0].points) == 12
    logs = [(lt, m.message, m.name) for lt, _, name, m in dec["/events"]]
    assert all(name == "foxglove.Log" for *_, name, _ in dec["/events"])
    t_msg = {e["kind"]: t for t, _, env in raw["contact/event"] for e in env[6]["events"]}
    for kind in ("capture", "rigidize"):
        assert [(lt, n) for lt, msg, n in logs if msg.startswith(kind + ":")] == [(t_msg[kind], "contact")]
    assert any(msg.startswith("command capture") for _, msg, _ in logs)
    assert any(msg == "rig state ENGAGED" for _, msg, _ in logs)


def test_the_shipped_layout_points_at_the_export(fox):
    """Every plot path of configs/foxglove_layout.json is a channel, field and component of the export, and each
    3D panel follows a frame of /tf."""
    layout = json.loads((ROOT / "configs" / "foxglove_layout.json").read_text())
    _, _, dec = fox
    frames = {f for *_, m in dec["/tf"] for tf in m.transforms for f in (tf.parent_frame_id, tf.child_frame_id)}
    paths = 0
    for panel, cfg in layout["configById"].items():
        if panel.startswith("Plot!"):
            for p in cfg["paths"]:
                channel, field, index = re.fullmatch(r"(/[\w/]+)\.(\w+)\[(\d+)\]", p["value"]).groups()
                m = dec[channel][-1][3]
                assert int(index) < len(getattr(m, field)), p["value"]
                paths += 1
        elif panel.startswith("3D!"):
            assert cfg["followTf"] in frames
    assert paths == 3 + 6 + 6
    assert json.dumps(layout["layout"]).count("!") == len(layout["configById"])  # every panel placed
