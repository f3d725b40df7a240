"""Message envelope and the topic schema table (DESIGN §2–3).

Every message on the bus is one ZeroMQ frame::

    topic (UTF-8) | b"\\0" | msgpack body

The NUL separator makes a subscription to ``topic + b"\\0"`` an *exact* topic match
(ZeroMQ filters by prefix). The msgpack body is the envelope, a 7-element array::

    [version, sender, seq, t_ns, h_ns, wall_ns, fields]

``version`` (int)
    Schema version of the topic (:attr:`TopicSchema.version`); a mismatch is refused.
``sender`` (str)
    Producing service name.
``seq`` (int)
    Per (sender, topic) sequence number, 0 for the first message; gaps are counted.
``t_ns`` (int64)
    Simulation instant the values hold at (state, event), or the start of the
    interval they hold over (flow). [ns]
``h_ns`` (int64)
    The port's coupling period (:mod:`protocol.coupling`): the producer's period, or a
    whole multiple of it. [ns]
``wall_ns`` (int64)
    Wall-clock send time, ``time.time_ns()``. [ns]
``fields`` (map)
    The topic's fields, as its schema lists them: every field required, no other.

Field types (the schema vocabulary)
-----------------------------------
``("f8", shape)``
    float64. ``shape == ()`` is a scalar travelling as a msgpack float. Any other
    shape travels as msgpack *bin*: the C-ordered little-endian float64 bytes
    (``8 * prod(shape)`` bytes); decoded to a read-only ``numpy.ndarray`` of that
    shape. Always finite.
``("int", ())``   a signed 64-bit integer.
``("bool", ())``  true/false.
``("str", ())``   a UTF-8 string.
``("list[str]", ())``  a list of strings.
``("map", ())``   a map str -> (int | finite float | str | bool).
``("events", ())``  a list of maps, each with ``"kind": str`` plus free fields
(str keys; values None, bool, int, finite float, str, or lists/maps of those).

Extending a topic
-----------------
Schemas are data: a service owner adds a field by editing the ``fields`` dict of
their topic's entry in :data:`SCHEMAS` (and bumps ``version`` if the change is not
backward compatible). Test or plug-in topics are added with :func:`register_schema`.
The ``name`` (e.g. ``"berthsim.OrbiterState"``) is what the logger writes into MCAP.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from errors import MessageError
from protocol.service import PortKind

__all__ = [
    "FULL_RATE_SUFFIX",
    "SEPARATOR",
    "CONTROL_PREFIX",
    "MAX_PAYLOAD_BYTES",
    "FIELD_TYPES",
    "TopicSchema",
    "SCHEMAS",
    "register_schema",
    "schema_for",
]

SEPARATOR = b"\0"
"""Separates the topic from the msgpack body in a frame."""
CONTROL_PREFIX = b"sim/control" + SEPARATOR
"""The start of every ``sim/control`` frame (the ready-handshake's probes)."""

MAX_PAYLOAD_BYTES = 1 << 20
"""Largest msgpack body accepted by the decoder. [bytes]"""

FIELD_TYPES: tuple[str, ...] = ("f8", "int", "bool", "str", "list[str]", "map", "events")

FieldSpec = tuple[str, tuple[int, ...]]

_V2 = ("f8", (2,))
_V3 = ("f8", (3,))
_V4 = ("f8", (4,))
_V6 = ("f8", (6,))
_M44 = ("f8", (4, 4))
_BOOL = ("bool", ())
_STR = ("str", ())
_INT = ("int", ())
_F = ("f8", ())
_MAP = ("map", ())
_EVENTS = ("events", ())


@dataclass(frozen=True, slots=True)
class TopicSchema:
    """The schema of one topic.

    Attributes
    ----------
    name : str
        Schema name written into logs (``"berthsim.OrbiterState"``).
    version : int
        Envelope ``version`` a message of this topic must carry.
    kind : str
        Port kind its producer declares: ``"state"``, ``"flow"`` or ``"event"``.
    fields : Mapping[str, tuple[str, tuple[int, ...]]]
        Field name -> (type, shape); type one of :data:`FIELD_TYPES`.
    wrenches : tuple[tuple[str, str], ...]
        Flow topics: ``(wrench field, point field)`` pairs, a ``[τ; f]`` (6,) wrench about a
        (3,) point that moves; the coupling mean refers it to Wo step by step
        (:mod:`protocol.coupling`).
    derived : Mapping[str, tuple[str, str]]
        Fields the runtime fills in over each coupling interval, not the model: field ->
        (source field, ``"abs_max"`` | ``"wrench_max"``) (:mod:`protocol.coupling`). They are
        also listed in ``fields`` (``abs_max``: the source's shape; ``wrench_max``: (2,)).
    """

    name: str
    version: int
    kind: PortKind
    fields: Mapping[str, FieldSpec]
    wrenches: tuple[tuple[str, str], ...] = ()
    derived: Mapping[str, tuple[str, str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in ("state", "flow", "event"):
            raise MessageError(f"schema {self.name!r}: kind must be state/flow/event, got {self.kind!r}")
        for fname, spec in self.fields.items():
            if (not isinstance(spec, tuple) or len(spec) != 2 or spec[0] not in FIELD_TYPES
                    or not isinstance(spec[1], tuple)):
                raise MessageError(f"schema {self.name!r}: field {fname!r}: bad spec {spec!r}")
            if spec[0] != "f8" and spec[1] != ():
                raise MessageError(f"schema {self.name!r}: field {fname!r}: only f8 may have a shape")
        for wrench, point in self.wrenches:
            if self.fields.get(wrench) != ("f8", (6,)) or self.fields.get(point) != ("f8", (3,)):
                raise MessageError(f"schema {self.name!r}: wrench {wrench!r} about {point!r} needs f8 fields of "
                                   f"shapes (6,) and (3,)")
        for fname, (source, how) in self.derived.items():
            want = {"abs_max": self.fields.get(source), "wrench_max": ("f8", (2,))}.get(how)
            if want is None or self.fields.get(source, ("",))[0] != "f8" or self.fields.get(fname) != want:
                raise MessageError(f"schema {self.name!r}: derived field {fname!r} ({how!r} of {source!r}) does not "
                                   f"fit the fields")


_TABLE: dict[str, TopicSchema] = {
    # Orbiter CoM Oo in LVLH W; body rates in O.
    "orbiter/state": TopicSchema("berthsim.OrbiterState", 1, "state", {
        "p_WoOo_W": _V3,      # m
        "quat_WO": _V4,       # wxyz
        "w_WO_O": _V3,        # rad/s
        "v_WOo_W": _V3,       # m/s
        "a_WOo_W": _V3,       # m/s²
        "wdot_WO_O": _V3,     # rad/s²
    }),
    # Payload (target) CoM To in W; body rates in T.
    "payload/state": TopicSchema("berthsim.PayloadState", 1, "state", {
        "p_WoTo_W": _V3,
        "quat_WT": _V4,
        "w_WT_T": _V3,
        "v_WTo_W": _V3,
        "a_WTo_W": _V3,
        "wdot_WT_T": _V3,
        "grappled": _BOOL,
        "berthed": _BOOL,
    }),
    "arm/state": TopicSchema("berthsim.ArmState", 3, "state", {
        "q": _V6,             # rad
        "qd": _V6,            # rad/s
        "tau": _V6,           # N·m
        "mode": _STR,
        "brakes": _BOOL,
        "X_OE": _M44,
        "X_WE": _M44,         # end effector (point of resolution) in W
        "V_WE_W": _V6,        # [ω; v] of E in W
        "grappled": _BOOL,
        "loads": ("f8", (9, 6)),  # SVDS section 4 stations, rows [M; V] in the station frames
        "sigma_min": _F,      # smallest singular value of the RMS Jacobian
        "qd_cmd": _V6,        # commanded joint rates, rad/s
        "warnings": ("list[str]", ()),  # "clipped: ...", "refused: ...", "singular: ..."
        "tau_peak": _V6,      # largest |tau| per joint over the coupling interval, N·m (derived)
    }, derived={"tau_peak": ("tau", "abs_max")}),
    # Wrench the arm applies to the payload at Eo and, at the shoulder So, to the orbiter.
    "arm/wrench": TopicSchema("berthsim.ArmWrench", 2, "flow", {
        "F_Eo_W": _V6,        # [τ; f] N·m, N
        "p_WoEo_W": _V3,
        "F_So_W": _V6,
        "p_WoSo_W": _V3,
        "grappled": _BOOL,
        "F_peak": _V2,        # [max |τ|, max |f|] of F_Eo_W over the coupling interval (derived)
    }, wrenches=(("F_Eo_W", "p_WoEo_W"), ("F_So_W", "p_WoSo_W")), derived={"F_peak": ("F_Eo_W", "wrench_max")}),
    # Contact wrench on the orbiter at Lo (the payload receives the opposite).
    "contact/wrench": TopicSchema("berthsim.ContactWrench", 2, "flow", {
        "F_Lo_W": _V6,
        "p_WoLo_W": _V3,
        "active": _BOOL,
        "F_peak": _V2,        # [max |τ about Lo|, max |f|] over the coupling interval (derived)
    }, wrenches=(("F_Lo_W", "p_WoLo_W"),), derived={"F_peak": ("F_Lo_W", "wrench_max")}),
    "contact/event": TopicSchema("berthsim.ContactEvent", 1, "event", {"events": _EVENTS}),
    # Orbiter reaction-control jet firings (rcs_on / rcs_off with axis and torque).
    "orbiter/event": TopicSchema("berthsim.OrbiterEvent", 1, "event", {"events": _EVENTS}),
    "operator/command": TopicSchema("berthsim.OperatorCommand", 1, "event", {"events": _EVENTS}),
    "hil/command": TopicSchema("berthsim.HilCommand", 1, "state", {
        "X_LB": _M44,
        "V_LB_L": _V6,
    }),
    "hil/feedback": TopicSchema("berthsim.HilFeedback", 2, "state", {
        "F_Bo_B": _V6,
        "legs": _V6,          # m
        "delay_s": _F,
        "valid": _BOOL,
        "F_peak": _V2,        # [max |τ|, max |f|] of F_Bo_B over the coupling interval (derived)
    }, derived={"F_peak": ("F_Bo_B", "wrench_max")}),
    "hil/status": TopicSchema("berthsim.HilStatus", 1, "state", {
        "state": _STR,
        "faults": _INT,
        "link": _MAP,
    }),
    # The runtime's own topics.
    "sim/control": TopicSchema("berthsim.SimControl", 1, "event", {
        "cmd": _STR,          # probe | start | freeze | resume | stop | eos (a source has sent all it has)
                              # | diverged (the launcher: a model's output was not finite; info: service, t, reason)
                              # | freeze, resume (the launcher: info t_ns, by, reason) | held (the launcher: what a
                              # frozen service said, e.g. the rig bridge's state; info service, t_ns, frozen_s, rig)
        "info": _MAP,
    }),
    "sim/stats": TopicSchema("berthsim.SimStats", 1, "state", {
        "state": _STR,        # lifecycle state of the sender
        "mode": _STR,         # lockstep | realtime
        "steps": _INT,
        "overruns": _INT,
        "jitter_p50_ns": _INT,  # realtime step-start lateness over the window since the last stats
        "jitter_p99_ns": _INT,
        "input_age_ns": _INT,  # realtime: max over the window of (step start - send time of its oldest input)
        "msgs_received": _INT,
        "msgs_dropped": _INT,  # sequence gaps
        "msgs_invalid": _INT,  # failed to decode / validate
    }),
}

FULL_RATE_SUFFIX = "/full"
"""``log_full_rate``: a port's every integration step also goes to ``TOPIC/full`` (same schema;
:mod:`protocol.coupling`). Every state and flow topic has that twin in the table."""


def _add_full_rate_twin(topic: str, schema: TopicSchema) -> None:
    if schema.kind != "event" and not topic.startswith("sim/") and not topic.endswith(FULL_RATE_SUFFIX):
        _TABLE[topic + FULL_RATE_SUFFIX] = schema


for _topic, _schema in list(_TABLE.items()):
    _add_full_rate_twin(_topic, _schema)

SCHEMAS: Mapping[str, TopicSchema] = MappingProxyType(_TABLE)
"""Topic -> schema; read-only view (add topics with :func:`register_schema`)."""


def register_schema(topic: str, schema: TopicSchema) -> None:
    """Add or replace the schema of ``topic`` (test toys, plug-in services), and of its full-rate twin.

    Raises
    ------
    MessageError
        If ``topic`` is empty, contains NUL, or ``schema`` is not a TopicSchema.
    """
    if not isinstance(topic, str) or not topic or "\0" in topic:
        raise MessageError(f"topic {topic!r}: must be a non-empty string without NUL")
    if not isinstance(schema, TopicSchema):
        raise MessageError(f"topic {topic!r}: schema must be a TopicSchema, got {type(schema).__name__}")
    _TABLE[topic] = schema
    _add_full_rate_twin(topic, schema)


def schema_for(topic: str) -> TopicSchema:
    """The schema of ``topic``; MessageError naming the topic if it has none."""
    try:
        return _TABLE[topic]
    except KeyError:
        raise MessageError(f"topic {topic!r}: no schema (known: {sorted(_TABLE)})") from None
