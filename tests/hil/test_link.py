"""Serial link over pyserial URLs, line budget, link statistics."""

from __future__ import annotations

import os
import socket
import time
import tty

import numpy as np
import pytest
import serial

from errors import ConfigError, RigFault
from hil.emulator import FdPort, SocketPort
from hil.framing import Fault, Heartbeat, RigState, SetpointAxes, Telemetry
from hil.link import SerialLink, SerialPort, bits_per_byte, check_line_budget, open_port


def test_loop_url_round_trip_and_stats():
    port = serial.serial_for_url("loop://", timeout=0.01)
    assert isinstance(port, SerialPort)
    t = [1.0]
    with SerialLink(port, clock=lambda: t[0]) as link:
        link.send(SetpointAxes((0.5,) * 6))
        link.send(Heartbeat())
        frames = link.receive()
        assert [type(f.msg) for f in frames] == [SetpointAxes, Heartbeat]
        # a telemetry echoing host time 1.0 s, held 2 ms at the rig, received at 1.010 s: rtt 8 ms
        link.send(Telemetry(0, 1_000_000, 2000, RigState.ENGAGED, Fault.NONE, (0.5,) * 6, (0.0,) * 6))
        t[0] = 1.010
        (f,) = link.receive()
        st = link.status()
        assert st["tx_frames"] == 3 and st["rx_frames"] == 3 and st["seq_gaps"] == 0
        assert st["rtt_p50_s"] == pytest.approx(0.008)
        assert link.delay.one_way_s == pytest.approx(0.004)
        port.write(b"\x05\x01\x02\x03\x00")  # garbage then a delimiter
        assert link.receive() == []
        assert link.status()["bad_frames"] == 1


def test_rtt_across_u32_wrap():
    port = serial.serial_for_url("loop://", timeout=0.01)
    t = [(2**32 + 500) * 1e-6]  # host clock just past the u32 wrap
    link = SerialLink(port, clock=lambda: t[0])
    link.send(Telemetry(0, 2**32 - 1500, 0, RigState.IDLE, Fault.NONE, (0.5,), (0.0,) * 6))
    link.receive()
    assert link.delay.rtt_s == pytest.approx(2000e-6)
    link.close()


def test_line_budget():
    assert bits_per_byte() == 10 and bits_per_byte(8, "E", 2) == 12
    # 250 Hz × 40 wire bytes × 10 bits = 100 kbit/s: 86.8 % of 115,200, 10.9 % of 921,600
    with pytest.raises(ConfigError, match=r"rate 250 Hz.*frame 40 B.*baud 115200"):
        check_line_budget(250, 38, 115200)
    assert check_line_budget(250, 38, 921600) == pytest.approx(100_000 / 921_600)
    with pytest.raises(ConfigError):
        check_line_budget(0, 38, 921600)


def test_open_port_refuses_unknown_scheme_and_bad_baud():
    with pytest.raises(ConfigError, match="'ftp'"):
        open_port("ftp://x", 115200)
    with pytest.raises(ConfigError, match="hil.baud"):
        open_port("loop://", 0)
    with pytest.raises(RigFault, match="/dev/tty-none"):
        open_port("/dev/tty-none", 115200)


def test_link_rejects_object_without_port_methods():
    with pytest.raises(ConfigError, match="read"):
        SerialLink(object())  # type: ignore[arg-type]


@pytest.mark.contract
@pytest.mark.parametrize("transport", ["loop", "pty", "socket"])
def test_link_contract_over_every_transport(transport):
    """Frames and statistics are the same over loop://, a pty and socket://."""
    cleanup = []
    if transport == "loop":
        host = open_port("loop://", 921600, timeout=0.01)
        far = host
    elif transport == "pty":
        master, slave = os.openpty()
        tty.setraw(slave)
        host = open_port(os.ttyname(slave), 921600, timeout=0.01)
        far = FdPort(master, timeout=0.01)
        cleanup.append(lambda: os.close(slave))
    else:
        srv = socket.create_server(("127.0.0.1", 0))
        host = open_port(f"socket://127.0.0.1:{srv.getsockname()[1]}", 921600, timeout=0.01)
        conn, _ = srv.accept()
        srv.close()
        far = SocketPort(conn, timeout=0.01)
    a, b = SerialLink(host), SerialLink(far)
    try:
        values = (0.5 + 1e-3 * np.arange(50)[:, None] + 1e-4 * np.arange(6)).astype(np.float32)  # exact on the wire
        sent = [SetpointAxes(tuple(float(v) for v in row)) for row in values]
        for m in sent:
            a.send(m)
        a.port.write(b"\x13\x37\x00")  # a burst of garbage
        a.send(Heartbeat())
        got = []
        deadline = time.monotonic() + 5.0
        calls = 0
        while len(got) < 51 and time.monotonic() < deadline:
            got += [f.msg for f in b.receive()]
            calls += 1
        assert got == sent + [Heartbeat()]
        assert calls <= 20  # a read takes what has arrived, not a byte or two
        assert b.status()["bad_frames"] == 1 and b.status()["seq_gaps"] == 0
        if far is not host:  # and back
            b.send(Telemetry(50, 1, 0, RigState.ENGAGED, Fault.NONE, (0.5,) * 6, (0.0,) * 6))
            back = []
            while not back and time.monotonic() < deadline:
                back = a.receive()
            assert isinstance(back[0].msg, Telemetry)
    finally:
        a.close()
        if far is not host:
            b.close()
        for c in cleanup:
            c()


def test_a_pty_link_reads_what_is_there_without_a_select_and_still_waits_and_sees_the_end(monkeypatch):
    """A link on a pty (read by its descriptor) reads what has already arrived without a select; where nothing has,
    it waits up to the timeout as before; where reading first finds nothing as a rule, it is tried on every eighth
    read only; the far end gone is still reported (a RigFault), not taken for an empty line."""
    import hil.link as link_module

    master, slave = os.openpty()
    tty.setraw(slave)
    host = open_port(os.ttyname(slave), 921600, timeout=0.01)
    link, far = SerialLink(host), SerialLink(FdPort(master, timeout=0.01))
    selects, reads = [0], [0]
    real_select, real_read = link_module.select.select, os.read

    class Select:
        @staticmethod
        def select(*args):
            selects[0] += 1
            return real_select(*args)

    def read(fd, n):
        reads[0] += fd == host.fileno()
        return real_read(fd, n)

    monkeypatch.setattr(link_module, "select", Select)
    monkeypatch.setattr(link_module.os, "read", read)
    try:
        assert link._nonblocking
        tel = Telemetry(0, 1, 0, RigState.ENGAGED, Fault.NONE, (0.5,) * 6, (0.0,) * 6)
        for k in range(5):  # the reply there before the read: one read, no select
            far.send(tel)
            time.sleep(0.02)
            selects[0] = reads[0] = 0
            assert [f.msg for f in link.receive(timeout=1.0)] == [tel]
            assert (selects[0], reads[0]) == (0, 1), k
        t0 = time.monotonic()
        assert link.receive(timeout=0.05) == [] and time.monotonic() - t0 >= 0.045  # nothing: waits, as before
        for _ in range(20):  # reading first finds nothing, again and again
            link.receive(timeout=0.0)
        reads[0] = selects[0] = 0
        for _ in range(64):
            link.receive(timeout=0.0)
        assert selects[0] == 64 and reads[0] == 8  # tried on every eighth read only
    finally:
        far.close()
    os.close(slave)
    with pytest.raises(RigFault):
        for _ in range(10):
            link.receive(timeout=0.05)
    link.close()


def test_readable_tells_whether_the_rig_has_answered_without_reading_it():
    """On a pty (the emulator's line): nothing there, then the rig's frame (asking again reads nothing), then
    nothing once it is received; the rig hanging up is something to read too (a read reports it)."""
    master, slave = os.openpty()
    tty.setraw(slave)
    link = SerialLink(open_port(os.ttyname(slave), 921600, timeout=0.01))
    os.close(slave)
    try:
        assert not link.readable()
        SerialLink(FdPort(master, timeout=0.01)).send(Heartbeat())
        deadline = time.monotonic() + 5.0
        while not link.readable() and time.monotonic() < deadline:
            time.sleep(0.001)
        assert link.readable() and link.readable()
        got = []
        while len(got) < 1 and time.monotonic() < deadline:
            got += [f.msg for f in link.receive()]
        assert got == [Heartbeat()]
        assert not link.readable()
        os.close(master)
        master = -1
        assert link.readable()
        with pytest.raises(RigFault):
            link.receive()
    finally:
        if master >= 0:
            os.close(master)
        link.close()
