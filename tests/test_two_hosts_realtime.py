"""Real time across two hosts (network namespaces joined by a veth pair, CurveZMQ over tcp).

- The shipped two-host realtime config (`configs/two_hosts_realtime.toml`), `rt_priority` as
  shipped: each host admits its own services, both exit 0 with the five phases, the rig link
  loses no reply, and latch time and peak interface force agree with the lockstep run.
- A cut link mid-run: both sides stop within `heartbeat_timeout` + 0.5 s of the cut, naming the
  lost host; the rig parks; the log is complete and finite up to the cut.
- One host's clock 200 ppm fast (the test-only knob of :mod:`protocol.clocksync`): its drift is
  estimated within 10 %, and each service's median input age stays within 2 ms of the one-host run
  (an undisciplined clock moves them by 6-10 ms over the 60 s run).
- `tc netem` delay and loss on the link: the run completes.

Skipped where namespaces (root, iproute2) or netem are not available.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from protocol.codec import decode
from protocol.logfile import open_log
from protocol.security import write_keys
from testkit.netns import TwoHosts, netem_skip_reason, skip_reason

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
LAUNCH = ROOT / "launch.py"
PHYSICS, RIG = "orbiter,arm,contact,operator", "hil,logger"


@pytest.fixture(scope="module")
def namespaces() -> None:
    why = skip_reason()
    if why:
        pytest.skip(why)


class Host:
    """A launcher in a namespace, its stderr lines timestamped as they come (monotonic)."""

    def __init__(self, h: TwoHosts, host: str, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        self.p = h.popen(host, argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=cwd)
        self.lines: list[tuple[float, str]] = []
        self._out: list[str] = []
        self._t = [threading.Thread(target=self._read, daemon=True),
                   threading.Thread(target=lambda: self._out.extend(self.p.stdout or ()), daemon=True)]
        for t in self._t:
            t.start()

    def _read(self) -> None:
        assert self.p.stderr is not None
        for line in self.p.stderr:
            self.lines.append((time.monotonic(), line.rstrip("\n")))

    @property
    def out(self) -> str:
        return "".join(self._out)

    def wait(self, timeout: float) -> int:
        try:
            self.p.wait(timeout)
        finally:
            if self.p.poll() is None:
                self.p.kill()
                self.p.wait()
        for t in self._t:
            t.join(5)
        return int(self.p.returncode)

    @property
    def err(self) -> str:
        return "\n".join(line for _, line in self.lines)

    def when(self, pattern: str) -> float | None:
        return next((t for t, line in self.lines if re.search(pattern, line)), None)


def _env(**extra: str) -> dict[str, str]:
    env = {**os.environ, "BERTHSIM_NO_PROGRESS": "1", "PYTHONPATH": str(ROOT), **extra}
    env.pop("BERTHSIM_TRACEBACK", None)
    return env


def _scenario(tmp: Path, h: TwoHosts, duration: float, **sim: object) -> Path:
    """The shipped two-host realtime config, on the namespaces' addresses, keys in ``tmp/keys``."""
    text = (ROOT / "configs" / "two_hosts_realtime.toml").read_text()
    text = text.replace("10.0.0.1", h.addr["a"]).replace("10.0.0.2", h.addr["b"])
    text = text.replace("duration = 45.0", f"duration = {duration}", 1)
    for k, v in sim.items():
        text = re.sub(rf"(?m)^{k} = .*$", f"{k} = {json.dumps(v)}", text, count=1)
    # the emulated rig writes its statistics (state, faults, axes) when it stops
    text = text.replace("[hil.emulator]\n", f"[hil.emulator]\nstats = {json.dumps(str(tmp / 'rig.json'))}\n", 1)
    write_keys(tmp / "keys", ("server", "client"))
    cfg = tmp / "two.toml"
    cfg.write_text(text)
    return cfg


def _toys(tmp: Path, h: TwoHosts | None, duration: float) -> Path:
    """Two masses on a spring, one per host, and the logger on host b (realtime, CurveZMQ); with no
    hosts, the same on this one (ipc)."""
    write_keys(tmp / "keys", ("server", "client"))
    cfg = tmp / "toys.toml"
    net = "transport = \"ipc\"" if h is None else f"""transport = "tcp"
bus = "tcp://{h.addr['a']}:5550"
hosts = {{a = "{h.addr['a']}", b = "{h.addr['b']}"}}"""
    cfg.write_text(f"""[sim]
mode = "realtime"
duration = {duration}
{net}
rt_priority = 10
heartbeat_timeout = 1.0
stats_period = 0.5
[security]
keys_dir = "keys"
server = "server"
client = "client"
allowed = ["client"]
[services.a]
kind = "testkit.toys"
rate_hz = 1000
index = 0
host = "a"
[services.b]
kind = "testkit.toys"
rate_hz = 100
index = 1
host = "b"
[services.logger]
kind = "logger"
rate_hz = 1000
host = "b"
[toy]
mass = [1.0, 4.0]
k = [40.0]
rest = [1.0]
x0 = [0.0, 1.1]
v0 = [0.3, -0.2]
""")
    return cfg


def _run(h: TwoHosts, cfg: Path, tmp: Path, a_only: str, b_only: str, *, env_b: dict[str, str] | None = None,
         cut_after: float | None = None, timeout: float = 240.0) -> tuple[Host, Host, float | None]:
    cmd = [sys.executable, str(LAUNCH), "run", str(cfg), "--json", "--only"]
    a = Host(h, "a", [*cmd, a_only], _env(), tmp)
    b = Host(h, "b", [*cmd, b_only, "--log", str(tmp / "run.mcap"), "--no-report"], _env(**(env_b or {})), tmp)
    cut_at = None
    if cut_after is not None:
        end = time.monotonic() + 120
        while time.monotonic() < end and a.when(r"admission, host b") is None:
            time.sleep(0.05)
        time.sleep(cut_after)
        h.cut("a")
        cut_at = time.monotonic()
    a.wait(timeout)
    b.wait(timeout)
    return a, b, cut_at


def _summary(host: Host) -> dict:
    line = [x for x in host.out.splitlines() if x.startswith("{")]
    return json.loads(line[-1]) if line else {}


def _finite_log(path: Path) -> tuple[int, int]:
    """(messages, last t_ns of a data topic) of a log, every value finite (raises otherwise)."""
    n, last = 0, 0
    log = open_log(path)  # raises on a log without its footer (not closed cleanly)
    for m in log.messages():
        if m.topic.startswith("sim/"):
            continue
        body = decode(m.topic, m.payload).body
        n += 1
        for v in body.values():
            if isinstance(v, (float, np.ndarray)) or (isinstance(v, list) and v and isinstance(v[0], float)):
                arr = np.asarray(v, dtype=float)
                assert np.isfinite(arr).all(), (m.topic, m.t_ns)
        last = max(last, m.t_ns)
    return n, last


def test_shipped_two_host_realtime_config_runs_with_the_rig_on_host_b(tmp_path, namespaces):
    ref = tmp_path / "lockstep"
    ref.mkdir()
    r = subprocess.run([sys.executable, str(LAUNCH), "run", str(ROOT / "configs" / "srms_berthing_realtime.toml"),
                        "--mode", "lockstep", "--log", str(ref / "run.mcap"), "--no-report"],
                       capture_output=True, text=True, env=_env(), timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    fig_ref = json.loads((ref / "run.summary.json").read_text())
    with TwoHosts(subnet=11) as h:
        cfg = _scenario(tmp_path, h, 45.0)
        a, b, _ = _run(h, cfg, tmp_path, PHYSICS, RIG)
    assert a.p.returncode == 0, a.err[-3000:]
    assert b.p.returncode == 0, b.err[-3000:] + b.out[-3000:]
    # admission per host: the master prints both tables
    assert "admission, host a" in a.err and "admission, host b" in a.err
    fig = json.loads((tmp_path / "run.summary.json").read_text())
    assert fig["ok"], b.out[-3000:]
    latch = dict((k, t) for t, k in fig["events"])["latch"]
    latch_ref = dict((k, t) for t, k in fig_ref["events"])["latch"]
    assert abs(latch - latch_ref) <= 0.05, (latch, latch_ref)
    assert abs(fig["interface_peak"]["force_N"] / fig_ref["interface_peak"]["force_N"] - 1) <= 0.05
    assert fig["rig"]["seq_lost"] == 0 and fig["rig"]["replies_missed"] == 0, fig["rig"]
    # the follower's table shows its services' overruns (the master's figures, sent at the stop; without
    # them the row is "—"); "of N steps" follows a count only when it is not 0
    assert re.search(r"overruns\s+(?:\S.*, )?orbiter \d+(?: of \d+ steps)?(?:,|$)", b.out, re.M), b.out[-3000:]
    hosts = _summary(a)["hosts"]
    assert hosts["b"]["clock"]["sync_samples"] > 100 and "admission" in hosts["b"]


def test_cut_link_stops_both_sides_within_the_heartbeat_and_the_log_ends_at_the_cut(tmp_path, namespaces):
    with TwoHosts(subnet=12) as h:
        cfg = _scenario(tmp_path, h, 30.0)
        a, b, cut = _run(h, cfg, tmp_path, PHYSICS, RIG, cut_after=8.0, timeout=90)
    assert cut is not None
    hb = 1.0  # the shipped heartbeat_timeout
    t_a, t_b = a.when(r"host b lost at t = "), b.when(r"host a \(the master launcher\) lost at t = ")
    assert t_a is not None, a.err[-3000:]
    assert t_b is not None, b.err[-3000:]
    assert t_a - cut <= hb + 0.5 and t_b - cut <= hb + 0.5, (t_a - cut, t_b - cut)
    assert a.p.returncode == 1 and b.p.returncode == 1
    assert "Traceback" not in a.err + b.err
    assert "the logger (logger) is gone" in a.err
    # the rig went to its safe state: parked by the bridge when host b stopped its services, or, where the
    # bridge's last commands came later than the rig's watchdog allows, by that watchdog (a WATCHDOG fault, which
    # ramps it to neutral just the same); no other fault. (Its emulator stops with host b's services, so it
    # may still be on its way to neutral.)
    rig = json.loads((tmp_path / "rig.json").read_text())
    assert rig["state"] in ("PARKING", "ARMED", "FAULT"), rig["state"]
    assert all(bits == 1 for _, bits, _ in rig.get("fault_log", [])), rig.get("fault_log")  # WATCHDOG (bit 0) only
    n, last = _finite_log(tmp_path / "run.mcap")
    assert n > 0 and last > 0
    # the log runs up to the cut: host a's stretch after it is bounded by the heartbeat
    t_lost = _summary(a)["lost"]["t"]
    assert t_lost - last * 1e-9 <= hb + 0.5


def test_a_clock_200_ppm_fast_is_followed_and_input_ages_stay_bounded(tmp_path, namespaces):
    one = tmp_path / "one"
    one.mkdir()
    r = subprocess.run([sys.executable, str(LAUNCH), "run", str(_toys(one, None, 60.0)), "--json",
                        "--log", str(one / "run.mcap"), "--no-report"], capture_output=True, text=True, env=_env(),
                       timeout=200)
    assert r.returncode == 0, r.stderr[-2000:]
    base = json.loads([x for x in r.stdout.splitlines() if x.startswith("{")][-1])["services"]
    with TwoHosts(subnet=13) as h:
        cfg = _toys(tmp_path, h, 60.0)
        a, b, _ = _run(h, cfg, tmp_path, "a", "b,logger", env_b={"BERTHSIM_TEST_CLOCK_PPM": "200"})
    assert a.p.returncode == 0, a.err[-3000:]
    assert b.p.returncode == 0, b.err[-3000:]
    s = _summary(a)
    clock = s["hosts"]["b"]["clock"]
    assert abs(clock["drift_ppm"] - 200.0) <= 20.0, clock
    # the service on host b follows the master's clock on its own: it estimates the drift itself
    own = s["services"]["b"].get("clock") or {}
    assert abs(own.get("drift_ppm", 0.0) - 200.0) <= 20.0 and "error" not in own, own
    # The figure that shows whether host b follows the master's clock is each service's MEDIAN input age against
    # the one-host run. An undisciplined host b (its own fast clock, `clock = "ptp"`, measured: b 12.06 ms against
    # 2.1 ms on one host, a -1.10 ms against 5.6 ms) moves both by several ms; a followed clock moves neither
    # (measured: b 2.13 ms, a 5.64 ms).
    # The p99 is not that figure: host b's 100 Hz service reads host a's spring flow one coupling lag late, and host
    # a publishes each 10 ms span's last sample 1 ms before b's step needs it. When a's 1 kHz step is more than
    # about 1 ms late at that instant (it overruns 2-7 % of its steps on this 2-core machine), b holds the
    # previous span's sample, 10 ms older. The p99 of b's ages is therefore 2-3 ms or 12-13 ms, whichever side
    # of 1 % those steps fall, on one host as on two (one host, measured: 3.0 % of b's steps, p99 12.98 ms).
    shift = {name: (s["services"][name]["input_age_p50_ns"] - base[name]["input_age_p50_ns"]) / 1e6
             for name in ("a", "b")}
    assert all(abs(d) <= 2.0 for d in shift.values()), (shift, own)


@pytest.mark.parametrize("impair", [{"delay_ms": 0.2, "jitter_ms": 0.05}, {"loss_pct": 1.0}],
                         ids=["delay-0.2ms", "loss-1pct"])
def test_netem_delay_and_loss_complete(tmp_path, namespaces, impair):
    why = netem_skip_reason()
    if why:
        pytest.skip(why)
    with TwoHosts(subnet=14) as h:
        for host in ("a", "b"):
            h.netem(host, **impair)
        cfg = _toys(tmp_path, h, 10.0)
        a, b, _ = _run(h, cfg, tmp_path, "a", "b,logger")
    assert a.p.returncode == 0, a.err[-3000:]
    assert b.p.returncode == 0, b.err[-3000:]
    n, last = _finite_log(tmp_path / "run.mcap")
    assert last == int(10e9) and n > 0


class _Addr:
    addr = {"a": "10.231.99.1", "b": "10.231.99.2"}


def test_check_realtime_only_prints_the_table_of_one_host(tmp_path):
    """Admission per host: the host's processes only, its services calibrated on the other host's outputs
    (before, a follower's calibration of a consumer alone failed for want of its inputs)."""
    cfg = _toys(tmp_path, _Addr(), 1.0)  # type: ignore[arg-type]  # addresses only: nothing binds in check
    r = subprocess.run([sys.executable, str(LAUNCH), "check", "--realtime", str(cfg), "--only", "b,logger"],
                       capture_output=True, text=True, env=_env(), timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    rows = [line.split() for line in r.stdout.splitlines() if re.match(r"\s*[ab]\s+[ab]\s+\d+Hz", line)]
    assert [row[0] for row in rows] == ["b"], r.stdout
