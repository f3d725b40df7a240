"""The logger service: every bus message into one MCAP file (DESIGN §6).

The file layout, and reading logs back, are :mod:`protocol.logfile`; repairing the log of a
killed run is :mod:`protocol.logrecover`. This module only records.

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

What is written: :mod:`protocol.logfile` (*File layout*): a channel and a JSON schema per
topic, the wire bodies unchanged, attachments ``config.json``, ``config.toml`` and
``command_line.txt``, metadata ``berthsim.run`` and ``berthsim.close``. ``berthsim.close``
holds the messages received and written, invalid and rejected ones, the lost messages
(sequence gaps) per topic (topics of the run only: messages of topics without a schema are
counted, ``invalid.unknown_topics`` and ``invalid.unknown_topic_messages``, never listed),
and the wall clock of the first data message received (not ``sim/control``) and of the close
(``first_wall_ns``, ``end_wall_ns``).

The log holds nothing a consumer would reject. Messages whose envelope or fields do not
fit their schema (a non-finite value included: each body is decoded as a consumer
decodes it), or whose topic has no schema, are counted (``invalid``) and not written.
Well-formed samples the run does not accept — not from the topic's producer, off its
coupling grid, out of order or a second copy of one instant, stamped beyond what the
producer can have reached, a sequence number beyond the instants (:mod:`protocol.provenance`,
the same gate as the consumers', fed the same frames in the same order) — are counted
(``rejected``) and not written; frames whose CurveZMQ key does not speak for their sender
never reach the logger (its process drops and counts them, ``msgs_invalid``);
so a forged sequence number cannot make ``lost`` report bogus losses. A logger used
outside a run (no gate given) checks the fields only; a negative ``t_ns`` cannot be an
MCAP ``log_time`` (unsigned): it is then written with ``log_time`` 0 and counted.

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
readable, and :func:`protocol.logrecover.recover` (``launch.py recover LOG``) rebuilds a
valid file with its summary.

Service configuration::

    [sim]
    log = "run.mcap"               # launch.py run --log PATH; default berthsim-YYYYmmdd-HHMMSS.mcap
    overwrite = false              # launch.py run --overwrite: replace an existing log (else refused)
    [services.logger]
    kind = "logger"
    rate_hz = 1000                 # required by the runtime; a sink never steps
    path = "other.mcap"            # optional, overrides sim.log
    topics = ["orbiter/state"]     # optional, default every topic
    chunk_size = 1048576           # optional, bytes of uncompressed chunk (mcap's default)
    schemas_from = "old.mcap"      # optional: register the schemas of this log's topics (replay runs)
    flush_interval = 1.0           # optional, s of wall time between chunk closes
    writer_cpus = [1]              # optional: the writer process runs on these CPUs only (default: any)

Ownership: one logger per file. Validation refuses a log path that is a directory, that
is not writable, that another logger of the run also writes, that a running logger holds,
or that exists (unless ``sim.overwrite``); the logger then creates its file exclusively
(or, overwriting, locks it before truncating it, :func:`open_exclusive`) and holds the
lock while it writes, so that a second run on the same path is refused, not interleaved.

Provenance comes from the configuration, never from the process's command line:
``sim.command_line`` (attached as ``command_line.txt``) and ``sim.config_file`` (its text
attached as ``config.toml``), which ``launch.py`` sets for the runs it starts.

:class:`LoggerParams` is ``[services.NAME]``'s keys (:data:`OPTIONS`) parsed once, with the defaults of
:data:`DEFAULTS` (frozen, units in its fields' metadata, :mod:`protocol.params`); :data:`PARAMS` names it
for :mod:`protocol.registry`.
"""

from __future__ import annotations

import fcntl
import io
import json
import os
import platform
import signal
import socket
import stat
import subprocess
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from importlib import metadata as importlib_metadata
from itertools import repeat
from multiprocessing.connection import Connection, Pipe
from pathlib import Path
from typing import Any, ClassVar

import msgpack
import numpy as np
from mcap.writer import CompressionType, Writer
from numpy.typing import NDArray

from errors import LogError, MessageError
from protocol.bus import SequenceTracker
from protocol.codec import TopicCodec, envelopes, topic_codec
from protocol.config import check_value
from protocol.logfile import json_schema, open_log
from protocol.messages import CONTROL_PREFIX, SCHEMAS, SEPARATOR, schema_for
from protocol.params import ServiceTableParams, param
from protocol.provenance import SampleGate
from protocol.realtime import set_thread_name
from protocol.service import ServicePorts

__all__ = ["CHUNK_SIZE", "DEFAULTS", "OPTIONS", "PARAMS", "TABLES", "LoggerParams", "McapLogger", "build", "log_in_use",
           "open_exclusive", "ports", "validate"]

TABLES: tuple[str, ...] = ()
OPTIONS: dict[str, Any] = {"path": str, "topics": list, "chunk_size": int, "flush_interval": (int, float),
                           "schemas_from": str, "writer_cpus": list}

CHUNK_SIZE = 1 << 20
"""Default uncompressed chunk size (mcap's own default): few enough chunks that reading
costs little per chunk; a chunk also closes every ``flush_interval`` s. [bytes]"""

DEFAULTS: dict[str, Any] = {"path": None, "topics": [], "chunk_size": CHUNK_SIZE, "flush_interval": 1.0,
                            "schemas_from": None, "writer_cpus": []}
"""The value of each key of :data:`OPTIONS` that ``[services.NAME]`` leaves out (``path`` None: ``sim.log``, else a
name of now; ``schemas_from`` None: none)."""


@dataclass(frozen=True)
class LoggerParams(ServiceTableParams):
    """``[services.NAME]`` of a logger, parsed once (:data:`OPTIONS`, defaults :data:`DEFAULTS`; the module docstring
    says what each key does). Each field's unit is in its metadata (:func:`protocol.params.units`)."""

    DEFAULTS: ClassVar[Mapping[str, Any]] = DEFAULTS

    path: str | None = param("-")                       # the log file; None or "": sim.log, else a name of now
    topics: tuple[str, ...] = param("-")                # () : every topic
    chunk_size: int = param("bytes")                    # uncompressed chunk size that closes a chunk
    flush_interval: float = param("s")                  # wall time; 0: chunks close by size only
    schemas_from: str | None = param("-")               # a log whose topics' schemas are registered; None: none
    writer_cpus: tuple[int, ...] = param("-")           # CPU numbers of the writer process; () : any


PARAMS = LoggerParams
"""The kind's declared parameters (:mod:`protocol.registry`)."""

_PACKAGES = ("berthsim", "numpy", "scipy", "pyzmq", "msgpack", "mcap", "zstandard", "pyserial", "matplotlib")


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
_UNKNOWN_TOPICS_MAX = 10_000
"""Topics without a schema the logger tells apart (to count them); more are counted as messages only."""
_PARENT_ENDS: set[Connection] = set()
"""The parent-side pipe ends of every open logger of this process: a new writer process
closes its copies, so that each writer sees end-of-file when its own logger dies."""


class McapLogger:
    """The recording sink: every message it is handed goes into one MCAP file.

    Parameters
    ----------
    path : str or Path
        The MCAP file to write (its directory must exist). It is locked
        (``flock``, exclusive) for as long as the writer process runs, so that no second
        logger can write it; see :func:`open_exclusive`.
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
    overwrite : bool
        Replace an existing file (default); False: refuse one (created exclusively).
    writer_cpus : iterable of int
        CPUs the writer process is pinned to (``os.sched_setaffinity``); empty: any.
        A writer with a core of its own is not preempted by the publishers: at 100,000
        msg/s on 2 cores it waited for a CPU 0.6 % of the time, against 12 % unpinned
        (``bench/bench_logger.py``, ``record_bus_paced_pinned``).

    Raises
    ------
    LogError
        If the file cannot be created, exists and ``overwrite`` is False, is being written
        by another logger, ``writer_cpus`` names a CPU this machine does not have, or the
        writer process cannot be started (the message names the file).

    Notes
    -----
    Two processes (see the module docstring, *Recording*): :meth:`on_frames` and
    :meth:`on_message` only append to a queue; a thread of this process reads the
    envelope headers of everything queued at once (:func:`protocol.codec.envelopes`),
    decodes each body, applies the run's gate (:meth:`set_gate`), counts sequence gaps,
    invalid and rejected messages, and every ``_BATCH_S`` hands the valid ones over to a forked
    *writer process* through a pipe; the writer process owns the ``mcap``
    :class:`~mcap.writer.Writer` and the file. :meth:`close` hands over the rest and the
    ``berthsim.close`` metadata and waits for the writer process to finish the file. Counters
    (``received``, ``written``, ``invalid``, ``rejected``, ``lost``, ``negative_t``) are final after ``close``;
    ``writer_cpu_s`` is then the writer process's CPU time (user + system). [s]
    """

    def __init__(self, path: str | os.PathLike[str], *, name: str = "logger", topics: Iterable[str] = (),
                 config: Mapping[str, Any] | None = None, config_text: str | None = None,
                 command_line: str | None = None, chunk_size: int = CHUNK_SIZE, flush_interval: float = 1.0,
                 overwrite: bool = True, writer_cpus: Iterable[int] = ()) -> None:
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
        self.rejected: dict[str, int] = {}  # well-formed samples the run's gate refused, by topic
        self._gate: SampleGate | None = None
        self._codecs: dict[int, TopicCodec] = {}  # topic index -> its codec (the fields' check)
        self.lost: dict[str, int] = {}
        self.unknown_messages = 0  # messages of topics without a schema (not the run's), counted, not listed
        self._unknown_topics: set[str] = set()  # their topics, at most _UNKNOWN_TOPICS_MAX
        self.writer_cpu_s = 0.0
        self._first_wall_ns = 0  # wall clock of the first data message (not sim/control) handed over (0: none) [ns]
        self._tracker = SequenceTracker()
        self._topics: list[str] = []  # topic index -> topic (known topics: they have a schema)
        self._tid_of: dict[bytes, int] = {}  # frame prefix (the topic's bytes) -> topic index
        self._channels: set[int] = set()  # topic indices whose channel the writer process has
        self._new_channels: list[list[Any]] = []
        file = open_exclusive(self.path, overwrite)  # the writer process owns it (and its lock)
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
                set_thread_name("logwriter")
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
        self._raised = False
        self._reaped: tuple[int, Any] | None = None  # the writer process's wait status and rusage, once reaped
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
            self._raised = True  # (close() then says nothing more: the failure is raised once)
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
        tids = [tid_of.get(f[:i], -1) for f, i in zip(frames, seps, strict=True)]
        if -1 in seps:  # no separator: no topic (and f[:-1] is not one)
            tids = [t if i >= 0 else -1 for t, i in zip(tids, seps, strict=True)]
        if -1 in tids:  # a new topic, or garbage
            for k in [k for k, t in enumerate(tids) if t < 0]:
                tids[k] = self._topic_index(frames[k], seps[k])
            keep = [k for k, t in enumerate(tids) if t >= 0]
            frames, seps, tids = [frames[k] for k in keep], [seps[k] for k in keep], [tids[k] for k in keep]
        bodies = [f[i + 1:] for f, i in zip(frames, seps, strict=True)]
        env = envelopes(self._topics, tids, bodies)
        tid = np.asarray(tids, np.int64).reshape(len(tids))
        ok = env.ok.copy()
        if not ok.all():  # envelopes that do not read
            for k, count in zip(*np.unique(tid[~ok], return_counts=True), strict=True):
                topic = self._topics[k]
                self.invalid[topic] = self.invalid.get(topic, 0) + int(count)
        self._check_samples(ok, tid, bodies)
        rows: np.ndarray | slice
        if not ok.all():
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

    def set_gate(self, gate: SampleGate) -> None:
        """From now on, record only the samples ``gate`` accepts (the run's, :mod:`protocol.provenance`);
        the shell gives the logger its run's gate at the start."""
        self._gate = gate

    def _check_samples(self, ok: NDArray[np.bool_], tid: NDArray[np.int64], bodies: list[bytes]) -> None:
        """What a consumer would reject, marked not ``ok`` in place and counted: fields that do not
        fit the schema or are not finite (``invalid``), and well-formed samples the run's gate
        does not accept (``rejected``: not the producer's, off its coupling grid, out of order, beyond
        what its producer can have reached)."""
        topics, codecs, gate = self._topics, self._codecs, self._gate
        for k in np.flatnonzero(ok).tolist():
            t = int(tid[k])
            topic = topics[t]
            codec = codecs.get(t)
            if codec is None:
                codec = codecs[t] = topic_codec(topic)
            try:
                s = codec.decode(bodies[k])
            except MessageError:
                ok[k] = False
                self.invalid[topic] = self.invalid.get(topic, 0) + 1
                continue
            if gate is not None and gate.reject(topic, s.sender, s.seq, s.t_ns, s.h_ns) is not None:
                ok[k] = False
                self.rejected[topic] = self.rejected.get(topic, 0) + 1

    def _topic_index(self, frame: bytes, sep: int) -> int:
        """The index of a frame's topic (new ones get the next); -1 (counted invalid) without a topic or schema."""
        known = self._tid_of.get(frame[:sep]) if sep > 0 else None
        if known is not None:
            return known
        topic = frame[:sep].decode(errors="replace") if sep > 0 else ""
        try:
            schema_for(topic)
        except MessageError:  # no schema: not recorded, counted, not listed (garbage must not grow the tables)
            self.unknown_messages += 1
            if len(self._unknown_topics) < _UNKNOWN_TOPICS_MAX:
                self._unknown_topics.add(topic)
            return -1
        tid = self._tid_of[frame[:sep]] = len(self._topics)
        self._topics.append(topic)
        return tid

    def _count_gaps(self, key: NDArray[np.int64], seq: NDArray[np.int64], senders: list[str]) -> None:
        """Sequence gaps of one batch: ``key`` = sender index * topics + topic index, rows in arrival order."""
        ntopics = len(self._topics)
        missed = self._tracker.see_batch(key, seq, lambda k: (senders[k // ntopics], self._topics[k % ntopics]))
        if missed.any():
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
            return ["error", self._writer_death()]
        return list(reply)

    def _writer_death(self) -> str:
        """Why the writer process ended without a word: its exit status or signal (it is reaped here)."""
        deadline = time.monotonic() + 1.0
        while self._reaped is None and time.monotonic() < deadline:
            pid, status, usage = os.wait4(self._pid, os.WNOHANG)
            if pid:
                self._reaped = (status, usage)
            else:
                time.sleep(0.01)
        if self._reaped is None:
            return "the writer process stopped answering"
        status = self._reaped[0]
        if os.WIFSIGNALED(status):
            return (f"the writer process died ({signal.Signals(os.WTERMSIG(status)).name}); the log ends at its last "
                    f"chunk ('launch.py recover {self.path}' rebuilds its index)")
        return f"the writer process exited with status {os.waitstatus_to_exitcode(status)} without a word"

    # ---------------------------------------------------------------- close
    def close(self) -> None:
        """Hand over everything queued and the ``berthsim.close`` metadata; wait for the file; idempotent.

        Raises
        ------
        LogError
            If the writer process failed (the message names the file and the cause), unless
            :meth:`on_frames` already raised that failure: a failure is raised once.
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
            usage = self._reaped[1] if self._reaped is not None else os.wait4(self._pid, 0)[2]
            self.writer_cpu_s = usage.ru_utime + usage.ru_stime
        if self._error is not None and not self._raised:
            self._raised = True
            raise LogError(f"log {str(self.path)!r}: writer failed: {self._error}")

    def close_metadata(self) -> dict[str, str]:
        """The ``berthsim.close`` metadata: counts, and lost messages (sequence gaps) per topic.

        Per-topic keys (``lost.T``, ``invalid.T``, ``rejected.T``) name only topics with a schema
        (the run's); messages of topics without one are counted, not listed
        (``invalid.unknown_topics``: how many topics, at most ``_UNKNOWN_TOPICS_MAX`` told apart;
        ``invalid.unknown_topic_messages``), so that junk on the bus cannot grow the record."""
        meta = {"first_wall_ns": str(self._first_wall_ns), "end_wall_ns": str(time.time_ns()),
                "received": str(self.received), "written": str(self.written),
                "invalid": str(sum(self.invalid.values()) + self.unknown_messages),
                "lost": str(sum(self.lost.values())),
                "negative_t_ns": str(self.negative_t), "rejected": str(sum(self.rejected.values()))}
        meta.update({f"lost.{t}": str(n) for t, n in sorted(self.lost.items())})
        meta.update({f"invalid.{t}": str(n) for t, n in sorted(self.invalid.items())})
        if self.unknown_messages:
            meta["invalid.unknown_topics"] = str(len(self._unknown_topics))
            meta["invalid.unknown_topic_messages"] = str(self.unknown_messages)
        meta.update({f"rejected.{t}": str(n) for t, n in sorted(self.rejected.items())})
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
        add, consume = w.add_message, deque[Any](maxlen=0).extend
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


def open_exclusive(path: str | os.PathLike[str], overwrite: bool) -> io.BufferedWriter:
    """Open a log for writing, owned: created exclusively (``O_EXCL``) unless ``overwrite``,
    and locked (``flock``, exclusive, not waiting) before anything is truncated.

    The lock belongs to the open file: a forked writer process that keeps the file holds
    it until it ends, and a second logger on the same path (this run or another) is
    refused instead of interleaving its chunks with the first one's.

    Raises
    ------
    LogError
        Naming the file: it exists (and not ``overwrite``), another process writes it, or
        it cannot be created.
    """
    p = str(path)
    try:
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC | (0 if overwrite else os.O_EXCL), 0o644)
    except FileExistsError as err:
        raise LogError(f"log {p!r}: exists (launch.py run --overwrite replaces it)") from err
    except OSError as err:
        raise LogError(f"log {p!r}: cannot create: {err.strerror or err}") from err
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as err:
        os.close(fd)
        raise LogError(f"log {p!r}: another process is writing it (a second logger on one file)") from err
    if stat.S_ISREG(os.fstat(fd).st_mode):  # (a device, /dev/full in the tests, has nothing to truncate)
        os.ftruncate(fd, 0)
    return os.fdopen(fd, "wb")


def log_in_use(path: str | os.PathLike[str]) -> bool:
    """Whether a logger holds the lock of an existing log (:func:`open_exclusive`)."""
    try:
        fd = os.open(str(path), os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # (releases the lock just taken)
    return False


# ---------------------------------------------------------------- service module
def _default_log_name() -> str:
    return time.strftime("berthsim-%Y%m%d-%H%M%S.mcap")


def validate(config: dict[str, Any], name: str) -> list[str]:
    """Problems of ``[services.NAME]`` of a logger beyond its options' kinds (:data:`OPTIONS`, checked by
    :func:`protocol.config.validate`): path, topics, chunk_size, flush_interval, writer_cpus; each names its
    full key (``services.NAME.path``)."""
    where = f"services.{name}"
    svc = config["services"][name]
    if any(check_value(where, svc[k], kind) for k, kind in OPTIONS.items() if k in svc):
        return []  # listed by protocol.config, naming the key
    v = {**DEFAULTS, **svc}
    out = []
    topics = v["topics"]
    if not all(isinstance(t, str) and t for t in topics):
        out.append(f"{where}.topics: expected a list of non-empty str, got {topics!r}")
    else:
        unknown = [t for t in topics if t not in SCHEMAS]
        if unknown:
            out.append(f"{where}.topics: no schema for {unknown} (known: {sorted(SCHEMAS)})")
    if v["chunk_size"] < 1024:
        out.append(f"{where}.chunk_size: expected >= 1024 bytes, got {v['chunk_size']!r}")
    if v["flush_interval"] < 0:
        out.append(f"{where}.flush_interval: expected >= 0 s, got {v['flush_interval']!r}")
    cpus = v["writer_cpus"]
    if not all(type(c) is int and c >= 0 for c in cpus):
        out.append(f"{where}.writer_cpus: expected a list of CPU numbers (int >= 0), got {cpus!r}")
    elif svc.get("host") is None and not set(cpus) <= _cpus():
        out.append(f"{where}.writer_cpus: CPUs {sorted(set(cpus) - _cpus())} are not on this machine "
                   f"(it has {sorted(_cpus())})")
    path = _log_path(config, name)
    parent = path.parent if str(path.parent) else Path(".")
    overwrite = config.get("sim", {}).get("overwrite", False) is True
    if not parent.is_dir():
        out.append(f"{where}.path: directory {str(parent)!r} of log {str(path)!r} does not exist")
    elif path.is_dir():
        out.append(f"{where}.path: log {str(path)!r} is a directory")
    elif path.exists() and log_in_use(path):
        out.append(f"{where}.path: log {str(path)!r} is being written by another run")
    elif path.exists() and not overwrite:
        out.append(f"{where}.path: log {str(path)!r} exists (launch.py run --overwrite replaces it)")
    elif (why := _not_writable(path)) is not None:
        out.append(f"{where}.path: log {str(path)!r} cannot be written: {why}")
    for other, o in config.get("services", {}).items():
        if other == name:
            break
        if isinstance(o, dict) and o.get("kind") == "logger" and _log_path(config, other).resolve() == path.resolve():
            out.append(f"{where}.path: log {str(path)!r} is also written by services.{other} (one logger per file)")
    return out


def _not_writable(path: Path) -> str | None:
    """Why ``path`` cannot be written, or None: tried, not guessed (permission bits do not tell for
    root, read-only mounts or /proc) — an existing file opened for writing without truncating it,
    else a file made and removed beside it."""
    try:
        if path.exists():
            os.close(os.open(path, os.O_WRONLY | os.O_CLOEXEC))
        else:
            probe = path.with_name(f".{path.name}.{os.getpid()}.probe")
            os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))
            os.unlink(probe)
    except OSError as err:
        return err.strerror or str(err)
    return None


def _log_path(config: dict[str, Any], name: str) -> Path:
    """The file logger ``name`` writes: its ``path``, else ``sim.log``, else a name of now."""
    return Path(config["services"][name].get("path") or config.get("sim", {}).get("log") or _default_log_name())


def build(config: dict[str, Any], name: str, period_ns: int) -> McapLogger:
    """The logger sink of service ``name`` (its keys: :class:`LoggerParams`, the module docstring).

    Raises
    ------
    LogError
        As :class:`McapLogger`, or if ``schemas_from`` cannot be read (naming the file).
    """
    from protocol.config import register_schemas
    register_schemas(config)  # the run's kinds register their topics' schemas (static, or from the config)
    p = LoggerParams.from_service(config, name)
    if p.schemas_from:  # a replay run: the replayed topics' schemas come from the log
        with open_log(p.schemas_from) as log:
            log.register_schemas()
    sim = config.get("sim", {})
    path = p.path or sim.get("log") or _default_log_name()
    cmd, config_path = sim.get("command_line"), sim.get("config_file")
    text = None
    if config_path:
        try:
            text = Path(config_path).read_text()
        except (OSError, UnicodeDecodeError):
            text = None
    return McapLogger(path, name=name, topics=p.topics, config=config, config_text=text, command_line=cmd,
                      chunk_size=p.chunk_size, flush_interval=p.flush_interval, overwrite=sim.get("overwrite") is True,
                      writer_cpus=p.writer_cpus)


def ports(config: dict[str, Any], name: str) -> ServicePorts:
    """The logger is a sink: no ports, it records every topic (:mod:`protocol.config`)."""
    return ServicePorts("sink", (), ())
