"""A service kind's parameters, declared once: a frozen dataclass, each field with its unit, parsed from checked values.

A kind that declares its parameters writes them as a frozen dataclass (after Drake's
declared parameters, Pinocchio's ``Model``), one field per key of the table it owns, each
made by :func:`param` with its unit::

    @dataclass(frozen=True)
    class OrbiterParams:
        mass: float = param("kg")
        kp: tuple[float, ...] = param("N·m/rad")      # (3,)

and builds it with :func:`from_values` from the values :func:`protocol.config.check_table`
has checked (every problem is named there, field and value; this module only converts).
The kind module names the class in its optional ``PARAMS`` attribute
(:mod:`protocol.registry`), so that tools can list a kind's parameters with their units
(:func:`units`) without building it.

Conversion by the field's annotation: ``float``, ``int``, ``bool`` and ``str`` by their
type; ``tuple[float, ...]`` a vector of floats; ``tuple[tuple[float, ...], ...]`` a matrix
(rows of floats); ``X | None`` as ``X`` unless the value is None; another such dataclass
(a sub-table) by its own :func:`from_values`.

Units: SI, written as in the docstrings (``"kg·m²"``, ``"N·m/rad"``); ``"1"`` a pure
number, ``"-"`` a choice, a flag or a count.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from typing import Any

__all__ = ["from_values", "is_params", "param", "units"]


def param(unit: str) -> Any:
    """A parameter field with its unit (``"1"``: a pure number, ``"-"``: a choice, a flag or a count)."""
    return dataclasses.field(metadata={"unit": unit})


def is_params(cls: Any) -> bool:
    """Whether ``cls`` is a declared parameter class: a frozen dataclass whose every field has a unit."""
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        return False
    if not cls.__dataclass_params__.frozen:  # type: ignore[attr-defined]
        return False
    return all("unit" in f.metadata for f in dataclasses.fields(cls))


def units(cls: type) -> dict[str, str]:
    """Field name -> unit of a parameter class; a sub-table's fields as ``"sub.field"``.

    Raises
    ------
    TypeError
        If ``cls`` is not a parameter class (:func:`is_params`), naming it.
    """
    if not is_params(cls):
        raise TypeError(f"{getattr(cls, '__qualname__', cls)!r} is not a parameter class (a frozen dataclass whose "
                        "every field has a unit)")
    out: dict[str, str] = {}
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        sub = hints[f.name]
        if is_params(sub):
            out.update({f"{f.name}.{k}": u for k, u in units(sub).items()})
        else:
            out[f.name] = f.metadata["unit"]
    return out


def _convert(tp: Any, x: Any, where: str) -> Any:
    if is_params(tp):
        if not isinstance(x, Mapping):
            raise TypeError(f"{where}: expected a table, got {x!r}")
        return from_values(tp, x)
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if x is None and len(args) < len(typing.get_args(tp)):
            return None
        return _convert(args[0], x, where)
    if origin is tuple:
        (inner, *_rest) = typing.get_args(tp)
        return tuple(_convert(inner, v, f"{where}[{i}]") for i, v in enumerate(x))
    if tp is float:
        return float(x)
    if tp is int:
        return int(x)
    if tp is bool:
        return bool(x)
    if tp is str:
        return str(x)
    raise TypeError(f"{where}: a parameter of type {tp!r} is not supported")


def from_values(cls: type, values: Mapping[str, Any]) -> Any:
    """An instance of parameter class ``cls`` from checked values (key -> value; extra keys are ignored).

    Raises
    ------
    TypeError
        If ``cls`` is not a parameter class, or a field's annotation is not one this module converts.
    KeyError
        If a field has no value in ``values``, naming it.
    """
    if not is_params(cls):
        raise TypeError(f"{getattr(cls, '__qualname__', cls)!r} is not a parameter class (a frozen dataclass whose "
                        "every field has a unit)")
    hints = typing.get_type_hints(cls)
    kw: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name not in values:
            raise KeyError(f"{cls.__qualname__}.{f.name}: no value")
        kw[f.name] = _convert(hints[f.name], values[f.name], f"{cls.__qualname__}.{f.name}")
    return cls(**kw)
