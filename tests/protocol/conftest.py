"""Shared fixtures of the protocol tests: free tcp ports, bus URLs per backend."""

import itertools
import os
import socket
import tempfile

import pytest

_counter = itertools.count()


def free_base_port() -> int:
    """A port p with p, p+1, p+2 free on 127.0.0.1 (checked by binding)."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            p = s.getsockname()[1]
        if p > 65000:
            continue
        socks = []
        try:
            for i in range(3):
                t = socket.socket()
                socks.append(t)
                t.bind(("127.0.0.1", p + i))
            return p
        except OSError:
            continue
        finally:
            for t in socks:
                t.close()
    raise RuntimeError("no three consecutive free ports")


def bus_url(scheme: str, directory: str | None = None) -> str:
    """A fresh base URL of ``scheme`` (ipc: in ``directory``, default a new temp dir)."""
    n = next(_counter)
    if scheme == "inproc":
        return f"inproc://bus-{os.getpid()}-{n}"
    if scheme == "ipc":
        d = directory or tempfile.mkdtemp(prefix="bs-")
        return f"ipc://{d}/bus{n}"
    return f"tcp://127.0.0.1:{free_base_port()}"


@pytest.fixture(params=["inproc", "ipc", "tcp"])
def url(request, tmp_path):
    return bus_url(request.param, str(tmp_path))
