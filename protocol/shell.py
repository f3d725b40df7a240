"""The service shell: runs one model (or sink, or source) on the bus under the launcher.

The shell owns the sockets, simulation time, the lifecycle and the statistics; what
it runs owns the physics. It is the same for every service.

What it runs
------------
*model* — a :class:`protocol.service.ServiceModel`: ``initial(t0)`` and
``step(t, h, u)`` with inputs chosen by the rule of :mod:`protocol.stepping`.
*sink* — an object with ``name``, ``topics`` (``()`` = every topic) and
``on_message(topic: str, payload: bytes) -> None``: it sees every message of those
topics, undecoded (the wire bytes; :func:`protocol.codec.envelope` reads the
header), and never steps. A sink that also has ``on_frames(frames: list[bytes])`` is
handed, once running, every drain's whole frames (``topic\\0payload``) in one call
instead (:func:`protocol.codec.envelopes` reads their headers at once). The logger
is a sink.
*source* — an object with ``name``, ``period_ns``, ``outputs`` (ports) and
``read() -> tuple[t_ns, topic, payload] | None`` giving already-encoded messages in
time order (``None`` at the end): the shell publishes each when its time comes
(lockstep: as fast as possible, or paced by ``speed``; realtime: on the wall clock).
Replay is a source.
Any of them may have ``close()``, called once when the service stops.

Lifecycle (after DCP)
---------------------
``configured`` → ``ready`` → ``running`` ⇄ ``frozen`` → ``stopped``; ``error`` from
anywhere. The control plane (DEALER to the launcher's ROUTER) carries msgpack maps
with an ``op``:

=========  =========================  ===============================================
direction  op                          meaning
=========  =========================  ===============================================
→ L        hello                       name, role, period_ns, inputs, outputs, pid
→ bus      sim/control ``probe``       every participant (launcher too) publishes probes until acked
→ L        probed                      this SUB has seen a probe from every other participant
L →        ack                         every path confirmed (all probed): state ready
L →        start                       t0_ns, t_end_ns, mode, speed, start_wall_ns, producers, services, ...
L →        freeze / resume / stop      resume carries wall_ns and t_ns (the new time anchor)
L →        ping                        heartbeat; none for heartbeat_timeout: the service errors
→ L        done                        reached t_end_ns (stats attached); waits for stop
→ L        frozen                      froze itself (realtime overrun policy "freeze")
→ L        error                       reason; the process then exits non-zero
=========  =========================  ===============================================

No subscriber misses the first sample: nobody starts before every service's SUB and
PUB are confirmed. Malformed or invalid messages are counted (``msgs_invalid``) and
dropped; sequence gaps are counted (``msgs_dropped``); neither stops a service.

Outputs
-------
After every step (and at ``t0``) the shell publishes the model's outputs, event ports
first, so that a later output of the same step tells its consumers that every event
of the step has been sent. An event port the model leaves out (or gives an empty list)
is sent empty, or not at all where :func:`protocol.stepping.event_progress`, computed
from the ``services`` of the start message, says every consumer has a witness.

Stepping
--------
*lockstep* — step ``t → t + h`` only once :meth:`protocol.stepping.InputBuffer.ready`
(:meth:`~protocol.stepping.InputBuffer.take`: ready, then the selection);
with ``speed > 0`` a step also waits for the wall instant ``start + (t - t0) / speed``.
A run with ``t_end_ns`` stops every service at exactly ``t_end_ns``.
*realtime* — step ``k`` starts at the absolute wall instant ``start_wall_ns + k·h``
(the same for every service) with the latest inputs. The stepping thread runs
SCHED_FIFO at ``sim.rt_priority``, in a worker process with ZeroMQ's I/O thread
(:func:`realtime_context`), when permitted (``rt_priority = 0`` turns it off).
It takes its queued inputs 2 ms (long periods only) and 0.2 ms before a step start,
sleeps with 1 ns timer slack to 60 µs
before the step start, then spins yielding the core (so equal-priority services on
few cores do not hold each other up). The garbage collector is frozen and disabled
while stepping (no collector pauses; cyclic garbage made by a model during a
realtime run is only freed after it). Step-start jitter, overruns (a step ending
after the next one's start) and input age (wall time since the oldest input the
step uses was sent) are measured and published on ``sim/stats`` every
``stats_period``; overrun policy continue / freeze / stop-after-N. Whatever the policy,
a service that falls more than ``sim.max_lag`` behind the wall clock (its steps keep
taking longer than its period: the host cannot run it in real time) stops with an error
that says so; the launcher then stops the run and the rig parks.
"""

from __future__ import annotations

import gc
import os
import sys
import threading
import time
import traceback
from array import array
from typing import Any, Protocol, runtime_checkable

import numpy as np
import zmq

from errors import LifecycleError, MessageError
from protocol.bus import _NOBLOCK, ControlClient, SequenceTracker, ZmqBus, open_bus, split_frame
from protocol.codec import decode, encode, topic_codec
from protocol.messages import CONTROL_PREFIX, SCHEMAS, SEPARATOR, schema_for
from protocol.security import Security
from protocol.service import Port, ServiceModel
from protocol.stepping import InputBuffer, event_progress

__all__ = ["Sink", "Source", "role_of", "ServiceShell", "run_service", "realtime_context", "STATES",
           "SINK_DRAIN_LIMIT_NS", "FLUSH_MS"]

STATES = ("configured", "ready", "running", "frozen", "stopped", "error")


@runtime_checkable
class Sink(Protocol):
    """Sees every message of ``topics`` (``()`` = all), undecoded; never steps."""

    name: str
    topics: tuple[str, ...]

    def on_message(self, topic: str, payload: bytes) -> None:
        """Handle one message (the msgpack body, as on the wire)."""
        ...

    # optional: ``on_frames(frames: list[bytes]) -> None``, every frame of one drain at once


@runtime_checkable
class Source(Protocol):
    """Publishes already-encoded messages in time order (replay)."""

    name: str
    period_ns: int
    outputs: tuple[Port, ...]

    def read(self) -> tuple[int, str, bytes] | None:
        """The next ``(t_ns, topic, payload)``, or None at the end."""
        ...


def role_of(obj: Any) -> str:
    """``"model"``, ``"sink"`` or ``"source"``; LifecycleError naming the type otherwise."""
    if hasattr(obj, "step") and hasattr(obj, "initial"):
        return "model"
    if hasattr(obj, "on_message"):
        return "sink"
    if hasattr(obj, "read"):
        return "source"
    raise LifecycleError(f"{type(obj).__name__}: neither a ServiceModel (initial/step), a sink (on_message) "
                         "nor a source (read)")


class _Stop(Exception):
    """Internal: leave the run loop (stop requested)."""


class _Fail(Exception):
    """Internal: leave the run loop with an error reason."""


_MS = 1_000_000
_CTL_EVERY_NS = 20 * _MS  # control and heartbeat checked at least this often while stepping
PROBE_PERIOD_NS = 10_000_000
"""Interval of a service's ready-handshake probes on ``sim/control``. [ns]"""

FLUSH_MS = 2000  # a stopping worker process delivers its queued messages for at most this long [ms]
SINK_DRAIN_LIMIT_NS = 20_000 * _MS  # a sink at stop drains what is queued for at most this long
_SOURCE_BATCH = 64  # source: messages published between looks at the clock (control, stats)
_SINK_BATCH_S = 0.02  # sink: pause after each drain, so one wake-up takes many messages (≤ 50 wake-ups/s)
_DRAIN_EARLY_NS = 2 * _MS  # realtime: queued inputs are taken this long before a step start,
_DRAIN_NS = 200_000  # and again this long before it
_SPIN_NS = 60_000  # realtime: sleep until this close to a step start, then spin yielding (timer slack 1 ns)


def _fine_timer_slack() -> None:
    """Linux: let sleeps end within microseconds of their deadline (PR_SET_TIMERSLACK = 1 ns)."""
    try:
        import ctypes
        ctypes.CDLL(None).prctl(29, 1)
    except (OSError, AttributeError):
        pass


def _realtime_priority(priority: int, name: str) -> bool:
    """Run the calling thread SCHED_FIFO at ``priority`` (0: leave it); a note if not permitted."""
    if priority <= 0 or not hasattr(os, "sched_setscheduler"):
        return False
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
        return True
    except OSError as err:
        print(f"[{name}] note: SCHED_FIFO priority {priority} not available ({err}); normal scheduling",
              file=sys.stderr, flush=True)
        return False


def realtime_context(priority: int) -> zmq.Context | None:
    """A ZeroMQ context whose I/O thread runs SCHED_FIFO at ``priority``, if this process may do so.

    The same priority as the stepping thread: the I/O thread gets the core whenever the
    stepping thread sleeps or yields, and the stepping loop yields once per step even
    when it is late (:meth:`ServiceShell._wait_until`), so an overrunning service still
    receives the launcher's pings and its inputs. (One level above, it preempted steps
    on every message and raised jitter and overruns.) libzmq aborts if it cannot apply
    the policy, so the permission is tried first on a scratch thread. Returns None (use
    the default context) when not permitted or ``priority <= 0``.
    """
    if priority <= 0 or not hasattr(os, "sched_setscheduler"):
        return None
    ok: list[bool] = []

    def probe() -> None:
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
            ok.append(True)
        except OSError:
            ok.append(False)

    t = threading.Thread(target=probe)
    t.start()
    t.join()
    if not ok or not ok[0]:
        return None
    ctx = zmq.Context()
    ctx.set(zmq.THREAD_SCHED_POLICY, os.SCHED_FIFO)
    ctx.set(zmq.THREAD_PRIORITY, priority)
    return ctx


class ServiceShell:
    """Runs one model, sink or source on the bus (see the module docstring).

    Parameters
    ----------
    obj : ServiceModel | Sink | Source
        What to run; its ``name`` is the control identity and the ``sender``.
    url : str
        Base URL of the run (control endpoint: :func:`protocol.bus.control_endpoint`).
    peers : dict[str, str]
        PUB endpoint of every participant, this one included
        (:func:`protocol.bus.mesh_endpoints`): binds its own, connects to the others.
    security : Security, optional
        CurveZMQ client keys.
    context : zmq.Context, optional
        Shared context (needed for ``inproc://``).
    stop_event : threading.Event, optional
        Set by a signal handler (SIGTERM) or a supervisor to stop the service.
    """

    def __init__(self, obj: Any, url: str, peers: dict[str, str], *, security: Security | None = None,
                 context: zmq.Context | None = None, stop_event: threading.Event | None = None) -> None:
        self.obj = obj
        self.role = role_of(obj)
        self.name: str = obj.name
        self.url = url
        if self.name not in peers:
            raise LifecycleError(f"service {self.name!r}: no endpoint among the peers {sorted(peers)}")
        self.peers = dict(peers)
        self.security = security
        self.context = context
        self.stop_event = stop_event or threading.Event()
        self.state = "configured"
        self.period_ns: int = int(getattr(obj, "period_ns", 0) or 0)
        self.inputs: tuple[Port, ...] = tuple(getattr(obj, "inputs", ()))
        self.outputs: tuple[Port, ...] = tuple(getattr(obj, "outputs", ()))
        self.buf = InputBuffer(self.inputs)
        # subscribed topics by their frame prefix (without the NUL): one dict lookup per frame
        self._topic_of: dict[bytes, str] = {t.encode(): t for t in ("sim/control", *(p.topic for p in self.inputs))}
        # a model's input topics with a schema by their frame prefix: (topic, its decoder), for _ingest's fast path
        self._inputs_of: dict[bytes, tuple[str, Any]] = {} if self.role == "sink" else {
            p.topic.encode(): (p.topic, topic_codec(p.topic).decode) for p in self.inputs
            if p.topic != "sim/control" and p.topic in SCHEMAS}
        self._out_seq = {p.topic: 0 for p in self.outputs}
        # what _publish sends after a step, events first (see protocol.stepping): (topic, frame prefix,
        # empty body or None, sparse, encoder); sparse event ports are set from the start message
        self._out_plan: tuple[tuple[str, bytes, dict[str, Any] | None, bool, Any], ...] = ()
        self._plan_outputs(frozenset())
        self._stats_seq = 0
        # statistics
        self.steps = 0
        self.overruns = 0
        self.received = 0
        self.invalid = 0
        self.dropped = 0
        self._gaps = SequenceTracker()
        self._last_seq = self._gaps.last
        self._jitter = array("q")
        self._age = array("q")
        self._win = 0
        self.t_ns = 0
        self.start: dict[str, Any] = {}
        self._last_ctl = time.monotonic_ns()
        # opened by run() (None until then and after a failed open; run() checks before closing)
        self.bus: ZmqBus = None  # type: ignore[assignment]
        self.ctl: ControlClient = None  # type: ignore[assignment]
        self._probed = False
        self._probes: set[str] = set()
        self._expected: set[str] = set()
        self._sink_control = False
        self._ctl_seq = 0
        self._pending_ops: list[dict[str, Any]] = []
        self._resume_msg: dict[str, Any] | None = None
        self._poller = zmq.Poller()

    # ------------------------------------------------------------------ entry
    def run(self) -> int:
        """Run to the end; 0 after a clean stop, 1 after an error (reported to the launcher)."""
        auth = None
        try:
            if self.security is not None:
                auth = self.security.start_authenticator(self.context or zmq.Context.instance())
            self.ctl = ControlClient(self.url, self.name, security=self.security, context=self.context)
            others = [ep for n, ep in self.peers.items() if n != self.name]
            self.bus = open_bus(self.peers[self.name], others, security=self.security, context=self.context)
            self._poller.register(self.bus.sub, zmq.POLLIN)
            self._poller.register(self.ctl.sock, zmq.POLLIN)
            self._handshake()
            self._wait_start()
            gc.collect()
            gc.freeze()  # what exists at the start is never scanned again by the collector
            self._set_state("running")
            if any(m["op"] == "freeze" for m in self._pending_ops):  # frozen before the start
                self._pending_ops.clear()
                self._freeze({})
            if self.role == "model":
                if self.start["mode"] == "realtime":
                    self._run_realtime()
                else:
                    self._run_lockstep()
            elif self.role == "source":
                self._run_source()
            else:
                self._run_sink()
            self._finish()
            return 0
        except _Stop:
            if self.role == "sink":
                self._drain_quiet()
            self._set_state("stopped")
            self._publish_stats()
            return 0
        except (_Fail, Exception) as err:  # noqa: BLE001 - every failure is reported, never hidden
            reason = str(err) if isinstance(err, _Fail) else f"{type(err).__name__}: {err}"
            if not isinstance(err, _Fail):
                traceback.print_exc(file=sys.stderr)
            self.state = "error"
            if self.ctl is not None:
                try:
                    self.ctl.send({"op": "error", "reason": reason, "t_ns": self.t_ns})
                    time.sleep(0.05)  # let the DEALER flush (linger is 0)
                except zmq.ZMQError:
                    pass
            print(f"[{self.name}] error: {reason}", file=sys.stderr, flush=True)
            return 1
        finally:
            closer = getattr(self.obj, "close", None)
            if callable(closer):
                try:
                    closer()
                except Exception:  # noqa: BLE001
                    traceback.print_exc(file=sys.stderr)
            # after a clean stop a worker process delivers what its PUB still queues (a fast
            # source may be far ahead of a slow subscriber): close with a linger and wait for
            # the context to finish (bounded). Threads over inproc share the launcher's context.
            flush = self.state == "stopped" and not self.url.startswith("inproc://")
            if self.bus is not None:
                self.bus.close(linger_ms=FLUSH_MS if flush else 0)
            if self.ctl is not None:
                self.ctl.close()
            if auth is not None:
                auth.stop()
            if flush:
                ctx = self.context or zmq.Context.instance()
                t = threading.Thread(target=ctx.term, name="zmq-flush", daemon=True)
                t.start()
                t.join(FLUSH_MS / 1000 + 0.5)

    # ------------------------------------------------------------------ messages in
    def _ingest(self, frame: bytes) -> None:
        """Handle one data frame: a model's input sample, control probes, or a sink's message."""
        self.received += 1
        i = frame.find(SEPARATOR)
        if i > 0:
            route = self._inputs_of.get(frame[:i])
            if route is not None:  # an input sample: decode, count sequence gaps, store
                name, decode_body = route
                try:
                    sample = decode_body(frame[i + 1:])
                except MessageError:
                    self.invalid += 1
                    return
                sender, seq = sample.sender, sample.seq
                key = (sender, name)
                last = self._last_seq.get(key)
                if last is None or seq == last + 1:  # in sequence (SequenceTracker.see, inlined)
                    self._last_seq[key] = seq
                elif self._gaps.see(sender, name, seq):
                    self._gap(name, sender, seq)
                self.buf.add(name, sample)
                return
        topic = self._topic_of.get(frame[:i]) if i > 0 else None
        if topic is None:  # not a subscribed input (a sink subscribed to everything, or garbage)
            if self.role != "sink":
                self.invalid += 1
                return
            topic, payload = split_frame(frame)
            if topic in SCHEMAS:  # cache known topics only (garbage must not grow the table)
                self._topic_of[frame[:i]] = topic
        else:
            payload = frame[i + 1:]
        if topic == "sim/control":
            try:
                s = decode(topic, payload)
            except MessageError:
                self.invalid += 1
                return
            if s.body["cmd"] == "probe" and not self._probed:
                self._probes.add(s.sender)
                if self._probes >= self._expected:  # every peer's PUB reaches this SUB
                    self._probed = True
                    self.ctl.send({"op": "probed"})
            if self._sink_control:
                self.obj.on_message(topic, payload)
            return
        if self.role == "sink":
            self.obj.on_message(topic, payload)
            return
        try:
            s = decode(topic, payload)
        except MessageError:
            self.invalid += 1
            return
        if self._gaps.see(s.sender, topic, s.seq):
            self._gap(topic, s.sender, s.seq)
        self.buf.add(topic, s)

    def _gap(self, topic: str, sender: str, seq: int) -> None:
        """Report a sequence gap (counted by ``_gaps``) before ``seq`` of ``topic`` from ``sender``."""
        self.dropped = self._gaps.dropped
        print(f"[{self.name}] sequence gap on {topic!r} from {sender!r} before seq {seq}", file=sys.stderr, flush=True)

    def _drain(self) -> None:
        """Ingest every frame already queued, without blocking."""
        recv, ingest = self.bus.sub.recv, self._ingest
        try:
            while True:
                ingest(recv(_NOBLOCK))
        except zmq.Again:
            pass

    def _wait(self, timeout_ms: int) -> None:
        """Wait up to ``timeout_ms`` for data or control; ingest data, handle control."""
        if self._poller.poll(timeout_ms):  # the poller is registered once, in run()
            self._drain()
        self._control()

    # ------------------------------------------------------------------ control
    def _control(self) -> None:
        while True:
            msg = self.ctl.recv(0.0)
            if msg is None:
                break
            self._last_ctl = time.monotonic_ns()
            op = msg.get("op")
            if op == "stop":
                raise _Stop()
            if op == "freeze" and self.state == "running":
                self._freeze(msg)
            elif op == "resume" and self.state == "frozen":
                self._resume(msg)
            elif op in ("ack", "start") or (op == "freeze" and self.state in ("configured", "ready")):
                # a freeze before the start is kept, whether or not the ack was handled yet
                # (ack, start and freeze can arrive in one drain): run() starts frozen
                self._pending_ops.append(msg)
        if self.stop_event.is_set():
            raise _Stop()
        hb = self.start.get("heartbeat_timeout_ns", 0)
        if hb and time.monotonic_ns() - self._last_ctl > hb:
            raise _Fail(f"no word from the launcher for {hb / 1e9:.1f} s")

    def _set_state(self, state: str) -> None:
        self.state = state
        self.ctl.send({"op": "state", "state": state, "t_ns": self.t_ns})

    def _freeze(self, msg: dict[str, Any]) -> None:
        self._set_state("frozen")
        self._frozen_since = time.monotonic_ns()
        while self.state == "frozen":
            self._wait(50)

    def _resume(self, msg: dict[str, Any]) -> None:
        self._set_state("running")
        self._resume_msg = msg

    # ------------------------------------------------------------------ handshake
    def _hello(self) -> dict[str, Any]:
        return {"op": "hello", "name": self.name, "role": self.role, "period_ns": self.period_ns,
                "inputs": [[p.topic, p.kind] for p in self.inputs],
                "outputs": [[p.topic, p.kind] for p in self.outputs], "pid": os.getpid()}

    def _probe(self) -> None:
        self.bus.send("sim/control", encode("sim/control", {"cmd": "probe", "info": {}}, sender=self.name,
                                            seq=self._ctl_seq, t_ns=0, h_ns=self.period_ns or 1))
        self._ctl_seq += 1

    def _handshake(self) -> None:
        self._expected = {n for n in self.peers if n != self.name}
        self.ctl.send(self._hello())
        topics = list(getattr(self.obj, "topics", ())) if self.role == "sink" else [p.topic for p in self.inputs]
        if self.role == "sink" and not topics:
            topics = [""]
        self._sink_control = self.role == "sink" and ("" in topics or "sim/control" in topics)
        for t in topics:
            self.bus.subscribe(t)
            if t:
                self._topic_of[t.encode()] = t
        self.bus.subscribe("sim/control")  # last: seeing a probe confirms every earlier subscription
        deadline = time.monotonic_ns() + 120 * 1_000_000_000
        next_probe = 0
        while not any(m["op"] == "ack" for m in self._pending_ops):
            now = time.monotonic_ns()
            if now > deadline:
                raise _Fail("handshake: no ack from the launcher within 120 s")
            if now >= next_probe:  # until acked (late subscribers must see one too), on a clock:
                self._probe()      # probing on every wake-up would make the peers' probes a storm
                next_probe = now + PROBE_PERIOD_NS
            self._wait(max(1, (next_probe - now) // 1_000_000))
        self._pending_ops = [m for m in self._pending_ops if m["op"] != "ack"]
        self.state = "ready"
        self.ctl.send({"op": "state", "state": "ready", "t_ns": 0})

    def _wait_start(self) -> None:
        while not self._pending_ops:
            self._wait(50)
        msg = self._pending_ops.pop(0)
        self.start = msg
        self.t_ns = int(msg["t0_ns"])
        sparse, witnesses = event_progress(self.name, msg.get("services") or {})
        self.buf.set_producers({k: int(v) for k, v in msg["producers"].items()}, witnesses)
        self._plan_outputs(sparse)
        self._last_ctl = time.monotonic_ns()
        self._stats_every = int(msg.get("stats_period_ns", 1_000_000_000)) or 1_000_000_000
        self._next_stats = time.monotonic_ns() + self._stats_every
        self._next_ctl = 0

    # ------------------------------------------------------------------ messages out
    def _plan_outputs(self, sparse: frozenset[str]) -> None:
        """Publication order and sparseness of the outputs: event ports first, then the others.

        Event ports whose schema is just ``events`` may be left out of a step's outputs
        (an empty list is sent, unless the port is in ``sparse``: then nothing is).
        """
        plan = []
        for events_first in (True, False):
            for p in self.outputs:
                if (p.kind == "event") == events_first:
                    empty = {"events": []} if tuple(schema_for(p.topic).fields) == ("events",) else None
                    plan.append((p.topic, p.topic.encode() + SEPARATOR, empty, p.topic in sparse and empty is not None,
                                 topic_codec(p.topic).encode))
        self._out_plan = tuple(plan)

    def _publish(self, outs: dict[str, Any], t: int) -> None:
        if len(outs) != len(self.outputs) and any(k not in self._out_seq for k in outs):
            bad = [k for k in outs if k not in self._out_seq]
            raise LifecycleError(f"{self.name}: output topic {bad[0]!r} is not a declared output port")
        h, now, name, seqs = self.period_ns, time.time_ns(), self.name, self._out_seq
        frames = []
        for topic, prefix, empty, sparse, encode_body in self._out_plan:
            fields = outs.get(topic)
            if fields is None:
                if sparse:
                    continue
                fields = empty
                if fields is None:
                    raise LifecycleError(f"{self.name}: step returned no body for output {topic!r} at t={t} ns")
            elif sparse and not fields.get("events", True):
                continue
            seq = seqs[topic]
            seqs[topic] = seq + 1
            frames.append(prefix + encode_body(fields, name, seq, t, h, now))
        send = self.bus.send_frame
        for frame in frames:  # back to back, no encoding between the sends
            send(frame)

    def stats(self) -> dict[str, Any]:
        """The ``sim/stats`` fields now (jitter and input age over the current window)."""
        jit = np.frombuffer(self._jitter, dtype=np.int64)[self._win:] if len(self._jitter) else np.zeros(0)
        age = np.frombuffer(self._age, dtype=np.int64)[self._win:] if len(self._age) else np.zeros(0)
        p50, p99 = (np.percentile(jit, [50, 99]) if jit.size else (0, 0))
        return {"state": self.state, "mode": self.start.get("mode", "lockstep"), "steps": self.steps,
                "overruns": self.overruns, "jitter_p50_ns": int(p50), "jitter_p99_ns": int(p99),
                "input_age_ns": int(age.max()) if age.size else 0, "msgs_received": self.received,
                "msgs_dropped": self.dropped, "msgs_invalid": self.invalid}

    def final_stats(self) -> dict[str, Any]:
        """Totals over the whole run (jitter percentiles over every step)."""
        jit = np.frombuffer(self._jitter, dtype=np.int64) if len(self._jitter) else np.zeros(0)
        age = np.frombuffer(self._age, dtype=np.int64) if len(self._age) else np.zeros(0)
        p50, p99 = (np.percentile(jit, [50, 99]) if jit.size else (0, 0))
        out = self.stats()
        out.update({"jitter_p50_ns": int(p50), "jitter_p99_ns": int(p99),
                    "jitter_max_ns": int(jit.max()) if jit.size else 0,
                    "input_age_p99_ns": int(np.percentile(age, 99)) if age.size else 0, "t_ns": self.t_ns})
        return out

    def _publish_stats(self, state: str | None = None) -> None:
        if self.bus is None:
            return
        body = self.stats()
        if state is not None:
            body["state"] = state
        try:
            self.bus.send("sim/stats", encode("sim/stats", body, sender=self.name, seq=self._stats_seq,
                                              t_ns=self.t_ns, h_ns=self.period_ns or 1))
        except zmq.ZMQError:
            return
        self._stats_seq += 1
        self._win = len(self._jitter)

    def _tick_stats(self) -> None:
        now = time.monotonic_ns()
        if now >= self._next_ctl:
            self._next_ctl = now + _CTL_EVERY_NS
            self._control()
            if now >= self._next_stats:
                self._next_stats = now + self._stats_every
                self._publish_stats()

    # ------------------------------------------------------------------ lockstep
    def _run_lockstep(self) -> None:
        m: ServiceModel = self.obj
        h = self.period_ns
        t0 = t = self.t_ns
        t_end = int(self.start.get("t_end_ns") or 0)
        speed = float(self.start.get("speed") or 0.0)
        anchor = time.monotonic_ns()
        self._resume_msg = None
        buf, ingest, recv, tick, take = self.buf, self._ingest, self.bus.sub.recv, self._tick_stats, self.buf.take
        self.bus.sub.rcvtimeo = 50  # ms: a blocking receive that still wakes for control
        self._publish(m.initial(t0), t0)
        while not t_end or t < t_end:
            while (u := take(t, h)) is None:  # buf.ready(t, h), then buf.select(t, h)
                try:
                    ingest(recv())
                except zmq.Again:
                    self._control()
                tick()
            if speed > 0:
                if self._resume_msg is not None:  # frozen meanwhile: shift the pace anchor
                    anchor = time.monotonic_ns() - int((t - t0) / speed)
                    self._resume_msg = None
                self._wait_until(anchor + int((t - t0) / speed))
                u = buf.select(t, h)  # with what arrived while waiting
            outs = m.step(t, h, u)
            t += h
            self.t_ns = t
            self._publish(outs, t)
            buf.prune(t, h)
            self.steps += 1
            tick()

    # ------------------------------------------------------------------ realtime
    def _wait_until(self, deadline: int) -> None:
        """Wait for a monotonic instant with few wake-ups.

        Sleep (in slices of ``_CTL_EVERY_NS`` with control between) to ``_DRAIN_EARLY_NS``
        before it and take the queued data (only when there is that long to wait), sleep to
        ``_DRAIN_NS`` before it and take what came since, sleep to ``_SPIN_NS`` before it,
        then spin yielding the core. Data arriving meanwhile waits in the socket's queue;
        the callers look at control after every step or wait (``_tick_stats``). Returns at
        once after a freeze (``_resume_msg`` set) so that the caller re-anchors.
        """
        now = time.monotonic_ns
        while (rem := deadline - now()) > _CTL_EVERY_NS + _DRAIN_EARLY_NS:
            time.sleep(_CTL_EVERY_NS / 1e9)
            self._control()
            if self._resume_msg is not None:
                return
        if rem > _DRAIN_EARLY_NS and self.inputs:  # a long wait: an early take keeps the last one short
            time.sleep((rem - _DRAIN_EARLY_NS) / 1e9)
            self._drain()
            rem = deadline - now()
        if rem > _DRAIN_NS:
            time.sleep((rem - _DRAIN_NS) / 1e9)
        if self.inputs:
            self._drain()
        rem = deadline - now()
        if rem > _SPIN_NS:
            time.sleep((rem - _SPIN_NS) / 1e9)
        if now() >= deadline:  # late (an overrun): still let equal-priority threads in (this
            os.sched_yield()   # process's I/O thread, with the launcher's pings and the inputs)
        while now() < deadline:
            os.sched_yield()  # spinning, but an equal-priority service due now gets the core

    def _mono_from_wall(self, wall_ns: int) -> int:
        return time.monotonic_ns() + (wall_ns - time.time_ns())

    def _run_realtime(self) -> None:
        m: ServiceModel = self.obj
        h = self.period_ns
        t0 = self.t_ns
        t_end = int(self.start.get("t_end_ns") or 0)
        self._publish(m.initial(t0), t0)  # before the start instant, so first steps see it
        policy = self.start.get("overrun_policy", "continue")
        limit = int(self.start.get("overrun_limit", 10))
        anchor = self._mono_from_wall(int(self.start["start_wall_ns"]))
        self._resume_msg = None
        buf = self.buf
        _realtime_priority(int(self.start.get("rt_priority", 0)), self.name)
        _fine_timer_slack()
        self._jitter.append(0)
        self.stats()  # warm up: the first percentile call imports and builds numpy internals (~30 ms)
        del self._jitter[:]
        gc.collect()
        gc.freeze()    # what exists now is never scanned again
        gc.disable()   # no collector pause inside a step; refcounting frees the loop's garbage
        try:
            self._realtime_loop(m, h, t0, t_end, policy, limit, anchor, buf)
        finally:
            gc.enable()

    def _realtime_loop(self, m: ServiceModel, h: int, t0: int, t_end: int, policy: str, limit: int,
                       anchor: int, buf: InputBuffer) -> None:
        t = t0
        max_lag = int(self.start.get("max_lag_ns", 0))
        while not t_end or t < t_end:
            due = anchor + (t - t0)
            self._wait_until(due)
            if self._resume_msg is not None:   # re-anchor after a freeze
                msg, self._resume_msg = self._resume_msg, None
                anchor = self._mono_from_wall(int(msg["wall_ns"])) - (int(msg.get("t_ns", t)) - t0)
                continue
            start = time.monotonic_ns()
            self._jitter.append(start - due)
            u = buf.latest(t, h)
            oldest = u.oldest_wall_ns()
            if oldest is not None:
                self._age.append(time.time_ns() - oldest)
            outs = m.step(t, h, u)
            t += h
            self.t_ns = t
            self._publish(outs, t)
            self.steps += 1
            late = time.monotonic_ns() - (anchor + (t - t0))
            if late > 0:
                self.overruns += 1
                if policy == "stop" and self.overruns >= limit:
                    raise _Fail(f"{self.overruns} overruns (limit {limit}, policy stop) at t={t} ns")
                if max_lag and late > max_lag:
                    raise _Fail(f"{late / 1e9:.3f} s behind the wall clock at t={t / 1e9:.3f} s (sim.max_lag "
                                f"{max_lag / 1e9:g} s): its steps take longer than its {h / 1e6:g} ms period on this "
                                f"host ({self.overruns} overruns in {self.steps} steps); run it in lockstep, or on "
                                "a host with more free cores")
                if policy == "freeze":
                    self.ctl.send({"op": "frozen", "reason": "overrun", "t_ns": t})
                    self._freeze({})
            self._tick_stats()

    # ------------------------------------------------------------------ source and sink
    def _run_source(self) -> None:
        """Publish the source's messages; control and stats by time (every _SOURCE_BATCH messages).

        Unpaced (lockstep, ``speed = 0``) it publishes back to back; paced, it waits only for
        messages whose instant is still ahead. Control is checked at least every
        :data:`_CTL_EVERY_NS` of wall time, or while waiting.
        """
        src: Source = self.obj
        t0 = self.t_ns
        t_end = int(self.start.get("t_end_ns") or 0)
        realtime = self.start["mode"] == "realtime"
        speed = 1.0 if realtime else float(self.start.get("speed") or 0.0)
        anchor = (self._mono_from_wall(int(self.start["start_wall_ns"])) if realtime else time.monotonic_ns())
        read, send, now, prefix_of = src.read, self.bus.send_frame, time.monotonic_ns, self.bus.frame_prefix
        prefixes: dict[str, bytes] = {}
        self._resume_msg = None
        n = 0
        while True:
            item = read()
            if item is None:
                break
            t, topic, payload = item
            if t_end and t > t_end:
                break
            if speed > 0:
                if self._resume_msg is not None:  # frozen meanwhile: shift the pace anchor
                    anchor = now() - int((self.t_ns - t0) / speed)
                    self._resume_msg = None
                due = anchor + int((t - t0) / speed)
                if due > now():
                    self._wait_until(due)
                    self._tick_stats()
            prefix = prefixes.get(topic)
            if prefix is None:
                prefix = prefixes[topic] = prefix_of(topic)
            send(prefix + payload)
            self.t_ns = t
            n += 1
            if n >= _SOURCE_BATCH:
                self.steps += n
                n = 0
                self._tick_stats()
        self.steps += n

    def _drain_quiet(self, quiet_ns: int = 100 * _MS, limit_ns: int = SINK_DRAIN_LIMIT_NS) -> None:
        """Sink at stop: keep receiving until the bus has been quiet for ``quiet_ns`` (bounded by ``limit_ns``).

        The launcher stops sinks after every producer has stopped, so what is queued then
        is finite: an unpaced source may have run far ahead of a sink, and all of it is
        taken before the sink stops.
        """
        end = time.monotonic_ns() + limit_ns
        sub = self.bus.sub
        drain = self._drain_sink if self.role == "sink" else self._drain
        while time.monotonic_ns() < end and sub.poll(quiet_ns // _MS):
            drain()

    def _run_sink(self) -> None:
        """Drain in bulk: after each wake-up, sleep :data:`_SINK_BATCH_S` so messages pile up."""
        poll = self._poller.poll
        while True:
            if poll(100):
                self._drain_sink()
                self._control()
                time.sleep(_SINK_BATCH_S)
            self._tick_stats()

    def _drain_sink(self) -> None:
        """A running sink: every queued frame to ``on_frames`` in one call (or one by one to ``on_message``)."""
        on_frames = getattr(self.obj, "on_frames", None)
        if on_frames is None:
            self._drain()
            return
        frames = self.bus.recv_frames()
        if not frames:
            return
        self.received += len(frames)
        if not self._sink_control:  # the SUB takes sim/control for the handshake's probes: not recorded
            frames = [f for f in frames if not f.startswith(CONTROL_PREFIX)]
        on_frames(frames)

    def _finish(self) -> None:
        """Report done, then serve until stop (sockets stay open so nothing is lost)."""
        self._publish_stats(state="done")
        self.ctl.send({"op": "done", "t_ns": self.t_ns, "stats": self.final_stats()})
        while True:
            self._wait(100)


def run_service(obj: Any, url: str, peers: dict[str, str], *, security: Security | None = None,
                context: zmq.Context | None = None, stop_event: threading.Event | None = None) -> int:
    """Run ``obj`` under a :class:`ServiceShell`; the process exit code (0 clean, 1 error)."""
    return ServiceShell(obj, url, peers, security=security, context=context, stop_event=stop_event).run()
