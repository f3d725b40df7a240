"""tools.dispersion: distributions against their closed-form moments, the run rule, the grid."""

import math

import numpy as np
import pytest
from scipy.special import ndtr

from tools import dispersion as ds


def _parse(**table):
    problems = []
    d = ds.parse(table, "p", problems)
    return d, problems


def _draws(d, n=5000, seed=3):
    return np.array([ds.run_values([d], seed, k)[0][0] for k in range(n)])


def test_uniform_and_normal_moments():
    u, p = _parse(distribution="uniform", low=-0.5, high=1.5)
    assert not p
    x = _draws(u)
    assert x.min() >= -0.5 and x.max() < 1.5
    # mean 0.5, variance (b - a)^2 / 12 = 1/3; 4 standard errors
    assert abs(x.mean() - 0.5) < 4 * math.sqrt(1 / 3 / len(x))
    assert abs(x.var() - 1 / 3) < 4 * math.sqrt(0.8 / len(x)) / 3  # var of s²: (κ − 1) σ⁴ / n, κ = 1.8
    nrm, _ = _parse(distribution="normal", mean=2.0, std=0.1)
    x = _draws(nrm)
    assert abs(x.mean() - 2.0) < 4 * 0.1 / math.sqrt(len(x)) and abs(x.std() - 0.1) < 4 * 0.1 / math.sqrt(2 * len(x))
    assert nrm.extremes == pytest.approx((1.7, 2.3))


def test_truncated_normal_against_its_closed_form_mean_and_variance():
    """Mean and variance of N(μ, σ²) restricted to [a, b] (Johnson, Kotz & Balakrishnan 1994, §10.1)."""
    mu, s, lo, hi = 0.2, 0.5, 0.0, 0.6
    d, p = _parse(distribution="truncnorm", mean=mu, std=s, low=lo, high=hi)
    assert not p
    a, b = (lo - mu) / s, (hi - mu) / s

    def phi(z: float) -> float:
        return math.exp(-z * z / 2) / math.sqrt(2 * math.pi)

    Z = ndtr(b) - ndtr(a)
    mean = mu + s * (phi(a) - phi(b)) / Z
    var = s * s * (1 + (a * phi(a) - b * phi(b)) / Z - ((phi(a) - phi(b)) / Z) ** 2)
    x = _draws(d)
    assert x.min() >= lo and x.max() <= hi
    assert abs(x.mean() - mean) < 4 * math.sqrt(var / len(x))
    assert abs(x.var() - var) < 4 * math.sqrt(2 / len(x)) * var  # kurtosis <= 3


def test_a_runs_values_depend_on_seed_and_index_only():
    d = [_parse(distribution="uniform", low=0, high=1)[0], _parse(distribution="normal", mean=0, std=1)[0]]
    a = [ds.run_values(d, 11, k) for k in range(5)]
    b = [ds.run_values(d, 11, k) for k in reversed(range(5))][::-1]
    assert a == b                                       # order does not matter
    assert a[3] == ds.run_values(d, 11, 3)               # nor the number of runs
    assert len({v for (vals, _) in a for v in vals}) == 10 and len({s for _, s in a}) == 5
    assert ds.run_values(d, 12, 3) != a[3]               # the seed does
    # the k-th child of SeedSequence(seed).spawn, as numpy makes it
    child = np.random.SeedSequence(11).spawn(5)[3]
    assert a[3][1] == int(child.generate_state(1, np.uint64)[0])
    assert 0 <= a[3][1] < 2**64


def test_grid_points_row_major_and_repeated():
    g1, _ = _parse(distribution="grid", values=[1.0, 2.0])
    g2, _ = _parse(distribution="grid", low=0.0, high=1.0, n=3)
    u, _ = _parse(distribution="uniform", low=0, high=1)
    assert g2.values == (0.0, 0.5, 1.0) and ds.grid_size([g1, u, g2]) == 6
    pts = [tuple(ds.run_values([g1, u, g2], 5, k)[0][i] for i in (0, 2)) for k in range(12)]
    assert pts[:6] == [(1.0, 0.0), (1.0, 0.5), (1.0, 1.0), (2.0, 0.0), (2.0, 0.5), (2.0, 1.0)]
    assert pts[6:] == pts[:6]
    assert ds.run_values([g1, u, g2], 5, 1)[0][1] != ds.run_values([g1, u, g2], 5, 7)[0][1]  # random part differs


@pytest.mark.parametrize("table, where", [
    ({"distribution": "gauss"}, "p.distribution"),
    ({"distribution": "uniform", "low": 1.0, "high": 1.0}, "p.low"),
    ({"distribution": "uniform", "low": 0.0}, "p.high"),
    ({"distribution": "normal", "mean": 0.0, "std": 0.0}, "p.std"),
    ({"distribution": "normal", "mean": 0.0, "std": 1.0, "low": 0.0}, "p.low"),
    ({"distribution": "truncnorm", "mean": 2.0, "std": 1.0, "low": 0.0, "high": 1.0}, "p.mean"),
    ({"distribution": "grid", "values": []}, "p.values"),
    ({"distribution": "grid", "low": 0.0, "high": 1.0, "n": 0}, "p.n"),
    ({"distribution": "uniform", "low": float("nan"), "high": 1.0}, "p.low"),
])
def test_bad_tables_are_refused_naming_the_key(table, where):
    d, problems = _parse(**table)
    assert d is None and problems and problems[0].startswith(where + ":"), problems
