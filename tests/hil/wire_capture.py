"""A fixed command sequence through :class:`hil.bridge.HilBridge`, and every byte it writes.

The wire bytes of each rig format for this sequence are stored in :mod:`tests.hil.vectors`
(``WIRE_RUNS``): they were captured from the bridge before its formats became protocol
backends (:mod:`hil.rigproto`), so the test that compares them pins the bytes of every format.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from dynamics.stewart import pose_from_vector
from hil.bridge import HilBridge
from hil.config import parse
from hil.emulator import LockstepPort, LockstepRig
from hil.link import SerialLink
from protocol.service import Sample

#: The configurations of the captured runs: every format (and both native setpoints).
RUNS: dict[str, dict[str, Any]] = {
    "native_legs": {},
    "native_pose": {"setpoint": "pose"},
    "native_pipeline": {"pipeline": True},
    "binary6": {"format": "binary6"},
    "ascii": {"format": "ascii"},
    "ascii12": {"format": "ascii", "ascii_bits": 12},
}

H_NS = 4_000_000
STEPS = 24


class Recorder:
    """A port that records what is written and passes it on (to a lockstep rig, or nowhere)."""

    def __init__(self, inner: Any = None) -> None:
        self.inner = inner
        self.timeout: float | None = 0.0
        self.written = bytearray()

    def write(self, data: bytes) -> int:
        self.written += data
        if self.inner is not None:
            self.inner.write(data)
        return len(data)

    @property
    def in_waiting(self) -> int:
        return self.inner.in_waiting if self.inner is not None else 0

    def read(self, size: int = 1) -> bytes:
        return self.inner.read(size) if self.inner is not None else b""

    def close(self) -> None:
        pass


class _Inputs:
    def __init__(self, states: dict[str, Sample]) -> None:
        self.s = states

    def state(self, topic: str) -> Sample:
        return self.s[topic]


def _bodies(t: float) -> tuple[dict[str, Any], dict[str, Any]]:
    """The orbiter at rest; the payload drifting and turning a little (an in-stroke relative motion)."""
    one = np.array([1.0, 0.0, 0.0, 0.0])
    X = pose_from_vector([0.002 * np.sin(3 * t), -0.001 * t, 0.003 * t, 0.01 * t, -0.02 * np.sin(2 * t), 0.005])
    from dynamics.spatial import rotation_to_quat

    orb = {"p_WoOo_W": np.zeros(3), "quat_WO": one, "w_WO_O": np.zeros(3), "v_WOo_W": np.zeros(3),
           "a_WOo_W": np.zeros(3), "wdot_WO_O": np.zeros(3)}
    pay = {"p_WoTo_W": X[:3, 3].copy(), "quat_WT": rotation_to_quat(X[:3, :3]), "w_WT_T": np.zeros(3),
           "v_WTo_W": np.zeros(3), "a_WTo_W": np.zeros(3), "wdot_WT_T": np.zeros(3)}
    return orb, pay


def capture(name: str) -> bytes:
    """Every byte the bridge writes for run ``name`` of :data:`RUNS`: ``STEPS`` lockstep steps (a native
    rig is the lockstep emulator), two frozen calls, one frozen past ``freeze_park_after``, then close."""
    cfg = parse(RUNS[name])
    native = cfg.table["format"] == "native"
    port = Recorder(LockstepPort(LockstepRig(cfg)) if native else None)
    b = HilBridge(cfg, "hil", H_NS, SerialLink(port))
    b.initial(0)
    for n in range(STEPS):
        t_ns = n * H_NS
        orb, pay = _bodies(t_ns * 1e-9)
        b.step(t_ns, H_NS, _Inputs({"orbiter/state": Sample(t_ns, H_NS, "orbiter", n, orb),
                                    "payload/state": Sample(t_ns, H_NS, "payload", n, pay)}))
    b.hold(0.02)
    b.hold(0.04)
    b.hold(b.freeze_park_after + 0.1)
    b.close()
    return bytes(port.written)


def digest(data: bytes) -> str:
    """SHA-256 of the bytes (hex)."""
    return hashlib.sha256(data).hexdigest()
