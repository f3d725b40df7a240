"""The compiled RK4 step (dynamics.rigid_body_kernels) against its Python-float reference and the composed kernels.

:func:`dynamics.rigid_body.step` runs :func:`dynamics.rigid_body_kernels.rkmk4`; the reference
:func:`dynamics.rigid_body.step_reference` runs the same operations on Python floats. Compiled
without fast-math (no reassociation, no fused multiply-add), the two must agree bit for bit, over
the branches of the quaternion exponential and of ``dexp⁻¹`` (small and large angles), with and
without the orbit's terms, over sub-steps; and a state that is not finite must be refused with
the reference's error. The physics of ``step`` (conservation, closed forms, order) is
test_rigid_body's, which runs the kernel.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_rigid_body import _random_inertia, _rkmk4_composed

from dynamics import rigid_body as rb
from dynamics import rigid_body_kernels as rbk
from dynamics.orbit import CircularOrbit
from dynamics.spatial import quat_normalize
from errors import ShapeError

ORBITS = {"inertial": None, "cw": CircularOrbit.from_altitude(400e3, gravity_gradient=False),
          "cw+gg": CircularOrbit.from_altitude(400e3, gravity_gradient=True)}


def _case(rng: np.random.Generator) -> tuple[rb.RigidBodyModel, rb.RigidBodyState, list[float], float]:
    model = rb.RigidBodyModel("b", float(rng.uniform(1.0, 1e5)), _random_inertia(rng) * rng.uniform(1.0, 1e4))
    # rates from zero to fast: φ = w h on both sides of quat_integrate's 1e-12 and dexp⁻¹'s 1e-4 (θ² < 1e-8)
    w = rng.normal(size=3) * rng.choice([0.0, 1e-12, 1e-9, 1e-5, 1e-3, 0.1, 1.0, 5.0])
    s = rb.RigidBodyState(rng.normal(size=3) * rng.choice([0.1, 10.0, 1e4]), quat_normalize(rng.normal(size=4)),
                          rng.normal(size=3) * rng.choice([0.0, 1e-3, 1.0]), w)
    F = (rng.normal(size=6) * rng.choice([0.0, 1.0, 1e3, 1e6])).tolist()
    return model, s, F, float(rng.choice([1e-4, 1e-3, 4e-3, 0.01, 0.1, 1.0]))


@pytest.mark.parametrize("orbit", list(ORBITS))
@pytest.mark.parametrize("substeps", [1, 3])
def test_kernel_step_equals_the_reference_bit_for_bit(orbit, substeps):
    rng = np.random.default_rng(20261128 + substeps)
    finite = 0
    for _ in range(300):
        model, s, F, h = _case(rng)
        try:
            ref = rb.step_reference(model, s, F, h, ORBITS[orbit], substeps)
        except (ShapeError, ValueError) as err:  # a case that blows up (math.sin(inf) is a ValueError): the same
            with pytest.raises(type(err)) as got_err:
                rb.step(model, s, F, h, ORBITS[orbit], substeps)
            assert str(got_err.value) == str(err)
            continue
        got = rb.step(model, s, F, h, ORBITS[orbit], substeps)
        assert got.to_vector().tolist() == ref.to_vector().tolist(), (model, s, F, h)
        assert got.floats == ref.floats and list(got.floats) == got.to_vector().tolist()
        finite += 1
    assert finite > 250


@pytest.mark.parametrize("orbit", list(ORBITS))
def test_kernel_step_equals_the_composed_kernels(orbit):
    # the textbook composition of _rates, quat_integrate_rows, rotation_rows, dexp_inv_rows (test_rigid_body)
    rng = np.random.default_rng(7)
    for _ in range(200):
        model, s, F, h = _case(rng)
        if h > 0.01:  # (cases that may blow up are the test above's)
            continue
        ref = _rkmk4_composed(model, s.p_WoBo_W.tolist(), s.quat_WB.tolist(), s.v_WBo_W.tolist(), s.w_WB_B.tolist(),
                              F, h, ORBITS[orbit])
        assert rb.step(model, s, F, h, ORBITS[orbit]).to_vector().tolist() == [*ref[0], *ref[1], *ref[2], *ref[3]]


def test_step_runs_the_compiled_kernel():
    """``step`` takes the kernel's path (a reverted dispatch would leave the tests above comparing the reference
    with itself): the kernel is compiled for the tuple arguments ``step`` passes, and it returns the state."""
    model = rb.RigidBodyModel("p", 2.0, np.diag([1.0, 2.0, 2.5]))
    s = rb.RigidBodyState([0.1, 0, 0], [0.5, 0.5, -0.5, 0.5], [0, 0.2, 0], [0.3, -0.1, 0.2])
    got = rb.step(model, s, [0.1, 0, 0, 0, 0, 1.0], 0.1, ORBITS["cw+gg"], 2)
    assert rbk.rkmk4.signatures, "rkmk4 was never compiled: step does not call it"
    code, x = rbk.rkmk4(s.floats, (0.1, 0.0, 0.0, 0.0, 0.0, 1.0), model.kernel_rows, 0.05,
                        ORBITS["cw+gg"].n, rbk.ORBIT_GG, 2)
    assert code == 0 and x.tolist() == got.to_vector().tolist()
    assert model.kernel_rows == (2.0, *model.I_rows, *model.I_inv_rows)


@pytest.mark.parametrize("F, h, match", [
    ([0, 0, 0, 1e308, 0, 0], 1e10, "p_WoBo_W: not finite"),          # the result overflows
    ([1e308, 1e308, 1e308, 0, 0, 0], 1e10, "not finite"),             # a stage's quaternion is not finite
])
def test_kernel_refusal_is_the_references(F, h, match):
    model = rb.RigidBodyModel("p", 2.0, np.diag([1.0, 2.0, 2.5]))
    s = rb.RigidBodyState([0.1, 0, 0], [0.5, 0.5, -0.5, 0.5], [0, 0.2, 0], [0.3, -0.1, 0.2])
    code, _ = rbk.rkmk4(s.floats, tuple(float(x) for x in F), model.kernel_rows, h, 0.0, rbk.NO_ORBIT, 1)
    assert code == rbk.NOT_FINITE
    with pytest.raises(ShapeError, match=match) as got:
        rb.step(model, s, F, h)
    with pytest.raises(ShapeError) as ref:
        rb.step_reference(model, s, F, h)
    assert str(got.value) == str(ref.value)
