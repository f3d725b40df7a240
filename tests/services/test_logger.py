"""The MCAP logger: format, completeness, time windows and seek, crash safety, bad input.

Independent checks: the file is read back with the ``mcap`` package's own reader
(not only through :mod:`services.logger`); the bytes logged are compared with the
bytes a test publisher put on the bus; after SIGKILL the chunks are read with mcap's
stream reader with CRC validation.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from mcap.reader import make_reader
from mcap.records import Chunk
from mcap.stream_reader import StreamReader, breakup_chunk

import testkit.toys  # noqa: F401  (registers the toy topics)
from errors import ConfigError, LogError
from protocol.bus import SequenceTracker
from protocol.codec import decode, encode, envelope
from protocol.logfile import json_schema, open_log, read_topics, schema_from_json
from protocol.logrecover import recover
from protocol.messages import SCHEMAS
from services.logger import McapLogger

ROOT = Path(__file__).resolve().parents[2]
LAUNCH = ROOT / "launch.py"

TOY = """
[services.a]
kind = "testkit.toys"
rate_hz = 1000
index = 0
[services.b]
kind = "testkit.toys"
rate_hz = 100
index = 1
[services.logger]
kind = "logger"
rate_hz = 1000
{logger}
[toy]
mass = [1.0, 4.0]
k = [40.0]
rest = [1.0]
x0 = [0.0, 1.1]
v0 = [0.3, -0.2]
out_dir = "{out}"
{toy}
"""


def toy_config(tmp: Path, *, duration: float = 0.5, sim: str = "", logger: str = "", toy: str = "",
               extra: str = "", name: str = "c.toml") -> Path:
    """A two-mass toy run (1 kHz and 100 Hz) with a logger (and ``extra`` services)."""
    out = tmp / "out"
    out.mkdir(exist_ok=True)
    p = tmp / name
    p.write_text(f"[sim]\nduration = {duration}\n{sim}\n" + TOY.format(out=out, logger=logger, toy=toy) + extra)
    return p


def launch(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``launch.py ARGS`` in a subprocess, bounded."""
    return subprocess.run([sys.executable, str(LAUNCH), *args], capture_output=True, text=True, timeout=timeout,
                          cwd=ROOT)


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``launch.py ARGS`` in this process (commands that start no run): exit code, stdout, stderr."""
    import launch
    capsys.readouterr()
    rc = launch.main(list(args))
    out, err = capsys.readouterr()
    return rc, out, err


def record_toy_run(tmp: Path, duration: float = 0.5, **kw: str) -> Path:
    """Run the toy chain with a logger; the log's path."""
    log = tmp / "run.mcap"
    p = launch("run", str(toy_config(tmp, duration=duration, **kw)), "--log", str(log))
    assert p.returncode == 0, p.stderr
    return log


def toy_messages(n: int, topic: str = "toy/state0", sender: str = "a", dt: int = 1_000_000) -> list[bytes]:
    return [encode(topic, {"x": float(i), "v": -float(i)}, sender=sender, seq=i, t_ns=i * dt, h_ns=dt,
                   wall_ns=10**18 + i) for i in range(n)]


# ---------------------------------------------------------------- format
def test_file_layout_read_back_with_the_mcap_reader(tmp_path):
    path = tmp_path / "x.mcap"
    cfg = {"sim": {"seed": 42, "mode": "lockstep"}, "services": {"a": {"kind": "k", "rate_hz": 10, "host": "h1"}}}
    lg = McapLogger(path, config=cfg, config_text="[sim]\nseed = 42\n", command_line="launch.py run x.toml")
    a = toy_messages(300)
    s = [encode("sim/control", {"cmd": "probe", "info": {}}, sender="launcher", seq=i, t_ns=0, h_ns=1)
         for i in range(3)]
    for i, p in enumerate(a):
        lg.on_message("toy/state0", p)
        if i < 3:
            lg.on_message("sim/control", s[i])
    lg.close()
    lg.close()  # idempotent
    with path.open("rb") as f:
        r = make_reader(f)
        summ = r.get_summary()
        schemas = {sc.name: sc for sc in summ.schemas.values()}
        assert set(schemas) == {"berthsim.ToyState0", "berthsim.SimControl"}
        assert all(sc.id > 0 and sc.encoding == "jsonschema" for sc in schemas.values())
        assert json.loads(schemas["berthsim.ToyState0"].data)["title"] == "berthsim.ToyState0"
        chans = {c.topic: c for c in summ.channels.values()}
        assert all(c.message_encoding == "msgpack" and c.schema_id > 0 for c in chans.values())
        got = [(c.topic, m) for _, c, m in r.iter_messages(topics=["toy/state0"], log_time_order=True)]
        assert [m.data for _, m in got] == a  # the wire bodies, unchanged
        for i, (_, m) in enumerate(got):
            assert (m.log_time, m.publish_time, m.sequence) == (i * 1_000_000, 10**18 + i, i)
        atts = {x.name: x.data for x in r.iter_attachments()}
        assert json.loads(atts["config.json"]) == cfg
        assert atts["command_line.txt"] == b"launch.py run x.toml" and atts["config.toml"].startswith(b"[sim]")
        meta = {m.name: m.metadata for m in r.iter_metadata()}
    run = meta["berthsim.run"]
    assert run["seed"] == "42" and run["hosts"] == "h1" and run["version.mcap"] and run["git_commit"]
    assert meta["berthsim.close"]["lost"] == "0" and meta["berthsim.close"]["written"] == "303"
    assert summ.statistics.chunk_count >= 1 and all(ci.compression == "zstd" for ci in summ.chunk_indexes)


def test_json_schema_describes_the_topic_and_round_trips():
    for topic, sch in SCHEMAS.items():
        doc = json.loads(json_schema(sch))
        fields = doc["prefixItems"][6]
        assert set(fields["required"]) == set(sch.fields), topic
        assert schema_from_json(json_schema(sch)) == sch


def test_sequence_gaps_and_invalid_messages_are_counted(tmp_path):
    lg = McapLogger(tmp_path / "g.mcap")
    msgs = toy_messages(20)
    for i, p in enumerate(msgs):
        if i not in (5, 6, 12):
            lg.on_message("toy/state0", p)
    lg.on_message("toy/state0", b"\x01\x02garbage")
    lg.on_message("no/such/topic", msgs[0])
    lg.close()
    assert lg.lost == {"toy/state0": 3} and lg.written == 17
    with pytest.raises(ProcessLookupError):  # close() waited for the writer process and reaped it
        os.kill(lg._pid, 0)
    with open_log(tmp_path / "g.mcap") as log:
        meta = log.metadata()["berthsim.close"]
        assert meta["lost"] == "3" and meta["lost.toy/state0"] == "3" and meta["invalid"] == "2"
        assert [m.seq for m in log.messages()] == [i for i in range(20) if i not in (5, 6, 12)]


def test_junk_topics_are_counted_not_listed_in_the_closing_metadata(tmp_path):
    """10,000 topics without a schema (before: 10,000 'invalid.<topic>' keys in berthsim.close)."""
    lg = McapLogger(tmp_path / "j.mcap")
    msgs = toy_messages(3)
    lg.on_frames([f"junk/{i}".encode() + b"\0" + msgs[0] for i in range(10_000)] + [b"no separator"])
    for p in msgs:
        lg.on_message("toy/state0", p)
    lg.on_message("toy/state0", b"\x01\x02garbage")
    lg.close()
    with open_log(tmp_path / "j.mcap") as log:
        meta = log.metadata()["berthsim.close"]
    assert meta["invalid"] == "10002" and meta["invalid.toy/state0"] == "1"
    # 10,001 topics (the frame without a separator has none): 10,000 told apart at most, every message counted
    assert meta["invalid.unknown_topics"] == "10000" and meta["invalid.unknown_topic_messages"] == "10001"
    assert len(meta) < 20 and not any(k.startswith("invalid.junk") for k in meta)


def test_a_dead_writer_process_is_one_named_failure(tmp_path):
    """SIGKILL to the writer process: the next hand-over raises one LogError naming the file and the
    signal, close() does not raise it again (before: the shell printed two tracebacks), and the
    complete chunks stay readable after recover."""
    from protocol.logrecover import recover
    lg = McapLogger(tmp_path / "w.mcap", flush_interval=0.01)
    for p in toy_messages(50):
        lg.on_message("toy/state0", p)
    time.sleep(0.3)
    os.kill(lg._pid, signal.SIGKILL)
    with pytest.raises(LogError) as ei:
        for _ in range(200):
            lg.on_message("toy/state0", toy_messages(1)[0])
            time.sleep(0.01)
    assert str(ei.value).startswith(f"log {str(tmp_path / 'w.mcap')!r}: writer failed: the writer process died "
                                    "(SIGKILL)")
    lg.close()  # the failure was raised once
    assert recover(tmp_path / "w.mcap").messages == 50


def test_the_log_holds_nothing_a_consumer_rejects(tmp_path):
    """A non-finite field, and with the run's gate: another sender, t < 0, a second copy of an
    instant, a bogus sequence number (before: all written, and seq = 10⁶ made lost = 999,999)."""
    import msgpack

    from protocol.provenance import SampleGate

    lg = McapLogger(tmp_path / "g.mcap")
    lg.set_gate(SampleGate({"toy/state0": 10**7}, {"a": {"period_ns": 10**6, "outputs": [("toy/state0", "state")]}}))
    good = toy_messages(10, dt=10**7)  # sender a, seq i, t = i * 10 ms, h = 10 ms
    nan = msgpack.packb([1, "a", 3, 3 * 10**7, 10**7, 0, {"x": float("nan"), "v": 0.0}])
    forged = [encode("toy/state0", {"x": 5.0, "v": 0.0}, sender=s, seq=q, t_ns=t, h_ns=10**7)
              for s, q, t in (("x", 4, 4 * 10**7), ("a", 0, -5), ("a", 10**6, 8 * 10**7))]
    for i, p in enumerate(good):
        lg.on_message("toy/state0", p)
        if i == 2:
            lg.on_message("toy/state0", nan)
            lg.on_message("toy/state0", p)  # a second copy of t = 20 ms
            for f in forged:
                lg.on_message("toy/state0", f)
    lg.close()
    assert lg.written == 10 and lg.invalid == {"toy/state0": 1} and lg.rejected == {"toy/state0": 4}
    with open_log(tmp_path / "g.mcap") as log:
        meta = log.metadata()["berthsim.close"]
        assert meta["lost"] == "0" and meta["rejected"] == "4" and meta["negative_t_ns"] == "0"
        assert [m.payload for m in log.messages()] == good


def test_frames_in_bulk_count_gaps_as_the_sequence_tracker_does_one_by_one(tmp_path):
    """Whole frames in drains of random size, handed over in several batches: two senders on one topic,
    drops, repeats and reordering. Reference: SequenceTracker.see on every valid message in arrival order."""
    r = np.random.default_rng(5)
    streams = {("a", "toy/state0"): toy_messages(400, "toy/state0", "a"),
               ("b", "toy/state0"): toy_messages(400, "toy/state0", "b"),
               ("a", "toy/state1"): toy_messages(400, "toy/state1", "a")}
    arrivals = []
    for (_sender, topic), msgs in streams.items():
        keep = [i for i in range(400) if r.random() > 0.05]  # drops
        keep += [int(k) for k in r.choice(keep, 10)]  # repeats, arriving later
        arrivals += [(int(r.integers(0, 1 << 30)) + 1000 * j, topic, msgs[i]) for j, i in enumerate(keep)]
    arrivals.sort()
    for k in range(0, len(arrivals) - 1, 37):  # some neighbours swapped: out of order
        arrivals[k], arrivals[k + 1] = arrivals[k + 1], arrivals[k]
    frames = [topic.encode() + b"\0" + body for _, topic, body in arrivals]
    frames[100:100] = [b"toy/state0", b"\0" + frames[0][11:], b"no/such/topic\0" + frames[0][11:],
                       b"toy/state0\0" + frames[0][11:-4]]  # no separator, empty topic, unknown topic, truncated
    ref = SequenceTracker()
    lost: dict[str, int] = {}
    for _, topic, body in arrivals:
        _, sender, seq, *_ = envelope(topic, body)
        lost[topic] = lost.get(topic, 0) + ref.see(sender, topic, seq)
    lg = McapLogger(tmp_path / "bulk.mcap")
    i = 0
    while i < len(frames):
        j = i + int(r.integers(1, 400))
        lg.on_frames(frames[i:j])
        if r.random() < 0.3:
            time.sleep(0.15)  # the hand-over thread takes what is queued: another batch
        i = j
    lg.close()
    assert lg.lost == {t: n for t, n in lost.items() if n} and sum(lost.values()) > 0
    assert lg.invalid == {"toy/state0": 1} and lg.unknown_messages == 3  # 2 without a topic, 1 without a schema
    assert lg.received == len(frames) and lg.written == len(arrivals)
    with open_log(tmp_path / "bulk.mcap") as log:
        logged = sorted((m.topic, m.payload) for m in log.messages())
    assert logged == sorted((topic, body) for _, topic, body in arrivals)


# ---------------------------------------------------------------- windows and seek
@pytest.fixture(scope="module")
def big_log(tmp_path_factory):
    """100,000 messages on two topics over 50 s of simulation time."""
    path = tmp_path_factory.mktemp("big") / "big.mcap"
    lg = McapLogger(path)
    a = toy_messages(50_000, "toy/state0", "a", 1_000_000)
    b = toy_messages(50_000, "toy/state1", "b", 1_000_000)
    for pa, pb in zip(a, b, strict=True):
        lg.on_message("toy/state0", pa)
        lg.on_message("toy/state1", pb)
    lg.close()
    return path, a, b


def test_topic_and_time_window_with_the_mcap_reader(big_log):
    path, a, b = big_log
    with path.open("rb") as f:
        got = [m.data for _, _, m in make_reader(f).iter_messages(topics=["toy/state1"], starting_at=2_000_000_000,
                                                                  ending_before=3_000_000_000)]
    assert got == b[2000:3000]
    with open_log(path) as log:
        assert log.topics == {"toy/state0": 50_000, "toy/state1": 50_000}
        assert (log.start_ns, log.end_ns) == (0, 49_999_000_000)
        got = [(m.topic, m.payload) for m in log.messages(["toy/state0"], 10_000_000_000, 10_004_000_000)]
        assert got == [("toy/state0", p) for p in a[10_000:10_005]]  # inclusive end


def test_reading_matches_the_mcap_reader_for_any_topics_and_window(big_log, tmp_path):
    path, a, b = big_log
    # a log whose chunks overlap in time: two producers with a skewed clock, small chunks
    skew = tmp_path / "skew.mcap"
    lg = McapLogger(skew, chunk_size=2048)
    for i in range(3000):
        lg.on_message("toy/state0", a[i])
        lg.on_message("toy/state1", b[max(0, i - 7)] if i >= 7 else b[i])
        if i % 1000 == 999:  # a late message from the start: its chunk overlaps every earlier one
            lg.on_message("toy/state1", b[i // 1000])
    lg.close()
    rng = np.random.default_rng(1)
    for p, cases in ((path, (1, 2)), (skew, range(12))):  # mcap's reader is slow: two windows of the big log
        with p.open("rb") as f, open_log(p) as log:
            for k in cases:
                topics = [["toy/state0"], ["toy/state1"], ["toy/state0", "toy/state1"], None][k % 4]
                lo, hi = sorted(int(x) for x in rng.integers(0, log.end_ns + 1, 2))
                if p == path:
                    hi = lo + 3_000_000_000
                if k == 0:
                    lo, hi = None, None
                f.seek(0)
                ref = [(m.log_time, c.topic, m.data, m.publish_time, m.sequence) for _, c, m in
                       make_reader(f).iter_messages(topics=topics, starting_at=lo, ending_at=hi, log_time_order=True)]
                got = [tuple(m) for m in log.messages(topics, lo, hi)]
                assert got == ref, (p.name, topics, lo, hi)


def test_chunks_without_message_indexes_read_as_the_mcap_reader_does(tmp_path):
    from mcap.writer import IndexType, Writer

    path = tmp_path / "noindex.mcap"
    a, b = toy_messages(500, "toy/state0"), toy_messages(500, "toy/state1", "b", 3_000_000)
    with path.open("wb") as f:
        w = Writer(f, chunk_size=4096, index_types=IndexType.ALL & ~IndexType.MESSAGE)
        w.start()
        sid = w.register_schema("berthsim.ToyState0", "jsonschema", json_schema(SCHEMAS["toy/state0"]))
        c0 = w.register_channel("toy/state0", "msgpack", sid)
        c1 = w.register_channel("toy/state1", "msgpack", sid)
        for i in range(500):
            w.add_message(c0, i * 1_000_000, a[i], i, i)
            w.add_message(c1, i * 3_000_000, b[i], i, i)
        w.finish()
    with path.open("rb") as f, open_log(path) as log:
        assert log.chunk_count > 5 and not any(ci.message_index_offsets for ci in
                                               make_reader(f).get_summary().chunk_indexes)
        for topics, lo, hi in ((None, None, None), (["toy/state1"], 100_000_000, 900_000_000)):
            f.seek(0)
            ref = [(m.log_time, c.topic, m.data, m.publish_time, m.sequence) for _, c, m in
                   make_reader(f).iter_messages(topics=topics, starting_at=lo, ending_at=hi, log_time_order=True)]
            assert [tuple(m) for m in log.messages(topics, lo, hi)] == ref


def test_read_topics_equals_decoding_every_message(tmp_path):
    path = tmp_path / "arrays.mcap"
    lg = McapLogger(path, chunk_size=4096)
    rng = np.random.default_rng(3)
    sent: dict[str, list] = {"payload/state": [], "contact/event": []}
    for i in range(400):
        body = {"p_WoTo_W": rng.normal(size=3), "quat_WT": rng.normal(size=4), "w_WT_T": rng.normal(size=3),
                "v_WTo_W": rng.normal(size=3), "a_WTo_W": rng.normal(size=3), "wdot_WT_T": rng.normal(size=3),
                "grappled": bool(i % 3), "berthed": False}
        lg.on_message("payload/state", encode("payload/state", body, sender="contact", seq=i, t_ns=i * 1_000_000,
                                              h_ns=1_000_000))
        sent["payload/state"].append(body)
        if i % 7 == 0:
            ev = {"events": [{"kind": "capture", "n": i}] if i % 14 == 0 else []}
            lg.on_message("contact/event", encode("contact/event", ev, sender="contact", seq=i // 7,
                                                  t_ns=i * 1_000_000, h_ns=7_000_000))
            sent["contact/event"].append(ev)
    lg.close()
    got = read_topics(path, ["payload/state", "contact/event"])
    with open_log(path) as log:
        ref = {t: [decode(t, m.payload) for m in log.messages([t])] for t in sent}
    p, e = got["payload/state"], got["contact/event"]
    assert p["p_WoTo_W"].shape == (400, 3) and p["quat_WT"].shape == (400, 4) and p["grappled"].dtype == bool
    assert np.array_equal(p["t_ns"], [s.t_ns for s in ref["payload/state"]])
    assert np.array_equal(p["seq"], [s.seq for s in ref["payload/state"]])
    for name in ("p_WoTo_W", "quat_WT", "w_WT_T", "grappled"):
        assert np.array_equal(p[name], np.array([s.body[name] for s in ref["payload/state"]])), name
    assert np.array_equal(p["p_WoTo_W"], np.array([b["p_WoTo_W"] for b in sent["payload/state"]]))
    assert e["events"].tolist() == [list(s.body["events"]) for s in ref["contact/event"]]
    assert list(p["sender"]) == ["contact"] * 400
    with pytest.raises(LogError, match="no topic 'arm/state'"):
        read_topics(path, ["arm/state"])


def test_seek_to_any_time_within_50ms(big_log):
    path, a, b = big_log
    with open_log(path) as log:
        worst = 0.0
        for t_s in (0.0, 7.3, 19.9995, 33.3, 49.999):
            t = int(t_s * 1e9)
            best = float("inf")
            for _ in range(3):  # best of three: the machine is shared
                t0 = time.perf_counter()
                m = next(log.messages(start_ns=t))
                best = min(best, time.perf_counter() - t0)
            k = -(-t // 1_000_000)
            assert m.t_ns == k * 1_000_000 and m.payload in (a[k], b[k])
            worst = max(worst, best)
    assert worst < 0.050, f"seek took {worst * 1e3:.1f} ms"


# ---------------------------------------------------------------- bad input
def test_missing_truncated_and_non_mcap_files_name_the_file(tmp_path, big_log, capsys):
    path = big_log[0]
    trunc = tmp_path / "trunc.mcap"
    trunc.write_bytes(path.read_bytes()[:100_000])
    text = tmp_path / "notes.mcap"
    text.write_text("hello, not a log\n")
    empty = tmp_path / "empty.mcap"
    empty.write_bytes(b"")
    for bad, why in ((tmp_path / "missing.mcap", "no such file"), (trunc, "truncated"), (text, "not an MCAP"),
                     (empty, "not an MCAP"), (tmp_path, "not a regular file")):
        with pytest.raises(LogError) as e:
            open_log(bad)
        msg = str(e.value)
        assert str(bad) in msg and why in msg and "\n" not in msg
    for cmd in ("replay", "report", "export"):
        rc, _, err = cli(capsys, cmd, str(trunc))
        assert rc == 2 and str(trunc) in err and len(err.strip().splitlines()) == 1, cmd
    rc, _, err = cli(capsys, "recover", str(text))
    assert rc == 2 and str(text) in err and "not an MCAP" in err and len(err.strip().splitlines()) == 1


def test_unwritable_log_is_a_log_error(tmp_path):
    with pytest.raises(LogError, match="cannot create"):
        McapLogger(tmp_path / "no" / "dir" / "x.mcap")


def test_writer_cpus_pin_the_writer_process_and_bad_ones_are_refused(tmp_path):
    cpus = sorted(os.sched_getaffinity(0))
    lg = McapLogger(tmp_path / "pinned.mcap", writer_cpus=[cpus[-1]])
    try:
        status = Path(f"/proc/{lg._pid}/status").read_text()
        deadline = time.monotonic() + 5
        while f"Cpus_allowed_list:\t{cpus[-1]}\n" not in status and time.monotonic() < deadline:
            time.sleep(0.01)  # the writer process pins itself as it starts
            status = Path(f"/proc/{lg._pid}/status").read_text()
        assert f"Cpus_allowed_list:\t{cpus[-1]}\n" in status
        for p in toy_messages(10):
            lg.on_message("toy/state0", p)
    finally:
        lg.close()
    assert lg.written == 10
    with pytest.raises(LogError, match=r"writer_cpus: CPUs \[4096\] are not on this machine"):
        McapLogger(tmp_path / "x.mcap", writer_cpus=[4096])
    from protocol.config import validate
    cfg = {"services": {"a": {"kind": "testkit.toys", "rate_hz": 1000, "index": 0},
                        "logger": {"kind": "logger", "rate_hz": 1000, "writer_cpus": [4096]}},
           "toy": {"mass": [1.0], "k": [], "rest": [], "x0": [0.0], "v0": [0.0]}}
    with pytest.raises(ConfigError, match=r"writer_cpus: CPUs \[4096\] are not on this machine"):
        validate(cfg)
    cfg["services"]["logger"]["writer_cpus"] = [-1]
    with pytest.raises(ConfigError, match=r"writer_cpus: expected a list of CPU numbers"):
        validate(cfg)


def test_a_failing_writer_is_reported_once_by_the_next_message_or_by_close():
    lg = McapLogger("/dev/full")  # every write fails: no space left on the device
    lg.on_message("toy/state0", toy_messages(1)[0])
    end = time.monotonic() + 5
    while lg._error is None and time.monotonic() < end:
        time.sleep(0.01)
    with pytest.raises(LogError, match="'/dev/full': writer failed: OSError.*No space left"):
        lg.on_message("toy/state0", toy_messages(1)[0])
    lg.close()  # raised once already (before: again, a second traceback in the run's output)
    other = McapLogger("/dev/full")
    other.on_message("toy/state0", toy_messages(1)[0])
    with pytest.raises(LogError, match="'/dev/full': writer failed"):  # not raised yet: close raises it
        other.close()
    with pytest.raises(ProcessLookupError):  # the writer process is reaped, not left behind
        os.kill(lg._pid, 0)


# ---------------------------------------------------------------- end to end
@pytest.mark.integration
def test_1khz_run_logs_every_message_and_the_bytes_sent(tmp_path):
    # a third participant sends known bytes: a replay of a log written here directly
    src = tmp_path / "inject.mcap"
    sent = [encode("toy/state7", {"x": float(i), "v": 1.0}, sender="inj", seq=i, t_ns=i * 100_000, h_ns=100_000)
            for i in range(3000)]
    lg = McapLogger(src)
    for p in sent:
        lg.on_message("toy/state7", p)
    lg.close()
    inj = f'[services.inj]\nkind = "replay"\nrate_hz = 1000\nlog = "{src}"\n'
    log = record_toy_run(tmp_path, duration=1.0, toy="", logger="", sim="", extra=inj)
    with open_log(log) as lf:
        # a's spring flow is coupled at its one consumer's period (b, 10 ms): one mean per interval
        assert lf.topics["toy/state0"] == 1001 and lf.topics["toy/spring0"] == 100 and lf.topics["toy/state1"] == 101
        for topic in ("toy/state0", "toy/spring0", "toy/state1", "toy/state7"):
            seqs = [m.seq for m in lf.messages([topic])]
            assert seqs == list(range(len(seqs))), topic  # every seq present, in order
        logged = [m.payload for m in lf.messages(["toy/state7"])]
        meta = lf.metadata()["berthsim.close"]
        atts = lf.attachments()
    assert logged == sent  # the logged bytes are the bytes sent
    assert meta["lost"] == "0" and meta["invalid"] == "0"
    # provenance from launch.py (through sim.command_line and sim.config_file), not read by the logger itself
    cfg = tmp_path / "c.toml"
    assert atts["command_line.txt"].decode() == f"{LAUNCH} run {cfg} --log {log}"
    assert atts["config.toml"] == cfg.read_bytes()


def _complete_chunks(log: Path) -> tuple[int, int]:
    """Chunks and messages in them readable (CRC checked) with mcap's own stream reader, up to a torn tail."""
    chunks, in_chunks = 0, 0
    with log.open("rb") as f:
        try:
            for rec in StreamReader(f, emit_chunks=True).records:
                if isinstance(rec, Chunk):
                    in_chunks += sum(1 for r in breakup_chunk(rec, validate_crc=True) if type(r).__name__ == "Message")
                    chunks += 1
        except Exception:  # noqa: BLE001 - the torn tail
            pass
    return chunks, in_chunks


def _gone(pid: int, timeout: float) -> bool:
    """Whether process ``pid`` has exited (and been reaped) within ``timeout`` s."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.02)
    return False


@pytest.mark.integration
def test_sigkill_of_the_logger_leaves_a_finished_file_and_no_orphan(tmp_path):
    log = tmp_path / "run.mcap"
    cfg = toy_config(tmp_path, duration=4.0, sim="speed = 1.0", logger="chunk_size = 4096\nflush_interval = 0.1")
    proc = subprocess.Popen([sys.executable, str(LAUNCH), "run", str(cfg), "--log", str(log)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        end = time.monotonic() + 30
        while time.monotonic() < end and not (log.exists() and log.stat().st_size > 60_000):
            time.sleep(0.05)
        out = subprocess.run(["ps", "-ww", "-eo", "pid=,ppid=,args="], capture_output=True, text=True).stdout
        procs = {int(line.split()[0]): int(line.split()[1]) for line in out.splitlines()
                 if "_worker" in line and str(cfg) in line and " logger " in line}
        logger = [p for p, pp in procs.items() if pp not in procs]  # the writer process is the logger's child
        writer = [p for p, pp in procs.items() if pp in procs]
        assert len(logger) == 1 and len(writer) == 1, out
        os.kill(logger[0], signal.SIGKILL)
        _, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    assert proc.returncode == 1 and "logger" in err and "SIGKILL" in err
    assert _gone(writer[0], 10), "the writer process outlived its logger"
    # the writer process finished the file with what it had been handed: a valid log, every seq up to the end
    with open_log(log) as lf:
        meta = lf.metadata()["berthsim.close"]
        assert "aborted" in meta and meta["lost"] == "0" and int(meta["received"]) == int(meta["written"]) > 1000
        n = lf.message_count
        for topic in ("toy/state0", "toy/state1"):
            seqs = [m.seq for m in lf.messages([topic])]
            assert seqs == list(range(len(seqs))) and len(seqs) > 10, topic
    with log.open("rb") as f:  # a valid file for the mcap package too
        assert make_reader(f).get_summary().statistics.message_count == n > 1000


def test_sigkill_of_the_writer_leaves_complete_chunks_readable_and_recover_rebuilds(tmp_path):
    log = tmp_path / "run.mcap"
    lg = McapLogger(log, chunk_size=4096, flush_interval=0.05)
    msgs = toy_messages(20_000)
    end = time.monotonic() + 30
    i = 0
    while time.monotonic() < end and not (log.exists() and log.stat().st_size > 60_000):
        for p in msgs[i:i + 100]:
            lg.on_message("toy/state0", p)
        i += 100
        time.sleep(0.01)
    os.kill(lg._pid, signal.SIGKILL)  # logger and writer killed together: the writer's file is what is left
    with pytest.raises(LogError, match="writer failed"):
        lg.close()
    with pytest.raises(LogError, match="truncated"):
        open_log(log)
    chunks, in_chunks = _complete_chunks(log)
    assert chunks >= 5 and in_chunks > 1000
    res = launch("recover", str(log))
    assert res.returncode == 0, res.stderr
    info = json.loads(res.stdout.strip().splitlines()[-1])
    assert info["messages"] == in_chunks and info["chunks"] == chunks and not info["was_complete"]
    with open_log(log) as lf:
        assert lf.message_count == in_chunks
        assert [m.payload for m in lf.messages()] == msgs[:in_chunks]  # every message of the complete chunks
    with log.open("rb") as f:  # a valid file for the mcap package too
        assert make_reader(f).get_summary().statistics.message_count == in_chunks


def test_recover_of_a_finished_log_keeps_everything(tmp_path, big_log):
    out = tmp_path / "copy.mcap"
    r = recover(big_log[0], out)
    assert r.complete and r.messages == 100_000 and r.dropped_bytes > 0  # the old summary is rebuilt, not copied
    with open_log(out) as a, open_log(big_log[0]) as b:
        assert a.topics == b.topics and a.metadata()["berthsim.recover"]["messages"] == "100000"
    with pytest.raises(LogError, match="not an MCAP"):
        recover(Path(__file__))


# ---------------------------------------------------------------- one logger per file
def test_a_second_logger_on_one_file_is_refused_and_the_first_log_stays_whole(tmp_path):
    path = tmp_path / "run.mcap"
    first = McapLogger(path)
    try:
        for overwrite in (True, False):
            with pytest.raises(LogError, match="another process is writing it|exists"):
                McapLogger(path, overwrite=overwrite)
        for p in toy_messages(50):
            first.on_message("toy/state0", p)
    finally:
        first.close()
    with open_log(path) as log:  # before: the second writer truncated and interleaved it ("corrupt MCAP")
        assert [m.seq for m in log.messages(["toy/state0"])] == list(range(50))
    with pytest.raises(LogError, match="exists"):
        McapLogger(path, overwrite=False)
    McapLogger(path).close()  # overwriting a file no one writes is fine


def test_validate_refuses_log_paths_before_anything_starts(tmp_path):
    from services.logger import validate

    def problems(sim: dict, **services: dict) -> list[str]:
        svcs = {"logger": {"kind": "logger", "rate_hz": 1000}, **services}
        config = {"sim": sim, "services": svcs}
        return [p for name in svcs for p in validate(config, name)]

    assert problems({"log": str(tmp_path)}) == [f"services.logger.path: log {str(tmp_path)!r} is a directory"]
    existing = tmp_path / "old.mcap"
    existing.write_bytes(b"")
    assert problems({"log": str(existing)}) == [f"services.logger.path: log {str(existing)!r} exists "
                                                "(launch.py run --overwrite replaces it)"]
    assert problems({"log": str(existing), "overwrite": True}) == []
    assert problems({"log": "/proc/nowhere/x.mcap"})[0].endswith("does not exist")
    assert problems({"log": "/proc/x.mcap"}) == ["services.logger.path: log '/proc/x.mcap' cannot be written: "
                                                 "No such file or directory"]
    two = problems({"log": str(tmp_path / "a.mcap")}, other={"kind": "logger", "rate_hz": 1000})
    assert two == [f"services.other.path: log {str(tmp_path / 'a.mcap')!r} is also written by services.logger "
                   "(one logger per file)"]
    lg = McapLogger(existing)
    try:
        assert problems({"log": str(existing), "overwrite": True}) == [
            f"services.logger.path: log {str(existing)!r} is being written by another run"]
    finally:
        lg.close()
    assert list(tmp_path.glob(".*probe")) == []  # the writability probe leaves nothing behind
