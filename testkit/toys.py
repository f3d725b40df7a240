"""Toy services for the runtime's tests, benchmarks and toy scenarios: a chain of point masses
joined by springs, one mass per service.

Service ``i`` integrates mass ``i`` (position ``x``, velocity ``v`` on a line) at its own
rate. The spring between masses ``i`` and ``i+1`` is computed once, by service ``i``,
and travels as the flow ``toy/spring{i}``: the force on mass ``i`` (mass ``i+1`` gets the
opposite). Service ``i`` applies over its step ``[t, t+h)`` exactly the value it
published stamped ``t`` (which holds over ``[t, t+h)``); service ``i+1`` applies the
overlap-weighted mean of the same samples over its own step (``Inputs.mean``). The
impulses therefore cancel and total momentum ``Σ m_i v_i`` is conserved to round-off
whatever the rates.

The force published at the end of a step, for the next interval, uses the
neighbour's latest state sample propagated linearly to the step end
(``x + v·(t - t_s)``): a first-order hold, so the coupled run is a discretization of the
continuous system with an error that shrinks with the slower period.

Config::

    [services.a]
    kind = "testkit.toys"
    rate_hz = 1000
    index = 0                  # which mass
    [toy]
    mass = [1.0, 4.0]          # kg, one per mass (the chain length)
    k = [400.0]                # N/m, springs between neighbours
    c = [0.0]                  # N·s/m, dampers beside them (optional)
    rest = [1.0]               # m, rest lengths
    x0 = [0.0, 1.1]            # m
    v0 = [0.0, 0.0]            # m/s
    out_dir = ""               # if set: each service writes NAME.npy, rows [t_s, x, v] per step
    fail_at = -1.0             # s; a service with index == fail_index raises at this time (tests)
    fail_index = -1
    fail_mode = "raise"        # "raise": the step raises; "nan": it diverges (its state NaN from fail_at on)
    busy = 0.0                 # s of wall time each step busy-waits (realtime overrun tests)
    events = false             # if true: service i publishes toy/event{i} (an event port) when its
                               # spring turns from stretched to compressed or back; service i+1 takes
                               # it; trajectory rows get two columns: events emitted, events seen

    [services.rec]             # role = "sink": records every message (or ``topics``) to out_dir/rec.rec
    kind = "testkit.toys"
    rate_hz = 1000
    role = "sink"
    [services.replay]          # role = "source": replays ``topics`` of a record in lockstep
    kind = "testkit.toys"
    rate_hz = 1000
    role = "source"
    replay = "out/rec.rec"
    topics = ["toy/state0", "toy/spring0"]
    [services.inj]             # role = "injector": publishes malformed messages on the toy topics
    kind = "testkit.toys"
    rate_hz = 1000
    role = "injector"
    [services.forger]          # role = "forger": well-formed forgeries of a topic (Forger: forge, producer, forge_hz)
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import msgpack
import numpy as np

from protocol.codec import envelope
from protocol.config import check_table
from protocol.messages import SCHEMAS, TopicSchema, register_schema
from protocol.service import Port, ServicePorts
from protocol.stability import StiffCoupling

MAX_MASSES = 8
for _i in range(MAX_MASSES):
    register_schema(f"toy/state{_i}", TopicSchema(f"berthsim.ToyState{_i}", 1, "state",
                                                  {"x": ("f8", ()), "v": ("f8", ())}))
    register_schema(f"toy/spring{_i}", TopicSchema(f"berthsim.ToySpring{_i}", 1, "flow",
                                                   {"F": ("f8", ()), "x": ("f8", (1,))}))
    register_schema(f"toy/event{_i}", TopicSchema(f"berthsim.ToyEvent{_i}", 1, "event", {"events": ("events", ())}))

TABLES = ("toy",)
OPTIONS = {"index": int, "role": ("model", "sink", "source", "injector", "forger"), "replay": str, "topics": list,
           "forge": str, "producer": str, "forge_hz": (int, float), "rounds": int,
           "forge_at": (int, float), "forge_t": (int, float)}
_NUMS = ("list", (int, float))
TOY_KEYS: dict[str, tuple[Any, Any]] = {
    "mass": (_NUMS, []), "k": (_NUMS, []), "c": (_NUMS, None), "rest": (_NUMS, []), "x0": (_NUMS, []),
    "v0": (_NUMS, []), "out_dir": (str, None), "fail_at": ((int, float), None), "fail_index": (int, None),
    "fail_mode": (("raise", "nan"), "raise"), "busy": ((int, float), None), "events": (bool, False),
}
"""``[toy]``: key -> (kind, default) (:func:`protocol.config.check_value`)."""
TABLE_KEYS = {"toy": TOY_KEYS}


def validate(config: dict[str, Any], name: str) -> list[str]:
    """Problems of ``[toy]`` and ``[services.NAME].index``."""
    out: list[str] = []
    toy = check_table(config, "toy", TOY_KEYS, out)
    n = len(toy["mass"])
    if not 2 <= n <= MAX_MASSES:
        out.append(f"toy.mass: expected 2..{MAX_MASSES} masses, got {n}")
    for key, size in (("k", n - 1), ("rest", n - 1), ("x0", n), ("v0", n), ("c", n - 1)):
        if toy[key] is not None and len(toy[key]) != size:
            out.append(f"toy.{key}: expected {size} values")
    svc = config["services"][name]
    if svc.get("role", "model") != "model":
        return out  # a sink, source, injector or forger (the role's kind: protocol.config)
    idx = svc.get("index")
    if not isinstance(idx, int) or not 0 <= idx < max(n, 1):
        out.append(f"services.{name}.index: expected an int in 0..{n - 1}, got {idx!r}")
    return out


def _chain_ports(i: int, n: int, events: bool) -> tuple[tuple[Port, ...], tuple[Port, ...]]:
    """Mass ``i`` of ``n``: its neighbour's state (right) and spring and events (left) in; its state, spring
    and events out."""
    ins: list[Port] = []
    if i < n - 1:
        ins.append(Port(f"toy/state{i + 1}", "state"))
    if i > 0:
        ins.append(Port(f"toy/spring{i - 1}", "flow"))
        if events:
            ins.append(Port(f"toy/event{i - 1}", "event"))
    outs = [Port(f"toy/state{i}", "state")]
    if i < n - 1:
        outs.append(Port(f"toy/spring{i}", "flow"))
        if events:
            outs.append(Port(f"toy/event{i}", "event"))
    return tuple(ins), tuple(outs)


class ChainMass:
    """Mass ``index`` of the chain (a :class:`protocol.service.ServiceModel`)."""

    def __init__(self, config: dict[str, Any], name: str, period_ns: int) -> None:
        toy = config["toy"]
        self.name = name
        self.period_ns = period_ns
        self.i = i = int(config["services"][name]["index"])
        self.n = n = len(toy["mass"])
        self.m = float(toy["mass"][i])
        self.x = float(toy["x0"][i])
        self.v = float(toy["v0"][i])
        self.right = i < n - 1
        self.left = i > 0
        if self.right:
            self.k = float(toy["k"][i])
            self.c = float(toy.get("c", [0.0] * (n - 1))[i])
            self.rest = float(toy["rest"][i])
            self.x_r0 = float(toy["x0"][i + 1])
            self.v_r0 = float(toy["v0"][i + 1])
        self.F_next = 0.0
        self.out_dir = toy.get("out_dir", "")
        self.fail_ns = int(float(toy.get("fail_at", -1.0)) * 1e9) if toy.get("fail_index", -1) == i else -1
        self.fail_nan = toy.get("fail_mode", "raise") == "nan"
        self.busy_ns = int(float(toy.get("busy", 0.0)) * 1e9)
        self.events = bool(toy.get("events", False))
        self.emitted = self.seen = 0
        self.inputs, self.outputs = _chain_ports(i, n, self.events)
        self.rows: list[tuple[float, ...]] = []

    def _row(self, t_ns: int) -> None:
        row = (t_ns * 1e-9, self.x, self.v)
        self.rows.append(row + (float(self.emitted), float(self.seen)) if self.events else row)

    def _outputs(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {f"toy/state{self.i}": {"x": self.x, "v": self.v}}
        if self.right:
            out[f"toy/spring{self.i}"] = {"F": self.F_next, "x": np.array([self.x])}
        return out

    def initial(self, t0_ns: int) -> dict[str, dict[str, Any]]:
        """Outputs at t0; the first spring force from the configured initial positions."""
        if self.right:
            self.F_next = self.k * (self.x_r0 - self.x - self.rest)
            if self.c:
                self.F_next += self.c * (self.v_r0 - self.v)
        self._row(t0_ns)
        return self._outputs()

    def step(self, t_ns: int, h_ns: int, u: Any) -> dict[str, dict[str, Any]]:
        """Constant force over the step: own spring (as published) minus the left one (its mean)."""
        if 0 <= self.fail_ns <= t_ns:
            if not self.fail_nan:
                raise RuntimeError(f"toy {self.name}: injected failure at t={t_ns} ns")
            self.v = math.nan  # diverged: its next state is not finite
        if self.busy_ns:
            end = time.perf_counter_ns() + self.busy_ns
            while time.perf_counter_ns() < end:
                pass
        h = h_ns * 1e-9
        F = self.F_next if self.right else 0.0
        if self.left:
            F -= u.mean(f"toy/spring{self.i - 1}", "F")
        a = F / self.m
        self.x += self.v * h + 0.5 * a * h * h
        self.v += a * h
        if self.left and self.events:
            self.seen += sum(len(s.body["events"]) for s in u.events(f"toy/event{self.i - 1}"))
        out = None
        if self.right:
            s = u.state(f"toy/state{self.i + 1}")
            dt = (t_ns + h_ns - s.t_ns) * 1e-9
            x_r = s.body["x"] + s.body["v"] * dt
            F_prev, self.F_next = self.F_next, self.k * (x_r - self.x - self.rest)
            if self.c:
                self.F_next += self.c * (s.body["v"] - self.v)
            if self.events and (F_prev > 0) != (self.F_next > 0):
                self.emitted += 1
                out = [{"kind": "stretched" if self.F_next > 0 else "compressed", "n": self.emitted}]
        self._row(t_ns + h_ns)
        outs = self._outputs()
        if out is not None:
            outs[f"toy/event{self.i}"] = {"events": out}
        return outs

    def close(self) -> None:
        """Write the trajectory if ``toy.out_dir`` is set."""
        if self.out_dir:
            np.save(Path(self.out_dir) / f"{self.name}.npy", np.array(self.rows, dtype=np.float64))


class Recorder:
    """A sink: keeps every (topic, payload) it sees; writes them to ``out_dir/NAME.rec`` (msgpack) at close."""

    def __init__(self, config: dict[str, Any], name: str) -> None:
        self.name = name
        self.topics = tuple(config["services"][name].get("topics", ()))
        self.out_dir = config["toy"].get("out_dir", "")
        self.seen: list[tuple[str, bytes]] = []

    def on_message(self, topic: str, payload: bytes) -> None:
        """Record one message."""
        self.seen.append((topic, payload))

    def close(self) -> None:
        """Write the record."""
        if self.out_dir:
            (Path(self.out_dir) / f"{self.name}.rec").write_bytes(msgpack.packb(self.seen, use_bin_type=True))


class Replayer:
    """A source: replays the ``topics`` of a recorder file in time order (re-simulation of the others)."""

    def __init__(self, config: dict[str, Any], name: str, period_ns: int) -> None:
        svc = config["services"][name]
        self.name = name
        self.period_ns = period_ns
        topics = tuple(svc["topics"])
        self.outputs = tuple(Port(t, SCHEMAS[t].kind) for t in topics)
        rec = msgpack.unpackb(Path(svc["replay"]).read_bytes(), raw=False)
        items = [(envelope(t, p)[3], t, p) for t, p in rec if t in topics]
        items.sort(key=lambda x: x[0])  # stable: per-topic order kept
        self._items = iter(items)

    def read(self) -> tuple[int, str, bytes] | None:
        """Next logged message, or None."""
        return next(self._items, None)


class Injector:
    """A source that publishes only malformed messages on the toy topics (it declares no outputs)."""

    def __init__(self, config: dict[str, Any], name: str, period_ns: int) -> None:
        self.name = name
        self.period_ns = period_ns
        self.outputs: tuple[Port, ...] = ()
        self._items = iter(garbage(np.random.default_rng(5), 200, period_ns))

    def read(self) -> tuple[int, str, bytes] | None:
        """Next malformed message, or None."""
        return next(self._items, None)


class Forger:
    """A source that publishes well-formed forgeries of another service's state topic (it declares no
    outputs): ``forge`` (the topic), ``producer`` (its producer's name), ``forge_hz`` (the topic's
    coupling rate), ``rounds`` (default 20). See :func:`forgeries`. With ``forge_at`` and ``forge_t``
    (s): one sample only, published at ``forge_at`` and stamped ``forge_t`` (:func:`future_forgery`)."""

    def __init__(self, config: dict[str, Any], name: str, period_ns: int) -> None:
        svc = config["services"][name]
        self.name = name
        self.period_ns = period_ns
        self.outputs: tuple[Port, ...] = ()
        H = round(1e9 / float(svc["forge_hz"]))
        if "forge_at" in svc:
            at, t = round(float(svc["forge_at"]) * 1e9), round(float(svc["forge_t"]) * 1e9)
            self._items = iter([future_forgery(str(svc["forge"]), str(svc["producer"]), H, at, t)])
            return
        self._items = iter(forgeries(str(svc["forge"]), str(svc["producer"]), H, int(svc.get("rounds", 20))))

    def read(self) -> tuple[int, str, bytes] | None:
        """Next forgery, or None."""
        return next(self._items, None)


FORGERY_KINDS = 5
"""Forgeries :func:`forgeries` sends in the producer's name (besides one per round in another's)."""


def forgeries(topic: str, producer: str, H: int, rounds: int) -> list[tuple[int, str, bytes]]:
    """Well-formed, finite samples of state ``topic`` (fields ``x``, ``v``) that are not the run's.

    Each round ``k`` (at ``t = k H``) a copy stamped like the producer's ``k``-th sample, with
    ``x`` moved by 5 m, from sender ``"x"``; at round 2, in the producer's name: a period of
    1e15 ns, a time off the coupling grid, ``t = -5`` ns, a sequence number of 10⁶, and a
    time after any short run's end (:data:`FORGERY_KINDS` of them).
    """
    from protocol.codec import encode

    def forged(sender: str, seq: int, t_ns: int, h_ns: int) -> bytes:
        return encode(topic, {"x": 5.0, "v": 0.0}, sender=sender, seq=seq, t_ns=t_ns, h_ns=h_ns)

    out = []
    for k in range(rounds):
        t = k * H
        out.append((t, topic, forged("x", k, t, H)))
        if k == 2:
            out += [(t, topic, forged(producer, k + 1, t + H, 10**15)),
                    (t, topic, forged(producer, k, t + H // 2, H)),
                    (t, topic, forged(producer, 0, -5, H)),
                    (t, topic, forged(producer, 10**6, t + 3 * H, H)),
                    (t, topic, forged(producer, 10**6, 10**6 * H, H))]
    return out


def future_forgery(topic: str, producer: str, H: int, at_ns: int, t_ns: int) -> tuple[int, str, bytes]:
    """One sample of state ``topic`` that passes every check of a sample's own fields: in the
    producer's name, with its coupling period ``H``, stamped ``t_ns`` on the grid (e.g. the run's end)
    with ``seq = t_ns / H``, ``x`` = 5 m; published at ``at_ns``, long before its producer gets there."""
    from protocol.codec import encode
    return at_ns, topic, encode(topic, {"x": 5.0, "v": 0.0}, sender=producer, seq=t_ns // H, t_ns=t_ns, h_ns=H)


def garbage(rng: np.random.Generator, rounds: int, period_ns: int) -> list[tuple[int, str, bytes]]:
    """Random bytes, wrong schema, NaN, wrong version, oversize and truncated bodies on toy topics."""
    from protocol.codec import encode
    from protocol.messages import MAX_PAYLOAD_BYTES
    good = {"F": 1.0, "x": np.zeros(1)}
    nan = msgpack.packb([1, "a", 10**6, 0, 10**6, 0, {"F": float("nan"), "x": np.zeros(1).tobytes()}])
    oversize = b"\x92" * (MAX_PAYLOAD_BYTES + 10)
    out = []
    for k in range(rounds):
        t = k * period_ns
        out += [
            (t, "toy/spring0", bytes(rng.integers(0, 256, 40, dtype=np.uint8))),
            (t, "toy/spring0", encode("toy/state1", {"x": 0.0, "v": 0.0}, sender="a", seq=10**6, t_ns=t,
                                      h_ns=10**6)),
            (t, "toy/spring0", nan),
            (t, "toy/state1", msgpack.packb([7, "b", 10**6, t, 10**7, 0, {"x": 0.0, "v": 0.0}])),
            (t, "toy/state1", encode("toy/state1", {"x": 0.0, "v": 0.0}, sender="b", seq=0, t_ns=t,
                                     h_ns=10**7)[:-2]),
        ]
        if k % 50 == 0:
            out.append((t, "toy/spring0", oversize))
            out.append((t, "toy/spring0", encode("toy/spring0", good, sender="a", seq=0, t_ns=t, h_ns=10**6)[:-3]))
    return out


def ports(config: dict[str, Any], name: str) -> ServicePorts:
    """Service ``name``'s ports, before it is built (:mod:`protocol.config`)."""
    svc = config["services"][name]
    role = svc.get("role", "model")
    if role == "source":
        return ServicePorts("source", (), tuple(Port(t, SCHEMAS[t].kind) for t in svc["topics"]))
    if role != "model":
        return ServicePorts("sink" if role == "sink" else "source", (), ())
    return ServicePorts("model", *_chain_ports(int(svc["index"]), len(config["toy"]["mass"]),
                                                bool(config["toy"].get("events", False))))


def build(config: dict[str, Any], name: str, period_ns: int) -> ChainMass | Recorder | Replayer | Injector | Forger:
    """The model (or the recorder sink / replay source) of service ``name``."""
    role = config["services"][name].get("role", "model")
    if role == "sink":
        return Recorder(config, name)
    if role == "source":
        return Replayer(config, name, period_ns)
    if role == "injector":
        return Injector(config, name, period_ns)
    if role == "forger":
        return Forger(config, name, period_ns)
    return ChainMass(config, name, period_ns)


def stiff_couplings(config: dict[str, Any], name: str) -> list[StiffCoupling]:
    """Mass ``i``'s spring–damper to mass ``i + 1``, closed through ``toy/spring{i}`` (:mod:`protocol.stability`):
    mass ``i`` (integrated here) and ``i + 1`` (by its own service), the neighbour's state carried with
    its velocity (first order)."""
    svc = config["services"][name]
    toy = config["toy"]
    if svc.get("role", "model") != "model" or int(svc["index"]) >= len(toy["mass"]) - 1:
        return []
    i = int(svc["index"])
    c = float(toy.get("c", [0.0] * len(toy["k"]))[i])
    return [StiffCoupling(f"toy spring {i}", f"toy/spring{i}", f"toy/state{i + 1}", float(toy["k"][i]), c,
                          float(toy["mass"][i]), float(toy["mass"][i + 1]), predict=1)]
