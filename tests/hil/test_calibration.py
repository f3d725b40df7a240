"""The realtime calibration of the hil bridge charges the emulated rig's firmware to the rig emulator, not to the
bridge (protocol.realtime: calibrate, TimedModel, EmbeddedRig; hil.bridge.calibration_model)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

import hil.emulator as emulator
from protocol.config import load, validate
from protocol.realtime import RIG_KEY, RIG_PRIORITY, Task, admission, calibrate, realtime_plan

ROOT = Path(__file__).resolve().parents[2]
REALTIME = ROOT / "configs" / "srms_berthing_realtime.toml"
MS = 1_000_000
EXTRA_S = 0.010  # CPU time added to every exchange of the emulated rig [s]: a tenth of it is 4x a bridge step


def _slow_exchange(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every exchange of the lockstep rig spends EXTRA_S more of this thread's CPU time."""
    real = emulator.LockstepRig.exchange

    def exchange(self: emulator.LockstepRig, data: bytes) -> bytes:
        end = time.thread_time_ns() + int(EXTRA_S * 1e9)
        while time.thread_time_ns() < end:
            pass
        return real(self, data)

    monkeypatch.setattr(emulator.LockstepRig, "exchange", exchange)


def test_the_emulated_rigs_work_is_the_emulators_not_the_bridges(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    plan = validate(load(REALTIME), path=REALTIME)
    assert plan.config["hil"]["url"] == "emulator"
    fast = calibrate(plan.config, plan.services, seconds=0.1)
    _slow_exchange(monkeypatch)
    slow = calibrate(plan.config, plan.services, seconds=0.1)
    rig = "hil" + RIG_KEY
    # every bridge step exchanges one frame (or more: a handshake's) with the rig: its cost moves by EXTRA_S ...
    assert slow[rig][0] - fast[rig][0] >= 0.9 * EXTRA_S * 1e6, (fast[rig], slow[rig])
    # ... and the bridge's does not (a tenth of it: the load of this host, not the rig's work)
    assert abs(slow["hil"][0] - fast["hil"][0]) < 0.1 * EXTRA_S * 1e6, (fast["hil"], slow["hil"])
    assert 0 < fast["hil"][0] <= fast["hil"][1] and 0 < fast[rig][0] <= fast[rig][1]

    # the admission: the emulator a process of its own on this host, above the services
    ok, table, _ = realtime_plan(plan, cores=2, costs=slow)
    row = next(line.split() for line in table if line.startswith("hil-emulator"))
    assert row[1] == rig and row[-2] == str(RIG_PRIORITY), table
    assert float(row[-3]) == pytest.approx(slow[rig][1] * 1e3 / plan.services["hil"].period_ns, abs=1e-3)

    # a real rig (its firmware on its own hardware): subtracted from the bridge, and not this host's load
    cfg = load(REALTIME)
    cfg["hil"]["url"] = "loop://"
    real = validate(cfg, path=REALTIME)
    costs = calibrate(real.config, real.services, seconds=0.1)
    assert rig not in costs and abs(costs["hil"][0] - fast["hil"][0]) < 0.1 * EXTRA_S * 1e6, (fast, costs)
    assert not any(line.startswith("hil-emulator") for line in realtime_plan(real, cores=2, costs=costs)[1])


def test_a_task_above_the_rate_monotonic_order_counts_at_its_cores_shortest_period():
    """A task of period 4 ms that runs above a 1 ms one interferes with it as a 1 ms task at the top would:
    C / 1 ms, not C / 4 ms; alone, or with slower tasks, its own C / T."""
    fast = Task("fast", ("fast",), 1 * MS, 0.5, (0,), 70, {"fast": (MS, 100.0, 500.0)})
    rig = Task("rig", ("hil/rig",), 4 * MS, 0.1, (0,), RIG_PRIORITY, {"hil/rig": (4 * MS, 300.0, 400.0)}, top=True)
    ok, table, _ = admission([fast, rig], cores=1)
    # (1 + 0.5)(1 + 0.4) = 2.1 > 2: refused; counted at its own period, (1.5)(1.1) = 1.65 would pass
    assert not ok and "U = 0.400" in "\n".join(table), table
    ok, table, _ = admission([fast, Task(**{**rig.__dict__, "top": False})], cores=1)
    assert ok
    slow = Task("slow", ("slow",), 10 * MS, 0.5, (0,), 10, {"slow": (10 * MS, 100.0, 5000.0)})
    ok, table, _ = admission([slow, rig], cores=1)  # its own period is the shortest there
    assert ok and not any("counted at" in line for line in table)
