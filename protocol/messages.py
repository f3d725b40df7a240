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

Who declares a topic
--------------------
A topic's schema is declared by the service kind that produces it: its kind module's
``TOPICS`` (topic -> :class:`TopicSchema`), which :mod:`protocol.registry` registers when it
imports the kind (:func:`protocol.registry.kind_module`). This module holds the runtime's own
topics only (``sim/*``) and the schema vocabulary (:func:`f8`, :data:`BOOL`, ...). A process
learns a run's topics by importing the run's kinds (:func:`protocol.config.register_schemas`,
in every worker and the logger); :data:`SCHEMAS` and :func:`schema_for` import every known kind
once (:func:`protocol.registry.load_topic_schemas`, installed by the registry, which
:mod:`protocol.codec` imports) the first time they are asked for a topic not yet registered, so
that a tool decoding a shipped topic needs no config. A service owner adds
a field by editing their kind's ``TOPICS`` (and bumps ``version`` if the change is not backward
compatible); topics made from a configuration (an FMU's) are registered by the kind's
``schemas(config, name)`` hook with :func:`register_schema`. The ``name`` (e.g.
``"berthsim.OrbiterState"``) is what the logger writes into MCAP.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from errors import MessageError
from protocol.service import PortKind

__all__ = [
    "FULL_RATE_SUFFIX",
    "SEPARATOR",
    "CONTROL_PREFIX",
    "MAX_PAYLOAD_BYTES",
    "FIELD_TYPES",
    "BOOL", "EVENTS", "INT", "LIST_STR", "MAP", "STR", "f8",
    "TopicSchema",
    "SCHEMAS",
    "register_schema",
    "set_producer_loader",
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



def f8(*shape: int) -> FieldSpec:
    """The field type of a float64 of ``shape`` (none: a scalar): ``f8(3)`` a vector, ``f8(4, 4)`` a matrix."""
    return ("f8", tuple(shape))


BOOL: FieldSpec = ("bool", ())
"""The field type of a bool."""
STR: FieldSpec = ("str", ())
"""The field type of a UTF-8 string."""
INT: FieldSpec = ("int", ())
"""The field type of a signed 64-bit integer."""
MAP: FieldSpec = ("map", ())
"""The field type of a map str -> (int | finite float | str | bool)."""
LIST_STR: FieldSpec = ("list[str]", ())
"""The field type of a list of strings."""
EVENTS: FieldSpec = ("events", ())
"""The field type of an event list (each a map with ``"kind"``)."""


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
    # The runtime's own topics.
    "sim/control": TopicSchema("berthsim.SimControl", 1, "event", {
        "cmd": STR,  # probe | start | freeze | resume | stop | eos (a source has sent all it has)
                     # | diverged (the launcher: a model's output was not finite; info: service, t, reason)
                     # | freeze, resume (the launcher: info t_ns, by, reason) | held (the launcher: what a
                     # frozen service said, e.g. the rig bridge's state; info service, t_ns, frozen_s, rig)
        "info": MAP,
    }),
    "sim/stats": TopicSchema("berthsim.SimStats", 1, "state", {
        "state": STR,  # lifecycle state of the sender
        "mode": STR,  # lockstep | realtime
        "steps": INT,
        "overruns": INT,
        "jitter_p50_ns": INT,  # realtime step-start lateness over the window since the last stats
        "jitter_p99_ns": INT,
        "input_age_ns": INT,  # realtime: max over the window of (step start - send time of its oldest input)
        "msgs_received": INT,
        "msgs_dropped": INT,  # sequence gaps
        "msgs_invalid": INT,  # failed to decode / validate
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

_producer_loader: Callable[[], object] | None = None
"""What registers every known kind's ``TOPICS`` (:func:`protocol.registry.load_topic_schemas`, which the registry
installs here when it is imported: :func:`set_producer_loader`); called once, on the first unknown topic."""


def set_producer_loader(loader: Callable[[], object]) -> None:
    """Install what :data:`SCHEMAS` calls once on its first unknown topic (the registry installs its
    :func:`protocol.registry.load_topic_schemas`; the runtime imports nothing of the kinds itself)."""
    global _producer_loader
    _producer_loader = loader


def _load_producers() -> bool:
    """Call the producer loader if it is installed and has not run; whether it ran now."""
    global _producer_loader
    loader, _producer_loader = _producer_loader, None
    if loader is None:
        return False
    loader()
    return True


class _Schemas(Mapping[str, TopicSchema]):
    """Topic -> schema, read-only: the topics registered so far, and on the first miss every known kind's."""

    def __getitem__(self, topic: str) -> TopicSchema:
        schema = _TABLE.get(topic)
        if schema is None and _load_producers():
            schema = _TABLE.get(topic)
        if schema is None:
            raise KeyError(topic)
        return schema

    def __iter__(self) -> Iterator[str]:
        _load_producers()
        return iter(list(_TABLE))

    def __len__(self) -> int:
        _load_producers()
        return len(_TABLE)

    def __repr__(self) -> str:
        return f"SCHEMAS({sorted(_TABLE)})"


SCHEMAS: Mapping[str, TopicSchema] = _Schemas()
"""Topic -> schema; read-only (add topics with a kind's ``TOPICS`` or :func:`register_schema`). A topic not yet
registered makes it import every known kind once (see *Who declares a topic*)."""


def register_schema(topic: str, schema: TopicSchema) -> None:
    """Add or replace the schema of ``topic`` (a kind's ``TOPICS``, a topic made from a config), and of its
    full-rate twin.

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
        return SCHEMAS[topic]
    except KeyError:
        raise MessageError(f"topic {topic!r}: no schema (known: {sorted(_TABLE)})") from None
