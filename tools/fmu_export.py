"""``launch.py fmu export SERVICE CONFIG -o NAME.fmu``: one berthsim service model as an FMI 2.0
co-simulation FMU (built with pythonfmu).

What the FMU is
---------------
A *tool-coupling* FMU: its binary is pythonfmu's wrapper, which runs the service's own Python
code. The importing machine needs Python (the interpreter pythonfmu's wrapper was built for)
and berthsim importable with its dependencies; the FMU records the directory berthsim was
exported from (in the generated module; pythonfmu's wrapper runs it again at every instantiation,
so it reads no file) and adds it to ``sys.path`` when berthsim is not importable otherwise. The
configuration (the whole run's, so the service reads the tables it reads in a run) travels
inside the FMU (``resources/berthsim_service.json``); instantiating the FMU builds the
service's model with its module's ``build``, as a run does.

Variables
---------
FMI 2.0 has no arrays, so every field of every port is flattened to scalars named
``TOPIC.FIELD[i]`` (``TOPIC`` with its slashes as dots; a matrix ``[i,j]``, C order; a scalar
field no index): ``contact.wrench.F_Lo_W[0]`` … ``[5]``, ``toy.state1.x``. f8 fields are Real,
int fields Integer, bool fields Boolean, str fields String; fields of other types (lists of
strings, maps) are not exported (an input sample carries them empty), nor are the derived
fields the runtime fills in (``F_peak``). An event port is one String, ``TOPIC.events``: the
step's events as a JSON list (``"[]"`` or ``""``: none; an output is ``"[]"`` at a step
without events).

- Inputs: the fields of the model's input ports. A state port also has ``TOPIC.t_s``
  (input, s): the instant its sample holds at (a lockstep run hands a model the sample of its
  producer's coupling instant ``floor(t / H) H``; models that predict use it). A flow port's
  values are its mean over the step. Their start values are the producers' initial outputs
  in the exported configuration (zero for a topic no model of it produces).
- Outputs: the fields of its state and flow output ports, as ``step`` returns them at
  ``t + h`` (``initial(t0)`` in initialization mode).

Real variables are continuous, the others discrete.

Stepping: ``doStep(t, h)`` calls the model's ``step(t, h, u)`` with ``t`` and ``h`` rounded to
whole nanoseconds; ``h`` must be the service's period (``canHandleVariableCommunicationStepSize``
false, ``DefaultExperiment stepSize`` the period): another step returns fmi2Error.

State: ``canGetAndSetFMUstate`` and ``canSerializeFMUstate`` are true. The state is the
model's ``context`` when it keeps one (:mod:`protocol.service`, *State in a context*), else
the whole model, pickled, with the variables' values.
"""

from __future__ import annotations

import argparse
import base64
import json
import pickle
import re
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

import numpy as np

from errors import ConfigError
from protocol.messages import SCHEMAS
from protocol.service import BoundModel, Port, Sample

__all__ = ["SPEC_FILE", "ServiceSlave", "Variable", "add_arguments", "export", "main", "variables"]

SPEC_FILE = "berthsim_service.json"
ROOT = Path(__file__).resolve().parents[1]
_FMI_TYPE = {"f8": "Real", "int": "Integer", "bool": "Boolean", "str": "String"}

Variable = tuple[str, str, str, tuple[int, ...], str, str]
"""(name, topic, field, index, FMI type, causality ``"input"`` | ``"output"``); field ``"t_s"`` with
an empty index and topic's schema lacking it: a state input's sample instant."""


def _prefix(topic: str) -> str:
    return topic.replace("/", ".")


def _flat(prefix: str, field: str, shape: tuple[int, ...]) -> list[tuple[str, tuple[int, ...]]]:
    if not shape:
        return [(f"{prefix}.{field}", ())]
    return [(f"{prefix}.{field}[{','.join(map(str, idx))}]", tuple(idx)) for idx in np.ndindex(*shape)]


def variables(inputs: tuple[Port, ...], outputs: tuple[Port, ...]) -> list[Variable]:
    """The FMU's variables for a model's ports, in order (see the module docstring).

    Raises
    ------
    ConfigError
        If a port's topic has no schema, or a state input has a field ``t_s``.
    """
    out: list[Variable] = []
    for ports, causality in ((inputs, "input"), (outputs, "output")):
        for port in ports:
            schema = SCHEMAS.get(port.topic)
            if schema is None:
                raise ConfigError(f"fmu export: topic {port.topic!r} has no schema")
            prefix = _prefix(port.topic)
            if port.kind == "event":
                out.append((f"{prefix}.events", port.topic, "events", (), "String", causality))
                continue
            for field, (ftype, shape) in schema.fields.items():
                if ftype not in _FMI_TYPE or (causality == "output" and field in schema.derived):
                    continue
                out += [(name, port.topic, field, idx, _FMI_TYPE[ftype], causality)
                        for name, idx in _flat(prefix, field, shape)]
            if causality == "input" and port.kind == "state":
                if "t_s" in schema.fields:
                    raise ConfigError(f"fmu export: {port.topic!r} has a field 't_s', the name of its sample instant")
                out.append((f"{prefix}.t_s", port.topic, "t_s", (), "Real", "input"))
    return out


def _plain(x: Any) -> Any:
    """JSON for what an event's fields may hold besides plain values (numpy arrays and scalars)."""
    return x.tolist() if isinstance(x, np.ndarray | np.generic) else str(x)


class _Inputs:
    """:class:`protocol.service.Inputs` from the FMU's input variables (one sample per port, held over
    the step)."""

    def __init__(self, slave: ServiceSlave) -> None:
        self.s = slave

    def state(self, topic: str) -> Sample:
        return Sample(self.s.sample_t_ns(topic), self.s.h_ns, "fmu", 0, self.s.body(topic))

    def flow(self, topic: str) -> list[tuple[Sample, int]]:
        return [(Sample(self.s.t_ns, self.s.h_ns, "fmu", 0, self.s.body(topic)), self.s.h_ns)]

    def mean(self, topic: str, field_name: str) -> Any:
        return self.s.body(topic)[field_name]

    def events(self, topic: str) -> list[Sample]:
        text = self.s.values.get(f"{_prefix(topic)}.events") or "[]"
        evs = json.loads(text)
        return [Sample(self.s.t_ns, self.s.h_ns, "fmu", 0, {"events": evs})] if evs else []


_GLOBALS_KEPT: list[dict[str, Any]] = []


class ServiceSlave:
    """The FMU's slave: builds the service's model from ``resources/berthsim_service.json`` and steps it
    (see the module docstring). A mixin: the generated script's class (named after the FMU's model
    identifier) is ``NAME(ServiceSlave, Fmi2Slave)``, with the ``Fmi2Slave`` the FMU's wrapper imports,
    and the variables are made with that pythonfmu's classes."""

    def __init__(self, **kwargs: Any) -> None:
        from protocol.config import service_module
        from protocol.timebase import period_ns
        me: Any = self
        # pythonfmu 0.7's wrapper (findClass) releases, at every instantiation, a reference to the
        # generated module's globals that it does not own; one is kept here for each instance
        _GLOBALS_KEPT.append(sys.modules[type(self).__module__].__dict__)
        super().__init__(**kwargs)
        base = next(c for c in type(self).__mro__ if c.__name__ == "Fmi2Slave")
        fmi = sys.modules[base.__module__]  # pythonfmu.fmi2slave as the wrapper loaded it
        Real, Integer, Boolean, String = fmi.Real, fmi.Integer, fmi.Boolean, fmi.String
        Fmi2Causality, Fmi2Variability = fmi.Fmi2Causality, fmi.Fmi2Variability
        self._status_error = fmi.Fmi2Status.error
        doc = json.loads((Path(kwargs["resources"]) / SPEC_FILE).read_text())
        config, name = doc["config"], doc["service"]
        svc = config["services"][name]
        self.name = name
        self.period_ns = period_ns(svc["rate_hz"], f"services.{name}.rate_hz")
        self.model = BoundModel(service_module(svc["kind"]).build(config, name, self.period_ns))
        self.vars_ = variables(self.model.inputs, self.model.outputs)
        self.values: dict[str, Any] = {}
        self.t0_ns = 0
        self.t_ns = 0
        self.h_ns = self.period_ns
        self._layout: dict[str, list[tuple[str, str, tuple[int, ...]]]] = {}
        self._event_outputs = [v[0] for v in self.vars_ if v[2] == "events" and v[5] == "output"]
        kinds = {"Real": (Real, 0.0), "Integer": (Integer, 0), "Boolean": (Boolean, False), "String": (String, "")}
        starts = doc.get("starts", {})
        for vname, topic, field, idx, typ, causality in self.vars_:
            cls, zero = kinds[typ]
            self.values[vname] = starts.get(vname, zero)
            self._layout.setdefault(topic, []).append((field, vname, idx))
            me.register_variable(cls(vname, causality=getattr(Fmi2Causality, causality),
                                       variability=Fmi2Variability.continuous if typ == "Real"
                                       else Fmi2Variability.discrete,
                                       getter=lambda n=vname: self.values[n],
                                       setter=(lambda x, n=vname: self.values.__setitem__(n, x))
                                       if causality == "input" else None))
        self.description = (f"berthsim service {name!r} (kind {svc['kind']!r}) as a tool-coupling FMU: it needs "
                            "Python and berthsim on the importing machine")

    # ------------------------------------------------------------ inputs and outputs
    def body(self, topic: str) -> dict[str, Any]:
        """The input sample's body of ``topic`` from the variables (fields not exported: empty)."""
        schema = SCHEMAS[topic]
        body: dict[str, Any] = {}
        for field, (ftype, shape) in schema.fields.items():
            if ftype == "f8" and shape:
                body[field] = np.zeros(shape)
            else:
                body[field] = {"f8": 0.0, "int": 0, "bool": False, "str": "", "list[str]": [], "map": {},
                               "events": []}[ftype]
        for field, vname, idx in self._layout.get(topic, ()):
            if (field == "t_s" and "t_s" not in schema.fields) or field == "events":
                continue
            if idx:
                body[field][idx] = self.values[vname]
            else:
                body[field] = self.values[vname]
        for v in body.values():
            if isinstance(v, np.ndarray):
                v.flags.writeable = False
        return body

    def sample_t_ns(self, topic: str) -> int:
        """The instant a state input's sample holds at (``TOPIC.t_s``), in ns."""
        return round(float(self.values[f"{_prefix(topic)}.t_s"]) * 1e9)

    def _publish(self, outs: dict[str, dict[str, Any]]) -> None:
        for vname in self._event_outputs:
            self.values[vname] = "[]"
        for topic, body in outs.items():
            for field, vname, idx in self._layout.get(topic, ()):
                if field == "events" and vname in self._event_outputs:
                    self.values[vname] = json.dumps(body.get("events", []), default=_plain)
                elif field in body:
                    x = body[field]
                    x = x[idx] if idx else x
                    self.values[vname] = x.item() if isinstance(x, np.generic) else x

    # ------------------------------------------------------------ FMI
    def setup_experiment(self, start_time: float, stop_time: float | None, tolerance: float | None) -> None:
        """Remember the start time."""
        self.t0_ns = round(start_time * 1e9)

    def exit_initialization_mode(self) -> None:
        """The model's outputs at the start time (``initial``)."""
        self.t_ns = self.t0_ns
        self._publish(self.model.initial(self.t0_ns))

    def do_step(self, current_time: float, step_size: float) -> bool:
        """One ``step`` of the model; False (fmi2Error) for a step other than its period, or when the
        model's step raises (the message is logged)."""
        t, h = round(current_time * 1e9), round(step_size * 1e9)
        if h != self.period_ns:
            return False
        self.t_ns, self.h_ns = t, h
        try:
            outs = self.model.step(t, h, _Inputs(self))
        except Exception as err:  # noqa: BLE001 - the importer gets fmi2Error and the message, not a crash
            me: Any = self
            me.log(f"{self.name}: step at t = {t} ns failed: {type(err).__name__}: {err}", self._status_error)
            return False
        self._publish(outs)
        self.t_ns = t + h
        return True

    def terminate(self) -> None:
        """Close the model (its ``close``, if any)."""
        closer = getattr(self.model, "close", None)
        if callable(closer):
            closer()

    def _get_fmu_state(self) -> dict[str, Any]:
        """The model's state: its context, or (a model without one) the model itself."""
        m = self.model
        state = m.ctx if m.ctx is not None else m.obj
        blob = pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)
        return {"model": base64.b64encode(blob).decode(), "values": dict(self.values), "t_ns": self.t_ns}

    def _set_fmu_state(self, state: dict[str, Any]) -> None:
        saved = pickle.loads(base64.b64decode(state["model"]))  # noqa: S301 - the FMU's own state
        m = self.model
        if m.ctx is not None:
            m.ctx = saved
        else:
            m.obj = saved
        self.values = dict(state["values"])
        self.t_ns = int(state["t_ns"])


_SCRIPT = '''"""berthsim service {service!r} as an FMI 2.0 co-simulation FMU (generated by launch.py fmu export).

A tool-coupling FMU: it runs berthsim's own code and needs Python and berthsim on this machine.
"""
import sys

try:
    import tools.fmu_export  # noqa: F401
except ImportError:  # berthsim where it was exported from
    sys.path.append({root!r})
from pythonfmu import DefaultExperiment, Fmi2Slave

from tools.fmu_export import ServiceSlave


class {ident}(Fmi2Slave):
    """berthsim service {service!r}."""


def _globals() -> dict:
    """A reference to this module's globals from the start (see ServiceSlave.__init__)."""
    return globals()


# pythonfmu's wrapper finds the class by the line above; the class is the service's slave
{ident} = type("{ident}", (ServiceSlave, Fmi2Slave), {{"__doc__": {ident}.__doc__, "__module__": __name__,
    "default_experiment": DefaultExperiment(start_time=0.0, step_size={step!r})}})
'''


def _initial_unknowns(fmu: Path) -> None:
    """Add ``ModelStructure/InitialUnknowns`` (every output, calculated in initialization mode) to the
    FMU's model description, which pythonfmu 0.7 leaves out."""
    with zipfile.ZipFile(fmu) as z:
        items = [(i, z.read(i.filename)) for i in z.infolist()]
    out = []
    for info, data in items:
        if info.filename == "modelDescription.xml":
            root = ET.fromstring(data)
            structure = root.find("ModelStructure")
            outputs = structure.find("Outputs") if structure is not None else None
            if structure is not None and outputs is not None and structure.find("InitialUnknowns") is None:
                init = ET.SubElement(structure, "InitialUnknowns")
                for u in outputs.findall("Unknown"):
                    ET.SubElement(init, "Unknown", {"index": u.get("index", "")})
            data = ET.tostring(root, encoding="UTF-8", xml_declaration=True)
        out.append((info, data))
    with zipfile.ZipFile(fmu, "w", zipfile.ZIP_DEFLATED) as z:
        for info, data in out:
            z.writestr(info, data)


def _input_starts(plan: Any, service: str, vars_: list[Variable]) -> dict[str, Any]:
    """Start values of the inputs: the producers' initial outputs at t = 0 in the exported configuration
    (each other model built as a run builds it, or with its module's ``calibration_model``); an input
    no model of the configuration produces starts at zero."""
    from protocol.config import service_module
    wanted = {v[1] for v in vars_ if v[5] == "input"}
    bodies: dict[str, dict[str, Any]] = {}
    for other, spec in plan.services.items():
        mod = service_module(spec.kind)
        if other == service or not hasattr(mod, "ports"):
            continue
        sp = mod.ports(plan.config, other)
        if sp.role != "model" or not wanted & {p.topic for p in sp.outputs}:
            continue
        model = (getattr(mod, "calibration_model", None) or mod.build)(dict(plan.config), other, spec.period_ns)
        try:
            bodies.update(BoundModel(model).initial(0))
        finally:
            if callable(getattr(model, "close", None)):
                model.close()
    out: dict[str, Any] = {}
    for name, topic, field, idx, _, causality in vars_:
        if causality != "input" or topic not in bodies:
            continue
        if field == "events":
            out[name] = json.dumps(bodies[topic].get("events", []), default=_plain)
        elif field in bodies[topic]:
            x = np.asarray(bodies[topic][field])[idx] if idx else bodies[topic][field]
            out[name] = x.item() if isinstance(x, np.generic) else x
    return out


def export(service: str, config_path: str | Path, out: str | Path) -> dict[str, Any]:
    """Build the FMU of ``service`` of the configuration at ``config_path`` into ``out``.

    Returns
    -------
    dict
        ``{"fmu": path, "model_identifier": ..., "inputs": n, "outputs": n, "step_s": h}``.

    Raises
    ------
    ConfigError
        If the configuration is invalid, has no such service, the service is not a model, or
        ``out`` does not end in ``.fmu``.
    """
    from pythonfmu.builder import FmuBuilder

    from protocol.config import load, service_module, validate
    from protocol.timebase import period_ns
    out = Path(out)
    if out.suffix != ".fmu":
        raise ConfigError(f"fmu export: -o {str(out)!r}: expected a file name ending in .fmu")
    config_path = Path(config_path).resolve()
    plan = validate(load(config_path), path=config_path, overrides={"config_file": str(config_path)})
    if service not in plan.services:
        raise ConfigError(f"fmu export: no service {service!r} in {str(config_path)!r} "
                          f"(it has {', '.join(plan.services)})")
    spec = plan.services[service]
    mod = service_module(spec.kind)
    if not hasattr(mod, "ports") or mod.ports(plan.config, service).role != "model":
        raise ConfigError(f"fmu export: services.{service} (kind {spec.kind!r}) is not a model with ports")
    for other, s in plan.config["services"].items():  # the producers register their topics' schemas
        if other != service:
            service_module(s["kind"])
    sp = mod.ports(plan.config, service)
    vars_ = variables(sp.inputs, sp.outputs)
    starts = _input_starts(plan, service, vars_)
    ident = re.sub(r"\W", "_", out.stem)
    ident = ident if ident and not ident[0].isdigit() else f"berthsim_{ident}"
    h_s = period_ns(plan.config["services"][service]["rate_hz"], "rate_hz") * 1e-9
    with tempfile.TemporaryDirectory(prefix="berthsim-fmu-") as tmp:
        d = Path(tmp)
        (d / SPEC_FILE).write_text(json.dumps({"config": plan.config, "service": service, "starts": starts},
                                              default=str))
        script = d / f"{ident}.py"
        script.write_text(_SCRIPT.format(service=service, root=str(ROOT), ident=ident, step=h_s))
        out.parent.mkdir(parents=True, exist_ok=True)
        sys.modules.pop(ident, None)
        FmuBuilder.build_FMU(script, dest=out, project_files=[d / SPEC_FILE], canGetAndSetFMUstate=True,
                             canSerializeFMUstate=True, canHandleVariableCommunicationStepSize=False)
        sys.modules.pop(ident, None)
    _initial_unknowns(out)
    return {"fmu": str(out), "model_identifier": ident, "inputs": sum(v[5] == "input" for v in vars_),
            "outputs": sum(v[5] == "output" for v in vars_), "step_s": h_s}


def add_arguments(p: argparse.ArgumentParser) -> None:
    """``launch.py fmu export SERVICE CONFIG -o NAME.fmu``."""
    sub = p.add_subparsers(dest="fmu_command", required=True)
    e = sub.add_parser("export", help="one service's model as an FMI 2.0 co-simulation FMU (tool-coupling: needs "
                                      "Python and berthsim where it is imported)")
    e.add_argument("service", help="the service (its [services.NAME])")
    e.add_argument("config", help="the scenario's TOML file")
    e.add_argument("-o", "--out", required=True, help="the FMU file to write (NAME.fmu; NAME is its model identifier)")


def main(a: argparse.Namespace) -> int:
    """Run ``launch.py fmu export``: one JSON line (the file, its model identifier, how many inputs and
    outputs, the step); exit 2 with one line for a bad configuration or service."""
    try:
        info = export(a.service, a.config, a.out)
    except ConfigError as err:
        for p in err.problems:
            print(f"berthsim: fmu export: {p}", file=sys.stderr)
        return 2
    print(json.dumps(info))
    return 0
