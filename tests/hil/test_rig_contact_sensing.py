"""What the bridge takes for a contact on the rig: the contact gate (hysteresis, thresholds above the noise floor
measured while taring), the emulated servo's interpolation (no setpoint-rate ripple read as a force), the mock-up's
load read as contact with gravity compensation off (the rig faults, naming it)."""

from __future__ import annotations

import math
import tomllib
from pathlib import Path

import numpy as np
import pytest

from errors import ConfigError
from hil.bridge import HilBridge
from hil.config import hil_table, parse
from hil.delay import ContactGate, noise_floor
from hil.emulator import LockstepPort, LockstepRig
from hil.link import SerialLink
from hil.safety import RigState
from protocol.service import Sample
from tests.hil.test_bridge import Inputs, orbiter, payload

ROOT = Path(__file__).resolve().parents[2]
H_NS = 4_000_000


def test_contact_gate_hysteresis():
    g = ContactGate(5.0, 2.5)
    seen = [g.update(f) for f in (1.0, 4.9, 5.1, 3.0, 2.6, 2.4, 4.0, 6.0, 0.0)]
    assert seen == [False, False, True, True, True, False, False, True, False]
    assert ContactGate.thresholds(5.0, 0.5, 0.5) == (5.0, 2.5)  # the deadband above 5 σ
    assert ContactGate.thresholds(5.0, 2.0, 0.4) == (10.0, 4.0)  # 5 σ above the deadband
    off = ContactGate()  # no gate: any non-zero force is contact
    assert not off.update(0.0) and off.update(1e-9)
    with pytest.raises(ConfigError, match="off"):
        ContactGate(1.0, 2.0)


@pytest.mark.parametrize("gain", [1.0, 0.715, 0.2])
def test_noise_floor_is_the_filtered_noise_rms(gain: float):
    """White noise of σ per component through a first-order filter of gain g has the variance σ² g / (2 − g)
    per component (its impulse response's energy Σ g² (1 − g)^2k); the magnitude's RMS is √3 times σ of that."""
    rng = np.random.default_rng(5)
    sigma = np.array([0.3, 0.7, 1.1])
    rows = (np.array([5.0, -3.0, 9.0]) + sigma * rng.standard_normal((20000, 3))).tolist()
    expected = math.sqrt(float(np.sum(sigma**2)) * gain / (2.0 - gain))
    assert noise_floor(rows, gain) == pytest.approx(expected, rel=0.03)
    assert noise_floor(rows[:2], gain) == 0.0


def _rig_table(**comp: object) -> dict:
    table = hil_table(tomllib.loads((ROOT / "configs" / "srms_berthing_rig_contact.toml").read_text()))
    table["compensation"].update(comp)
    table["emulator"]["stats"] = ""
    return table


def _moving(table: dict, seconds: float, vel: tuple[float, float, float] = (0.015, -0.01, 0.005),
            start: tuple[float, float, float] = (-0.02, 0.0, -0.08)) -> tuple[HilBridge, list[dict]]:
    """The payload's interface 8 cm clear of the guides' seats, moving at ``vel`` (m/s in L) from 2 s on, its
    speed ramped up smoothly over the second before."""
    cfg = parse(table)
    b = HilBridge(cfg, "hil", H_NS, SerialLink(LockstepPort(LockstepRig(cfg))))
    outs = [b.initial(0)]
    p0 = cfg.X_OL[:3, 3] - cfg.X_TB[:3, 3] + np.array(start)
    v = np.array(vel)
    for n in range(int(round(seconds / (H_NS * 1e-9)))):
        t_ns = n * H_NS
        x = min(max(0.0, t_ns * 1e-9 - 1.0), 1.0)  # the ramp's time: speed 3x² - 2x³ (no step in acceleration)
        dist = x**3 - 0.5 * x**4 + max(0.0, t_ns * 1e-9 - 2.0)
        body = payload(p0 + v * dist, v * (3 * x * x - 2 * x**3))
        body["a_WTo_W"] = v * (6 * x - 6 * x * x)
        u = Inputs({"orbiter/state": Sample(t_ns, H_NS, "orbiter", n, orbiter([0, 0, 0], [0, 0, 0])),
                    "payload/state": Sample(t_ns, H_NS, "payload", n, body)})
        outs.append(b.step(t_ns, H_NS, u))
    return b, outs


def test_a_moving_rig_reads_no_force_out_of_contact():
    """The rig-contact scenario's rig (10 Hz servo, 60 kg mock-up) moving at 1.8 cm/s clear of the guides, a
    noiseless sensor, no gate: the compensated reading has no mean. A servo following the raw staircase of
    250 Hz setpoints (no interpolation) ripples at that rate by w² × the step, and the telemetry, read at the
    same rate, sees a steady part of it: 5.2 N here before the servo interpolated."""
    table = _rig_table(deadband=0.0, tare=0.5)
    table["emulator"]["ft_noise"] = [0.0, 0.0]
    b, outs = _moving(table, 4.0)
    F = np.array([o["hil/feedback"]["F_Bo_B"][3:] for o in outs[int(2.5 / 0.004):]])
    assert all(o["hil/feedback"]["valid"] for o in outs[int(2.5 / 0.004):])
    assert np.linalg.norm(F.mean(axis=0)) < 0.3 and np.abs(F).max() < 1.0


def test_sensor_noise_does_not_start_a_contact_and_a_touch_does():
    """The scenario's noisy, biased, drifting sensor on the moving rig: the noise floor measured while taring is
    the filtered sensor noise (1 N per component on the sensor's output, read at 250 Hz through the bridge's
    50 Hz low-pass: σ = 1 × √(g / (2 − g)) = 0.746 N each, g = 0.715, 1.29 N in magnitude), and the gate opens
    at 5 times it, above the 5 N deadband; no force is fed back, no impact is seen. Then the payload goes down
    into its seats: the gate opens on the contact and the force is fed back."""
    b, outs = _moving(_rig_table(), 4.0)
    assert b.noise_N == pytest.approx(1.29, rel=0.2)  # (the tare's 62 readings: ±9 % of σ)
    assert b.gate.on == pytest.approx(5.0 * b.noise_N) and b.gate.off == pytest.approx(0.5 * b.gate.on)
    assert all(not np.any(o["hil/feedback"]["F_Bo_B"]) for o in outs)
    assert b.impacts.impacts == [] and not b.gate.touching
    b, outs = _moving(_rig_table(), 5.0, vel=(0.0, 0.0, 0.03), start=(0.0, 0.0, -0.07))  # 5 cm into the seats
    f = [float(np.linalg.norm(o["hil/feedback"]["F_Bo_B"][3:])) for o in outs]
    assert max(f) > 100.0 and b.gate.touching


def test_gravity_compensation_off_the_mockups_weight_faults_the_rig():
    """No gravity compensation and no tare: the 60 kg mock-up's weight (589 N) is the whole "contact" from the
    start; the bridge tells it from contact by its model of the mock-up and faults the rig, naming it. With the
    tare it takes out the weight at neutral, and what is left as the rig moves (its tilt and acceleration) stays
    below the gate: no fault, and the figure is reported."""
    b, outs = _moving(_rig_table(gravity=False, tare=0.0), 2.0)
    assert b.safety.state == RigState.FAULT
    assert "mock-up's own load" in b.safety.fault_reason and "gravity = false" in b.safety.fault_reason
    assert 0.0 < b.safety.fault_t < 0.5
    link = outs[-1]["hil/status"]["link"]
    assert link["fault_reason"] == b.safety.fault_reason and link["mockup_load_left_N"] > 500.0
    b, outs = _moving(_rig_table(gravity=False), 4.0)
    assert b.safety.state == RigState.ENGAGED and b.safety.fault_t is None
    assert 0.0 < outs[-1]["hil/status"]["link"]["mockup_load_left_N"] < 2.5
    b, _ = _moving(_rig_table(), 2.0)  # gravity compensation on: nothing to report
    assert "mockup_load_left_N" not in b._outputs(np.eye(4), np.zeros(6), np.zeros(6), True, 0)["hil/status"]["link"]
