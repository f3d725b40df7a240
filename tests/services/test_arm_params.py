"""The arm's parsed ``[arm]`` (ArmParams) and its plant/controller split.

References: the config tables the service declares (``ARM_KEYS``, ``DEFAULTS``, ``ASSUMED``), which
``protocol.config`` checks and ``services.export_scene`` reads; for the split, a stand-in controller
whose commanded rates are known, which the plant's servos must follow.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from protocol.service import BoundModel, Sample
from protocol.stepping import StepInputs
from services import arm

H_NS = 2_000_000


def _inputs(t_ns: int) -> StepInputs:
    z = np.zeros(3)
    orb = Sample(t_ns, H_NS, "orbiter", 0, {"p_WoOo_W": z, "quat_WO": np.array([1.0, 0.0, 0.0, 0.0]), "w_WO_O": z,
                                         "v_WOo_W": z, "a_WOo_W": z, "wdot_WO_O": z})
    return StepInputs(t_ns, H_NS, {"orbiter/state": orb}, {}, {})


def test_the_fields_are_the_config_keys_each_with_a_unit():
    names = [f.name for f in dataclasses.fields(arm.ArmParams)]
    assert names == list(arm.ARM_KEYS)
    assert [f.name for f in dataclasses.fields(arm.ArmAssumed)] == list(arm.ASSUMED_KEYS)
    for cls in (arm.ArmParams, arm.ArmAssumed):
        for f in dataclasses.fields(cls):
            assert isinstance(f.metadata.get("unit"), str) and f.metadata["unit"], (cls.__name__, f.name)
    units = {f.name: f.metadata["unit"] for f in dataclasses.fields(arm.ArmParams)}
    assert (units["q0"], units["v_max"], units["w_max"], units["warn_hold"]) == ("rad", "m/s", "rad/s", "s")
    assumed = {f.name: f.metadata["unit"] for f in dataclasses.fields(arm.ArmAssumed)}
    assert assumed["joint_stiffness"] == "N·m/rad" and assumed["beam_EI"] == "N·m²"


def test_defaults_are_the_tables_and_values_are_typed_and_frozen():
    p = arm.ArmParams.from_config({})
    for key, default in arm.DEFAULTS.items():
        got = getattr(p, key)
        if isinstance(default, list):
            assert got == tuple(float(x) for x in default), key
        else:
            assert got == default and type(got) is type(default), key
    for key, default in arm.ASSUMED.items():
        got = getattr(p.assumed, key)
        assert got == (tuple(float(x) for x in default) if isinstance(default, list) else default), key
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.v_max = 1.0  # type: ignore[misc]
    q = arm.ArmParams.from_config({"arm": {"v_max": 1, "flex_every": 5, "por": [1, 0, 0],
                                           "assumed": {"gear_ratio": [100, 100, 100, 100, 100, 100]}}})
    assert type(q.v_max) is float and q.v_max == 1.0
    assert type(q.flex_every) is int and q.flex_every == 5
    assert q.por == (1.0, 0.0, 0.0) and all(type(x) is float for x in q.por)
    assert q.assumed.gear_ratio == (100.0,) * 6
    assert q.assumed.bandwidth == arm.ASSUMED["bandwidth"]          # the rest of [arm.assumed] its defaults


def test_the_service_reads_its_parameters_once():
    m = arm.build({"arm": {"v_max": 0.3}}, "arm", H_NS)
    assert not hasattr(m, "s")
    assert m.params.v_max == 0.3 and m.controller.p is m.params and m.plant.p is m.params


@pytest.mark.parametrize(("table", "plant"), [({}, arm.MasslessPlant), ({"model": "multibody"}, arm.MultibodyPlant),
                                              ({"model": "multibody", "booms": "flexible"}, arm.FlexiblePlant)])
def test_the_plant_follows_model_and_booms(table, plant):
    m = arm.build({"arm": table}, "arm", H_NS)
    assert type(m.plant) is plant
    assert isinstance(m.controller, arm.ModeController)


class _ConstantRates:
    """A controller that commands one joint rate and ignores commands and events."""

    def __init__(self, qd: list[float]) -> None:
        self.qd = qd

    def command(self, c: arm.ArmContext, ev: dict[str, Any]) -> None:
        pass

    def contact(self, c: arm.ArmContext, ev: dict[str, Any], orb: Any, pay: Any, X_OE: Any) -> None:
        pass

    def rates(self, c: arm.ArmContext) -> list[float]:
        return list(self.qd)

    def direct_currents(self, c: arm.ArmContext) -> None:
        return None


def test_any_controller_drives_the_plant():
    """The free massless arm under a stand-in controller: the joint follows the commanded rate (the rate loop's
    bandwidth, 60 rad/s, settles it in well under the 1 s run), the others stay where they are."""
    a = arm.build({"arm": {}}, "arm", H_NS)
    a.controller = _ConstantRates([0.0, 0.0, 0.01, 0.0, 0.0, 0.0])
    m = BoundModel(a)
    q0 = m.ctx.theta.copy()
    m.initial(0)
    n = 500
    for k in range(n):
        out = m.step(k * H_NS, H_NS, _inputs(k * H_NS))
    dq = m.ctx.theta - q0
    assert abs(m.ctx.theta_dot[2] - 0.01) < 1e-4
    assert dq[2] == pytest.approx(0.01 * n * H_NS * 1e-9, rel=0.05)
    assert np.all(np.abs(np.delete(dq, 2)) < 1e-6)
    assert np.allclose(out["arm/state"]["qd_cmd"], [0.0, 0.0, 0.01, 0.0, 0.0, 0.0])
