"""Declared parameters (protocol/params.py): a kind's frozen dataclass, units per field, built once from its
checked table; the orbiter's and the arm's cover their tables' keys and hold the configured values; a context field
read through the model (protocol.service.ContextField)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

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


def test_units_name_every_field_and_a_sub_tables_fields():
    assert units(_P) == {"mass": "kg", "count": "-", "on": "-", "mode": "-", "r": "m", "inertia": "kg·m²", "ref": "1",
                         "sub.bandwidth": "rad/s"}


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


@pytest.mark.parametrize("kind", ["orbiter", "arm"])
def test_a_kinds_declared_parameters_cover_its_tables_keys(kind):
    cls = registry.params(kind)
    assert cls is not None and is_params(cls)
    (table,) = registry.kind_module(kind).TABLE_KEYS.keys() & {kind}
    keys = set(registry.kind_module(kind).TABLE_KEYS[table])
    assert {f.name for f in dataclasses.fields(cls)} == keys


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


def test_a_context_field_reads_and_writes_through_the_models_context_and_refuses_a_read_only_write():
    from protocol.service import ContextField

    @dataclass
    class Ctx:
        theta: float
        body: str

    class Model:
        theta = ContextField("angle [rad]", writable=True)
        state = ContextField("the body", field="body")

        def __init__(self) -> None:
            self.context = Ctx(0.5, "B")

    m = Model()
    assert (m.theta, m.state) == (0.5, "B") and Model.theta.__doc__ == "angle [rad]"
    m.theta = 0.25
    assert m.context.theta == 0.25
    m.context = Ctx(1.0, "C")  # a new context: the fields follow it
    assert (m.theta, m.state) == (1.0, "C")
    with pytest.raises(AttributeError, match=r"Model\.state is read-only: set context\.body"):
        m.state = "D"
