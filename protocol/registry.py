"""The service kinds: which module a configured ``kind`` names, what it must provide, what it can do.

A service's table says ``kind = "contact"``; this module is the one place that turns that
string into code. Everything else asks it (:func:`kind_module`, :func:`capabilities`), so no
runtime module tests a kind by name or imports one by string.

Where a kind comes from, first match:

1. the kinds berthsim ships (:data:`BUILTIN`);
2. an installed distribution's entry point in the group :data:`ENTRY_POINT_GROUP`
   (``berthsim.kinds``), whose name is the kind and whose value is a module path, e.g. in the
   distribution's ``pyproject.toml``::

       [project.entry-points."berthsim.kinds"]
       docking_camera = "acme_rig.camera"

3. a dotted module path written in the config itself (``kind = "acme_rig.camera"``), for a
   kind under development. A configuration read back from a log never takes this path:
   :func:`protocol.config.registered_kind` allows only the shipped kinds there.

What a kind's module provides (:class:`KindModule`, checked at import):

- required: ``TABLES`` (the config tables it reads), ``validate(config, name) -> list[str]``
  (every problem, each naming the field and the value) and ``build(config, name, period_ns)``
  (the model: :class:`protocol.service.ServiceModel`, or a sink or a source);
- optional (:data:`OPTIONAL_HOOKS`): ``OPTIONS`` (key -> type of its own service table's
  extra keys) and ``TABLE_KEYS`` (table -> key -> (kind, default) of the tables it owns), for
  the unknown-key check and the types; ``ports(config, name)`` (its
  role and ports before anything is built: :class:`protocol.service.ServicePorts`),
  ``stiff_couplings(config, name)``, ``calibration_model(config, name, period_ns)`` (what
  realtime admission times in place of ``build``), ``schemas(config, name)`` (topics it makes
  from its config), ``CAPABILITIES`` (a third-party kind's own :data:`CAPABILITY` names),
  ``PARAMS`` (its declared parameters: a frozen dataclass, each field with its unit,
  :mod:`protocol.params`; :func:`params` returns it), ``TOPICS`` (topic ->
  :class:`protocol.messages.TopicSchema`: the schemas of the topics it produces, registered
  when the kind is imported here; :func:`load_topic_schemas` registers every known kind's).

Topic schemas are declared by their producers: a kind's ``TOPICS``. :mod:`protocol.messages`
holds only the runtime's own topics (``sim/*``); the logger, the exporters and every decoder
learn the others from here, and two kinds that declare one topic differently are refused.

Capabilities (:data:`CAPABILITY`) say what the runtime may do with a kind's services:
``device`` (it holds I/O of its own, a serial link to a rig: it takes the highest realtime
priority of its host, parks on a stop, and builds in a thread of its own while the models of
its process build: :func:`build_members`), ``stateful`` (its state pickles — its context, or
everything it holds for a model without one: a lockstep snapshot may include it), ``from_log``
(it runs only the project's code, so a tool may rebuild it from a log's configuration),
``playback_control`` (it may send the launcher playback requests: a viewer), ``plays_back``
(it follows them: a replay), ``records`` (it writes the run's log: the logger).
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import metadata
from types import ModuleType
from typing import Any, Protocol

from errors import ConfigError
from protocol.messages import _TABLE as _REGISTERED_SCHEMAS
from protocol.messages import TopicSchema, register_schema, set_producer_loader
from protocol.params import is_params

__all__ = ["BUILTIN", "CAPABILITY", "ENTRY_POINT_GROUP", "BuildFailed", "Kind", "KindModule", "OPTIONAL_HOOKS",
           "build_members", "capabilities", "has_capability", "kind_module", "kinds", "load_topic_schemas", "params",
           "producer", "table_keys"]

ENTRY_POINT_GROUP = "berthsim.kinds"
"""The entry-point group through which an installed distribution adds service kinds."""

CAPABILITY = {
    "device": "holds I/O of its own (a rig's serial link): the highest realtime priority of its host; parks on a stop",
    "stateful": "its state (its context, or everything it holds) pickles: a lockstep snapshot may include it",
    "from_log": "runs only the project's code: a tool may rebuild it from a log's configuration",
    "playback_control": "may ask the launcher to pause, play, seek or pace a replay (a viewer with its controls)",
    "plays_back": "plays a log back and follows playback requests (a replay)",
    "records": "writes the run's log (the logger): a run has at most one, and the tools read its path",
}
"""The capabilities a kind may declare, and what each lets the runtime do."""

OPTIONAL_HOOKS = {
    "OPTIONS": Mapping, "TABLE_KEYS": Mapping, "CAPABILITIES": (frozenset, set, tuple),
    "ports": "callable", "stiff_couplings": "callable", "calibration_model": "callable", "schemas": "callable",
    "PARAMS": "params", "TOPICS": Mapping,
}
"""A kind module's optional attributes and what each must be (a type, ``"callable"``, or ``"params"``: a
parameter class, :func:`protocol.params.is_params`)."""


class KindModule(Protocol):
    """What a service kind's module provides (a module satisfies it structurally; see the module docstring for
    the optional hooks)."""

    TABLES: tuple[str, ...]

    def validate(self, config: Mapping[str, Any], name: str) -> list[str]: ...

    def build(self, config: Mapping[str, Any], name: str, period_ns: int) -> Any: ...


@dataclass(frozen=True)
class Kind:
    """One registered service kind.

    Attributes
    ----------
    name : str
        The ``kind`` a service table writes.
    module : str
        The module's import path.
    capabilities : frozenset of str
        Names from :data:`CAPABILITY`.
    origin : str
        ``"builtin"``, ``"entry point <distribution>"`` or ``"config"`` (a dotted path in the config).
    """

    name: str
    module: str
    capabilities: frozenset[str] = frozenset()
    origin: str = "builtin"


def _builtin(name: str, module: str, *caps: str) -> tuple[str, Kind]:
    return name, Kind(name, module, frozenset(caps))


BUILTIN: dict[str, Kind] = dict([
    _builtin("orbiter", "services.orbiter", "stateful", "from_log"),
    _builtin("arm", "services.arm", "stateful", "from_log"),
    _builtin("contact", "services.contact", "stateful", "from_log"),
    _builtin("operator", "services.operator", "stateful", "from_log"),
    _builtin("logger", "services.logger", "from_log", "records"),
    _builtin("replay", "services.replay", "from_log", "plays_back"),
    _builtin("viewer", "services.viewer", "from_log", "playback_control"),
    _builtin("hil.bridge", "hil.bridge", "device", "from_log"),
    _builtin("fmu", "services.fmu"),  # loads the binary its configuration names: never rebuilt from a log
    _builtin("testkit.toys", "testkit.toys", "stateful", "from_log"),
])
"""The kinds berthsim ships."""


@lru_cache(maxsize=1)
def _entry_points() -> dict[str, Kind]:
    out: dict[str, Kind] = {}
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        if ep.name in BUILTIN:
            continue  # a shipped kind is not replaced by a plug-in of the same name
        dist = getattr(getattr(ep, "dist", None), "name", "?")
        out[ep.name] = Kind(ep.name, ep.value.split(":", 1)[0], frozenset(), f"entry point {dist}")
    return out


def kinds() -> dict[str, Kind]:
    """Every kind known without a config: the shipped ones and the installed entry points'."""
    return {**BUILTIN, **_entry_points()}


def _lookup(kind: str) -> Kind:
    known = kinds().get(kind)
    if known is not None:
        return known
    if "." in kind:
        return Kind(kind, kind, frozenset(), "config")
    raise ConfigError(f"kind {kind!r}: not a service kind (shipped: {', '.join(BUILTIN)}; installed: "
                      f"{', '.join(_entry_points()) or 'none'}; or a dotted module path)")


def kind_modules(kinds: Iterable[Any]) -> list[str]:
    """The names of the modules of ``kinds`` (each as :func:`kind_module` would find it), imported by nothing
    here: what a process that will import them may load ahead (:func:`protocol.zygote.start`). What is not a
    kind is left out (the configuration's check reports it)."""
    out = []
    for kind in kinds:
        if isinstance(kind, str):
            try:
                out.append(_lookup(kind).module)
            except ConfigError:
                continue
    return out


def kind_module(kind: str) -> ModuleType:
    """Import the module of a service kind and check it against :class:`KindModule`.

    Parameters
    ----------
    kind : str
        A shipped kind, an installed entry point's, or a dotted module path.

    Raises
    ------
    ConfigError
        If the kind is unknown, its module cannot be imported, lacks ``validate``, ``build`` or
        ``TABLES``, or has an optional hook of the wrong type (naming the kind, the module and the hook).
    """
    k = _lookup(kind)
    try:
        mod = importlib.import_module(k.module)
    except Exception as err:  # noqa: BLE001 - any import failure is a config problem
        raise ConfigError(f"kind {kind!r}: cannot import {k.module!r}: {type(err).__name__}: {err}") from err
    missing = [a for a in ("validate", "build", "TABLES") if not hasattr(mod, a)]
    if missing:
        raise ConfigError(f"kind {kind!r}: module {k.module!r} lacks {', '.join(missing)}")
    bad = [a for a in ("validate", "build") if not callable(getattr(mod, a))]
    for hook, want in OPTIONAL_HOOKS.items():
        if not hasattr(mod, hook):
            continue
        value = getattr(mod, hook)
        if want == "callable":
            if not callable(value):
                bad.append(hook)
        elif want == "params":
            if not is_params(value):
                bad.append(hook)
        elif not isinstance(value, want):  # type: ignore[arg-type]  # a type or a tuple of types
            bad.append(hook)
    if bad:
        raise ConfigError(f"kind {kind!r}: module {k.module!r}: {', '.join(bad)} of the wrong type "
                          "(see protocol.registry: the hooks a kind provides)")
    unknown = set(getattr(mod, "CAPABILITIES", ())) - set(CAPABILITY)
    if unknown:
        raise ConfigError(f"kind {kind!r}: module {k.module!r}: unknown CAPABILITIES {sorted(unknown)} "
                          f"(known: {', '.join(CAPABILITY)})")
    if mod.__name__ not in _TOPICS_OF:
        _register_topics(kind, mod)
    return mod


_TOPICS_OF: dict[str, str] = {}
"""Module name -> kind, of the kind modules whose ``TOPICS`` are registered."""
_PRODUCER: dict[str, str] = {}
"""Topic -> the kind that declared it."""


def _register_topics(kind: str, mod: ModuleType) -> None:
    """Register a kind module's ``TOPICS`` (once per module); ConfigError if one is not a schema or another kind
    declared the topic differently."""
    topics = getattr(mod, "TOPICS", {})
    for topic, schema in topics.items():
        if not isinstance(topic, str) or not isinstance(schema, TopicSchema):
            raise ConfigError(f"kind {kind!r}: module {mod.__name__!r}: TOPICS[{topic!r}] must map a topic to a "
                              f"protocol.messages.TopicSchema, got {type(schema).__name__}")
        held = _REGISTERED_SCHEMAS.get(topic)
        if held is not None and held != schema:
            raise ConfigError(f"kind {kind!r}: topic {topic!r}: declared as {schema.name} v{schema.version}, but "
                              f"{_PRODUCER.get(topic, 'the runtime')!r} declares it as {held.name} v{held.version}")
    for topic, schema in topics.items():
        register_schema(topic, schema)
        _PRODUCER.setdefault(topic, kind)
    _TOPICS_OF[mod.__name__] = kind


def load_topic_schemas() -> list[str]:
    """Import every known kind (:func:`kinds`: the shipped ones and the installed entry points') so that each one's
    ``TOPICS`` are registered; what :data:`protocol.messages.SCHEMAS` does on its first miss, so that a tool can
    decode any shipped topic without a config. A kind that cannot be imported (an entry point whose distribution
    is broken) is skipped and named in the result.

    Returns
    -------
    list of str
        One line per kind that could not be imported.
    """
    skipped = []
    for kind in kinds():
        try:
            kind_module(kind)
        except ConfigError as err:
            skipped.append(str(err))
    return skipped


def producer(topic: str) -> str | None:
    """The kind that declared ``topic`` (its ``TOPICS``), or None: a runtime topic, or one not registered here."""
    return _PRODUCER.get(topic.removesuffix("/full"))


def params(kind: str) -> type | None:
    """The declared parameter class of a kind (its module's ``PARAMS``, :mod:`protocol.params`), or None.

    Raises
    ------
    ConfigError
        As :func:`kind_module`.
    """
    return getattr(kind_module(kind), "PARAMS", None)


def has_capability(service: Any, capability: str) -> bool:
    """Whether a service table (``{"kind": ...}``) names a kind with ``capability``; False for anything that is
    not such a table or names no known kind (the config's validation reports those)."""
    kind = service.get("kind") if isinstance(service, Mapping) else None
    if not isinstance(kind, str):
        return False
    try:
        return capability in capabilities(kind)
    except ConfigError:
        return False


def capabilities(kind: str) -> frozenset[str]:
    """The capabilities of a kind (:data:`CAPABILITY`): the registry's for a shipped kind, its module's
    ``CAPABILITIES`` for any other (imported to read them; ``from_log`` is never granted to those).

    Raises
    ------
    ConfigError
        As :func:`kind_module`, for a kind that is not shipped.
    """
    k = _lookup(kind)
    if k.origin == "builtin":
        return k.capabilities
    return frozenset(getattr(kind_module(kind), "CAPABILITIES", ())) - {"from_log"}


class BuildFailed(Exception):
    """A member's ``build`` raised: ``service`` names it, ``error`` is what it raised."""

    def __init__(self, service: str, error: BaseException) -> None:
        super().__init__(f"build of {service!r} failed: {type(error).__name__}: {error}")
        self.service = service
        self.error = error


def build_members(config: Mapping[str, Any], members: Sequence[tuple[str, str, int]]) -> list[Any]:
    """Build one process's members: ``build(config, name, period_ns)`` of each ``(name, kind, period_ns)``, the
    objects in the order given.

    A ``device`` kind's build waits on its link (the rig emulator's start-up: a Python process importing numpy
    and scipy, 0.6–1 s): with models to build as well, it runs in a thread of its own, begun first, and the
    models build meanwhile. Each kind's module is imported here, before the thread begins (what a build imports
    lazily, Python's import locks keep whole).

    Raises
    ------
    BuildFailed
        For the first member in the order given whose build raised (the device's thread joined, no model built
        after a failure, and every object built closed).
    """
    mods, devices = [], []
    for i, (name, kind, _) in enumerate(members):
        try:
            mods.append(kind_module(kind))
            if "device" in capabilities(kind):
                devices.append(i)
        except Exception as err:  # noqa: BLE001 - a kind that does not load fails its member's build
            raise BuildFailed(name, err) from err
    built: dict[int, Any] = {}
    failed: dict[int, BaseException] = {}

    def build(i: int) -> None:
        name, _, period_ns = members[i]
        try:
            built[i] = mods[i].build(config, name, period_ns)
        except Exception as err:  # noqa: BLE001 - raised below as BuildFailed, naming the member
            failed[i] = err

    thread = None
    if devices and len(devices) < len(members):
        def build_devices() -> None:
            for i in devices:
                build(i)

        thread = threading.Thread(target=build_devices, name="build-devices", daemon=True)
        thread.start()
    try:
        for i in range(len(members)):
            if (thread is None or i not in devices) and not failed:
                build(i)
    finally:
        if thread is not None:
            thread.join()
    if failed:
        for obj in built.values():  # what was built is not run: a device's link and emulator are let go now
            close = getattr(obj, "close", None)
            if callable(close):
                try:
                    close()
                except Exception:  # noqa: BLE001, S110 - the build's own error is the one reported
                    pass
        i = min(failed)
        raise BuildFailed(members[i][0], failed[i])
    return [built[i] for i in range(len(members))]


def table_keys(table: str, config: Mapping[str, Any] | None = None) -> tuple[str, Mapping[str, tuple[Any, Any]]]:
    """The owner of a configuration table and its keys: the kind whose module declares ``TABLE_KEYS[table]`` (key
    -> (kind, default), :func:`protocol.config.check_value`), looked for among the kinds ``config`` runs, then the
    shipped ones. A kind that reads another's table (the contact service reads ``[orbiter]``) takes the owner's
    keys and defaults from here instead of a copy of its own.

    Returns
    -------
    (str, Mapping)
        The owner kind and its keys of ``table``.

    Raises
    ------
    ConfigError
        If no kind declares the table (naming it).
    """
    services = (config or {}).get("services")
    ordered = [s["kind"] for s in services.values() if isinstance(s, Mapping) and isinstance(s.get("kind"), str)] \
        if isinstance(services, Mapping) else []
    for kind in dict.fromkeys([*ordered, *BUILTIN]):
        try:
            keys = getattr(kind_module(kind), "TABLE_KEYS", {})
        except ConfigError:
            continue  # a kind that cannot be imported is reported by validate
        if table in keys:
            return kind, keys[table]
    raise ConfigError(f"[{table}]: no service kind declares this table (TABLE_KEYS)")


set_producer_loader(load_topic_schemas)  # protocol.messages.SCHEMAS: a shipped topic decodes without a config
