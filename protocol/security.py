"""CurveZMQ for tcp: key pairs, server/client socket set-up, the allow list, who speaks for whom.

Keys are ZeroMQ certificate files written by :func:`write_keys` (``launch.py keys DIR``):
``NAME.key`` (public) and ``NAME.key_secret`` (public + secret) per name. The config's
``[security]`` table names them. Two layouts:

*one key per process* (``launch.py keys DIR --config CONFIG``, the stronger one)::

    [security]
    keys_dir = "keys"          # relative to the config file
    server = "server"          # the CURVE server pair of every subscriber, on every host
    [security.identities]      # key pair -> the services it speaks for
    launcher = ["launcher"]    # the launchers' pair (every host)
    orbiter = ["orbiter"]
    physics = ["arm", "contact"]   # a process group: one pair for the process

*one client key shared by every process* (the weaker one)::

    [security]
    keys_dir = "keys"
    server = "server"
    client = "client"          # key pair every process uses as a CURVE client
    allowed = ["client"]       # client public keys the server accepts (names in keys_dir)

Every subscriber (each process's SUB, the launcher's) is a CURVE server with the
``server`` pair and runs a ``zmq.auth`` thread authenticator (ZAP) that accepts a
publisher only if its public key is an allowed one, and sets the ZAP ``User-Id`` of its
messages to the key's name; every publisher (each process's PUB, which it binds) is a
CURVE client with its own pair that checks the subscriber's public key. (The roles of
CurveZMQ are independent of bind and connect; the subscriber is the server so that it
learns who published each message.) The control plane is the other way round: the
launcher's ROUTER is the server, each service's DEALER a client with its process's pair.

So a publisher without an allowed key fails the handshake and reaches nobody, and a
subscriber without the server's secret key is refused by every publisher, so it receives
nothing. With one key per process, a received sample is accepted only if the key that
signed its connection speaks for the envelope's ``sender``
(:meth:`protocol.provenance.SampleGate.impostor`, the ``User-Id`` read where
:mod:`protocol.bus` receives): a process holding the arm's key cannot publish in the
orbiter's name. With the shared client key any holder can speak for every service; only
the envelope's word and the timing rules of :mod:`protocol.provenance` remain. Every host
needs the ``server`` pair and the public keys of the others; with one key per process a
host needs the secret keys of its own processes only (and the launcher's). Binding a
non-loopback tcp address without keys is refused (:func:`check_bind`).
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from urllib.parse import urlsplit

import zmq
import zmq.auth
from zmq.auth.thread import ThreadAuthenticator
from zmq.utils import z85

from errors import BusError, ConfigError

__all__ = ["Security", "write_keys", "is_loopback", "is_loopback_host", "check_bind", "SECURITY_KEYS", "LAUNCHER_KEY",
           "identities_of"]

SECURITY_KEYS: dict[str, type | tuple[type, ...]] = {
    "keys_dir": str, "server": str, "client": str, "allowed": list, "identities": dict,
}
LAUNCHER_KEY = "launcher"
"""Name of the launchers' key pair and of the sender of their messages, in the one-key-per-process layout."""


def identities_of(processes: dict[str, tuple[str, ...]]) -> dict[str, list[str]]:
    """The ``[security.identities]`` table of one key pair per process (:func:`protocol.config.processes_of`)
    and one for the launchers."""
    return {LAUNCHER_KEY: [LAUNCHER_KEY], **{p: list(members) for p, members in processes.items()}}


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
    return is_loopback_host((parts.hostname or "").strip("[]"))


def is_loopback_host(host: str) -> bool:
    """Whether a host name or address is the loopback (``localhost``, 127.0.0.0/8, ``::1``)."""
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
    """CurveZMQ material for one process (see the module docstring for the files and layouts).

    Parameters
    ----------
    keys_dir : Path
        Directory of the key files.
    server, client : str
        Key pair names of the CURVE server (every subscriber, the launcher's ROUTER) and of this
        process's clients (its PUB, its DEALERs).
    allowed : tuple[str, ...]
        Names of the client public keys the servers accept.
    identities : dict[str, tuple[str, ...]]
        Key pair name -> the senders (services, ``launcher``) it speaks for; empty: the shared
        client key layout.
    """

    keys_dir: Path
    server: str = "server"
    client: str = "client"
    allowed: tuple[str, ...] = ("client",)
    identities: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @classmethod
    def from_table(cls, table: dict, base_dir: str | os.PathLike[str] = ".", client: str | None = None) -> Security:
        """From a config ``[security]`` table; ``keys_dir`` relative to ``base_dir``. With
        ``identities``, the client pair is the launchers' (:meth:`for_process` picks a process's)
        and every identity's key is allowed.

        Raises
        ------
        ConfigError
            An ``identities`` entry that is not a list of names.
        """
        kd = Path(table.get("keys_dir", "keys"))
        if not kd.is_absolute():
            kd = Path(base_dir) / kd
        ids: dict[str, tuple[str, ...]] = {}
        for key, names in (table.get("identities") or {}).items():
            if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
                raise ConfigError(f"security.identities.{key}: expected a list of service names, got {names!r}")
            ids[str(key)] = tuple(names)
        if ids:
            launcher = next((k for k, v in ids.items() if LAUNCHER_KEY in v), LAUNCHER_KEY)
            allowed = tuple(dict.fromkeys([*ids, *table.get("allowed", [])]))
            return cls(kd, table.get("server", "server"), client or launcher, allowed, ids)
        return cls(kd, table.get("server", "server"), client or table.get("client", "client"),
                   tuple(table.get("allowed", ["client"])))

    def for_process(self, members: Iterable[str]) -> Security:
        """The material of the process of ``members``: with identities, the client pair that speaks
        for all of them (ConfigError naming the first one no pair speaks for); else unchanged."""
        if not self.identities:
            return self
        names = list(members)
        for key, spoken in self.identities.items():
            if all(n in spoken for n in names):
                return replace(self, client=key)
        lone = next((n for n in names if not any(n in v for v in self.identities.values())), names[0])
        raise ConfigError(f"security.identities: no key pair speaks for {lone!r}"
                          + (f" together with {', '.join(n for n in names if n != lone)}" if len(names) > 1 else ""))

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
        """Make ``sock`` a CURVE server with the server key pair (before bind or connect)."""
        pub, sec = self._load(self.server, True)
        sock.curve_secretkey = sec
        sock.curve_publickey = pub
        sock.curve_server = True

    def apply_client(self, sock: zmq.Socket) -> None:
        """Make ``sock`` a CURVE client of the server with this process's key pair (before bind or connect)."""
        pub, sec = self._load(self.client, True)
        server_pub, _ = self._load(self.server, False)
        sock.curve_secretkey = sec
        sock.curve_publickey = pub
        sock.curve_serverkey = server_pub

    def start_authenticator(self, context: zmq.Context) -> ThreadAuthenticator:
        """Start the ZAP handler of ``context``: it accepts only the ``allowed`` client keys, and the
        ``User-Id`` of what a client sends is the name of its key."""
        names = {self._load(n, False)[0]: n for n in self.allowed}  # z85 public key -> its name

        class _Allow:
            def callback(self, domain: str, key: bytes) -> bool:
                return key in names

        class _Named(ThreadAuthenticator):
            def curve_user_id(self, client_public_key: bytes) -> str:
                return names[z85.encode(client_public_key)]

        auth = _Named(context)
        auth.start()
        auth.configure_curve_callback("*", credentials_provider=_Allow())
        return auth
