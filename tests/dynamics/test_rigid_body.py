"""dynamics.rigid_body against conservation laws, closed forms and the integrator's order."""

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from dynamics import rigid_body as rb
from dynamics.spatial import quat_angle, quat_normalize
from errors import ModelError, ShapeError


def _random_inertia(rng):
    lam = np.sort(rng.uniform(1.0, 10.0, size=3))
    lam[2] = min(lam[2], lam[0] + lam[1])
    Rm = Rotation.random(random_state=rng.integers(1 << 31)).as_matrix()
    return Rm @ np.diag(lam) @ Rm.T


def _run(model, state, F, h, T, orbit=None):
    for _ in range(round(T / h)):
        state = rb.step(model, state, F, h, orbit=orbit)
    return state


def test_torque_free_conserves_momentum_and_energy():
    rng = np.random.default_rng(11)
    # Tumbling near the intermediate axis (the hard case) plus translation off the origin.
    model = rb.RigidBodyModel("tumbler", 250.0, _random_inertia(rng))
    s0 = rb.RigidBodyState([3.0, -1.0, 2.0], quat_normalize(rng.normal(size=4)), [0.2, 0.1, -0.3], [0.9, -1.5, 1.2])
    P0, L0 = rb.momentum(model, s0)
    E0 = rb.kinetic_energy(model, s0)
    s1 = _run(model, s0, np.zeros(6), 0.01, 10.0)
    P1, L1 = rb.momentum(model, s1)
    np.testing.assert_allclose(P1, P0, rtol=0, atol=1e-12 * np.linalg.norm(P0))
    # bounds reached over 10 s at h = 10 ms, |ω| ≈ 2 rad/s: |ΔL|/|L| = 1.9e-11, |ΔE|/E = 2.3e-12
    assert np.linalg.norm(L1 - L0) <= 1e-10 * np.linalg.norm(L0)
    assert abs(rb.kinetic_energy(model, s1) - E0) <= 1e-10 * E0
    assert abs(np.linalg.norm(s1.quat_WB) - 1.0) < 1e-14


def test_constant_wrench_closed_form():
    # Force: exact parabola (RK4 is exact on it). Torque about a principal axis: θ = ½ τ/I t².
    model = rb.RigidBodyModel("box", 4.0, np.diag([2.0, 3.0, 4.0]))
    p0, v0 = np.array([1.0, 2.0, 3.0]), np.array([0.1, -0.2, 0.3])
    f, tau_z, T = np.array([0.4, 0.0, -0.8]), 0.02, 5.0
    s = _run(model, rb.RigidBodyState(p0, [1, 0, 0, 0], v0, np.zeros(3)), np.r_[0, 0, tau_z, f], 0.05, T)
    np.testing.assert_allclose(s.p_WoBo_W, p0 + v0 * T + 0.5 * f / model.mass * T**2, atol=1e-12)
    np.testing.assert_allclose(s.v_WBo_W, v0 + f / model.mass * T, atol=1e-12)
    theta = 0.5 * tau_z / 4.0 * T**2
    np.testing.assert_allclose(s.w_WB_B, [0, 0, tau_z / 4.0 * T], atol=1e-12)
    assert quat_angle(s.quat_WB, [np.cos(theta / 2), 0, 0, np.sin(theta / 2)]) < 1e-10


def test_wrench_held_constant_in_W():
    rng = np.random.default_rng(12)
    # A torque fixed in W on a spinning body: angular momentum grows as L0 + τ t whatever the rotation.
    model = rb.RigidBodyModel("spinner", 10.0, _random_inertia(rng))
    s0 = rb.RigidBodyState(np.zeros(3), quat_normalize(rng.normal(size=4)), np.zeros(3), [1.0, -0.4, 0.7])
    tau = np.array([0.3, -0.1, 0.2])
    _, L0 = rb.momentum(model, s0)
    s1 = _run(model, s0, np.r_[tau, 0, 0, 0], 0.01, 3.0)
    np.testing.assert_allclose(rb.momentum(model, s1)[1], L0 + 3.0 * tau, atol=1e-9)


def test_rk4_order():
    # Richardson: with x_h the state after T at step h, |x_h − x_h/2| / |x_h/2 − x_h/4| → 2⁴ = 16.
    rng = np.random.default_rng(14)
    model = rb.RigidBodyModel("b", 10.0, _random_inertia(rng))
    s0 = rb.RigidBodyState([0, 0, 1.0], quat_normalize(rng.normal(size=4)), [0.1, 0, 0], [0.4, 1.0, -0.3])
    F = np.array([0.05, -0.02, 0.01, 0.3, 0.1, -0.2])
    x = [_run(model, s0, F, h, 4.0) for h in (0.2, 0.1, 0.05)]

    def diff(a, b):
        return np.linalg.norm(a.w_WB_B - b.w_WB_B) + quat_angle(a.quat_WB, b.quat_WB)

    ratio = diff(x[0], x[1]) / diff(x[1], x[2])
    assert 14.0 < ratio < 18.0, ratio


def test_substeps_equal_repeated_steps():
    model = rb.RigidBodyModel("b", 3.0, np.diag([1.0, 1.5, 2.0]))
    s0 = rb.RigidBodyState(np.zeros(3), [1, 0, 0, 0], [0.1, 0, 0], [0.2, 0.5, -0.1])
    F = np.array([0.0, 0.1, 0.0, 1.0, 0.0, 0.0])
    a = rb.step(model, s0, F, 0.2, substeps=4)
    b = _run(model, s0, F, 0.05, 0.2)
    np.testing.assert_allclose(a.to_vector(), b.to_vector(), atol=1e-15)


def test_derivative_matches_step():
    rng = np.random.default_rng(14)
    model = rb.RigidBodyModel("b", 3.0, _random_inertia(rng))
    s0 = rb.RigidBodyState([1, 2, 3], quat_normalize(rng.normal(size=4)), [0.1, 0, 0], [0.2, 0.5, -0.1])
    F = np.array([0.1, 0.1, -0.3, 1.0, 0.0, 2.0])
    h = 1e-5
    fd = (rb.step(model, s0, F, h).to_vector() - s0.to_vector()) / h
    np.testing.assert_allclose(fd, rb.derivative(model, s0, F), atol=1e-4)
    a, wdot = rb.accelerations(model, s0, F)
    np.testing.assert_allclose(a, F[3:] / model.mass, atol=1e-15)
    # Euler's equations, written out independently
    w, I = s0.w_WB_B, model.I_Bcm_B
    np.testing.assert_allclose(I @ wdot + np.cross(w, I @ w), s0.R_WB.T @ F[:3], atol=1e-12)


def test_wrench_at_com_and_point_kinematics():
    rng = np.random.default_rng(15)
    s = rb.RigidBodyState([1.0, 2.0, 3.0], quat_normalize(rng.normal(size=4)), [0.3, -0.1, 0.2], [0.5, -0.2, 0.9])
    p_P = np.array([2.0, 0.5, -1.0])
    F_P = np.array([0.1, 0.2, 0.3, 4.0, -5.0, 6.0])
    F_B = rb.wrench_at_com(F_P, p_P, s)
    np.testing.assert_allclose(F_B[:3], F_P[:3] + np.cross(p_P - s.p_WoBo_W, F_P[3:]), atol=1e-13)
    np.testing.assert_allclose(F_B[3:], F_P[3:])
    # velocity of a body-fixed point = time derivative of its position (free drift, tiny step)
    model = rb.RigidBodyModel("b", 1.0, np.eye(3))
    r_B = np.array([0.3, -0.7, 1.1])
    h = 1e-6
    s2 = rb.step(model, s, np.zeros(6), h)
    fd = (rb.point_position(s2, r_B) - rb.point_position(s, r_B)) / h
    np.testing.assert_allclose(rb.point_velocity(s, r_B), fd, atol=1e-6)
    V = rb.spatial_velocity(s)
    np.testing.assert_allclose(V[:3], s.R_WB @ s.w_WB_B)


def test_point_mobility_matches_apply_impulse():
    rng = np.random.default_rng(16)
    model = rb.RigidBodyModel("b", 7.0, _random_inertia(rng))
    s = rb.RigidBodyState([0.5, 0, 0], quat_normalize(rng.normal(size=4)), [0.1, 0.2, 0.3], [0.3, 0.0, -0.2])
    r_W = np.array([0.4, -1.2, 0.8])
    r_B = s.R_WB.T @ r_W
    P = np.array([1.0, -2.0, 0.5])
    s2 = rb.apply_impulse(model, s, np.r_[np.cross(r_W, P), P])
    dv = rb.point_velocity(s2, r_B) - rb.point_velocity(s, r_B)
    K = rb.point_mobility(model, s, r_W)
    np.testing.assert_allclose(dv, K @ P, atol=1e-13)
    assert np.all(np.linalg.eigvalsh(K) > 0)


def test_state_vector_round_trip():
    s = rb.RigidBodyState([1, 2, 3], [2.0, 0, 0, 0], [4, 5, 6], [7, 8, 9])
    np.testing.assert_allclose(s.quat_WB, [1, 0, 0, 0])
    np.testing.assert_array_equal(rb.RigidBodyState.from_vector(s.to_vector()).to_vector(), s.to_vector())
    with pytest.raises(ValueError):
        s.p_WoBo_W[0] = 1.0  # read-only


@pytest.mark.parametrize(
    ("mass", "I", "what"),
    [
        (0.0, np.eye(3), "mass"),
        (-5.0, np.eye(3), "mass"),
        (float("nan"), np.eye(3), "mass"),
        (1.0, [[1, 0.5, 0], [0, 1, 0], [0, 0, 1]], "symmetric"),
        (1.0, np.diag([1.0, 2.0, -3.0]), "positive definite"),
        (1.0, np.diag([1.0, 1.0, 3.0]), "triangle"),
    ],
)
def test_bad_model_refused_naming_body(mass, I, what):
    with pytest.raises(ModelError, match=f"orbiter.*{what}"):
        rb.RigidBodyModel("orbiter", mass, np.asarray(I, dtype=float))


def test_bad_shapes_refused():
    with pytest.raises(ShapeError, match="I_Bcm_B"):
        rb.RigidBodyModel("p", 1.0, np.eye(2))
    with pytest.raises(ShapeError, match="p_WoBo_W"):
        rb.RigidBodyState([0, 0], [1, 0, 0, 0], [0, 0, 0], [0, 0, 0])
    with pytest.raises(ShapeError, match="quat_wxyz"):
        rb.RigidBodyState([0, 0, 0], [0, 0, 0, 0], [0, 0, 0], [0, 0, 0])
    model = rb.RigidBodyModel("p", 1.0, np.eye(3))
    s = rb.RigidBodyState.at_rest()
    with pytest.raises(ShapeError, match="F_Bo_W"):
        rb.step(model, s, np.zeros(3), 0.1)
    with pytest.raises(ShapeError, match="F_Bo_W"):
        rb.step(model, s, [np.nan] * 6, 0.1)
    with pytest.raises(ValueError, match="h must be"):
        rb.step(model, s, np.zeros(6), 0.0)
    with pytest.raises(ValueError, match="substeps"):
        rb.step(model, s, np.zeros(6), 0.1, substeps=0)


def test_step_result_is_a_valid_read_only_state():
    model = rb.RigidBodyModel("p", 2.0, np.diag([1.0, 2.0, 2.5]))
    s = rb.RigidBodyState([0.1, 0, 0], [0.5, 0.5, -0.5, 0.5], [0, 0.2, 0], [0.3, -0.1, 0.2])
    s1 = rb.step(model, s, [0.1, 0, 0, 0, 0, 1.0], 0.1, substeps=3)
    assert isinstance(s1, rb.RigidBodyState)
    for a, n in ((s1.p_WoBo_W, 3), (s1.quat_WB, 4), (s1.v_WBo_W, 3), (s1.w_WB_B, 3)):
        assert a.shape == (n,) and a.dtype == np.float64 and not a.flags.writeable
    assert np.linalg.norm(s1.quat_WB) == pytest.approx(1.0, abs=1e-15) and s1.quat_WB[0] >= 0.0
    # a result that overflows is refused, naming the field (as the constructor would)
    with pytest.raises(ShapeError, match="p_WoBo_W: not finite"):
        rb.step(model, s, [0, 0, 0, 1e308, 0, 0], 1e10)


def _scipy_rotation(q_wxyz) -> Rotation:
    w, x, y, z = q_wxyz
    return Rotation.from_quat([x, y, z, w])  # scipy: scalar last


def test_float_kernels_against_scipy_rotations_and_finite_differences():
    """The step's float kernels (rotation_rows, quat_integrate_rows, dexp_inv_rows) against
    independent references: scipy's rotations, and a central difference of the exponential map."""
    rng = np.random.default_rng(21)
    for _ in range(200):
        q = quat_normalize(rng.normal(size=4))
        w = rng.normal(size=3) * rng.choice([1e-9, 1e-3, 1.0, 3.0])
        h = float(rng.choice([1e-3, 0.01, 1.0]))
        R = np.reshape(rb.rotation_rows(*q.tolist()), (3, 3))
        np.testing.assert_allclose(R, _scipy_rotation(q).as_matrix(), rtol=0, atol=4e-15)  # a few ulps
        s = rb.RigidBodyState(np.zeros(3), q, np.zeros(3), w)
        np.testing.assert_allclose(np.reshape(s.R_rows, (3, 3)), _scipy_rotation(q).as_matrix(), rtol=0, atol=4e-15)
        # q ⊗ exp(½ ω h): the body rotates by the rotation vector ω h in its own frame
        q1 = np.array(rb.quat_integrate_rows(q.tolist(), *w.tolist(), h))
        assert q1[0] >= 0.0 and abs(np.linalg.norm(q1) - 1.0) < 1e-15
        expect = (_scipy_rotation(q) * Rotation.from_rotvec(w * h)).as_matrix()
        np.testing.assert_allclose(_scipy_rotation(q1).as_matrix(), expect, rtol=0, atol=8e-15)
        # φ̇ = J_r⁻¹(φ) w: moving φ along φ̇ turns exp(φ) at the body rate w (to O(ε²))
        phi = rng.normal(size=3) * rng.choice([1e-6, 1e-2, 1.0])
        phidot = np.array(rb.dexp_inv_rows(*phi.tolist(), *w.tolist()))
        eps = 1e-5 / float(np.linalg.norm(phidot))  # a step of 1e-5 rad along φ̇, whatever the rate
        base = Rotation.from_rotvec(phi).inv()
        fwd = (base * Rotation.from_rotvec(phi + eps * phidot)).as_rotvec()
        bwd = (base * Rotation.from_rotvec(phi - eps * phidot)).as_rotvec()
        np.testing.assert_allclose((fwd - bwd) / (2 * eps), w, rtol=0, atol=1e-7 * np.linalg.norm(w))


def test_orbital_terms_of_the_float_path_equal_the_orbit_module():
    # the step's written-out CW acceleration and gravity-gradient torque against dynamics.orbit
    from dynamics.orbit import CircularOrbit, cw_acceleration, gravity_gradient_torque

    rng = np.random.default_rng(22)
    model = rb.RigidBodyModel("gg", 1000.0, _random_inertia(rng) * 1e3)
    orbit = CircularOrbit.from_altitude(400e3)
    s = rb.RigidBodyState(rng.normal(size=3), quat_normalize(rng.normal(size=4)), rng.normal(size=3), np.zeros(3))
    F = rng.normal(size=6)
    a, wdot = rb.accelerations(model, s, F, orbit)
    np.testing.assert_allclose(a, F[3:] / model.mass + cw_acceleration(orbit.n, s.p_WoBo_W, s.v_WBo_W),
                               rtol=1e-14, atol=1e-18)
    # with w_WB_B = 0: I ω̇_NB + ω_NB × I ω_NB = R_BW τ + τ_gg, ω_NB = R_BW [0, 0, n]
    o = s.R_WB.T @ [0.0, 0.0, orbit.n]
    I = model.I_Bcm_B
    rhs = s.R_WB.T @ F[:3] + gravity_gradient_torque(orbit.n, I, s.quat_WB) - np.cross(o, I @ o)
    np.testing.assert_allclose(wdot, np.linalg.solve(I, rhs), rtol=1e-12, atol=1e-22)


def _rkmk4_composed(model, p0, q0, v0, w0, F, dt, orbit):
    """RK4 Munthe-Kaas composed from the kernels (``_rates``, ``quat_integrate_rows``,
    ``rotation_rows``, ``dexp_inv_rows``): the textbook form the written-out step must equal."""
    vd, wd = rb._rates(model, p0, v0, rb.rotation_rows(*q0), w0, F, orbit)
    ks = [(list(v0), vd, wd, list(w0))]
    pd, ph = v0, w0
    for c in (0.5 * dt, 0.5 * dt, dt):
        v = [a + c * b for a, b in zip(v0, vd, strict=True)]
        w = [a + c * b for a, b in zip(w0, wd, strict=True)]
        f = [c * b for b in ph]
        vd, wd = rb._rates(model, [a + c * b for a, b in zip(p0, pd, strict=True)], v,
                           rb.rotation_rows(*rb.quat_integrate_rows(q0, *f, 1.0)), w, F, orbit)
        pd, ph = v, rb.dexp_inv_rows(*f, *w)
        ks.append((pd, vd, wd, ph))
    c = dt / 6.0
    inc = [[c * (k1 + 2.0 * k2 + 2.0 * k3 + k4) for k1, k2, k3, k4 in zip(*ki, strict=True)]
           for ki in zip(*ks, strict=True)]
    return ([x + d for x, d in zip(p0, inc[0], strict=True)], rb.quat_integrate_rows(q0, *inc[3], 1.0),
            [x + d for x, d in zip(v0, inc[1], strict=True)], [x + d for x, d in zip(w0, inc[2], strict=True)])


@pytest.mark.parametrize("gg", [None, False, True])
def test_written_out_step_equals_the_composed_kernels(gg):
    # rb.step's stages are written out on scalars for speed; same operations in the same
    # order as the composition of the kernels, so the numbers must be equal bit for bit
    from dynamics.orbit import CircularOrbit

    rng = np.random.default_rng(23)
    orbit = None if gg is None else CircularOrbit.from_altitude(400e3, gravity_gradient=gg)
    for _ in range(100):
        model = rb.RigidBodyModel("b", float(rng.uniform(1.0, 1e5)), _random_inertia(rng) * rng.uniform(1.0, 1e4))
        w = rng.normal(size=3) * rng.choice([0.0, 1e-9, 1e-3, 1.0])
        s = rb.RigidBodyState(rng.normal(size=3) * 10, quat_normalize(rng.normal(size=4)), rng.normal(size=3), w)
        F = (rng.normal(size=6) * 1e3).tolist()
        h = float(rng.choice([1e-3, 4e-3, 0.1]))
        ref = _rkmk4_composed(model, s.p_WoBo_W.tolist(), s.quat_WB.tolist(), s.v_WBo_W.tolist(),
                              s.w_WB_B.tolist(), F, h, orbit)
        got = rb.step(model, s, F, h, orbit)
        assert got.to_vector().tolist() == [*ref[0], *ref[1], *ref[2], *ref[3]]
        assert list(got.floats) == got.to_vector().tolist()


def test_point_motion_against_finite_differences_of_the_rigid_motion():
    """A body-fixed point's velocity and acceleration, independently: differentiate its position
    p_Q(t) = c(t) + R(t) p_B numerically, the body moving with constant CoM acceleration and
    R(t) = R0 exp(ω_B t + ½ ω̇_B t²) (body rate ω_B and angular acceleration ω̇_B at t = 0)."""
    rng = np.random.default_rng(3)
    R0 = Rotation.random(random_state=rng)
    c0, v, a, w_B, wd_B, p_B = (rng.normal(size=3) for _ in range(6))

    def R(t):
        return (R0 * Rotation.from_rotvec(w_B * t + 0.5 * wd_B * t * t)).as_matrix()

    def p_Q(t):
        return c0 + v * t + 0.5 * a * t * t + R(t) @ p_B

    h = 1e-4
    v_ref = (p_Q(h) - p_Q(-h)) / (2 * h)
    a_ref = (p_Q(h) - 2 * p_Q(0.0) + p_Q(-h)) / (h * h)
    Rd = (R(h) - R(-h)) / (2 * h)
    W = Rd @ R(0.0).T                                   # [ω_W ×]
    w_ref = np.array([W[2, 1], W[0, 2], W[1, 0]])
    r, V, A = rb.point_motion(R0.as_matrix(), w_B, v, a, wd_B, p_B)
    np.testing.assert_allclose(r, R0.as_matrix() @ p_B, rtol=0, atol=1e-14)
    np.testing.assert_allclose(V[:3], w_ref, rtol=0, atol=1e-7)
    np.testing.assert_allclose(V[3:], v_ref, rtol=0, atol=1e-7)
    np.testing.assert_allclose(A[:3], R0.as_matrix() @ wd_B, rtol=0, atol=1e-14)
    np.testing.assert_allclose(A[3:], a_ref, rtol=0, atol=1e-5)
    with pytest.raises(ShapeError, match="p_BoQo_B"):
        rb.point_motion(np.eye(3), w_B, v, a, wd_B, [1.0, 2.0])
    with pytest.raises(ShapeError, match="R_WB"):
        rb.point_motion(np.eye(4), w_B, v, a, wd_B, p_B)


def test_velocity_at_against_finite_differences():
    """A material point's velocity, independently: differentiate p_Q(t) = c + v t + exp([ω t×]) (q − c)."""
    rng = np.random.default_rng(4)
    c, v, w, q = (rng.normal(size=3) for _ in range(4))

    def p_Q(t):
        return c + v * t + Rotation.from_rotvec(w * t).apply(q - c)

    h = 1e-5
    ref = (p_Q(h) - p_Q(-h)) / (2 * h)
    np.testing.assert_allclose(rb.velocity_at(c, v, w, q), ref, rtol=0, atol=1e-9)
    np.testing.assert_allclose(rb.velocity_at_rows(c.tolist(), v.tolist(), w.tolist(), q.tolist()), ref, rtol=0,
                               atol=1e-9)
    with pytest.raises(ShapeError, match="w_WB_W"):
        rb.velocity_at(c, v, w[:2], q)
