"""Rig protocols as backends (:mod:`hil.rigproto`): the wire bytes of every format unchanged; each
format's host end against the emulator's parser of it; a registered protocol; the relative-motion map."""

from __future__ import annotations

import contextlib
import os
import threading
import time
import tty

import numpy as np
import pytest

from dynamics.spatial import rotation_to_quat
from dynamics.stewart import pose_from_vector
from errors import ConfigError
from hil import rigproto
from hil.bridge import HilBridge, relative_motion
from hil.config import parse
from hil.emulator import READY, FdPort, LockstepPort, LockstepRig, serve
from hil.encoders import AxisRange, BinaryAxisEncoder
from hil.framing import Hello, RigState, Telemetry
from hil.link import SerialLink, open_port
from hil.rigproto import AxisProtocol, open_protocol, protocol_class, protocol_names, register_protocol
from protocol.service import Sample
from tests.hil.vectors import WIRE_RUNS
from tests.hil.wire_capture import H_NS, RUNS, _bodies, _Inputs, capture


def test_every_run_has_its_vector():
    assert set(WIRE_RUNS) == set(RUNS)


@pytest.mark.parametrize("name", sorted(RUNS))
def test_bridge_writes_the_captured_bytes(name):
    """The bytes of a fixed run (handshake, setpoints, heartbeats of a freeze, its park, close) equal the
    bytes the bridge wrote for it before the formats became backends."""
    got = capture(name)
    want = bytes.fromhex(WIRE_RUNS[name])
    assert len(got) == len(want), (name, len(got), len(want))
    first = next((i for i, (a, b) in enumerate(zip(got, want, strict=True)) if a != b), None)
    assert first is None, f"{name}: first differing byte at {first}: {got[first:first + 16].hex()} " \
                          f"!= {want[first:first + 16].hex()}"


# ---------------------------------------------------------------------------------------------- back to back
@contextlib.contextmanager
def rig_on_pty(cfg):
    """The emulator's realtime loop (:func:`hil.emulator.serve`) on a pty's master in a thread, and the
    host's :class:`hil.link.SerialLink` on its slave; yields ``(link, done)``, ``done`` the core once
    stopped (a one-element list)."""
    master, slave = os.openpty()
    tty.setraw(slave)
    os.set_blocking(master, False)
    stop, done = threading.Event(), []
    link = SerialLink(open_port(os.ttyname(slave), int(cfg.table["baud"]), timeout=0.01))  # (opening flushes)
    th = threading.Thread(target=lambda: done.append(serve(FdPort(master), cfg, stop=stop, max_seconds=30.0)),
                          daemon=True)
    th.start()
    try:
        deadline = time.monotonic() + 10.0
        while link.port.read(1) != READY:  # the rig is up
            assert time.monotonic() < deadline, "the emulator did not serve"
        yield link, done
    finally:
        stop.set()
        th.join(10.0)
        link.close()
        os.close(slave)
        with contextlib.suppress(OSError):
            os.close(master)


def wait_for(proto, pred, timeout=5.0):
    """Poll the rig's frames until ``pred(frame)``; the frame."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for f in proto.poll(timeout=0.01):
            if pred(f):
                return f
    raise AssertionError("no such reply from the rig")


def quantum(cfg) -> float:
    """Half a count of the format's axis range: the most its encoding moves a value (independent of
    hil.encoders: the ranges of [hil.limits] and the counts of PROTOCOL.md §3–4)."""
    full = {"native": None, "binary6": 0xFFFF, "ascii": (1 << int(cfg.table["ascii_bits"])) - 1}[cfg.table["format"]]
    return 0.0 if full is None else 0.5 * float(np.max(cfg.limits.hi - cfg.limits.lo)) / full


@pytest.mark.parametrize("fmt", ["native", "binary6", "ascii"])
def test_back_to_back_bridge_end_to_emulator_end(fmt):
    """Each format's host end (:func:`hil.rigproto.open_protocol`) against the emulator parsing that format
    over a pty: the handshake where there is one, 20 setpoints applied in order within the encoding's
    quantisation (float32 for native), a hold that keeps the rig engaged at the last setpoint, a park to
    neutral."""
    cfg = parse({"format": fmt})
    neutral = cfg.rig.inverse(cfg.pose_map.X_RP0)
    sent = [neutral + 2e-4 * np.sin(0.3 * k + np.arange(6)) for k in range(1, 21)]
    with rig_on_pty(cfg) as (link, done):
        proto = open_protocol(fmt, link, cfg)
        caps = proto.capabilities
        assert (caps.has_handshake, caps.has_replies, caps.has_wrench) == ((True,) * 3 if fmt == "native"
                                                                           else (False,) * 3)
        if caps.has_handshake:
            proto.handshake(cfg.fingerprint, 1000, None)
            hello = wait_for(proto, lambda f: isinstance(f.msg, Hello)).msg
            assert (hello.fingerprint, hello.n_axes, hello.watchdog_ms) == (cfg.fingerprint, 6, 1000)
            proto.engage(None)
            wait_for(proto, lambda f: isinstance(f.msg, Telemetry) and f.msg.state == RigState.ENGAGED)
        else:
            assert proto.handshake(cfg.fingerprint, 1000, None) is None and proto.engage(None) is None
            assert proto.poll(timeout=0.01) == []
        for axes in sent:
            proto.setpoint(axes, cfg.pose_map.X_RP0, None)
            time.sleep(0.004)
        time.sleep(0.2)
        before, seq = link.stats.tx_bytes, link.seq
        proto.hold(None)
        if caps.has_replies:  # the reply to the hold (a heartbeat)
            tel = wait_for(proto, lambda f: isinstance(f.msg, Telemetry) and f.msg.echo_seq == seq).msg
            assert tel.state == RigState.ENGAGED
            np.testing.assert_allclose(tel.axes, np.float32(sent[-1]), atol=1e-6)  # holding the last setpoint
        else:
            assert link.stats.tx_bytes == before  # nothing to say: such a rig holds its last value
        time.sleep(0.1)
        proto.park(None)
        if caps.has_replies:
            tel = wait_for(proto, lambda f: isinstance(f.msg, Telemetry) and f.msg.state == RigState.ARMED).msg
            np.testing.assert_allclose(tel.axes, neutral, atol=1e-6)
        time.sleep(0.3)
    (core,) = done
    applied = [np.array(v) for _, v in core.applied]
    n = len(sent)
    if fmt != "native":
        assert len(applied) == n + 1  # the park: the neutral axes, sent as a setpoint
        np.testing.assert_allclose(applied[-1], neutral, atol=quantum(cfg) + 1e-15)
        assert core.state == RigState.ENGAGED
    else:
        assert len(applied) == n and core.state == RigState.ARMED
    for got, want in zip(applied[:n], sent, strict=True):
        if fmt == "native":
            np.testing.assert_array_equal(got, np.float32(want).astype(np.float64))
        else:
            assert np.max(np.abs(got - want)) <= quantum(cfg) + 1e-15
            assert np.max(np.abs(got - want)) > 0.0  # (quantised: not the float sent)
    np.testing.assert_allclose(core.x, neutral, atol=quantum(cfg) + 1e-6)  # parked (the rig's own 1e-6)


@pytest.mark.parametrize("fmt", ["binary6", "ascii"])
def test_bridge_drives_the_lockstep_emulator_in_an_axis_format(fmt):
    """The bridge in binary6 or ascii against the lockstep emulator parsing that format: the rig's axes go
    to the bridge's commanded axes within the encoding's quantisation; no feedback (the format has none)."""
    cfg = parse({"format": fmt, "compensation": {"predict": False}})
    rig = LockstepRig(cfg)
    b = HilBridge(cfg, "hil", H_NS, SerialLink(LockstepPort(rig)))
    b.initial(0)
    target = pose_from_vector([0.004, -0.003, 0.002, 0.01, -0.02, 0.03])
    for n in range(200):
        orb, pay = _bodies(0.0)
        pay["p_WoTo_W"], pay["quat_WT"] = target[:3, 3], rotation_to_quat(target[:3, :3])
        out = b.step(n * H_NS, H_NS, _Inputs({"orbiter/state": Sample(n * H_NS, H_NS, "orbiter", n, orb),
                                               "payload/state": Sample(n * H_NS, H_NS, "payload", n, pay)}))
    legs = cfg.rig.inverse(cfg.pose_map.X_RP0 @ target)
    assert rig.core.counts["applied"] == 200 and rig.firmware is not None and rig.firmware.parser.bad == 0
    assert np.max(np.abs(rig.core.x - legs)) <= quantum(cfg) + 1e-12
    assert not out["hil/feedback"]["valid"] and out["hil/status"]["link"]["tx_frames"] == 200


# ---------------------------------------------------------------------------------------------- registry
class ToyProtocol(AxisProtocol):
    """A rig taking ``binary6`` frames with another start (what a new backend looks like)."""

    name = "toy"

    @classmethod
    def make_encoder(cls, cfg):
        return BinaryAxisEncoder(AxisRange(tuple(cfg.limits.lo), tuple(cfg.limits.hi), 0xFFFF), start=b"\x7e")


def test_a_registered_protocol_is_a_format_of_the_config_the_bridge_and_the_emulator():
    with pytest.raises(ConfigError, match="hil.format: unknown rig protocol 'toy'"):
        parse({"format": "toy"})
    with pytest.raises(ConfigError, match="not a RigProtocol"):
        register_protocol("toy", dict)  # type: ignore[arg-type]
    register_protocol("toy", ToyProtocol)
    try:
        cfg = parse({"format": "toy"})
        assert protocol_class("toy") is ToyProtocol and "toy" in protocol_names()
        rig = LockstepRig(cfg)
        proto = open_protocol("toy", LockstepPort(rig), cfg)
        axes = cfg.rig.inverse(cfg.pose_map.X_RP0) + 1e-3
        proto.setpoint(axes, cfg.pose_map.X_RP0, None)
        assert rig.core.counts["applied"] == 1
        assert np.max(np.abs(np.array(rig.core.applied[-1][1]) - axes)) <= quantum(parse({"format": "binary6"}))
    finally:
        del rigproto._PROTOCOLS["toy"]


# ---------------------------------------------------------------------------------------------- geometry
def test_relative_motion_is_the_composition_of_the_frames_with_unsymmetric_rotations():
    """:func:`hil.bridge.relative_motion`'s X_LB against inv(X_WO X_OL) X_WT X_TB composed here with numpy
    from random rotations (fixed seed): none of them symmetric, so a transposed X_OL or X_TB rotation
    (``_frame_rows``) fails; and the twist's rotation part against R_WLᵀ (ω_WT − ω_WO)."""
    rng = np.random.default_rng(7)

    def rot():  # a uniformly random rotation (QR of a Gaussian matrix, signs fixed)
        q, r = np.linalg.qr(rng.normal(size=(3, 3)))
        q = q @ np.diag(np.sign(np.diag(r)))
        return q if np.linalg.det(q) > 0 else -q

    def X(R, p):
        out = np.eye(4)
        out[:3, :3], out[:3, 3] = R, p
        return out

    for _ in range(5):
        X_WO, X_OL, X_WT, X_TB = (X(rot(), rng.normal(size=3)) for _ in range(4))
        for M in (X_OL, X_TB):
            assert np.max(np.abs(M[:3, :3] - M[:3, :3].T)) > 0.1
        wO, wT = rng.normal(size=3), rng.normal(size=3)
        o = {"p_WoOo_W": X_WO[:3, 3], "quat_WO": rotation_to_quat(X_WO[:3, :3]), "w_WO_O": wO,
             "v_WOo_W": np.zeros(3)}
        p = {"p_WoTo_W": X_WT[:3, 3], "quat_WT": rotation_to_quat(X_WT[:3, :3]), "w_WT_T": wT,
             "v_WTo_W": np.zeros(3)}
        X_LB, V = relative_motion(o, p, X_OL, X_TB)
        np.testing.assert_allclose(X_LB, np.linalg.inv(X_WO @ X_OL) @ X_WT @ X_TB, atol=1e-12)
        R_WL = X_WO[:3, :3] @ X_OL[:3, :3]
        np.testing.assert_allclose(V[:3], R_WL.T @ (X_WT[:3, :3] @ wT - X_WO[:3, :3] @ wO), atol=1e-12)
