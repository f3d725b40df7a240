"""The bus: one interface (after python-can), ZeroMQ backends chosen by URL scheme.

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
sequence gaps per (sender, topic).

Threads and shutdown
--------------------
Each object's sockets belong to the thread that uses it. Every socket has linger 0;
``close()`` may be called twice; every object is a context manager. Receives poll
with a timeout and never block forever. The ``inproc://`` backend needs every party
in one process and one ZeroMQ context (the default: ``zmq.Context.instance()``).
"""

from __future__ import annotations

import os
import socket
import stat
from collections.abc import Callable, Iterable, Mapping
from types import TracebackType
from typing import Any, NamedTuple, Protocol, runtime_checkable
from urllib.parse import urlsplit

import msgpack
import numpy as np
import zmq
from numpy.typing import NDArray

from errors import BusError
from protocol.messages import SEPARATOR
from protocol.security import Security, check_bind

__all__ = [
    "Message", "Bus", "check_url", "control_endpoint", "mesh_endpoints", "open_bus", "ZmqBus",
    "ControlServer", "ControlClient", "SequenceTracker", "split_frame", "LAUNCHER", "EndpointInUse", "claim_ipc",
]

SCHEMES = ("inproc", "ipc", "tcp")
_EVENTS, _POLLIN = int(zmq.EVENTS), int(zmq.POLLIN)  # plain ints: pyzmq's enums cost Python-level arithmetic
LAUNCHER = "launcher"
"""Participant name of the launcher in :func:`mesh_endpoints` (not a valid service name)."""


class Message(NamedTuple):
    """One received frame: its topic and payload (the msgpack body). ``topic`` is ``""``
    and ``payload`` the whole frame if the frame has no valid ``topic\\0`` prefix."""

    topic: str
    payload: bytes


@runtime_checkable
class Bus(Protocol):
    """What services and the runtime use to talk on the data plane."""

    def send(self, topic: str, payload: bytes) -> None:
        """Publish ``payload`` on ``topic``."""
        ...

    def recv(self, timeout: float | None = 0.0) -> Message | None:
        """The next message, waiting at most ``timeout`` s (None: a long bounded wait of 1 s)."""
        ...

    def subscribe(self, topic: str) -> None:
        """Receive ``topic`` (exact); ``""`` receives every topic."""
        ...

    def close(self) -> None:
        """Release the sockets (idempotent)."""
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
    its endpoint (a service on another host). ipc / inproc: ``URL.NAME.pub``.
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
        raise BusError(f"{what}: cannot bind {ep!r}: {err}") from err
    return path


RECV_FRAMES_MAX = 65536
"""Frames one :meth:`ZmqBus.recv_frames` call takes at most (bounds its time and memory)."""
_NOBLOCK = int(zmq.NOBLOCK)  # a plain int: pyzmq's enum flags cost Python-level enum arithmetic per call


class ZmqBus(_Closing):
    """The ZeroMQ data plane of one participant: a PUB bound here, a SUB on the peers' PUBs.

    Parameters
    ----------
    bind : str or None
        This participant's PUB endpoint (None: a receive-only bus).
    connect : Iterable[str]
        The peers' PUB endpoints.
    topics : Iterable[str]
        Topics to subscribe to now (more with :meth:`subscribe`).
    security : Security, optional
        CurveZMQ: the PUB is a CURVE server (a ZAP authenticator must run in the
        context, :meth:`Security.start_authenticator`), the SUB a CURVE client.
    context : zmq.Context, optional
        Default ``zmq.Context.instance()`` (required to share for ``inproc://``).

    Raises
    ------
    BusError
        Bind failure (``__cause__`` keeps the ZMQError), or a non-loopback tcp bind
        without keys.
    """

    def __init__(self, bind: str | None, connect: Iterable[str] = (), topics: Iterable[str] = (), *,
                 security: Security | None = None, context: zmq.Context | None = None) -> None:
        ctx = context or zmq.Context.instance()
        self.pub = _socket(ctx, zmq.PUB)
        self.sub = _socket(ctx, zmq.SUB)
        self._closed = False
        self._ipc_path: str | None = None
        try:
            if bind:
                check_bind(bind, security)
                if security is not None:
                    security.apply_server(self.pub)
                self._ipc_path = _bind(self.pub, bind, "bus")
            if security is not None:
                security.apply_client(self.sub)
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
        for t in topics:
            self.subscribe(t)

    send_frame: Callable[[bytes], Any]
    """Publish one whole frame ``topic\\0payload`` (bytes; copied, never dropped): ``pub.send`` without
    pyzmq's Python-level wrapper, for hot paths (:meth:`frame_prefix` gives the prefix)."""

    def frame_prefix(self, topic: str) -> bytes:
        """``topic\\0``, the start of every frame of ``topic`` (cached; ValueError if the topic is
        empty or contains NUL). ``pub.send(prefix + payload)`` is :meth:`send` without the lookup."""
        prefix = self._prefix.get(topic)
        if prefix is None:
            if not topic or "\0" in topic:
                raise ValueError(f"topic {topic!r}: must be non-empty and contain no NUL")
            prefix = self._prefix[topic] = topic.encode() + SEPARATOR
        return prefix

    def send(self, topic: str, payload: bytes) -> None:
        """Publish one frame ``topic\\0payload`` (never drops: HWM 0)."""
        self.pub.send(self.frame_prefix(topic) + payload, copy=True)

    def subscribe(self, topic: str) -> None:
        """Receive ``topic`` exactly; ``""`` receives everything."""
        self.sub.setsockopt(zmq.SUBSCRIBE, topic.encode() + SEPARATOR if topic else b"")

    def recv(self, timeout: float | None = 0.0) -> Message | None:
        """The next message, or None after ``timeout`` s (None: wait at most 1 s)."""
        ms = 1000 if timeout is None else max(0, int(timeout * 1000 + 0.999))
        if not self._poller.poll(ms):
            return None
        return split_frame(self.sub.recv(copy=True))

    def recv_frames(self, limit: int = RECV_FRAMES_MAX) -> list[bytes]:
        """Every frame already queued, at most ``limit``, as whole frames ``topic\\0payload``; never waits.

        For sinks that take messages in bulk (:meth:`protocol.shell.Sink.on_frames`):
        no per-message split, lookup or call.
        """
        frames: list[bytes] = []
        append, recv = frames.append, self.sub.recv
        try:
            for _ in range(limit):
                append(recv(_NOBLOCK))
        except zmq.Again:
            pass
        return frames

    def close(self, linger_ms: int = 0) -> None:
        """Close both sockets (idempotent); the PUB's queued messages are kept for ``linger_ms``
        (delivered while the context lives: ``Context.term()`` waits for them)."""
        if not self._closed:
            self._closed = True
            self.pub.close(linger=linger_ms)
            self.sub.close(linger=0)
            _release_ipc(self._ipc_path)


def _frame_sender(sock: zmq.Socket) -> Callable[[bytes], Any]:
    """``sock.send`` bound to pyzmq's compiled ``Socket.send`` (what the Python-level ``send`` calls for
    bytes without routing_id or group), or ``sock.send`` itself where pyzmq has no such base class."""
    base = getattr(zmq.backend, "Socket", None)
    if isinstance(base, type) and isinstance(sock, base) and hasattr(base, "send"):
        return base.send.__get__(sock)  # type: ignore[no-any-return]
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
             security: Security | None = None, context: zmq.Context | None = None) -> ZmqBus:
    """Open the bus backend the endpoints' scheme names (inproc/ipc/tcp → ZeroMQ).

    Raises
    ------
    ValueError
        Unknown scheme (named), before any socket exists.
    BusError
        An endpoint cannot be bound or connected.
    """
    connect = list(connect)
    for ep in ([bind] if bind else []) + connect:
        check_url(ep)
    return ZmqBus(bind, connect, topics, security=security, context=context)


class ControlServer(_Closing):
    """The launcher's ROUTER at :func:`control_endpoint`: msgpack maps to and from services by identity.

    ``malformed`` counts the messages dropped because they were not a msgpack map.
    """

    def __init__(self, url: str, *, security: Security | None = None, context: zmq.Context | None = None) -> None:
        ep = control_endpoint(url)
        check_bind(url, security)
        ctx = context or zmq.Context.instance()
        self.sock = _socket(ctx, zmq.ROUTER)
        self.sock.router_mandatory = True
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
        parts = self.sock.recv_multipart()
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

    def close(self) -> None:
        """Close (idempotent)."""
        if not self._closed:
            self._closed = True
            self.sock.close(linger=0)
            _release_ipc(self._ipc_path)


class ControlClient(_Closing):
    """A service's DEALER to the launcher (identity = service name)."""

    def __init__(self, url: str, identity: str, *, security: Security | None = None,
                 context: zmq.Context | None = None) -> None:
        ep = control_endpoint(url)
        ctx = context or zmq.Context.instance()
        self.sock = _socket(ctx, zmq.DEALER)
        self.sock.identity = identity.encode()
        self._closed = False
        if security is not None:
            security.apply_client(self.sock)
        try:
            self.sock.connect(ep)
        except zmq.ZMQError as err:
            self.close()
            raise BusError(f"control {ep!r}: cannot connect: {err}") from err

    def send(self, obj: dict[str, Any]) -> None:
        """Send a map to the launcher (queued if not yet connected)."""
        self.sock.send(msgpack.packb(obj, use_bin_type=True))

    def recv(self, timeout: float = 0.0) -> dict[str, Any] | None:
        """The next map from the launcher, or None after ``timeout`` s (malformed: None)."""
        if not self.sock.getsockopt(_EVENTS) & _POLLIN:
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
        for i, name in zip(first.tolist(), names):
            before = self.last.get(name)
            known[i] = before is not None
            prev[i] = before if before is not None else 0
        missed[order] = np.where(known, np.maximum(s - prev - 1, 0), 0)
        for name, v in zip(names, s[last].tolist()):
            self.last[name] = v
        self.dropped += int(missed.sum())
        return missed
