"""The spatial module's small float kernels against their ndarray specifications, and the callers that were
copies of them to the bit.

- ``skew_rows``: ``skew_rows(a)[k] @ b == np.cross(a[k], b)``, and row by row :func:`dynamics.spatial.skew`;
- ``shift_wrench_rows`` ``[τ − p × f; f]`` and ``refer_wrench_rows`` ``[τ + p × f; f]`` against ``np.cross``
  (bit for bit: ``np.cross`` of 3-vectors is the same products and difference), the moment's invariance
  (``τ_B + p_WoBo × f`` the same from every point) and :func:`dynamics.spatial.shift_wrench`;
- the functions rewritten on them (``rms.shoulder_reaction_rows``, ``rigid_body.wrench_about_origin``,
  ``wrench_about_mean_com``, ``mean_wrench_Wo``) equal to the bit, signed zeros included, to the formulas
  they had inline.
"""

from __future__ import annotations

import itertools
import struct
from types import SimpleNamespace

import numpy as np
import pytest

from dynamics import rigid_body as rb
from dynamics import rms
from dynamics import spatial as sp


def bits(x) -> bytes:
    """The IEEE bytes of a float vector (tells −0.0 from 0.0)."""
    return struct.pack(f"{len(x)}d", *[float(v) for v in x])


def vectors(rng: np.random.Generator, n: int, size: int) -> list[list[float]]:
    """n random vectors of ``size`` components over several decades, some with exact and signed zeros."""
    out = []
    for k in range(n):
        v = rng.normal(size=size) * 10.0 ** rng.integers(-3, 6, size=size)
        if k % 5 == 1:
            v[rng.integers(size)] = 0.0
        elif k % 5 == 2:
            v[rng.integers(size)] = -0.0
        elif k % 5 == 3:
            v[:] = 0.0
        out.append(v.tolist())
    return out


def test_skew_rows_is_the_cross_product_matrix():
    rng = np.random.default_rng(11)
    for shape in [(3,), (7, 3), (2, 4, 3)]:
        a = rng.normal(size=shape)
        b = rng.normal(size=shape)
        S = sp.skew_rows(a)
        assert S.shape == shape[:-1] + (3, 3)
        np.testing.assert_allclose(np.einsum("...ij,...j->...i", S, b), np.cross(a, b), rtol=0, atol=1e-15)
        np.testing.assert_allclose(S, -np.swapaxes(S, -1, -2), rtol=0, atol=0)  # skew-symmetric
        for idx in np.ndindex(shape[:-1]):
            np.testing.assert_array_equal(S[idx], sp.skew(a[idx]))


@pytest.mark.parametrize("seed", range(3))
def test_wrench_kernels_against_np_cross(seed):
    rng = np.random.default_rng(seed)
    for F, p in zip(vectors(rng, 40, 6), vectors(rng, 40, 3), strict=True):
        Fa, pa = np.array(F), np.array(p)
        spec_shift = np.concatenate([Fa[:3] - np.cross(pa, Fa[3:]), Fa[3:]])
        spec_refer = np.concatenate([Fa[:3] + np.cross(pa, Fa[3:]), Fa[3:]])
        assert bits(sp.shift_wrench_rows(F, p)) == bits(spec_shift)
        assert bits(sp.refer_wrench_rows(F, p)) == bits(spec_refer)
        assert bits(sp.shift_wrench(Fa, pa)) == bits(spec_shift)
        # the same wrench, one lever the other's opposite: equal (to the sign of a zero)
        np.testing.assert_array_equal(sp.refer_wrench_rows(F, p), sp.shift_wrench_rows(F, (-pa).tolist()))


def test_shifted_wrench_has_the_same_moment_about_every_point():
    """F about A moved to B (lever p_AoBo): its moment about Wo, ``τ + p × f``, is unchanged; refer with the same
    lever moves it back."""
    rng = np.random.default_rng(4)
    for _ in range(20):
        F = rng.normal(size=6) * [10, 10, 10, 100, 100, 100]
        pA, pB = rng.normal(size=3) * 5, rng.normal(size=3) * 5
        F_B = np.array(sp.shift_wrench_rows(F.tolist(), (pB - pA).tolist()))
        np.testing.assert_allclose(F_B[:3] + np.cross(pB, F_B[3:]), F[:3] + np.cross(pA, F[3:]), rtol=1e-12,
                                   atol=1e-12 * np.abs(F).max() * 10)
        back = sp.refer_wrench_rows(F_B.tolist(), (pB - pA).tolist())
        np.testing.assert_allclose(back, F, rtol=1e-12, atol=1e-12 * np.abs(F).max() * 10)


def test_callers_keep_their_inline_formulas_to_the_bit():
    rng = np.random.default_rng(7)
    Fs, ps, qs = vectors(rng, 60, 6), vectors(rng, 60, 3), vectors(rng, 60, 3)
    for k, (F, e, s) in enumerate(zip(Fs, ps, qs, strict=True)):
        if k % 4 == 0:
            s = [e[0], s[1], s[2]] if k % 8 else list(e)       # coincident components: levers of exact zeros
        m0, m1, m2, f0, f1, f2 = F
        r0, r1, r2 = s[0] - e[0], s[1] - e[1], s[2] - e[2]
        old = [-m0 + (r1 * f2 - r2 * f1), -m1 + (r2 * f0 - r0 * f2), -m2 + (r0 * f1 - r1 * f0), -f0, -f1, -f2]
        assert bits(rms.shoulder_reaction_rows(F, e, s)) == bits(old)
        Fa = np.array(F)
        old = np.concatenate([Fa[:3] + sp.cross3(e, Fa[3:]), Fa[3:]])
        assert bits(rb.wrench_about_origin(Fa, np.array(e))) == bits(old)
        assert bits(rb.wrench_about_origin(F, e)) == bits(old)
        # wrench_about_mean_com: τ − c̄ × f with c̄ the mean CoM over the step
        state = rb.RigidBodyState(np.array(e), np.array([1.0, 0.0, 0.0, 0.0]), np.array(s), np.zeros(3))
        h, mass = 0.01, 1234.5
        a = [f0 / mass, f1 / mass, f2 / mass]
        c0, c1, c2 = (e[i] + s[i] * (0.5 * h) + a[i] * (h * h / 6.0) for i in range(3))
        old = [m0 - (c1 * f2 - c2 * f1), m1 - (c2 * f0 - c0 * f2), m2 - (c0 * f1 - c1 * f0), f0, f1, f2]
        assert bits(rb.wrench_about_mean_com(F, state, mass, h)) == bits(old)


def test_mean_wrench_Wo_keeps_its_inline_formula_to_the_bit():
    rng = np.random.default_rng(8)
    Fs, ps = vectors(rng, 30, 6), vectors(rng, 30, 3)
    parts = [(SimpleNamespace(body={"F": np.array(F) if k % 2 else F, "p": np.array(p) if k % 3 else p}),
              int(rng.integers(1, 10_000_000))) for k, (F, p) in enumerate(zip(Fs, ps, strict=True))]
    t0 = t1 = t2 = f0 = f1 = f2 = 0.0
    for s, o in parts:
        a0, a1, a2, b0, b1, b2 = [float(x) for x in s.body["F"]]
        if b0 == b1 == b2 == a0 == a1 == a2 == 0.0:
            continue
        p0, p1, p2 = [float(x) for x in s.body["p"]]
        t0 += o * (a0 + (p1 * b2 - p2 * b1))
        t1 += o * (a1 + (p2 * b0 - p0 * b2))
        t2 += o * (a2 + (p0 * b1 - p1 * b0))
        f0 += o * b0
        f1 += o * b1
        f2 += o * b2
    h_ns = 10_000_000
    old = [t0 / h_ns, t1 / h_ns, t2 / h_ns, f0 / h_ns, f1 / h_ns, f2 / h_ns]
    assert bits(rb.mean_wrench_Wo(parts, "F", "p", h_ns)) == bits(old)


def test_kernels_and_callers_keep_the_signs_of_zeros():
    """Every wrench with moments in {0, −0, 1.5}, forces in {0, −0, 1.5, −2.5} and levers of exact zeros
    (coincident points): the same bits as the inline formulas and the np.cross specification (where a sum
    and a difference differ)."""

    vals = (0.0, -0.0, 1.5, -2.5)
    e = [1.0, -2.0, 0.5]
    levers = [[e[i] + (0.75 if bit else 0.0) for i, bit in enumerate(bs)] for bs in itertools.product((0, 1), repeat=3)]
    for F in itertools.product(*[vals[:3]] * 3, *[vals] * 3):
        Fa = np.array(F)
        m0, m1, m2, f0, f1, f2 = F
        for s in levers:
            r0, r1, r2 = s[0] - e[0], s[1] - e[1], s[2] - e[2]
            old = [-m0 + (r1 * f2 - r2 * f1), -m1 + (r2 * f0 - r0 * f2), -m2 + (r0 * f1 - r1 * f0), -f0, -f1, -f2]
            assert bits(rms.shoulder_reaction_rows(F, e, s)) == bits(old), (F, s)
            p = [r0, r1, r2]
            assert bits(sp.shift_wrench_rows(F, p)) == bits(np.concatenate([Fa[:3] - np.cross(p, Fa[3:]), Fa[3:]]))
            old = np.concatenate([Fa[:3] + sp.cross3(p, Fa[3:]), Fa[3:]])
            assert bits(sp.refer_wrench_rows(F, p)) == bits(old)
            assert bits(rb.wrench_about_origin(Fa, p)) == bits(old)
