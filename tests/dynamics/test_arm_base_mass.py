"""The multibody arm's wrenches do not depend on the mass properties its chain's base is given.

The arm service moves the chain's base (the orbiter) as ``orbiter/state`` says; every wrench it takes
from the chain — the free arm's (:func:`dynamics.rms.prescribed_base_affine`), the grappled rigid
arm's (:func:`dynamics.rms.grappled_inverse_dynamics`) and the flexible arm's
(:func:`dynamics.multirate.hold`, :func:`dynamics.multirate.held_step`) — removes the base body's own
inertia. So the reaction on the orbiter is the arm's alone, whatever mass the case gives body 0: it is
checked here against Pinocchio's recursive Newton–Euler on the same URDF (its own reader) with a
base of no mass (the base link and the shoulder mount B1 welded to it, which moves with the orbiter: the
chain's body 0), for base masses 1 kg, :data:`dynamics.cases.ORBITER_MASS` and three times it, and
another inertia and CoM. The orbiter's own mass properties are ``[orbiter]``'s (the orbiter service).
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest
from conftest import base_T, pin_from_urdf, pin_point_jacobian, pin_q, random_state, rel_err

from dynamics import cases, rms
from dynamics import chain as ch
from dynamics import multirate as mr

TOL = 1e-8
BASES = [  # (mass [kg], inertia about the CoM [kg·m²], CoM from the base frame [m])
    (1.0, np.diag([1.0, 2.0, 3.0]), np.zeros(3)),
    (cases.ORBITER_MASS, cases.ORBITER_INERTIA, cases.SRMS_BASE_TO_ORBITER_COM),
    (3.0 * cases.ORBITER_MASS, cases.ORBITER_INERTIA, cases.SRMS_BASE_TO_ORBITER_COM),
    (5.0e4, np.diag([4.0e6, 2.0e6, 5.0e6]), np.array([-3.0, 1.0, 0.5])),
]


@pytest.fixture(scope="module")
def pin_massless_base():
    """Pinocchio's model of the SRMS whose free-flyer body (the base link and the shoulder mount B1 welded to it,
    which its reader merges) has zero mass and inertia: its base rows are the moving links' alone."""
    pm = pin_from_urdf(cases.reference_path("SRMS_Canadarm.urdf"))
    assert pm.inertias[1].mass > 60.0                            # B1's 63.24 kg merged into the base body
    pm.inertias[1] = pin.Inertia.Zero()
    return pm


def _pin_generalized_forces(pm, model, q, v, vdot):
    """[F_b; τ] (ours: wrench at Bo in W, joint torques) that moves the chain at (q, v, v̇ classical), Pinocchio."""
    pd = pm.createData()
    T = base_T(model, q)
    Ti = np.linalg.inv(T)
    c = np.zeros(model.nv)
    c[3:6] = np.cross(v[:3], v[3:6])                          # classical → spatial base acceleration
    return Ti.T @ pin.rnea(pm, pd, pin_q(pm, model, q), Ti @ v, np.linalg.solve(T, vdot - c))


def _state(rng, model):
    q, v = random_state(rng, model, scale=0.05)
    vdot = rng.normal(scale=0.02, size=model.nv)
    return q, v, vdot


@pytest.mark.parametrize("m,I,com", BASES)
def test_free_arm_reaction_is_the_arm_alone(rng, pin_massless_base, m, I, com):
    """prescribed_base_dynamics with Pinocchio's torques for a joint motion: that motion, and the reaction
    −F_b of the massless-base model, for any base mass."""
    model = cases.srms_on_orbiter(orbiter_mass=m, orbiter_inertia=I, p_BoOcm_B=com).model
    data = ch.make_data(model)
    for _ in range(3):
        q, v, vdot = _state(rng, model)
        Q = _pin_generalized_forces(pin_massless_base, model, q, v, vdot)
        thdd, F_B = rms.prescribed_base_dynamics(model, data, q, v, vdot[:6], Q[6:])
        assert rel_err(thdd, vdot[6:]) <= TOL
        assert rel_err(F_B, -Q[:6]) <= TOL


@pytest.mark.parametrize("m,I,com", BASES)
def test_grappled_arm_wrenches_are_the_arm_alone(rng, pin_massless_base, m, I, com):
    """grappled_inverse_dynamics with a payload wrench F_E at Eo: the torques are Pinocchio's plus J_θᵀ of the
    hand's load, the base reaction Pinocchio's −F_b less J_bᵀ of it (its point Jacobian)."""
    pm = pin_massless_base
    model = cases.srms_on_orbiter(orbiter_mass=m, orbiter_inertia=I, p_BoOcm_B=com).model
    data = ch.make_data(model)
    for _ in range(3):
        q, v, vdot = _state(rng, model)
        F_E = rng.normal(scale=[50.0, 50.0, 50.0, 20.0, 20.0, 20.0])   # the arm's wrench on the payload at Eo
        Q = _pin_generalized_forces(pm, model, q, v, vdot)
        pd = pm.createData()
        pin.computeJointJacobians(pm, pd, pin_q(pm, model, q))
        J_E = pin_point_jacobian(pm, pd, model, q, pm.getJointId(model.joint_names[-1]), rms.EE_TIP_B6)
        tau = Q[6:] + J_E[:, 6:].T @ F_E                          # the payload pushes back −F_E on the hand
        F_E_got, F_B = rms.grappled_inverse_dynamics(model, data, q, v, vdot, tau, rms.EE_TIP_B6)
        assert rel_err(F_E_got, F_E) <= TOL
        assert rel_err(F_B, -(Q[:6] + J_E[:, :6].T @ F_E)) <= TOL


@pytest.mark.parametrize("m,I,com", BASES)
def test_flexible_arm_held_step_reaction_is_the_arm_alone(rng, pin_massless_base, m, I, com):
    """multirate.hold/held_step (free): the step's end accelerations with the held (q, v) give Pinocchio's
    massless-base reaction."""
    model = cases.srms_on_orbiter(orbiter_mass=m, orbiter_inertia=I, p_BoOcm_B=com).model
    data = ch.make_data(model)
    K = np.diag([3e5, 3e5, 2e5, 1e5, 1e5, 1e5])
    D = 0.01 * K
    for _ in range(3):
        q, v, vdot = _state(rng, model)
        A_b = vdot[:6]
        held = mr.hold(model, data, q, v, K, D, 0.002)
        Q = rng.normal(scale=300.0, size=6)
        _, _, vdot_a, lam, F_B = mr.held_step(held, q[7:], v[6:], vdot[6:], Q, v[:6], A_b)
        assert not lam.any()
        ref = _pin_generalized_forces(pin_massless_base, model, q, v, np.concatenate([A_b, vdot_a]))
        assert rel_err(F_B, -ref[:6]) <= TOL

