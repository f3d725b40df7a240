"""Native frames: CRC, the PROTOCOL.md vectors, and detection of every corruption."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from cobs import cobs

from errors import FrameError
from hil import framing as fr
from tests.hil.vectors import protocol_vectors

NATIVE = [v for v in protocol_vectors() if "msg" in v]


def _msg(vec: dict) -> fr.Message:
    cls = getattr(fr, vec["msg"])
    f = dict(vec["fields"])
    for k, v in f.items():
        if isinstance(v, list):
            f[k] = tuple(v)
    if cls is fr.Telemetry:
        f["state"] = fr.RigState(f["state"])
        f["faults"] = fr.Fault(f["faults"])
    return cls(**f)


def test_crc_check_value():
    assert fr.crc16(b"123456789") == 0x29B1


def test_crc_independent_bitwise_reference():
    def ref(data: bytes) -> int:  # textbook MSB-first CRC-16, poly 0x1021, init 0xFFFF
        crc = 0xFFFF
        for b in data:
            crc ^= b << 8
            for _ in range(8):
                crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
                crc &= 0xFFFF
        return crc

    rng = random.Random(1)
    for n in (0, 1, 7, 64):
        data = bytes(rng.randrange(256) for _ in range(n))
        assert fr.crc16(data) == ref(data)


def test_doc_has_every_message_type():
    assert {v["msg"] for v in NATIVE} == {c.__name__ for c in fr._BY_TYPE.values()}


@pytest.mark.parametrize("vec", NATIVE, ids=[v["name"] for v in NATIVE])
def test_vectors_encode_and_decode_byte_exact(vec):
    wire = bytes.fromhex(vec["wire"])
    assert fr.encode_frame(_msg(vec), vec["seq"], vec["time_us"]) == wire
    (frame,) = fr.FrameDecoder().feed(wire)
    assert frame.seq == vec["seq"] and frame.time_us == vec["time_us"]
    assert frame.msg == _msg(vec)


def test_heartbeat_vector_by_hand():
    raw = bytes([1, 0x01, 1, 0]) + (1000).to_bytes(4, "little")
    crc = fr.crc16(raw)
    assert fr.crc16(raw + crc.to_bytes(2, "big")) == 0
    # hand COBS of 01 01 01 00 e8 03 00 00 cc cc: groups of non-zero bytes
    expect = bytes([4, 1, 1, 1, 3, 0xE8, 3, 1, 3]) + crc.to_bytes(2, "big") + b"\x00"
    assert fr.encode_frame(fr.Heartbeat(), 1, 1000) == expect


def test_decoder_keeps_partial_bytes_and_resyncs():
    frames = [fr.encode_frame(fr.SetpointAxes((0.1 * i,) * 6), i, 100 * i) for i in range(5)]
    stream = b"\x13\x37garbage" + b"\x00" + b"".join(frames)
    dec = fr.FrameDecoder()
    out = []
    for i in range(0, len(stream), 3):
        out += dec.feed(stream[i : i + 3])
    assert [f.seq for f in out] == list(range(5))
    assert dec.bad == 1


def _stream_with(corrupt: bytes) -> tuple[bytes, bytes, bytes]:
    a = fr.encode_frame(fr.Heartbeat(), 10, 1)
    c = fr.encode_frame(fr.Heartbeat(), 12, 3)
    return a, corrupt, c


def test_every_single_bit_error_is_detected():
    good = fr.encode_frame(fr.SetpointPose((0.01, -0.02, 0.5), (0.9998, 0.01, 0.0, 0.0)), 11, 2)
    n_checked = 0
    for i in range(len(good)):
        for bit in range(8):
            bad = bytearray(good)
            bad[i] ^= 1 << bit
            a, b, c = _stream_with(bytes(bad))
            dec = fr.FrameDecoder()
            out = dec.feed(a + b + c)
            assert all(f.seq in (10, 12) for f in out), (i, bit)
            assert not any(isinstance(f.msg, fr.SetpointPose) for f in out)
            assert dec.bad >= 1, (i, bit)
            n_checked += 1
    assert n_checked == 8 * len(good)


def test_truncated_frames_are_detected():
    good = fr.encode_frame(fr.SetpointAxes((0.5,) * 6), 11, 2)
    for cut in range(1, len(good) - 1):
        dec = fr.FrameDecoder()
        a, b, c = _stream_with(good[:cut] + b"\x00")
        out = dec.feed(a + b + c)
        assert [f.seq for f in out] == [10, 12], cut
        assert dec.bad == 1, cut


def test_garbage_bursts_never_decode():
    rng = random.Random(7)
    dec = fr.FrameDecoder()
    n_good = 0
    for k in range(300):
        burst = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 200)))
        out = dec.feed(burst + b"\x00" + fr.encode_frame(fr.Heartbeat(), k, k))
        assert all(isinstance(f.msg, fr.Heartbeat) and f.seq == k for f in out)
        n_good += len(out)
    assert n_good == 300  # each good frame right after a delimiter survives
    assert dec.bad >= 290


def test_version_type_and_length_rejected_with_named_kind():
    dec = fr.FrameDecoder()
    dec.feed(fr.encode_frame(fr.Heartbeat(), 1, 1, version=2))
    raw = bytes([1, 0x42, 0, 0, 0, 0, 0, 0])
    dec.feed(cobs.encode(raw + fr.crc16(raw).to_bytes(2, "big")) + b"\x00")
    raw = bytes([1, 0x10, 0, 0, 0, 0, 0, 0, 1, 2, 3])
    dec.feed(cobs.encode(raw + fr.crc16(raw).to_bytes(2, "big")) + b"\x00")
    assert dec.counts == {"version": 1, "type": 1, "payload": 1}
    assert "0x42" in str(dec.errors[1])
    with pytest.raises(FrameError, match="version"):
        fr.decode_frame(fr.encode_frame(fr.Heartbeat(), 1, 1, version=9)[:-1])


def test_nan_setpoint_refused_at_both_ends():
    with pytest.raises(FrameError, match="not finite"):
        fr.encode_frame(fr.SetpointAxes((float("nan"),) * 6))
    import struct

    raw = bytes([1, 0x11, 0, 0, 0, 0, 0, 0]) + struct.pack("<B6f", 6, *([float("inf")] * 6))
    dec = fr.FrameDecoder()
    assert dec.feed(cobs.encode(raw + fr.crc16(raw).to_bytes(2, "big")) + b"\x00") == []
    assert dec.counts == {"payload": 1}


def test_seq_tracker_detects_drops_reorders_and_wraps():
    t = fr.SeqTracker()
    got = [t.check(s) for s in (65533, 65534, 0, 1, 3, 2, 3, 4)]
    assert got == ["ok", "ok", "gap", "ok", "gap", "stale", "dup", "ok"]
    assert t.lost == 2 and t.gaps == 2 and t.stale == 1 and t.duplicates == 1


def test_wire_size():
    assert fr.wire_size(38) == 40
    assert fr.wire_size(254) == 256
    assert fr.wire_size(255) == 258
    assert len(fr.encode_frame(fr.SetpointPose((0.0, 0.0, 0.5), (1.0, 0.0, 0.0, 0.0)))) <= fr.wire_size(38)



def test_telemetry_state_and_fault_bits_decode_by_value():
    tel = fr.Telemetry(7, 7000, 250, fr.RigState.FAULT, fr.Fault.WATCHDOG | fr.Fault.LIMIT, (0.5,) * 6,
                       (0.0,) * 5 + (-10.0,))
    for bits in (int(tel.faults), 1 << 12, 0):  # also bits no name stands for, and none
        got = fr.decode_frame(fr.encode_frame(replace(tel, faults=fr.Fault(bits)), 1, 2)[:-1]).msg
        assert got == replace(tel, faults=fr.Fault(bits)) and isinstance(got.faults, fr.Fault)
    payload = bytearray(cobs.decode(fr.encode_frame(tel, 1, 2)[:-1]))[fr.HEADER_SIZE:-fr.CRC_SIZE]
    payload[10] = 9  # the state byte: no such state
    with pytest.raises(FrameError, match="state: unknown value 9"):
        fr.Telemetry.unpack(bytes(payload))
