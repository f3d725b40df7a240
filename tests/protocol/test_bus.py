"""Bus contract, run over every backend (inproc, ipc, tcp)."""

import time

import pytest
import zmq

from errors import BusError
from protocol.bus import (
    Broker,
    ControlClient,
    ControlServer,
    Message,
    SequenceTracker,
    endpoints,
    open_bus,
    split_frame,
)

pytestmark = pytest.mark.contract


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


def test_round_trip_exact_topics_order_no_drops(url):
    with Broker(url), open_bus(url) as a, open_bus(url, ["arm/state"]) as b:
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


def test_recv_timeout_bounded(url):
    with Broker(url), open_bus(url, ["x"]) as b:
        t = time.monotonic()
        assert b.recv(0.1) is None
        assert 0.05 < time.monotonic() - t < 1.0
        assert b.recv(0.0) is None


def test_subscribe_all_sees_every_topic(url):
    with Broker(url), open_bus(url) as a, open_bus(url, [""]) as b:
        _connected(a, b)
        for t in ("a", "b/c", "sim/stats"):
            a.send(t, t.encode())
        assert [b.recv(2.0).topic for _ in range(3)] == ["a", "b/c", "sim/stats"]


def test_close_idempotent_and_context_manager(url):
    br = Broker(url)
    bus = open_bus(url)
    with bus:
        pass
    bus.close()
    br.close()
    br.close()


def test_control_round_trip(url):
    with Broker(url), ControlServer(url) as srv, ControlClient(url, "arm") as cli:
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
        endpoints("tcp://127.0.0.1")


def test_endpoints_derived():
    assert endpoints("tcp://10.0.0.1:5550") == ("tcp://10.0.0.1:5550", "tcp://10.0.0.1:5551", "tcp://10.0.0.1:5552")
    assert endpoints("ipc:///tmp/x/bus").ctl == "ipc:///tmp/x/bus.ctl"


def test_non_loopback_bind_without_keys_refused():
    with pytest.raises(BusError, match="needs CurveZMQ keys"):
        Broker("tcp://0.0.0.0:5550")
    with pytest.raises(BusError, match="needs CurveZMQ keys"):
        ControlServer("tcp://192.0.2.1:5550")


def test_bind_conflict_is_bus_error():
    from tests.protocol.conftest import bus_url
    url = bus_url("tcp")
    with Broker(url):
        with pytest.raises(BusError) as ei:
            Broker(url)
        assert isinstance(ei.value.__cause__, zmq.ZMQError)


def test_split_frame_malformed():
    assert split_frame(b"a/b\0xyz") == Message("a/b", b"xyz")
    assert split_frame(b"\0xyz") == Message("", b"\0xyz")
    assert split_frame(b"noseparator") == Message("", b"noseparator")
    assert split_frame(b"\xff\xfe\0x") == Message("", b"\xff\xfe\0x")


def test_sequence_tracker():
    t = SequenceTracker()
    assert [t.see("a", "x", s) for s in (0, 1, 2, 5, 6)] == [0, 0, 0, 2, 0]
    assert t.see("b", "x", 7) == 0 and t.dropped == 2
