"""One time base across hosts: a follower's estimate of the master's clock (DESIGN §3, several hosts).

The master launcher's clock (``CLOCK_REALTIME``, :func:`time.time_ns`) is the run's time
base: the start instant, a resume's anchor and every sample's wall stamp are on it. A
process on another host estimates it from the control channel's round trips, as NTP does
(Mills, *Computer Network Time Synchronization*, 2nd ed., ch. 3; RFC 5905 §8):

- a request leaves at local ``t1``; the master stamps ``t2`` (receipt) and ``t3`` (reply);
  the reply arrives at local ``t4``. The sample's offset is
  ``theta = ((t2 - t1) + (t3 - t4)) / 2`` and its round trip ``delta = (t4 - t1) - (t3 - t2)``;
  the true offset lies within ``theta ± delta / 2`` whatever the paths' asymmetry;
- **minimum-RTT filter**: of every :data:`BUCKET` consecutive samples only the one with
  the least round trip is kept (queueing only ever adds delay, so it is the least
  disturbed);
- **offset and drift by regression** of the kept offsets on local time over a window of
  :data:`WINDOW_S` seconds: ``master ≈ local + a + b (local - ref)``; ``b`` is the master
  clock's rate against the local one, and the local clock's drift against the master's is
  reported as ``drift_ppm = (1 / (1 + b) - 1) · 1e6`` (positive: the local clock runs fast).

Pacing on a follower converts master instants to its own monotonic clock through the
estimate (:meth:`ClockSync.to_local`), so it follows the master's rate, not its own
oscillator's: input ages stay bounded however long the run.

Where the hosts share a PTP-disciplined ``CLOCK_REALTIME`` (``sim.clock = "ptp"``), no
estimate is made: every process reads :func:`time.time_ns` directly.

A test-only knob makes one host's clock run fast: ``BERTHSIM_TEST_CLOCK_PPM=200`` in the
environment of a launcher makes it and the processes it starts read every monotonic and
wall time through :func:`mono_ns` and :func:`wall_ns` scaled by ``1 + 200e-6`` about the
instant :data:`CLOCK_ORIGIN_ENV` (set by the first process that reads the knob and
inherited by its children, so that a host's processes agree).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections import deque
from typing import Any

import numpy as np

from protocol.realtime import set_priority

__all__ = ["BUCKET", "CLOCK_ORIGIN_ENV", "CLOCK_PPM_ENV", "ClockSync", "SYNC_PERIOD_NS", "SyncThread", "WINDOW_S",
           "mono_ns", "wall_ns"]

CLOCK_PPM_ENV = "BERTHSIM_TEST_CLOCK_PPM"
"""Test-only: this host's clocks run fast by this many ppm (negative: slow)."""
CLOCK_ORIGIN_ENV = "BERTHSIM_TEST_CLOCK_ORIGIN"
"""Test-only: the monotonic instant [ns] about which :data:`CLOCK_PPM_ENV` scales (set once per host)."""

SYNC_PERIOD_NS = 100_000_000
"""A request to the master every 100 ms."""
BUCKET = 4
"""Samples per minimum-RTT bucket."""
WINDOW_S = 30.0
"""Seconds of kept samples in the regression."""
_MIN_FOR_DRIFT_S = 2.0  # below this span of kept samples only the offset is estimated (drift 0)


def _knob() -> tuple[float, int]:
    ppm = float(os.environ.get(CLOCK_PPM_ENV, "0") or 0.0)
    if not ppm:
        return 0.0, 0
    origin = os.environ.get(CLOCK_ORIGIN_ENV)
    if origin is None:
        origin = str(time.monotonic_ns())
        os.environ[CLOCK_ORIGIN_ENV] = origin  # inherited by the processes this one starts
    return ppm * 1e-6, int(origin)


_K, _ORIGIN = _knob()


def mono_ns() -> int:
    """This host's monotonic clock [ns] (:func:`time.monotonic_ns`, scaled by the test knob if set)."""
    m = time.monotonic_ns()
    return m + int((m - _ORIGIN) * _K) if _K else m


def wall_ns() -> int:
    """This host's wall clock [ns since the epoch] (:func:`time.time_ns`, scaled by the test knob if set)."""
    if not _K:
        return time.time_ns()
    return time.time_ns() + int((time.monotonic_ns() - _ORIGIN) * _K)


class ClockSync:
    """A follower's estimate of the master's clock from request/reply round trips (see the module docstring).

    Parameters
    ----------
    window_s : float
        Seconds of kept samples the regression spans.

    Attributes
    ----------
    rtts : deque of int
        The last 2,000 round trips [ns], for the report.
    """

    def __init__(self, window_s: float = WINDOW_S) -> None:
        self.window_ns = int(window_s * 1e9)
        self.rtts: deque[int] = deque(maxlen=2000)
        self._bucket: list[tuple[int, int, int]] = []  # (delta, local mid, theta) of the current bucket
        self._kept: deque[tuple[int, int, int]] = deque()
        # (ref, a, b): master - local = a + b (local - ref) [ns]; replaced whole, so a reader in another
        # thread always sees one fit
        self._fit_ = (0, 0.0, 0.0)
        self.samples = 0
        self.fitted = False

    # ------------------------------------------------------------------ samples
    @staticmethod
    def request(local_ns: int) -> dict[str, Any]:
        """The control message of a request sent at local ``local_ns`` (``t1``)."""
        return {"op": "sync", "t1": int(local_ns)}

    def on_reply(self, msg: dict[str, Any], t4: int) -> None:
        """Take the master's reply (``t1``, ``t2``, ``t3``) that arrived at local ``t4`` [ns]."""
        t1, t2, t3 = int(msg["t1"]), int(msg["t2"]), int(msg["t3"])
        delta = (t4 - t1) - (t3 - t2)
        if delta < 0 or t4 < t1:
            return  # not a reply to a request of this clock (or its clock stepped): useless
        theta = ((t2 - t1) + (t3 - t4)) // 2
        self.samples += 1
        self.rtts.append(delta)
        self._bucket.append((delta, (t1 + t4) // 2, theta))
        if len(self._bucket) >= BUCKET or not self.fitted:
            self._kept.append(min(self._bucket))
            self._bucket = []
            while self._kept and self._kept[-1][1] - self._kept[0][1] > self.window_ns:
                self._kept.popleft()
            self._fit()

    def _fit(self) -> None:
        kept = self._kept
        ref = kept[-1][1]
        theta0 = kept[-1][2]
        if len(kept) >= 3 and kept[-1][1] - kept[0][1] >= _MIN_FOR_DRIFT_S * 1e9:
            x = np.array([k[1] - ref for k in kept], dtype=float)
            y = np.array([k[2] - theta0 for k in kept], dtype=float)
            b, a = np.polyfit(x, y, 1)
            self._fit_ = (ref, theta0 + float(a), float(b))
        else:
            self._fit_ = (ref, float(min(kept)[2]), 0.0)  # the least round trip's offset
        self.fitted = True

    # ------------------------------------------------------------------ conversions
    def offset_ns(self, local_ns: int) -> float:
        """Estimated ``master - local`` at local instant ``local_ns`` [ns]."""
        ref, a, b = self._fit_
        return a + b * (local_ns - ref)

    def to_master(self, local_ns: int) -> int:
        """The master's time [ns] at local instant ``local_ns``."""
        return local_ns + int(self.offset_ns(local_ns))

    def to_local(self, master_ns: int) -> int:
        """The local instant [ns] at which the master's clock reads ``master_ns``."""
        # master = local + a + b (local - ref)  =>  local = (master - a + b ref) / (1 + b)
        ref, a, b = self._fit_
        return int((master_ns - a + b * ref) / (1.0 + b))

    def report(self, local_ns: int) -> dict[str, Any]:
        """Offset, drift, round trips and the offset's uncertainty now (for ``sim/stats`` and the summary).

        ``offset_ns`` is master − local; ``drift_ppm`` is the local clock's rate against the
        master's (positive: fast); ``uncertainty_ns`` is half the least round trip of the
        window (the bound on any offset sample's error, RFC 5905 §8) plus the regression's
        residual spread.
        """
        rt = np.array(self.rtts, dtype=float) if self.rtts else np.zeros(1)
        resid = 0.0
        if len(self._kept) >= 3:
            x = np.array([k[1] for k in self._kept], dtype=float)
            y = np.array([k[2] for k in self._kept], dtype=float)
            fit = np.array([self.offset_ns(int(v)) for v in x])
            resid = float(np.std(y - fit))
        least = min((k[0] for k in self._kept), default=0)
        b = self._fit_[2]
        return {"offset_ns": int(self.offset_ns(local_ns)), "drift_ppm": (1.0 / (1.0 + b) - 1.0) * 1e6,
                "rtt_p50_ns": int(np.percentile(rt, 50)), "rtt_p99_ns": int(np.percentile(rt, 99)),
                "uncertainty_ns": int(least / 2 + resid), "sync_samples": self.samples,
                "span_s": (self._kept[-1][1] - self._kept[0][1]) / 1e9 if self._kept else 0.0}


class SyncThread(threading.Thread):
    """The round trips of one process, in a thread of their own with their own control socket.

    A reply is timestamped the moment it arrives (the thread blocks on its socket), not when
    the stepping loop next looks at its control messages, which would add up to a step
    period to the return path and bias the offset by half of it. The thread sends a request
    every :data:`SYNC_PERIOD_NS` (every 20 ms for the first 16) and waits for its reply at
    most 0.25 s; a late or foreign reply is dropped.

    In a realtime process the thread runs SCHED_FIFO one priority above the stepping thread
    (``priority``), as a time daemon does: under normal scheduling it would wait behind the
    SCHED_FIFO threads of every service on a loaded host, its requests would thin out and
    the drift, estimated from too short a span, would be left at zero, so the error would
    grow by the drift (200 ppm: 12 ms a minute). It sleeps between round trips, so the
    priority costs the stepping thread microseconds a second. An error in the thread is
    kept in :attr:`error` and printed once; the estimate then holds its last fit.

    Parameters
    ----------
    sync : ClockSync
        The estimate it feeds (read by the stepping thread).
    client : callable
        Makes the thread's control client (a ``protocol.bus.ControlClient`` with identity
        ``clock:NAME``), called inside the thread, which owns the socket.
    priority : int
        SCHED_FIFO priority of the thread (0: normal scheduling).
    """

    def __init__(self, sync: ClockSync, client: Any, priority: int = 0) -> None:
        super().__init__(name="clocksync", daemon=True)
        self.sync = sync
        self._client = client
        self.priority = int(priority)
        self.stop_event = threading.Event()
        self.error: str | None = None

    def run(self) -> None:
        if self.priority > 0:
            set_priority(self.priority)
        try:
            self._round_trips()
        except Exception as err:  # noqa: BLE001 - kept and told; the estimate holds its last fit
            self.error = f"{type(err).__name__}: {err}"
            print(f"note: the clock estimate stopped ({self.error}); it holds its last fit", file=sys.stderr,
                  flush=True)

    def _round_trips(self) -> None:
        with self._client() as ctl:
            while not self.stop_event.is_set():
                t1 = mono_ns()
                ctl.send(ClockSync.request(t1))
                end = t1 + 250_000_000
                while (now := mono_ns()) < end and not self.stop_event.is_set():
                    msg = ctl.recv(min(0.05, (end - now) / 1e9))
                    if msg is not None and msg.get("op") == "sync" and msg.get("t1") == t1:
                        self.sync.on_reply(msg, mono_ns())
                        break
                period = SYNC_PERIOD_NS if self.sync.samples >= 16 else 20_000_000
                self.stop_event.wait(max(0.0, (t1 + period - mono_ns()) / 1e9))

    def stop(self) -> None:
        """Stop and wait for the thread (at most 1 s)."""
        self.stop_event.set()
        self.join(1.0)
