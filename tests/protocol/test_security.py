"""CurveZMQ: only listed client keys get through; a run split across two network namespaces."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from protocol.bus import mesh_endpoints, new_context, open_bus
from protocol.security import Security, is_loopback, write_keys
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
    url = f"tcp://127.0.0.1:{free_base_port()}"
    ep = mesh_endpoints(url, ["svc", "peer", "fake"])
    server_ctx, client_ctx, fake_ctx = new_context(), new_context(), new_context()
    sec = Security(keys, allowed=("client",))
    # the intruder makes its own "server" pair: services connecting to it must refuse it
    write_keys(tmp_path / "fake", ("server", "client"))
    fake_sec = Security(tmp_path / "fake", allowed=("client",))
    auths = [sec.start_authenticator(server_ctx), fake_sec.start_authenticator(fake_ctx)]
    try:
        with open_bus(ep["svc"], [ep["peer"], ep["fake"]], ["x"], security=sec, context=server_ctx) as svc, \
                open_bus(ep["peer"], [ep["svc"]], ["x"], security=Security(keys, client="client"),
                         context=client_ctx) as peer, \
                open_bus(None, [ep["svc"]], ["x"], security=Security(keys, client="intruder"),
                         context=client_ctx) as bad, \
                open_bus(None, [ep["svc"]], ["x"], context=client_ctx) as plain, \
                open_bus(ep["fake"], [], security=fake_sec, context=fake_ctx) as fake:
            seen, got = [], []
            end = time.monotonic() + 5
            while time.monotonic() < end and not (b"peer" in seen and b"svc" in got):
                svc.send("x", b"svc")
                peer.send("x", b"peer")
                fake.send("x", b"fake")
                if (m := svc.recv(0.02)) is not None:
                    seen.append(m.payload)
                if (m := peer.recv(0.0)) is not None:
                    got.append(m.payload)
            assert b"peer" in seen and b"svc" in got, "the allowed peers never got through"
            for _ in range(20):
                svc.send("x", b"svc")
                fake.send("x", b"fake")
                time.sleep(0.01)
            while (m := svc.recv(0.2)) is not None:
                seen.append(m.payload)
            assert set(seen) == {b"peer"}  # nothing from the fake publisher reached the service
            assert bad.recv(0.2) is None and plain.recv(0.05) is None  # no key, no data
    finally:
        for a in auths:
            a.stop()
        for c in (client_ctx, server_ctx, fake_ctx):
            c.destroy(linger=0)


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
    if os.geteuid() != 0:
        return "needs root for ip netns"
    if shutil.which("ip") is None:
        return "needs the ip tool (iproute2)"
    probe = f"bsprobe{os.getpid()}"
    r = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if r.returncode != 0:
        return f"ip netns add failed: {r.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


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
