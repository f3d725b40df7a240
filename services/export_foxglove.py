"""``launch.py export LOG --format foxglove [--topics P,..] [--out FILE]``: a log for Foxglove, Lichtblick, PlotJuggler.

Writes a companion MCAP (default ``<LOG stem>.foxglove.mcap`` beside the log); the log
itself is only read (replay and re-simulation depend on its wire bytes). Every message's
``log_time`` and ``publish_time`` are its simulation time, so the viewers' timelines and
plots run on simulation time. Channels:

Plot channels, one per topic (``/<topic>``; ``sim/stats`` one per service, ``/sim/stats/<service>``)
    Protobuf messages generated at export time from the topic's schema as the log holds it
    (:func:`plot_type`; the channel's schema is a ``FileDescriptorSet``, package
    ``berthsim.plot``, message named as the berthsim schema: ``berthsim.plot.OrbiterState``).
    Fields: ``t_ns``, ``h_ns``, ``seq``, ``wall_ns`` (int64), ``sender``; then each schema
    field under its own name: ``f8`` scalars as ``double``; vectors and matrices as packed
    ``repeated double`` in C order, so each component is a plot path ``/arm/state.q[2]``
    (component order as in :func:`tools.export.field_columns`: ``[τ; f]`` for wrenches,
    ``[ω; v]`` for twists, ``w x y z`` for quaternions, row-major for poses); ``int`` int64,
    ``bool``, ``str``, ``list[str]`` as repeated string; a ``map`` as ``map<string, double>``
    (numbers, booleans as 0/1) plus ``<name>_text`` ``map<string, string>`` (its strings);
    ``events`` as repeated ``Event {kind, t, json}``.
``/tf`` (``foxglove.FrameTransforms``)
    The frame tree of :mod:`services.export_scene`, one message per state message.
``/scene`` (``foxglove.SceneUpdate``)
    At the start, frame-locked shapes: the orbiter's equivalent box, the payload cylinder,
    grapple fixture, trunnions, latch guides, the arm's links, the rig's joints; then, per
    message, arrows ``contact_force`` (``contact/wrench``: the force on the orbiter at Lo,
    in ``lvlh``), ``interface_force`` (``hil/feedback``: the wrench on B, in
    ``berthing_interface``), :data:`ARROW_M_PER_N` metres per newton, and ``rig_legs``
    (``hil/command``: the commanded legs, in ``rig_base``).
``/events`` (``foxglove.Log``)
    Contact events (capture, rigidize, latch, …), operator commands, RCS firings, the
    rig's state changes and faults (error level), the runtime's control messages.

Attachments ``config.json`` (the run's, copied) and metadata ``berthsim.run`` (copied) and
``berthsim.export`` (source log, channel counts). The layout ``configs/foxglove_layout.json``
opens it in Foxglove or Lichtblick (``docs/field_tools.md``).
"""

from __future__ import annotations

import heapq
import json
import math
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from errors import ConfigError
from protocol.logfile import open_log, read_topics, schema_from_json, select_topics
from protocol.messages import TopicSchema
from services.export_scene import Scene, Transform, scene_of, transforms, xyzw

__all__ = ["ARROW_M_PER_N", "PLOT_PACKAGE", "STATE_TOPICS", "export_foxglove", "output_path",
           "plot_channel", "plot_rows", "plot_type", "tf_messages"]

PLOT_PACKAGE = "berthsim.plot"
"""Protobuf package of the plot channels' messages."""
ARROW_M_PER_N = 1e-3
"""Force arrows: metres of arrow per newton (1 m per kN)."""
STATE_TOPICS = ("orbiter/state", "payload/state", "arm/state", "hil/command", "hil/feedback")
"""The topics the frame tree and the force arrows read."""
_EXTRA = ("contact/wrench", "contact/event", "orbiter/event", "operator/command", "hil/status", "sim/control")


def output_path(log_path: str | Path, out: str | Path | None, suffix: str) -> Path:
    """Where an MCAP export goes: ``out`` (a file, or a directory to put ``<stem><suffix>`` in), else beside the log.

    Raises
    ------
    ConfigError
        ``out`` is the log itself.
    """
    log_path = Path(log_path)
    name = log_path.stem + suffix
    path = Path(out) if out else log_path.with_name(name)
    if path.is_dir():
        path = path / name
    if path.resolve() == log_path.resolve():
        raise ConfigError(f"--out: {str(path)!r} is the log itself; the export never overwrites its log")
    return path


def plot_channel(topic: str, sender: str) -> str:
    """The plot channel of a topic's messages from one sender (``sim/stats`` is split per service)."""
    return f"/{topic}/{sender}" if topic == "sim/stats" else f"/{topic}"


# ---------------------------------------------------------------- plot channels (protobuf)
def plot_type(schema: TopicSchema) -> tuple[bytes, Any]:
    """The protobuf message of a topic's plot channel, built with protobuf's descriptor APIs.

    Parameters
    ----------
    schema : TopicSchema
        The topic's schema (as the log holds it: :func:`protocol.logfile.schema_from_json`).

    Returns
    -------
    file_descriptor_set : bytes
        Serialized ``google.protobuf.FileDescriptorSet`` (the MCAP schema's data).
    message_class : type
        The generated message class (full name ``berthsim.plot.<schema name's last part>``).
    """
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    F = descriptor_pb2.FieldDescriptorProto
    short = schema.name.rsplit(".", 1)[-1]
    fdp = descriptor_pb2.FileDescriptorProto(name=f"berthsim/plot/{short}.proto", package=PLOT_PACKAGE,
                                             syntax="proto3")
    msg = fdp.message_type.add(name=short)
    number = 0

    def add(name: str, ftype: int, label: int = F.LABEL_OPTIONAL, type_name: str = "") -> None:
        nonlocal number
        number += 1
        f = msg.field.add(name=name, number=number, type=ftype, label=label)
        if type_name:
            f.type_name = type_name

    for name in ("t_ns", "h_ns", "seq", "wall_ns"):
        add(name, F.TYPE_INT64)
    add("sender", F.TYPE_STRING)
    scalar = {"int": F.TYPE_INT64, "bool": F.TYPE_BOOL, "str": F.TYPE_STRING}
    for name, (ftype, shape) in schema.fields.items():
        if ftype == "f8":
            add(name, F.TYPE_DOUBLE, F.LABEL_REPEATED if shape else F.LABEL_OPTIONAL)
        elif ftype in scalar:
            add(name, scalar[ftype])
        elif ftype == "list[str]":
            add(name, F.TYPE_STRING, F.LABEL_REPEATED)
        elif ftype == "map":
            for field, value in ((name, F.TYPE_DOUBLE), (f"{name}_text", F.TYPE_STRING)):
                entry = "".join(p.capitalize() for p in field.split("_")) + "Entry"
                nested = msg.nested_type.add(name=entry)
                nested.options.map_entry = True
                nested.field.add(name="key", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
                nested.field.add(name="value", number=2, type=value, label=F.LABEL_OPTIONAL)
                add(field, F.TYPE_MESSAGE, F.LABEL_REPEATED, f".{PLOT_PACKAGE}.{short}.{entry}")
        else:  # events
            if not any(n.name == "Event" for n in msg.nested_type):
                ev = msg.nested_type.add(name="Event")
                for i, (n, t) in enumerate((("kind", F.TYPE_STRING), ("t", F.TYPE_DOUBLE), ("json", F.TYPE_STRING))):
                    ev.field.add(name=n, number=i + 1, type=t, label=F.LABEL_OPTIONAL)
            add(name, F.TYPE_MESSAGE, F.LABEL_REPEATED, f".{PLOT_PACKAGE}.{short}.Event")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    cls = message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{PLOT_PACKAGE}.{short}"))
    return descriptor_pb2.FileDescriptorSet(file=[fdp]).SerializeToString(), cls


def plot_rows(schema: TopicSchema, cols: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """Keyword arguments of the plot message, one dict per logged message."""
    n = len(cols["t_ns"])
    lists: dict[str, list[Any]] = {k: cols[k].tolist() for k in ("t_ns", "h_ns", "seq", "wall_ns", "sender")}
    maps: list[str] = []
    events: list[str] = []
    for name, (ftype, shape) in schema.fields.items():
        v = cols[name]
        if ftype == "f8" and shape:
            lists[name] = v.reshape(n, -1).tolist()
        elif ftype in ("f8", "int", "bool", "str"):
            lists[name] = v.tolist()
        elif ftype == "list[str]":
            lists[name] = [list(x) for x in v]
        elif ftype == "map":
            maps.append(name)
        else:
            events.append(name)
    for i in range(n):
        kw = {k: col[i] for k, col in lists.items()}
        for name in maps:
            m = cols[name][i]
            kw[name] = {k: float(x) for k, x in m.items() if isinstance(x, int | float | bool)}
            kw[f"{name}_text"] = {k: x for k, x in m.items() if isinstance(x, str)}
        for name in events:
            kw[name] = [{"kind": str(e.get("kind", "")), "t": float(e.get("t", math.nan)),
                         "json": json.dumps(e, sort_keys=True)} for e in cols[name][i]]
        yield kw


# ---------------------------------------------------------------- 3D and events (foxglove schemas)
def _ts(t_ns: int) -> Any:
    from foxglove.messages import Timestamp

    return Timestamp(sec=t_ns // 1_000_000_000, nsec=t_ns % 1_000_000_000)


def _pose(p: Iterable[float] = (0.0, 0.0, 0.0), q: Iterable[float] = (0.0, 0.0, 0.0, 1.0)) -> Any:
    from foxglove.messages import Pose, Quaternion, Vector3

    x, y, z = p
    qx, qy, qz, qw = q
    return Pose(position=Vector3(x=x, y=y, z=z), orientation=Quaternion(x=qx, y=qy, z=qz, w=qw))


def _turn(a: NDArray[np.float64], d: NDArray[np.float64]) -> list[float]:
    """Quaternion ``[x, y, z, w]`` of the shortest rotation taking unit ``a`` onto the direction of ``d``."""
    d = d / np.linalg.norm(d)
    c = float(a @ d)
    if c < -1.0 + 1e-12:  # opposite: half a turn about any axis normal to a
        n = np.cross(a, [1.0, 0.0, 0.0] if abs(a[0]) < 0.9 else [0.0, 1.0, 0.0])
        n = n / np.linalg.norm(n)
        return [*n.tolist(), 0.0]
    axis = np.cross(a, d)
    s = math.sqrt(2.0 * (1.0 + c))
    return [*(axis / s).tolist(), s / 2.0]


_X = np.array([1.0, 0.0, 0.0])
_Z = np.array([0.0, 0.0, 1.0])


def _color(r: float, g: float, b: float, a: float = 1.0) -> Any:
    from foxglove.messages import Color

    return Color(r=r, g=g, b=b, a=a)


def _static_scene(scene: Scene, t_ns: int, arm: bool) -> Any:
    """The frame-locked shapes (see the module docstring), one ``SceneUpdate``."""
    from foxglove.messages import (
        CubePrimitive,
        CylinderPrimitive,
        LinePrimitive,
        LinePrimitiveLineType,
        Point3,
        SceneEntity,
        SceneUpdate,
        SpherePrimitive,
        Vector3,
    )

    def entity(frame: str, id: str, **prims: Any) -> Any:
        return SceneEntity(timestamp=_ts(t_ns), frame_id=frame, id=id, frame_locked=True, **prims)

    ents = [
        entity("orbiter", "orbiter", cubes=[CubePrimitive(pose=_pose(), size=Vector3(
            x=float(scene.orbiter_box[0]), y=float(scene.orbiter_box[1]), z=float(scene.orbiter_box[2])),
            color=_color(0.8, 0.8, 0.85, 0.15))]),
        entity("payload", "payload", cylinders=[CylinderPrimitive(
            pose=_pose(q=_turn(_Z, _X)), size=Vector3(x=2 * scene.payload_radius, y=2 * scene.payload_radius,
                                                      z=scene.payload_length),
            bottom_scale=1.0, top_scale=1.0, color=_color(0.9, 0.75, 0.3, 0.5))]),
        entity("grapple", "grapple_fixture", cubes=[CubePrimitive(pose=_pose(), size=Vector3(x=0.3, y=0.3, z=0.3),
                                                                  color=_color(0.2, 0.4, 1.0))]),
        entity("berthing_interface", "trunnions", spheres=[
            SpherePrimitive(pose=_pose(p.tolist()), size=Vector3(x=0.2, y=0.2, z=0.2), color=_color(0.9, 0.2, 0.2))
            for p in scene.points_B]),
        entity("latch", "latch_guides", cylinders=[
            CylinderPrimitive(pose=_pose(p.tolist(), _turn(_Z, n)), size=Vector3(x=2 * r, y=2 * r, z=0.01),
                              bottom_scale=1.0, top_scale=1.0, color=_color(0.3, 0.8, 0.3, 0.6))
            for p, n, r in scene.guides]),
    ]
    if arm:
        ents += [entity(frame, frame, lines=[LinePrimitive(
            type=LinePrimitiveLineType.LineStrip, pose=_pose(), thickness=0.2, scale_invariant=False,
            points=[Point3(x=0.0, y=0.0, z=0.0), Point3(x=float(b[0]), y=float(b[1]), z=float(b[2]))],
            color=_color(0.95, 0.95, 0.95))]) for frame, b in zip(
            [f"srms_link{i + 1}" for i in range(6)], scene.bones, strict=True)]
    rig = scene.pose_map.rig if scene.pose_map is not None else None
    if rig is not None and hasattr(rig, "b_R"):
        for frame, pts in (("rig_base", rig.b_R), ("rig_platform", rig.p_P)):
            ents.append(entity(frame, f"{frame}_joints", spheres=[
                SpherePrimitive(pose=_pose(p.tolist()), size=Vector3(x=0.03, y=0.03, z=0.03),
                                color=_color(0.6, 0.6, 0.6)) for p in pts]))
    return SceneUpdate(entities=ents)


def _arrow(t_ns: int, frame: str, id: str, origin: list[float], f: NDArray[np.float64],
           rgb: tuple[float, float, float]) -> Any:
    from foxglove.messages import ArrowPrimitive, SceneEntity, SceneUpdate

    size = float(np.linalg.norm(f))
    q = _turn(_X, f) if size > 0.0 else [0.0, 0.0, 0.0, 1.0]
    return SceneUpdate(entities=[SceneEntity(timestamp=_ts(t_ns), frame_id=frame, id=id, frame_locked=True, arrows=[
        ArrowPrimitive(pose=_pose(origin, q), shaft_length=size * ARROW_M_PER_N, shaft_diameter=0.04,
                       head_length=0.12, head_diameter=0.1, color=_color(*rgb, 1.0 if size > 0.0 else 0.0))])])


def _legs(t_ns: int, scene: Scene, X_RP: NDArray[np.float64]) -> Any:
    from foxglove.messages import LinePrimitive, LinePrimitiveLineType, Point3, SceneEntity, SceneUpdate

    rig = scene.pose_map.rig
    top = X_RP[:3, 3] + rig.p_P @ X_RP[:3, :3].T
    pts = [Point3(x=x, y=y, z=z) for b, p in zip(rig.b_R.tolist(), top.tolist(), strict=True) for x, y, z in (b, p)]
    return SceneUpdate(entities=[SceneEntity(timestamp=_ts(t_ns), frame_id="rig_base", id="rig_legs",
                                             frame_locked=True, lines=[LinePrimitive(
                                                 type=LinePrimitiveLineType.LineList, pose=_pose(), thickness=0.01,
                                                 scale_invariant=False, points=pts,
                                                 color=_color(0.2, 0.6, 1.0))])])


def tf_messages(sets: list[tuple[int, list[Transform]]]) -> list[tuple[int, bytes]]:
    """One encoded ``FrameTransforms`` per set of transforms (the rotations converted in one batch)."""
    from foxglove.messages import FrameTransform, FrameTransforms, Quaternion, Vector3

    if not sets:
        return []
    p, q = xyzw(np.array([X for _, tfs in sets for _, _, X in tfs]))
    P, Q = p.tolist(), q.tolist()
    out, k = [], 0
    for t, tfs in sets:
        stamp = _ts(t)
        msg = []
        for parent, child, _ in tfs:
            (x, y, z), (qx, qy, qz, qw) = P[k], Q[k]
            k += 1
            msg.append(FrameTransform(timestamp=stamp, parent_frame_id=parent, child_frame_id=child,
                                      translation=Vector3(x=x, y=y, z=z), rotation=Quaternion(x=qx, y=qy, z=qz, w=qw)))
        out.append((t, FrameTransforms(transforms=msg).encode()))
    return out


def _events(arrays: Mapping[str, Mapping[str, Any]]) -> Iterator[tuple[int, str, str, str]]:
    """(t_ns, level, name, message) of each event worth a log line (see the module docstring)."""
    for topic in ("contact/event", "orbiter/event", "operator/command"):
        if (a := arrays.get(topic)) is None:
            continue
        for t, sender, evs in zip(a["t_ns"].tolist(), a["sender"], a["events"], strict=True):
            for e in evs:
                rest = {k: v for k, v in e.items() if k not in ("kind", "t", "t_ns")}
                prefix = "command " if topic == "operator/command" else ""
                yield t, "Info", str(sender), f"{prefix}{e.get('kind')}: {json.dumps(rest, sort_keys=True)}"
    if (s := arrays.get("hil/status")) is not None:
        from protocol.config import service_module

        Fault = service_module("hil.bridge").Fault  # the rig's fault bits, as the hil kind names them

        state, faults = None, 0
        for t, sender, st, fa in zip(s["t_ns"].tolist(), s["sender"], s["state"], s["faults"].tolist(), strict=True):
            if st != state:
                yield t, "Warning" if st in ("FAULT", "ESTOP", "PARKING") else "Info", str(sender), f"rig state {st}"
                state = st
            if fa != faults:
                names = "|".join(f.name or "" for f in Fault if f and fa & f) or "none"
                yield t, "Error" if fa else "Info", str(sender), f"rig faults {names} (0x{fa:04x})"
                faults = fa
    if (c := arrays.get("sim/control")) is not None:
        for t, sender, cmd, info in zip(c["t_ns"].tolist(), c["sender"], c["cmd"], c["info"], strict=True):
            if cmd != "probe":
                level = "Error" if cmd == "diverged" else "Info"
                yield t, level, str(sender), f"sim {cmd}: {json.dumps(info, sort_keys=True)}"


# ---------------------------------------------------------------- the export
def export_foxglove(log_path: str | Path, out: str | Path | None = None,
                    topics: Iterable[str] | None = None) -> dict[str, Any]:
    """Write the Foxglove companion MCAP of a log (see the module docstring).

    Parameters
    ----------
    log_path : path
        A finished berthsim log.
    out : path, optional
        Output file, or a directory (default: ``<log stem>.foxglove.mcap`` beside the log).
    topics : iterable of str, optional
        fnmatch patterns of the topics that get plot channels (default: every topic). The
        3D and event channels read what they need regardless.

    Returns
    -------
    dict
        ``path`` (Path), ``channels`` (channel -> messages written), ``messages`` (total).

    Raises
    ------
    LogError
        A bad log (named). ConfigError: patterns matching no topic, the log as ``out``,
        a ``[hil]`` that does not parse, foxglove-sdk or protobuf missing.
    """
    try:
        import foxglove
        from foxglove.mcap import MCAPCompression, MCAPWriteOptions
        from foxglove.messages import FrameTransforms, Log, LogLevel, SceneUpdate
        from google.protobuf import descriptor_pb2  # noqa: F401 - plot_type's
    except ImportError as err:
        raise ConfigError(f"--format foxglove needs foxglove-sdk and protobuf (pip install -e '.[export]'): "
                          f"{err}") from err
    path = output_path(log_path, out, ".foxglove.mcap")
    with open_log(log_path) as log:
        ours = sorted(log.topics)  # berthsim's channels (a foreign recorder's are left out by open_log)
        plotted = select_topics(ours, list(topics)) if topics else ours
        wanted = sorted(set(plotted) | (set(STATE_TOPICS) | set(_EXTRA)) & set(ours))
        arrays = read_topics(log, wanted)
        config = log.config()
        meta = log.metadata().get("berthsim.run", {})
        attachments = log.attachments()
        schemas = {t: schema_from_json(log.schema_data[t]) for t in plotted}
        t0 = log.start_ns
    scene = scene_of(config, with_arm="arm/state" in arrays, with_rig="hil/command" in arrays)

    # every message as (t_ns, channel, encode-later object or bytes), merged in time order
    streams: dict[str, list[tuple[int, Any]]] = {}
    plot_schemas: dict[str, tuple[str, bytes]] = {}
    for topic in plotted:
        fds, cls = plot_type(schemas[topic])
        cols = arrays[topic]
        for kw in plot_rows(schemas[topic], cols):
            channel = plot_channel(topic, kw["sender"])
            plot_schemas[channel] = (cls.DESCRIPTOR.full_name, fds)
            streams.setdefault(channel, []).append((kw["t_ns"], cls(**kw).SerializeToString()))
    sets: list[tuple[int, list[Transform]]] = []
    fixed, legs = [], []
    for t, source, tfs in transforms(scene, arrays):
        sets.append((t, tfs))
        if source == "hil/command" and hasattr(scene.pose_map.rig, "b_R"):
            legs.append((t, _legs(t, scene, tfs[0][2]).encode()))
    sets.sort(key=lambda m: m[0])
    tf = tf_messages(sets)
    fixed.append((t0, _static_scene(scene, t0, "arm/state" in arrays).encode()))
    if (w := arrays.get("contact/wrench")) is not None:
        for t, F, p in zip(w["t_ns"].tolist(), w["F_Lo_W"], w["p_WoLo_W"], strict=True):
            fixed.append((t, _arrow(t, "lvlh", "contact_force", p.tolist(), F[3:], (1.0, 0.3, 0.1)).encode()))
    if (h := arrays.get("hil/feedback")) is not None:
        for t, F in zip(h["t_ns"].tolist(), h["F_Bo_B"], strict=True):
            fixed.append((t, _arrow(t, "berthing_interface", "interface_force", [0.0, 0.0, 0.0], F[3:],
                                    (0.9, 0.1, 0.9)).encode()))
    scene_msgs = list(heapq.merge(sorted(fixed, key=lambda m: m[0]), legs, key=lambda m: m[0]))
    levels = {n: getattr(LogLevel, n) for n in ("Info", "Warning", "Error")}
    events = sorted(((t, Log(timestamp=_ts(t), level=levels[lv], message=msg, name=name, file="", line=0).encode())
                     for t, lv, name, msg in _events(arrays)), key=lambda m: m[0])

    ctx = foxglove.Context()
    writer = foxglove.open_mcap(path, allow_overwrite=True, context=ctx,
                                writer_options=MCAPWriteOptions(compression=MCAPCompression.Zstd))
    counts: dict[str, int] = {}
    try:
        channels: dict[str, Any] = {}
        for name, (sname, data) in sorted(plot_schemas.items()):
            channels[name] = foxglove.Channel(name, schema=foxglove.Schema(name=sname, encoding="protobuf", data=data),
                                              message_encoding="protobuf", context=ctx)
        for name, typ, msgs in (("/tf", FrameTransforms, tf), ("/scene", SceneUpdate, scene_msgs),
                                ("/events", Log, events)):
            if msgs:
                streams[name] = msgs
                channels[name] = foxglove.Channel(name, schema=typ.get_schema(), message_encoding="protobuf",
                                                  context=ctx)
        merged = heapq.merge(*([(t, i, data) for t, data in streams[name]] for i, name in enumerate(streams)),
                             key=lambda m: (m[0], m[1]))
        names = list(streams)
        for t, i, data in merged:
            channels[names[i]].log(data, log_time=t)
        counts = {name: len(streams[name]) for name in names}
        if "config.json" in attachments:
            writer.attach(log_time=t0, create_time=t0, name="config.json", media_type="application/json",
                          data=attachments["config.json"])
        if meta:
            writer.write_metadata("berthsim.run", dict(meta))
        writer.write_metadata("berthsim.export", {"source": str(Path(log_path).name), "format": "foxglove",
                                                  "channels": json.dumps(counts, sort_keys=True)})
    finally:
        writer.close()
    return {"path": path, "channels": counts, "messages": sum(counts.values())}

