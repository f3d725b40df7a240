"""Logger, replay and export figures: prints one JSON object.

- ``record_sink``: :class:`services.logger.McapLogger` fed directly (``on_message`` of
  pre-encoded messages, sizes of the default scenario's topics) to ``close()``:
  messages/s and MB/s of message bodies, lost (sequence gaps) and written counts,
  whether every seq is in the file; and the CPU time of each process, as messages per
  CPU second: the receiving process (``process_time``: the caller and the logger's
  hand-over thread) and the logger's writer process (``McapLogger.writer_cpu_s``), which
  a shared machine disturbs less than wall time (``load_avg_1min`` says how shared it
  was). ``record_sink_64KiB_chunks``: the same with 64 KiB chunks (the default is
  mcap's 1 MiB).
- ``mcap_writer_floor``: the ``mcap`` package's ``Writer.add_message`` alone on the same
  messages (zstd chunks, as the writer process uses it), messages per CPU second: the
  ceiling of any writer process built on that library on this machine.
- ``record_bus``: the same messages over the ZeroMQ bus (ipc): a publisher process
  sends the pre-encoded frames back to back, as fast as pyzmq can; this process
  takes every queued frame per wake-up (``ZmqBus.recv_frames``, then a pause of
  ``_SINK_BATCH_S``) and hands them to the logger in one ``on_frames`` call, as the sink
  shell does. Messages/s and
  MB/s received (first to last frame) and written (first frame to ``close()``
  returned), zero loss (every seq in the file), and the CPU time of each process as
  messages per CPU second: publisher (sending, with its ZeroMQ I/O thread), receiver
  (with its I/O thread and the hand-over thread) and writer. With fewer free cores
  than busy processes the wall figures measure the machine's load; the per-CPU
  figures say which process limits the rate. ``record_bus_paced``: the publisher paced at
  ``--record-rate`` (default 100,000 msg/s) for ``--record-seconds`` (default 10 s): whether the logger
  sustains that rate — zero loss, every seq in the file, and ``close_lag_s`` (last message
  received to file closed), which stays near the batch period when the writer keeps up and
  grows with the run length when it does not. ``record_bus_pinned`` and
  ``record_bus_paced_pinned`` (machines with 2 CPUs or more): the same with the writer
  process on a CPU of its own (``McapLogger(writer_cpus=...)``) and the publisher and
  receiving process on another.
- ``record_launch``: the logger *service* end to end: ``launch.py replay LOG --max --log
  OUT`` of a log of ``2 × --messages`` such messages (the replay source publishes as
  fast as it can; the real shell's bulk drains, hand-over and writer process record
  it): messages written per second from the first message received to the file
  closed, from the output log's own metadata; lost and invalid counts.
- ``read``: the whole log of a run (``--log``) read by each reader, messages per CPU
  second: ``mcap``'s public reader (``make_reader(f).iter_messages``, in log-time order
  and in file order), :meth:`protocol.logfile.LogFile.messages` (the same messages in
  the same order as mcap's log-time order), :meth:`~protocol.logfile.LogFile.blocks`
  (chunk blocks, what replay reads) and :func:`protocol.logfile.read_topics` (per-topic
  arrays, what report and export read).
- ``replay``: a log of a run (``--log``; default: the four-mass toy chain at 1 kHz,
  recorded now; the default scenario's: ``launch.py run configs/srms_berthing.toml
  --duration 10 --log d10.mcap --no-report``) replayed at ``--max``: the source alone
  (``ReplaySource.read`` until the end) and end to end through ``launch.py replay``
  (the launcher's ``wall_s``, handshake excluded), each as a multiple of real time
  (simulated span / wall time), and the CPU time of the whole command (every process).
- ``report``: :func:`tools.report.make_report` of that log: wall time, CPU time of
  this process and of its children (the PNG writer).
- ``seek``: latency of the first message after a random time in a 200,000-message log
  (p50, p99, max over 50 seeks).
- ``export``: rows/s of ``export`` to Parquet and to CSV (every topic of that log).

Run from the repository root: ``python bench/bench_logger.py [--log RUN.mcap]``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import resource
import subprocess
import sys
import tempfile
import time
from multiprocessing.connection import Connection
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import testkit.toys  # noqa: E402,F401  (toy topics)
from protocol.bus import open_bus  # noqa: E402
from protocol.codec import encode  # noqa: E402
from protocol.logfile import open_log, read_topics  # noqa: E402
from protocol.shell import _SINK_BATCH_S  # noqa: E402
from services.logger import CHUNK_SIZE, McapLogger  # noqa: E402
from services.replay import ReplaySource  # noqa: E402
from tools.export import export  # noqa: E402

MS = 1_000_000
END = b"end\0"  # the publisher's last frame


def scenario_messages(n: int) -> list[tuple[str, bytes]]:
    """``n`` messages shaped like the default scenario's: orbiter, payload, contact, arm at their rates."""
    z3, z6, q = np.zeros(3), np.zeros(6), np.array([1.0, 0, 0, 0])
    bodies = {
        "payload/state": {"p_WoTo_W": z3, "quat_WT": q, "w_WT_T": z3, "v_WTo_W": z3, "a_WTo_W": z3, "wdot_WT_T": z3,
                          "grappled": False, "berthed": False},
        "contact/wrench": {"F_Lo_W": z6, "p_WoLo_W": z3, "active": False, "F_peak": np.zeros(2)},
        "orbiter/state": {"p_WoOo_W": z3, "quat_WO": q, "w_WO_O": z3, "v_WOo_W": z3, "a_WOo_W": z3, "wdot_WO_O": z3},
        "contact/event": {"events": []},
    }
    topics = list(bodies)
    out, seq = [], dict.fromkeys(topics, 0)
    for i in range(n):
        t = topics[i % len(topics)]
        b = dict(bodies[t])
        first = next(iter(b))
        if isinstance(b[first], np.ndarray):
            b[first] = b[first] + i
        out.append((t, encode(t, b, sender=t.split("/")[0], seq=seq[t], t_ns=(i // len(topics)) * MS, h_ns=MS)))
        seq[t] += 1
    return out


def _every_seq(path: Path) -> bool:
    """Whether every topic's seqs in the log are 0, 1, 2, ... with none missing."""
    with open_log(path) as log:
        return all([m.seq for m in log.messages([t])] == list(range(c)) for t, c in log.topics.items())


def bench_sink(msgs: list[tuple[str, bytes]], path: Path, chunk_size: int = CHUNK_SIZE) -> dict:
    nbytes = sum(len(p) for _, p in msgs)
    t0, c0 = time.perf_counter(), time.process_time()
    lg = McapLogger(path, chunk_size=chunk_size)
    for topic, payload in msgs:
        lg.on_message(topic, payload)
    lg.close()
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"chunk_size": chunk_size, "messages": len(msgs), "msg_per_s": len(msgs) / dt,
            "MB_per_s": nbytes / dt / 1e6, "receiver_cpu_s": cpu, "writer_cpu_s": lg.writer_cpu_s,
            "receiver_msg_per_cpu_s": len(msgs) / cpu, "writer_msg_per_cpu_s": len(msgs) / lg.writer_cpu_s,
            "written": lg.written, "lost": sum(lg.lost.values()), "every_seq_present": _every_seq(path),
            "file_MB": path.stat().st_size / 1e6, "body_MB": nbytes / 1e6}


def bench_writer_floor(msgs: list[tuple[str, bytes]], path: Path, chunk_size: int = CHUNK_SIZE) -> dict:
    """The ``mcap`` package's ``Writer.add_message`` alone (zstd chunks, as the logger's writer process):
    messages per CPU second of a bare loop over the same messages — the ceiling of any writer built on it."""
    from mcap.writer import CompressionType, Writer
    with open(path, "wb") as f:
        w = Writer(f, chunk_size=chunk_size, compression=CompressionType.ZSTD)
        w.start(profile="", library="bench")
        sid = w.register_schema("bench", "jsonschema", b"{}")
        chan = {t: w.register_channel(t, "msgpack", sid) for t in dict.fromkeys(t for t, _ in msgs)}
        items = [(chan[t], i, p) for i, (t, p) in enumerate(msgs)]
        add = w.add_message
        c0 = time.process_time()
        for cid, i, p in items:
            add(cid, i, p, i, i)
        w.finish()
        cpu = time.process_time() - c0
    return {"messages": len(msgs), "cpu_s": cpu, "msg_per_cpu_s": len(msgs) / cpu, "us_per_msg": cpu / len(msgs) * 1e6}


def _cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _publisher(url: str, msgs: list[tuple[str, bytes]], ready: mp.Event, go: mp.Event, report: Connection,
               rate: float = 0.0) -> None:
    """Send every frame, then ``end``; report its CPU time of sending.

    ``rate`` 0: back to back, as fast as pyzmq can. ``rate`` > 0 [msg/s]: paced on the
    wall clock, the frames due at each 1 ms instant sent together.
    """
    pub = open_bus(url)  # high-water mark 0: nothing dropped
    frames = [t.encode() + b"\0" + p for t, p in msgs]
    ready.set()
    go.wait(30)
    c0, t0 = _cpu_s(), time.perf_counter()
    send = pub.send_frame
    if rate > 0:
        per_ms, i, k = rate / 1000.0, 0, 0
        while i < len(frames):
            k += 1
            j = min(len(frames), int(k * per_ms))
            for f in frames[i:j]:
                send(f)
            i = j
            wait = t0 + k * 1e-3 - time.perf_counter()
            if wait > 0:
                time.sleep(wait)
    else:
        for f in frames:
            send(f)
    pub.send_frame(END)
    dt = time.perf_counter() - t0
    time.sleep(1.0)  # linger: everything queued reaches the subscriber
    report.send({"cpu_s": _cpu_s() - c0, "send_s": dt})
    pub.close()


def bench_bus(msgs: list[tuple[str, bytes]], path: Path, tmp: Path, rate: float = 0.0,
              pin: tuple[set[int], set[int]] | None = None) -> dict:
    """Publisher process -> ipc -> this process (bulk drain, as the sink shell) -> logger -> writer process.

    ``rate`` 0: the publisher sends flat out (capacity); > 0: paced at ``rate`` msg/s
    (whether the logger sustains that rate: zero loss, and a lag after the last message
    that does not grow with the run length). ``pin`` = (CPUs of the publisher and this
    process, CPUs of the writer process: ``McapLogger(writer_cpus=...)``); None: any.
    """
    affinity = os.sched_getaffinity(0)
    if pin is not None:
        os.sched_setaffinity(0, pin[0])  # the publisher, forked below, inherits it
    try:
        out = _bench_bus(msgs, path, tmp, rate, pin[1] if pin else set())
    finally:
        os.sched_setaffinity(0, affinity)
    if pin is not None:
        out["cpus"] = {"publisher_and_receiver": sorted(pin[0]), "writer": sorted(pin[1])}
    return out


def _bench_bus(msgs: list[tuple[str, bytes]], path: Path, tmp: Path, rate: float, writer_cpus: set[int]) -> dict:
    url = f"ipc://{tmp}/bench.pub"
    ready, go = mp.Event(), mp.Event()
    report_in, report_out = mp.Pipe(duplex=False)
    proc = mp.get_context("fork").Process(target=_publisher, args=(url, msgs, ready, go, report_out, rate),
                                               daemon=True)
    proc.start()
    ready.wait(30)
    bus = open_bus(None, [url], topics=[""])  # (high-water mark 0)
    time.sleep(0.3)  # the subscription reaches the publisher before it sends
    lg = McapLogger(path, writer_cpus=writer_cpus)
    recv_frames, on_frames, poll = bus.recv_frames, lg.on_frames, bus.poll
    go.set()
    n = 0
    t0 = c0 = None
    done = False
    while not done and poll(10_000):
        if t0 is None:
            t0, c0 = time.perf_counter(), time.process_time()
        frames = recv_frames()  # every frame queued, per wake-up, in one call (as the sink shell)
        if frames[-1] == END:
            frames.pop()
            done = True
        n += len(frames)
        on_frames(frames)
        time.sleep(_SINK_BATCH_S)  # as the sink shell: let messages pile up between wake-ups
    t1 = time.perf_counter()
    lg.close()
    t2, c2 = time.perf_counter(), time.process_time()
    bus.close()
    pub = report_in.recv() if report_in.poll(10) else {}
    proc.join(5)
    t0, c0 = t0 or t1, c0 or c2
    nbytes = sum(len(p) for _, p in msgs)
    return {"messages": len(msgs), "rate_msg_per_s": rate or "flat out",
            "sent_msg_per_s": len(msgs) / pub["send_s"] if pub.get("send_s") else None,
            "received": n, "written": lg.written, "lost": sum(lg.lost.values()),
            "every_seq_present": _every_seq(path), "close_lag_s": t2 - t1,
            "received_msg_per_s": n / (t1 - t0), "received_MB_per_s": nbytes / (t1 - t0) / 1e6,
            "written_msg_per_s": lg.written / (t2 - t0), "written_MB_per_s": nbytes / (t2 - t0) / 1e6,
            "publisher_send_s": pub.get("send_s"), "publisher_cpu_s": pub.get("cpu_s"),
            "receiver_cpu_s": c2 - c0, "writer_cpu_s": lg.writer_cpu_s,
            "publisher_msg_per_cpu_s": len(msgs) / pub["cpu_s"] if pub.get("cpu_s") else None,
            "receiver_msg_per_cpu_s": n / (c2 - c0), "writer_msg_per_cpu_s": lg.written / lg.writer_cpu_s}


def bench_record_launch(msgs: list[tuple[str, bytes]], tmp: Path) -> dict:
    """The logger service end to end: ``launch.py replay LOG --max --log OUT`` of a log of ``msgs``.

    The replay source publishes as fast as it can; the logger service (the real shell,
    bulk drains, hand-over, writer process) records everything. Messages per second =
    messages written / (first message received → file closed, from the log's own
    ``berthsim.close`` metadata).
    """
    src, out = tmp / "launch_src.mcap", tmp / "launch_out.mcap"
    lg = McapLogger(src)
    lg.on_frames([t.encode() + b"\0" + p for t, p in msgs])
    lg.close()
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, str(ROOT / "launch.py"), "replay", str(src), "--max", "--log", str(out),
                        "--quiet"], capture_output=True, text=True, timeout=600, cwd=ROOT)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError(p.stderr[-2000:])
    with open_log(out) as log:
        meta = log.metadata()
        close, run = meta["berthsim.close"], meta["berthsim.run"]
        logged = sum(n for t, n in log.topics.items() if t in {t for t, _ in msgs})  # the replayed topics
    span = (int(close["end_wall_ns"]) - int(close["first_wall_ns"])) * 1e-9
    return {"messages": len(msgs), "logged": logged, "lost": int(close["lost"]), "invalid": int(close["invalid"]),
            "logger_start_to_close_s": (int(close["end_wall_ns"]) - int(run["start_wall_ns"])) * 1e-9,
            "first_message_to_close_s": span, "written_msg_per_s": int(close["written"]) / span,
            "written_MB_per_s": sum(len(b) for _, b in msgs) / span / 1e6, "command_wall_s": wall}


def toy_log(tmp: Path) -> Path:
    cfg = tmp / "chain4.toml"
    cfg.write_text((ROOT / "configs" / "toy_chain4.toml").read_text()
                   + '\n[services.logger]\nkind = "logger"\nrate_hz = 1000\n')
    log = tmp / "chain4.mcap"
    p = subprocess.run([sys.executable, str(ROOT / "launch.py"), "run", str(cfg), "--log", str(log)],
                       capture_output=True, text=True, timeout=300, cwd=ROOT)
    if p.returncode != 0:
        raise RuntimeError(p.stderr[-2000:])
    return log


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def bench_read(log: Path) -> dict:
    from mcap.reader import make_reader

    def mcap_reader(order: bool) -> int:
        with log.open("rb") as f:
            return sum(1 for _ in make_reader(f).iter_messages(log_time_order=order))

    def messages() -> int:
        with open_log(log) as lf:
            return sum(1 for _ in lf.messages())

    def blocks() -> int:
        with open_log(log) as lf:
            return sum(len(b.t_ns) for b in lf.blocks())

    def arrays() -> int:
        with open_log(log) as lf:
            return sum(len(c["t_ns"]) for c in read_topics(lf, lf.topics).values())

    out = {}
    for name, fn in (("mcap_iter_messages_log_time_order", lambda: mcap_reader(True)),
                     ("mcap_iter_messages_file_order", lambda: mcap_reader(False)),
                     ("LogFile.messages", messages), ("LogFile.blocks", blocks), ("read_topics", arrays)):
        c0 = time.process_time()
        n = fn()
        out[name] = {"messages": n, "msg_per_cpu_s": n / (time.process_time() - c0)}
    return out


def bench_replay(log: Path) -> dict:
    with open_log(log) as lf:
        span = (lf.end_ns - lf.start_ns) * 1e-9
        n_all = lf.message_count
    src = ReplaySource(log)
    t0, c0 = time.perf_counter(), time.process_time()
    n = 0
    while src.read() is not None:
        n += 1
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    src.close()
    ch0 = _children_cpu()
    p = subprocess.run([sys.executable, str(ROOT / "launch.py"), "replay", str(log), "--max", "--quiet"],
                       capture_output=True, text=True, timeout=600, cwd=ROOT)
    wall = None
    for line in p.stdout.splitlines():
        if line.startswith("{") and '"summary"' in line:
            wall = json.loads(line).get("wall_s")
    return {"log": str(log), "span_s": span, "messages": n_all, "replayed_messages": n,
            "source_msg_per_s": n / dt, "source_msg_per_cpu_s": n / cpu, "source_x_realtime": span / dt,
            "source_x_realtime_per_cpu_s": span / cpu,
            "end_to_end_wall_s": wall, "end_to_end_x_realtime": span / wall if wall else None,
            "end_to_end_command_cpu_s": _children_cpu() - ch0, "end_to_end_rc": p.returncode}


def bench_report(log: Path, tmp: Path) -> dict:
    from tools.report import make_report
    ch0 = _children_cpu()
    t0, c0 = time.perf_counter(), time.process_time()
    make_report(log, tmp / "report")
    return {"wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0,
            "children_cpu_s": _children_cpu() - ch0}


def bench_seek(path: Path) -> dict:
    rng = np.random.default_rng(0)
    with open_log(path) as log:
        lat = []
        for t in rng.uniform(log.start_ns, log.end_ns, 50).astype(np.int64):
            t0 = time.perf_counter()
            next(log.messages(start_ns=int(t)))
            lat.append(time.perf_counter() - t0)
    lat_ms = np.array(lat) * 1e3
    return {"seeks": len(lat), "p50_ms": float(np.percentile(lat_ms, 50)), "p99_ms": float(np.percentile(lat_ms, 99)),
            "max_ms": float(lat_ms.max())}


def bench_export(log: Path, tmp: Path) -> dict:
    out = {}
    for fmt in ("parquet", "csv"):
        t0 = time.perf_counter()
        res = export(log, fmt, tmp / f"export_{fmt}")
        dt = time.perf_counter() - t0
        rows = sum(n for _, n in res.values())
        out[fmt] = {"rows": rows, "rows_per_s": rows / dt}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--log", help="a run's log to replay and export (default: record the toy chain now)")
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--record-rate", type=float, default=100_000.0,
                    help="paced bus recording: messages per second (0: skip) [msg/s]")
    ap.add_argument("--record-seconds", type=float, default=10.0, help="paced bus recording: length [s]")
    ap.add_argument("--parts", default="record,log",
                    help="comma-separated: record (writer floor, sink, bus, paced), log (seek, read, replay, report, "
                         "export)")
    a = ap.parse_args()
    parts = set(a.parts.split(","))
    if not parts <= {"record", "log"}:
        ap.error(f"--parts: unknown {sorted(parts - {'record', 'log'})} (known: record, log)")
    with tempfile.TemporaryDirectory(prefix="bench-logger-") as d:
        tmp = Path(d)
        msgs = scenario_messages(a.messages)
        res: dict = {"cpu_count": os.cpu_count(), "load_avg_1min": os.getloadavg()[0]}
        if "record" in parts:
            res["mcap_writer_floor"] = bench_writer_floor(msgs, tmp / "floor.mcap")
            res["record_sink"] = bench_sink(msgs, tmp / "sink.mcap")
            res["record_sink_64KiB_chunks"] = bench_sink(msgs, tmp / "sink64.mcap", 1 << 16)
            res["record_bus"] = bench_bus(msgs, tmp / "bus.mcap", tmp)
            res["record_launch"] = bench_record_launch(scenario_messages(2 * len(msgs)), tmp)
            cpus = sorted(os.sched_getaffinity(0))
            pin = ({cpus[0]}, {cpus[1]}) if len(cpus) >= 2 else None
            if pin:
                res["record_bus_pinned"] = bench_bus(msgs, tmp / "bus_pinned.mcap", tmp, pin=pin)
            if a.record_rate > 0:
                paced = scenario_messages(int(a.record_rate * a.record_seconds))
                res["record_bus_paced"] = bench_bus(paced, tmp / "paced.mcap", tmp, a.record_rate)
                if pin:
                    res["record_bus_paced_pinned"] = bench_bus(paced, tmp / "paced_pinned.mcap", tmp, a.record_rate,
                                                               pin)
                del paced
        if "log" in parts:
            if not (tmp / "sink.mcap").exists():
                bench_sink(msgs, tmp / "sink.mcap")
            res["seek"] = bench_seek(tmp / "sink.mcap")
            log = Path(a.log) if a.log else toy_log(tmp)
            res["read"] = bench_read(log)
            res["replay"] = bench_replay(log)
            res["report"] = bench_report(log, tmp)
            res["export"] = bench_export(log, tmp)
        res["load_avg_1min_end"] = os.getloadavg()[0]
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
