"""The ``operator/command`` vocabulary: the commands an operator (or a script) sends, their fields and checks.

``operator/command`` samples carry events (:mod:`protocol.messages`); each event is one
command map ``{"kind": cmd, "t": t_cmd, ...fields}``. The operator service plays them from
a script (``services/operator.py``); the arm and contact services act on them
(:data:`ARM_COMMANDS`, :data:`CONTACT_COMMANDS`). This module is the one definition of
what a command may hold, shared by all three.

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

from protocol.config import check_value

__all__ = ["JOINT_NAMES", "MODES", "FRAMES", "COMMANDS", "ARM_COMMANDS", "CONTACT_COMMANDS", "WAYPOINT_FIELDS",
           "check_command", "finite_number"]

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


_CONFIG_KINDS: dict[str, Any] = {"vec3": ("vec", 3), "vec4": ("vec", 4), "num": (int, float), "bool": bool}
"""The field kinds that are plain config kinds (:func:`protocol.config.check_value`, the one validator)."""


def finite_number(x: Any) -> bool:
    """A finite int or float (not a bool)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _check_field(where: str, kind: str, value: Any) -> str | None:
    """A problem with one field, or None."""
    if kind == "any":
        return None
    if kind in _CONFIG_KINDS:
        return check_value(where, value, _CONFIG_KINDS[kind])
    if kind.startswith("str:"):
        return check_value(where, value, tuple(kind[4:].split(",")))
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


