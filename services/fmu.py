"""``kind = "fmu"``: a service that hosts an FMI 2.0 co-simulation FMU (through FMPy).

The FMU is the model: at each step of the service the inputs the port map names are set
from the step's input samples (:mod:`protocol.stepping`'s rule), the FMU takes one
``fmi2DoStep`` of the service's period ``h`` from ``t``, and its output variables are read
and published, stamped ``t + h``, on one topic. ``initial(t0)`` sets up the experiment at
``t0``, applies the start values, enters and leaves initialization mode and publishes the
outputs at ``t0``. Parameters are what the FMU was given before initialization; every
other value lives inside the FMU instance.

Config::

    [services.leg]
    kind = "fmu"
    rate_hz = 1000                      # the FMU's communication step h = 1 / rate_hz (a whole multiple of
                                        # the base tick, like every service's period)
    fmu = "fmu/ActuatorLeg.fmu"         # relative to the config file (sim.config_file, which launch.py
                                        # sets; without it, to the working directory)
    inputs = {x_cmd = "toy/state1:x"}   # FMU input variable = "TOPIC:FIELD" or "TOPIC:FIELD[i, j]" (a
                                        # scalar of an f8, int or bool field; a state topic is held, a flow
                                        # topic's overlap-weighted mean over the step is used)
    outputs = {topic = "rig/actuator", kind = "state", variables = ["x", "v", "F"]}
                                        # the topic it publishes (kind "state" or "flow"; variables:
                                        # default every output variable of the FMU, in its order)
    start = {k = 2.0e4}                 # start values of parameters (or inputs), by variable name

:class:`FmuParams` declares the table's keys (units in its fields' metadata, :mod:`protocol.params`; ``inputs``
and ``start`` tables of free keys, the FMU's variables); :data:`PARAMS` names it for :mod:`protocol.registry`, and
a built service holds them in :attr:`FmuSpec.params`.

``launch.py check`` reads the FMU's ``modelDescription.xml`` (:func:`validate`) and refuses,
naming the key and the variable: a file that is not there or not an FMU; an FMI version other
than 2.0 (FMPy 0.3.32 reads FMI 3.0 too, but this host is written and tested for FMI 2.0 only);
a model-exchange-only FMU (no solver is added); no binary for this platform; unknown variables;
an input map onto a variable whose causality is not ``input``, or whose variability is not
``continuous`` or ``discrete``, or whose type does not fit the field (Real: f8, int, bool;
Integer: int, bool; Boolean: bool); an output that is not an ``output`` variable; a start
value for a variable that is not a parameter or an input, a constant, or of the wrong type;
and a step the FMU cannot take (``canHandleVariableCommunicationStepSize`` false and a
``DefaultExperiment`` ``stepSize`` other than ``h``).

The output topic's schema
-------------------------
It is made from the FMU's variables (:func:`output_schema`: Real -> ``("f8", ())``,
Integer -> ``int``, Boolean -> ``bool``, String -> ``str``; the schema name
``berthsim.fmu.SERVICE``) and registered (:func:`protocol.messages.register_schema`)
whenever this module says the service's ports, validates or builds any FMU service of the
run, and in every process of the run through :func:`schemas` (called by
:func:`protocol.config.register_schemas` in each worker before it builds its services, and by
the logger), so the logger and any consumer decode the topic wherever they run (one FMU service
may take another's topic). The log then holds the topic's JSON schema like any other's, so
replay and the exporters read it from the log.

Snapshots and sweeps
--------------------
A snapshot (:func:`protocol.scheduler.snapshot`) pickles the models. This one pickles
its configuration and the FMU's serialized state (``fmi2GetFMUstate`` then
``fmi2SerializeFMUstate``; :class:`FmuInstance`); unpickling instantiates the FMU afresh,
initializes it and sets the state back (an instance not yet initialized pickles as its
configuration alone). An FMU's start values act in its initialization, before any window of
a sweep that runs from a snapshot: such a sweep refuses them (``tools.sweep.transplant``:
``leg.instance ... the parameter acts before it``); a sweep over them starts at 0. An FMU without
``canGetAndSetFMUstate`` and ``canSerializeFMUstate`` cannot be saved: the snapshot, and so
a sweep that runs from one, is refused with a :class:`errors.LifecycleError` naming the
service, the file and the two flags.

Realtime admission times its ``step`` like any model's (:func:`protocol.realtime.calibrate`
builds it with :func:`build`). Overhead of the host per step beside the FMU's own
``doStep``: ``bench/bench_fmu.py``.
"""

from __future__ import annotations

import ctypes
import math
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from errors import ConfigError, LifecycleError
from protocol.messages import SCHEMAS, TopicSchema, register_schema
from protocol.params import from_values, param
from protocol.service import Inputs, Port, ServicePorts

__all__ = ["PARAMS", "TABLES", "OPTIONS", "FmuInstance", "FmuModel", "FmuOutputs", "FmuParams", "FmuSpec", "build",
           "fmu_path", "output_schema", "ports", "spec_of", "validate"]

TABLES: tuple[str, ...] = ()
OPTIONS: dict[str, Any] = {"fmu": str, "inputs": "table", "outputs": "table", "start": "table"}
DEFAULTS: dict[str, Any] = {"inputs": {}, "start": {}}
"""The value of each key of :data:`OPTIONS` that ``[services.NAME]`` may leave out (``fmu`` and
``outputs.topic`` it may not)."""
OUTPUT_DEFAULTS: dict[str, Any] = {"kind": "state", "variables": None}
"""The value of each key of ``outputs`` it may leave out (``variables`` None: every output variable, in order)."""


@dataclass(frozen=True)
class FmuOutputs:
    """``outputs`` of ``[services.NAME]``: the topic the FMU publishes."""

    topic: str = param("-")
    kind: str = param("-")                              # "state" | "flow"
    variables: tuple[str, ...] | None = param("-")      # FMU output variables; None: every one, in its order


@dataclass(frozen=True)
class FmuParams:
    """``[services.NAME]`` of an FMU service, declared (:data:`OPTIONS`, defaults :data:`DEFAULTS`; the module
    docstring says what each key does). Each field's unit is in its metadata (:func:`protocol.params.units`); the
    tables of FMU variables are plain dicts, checked against the model description by :func:`validate`.
    :attr:`FmuSpec.params` holds them for a built service."""

    fmu: str = param("-")                               # the FMU file, relative to the config file
    inputs: dict[str, str] = param("-")                 # input variable -> "TOPIC:FIELD" or "TOPIC:FIELD[i, j]"
    outputs: FmuOutputs = param("-")
    start: dict[str, Any] = param("-")                  # variable -> start value, in the variable's own unit

    @classmethod
    def from_service(cls, config: Mapping[str, Any], name: str) -> FmuParams:
        """``[services.NAME]`` of ``config`` with :data:`DEFAULTS` filled in, from values :func:`validate` has
        checked (the table's other keys, ``kind``, ``rate_hz``, ..., are the runtime's).

        Raises
        ------
        KeyError
            If ``config`` has no service ``name``, or it has no ``fmu`` or ``outputs.topic``.
        TypeError, ValueError
            If a value does not convert (a configuration :func:`validate` refuses).
        """
        svc = config["services"][name]
        return from_values(cls, {**DEFAULTS, **svc, "outputs": {**OUTPUT_DEFAULTS, **svc.get("outputs", {})}})


PARAMS = FmuParams
"""The kind's declared parameters (:mod:`protocol.registry`)."""

_FIELD_OF_TYPE = {"Real": ("f8", ()), "Integer": ("int", ()), "Enumeration": ("int", ()),
                  "Boolean": ("bool", ()), "String": ("str", ())}
_TAKES = {"Real": ("f8", "int", "bool"), "Integer": ("int", "bool"), "Enumeration": ("int", "bool"),
          "Boolean": ("bool",)}
"""FMU input type -> the schema field types that may drive it."""
_INPUT_RE = re.compile(r"^([^:\s]+):([A-Za-z_][A-Za-z0-9_]*)(?:\[\s*(\d+(?:\s*,\s*\d+)*)\s*\])?$")


@dataclass(frozen=True)
class InputMap:
    """One FMU input driven by one scalar of a topic's field."""

    variable: str
    vr: int
    type: str
    topic: str
    kind: str
    field: str
    index: tuple[int, ...]


@dataclass(frozen=True)
class FmuSpec:
    """A configured FMU service, parsed once from ``[services.NAME]`` and the model description.

    Attributes
    ----------
    path : Path
        The FMU file (resolved).
    guid, model_identifier : str
    inputs : tuple[InputMap, ...]
    topic : str
        The output topic.
    kind : {"state", "flow"}
    outputs : tuple[tuple[str, int, str], ...]
        (variable, value reference, FMI type) per output field, in order.
    start : tuple[tuple[str, int, str, Any], ...]
        (variable, value reference, FMI type, value) of the start values.
    can_save : bool
        ``canGetAndSetFMUstate`` and ``canSerializeFMUstate``.
    flags : str
        The two flags as the model description gives them (for messages).
    params : FmuParams
        ``[services.NAME]`` as configured, declared.
    """

    path: Path
    guid: str
    model_identifier: str
    inputs: tuple[InputMap, ...]
    topic: str
    kind: str
    outputs: tuple[tuple[str, int, str], ...]
    start: tuple[tuple[str, int, str, Any], ...]
    can_save: bool
    flags: str
    params: FmuParams


def fmu_path(config: Mapping[str, Any], name: str) -> Path:
    """``services.NAME.fmu`` resolved: relative to the directory of ``sim.config_file`` when the run
    knows it (``launch.py`` sets it), else to the working directory."""
    p = Path(str(config["services"][name].get("fmu", "")))
    if p.is_absolute():
        return p
    cfg = (config.get("sim") or {}).get("config_file")
    return (Path(cfg).parent / p) if cfg else p


@lru_cache(maxsize=16)
def _description(path: str, mtime_ns: int, size: int) -> Any:
    """The FMU's model description (FMPy), read once per file version."""
    from fmpy import read_model_description
    return read_model_description(path, validate=False)


def _read(path: Path) -> Any:
    st = path.stat()
    return _description(str(path.resolve()), st.st_mtime_ns, st.st_size)


def _type_ok(fmi_type: str, value: Any) -> bool:
    if fmi_type == "Real":
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if fmi_type in ("Integer", "Enumeration"):
        return isinstance(value, int) and not isinstance(value, bool) and -2**31 <= value < 2**31
    if fmi_type == "Boolean":
        return isinstance(value, bool)
    return isinstance(value, str)


def _spec(config: Mapping[str, Any], name: str, problems: list[str]) -> FmuSpec | None:
    """Parse ``[services.NAME]`` against the FMU's model description; problems appended, each naming the
    key and the variable; None if any."""
    where = f"services.{name}"
    svc = config["services"][name]
    before = len(problems)
    if not isinstance(svc.get("fmu"), str) or not svc["fmu"]:
        problems.append(f"{where}.fmu: missing (the FMU file, relative to the config file)")
        return None
    path = fmu_path(config, name)
    if not path.is_file():
        problems.append(f"{where}.fmu: no file {str(path)!r}")
        return None
    try:
        md = _read(path)
    except Exception as err:  # noqa: BLE001 - any failure to read it is the file's problem
        problems.append(f"{where}.fmu: {str(path)!r} is not an FMU FMPy can read: {type(err).__name__}: {err}")
        return None
    if md.fmiVersion != "2.0":
        problems.append(f"{where}.fmu: {path.name!r} is FMI {md.fmiVersion}; this host runs FMI 2.0 co-simulation "
                        "FMUs only")
        return None
    cs = md.coSimulation
    if cs is None:
        problems.append(f"{where}.fmu: {path.name!r} is a model-exchange-only FMU (no CoSimulation element); this "
                        "host runs co-simulation FMUs and adds no solver")
        return None
    from fmpy import platform, supported_platforms
    if platform not in supported_platforms(str(path)):
        problems.append(f"{where}.fmu: {path.name!r} has no binary for this platform ({platform}; it has "
                        f"{', '.join(supported_platforms(str(path))) or 'none'})")
        return None
    variables = {v.name: v for v in md.modelVariables}
    rate = svc.get("rate_hz")
    h = 1.0 / rate if isinstance(rate, (int, float)) and not isinstance(rate, bool) and rate > 0 else None
    fixed = md.defaultExperiment.stepSize if md.defaultExperiment is not None else None
    if (h is not None and not cs.canHandleVariableCommunicationStepSize and fixed is not None
            and not math.isclose(float(fixed), h, rel_tol=1e-9)):
        problems.append(f"{where}.rate_hz: the FMU {path.name!r} takes only its fixed step {float(fixed)!r} s "
                        f"(canHandleVariableCommunicationStepSize false), the service steps {h!r} s "
                        f"(rate_hz = {rate!r})")
    # inputs
    ins: list[InputMap] = []
    table = svc.get("inputs", {})
    for var, target in (table.items() if isinstance(table, dict) else ()):
        key = f"{where}.inputs.{var}"
        v = variables.get(var)
        if v is None:
            problems.append(f"{key}: the FMU {path.name!r} has no variable {var!r}")
            continue
        if v.causality != "input":
            problems.append(f"{key}: variable {var!r} has causality {v.causality!r}, not 'input' (parameters go in "
                            f"{where}.start)")
            continue
        if v.variability not in ("continuous", "discrete"):
            problems.append(f"{key}: variable {var!r} has variability {v.variability!r}; an input fed every step "
                            "must be 'continuous' or 'discrete'")
            continue
        m = _INPUT_RE.match(target) if isinstance(target, str) else None
        if m is None:
            problems.append(f"{key}: expected \"TOPIC:FIELD\" or \"TOPIC:FIELD[i, j]\", got {target!r}")
            continue
        topic, fname, idx_text = m.groups()
        schema = SCHEMAS.get(topic)
        if schema is None:
            problems.append(f"{key}: topic {topic!r} has no schema (no service of the run registers it)")
            continue
        if schema.kind == "event":
            problems.append(f"{key}: topic {topic!r} is an event topic; an FMU input takes a state or a flow")
            continue
        fspec = schema.fields.get(fname)
        if fspec is None:
            problems.append(f"{key}: topic {topic!r} has no field {fname!r} (it has {', '.join(schema.fields)})")
            continue
        index = tuple(int(i) for i in idx_text.split(",")) if idx_text else ()
        ftype, shape = fspec
        if len(index) != len(shape) or any(i >= n for i, n in zip(index, shape, strict=False)):
            problems.append(f"{key}: {target!r} is not a scalar of {topic}:{fname} (shape {shape}, index "
                            f"{list(index)})")
            continue
        if ftype not in _TAKES.get(v.type, ()):
            problems.append(f"{key}: variable {var!r} is {v.type}; field {topic}:{fname} is {ftype}")
            continue
        ins.append(InputMap(var, int(v.valueReference), v.type, topic, schema.kind, fname, index))
    # outputs
    outs_t = svc.get("outputs", {})
    outs_t = outs_t if isinstance(outs_t, dict) else {}
    topic = outs_t.get("topic")
    kind = outs_t.get("kind", "state")
    extra = sorted(set(outs_t) - {"topic", "kind", "variables"})
    if extra:
        problems.append(f"{where}.outputs: unknown keys {extra} (topic, kind, variables)")
    if not isinstance(topic, str) or not topic or "\0" in topic or topic.startswith("sim/"):
        problems.append(f"{where}.outputs.topic: expected a topic name (not sim/...), got {topic!r}")
    elif topic in SCHEMAS and not SCHEMAS[topic].name.startswith("berthsim.fmu."):
        problems.append(f"{where}.outputs.topic: {topic!r} is a topic of berthsim's own schema "
                        f"({SCHEMAS[topic].name}); an FMU publishes a topic of its own")
    if kind not in ("state", "flow"):
        problems.append(f"{where}.outputs.kind: expected 'state' or 'flow', got {kind!r}")
    names = outs_t.get("variables")
    if names is None:
        names = [v.name for v in md.modelVariables if v.causality == "output"]
        if not names:
            problems.append(f"{where}.outputs: the FMU {path.name!r} has no output variables")
    elif not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
        problems.append(f"{where}.outputs.variables: expected a non-empty list of variable names, got {names!r}")
        names = []
    outs: list[tuple[str, int, str]] = []
    for var in names:
        v = variables.get(var)
        if v is None:
            problems.append(f"{where}.outputs.variables: the FMU {path.name!r} has no variable {var!r}")
        elif v.causality != "output":
            problems.append(f"{where}.outputs.variables: variable {var!r} has causality {v.causality!r}, not "
                            "'output'")
        else:
            outs.append((var, int(v.valueReference), v.type))
    # start values
    starts: list[tuple[str, int, str, Any]] = []
    table = svc.get("start", {})
    for var, value in (table.items() if isinstance(table, dict) else ()):
        key = f"{where}.start.{var}"
        v = variables.get(var)
        if v is None:
            problems.append(f"{key}: the FMU {path.name!r} has no variable {var!r}")
        elif v.causality not in ("parameter", "input") or v.variability == "constant":
            problems.append(f"{key}: variable {var!r} (causality {v.causality!r}, variability {v.variability!r}) "
                            "takes no start value; only parameters and inputs do")
        elif not _type_ok(v.type, value):
            problems.append(f"{key}: variable {var!r} is {v.type}, got {value!r}")
        else:
            starts.append((var, int(v.valueReference), v.type, value))
    if len(problems) > before or not isinstance(topic, str):
        return None
    flags = (f"canGetAndSetFMUstate {str(bool(cs.canGetAndSetFMUstate)).lower()}, "
             f"canSerializeFMUstate {str(bool(cs.canSerializeFMUstate)).lower()}")
    return FmuSpec(path, md.guid, cs.modelIdentifier, tuple(ins), topic, str(kind), tuple(outs), tuple(starts),
                   bool(cs.canGetAndSetFMUstate and cs.canSerializeFMUstate), flags,
                   FmuParams.from_service(config, name))


def spec_of(config: Mapping[str, Any], name: str) -> FmuSpec:
    """The service's :class:`FmuSpec`.

    Raises
    ------
    ConfigError
        With every problem :func:`validate` would list.
    """
    problems: list[str] = []
    spec = _spec(config, name, problems)
    if spec is None:
        raise ConfigError("; ".join(problems), problems)
    return spec


def output_schema(spec: FmuSpec, name: str) -> TopicSchema:
    """The output topic's schema: one scalar field per output variable (see the module docstring)."""
    return TopicSchema(f"berthsim.fmu.{name}", 1, "flow" if spec.kind == "flow" else "state",
                       {var: _FIELD_OF_TYPE[typ] for var, _, typ in spec.outputs})


def _register(spec: FmuSpec, name: str) -> None:
    schema = output_schema(spec, name)
    if SCHEMAS.get(spec.topic) != schema:
        register_schema(spec.topic, schema)


def _register_others(config: Mapping[str, Any], name: str) -> None:
    """Register the output schemas of the run's other FMU services (one may take another's topic,
    whatever their order in the config or their processes); those with problems are left to their
    own :func:`validate`."""
    others = [n for n, s in config["services"].items()
              if n != name and isinstance(s, dict) and s.get("kind") == "fmu"]
    while others:  # a chain of FMUs registers in as many rounds as it is long
        done = []
        for other in others:
            spec = _spec(config, other, [])
            if spec is not None:
                _register(spec, other)
                done.append(other)
        if not done:
            return
        others = [n for n in others if n not in done]


def validate(config: dict[str, Any], name: str) -> list[str]:
    """Problems of ``[services.NAME]`` of an FMU service, each naming its key and, for a variable, the
    variable (see the module docstring for what is refused)."""
    problems: list[str] = []
    _register_others(config, name)
    _spec(config, name, problems)
    return problems


def schemas(config: dict[str, Any], name: str) -> None:
    """Register the output topic's schema of FMU service ``name`` (and those of the run's other FMU
    services first, which it may take): :func:`protocol.config.register_schemas` calls this in every
    process of the run, so the logger and any consumer decode the topic wherever they run."""
    _register_others(config, name)
    _register(spec_of(config, name), name)


def ports(config: dict[str, Any], name: str) -> ServicePorts:
    """The service's ports (a model): a port per input topic, the output topic; registers its schema."""
    spec = spec_of(config, name)
    _register(spec, name)
    topics: dict[str, str] = {}
    for m in spec.inputs:
        topics.setdefault(m.topic, m.kind)
    return ServicePorts("model", tuple(Port(t, k) for t, k in topics.items()),  # type: ignore[arg-type]
                        (Port(spec.topic, spec.kind),))  # type: ignore[arg-type]


_SETTERS = {"Real": ("fmi2SetReal", ctypes.c_double), "Integer": ("fmi2SetInteger", ctypes.c_int),
            "Enumeration": ("fmi2SetInteger", ctypes.c_int), "Boolean": ("fmi2SetBoolean", ctypes.c_int)}
_GETTERS = {"Real": ("fmi2GetReal", ctypes.c_double), "Integer": ("fmi2GetInteger", ctypes.c_int),
            "Enumeration": ("fmi2GetInteger", ctypes.c_int), "Boolean": ("fmi2GetBoolean", ctypes.c_int)}


class _Block:
    """Value references of one FMI type and a preallocated ctypes buffer for their values."""

    def __init__(self, fn: str, ctype: Any, vrs: list[int], cast: Any) -> None:
        self.fn = fn
        self.n = len(vrs)
        self.vr = (ctypes.c_uint * self.n)(*vrs)
        self.buf = (ctype * self.n)()
        self.cast = cast


class FmuInstance:
    """One instance of the FMU and the handles a step uses (preallocated ctypes buffers per FMI type).

    It pickles as its spec, its service's name and, once initialized, its start time and the FMU's
    serialized state (``fmi2GetFMUstate`` then ``fmi2SerializeFMUstate``); unpickling instantiates
    the FMU afresh and, for an initialized one, initializes it and sets the state back.

    Raises
    ------
    errors.LifecycleError
        When pickled initialized and the FMU cannot get, set and serialize its state (naming the
        service, the file and both flags).
    """

    def __init__(self, spec: FmuSpec, name: str) -> None:
        from fmpy import extract
        from fmpy.fmi2 import FMU2Slave
        self.spec = spec
        self.name = name
        self.t0_ns: int | None = None
        self.dir = extract(str(spec.path))
        self.fmu = FMU2Slave(guid=spec.guid, unzipDirectory=self.dir, modelIdentifier=spec.model_identifier,
                             instanceName=name)
        self.fmu.instantiate()
        self.component = self.fmu.component
        self.do_step = self.fmu.fmi2DoStep
        by_type: dict[str, list[InputMap]] = {}
        for m in spec.inputs:
            by_type.setdefault(m.type, []).append(m)
        self.calls: list[tuple[Any, _Block, list[InputMap]]] = []
        for typ, maps in by_type.items():
            fn, ctype = _SETTERS[typ]
            b = _Block(fn, ctype, [m.vr for m in maps], None)
            self.calls.append((getattr(self.fmu, fn), b, maps))
        self.reads: list[tuple[Any, _Block, list[str]]] = []
        self.strings: list[tuple[int, str]] = []
        outs_by_type: dict[str, list[tuple[str, int]]] = {}
        for var, vr, typ in spec.outputs:
            if typ == "String":
                self.strings.append((vr, var))
            else:
                outs_by_type.setdefault(typ, []).append((var, vr))
        for typ, pairs in outs_by_type.items():
            fn, ctype = _GETTERS[typ]
            cast = bool if typ == "Boolean" else (int if typ != "Real" else None)
            b = _Block(fn, ctype, [vr for _, vr in pairs], cast)
            self.reads.append((getattr(self.fmu, fn), b, [v for v, _ in pairs]))
        self.order = [var for var, _, _ in spec.outputs]
        # every output Real, in the description's order: the body straight from the one buffer
        self.simple = self.reads[0] if (len(self.reads) == 1 and not self.strings and self.reads[0][1].cast is None
                                        and self.reads[0][2] == self.order) else None

    def initialize(self, t0_ns: int) -> None:
        """Set up the experiment at ``t0_ns``, apply the start values, enter and leave initialization."""
        self.t0_ns = t0_ns
        self.fmu.setupExperiment(startTime=t0_ns * 1e-9)
        for _, vr, typ, value in self.spec.start:
            {"Real": self.fmu.setReal, "Integer": self.fmu.setInteger, "Enumeration": self.fmu.setInteger,
             "Boolean": self.fmu.setBoolean, "String": self.fmu.setString}[typ]([vr], [value])
        self.fmu.enterInitializationMode()
        self.fmu.exitInitializationMode()

    def outputs(self) -> dict[str, dict[str, Any]]:
        """The output body, read from the FMU."""
        if self.simple is not None:
            fn, b, names = self.simple
            fn(self.component, b.vr, b.n, b.buf)
            return {self.spec.topic: dict(zip(names, b.buf[:], strict=True))}
        body: dict[str, Any] = {}
        for fn, b, names in self.reads:
            fn(self.component, b.vr, b.n, b.buf)
            cast = b.cast
            for var, x in zip(names, b.buf, strict=True):
                body[var] = x if cast is None else cast(x)
        if self.strings:
            values = self.fmu.getString([vr for vr, _ in self.strings])
            for (_, var), s in zip(self.strings, values, strict=True):
                body[var] = s.decode() if isinstance(s, bytes) else str(s)
        return {self.spec.topic: {var: body[var] for var in self.order}}

    def close(self) -> None:
        """Terminate and free the instance; remove its extracted files."""
        if self.fmu is not None:
            if self.t0_ns is not None:
                self.fmu.terminate()
            self.fmu.freeInstance()
            self.fmu = None
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def __getstate__(self) -> dict[str, Any]:
        """See the class docstring."""
        blob = None
        if self.t0_ns is not None:
            if not self.spec.can_save:
                raise LifecycleError(f"services.{self.name}: the FMU {str(self.spec.path)!r} cannot save its state "
                                     f"({self.spec.flags}): a snapshot, and a sweep run from one, is refused")
            state = self.fmu.getFMUstate()
            try:
                blob = bytes(self.fmu.serializeFMUstate(state))
            finally:
                self.fmu.freeFMUstate(state)
        return {"spec": self.spec, "name": self.name, "t0_ns": self.t0_ns, "fmu_state": blob}

    def __setstate__(self, saved: dict[str, Any]) -> None:
        self.__init__(saved["spec"], saved["name"])  # type: ignore[misc]
        if saved["t0_ns"] is not None:
            self.initialize(saved["t0_ns"])
            state = self.fmu.deSerializeFMUstate(saved["fmu_state"])
            try:
                self.fmu.setFMUstate(state)
            finally:
                self.fmu.freeFMUstate(state)


class FmuModel:
    """An FMU as a :class:`protocol.service.ServiceModel` (see the module docstring). Its parameters are
    ``spec``; its whole state is the FMU instance (:class:`FmuInstance`, which pickles as the FMU's
    serialized state).

    Parameters
    ----------
    spec : FmuSpec
    name : str
    period_ns : int
        The communication step. [ns]
    """

    def __init__(self, spec: FmuSpec, name: str, period_ns: int) -> None:
        self.spec = spec
        self.name = name
        self.period_ns = period_ns
        topics: dict[str, str] = {}
        for m in spec.inputs:
            topics.setdefault(m.topic, m.kind)
        self.inputs = tuple(Port(t, k) for t, k in topics.items())  # type: ignore[arg-type]
        self.outputs = (Port(spec.topic, spec.kind),)  # type: ignore[arg-type]
        _register(spec, name)
        self.instance = FmuInstance(spec, name)

    def initial(self, t0_ns: int) -> dict[str, dict[str, Any]]:
        """Initialize the FMU at ``t0_ns`` (start values applied) and return its outputs there."""
        self.instance.initialize(t0_ns)
        return self.instance.outputs()

    def step(self, t_ns: int, h_ns: int, u: Inputs) -> dict[str, dict[str, Any]]:
        """Set the inputs from ``u``, ``fmi2DoStep(t, h)``, return the outputs at ``t + h``.

        Raises
        ------
        fmpy.fmi1.FMICallException
            If the FMU reports an error (the shell fails the run, naming the service).
        """
        inst = self.instance
        for fn, b, maps in inst.calls:
            buf = b.buf
            for i, m in enumerate(maps):
                if m.kind == "flow":
                    x = u.mean(m.topic, m.field)
                else:
                    x = u.state(m.topic).body[m.field]
                buf[i] = x[m.index] if m.index else x
            fn(inst.component, b.vr, b.n, buf)
        inst.do_step(inst.component, t_ns * 1e-9, h_ns * 1e-9, 1)
        return inst.outputs()

    def close(self) -> None:
        """Terminate and free the FMU instance; remove its extracted files."""
        self.instance.close()


def build(config: dict[str, Any], name: str, period_ns: int) -> FmuModel:
    """The FMU model of service ``name`` (the FMU instantiated, not yet initialized). The modules of the
    run's other services are imported first, and the other FMU services' outputs registered: the
    schemas of the topics it takes.

    Raises
    ------
    ConfigError
        If the configuration has a problem :func:`validate` lists.
    """
    from protocol.config import service_module
    for other, svc in config["services"].items():  # the producers' modules register their topics' schemas
        kind = svc.get("kind") if isinstance(svc, dict) else None
        if other != name and isinstance(kind, str) and kind != "fmu":  # the other FMUs' topics: below
            service_module(kind)
    _register_others(config, name)  # and the other FMU services' topics
    return FmuModel(spec_of(config, name), name, period_ns)
