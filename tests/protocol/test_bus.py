"""Bus contract, run over every backend (memory, and ZeroMQ's inproc, ipc, tcp)."""

import select
import threading
import time

import numpy as np
import pytest

from errors import BusError
from protocol.bus import (
    LAUNCHER,
    Bus,
    ControlClient,
    ControlServer,
    EndpointNotLocal,
    MemoryBus,
    MemoryControlClient,
    MemoryControlServer,
    Message,
    Poller,
    SequenceTracker,
    ZmqBus,
    ZmqControlClient,
    ZmqControlServer,
    control_endpoint,
    mesh_endpoints,
    new_context,
    open_bus,
    split_frame,
)
from testkit.ports import bus_url

pytestmark = pytest.mark.contract


@pytest.fixture(params=["memory", "inproc", "ipc", "tcp"])
def url(request, tmp_path):
    """A fresh base URL of every backend (this module's contract runs over the in-memory one too)."""
    return bus_url(request.param, str(tmp_path))


def _connected(pub, sub, topic="probe", timeout=5.0):
    """Send probes until the subscriber sees one (no slow joiner), then drain."""
    sub.subscribe(topic)
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        pub.send(topic, b"x")
        m = sub.recv(0.01)
        if m is not None and m.topic == topic:
            time.sleep(0.02)
            while sub.recv(0.0) is not None:
                pass
            return
    raise AssertionError("subscription never confirmed")


def _pair(url, topics_b=()):
    ep = mesh_endpoints(url, ["a", "b"])
    a = open_bus(ep["a"], [ep["b"]])
    b = open_bus(ep["b"], [ep["a"]], topics_b)
    return a, b


def test_round_trip_exact_topics_order_no_drops(url):
    a, b = _pair(url, ["arm/state"])
    with a, b:
        _connected(a, b)
        a.send("arm/stateX", b"no")     # prefix of a subscription must not match
        a.send("arm/state", b"yes")
        m = b.recv(2.0)
        assert m == Message("arm/state", b"yes")
        n = 20000
        for i in range(n):
            a.send("arm/state", i.to_bytes(4, "little"))
        got = []
        end = time.monotonic() + 10
        while len(got) < n and time.monotonic() < end:
            m = b.recv(1.0)
            if m is not None:
                got.append(int.from_bytes(m.payload, "little"))
        assert got == list(range(n))
        assert b.recv(0.05) is None


def test_recv_frames_takes_every_queued_frame_in_order_up_to_the_limit(url):
    a, b = _pair(url, ["arm/state"])
    with a, b:
        _connected(a, b)
        assert b.recv_frames() == []
        n = 5000
        for i in range(n):
            a.send("arm/state", i.to_bytes(4, "little"))
        got: list[bytes] = []
        end = time.monotonic() + 10
        while len(got) < n and time.monotonic() < end:
            if b.poll(1000):
                frames = b.recv_frames(limit=700)
                assert 0 < len(frames) <= 700
                got += frames
        assert got == [b"arm/state\0" + i.to_bytes(4, "little") for i in range(n)]  # whole frames
        assert b.recv_frames() == []


def test_drain_hands_every_queued_frame_in_order_and_never_waits(url):
    a, b = _pair(url, ["arm/state"])
    with a, b:
        _connected(a, b)
        got: list[bytes] = []
        t = time.monotonic()
        b.drain(got.append)
        assert got == [] and time.monotonic() - t < 0.05
        n = 3000
        for i in range(n):
            a.send("arm/state", i.to_bytes(4, "little"))
            a.send("arm/other", b"not subscribed")
        end = time.monotonic() + 10
        while len(got) < n and time.monotonic() < end:
            if b.poll(1000):
                b.drain(got.append)
        assert got == [b"arm/state\0" + i.to_bytes(4, "little") for i in range(n)]
        assert not b.poll(20)


def test_recv_wait_blocks_up_to_its_timeout_then_raises_the_backends_timeout(url):
    a, b = _pair(url, ["x"])
    with a, b:
        _connected(a, b, "x")
        b.set_recv_timeout(100)
        t = time.monotonic()
        with pytest.raises(b.Timeout):
            b.recv_wait()
        assert 0.05 < time.monotonic() - t < 1.0
        b.set_recv_timeout(2000)
        threading.Timer(0.05, a.send, ("x", b"late")).start()
        t = time.monotonic()
        assert b.recv_wait() == b"x\0late" and time.monotonic() - t < 1.5
        a.send_frame(a.frame_prefix("x") + b"whole")
        assert b.recv_wait() == b"x\0whole"


def test_one_poller_wakes_for_the_bus_and_the_control_plane(url):
    a, b = _pair(url, ["x"])
    with a, b, ControlServer(url) as srv, ControlClient(url, "arm") as cli:
        _connected(a, b, "x")
        poller = Poller()
        poller.register(b, cli)
        t = time.monotonic()
        assert not poller.poll(100) and 0.05 < time.monotonic() - t < 1.0
        a.send("x", b"1")
        assert poller.poll(2000) and b.recv(0.0) == Message("x", b"1")
        assert not poller.poll(20)
        cli.send({"op": "hello"})
        assert srv.recv(2.0) == ("arm", {"op": "hello"})
        srv.send("arm", {"op": "ack"})
        assert poller.poll(2000) and cli.recv(0.0) == {"op": "ack"}
        launcher = Poller()
        launcher.register(srv)
        cli.send({"op": "state"})
        assert launcher.poll(2000) and srv.recv(0.0) == ("arm", {"op": "state"})


def test_a_select_loop_on_fileno_that_drains_after_each_wake_up_gets_every_frame(url):
    a, b = _pair(url, ["x"])
    with a, b:
        _connected(a, b, "x")
        n = 300

        def publish() -> None:
            for i in range(n):
                a.send("x", i.to_bytes(2, "little"))
                if i % 50 == 0:
                    time.sleep(0.01)

        got: list[bytes] = []
        sender = threading.Thread(target=publish)
        sender.start()
        fd = b.fileno()
        end = time.monotonic() + 10
        while len(got) < n and time.monotonic() < end:
            assert select.select([fd], [], [], 2.0)[0], f"no wake-up with {len(got)} of {n} frames taken"
            b.drain(got.append)
        sender.join()
        assert got == [b"x\0" + i.to_bytes(2, "little") for i in range(n)]


def test_the_url_scheme_picks_the_backend(url):
    ep = mesh_endpoints(url, ["a"])
    memory = url.startswith("memory://")
    with open_bus(ep["a"]) as bus, ControlServer(url) as srv, ControlClient(url, "a") as cli:
        assert isinstance(bus, MemoryBus if memory else ZmqBus)
        assert isinstance(srv, MemoryControlServer if memory else ZmqControlServer)
        assert isinstance(cli, MemoryControlClient if memory else ZmqControlClient)
    with pytest.raises(ValueError, match="cannot be mixed"):
        open_bus(ep["a"], ["memory://x.b.pub" if not memory else "inproc://x.b.pub"])


def test_subscriber_of_several_publishers(url):
    ep = mesh_endpoints(url, ["a", "b", "c"])
    with open_bus(ep["a"]) as a, open_bus(ep["b"]) as b, \
            open_bus(ep["c"], [ep["a"], ep["b"]], ["x"]) as c:
        _connected(a, c)
        _connected(b, c)
        a.send("x", b"a")
        b.send("x", b"b")
        assert sorted(c.recv(2.0).payload for _ in range(2)) == [b"a", b"b"]


def test_recv_timeout_bounded(url):
    a, b = _pair(url, ["x"])
    with a, b:
        t = time.monotonic()
        assert b.recv(0.1) is None
        assert 0.05 < time.monotonic() - t < 1.0
        assert b.recv(0.0) is None


def test_subscribe_all_sees_every_topic(url):
    a, b = _pair(url, [""])
    with a, b:
        _connected(a, b)
        for t in ("a", "b/c", "sim/stats"):
            a.send(t, t.encode())
        assert [b.recv(2.0).topic for _ in range(3)] == ["a", "b/c", "sim/stats"]


def _bind_again(ep: str, timeout: float = 2.0):
    """A new bus on ``ep`` once the endpoint is free (ZeroMQ releases a closed socket's bind asynchronously)."""
    end = time.monotonic() + timeout
    while True:
        try:
            return open_bus(ep)
        except BusError:
            if time.monotonic() > end:
                raise
            time.sleep(0.01)


def test_close_idempotent_and_context_manager(url):
    ep = mesh_endpoints(url, ["a"])["a"]
    with open_bus(ep) as bus:
        assert isinstance(bus, Bus) and not bus.closed
        if not ep.startswith("ipc://"):  # (ZeroMQ lets a second ipc bind take the path over)
            with pytest.raises(BusError):  # the endpoint is taken while the bus lives
                open_bus(ep)
    assert bus.closed  # leaving the block closed it
    bus.close()  # and closing again is harmless
    bus.close(linger_ms=100)
    with pytest.raises(RuntimeError, match="inside"):
        with _bind_again(ep) as again:  # the endpoint was released: a new bus binds it
            raise RuntimeError("inside")
    assert again.closed  # closed on the way out of an exception too
    _bind_again(ep).close()


def test_control_round_trip(url):
    with ControlServer(url) as srv, ControlClient(url, "arm") as cli:
        cli.send({"op": "hello", "n": 1})
        ident, obj = srv.recv(2.0)
        assert ident == "arm" and obj == {"op": "hello", "n": 1}
        assert srv.send("arm", {"op": "start"})
        assert cli.recv(2.0) == {"op": "start"}
        assert not srv.send("nobody", {"op": "x"})
        assert cli.recv(0.05) is None


def test_unknown_scheme_named():
    with pytest.raises(ValueError, match="'udp'"):
        open_bus("udp://1.2.3.4:5")
    with pytest.raises(ValueError, match="port"):
        control_endpoint("tcp://127.0.0.1")


def test_endpoints_derived():
    assert control_endpoint("tcp://10.0.0.1:5550") == "tcp://10.0.0.1:5550"
    assert mesh_endpoints("tcp://10.0.0.1:5550", ["a", "b"], {"b": "tcp://10.0.0.2:6000"}) == {
        LAUNCHER: "tcp://10.0.0.1:5551", "a": "tcp://10.0.0.1:5552", "b": "tcp://10.0.0.2:6000"}
    assert control_endpoint("ipc:///tmp/x/bus") == "ipc:///tmp/x/bus.ctl"
    assert mesh_endpoints("ipc:///tmp/x/bus", ["a"])["a"] == "ipc:///tmp/x/bus.a.pub"


def test_non_loopback_bind_without_keys_refused():
    with pytest.raises(BusError, match="needs CurveZMQ keys"):
        open_bus("tcp://0.0.0.0:5550")
    with pytest.raises(BusError, match="needs CurveZMQ keys"):
        ControlServer("tcp://192.0.2.1:5550")


def test_bind_conflict_is_bus_error():
    url = bus_url("tcp")
    with ControlServer(url):
        with pytest.raises(BusError, match="cannot bind") as ei:
            ControlServer(url)
        assert ei.value.__cause__ is not None and not isinstance(ei.value, EndpointNotLocal)


def test_an_address_of_another_host_is_endpoint_not_local(tmp_path):
    """What the launcher takes as "another host's launcher binds the control endpoint" (it follows it)."""
    from protocol.security import Security, write_keys

    write_keys(tmp_path, ("server", "client"))
    with pytest.raises(EndpointNotLocal, match="cannot bind"):
        ControlServer("tcp://192.0.2.1:5550", security=Security(tmp_path))  # (192.0.2.0/24: TEST-NET-1)


def test_split_frame_malformed():
    assert split_frame(b"a/b\0xyz") == Message("a/b", b"xyz")
    assert split_frame(b"\0xyz") == Message("", b"\0xyz")
    assert split_frame(b"noseparator") == Message("", b"noseparator")
    assert split_frame(b"\xff\xfe\0x") == Message("", b"\xff\xfe\0x")


def test_sequence_tracker():
    t = SequenceTracker()
    assert [t.see("a", "x", s) for s in (0, 1, 2, 5, 6)] == [0, 0, 0, 2, 0]
    assert t.see("b", "x", 7) == 0 and t.dropped == 2


def test_sequence_tracker_batches_count_as_one_by_one():
    """see_batch over random batches (gaps, repeats, reordering, interleaved keys) equals see() per message."""
    rng = np.random.default_rng(3)
    names = [("a", "x"), ("a", "y"), ("b", "x")]
    one, bulk = SequenceTracker(), SequenceTracker()
    nxt = {n: 0 for n in names}
    for _ in range(50):
        codes, seqs = [], []
        for _ in range(int(rng.integers(0, 40))):
            c = int(rng.integers(0, len(names)))
            nxt[names[c]] += int(rng.choice([1, 1, 1, 2, 5, 0, -1]))
            codes.append(c)
            seqs.append(nxt[names[c]])
        expect = [one.see(*names[c], s) for c, s in zip(codes, seqs, strict=True)]
        got = bulk.see_batch(np.array(codes, np.int64), np.array(seqs, np.int64), names.__getitem__)
        assert got.tolist() == expect
        assert bulk.dropped == one.dropped and bulk.last == one.last
    assert one.dropped > 0


def test_close_with_linger_delivers_what_the_pub_still_queues(tmp_path):
    """A stopping worker closes its PUB with a linger and terminates its context: every queued
    message reaches a subscriber in another context (another process's view of the bus)."""
    url = f"ipc://{tmp_path}/pub"
    ctx_pub, ctx_sub = new_context(), new_context()
    sub = open_bus(None, [url], ["t"], context=ctx_sub)
    pub = open_bus(url, context=ctx_pub)
    try:
        deadline = time.monotonic() + 5
        while sub.recv(0.01) is None:  # until the subscription is through
            assert time.monotonic() < deadline
            pub.send("t", b"probe")
        while sub.recv(0.05) is not None:
            pass
        n = 20_000
        for k in range(n):
            pub.send("t", k.to_bytes(4, "little"))
        pub.close(linger_ms=5000)
        ctx_pub.term()  # returns once the queue is delivered
        got = []
        while (m := sub.recv(0.5)) is not None:
            got.append(int.from_bytes(m.payload, "little"))
        assert got == list(range(n))
    finally:
        sub.close()
        ctx_sub.term()


# ---------------------------------------------------------------- ipc endpoints are owned
def test_a_live_ipc_endpoint_is_refused_a_stale_one_reclaimed_and_closing_removes_the_file(tmp_path):
    import os
    import socket

    from protocol.bus import EndpointInUse, claim_ipc

    ep = f"ipc://{tmp_path}/bus.x.pub"
    live = open_bus(ep)
    try:
        with pytest.raises(EndpointInUse, match="served by another live run"):
            open_bus(ep)  # before: ZeroMQ removed the live file and took the endpoint silently
        pub_sub = open_bus(None, [ep], ["t"])  # the first owner still reaches its subscribers
        try:
            _connected(live, pub_sub, "t")
        finally:
            pub_sub.close()
    finally:
        live.close()
    assert not os.path.exists(f"{tmp_path}/bus.x.pub")  # closing removes the socket file
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # a dead run's file: bound, nobody listens
    stale.bind(f"{tmp_path}/bus.ctl")
    stale.close()
    assert claim_ipc(f"ipc://{tmp_path}/bus.ctl") == f"{tmp_path}/bus.ctl"
    assert not os.path.exists(f"{tmp_path}/bus.ctl")
    (tmp_path / "plain.ctl").write_text("not a socket")
    with pytest.raises(BusError, match="exists and is not a socket"):
        ControlServer(f"ipc://{tmp_path}/plain")
    assert (tmp_path / "plain.ctl").read_text() == "not a socket"
