"""The berthing contact on the rig against the same contact in simulation, at one delay (bench/bench_rig_contact.py
runs the table of every delay): the rig-contact scenario with no transport delay (the loop's delay is then its
10 Hz servo's 32 ms, the sensor's, the filter's and the pipelined link's: 37 ms in all, beyond the contact's
critical delay of 30 ms) and the compensation on, and the all-model default, both 45 s in lockstep. (The other
delays, up to 20 ms one way where the acceleration is extrapolated beyond 70 ms of horizon: README, The berthing
contact on the rig.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.integration
@pytest.mark.slow
def test_rig_contact_is_the_model_contact(tmp_path: Path) -> None:
    p = subprocess.run([sys.executable, str(ROOT / "bench" / "bench_rig_contact.py"), "--delays", "0",
                        "--uncompensated", "", "--out", str(tmp_path), "--jobs", "2"], cwd=ROOT,
                       env={**os.environ, "BERTHSIM_NO_PROGRESS": "1"}, capture_output=True, text=True, timeout=3600)
    assert p.returncode == 0, p.stderr[-2000:]
    res = json.loads(p.stdout.strip().splitlines()[-1])["results"]
    model, rig = res["model"], res["rig 0 ms"]
    assert model["ok"] and rig["ok"] and rig["exit"] == 0 and not rig["rig_fault"]  # all five phases, as scripted
    assert abs(rig["latch_t"] - model["latch_t"]) < 0.1
    assert abs(rig["peak_N"] / model["peak_N"] - 1.0) < 0.10
    assert abs(rig["restitution"] - model["restitution"]) < 0.05
    assert max(0.0, rig["energy_net_J"]) < 0.05 * model["impact_energy_J"]


def test_realtime_variant_runs_the_rig_contact_scenario() -> None:
    """configs/srms_berthing_rig_contact_realtime.toml: the lockstep rig-contact scenario's tables and rig (its
    [hil] but for the watchdog), in realtime, with the services' rates of the lockstep variant but the contact
    service's: 500 Hz, where the guides' law runs on the rig and the service integrates the payload under the
    rig's wrench, new every 4 ms (the config's comment and the README give the measured reason)."""
    import tomllib

    def load(name: str) -> dict:
        with (ROOT / "configs" / name).open("rb") as f:
            return tomllib.load(f)

    lock, rt = load("srms_berthing_rig_contact.toml"), load("srms_berthing_rig_contact_realtime.toml")
    assert rt["sim"]["mode"] == "realtime" and lock["sim"]["mode"] == "lockstep"
    for table in ("orbiter", "arm", "payload", "contact", "operator"):
        assert rt[table] == lock[table], table
    hil = {k: v for k, v in rt["hil"].items() if k != "watchdog"}
    assert hil == lock["hil"] and rt["hil"]["watchdog"] >= 0.02
    rates = {n: (s["kind"], s["rate_hz"]) for n, s in lock["services"].items()}
    rates["contact"] = ("contact", 500)
    assert {n: (s["kind"], s["rate_hz"]) for n, s in rt["services"].items()} == rates
    assert rt["services"]["hil"]["coupling_hz"] == lock["services"]["hil"]["coupling_hz"] == 250
