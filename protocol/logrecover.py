"""Repair the MCAP log of a killed run: ``recover`` (``launch.py recover LOG``).

Beside :mod:`protocol.logfile`, which reads finished logs: a logger whose writer process
died (SIGKILL, power loss) leaves every complete, flushed chunk readable but no index
and no summary. :func:`recover` copies every complete record with mcap's stream reader,
drops the torn tail, and writes a finished, indexed file with its summary and a
``berthsim.recover`` metadata record saying what was kept.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcap.records import Attachment, Channel, Chunk, DataEnd, Footer, Message, Metadata, Schema
from mcap.stream_reader import StreamReader, breakup_chunk
from mcap.writer import CompressionType, Writer

from errors import LogError
from protocol.logfile import check_head

__all__ = ["RecoverResult", "recover"]


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
    check_head(src)
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
