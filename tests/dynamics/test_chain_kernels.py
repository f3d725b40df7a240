"""The compiled kernels (dynamics.chain_kernels) against the numpy reference they replace, and Pinocchio.

Random chains (serial and trees, floating and ground-based, with prismatic joints) and the SRMS
on its orbiter: kinematics, mass matrix, Newton–Euler, generalized forces and forward dynamics
equal to the numpy code to 1e-12 relative; the numpy reference itself against ``pin.aba`` /
``pin.crba`` (test_chain checks the public functions, the kernels, against Pinocchio).
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest
from conftest import (
    base_T,
    pin_from_chain,
    pin_q,
    pin_vdot_to_ours,
    random_chain,
    random_state,
    rel_err,
    sym_upper,
)

from dynamics import cases
from dynamics import chain as ch
from errors import ModelError, SingularityError

RTOL = 1e-12


def _cases(rng: np.random.Generator) -> list[ch.ChainModel]:
    out = [cases.srms_on_orbiter().model]
    for n, floating, tree in ((1, True, False), (6, True, False), (6, False, False), (12, True, True),
                              (9, False, True)):
        out.append(random_chain(rng, n, floating=floating, tree=tree))
    return out


def test_kernels_equal_the_numpy_reference(rng):
    for model in _cases(rng):
        for _ in range(3):
            q, v = random_state(rng, model)
            tau = rng.normal(size=model.nv)
            vdot = rng.normal(size=model.nv)
            F = rng.normal(size=(model.nb, 6))
            d_k, d_n = ch.make_data(model), ch.make_data(model)
            M_k = ch.mass_matrix(model, d_k, q).copy()
            M_n = ch.mass_matrix_numpy(model, d_n, q).copy()
            assert rel_err(M_k, M_n) < RTOL
            for name in ("X_WB", "com_W", "S", "I_ref", "p_ref"):
                assert rel_err(getattr(d_k, name), getattr(d_n, name)) < RTOL, name
            assert rel_err(ch._rnea_bias(model, d_k, v), ch._rnea_bias_numpy(model, d_n, v)) < RTOL
            assert rel_err(ch._rnea_bias(model, d_k, v, vdot), ch._rnea_bias_numpy(model, d_n, v, vdot)) < RTOL
            assert rel_err(ch._gen_forces(model, d_k, F), ch._gen_forces_numpy(model, d_n, F)) < RTOL
            for F_ext in (None, F):
                a = ch.forward_dynamics(model, d_k, q, v, tau, F_ext).copy()
                b = ch.forward_dynamics_numpy(model, d_n, q, v, tau, F_ext).copy()
                assert rel_err(a, b) < RTOL, (model.names, F_ext is None)


def test_kernel_forward_dynamics_inverts_inverse_dynamics(rng):
    """τ from the Newton–Euler kernel at the kernel's v̇ gives back the applied τ (and F_ext), to round-off
    of the largest inertial term ``M v̇`` (the orbiter's 1e5 kg against unit torques)."""
    for model in _cases(rng):
        q, v = random_state(rng, model)
        tau = rng.normal(size=model.nv)
        F = rng.normal(size=(model.nb, 6))
        data = ch.make_data(model)
        vd = ch.forward_dynamics(model, data, q, v, tau, F).copy()
        floor = float(np.abs(ch.mass_matrix(model, data, q) @ vd).max())
        assert rel_err(ch.inverse_dynamics(model, data, q, v, vd, F), tau, floor) < 1e-12


@pytest.mark.parametrize("floating", [True, False])
def test_numpy_reference_matches_pinocchio(rng, floating):
    """The reference stays checked on its own: M against pin.crba, v̇ against pin.aba (as test_chain does
    for the public functions, which now run the kernels)."""
    for n, tree in ((6, False), (12, True)):
        model = random_chain(rng, n, floating=floating, tree=tree)
        pm = pin_from_chain(model)
        pd = pm.createData()
        data = ch.make_data(model)
        for _ in range(3):
            q, v = random_state(rng, model)
            tau = rng.normal(size=model.nv)
            qp = pin_q(pm, model, q)
            T = base_T(model, q)
            Ti = np.linalg.inv(T)
            M_pin = Ti.T @ sym_upper(pin.crba(pm, pd, qp)) @ Ti
            assert rel_err(ch.mass_matrix_numpy(model, data, q), M_pin) <= 1e-9
            a_pin = pin_vdot_to_ours(model, q, v, pin.aba(pm, pd, qp, Ti @ v, T.T @ tau))
            assert rel_err(ch.forward_dynamics_numpy(model, data, q, v, tau), a_pin) <= 1e-9


def test_singular_chain_raises_singularity_error():
    """A massless, inertialess tip body: its articulated pivot vanishes; the error names the body."""
    model = cases.srms_on_orbiter().model
    mass = np.array(model.mass)
    inertia = np.array(model.I_Bcm_B)
    com = np.array(model.p_BoBcm_B)
    mass[-1] = 1e-300
    inertia[-1] = 0.0
    com[-1] = 0.0
    bad = ch.chain_from_table(model.names, model.parent, model.joint_type, model.X_PJ, model.axis_J, mass, com,
                              inertia)
    data = ch.make_data(bad)
    q = cases.srms_on_orbiter().q
    with pytest.raises(SingularityError, match=repr(model.names[-1])):
        ch.forward_dynamics(bad, data, q, np.zeros(bad.nv), np.zeros(bad.nv))


def test_numpy_reference_refuses_beam_links():
    model = cases.with_flexible_booms(cases.srms_on_orbiter().model, cases.srms_booms(1))
    data = ch.make_data(model)
    q = ch.neutral(model)
    with pytest.raises(ModelError, match="beam links"):
        ch.forward_dynamics_numpy(model, data, q, np.zeros(model.nv), np.zeros(model.nv))
    with pytest.raises(ModelError, match="beam links"):
        ch.mass_matrix_numpy(model, data, q)
