"""Shared helpers of the chain tests: random chains and states, a relative error, the rng fixture.

The Pinocchio oracle (models from the same data, conversions between its conventions and
ours) is :mod:`testkit.pin_oracle`, re-exported here for the tests that import it from
``conftest``.
"""

from __future__ import annotations

import numpy as np
import pytest

from dynamics import chain as ch
from dynamics import spatial as sp
from testkit.pin_oracle import (  # noqa: F401  (re-exported for the tests)
    base_T,
    pin_from_chain,
    pin_from_urdf,
    pin_point_jacobian,
    pin_q,
    pin_vdot_to_ours,
    swap_wv,
    sym_upper,
)


def random_chain(rng: np.random.Generator, n: int, *, floating: bool = True, prismatic: bool = True,
                 tree: bool = False) -> ch.ChainModel:
    """A random chain of n joints: random axes, offsets, masses, CoMs and inertias."""
    nb = n + 1
    names = [f"b{i}" for i in range(nb)]
    parent = [-1]
    for b in range(1, nb):
        if tree:  # depth-first order (as Pinocchio requires): the parent is on the path to b - 1
            path = [b - 1]
            while parent[path[-1]] >= 0:
                path.append(parent[path[-1]])
            parent.append(int(rng.choice(path)))
        else:
            parent.append(b - 1)
    jt = ["free" if floating else "fixed_base"]
    for _ in range(n):
        jt.append("prismatic" if prismatic and rng.random() < 0.3 else "revolute")
    X = np.zeros((nb, 4, 4))
    for b in range(nb):
        R = sp.quat_to_rotation(sp.quat_normalize(rng.normal(size=4)))
        X[b] = sp.pose(R, rng.uniform(-1.0, 1.0, 3))
    if floating:
        X[0] = np.eye(4)
    axes = rng.normal(size=(nb, 3))
    mass = rng.uniform(0.5, 20.0, nb)
    com = rng.uniform(-0.5, 0.5, (nb, 3))
    inertia = np.zeros((nb, 3, 3))
    for b in range(nb):
        R = sp.quat_to_rotation(sp.quat_normalize(rng.normal(size=4)))
        lam = np.sort(rng.uniform(0.1, 2.0, 3))
        lam[2] = min(lam[2], lam[0] + lam[1])
        inertia[b] = R @ np.diag(lam) @ R.T
        inertia[b] = 0.5 * (inertia[b] + inertia[b].T)
    return ch.chain_from_table(names, parent, jt, X, axes, mass, com, inertia)


def random_state(rng: np.random.Generator, model: ch.ChainModel, scale: float = 1.0):
    q = ch.neutral(model)
    if model.floating:
        q[:3] = rng.uniform(-2, 2, 3)
        q[3:7] = sp.quat_normalize(rng.normal(size=4))
        q[7:] = rng.uniform(-np.pi, np.pi, model.n)
    else:
        q[:] = rng.uniform(-np.pi, np.pi, model.n)
    v = scale * rng.normal(size=model.nv)
    return q, v


def rel_err(a, b, floor: float = 1e-300) -> float:
    """max|a − b| / max(max|b|, floor): relative error, with a scale floor where b may vanish."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    return float(np.abs(a - b).max() / max(np.abs(b).max(), floor))


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20260521)
