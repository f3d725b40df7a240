"""The arm service: the Shuttle RMS as the SVDS massless arm (seed 003), or a multibody arm.

Ports
-----
Inputs: ``orbiter/state`` (state), ``payload/state`` (state), ``operator/command``
(event, vocabulary in :mod:`services.operator`), ``contact/event`` (event: ``capture`` and
``rigidize`` grapple the payload — the end-effector pose in the payload frame, X_TE, is
frozen at that instant — and ``release`` frees it).
Outputs: ``arm/state`` (state: q, qd, tau, mode, brakes, X_OE, X_WE, V_WE_W, grappled,
loads, sigma_min, qd_cmd, warnings) and ``arm/wrench`` (flow: ``F_Eo_W`` on the payload at
Eo and ``F_So_W`` on the orbiter at the shoulder So).

Routines and rates (SVDS section 5)
-----------------------------------
RMSFM every step: joint rates from the relative motion of orbiter and payload while
grappled (2-10…2-12), servo torques, end-effector wrench ``J^-T τ`` (2-3) on the payload
and its opposite, shifted to So, on the orbiter (2-4…2-9). A free massless arm follows its
servos and exerts nothing. RMSFLX every ``flex_every`` steps, before the servos: the arm
flexibility γ (B-6/B-7), γ_J (3-4) and the per-servo springs ``1/γ_i^e`` (3-7) (a free arm,
which does not use them, computes them from the tick's configuration when first needed). RMLOAD
every ``loads_every`` steps: the nine station loads (section 4).

The published wrench is computed from the state at the step end and holds over the
next step (flow convention of :mod:`protocol.service`).

Modes
-----
``manual`` (manual augmented: point-of-resolution rates in the orbiter or end-effector
frame, resolved through J^-1, damped least squares near a singularity), ``auto``
(waypoints of the point of resolution with per-leg rate limits, flown as the SRMS auto
sequence: each segment a straight line of the point of resolution with its attitude
slewed about a fixed axis, timed by :func:`dynamics.rms.auto_profile` — raised-cosine rate
ramps under ``auto_accel`` (``auto_accel_loaded`` while grappled, low enough that the
ramps last several periods of the loaded first mode); the profile rate is fed forward and
a small correction ``auto_gain`` (well below the loaded mode) acts on the error of the
*motor-side* pose, so that the arm's elastic motion is not fed back; a waypoint is
reached when its profile has ended and the motor-side pose is within ``auto_tol``), ``single`` (one joint),
``direct`` (direct drive, the SRMS's backup mode: one joint's motor at a fixed fraction of its
current limit, bypassing its rate loop; at its angle limit the mode falls back to ``hold``;
the other joints hold),
``brakes`` (servos off, brakes on), ``hold`` (servos hold). Point-of-resolution rates are
clipped to ``v_max``/``w_max`` (``v_max_loaded``/``w_max_loaded`` while grappled), joint
rates scaled into their limits and stopped at the angle limits; each clip is reported in
``warnings`` (``"clipped: ..."``), each refused command as ``"refused: ..."``, a damped
singular solve as ``"singular: ..."``, a joint driven beyond its range by the payload's
motion as ``"limit: ..."``. Warnings stay on ``arm/state`` for ``warn_hold`` s.

Post-capture control (``capture_control``)
-----------------------------------------
What the arm does when it grapples the payload (the first ``capture`` or ``rigidize`` event):
``"brakes"`` (the default) sets the brakes if they are not on (the default scenario's script sets
them before the snare closes, so that the snare is a plastic lock: there it changes nothing); the
payload's residual motion relative to the orbiter then rides on the braked arm's compliance and
decays only by its structural damping. ``"damp"`` brings that motion to rest with the servos
(seed 002's "control scheme to eliminate the undesirable motion in the fully plastic case"; the
paper gives no law, this one is ours): mode ``"damp"``, brakes off, and the joints' commanded
rates

    θ̇_c = θ̇ + λ K⁻¹ (τ_d − τ),   τ_d = −Jᵀ D V_R,   D = M_E / T

make the torque the 3-7 springs transmit (``τ``, ``K = diag(1/γ_i^e)``) follow, with bandwidth
λ (``damp_bandwidth``), the torque of a damper on the relative twist ``V_R`` of E (2-10, 2-11):
``M_E`` is the payload's spatial inertia about Eo (``[payload] mass, inertia`` and the frozen
grasp), ``T`` (``damp_time``) the time constant it gives the relative motion. On one degree of
freedom (payload m on a spring k to a rate-driven motor) the loop is ``s² + λ s + λ/T = 0``: stable
for any positive λ, T, with the orbiter's share of the motion making the effective mass only
smaller. The commanded rates go through the same rate, angle and (servo) torque limits as every
mode's. Once the relative rates have stayed below ``damp_rest`` ([m/s at Eo, rad/s]) for
``damp_time``, the brakes go on (mode ``"brakes"``). Any operator command that sets a mode
(``mode``, ``auto``, ``joint``, ``direct``, ``brakes``) ends the damping.

Flexibility options: ``"active"`` (3-7 per-servo springs from beams and joints),
``"passive"`` (as active, but with every brake on and grappled the joint torques are
the passive 3-6 torques ``−γ_J^-1 (θ − θ_n)``, the brakes slipping beyond their slip
torque), ``"joints"`` (gearbox springs only, no beam flexibility).

``model = "multibody"``: the links have mass (dynamics core, seed 004) on the moving
orbiter. Free: servo → joint spring (assumed gearbox stiffness) → link, the link
accelerations from :func:`dynamics.rms.prescribed_base_dynamics` with the orbiter's
motion as input, and the reaction at the shoulder published as ``F_So_W``. Grappled:
the joint motion follows the two bodies (2-10…2-12) and
:func:`dynamics.rms.grappled_inverse_dynamics` gives both wrenches; with the link masses
scaled to zero (``link_mass_scale``) it reproduces the massless arm.

``booms = "flexible"`` (with ``model = "multibody"``): the upper and lower booms are Euler–Bernoulli
beams (:func:`dynamics.cases.srms_booms`: graphite-epoxy tubes, section **ASSUMED**, ``boom_modes``
clamped–free modes per bending plane, ``boom_damping``), the rest of each link rigid
(:func:`dynamics.cases.with_flexible_booms`); the loaded first mode at the capture pose, servos
holding, is 0.043 Hz (published band 0.027–0.047 Hz; the massless arm's joint springs give 0.048).
The joints' angles and the booms' elastic coordinates are this service's state, free or grappled:
:mod:`dynamics.multirate` with the orbiter's motion as the base's and, grappled, the payload's grasp
point as the hand's (a constraint with Baumgarte's correction, :data:`HAND_BAUMGARTE`; the
constraint wrench is ``F_Eo_W``, the base's reaction ``F_So_W``). The mass matrix, bias, hand
Jacobian and ``J̇v`` are evaluated every ``dynamics_every`` steps and held in between (MBDYN's
multi-rate partition, seed 004), the gear springs and dampers and the beams' stiffness and damping
integrated by Newmark's average acceleration at every step (the booms' modes, 5–60 Hz with the hand
held, do not bound the step); the motors (servo model) drive the joints through the gear springs.
At the grasp the links take the payload's motion at E (least kinetic metric). Published ``X_OE``,
``V_WE_W`` and ``p_WoEo_W`` include the booms' deflection at E to first order (``J_η η``).
Cost at 500 Hz: ``bench/bench_arm.py`` (``--process`` for the arm's whole process).

Structure
---------
:class:`ArmParams` is ``[arm]`` parsed once (frozen, units in its fields' metadata). :class:`ArmModel`, the
service, steps a plant (:class:`ArmPlant`: :class:`MasslessPlant`, :class:`MultibodyPlant` or
:class:`FlexiblePlant`) under a controller (:class:`ArmController`: :class:`ModeController`, with its
:class:`AutoSequence` and :class:`CaptureDamper`), both on :class:`ArmKinematics` (RMSFM's kinematics, RMSFLX's
terms, the warnings), over one :class:`ArmContext`. They hold parameters only, the model too: every state is in
the context, which the runtime asks the model for (:meth:`ArmModel.new_context`), holds, and passes to
``initial(t0, ctx)`` and ``step(t, h, ctx, u)`` (:mod:`protocol.service`, "State in a context"). They stay here rather
than in :mod:`dynamics`: they read the bus's state bodies, keep the service's context and put warnings on
``arm/state``; the physics they call is :mod:`dynamics`'. The step's float arithmetic runs in compiled kernels
(:mod:`dynamics.arm_kernels`, bit for bit their Python-float references: the servos, the kinematics and Jacobian,
the rate limits, the auto sequence's step, the inputs' prediction), which :func:`build` loads.

Config ``[arm]`` (all optional; values not published are in ``[arm.assumed]`` and are
**ASSUMED**)::

    model = "massless"              # "massless" | "multibody"
    q0 = [0.0, 0.5, -1.0, 0.5, 0.0, 0.0]   # initial joint angles [rad], SVDS order
    p_OoSo_O = [10.7, -2.74, -1.70] # shoulder (SRMS base frame origin) in O [m]
    rpy_OS = [0.0, 0.0, 0.0]        # its attitude, URDF roll-pitch-yaw [rad]
    por = [0.6604, 0.0, 0.0]        # point of resolution in the last link frame [m]
    v_max = 0.6                     # point-of-resolution rate limits, unloaded [m/s]
    w_max = 0.0785                  # [rad/s]
    v_max_loaded = 0.06             # while grappled [m/s]
    w_max_loaded = 0.0087           # [rad/s]
    flexibility = "active"          # "active" | "passive" | "joints"
    flex_every = 10                 # RMSFLX every N steps
    loads_every = 50                # RMLOAD every N steps
    sigma_min = 0.05                # DLS threshold on the smallest singular value of J
    damping_max = 0.05              # DLS damping at the singularity
    auto_accel = [0.2, 0.05]        # auto sequence: acceleration limits, unloaded [m/s², rad/s²]
    auto_accel_loaded = [0.001, 0.0001]   # while grappled [m/s², rad/s²]
    auto_gain = 0.05                # auto sequence: correction rate per unit motor-side error [1/s]
    auto_tol = [0.01, 0.0087]       # waypoint reached within [m, rad]
    limit_margin = 0.0017           # stop a joint this close to its angle limit [rad]
    limit_gain = 2.0                # rate toward a limit ≤ limit_gain × distance [1/s]
    warn_hold = 1.0                 # s a warning stays on arm/state
    servo_substeps = 2              # servo integration substeps per step
    link_mass_scale = 1.0           # multibody: scale of the link masses and inertias
    capture_control = "brakes"      # at capture: "brakes" | "damp" (see Post-capture control)
    damp_time = 2.0                 # damp: time constant of the relative motion [s]
    damp_bandwidth = 1.0            # damp: spring-torque tracking bandwidth λ [rad/s]
    damp_rest = [1e-4, 1.745e-5]    # damp: at rest below [m/s, rad/s] for damp_time: brakes on
    booms = "rigid"                 # "rigid" | "flexible" (beams with modes; needs model = "multibody")
    boom_modes = 2                  # flexible booms: clamped-free modes per bending plane (1..4)
    dynamics_every = 20             # flexible booms: mass matrix, bias, hand Jacobian held over N steps
    [arm.assumed]                   # ASSUMED values (not in public sources)
    gear_ratio = [1842, 1842, 1260, 739, 739, 739]
    motor_inertia = [1e-4, ...]     # kg·m², motor side
    torque_constant = [0.1, ...]    # N·m/A, motor side
    bandwidth = 60.0                # rate loop [rad/s]
    coulomb_fraction = 0.02         # friction / torque limit
    viscous_fraction = 0.05
    slip_fraction = 1.2             # brake slip torque / torque limit
    joint_stiffness = [3e5, 3e5, 2e5, 1e5, 1e5, 1e5]   # gearbox [N·m/rad]
    joint_damping_ratio = 0.3       # multibody: gear-train damper, fraction of critical (motor side)
    joint_damping_beta = 0.2        # massless: 3-7 springs' damping c = β k [s] (~2 % at 0.035 Hz)
    beam_EI = [2e7, 1.2e7, 1.2e7, 5e6, 5e6]            # SVDS's five beams [N·m²]
    beam_GJ = [2e7, 1e7, 1e7, 5e6, 5e6]
    boom_damping = 0.005            # flexible booms: modal structural damping ratio
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from operator import le
from typing import Any, Protocol

import numpy as np

from dynamics import chain as ch
from dynamics import flexibility as fx
from dynamics import loads as ld
from dynamics import multirate as mr
from dynamics import rigid_body as rb
from dynamics import rms
from dynamics import servo as sv
from dynamics import spatial as sp
from dynamics.cases import (
    SRMS_BASE_TO_ORBITER_COM,
    reference_path,
    srms_booms,
    srms_on_orbiter,
    with_flexible_booms,
)
from dynamics.urdf import chain_from_urdf
from errors import ConfigError, SingularityError
from protocol.config import check_table, table_values
from protocol.coupling import Schedule
from protocol.messages import BOOL, LIST_STR, STR, TopicSchema, f8
from protocol.params import from_values, param
from protocol.service import Port, ServicePorts
from protocol.stability import StiffCoupling
from services.commands import ARM_COMMANDS, CONTACT_COMMANDS, JOINT_NAMES, check_command

TABLES = ("arm", "payload", "orbiter")
"""Its own ``[arm]``; it reads ``[payload]`` and ``[orbiter]`` (with their owners' keys and defaults,
:func:`protocol.config.table_values`)."""

TOPICS: Mapping[str, TopicSchema] = {
    "arm/state": TopicSchema("berthsim.ArmState", 3, "state", {
        "q": f8(6),  # rad
        "qd": f8(6),  # rad/s
        "tau": f8(6),  # N·m
        "mode": STR,
        "brakes": BOOL,
        "X_OE": f8(4, 4),
        "X_WE": f8(4, 4),  # end effector (point of resolution) in W
        "V_WE_W": f8(6),  # [ω; v] of E in W
        "grappled": BOOL,
        "loads": f8(9, 6),  # SVDS section 4 stations, rows [M; V] in the station frames
        "sigma_min": f8(),  # smallest singular value of the RMS Jacobian
        "qd_cmd": f8(6),  # commanded joint rates, rad/s
        "warnings": LIST_STR,  # "clipped: ...", "refused: ...", "singular: ..."
        "tau_peak": f8(6),  # largest |tau| per joint over the coupling interval, N·m (derived)
    }, derived={"tau_peak": ("tau", "abs_max")}),
    # Wrench the arm applies to the payload at Eo and, at the shoulder So, to the orbiter.
    "arm/wrench": TopicSchema("berthsim.ArmWrench", 2, "flow", {
        "F_Eo_W": f8(6),  # [τ; f] N·m, N
        "p_WoEo_W": f8(3),
        "F_So_W": f8(6),
        "p_WoSo_W": f8(3),
        "grappled": BOOL,
        "F_peak": f8(2),  # [max |τ|, max |f|] of F_Eo_W over the coupling interval (derived)
    }, wrenches=(("F_Eo_W", "p_WoEo_W"), ("F_So_W", "p_WoSo_W")), derived={"F_peak": ("F_Eo_W", "wrench_max")}),
}
"""The topics the arm produces (:mod:`protocol.registry` registers them)."""

DEFAULTS: dict[str, Any] = {
    "model": "massless",
    "q0": [0.0, 0.5, -1.0, 0.5, 0.0, 0.0],
    "p_OoSo_O": (-SRMS_BASE_TO_ORBITER_COM).tolist(),
    "rpy_OS": [0.0, 0.0, 0.0],
    "por": rms.EE_TIP_B6.tolist(),
    "v_max": 0.6,
    "w_max": 0.0785,
    "v_max_loaded": 0.06,
    "w_max_loaded": 0.0087,
    "flexibility": "active",
    "flex_every": 10,
    "loads_every": 50,
    "sigma_min": 0.05,
    "damping_max": 0.05,
    "auto_accel": [0.2, 0.05],
    "auto_accel_loaded": [0.001, 0.0001],
    "auto_gain": 0.05,
    "auto_tol": [0.01, 0.0087],
    "limit_margin": 0.0017,
    "limit_gain": 2.0,
    "warn_hold": 1.0,
    "servo_substeps": 2,
    "link_mass_scale": 1.0,
    "capture_control": "brakes",
    "damp_time": 2.0,
    "damp_bandwidth": 1.0,
    "damp_rest": [1.0e-4, 1.7453292519943295e-5],
    "booms": "rigid",
    "boom_modes": 2,
    "dynamics_every": 20,
}
ASSUMED: dict[str, Any] = {
    "gear_ratio": sv.ASSUMED_GEAR_RATIO.tolist(),
    "motor_inertia": sv.ASSUMED_MOTOR_INERTIA.tolist(),
    "torque_constant": sv.ASSUMED_TORQUE_CONSTANT.tolist(),
    "bandwidth": 60.0,
    "coulomb_fraction": 0.02,
    "viscous_fraction": 0.05,
    "slip_fraction": 1.2,
    "joint_stiffness": fx.ASSUMED_JOINT_STIFFNESS.tolist(),
    "joint_damping_ratio": 0.3,
    "joint_damping_beta": 0.2,
    "beam_EI": [b.EI for b in fx.ASSUMED_BEAMS],
    "beam_GJ": [b.GJ for b in fx.ASSUMED_BEAMS],
    "boom_damping": 0.005,
}
_POS, _NONNEG, _COUNT = "positive", "nonnegative", ("int", 1, math.inf)
ASSUMED_KEYS: dict[str, tuple[Any, Any]] = {k: (kind, ASSUMED[k]) for k, kind in {
    "gear_ratio": ("vec", 6, _POS), "motor_inertia": ("vec", 6, _POS), "torque_constant": ("vec", 6, _POS),
    "bandwidth": _POS, "coulomb_fraction": _NONNEG, "viscous_fraction": _NONNEG, "slip_fraction": _POS,
    "joint_stiffness": ("vec", 6, _POS), "joint_damping_ratio": _POS, "joint_damping_beta": _POS,
    "beam_EI": ("vec", 5, _POS), "beam_GJ": ("vec", 5, _POS), "boom_damping": _NONNEG,
}.items()}
"""``[arm.assumed]``: key -> (kind, default) (:func:`protocol.config.check_value`)."""
ARM_KEYS: dict[str, tuple[Any, Any]] = {k: (kind, DEFAULTS[k]) for k, kind in {
    "model": ("massless", "multibody"), "q0": ("vec", 6), "p_OoSo_O": ("vec", 3), "rpy_OS": ("vec", 3),
    "por": ("vec", 3), "v_max": _POS, "w_max": _POS, "v_max_loaded": _POS, "w_max_loaded": _POS,
    "flexibility": ("active", "passive", "joints"), "flex_every": _COUNT, "loads_every": _COUNT, "sigma_min": _POS,
    "damping_max": _NONNEG, "auto_accel": ("vec", 2, _POS), "auto_accel_loaded": ("vec", 2, _POS), "auto_gain": _POS,
    "auto_tol": ("vec", 2, _POS), "limit_margin": _NONNEG, "limit_gain": _POS, "warn_hold": _POS,
    "servo_substeps": _COUNT, "link_mass_scale": _POS, "capture_control": ("brakes", "damp"), "damp_time": _POS,
    "damp_bandwidth": _POS, "damp_rest": ("vec", 2, _POS), "booms": ("rigid", "flexible"),
    "boom_modes": ("int", 1, 4),  # per bending plane
    "dynamics_every": _COUNT,
}.items()} | {"assumed": (ASSUMED_KEYS, None)}
"""``[arm]``: key -> (kind, default), ``assumed`` the sub-table ``[arm.assumed]``."""
TABLE_KEYS = {"arm": ARM_KEYS}

STATE, WRENCH = "arm/state", "arm/wrench"
HAND_BAUMGARTE = 20.0
"""Baumgarte's gains α = β of the hand constraint with flexible booms [1/s]: the hand's pose error on the payload
decays critically damped in ~0.2 s (seed 004 eq. 26)."""


INPUTS = (Port("orbiter/state", "state", "predict"), Port("payload/state", "state", "predict"),
          Port("operator/command", "event"), Port("contact/event", "event"))
OUTPUTS = (Port(STATE, "state"), Port(WRENCH, "flow"))
N_JOINTS = rms.N_JOINTS
_AT_REST = np.array([0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0])
"""A body at rest at the origin, ``[p, quat, v, w]`` (:attr:`ArmContext.orb_x`); never written."""
_BRAKES = (np.zeros(N_JOINTS, dtype=bool), np.ones(N_JOINTS, dtype=bool))
"""The servos' brake flags (6,) with the brakes off and on (:func:`dynamics.servo.servo_step_arrays`), indexed by
``context.brakes``; never written (not read-only: the compiled kernel is loaded for writable arrays)."""


def _held(smp: Any, t_ns: int, p: str, q: str, w: str, v: str, a: str, wd: str) -> tuple[dict[str, Any],
                                                                                          tuple[Any, ...], np.ndarray]:
    """A rigid-body state sample predicted from its coupling instant to t with its accelerations
    (:func:`dynamics.rigid_body.predict_rows`, by its compiled kernel :func:`dynamics.rms.predict_state_arrays`): its
    body with the state fields replaced, ``(p, quat, w, v)`` as floats, and the same as one array
    ``[p, quat, v, w]`` (13,) (the compiled kernels' layout)."""
    b = dict(smp.body)
    dt = (t_ns - smp.t_ns) * 1e-9
    if dt > 0.0:
        x = rms.predict_state_arrays(b[p], b[q], b[v], b[w], b[a], b[wd], dt)   # compiled, bit for bit predict_rows
        if x is not None:
            b[p], b[q], b[v], b[w] = x[0:3], x[3:7], x[7:10], x[10:13]
            f = x.tolist()
            return b, (f[0:3], tuple(f[3:7]), f[10:13], f[7:10]), x
    pf, wf, vf = rb.as_floats(b[p]), rb.as_floats(b[w]), rb.as_floats(b[v])
    qf: Any = rb.as_floats(b[q])
    if dt > 0.0:                                    # the reference: it raises what the kernel refused
        pf, qf, vf, wf = rb.predict_rows(pf, qf, vf, wf, rb.as_floats(b[a]), rb.as_floats(b[wd]), dt)
        b[p], b[q], b[v], b[w] = np.array(pf), np.array(qf), np.array(vf), np.array(wf)
    return b, (pf, qf, wf, vf), np.array([*pf, *qf, *vf, *wf])


def _fixed_chain() -> ch.ChainModel:
    return chain_from_urdf(reference_path("SRMS_Canadarm.urdf"), floating_base=False)


def validate(config: dict[str, Any], name: str) -> list[str]:
    """Problems of the ``[arm]`` table (every one listed); a joint outside its range at start included."""
    problems: list[str] = []
    s = check_table(config, "arm", ARM_KEYS, problems)  # a bad value is listed and replaced by its default
    table = config.get("arm", {}) if isinstance(config.get("arm", {}), dict) else {}
    if s["booms"] == "flexible":
        if s["model"] != "multibody":
            problems.append(f"arm.booms: 'flexible' (booms with mass and modes) needs model = 'multibody', got model "
                            f"{table.get('model', DEFAULTS['model'])!r}")
        if s["link_mass_scale"] != 1.0:
            problems.append("arm.link_mass_scale: must be 1.0 with flexible booms (the tubes' mass is the "
                            f"links'), got {table['link_mass_scale']!r}")
    model = _fixed_chain()
    for i, (q, lo, hi) in enumerate(zip(s["q0"], model.q_lower, model.q_upper, strict=True)):
        if not lo <= q <= hi:
            problems.append(f"arm.q0[{i}]: {JOINT_NAMES[i]} = {q} rad is outside its range [{lo}, {hi}] rad")
    return problems


def payload_mass_properties(config: dict[str, Any]) -> tuple[float, np.ndarray]:
    """The payload's mass [kg] and inertia about its CoM in T, shape (3, 3) [kg·m²], from ``[payload]``
    (the contact service owns and checks that table; its defaults when a key is missing:
    :func:`protocol.config.table_values`)."""
    pay = table_values(config, "payload")  # the owner's keys and defaults
    I_T = np.asarray(pay["inertia"], dtype=float)
    return float(pay["mass"]), (np.diag(I_T) if I_T.shape == (3,) else I_T)


@dataclass(frozen=True)
class ArmAssumed:
    """``[arm.assumed]``, parsed once (:data:`ASSUMED_KEYS`): values not in public sources, **ASSUMED**.
    Each field's unit is in its metadata (``fields(ArmAssumed)[i].metadata["unit"]``)."""

    gear_ratio: tuple[float, ...] = param("1")              # (6,)
    motor_inertia: tuple[float, ...] = param("kg·m²")        # (6,), motor side
    torque_constant: tuple[float, ...] = param("N·m/A")      # (6,), motor side
    bandwidth: float = param("rad/s")                        # rate loop
    coulomb_fraction: float = param("1")                     # friction / torque limit
    viscous_fraction: float = param("1")
    slip_fraction: float = param("1")                        # brake slip torque / torque limit
    joint_stiffness: tuple[float, ...] = param("N·m/rad")    # (6,), gearbox
    joint_damping_ratio: float = param("1")                  # multibody gear-train damper, of critical
    joint_damping_beta: float = param("s")                   # massless 3-7 springs' damping c = β k
    beam_EI: tuple[float, ...] = param("N·m²")               # (5,), SVDS's five beams
    beam_GJ: tuple[float, ...] = param("N·m²")               # (5,)
    boom_damping: float = param("1")                         # flexible booms: modal damping ratio


@dataclass(frozen=True)
class ArmParams:
    """``[arm]``, parsed once (:data:`ARM_KEYS`, defaults :data:`DEFAULTS`; the module docstring says what each
    key does). Each field's unit is in its metadata (``"1"`` a pure number, ``"-"`` a choice or a count);
    vectors are tuples of floats, counts ints."""

    model: str = param("-")                                  # "massless" | "multibody"
    q0: tuple[float, ...] = param("rad")                     # (6,), SVDS order
    p_OoSo_O: tuple[float, ...] = param("m")                 # (3,), shoulder in O
    rpy_OS: tuple[float, ...] = param("rad")                 # (3,), URDF roll-pitch-yaw
    por: tuple[float, ...] = param("m")                      # (3,), point of resolution in the last link frame
    v_max: float = param("m/s")
    w_max: float = param("rad/s")
    v_max_loaded: float = param("m/s")
    w_max_loaded: float = param("rad/s")
    flexibility: str = param("-")                            # "active" | "passive" | "joints"
    flex_every: int = param("-")                             # steps
    loads_every: int = param("-")                            # steps
    sigma_min: float = param("1")                            # of J (mixed units, as SVDS)
    damping_max: float = param("1")
    auto_accel: tuple[float, ...] = param("m/s², rad/s²")
    auto_accel_loaded: tuple[float, ...] = param("m/s², rad/s²")
    auto_gain: float = param("1/s")
    auto_tol: tuple[float, ...] = param("m, rad")
    limit_margin: float = param("rad")
    limit_gain: float = param("1/s")
    warn_hold: float = param("s")
    servo_substeps: int = param("-")
    link_mass_scale: float = param("1")
    capture_control: str = param("-")                        # "brakes" | "damp"
    damp_time: float = param("s")
    damp_bandwidth: float = param("rad/s")
    damp_rest: tuple[float, ...] = param("m/s, rad/s")
    booms: str = param("-")                                  # "rigid" | "flexible"
    boom_modes: int = param("-")                             # per bending plane
    dynamics_every: int = param("-")                         # steps
    assumed: ArmAssumed = param("-")                         # [arm.assumed]

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> ArmParams:
        """``[arm]`` of ``config`` with its defaults (a bad value reads as its default: :func:`validate` lists it)."""
        return from_values(cls, check_table(config, "arm", ARM_KEYS, []))


PARAMS = ArmParams
"""The kind's declared parameters (:mod:`protocol.registry`)."""


@dataclass(slots=True)
class ArmContext:
    """Everything the arm changes as it runs (its context, :mod:`protocol.service`); the rest of :class:`ArmModel`
    is parameters. Arrays are never written in place (but ``theta_n``'s slipping joints): a field is replaced.

    Attributes
    ----------
    theta, theta_dot : ndarray, shape (6,)
        Joint angles [rad] and rates [rad/s], SVDS order.
    servo : dynamics.servo.ServoState
        The six servos (motor side).
    mode : str
        ``manual``, ``auto``, ``single``, ``direct``, ``damp``, ``brakes`` or ``hold``.
    frame : str
        Manual mode's frame of the commanded rates: ``orbiter`` or ``end_effector``.
    brakes, grappled : bool
    rate_cmd_frame : ndarray, shape (6,)
        Manual mode's commanded point-of-resolution rates ``[ω; v]`` in ``frame``. [rad/s, m/s]
    single, direct : tuple of (int, float)
        Single-joint mode's joint and rate [rad/s]; direct drive's joint and fraction of its current limit.
    waypoints : list of dict
        The auto sequence's waypoints still to reach.
    seg : dict or None
        The auto segment being flown: its start ``t0`` [s], ``rows`` (its start, displacement, start attitude and
        slew as :func:`dynamics.rms.auto_rates` takes them) and its profile ``prof``.
    rest_since : int or None
        Post-capture damping: since when the relative motion has been at rest. [ns]
    geom : dynamics.rms.RmsGeometry
        The geometry with the point of resolution in force (the ``por`` command moves it).
    p_ToEo_T : ndarray, shape (3,)
        E in the payload, frozen at the grasp. [m]
    R_TE : ndarray, shape (3, 3)
        E's attitude in T, frozen at the grasp.
    theta_n : ndarray, shape (6,)
        Neutral joint angles of the passive flexibility (where the brakes locked, slipping). [rad]
    qd_cmd, tau : ndarray, shape (6,)
        The last step's commanded joint rates [rad/s] and joint torques [N·m].
    F_Eo_O, F_Eo_W, F_So_W : ndarray, shape (6,)
        The wrench on the payload at Eo in O and in W, and on the orbiter at So in W, ``[τ; f]``. [N·m, N]
    V_R_O : ndarray, shape (6,)
        E's twist relative to the orbiter, in O, ``[ω; v]``. [rad/s, m/s]
    loads : ndarray, shape (9, 6)
        The station loads of the last RMLOAD.
    mb_wrench : tuple of ndarray or None
        Multibody arm: ``(F_Eo_W, F_So_W)`` of the last step; None before the first.
    rows, pose : tuple, dynamics.rms.RmsPose or None
        The kinematics at θ, ``(R_OB (7, 9), p (7, 3), u_O (6, 3))`` (:func:`dynamics.rms.rms_kinematics_arrays`:
        link rotations row-major, joint points then E, joint axes, in O), and as an RmsPose once asked for.
    J, J_inv : ndarray, shape (6, 6)
        The Jacobian at θ and its inverse (damped near a singularity).
    sigma, damped, J_svd : float, bool, ndarray or None
        The smallest singular value of J at its last SVD, whether J_inv is damped, J at that SVD.
    flex_at, flex_pending : tuple, bool
        The configuration of the last RMSFLX tick ``(rows, J, J_inv or None)``, and whether its terms are still
        to be computed.
    k_servo, c_servo, gamma_J : ndarray or None
        The 3-7 springs [N·m/rad] and dampers [N·m·s/rad], γ_J (6, 6); None before the first RMSFLX terms.
    orb, orb_f, pay_f : dict, tuple, tuple
        The orbiter's state body predicted to the last step; the orbiter's and the payload's
        ``(p, quat, w, v)`` as floats then.
    orb_x, pay_x : ndarray, shape (13,)
        The same states as arrays ``[p, quat, v, w]`` (the compiled kernels' layout:
        :func:`dynamics.rms.grappled_twist_arrays`, :func:`dynamics.rms.massless_wrench_arrays`).
    now, step_count : int
        The instant of the step [ns] (warnings expire from it) and the steps taken.
    warnings : dict of str to int
        Warnings on ``arm/state`` and until when. [ns]
    eta, eta_dot, held, vdot_a, hand_was, held_at, hand_err, J_eta, hand_p
        Flexible booms (unused otherwise, no elastic coordinates): the elastic coordinates and rates; the held matrices
        (:class:`dynamics.multirate.HeldArm`) and the step count they were evaluated at; the arm coordinates'
        accelerations of the last step; whether the last hold had the hand on the payload; the hand's pose error
        on the payload (6,) in W; E's twist per elastic rate (6, ne) in W; the hand point on the last body. [m]
    """

    theta: np.ndarray
    theta_dot: np.ndarray
    servo: sv.ServoState
    mode: str
    frame: str
    brakes: bool
    grappled: bool
    rate_cmd_frame: np.ndarray
    single: tuple[int, float]
    direct: tuple[int, float]
    waypoints: list[dict[str, Any]]
    geom: rms.RmsGeometry
    p_ToEo_T: np.ndarray
    R_TE: np.ndarray
    theta_n: np.ndarray
    qd_cmd: np.ndarray
    tau: np.ndarray
    F_Eo_O: np.ndarray
    F_Eo_W: np.ndarray
    F_So_W: np.ndarray
    V_R_O: np.ndarray
    loads: np.ndarray
    orb: dict[str, Any]
    orb_f: tuple[Any, ...]
    pay_f: tuple[Any, ...]
    orb_x: np.ndarray
    pay_x: np.ndarray
    seg: dict[str, Any] | None = None
    rest_since: int | None = None
    mb_wrench: tuple[np.ndarray, np.ndarray] | None = None
    rows: Any = None
    pose: rms.RmsPose | None = None
    J: Any = None
    J_inv: Any = None
    sigma: float = 0.0
    damped: bool = False
    J_svd: np.ndarray | None = None
    flex_at: Any = None
    flex_pending: bool = False
    k_servo: np.ndarray | None = None
    c_servo: np.ndarray | None = None
    gamma_J: np.ndarray | None = None
    now: int = 0
    step_count: int = 0
    warnings: dict[str, int] = field(default_factory=dict)
    eta: np.ndarray = field(default_factory=lambda: np.zeros(0))
    eta_dot: np.ndarray = field(default_factory=lambda: np.zeros(0))
    held: mr.HeldArm | None = None
    vdot_a: np.ndarray = field(default_factory=lambda: np.zeros(N_JOINTS))
    hand_was: bool = False
    held_at: int = -1
    hand_err: np.ndarray = field(default_factory=lambda: np.zeros(6))
    J_eta: np.ndarray = field(default_factory=lambda: np.zeros((6, 0)))
    hand_p: np.ndarray = field(default_factory=lambda: np.zeros(3))


Deflection = tuple[tuple[float, float, float], tuple[float, float, float]]
"""The booms' rotation (rotation vector) [rad] and displacement [m] of E, in O, to first order."""

DirectDrive = Callable[[ArmContext], "list[float | None] | None"]
"""The controller's direct drive: the driven joint's motor current [A] (the others on their rate loops), or None;
asked for by the plant as its servos step (the controller may fall back to ``hold`` then, at an angle limit)."""


class ArmKinematics:
    """The SVDS arm at the context's θ: kinematics, Jacobian and its (damped) inverse (RMSFM's), RMSFLX's 3-4/3-7
    terms, and the warnings on ``arm/state``; shared by the plants and the controller. Parameters only: every
    result is written to the :class:`ArmContext` it is given."""

    def __init__(self, params: ArmParams, joint_stiffness: np.ndarray, beams: tuple[fx.Beam, ...],
                 beta: float) -> None:
        self.p = params
        self.joint_stiffness = joint_stiffness
        self.beams = beams
        self.beta = beta
        # the beams as the compiled RMSFLX takes them (none: the joints' flexibility alone)
        self._beam_rows = (np.zeros((0, 4)) if params.flexibility == "joints"
                           else np.array([[b.root, b.tip, b.EI, b.GJ] for b in beams], dtype=float).reshape(-1, 4))
        self.fused = True
        """Whether RMSFLX's terms at a regular configuration are one compiled call
        (:func:`dynamics.rms.flex_terms_arrays`); False: :func:`dynamics.flexibility.arm_flexibility` and numpy, its
        reference (the tests compare them)."""

    def warn(self, c: ArmContext, text: str) -> None:
        """Put a warning on arm/state for ``warn_hold`` seconds."""
        c.warnings[text] = c.now + round(self.p.warn_hold * 1e9)

    def update(self, c: ArmContext, theta: np.ndarray | None = None) -> None:
        """Kinematics, the Jacobian and its (damped) inverse at θ (``theta`` (6,), default ``context.theta``):
        once per step.

        The kinematics, the Jacobian and its inverse by LU by the compiled kernel
        (:func:`dynamics.rms.rms_kinematics_arrays`), kept as its arrays (``pose`` is built from them when asked
        for). The SVD is skipped while the last one proves J far from singular: by Weyl's inequality
        ``σ_6(J) ≥ σ_6(J_svd) − ‖J − J_svd‖_F``, and while that bound stays above ``sigma_min``
        the exact inverse is the solution :func:`dynamics.rms.dls_solve` would give. ``sigma``
        (on arm/state) is that of the last SVD, refreshed at least every ``flex_every`` steps.
        """
        regular = c.J_svd is not None and not c.damped      # J⁻¹ by LU, if Weyl's bound below allows it
        R_OB, p, u, c.J, J_inv = rms.rms_kinematics_arrays(c.geom, c.theta if theta is None else theta, regular)
        c.rows = (R_OB, p, u)
        c.pose = None
        self.invert(c, regular, J_inv)

    def invert(self, c: ArmContext, regular: bool, J_inv: np.ndarray | None) -> None:
        """The rest of :meth:`update` once ``c.J`` is the new Jacobian: its inverse ``J_inv`` by LU (None: not made)
        if Weyl's bound lets it stand (``regular``: the last SVD's J at hand, its inverse undamped), else the SVD's."""
        if regular:
            assert c.J_svd is not None
            dJ = (c.J - c.J_svd).ravel()
            if c.sigma - math.sqrt(dJ @ dJ) > self.p.sigma_min:
                if J_inv is None:                          # the kernel could not: the reference says why
                    J_inv = rms.regular_inverse(c.J)
                if J_inv is not None:
                    c.J_inv = J_inv
                    return
        c.J_inv, c.sigma, c.damped = rms.jacobian_inverse_arrays(c.J, self.p.sigma_min, self.p.damping_max)
        c.J_svd = c.J

    def pose(self, c: ArmContext) -> rms.RmsPose:
        """The kinematics at θ (:class:`dynamics.rms.RmsPose`), built from the step's floats when first asked for."""
        if c.pose is None:
            R_OB, p, u = c.rows
            c.pose = rms.rms_pose_from_rows(c.geom, R_OB, p[:N_JOINTS], u, p[N_JOINTS])
        return c.pose

    def points(self, c: ArmContext) -> np.ndarray:
        """Joint points 1..6 then the point of resolution, in O (7, 3), the context's array (not to be written). [m]"""
        p: np.ndarray = c.rows[1]
        return p

    def flex(self, c: ArmContext) -> None:
        """RMSFLX, every ``flex_every`` steps: γ (B-6), γ_J (3-4), the per-servo springs 1/γ_i^e (3-7).

        Its terms act only while grappled; a free arm keeps the configuration of the tick and computes
        them from it when first needed (at capture), the same numbers at a fraction of the cost.
        """
        c.J_svd = None                              # and a fresh SVD (sigma) at the next kinematics
        c.flex_at = (c.rows, c.J, None if c.damped else c.J_inv)
        c.flex_pending = True
        if c.grappled:
            self.flex_terms(c)

    def flex_terms(self, c: ArmContext) -> None:
        """γ, γ_J, 1/γ_i^e and their damping β/γ_i^e at the configuration of the last RMSFLX tick."""
        c.flex_pending = False
        (_, p, u), J, J_inv = c.flex_at
        if self.fused and J_inv is not None:      # compiled, bit for bit the steps below (None: they say why)
            terms = rms.flex_terms_arrays(p, u, self._beam_rows, self.joint_stiffness, J_inv)
            if terms is not None:
                c.gamma_J, c.k_servo = terms
                c.c_servo = self.beta * c.k_servo
                return
        beams = () if self.p.flexibility == "joints" else self.beams
        g = fx.arm_flexibility(p, u, beams, self.joint_stiffness)
        try:
            if J_inv is not None:            # J regular (σ ≥ sigma_min), its inverse at hand: 3-4 as products
                X = J_inv @ g @ J_inv.T
                gamma_J = 0.5 * (X + X.T)
            else:
                gamma_J = fx.joint_flexibility(J, g)
            # 3-7: 1/γ_i^e = [(γ_J)^-1]_ii (fx.servo_flexibility_terms has the formula as written)
            K = rms.regular_inverse(gamma_J)
            if K is None:
                raise SingularityError("3-7: γ_J singular")
            k = np.diagonal(K).copy()
            if not np.all(np.isfinite(k) & (k > 0.0)):
                raise SingularityError(f"3-7 terms not positive near a singularity: {k.tolist()}")
            c.gamma_J, c.k_servo = gamma_J, k
        except (SingularityError, np.linalg.LinAlgError):  # at a singularity keep the previous terms
            self.warn(c, "singular: flexibility terms kept from the last regular configuration")
            if c.k_servo is None:                   # none computed yet: the joints' springs alone
                c.gamma_J = np.diag(1.0 / self.joint_stiffness)
                c.k_servo = self.joint_stiffness.copy()
        # the 3-7 springs lump the whole arm's flexibility: their damper stands for its structural
        # damping, stiffness-proportional (Rayleigh β), ζ = β ω / 2 for a mode at ω
        c.c_servo = self.beta * c.k_servo

    def springs(self, c: ArmContext) -> tuple[np.ndarray, np.ndarray]:
        """The 3-7 springs and dampers, ``(k, c)`` (6,) each."""
        if c.flex_pending:
            self.flex_terms(c)
        k, d = c.k_servo, c.c_servo
        assert k is not None and d is not None  # set by flex_terms
        return k, d

    def k_servo(self, c: ArmContext) -> np.ndarray:
        """The 3-7 springs ``1/γ_i^e`` (6,) of the last RMSFLX. [N·m/rad]"""
        return self.springs(c)[0]

    def c_servo(self, c: ArmContext) -> np.ndarray:
        """Their dampers ``β/γ_i^e`` (6,). [N·m·s/rad]"""
        return self.springs(c)[1]

    def gamma_J(self, c: ArmContext) -> np.ndarray:
        """γ_J (6, 6) of the last RMSFLX (3-4). [rad/(N·m)]"""
        self.springs(c)
        x = c.gamma_J
        assert x is not None  # set by flex_terms
        return x


class ArmPlant(Protocol):
    """The arm's mechanics between the orbiter and (grappled) the payload: how the joints move under the servos'
    commanded rates, and the wrenches on the two bodies. State in the :class:`ArmContext` it is given."""

    def start(self, c: ArmContext) -> None:
        """Put the plant's own state (beyond the joints and servos) at rest in ``c``."""

    def step(self, c: ArmContext, qd_cmd: np.ndarray, direct: DirectDrive, orb: dict[str, Any],
             pay: dict[str, Any] | None, h: float) -> None:
        """Advance ``c`` by ``h`` [s] under the commanded joint rates ``qd_cmd`` (6,) [rad/s] (``c.qd_cmd``), the
        orbiter's (and the payload's) state bodies predicted to the step."""

    def end_step(self, c: ArmContext) -> None:
        """After the step: the wrench on the payload at Eo in O (``c.F_Eo_O``) where the plant gives it so."""

    def wrenches(self, c: ArmContext, R_WO: Any, p_WoEo_W: tuple[float, float, float],
                 p_WoSo_W: tuple[float, float, float]) -> None:
        """``c.F_Eo_W``, ``c.F_So_W`` and ``c.F_Eo_O`` [N·m, N] to publish, with R_WO (rows) and Eo, So in W [m]."""

    def X_OE(self, c: ArmContext) -> np.ndarray:
        """E's pose in O (4, 4) at the context's configuration."""
        ...

    def deflection_O(self, c: ArmContext, R_WO: Any) -> Deflection | None:
        """E's elastic rotation and displacement in O, or None for rigid links."""
        ...

    def drive_stiffness(self, c: ArmContext) -> np.ndarray:
        """The springs the motors drive the joints through (6,) [N·m/rad]."""
        ...


class ArmController(Protocol):
    """What the arm is told to do: operator commands, contact events, the commanded joint rates each step."""

    def command(self, c: ArmContext, ev: dict[str, Any]) -> None:
        """Apply one operator command, or refuse it with a reason on arm/state."""

    def contact(self, c: ArmContext, ev: dict[str, Any], orb: dict[str, Any], pay: dict[str, Any] | None,
                X_OE: Callable[[], np.ndarray]) -> None:
        """Apply one contact event (``capture``, ``rigidize``, ``release``)."""

    def rates(self, c: ArmContext) -> np.ndarray | Sequence[float]:
        """The commanded joint rates (6,) [rad/s] for the step (a new array, or a sequence of floats)."""
        ...

    def direct_currents(self, c: ArmContext) -> list[float | None] | None:
        """Direct drive's motor currents (:data:`DirectDrive`)."""
        ...


def _massless_wrenches(c: ArmContext, R: Any, e: tuple[float, float, float], s: tuple[float, float, float]) -> None:
    """The massless arm's: ``F_Eo_O`` to W, and its opposite shifted to So on the orbiter (2-4…2-9)."""
    F = c.F_Eo_O.tolist()
    F_W = [*sp.mat_vec_rows(R, *F[:3]), *sp.mat_vec_rows(R, *F[3:])]
    c.F_Eo_W = np.array(F_W)
    c.F_So_W = np.array(rms.shoulder_reaction_rows(F_W, e, s))


class MasslessPlant:
    """The SVDS massless arm (seed 003): RMSFM's joint motion and servo torques, the wrench ``J^-T τ`` (2-3)."""

    def __init__(self, params: ArmParams, kin: ArmKinematics, servo_p: sv.ServoParams) -> None:
        self.p = params
        self.kin = kin
        self.servo_p = servo_p
        self._zeros6 = np.zeros(6)                          # published as is: never written in place
        self.fused = True
        """Whether a grappled step with the servos on the springs is one compiled call (:meth:`_grappled_step`); False:
        the separate kernels and numpy, its reference (the tests compare them)."""

    def start(self, c: ArmContext) -> None:
        """Nothing beyond the joints and servos."""

    def step(self, c: ArmContext, qd_cmd: np.ndarray, direct: DirectDrive, orb: dict[str, Any],
             pay: dict[str, Any] | None, h: float) -> None:
        """Free: the joints are the motors (servos against no load), no wrench. Grappled: the joint rates from
        the relative motion (2-10…2-12), the servos against the 3-7 springs, the torques they transmit (or the
        passive 3-6 torques with every brake on, ``flexibility = "passive"``)."""
        n_sub = self.p.servo_substeps
        brakes = _BRAKES[c.brakes]
        if not c.grappled:
            c.servo, _ = sv.servo_step_arrays(self.servo_p, c.servo, qd_cmd, brakes, h, n_sub, None, direct(c))
            c.theta_dot = c.servo.omega          # the arm angle is the motor's (arrays never written in place)
            c.theta = c.servo.theta_m
            c.tau = self._zeros6
            self.kin.update(c)
            c.V_R_O = c.J @ c.theta_dot
            return
        passive = self.p.flexibility == "passive" and c.brakes
        if pay is not None and not passive and self.fused:
            self._grappled_step(c, qd_cmd, direct, brakes, h)
            return
        c.theta_dot = self._grappled_rates(c, pay)
        th, thd = c.theta, c.theta_dot
        if not passive:
            k, damp = self.kin.springs(c)
            c.servo, _ = sv.servo_step_arrays(self.servo_p, c.servo, qd_cmd, brakes, h, n_sub, (k, damp, th, thd),
                                              direct(c))
        c.theta = th + h * thd
        # at the step end: 2-12 at the new configuration, then the torques the springs transmit
        self.kin.update(c)
        c.theta_dot = c.J_inv @ c.V_R_O
        if passive:
            c.tau = self._passive_torques(c)
            # the locked motor/gear trains sit at the neutral angles (they slip with them)
            c.servo = sv.ServoState(c.theta_n.copy(), np.zeros(6), np.zeros(6), np.zeros(6))
        else:
            c.tau = k * (c.servo.theta_m - c.theta) + damp * (c.servo.omega - c.theta_dot)

    def _grappled_step(self, c: ArmContext, qd_cmd: np.ndarray, direct: DirectDrive, brakes: np.ndarray,
                       h: float) -> None:
        """The grappled step below (the servos on the springs) in one compiled call,
        :func:`dynamics.rms.grappled_step_arrays`: the same numbers, warnings and order."""
        if c.damped:
            self.kin.warn(c, f"singular: joint rates from relative motion damped (sigma {c.sigma:.3g})")
        k, damp = self.kin.springs(c)
        regular = c.J_svd is not None and not c.damped
        status, V, servo, c.theta, R_OB, p, u, c.J, J_inv, thd, tau = rms.grappled_step_arrays(
            c.orb_x, c.pay_x, c.p_ToEo_T, c.J_inv, self.servo_p.kernel_rows, self.servo_p.friction_rate,
            c.servo.theta_m, c.servo.omega, c.servo.integ, qd_cmd, brakes, h, self.p.servo_substeps, k, damp, c.theta,
            direct(c), c.geom.kernel_rows, regular, c.J_svd, c.sigma, self.p.sigma_min)
        c.V_R_O = V
        c.servo = sv.ServoState(servo[0], servo[1], servo[2], servo[3])
        c.rows = (R_OB, p, u)
        c.pose = None
        if status == 0:
            c.J_inv, c.theta_dot, c.tau = J_inv, thd, tau
            return
        self.kin.invert(c, regular, J_inv)
        c.theta_dot = c.J_inv @ c.V_R_O
        c.tau = k * (c.servo.theta_m - c.theta) + damp * (c.servo.omega - c.theta_dot)

    def _grappled_rates(self, c: ArmContext, pay: dict[str, Any] | None) -> np.ndarray:
        """2-10…2-12: joint rates from the relative motion (E frozen in the payload)."""
        if pay is None:
            self.kin.warn(c, "grappled without payload/state: joint rates held at zero")
            c.V_R_O = np.zeros(6)
            return np.zeros(6)
        # the point of resolution as seen from the orbiter through the (frozen) grasp
        c.V_R_O = rms.grappled_twist_arrays(c.orb_x, c.pay_x, c.p_ToEo_T)   # compiled, bit for bit the reference
        if c.damped:
            self.kin.warn(c, f"singular: joint rates from relative motion damped (sigma {c.sigma:.3g})")
        return c.J_inv @ c.V_R_O

    def _passive_torques(self, c: ArmContext) -> np.ndarray:
        """3-6 with locked joints; a joint whose torque exceeds the brake slip torque slips (its neutral moves)."""
        K = np.linalg.inv(self.kin.gamma_J(c))
        slip = self.servo_p.slip_torque
        for _ in range(3):
            tau = -K @ (c.theta - c.theta_n)
            over = np.abs(tau) > slip
            if not over.any():
                return tau
            S = np.flatnonzero(over)
            N = np.flatnonzero(~over)
            target = np.sign(tau[S]) * slip[S]
            # −K_SS (θ_S − θn_S) − K_SN (θ_N − θn_N) = target  →  θn_S
            rhs = target + K[np.ix_(S, N)] @ (c.theta[N] - c.theta_n[N])
            c.theta_n[S] = c.theta[S] + np.linalg.solve(K[np.ix_(S, S)], rhs)
            self.kin.warn(c, f"brakes slipping: {', '.join(JOINT_NAMES[i] for i in S)}")
        return -K @ (c.theta - c.theta_n)

    def end_step(self, c: ArmContext) -> None:
        """2-3: ``F_Eo_O = J^-T τ`` grappled (damped near a singularity, warned), none free."""
        if c.grappled:
            c.F_Eo_O = c.J_inv.T @ c.tau                 # 2-3 (damped near a singularity)
            if c.damped:
                self.kin.warn(c, f"singular: end-effector wrench by damped least squares (sigma {c.sigma:.3g})")
        else:
            c.F_Eo_O = np.zeros(6)

    def wrenches(self, c: ArmContext, R_WO: Any, p_WoEo_W: tuple[float, float, float],
                 p_WoSo_W: tuple[float, float, float]) -> None:
        """From ``F_Eo_O`` (:func:`_massless_wrenches`)."""
        _massless_wrenches(c, R_WO, p_WoEo_W, p_WoSo_W)

    def X_OE(self, c: ArmContext) -> np.ndarray:
        """The rigid kinematics' E in O."""
        return self.kin.pose(c).X_OE

    def deflection_O(self, c: ArmContext, R_WO: Any) -> Deflection | None:
        """None: the massless arm's flexibility is in its 3-7 springs, not in E's published pose."""
        return None

    def drive_stiffness(self, c: ArmContext) -> np.ndarray:
        """The 3-7 springs of the last RMSFLX."""
        return self.kin.k_servo(c)


class MultibodyPlant:
    """The multibody arm (links with mass, seed 004) on the moving orbiter; grappled, the joints as the massless
    arm's and both wrenches from the chain's inverse dynamics. ``chain_data`` is the chain's scratch (its content
    a function of the last configuration it was given), not pickled."""

    def __init__(self, params: ArmParams, kin: ArmKinematics, servo_p: sv.ServoParams, X_OS: np.ndarray,
                 joint_stiffness: np.ndarray, zeta: float) -> None:
        self.p = params
        self.kin = kin
        self.servo_p = servo_p
        self.joint_stiffness = joint_stiffness
        self.zeta = zeta
        self.massless = MasslessPlant(params, kin, servo_p)
        self.quat_OS = sp.rotation_to_quat(X_OS[:3, :3])
        self._p_OS = X_OS[:3, 3].tolist()
        self._R_OS = tuple(X_OS[:3, :3].ravel().tolist())
        # the chain's base (body 0) is the orbiter, moved as orbiter/state says: every wrench taken from
        # the chain (rms.prescribed_base_affine, rms.grappled_inverse_dynamics, multirate.hold) removes the
        # base body's own inertia, so the mass properties the case gives it do not enter the arm's results
        # (tests/dynamics/test_arm_base_mass.py); the orbiter's are [orbiter]'s, the orbiter service's
        case = srms_on_orbiter()
        self.chain = rms.scale_link_masses(case.model, params.link_mass_scale)
        if params.booms == "flexible":
            self.chain = with_flexible_booms(self.chain, srms_booms(params.boom_modes,
                                                                    damping_ratio=params.assumed.boom_damping))
        self.chain_data = ch.make_data(self.chain)

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without ``chain_data`` (scratch: its arrays are views of one another, which pickling would part)."""
        state = self.__dict__.copy()
        state.pop("chain_data", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.chain_data = ch.make_data(self.chain)

    def start(self, c: ArmContext) -> None:
        """Nothing beyond the joints and servos."""

    def _base_motion(self, orb: dict[str, Any]) -> tuple[np.ndarray, Any, np.ndarray, np.ndarray]:
        """Chain base (shoulder S) pose ``X_WS`` and its ``quat_WS``, twist and classical acceleration in W from the
        orbiter state."""
        q = rb.as_floats(orb["quat_WO"])
        R = sp.rotation_rows(*q)                                     # R_WO, on floats
        r, V_S, A_S = rb.point_motion(np.reshape(R, (3, 3)), orb["w_WO_O"], orb["v_WOo_W"], orb["a_WOo_W"],
                                      orb["wdot_WO_O"], self._p_OS)  # So from Oo, in W; its twist, acceleration
        X_WS = np.eye(4)
        X_WS[:3, :3] = np.reshape(sp.mat_mat_rows(R, self._R_OS), (3, 3))
        X_WS[:3, 3] = np.asarray(orb["p_WoOo_W"], dtype=np.float64) + r
        return X_WS, sp.quat_multiply(q, self.quat_OS), V_S, A_S

    @staticmethod
    def _chain_q(X_WS: np.ndarray, quat_WS: Any, theta: np.ndarray) -> np.ndarray:
        return np.concatenate([X_WS[:3, 3], quat_WS, theta])

    def step(self, c: ArmContext, qd_cmd: np.ndarray, direct: DirectDrive, orb: dict[str, Any],
             pay: dict[str, Any] | None, h: float) -> None:
        """Free: servo → gear spring → links on the moving orbiter (:func:`dynamics.rms.prescribed_base_affine`,
        held over the servo substeps), the shoulder reaction. Grappled: the joints as the massless arm's, both
        wrenches by :func:`dynamics.rms.grappled_inverse_dynamics`."""
        X_WS, quat_WS, V_S, A_S = self._base_motion(orb)
        if c.grappled:
            thd_old = c.theta_dot.copy()
            self.massless.step(c, qd_cmd, direct, orb, pay, h)  # joint motion and servo torques as the massless arm
            thdd = (c.theta_dot - thd_old) / h
            q = self._chain_q(X_WS, quat_WS, c.theta)
            v = np.concatenate([V_S, c.theta_dot])
            vd = np.concatenate([A_S, thdd])
            F_E_W, F_B_W = rms.grappled_inverse_dynamics(self.chain, self.chain_data, q, v, vd, c.tau,
                                                         c.geom.p_B6oEo_B6)
            c.mb_wrench = (F_E_W, F_B_W)
            return
        n_sub = self.p.servo_substeps
        hs = h / n_sub
        k = self.joint_stiffness
        damp = 2.0 * self.zeta * np.sqrt(k * self.servo_p.reflected_inertia)
        q = self._chain_q(X_WS, quat_WS, c.theta)
        v = np.concatenate([V_S, c.theta_dot])
        # mass matrix and bias once per step, held over the substeps (the arm moves < 1e-4 rad in a
        # step): θ̈ = A τ + b, F_B = C θ̈ + d
        A, b, C, d = rms.prescribed_base_affine(self.chain, self.chain_data, q, v, A_S)
        thdd = np.zeros(6)
        currents = direct(c)
        for _ in range(n_sub):
            c.servo, tau = sv.servo_step_arrays(self.servo_p, c.servo, qd_cmd, _BRAKES[c.brakes], hs, 1,
                                                (k, damp, c.theta, c.theta_dot), currents)
            thdd = A @ tau + b
            c.theta_dot = c.theta_dot + hs * thdd
            c.theta = c.theta + hs * c.theta_dot
        F_B = C @ thdd + d
        c.tau = k * (c.servo.theta_m - c.theta) + damp * (c.servo.omega - c.theta_dot)
        self.kin.update(c)
        c.V_R_O = c.J @ c.theta_dot
        c.mb_wrench = (np.zeros(6), F_B)

    def end_step(self, c: ArmContext) -> None:
        """Nothing: the wrenches come from the chain (``c.mb_wrench``)."""

    def wrenches(self, c: ArmContext, R_WO: Any, p_WoEo_W: tuple[float, float, float],
                 p_WoSo_W: tuple[float, float, float]) -> None:
        """The chain's ``c.mb_wrench`` (its base origin is So), ``F_Eo_O`` from it; before the first step the
        massless arm's (none)."""
        if c.mb_wrench is None:
            _massless_wrenches(c, R_WO, p_WoEo_W, p_WoSo_W)
            return
        c.F_Eo_W, c.F_So_W = c.mb_wrench       # the chain base origin is So
        F = c.F_Eo_W.tolist()
        c.F_Eo_O = np.array([*sp.mat_t_vec_rows(R_WO, *F[:3]), *sp.mat_t_vec_rows(R_WO, *F[3:])])

    def X_OE(self, c: ArmContext) -> np.ndarray:
        """The rigid kinematics' E in O."""
        return self.kin.pose(c).X_OE

    def deflection_O(self, c: ArmContext, R_WO: Any) -> Deflection | None:
        """None: rigid links."""
        return None

    def drive_stiffness(self, c: ArmContext) -> np.ndarray:
        """The 3-7 springs of the last RMSFLX (grappled, the joints move as the massless arm's)."""
        return self.kin.k_servo(c)


class FlexiblePlant(MultibodyPlant):
    """The multibody arm with Euler–Bernoulli booms (module docstring, ``booms = "flexible"``):
    :mod:`dynamics.multirate` between the orbiter and (grappled) the payload's grasp point."""

    def __init__(self, params: ArmParams, kin: ArmKinematics, servo_p: sv.ServoParams, X_OS: np.ndarray,
                 joint_stiffness: np.ndarray, zeta: float) -> None:
        super().__init__(params, kin, servo_p, X_OS, joint_stiffness, zeta)
        # the linear springs and dampers on the arm coordinates: the gear springs to the motors (joint_stiffness,
        # the gear-train damper of the rigid multibody arm) and the beams'
        fi = self.chain.flex
        assert fi is not None  # a flexible arm's chain has its booms (dynamics.cases.with_flexible_booms)
        self.ne = ne = fi.ne
        k = self.joint_stiffness
        self._c_gear = 2.0 * self.zeta * np.sqrt(k * self.servo_p.reflected_inertia)
        na = N_JOINTS + ne
        self._K_a = np.zeros((na, na))
        self._D_a = np.zeros((na, na))
        self._K_a[:N_JOINTS, :N_JOINTS] = np.diag(k)
        self._D_a[:N_JOINTS, :N_JOINTS] = np.diag(self._c_gear)
        self._K_a[N_JOINTS:, N_JOINTS:] = fi.K
        self._D_a[N_JOINTS:, N_JOINTS:] = fi.D

    def start(self, c: ArmContext) -> None:
        """The booms at rest in the context."""
        ne = self.ne
        na = N_JOINTS + ne
        c.eta = np.zeros(ne)
        c.eta_dot = np.zeros(ne)
        c.vdot_a = np.zeros(na)                   # the arm coordinates' accelerations of the last step
        c.hand_err = np.zeros(6)                  # the hand's pose error on the payload (W), propagated
        c.J_eta = np.zeros((6, ne))               # E's twist per elastic rate (W), at the last hold
        c.hand_p = c.geom.p_B6oEo_B6.copy()       # the hand point on the last body, frozen at the grasp

    def step(self, c: ArmContext, qd_cmd: np.ndarray, direct: DirectDrive, orb: dict[str, Any],
             pay: dict[str, Any] | None, h: float) -> None:
        """The multibody arm with beam booms between the orbiter and (grappled) the payload, both moving as their
        services integrate them: :mod:`dynamics.multirate`, its matrices held over ``dynamics_every`` steps.

        Free, the arm's links and booms move on their own under the gear springs, the base moving as given.
        Grappled, its hand E (the point of resolution at the grasp) moves with the payload's grasp point
        (the frozen X_TE), enforced by the hand constraint with Baumgarte's correction; the constraint wrench is
        the wrench on the payload. The joint angles and the booms' coordinates are the arm's own state.
        """
        X_WS, quat_WS, V_S, A_S = self._base_motion(orb)
        grappled = c.grappled and pay is not None
        if c.grappled and pay is None:
            self.kin.warn(c, "grappled without payload/state: the arm moves free")
        n_sub = self.p.servo_substeps
        ne = c.eta.size
        x = np.concatenate([c.theta, c.eta])
        v = np.concatenate([c.theta_dot, c.eta_dot])
        hand = None
        if grappled and pay is not None:                        # the grasp point's motion (floats)
            pT, qT, wT, vT = c.pay_f
            R = sp.rotation_rows(*qT)                             # R_WT
            _, V_G, A_G = rb.point_motion(np.reshape(R, (3, 3)), wT, vT, pay["a_WTo_W"], pay["wdot_WT_T"],
                                          c.p_ToEo_T)         # the grasp point's twist and acceleration, W
        held = c.held
        want_hand = grappled
        if (held is None or (held.J is not None) != want_hand
                or c.step_count - c.held_at >= self.p.dynamics_every):
            q = self._chain_q(X_WS, quat_WS, x)
            vv = np.concatenate([V_S, v])
            nb = self.chain.nb - 1
            newly = want_hand and (held is None or held.J is None)
            if newly:                                          # the grasp: E is where it is now
                c.hand_p = c.geom.p_B6oEo_B6.copy()
            held = c.held = mr.hold(self.chain, self.chain_data, q, vv, self._K_a, self._D_a, h,
                                        (nb, c.hand_p) if want_hand else None)
            c.held_at = c.step_count
            J_E = held.J if held.J is not None else ch.frame_jacobian(self.chain, self.chain_data, q, nb, c.hand_p)
            c.J_eta = np.array(J_E[:, 6 + N_JOINTS:])
            if want_hand:
                X_WB = ch.forward_kinematics(self.chain, self.chain_data, q)[nb]
                X_WE = X_WB @ sp.pose(np.eye(3), c.hand_p)
                X_WG = sp.pose(np.reshape(R, (3, 3)), pT) @ sp.pose(c.R_TE, c.p_ToEo_T)
                c.hand_err = mr.hand_pose_error(X_WE, X_WG)
                if newly:   # the links take the payload's motion at the grasp (least kinetic metric)
                    v = v - held.G2 @ (J_E[:, 6:] @ v + J_E[:, :6] @ V_S - V_G)
        if grappled:
            hand = (V_G, A_G, c.hand_err)
        k, damp = self.joint_stiffness, self._c_gear
        if c.held_at == c.step_count and (c.step_count == 0 or (held.J is not None) != c.hand_was):
            # the first step, or the hand put on or taken off the payload: Newmark's start accelerations
            Q0 = np.concatenate([k * c.servo.theta_m + damp * c.servo.omega, np.zeros(ne)])
            c.vdot_a = mr.held_accelerations(held, x, v, Q0, A_S, hand, V_S, HAND_BAUMGARTE, HAND_BAUMGARTE)
        c.hand_was = held.J is not None
        # the servos over the step against the link angles and rates of its start (substepped, as the massless
        # arm's), then the links and booms over the step with the motors' drive of its end (Newmark)
        c.servo, _ = sv.servo_step_arrays(self.servo_p, c.servo, qd_cmd, _BRAKES[c.brakes], h, n_sub,
                                          (k, damp, x[:N_JOINTS], v[:N_JOINTS]), direct(c))
        Q = np.zeros(N_JOINTS + ne)                            # the motors' drive on the arm coordinates
        Q[:N_JOINTS] = k * c.servo.theta_m + damp * c.servo.omega
        v0 = v
        x, v, c.vdot_a, lam, F_b = mr.held_step(held, x, v, c.vdot_a, Q, V_S, A_S, hand, HAND_BAUMGARTE,
                                                    HAND_BAUMGARTE)
        if hand is not None:                                    # the pose error, carried by the velocity error
            assert held.J is not None  # the hand is held (mr.hold with the hand)
            c.hand_err = c.hand_err + h * (held.J[:, 6:] @ (0.5 * (v0 + v)) + held.J[:, :6] @ V_S - V_G)
        c.theta, c.eta = x[:N_JOINTS].copy(), x[N_JOINTS:].copy()
        c.theta_dot, c.eta_dot = v[:N_JOINTS].copy(), v[N_JOINTS:].copy()
        c.tau = k * (c.servo.theta_m - c.theta) + damp * (c.servo.omega - c.theta_dot)
        c.mb_wrench = (lam if grappled else np.zeros(6), F_b)
        self.kin.update(c)
        R_WO = sp.rotation_rows(*c.orb_f[1])
        dV = c.J_eta @ c.eta_dot                            # the booms' share of E's twist, W
        dv = dV.tolist()
        c.V_R_O = c.J @ c.theta_dot + np.array([*sp.mat_t_vec_rows(R_WO, *dv[:3]), *sp.mat_t_vec_rows(R_WO, *dv[3:])])

    def deflection_O(self, c: ArmContext, R_WO: Any) -> Deflection | None:
        return self._deflection(c, R_WO)

    def _deflection(self, c: ArmContext, R_WO: Any) -> Deflection:
        """The booms' rotation (rotation vector) and displacement of E, in O, to first order in η: ``J_η η``."""
        d = (c.J_eta @ c.eta).tolist()
        r0, r1, r2 = sp.mat_t_vec_rows(R_WO, *d[:3])
        u0, u1, u2 = sp.mat_t_vec_rows(R_WO, *d[3:])
        return (r0, r1, r2), (u0, u1, u2)

    def X_OE(self, c: ArmContext) -> np.ndarray:
        """E's pose in O: the rigid kinematics at θ and the booms' deflection (first order)."""
        R_OB, p, _ = c.rows
        X = np.eye(4)
        X[:3, :3] = np.reshape(R_OB[N_JOINTS], (3, 3))
        X[:3, 3] = p[N_JOINTS]
        dth, dp = self._deflection(c, sp.rotation_rows(*c.orb_f[1]))
        X[:3, :3] = sp.quat_to_rotation(sp.quat_integrate([1.0, 0.0, 0.0, 0.0], np.array(dth), 1.0)) @ X[:3, :3]
        X[:3, 3] += dp
        return X

    def drive_stiffness(self, c: ArmContext) -> np.ndarray:
        """The gear springs (the motors drive the links through them)."""
        return self.joint_stiffness


class AutoSequence:
    """The SRMS auto sequence (module docstring, Modes): waypoints of the point of resolution flown segment by
    segment under :func:`dynamics.rms.auto_profile`, the profile rate fed forward, the motor-side error fed back."""

    def __init__(self, params: ArmParams, kin: ArmKinematics, h: float) -> None:
        self.p = params
        self.kin = kin
        self.h = h

    @staticmethod
    def _limits(wp: dict[str, Any], vmax: float, wmax: float) -> tuple[float, float]:
        """The speed [m/s] and rate [rad/s] a waypoint's segment is flown at: its own, within the mode's."""
        return min(wp.get("v", vmax), vmax), min(wp.get("w", wmax), wmax)

    def _sigmas(self, seg: dict[str, Any], t: float) -> tuple[float, float]:
        """The segment's path parameter σ at ``t`` and ``t + h`` (``t`` the run's time [s];
        :meth:`dynamics.rms.AutoProfile.sigma`)."""
        prof = seg["prof"]
        return prof.sigma(t - seg["t0"]), prof.sigma(t + self.h - seg["t0"])

    def command(self, c: ArmContext, vmax: float, wmax: float, limits: np.ndarray, limit_gain: float
                ) -> tuple[np.ndarray, tuple[float, float, float, int, int]] | None:
        """:meth:`rates` and what :meth:`ModeController.rates` makes of them (the clip, ``J⁻¹ V``, the joint limits)
        in one compiled call (:func:`dynamics.arm_kernels.auto_command`), for a step of a segment under way: the
        rows ``V, qd, scaled, limited`` (4, 6) and ``(nv, nw, r_max, j, clipped)``; None where the step is not
        that (no segment yet, a waypoint reached, the kernel handing over to the reference): the caller then runs
        :meth:`rates`, which does the same from the start."""
        seg = c.seg
        if seg is None or not c.waypoints:
            return None
        lv, lw = self._limits(c.waypoints[0], vmax, wmax)
        s0, s1 = self._sigmas(seg, c.now * 1e-9)
        tol_p, tol_r = self.p.auto_tol
        R_OB, p, _ = c.rows
        out = np.empty((4, N_JOINTS))
        code, _, _, nv, nw, r_max, j, clipped = rms.auto_command_arrays(
            c.geom.kernel_rows, c.servo.theta_m, c.grappled, R_OB[N_JOINTS], p[N_JOINTS], seg["rows"], s0, s1,
            self.h, self.p.auto_gain, lv, lw, tol_p, tol_r, vmax, wmax, c.J_inv, c.theta, limits, limit_gain, out)
        return None if code else (out, (nv, nw, r_max, j, clipped))

    def rates(self, c: ArmContext, vmax: float, wmax: float) -> list[float]:
        """Auto sequence: the segment profile's rate fed forward plus a small correction of the motor-side error."""
        # Feedback from the motor-side (servo) angles: the pose the servos command. While grappled
        # the arm angles also carry the structure's elastic motion; feeding it back would drive
        # the flexible modes.
        R_OB, p = (rms.rms_kinematics_arrays(c.geom, c.servo.theta_m) if c.grappled else c.rows)[:2]
        R_m, p_m = R_OB[N_JOINTS], p[N_JOINTS]
        t = c.now * 1e-9
        tol_p, tol_r = self.p.auto_tol
        while c.waypoints:
            wp = c.waypoints[0]
            lv, lw = self._limits(wp, vmax, wmax)
            seg = c.seg
            if seg is None:                      # a new segment from where the motors are now
                p0, R0 = p_m.tolist(), R_m.tolist()
                dp = [float(a) - b for a, b in zip(wp["p"], p0, strict=True)]
                # the slew as a rotation vector in O: R_ref(σ) = exp(σ [rot×]) R_OE0
                rot = (sp.rotation_error_rows(R0, sp.rotation_rows(*rb.as_floats(wp["quat"]))) if "quat" in wp
                       else [0.0, 0.0, 0.0])
                a, alpha = self.p.auto_accel_loaded if c.grappled else self.p.auto_accel
                prof = rms.auto_profile(sp.norm3(dp), sp.norm3(rot), lv, lw, a, alpha)
                # the segment as rms.auto_rates takes it: p0, dp, R0, rot
                seg = c.seg = {"t0": t, "rows": np.array([*p0, *dp, *R0, *rot]), "prof": prof}
            s0, s1 = self._sigmas(seg, t)
            # the motor-side error on the reference at t, and the reference's mean rate over the step with a
            # correction of that error (rotation about a fixed axis in O)
            e_p, e_r, V = rms.auto_rates(seg["rows"], s0, s1, self.h, p_m, R_m, self.p.auto_gain, lv, lw)
            if s0 >= 1.0 and e_p <= tol_p and e_r <= tol_r:
                c.waypoints.pop(0)
                c.seg = None
                self.kin.warn(c, f"auto: waypoint reached, {len(c.waypoints)} left")
                continue
            return V
        return [0.0] * 6


class CaptureDamper:
    """Post-capture damping (module docstring, ``capture_control = "damp"``): the servos make the joint torques
    follow a damper's on E's relative twist, the brakes once at rest."""

    def __init__(self, params: ArmParams, kin: ArmKinematics, m_T: float, I_T: np.ndarray,
                 drive_stiffness: Callable[[ArmContext], np.ndarray]) -> None:
        self.p = params
        self.kin = kin
        self.m_T, self.I_T = m_T, I_T
        self.drive_stiffness = drive_stiffness

    def rates(self, c: ArmContext) -> np.ndarray:
        """Post-capture damping (module docstring): ``θ̇ + λ K⁻¹ (τ_d − τ)``, ``τ_d = −Jᵀ (M_E / T) V_R``;
        the brakes once the relative rates have stayed below ``damp_rest`` for ``damp_time``."""
        V = c.V_R_O                                    # relative twist of E, in O, at the last step's end
        T = self.p.damp_time
        v_rest, w_rest = self.p.damp_rest
        Vl = V.tolist()
        if sp.norm3(Vl[3:]) < v_rest and sp.norm3(Vl[:3]) < w_rest:
            if c.rest_since is None:
                c.rest_since = c.now
            elif c.now - c.rest_since >= round(T * 1e9):
                c.mode, c.brakes = "brakes", True
                c.theta_n = c.theta.copy()
                self.kin.warn(c, "damp: relative motion at rest, brakes on")
                return np.zeros(N_JOINTS)
        else:
            c.rest_since = None
        F_d = -(self.payload_inertia_E(c) @ V) / T        # the damper's wrench on the payload at Eo, in O
        tau_d = c.J.T @ F_d                            # 2-3 the other way
        lam = self.p.damp_bandwidth
        k = self.drive_stiffness(c)  # the springs the motors drive through
        return c.theta_dot + lam * (tau_d - c.tau) / k

    def payload_inertia_E(self, c: ArmContext) -> np.ndarray:
        """The payload's spatial inertia about Eo, in O, [ω; v] order (6, 6), from ``[payload]`` and the grasp."""
        R_OT = sp.rotation_rows(*c.orb_f[1])          # R_WO rows, then R_OT = R_WOᵀ R_WT
        R_OT = np.reshape(R_OT, (3, 3)).T @ np.reshape(sp.rotation_rows(*c.pay_f[1]), (3, 3))
        r = -R_OT @ c.p_ToEo_T                         # Eo → payload CoM, in O
        S = sp.skew(r)
        m = self.m_T
        M = np.empty((6, 6))
        M[:3, :3] = R_OT @ self.I_T @ R_OT.T - m * (S @ S)
        M[:3, 3:] = m * S
        M[3:, :3] = -m * S
        M[3:, 3:] = m * np.eye(3)
        return M


class ModeController:
    """The SRMS modes (module docstring, Modes): operator commands and contact events change the context's mode;
    each step the mode's commanded joint rates, clipped to the rate and angle limits. The auto sequence and the
    post-capture damping are its parts."""

    def __init__(self, params: ArmParams, kin: ArmKinematics, servo_p: sv.ServoParams, geom: rms.RmsGeometry,
                 auto: AutoSequence, damper: CaptureDamper) -> None:
        self.p = params
        self.kin = kin
        self.servo_p = servo_p
        self.auto = auto
        self.damper = damper
        self.fused = True
        """Whether a step of an auto segment under way is one compiled call (:meth:`AutoSequence.command`); False:
        :meth:`AutoSequence.rates` and the steps after it, its reference (the tests compare them)."""
        # the limits as floats for the step loop
        self._q_lower, self._q_upper = geom.q_lower.tolist(), geom.q_upper.tolist()
        self._qd_max = geom.qd_max.tolist()
        m = params.limit_margin
        # the rate limits and where the rate toward an angle limit reaches zero (rms.limit_joint_rates)
        self._limits = np.array([self._qd_max, [x + m for x in self._q_lower], [x - m for x in self._q_upper]])

    def command(self, c: ArmContext, ev: dict[str, Any]) -> None:
        """Apply one operator command, or refuse it with a reason on arm/state."""
        kind = ev.get("kind", ev.get("cmd"))
        if kind in CONTACT_COMMANDS:
            return                                         # for the contact service
        if kind not in ARM_COMMANDS:
            self.kin.warn(c, f"refused: unknown command {kind!r}")
            return
        problems = check_command({k: v for k, v in ev.items() if k != "t"})
        if problems:
            self.kin.warn(c, f"refused: {kind}: {'; '.join(problems)}")
            return
        braked = c.brakes
        if kind == "mode":
            c.mode = ev["mode"]
            c.frame = ev.get("frame", c.frame)
            c.brakes = c.mode == "brakes"
            c.rate_cmd_frame = np.zeros(6)
            c.single = (0, 0.0)
            c.seg = None
            if c.mode == "auto" and not c.waypoints:
                self.kin.warn(c, "auto: no waypoints loaded, holding")
        elif kind == "rate":
            if c.mode != "manual":
                self.kin.warn(c, f"refused: rate: the arm is in {c.mode!r} mode, not 'manual'")
                return
            c.frame = ev.get("frame", c.frame)
            c.rate_cmd_frame = np.concatenate([np.asarray(ev.get("w", [0.0] * 3), float),
                                                  np.asarray(ev.get("v", [0.0] * 3), float)])
        elif kind == "auto":
            c.waypoints = [dict(wp) for wp in ev["waypoints"]]
            c.mode, c.brakes = "auto", False
            c.seg = None
        elif kind == "joint":
            j = ev["joint"]
            idx = JOINT_NAMES.index(j) if isinstance(j, str) else int(j)
            c.mode, c.brakes = "single", False
            c.single = (idx, float(ev["rate"]))
        elif kind == "direct":
            j = ev["joint"]
            idx = JOINT_NAMES.index(j) if isinstance(j, str) else int(j)
            drive = float(ev["drive"])
            if abs(drive) > 1.0:
                self.kin.warn(c, f"clipped: direct drive of {JOINT_NAMES[idx]} {drive:.4g} to ±1 (its current limit)")
                drive = math.copysign(1.0, drive)
            c.mode, c.brakes = "direct", False
            c.direct = (idx, drive)
        elif kind == "brakes":
            c.brakes = bool(ev["on"])
            if c.brakes:
                c.mode = "brakes"
            elif c.mode == "brakes":
                c.mode = "hold"
        elif kind == "stop":
            c.rate_cmd_frame = np.zeros(6)
            c.single = (c.single[0], 0.0)
            c.direct = (c.direct[0], 0.0)
            c.waypoints = []
            c.seg = None
        elif kind == "por":
            p_new = np.asarray(ev["p"], float)
            if c.grappled:   # the grasp is unchanged: carry the frozen point along with it
                c.p_ToEo_T = c.p_ToEo_T + c.R_TE @ (p_new - c.geom.p_B6oEo_B6)
            c.geom = replace(c.geom, p_B6oEo_B6=p_new)
            self.kin.update(c)
            self.kin.flex(c)
        if c.brakes and not braked:        # brakes set now: the joints lock where they are
            c.theta_n = c.theta.copy()

    def contact(self, c: ArmContext, ev: dict[str, Any], orb: dict[str, Any], pay: dict[str, Any] | None,
                X_OE: Callable[[], np.ndarray]) -> None:
        """Apply one contact event: ``capture``/``rigidize`` grapple the payload (X_TE frozen from ``X_OE()``, E's
        pose in O now; the post-capture control takes over), ``release`` frees it."""
        kind = ev.get("kind")
        if kind in ("capture", "rigidize"):
            if pay is None:
                self.kin.warn(c, f"refused: {kind}: no payload state to grapple")
                return
            R_WO = sp.quat_to_rotation(orb["quat_WO"])
            X_WO = sp.pose(R_WO, orb["p_WoOo_W"])
            X_WT = sp.pose(sp.quat_to_rotation(pay["quat_WT"]), pay["p_WoTo_W"])
            X_TE = sp.pose_inverse(X_WT) @ X_WO @ X_OE()
            c.p_ToEo_T, c.R_TE = X_TE[:3, 3].copy(), X_TE[:3, :3].copy()
            if not c.grappled:
                c.theta_n = c.theta.copy()
                c.servo = sv.ServoState(c.theta.copy(), c.theta_dot.copy(), c.servo.integ.copy(),
                                           c.servo.current.copy())
                if self.p.capture_control == "damp":
                    c.mode, c.brakes = "damp", False
                    c.rest_since = None
                elif not c.brakes:
                    c.mode, c.brakes = "brakes", True
            c.grappled = True
        elif kind == "release":
            c.grappled = False
            if c.mode == "damp":
                c.mode = "hold"
            c.servo = sv.ServoState(c.theta.copy(), c.theta_dot.copy(), c.servo.integ.copy(),
                                       c.servo.current.copy())

    def direct_currents(self, c: ArmContext) -> list[float | None] | None:
        """Direct drive: the driven joint's motor current (the others on their rate loops), or None."""
        if c.mode != "direct" or c.brakes:
            return None
        j, drive = c.direct
        m = self.p.limit_margin
        if ((drive > 0.0 and c.theta[j] >= c.geom.q_upper[j] - m)
                or (drive < 0.0 and c.theta[j] <= c.geom.q_lower[j] + m)):
            self.kin.warn(c, f"clipped: {JOINT_NAMES[j]} stopped at its angle limit (direct drive off, servos hold; "
                      f"{c.theta[j]:.4f} rad, range [{c.geom.q_lower[j]:.4f}, {c.geom.q_upper[j]:.4f}])")
            c.mode, c.direct = "hold", (j, 0.0)
            return None
        out: list[float | None] = [None] * 6
        out[j] = drive * float(self.servo_p.current_limit[j])
        return out

    def rates(self, c: ArmContext) -> np.ndarray:
        """The joint rates the mode commands (6,) [rad/s], within the rate and angle limits (each clip warned)."""
        if c.brakes or c.mode in ("brakes", "hold", "direct"):
            return np.zeros(N_JOINTS)
        vmax = self.p.v_max_loaded if c.grappled else self.p.v_max
        wmax = self.p.w_max_loaded if c.grappled else self.p.w_max
        if c.mode == "damp":
            qd = self.damper.rates(c)
            if c.brakes:                              # at rest: braked
                return np.zeros(N_JOINTS)
        elif c.mode == "single":
            j, r = c.single
            qd = np.zeros(N_JOINTS)
            qd[j] = r
        else:
            if c.mode == "manual":
                V = c.rate_cmd_frame.tolist()
                if c.frame == "end_effector":
                    R = c.rows[0][N_JOINTS].tolist()
                    V = [*sp.mat_vec_rows(R, V[0], V[1], V[2]), *sp.mat_vec_rows(R, V[3], V[4], V[5])]
            else:
                fast = self.auto.command(c, vmax, wmax, self._limits, self.p.limit_gain) if self.fused else None
                if fast is not None:                # compiled, bit for bit the steps below
                    rows, (nv, nw, r_max, j, clipped) = fast
                    self._clip_warnings(c, nv, nw, vmax, wmax)
                    return self._limit_warnings(c, rows[1], rows[3], r_max, j, clipped)
                V = self.auto.rates(c, vmax, wmax)
            nv = math.sqrt(V[3] * V[3] + V[4] * V[4] + V[5] * V[5])
            nw = math.sqrt(V[0] * V[0] + V[1] * V[1] + V[2] * V[2])
            if nv > vmax * (1 + 1e-12):
                V[3:] = [x * (vmax / nv) for x in V[3:]]
            if nw > wmax * (1 + 1e-12):
                V[:3] = [x * (wmax / nw) for x in V[:3]]
            self._clip_warnings(c, nv, nw, vmax, wmax)
            qd = c.J_inv @ np.array(V)
        # scaled into the rate limits; then the rate toward an angle limit ramps down to zero at limit_margin from it
        _, out, r_max, j, clipped = rms.limit_joint_rates(qd, c.theta, self._limits, self.p.limit_gain)
        return self._limit_warnings(c, qd, out, r_max, j, clipped)

    def _clip_warnings(self, c: ArmContext, nv: float, nw: float, vmax: float, wmax: float) -> None:
        """The warnings of the point of resolution's speed ``nv`` and rate ``nw`` clipped to ``vmax``, ``wmax``, and
        of the damped inverse that turns them into joint rates."""
        if nv > vmax * (1 + 1e-12):
            self.kin.warn(c, f"clipped: point-of-resolution speed {nv:.4g} m/s to {vmax:.4g} m/s")
        if nw > wmax * (1 + 1e-12):
            self.kin.warn(c, f"clipped: point-of-resolution rate {nw:.4g} rad/s to {wmax:.4g} rad/s")
        if c.damped:
            self.kin.warn(c, f"singular: damped least squares (smallest singular value {c.sigma:.3g} "
                      f"< {self.p.sigma_min:.3g})")

    def _limit_warnings(self, c: ArmContext, qd: np.ndarray, out: np.ndarray, r_max: float, j: int,
                        clipped: int) -> np.ndarray:
        """``out``, the rates ``qd`` within the joint limits (:func:`dynamics.rms.limit_joint_rates`), with the
        warnings of each clip."""
        if j >= 0:
            self.kin.warn(c, f"clipped: joint rates scaled by {1.0 / r_max:.4g} ({JOINT_NAMES[j]} "
                      f"{qd[j]:.4g} rad/s beyond {self._qd_max[j]:.4g} rad/s)")
        if clipped:
            for i in range(N_JOINTS):
                if clipped >> i & 1:
                    self.kin.warn(c, f"clipped: {JOINT_NAMES[i]} stopped at its angle limit ({c.theta[i]:.4f} rad, "
                                  f"range [{self._q_lower[i]:.4f}, {self._q_upper[i]:.4f}])")
        return out


class ArmModel:
    """The arm service's model (a :class:`protocol.service.ServiceModel`): a plant (:class:`ArmPlant`: massless,
    multibody or with flexible booms, from ``[arm] model, booms``) driven by a controller (:class:`ArmController`:
    the modes, the auto sequence, the post-capture damping), both on :class:`ArmKinematics`, over one context.

    Its state is a context (:class:`ArmContext`, :meth:`new_context`) the runtime holds and passes to
    :meth:`initial` and :meth:`step` (:mod:`protocol.service`, "State in a context"); the model's attributes are
    parameters, which stepping never changes (:attr:`params`, the parsed ``[arm]``; :attr:`geometry`, the
    configured geometry the context's ``geom`` starts from; and the multibody plant's ``chain_data``, the chain's
    scratch, which stepping overwrites but whose content is a function of the last configuration it was given).
    What tests and tools read of a context: its fields (``theta``, ``theta_dot``, ``tau``, ``F_Eo_O``, ``V_R_O``,
    ``J``, ``J_inv``, …, :class:`ArmContext`), and through the model :meth:`pose`, :meth:`k_servo`,
    :meth:`c_servo`, :meth:`gamma_J` and :meth:`payload_inertia_E`; :meth:`command` and :meth:`warn` act on one.
    """

    def __init__(self, config: dict[str, Any], name: str, period_ns: int) -> None:
        problems = validate(config, name)
        if problems:
            raise ConfigError(f"[arm]: {len(problems)} problem(s): " + "; ".join(problems), problems)
        self.params = p = ArmParams.from_config(config)
        a = p.assumed
        self.name = name
        self.period_ns = period_ns
        self.h = period_ns * 1e-9
        self.inputs = INPUTS
        self.outputs = OUTPUTS
        X_OS = ch.pose_xyz_rpy(p.p_OoSo_O, p.rpy_OS)    # URDF: R = Rz(y) Ry(p) Rx(r)
        geom = rms.rms_geometry(_fixed_chain(), X_OS, p.por)
        self.servo_p = sv.srms_servo_params(
            geom.tau_max, geom.qd_max, bandwidth=a.bandwidth, gear_ratio=a.gear_ratio,
            motor_inertia=a.motor_inertia, torque_constant=a.torque_constant,
            coulomb_fraction=a.coulomb_fraction, viscous_fraction=a.viscous_fraction,
            slip_fraction=a.slip_fraction)
        self.joint_stiffness = np.array(a.joint_stiffness, dtype=float)
        self.zeta = a.joint_damping_ratio
        self.beta = a.joint_damping_beta
        self.beams = tuple(replace(b, EI=float(ei), GJ=float(gj))
                           for b, ei, gj in zip(fx.ASSUMED_BEAMS, a.beam_EI, a.beam_GJ, strict=True))
        self.multibody = p.model == "multibody"
        self.flexible = p.booms == "flexible"
        self.m_T, self.I_T = payload_mass_properties(config)   # for the post-capture damper
        self.kin = ArmKinematics(p, self.joint_stiffness, self.beams, self.beta)
        self.plant: ArmPlant
        if self.flexible:
            self.plant = FlexiblePlant(p, self.kin, self.servo_p, geom.X_OS, self.joint_stiffness, self.zeta)
        elif self.multibody:
            self.plant = MultibodyPlant(p, self.kin, self.servo_p, geom.X_OS, self.joint_stiffness, self.zeta)
        else:
            self.plant = MasslessPlant(p, self.kin, self.servo_p)
        self.damper = CaptureDamper(p, self.kin, self.m_T, self.I_T, self.plant.drive_stiffness)
        self.controller: ArmController = ModeController(p, self.kin, self.servo_p, geom,
                                                        AutoSequence(p, self.kin, self.h), self.damper)
        self.schedule = Schedule()  # the outputs' coupling (set_coupling); every step until told
        # the limits and the shoulder position as floats for the step loop
        self._q_lower, self._q_upper = geom.q_lower.tolist(), geom.q_upper.tolist()
        self._p_OS = geom.X_OS[:3, 3].tolist()
        self._p_OS_a = np.array(self._p_OS)
        self._massless = isinstance(self.plant, MasslessPlant)
        self.geometry = geom
        """The geometry as configured (:class:`dynamics.rms.RmsGeometry`); a context's ``geom`` starts as it (the
        ``por`` command moves the point of resolution in the context)."""

    def new_context(self) -> ArmContext:
        """A fresh context (:class:`ArmContext`): the arm at rest at ``q0``, servos holding, brakes off, free, mode
        ``hold``; the plant's own state at rest, the kinematics and an RMSFLX tick at ``q0``."""
        theta = np.array(self.params.q0, dtype=float)
        orb_f = ([0.0, 0.0, 0.0], (1.0, 0.0, 0.0, 0.0), [0.0, 0.0, 0.0], [0.0, 0.0, 0.0])
        c = ArmContext(
            theta=theta, theta_dot=np.zeros(6), servo=sv.servo_initial(theta), mode="hold", frame="orbiter",
            brakes=False, grappled=False, rate_cmd_frame=np.zeros(6), single=(0, 0.0), direct=(0, 0.0), waypoints=[],
            geom=self.geometry, p_ToEo_T=np.zeros(3), R_TE=np.eye(3), theta_n=theta.copy(),
            qd_cmd=np.zeros(6), tau=np.zeros(6), F_Eo_O=np.zeros(6), F_Eo_W=np.zeros(6), F_So_W=np.zeros(6),
            V_R_O=np.zeros(6), loads=np.zeros((ld.N_STATIONS, 6)), orb=self._default_orbiter(), orb_f=orb_f,
            pay_f=orb_f, orb_x=_AT_REST, pay_x=_AT_REST)
        self.plant.start(c)
        self.kin.update(c)
        self.kin.flex(c)
        return c

    # ------------------------------------------------------------------ what tests and tools read of a context
    def pose(self, c: ArmContext) -> rms.RmsPose:
        """The kinematics at ``c.theta`` (:class:`dynamics.rms.RmsPose`: joint frames and E in O, rigid arm)."""
        return self.kin.pose(c)

    def k_servo(self, c: ArmContext) -> np.ndarray:
        """The 3-7 springs ``1/γ_i^e`` (6,) of ``c``'s last RMSFLX tick (computed now if still pending). [N·m/rad]"""
        return self.kin.k_servo(c)

    def c_servo(self, c: ArmContext) -> np.ndarray:
        """Their dampers ``β/γ_i^e`` (6,). [N·m·s/rad]"""
        return self.kin.c_servo(c)

    def gamma_J(self, c: ArmContext) -> np.ndarray:
        """γ_J (6, 6) of ``c``'s last RMSFLX tick (3-4). [rad/(N·m)]"""
        return self.kin.gamma_J(c)

    def payload_inertia_E(self, c: ArmContext) -> np.ndarray:
        """The payload's spatial inertia about Eo, in O (6, 6), at ``c``'s grasp
        (:meth:`CaptureDamper.payload_inertia_E`). [kg·m², kg·m, kg]"""
        return self.damper.payload_inertia_E(c)

    # the multibody plant's parameters (AttributeError for the massless arm)
    chain = property(lambda self: self._multibody_plant().chain, doc="Multibody: the chain (ChainModel).")
    chain_data = property(lambda self: self._multibody_plant().chain_data, doc="Multibody: the chain's scratch.")
    _c_gear = property(lambda self: self._flexible_plant()._c_gear, doc="Flexible booms: gear dampers (6,).")
    _K_a = property(lambda self: self._flexible_plant()._K_a, doc="Flexible booms: arm stiffness (6+ne, 6+ne).")

    def _multibody_plant(self) -> MultibodyPlant:
        if not isinstance(self.plant, MultibodyPlant):
            raise AttributeError("the massless arm has no chain (model = 'massless')")
        return self.plant

    def _flexible_plant(self) -> FlexiblePlant:
        if not isinstance(self.plant, FlexiblePlant):
            raise AttributeError("only the arm with flexible booms has these (booms = 'flexible')")
        return self.plant

    # ------------------------------------------------------------------ helpers
    @staticmethod
    def _default_orbiter() -> dict[str, Any]:
        z = np.zeros(3)
        return {"p_WoOo_W": z, "quat_WO": np.array([1.0, 0, 0, 0]), "w_WO_O": z, "v_WOo_W": z, "a_WOo_W": z,
                "wdot_WO_O": z, "t_ns": 0}

    def warn(self, c: ArmContext, text: str) -> None:
        """Put a warning on ``c``'s arm/state for ``warn_hold`` seconds."""
        self.kin.warn(c, text)

    def command(self, c: ArmContext, ev: dict[str, Any]) -> None:
        """Apply one operator command to ``c``, or refuse it with a reason on its arm/state
        (:meth:`ArmController.command`)."""
        self.controller.command(c, ev)

    def _orbiter(self, c: ArmContext, u: Any, t_ns: int) -> dict[str, Any]:
        try:
            smp = u.state("orbiter/state")
        except KeyError:
            return c.orb
        c.orb, c.orb_f, c.orb_x = _held(smp, t_ns, "p_WoOo_W", "quat_WO", "w_WO_O", "v_WOo_W", "a_WOo_W",
                                        "wdot_WO_O")
        c.orb["t_ns"] = t_ns
        return c.orb

    def _payload(self, c: ArmContext, u: Any, t_ns: int) -> dict[str, Any] | None:
        try:
            smp = u.state("payload/state")
        except KeyError:
            return None
        b, c.pay_f, c.pay_x = _held(smp, t_ns, "p_WoTo_W", "quat_WT", "w_WT_T", "v_WTo_W", "a_WTo_W", "wdot_WT_T")
        return b

    # ------------------------------------------------------------------ outputs
    def set_coupling(self, periods: dict[str, int]) -> None:
        """The output ports' coupling periods [ns] (:mod:`protocol.coupling`): ``arm/state`` is built whole
        only at its coupling instants (in between only ``tau``, for its interval peak); the wrench, a
        flow, every step."""
        self.schedule = Schedule(periods)

    def _outputs(self, c: ArmContext, orb_f: tuple[list[float], Any, list[float], list[float]] | None,
                 t_ns: int, k: np.ndarray | None = None) -> dict[str, dict[str, Any]]:
        """Both messages of ``c`` at ``t_ns``, with the orbiter's ``(p_WoOo_W, quat_WO, w_WO_O, v_WOo_W)`` as floats
        then (``arm/state`` whole only at its coupling instants); or, for the massless arm, with ``k`` the
        orbiter's and the wrenches' floats then (:func:`dynamics.rms.massless_wrench_arrays`, the same numbers)."""
        R_OB, p, _ = c.rows
        R_OE, pE = R_OB[N_JOINTS].tolist(), p[N_JOINTS].tolist()
        d = None
        if k is not None:                                            # the massless arm's, compiled
            c.F_Eo_W, c.F_So_W = k[6:12], k[12:18]
            p_WoEo_W, p_WoSo_W = k[0:3], k[3:6]
        else:
            assert orb_f is not None
            (o0, o1, o2), q, _, _ = orb_f
            R = sp.rotation_rows(*q)
            d = self.plant.deflection_O(c, R)
            if d is not None:                                        # E with the booms' deflection
                dp = d[1]
                pE = [pE[0] + dp[0], pE[1] + dp[1], pE[2] + dp[2]]
            c0, c1, c2 = sp.mat_vec_rows(R, *pE)
            e0, e1, e2 = c0 + o0, c1 + o1, c2 + o2                   # p_WoEo_W
            s0, s1, s2 = sp.mat_vec_rows(R, *self._p_OS)
            s0, s1, s2 = s0 + o0, s1 + o1, s2 + o2                   # p_WoSo_W
            self.plant.wrenches(c, R, (e0, e1, e2), (s0, s1, s2))
            p_WoEo_W, p_WoSo_W = np.array((e0, e1, e2)), np.array((s0, s1, s2))
        # θ, θ̇, τ, the loads, the commanded rates and the wrenches are new arrays whenever they change
        # (never written in place): published without copies
        wrench: dict[str, Any] = {"F_Eo_W": c.F_Eo_W, "p_WoEo_W": p_WoEo_W, "F_So_W": c.F_So_W,
                                  "p_WoSo_W": p_WoSo_W, "grappled": bool(c.grappled)}
        if not self.schedule.due(STATE, t_ns):
            return {STATE: {"tau": c.tau}, WRENCH: wrench}  # tau: its interval peak (tau_peak)
        if k is not None:
            x = k.tolist()
            e0, e1, e2 = x[0:3]
            R = x[18:27]
            _, _, w, v = c.orb_f
            orb_f = (x[27:30], x[30:34], w, v)
        if d is not None:
            R_OE = sp.mat_mat_rows(sp.rotation_rows(*sp.quat_integrate_rows((1.0, 0.0, 0.0, 0.0), *d[0], 1.0)), R_OE)
        X_OE = np.array([[*R_OE[0:3], pE[0]], [*R_OE[3:6], pE[1]], [*R_OE[6:9], pE[2]], [0.0, 0.0, 0.0, 1.0]])
        w = sp.mat_mat_rows(R, R_OE)
        X_WE = np.array([[w[0], w[1], w[2], e0], [w[3], w[4], w[5], e1], [w[6], w[7], w[8], e2], [0.0, 0.0, 0.0, 1.0]])
        # E's spatial velocity in W: the orbiter's carried to Eo plus the relative one (both in O, to W)
        assert orb_f is not None
        V_WE_W = np.array(rms.end_effector_twist_rows(R, orb_f[2], orb_f[3], orb_f[0], (e0, e1, e2), c.V_R_O.tolist()))
        if c.warnings:
            warnings = [w for w, t_end in c.warnings.items() if t_end >= c.now]
            c.warnings = {w: t for w, t in c.warnings.items() if t >= c.now}
        else:
            warnings = []
        return {
            STATE: {"q": c.theta, "qd": c.theta_dot, "tau": c.tau, "mode": c.mode,
                    "brakes": bool(c.brakes), "X_OE": X_OE, "X_WE": X_WE, "V_WE_W": V_WE_W,
                    "grappled": bool(c.grappled), "loads": c.loads, "sigma_min": float(c.sigma),
                    "qd_cmd": c.qd_cmd, "warnings": warnings},
            WRENCH: wrench,
        }

    def initial(self, t0_ns: int, c: ArmContext) -> dict[str, dict[str, Any]]:
        """Outputs at t0 of ``c`` (a fresh one: the arm at rest at ``q0``, no wrench)."""
        c.now = t0_ns
        c.loads = ld.static_loads_arrays(c.rows[1], c.rows[0], c.F_Eo_O)
        return self._outputs(c, c.orb_f, t0_ns)

    def step(self, t_ns: int, h_ns: int, c: ArmContext, u: Any) -> dict[str, dict[str, Any]]:
        """Advance ``c`` t → t + h: RMSFLX (every ``flex_every``), commands, servos, RMSFM, RMLOAD (every
        ``loads_every``); the outputs stamped t + h."""
        c.now = t_ns
        h = h_ns * 1e-9
        orb = self._orbiter(c, u, t_ns)
        pay = self._payload(c, u, t_ns)
        for smp in u.events("contact/event"):
            for ev in smp.body.get("events", []):
                self.controller.contact(c, ev, orb, pay, partial(self.plant.X_OE, c))
        for smp in u.events("operator/command"):
            for ev in smp.body.get("events", []):
                self.controller.command(c, dict(ev))
        if c.step_count % self.params.flex_every == 0:
            self.kin.flex(c)
        c.qd_cmd = np.asarray(self.controller.rates(c), dtype=np.float64)   # (a controller may give a list)
        self.plant.step(c, c.qd_cmd, self.controller.direct_currents, orb, pay, h)
        c.now = t_ns + h_ns
        theta = c.theta.tolist()
        if not (all(map(le, self._q_lower, theta)) and all(map(le, theta, self._q_upper))):
            for i, (th, lo, hi) in enumerate(zip(theta, self._q_lower, self._q_upper, strict=True)):
                if not lo <= th <= hi:   # only the payload's motion can do this (grappled)
                    self.kin.warn(c, f"limit: {JOINT_NAMES[i]} at {th:.4f} rad is beyond its range "
                                     f"[{lo:.4f}, {hi:.4f}]")
        self.plant.end_step(c)
        c.step_count += 1
        if c.step_count % self.params.loads_every == 0:
            c.loads = ld.static_loads_arrays(c.rows[1], c.rows[0], c.F_Eo_O)
        # the outputs are stamped at the step end: the orbiter propagated by h
        if self._massless:                  # compiled, bit for bit the reference (None: it raises)
            k = rms.massless_wrench_arrays(c.orb_x, h, True, c.rows[1][N_JOINTS], self._p_OS_a, c.F_Eo_O)
            if k is not None:
                return self._outputs(c, None, t_ns + h_ns, k)
        p, q, w, v = c.orb_f
        return self._outputs(c, ([p[0] + v[0] * h, p[1] + v[1] * h, p[2] + v[2] * h],
                              sp.quat_integrate_rows(q, w[0], w[1], w[2], h), w, v), t_ns + h_ns)


def build(config: dict[str, Any], name: str, period_ns: int) -> ArmModel:
    """The arm model of service ``name``, the compiled kernels of its step loaded (:func:`dynamics.rms.load_kernels`,
    :func:`dynamics.servo.load_kernels`, :func:`dynamics.loads.load_kernels`): no step pays for numba's import or
    load (nor, on a machine's first run, the compile). A configuration check builds no model (:func:`stiff_couplings`
    makes one, but steps it not)."""
    rms.load_kernels()
    sv.load_kernels()
    ld.load_kernels()
    return ArmModel(config, name, period_ns)


def stiff_couplings(config: dict[str, Any], name: str) -> list[StiffCoupling]:
    """The grappled payload on the arm's springs, closed through ``arm/wrench`` (:mod:`protocol.stability`).

    The massless arm (seed 003) holds the payload with the 3-7 servo springs and their dampers
    (``c = β k``, ``joint_damping_beta``). At ``q0``, with the payload's grapple fixture at the
    end effector and the orbiter and payload mass properties of the config, the six elastic
    modes of the two bodies on the arm's flexibility (:func:`dynamics.flexibility.modes_two_body`,
    B-6/B-7 and 3-4) are found; the stiffest is the one a coupling must carry: one degree of
    freedom of the payload's mass at that frequency, damped as the arm damps it (ζ = β ω / 2).
    With flexible booms the arm's flexibility at E is its static compliance ``J K⁻¹ Jᵀ`` (the gear
    springs in series with the servos' holding stiffness, the booms' modal stiffness; J the hand's
    Jacobian on the joints and elastic coordinates), damped by the gear dampers (the least
    ``β = c/k`` of the joints). The booms' own modes (5–60 Hz with the hand held) are integrated
    inside the arm and do not travel. None for the rigid multibody arm (its links' own dynamics
    are integrated here) or without a payload.
    """
    table = config.get("arm", {})
    flexible = table.get("booms", "rigid") == "flexible"
    if (table.get("model", "massless") != "massless" and not flexible) or "payload" not in config:
        return []
    arm = ArmModel(config, name, 1_000_000)
    geom = arm.geometry
    q0 = [float(x) for x in arm.params.q0]
    # the kinematics at q0 by the float reference, not the compiled kernel of the step: a configuration check
    # (protocol.stability) imports no numba
    _, ps, us, pE = rms.rms_kinematics_rows(geom, q0)
    if flexible:
        X_OS = geom.X_OS
        q = np.concatenate([X_OS[:3, 3], sp.rotation_to_quat(X_OS[:3, :3]), q0, np.zeros(arm._flexible_plant().ne)])
        J = ch.frame_jacobian(arm.chain, arm.chain_data, q, arm.chain.nb - 1, geom.p_B6oEo_B6)[:, 6:]
        K = arm._K_a.copy()
        k_j = arm.joint_stiffness
        K[:N_JOINTS, :N_JOINTS] = np.diag(1.0 / (1.0 / k_j + 1.0 / sv.hold_stiffness(arm.servo_p)))
        gamma = J @ np.linalg.solve(K, J.T)              # O = W here: the base at X_OS
        beta, what = float(np.min(arm._c_gear / k_j)), "gear springs and flexible booms"
    else:
        beams = () if arm.params.flexibility == "joints" else arm.beams
        gamma = fx.arm_flexibility(np.array([*ps, pE]), np.array(us), beams, arm.joint_stiffness)
        beta, what = arm.beta, "servo springs"
    orb, pay = table_values(config, "orbiter"), table_values(config, "payload")  # the owners' keys and defaults
    mO, IO = float(orb["mass"]), np.asarray(orb["inertia"], dtype=float)
    IO = np.diag(IO) if IO.shape == (3,) else IO
    mT, IT = payload_mass_properties(config)
    R_WO = sp.pose_from_vector(orb["X_WO"])[:3, :3]
    X_WT = sp.pose_from_vector(pay["X_WT"])
    R_OT = R_WO.T @ X_WT[:3, :3]
    p_TG_O = R_OT @ sp.pose_from_vector(pay["X_TG"])[:3, 3]  # payload CoM -> G (= E), in O
    f, _ = fx.modes_two_body(mO, IO, np.asarray(pE), mT, R_OT @ IT @ R_OT.T, p_TG_O, gamma)
    w = 2.0 * math.pi * float(f[-1])
    k = mT * w * w
    return [StiffCoupling(f"grappled payload on the arm's {what} (stiffest mode)", WRENCH, "payload/state",
                          k, beta * k, 0.0, mT)]


def ports(config: dict[str, Any], name: str) -> ServicePorts:
    """The arm's ports, before it is built (:mod:`protocol.config`)."""
    return ServicePorts("model", INPUTS, OUTPUTS)
