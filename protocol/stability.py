"""Stiff couplings across a coupling step: how slowly a spring–damper may be coupled and stay stable.

A force that one service computes and another applies travels on a flow port, coupled at
``H`` (:mod:`protocol.coupling`): the consumer applies the mean of the producer's values
over each interval, and the producer computes them from the consumer's state sample at the
interval's start, predicted (or held) to each of its steps. That is an explicit coupling:
it lags, and a lag feeds energy into a stiff spring. With enough physical damping the
coupled oscillation still decays; coupled too slowly, it grows.

:func:`energy_ratio` runs that exact scheme on the one-degree-of-freedom model of a coupling
(:class:`StiffCoupling`: two bodies, or one body and a massless producer such as the SVDS
arm, joined by a spring–damper) and returns how the energy changed over a number of the
spring's periods; :func:`stable_limit` finds the longest coupling period (a whole number of
both services' steps) at which it does not grow; :func:`check_stiff` turns that into the
line ``launch.py check`` prints. Service modules declare their stiff couplings with
``stiff_couplings(config, name) -> list[StiffCoupling]``. ``tests/protocol/test_stability.py``
checks the limit against the runtime itself: two toy services joined by a spring–damper,
run by the real scheduler just below and just above it.

:func:`critical_delay` is the other side of a stiff loop: a contact force measured on a rig and
fed back to a simulated body after a delay (the HIL contact loop, :mod:`hil.bridge`). A delay τ
on a spring k acts as a negative damper of about ``k τ``; the loop stays stable while the
contact's own damper outweighs it, up to the closed-form critical delay.

This module is pure (floats only; no sockets, no clock).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from errors import ConfigError

__all__ = ["StiffCoupling", "energy_ratio", "stable_limit", "check_stiff", "critical_delay"]

_MAX_INTERVALS = 2000  # at most this many coupling intervals per run: a growing oscillation shows well before


@dataclass(frozen=True)
class StiffCoupling:
    """A spring–damper closed through a coupled port (one degree of freedom: the stiffest one).

    Attributes
    ----------
    what : str
        What it is, for the message (``"latch spring, translation"``).
    topic : str
        The port the force travels on (an output of the service that declares it).
    state_topic : str
        The state the producer reads back: an output of the consumer, the model that takes
        ``topic`` as an input.
    k : float
        Stiffness. [N/m or N·m/rad]
    c : float
        Damping. [N·s/m or N·m·s/rad]
    m_producer : float
        Mass (or moment of inertia) of the body the producer integrates; 0 when it integrates
        none (a massless arm: the spring's other end is held by the producer). [kg or kg·m²]
    m_consumer : float
        Mass (or moment of inertia) of the body the consumer integrates. [kg or kg·m²]
    predict : int
        How the producer carries the consumer's state sample to its steps: 0 holds it,
        1 with its velocity, 2 with its velocity and acceleration (``between = "predict"``).
    mean : bool
        True: the consumer applies the mean over each interval (a flow port); False: it holds
        the value at the coupling instant (a state port, e.g. ``hil/feedback``).
    feedforward : bool
        True: a constraint rather than a spring. The producer makes its body follow the
        consumer's (a weld with Baumgarte's correction, seed 004 eq. 26): the force on its body
        is ``m_producer`` times the consumer's carried acceleration, plus ``k`` and ``c`` on the
        carried state, ``k = m β²``, ``c = 2 α m``. The acceleration term is an algebraic loop
        across the coupling with the gain ``m_producer / m_consumer``: it grows at every
        coupling when that exceeds 1.
    """

    what: str
    topic: str
    state_topic: str
    k: float
    c: float
    m_producer: float
    m_consumer: float
    predict: int = 2
    mean: bool = True
    feedforward: bool = False

    def __post_init__(self) -> None:
        for name in ("k", "c", "m_producer", "m_consumer"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0.0):
                raise ConfigError(f"{self.what}: {name} must be a finite number >= 0, got {v!r}")
        if self.k <= 0.0 or self.m_consumer <= 0.0:
            raise ConfigError(f"{self.what}: k and m_consumer must be > 0, got {self.k!r}, {self.m_consumer!r}")
        if self.predict not in (0, 1, 2):
            raise ConfigError(f"{self.what}: predict must be 0, 1 or 2, got {self.predict!r}")

    @property
    def omega(self) -> float:
        """The spring's natural frequency on the two bodies (the reduced mass). [rad/s]"""
        m = self.m_consumer if self.m_producer == 0.0 else 1.0 / (1.0 / self.m_producer + 1.0 / self.m_consumer)
        return math.sqrt(self.k / m)


def energy_ratio(c: StiffCoupling, h_producer: float, h_consumer: float, H: float, periods: float = 20.0) -> float:
    """The coupled oscillation's energy after ``periods`` of the spring's period, over its start.

    Runs the runtime's scheme (:mod:`protocol.coupling`, lockstep) on the model. A producer's
    step ``[t, t + h)`` selects the consumer's state sample at ``floor(t / H) · H``
    (:mod:`protocol.stepping`) and, at the step's end, computes from it (carried to ``t + h`` by
    :attr:`StiffCoupling.predict`) and from its own body the force for its next step, which it
    applies to its own body (constant over the step). So in the interval ``[T, T + H)`` the
    first value comes from the sample at ``T - H`` carried over ``H`` (it was computed at the
    end of the previous interval's last step), the others from the sample at ``T``. The
    consumer then integrates its body over the interval with the mean of the values (or,
    ``mean`` False, the interval's first value held) and publishes its state at ``T + H`` (its
    acceleration that of the interval). Each constant force is integrated exactly, as the
    bodies' integrators do.

    Parameters
    ----------
    c : StiffCoupling
    h_producer, h_consumer : float
        The two services' steps. [s]
    H : float
        The coupling period, a whole number of both steps. [s]
    periods : float
        How many of the spring's periods to run (at most 2,000 coupling intervals).

    Returns
    -------
    float
        Energy (kinetic + spring) at the end over at the start: < 1 decays, > 1 grows (``inf``
        once the motion has grown a millionfold: it diverges).
    """
    n_p = max(1, round(H / h_producer))
    hp = H / n_p
    k, cd = c.k, c.c
    massless = c.m_producer == 0.0
    mp, mc = c.m_producer, c.m_consumer
    xa = va = 0.0                    # producer's body (or the spring's anchor)
    xb, vb = 1e-3, 0.0               # consumer's body, stretched 1 mm from rest
    cur = prev = (xb, vb, 0.0)       # its samples at T and T - H (at t0 both the initial one)

    def carried(sample: tuple[float, float, float], tau: float) -> tuple[float, float]:
        x, v, a = sample
        if c.predict == 2:
            return x + v * tau + 0.5 * a * tau * tau, v + a * tau
        if c.predict == 1:
            return x + v * tau, v
        return x, v

    def energy() -> float:
        return 0.5 * (0.0 if massless else mp * va * va) + 0.5 * mc * vb * vb + 0.5 * k * (xb - xa) ** 2

    e0 = energy()
    n_int = min(_MAX_INTERVALS, max(10, math.ceil(periods * 2.0 * math.pi / c.omega / H)))
    for i in range(n_int):
        total = first = 0.0
        for j in range(n_p):
            src = prev if (j == 0 and i > 0) else cur
            xp, vp = carried(prev, H) if (j == 0 and i > 0) else carried(cur, j * hp)
            F_b = -k * (xp - xa) - cd * (vp - va)   # on the consumer's body; the producer's gets -F_b
            if c.feedforward:                       # the producer's body made to follow the consumer's acceleration
                F_b -= mp * src[2]
            if j == 0:
                first = F_b
            total += F_b
            if not massless:
                aa = -F_b / mp
                xa += va * hp + 0.5 * aa * hp * hp
                va += aa * hp
        F = total / n_p if c.mean else first
        ab = F / mc
        xb += vb * H + 0.5 * ab * H * H
        vb += ab * H
        prev, cur = cur, (xb, vb, ab)
        if not (abs(xb) + abs(vb) + abs(xa) + abs(va) < 1e6):   # grown by 1e9 at least (and before overflow)
            return math.inf
    return energy() / e0


def stable_limit(c: StiffCoupling, h_producer: float, h_consumer: float) -> float:
    """The longest coupling period at which :func:`energy_ratio` does not grow. [s]

    Candidates are whole multiples of ``lcm(h_producer, h_consumer)``: growing by 25 % from
    one step until one grows, then bisected between the last that did not and it (0.0 if even
    one step grows: the producer's own step is then too long).
    """
    unit = _lcm_s(h_producer, h_consumer)

    def grows(n: int) -> bool:
        return energy_ratio(c, h_producer, h_consumer, n * unit) > 1.0

    if grows(1):
        return 0.0
    lo, hi = 1, 1
    while True:
        nxt = max(hi + 1, int(hi * 1.25))
        if nxt * unit * c.omega > 8.0:  # far beyond any explicit scheme's reach: stop looking
            return hi * unit
        if grows(nxt):
            lo, hi = hi, nxt
            break
        hi = nxt
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if grows(mid):
            hi = mid
        else:
            lo = mid
    return lo * unit


def _lcm_s(a: float, b: float) -> float:
    ia, ib = round(a * 1e9), round(b * 1e9)
    return math.lcm(ia, ib) * 1e-9


def check_stiff(c: StiffCoupling, producer: str, periods: Mapping[str, int],
                services: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """``launch.py check``'s line for a stiff coupling coupled too slowly, or nothing.

    Parameters
    ----------
    c : StiffCoupling
    producer : str
        The service that declares it (computes the force).
    periods : Mapping[str, int]
        Coupling period of every output topic [ns] (:func:`protocol.coupling.coupling_periods`).
    services : Mapping[str, Mapping[str, Any]]
        Every service's role, ``period_ns`` and ports (as :func:`protocol.coupling.coupling_periods`):
        the consumer is the model that takes ``c.topic`` and produces ``c.state_topic``.

    Returns
    -------
    list of str
        One line naming the port, its coupling, the spring and the limit computed, or [] (also
        when the run has no such consumer, and when the spring's energy grows whatever the
        coupling — an undamped spring exchanged explicitly does — which no coupling period mends).
    """
    consumer = next((n for n, svc in services.items() if n != producer and svc.get("role") == "model"
                     and any(str(t) == c.topic for t, _ in svc.get("inputs", ()))
                     and any(str(t) == c.state_topic for t, _ in svc.get("outputs", ()))), None)
    if consumer is None or c.topic not in periods or producer not in services:
        return []
    H_ns = max(periods[c.topic], periods.get(c.state_topic, 0))
    hp, hc = int(services[producer]["period_ns"]) * 1e-9, int(services[consumer]["period_ns"]) * 1e-9
    if energy_ratio(c, hp, hc, H_ns * 1e-9) <= 1.0:
        return []
    limit = stable_limit(c, hp, hc)
    if limit == 0.0:
        if c.feedforward and c.m_producer > c.m_consumer:   # the constraint's algebraic loop diverges
            return [(f"services.{producer}: {c.topic} carries the {c.what}, an algebraic loop of gain "
                     f"{c.m_producer / c.m_consumer:.3g} (the producer's body {c.m_producer:.4g} over the consumer's "
                     f"{c.m_consumer:.4g}; > 1 diverges at any coupling): hold it with a spring instead")]
        return []  # it grows at every coupling, one step too (no damping): not the coupling's doing
    return [f"services.{producer}.coupling_hz: {c.topic} at {1e9 / H_ns:g} Hz ({H_ns / 1e6:g} ms) is too slow for "
            f"the {c.what} (k = {c.k:.3g}, c = {c.c:.3g}, {c.m_producer:.4g} and {c.m_consumer:.4g} on either "
            f"side, {c.omega / (2 * math.pi):.3g} Hz): the coupled oscillation grows above "
            f"{limit * 1e3:g} ms; couple it at {1.0 / limit:g} Hz or faster"]


def critical_delay(m: float, k: float, c: float) -> tuple[float, float]:
    """The longest delay of a spring–damper contact force fed back to a body before the loop grows.

    The loop ``m ẍ(t) = −k x(t − τ) − c ẋ(t − τ)`` (the body on one side, the contact's reaction
    measured and applied τ later) has the characteristic equation ``m s² + (c s + k) e^{−sτ} = 0``.
    Its roots cross the imaginary axis at ``s = iω`` with ``m ω² = |k + i c ω|``, i.e.
    ``ω² = (c² + √(c⁴ + 4 m² k²)) / (2 m²)``, when ``ω τ = atan(c ω / k)``: the critical delay
    ``τ_c = atan(c ω / k) / ω`` (Zebenay, Boge and Choukroun, arXiv:1309.3512, the delayed-contact
    loop of the EPOS rig; for light damping ``τ_c ≈ c / k``: the delay's negative damping ``k τ``
    against ``c``). With ``c = 0`` any delay grows (``τ_c = 0``).

    Parameters
    ----------
    m : float
        The body's mass along the contact normal, > 0. [kg]
    k, c : float
        The contact's stiffness (> 0) and damping (≥ 0). [N/m, N·s/m]

    Returns
    -------
    tau_c : float
        [s]
    omega : float
        The frequency at which the loop then oscillates. [rad/s]

    Raises
    ------
    ConfigError
        If a parameter is out of range (naming it and its value).
    """
    for name, v, ok in (("m", m, m > 0.0), ("k", k, k > 0.0), ("c", c, c >= 0.0)):
        if not (isinstance(v, (int, float)) and math.isfinite(v) and ok):
            raise ConfigError(f"critical_delay: {name} out of range, got {v!r}")
    w = math.sqrt((c * c + math.sqrt(c ** 4 + 4.0 * m * m * k * k)) / (2.0 * m * m))
    return math.atan2(c * w, k) / w, w
