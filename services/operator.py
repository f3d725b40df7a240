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
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from protocol.config import check_table, check_value
from protocol.service import Port, ServicePorts
from services.commands import check_command

TABLES = ("operator",)
TOPIC = "operator/command"

TABLE_KEYS: dict[str, dict[str, tuple[Any, Any]]] = {"operator": {"script": ("list", [])}}
"""``[operator]``: key -> (kind, default) (:func:`protocol.config.check_value`)."""


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
    """The script player (a :class:`protocol.service.ServiceModel`); its state is :attr:`context`."""

    def __init__(self, config: dict[str, Any], name: str, period_ns: int) -> None:
        self.name = name
        self.period_ns = period_ns
        self.inputs: tuple[Port, ...] = ()
        self.outputs = (Port(TOPIC, "event"),)
        script = config.get("operator", {}).get("script", [])
        self._script = [(round(float(c["t"]) * 1e9), c) for c in script]
        self.context = OperatorContext()

    def _due(self, t_end_ns: int) -> list[dict[str, Any]]:
        out = []
        c = self.context
        while c.next < len(self._script) and self._script[c.next][0] <= t_end_ns:
            t_ns, cmd = self._script[c.next]
            ev = {"kind": cmd["cmd"], "t": t_ns * 1e-9}
            ev.update({k: v for k, v in cmd.items() if k not in ("cmd", "t")})
            out.append(ev)
            c.next += 1
        return out

    def initial(self, t0_ns: int) -> dict[str, dict[str, Any]]:
        """The commands at or before the start."""
        self.context.next = 0
        return {TOPIC: {"events": self._due(t0_ns)}}

    def step(self, t_ns: int, h_ns: int, u: Any) -> dict[str, dict[str, Any]]:
        """The commands with ``t < t_cmd ≤ t + h``, stamped ``t + h``."""
        return {TOPIC: {"events": self._due(t_ns + h_ns)}}


def build(config: dict[str, Any], name: str, period_ns: int) -> Operator:
    """The operator model of service ``name``."""
    return Operator(config, name, period_ns)


def ports(config: dict[str, Any], name: str) -> ServicePorts:
    """The operator's ports, before it is built (:mod:`protocol.config`)."""
    return ServicePorts("model", (), (Port(TOPIC, "event"),))
