"""The process shell: runs the services of one OS process on the bus under the launcher.

The shell owns the sockets, simulation time, the lifecycle and the statistics; what
it runs owns the physics. It is the same for every process: one service (the default
layout), a *process group* of several (``process = "physics"`` in their
``[services.NAME]``), or every service of the run (``--inprocess``).

What it runs
------------
Its *members* (:class:`protocol.scheduler.Member`), each a:

*model* — a :class:`protocol.service.ServiceModel`: ``initial(t0)`` and
``step(t, h, u)`` with inputs chosen by the rule of :mod:`protocol.stepping`.
*sink* — an object with ``name``, ``topics`` (``()`` = every topic) and
``on_message(topic: str, payload: bytes) -> None``: it sees every message of those
topics, undecoded (the wire bytes; :func:`protocol.codec.envelope` reads the
header), and never steps. A sink that also has ``on_frames(frames: list[bytes])`` is
handed, once running, whole frames (``topic\\0payload``) in batches instead
(:func:`protocol.codec.envelopes` reads their headers at once). The logger is a sink.
*source* — an object with ``name``, ``period_ns``, ``outputs`` (ports) and
``read() -> tuple[t_ns, topic, payload] | None`` giving already-encoded messages in
time order (``None`` at the end): the shell publishes each when its time comes
(lockstep: as fast as possible, or paced by ``speed``; realtime: on the wall clock),
then a ``sim/control`` ``eos``. Replay is a source.
Any of them may have ``close()``, called once when the process stops.

One :class:`protocol.scheduler.Scheduler` steps the models in timestamp order and hands
their samples to the other members over memory; the bus carries them to other processes
(one PUB per process, shared by its members; one SUB on the other processes' PUBs).
Every member still has its own control identity: the launcher sees services, whatever
their grouping.

Lifecycle (after DCP)
---------------------
``configured`` → ``ready`` → ``running`` ⇄ ``frozen`` → ``stopped``; ``error`` from
anywhere. The control plane (one DEALER per member to the launcher's ROUTER) carries
msgpack maps with an ``op``:

=========  =========================  ===============================================
direction  op                          meaning
=========  =========================  ===============================================
→ L        hello                       name, role, period_ns, inputs, outputs, pid
→ bus      sim/control ``probe``       every participant (launcher too) publishes probes until acked
→ L        probed                      this SUB has seen a probe from every other participant
L →        ack                         every path confirmed (all probed): state ready
L →        start                       t0_ns, t_end_ns, mode, speed, start_wall_ns, producers (each topic's
                                       coupling period), services, full_rate, ...
L →        freeze / resume / stop      resume carries wall_ns and t_ns (the new time anchor)
L →        ping                        heartbeat; none for heartbeat_timeout: the service errors
→ L        done                        reached t_end_ns (stats attached); waits for stop
→ L        stats                       the totals once more, when stopped
→ L        frozen                      froze itself (realtime overrun policy "freeze")
→ L        error                       reason; the process then exits non-zero
→ L        playback                    a member's request (the viewer's play/pause/seek/rate), taken from its
                                       ``control_requests()`` at the shell's control turns
L →        playback                    cmd (pause, play, seek t_ns, rate), co_simulated: to a source, applied by
                                       its ``playback(msg)``; to a model, pause/play hold its stall watchdog
=========  =========================  ===============================================

Playback control (a replay driven from a live view, :mod:`services.viewer`): a member with
``control_requests() -> list[dict]`` (called on the shell's thread, at each control turn) has
them sent to the launcher on its own control client; the launcher forwards a viewer's
``playback`` requests to the replay sources. A source with ``playback(msg)`` applies them
(raising ``ConfigError`` for a malformed or refused one: counted in ``msgs_invalid``,
dropped, noted on stderr); a source with ``holding() -> bool`` is not read while it holds
(paused), so that its process keeps answering control, and a ``None`` from ``read()``
while it holds is not its end (held at the end of a replay). While a source of the process
holds, or the launcher said ``pause`` to a model, the stall watchdog waits.

No subscriber misses the first sample: nobody starts before every process's SUB and
PUB are confirmed. Malformed or invalid messages are counted (``msgs_invalid``) and
dropped; sequence gaps are counted (``msgs_dropped``); neither stops a service. A
process stops when every member has been told to stop (the launcher stops models and
sources first, sinks last, so a process holding the logger keeps recording until then).

Outputs
-------
After every step (and at ``t0``) a model's outputs go through the coupling rule
(:mod:`protocol.coupling`): each port is published at its coupling period (the
``producers`` of the start message), event ports first, so that a later output of the
same step tells its consumers that every event of the step has been sent. An event port
with nothing to say is sent empty, or not at all where
:func:`protocol.stepping.event_progress`, computed from the ``services`` of the start
message, says every consumer has a witness.

Stepping
--------
*lockstep* — a model steps ``t → t + h`` only once
:meth:`protocol.stepping.InputBuffer.ready` (:meth:`~protocol.stepping.InputBuffer.take`:
ready, then the selection); with ``speed > 0`` a step also waits for the wall instant
``start + (t - t0) / speed``. A run with ``t_end_ns`` stops every model at exactly
``t_end_ns``. A model that waits on an input for ``sim.stall_timeout`` of wall time (the
start message's ``stall_timeout_ns``) fails the process, naming the input, its producer and
the last sample of it accepted: a lockstep run never waits forever.
*realtime* — every model's step ``k`` starts at the absolute wall instant
``start_wall_ns + k·h`` (the same for every service) with the latest inputs; models due
at the same instant step in rate-monotonic order (shortest period first); inputs by the
realtime rule of :mod:`protocol.stepping` (flows one coupling period late, impulse-exact).
The stepping thread runs SCHED_FIFO at the process's rate-monotonic priority
(:func:`protocol.realtime.priorities`, given by the launcher; its worker process also sets
ZeroMQ's I/O thread, affinity and locked memory there), when permitted (``sim.rt_priority
= 0`` turns it off).
It takes its queued inputs 2 ms (long periods only) and 0.2 ms before a step start,
sleeps with 1 ns timer slack to 60 µs before the step start, then spins yielding the
core (so equal-priority services on few cores do not hold each other up). The garbage
collector is frozen and disabled while stepping (no collector pauses; cyclic garbage
made by a model during a realtime run is only freed after it). Step-start jitter,
overruns (a step ending after the next one's start) and input age (wall time since the
oldest input the step uses was sent) are measured per service and published on
``sim/stats`` every ``stats_period``. Overload: ``sim.overrun_limit`` consecutive steps
longer than the period, or an input older than ``sim.max_input_age``, applies
``sim.overrun_policy`` (continue; freeze: this process reports ``frozen`` and the launcher
freezes every service, models with a ``hold(frozen_s)`` being called every 20 ms while
frozen, the rig bridge's to keep its link alive and park it; stop: an error). Whatever
the policy, a service that falls more than ``sim.max_lag`` behind the wall clock (its
steps keep taking longer than its period: the host cannot run it in real time) stops
with an error that says so; the launcher then stops the run and the rig parks.

A model whose outputs are not finite (:class:`errors.DivergenceError` from the codec)
fails with ``diverged`` in its error report, in lockstep and realtime alike: the
launcher names it and the time, and says so in the log.
"""

from __future__ import annotations

import gc
import os
import sys
import threading
import time
import traceback
from typing import Any

import numpy as np

from errors import BusError, ConfigError, DivergenceError, LifecycleError, LogError, MessageError
from protocol.bus import (
    Bus,
    Context,
    ControlClient,
    Poller,
    SequenceTracker,
    default_context,
    open_bus,
    split_frame,
)
from protocol.clocksync import ClockSync, SyncThread, mono_ns, wall_ns
from protocol.codec import decode, encode, envelope, topic_codec
from protocol.messages import CONTROL_PREFIX, SCHEMAS, SEPARATOR
from protocol.provenance import SampleGate
from protocol.realtime import fine_timer_slack, set_priority
from protocol.scheduler import Member, Scheduler
from protocol.security import Security
from protocol.service import Sink, Source, role_of

__all__ = ["Sink", "Source", "role_of", "ProcessShell", "ServiceShell", "run_service", "run_process",
           "STATES", "SINK_DRAIN_LIMIT_NS", "FLUSH_MS", "BUSY_ENV", "STALL_TIMEOUT_NS"]

STATES = ("configured", "ready", "running", "frozen", "stopped", "error")


class _Stop(Exception):
    """Internal: leave the run loop (every member told to stop)."""


class _Fail(Exception):
    """Internal: leave the run loop with an error reason."""


_MS = 1_000_000
_CTL_EVERY_NS = 20 * _MS  # control and heartbeat checked at least this often while stepping
PROBE_PERIOD_NS = 10_000_000
"""Interval of a process's ready-handshake probes on ``sim/control``. [ns]"""

FLUSH_MS = 2000  # a stopping worker process delivers its queued messages for at most this long [ms]
SINK_DRAIN_LIMIT_NS = 20_000 * _MS  # a sink at stop drains what is queued for at most this long
_SOURCE_BATCH = 64  # source: messages published between looks at the clock (control, stats)
_SINK_BATCH_S = 0.02  # sink: pause after each drain, so one wake-up takes many messages (≤ 50 wake-ups/s)
_SINK_BATCH_NS = int(_SINK_BATCH_S * 1e9)  # a sink beside models is handed its frames at most this often
_DRAIN_EARLY_NS = 2 * _MS  # realtime: queued inputs are taken this long before a step start,
_DRAIN_NS = 200_000  # and again this long before it
_SPIN_NS = 60_000  # realtime: sleep until this close to a step start, then spin yielding (timer slack 1 ns)
_HOLD_EVERY_NS = 20 * _MS  # frozen: models with a hold() are called this often
_GAP_NS = 250 * _MS  # realtime: a process that did not run for this long was stopped or descheduled
STALL_TIMEOUT_NS = 10_000 * _MS
"""Lockstep: wall time without a step, a model waiting on an input, before the process fails (the start
message's ``stall_timeout_ns``, ``sim.stall_timeout``; this when it has none). [ns]"""

BUSY_ENV = "BERTHSIM_TEST_BUSY"
"""Test-only overload knob: ``NAME=MS[@T][,…]`` adds MS ms of busy waiting to every realtime step
of the service NAME (from simulated time T s on; default 0); ``NAME=MSs[@T]`` (an ``s`` after MS)
instead sleeps MS ms once, in its first step from T: the process stopped in the middle of a step,
as by SIGSTOP, with no CPU time spent. The overload tests; never set in a real run. It is not seen
by the admission check's calibration, which times the models alone."""


def _busy_knob(names: set[str]) -> dict[str, tuple[int, int, bool]]:
    """:data:`BUSY_ENV` for these services: name -> (busy per step [ns], from when [ns], sleep once)."""
    out: dict[str, tuple[int, int, bool]] = {}
    for item in filter(None, os.environ.get(BUSY_ENV, "").split(",")):
        name, _, spec = item.partition("=")
        ms, _, t = spec.partition("@")
        if name in names:
            once = ms.endswith("s")
            out[name] = (int(float(ms.removesuffix("s")) * 1e6), int(float(t or 0) * 1e9), once)
    return out


class ProcessShell:
    """Runs the services of one process on the bus (see the module docstring).

    Parameters
    ----------
    objs : sequence of ServiceModel | Sink | Source
        What to run, in a fixed order (each one's ``name`` is its control identity and
        ``sender``).
    url : str
        Base URL of the run (control endpoint: :func:`protocol.bus.control_endpoint`).
    peers : dict[str, str]
        PUB endpoint of every participant by name (:func:`protocol.config.peers_of`): this
        process's members share one, which it binds; it connects to every other one.
    name : str, optional
        The process's name (default: its first member's).
    security : Security, optional
        CurveZMQ client keys.
    context : protocol.bus.Context, optional
        Shared context (needed for ``inproc://``).
    stop_event : threading.Event, optional
        Set by a signal handler (SIGTERM) or a supervisor to stop the process.
    rt_priority : int
        Realtime mode: the stepping thread's SCHED_FIFO priority (the process's, from
        :func:`protocol.realtime.priorities`); 0: normal scheduling.
    clock : {"local", "sync"}
        ``"sync"``: this process is on another host than the master launcher and follows its
        clock (:class:`protocol.clocksync.ClockSync`, requests every 100 ms on the control
        channel): the start instant, a resume's anchor, the pacing and the samples' wall stamps
        are on the master's time base. ``"local"``: this host's clock is the master's (the
        master's host, or hosts sharing a PTP-disciplined clock).

    Raises
    ------
    LifecycleError
        A member without an endpoint, or members with different endpoints.
    """

    def __init__(self, objs: Any, url: str, peers: dict[str, str], *, name: str | None = None,
                 security: Security | None = None, context: Context | None = None,
                 stop_event: threading.Event | None = None, rt_priority: int = 0, clock: str = "local") -> None:
        self.members = [Member(o) for o in objs]
        if not self.members:
            raise LifecycleError("a process needs at least one service")
        self.sched = Scheduler(self.members)
        self.name = name or self.members[0].name
        missing = [m.name for m in self.members if m.name not in peers]
        if missing:
            raise LifecycleError(f"service {missing[0]!r}: no endpoint among the peers {sorted(peers)}")
        endpoints = {peers[m.name] for m in self.members}
        if len(endpoints) != 1:
            raise LifecycleError(f"process {self.name!r}: its services must share one PUB endpoint, got "
                                 f"{sorted(endpoints)}")
        self.endpoint = endpoints.pop()
        self.mine = frozenset(m.name for m in self.members)
        self.url = url
        self.peers = dict(peers)
        self.security = security
        self.context = context
        self.stop_event = stop_event or threading.Event()
        self.rt_priority = int(rt_priority)
        self._busy = _busy_knob({m.name for m in self.members})
        self.state = "configured"
        self._member = {m.name: m for m in self.members}
        self._sinks = [m for m in self.members if m.role == "sink"]
        self._steppers = [m for m in self.members if m.role != "sink"]
        # subscribed topics by their frame prefix (without the NUL): one dict lookup per frame
        self._topic_of: dict[bytes, str] = {b"sim/control": "sim/control"}
        # model input topics from other processes, by frame prefix: (topic, decoder, consumers). Known from
        # the start: a sample that arrives before this process has its start message is stored, not lost
        self._inputs_of: dict[bytes, tuple[str, Any, list[Member]]] = {
            topic.encode(): (topic, topic_codec(topic).decode, self.sched.consumers(topic))
            for topic in {p.topic for m in self.sched.models for p in m.inputs}
            if topic not in self.sched.local_topics and topic in SCHEMAS}
        self._gaps = SequenceTracker()
        # the run's acceptance rule, from the start message (before it: who may speak for whom only)
        self._gate = SampleGate({}, {}, speaks_for=security.identities if security is not None else None)
        # data frames that arrive before the start message: held, and checked once the gate exists
        self._prestart: list[bytes] | None = []
        self._rejected_topics: set[str] = set()
        self._last_seq = self._gaps.last
        self._sink_all = any(not tuple(getattr(m.obj, "topics", ())) for m in self._sinks)
        self._sink_topics: dict[str, frozenset[str]] = {
            m.name: frozenset(getattr(m.obj, "topics", ())) for m in self._sinks}
        self._sink_control = {m.name: (not self._sink_topics[m.name]) or "sim/control" in self._sink_topics[m.name]
                              for m in self._sinks}
        self._sink_pending: list[bytes] = []   # frames from the bus for the sinks, not yet handed over
        self._next_sink_ns = 0
        self.start: dict[str, Any] = {}
        self._last_ctl = time.monotonic_ns()
        # opened by run() (None until then and after a failed open; run() checks before closing)
        self.bus: Bus = None  # type: ignore[assignment]
        self._probed = False
        self._probes: set[str] = set()
        self._expected: set[str] = set()
        self._ctl_seq = 0
        self._source_topics: dict[str, list[str]] = {}  # source name -> its output topics (for its "eos")
        self._pending: dict[str, list[dict[str, Any]]] = {m.name: [] for m in self.members}
        self._resume_msg: dict[str, Any] | None = None
        self.late_imports: list[str] = []  # realtime: modules first imported during the run (see _run_realtime)
        self._src_next: dict[str, tuple[int, str, bytes] | None] = {}
        # playback control: sources that may hold (paused), members that send requests to the launcher
        self._holding = {m.name: m.obj.holding for m in self.members
                         if m.role == "source" and callable(getattr(m.obj, "holding", None))}
        self._requesters = [m for m in self.members if callable(getattr(m.obj, "control_requests", None))]
        self._playback_paused = False  # the launcher said pause to a model of this process (a paused replay)
        self._poller = Poller()
        self._next_ctl = 0
        self._next_stats = 0
        self._stats_every = 1_000_000_000
        self._sync = ClockSync() if clock == "sync" else None
        self._sync_thread: SyncThread | None = None
        self._wall_to_mono = 0  # local clock: monotonic - wall, fixed at the start and at each resume [ns]
        self._resumed_wall = 0  # realtime: the last resume's instant on the time base; ages count from it [ns]

    # ------------------------------------------------------------------ entry
    def run(self) -> int:
        """Run to the end; 0 after a clean stop, 1 after an error (reported to the launcher)."""
        auth = None
        try:
            if self.security is not None:  # one key per process: this process's own pair
                try:
                    self.security = self.security.for_process(m.name for m in self.members)
                except ConfigError as err:
                    raise _Fail(str(err)) from err
                auth = self.security.start_authenticator(self.context or default_context())
            for m in self.members:
                m.ctl = ControlClient(self.url, m.name, security=self.security, context=self.context)
            if self._sync is not None:  # another host: follow the master's clock from now on (before the start)
                self._sync_thread = SyncThread(self._sync, lambda: ControlClient(
                    self.url, f"clock:{self.members[0].name}", security=self.security, context=self.context),
                    priority=min(99, self.rt_priority + 1) if self.rt_priority > 0 else 0)
                self._sync_thread.start()
            others = sorted({ep for n, ep in self.peers.items() if n not in self.mine and ep != self.endpoint})
            self.bus = open_bus(self.endpoint, others, security=self.security, context=self.context,
                                admit=self._admit)
            self._poller.register(self.bus, *(m.ctl for m in self.members))
            self._handshake()
            self._wait_start()
            gc.collect()
            gc.freeze()  # what exists at the start is never scanned again by the collector
            self._set_state("running")
            if any(m["op"] == "freeze" for q in self._pending.values() for m in q):  # frozen before the start
                for q in self._pending.values():
                    q.clear()
                self._freeze()
            if not self._steppers:
                self._run_sinks()
            elif self.start["mode"] == "realtime":
                self._run_realtime()
            else:
                self._run_lockstep()
            self._finish()
            return 0
        except _Stop:
            if self._sinks:
                self._drain_quiet()
            else:
                self._drain()
            self._set_state("stopped")
            for m in self.members:  # the totals again: what arrived after "done" is counted too
                m.ctl.send({"op": "stats", "stats": self.final_stats(m)})
                self._publish_stats(m)
            return 0
        except (_Fail, Exception) as err:  # noqa: BLE001 - every failure is reported, never hidden
            who = self.sched.current
            reason = str(err) if isinstance(err, _Fail) else f"{type(err).__name__}: {err}"
            # a divergence is the model's, and a log's failure (its writer died) is named by the logger: neither is
            # a bug here, so neither gets a traceback
            if not isinstance(err, (_Fail, DivergenceError, LogError)):
                traceback.print_exc(file=sys.stderr)
            self.state = "error"
            culprit = who if who is not None else self.members[0]
            # a model that returned a non-finite output diverged at the step it was making (from t_ns)
            diverged = isinstance(err, DivergenceError) and who is not None
            for m in [culprit, *(m for m in self.members if m is not culprit)]:
                if m.ctl is not None:
                    try:
                        m.ctl.send({"op": "error", "reason": reason if m is culprit else
                                    f"{culprit.name} (same process) failed: {reason}", "t_ns": m.t_ns,
                                    **({"diverged": True} if diverged and m is culprit else {})})
                    except BusError:
                        pass
            time.sleep(0.05)  # let the DEALERs flush (linger is 0)
            print(f"[{culprit.name}] error: {reason}", file=sys.stderr, flush=True)
            return 1
        finally:
            if self._sync_thread is not None:
                self._sync_thread.stop()
            for m in self.members:
                closer = getattr(m.obj, "close", None)
                if callable(closer):
                    try:
                        closer()
                    except Exception:  # noqa: BLE001
                        traceback.print_exc(file=sys.stderr)
            # after a clean stop a worker process delivers what its PUB still queues (a fast
            # source may be far ahead of a slow subscriber): close with a linger and wait until
            # it is delivered (bounded). Threads over inproc share the launcher's context.
            flush = self.state == "stopped" and not self.url.startswith("inproc://")
            if self.bus is not None:
                self.bus.close(linger_ms=FLUSH_MS if flush else 0)
            for m in self.members:
                if m.ctl is not None:
                    m.ctl.close()
            if auth is not None:
                auth.stop()
            if flush and self.bus is not None:
                self.bus.wait_delivered(FLUSH_MS / 1000 + 0.5)

    # ------------------------------------------------------------------ messages in
    def _ingest(self, frame: bytes) -> None:
        """Handle one frame from the bus: a model input, a control probe, or a sink's message."""
        if self._prestart is not None and not frame.startswith(CONTROL_PREFIX):
            self._prestart.append(frame)  # before the start: no gate yet (nothing is accepted unchecked)
            return
        i = frame.find(SEPARATOR)
        if i > 0:
            route = self._inputs_of.get(frame[:i])
            if route is not None:  # an input sample: decode once, count sequence gaps, store for each consumer
                if self._sink_all:
                    self._sink_pending.append(frame)
                topic, decode_body, consumers = route
                try:
                    sample = decode_body(frame[i + 1:])
                except MessageError:
                    consumers[0].invalid += 1
                    return
                sender, seq = sample.sender, sample.seq
                if (why := self._gate.reject(topic, sender, seq, sample.t_ns, sample.h_ns)) is not None:
                    self._rejected(consumers[0], topic, why)
                    return
                key = (sender, topic)
                last = self._last_seq.get(key)
                if last is None or seq == last + 1:  # in sequence (SequenceTracker.see, inlined)
                    self._last_seq[key] = seq
                elif (missed := self._gaps.see(sender, topic, seq)):
                    consumers[0].dropped += missed
                    print(f"[{self.name}] sequence gap on {topic!r} from {sender!r} before seq {seq}",
                          file=sys.stderr, flush=True)
                for c in consumers:
                    c.buf.add(topic, sample)
                    c.received += 1
                return
        known = self._topic_of.get(frame[:i]) if i > 0 else None
        if known == "sim/control":
            self._on_control_frame(frame, frame[i + 1:])
            return
        if self._sinks:
            if known is None:
                topic = split_frame(frame).topic
                if topic in SCHEMAS:  # cache known topics only (garbage must not grow the table)
                    self._topic_of[frame[:i]] = topic
            self._sink_pending.append(frame)
            return
        self.members[0].invalid += 1  # not a subscribed input (garbage)

    def _admit(self, peer: str | None, frame: bytes) -> bool:
        """One key per process: whether the publisher that CurveZMQ authenticated as ``peer`` speaks
        for the frame's sender (:meth:`protocol.provenance.SampleGate.impostor`); an impostor's frame is
        counted invalid and dropped before anything sees it, the first of each topic reported.
        Malformed frames pass, to be counted where they are handled."""
        i = frame.find(SEPARATOR)
        if i <= 0:
            return True
        try:
            topic = frame[:i].decode()
            sender = envelope(topic, frame[i + 1:])[1]
        except (MessageError, UnicodeDecodeError, KeyError, ValueError):
            return True
        why = self._gate.impostor(sender, peer)
        if why is None:
            return True
        route = self._inputs_of.get(frame[:i])
        self._rejected(route[2][0] if route is not None else self.members[0], topic, why)
        return False

    def _rejected(self, m: Member, topic: str, why: str) -> None:
        """A well-formed sample this run does not accept (:mod:`protocol.provenance`): counted
        invalid, dropped; the first of each topic is reported."""
        m.invalid += 1
        if topic not in self._rejected_topics:
            self._rejected_topics.add(topic)
            print(f"[{self.name}] dropped a sample of {topic!r}: {why} (further ones counted in msgs_invalid)",
                  file=sys.stderr, flush=True)

    def _on_control_frame(self, frame: bytes, payload: bytes, to_sinks: bool = True) -> None:
        try:
            s = decode("sim/control", payload)
        except MessageError:
            self.members[0].invalid += 1
            return
        cmd = s.body["cmd"]
        if cmd == "eos" and s.sender in self._source_topics:  # a source has published all it has
            for c in self.sched.models:
                c.buf.end_of_stream(self._source_topics[s.sender])
        elif cmd == "probe" and not self._probed:
            self._probes.add(s.sender)
            if self._probes >= self._expected:  # every other process's PUB reaches this SUB
                self._probed = True
                for m in self.members:
                    m.ctl.send({"op": "probed"})
        if to_sinks and any(self._sink_control.values()):
            self._sink_pending.append(frame)

    def _drain(self) -> None:
        """Ingest every frame already queued, without blocking."""
        self.bus.drain(self._ingest)

    def _wait(self, timeout_ms: int) -> None:
        """Wait up to ``timeout_ms`` for data or control; ingest data, handle control."""
        if self._poller.poll(timeout_ms):  # the poller is registered once, in run()
            self._drain()
        self._control()

    def _feed_sinks(self, frames: list[bytes]) -> None:
        """Hand frames to every sink member (its topics; control only if it asked for it)."""
        if not frames:
            return
        for m in self._sinks:
            wanted = self._sink_topics[m.name]
            if wanted:
                sel = [f for f in frames if f[:f.find(SEPARATOR)].decode(errors="replace") in wanted]
            elif not self._sink_control[m.name]:
                sel = [f for f in frames if not f.startswith(CONTROL_PREFIX)]
            else:
                sel = frames
            if not sel:
                continue
            m.received += len(sel)
            on_frames = getattr(m.obj, "on_frames", None)
            if on_frames is not None:
                on_frames(sel)
            else:
                for f in sel:
                    topic, payload = split_frame(f)
                    m.obj.on_message(topic, payload)

    def _flush(self, sinks_now: bool = False) -> None:
        """Send what the members published; hand the sinks their frames (batched, or now)."""
        out = self.sched.outbox
        if out:
            send = self.bus.send_frame
            for frame in out:  # back to back, no encoding between the sends
                send(frame)
            out.clear()
        if self._sinks and (sinks_now or time.monotonic_ns() >= self._next_sink_ns):
            self._next_sink_ns = time.monotonic_ns() + _SINK_BATCH_NS
            frames = self.sched.sink_frames
            if self._sink_pending:
                frames = self._sink_pending + frames
                self._sink_pending = []
            self.sched.sink_frames = []
            self._feed_sinks(frames)

    # ------------------------------------------------------------------ control
    def _control(self) -> None:
        for m in self._requesters:  # a member's own requests to the launcher (the viewer's playback control)
            for req in m.obj.control_requests():
                if isinstance(req, dict) and isinstance(req.get("op"), str):
                    m.ctl.send(req)
                else:
                    m.invalid += 1
        for m in self.members:
            while True:
                msg = m.ctl.recv(0.0)
                if msg is None:
                    break
                self._last_ctl = time.monotonic_ns()
                op = msg.get("op")
                if op == "ping":
                    m.ctl.send({"op": "alive", "t_ns": m.t_ns})  # the master watches every host's liveness
                    continue
                if op == "stop":
                    m.stopped = True
                    if m.role != "sink":
                        m.done = True
                    if not all(x.stopped for x in self.members):  # the others go on (a sink beside it)
                        m.state = "stopped"
                        m.ctl.send({"op": "state", "state": "stopped", "t_ns": m.t_ns})
                elif op == "playback":
                    self._playback(m, msg)
                elif op == "freeze" and self.state == "running":
                    self._freeze()
                elif op == "resume" and self.state == "frozen":
                    self._resume(msg)
                elif op in ("ack", "start") or (op == "freeze" and self.state in ("configured", "ready")):
                    # a freeze before the start is kept, whether or not the ack was handled yet
                    # (ack, start and freeze can arrive in one drain): run() starts frozen
                    self._pending[m.name].append(msg)
        if all(m.stopped for m in self.members):
            raise _Stop()
        if self.stop_event.is_set():
            raise _Stop()
        hb = self.start.get("heartbeat_timeout_ns", 0)
        if hb and time.monotonic_ns() - self._last_ctl > hb:
            raise _Fail(f"no word from the launcher for {hb / 1e9:.1f} s")

    def _playback(self, m: Member, msg: dict[str, Any]) -> None:
        """A playback control message for member ``m`` (see the module docstring): applied to a source by its
        ``playback(msg)`` (the source takes it at its next read); a model's stall watchdog waits while paused.
        Anything malformed or refused is counted (``msgs_invalid``), noted and dropped."""
        cmd = msg.get("cmd")
        apply = getattr(m.obj, "playback", None)
        if m.role == "source" and callable(apply):
            try:
                apply(msg)
            except (ConfigError, ValueError, TypeError, KeyError) as err:
                m.invalid += 1
                print(f"[{m.name}] playback {cmd!r} dropped: {err}", file=sys.stderr, flush=True)
                return
            if cmd == "seek":
                self._src_next.pop(m.name, None)  # read before the seek, not yet published
        elif m.role == "model" and cmd in ("pause", "play"):
            self._playback_paused = cmd == "pause"
        elif m.role != "model":
            m.invalid += 1

    def _set_state(self, state: str) -> None:
        self.state = state
        for m in self.members:
            m.state = state
            m.ctl.send({"op": "state", "state": state, "t_ns": m.t_ns})

    def _freeze(self) -> None:
        """Hold (DCP's frozen state) until resumed or stopped. A model that has ``hold(frozen_s)``
        is called every :data:`_HOLD_EVERY_NS` meanwhile with the time frozen so far (the hil
        bridge keeps the rig's link alive, holding, and parks it after ``sim.freeze_park_after``)."""
        if self.state == "frozen":
            return
        self._set_state("frozen")
        holders = [(m, m.obj.hold) for m in self.sched.models if callable(getattr(m.obj, "hold", None))]
        since = time.monotonic_ns()
        said: dict[str, Any] = {}
        while self.state == "frozen":
            self._wait(_HOLD_EVERY_NS // _MS)
            for m, hold in holders:
                status = hold((time.monotonic_ns() - since) * 1e-9)
                if status and status != said.get(m.name):  # what a holder says while frozen (the rig holds, parks):
                    said[m.name] = status                   # to the launcher, which puts it in the log
                    m.ctl.send({"op": "held", "status": dict(status), "t_ns": m.t_ns,
                                "frozen_s": (time.monotonic_ns() - since) * 1e-9})

    def _resume(self, msg: dict[str, Any]) -> None:
        self._set_state("running")
        self._resume_msg = msg

    # ------------------------------------------------------------------ handshake
    def _probe(self) -> None:
        for m in self.members:  # one per service: the launcher confirms each service's path
            self.bus.send("sim/control", encode("sim/control", {"cmd": "probe", "info": {}}, sender=m.name,
                                                seq=self._ctl_seq, t_ns=0, h_ns=m.period_ns or 1))
        self._ctl_seq += 1

    def _handshake(self) -> None:
        self._expected = {n for n in self.peers if n not in self.mine}
        for m in self.members:
            m.ctl.send(m.hello(os.getpid()))
        produced = frozenset(t for m in self.members for t in m.produced)
        topics: list[str] = []
        for m in self.members:
            if m.role == "sink":
                topics.extend(getattr(m.obj, "topics", ()) or [""])
            else:
                topics.extend(p.topic for p in m.inputs if p.topic not in produced)
        for t in dict.fromkeys(topics):
            self.bus.subscribe(t)
            if t:
                self._topic_of[t.encode()] = t
        self.bus.subscribe("sim/control")  # last: seeing a probe confirms every earlier subscription
        deadline = time.monotonic_ns() + 120 * 1_000_000_000
        next_probe = 0
        while not all(any(op["op"] == "ack" for op in q) for q in self._pending.values()):
            now = time.monotonic_ns()
            if now > deadline:
                raise _Fail("handshake: no ack from the launcher within 120 s")
            if now >= next_probe:  # until acked (late subscribers must see one too), on a clock:
                self._probe()      # probing on every wake-up would make the peers' probes a storm
                next_probe = now + PROBE_PERIOD_NS
            self._wait(max(1, (next_probe - now) // 1_000_000))
        for name, q in self._pending.items():
            self._pending[name] = [op for op in q if op["op"] != "ack"]
        self.state = "ready"
        for m in self.members:
            m.state = "ready"
            m.ctl.send({"op": "state", "state": "ready", "t_ns": 0})

    def _wait_start(self) -> None:
        while not all(any(op["op"] == "start" for op in q) for q in self._pending.values()):
            self._wait(50)
        msg: dict[str, Any] = {}
        for q in self._pending.values():
            msg = next(op for op in q if op["op"] == "start")
            q.remove(msg)
        self.start = msg
        t0 = int(msg["t0_ns"])
        for m in self.members:
            m.t_ns = t0
        services = msg.get("services") or {}
        self._source_topics = {n: [t for t, _ in svc.get("outputs", ())] for n, svc in services.items()
                               if svc.get("role") == "source"}
        producers = {k: int(v) for k, v in msg["producers"].items()}
        full_rate = msg.get("full_rate") or ()
        t_end = int(msg.get("t_end_ns") or 0)
        self.sched.configure(producers, services, full_rate, t_end)
        lockstep = msg.get("mode") != "realtime"  # realtime: the gates only order (protocol.provenance)
        self._gate = SampleGate(producers, services, t_end, full_rate, self._gate.speaks_for, lockstep)
        if not lockstep:  # the sinks' gates (the logger's) the same as the consumers'
            for m in self._sinks:
                setter = getattr(m.obj, "set_gate", None)
                if callable(setter):
                    setter(SampleGate(producers, services, t_end, full_rate, lockstep=False))
        early, self._prestart = self._prestart or [], None
        for frame in early:
            self._ingest(frame)
        self._last_ctl = time.monotonic_ns()
        self._stats_every = int(msg.get("stats_period_ns", 1_000_000_000)) or 1_000_000_000
        self._next_stats = time.monotonic_ns() + self._stats_every
        self._next_ctl = 0

    # ------------------------------------------------------------------ statistics
    def stats(self, m: Member) -> dict[str, Any]:
        """``m``'s ``sim/stats`` fields now (jitter and input age over the current window)."""
        jit = np.frombuffer(m.jitter, dtype=np.int64)[m.win:] if len(m.jitter) else np.zeros(0)
        age = np.frombuffer(m.age, dtype=np.int64)[m.win:] if len(m.age) else np.zeros(0)
        p50, p99 = (np.percentile(jit, [50, 99]) if jit.size else (0, 0))
        return {"state": m.state, "mode": self.start.get("mode", "lockstep"), "steps": m.steps,
                "overruns": m.overruns, "jitter_p50_ns": int(p50), "jitter_p99_ns": int(p99),
                "input_age_ns": int(age.max()) if age.size else 0, "msgs_received": m.received,
                "msgs_dropped": m.dropped, "msgs_invalid": m.invalid}

    def final_stats(self, m: Member) -> dict[str, Any]:
        """``m``'s totals over the whole run (jitter percentiles over every step)."""
        jit = np.frombuffer(m.jitter, dtype=np.int64) if len(m.jitter) else np.zeros(0)
        age = np.frombuffer(m.age, dtype=np.int64) if len(m.age) else np.zeros(0)
        p50, p99 = (np.percentile(jit, [50, 99]) if jit.size else (0, 0))
        out = self.stats(m)
        out.update({"jitter_p50_ns": int(p50), "jitter_p99_ns": int(p99),
                    "jitter_max_ns": int(jit.max()) if jit.size else 0,
                    "input_age_p50_ns": int(np.percentile(age, 50)) if age.size else 0,
                    "input_age_p99_ns": int(np.percentile(age, 99)) if age.size else 0, "t_ns": m.t_ns})
        if self.start.get("mode") == "realtime" and m.role != "sink":
            out["late_imports"] = len(self.late_imports)  # modules its process first imported in the run
        if self._sync is not None:  # another host than the master's: how well it follows the master's clock
            out["clock"] = self.clock_report()
        return out

    def _publish_stats(self, m: Member, state: str | None = None) -> None:
        if self.bus is None:
            return
        body = self.stats(m)
        if state is not None:
            body["state"] = state
        try:
            self.bus.send("sim/stats", encode("sim/stats", body, sender=m.name, seq=m.stats_seq,
                                              t_ns=m.t_ns, h_ns=m.period_ns or 1))
        except BusError:
            return
        m.stats_seq += 1
        m.win = len(m.jitter)

    def _tick_stats(self) -> None:
        now = time.monotonic_ns()
        if now >= self._next_ctl:
            self._next_ctl = now + _CTL_EVERY_NS
            self._control()
            if now >= self._next_stats:
                self._next_stats = now + self._stats_every
                for m in self.members:
                    self._publish_stats(m)

    # ------------------------------------------------------------------ lockstep
    def _run_lockstep(self) -> None:
        sched = self.sched
        t0 = int(self.start["t0_ns"])
        t_end = int(self.start.get("t_end_ns") or 0)
        speed = float(self.start.get("speed") or 0.0)
        wall = time.time_ns
        mono = time.monotonic_ns
        sched.initial(t0, wall())
        self._flush()
        anchor = mono()
        self._resume_msg = None
        state = {"anchor": anchor}

        def may_step(m: Member) -> bool:
            return mono() >= state["anchor"] + int((m.t_ns - t0) / speed)

        pace = may_step if speed > 0 else None
        bus = self.bus
        recv_wait, recv_timeout = bus.recv_wait, bus.Timeout  # the backend's own receive, no layer between
        steppers = self._steppers
        one = len(self.members) == 1 and not sched.sources
        timeo = None
        stall_ns = int(self.start.get("stall_timeout_ns") or STALL_TIMEOUT_NS)
        moved = mono()  # the last step (or the end of a wait for the pace or a freeze)
        while True:
            n = sched.run_lockstep(t_end, wall, pace, limit=256)
            if sched.sources:
                n += self._step_sources(t0, t_end, speed, state["anchor"])
            if n:
                self._flush()
                moved = mono()
            if all(m.done for m in steppers):
                break
            if n == 0:
                if mono() - moved > stall_ns:
                    held = self._playback_paused or any(h() for h in self._holding.values())
                    moved = mono() if held else self._stalled(stall_ns)  # a paused replay is not a stall
                wait_ms = 50
                if pace is not None:
                    due = min(state["anchor"] + int((m.t_ns - t0) / speed) for m in steppers if not m.done)
                    wait_ms = max(0, min(50, (due - mono()) // _MS))
                if one and pace is None:  # one model: a blocking receive is the cheapest wait
                    if wait_ms != timeo:  # (setting a socket option costs a Python-level call)
                        bus.set_recv_timeout(wait_ms)
                        timeo = wait_ms
                    try:
                        self._ingest(recv_wait())
                    except recv_timeout:
                        self._control()
                else:
                    self._wait(wait_ms)
            elif not one:
                self._drain()
            if self._resume_msg is not None:  # frozen meanwhile: shift the pace anchor
                t_min = min(m.t_ns for m in steppers)
                state["anchor"] = mono() - int((t_min - t0) / speed) if speed > 0 else mono()
                self._resume_msg = None
                moved = mono()
            self._tick_stats()
        self._flush(sinks_now=True)

    def _stalled(self, stall_ns: int) -> int:
        """No step for ``stall_ns``: fail naming the input the furthest-behind waiting model lacks,
        its producer and the last sample of it this process accepted; a model that lacks nothing
        waits for the pace or its end (not a stall): the wait starts again (the new start returned)."""
        for m in sorted((m for m in self.sched.models if not m.done), key=lambda m: m.t_ns):
            missing = m.buf.missing(m.t_ns, m.period_ns)
            if not missing:
                continue
            topic = missing[0]
            producer = next((n for n, svc in (self.start.get("services") or {}).items()
                             if any(t == topic for t, _ in svc.get("outputs", ()))), "?")
            last = self._gate.last.get(topic)
            seen = f"t = {last / 1e9:.6f} s" if last is not None else "none"
            self.sched.current = m
            raise _Fail(f"stalled: no step for {stall_ns / 1e9:g} s (sim.stall_timeout) at t = {m.t_ns / 1e9:.6f} s, "
                        f"waiting on {topic!r} from {producer!r}; the last sample of it accepted: {seen}")
        return time.monotonic_ns()

    def _step_sources(self, t0: int, t_end: int, speed: float, anchor: int) -> int:
        """Publish up to :data:`_SOURCE_BATCH` messages of each source whose instant has come."""
        n = 0
        mono = time.monotonic_ns
        for m in self.sched.sources:
            if m.done:
                continue
            holding = self._holding.get(m.name)
            for _ in range(_SOURCE_BATCH):
                item = self._src_next.get(m.name)
                if item is None:
                    if holding is not None and holding():  # paused: not read, so control is still answered
                        break
                    item = m.obj.read()
                    if item is None and holding is not None and holding():  # held at its end: not the end
                        break
                    if item is None or (t_end and item[0] > t_end):
                        self._end_source(m)
                        break
                    self._src_next[m.name] = item
                t, topic, payload = item
                if speed > 0 and anchor + int((t - t0) / speed) > mono():
                    break
                self.sched.publish_frame(m, topic, payload, decode)
                self._src_next[m.name] = None
                m.t_ns = max(m.t_ns, t)
                m.steps += 1
                n += 1
        return n

    def _end_source(self, m: Member) -> None:
        """A source has published all it has: ``eos`` (consumers' event bounds of its topics end)."""
        m.done = True
        self.sched.outbox.append(b"sim/control\0" + encode(
            "sim/control", {"cmd": "eos", "info": {}}, sender=m.name, seq=self._ctl_seq, t_ns=max(m.t_ns, 0),
            h_ns=m.period_ns or 1))
        self._ctl_seq += 1
        for c in self.sched.models:
            c.buf.end_of_stream([p.topic for p in m.outputs])

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
        now = mono_ns
        inputs = bool(self._inputs_of) or bool(self._sinks)
        while (rem := deadline - now()) > _CTL_EVERY_NS + _DRAIN_EARLY_NS:
            time.sleep(_CTL_EVERY_NS / 1e9)
            self._control()
            if self._resume_msg is not None:
                return
        if rem > _DRAIN_EARLY_NS and inputs:  # a long wait: an early take keeps the last one short
            time.sleep((rem - _DRAIN_EARLY_NS) / 1e9)
            self._drain()
            rem = deadline - now()
        if rem > _DRAIN_NS:
            time.sleep((rem - _DRAIN_NS) / 1e9)
        if inputs:
            self._drain()
        rem = deadline - now()
        if rem > _SPIN_NS:
            time.sleep((rem - _SPIN_NS) / 1e9)
        if now() >= deadline:  # late (an overrun): still let equal-priority threads in (this
            os.sched_yield()   # process's I/O thread, with the launcher's pings and the inputs)
        while now() < deadline:
            os.sched_yield()  # spinning, but an equal-priority service due now gets the core

    def _mono_from_wall(self, wall_ns: int) -> int:
        """The local monotonic instant [ns] of the run's time base instant ``wall_ns`` (the master's clock)."""
        if self._sync is not None:
            return self._sync.to_local(wall_ns)
        return wall_ns + self._wall_to_mono

    def master_ns(self) -> int:
        """Now on the run's time base (the master launcher's clock) [ns]: this host's clock, or the estimate of it."""
        if self._sync is not None:
            return self._sync.to_master(mono_ns())
        return wall_ns()

    def clock_report(self) -> dict[str, Any]:
        """``clock = "sync"``: the estimate's offset (the master's clock less this host's wall clock), drift, round
        trips and uncertainty (empty otherwise)."""
        if self._sync is None:
            return {}
        out = self._sync.report(mono_ns())
        out["offset_ns"] = self._sync.to_master(mono_ns()) - wall_ns()  # the master's clock - this host's wall clock
        if self._sync_thread is not None and self._sync_thread.error:
            out["error"] = self._sync_thread.error
        return out

    def _run_realtime(self) -> None:
        sched = self.sched
        t0 = int(self.start["t0_ns"])
        # before the start instant, so that the first steps see them; stamped with the start instant's wall
        # time, when their values begin to hold (an input's age is then measured from the start)
        sched.initial(t0, int(self.start["start_wall_ns"]))
        self._flush()
        self._wall_to_mono = time.monotonic_ns() - time.time_ns()
        self._resumed_wall = int(self.start["start_wall_ns"])
        anchor = int(self.start["start_wall_ns"])  # on the time base; _mono_from_wall makes it local
        if self._resume_msg is not None:  # frozen before the start, then resumed: the resume's instant is t0's
            self._resumed_wall = int(self._resume_msg["wall_ns"])
            anchor = self._resumed_wall - (int(self._resume_msg.get("t_ns", t0)) - t0)
        self._resume_msg = None
        set_priority(self.rt_priority)
        fine_timer_slack()
        for m in self.members:
            m.jitter.append(0)
            self.stats(m)  # warm up: the first percentile call imports and builds numpy internals (~30 ms)
            del m.jitter[:]
        gc.collect()
        gc.freeze()    # what exists now is never scanned again
        gc.disable()   # no collector pause inside a step; refcounting frees the loop's garbage
        modules = frozenset(sys.modules)
        try:
            self._realtime_loop(t0, anchor)
        finally:
            gc.enable()
            # a module first imported during the run cost the step that imported it (0.1 s and more):
            # named here, so that it joins protocol.realtime.LAZY_IMPORTS (imported before the start)
            self.late_imports = sorted(set(sys.modules) - modules)
            if self.late_imports:
                print(f"[{self.name}] note: imported during the realtime run (a step paid for it): "
                      f"{', '.join(self.late_imports)}", file=sys.stderr, flush=True)

    def _realtime_loop(self, t0: int, anchor: int) -> None:
        sched = self.sched
        t_end = int(self.start.get("t_end_ns") or 0)
        policy = self.start.get("overrun_policy", "continue")
        limit = int(self.start.get("overrun_limit", 10))
        max_lag = int(self.start.get("max_lag_ns", 0))
        max_age = int(self.start.get("max_input_age_ns", 0))
        models = sorted(sched.models, key=lambda m: m.period_ns)  # rate-monotonic order at a common instant
        run_of = {m.name: 0 for m in models}  # consecutive overruns
        busy = {m.name: self._busy.get(m.name, (0, 0, False)) for m in models}
        mono, wall, cpu = mono_ns, self.master_ns, time.thread_time_ns
        local = self._mono_from_wall  # the time base (``anchor`` is on it) to this host's monotonic clock
        catchup = t0  # after a resume: steps up to this instant catch up with the common instant (no overrun)
        prev_wall, prev_cpu = mono(), cpu()
        while True:
            live = [m for m in models if not m.done]
            if not live and all(m.done for m in sched.sources):
                break
            t = min(m.t_ns for m in live) if live else None
            if sched.sources:
                due_src = self._next_source_due(t0, t_end, local(anchor))
                if due_src is not None and (t is None or due_src < local(anchor + (t - t0))):
                    self._wait_until(due_src)
                    self._step_sources(t0, t_end, 1.0, local(anchor))
                    self._flush()
                    self._tick_stats()
                    continue
            if t is None:
                self._wait(20)
                continue
            due = local(anchor + (t - t0))
            self._wait_until(due)
            if self._resume_msg is not None:   # re-anchor after a freeze: the common instant at the resume's
                msg, self._resume_msg = self._resume_msg, None   # wall time, on the time base
                self._wall_to_mono = time.monotonic_ns() - time.time_ns()
                self._resumed_wall = int(msg["wall_ns"])
                catchup = int(msg.get("t_ns", t))
                anchor = int(msg["wall_ns"]) - (catchup - t0)
                run_of = dict.fromkeys(run_of, 0)
                prev_wall, prev_cpu = mono(), cpu()
                continue
            start = mono()
            gap = self._descheduled(start - due, start - prev_wall, cpu() - prev_cpu, live[0].period_ns)
            if gap:
                m = next(x for x in live if x.t_ns == t)
                if policy == "stop":
                    sched.current = m
                    raise _Fail(f"overload: {gap} at t = {t / 1e9:.3f} s; policy stop")
                if policy == "freeze":
                    self._flush()
                    m.ctl.send({"op": "frozen", "reason": f"{gap} at t = {t / 1e9:.3f} s", "t_ns": t})
                    self._freeze()
                    continue
            for m in live:
                if m.t_ns != t:
                    continue
                h = m.period_ns
                m.jitter.append(start - due)
                u = m.buf.latest(t, h)
                oldest = u.oldest_wall_ns()
                # an input's age counts from the last resume at most: a freeze is not staleness
                age = wall() - max(oldest, self._resumed_wall) if oldest is not None else 0
                if oldest is not None:
                    m.age.append(age)
                sched.current = m
                began = mono()
                outs = m.obj.step(t, h, u) if m.ctx is None else m.obj.step(t, h, m.ctx, u)
                if busy[m.name][0] and t >= busy[m.name][1]:  # test-only overload knob (BUSY_ENV)
                    if busy[m.name][2]:  # once, without CPU time: a process stopped mid-step
                        time.sleep(busy[m.name][0] / 1e9)
                        busy[m.name] = (0, 0, False)
                    else:
                        end = mono() + busy[m.name][0]
                        while mono() < end:
                            pass
                m.t_ns = t + h
                sched.publish(m, outs, m.t_ns, wall())
                sched.current = None
                m.steps += 1
                if t_end and m.t_ns >= t_end:
                    m.done = True
                done_at = mono()
                late = done_at - local(anchor + (m.t_ns - t0)) if m.t_ns > catchup else 0
                # sustained overload: steps that themselves take longer than the period, one after the other
                # (a step that is late only because an earlier one was, and catches up, is not counted here)
                run_of[m.name] = run_of[m.name] + 1 if done_at - began > h else 0
                why = ""
                if late > 0:
                    m.overruns += 1
                    # stopped mid-iteration (SIGSTOP, a paused VM): the lateness came without CPU time
                    why = self._descheduled(late, done_at - prev_wall, cpu() - prev_cpu, h)
                    if max_lag and late > max_lag and not why:
                        sched.current = m
                        raise _Fail(f"{late / 1e9:.3f} s behind the wall clock at t={m.t_ns / 1e9:.3f} s (sim.max_lag "
                                    f"{max_lag / 1e9:g} s): its steps take longer than its {h / 1e6:g} ms period on "
                                    f"this host ({m.overruns} overruns in {m.steps} steps); run it in lockstep, or on "
                                    "a host with more free cores")
                    if why and policy == "continue" and max_lag and late > max_lag:
                        sched.current = m
                        raise _Fail(f"{late / 1e9:.3f} s behind the wall clock at t={m.t_ns / 1e9:.3f} s (sim.max_lag "
                                    f"{max_lag / 1e9:g} s): {why}")
                if why:  # a descheduled process: the policy applies to that cause
                    run_of[m.name] = 0
                elif run_of[m.name] >= limit:
                    why = (f"{run_of[m.name]} consecutive steps longer than its {h / 1e6:g} ms period "
                           f"(sim.overrun_limit {limit}) at t = {m.t_ns / 1e9:.3f} s, the last "
                           f"{(done_at - began) / 1e6:.2f} ms")
                elif max_age and age > max_age:
                    why = (f"an input {age / 1e6:.1f} ms old at t = {m.t_ns / 1e9:.3f} s "
                           f"(sim.max_input_age {max_age / 1e6:g} ms)")
                if why and policy == "stop":
                    sched.current = m
                    self._flush()
                    raise _Fail(f"overload: {why}; policy stop")
                if why and policy == "freeze":
                    run_of[m.name] = 0
                    self._flush()
                    m.ctl.send({"op": "frozen", "reason": f"overload: {why}", "t_ns": m.t_ns})
                    self._freeze()
                    # the resume re-anchors the clock at the loop's top: the models still due at t step after
                    # it (stepped here, on the old anchor, each would find itself seconds late and freeze again)
                    break
            self._flush()
            self._tick_stats()
            prev_wall, prev_cpu = mono(), cpu()
        self._flush(sinks_now=True)

    @staticmethod
    def _descheduled(wake_late: int, wall_d: int, cpu_d: int, h: int) -> str:
        """Why a step woke ``wake_late`` ns after its start instant, if the process did not run meanwhile.

        ``wall_d`` and ``cpu_d`` are the wall and thread CPU time since the previous step
        ended [ns]. The lateness that built up since then, ``min(wake_late, wall_d)``, is time in
        which a running thread steps or spins (it sleeps only until just before a step's start);
        more than :data:`_GAP_NS` (and ten periods) of it with the thread's CPU time under a
        quarter of it means the process was stopped (SIGSTOP, a paused VM) or kept off its core:
        not a slow step, whose lateness comes with CPU time spent and builds up over many steps.
        Empty if it ran.
        """
        late = min(wake_late, wall_d)
        if late <= max(_GAP_NS, 10 * h) or cpu_d * 4 >= late:
            return ""
        return (f"the process did not run for {late / 1e9:.3f} s (its thread ran {cpu_d / 1e6:.1f} ms since its "
                f"last step: stopped, paused or kept off its core, not a slow step)")

    def _next_source_due(self, t0: int, t_end: int, anchor: int) -> int | None:
        """The wall instant (monotonic) of the earliest next source message, or None if every source ended."""
        due = None
        for m in self.sched.sources:
            if m.done:
                continue
            item = self._src_next.get(m.name)
            holding = self._holding.get(m.name)
            if item is None:
                if holding is not None and holding():
                    continue
                item = m.obj.read()
                if item is None and holding is not None and holding():
                    continue
                if item is None or (t_end and item[0] > t_end):
                    self._end_source(m)
                    continue
                self._src_next[m.name] = item
            d = anchor + (item[0] - t0)
            due = d if due is None else min(due, d)
        return due

    # ------------------------------------------------------------------ sinks alone
    def _drain_quiet(self, quiet_ns: int = 100 * _MS, limit_ns: int = SINK_DRAIN_LIMIT_NS) -> None:
        """Sinks at stop: keep receiving until the bus has been quiet for ``quiet_ns`` (bounded by ``limit_ns``).

        The launcher stops sinks after every producer has stopped, so what is queued then
        is finite: an unpaced source may have run far ahead of a sink, and all of it is
        taken before the sink stops.
        """
        end = time.monotonic_ns() + limit_ns
        poll = self.bus.poll
        while time.monotonic_ns() < end and poll(quiet_ns // _MS):
            self._drain_sinks()
        self._flush(sinks_now=True)

    def _run_sinks(self) -> None:
        """A process of sinks only: drain in bulk, then sleep :data:`_SINK_BATCH_S` so messages pile up."""
        poll = self._poller.poll
        while True:
            if poll(100):
                self._drain_sinks()
                self._control()
                time.sleep(_SINK_BATCH_S)
            self._tick_stats()

    def _drain_sinks(self) -> None:
        """Every queued frame to the sinks at once (probes and ``eos`` still seen by the process)."""
        frames = self.bus.recv_frames()
        if not frames:
            return
        for f in frames:
            if f.startswith(CONTROL_PREFIX):
                self._on_control_frame(f, f[len(CONTROL_PREFIX):], to_sinks=False)
        self._sink_pending.extend(frames)
        self._flush(sinks_now=True)

    def _finish(self) -> None:
        """Report done, then serve until every member is told to stop (sockets stay open so nothing is lost)."""
        for m in self._steppers:
            self._publish_stats(m, state="done")
            m.ctl.send({"op": "done", "t_ns": m.t_ns, "stats": self.final_stats(m)})
        while True:
            if self._sinks:
                if self._poller.poll(100):
                    self._drain_sinks()
                self._control()
                self._tick_stats()
            else:
                self._wait(100)


class ServiceShell(ProcessShell):
    """A process of one service: :class:`ProcessShell` over ``[obj]`` (``buf`` is its input buffer)."""

    def __init__(self, obj: Any, url: str, peers: dict[str, str], *, security: Security | None = None,
                 context: Context | None = None, stop_event: threading.Event | None = None) -> None:
        super().__init__([obj], url, peers, security=security, context=context, stop_event=stop_event)

    @property
    def member(self) -> Member:
        """The one service."""
        return self.members[0]


def run_process(objs: Any, url: str, peers: dict[str, str], *, name: str | None = None,
                security: Security | None = None, context: Context | None = None,
                stop_event: threading.Event | None = None, rt_priority: int = 0, clock: str = "local") -> int:
    """Run ``objs`` as one process under a :class:`ProcessShell`; the process exit code (0 clean, 1 error)."""
    return ProcessShell(objs, url, peers, name=name, security=security, context=context, stop_event=stop_event,
                        rt_priority=rt_priority, clock=clock).run()


def run_service(obj: Any, url: str, peers: dict[str, str], *, security: Security | None = None,
                context: Context | None = None, stop_event: threading.Event | None = None) -> int:
    """Run ``obj`` alone under a :class:`ProcessShell`; the process exit code (0 clean, 1 error)."""
    return run_process([obj], url, peers, security=security, context=context, stop_event=stop_event)
