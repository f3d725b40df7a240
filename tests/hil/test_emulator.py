"""The rig emulator: nothing from a bad, dropped or reordered frame reaches the actuators;
watchdogs on a real pty and on socket://; a killed simulation parks the rig; 250 Hz at 921,600 baud."""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from hil.config import parse
from hil.emulator import (
    LockstepPort,
    LockstepRig,
    SocketPort,
    serve,
    spawn_emulator,
)
from hil.framing import (
    REJECT_REASONS,
    Arm,
    Engage,
    Fault,
    FrameDecoder,
    Heartbeat,
    Hello,
    Nak,
    RigState,
    SetpointAxes,
    Telemetry,
    encode_frame,
)
from hil.link import SerialLink, open_port
from hil.rig import RigCore
from hil.safety import SafetySupervisor, watchdog_timeout
from protocol.realtime import set_normal, set_priority

CFG = parse({})
NEUTRAL = CFG.rig.inverse(CFG.rig.neutral)


def setpoint(k: int) -> tuple[float, ...]:
    """A distinct, in-stroke setpoint per seq (exact in float32)."""
    return tuple(float(np.float32(v)) for v in NEUTRAL + 1e-5 * np.sin(0.1 * k + np.arange(6)))


def engaged_core() -> RigCore:
    core = RigCore(CFG)
    for f in FrameDecoder().feed(encode_frame(Arm(CFG.fingerprint, 1000), 0, 0) + encode_frame(Engage(), 1, 0)):
        core.handle(f, 0.0)
    assert core.state == RigState.ENGAGED
    return core


def test_reordered_duplicate_and_dropped_frames_never_applied():
    core = engaged_core()
    order = [2, 3, 5, 4, 6, 6, 9, 7, 8, 10]  # 4, 7, 8 arrive late; 6 twice; none lost for good
    for s in order:
        (f,) = FrameDecoder().feed(encode_frame(SetpointAxes(setpoint(s)), s, s))
        core.handle(f, 0.001 * s)
    assert [s for s, _ in core.applied] == [2, 3, 5, 6, 9, 10]
    assert all(v == setpoint(s) for s, v in core.applied)
    assert core.rx_seq.stale == 3 and core.rx_seq.duplicates == 1 and core.rx_seq.gaps == 2


def test_wrong_fingerprint_refused_and_setpoints_gated_before_engage():
    core = RigCore(CFG)
    (f,) = FrameDecoder().feed(encode_frame(SetpointAxes(setpoint(0)), 0, 0))
    core.handle(f, 0.0)
    assert core.counts["applied"] == 0 and core.counts["refused"] == 1
    (f,) = FrameDecoder().feed(encode_frame(Arm(CFG.fingerprint ^ 1, 20), 1, 0))
    core.handle(f, 0.0)
    assert core.state == RigState.FAULT and core.faults & Fault.FINGERPRINT
    t, msg = core.outbox[-1]
    assert isinstance(msg, Hello) and msg.fingerprint == CFG.fingerprint


def test_out_of_stroke_setpoint_faults_instead_of_moving():
    core = engaged_core()  # watchdog 1 s: the step gate lets 0.75 m through, the stroke ends 0.16 m away
    (f,) = FrameDecoder().feed(encode_frame(SetpointAxes(tuple(NEUTRAL + 0.2)), 2, 0))
    core.handle(f, 0.0)
    assert core.state == RigState.FAULT and core.faults & Fault.LIMIT and not core.applied


def _core_with_watchdog(watchdog_ms: int) -> RigCore:
    core = RigCore(CFG)
    for f in FrameDecoder().feed(encode_frame(Arm(CFG.fingerprint, watchdog_ms), 0, 0) + encode_frame(Engage(), 1, 0)):
        core.handle(f, 0.0)
    return core


def test_step_gate_refuses_a_setpoint_beyond_the_speed_limit_over_the_watchdog_without_fault():
    # hard speed limit 1.5 × 0.5 m/s; watchdog 20 ms: no axis may move more than 15 mm per setpoint
    core = _core_with_watchdog(20)
    reach = 1.5 * 0.5 * 0.020
    inside = tuple(float(np.float32(v)) for v in NEUTRAL + [0.9 * reach, 0, 0, 0, 0, -0.9 * reach])
    beyond = tuple(float(np.float32(v)) for v in np.array(inside) + [0, 0, 1.2 * reach, 0, 0, 0])
    for seq, sp in ((2, inside), (3, beyond)):
        (f,) = FrameDecoder().feed(encode_frame(SetpointAxes(sp), seq, seq * 4000))
        core.handle(f, seq * 0.004)
    assert [s for s, _ in core.applied] == [2]
    assert core.state == RigState.ENGAGED and core.counts["implausible"] == 1
    naks = [m for _, m in core.outbox if isinstance(m, Nak)]
    assert len(naks) == 1 and naks[0].reason == REJECT_REASONS["step"] and naks[0].rejected == 1
    assert naks[0].echo_seq == 3  # it was received (fed the watchdog), not applied


def test_rejected_chunks_answered_by_one_nak_before_the_next_reply():
    core = _core_with_watchdog(1000)
    core.outbox.clear()
    good = encode_frame(SetpointAxes(setpoint(2)), 2, 8000)
    bad = bytearray(encode_frame(SetpointAxes(setpoint(3)), 3, 12000))
    bad[5] ^= 0x10  # a CRC error
    core.receive_bytes(bytes(bad) + bytes(bad) + good, 0.01)
    kinds = [type(m).__name__ for _, m in core.outbox]
    assert kinds == ["Nak", "Telemetry"]
    nak = core.outbox[0][1]
    assert nak.rejected == 2 and nak.reason == REJECT_REASONS["crc"] and nak.echo_seq == 1
    core.receive_bytes(bytes(bad), 0.02)  # nothing valid after it: the NAK comes last
    assert isinstance(core.outbox[-1][1], Nak) and core.outbox[-1][1].rejected == 3


def test_bit_errors_and_drops_detected_none_applied_lockstep():
    cfg = parse({"emulator": {"bit_error": 0.004, "drop": 0.002, "seed": 3}, "bad_frames_max": 1000})
    rig = LockstepRig(cfg)
    link = SerialLink(LockstepPort(rig))
    rig.up.bit_error, rig.up.drop = 0.0, 0.0  # a clean handshake, then a noisy line
    link.send(Arm(cfg.fingerprint, 1000), 0)
    link.send(Engage(), 1)
    assert rig.core.state == RigState.ENGAGED
    rig.up.bit_error, rig.up.drop = 0.004, 0.002
    sent = {}
    for k in range(2, 800):
        sp = setpoint(k)
        frame = link.send(SetpointAxes(sp), 1000 * k)
        sent[(k) & 0xFFFF] = sp
        assert frame
    core = rig.core
    assert rig.up.flipped > 10 and rig.up.dropped > 3  # errors were injected ...
    assert rig.decoder.bad > 10  # ... and detected
    applied = list(core.applied)
    assert applied and all(v == sent[s] for s, v in applied)  # nothing corrupted reached the actuators
    seqs = [s for s, _ in applied]
    assert seqs == sorted(seqs)
    assert core.rx_seq.lost >= len(sent) - len(applied) - 5


@pytest.mark.integration
@pytest.mark.slow
def test_bit_errors_over_a_real_pty_none_applied(tmp_path):
    stats = tmp_path / "emu.json"
    table = {"bad_frames_max": 1000, "watchdog": 1.0}
    with spawn_emulator(table, stats_path=stats, extra_args=["--bit-error", "0.003", "--drop", "0.001"]) as emu:
        link = SerialLink(open_port(emu.host_path, 921600, timeout=0.001))
        link.send(Arm(CFG.fingerprint, 1000))
        sent = {}
        t_end = time.monotonic() + 30.0
        while time.monotonic() < t_end and not any(isinstance(f.msg, Hello) for f in link.receive()):
            link.send(Arm(CFG.fingerprint, 1000))  # the handshake may itself be hit by an error
            time.sleep(0.02)
        for _ in range(3):
            link.send(Engage())
        for k in range(400):
            seq = link._seq
            sp = setpoint(k)
            link.send(SetpointAxes(sp))
            sent[seq] = sp
            link.receive()
            time.sleep(0.002)
        link.close()
        emu.close()
    s = emu.stats()
    applied = s["applied"]
    assert len(applied) > 200
    assert all(tuple(v) == sent[seq] for seq, v in applied)
    assert sum(s["decoder"].values()) > 0 and s["seq"]["lost"] > 0


@pytest.mark.integration
def test_first_reply_comes_promptly_after_ready():
    """READY is written once the rig core exists: building it (imports, geometry; 0.2 s on an
    idle machine, over 1 s on a loaded one) must not fall between READY and the first reply."""
    best = float("inf")
    for lockstep in (True, False):
        with spawn_emulator({}, lockstep=lockstep) as emu:
            link = SerialLink(open_port(emu.host_path, 921600, timeout=0.05))
            t_end = time.monotonic() + 30.0
            while not link.port.read(1):  # READY
                assert time.monotonic() < t_end, "no READY"
            t0 = time.monotonic()
            link.send(Arm(CFG.fingerprint, 1000), 0)
            while not link.receive(timeout=0.05):
                assert time.monotonic() - t0 < 5.0, "no reply"
            best = min(best, time.monotonic() - t0)
            link.close()
    assert best < 0.1


def _stream_then_stop(link: SerialLink, seconds: float, period: float = 0.004) -> float:
    """Arm, engage, stream setpoints at ``period``; return the monotonic time of the last frame."""
    t_end = time.monotonic() + 30.0  # the emulator's start-up (imports) is slow on a loaded machine
    armed = False
    while not armed and time.monotonic() < t_end:
        link.send(Arm(CFG.fingerprint, int(watchdog_timeout(period) * 1000)))
        deadline = time.monotonic() + 0.2
        while time.monotonic() < deadline and not armed:
            armed = any(isinstance(f.msg, Hello) for f in link.receive())
    assert armed, "no HELLO from the emulator"
    link.send(Engage())
    nxt = time.monotonic()
    stop = nxt + seconds
    k = 0
    while nxt < stop:
        link.send(SetpointAxes(tuple(NEUTRAL + 0.02 * np.sin(2 * np.pi * 0.5 * k * period))))
        link.receive()
        k += 1
        nxt += period
        time.sleep(max(0.0, nxt - time.monotonic()))
    return time.monotonic()


def _check_watchdog_and_park(fault_log, axes, neutral, dt, watchdog_s):
    wd = [(t, since) for t, bits, since in fault_log if bits & Fault.WATCHDOG]
    assert wd, f"no watchdog fault: {fault_log}"
    since = wd[0][1]
    assert watchdog_s <= since <= watchdog_s + dt + 0.004, since  # spec: trip within max(3 periods, 20 ms)
    np.testing.assert_allclose(axes, neutral, atol=1e-6)  # then ramped to neutral: parked


@pytest.mark.integration
@pytest.mark.slow
def test_rig_watchdog_trips_on_pty_and_killed_simulation_parks_rig(tmp_path):
    stats = tmp_path / "emu.json"
    with spawn_emulator({}, stats_path=stats, extra_args=["--rt-priority", "20"]) as emu:
        link = SerialLink(open_port(emu.host_path, 921600, timeout=0.001))
        _stream_then_stop(link, 0.5)
        link.close()  # the simulation is gone: nothing more arrives
        time.sleep(1.5)  # the rig trips and ramps to neutral
        emu.close()
    s = emu.stats()
    assert s["state"] == "FAULT"
    _check_watchdog_and_park(s["fault_log"], s["axes"], s["neutral"], s["dt"], s["watchdog_s"])


@pytest.mark.integration
def test_rig_watchdog_trips_on_socket_url():
    srv = socket.create_server(("127.0.0.1", 0))
    port_no = srv.getsockname()[1]
    srv.settimeout(5.0)
    result: dict = {}
    stop = threading.Event()

    def rig() -> None:
        conn, _ = srv.accept()
        set_priority(20)  # this thread is the rig controller
        result["core"] = serve(SocketPort(conn), CFG, stop=stop, max_seconds=10.0)
        conn.close()

    th = threading.Thread(target=rig, daemon=True)
    th.start()
    try:
        link = SerialLink(open_port(f"socket://127.0.0.1:{port_no}", 921600, timeout=0.001))
        _stream_then_stop(link, 0.5)
        time.sleep(1.5)
        stop.set()
        link.close()
        th.join(5.0)
    finally:
        stop.set()
        srv.close()
    assert not th.is_alive()
    core = result["core"]
    _check_watchdog_and_park(core.fault_log, core.x, core.neutral_axes, core.dt, core.watchdog_s)


@pytest.mark.integration
def test_host_watchdog_trips_when_rig_dies_on_pty():
    emu = spawn_emulator({}, extra_args=["--rt-priority", "20"])
    old = os.sched_getscheduler(0)
    set_priority(10)  # the host loop is real-time, as on a HIL host
    try:
        link = SerialLink(open_port(emu.host_path, 921600, timeout=0.0005))
        period = 0.004
        sup = SafetySupervisor(CFG.limits, NEUTRAL, period, CFG.fingerprint)
        sup.request_arm()
        t0 = time.monotonic()
        rx_t = None
        killed_at = None
        trip_at = None
        k = 0
        while time.monotonic() - t0 < 30.0 and trip_at is None:
            now = time.monotonic()
            for f in link.receive():
                rx_t = now
                if isinstance(f.msg, Hello):
                    sup.on_hello(f.msg)
            if sup.state == RigState.IDLE:
                link.send(Arm(CFG.fingerprint, 20))
            elif sup.state == RigState.ARMED:
                sup.engage()
                link.send(Engage())
            out = sup.tick(now, NEUTRAL, now, rx_t)
            if sup.state == RigState.FAULT:
                trip_at = now
                break
            link.send(SetpointAxes(tuple(out)) if out is not None else Heartbeat())
            k += 1
            if sup.state == RigState.ENGAGED and killed_at is None and k > 150:
                emu.proc.send_signal(signal.SIGSTOP)  # the rig hangs silently (a kill would close the pty: EIO)
                killed_at = time.monotonic()
            time.sleep(max(0.0, t0 + k * period - time.monotonic()))
        assert killed_at is not None and trip_at is not None
        assert sup.faults & Fault.WATCHDOG
        assert trip_at - rx_t <= watchdog_timeout(period) + period + 0.002
        link.close()
    finally:
        set_normal() if old == os.SCHED_OTHER else set_priority(10)
        emu.proc.send_signal(signal.SIGCONT)
        emu.close()


@pytest.mark.integration
@pytest.mark.slow
def test_sustained_250_hz_at_921600_baud_over_pty(tmp_path):
    """3 s of 250 Hz setpoints over a pty at 921,600 baud.

    Jitter is that of the stream the host puts on the line (the send instants against the
    250 Hz schedule); it is printed, not asserted (timing targets live in bench/). What the rig sees
    also passes through the kernel's pty buffer worker, a normal-priority kernel thread, so its
    arrival jitter depends on the machine's load; it is measured and printed, and every frame must arrive, in order.
    """
    stats = tmp_path / "emu.json"
    period = 0.004
    n = 750
    # both ends real-time scheduled, as on a HIL host and a rig controller (the machine is shared)
    with spawn_emulator({}, stats_path=stats, extra_args=["--rt-priority", "20"]) as emu:
        link = SerialLink(open_port(emu.host_path, 921600, timeout=0.0005))
        deadline = time.monotonic() + 30.0
        armed = False
        while not armed and time.monotonic() < deadline:
            link.send(Arm(CFG.fingerprint, 20))
            time.sleep(0.05)
            armed = any(isinstance(f.msg, Hello) for f in link.receive())
        assert armed
        link.send(Engage())
        sent: dict[int, int] = {}
        old = os.sched_getscheduler(0)
        set_priority(10)
        try:
            t0 = time.monotonic_ns()
            for k in range(n):
                seq = link._seq
                link.send(SetpointAxes(tuple(NEUTRAL + 1e-4 * np.sin(0.05 * k))))
                sent[seq] = time.monotonic_ns()
                link.receive()
                time.sleep(max(0.0, (t0 + (k + 1) * period * 1e9 - time.monotonic_ns()) * 1e-9))
        finally:
            set_normal() if old == os.SCHED_OTHER else set_priority(10)
        time.sleep(0.1)
        link.receive()
        status = link.status()
        link.close()
        emu.close()
    arrivals = dict((s, t) for s, t in emu.stats()["arrivals"])
    seqs = sorted(sent)
    send_t = np.array([sent[q] for q in seqs], dtype=np.int64)
    send_jitter = np.abs(send_t - (send_t[0] + np.arange(n) * int(period * 1e9))) * 1e-9
    got = [q for q in seqs if q in arrivals]
    arr_t = np.array([arrivals[q] for q in got], dtype=np.int64)
    rx_jitter = np.abs(np.diff(arr_t) * 1e-9 - period)
    latency = (arr_t - np.array([sent[q] for q in got])) * 1e-9
    print(f"send jitter p99 {np.percentile(send_jitter, 99) * 1e3:.3f} ms; rig arrival interval jitter "
          f"p50/p99 {np.percentile(rx_jitter, 50) * 1e3:.3f}/{np.percentile(rx_jitter, 99) * 1e3:.3f} ms; "
          f"latency p50/p99 {np.percentile(latency, 50) * 1e3:.3f}/{np.percentile(latency, 99) * 1e3:.3f} ms; "
          f"rate at the rig {(len(got) - 1) / ((arr_t[-1] - arr_t[0]) * 1e-9):.1f} Hz")
    # The p99 < 2 ms jitter is a timing target: it is measured (printed above) and belongs to
    # bench/, not to a pass/fail test on a shared machine. What must hold is below.
    assert got == seqs  # every frame arrived, in order
    assert (len(got) - 1) / ((arr_t[-1] - arr_t[0]) * 1e-9) > 245.0
    assert status["crc_errors"] == 0 and status["seq_lost"] == 0 and status["bad_frames"] == 0


def test_contact_wrench_is_the_gradient_of_the_spring_energy():
    """Elastic part: the power of the wrench equals −dU/dt, U = ½ k Σ δ_i² (δ_i > 0)."""
    from dynamics.mockup import ContactPlane
    from dynamics.spatial import pose
    from dynamics.stewart import pose_from_vector

    rng = np.random.default_rng(4)
    n = np.array([0.1, -0.2, 1.0])
    n /= np.linalg.norm(n)
    probes = 0.2 * np.array([[1.0, 0, 0], [-0.5, 0.8, 0], [-0.5, -0.8, 0.1]])
    plane = ContactPlane(n, 0.5, 3.0e4, 0.0, probes)

    def energy(X):
        depth = (X[:3, 3] + probes @ X[:3, :3].T) @ n - 0.5
        return 0.5 * 3.0e4 * np.sum(np.maximum(depth, 0.0) ** 2)

    X = pose_from_vector([0.01, -0.02, 0.52, 0.03, -0.02, 0.1])
    assert energy(X) > 0
    for _ in range(5):
        V = rng.normal(size=6) * [0.3, 0.3, 0.3, 0.05, 0.05, 0.05]
        F_P = plane.wrench(X[:3, :3], X[:3, 3], np.zeros(6))  # no damping: velocity irrelevant
        R = X[:3, :3]
        power = (R @ F_P[:3]) @ V[:3] + (R @ F_P[3:]) @ V[3:]  # [τ; f] at Po in R against [ω; v] at Po
        eps = 1e-7

        def moved(s, V=V, R=R):
            dR = pose_from_vector(np.r_[0, 0, 0, s * V[:3]])[:3, :3]
            return pose(dR @ R, X[:3, 3] + s * V[3:])

        dU = (energy(moved(eps)) - energy(moved(-eps))) / (2 * eps)
        assert power == pytest.approx(-dU, rel=1e-6)


def test_lockstep_runs_are_bit_identical():
    def run():
        cfg = parse({"emulator": {"bit_error": 0.002, "drop": 0.001, "delay": 0.008, "seed": 11},
                     "bad_frames_max": 1000})
        rig = LockstepRig(cfg)
        link = SerialLink(LockstepPort(rig), clock=lambda: 0.0)
        rig.up.bit_error, rig.up.drop = 0.0, 0.0
        link.send(Arm(cfg.fingerprint, 1000), 0)
        link.send(Engage(), 1000)
        rig.up.bit_error, rig.up.drop = 0.002, 0.001
        out = []
        for k in range(2, 200):
            link.send(SetpointAxes(setpoint(k)), 1000 * k)
            out += [f.msg for f in link.receive()]
        return out, list(rig.core.applied)

    a, b = run(), run()
    assert a == b and len(a[0]) > 150


@pytest.mark.hardware
@pytest.mark.skipif(not os.environ.get("BERTHSIM_SERIAL_URL"), reason="BERTHSIM_SERIAL_URL not set")
def test_real_rig_answers_the_handshake():
    """Against a real rig: HELLO in answer to ARM, then telemetry in answer to heartbeats.

    ``BERTHSIM_SERIAL_URL`` is the rig's pyserial URL; ``BERTHSIM_BAUD`` (default 921600)
    and ``BERTHSIM_FINGERPRINT`` (default: the default config's) may be set too. Nothing moves:
    the rig is armed, never engaged.
    """
    fp = int(os.environ.get("BERTHSIM_FINGERPRINT", str(CFG.fingerprint)), 0)
    link = SerialLink(open_port(os.environ["BERTHSIM_SERIAL_URL"], int(os.environ.get("BERTHSIM_BAUD", "921600")),
                                timeout=0.01))
    try:
        link.send(Arm(fp, 100))
        deadline = time.monotonic() + 2.0
        hello = None
        while hello is None and time.monotonic() < deadline:
            hello = next((f.msg for f in link.receive() if isinstance(f.msg, Hello)), None)
        assert hello is not None and hello.fingerprint == fp
        tel = []
        while not tel and time.monotonic() < deadline + 1.0:
            link.send(Heartbeat())
            tel = [f.msg for f in link.receive() if isinstance(f.msg, Telemetry)]
        assert tel and tel[-1].state == RigState.ARMED
    finally:
        link.close()


@pytest.mark.integration
@pytest.mark.slow
def test_host_process_gone_rig_parks_then_emulator_exits(tmp_path):
    """The pty's host end vanishes (the bridge process died): the rig still parks, then exits."""
    stats = tmp_path / "emu.json"
    emu = spawn_emulator({}, stats_path=stats, extra_args=["--rt-priority", "20"])
    try:
        link = SerialLink(open_port(emu.host_path, 921600, timeout=0.001))
        _stream_then_stop(link, 0.3)
        link.close()
        os.close(emu._slave_fd)  # the last open slave: the host side is gone
        emu._slave_fd = -1
        emu.proc.wait(20.0)  # it exits on its own, after parking
        assert emu.proc.returncode == 0
    finally:
        emu.close()
    s = emu.stats()
    _check_watchdog_and_park(s["fault_log"], s["axes"], s["neutral"], s["dt"], s["watchdog_s"])


def test_loop_stalls_count_pauses_longer_than_the_threshold() -> None:
    from hil.rig import LoopStalls

    s = LoopStalls()
    for t in (0.0, 0.001, 0.002, 0.030, 0.031, 0.131, 0.132):  # pauses of 28 and 100 ms
        s.record(t)
    assert s.count == 2 and s.longest == pytest.approx(0.100) and s.at == pytest.approx(0.131)
    assert "did not run for 100 ms at 0.13 s (2 pauses over 20 ms)" in s.describe()


def test_a_stopped_emulator_reports_its_own_pause(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """The emulator process stopped for 0.3 s (SIGSTOP, as a host that does not schedule it): its loop's pause
    is in its statistics and said on stderr, so that a host watchdog's fault can be told from a silent link."""
    import signal
    import subprocess

    stats = tmp_path / "emu.json"
    with spawn_emulator({}, stats_path=stats) as emu:
        link = SerialLink(open_port(emu.host_path, 921600, timeout=0.0005))
        deadline = time.monotonic() + 30.0
        while time.monotonic() < deadline and not any(isinstance(f.msg, Hello) for f in link.receive()):
            link.send(Arm(CFG.fingerprint, 20))
            time.sleep(0.05)
        time.sleep(0.2)
        proc: subprocess.Popen = emu.proc
        proc.send_signal(signal.SIGSTOP)
        time.sleep(0.3)
        proc.send_signal(signal.SIGCONT)
        time.sleep(0.2)
        link.close()
        emu.close()
    st = emu.stats()["stalls"]
    assert st["count"] >= 1 and 0.25 <= st["longest_s"] < 1.0, st
    assert "hil.emulator: the emulated rig's loop did not run for" in capfd.readouterr().err
