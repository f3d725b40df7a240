"""The logger: every bus message into one MCAP file, reading logs back, and ``recover`` (DESIGN §6).

Recording
---------
The logger is a *sink* (:mod:`protocol.shell`): once running, the shell hands it each
drain of the bus as one list of whole frames (:meth:`McapLogger.on_frames`;
:meth:`McapLogger.on_message` takes one message), which it only queues. Two processes
share the rest, so that writing neither sits on a service's critical path nor
competes for the receiving process's interpreter lock:

- in the logger's process, a hand-over thread wakes every ``_BATCH_S`` (20 ms), splits
  the queued frames into topic and body, reads every header of the batch at once
  (:func:`protocol.codec.envelopes`), counts invalid messages and sequence gaps, and
  sends the valid ones (topic indices, ``t_ns``, ``wall_ns``, ``seq``, bodies) as one
  msgpack batch down a pipe, grown to hold a batch (``_widen``);
- a *writer process*, forked when the logger is made, owns the file and mcap's public
  :class:`mcap.writer.Writer` (chunks of ``CHUNK_SIZE``, mcap's default) and only
  calls ``add_message`` (through ``map``: no Python loop of ours per message). At
  close it writes the ``berthsim.close`` metadata the logger sends and the summary,
  answers with its count, and exits.

mcap's ``add_message`` is pure Python: 6-10 µs per message on the 2-core reference
machine, so the writer process needs most of a core at 100,000 msg/s
(``bench/bench_logger.py``: ``mcap_writer_floor``, ``record_bus_paced``).

File layout (MCAP, ``mcap`` package):

- one *schema* per message type, named as in :mod:`protocol.messages`
  (``"berthsim.OrbiterState"``), encoding ``"jsonschema"``: a JSON Schema of the
  msgpack envelope array ``[version, sender, seq, t_ns, h_ns, wall_ns, fields]``
  with every field's type and shape (ids start at 1);
- one *channel* per topic, ``message_encoding="msgpack"``, channel metadata
  ``schema_version`` and ``kind``;
- one *message* per bus message: ``data`` is the msgpack **body**, byte for byte as on
  the wire (the frame without its ``topic\\0`` prefix; the topic is the channel's),
  ``log_time`` = ``t_ns`` (simulation time), ``publish_time`` = ``wall_ns`` (the
  sender's wall clock), ``sequence`` = ``seq`` (uint32 in MCAP: the low 32 bits);
- attachments ``config.json`` (the run's configuration, canonical JSON; replay
  ``--resim`` reads it), ``config.toml`` (the config file as written, when the logger
  can find it) and ``command_line.txt``;
- metadata ``berthsim.run`` at the start (package versions, git commit, seed, host
  names, mode, start wall time) and ``berthsim.close`` at the end: messages received
  and written, invalid ones, the lost messages (sequence gaps) per topic, and the wall
  clock of the first data message received (not ``sim/control``) and of the close
  (``first_wall_ns``, ``end_wall_ns``).

Messages whose envelope is invalid or whose topic has no schema are counted
(``invalid`` in ``berthsim.close``) and not written; the fields are checked to be
well-formed msgpack, not decoded (see :func:`protocol.codec.envelopes`). A negative
``t_ns`` cannot be an MCAP ``log_time`` (unsigned): it is written with ``log_time`` 0
and counted.

Crash safety
------------
zstd chunks of at most ``chunk_size`` bytes, closed also every ``flush_interval`` s
of wall time, each flushed to the OS as soon as it is written, with message indexes.
A logger killed with SIGKILL: its writer process sees the pipe's end-of-file (or
that it was re-parented), writes every message it had been handed, a
``berthsim.close`` metadata record with ``aborted`` (and the logger's counts as of its
last batch: each batch carries them) and the summary, and exits: a
valid file, short of the messages not yet handed over (at most ``_BATCH_S`` of
them), and no orphan. Both killed (or the writer alone): every complete chunk is
readable, and :func:`recover` (``launch.py recover LOG``) rebuilds a valid file with
its summary.

Reading
-------
:func:`open_log` checks a file and returns a :class:`LogFile`: topics, time range,
attachments, metadata, and :meth:`LogFile.messages` by topic and time window in
``log_time`` order (indexed: a seek reads only the chunks it needs) — the same
messages in the same order as mcap's ``iter_messages(log_time_order=True)``.
:meth:`LogFile.blocks` gives them as arrays a chunk at a time (replay), and
:func:`read_topics` as per-topic, per-field numpy arrays in one pass (report, export,
figures). Summary, chunk records and decompression are mcap's; the messages of a
chunk are located through its MessageIndex records and their headers read as one
numpy gather, because mcap's per-record reader is 3-6x slower per message (measured
in ``bench/bench_logger.py``, ``read``). A missing, truncated or non-MCAP file raises
:class:`errors.LogError` with a one-line message naming the file.

Service configuration::

    [sim]
    log = "run.mcap"               # launch.py run --log PATH; default berthsim-YYYYmmdd-HHMMSS.mcap
    [services.logger]
    kind = "logger"
    rate_hz = 1000                 # required by the runtime; a sink never steps
    path = "other.mcap"            # optional, overrides sim.log
    topics = ["orbiter/state"]     # optional, default every topic
    chunk_size = 1048576           # optional, bytes of uncompressed chunk (mcap's default)
    schemas_from = "old.mcap"      # optional: register the schemas of this log's topics (replay runs)
    flush_interval = 1.0           # optional, s of wall time between chunk closes
    writer_cpus = [1]              # optional: the writer process runs on these CPUs only (default: any)
"""

from __future__ import annotations

import ctypes
import fcntl
import io
import json
import os
import platform
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from itertools import repeat
from importlib import metadata as importlib_metadata
from multiprocessing.connection import Connection, Pipe
from pathlib import Path
from typing import Any, NamedTuple

import msgpack
import numpy as np
import zstandard
from mcap.data_stream import ReadDataStream
from mcap.exceptions import McapError
from mcap.opcode import Opcode
from mcap.reader import make_reader
from mcap.records import (
    Attachment,
    Channel,
    Chunk,
    DataEnd,
    Footer,
    Message,
    Metadata,
    Schema,
)
from mcap.stream_reader import StreamReader, breakup_chunk, get_chunk_data_stream
from mcap.writer import CompressionType, Writer
from numpy.typing import NDArray

from errors import ConfigError, LogError, MessageError
from protocol.bus import SequenceTracker
from protocol.codec import envelopes
from protocol.messages import CONTROL_PREFIX, SCHEMAS, SEPARATOR, TopicSchema, register_schema, schema_for

__all__ = [
    "CHUNK_SIZE",
    "MAGIC",
    "OPTIONS",
    "TABLES",
    "LogBlock",
    "LogFile",
    "LogMessage",
    "McapLogger",
    "RecoverResult",
    "build",
    "json_schema",
    "open_log",
    "read_topics",
    "recover",
    "schema_from_json",
    "validate",
]

MAGIC = b"\x89MCAP0\r\n"
"""The 8 bytes an MCAP file starts and ends with."""

TABLES: tuple[str, ...] = ()
OPTIONS: dict[str, Any] = {"path": str, "topics": list, "chunk_size": int, "flush_interval": (int, float),
                           "schemas_from": str, "writer_cpus": list}

CHUNK_SIZE = 1 << 20
"""Default uncompressed chunk size (mcap's own default): few enough chunks that reading
costs little per chunk; a chunk also closes every ``flush_interval`` s. [bytes]"""

_PACKAGES = ("berthsim", "numpy", "scipy", "pyzmq", "msgpack", "mcap", "zstandard", "pyserial", "matplotlib")
_U64 = (1 << 64) - 1


# ---------------------------------------------------------------- schemas
def _field_schema(ftype: str, shape: tuple[int, ...]) -> dict[str, Any]:
    if ftype == "f8" and shape == ():
        return {"type": "number"}
    if ftype == "f8":
        return {"type": "string", "contentEncoding": "binary", "contentMediaType": "application/x-float64le",
                "description": f"float64 little-endian, C order, shape {list(shape)}", "x-shape": list(shape)}
    if ftype == "int":
        return {"type": "integer"}
    if ftype == "bool":
        return {"type": "boolean"}
    if ftype == "str":
        return {"type": "string"}
    if ftype == "list[str]":
        return {"type": "array", "items": {"type": "string"}}
    if ftype == "map":
        return {"type": "object", "additionalProperties": {"type": ["integer", "number", "string", "boolean"]}}
    return {"type": "array", "items": {"type": "object", "properties": {"kind": {"type": "string"}},
                                       "required": ["kind"]}}


def json_schema(schema: TopicSchema) -> bytes:
    """JSON Schema (draft 2020-12) of one topic's msgpack envelope, as written into MCAP.

    Parameters
    ----------
    schema : TopicSchema
        From :data:`protocol.messages.SCHEMAS`.

    Returns
    -------
    bytes
        UTF-8 JSON: an array ``[version, sender, seq, t_ns, h_ns, wall_ns, fields]``
        (``prefixItems``); ``fields`` an object with every schema field required.
    """
    props = {name: {**_field_schema(ftype, shape), "x-berthsim-type": ftype, "x-shape": list(shape)}
             for name, (ftype, shape) in schema.fields.items()}
    doc = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": schema.name,
        "description": f"berthsim message envelope (msgpack), schema version {schema.version}, kind {schema.kind}",
        "type": "array",
        "prefixItems": [
            {"title": "version", "const": schema.version},
            {"title": "sender", "type": "string"},
            {"title": "seq", "type": "integer"},
            {"title": "t_ns", "type": "integer", "description": "simulation time [ns]"},
            {"title": "h_ns", "type": "integer", "description": "producer period [ns]"},
            {"title": "wall_ns", "type": "integer", "description": "wall-clock send time [ns]"},
            {"title": "fields", "type": "object", "properties": props, "required": list(props),
             "additionalProperties": False},
        ],
        "minItems": 7,
        "maxItems": 7,
        "x-berthsim-kind": schema.kind,
    }
    return json.dumps(doc, separators=(",", ":")).encode()


def schema_from_json(data: bytes) -> TopicSchema:
    """The :class:`TopicSchema` a :func:`json_schema` document describes (logs are self-describing).

    Raises
    ------
    LogError
        If the document is not one :func:`json_schema` wrote.
    """
    try:
        doc = json.loads(data)
        items = doc["prefixItems"]
        props = items[6]["properties"]
        fields = {k: (v["x-berthsim-type"], tuple(v["x-shape"])) for k, v in props.items()}
        return TopicSchema(doc["title"], int(items[0]["const"]), doc["x-berthsim-kind"], fields)
    except (ValueError, KeyError, IndexError, TypeError, MessageError) as err:
        raise LogError(f"schema: not a berthsim JSON schema ({type(err).__name__}: {err})") from err


# ---------------------------------------------------------------- provenance
def _versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for pkg in _PACKAGES:
        try:
            out[pkg] = importlib_metadata.version(pkg)
        except importlib_metadata.PackageNotFoundError:
            out[pkg] = "not installed"
    return out


def _git_commit() -> str:
    root = Path(__file__).resolve().parents[1]
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=5)
        if head.returncode != 0:
            return "unknown"
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=5)
        return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _run_metadata(config: Mapping[str, Any] | None) -> dict[str, str]:
    sim = dict((config or {}).get("sim", {}) or {})
    services = (config or {}).get("services", {}) or {}
    hosts = sorted({str(s.get("host")) for s in services.values() if isinstance(s, dict) and s.get("host")})
    meta = {f"version.{k}": v for k, v in _versions().items()}
    meta.update({
        "git_commit": _git_commit(),
        "seed": str(sim.get("seed", 0)),
        "mode": str(sim.get("mode", "lockstep")),
        "logger_host": socket.gethostname(),
        "hosts": ",".join(hosts),
        "services": ",".join(f"{n}:{s.get('kind')}@{s.get('rate_hz')}Hz" for n, s in services.items()
                             if isinstance(s, dict)),
        "start_wall_ns": str(time.time_ns()),
    })
    return meta


# ---------------------------------------------------------------- writer
_BATCH_S = 0.02
"""How long the receiving process collects messages before it hands them over: short enough that
the writer process always has the next batch in the pipe (at 0.1 s it waited 1.2-1.8 s of a 10 s run
at 100,000 msg/s, at 20 ms 0.2-0.6 s). [s]"""
_PIPE_BYTES = 4 << 20
"""Pipe capacity the logger asks for (Linux grants at most ``/proc/sys/fs/pipe-max-size``, 1 MiB by default). [bytes]"""
_PIPE_DEFAULT = 1 << 16
_BATCH_MAX = 4096
"""Messages per hand-over to the writer process, at most (one pipe write each)."""
_OP_BATCH, _OP_CLOSE = 0, 1
_PARENT_ENDS: set[Connection] = set()
"""The parent-side pipe ends of every open logger of this process: a new writer process
closes its copies, so that each writer sees end-of-file when its own logger dies."""


class McapLogger:
    """The recording sink: every message it is handed goes into one MCAP file.

    Parameters
    ----------
    path : str or Path
        The MCAP file to write (created or overwritten; its directory must exist).
    name : str
        Service name (the sink's control identity).
    topics : iterable of str
        Topics to record; empty = every topic.
    config : Mapping, optional
        The run configuration: attached as ``config.json``; seed, mode and hosts go
        into the ``berthsim.run`` metadata.
    config_text : str, optional
        The config file as written, attached as ``config.toml``.
    command_line : str, optional
        Attached as ``command_line.txt``.
    chunk_size : int
        Uncompressed chunk size that closes a chunk. [bytes]
    flush_interval : float
        Wall time after which a non-empty chunk is closed anyway (0: size only). [s]
    writer_cpus : iterable of int
        CPUs the writer process is pinned to (``os.sched_setaffinity``); empty: any.
        A writer with a core of its own is not preempted by the publishers: at 100,000
        msg/s on 2 cores it waited for a CPU 0.6 % of the time, against 12 % unpinned
        (``bench/bench_logger.py``, ``record_bus_paced_pinned``).

    Raises
    ------
    LogError
        If the file cannot be created, ``writer_cpus`` names a CPU this machine does
        not have, or the writer process cannot be started (the message names the file).

    Notes
    -----
    Two processes (see the module docstring, *Recording*): :meth:`on_frames` and
    :meth:`on_message` only append to a queue; a thread of this process reads the
    envelope headers of everything queued at once (:func:`protocol.codec.envelopes`),
    counts sequence gaps and invalid messages, and every ``_BATCH_S`` hands the valid
    ones over to a forked *writer process* through a pipe; the writer process owns the
    ``mcap`` :class:`~mcap.writer.Writer` and the file. :meth:`close` hands over the rest and the ``berthsim.close`` metadata and
    waits for the writer process to finish the file. Counters (``received``,
    ``written``, ``invalid``, ``lost``, ``negative_t``) are final after ``close``;
    ``writer_cpu_s`` is then the writer process's CPU time (user + system). [s]
    """

    def __init__(self, path: str | os.PathLike[str], *, name: str = "logger", topics: Iterable[str] = (),
                 config: Mapping[str, Any] | None = None, config_text: str | None = None,
                 command_line: str | None = None, chunk_size: int = CHUNK_SIZE, flush_interval: float = 1.0,
                 writer_cpus: Iterable[int] = ()) -> None:
        cpus = set(writer_cpus)
        if not cpus <= _cpus():
            raise LogError(f"log {str(path)!r}: writer_cpus: CPUs {sorted(cpus - _cpus())} are not on this "
                           f"machine (it has {sorted(_cpus())})")
        self.name = name
        self.topics: tuple[str, ...] = tuple(topics)
        self.path = Path(path)
        self.received = 0
        self.written = 0
        self.invalid: dict[str, int] = {}
        self.negative_t = 0
        self.lost: dict[str, int] = {}
        self.writer_cpu_s = 0.0
        self._first_wall_ns = 0  # wall clock of the first data message (not sim/control) handed over (0: none) [ns]
        self._tracker = SequenceTracker()
        self._topics: list[str] = []  # topic index -> topic (known topics: they have a schema)
        self._tid_of: dict[bytes, int] = {}  # frame prefix (the topic's bytes) -> topic index
        self._channels: set[int] = set()  # topic indices whose channel the writer process has
        self._new_channels: list[list[Any]] = []
        try:
            file = open(self.path, "wb")  # noqa: SIM115 - the writer process owns it
        except OSError as err:
            raise LogError(f"log {str(self.path)!r}: cannot create: {err.strerror or err}") from err
        attachments = []
        if config is not None:
            attachments.append(["config.json", "application/json",
                                json.dumps(config, sort_keys=True, default=str).encode()])
        if config_text is not None:
            attachments.append(["config.toml", "application/toml", config_text.encode()])
        if command_line is not None:
            attachments.append(["command_line.txt", "text/plain", command_line.encode()])
        head = (attachments, _run_metadata(config))
        data_in, data_out = Pipe(duplex=False)
        self._pipe_bytes = _widen(data_out)
        status_in, status_out = Pipe(duplex=False)
        try:
            pid = os.fork()
        except OSError as err:
            for end in (file, data_in, data_out, status_in, status_out):
                end.close()
            raise LogError(f"log {str(self.path)!r}: cannot start the writer process: {err}") from err
        if pid == 0:  # the writer process: never returns into the caller's code
            code = 1
            try:
                for sig in (signal.SIGINT, signal.SIGTERM):  # it stops on close or when the logger dies
                    signal.signal(sig, signal.SIG_IGN)
                _name_thread(b"logwriter")
                if cpus:
                    try:
                        os.sched_setaffinity(0, cpus)
                    except OSError as err:  # a cpuset that excludes them: the logger learns why
                        status_out.send_bytes(msgpack.packb(["error", f"writer_cpus {sorted(cpus)}: {err}"]))
                        raise
                for end in (*_PARENT_ENDS, data_out, status_in):
                    end.close()
                code = _write_process(file, data_in, status_out, os.getppid(), chunk_size,
                                      int(flush_interval * 1e9), *head)
            finally:
                os._exit(code)
        file.close()  # nothing was written through it here
        data_in.close()
        status_out.close()
        self._pid = pid
        self._out, self._status = data_out, status_in
        _PARENT_ENDS.update((data_out, status_in))
        self._pending: deque[list[bytes]] = deque()
        self._append = self._pending.append
        self._error: str | None = None
        self._closed = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._hand_over_loop, name=f"{name}-handover", daemon=True)
        self._thread.start()

    # ---------------------------------------------------------------- sink
    def on_message(self, topic: str, payload: bytes) -> None:
        """Queue one message (``payload``: the msgpack body as on the wire); never blocks.

        Raises
        ------
        LogError
            Once the writer process has failed (disk full, ...): the run learns it now,
            not at the end.
        """
        self.on_frames([topic.encode() + SEPARATOR + payload])

    def on_frames(self, frames: list[bytes]) -> None:
        """Queue whole frames (``topic\\0body`` each, as on the wire: one drain of the bus); never blocks.

        The list is kept as it is (not copied): the caller must not change it afterwards.

        Raises
        ------
        LogError
            As :meth:`on_message`.
        """
        if self._error is not None:
            raise LogError(f"log {str(self.path)!r}: writer failed: {self._error}")
        if not self._first_wall_ns and not all(f.startswith(CONTROL_PREFIX) for f in frames):
            self._first_wall_ns = time.time_ns()  # the first data message (the handshake's probes are not)
        self._append(frames)

    # ---------------------------------------------------------------- hand-over thread
    def _hand_over_loop(self) -> None:
        """Every ``_BATCH_S``: everything queued to the writer process; notice its failure."""
        pending, popleft, stop, status = self._pending, self._pending.popleft, self._stop, self._status
        try:
            while True:
                stopping = stop.wait(_BATCH_S)
                frames: list[bytes] = []
                while pending:
                    frames += popleft()
                for i, j in _batches(frames, self._pipe_bytes // 2):
                    self._hand_over(frames[i:j])
                if status.poll():  # the writer process speaks unasked only when it fails
                    self._error = self._writer_reply()[1]
                    return
                if stopping:
                    return
        except BaseException as err:  # noqa: BLE001 - reported by on_message and close()
            self._error = self._failure(err)

    def _failure(self, err: BaseException) -> str:
        """Why handing over failed: the writer process's reason if it left one (a broken pipe says little)."""
        try:
            if self._status.poll():
                return str(self._writer_reply()[1])
        except OSError:
            pass
        return f"{type(err).__name__}: {err}"

    def _hand_over(self, frames: list[bytes]) -> None:
        """Check and count one batch of frames; the valid messages to the writer process (one pipe write).

        Headers are read for the whole batch at once (:func:`protocol.codec.envelopes`),
        and sequence gaps counted per (sender, topic) in arrival order, as
        :meth:`protocol.bus.SequenceTracker.see` would one by one.
        """
        n = len(frames)
        seps = list(map(bytes.find, frames, repeat(SEPARATOR, n)))
        tid_of = self._tid_of
        tids = [tid_of.get(f[:i], -1) for f, i in zip(frames, seps)]
        if -1 in seps:  # no separator: no topic (and f[:-1] is not one)
            tids = [t if i >= 0 else -1 for t, i in zip(tids, seps)]
        if -1 in tids:  # a new topic, or garbage
            for k in [k for k, t in enumerate(tids) if t < 0]:
                tids[k] = self._topic_index(frames[k], seps[k])
            keep = [k for k, t in enumerate(tids) if t >= 0]
            frames, seps, tids = [frames[k] for k in keep], [seps[k] for k in keep], [tids[k] for k in keep]
        bodies = [f[i + 1:] for f, i in zip(frames, seps)]
        env = envelopes(self._topics, tids, bodies)
        tid = np.asarray(tids, np.int64).reshape(len(tids))
        ok = env.ok
        if not ok.all():
            for k, count in zip(*np.unique(tid[~ok], return_counts=True)):
                topic = self._topics[k]
                self.invalid[topic] = self.invalid.get(topic, 0) + int(count)
            rows = np.flatnonzero(ok)
            bodies = [bodies[i] for i in rows.tolist()]
        else:
            rows = slice(None)
        tid = tid[rows]
        t_ns, wall_ns, seq = env.t_ns[rows], env.wall_ns[rows], env.seq[rows]
        negative = t_ns < 0
        if negative.any():
            self.negative_t += int(negative.sum())
            t_ns[negative] = 0
        self._count_gaps(env.sender[rows] * len(self._topics) + tid, seq, env.senders)
        for k in set(np.unique(tid).tolist()) - self._channels:
            self._channel(k)
        self.received += n
        self.written += len(bodies)
        self._out.send_bytes(msgpack.packb([
            _OP_BATCH, self._new_channels, tid.astype(np.int32).tobytes(), t_ns.tobytes(),
            np.maximum(wall_ns, 0).tobytes(), (seq & 0xFFFFFFFF).tobytes(), bodies,
            self.close_metadata()]))  # the counts so far, should this process die
        self._new_channels = []

    def _topic_index(self, frame: bytes, sep: int) -> int:
        """The index of a frame's topic (new ones get the next); -1 (counted invalid) without a topic or schema."""
        known = self._tid_of.get(frame[:sep]) if sep > 0 else None
        if known is not None:
            return known
        topic = frame[:sep].decode(errors="replace") if sep > 0 else ""
        try:
            schema_for(topic)
        except MessageError:  # no schema: not recorded (garbage must not grow the tables)
            self.invalid[topic] = self.invalid.get(topic, 0) + 1
            return -1
        tid = self._tid_of[frame[:sep]] = len(self._topics)
        self._topics.append(topic)
        return tid

    def _count_gaps(self, key: NDArray[np.int64], seq: NDArray[np.int64], senders: list[str]) -> None:
        """Sequence gaps of one batch: ``key`` = sender index * topics + topic index, rows in arrival order."""
        if not len(key):
            return
        order = np.argsort(key, kind="stable")
        key, seq = key[order], seq[order]
        first = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
        last = np.r_[first[1:], len(key)] - 1
        prev = np.r_[0, seq[:-1]]
        known = np.ones(len(key), bool)
        ntopics, seen = len(self._topics), self._tracker.last
        names = [(senders[k // ntopics], self._topics[k % ntopics]) for k in key[first].tolist()]
        for i, name in zip(first.tolist(), names):
            before = seen.get(name)
            known[i] = before is not None
            prev[i] = before if before is not None else 0
        missed = np.where(known, np.maximum(seq - prev - 1, 0), 0)
        for name, s in zip(names, seq[last].tolist()):
            seen[name] = s
        if missed.any():
            self._tracker.dropped += int(missed.sum())
            per_topic = np.bincount(key % ntopics, weights=missed, minlength=ntopics)
            for k in np.flatnonzero(per_topic):
                topic = self._topics[k]
                self.lost[topic] = self.lost.get(topic, 0) + int(per_topic[k])

    def _channel(self, tid: int) -> None:
        """A topic's channel (and schema) go to the writer process with the next batch."""
        topic = self._topics[tid]
        schema = schema_for(topic)
        self._channels.add(tid)
        self._new_channels.append([tid, topic, schema.name, json_schema(schema), str(schema.version), schema.kind])

    def _writer_reply(self) -> list[Any]:
        """The writer process's next word: ``["ok", written]`` or ``["error", reason]``."""
        try:
            reply = msgpack.unpackb(self._status.recv_bytes())
        except (EOFError, OSError):
            return ["error", "the writer process exited without a word"]
        return list(reply)

    # ---------------------------------------------------------------- close
    def close(self) -> None:
        """Hand over everything queued and the ``berthsim.close`` metadata; wait for the file; idempotent.

        Raises
        ------
        LogError
            If the writer process failed (the message names the file and the cause).
        """
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        self._thread.join()
        try:
            if self._error is None:
                self._out.send_bytes(msgpack.packb([_OP_CLOSE, self.close_metadata()]))
                kind, what = self._writer_reply()
                if kind != "ok":
                    self._error = what
                elif what != self.written:
                    self._error = f"wrote {what} messages of {self.written} handed over"
        except OSError as err:  # the writer process is gone: its reason, if it left one
            self._error = self._error or self._failure(err)
        finally:
            for end in (self._out, self._status):
                _PARENT_ENDS.discard(end)
                end.close()  # a writer process still running sees end-of-file and finishes the file
            _, _, usage = os.wait4(self._pid, 0)
            self.writer_cpu_s = usage.ru_utime + usage.ru_stime
        if self._error is not None:
            raise LogError(f"log {str(self.path)!r}: writer failed: {self._error}")

    def close_metadata(self) -> dict[str, str]:
        """The ``berthsim.close`` metadata: counts, and lost messages (sequence gaps) per topic."""
        meta = {"first_wall_ns": str(self._first_wall_ns), "end_wall_ns": str(time.time_ns()),
                "received": str(self.received), "written": str(self.written),
                "invalid": str(sum(self.invalid.values())), "lost": str(sum(self.lost.values())),
                "negative_t_ns": str(self.negative_t)}
        meta.update({f"lost.{t}": str(n) for t, n in sorted(self.lost.items())})
        meta.update({f"invalid.{t or '<none>'}": str(n) for t, n in sorted(self.invalid.items())})
        return meta


def _batches(frames: list[bytes], max_bytes: int) -> Iterator[tuple[int, int]]:
    """``(i, j)`` slices of ``frames`` of at most ``_BATCH_MAX`` frames and about ``max_bytes`` (at least one frame)."""
    n = len(frames)
    total = np.cumsum(np.fromiter(map(len, frames), np.int64, n))
    i = 0
    while i < n:
        fit = int(np.searchsorted(total, (total[i - 1] if i else 0) + max_bytes, side="right"))
        j = min(n, i + _BATCH_MAX, max(i + 1, fit))
        yield i, j
        i = j


def _cpus() -> set[int]:
    """The CPU numbers of this machine."""
    return set(range(os.cpu_count() or 1))


def _widen(end: Connection) -> int:
    """Grow a pipe towards ``_PIPE_BYTES`` (Linux allows up to ``/proc/sys/fs/pipe-max-size``): a batch
    then goes through in one write instead of a round trip per 64 KiB; the capacity it has. [bytes]"""
    try:
        limit = int(Path("/proc/sys/fs/pipe-max-size").read_text())
    except (OSError, ValueError):
        limit = _PIPE_DEFAULT
    try:
        return int(fcntl.fcntl(end.fileno(), fcntl.F_SETPIPE_SZ, min(limit, _PIPE_BYTES)))
    except (AttributeError, OSError):  # not Linux, or refused: the default
        return _PIPE_DEFAULT


def _name_thread(name: bytes) -> None:
    """Linux: the calling thread's name as ``top``, ``ps -L`` and py-spy show it (PR_SET_NAME)."""
    try:
        ctypes.CDLL(None).prctl(15, ctypes.c_char_p(name[:15]), 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _write_process(file: io.BufferedWriter, data_in: Connection, status_out: Connection, parent: int,
                   chunk_size: int, flush_ns: int, attachments: list[list[Any]], run_meta: dict[str, str]) -> int:
    """The writer process: batches from the pipe into MCAP with mcap's public ``Writer``; its exit code.

    Ends on the close message (``berthsim.close`` metadata from the logger, summary,
    ``["ok", written]`` back), or when the logger has died (pipe end-of-file, or this
    process re-parented): then it writes every message it was handed, a
    ``berthsim.close`` with ``aborted`` and the counts the last batch carried, and the
    summary. On any error it sends
    ``["error", reason]`` and stops writing (complete chunks stay readable).
    """
    written = 0
    try:
        w = Writer(file, chunk_size=chunk_size, compression=CompressionType.ZSTD)
        w.start(profile="", library="berthsim")
        for name, media_type, data in attachments:
            w.add_attachment(time.time_ns(), 0, name, media_type, data)
        w.add_metadata("berthsim.run", run_meta)
        file.flush()
        add, consume = w.add_message, deque(maxlen=0).extend
        channels: list[int] = []  # topic index -> channel id (0: none yet)
        schemas: dict[str, int] = {}
        next_close = time.monotonic_ns() + flush_ns
        counts: dict[str, str] = {}  # the logger's berthsim.close metadata as of the last batch
        while True:
            msg: Any = ()
            if data_in.poll(0.1):
                try:
                    msg = msgpack.unpackb(data_in.recv_bytes(), use_list=False)
                except EOFError:
                    msg = None
            elif os.getppid() != parent:
                msg = None
            if msg is None or (msg and msg[0] == _OP_CLOSE):
                meta = dict(msg[1]) if msg else {
                    **counts, "end_wall_ns": str(time.time_ns()), "written": str(written),
                    "aborted": "the logger process died: messages it had not handed over are missing"}
                w.add_metadata("berthsim.close", meta)
                w.finish()
                file.close()
                if msg:
                    status_out.send_bytes(msgpack.packb(["ok", written]))
                return 0
            if msg:
                _, new, tids, times, walls, seqs, bodies, counts = msg
                for tid, topic, schema_name, schema_data, version, kind in new:
                    sid = schemas.get(schema_name)
                    if sid is None:
                        sid = schemas[schema_name] = w.register_schema(schema_name, "jsonschema", schema_data)
                    if tid >= len(channels):
                        channels += [0] * (tid + 1 - len(channels))
                    channels[tid] = w.register_channel(topic, "msgpack", sid, {"schema_version": version,
                                                                               "kind": kind})
                cids = np.asarray(channels, np.int64)[np.frombuffer(tids, np.int32)].tolist()
                consume(map(add, cids, np.frombuffer(times, np.int64).tolist(), bodies,  # add() per message,
                            np.frombuffer(walls, np.int64).tolist(), np.frombuffer(seqs, np.int64).tolist()))  # no loop
                written += len(cids)
            if flush_ns and time.monotonic_ns() >= next_close:
                w.flush()  # closes the chunk in progress and flushes the file
                next_close = time.monotonic_ns() + flush_ns
            elif msg:
                file.flush()
    except BaseException as err:  # noqa: BLE001 - the logger learns it through the status pipe
        try:
            status_out.send_bytes(msgpack.packb(["error", f"{type(err).__name__}: {err}"]))
        except OSError:
            pass
        return 1


# ---------------------------------------------------------------- service module
def _default_log_name() -> str:
    return time.strftime("berthsim-%Y%m%d-%H%M%S.mcap")


def validate(config: dict[str, Any], name: str) -> list[str]:
    """Problems of ``[services.NAME]`` of a logger (path, topics, chunk_size, flush_interval, writer_cpus)."""
    svc = config["services"][name]
    out = []
    topics = svc.get("topics", [])
    if not all(isinstance(t, str) and t for t in topics):
        out.append(f"topics: expected a list of non-empty str, got {topics!r}")
    else:
        unknown = [t for t in topics if t not in SCHEMAS]
        if unknown:
            out.append(f"topics: no schema for {unknown} (known: {sorted(SCHEMAS)})")
    if svc.get("chunk_size", CHUNK_SIZE) < 1024:
        out.append(f"chunk_size: expected >= 1024 bytes, got {svc['chunk_size']!r}")
    if svc.get("flush_interval", 1.0) < 0:
        out.append(f"flush_interval: expected >= 0 s, got {svc['flush_interval']!r}")
    cpus = svc.get("writer_cpus", [])
    if not all(type(c) is int and c >= 0 for c in cpus):
        out.append(f"writer_cpus: expected a list of CPU numbers (int >= 0), got {cpus!r}")
    elif svc.get("host") is None and not set(cpus) <= _cpus():
        out.append(f"writer_cpus: CPUs {sorted(set(cpus) - _cpus())} are not on this machine (it has {sorted(_cpus())})")
    path = Path(svc.get("path") or config.get("sim", {}).get("log") or _default_log_name())
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        out.append(f"path: directory {str(parent)!r} of log {str(path)!r} does not exist")
    return out


def _command_line() -> tuple[str, str | None]:
    """The user's command line (the launcher's, seen from a worker) and the config file path, if known."""
    argv = list(sys.argv)
    if len(argv) > 2 and argv[1] == "_worker":
        config_path = argv[2]
        try:
            raw = Path(f"/proc/{os.getppid()}/cmdline").read_bytes()
            parent = [a.decode(errors="replace") for a in raw.split(b"\0") if a]
            if parent:
                argv = parent
        except OSError:
            pass
        return " ".join(argv), config_path
    if len(argv) > 2 and argv[1] in ("run", "replay"):
        return " ".join(argv), argv[2] if argv[1] == "run" else None
    return " ".join(argv), None


def build(config: dict[str, Any], name: str, period_ns: int) -> McapLogger:
    """The logger sink of service ``name`` (see the module docstring for its keys)."""
    from protocol.config import service_module
    for other in config.get("services", {}).values():  # their modules register their topics' schemas
        kind = other.get("kind") if isinstance(other, dict) else None
        if isinstance(kind, str) and kind not in ("logger", "replay"):
            try:
                service_module(kind)
            except ConfigError:
                pass
    svc = config["services"][name]
    if svc.get("schemas_from"):  # a replay run: the replayed topics' schemas come from the log
        with open_log(svc["schemas_from"]) as log:
            log.register_schemas()
    path = svc.get("path") or config.get("sim", {}).get("log") or _default_log_name()
    cmd, config_path = _command_line()
    text = None
    if config_path:
        try:
            text = Path(config_path).read_text()
        except (OSError, UnicodeDecodeError):
            text = None
    return McapLogger(path, name=name, topics=svc.get("topics", ()), config=config, config_text=text,
                      command_line=cmd, chunk_size=int(svc.get("chunk_size", CHUNK_SIZE)),
                      flush_interval=float(svc.get("flush_interval", 1.0)), writer_cpus=svc.get("writer_cpus", ()))


# ---------------------------------------------------------------- reading
class LogMessage(NamedTuple):
    """One logged message.

    Attributes
    ----------
    t_ns : int
        ``log_time``: the simulation instant. [ns]
    topic : str
        The channel's topic.
    payload : bytes
        The msgpack body, as it was on the wire.
    wall_ns : int
        ``publish_time``: the sender's wall clock. [ns]
    seq : int
        ``sequence`` (the low 32 bits of the message's seq).
    """

    t_ns: int
    topic: str
    payload: bytes
    wall_ns: int
    seq: int


class LogBlock(NamedTuple):
    """Consecutive logged messages in ``log_time`` order, as arrays (at most a chunk's worth).

    Attributes
    ----------
    t_ns : ndarray of int64, shape (n,)
        ``log_time``: the simulation instants. [ns]
    topic : ndarray of object (str), shape (n,)
        The channels' topics.
    payload : ndarray of object (bytes), shape (n,)
        The msgpack bodies, as they were on the wire.
    wall_ns : ndarray of int64, shape (n,)
        ``publish_time``: the senders' wall clock. [ns]
    seq : ndarray of int64, shape (n,)
        ``sequence`` (the low 32 bits of each message's seq).
    """

    t_ns: NDArray[np.int64]
    topic: NDArray[np.object_]
    payload: NDArray[np.object_]
    wall_ns: NDArray[np.int64]
    seq: NDArray[np.int64]


# An MCAP Message record's header (MCAP spec, "Message"): opcode u8, record length u64,
# channel id u16, sequence u32, log time u64, publish time u64; the data follows.
_MESSAGE_HEAD = np.dtype([("op", "u1"), ("length", "<u8"), ("channel", "<u2"), ("seq", "<u4"),
                          ("log_time", "<u8"), ("publish_time", "<u8")])
# A MessageIndex record (MCAP spec, "Message Index"): opcode u8, record length u64,
# channel id u16, records length u32, then (log time u64, offset u64) pairs.
_INDEX_HEAD = struct.Struct("<BQHI")
_MERGE_MIN = 4096
"""Messages read before chunks are merged into a block (at least)."""


def _objects(items: list[Any]) -> NDArray[np.object_]:
    out = np.empty(len(items), dtype=object)
    out[:] = items
    return out


def _empty_columns() -> list[np.ndarray]:
    i8 = np.zeros(0, dtype=np.int64)
    return [i8, i8, i8, _objects([]), _objects([]), i8, i8]


def _check_head(path: Path) -> None:
    if not path.exists():
        raise LogError(f"log {str(path)!r}: no such file")
    if not path.is_file():
        raise LogError(f"log {str(path)!r}: not a regular file")
    try:
        with path.open("rb") as f:
            head = f.read(8)
    except OSError as err:
        raise LogError(f"log {str(path)!r}: cannot read: {err.strerror or err}") from err
    if head != MAGIC:
        raise LogError(f"log {str(path)!r}: not an MCAP file (starts with {head[:8]!r})")


@dataclass
class LogFile:
    """A finished MCAP log opened for reading (use :func:`open_log`).

    Attributes
    ----------
    path : Path
    topics : dict[str, int]
        Topic -> message count.
    schema_names : dict[str, str]
        Topic -> schema name.
    start_ns, end_ns : int
        First and last ``log_time``. [ns]
    message_count : int
    chunk_count : int
    """

    path: Path
    _file: Any = field(repr=False)
    _reader: Any = field(repr=False)
    topics: dict[str, int]
    schema_names: dict[str, str]
    start_ns: int
    end_ns: int
    message_count: int
    chunk_count: int
    schema_data: dict[str, bytes] = field(default_factory=dict)

    def register_schemas(self) -> list[str]:
        """Register the logged schemas of topics this process has no schema for; the topics registered."""
        done = []
        for topic, data in self.schema_data.items():
            if topic not in SCHEMAS:
                try:
                    register_schema(topic, schema_from_json(data))
                except (LogError, MessageError):
                    continue
                done.append(topic)
        return done

    def messages(self, topics: Iterable[str] | None = None, start_ns: int | None = None,
                 end_ns: int | None = None) -> Iterator[LogMessage]:
        """Messages in ``log_time`` order (ties: file order), optionally by topic and time window.

        The same messages in the same order as the ``mcap`` package's reader
        (``make_reader(f).iter_messages(topics, start, end + 1, log_time_order=True)``).

        Parameters
        ----------
        topics : iterable of str, optional
            Only these topics (default all).
        start_ns, end_ns : int, optional
            Inclusive window of ``log_time``. [ns]

        Raises
        ------
        LogError
            If a chunk cannot be read (the message names the file).
        """
        make = LogMessage._make
        for b in self.blocks(topics, start_ns, end_ns):
            yield from map(make, zip(b.t_ns.tolist(), b.topic.tolist(), b.payload.tolist(), b.wall_ns.tolist(),
                                     b.seq.tolist()))

    def blocks(self, topics: Iterable[str] | None = None, start_ns: int | None = None,
               end_ns: int | None = None) -> Iterator[LogBlock]:
        """The messages of :meth:`messages` (same order) as :class:`LogBlock` arrays, a chunk at a time.

        For bulk readers (replay, report, export): no per-message object is made.

        Raises
        ------
        LogError
            If a chunk cannot be read (the message names the file).
        """
        try:
            yield from self._merged(topics, start_ns, end_ns)
        except (McapError, EOFError, ValueError, OSError, KeyError, struct.error, zstandard.ZstdError) as err:
            raise LogError(f"log {str(self.path)!r}: unreadable data: {type(err).__name__}: {err}") from err

    def _merged(self, topics: Iterable[str] | None, start_ns: int | None,
                end_ns: int | None) -> Iterator[LogBlock]:
        """Chunks merged in (log_time, chunk offset, position in chunk) order, as mcap's reader does.

        Chunks are read lazily, in order of their first log time. Messages that a
        chunk not read yet could still precede (log time at or after its first) are
        held back and merged with the next chunks; a merge waits until the messages
        read since outnumber those held back, so each message is sorted O(1) times
        (a log whose services ran up to ~1 s apart has chunks overlapping by that much).
        """
        summary = self._reader.get_summary()
        want = None if topics is None else set(topics)
        chan = {cid: c.topic for cid, c in summary.channels.items() if want is None or c.topic in want}
        lo = -1 if start_ns is None else start_ns
        hi = _U64 if end_ns is None else end_ns
        chunks = [ci for ci in summary.chunk_indexes if ci.message_end_time >= lo and ci.message_start_time <= hi
                  and (want is None or not ci.message_index_offsets or chan.keys() & ci.message_index_offsets.keys())]
        chunks.sort(key=lambda ci: (ci.message_start_time, ci.chunk_start_offset))
        held: list[list[np.ndarray]] = []  # chunks read and not yet merged; columns as _chunk's
        carried = fresh = 0  # messages carried over from the last merge; read since
        for i, ci in enumerate(chunks):
            cols = self._chunk(ci, chan, lo, hi)
            held.append(cols)
            fresh += len(cols[0])
            last = i + 1 == len(chunks)
            if not last and fresh < max(carried, _MERGE_MIN):
                continue  # merge when the new messages outnumber those carried over (amortised)
            cols = [np.concatenate(c) for c in zip(*held)] if len(held) > 1 else held[0]
            if len(held) > 1:
                order = np.lexsort((cols[2], cols[1], cols[0]))
                cols = [c[order] for c in cols]
            # every chunk not read yet starts at or after the next one's first log time
            j = len(cols[0]) if last else int(np.searchsorted(cols[0], chunks[i + 1].message_start_time, "left"))
            if j:
                yield LogBlock(cols[0][:j], cols[3][:j], cols[4][:j], cols[5][:j], cols[6][:j])
            held = [[c[j:] for c in cols]]
            carried, fresh = len(cols[0]) - j, 0

    def _chunk(self, ci: Any, chan: dict[int, str], lo: int, hi: int) -> list[np.ndarray]:
        """The wanted messages of one chunk in (log time, position) order, as column arrays.

        The chunk record is read and decompressed by ``mcap`` (``Chunk.read``,
        ``get_chunk_data_stream``). The messages are located through the chunk's
        MessageIndex records, and their headers read as one numpy gather (the
        ``_MESSAGE_HEAD`` layout of the MCAP spec): mcap's per-record parser costs
        several times more per message (see ``bench/bench_logger.py``, ``read``). A
        chunk without message indexes is split by mcap's ``breakup_chunk``.
        """
        f = self._file
        f.seek(ci.chunk_start_offset)
        raw = f.read(ci.chunk_length + ci.message_index_length)
        chunk = Chunk.read(ReadDataStream(io.BytesIO(raw[9:ci.chunk_length])))
        if not ci.message_index_offsets:
            return self._chunk_unindexed(chunk, ci.chunk_start_offset, chan, lo, hi)
        stream, size = get_chunk_data_stream(chunk)
        data = stream.read(size)
        times, offsets, codes, names = [], [], [], []
        for cid, at in ci.message_index_offsets.items():
            topic = chan.get(cid)
            if topic is None:
                continue
            o = at - ci.chunk_start_offset
            op, _, index_cid, nbytes = _INDEX_HEAD.unpack_from(raw, o)
            if op != Opcode.MESSAGE_INDEX or index_cid != cid:
                raise LogError(f"log {str(self.path)!r}: bad message index for channel {cid} at byte {at}")
            pairs = np.frombuffer(raw, "<i8", count=nbytes // 8, offset=o + _INDEX_HEAD.size).reshape(-1, 2)
            times.append(pairs[:, 0])
            offsets.append(pairs[:, 1])
            codes.append(len(pairs))
            names.append(topic)
        if not times:
            return _empty_columns()
        t, off = np.concatenate(times), np.concatenate(offsets)
        code = np.repeat(np.arange(len(names)), codes)
        keep = (t >= lo) & (t <= hi)
        if not keep.all():
            t, off, code = t[keep], off[keep], code[keep]
        order = np.lexsort((off, t))
        t, off, topic = t[order], off[order], _objects(names)[code[order]]
        size = len(data)
        if len(off) and (off.min() < 0 or off.max() + _MESSAGE_HEAD.itemsize > size):
            raise LogError(f"log {str(self.path)!r}: message index beyond chunk at byte {ci.chunk_start_offset}")
        # a record header at every byte position (overlapping, no copy), picked at the offsets
        heads = np.ndarray((max(size - _MESSAGE_HEAD.itemsize + 1, 0),), _MESSAGE_HEAD, data, 0, (1,))
        head = heads[off]
        start = off + _MESSAGE_HEAD.itemsize
        end = off + 9 + head["length"].astype(np.int64)
        if not ((head["op"] == Opcode.MESSAGE).all() and (head["log_time"].astype(np.int64) == t).all()
                and (end <= size).all()):
            raise LogError(f"log {str(self.path)!r}: message index does not match chunk at byte "
                           f"{ci.chunk_start_offset}")
        payload = _objects([data[a:b] for a, b in zip(start.tolist(), end.tolist())])
        return [t, np.full(len(t), ci.chunk_start_offset, dtype=np.int64), off, topic, payload,
                head["publish_time"].astype(np.int64), head["seq"].astype(np.int64)]

    @staticmethod
    def _chunk_unindexed(chunk: Chunk, chunk_offset: int, chan: dict[int, str], lo: int,
                         hi: int) -> list[np.ndarray]:
        msgs = [(r.log_time, k, chan[r.channel_id], r.data, r.publish_time, r.sequence)
                for k, r in enumerate(breakup_chunk(chunk)) if isinstance(r, Message)
                and r.channel_id in chan and lo <= r.log_time <= hi]
        if not msgs:
            return _empty_columns()
        msgs.sort(key=lambda m: (m[0], m[1]))
        t, pos, topic, payload, wall, seq = zip(*msgs)
        return [np.array(t, dtype=np.int64), np.full(len(t), chunk_offset, dtype=np.int64),
                np.array(pos, dtype=np.int64), _objects(list(topic)), _objects(list(payload)),
                np.array(wall, dtype=np.int64), np.array(seq, dtype=np.int64)]

    def attachments(self) -> dict[str, bytes]:
        """Attachment name -> data."""
        return {a.name: a.data for a in self._reader.iter_attachments()}

    def metadata(self) -> dict[str, dict[str, str]]:
        """Metadata record name -> key/value map."""
        return {m.name: dict(m.metadata) for m in self._reader.iter_metadata()}

    def config(self) -> dict[str, Any] | None:
        """The run configuration (``config.json`` attachment), or None if the log has none."""
        data = self.attachments().get("config.json")
        return None if data is None else json.loads(data)

    def close(self) -> None:
        """Close the file (idempotent)."""
        self._file.close()

    def __enter__(self) -> LogFile:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def open_log(path: str | os.PathLike[str]) -> LogFile:
    """Open a finished MCAP log for reading.

    Parameters
    ----------
    path : str or Path

    Returns
    -------
    LogFile

    Raises
    ------
    LogError
        Missing file, not MCAP, or truncated / unfinished (no footer or summary:
        ``launch.py recover`` repairs it); a one-line message naming the file.
    """
    p = Path(path)
    _check_head(p)
    f = p.open("rb")
    try:
        f.seek(-8, io.SEEK_END)
        tail = f.read(8)
        if tail != MAGIC:
            raise LogError(f"log {str(p)!r}: truncated or unfinished (no MCAP footer); "
                           f"'launch.py recover {p}' rebuilds it")
        f.seek(0)
        reader = make_reader(f)
        summary = reader.get_summary()
        if summary is None or summary.statistics is None:
            raise LogError(f"log {str(p)!r}: has no summary; 'launch.py recover {p}' rebuilds it")
        st = summary.statistics
        counts = {summary.channels[cid].topic: n for cid, n in st.channel_message_counts.items()}
        names = {c.topic: (summary.schemas[c.schema_id].name if c.schema_id in summary.schemas else "")
                 for c in summary.channels.values()}
        data = {c.topic: summary.schemas[c.schema_id].data for c in summary.channels.values()
                if c.schema_id in summary.schemas}
        return LogFile(p, f, reader, counts, names, st.message_start_time, st.message_end_time,
                       st.message_count, st.chunk_count, data)
    except LogError:
        f.close()
        raise
    except (McapError, EOFError, ValueError, OSError, KeyError, IndexError) as err:
        f.close()
        raise LogError(f"log {str(p)!r}: corrupt MCAP ({type(err).__name__}: {err})") from err


def read_topics(log: str | os.PathLike[str] | LogFile, topics: Iterable[str], start_ns: int | None = None,
                end_ns: int | None = None) -> dict[str, dict[str, Any]]:
    """Per-topic arrays of every envelope and schema field, read from a log in one pass.

    Each topic's messages are decoded in bulk (one ``msgpack.Unpacker`` over the
    topic's bodies, numeric fields stacked with numpy), by the schema logged with the
    topic (:func:`schema_from_json`), so a log stays readable when the code's schemas
    have moved on.

    Parameters
    ----------
    log : str, Path or LogFile
        The log (a path is opened and closed here).
    topics : iterable of str
        Logged topics to read.
    start_ns, end_ns : int, optional
        Inclusive window of ``log_time``. [ns]

    Returns
    -------
    dict
        Topic -> field -> values, one row per message in ``log_time`` order:
        ``t_ns``, ``h_ns``, ``wall_ns``, ``seq`` (int64, the envelope's; [ns] for the
        times) and ``sender`` (object array of str); then every schema field: ``f8``
        as float64 of shape ``(n, *shape)``, ``int`` int64 ``(n,)``, ``bool`` bool
        ``(n,)``, ``str``, ``list[str]``, ``map`` and ``events`` as object arrays
        ``(n,)`` of the decoded values.

    Raises
    ------
    LogError
        Bad log; a topic not in the log or without a usable schema; a message that
        does not match its schema. The message names the file and the topic.
    """
    if not isinstance(log, LogFile):
        with open_log(log) as opened:
            return read_topics(opened, topics, start_ns, end_ns)
    topics = list(dict.fromkeys(topics))
    where = f"log {str(log.path)!r}"
    schemas: dict[str, TopicSchema] = {}
    for topic in topics:
        if topic not in log.topics:
            raise LogError(f"{where}: no topic {topic!r} (logged: {', '.join(sorted(log.topics))})")
        if topic not in log.schema_data:
            raise LogError(f"{where}: topic {topic!r} has no schema")
        try:
            schemas[topic] = schema_from_json(log.schema_data[topic])
        except LogError as err:
            raise LogError(f"{where}: topic {topic!r}: {err}") from err
    bodies: dict[str, list[bytes]] = {t: [] for t in topics}
    for b in log.blocks(topics, start_ns, end_ns):
        if len(topics) == 1:
            bodies[topics[0]].extend(b.payload.tolist())
            continue
        for topic in topics:
            sel = b.payload[b.topic == topic]
            if len(sel):
                bodies[topic].extend(sel.tolist())
    return {t: _topic_arrays(where, t, schemas[t], bodies[t]) for t in topics}


def _topic_arrays(where: str, topic: str, schema: TopicSchema, bodies: list[bytes]) -> dict[str, Any]:
    """The columns of :func:`read_topics` for one topic's message bodies."""
    n = len(bodies)
    try:
        envs = list(msgpack.Unpacker(io.BytesIO(b"".join(bodies)), raw=False, max_buffer_size=1 << 30))
        if len(envs) != n:
            raise ValueError(f"{n} bodies hold {len(envs)} msgpack objects")
        head = np.array([e[2:6] for e in envs], dtype=np.int64).reshape(n, 4)
        out: dict[str, Any] = {"t_ns": head[:, 1].copy(), "h_ns": head[:, 2].copy(), "wall_ns": head[:, 3].copy(),
                               "seq": head[:, 0].copy(), "sender": _objects([e[1] for e in envs])}
        fields = [e[6] for e in envs]
        for name, (ftype, shape) in schema.fields.items():
            vals = [f[name] for f in fields]
            if ftype == "f8" and shape:
                data = b"".join(vals)
                size = int(np.prod(shape))
                if len(data) != 8 * size * n:
                    raise ValueError(f"field {name!r}: {len(data)} bytes for {n} values of shape {shape}")
                out[name] = np.frombuffer(data, dtype="<f8").reshape(n, *shape)
            elif ftype == "f8":
                out[name] = np.array(vals, dtype=np.float64).reshape(n)
            elif ftype == "int":
                out[name] = np.array(vals, dtype=np.int64).reshape(n)
            elif ftype == "bool":
                out[name] = np.array(vals, dtype=bool).reshape(n)
            else:
                out[name] = _objects(vals)
    except (ValueError, TypeError, KeyError, IndexError, OverflowError, msgpack.UnpackException) as err:
        raise LogError(f"{where}: topic {topic!r}: messages do not match schema {schema.name} "
                       f"({type(err).__name__}: {err})") from err
    return out


# ---------------------------------------------------------------- recover
@dataclass(frozen=True)
class RecoverResult:
    """What :func:`recover` kept.

    Attributes
    ----------
    out : Path
        The rebuilt file.
    messages, chunks : int
        Messages and complete chunks recovered.
    dropped_bytes : int
        Bytes at the end of the input not copied: the torn tail, or the old summary of
        a finished file (rebuilt). [bytes]
    complete : bool
        Whether the input's data section was finished (it needed no repair).
    """

    out: Path
    messages: int
    chunks: int
    dropped_bytes: int
    complete: bool


def recover(path: str | os.PathLike[str], out: str | os.PathLike[str] | None = None) -> RecoverResult:
    """Rebuild a valid, indexed MCAP file from a log whose writer died (SIGKILL, power loss).

    Every complete record (schema, channel, complete chunk, attachment, metadata) is
    copied; the incomplete tail is dropped; chunks are re-written with indexes and the
    summary. The result is written to a temporary file next to ``out`` and then
    renamed over it.

    Parameters
    ----------
    path : str or Path
        The damaged log.
    out : str or Path, optional
        Where to write; default: replace ``path`` in place.

    Returns
    -------
    RecoverResult

    Raises
    ------
    LogError
        Missing or non-MCAP input, or nothing recoverable; the message names the file.
    """
    src = Path(path)
    _check_head(src)
    dst = Path(out) if out is not None else src
    tmp = dst.with_name(dst.name + ".recovering")
    schemas: dict[int, Schema] = {}
    channels: dict[int, Channel] = {}
    new_schema: dict[int, int] = {}
    new_channel: dict[int, int] = {}
    n_msg = n_chunk = 0
    complete = False
    tail = ""
    size = src.stat().st_size
    good_end = 8
    with src.open("rb") as f, tmp.open("wb") as g:
        w = Writer(g, compression=CompressionType.ZSTD)
        w.start(profile="", library="berthsim recover")

        def put(rec: Any) -> None:
            nonlocal n_msg
            if isinstance(rec, Schema):
                if rec.id not in schemas:
                    schemas[rec.id] = rec
                    new_schema[rec.id] = w.register_schema(rec.name, rec.encoding, rec.data)
            elif isinstance(rec, Channel):
                if rec.id not in channels:
                    channels[rec.id] = rec
                    new_channel[rec.id] = w.register_channel(rec.topic, rec.message_encoding,
                                                             new_schema.get(rec.schema_id, 0), dict(rec.metadata))
            elif isinstance(rec, Message):
                cid = new_channel.get(rec.channel_id)
                if cid is not None:
                    w.add_message(cid, rec.log_time, rec.data, rec.publish_time, rec.sequence)
                    n_msg += 1
            elif isinstance(rec, Attachment):
                w.add_attachment(rec.create_time, rec.log_time, rec.name, rec.media_type, rec.data)
            elif isinstance(rec, Metadata):
                w.add_metadata(rec.name, dict(rec.metadata))

        reader = StreamReader(f, emit_chunks=True)
        try:
            for rec in reader.records:
                if isinstance(rec, Chunk):
                    inner = breakup_chunk(rec, validate_crc=True)
                    n_chunk += 1
                    for r in inner:
                        put(r)
                elif isinstance(rec, (DataEnd, Footer)):
                    complete = True  # the writer finished its data section
                    good_end = f.tell()
                    break
                else:
                    put(rec)
                good_end = f.tell()
        except Exception as err:  # noqa: BLE001 - the torn tail: keep what came before it, say what stopped us
            tail = f"{type(err).__name__}: {err}"
        if n_msg == 0 and not channels:
            g.close()
            tmp.unlink(missing_ok=True)
            raise LogError(f"log {str(src)!r}: nothing recoverable (no complete chunk)")
        w.add_metadata("berthsim.recover", {"source_bytes": str(size), "kept_bytes": str(good_end),
                                            "messages": str(n_msg), "chunks": str(n_chunk), "tail": tail})
        w.finish()
    os.replace(tmp, dst)
    return RecoverResult(dst, n_msg, n_chunk, max(0, size - good_end), complete)


# ---------------------------------------------------------------- command line
def add_recover_arguments(p: Any) -> None:
    """The options of ``launch.py recover``."""
    p.add_argument("log", help="MCAP log whose writer died")
    p.add_argument("--out", help="write the rebuilt log here (default: replace LOG)")


def recover_main(a: Any) -> int:
    """``launch.py recover LOG [--out PATH]``: 0 rebuilt, 2 bad input (one line naming the file)."""
    try:
        r = recover(a.log, a.out)
    except LogError as err:
        print(f"berthsim recover: {err}", file=sys.stderr)
        return 2
    print(json.dumps({"event": "recover", "out": str(r.out), "messages": r.messages, "chunks": r.chunks,
                      "dropped_bytes": r.dropped_bytes, "was_complete": r.complete}))
    return 0
