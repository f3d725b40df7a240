"""Fresh bus URLs for tests and benchmarks: free tcp ports on the loopback, new ipc/inproc/memory names."""

from __future__ import annotations

import itertools
import os
import random
import socket
import tempfile

__all__ = ["bus_url", "free_base_port"]

_counter = itertools.count()


def free_base_port(n: int = 8) -> int:
    """A port p with p … p+n-1 free on 127.0.0.1 (checked by binding): control, launcher, services."""
    rng = random.Random()
    for _ in range(200):
        # below the kernel's ephemeral range, so outgoing connections cannot take them meanwhile
        p = rng.randrange(20000, 32000 - n)
        socks = []
        try:
            for i in range(n):
                t = socket.socket()
                socks.append(t)
                t.bind(("127.0.0.1", p + i))
            return p
        except OSError:
            continue
        finally:
            for t in socks:
                t.close()
    raise RuntimeError(f"no {n} consecutive free ports")


def bus_url(scheme: str, directory: str | None = None) -> str:
    """A fresh base URL of ``scheme`` (ipc: in ``directory``, default a new temp dir)."""
    n = next(_counter)
    if scheme in ("inproc", "memory"):
        return f"{scheme}://bus-{os.getpid()}-{n}"
    if scheme == "ipc":
        d = directory or tempfile.mkdtemp(prefix="bs-")
        return f"ipc://{d}/bus{n}"
    return f"tcp://127.0.0.1:{free_base_port()}"
