"""The orbiter service: a 6-DOF rigid body in LVLH, free drift or attitude hold.

Integrates the orbiter (``dynamics.rigid_body``; Clohessy–Wiltshire and gravity gradient
from ``dynamics.orbit`` when ``orbit_altitude > 0``; with 0 W is inertial and there is no
external force, as the momentum checks need). Applies the wrench the arm puts on the
orbiter (``arm/wrench``: ``F_So_W`` at ``p_WoSo_W``) and the contact reaction
(``contact/wrench``: ``F_Lo_W`` at ``p_WoLo_W``), both flows.

Exact impulse across processes
------------------------------
Every flow sample is referred to W's origin (``shift_wrench``) and the samples are
averaged over the step with their overlaps (the runtime's rule, ``Inputs.flow``), so the
step's linear impulse and its angular impulse about Wo are exactly those of the samples.
The averaged wrench about Wo is then referred to the *mean* CoM position over the step,
``c̄ = c₀ + v₀ h/2 + a₀ h²/6`` (exact for the constant force held over the step with the
orbital terms off), so that the angular momentum about Wo changes by exactly the
exchanged angular impulse (``dL/dt = c × f + τ_c``). The producer of a flow (arm,
contact) applies the same samples to the other body, so total momentum is conserved to
round-off whatever the rates.

Attitude hold (``attitude = "hold"``): per body axis i, the phase-plane variable
``s_i = θ_i + (kd_i / kp_i) w_i`` (θ the rotation vector of the attitude error relative
to ``quat_ref``, w the rate relative to LVLH, both in O); inside ``|s_i| ≤ dead_band``
the jets are off, outside ``τ_i = clip(−kp_i s_i, ±torque_max_i)`` (a PD law limited to
what the reaction-control jets can give). Jet on/off transitions are reported on
``orbiter/event`` (``rcs_on`` / ``rcs_off`` with the axis and torque).

Config::

    [orbiter]
    mass = 1.0e5                         # kg (assumed, reference README)
    inertia = [1.2e6, 8.0e6, 8.5e6]      # kg·m² principal (diag) or 3×3 rows, about the CoM, in O
    X_WO = [0, 0, 0, 0, 0, 0]            # initial pose [x, y, z, θx, θy, θz] (m, rotation vector rad)
    v_WOo_W = [0, 0, 0]                  # initial CoM velocity, m/s
    w_WO_O = [0, 0, 0]                   # initial body rates relative to W, rad/s
    X_OL = [0, 0, 0, 0, 0, 0]            # latch frame L in O (read by contact and hil)
    orbit_altitude = 0.0                 # m; 0 = no orbital terms (W inertial)
    gravity_gradient = true
    attitude = "free_drift"              # free_drift | hold
    kp = [1.2e4, 8.0e4, 8.5e4]           # N·m/rad  (hold; I ω_n² with ω_n = 0.1 rad/s)
    kd = [1.2e5, 8.0e5, 8.5e5]           # N·m·s/rad (2 ζ ω_n I with ζ = 0.5)
    torque_max = [1.0e4, 2.0e4, 2.0e4]   # N·m per axis, RCS torque limits
    dead_band = 0.0087                   # rad (0.5°)
    quat_ref = [1, 0, 0, 0]              # held attitude relative to LVLH; default: the initial one
    substeps = 1                         # RK4 sub-steps per step
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dynamics import rigid_body as rb
from dynamics.cases import ORBITER_INERTIA, ORBITER_MASS
from dynamics.contact import rotation_error
from dynamics.orbit import CircularOrbit
from dynamics.spatial import mat_t_vec_rows, mat_vec_rows, quat_to_rotation
from errors import BerthsimError, ConfigError
from protocol.config import check_table
from protocol.messages import EVENTS, TopicSchema, f8
from protocol.params import from_values, param
from protocol.service import Inputs, Port, ServicePorts

__all__ = ["PARAMS", "TABLES", "TABLE_KEYS", "TOPICS", "ORBITER_KEYS", "OrbiterContext", "OrbiterModel",
           "OrbiterParams", "build", "ports", "validate"]

Array = NDArray[np.float64]

TABLES = ("orbiter",)

TOPICS: Mapping[str, TopicSchema] = {
    # Orbiter CoM Oo in LVLH W; body rates in O.
    "orbiter/state": TopicSchema("berthsim.OrbiterState", 1, "state", {
        "p_WoOo_W": f8(3),  # m
        "quat_WO": f8(4),  # wxyz
        "w_WO_O": f8(3),  # rad/s
        "v_WOo_W": f8(3),  # m/s
        "a_WOo_W": f8(3),  # m/s²
        "wdot_WO_O": f8(3),  # rad/s²
    }),
    # Orbiter reaction-control jet firings (rcs_on / rcs_off with axis and torque).
    "orbiter/event": TopicSchema("berthsim.OrbiterEvent", 1, "event", {"events": EVENTS}),
}
"""The topics the orbiter produces (:mod:`protocol.registry` registers them)."""

_Num = (int, float)
_VEC3 = ("vec", 3)
_VEC6 = ("vec", 6)

ORBITER_KEYS: dict[str, tuple[Any, Any]] = {  # key: (kind, default) (protocol.config.check_value)
    "mass": (_Num, ORBITER_MASS),
    "inertia": ("inertia", ORBITER_INERTIA.tolist()),
    "X_WO": (_VEC6, [0.0] * 6),
    "v_WOo_W": (_VEC3, [0.0] * 3),
    "w_WO_O": (_VEC3, [0.0] * 3),
    "X_OL": (_VEC6, [0.0] * 6),
    "orbit_altitude": ("nonnegative", 0.0),
    "gravity_gradient": (bool, True),
    "attitude": (("free_drift", "hold"), "free_drift"),
    "kp": (("vec", 3, "positive"), [1.2e4, 8.0e4, 8.5e4]),
    "kd": (("vec", 3, "nonnegative"), [1.2e5, 8.0e5, 8.5e5]),
    "torque_max": (("vec", 3, "positive"), [1.0e4, 2.0e4, 2.0e4]),
    "dead_band": ("nonnegative", 0.0087),
    "quat_ref": (("vec", 4), None),
    "substeps": (("int", 1, math.inf), 1),
}
TABLE_KEYS = {"orbiter": ORBITER_KEYS}


@dataclass(frozen=True)
class OrbiterParams:
    """``[orbiter]``, parsed once (:data:`ORBITER_KEYS`; the module docstring says what each key does). Each
    field's unit is in its metadata (:func:`protocol.params.units`); vectors are tuples of floats."""

    mass: float = param("kg")
    inertia: tuple[tuple[float, ...], ...] = param("kg·m²")    # (3, 3) about the CoM, in O
    X_WO: tuple[float, ...] = param("m, rad")                  # (6,) position of Oo in W, then roll-pitch-yaw
    v_WOo_W: tuple[float, ...] = param("m/s")                  # (3,)
    w_WO_O: tuple[float, ...] = param("rad/s")                 # (3,)
    X_OL: tuple[float, ...] = param("m, rad")                  # (6,) the latch frame L in O
    orbit_altitude: float = param("m")                         # 0: no orbit (free space)
    gravity_gradient: bool = param("-")
    attitude: str = param("-")                                 # "free_drift" | "hold"
    kp: tuple[float, ...] = param("N·m/rad")                   # (3,) per body axis
    kd: tuple[float, ...] = param("N·m·s/rad")                 # (3,)
    torque_max: tuple[float, ...] = param("N·m")               # (3,)
    dead_band: float = param("rad")
    quat_ref: tuple[float, ...] | None = param("1")            # (4,) scalar first, or None: the initial attitude
    substeps: int = param("-")

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> OrbiterParams:
        """``[orbiter]`` of ``config`` with its defaults (a bad value reads as its default: :func:`validate`
        lists it)."""
        t = dict(check_table(config, "orbiter", ORBITER_KEYS, []))
        I_O = np.asarray(t["inertia"], dtype=np.float64)
        t["inertia"] = (np.diag(I_O) if I_O.shape == (3,) else I_O).tolist()
        return from_values(cls, t)


PARAMS = OrbiterParams
"""The kind's declared parameters (:mod:`protocol.registry`)."""


def _orbiter_values(config: Mapping[str, Any], problems: list[str]) -> dict[str, Any]:
    t = check_table(config, "orbiter", ORBITER_KEYS, problems)
    if not problems:
        try:
            rb.body_model("orbiter", t["mass"], t["inertia"])
        except BerthsimError as err:
            problems.append(f"orbiter: {err}")
        if t["quat_ref"] is not None and np.linalg.norm(t["quat_ref"]) < 1e-9:
            problems.append(f"orbiter.quat_ref: zero quaternion {t['quat_ref']!r}")
    return t


def validate(config: dict[str, Any], name: str) -> list[str]:
    """Problems of ``[orbiter]``, one line each naming key and value; [] if fine."""
    problems: list[str] = []
    _orbiter_values(config, problems)
    return problems


@dataclass(slots=True)
class OrbiterContext:
    """Everything the orbiter changes as it runs (its context, :mod:`protocol.service`); the rest of
    :class:`OrbiterModel` is parameters.

    Attributes
    ----------
    body : dynamics.rigid_body.RigidBodyState
        The orbiter O in W (LVLH).
    tau_rcs_O : ndarray, shape (3,)
        The jets' torque held over the next step, in O. [N·m]
    firing : list of bool
        Per body axis, whether its jets fire (for ``rcs_on`` / ``rcs_off`` events).
    rcs_on_time : ndarray, shape (3,)
        Seconds of jet firing per axis so far. [s]
    F_last : list of float
        The wrench about the CoM applied over the last step, in W, ``[τ; f]`` (six floats). [N·m, N]
    """

    body: rb.RigidBodyState
    tau_rcs_O: Array
    firing: list[bool]
    rcs_on_time: Array
    F_last: list[float]


class OrbiterModel:
    """The orbiter's :class:`protocol.service.ServiceModel` (see the module docstring).

    Its state is a context (:class:`OrbiterContext`, :meth:`new_context`) the runtime holds and passes to
    :meth:`initial` and :meth:`step`; the model's attributes are its parameters.

    Parameters
    ----------
    config : dict
        The run configuration (``[orbiter]`` read).
    name : str
        Service name.
    period_ns : int
        Step. [ns]

    Raises
    ------
    ConfigError
        If ``[orbiter]`` is invalid.
    """

    inputs = (Port("arm/wrench", "flow"), Port("contact/wrench", "flow"))
    outputs = (Port("orbiter/state", "state"), Port("orbiter/event", "event"))

    def __init__(self, config: Mapping[str, Any], name: str, period_ns: int) -> None:
        problems: list[str] = []
        _orbiter_values(config, problems)
        if problems:
            raise ConfigError("; ".join(problems), problems)
        self.params = p = OrbiterParams.from_config(config)
        self.name = name
        self.period_ns = int(period_ns)
        self.model = rb.body_model("orbiter", p.mass, p.inertia)
        rb.load_kernels()  # the compiled step loaded at build: no step pays for it
        self.orbit = (CircularOrbit.from_altitude(p.orbit_altitude, gravity_gradient=p.gravity_gradient)
                      if p.orbit_altitude > 0 else None)
        self.hold = p.attitude == "hold"
        self.dead_band = p.dead_band
        self._kp, self._kd, self._tmax = list(p.kp), list(p.kd), list(p.torque_max)
        q_ref = self.initial_body().quat_WB if p.quat_ref is None else np.asarray(p.quat_ref, dtype=np.float64)
        self.R_ref = quat_to_rotation(q_ref / np.linalg.norm(q_ref))
        self.substeps = p.substeps

    def initial_body(self) -> rb.RigidBodyState:
        """The body's state at the start, from ``[orbiter]`` (``X_WO``, ``v_WOo_W``, ``w_WO_O``)."""
        p = self.params
        return rb.state_from_pose(p.X_WO, p.v_WOo_W, p.w_WO_O)

    def new_context(self) -> OrbiterContext:
        """A fresh context: the body at its configured start, no jet firing."""
        return OrbiterContext(self.initial_body(), np.zeros(3), [False, False, False], np.zeros(3), [0.0] * 6)

    # ------------------------------------------------------------ attitude control
    def rcs_torque(self, state: rb.RigidBodyState) -> Array:
        """Jet torque (3,) in O for the hold law of the module docstring; zero in free drift. [N·m]"""
        if not self.hold:
            return np.zeros(3)
        R = state.R_rows
        theta_O = mat_t_vec_rows(R, *rotation_error(self.R_ref, np.reshape(R, (3, 3))).tolist())  # in O
        tau = []
        for th, w, kp, kd, tmax in zip(theta_O, state.w_WB_B.tolist(), self._kp, self._kd, self._tmax, strict=True):
            si = th + (kd / kp) * w  # phase-plane variable of the axis
            tau.append(0.0 if abs(si) <= self.dead_band else min(max(-kp * si, -tmax), tmax))
        return np.array(tau)

    def _rcs_events(self, c: OrbiterContext, t_ns: int, tau: Array) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        if not self.hold:
            return events
        on = [bool(x != 0.0) for x in tau.tolist()]
        for i in range(3):
            if on[i] != c.firing[i]:
                events.append({"kind": "rcs_on" if on[i] else "rcs_off", "t": t_ns * 1e-9, "axis": "xyz"[i],
                               "torque": float(tau[i])})
        c.firing = on
        return events

    # ------------------------------------------------------------ ServiceModel
    def _state_body(self, c: OrbiterContext) -> dict[str, Any]:
        s = c.body
        a, wdot = rb.accelerations_rows(self.model, s, c.F_last, self.orbit)
        return {"p_WoOo_W": s.p_WoBo_W, "quat_WO": s.quat_WB, "w_WO_O": s.w_WB_B, "v_WOo_W": s.v_WBo_W,
                "a_WOo_W": np.array(a), "wdot_WO_O": np.array(wdot)}

    def initial(self, t0_ns: int, c: OrbiterContext) -> dict[str, dict[str, Any]]:
        """Outputs at t0: the initial state (acceleration from the RCS torque alone)."""
        c.tau_rcs_O = self.rcs_torque(c.body)
        c.F_last = [*(c.body.R_WB @ c.tau_rcs_O).tolist(), 0.0, 0.0, 0.0]
        return {"orbiter/state": self._state_body(c),
                "orbiter/event": {"events": self._rcs_events(c, t0_ns, c.tau_rcs_O)}}

    def external_wrench_Wo(self, u: Inputs, h_ns: int) -> list[float]:
        """Arm base wrench plus contact reaction over the step, about Wo, in W (exact impulse), six floats."""
        a = rb.mean_wrench_Wo(u.flow("arm/wrench"), "F_So_W", "p_WoSo_W", h_ns)
        c = rb.mean_wrench_Wo(u.flow("contact/wrench"), "F_Lo_W", "p_WoLo_W", h_ns)
        return [x + y for x, y in zip(a, c, strict=True)]

    def step(self, t_ns: int, h_ns: int, c: OrbiterContext, u: Inputs) -> dict[str, dict[str, Any]]:
        """Advance ``c`` t → t + h with the flows' exact impulse and the RCS torque held over the step."""
        h = h_ns * 1e-9
        s = c.body
        F_Wo = self.external_wrench_Wo(u, h_ns)
        F_c = rb.wrench_about_mean_com(F_Wo, s, self.model.mass, h, rb.cw_floats(self.orbit, s))
        if self.hold:
            t0, t1, t2 = mat_vec_rows(s.R_rows, *c.tau_rcs_O.tolist())   # the jets' torque, in W
            F_c = [F_c[0] + t0, F_c[1] + t1, F_c[2] + t2, *F_c[3:]]
            c.rcs_on_time += h * (c.tau_rcs_O != 0.0)
        c.body = rb.step(self.model, s, F_c, h, self.orbit, self.substeps)
        c.F_last = F_c
        c.tau_rcs_O = self.rcs_torque(c.body)
        events = self._rcs_events(c, t_ns + h_ns, c.tau_rcs_O)
        return {"orbiter/state": self._state_body(c), "orbiter/event": {"events": events}}


def build(config: dict[str, Any], name: str, period_ns: int) -> OrbiterModel:
    """The orbiter model of service ``name``."""
    return OrbiterModel(config, name, period_ns)


def ports(config: dict[str, Any], name: str) -> ServicePorts:
    """The orbiter's ports, before it is built (:mod:`protocol.config`)."""
    return ServicePorts("model", OrbiterModel.inputs, OrbiterModel.outputs)
