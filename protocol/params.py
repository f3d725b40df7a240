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
(rows of floats); ``X | None`` as ``X`` unless the value is None; a union of several
members (``float | tuple[float, ...]``, ``int | str``) by the member of the value's own
type (a bool by ``bool``, an int by ``int`` else ``float``, a float by ``float``, a str by
``str``, a list or tuple by the ``tuple`` member, a table by the sub-table or mapping
member); another such dataclass (a sub-table) by its own :func:`from_values`;
``Mapping[str, X]`` or ``dict[str, X]`` (a table of free keys that its owner checks: a
script command, an FMU's start values) as a new ``dict``, each value converted as ``X``;
``Any`` as a plain copy (tables as ``dict``, lists as ``list``, each item copied the same
way; anything else as it is), so that a parameter object never shares a mutable value with
the configuration it came from and pickles with the standard library.

Units: SI, written as in the docstrings (``"kg·m²"``, ``"N·m/rad"``); ``"1"`` a pure
number, ``"-"`` a choice, a flag or a count.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from typing import Any, ClassVar, TypeVar

__all__ = ["ServiceTableParams", "from_values", "is_params", "param", "units"]


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
    """Field name -> unit of a parameter class; a sub-table's fields as ``"sub.field"``, those of a list of
    sub-tables (``tuple[Sub, ...]``) as ``"subs[].field"``.

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
        item: Any = typing.get_args(sub)[0] if typing.get_origin(sub) is tuple else None
        if is_params(sub):
            out.update({f"{f.name}.{k}": u for k, u in units(sub).items()})
        elif is_params(item):
            out.update({f"{f.name}[].{k}": u for k, u in units(item).items()})
        else:
            out[f.name] = f.metadata["unit"]
    return out


def _plain(x: Any) -> Any:
    """A plain copy of a configuration value: tables as dict, lists as list, tuples as tuple (items copied the
    same way); anything else (a number, a string, a bool, None) as it is."""
    if isinstance(x, Mapping):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_plain(v) for v in x]
    if isinstance(x, tuple):
        return tuple(_plain(v) for v in x)
    return x


_MAPPINGS = (dict, Mapping)


def _member(args: list[Any], x: Any, where: str) -> Any:
    """The member of a union (None taken out) that converts ``x``: the one of its own type (module docstring)."""
    def kind(a: Any) -> Any:
        o = typing.get_origin(a)
        if is_params(a) or a in _MAPPINGS or o in _MAPPINGS:
            return Mapping
        return tuple if o is tuple or a is tuple else a

    kinds = [kind(a) for a in args]
    if isinstance(x, bool):
        want: tuple[Any, ...] = (bool,)
    elif isinstance(x, int):
        want = (int, float)
    elif isinstance(x, float):
        want = (float,)
    elif isinstance(x, str):
        want = (str,)
    elif isinstance(x, (list, tuple)):
        want = (tuple,)
    elif isinstance(x, Mapping):
        want = (Mapping,)
    else:
        want = ()
    for w in want:
        if w in kinds:
            return args[kinds.index(w)]
    raise TypeError(f"{where}: {x!r} is none of {' | '.join(getattr(a, '__name__', str(a)) for a in args)}")


def _convert(tp: Any, x: Any, where: str) -> Any:
    if is_params(tp):
        if not isinstance(x, Mapping):
            raise TypeError(f"{where}: expected a table, got {x!r}")
        return from_values(tp, x)
    if tp is Any:
        return _plain(x)
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if x is None and len(args) < len(typing.get_args(tp)):
            return None
        return _convert(args[0] if len(args) == 1 else _member(args, x, where), x, where)
    if tp in _MAPPINGS or origin in _MAPPINGS:
        if not isinstance(x, Mapping):
            raise TypeError(f"{where}: expected a table, got {x!r}")
        (_key, inner) = typing.get_args(tp) or (str, Any)
        return {k: _convert(inner, v, f"{where}.{k}") for k, v in x.items()}
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


_P = TypeVar("_P", bound="ServiceTableParams")


class ServiceTableParams:
    """Base of the parameters of a kind whose keys are its own service table's extra keys (``OPTIONS``: the
    logger, the replay, the viewer, the FMU host), not a table of its own: :meth:`from_service` reads
    ``[services.NAME]`` with the class's :attr:`DEFAULTS` filled in (the table's other keys, ``kind``,
    ``rate_hz``, ..., are the runtime's). A subclass is a frozen dataclass as any declared parameters."""

    DEFAULTS: ClassVar[Mapping[str, Any]] = {}
    """The defaults of the keys a configuration may leave out (the kind module's own ``DEFAULTS``)."""

    @classmethod
    def from_service(cls: type[_P], config: Mapping[str, Any], name: str) -> _P:
        """The parameters of service ``name`` of ``config``, from values the kind's ``validate`` has checked.

        Raises
        ------
        KeyError
            If ``config`` has no service ``name``, or it lacks a key without a default (``Class.field: no value``).
        TypeError, ValueError
            If a value does not convert (a configuration the kind's ``validate`` refuses).
        """
        out: _P = from_values(cls, {**cls.DEFAULTS, **config["services"][name]})
        return out
