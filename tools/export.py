"""``launch.py export LOG --format parquet|csv [--topics P,..] [--out DIR]``: a log as flat tables.

One table per topic (``DIR/<topic with / as __>.parquet`` or ``.csv``; default DIR
``<LOG stem>_export``), one row per message, in ``log_time`` order. Columns:

- ``t_ns``, ``wall_ns`` (int64 ns), ``t_s`` (float64 s), ``seq``, ``sender``;
- every field of the topic's schema (read from the log itself, so a log stays
  exportable when the code's schemas have moved on), flattened: a vector or
  matrix gives one column per element, named ``<field>_<component>_<unit>``;
  a scalar ``<field>_<unit>``. Components: ``x y z`` for 3-vectors, ``w x y z`` for
  quaternions, ``tx ty tz fx fy fz`` for wrenches ``F_*`` [τ; f], ``wx wy wz vx vy vz``
  for spatial velocities ``V_*`` [ω; v], ``1..6`` for joint vectors, ``<row><col>`` for
  matrices (a pose ``X_*`` is unitless in its rotation and in m in its translation).
  Units follow the field-name conventions of ``docs/architecture.md`` (*Conventions*)
  (:func:`field_columns`): ``m``, ``m_s``, ``m_s2``, ``rad``, ``rad_s``, ``rad_s2``,
  ``N``, ``Nm``, ``s``, ``1`` (dimensionless); a field whose unit is not known
  from its name has no unit suffix; lists of strings are joined with ``;``, maps
  and event lists are JSON text.

Parquet needs ``pyarrow``; CSV needs nothing more. Exit codes: 0 written, 2 bad
input (a missing, truncated or non-MCAP log, unknown topics: one line naming it).
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from errors import ConfigError, LogError
from protocol.logfile import LogFile, open_log, read_topics, schema_from_json, select_topics
from protocol.messages import TopicSchema

__all__ = ["FORMATS", "add_arguments", "export", "field_columns", "main", "topic_table", "topic_tables"]

FORMATS = ("parquet", "csv")
MCAP_FORMATS = {"foxglove": ("services.export_foxglove", "export_foxglove"),
                "ros2": ("tools.export_ros2", "export_ros2")}
"""``--format`` values that write one companion MCAP for the field's viewers (module, function)."""

_EXACT_UNITS = {"q": "rad", "qd": "rad_s", "qd_cmd": "rad_s", "qdd": "rad_s2", "tau": "Nm", "legs": "m",
                "x": "m", "v": "m_s", "F": "N", "mass": "kg"}
_PREFIX_UNITS = (("wdot_", "rad_s2"), ("quat_", "1"), ("p_", "m"), ("w_", "rad_s"), ("v_", "m_s"),
                 ("a_", "m_s2"), ("R_", "1"))
_NAMED_UNIT = re.compile(r"_(ns|s|m|deg|rad|deg_s|rad_s|N|Nm|kg)$")
_WRENCH = ("tx", "ty", "tz", "fx", "fy", "fz")
_TWIST = ("wx", "wy", "wz", "vx", "vy", "vz")


def _suffix(name: str, unit: str) -> str:
    return f"{name}_{unit}" if unit else name


def field_columns(name: str, ftype: str, shape: tuple[int, ...]) -> list[tuple[str, str]]:
    """Flat column names of one schema field, each with its unit.

    Parameters
    ----------
    name : str
        Field name (monogram notation, ``docs/architecture.md`` (*Conventions*)).
    ftype : str
        Schema type (:data:`protocol.messages.FIELD_TYPES`).
    shape : tuple of int
        Array shape (``()`` for scalars).

    Returns
    -------
    list of (column, unit)
        One per element, C order; unit ``""`` when unknown.
    """
    if ftype != "f8":
        return [(name, "")]
    if named := _NAMED_UNIT.search(name):  # the unit is in the name already (delay_s, rate_deg_s)
        unit = named.group(1)
        if shape == ():
            return [(name, unit)]
        return [(f"{name}_{i}", unit) for i in range(int(np.prod(shape)))]
    unit = _EXACT_UNITS.get(name, "")
    if not unit:
        unit = next((u for p, u in _PREFIX_UNITS if name.startswith(p)), "")
    if shape == ():
        return [(_suffix(name, unit), unit)]
    n = int(np.prod(shape))
    last = shape[-1]
    rows = n // last
    pre = [f"{name}_{r}_" if rows > 1 else f"{name}_" for r in range(rows)]
    out: list[tuple[str, str]] = []
    if name.startswith("X_") and shape == (4, 4):
        for i in range(4):
            for j in range(4):
                u = "m" if (j == 3 and i < 3) else "1"
                out.append((f"{name}_{i}{j}_{u}", u))
        return out
    if last == 6 and (name.startswith("F_") or name == "loads"):
        return [(f"{p}{c}_{'Nm' if c[0] == 't' else 'N'}", "Nm" if c[0] == "t" else "N") for p in pre for c in _WRENCH]
    if last == 6 and name.startswith("V_"):
        return [(f"{p}{c}_{'rad_s' if c[0] == 'w' else 'm_s'}", "rad_s" if c[0] == "w" else "m_s")
                for p in pre for c in _TWIST]
    if last == 3 and rows == 1:
        comps: Iterable[str] = "xyz"
    elif last == 4 and rows == 1 and name.startswith("quat_"):
        comps = "wxyz"
    elif rows == 1:
        comps = [str(i + 1) for i in range(last)]
    else:
        comps = [str(j) for j in range(last)]
    return [(_suffix(f"{p}{c}", unit), unit) for p in pre for c in comps]


def topic_tables(log: LogFile, topics: Iterable[str], start_ns: int | None = None,
                 end_ns: int | None = None) -> dict[str, dict[str, Any]]:
    """The flattened columns of several topics, read in one pass (see the module docstring).

    Returns
    -------
    dict
        Topic -> (column name -> ``numpy.ndarray`` (numbers, bools) or list (strings),
        all of one length, ``log_time`` order).

    Raises
    ------
    LogError
        Unknown topic, no schema, or a message that does not match its schema (named).
    """
    arrays = read_topics(log, topics, start_ns, end_ns)
    return {t: _columns(schema_from_json(log.schema_data[t]), a) for t, a in arrays.items()}


def topic_table(log: LogFile, topic: str, start_ns: int | None = None, end_ns: int | None = None) -> dict[str, Any]:
    """The flattened columns of one topic (:func:`topic_tables` for one)."""
    return topic_tables(log, [topic], start_ns, end_ns)[topic]


def _columns(schema: TopicSchema, arrays: dict[str, Any]) -> dict[str, Any]:
    """Flat columns from the per-field arrays of :func:`protocol.logfile.read_topics`."""
    t_ns = arrays["t_ns"]
    cols: dict[str, Any] = {"t_ns": t_ns, "t_s": t_ns * 1e-9, "wall_ns": arrays["wall_ns"], "seq": arrays["seq"],
                            "sender": arrays["sender"].tolist()}
    rows = len(t_ns)
    for n, (ftype, shape) in schema.fields.items():
        vals = arrays[n]
        if ftype == "f8" and shape != ():
            flat = vals.reshape(rows, -1)
            for j, (col, _) in enumerate(field_columns(n, ftype, shape)):
                cols[col] = flat[:, j].copy()
        elif ftype == "f8":
            cols[field_columns(n, ftype, shape)[0][0]] = vals
        elif ftype in ("int", "bool"):
            cols[n] = vals
        elif ftype == "str":
            cols[n] = [str(v) for v in vals]
        elif ftype == "list[str]":
            cols[n] = [";".join(v) for v in vals]
        else:
            cols[n] = [json.dumps(v, sort_keys=True) for v in vals]
    return cols


def _file_name(topic: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", topic.replace("/", "__"))


def export(log_path: str | Path, fmt: str, out_dir: str | Path | None = None,
           topics: Iterable[str] | None = None, note: TextIO | None = None) -> dict[str, tuple[Path, int]]:
    """Write one table per topic; topic -> (file, rows).

    Parameters
    ----------
    log_path : path
    fmt : {"parquet", "csv"}
    out_dir : path, optional
        Default ``<log stem>_export`` next to the log.
    topics : iterable of str, optional
        fnmatch patterns (default: every topic, ``sim/*`` included).
    note : text stream, optional
        Where the line counting the log's foreign channels goes (they are skipped;
        :meth:`protocol.logfile.LogFile.foreign_note`).

    Raises
    ------
    LogError
        Bad log (named). ConfigError: unknown format or topic patterns (named).
    """
    if fmt not in FORMATS:
        raise ConfigError(f"--format: expected one of {', '.join(FORMATS)}, got {fmt!r}")
    if fmt == "parquet":
        try:
            import pyarrow as pa
            import pyarrow.parquet as pq
        except ImportError as err:
            raise ConfigError("--format parquet needs the pyarrow package (pip install pyarrow); "
                              "--format csv works without it") from err
    log_path = Path(log_path)
    out = Path(out_dir) if out_dir else log_path.with_name(log_path.stem + "_export")
    written: dict[str, tuple[Path, int]] = {}
    with open_log(log_path) as log:
        if log.foreign and note is not None:
            print(f"berthsim export: note: {log.foreign_note()}", file=note)
        pats = list(topics) if topics else None
        chosen = select_topics(log.topics, pats) if pats else sorted(log.topics)
        out.mkdir(parents=True, exist_ok=True)
        tables = topic_tables(log, chosen)
        for topic in chosen:
            cols = tables[topic]
            rows = len(cols["t_ns"])
            path = out / f"{_file_name(topic)}.{fmt}"
            if fmt == "parquet":
                pq.write_table(pa.table(cols), path, compression="zstd")
            else:
                names = list(cols)
                with path.open("w", newline="") as f:
                    w = csv.writer(f)
                    w.writerow(names)
                    data = [c.tolist() if isinstance(c, np.ndarray) else c for c in cols.values()]
                    w.writerows(zip(*data, strict=True))
            written[topic] = (path, rows)
    return written


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``launch.py export``."""
    p.add_argument("log", help="MCAP log")
    p.add_argument("--format", default="parquet", choices=(*FORMATS, *MCAP_FORMATS),
                   help="parquet, csv: one table per topic; foxglove, ros2: one MCAP for Foxglove/Lichtblick/"
                        "PlotJuggler or ROS 2 (docs/field_tools.md)")
    p.add_argument("--topics", help="comma-separated topic patterns (default: every topic)")
    p.add_argument("--out", help="output directory (default: <LOG stem>_export); foxglove, ros2: output file "
                                 "(default: <LOG stem>.<format>.mcap beside the log)")


def main(a: argparse.Namespace) -> int:
    """``launch.py export``: 0 written (a JSON line with files and rows/s), 2 bad input (one line)."""
    pats = [s.strip() for s in a.topics.split(",") if s.strip()] if a.topics else None
    t0 = time.perf_counter()
    if a.format in MCAP_FORMATS:
        return _main_mcap(a, pats, t0)
    try:
        written = export(a.log, a.format, a.out, pats, note=sys.stderr)
    except (LogError, ConfigError) as err:
        print(f"berthsim export: {str(err).splitlines()[0]}", file=sys.stderr)
        return 2
    dt = time.perf_counter() - t0
    rows = sum(n for _, n in written.values())
    print(json.dumps({"event": "export", "format": a.format, "rows": rows, "rows_per_s": rows / dt if dt else None,
                      "files": {t: str(p) for t, (p, _) in written.items()}}))
    return 0


def _main_mcap(a: argparse.Namespace, pats: list[str] | None, t0: float) -> int:
    """``--format foxglove|ros2``: one JSON line (file, channels, messages, seconds) or one error line, code 2."""
    import importlib

    module, function = MCAP_FORMATS[a.format]
    try:
        out = getattr(importlib.import_module(module), function)(a.log, a.out, pats)
    except (LogError, ConfigError) as err:
        print(f"berthsim export: {str(err).splitlines()[0]}", file=sys.stderr)
        return 2
    print(json.dumps({"event": "export", "format": a.format, "file": str(out["path"]), "messages": out["messages"],
                      "seconds": round(time.perf_counter() - t0, 3), "channels": out["channels"]}))
    return 0
