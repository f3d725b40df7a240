#!/usr/bin/env python3
"""Runtime figures (printed as JSON; not a test).

- one-way bus latency p50/p99 (publisher process → subscriber process), ipc and tcp;
- lockstep throughput of four services at a 1 kHz base tick (``configs/toy_chain4.toml``),
  multi-process and ``--inprocess``: simulated base ticks per wall second, and the CPU
  time of all processes per tick in steady state (difference of two run lengths, so
  start-up cancels) — the figure that does not depend on what else the machine runs;
- the machine's lockstep floor (what pyzmq itself reaches here): four bare processes with
  the same sockets (``open_bus``, ipc) and the same exchange as ``toy_chain4`` — node *i*
  publishes pre-encoded ``toy/state{i}`` and ``toy/spring{i}`` frames of tick *k*, then
  blocks until it holds tick *k*'s frames of its neighbours, no model and no decode — ticks
  per wall second (first tick of any node to last of any) and the CPU of all four per
  tick (their own rusage over the tick loop, ZeroMQ io threads included), runs and median;
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
                                  [--source-messages 200000] [--floor-ticks 20000]
                                  [--parts latency,lockstep,lockstep_floor,realtime,floor,source]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import select
import shutil
import statistics
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
    from testkit.ports import bus_url
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
    p = subprocess.run([sys.executable, str(ROOT / "launch.py"), "run", str(config), "--json", *args],
                       capture_output=True, text=True, timeout=600, cwd=ROOT)
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


_SEQ0 = 1 << 32
"""The chain nodes' frames carry ``seq = _SEQ0 + tick``: msgpack then always writes it as a
uint64 (``0xcf`` + 8 bytes big-endian) at a fixed offset, patched per tick, read back bare."""
_NODE_WAIT_S = 10.0  # a chain node that gets no frame for this long gives up (prints an error)


def _node_frames(topic: str, sender: str, ticks: int) -> tuple[list[bytes], int]:
    """Frames ``topic\\0payload`` of ticks ``0..ticks-1`` (payload from :func:`protocol.codec.encode`,
    the tick patched into ``seq``) and the offset of the 8 seq bytes in a frame."""
    import numpy as np

    from protocol.codec import encode
    fields = {"x": 1.0, "v": 0.0} if "state" in topic else {"F": 1.0, "x": np.array([1.0])}
    payload = encode(topic, fields, sender=sender, seq=_SEQ0, t_ns=10**10, h_ns=1_000_000)
    marker = b"\xcf" + _SEQ0.to_bytes(8, "big")
    if payload.count(marker) != 1:
        raise RuntimeError(f"lockstep_floor: seq of {topic!r} not found once in its payload {payload!r}")
    prefix = topic.encode() + b"\0"
    off = len(prefix) + payload.index(marker) + 1
    frame = prefix + payload
    return [frame[:off] + (_SEQ0 + k).to_bytes(8, "big") + frame[off + 8:] for k in range(ticks)], off


def _chain_node(url: str, i: int, n: int, ticks: int) -> None:
    """Child process: node ``i`` of a bare lockstep chain of ``n`` (the toy_chain4 exchange, no model).

    Protocol with the parent (lines on stdout, words on stdin): ``seen`` once every
    neighbour's probe has arrived (its PUB reaches this SUB); then, on ``go``, the tick loop
    and one JSON line of figures; on ``exit`` (or EOF) close. Any failure: a JSON line
    ``{"error": ...}`` and exit status 1.
    """
    import gc

    import testkit.toys  # noqa: F401  (registers the toy topics)
    from protocol.bus import mesh_endpoints, open_bus

    def fail(msg: str) -> None:
        print(json.dumps({"error": f"node {i}: {msg}"}), flush=True)
        sys.exit(1)

    def stdin_word(timeout: float) -> bytes | None:
        if not select.select([0], [], [], timeout)[0]:
            return None
        return os.read(0, 64) or b"eof"

    names = [f"m{j}" for j in range(n)]
    ep = mesh_endpoints(url, names)
    neighbours = [j for j in (i - 1, i + 1) if 0 <= j < n]
    senders = {f"toy/spring{i - 1}": names[i - 1]} if i > 0 else {}  # input topic -> its sender
    if i < n - 1:
        senders[f"toy/state{i + 1}"] = names[i + 1]
    inputs = list(senders)
    with open_bus(ep[names[i]], [ep[names[j]] for j in neighbours], [*inputs, "probe"]) as bus:
        own = [_node_frames(f"toy/state{i}", names[i], ticks)[0]]
        if i < n - 1:
            own.append(_node_frames(f"toy/spring{i}", names[i], ticks)[0])
        mine = list(zip(*own, strict=True))  # per tick: the frames this node sends
        expect = [(t.encode() + b"\0", _node_frames(t, senders[t], 1)[1]) for t in inputs]  # (prefix, seq offset)
        # start: probe until every neighbour's probe is seen, then keep probing (others may not
        # have seen ours yet) without reading the SUB until the parent says every node has seen all
        seen: set[int] = set()
        deadline = time.monotonic() + 60.0
        while len(seen) < len(neighbours):
            if time.monotonic() > deadline:
                fail(f"probes of neighbours {sorted(set(neighbours) - seen)} not seen within 60 s")
            bus.send("probe", bytes([i]))
            m = bus.recv(0.01)
            while m is not None:
                if m.topic == "probe":
                    seen.add(m.payload[0])
                m = bus.recv(0.0)
        print("seen", flush=True)
        while True:
            if time.monotonic() > deadline:
                fail("no 'go' from the parent within 60 s")
            word = stdin_word(0.01)
            if word is not None:
                if word.startswith(b"go"):
                    break
                fail(f"expected 'go' from the parent, got {word!r}")
            bus.send("probe", bytes([i]))
        send = bus.send_frame
        bus.set_recv_timeout(int(_NODE_WAIT_S * 1000))
        recv = bus.recv_wait
        have = [0] * len(expect)
        gc.collect()
        gc.disable()
        r0 = resource.getrusage(resource.RUSAGE_SELF)
        t0 = time.monotonic_ns()
        try:
            for k in range(ticks):
                for f in mine[k]:
                    send(f)
                while min(have) <= k:
                    frame = recv()
                    for j, (prefix, off) in enumerate(expect):
                        if frame.startswith(prefix):  # else a late probe: skip
                            got = int.from_bytes(frame[off:off + 8], "big") - _SEQ0
                            if got != have[j]:
                                fail(f"{inputs[j]}: tick {got} arrived, expected {have[j]}")
                            have[j] += 1
                            break
        except bus.Timeout:
            fail(f"tick {k}: no frame within {_NODE_WAIT_S} s (have {dict(zip(inputs, have, strict=True))})")
        t1 = time.monotonic_ns()
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        gc.enable()
        cpu = (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)
        print(json.dumps({"t0_ns": t0, "t1_ns": t1, "cpu_s": cpu}), flush=True)
        stdin_word(60.0)  # stay until the parent has every node's figures: our last frames must get out


def _next_lines(procs: list[subprocess.Popen], bufs: list[bytes], timeout: float, what: str) -> list[str]:
    """The next stdout line of every child, waiting at most ``timeout`` s in all (RuntimeError
    naming the nodes otherwise, or the error a node reported, or a node's exit)."""
    out: list[str | None] = [None] * len(procs)
    deadline = time.monotonic() + timeout
    while True:
        for j in range(len(procs)):
            if out[j] is None and b"\n" in bufs[j]:
                line, bufs[j] = bufs[j].split(b"\n", 1)
                out[j] = line.decode(errors="replace").strip()
                if out[j].startswith("{") and "error" in json.loads(out[j]):
                    raise RuntimeError(f"lockstep_floor: {json.loads(out[j])['error']}")
        pending = {procs[j].stdout.fileno(): j for j in range(len(procs)) if out[j] is None}
        if not pending:
            return out  # type: ignore[return-value]
        left = deadline - time.monotonic()
        if left <= 0:
            raise RuntimeError(f"lockstep_floor: nodes {sorted(pending.values())} gave no {what} within {timeout} s")
        for fd in select.select(list(pending), [], [], left)[0]:
            chunk = os.read(fd, 65536)
            if not chunk:
                j = pending[fd]
                raise RuntimeError(f"lockstep_floor: node {j} exited (status {procs[j].wait(5)}) before {what}")
            bufs[pending[fd]] += chunk


def lockstep_floor(ticks: int, runs: int = 3, n: int = 4) -> dict[str, object]:
    """Bare pyzmq lockstep chain of ``n`` processes (the toy_chain4 exchange, no model, no decode),
    ``runs`` runs of ``ticks`` ticks: ticks per wall second and CPU of all nodes per tick."""
    out: list[dict[str, object]] = []
    for _ in range(runs):
        tmp = tempfile.mkdtemp(prefix="bs-bench-floor-")
        procs: list[subprocess.Popen] = []
        try:
            for i in range(n):
                with open(os.path.join(tmp, f"node{i}.err"), "wb") as err:
                    procs.append(subprocess.Popen(
                        [sys.executable, __file__, "--chain-node", f"ipc://{tmp}/bus", str(i), str(n), str(ticks)],
                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, bufsize=0))
            bufs = [b""] * n
            try:
                if _next_lines(procs, bufs, 90.0, "'seen' (start-up and probes)") != ["seen"] * n:
                    raise RuntimeError("lockstep_floor: a node said something other than 'seen'")
                for p in procs:
                    p.stdin.write(b"go\n")
                res = [json.loads(line) for line in _next_lines(procs, bufs, 30.0 + ticks / 200, "figures")]
                for p in procs:
                    p.stdin.write(b"exit\n")
                for p in procs:
                    p.wait(timeout=10)
            except (RuntimeError, subprocess.TimeoutExpired, OSError) as err:
                for p in procs:
                    if p.poll() is None:
                        p.kill()
                logs = {i: Path(tmp, f"node{i}.err").read_text(errors="replace")[-600:] for i in range(n)}
                logs = {i: t for i, t in logs.items() if t.strip()}
                raise RuntimeError(f"{err}" + (f"; stderr of nodes: {logs}" if logs else "")) from err
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait(5)
            shutil.rmtree(tmp, ignore_errors=True)
        wall = (max(r["t1_ns"] for r in res) - min(r["t0_ns"] for r in res)) / 1e9
        out.append({"wall_s": round(wall, 3), "steps_per_s": round(ticks / wall),
                    "cpu_us_per_tick": round(sum(r["cpu_s"] for r in res) / ticks * 1e6, 1),
                    "cpu_us_per_tick_by_node": [round(r["cpu_s"] / ticks * 1e6, 1) for r in res]})
    return {"nodes": n, "ticks": ticks, "runs": out,
            "median_steps_per_s": round(statistics.median(r["steps_per_s"] for r in out)),
            "median_cpu_us_per_tick": round(statistics.median(r["cpu_us_per_tick"] for r in out), 1)}


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


def _bare_loop(seconds: float, busy_ns: int, priority: int, anchor: int, h: int = 1_000_000) -> None:
    """Child process: a loop of period ``h`` [ns] (1 kHz by default) with the shell's wait strategy
    and no bus, steps due at ``anchor + k·h`` (monotonic ns, the same instants for every loop, as
    for the services); prints its figures as JSON."""
    import gc

    import numpy as np

    from protocol.realtime import fine_timer_slack, set_priority
    from protocol.shell import _SPIN_NS
    set_priority(priority)
    fine_timer_slack()
    gc.disable()
    now = time.monotonic_ns
    n = int(seconds * 1e9 / h)
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


def bare_loops(seconds: float, loops: list[tuple[float, int, float]]) -> list[dict[str, float]]:
    """Bare loops (no bus) run at once, each ``(rate [Hz], SCHED_FIFO priority, busy [µs] per step)``,
    their steps due on one common grid: what this machine holds right now at those rates."""
    anchor = time.monotonic_ns() + 5_000_000_000  # after every child's start-up (numpy import, loaded machine)
    procs = [subprocess.Popen([sys.executable, __file__, "--bare", str(seconds), str(int(busy_us * 1000)),
                               str(priority), str(anchor), str(round(1e9 / rate))], stdout=subprocess.PIPE, text=True)
             for rate, priority, busy_us in loops]
    return [json.loads(p.communicate(timeout=seconds + 60)[0].strip().splitlines()[-1]) for p in procs]


def floor(seconds: float, busy_us: float = 50.0, priority: int = 10) -> dict[str, object]:
    """Bare 1 kHz loops (no bus), one alone then four at once: what this machine holds right now."""
    out: dict[str, object] = {"busy_us_per_step": busy_us}
    for count in (1, 4):
        out[f"{count}_loop{'s' if count > 1 else ''}"] = bare_loops(seconds, [(1000.0, priority, busy_us)] * count)
    return out


def source(n: int) -> dict[str, float]:
    """A toy source publishing ``n`` pre-encoded 31-byte messages (5,000 per simulated second) unpaced,
    a toy sink recording them; messages per wall second (launcher start to source done)."""
    import msgpack

    import testkit.toys  # noqa: F401  (registers the toy topics)
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
kind = "testkit.toys"
rate_hz = 1000
role = "source"
replay = "{tmp / 'in.rec'}"
topics = ["toy/state0"]
[services.rec]
kind = "testkit.toys"
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
    if len(sys.argv) in (6, 7) and sys.argv[1] == "--bare":
        _bare_loop(float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]),
                   *(int(x) for x in sys.argv[6:]))
        return
    if len(sys.argv) == 6 and sys.argv[1] == "--chain-node":
        _chain_node(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=60.0, help="realtime run length [s]")
    ap.add_argument("--lockstep-seconds", type=float, default=5.0, help="simulated seconds per lockstep run")
    ap.add_argument("--messages", type=int, default=5000, help="latency samples per transport")
    ap.add_argument("--source-messages", type=int, default=200_000, help="messages of the source throughput run")
    ap.add_argument("--floor-ticks", type=int, default=20_000, help="ticks per run of the lockstep floor")
    ap.add_argument("--parts", default="latency,lockstep,lockstep_floor,realtime,floor,source",
                    help="comma-separated figures to measure")
    a = ap.parse_args()
    parts = set(a.parts.split(","))
    fig: dict[str, object] = {"cpus": os.cpu_count(), "load_avg_1min_before": round(os.getloadavg()[0], 2)}
    if "latency" in parts:
        fig["latency_one_way"] = {s: latency(s, a.messages) for s in ("ipc", "tcp")}
    if "lockstep" in parts:
        fig["lockstep_4x1kHz_multiprocess"] = lockstep(a.lockstep_seconds, False)
        fig["lockstep_4x1kHz_inprocess"] = lockstep(a.lockstep_seconds, True)
    if "lockstep_floor" in parts:
        fig["lockstep_4x1kHz_floor_bare_pyzmq"] = lockstep_floor(a.floor_ticks)
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
