"""The bus: one interface (after python-can), backends chosen by URL scheme.

Backends
--------
Every caller — the shell, the launcher, the tools — uses the interface only: :class:`Bus`
(the data plane, opened by :func:`open_bus`), :class:`ControlServer` and
:class:`ControlClient` (the control plane; constructing either returns the backend that the
URL's scheme names, as ``can.Bus(interface=...)`` does), :class:`Poller` (one wait over
several of them) and the context functions (:func:`default_context`, :func:`new_context`,
:func:`destroy_context`). This module is the only one that touches ZeroMQ, together with
:mod:`protocol.security` (CurveZMQ keys and the ZAP authenticator), which is part of the
ZeroMQ backend; ``tests/test_imports.py`` fails if any other module imports ``zmq``.

=================  ===============================  =======================================
scheme             backend                          for
=================  ===============================  =======================================
``tcp``, ``ipc``,  ZeroMQ (:class:`ZmqBus`,         runs: between hosts, processes, or the
``inproc``         :class:`ZmqControlServer`, ...)  threads of one process
``memory``         in memory (:class:`MemoryBus`,   unit tests: the same semantics (exact
                   :class:`MemoryControlServer`,    topics, per-publisher order, no drop,
                   ...)                             copies), no sockets, one process
=================  ===============================  =======================================

Topology: a mesh, no broker
---------------------------
Every participant of a run — each service and the launcher — binds one PUB at its own
endpoint and connects its SUB to the PUB of every other participant; ZeroMQ filters
by subscription at the publisher, so a message travels once, publisher to
subscriber, with no intermediate hop. The control plane is a ROUTER in the launcher
(:class:`ControlServer`) and one DEALER per service (:class:`ControlClient`,
identity = service name), carrying msgpack maps.

One base URL (``sim.bus``) names every endpoint (:func:`control_endpoint`,
:func:`mesh_endpoints`):

=====================  =====================  =====================================
base URL               control (ROUTER)       PUB of participant *i* (0 = launcher)
=====================  =====================  =====================================
``tcp://HOST:PORT``    ``tcp://HOST:PORT``    ``tcp://HOST:PORT+1+i``, or the
                                              service's ``endpoint`` from the config
``ipc:///path/bus``    ``ipc:///path/bus.ctl``  ``ipc:///path/bus.NAME.pub``
``inproc://name``      ``inproc://name.ctl``  ``inproc://name.NAME.pub``
``memory://name``      ``memory://name.ctl``  ``memory://name.NAME.pub``
=====================  =====================  =====================================

An unknown scheme raises ``ValueError`` naming it. An ipc endpoint that a live process
serves is never taken over: binding it raises :class:`EndpointInUse` (:func:`claim_ipc`);
the socket file of a run that ended is removed, and each bound ipc file is removed when
its socket closes.

Frames and delivery
-------------------
A message is one frame ``topic | b"\\0" | payload`` (:mod:`protocol.messages`); a
subscription to a topic is to ``topic + b"\\0"``, an exact match. Every socket has
high-water mark 0 (unbounded), so nothing is ever dropped silently: lockstep never
loses a message. ZeroMQ keeps per-publisher order; :class:`SequenceTracker` counts
sequence gaps per (sender, topic). A SUB takes frames of at most :data:`MAX_FRAME_BYTES`
(``ZMQ_MAXMSGSIZE``; ipc and tcp, inproc has no limit). A frame whose body is larger than
:data:`protocol.messages.MAX_PAYLOAD_BYTES` but within that is received, then counted and
dropped by its consumer's decoder like any malformed message. A larger one ZeroMQ refuses
before allocating it, as a protocol error: it closes the connection to that publisher and
does not make it again, so every later frame of that publisher is lost to this subscriber
(its consumers see its topics stop; in lockstep they wait on it) while the other
publishers' frames are untouched. Only a participant of the run can send one (a SUB
connects to the plan's endpoints only).

Receiving on hot paths: :meth:`Bus.drain` hands every queued frame to a callable in a loop
that runs inside the backend, and :attr:`Bus.recv_wait` is the backend's own blocking
receive (timeout :meth:`Bus.set_recv_timeout`, raising :attr:`Bus.Timeout`), so that the
interface adds no Python call per frame.

Threads and shutdown
--------------------
Each object's sockets belong to the thread that uses it. Every socket has linger 0;
``close()`` may be called twice; every object is a context manager. Receives poll
with a timeout and never block forever. The ``inproc://`` backend needs every party
in one process and one ZeroMQ context (the default: :func:`default_context`); the
``memory://`` backend every party in one process.
"""

from __future__ import annotations

import errno
import os
import socket
import stat
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from types import TracebackType
from typing import Any, ClassVar, NamedTuple, Protocol, runtime_checkable
from urllib.parse import urlsplit

import msgpack
import numpy as np
import zmq
from numpy.typing import NDArray

from errors import BusError, BusTimeout
from protocol.messages import MAX_PAYLOAD_BYTES, SEPARATOR
from protocol.security import Security, check_bind

__all__ = [
    "Message", "Bus", "check_url", "control_endpoint", "mesh_endpoints", "open_bus", "ZmqBus", "MemoryBus",
    "ControlServer", "ControlClient", "ZmqControlServer", "ZmqControlClient", "MemoryControlServer",
    "MemoryControlClient", "Poller", "Context", "default_context", "new_context", "destroy_context",
    "SequenceTracker", "split_frame", "LAUNCHER", "EndpointInUse", "EndpointNotLocal", "claim_ipc",
    "MAX_FRAME_BYTES",
]

SCHEMES = ("inproc", "ipc", "tcp", "memory")
ZMQ_SCHEMES = ("inproc", "ipc", "tcp")
Context = zmq.Context
"""The ZeroMQ backend's context type (one shared context carries ``inproc://``); opaque to callers."""
_EVENTS, _POLLIN = int(zmq.EVENTS), int(zmq.POLLIN)  # plain ints: pyzmq's enums cost Python-level arithmetic
LAUNCHER = "launcher"
"""Participant name of the launcher in :func:`mesh_endpoints` (not a valid service name)."""



def _new_prefix(cache: dict[str, bytes], topic: str) -> bytes:
    """``topic\\0``, checked (ValueError if the topic is empty or contains NUL) and kept in ``cache``."""
    if not topic or "\0" in topic:
        raise ValueError(f"topic {topic!r}: must be non-empty and contain no NUL")
    prefix = cache[topic] = topic.encode() + SEPARATOR
    return prefix


class Message(NamedTuple):
    """One received frame: its topic and payload (the msgpack body). ``topic`` is ``""``
    and ``payload`` the whole frame if the frame has no valid ``topic\\0`` prefix."""

    topic: str
    payload: bytes


@runtime_checkable
class Bus(Protocol):
    """What services and the runtime use to talk on the data plane (every backend has all of it).

    Attributes
    ----------
    send_frame : callable
        ``send_frame(frame)`` publishes one whole frame ``topic\\0payload`` (the backend's own
        send, no Python layer between: for hot paths; :meth:`frame_prefix` gives the prefix).
    recv_wait : callable
        ``recv_wait()`` -> the next whole frame, blocking at most the timeout of
        :meth:`set_recv_timeout` (ms; -1: forever), else raising :attr:`Timeout`. The
        backend's own receive: for a loop that takes one frame per wake-up.
    Timeout : type[Exception]
        What :attr:`recv_wait` raises when its timeout passes.
    poll_handle : object
        What :class:`Poller` waits on for this bus.
    """

    # read-only members: a backend may have them as methods, instance or class attributes
    @property
    def send_frame(self) -> Callable[[bytes], Any]: ...

    @property
    def recv_wait(self) -> Callable[[], bytes]: ...

    @property
    def Timeout(self) -> type[BaseException]: ...

    @property
    def poll_handle(self) -> Any: ...

    def send(self, topic: str, payload: bytes) -> None:
        """Publish ``payload`` on ``topic`` (BusError if the bus cannot send)."""
        ...

    def frame_prefix(self, topic: str) -> bytes:
        """``topic\\0``, the start of every frame of ``topic``."""
        ...

    def recv(self, timeout: float | None = 0.0) -> Message | None:
        """The next message, waiting at most ``timeout`` s (None: a long bounded wait of 1 s)."""
        ...

    def recv_frames(self, limit: int = ...) -> list[bytes]:
        """Every frame already queued (at most ``limit``), whole; never waits."""
        ...

    def drain(self, handle: Callable[[bytes], Any]) -> None:
        """``handle(frame)`` for every frame already queued, in order; never waits."""
        ...

    def set_recv_timeout(self, timeout_ms: int) -> None:
        """The timeout of :attr:`recv_wait` [ms] (-1: none)."""
        ...

    def poll(self, timeout_ms: int) -> bool:
        """Whether a frame is queued, waiting at most ``timeout_ms``."""
        ...

    def fileno(self) -> int:
        """A file descriptor that wakes a ``select`` when frames arrive (see the backend for its triggering)."""
        ...

    def subscribe(self, topic: str) -> None:
        """Receive ``topic`` (exact); ``""`` receives every topic."""
        ...

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        ...

    def close(self, linger_ms: int = 0) -> None:
        """Release the sockets (idempotent); what is queued to send is kept for ``linger_ms``."""
        ...

    def wait_delivered(self, timeout_s: float) -> None:
        """After :meth:`close`: wait (at most ``timeout_s``) until what the closed bus still queued is delivered."""
        ...

    def __enter__(self) -> Bus: ...

    def __exit__(self, *exc: Any) -> None: ...


def check_url(url: str) -> tuple[str, str, int | None]:
    """``(scheme, host-or-path, port)`` of a bus URL.

    Raises
    ------
    ValueError
        If the scheme is not inproc, ipc or tcp (naming it), or a tcp URL lacks a port.
    """
    parts = urlsplit(url)
    scheme = parts.scheme
    if scheme not in SCHEMES:
        raise ValueError(f"bus URL {url!r}: unknown scheme {scheme!r} (known: {', '.join(SCHEMES)})")
    if scheme == "memory":
        name = url.split("://", 1)[1]
        if not name:
            raise ValueError(f"bus URL {url!r}: memory needs a name")
        return scheme, name, None
    if scheme != "tcp":
        return scheme, url.split("://", 1)[1], None
    try:
        port = parts.port
    except ValueError as err:
        raise ValueError(f"bus URL {url!r}: bad port") from err
    if port is None or not 0 < port < 65535:
        raise ValueError(f"bus URL {url!r}: tcp needs a port 1..65534")
    return scheme, parts.netloc.rsplit(":", 1)[0], port


def control_endpoint(url: str) -> str:
    """The launcher's control ROUTER endpoint of a base URL (ValueError naming a bad scheme)."""
    scheme, _, _ = check_url(url)
    return url if scheme == "tcp" else f"{url}.ctl"


def mesh_endpoints(url: str, names: Iterable[str], explicit: Mapping[str, str | None] | None = None) -> dict[str, str]:
    """PUB endpoint of every participant: :data:`LAUNCHER` first, then ``names`` in order.

    tcp: participant *i* gets ``PORT + 1 + i`` on the base host unless ``explicit`` gives
    its endpoint (a service on another host). ipc / inproc / memory: ``URL.NAME.pub``.
    """
    scheme, host, port = check_url(url)
    out: dict[str, str] = {}
    for i, name in enumerate([LAUNCHER, *names]):
        given = (explicit or {}).get(name)
        if given:
            check_url(given)
            out[name] = given
        elif port is not None:  # tcp
            out[name] = f"tcp://{host}:{port + 1 + i}"
        else:
            out[name] = f"{url}.{name}.pub"
    return out


MAX_FRAME_BYTES = MAX_PAYLOAD_BYTES + (1 << 16)
"""The largest frame a SUB takes (``ZMQ_MAXMSGSIZE``): the decoder's largest body and a topic. [bytes]
The schemas' largest fixed body is ``arm/state``'s, about 1.2 kB; the variable ones (events,
``hil/status``'s link map, ``sim/stats``) a few kB: the 1 MiB body limit is a margin of several
hundred, and a 50 MB frame is refused by every subscriber instead of allocated by each."""


def _socket(ctx: zmq.Context, kind: int) -> zmq.Socket:
    s = ctx.socket(kind)
    s.linger = 0
    s.sndhwm = 0
    s.rcvhwm = 0
    s.reconnect_ivl = 10  # ms: peers bind in any order; reconnect quickly
    return s


class _Closing:
    """Context-manager boilerplate for objects with an idempotent ``close``."""

    def __enter__(self) -> Any:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError


class EndpointInUse(BusError):
    """An ipc endpoint is served by another live process (another run)."""


class EndpointNotLocal(BusError):
    """A tcp endpoint names an address that is not this host's (EADDRNOTAVAIL): another host binds it."""


def claim_ipc(ep: str) -> str | None:
    """Make ``ipc://PATH`` free to bind, or refuse it: the path, or None if ``ep`` is not a file path.

    ZeroMQ binds an ipc endpoint by removing whatever file is at its path, a live run's
    socket included, which then silently stops receiving. So a connection is tried first:
    a socket that accepts it belongs to a live process and is refused; one that refuses it
    is the stale file of a run that ended, and is removed.

    Raises
    ------
    EndpointInUse
        If a live process serves the path (the message names it).
    BusError
        If something that is not a socket is at the path.
    """
    if not ep.startswith("ipc://") or ep[6:].startswith("@"):  # (@: Linux's abstract namespace, no file)
        return None
    path = ep[6:]
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return path
    except OSError as err:
        raise BusError(f"ipc endpoint {path!r}: {err.strerror or err}") from err
    if not stat.S_ISSOCK(mode):
        raise BusError(f"ipc endpoint {path!r}: exists and is not a socket")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(1.0)
    try:
        probe.connect(path)
    except (ConnectionRefusedError, FileNotFoundError):
        try:
            os.unlink(path)  # nobody listens: a dead run's file
        except FileNotFoundError:
            pass
        return path
    except OSError as err:
        raise BusError(f"ipc endpoint {path!r}: {err.strerror or err}") from err
    finally:
        probe.close()
    raise EndpointInUse(f"ipc endpoint {path!r} is served by another live run (choose another sim.bus, "
                        "or stop that run)")


def _release_ipc(path: str | None) -> None:
    """Remove the socket file of an ipc endpoint this process bound (after closing it)."""
    if path is not None:
        try:
            os.unlink(path)
        except OSError:
            pass


def _bind(sock: zmq.Socket, ep: str, what: str) -> str | None:
    """Bind ``ep``: a BusError naming it if that fails; for ipc, the socket file's path (:func:`claim_ipc`)."""
    path = claim_ipc(ep)
    try:
        sock.bind(ep)
    except zmq.ZMQError as err:
        cls = EndpointNotLocal if err.errno == errno.EADDRNOTAVAIL else BusError
        raise cls(f"{what}: cannot bind {ep!r}: {err}") from err
    return path


RECV_FRAMES_MAX = 65536
"""Frames one :meth:`ZmqBus.recv_frames` call takes at most (bounds its time and memory)."""
_NOBLOCK = int(zmq.NOBLOCK)  # a plain int: pyzmq's enum flags cost Python-level enum arithmetic per call


class ZmqBus(_Closing):
    """The ZeroMQ data plane of one participant: a PUB bound here, a SUB on the peers' PUBs (:class:`Bus`).

    :meth:`fileno` is ZeroMQ's ``ZMQ_FD``: edge-triggered (after it wakes a ``select``, take
    every queued frame, :meth:`drain`, before waiting on it again); :class:`Poller` has no
    such caveat.

    Parameters
    ----------
    bind : str or None
        This participant's PUB endpoint (None: a receive-only bus).
    connect : Iterable[str]
        The peers' PUB endpoints.
    topics : Iterable[str]
        Topics to subscribe to now (more with :meth:`subscribe`).
    security : Security, optional
        CurveZMQ: the SUB is a CURVE server (a ZAP authenticator must run in the
        context, :meth:`Security.start_authenticator`), the PUB a CURVE client.
    admit : callable, optional
        With one key per process (``security.identities``): ``admit(peer, frame)`` for every
        frame received, ``peer`` the ``User-Id`` the ZAP handler gave its publisher's key (the
        key's name); a frame it refuses is not handed over (the callable counts it).
    context : Context, optional
        Default :func:`default_context` (required to share for ``inproc://``).

    Raises
    ------
    BusError
        Bind failure (``__cause__`` keeps the ZMQError), or a non-loopback tcp bind
        without keys.
    """

    def __init__(self, bind: str | None, connect: Iterable[str] = (), topics: Iterable[str] = (), *,
                 security: Security | None = None, context: Context | None = None,
                 admit: Callable[[str | None, bytes], bool] | None = None) -> None:
        ctx = self._ctx = context or zmq.Context.instance()
        self.pub = _socket(ctx, zmq.PUB)
        self.sub = _socket(ctx, zmq.SUB)
        self.sub.setsockopt(zmq.MAXMSGSIZE, MAX_FRAME_BYTES)
        self._closed = False
        self._ipc_path: str | None = None
        try:
            if bind:
                check_bind(bind, security)
                if security is not None:  # the publisher is the CURVE client, so that the subscriber's
                    security.apply_client(self.pub)  # ZAP handler names who sent each message (User-Id)
                self._ipc_path = _bind(self.pub, bind, "bus")
            if security is not None:
                security.apply_server(self.sub)
            for ep in connect:
                self.sub.connect(ep)
        except zmq.ZMQError as err:
            self.close()
            raise BusError(f"bus: cannot connect: {err}") from err
        except BaseException:
            self.close()
            raise
        self._poller = zmq.Poller()
        self._poller.register(self.sub, zmq.POLLIN)
        self._prefix: dict[str, bytes] = {}
        self.send_frame = _frame_sender(self.pub)
        self.recv_wait = self.sub.recv
        self.poll_handle = self.sub
        # one key per process: each frame's publisher as CurveZMQ authenticated it (ZAP User-Id), to admit
        self._admit = admit if security is not None and security.identities else None
        if self._admit is not None:
            self.recv_wait = self._recv_admitted
        for t in topics:
            self.subscribe(t)

    send_frame: Callable[[bytes], Any]
    """Publish one whole frame ``topic\\0payload`` (bytes; copied, never dropped): ``pub.send`` without
    pyzmq's Python-level wrapper, for hot paths (:meth:`frame_prefix` gives the prefix)."""
    recv_wait: Callable[[], bytes]
    """The SUB's own ``recv``: the next whole frame, blocking at most :meth:`set_recv_timeout`, else
    raising :attr:`Timeout`."""
    Timeout = zmq.Again
    """What :attr:`recv_wait` raises when its timeout passes."""

    def frame_prefix(self, topic: str) -> bytes:
        """``topic\\0``, the start of every frame of ``topic`` (cached; ValueError if the topic is
        empty or contains NUL). ``pub.send(prefix + payload)`` is :meth:`send` without the lookup."""
        return self._prefix.get(topic) or _new_prefix(self._prefix, topic)

    def send(self, topic: str, payload: bytes) -> None:
        """Publish one frame ``topic\\0payload`` (never drops: HWM 0; BusError if the socket cannot send)."""
        try:
            self.pub.send(self.frame_prefix(topic) + payload, copy=True)
        except zmq.ZMQError as err:
            raise BusError(f"bus: cannot send on {topic!r}: {err}") from err

    def subscribe(self, topic: str) -> None:
        """Receive ``topic`` exactly; ``""`` receives everything."""
        self.sub.setsockopt(zmq.SUBSCRIBE, topic.encode() + SEPARATOR if topic else b"")

    def recv(self, timeout: float | None = 0.0) -> Message | None:
        """The next message, or None after ``timeout`` s (None: wait at most 1 s)."""
        ms = 1000 if timeout is None else max(0, int(timeout * 1000 + 0.999))
        if not self._poller.poll(ms):
            return None
        if self._admit is not None:
            try:
                return split_frame(self._recv_admitted(_NOBLOCK))
            except zmq.Again:
                return None
        return split_frame(self.sub.recv(copy=True))

    def _recv_admitted(self, flags: int = 0) -> bytes:
        """The next frame :attr:`_admit` lets through, given its publisher's authenticated name
        (ZAP ``User-Id``; None if the connection has none); raises ``zmq.Again`` as ``recv`` does."""
        recv, admit = self.sub.recv, self._admit
        while True:
            msg = recv(flags, copy=False)
            frame = msg.bytes
            try:
                peer: str | None = str(msg.get("User-Id"))
            except zmq.ZMQError:
                peer = None
            if admit is None or admit(peer, frame):
                return frame

    def recv_frames(self, limit: int = RECV_FRAMES_MAX) -> list[bytes]:
        """Every frame already queued, at most ``limit``, as whole frames ``topic\\0payload``; never waits.

        For sinks that take messages in bulk (:meth:`protocol.shell.Sink.on_frames`):
        no per-message split, lookup or call.
        """
        frames: list[bytes] = []
        append, recv = frames.append, (self.sub.recv if self._admit is None else self._recv_admitted)
        try:
            for _ in range(limit):
                append(recv(_NOBLOCK))
        except zmq.Again:
            pass
        return frames

    def drain(self, handle: Callable[[bytes], Any]) -> None:
        """``handle(frame)`` for every frame already queued, in order; never waits (the loop of
        non-blocking receives runs here: no call between the handler and the socket)."""
        recv = self.sub.recv if self._admit is None else self._recv_admitted
        try:
            while True:
                handle(recv(_NOBLOCK))
        except zmq.Again:
            pass

    def set_recv_timeout(self, timeout_ms: int) -> None:
        """The timeout of :attr:`recv_wait` [ms] (-1: none). A socket option: set it only when it changes."""
        self.sub.rcvtimeo = timeout_ms

    def poll(self, timeout_ms: int) -> bool:
        """Whether a frame is queued, waiting at most ``timeout_ms``."""
        return bool(self.sub.poll(timeout_ms))

    def fileno(self) -> int:
        """The SUB's ``ZMQ_FD`` (edge-triggered: see the class docstring)."""
        return int(self.sub.getsockopt(zmq.FD))

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def close(self, linger_ms: int = 0) -> None:
        """Close both sockets (idempotent); the PUB's queued messages are kept for ``linger_ms``
        (delivered while the context lives: :meth:`wait_delivered` waits for them)."""
        if not self._closed:
            self._closed = True
            self.pub.close(linger=linger_ms)
            self.sub.close(linger=0)
            _release_ipc(self._ipc_path)

    def wait_refused(self, endpoints: Iterable[str], timeout_s: float) -> list[str]:
        """Wait until the subscriber has tried to connect to each of ``endpoints`` and found nothing listening (a
        connection refused: whoever was there is gone), at most ``timeout_s``; the endpoints not yet seen refused.

        What this is for: libzmq (4.3.5) aborts the process (``zap_client.cpp:50``) when a connecting CURVE server,
        as this subscriber is, is closed while a reconnected publisher's handshake reaches its ZAP request (the
        session's pipe to the ZAP handler, made at its first handshake, is already being torn down). A publisher
        whose key is refused is reconnected to every ``reconnect_ivl``, so its handshakes never stop while it
        listens; once its endpoint refuses connections none can be under way, and the subscriber may be closed.
        """
        from zmq.utils.monitor import recv_monitor_message

        left = set(endpoints)
        mon = self.sub.get_monitor_socket(zmq.EVENT_CONNECT_DELAYED | zmq.EVENT_CONNECTED | zmq.EVENT_CONNECT_RETRIED)
        try:
            attempt: dict[str, bool] = {}
            end = time.monotonic() + timeout_s
            while left and (wait := end - time.monotonic()) > 0.0:
                if not mon.poll(max(1, int(wait * 1000))):
                    continue
                ev = recv_monitor_message(mon)
                where = ev["endpoint"].decode()
                if ev["event"] == zmq.EVENT_CONNECT_DELAYED:
                    attempt[where] = True
                elif ev["event"] == zmq.EVENT_CONNECTED:
                    attempt[where] = False
                elif ev["event"] == zmq.EVENT_CONNECT_RETRIED and attempt.get(where):  # tried, never connected
                    left.discard(where)
        finally:
            self.sub.disable_monitor()
            mon.close(linger=0)
        return sorted(left)

    def wait_delivered(self, timeout_s: float) -> None:
        """After :meth:`close` with a linger: terminate the context, which returns once what closed
        sockets queued is delivered, waiting at most ``timeout_s`` (the context's other sockets
        must be closed first; a terminated context takes no new socket)."""
        t = threading.Thread(target=self._ctx.term, name="zmq-flush", daemon=True)
        t.start()
        t.join(timeout_s)


def _frame_sender(sock: zmq.Socket) -> Callable[[bytes], Any]:
    """``sock.send`` bound to pyzmq's compiled ``Socket.send`` (what the Python-level ``send`` calls for
    bytes without routing_id or group), or ``sock.send`` itself where pyzmq has no such base class."""
    base = getattr(zmq.backend, "Socket", None)
    if isinstance(base, type) and isinstance(sock, base) and hasattr(base, "send"):
        return base.send.__get__(sock)
    return sock.send


def split_frame(frame: bytes) -> Message:
    """Split ``topic\\0payload``; a frame without a UTF-8 topic prefix gives ``Message("", frame)``."""
    i = frame.find(SEPARATOR)
    if i <= 0:
        return Message("", frame)
    try:
        return Message(frame[:i].decode(), frame[i + 1:])
    except UnicodeDecodeError:
        return Message("", frame)


def open_bus(bind: str | None, connect: Iterable[str] = (), topics: Iterable[str] = (), *,
             security: Security | None = None, context: Context | None = None,
             admit: Callable[[str | None, bytes], bool] | None = None) -> Bus:
    """Open the bus backend the endpoints' scheme names (inproc/ipc/tcp → :class:`ZmqBus`,
    memory → :class:`MemoryBus`); ``admit``: see :class:`ZmqBus`.

    Raises
    ------
    ValueError
        Unknown scheme (named), or endpoints of two backends, before any socket exists.
    BusError
        An endpoint cannot be bound or connected.
    """
    connect = list(connect)
    eps = ([bind] if bind else []) + connect
    memory = {check_url(ep)[0] == "memory" for ep in eps}
    if len(memory) > 1:
        raise ValueError(f"bus endpoints {eps!r}: memory:// cannot be mixed with ZeroMQ endpoints")
    if memory == {True}:
        return MemoryBus(bind, connect, topics)
    return ZmqBus(bind, connect, topics, security=security, context=context, admit=admit)


class ControlServer(_Closing):
    """The launcher's end of the control plane, at :func:`control_endpoint`: msgpack maps to and
    from services by identity.

    ``ControlServer(url, security=..., context=...)`` returns the backend of ``url``'s scheme
    (:class:`ZmqControlServer`, :class:`MemoryControlServer`), as ``can.Bus`` does.
    ``malformed`` counts the messages dropped because they were not a msgpack map.

    Raises
    ------
    ValueError
        Unknown scheme (named).
    BusError
        The endpoint cannot be bound (:class:`EndpointNotLocal`: a tcp address of another host).
    """

    malformed: int
    poll_handle: Any

    def __new__(cls, url: str, *args: Any, **kwargs: Any) -> Any:
        if cls is not ControlServer:
            return super().__new__(cls)
        return super().__new__(MemoryControlServer if check_url(url)[0] == "memory" else ZmqControlServer)

    def send(self, identity: str, obj: dict[str, Any]) -> bool:  # pragma: no cover - backends
        """Send a map to one peer; False if that peer is not connected."""
        raise NotImplementedError

    def recv(self, timeout: float = 0.0) -> tuple[str, dict[str, Any]] | None:  # pragma: no cover - backends
        """``(identity, map)`` of the next control message, or None after ``timeout`` s (malformed: None)."""
        raise NotImplementedError

    def _parse(self, parts: list[bytes]) -> tuple[str, dict[str, Any]] | None:
        try:
            obj = msgpack.unpackb(parts[-1], raw=False)
            ident = parts[0].decode()
        except Exception:  # noqa: BLE001 - a peer's garbage must not stop the launcher
            self.malformed += 1
            return None
        if not isinstance(obj, dict):
            self.malformed += 1
            return None
        return ident, obj


class ZmqControlServer(ControlServer):
    """:class:`ControlServer` on a ZeroMQ ROUTER."""

    def __init__(self, url: str, *, security: Security | None = None, context: Context | None = None) -> None:
        ep = control_endpoint(url)
        check_bind(url, security)
        ctx = context or zmq.Context.instance()
        self.sock = _socket(ctx, zmq.ROUTER)
        self.sock.router_mandatory = True
        self.poll_handle = self.sock
        self._closed = False
        self.malformed = 0
        self._ipc_path: str | None = None
        try:
            if security is not None:
                security.apply_server(self.sock)
            self._ipc_path = _bind(self.sock, ep, "control")
        except BusError:
            self.close()
            raise
        self._poller = zmq.Poller()
        self._poller.register(self.sock, zmq.POLLIN)

    def send(self, identity: str, obj: dict[str, Any]) -> bool:
        """Send a map to one peer; False if that peer is not connected."""
        try:
            self.sock.send_multipart([identity.encode(), msgpack.packb(obj, use_bin_type=True)], zmq.NOBLOCK)
            return True
        except zmq.ZMQError:
            return False

    def recv(self, timeout: float = 0.0) -> tuple[str, dict[str, Any]] | None:
        """``(identity, map)`` of the next control message, or None after ``timeout`` s.

        Malformed control messages are dropped (returns None)."""
        if not self._poller.poll(int(timeout * 1000)):
            return None
        return self._parse(self.sock.recv_multipart())

    def close(self) -> None:
        """Close (idempotent)."""
        if not self._closed:
            self._closed = True
            self.sock.close(linger=0)
            _release_ipc(self._ipc_path)


class ControlClient(_Closing):
    """A service's end of the control plane (identity = service name).

    ``ControlClient(url, identity, security=..., context=...)`` returns the backend of
    ``url``'s scheme (:class:`ZmqControlClient`, :class:`MemoryControlClient`).

    Raises
    ------
    ValueError
        Unknown scheme (named).
    BusError
        The endpoint cannot be connected.
    """

    poll_handle: Any

    def __new__(cls, url: str, *args: Any, **kwargs: Any) -> Any:
        if cls is not ControlClient:
            return super().__new__(cls)
        return super().__new__(MemoryControlClient if check_url(url)[0] == "memory" else ZmqControlClient)

    def send(self, obj: dict[str, Any]) -> None:  # pragma: no cover - backends
        """Send a map to the launcher (queued if not yet connected; BusError if it cannot be sent)."""
        raise NotImplementedError

    def recv(self, timeout: float = 0.0) -> dict[str, Any] | None:  # pragma: no cover - backends
        """The next map from the launcher, or None after ``timeout`` s (malformed: None)."""
        raise NotImplementedError


class ZmqControlClient(ControlClient):
    """:class:`ControlClient` on a ZeroMQ DEALER."""

    def __init__(self, url: str, identity: str, *, security: Security | None = None,
                 context: Context | None = None) -> None:
        ep = control_endpoint(url)
        ctx = context or zmq.Context.instance()
        self.sock = _socket(ctx, zmq.DEALER)
        self.sock.identity = identity.encode()
        self.poll_handle = self.sock
        self._closed = False
        if security is not None:
            security.apply_client(self.sock)
        try:
            self.sock.connect(ep)
        except zmq.ZMQError as err:
            self.close()
            raise BusError(f"control {ep!r}: cannot connect: {err}") from err

    def send(self, obj: dict[str, Any]) -> None:
        """Send a map to the launcher (queued if not yet connected; BusError if the socket cannot send)."""
        try:
            self.sock.send(msgpack.packb(obj, use_bin_type=True))
        except zmq.ZMQError as err:
            raise BusError(f"control: cannot send: {err}") from err

    def recv(self, timeout: float = 0.0) -> dict[str, Any] | None:
        """The next map from the launcher, or None after ``timeout`` s (malformed: None)."""
        if not self.sock.getsockopt(_EVENTS) & _POLLIN:  # type: ignore[operator]  # EVENTS reads an int
            if timeout <= 0 or not self.sock.poll(int(timeout * 1000)):
                return None
        try:
            obj = msgpack.unpackb(self.sock.recv(), raw=False)
        except Exception:  # noqa: BLE001
            return None
        return obj if isinstance(obj, dict) else None

    def close(self) -> None:
        """Close (idempotent)."""
        if not self._closed:
            self._closed = True
            self.sock.close(linger=0)


# ---------------------------------------------------------------------- in memory
class _Queue:
    """A FIFO of one receiver with a level-triggered file descriptor: readable while not empty
    (so that :class:`Poller` and ``select`` wait on it), thread-safe."""

    def __init__(self) -> None:
        self._q: deque[Any] = deque()
        self._lock = threading.Lock()
        self._ready = threading.Condition(self._lock)
        self._r, self._w = os.pipe()
        os.set_blocking(self._r, False)
        self._signalled = False

    def put(self, item: Any) -> None:
        """Queue ``item`` (dropped if the receiver has closed)."""
        with self._lock:
            if self._w < 0:
                return
            self._q.append(item)
            if not self._signalled:
                os.write(self._w, b"\0")
                self._signalled = True
            self._ready.notify()

    def get(self, timeout_s: float | None = 0.0) -> Any:
        """The next item, waiting at most ``timeout_s`` (None: forever); raises BusTimeout."""
        with self._lock:
            if not self._q and (timeout_s == 0 or not self._ready.wait_for(lambda: self._q, timeout_s)):
                raise BusTimeout("nothing received within the timeout")
            item = self._q.popleft()
            if not self._q and self._signalled:
                os.read(self._r, 1)
                self._signalled = False
            return item

    def __len__(self) -> int:
        return len(self._q)

    def fileno(self) -> int:
        return self._r

    def close(self) -> None:
        with self._lock:
            if self._r >= 0:
                os.close(self._r)
                os.close(self._w)
                self._r = self._w = -1
                self._q.clear()


class _Memory:
    """The in-memory backend's endpoints (one per process): PUB endpoint -> the subscribers connected
    to it, control endpoint -> its server's queue and its clients by identity."""

    lock = threading.Lock()
    bound: ClassVar[set[str]] = set()
    subscribers: ClassVar[dict[str, list[MemoryBus]]] = {}
    servers: ClassVar[dict[str, _Queue]] = {}
    clients: ClassVar[dict[str, dict[str, MemoryControlClient]]] = {}

    @staticmethod
    def server_queue(ep: str) -> _Queue:
        """The queue of the control server at ``ep`` (made if it is not bound yet); call with the lock held."""
        q = _Memory.servers.get(ep)
        if q is None:
            q = _Memory.servers[ep] = _Queue()
        return q


class MemoryBus(_Closing):
    """The in-memory data plane (:class:`Bus`) of ``memory://`` URLs, for unit tests: every participant in one
    process (threads); exact-topic subscriptions filtered at the publisher, per-publisher order, nothing
    dropped, frames copied (bytes). :meth:`fileno` is level-triggered (readable while a frame is queued).

    Parameters
    ----------
    bind, connect, topics
        As :class:`ZmqBus` (``memory://NAME`` endpoints; connecting before the peer binds is allowed).

    Raises
    ------
    BusError
        ``bind`` is bound by a live bus.
    """

    Timeout = BusTimeout
    """What :attr:`recv_wait` raises when its timeout passes."""

    def __init__(self, bind: str | None, connect: Iterable[str] = (), topics: Iterable[str] = ()) -> None:
        self._bind = bind
        self._connect = list(connect)
        self._closed = False
        self._queue = _Queue()
        self._prefixes: tuple[bytes, ...] = ()
        self._all = False
        self._prefix: dict[str, bytes] = {}
        self._timeout_s: float | None = None
        with _Memory.lock:
            if bind:
                if bind in _Memory.bound:
                    self._queue.close()
                    raise BusError(f"bus: cannot bind {bind!r}: in use")
                _Memory.bound.add(bind)
            for ep in self._connect:
                _Memory.subscribers.setdefault(ep, []).append(self)
        self.poll_handle = self._queue.fileno()
        for t in topics:
            self.subscribe(t)

    def _accepts(self, frame: bytes) -> bool:
        return self._all or frame.startswith(self._prefixes)

    def send_frame(self, frame: bytes) -> None:
        """Publish one whole frame ``topic\\0payload`` to every subscriber of its topic."""
        if self._closed:
            raise BusError("bus: send on a closed bus")
        if not self._bind:
            return
        frame = bytes(frame)
        for sub in tuple(_Memory.subscribers.get(self._bind, ())):
            if sub._accepts(frame):
                sub._queue.put(frame)

    def frame_prefix(self, topic: str) -> bytes:
        """``topic\\0`` (cached; ValueError if the topic is empty or contains NUL)."""
        return self._prefix.get(topic) or _new_prefix(self._prefix, topic)

    def send(self, topic: str, payload: bytes) -> None:
        """Publish one frame ``topic\\0payload``."""
        self.send_frame(self.frame_prefix(topic) + payload)

    def subscribe(self, topic: str) -> None:
        """Receive ``topic`` exactly; ``""`` receives everything."""
        if topic:
            self._prefixes = (*self._prefixes, topic.encode() + SEPARATOR)
        else:
            self._all = True

    def recv(self, timeout: float | None = 0.0) -> Message | None:
        """The next message, or None after ``timeout`` s (None: wait at most 1 s)."""
        try:
            return split_frame(self._queue.get(1.0 if timeout is None else max(0.0, timeout)))
        except BusTimeout:
            return None

    def recv_frames(self, limit: int = RECV_FRAMES_MAX) -> list[bytes]:
        """Every frame already queued, at most ``limit``, whole; never waits."""
        get = self._queue.get
        out: list[bytes] = []
        try:
            for _ in range(min(limit, len(self._queue))):
                out.append(get(0))
        except BusTimeout:
            pass
        return out

    def drain(self, handle: Callable[[bytes], Any]) -> None:
        """``handle(frame)`` for every frame already queued, in order; never waits."""
        get = self._queue.get
        try:
            while True:
                handle(get(0))
        except BusTimeout:
            pass

    def recv_wait(self) -> bytes:
        """The next whole frame, waiting at most :meth:`set_recv_timeout`; raises :attr:`Timeout`."""
        frame: bytes = self._queue.get(self._timeout_s)
        return frame

    def set_recv_timeout(self, timeout_ms: int) -> None:
        """The timeout of :meth:`recv_wait` [ms] (-1: none)."""
        self._timeout_s = None if timeout_ms < 0 else timeout_ms / 1000

    def poll(self, timeout_ms: int) -> bool:
        """Whether a frame is queued, waiting at most ``timeout_ms``."""
        return bool(len(self._queue) or _select([self.poll_handle], timeout_ms))

    def fileno(self) -> int:
        """A pipe readable while a frame is queued (level-triggered)."""
        return self.poll_handle

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def close(self, linger_ms: int = 0) -> None:
        """Unbind and disconnect (idempotent). Sent frames are already delivered: nothing lingers."""
        if self._closed:
            return
        self._closed = True
        with _Memory.lock:
            _Memory.bound.discard(self._bind or "")
            for ep in self._connect:
                subs = _Memory.subscribers.get(ep, [])
                if self in subs:
                    subs.remove(self)
                if not subs:
                    _Memory.subscribers.pop(ep, None)
        self._queue.close()

    def wait_delivered(self, timeout_s: float) -> None:
        """Nothing to wait for: a sent frame is in its subscribers' queues."""


def _select(fds: list[int], timeout_ms: int) -> bool:
    import select

    return bool(select.select(fds, [], [], max(0, timeout_ms) / 1000)[0])


class MemoryControlServer(ControlServer):
    """:class:`ControlServer` in memory (``memory://`` URLs); messages msgpack-encoded as on the wire."""

    def __init__(self, url: str, *, security: Security | None = None, context: Context | None = None) -> None:
        self._ep = control_endpoint(url)
        self.malformed = 0
        self._closed = False
        with _Memory.lock:
            if self._ep in _Memory.bound:
                raise BusError(f"control: cannot bind {self._ep!r}: in use")
            _Memory.bound.add(self._ep)
            self._queue = _Memory.server_queue(self._ep)  # clients may have sent already
        self.poll_handle = self._queue.fileno()

    def send(self, identity: str, obj: dict[str, Any]) -> bool:
        """Send a map to one peer; False if that peer is not connected."""
        peer = _Memory.clients.get(self._ep, {}).get(identity)
        if peer is None or self._closed:
            return False
        peer._queue.put(msgpack.packb(obj, use_bin_type=True))
        return True

    def recv(self, timeout: float = 0.0) -> tuple[str, dict[str, Any]] | None:
        """``(identity, map)`` of the next control message, or None after ``timeout`` s (malformed: None)."""
        try:
            parts = self._queue.get(max(0.0, timeout))
        except BusTimeout:
            return None
        return self._parse(parts)

    def close(self) -> None:
        """Unbind (idempotent)."""
        if not self._closed:
            self._closed = True
            with _Memory.lock:
                _Memory.bound.discard(self._ep)
                _Memory.servers.pop(self._ep, None)
            self._queue.close()


class MemoryControlClient(ControlClient):
    """:class:`ControlClient` in memory (``memory://`` URLs)."""

    def __init__(self, url: str, identity: str, *, security: Security | None = None,
                 context: Context | None = None) -> None:
        self._ep = control_endpoint(url)
        self._identity = identity
        self._queue = _Queue()
        self._closed = False
        with _Memory.lock:
            _Memory.clients.setdefault(self._ep, {})[identity] = self
        self.poll_handle = self._queue.fileno()

    def send(self, obj: dict[str, Any]) -> None:
        """Send a map to the launcher (queued if it is not bound yet)."""
        if self._closed:
            raise BusError("control: send on a closed client")
        with _Memory.lock:
            server = _Memory.server_queue(self._ep)  # queued until the server binds
        server.put([self._identity.encode(), msgpack.packb(obj, use_bin_type=True)])

    def recv(self, timeout: float = 0.0) -> dict[str, Any] | None:
        """The next map from the launcher, or None after ``timeout`` s (malformed: None)."""
        try:
            obj = msgpack.unpackb(self._queue.get(max(0.0, timeout)), raw=False)
        except BusTimeout:
            return None
        except Exception:  # noqa: BLE001
            return None
        return obj if isinstance(obj, dict) else None

    def close(self) -> None:
        """Disconnect (idempotent)."""
        if not self._closed:
            self._closed = True
            with _Memory.lock:
                peers = _Memory.clients.get(self._ep, {})
                if peers.get(self._identity) is self:
                    del peers[self._identity]
            self._queue.close()


# ---------------------------------------------------------------------- waiting and contexts
class Poller:
    """One wait over several buses and control ends, of any backend (their ``poll_handle``).

    ``poll(timeout_ms)`` returns a true value (a non-empty list) if any registered object has
    something to receive, waiting at most ``timeout_ms``; it is ZeroMQ's poll itself, no layer
    between.
    """

    def __init__(self) -> None:
        self._poller = zmq.Poller()
        self.poll: Callable[[int], list[Any]] = self._poller.poll

    def register(self, *objs: Any) -> None:
        """Wake on each of ``objs`` (a :class:`Bus`, :class:`ControlServer` or :class:`ControlClient`)."""
        for o in objs:
            self._poller.register(o.poll_handle, zmq.POLLIN)


def default_context() -> Context:
    """The process's shared ZeroMQ context (what the backend uses when given none)."""
    return zmq.Context.instance()


def new_context(io_priority: int = 0) -> Context:
    """A new ZeroMQ context; ``io_priority`` > 0: its I/O thread runs SCHED_FIFO at that priority
    (1..99; libzmq aborts if the process may not, so the caller checks the permission first:
    :func:`protocol.realtime.io_context`)."""
    ctx = zmq.Context()
    if io_priority > 0:
        ctx.set(zmq.THREAD_SCHED_POLICY, os.SCHED_FIFO)
        ctx.set(zmq.THREAD_PRIORITY, min(int(io_priority), 99))
    return ctx


def destroy_context(context: Context) -> None:
    """Close every socket of ``context`` at once (linger 0) and terminate it."""
    context.destroy(linger=0)


class SequenceTracker:
    """Counts sequence gaps per (sender, topic): ``seq`` must grow by one each message.

    The one sequence-gap counter: the shell counts its inputs with it (:meth:`see`), the
    logger whole batches (:meth:`see_batch`).

    Attributes
    ----------
    last : dict[tuple[str, str], int]
        (sender, topic) -> the last ``seq`` seen. A caller on a hot path may test
        ``seq == last[key] + 1`` (or a first message) itself and store ``seq``, calling
        :meth:`see` only otherwise.
    dropped : int
        Messages missed so far (sum of the gaps).
    """

    __slots__ = ("dropped", "last")

    def __init__(self) -> None:
        self.last: dict[tuple[str, str], int] = {}
        self.dropped = 0

    def see(self, sender: str, topic: str, seq: int) -> int:
        """Record one message; return how many were missed before it (0 normally)."""
        key = (sender, topic)
        last = self.last.get(key)
        self.last[key] = seq
        if last is None or seq == last + 1:
            return 0
        missed = seq - last - 1 if seq > last else 0
        self.dropped += missed
        return missed

    def see_batch(self, code: NDArray[np.int64], seq: NDArray[np.int64],
                  name_of: Callable[[int], tuple[str, str]]) -> NDArray[np.int64]:
        """Record a batch of messages in arrival order, as :meth:`see` would one by one.

        Parameters
        ----------
        code : ndarray of int64, shape (n,)
            Each message's (sender, topic) as an integer code (the caller's numbering).
        seq : ndarray of int64, shape (n,)
            Each message's ``seq``.
        name_of : callable
            ``name_of(code) -> (sender, topic)``: the key :attr:`last` holds for a code.

        Returns
        -------
        ndarray of int64, shape (n,)
            How many were missed before each message (0 normally), in the rows' order.
        """
        code = np.asarray(code, dtype=np.int64).reshape(-1)
        seq = np.asarray(seq, dtype=np.int64).reshape(-1)
        missed = np.zeros(len(code), dtype=np.int64)
        if not len(code):
            return missed
        order = np.argsort(code, kind="stable")  # per code, arrival order kept
        key, s = code[order], seq[order]
        first = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
        last = np.r_[first[1:], len(key)] - 1
        prev = np.r_[0, s[:-1]]
        known = np.ones(len(key), bool)
        names = [name_of(k) for k in key[first].tolist()]
        for i, name in zip(first.tolist(), names, strict=True):
            before = self.last.get(name)
            known[i] = before is not None
            prev[i] = before if before is not None else 0
        missed[order] = np.where(known, np.maximum(s - prev - 1, 0), 0)
        for name, v in zip(names, s[last].tolist(), strict=True):
            self.last[name] = v
        self.dropped += int(missed.sum())
        return missed
