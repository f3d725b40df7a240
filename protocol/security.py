"""CurveZMQ for tcp between hosts: key pairs, server/client socket set-up, the allow list.

Keys are ZeroMQ certificate files written by :func:`write_keys` (``launch.py keys DIR``):
``NAME.key`` (public) and ``NAME.key_secret`` (public + secret) per name. The config's
``[security]`` table names them::

    [security]
    keys_dir = "keys"          # relative to the config file
    server = "server"          # key pair of every bound socket (the CURVE servers), on every host
    client = "client"          # key pair this host's processes use as CURVE clients
    allowed = ["client"]       # client public keys the server accepts (names in keys_dir)

Every bound socket (each participant's PUB of the mesh, the launcher's control
ROUTER) is a CURVE server with the ``server`` pair, and its process runs a ``zmq.auth``
thread authenticator that accepts a client only if its public key is one of
``allowed``; every connecting socket is a CURVE client that checks the server's
public key. A peer without an allowed key fails the handshake, so it receives
nothing; a publisher without the server's secret key is refused by the clients, so
nothing it sends reaches a service. Every host therefore needs the ``server`` pair,
its ``client`` pair and the allowed public keys. Binding a non-loopback tcp address
without keys is refused (:func:`check_bind`).
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import zmq
import zmq.auth
from zmq.auth.thread import ThreadAuthenticator

from errors import BusError, ConfigError

__all__ = ["Security", "write_keys", "is_loopback", "check_bind", "SECURITY_KEYS"]

SECURITY_KEYS: dict[str, type | tuple[type, ...]] = {
    "keys_dir": str, "server": str, "client": str, "allowed": list,
}


def write_keys(directory: str | os.PathLike[str], names: tuple[str, ...] = ("server", "client")) -> list[Path]:
    """Write one CurveZMQ key pair per name into ``directory`` (created if needed).

    Returns
    -------
    list[Path]
        The public key files (``NAME.key``); secrets are ``NAME.key_secret`` (mode 0600).
    """
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    out = []
    for name in names:
        pub, sec = zmq.auth.create_certificates(d, name)
        os.chmod(sec, 0o600)
        out.append(Path(pub))
    return out


def is_loopback(url: str) -> bool:
    """Whether a ``tcp://host:port`` URL names a loopback host (non-tcp URLs count as local)."""
    parts = urlsplit(url)
    if parts.scheme != "tcp":
        return True
    host = (parts.hostname or "").strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_bind(url: str, security: Security | None) -> None:
    """Refuse (BusError naming the URL) to bind a non-loopback tcp address without keys."""
    if security is None and not is_loopback(url):
        raise BusError(f"bind {url!r}: a non-loopback tcp address needs CurveZMQ keys ([security] in the config)")


@dataclass
class Security:
    """CurveZMQ material for one host (see the module docstring for the files).

    Parameters
    ----------
    keys_dir : Path
        Directory of the key files.
    server, client : str
        Key pair names of the CURVE server and of this host's clients.
    allowed : tuple[str, ...]
        Names of the client public keys the server accepts.
    """

    keys_dir: Path
    server: str = "server"
    client: str = "client"
    allowed: tuple[str, ...] = ("client",)

    @classmethod
    def from_table(cls, table: dict, base_dir: str | os.PathLike[str] = ".", client: str | None = None) -> Security:
        """From a config ``[security]`` table; ``keys_dir`` relative to ``base_dir``."""
        kd = Path(table.get("keys_dir", "keys"))
        if not kd.is_absolute():
            kd = Path(base_dir) / kd
        return cls(kd, table.get("server", "server"), client or table.get("client", "client"),
                   tuple(table.get("allowed", ["client"])))

    def _load(self, name: str, secret: bool) -> tuple[bytes, bytes | None]:
        path = self.keys_dir / (f"{name}.key_secret" if secret else f"{name}.key")
        try:
            return zmq.auth.load_certificate(path)
        except (OSError, ValueError) as err:
            raise ConfigError(f"security: cannot load key {str(path)!r}: {err}") from err

    def problems(self, server_side: bool) -> list[str]:
        """Missing key files, one line each (empty if all present)."""
        need = [f"{self.client}.key_secret", f"{self.server}.key"]
        if server_side:
            need += [f"{self.server}.key_secret"] + [f"{a}.key" for a in self.allowed]
        return [f"security: key file {str(self.keys_dir / n)!r} not found" for n in need
                if not (self.keys_dir / n).is_file()]

    def apply_server(self, sock: zmq.Socket) -> None:
        """Make ``sock`` a CURVE server with the server key pair (before bind)."""
        pub, sec = self._load(self.server, True)
        sock.curve_secretkey = sec
        sock.curve_publickey = pub
        sock.curve_server = True

    def apply_client(self, sock: zmq.Socket) -> None:
        """Make ``sock`` a CURVE client of the server with this host's key pair (before connect)."""
        pub, sec = self._load(self.client, True)
        server_pub, _ = self._load(self.server, False)
        sock.curve_secretkey = sec
        sock.curve_publickey = pub
        sock.curve_serverkey = server_pub

    def start_authenticator(self, context: zmq.Context) -> ThreadAuthenticator:
        """Start the ZAP handler of ``context`` accepting only the ``allowed`` client keys."""
        allowed = frozenset(self._load(n, False)[0] for n in self.allowed)

        class _Allow:
            def callback(self, domain: str, key: bytes) -> bool:
                return key in allowed

        auth = ThreadAuthenticator(context)
        auth.start()
        auth.configure_curve_callback("*", credentials_provider=_Allow())
        return auth
