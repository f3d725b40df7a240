"""The compiled guides' wrench (dynamics.contact_kernels.guides_wrench) against its reference and a hand computation.

:func:`dynamics.contact.guides_wrench_rows` composes the float kernels (the poses, the relative
velocity, :func:`dynamics.contact.point_plane_rows`); the kernel must equal it bit for bit over
random guides and motions that put points in front of, inside, past and beside the walls, with a
linear and a Hertzian law, with and without friction. One point on one wall is also computed by
hand from the Hunt–Crossley and Coulomb formulas (independent of both).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from dynamics import contact as dc
from dynamics import contact_kernels as ck

LAWS = {"linear": dc.ContactLaw(k=2.0e5, exponent=1.0, alpha=20.0, mu_s=0.3, mu_k=0.2, v_stick=1e-3),
        "hertz, no friction": dc.ContactLaw(k=3.0e7, exponent=1.5, alpha=0.5),
        "hertz": dc.ContactLaw(k=3.0e7, exponent=1.5, alpha=0.5, mu_s=0.5, mu_k=0.1, v_stick=2e-3)}
MARGIN = 0.01


def _law_rows(law: dc.ContactLaw) -> tuple[float, ...]:
    return (law.k, law.exponent, law.alpha, law.mu_s, law.mu_k, law.v_stick)


def _rows(rng: np.random.Generator, spread: float) -> tuple[np.ndarray, tuple[float, ...]]:
    """A random body: CoM, rotation (row-major), velocity, angular velocity in W, as 18 floats."""
    R = Rotation.random(random_state=rng.integers(1 << 31)).as_matrix()
    p = rng.normal(size=3) * spread
    return R, (*p, *R.ravel(), *(rng.normal(size=3) * 0.02), *(rng.normal(size=3) * 0.01))


def _scene(rng: np.random.Generator) -> tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...], list, tuple]:
    """A payload with four points, each with three walls placed about the point's position (in L) so that it is
    in front of, inside or past them, or beside the footprint."""
    RT, T = _rows(rng, 1.0)
    _, O = _rows(rng, 1.0)
    RL = Rotation.random(random_state=rng.integers(1 << 31)).as_matrix()
    pL = rng.normal(size=3)
    L = (*pL, *RL.ravel())
    guides = []
    for _ in range(4):
        q = rng.normal(size=3)
        P_L = RL.T @ (np.array(T[:3]) + RT @ q - pL)
        walls = []
        for _ in range(3):
            n = rng.normal(size=3)
            n /= np.linalg.norm(n)
            depth, radius = float(rng.uniform(0.005, 0.05)), float(rng.uniform(0.01, 0.3))
            # δ = −(P − S)·n from −2 margin to past the depth; a lateral offset up to beyond the radius
            delta = float(rng.uniform(-2 * MARGIN, 1.2 * depth))
            lat = np.cross(n, rng.normal(size=3))
            lat *= float(rng.uniform(0.0, 1.3 * radius)) / max(np.linalg.norm(lat), 1e-12)
            S = P_L + delta * n - lat
            walls.append((*S.tolist(), *n.tolist(), radius, depth))
        balls = [(np.array(w[:3]) - 0.5 * w[7] * np.array(w[3:6]), math.hypot(w[6], 0.5 * w[7])) for w in walls]
        c = sum(b[0] for b in balls) / len(balls)
        r = max(float(np.linalg.norm(b[0] - c)) + b[1] for b in balls) + MARGIN
        guides.append((q.tolist(), c.tolist(), r * r, walls))
    cs = np.array([g[1] for g in guides])
    ctr = cs.mean(axis=0)
    reach = max(float(np.linalg.norm(g - ctr)) + math.sqrt(gg[2]) for g, gg in zip(cs, guides, strict=True))
    rho = max(float(np.linalg.norm(g[0])) for g in guides)
    return T, O, L, guides, (*ctr.tolist(), (reach + rho) ** 2)


@pytest.mark.parametrize("law", list(LAWS))
def test_kernel_equals_the_reference_bit_for_bit(law):
    rng = np.random.default_rng(20261128)
    acting = 0
    for _ in range(400):
        T, O, L, guides, near = _scene(rng)
        lead = float(rng.choice([0.0, 5e-4, 2e-3]))
        ref = dc.guides_wrench_rows(T, O, L, lead, LAWS[law], MARGIN, near, guides)
        active, power, F = ck.guides_wrench(T, O, L, lead, _law_rows(LAWS[law]), MARGIN, near,
                                            *ck.guide_tables(guides))
        assert (active, power, list(F)) == ref
        acting += active
    assert acting > 200  # most scenes have a wall acting (the comparison covers the law, not only the skips)


def test_far_payload_feels_nothing():
    rng = np.random.default_rng(3)
    T, O, L, guides, near = _scene(rng)
    far = (T[0] + 100.0, *T[1:])
    assert ck.guides_wrench(far, O, L, 0.0, _law_rows(LAWS["linear"]), MARGIN, near, *ck.guide_tables(guides)) \
        == (False, 0.0, (0.0,) * 6)
    assert dc.guides_wrench_rows(far, O, L, 0.0, LAWS["linear"], MARGIN, near, guides) == (False, 0.0, [0.0] * 6)


def test_one_point_on_one_wall_by_hand():
    """A point 2 mm into a floor (n = +z in L = W), sliding at 5 cm/s along x and closing at 1 cm/s: Hunt–Crossley
    F_n = k δ (1 + 3/2 α δ̇) up, Coulomb μ_k + (μ_s − μ_k) exp(−(s − v_s)/v_s) against the slip; the wrench about
    W's origin is P × f. Without lead, the orbiter at rest."""
    law = LAWS["linear"]
    P = np.array([0.3, -0.2, 0.998])  # the floor at z = 1
    v = np.array([0.05, 0.0, -0.01])
    T = (*P, *np.eye(3).ravel(), *v, 0.0, 0.0, 0.0)  # the payload's point is its CoM
    O = (0.0,) * 3 + tuple(np.eye(3).ravel()) + (0.0,) * 6
    L = (0.0, 0.0, 0.0, *np.eye(3).ravel())
    guides = [([0.0, 0.0, 0.0], [0.3, -0.2, 1.0], 1.0, [(0.3, -0.2, 1.0, 0.0, 0.0, 1.0, 0.1, 0.05)])]
    near = (0.3, -0.2, 1.0, 4.0)
    delta, ddot, s = 0.002, 0.01, 0.05
    Fn = law.k * delta * (1.0 + 1.5 * law.alpha * ddot)
    mu = law.mu_k + (law.mu_s - law.mu_k) * math.exp(-(s - law.v_stick) / law.v_stick)
    f = np.array([-mu * Fn, 0.0, Fn])
    expect = [*np.cross(P, f), *f]
    P_d = (Fn - law.k * delta) * ddot + mu * Fn * s
    for active, power, F in (ck.guides_wrench(T, O, L, 0.0, _law_rows(law), MARGIN, near, *ck.guide_tables(guides)),
                             dc.guides_wrench_rows(T, O, L, 0.0, law, MARGIN, near, guides)):
        assert active
        np.testing.assert_allclose(F, expect, rtol=1e-12, atol=1e-9)
        assert power == pytest.approx(P_d, rel=1e-12)
