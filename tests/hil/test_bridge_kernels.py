"""The hil bridge with its compiled kernels (the relative motion, the safety's soft limits) against the same bridge
on the readable references: the same outputs, bit for bit, over a held, predicted approach into the rig's contact
(dynamics.relative_motion_kernels, dynamics.safety_kernels; their own tests hold them to the references alone)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dynamics import relative_motion_kernels as rk
from hil.bridge import HilBridge
from hil.config import parse
from hil.emulator import LockstepPort, LockstepRig
from hil.link import SerialLink
from protocol.service import Sample

H_NS = 4_000_000
C_NS = 10_000_000  # the bodies' samples every 10 ms, predicted to each 4 ms step


class _Inputs:
    def __init__(self, states: dict[str, Sample]) -> None:
        self.s = states

    def state(self, topic: str) -> Sample:
        return self.s[topic]


def _inputs(k: int, X_OL: np.ndarray, X_TB: np.ndarray) -> _Inputs:
    t_ns = k * H_NS // C_NS * C_NS
    i = t_ns // C_NS
    o = {"p_WoOo_W": np.array([0.1, -0.2, 0.3]), "quat_WO": np.array([1.0, 0.0, 0.0, 0.0]),
         "w_WO_O": np.array([0.0, 0.001, 0.0]), "v_WOo_W": np.array([0.001, 0.0, 0.0]),
         "a_WOo_W": np.array([0.0, 1e-5, 0.0]), "wdot_WO_O": np.zeros(3)}
    c, s = math.cos(0.001 * i), math.sin(0.001 * i)
    p = {"p_WoTo_W": o["p_WoOo_W"] + X_OL[:3, 3] - X_TB[:3, 3] + np.array([0.002 * s, 0.0, 0.03 - 1e-4 * i]),
         "quat_WT": np.array([c, 0.0, 0.0, s]), "w_WT_T": np.array([0.0, 0.0, 0.002]),
         "v_WTo_W": np.array([0.002 * c, 0.0, -0.01]), "a_WTo_W": np.array([-2e-5 * s, 0.0, 0.0]),
         "wdot_WT_T": np.array([0.0, 0.0, 1e-4])}
    return _Inputs({"orbiter/state": Sample(t_ns, C_NS, "orbiter", 0, o),
                    "payload/state": Sample(t_ns, C_NS, "payload", 0, p)})


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, np.ndarray):
        return a.shape == b.shape and bool(np.array_equal(a, b, equal_nan=True))
    return a == b or (isinstance(a, float) and math.isnan(a) and math.isnan(b))


def test_the_bridge_with_its_kernels_is_the_bridge_on_the_references():
    table = {"compensation": {"predict": True, "passivity": True, "lag": 0},
             "emulator": {"delay": 0.004, "stiffness": 2.0e5, "plane_offset": 0.5, "rate": 1000.0}}
    cfg = parse(table)
    fast = HilBridge(cfg, "hil", H_NS, SerialLink(LockstepPort(LockstepRig(cfg))))
    ref = HilBridge(cfg, "hil", H_NS, SerialLink(LockstepPort(LockstepRig(cfg))))
    ref._relative_kernel = lambda *args: rk.NO_QUATERNION  # always the references
    ref.safety._follow = None
    assert fast.safety.compiled and not ref.safety.compiled
    X_OL, X_TB = cfg.X_OL, cfg.X_TB
    assert _same(fast.initial(0), ref.initial(0))
    states = set()
    for k in range(1500):
        u = _inputs(k, X_OL, X_TB)
        a, b = fast.step(k * H_NS, H_NS, u), ref.step(k * H_NS, H_NS, u)
        assert _same(a, b), k
        states.add(a["hil/status"]["state"])
    assert "ENGAGED" in states and fast.safety.limit_hits == ref.safety.limit_hits
    fast.close()
    ref.close()
