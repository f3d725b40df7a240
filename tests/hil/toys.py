"""A toy docking pair for the hil service's end-to-end test: a fixed orbiter and a 1-DOF payload.

Service module (``kind = "tests.hil.toys"``): one model publishing ``orbiter/state`` and
``payload/state``; the payload moves along z under the wrench the hil bridge feeds back
(``hil/feedback``). At close it writes its trajectory to ``[hiltoy] out_dir``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from protocol.service import Inputs, Port

TABLES = ("hiltoy",)
OPTIONS: dict[str, Any] = {}
_KEYS = {"mass": float, "z0": float, "v0": float, "out_dir": str}


def validate(config: dict[str, Any], name: str) -> list[str]:
    """Problems of ``[hiltoy]``."""
    t = config.get("hiltoy", {})
    out = [f"hiltoy.{k}: unknown key" for k in t if k not in _KEYS]
    out += [f"hiltoy.{k}: expected {v.__name__}" for k, v in _KEYS.items() if not isinstance(t.get(k), v)]
    return out


class Pair:
    """Orbiter at rest at the origin; payload interface moving along z with mass ``mass``."""

    def __init__(self, config: dict[str, Any], name: str, period_ns: int) -> None:
        t = config["hiltoy"]
        self.name, self.period_ns = name, period_ns
        self.m, self.z, self.v = t["mass"], t["z0"], t["v0"]
        self.out = Path(t["out_dir"])
        self.inputs = (Port("hil/feedback", "state"),)
        self.outputs = (Port("orbiter/state", "state"), Port("payload/state", "state"))
        self.log: list[list[float]] = []

    def _bodies(self) -> dict[str, dict[str, Any]]:
        one = np.array([1.0, 0.0, 0.0, 0.0])
        return {
            "orbiter/state": {"p_WoOo_W": np.zeros(3), "quat_WO": one, "w_WO_O": np.zeros(3), "v_WOo_W": np.zeros(3),
                              "a_WOo_W": np.zeros(3), "wdot_WO_O": np.zeros(3)},
            "payload/state": {"p_WoTo_W": np.array([0.0, 0.0, self.z]), "quat_WT": one, "w_WT_T": np.zeros(3),
                              "v_WTo_W": np.array([0.0, 0.0, self.v]), "a_WTo_W": np.zeros(3),
                              "wdot_WT_T": np.zeros(3), "grappled": False, "berthed": False},
        }

    def initial(self, t0_ns: int) -> dict[str, dict[str, Any]]:
        return self._bodies()

    def step(self, t_ns: int, h_ns: int, u: Inputs) -> dict[str, dict[str, Any]]:
        fb = u.state("hil/feedback").body
        f = float(fb["F_Bo_B"][5])
        h = h_ns * 1e-9
        self.v += f / self.m * h
        self.z += self.v * h
        self.log.append([t_ns * 1e-9, self.z, self.v, f, float(fb["valid"]), float(fb["delay_s"])])
        return self._bodies()

    def close(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        (self.out / f"{self.name}.json").write_text(json.dumps(self.log))


def build(config: dict[str, Any], name: str, period_ns: int) -> Pair:
    """The toy pair of service ``name``."""
    return Pair(config, name, period_ns)
