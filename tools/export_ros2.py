"""``launch.py export LOG --format ros2 [--topics P,..] [--out FILE]``: a log as a ROS 2 bag (MCAP, CDR).

Writes ``<LOG stem>.ros2.mcap`` beside the log (profile ``ros2``, message encoding ``cdr``,
schema encoding ``ros2msg``, written with ``mcap-ros2-support``), readable by ``ros2 bag``
(rosbag2's MCAP storage), ``rosbags``, Foxglove and PlotJuggler. The log itself is only
read. ``log_time`` = ``publish_time`` = every ``header.stamp`` = the simulation time.
Each channel carries ``offered_qos_profiles`` metadata as rosbag2 writes it (reliable,
volatile, keep-last; ``/tf_static`` transient-local), so ``ros2 bag play`` offers the
same QoS.

Channels
--------
``/<topic>`` — every logged topic, a generated message ``berthsim_msgs/msg/<Name>``
(:func:`msg_definition`): ``std_msgs/Header header``, ``t_ns``, ``h_ns``, ``seq``,
``wall_ns`` (int64), ``sender``, then each schema field under its ROS 2 name
(:func:`ros2_name`; the table is in ``docs/field_tools.md``): ``f8`` scalars ``float64``,
vectors and matrices fixed-size ``float64[N]`` in C order, ``int`` int64, ``bool``,
``str`` string, ``list[str]`` string[], a map ``diagnostic_msgs/KeyValue[]`` (values as
text), events ``berthsim_msgs/Event[]`` (``kind``, ``t``, ``json``). ``sim/stats`` is split
per service (``/sim/stats/<service>``).

Standard types where they fit (:data:`STANDARD`):

=============================  ===============================  ============================================
channel                        type                             content, ``header.frame_id``
=============================  ===============================  ============================================
``/orbiter/state/pose``        ``geometry_msgs/PoseStamped``    ``X_WO``, ``lvlh``
``/orbiter/state/twist``       ``geometry_msgs/TwistStamped``   ω (rotated to W) and v of Oo, ``lvlh``
``/payload/state/pose``, …     same                             the payload T
``/arm/state/joint_states``    ``sensor_msgs/JointState``       q, qd, tau (:data:`dynamics.rms.JOINT_NAMES`)
``/arm/wrench/end_effector``   ``geometry_msgs/WrenchStamped``  ``F_Eo_W`` (about Eo), ``lvlh``
``/arm/wrench/shoulder``       ``geometry_msgs/WrenchStamped``  ``F_So_W`` (about So), ``lvlh``
``/contact/wrench/stamped``    ``geometry_msgs/WrenchStamped``  ``F_Lo_W`` (on the orbiter, about Lo), ``lvlh``
``/hil/command/pose``          ``geometry_msgs/PoseStamped``    ``X_LB``, ``latch``
``/hil/command/twist``         ``geometry_msgs/TwistStamped``   ``V_LB_L``, ``latch``
``/hil/feedback/wrench``       ``geometry_msgs/WrenchStamped``  ``F_Bo_B`` (about Bo), ``berthing_interface``
``/tf``, ``/tf_static``        ``tf2_msgs/TFMessage``           :mod:`services.export_scene`'s frames
=============================  ===============================  ============================================

A WrenchStamped's point of application is not in the message: it is the one named above.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
from scipy.spatial.transform import Rotation

from dynamics.rms import JOINT_NAMES
from errors import ConfigError
from protocol.logfile import open_log, read_topics, schema_from_json, select_topics
from protocol.messages import TopicSchema
from services.export_foxglove import STATE_TOPICS, output_path, plot_channel
from services.export_scene import Transform, scene_of, transforms, xyzw

__all__ = ["MSG_PACKAGE", "QOS", "QOS_STATIC", "STANDARD", "export_ros2", "msg_definition", "ros2_name"]

MSG_PACKAGE = "berthsim_msgs"
"""The ROS 2 package of the generated message types."""

_DURATION_INF = "    sec: 2147483647\n    nsec: 4294967295\n"
_QOS = ("- history: 3\n  depth: 0\n  reliability: 1\n  durability: {durability}\n  deadline:\n" + _DURATION_INF
        + "  lifespan:\n" + _DURATION_INF + "  liveliness: 1\n  liveliness_lease_duration:\n" + _DURATION_INF
        + "  avoid_ros_namespace_conventions: false\n")
QOS = _QOS.format(durability=2)
"""``offered_qos_profiles`` of every channel (rosbag2's YAML: reliable, volatile, system-default history)."""
QOS_STATIC = _QOS.format(durability=1)
"""``offered_qos_profiles`` of ``/tf_static`` (transient local, as ``tf2_ros``'s static broadcaster)."""

_SEP = "=" * 80 + "\n"
_STD: dict[str, str] = {
    "builtin_interfaces/Time": "int32 sec\nuint32 nanosec\n",
    "std_msgs/Header": "builtin_interfaces/Time stamp\nstring frame_id\n",
    "geometry_msgs/Vector3": "float64 x\nfloat64 y\nfloat64 z\n",
    "geometry_msgs/Point": "float64 x\nfloat64 y\nfloat64 z\n",
    "geometry_msgs/Quaternion": "float64 x 0\nfloat64 y 0\nfloat64 z 0\nfloat64 w 1\n",
    "geometry_msgs/Pose": "Point position\nQuaternion orientation\n",
    "geometry_msgs/PoseStamped": "std_msgs/Header header\nPose pose\n",
    "geometry_msgs/Twist": "Vector3 linear\nVector3 angular\n",
    "geometry_msgs/TwistStamped": "std_msgs/Header header\nTwist twist\n",
    "geometry_msgs/Wrench": "Vector3 force\nVector3 torque\n",
    "geometry_msgs/WrenchStamped": "std_msgs/Header header\nWrench wrench\n",
    "geometry_msgs/Transform": "Vector3 translation\nQuaternion rotation\n",
    "geometry_msgs/TransformStamped": "std_msgs/Header header\nstring child_frame_id\nTransform transform\n",
    "tf2_msgs/TFMessage": "geometry_msgs/TransformStamped[] transforms\n",
    "sensor_msgs/JointState": "std_msgs/Header header\n\nstring[] name\nfloat64[] position\nfloat64[] velocity\n"
                              "float64[] effort\n",
    "diagnostic_msgs/KeyValue": "string key\nstring value\n",
    f"{MSG_PACKAGE}/Event": "string kind\nfloat64 t\nstring json\n",
}
_DEPS: dict[str, tuple[str, ...]] = {
    "std_msgs/Header": ("builtin_interfaces/Time",),
    "geometry_msgs/Pose": ("geometry_msgs/Point", "geometry_msgs/Quaternion"),
    "geometry_msgs/PoseStamped": ("std_msgs/Header", "geometry_msgs/Pose"),
    "geometry_msgs/Twist": ("geometry_msgs/Vector3",),
    "geometry_msgs/TwistStamped": ("std_msgs/Header", "geometry_msgs/Twist"),
    "geometry_msgs/Wrench": ("geometry_msgs/Vector3",),
    "geometry_msgs/WrenchStamped": ("std_msgs/Header", "geometry_msgs/Wrench"),
    "geometry_msgs/Transform": ("geometry_msgs/Vector3", "geometry_msgs/Quaternion"),
    "geometry_msgs/TransformStamped": ("std_msgs/Header", "geometry_msgs/Transform"),
    "tf2_msgs/TFMessage": ("geometry_msgs/TransformStamped",),
    "sensor_msgs/JointState": ("std_msgs/Header",),
}


def _closure(names: Iterable[str]) -> list[str]:
    out: list[str] = []

    def visit(n: str) -> None:
        for d in _DEPS.get(n, ()):
            visit(d)
        if n not in out:
            out.append(n)

    for n in names:
        visit(n)
    return out


def _full(name: str) -> str:
    """``pkg/Name`` -> ``pkg/msg/Name`` (the type name ROS 2 bags carry)."""
    pkg, short = name.split("/")
    return f"{pkg}/msg/{short}"


def _msgdef(root: str, text: str, deps: Iterable[str]) -> tuple[str, str]:
    """The ``ros2msg`` schema: the root's definition, then each dependency after a separator line."""
    return _full(root), text + "".join(f"{_SEP}MSG: {d}\n{_STD[d]}" for d in _closure(deps) if d != root)


def ros2_name(name: str) -> str:
    """The ROS 2 field name of a berthsim field name (lowercase snake; the table in ``docs/field_tools.md``).

    Monogram groups are split where a lowercase letter or digit meets an uppercase one and
    before an uppercase letter that starts a point name (``Oo``), then lowercased:
    ``p_WoOo_W`` -> ``p_wo_oo_w``, ``v_WOo_W`` -> ``v_w_oo_w``, ``F_Lo_W`` -> ``f_lo_w``,
    ``quat_WO`` -> ``quat_wo``, ``X_LB`` -> ``x_lb``. ROS 2 field names: ``[a-z][a-z0-9_]*``, no ``__``, no
    trailing ``_``.

    Raises
    ------
    ConfigError
        The result is not a valid ROS 2 field name (naming the field).
    """
    out = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()
    if not re.fullmatch(r"[a-z][a-z0-9]*(_[a-z0-9]+)*", out):
        raise ConfigError(f"field {name!r}: no valid ROS 2 field name ({out!r})")
    return out


def msg_definition(schema: TopicSchema) -> tuple[str, str]:
    """The generated ROS 2 message of a topic: (type name ``berthsim_msgs/msg/<Name>``, ``ros2msg`` text).

    Raises
    ------
    ConfigError
        Two fields of the schema map to one ROS 2 name, or a name is invalid.
    """
    short = schema.name.rsplit(".", 1)[-1]
    lines = ["std_msgs/Header header", "int64 t_ns", "int64 h_ns", "int64 seq", "int64 wall_ns", "string sender"]
    deps = ["std_msgs/Header"]
    seen = {"header", "t_ns", "h_ns", "seq", "wall_ns", "sender"}
    for name, (ftype, shape) in schema.fields.items():
        r = ros2_name(name)
        if r in seen:
            raise ConfigError(f"{schema.name}: field {name!r} maps to the ROS 2 name {r!r} twice")
        seen.add(r)
        if ftype == "f8":
            lines.append(f"float64[{int(np.prod(shape))}] {r}" if shape else f"float64 {r}")
        elif ftype == "map":
            lines.append(f"diagnostic_msgs/KeyValue[] {r}")
            deps.append("diagnostic_msgs/KeyValue")
        elif ftype == "events":
            lines.append(f"{MSG_PACKAGE}/Event[] {r}")
            deps.append(f"{MSG_PACKAGE}/Event")
        else:
            lines.append({"int": "int64", "bool": "bool", "str": "string", "list[str]": "string[]"}[ftype] + f" {r}")
    name = f"{MSG_PACKAGE}/{short}"
    return _msgdef(name, "\n".join(lines) + "\n", deps)


# ---------------------------------------------------------------- the standard companions
def _stamp(t_ns: int) -> dict[str, int]:
    return {"sec": t_ns // 1_000_000_000, "nanosec": t_ns % 1_000_000_000}


def _header(t_ns: int, frame: str) -> dict[str, Any]:
    return {"stamp": _stamp(t_ns), "frame_id": frame}


def _vec(v: Any) -> dict[str, float]:
    return {"x": float(v[0]), "y": float(v[1]), "z": float(v[2])}


def _pose(p: Any, q_xyzw: Any) -> dict[str, Any]:
    return {"position": _vec(p), "orientation": {k: float(x) for k, x in zip("xyzw", q_xyzw, strict=True)}}


def _body(p_name: str, q_name: str, v_name: str, w_name: str, frame: str) -> list[tuple[str, str, Callable]]:
    """PoseStamped and TwistStamped (ω turned from the body frame into W) of a body state topic."""

    def poses(t: list[int], c: Mapping[str, Any]) -> list[dict[str, Any]]:
        q = np.roll(c[q_name], -1, axis=1)  # wxyz -> xyzw
        return [{"header": _header(ti, frame), "pose": _pose(p, qi)} for ti, p, qi in zip(t, c[p_name], q, strict=True)]

    def twists(t: list[int], c: Mapping[str, Any]) -> list[dict[str, Any]]:
        w_W = Rotation.from_quat(c[q_name], scalar_first=True).apply(np.array(c[w_name]))
        return [{"header": _header(ti, frame), "twist": {"linear": _vec(v), "angular": _vec(w)}}
                for ti, v, w in zip(t, c[v_name], w_W, strict=True)]

    return [("pose", "geometry_msgs/PoseStamped", poses), ("twist", "geometry_msgs/TwistStamped", twists)]


def _wrench(field: str, frame: str) -> Callable:
    def build(t: list[int], c: Mapping[str, Any]) -> list[dict[str, Any]]:
        return [{"header": _header(ti, frame), "wrench": {"torque": _vec(F[:3]), "force": _vec(F[3:])}}
                for ti, F in zip(t, c[field], strict=True)]

    return build


def _joints(t: list[int], c: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [{"header": _header(ti, ""), "name": list(JOINT_NAMES), "position": q, "velocity": qd, "effort": tau}
            for ti, q, qd, tau in zip(t, c["q"].tolist(), c["qd"].tolist(), c["tau"].tolist(), strict=True)]


def _hil_pose(t: list[int], c: Mapping[str, Any]) -> list[dict[str, Any]]:
    p, q = xyzw(c["X_LB"])
    return [{"header": _header(ti, "latch"), "pose": _pose(pi, qi)} for ti, pi, qi in zip(t, p, q, strict=True)]


def _hil_twist(t: list[int], c: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [{"header": _header(ti, "latch"), "twist": {"angular": _vec(V[:3]), "linear": _vec(V[3:])}}
            for ti, V in zip(t, c["V_LB_L"], strict=True)]


STANDARD: dict[str, list[tuple[str, str, Callable]]] = {
    "orbiter/state": _body("p_WoOo_W", "quat_WO", "v_WOo_W", "w_WO_O", "lvlh"),
    "payload/state": _body("p_WoTo_W", "quat_WT", "v_WTo_W", "w_WT_T", "lvlh"),
    "arm/state": [("joint_states", "sensor_msgs/JointState", _joints)],
    "arm/wrench": [("end_effector", "geometry_msgs/WrenchStamped", _wrench("F_Eo_W", "lvlh")),
                   ("shoulder", "geometry_msgs/WrenchStamped", _wrench("F_So_W", "lvlh"))],
    "contact/wrench": [("stamped", "geometry_msgs/WrenchStamped", _wrench("F_Lo_W", "lvlh"))],
    "hil/command": [("pose", "geometry_msgs/PoseStamped", _hil_pose),
                    ("twist", "geometry_msgs/TwistStamped", _hil_twist)],
    "hil/feedback": [("wrench", "geometry_msgs/WrenchStamped", _wrench("F_Bo_B", "berthing_interface"))],
}
"""Topic -> [(channel suffix, standard type, builder (t_ns list, columns) -> messages)] (see the module docstring)."""


def _generated(schema: TopicSchema, cols: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The generated message of each logged message, as the dicts mcap-ros2-support encodes."""
    n = len(cols["t_ns"])
    lists: dict[str, list[Any]] = {k: cols[k].tolist() for k in ("t_ns", "h_ns", "seq", "wall_ns", "sender")}
    conv: list[tuple[str, str, str]] = []
    for name, (ftype, shape) in schema.fields.items():
        r = ros2_name(name)
        v = cols[name]
        if ftype == "f8" and shape:
            lists[r] = v.reshape(n, -1).tolist()
        elif ftype in ("f8", "int", "bool", "str"):
            lists[r] = v.tolist()
        elif ftype == "list[str]":
            lists[r] = [list(x) for x in v]
        else:
            conv.append((name, r, ftype))
    out = []
    for i in range(n):
        m = {k: col[i] for k, col in lists.items()}
        m["header"] = _header(m["t_ns"], "")
        for name, r, ftype in conv:
            val = cols[name][i]
            if ftype == "map":
                m[r] = [{"key": k, "value": str(x)} for k, x in val.items()]
            else:
                m[r] = [{"kind": str(e.get("kind", "")), "t": float(e.get("t", float("nan"))),
                         "json": json.dumps(e, sort_keys=True)} for e in val]
        out.append(m)
    return out


def _tf_message(t_ns: int, tfs: list[Transform], p: np.ndarray, q: np.ndarray) -> dict[str, Any]:
    return {"transforms": [{"header": _header(t_ns, parent), "child_frame_id": child,
                            "transform": {"translation": _vec(pi), "rotation": dict(zip("xyzw", qi.tolist(),
                                                                                          strict=True))}}
                           for (parent, child, _), pi, qi in zip(tfs, p, q, strict=True)]}


_FIXED = frozenset({"latch", "grapple", "berthing_interface", "shoulder"})
"""Frames fixed in their parent: on ``/tf_static`` once."""


# ---------------------------------------------------------------- the export
def export_ros2(log_path: str | Path, out: str | Path | None = None,
                topics: Iterable[str] | None = None) -> dict[str, Any]:
    """Write the ROS 2 MCAP of a log (see the module docstring).

    Parameters
    ----------
    log_path : path
        A finished berthsim log.
    out : path, optional
        Output file, or a directory (default: ``<log stem>.ros2.mcap`` beside the log).
    topics : iterable of str, optional
        fnmatch patterns of the topics exported (default: every topic); ``/tf`` and
        ``/tf_static`` come from the state topics regardless.

    Returns
    -------
    dict
        ``path`` (Path), ``channels`` (channel -> messages written), ``messages`` (total).

    Raises
    ------
    LogError
        A bad log (named). ConfigError: patterns matching no topic, the log as ``out``, a
        field without a valid ROS 2 name, a ``[hil]`` that does not parse, mcap-ros2-support missing.
    """
    try:
        from mcap_ros2.writer import Writer
    except ImportError as err:
        raise ConfigError(f"--format ros2 needs mcap-ros2-support (pip install -e '.[export]'): {err}") from err
    path = output_path(log_path, out, ".ros2.mcap")
    with open_log(log_path) as log:
        ours = sorted(log.topics)  # berthsim's channels (a foreign recorder's are left out by open_log)
        chosen = select_topics(ours, list(topics)) if topics else ours
        arrays = read_topics(log, sorted(set(chosen) | set(STATE_TOPICS) & set(ours)))
        schemas = {t: schema_from_json(log.schema_data[t]) for t in chosen}
        config = log.config()
        meta = log.metadata().get("berthsim.run", {})
        attachments = log.attachments()
        t0 = log.start_ns
    defs = {t: msg_definition(schemas[t]) for t in chosen}  # refuses a bad name before a file is made

    # (t_ns, order, channel, type, message); written in time order
    queue: list[tuple[int, int, str, str, Any]] = []
    for k, topic in enumerate(chosen):
        cols = arrays[topic]
        t = cols["t_ns"].tolist()
        for m in _generated(schemas[topic], cols):
            queue.append((m["t_ns"], k, plot_channel(topic, m["sender"]), topic, m))
        for j, (suffix, typ, build) in enumerate(STANDARD.get(topic, [])):
            queue += [(ti, 100 + 10 * k + j, f"/{topic}/{suffix}", typ, m) for ti, m in zip(t, build(t, cols),
                                                                                          strict=True)]
    scene = scene_of(config, with_arm="arm/state" in arrays, with_rig="hil/command" in arrays)
    sets = list(transforms(scene, arrays))
    if sets:
        p, q = xyzw(np.array([X for _, _, tfs in sets for _, _, X in tfs]))
        k = 0
        statics: dict[tuple[str, str], Any] = {}
        for t, _, tfs in sets:
            n = len(tfs)
            moving = [i for i, (parent, child, X) in enumerate(tfs) if child not in _FIXED]
            for i in range(n):
                if tfs[i][1] in _FIXED:
                    statics.setdefault((tfs[i][0], tfs[i][1]), (t0, tfs[i], p[k + i], q[k + i]))
            queue.append((t, 1, "/tf", "tf2_msgs/TFMessage",
                          _tf_message(t, [tfs[i] for i in moving], p[k + np.array(moving, dtype=int)],
                                      q[k + np.array(moving, dtype=int)])))
            k += n
        fixed = list(statics.values())
        queue.append((t0, 0, "/tf_static", "tf2_msgs/TFMessage", _tf_message(
            t0, [f[1] for f in fixed], np.array([f[2] for f in fixed]), np.array([f[3] for f in fixed]))))
    queue.sort(key=lambda e: (e[0], e[1]))

    counts: dict[str, int] = {}
    with path.open("wb") as f:
        w = Writer(f)
        registered: dict[str, Any] = {}
        for t, _, channel, what, msg in queue:
            if channel not in registered:
                name, text = defs[what] if what in defs else _msgdef(what, _STD[what], _DEPS.get(what, ()))
                schema = w.register_msgdef(name, text)
                # mcap-ros2-support's Writer registers a channel without metadata: register it here with rosbag2's
                # offered_qos_profiles (its writer then finds the channel by topic)
                w._channel_ids[channel] = w._writer.register_channel(
                    topic=channel, message_encoding="cdr", schema_id=schema.id,
                    metadata={"offered_qos_profiles": QOS_STATIC if channel == "/tf_static" else QOS})
                registered[channel] = schema
            w.write_message(channel, registered[channel], msg, log_time=t, publish_time=t,
                            sequence=counts.get(channel, 0))
            counts[channel] = counts.get(channel, 0) + 1
        if "config.json" in attachments:
            w.add_attachment(t0, t0, "config.json", "application/json", attachments["config.json"])
        if meta:
            w.add_metadata("berthsim.run", dict(meta))
        w.finish()
    return {"path": path, "channels": counts, "messages": sum(counts.values())}

