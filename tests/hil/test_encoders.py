"""Binary 6-axis and ASCII axis encoders against the PROTOCOL.md vectors."""

from __future__ import annotations

import numpy as np
import pytest

from errors import ConfigError, FrameError
from hil.encoders import make_encoder
from tests.hil.vectors import protocol_vectors

AXIS = [v for v in protocol_vectors() if "format" in v]


def test_doc_has_both_formats():
    assert {v["format"] for v in AXIS} == {"binary6", "ascii"}


@pytest.mark.parametrize("vec", AXIS, ids=[v["name"] for v in AXIS])
def test_axis_vectors_byte_exact(vec):
    enc = make_encoder(vec["format"], vec["lo"], vec["hi"], bits=vec.get("bits", 10))
    values = enc.axes.from_counts(vec["counts"])
    wire = bytes.fromhex(vec["wire"])
    assert enc.encode(values) == wire
    assert enc.axes.to_counts(enc.decode(wire)).tolist() == vec["counts"]
    assert len(wire) <= enc.frame_size


def test_binary_checksum_and_start_checked():
    enc = make_encoder("binary6", [0.0] * 6, [1.0] * 6)
    good = enc.encode(np.linspace(0.1, 0.9, 6))
    for i in range(len(good)):
        bad = bytearray(good)
        bad[i] ^= 0x01
        with pytest.raises(FrameError):
            enc.decode(bytes(bad))


def test_ascii_rejects_malformed_lines():
    enc = make_encoder("ascii", [0.0] * 6, [1.0] * 6)
    for line in (b"A1B2C3D4E5\n", b"A1B2C3D4E5F9999\n", b"A1B2C3D4E5F6", b"A1B2C3D4E5Fx\n"):
        with pytest.raises(FrameError):
            enc.decode(line)


def test_values_outside_range_clip_and_round_trip_within_resolution():
    enc = make_encoder("binary6", [0.4] * 6, [0.6] * 6)
    v = np.array([0.3, 0.4, 0.5, 0.55, 0.6, 0.7])
    back = enc.decode(enc.encode(v))
    np.testing.assert_allclose(back, np.clip(v, 0.4, 0.6), atol=0.2 / 65535)


def test_bad_encoder_config_named():
    with pytest.raises(ConfigError, match="serial9"):
        make_encoder("serial9", [0.0], [1.0])
    with pytest.raises(ConfigError, match="hi must exceed lo"):
        make_encoder("ascii", [0.0, 1.0], [1.0, 1.0])
