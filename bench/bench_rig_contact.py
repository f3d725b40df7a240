"""Fidelity of the berthing contact on the rig against the same contact in simulation (prints a table and JSON).

Runs the default mission twice over: all-model (``configs/srms_berthing.toml``, ``[contact] source =
"model"``) and with its berthing contact on the emulated rig (``configs/srms_berthing_rig_contact.toml``:
the guides' mock-ups with [contact]'s law, a 10 Hz servo, a noisy biased F/T sensor, a 60 kg mock-up)
at one-way transport delays of 0, 5, 10 and 20 ms with compensation, and at 20 ms without it. For
each rig run, against the model run:

- latch time (``latch``: the latches closed after their stroke), target within 0.1 s;
- peak interface force (``contact/wrench`` on the orbiter from the first contact on), within 10 %;
- the first trunnion impact's restitution, ``e = (V_post·n) / −(V_pre·n)`` of the first
  ``rebound`` after the rigidize (n: its impulse's direction), within 0.05;
- the loop's energy over the berthing phase: the bridge's passivity observer (``energy_net``:
  net energy the rig port put into the payload; ``energy_dissipated``: what the passivity
  controller removed), against the first impact's normal kinetic energy ``½ m_T (V_pre·n)²``;
  energy created = max(0, energy_net), target below 5 %.

The uncompensated case is refused by ``launch.py check`` (its loop delay exceeds the critical
delay, :func:`hil.bridge.loop_stability`) and by the bridge once it has measured the round trip:
this bench lifts both for that one run, its services threads of one process (``--inprocess``),
to show what they prevent.

Run from the repository root (each run is 45 s of lockstep simulation, a few minutes)::

    python bench/bench_rig_contact.py [--delays 0,5,10,20] [--out DIR] [--jobs 2] [--reuse]
    python bench/bench_rig_contact.py --step-cost      # the bridge's step with the compensation on

``--reuse`` runs only the cases without a finished run in ``--out`` (the model run of an earlier call, say)
and tabulates them all.

``--step-cost`` times the bridge's step (CPU time, least of 5 blocks of 500 steps) on the rig-contact
scenario's ``[hil]`` over the in-process lockstep emulator (whose share, the emulated rig with its
sensor and mock-ups, is timed apart and taken out), the payload pressed into a guide: the
compensation (load, tare, filter, deadband, prediction, passivity) on, and with the plain
configuration of the default scenario.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from tempfile import mkdtemp
from typing import Any

import numpy as np
import tomli_w

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from protocol.logfile import open_log, read_topics  # noqa: E402

MODEL = ROOT / "configs" / "srms_berthing.toml"
RIG = ROOT / "configs" / "srms_berthing_rig_contact.toml"


def _load(path: Path) -> dict[str, Any]:
    with path.open("rb") as f:
        return tomllib.load(f)


IMPACT_MIN = 1.0
"""Linear impulse an episode must exchange to be a trunnion impact [N·s] (a touch of the sensor's residual
noise or compensation error above the deadband exchanges ~0.05 N·s; the first impact ~90 N·s)."""


def first_impact(events: list[tuple[float, dict[str, Any]]]) -> dict[str, float]:
    """The first trunnion impact after the rigidize: its restitution and normal approach speed."""
    rigid = next((t for t, e in events if e["kind"] == "rigidize"), None)
    for t, e in events:
        if rigid is not None and t > rigid and e["kind"] == "rebound" \
                and np.linalg.norm(np.asarray(e["impulse_Wo_W"], dtype=np.float64)[3:]) > IMPACT_MIN:
            P = np.asarray(e["impulse_Wo_W"], dtype=np.float64)[3:]
            n = P / np.linalg.norm(P)
            v_pre = float(np.asarray(e["V_rel_pre_W"])[3:] @ n)
            v_post = float(np.asarray(e["V_rel_post_W"])[3:] @ n)
            return {"t": t, "restitution": v_post / -v_pre if v_pre < 0 else float("nan"), "v_n": -v_pre}
    return {"t": float("nan"), "restitution": float("nan"), "v_n": float("nan")}


def figures(log: Path, config: dict[str, Any]) -> dict[str, Any]:
    """The run's fidelity figures from its log and ``summary.json``."""
    path = log.with_name(log.stem + ".summary.json")
    summary = json.loads((path if path.exists() else log.parent / "summary.json").read_text())
    with open_log(log) as f:
        d = read_topics(f, [t for t in ("contact/event", "hil/status") if t in f.topics])
    events = [(float(t) * 1e-9, e) for t, evs in zip(d["contact/event"]["t_ns"], d["contact/event"]["events"],
                                                      strict=True) for e in evs]
    imp = first_impact(events)
    m_T = float(config["payload"]["mass"])
    out = {"latch_t": summary.get("latch", {}).get("t", float("nan")),
           "peak_N": summary["interface_peak"]["force_N"], "ok": summary["ok"], **imp,
           "impact_energy_J": 0.5 * m_T * imp["v_n"] ** 2}
    st = d.get("hil/status")
    if st is not None and len(st["t_ns"]):
        link = st["link"][-1]
        out["energy_net_J"] = float(link.get("energy_net", 0.0))
        out["energy_removed_J"] = float(link.get("energy_dissipated", 0.0))
        out["rig_fault"] = str(link.get("fault_reason", ""))
    return out


def run(name: str, config: dict[str, Any], out: Path, inprocess: bool = False) -> dict[str, Any]:
    """One 45 s lockstep run of ``config`` (a subprocess of launch.py), its figures."""
    where = out / name
    where.mkdir(parents=True, exist_ok=True)
    path = where / "config.toml"
    path.write_text(tomli_w.dumps(config))
    args = [sys.executable, "-c", _UNCHECKED, str(path), str(where / "run.mcap")] if inprocess else \
        [sys.executable, str(ROOT / "launch.py"), "run", str(path), "--log", str(where / "run.mcap"), "--no-report",
         "--overwrite"]
    p = subprocess.run(args, cwd=ROOT, env={**os.environ, "BERTHSIM_NO_PROGRESS": "1"}, capture_output=True,
                       text=True, timeout=3600)
    (where / "stdout.txt").write_text(p.stdout + p.stderr)
    (where / "exit.txt").write_text(f"{p.returncode}\n")
    fig = figures(where / "run.mcap", config)
    fig["exit"] = p.returncode
    return fig


_UNCHECKED = """
import sys
sys.path.insert(0, '.')
import hil.bridge
hil.bridge._loop_problems = lambda *a, **k: []  # this run only: check's refusal of the uncompensated loop lifted,
hil.bridge.HilBridge._check_loop = lambda self: None  # and the bridge's own once the round trip is measured
import launch
sys.exit(launch.main(['run', sys.argv[1], '--log', sys.argv[2], '--no-report', '--overwrite', '--inprocess']))
"""


def step_cost(table: dict[str, Any], steps: int = 500, blocks: int = 5) -> dict[str, float]:
    """CPU time per bridge step and per emulator exchange [µs] over ``blocks`` blocks, the least of each."""
    import time

    from hil.bridge import HilBridge
    from hil.config import parse
    from hil.emulator import LockstepPort, LockstepRig
    from hil.link import SerialLink
    from protocol.service import Sample

    cfg = parse(table)
    rig = LockstepRig(cfg)
    spent = [0.0]
    exchange = rig.exchange

    def timed(data: bytes) -> bytes:
        t0 = time.thread_time()
        out = exchange(data)
        spent[0] += time.thread_time() - t0
        return out

    rig.exchange = timed  # type: ignore[method-assign]
    h_ns = 4_000_000
    b = HilBridge(cfg, "hil", h_ns, SerialLink(LockstepPort(rig)))
    b.initial(0)
    one = np.array([1.0, 0.0, 0.0, 0.0])
    X_OL, X_TB = cfg.X_OL, cfg.X_TB

    class U:
        def __init__(self, n: int, z: float) -> None:
            t = n * h_ns
            self.o = Sample(t, h_ns, "orbiter", n, {"p_WoOo_W": np.zeros(3), "quat_WO": one, "w_WO_O": np.zeros(3),
                                                    "v_WOo_W": np.zeros(3), "a_WOo_W": np.zeros(3),
                                                    "wdot_WO_O": np.zeros(3)})
            p = X_OL[:3, 3] - X_TB[:3, 3] + [0.0, 0.0, z]
            self.p = Sample(t, h_ns, "payload", n, {"p_WoTo_W": p, "quat_WT": one, "w_WT_T": np.zeros(3),
                                                    "v_WTo_W": np.array([0.0, 0.0, 0.002]), "a_WTo_W": np.zeros(3),
                                                    "wdot_WT_T": np.zeros(3)})

        def state(self, topic: str) -> Sample:
            return self.o if topic == "orbiter/state" else self.p

    n, best_step, best_emu = 0, float("inf"), float("inf")
    for k in range(blocks + 1):
        spent[0] = 0.0
        t0 = time.thread_time()
        for _ in range(steps):
            z = min(0.002, -0.01 + 0.002 * n * h_ns * 1e-9)  # down into the seats, 2 mm in
            b.step(n * h_ns, h_ns, U(n, z))  # type: ignore[arg-type]
            n += 1
        total = time.thread_time() - t0
        if k:  # (the first block engages and tares)
            best_step = min(best_step, (total - spent[0]) / steps * 1e6)
            best_emu = min(best_emu, spent[0] / steps * 1e6)
    b.close()
    return {"bridge_step_us": best_step, "emulator_exchange_us": best_emu}


def main(argv: list[str] | None = None) -> int:
    """Command line: see the module docstring."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--delays", default="0,5,10,20", help="one-way delays [ms], compensated")
    ap.add_argument("--uncompensated", default="20", help="one-way delays [ms] run without compensation")
    ap.add_argument("--out", default=None, help="directory for the runs (default: a temporary one)")
    ap.add_argument("--jobs", type=int, default=2, help="runs at once")
    ap.add_argument("--tabulate", action="store_true", help="only the table of the runs already in --out")
    ap.add_argument("--reuse", action="store_true",
                    help="run only the cases without a finished run in --out (e.g. the model run), tabulate all")
    ap.add_argument("--step-cost", action="store_true", help="only the bridge's step cost")
    a = ap.parse_args(argv)
    if a.step_cost:
        from hil.config import hil_table

        rig = hil_table(_load(RIG))
        rig["emulator"]["stats"] = ""
        plain = hil_table(_load(MODEL))
        costs = {"rig contact, compensation on": step_cost(rig), "default scenario's [hil]": step_cost(plain)}
        for name, c in costs.items():
            print(f"{name}: bridge step {c['bridge_step_us']:.0f} us, emulator {c['emulator_exchange_us']:.0f} us")
        print(json.dumps(costs))
        return 0
    out = Path(a.out or mkdtemp(prefix="berthsim-rig-contact-"))
    cases: list[tuple[str, dict[str, Any], bool]] = [("model", _load(MODEL), False)]
    for ms in [float(x) for x in a.delays.split(",") if x]:
        c = _load(RIG)
        c["hil"]["emulator"]["delay"] = ms * 1e-3
        cases.append((f"rig {ms:g} ms", c, False))
    for ms in [float(x) for x in a.uncompensated.split(",") if x]:
        c = _load(RIG)
        c["hil"]["emulator"]["delay"] = ms * 1e-3
        c["hil"]["compensation"].update(predict=False, passivity=False)
        cases.append((f"rig {ms:g} ms, uncompensated", c, True))
    def done(name: str) -> bool:
        where = out / name.replace(" ", "_").replace(",", "")
        return (where / "run.summary.json").exists() or (where / "summary.json").exists()

    if not a.tabulate:
        with ThreadPoolExecutor(max(1, a.jobs)) as ex:
            futures = {name: ex.submit(run, name.replace(" ", "_").replace(",", ""), cfg, out, unchecked)
                       for name, cfg, unchecked in cases if not (a.reuse and done(name))}
            for f in futures.values():
                f.result()
    results = {}
    for name, cfg, _ in cases:
        where = out / name.replace(" ", "_").replace(",", "")
        if done(name):
            text = (where / "exit.txt").read_text().strip() if (where / "exit.txt").exists() else "?"
            results[name] = {**figures(where / "run.mcap", cfg), "exit": int(text) if text.lstrip("-").isdigit()
                             else text}
    if "model" not in results:
        print(f"no model run in {out}")
        return 1
    ref = results["model"]
    head = ("case", "latch t [s]", "Δ [s]", "peak F [N]", "Δ [%]", "e 1st impact", "Δ e", "E created/E impact",
            "exit")
    rows = [head]
    for name, r in results.items():
        created = max(0.0, r.get("energy_net_J", 0.0)) / ref["impact_energy_J"] if "energy_net_J" in r else 0.0
        r["energy_created_ratio"] = created
        rows.append((name, f"{r['latch_t']:.2f}", f"{r['latch_t'] - ref['latch_t']:+.2f}", f"{r['peak_N']:.0f}",
                     f"{100 * (r['peak_N'] / ref['peak_N'] - 1):+.1f}", f"{r['restitution']:.3f}",
                     f"{r['restitution'] - ref['restitution']:+.3f}",
                     f"{100 * created:.1f} %" if "energy_net_J" in r else "—", str(r["exit"])))
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    for row in rows:
        print("| " + " | ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)) + " |")
    print(json.dumps({"out": str(out), "results": results}, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
