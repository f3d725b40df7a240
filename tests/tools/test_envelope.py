"""tools.envelope: the logistic fit against known logistics, the edge, the sensitivity shares, the plots."""

import re
from pathlib import Path

import numpy as np
import pytest

from tools import envelope as ev


def _sigma(x):
    return 1.0 / (1.0 + np.exp(-x))


def test_logistic_fit_recovers_a_known_logistic_within_its_standard_errors():
    rng = np.random.default_rng(4)
    n = 6000
    X = rng.normal(size=(n, 2))
    beta = np.array([0.4, 1.5, -0.8])
    A = np.column_stack([np.ones(n), X])
    y = (rng.random(n) < _sigma(A @ beta)).astype(float)
    b, cov = ev.logistic_fit(A, y, ridge=0.0)
    se = np.sqrt(np.diag(cov))
    assert np.all(np.abs(b - beta) < 4 * se), (b, se)
    # the standard errors are those of the model: Fisher information of the true β, computed here
    w = _sigma(A @ beta) * (1 - _sigma(A @ beta))
    se_true = np.sqrt(np.diag(np.linalg.inv((A * w[:, None]).T @ A)))
    assert np.allclose(se, se_true, rtol=0.1)
    # the score is zero at the maximum
    assert np.max(np.abs(A.T @ (y - _sigma(A @ b)))) < 1e-6


def test_the_edge_of_an_ellipse_and_of_separable_data():
    rng = np.random.default_rng(5)
    n = 4000
    X = rng.uniform(-2, 2, size=(n, 2))
    # a known quadratic logistic: P = σ(4 (1 - q)), q = x² + y² + x y: its edge the ellipse q = 1,
    # at r(θ) = 1 / sqrt(1 + cos θ sin θ)
    q = X[:, 0] ** 2 + X[:, 1] ** 2 + X[:, 0] * X[:, 1]
    y = rng.random(n) < _sigma(4.0 * (1.0 - q))
    fit = ev.fit_edge(X, y, ("a", "b"), ridge=0.0)
    for ang in np.linspace(0, 2 * np.pi, 12, endpoint=False):
        r = np.linspace(0.3, 1.8, 1501)
        P = fit.probability(np.column_stack([r * np.cos(ang), r * np.sin(ang)]))
        r_edge = r[np.argmin(np.abs(P - 0.5))]
        assert abs(r_edge - 1.0 / np.sqrt(1.0 + np.cos(ang) * np.sin(ang))) < 0.1, (ang, r_edge)
    # separable (a deterministic edge at |x| = 0.5): the ridge keeps β finite, the edge falls in the gap
    x = np.concatenate([np.linspace(-1, -0.6, 20), np.linspace(-0.4, 0.4, 20), np.linspace(0.6, 1, 20)])
    Z = np.column_stack([x, rng.uniform(-1, 1, len(x))])
    ok = np.abs(x) < 0.5
    fit = ev.fit_edge(Z, ok, ("x", "noise"), ridge=1e-3)
    assert np.all(np.isfinite(fit.beta))
    assert np.all((fit.probability(Z) >= 0.5) == ok)
    # and β is the penalized optimum: the penalized score vanishes there (the intercept is not penalized)
    A = ev.quadratic_design((Z - fit.mean) / fit.std)
    score = A.T @ (ok - _sigma(A @ fit.beta)) - 1e-3 * np.r_[0.0, fit.beta[1:]]
    assert np.max(np.abs(score)) < 1e-6 * max(1.0, np.max(np.abs(fit.beta)))


def test_logistic_fit_refuses_bad_input():
    with pytest.raises(ValueError, match="0 or 1"):
        ev.logistic_fit(np.ones((3, 1)), np.array([0.0, 0.5, 1.0]))
    with pytest.raises(ValueError, match="shape|expected"):
        ev.logistic_fit(np.ones((3, 1)), np.array([0.0, 1.0]))


def test_sensitivity_ranks_a_two_sided_effect_above_noise():
    rng = np.random.default_rng(6)
    n = 400
    lateral = rng.uniform(-1, 1, n)   # fails on both sides: no linear correlation with success
    rate = rng.uniform(-1, 1, n)      # drives the load linearly, not success
    noise = rng.uniform(-1, 1, n)
    ok = np.abs(lateral) < 0.5
    load = 3.0 * rate + 0.1 * rng.normal(size=n)
    assert abs(np.corrcoef(lateral, ok)[0, 1]) < 0.15  # a linear measure would miss it
    ranking = ev.sensitivity({"noise": noise, "rate": rate, "lateral": lateral}, ok, {"load": load})
    names = [n for n, _ in ranking]
    shares = dict(ranking)
    assert names[0] == "lateral" and shares["lateral"]["ok"] > 0.5
    assert shares["noise"]["ok"] < 0.05 and shares["rate"]["ok"] < 0.05
    assert shares["rate"]["load"] > 0.95 and shares["lateral"]["load"] < 0.05


def test_plot_sweep_writes_the_pages(tmp_path):
    rng = np.random.default_rng(7)
    n = 60
    a, b = rng.uniform(-1, 1, n), rng.uniform(-1, 1, n)
    ok = a * a + b * b < 0.5
    cols = {"a": a, "b": b, "ok": ok, "outcome": np.where(ok, "ok", "no latch"), "error": [None] * (n - 1) + ["x"],
            "interface_peak.force_N": 100 + 50 * a, "latch_start.misalignment_m": np.where(ok, 0.001, np.nan)}
    info = ev.plot_sweep(cols, ["a", "b"], tmp_path, labels={"a": "a [m]"})
    assert set(info["png"]) == {"envelope", "peaks", "sensitivity"}
    for p in info["png"].values():
        assert Path(p).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    pdf = Path(info["pdf"]).read_bytes()
    assert len(re.findall(rb"/Type\s*/Page\b", pdf)) == 3
    assert info["edge"]["parameters"] == ["a", "b"] and info["edge"]["misclassified"] <= 3
