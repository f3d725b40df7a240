"""Declared parameters of the operator, logger, replay, viewer, contact, hil.bridge and fmu kinds
(protocol/params.py): each kind's class has one field per key its module declares for its table (``TABLE_KEYS`` of a
table it owns, ``OPTIONS`` of its ``[services.NAME]``), every field with a unit, and a service built from a
configuration of non-default values holds exactly those values."""

from __future__ import annotations

import dataclasses
import math
import pickle

import pytest

from protocol import registry
from protocol.params import is_params, units


def _declared_keys(kind: str) -> set[str]:
    """The keys a kind's module declares for the table it reads: its own table's ``TABLE_KEYS``, else the extra
    keys of its service table (``OPTIONS``)."""
    mod = registry.kind_module(kind)
    table_keys = getattr(mod, "TABLE_KEYS", {})
    if kind in table_keys:
        return set(table_keys[kind])
    return set(mod.OPTIONS)


@pytest.mark.parametrize("kind", ["operator", "logger", "replay", "viewer"])
def test_a_kinds_declared_parameters_are_its_tables_keys_each_with_a_unit(kind):
    cls = registry.params(kind)
    assert cls is not None and is_params(cls)
    assert {f.name for f in dataclasses.fields(cls)} == _declared_keys(kind)
    u = units(cls)
    assert set(u) == _declared_keys(kind) and all(isinstance(x, str) and x for x in u.values()), u


def test_the_operator_holds_its_configured_script():
    from services import operator

    script = [{"t": 0, "cmd": "mode", "mode": "manual", "frame": "orbiter"},
              {"t": 1.5, "cmd": "rate", "v": [0.02, 0.0, -0.01], "w": [0.0, 0.0, 0.0]},
              {"t": 20, "cmd": "capture"}]
    m = operator.build({"operator": {"script": script}}, "operator", 10_000_000)
    assert m.params == operator.OperatorParams(script=(
        {"t": 0.0, "cmd": "mode", "mode": "manual", "frame": "orbiter"},
        {"t": 1.5, "cmd": "rate", "v": [0.02, 0.0, -0.01], "w": [0.0, 0.0, 0.0]},
        {"t": 20.0, "cmd": "capture"}))
    assert all(type(c["t"]) is float for c in m.params.script)
    # the commands are copies: the configuration changed afterwards changes nothing; the model pickles
    script[1]["v"][0] = 9.0
    assert m.params.script[1]["v"] == [0.02, 0.0, -0.01]
    assert pickle.loads(pickle.dumps(m)).params == m.params
    assert operator.build({}, "operator", 10_000_000).params.script == ()
    # the player publishes what the parameters hold: the command at 1.5 s in the step (1.49, 1.5]
    ctx = m.new_context()
    m.initial(0, ctx)
    assert m.step(1_490_000_000, 10_000_000, ctx, None)["operator/command"]["events"] == [
        {"kind": "rate", "t": 1.5, "v": [0.02, 0.0, -0.01], "w": [0.0, 0.0, 0.0]}]


def test_the_logger_holds_its_configured_keys_and_records_with_them(tmp_path):
    from services import logger

    log = tmp_path / "run.mcap"
    svc = {"kind": "logger", "rate_hz": 1000, "path": str(log), "topics": ["orbiter/state", "arm/state"],
           "chunk_size": 4096, "flush_interval": 0.25, "writer_cpus": [0]}
    cfg = {"sim": {"log": str(tmp_path / "other.mcap")}, "services": {"rec": svc}}
    assert logger.validate(cfg, "rec") == []
    assert logger.LoggerParams.from_service(cfg, "rec") == logger.LoggerParams(
        path=str(log), topics=("orbiter/state", "arm/state"), chunk_size=4096, flush_interval=0.25,
        schemas_from=None, writer_cpus=(0,))
    p = logger.LoggerParams.from_service({"services": {"rec": {"kind": "logger", "rate_hz": 1000,
                                                                "schemas_from": "old.mcap"}}}, "rec")
    assert (p.path, p.topics, p.schemas_from, p.writer_cpus) == (None, (), "old.mcap", ())
    assert type(p.flush_interval) is float and p.flush_interval == 1.0 and p.chunk_size == 1 << 20
    sink = logger.build(cfg, "rec", 1_000_000)
    try:
        assert sink.path == log and sink.topics == ("orbiter/state", "arm/state")
    finally:
        sink.close()
    assert log.is_file() and not (tmp_path / "other.mcap").exists()


def _toy_log(path):
    """Two toy topics at 100 Hz over 1 s, logged."""
    import testkit.toys  # noqa: F401  (registers the toy topics)
    from protocol.codec import encode
    from services.logger import McapLogger

    lg = McapLogger(path)
    for i in range(101):
        for k, topic in enumerate(("toy/state0", "toy/state1")):
            lg.on_message(topic, encode(topic, {"x": float(i), "v": 0.0}, sender=f"s{k}", seq=i, t_ns=i * 10_000_000,
                                        h_ns=10_000_000))
    lg.close()


def test_the_replay_holds_its_configured_keys_and_replays_with_them(tmp_path):
    from services import replay

    log = tmp_path / "toy.mcap"
    _toy_log(log)
    svc = {"kind": "replay", "rate_hz": 1000, "log": str(log), "topics": ["toy/*"], "exclude": ["toy/state1"],
           "start": 0.2, "end": 1, "rate": 2, "loop": True, "paused": True, "keyboard": True, "progress": True,
           "hold": True}
    cfg = {"services": {"rp": svc}}
    p = replay.ReplayParams.from_service(cfg, "rp")
    assert p == replay.ReplayParams(log=str(log), topics=("toy/*",), exclude=("toy/state1",), start=0.2, end=1.0,
                                    rate=2.0, loop=True, paused=True, keyboard=True, progress=True, hold=True)
    assert type(p.end) is float and type(p.rate) is float
    q = replay.ReplayParams.from_service({"services": {"rp": {"kind": "replay", "log": "x.mcap"}}}, "rp")
    assert (q.topics, q.exclude, q.start, q.end, q.rate) == ((), (), None, None, 0.0)
    assert not (q.loop or q.paused or q.keyboard or q.progress or q.hold)
    # a source built from them: the topic selection, the window [0.2, 0.5] s, the pace and loop
    svc.update(end=0.5, paused=False, keyboard=False, progress=False, hold=False)
    assert replay.validate(cfg, "rp") == []
    assert [port.topic for port in replay.ports(cfg, "rp").outputs] == ["toy/state0"]
    src = replay.build(cfg, "rp", 1_000_000)
    try:
        assert src.selected == ["toy/state0"] and (src.start_ns, src.end_ns) == (200_000_000, 500_000_000)
        assert src.status.rate == 2.0 and src.loop is True and src.status.paused is False
    finally:
        src.close()


def test_the_viewer_holds_its_configured_keys_and_serves_with_them():
    from services import viewer

    svc = {"kind": "viewer", "rate_hz": 50, "host": "127.0.0.1", "port": 0, "display_hz": 12,
           "topics": ["orbiter/state", "arm/state"], "allow_remote": True, "encodings": ["ros2", "protobuf"]}
    cfg = {"services": {"view": svc}}
    p = viewer.ViewerParams.from_service(cfg, "view")
    assert p == viewer.ViewerParams(host="127.0.0.1", port=0, display_hz=12.0, topics=("orbiter/state", "arm/state"),
                                    allow_remote=True, encodings=("ros2", "protobuf"))
    assert type(p.display_hz) is float
    q = viewer.ViewerParams.from_service({"services": {"view": {"kind": "viewer", "rate_hz": 50}}}, "view")
    assert q == viewer.ViewerParams(host="127.0.0.1", port=8765, display_hz=30.0, topics=(), allow_remote=False,
                                    encodings=("protobuf",))
    pytest.importorskip("foxglove")
    v = viewer.build(cfg, "view", 20_000_000)
    try:
        assert v.params == p and v.topics == ("orbiter/state", "arm/state")
        assert v.encodings == {"ros2", "protobuf"} and v.port > 0  # port 0: a free one was bound
        assert v._period == pytest.approx(1 / 12)
    finally:
        v.close()


def test_the_contact_holds_its_configured_contact_table_and_builds_from_it():
    from dynamics import contact as dc
    from services import contact

    pts = [[1.5, 0.0, 0.0], [-1.5, 0.0, 0.0]]
    con = {"rigidize_delay": 0.25, "capture": "compliant", "berthing": "impulsive", "k": 3.0e5, "exponent": 1.5,
           "alpha": 0.4, "mu_s": 0.35, "mu_k": 0.25, "v_stick": 0.003, "impulsive_law": "cyril", "restitution": 0.6,
           "mu": 0.4, "r_E": 0.7, "r_f": 0.8, "source": "hil", "hil_max_age": 0.02, "hil_force_max": 4000,
           "hil_torque_max": 900.0, "adaptive": False,
           "surfaces": [{"point": 1, "p_LoSo_L": [0, 2, 0], "n_L": [0, 0, 2], "radius": 0.3, "depth": 0.05},
                        {"point": 0}],
           "envelope": {"lateral": 0.2, "axial": 0.1, "tilt": 0.3, "roll": 0.4, "rate_lin": 0.05, "rate_ang": 0.02},
           "latch": {"position": 0.03, "angle": 0.04, "rate_lin": 0.02, "rate_ang": 0.005, "k_lin": 2e7,
                     "k_rot": 3e8, "c_lin": 4e5, "c_rot": 5e6, "close_time": 4, "final_position": 0.002,
                     "final_angle": 0.003, "X_LB": [0.1, 0, 0, 0, 0, 0], "model": "constraint", "baumgarte": 25.0},
           "snare": {"k_lin": 3e5, "k_rot": 4e6, "c_lin": 8e4, "c_rot": 6e5}}
    cfg = {"orbiter": {"mass": 1.0e5, "inertia": [1.2e6, 8.0e6, 8.5e6]},
           "payload": {"mass": 12000.0, "inertia": [2.0e4, 3.0e4, 3.5e4], "points_B": pts}, "contact": con}
    assert contact.validate(cfg, "contact") == []
    m = contact.build(cfg, "contact", 1_000_000)
    inf = float("inf")
    assert m.params == contact.ContactParams(
        rigidize_delay=0.25, capture="compliant", berthing="impulsive", k=3.0e5, exponent=1.5, alpha=0.4, mu_s=0.35,
        mu_k=0.25, v_stick=0.003, impulsive_law="cyril", restitution=0.6, mu=0.4, r_E=0.7, r_f=0.8, source="hil",
        hil_max_age=0.02, hil_force_max=4000.0, hil_torque_max=900.0, adaptive=False,
        surfaces=(contact.SurfaceParams(1, (0.0, 2.0, 0.0), (0.0, 0.0, 2.0), 0.3, 0.05),
                  contact.SurfaceParams(0, (0.0, 0.0, 0.0), (0.0, 0.0, 1.0), inf, inf)),
        envelope=contact.EnvelopeParams(0.2, 0.1, 0.3, 0.4, 0.05, 0.02),
        latch=contact.LatchParams(0.03, 0.04, 0.02, 0.005, 2e7, 3e8, 4e5, 5e6, 4.0, 0.002, 0.003,
                                  (0.1, 0.0, 0.0, 0.0, 0.0, 0.0), "constraint", 25.0),
        snare=contact.SnareParams(3e5, 4e6, 8e4, 6e5))
    assert type(m.params.hil_force_max) is float and type(m.params.latch.close_time) is float
    # the model is built from them
    assert (m.law.k, m.law.exponent, m.law.alpha, m.law.mu_s, m.law.mu_k, m.law.v_stick) == (
        3.0e5, 1.5, 0.4, 0.35, 0.25, 0.003)
    assert m.envelope == dc.CaptureEnvelope(0.2, 0.1, 0.3, 0.4, 0.05, 0.02)
    assert m.criteria == dc.LatchCriteria(0.03, 0.04, 0.02, 0.005)
    assert m.latch_drive == {"close_time": 4.0, "final_position": 0.002, "final_angle": 0.003}
    assert m.X_LB_berthed[0, 3] == 0.1 and m.rigidize_delay_ns == 250_000_000 and not m.adaptive
    assert m.capture.spring == {"k_lin": 3e5, "k_rot": 4e6, "c_lin": 8e4, "c_rot": 6e5} and m.latch.gain == 25.0
    assert m.berthing.impulse is contact.IMPULSIVE_LAWS["cyril"]
    assert "hil/feedback" in [port.topic for port in m.inputs]
    (i, p, n, radius, depth), (j, *_rest) = m.surfaces
    assert (i, list(p), list(n), radius, depth, j) == (1, [0.0, 2.0, 0.0], [0.0, 0.0, 1.0], 0.3, 0.05, 0)
    assert contact.build({**cfg, "contact": {}}, "contact", 1_000_000).params.surfaces == ()


def _hil_table() -> dict:
    """A ``[hil]`` table of non-default values (every key written)."""
    return {
        "url": "loop://", "baud": 460800, "format": "binary6", "setpoint": "pose", "ascii_bits": 12, "rig": "stewart",
        "fingerprint": 77, "bad_frames_max": 3, "clamp_fault_after": 4, "watchdog": 0.05, "reply_timeout": 0.8,
        "resend_after": 0.2, "pipeline": True, "start_timeout": 12, "X_OL": [0.1, 0, 0, 0, 0, 0],
        "X_TB": [0, 0.2, 0, 0, 0, 0],
        "stewart": {"r_base": 0.31, "r_platform": 0.21, "base_pair_angle": 0.35, "platform_pair_angle": 0.36,
                    "neutral_height": 0.52, "cond_max": 60, "joint_cone_base": 0.8, "joint_cone_platform": 1.1},
        "servo": {"component": [2, 1], "scale": [2, 3], "offset": [0.5, 0.25]},
        "limits": {"lo": [0.41, 0.41, 0.41, 0.41, 0.41, 0.42], "hi": 0.72, "v_max": 0.6, "a_max": 6, "j_max": 120.0},
        "map": {"neutral": [0, 0, 0.01, 0, 0, 0], "scale": 0.5, "rot_scale": 0.25, "axis_map": ["y", "x", "-z"]},
        "compensation": {"predict": False, "predict_accel_hz": 3.0, "predict_accel_beyond": 0.07, "passivity": False,
                         "restitution_max": 0.8, "length": 2.0, "lag": 0, "gravity": False, "tare": 0.3,
                         "filter_hz": 40.0, "deadband": 2.0, "release": 0.4},
        "guides": {"points": [[0, 1, 0]], "surfaces": [{"point": 0, "p_LoSo_L": [0, 1, 0], "n_L": [0, 0, 1]}],
                   "k": 3.0e5, "exponent": 1.5, "alpha": 0.4, "mu_s": 0.35, "mu_k": 0.25, "v_stick": 0.003},
        "mockup": {"mass": 2.5, "com": [0, 0, 0.1], "inertia": [0.01, 0.02, 0.03], "gravity": 9.8},
        "emulator": {"delay": 0.002, "drop": 0.01, "bit_error": 0.001, "contact": "plane", "stiffness": 3.0e5,
                     "damping": 100.0, "plane_normal": [0, 0, -1], "plane_offset": 0.55, "probe_radius": 0.05,
                     "bandwidth": 20.0, "ft_rate": 1000.0, "ft_cutoff": 300.0, "ft_noise": [0.5, 0.05],
                     "ft_bias": [0, 0, 0, 1, 2, 3], "ft_drift": [0, 0, 0, 0.1, 0, 0], "ft_range": [500, 50],
                     "hard_limits": 2.0, "rate": 1000, "seed": 5, "rt_priority": 10, "stats": "stats.json"},
    }


def test_the_hil_bridge_holds_its_configured_hil_table_and_builds_from_it():
    from hil import bridge
    from hil.config import (
        HilCompensation,
        HilEmulator,
        HilGuides,
        HilLimits,
        HilMap,
        HilMockup,
        HilParams,
        HilServo,
        HilStewart,
        parse,
    )

    assert registry.params("hil.bridge") is HilParams
    cfg = parse(_hil_table())
    assert cfg.params == HilParams(
        url="loop://", baud=460800, format="binary6", setpoint="pose", ascii_bits=12, rig="stewart", fingerprint=77,
        bad_frames_max=3, clamp_fault_after=4, watchdog=0.05, reply_timeout=0.8, resend_after=0.2, pipeline=True,
        start_timeout=12.0, X_OL=(0.1, 0.0, 0.0, 0.0, 0.0, 0.0), X_TB=(0.0, 0.2, 0.0, 0.0, 0.0, 0.0),
        stewart=HilStewart(0.31, 0.21, 0.35, 0.36, 0.52, 60.0, 0.8, 1.1),
        servo=HilServo((2, 1), (2.0, 3.0), (0.5, 0.25)),
        limits=HilLimits((0.41, 0.41, 0.41, 0.41, 0.41, 0.42), 0.72, 0.6, 6.0, 120.0),
        map=HilMap((0.0, 0.0, 0.01, 0.0, 0.0, 0.0), 0.5, 0.25, ("y", "x", "-z")),
        compensation=HilCompensation(False, 3.0, 0.07, False, 0.8, 2.0, 0, False, 0.3, 40.0, 2.0, 0.4),
        guides=HilGuides(([0, 1, 0],), ({"point": 0, "p_LoSo_L": [0, 1, 0], "n_L": [0, 0, 1]},), 3.0e5, 1.5, 0.4,
                         0.35, 0.25, 0.003),
        mockup=HilMockup(2.5, (0.0, 0.0, 0.1), (0.01, 0.02, 0.03), 9.8),
        emulator=HilEmulator(0.002, 0.01, 0.001, "plane", 3.0e5, 100.0, (0.0, 0.0, -1.0), 0.55, 0.05, 20.0, 1000.0,
                             300.0, (0.5, 0.05), (0.0, 0.0, 0.0, 1.0, 2.0, 3.0), (0.0, 0.0, 0.0, 0.1, 0.0, 0.0),
                             (500.0, 50.0), 2.0, 1000.0, 5, 10, "stats.json"))
    assert type(cfg.params.start_timeout) is float and type(cfg.params.limits.a_max) is float
    # the bridge reads them (no link: nothing opened)
    b = bridge.HilBridge(cfg, "hil", 2_000_000, None)
    assert (b._predict, b._accel_beyond, b._tare_s, b._deadband, b._release, b._gravity) == (
        False, 0.07, 0.3, 2.0, 0.4, False)
    assert b._accel_gain == pytest.approx(1.0 - math.exp(-2.0 * math.pi * 3.0 * 0.002), rel=1e-15)
    assert b._filter_gain == pytest.approx(1.0 - math.exp(-2.0 * math.pi * 40.0 * 0.002), rel=1e-15)
    assert b._mockup[0] == 2.5 and list(b._mockup[1]) == [0.0, 0.0, 0.1] and b._mockup[3] == 9.8
    assert b._pipeline is True and b.safety.bad_frames_max == 3
    tau, parts = bridge.loop_delay(cfg, 0.002)
    assert parts["transport"] == 0.004 and parts["pipeline"] == 0.002
    assert parts["filter"] == pytest.approx(1.0 / (2.0 * math.pi * 40.0), rel=1e-15)
    assert parts["actuators"] == pytest.approx(0.002 + 2.0 / (2.0 * math.pi * 20.0), rel=1e-15)


def test_the_fmu_holds_its_configured_service_table_and_builds_from_it(tmp_path):
    pytest.importorskip("pythonfmu")
    pytest.importorskip("fmpy")
    from services import fmu
    from tests.services.test_fmu import _build_leg, _models, _plan, _write

    assert registry.params("fmu") is fmu.FmuParams
    path = _write(tmp_path, _build_leg(tmp_path / "build"), inputs='{x_cmd = "toy/state0:x"}',
                  outputs='{topic = "rig/leg", kind = "flow", variables = ["F", "x"]}',
                  start="{x0 = 0.9, k = 3.0e4, c = 500.0}", logger=False, processes="")
    plan = _plan(path)
    assert fmu.FmuParams.from_service(plan.config, "leg") == fmu.FmuParams(
        fmu="ActuatorLeg.fmu", inputs={"x_cmd": "toy/state0:x"},
        outputs=fmu.FmuOutputs(topic="rig/leg", kind="flow", variables=("F", "x")),
        start={"x0": 0.9, "k": 3.0e4, "c": 500.0})
    q = fmu.FmuParams.from_service({"services": {"leg": {"kind": "fmu", "fmu": "a.fmu",
                                                         "outputs": {"topic": "t"}}}}, "leg")
    assert (q.inputs, q.start, q.outputs) == ({}, {}, fmu.FmuOutputs("t", "state", None))
    (leg,) = [m for m in _models(plan) if isinstance(m, fmu.FmuModel)]
    try:
        assert leg.spec.params == fmu.FmuParams.from_service(plan.config, "leg")
        assert [v for v, _, _, _ in leg.spec.start] == ["x0", "k", "c"]
        assert [v for v, _, _ in leg.spec.outputs] == ["F", "x"] and leg.outputs[0].kind == "flow"
    finally:
        leg.close()
