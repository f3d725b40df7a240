"""The bus: one interface (after python-can), ZeroMQ backends chosen by URL scheme.

Topology
--------
A central broker (:class:`Broker`, a thread of the launcher) forwards the data plane:
every publisher's PUB connects to the broker's XSUB, every subscriber's SUB to its
XPUB. The broker's XSUB subscribes to everything, so each publisher sends every
message once and the broker filters per subscriber. The control plane is a ROUTER in
the launcher (:class:`ControlServer`) and one DEALER per service
(:class:`ControlClient`, identity = service name), carrying msgpack maps.

One base URL names all three endpoints:

=====================  ===================  ===================  ===================
base URL               publishers connect   subscribers connect  control (ROUTER)
=====================  ===================  ===================  ===================
``tcp://HOST:PORT``    ``tcp://HOST:PORT``  ``tcp://HOST:PORT+1`` ``tcp://HOST:PORT+2``
``ipc:///path/bus``    ``ipc:///path/bus.in``  ``…/bus.out``     ``…/bus.ctl``
``inproc://name``      ``inproc://name.in``  ``…name.out``       ``…name.ctl``
=====================  ===================  ===================  ===================

An unknown scheme raises ``ValueError`` naming it.

Frames and delivery
-------------------
A message is one frame ``topic | b"\\0" | payload`` (:mod:`protocol.messages`); a
subscription to a topic is to ``topic + b"\\0"``, an exact match. Every socket has
high-water mark 0 (unbounded), so nothing is ever dropped silently: lockstep never
loses a message. ZeroMQ keeps per-publisher order; :class:`SequenceTracker` counts
sequence gaps per (sender, topic) for the statistics.

Threads and shutdown
--------------------
Each object's sockets belong to the thread that uses it. Every socket has linger 0;
``close()`` may be called twice; every object is a context manager. Receives poll
with a timeout and never block forever. The ``inproc://`` backend needs every party
in one process and one ZeroMQ context (the default: ``zmq.Context.instance()``).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from types import TracebackType
from typing import Any, NamedTuple, Protocol, runtime_checkable
from urllib.parse import urlsplit

import msgpack
import zmq

from errors import BusError
from protocol.messages import SEPARATOR
from protocol.security import Security, check_bind

__all__ = [
    "Message", "Bus", "Endpoints", "endpoints", "open_bus", "ZmqBus", "Broker",
    "ControlServer", "ControlClient", "SequenceTracker",
]

SCHEMES = ("inproc", "ipc", "tcp")


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


class Endpoints(NamedTuple):
    """The three endpoints derived from one base URL (see the module docstring)."""

    pub: str
    sub: str
    ctl: str


def endpoints(url: str) -> Endpoints:
    """Derive the publisher, subscriber and control endpoints from a base URL.

    Raises
    ------
    ValueError
        If the scheme is not inproc, ipc or tcp (naming it), or a tcp URL lacks a port.
    """
    parts = urlsplit(url)
    scheme = parts.scheme
    if scheme not in SCHEMES:
        raise ValueError(f"bus URL {url!r}: unknown scheme {scheme!r} (known: {', '.join(SCHEMES)})")
    if scheme == "tcp":
        try:
            port = parts.port
        except ValueError as err:
            raise ValueError(f"bus URL {url!r}: bad port") from err
        if port is None or not 0 < port < 65534:
            raise ValueError(f"bus URL {url!r}: tcp needs a port 1..65533 (three consecutive ports are used)")
        host = parts.netloc.rsplit(":", 1)[0]
        return Endpoints(*(f"tcp://{host}:{port + i}" for i in range(3)))
    return Endpoints(f"{url}.in", f"{url}.out", f"{url}.ctl")


def _socket(ctx: zmq.Context, kind: int) -> zmq.Socket:
    s = ctx.socket(kind)
    s.linger = 0
    s.sndhwm = 0
    s.rcvhwm = 0
    return s


class _Closing:
    """Context-manager boilerplate for objects with an idempotent ``close``."""

    def __enter__(self) -> Any:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError


class ZmqBus(_Closing):
    """The ZeroMQ data-plane client of one service: a PUB and a SUB on the broker.

    Parameters
    ----------
    url : str
        Base URL of the broker (see :func:`endpoints`).
    topics : Iterable[str]
        Topics to subscribe to now (more with :meth:`subscribe`).
    security : Security, optional
        CurveZMQ client keys (tcp between hosts).
    context : zmq.Context, optional
        Default ``zmq.Context.instance()`` (required to share for ``inproc://``).
    """

    def __init__(self, url: str, topics: Iterable[str] = (), *, security: Security | None = None,
                 context: zmq.Context | None = None) -> None:
        ep = endpoints(url)
        self.url = url
        ctx = context or zmq.Context.instance()
        self.pub = _socket(ctx, zmq.PUB)
        self.sub = _socket(ctx, zmq.SUB)
        self._closed = False
        try:
            if security is not None:
                security.apply_client(self.pub)
                security.apply_client(self.sub)
            self.pub.connect(ep.pub)
            self.sub.connect(ep.sub)
        except zmq.ZMQError as err:
            self.close()
            raise BusError(f"bus {url!r}: cannot connect: {err}") from err
        self._poller = zmq.Poller()
        self._poller.register(self.sub, zmq.POLLIN)
        self._prefix: dict[str, bytes] = {}
        for t in topics:
            self.subscribe(t)

    def send(self, topic: str, payload: bytes) -> None:
        """Publish one frame ``topic\\0payload`` (never drops: HWM 0)."""
        prefix = self._prefix.get(topic)
        if prefix is None:
            if not topic or "\0" in topic:
                raise ValueError(f"topic {topic!r}: must be non-empty and contain no NUL")
            prefix = self._prefix[topic] = topic.encode() + SEPARATOR
        self.pub.send(prefix + payload, copy=True)

    def send_frame(self, frame: bytes) -> None:
        """Publish a raw frame as is (tests inject malformed frames with it)."""
        self.pub.send(frame)

    def subscribe(self, topic: str) -> None:
        """Receive ``topic`` exactly; ``""`` receives everything."""
        self.sub.setsockopt(zmq.SUBSCRIBE, topic.encode() + SEPARATOR if topic else b"")

    def pending(self) -> bool:
        """Whether a message can be received without waiting."""
        return bool(self.sub.getsockopt(zmq.EVENTS) & zmq.POLLIN)

    def recv(self, timeout: float | None = 0.0) -> Message | None:
        """The next message, or None after ``timeout`` s (None: wait at most 1 s)."""
        if not (self.sub.getsockopt(zmq.EVENTS) & zmq.POLLIN):
            if timeout == 0.0:
                return None
            ms = 1000 if timeout is None else max(0, int(timeout * 1000 + 0.999))
            if not self._poller.poll(ms):
                return None
        return split_frame(self.sub.recv(copy=True))

    def close(self) -> None:
        """Close both sockets (idempotent)."""
        if not self._closed:
            self._closed = True
            self.pub.close(linger=0)
            self.sub.close(linger=0)


def split_frame(frame: bytes) -> Message:
    """Split ``topic\\0payload``; a frame without a UTF-8 topic prefix gives ``Message("", frame)``."""
    i = frame.find(SEPARATOR)
    if i <= 0:
        return Message("", frame)
    try:
        return Message(frame[:i].decode(), frame[i + 1:])
    except UnicodeDecodeError:
        return Message("", frame)


def open_bus(url: str, topics: Iterable[str] = (), *, security: Security | None = None,
             context: zmq.Context | None = None) -> ZmqBus:
    """Open the bus backend the URL's scheme names (inproc/ipc/tcp → ZeroMQ).

    Raises
    ------
    ValueError
        Unknown scheme (named).
    BusError
        The endpoint cannot be connected.
    """
    endpoints(url)  # ValueError naming an unknown scheme, before any socket exists
    return ZmqBus(url, topics, security=security, context=context)


def _bind(sock: zmq.Socket, ep: str, what: str) -> None:
    try:
        sock.bind(ep)
    except zmq.ZMQError as err:
        raise BusError(f"{what}: cannot bind {ep!r}: {err}", ) from err


class Broker(_Closing):
    """The data-plane forwarder: XSUB (publishers) → XPUB (subscribers), in a thread.

    Parameters
    ----------
    url : str
        Base URL (see :func:`endpoints`); the broker binds its pub and sub endpoints.
    security : Security, optional
        CurveZMQ server keys; required (BusError) for a non-loopback tcp address.
    context : zmq.Context, optional
        Default ``zmq.Context.instance()``.

    Raises
    ------
    BusError
        Bind failure (``errno`` kept in ``__cause__``) or a non-loopback bind without keys.
    """

    def __init__(self, url: str, *, security: Security | None = None, context: zmq.Context | None = None) -> None:
        ep = endpoints(url)
        check_bind(url, security)
        self.url = url
        ctx = context or zmq.Context.instance()
        self._ctx = ctx
        self._xsub = _socket(ctx, zmq.XSUB)
        self._xpub = _socket(ctx, zmq.XPUB)
        self._ctl_ep = f"inproc://broker-ctl-{id(self)}"
        self._ctl = ctx.socket(zmq.PAIR)
        self._ctl.linger = 0
        self._ctl.bind(self._ctl_ep)
        self._closed = False
        self._thread: threading.Thread | None = None
        try:
            if security is not None:
                security.apply_server(self._xsub)
                security.apply_server(self._xpub)
            _bind(self._xsub, ep.pub, "broker")
            _bind(self._xpub, ep.sub, "broker")
        except BusError:
            self._xsub.close()
            self._xpub.close()
            self._ctl.close()
            self._closed = True
            raise
        self._xsub.send(b"\x01")  # subscribe to everything, upstream of every publisher
        self._thread = threading.Thread(target=self._run, name="berthsim-broker", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        steer = self._ctx.socket(zmq.PAIR)
        steer.linger = 0
        steer.connect(self._ctl_ep)
        try:
            zmq.proxy_steerable(self._xsub, self._xpub, None, steer)
        except zmq.ZMQError:
            pass
        finally:
            steer.close(linger=0)
            self._xsub.close(linger=0)
            self._xpub.close(linger=0)

    def close(self) -> None:
        """Stop forwarding and close (idempotent)."""
        if self._closed:
            return
        self._closed = True
        if self._thread is not None:
            self._ctl.send(b"TERMINATE")
            self._thread.join(timeout=2.0)
        self._ctl.close(linger=0)


class ControlServer(_Closing):
    """The launcher's ROUTER: msgpack maps to and from services by identity (= name)."""

    def __init__(self, url: str, *, security: Security | None = None, context: zmq.Context | None = None) -> None:
        ep = endpoints(url)
        check_bind(url, security)
        ctx = context or zmq.Context.instance()
        self.sock = _socket(ctx, zmq.ROUTER)
        self.sock.router_mandatory = True
        self._closed = False
        try:
            if security is not None:
                security.apply_server(self.sock)
            _bind(self.sock, ep.ctl, "control")
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
            return None
        return (ident, obj) if isinstance(obj, dict) else None

    def close(self) -> None:
        """Close (idempotent)."""
        if not self._closed:
            self._closed = True
            self.sock.close(linger=0)


class ControlClient(_Closing):
    """A service's DEALER to the launcher (identity = service name)."""

    def __init__(self, url: str, identity: str, *, security: Security | None = None,
                 context: zmq.Context | None = None) -> None:
        ep = endpoints(url)
        ctx = context or zmq.Context.instance()
        self.sock = _socket(ctx, zmq.DEALER)
        self.sock.identity = identity.encode()
        self._closed = False
        if security is not None:
            security.apply_client(self.sock)
        try:
            self.sock.connect(ep.ctl)
        except zmq.ZMQError as err:
            self.close()
            raise BusError(f"control {ep.ctl!r}: cannot connect: {err}") from err

    def send(self, obj: dict[str, Any]) -> None:
        """Send a map to the launcher (queued if not yet connected)."""
        self.sock.send(msgpack.packb(obj, use_bin_type=True))

    def recv(self, timeout: float = 0.0) -> dict[str, Any] | None:
        """The next map from the launcher, or None after ``timeout`` s (malformed: None)."""
        if not (self.sock.getsockopt(zmq.EVENTS) & zmq.POLLIN):
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
    """Counts sequence gaps per (sender, topic): ``seq`` must grow by one each message."""

    __slots__ = ("_last", "dropped")

    def __init__(self) -> None:
        self._last: dict[tuple[str, str], int] = {}
        self.dropped = 0

    def see(self, sender: str, topic: str, seq: int) -> int:
        """Record one message; return how many were missed before it (0 normally)."""
        key = (sender, topic)
        last = self._last.get(key)
        self._last[key] = seq
        if last is None or seq == last + 1:
            return 0
        missed = seq - last - 1 if seq > last else 0
        self.dropped += missed
        return missed
