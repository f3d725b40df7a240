"""Saha's UDU^T decomposition (dynamics.udu) against pinocchio.cholesky and dense linear algebra.

``pin.cholesky.decompose`` factors Pinocchio's M as U D Uᵀ (U unit upper triangular), the
same reverse elimination. Pinocchio orders the free base [v_B; ω_B] in the body frame, we
[ω_W; v_W]: with v_ours = T v_pin, M_pin = Tᵀ M T. Eliminating the joint columns first
commutes with T (it acts on the base rows only), so U's joint columns map by Tᵀ on the
base rows, D's joint entries are equal, and the base blocks agree once mapped.
"""

import numpy as np
import pinocchio as pin
import pytest
from conftest import base_T, pin_from_chain, pin_q, random_chain, random_state, rel_err, sym_upper

from dynamics import chain as ch
from dynamics import udu
from errors import SingularityError

TOL = 1e-9


def _pin_factors(pm, model, q):
    pd = pm.createData()
    pin.crba(pm, pd, pin_q(pm, model, q))
    pin.cholesky.decompose(pm, pd)
    M = sym_upper(pd.M)
    return np.array(pd.U), np.array(pd.D), M


@pytest.mark.parametrize("n", [1, 3, 6, 12])
def test_dense_rge_matches_pinocchio_cholesky(rng, n):
    model = random_chain(rng, n)
    pm = pin_from_chain(model)
    q, _ = random_state(rng, model)
    U_pin, D_pin, M_pin = _pin_factors(pm, model, q)
    U, d = udu.udu_decompose(M_pin)
    assert rel_err(U, U_pin) <= TOL
    assert rel_err(d, D_pin) <= TOL


@pytest.mark.parametrize("n", [1, 3, 6, 12])
def test_recursive_factors_fixed_base_equal_pinocchio(rng, n):
    for tree in (False, True):
        model = random_chain(rng, n, floating=False, tree=tree and n > 2)
        pm = pin_from_chain(model)
        q, _ = random_state(rng, model)
        U_pin, D_pin, _ = _pin_factors(pm, model, q)
        U, d = ch.mass_matrix_udu(model, ch.make_data(model), q)
        assert rel_err(U, U_pin) <= TOL
        assert rel_err(d, D_pin) <= TOL


@pytest.mark.parametrize("n", [1, 3, 6, 12])
def test_recursive_factors_floating_base_map_to_pinocchio(rng, n):
    model = random_chain(rng, n)
    pm = pin_from_chain(model)
    q, _ = random_state(rng, model)
    U_pin, D_pin, _ = _pin_factors(pm, model, q)
    data = ch.make_data(model)
    U, d = ch.mass_matrix_udu(model, data, q)
    # the factors reproduce our M
    M = ch.mass_matrix(model, data, q)
    assert rel_err(U @ np.diag(d) @ U.T, M) <= 1e-12
    assert np.allclose(np.tril(U, -1), 0.0) and np.allclose(np.diag(U), 1.0)
    T = base_T(model, q)
    T0 = T[:6, :6]
    # joint columns
    assert rel_err(d[6:], D_pin[6:]) <= TOL
    assert rel_err(U[6:, 6:], U_pin[6:, 6:]) <= TOL
    assert rel_err(T0.T @ U[:6, 6:], U_pin[:6, 6:]) <= TOL
    # base block: same articulated inertia once mapped, and its RGE equals Pinocchio's
    B = U[:6, :6] @ np.diag(d[:6]) @ U[:6, :6].T
    B_pin = U_pin[:6, :6] @ np.diag(D_pin[:6]) @ U_pin[:6, :6].T
    assert rel_err(T0.T @ B @ T0, B_pin) <= TOL
    U0, d0 = udu.udu_decompose(T0.T @ B @ T0)
    assert rel_err(U0, U_pin[:6, :6]) <= TOL
    assert rel_err(d0, D_pin[:6]) <= TOL


def test_recursive_solve_equals_dense_solve(rng):
    for floating in (True, False):
        model = random_chain(rng, 9, floating=floating, tree=True)
        data = ch.make_data(model)
        q, _ = random_state(rng, model)
        M = ch.mass_matrix(model, data, q)
        f = udu.saha_factor(model.parent, model.v_index, data.S, data.I_ref, model.floating)
        phi = rng.normal(size=model.nv)
        x = udu.saha_solve(f, model.parent, model.v_index, data.S, phi)
        assert rel_err(x, np.linalg.solve(M, phi)) <= TOL


def test_not_positive_definite_refused():
    A = np.diag([1.0, -2.0, 3.0])
    with pytest.raises(SingularityError, match="not positive definite"):
        udu.udu_decompose(A)
    with pytest.raises(SingularityError, match="M"):
        udu.spd_solve(np.diag([1.0, 0.0]), np.ones(2))


def test_degenerate_joint_is_a_singularity():
    """A thin rod spinning about its own axis, CoM on the axis: m̂ = 0, refused by name."""
    X = np.tile(np.eye(4), (2, 1, 1))
    model = ch.chain_from_table(["base", "needle"], [-1, 0], ["fixed_base", "revolute"], X,
                                [[0, 0, 0], [1.0, 0, 0]], [1.0, 1.0], [[0, 0, 0], [0.5, 0, 0]],
                                [np.eye(3), np.diag([0.0, 1.0, 1.0])])
    data = ch.make_data(model)
    with pytest.raises(SingularityError, match="needle"):
        ch.forward_dynamics(model, data, [0.3], [0.0], [1.0])
