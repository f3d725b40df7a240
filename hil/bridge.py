"""The ``hil`` service: streams the relative pose of two simulated frames to a rig, and back.

Inputs ``orbiter/state`` and ``payload/state`` (states). Each step the bridge

1. forms ``X_LB = X_LW X_WB`` — the payload berthing interface B (``X_TB`` in the
   payload body T) relative to the orbiter latch L (``X_OL`` in the orbiter body O;
   both from ``[hil]``, else from ``[orbiter]`` / ``[payload]``, see
   :func:`hil.config.hil_table`) — and the relative twist ``V_LB_L``;
2. predicts it ahead by the measured round-trip delay (``[hil.compensation] predict``);
3. maps it to a rig pose, clamped to the workspace (:class:`dynamics.stewart.PoseMap`);
4. passes it through the safety supervisor (handshake, watchdogs, NaN guard, soft
   limits, ramp to neutral) and sends a setpoint, or a heartbeat while motion-gated;
5. reads the rig's telemetry (in lockstep it waits, bounded, for this step's reply);
   removes from the force/torque reading what a rig team removes (:meth:`HilBridge.sensed_contact`):
   the mock-up's weight and inertial load (``[hil.mockup]``, at the rig pose and acceleration
   commanded in the frame the reading echoes), the bias tared over ``[hil.compensation] tare``
   seconds after engaging (before contact), and the noise (a first-order low-pass,
   ``filter_hz``; the rig holds at neutral while taring); maps it back to a wrench on B, runs
   the passivity controller and the impact monitor.

Lockstep determinism: frames carry the simulation time, the link's clock is the
simulation time, and each step waits for the reply to its own frame (see
:meth:`HilBridge._read`) — or, with ``[hil] pipeline = true``, for the reply to the previous
step's frame, at the start of the step: the rig then works while the rest of the simulation
steps (the scheduler steps the other models of the process first while that reply is on its way:
:meth:`HilBridge.waits_on_device`), and its measurement reaches the simulation one link period
later, as over a real line — so ``hil/feedback`` and ``hil/status`` depend on the simulation only. Their delay
figures (``delay_s``, ``rtt_p50_s``, ``rtt_p99_s``) and ``rx_fps`` are then simulated-time
figures: the emulator's configured transport delay, rounded up to the bridge's steps.
Prediction (``[hil.compensation] predict``) uses that simulated round trip in lockstep —
deterministic too — and the wall-clock round trip in realtime.

A lossy link in lockstep: every frame is followed by a second delimiter, so that a
corrupted frame ends where it should and the rig rejects it with a NAK; a frame the rig
rejects is resent at once, one it does not answer within ``[hil] resend_after`` (both
delimiters lost, or the reply) then, with the same content and time stamp, until its
reply comes. The rig handles a resent frame as the one it replaces, so a lossy link costs
wall time, not results. Only a step whose reply never comes (``bad_frames_max`` resends
or ``reply_timeout`` in all) goes on with the previous reply, counted in
``replies_missed``. The resend decision (the device's, :meth:`hil.device.RigDevice.receive`)
reads the rig's answers, not the clock, except when nothing comes back for ``resend_after``:
a run stays bit-identical unless the emulator stalls that long.

Outputs ``hil/command`` (the commanded relative motion), ``hil/feedback`` (wrench on B
at Bo in B, measured legs, one-way delay, valid) and ``hil/status`` (state, fault bits,
link statistics: :meth:`hil.link.SerialLink.status`, with the rig's own count of rejected
chunks ``rig_rejected``, and the bridge's ``resent``, ``reply_timeouts`` (waits of
``resend_after`` that ended without a reply) and ``replies_missed``; the first fault's time
``fault_t`` (-1: none) and reason ``fault_reason``). The fed-back
wrench is zero and ``valid`` false unless the rig is engaged, was heard from within the
watchdog, and the command was not clamped (a clamped rig pose is not the simulated one,
so its contact force would be wrong).

A serial link is the bridge's purpose, but the model does no I/O of its own and reads no
clock: the rig is a device injected into it (:class:`hil.device.RigDevice`), which owns the
link, the rig protocol's backend (``[hil] format``, :mod:`hil.rigproto`) and the bounded,
wall-clock waits for replies with their resends. The bridge gives it the simulation time and
each step's frame, and handles the frames it returns; it checks the format's capabilities
where formats differ. :func:`build` opens the device from ``[hil] url``; tests pass one, or a
:class:`hil.link.SerialLink` (on ``loop://``, a pty or a :class:`hil.emulator.LockstepPort`)
the bridge makes one on.

Service module contract (``kind = "hil.bridge"``): ``TABLES``, ``OPTIONS``,
``validate(config, name)``, ``build(config, name, period_ns)``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dynamics import kernel_module
from dynamics.mockup import ForceTorqueSensor, mockup_load
from dynamics.rigid_body import predict_rows
from dynamics.spatial import (
    cross_rows,
    mat_mat_rows,
    mat_t_vec_rows,
    mat_vec_rows,
    rotation_rows,
    rotation_vector,
)
from errors import ConfigError, FrameError, RigFault, ShapeError
from hil.config import DEFAULTS, HIL_KEYS, HilConfig, HilParams, hil_table, parse
from hil.delay import ContactGate, ImpactMonitor, PassivityController, noise_floor, predict_pose
from hil.device import Batch, RigDevice
from hil.framing import Fault, Frame, Hello, RigState, Telemetry
from hil.link import URL_SCHEMES, SerialLink, bits_per_byte, check_line_budget
from hil.rigproto import RigProtocol, protocol_class
from hil.safety import SafetySupervisor, watchdog_timeout
from protocol.config import sim_values, table_values
from protocol.coupling import Schedule
from protocol.messages import BOOL, INT, MAP, STR, TopicSchema, f8
from protocol.realtime import RIG_PRIORITY, EmbeddedRig
from protocol.service import Inputs, Port, ServicePorts
from protocol.stability import StiffCoupling, critical_delay

__all__ = ["PARAMS", "TABLES", "TABLE_KEYS", "TOPICS", "OPTIONS", "OUTPUTS", "validate", "ports", "build",
           "calibration_model", "HilBridge", "relative_motion", "stiff_couplings"]

TABLES = ("hil", "orbiter", "payload", "contact")
"""The tables the bridge reads: ``[hil]``, and the frames, guides, payload mass and contact source it takes from
the others (:func:`hil.config.hil_table`, :func:`loop_stability`)."""
TABLE_KEYS = {"hil": HIL_KEYS}
OPTIONS: dict[str, Any] = {}
PARAMS = HilParams
"""The kind's declared parameters (:mod:`protocol.registry`): ``[hil]`` (:class:`hil.config.HilParams`; a parsed
table's values are :attr:`hil.config.HilConfig.params`)."""
INPUTS = (Port("orbiter/state", "state", "predict"), Port("payload/state", "state", "predict"))
"""The bridge's inputs: both bodies, predicted from their coupling instants to each step."""
OUTPUTS = (Port("hil/command", "state"), Port("hil/feedback", "state"), Port("hil/status", "state"))
"""The bridge's output ports."""

TOPICS: Mapping[str, TopicSchema] = {
    "hil/command": TopicSchema("berthsim.HilCommand", 1, "state", {
        "X_LB": f8(4, 4),
        "V_LB_L": f8(6),
    }),
    "hil/feedback": TopicSchema("berthsim.HilFeedback", 2, "state", {
        "F_Bo_B": f8(6),
        "legs": f8(6),  # m
        "delay_s": f8(),
        "valid": BOOL,
        "F_peak": f8(2),  # [max |τ|, max |f|] of F_Bo_B over the coupling interval (derived)
    }, derived={"F_peak": ("F_Bo_B", "wrench_max")}),
    "hil/status": TopicSchema("berthsim.HilStatus", 1, "state", {
        "state": STR,
        "faults": INT,
        "link": MAP,
    }),
}
"""The topics the bridge produces: the commanded relative motion, the rig's fed-back wrench and legs, the bridge's
status (:mod:`protocol.registry` registers them)."""

Array = NDArray[np.float64]

_FOLLOW_TOL = 1e-4
"""An axis setpoint the safety's rate limits held back by more than this [m or axis unit] is a rig that does not
follow the simulated pose: its reading is no contact of the simulation (the guides' 2e5 N/m make 0.1 mm 20 N)."""


def relative_motion(orbiter: dict[str, Any], payload: dict[str, Any], X_OL: Array, X_TB: Array) -> tuple[Array, Array]:
    """Pose ``X_LB`` (4, 4) and twist ``V_LB_L`` (6,) of B relative to L, from the two body states.

    Parameters
    ----------
    orbiter : mapping
        ``p_WoOo_W`` (3,), ``quat_WO`` (4,), ``w_WO_O`` (3,), ``v_WOo_W`` (3,).
    payload : mapping
        ``p_WoTo_W``, ``quat_WT``, ``w_WT_T``, ``v_WTo_W``.
    X_OL, X_TB : ndarray, shape (4, 4)
        Latch L in the orbiter body, interface B in the payload body.

    Returns
    -------
    X_LB : ndarray, shape (4, 4)
    V_LB_L : ndarray, shape (6,)
        [ω_LB; d/dt p_LoBo] expressed in L. [rad/s, m/s]

    Raises
    ------
    ShapeError
        If a field does not have its number of components.
    """
    o = [_floats(orbiter[k], n, k) for k, n in zip(_ORBITER[:4], (3, 4, 3, 3), strict=True)]
    t = [_floats(payload[k], n, k) for k, n in zip(_PAYLOAD[:4], (3, 4, 3, 3), strict=True)]
    return _relative_motion(o, t, _frame_rows(X_OL), _frame_rows(X_TB))[:2]


def _frame_rows(X: Array) -> tuple[list[float], tuple[float, ...]]:
    """A fixed frame's pose (4, 4) as floats: (position (3), rotation row-major (9))."""
    return X[:3, 3].tolist(), tuple(X[:3, :3].ravel().tolist())


_Body = Sequence[Sequence[float]]
"""A body's state as floats: position (3), quaternion (4), velocity (3), body rate (3) (:data:`_ORBITER`'s order)."""


def _relative_motion(orbiter: _Body, payload: _Body, L: tuple[list[float], tuple[float, ...]],
                     B: tuple[list[float], tuple[float, ...]]) -> tuple[Array, Array, bool]:
    """:func:`relative_motion` on the bodies' states as floats (checked: :func:`_floats`), ``X_OL``, ``X_TB``
    given as :func:`_frame_rows`; also whether every number of the result is finite."""
    pO, qO, vO, w_O = orbiter
    pT, qT, vT, w_T = payload
    R_WO = rotation_rows(*qO)  # plain floats: a dozen tiny
    R_WT = rotation_rows(*qT)  # numpy products cost more
    (p_OL, R_OL), (p_TB, R_TB) = L, B
    r_OL = mat_vec_rows(R_WO, *p_OL)  # p_OoLo in W
    r_TB = mat_vec_rows(R_WT, *p_TB)
    R_WL = mat_mat_rows(R_WO, R_OL)
    d = [pT[0] + r_TB[0] - pO[0] - r_OL[0], pT[1] + r_TB[1] - pO[1] - r_OL[1],
         pT[2] + r_TB[2] - pO[2] - r_OL[2]]  # p_LoBo in W
    R_LB = mat_mat_rows(R_WL[0::3] + R_WL[1::3] + R_WL[2::3], mat_mat_rows(R_WT, R_TB))  # R_WLᵀ R_WT R_TB
    p_LB = mat_t_vec_rows(R_WL, *d)
    wO = mat_vec_rows(R_WO, *w_O)
    wT = mat_vec_rows(R_WT, *w_T)
    a, b, c = cross_rows(*wO, *r_OL), cross_rows(*wT, *r_TB), cross_rows(*wO, *d)
    dv = [(vT[0] + b[0]) - (vO[0] + a[0]) - c[0], (vT[1] + b[1]) - (vO[1] + a[1]) - c[1],
          (vT[2] + b[2]) - (vO[2] + a[2]) - c[2]]
    X_LB = np.array([[*R_LB[0:3], p_LB[0]], [*R_LB[3:6], p_LB[1]], [*R_LB[6:9], p_LB[2]], [0.0, 0.0, 0.0, 1.0]])
    V = mat_t_vec_rows(R_WL, wT[0] - wO[0], wT[1] - wO[1], wT[2] - wO[2]) + mat_t_vec_rows(R_WL, *dv)
    finite = all(map(math.isfinite, R_LB)) and all(map(math.isfinite, p_LB)) and all(map(math.isfinite, V))
    return X_LB, np.array(V), finite


_ORBITER = ("p_WoOo_W", "quat_WO", "v_WOo_W", "w_WO_O", "a_WOo_W", "wdot_WO_O")
_PAYLOAD = ("p_WoTo_W", "quat_WT", "v_WTo_W", "w_WT_T", "a_WTo_W", "wdot_WT_T")


class _BodyInput:
    """A body input (``orbiter/state`` or ``payload/state``, fields ``names`` as :data:`_ORBITER`) as floats,
    checked (:func:`_floats`) once per sample: a sample holds over several bridge steps (its coupling period),
    and samples are immutable (:class:`protocol.service.Sample`)."""

    __slots__ = ("names", "sample", "state", "accel", "row", "row_sample", "row_accel")

    def __init__(self, names: tuple[str, ...]) -> None:
        self.names = names
        self.sample: Any = None  # the sample converted last, held (so that the identity test is sound)
        self.state: tuple[list[float], list[float], list[float], list[float]] = ([], [], [], [])  # its p, q, v, w
        self.accel: tuple[list[float], list[float]] | None = None  # its accelerations, once a step predicted
        self.row_sample: Any = None  # the sample in ``row`` (array_at), held
        self.row = np.zeros(19)  # that sample as the compiled kernel takes it (its accelerations once read)
        self.row_accel = False

    def at(self, sample: Any, t_ns: int) -> _Body:
        """The body's state (p, q, v, w as floats) predicted from ``sample`` to ``t_ns`` with its accelerations
        (:func:`dynamics.rigid_body.predict_rows`); the sample's own when it is stamped ``t_ns`` (its accelerations
        then not read).

        Raises
        ------
        ShapeError
            If a field does not have its number of components.
        KeyError
            If a field is missing.
        """
        p, q, v, w, a, wd = self.names
        b = sample.body
        if sample is not self.sample:
            self.state = (_floats(b[p], 3, p), _floats(b[q], 4, q), _floats(b[v], 3, v), _floats(b[w], 3, w))
            self.accel = None
            self.sample = sample
        dt = (t_ns - sample.t_ns) * 1e-9
        if dt <= 0.0:
            return self.state
        if self.accel is None:
            self.accel = (_floats(b[a], 3, a), _floats(b[wd], 3, wd))
        (P, Q, V, W), (A, Wd) = self.state, self.accel
        return predict_rows(P, Q, V, W, A, Wd, dt)

    def array_at(self, sample: Any, t_ns: int) -> tuple[Array, float]:
        """The sample as the compiled kernel takes it (:data:`dynamics.relative_motion_kernels.BODY_SIZE`,: p, q,
        v, w, then its accelerations, read, as by :meth:`at`, only when it is to be predicted) and its age at
        ``t_ns`` [s]. The array is this input's own, reused.

        Raises
        ------
        ShapeError
            If a field does not have its number of components.
        KeyError
            If a field is missing.
        """
        p, q, v, w, a, wd = self.names
        b = sample.body
        row = self.row
        if sample is not self.row_sample:
            _fill(row, 0, b[p], 3, p)
            _fill(row, 3, b[q], 4, q)
            _fill(row, 7, b[v], 3, v)
            _fill(row, 10, b[w], 3, w)
            self.row_accel = False
            self.row_sample = sample
        dt = (t_ns - sample.t_ns) * 1e-9
        if dt > 0.0 and not self.row_accel:
            _fill(row, 13, b[a], 3, a)
            _fill(row, 16, b[wd], 3, wd)
            self.row_accel = True
        return row, dt


_F8 = np.dtype(np.float64)


def _fill(row: Array, i: int, x: Any, n: int, name: str) -> None:
    """``row[i:i + n]`` = the message field ``x`` (:func:`_floats`: the same numbers; a float array of its shape
    copied as it is, without the round trip through Python floats).

    Raises
    ------
    ShapeError
        If it does not have ``n`` components.
    """
    if type(x) is np.ndarray and x.dtype == _F8 and x.shape == (n,):
        row[i:i + n] = x
    else:
        row[i:i + n] = _floats(x, n, name)


def _floats(x: Any, n: int, name: str) -> list[float]:
    """A message field as ``n`` Python floats.

    Raises
    ------
    ShapeError
        If it does not have ``n`` components.
    """
    out = x.tolist() if isinstance(x, np.ndarray) else [float(v) for v in x]
    if len(out) != n or (out and isinstance(out[0], list)):
        raise ShapeError(f"{name}: expected {n} numbers, got {out!r}")
    return out


def _frame_sizes(cfg: HilConfig) -> tuple[int, int, bool]:
    """(raw command frame bytes, raw reply frame bytes, COBS framed) of ``[hil] format``
    (:meth:`hil.rigproto.RigProtocol.frame_sizes`)."""
    return protocol_class(cfg.table["format"]).frame_sizes(cfg)


def validate(config: dict[str, Any], name: str) -> list[str]:
    """Problems of ``[hil]`` and of its line budget at the service's rate; [] if fine."""
    try:
        cfg = parse(hil_table(config))
    except ConfigError as err:
        return list(err.problems)
    out = []
    t = cfg.table
    url = t["url"]
    if url != "emulator" and "://" in url and url.split("://", 1)[0] not in URL_SCHEMES:
        out.append(f"hil.url: unknown scheme {url.split('://', 1)[0]!r} in {url!r}; expected one of {URL_SCHEMES}")
    rate = config.get("services", {}).get(name, {}).get("rate_hz")
    if isinstance(rate, (int, float)) and rate > 0:
        cmd, reply, cobs = _frame_sizes(cfg)
        for what, size in (("command", cmd), ("telemetry", reply)):
            if not size:
                continue
            try:
                if cobs:
                    check_line_budget(float(rate), size, t["baud"], bits=bits_per_byte(), field=f"hil.baud ({what})")
                elif rate * size * bits_per_byte() > 0.7 * t["baud"]:
                    out.append(f"hil.baud ({what}): rate {rate:g} Hz × frame {size} B × 10 bits exceeds 70% of "
                               f"baud {t['baud']}")
            except ConfigError as err:
                out.append(str(err))
        out += _slow_input_problems(config, name, float(rate), float(t["watchdog"]))
        out += _loop_problems(config, cfg, float(rate))
    return out


def loop_delay(cfg: HilConfig, h_s: float, feedback_hold_s: float = 0.0) -> tuple[float, dict[str, float]]:
    """The delay around the HIL contact loop, from the configuration: ``(τ, its parts)``. [s]

    From a body's state to the wrench measured on its image and applied to it: the command's
    transport to the rig and the reading's back (``2 × [hil.emulator] delay``); the actuators
    (they interpolate the setpoints one bridge period late, and a critically damped servo of
    bandwidth f follows that ``2 / (2π f)`` late); the sensor's filter and sampling
    (:attr:`dynamics.mockup.ForceTorqueSensor.lag`); the bridge's filter; a pipelined link's period
    (``[hil] pipeline``); and the consumer's hold of the fed-back sample (``feedback_hold_s``, half
    the coupling period of ``hil/feedback``). The bridge's inputs are predicted to its steps.
    """
    em, comp = cfg.params.emulator, cfg.params.compensation
    bw = em.bandwidth
    sensor = ForceTorqueSensor.lag_of(em.ft_rate, em.ft_cutoff)
    fhz = comp.filter_hz
    parts = {"transport": 2.0 * em.delay,
             "actuators": h_s + (2.0 / (2.0 * math.pi * bw) if bw > 0 else 0.0),
             "sensor": sensor,
             "filter": 1.0 / (2.0 * math.pi * fhz) if fhz > 0 else 0.0,
             "pipeline": h_s if cfg.params.pipeline else 0.0,
             "hold": feedback_hold_s}
    return sum(parts.values()), parts


def _loop_problems(config: dict[str, Any], cfg: HilConfig, rate_hz: float) -> list[str]:
    """The rig contact loop (``[contact] source = "hil"``) whose delay exceeds its critical delay
    (:func:`protocol.stability.critical_delay` of the payload's mass and :func:`rig_contact_spring`)
    with neither prediction nor the passivity controller on: one line naming both figures."""
    if table_values(config, "contact")["source"] != "hil" or "payload" not in config:
        return []
    tau, tau_c, parts = loop_stability(config, cfg, rate_hz)
    comp = cfg.params.compensation
    if tau <= tau_c or comp.predict or comp.passivity:
        return []
    k, c, _ = rig_contact_spring(config)
    detail = ", ".join(f"{key} {v * 1e3:.3g}" for key, v in parts.items() if v)
    return [f"hil.emulator.delay: rig contact loop delay {tau * 1e3:.3g} ms ({detail} ms) > critical delay "
            f"{tau_c * 1e3:.3g} ms ({float(table_values(config, 'payload')['mass']):.5g} kg, k {k:.3g} N/m, "
            f"c {c:.3g} N·s/m): it grows; turn on hil.compensation.predict or passivity"]


def loop_stability(config: dict[str, Any], cfg: HilConfig, rate_hz: float) -> tuple[float, float, dict[str, float]]:
    """``(τ, τ_c, parts)``: the rig contact loop's delay (:func:`loop_delay`, with ``hil/feedback``'s
    coupling from ``[services]``) and its critical delay. [s]"""
    svc = next((s for s in (config.get("services", {}) or {}).values()
                if isinstance(s, dict) and s.get("kind") == "hil.bridge"), {})
    c_hz = svc.get("coupling_hz")
    c_hz = c_hz.get("hil/feedback", c_hz.get("*")) if isinstance(c_hz, dict) else c_hz
    H = 1.0 / float(c_hz) if isinstance(c_hz, (int, float)) and c_hz > 0 else 1.0 / rate_hz
    tau, parts = loop_delay(cfg, 1.0 / rate_hz, 0.5 * H)
    k, c, _ = rig_contact_spring(config)
    tau_c, _ = critical_delay(float(table_values(config, "payload")["mass"]), k, c)
    return tau, tau_c, parts


def _slow_input_problems(config: dict[str, Any], name: str, rate_hz: float, watchdog_s: float) -> list[str]:
    """The bridge's inputs (:data:`INPUTS`) coupled more slowly than its watchdog allows: one line each.

    The bridge predicts each body from its latest sample to its steps, but the safety chain
    (:class:`hil.safety.SafetySupervisor`) faults the rig (``Fault.HOST``) once the newest
    sample is older than the watchdog (``hil.watchdog``, 0: ``max(3 periods, 20 ms)``): a sample
    that holds over a longer coupling period trips it between two samples, at the start of the
    run. So the coupling period of ``orbiter/state`` and ``payload/state`` (the producer's
    ``coupling_hz`` for the topic or ``"*"``, else its own period) must not exceed the watchdog.
    """
    from protocol.config import service_module  # (here: the registry imports the other kinds' modules)

    watchdog = watchdog_s if watchdog_s > 0 else watchdog_timeout(1.0 / rate_hz)
    wanted = {p.topic for p in INPUTS}
    out = []
    for other, svc in (config.get("services", {}) or {}).items():
        if other == name or not isinstance(svc, dict):
            continue
        try:
            sp = service_module(str(svc.get("kind"))).ports(config, other)
        except Exception:  # noqa: BLE001 - that service's own validation reports its problems
            continue
        for port in sp.outputs:
            if port.topic not in wanted:
                continue
            c = svc.get("coupling_hz")
            hz = c.get(port.topic, c.get("*")) if isinstance(c, dict) else c
            hz = svc.get("rate_hz") if hz is None else hz
            if isinstance(hz, bool) or not isinstance(hz, (int, float)) or hz <= 0:
                continue
            if 1.0 / hz > watchdog * (1.0 + 1e-9):
                out.append(f"hil.watchdog: {port.topic} coupled at {hz:g} Hz ({1e3 / hz:g} ms, services.{other}) "
                           f"is older between two samples than the bridge's watchdog of {watchdog * 1e3:g} ms allows "
                           f"(the rig would fault, HOST, before the next sample): couple it at "
                           f"{1.0 / watchdog:g} Hz or faster, or raise hil.watchdog to {1e3 / hz:g} ms")
    return out


class HilBridge:
    """The ``hil`` service model (see the module docstring).

    Parameters
    ----------
    cfg : HilConfig
    name : str
    period_ns : int
    link : RigDevice or SerialLink or None
        The rig (None: outputs are computed, nothing is sent — a dry run): a
        :class:`hil.device.RigDevice` (:func:`build` opens one), or a :class:`hil.link.SerialLink`
        the bridge makes one on. The device owns the link, the backend of ``[hil] format``
        (:mod:`hil.rigproto`) and every wait on the wall clock; the bridge hands it the simulation
        time and the frames to send, and takes the rig's frames from it (:meth:`_read`). The
        format's :attr:`caps` decide what the bridge can do (no replies: no sensed feedback, no
        prediction).
    realtime : bool
        Realtime: frames are stamped with the link's (wall) clock and nothing waits.
        Lockstep (False): frames are stamped with the simulation time and each step
        waits for the rig's reply, resending its frame on a NAK or after ``resend_after``
        (bounded by ``bad_frames_max`` resends and ``reply_timeout``), so runs are deterministic.
        The safety watchdogs run on the simulation time in both modes (in realtime it
        follows the wall clock). A device given must have been made in the same mode.
    on_close : list of callables
        Run by :meth:`close` after the link is closed (e.g. stop the emulator).
    """

    def __init__(self, cfg: HilConfig, name: str, period_ns: int, link: RigDevice | SerialLink | None, *,
                 realtime: bool = False, on_close: list[Callable[[], object]] | None = None) -> None:
        if period_ns <= 0:
            raise ConfigError(f"services.{name}.rate_hz: period {period_ns} ns must be > 0")
        device = RigDevice(link, cfg, realtime=realtime) if isinstance(link, SerialLink) else link
        if device is not None and device.realtime != realtime:
            raise ConfigError(f"services.{name}: the rig device is {'realtime' if device.realtime else 'lockstep'}, "
                              f"the bridge {'realtime' if realtime else 'lockstep'}")
        self.cfg = cfg
        self.name = name
        self.period_ns = int(period_ns)
        self.h = period_ns * 1e-9
        self.inputs = INPUTS
        self.outputs = OUTPUTS
        self.device = device
        self.realtime = realtime
        p = cfg.params
        # the rig's wire format (hil.rigproto): what it carries decides what the bridge can do
        self.caps = protocol_class(p.format).capabilities
        self.neutral_axes = cfg.rig.inverse(cfg.pose_map.X_RP0)
        cfg.pose_map.load_kernels()  # the compiled workspace check and clamp, loaded now: no step pays for it
        self.safety = SafetySupervisor(cfg.limits, self.neutral_axes, self.h, cfg.fingerprint,
                                       bad_frames_max=p.bad_frames_max, watchdog_s=p.watchdog,
                                       clamp_fault_after=p.clamp_fault_after)
        self.safety.load_kernels()  # its compiled soft limits, loaded now: no step pays for it
        comp = p.compensation
        self.passivity = PassivityController(self.h, comp.restitution_max, comp.length, enabled=comp.passivity,
                                             lag=comp.lag)
        self.impacts = ImpactMonitor()
        self._predict = comp.predict
        ahz = comp.predict_accel_hz
        self._accel_gain = 1.0 - math.exp(-2.0 * math.pi * ahz * self.h) if ahz > 0 else 0.0
        self._accel_beyond = comp.predict_accel_beyond
        self._V_last: Array | None = None
        self._A_filtered = np.zeros(6)
        mk = p.mockup
        self._mockup = (mk.mass, np.asarray(mk.com, dtype=np.float64), np.asarray(mk.inertia, dtype=np.float64),
                        mk.gravity)
        self._gravity = comp.gravity and self._mockup[0] > 0.0
        self._tare_s = comp.tare
        self._tare: list[Array] | None = [] if self._tare_s > 0 else None  # readings while taring, then None
        self.bias = np.zeros(6)  # the tared bias [τ; f] at Po in P
        self._engaged_t: float | None = None
        fhz = comp.filter_hz
        self._filter_gain = 1.0 - math.exp(-2.0 * math.pi * fhz * self.h) if fhz > 0 else 1.0
        self._F_filtered: Array | None = None
        em = p.emulator
        sensor_lag = ForceTorqueSensor.lag_of(em.ft_rate, em.ft_cutoff)
        # what the prediction adds to the round trip: the actuators' lag (a servo of bandwidth f follows the
        # setpoints interpolated over a period, critically damped: a ramp h + 2 / (2π f) late), the sensor's and
        # the filter's
        bw = em.bandwidth
        self.lag_s = (sensor_lag + ((-self.h / math.log(1.0 - self._filter_gain)) if fhz > 0 else 0.0)
                      + (self.h + 2.0 / (2.0 * math.pi * bw) if bw > 0 else 0.0))
        self._deadband = comp.deadband
        self._release = comp.release
        self.gate = ContactGate(*ContactGate.thresholds(self._deadband, 0.0, self._release))
        self.noise_N = 0.0  # the filtered force noise measured while taring (hil.delay.noise_floor) [N]
        # gravity compensation off with a mock-up on the sensor: its load is still modelled, to tell it from contact
        self._load_check = not self._gravity and self._mockup[0] > 0.0
        self._load_tare: list[Array] = []  # the mock-up's modelled load while taring
        self._load_ref = np.zeros(6)  # what of it the tare took out
        self.load_left_N = 0.0  # the largest force of it left in the fed-back reading [N]
        self._load_as_contact_s = 0.0  # how long the contact gate has been on for that load alone
        self._commanded: dict[int, tuple[Array, Array, Array, Array]] = {}  # time_us -> (R_RP, a, w, ẇ) in R
        self._X_hist: list[tuple[float, Array]] = []  # the last three commanded rig poses (t, X_RP)
        self._F_echo = -1  # echo_time_us of the reading in _F_P
        self._clamped_t = -math.inf  # when the last clamped command was sent (or one the rate limits held back)
        self._catching_up = False  # after a clamp or the tare, until the rate limits no longer hold the rig back
        # the rig contact loop (build(): [contact] source = "hil"): its critical delay and its delays other than
        # the link's round trip; the measured round trip is compared with them once it is known
        self.critical_delay_s = math.inf
        self.loop_other_s = 0.0
        self.loop_delay_s = math.nan
        self._pipeline = p.pipeline and not realtime
        self._L, self._B = _frame_rows(cfg.X_OL), _frame_rows(cfg.X_TB)  # constants of every step, as floats
        # the relative motion compiled (dynamics.relative_motion_kernels: bit for bit _BodyInput.at and
        # _relative_motion, the references), loaded now: no step pays for it
        self._L_row = np.array([*self._L[0], *self._L[1]], dtype=np.float64)
        self._B_row = np.array([*self._B[0], *self._B[1]], dtype=np.float64)
        self._relative_kernel = kernel_module("relative_motion_kernels").relative_motion
        self._relative_kernel(np.zeros(19), 0.0, np.zeros(19), 0.0, self._L_row, self._B_row, np.empty((4, 4)),
                              np.empty(6))
        self._orbiter_in, self._payload_in = _BodyInput(_ORBITER), _BodyInput(_PAYLOAD)
        self._sim_t = 0.0
        self._axes = self.neutral_axes.copy()
        self._F_P = np.zeros(6)
        self._F_contact = np.zeros(6)
        self._rx_t: float | None = None
        self._clamped = 0
        self._sent_arm = False
        self._next_arm = -math.inf
        self._on_close = list(on_close or [])
        self.freeze_park_after = 2.0  # s a frozen run's rig holds before it parks (build: sim.freeze_park_after)
        self.schedule = Schedule()  # the outputs' coupling (set_coupling); every step until told
        self.emulator: Any = None  # the emulator process build() started (url = "emulator"), else None
        self.embedded_rig: EmbeddedRig | None = None  # calibration_model(): the rig's firmware run in this thread

    @property
    def link(self) -> SerialLink | None:
        """The device's link, for its statistics (round-trip delay, status); None in a dry run."""
        return self.device.link if self.device is not None else None

    @property
    def protocol(self) -> RigProtocol | None:
        """The device's backend of ``[hil] format``; None in a dry run."""
        return self.device.protocol if self.device is not None else None

    @property
    def resent(self) -> int:
        """Frames sent again (lockstep; :attr:`hil.device.RigDevice.resent`)."""
        return self.device.resent if self.device is not None else 0

    @property
    def reply_timeouts(self) -> int:
        """Waits of ``resend_after`` that ended without a reply (lockstep)."""
        return self.device.reply_timeouts if self.device is not None else 0

    @property
    def replies_missed(self) -> int:
        """Steps that went on without their reply (lockstep)."""
        return self.device.replies_missed if self.device is not None else 0

    # ------------------------------------------------------------------ helpers
    def _read(self, wait: bool) -> None:
        """Handle the rig's frames that have arrived; with ``wait``, until this step's reply.

        This step's reply is the telemetry frame that echoes the seq of the frame sent this
        step, or (the lockstep emulator, whose measurement lags by the simulated transport
        delay and so echoes an older frame) that carries this frame's time stamp in its
        header. Replies to earlier frames that arrive first are handled in order.

        The wait is the device's (:meth:`hil.device.RigDevice.receive`: resends on a NAK or
        after ``resend_after``, at most ``bad_frames_max`` times and for ``reply_timeout``, wall
        clock, in all; a step whose reply never comes goes on with the previous one,
        ``replies_missed``); the bridge handles what it returns, in order.
        """
        if self.device is None:
            return
        for batch in self.device.receive(self._sim_t, wait):
            self._handle(batch)

    def _handle(self, batch: Batch) -> None:
        """One read's frames (telemetry: the rig's axes, reading and state; HELLO: the handshake's answer) and
        the link's health (:meth:`hil.safety.SafetySupervisor.on_frames`), or a resend that failed (a fault)."""
        if batch.error is not None:
            self.safety.fault(Fault.HOST, f"the link failed: {batch.error}")
            return
        frames: list[Frame] = batch.frames
        for f in frames:
            if isinstance(f.msg, Telemetry):
                self._rx_t = self._sim_t
                self._axes = np.asarray(f.msg.axes, dtype=np.float64)
                self._F_P = np.asarray(f.msg.F_Po_P, dtype=np.float64)
                self._F_echo = int(f.msg.echo_time_us)
                self.safety.on_telemetry(f.msg)
            elif isinstance(f.msg, Hello):
                self._rx_t = self._sim_t
                self.safety.on_hello(f.msg, f.version)
        self.safety.on_frames(len(frames), batch.bad)

    def _command(self, device: RigDevice, setpoint: Array | None, X_RP: Array) -> None:
        """This step's frame: the handshake's (ARM, then ENGAGE) where the format has one, the setpoint,
        or, while motion-gated, a hold (a heartbeat). In lockstep its reply is awaited by :meth:`_read`."""
        s = self.safety
        t = self._sim_t
        if self.caps.has_handshake and s.state == RigState.IDLE and not s.faults and t >= self._next_arm:
            if not self._sent_arm:
                s.request_arm()
            self._sent_arm = True
            self._next_arm = t + 0.25  # ask again until the rig answers
            device.handshake(t, self.cfg.fingerprint, int(math.ceil(s.watchdog_s * 1e3)))
        elif self.caps.has_handshake and s.state == RigState.ARMED:  # auto-engage once armed
            s.engage()
            device.engage(t)
        elif setpoint is None:
            device.hold(t)
        else:
            device.setpoint(t, setpoint, X_RP)

    # ------------------------------------------------------------------ model
    def initial(self, t0_ns: int) -> dict[str, dict[str, Any]]:
        """Outputs at ``t0``: rest at neutral, motion-gated. An emulator the device was opened on is waited for
        here (:meth:`hil.device.RigDevice.wait_started`): it started while the run was being set up.

        Raises
        ------
        RigFault
            If the emulator does not serve within ``[hil] start_timeout`` or its process ends.
        """
        if self.device is not None:
            self.device.wait_started()
        self._sim_t = t0_ns * 1e-9
        return self._outputs(np.eye(4), np.zeros(6), np.zeros(6), False, t0_ns)

    def waits_on_device(self) -> bool:
        """Whether the next step would wait for the rig: pipelined in lockstep, the reply to the last frame is not
        there yet (:meth:`hil.device.RigDevice.reply_due`). The scheduler then steps the other models of the
        process first (:mod:`protocol.service`, "A step that waits on a device"). Reads no clock."""
        return self._pipeline and self.device is not None and self.device.reply_due()

    def step(self, t_ns: int, h_ns: int, u: Inputs) -> dict[str, dict[str, Any]]:
        """One bridge period (see the module docstring); outputs stamped ``t + h``."""
        self._sim_t = t_ns * 1e-9
        orb, pay = u.state("orbiter/state"), u.state("payload/state")
        try:  # both bodies predicted from their coupling instants to t (their ports: between = "predict")
            (o, dt_o), (b, dt_b) = self._orbiter_in.array_at(orb, t_ns), self._payload_in.array_at(pay, t_ns)
            X_LB, V_LB_L = np.empty((4, 4)), np.empty(6)
            status = self._relative_kernel(o, dt_o, b, dt_b, self._L_row, self._B_row, X_LB, V_LB_L)
            finite = status == 1
            if status < 0:  # a quaternion the prediction cannot integrate: the references raise the error
                X_LB, V_LB_L, finite = _relative_motion(self._orbiter_in.at(orb, t_ns),
                                                        self._payload_in.at(pay, t_ns), self._L, self._B)
        except (ShapeError, ValueError):  # a malformed input: the NaN guard below faults
            X_LB, V_LB_L, finite = np.full((4, 4), np.nan), np.full(6, np.nan), False
        if self.realtime or self._pipeline:  # lockstep, pipelined: the reply to the previous step's frame
            self._read(wait=not self.realtime)
        if math.isnan(self.loop_delay_s) and math.isfinite(self.critical_delay_s) and self.link is not None \
                and self.safety.state == RigState.ENGAGED and len(self.link.delay.samples_us) >= 15:
            self._check_loop()
        horizon = 0.0
        if self._predict and self.link is not None and self.caps.has_replies:  # (the round trip is measured)
            rtt = self.link.delay.rtt_s
            horizon = rtt + self.lag_s if math.isfinite(rtt) else 0.0
        V_pred = self._mean_twist(V_LB_L, horizon) if finite and self._accel_gain > 0.0 else V_LB_L
        X_cmd = predict_pose(X_LB, V_pred, horizon) if finite and horizon > 0.0 else X_LB  # (read-only below)
        cmd_axes: Array | None = None
        X_RP = self.cfg.pose_map.X_RP0
        clamped = False
        if self._tare is not None and finite:  # taring: the rig holds still at neutral, out of contact
            cmd_axes = self.neutral_axes
        elif finite:
            res = self.cfg.pose_map.to_rig(X_cmd, finite=X_cmd is X_LB)  # (X_LB: the kernel found it finite)
            clamped = res.clamped
            self._clamped += int(clamped)
            cmd_axes, X_RP = res.axes, res.X_RP
        else:
            cmd_axes = np.full(self.cfg.rig.n_axes, np.nan)
        now = self._sim_t
        cmd_t = min(orb.t_ns, pay.t_ns) * 1e-9  # a stale input (a lost producer) trips the watchdog
        rx_t = self._rx_t if self.caps.has_replies else now  # (no replies: nothing to time out on)
        if not self.caps.has_handshake and self.safety.state == RigState.IDLE:  # none exists: arm and engage
            self.safety.request_arm()
            self.safety.on_hello(Hello(self.cfg.fingerprint, self.cfg.rig.n_axes, 0))
            self.safety.engage()
        setpoint = self.safety.tick(now, cmd_axes, cmd_t, rx_t, clamped=clamped)
        if clamped or (self._tare is not None and self._tare_s > 0.0):
            self._catching_up = True  # the rig is held away from the simulated pose: it will have to catch up
        elif self._catching_up and setpoint is not None and finite:
            # catching up after a clamp or the tare's neutral, the rate limits hold the setpoints back: the rig is
            # not at the simulated pose (and the mock-up's load is compensated at the requested motion) until they
            # no longer do
            if max(abs(a - b) for a, b in zip(setpoint.tolist(), cmd_axes.tolist(), strict=True)) > _FOLLOW_TOL:
                self._clamped_t = self._sim_t
            else:
                self._catching_up = False
        if self._gravity or self._load_check:
            self._remember(X_RP)
        if self.device is not None:
            try:
                self._command(self.device, setpoint, X_RP)
            except (FrameError, RigFault) as err:
                self.safety.fault(Fault.HOST, f"the link failed: {err}")
            if not self._pipeline:
                self._read(wait=not self.realtime)
        # feedback: valid only from an engaged rig heard from within the watchdog, commanded to
        # the simulated pose (a clamped command does not match the simulation); else no force
        if clamped:
            self._clamped_t = self._sim_t
        # a rig that was clamped reaches the simulated pose only after its actuators' lag: its reading
        # meanwhile (the catching up's inertial transient) is no contact of the simulation's
        valid = (self.caps.has_wrench and self.safety.state == RigState.ENGAGED and self._rx_t is not None
                 and self._sim_t - self._rx_t <= self.safety.watchdog_s and not clamped
                 and self._sim_t - self._clamped_t > 3.0 * self.lag_s)
        if self.safety.state == RigState.ENGAGED and self._engaged_t is None:
            self._engaged_t = self._sim_t
        valid = self.sensed_contact() and valid
        F_B = self.cfg.pose_map.wrench_to_body(self._F_contact) if valid else np.zeros(6)
        R_BL = X_LB[:3, :3].T if finite else np.eye(3)
        V_B = np.concatenate([R_BL @ V_LB_L[:3], R_BL @ V_LB_L[3:]]) if finite else np.zeros(6)
        F_out = self.passivity.step(F_B, V_B)
        self.impacts.update(self._sim_t + self.h, F_B, V_B, checked=True)  # (the passivity step checked them)
        return self._outputs(X_cmd, V_LB_L if finite else np.zeros(6), F_out, valid, t_ns + h_ns,
                             finite=finite and X_cmd is X_LB)

    def _mean_twist(self, V: Array, horizon: float) -> Array:
        """The relative twist to hold over the prediction's horizon when the acceleration is extrapolated too
        (``[hil.compensation] predict_accel_hz`` > 0): ``V + A τ/2``, so that the pose is advanced by
        ``V τ + A τ²/2``. ``A``: the twist's difference over the last step, low-passed (first order) at
        ``predict_accel_hz`` — the body samples' accelerations change at their coupling instants and a
        contact's force is in them, fed back through the loop: unfiltered (the bodies' own accelerations),
        the ``τ²/2`` gain on a delayed acceleration makes the loop neutral-type, unstable once the contact's
        ``k τ² / 2`` exceeds the effective mass at it.

        With ``predict_accel_beyond`` = ``τ0`` > 0 the acceleration is extrapolated only over the horizon's
        part beyond ``τ0``: ``V + A (τ² − τ0²) / (2 τ)``, the pose advanced by ``V τ + A (τ² − τ0²)/2``, at
        the constant twist when ``τ ≤ τ0``. The prediction's error is then ``A τ0²/2`` at any longer
        horizon: the negative mass on a contact of stiffness ``k`` stays at ``k τ0²/2``, the loop's at the
        horizon ``τ0``, while shorter loops are predicted as at the constant twist."""
        if self._V_last is not None and horizon > 0.0:
            dA = (V - self._V_last) / self.h - self._A_filtered
            self._A_filtered = self._A_filtered + self._accel_gain * dA
        self._V_last = V
        if horizon <= self._accel_beyond:
            return V
        return V + self._A_filtered * (0.5 * (horizon * horizon - self._accel_beyond ** 2) / horizon)

    def _check_loop(self) -> None:
        """Once the round trip is measured: the loop's delay (that round trip and the loop's other delays)
        against its critical delay; beyond it with neither prediction nor passivity the rig faults (HOST),
        as ``check`` refuses such a configuration (:func:`loop_stability`)."""
        assert self.link is not None
        self.loop_delay_s = self.link.delay.rtt_s + self.loop_other_s
        comp = self.cfg.params.compensation
        if self.loop_delay_s > self.critical_delay_s and not (comp.predict or comp.passivity):
            self.safety.fault(Fault.HOST, f"the measured loop delay {self.loop_delay_s * 1e3:.3g} ms (round trip "
                                          f"{self.link.delay.rtt_s * 1e3:.3g} ms) exceeds the rig contact's critical "
                                          f"delay {self.critical_delay_s * 1e3:.3g} ms, uncompensated")

    def _remember(self, X_RP: Array) -> None:
        """Keep the commanded rig pose's rotation, acceleration and rates (in R, by finite differences over the
        last three steps) under this step's frame time, for the reading that will echo it."""
        hist = self._X_hist
        hist.append((self._sim_t, X_RP))
        del hist[:-3]
        h = self.h
        a = w = wd = np.zeros(3)
        if len(hist) == 3:
            (_, X0), (_, X1), (_, X2) = hist
            a = (X2[:3, 3] - 2.0 * X1[:3, 3] + X0[:3, 3]) / (h * h)
            w1 = X1[:3, :3] @ rotation_vector(X0[:3, :3].T @ X1[:3, :3]) / h  # in R
            w = X2[:3, :3] @ rotation_vector(X1[:3, :3].T @ X2[:3, :3]) / h
            wd = (w - w1) / h
        t_us = (int(round(self._sim_t * 1e6))) & 0xFFFFFFFF
        self._commanded[t_us] = (X_RP[:3, :3], a, w, wd)
        if len(self._commanded) > 4096:  # (the replies echo recent frames only)
            for key in list(self._commanded)[:2048]:
                del self._commanded[key]

    def sensed_contact(self) -> bool:
        """The contact wrench on the mock-up from the latest reading ``_F_P`` (into ``_F_contact``, [τ; f] at Po
        in P): less the mock-up's weight and inertial load (``[hil.compensation] gravity``, at the motion
        commanded in the frame the reading echoes; :func:`dynamics.mockup.mockup_load`), less the bias tared over the
        first ``tare`` seconds engaged, low-pass filtered (``filter_hz``), and zero unless the contact gate
        (:class:`hil.delay.ContactGate`: on above ``deadband`` or 5 times the filtered noise measured while
        taring, off below ``release`` of that) says contact. False while taring (the reading is no contact
        force yet).

        With ``gravity = false`` and a mock-up mass, its load is still modelled: the part the tare did not take
        out is reported (:attr:`load_left_N`), and a "contact" that is that load alone for 0.1 s faults the rig
        (HOST), naming it: the loop would push the payload with the mock-up's weight.
        """
        F = self._F_P
        load = None
        if self._gravity or self._load_check:
            cmd = self._commanded.get(self._F_echo)
            if cmd is None and self._X_hist:  # (realtime: the frame's stamp is the link's clock) the latest
                X = self._X_hist[-1][1]
                cmd = (X[:3, :3], np.zeros(3), np.zeros(3), np.zeros(3))
            if cmd is not None:
                m, c, inertia, g = self._mockup
                load = mockup_load(cmd[0], cmd[1], cmd[2], cmd[3], m, c, inertia, g)
                if self._gravity:
                    F = F - load
        if self._tare is not None:
            if self._engaged_t is None or self._rx_t is None:
                self._F_contact = np.zeros(6)
                return False
            if self._sim_t - self._engaged_t >= 0.5 * self._tare_s:  # (the first half: the rig settles)
                self._tare.append(F)
                if self._load_check and load is not None:
                    self._load_tare.append(load)
            if self._sim_t - self._engaged_t < self._tare_s:
                self._F_contact = np.zeros(6)
                return False
            self.bias = np.mean(self._tare, axis=0)
            self.noise_N = noise_floor([r.tolist() for r in self._tare], self._filter_gain)
            self.gate = ContactGate(*ContactGate.thresholds(self._deadband, self.noise_N, self._release))
            if self._load_tare:
                self._load_ref = np.mean(self._load_tare, axis=0)
            self._tare = None
        F = F - self.bias
        if self._filter_gain < 1.0:
            y = self._F_filtered
            F = F if y is None else y + self._filter_gain * (F - y)
            self._F_filtered = F
        fx, fy, fz = F[3:].tolist()
        if self.gate.on > 0.0 and not self.gate.update(math.sqrt(fx * fx + fy * fy + fz * fz)):
            F = np.zeros(6)
        if self._load_check and load is not None:
            self._check_load(F, load)
        self._F_contact = F
        return True

    def _check_load(self, F: Array, load: Array) -> None:
        """Gravity compensation off: the mock-up's load the tare left in the reading ``F`` (filtered, gated) is
        kept in :attr:`load_left_N`; a contact that is that load alone (within a quarter of its force) for
        0.1 s faults the rig."""
        u = (load - self._load_ref)[3:].tolist()
        f = F[3:].tolist()
        left = math.sqrt(u[0] * u[0] + u[1] * u[1] + u[2] * u[2])
        if self.safety.state == RigState.ENGAGED and self._sim_t - self._clamped_t > 3.0 * self.lag_s:
            self.load_left_N = max(self.load_left_N, left)
        f_n = math.sqrt(f[0] * f[0] + f[1] * f[1] + f[2] * f[2])
        d = math.sqrt(sum((a - b) * (a - b) for a, b in zip(f, u, strict=True)))
        if f_n > 0.0 and d < 0.25 * f_n:
            self._load_as_contact_s += self.h
        else:
            self._load_as_contact_s = 0.0
        if self._load_as_contact_s >= 0.1 and self.safety.state == RigState.ENGAGED:
            m, _, _, g = self._mockup
            self.safety.fault(Fault.HOST, f"the sensed force {f_n:.0f} N read as contact is the mock-up's own load "
                                          f"({left:.0f} N of its weight {m * g:.0f} N and inertial load left in the "
                                          f"reading: hil.compensation.gravity = false), not a contact")

    def set_coupling(self, periods: dict[str, int]) -> None:
        """The output ports' coupling periods [ns] (:mod:`protocol.coupling`): the three bodies are built only
        at their coupling instants (in between, ``hil/feedback``'s wrench alone, for its interval peak)."""
        self.schedule = Schedule(periods)

    def _outputs(self, X_cmd: Array, V: Array, F_B: Array, valid: bool, t_ns: int,
                 finite: bool = False) -> dict[str, dict[str, Any]]:
        """The three output bodies at ``t_ns`` (each at its coupling instants); ``finite``: ``X_cmd`` is known
        to be finite (not checked again)."""
        due = self.schedule.due
        if not (due("hil/command", t_ns) or due("hil/feedback", t_ns) or due("hil/status", t_ns)):
            return {"hil/feedback": {"F_Bo_B": F_B}}
        legs = np.zeros(6)
        n = min(6, self._axes.size)
        legs[:n] = self._axes[:n]
        lk = self.link
        one_way = lk.delay.one_way_s if lk is not None else math.nan
        link: dict[str, float | int | str] = {**lk.status()} if lk is not None else {}
        last = self.impacts.impacts[-1].restitution if self.impacts.impacts else -1.0
        link["resent"] = self.resent
        link["reply_timeouts"] = self.reply_timeouts
        link["replies_missed"] = self.replies_missed
        link["clamped"] = self._clamped
        link["limit_hits"] = self.safety.limit_hits
        link["impacts"] = len(self.impacts.impacts)
        link["restitution_last"] = float(last) if math.isfinite(last) else -1.0
        link["energy_dissipated"] = float(self.passivity.e_dissipated)
        link["energy_net"] = float(self.passivity.e_net)
        link["noise_N"] = float(self.noise_N)
        link["contact_on_N"] = float(self.gate.on)
        if self._load_check:
            link["mockup_load_left_N"] = float(self.load_left_N)
        s = self.safety
        link["fault_t"] = float(s.fault_t) if s.fault_t is not None else -1.0  # the first fault: when, and why
        link["fault_reason"] = s.fault_reason
        link["loop_delay_s"] = self.loop_delay_s if math.isfinite(self.loop_delay_s) else -1.0
        link["critical_delay_s"] = self.critical_delay_s if math.isfinite(self.critical_delay_s) else -1.0
        X = X_cmd if finite else np.where(np.isfinite(X_cmd), X_cmd, 0.0)
        return {
            "hil/command": {"X_LB": X, "V_LB_L": np.asarray(V, dtype=np.float64)},
            "hil/feedback": {"F_Bo_B": F_B, "legs": legs,
                             "delay_s": float(one_way) if math.isfinite(one_way) else -1.0, "valid": bool(valid)},
            "hil/status": {"state": self.safety.state.name, "faults": int(self.safety.faults), "link": link},
        }

    def hold(self, frozen_s: float) -> dict[str, Any] | None:
        """The run is frozen (:mod:`protocol.shell`): keep the rig's link alive, holding, and park it
        once it has been frozen for ``freeze_park_after`` seconds (``sim.freeze_park_after``).

        A heartbeat every call (the shell calls every 20 ms) keeps the rig's watchdog quiet
        while it holds its last setpoint; then a PARK ramps it to neutral within its limits.
        Returns the rig's state as the bridge knows it (``{"rig": "ENGAGED" | "PARKING" | ...}``):
        the shell hands a change of it to the launcher, which logs it on ``sim/control``
        (``held``), so a park during a freeze shows in the log.
        """
        if self.device is None or not self.caps.has_handshake:  # (no rig state to hold or report)
            return None
        try:
            if self.safety.state == RigState.ENGAGED and frozen_s >= self.freeze_park_after:
                self.device.park(self._sim_t, awaited=False)
                self.safety.park()
            elif self.safety.state in (RigState.ENGAGED, RigState.PARKING):
                self.device.hold(self._sim_t, awaited=False)
        except (FrameError, RigFault) as err:
            self.safety.fault(Fault.HOST, f"the link failed while frozen: {err}")
        if self.realtime:
            self._read(wait=False)
        return {"rig": self.safety.state.name}

    def close(self) -> None:
        """Ask an engaged rig to park, close the link and run the ``on_close`` hooks.

        Should the PARK not arrive, the rig's watchdog trips and it ramps to neutral anyway.
        """
        if self.device is not None:
            self.device.close(self._sim_t, park=self.caps.has_handshake and self.safety.state == RigState.ENGAGED)
        for hook in self._on_close:
            hook()
        self._on_close = []


def calibration_model(config: dict[str, Any], name: str, period_ns: int) -> HilBridge:
    """The bridge for a calibration run (:func:`protocol.realtime.calibrate`): the rig emulator's core
    in this process, in lockstep, instead of the serial link (no process, no port): the bridge's
    own work per step, with the frames encoded and decoded.

    The emulated firmware's work (the port's :attr:`hil.emulator.LockstepPort.cpu_ns`) is the rig's, not the
    bridge's: the bridge carries it as its ``embedded_rig`` (:class:`protocol.realtime.EmbeddedRig`), which the
    calibration subtracts from its steps and admits as the rig emulator's process where ``[hil] url`` is
    ``"emulator"`` (a real rig's firmware runs on the rig)."""
    from hil.emulator import LockstepPort, LockstepRig

    problems = validate(config, name)
    if problems:
        raise ConfigError("; ".join(problems), problems)
    cfg = parse(hil_table(config))
    port = LockstepPort(LockstepRig(cfg))
    bridge = HilBridge(cfg, name, period_ns, RigDevice(SerialLink(port), cfg))
    bridge.embedded_rig = EmbeddedRig(lambda: port.cpu_ns, on_host=cfg.params.url == "emulator")
    return bridge


def ports(config: dict[str, Any], name: str) -> ServicePorts:
    """The bridge's ports, before it is built (:mod:`protocol.config`)."""
    return ServicePorts("model", INPUTS, OUTPUTS)


def stiff_couplings(config: dict[str, Any], name: str) -> list[StiffCoupling]:
    """The rig's contact spring, closed through ``hil/feedback`` (:mod:`protocol.stability`).

    When the contact service applies the rig's sensed wrench to the payload (``[contact]
    source = "hil"``), the loop payload state -> bridge -> rig -> force/torque sensor ->
    ``hil/feedback`` -> payload closes a spring across two couplings. The rig holds its half
    of the docking interface where it was commanded (the spring's other end is held by the
    producer: ``m_producer = 0``, as the massless arm's); the payload, integrated by the
    contact service, is on the other side with its mass (``[payload] mass``). The spring is the
    contact's along its normal: ``[hil.emulator] stiffness`` and ``damping`` per contact point
    times the points in contact (three with ``probe_radius > 0``, else one), the values a real
    rig's docking hardware is declared with too. The tilt about the probes (``1.5 k r²`` on the
    payload's least moment of inertia) is far softer for any probe radius below a metre and is
    left out. The consumer holds the sampled wrench (a state port); the bridge predicts the
    payload's state with its velocity. Not included: the link's own delay (in lockstep one
    link period, 4 ms at 250 Hz), which adds to the coupling's lag.
    """
    if table_values(config, "contact")["source"] != "hil" or "payload" not in config:
        return []
    k, c, _ = rig_contact_spring(config)
    m_T = float(table_values(config, "payload")["mass"])
    return [StiffCoupling("rig contact spring along its normal (HIL)", "hil/feedback", "payload/state",
                          k, c, 0.0, m_T, predict=1, mean=False)]


def rig_contact_spring(config: dict[str, Any]) -> tuple[float, float, str]:
    """The rig contact's spring and damper along its normal, ``(k, c, what)``. [N/m, N·s/m]

    The plane (``[hil.emulator] contact = "plane"``): ``stiffness`` and ``damping`` per probe point
    times the points (three with ``probe_radius > 0``, else one). The guides' mock-ups: the law's ``k``
    on the two walls of a V-guide that hold a trunnion together, their normals at 45° to the
    approach (``2 k cos² 45° = k``) — and ``c`` the Hunt–Crossley damper ``3/2 α k δ`` at one
    millimetre of penetration (it vanishes at the first touch: the stiffest case for a delay is
    the lightly damped one).
    """
    table = hil_table(config)
    em = {**DEFAULTS["emulator"], **(table.get("emulator", {}) or {})}
    if em["contact"] == "guides":
        g = {**DEFAULTS["guides"], **(table.get("guides", {}) or {})}
        k = float(g["k"])
        return k, 1.5 * float(g["alpha"]) * k * 1e-3, "guides' walls (two at 45° per trunnion), δ = 1 mm"
    n = 3 if float(em["probe_radius"]) > 0 else 1
    return n * float(em["stiffness"]), n * float(em["damping"]), f"plane, {n} probe point(s)"


def build(config: dict[str, Any], name: str, period_ns: int) -> HilBridge:
    """The bridge of service ``name``: parses ``[hil]``, opens the link (or the emulator).

    Raises
    ------
    ConfigError
        If the configuration is invalid.
    RigFault
        If the port cannot be opened.
    """
    problems = validate(config, name)
    if problems:
        raise ConfigError("; ".join(problems), problems)
    cfg = parse(hil_table(config))
    sim = sim_values(config)
    realtime = sim["mode"] == "realtime"
    url = cfg.params.url
    emu = None
    if url == "emulator":
        from hil.emulator import spawn_emulator

        table = hil_table(config)  # the frames and the guides' mock-ups filled in from the other tables
        em = dict(table.get("emulator", {}))
        if realtime and not em.get("rt_priority") and int(sim["rt_priority"] or 0) > 0:
            em["rt_priority"] = RIG_PRIORITY  # a rig's firmware is real-time: above the services (protocol.realtime)
        table["emulator"] = em
        # a format without time stamps gives a lockstep rig no clock: it runs on its own, as a real one (nothing
        # it measures comes back over such a format, so the run's outputs stay deterministic)
        lockstep = not realtime and protocol_class(cfg.params.format).capabilities.has_time
        emu = spawn_emulator(table, lockstep=lockstep, stats_path=cfg.params.emulator.stats or None)
        url = emu.host_path
    # realtime: the link reads in a thread, frames time-stamped on arrival (the delay estimate is not quantised by
    # the step), at the rig's priority when the services run at theirs
    priority = RIG_PRIORITY if realtime and int(sim["rt_priority"] or 0) > 0 else 0
    try:
        device = RigDevice.open(url, cfg, realtime=realtime, reader_priority=priority, emulator=emu)
    except (RigFault, ConfigError):
        if emu is not None:
            emu.close()
        raise
    bridge = HilBridge(cfg, name, period_ns, device, realtime=realtime,
                       on_close=[emu.close] if emu is not None else [])
    bridge.emulator = emu
    if table_values(config, "contact")["source"] == "hil" and "payload" in config:
        _, bridge.critical_delay_s, parts = loop_stability(config, cfg, 1e9 / period_ns)
        bridge.loop_other_s = sum(v for k, v in parts.items() if k not in ("transport", "pipeline"))
    bridge.freeze_park_after = float(sim["freeze_park_after"])
    return bridge
