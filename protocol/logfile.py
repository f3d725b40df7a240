"""berthsim's MCAP log files: their layout, the topic schemas they carry, and reading them back.

Why in :mod:`protocol`: a log holds the bus's messages byte for byte (the wire bodies of
:mod:`protocol.messages`, decoded by their logged schemas), so reading it is part of the
wire format, like the codec. Every offline tool reads logs here — replay, the report,
export, re-simulation, the run's figures and ``launch.py`` — and none of them imports the
logger service, which only records (:mod:`services.logger`). :mod:`protocol.logrecover`
beside it repairs the log of a killed run. Like all of :mod:`protocol` it imports nothing
of the project but :mod:`errors`.

File layout (MCAP, ``mcap`` package)
------------------------------------
- one *schema* per message type, named as in :mod:`protocol.messages`
  (``"berthsim.OrbiterState"``), encoding ``"jsonschema"`` (:func:`json_schema`): a
  JSON Schema of the msgpack envelope array ``[version, sender, seq, t_ns, h_ns,
  wall_ns, fields]`` with every field's type and shape (ids start at 1);
  :func:`schema_from_json` reads it back, so a log stays readable when the code's
  schemas have moved on;
- one *channel* per topic, ``message_encoding="msgpack"``, channel metadata
  ``schema_version`` and ``kind``;
- one *message* per bus message: ``data`` is the msgpack **body**, byte for byte as on
  the wire (the frame without its ``topic\\0`` prefix; the topic is the channel's),
  ``log_time`` = ``t_ns`` (simulation time), ``publish_time`` = ``wall_ns`` (the
  sender's wall clock), ``sequence`` = ``seq`` (uint32 in MCAP: the low 32 bits);
- attachments ``config.json`` (the run's configuration, canonical JSON; replay
  ``--resim`` reads it), ``config.toml`` (the config file as written, when known) and
  ``command_line.txt``;
- channels of other content (another message encoding, a schema that is not a berthsim
  JSON schema: a tool that added its own channel) are foreign: :func:`open_log` leaves them
  out of the topics and of every read, and counts them (:attr:`LogFile.foreign`,
  :meth:`LogFile.foreign_note`);
- metadata ``berthsim.run`` at the start (package versions, git commit, seed, host
  names, mode, start wall time) and ``berthsim.close`` at the end (counts and losses;
  see :mod:`services.logger`).

Reading
-------
:func:`open_log` checks a file and returns a :class:`LogFile`: topics, time range,
attachments, metadata, and :meth:`LogFile.messages` by topic and time window in
``log_time`` order (indexed: a seek reads only the chunks it needs) — the same
messages in the same order as mcap's ``iter_messages(log_time_order=True)``.
:meth:`LogFile.blocks` gives them as arrays a chunk at a time (replay), and
:func:`read_topics` as per-topic, per-field numpy arrays in one pass (report, export,
figures); :func:`decode_bodies` gives the same columns for bodies held in memory (a sweep's
runs, which write no log). :func:`select_topics` picks logged topics by fnmatch patterns and
:func:`producers` names the service that produced each topic. Summary, chunk records
and decompression are mcap's; the messages of a chunk are located through its
MessageIndex records and their headers read as one numpy gather, because mcap's
per-record reader is 3-6x slower per message (measured in ``bench/bench_logger.py``,
``read``). A missing, truncated or non-MCAP file raises :class:`errors.LogError` with a
one-line message naming the file.
"""

from __future__ import annotations

import fnmatch
import io
import json
import os
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import msgpack
import numpy as np
import zstandard
from mcap.data_stream import ReadDataStream
from mcap.exceptions import McapError
from mcap.opcode import Opcode
from mcap.reader import make_reader
from mcap.records import Chunk, Message
from mcap.stream_reader import breakup_chunk, get_chunk_data_stream
from numpy.typing import NDArray

from errors import ConfigError, LogError, MessageError
from protocol.codec import envelope
from protocol.messages import SCHEMAS, TopicSchema, register_schema

__all__ = [
    "MAGIC",
    "LogBlock",
    "LogFile",
    "LogMessage",
    "check_head",
    "decode_bodies",
    "json_schema",
    "open_log",
    "producers",
    "read_topics",
    "schema_from_json",
    "select_topics",
]

MAGIC = b"\x89MCAP0\r\n"
"""The 8 bytes an MCAP file starts and ends with."""

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
            {"title": "h_ns", "type": "integer", "description": "coupling period [ns]"},
            {"title": "wall_ns", "type": "integer", "description": "wall-clock send time [ns]"},
            {"title": "fields", "type": "object", "properties": props, "required": list(props),
             "additionalProperties": False},
        ],
        "minItems": 7,
        "maxItems": 7,
        "x-berthsim-kind": schema.kind,
        "x-berthsim-wrenches": [list(w) for w in schema.wrenches],
        "x-berthsim-derived": {k: list(v) for k, v in schema.derived.items()},
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
        wrenches = tuple((str(w), str(p)) for w, p in doc.get("x-berthsim-wrenches", ()))
        derived = {str(k): (str(v[0]), str(v[1])) for k, v in doc.get("x-berthsim-derived", {}).items()}
        return TopicSchema(doc["title"], int(items[0]["const"]), doc["x-berthsim-kind"], fields, wrenches, derived)
    except (ValueError, KeyError, IndexError, TypeError, AttributeError, RecursionError, MessageError) as err:
        raise LogError(f"schema: not a berthsim JSON schema ({type(err).__name__}: {str(err)[:200]})") from err


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


def check_head(path: Path) -> None:
    """Raise :class:`errors.LogError` (naming the file) unless ``path`` is a readable file that starts as MCAP."""
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
    foreign: dict[str, int] = field(default_factory=dict)
    """Topic -> message count of the channels that are not berthsim's (another encoding than msgpack,
    a schema that is not a berthsim JSON schema): left out of :attr:`topics` and of every read."""
    _ours: frozenset[int] | None = field(default=None, repr=False)
    """The ids of berthsim's channels (None: every channel)."""

    def foreign_note(self) -> str:
        """One line counting and naming the skipped foreign channels ("" when there are none)."""
        if not self.foreign:
            return ""
        names = sorted(self.foreign)
        shown = ", ".join(repr(t[:60]) for t in names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        return (f"log {str(self.path)!r}: skipped {len(names)} channel(s) that are not berthsim's "
                f"({sum(self.foreign.values())} messages): {shown}")

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
                                     b.seq.tolist(), strict=True))

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
        ours = self._ours
        chan = {cid: c.topic for cid, c in summary.channels.items()
                if (ours is None or cid in ours) and (want is None or c.topic in want)}
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
            cols = [np.concatenate(c) for c in zip(*held, strict=True)] if len(held) > 1 else held[0]
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
            name = chan.get(cid)
            if name is None:
                continue
            o = at - ci.chunk_start_offset
            op, _, index_cid, nbytes = _INDEX_HEAD.unpack_from(raw, o)
            if op != Opcode.MESSAGE_INDEX or index_cid != cid:
                raise LogError(f"log {str(self.path)!r}: bad message index for channel {cid} at byte {at}")
            pairs = np.frombuffer(raw, "<i8", count=nbytes // 8, offset=o + _INDEX_HEAD.size).reshape(-1, 2)
            times.append(pairs[:, 0])
            offsets.append(pairs[:, 1])
            codes.append(len(pairs))
            names.append(name)
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
        payload = _objects([data[a:b] for a, b in zip(start.tolist(), end.tolist(), strict=True)])
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
        t, pos, topic, payload, wall, seq = zip(*msgs, strict=True)
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
        """The run configuration (``config.json`` attachment), or None if the log has none.

        Raises
        ------
        LogError
            One line naming the file and the attachment, when it is not a JSON object whose
            ``sim`` and ``services`` (when present) are tables and every service a table.
        """
        data = self.attachments().get("config.json")
        if data is None:
            return None
        where = f"log {str(self.path)!r}: attachment 'config.json'"
        try:
            cfg = json.loads(data)
        except RecursionError as err:
            raise LogError(f"{where}: nested too deeply to read") from err
        except ValueError as err:  # (JSONDecodeError, UnicodeDecodeError)
            raise LogError(f"{where}: not JSON ({type(err).__name__}: {str(err)[:120]})") from err
        if not isinstance(cfg, dict):
            raise LogError(f"{where}: expected a JSON object, got {type(cfg).__name__}")
        for key in ("sim", "services"):
            if not isinstance(cfg.get(key, {}), dict):
                raise LogError(f"{where}: {key!r} is not an object")
        bad = [str(n)[:60] for n, svc in cfg.get("services", {}).items() if not isinstance(svc, dict)]
        if bad:
            raise LogError(f"{where}: services {bad[:3]} are not objects")
        return cfg

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
    check_head(p)
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
        ours = _berthsim_channels(summary)
        counts: dict[str, int] = {}
        foreign: dict[str, int] = {}
        for cid, c in summary.channels.items():
            n = st.channel_message_counts.get(cid, 0)
            if cid in ours:
                counts[c.topic] = n
            else:
                foreign[c.topic] = foreign.get(c.topic, 0) + n
        mine = [c for cid, c in summary.channels.items() if cid in ours]
        names = {c.topic: summary.schemas[c.schema_id].name for c in mine}
        data = {c.topic: summary.schemas[c.schema_id].data for c in mine}
        return LogFile(p, f, reader, counts, names, st.message_start_time, st.message_end_time,
                       st.message_count - sum(foreign.values()), st.chunk_count, data, foreign, frozenset(ours))
    except LogError:
        f.close()
        raise
    except (McapError, EOFError, ValueError, OSError, KeyError, IndexError) as err:
        f.close()
        raise LogError(f"log {str(p)!r}: corrupt MCAP ({type(err).__name__}: {err})") from err


def _berthsim_channels(summary: Any) -> set[int]:
    """The ids of the channels a berthsim logger writes: msgpack messages, a berthsim JSON schema
    (:func:`schema_from_json`; each schema read once). Any other channel is foreign content."""
    good: dict[int, bool] = {}
    for sid, sch in summary.schemas.items():
        try:
            good[sid] = sch.encoding == "jsonschema" and bool(schema_from_json(sch.data))
        except LogError:
            good[sid] = False
    return {cid for cid, c in summary.channels.items() if c.message_encoding == "msgpack" and good.get(c.schema_id)}


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


def decode_bodies(topic: str, bodies: list[bytes], schema: TopicSchema | None = None) -> dict[str, Any]:
    """The columns of :func:`read_topics` for message bodies held in memory (a run's frames, not a log).

    Parameters
    ----------
    topic : str
    bodies : list of bytes
        The msgpack bodies, in time order (frames without their ``topic\\0`` prefix).
    schema : TopicSchema, optional
        Default: the code's schema of the topic (:data:`protocol.messages.SCHEMAS`).

    Raises
    ------
    LogError
        A topic with no schema, or a body that does not match it (naming the topic).
    """
    if schema is None:
        schema = SCHEMAS.get(topic)
        if schema is None:
            raise LogError(f"frames of topic {topic!r}: no schema for it")
    return _topic_arrays("frames", topic, schema, bodies)


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


# ---------------------------------------------------------------- topics and their producers
def select_topics(available: Iterable[str], topics: Iterable[str] | None = None,
                  exclude: Iterable[str] = ()) -> list[str]:
    """Logged topics selected by ``topics`` patterns minus ``exclude`` patterns (fnmatch).

    ``sim/*`` topics are selected only by a pattern that starts with ``sim/``.

    Parameters
    ----------
    available : iterable of str
        The log's topics.
    topics : iterable of str, optional
        Patterns to include (default: every topic but ``sim/*``).
    exclude : iterable of str
        Patterns to leave out.

    Returns
    -------
    list of str
        Sorted selected topics.

    Raises
    ------
    ConfigError
        If a pattern of ``topics`` or ``exclude`` matches no logged topic (every such
        pattern is named, with the logged topics).
    """
    avail = sorted(available)
    pats = list(topics) if topics else []
    excl = list(exclude)
    unknown = [p for p in pats + excl if not any(fnmatch.fnmatchcase(t, p) for t in avail)]
    if unknown:
        raise ConfigError(f"unknown topics {unknown}: no logged topic matches (logged: {', '.join(avail)})",
                          [f"topic pattern {p!r} matches no logged topic" for p in unknown])
    if pats:
        chosen = [t for t in avail if any(fnmatch.fnmatchcase(t, p) and (not t.startswith("sim/")
                                                                          or p.startswith("sim/")) for p in pats)]
    else:
        chosen = [t for t in avail if not t.startswith("sim/")]
    return [t for t in chosen if not any(fnmatch.fnmatchcase(t, p) for p in excl)]


def producers(log: LogFile, topics: Iterable[str] | None = None) -> dict[str, str]:
    """Topic -> sender of its first logged message (the service that produced it).

    Raises
    ------
    LogError
        If a message cannot be read (the file is named).
    """
    want = list(topics if topics is not None else log.topics)
    first: dict[str, bytes] = {}
    for b in log.blocks(want):  # one pass, until every topic has shown up
        for topic, payload in zip(b.topic.tolist(), b.payload.tolist(), strict=True):
            first.setdefault(topic, payload)
        if len(first) == len(want):
            break
    out: dict[str, str] = {}
    for topic in want:
        payload = first.get(topic)
        if payload is None:
            continue
        try:
            out[topic] = envelope(topic, payload)[1]
        except MessageError:
            out[topic] = msgpack.unpackb(payload, raw=False)[1] if payload else ""
    return out
