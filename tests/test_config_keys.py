"""Every service module validates its tables with the one config validator, :mod:`protocol.config`.

Each service module (a module of ``services``, ``hil`` or ``testkit`` with ``TABLES``,
``validate`` and ``build``) lists the tables it owns in ``TABLE_KEYS`` (table -> key -> (kind,
default)). For every key of every table, nested ones included, its ``validate`` must report
a wrongly-typed value with exactly the line :func:`protocol.config.check_value` writes — the
full key and the value — and an unknown key with the line :func:`protocol.config.check_values`
writes; the keys of ``[services.NAME]`` (``OPTIONS``) likewise through
:func:`protocol.config.validate`. A service that checks a table by hand does not write those
lines, and fails here.
"""

from __future__ import annotations

import importlib
import pkgutil
import warnings
from collections.abc import Iterator, Mapping
from types import ModuleType
from typing import Any

import pytest

import protocol.config as pc
from errors import ConfigError

PACKAGES = ("services", "hil", "testkit")
WRONG = "bogus ☃"  # no kind but str takes a string that is no enum value


def _service_modules() -> list[ModuleType]:
    out = []
    for pkg in PACKAGES:
        for info in pkgutil.iter_modules(importlib.import_module(pkg).__path__):
            with warnings.catch_warnings():  # a deprecated alias module (hil.stewart) warns on import: not a kind
                warnings.simplefilter("ignore", DeprecationWarning)
                mod = importlib.import_module(f"{pkg}.{info.name}")
            if all(hasattr(mod, a) for a in ("TABLES", "validate", "build")):
                out.append(mod)
    return out


MODULES = _service_modules()


def _kind_name(mod: ModuleType) -> str:
    pkg, name = mod.__name__.split(".", 1)
    return name if pkg == "services" else mod.__name__


def _wrong(kind: Any) -> Any:
    """A value of the wrong type for ``kind``."""
    types = kind if isinstance(kind, tuple) else (kind,)
    return 7 if str in types else WRONG


def _leaves(path: str, keys: Mapping[str, tuple[Any, Any]]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(path of every table, its keys), the sub-tables' too."""
    yield path, keys
    for key, (kind, _) in keys.items():
        if isinstance(kind, Mapping):
            yield from _leaves(f"{path}.{key}", kind)


def _config(mod: ModuleType, path: str, values: dict[str, Any]) -> dict[str, Any]:
    """A configuration of one service of ``mod`` whose table at ``path`` holds ``values``."""
    config: dict[str, Any] = {"services": {"svc": {"kind": _kind_name(mod), "rate_hz": 10}}}
    node = config
    *parents, last = path.split(".")
    for p in parents:
        node = node.setdefault(p, {})
    node[last] = values
    return config


def test_every_service_module_is_found_and_every_claimed_table_has_an_owner():
    names = {m.__name__ for m in MODULES}
    assert {"services.orbiter", "services.arm", "services.contact", "services.operator", "services.logger",
            "services.replay", "hil.bridge", "testkit.toys"} <= names, names
    owned = {t for m in MODULES for t in getattr(m, "TABLE_KEYS", {})}
    for mod in MODULES:
        assert set(getattr(mod, "TABLE_KEYS", {})) <= set(mod.TABLES), mod.__name__
        assert set(mod.TABLES) <= owned, f"{mod.__name__}: a table in TABLES with no TABLE_KEYS in any service module"


@pytest.mark.parametrize("mod", MODULES, ids=lambda m: m.__name__)
def test_validate_names_the_key_and_value_of_every_bad_or_unknown_key(mod):
    checked = 0
    for table, keys in getattr(mod, "TABLE_KEYS", {}).items():
        for path, sub in _leaves(table, keys):
            found = mod.validate(_config(mod, path, {"bogus_key": 1}), "svc")
            pc.check_values({"bogus_key": 1}, path, sub, probe := [])
            assert probe[0] in found, (probe[0], found)
            for key, (kind, _) in sub.items():
                if isinstance(kind, Mapping):
                    continue
                value = _wrong(kind)
                line = pc.check_value(f"{path}.{key}", value, kind)
                assert line is not None and f"{path}.{key}: " in line and repr(value) in line
                found = mod.validate(_config(mod, path, {key: value}), "svc")
                assert line in found, (line, found)
                checked += 1
    assert checked or not getattr(mod, "TABLE_KEYS", {}), mod.__name__


@pytest.mark.parametrize("mod", MODULES, ids=lambda m: m.__name__)
def test_service_table_options_are_checked_by_the_runtime(mod, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a logger probes where its default log would go
    options = getattr(mod, "OPTIONS", {})
    svc: dict[str, Any] = {"kind": _kind_name(mod), "rate_hz": 10, "bogus_key": 1}
    svc.update({k: _wrong(kind) for k, kind in options.items()})
    with pytest.raises(ConfigError) as err:
        pc.validate({"sim": {"log": str(tmp_path / "run.mcap")}, "services": {"svc": svc}})
    problems = err.value.problems
    assert any(p.startswith("services.svc.bogus_key: unknown key (known: ") for p in problems), problems
    for key, kind in options.items():
        assert pc.check_value(f"services.svc.{key}", svc[key], kind) in problems, (key, problems)
