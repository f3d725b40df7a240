#!/usr/bin/env python3
"""Real time across two hosts: the shipped two-host realtime config in two network namespaces.

``configs/two_hosts_realtime.toml`` with the physics (orbiter, arm, contact, operator) on host a
and the hil bridge (with the rig emulator on a pty) and the logger on host b, CurveZMQ over a
veth pair (:class:`testkit.netns.TwoHosts`; needs root and iproute2), ``rt_priority`` as
shipped. Both "hosts" share this machine's cores. Then, for comparison, the single-host
realtime scenario (``configs/srms_berthing_realtime.toml``) in the same bench run.

Per run: exit codes, completed as scripted, latch time and peak interface force; per service:
overrun rate [%], step-start jitter p99 [µs], input age p50 / p99 [ms] (the hil bridge's inputs
come from host a: its ages are the cross-host sample ages); per host: its clock's offset,
drift [ppm], round trip p50 / p99 [µs] and the offset's uncertainty [µs]; the rig link's
counters. Prints one JSON object.
``python bench/bench_two_hosts.py [--sim-seconds 45] [--clock-ppm 0]``
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from protocol.security import write_keys  # noqa: E402
from testkit.netns import TwoHosts, skip_reason  # noqa: E402

LAUNCH = ROOT / "launch.py"


def _services(stats: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for name, s in stats.items():
        if not s or not s.get("steps"):
            continue
        out[name] = {"overruns_pct": round(100.0 * s.get("overruns", 0) / max(1, s["steps"]), 3),
                     "jitter_p99_us": round(s.get("jitter_p99_ns", 0) / 1e3, 1),
                     "input_age_p50_ms": round(s.get("input_age_p50_ns", 0) / 1e6, 2),
                     "input_age_p99_ms": round(s.get("input_age_p99_ns", 0) / 1e6, 2)}
    return out


def _figures(fig: dict[str, Any]) -> dict[str, Any]:
    events = {k: t for t, k in fig.get("events", [])}
    return {"completed_as_scripted": fig.get("ok"), "latch_t": events.get("latch"),
            "peak_force_N": fig.get("interface_peak", {}).get("force_N"), "rig": fig.get("rig")}


def two_hosts(sim_seconds: float, clock_ppm: float) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="bench-two-"))
    write_keys(tmp / "keys", ("server", "client"))
    env = {**os.environ, "BERTHSIM_NO_PROGRESS": "1", "PYTHONPATH": str(ROOT)}
    with TwoHosts(subnet=21) as h:
        text = (ROOT / "configs" / "two_hosts_realtime.toml").read_text()
        text = text.replace("10.0.0.1", h.addr["a"]).replace("10.0.0.2", h.addr["b"])
        text = re.sub(r"(?m)^duration = .*$", f"duration = {sim_seconds}", text, count=1)
        cfg = tmp / "two.toml"
        cfg.write_text(text)
        cmd = [sys.executable, str(LAUNCH), "run", str(cfg), "--json", "--only"]
        a = h.popen("a", [*cmd, "orbiter,arm,contact,operator"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                    env=env, cwd=tmp)
        env_b = {**env, **({"BERTHSIM_TEST_CLOCK_PPM": str(clock_ppm)} if clock_ppm else {})}
        b = h.popen("b", [*cmd, "hil,logger", "--log", str(tmp / "run.mcap"), "--no-report"],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env_b, cwd=tmp)
        out_a, err_a = a.communicate(timeout=sim_seconds * 3 + 180)
        out_b, err_b = b.communicate(timeout=120)
    summary = json.loads([x for x in out_a.splitlines() if x.startswith("{")][-1])
    fig = json.loads((tmp / "run.summary.json").read_text()) if (tmp / "run.summary.json").exists() else {}
    hosts = {h: {k: v for k, v in info.items() if k != "admission"} for h, info in summary.get("hosts", {}).items()}
    tail = (err_a[-400:] if a.returncode else "") + (err_b[-400:] if b.returncode else "")
    return {"exit": [a.returncode, b.returncode], **_figures(fig), "services": _services(summary["services"]),
            "hosts": hosts, "stderr_tail": tail}


def one_host(sim_seconds: float) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="bench-one-"))
    p = subprocess.run([sys.executable, str(LAUNCH), "run", str(ROOT / "configs" / "srms_berthing_realtime.toml"),
                        "--duration", str(sim_seconds), "--log", str(tmp / "run.mcap"), "--no-report", "--json"],
                       capture_output=True, text=True, timeout=sim_seconds * 3 + 180,
                       env={**os.environ, "BERTHSIM_NO_PROGRESS": "1", "PYTHONPATH": str(ROOT)})
    summary = json.loads([x for x in p.stdout.splitlines() if x.startswith("{")][-1])
    fig = json.loads((tmp / "run.summary.json").read_text()) if (tmp / "run.summary.json").exists() else {}
    return {"exit": p.returncode, **_figures(fig), "services": _services(summary["services"])}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sim-seconds", type=float, default=45.0)
    ap.add_argument("--clock-ppm", type=float, default=0.0, help="host b's clock this many ppm fast (test knob)")
    ap.add_argument("--no-one-host", action="store_true", help="skip the single-host comparison run")
    a = ap.parse_args(argv)
    why = skip_reason()
    if why:
        print(json.dumps({"skipped": why}))
        return 0
    out: dict[str, Any] = {"load_avg": os.getloadavg(), "two_hosts": two_hosts(a.sim_seconds, a.clock_ppm)}
    if not a.no_one_host:
        out["one_host"] = one_host(a.sim_seconds)
    print(json.dumps(out, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
