"""The rig contact loop's stability: the critical delay `check` computes against the onset of growth of the
loop itself (bridge, lockstep emulator, a 1-DOF body), and `check` refusing the uncompensated delayed case."""

from __future__ import annotations

import tomllib
from pathlib import Path

import numpy as np
import pytest

from errors import ConfigError
from hil.bridge import HilBridge, loop_delay
from hil.config import parse
from hil.emulator import LockstepPort, LockstepRig
from hil.link import SerialLink
from protocol.service import Sample
from protocol.stability import critical_delay
from tests.hil.test_bridge import Inputs, orbiter, payload

ROOT = Path(__file__).resolve().parents[2]
M, K, C, F0 = 200.0, 2.0e4, 800.0, 200.0  # body [kg], plane contact [N/m, N·s/m], preload [N]: τ_c = 37.9 ms


def _table(delay: float) -> dict:
    return {"compensation": {"predict": False, "passivity": False, "lag": 0},
            "emulator": {"delay": delay, "stiffness": K, "damping": C, "plane_offset": 0.51, "rate": 1000.0}}


def _growth(delay: float, h_ns: int = 1_000_000, T: float = 4.0) -> float:
    """A body of M kg pushed by F0 into the rig's plane (10 mm above neutral), 0.5 mm off its rest, moved by
    the fed-back wrench from 0.5 s on: the largest deviation over the last third over that of the first."""
    cfg = parse(_table(delay))
    b = HilBridge(cfg, "hil", h_ns, SerialLink(LockstepPort(LockstepRig(cfg))))
    b.initial(0)
    h = h_ns * 1e-9
    z_eq = 0.01 + F0 / K
    z, v = z_eq + 5e-4, 0.0
    dev = []
    for n in range(int(T / h)):
        t_ns = n * h_ns
        u = Inputs({"orbiter/state": Sample(t_ns, h_ns, "orbiter", n, orbiter([0, 0, 0], [0, 0, 0])),
                    "payload/state": Sample(t_ns, h_ns, "payload", n, payload([0, 0, z], [0, 0, v]))})
        out = b.step(t_ns, h_ns, u)
        if n * h < 0.5:  # engaging: the body held
            continue
        v += (out["hil/feedback"]["F_Bo_B"][5] + F0) / M * h
        z += v * h
        dev.append(abs(z - z_eq))
    q = len(dev) // 3
    return max(dev[-q:]) / max(dev[:q])


@pytest.mark.slow
def test_the_critical_delay_is_the_onset_of_growth_of_the_rig_loop():
    """Zebenay's closed form (protocol.stability.critical_delay) with the loop's other delays (hil.bridge.loop_delay:
    here the ideal actuators' one-period interpolation) gives the critical transport delay; the loop decays 7 %
    below it and grows 7 % above it (a sweep of 10, 15, 17, 18, 19 and 20 ms put the onset between 18 and 19 ms,
    predicted 18.45 ms)."""
    tau_c, _ = critical_delay(M, K, C)
    extra, parts = loop_delay(parse(_table(0.0)), 1e-3)
    assert parts["actuators"] == 1e-3 and extra == pytest.approx(1e-3)
    d_c = 0.5 * (tau_c - extra)
    assert 0.017 < d_c < 0.020
    assert _growth(0.93 * d_c) < 1.0 < _growth(1.07 * d_c)


def test_check_refuses_the_uncompensated_delayed_rig_contact_naming_the_critical_delay():
    from protocol.config import validate

    with (ROOT / "configs" / "srms_berthing_rig_contact.toml").open("rb") as f:
        config = tomllib.load(f)
    config["hil"]["emulator"]["delay"] = 0.020
    validate(config)  # compensated: accepted
    config["hil"]["compensation"].update(predict=False, passivity=False)
    with pytest.raises(ConfigError) as err:
        validate(config)
    (line,) = [p for p in err.value.problems if "critical delay" in p]
    assert len(line) < 300  # (check cuts longer lines)
    tau_c, _ = critical_delay(12000.0, 2.0e5, 1.5 * 20.0 * 2.0e5 * 1e-3)
    assert f"> critical delay {tau_c * 1e3:.3g} ms (12000 kg, k 2e+05 N/m, c 6e+03 N·s/m)" in line, line
    assert line.startswith("services.hil: hil.emulator.delay: rig contact loop delay 86.3 ms (transport 40, "
                           "actuators 35.8, sensor 1.3, filter 3.18, pipeline 4, hold 2 ms)"), line
    assert np.isclose(tau_c, 0.0299, atol=5e-4)


@pytest.mark.parametrize("compensated", [False, True])
def test_the_bridge_compares_the_measured_round_trip_with_the_critical_delay(compensated):
    """Once the round trip is measured (lockstep: the emulator's 2 × 10 ms, rounded up to the bridge's 4 ms steps),
    the loop's delay is reported on hil/status; beyond the critical delay and uncompensated the rig faults."""
    cfg = parse({"compensation": {"predict": compensated, "passivity": compensated},
                 "emulator": {"delay": 0.010}})
    h_ns = 4_000_000
    b = HilBridge(cfg, "hil", h_ns, SerialLink(LockstepPort(LockstepRig(cfg))))
    b.critical_delay_s, b.loop_other_s = 0.015, 0.004  # as build() sets them from [contact], [payload]
    b.initial(0)
    for n in range(60):
        t_ns = n * h_ns
        u = Inputs({"orbiter/state": Sample(t_ns, h_ns, "orbiter", n, orbiter([0, 0, 0], [0, 0, 0])),
                    "payload/state": Sample(t_ns, h_ns, "payload", n, payload([0, 0, 0], [0, 0, 0]))})
        out = b.step(t_ns, h_ns, u)
    link = out["hil/status"]["link"]
    rtt = b.link.delay.rtt_s
    assert 0.020 <= rtt <= 0.024  # the emulated 2 × 10 ms
    assert link["critical_delay_s"] == 0.015 and link["loop_delay_s"] == pytest.approx(rtt + 0.004)
    if compensated:
        assert out["hil/status"]["state"] == "ENGAGED"
    else:
        assert out["hil/status"]["state"] == "FAULT" and link["fault_reason"].startswith(
            f"HOST: the measured loop delay {(rtt + 0.004) * 1e3:.3g} ms (round trip {rtt * 1e3:.3g} ms) exceeds "
            "the rig contact's critical delay 15 ms")
