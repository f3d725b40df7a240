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
(default 30), ``topics`` (default every topic). Open it in Foxglove or Lichtblick with *Open
connection* → Foxglove WebSocket → ``ws://127.0.0.1:8765`` and the layout
``configs/foxglove_layout.json``.

Service module contract (``kind = "viewer"``): ``TABLES``, ``OPTIONS``, ``validate``,
``build``, ``ports``.
"""

from __future__ import annotations

import importlib.util
import sys
import threading
import time
from typing import Any

from protocol.config import check_value
from protocol.logfile import decode_bodies
from protocol.messages import SCHEMAS, SEPARATOR
from protocol.security import is_loopback_host
from protocol.service import ServicePorts

__all__ = ["OPTIONS", "TABLES", "LiveViewer", "build", "ports", "validate"]

TABLES: tuple[str, ...] = ()
OPTIONS: dict[str, Any] = {"host": str, "port": int, "display_hz": (int, float), "topics": list, "allow_remote": bool}
DEFAULTS: dict[str, Any] = {"host": "127.0.0.1", "port": 8765, "display_hz": 30.0, "topics": [],
                            "allow_remote": False}


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
    ticks : int
        Display ticks so far.
    port : int
        The server's port (the one bound, when asked for 0).
    """

    def __init__(self, config: dict[str, Any], name: str) -> None:
        import foxglove

        from services.export_foxglove import plot_type
        from services.export_scene import scene_of

        svc = {**DEFAULTS, **config["services"][name]}
        self.name = name
        self.topics: tuple[str, ...] = tuple(svc["topics"])
        self._period = 1.0 / float(svc["display_hz"])
        self._ctx = foxglove.Context()
        self._fox = foxglove
        self._plot_type = plot_type
        self._scene = scene_of(config, with_arm=True, with_rig="hil" in config)
        self._server = foxglove.start_server(name=f"berthsim {name}", host=svc["host"], port=int(svc["port"]),
                                             context=self._ctx)
        self.port = int(self._server.port)
        self._channels: dict[str, tuple[Any, Any]] = {}
        from foxglove.messages import FrameTransforms

        self._tf = foxglove.Channel("/tf", schema=FrameTransforms.get_schema(), message_encoding="protobuf",
                                    context=self._ctx)
        self._latest: dict[str, bytes | None] = {}  # None: shown, nothing newer yet
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.received = self.shown = self.dropped = self.ticks = 0
        self._thread = threading.Thread(target=self._show_loop, name=f"{name}-display", daemon=True)
        self._thread.start()

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
            schema = SCHEMAS[topic]
            for kw in plot_rows(schema, cols):
                channel = plot_channel(topic, kw["sender"])
                if channel not in self._channels:
                    fds, cls = self._plot_type(schema)
                    self._channels[channel] = (self._fox.Channel(
                        channel, schema=self._fox.Schema(name=cls.DESCRIPTOR.full_name, encoding="protobuf", data=fds),
                        message_encoding="protobuf", context=self._ctx), cls)
                ch, cls = self._channels[channel]
                ch.log(cls(**kw).SerializeToString(), log_time=int(kw["t_ns"]))
            self.shown += 1
        sets = [(t, tfs) for t, _, tfs in transforms(self._scene, arrays)]
        for t, data in tf_messages(sorted(sets, key=lambda s: s[0])):
            self._tf.log(data, log_time=t)

    def close(self) -> None:
        """Stop the display thread and the server; one line with the counts on stderr (idempotent)."""
        if self._stop.is_set():
            return
        self._stop.set()
        self._thread.join(timeout=5.0)
        self._server.stop()
        print(f"berthsim viewer {self.name}: {self.received} frames received, {self.shown} shown, {self.dropped} "
              f"dropped (decimated to {1.0 / self._period:g} Hz; {self.ticks} display ticks)", file=sys.stderr)


def build(config: dict[str, Any], name: str, period_ns: int) -> LiveViewer:
    """The viewer sink of service ``name``."""
    return LiveViewer(config, name)


def ports(config: dict[str, Any], name: str) -> ServicePorts:
    """The viewer is a sink: no ports, it sees every topic."""
    return ServicePorts("sink", (), ())
