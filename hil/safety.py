"""Safety: the rig state machine, watchdogs, the NaN guard, soft limits, the ramp to neutral.

The same state machine runs at both ends of the link (host: :class:`SafetySupervisor`;
rig: the emulator's controller), with the states of :class:`hil.framing.RigState`::

    IDLE ──arm(handshake ok)──▶ ARMED ──engage──▶ ENGAGED ──park──▶ PARKING ──at neutral──▶ ARMED
    any ──fault──▶ FAULT (ramp to neutral)     any ──estop──▶ ESTOP (latched)
    FAULT, ESTOP ──reset──▶ IDLE

IDLE is motion-gated: nothing moves until a successful arming handshake (protocol
version and rig fingerprint) and an explicit engage. A fault — watchdog, loss of the
simulation, a stale or non-finite input, N consecutive bad frames, a fault reported
by the rig — ramps the command to neutral with :func:`ramp_step`, a jerk-bounded
profile that never exceeds the rig's velocity and acceleration limits.

Pure: times are arguments, no clock, no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dynamics.stewart import RigLimits
from errors import ConfigError, LifecycleError
from hil.framing import PROTOCOL_VERSION, Fault, Hello, RigState, Telemetry

__all__ = ["watchdog_timeout", "stop_speed", "ramp_step", "ramp_to", "rate_limit", "rate_limit_rows", "transition",
           "SafetySupervisor"]

Array = NDArray[np.float64]

#: (state, event) → next state; an event absent for a state is not allowed there.
_TRANSITIONS: dict[tuple[RigState, str], RigState] = {
    (RigState.IDLE, "arm"): RigState.ARMED,
    (RigState.ARMED, "engage"): RigState.ENGAGED,
    (RigState.ENGAGED, "park"): RigState.PARKING,
    (RigState.PARKING, "parked"): RigState.ARMED,
    (RigState.ARMED, "park"): RigState.ARMED,
    (RigState.FAULT, "reset"): RigState.IDLE,
    (RigState.ESTOP, "reset"): RigState.IDLE,
}


def transition(state: RigState, event: str) -> RigState:
    """Next state of the rig state machine.

    ``fault`` goes to FAULT from any state but ESTOP (which stays latched); ``estop``
    goes to ESTOP from any state.

    Raises
    ------
    LifecycleError
        If ``event`` is not allowed in ``state`` (the message names both).
    """
    if event == "estop":
        return RigState.ESTOP
    if event == "fault":
        return RigState.ESTOP if state == RigState.ESTOP else RigState.FAULT
    try:
        return _TRANSITIONS[(state, event)]
    except KeyError:
        raise LifecycleError(f"hil safety: event {event!r} not allowed in state {state.name}") from None


def watchdog_timeout(period_s: float) -> float:
    """Watchdog timeout for a stream of the given period: ``max(3 periods, 20 ms)`` [s]."""
    return max(3.0 * period_s, 0.020)


def stop_speed(d: Array, a_max: Array, j_max: Array) -> Array:
    """Largest speed from which a jerk-limited stop fits in the distance ``d ≥ 0``.

    The stopping distance from speed v at zero acceleration, ramping the deceleration
    up at ``j`` to ``a`` and holding it, is ``v²/(2a) + v a/(2j)``; this returns its
    inverse ``v = (−a²/j + √(a⁴/j² + 8 a d)) / 2`` (conservative for short stops).
    """
    a, j = a_max, j_max
    return 0.5 * (-(a * a) / j + np.sqrt((a * a / j) ** 2 + 8.0 * a * np.maximum(d, 0.0)))


def ramp_step(
    x: ArrayLike, v: ArrayLike, a: ArrayLike, target: ArrayLike, limits: RigLimits, dt: float
) -> tuple[Array, Array, Array]:
    """One step of the jerk-bounded ramp of every axis toward ``target``.

    Per axis: the desired speed is the jerk-limited stopping speed of the remaining
    distance (:func:`stop_speed`, capped at ``v_max``); the desired acceleration closes
    the gap between it and the speed the axis would reach if its acceleration were
    brought to zero at full jerk (``v + a|a|/(2j)``); the acceleration moves toward it
    by at most ``j_max dt``. Acceleration and speed are then clipped to their limits,
    which take precedence over the jerk bound. Position integrates with the trapezoid.

    Parameters
    ----------
    x, v, a : array_like, shape (n,)
        Axis position, speed, acceleration now. [m, m/s, m/s²] (or rad)
    target : array_like, shape (n,)
        Where to go (neutral).
    limits : RigLimits
        ``v_max``, ``a_max``, ``j_max`` per axis.
    dt : float
        Step [s].

    Returns
    -------
    x, v, a : ndarray, shape (n,)
        The state one step later; ``|v| ≤ v_max`` and ``|a| ≤ a_max`` always.
    """
    x = np.asarray(x, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    a = np.asarray(a, dtype=np.float64)
    vm, am, jm = limits.v_max, limits.a_max, limits.j_max
    d = np.asarray(target, dtype=np.float64) - x
    # the stop needs room for the speed lost while the deceleration builds up
    v_des = np.sign(d) * np.minimum(vm, stop_speed(np.abs(d), am, jm))
    v_lead = v + a * np.abs(a) / (2.0 * jm)
    a_des = np.clip((v_des - v_lead) * jm / am, -am, am)
    a_new = a + np.clip(a_des - a, -jm * dt, jm * dt)
    a_new = np.clip(a_new, -am, am)
    v_new = np.clip(v + a_new * dt, -vm, vm)
    a_new = (v_new - v) / dt
    x_new = x + 0.5 * (v + v_new) * dt
    return x_new, v_new, a_new


def ramp_to(
    x0: ArrayLike, v0: ArrayLike, a0: ArrayLike, target: ArrayLike, limits: RigLimits, dt: float, *, tol: float = 1e-6,
    max_steps: int = 100_000,
) -> tuple[Array, Array, Array]:
    """The whole ramp as arrays (steps, n) of position, speed, acceleration (for tests and plots).

    Stops when every axis is within ``tol`` of the target with speed below ``tol``/s.
    """
    x, v, a = (np.asarray(z, dtype=np.float64).copy() for z in (x0, v0, a0))
    xs, vs, as_ = [x], [v], [a]
    tgt = np.asarray(target, dtype=np.float64)
    for _ in range(max_steps):
        x, v, a = ramp_step(x, v, a, tgt, limits, dt)
        xs.append(x)
        vs.append(v)
        as_.append(a)
        if np.all(np.abs(tgt - x) < tol) and np.all(np.abs(v) < tol):
            break
    return np.array(xs), np.array(vs), np.array(as_)


_RATE_CONSTANTS: dict[tuple[int, float], tuple[RigLimits, list[tuple[float, ...]]]] = {}


def _rate_constants(limits: RigLimits, dt: float) -> list[tuple[float, ...]]:
    """Per axis, the constants of :func:`rate_limit` for ``limits`` and ``dt`` (computed once):
    ``lo, hi, v_max, a_max, a_max dt, (a_max dt)², 8 a_max, the margin 2 v_max dt`` (the ramp
    reacts one step late and integrates by trapezoid) and ``k = a_max²/j_max, k²`` (its stop
    speed, :func:`stop_speed` inlined)."""
    key = (id(limits), dt)
    hit = _RATE_CONSTANTS.get(key)
    if hit is not None and hit[0] is limits:
        return hit[1]
    rows: list[tuple[float, ...]] = []
    for lo, hi, vm, am, jm in zip(*limits.columns, strict=True):
        adt, k = am * dt, am * am / jm
        rows.append((lo, hi, vm, am, adt, adt * adt, 8.0 * am, 2.0 * vm * dt, k, k * k))
    if len(_RATE_CONSTANTS) > 64:
        _RATE_CONSTANTS.clear()
    _RATE_CONSTANTS[key] = (limits, rows)
    return rows


def rate_limit(
    x_cmd: Array, x: Array, v: Array, limits: RigLimits, dt: float, v_cmd: Array | None = None
) -> tuple[Array, Array, Array, bool]:
    """Soft limits on a command stream: follow ``x_cmd`` within the speed and acceleration limits.

    The desired speed is the command's own speed ``v_cmd`` (clipped to ``v_max``: a jump
    has no meaningful speed) plus a correction that closes the rest of the error
    ``e' = x_cmd − x − v_cmd dt`` in one step if it is small, and otherwise at the speed
    from which steps of deceleration ``a_max dt`` still stop on it (so a jump in the
    command is approached without overshoot). A
    command the axis can follow is followed exactly (``e' = 0``). The speed is clipped
    to ``v_max`` and to the jerk-limited stopping speed of the distance left to either
    stroke end (so that the ramp to neutral can always brake), the acceleration to
    ``a_max``.

    Parameters
    ----------
    x_cmd : ndarray, shape (n,)
        The command now.
    x, v : ndarray, shape (n,)
        The limited command's position and speed so far.
    limits : RigLimits
    dt : float
        Step [s].
    v_cmd : ndarray, shape (n,), optional
        The command's speed (its difference quotient); 0 if omitted.

    Returns
    -------
    x, v, a : ndarray, shape (n,)
        The next limited command.
    hit : bool
        True if a limit made it differ from ``x_cmd``.
    """
    xcs, xs, vs = x_cmd.tolist(), x.tolist(), v.tolist()
    xo, vo, ao, hit = rate_limit_rows(xcs, xs, vs, limits, dt, [0.0] * len(xs) if v_cmd is None else v_cmd.tolist())
    return np.array(xo), np.array(vo), np.array(ao), hit


def rate_limit_rows(
    x_cmd: list[float], x: list[float], v: list[float], limits: RigLimits, dt: float, v_cmd: list[float]
) -> tuple[list[float], list[float], list[float], bool]:
    """:func:`rate_limit` on lists of Python floats (its kernel, for callers that keep their
    axes as floats): the same arithmetic, lists (n,) in and out.

    Raises
    ------
    ValueError
        If the lists and the limits differ in length.
    """
    # plain floats per axis: for a handful of axes numpy's per-call cost is most of the work; the
    # clips are written as comparisons (what min/max do, first argument kept on ties and NaN)
    xo, vo, ao = [], [], []
    hit = False
    sqrt = math.sqrt
    for xi, vi, xc, vc, (lo, hi, vm, am, adt, adt2, am8, margin, k, k2) in zip(x, v, x_cmd, v_cmd,
                                                                              _rate_constants(limits, dt),
                                                                              strict=True):
        if -vm > vc:
            vc = -vm
        if vm < vc:
            vc = vm
        e = xc - xi - vc * dt
        ae = abs(e)
        # the largest speed from which steps of deceleration a_max·dt stop within |e|: v (v + a dt) / (2a) = |e|
        v_stop = 0.5 * (-adt + sqrt(adt2 + am8 * ae))
        step = ae / dt
        if v_stop < step:
            step = v_stop
        v_des = vc + (step if e > 0 else -step if e < 0 else 0.0)
        if -vm > v_des:
            v_des = -vm
        if vm < v_des:
            v_des = vm
        # the stroke ends' stop speeds v_lo, v_hi ≥ 0 (sqrt(k² + x) ≥ sqrt(k²) = k in IEEE
        # arithmetic), so only the one toward which the axis moves can clip; and not even that
        # one when the exact stop speed exceeds |v_des| by more than its rounding error (w below):
        # its square root is then not taken
        if v_des < 0.0:
            d_lo = xi - lo - margin
            w = 1e-12 * k - v_des
            if not (w * w + k * w) * (1.0 + 1e-9) < 0.25 * am8 * d_lo:
                v_lo = 0.5 * (-k + sqrt(k2 + am8 * (0.0 if 0.0 > d_lo else d_lo)))
                if -v_lo > v_des:
                    v_des = -v_lo
        elif v_des > 0.0:
            d_hi = hi - xi - margin
            w = 1e-12 * k + v_des
            if not (w * w + k * w) * (1.0 + 1e-9) < 0.25 * am8 * d_hi:
                v_hi = 0.5 * (-k + sqrt(k2 + am8 * (0.0 if 0.0 > d_hi else d_hi)))
                if v_hi < v_des:
                    v_des = v_hi
        ai = (v_des - vi) / dt
        if -am > ai:
            ai = -am
        if am < ai:
            ai = am
        vn = vi + ai * dt
        xn = xi + vn * dt
        if lo > xn:
            xn = lo
        if hi < xn:
            xn = hi
        hit = hit or abs(xn - xc) > 1e-9
        xo.append(xn)
        vo.append(vn)
        ao.append(ai)
    return xo, vo, ao, hit


@dataclass
class SafetySupervisor:
    """The host end of the safety chain: state machine, watchdogs, guards and the ramp.

    Call :meth:`tick` once per bridge period with the latest simulation command; it
    returns the axis setpoint to send, or None (motion-gated: send a heartbeat).

    Attributes
    ----------
    limits : RigLimits
    neutral : ndarray, shape (n,)
        Neutral axis values.
    period_s : float
        Bridge period [s].
    fingerprint : int
        Rig fingerprint the arming handshake expects.
    bad_frames_max : int
        Consecutive bad frames that fault the link.
    watchdog_s : float
        Defaults to :func:`watchdog_timeout` of the period.
    clamp_fault_after : int
        Consecutive engaged periods with a clamped command (the simulated pose outside the
        rig's workspace) after which the host faults (``Fault.LIMIT``); 0: never.
    fault_t : float or None
        When the first fault of the run came (the last :meth:`tick`'s time) [s]; None: none.
    fault_reason : str
        Why, in words (``""`` until a fault): the bits and the figures that tripped them.
    """

    limits: RigLimits
    neutral: Array
    period_s: float
    fingerprint: int
    bad_frames_max: int = 5
    watchdog_s: float = 0.0
    clamp_fault_after: int = 0
    state: RigState = RigState.IDLE
    faults: Fault = Fault.NONE
    x: Array = field(init=False)
    v: Array = field(init=False)
    a: Array = field(init=False)
    limit_hits: int = 0
    _arm_sent: bool = False
    _bad_run: int = 0
    _clamp_run: int = 0
    _cmd_prev: list[float] | None = None  # the last command, as floats
    fault_t: float | None = None
    fault_reason: str = ""
    _t: float = 0.0  # the last tick's time
    _follow: Any = None  # the compiled engaged step (load_kernels), else None: rate_limit_rows
    _prev: Array | None = None  # the last command, as an array (the compiled step's)
    _consts: tuple[RigLimits, float, Array] | None = None  # (limits, period, their constants (n, 10))

    def __post_init__(self) -> None:
        self.neutral = np.asarray(self.neutral, dtype=np.float64)
        if not self.period_s > 0 or self.bad_frames_max < 1 or self.clamp_fault_after < 0:
            raise ConfigError(f"hil safety: period {self.period_s} s and bad_frames_max {self.bad_frames_max} "
                              f"must be > 0, clamp_fault_after {self.clamp_fault_after} >= 0")
        if self.limits.violations(self.neutral):
            raise ConfigError(f"hil.neutral: axes {self.neutral.tolist()} outside the stroke: "
                              f"{self.limits.violations(self.neutral)}")
        if self.watchdog_s <= 0:
            self.watchdog_s = watchdog_timeout(self.period_s)
        self.x = self.neutral.copy()
        self.v = np.zeros_like(self.x)
        self.a = np.zeros_like(self.x)

    def load_kernels(self) -> None:
        """From now on, :meth:`tick`'s engaged step runs compiled (:func:`dynamics.safety_kernels.follow`: bit for
        bit the finiteness check, the command's speed and :func:`rate_limit_rows`, the readable reference, which
        runs until then); its machine code is loaded now (compiled if numba's cache has none), so that no step
        pays for it. The bridge calls it when it is built; a configuration check does not (no numba)."""
        from dynamics import kernel_module

        follow = kernel_module("safety_kernels").follow
        c = self._constants()
        follow(self.neutral, self.neutral, False, self.neutral, np.zeros_like(self.neutral), c, self.period_s,
               np.empty((3, self.neutral.size)))
        self._follow = follow
        self._prev = None if self._cmd_prev is None else np.array(self._cmd_prev, dtype=np.float64)

    @property
    def compiled(self) -> bool:
        """True once :meth:`load_kernels` ran."""
        return self._follow is not None

    def _constants(self) -> Array:
        """:func:`_rate_constants` of the limits and the period, as an array (n, 10) (kept while they are)."""
        kept = self._consts
        if kept is None or kept[0] is not self.limits or kept[1] != self.period_s:
            kept = self._consts = (self.limits, self.period_s,
                                   np.array(_rate_constants(self.limits, self.period_s), dtype=np.float64))
        return kept[2]

    # ------------------------------------------------------------------ events
    def request_arm(self) -> None:
        """Start the handshake (the bridge then sends ARM); only from IDLE."""
        transition(self.state, "arm")  # raises if not allowed
        self._arm_sent = True

    def on_hello(self, hello: Hello, version: int = PROTOCOL_VERSION) -> None:
        """The rig's answer to ARM: armed if the fingerprint and version match, else fault."""
        if not self._arm_sent or self.state != RigState.IDLE:
            return
        self._arm_sent = False
        if version != PROTOCOL_VERSION:
            self.fault(Fault.VERSION)
        elif hello.fingerprint != self.fingerprint:
            self.fault(Fault.FINGERPRINT)
        else:
            self.state = transition(self.state, "arm")

    def engage(self) -> None:
        """ARMED → ENGAGED; the command starts from neutral at rest."""
        self.state = transition(self.state, "engage")
        self.x, self.v, self.a = self.neutral.copy(), np.zeros_like(self.x), np.zeros_like(self.x)
        self._cmd_prev = None
        self._prev = None
        self._clamp_run = 0

    def park(self) -> None:
        """ENGAGED → PARKING (ramp to neutral, then ARMED)."""
        self.state = transition(self.state, "park")

    def estop(self) -> None:
        """Latched emergency stop: motion stops at once (no more setpoints) until :meth:`reset`."""
        self.state = transition(self.state, "estop")
        self.faults |= Fault.ESTOP
        self.v = np.zeros_like(self.x)
        self.a = np.zeros_like(self.x)

    def reset(self) -> None:
        """FAULT or ESTOP → IDLE, clearing the fault bits (the rig must be re-armed)."""
        self.state = transition(self.state, "reset")
        self.faults = Fault.NONE
        self._bad_run = 0

    def fault(self, bits: Fault, why: str = "") -> None:
        """Enter FAULT (ESTOP stays latched) and record the fault bits; the ramp starts.

        The first fault's time (the last tick's) and reason (``why``, else the bits' names) are
        kept in :attr:`fault_t` and :attr:`fault_reason`."""
        if self.fault_t is None:
            self.fault_t = self._t
            self.fault_reason = f"{Fault(bits).name or int(bits)}" + (f": {why}" if why else "")
        self.faults |= bits
        self.state = transition(self.state, "fault")

    def on_frames(self, good: int, bad: int) -> None:
        """Count link health: ``bad`` rejected then ``good`` valid frames since the last call."""
        if good:
            self._bad_run = 0
        self._bad_run += bad if not good else 0
        if self._bad_run >= self.bad_frames_max and self.state not in (RigState.FAULT, RigState.ESTOP):
            self.fault(Fault.BAD_FRAMES, f"{self._bad_run} bad frames from the rig in a row "
                                         f"(bad_frames_max {self.bad_frames_max})")

    def on_telemetry(self, tel: Telemetry) -> None:
        """A fault or e-stop reported by the rig faults the host too."""
        if tel.state in (RigState.FAULT, RigState.ESTOP) and self.state not in (RigState.FAULT, RigState.ESTOP):
            self.fault(Fault(int(tel.faults)), "reported by the rig")

    # ------------------------------------------------------------------ tick
    def tick(self, t: float, command: ArrayLike | None, command_t: float | None, rx_t: float | None,
             clamped: bool = False) -> Array | None:
        """One bridge period.

        Parameters
        ----------
        t : float
            Now [s].
        command : array_like, shape (n,), or None
            The axis command from the simulation (None if none held).
        command_t : float or None
            When that command was received [s] (for the stale-input watchdog).
        rx_t : float or None
            When the last valid rig frame was received [s] (the host-side watchdog).
        clamped : bool
            The command was clamped to the workspace (counted toward ``clamp_fault_after``).

        Returns
        -------
        ndarray, shape (n,), or None
            The setpoint to send, or None (send a heartbeat only).
        """
        self._t = t
        if self.state in (RigState.ENGAGED, RigState.PARKING) and (rx_t is None or t - rx_t > self.watchdog_s):
            self.fault(Fault.WATCHDOG, "no frame from the rig" if rx_t is None else
                       f"no frame from the rig for {t - rx_t:.3f} s (watchdog {self.watchdog_s:.3f} s)")
        if self.state == RigState.ENGAGED:
            if command is None or command_t is None or t - command_t > self.watchdog_s + 1e-9:  # (ns rounding)
                self.fault(Fault.HOST, "no command from the simulation" if command is None or command_t is None else
                           f"the simulation's command is {t - command_t:.3f} s old, older than the bridge's "
                           f"watchdog {self.watchdog_s:.3f} s (its inputs come too seldom, or a producer stopped)")
            elif self._follow is not None:  # (compiled: the branch below, bit for bit)
                setpoint = self._follow_compiled(command, clamped)
                if setpoint is not None:
                    return setpoint
            else:
                cmd = np.asarray(command, dtype=np.float64)
                xc = cmd.tolist() if cmd.shape == self.x.shape else []
                if not xc or not all(map(math.isfinite, xc)):
                    self.fault(Fault.NAN, "a command that is not finite")
                elif self._count_clamp(clamped):
                    self.fault(Fault.LIMIT, f"{self._clamp_run} commands in a row outside the rig's workspace "
                                            f"(clamp_fault_after {self.clamp_fault_after})")
                else:  # (plain floats: the arithmetic of rate_limit on arrays, without numpy's per-call cost)
                    prev, h = self._cmd_prev, self.period_s
                    v_cmd = [0.0] * len(xc) if prev is None else [(c - p) / h for c, p in zip(xc, prev, strict=True)]
                    self._cmd_prev = xc
                    x, v, a, hit = rate_limit_rows(xc, self.x.tolist(), self.v.tolist(), self.limits, h, v_cmd)
                    self.x, self.v, self.a = np.array(x), np.array(v), np.array(a)
                    self.limit_hits += int(hit)
                    return np.array(x)
        if self.state in (RigState.PARKING, RigState.FAULT):
            if self.at_neutral:
                if self.state == RigState.PARKING:
                    self.state = transition(self.state, "parked")
                    return None
                return self.x.copy()
            self.x, self.v, self.a = ramp_step(self.x, self.v, self.a, self.neutral, self.limits, self.period_s)
            return self.x.copy()
        return None

    def _follow_compiled(self, command: ArrayLike, clamped: bool) -> Array | None:
        """:meth:`tick`'s engaged step with a command, compiled (:meth:`load_kernels`): the same checks, faults
        and numbers as the reference's branch; the setpoint, or None after a fault."""
        cmd = np.asarray(command, dtype=np.float64)
        if cmd.shape != self.x.shape:
            self.fault(Fault.NAN, "a command that is not finite")
            return None
        if not cmd.flags.c_contiguous:
            cmd = np.ascontiguousarray(cmd)
        prev = self._prev
        out = np.empty((3, cmd.size))
        finite, hit = self._follow(cmd, cmd if prev is None else prev, prev is not None, self.x, self.v,
                                   self._constants(), self.period_s, out)
        if not finite:
            self.fault(Fault.NAN, "a command that is not finite")
        elif self._count_clamp(clamped):
            self.fault(Fault.LIMIT, f"{self._clamp_run} commands in a row outside the rig's workspace "
                                    f"(clamp_fault_after {self.clamp_fault_after})")
        else:
            self._prev = cmd.copy()
            self.x, self.v, self.a = out[0], out[1], out[2]  # (row views: unpacking iterates, slower)
            self.limit_hits += int(hit)
            return out[0].copy()
        return None

    def _count_clamp(self, clamped: bool) -> bool:
        """Count consecutive clamped commands; True once ``clamp_fault_after`` are reached."""
        self._clamp_run = self._clamp_run + 1 if clamped else 0
        return 0 < self.clamp_fault_after <= self._clamp_run

    @property
    def at_neutral(self) -> bool:
        """True once the command is at neutral (within 1 µm) and at rest."""
        return bool(np.all(np.abs(self.x - self.neutral) < 1e-6) and np.all(np.abs(self.v) < 1e-6))
