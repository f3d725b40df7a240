"""A sweep's statistics and plots: the envelope edge (logistic fit), the sensitivity ranking,
histograms of peak loads.

Envelope edge
-------------
A run succeeds or fails (``ok``). Over two parameters ``x1``, ``x2`` the probability of
success is modelled as a logistic function of a full quadratic in the standardized
parameters (``z = (x − mean) / std``)::

    P(ok | x) = σ(β0 + β1 z1 + β2 z2 + β3 z1² + β4 z2² + β5 z1 z2),   σ(η) = 1 / (1 + e^−η)

— quadratic, because an envelope is usually bounded on both sides of a parameter (a
lateral offset fails to the left and to the right) — and the edge is the curve
``P = 0.5``. β is the maximum of the log-likelihood with a small ridge penalty
``λ/2 ‖β[1:]‖²`` (:func:`logistic_fit`, Newton's method = iteratively reweighted least
squares, with step halving). The penalty keeps β finite when the runs are separable —
a deterministic simulation with a sharp edge always is — and then puts the edge between
the two classes; on data that are not separable it changes β by ``O(λ/n)``.

Sensitivity ranking
-------------------
For each parameter alone, the share of an outcome's variation it explains through a
quadratic fit (:func:`sensitivity`): for success, McFadden's pseudo-R² of the
one-parameter quadratic logistic fit (1 − log L / log L₀); for a figure (a peak load, a
misalignment), the R² of a one-parameter quadratic least-squares fit — the correlation
ratio, an estimate of the first-order (Sobol) index of the parameter when the
conditional mean is smooth. Parameters are ranked by their share of success, then by
their mean share over the figures.

Plots (:func:`plot_sweep`): ``envelope`` (success and failure over the two most
influential parameters, the fitted edge and the 10 % / 90 % curves), ``peaks``
(histograms of the peak loads, all runs and the successful ones), ``sensitivity`` (the
shares as a table of bars); one PNG each and ``sweep.pdf`` with all of them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["PEAK_FIGURES", "EdgeFit", "fit_edge", "logistic_fit", "plot_sweep", "quadratic_design", "sensitivity"]

Array = NDArray[np.float64]


def _loglik(A: Array, y: Array, beta: Array) -> float:
    eta = A @ beta
    # log σ(η) = −log(1 + e^−η); log(1 − σ(η)) = −log(1 + e^η)
    return float(-np.sum(y * np.logaddexp(0.0, -eta) + (1.0 - y) * np.logaddexp(0.0, eta)))


def logistic_fit(A: Array, y: Array, ridge: float = 1e-3, max_iter: int = 200,
                 tol: float = 1e-10) -> tuple[Array, Array]:
    """Maximum penalized-likelihood logistic regression by IRLS (Newton) with step halving.

    Maximizes ``Σ [y log σ(Aβ) + (1 − y) log(1 − σ(Aβ))] − λ/2 ‖β[1:]‖²`` (the first
    column, the intercept, is not penalized).

    Parameters
    ----------
    A : ndarray, shape (n, p)
        Design matrix; column 0 is the intercept (ones).
    y : ndarray, shape (n,)
        0 or 1.
    ridge : float
        λ ≥ 0.
    max_iter, tol : int, float
        Newton iterations at most; stop when the step's largest component is below ``tol``.

    Returns
    -------
    beta : ndarray, shape (p,)
    cov : ndarray, shape (p, p)
        The inverse of the penalized information matrix at ``beta`` (the coefficients'
        covariance when ``λ`` is negligible).

    Raises
    ------
    ValueError
        On mismatched shapes, ``y`` not 0/1, or a negative ``ridge``.
    """
    A = np.asarray(A, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if A.ndim != 2 or y.shape != (A.shape[0],):
        raise ValueError(f"logistic_fit: A (n, p) and y (n,) expected, got {A.shape} and {y.shape}")
    if not np.all((y == 0.0) | (y == 1.0)):
        raise ValueError("logistic_fit: y must be 0 or 1")
    if not ridge >= 0.0:
        raise ValueError(f"logistic_fit: ridge must be >= 0, got {ridge!r}")
    p = A.shape[1]
    pen = np.full(p, float(ridge))
    pen[0] = 0.0
    beta = np.zeros(p)

    def objective(b: Array) -> float:
        return _loglik(A, y, b) - 0.5 * float(np.sum(pen * b * b))

    f = objective(beta)
    H = np.eye(p)
    for _ in range(max_iter):
        mu = 0.5 * (1.0 + np.tanh(0.5 * (A @ beta)))  # σ without overflow
        w = mu * (1.0 - mu)
        g = A.T @ (y - mu) - pen * beta
        H = (A * w[:, None]).T @ A + np.diag(pen) + 1e-12 * np.eye(p)
        step = np.linalg.solve(H, g)
        t = 1.0
        while True:  # step halving: the penalized log-likelihood never decreases
            trial = beta + t * step
            ft = objective(trial)
            if ft >= f - 1e-12 * abs(f) or t < 1e-10:
                break
            t *= 0.5
        beta, f = trial, ft
        if np.max(np.abs(t * step)) < tol:
            break
    return beta, np.linalg.inv(H)  # type: ignore[return-value]  # float64 in, float64 out (stubs: floating)


def quadratic_design(Z: Array) -> Array:
    """``[1, z_1 … z_k, z_1² … z_k², z_i z_j (i < j)]`` per row of ``Z`` (n, k): shape (n, 1 + 2k + k(k−1)/2)."""
    Z = np.asarray(Z, dtype=np.float64)
    n, k = Z.shape
    cols = [np.ones(n)] + [Z[:, i] for i in range(k)] + [Z[:, i] ** 2 for i in range(k)]
    cols += [Z[:, i] * Z[:, j] for i in range(k) for j in range(i + 1, k)]
    return np.column_stack(cols)


@dataclass(frozen=True)
class EdgeFit:
    """A quadratic logistic model of success over some parameters (module docstring).

    Attributes
    ----------
    names : tuple of str
    mean, std : ndarray, shape (k,)
        The standardization of each parameter.
    beta : ndarray
        Coefficients of :func:`quadratic_design` of the standardized parameters.
    """

    names: tuple[str, ...]
    mean: Array
    std: Array
    beta: Array

    def probability(self, X: Array) -> Array:
        """P(ok) at the rows of ``X`` (n, k), in the parameters' own units."""
        Z = (np.asarray(X, dtype=np.float64).reshape(-1, len(self.names)) - self.mean) / self.std
        return 0.5 * (1.0 + np.tanh(0.5 * (quadratic_design(Z) @ self.beta)))


def fit_edge(X: Array, ok: Array, names: Sequence[str], ridge: float = 1e-3) -> EdgeFit:
    """Fit :class:`EdgeFit` to runs ``X`` (n, k) with outcomes ``ok`` (n,) (module docstring)."""
    X = np.asarray(X, dtype=np.float64).reshape(len(ok), -1)
    mean = X.mean(axis=0)
    std = X.std(axis=0)
    std = np.where(std > 0, std, 1.0)
    beta, _ = logistic_fit(quadratic_design((X - mean) / std), np.asarray(ok, dtype=np.float64), ridge)
    return EdgeFit(tuple(names), mean, std, beta)


def _share_success(x: Array, ok: Array) -> float:
    """McFadden's pseudo-R² of the one-parameter quadratic logistic fit."""
    if ok.min() == ok.max():
        return 0.0
    s = x.std()
    if not s > 0:
        return 0.0
    A = quadratic_design(((x - x.mean()) / s)[:, None])
    beta, _ = logistic_fit(A, ok)
    p0 = ok.mean()
    ll0 = float(np.sum(ok * math.log(p0) + (1 - ok) * math.log(1 - p0)))
    return float(max(0.0, 1.0 - _loglik(A, ok, beta) / ll0))


def _share_figure(x: Array, f: Array) -> float:
    """R² of the one-parameter quadratic least-squares fit of ``f``."""
    if len(f) < 8:  # a quadratic through fewer points explains anything
        return 0.0
    s, var = x.std(), f.var()
    if not (s > 0 and var > 0):
        return 0.0
    A = quadratic_design(((x - x.mean()) / s)[:, None])
    coef, *_ = np.linalg.lstsq(A, f, rcond=None)
    return float(max(0.0, 1.0 - np.mean((f - A @ coef) ** 2) / var))


def sensitivity(params: Mapping[str, Array], ok: Array | None,
                figures: Mapping[str, Array]) -> list[tuple[str, dict[str, float]]]:
    """Each parameter's share of each outcome, ranked (module docstring).

    Parameters
    ----------
    params : mapping
        Parameter name -> its values over the runs (n,).
    ok : ndarray of bool, shape (n,), optional
        Success of each run (runs that failed with an error left out by the caller).
    figures : mapping
        Figure name -> values (n,); NaN where a run has none (left out of that figure's fit).

    Returns
    -------
    list of (name, shares)
        Most influential first; ``shares`` maps ``"ok"`` (when given) and each figure to a
        share in [0, 1].
    """
    out = []
    for name, x in params.items():
        x = np.asarray(x, dtype=np.float64)
        shares: dict[str, float] = {}
        if ok is not None and len(ok):
            shares["ok"] = _share_success(x, np.asarray(ok, dtype=np.float64))
        for fname, f in figures.items():
            f = np.asarray(f, dtype=np.float64)
            keep = np.isfinite(f) & np.isfinite(x)
            shares[fname] = _share_figure(x[keep], f[keep])
        out.append((name, shares))
    figs = list(figures)
    out.sort(key=lambda e: (-e[1].get("ok", 0.0), -float(np.mean([e[1][f] for f in figs])) if figs else 0.0))
    return out


# ---------------------------------------------------------------- plots
PEAK_FIGURES: dict[str, str] = {
    "interface_peak.force_N": "peak interface force [N]",
    "interface_peak.moment_Nm": "peak interface moment [N·m]",
    "joint_peak_Nm.max": "peak joint torque, largest joint [N·m]",
    "capture.v_rel_m_s": "relative speed at capture [m/s]",
    "latch_start.misalignment_m": "misalignment when the latches close [m]",
}
"""The figures :func:`plot_sweep` draws histograms of (each when its column exists)."""


def plot_sweep(columns: Mapping[str, Array], params: Sequence[str], out_dir: str | Path,
               labels: Mapping[str, str] | None = None, title: str = "sweep") -> dict[str, Any]:
    """The sweep's plots: ``envelope``, ``peaks``, ``sensitivity`` (PNG each) and ``sweep.pdf``.

    Parameters
    ----------
    columns : mapping
        The table's columns as arrays: every parameter, ``ok`` (bool), ``outcome`` (str),
        ``error`` (str or None) and the figures.
    params : sequence of str
        The parameter columns.
    out_dir : str or Path
    labels : mapping, optional
        Parameter -> axis label (name and unit).
    title : str

    Returns
    -------
    dict
        ``png`` (page -> path), ``pdf``, ``ranking`` (:func:`sensitivity`), ``edge``
        (the two parameters and the fit's coefficients, or why there is none).
    """
    from matplotlib.backends.backend_pdf import PdfPages
    from matplotlib.figure import Figure

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    labels = dict(labels or {})
    err = np.array([e is not None and e != "" for e in columns["error"]], dtype=bool)
    good = ~err
    ok = np.asarray(columns["ok"], dtype=bool)
    figs = {f: np.asarray(columns[f], dtype=np.float64)[good] for f in
            ("interface_peak.force_N", "interface_peak.moment_Nm", "joint_peak_Nm.max", "latch_start.misalignment_m")
            if f in columns}
    ranking = sensitivity({p: np.asarray(columns[p], dtype=np.float64)[good] for p in params}, ok[good], figs)
    pages: list[tuple[str, Any]] = []
    info: dict[str, Any] = {"ranking": ranking}

    # envelope
    fig = Figure(figsize=(8.27, 6.5))
    ax = fig.subplots()
    top = [name for name, _ in ranking[:2]]
    if len(top) == 1:
        top = top * 2
    x = np.asarray(columns[top[0]], dtype=np.float64)
    y = np.asarray(columns[top[1]], dtype=np.float64) if top[1] != top[0] else np.zeros_like(x)
    ax.scatter(x[good & ok], y[good & ok], s=14, marker="o", color="tab:green",
               label=f"success ({int((good & ok).sum())})")
    fail = good & ~ok
    ax.scatter(x[fail], y[fail], s=18, marker="x", color="tab:red", label=f"failure ({int(fail.sum())})")
    if err.any():
        ax.scatter(x[err], y[err], s=18, marker="s", facecolors="none", edgecolors="0.4",
                   label=f"error ({int(err.sum())})")
    note = ""
    if fail.any() and (good & ok).any() and top[0] != top[1]:
        edge = fit_edge(np.column_stack([x[good], y[good]]), ok[good], top)
        gx = np.linspace(np.nanmin(x), np.nanmax(x), 160)
        gy = np.linspace(np.nanmin(y), np.nanmax(y), 160)
        GX, GY = np.meshgrid(gx, gy)
        P = edge.probability(np.column_stack([GX.ravel(), GY.ravel()])).reshape(GX.shape)
        cs = ax.contour(GX, GY, P, levels=[0.1, 0.5, 0.9], colors=["0.5", "k", "0.5"],
                        linestyles=["--", "-", "--"], linewidths=[0.8, 1.5, 0.8])
        ax.clabel(cs, fmt={0.1: "P=0.1", 0.5: "edge P=0.5", 0.9: "P=0.9"}, fontsize=7)
        info["edge"] = {"parameters": top, "mean": edge.mean.tolist(), "std": edge.std.tolist(),
                        "beta": edge.beta.tolist(),
                        "misclassified": int(np.sum((edge.probability(np.column_stack([x[good], y[good]])) >= 0.5)
                                                    != ok[good]))}
    else:
        note = ("no edge: every run succeeded" if not fail.any() else "no edge: every run failed"
                if not (good & ok).any() else "no edge: one parameter")
        info["edge"] = {"parameters": top, "none": note}
    ax.set_xlabel(labels.get(top[0], top[0]))
    ax.set_ylabel(labels.get(top[1], top[1]) if top[1] != top[0] else "")
    ax.set_title(f"{title}: success over the two most influential parameters" + (f"\n({note})" if note else ""),
                 fontsize=10)
    ax.grid(True, lw=0.3)
    ax.legend(fontsize=8, loc="best")
    pages.append(("envelope", fig))

    # peaks
    names = [f for f in PEAK_FIGURES if f in columns]
    if names:
        fig = Figure(figsize=(8.27, 2.3 * len(names) + 0.8))
        axes = fig.subplots(len(names), 1, squeeze=False)[:, 0]
        for a, f in zip(axes, names, strict=True):
            v = np.asarray(columns[f], dtype=np.float64)
            allv, okv = v[good & np.isfinite(v)], v[good & ok & np.isfinite(v)]
            if len(allv):
                bins = np.histogram_bin_edges(allv, bins=min(30, max(5, len(allv) // 4)))
                a.hist(allv, bins=bins, color="0.75", label=f"all runs ({len(allv)})")
                a.hist(okv, bins=bins, color="tab:blue", alpha=0.7, label=f"successful ({len(okv)})")
                a.legend(fontsize=7)
            else:
                a.text(0.5, 0.5, "no values", transform=a.transAxes, ha="center")
            a.set_xlabel(PEAK_FIGURES[f], fontsize=8)
            a.set_ylabel("runs")
            a.grid(True, lw=0.3)
        fig.suptitle(f"{title}: peak loads and misalignment")
        fig.subplots_adjust(hspace=0.6, top=1 - 0.5 / (2.3 * len(names) + 0.8))
        pages.append(("peaks", fig))

    # sensitivity
    outcomes = (["ok"] if ranking and "ok" in ranking[0][1] else []) + list(figs)
    fig = Figure(figsize=(8.27, 1.0 + 0.45 * max(1, len(ranking)) * max(1, len(outcomes)) * 0.5 + 1.0))
    ax = fig.subplots()
    h = 0.8 / max(1, len(outcomes))
    ypos = np.arange(len(ranking))[::-1]
    for j, o in enumerate(outcomes):
        ax.barh(ypos + 0.4 - h * (j + 0.5), [s[o] for _, s in ranking], height=h,
                label="success" if o == "ok" else o)
    ax.set_yticks(ypos, [labels.get(n, n) for n, _ in ranking], fontsize=8)
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of the outcome's variation explained by the parameter alone (quadratic fit)")
    ax.set_title(f"{title}: sensitivity ranking (most influential at the top)", fontsize=10)
    ax.grid(True, axis="x", lw=0.3)
    ax.legend(fontsize=7, loc="lower right")
    fig.subplots_adjust(left=0.3)
    pages.append(("sensitivity", fig))

    info["png"] = {}
    for name, f in pages:
        path = out / f"{name}.png"
        f.savefig(path, dpi=110)
        info["png"][name] = str(path)
    info["pdf"] = str(out / "sweep.pdf")
    with PdfPages(info["pdf"]) as pdf:
        for _, f in pages:
            pdf.savefig(f)
    return info
