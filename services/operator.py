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

Command vocabulary
------------------
Every command has ``t`` (s, ≥ 0, the script sorted by it) and ``cmd``; the other fields
are listed per command (R = required, O = optional). Vectors are lists of numbers;
all values finite. Frames: ``"orbiter"`` (O) or ``"end_effector"`` (E).

For the arm (``services/arm.py``):

``mode``        R ``mode``: ``"manual"`` (manual augmented: point-of-resolution rate
                commands, resolved through J^-1), ``"auto"`` (auto sequence),
                ``"single"`` (single joint), ``"brakes"`` (brakes on, servos off),
                ``"hold"`` (servos hold the present angles). O ``frame`` for manual
                (default ``"orbiter"``).
``rate``        Manual augmented rate command of the point of resolution, held until
                the next: R ``v`` [3] m/s and/or ``w`` [3] rad/s (a missing one is zero);
                O ``frame``. Refused unless the arm is in manual mode.
``auto``        Start an auto sequence: R ``waypoints``, a list of maps with R ``p``
                [3] (point of resolution in O, m), O ``quat`` [4] (``quat_OE`` wxyz),
                O ``v`` (m/s) and ``w`` (rad/s) rate limits for the leg.
``joint``       Single-joint drive: R ``joint`` (name, e.g. ``"elbow_pitch"``, or index
                0…5) and ``rate`` (rad/s); switches to single-joint mode.
``direct``      Direct drive (the SRMS's backup mode): R ``joint`` and ``drive``, the motor
                current as a fraction of the joint's current limit (-1…1), applied
                bypassing the rate loop; the other joints hold. Switches to direct mode.
``brakes``      R ``on`` (bool).
``stop``        All commanded rates to zero (the mode is kept).
``por``         Move the point of resolution: R ``p`` [3] in the last link frame (m).

For contact (``services/contact.py``; the arm ignores them):

``capture``     Request a capture (snare) of the grapple fixture.
``release``     Request a release of the payload.

Commands beyond the arm's limits are clipped by the arm and reported on ``arm/state``;
commands it cannot apply (unknown, non-finite, a missing joint, wrong mode) are
refused there with a reason. This module validates the script at config time: every
problem (unknown command, missing or unknown field, wrong type, bad value) is listed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from protocol.service import Port, ServicePorts

TABLES = ("operator",)
TOPIC = "operator/command"

JOINT_NAMES = ("shoulder_yaw", "shoulder_pitch", "elbow_pitch", "wrist_pitch", "wrist_yaw", "wrist_roll")
MODES = ("manual", "auto", "single", "brakes", "hold")
FRAMES = ("orbiter", "end_effector")

# field kinds: "vec3", "vec4", "num", "bool", "str:<choices>", "joint", "waypoints", "any"
COMMANDS: dict[str, tuple[dict[str, str], dict[str, str]]] = {
    # cmd: (required fields, optional fields)
    "mode": ({"mode": "str:" + ",".join(MODES)}, {"frame": "str:" + ",".join(FRAMES)}),
    "rate": ({}, {"v": "vec3", "w": "vec3", "frame": "str:" + ",".join(FRAMES)}),
    "auto": ({"waypoints": "waypoints"}, {}),
    "joint": ({"joint": "joint", "rate": "num"}, {}),
    "direct": ({"joint": "joint", "drive": "num"}, {}),
    "brakes": ({"on": "bool"}, {}),
    "stop": ({}, {}),
    "por": ({"p": "vec3"}, {}),
    "capture": ({}, {"*": "any"}),
    "release": ({}, {"*": "any"}),
}
ARM_COMMANDS = ("mode", "rate", "auto", "joint", "direct", "brakes", "stop", "por")
CONTACT_COMMANDS = ("capture", "release")
WAYPOINT_FIELDS = {"p": "vec3", "quat": "vec4", "v": "num", "w": "num"}


def _finite_num(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _check_field(where: str, kind: str, value: Any) -> str | None:
    """A problem with one field, or None."""
    if kind == "any":
        return None
    if kind in ("vec3", "vec4"):
        n = int(kind[-1])
        if not isinstance(value, (list, tuple)) or len(value) != n or not all(_finite_num(x) for x in value):
            return f"{where}: expected a list of {n} finite numbers, got {value!r}"
        return None
    if kind == "num":
        return None if _finite_num(value) else f"{where}: expected a finite number, got {value!r}"
    if kind == "bool":
        return None if isinstance(value, bool) else f"{where}: expected true/false, got {value!r}"
    if kind.startswith("str:"):
        choices = kind[4:].split(",")
        return None if value in choices else f"{where}: expected one of {', '.join(choices)}, got {value!r}"
    if kind == "joint":
        if isinstance(value, str) and value in JOINT_NAMES:
            return None
        if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < len(JOINT_NAMES):
            return None
        return f"{where}: no such joint {value!r} (joints: {', '.join(JOINT_NAMES)} or 0..5)"
    if kind == "waypoints":
        if not isinstance(value, (list, tuple)) or not value:
            return f"{where}: expected a non-empty list of waypoint maps, got {value!r}"
        for i, wp in enumerate(value):
            if not isinstance(wp, Mapping):
                return f"{where}[{i}]: expected a map with p (and quat, v, w), got {wp!r}"
            if "p" not in wp:
                return f"{where}[{i}].p: missing"
            for k, v in wp.items():
                if k not in WAYPOINT_FIELDS:
                    return f"{where}[{i}].{k}: unknown field (known: {', '.join(WAYPOINT_FIELDS)})"
                bad = _check_field(f"{where}[{i}].{k}", WAYPOINT_FIELDS[k], v)
                if bad:
                    return bad
            if "quat" in wp and abs(math.sqrt(sum(x * x for x in wp["quat"])) - 1.0) > 1e-6:
                return f"{where}[{i}].quat: expected a unit quaternion, got {wp['quat']!r}"
            for k in ("v", "w"):
                if k in wp and wp[k] <= 0.0:
                    return f"{where}[{i}].{k}: expected > 0, got {wp[k]!r}"
        return None
    return f"{where}: unknown field kind {kind!r}"


def check_command(command: Mapping[str, Any], where: str = "command") -> list[str]:
    """Problems of one command map (``cmd`` or ``kind`` names it; ``t`` is not checked here).

    Returns
    -------
    list of str
        Empty if the command is well formed.
    """
    name = command.get("cmd", command.get("kind"))
    if name not in COMMANDS:
        return [f"{where}.cmd: unknown command {name!r} (known: {', '.join(COMMANDS)})"]
    required, optional = COMMANDS[name]
    problems = [f"{where}.{k}: missing (required by {name!r})" for k in required if k not in command]
    for k, v in command.items():
        if k in ("cmd", "kind", "t"):
            continue
        kind = required.get(k) or optional.get(k) or optional.get("*")
        if kind is None:
            problems.append(f"{where}.{k}: unknown field for {name!r} (known: {', '.join([*required, *optional])})")
            continue
        bad = _check_field(f"{where}.{k}", kind, v)
        if bad:
            problems.append(bad)
    if name == "rate" and "v" not in command and "w" not in command:
        problems.append(f"{where}: 'rate' needs v and/or w")
    return problems


def validate(config: dict[str, Any], name: str) -> list[str]:
    """Problems of the ``[operator]`` table (every one listed)."""
    table = config.get("operator", {})
    if not isinstance(table, dict):
        return [f"[operator]: expected a table, got {table!r}"]
    problems = [f"operator.{k}: unknown key (known: script)" for k in table if k != "script"]
    script = table.get("script", [])
    if not isinstance(script, list):
        return problems + [f"operator.script: expected a list of command tables, got {script!r}"]
    last = -math.inf
    for i, c in enumerate(script):
        where = f"operator.script[{i}]"
        if not isinstance(c, dict):
            problems.append(f"{where}: expected a table {{t = ..., cmd = ...}}, got {c!r}")
            continue
        t = c.get("t")
        if not _finite_num(t) or t < 0:
            problems.append(f"{where}.t: expected a time >= 0 [s], got {t!r}")
        elif t < last:
            problems.append(f"{where}.t: {t} is before the previous command's {last} (sort the script)")
        else:
            last = t
        if "cmd" not in c:
            problems.append(f"{where}.cmd: missing")
            continue
        problems.extend(check_command(c, where))
    return problems


class Operator:
    """The script player (a :class:`protocol.service.ServiceModel`)."""

    def __init__(self, config: dict[str, Any], name: str, period_ns: int) -> None:
        self.name = name
        self.period_ns = period_ns
        self.inputs: tuple[Port, ...] = ()
        self.outputs = (Port(TOPIC, "event"),)
        script = config.get("operator", {}).get("script", [])
        self._script = [(round(float(c["t"]) * 1e9), c) for c in script]
        self._next = 0

    def _due(self, t_end_ns: int) -> list[dict[str, Any]]:
        out = []
        while self._next < len(self._script) and self._script[self._next][0] <= t_end_ns:
            t_ns, c = self._script[self._next]
            ev = {"kind": c["cmd"], "t": t_ns * 1e-9}
            ev.update({k: v for k, v in c.items() if k not in ("cmd", "t")})
            out.append(ev)
            self._next += 1
        return out

    def initial(self, t0_ns: int) -> dict[str, dict[str, Any]]:
        """The commands at or before the start."""
        self._next = 0
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
