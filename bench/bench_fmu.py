"""The FMU host's per-step overhead beside the FMU's own doStep cost (prints JSON).

The example actuator leg (configs/examples/fmu/actuator_leg.py) is built with ``pythonfmu
build`` into a temporary directory and hosted by ``kind = "fmu"`` (services/fmu.py) at 1 ms, its
input ``x_cmd`` fed from a state sample every step. Per step, in this thread, the median and
99th percentile over ``--steps`` steps (the first 10 % left out) of:

- ``do_step``: ``fmi2DoStep`` alone (the FMU's own cost; for a pythonfmu FMU that is its
  Python ``do_step`` called through the wrapper);
- ``fmi_calls``: ``fmi2SetReal`` of the input + ``fmi2DoStep`` + ``fmi2GetReal`` of the three
  outputs, called directly through ctypes (the least any host does);
- ``host_step``: :meth:`services.fmu.FmuModel.step` (the input read from the step's sample,
  the FMI calls, the output body built);
- ``overhead``: ``host_step - do_step`` (what hosting adds to the FMU's step: the target is
  <= 20 us) and ``host_step - fmi_calls`` (what the host's Python adds to the bare calls).

Run from the repository root::

    python bench/bench_fmu.py [--steps 20000]

Not a test: it prints figures. Timings are this thread's CPU time (``thread_time_ns``, as
realtime admission times steps), the three kinds taken in turn every step so that they share the
machine's load.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import MappingProxyType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from protocol.service import Sample  # noqa: E402
from services.fmu import FmuModel, spec_of  # noqa: E402
from testkit import toys  # noqa: E402,F401 - registers toy/state1, the input's topic

H_NS = 1_000_000


class _Inputs:
    """One state sample of ``toy/state1`` whose ``x`` moves every step (the sample is made once: what the
    runtime's input rule costs is not the host's)."""

    def __init__(self) -> None:
        self.body = {"x": 1.0, "v": 0.0}
        self.sample = Sample(0, H_NS, "b", 0, MappingProxyType(self.body))

    def state(self, topic: str) -> Sample:
        self.body["x"] += 1e-6
        return self.sample


def _stats(ns: list[int]) -> dict[str, float]:
    s = sorted(ns[len(ns) // 10:])
    return {"p50_us": s[len(s) // 2] / 1e3, "p99_us": s[int(0.99 * (len(s) - 1))] / 1e3}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=20000)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-fmu-") as tmp:
        subprocess.run([sys.executable, "-m", "pythonfmu", "build", "-f",
                        str(ROOT / "configs" / "examples" / "fmu" / "actuator_leg.py"), "-d", tmp],
                       check=True, capture_output=True, cwd=tmp)
        config: dict[str, Any] = {"sim": {}, "services": {"leg": {
            "kind": "fmu", "rate_hz": 1000, "fmu": str(Path(tmp) / "ActuatorLeg.fmu"),
            "inputs": {"x_cmd": "toy/state1:x"}, "outputs": {"topic": "bench/leg"}, "start": {"x0": 1.0}}}}
        figures: dict[str, Any] = {}
        # three instances stepped in turn, so that the three figures share the machine's load: the FMU's
        # doStep alone and the bare FMI calls, through the ctypes handles the host uses, and the host's step
        bare_m, calls_m, host_m = (FmuModel(spec_of(config, "leg"), "leg", H_NS) for _ in range(3))
        for m in (bare_m, calls_m, host_m):
            m.initial(0)
        a_, b_ = bare_m.instance, calls_m.instance
        vr_in, vr_out = (ctypes.c_uint * 1)(4), (ctypes.c_uint * 3)(5, 6, 7)
        x_in, y_out = (ctypes.c_double * 1)(1.0), (ctypes.c_double * 3)()
        do_a, do_b, set_real, get_real = a_.fmu.fmi2DoStep, b_.fmu.fmi2DoStep, b_.fmu.fmi2SetReal, b_.fmu.fmi2GetReal
        ca, cb = a_.component, b_.component
        step, u = host_m.step, _Inputs()
        bare, calls, host = [], [], []
        clock = time.thread_time_ns  # CPU time of this thread: what a step demands, not what other load took
        for k in range(a.steps):
            t0 = clock()
            do_a(ca, k * 1e-3, 1e-3, 1)
            t1 = clock()
            x_in[0] = 1.0 + 1e-6 * k
            t2 = clock()
            set_real(cb, vr_in, 1, x_in)
            do_b(cb, k * 1e-3, 1e-3, 1)
            get_real(cb, vr_out, 3, y_out)
            t3 = clock()
            step(k * H_NS, H_NS, u)  # type: ignore[arg-type]
            t4 = clock()
            bare.append(t1 - t0)
            calls.append(t3 - t2)
            host.append(t4 - t3)
        for m in (bare_m, calls_m, host_m):
            m.close()
    figures["do_step"] = _stats(bare)
    figures["fmi_calls"] = _stats(calls)
    figures["host_step"] = _stats(host)
    figures["overhead_vs_do_step_us"] = round(figures["host_step"]["p50_us"] - figures["do_step"]["p50_us"], 2)
    figures["overhead_vs_fmi_calls_us"] = round(figures["host_step"]["p50_us"] - figures["fmi_calls"]["p50_us"], 2)
    figures["target_overhead_us"] = 20.0
    figures["steps"] = a.steps
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
