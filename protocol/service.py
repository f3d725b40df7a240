"""The service contract: a model with explicit ports and a pure step (after Drake's systems).

A service is a *model* — an object satisfying :class:`ServiceModel` — run by a shell
that lives in :mod:`protocol` and is the same for every service. The shell owns the
sockets, simulation time, the lifecycle and the statistics; the model owns physics.
A model never opens a socket, reads a clock or sleeps.

Ports
-----
Every input and output is a :class:`Port`: a topic and a kind.

``state``
    A value that holds *at* an instant (poses, twists, joint angles). A sample's
    ``t_ns`` is that instant.
``flow``
    A value held constant over the producer's step (wrenches, commanded rates).
    A sample with ``t_ns = t_k`` and ``h_ns = h_p`` holds over ``[t_k, t_k + h_p)``.
``event``
    Discrete happenings (capture, latch, operator commands). A sample's body carries
    a (possibly empty) list of events that occurred in the producer's step ending at
    ``t_ns``.

Timing of outputs
-----------------
``model.initial(t0)`` returns the output bodies at ``t0``. ``model.step(t, h, u)``
advances the model from ``t`` to ``t + h`` and returns the output bodies of the step's
end ``t + h``: a state port's value at ``t + h``, a flow port's value held over the next
step ``[t + h, t + 2h)``, an event port's events of the step (an empty list or nothing
when none happened). The shell publishes each port at its *coupling period* ``H``, a
whole multiple of ``h`` set in the config (:mod:`protocol.coupling` is the rule): a
state port's value at each coupling instant, a flow port's mean over each coupling
interval, an event port's events of each interval. A model that has ``set_coupling``
is told the periods (``{topic: H}`` [ns]) before ``initial`` and may then leave out a
state body at a step that is not a coupling instant (:func:`protocol.coupling.is_due`).

The input rule (lockstep) is implemented by :mod:`protocol.stepping` and documented
there; in brief, for a consumer stepping ``t → t + h`` and a producer port coupled at
``H``:

- ``state``: the producer's sample at ``floor(t / H) · H`` (the latest at or before t),
  held or propagated by the consumer as the input port says (:attr:`Port.between`);
- ``flow``: every sample whose interval ``[t_k, t_k + H)`` overlaps ``[t, t + h)``,
  each with its overlap; the time-average over the step is their overlap-weighted sum
  divided by ``h``. A slower consumer thus receives the exact impulse of every faster
  sample; a faster consumer holds the covering one;
- ``event``: every event sample with ``t - h < t_ns <= t``.

It depends on timestamps only, never on arrival order.

State in a context
------------------
A model may declare ``new_context()`` (after Drake's Context): then it holds no state of its
own. What ``build`` and ``set_coupling`` set on the model are its parameters, which stepping
never changes; the context is its whole state, and the runtime holds it. The runtime asks for
one context when it takes the model (``ctx = model.new_context()``), then calls
``model.initial(t0, ctx)`` and ``model.step(t, h, ctx, u)``, which change ``ctx`` in place
and return the output bodies. A run saved at an instant (:func:`protocol.scheduler.snapshot`)
holds the contexts with the rest, and a model built afresh — from the same configuration or a
changed one — takes up the run where it was when put in the place of the running one
(:meth:`protocol.scheduler.Scheduler.replace_model` keeps the context; ``tools.sweep``'s runs
from a snapshot). A model without ``new_context`` (an FMU host, a device, a toy) is stepped as
``initial(t0)`` and ``step(t, h, u)`` and its attributes are its state.

:class:`BoundModel` is a model with its context, for tools and tests that step one directly.

Strides: a step over several periods where nothing happens
-----------------------------------------------------------
A model with a context may also declare ``stride(t, h, ctx, u) -> k`` (:class:`StridingModel`):
asked with the inputs ``u`` of its next step ``t → t + h``, the number ``k >= 1`` of its periods
from ``t`` it can take as one step ``step(t, k·h, ctx, u)`` with a result equal, bit for bit, to
``k`` steps of ``h`` (the same ``ctx`` after them, and the same output bodies at the end of each:
what the step returns) — provided every one of those steps would see the inputs ``u`` and no
event (an event sample whose ``events`` list is empty carries none: a producer coupled on a grid
sends one at each of its instants). The contact service's free flight between the berthing
guides is one (:mod:`services.contact`, the adaptive step). The scheduler in lockstep
(:meth:`protocol.scheduler.Scheduler.run_lockstep`) makes sure of the proviso
(:meth:`protocol.stepping.InputBuffer.hold`), ends a stride at the run's end and at the next
coupling instant of any of the model's output ports, and hands the returned bodies to the
ports' couplers once per period, so that what is published is what ``k`` steps publish. It
takes no stride for a model with an output port published every step (a coupling period of
one step, or ``log_full_rate``), in realtime, or when the run is paced (``speed > 0``).

A step that waits on a device
-----------------------------
A model whose step waits for an outside device's answer to what an earlier step sent (the ``hil``
bridge with ``[hil] pipeline = true``: the rig's reply to the previous step's frame) may declare
``waits_on_device() -> bool``: whether its next step would wait now (the reply is still on its
way). It must not read the clock or change the model. In lockstep the scheduler then steps the
other models of its process that are ready first, and this one when none is: the device works while
they step. The order changes nothing (the input rule); only the wall time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal, NamedTuple, Protocol, runtime_checkable

from errors import LifecycleError

PortKind = Literal["state", "flow", "event"]
PORT_KINDS: tuple[str, ...] = ("state", "flow", "event")


BETWEEN: tuple[str, ...] = ("hold", "predict")


@dataclass(frozen=True, slots=True)
class Port:
    """One input or output of a service: a bus topic and how its samples are consumed.

    Attributes
    ----------
    topic : str
    kind : {"state", "flow", "event"}
    between : {"hold", "predict"}
        A state input: what the consumer does between the producer's coupling instants —
        ``"hold"`` the sample, or ``"predict"`` it to the step's instant from the rates it
        carries (first order or better; the model does it, this declares it).
    """

    topic: str
    kind: PortKind = "state"
    between: str = "hold"

    def __post_init__(self) -> None:
        if self.kind not in PORT_KINDS:
            raise ValueError(f"Port {self.topic!r}: kind must be one of {PORT_KINDS}, got {self.kind!r}")
        if self.between not in BETWEEN:
            raise ValueError(f"Port {self.topic!r}: between must be one of {BETWEEN}, got {self.between!r}")


class Sample(NamedTuple):
    """One received message as a model sees it (immutable; a NamedTuple, cheap to build).

    Attributes
    ----------
    t_ns : int
        Simulation instant the values hold at (state, event) or the start of the
        interval they hold over (flow). [ns]
    h_ns : int
        The port's coupling period ``H``: a state holds over ``[t_ns, t_ns + H)``, a flow is
        the mean over it, an event sample carries the events of ``(t_ns − H, t_ns]``. [ns]
    sender : str
        Producing service name.
    seq : int
        Per-topic sequence number.
    body : Mapping[str, Any]
        Decoded, validated fields (arrays as read-only ``numpy.ndarray``).
    wall_ns : int
        Wall-clock send time (``time.time_ns()`` of the sender); 0 if unknown. [ns]
    """

    t_ns: int
    h_ns: int
    sender: str
    seq: int
    body: Mapping[str, Any] = MappingProxyType({})
    wall_ns: int = 0


@runtime_checkable
class Inputs(Protocol):
    """What one step sees, selected by the input rule of :mod:`protocol.stepping`."""

    def state(self, topic: str) -> Sample:
        """The state sample the rule selects; ``KeyError`` naming the topic if none is held."""
        ...

    def flow(self, topic: str) -> list[tuple[Sample, int]]:
        """The flow samples overlapping this step, each with its overlap [ns]; oldest first."""
        ...

    def mean(self, topic: str, field_name: str) -> Any:
        """Overlap-weighted time-average of ``body[field_name]`` over the step (impulse / h)."""
        ...

    def events(self, topic: str) -> list[Sample]:
        """The event samples of this step, oldest first."""
        ...


@runtime_checkable
class ServiceModel(Protocol):
    """What every service's model provides (see the module docstring for timing).

    Attributes
    ----------
    name : str
        Service name, also the ``sender`` of its messages.
    period_ns : int
        Step period. [ns]
    inputs, outputs : tuple[Port, ...]
        Declared ports. Only declared output topics may be returned from ``step``.
    """

    name: str
    period_ns: int
    inputs: tuple[Port, ...]
    outputs: tuple[Port, ...]

    def initial(self, t0_ns: int) -> dict[str, dict[str, Any]]:
        """Output bodies at ``t0_ns``, one per output topic."""
        ...

    def step(self, t_ns: int, h_ns: int, u: Inputs) -> dict[str, dict[str, Any]]:
        """Advance from ``t_ns`` to ``t_ns + h_ns``; return output bodies stamped ``t_ns + h_ns``."""
        ...


@runtime_checkable
class ContextModel(Protocol):
    """A model whose state is a context the runtime holds (the module docstring's "State in a context").

    Attributes are those of :class:`ServiceModel`; ``initial`` and ``step`` take the context.
    """

    name: str
    period_ns: int
    inputs: tuple[Port, ...]
    outputs: tuple[Port, ...]

    def new_context(self) -> Any:
        """A fresh context: the model's state as built (before ``initial``)."""
        ...

    def initial(self, t0_ns: int, ctx: Any) -> dict[str, dict[str, Any]]:
        """Output bodies at ``t0_ns``, one per output topic (``ctx`` set to the instant)."""
        ...

    def step(self, t_ns: int, h_ns: int, ctx: Any, u: Inputs) -> dict[str, dict[str, Any]]:
        """Advance ``ctx`` from ``t_ns`` to ``t_ns + h_ns``; return output bodies stamped ``t_ns + h_ns``."""
        ...


@runtime_checkable
class StridingModel(ContextModel, Protocol):
    """A model that can take several of its periods as one step (the module docstring's "Strides")."""

    def stride(self, t_ns: int, h_ns: int, ctx: Any, u: Inputs) -> int:
        """The number ``k >= 1`` of periods ``h_ns`` from ``t_ns`` that ``step(t_ns, k·h_ns, ctx, u)`` takes as
        ``k`` steps would, given the inputs ``u`` of the step ``t → t + h`` and no event over the others."""
        ...


def new_context(model: Any) -> Any:
    """The context the runtime holds for ``model``: ``model.new_context()`` if it declares one, else None."""
    make = getattr(model, "new_context", None)
    return make() if callable(make) else None


class BoundModel:
    """A model with the context it runs on, stepped as ``initial(t0)`` and ``step(t, h, u)`` whatever its form
    (what the runtime does for each model, for tools and tests that step one directly).

    Parameters
    ----------
    obj : ServiceModel | ContextModel
        The model; its other attributes (``name``, ``period_ns``, ports, parameters) are read through.
    ctx : object, optional
        The context to run on (e.g. one saved); default a fresh one (``obj.new_context()``), or None for a
        model without a context.

    Attributes
    ----------
    obj : ServiceModel | ContextModel
    ctx : object or None
        Its context: the model's whole state; None for a model whose attributes are its state.
    """

    __slots__ = ("obj", "ctx")

    def __init__(self, obj: Any, ctx: Any = None) -> None:
        self.obj = obj
        self.ctx = ctx if ctx is not None else new_context(obj)

    def __getattr__(self, name: str) -> Any:
        if name in BoundModel.__slots__:
            raise AttributeError(name)
        return getattr(self.obj, name)

    def initial(self, t0_ns: int) -> dict[str, dict[str, Any]]:
        """The model's outputs at ``t0_ns``."""
        if self.ctx is None:
            return self.obj.initial(t0_ns)
        return self.obj.initial(t0_ns, self.ctx)

    def step(self, t_ns: int, h_ns: int, u: Any) -> dict[str, dict[str, Any]]:
        """The model's step ``t_ns → t_ns + h_ns`` on :attr:`ctx`."""
        if self.ctx is None:
            return self.obj.step(t_ns, h_ns, u)
        return self.obj.step(t_ns, h_ns, self.ctx, u)


class ServicePorts(NamedTuple):
    """What a service module's optional ``ports(config, name)`` says of a configured service,
    before anything is built (:mod:`protocol.config` checks the run's topics, coupling periods,
    schedule and stiff couplings with it)."""

    role: str
    """``"model"``, ``"source"`` or ``"sink"``."""
    inputs: tuple[Port, ...]
    outputs: tuple[Port, ...]


@runtime_checkable
class Sink(Protocol):
    """Sees every message of ``topics`` (``()`` = all), undecoded; never steps.

    ``on_message(topic, payload)`` gets one message (the msgpack body, as on the wire).
    A sink may also have ``on_frames(frames: list[bytes])``: then it is handed whole
    frames (``topic\\0payload``) in batches instead (the logger does).
    """

    name: str
    topics: tuple[str, ...]

    def on_message(self, topic: str, payload: bytes) -> None:
        """Handle one message (the msgpack body, as on the wire)."""
        ...


@runtime_checkable
class Source(Protocol):
    """Publishes already-encoded messages in time order (replay)."""

    name: str
    period_ns: int
    outputs: tuple[Port, ...]

    def read(self) -> tuple[int, str, bytes] | None:
        """The next ``(t_ns, topic, payload)``, or None at the end."""
        ...


def role_of(obj: Any) -> str:
    """``"model"``, ``"sink"`` or ``"source"``.

    Raises
    ------
    LifecycleError
        Naming the type, if ``obj`` is none of them.
    """
    if hasattr(obj, "step") and hasattr(obj, "initial"):
        return "model"
    if hasattr(obj, "on_message"):
        return "sink"
    if hasattr(obj, "read"):
        return "source"
    raise LifecycleError(f"{type(obj).__name__}: neither a ServiceModel (initial/step), a sink (on_message) "
                         "nor a source (read)")
