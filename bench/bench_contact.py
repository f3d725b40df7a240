"""CPU fraction of one core for the contact service at 1 kHz and the orbiter at 100 Hz, as JSON.

The models' ``step`` is timed without processes (CPU time, ``time.process_time``, best of
the repeats), with inputs built as the runtime selects them, and once more with the
encoding of every output (what the service shell adds per step before sending).

- contact, 1 kHz, contact active: the payload's three trunnions pressed into three
  latch plates (compliant Hunt–Crossley + Coulomb) by the arm's wrench, at equilibrium;
- contact, 1 kHz, berthed: the same with the latch spring–damper closed;
- contact, 1 kHz, free: no contact, the payload far away (integration and bookkeeping only);
- orbiter, 100 Hz: ten contact samples and five arm samples per step (exact impulse).

CPU fraction = CPU seconds per step × rate. Run from the repository root:
``python bench/bench_contact.py [--steps N] [--repeat R]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from protocol.codec import encode
from protocol.service import Sample
from protocol.stepping import StepInputs
from services import contact as sc
from services import orbiter as so

H_C, H_O = 1_000_000, 10_000_000


def config(z_payload: float, berthed: bool = False) -> dict[str, Any]:
    """Orbiter at the origin; payload's interface B (1 m below its CoM) near the latch plane z = 2 m."""
    pts = [[1.5, 0.0, 0.0], [-1.5, 0.0, 0.0], [0.0, 1.5, 0.0]]
    return {
        "orbiter": {"mass": 1.0e5, "inertia": [1.2e6, 8.0e6, 8.5e6], "X_OL": [0.0, 0.0, 2.0, 0.0, 0.0, 0.0]},
        "payload": {"mass": 12000.0, "inertia": [2.0e4, 3.0e4, 3.5e4], "X_WT": [0.0, 0.0, z_payload, 0.0, 0.0, 0.0],
                    "X_TB": [0.0, 0.0, -1.0, 0.0, 0.0, 0.0], "points_B": pts},
        "contact": {"latch": {"position": 0.02 if berthed else 1e-9},
                    "surfaces": [{"point": i, "p_LoSo_L": p, "n_L": [0.0, 0.0, 1.0], "radius": 0.2, "depth": 0.1}
                                 for i, p in enumerate(pts)]},
    }


def orbiter_sample() -> Sample:
    z = np.zeros(3)
    return Sample(0, H_O, "orbiter", 0, {"p_WoOo_W": z, "quat_WO": np.array([1.0, 0.0, 0.0, 0.0]), "w_WO_O": z,
                                         "v_WOo_W": z, "a_WOo_W": z, "wdot_WO_O": z})


def arm_sample(t: int, h: int) -> Sample:
    """The arm pressing the payload down with 1800 N: the plates' static load at 3 mm (3 × 2e5 N/m)."""
    F = np.array([1.0, -2.0, 3.0, 10.0, -20.0, -1800.0])
    return Sample(t, h, "arm", 0, {"F_Eo_W": F, "p_WoEo_W": np.array([0.0, 0.0, 4.0]), "F_So_W": -F,
                                   "p_WoSo_W": np.array([0.0, 0.0, 4.0]), "grappled": True})


def time_steps(model: Any, make_inputs, h: int, steps: int, repeat: int, with_codec: bool) -> float:
    """Best CPU seconds per step over ``repeat`` runs of ``steps`` steps."""
    best = float("inf")
    model.initial(0)
    t = 0
    for _ in range(repeat):
        c0 = time.process_time()
        for _ in range(steps):
            out = model.step(t, h, make_inputs(t))
            if with_codec:
                for topic, body in out.items():
                    encode(topic, body, sender=model.name, seq=0, t_ns=t + h, h_ns=h, wall_ns=0)
            t += h
        best = min(best, (time.process_time() - c0) / steps)
    return best


def contact_case(name: str, cfg: dict[str, Any], steps: int, repeat: int) -> dict[str, Any]:
    orb = orbiter_sample()

    def make_inputs(t: int) -> StepInputs:
        t_a = t - t % 2_000_000
        return StepInputs(t, H_C, {"orbiter/state": orb}, {"arm/wrench": [(arm_sample(t_a, 2_000_000), H_C)]}, {})

    row: dict[str, Any] = {"case": name, "rate_hz": 1000}
    for codec in (False, True):
        m = sc.build(cfg, "contact", H_C)
        cpu = time_steps(m, make_inputs, H_C, steps, repeat, codec)
        key = "with_encode" if codec else "model"
        row[f"cpu_us_per_step_{key}"] = round(cpu * 1e6, 1)
        row[f"cpu_fraction_{key}"] = round(cpu * 1000.0, 4)
        if not codec:
            row["contact_active"] = bool(m.in_contact)
            row["berthed"] = bool(m.berthed)
    return row


def orbiter_case(steps: int, repeat: int) -> dict[str, Any]:
    cfg = {"orbiter": {"mass": 1.0e5, "inertia": [1.2e6, 8.0e6, 8.5e6], "attitude": "hold"}}
    F = np.array([1.0, -2.0, 3.0, 10.0, -20.0, 30.0])

    def make_inputs(t: int) -> StepInputs:
        cs = [(Sample(t + k * H_C, H_C, "contact", 0, {"F_Lo_W": F, "p_WoLo_W": np.array([0.0, 0.0, 2.0]),
                                                        "active": True}), H_C) for k in range(10)]
        arm = [(arm_sample(t + k * 2_000_000, 2_000_000), 2_000_000) for k in range(5)]
        return StepInputs(t, H_O, {}, {"contact/wrench": cs, "arm/wrench": arm}, {})

    row: dict[str, Any] = {"case": "orbiter, attitude hold, 10 contact + 5 arm samples per step", "rate_hz": 100}
    for codec in (False, True):
        cpu = time_steps(so.build(cfg, "orbiter", H_O), make_inputs, H_O, steps, repeat, codec)
        key = "with_encode" if codec else "model"
        row[f"cpu_us_per_step_{key}"] = round(cpu * 1e6, 1)
        row[f"cpu_fraction_{key}"] = round(cpu * 100.0, 5)
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=500, help="steps per repeat")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args(argv)
    rows = [
        contact_case("contact, 3 trunnions pressed into the plates", config(2.997), a.steps, a.repeat),
        contact_case("contact, latched (berthed)", config(2.997, berthed=True), a.steps, a.repeat),
        contact_case("contact, free (no contact)", config(1000.0), a.steps, a.repeat),
        orbiter_case(max(a.steps // 5, 20), a.repeat),
    ]
    print(json.dumps({"python": platform.python_version(), "numpy": np.__version__, "cpus": os.cpu_count(),
                      "load_average_1min": round(os.getloadavg()[0], 2), "results": rows}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
