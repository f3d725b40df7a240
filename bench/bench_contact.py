"""CPU fraction of one core for the contact service at 1 kHz and the orbiter at 100 Hz, as JSON.

The models' ``step`` is timed without processes (CPU time, ``time.process_time``, best of
the repeats), with inputs built as the runtime selects them, and once more with the
encoding of every output (what the service shell adds per step before sending).

- contact, 1 kHz, contact active: the payload's three trunnions pressed into three
  latch plates (compliant Hunt–Crossley + Coulomb) by the arm's wrench, at equilibrium;
- contact, 1 kHz, berthed: the same with the latch spring–damper closed;
- contact, 1 kHz, free: no contact, the payload far away (integration and bookkeeping only);
- orbiter, 100 Hz: ten contact samples and five arm samples per step (exact impulse);
- the default scenario (``configs/srms_berthing.toml``: orbit with gravity gradient, four
  trunnions, twelve guide walls): contact in free flight (payload at its initial pose),
  in berthing contact (every trunnion seated 3 mm deep in its guide, held there by the
  arm's wrench), latched; and the orbiter in free drift with the same inputs as above.

Each contact row gives ``contact_active_fraction``, the share of timed steps whose
``contact/wrench`` was active, so a case that drifted out of contact shows.

CPU fraction = CPU seconds per step × rate. Run from the repository root:
``python bench/bench_contact.py [--steps N] [--repeat R]``.

``--adaptive-pairs N`` (N > 0) instead runs the whole default scenario (45 s) in the in-process scheduler
(:func:`protocol.scheduler.simulate`: orbiter, arm, contact, operator; no bus, no hil) N times with the
contact's fixed 1 kHz step (``[contact] adaptive = false``, A) and N times with the adaptive step (B),
alternating A B A B, and prints the contact model's CPU seconds per simulated second (its ``step`` timed by
:class:`protocol.realtime.TimedModel`), its steps that coasted, and the medians and per-pair ratios B / A, with
the run's figures (capture, latch, peak interface force) of both.

``--scenario N`` runs the default scenario as it is configured (the adaptive step) N times and prints the contact
model's CPU seconds per simulated second and the run's figures, with the host's load: the same command in two
trees of the project gives their A/B figures (alternate them).

``--guides`` times the compliant berthing contact of the scenario's four trunnions seated in their twelve guide
walls, one evaluation: the contact service's (:meth:`services.contact.CompliantContact.contact`, Python floats)
and the compiled :func:`dynamics.contact_kernels.guides_wrench` with its arguments built from the same kinematics
(what the service would pass it), and says whether their results are equal (bit for bit).

``--evaluated N`` runs the realtime calibration (:func:`protocol.realtime.calibrate` of
``configs/srms_berthing_realtime.toml``, 2 s of simulated time: every model timed per step in its thread's CPU time,
the contact stepped period by period) N times and splits the contact's steps into evaluated ones (the payload
integrated, the contact and the no-contact bound evaluated: the adaptive step, :mod:`services.contact`) and coasting
ones (a step after which intervals are pending), the first 20 % left out as the calibration does: the contact's p50
and p99 (what the admission charges), the evaluated steps' median and mean [µs], and, in one more run, the Python
calls (functions and built-ins, counted by a profile hook, so that run's times are not reported) per evaluated step,
with the host's load.

``--compile`` prints the wall time of the rigid body's compiled step (:mod:`dynamics.rigid_body_kernels`) on its
first use in a fresh process that imported :mod:`dynamics.rigid_body` (:func:`dynamics.rigid_body.load_kernels`:
numba's import and the kernel's load), with an empty numba cache (the compile, paid once per machine and cache
directory), then with the cache it left, beside a process that makes no call.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dynamics.spatial import pose_from_vector, pose_inverse, pose_vector
from protocol.codec import encode
from protocol.coupling import complete
from protocol.service import BoundModel, Sample
from protocol.stepping import StepInputs
from services import contact as sc
from services import orbiter as so

H_C, H_O = 1_000_000, 10_000_000
SCENARIO = Path(__file__).resolve().parents[1] / "configs" / "srms_berthing.toml"


def config(z_payload: float, berthed: bool = False) -> dict[str, Any]:
    """Orbiter at the origin; payload's interface B (1 m below its CoM) near the latch plane z = 2 m."""
    pts = [[1.5, 0.0, 0.0], [-1.5, 0.0, 0.0], [0.0, 1.5, 0.0]]
    return {
        "orbiter": {"mass": 1.0e5, "inertia": [1.2e6, 8.0e6, 8.5e6], "X_OL": [0.0, 0.0, 2.0, 0.0, 0.0, 0.0]},
        "payload": {"mass": 12000.0, "inertia": [2.0e4, 3.0e4, 3.5e4], "X_WT": [0.0, 0.0, z_payload, 0.0, 0.0, 0.0],
                    "X_TB": [0.0, 0.0, -1.0, 0.0, 0.0, 0.0], "points_B": pts},
        "contact": {"latch": {"position": 0.02 if berthed else 1e-9},
                    "surfaces": [{"point": i, "p_LoSo_L": p, "n_L": [0.0, 0.0, 1.0], "radius": 0.2, "depth": 0.1}
                                 for i, p in enumerate(pts)]},
    }


def orbiter_sample() -> Sample:
    z = np.zeros(3)
    return Sample(0, H_O, "orbiter", 0, {"p_WoOo_W": z, "quat_WO": np.array([1.0, 0.0, 0.0, 0.0]), "w_WO_O": z,
                                         "v_WOo_W": z, "a_WOo_W": z, "wdot_WO_O": z})


def arm_sample(t: int, h: int) -> Sample:
    """The arm pressing the payload down with 1800 N: the plates' static load at 3 mm (3 × 2e5 N/m)."""
    F = np.array([1.0, -2.0, 3.0, 10.0, -20.0, -1800.0])
    return Sample(t, h, "arm", 0, {"F_Eo_W": F, "p_WoEo_W": np.array([0.0, 0.0, 4.0]), "F_So_W": -F,
                                   "p_WoSo_W": np.array([0.0, 0.0, 4.0]), "grappled": True})


def time_steps(model: Any, make_inputs, h: int, steps: int, repeat: int, with_codec: bool) -> tuple[float, float]:
    """Best CPU seconds per step over ``repeat`` runs of ``steps`` steps; share of steps with contact active.

    ``model`` is stepped with its context (:class:`protocol.service.BoundModel`). The inputs are built before the
    clock starts, so only ``model.step`` (and the encoding) is timed.
    """
    best = float("inf")
    model.initial(0)
    t = 0
    active = 0
    for _ in range(repeat):
        inputs = [make_inputs(t + k * h) for k in range(steps)]
        c0 = time.process_time()
        for u in inputs:
            out = model.step(t, h, u)
            if with_codec:
                for topic, body in out.items():
                    encode(topic, complete(topic, body), sender=model.name, seq=0, t_ns=t + h, h_ns=h, wall_ns=0)
            active += bool(out.get("contact/wrench", {}).get("active", False))
            t += h
        best = min(best, (time.process_time() - c0) / steps)
    return best, active / (steps * repeat)


def contact_case(name: str, cfg: dict[str, Any], steps: int, repeat: int, orb: Sample | None = None,
                 arm=None) -> dict[str, Any]:
    """Time the contact model of ``cfg``; ``orb`` the orbiter sample, ``arm(t, h)`` the arm's wrench sample."""
    orb = orbiter_sample() if orb is None else orb
    arm = arm_sample if arm is None else arm

    def make_inputs(t: int) -> StepInputs:
        t_a = t - t % 2_000_000
        return StepInputs(t, H_C, {"orbiter/state": orb}, {"arm/wrench": [(arm(t_a, 2_000_000), H_C)]}, {})

    row: dict[str, Any] = {"case": name, "rate_hz": 1000}
    for codec in (False, True):
        m = BoundModel(sc.build(cfg, "contact", H_C))
        cpu, frac = time_steps(m, make_inputs, H_C, steps, repeat, codec)
        key = "with_encode" if codec else "model"
        row[f"cpu_us_per_step_{key}"] = round(cpu * 1e6, 1)
        row[f"cpu_fraction_{key}"] = round(cpu * 1000.0, 4)
        if not codec:
            row["contact_active_fraction"] = round(frac, 3)
            row["berthed"] = bool(m.ctx.berthed)
    return row


def scenario_config() -> dict[str, Any]:
    """The default scenario's configuration."""
    with open(SCENARIO, "rb") as fh:
        return tomllib.load(fh)


def scenario_orbiter_sample(cfg: dict[str, Any]) -> Sample:
    """The scenario's orbiter at its initial pose, at rest, as an ``orbiter/state`` sample."""
    from dynamics.spatial import rotation_to_quat

    X_WO = pose_from_vector(cfg["orbiter"]["X_WO"])
    z = np.zeros(3)
    return Sample(0, H_O, "orbiter", 0, {"p_WoOo_W": X_WO[:3, 3], "quat_WO": rotation_to_quat(X_WO[:3, :3]),
                                         "w_WO_O": z, "v_WOo_W": z, "a_WOo_W": z, "wdot_WO_O": z})


def scenario_seated(cfg: dict[str, Any], depth: float) -> dict[str, Any]:
    """The scenario with the payload at rest, its interface B ``depth`` [m] past the berthed pose along L's z.

    Every guide wall's normal has a −z component in L, so each trunnion penetrates its walls.
    """
    cfg = json.loads(json.dumps(cfg))  # deep copy
    X_WO = pose_from_vector(cfg["orbiter"]["X_WO"])
    X_WL = X_WO @ pose_from_vector(cfg["orbiter"]["X_OL"])
    X_LB = pose_from_vector(cfg["contact"]["latch"]["X_LB"])
    X_LB[:3, 3] += X_LB[:3, :3] @ np.array([0.0, 0.0, depth])
    X_WT = X_WL @ X_LB @ pose_inverse(pose_from_vector(cfg["payload"]["X_TB"]))
    cfg["payload"].update(X_WT=[float(x) for x in pose_vector(X_WT)], v_WTo_W=[0.0] * 3, w_WT_T=[0.0] * 3)
    return cfg


def holding_arm(cfg: dict[str, Any], orb: Sample):
    """An arm wrench sample source that cancels the guides' wrench on the payload at its initial pose."""
    m = BoundModel(sc.build(cfg, "contact", H_C))
    m.initial(0)
    m.step(0, H_C, StepInputs(0, H_C, {"orbiter/state": orb}, {}, {}))
    F_T = np.asarray(m.ctx.F_cont_O_Wo)  # on the orbiter about Wo: the guides' wrench on the payload is its opposite
    zero = np.zeros(3)

    def sample(t: int, h: int) -> Sample:
        return Sample(t, h, "arm", 0, {"F_Eo_W": F_T, "p_WoEo_W": zero, "F_So_W": -F_T, "p_WoSo_W": zero,
                                       "grappled": True})
    return sample


def scenario_cases(steps: int, repeat: int) -> list[dict[str, Any]]:
    """Contact rows of the default scenario (module docstring)."""
    base = scenario_config()
    orb = scenario_orbiter_sample(base)
    free = contact_case("scenario: contact, free flight (orbit + gravity gradient)", base, steps, repeat, orb)
    seated = scenario_seated(base, 0.003)
    seated["contact"]["latch"]["position"] = 1e-9  # the latches stay open
    rows = [free, contact_case("scenario: contact, 4 trunnions seated in 12 guide walls", seated, steps, repeat, orb,
                               holding_arm(seated, orb))]
    latched = scenario_seated(base, 0.003)
    rows.append(contact_case("scenario: contact, latched", latched, steps, repeat, orb, holding_arm(seated, orb)))
    return rows


def orbiter_case(steps: int, repeat: int, cfg: dict[str, Any] | None = None,
                 name: str = "orbiter, attitude hold, 10 contact + 5 arm samples per step") -> dict[str, Any]:
    cfg = {"orbiter": {"mass": 1.0e5, "inertia": [1.2e6, 8.0e6, 8.5e6], "attitude": "hold"}} if cfg is None else cfg
    F = np.array([1.0, -2.0, 3.0, 10.0, -20.0, 30.0])

    def make_inputs(t: int) -> StepInputs:
        cs = [(Sample(t + k * H_C, H_C, "contact", 0, {"F_Lo_W": F, "p_WoLo_W": np.array([0.0, 0.0, 2.0]),
                                                        "active": True}), H_C) for k in range(10)]
        arm = [(arm_sample(t + k * 2_000_000, 2_000_000), 2_000_000) for k in range(5)]
        return StepInputs(t, H_O, {}, {"contact/wrench": cs, "arm/wrench": arm}, {})

    row: dict[str, Any] = {"case": name, "rate_hz": 100}
    for codec in (False, True):
        cpu, _ = time_steps(BoundModel(so.build(cfg, "orbiter", H_O)), make_inputs, H_O, steps, repeat, codec)
        key = "with_encode" if codec else "model"
        row[f"cpu_us_per_step_{key}"] = round(cpu * 1e6, 1)
        row[f"cpu_fraction_{key}"] = round(cpu * 100.0, 5)
    return row


def scenario_run(adaptive: bool, sim_seconds: float = 45.0) -> dict[str, Any]:
    """The default scenario's orbiter, arm, contact and operator in the in-process scheduler, the contact's
    adaptive step on or off: the contact model's CPU seconds per simulated second, the steps it coasted through,
    and the run's events (kind, t) and peak interface force [N] from its outputs."""
    from protocol.config import service_module
    from protocol.realtime import TimedModel
    from protocol.scheduler import simulate
    from protocol.timebase import period_ns

    with SCENARIO.open("rb") as f:
        cfg = tomllib.load(f)
    cfg["contact"]["adaptive"] = adaptive
    models, coupling = [], {}
    for name in ("orbiter", "arm", "contact", "operator"):
        svc = cfg["services"][name]
        models.append(TimedModel(service_module(svc["kind"]).build(cfg, name, period_ns(svc["rate_hz"]))))
        if "coupling_hz" in svc:
            coupling[name] = {"*": period_ns(svc["coupling_hz"])}
    contact = models[2]
    inner = contact.model
    seen: dict[str, Any] = {"events": [], "peak_N": 0.0, "coasted": 0}
    step = inner.step

    def watched(t_ns: int, h_ns: int, c: Any, u: Any) -> dict[str, Any]:
        coasting = c.coast is not None
        out = step(t_ns, h_ns, c, u)
        seen["coasted"] += coasting and c.pending != []
        F = out["contact/wrench"]["F_Lo_W"]
        seen["peak_N"] = max(seen["peak_N"], float(np.linalg.norm(F[3:])))
        seen["events"] += [(e["kind"], e["t_ns"]) for e in out.get("contact/event", {}).get("events", [])]
        return out

    inner.step = watched  # type: ignore[method-assign]
    c0 = time.process_time()
    simulate(models, round(sim_seconds * 1e9), coupling=coupling)
    total = time.process_time() - c0
    return {"contact_cpu_s_per_sim_s": round(sum(contact.step_s) / sim_seconds, 4),
            "all_models_cpu_s_per_sim_s": round(total / sim_seconds, 4), "steps": len(contact.step_s),
            "coasted": seen["coasted"], "peak_interface_force_N": seen["peak_N"], "events": seen["events"]}


def adaptive_ab(pairs: int) -> dict[str, Any]:
    """A (fixed step) and B (adaptive) alternated ``pairs`` times (module docstring)."""
    runs: dict[str, list[dict[str, Any]]] = {"A_fixed": [], "B_adaptive": []}
    for _ in range(pairs):
        runs["A_fixed"].append(scenario_run(False))
        runs["B_adaptive"].append(scenario_run(True))
    key = "contact_cpu_s_per_sim_s"
    a = [r[key] for r in runs["A_fixed"]]
    b = [r[key] for r in runs["B_adaptive"]]
    ev = {k: {kind: t for kind, t in reversed(rs[0]["events"])} for k, rs in runs.items()}  # first of each kind
    return {
        key: {"A_fixed": a, "B_adaptive": b, "median_A": float(np.median(a)), "median_B": float(np.median(b)),
              "ratio_B_over_A_per_pair": [round(y / x, 3) for x, y in zip(a, b, strict=True)]},
        "all_models_cpu_s_per_sim_s": {k: [r["all_models_cpu_s_per_sim_s"] for r in rs] for k, rs in runs.items()},
        "coasted_steps": {k: rs[0]["coasted"] for k, rs in runs.items()},
        "steps": runs["A_fixed"][0]["steps"],
        "first_event_t_ns": ev,
        "peak_interface_force_N": {k: rs[0]["peak_interface_force_N"] for k, rs in runs.items()},
    }


def scenario_runs(n: int) -> dict[str, Any]:
    """The default scenario as configured (adaptive contact step) ``n`` times (module docstring)."""
    runs = []
    for _ in range(n):
        load0 = os.getloadavg()[0]
        r = scenario_run(True)
        events = {kind: t for kind, t in reversed(r.pop("events"))}  # the first of each kind
        runs.append({**r, "first_event_t_ns": events, "load_average_1min": [round(load0, 2),
                                                                             round(os.getloadavg()[0], 2)]})
    key = "contact_cpu_s_per_sim_s"
    return {key: [r[key] for r in runs], f"median_{key}": float(np.median([r[key] for r in runs])), "runs": runs}


def guides_case(number: int, repeat: int) -> dict[str, Any]:
    """The scenario's seated trunnions: the service's compliant contact against the compiled kernel (module
    docstring). CPU µs per evaluation, best of ``repeat`` runs of ``number``."""
    from dynamics import contact_kernels as ck
    from dynamics import spatial as sp

    base = scenario_config()
    orb = scenario_orbiter_sample(base)
    seated = scenario_seated(base, 0.003)
    seated["contact"]["latch"]["position"] = 1e-9
    m = BoundModel(sc.build(seated, "contact", H_C))
    m.initial(0)
    m.step(0, H_C, StepInputs(0, H_C, {"orbiter/state": orb}, {}, {}))
    kT, kO = sc._Kin(m.ctx.body), sc._Kin(m.orbiter_at_now(m.ctx))
    p_L = sp.pose_apply_rows(kO.p, kO.R, m._p_OL)
    R_WL = sp.mat_mat_rows(kO.R, m._R_OL)
    tables = ck.guide_tables([(g.p_ToPo_T, g.center_L, g.reach2, g.surfaces) for g in m._guides])
    law = m.law
    law_rows = (law.k, law.exponent, law.alpha, law.mu_s, law.mu_k, law.v_stick)
    near = (*m._all_center_L, m._all_reach2)
    lead = 0.5 * H_C * 1e-9

    def service() -> tuple[bool, float, list[float]]:
        F, power, active, _, _ = m.berthing.contact(m.obj, m.ctx, kT, kO, p_L, R_WL, H_C, H_C)
        return active, power, F

    def kernel() -> tuple[bool, float, list[float]]:
        active, power, F = ck.guides_wrench((*kT.p, *kT.R, *kT.v, *kT.w), (*kO.p, *kO.R, *kO.v, *kO.w),
                                            (*p_L, *R_WL), lead, law_rows, sc.BOUND_MARGIN, near, *tables)
        return active, power, list(F)

    row: dict[str, Any] = {"case": "scenario: 4 trunnions seated in 12 guide walls, one compliant contact evaluation",
                           "equal": service() == kernel(), "active": service()[0]}
    for name, fn in (("service_python", service), ("kernel", kernel)):
        best = float("inf")
        for _ in range(repeat):
            c0 = time.process_time()
            for _ in range(number):
                fn()
            best = min(best, (time.process_time() - c0) / number)
        row[f"cpu_us_{name}"] = round(best * 1e6, 2)
    return row


REALTIME = Path(__file__).resolve().parents[1] / "configs" / "srms_berthing_realtime.toml"


def evaluated_runs(n: int, seconds: float = 2.0) -> dict[str, Any]:
    """The contact's evaluated and coasting steps in the realtime calibration (module docstring, ``--evaluated``)."""
    from protocol import realtime
    from protocol.config import load, validate

    plan = validate(load(REALTIME), path=REALTIME)
    step = sc.ContactModel.step
    kinds: list[bool] = []  # per contact step: evaluated
    calls: list[int] = []
    counting = [False, 0]

    def hook(frame: Any, event: str, arg: Any) -> None:
        if event in ("call", "c_call"):
            counting[1] += 1

    def classified(self: sc.ContactModel, t_ns: int, h_ns: int, c: sc.ContactContext, u: Any) -> Any:
        if counting[0]:
            counting[1] = 0
            sys.setprofile(hook)
            out = step(self, t_ns, h_ns, c, u)
            sys.setprofile(None)
            calls.append(counting[1])
        else:
            out = step(self, t_ns, h_ns, c, u)
        kinds.append(not c.pending)
        return out

    timed: list[Any] = []
    init = realtime.TimedModel.__init__

    def keep(self: Any, model: Any) -> None:
        init(self, model)
        timed.append(self)

    runs = []
    sc.ContactModel.step = classified  # type: ignore[method-assign]
    realtime.TimedModel.__init__ = keep  # type: ignore[method-assign]
    try:
        for k in range(n + 1):
            kinds.clear()
            timed.clear()
            counting[0] = k == n
            load0 = os.getloadavg()[0]
            costs = realtime.calibrate(plan.config, plan.services, seconds=seconds)
            st = next(m for m in timed if m.model.name == "contact").step_s
            n0 = len(st) // 5
            if counting[0]:
                ev_calls = [c for c, e in zip(calls[n0:], kinds[n0:], strict=True) if e]
                break
            ev = [x * 1e6 for x, e in zip(st[n0:], kinds[n0:], strict=True) if e]
            co = [x * 1e6 for x, e in zip(st[n0:], kinds[n0:], strict=True) if not e]
            runs.append({"contact_p50_us": round(costs["contact"][0], 1),
                         "contact_p99_us": round(costs["contact"][1], 1), "evaluated_steps": len(ev),
                         "evaluated_median_us": round(float(np.median(ev)), 1),
                         "evaluated_mean_us": round(float(np.mean(ev)), 1),
                         "coasting_median_us": round(float(np.median(co)), 1),
                         "load_average_1min": [round(load0, 2), round(os.getloadavg()[0], 2)]})
    finally:
        sc.ContactModel.step = step  # type: ignore[method-assign]
        realtime.TimedModel.__init__ = init  # type: ignore[method-assign]
    return {"runs": runs, "median_evaluated_us": float(np.median([r["evaluated_median_us"] for r in runs])),
            "calls_per_evaluated_step": int(np.median(ev_calls)) if ev_calls else None}


_FIRST_CALL = """
import time
from dynamics import rigid_body
t0 = time.perf_counter()
if CALL:  # numba's import and the kernel's load (or compile)
    rigid_body.load_kernels()
print(time.perf_counter() - t0)
"""


def bench_compile() -> list[dict[str, Any]]:
    """Wall time of the rigid body kernel's first use in a fresh process (module docstring)."""
    from bench_dynamics import first_call_rows  # (this folder is on sys.path: the script's own)

    return first_call_rows(_FIRST_CALL, "kernel_first_call")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=500, help="steps per repeat")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--adaptive-pairs", type=int, default=0,
                    help="the default scenario, fixed (A) vs adaptive (B) contact step, alternated N pairs")
    ap.add_argument("--scenario", type=int, default=0,
                    help="the default scenario as configured, N runs: the contact model's CPU per simulated second")
    ap.add_argument("--guides", action="store_true",
                    help="the scenario's seated trunnions: the service's compliant contact vs the compiled kernel")
    ap.add_argument("--evaluated", type=int, default=0,
                    help="the realtime calibration N times: the contact's evaluated and coasting steps apart")
    ap.add_argument("--compile", action="store_true",
                    help="the rigid body kernel's first use in a fresh process, empty and filled numba cache")
    a = ap.parse_args(argv)
    if a.scenario > 0 or a.compile or a.guides or a.evaluated > 0:
        load0 = os.getloadavg()[0]
        if a.evaluated > 0:
            res = evaluated_runs(a.evaluated)
        elif a.guides:
            res = guides_case(max(a.steps, 2000), a.repeat)
        else:
            res = scenario_runs(a.scenario) if a.scenario > 0 else {"first_call": bench_compile()}
        print(json.dumps({"python": platform.python_version(), "cpus": os.cpu_count(),
                          "load_average_1min": [round(load0, 2), round(os.getloadavg()[0], 2)], **res}, indent=2))
        return 0
    if a.adaptive_pairs > 0:
        load0 = os.getloadavg()[0]
        res = adaptive_ab(a.adaptive_pairs)
        print(json.dumps({"python": platform.python_version(), "cpus": os.cpu_count(),
                          "load_average_1min": [round(load0, 2), round(os.getloadavg()[0], 2)], **res}, indent=2))
        return 0
    rows = [
        contact_case("contact, 3 trunnions pressed into the plates", config(2.997), a.steps, a.repeat),
        contact_case("contact, latched (berthed)", config(2.997, berthed=True), a.steps, a.repeat),
        contact_case("contact, free (no contact)", config(1000.0), a.steps, a.repeat),
        orbiter_case(max(a.steps // 5, 20), a.repeat),
        *scenario_cases(a.steps, a.repeat),
        orbiter_case(max(a.steps // 5, 20), a.repeat, scenario_config(),
                     "scenario: orbiter, free drift (orbit + gravity gradient), 10 contact + 5 arm samples per step"),
    ]
    print(json.dumps({"python": platform.python_version(), "numpy": np.__version__, "cpus": os.cpu_count(),
                      "load_average_1min": round(os.getloadavg()[0], 2), "results": rows}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
