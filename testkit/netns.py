"""Two hosts on one machine: network namespaces joined by a veth pair, for multi-host tests and benches.

:class:`TwoHosts` makes namespaces ``a`` and ``b`` (names unique to this process), one veth
pair between them with an address on each end, and removes everything on exit. ``tc netem``
adds delay and loss where the kernel has it (:meth:`TwoHosts.netem`); :meth:`TwoHosts.cut`
takes the link down (a pulled cable). Addresses are from 10.231.0.0/16, only ever inside
the namespaces made here. Needs root and iproute2: :func:`skip_reason` says why not.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from typing import Any

__all__ = ["TwoHosts", "netem_skip_reason", "skip_reason"]


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], check=check, capture_output=True, text=True)


def skip_reason() -> str | None:
    """Why namespaces cannot be made here (None if they can)."""
    if os.geteuid() != 0:
        return "needs root for ip netns"
    if shutil.which("ip") is None:
        return "needs the ip tool (iproute2)"
    probe = f"bsprobe{os.getpid()}"
    r = _ip("netns", "add", probe, check=False)
    if r.returncode != 0:
        return f"ip netns add failed: {r.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    return None


def netem_skip_reason() -> str | None:
    """Why ``tc netem`` cannot be used here (None if it can): the tool or the kernel's sch_netem missing."""
    why = skip_reason()
    if why:
        return why
    if shutil.which("tc") is None:
        return "needs the tc tool (iproute2)"
    with TwoHosts(subnet=254) as h:
        r = h.netem("a", delay_ms=0.1, check=False)
        if r.returncode != 0:
            return f"tc netem refused: {r.stderr.strip()}"
    return None


class TwoHosts:
    """Namespaces ``a`` and ``b`` joined by a veth pair (a context manager).

    Parameters
    ----------
    subnet : int
        Third octet of the pair's /24 in 10.231.0.0/16 (distinct values let several pairs exist at once).

    Attributes
    ----------
    ns : dict[str, str]
        Host (``"a"``, ``"b"``) -> namespace name.
    addr : dict[str, str]
        Host -> its IPv4 address on the link.
    dev : dict[str, str]
        Host -> its end of the veth pair.
    """

    def __init__(self, subnet: int = 7) -> None:
        tag = f"{os.getpid() % 100000}s{subnet}"
        self.ns = {"a": f"bsa{tag}", "b": f"bsb{tag}"}
        self.dev = {"a": f"bva{tag}", "b": f"bvb{tag}"}
        self.addr = {"a": f"10.231.{subnet}.1", "b": f"10.231.{subnet}.2"}

    def __enter__(self) -> TwoHosts:
        try:
            for h in ("a", "b"):
                _ip("netns", "add", self.ns[h])
            _ip("link", "add", self.dev["a"], "type", "veth", "peer", "name", self.dev["b"])
            for h in ("a", "b"):
                _ip("link", "set", self.dev[h], "netns", self.ns[h])
                _ip("-n", self.ns[h], "addr", "add", f"{self.addr[h]}/24", "dev", self.dev[h])
                _ip("-n", self.ns[h], "link", "set", self.dev[h], "up")
                _ip("-n", self.ns[h], "link", "set", "lo", "up")
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Remove both namespaces (their veth ends go with them)."""
        for h in ("a", "b"):
            _ip("netns", "del", self.ns[h], check=False)

    def command(self, host: str, argv: Sequence[str]) -> list[str]:
        """``argv`` run inside ``host``'s namespace."""
        return ["ip", "netns", "exec", self.ns[host], *argv]

    def popen(self, host: str, argv: Sequence[str], **kw: Any) -> subprocess.Popen[str]:
        """Start ``argv`` inside ``host``'s namespace (text mode; other keywords to :class:`subprocess.Popen`)."""
        return subprocess.Popen(self.command(host, argv), text=True, **kw)

    def netem(self, host: str, *, delay_ms: float = 0.0, jitter_ms: float = 0.0, loss_pct: float = 0.0,
              check: bool = True) -> subprocess.CompletedProcess[str]:
        """``tc qdisc replace ... netem`` on ``host``'s end of the link (its egress)."""
        args = ["tc", "qdisc", "replace", "dev", self.dev[host], "root", "netem"]
        if delay_ms or jitter_ms:
            args += ["delay", f"{delay_ms}ms"] + ([f"{jitter_ms}ms"] if jitter_ms else [])
        if loss_pct:
            args += ["loss", f"{loss_pct}%"]
        r = subprocess.run(["ip", "netns", "exec", self.ns[host], *args], capture_output=True, text=True)
        if check and r.returncode != 0:
            raise RuntimeError(f"tc netem on host {host}: {r.stderr.strip()}")
        return r

    def cut(self, host: str = "a") -> None:
        """Take ``host``'s end of the link down (nothing crosses any more)."""
        _ip("-n", self.ns[host], "link", "set", self.dev[host], "down")
