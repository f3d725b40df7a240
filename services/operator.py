"""The operator: plays the scenario's ``[operator]`` script as events on ``operator/command``.

A tiny service (kind ``"operator"``): at each step ``t → t + h`` it publishes, stamped
``t + h``, every script command with ``t < t_cmd ≤ t + h`` (those at or before the start
in the initial sample), one event map each: ``{"kind": cmd, "t": t_cmd, ...fields}``.

Config::

    [services.operator]
    kind = "operator"
    rate_hz = 100

    [operator]
    script = [
      { t = 0.0,  cmd = "mode", mode = "manual", frame = "orbiter" },
      { t = 1.0,  cmd = "rate", v = [0.02, 0.0, 0.0], w = [0.0, 0.0, 0.0] },
      { t = 20.0, cmd = "capture" },
      { t = 22.0, cmd = "auto", waypoints = [ { p = [12.0, -3.0, -2.0], v = 0.03 } ] },
      { t = 90.0, cmd = "release" },
    ]

The commands (their fields and checks) are the ``operator/command`` vocabulary of
:mod:`services.commands`, shared with the arm and contact services that act on them.

:class:`OperatorParams` is ``[operator]`` parsed once (frozen, units in its fields' metadata,
:mod:`protocol.params`); :data:`PARAMS` names it for :mod:`protocol.registry`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from protocol.config import check_table, check_value
from protocol.messages import EVENTS, TopicSchema
from protocol.params import from_values, param
from protocol.service import Port, ServicePorts
from services.commands import check_command

__all__ = ["PARAMS", "TABLES", "TABLE_KEYS", "TOPIC", "TOPICS", "Operator", "OperatorContext", "OperatorParams",
           "build", "ports", "validate"]

TABLES = ("operator",)
TOPIC = "operator/command"

TOPICS: Mapping[str, TopicSchema] = {
    "operator/command": TopicSchema("berthsim.OperatorCommand", 1, "event", {"events": EVENTS}),
}
"""The operator's command events (:mod:`protocol.registry` registers them)."""

TABLE_KEYS: dict[str, dict[str, tuple[Any, Any]]] = {"operator": {"script": ("list", [])}}
"""``[operator]``: key -> (kind, default) (:func:`protocol.config.check_value`)."""


@dataclass(frozen=True)
class OperatorParams:
    """``[operator]``, parsed once (:data:`TABLE_KEYS`; the module docstring says what each key does). Each field's
    unit is in its metadata (:func:`protocol.params.units`).

    Attributes
    ----------
    script : tuple of dict
        The script's commands in order, each a table ``{"t": float [s], "cmd": str, ...fields}`` as configured
        (its fields are those of :mod:`services.commands`), ``t`` converted to float; () when no script.
    """

    script: tuple[dict[str, Any], ...] = param("-")            # commands; each one's t in s

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> OperatorParams:
        """``[operator]`` of ``config`` with its defaults (a bad value reads as its default: :func:`validate`
        lists it), by :func:`protocol.params.from_values`: each command a table of free keys (its fields depend
        on its ``cmd``), copied as a plain ``dict`` (nested tables and lists copied too), its ``t`` a float.

        Raises
        ------
        KeyError, TypeError, ValueError
            If a command has no ``t``, or a ``t`` that is not a number (:func:`validate` reports both).
        """
        script = check_table(config, "operator", TABLE_KEYS["operator"], [])["script"]
        return from_values(cls, {"script": [{**c, "t": float(c["t"])} for c in script]})


PARAMS = OperatorParams
"""The kind's declared parameters (:mod:`protocol.registry`)."""


def validate(config: dict[str, Any], name: str) -> list[str]:
    """Problems of the ``[operator]`` table (every one listed): its keys, then each script command (a
    table with ``t``, a time >= 0 in order, and a command of :mod:`services.commands`)."""
    problems: list[str] = []
    script = check_table(config, "operator", TABLE_KEYS["operator"], problems)["script"]
    last = -math.inf
    for i, c in enumerate(script):
        where = f"operator.script[{i}]"
        if (bad := check_value(where, c, "table")):
            problems.append(bad)
            continue
        if (bad := check_value(f"{where}.t", c.get("t"), "nonnegative")):
            problems.append(bad)
        elif c["t"] < last:
            problems.append(f"{where}.t: {c['t']} is before the previous command's {last} (sort the script)")
        else:
            last = c["t"]
        if "cmd" not in c:
            problems.append(f"{where}.cmd: missing")
            continue
        problems.extend(check_command(c, where))
    return problems


@dataclass(slots=True)
class OperatorContext:
    """What the script player changes as it runs (its context, :mod:`protocol.service`).

    Attributes
    ----------
    next : int
        Index of the first script command not yet published.
    """

    next: int = 0


class Operator:
    """The script player (a :class:`protocol.service.ContextModel`); its state is an :class:`OperatorContext`
    the runtime holds (:meth:`new_context`).

    Parameters
    ----------
    config : Mapping
        The run configuration (``[operator]`` read, :class:`OperatorParams`; checked by :func:`validate`).
    name : str
        Service name.
    period_ns : int
        Step. [ns]

    Attributes
    ----------
    params : OperatorParams
        ``[operator]`` as parsed.
    """

    def __init__(self, config: Mapping[str, Any], name: str, period_ns: int) -> None:
        self.name = name
        self.period_ns = period_ns
        self.inputs: tuple[Port, ...] = ()
        self.outputs = (Port(TOPIC, "event"),)
        self.params = OperatorParams.from_config(config)
        self._script = [(round(c["t"] * 1e9), c) for c in self.params.script]

    def new_context(self) -> OperatorContext:
        """A fresh context: no command published yet."""
        return OperatorContext()

    def _due(self, c: OperatorContext, t_end_ns: int) -> list[dict[str, Any]]:
        out = []
        while c.next < len(self._script) and self._script[c.next][0] <= t_end_ns:
            t_ns, cmd = self._script[c.next]
            ev = {"kind": cmd["cmd"], "t": t_ns * 1e-9}
            ev.update({k: v for k, v in cmd.items() if k not in ("cmd", "t")})
            out.append(ev)
            c.next += 1
        return out

    def initial(self, t0_ns: int, c: OperatorContext) -> dict[str, dict[str, Any]]:
        """The commands at or before the start."""
        c.next = 0
        return {TOPIC: {"events": self._due(c, t0_ns)}}

    def step(self, t_ns: int, h_ns: int, c: OperatorContext, u: Any) -> dict[str, dict[str, Any]]:
        """The commands with ``t < t_cmd ≤ t + h``, stamped ``t + h``."""
        return {TOPIC: {"events": self._due(c, t_ns + h_ns)}}


def build(config: dict[str, Any], name: str, period_ns: int) -> Operator:
    """The operator model of service ``name``."""
    return Operator(config, name, period_ns)


def ports(config: dict[str, Any], name: str) -> ServicePorts:
    """The operator's ports, before it is built (:mod:`protocol.config`)."""
    return ServicePorts("model", (), (Port(TOPIC, "event"),))
