"""The bridge's model reads no clock and does no link I/O; the rig device's lockstep exchange (resend, timeout).

The device's waits run on an injected clock here: a fake one that a read with nothing to read advances by
the line's read timeout, as a blocking read would wait. The expected counts and times are those of the
configuration's rule (``[hil] resend_after``, ``reply_timeout``, ``bad_frames_max``, ``hil/config.py``),
the frames those the lockstep emulator (:class:`hil.emulator.LockstepRig`) receives and answers.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import tty
from pathlib import Path
from types import SimpleNamespace

import pytest
import serial

import hil.bridge
import hil.device
from errors import ConfigError, RigFault
from hil.bridge import HilBridge, build
from hil.config import parse
from hil.device import RigDevice
from hil.emulator import LockstepPort, LockstepRig
from hil.framing import Frame, FrameDecoder, Heartbeat, Nak, Telemetry
from hil.link import SerialLink

CLOCK_CALLS = frozenset({"monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns", "process_time",
                         "process_time_ns", "time_ns", "sleep", "thread_time", "thread_time_ns"})
"""What reads a clock or waits on one (the ``time`` module's functions; ``time.time`` separately)."""
LINK_IO = frozenset({"send", "write", "write_raw", "read", "receive", "poll", "resend", "start_reader",
                     "handshake", "engage", "setpoint", "hold", "park", "close"})
"""The link's and the rig protocol's I/O methods (:class:`hil.link.SerialLink`, :class:`hil.rigproto.RigProtocol`)."""


def clock_reads(source: str) -> list[str]:
    """Where ``source`` imports the ``time`` module or reads a clock: ``"line: what"`` each."""
    out = []
    for node in ast.walk(ast.parse(source)):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Import):
            out += [f"{line}: import {a.name}" for a in node.names if a.name == "time"]
        elif isinstance(node, ast.ImportFrom) and node.module == "time":
            out.append(f"{line}: from time import {', '.join(a.name for a in node.names)}")
        elif isinstance(node, ast.Attribute) and (node.attr in CLOCK_CALLS or (
                node.attr == "time" and isinstance(node.value, ast.Name) and node.value.id == "time")):
            out.append(f"{line}: {ast.unparse(node)}")
        elif isinstance(node, ast.Name) and node.id in CLOCK_CALLS:
            out.append(f"{line}: {node.id}")
    return out


def link_io(source: str) -> list[str]:
    """Where ``source`` calls a link or protocol I/O method on anything but the device (``device``,
    ``self.device``): ``"line: call"`` each. Objects are told by their names (``link``, ``proto``, ``port``...)."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in LINK_IO:
            base = ast.unparse(node.func.value)
            if any(word in base for word in ("link", "proto", "port", "serial")):
                out.append(f"{node.lineno}: {ast.unparse(node.func)}")
        elif isinstance(node, ast.Name) and node.id in ("open_port", "open_protocol", "serial_for_url"):
            out.append(f"{node.lineno}: {node.id}")
    return out


def test_the_bridge_module_reads_no_clock():
    source = Path(hil.bridge.__file__).read_text(encoding="utf-8")
    assert clock_reads(source) == []


def test_the_bridge_module_does_no_link_io():
    source = Path(hil.bridge.__file__).read_text(encoding="utf-8")
    assert link_io(source) == []


@pytest.mark.parametrize(("snippet", "found"), [
    ("import time\nnow = time.monotonic()\n", 2),
    ("import time as t\nt.sleep(0.1)\n", 2),
    ("from time import perf_counter\nx = perf_counter()\n", 2),
    ("import time\nx = time.time()\n", 2),
    ("def f(clock):\n    return clock()\n", 0),
    ("t_us = int(round(self._sim_t * 1e6))\n", 0),
])
def test_the_clock_check_finds_clock_reads(snippet, found):
    assert len(clock_reads(snippet)) == found, clock_reads(snippet)


def test_the_checks_find_what_the_device_does():
    """The device is where the clock is read and the link driven: both checks find it there (so they can fail)."""
    source = Path(hil.device.__file__).read_text(encoding="utf-8")
    assert any("time.monotonic" in r for r in clock_reads(source))
    calls = link_io(source)
    assert any("protocol.resend" in c for c in calls) and any("proto.poll" in c for c in calls)
    assert any("open_port" in c for c in calls)


class FakeClock:
    """Seconds that pass only when a read waits (:class:`Line`)."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


class Line:
    """The host's port, in front of the emulator's lockstep port: the first ``lose`` frames the host writes
    are lost, the next ``corrupt`` reach the rig with a bit flipped; a read that finds nothing waits the
    line's read timeout ``wait_s`` on ``clock``."""

    def __init__(self, rig: LockstepRig, clock: FakeClock, lose: int = 0, corrupt: int = 0,
                 wait_s: float = 0.001) -> None:
        self.inner = LockstepPort(rig)
        self.clock, self.lose, self.corrupt, self.wait_s = clock, lose, corrupt, wait_s
        self.timeout: float | None = 0.0
        self.writes: list[bytes] = []

    def write(self, data: bytes) -> int:
        self.writes.append(bytes(data))
        if self.lose:
            self.lose -= 1
            return len(data)
        if self.corrupt:
            self.corrupt -= 1
            b = bytearray(data)
            i = next(i for i in range(len(b) // 2, len(b)) if b[i] > 1)
            b[i] ^= 0x01  # (never a delimiter: the frame still ends where it did)
            data = bytes(b)
        return self.inner.write(data)

    @property
    def in_waiting(self) -> int:
        return self.inner.in_waiting

    def read(self, size: int = 1) -> bytes:
        out = self.inner.read(size)
        if not out:
            self.clock.t += self.wait_s
        return out

    def close(self) -> None:
        pass

    def frames(self) -> list[Frame]:
        """What the host wrote, decoded."""
        dec = FrameDecoder()
        return [f for w in self.writes for f in dec.feed(w)]


def _device(resend_after: float, reply_timeout: float, resends: int, **line: int) -> tuple[RigDevice, Line, FakeClock]:
    cfg = parse({"resend_after": resend_after, "reply_timeout": reply_timeout, "bad_frames_max": resends})
    clock = FakeClock()
    port = Line(LockstepRig(cfg), clock, **line)
    return RigDevice(SerialLink(port), cfg, clock=clock), port, clock


T_S = 0.25  # the simulation time of the exchange [s]
T_US = 250_000


@pytest.mark.parametrize(("resend_after", "reply_timeout", "resends", "sent", "waited"), [
    (0.01, 1.0, 3, 4, 0.04),  # bad_frames_max resends, each after resend_after, then the step goes on
    (0.01, 0.025, 10, 3, 0.025),  # reply_timeout ends the wait first
])
def test_a_silent_rig_is_resent_to_then_the_reply_is_missed(resend_after, reply_timeout, resends, sent, waited):
    dev, line, clock = _device(resend_after, reply_timeout, resends, lose=100)
    dev.hold(T_S)
    batches = dev.receive(T_S, wait=True)
    assert batches == []
    frames = line.frames()
    assert len(frames) == sent  # the frame and its resends
    assert all(isinstance(f.msg, Heartbeat) and f.time_us == T_US for f in frames)  # the same content and stamp
    assert [f.seq for f in frames] == list(range(sent))  # each with its own seq
    assert (dev.resent, dev.reply_timeouts, dev.replies_missed) == (sent - 1, sent, 1)
    assert waited <= clock.t <= waited + 2 * sent * line.wait_s
    assert dev.receive(T_S, wait=True) == [] and len(line.writes) == sent  # nothing awaited any more: no wait
    assert clock.t <= waited + 2 * sent * line.wait_s + line.wait_s


def test_a_frame_answered_after_two_losses_is_taken_after_two_resends():
    dev, line, clock = _device(0.01, 1.0, 3, lose=2)
    dev.hold(T_S)
    batches = dev.receive(T_S, wait=True)
    assert (dev.resent, dev.reply_timeouts, dev.replies_missed) == (2, 2, 0)
    assert len(line.writes) == 3 and 0.02 <= clock.t <= 0.02 + 6 * line.wait_s
    replies = [f for b in batches for f in b.frames if isinstance(f.msg, Telemetry)]
    assert [f.time_us for f in replies] == [T_US]  # the rig's reply to the frame it got: the stamp it carried
    assert all(b.error is None and b.bad == 0 for b in batches)


def test_a_nak_resends_at_once():
    """A frame the rig rejects (a bit error) is NAKed and resent without waiting for resend_after."""
    dev, line, clock = _device(0.5, 1.0, 3, corrupt=1)
    rig = line.inner.rig
    dev.hold(T_S)
    batches = dev.receive(T_S, wait=True)
    got = [f.msg for b in batches for f in b.frames]
    assert [type(m) for m in got] == [Nak, Telemetry]
    assert rig.decoder.bad == 1 and got[0].rejected == 1  # the rig's count, in its NAK
    assert (dev.resent, dev.reply_timeouts, dev.replies_missed) == (1, 0, 0)
    assert len(line.writes) == 2 and clock.t < 0.5


def test_a_read_without_waiting_reads_no_clock():
    def no_clock() -> float:
        raise AssertionError("the clock was read")

    cfg = parse({})
    dev = RigDevice(SerialLink(LockstepPort(LockstepRig(cfg))), cfg, clock=no_clock)
    dev.hold(T_S)
    batches = dev.receive(T_S, wait=False)
    assert [type(f.msg) for b in batches for f in b.frames] == [Telemetry]


def test_a_format_without_replies_waits_for_none():
    cfg = parse({"format": "binary6"})
    port = serial.serial_for_url("loop://", timeout=0)
    dev = RigDevice(SerialLink(port), cfg, clock=lambda: pytest.fail("the clock was read"))
    dev.setpoint(T_S, cfg.rig.inverse(cfg.pose_map.X_RP0), cfg.pose_map.X_RP0)
    assert dev.receive(T_S, wait=True) == [] and dev.link.stats.tx_frames == 1
    dev.close(T_S)


def test_build_injects_a_device_and_the_bridge_takes_one():
    config = {"services": {"hil": {"kind": "hil.bridge", "rate_hz": 250}}, "hil": {"url": "loop://"}}
    b = build(config, "hil", 4_000_000)
    try:
        assert isinstance(b.device, RigDevice) and not b.device.realtime and b.link is b.device.link
    finally:
        b.close()
    cfg = parse({})
    dev = RigDevice(SerialLink(LockstepPort(LockstepRig(cfg))), cfg)
    assert HilBridge(cfg, "hil", 4_000_000, dev).device is dev
    with pytest.raises(ConfigError, match="lockstep"):
        HilBridge(cfg, "hil", 4_000_000, dev, realtime=True)


def test_an_emulator_is_waited_for_at_the_runs_start_in_lockstep_and_when_opened_in_realtime():
    """In lockstep the device opened on an emulator does not wait for it to serve: the bridge's ``initial`` does
    (its start-up overlapped the rest of the run's set-up), and an emulator that ended without serving fails it.
    A device closed before it waited parks nothing (no frame moved the rig). In realtime opening waits."""
    master, slave = os.openpty()
    tty.setraw(slave)
    os.set_blocking(master, False)
    proc = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    emu = SimpleNamespace(proc=proc)
    cfg = parse({})
    try:
        unused = RigDevice.open(os.ttyname(slave), cfg, emulator=emu)
        unused.close(0.0, park=True)
        with pytest.raises(BlockingIOError):
            os.read(master, 1 << 16)  # no PARK
        bridge = HilBridge(cfg, "hil", 4_000_000, RigDevice.open(os.ttyname(slave), cfg, emulator=emu))
        with pytest.raises(RigFault, match="exited with code 3 before serving"):
            bridge.initial(0)
        bridge.close()
        with pytest.raises(RigFault, match="exited with code 3 before serving"):
            RigDevice.open(os.ttyname(slave), cfg, realtime=True, emulator=emu)
    finally:
        proc.wait()
        os.close(master)
        os.close(slave)
