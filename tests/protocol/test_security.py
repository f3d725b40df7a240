"""CurveZMQ: only listed client keys get through; a run split across two network namespaces."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from errors import ConfigError
from protocol.bus import mesh_endpoints, new_context, open_bus
from protocol.codec import decode, encode, envelope
from protocol.provenance import SampleGate
from protocol.security import Security, is_loopback, write_keys
from testkit.netns import skip_reason as netns_skip_reason
from testkit.ports import free_base_port
from tests.protocol.test_runtime import LAUNCH, ROOT, make_cfg, reference, run, same_as, workers


@pytest.fixture
def keys(tmp_path):
    d = tmp_path / "keys"
    write_keys(d, ("server", "client", "intruder"))
    return d


def test_keys_written_with_private_secrets(keys):
    assert sorted(p.name for p in keys.iterdir()) == sorted(
        f"{n}.key{s}" for n in ("server", "client", "intruder") for s in ("", "_secret"))
    assert (keys / "client.key_secret").stat().st_mode & 0o077 == 0


def test_is_loopback():
    assert is_loopback("tcp://127.0.0.1:5") and is_loopback("tcp://localhost:5") and is_loopback("ipc:///x")
    assert not is_loopback("tcp://10.0.0.1:5") and not is_loopback("tcp://0.0.0.0:5")


def test_peer_without_allowed_key_gets_nothing_and_reaches_nobody(keys, tmp_path):
    """Subscribers are the CURVE servers, publishers the clients: a publisher whose key is not
    allowed (or that has none) reaches nobody; a subscriber without the run's server key (its own
    pair, or none) gets nothing; the allowed peers get through both ways."""
    url = f"tcp://127.0.0.1:{free_base_port()}"
    ep = mesh_endpoints(url, ["svc", "peer", "bad", "plain"])
    write_keys(tmp_path / "fake", ("server", "client"))
    ctxs = [new_context() for _ in range(4)]
    svc_ctx, peer_ctx, bad_ctx, fake_ctx = ctxs
    sec = Security(keys, allowed=("client",))
    fake_sec = Security(tmp_path / "fake", allowed=("client",))
    auths = [sec.start_authenticator(c) for c in (svc_ctx, peer_ctx, bad_ctx)]
    auths.append(fake_sec.start_authenticator(fake_ctx))
    try:
        with open_bus(ep["svc"], [ep["peer"], ep["bad"], ep["plain"]], ["x"], security=sec, context=svc_ctx) as svc, \
                open_bus(ep["peer"], [ep["svc"]], ["x"], security=sec, context=peer_ctx) as peer, \
                open_bus(ep["bad"], [], security=Security(keys, client="intruder"), context=bad_ctx) as bad, \
                open_bus(ep["plain"], [], context=bad_ctx) as plain_pub, \
                open_bus(None, [ep["svc"]], ["x"], security=fake_sec, context=fake_ctx) as fake, \
                open_bus(None, [ep["svc"]], ["x"], context=fake_ctx) as plain:
            seen, got = [], []
            end = time.monotonic() + 5
            while time.monotonic() < end and not (b"peer" in seen and b"svc" in got):
                svc.send("x", b"svc")
                peer.send("x", b"peer")
                bad.send("x", b"bad")
                plain_pub.send("x", b"plain")
                if (m := svc.recv(0.02)) is not None:
                    seen.append(m.payload)
                if (m := peer.recv(0.0)) is not None:
                    got.append(m.payload)
            assert b"peer" in seen and b"svc" in got, "the allowed peers never got through"
            for _ in range(20):
                svc.send("x", b"svc")
                bad.send("x", b"bad")
                plain_pub.send("x", b"plain")
                time.sleep(0.01)
            while (m := svc.recv(0.2)) is not None:
                seen.append(m.payload)
            assert set(seen) == {b"peer"}  # nothing from the publishers without an allowed key
            assert fake.recv(0.2) is None and plain.recv(0.05) is None  # no server key, no data
            # libzmq aborts a process whose connecting CURVE server closes while a refused publisher's reconnect
            # reaches its ZAP request (ZmqBus.wait_refused): the refused publishers go first
            bad.close()
            plain_pub.close()
            assert svc.wait_refused([ep["bad"]], 10.0) == []
    finally:
        for a in auths:
            a.stop()
        for c in ctxs:
            c.destroy(linger=0)


def test_each_message_carries_its_publishers_key_name_and_an_impostor_is_not_admitted(tmp_path):
    """One key per process: the subscriber's ZAP handler names each frame's publisher by its key
    (User-Id); the bus hands each frame to ``admit`` with that name, and the gate's impostor rule
    refuses a frame in the orbiter's name from the holder of the arm's key."""
    keys = tmp_path / "keys"
    write_keys(keys, ("server", "launcher", "orbiter", "arm"))
    table = {"keys_dir": str(keys), "identities": {"launcher": ["launcher"], "orbiter": ["orbiter"], "arm": ["arm"]}}
    base = Security.from_table(table)
    assert base.client == "launcher" and set(base.allowed) == {"launcher", "orbiter", "arm"}
    gate = SampleGate({}, {}, speaks_for=base.identities)
    url = f"tcp://127.0.0.1:{free_base_port()}"
    ep = mesh_endpoints(url, ["orbiter", "arm", "rx"])
    ctxs = [new_context() for _ in range(3)]
    auths = [base.start_authenticator(c) for c in ctxs]
    peers: list[tuple[str | None, str]] = []

    def admit(peer: str | None, frame: bytes) -> bool:
        sender = envelope("sim/control", frame[frame.find(b"\0") + 1:])[1]
        peers.append((peer, sender))
        return gate.impostor(sender, peer) is None

    def ctl(sender: str, seq: int) -> bytes:
        return encode("sim/control", {"cmd": "probe", "info": {}}, sender=sender, seq=seq, t_ns=0, h_ns=1)

    try:
        with open_bus(ep["orbiter"], [], security=base.for_process(["orbiter"]), context=ctxs[0]) as orbiter, \
                open_bus(ep["arm"], [], security=base.for_process(["arm"]), context=ctxs[1]) as arm, \
                open_bus(None, [ep["orbiter"], ep["arm"]], ["sim/control"], security=base.for_process(["launcher"]),
                         context=ctxs[2], admit=admit) as rx:
            got: list[str] = []
            end = time.monotonic() + 5
            k = 0
            while time.monotonic() < end and not {"orbiter", "arm"} <= set(got):
                orbiter.send("sim/control", ctl("orbiter", k))
                arm.send("sim/control", ctl("arm", k))
                arm.send("sim/control", ctl("orbiter", k))  # the arm's key, the orbiter's name
                k += 1
                while (m := rx.recv(0.02)) is not None:
                    got.append(decode("sim/control", m.payload).sender)
            frames: list[bytes] = []
            rx.drain(frames.append)
            got += [decode("sim/control", f[f.find(b"\0") + 1:]).sender for f in frames]
    finally:
        for a in auths:
            a.stop()
        for c in ctxs:
            c.destroy(linger=0)
    assert {"orbiter", "arm"} <= set(got)
    assert ("arm", "orbiter") in peers  # the forgery reached the subscriber, named by its key
    assert got.count("orbiter") == sum(1 for p in peers if p == ("orbiter", "orbiter"))  # and was not admitted
    assert set(peers) == {("orbiter", "orbiter"), ("arm", "arm"), ("arm", "orbiter")}


def test_a_process_takes_the_key_pair_that_speaks_for_all_its_services(tmp_path):
    table = {"keys_dir": "k", "identities": {"launcher": ["launcher"], "physics": ["orbiter", "arm"], "hil": ["hil"]}}
    sec = Security.from_table(table, tmp_path)
    assert sec.keys_dir == tmp_path / "k"
    assert sec.for_process(["orbiter", "arm"]).client == "physics" and sec.for_process(["hil"]).client == "hil"
    with pytest.raises(ConfigError, match="no key pair speaks for 'contact'"):
        sec.for_process(["contact"])
    with pytest.raises(ConfigError, match="no key pair speaks for 'orbiter' together with hil"):
        sec.for_process(["orbiter", "hil"])
    with pytest.raises(ConfigError, match="security.identities.hil: expected a list of service names"):
        Security.from_table({"identities": {"hil": "hil"}})
    shared = Security.from_table({"keys_dir": "k"}, tmp_path)
    assert shared.for_process(["orbiter"]) is shared and shared.client == "client" and shared.identities == {}


def _secure_cfg(tmp: Path, keys: Path, bus: str, **kw) -> Path:
    sec = f'\n[security]\nkeys_dir = "{keys}"\nserver = "server"\nclient = "client"\nallowed = ["client"]\n'
    return make_cfg(tmp, sim=f'transport = "tcp"\nbus = "{bus}"', extra=sec, **kw)


@pytest.mark.integration
def test_lockstep_run_over_curve_tcp_matches_ipc(tmp_path, keys):
    ref = reference(tmp_path, 0.5)
    d = tmp_path / "curve"
    d.mkdir()
    cfg = _secure_cfg(d, keys, f"tcp://127.0.0.1:{free_base_port()}", duration=0.5)
    rc, _, err, _ = run(cfg)
    assert rc == 0, err
    assert same_as(d, ref)


def test_non_loopback_without_keys_refused_by_config(tmp_path):
    cfg = make_cfg(tmp_path, sim='transport = "tcp"\nbus = "tcp://192.0.2.7:5550"')
    rc, _, err, _ = run(cfg)
    assert rc == 2 and "not loopback" in err


def _netns_skip_reason() -> str | None:
    return netns_skip_reason()


@pytest.mark.integration
@pytest.mark.slow
def test_two_hosts_via_netns_and_veth(tmp_path, keys):
    reason = _netns_skip_reason()
    if reason:
        pytest.skip(reason)
    tag = f"{os.getpid() % 100000}"
    na, nb, va, vb = f"bsa{tag}", f"bsb{tag}", f"bva{tag}", f"bvb{tag}"
    ip_a, ip_b = "10.231.7.1", "10.231.7.2"

    def ip(*args):
        subprocess.run(["ip", *args], check=True, capture_output=True)

    ref = reference(tmp_path, 1.0)
    d = tmp_path / "split"
    d.mkdir()
    cfg = _secure_cfg(d, keys, f"tcp://{ip_a}:5550", duration=1.0)
    text = (cfg.read_text().replace("index = 1\n", 'index = 1\nhost = "b"\n')   # b publishes from host B
            .replace("index = 0\n", 'index = 0\nhost = "a"\n')
            .replace(f'bus = "tcp://{ip_a}:5550"',
                     f'bus = "tcp://{ip_a}:5550"\nhosts = {{a = "{ip_a}", b = "{ip_b}"}}'))
    cfg.write_text(text)
    try:
        ip("netns", "add", na)
        ip("netns", "add", nb)
        ip("link", "add", va, "type", "veth", "peer", "name", vb)
        ip("link", "set", va, "netns", na)
        ip("link", "set", vb, "netns", nb)
        ip("-n", na, "addr", "add", f"{ip_a}/24", "dev", va)
        ip("-n", nb, "addr", "add", f"{ip_b}/24", "dev", vb)
        for ns, dev in ((na, va), (nb, vb)):
            ip("-n", ns, "link", "set", dev, "up")
            ip("-n", ns, "link", "set", "lo", "up")
        cmd = [sys.executable, str(LAUNCH), "run", str(cfg), "--only"]
        host_a = subprocess.Popen(["ip", "netns", "exec", na, *cmd, "a"], cwd=ROOT, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        host_b = subprocess.Popen(["ip", "netns", "exec", nb, *cmd, "b"], cwd=ROOT, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        try:
            out_a, err_a = host_a.communicate(timeout=60)
            out_b, err_b = host_b.communicate(timeout=60)
        finally:
            for p in (host_a, host_b):
                if p.poll() is None:
                    p.kill()
                    p.wait()
        assert host_a.returncode == 0, err_a
        assert host_b.returncode == 0, err_b
        assert "following" in err_b
        assert same_as(d, ref)
    finally:
        subprocess.run(["ip", "netns", "del", na], capture_output=True)
        subprocess.run(["ip", "netns", "del", nb], capture_output=True)
        assert workers(cfg) == []


def test_keys_for_a_config_per_process_or_per_host(tmp_path):
    """launch.py keys DIR --config: the server's, the launchers' and one pair per process (or per
    host label), secrets private, and the [security] table that names them, which a config takes."""
    import tomllib

    cfg = tmp_path / "two.toml"
    cfg.write_text((ROOT / "configs" / "two_hosts.toml").read_text())
    for per, names in (("process", {"orbiter", "arm", "operator", "contact", "hil", "logger"}), ("host", {"a", "b"})):
        d = tmp_path / per
        r = subprocess.run([sys.executable, str(LAUNCH), "keys", str(d), "--config", str(cfg), "--per", per],
                           capture_output=True, text=True, cwd=ROOT, timeout=60)
        assert r.returncode == 0, r.stderr
        table = tomllib.loads(r.stdout)["security"]
        assert table["keys_dir"] == per and table["server"] == "server"
        assert set(table["identities"]) == names | {"launcher"}
        assert sorted(s for v in table["identities"].values() for s in v) == sorted(
            ["launcher", "orbiter", "arm", "operator", "contact", "hil", "logger"])
        assert {p.name for p in d.iterdir()} == {f"{n}{s}" for n in names | {"launcher", "server"}
                                                 for s in (".key", ".key_secret")}
        assert all(p.stat().st_mode & 0o077 == 0 for p in d.glob("*.key_secret"))
        sec = Security.from_table(table, tmp_path)
        assert sec.problems(server_side=True) == []
        assert sec.for_process(["hil"]).client == ("hil" if per == "process" else "b")
