"""The ``viewer`` service: a live view of a run in Foxglove or Lichtblick, over a Foxglove WebSocket (foxglove-sdk).

A sink, like the logger: it sees every message of the run and never steps. It serves the
channels of the Foxglove export (:mod:`services.export_foxglove`: a protobuf plot channel
per topic, ``/tf``) on a WebSocket (``foxglove.sdk.v1``), decimated to a display rate:

- the shell hands it frames (``on_frames``); it keeps only the latest frame of each topic
  (a dictionary store per frame, nothing decoded), so it never slows the run;
- a thread of its own wakes ``display_hz`` times per (wall) second, decodes the latest frame
  of each topic and logs it to the server; a frame replaced before it was shown is dropped
  and counted (:attr:`LiveViewer.dropped`), and the counts are printed as one line on
  stderr when the run closes. In one process with the models (``--inprocess``) the display
  thread shares the interpreter with them; a realtime run keeps the viewer in a process of
  its own (the default layout).

Keys of ``[services.NAME]`` (:data:`OPTIONS`): ``host`` (default ``127.0.0.1``; an address
that is not loopback needs ``allow_remote = true``), ``port`` (default 8765), ``display_hz``
(default 30), ``topics`` (default every topic), ``encodings`` (default ``["protobuf"]``). Open it
in Foxglove or Lichtblick with *Open connection* → Foxglove WebSocket → ``ws://127.0.0.1:8765``
and the layout ``configs/foxglove_layout.json``.

ROS 2 channels (``encodings = ["protobuf", "ros2"]``, or ``["ros2"]`` alone): every plot
channel ``/<topic>`` gets a twin ``/ros2/<topic>`` (``/ros2/sim/stats/<service>``) with message
encoding ``cdr`` and schema encoding ``ros2msg``: the ROS 2 export's generated message
``berthsim_msgs/msg/<Name>`` (:mod:`services.ros2_encoding`: the same definition text, field
names and bytes as ``launch.py export --format ros2`` writes), for clients that read ROS 2
messages only (PlotJuggler's Foxglove bridge client). They carry the same decimated messages as
the protobuf channels, and a message is encoded only while a client subscribes to its channel.
The export's standard types come with them (:data:`services.ros2_encoding.STANDARD`):
``/ros2/<topic>/<suffix>`` (``geometry_msgs/PoseStamped``, ``TwistStamped``,
``WrenchStamped``, ``sensor_msgs/JointState``; e.g. ``/ros2/contact/wrench/stamped``), and
``/ros2/tf`` (``tf2_msgs/TFMessage``, every frame of an instant, the fixed ones included).
``/tf`` stays ``foxglove.FrameTransforms``. The default keeps the ROS 2 twins off, so a
Foxglove user's topic list and the viewer's work stay as they were.

Playback control (``launch.py replay LOG --view``): when the run has a replay (a service of
kind ``replay`` in the configuration), the server advertises the ``playbackControl`` and
``time`` capabilities with the replay's window as its time range (``dataStartTime``,
``dataEndTime``: the log's span cut to the replay's ``start``/``end``), and sends, at the
display rate, the playback state (Playing, Paused, or Ended at the window's end; the current
time, the latest log time of the data messages it shows, [ns]; the pace) and the time. The
player's controls (play, pause, seek, speed) become ``playback`` requests to the launcher
(:meth:`LiveViewer.control_requests`, sent by the shell on the viewer's control client), which
forwards them to the replay (:meth:`services.replay.ReplaySource.playback`). A seek is
refused when the run co-simulates services (``--resim``, ``--config --only``): they cannot go
back in time, and forward they would wait for the inputs skipped until their stall timeout;
the answer says ``did_seek = false`` and a warning in the player says why. Pause, play and
speed work with them. A request that cannot be honoured (a speed outside
[0.001, 1000]) is refused the same way and counted (:attr:`LiveViewer.refused`).

Service module contract (``kind = "viewer"``): ``TABLES``, ``OPTIONS``, ``PARAMS``, ``validate``,
``build``, ``ports``. The keys of ``[services.NAME]`` are parsed once into :class:`ViewerParams`, with the
defaults of :data:`DEFAULTS` (frozen, units in its fields' metadata, :mod:`protocol.params`).
"""

from __future__ import annotations

import importlib.util
import math
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from errors import ConfigError
from protocol.config import check_value
from protocol.logfile import decode_bodies
from protocol.messages import SCHEMAS, SEPARATOR
from protocol.params import ServiceTableParams, param
from protocol.registry import has_capability, params
from protocol.security import is_loopback_host
from protocol.service import ServicePorts

__all__ = ["DEFAULTS", "OPTIONS", "PARAMS", "TABLES", "LiveViewer", "ViewerParams", "build", "ports", "validate"]

TABLES: tuple[str, ...] = ()
OPTIONS: dict[str, Any] = {"host": str, "port": int, "display_hz": (int, float), "topics": list, "allow_remote": bool,
                           "encodings": list}
ENCODINGS = ("protobuf", "ros2")
"""The plot channels' encodings: ``protobuf`` (``/<topic>``), ``ros2`` (CDR, ``/ros2/<topic>``)."""
ROS2_PREFIX = "/ros2"
"""The ROS 2 twin of plot channel ``/<topic>`` is ``/ros2/<topic>``."""
RATE_RANGE = (1e-3, 1e3)
"""The paces a replay takes (:data:`services.replay.RATE_MIN`, ``RATE_MAX``; a service does not import another)."""
SEEK_GUARD_S = 2.0
"""After a seek, for at most this long (wall), only messages from the target on move the current time. [s]"""
DEFAULTS: dict[str, Any] = {"host": "127.0.0.1", "port": 8765, "display_hz": 30.0, "topics": [],
                            "allow_remote": False, "encodings": ["protobuf"]}
"""The value of each key of :data:`OPTIONS` that ``[services.NAME]`` leaves out."""


@dataclass(frozen=True)
class ViewerParams(ServiceTableParams):
    """``[services.NAME]`` of a viewer, parsed once (:data:`OPTIONS`, defaults :data:`DEFAULTS`; the module docstring
    says what each key does). Each field's unit is in its metadata (:func:`protocol.params.units`)."""

    DEFAULTS: ClassVar[Mapping[str, Any]] = DEFAULTS

    host: str = param("-")                           # the address the WebSocket server binds
    port: int = param("-")                           # TCP port, 0..65535; 0: any free one
    display_hz: float = param("Hz")                  # display rate (wall clock), in (0, 1000]
    topics: tuple[str, ...] = param("-")             # () : every topic
    allow_remote: bool = param("-")                  # a host that is not loopback is allowed
    encodings: tuple[str, ...] = param("-")          # of ENCODINGS, distinct


PARAMS = ViewerParams
"""The kind's declared parameters (:mod:`protocol.registry`)."""


def validate(config: dict[str, Any], name: str) -> list[str]:
    """Problems of ``[services.NAME]`` of a viewer beyond its options' kinds; each names its full key."""
    where = f"services.{name}"
    svc = {**DEFAULTS, **config["services"][name]}
    if any(check_value(where, svc[k], kind) for k, kind in OPTIONS.items()):
        return []  # listed by protocol.config, naming the key
    out = []
    if not 0 <= svc["port"] <= 65535:
        out.append(f"{where}.port: expected 0..65535 (0: any free port), got {svc['port']!r}")
    if not 0 < svc["display_hz"] <= 1000:
        out.append(f"{where}.display_hz: expected a rate in (0, 1000] Hz, got {svc['display_hz']!r}")
    if not is_loopback_host(svc["host"]) and svc["allow_remote"] is not True:
        out.append(f"{where}.host: {svc['host']!r} is not a loopback address; serving the run beyond this machine "
                   f"needs {where}.allow_remote = true")
    if importlib.util.find_spec("foxglove") is None:
        out.append(f"{where}.kind: the viewer needs foxglove-sdk (pip install -e '.[export]')")
    enc = svc["encodings"]
    if not enc or any(e not in ENCODINGS for e in enc) or len(set(map(str, enc))) != len(enc):
        out.append(f"{where}.encodings: expected a non-empty list of distinct {list(ENCODINGS)}, got {enc!r}")
    elif "ros2" in enc and importlib.util.find_spec("mcap_ros2") is None:
        out.append(f"{where}.encodings: 'ros2' needs mcap-ros2-support (pip install -e '.[export]')")
    unknown = [t for t in svc["topics"] if t not in SCHEMAS]
    if unknown:
        out.append(f"{where}.topics: no schema for {unknown}")
    return out


class LiveViewer:
    """The viewer sink (see the module docstring).

    Attributes
    ----------
    received, shown, dropped : int
        Frames handed in, logged to the server, and replaced before they were shown.
    playback : bool
        The run has a replay: the player's controls drive it.
    time_range : tuple of int, or None
        The replay's window (start, end) in log time [ns] (None without a replay).
    requests, refused : int
        Playback requests sent to the launcher, and refused here (a seek back with co-simulated services,
        a speed out of range, a malformed request).
    ticks : int
        Display ticks so far.
    port : int
        The server's port (the one bound, when asked for 0).
    params : ViewerParams
        ``[services.NAME]`` as parsed.

    Raises
    ------
    ImportError
        Without foxglove-sdk (:func:`validate` names it).
    """

    def __init__(self, config: dict[str, Any], name: str) -> None:
        import foxglove

        from services.export_foxglove import plot_type
        from services.export_scene import scene_of

        self.params = p = ViewerParams.from_service(config, name)
        self.name = name
        self.topics: tuple[str, ...] = p.topics
        self.encodings: frozenset[str] = frozenset(p.encodings)
        self._period = 1.0 / p.display_hz
        self._ctx = foxglove.Context()
        self._fox = foxglove
        self._plot_type = plot_type
        self._scene = scene_of(config, with_arm=True, with_rig="hil" in config)
        self._init_playback(config, name)
        extra: dict[str, Any] = {}
        if self.playback:
            from foxglove.websocket import Capability
            extra = {"capabilities": [Capability.PlaybackControl, Capability.Time],
                     "server_listener": _listener(self), "playback_time_range": self.time_range}
        self._server = foxglove.start_server(name=f"berthsim {name}", host=p.host, port=p.port,
                                             context=self._ctx, **extra)
        self.port = int(self._server.port)
        self._channels: dict[str, tuple[Any, Any]] = {}
        self._ros2_types: dict[str, Any] = {}  # topic -> (type name, ros2msg text, encoder), or None: none
        self._ros2: dict[str, tuple[Any, Any]] = {}  # plot channel -> (its /ros2 twin, encoder)
        self._ros2_std: dict[str, tuple[Any, Any]] = {}  # /ros2/<topic>/<suffix>, /ros2/tf -> (channel, encoder)
        from foxglove.messages import FrameTransforms

        self._tf = foxglove.Channel("/tf", schema=FrameTransforms.get_schema(), message_encoding="protobuf",
                                    context=self._ctx)
        self._latest: dict[str, bytes | None] = {}  # None: shown, nothing newer yet
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.received = self.shown = self.dropped = self.ticks = 0
        self._thread = threading.Thread(target=self._show_loop, name=f"{name}-display", daemon=True)
        self._thread.start()

    # ---------------------------------------------------------------- playback control of a replay
    def _init_playback(self, config: dict[str, Any], name: str) -> None:
        """The replay's window, pace and whether services are co-simulated, from the run's configuration."""
        from protocol.logfile import open_log

        services = config["services"]
        replays = {n: s for n, s in services.items() if has_capability(s, "plays_back")}
        self.playback = bool(replays)
        self.time_range: tuple[int, int] | None = None
        self.requests = self.refused = 0
        self._out: list[dict[str, Any]] = []   # requests for the launcher, taken by the shell's thread
        self._paused = self._ended = False
        self._speed = 1.0
        self._t_now = 0
        self._seek_guard: tuple[int, float] | None = None  # (target [ns], until [monotonic s]) after a seek
        self._co_simulated: list[str] = []
        if not replays:
            return
        starts, ends = [], []
        # each replay's window and pace as the replay reads them: its kind's declared parameters (log, start, end,
        # rate, paused), not the viewer's copy of its defaults
        plays = [_replay_params(config, n) for n in replays]
        for rp in plays:
            with open_log(rp.log) as log:
                log.register_schemas()  # its topics shown even when this program has no schema of them
                lo, hi = log.start_ns, log.end_ns
            if rp.start is not None:
                lo = max(lo, int(round(rp.start * 1e9)))
            if rp.end is not None:
                hi = min(hi, int(round(rp.end * 1e9)))
            starts.append(lo)
            ends.append(hi)
        self.time_range = (min(starts), max(max(ends), min(starts)))
        self._t_now = self.time_range[0]
        self._speed = plays[0].rate or 1.0
        self._paused = plays[0].paused
        self._co_simulated = [n for n in services if n not in replays and _role(config, n) == "model"]

    def control_requests(self) -> list[dict[str, Any]]:
        """The playback requests for the launcher since the last call (the shell sends them on this service's
        control client, from its own thread): ``{"op": "playback", "cmd": "pause" | "play" | "seek" | "rate",
        "t_ns": int [ns], "rate": float}``."""
        with self._lock:
            out, self._out = self._out, []
        return out

    def on_playback_control_request(self, request: Any) -> Any:
        """The player's request (foxglove-sdk's server thread): queue the requests for the replay, answer the
        new state. A seek back with co-simulated services, or a speed out of range, is refused (counted, a
        warning in the player); nothing here raises."""
        from foxglove.websocket import PlaybackCommand, PlaybackState

        did_seek = False
        try:
            with self._lock:
                speed = float(request.playback_speed)
                if speed != self._speed:
                    if math.isfinite(speed) and RATE_RANGE[0] <= speed <= RATE_RANGE[1]:
                        self._out.append({"op": "playback", "cmd": "rate", "rate": speed})
                        self._speed = speed
                    else:
                        self._refuse(f"speed {speed:g}: expected {RATE_RANGE[0]:g} to {RATE_RANGE[1]:g}")
                seek = request.seek_time
                if seek is not None and self.time_range is not None:
                    t = min(max(int(seek), self.time_range[0]), self.time_range[1])
                    if self._co_simulated:
                        self._refuse(f"seek to {t / 1e9:.3f} s refused: the co-simulated services "
                                     f"({', '.join(self._co_simulated)}) cannot go back in time, nor skip their "
                                     "inputs")
                    else:
                        self._out.append({"op": "playback", "cmd": "seek", "t_ns": t})
                        self._t_now, self._ended, did_seek = t, False, True
                        self._seek_guard = (t, time.monotonic() + SEEK_GUARD_S)
                if request.playback_command == PlaybackCommand.Pause and not self._paused:
                    self._out.append({"op": "playback", "cmd": "pause"})
                    self._paused = True
                elif request.playback_command == PlaybackCommand.Play and (self._paused or self._ended):
                    self._out.append({"op": "playback", "cmd": "play"})
                    if self._ended and self.time_range is not None:  # the replay starts again from the start
                        self._t_now = self.time_range[0]
                        self._seek_guard = (self._t_now, time.monotonic() + SEEK_GUARD_S)
                    self._paused = self._ended = False
                self.requests += 1
                return PlaybackState(self._status(), self._t_now, self._speed, did_seek, request.request_id)
        except Exception as err:  # noqa: BLE001 - a request that cannot be read is counted, never fatal
            with self._lock:
                self.refused += 1
            print(f"berthsim viewer {self.name}: playback request dropped: {type(err).__name__}: {err}",
                  file=sys.stderr)
            return None

    def _refuse(self, why: str) -> None:
        """A request not honoured (under the lock): counted, said in the player as a warning."""
        self.refused += 1
        try:
            self._server.publish_status(why, self._fox.StatusLevel.Warning, id="berthsim-playback")
        except Exception:  # noqa: BLE001 - a status that cannot be sent is not worth failing for
            pass

    def _status(self) -> Any:
        from foxglove.websocket import PlaybackStatus
        return (PlaybackStatus.Ended if self._ended else PlaybackStatus.Paused if self._paused
                else PlaybackStatus.Playing)

    def _follow(self, t_seen: int | None) -> None:
        """The display thread: the current time from the latest log time shown; the state to the players."""
        from foxglove.websocket import PlaybackState

        with self._lock:
            if t_seen is not None:
                guard = self._seek_guard
                if guard is not None and time.monotonic() > guard[1]:
                    guard = self._seek_guard = None
                # after a seek, messages published before it (still on their way) do not move the time back
                if guard is None or guard[0] <= t_seen <= guard[0] + int(SEEK_GUARD_S * 1e9 * max(self._speed, 1)):
                    self._seek_guard = None
                    self._t_now = t_seen
            if self.time_range is not None and self._t_now >= self.time_range[1] and not self._paused:
                self._ended = True  # the replay holds at its end (or has ended)
            state = PlaybackState(self._status(), self._t_now, self._speed, False, None)
            t_now = self._t_now
        self._server.broadcast_playback_state(state)
        self._server.broadcast_time(t_now)

    # ---------------------------------------------------------------- the shell's side: store, never decode
    def on_message(self, topic: str, payload: bytes) -> None:
        """Keep the latest message of ``topic`` (the one it replaces is dropped)."""
        with self._lock:
            self.received += 1
            if self._latest.get(topic) is not None:
                self.dropped += 1
            self._latest[topic] = payload

    def on_frames(self, frames: list[bytes]) -> None:
        """:meth:`on_message` for a batch of whole frames (``topic\\0payload``)."""
        latest: dict[str, bytes] = {}
        replaced = 0
        for f in frames:
            i = f.find(SEPARATOR)
            if i <= 0:
                continue
            topic = f[:i].decode("utf-8", "replace")
            replaced += topic in latest
            latest[topic] = f[i + 1:]
        with self._lock:
            self.received += len(frames)
            self.dropped += replaced + sum(self._latest.get(t) is not None for t in latest)
            self._latest.update(latest)

    # ---------------------------------------------------------------- the display thread
    def _show_loop(self) -> None:
        next_s = time.monotonic() + self._period
        while not self._stop.wait(max(next_s - time.monotonic(), 0.0)):
            self.ticks += 1
            self._show()
            next_s = max(next_s + self._period, time.monotonic())  # late: the next tick now, never a burst

    def _show(self) -> None:
        from services.export_foxglove import plot_channel, plot_rows, tf_messages
        from services.export_scene import transforms

        with self._lock:
            latest = {t: b for t, b in self._latest.items() if b is not None}
            self._latest = dict.fromkeys(self._latest)
        arrays = {}
        t_seen: int | None = None
        for topic, body in latest.items():
            if topic == "sim/control" or topic not in SCHEMAS:
                continue
            try:
                cols = decode_bodies(topic, [body])
            except Exception:  # noqa: BLE001 - a malformed message is counted and dropped, never fatal here
                with self._lock:
                    self.dropped += 1
                continue
            arrays[topic] = cols
            if len(cols["t_ns"]) and not topic.startswith("sim/"):  # sim/stats: a service's own time
                t_seen = max(int(cols["t_ns"][-1]), t_seen or 0)
            schema = SCHEMAS[topic]
            if "protobuf" in self.encodings:
                for kw in plot_rows(schema, cols):
                    channel = plot_channel(topic, kw["sender"])
                    if channel not in self._channels:
                        fds, cls = self._plot_type(schema)
                        self._channels[channel] = (self._fox.Channel(
                            channel, schema=self._fox.Schema(name=cls.DESCRIPTOR.full_name, encoding="protobuf",
                                                             data=fds),
                            message_encoding="protobuf", context=self._ctx), cls)
                    ch, cls = self._channels[channel]
                    ch.log(cls(**kw).SerializeToString(), log_time=int(kw["t_ns"]))
            if "ros2" in self.encodings:
                self._show_ros2(topic, cols)
            self.shown += 1
        sets = sorted([(t, tfs) for t, _, tfs in transforms(self._scene, arrays)], key=lambda s: s[0])
        for t, data in tf_messages(sets):
            self._tf.log(data, log_time=t)
        if "ros2" in self.encodings and sets:
            self._show_ros2_tf(sets)
        if self.playback:
            self._follow(t_seen)

    def _ros2_channel(self, channel: str, type_name: str) -> tuple[Any, Any]:
        """A standard-type ROS 2 channel (``/ros2/...``), advertised on first use: (channel, CDR encoder)."""
        from services.ros2_encoding import cdr_encoder, standard_definition

        if channel not in self._ros2_std:
            name, text = standard_definition(type_name)
            self._ros2_std[channel] = (self._fox.Channel(
                channel, schema=self._fox.Schema(name=name, encoding="ros2msg", data=text.encode()),
                message_encoding="cdr", context=self._ctx), cdr_encoder(name, text))
        return self._ros2_std[channel]

    def _show_ros2_tf(self, sets: list[tuple[int, Any]]) -> None:
        """``/ros2/tf``: every frame of each instant as one ``tf2_msgs/TFMessage`` (the fixed ones too: a live
        client may join at any time), encoded only while subscribed."""
        import numpy as np

        from services.export_scene import xyzw
        from services.ros2_encoding import tf_message

        ch, encode = self._ros2_channel(ROS2_PREFIX + "/tf", "tf2_msgs/TFMessage")
        if not ch.has_sinks():
            return
        for t, tfs in sets:
            p, q = xyzw(np.array([X for _, _, X in tfs]))
            ch.log(encode(tf_message(t, tfs, p, q)), log_time=int(t))

    def _show_ros2(self, topic: str, cols: dict[str, Any]) -> None:
        """The ROS 2 twins of a topic's plot channels and its standard-type companions (display thread): CDR,
        encoded only while subscribed."""
        from errors import ConfigError
        from services.export_foxglove import plot_channel
        from services.ros2_encoding import STANDARD, cdr_encoder, generated_messages, msg_definition

        for suffix, type_name, messages in STANDARD.get(topic, ()):
            ch, encode = self._ros2_channel(f"{ROS2_PREFIX}/{topic}/{suffix}", type_name)
            if ch.has_sinks():
                t_ns = cols["t_ns"].tolist()
                for t, msg in zip(t_ns, messages(t_ns, cols), strict=True):
                    ch.log(encode(msg), log_time=int(t))
        schema = SCHEMAS[topic]
        if topic not in self._ros2_types:
            try:
                name, text = msg_definition(schema)
                self._ros2_types[topic] = (name, text, cdr_encoder(name, text))
            except ConfigError as err:  # a field without a ROS 2 name: the topic has no twin, said once
                self._ros2_types[topic] = None
                print(f"berthsim viewer {self.name}: no ROS 2 channel for {topic}: {err}", file=sys.stderr)
        if self._ros2_types[topic] is None:
            return
        name, text, encode = self._ros2_types[topic]
        senders = cols["sender"].tolist()
        todo = []
        for i, sender in enumerate(senders):
            channel = plot_channel(topic, sender)
            if channel not in self._ros2:
                self._ros2[channel] = (self._fox.Channel(
                    ROS2_PREFIX + channel, schema=self._fox.Schema(name=name, encoding="ros2msg", data=text.encode()),
                    message_encoding="cdr", context=self._ctx), encode)
            if self._ros2[channel][0].has_sinks():
                todo.append((i, channel))
        if todo:
            msgs = generated_messages(schema, cols)
            for i, channel in todo:
                ch, encode = self._ros2[channel]
                ch.log(encode(msgs[i]), log_time=int(msgs[i]["t_ns"]))

    def close(self) -> None:
        """Stop the display thread and the server; one line with the counts on stderr (idempotent)."""
        if self._stop.is_set():
            return
        self._stop.set()
        self._thread.join(timeout=5.0)
        self._server.stop()
        print(f"berthsim viewer {self.name}: {self.received} frames received, {self.shown} shown, {self.dropped} "
              f"dropped (decimated to {1.0 / self._period:g} Hz; {self.ticks} display ticks)", file=sys.stderr)


def _listener(viewer: LiveViewer) -> Any:
    """The server's listener (every callback foxglove-sdk may call): the player's requests to ``viewer``."""
    from foxglove.websocket import ServerListener

    class Player(ServerListener):
        def on_playback_control_request(self, playback_control_request: Any) -> Any:
            return viewer.on_playback_control_request(playback_control_request)

    return Player()


def _replay_params(config: Mapping[str, Any], name: str) -> Any:
    """The declared parameters of the replay service ``name`` (its kind's ``PARAMS``, read from its service table
    with the kind's defaults: :class:`protocol.params.ServiceTableParams`).

    Raises
    ------
    ConfigError
        If the kind declares no such parameters (a replay kind must, for a viewer to control it).
    """
    kind = config["services"][name]["kind"]
    cls = params(kind)
    if not (isinstance(cls, type) and issubclass(cls, ServiceTableParams)):
        raise ConfigError(f"services.{name}: kind {kind!r} plays a log back but declares no service-table "
                          "parameters (PARAMS, a protocol.params.ServiceTableParams) for a viewer to read its window")
    return cls.from_service(config, name)


def _role(config: dict[str, Any], name: str) -> str:
    """A configured service's role (``model``, ``sink``, ``source``), from its kind's ``ports`` hook
    (:mod:`protocol.registry`); a kind without one is a model."""
    from protocol.registry import kind_module

    ports_of = getattr(kind_module(config["services"][name]["kind"]), "ports", None)
    return str(ports_of(config, name).role) if callable(ports_of) else "model"


def build(config: dict[str, Any], name: str, period_ns: int) -> LiveViewer:
    """The viewer sink of service ``name``."""
    return LiveViewer(config, name)


def ports(config: dict[str, Any], name: str) -> ServicePorts:
    """The viewer is a sink: no ports, it sees every topic."""
    return ServicePorts("sink", (), ())
