"""HIL link figures (prints JSON): throughput against the line limit, setpoint latency, 250 Hz
jitter, delay-estimate error, CPU time per step of the bridge and the emulator, and the wall
time of lockstep steps over a lossy line against a clean one.

Run from the repository root::

    python bench/bench_hil.py [--seconds 2] [--steps 2000]

Everything runs over a real pty to the emulator process, which emulates the serial
line's byte rate (a pty has none) at the configured baud. Not a test: it prints figures.

CPU figures are process CPU time (user + system, ``time.process_time`` for the bridge with
its reader thread, ``/proc/PID/stat`` for the emulator) over the run divided by the steps:
on a shared machine they are less noisy than wall-clock figures, but a loaded machine still
inflates them; ``reference_loop_ms`` (CPU time of a fixed pure-Python loop) and the load
average are printed to compare runs. The lockstep cases also give the bridge's function calls
per step (``cProfile``'s count over further steps), which the load does not change: the
bridge's own calls, and the link's and framing's (the read and write of the pty) apart.

``--lockstep-only`` prints the lockstep CPU figures alone (three cases: the pose clamped, inside
the workspace, and inside with the bodies' samples held over 2.5 bridge steps and predicted to
each, as the default scenario's 100 Hz couplings give the 250 Hz bridge).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import sys
import time
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hil.bridge import HilBridge  # noqa: E402
from hil.config import parse  # noqa: E402
from hil.emulator import spawn_emulator  # noqa: E402
from hil.framing import CRC_SIZE, HEADER_SIZE, Arm, Engage, Hello, SetpointAxes, wire_size  # noqa: E402
from hil.link import SerialLink, open_port  # noqa: E402
from protocol.realtime import set_normal, set_priority  # noqa: E402
from protocol.service import Sample  # noqa: E402

RAW_AXES6 = HEADER_SIZE + 1 + 4 * 6 + CRC_SIZE


def _arm(link: SerialLink, fingerprint: int, watchdog_ms: int = 200, engage: bool = True) -> None:
    deadline = time.monotonic() + 30.0
    while time.monotonic() < deadline:
        link.send(Arm(fingerprint, watchdog_ms))
        time.sleep(0.05)
        if any(isinstance(f.msg, Hello) for f in link.receive()):
            if engage:
                link.send(Engage())
            return
    raise RuntimeError("no HELLO from the emulator")


def throughput(baud: int, seconds: float, tmp: Path) -> dict:
    """Offer setpoints at 1.5× the line limit; count what the rig receives per second."""
    table = {"baud": baud, "watchdog": 1.0}
    cfg = parse(table)
    neutral = cfg.rig.inverse(cfg.rig.neutral)
    limit = baud / (10.0 * wire_size(RAW_AXES6))
    stats = tmp / f"tp{baud}.json"
    with spawn_emulator(table, stats_path=stats, extra_args=["--rt-priority", "20"]) as emu:
        link = SerialLink(open_port(emu.host_path, baud, timeout=0.0))
        _arm(link, cfg.fingerprint, 1000)
        rate = 1.5 * limit
        t0 = time.monotonic()
        k = 0
        while time.monotonic() - t0 < seconds:
            due = int((time.monotonic() - t0) * rate) + 1
            while k < due:  # a burst of the frames due by now
                link.send(SetpointAxes(tuple(neutral + 1e-5 * np.sin(0.01 * k))))
                k += 1
            link.receive()
            time.sleep(0.001)
        offered = k / (time.monotonic() - t0)
        time.sleep(0.2)
        link.close()
        emu.close()
    arr = np.array([t for _, t in emu.stats()["arrivals"]], dtype=np.int64)
    arr = arr[(arr > arr[0] + 0.2e9)]  # skip the start
    # frames per second: slope of the frame count against arrival time (frames leave the
    # emulated line in bursts with one time stamp, so end points alone are biased)
    achieved = float(np.polyfit((arr - arr[0]) * 1e-9, np.arange(len(arr)), 1)[0]) if len(arr) > 1 else 0.0
    return {"baud": baud, "frame_wire_bytes": wire_size(RAW_AXES6), "line_limit_fps": round(limit, 1),
            "offered_fps": round(offered, 1), "achieved_fps": round(achieved, 1),
            "achieved_over_limit": round(achieved / limit, 3)}


class _Inputs:
    def __init__(self, t_ns: int, h_ns: int, z: float) -> None:
        o = {"p_WoOo_W": np.zeros(3), "quat_WO": np.array([1.0, 0, 0, 0]), "w_WO_O": np.zeros(3),
             "v_WOo_W": np.zeros(3), "a_WOo_W": np.zeros(3), "wdot_WO_O": np.zeros(3)}
        p = {"p_WoTo_W": np.array([0.0, 0.0, z]), "quat_WT": np.array([1.0, 0, 0, 0]), "w_WT_T": np.zeros(3),
             "v_WTo_W": np.zeros(3), "a_WTo_W": np.zeros(3), "wdot_WT_T": np.zeros(3)}
        self.s = {"orbiter/state": Sample(t_ns, h_ns, "orbiter", 0, o),
                  "payload/state": Sample(t_ns, h_ns, "payload", 0, p)}

    def state(self, topic: str) -> Sample:
        return self.s[topic]


def _cpu_s(pid: int) -> float:
    """CPU time (user + system) of process ``pid`` so far [s]."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _jitter_ms(t_ns: np.ndarray, period_ns: int) -> dict:
    """Deviation of the intervals between consecutive events from the period: p50/p99/max [ms]."""
    dev = np.abs(np.diff(np.sort(t_ns)) - period_ns) * 1e-6
    return {"p50": round(float(np.percentile(dev, 50)), 3), "p99": round(float(np.percentile(dev, 99)), 3),
            "max": round(float(dev.max()), 3)}


def reference_loop_ms() -> float:
    """CPU time of a fixed pure-Python loop [ms]: how loaded the machine's cores are."""
    t = time.process_time()
    for _ in range(5):
        sum(range(1_000_000))
    return round((time.process_time() - t) / 5 * 1e3, 2)


_LINK_MODULES = ("hil/link.py", "hil/framing.py", "hil/rigproto.py", "hil/delay.py")
"""The modules of the bridge's link (its reads and writes of the pty, the frames' encoding, the round trip's
estimate), whose calls :func:`lockstep_cpu` counts apart from the bridge's own."""


def calls_per_step(step: Any, k0: int, steps: int) -> dict:
    """Function calls per call of ``step(k)`` for ``k`` in ``k0 .. k0 + steps`` (``cProfile``'s count: every
    Python function and builtin called): all of them, and those of :data:`_LINK_MODULES` apart."""
    prof = cProfile.Profile()
    prof.enable()
    for k in range(k0, k0 + steps):
        step(k)
    prof.disable()
    total = link = 0
    for (path, _, _), (_, ncalls, *_rest) in pstats.Stats(prof).stats.items():  # type: ignore[attr-defined]
        total += ncalls
        if path.replace(os.sep, "/").endswith(_LINK_MODULES):
            link += ncalls
    return {"all": round(total / steps, 1), "link_framing_delay": round(link / steps, 1),
            "other": round((total - link) / steps, 1)}


def lockstep_cpu(steps: int, far: bool, held: bool = False) -> dict:
    """Bridge and emulator in lockstep over the pty (as in the main job), CPU per step.

    ``far``: the simulated pose is 3 m beyond the rig's reach, so that every command is
    clamped (the main job's approach); else it moves a few mm about neutral. ``held``: the
    bodies' samples come at 100 Hz (the default scenario's couplings), each held over 2.5
    bridge steps and predicted to each with its velocity and acceleration; else a fresh sample
    stamped at each step. Also the function calls per step (:func:`calls_per_step`).
    """
    import tomllib

    from hil.bridge import build

    config = {"sim": {"mode": "lockstep"}, "services": {"hil": {"kind": "hil.bridge", "rate_hz": 250}},
              "hil": tomllib.loads((ROOT / "configs" / "srms_berthing.toml").read_text())["hil"]}
    h_ns = 4_000_000
    coupling_ns = 10_000_000 if held else h_ns
    bridge = build(config, "hil", h_ns)
    emu_pid = bridge.emulator.proc.pid
    X_OL, X_TB = bridge.cfg.X_OL, bridge.cfg.X_TB
    samples: dict[int, _Inputs] = {}

    def inputs(k: int) -> _Inputs:
        t_ns = k * h_ns // coupling_ns * coupling_ns  # the latest coupling instant
        if t_ns not in samples:
            samples.clear()
            i = t_ns // coupling_ns
            z = 3.0 if far else 0.005 * np.sin(0.01 * i)
            u = samples[t_ns] = _Inputs(t_ns, coupling_ns, 0.0)
            body = u.s["payload/state"].body
            body["p_WoTo_W"] = X_OL[:3, 3] - X_TB[:3, 3] + np.array([0.002 * np.sin(0.02 * i), 0.0, z])
            if held:  # a drift and a slow turn, predicted between the samples
                body["v_WTo_W"] = np.array([0.004 * np.cos(0.02 * i), 0.001, 0.0])
                body["a_WTo_W"] = np.array([-1e-4 * np.sin(0.02 * i), 0.0, 0.0])
                body["w_WT_T"] = np.array([0.0, 0.0, 0.002])
        return samples[t_ns]

    try:
        bridge.initial(0)

        def step(k: int) -> dict:
            return bridge.step(k * h_ns, h_ns, inputs(k))

        for k in range(50):  # arm, engage
            step(k)
        c0, e0 = time.process_time(), _cpu_s(emu_pid)
        for k in range(50, 50 + steps):
            out = step(k)
        c1, e1 = time.process_time(), _cpu_s(emu_pid)
        calls = calls_per_step(step, 50 + steps, 500)
    finally:
        bridge.close()
    return {"pose": ("clamped (3 m out)" if far else "inside the workspace") + (", held inputs" if held else ""),
            "steps": steps, "state": out["hil/status"]["state"], "clamped": out["hil/status"]["link"]["clamped"],
            "bridge_cpu_ms_per_step": round((c1 - c0) / steps * 1e3, 4),
            "emulator_cpu_ms_per_step": round((e1 - e0) / steps * 1e3, 4), "calls_per_step": calls}


def lossy_lockstep(steps: int, errors: dict) -> dict:
    """Wall time of ``steps`` lockstep steps over the pty (the emulator process, as in the main
    job) with ``errors`` (``bit_error``, ``drop``) on the host → rig line, and the link counters.

    Every frame the rig rejects is resent until its reply comes (:meth:`hil.bridge.HilBridge._read`):
    the figure to compare is the wall time against a clean line's (``errors = {}``).
    """
    import tomllib

    from hil.bridge import build

    hil = tomllib.loads((ROOT / "configs" / "srms_berthing.toml").read_text())["hil"]
    hil["emulator"] = {**hil.get("emulator", {}), **errors}
    config = {"sim": {"mode": "lockstep"}, "services": {"hil": {"kind": "hil.bridge", "rate_hz": 250}}, "hil": hil}
    h_ns = 4_000_000
    bridge = build(config, "hil", h_ns)
    X_OL, X_TB = bridge.cfg.X_OL, bridge.cfg.X_TB
    try:
        bridge.initial(0)
        t0 = time.monotonic()
        for k in range(steps):
            u = _Inputs(k * h_ns, h_ns, 0.0)
            u.s["payload/state"].body["p_WoTo_W"] = X_OL[:3, 3] - X_TB[:3, 3] + np.array([0.002 * np.sin(0.02 * k),
                                                                                          0.0, 0.0])
            out = bridge.step(k * h_ns, h_ns, u)
        wall = time.monotonic() - t0
    finally:
        bridge.close()
    link = out["hil/status"]["link"]
    return {"errors": errors, "steps": steps, "wall_s": round(wall, 3), "state": out["hil/status"]["state"],
            **{k: link[k] for k in ("tx_frames", "rig_rejected", "resent", "reply_timeouts", "replies_missed")}}


def latency(seconds: float, tmp: Path, delay_ms: float = 0.0) -> dict:
    """The bridge in realtime at 250 Hz: step() called → the setpoint's last byte at the rig.

    Also the 250 Hz jitter (send side: when step() was called; receive side: when the
    emulator read each frame), the delay estimate against the emulated one-way delay, and
    the CPU time per step of the bridge (with its reader thread) and of the emulator.
    """
    table = {"baud": 921600, "emulator": {"delay": delay_ms * 1e-3}}
    cfg = parse(table)
    stats = tmp / f"lat{delay_ms}.json"
    h_ns = 4_000_000
    with spawn_emulator(table, stats_path=stats, extra_args=["--rt-priority", "20"]) as emu:
        link = SerialLink(open_port(emu.host_path, 921600, timeout=0.0))
        _arm(link, cfg.fingerprint, engage=False)  # wait until the emulator runs (the bridge re-arms: HELLO)
        time.sleep(0.2)
        link.receive()
        old = os.sched_getscheduler(0)
        set_priority(10)  # the reader thread inherits it
        link.start_reader()  # as build() does in realtime
        bridge = HilBridge(cfg, "hil", h_ns, link, realtime=True)
        bridge.initial(0)
        handed: dict[int, int] = {}
        fault_at = None
        c0, e0 = time.process_time(), _cpu_s(emu.proc.pid)
        try:
            t0 = time.monotonic_ns()
            k = 0
            while (time.monotonic_ns() - t0) * 1e-9 < seconds + 0.5:
                t_ns = k * h_ns
                seq = link._seq
                handed[seq] = time.monotonic_ns()
                out = bridge.step(t_ns, h_ns, _Inputs(t_ns, h_ns, 0.001 * np.sin(2 * np.pi * 0.5 * k * h_ns * 1e-9)))
                if fault_at is None and out["hil/status"]["state"] == "FAULT":
                    fault_at = (round(t_ns * 1e-9, 3), bridge._rx_t, round(t_ns * 1e-9 - (bridge._rx_t or 0.0), 4))
                k += 1
                time.sleep(max(0.0, (t0 + k * h_ns - time.monotonic_ns()) * 1e-9))
        finally:
            set_normal() if old == os.SCHED_OTHER else set_priority(10)
        cpu_bridge, cpu_emu = time.process_time() - c0, _cpu_s(emu.proc.pid) - e0
        state = f"{bridge.safety.state.name} faults={int(bridge.safety.faults)}"
        rtt = link.delay.rtt_s
        p50, p99 = link.delay.percentile_s(50), link.delay.percentile_s(99)
        bridge.close()
        emu.close()
    arr = dict((s, t) for s, t in emu.stats()["arrivals"])
    n_last = int(seconds * 250)
    lat = np.array([arr[s] - t for s, t in handed.items() if s in arr][-n_last:]) * 1e-9
    sent = np.array(list(handed.values())[-n_last:], dtype=np.int64)
    got = np.array([arr[s] for s in list(handed)[-n_last:] if s in arr], dtype=np.int64)
    line = (wire_size(RAW_AXES6) + wire_size(HEADER_SIZE + 38 + 24 + CRC_SIZE)) * 10 / 921600
    return {"delay_ms_each_way": delay_ms, "bridge_state": state, "first_fault_t_rx_gap": fault_at,
            "latency_step_to_last_byte_ms": {"p50": round(float(np.percentile(lat, 50)) * 1e3, 3),
                                             "p99": round(float(np.percentile(lat, 99)) * 1e3, 3)},
            "rtt_estimate_ms": round(rtt * 1e3, 3), "rtt_p50_p99_ms": [round(p50 * 1e3, 3), round(p99 * 1e3, 3)],
            "rtt_emulated_ms": round(2 * delay_ms + line * 1e3, 3),
            "rtt_estimate_error_ms": round(rtt * 1e3 - (2 * delay_ms + line * 1e3), 3),
            "jitter_250hz_ms": {"send": _jitter_ms(sent, h_ns), "at_emulator": _jitter_ms(got, h_ns)},
            "cpu_ms_per_step": {"bridge": round(cpu_bridge / k * 1e3, 4), "emulator": round(cpu_emu / k * 1e3, 4)}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--steps", type=int, default=2000, help="lockstep steps for the CPU figures")
    ap.add_argument("--lockstep-only", action="store_true", help="the lockstep CPU figures alone")
    a = ap.parse_args()
    out: dict = {"load_average": os.getloadavg(), "reference_loop_ms": reference_loop_ms()}
    out["lockstep_cpu"] = [lockstep_cpu(a.steps, far, held) for far, held in ((True, False), (False, False),
                                                                               (False, True))]
    if a.lockstep_only:
        out["load_average_end"] = os.getloadavg()
        print(json.dumps(out, indent=2))
        return 0
    lossy = {"bit_error": 0.001, "drop": 0.001}
    out["lossy_lockstep"] = [lossy_lockstep(a.steps, e) for e in ({}, lossy, {}, lossy)]  # A B A B
    with TemporaryDirectory() as d:
        tmp = Path(d)
        out["throughput"] = [throughput(b, a.seconds, tmp) for b in (115200, 921600)]
        out["latency"] = [latency(a.seconds, tmp, d_ms) for d_ms in (0.0, 5.0, 10.0)]
    out["load_average_end"] = os.getloadavg()
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
