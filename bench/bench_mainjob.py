#!/usr/bin/env python3
"""The main job's cost: the default scenario in lockstep, in three layouts, and its models' steps.

Parts (``--parts``, default all):

``layouts``
    ``configs/srms_berthing.toml`` run by ``launch.py run --no-report`` in lockstep as fast as
    possible, in the three layouts of one run's services: one process per service (the
    default), the realtime config's process groups (``[sim] processes`` of
    ``configs/srms_berthing_realtime.toml``), and ``--inprocess`` (one process). Per layout:
    simulated seconds per wall second (the launcher's loop, start-up and shutdown excluded,
    and the whole command), CPU seconds per simulated second over every process of the run
    (the whole command's children, from ``getrusage``) and per process (sampled from
    ``/proc`` every 0.1 s: the last 0.1 s of a process may be missing), and the messages per
    simulated second: published (every logged message but ``sim/*``), and delivered to
    stepping services, over the bus (consumers in another process) and in memory (consumers
    in the producer's process), counted from the log and each service's ports.
``models``
    CPU time of each model's ``step`` (and ``initial``) in the scenario's own sequence: the
    orbiter, arm, contact and operator run by the in-process scheduler
    (:func:`protocol.scheduler.simulate`, no bus, no hil), each step timed. Microseconds per
    step and the CPU fraction of one core at the service's rate.

``--ab-adaptive N``
    Instead of the parts: the whole command (``launch.py run --no-report``, wall seconds from start to exit)
    ``--inprocess`` and with one process per service, the contact's fixed 1 kHz step
    (``[contact] adaptive = false``, A) against its adaptive step (B, the default), alternated A B A B, N pairs
    per layout: each run's whole-command wall, CPU seconds over the run's processes and the contact process's
    (one process per service), the medians and the per-pair ratios B / A.

Prints one JSON object. On a shared 2-core machine figures drift by ±15 % or more; the load
average is printed with them. ``python bench/bench_mainjob.py [--sim-seconds S] [--parts ...]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from testkit.procs import argv_of  # noqa: E402  (the repository's root on the path first)

SCENARIO = ROOT / "configs" / "srms_berthing.toml"
REALTIME = ROOT / "configs" / "srms_berthing_realtime.toml"
HZ = os.sysconf("SC_CLK_TCK")


def _proc_table() -> dict[int, tuple[int, float]]:
    """pid -> (parent pid, CPU seconds so far)."""
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                s = f.read()
        except OSError:
            continue
        rest = s[s.rfind(")") + 2:].split()
        out[int(d)] = (int(rest[1]), (int(rest[11]) + int(rest[12])) / HZ)
    return out


def _label(pid: int) -> str | None:
    words = [w.decode(errors="replace") for w in argv_of(pid)]  # (a worker forked from the zygote: its title)
    if not words:
        return None
    if "_worker" in words:
        return words[words.index("_worker") + 2]
    if "hil.emulator" in words:
        return "rig emulator"
    if "run" in words and any(w.endswith("launch.py") for w in words):
        return "launcher"
    return None


class _Sampler(threading.Thread):
    """CPU seconds per process of a process tree, sampled every ``period`` s; unlabelled children
    are counted with their parent (the logger's writer process, for instance)."""

    def __init__(self, root: int, period: float = 0.1) -> None:
        super().__init__(daemon=True)
        self.root, self.period = root, period
        self.cpu: dict[int, float] = {}
        self.name_of: dict[int, str] = {}
        self.parent: dict[int, int] = {}
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            table = _proc_table()
            tree = {self.root}
            grew = True
            while grew:
                grew = False
                for pid, (pp, _) in table.items():
                    if pp in tree and pid not in tree:
                        tree.add(pid)
                        grew = True
            for pid in tree:
                if pid in table:
                    self.parent.setdefault(pid, table[pid][0])
                    self.cpu[pid] = max(self.cpu.get(pid, 0.0), table[pid][1])
                    lab = _label(pid)
                    if lab:
                        self.name_of[pid] = lab
            self.stop.wait(self.period)

    def by_name(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for pid, cpu in self.cpu.items():
            p, name = pid, self.name_of.get(pid)
            while name is None and p in self.parent:
                p = self.parent[p]
                name = self.name_of.get(p)
            name = name or "other"
            if name != self.name_of.get(pid):
                name += " (child)"
            out[name] = out.get(name, 0.0) + cpu
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def _messages(log: Path, config: dict[str, Any], processes: dict[str, tuple[str, ...]]) -> dict[str, Any]:
    """Messages published and delivered (bus / memory) over the run, from the log and the services' ports."""
    from protocol.config import service_module
    from protocol.logfile import open_log

    consumers: dict[str, list[str]] = {}
    producer: dict[str, str] = {}
    for name, svc in config["services"].items():
        sp = service_module(svc["kind"]).ports(config, name)
        if sp.role == "model":
            for p in sp.inputs:
                consumers.setdefault(p.topic, []).append(name)
        for p in sp.outputs:
            producer[p.topic] = name
    proc_of = {s: p for p, members in processes.items() for s in members}
    with open_log(log) as lf:
        counts = {t: n for t, n in lf.topics.items() if not t.startswith("sim/")}
    published = sum(counts.values())
    bus = memory = 0
    for topic, n in counts.items():
        for c in consumers.get(topic, ()):
            if proc_of.get(c) == proc_of.get(producer.get(topic)):
                memory += n
            else:
                bus += n
    return {"published": published, "delivered_bus": bus, "delivered_memory": memory, "per_topic": counts}


def launch_sampled(cmd: list[str]) -> tuple[int, str, str, float, _Sampler]:
    """Run a ``launch.py`` command line with its processes' CPU sampled (:class:`_Sampler`):
    exit code, stdout, stderr, wall seconds of the whole command, the sampler."""
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                         env={**os.environ, "BERTHSIM_NO_PROGRESS": "1"})
    sampler = _Sampler(p.pid)
    sampler.start()
    out, err = p.communicate(timeout=1800)
    wall = time.monotonic() - t0
    sampler.stop.set()
    sampler.join()
    return p.returncode, out, err, wall, sampler


def run_layout(layout: str, sim_seconds: float | None, adaptive: bool = True) -> dict[str, Any]:
    """One run of the scenario in ``layout`` (``"per_service"``, ``"realtime_groups"``, ``"inprocess"``); with
    ``adaptive`` False the contact's fixed step (``[contact] adaptive = false``)."""
    from protocol.config import INPROCESS, load, processes_of

    config = load(SCENARIO)
    rt = load(REALTIME)
    with tempfile.TemporaryDirectory(prefix="berthsim-bench-") as tmp:
        cfg_path = SCENARIO
        if not adaptive:
            cfg_path = Path(tmp) / "fixed_step.toml"
            text = SCENARIO.read_text(encoding="utf-8")
            assert "\n[contact]\n" in text
            cfg_path.write_text(text.replace("\n[contact]\n", "\n[contact]\nadaptive = false\n", 1), encoding="utf-8")
            config = load(cfg_path)
        if layout == "realtime_groups":
            groups = rt["sim"].get("processes", {})
            text = cfg_path.read_text(encoding="utf-8").replace(
                "[sim]\n", "[sim]\nprocesses = {" + ", ".join(
                    f'{k} = [{", ".join(repr(m).replace(chr(39), chr(34)) for m in v)}]' for k, v in groups.items())
                + "}\n", 1)
            cfg_path = Path(tmp) / "grouped.toml"
            cfg_path.write_text(text, encoding="utf-8")
            config = load(cfg_path)
        log = Path(tmp) / "run.mcap"
        cmd = [sys.executable, str(ROOT / "launch.py"), "run", str(cfg_path), "--speed", "0", "--no-report",
               "--json", "--log", str(log)]
        if sim_seconds:
            cmd += ["--duration", str(sim_seconds)]
        if layout == "inprocess":
            cmd.append("--inprocess")
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        code, out, err, total_wall, sampler = launch_sampled(cmd)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        summary = None
        for line in out.splitlines():
            if line.startswith("{"):
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if obj.get("event") == "summary" or "t_end_ns" in obj:
                    summary = obj
        if code != 0 or summary is None:
            return {"error": f"exit code {code}", "stderr_tail": err.strip().splitlines()[-4:]}
        run = summary.get("run", summary)
        sim_s = run["t_end_ns"] * 1e-9
        procs = {INPROCESS: tuple(config["services"])} if layout == "inprocess" else processes_of(config)
        msgs = _messages(log, config, procs)
    per_proc = {k: round(v, 2) for k, v in sampler.by_name().items()}
    return {
        "processes": {k: list(v) for k, v in procs.items()},
        "whole_command_wall_s": round(total_wall, 2),
        "sim_s": sim_s,
        "loop_wall_s": round(run["wall_s"], 2),
        "sim_per_wall": round(sim_s / run["wall_s"], 2),
        "sim_per_wall_whole_command": round(sim_s / total_wall, 2),
        "cpu_s": round(cpu, 2),
        "cpu_s_per_sim_s": round(cpu / sim_s, 3),
        "cpu_s_per_process": per_proc,
        "cpu_s_per_sim_s_per_process": {k: round(v / sim_s, 3) for k, v in per_proc.items()},
        "messages_per_sim_s": {"published": round(msgs["published"] / sim_s, 1),
                               "delivered_over_the_bus": round(msgs["delivered_bus"] / sim_s, 1),
                               "handed_over_in_memory": round(msgs["delivered_memory"] / sim_s, 1)},
        "messages_per_topic": msgs["per_topic"],
    }


def model_steps(sim_seconds: float) -> dict[str, Any]:
    """Per-step CPU time of the orbiter, arm, contact and operator in the scenario's sequence."""
    from protocol.config import service_module
    from protocol.realtime import TimedModel
    from protocol.scheduler import simulate
    from protocol.timebase import period_ns

    with SCENARIO.open("rb") as f:
        cfg = tomllib.load(f)
    models, coupling, rates = [], {}, {}
    for name in ("orbiter", "arm", "contact", "operator"):
        svc = cfg["services"][name]
        models.append(TimedModel(service_module(svc["kind"]).build(cfg, name, period_ns(svc["rate_hz"]))))
        rates[name] = svc["rate_hz"]
        if "coupling_hz" in svc:
            coupling[name] = {"*": period_ns(svc["coupling_hz"])}
    c0 = time.process_time()
    simulate(models, round(sim_seconds * 1e9), coupling=coupling)
    total = time.process_time() - c0
    out: dict[str, Any] = {}
    for m in models:
        us = sum(m.step_s) / max(len(m.step_s), 1) * 1e6
        out[m.name] = {"rate_hz": rates[m.name], "steps": len(m.step_s), "step_us": round(us, 1),
                       "cpu_fraction_at_rate": round(us * 1e-6 * rates[m.name], 4)}
    out["scheduler_and_coupling_cpu_s_per_sim_s"] = round((total - sum(sum(m.step_s) for m in models)) / sim_seconds, 4)
    out["all_models_cpu_s_per_sim_s"] = round(total / sim_seconds, 4)
    return out


def adaptive_ab(pairs: int, sim_seconds: float | None) -> dict[str, Any]:
    """The contact's fixed (A) vs adaptive (B) step, whole command, A B A B (module docstring)."""
    out: dict[str, Any] = {}
    for layout in ("inprocess", "per_service"):
        runs: dict[str, list[dict[str, Any]]] = {"A_fixed": [], "B_adaptive": []}
        for _ in range(pairs):
            for key, adaptive in (("A_fixed", False), ("B_adaptive", True)):
                r = run_layout(layout, sim_seconds, adaptive)
                if "error" in r:
                    return {"error": f"{layout} {key}: {r}"}
                runs[key].append({"wall_s": r["whole_command_wall_s"], "cpu_s": r["cpu_s"],
                                  "contact_cpu_s": r["cpu_s_per_process"].get("contact"),
                                  "load_1min": round(os.getloadavg()[0], 2)})
        row: dict[str, Any] = {"runs": runs}
        for fig in ("wall_s", "cpu_s", "contact_cpu_s"):
            a = [r[fig] for r in runs["A_fixed"]]
            b = [r[fig] for r in runs["B_adaptive"]]
            if None in a or None in b:
                continue
            row[fig] = {"median_A": sorted(a)[len(a) // 2], "median_B": sorted(b)[len(b) // 2],
                        "ratio_B_over_A_per_pair": [round(y / x, 3) for x, y in zip(a, b, strict=True)]}
        out[layout] = row
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--parts", default="layouts,models")
    ap.add_argument("--sim-seconds", type=float, default=None,
                    help="simulated seconds of each run (default: the whole 45 s scenario)")
    ap.add_argument("--layouts", default="per_service,realtime_groups,inprocess")
    ap.add_argument("--ab-adaptive", type=int, default=0,
                    help="the contact's fixed (A) vs adaptive (B) step, whole command, N pairs per layout")
    a = ap.parse_args(argv)
    if a.ab_adaptive > 0:
        fig0 = {"python": platform.python_version(), "cpus": os.cpu_count(),
                "load_avg_before": [round(x, 2) for x in os.getloadavg()]}
        res = adaptive_ab(a.ab_adaptive, a.sim_seconds)
        print(json.dumps({**fig0, "ab_adaptive": res, "load_avg_after": [round(x, 2) for x in os.getloadavg()]}))
        return 1 if "error" in res else 0
    parts = set(a.parts.split(","))
    fig: dict[str, Any] = {"python": platform.python_version(), "cpus": os.cpu_count(),
                           "load_avg_before": [round(x, 2) for x in os.getloadavg()]}
    if "layouts" in parts:
        fig["layouts"] = {lay: run_layout(lay, a.sim_seconds) for lay in a.layouts.split(",")}
    if "models" in parts:
        fig["models"] = model_steps(a.sim_seconds or 45.0)
    fig["load_avg_after"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(fig))
    return 1 if any("error" in v for v in fig.get("layouts", {}).values()) else 0


if __name__ == "__main__":
    sys.exit(main())
