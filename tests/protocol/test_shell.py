"""The shell's per-message path without sockets: ingest (decode, sequence gaps, invalid) and publish."""

import math

import msgpack
import numpy as np

from protocol.codec import encode, envelope
from protocol.shell import ServiceShell
from testkit.toys import ChainMass

H = 1_000_000
CFG = {"toy": {"mass": [1.0, 2.0, 1.0], "k": [40.0, 40.0], "rest": [1.0, 1.0], "x0": [0.0, 1.1, 2.0],
               "v0": [0.0, 0.0, 0.0], "events": True},
       "services": {"m1": {"index": 1}}}
PRODUCERS = {"toy/state2": H, "toy/spring0": H, "toy/event0": H, "toy/state1": H, "toy/spring1": H, "toy/event1": H}


class _Pub:
    def __init__(self) -> None:
        self.sent: list[bytes] = []

    def send(self, frame: bytes, *args: object, **kw: object) -> None:
        self.sent.append(frame)


class _Bus:
    def __init__(self) -> None:
        self.pub = _Pub()
        self.send_frame = self.pub.send


def _shell() -> ServiceShell:
    """A shell over toy mass 1 as after the start message (every topic at the toy's 1 ms period)."""
    sh = ServiceShell(ChainMass(CFG, "m1", H), "ipc:///nowhere", {"m1": "ipc:///nowhere.m1.pub"})
    sh.bus = _Bus()  # type: ignore[assignment]
    sh.start = {"t0_ns": 0, "producers": PRODUCERS, "services": {}}
    sh._pending["m1"].append({"op": "start", **sh.start})
    sh._wait_start()
    return sh


def _state(seq: int, x: float = 2.0, sender: str = "m2") -> bytes:
    return b"toy/state2\0" + encode("toy/state2", {"x": x, "v": 0.0}, sender=sender, seq=seq, t_ns=seq * H, h_ns=H)


def test_ingest_stores_in_sequence_samples_and_counts_gaps(capsys):
    sh = _shell()
    for seq in (0, 1, 4, 5, 5, 3):  # a gap of 2 before 4; a repeated or older seq is no gap
        sh._ingest(_state(seq))
    sh._ingest(_state(0, sender="other"))  # a second sender has its own sequence
    m = sh.member
    assert m.received == 7 and m.invalid == 0 and m.dropped == 2
    assert m.buf.count("toy/state2") == 5  # t = 0, 1, 3, 4, 5 ms; repeated instants replace
    assert "sequence gap on 'toy/state2' from 'm2' before seq 4" in capsys.readouterr().err
    assert sh._gaps.last[("m2", "toy/state2")] == 3
    sh._ingest(_state(5))
    assert m.dropped == 3


def test_ingest_counts_and_drops_invalid_frames():
    sh = _shell()
    nan = msgpack.packb([1, "m2", 0, 0, H, 0, {"x": math.nan, "v": 0.0}])
    for frame in (b"toy/state2\0" + nan,                          # not finite
                  b"toy/state2\0" + b"\xc1garbage",                 # not msgpack
                  _state(0)[:-3],                                   # truncated
                  b"toy/state2" + _state(0)[11:],                   # no separator
                  b"toy/state3\0" + _state(0)[11:],                 # not an input
                  b"\0" + _state(0)[11:]):                          # empty topic
        sh._ingest(frame)
    m = sh.member
    assert m.received == 0 and m.invalid == 6 and m.buf.count("toy/state2") == 0 and m.dropped == 0
    sh._ingest(_state(0))
    m.buf.set_producers({"toy/state2": H})
    s = m.buf.select(0, H).state("toy/state2")
    assert (s.t_ns, s.h_ns, s.sender, s.seq, dict(s.body)) == (0, H, "m2", 0, {"x": 2.0, "v": 0.0})


def test_publish_sends_events_first_with_per_topic_sequences():
    sh = _shell()
    outs = {"toy/state1": {"x": 1.0, "v": 0.5}, "toy/spring1": {"F": -2.0, "x": np.array([1.0])},
            "toy/event1": {"events": [{"kind": "stretched", "n": 1}]}}
    sh.sched.publish(sh.member, outs, 0, 7, initial=True)
    sh.sched.publish(sh.member, {k: v for k, v in outs.items() if k != "toy/event1"}, H, 7)  # event left out: empty
    sh._flush()
    frames = sh.bus.pub.sent
    topics = [f[:f.index(b"\0")].decode() for f in frames]
    assert topics == ["toy/event1", "toy/state1", "toy/spring1"] * 2
    for k, (topic, frame) in enumerate(zip(topics, frames, strict=True)):
        payload = frame[len(topic) + 1:]
        t, seq = (0, 0) if k < 3 else (H, 1)
        fields = outs[topic] if topic != "toy/event1" or k < 3 else {"events": []}
        assert payload == encode(topic, fields, sender="m1", seq=seq, t_ns=t, h_ns=H,
                                 wall_ns=envelope(topic, payload)[5])


class _FramesBus:
    def __init__(self, frames: list[bytes]) -> None:
        self.frames = frames

    def recv_frames(self) -> list[bytes]:
        out, self.frames = self.frames, []
        return out


class _BulkSink:
    name, topics = "log", ()

    def __init__(self) -> None:
        self.calls: list[list[bytes]] = []

    def on_message(self, topic: str, payload: bytes) -> None:
        raise AssertionError("a sink with on_frames gets no on_message")

    def on_frames(self, frames: list[bytes]) -> None:
        self.calls.append(frames)


def test_a_running_sink_with_on_frames_gets_each_drain_in_one_call():
    probe = b"sim/control\0" + encode("sim/control", {"cmd": "probe", "info": {}}, sender="x", seq=0, t_ns=0, h_ns=1)
    drain = [_state(0), probe, b"garbage", _state(1)]
    for topics in ((), ("toy/state2", "sim/control"), ("toy/state2",)):
        sink = _BulkSink()
        sink.topics = topics
        sh = ServiceShell(sink, "ipc:///nowhere", {"log": "ipc:///nowhere.log.pub"})
        sh._probed = True
        sh.bus = _FramesBus(list(drain))  # type: ignore[assignment]
        sh._drain_sinks()
        sh._drain_sinks()  # nothing queued: no call
        if not topics:  # every topic, control too
            want = drain
        elif "sim/control" in topics:
            want = [f for f in drain if f != b"garbage"]
        else:
            want = [drain[0], drain[3]]
        assert sink.calls == [want], topics
        assert sh.member.received == len(want) and sh.member.invalid == 0
