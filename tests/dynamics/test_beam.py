"""dynamics.beam: clamped–free shape functions against their defining equations and published roots."""

import numpy as np
import pytest
from scipy.integrate import quad

from dynamics import beam as bm
from errors import ModelError

# Clamped–free roots of cos βL cosh βL = −1 as tabulated by Blevins, "Formulas for Natural
# Frequency and Mode Shape" (1979), table 8-1.
BLEVINS_BETA_L = (1.87510407, 4.69409113, 7.85475744, 10.99554073, 14.13716839)


def test_roots_match_published_table():
    for k, ref in enumerate(BLEVINS_BETA_L, start=1):
        assert abs(bm.clamped_free_beta_L(k) - ref) < 1e-8


@pytest.mark.parametrize("n", [1, 4, 10])
def test_eigenfunctions_satisfy_beam_equation_and_boundary_conditions(n):
    """φ'''' = β⁴ φ in the span, φ = φ' = 0 at the root, φ'' = φ''' = 0 at the tip (finite differences)."""
    L = 3.7
    k = n - 1
    beta = bm.clamped_free_beta_L(n) / L
    h = 2e-3 / beta

    def phi(x):
        return bm.shape_functions(np.atleast_1d(x), L, n)[0][k]

    x = np.array([0.3, 0.5, 0.8]) * L
    d4 = (phi(x + 2 * h) - 4 * phi(x + h) + 6 * phi(x) - 4 * phi(x - h) + phi(x - 2 * h)) / h ** 4
    np.testing.assert_allclose(d4, beta ** 4 * phi(x), rtol=1e-4, atol=1e-4 * beta ** 4)
    p, d1, d2 = bm.shape_functions(np.array([0.0, L]), L, n)
    assert abs(p[k, 0]) < 1e-12 and abs(d1[k, 0]) < 1e-12
    assert abs(d2[k, 1]) < 1e-8 * beta ** 2
    d2p = bm.shape_functions(np.array([L - h, L + h]), L, n)[2][k]
    d3 = (d2p[1] - d2p[0]) / (2 * h)
    assert abs(d3) < 1e-4 * beta ** 3
    # derivatives given by the module against finite differences of φ
    xm = np.array([0.4 * L])
    _, d1m, d2m = bm.shape_functions(xm, L, n)
    assert abs((phi(xm + h) - phi(xm - h))[0] / (2 * h) - d1m[k, 0]) < 1e-5 * beta
    assert abs((phi(xm + h) - 2 * phi(xm) + phi(xm - h))[0] / h ** 2 - d2m[k, 0]) < 1e-4 * beta ** 2


def test_eigenfunctions_orthonormal_by_adaptive_quadrature():
    L = 8.13
    def prod(x, k, j):
        phi = bm.shape_functions(np.array([x]), L, 4)[0][:, 0]
        return phi[k] * phi[j]

    for k in range(4):
        for j in range(4):
            val = quad(prod, 0.0, L, args=(k, j), epsabs=1e-11)[0]
            assert abs(val - (L if j == k else 0.0)) < 1e-8 * L


def test_beam_tables_stiffness_is_the_modal_stiffness():
    """For the eigenfunctions K = EI β_k⁴ L δ_kl and M_ee = ρA L δ_kl (∫φ''² = β⁴ L)."""
    b = bm.BeamLink(5.0, 3.0, 2.0e4, modes_y=3, modes_z=2, EI_z=5.0e4)
    t = bm.beam_tables(b)
    beta = np.array([bm.clamped_free_beta_L(k) for k in (1, 2, 3)]) / 5.0
    np.testing.assert_allclose(np.diag(t.K), np.concatenate([2e4 * beta ** 4, 5e4 * beta[:2] ** 4]) * 5.0, rtol=1e-10)
    np.testing.assert_allclose(t.M_ee0, 15.0 * np.eye(5), atol=1e-10 * 15.0)


def test_bad_beams_are_refused_with_the_field_named():
    with pytest.raises(ModelError, match="length"):
        bm.BeamLink(0.0, 1.0, 1.0)
    with pytest.raises(ModelError, match="EI_y"):
        bm.BeamLink(1.0, 1.0, -5.0)
    with pytest.raises(ModelError, match="modes_y"):
        bm.BeamLink(1.0, 1.0, 1.0, modes_y=20)
    with pytest.raises(ModelError, match="torsion modes need GJ"):
        bm.BeamLink(1.0, 1.0, 1.0, modes_torsion=1)
    with pytest.raises(ModelError, match="shape"):
        bm.BeamLink(1.0, 1.0, 1.0, shape="spline")
    with pytest.raises(ModelError, match="positive integer"):
        bm.clamped_free_beta_L(0)
