"""Dispersions of a sweep: each parameter's distribution or grid, and every run's values from one seed.

A sweep (:mod:`tools.sweep`) runs a scenario many times; each run takes one value of
every dispersed parameter. Here are the distributions, read from a ``[[parameter]]``
table of the sweep file, and the rule that gives run ``k`` its values:

``uniform``
    ``low``, ``high``: every value in ``[low, high)`` equally likely.
``normal``
    ``mean``, ``std``.
``truncnorm``
    ``mean``, ``std``, ``low``, ``high``: the normal distribution restricted to
    ``[low, high]`` (scipy's ``truncnorm``, drawn by its inverse CDF).
``grid``
    ``values = [...]``, or ``low``, ``high``, ``n`` (``n`` evenly spaced values, ends
    included). The grid parameters of a sweep span their Cartesian product (row-major in
    file order: the last parameter varies fastest); run ``k`` takes grid point
    ``k mod G``, so the number of runs is a whole multiple of the ``G`` points.

Runs and seeds
--------------
Run ``k`` of a sweep with seed ``s`` has its own random stream,
``numpy.random.SeedSequence(s, spawn_key=(k,))`` (the ``k``-th child that
``SeedSequence(s).spawn`` would give): its values are drawn from it in file order, and its
*run seed* (the run's ``sim.seed``) is the stream's first 64-bit word. A run's values
depend on ``(s, k)`` only — not on the number of runs, the order in which runs finish or
the machine that runs them — so a sweep can be resumed, extended and any run re-created
alone. Pure: numpy and scipy, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["DISTRIBUTIONS", "Dispersion", "grid_size", "parse", "run_stream", "run_values"]

DISTRIBUTIONS: dict[str, tuple[str, ...]] = {
    # name: required keys (grid: values, or low/high/n)
    "uniform": ("low", "high"),
    "normal": ("mean", "std"),
    "truncnorm": ("mean", "std", "low", "high"),
    "grid": (),
}
KEYS = ("distribution", "low", "high", "mean", "std", "values", "n")
"""The keys of a ``[[parameter]]`` table this module reads."""

_Num = (int, float)


@dataclass(frozen=True, slots=True)
class Dispersion:
    """One parameter's distribution (module docstring).

    Attributes
    ----------
    distribution : str
        One of :data:`DISTRIBUTIONS`.
    low, high : float
        ``uniform``, ``truncnorm``: the bounds; ``normal``: ``mean ∓ 3 std``; ``grid``: the
        smallest and largest value.
    mean, std : float
        ``normal``, ``truncnorm`` (NaN otherwise).
    values : tuple of float
        ``grid``: its values, in order (empty otherwise).
    """

    distribution: str
    low: float
    high: float
    mean: float = math.nan
    std: float = math.nan
    values: tuple[float, ...] = ()

    def draw(self, rng: np.random.Generator) -> float:
        """One value from ``rng`` (not for a grid, whose value comes from the run's grid point)."""
        d = self.distribution
        if d == "uniform":
            return float(rng.uniform(self.low, self.high))
        if d == "normal":
            return float(rng.normal(self.mean, self.std))
        if d == "truncnorm":
            from scipy.stats import truncnorm
            a, b = (self.low - self.mean) / self.std, (self.high - self.mean) / self.std
            return float(truncnorm.ppf(rng.random(), a, b, loc=self.mean, scale=self.std))
        raise ValueError(f"draw: a {d!r} parameter has no random draw")

    @property
    def extremes(self) -> tuple[float, float]:
        """The two ends of its range: the bounds, ``mean ∓ 3 std`` for ``normal``, a grid's ends."""
        return self.low, self.high


def _number(table: Mapping[str, Any], key: str, where: str, problems: list[str]) -> float:
    v = table.get(key)
    if isinstance(v, bool) or not isinstance(v, _Num) or not math.isfinite(v):
        problems.append(f"{where}.{key}: expected a finite number, got {v!r}")
        return math.nan
    return float(v)


def parse(table: Mapping[str, Any], where: str, problems: list[str]) -> Dispersion | None:
    """The dispersion of one ``[[parameter]]`` table; None (and a line in ``problems``
    naming ``where.key`` and the value) when it is not valid."""
    d = table.get("distribution")
    if d not in DISTRIBUTIONS:
        problems.append(f"{where}.distribution: expected one of {', '.join(DISTRIBUTIONS)}, got {d!r}")
        return None
    n0 = len(problems)
    unused = [k for k in ("low", "high", "mean", "std", "values", "n") if k in table and k not in (
        DISTRIBUTIONS[d] if d != "grid" else (("values",) if "values" in table else ("low", "high", "n")))]
    for k in unused:
        problems.append(f"{where}.{k}: not a key of a {d!r} distribution (keys: "
                        f"{', '.join(DISTRIBUTIONS[d]) or 'values, or low, high, n'})")
    if d == "grid":
        if "values" in table:
            vals = table["values"]
            if (not isinstance(vals, list) or not vals
                    or not all(isinstance(x, _Num) and not isinstance(x, bool) and math.isfinite(x) for x in vals)):
                problems.append(f"{where}.values: expected a non-empty list of finite numbers, got {vals!r}")
                return None
            values = tuple(float(x) for x in vals)
        else:
            lo, hi = _number(table, "low", where, problems), _number(table, "high", where, problems)
            n = table.get("n")
            if isinstance(n, bool) or not isinstance(n, int) or n < 1:
                problems.append(f"{where}.n: expected a whole number of grid values >= 1, got {n!r}")
                return None
            if len(problems) > n0:
                return None
            values = tuple(float(x) for x in np.linspace(lo, hi, n)) if n > 1 else (lo,)
        if len(problems) > n0:
            return None
        return Dispersion("grid", min(values), max(values), values=values)
    vals = {k: _number(table, k, where, problems) for k in DISTRIBUTIONS[d]}
    if len(problems) > n0:
        return None
    if "std" in vals and not vals["std"] > 0:
        problems.append(f"{where}.std: expected > 0, got {table['std']!r}")
    if "low" in vals and not vals["low"] < vals["high"]:
        problems.append(f"{where}.low: expected < high ({table['high']!r}), got {table['low']!r}")
    if d == "truncnorm" and len(problems) == n0 and not vals["low"] <= vals["mean"] <= vals["high"]:
        problems.append(f"{where}.mean: expected within [low, high] = [{vals['low']}, {vals['high']}], "
                        f"got {table['mean']!r}")
    if len(problems) > n0:
        return None
    if d == "normal":
        return Dispersion(d, vals["mean"] - 3 * vals["std"], vals["mean"] + 3 * vals["std"], vals["mean"], vals["std"])
    return Dispersion(d, vals["low"], vals["high"], vals.get("mean", math.nan), vals.get("std", math.nan))


def grid_size(dispersions: Sequence[Dispersion]) -> int:
    """The number of grid points ``G`` (1 without a grid parameter)."""
    return math.prod(len(p.values) for p in dispersions if p.distribution == "grid")


def run_stream(seed: int, k: int) -> tuple[np.random.Generator, int]:
    """Run ``k``'s random stream and run seed (module docstring).

    Returns
    -------
    rng : numpy.random.Generator
    run_seed : int
        0 … 2**64 − 1.
    """
    ss = np.random.SeedSequence(int(seed), spawn_key=(int(k),))
    run_seed = int(ss.generate_state(1, np.uint64)[0])
    return np.random.default_rng(ss), run_seed


def run_values(dispersions: Sequence[Dispersion], seed: int, k: int) -> tuple[list[float], int]:
    """The values of run ``k`` (one per dispersion, in order) and its run seed.

    Grid values come from grid point ``k mod G`` (row-major, the last grid parameter
    fastest); the others are drawn from the run's stream in order.
    """
    if k < 0:
        raise ValueError(f"run index: expected >= 0, got {k!r}")
    rng, run_seed = run_stream(seed, k)
    sizes = [len(p.values) for p in dispersions if p.distribution == "grid"]
    g = k % math.prod(sizes) if sizes else 0
    index: list[int] = []
    for size in reversed(sizes):
        g, i = divmod(g, size)
        index.append(i)
    index.reverse()
    it = iter(index)
    out = [p.values[next(it)] if p.distribution == "grid" else p.draw(rng) for p in dispersions]
    return out, run_seed
