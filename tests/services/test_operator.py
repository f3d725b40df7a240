"""The operator script player: timing of the published commands and validation of the script."""

from __future__ import annotations

import pytest

from protocol.service import BoundModel
from protocol.stepping import StepInputs
from services import operator as op
from services.commands import check_command

H = 10_000_000  # 100 Hz


def cfg(script):
    return {"operator": {"script": script}}


def test_commands_published_in_the_step_that_reaches_their_time():
    script = [{"t": 0.0, "cmd": "mode", "mode": "manual"},
              {"t": 0.015, "cmd": "rate", "v": [0.01, 0.0, 0.0]},
              {"t": 0.02, "cmd": "capture"},
              {"t": 0.02, "cmd": "brakes", "on": True}]
    assert op.validate(cfg(script), "operator") == []
    m = BoundModel(op.build(cfg(script), "operator", H))
    assert m.inputs == () and m.outputs[0].topic == "operator/command" and m.outputs[0].kind == "event"
    first = m.initial(0)["operator/command"]["events"]
    assert first == [{"kind": "mode", "t": 0.0, "mode": "manual"}]
    empty = StepInputs(0, H, {}, {}, {})
    assert m.step(0, H, empty)["operator/command"]["events"] == []              # (0, 0.01]
    evs = m.step(H, H, empty)["operator/command"]["events"]                      # (0.01, 0.02]
    assert [e["kind"] for e in evs] == ["rate", "capture", "brakes"]
    assert evs[0]["v"] == [0.01, 0.0, 0.0] and evs[0]["t"] == pytest.approx(0.015)
    assert m.step(2 * H, H, empty)["operator/command"]["events"] == []


@pytest.mark.parametrize("entry,fragment", [
    ({"t": 1.0, "cmd": "teleport"}, "unknown command 'teleport'"),
    ({"t": 1.0, "cmd": "rate", "v": [0.1, 0.0]}, "expected a list of 3 finite numbers"),
    ({"t": 1.0, "cmd": "rate"}, "needs v and/or w"),
    ({"t": 1.0, "cmd": "rate", "v": [0, 0, 0], "speed": 2}, "unknown field for 'rate'"),
    ({"t": 1.0, "cmd": "joint", "joint": "elbow_roll", "rate": 0.01}, "no such joint 'elbow_roll'"),
    ({"t": 1.0, "cmd": "joint", "joint": 6, "rate": 0.01}, "no such joint 6"),
    ({"t": 1.0, "cmd": "joint", "joint": 2}, "rate: missing"),
    ({"t": 1.0, "cmd": "direct", "joint": "elbow_pitch"}, "drive: missing"),
    ({"t": 1.0, "cmd": "direct", "joint": "elbow_roll", "drive": 0.1}, "no such joint 'elbow_roll'"),
    ({"t": 1.0, "cmd": "mode", "mode": "dance"}, "expected one of"),
    ({"t": 1.0, "cmd": "brakes", "on": "yes"}, "on: expected bool"),
    ({"t": 1.0, "cmd": "auto", "waypoints": []}, "non-empty list"),
    ({"t": 1.0, "cmd": "auto", "waypoints": [{"v": 0.1}]}, "waypoints[0].p: missing"),
    ({"t": 1.0, "cmd": "auto", "waypoints": [{"p": [1, 2, 3], "quat": [1, 1, 0, 0]}]}, "unit quaternion"),
    ({"t": -1.0, "cmd": "stop"}, "t: expected a finite number >= 0"),
    ({"cmd": "stop"}, "t: expected a finite number >= 0"),
    ({"t": 1.0}, "cmd: missing"),
])
def test_bad_script_entries_are_listed(entry, fragment):
    problems = op.validate(cfg([{"t": 0.0, "cmd": "stop"}, entry]), "operator")
    assert any(fragment in p and "operator.script[1]" in p for p in problems), problems


def test_every_problem_listed_and_order_checked():
    script = [{"t": 2.0, "cmd": "stop"}, {"t": 1.0, "cmd": "stop"}, {"t": 3.0, "cmd": "nope"}]
    problems = op.validate({"operator": {"script": script, "extra": 1}}, "operator")
    assert len(problems) == 3
    assert any("before the previous" in p for p in problems) and any("operator.extra" in p for p in problems)


def test_contact_commands_carry_free_fields():
    assert check_command({"cmd": "capture", "mode": "snare", "force": 10.0}) == []
    assert check_command({"kind": "release"}) == []
