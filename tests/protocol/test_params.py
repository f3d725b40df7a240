"""Declared parameters (protocol/params.py): a kind's frozen dataclass, units per field, built once from its
checked table (tables of free keys as plain copies, unions by the value's type); every shipped kind but the test toys
declares its table's keys, sub-tables included (the values each holds: here for the orbiter,
tests/services/test_params_kinds.py and test_arm_params.py for the others); a model stepped on its context
(protocol.service.BoundModel)."""

from __future__ import annotations

import dataclasses
import pickle
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np
import pytest

from protocol import registry
from protocol.params import from_values, is_params, param, units


@dataclass(frozen=True)
class _Sub:
    bandwidth: float = param("rad/s")


@dataclass(frozen=True)
class _P:
    mass: float = param("kg")
    count: int = param("-")
    on: bool = param("-")
    mode: str = param("-")
    r: tuple[float, ...] = param("m")
    inertia: tuple[tuple[float, ...], ...] = param("kg·m²")
    ref: tuple[float, ...] | None = param("1")
    sub: _Sub = param("-")


_VALUES = {"mass": 3, "count": 2.0, "on": 1, "mode": "hold", "r": [1, 2, 3],
           "inertia": [[1, 0, 0], [0, 2, 0], [0, 0, 3]], "ref": None, "sub": {"bandwidth": 7}, "extra": "ignored"}


def test_values_are_converted_by_each_fields_annotation():
    p = from_values(_P, _VALUES)
    assert p == _P(3.0, 2, True, "hold", (1.0, 2.0, 3.0), ((1.0, 0.0, 0.0), (0.0, 2.0, 0.0), (0.0, 0.0, 3.0)), None,
                   _Sub(7.0))
    assert type(p.mass) is float and type(p.count) is int and type(p.r[0]) is float and type(p.sub.bandwidth) is float
    assert from_values(_P, {**_VALUES, "ref": [1, 0, 0, 0]}).ref == (1.0, 0.0, 0.0, 0.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.mass = 4.0  # type: ignore[misc]


@dataclass(frozen=True)
class _Free:
    start: Mapping[str, Any] = param("-")
    gains: dict[str, float] = param("N/m")
    script: tuple[dict[str, Any], ...] = param("-")
    limit: float | tuple[float, ...] = param("m")
    seed: int | str | None = param("-")
    subs: tuple[_Sub, ...] = param("-")


def test_a_table_of_free_keys_is_a_plain_copy_and_its_values_are_converted_by_their_annotation():
    waypoints = [{"p": [1, 2, 3], "v": 0.03}]
    cfg = {"start": {"k": 2, "on": True, "name": "leg", "nested": {"w": waypoints}}, "gains": {"a": 1, "b": 2.5},
           "script": [{"t": 0, "cmd": "auto", "waypoints": waypoints}], "limit": 1, "seed": None, "subs": []}
    p = from_values(_Free, cfg)
    assert p.start == {"k": 2, "on": True, "name": "leg", "nested": {"w": [{"p": [1, 2, 3], "v": 0.03}]}}
    assert type(p.start["k"]) is int and type(p.start) is dict and type(p.start["nested"]) is dict
    assert p.gains == {"a": 1.0, "b": 2.5} and type(p.gains["a"]) is float
    assert p.script == ({"t": 0, "cmd": "auto", "waypoints": [{"p": [1, 2, 3], "v": 0.03}]},)
    # a copy: changing the configuration afterwards changes nothing in the parameters
    waypoints[0]["v"] = 9.0
    cfg["start"]["k"] = 7
    assert p.start["k"] == 2 and p.start["nested"]["w"][0]["v"] == 0.03 and p.script[0]["waypoints"][0]["v"] == 0.03
    # it pickles (a mapping proxy given as the table would not)
    proxied = from_values(_Free, {**cfg, "start": MappingProxyType({"k": 1})})
    assert pickle.loads(pickle.dumps(proxied)).start == {"k": 1}
    with pytest.raises(TypeError, match=r"_Free.start: expected a table, got \[1\]"):
        from_values(_Free, {**cfg, "start": [1]})


def test_a_union_converts_a_value_by_the_member_of_its_own_type():
    base = {"start": {}, "gains": {}, "script": [], "limit": 0.5, "seed": 3, "subs": [{"bandwidth": 2}]}
    p = from_values(_Free, base)
    assert p.limit == 0.5 and p.seed == 3 and type(p.seed) is int and p.subs == (_Sub(2.0),)
    q = from_values(_Free, {**base, "limit": 2, "seed": "auto"})
    assert q.limit == 2.0 and type(q.limit) is float and q.seed == "auto"
    r = from_values(_Free, {**base, "limit": [1, 2.5], "seed": None})
    assert r.limit == (1.0, 2.5) and type(r.limit[0]) is float and r.seed is None
    with pytest.raises(TypeError, match=r"_Free.limit: 'far' is none of float \| tuple"):
        from_values(_Free, {**base, "limit": "far"})
    with pytest.raises(TypeError, match=r"_Free.seed: 1.5 is none of int \| str"):
        from_values(_Free, {**base, "seed": 1.5})


def test_units_name_every_field_and_a_sub_tables_fields():
    assert units(_P) == {"mass": "kg", "count": "-", "on": "-", "mode": "-", "r": "m", "inertia": "kg·m²", "ref": "1",
                         "sub.bandwidth": "rad/s"}
    assert units(_Free) == {"start": "-", "gains": "N/m", "script": "-", "limit": "m", "seed": "-",
                            "subs[].bandwidth": "rad/s"}


def test_a_missing_value_or_a_class_that_is_not_declared_parameters_is_refused_naming_it():
    with pytest.raises(KeyError, match=r"_P.mode: no value"):
        from_values(_P, {k: v for k, v in _VALUES.items() if k != "mode"})

    @dataclass
    class Mutable:
        x: float = param("m")

    @dataclass(frozen=True)
    class NoUnit:
        x: float = 0.0

    for cls in (Mutable, NoUnit, dict):
        assert not is_params(cls)
        with pytest.raises(TypeError, match="not a parameter class"):
            from_values(cls, {"x": 1.0})


def _table_keys(kind: str) -> Mapping[str, Any]:
    """The keys of the table a kind's parameters declare, as its module declares them: ``TABLE_KEYS`` of the table
    named as the kind (or of its one table), else its service table's ``OPTIONS``."""
    mod = registry.kind_module(kind)
    tables = getattr(mod, "TABLE_KEYS", {})
    if kind in tables:
        return tables[kind]
    if len(tables) == 1:
        return next(iter(tables.values()))
    return mod.OPTIONS


def _covers(cls: type, keys: Mapping[str, Any], where: str) -> None:
    """``cls`` has one field per key, a sub-table's (a mapping kind) a parameter class covering its keys."""
    assert is_params(cls), where
    assert {f.name for f in dataclasses.fields(cls)} == set(keys), where
    hints = typing.get_type_hints(cls)
    for key, spec in keys.items():
        kind = spec[0] if isinstance(spec, tuple) else spec
        if isinstance(kind, Mapping):
            _covers(hints[key], kind, f"{where}.{key}")


SHIPPED = [k for k in registry.BUILTIN if k != "testkit.toys"]


def test_every_shipped_kind_but_the_test_toys_is_listed():
    assert set(SHIPPED) == {"orbiter", "arm", "contact", "operator", "logger", "replay", "viewer", "hil.bridge", "fmu"}


@pytest.mark.parametrize("kind", SHIPPED)
def test_a_kinds_declared_parameters_cover_its_tables_keys(kind):
    cls = registry.params(kind)
    assert cls is not None and is_params(cls), f"{kind}: no PARAMS"
    _covers(cls, _table_keys(kind), kind)
    assert all(isinstance(u, str) and u for u in units(cls).values())


def test_the_orbiter_holds_the_configured_values_in_its_parameters():
    from services.orbiter import OrbiterModel

    cfg = {"orbiter": {"mass": 90_000.0, "inertia": [1.0e7, 2.0e7, 3.0e7], "attitude": "hold", "kp": [1.0, 2.0, 3.0],
                       "quat_ref": [0.0, 1.0, 0.0, 0.0], "substeps": 4, "orbit_altitude": 400e3}}
    m = OrbiterModel(cfg, "orbiter", 10_000_000)
    p = m.params
    assert p.mass == 90_000.0 and p.inertia == ((1.0e7, 0.0, 0.0), (0.0, 2.0e7, 0.0), (0.0, 0.0, 3.0e7))
    assert p.attitude == "hold" and m.hold and p.kp == (1.0, 2.0, 3.0) and p.substeps == 4 == m.substeps
    assert p.quat_ref == (0.0, 1.0, 0.0, 0.0)
    assert m.model.mass == 90_000.0 and np.array_equal(np.diag(m.model.I_Bcm_B), [1.0e7, 2.0e7, 3.0e7])
    # a rotation of pi about x (quaternion scalar first): diag(1, -1, -1)
    assert np.allclose(m.R_ref, np.diag([1.0, -1.0, -1.0]), atol=1e-15)
    assert m.orbit is not None
    assert OrbiterModel({}, "orbiter", 10_000_000).params.quat_ref is None


def test_a_bound_model_steps_either_form_on_its_context():
    """BoundModel: a model with a context is stepped on the bound one (a fresh one, or one given), a model without
    one as it is; other attributes read through."""
    from protocol.service import BoundModel

    @dataclass
    class Ctx:
        x: float = 0.0

    class WithContext:
        name, gain = "w", 2.0

        def new_context(self) -> Ctx:
            return Ctx()

        def initial(self, t0_ns, c):
            c.x = 1.0
            return {"x": c.x}

        def step(self, t_ns, h_ns, c, u):
            c.x *= self.gain
            return {"x": c.x}

    class Plain:
        name = "p"

        def __init__(self) -> None:
            self.x = 0.0

        def initial(self, t0_ns):
            self.x = 1.0
            return {"x": self.x}

        def step(self, t_ns, h_ns, u):
            self.x += 1.0
            return {"x": self.x}

    a, b = BoundModel(WithContext()), BoundModel(WithContext())
    assert a.ctx is not b.ctx and a.gain == 2.0 and a.name == "w"
    assert a.initial(0) == {"x": 1.0} and a.step(0, 1, None) == {"x": 2.0} and b.ctx.x == 0.0
    given = Ctx(5.0)
    c = BoundModel(a.obj, given)
    assert c.step(0, 1, None) == {"x": 10.0} and given.x == 10.0 and a.ctx.x == 2.0
    p = BoundModel(Plain())
    assert p.ctx is None and p.initial(0) == {"x": 1.0} and p.step(0, 1, None) == {"x": 2.0} and p.obj.x == 2.0
    with pytest.raises(AttributeError):
        p.missing  # noqa: B018 - the read is the test
