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
(:func:`services.ros2_encoding.msg_definition`, shared with the live viewer's ``/ros2/<topic>``
channels; this module re-exports it and :func:`~services.ros2_encoding.ros2_name`):
``std_msgs/Header header``, ``t_ns``, ``h_ns``, ``seq``, ``wall_ns`` (int64), ``sender``,
then each schema field under its ROS 2 name
(:func:`ros2_name`; the table is in ``docs/field_tools.md``): ``f8`` scalars ``float64``,
vectors and matrices fixed-size ``float64[N]`` in C order, ``int`` int64, ``bool``,
``str`` string, ``list[str]`` string[], a map ``diagnostic_msgs/KeyValue[]`` (values as
text), events ``berthsim_msgs/Event[]`` (``kind``, ``t``, ``json``). ``sim/stats`` is split
per service (``/sim/stats/<service>``).

Standard types where they fit (:data:`services.ros2_encoding.STANDARD`, shared with the live viewer's
``/ros2/<topic>/<suffix>`` channels):

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

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from errors import ConfigError
from protocol.logfile import open_log, read_topics, schema_from_json, select_topics
from services.export_foxglove import STATE_TOPICS, output_path, plot_channel
from services.export_scene import scene_of, transforms, xyzw
from services.ros2_encoding import (
    MSG_PACKAGE,
    STANDARD,
    generated_messages,
    msg_definition,
    ros2_name,
    standard_definition,
    tf_message,
)

__all__ = ["MSG_PACKAGE", "QOS", "QOS_STATIC", "STANDARD", "export_ros2", "msg_definition", "ros2_name"]

_DURATION_INF = "    sec: 2147483647\n    nsec: 4294967295\n"
_QOS = ("- history: 3\n  depth: 0\n  reliability: 1\n  durability: {durability}\n  deadline:\n" + _DURATION_INF
        + "  lifespan:\n" + _DURATION_INF + "  liveliness: 1\n  liveliness_lease_duration:\n" + _DURATION_INF
        + "  avoid_ros_namespace_conventions: false\n")
QOS = _QOS.format(durability=2)
"""``offered_qos_profiles`` of every channel (rosbag2's YAML: reliable, volatile, system-default history)."""
QOS_STATIC = _QOS.format(durability=1)
"""``offered_qos_profiles`` of ``/tf_static`` (transient local, as ``tf2_ros``'s static broadcaster)."""


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
        for m in generated_messages(schemas[topic], cols):
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
                          tf_message(t, [tfs[i] for i in moving], p[k + np.array(moving, dtype=int)],
                                      q[k + np.array(moving, dtype=int)])))
            k += n
        fixed = list(statics.values())
        queue.append((t0, 0, "/tf_static", "tf2_msgs/TFMessage", tf_message(
            t0, [f[1] for f in fixed], np.array([f[2] for f in fixed]), np.array([f[3] for f in fixed]))))
    queue.sort(key=lambda e: (e[0], e[1]))

    counts: dict[str, int] = {}
    with path.open("wb") as f:
        w = Writer(f)
        registered: dict[str, Any] = {}
        for t, _, channel, what, msg in queue:
            if channel not in registered:
                name, text = defs[what] if what in defs else standard_definition(what)
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

