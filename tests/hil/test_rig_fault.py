"""A run whose rig faulted did not go as scripted; `check` refuses bridge inputs coupled too slowly for it."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest
import tomli_w

from errors import ConfigError
from tools.report import figures, summary_table

ROOT = Path(__file__).resolve().parents[2]
DEFAULT = ROOT / "configs" / "srms_berthing.toml"


def _default() -> dict:
    with DEFAULT.open("rb") as f:
        return tomllib.load(f)


def _status(states: list[str], links: list[dict]) -> dict:
    n = len(states)
    return {"hil/status": {"t_ns": np.arange(n, dtype=np.int64) * 20_000_000, "state": states,
                           "faults": [256 if s == "FAULT" else 0 for s in states], "link": links}}


def test_the_table_says_when_and_why_the_rig_faulted():
    reason = "HOST: the simulation's command is 0.200 s old, older than the bridge's watchdog 0.020 s"
    links = [{"fault_t": -1.0, "fault_reason": ""}] * 2 + [{"fault_t": 0.044, "fault_reason": reason}] * 3
    fig = figures(_status(["ENGAGED", "ENGAGED", "FAULT", "FAULT", "FAULT"], links), {})
    assert fig["rig"]["fault"] == {"t": 0.044, "faults": 256, "reason": reason}
    table = summary_table(fig, {}, ok=False)
    assert f"rig FAULT                {'':>0}" or True
    line = next(x for x in table.splitlines() if x.strip().startswith("rig FAULT"))
    assert line.split("rig FAULT", 1)[1].strip() == f"at t = 0.044 s: {reason}"
    # a rig that never faulted: no such row; an old log without the reason: the first FAULT sample and its bits
    fig = figures(_status(["ENGAGED"] * 3, [{"fault_t": -1.0, "fault_reason": ""}] * 3), {})
    assert "fault" not in fig["rig"] and "rig FAULT" not in summary_table(fig, {}, ok=True)
    fig = figures(_status(["ENGAGED", "FAULT"], [{}, {}]), {})
    assert fig["rig"]["fault"] == {"t": 0.02, "faults": 256, "reason": "fault bits 0x100"}


def test_check_refuses_bridge_inputs_coupled_more_slowly_than_its_watchdog():
    """The issue's case: orbiter, arm and contact coupled at 5 Hz; the bridge's watchdog is max(3 periods, 20 ms)."""
    from protocol.config import validate

    config = _default()
    validate(config)  # as shipped: orbiter/state and payload/state every 10 ms
    for name in ("orbiter", "arm", "contact"):
        config["services"][name]["coupling_hz"] = 5
    with pytest.raises(ConfigError) as err:
        validate(config)
    lines = [p for p in err.value.problems if "hil.watchdog" in p]
    assert len(lines) == 2, err.value.problems
    for topic, producer in (("orbiter/state", "orbiter"), ("payload/state", "contact")):
        assert any(f"{topic} coupled at 5 Hz (200 ms, services.{producer})" in p and "watchdog of 20 ms" in p
                   and "couple it at 50 Hz or faster" in p for p in lines), lines
    config["hil"]["watchdog"] = 0.2  # a watchdog that spans the interval: accepted
    validate(config)
    config["hil"]["watchdog"] = 0.1
    for name in ("orbiter", "arm"):
        del config["services"][name]["coupling_hz"]
    config["services"]["arm"]["coupling_hz"] = 100
    config["services"]["contact"]["coupling_hz"] = {"*": 100, "payload/state": 5}  # per topic
    with pytest.raises(ConfigError) as err:
        validate(config)
    assert [p for p in err.value.problems if "hil.watchdog" in p] == [
        "services.hil: hil.watchdog: payload/state coupled at 5 Hz (200 ms, services.contact) is older between two "
        "samples than the bridge's watchdog of 100 ms allows (the rig would fault, HOST, before the next sample): "
        "couple it at 10 Hz or faster, or raise hil.watchdog to 200 ms"]


@pytest.mark.integration
@pytest.mark.slow
def test_a_run_whose_rig_faulted_exits_3_and_says_when_and_why(tmp_path):
    """The default scenario's first second with the host faulting after 3 clamped commands (the payload starts
    0.2 m above its berthed pose, outside the rig's stroke): every service runs to the end (before: exit 0,
    "completed as scripted: yes"), the run exits 3 and the table says when and why."""
    config = _default()
    config["hil"]["clamp_fault_after"] = 3
    path = tmp_path / "fault.toml"
    path.write_text(tomli_w.dumps(config))
    env = {**os.environ, "BERTHSIM_NO_PROGRESS": "1"}
    p = subprocess.run([sys.executable, str(ROOT / "launch.py"), "run", str(path), "--duration", "1",
                        "--log", str(tmp_path / "run.mcap"), "--no-report"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 3, (p.stdout, p.stderr)
    rows = {line.split("  ")[1].strip(): line for line in p.stdout.splitlines() if line.startswith("  ")}
    assert "rig FAULT" in rows, p.stdout
    assert rows["rig FAULT"].endswith("LIMIT: 3 commands in a row outside the rig's workspace (clamp_fault_after 3)")
    t = float(rows["rig FAULT"].split("at t = ")[1].split(" s")[0])
    assert 0.0 < t < 0.1
    assert rows["completed as scripted"].split()[-1] == "NO"
    assert "the rig faulted at t = " in p.stderr
