"""ROS 2 messages of berthsim topics: definitions (``ros2msg``), field names, CDR encoding.

Shared by the ROS 2 export (:mod:`tools.export_ros2`, a ROS 2 MCAP of a log) and the live
viewer (:mod:`services.viewer`, its ``/ros2/<topic>`` channels), so a message has one
definition and one encoding in both:

- :func:`msg_definition`: the generated message ``berthsim_msgs/msg/<Name>`` of a topic
  (``std_msgs/Header header``, ``t_ns``, ``h_ns``, ``seq``, ``wall_ns`` (int64), ``sender``,
  then each schema field under its ROS 2 name: ``f8`` scalars ``float64``, vectors and
  matrices fixed-size ``float64[N]`` in C order, ``int`` int64, ``bool``, ``str`` string,
  ``list[str]`` string[], a map ``diagnostic_msgs/KeyValue[]`` (values as text), events
  ``berthsim_msgs/Event[]`` (``kind``, ``t``, ``json``));
- :func:`standard_definition`: the standard types the export uses (``geometry_msgs``,
  ``sensor_msgs/JointState``, ``tf2_msgs/TFMessage``), as ROS 2 Humble defines them;
- a definition's text is the ``ros2msg`` schema of ROS 2 MCAP: the root type's fields, then
  each dependency after a line of 80 ``=`` and ``MSG: pkg/Type``;
- :func:`ros2_name`: the field name table (``docs/field_tools.md``, "Field names");
- :func:`generated_messages`: the messages of decoded log columns, as dicts;
- :func:`cdr_encoder`: dict -> CDR bytes (little-endian, with the 4-byte encapsulation
  header), mcap-ros2-support's encoder, the one its MCAP writer applies;
- :data:`STANDARD`: the standard-type companions of a topic (``geometry_msgs/PoseStamped``,
  ``TwistStamped``, ``WrenchStamped``, ``sensor_msgs/JointState``; the table is in
  :mod:`tools.export_ros2`) and :func:`tf_message` (``tf2_msgs/TFMessage``): the export's
  ``/<topic>/<suffix>`` and ``/tf``, the viewer's ``/ros2/<topic>/<suffix>`` and ``/ros2/tf``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np
from scipy.spatial.transform import Rotation

from dynamics.rms import JOINT_NAMES
from errors import ConfigError
from protocol.messages import TopicSchema
from services.export_scene import Transform, xyzw

__all__ = ["MSG_PACKAGE", "STANDARD", "cdr_encoder", "generated_messages", "header", "msg_definition", "ros2_name",
           "standard_definition", "tf_message", "vec"]

MSG_PACKAGE = "berthsim_msgs"
"""The ROS 2 package of the generated message types."""

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


def standard_definition(name: str) -> tuple[str, str]:
    """A standard type's (type name ``pkg/msg/Name``, ``ros2msg`` text with its dependencies).

    Parameters
    ----------
    name : str
        ``pkg/Name``: ``geometry_msgs/PoseStamped``, ``geometry_msgs/TwistStamped``,
        ``geometry_msgs/WrenchStamped``, ``sensor_msgs/JointState``, ``tf2_msgs/TFMessage``, or
        one of their dependencies.

    Raises
    ------
    KeyError
        A type not defined here.
    """
    return _msgdef(name, _STD[name], _DEPS.get(name, ()))


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


def header(t_ns: int, frame: str) -> dict[str, Any]:
    """A ``std_msgs/Header`` of simulation time ``t_ns`` [ns] in ``frame``."""
    return {"stamp": {"sec": t_ns // 1_000_000_000, "nanosec": t_ns % 1_000_000_000}, "frame_id": frame}


def vec(v: Any) -> dict[str, float]:
    """A ``geometry_msgs/Vector3`` (or ``Point``) of the first three components of ``v``."""
    return {"x": float(v[0]), "y": float(v[1]), "z": float(v[2])}


def generated_messages(schema: TopicSchema, cols: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The generated message (:func:`msg_definition`) of each message of decoded columns, as dicts.

    Parameters
    ----------
    schema : TopicSchema
        The topic's schema.
    cols : mapping
        Its columns as :func:`protocol.logfile.read_topics` or ``decode_bodies`` give them
        (``t_ns``, ``h_ns``, ``seq``, ``wall_ns``, ``sender``, then each field; ``f8`` arrays
        ``(n, *shape)``).

    Returns
    -------
    list of dict
        One per message, keyed by ROS 2 field name; ``header.stamp`` = ``t_ns``, ``frame_id`` empty.
    """
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
        m["header"] = header(m["t_ns"], "")
        for name, r, ftype in conv:
            val = cols[name][i]
            if ftype == "map":
                m[r] = [{"key": k, "value": str(x)} for k, x in val.items()]
            else:
                m[r] = [{"kind": str(e.get("kind", "")), "t": float(e.get("t", float("nan"))),
                         "json": json.dumps(e, sort_keys=True)} for e in val]
        out.append(m)
    return out


def cdr_encoder(name: str, text: str) -> Callable[[dict[str, Any]], bytes]:
    """The CDR encoder of a message type: dict (as :func:`generated_messages` gives) -> bytes.

    Parameters
    ----------
    name, text : str
        The type name (``pkg/msg/Name``) and its ``ros2msg`` text (:func:`msg_definition`,
        :func:`standard_definition`).

    Raises
    ------
    ConfigError
        mcap-ros2-support missing, or ``text`` does not define ``name``.
    """
    try:
        from mcap_ros2._dynamic import serialize_dynamic  # the encoder mcap_ros2.writer.Writer applies
    except ImportError as err:
        raise ConfigError(f"ROS 2 encoding needs mcap-ros2-support (pip install -e '.[export]'): {err}") from err
    encoders = serialize_dynamic(name, text)
    if name not in encoders:
        raise ConfigError(f"ros2msg definition of {name!r}: the text does not define it")
    encode: Callable[[dict[str, Any]], bytes] = encoders[name]
    return encode


# ---------------------------------------------------------------- the standard companions
def _pose(p: Any, q_xyzw: Any) -> dict[str, Any]:
    return {"position": vec(p), "orientation": {k: float(x) for k, x in zip("xyzw", q_xyzw, strict=True)}}


def _body(p_name: str, q_name: str, v_name: str, w_name: str, frame: str) -> list[tuple[str, str, Callable]]:
    """PoseStamped and TwistStamped (ω turned from the body frame into W) of a body state topic."""

    def poses(t: list[int], c: Mapping[str, Any]) -> list[dict[str, Any]]:
        q = np.roll(c[q_name], -1, axis=1)  # wxyz -> xyzw
        return [{"header": header(ti, frame), "pose": _pose(p, qi)} for ti, p, qi in zip(t, c[p_name], q, strict=True)]

    def twists(t: list[int], c: Mapping[str, Any]) -> list[dict[str, Any]]:
        w_W = Rotation.from_quat(c[q_name], scalar_first=True).apply(np.array(c[w_name]))
        return [{"header": header(ti, frame), "twist": {"linear": vec(v), "angular": vec(w)}}
                for ti, v, w in zip(t, c[v_name], w_W, strict=True)]

    return [("pose", "geometry_msgs/PoseStamped", poses), ("twist", "geometry_msgs/TwistStamped", twists)]


def _wrench(field: str, frame: str) -> Callable:
    def build(t: list[int], c: Mapping[str, Any]) -> list[dict[str, Any]]:
        return [{"header": header(ti, frame), "wrench": {"torque": vec(F[:3]), "force": vec(F[3:])}}
                for ti, F in zip(t, c[field], strict=True)]

    return build


def _joints(t: list[int], c: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [{"header": header(ti, ""), "name": list(JOINT_NAMES), "position": q, "velocity": qd, "effort": tau}
            for ti, q, qd, tau in zip(t, c["q"].tolist(), c["qd"].tolist(), c["tau"].tolist(), strict=True)]


def _hil_pose(t: list[int], c: Mapping[str, Any]) -> list[dict[str, Any]]:
    p, q = xyzw(c["X_LB"])
    return [{"header": header(ti, "latch"), "pose": _pose(pi, qi)} for ti, pi, qi in zip(t, p, q, strict=True)]


def _hil_twist(t: list[int], c: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [{"header": header(ti, "latch"), "twist": {"angular": vec(V[:3]), "linear": vec(V[3:])}}
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


def tf_message(t_ns: int, tfs: list[Transform], p: np.ndarray, q: np.ndarray) -> dict[str, Any]:
    """A ``tf2_msgs/TFMessage`` of one instant: each (parent, child) of ``tfs`` with its translation ``p`` (n, 3)
    [m] and rotation ``q`` (n, 4) (x, y, z, w) (:func:`services.export_scene.transforms`)."""
    return {"transforms": [{"header": header(t_ns, parent), "child_frame_id": child,
                            "transform": {"translation": vec(pi), "rotation": dict(zip("xyzw", qi.tolist(),
                                                                                          strict=True))}}
                           for (parent, child, _), pi, qi in zip(tfs, p, q, strict=True)]}
