#!/usr/bin/env python3
"""Runtime figures (printed as JSON; not a test).

- one-way bus latency p50/p99 (publisher process → subscriber process), ipc and tcp;
- lockstep throughput of four services at a 1 kHz base tick (``configs/toy_chain4.toml``),
  multi-process and ``--inprocess``: simulated base ticks per wall second, and the CPU
  time of all processes per tick in steady state (difference of two run lengths, so
  start-up cancels) — the figure that does not depend on what else the machine runs;
- realtime: step-start jitter p50/p99/max and overrun rate per service, for a 1 kHz and a
  100 Hz service (``configs/toy_spring.toml``) and for four services at 1 kHz;
- the machine's own 1 kHz floor: bare loops that only sleep to absolute deadlines with the
  shell's realtime wait strategy (same timer slack, SCHED_FIFO priority when permitted,
  collector off) and busy-wait a fixed time per step — one alone and four at once, the
  same count as the services, due at the same instants as the services are — with their
  jitter and overrun rate beside ours;
- source (replay) throughput: a source publishing pre-encoded messages unpaced to a
  recording sink, messages per wall second, and whether the sink got every one.

    python bench/bench_runtime.py [--seconds 60] [--lockstep-seconds 5] [--messages 5000]
                                  [--source-messages 200000] [--parts latency,lockstep,realtime,floor,source]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CHAIN = ROOT / "configs" / "toy_chain4.toml"
SPRING = ROOT / "configs" / "toy_spring.toml"


def _receiver(url: str, n: int) -> None:
    """Child process: receive ``n`` timestamped messages, print one-way latencies [ns] as JSON."""
    from protocol.bus import mesh_endpoints, open_bus
    ep = mesh_endpoints(url, ["tx", "rx"])
    with open_bus(ep["rx"], [ep["tx"]], ["lat", "probe"]) as bus:
        print("ready", flush=True)
        lat = []
        while len(lat) < n:
            m = bus.recv(5.0)
            if m is None:
                break
            if m.topic == "lat":
                lat.append(time.monotonic_ns() - int.from_bytes(m.payload[:8], "little"))
        print(json.dumps(lat), flush=True)


def latency(scheme: str, n: int) -> dict[str, float]:
    """One-way latency publisher process → subscriber process (the mesh: no hop between), sent at 1 kHz."""
    import numpy as np

    from protocol.bus import mesh_endpoints, open_bus
    from tests.protocol.conftest import bus_url
    tmp = tempfile.mkdtemp(prefix="bs-bench-")
    url = bus_url(scheme, tmp)
    ep = mesh_endpoints(url, ["tx", "rx"])
    with open_bus(ep["tx"]) as pub:
        child = subprocess.Popen([sys.executable, __file__, "--receiver", url, str(n)], stdout=subprocess.PIPE,
                                 text=True)
        assert child.stdout.readline().strip() == "ready"
        time.sleep(0.3)
        for _ in range(50):  # until the subscription is through (no slow joiner)
            pub.send("probe", b"")
            time.sleep(0.01)
        pad = bytes(200)  # a typical state message is ~250 bytes
        t_next = time.monotonic_ns()
        for _ in range(n):
            t_next += 1_000_000
            while time.monotonic_ns() < t_next:
                pass
            pub.send("lat", time.monotonic_ns().to_bytes(8, "little") + pad)
        out, _ = child.communicate(timeout=60)
    shutil.rmtree(tmp, ignore_errors=True)
    lat = np.array(json.loads(out.strip().splitlines()[-1]), dtype=float)
    return {"n": int(lat.size), "p50_us": round(float(np.percentile(lat, 50)) / 1e3, 1),
            "p99_us": round(float(np.percentile(lat, 99)) / 1e3, 1)}


def _run(args: list[str], config: Path = CHAIN) -> tuple[dict, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run([sys.executable, str(ROOT / "launch.py"), "run", str(config), *args], capture_output=True,
                       text=True, timeout=600, cwd=ROOT)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        raise RuntimeError(f"launch.py run failed ({p.returncode}): {p.stderr[-2000:]}")
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return json.loads(p.stdout.strip().splitlines()[-1]), cpu


def lockstep(seconds: float, inprocess: bool) -> dict[str, float]:
    """Four services at 1 kHz, as fast as possible; CPU per tick from two run lengths (start-up cancels)."""
    extra = ["--mode", "lockstep", "--speed", "0"] + (["--inprocess"] if inprocess else [])
    short, cpu_short = _run(["--duration", str(round(seconds / 2, 3)), *extra])
    summary, cpu = _run(["--duration", str(seconds), *extra])
    ticks = summary["t_end_ns"] // 1_000_000
    extra_ticks = ticks - short["t_end_ns"] // 1_000_000
    return {"ticks": ticks, "wall_s": round(summary["wall_s"], 3),
            "steps_per_s": round(ticks / summary["wall_s"]),
            "cpu_us_per_tick_steady": round((cpu - cpu_short) / max(1, extra_ticks) * 1e6, 1)}


def realtime(seconds: float, config: Path = CHAIN) -> dict[str, dict[str, float]]:
    """The services of ``config`` paced by the wall clock."""
    summary, _ = _run(["--duration", str(seconds), "--mode", "realtime"], config)
    out = {}
    for name, s in summary["services"].items():
        out[name] = {"steps": s["steps"], "jitter_p50_us": round(s["jitter_p50_ns"] / 1e3, 1),
                     "jitter_p99_us": round(s["jitter_p99_ns"] / 1e3, 1),
                     "jitter_max_us": round(s["jitter_max_ns"] / 1e3, 1),
                     "overrun_pct": round(100.0 * s["overruns"] / max(1, s["steps"]), 3),
                     "input_age_p99_us": round(s["input_age_p99_ns"] / 1e3, 1)}
    return out


def _bare_loop(seconds: float, busy_ns: int, priority: int, anchor: int) -> None:
    """Child process: a 1 kHz loop with the shell's wait strategy and no bus, steps due at
    ``anchor + k·h`` (monotonic ns, the same instants for every loop, as for the services);
    prints its figures as JSON."""
    import gc

    import numpy as np

    from protocol.shell import _fine_timer_slack, _realtime_priority, _SPIN_NS
    h = 1_000_000
    _realtime_priority(priority, "bare")
    _fine_timer_slack()
    gc.disable()
    now = time.monotonic_ns
    n = int(seconds * 1000)
    jitter = np.zeros(n, dtype=np.int64)
    overruns = 0
    for k in range(n):
        due = anchor + k * h
        rem = due - now()
        if rem > _SPIN_NS:
            time.sleep((rem - _SPIN_NS) / 1e9)
        if now() >= due:
            os.sched_yield()
        while now() < due:
            os.sched_yield()
        start = now()
        jitter[k] = start - due
        end = start + busy_ns
        while now() < end:
            pass
        if now() > due + h:
            overruns += 1
    print(json.dumps({"steps": n, "jitter_p50_us": round(float(np.percentile(jitter, 50)) / 1e3, 1),
                      "jitter_p99_us": round(float(np.percentile(jitter, 99)) / 1e3, 1),
                      "jitter_max_us": round(float(jitter.max()) / 1e3, 1),
                      "overrun_pct": round(100.0 * overruns / n, 3)}), flush=True)


def floor(seconds: float, busy_us: float = 50.0, priority: int = 10) -> dict[str, object]:
    """Bare 1 kHz loops (no bus), one alone then four at once: what this machine holds right now."""
    out: dict[str, object] = {"busy_us_per_step": busy_us}
    for count in (1, 4):
        anchor = time.monotonic_ns() + 5_000_000_000  # after every child's start-up (numpy import, loaded machine)
        procs = [subprocess.Popen([sys.executable, __file__, "--bare", str(seconds), str(int(busy_us * 1000)),
                                   str(priority), str(anchor)], stdout=subprocess.PIPE, text=True)
                 for _ in range(count)]
        res = [json.loads(p.communicate(timeout=seconds + 60)[0].strip().splitlines()[-1]) for p in procs]
        out[f"{count}_loop{'s' if count > 1 else ''}"] = res
    return out


def source(n: int) -> dict[str, float]:
    """A toy source publishing ``n`` pre-encoded 31-byte messages (5,000 per simulated second) unpaced,
    a toy sink recording them; messages per wall second (launcher start to source done)."""
    import msgpack

    import tests.protocol.toys  # noqa: F401  (registers the toy topics)
    from protocol.codec import encode
    tmp = Path(tempfile.mkdtemp(prefix="bs-bench-src-"))
    try:
        items = [("toy/state0", encode("toy/state0", {"x": float(k), "v": 0.0}, sender="m0", seq=k, t_ns=k * 200_000,
                                       h_ns=1_000_000)) for k in range(n)]
        (tmp / "in.rec").write_bytes(msgpack.packb(items, use_bin_type=True))
        cfg = tmp / "src.toml"
        toy = (f'toy = {{mass = [1.0, 1.0], k = [1.0], rest = [1.0], x0 = [0.0, 1.0], v0 = [0.0, 0.0], '
               f'out_dir = "{tmp}"}}')
        cfg.write_text(f"""{toy}
[sim]
duration = {n * 200_000 / 1e9 + 0.001}
[services.replay]
kind = "tests.protocol.toys"
rate_hz = 1000
role = "source"
replay = "{tmp / 'in.rec'}"
topics = ["toy/state0"]
[services.rec]
kind = "tests.protocol.toys"
rate_hz = 1000
role = "sink"
topics = ["toy/state0"]
""")
        summary, _ = _run(["--speed", "0"], cfg)
        got = len(msgpack.unpackb((tmp / "rec.rec").read_bytes(), raw=False))
        return {"messages": n, "wall_s": round(summary["wall_s"], 3), "msgs_per_s": round(n / summary["wall_s"]),
                "sink_received_all": got == n}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    """Parse options, measure, print JSON."""
    if len(sys.argv) == 4 and sys.argv[1] == "--receiver":
        _receiver(sys.argv[2], int(sys.argv[3]))
        return
    if len(sys.argv) == 6 and sys.argv[1] == "--bare":
        _bare_loop(float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=60.0, help="realtime run length [s]")
    ap.add_argument("--lockstep-seconds", type=float, default=5.0, help="simulated seconds per lockstep run")
    ap.add_argument("--messages", type=int, default=5000, help="latency samples per transport")
    ap.add_argument("--source-messages", type=int, default=200_000, help="messages of the source throughput run")
    ap.add_argument("--parts", default="latency,lockstep,realtime,floor,source",
                    help="comma-separated figures to measure")
    a = ap.parse_args()
    parts = set(a.parts.split(","))
    fig: dict[str, object] = {"cpus": os.cpu_count(), "load_avg_1min_before": round(os.getloadavg()[0], 2)}
    if "latency" in parts:
        fig["latency_one_way"] = {s: latency(s, a.messages) for s in ("ipc", "tcp")}
    if "lockstep" in parts:
        fig["lockstep_4x1kHz_multiprocess"] = lockstep(a.lockstep_seconds, False)
        fig["lockstep_4x1kHz_inprocess"] = lockstep(a.lockstep_seconds, True)
    if "realtime" in parts:
        fig["realtime_1kHz_and_100Hz"] = realtime(a.seconds, SPRING)
        fig["realtime_4x1kHz"] = realtime(a.seconds)
    if "floor" in parts:
        fig["realtime_floor_bare_loops"] = floor(a.seconds)
    if "source" in parts:
        fig["source_unpaced"] = source(a.source_messages)
    fig["load_avg_1min_after"] = round(os.getloadavg()[0], 2)
    print(json.dumps(fig, indent=1))


if __name__ == "__main__":
    main()
