"""Simulation time: int64 nanoseconds, rates -> periods, one base tick (DESIGN §3).

Simulation time is an integer count of nanoseconds everywhere; floats appear only at
the edges (config rates in Hz, durations in s) and are converted exactly here or
refused. A set of service rates is admissible when

- every rate gives a whole number of nanoseconds (``1e9 / rate_hz`` exact);
- every period is a whole multiple of the base tick — the one the config declares,
  else the gcd of the periods;
- every period divides the longest one, so all services meet at the longest
  period's boundaries (a ``--duration`` run then ends with every service at the
  same simulation time).

Otherwise :class:`errors.ConfigError` names the offending rates.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from decimal import Decimal, InvalidOperation
from fractions import Fraction

from errors import ConfigError

__all__ = ["NS_PER_S", "MAX_NS", "period_ns", "seconds_to_ns", "check_seconds", "base_tick_ns", "check_rates",
           "align_up"]

NS_PER_S = 1_000_000_000
MAX_NS = 2**63 - 1
"""The latest simulation time, and the longest span, an int64 count of ns holds (292 years). [ns]"""


def _exact(x: float | int | str, name: str) -> Fraction:
    if isinstance(x, bool):
        raise ConfigError(f"{name}: expected a number, got {x!r}")
    try:
        # via str: the decimal the user wrote (0.001, not its binary neighbour)
        return Fraction(Decimal(str(x)))
    except (InvalidOperation, ValueError, TypeError) as err:
        raise ConfigError(f"{name}: expected a finite number, got {x!r}") from err


def period_ns(rate_hz: float | int, name: str = "rate_hz") -> int:
    """Period of a rate, exact in integer nanoseconds.

    Parameters
    ----------
    rate_hz : float or int
        Rate. [Hz]
    name : str
        Used in the error message (e.g. ``"services.arm.rate_hz"``).

    Returns
    -------
    int
        ``1e9 / rate_hz``. [ns]

    Raises
    ------
    ConfigError
        If the rate is not a positive finite number or its period is not a whole
        number of nanoseconds (the message names the rate).
    """
    r = _exact(rate_hz, name)
    if r <= 0:
        raise ConfigError(f"{name}: rate must be > 0 Hz, got {rate_hz!r}")
    p = NS_PER_S / r
    if p.denominator != 1:
        raise ConfigError(f"{name}: {rate_hz!r} Hz has no whole-nanosecond period (1e9/{rate_hz!r} = {float(p)!r} ns)")
    if p > MAX_NS:
        raise ConfigError(f"{name}: {rate_hz!r} Hz has a period of {float(p):.3g} ns, beyond int64 ns ({MAX_NS})")
    return int(p)


def seconds_to_ns(seconds: float | int, name: str = "seconds") -> int:
    """``seconds`` as integer ns, exact for the decimal written; ConfigError if not whole ns, < 0
    or beyond int64 ns (:data:`MAX_NS`, 292 years)."""
    s = _exact(seconds, name)
    ns = s * NS_PER_S
    if s < 0 or ns.denominator != 1:
        raise ConfigError(f"{name}: expected a non-negative whole number of ns, got {seconds!r} s")
    if ns > MAX_NS:
        raise ConfigError(f"{name}: {seconds!r} s is beyond int64 ns (at most {MAX_NS / NS_PER_S:.4g} s)")
    return int(ns)


def check_seconds(seconds: object, name: str, *, positive: bool = False) -> str | None:
    """The problem with a time in seconds that the runtime turns into int64 ns, or None.

    It must be a finite number (not a bool), ``>= 0`` (``> 0`` with ``positive``) and at most
    :data:`MAX_NS` ns; it need not be a whole number of ns (timeouts, periods of the wall clock).
    """
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds != seconds:
        return f"{name}: expected a number of seconds, got {seconds!r}"
    if seconds < 0 or (positive and seconds == 0):
        return f"{name}: expected {'> 0' if positive else '>= 0'}, got {seconds!r}"
    if seconds * NS_PER_S > MAX_NS:
        return f"{name}: {seconds!r} s is beyond int64 ns (at most {MAX_NS / NS_PER_S:.4g} s)"
    return None


def base_tick_ns(periods: Iterable[int]) -> int:
    """The gcd of the periods [ns] (ConfigError if there are none or one is not > 0)."""
    ps = list(periods)
    if not ps or any(not isinstance(p, int) or p <= 0 for p in ps):
        raise ConfigError(f"periods: expected positive ints, got {ps!r}")
    return math.gcd(*ps)


def check_rates(rates_hz: Mapping[str, float | int], base_tick: int | None = None) -> dict[str, int]:
    """Periods of named rates, after checking they share a base tick and divide the longest.

    Parameters
    ----------
    rates_hz : Mapping[str, float | int]
        Name (e.g. service) -> rate. [Hz]
    base_tick : int, optional
        Declared base tick [ns]; default the gcd of the periods.

    Returns
    -------
    dict[str, int]
        Name -> period. [ns]

    Raises
    ------
    ConfigError
        Listing (in ``problems``) every rate that has no whole-ns period, is not a
        multiple of the base tick, or does not divide the longest period.
    """
    problems: list[str] = []
    periods: dict[str, int] = {}
    for name, rate in rates_hz.items():
        try:
            periods[name] = period_ns(rate, f"{name}.rate_hz")
        except ConfigError as err:
            problems.extend(err.problems)
    if base_tick is not None and (not isinstance(base_tick, int) or not 0 < base_tick <= MAX_NS):
        problems.append(f"base_tick_ns: expected an int in 1..{MAX_NS}, got {base_tick!r}")
        base_tick = None
    if periods:
        tick = base_tick if base_tick is not None else base_tick_ns(periods.values())
        off_tick = [f"{n} ({rates_hz[n]!r} Hz)" for n, p in periods.items() if p % tick]
        if off_tick:
            problems.append(f"rates not whole multiples of the base tick {tick} ns: {', '.join(off_tick)}")
        longest_name = max(periods, key=lambda n: periods[n])
        longest = periods[longest_name]
        no_div = [f"{n} ({rates_hz[n]!r} Hz)" for n, p in periods.items() if longest % p]
        if no_div:
            problems.append(f"rates whose periods do not divide the longest, {longest_name} "
                            f"({rates_hz[longest_name]!r} Hz = {longest} ns): {', '.join(no_div)}")
    if problems:
        raise ConfigError("; ".join(problems), problems)
    return periods


def align_up(t_ns: int, period: int, origin: int = 0) -> int:
    """The first instant ``origin + k·period >= t_ns`` (k integer). [ns]"""
    if period <= 0:
        raise ConfigError(f"period: expected > 0 ns, got {period!r}")
    return origin + -((origin - t_ns) // period) * period
