"""Rig protocols as backends (:mod:`hil.rigproto`): the wire bytes of every format, unchanged."""

from __future__ import annotations

import pytest

from tests.hil.vectors import WIRE_RUNS
from tests.hil.wire_capture import RUNS, capture


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
