"""protocol.realtime: rate-monotonic priorities, the schedulability bounds, the admission check,
the calibration. (That a realtime run imports nothing once started: tests/test_realtime_job.py.)"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from protocol.config import load, validate
from protocol.realtime import (
    PRIORITY_BAND,
    Task,
    admission,
    calibrate,
    hyperbolic_ok,
    kernel_preemption,
    liu_layland_bound,
    priorities,
    rate_monotonic,
    realtime_plan,
)

ROOT = Path(__file__).resolve().parents[2]
REALTIME = ROOT / "configs" / "srms_berthing_realtime.toml"
MS = 1_000_000


def test_rate_monotonic_the_shorter_the_period_the_higher_the_priority():
    prio = rate_monotonic({"contact": 1 * MS, "arm": 2 * MS, "orbiter": 10 * MS, "arm2": 2 * MS}, base=10, top=70)
    assert prio["contact"] == 70 and prio["orbiter"] == 10  # the ends of the band
    assert prio["contact"] > prio["arm"] == prio["arm2"] > prio["orbiter"]  # equal periods share one
    rig = rate_monotonic({"contact": 1 * MS, "hil": 4 * MS, "orbiter": 10 * MS}, fastest=["hil"], base=10, top=70)
    assert rig["hil"] == rig["contact"] == 70 and rig["orbiter"] == 10  # the rig link ranks with the fastest
    assert set(rate_monotonic({"a": 5 * MS}, base=10, top=70).values()) == {70}


def test_schedulability_bounds_closed_forms():
    assert liu_layland_bound(1) == 1.0
    assert liu_layland_bound(2) == pytest.approx(2 * (math.sqrt(2) - 1))
    assert liu_layland_bound(10_000) == pytest.approx(math.log(2), rel=1e-4)  # n (2^(1/n) - 1) -> ln 2
    assert hyperbolic_ok([0.5, 1 / 3 - 1e-9])  # (1.5)(4/3) = 2: on the bound
    assert not hyperbolic_ok([0.5, 1 / 3 + 1e-6])
    assert hyperbolic_ok([0.41, 0.41]) and 0.82 < liu_layland_bound(2) + 0.01  # hyperbolic admits more than L&L


def _task(name, u, cpus=(), period=MS):
    return Task(name, (name,), period, u, cpus, 50, {name: (period, u * 1e3 * 0.5, u * 1e3)})


def test_admission_assigns_by_utilization_and_refuses_what_cannot_fit():
    ok, table, core_of = admission([_task("a", 0.6), _task("b", 0.5), _task("c", 0.3)], cores=2)
    assert ok and core_of["a"] != core_of["b"]  # the two largest apart
    assert any("schedulable" in line for line in table) and table[-1].startswith("admitted")
    ok, table, _ = admission([_task("a", 0.9), _task("b", 0.9), _task("c", 0.9)], cores=2)
    assert not ok and "NOT schedulable" in "\n".join(table)
    ok, _, core_of = admission([_task("a", 0.3, cpus=(1,)), _task("b", 0.3, cpus=(1,))], cores=2)
    assert ok and core_of == {"a": 1, "b": 1}  # pinned where told
    ok, _, _ = admission([_task("a", 1.2)], cores=4)  # one step longer than its period: no core helps
    assert not ok


def test_priorities_of_the_realtime_scenario():
    plan = validate(load(REALTIME), path=REALTIME)
    prio = priorities(plan)
    base = int(plan.sim["rt_priority"])
    assert prio["logger"] == 0  # the logger: normal scheduling
    assert prio["hil"] == prio["physics"] == base + PRIORITY_BAND  # contact at 1 kHz; the rig link as the fastest
    cfg = load(REALTIME)
    cfg["sim"]["rt_priority"] = 0
    assert set(priorities(validate(cfg, path=REALTIME)).values()) == {0}


def test_calibration_times_the_models_only_and_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = load(REALTIME)
    plan = validate(cfg, path=REALTIME)
    costs = calibrate(plan.config, plan.services, seconds=0.1)
    # not the logger (a sink); the rig emulator's work apart from the bridge's (tests/hil/test_calibration.py)
    assert set(costs) == {"orbiter", "arm", "contact", "hil", "operator", "hil/rig"}
    assert all(0 < p50 <= p99 < 50_000 for p50, p99 in costs.values()), costs
    assert list(tmp_path.iterdir()) == []  # no log opened
    ok, table, prio = realtime_plan(plan, cores=2, costs={n: (10.0, 20.0) for n in costs})
    assert ok and prio["physics"] > 0 and any("physics" in line and "contact" in line for line in table)
    ok, table, _ = realtime_plan(plan, cores=2, costs={**{n: (10.0, 20.0) for n in costs}, "contact": (900.0, 1200.0)})
    assert not ok and "refused" not in table[0]  # the verdict is the caller's line; the table says why
    assert "NOT schedulable" in "\n".join(table)


def test_a_refusal_is_confirmed_by_a_second_calibration(monkeypatch):
    """A disturbed first calibration does not refuse a run that fits; one that does not fit is refused after two."""
    import protocol.realtime as rt

    plan = validate(load(REALTIME), path=REALTIME)
    fits = {n: (10.0, 20.0) for n in ("orbiter", "arm", "contact", "hil", "operator")}
    slow = {**fits, "contact": (900.0, 1200.0)}  # 1.2 ms of every 1 ms (or 2 ms) step: no core takes it
    runs: list[str] = []

    def measured(*results):
        it = iter(results)

        def fake(config, services, seconds=0.5):
            runs.append("calibrated")
            return dict(next(it))
        return fake

    monkeypatch.setattr(rt, "calibrate", measured(slow, fits))
    ok, table, _ = rt.realtime_plan(plan, cores=2)
    assert ok and len(runs) == 2 and any("measured again" in line for line in table)
    runs.clear()
    monkeypatch.setattr(rt, "calibrate", measured(slow, slow))
    ok, table, _ = rt.realtime_plan(plan, cores=2)
    assert not ok and len(runs) == 2 and "NOT schedulable" in "\n".join(table)
    runs.clear()
    monkeypatch.setattr(rt, "calibrate", measured(fits))
    ok, table, _ = rt.realtime_plan(plan, cores=2)
    assert ok and len(runs) == 1 and not any("measured again" in line for line in table)  # a fit is not re-measured


def test_kernel_preemption_model_is_named():
    assert kernel_preemption() in ("rt", "full", "voluntary", "none", "lazy", "unknown")


def test_a_stopped_process_is_told_apart_from_a_slow_step():
    """Late with little CPU time since the last step: stopped or descheduled; late after steps that took
    their CPU time (or a short gap): not (the overrun and max_lag checks judge those)."""
    from protocol.shell import ProcessShell

    ms = 1_000_000
    why = ProcessShell._descheduled(2_500 * ms, 2_502 * ms, 1 * ms, 2 * ms)  # SIGSTOP for 2.5 s
    assert "did not run for 2.500 s" in why and "not a slow step" in why
    assert ProcessShell._descheduled(2_500 * ms, 2_502 * ms, 2_400 * ms, 2 * ms) == ""  # a 2.4 s step: slow
    assert ProcessShell._descheduled(300 * ms, 3 * ms, 0, 2 * ms) == ""  # late from earlier slow steps
    assert ProcessShell._descheduled(120 * ms, 120 * ms, 0, 2 * ms) == ""  # a short gap: below 0.25 s
    assert ProcessShell._descheduled(0, 500 * ms, 1 * ms, 2 * ms) == ""  # slept to the start instant, on time
