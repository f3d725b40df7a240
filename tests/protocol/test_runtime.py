"""The runtime end to end: launcher, worker processes, lockstep, faults, bad input.

Every test starts ``launch.py`` as a subprocess with a bounded timeout and checks that
no worker process is left behind.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import msgpack
import numpy as np
import pytest

import testkit.toys  # noqa: F401  (registers the toy topics)
from protocol.shell import BUSY_ENV
from testkit.ports import free_base_port
from testkit.procs import argv_of

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
LAUNCH = ROOT / "launch.py"

M = (1.0, 4.0)
K, REST = 40.0, 1.0
X0, V0 = (0.0, 1.1), (0.3, -0.2)


def make_cfg(tmp: Path, *, rates=(1000, 100), duration=2.0, sim: str = "", toy: str = "", extra: str = "",
             name="c.toml") -> Path:
    out = tmp / "out"
    out.mkdir(exist_ok=True)
    text = f"""
[sim]
duration = {duration}
{sim}
[services.a]
kind = "testkit.toys"
rate_hz = {rates[0]}
index = 0
[services.b]
kind = "testkit.toys"
rate_hz = {rates[1]}
index = 1
{extra}
[toy]
mass = {list(M)}
k = [{K}]
rest = [{REST}]
x0 = {list(X0)}
v0 = {list(V0)}
out_dir = "{out}"
{toy}
"""
    p = tmp / name
    p.write_text(text)
    return p


def workers(cfg: Path) -> list[int]:
    """Pids of live (non-zombie) worker processes started for ``cfg``."""
    pids = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = argv_of(d.name)
            state = (d / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if b"_worker" in cmd and str(cfg).encode() in cmd and state != "Z":
            pids.append(int(d.name))
    return pids


def run(cfg: Path, *args: str, timeout: float = 60, env: dict[str, str] | None = None
        ) -> tuple[int, str, str, dict | None]:
    """``launch.py run CFG --json ARGS``: exit code, stdout, stderr, the JSON summary (its last stdout line).
    ``env``: added to the environment (e.g. the busy knob, :data:`protocol.shell.BUSY_ENV`)."""
    p = subprocess.run([sys.executable, str(LAUNCH), "run", str(cfg), "--json", *args], capture_output=True,
                       text=True, timeout=timeout, cwd=ROOT, env={**os.environ, **(env or {})})
    summary = None
    lines = p.stdout.strip().splitlines()
    if lines:
        try:
            summary = json.loads(lines[-1])
        except json.JSONDecodeError:
            pass
    assert workers(cfg) == [], "orphan worker processes"
    return p.returncode, p.stdout, p.stderr, summary


def trajectories(tmp: Path) -> tuple[np.ndarray, np.ndarray]:
    return np.load(tmp / "out" / "a.npy"), np.load(tmp / "out" / "b.npy")


def reference(tmp: Path, duration: float, *args: str) -> bytes:
    """The trajectories' bytes of a plain run (ipc, multi-process) in ``tmp/ref``."""
    ref = tmp / "ref"
    ref.mkdir()
    rc, _, err, _ = run(make_cfg(ref, duration=duration), *args)
    assert rc == 0, err
    return b"".join(x.tobytes() for x in trajectories(ref))


def same_as(tmp: Path, ref: bytes) -> bool:
    """Whether the run in ``tmp`` produced exactly the bytes of ``ref``."""
    return b"".join(x.tobytes() for x in trajectories(tmp)) == ref


def closed_form(t):
    """Two free masses and a spring: relative coordinate harmonic, centre of mass uniform."""
    Mt = M[0] + M[1]
    w = np.sqrt(K * Mt / (M[0] * M[1]))
    r0, rd0 = X0[1] - X0[0] - REST, V0[1] - V0[0]
    r = r0 * np.cos(w * t) + rd0 / w * np.sin(w * t)
    xc = (M[0] * X0[0] + M[1] * X0[1]) / Mt + (M[0] * V0[0] + M[1] * V0[1]) / Mt * t
    return xc - M[1] / Mt * (r + REST), xc + M[0] / Mt * (r + REST), w, np.hypot(r0, rd0 / w)


def test_two_mass_spring_matches_closed_form_and_conserves_momentum(tmp_path):
    cfg = make_cfg(tmp_path)
    rc, _, err, summary = run(cfg)
    assert rc == 0, err
    a, b = trajectories(tmp_path)
    assert a[-1, 0] == b[-1, 0] == 2.0 and len(a) == 2001 and len(b) == 201
    x1, _, w, R = closed_form(a[:, 0])
    _, x2, _, _ = closed_form(b[:, 0])
    # The spring force is held constant over service a's step h: an effective delay h/2 in
    # the spring, i.e. negative damping with growth rate w²h/4, so the relative amplitude
    # R drifts by R·w²·h·T/4 over T; each mass carries its share (m_other / M) of it.
    h, T, Mt = 1e-3, 2.0, M[0] + M[1]
    drift = R * w**2 * h * T / 4
    assert np.abs(a[:, 1] - x1).max() < 1.2 * drift * M[1] / Mt
    assert np.abs(b[:, 1] - x2).max() < 1.2 * drift * M[0] / Mt
    # total momentum across the process boundary: conserved to round-off
    p = M[0] * a[::10, 2] + M[1] * b[:, 2]
    assert np.abs(p - p[0]).max() < 8 * np.finfo(float).eps * (M[0] * abs(a[:, 2]).max() + M[1] * abs(b[:, 2]).max())
    assert summary["t_end_ns"] == 2_000_000_000
    assert summary["services"]["a"]["steps"] == 2000 and summary["services"]["b"]["steps"] == 200
    assert all(s["msgs_dropped"] == 0 and s["msgs_invalid"] == 0 for s in summary["services"].values())


@pytest.mark.slow
def test_bit_identical_across_runs_layouts_and_transports(tmp_path):
    results = {}
    port = free_base_port()
    variants = {
        "ipc-1": ("", ()),
        "ipc-2": ("", ()),
        "inprocess": ("", ("--inprocess",)),
        "grouped": ('processes = {pair = ["a", "b"]}', ()),  # one process group: in-memory hand-over
        "tcp": (f'transport = "tcp"\nbus = "tcp://127.0.0.1:{port}"', ()),
    }
    for label, (sim, args) in variants.items():
        d = tmp_path / label
        d.mkdir()
        cfg = make_cfg(d, duration=1.0, sim=sim, toy="events = true")
        rc, _, err, _ = run(cfg, *args)
        assert rc == 0, f"{label}: {err}"
        a, b = trajectories(d)
        assert a[-1, 3] == 2 and b[-1, 4] == 2  # the spring's two sign changes in 1 s, sent and seen
        results[label] = a.tobytes() + b.tobytes()
    assert len(set(results.values())) == 1, {k: hash(v) for k, v in results.items()}


def test_injected_bad_messages_counted_and_dropped_same_result(tmp_path):
    ref = reference(tmp_path, 0.6)
    bad = tmp_path / "bad"
    bad.mkdir()
    inj = '[services.inj]\nkind = "testkit.toys"\nrate_hz = 1000\nrole = "injector"\n'
    rc, _, err, summary = run(make_cfg(bad, duration=0.6, extra=inj))
    assert rc == 0, err
    n_garbage = 5 * 200 + 2 * 4
    s_a, s_b = summary["services"]["a"], summary["services"]["b"]
    assert s_a["msgs_invalid"] == 2 * 200  # the toy/state1 ones
    assert s_b["msgs_invalid"] == n_garbage - 2 * 200  # the toy/spring0 ones
    assert s_a["msgs_dropped"] == 0 and s_b["msgs_dropped"] == 0
    assert same_as(bad, ref)


def test_bad_config_exits_2_listing_every_problem_and_starts_nothing(tmp_path):
    cfg = make_cfg(tmp_path, rates=(1000, 300), sim='bogus = 1\nspeed = "fast"\ntransport = "tcp"',
                   extra='[services.c]\nkind = "testkit.toys"\nrate_hz = 400\nindex = 1\ncolour = "red"\n'
                         '[stray]\nx = 1')
    t = time.monotonic()
    rc, out, err, _ = run(cfg)
    assert rc == 2 and "summary" not in out
    for needle in ("sim.bogus: unknown key", "sim.speed: expected", "sim.bus: missing endpoint",
                   "b.rate_hz: 300 Hz has no whole-nanosecond period", "divide the longest, c (400 Hz",
                   "a (1000 Hz)", "services.c.colour: unknown key", "[stray]: unclaimed"):
        assert needle in err, (needle, err)
    assert time.monotonic() - t < 10
    rc, _, err, _ = run(make_cfg(tmp_path, name="d.toml"), "--only", "a,zz")
    assert rc == 2 and "zz" in err


def _start(cfg: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(LAUNCH), "run", str(cfg), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT, env={**os.environ, **(env or {})})


def _wait_workers(cfg: Path, n: int, timeout: float = 20.0) -> list[int]:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        w = workers(cfg)
        if len(w) == n:
            return w
        time.sleep(0.05)
    raise AssertionError(f"expected {n} workers, have {workers(cfg)}")


def _finish(p: subprocess.Popen, timeout: float) -> tuple[int, str, str]:
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        raise
    return p.returncode, out, err


def _signal_run(cfg: Path, act, timeout: float = 20, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """Start a run, wait for its two workers, call ``act(launcher, worker_pids)``, wait for the end."""
    p = _start(cfg, env=env)
    try:
        act(p, _wait_workers(cfg, 2))
        return _finish(p, timeout)
    finally:
        if p.poll() is None:
            p.kill()


def test_sigkill_of_a_service_stops_the_rest_within_1s(tmp_path):
    cfg = make_cfg(tmp_path, duration=30.0, sim="speed = 1.0")
    t = [0.0]

    def kill_b(p, pids):
        time.sleep(0.5)
        victim = next(pid for pid in pids if f"_worker {cfg} b " in _cmd(pid))
        other = next(pid for pid in pids if pid != victim)
        t0 = time.monotonic()
        os.kill(victim, signal.SIGKILL)
        while Path(f"/proc/{other}").exists() and _state(other) != "Z" and time.monotonic() - t0 < 10:
            time.sleep(0.005)
        t[0] = time.monotonic() - t0

    rc, _, err = _signal_run(cfg, kill_b)
    assert t[0] < 1.0  # the launcher noticed and the other service is gone
    assert rc == 1
    assert "service 'b' died: killed by SIGKILL" in err
    assert workers(cfg) == []


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


def _cmd(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def test_service_error_is_reported_and_run_fails(tmp_path):
    cfg = make_cfg(tmp_path, duration=2.0, toy="fail_at = 0.5\nfail_index = 1")
    rc, _, err, _ = run(cfg)
    assert rc == 1
    assert "service 'b' failed: RuntimeError: toy b: injected failure" in err


def test_a_diverging_model_stops_the_run_and_is_named_with_its_time(tmp_path):
    """Service b's state turns NaN at 0.5 s: its publish refuses it, the run stops (exit 1), the
    launcher names b and the time, the summary carries it, and a recorder of the bus (as the logger)
    gets the launcher's ``diverged`` word; nothing non-finite ever reaches the bus."""
    rec = '[services.rec]\nkind = "testkit.toys"\nrate_hz = 1000\nrole = "sink"\n'
    cfg = make_cfg(tmp_path, duration=2.0, toy='fail_at = 0.5\nfail_index = 1\nfail_mode = "nan"', extra=rec)
    rc, _, err, summary = run(cfg)
    assert rc == 1
    assert "service 'b' diverged at t = 0.510 s: DivergenceError: topic 'toy/state1', field 'x': not finite" in err, err
    assert "Traceback" not in err
    assert summary["diverged"]["service"] == "b" and summary["diverged"]["t"] == pytest.approx(0.51)
    from protocol.codec import decode
    seen = msgpack.unpackb((tmp_path / "out" / "rec.rec").read_bytes(), raw=False)
    words = [decode(t, p) for t, p in seen if t == "sim/control"]
    div = [w.body["info"] for w in words if w.body["cmd"] == "diverged"]
    assert div and div[0]["service"] == "b" and div[0]["t"] == pytest.approx(0.51)
    states = [decode(t, p).body for t, p in seen if t.startswith("toy/state")]  # decode checks finiteness
    assert states and all(np.isfinite(b["x"]) and np.isfinite(b["v"]) for b in states)


def test_sigint_stops_everything_in_order(tmp_path):
    cfg = make_cfg(tmp_path, duration=30.0, sim="speed = 1.0")
    rc, _, err = _signal_run(cfg, lambda p, pids: (time.sleep(0.5), p.send_signal(signal.SIGINT)))
    assert rc == 128 + signal.SIGINT and "SIGINT" in err
    assert workers(cfg) == []


def test_freeze_and_resume_keep_results(tmp_path):
    ref = reference(tmp_path, 0.5, "--inprocess")
    cfg = make_cfg(tmp_path, duration=0.5, sim="speed = 1.0")
    t = time.monotonic()

    def freeze_resume(p, pids):
        time.sleep(0.2)
        p.send_signal(signal.SIGUSR1)
        time.sleep(0.8)
        p.send_signal(signal.SIGUSR2)

    rc, _, err = _signal_run(cfg, freeze_resume)
    assert rc == 0, err
    assert time.monotonic() - t > 1.3  # 0.5 s paced + 0.8 s frozen
    assert same_as(tmp_path, ref)


def test_realtime_paced_and_measured(tmp_path):
    cfg = make_cfg(tmp_path, duration=1.0, sim='mode = "realtime"\nstats_period = 0.2')
    t = time.monotonic()
    rc, _, err, summary = run(cfg)
    assert rc == 0, err
    assert time.monotonic() - t > 1.0  # paced by the wall clock
    for name, steps in (("a", 1000), ("b", 100)):
        s = summary["services"][name]
        assert s["steps"] == steps and s["t_ns"] == 1_000_000_000 and s["mode"] == "realtime"
        assert 0 <= s["jitter_p50_ns"] <= s["jitter_p99_ns"] <= s["jitter_max_ns"]
        assert s["input_age_p99_ns"] > 0
    a, b = trajectories(tmp_path)
    p = M[0] * a[::10, 2] + M[1] * b[:, 2]
    assert np.isfinite(p).all()


BUSY_A = {BUSY_ENV: "a=2"}  # service a (1 kHz) busy-waits 2 ms in every step of the run (not in the calibration)


def test_realtime_overrun_policy_stop_after_n(tmp_path):
    cfg = make_cfg(tmp_path, duration=60.0, sim='mode = "realtime"\noverrun_policy = "stop"\noverrun_limit = 5')
    t = time.monotonic()
    rc, _, err, _ = run(cfg, env=BUSY_A)
    assert rc == 1, err
    assert "[a] error: overload: 5 consecutive steps longer than its 1 ms period (sim.overrun_limit 5)" in err, err
    assert time.monotonic() - t < 30.0  # stopped long before the 60 s of the run


def test_realtime_service_that_falls_behind_the_wall_clock_stops_the_run(tmp_path):
    # service a (1 kHz) busy-waits 2 ms per step: 1 s behind per second of run; policy continue
    cfg = make_cfg(tmp_path, duration=60.0, sim='mode = "realtime"\nmax_lag = 0.3')
    t = time.monotonic()
    rc, _, err, _ = run(cfg, env=BUSY_A)
    assert rc == 1, err
    assert "[a] error: " in err and "s behind the wall clock" in err and "(sim.max_lag 0.3 s)" in err, err
    lag = float(err.split("[a] error: ", 1)[1].split(" s behind", 1)[0])
    assert 0.3 <= lag < 0.5  # stopped at the first step past the bound
    assert time.monotonic() - t < 30.0


def test_realtime_overrun_policy_freeze_freezes_everyone(tmp_path):
    cfg = make_cfg(tmp_path, duration=60.0, sim='mode = "realtime"\noverrun_policy = "freeze"\noverrun_limit = 10\n'
                                                'freeze_park_after = 30.0\nfreeze_stop_after = 60.0')
    seen: list[str] = []

    def interrupt_when_frozen(p, pids):
        # the launcher's stderr until it says the run froze (the start's admission takes longer under load),
        # then 1 s more frozen, then SIGINT
        def read():
            for line in p.stderr:
                seen.append(line)
                if "froze the run" in line:
                    return
        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(30.0)
        time.sleep(1.0)
        p.send_signal(signal.SIGINT)

    rc, out, err = _signal_run(cfg, interrupt_when_frozen, env=BUSY_A)
    err = "".join(seen) + err
    assert "service 'a' froze the run at t = 0.0" in err and "consecutive steps longer than its 1 ms period" in err
    assert rc == 128 + signal.SIGINT
    a, b = trajectories(tmp_path)
    assert a[-1, 0] < 0.1 and b[-1, 0] < 0.1  # frozen within 0.1 s of simulated time, not run on for the 3 s


def test_a_process_stopped_mid_step_freezes_once_and_one_resume_runs_it_on(tmp_path):
    """a and b share a process at the same rate; a's step at 0.5 s sleeps 0.6 s (the test knob: a process
    stopped in the middle of an iteration, as by SIGSTOP). a freezes the run; after the one resume, b, still
    due at that instant, steps on the re-anchored clock: no second freeze, and the run ends as scripted.
    (b stepped on the old anchor would find itself seconds late, freeze again, and with no second resume
    the run would stop after freeze_stop_after, exit 1.)"""
    cfg = make_cfg(tmp_path, rates=(100, 100), duration=1.5,
                   sim='mode = "realtime"\noverrun_policy = "freeze"\nfreeze_park_after = 4.0\n'
                       'freeze_stop_after = 5.0\nprocesses = {g = ["a", "b"]}')
    p = _start(cfg, env={BUSY_ENV: "a=600s@0.5"})
    seen: list[str] = []
    try:
        for line in p.stderr:  # type: ignore[union-attr]
            seen.append(line)
            if "froze the run" in line:
                break
        time.sleep(0.3)
        p.send_signal(signal.SIGUSR2)
        rc, _, err = _finish(p, 30)
    finally:
        if p.poll() is None:
            p.kill()
    err = "".join(seen) + err
    assert "service 'a' froze the run at t = 0.5" in err and "did not run for" in err, err[-3000:]
    assert err.count("froze the run") == 1, err[-3000:]
    assert rc == 0, err[-3000:]


def test_realtime_frozen_run_without_resume_stops_naming_the_service(tmp_path):
    cfg = make_cfg(tmp_path, duration=60.0, sim='mode = "realtime"\noverrun_policy = "freeze"\n'
                                                'freeze_park_after = 0.5\nfreeze_stop_after = 1.0')
    t = time.monotonic()
    rc, _, err, summary = run(cfg, env=BUSY_A)
    assert rc == 1, err
    assert "service 'a' froze the run at t = " in err and "no resume within sim.freeze_stop_after (1 s)" in err
    assert time.monotonic() - t < 20.0
    a, b = trajectories(tmp_path)
    assert a[-1, 0] < 0.1 and np.isfinite(a).all() and np.isfinite(b).all()


def test_realtime_run_refused_when_the_steps_do_not_fit_the_cores(tmp_path):
    """Service a busy-waits 2 ms in a 1 ms step (its model's own cost: the calibration sees it):
    the admission check refuses the run before it starts, with the utilization table."""
    cfg = make_cfg(tmp_path, duration=5.0, sim='mode = "realtime"', toy="busy = 0.002")
    t = time.monotonic()
    rc, _, err, _ = run(cfg)
    assert rc == 2, err
    assert "NOT schedulable" in err and "refused" in err and "a " in err
    assert time.monotonic() - t < 30.0
    p = subprocess.run([sys.executable, str(LAUNCH), "check", "--realtime", str(cfg)], capture_output=True,
                       text=True, timeout=60, cwd=ROOT)
    assert p.returncode == 2 and "NOT schedulable" in p.stdout + p.stderr


def test_sink_sees_every_first_sample_and_source_resimulates(tmp_path):
    rec = ('[services.rec]\nkind = "testkit.toys"\nrate_hz = 1000\nrole = "sink"\n'
           '[services.rec1]\nkind = "testkit.toys"\nrate_hz = 1000\nrole = "sink"\ntopics = ["toy/state1"]\n')
    cfg = make_cfg(tmp_path, duration=0.5, extra=rec, toy="events = true")
    rc, _, err, _ = run(cfg)
    assert rc == 0, err
    only = msgpack.unpackb((tmp_path / "out" / "rec1.rec").read_bytes(), raw=False)
    assert [t for t, _ in only] == ["toy/state1"] * 51  # a sink's topic list is all it sees
    seen = msgpack.unpackb((tmp_path / "out" / "rec.rec").read_bytes(), raw=False)
    from protocol.codec import decode, envelope
    seqs: dict[str, list[int]] = {}
    for topic, payload in seen:
        if topic.startswith("toy/"):
            seqs.setdefault(topic, []).append(envelope(topic, payload)[2])
    assert set(seqs) == {"toy/state0", "toy/spring0", "toy/state1", "toy/event0"}
    for topic, s in seqs.items():  # no slow joiner: from seq 0, no gap, to the end
        assert s == list(range(len(s))), topic
    assert len(seqs["toy/state0"]) == 501 and len(seqs["toy/state1"]) == 51
    # events travel only when there are any (b has a's spring as witness), and b sees each once,
    # in the step after the one that produced it: b's count after its step (t - 10 ms, t] is a's at t - 10 ms
    a, b = trajectories(tmp_path)
    events = [decode(t, p) for t, p in seen if t == "toy/event0"]
    assert len(events) == a[-1, 3] == 1 and all(len(e.body["events"]) == 1 for e in events)
    assert np.array_equal(b[1:, 4], a[:-1:10, 3])
    # re-simulate b alone against a's logged outputs: bit-identical to the full run
    full_b = np.load(tmp_path / "out" / "b.npy")
    d = tmp_path / "re"
    d.mkdir()
    src = (f'[services.rep]\nkind = "testkit.toys"\nrate_hz = 1000\nrole = "source"\n'
           f'replay = "{tmp_path / "out" / "rec.rec"}"\ntopics = ["toy/state0", "toy/spring0", "toy/event0"]\n')
    cfg2 = make_cfg(d, duration=0.5, extra=src, toy="events = true")
    text = cfg2.read_text().replace('[services.a]\nkind = "testkit.toys"\nrate_hz = 1000\nindex = 0\n', "")
    cfg2.write_text(text)
    rc, _, err, _ = run(cfg2)
    assert rc == 0, err
    assert np.load(d / "out" / "b.npy").tobytes() == full_b.tobytes()


def test_unpaced_source_far_ahead_of_a_sink_loses_nothing(tmp_path):
    """A source publishing 30,000 messages back to back, a sink recording them: every one is
    recorded, in order (the source's queue is delivered before it exits; the sink drains it all)."""
    from protocol.codec import encode, envelope
    n = 30_000
    items = [("toy/state0", encode("toy/state0", {"x": float(k), "v": 0.0}, sender="a", seq=k, t_ns=k * 100_000,
                                   h_ns=1_000_000)) for k in range(n)]
    log = tmp_path / "in.rec"
    log.write_bytes(msgpack.packb(items, use_bin_type=True))
    extra = (f'[services.rep]\nkind = "testkit.toys"\nrate_hz = 1000\nrole = "source"\nreplay = "{log}"\n'
             'topics = ["toy/state0"]\n'
             '[services.rec]\nkind = "testkit.toys"\nrate_hz = 1000\nrole = "sink"\ntopics = ["toy/state0"]\n')
    cfg = make_cfg(tmp_path, duration=6.0, extra=extra)
    text = cfg.read_text()
    for svc in ('[services.a]\nkind = "testkit.toys"\nrate_hz = 1000\nindex = 0\n',
                '[services.b]\nkind = "testkit.toys"\nrate_hz = 100\nindex = 1\n'):
        text = text.replace(svc, "")
    cfg.write_text(text)
    rc, _, err, _ = run(cfg, "--speed", "0")
    assert rc == 0, err
    seen = msgpack.unpackb((tmp_path / "out" / "rec.rec").read_bytes(), raw=False)
    assert [envelope(t, p)[2] for t, p in seen] == list(range(n))
