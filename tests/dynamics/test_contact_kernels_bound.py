"""The compiled no-contact bound (dynamics.contact_kernels.coast_bound) against its reference and by hand.

:func:`dynamics.contact.coast_bound_rows` is the contact service's bound on Python floats (the adaptive step); the
kernel must equal it bit for bit over random payload points, walls and motions, with each of the three slack modes,
each term of :func:`dynamics.contact.surface_slack` deciding, points inside and outside their balls, and every way
out (the payload too fast, a point too fast, a span shorter than the step, a bound not finite). ``math.dist`` is
written out in the kernel (:func:`dynamics.contact_kernels.dist3`): it is held to CPython's over random coordinates
from subnormal to huge, and its special values. One case is checked by hand: a point closing on a wall must not
reach it within the span it is given.
"""

from __future__ import annotations

import math
import sys
from collections import Counter

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from dynamics import contact as dc
from dynamics import contact_kernels as ck

EYE = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0)
# (H_O, h, mass, I_min, I_max, coast_max, drift, accel_floor, pos_floor, margin), as the contact service passes them
SCALARS = (0.01, 0.001, 12000.0, 1.0e5, 1.5e5, 0.1, 0.01, 1.0e-3, 1.0e-6, 0.01)


def _body(rng: np.random.Generator, speed: float, rate: float) -> tuple[np.ndarray, tuple[float, ...]]:
    """A random body: CoM, R_WB (row-major), velocity, angular velocity in W, as 18 floats."""
    R = Rotation.random(random_state=rng.integers(1 << 31)).as_matrix()
    p = rng.normal(size=3)
    return R, (*p, *R.ravel(), *(rng.normal(size=3) * speed), *(rng.normal(size=3) * rate))


def _scene(rng: np.random.Generator, mode: int = 0) -> tuple:
    """Payload points, each with a ball and three walls about its position in L: in front of, inside or past them,
    beside the footprint; the motion mostly slow enough to coast, sometimes not."""
    speed = float(rng.choice([0.002, 0.02, 0.3], p=[0.45, 0.45, 0.1]))
    RT, T = _body(rng, speed, float(rng.choice([1e-4, 1e-2])))
    _, O = _body(rng, float(rng.choice([0.01, 15.0], p=[0.9, 0.1])), 1e-3)
    RL = Rotation.random(random_state=rng.integers(1 << 31)).as_matrix()
    pL = rng.normal(size=3)
    L = (*pL, *RL.ravel())
    points = []
    for _ in range(int(rng.integers(1, 5))):
        q = rng.normal(size=3)
        P_L = RL.T @ (np.array(T[:3]) + RT @ q - pL)
        walls = []
        if mode != 2:
            for _ in range(3):
                n = rng.normal(size=3)
                n /= np.linalg.norm(n)
                depth, radius = float(rng.uniform(0.005, 0.1)), float(rng.uniform(0.01, 0.3))
                delta = float(rng.uniform(-0.3, 0.3))  # in front of (< 0) or past the plane
                lat = np.cross(n, rng.normal(size=3))
                lat *= float(rng.uniform(0.0, 1.5 * radius)) / max(np.linalg.norm(lat), 1e-12)
                S = P_L + delta * n - lat
                walls.append((*S.tolist(), *n.tolist(), radius, depth))
        centre = P_L + rng.normal(size=3) * 0.3
        r = float(rng.choice([rng.uniform(0.0, 0.6), math.inf], p=[0.95, 0.05]))
        if rng.random() < 0.3:  # the point a few mm outside or inside its ball
            r = float(np.linalg.norm(P_L - centre)) - float(rng.uniform(-0.002, 0.005))
        points.append((q.tolist(), centre.tolist(), r, walls))
    F = tuple((rng.normal(size=6) * float(rng.choice([0.0, 10.0, 100.0]))).tolist())
    a_T, a_O, wd_O = (tuple((rng.normal(size=3) * s).tolist()) for s in (1e-3, 1e-4, 1e-6))
    scalars = (float(rng.choice([0.01, 0.1])), *SCALARS[1:])
    return T, O, L, F, a_T, a_O, wd_O, scalars, points


def _why(T, O, L, F, a_T, a_O, wd_O, scalars, mode, points) -> str:
    """Which way a refusal took, for the coverage count (recomputed here with numpy, independently of both)."""
    coast_max = scalars[5]
    if np.linalg.norm(T[12:15]) * coast_max > scalars[6]:
        return "payload too fast"
    R_WT = np.reshape(T[3:12], (3, 3))
    for q, *_ in points:
        P = np.array(T[:3]) + R_WT @ np.array(q)
        u = (np.array(T[12:15]) + np.cross(T[15:18], P - T[:3])) - (np.array(O[12:15]) + np.cross(O[15:18], P - O[:3]))
        if np.linalg.norm(u) * coast_max > 1.0:
            return "point too fast"
    return "span below the step"


def _kernel(T, O, L, F, a_T, a_O, wd_O, scalars, mode, points):
    return ck.coast_bound(T, O, L, F, a_T, a_O, wd_O, scalars, mode, *ck.bound_tables(points), 2.0)


@pytest.mark.parametrize("mode", [0, 1, 2])
def test_kernel_equals_the_reference_bit_for_bit(mode):
    rng = np.random.default_rng(20261128 + mode)
    seen: Counter[str] = Counter()
    for _ in range(1500):
        scene = _scene(rng, mode)
        args = (*scene[:8], mode, scene[8])
        ref = dc.coast_bound_rows(*args)
        got = _kernel(*args)
        assert got == ref, (got, ref)
        code, span = ref[0], ref[1]
        if code == 0:
            seen["coast"] += 1
            seen["capped" if span == args[7][5] else "short of a wall"] += 1
        else:
            seen[_why(*args)] += 1
    # every way through: coasting (capped or short of a wall), and each refusal
    assert seen["coast"] > 100 and seen["capped"] > 10 and seen["short of a wall"] > 10, seen
    assert all(seen[k] > 10 for k in ("payload too fast", "point too fast", "span below the step")), seen


def test_each_slack_term_and_way_out_is_exercised():
    """The random scenes reach each branch of the bound: each of surface_slack's three terms the largest, the
    ball's slack larger than the walls' and not, no time at all (slack ≤ 0), a point too fast and a span shorter than
    the step. Counted on the reference's own pieces, recomputed here."""
    rng = np.random.default_rng(7)
    terms: Counter[str] = Counter()
    for _ in range(600):
        T, O, L, F, a_T, a_O, wd_O, scalars, points = _scene(rng)
        R_WL = np.reshape(L[3:], (3, 3))
        R_WT = np.reshape(T[3:12], (3, 3))
        for q, ctr, r, walls in points:
            x = R_WL.T @ (np.array(T[:3]) + R_WT @ np.array(q) - np.array(L[:3]))
            ball = math.dist(x.tolist(), ctr) - r
            near = math.inf
            for sx, sy, sz, nx, ny, nz, radius, depth in walls:
                d = x - np.array([sx, sy, sz])
                dn = float(d @ np.array([nx, ny, nz]))
                lat = float(np.linalg.norm(d - dn * np.array([nx, ny, nz]))) - radius
                terms[["front", "past", "beside"][int(np.argmax([dn, -dn - depth, lat]))]] += 1
                near = min(near, max(dn, -dn - depth, lat))
            terms["ball wins" if ball > near else "walls win"] += 1
            terms["no slack"] += max(ball, near) <= 0.0
        args = (T, O, L, F, a_T, a_O, wd_O, scalars, 0, points)
        assert _kernel(*args) == dc.coast_bound_rows(*args)
    assert all(terms[k] > 10 for k in ("front", "past", "beside", "ball wins", "walls win", "no slack")), terms


def test_a_bound_not_finite_is_refused_as_the_reference_raises():
    rng = np.random.default_rng(11)
    T, O, L, F, a_T, a_O, wd_O, scalars, points = _scene(rng)
    T = (*T[:12], 0.0, 0.0, 0.0, *T[15:])
    for bad in ((math.inf, 0.0, 0.0), (math.nan, 0.0, 0.0)):
        args = (T, O, L, F, bad, a_O, wd_O, scalars, 1, points)
        assert _kernel(*args)[0] == 2
        with pytest.raises(ValueError, match="reach_time"):
            dc.coast_bound_rows(*args)


def test_a_point_closing_on_a_wall_does_not_reach_it_within_its_span():
    """By hand: the payload translating at v toward a floor (n = +z in L = W) d above it, nothing else moving or
    acting; whatever the bound's acceleration allowance, the point covers v · (span + h) < d − margin (mode 1: the
    distance beyond the margin is the slack), and the span is at least what the speed alone would leave with the
    allowance removed (half of it here)."""
    h, margin = SCALARS[1], SCALARS[9]
    for v, d in ((0.01, 0.5), (0.05, 0.1), (0.002, 0.03)):
        T = (0.0, 0.0, d, *EYE, 0.0, 0.0, -v, 0.0, 0.0, 0.0)
        O = (0.0, 0.0, -50.0, *EYE, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
        L = (0.0, 0.0, 0.0, *EYE)
        points = [([0.0, 0.0, 0.0], [0.0, 0.0, 0.0], 0.0, [(0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 10.0, 0.1)])]
        args = (T, O, L, (0.0,) * 6, (0.0,) * 3, (0.0,) * 3, (0.0,) * 3, SCALARS, 1, points)
        code, span, f_max, tau_max, _, _ = _kernel(*args)
        assert (code, span, f_max, tau_max) == dc.coast_bound_rows(*args)[:4]
        assert code == 0 and f_max == 1.0 and tau_max == 1.0
        assert v * (span + h) < d - margin
        assert span >= min(0.5 * (d - margin) / v - h, SCALARS[5])


@pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="dist3 is CPython 3.11's math.dist (3.12 changed it)")
def test_dist3_is_math_dist():
    rng = np.random.default_rng(3)
    for _ in range(20000):
        scale = 10.0 ** float(rng.choice([rng.uniform(-8, 3), rng.uniform(-320, -300), rng.uniform(290, 306)]))
        a = (rng.normal(size=6) * scale).tolist()
        if rng.random() < 0.2:
            a[1] = a[4]  # a zero difference
        assert ck.dist3(*a) == dc.dist3(*a) == math.dist(a[:3], a[3:]), a
    for a in ([5e-324, 0.0, 0.0, 0.0, 0.0, 0.0], [0.0] * 6, [math.inf, 1.0, 0.0, 0.0, 0.0, 0.0],
              [1.0, 2.0, 3.0, 1.0, 2.0, 3.0], [1e308, -1e308, 1e308, -1e308, 1e308, -1e308]):
        assert ck.dist3(*a) == math.dist(a[:3], a[3:]), a
    assert ck.dist3(math.nan, math.inf, 0.0, 0.0, 0.0, 0.0) == math.inf  # an infinity wins, as CPython's
    assert math.isnan(ck.dist3(math.nan, 1.0, 0.0, 0.0, 0.0, 0.0))


def test_compiled_dist3_is_its_reference_on_any_python():
    """The kernel's distance is the reference's (the pure-Python dist3) bit for bit, whatever math.dist does."""
    rng = np.random.default_rng(11)
    for _ in range(20000):
        scale = 10.0 ** float(rng.choice([rng.uniform(-8, 3), rng.uniform(-320, -300), rng.uniform(290, 306)]))
        a = (rng.normal(size=6) * scale).tolist()
        assert ck.dist3(*a) == dc.dist3(*a), a
    assert math.isnan(dc.dist3(math.nan, 1.0, 0.0, 0.0, 0.0, 0.0))
    assert dc.dist3(math.nan, math.inf, 0.0, 0.0, 0.0, 0.0) == math.inf
