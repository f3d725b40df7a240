"""The contact service: integrates the payload; capture, rigidize, berthing contact, latches, HIL contact.

Ownership (DESIGN §2): this service integrates the payload T (``dynamics.rigid_body``)
and computes every force between the payload and the orbiter other than the arm's:
the snare at capture, the berthing contact of the payload's trunnions/pins against the
orbiter's latch surfaces, the closed latches, or the rig's measured wrench in HIL runs.
Each is applied to the payload here and, equal and opposite, to the orbiter through the
``contact/wrench`` flow (``F_Lo_W`` at ``p_WoLo_W``).

Momentum bookkeeping
--------------------
- Continuous forces follow the runtime's flow rule: the wrench computed at the end of a
  step (states at ``t``) is published stamped ``t`` and held over ``[t, t + h)``; the
  payload applies the opposite of exactly that value over the same interval. The arm's
  ``F_Eo_W`` samples are applied over their intervals (``Inputs.flow``). Every wrench is
  referred to W's origin and then to the payload's mean CoM over the step
  (:func:`dynamics.rigid_body.wrench_about_mean_com`), so the linear impulse and the angular
  impulse about Wo received by the payload are exactly the opposite of those the
  orbiter receives.
- An impulsive event (plastic capture, impulsive contact) at the end of a step changes
  the payload's velocity at once and is published as ``impulse / h`` for exactly one
  step (stamped that instant, held over the next ``h``), so the orbiter receives the
  same impulse within one contact step.
- The orbiter's state is known from ``orbiter/state`` (period H ≥ h): the sample at
  ``t_s`` is propagated with its published accelerations to the instant needed, plus the
  velocity jumps of impulses this service published since ``t_s`` (which that sample
  cannot yet contain). Its position is not corrected for them (an error ≤ Δv·H).
- All of this is exact in lockstep. In realtime mode a consumer holds only the latest
  flow sample, so a one-step impulse sample can be missed or counted twice by the
  orbiter: momentum is then conserved only approximately.

Capture (end effector E vs grapple fixture G)
---------------------------------------------
On an ``operator/command`` event with ``cmd = "capture"`` (or ``kind = "capture"``) the
envelope is checked (:func:`dynamics.contact.capture_check`: lateral and axial offset,
tilt and roll misalignment, relative rates). Outside: a ``miss`` event with the reason.
Inside, the snare closes. With the arm's brakes on (joint resistance mu = I) the massless
arm makes E rigid with the orbiter and the snare is a plastic 6-DOF impact of payload and
orbiter at Eo (:func:`dynamics.contact.plastic_lock`, Yoshida seed 000 eqs. 26–28);
the relative twist at Eo is then zero. With the brakes off a massless arm transmits no
impulse: the snare closes without one (the arm's servos then take up the relative
motion). ``capture = "compliant"`` instead closes the snare as a short compliant
transient: a spring–damper (``[contact.snare]``) pulls G onto E (E held at its capture
pose in O) until rigidize, its reaction going to the orbiter like any contact force.
After ``rigidize_delay`` a ``rigidize`` event carries the frozen ``X_EG``; the arm then
holds the payload (``arm/wrench``). ``cmd = "release"`` ends the grapple.
E's pose is ``X_WO X_OE`` with the orbiter's pose now and the arm's latest ``X_OE``; its
velocity the arm's ``V_WE_W`` if present and the brakes are off, else the orbiter's rigid
motion at Eo (exact with brakes on). The impulsive capture assumes the massless arm
(``[arm] model = "massless"``): with the multibody arm part of the impulse would go into
its links (Ex-GIT G* with mu, :func:`dynamics.exgit.collision`), which this service does
not model.

Berthing contact (payload points vs orbiter latch surfaces)
-----------------------------------------------------------
Points ``points_B`` of the berthing interface B against bounded planes given in the latch
frame L (``[[contact.surfaces]]``). ``berthing = "compliant"``: Hunt–Crossley normal force
and regularized Coulomb friction (:func:`dynamics.contact.point_plane`) at this service's
rate (≥ 1 kHz); the force held over a step is evaluated at the step's midpoint (relative
displacement extrapolated by ``u·h/2``), which keeps the energy exchanged with the contact
second order in h. ``berthing = "impulsive"``: an approaching point in contact gets one
impulse, by Newton restitution and Coulomb friction (``impulsive_law = "restitution"``,
:func:`dynamics.impact.point_impact`) or Cyril's ``r_E``, ``r_f``
(``"cyril"``, :func:`dynamics.impact.nonplastic_impact_payload`, the orbiter as the chaser).
The surfaces are evaluated in L on Python floats (:func:`dynamics.contact.point_plane_rows`);
a payload point is tested only when it is inside a bounding sphere of its guide's surfaces
(:data:`BOUND_MARGIN`), and the whole interface is skipped when the payload is far from
every guide. Latches close when a trunnion is in contact (seated), the pose of B in L is
within ``[contact.latch]`` tolerances of the berthed pose and the relative rates are small
(``latch_start``). Real berthing latches then draw the trunnions home: the payload is held by a
stiff 6-DOF latch spring–damper (:func:`dynamics.contact.latch_wrench_rows`) whose set point
moves, over ``close_time``, from the pose where the latches closed to the berthed ``X_LB``
along a rest-to-rest quintic (:class:`dynamics.contact.LatchDrive`; its rate is in the
damper's reference). Once the stroke is over and B is within ``final_position`` and
``final_angle`` of ``X_LB``, the latches are closed (``latch``) and keep holding B there.
The latch wrench is a contact force like the others: its reaction goes to the orbiter
through ``contact/wrench``, so momentum stays exact through the stroke. ``close_time = 0``
gives no stroke: the latches hold B where they closed (``latch`` at once).

The latches as a constraint (``[contact.latch] model = "constraint"``): from ``latch_start`` on,
B is welded to the set point instead of sprung to it, and with the arm still holding the
payload the orbiter–arm–payload–latch loop is a closed kinematic chain (seed 004, closed
chains with drift correction). Across processes the loop closes through the exchanged
wrenches: the arm's ``arm/wrench`` (its servo springs, or its own chain with flexible booms)
on one side, the weld's wrench here on the other. Each contact step solves the loop's
constraint for the one body this service integrates — the payload's accelerations under
every other wrench (the arm's of the last step, the guides', the orbit) are made those of the
set point (the orbiter's latch frame carried by its sample's accelerations, plus the stroke's
own), with Baumgarte's correction ``latch.baumgarte`` (α = β, 1/s)
(:func:`dynamics.contact.latch_constraint_wrench_rows`) — and the orbiter receives the
opposite, as every contact force, so momentum stays exact. What it costs: the orbiter's
share of the loop's motion reaches the payload one coupling interval late (its sample's
acceleration is that of the interval before), so the weld holds B on L to the prediction
error, corrected by Baumgarte (the default scenario: 0.2 µm and 0.03 µrad latched and
grappled, against 10 µm and 6 µrad with the spring); and the acceleration fed forward makes
``contact/wrench`` an algebraic loop of gain m_payload/m_orbiter at the latch (0.14 here),
which diverges at any coupling above 1, while Baumgarte's feedback is a spring of ``m β²``
on the coupling: both are declared to :mod:`protocol.stability` (:func:`stiff_couplings`).
:attr:`ContactContext.latch_error` is the weld's pose error the last step saw.

The adaptive step
-----------------
The service keeps its port period (1 kHz) and publishes the same samples at the same coupling instants, but the
payload is integrated at that period only where contact is possible. At the end of each evaluated step with no
contact (nothing active, not berthed, no snare, no impulse, the model's contact) a conservative no-contact bound
is computed (:meth:`ContactModel._coast_bound`): for each payload point with guide surfaces, how far it may move
with every surface still unable to act (:func:`dynamics.contact.surface_slack`: in front of the plane, behind its
catch depth or beside its footprint; or outside its guide's sphere), its speed relative to L, and a bound on that
speed's rate (the payload's acceleration under twice the arm's present wrench and the orbit, its angular
acceleration and centripetal terms at the point, the orbiter's twice-sampled accelerations, centripetal and
Coriolis terms, plus :data:`COAST_ACCEL_FLOOR`); with :data:`COAST_POS_FLOOR` and the orbiter's prediction error
taken off the slack, :func:`dynamics.contact.reach_time` gives the time no point can reach a surface in (less one
step for the contact's ``h/2`` lead; at most :data:`COAST_MAX`). The following steps ending within it *coast*:
they only record the arm's wrench over their interval and publish a zero contact wrench, unless
``payload/state`` is due at their end, an operator command arrives, the arm's wrench exceeds twice the bound's
(force or moment about the CoM) or an orbiter sample exceeds its accelerations. The next evaluated step first
integrates the coasted interval — each piece of constant arm wrench in one RK4 step (at most :data:`COAST_STEP`),
its moment referred to the CoM's mean over the piece, so the angular impulse about Wo stays exact — then steps as
before. So in free flight the payload takes the coupling step of ``payload/state`` (10 ms in the default scenario:
one RK4 step over 9 ms and the evaluated 1 ms step), and the fine step resumes on the 1 kHz grid before any
surface can act: the first contact falls on the same step as with the fixed step. RK4's error at 10 ms in free
flight (body and orbital rates ~1e-3 rad/s) is ~(ωH)⁵ ≈ 1e-25 per step; what differs from the fixed step is the
hold of the arm's moment about the moving CoM (1e-11 rad of attitude in 0.5 s at 1 cm/s, 23 N), which the stiff
contact then carries into the first steps of a contact at 1e-5 of its force. With ``source = "hil"``,
``[contact] adaptive = false``, a berthing contact that does not declare where it cannot act
(``coasting``: ``"footprint"`` for :func:`dynamics.contact.point_plane_rows`'s, ``"front"`` for the distance
in front of each surface beyond :data:`BOUND_MARGIN`), or without a ``payload/state`` coupling longer than the
step (a model stepped without a shell), every step is evaluated, as before. ``contact/wrench``'s point at a
coasting step is L's origin at the end of the step that gives the coupling interval its last value (the point the
published mean is referred to, exact), predicted once per interval from the orbiter sample that step sees (the
wrench is zero). ``context.body`` is the payload at the last evaluated step, ``context.pending`` the
intervals coasted through since (none after a step ending at a ``payload/state`` coupling instant: that step is
always evaluated); :meth:`ContactModel.payload` integrates them without changing the context. A tool that sets
``context.body`` (a sweep's change of the payload's state) ends the coasting: the bound was computed for the body it
replaced (``_Coast.body``), so the next step drops the intervals not yet integrated and the bound, and is evaluated
from the new body.

The runtime takes the coasting steps as strides (:mod:`protocol.service`, "Strides"): while a bound holds,
:meth:`ContactModel.stride` offers the steps from the next one that coast with its inputs — ``orbiter/state`` and
``arm/wrench`` samples within the bound (checked once per sample), no operator command — up to the bound's end, the
step before ``payload/state`` is due and the step that gives a ``contact/wrench`` coupling interval its last
value, and the scheduler takes them as one step: one interval of coasting, the same sums as step by step. In the
default scenario a 10 ms interval of free flight is then two calls instead of ten (a stride of 9 ms from the
coupling instant, where the new samples come, and the evaluated step).

Strategies
----------
The capture, the berthing contact and the latches are small strategy objects behind narrow interfaces
(:class:`CaptureModel`, :class:`BerthingContact`, :class:`LatchModel`), picked by their config value from a
registry: :data:`CAPTURE_MODELS` by ``capture``, :data:`BERTHING_CONTACTS` by ``berthing`` (the impulsive
contact's impulse from :data:`IMPULSIVE_LAWS` by ``impulsive_law``), :data:`LATCH_MODELS` by
``[contact.latch] model``. :class:`ContactModel` composes the three. A strategy holds parameters only: the state
stays in :class:`ContactContext`, which the service passes to each of its calls with the service itself (``svc, c``),
and it declares the stiff couplings it closes with the orbiter
(:func:`stiff_couplings` gathers them). The registered values are the keys' allowed values; a new model is one
factory and one :func:`register` call (docs/contact_models.md). They live here, not in ``dynamics``: they apply
impulses and wrenches through this service's momentum bookkeeping, change its context and declare
:class:`protocol.stability.StiffCoupling`, none of which ``dynamics`` may import; the physics they call is in
:mod:`dynamics.contact` and :mod:`dynamics.impact`. (``services`` holds service modules only, so they are not a
module of their own.)

HIL contact (``source = "hil"``)
--------------------------------
The berthing wrench is ``hil/feedback.F_Bo_B`` (the rig's measured wrench on the payload's
berthing interface, about Bo, in B), rotated into W. A sample that is flagged invalid,
not finite, older than ``hil_max_age`` (simulation time since its stamp plus its
measured ``delay_s``), or beyond the sensor range (``hil_force_max``, ``hil_torque_max``)
is refused: the model's wrench is used instead and an ``hil_fallback`` event gives the
reason (``hil_restored`` when samples are accepted again).

Events on ``contact/event``: ``first_contact``, ``rebound``, ``capture``, ``miss``,
``rigidize``, ``latch_start``, ``latch``, ``release``, ``hil_fallback``, ``hil_restored``; each with
``t`` [s], ``t_ns``, ``V_rel_pre_W`` and ``V_rel_post_W`` (payload twist minus orbiter
(or E) twist at the event's point, [ω; v]) and ``impulse_Wo_W`` (impulse on the payload,
[∫τ about Wo; ∫f]), plus event-specific fields (``latch_start`` and ``latch``: ``X_LB``, the
pose of B in L then, ``misalignment_m`` [m] and ``misalignment_rad`` [rad] from the berthed
pose, ``close_time`` [s]; ``latch`` also ``X_LB_start``).

:class:`ContactParams` is ``[contact]`` parsed once (frozen, units in its fields' metadata, :mod:`protocol.params`;
its sub-tables :class:`EnvelopeParams`, :class:`LatchParams`, :class:`SnareParams`, each surface a
:class:`SurfaceParams`); :data:`PARAMS` names it for :mod:`protocol.registry`.

Config (poses as ``[x, y, z, θx, θy, θz]``, m and rotation vector rad)::

    [payload]
    mass = 12000.0
    inertia = [1.0e5, 1.5e5, 1.5e5]       # kg·m², principal or 3×3, about the CoM in T
    X_WT = [0, 0, 0, 0, 0, 0]             # initial pose
    v_WTo_W = [0, 0, 0]
    w_WT_T = [0, 0, 0]
    X_TG = [0, 0, 0, 0, 0, 0]             # grapple fixture G in T
    X_TB = [0, 0, 0, 0, 0, 0]             # berthing interface B in T
    points_B = [[0, 2, 0], [0, -2, 0]]    # trunnions / guide pins in B, m

    [contact]
    rigidize_delay = 0.5                  # s from capture to rigidize
    capture = "impulsive"                 # impulsive (plastic lock, brakes on) | compliant (snare spring)
    berthing = "compliant"                # compliant | impulsive
    k = 2.0e5                             # N/m^exponent
    exponent = 1.0
    alpha = 0.5                           # s/m, Hunt–Crossley damping factor
    mu_s = 0.3
    mu_k = 0.2
    v_stick = 0.002                       # m/s
    impulsive_law = "restitution"         # restitution | cyril
    restitution = 0.5
    mu = 0.3                              # Coulomb coefficient of the impulsive law
    r_E = 0.5
    r_f = 0.5
    source = "model"                      # model | hil
    hil_max_age = 0.05                    # s
    hil_force_max = 5000.0                # N, per component
    hil_torque_max = 1000.0               # N·m, per component
    adaptive = true                       # the adaptive step (above); false: every 1 kHz step evaluated
    [contact.envelope]                    # dynamics.contact.CaptureEnvelope fields
    lateral = 0.10
    [contact.latch]                       # LatchCriteria fields, the latch spring–damper and stroke
    X_LB = [0, 0, 0, 0, 0, 0]             # berthed pose of B in L
    position = 0.02
    close_time = 5.0                      # s, the stroke drawing B home (0: hold B where the latches closed)
    model = "spring"                      # spring (the spring-damper below) | constraint (a weld, Baumgarte)
    baumgarte = 20.0                      # 1/s, the weld's drift correction α = β (model = "constraint")
    final_position = 0.001                # m, closed once B is this near X_LB after the stroke
    final_angle = 0.001745                # rad (0.1°)
    k_lin = 1.0e7                         # N/m
    k_rot = 1.0e8                         # N·m/rad
    c_lin = 2.0e5                         # N·s/m
    c_rot = 2.0e6                         # N·m·s/rad
    [contact.snare]                       # compliant capture: spring–damper pulling G onto E
    k_lin = 2.0e5                         # N/m
    k_rot = 2.0e6                         # N·m/rad
    c_lin = 9.0e4                         # N·s/m   (about critical for a 12 t payload)
    c_rot = 5.0e5                         # N·m·s/rad (about critical for 3e4 kg·m²)
    [[contact.surfaces]]
    point = 0                             # index into payload.points_B
    p_LoSo_L = [0, 2, 0]                  # a point of the plane, in L
    n_L = [0, 0, 1]                       # outward normal, in L
    radius = 0.2                          # m, footprint
    depth = 0.1                           # m, catch depth
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, NamedTuple, Protocol

import numpy as np
from numpy.typing import NDArray

from dynamics import contact as dc
from dynamics import impact as im
from dynamics import kernel_module
from dynamics import rigid_body as rb
from dynamics import spatial as sp
from dynamics.cases import PAYLOAD_MASS
from dynamics.orbit import CircularOrbit
from dynamics.spatial import pose, pose_from_vector, pose_inverse, rotate_spatial
from errors import BerthsimError, ConfigError, NoSolutionError
from protocol.config import check_table, check_values, table_values
from protocol.coupling import Schedule
from protocol.messages import BOOL, EVENTS, TopicSchema, f8
from protocol.params import from_values, param
from protocol.service import Inputs, Port, ServicePorts
from protocol.stability import StiffCoupling

__all__ = ["BERTHING_CONTACTS", "CAPTURE_MODELS", "IMPULSIVE_LAWS", "LATCH_MODELS", "PARAMS", "TABLES", "TABLE_KEYS",
           "TOPICS", "BerthingContact", "CaptureModel", "CompliantContact", "ContactContext", "ContactModel",
           "ContactParams", "EnvelopeParams", "Grasp", "ImpulsiveContact", "LatchModel", "LatchParams", "SnareParams",
           "SurfaceParams", "build", "hil_refusal", "ports", "register", "stiff_couplings", "validate"]

Array = NDArray[np.float64]

TABLES = ("payload", "contact", "orbiter")

TOPICS: Mapping[str, TopicSchema] = {
    # Payload (target) CoM To in W; body rates in T.
    "payload/state": TopicSchema("berthsim.PayloadState", 1, "state", {
        "p_WoTo_W": f8(3),
        "quat_WT": f8(4),
        "w_WT_T": f8(3),
        "v_WTo_W": f8(3),
        "a_WTo_W": f8(3),
        "wdot_WT_T": f8(3),
        "grappled": BOOL,
        "berthed": BOOL,
    }),
    # Contact wrench on the orbiter at Lo (the payload receives the opposite).
    "contact/wrench": TopicSchema("berthsim.ContactWrench", 2, "flow", {
        "F_Lo_W": f8(6),
        "p_WoLo_W": f8(3),
        "active": BOOL,
        "F_peak": f8(2),  # [max |τ about Lo|, max |f|] over the coupling interval (derived)
    }, wrenches=(("F_Lo_W", "p_WoLo_W"),), derived={"F_peak": ("F_Lo_W", "wrench_max")}),
    "contact/event": TopicSchema("berthsim.ContactEvent", 1, "event", {"events": EVENTS}),
}
"""The topics the contact service produces: the payload's state, the contact wrench and its events
(:mod:`protocol.registry` registers them)."""

_Num = (int, float)
_VEC3 = ("vec", 3)
_VEC6 = ("vec", 6)

PAYLOAD_KEYS: dict[str, tuple[Any, Any]] = {
    "mass": (_Num, PAYLOAD_MASS),
    "inertia": ("inertia", [1.0e5, 1.5e5, 1.5e5]),
    "X_WT": (_VEC6, [0.0] * 6),
    "v_WTo_W": (_VEC3, [0.0] * 3),
    "w_WT_T": (_VEC3, [0.0] * 3),
    "X_TG": (_VEC6, [0.0] * 6),
    "X_TB": (_VEC6, [0.0] * 6),
    "points_B": ("list", []),
}
CONTACT_KEYS: dict[str, tuple[Any, Any]] = {
    "rigidize_delay": ("nonnegative", 0.5),
    "capture": ((), "impulsive"),      # the values: CAPTURE_MODELS's (register)
    "berthing": ((), "compliant"),     # BERTHING_CONTACTS's
    "k": (_Num, 2.0e5),
    "exponent": (_Num, 1.0),
    "alpha": (_Num, 0.5),
    "mu_s": (_Num, 0.3),
    "mu_k": (_Num, 0.2),
    "v_stick": (_Num, 0.002),
    "impulsive_law": ((), "restitution"),  # IMPULSIVE_LAWS's
    "restitution": (("range", 0.0, 1.0), 0.5),
    "mu": ("nonnegative", 0.3),
    "r_E": ("nonnegative", 0.5),
    "r_f": ("nonnegative", 0.5),
    "source": (("model", "hil"), "model"),
    "hil_max_age": ("nonnegative", 0.05),
    "hil_force_max": ("nonnegative", 5000.0),
    "hil_torque_max": ("nonnegative", 1000.0),
    "surfaces": ("list", []),
    "adaptive": (bool, True),
}
LATCH_SPRING: dict[str, float] = {"k_lin": 1.0e7, "k_rot": 1.0e8, "c_lin": 2.0e5, "c_rot": 2.0e6}
LATCH_DRIVE: dict[str, float] = {"close_time": 5.0, "final_position": 0.001, "final_angle": 0.001745}
SNARE_SPRING: dict[str, float] = {"k_lin": 2.0e5, "k_rot": 2.0e6, "c_lin": 9.0e4, "c_rot": 5.0e5}
ENVELOPE_KEYS: dict[str, tuple[Any, Any]] = {f.name: (_Num, f.default) for f in fields(dc.CaptureEnvelope)}
"""``[contact.envelope]``: the :class:`dynamics.contact.CaptureEnvelope` fields."""
LATCH_KEYS: dict[str, tuple[Any, Any]] = {
    **{f.name: (_Num, f.default) for f in fields(dc.LatchCriteria)},
    **{k: ("nonnegative", v) for k, v in (LATCH_SPRING | LATCH_DRIVE).items()},
    "X_LB": (_VEC6, [0.0] * 6),
    "model": ((), "spring"),  # LATCH_MODELS's (register)
    "baumgarte": ("positive", 20.0),  # 1/s
}
"""``[contact.latch]``: the :class:`dynamics.contact.LatchCriteria` fields, the latch spring–damper and stroke."""
SNARE_KEYS: dict[str, tuple[Any, Any]] = {k: ("nonnegative", v) for k, v in SNARE_SPRING.items()}
"""``[contact.snare]``: the snare's spring–damper."""
CONTACT_KEYS["envelope"] = (ENVELOPE_KEYS, None)
CONTACT_KEYS["latch"] = (LATCH_KEYS, None)
CONTACT_KEYS["snare"] = (SNARE_KEYS, None)
TABLE_KEYS = {"payload": PAYLOAD_KEYS, "contact": CONTACT_KEYS}
"""The tables the contact service owns (it reads ``[orbiter]`` with the orbiter's own keys and defaults,
:func:`protocol.config.table_values`; the orbiter checks it)."""
SURFACE_KEYS: dict[str, tuple[Any, Any]] = {
    "point": (int, 0),
    "p_LoSo_L": (_VEC3, [0.0] * 3),
    "n_L": (_VEC3, [0.0, 0.0, 1.0]),
    "radius": (_Num, float("inf")),
    "depth": (_Num, float("inf")),
}
"""``[[contact.surfaces]]``: one latch guide's wall, each table checked on its own (:func:`_parse`)."""


@dataclass(frozen=True)
class EnvelopeParams:
    """``[contact.envelope]`` (:data:`ENVELOPE_KEYS`): the :class:`dynamics.contact.CaptureEnvelope` fields."""

    lateral: float = param("m")                   # largest offset of Go from E's x axis
    axial: float = param("m")                     # largest |x| of Go in E (snare depth)
    tilt: float = param("rad")                    # largest angle between E's and G's x axes
    roll: float = param("rad")                    # largest roll misalignment about the axis
    rate_lin: float = param("m/s")                # largest relative translational rate of G from E
    rate_ang: float = param("rad/s")              # largest relative angular rate


@dataclass(frozen=True)
class LatchParams:
    """``[contact.latch]`` (:data:`LATCH_KEYS`): the :class:`dynamics.contact.LatchCriteria` fields, the latch
    spring–damper, the stroke and the latch model."""

    position: float = param("m")                  # largest distance of Bo from its berthed position
    angle: float = param("rad")                   # largest rotation of B from its berthed attitude
    rate_lin: float = param("m/s")                # largest relative rates of B in L
    rate_ang: float = param("rad/s")
    k_lin: float = param("N/m")
    k_rot: float = param("N·m/rad")
    c_lin: float = param("N·s/m")
    c_rot: float = param("N·m·s/rad")
    close_time: float = param("s")                # the stroke drawing B home (0: B held where the latches closed)
    final_position: float = param("m")            # closed once B is this near X_LB after the stroke
    final_angle: float = param("rad")
    X_LB: tuple[float, ...] = param("m, rad")     # (6,) the berthed pose of B in L, [x, y, z, θx, θy, θz]
    model: str = param("-")                       # LATCH_MODELS's: "spring" | "constraint" | a registered one
    baumgarte: float = param("1/s")               # the weld's drift correction α = β (model = "constraint")


@dataclass(frozen=True)
class SnareParams:
    """``[contact.snare]`` (:data:`SNARE_KEYS`): the compliant capture's spring–damper pulling G onto E."""

    k_lin: float = param("N/m")
    k_rot: float = param("N·m/rad")
    c_lin: float = param("N·s/m")
    c_rot: float = param("N·m·s/rad")


@dataclass(frozen=True)
class SurfaceParams:
    """One ``[[contact.surfaces]]`` table (:data:`SURFACE_KEYS`): a bounded plane in L."""

    point: int = param("-")                       # index into payload.points_B
    p_LoSo_L: tuple[float, ...] = param("m")      # (3,) a point of the plane, in L
    n_L: tuple[float, ...] = param("1")           # (3,) outward normal in L, as configured (normalized on use)
    radius: float = param("m")                    # footprint
    depth: float = param("m")                     # catch depth


@dataclass(frozen=True)
class ContactParams:
    """``[contact]``, parsed once (:data:`CONTACT_KEYS`; the module docstring says what each key does). Each
    field's unit is in its metadata (:func:`protocol.params.units`); vectors are tuples of floats. A model
    registered with its own table (:func:`register` with ``keys``) reads ``[contact.<value>]`` from the parsed
    config's ``v["contact"]``, not from here."""

    rigidize_delay: float = param("s")            # from capture to rigidize
    capture: str = param("-")                     # CAPTURE_MODELS's: "impulsive" | "compliant"
    berthing: str = param("-")                    # BERTHING_CONTACTS's: "compliant" | "impulsive"
    k: float = param("N/m^exponent")              # Hunt–Crossley stiffness
    exponent: float = param("1")
    alpha: float = param("s/m")                   # Hunt–Crossley damping factor
    mu_s: float = param("1")
    mu_k: float = param("1")
    v_stick: float = param("m/s")
    impulsive_law: str = param("-")               # IMPULSIVE_LAWS's: "restitution" | "cyril"
    restitution: float = param("1")
    mu: float = param("1")                        # Coulomb coefficient of the impulsive law
    r_E: float = param("1")
    r_f: float = param("1")
    source: str = param("-")                      # "model" | "hil"
    hil_max_age: float = param("s")
    hil_force_max: float = param("N")             # per component
    hil_torque_max: float = param("N·m")          # per component
    surfaces: tuple[SurfaceParams, ...] = param("-")
    adaptive: bool = param("-")                   # the adaptive step; false: every step evaluated
    envelope: EnvelopeParams = param("-")         # [contact.envelope]
    latch: LatchParams = param("-")               # [contact.latch]
    snare: SnareParams = param("-")               # [contact.snare]

    @classmethod
    def from_table(cls, con: Mapping[str, Any]) -> ContactParams:
        """From ``[contact]``'s checked values (:func:`protocol.config.check_table` with :data:`CONTACT_KEYS`):
        each surface that is a table with :data:`SURFACE_KEYS`'s defaults filled in (a bad value reads as its
        default, one that is not a table is left out: :func:`validate` lists both).

        Raises
        ------
        TypeError, ValueError
            If a value does not convert (a configuration :func:`validate` refuses).
        """
        surfaces = [check_values(x, f"contact.surfaces[{i}]", SURFACE_KEYS, [])
                    for i, x in enumerate(con["surfaces"]) if isinstance(x, dict)]
        return from_values(cls, {**con, "surfaces": surfaces})


PARAMS = ContactParams
"""The kind's declared parameters (:mod:`protocol.registry`): ``[contact]``."""



# ---------------------------------------------------------------- the strategies' interfaces and their registry
class CaptureModel(Protocol):
    """What the snare does from the capture to rigidize (``[contact] capture``).

    Stateless: every parameter is read at construction from the parsed config (:func:`_parse`'s values), the
    state it changes is the service's context ``c`` (:class:`ContactContext`), passed to each call with the
    service ``svc``."""

    def close(self, svc: ContactModel, c: ContactContext, grasp: Grasp, t_ns: int,
              h_ns: int) -> tuple[Array, float, Array]:
        """The snare closes on G at ``t_ns`` (the envelope is met): the impulse given to the payload about Wo
        (6,) [N·m·s, N·s], the energy it dissipated [J] and the relative twist at Eo after it (6,), ``[ω; v]``."""
        ...

    def snare_wrench(self, svc: ContactModel, c: ContactContext) -> list[float] | None:
        """While grappled and not rigidized: the snare's wrench on the payload about Wo (six floats) [N·m, N] at the
        step's end (:meth:`ContactModel.orbiter_at_now`), or None if it applies none."""
        ...

    def couplings(self, v: Mapping[str, Any]) -> list[StiffCoupling]:
        """The springs it closes with the orbiter (:func:`stiff_couplings`), from the parsed config."""
        ...


class BerthingContact(Protocol):
    """The payload's points against the orbiter's guide surfaces (``[contact] berthing``).

    ``impulsive``: the contact acts by impulses (applied inside :meth:`contact`, summed in
    ``c.episode_impulse``), so a contact episode keeps what they gave it; else by a wrench held over the
    next step, and an episode's impulse starts from zero at its first contact."""

    impulsive: bool

    def contact(self, svc: ContactModel, c: ContactContext, kT: _Kin, kO: _Kin, p_L: list[float],
                R_WL: tuple[float, ...], t_ns: int, h_ns: int) -> tuple[list[float], float, bool, _Kin, _Kin]:
        """The wrench on the payload about Wo (six floats) [N·m, N] to hold over the next step, the power the
        contact dissipates [W], whether any surface acts, and the bodies' kinematics (renewed after an impulse).
        ``p_L``, ``R_WL``: L's origin and rotation rows in W. The points near their guides:
        :meth:`ContactModel.near_guides`."""
        ...

    def couplings(self, v: Mapping[str, Any]) -> list[StiffCoupling]:
        """The springs it closes with the orbiter (:func:`stiff_couplings`), from the parsed config."""
        ...


class LatchModel(Protocol):
    """What holds B on the latches' set point once they close (``[contact.latch] model``)."""

    def wrench(self, svc: ContactModel, c: ContactContext, t_drive: float, kT: _Kin, kO: _Kin, p_B: list[float],
               R_WB: tuple[float, ...], p_WR: list[float], R_WR: tuple[float, ...], V_R: list[float],
               R_WL: tuple[float, ...], v_R: list[float], w_R: list[float], F_other_Wo: list[float]) -> list[float]:
        """The latches' wrench on the payload about Bo (six floats) [N·m, N]: B (``p_B``, ``R_WB`` in W) held on the
        set point R (``p_WR``, ``R_WR``, its twist ``V_R`` at Bo in W; its own rate ``v_R``, ``w_R`` in L, the
        stroke ``t_drive`` [s] old); ``F_other_Wo`` every other wrench on the payload, about Wo."""
        ...

    def couplings(self, v: Mapping[str, Any]) -> list[StiffCoupling]:
        """The springs it closes with the orbiter (:func:`stiff_couplings`), from the parsed config."""
        ...


ImpulsiveLaw = Callable[["ContactModel", "ContactContext", rb.RigidBodyState, Array, Array], "Array | None"]
"""``(svc, c, orbiter, p_C, n_W) -> P_W``: the impulse (3,) [N·s] on the payload (``c.body``) at C (in W) for an
approaching point, ``n_W`` the normal from the orbiter to the payload; None if there is none."""

CAPTURE_MODELS: dict[str, Callable[[Mapping[str, Any]], CaptureModel]] = {}
"""``[contact] capture`` value -> the strategy's factory (its class), called with the parsed config."""
BERTHING_CONTACTS: dict[str, Callable[[Mapping[str, Any]], BerthingContact]] = {}
"""``[contact] berthing`` value -> factory."""
IMPULSIVE_LAWS: dict[str, ImpulsiveLaw] = {}
"""``[contact] impulsive_law`` value -> the impulse of an impulsive berthing contact."""
LATCH_MODELS: dict[str, Callable[[Mapping[str, Any]], LatchModel]] = {}
"""``[contact.latch] model`` value -> factory."""
_CHOICES: dict[str, tuple[dict[str, Any], dict[str, tuple[Any, Any]], str]] = {
    "capture": (CAPTURE_MODELS, CONTACT_KEYS, "capture"),
    "berthing": (BERTHING_CONTACTS, CONTACT_KEYS, "berthing"),
    "impulsive_law": (IMPULSIVE_LAWS, CONTACT_KEYS, "impulsive_law"),
    "latch": (LATCH_MODELS, LATCH_KEYS, "model"),
}


def register(choice: str, value: str, factory: Any, keys: Mapping[str, tuple[Any, Any]] | None = None) -> None:
    """Make ``value`` a config value of ``choice`` picking ``factory``.

    Parameters
    ----------
    choice : str
        ``"capture"`` (:data:`CAPTURE_MODELS`), ``"berthing"`` (:data:`BERTHING_CONTACTS`), ``"impulsive_law"``
        (:data:`IMPULSIVE_LAWS`) or ``"latch"`` (:data:`LATCH_MODELS`, the key ``[contact.latch] model``).
    value : str
        The config value; from now on accepted by :func:`validate`.
    factory : callable
        The strategy's class (or any callable) taking :func:`_parse`'s values, or an :data:`ImpulsiveLaw`.
    keys : mapping, optional
        The strategy's own parameters, key -> (kind, default) as in :func:`protocol.config.check_values`: the
        sub-table ``[contact.<value>]``, read as ``v["contact"][value]``.

    Raises
    ------
    ConfigError
        If ``choice`` is unknown, ``value`` already registered, or ``[contact.<value>]`` already a key.
    """
    if choice not in _CHOICES:
        raise ConfigError(f"contact: choice {choice!r} unknown (known: {', '.join(_CHOICES)})")
    registry, table, key = _CHOICES[choice]
    if value in registry or (keys is not None and value in CONTACT_KEYS):
        raise ConfigError(f"contact: {choice} {value!r} is already registered or a key of [contact]")
    registry[value] = factory
    table[key] = (tuple(registry), table[key][1])
    if keys is not None:
        CONTACT_KEYS[value] = (dict(keys), None)

def _parse(config: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Every value the contact model needs, built; problems listed (each naming key and value)."""
    problems: list[str] = []
    orb = table_values(config, "orbiter")  # the orbiter's keys and defaults; it reports the table's problems
    pay = check_table(config, "payload", PAYLOAD_KEYS, problems)
    con = check_table(config, "contact", CONTACT_KEYS, problems)
    out: dict[str, Any] = {"orbiter": orb, "payload": pay, "contact": con}
    if problems:
        return out, problems
    try:
        out["model_T"] = rb.body_model("payload", pay["mass"], pay["inertia"])
    except BerthsimError as err:
        problems.append(f"payload: {err}")
    try:
        out["model_O"] = rb.body_model("orbiter", orb["mass"], orb["inertia"])
    except (BerthsimError, ValueError, TypeError) as err:
        problems.append(f"orbiter: {err}")
    pts = pay["points_B"]
    if not all(isinstance(p, list) and len(p) == 3 and all(isinstance(x, _Num) for x in p) for p in pts):
        problems.append(f"payload.points_B: expected a list of [x, y, z] points (m), got {pts!r}")
        pts = []
    out["points_B"] = np.asarray(pts, dtype=np.float64).reshape(-1, 3)
    p = out["params"] = ContactParams.from_table(con)
    try:
        out["law"] = dc.ContactLaw(p.k, p.exponent, p.alpha, p.mu_s, p.mu_k, p.v_stick)
    except BerthsimError as err:
        problems.append(f"contact: {err}")
    out["envelope"] = dc.CaptureEnvelope(**{f.name: getattr(p.envelope, f.name) for f in fields(dc.CaptureEnvelope)})
    lt = p.latch
    out["criteria"] = dc.LatchCriteria(**{f.name: getattr(lt, f.name) for f in fields(dc.LatchCriteria)})
    out["latch_spring"] = {k: getattr(lt, k) for k in LATCH_SPRING}
    out["latch_drive"] = {k: getattr(lt, k) for k in LATCH_DRIVE}
    out["latch_model"] = lt.model
    out["latch_baumgarte"] = lt.baumgarte
    out["X_LB_berthed"] = pose_from_vector(lt.X_LB) if not problems else np.eye(4)
    out["snare"] = {k: getattr(p.snare, k) for k in SNARE_SPRING}
    for i, s in enumerate(con["surfaces"]):
        if not isinstance(s, dict):
            problems.append(f"contact.surfaces[{i}]: expected a table, got {s!r}")
            continue
        sub: list[str] = []
        v = check_values(s, f"contact.surfaces[{i}]", SURFACE_KEYS, sub)
        problems.extend(sub)
        if sub:
            continue
        if not 0 <= v["point"] < len(out["points_B"]):
            problems.append(f"contact.surfaces[{i}].point: expected an index into payload.points_B "
                            f"(0..{len(out['points_B']) - 1}), got {v['point']!r}")
            continue
        if np.linalg.norm(v["n_L"]) < 1e-9:
            problems.append(f"contact.surfaces[{i}].n_L: zero normal {v['n_L']!r}")
            continue
    out["surfaces"] = [] if problems else [
        (w.point, np.asarray(w.p_LoSo_L, dtype=np.float64), n / np.linalg.norm(n), w.radius, w.depth)
        for w in p.surfaces for n in (np.asarray(w.n_L, dtype=np.float64),)]
    return out, problems


def validate(config: dict[str, Any], name: str) -> list[str]:
    """Problems of ``[payload]`` and ``[contact]``, one line each naming key and value; [] if fine."""
    return _parse(config)[1]


def _event(kind: str, t_ns: int, V_pre: Any = None, V_post: Any = None, impulse_Wo: Any = None,
           **extra: Any) -> dict[str, Any]:
    """One ``contact/event`` entry; ``V_pre``, ``V_post``, ``impulse_Wo`` six numbers each (zeros if None); an
    ndarray among ``extra`` (a pose) goes in as nested lists of floats."""
    z6 = [0.0] * 6
    ev = {"kind": kind, "t": t_ns * 1e-9, "t_ns": int(t_ns),
          "V_rel_pre_W": z6 if V_pre is None else [float(x) for x in V_pre],
          "V_rel_post_W": z6 if V_post is None else [float(x) for x in V_post],
          "impulse_Wo_W": z6 if impulse_Wo is None else [float(x) for x in impulse_Wo]}
    ev.update({k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in extra.items()})
    return ev


def hil_refusal(sample: Any, t_ns: int, max_age: float, force_max: float, torque_max: float) -> str:
    """Why a ``hil/feedback`` sample is refused ("" if it is accepted).

    Parameters
    ----------
    sample : protocol.service.Sample or None
        The held ``hil/feedback`` sample (None if there is none).
    t_ns : int
        The instant it would be used at. [ns]
    max_age : float
        Largest age, ``(t − t_sample) + delay_s``. [s]
    force_max, torque_max : float
        Sensor range per component. [N, N·m]

    Returns
    -------
    str
        The reason, naming the field and value.
    """
    if sample is None:
        return "no hil/feedback sample"
    F = rb.as_floats(sample.body["F_Bo_B"])  # (floats: a check every step, numpy's per-call cost exceeded it)
    delay = float(sample.body.get("delay_s", 0.0))
    if not all(map(math.isfinite, F)) or not math.isfinite(delay):
        return f"F_Bo_B not finite: {F}"
    if not sample.body.get("valid", False):
        return "rig flags the sample invalid (valid = false)"
    age = (t_ns - sample.t_ns) * 1e-9 + max(delay, 0.0)
    if age > max_age:
        return f"stale: age {age:.4g} s > hil_max_age {max_age:.4g} s"
    f_abs, tau_abs = max(map(abs, F[3:])), max(map(abs, F[:3]))
    if f_abs > force_max:
        return f"beyond sensor range: |f| component {f_abs:.4g} N > {force_max:.4g} N"
    if tau_abs > torque_max:
        return f"beyond sensor range: |τ| component {tau_abs:.4g} N·m > {torque_max:.4g} N·m"
    return ""


class _Kin:
    """One body's pose and motion at an instant as floats: ``p`` CoM [m], ``R`` (R_WB rows),
    ``v`` CoM velocity [m/s], ``w`` angular velocity in W [rad/s]."""

    __slots__ = ("R", "_rows", "p", "v", "w")
    p: Sequence[float]
    R: tuple[float, ...]
    v: Sequence[float]
    w: Sequence[float]

    def __init__(self, st: rb.RigidBodyState) -> None:
        x = st.floats
        self.p = x[0:3]
        self.R = st.R_rows
        self.v = x[7:10]
        self.w = sp.mat_vec_rows(self.R, x[10], x[11], x[12])
        self._rows: tuple[float, ...] | None = None

    @classmethod
    def of_floats(cls, x: tuple[float, ...]) -> _Kin:
        """From a state's thirteen floats (:attr:`dynamics.rigid_body.RigidBodyState.floats`: the quaternion unit,
        scalar ≥ 0): the same as of the state they make, without making it."""
        self = object.__new__(cls)
        self.p = x[0:3]
        self.R = sp.rotation_rows(x[3], x[4], x[5], x[6])
        self.v = x[7:10]
        self.w = sp.mat_vec_rows(self.R, x[10], x[11], x[12])
        self._rows = None
        return self

    @classmethod
    def of_rows(cls, O: tuple[float, ...]) -> _Kin:
        """From its eighteen floats (:attr:`rows`)."""
        self = object.__new__(cls)
        self.p, self.R, self.v, self.w, self._rows = O[0:3], O[3:12], O[12:15], O[15:18], O
        return self

    @property
    def rows(self) -> tuple[float, ...]:
        """``(p, R, v, w)`` as eighteen floats (the compiled kernels' body; made once)."""
        if self._rows is None:
            self._rows = (*self.p, *self.R, *self.v, *self.w)
        return self._rows

    def velocity_at(self, x: list[float]) -> list[float]:
        """Velocity of the body's material point at ``x`` (W) (:func:`dynamics.rigid_body.velocity_at`). [m/s]"""
        return rb.velocity_at_rows(self.p, self.v, self.w, x)


class _Guide:
    """The surfaces of one payload point, in L, with a sphere (in L) outside which none can act."""

    __slots__ = ("center_L", "p_ToPo_T", "point", "reach2", "surfaces")

    def __init__(self, point: int, p_ToPo_T: list[float], surfaces: list[tuple[float, ...]]) -> None:
        self.point = point
        self.p_ToPo_T = p_ToPo_T
        self.surfaces = surfaces  # (sx, sy, sz, nx, ny, nz, radius, depth), in L
        # each surface acts within `radius` of S laterally and `depth` behind it: inside the sphere
        # about S − n depth/2 of radius sqrt(radius² + (depth/2)²); the guide's sphere holds them all
        balls: list[tuple[list[float], float]] = []
        for sx, sy, sz, nx, ny, nz, radius, depth in surfaces:
            if not (math.isfinite(radius) and math.isfinite(depth)):
                balls = []
                break
            balls.append(([sx - 0.5 * depth * nx, sy - 0.5 * depth * ny, sz - 0.5 * depth * nz],
                          math.hypot(radius, 0.5 * depth)))
        if balls:
            c = [sum(b[0][k] for b in balls) / len(balls) for k in range(3)]
            r = max(math.dist(b[0], c) + b[1] for b in balls) + BOUND_MARGIN
            self.center_L, self.reach2 = c, r * r
        else:
            self.center_L, self.reach2 = [0.0, 0.0, 0.0], math.inf


BOUND_MARGIN = 0.01
"""m: a point is tested against its guide's surfaces when within this of their bounding sphere
(and against a surface only when less than this in front of it). The compliant force is
evaluated at the point extrapolated by ``u·h/2``, so the margin holds for relative speeds
below ``2 · BOUND_MARGIN / h`` (20 m/s at 1 kHz)."""


COAST_MAX = 0.1
"""s: the longest interval the payload coasts through without an evaluated step (the adaptive step); the
coupling of ``payload/state`` (10 ms in the default scenario) ends every coasting interval before."""
COAST_STEP = 0.01
"""s: the largest RK4 step of a coasting interval's integration (it takes whole pieces of constant wrench)."""
COAST_ACCEL_FLOOR = 1.0e-3
"""m/s²: added to every acceleration bound of the no-contact bound."""
COAST_POS_FLOOR = 1.0e-6
"""m: added to every displacement bound of the no-contact bound."""


def _orb_floats(c: ContactContext, sample: Any) -> list[list[float]]:
    """The ``orbiter/state`` sample's fields as floats, kept in ``c.orb_floats`` (made once per sample):
    ``p_WoOo_W``, ``v_WOo_W``, ``a_WOo_W``, ``w_WO_O``, ``wdot_WO_O``, ``quat_WO``; with them the sample as
    :func:`dynamics.contact_kernels.orbiter_kinematics` takes it (an array of 19, made when first asked for)."""
    if c.orb_floats[0] is not sample:
        b = sample.body
        c.orb_floats = (sample, [rb.as_floats(b[k]) for k in ("p_WoOo_W", "v_WOo_W", "a_WOo_W", "w_WO_O",
                                                             "wdot_WO_O", "quat_WO")], None)
    return c.orb_floats[1]


def _orb_array(c: ContactContext, sample: Any) -> Array:
    """The ``orbiter/state`` sample as :func:`dynamics.contact_kernels.orbiter_kinematics` takes it: position,
    quaternion, velocity, body rate, acceleration and its derivative (19 floats), kept with ``c.orb_floats``."""
    p0, v0, a0, w0, d0, q0 = _orb_floats(c, sample)
    arr = c.orb_floats[2]
    if arr is None:
        arr = np.array([*p0, *q0, *v0, *w0, *a0, *d0], dtype=np.float64)
        c.orb_floats = (sample, c.orb_floats[1], arr)
    return arr


class _Coast(NamedTuple):
    """The no-contact bound from an evaluated step (the adaptive step, module docstring): the payload may coast
    through the steps ending up to ``until_ns`` while each step's inputs stay within the limits it assumed.

    ``t_ns`` the evaluated instant [ns]; ``f_max`` [N] and ``tau_max`` [N·m] the largest arm force and moment about
    the payload's CoM ``p_T`` (at ``t_ns``, W) [m]; ``a_O_max`` [m/s²], ``wd_O_max`` [rad/s²] and ``H_O_ns`` the
    largest accelerations and coupling period of an ``orbiter/state`` sample; ``body`` the payload's state it was
    computed for (the context's ``body`` then, the same object: a context whose ``body`` is another one was set
    from outside, and the bound no longer holds)."""

    t_ns: int
    until_ns: int
    f_max: float
    tau_max: float
    p_T: tuple[float, float, float]
    a_O_max: float
    wd_O_max: float
    H_O_ns: int
    body: rb.RigidBodyState


def _inputs(source: str) -> tuple[Port, ...]:
    """The contact service's input ports; ``hil/feedback`` only when it is used (``source = "hil"``),
    so a model run does not wait for the rig."""
    ins = (Port("orbiter/state", "state", "predict"), Port("arm/state", "state"), Port("arm/wrench", "flow"),
           Port("operator/command", "event"))
    return ins + (Port("hil/feedback", "state"),) if source == "hil" else ins


@dataclass(slots=True)
class ContactContext:
    """Everything the contact service changes as it runs (its context, :mod:`protocol.service`); the rest of
    :class:`ContactModel` is parameters. Only ``episode_impulse`` is written in place.

    Attributes
    ----------
    body : dynamics.rigid_body.RigidBodyState
        The payload T in W at the last evaluated step (the adaptive step, module docstring: the intervals coasted
        through since are ``pending``; :meth:`ContactModel.payload` integrates them). Setting it from outside (a
        tool's change of the payload's state) ends the coasting: the next step drops ``pending`` and ``coast``.
    grappled, rigidized : bool
        The snare closed on G; rigidized.
    captured_ns : int or None
        When the snare closed. [ns]
    X_OE : ndarray, shape (4, 4), or None
        E in O at capture (the compliant snare's anchor).
    berthed, latched : bool
        The latches engaged (closing or closed); closed (the stroke done, B within the final tolerance).
    X_LB_latched : ndarray, shape (4, 4), or None
        Where the latches closed on B (the stroke's start).
    drive : dynamics.contact.LatchDrive or None
        The latches' stroke.
    latch_ns : int or None
        When the latches closed. [ns]
    latch_error : tuple of float
        The latch constraint's pose error at the last step, ``|p_B − p_R|`` [m] and ``|θ|`` [rad].
    F_cont_O_Wo, F_imp_O_Wo : list of float
        What was published for the interval starting now, on the orbiter about Wo, ``[τ; f]`` (six floats): the
        continuous wrench (held; the payload applies its opposite) and this instant's impulses / h. [N·m, N]
    F_last_T : list of float
        The wrench about the payload's CoM applied over the last step (six floats). [N·m, N]
    F_arm_Wo : list of float
        The arm's wrench on the payload over the last step, about Wo (six floats). [N·m, N]
    inflight : list of (int, ndarray)
        Impulses on the orbiter about Wo (6,) not yet in its samples, with their instants. [ns], [N·m·s, N·s]
    in_contact : bool
        A contact episode is on.
    episode_impulse : ndarray, shape (6,)
        The episode's impulse on the payload about Wo so far. [N·m·s, N·s]
    episode_V_pre : list of float
        The relative twist at Bo when the episode began, ``[ω; v]`` in W. [rad/s, m/s]
    dissipated, last_power : float
        Energy dissipated by the compliant contact so far [J] (held-power rectangle rule), and the last step's
        power [W].
    hil_reason : str or None
        Why HIL samples are being refused (None while they are accepted).
    hil_refused : int
        HIL samples refused so far.
    orb_sample, t_now : Sample or None, int
        The step's ``orbiter/state`` sample and its end instant [ns] (:meth:`ContactModel.orbiter_at_now`).
    orb_cache, orb_floats, rot_cache
        The orbiter predicted from its sample (by sample, instant and impulses in flight), the sample's fields as
        floats, and ``(R_WB, ω_W)`` of the last few states (by identity).
    coast : _Coast or None
        The no-contact bound of the last evaluated step (the adaptive step, module docstring), None when the
        payload may not coast; it holds for its own ``body`` only.
    pending : list of (int, list of float)
        The free-flight intervals not integrated yet while the payload coasts: each a duration [ns] and the arm's
        wrench on the payload about Wo held over it (six floats) [N·m, N]; ``body`` is the payload at their start.
    coast_orb : Sample or None
        The last ``orbiter/state`` sample the coasting steps checked against the bound.
    coast_p_L, coast_p_L_at : list of float, tuple or None
        ``contact/wrench``'s point while the payload coasts: L's origin in W [m] at the end of the step that gives
        the coupling interval's last value, and ``(that instant [ns], the orbiter/state sample it was predicted
        from)`` (None: to be computed; every evaluated step drops it).
    coast_arm : tuple or None
        The last coasting step's one ``arm/wrench`` sample, its overlap [ns] and its wrench about Wo, checked
        against the bound (the next step with the same sample reuses it).
    accel : tuple or None
        ``(body, F_last_T, a, wdot)``: the payload's accelerations [m/s², rad/s²] last computed, for those two
        objects (:meth:`ContactModel._accelerations`).
    """

    body: rb.RigidBodyState
    grappled: bool = False
    rigidized: bool = False
    captured_ns: int | None = None
    X_OE: Array | None = None
    berthed: bool = False
    latched: bool = False
    X_LB_latched: Array | None = None
    drive: dc.LatchDrive | None = None
    latch_ns: int | None = None
    latch_error: tuple[float, float] = (0.0, 0.0)
    F_cont_O_Wo: list[float] = field(default_factory=lambda: [0.0] * 6)
    F_imp_O_Wo: list[float] = field(default_factory=lambda: [0.0] * 6)
    F_last_T: list[float] = field(default_factory=lambda: [0.0] * 6)
    F_arm_Wo: list[float] = field(default_factory=lambda: [0.0] * 6)
    inflight: list[tuple[int, Array]] = field(default_factory=list)
    in_contact: bool = False
    episode_impulse: Array = field(default_factory=lambda: np.zeros(6))
    episode_V_pre: Any = field(default_factory=lambda: [0.0] * 6)
    dissipated: float = 0.0
    last_power: float = 0.0
    hil_reason: str | None = None
    hil_refused: int = 0
    orb_sample: Any = None
    t_now: int = 0
    orb_cache: tuple[Any, rb.RigidBodyState] | None = None
    orb_floats: tuple[Any, list[list[float]], Any] = field(default_factory=lambda: (None, [], None))
    rot_cache: list[tuple[rb.RigidBodyState, Array, Array]] = field(default_factory=list)
    coast: _Coast | None = None
    pending: list[tuple[int, list[float]]] = field(default_factory=list)
    coast_orb: Any = None
    coast_p_L: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0])
    coast_p_L_at: tuple[int, Any] | None = None
    coast_arm: tuple[Any, int, list[float]] | None = None
    accel: tuple[Any, Any, list[float], list[float]] | None = None


class ContactModel:
    """The contact service's :class:`protocol.service.ContextModel` (see the module docstring).

    Its state is a context (:class:`ContactContext`, :meth:`new_context`) the runtime holds and passes to
    :meth:`initial` and :meth:`step`, and which every method that reads or changes the state takes (``c``); the
    model's attributes are its parameters, ``[contact]``'s as parsed in :attr:`params` (:class:`ContactParams`),
    set when built and by :meth:`set_coupling` and never changed by stepping.

    Raises
    ------
    ConfigError
        If ``[payload]`` or ``[contact]`` is invalid.
    """

    outputs = (Port("payload/state", "state"), Port("contact/wrench", "flow"), Port("contact/event", "event"))

    def __init__(self, config: Mapping[str, Any], name: str, period_ns: int) -> None:
        v, problems = _parse(config)
        if problems:
            raise ConfigError("; ".join(problems), problems)
        self.name = name
        self.period_ns = int(period_ns)
        pay, orb = v["payload"], v["orbiter"]
        self.model_T: rb.RigidBodyModel = v["model_T"]
        self.model_O: rb.RigidBodyModel = v["model_O"]
        alt = float(orb["orbit_altitude"])
        self.orbit = (CircularOrbit.from_altitude(alt, gravity_gradient=bool(orb["gravity_gradient"])) if alt > 0
                      else None)
        self.X_OL = pose_from_vector(orb["X_OL"])
        self.X_TG = pose_from_vector(pay["X_TG"])
        self.X_TB = pose_from_vector(pay["X_TB"])
        self.points_B: Array = v["points_B"]
        self.law: dc.ContactLaw = v["law"]
        self.surfaces = v["surfaces"]
        self.envelope: dc.CaptureEnvelope = v["envelope"]
        self.criteria: dc.LatchCriteria = v["criteria"]
        self.latch_drive: dict[str, float] = v["latch_drive"]
        self.X_LB_berthed: Array = v["X_LB_berthed"]
        self._p_LB_berthed = self.X_LB_berthed[:3, 3].tolist()
        self.params: ContactParams = v["params"]
        p = self.params
        self.capture, self.berthing, self.latch = _strategies(v)
        # float forms of the fixed frames, and the surfaces grouped by payload point (in L)
        self._p_OL, self._R_OL = sp.pose_rows(self.X_OL)
        self._p_TB, self._R_TB = sp.pose_rows(self.X_TB)
        groups: dict[int, list[tuple[float, ...]]] = {}
        for i, p_LoSo_L, n_L, radius, depth in self.surfaces:
            groups.setdefault(i, []).append((*p_LoSo_L.tolist(), *n_L.tolist(), radius, depth))
        self._guides = [_Guide(i, sp.pose_apply_rows(self._p_TB, self._R_TB, self.points_B[i].tolist()), surf)
                        for i, surf in sorted(groups.items())]
        # one sphere (in L) holding every guide's, and the payload points' largest distance from To:
        # a payload CoM farther than their sum from its centre has no point near any guide
        gc = [g.center_L for g in self._guides]
        self._all_center_L = [sum(c[k] for c in gc) / len(gc) for k in range(3)] if gc else [0.0] * 3
        reach = max((math.dist(g.center_L, self._all_center_L) + math.sqrt(g.reach2) for g in self._guides),
                    default=-math.inf)
        rho = max((math.hypot(*g.p_ToPo_T) for g in self._guides), default=0.0)
        self._all_reach2 = (reach + rho) ** 2 if reach >= 0.0 else -1.0  # inf stays inf; no guides: always far
        bind = getattr(self.berthing, "bind", None)  # a strategy told the guides (CompliantContact: a compiled call)
        if callable(bind):
            bind(self)
        self.inputs = _inputs(p.source)
        # the adaptive step (module docstring): only with the model's contact and a berthing contact that
        # declares where it cannot act (``coasting``)
        self.adaptive = p.adaptive and p.source == "model" and getattr(
            self.berthing, "coasting", None) in ("footprint", "front")
        eig = np.linalg.eigvalsh(self.model_T.I_Bcm_B)
        self._I_min, self._I_max = float(eig[0]), float(eig[-1])
        self.rigidize_delay_ns = round(p.rigidize_delay * 1e9)
        self.schedule = Schedule()  # the outputs' coupling (set_coupling); every step until told
        self._payload0 = tuple(tuple(float(x) for x in pay[k]) for k in ("X_WT", "v_WTo_W", "w_WT_T"))
        rb.load_kernels()  # the compiled step loaded at build: no step pays for it
        # the no-contact bound's points (dynamics.contact.coast_bound_rows): each guide's, or B for the latches
        if self.surfaces:
            self._bound_points: list[tuple[Any, Any, float, Any]] = [
                (g.p_ToPo_T, g.center_L, math.sqrt(g.reach2), g.surfaces) for g in self._guides]
            self._bound_mode = 0 if getattr(self.berthing, "coasting", None) == "footprint" else 1
        else:  # the latches close on the interface's position alone
            self._bound_points = [(self._p_TB, self._p_LB_berthed, float(self.criteria.position), [])]
            self._bound_mode = 2
        self._bound_const = (float(self.model_T.mass), self._I_min, self._I_max, COAST_MAX, COAST_DRIFT,
                             COAST_ACCEL_FLOOR, COAST_POS_FLOOR, BOUND_MARGIN)
        self._bound_tables: tuple[Any, ...] | None = None
        # the orbiter's kinematics of a step compiled (dynamics.contact_kernels.orbiter_kinematics), loaded now; the
        # kernels are looked up when called (_kernels), never held: a model is pickled with a run's snapshot, and
        # compared attribute by attribute with one built elsewhere (tools.sweep's window proof)
        kern = _kernels()
        self._p_OL_t = tuple(self._p_OL)
        body = np.zeros(19)
        body[3] = 1.0
        kern.orbiter_kinematics(body, 1e-3, self._p_OL_t, self._R_OL)
        if self.adaptive:  # its compiled form (dynamics.contact_kernels.coast_bound) loaded now, not in a step
            self._bound_tables = (self._bound_mode, *kern.bound_tables(self._bound_points))
            z3, eye = (0.0, 0.0, 0.0), (1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0)
            rest = (*z3, *eye, *z3, *z3)
            kern.coast_bound(rest, rest, (*z3, *eye), (0.0,) * 6, z3, z3, z3, (0.01, 0.001, *self._bound_const),
                             *self._bound_tables, 2.0)

    def initial_body(self) -> rb.RigidBodyState:
        """The payload's state at the start, from ``[payload]`` (``X_WT``, ``v_WTo_W``, ``w_WT_T``)."""
        return rb.state_from_pose(*self._payload0)

    def new_context(self) -> ContactContext:
        """A fresh context: the payload at its configured start, nothing grappled, in contact or latched."""
        return ContactContext(self.initial_body())

    def payload(self, c: ContactContext) -> rb.RigidBodyState:
        """The payload's state at the last step's end: ``c.body`` with the intervals it coasted through since
        (``c.pending``, the adaptive step) integrated as the next evaluated step will; ``c`` is not changed."""
        return self._coasted(c)[0] if c.pending else c.body

    # ------------------------------------------------------------ orbiter as seen from here
    def orbiter_at(self, c: ContactContext, sample: Any, t_ns: int) -> rb.RigidBodyState:
        """The orbiter's state at ``t_ns`` from its held sample (module docstring); ``c`` keeps the prediction
        (``orb_cache``, ``orb_floats``) and the impulses in flight."""
        key = (sample.t_ns, sample.seq, t_ns, len(c.inflight))
        if c.orb_cache is not None and c.orb_cache[0] == key:
            return c.orb_cache[1]
        b = sample.body
        dt = (t_ns - sample.t_ns) * 1e-9
        p0, v0, a0, w0, d0, q0 = _orb_floats(c, sample)
        if dt > 0:
            p, q, v, w = rb.predict_rows(p0, q0, v0, w0, a0, d0, dt)
            state = rb.RigidBodyState.from_floats(p, q, v, w)
        else:
            state = rb.RigidBodyState(np.array(p0), np.asarray(b["quat_WO"]), np.array(v0), np.array(w0))
        if c.inflight:
            c.inflight = [(tk, P) for tk, P in c.inflight if tk >= sample.t_ns]
            for tk, P in c.inflight:
                if tk < t_ns:
                    state = rb.apply_impulse(self.model_O, state, sp.shift_wrench(P, state.p_WoBo_W))
        c.orb_cache = ((sample.t_ns, sample.seq, t_ns, len(c.inflight)), state)
        return state

    def _v_rel_B(self, kT: _Kin, kO: _Kin) -> list[float]:
        """The payload's twist less the orbiter's at Bo, ``[ω; v]`` in W (six floats). [rad/s, m/s]"""
        p_B = sp.pose_apply_rows(kT.p, kT.R, self._p_TB)
        vT, vO = kT.velocity_at(p_B), kO.velocity_at(p_B)
        return [kT.w[0] - kO.w[0], kT.w[1] - kO.w[1], kT.w[2] - kO.w[2], vT[0] - vO[0], vT[1] - vO[1], vT[2] - vO[2]]

    def _orbiter_kin(self, c: ContactContext) -> tuple[_Kin, list[float], tuple[float, ...]]:
        """The orbiter's kinematics at the current instant of the step being finished, those of
        :meth:`orbiter_at_now`, and L's origin and ``R_WL`` then: with the kernel loaded at build
        (:func:`dynamics.contact_kernels.orbiter_kinematics`, the same floats), without making the orbiter's state;
        from the state with impulses in flight, at the sample's instant, without the kernel or with a prediction
        not finite (the state then raises the error)."""
        sample, t_ns = c.orb_sample, c.t_now + 1
        dt = (t_ns - sample.t_ns) * 1e-9
        if not c.inflight and dt > 0:
            ok, O, L = _kernels().orbiter_kinematics(_orb_array(c, sample), dt, self._p_OL_t, self._R_OL)
            if ok:
                return _Kin.of_rows(O), list(L[:3]), L[3:]
        kO = _Kin(self.orbiter_at(c, sample, t_ns))
        return kO, sp.pose_apply_rows(kO.p, kO.R, self._p_OL), sp.mat_mat_rows(kO.R, self._R_OL)

    # ------------------------------------------------------------ helpers
    def _X_WT(self, c: ContactContext) -> Array:
        return pose(self._rot(c, c.body)[0], c.body.p_WoBo_W)

    def _rot(self, c: ContactContext, state: rb.RigidBodyState) -> tuple[Array, Array]:
        """``(R_WB, ω_W)`` of a state, remembered in ``c.rot_cache`` for the last few states (the step reuses
        them)."""
        for st, R, w in c.rot_cache:
            if st is state:
                return R, w
        R = np.reshape(state.R_rows, (3, 3))
        w = R @ state.w_WB_B
        c.rot_cache = [(state, R, w), *c.rot_cache[:2]]
        return R, w

    def _twist_at(self, c: ContactContext, state: rb.RigidBodyState, p_W: Array) -> Array:
        """Twist [ω; v] of the body's material point at ``p_W``, in W."""
        w = self._rot(c, state)[1]
        return np.concatenate([w, rb.velocity_at(state.p_WoBo_W, state.v_WBo_W, w, p_W)])

    def _impulse_on_payload(self, c: ContactContext, P_T_at_C: Array, p_WoCo_W: Array, t_ns: int,
                            h_ns: int) -> Array:
        """Apply an impulse [∫τ; ∫f] about C to the payload now; queue its opposite for the orbiter."""
        P_T_Wo = rb.wrench_about_origin(P_T_at_C, p_WoCo_W)
        p_com = c.body.p_WoBo_W
        c.body = rb.apply_impulse(self.model_T, c.body, sp.shift_wrench(P_T_Wo, p_com))
        c.inflight.append((t_ns, -P_T_Wo))
        h = h_ns * 1e-9
        c.F_imp_O_Wo = [F - P / h for F, P in zip(c.F_imp_O_Wo, P_T_Wo.tolist(), strict=True)]
        return P_T_Wo

    # ------------------------------------------------------------ capture
    def _capture(self, c: ContactContext, t_ns: int, h_ns: int, orb: rb.RigidBodyState, u: Inputs,
                 events: list) -> None:
        if c.grappled:
            events.append(_event("miss", t_ns, reason="already grappled"))
            return
        try:
            arm = u.state("arm/state").body
        except KeyError:
            events.append(_event("miss", t_ns, reason="no arm/state: end effector pose unknown"))
            return
        X_WO = pose(self._rot(c, orb)[0], orb.p_WoBo_W)
        X_WE = X_WO @ np.asarray(arm["X_OE"])
        p_E = X_WE[:3, 3]
        V_O_E = self._twist_at(c, orb, p_E)
        brakes = bool(arm.get("brakes", False))
        V_WE = np.asarray(arm["V_WE_W"]) if ("V_WE_W" in arm and not brakes) else V_O_E
        X_WG = self._X_WT(c) @ self.X_TG
        V_T_E = self._twist_at(c, c.body, p_E)
        ok, reason, m = dc.capture_check(X_WE, X_WG, V_WE, V_T_E, self.envelope)
        V_pre = V_T_E - V_WE
        if not ok:
            events.append(_event("miss", t_ns, V_pre, V_pre, reason=reason, **m))
            return
        P_Wo, loss, V_post = self.capture.close(self, c, Grasp(orb, X_WO, X_WE, p_E, V_O_E, V_T_E, V_pre, brakes),
                                                t_ns, h_ns)
        c.grappled = True
        c.rigidized = False
        c.captured_ns = t_ns
        events.append(_event("capture", t_ns, V_pre, V_post, P_Wo, brakes=brakes, energy_loss=loss,
                             p_WoEo_W=[float(x) for x in p_E], **m))

    # ------------------------------------------------------------ berthing
    def near_guides(self, kT: _Kin, p_L: list[float], R_WL: tuple[float, ...]
                    ) -> list[tuple[_Guide, list[float], float, float, float]]:
        """The payload points inside their guide's bounding sphere (:class:`_Guide`): each guide with its point in W
        and in L (``P``, ``x0, x1, x2``) [m]; none when the payload is far from every guide. ``kT`` the payload's
        kinematics, ``p_L``, ``R_WL`` L's origin and rotation rows in W."""
        ctr = self._all_center_L
        x0, x1, x2 = sp.pose_apply_inverse_rows(p_L, R_WL, kT.p)  # To in L
        if (x0 - ctr[0]) ** 2 + (x1 - ctr[1]) ** 2 + (x2 - ctr[2]) ** 2 > self._all_reach2:
            return []  # the payload is far from every guide
        out = []
        for g in self._guides:
            P = sp.pose_apply_rows(kT.p, kT.R, g.p_ToPo_T)  # the point, in W
            x0, x1, x2 = sp.pose_apply_inverse_rows(p_L, R_WL, P)  # in L
            ctr = g.center_L
            if (x0 - ctr[0]) ** 2 + (x1 - ctr[1]) ** 2 + (x2 - ctr[2]) ** 2 <= g.reach2:
                out.append((g, P, x0, x1, x2))
        return out

    def _hil_wrench(self, c: ContactContext, u: Inputs, t_ns: int, X_WB: Array, events: list) -> Array | None:
        try:
            s = u.state("hil/feedback")
        except KeyError:
            s = None
        p = self.params
        reason = hil_refusal(s, t_ns, p.hil_max_age, p.hil_force_max, p.hil_torque_max)
        if reason:
            c.hil_refused += 1
            if reason.split(":")[0] != (c.hil_reason or "").split(":")[0]:
                events.append(_event("hil_fallback", t_ns, reason=reason))
            c.hil_reason = reason
            return None
        assert s is not None  # hil_refusal refuses a missing sample
        if c.hil_reason is not None:
            events.append(_event("hil_restored", t_ns, reason=f"accepted after: {c.hil_reason}"))
            c.hil_reason = None
        F_Bo_W = rotate_spatial(X_WB[:3, :3], np.asarray(s.body["F_Bo_B"], dtype=np.float64))
        return rb.wrench_about_origin(F_Bo_W, X_WB[:3, 3])

    # ------------------------------------------------------------ latches
    def _latch_pose(self, kT: _Kin, p_L: list[float], R_WL: tuple[float, ...]) -> tuple[list[float], tuple[float, ...]]:
        """Pose of B in L (position, rotation rows) and ``R_WB`` rows."""
        p_LB = sp.pose_apply_inverse_rows(p_L, R_WL, sp.pose_apply_rows(kT.p, kT.R, self._p_TB))
        R_LB = sp.mat_t_mat_rows(R_WL, sp.mat_mat_rows(kT.R, self._R_TB))  # R_WLᵀ R_WB
        return p_LB, R_LB

    def _latch_start(self, c: ContactContext, t_ns: int, X_LB: Array, V_rel_B: list[float], events: list) -> None:
        """The latches close on B at ``X_LB``: the stroke starts (or, with no stroke, they hold it there)."""
        c.berthed = True
        c.X_LB_latched = X_LB
        c.latch_ns = t_ns
        T = self.latch_drive["close_time"]
        if T > 0.0:
            c.drive = dc.LatchDrive(X_LB, self.X_LB_berthed, T)
            events.append(_event("latch_start", t_ns, V_rel_B, V_rel_B, X_LB=X_LB, close_time=T,
                                 **_misalignment(X_LB, self.X_LB_berthed)))
        else:
            c.latched = True
            events.append(_event("latch", t_ns, V_rel_B, V_rel_B, X_LB=X_LB, close_time=0.0,
                                 **_misalignment(X_LB, self.X_LB_berthed)))

    def _latch_wrench(self, c: ContactContext, t_ns: int, kT: _Kin, kO: _Kin, p_L: list[float],
                      R_WL: tuple[float, ...], V_rel_B: list[float], events: list,
                      F_other_Wo: list[float]) -> list[float]:
        """The closed latches' wrench on the payload about Wo (six floats); ``latch`` once the stroke is home.

        The latch model (:class:`LatchModel`) holds B on the set point: the stroke's
        (:class:`dynamics.contact.LatchDrive`) carried by the orbiter's latch frame. ``F_other_Wo``: every other
        wrench on the payload, about Wo (the arm's of the last step, the guides')."""
        assert c.X_LB_latched is not None and c.latch_ns is not None  # set by _latch_start
        t_drive = (t_ns - c.latch_ns) * 1e-9
        if c.drive is not None:
            p_R, R_R, v_R, w_R = c.drive.setpoint(t_drive)
        else:
            p_R, R_R = sp.pose_rows(c.X_LB_latched)
            v_R = w_R = [0.0, 0.0, 0.0]
        p_WR = sp.pose_apply_rows(p_L, R_WL, p_R)
        p_B = sp.pose_apply_rows(kT.p, kT.R, self._p_TB)
        vO, vR, wR = kO.velocity_at(p_B), sp.mat_vec_rows(R_WL, *v_R), sp.mat_vec_rows(R_WL, *w_R)
        V_R = [kO.w[0] + wR[0], kO.w[1] + wR[1], kO.w[2] + wR[2], vO[0] + vR[0], vO[1] + vR[1], vO[2] + vR[2]]
        R_WB = sp.mat_mat_rows(kT.R, self._R_TB)
        R_WR = sp.mat_mat_rows(R_WL, R_R)
        F = self.latch.wrench(self, c, t_drive, kT, kO, p_B, R_WB, p_WR, R_WR, V_R, R_WL, v_R, w_R, F_other_Wo)
        if not c.latched and (c.drive is None or t_ns - c.latch_ns >= c.drive.close_time * 1e9):
            p_LB, R_LB = self._latch_pose(kT, p_L, R_WL)
            X_LB = sp.pose_from_rows(p_LB, R_LB)
            m = _misalignment(X_LB, self.X_LB_berthed)
            if (m["misalignment_m"] <= self.latch_drive["final_position"]
                    and m["misalignment_rad"] <= self.latch_drive["final_angle"]):
                c.latched = True
                events.append(_event("latch", t_ns, V_rel_B, V_rel_B, X_LB=X_LB,
                                     X_LB_start=c.X_LB_latched,
                                     close_time=self.latch_drive["close_time"], **m))
        return sp.refer_wrench_rows(F, p_B)

    # ------------------------------------------------------------ ServiceModel
    def set_coupling(self, periods: Mapping[str, int]) -> None:
        """The output ports' coupling periods [ns] (:mod:`protocol.coupling`): ``payload/state`` is
        built only at its coupling instants; the wrench, a flow, every step."""
        self.schedule = Schedule(periods)

    def _outputs(self, c: ContactContext, active: bool, p_WoLo_W: list[float], t_ns: int) -> dict[str, dict[str, Any]]:
        F = [a + b for a, b in zip(c.F_cont_O_Wo, c.F_imp_O_Wo, strict=True)]
        out: dict[str, dict[str, Any]] = {
            "contact/wrench": {"F_Lo_W": np.array(sp.shift_wrench_rows(F, p_WoLo_W)),
                               "p_WoLo_W": np.array(p_WoLo_W),
                               "active": bool(active)},
        }
        if self.schedule.due("payload/state", t_ns):
            s = c.body
            a, wdot = self._accelerations(c)
            out["payload/state"] = {"p_WoTo_W": s.p_WoBo_W, "quat_WT": s.quat_WB, "w_WT_T": s.w_WB_B,
                                    "v_WTo_W": s.v_WBo_W, "a_WTo_W": np.array(a), "wdot_WT_T": np.array(wdot),
                                    "grappled": c.grappled, "berthed": c.berthed}
        return out

    def _accelerations(self, c: ContactContext) -> tuple[list[float], list[float]]:
        """The payload's accelerations at ``c.body`` under ``c.F_last_T``
        (:func:`dynamics.rigid_body.accelerations_rows`), kept in ``c.accel`` for the same two objects
        (``payload/state`` and the no-contact bound of a step both need them)."""
        acc = c.accel
        if acc is not None and acc[0] is c.body and acc[1] is c.F_last_T:
            return acc[2], acc[3]
        a, wdot = rb.accelerations_rows(self.model_T, c.body, c.F_last_T, self.orbit)
        c.accel = (c.body, c.F_last_T, a, wdot)
        return a, wdot

    def initial(self, t0_ns: int, c: ContactContext) -> dict[str, dict[str, Any]]:
        """Outputs at t0: the initial payload; no contact wrench (the orbiter is not known yet)."""
        c.F_imp_O_Wo = [0.0] * 6
        out = self._outputs(c, False, [0.0, 0.0, 0.0], t0_ns)
        out["contact/event"] = {"events": []}
        return out

    def step(self, t_ns: int, h_ns: int, c: ContactContext, u: Inputs) -> dict[str, dict[str, Any]]:
        """Advance ``c`` (the payload) t → t + h; then capture, contact, latches at t + h (module docstring).

        With the adaptive step, a step the no-contact bound covers only records the arm's wrench (the payload
        coasts, :meth:`_coast`); the next evaluated step integrates what it coasted through first. A bound
        computed for another body than ``c.body`` (set from outside since) is dropped with what it coasted."""
        if c.coast is not None:
            if c.coast.body is c.body:
                out = self._coast(c, c.coast, t_ns, h_ns, u)
                if out is not None:
                    return out
            else:
                c.pending = []
            c.coast = None
        c.coast_p_L_at = None
        self._catch_up(c)
        h = h_ns * 1e-9
        t1 = t_ns + h_ns
        s = c.body
        # 1. the payload over [t, t + h): arm wrench samples and the opposite of the held contact wrench
        F_arm = rb.mean_wrench_Wo(u.flow("arm/wrench"), "F_Eo_W", "p_WoEo_W", h_ns)
        c.F_arm_Wo = F_arm
        F_T_Wo = [a - b for a, b in zip(F_arm, c.F_cont_O_Wo, strict=True)]
        c.F_last_T = rb.wrench_about_mean_com(F_T_Wo, s, self.model_T.mass, h, rb.cw_floats(self.orbit, s))
        c.body = rb.step(self.model_T, s, c.F_last_T, h, self.orbit)
        c.dissipated += c.last_power * h
        c.F_imp_O_Wo = [0.0] * 6
        events: list[dict[str, Any]] = []
        try:
            orb_sample = u.state("orbiter/state")
        except KeyError:
            orb_sample = None
        if orb_sample is None:
            c.F_cont_O_Wo = [0.0] * 6
            out = self._outputs(c, False, [0.0, 0.0, 0.0], t1)
            out["contact/event"] = {"events": events}
            return out
        c.orb_sample = orb_sample
        c.t_now = t1
        # 2. operator commands of this step (the orbiter's state made where it is needed: orbiter_at_now)
        for smp in u.events("operator/command"):
            for ev in smp.body.get("events", []):
                cmd = ev.get("cmd", ev.get("kind"))
                if cmd == "capture":
                    self._capture(c, t1, h_ns, self.orbiter_at_now(c), u, events)
                elif cmd == "release" and c.grappled:
                    c.grappled = c.rigidized = False
                    c.captured_ns = None
                    c.X_OE = None
                    events.append(_event("release", t1))
        if (c.grappled and not c.rigidized and c.captured_ns is not None
                and t1 >= c.captured_ns + self.rigidize_delay_ns):
            c.rigidized = True
            orb = self.orbiter_at_now(c)
            X_WO = pose(self._rot(c, orb)[0], orb.p_WoBo_W)
            try:
                X_WE = X_WO @ np.asarray(u.state("arm/state").body["X_OE"])
            except KeyError:
                X_WE = self._X_WT(c) @ self.X_TG
            X_EG = pose_inverse(X_WE) @ self._X_WT(c) @ self.X_TG
            events.append(_event("rigidize", t1, X_EG=X_EG))
        # 3. berthing contact and latches at t + h (floats: kT, kO the bodies' kinematics)
        kT = _Kin(c.body)
        kO, p_L, R_WL = self._orbiter_kin(c)
        kT0, kO0 = kT, kO  # the relative twist at Bo is of these (before any impulse), made where an event needs it
        V_rel_B: list[float] | None = None
        F_hil = None
        if self.params.source == "hil":
            p_B = sp.pose_apply_rows(kT.p, kT.R, self._p_TB)
            F_hil = self._hil_wrench(c, u, t1, sp.pose_from_rows(p_B, sp.mat_mat_rows(kT.R, self._R_TB)), events)
        if F_hil is None:  # the model (also the fall-back of a refused HIL sample)
            F_T_Wo, power, active, kT, kO = self.berthing.contact(self, c, kT, kO, p_L, R_WL, t1, h_ns)
        else:
            F_T_Wo, power, active = F_hil.tolist(), 0.0, bool(np.any(F_hil != 0.0))
        c.last_power = power
        if c.grappled and not c.rigidized and (F_snare := self.capture.snare_wrench(self, c)) is not None:
            F_T_Wo = [a + b for a, b in zip(F_T_Wo, F_snare, strict=True)]
        # contact episodes
        if active and not c.in_contact:
            V_rel_B = self._v_rel_B(kT0, kO0)
            c.in_contact = True
            c.episode_V_pre = V_rel_B
            c.episode_impulse = c.episode_impulse if self.berthing.impulsive else np.zeros(6)
            events.append(_event("first_contact", t1, V_rel_B, V_rel_B))
        elif not active and c.in_contact and not c.berthed:
            c.in_contact = False
            V_rel_B = self._v_rel_B(kT0, kO0)
            events.append(_event("rebound", t1, c.episode_V_pre, V_rel_B, c.episode_impulse))
            c.episode_impulse = np.zeros(6)
        if not c.berthed and (active or not self.surfaces):  # latches close on seated trunnions
            p_LB, R_LB = self._latch_pose(kT, p_L, R_WL)
            if math.dist(p_LB, self._p_LB_berthed) <= self.criteria.position:
                R_LW = np.reshape(R_WL, (3, 3)).T
                X_LB = sp.pose_from_rows(p_LB, R_LB)
                V_rel_B = V_rel_B or self._v_rel_B(kT0, kO0)
                if dc.latch_check(X_LB, rotate_spatial(R_LW, V_rel_B), self.X_LB_berthed, self.criteria)[0]:
                    self._latch_start(c, t1, X_LB, V_rel_B, events)
        if c.berthed:
            V_rel_B = V_rel_B or self._v_rel_B(kT0, kO0)
            F_latch = self._latch_wrench(c, t1, kT, kO, p_L, R_WL, V_rel_B, events,
                                         [a + b for a, b in zip(c.F_arm_Wo, F_T_Wo, strict=True)])
            F_T_Wo = [a + b for a, b in zip(F_T_Wo, F_latch, strict=True)]
        if c.in_contact:
            c.episode_impulse += np.array(F_T_Wo) * h
        c.F_cont_O_Wo = [-x for x in F_T_Wo]
        out = self._outputs(c, active or c.berthed, p_L, t1)
        out["contact/event"] = {"events": events}
        if (self.adaptive and not (active or c.berthed or c.in_contact or (c.grappled and not c.rigidized))
                and power == 0.0 and not any(F_T_Wo) and not any(c.F_imp_O_Wo)
                and self.schedule.periods.get("payload/state", h_ns) > h_ns):
            c.coast = self._coast_bound(c, kT, kO, p_L, R_WL, t1, h_ns)
            c.coast_arm = c.coast_orb = None  # checked again against the new bound
        return out

    # ------------------------------------------------------------ the adaptive step
    def stride(self, t_ns: int, h_ns: int, c: ContactContext, u: Inputs) -> int:
        """How many of its steps from ``t_ns`` the payload coasts through (:mod:`protocol.service`, "Strides"; the
        module docstring's adaptive step): 1 unless a bound for ``c.body`` holds, ``u``'s ``orbiter/state`` and
        ``arm/wrench`` samples are within it (:meth:`_coast_inputs`, which keeps what it checked for the step) and
        no operator command came; else the steps from ``t_ns`` that end within the bound, before ``payload/state``
        is due, up to the one that gives a ``contact/wrench`` coupling interval its last value (every coasting step
        of the interval carries that value's point: :meth:`_coast`). ``step(t_ns, k·h_ns, c, u)`` then coasts
        through them at once, as ``k`` steps would."""
        b = c.coast
        if b is None or b.body is not c.body:
            return 1
        for smp in u.events("operator/command"):
            if smp.body.get("events"):
                return 1
        if self._coast_inputs(c, b, u, h_ns) is None:
            return 1
        due = self.schedule.due
        k = 0
        t1 = t_ns + h_ns
        while t1 <= b.until_ns and not due("payload/state", t1):
            k += 1
            if due("contact/wrench", t1 + h_ns):  # this step gives the interval's last value
                break
            t1 += h_ns
        return max(k, 1)

    def _coast_inputs(self, c: ContactContext, b: _Coast, u: Inputs, h_ns: int) -> list[float] | None:
        """The arm's wrench about Wo over a step of ``h_ns`` the bound ``b`` lets the payload coast through with
        the inputs ``u``, or None if the orbiter's sample or the arm's wrench leaves the limits the bound assumed
        (or there is no orbiter sample). What passed is kept (``c.coast_orb``, ``c.coast_arm``: the same samples
        are not checked again, and a stride over the steps they cover takes the wrench of its first step)."""
        try:
            orb_sample = u.state("orbiter/state")
        except KeyError:
            return None
        if orb_sample is not c.coast_orb:
            ob = orb_sample.body
            if (orb_sample.h_ns > b.H_O_ns or _norm(rb.as_floats(ob["a_WOo_W"])) > b.a_O_max
                    or _norm(rb.as_floats(ob["wdot_WO_O"])) > b.wd_O_max):
                return None
            c.coast_orb = orb_sample
        parts = u.flow("arm/wrench")
        last = c.coast_arm
        if len(parts) == 1 and last is not None and parts[0][0] is last[0] and parts[0][1] == last[1]:
            return last[2]  # the same sample over the same length: the same wrench, already checked
        F_arm = rb.mean_wrench_Wo(parts, "F_Eo_W", "p_WoEo_W", h_ns)
        t0, t1_, t2, f0, f1, f2 = F_arm
        f = math.sqrt(f0 * f0 + f1 * f1 + f2 * f2)
        tau_c = sp.refer_wrench_rows([t0, t1_, t2, f0, f1, f2], [-x for x in b.p_T])  # about the CoM at b.t_ns
        if f > b.f_max or _norm(tau_c[:3]) + COAST_DRIFT * f > b.tau_max:
            return None
        c.coast_arm = (parts[0][0], parts[0][1], F_arm) if len(parts) == 1 else None
        return F_arm

    def _coast(self, c: ContactContext, b: _Coast, t_ns: int, h_ns: int, u: Inputs) -> dict[str, dict[str, Any]] | None:
        """The outputs of a step the payload coasts through (the bound ``b`` covers it), or None if the step must
        be evaluated: ``payload/state`` is due at its end, an operator command came, the bound ends, or the arm's
        wrench or the orbiter's sample leaves the limits the bound assumed (:meth:`_coast_inputs`)."""
        t1 = t_ns + h_ns
        if t1 > b.until_ns or self.schedule.due("payload/state", t1):
            return None
        for smp in u.events("operator/command"):
            if smp.body.get("events"):
                return None
        F_arm = self._coast_inputs(c, b, u, h_ns)
        if F_arm is None:
            return None
        orb_sample = c.coast_orb
        # coast: the interval joins the last one if the arm's wrench is the same
        c.F_arm_Wo = F_arm
        if c.pending and c.pending[-1][1] == F_arm:
            c.pending[-1] = (c.pending[-1][0] + h_ns, F_arm)
        else:
            c.pending.append((h_ns, F_arm))
        c.F_imp_O_Wo = [0.0] * 6
        # the wrench's point: L's origin at the end of the step that gives the coupling interval's last value (the
        # value published: the mean is referred to it), the same for every coasting step of the interval
        H = self.schedule.periods.get("contact/wrench")
        t_last = t1 if H is None else t1 // H * H + H - self.period_ns
        at = c.coast_p_L_at
        if at is None or at[0] != t_last or at[1] is not orb_sample:
            c.orb_sample = orb_sample
            c.t_now = t_last
            c.coast_p_L = self._orbiter_kin(c)[1]
            c.coast_p_L_at = (t_last, orb_sample)
        return {"contact/wrench": {"F_Lo_W": np.zeros(6), "p_WoLo_W": np.array(c.coast_p_L), "active": False},
                "contact/event": {"events": []}}

    def _coasted(self, c: ContactContext) -> tuple[rb.RigidBodyState, list[float]]:
        """The payload after the intervals it coasted through (``c.pending``, from ``c.body``) and the wrench about
        its CoM over the last of them: each piece of constant arm wrench in RK4 steps of at most
        :data:`COAST_STEP`, its wrench referred to the CoM's mean over the piece
        (:func:`dynamics.rigid_body.wrench_about_mean_com`: the angular impulse about Wo stays exact). ``c`` is not
        changed."""
        s, F = c.body, c.F_last_T
        for n_ns, F_arm in c.pending:
            hp = n_ns * 1e-9
            F = rb.wrench_about_mean_com(F_arm, s, self.model_T.mass, hp, rb.cw_floats(self.orbit, s))
            s = rb.step(self.model_T, s, F, hp, self.orbit, substeps=max(1, math.ceil(hp / COAST_STEP)))
        return s, F

    def _catch_up(self, c: ContactContext) -> None:
        """Integrate the intervals the payload coasted through into ``c`` (:meth:`_coasted`)."""
        if not c.pending:
            return
        c.body, c.F_last_T = self._coasted(c)
        c.pending = []

    def _coast_bound(self, c: ContactContext, kT: _Kin, kO: _Kin, p_L: list[float], R_WL: tuple[float, ...],
                     t1: int, h_ns: int) -> _Coast | None:
        """The no-contact bound at the evaluated instant ``t1`` (module docstring, the adaptive step), or None if
        the payload may not coast through the next step: :func:`dynamics.contact.coast_bound_rows` (compiled,
        :func:`dynamics.contact_kernels.coast_bound`, loaded at build) with this step's kinematics, the orbiter
        sample's accelerations and the wrench of the last step.

        For each payload point with guide surfaces: its slack (how far it may move with every surface still
        unable to act: :func:`dynamics.contact.surface_slack` for a contact with point_plane's footprint, else
        the distance beyond :data:`BOUND_MARGIN` in front of each surface, or outside its guide's sphere), its
        speed relative to L and a bound ``A`` on that speed's rate (the payload's and the orbiter's accelerations
        at the point, their centripetal and Coriolis terms, with twice today's arm wrench and orbiter
        accelerations, plus :data:`COAST_ACCEL_FLOOR`); it cannot reach a surface within
        :func:`dynamics.contact.reach_time` of ``speed``, ``A`` and its slack less :data:`COAST_POS_FLOOR` and the
        orbiter's prediction error. The evaluated contact leads by ``h/2``: a step ending at ``t`` is covered if
        ``t − t1 + h`` is within that time. Without surfaces the latches' position check is the bound (B's
        distance from the berthed position beyond ``[contact.latch] position``)."""
        orb = c.orb_sample
        if orb is None or c.orb_floats[0] is not orb:
            return None
        _, _, a0, _, d0, _ = c.orb_floats[1]
        F = c.F_last_T  # about the CoM, the last step's (the arm's alone: no contact acts)
        a_T = self._accelerations(c)[0]
        T, O, L = kT.rows, kO.rows, (*p_L, *R_WL)
        scalars = (orb.h_ns * 1e-9, h_ns * 1e-9, *self._bound_const)
        tables = self._bound_tables
        if tables is not None:
            code, span, f_max, tau_max, a_O_max, wd_O_max = _kernels().coast_bound(
                T, O, L, tuple(F), tuple(a_T), tuple(a0), tuple(d0), scalars, *tables, 2.0)
        if tables is None or code == 2:  # the reference (a speed bound not finite: it raises the error)
            code, span, f_max, tau_max, a_O_max, wd_O_max = dc.coast_bound_rows(
                T, O, L, F, a_T, a0, d0, scalars, self._bound_mode, self._bound_points)
        if code:
            return None
        return _Coast(t1, t1 + int(span * 1e9) - 1, f_max, tau_max, (kT.p[0], kT.p[1], kT.p[2]), a_O_max, wd_O_max,
                      orb.h_ns, c.body)

    def orbiter_at_now(self, c: ContactContext) -> rb.RigidBodyState:
        """The orbiter at the current instant of the step being finished (after queued impulses)."""
        return self.orbiter_at(c, c.orb_sample, c.t_now + 1)


COAST_DRIFT = 0.01
"""m: how far the payload's CoM may move over a coasting interval (its speed times :data:`COAST_MAX`); the
arm's moment limit of a coasting step allows for it."""


def _norm(x: Any) -> float:
    """Euclidean norm of three floats."""
    return math.sqrt(x[0] * x[0] + x[1] * x[1] + x[2] * x[2])


def _misalignment(X_LB: Array, X_LB_berthed: Array) -> dict[str, float]:
    """Distance [m] and angle [rad] of B from its berthed pose in L."""
    return {"misalignment_m": float(np.linalg.norm(X_LB[:3, 3] - X_LB_berthed[:3, 3])),
            "misalignment_rad": float(np.linalg.norm(dc.rotation_error(X_LB_berthed[:3, :3], X_LB[:3, :3])))}


# ---------------------------------------------------------------- the strategies
@dataclass(frozen=True, slots=True)
class Grasp:
    """The capture's instant, as :meth:`CaptureModel.close` sees it: the orbiter ``orb`` (after impulses in
    flight), its pose ``X_WO``, E's pose ``X_WE`` and origin ``p_E`` (W) [m], the twists at Eo of the orbiter's
    rigid motion ``V_O_E`` and of the payload's ``V_T_E``, the relative twist ``V_pre`` (payload − E), ``[ω; v]``
    in W [rad/s, m/s], and whether the arm's brakes are on."""

    orb: rb.RigidBodyState
    X_WO: Array
    X_WE: Array
    p_E: Array
    V_O_E: Array
    V_T_E: Array
    V_pre: Array
    brakes: bool


def _spring_couplings(what: str, spring: Mapping[str, float], v: Mapping[str, Any], p_T: Array
                      ) -> list[StiffCoupling]:
    """A 6-DOF spring–damper between the payload at ``p_T`` (in T) and the orbiter at L, declared as two couplings
    (translation, rotation) with each body's least effective mass there and least principal moment of inertia."""
    mT, mO = v["model_T"], v["model_O"]
    p_OL = pose_from_vector(v["orbiter"]["X_OL"])[:3, 3]
    IT, IO = float(np.linalg.eigvalsh(mT.I_Bcm_B)[0]), float(np.linalg.eigvalsh(mO.I_Bcm_B)[0])
    return [StiffCoupling(f"{what} spring, translation", "contact/wrench", "orbiter/state", spring["k_lin"],
                          spring["c_lin"], _point_mass(mT, p_T), _point_mass(mO, p_OL)),
            StiffCoupling(f"{what} spring, rotation", "contact/wrench", "orbiter/state", spring["k_rot"],
                          spring["c_rot"], IT, IO)]


class ImpulsiveCapture:
    """``capture = "impulsive"``: with the brakes on, a plastic 6-DOF lock of payload and orbiter at Eo
    (:func:`dynamics.contact.plastic_lock`; the massless arm); with them off, no impulse. No snare spring."""

    def __init__(self, v: Mapping[str, Any]) -> None:
        pass

    def close(self, svc: ContactModel, c: ContactContext, grasp: Grasp, t_ns: int,
              h_ns: int) -> tuple[Array, float, Array]:
        if not grasp.brakes:
            return np.zeros(6), 0.0, grasp.V_pre
        orb, p_E = grasp.orb, grasp.p_E
        lock = dc.plastic_lock(svc.model_O.mass, rb.inertia_W(svc.model_O, orb), p_E - orb.p_WoBo_W, grasp.V_O_E,
                               svc.model_T.mass, rb.inertia_W(svc.model_T, c.body), p_E - c.body.p_WoBo_W,
                               grasp.V_T_E)
        P_Wo = svc._impulse_on_payload(c, -lock.impulse_O, p_E, t_ns, h_ns)
        return P_Wo, lock.energy_loss, svc._twist_at(c, c.body, p_E) - svc._twist_at(c, svc.orbiter_at_now(c), p_E)

    def snare_wrench(self, svc: ContactModel, c: ContactContext) -> list[float] | None:
        return None

    def couplings(self, v: Mapping[str, Any]) -> list[StiffCoupling]:
        return []


class CompliantCapture:
    """``capture = "compliant"``: the snare a spring–damper (``[contact.snare]``) pulling G onto E, E held at its
    capture pose in O (``c.X_OE``; the arm holds or is braked while the snare closes); the massless arm
    passes the reaction to the orbiter, which receives it through ``contact/wrench``. Declares that spring."""

    def __init__(self, v: Mapping[str, Any]) -> None:
        self.spring: dict[str, float] = v["snare"]

    def close(self, svc: ContactModel, c: ContactContext, grasp: Grasp, t_ns: int,
              h_ns: int) -> tuple[Array, float, Array]:
        c.X_OE = pose_inverse(grasp.X_WO) @ grasp.X_WE
        return np.zeros(6), 0.0, grasp.V_pre

    def snare_wrench(self, svc: ContactModel, c: ContactContext) -> list[float] | None:
        if c.X_OE is None:
            return None
        orb = svc.orbiter_at_now(c)
        X_WE = pose(svc._rot(c, orb)[0], orb.p_WoBo_W) @ c.X_OE
        X_WG = svc._X_WT(c) @ svc.X_TG
        p_G = X_WG[:3, 3]
        F_G = dc.latch_wrench(X_WE, svc._twist_at(c, orb, p_G), X_WG, svc._twist_at(c, c.body, p_G), np.eye(4),
                              **self.spring)
        return rb.wrench_about_origin(F_G, p_G).tolist()

    def couplings(self, v: Mapping[str, Any]) -> list[StiffCoupling]:
        return _spring_couplings("snare", v["snare"], v, pose_from_vector(v["payload"]["X_TG"])[:3, 3])


PointLaw = Callable[..., tuple[bool, float, float, float, float, float, float]]
"""A compliant point–plane law with :func:`dynamics.contact.point_plane_rows`'s signature and result:
``(dx, dy, dz, ux, uy, uz, nx, ny, nz, law, radius, depth) -> (in_contact, δ, δ̇, fx, fy, fz, P_d)``, in L:
the point's offset from the plane's point and its velocity relative to the orbiter, the unit outward normal, the
law's parameters, the footprint and catch depth; the force on the payload [N] and the power dissipated [W]."""


class CompliantContact:
    """A compliant berthing contact: at each payload point inside a surface's reach, ``point_law`` gives a force;
    their wrench is held over the next step, evaluated at the step's midpoint (the relative displacement
    extrapolated by ``u·h/2``: the energy exchanged stays second order in h; a force from the start of the
    interval would feed the contact ≈ (π/2) ω h of its energy per impact). ``berthing = "compliant"`` is
    :func:`dynamics.contact.point_plane_rows` (Hunt–Crossley and regularized Coulomb) with ``[contact]``'s law.
    Declares no stiff coupling (the guides are softer than the latches)."""

    impulsive = False

    def __init__(self, point_law: PointLaw, law: Any) -> None:
        self.point_law = point_law
        self.law = law
        # where it cannot act (the adaptive step's bound): point_plane_rows's footprint, else a point's
        # distance in front of a surface beyond BOUND_MARGIN (the skip below) or outside its guide's sphere
        self.coasting = "footprint" if point_law is dc.point_plane_rows else "front"
        self._tables: tuple[Any, ...] | None = None

    def bind(self, svc: ContactModel) -> None:
        """Told its service's guides at build: with the shipped law (:func:`dynamics.contact.point_plane_rows`)
        the whole wrench is one compiled call (:func:`dynamics.contact_kernels.guides_wrench`, equal bit for bit
        to the loop below), its kernel loaded now so that no step pays for numba's import or load."""
        if self.point_law is not dc.point_plane_rows:
            return
        kern = _kernels()
        g = svc._guides
        law = self.law
        self._tables = (tuple(float(x) for x in (law.k, law.exponent, law.alpha, law.mu_s, law.mu_k, law.v_stick)),
                        (*(float(x) for x in svc._all_center_L), float(svc._all_reach2)),
                        *kern.guide_tables([(x.p_ToPo_T, x.center_L, x.reach2, x.surfaces) for x in g]))
        eye = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0)
        far = (1e9, 1e9, 1e9, *eye, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)  # the call compiles or loads the kernel
        kern.guides_wrench(far, far, (0.0, 0.0, 0.0, *eye), 0.0, self._tables[0], BOUND_MARGIN, (0.0, 0.0, 0.0, -1.0),
                           *self._tables[2:])

    def contact(self, svc: ContactModel, c: ContactContext, kT: _Kin, kO: _Kin, p_L: list[float],
                R_WL: tuple[float, ...], t_ns: int, h_ns: int) -> tuple[list[float], float, bool, _Kin, _Kin]:
        if self._tables is not None:
            law, near, pts, spheres, surf, first = self._tables
            active, power, Fk = _kernels().guides_wrench(
                kT.rows, kO.rows, (*p_L, *R_WL), 0.5 * h_ns * 1e-9, law,
                BOUND_MARGIN, near, pts, spheres, surf, first)
            return list(Fk), power, active, kT, kO
        guides = [(g.p_ToPo_T, g.center_L, g.reach2, g.surfaces) for g in svc._guides]  # a registered point law
        active, power, F = dc.guides_wrench_rows(
            (*kT.p, *kT.R, *kT.v, *kT.w), (*kO.p, *kO.R, *kO.v, *kO.w), (*p_L, *R_WL), 0.5 * h_ns * 1e-9, self.law,
            BOUND_MARGIN, (*svc._all_center_L, svc._all_reach2), guides, self.point_law)
        return F, power, active, kT, kO

    def couplings(self, v: Mapping[str, Any]) -> list[StiffCoupling]:
        return []


def _kernels() -> Any:
    """:mod:`dynamics.contact_kernels` (numba), imported on first use (:func:`dynamics.kernel_module`): a
    configuration check does not load it."""
    return kernel_module("contact_kernels")


def _hunt_crossley(v: Mapping[str, Any]) -> CompliantContact:
    """``berthing = "compliant"``: :func:`dynamics.contact.point_plane_rows` with ``[contact]``'s law."""
    return CompliantContact(dc.point_plane_rows, v["law"])


class ImpulsiveContact:
    """``berthing = "impulsive"``: an approaching point in contact (:func:`dynamics.contact.point_plane_rows`
    tells which) gets one impulse by ``[contact] impulsive_law`` (:data:`IMPULSIVE_LAWS`), applied at once and
    summed in the episode's impulse. Declares no stiff coupling."""

    impulsive = True
    coasting = "footprint"  # point_plane_rows decides where it acts (the adaptive step's bound)

    def __init__(self, v: Mapping[str, Any]) -> None:
        self.law = v["law"]
        self.impulse: ImpulsiveLaw = IMPULSIVE_LAWS[v["params"].impulsive_law]

    def contact(self, svc: ContactModel, c: ContactContext, kT: _Kin, kO: _Kin, p_L: list[float],
                R_WL: tuple[float, ...], t_ns: int, h_ns: int) -> tuple[list[float], float, bool, _Kin, _Kin]:
        active = False
        lead = 0.0
        for g, P, x0, x1, x2 in svc.near_guides(kT, p_L, R_WL):  # an impulse moves no point: P stays
            u: list[float] | None = None
            for sx, sy, sz, nx, ny, nz, radius, depth in g.surfaces:
                dx, dy, dz = x0 - sx, x1 - sy, x2 - sz
                if dx * nx + dy * ny + dz * nz >= BOUND_MARGIN:
                    continue
                if u is None:
                    vP, vS = kT.velocity_at(P), kO.velocity_at(P)
                    u = sp.mat_t_vec_rows(R_WL, vP[0] - vS[0], vP[1] - vS[1], vP[2] - vS[2])
                ok, _, delta_dot, _, _, _, _ = dc.point_plane_rows(
                    dx + u[0] * lead, dy + u[1] * lead, dz + u[2] * lead, u[0], u[1], u[2], nx, ny, nz, self.law,
                    radius, depth)
                if not ok:
                    continue
                active = True
                if delta_dot > 0.0:
                    p_P = np.array(P)
                    imp = self.impulse(svc, c, svc.orbiter_at_now(c), p_P,
                                       np.array(sp.mat_vec_rows(R_WL, nx, ny, nz)))
                    if imp is not None:
                        c.episode_impulse += svc._impulse_on_payload(c, np.concatenate([np.zeros(3), imp]), p_P,
                                                                        t_ns, h_ns)
                        kT, kO = _Kin(c.body), _Kin(svc.orbiter_at_now(c))
                        u = None
        return [0.0] * 6, 0.0, active, kT, kO

    def couplings(self, v: Mapping[str, Any]) -> list[StiffCoupling]:
        return []


def _restitution(svc: ContactModel, c: ContactContext, orb: rb.RigidBodyState, p_C: Array,
                 n_W: Array) -> Array | None:
    """``impulsive_law = "restitution"``: Newton restitution and Coulomb friction
    (:func:`dynamics.impact.point_impact`; ``[contact] restitution``, ``mu``)."""
    r = im.point_impact(svc.model_T, c.body, svc.model_O, orb, p_C, n_W, svc.params.restitution, svc.params.mu)
    return r.P_W


def _cyril(svc: ContactModel, c: ContactContext, orb: rb.RigidBodyState, p_C: Array, n_W: Array) -> Array | None:
    """``impulsive_law = "cyril"``: Cyril's ``r_E``, ``r_f`` with the orbiter as the chaser
    (:func:`dynamics.impact.nonplastic_impact_payload`); None where it has no solution."""
    body = c.body
    M, J = dc.orbiter_chaser(svc.model_O.mass, rb.inertia_W(svc.model_O, orb), p_C - orb.p_WoBo_W)
    psid = np.concatenate([orb.R_WB @ orb.w_WB_B, orb.v_WBo_W])
    try:
        rp = im.nonplastic_impact_payload(M, J, psid, svc.model_T.mass, rb.inertia_W(svc.model_T, body),
                                         p_C - body.p_WoBo_W, body.v_WBo_W, body.R_WB @ body.w_WB_B, -n_W,
                                         svc.params.r_E, svc.params.r_f)
    except NoSolutionError:
        return None
    return -np.asarray(rp.impulse_W)


class LatchSpring:
    """``latch.model = "spring"``: the latch spring–damper on the set point (:func:`dynamics.contact.latch_wrench_rows`,
    ``[contact.latch]`` ``k_lin``, ``k_rot``, ``c_lin``, ``c_rot``). Declares that spring."""

    def __init__(self, v: Mapping[str, Any]) -> None:
        self.spring: dict[str, float] = v["latch_spring"]

    def wrench(self, svc: ContactModel, c: ContactContext, t_drive: float, kT: _Kin, kO: _Kin, p_B: list[float],
               R_WB: tuple[float, ...], p_WR: list[float], R_WR: tuple[float, ...], V_R: list[float],
               R_WL: tuple[float, ...], v_R: list[float], w_R: list[float], F_other_Wo: list[float]) -> list[float]:
        return dc.latch_wrench_rows(p_B, R_WB, [*kT.w, *kT.velocity_at(p_B)], p_WR, R_WR, V_R, **self.spring)

    def couplings(self, v: Mapping[str, Any]) -> list[StiffCoupling]:
        return _spring_couplings("latch", v["latch_spring"], v, pose_from_vector(v["payload"]["X_TB"])[:3, 3])


class LatchConstraint:
    """``latch.model = "constraint"``: B welded to the set point
    (:func:`dynamics.contact.latch_constraint_wrench_rows`): the payload's accelerations under every other
    wrench and the orbit made those of the set point — the orbiter's latch frame carried by its sample's
    accelerations, plus the stroke's own — with Baumgarte's correction (``latch.baumgarte``, α = β). Keeps the
    weld's pose error in ``c.latch_error``. Declares Baumgarte's spring and damper (``k = m β²``,
    ``c = 2 β m`` on the payload's side) with the orbiter's acceleration fed forward
    (:attr:`protocol.stability.StiffCoupling.feedforward`): an algebraic loop of gain m_payload / m_orbiter at
    the latch."""

    def __init__(self, v: Mapping[str, Any]) -> None:
        self.gain: float = v["latch_baumgarte"]
        self._I_T_rows = tuple(np.asarray(v["model_T"].I_Bcm_B, dtype=np.float64).ravel().tolist())

    def wrench(self, svc: ContactModel, c: ContactContext, t_drive: float, kT: _Kin, kO: _Kin, p_B: list[float],
               R_WB: tuple[float, ...], p_WR: list[float], R_WR: tuple[float, ...], V_R: list[float],
               R_WL: tuple[float, ...], v_R: list[float], w_R: list[float], F_other_Wo: list[float]) -> list[float]:
        # the set point's classical acceleration at Bo: the orbiter's latch frame (its sample's accelerations,
        # held over the coupling interval) plus the stroke's own, with the Coriolis term of the stroke's rate
        s = c.orb_floats[1]
        a_O, wd_O = s[2], sp.mat_vec_rows(kO.R, *s[4])
        r = [p_B[i] - kO.p[i] for i in range(3)]
        w = kO.w
        wr = sp.cross_rows(w[0], w[1], w[2], r[0], r[1], r[2])
        c1 = sp.cross_rows(wd_O[0], wd_O[1], wd_O[2], r[0], r[1], r[2])
        c2 = sp.cross_rows(w[0], w[1], w[2], wr[0], wr[1], wr[2])
        vR, wR = sp.mat_vec_rows(R_WL, *v_R), sp.mat_vec_rows(R_WL, *w_R)
        aR, wdR = (c.drive.acceleration(t_drive) if c.drive is not None else ([0.0] * 3, [0.0] * 3))
        aR, wdR = sp.mat_vec_rows(R_WL, *aR), sp.mat_vec_rows(R_WL, *wdR)
        cw = sp.cross_rows(w[0], w[1], w[2], wR[0], wR[1], wR[2])
        cv = sp.cross_rows(w[0], w[1], w[2], vR[0], vR[1], vR[2])
        A_R = [wd_O[i] + cw[i] + wdR[i] for i in range(3)] + [a_O[i] + c1[i] + c2[i] + 2.0 * cv[i] + aR[i]
                                                            for i in range(3)]
        # the payload's free accelerations under every other wrench (about its CoM) and the orbit
        pT = kT.p
        F_c = sp.shift_wrench_rows(F_other_Wo, pT)
        a_free, wd_free_T = rb.accelerations_rows(svc.model_T, c.body, F_c, svc.orbit)
        g = self.gain
        F = dc.latch_constraint_wrench_rows(svc.model_T.mass, self._I_T_rows, pT, kT.R, kT.w, a_free,
                                            sp.mat_vec_rows(kT.R, *wd_free_T), p_B, R_WB, [*kT.w, *kT.velocity_at(p_B)],
                                            p_WR, R_WR, V_R, A_R, g, g)
        th = dc.rotation_error(np.reshape(R_WR, (3, 3)), np.reshape(R_WB, (3, 3)))
        c.latch_error = (math.dist(p_B, p_WR), float(np.linalg.norm(th)))
        return F

    def couplings(self, v: Mapping[str, Any]) -> list[StiffCoupling]:
        mT, mO = v["model_T"], v["model_O"]
        IT, IO = float(np.linalg.eigvalsh(mT.I_Bcm_B)[0]), float(np.linalg.eigvalsh(mO.I_Bcm_B)[0])
        p_TB = pose_from_vector(v["payload"]["X_TB"])[:3, 3]
        p_OL = pose_from_vector(v["orbiter"]["X_OL"])[:3, 3]
        g = self.gain
        return [StiffCoupling(f"latch constraint, {what}", "contact/wrench", "orbiter/state", m_p * g * g,
                              2.0 * g * m_p, m_p, m_c, feedforward=True)
                for what, m_p, m_c in (("translation", _point_mass(mT, p_TB), _point_mass(mO, p_OL)),
                                       ("rotation", IT, IO))]


register("capture", "impulsive", ImpulsiveCapture)
register("capture", "compliant", CompliantCapture)
register("berthing", "compliant", _hunt_crossley)
register("berthing", "impulsive", ImpulsiveContact)
register("impulsive_law", "restitution", _restitution)
register("impulsive_law", "cyril", _cyril)
register("latch", "spring", LatchSpring)
register("latch", "constraint", LatchConstraint)


def _strategies(v: Mapping[str, Any]) -> tuple[CaptureModel, BerthingContact, LatchModel]:
    """The capture, berthing-contact and latch models the parsed config picks (:func:`register`)."""
    p: ContactParams = v["params"]
    return (CAPTURE_MODELS[p.capture](v), BERTHING_CONTACTS[p.berthing](v), LATCH_MODELS[p.latch.model](v))


def build(config: dict[str, Any], name: str, period_ns: int) -> ContactModel:
    """The contact model of service ``name``."""
    return ContactModel(config, name, period_ns)


def _point_mass(model: rb.RigidBodyModel, p_BcmPo_B: Array) -> float:
    """The least effective mass of a free body at point P, over every direction of a force there:
    ``1 / λ_max(I/m + [r×]ᵀ I_B⁻¹ [r×])``. [kg]"""
    S = sp.skew(p_BcmPo_B)
    A = np.eye(3) / model.mass + S.T @ np.linalg.inv(model.I_Bcm_B) @ S
    return float(1.0 / np.linalg.eigvalsh(0.5 * (A + A.T))[-1])


def stiff_couplings(config: dict[str, Any], name: str) -> list[StiffCoupling]:
    """The springs this service closes with the orbiter through ``contact/wrench`` (:mod:`protocol.stability`):
    those its latch, capture and berthing-contact models declare (``couplings``), in that order.

    The payload (integrated here, each step) on one side, the orbiter (integrated by its own service from the
    coupled mean) on the other. Today: the latch spring–damper (translation and rotation, :class:`LatchSpring`) or
    the weld's Baumgarte spring with the orbiter's acceleration fed forward (:class:`LatchConstraint`), and the
    snare's with ``capture = "compliant"`` (:class:`CompliantCapture`). The guides' Hunt–Crossley contact is softer
    than the latches (``k`` per wall) and is left out.
    """
    v, problems = _parse(config)
    if problems:
        return []
    capture, berthing, latch = _strategies(v)
    return [*latch.couplings(v), *capture.couplings(v), *berthing.couplings(v)]


def ports(config: dict[str, Any], name: str) -> ServicePorts:
    """The contact service's ports, before it is built (:mod:`protocol.config`)."""
    return ServicePorts("model", _inputs(config.get("contact", {}).get("source", "model")), ContactModel.outputs)
