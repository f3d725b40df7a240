"""Stewart and servo rig kinematics, workspace clamping and the pose map."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.linalg

from dynamics.spatial import pose, quat_to_rotation
from dynamics.stewart import (
    GeodesicPath,
    PoseMap,
    RigLimits,
    ServoRig,
    StewartRig,
    _solve,
    axis_map_matrix,
    last_feasible,
    pose_from_vector,
    pose_vector,
)
from errors import ConfigError, NoSolutionError

LIM = RigLimits.uniform(6, 0.40, 0.70, 0.5, 5.0, 100.0)


def make_rig() -> StewartRig:
    return StewartRig(0.3, 0.2, math.radians(20), math.radians(20), 0.5, LIM)


def random_reachable(rig, rng, n):
    out = []
    while len(out) < n:
        x = np.concatenate([rng.uniform(-0.06, 0.06, 3), rng.uniform(-0.2, 0.2, 3)])
        X = rig.neutral @ pose_from_vector(x)
        if not rig.workspace_problems(X):
            out.append(X)
    return out


def test_neutral_leg_length_closed_form():
    rig = make_rig()
    # leg 0: base joint at −10°, platform joint at −50° (pair spacing 20°, offset 60°)
    b = 0.3 * np.array([math.cos(math.radians(-10)), math.sin(math.radians(-10)), 0])
    p = 0.2 * np.array([math.cos(math.radians(-50)), math.sin(math.radians(-50)), 0])
    expect = math.sqrt(0.5**2 + np.sum((p - b) ** 2))
    np.testing.assert_allclose(rig.inverse(rig.neutral), expect, rtol=0, atol=1e-15)


def test_pure_yaw_keeps_legs_equal_and_heave_is_pythagorean():
    rig = make_rig()
    def yaw(a):
        return rig.inverse(rig.neutral @ pose(quat_to_rotation([math.cos(a / 2), 0, 0, math.sin(a / 2)]), [0, 0, 0]))

    L, Lm = yaw(0.1), yaw(-0.1)
    # three-fold symmetry: even legs equal, odd legs equal; mirror symmetry swaps them
    assert np.ptp(L[0::2]) < 1e-15 and np.ptp(L[1::2]) < 1e-15
    np.testing.assert_allclose(L[0::2], Lm[1::2], atol=1e-15)
    L2 = rig.inverse(pose(np.eye(3), [0, 0, 0.55]))
    h_plane = np.linalg.norm((rig.p_P - rig.b_R)[0])
    np.testing.assert_allclose(L2, math.hypot(0.55, h_plane), atol=1e-15)


def test_jacobian_matches_finite_differences():
    rig = make_rig()
    X = random_reachable(rig, np.random.default_rng(3), 1)[0]
    J = rig.jacobian(X)
    eps = 1e-7
    for j in range(6):
        d = np.zeros(6)
        d[j] = eps
        w, v = d[:3], d[3:]
        Xp = pose(pose_from_vector(np.r_[0, 0, 0, w])[:3, :3] @ X[:3, :3], X[:3, 3] + v)
        Xm = pose(pose_from_vector(np.r_[0, 0, 0, -w])[:3, :3] @ X[:3, :3], X[:3, 3] - v)
        np.testing.assert_allclose((rig.inverse(Xp) - rig.inverse(Xm)) / (2 * eps), J[:, j], atol=1e-7)


def test_ik_fk_round_trip_and_warm_start_iterations():
    rig = make_rig()
    rng = np.random.default_rng(11)
    worst = 0.0
    for X in random_reachable(rig, rng, 40):
        L = rig.inverse(X)
        Xc, _ = rig.forward(L)  # cold start from neutral
        worst = max(worst, float(np.max(np.abs(Xc[:3, 3] - X[:3, 3]))), float(np.max(np.abs(Xc - X))))
        # warm start from the previous sample of a fast motion (0.5 m/s, 1 rad/s at 250 Hz)
        step = rng.normal(size=6)
        step = np.r_[step[:3] / np.linalg.norm(step[:3]) * 0.004, step[3:] / np.linalg.norm(step[3:]) * 0.004]
        Xw, it = rig.forward(L, X @ pose_from_vector(step))
        assert it <= 5
        worst = max(worst, float(np.max(np.abs(Xw - X))))
    assert worst < 1e-9


def test_workspace_check_and_clamp_toward_neutral():
    rig = make_rig()
    pm = PoseMap(rig, rig.neutral)
    far = pose(np.eye(3), [0.0, 0.0, 0.4])  # 0.4 m heave: far beyond the stroke
    res = pm.to_rig(far)
    assert res.clamped and 0 < res.fraction < 1
    assert not rig.workspace_problems(res.X_RP)
    assert np.all(res.axes <= LIM.hi + 1e-12)
    # bisection finds the boundary: a bit further is infeasible
    assert rig.workspace_problems(pose(np.eye(3), [0, 0, res.X_RP[2, 3] + 1e-6]))
    ok = pm.to_rig(pose(np.eye(3), [0.01, 0, 0]))
    assert not ok.clamped and ok.fraction == 1.0


def test_pose_map_axis_map_and_scale():
    rig = make_rig()
    M = axis_map_matrix(["y", "-x", "z"])  # rig x = sim y, rig y = −sim x
    pm = PoseMap(rig, rig.neutral, scale=0.5, M=M)
    X = pm.rig_pose(pose(np.eye(3), [0.02, 0.04, 0.0]))
    np.testing.assert_allclose(X[:3, 3], [0.02, -0.01, 0.5], atol=1e-15)
    Xr = pm.rig_pose(pose(quat_to_rotation([math.cos(0.05), math.sin(0.05), 0, 0]), [0, 0, 0]))
    np.testing.assert_allclose(pose_vector(Xr)[3:], [0.0, -0.1, 0.0], atol=1e-12)  # roll about x → about −y


@pytest.mark.parametrize("bad", [["x", "y"], ["x", "x", "z"], ["x", "y", "-z"], ["x", "y", "w"]])
def test_axis_map_refuses_non_rotations(bad):
    with pytest.raises(ConfigError, match="axis_map"):
        axis_map_matrix(bad)


def test_inconsistent_limits_refused_naming_field():
    with pytest.raises(ConfigError, match="limits.hi"):
        RigLimits.uniform(6, 0.7, 0.4, 0.5, 5.0, 100.0)
    with pytest.raises(ConfigError, match="limits.v_max"):
        RigLimits.uniform(6, 0.4, 0.7, -1.0, 5.0, 100.0)
    with pytest.raises(ConfigError, match="neutral pose outside"):
        StewartRig(0.3, 0.2, 0.3, 0.3, 0.9, LIM)
    with pytest.raises(ConfigError, match="r_base"):
        StewartRig(-0.3, 0.2, 0.3, 0.3, 0.5, LIM)


def test_servo_rig_round_trip():
    lim = RigLimits.uniform(3, -1.0, 1.0, 2.0, 10.0, 100.0)
    rig = ServoRig((2, 3, 4), (10.0, 2.0, -2.0), (0.0, 0.1, 0.0), lim)
    X = pose_from_vector([0, 0, 0.03, 0.1, -0.2, 0])
    a = rig.inverse(X)
    np.testing.assert_allclose(a, [0.3, 0.3, 0.4], atol=1e-12)
    Xb, _ = rig.forward(a)
    np.testing.assert_allclose(Xb, X, atol=1e-12)
    assert rig.workspace_problems(pose_from_vector([0, 0, 0.2, 0, 0, 0]))
    with pytest.raises(ConfigError, match="servo.component"):
        ServoRig((2, 2), (1.0, 1.0), (0.0, 0.0), RigLimits.uniform(2, -1, 1, 1, 1, 1))


def test_wrench_back_through_the_axis_map_and_scale():
    rig = make_rig()
    pm = PoseMap(rig, rig.neutral, scale=0.5, M=axis_map_matrix(["y", "-x", "z"]))
    # rig x is sim y, rig y is −sim x: a push along the rig's −y is a push along the body's +x
    np.testing.assert_allclose(pm.wrench_to_body([0, 0, 0, 0, -1.0, 0]), [0, 0, 0, 1.0, 0, 0], atol=1e-15)
    # half-size lever arms on the rig: the same force makes half the torque there
    np.testing.assert_allclose(pm.wrench_to_body([0, 0, 1.0, 0, 0, 0]), [0, 0, 2.0, 0, 0, 0], atol=1e-15)


def _yaw_joint_angles(psi: float, rb=0.3, rp=0.2, h=0.5):
    """Closed form for a pure yaw ψ at the neutral height: the angle of each leg to its neutral
    direction at the base (in R) and at the platform (in P), from the layout in the class docstring
    (pair spacings 20° at both ends, as make_rig)."""
    beta = gamma = math.radians(20)
    out_b, out_p = [], []
    for k in range(6):
        s = -1.0 if k % 2 == 0 else 1.0
        b = math.radians(120) * (k // 2) + s * beta / 2
        g = math.radians(120) * (k // 2) + s * (math.radians(60) - gamma / 2)
        l0 = np.array([rp * math.cos(g) - rb * math.cos(b), rp * math.sin(g) - rb * math.sin(b), h])
        l_R = np.array([rp * math.cos(g + psi) - rb * math.cos(b), rp * math.sin(g + psi) - rb * math.sin(b), h])
        l_P = np.array([rp * math.cos(g) - rb * math.cos(b - psi), rp * math.sin(g) - rb * math.sin(b - psi), h])
        ang = [math.acos(float(np.clip(v @ l0 / np.linalg.norm(v) / np.linalg.norm(l0), -1, 1))) for v in (l_R, l_P)]
        out_b.append(ang[0])
        out_p.append(ang[1])
    return np.array(out_b), np.array(out_p)


def test_joint_cone_angles_match_closed_form_and_bound_the_workspace():
    psi = 0.3
    X = pose(quat_to_rotation([math.cos(psi / 2), 0, 0, math.sin(psi / 2)]), [0, 0, 0.5])
    ang_b, ang_p = _yaw_joint_angles(psi)
    got_b, got_p = make_rig().joint_angles(X)
    np.testing.assert_allclose(got_b, ang_b, atol=1e-12)
    np.testing.assert_allclose(got_p, ang_p, atol=1e-12)
    assert make_rig().in_workspace(X)  # no cone limits by default
    for name, worst in (("base", ang_b.max()), ("platform", ang_p.max())):
        kw = {f"joint_cone_{name}": worst - 0.01}
        tight = StewartRig(0.3, 0.2, math.radians(20), math.radians(20), 0.5, LIM, **kw)
        assert not tight.in_workspace(X)
        assert any(f"{name} joint angle" in p for p in tight.workspace_problems(X))
        kw = {f"joint_cone_{name}": worst + 0.01}
        assert StewartRig(0.3, 0.2, math.radians(20), math.radians(20), 0.5, LIM, **kw).in_workspace(X)


def test_clamp_stops_at_the_joint_cone():
    cone = 0.35
    rig = StewartRig(0.3, 0.2, math.radians(20), math.radians(20), 0.5, LIM, joint_cone_platform=cone)
    pm = PoseMap(rig, rig.neutral)
    res = pm.to_rig(pose(quat_to_rotation([math.cos(0.4), 0, 0, math.sin(0.4)]), [0, 0, 0]))  # 0.8 rad yaw
    assert res.clamped and rig.in_workspace(res.X_RP)
    psi = pose_vector(res.X_RP)[5]
    # the platform cone binds: the closed-form angle at the clamped yaw is the cone angle
    assert _yaw_joint_angles(psi)[1].max() == pytest.approx(cone, abs=1e-8)
    assert any("platform joint" in p for p in res.problems)


def test_geodesic_path_is_the_exponential_map_and_last_feasible_stays_feasible():
    rng = np.random.default_rng(5)
    Xa, Xb = pose_from_vector(rng.normal(size=6)), pose_from_vector(rng.normal(size=6))
    th = pose_vector(pose(Xa[:3, :3].T @ Xb[:3, :3], [0, 0, 0]))[3:]
    path = GeodesicPath(Xa, Xb)
    for s in (0.0, 0.25, 0.7, 1.0):
        R_ref = Xa[:3, :3] @ pose_from_vector(np.r_[0, 0, 0, s * th])[:3, :3]
        np.testing.assert_allclose(path.pose(s)[:3, :3], R_ref, atol=1e-12)
        np.testing.assert_allclose(path.pose(s)[:3, 3], (1 - s) * Xa[:3, 3] + s * Xb[:3, 3], atol=1e-15)
    np.testing.assert_allclose(path.pose(1.0), Xb, atol=1e-12)
    calls = []

    def g(s):
        calls.append(s)
        return 0.3 - s * s  # edge at √0.3

    s = last_feasible(g)
    assert g(s) >= 0 and math.sqrt(0.3) - s < 1e-9 and len(calls) < 20
    assert last_feasible(lambda s: 1.0 - s * 0.5) == 1.0


def test_newton_twist_from_leg_rates_matches_finite_differences_of_the_inverse_kinematics():
    rig = make_rig()
    rng = np.random.default_rng(8)
    for X in random_reachable(rig, rng, 5):
        V0 = rng.normal(size=6) * np.r_[0.2, 0.2, 0.2, 0.05, 0.05, 0.05]  # [ω; v] of P at Po, in R
        eps = 1e-6

        def moved(t, X=X, V0=V0):
            return pose(pose_from_vector(np.r_[0, 0, 0, t * V0[:3]])[:3, :3] @ X[:3, :3], X[:3, 3] + t * V0[3:])

        rates = (rig.inverse(moved(eps)) - rig.inverse(moved(-eps))) / (2 * eps)
        # warm start as in the emulator: the last reading, 4 ms of motion away; V then comes with the
        # Jacobian of the last iterate, within the last correction (≲ 1e-7 here) of the solution
        guess = X @ pose_from_vector(rng.normal(size=6) * 1e-4)
        _, p, it, V = rig.newton(rig.inverse(X), _quat(guess), guess[:3, 3], rates)
        np.testing.assert_allclose(p, X[:3, 3], atol=1e-9)
        np.testing.assert_allclose(V, V0, atol=1e-7)
        assert it <= 5


def _quat(X):
    from dynamics.spatial import quat_integrate

    return quat_integrate([1.0, 0, 0, 0], pose_vector(X)[3:], 1.0)


def _cond_stream(cond_max: float) -> tuple[int, set, int]:
    """A random walk of poses (a stream) through the rig's check: (poses, verdicts, rig SVDs),
    asserting at every pose that the verdict equals cond ≤ cond_max computed outright."""
    rig = StewartRig(0.3, 0.2, math.radians(20), math.radians(20), 0.5, LIM, cond_max=cond_max)
    rng = np.random.default_rng(12)
    x = np.zeros(6)
    svds = 0
    orig = np.linalg.svd

    def counting(*a, **k):
        nonlocal svds
        svds += 1
        return orig(*a, **k)

    np.linalg.svd = counting  # (np.linalg.cond below calls its module's svd, not this attribute)
    try:
        n, verdicts = 0, set()
        for _ in range(600):
            x = np.clip(x + rng.normal(size=6) * np.r_[1e-3, 1e-3, 1e-3, 5e-3, 5e-3, 5e-3],
                        [-0.05] * 3 + [-0.3] * 3, [0.05] * 3 + [0.3] * 3)
            X = rig.neutral @ pose_from_vector(x)
            exact = float(np.linalg.cond(rig.jacobian(X))) <= cond_max
            assert rig.in_workspace(X) == exact
            n += 1
            verdicts.add(exact)
    finally:
        np.linalg.svd = orig
    return n, verdicts, svds


def test_conditioning_bound_gives_the_exact_answer_along_a_stream():
    """The Weyl bound lets most poses of a stream pass without an SVD; the verdict must equal
    the condition number computed outright at every pose, also across cond_max."""
    n, verdicts, _ = _cond_stream(12.4)  # the walk crosses cond = 12.4 back and forth
    assert verdicts == {True, False}
    n, verdicts, svds = _cond_stream(50.0)  # the default: far from the edge
    assert verdicts == {True} and svds < n / 20


def test_newton_legs_and_solve_are_the_margin_legs_and_numpy_solve_bit_for_bit():
    rig = make_rig()
    rng = np.random.default_rng(11)
    for X in random_reachable(rig, rng, 20):
        R, T = X[:3, :3], X[:3, 3].tolist()
        lengths, rows = rig._legs(tuple(R.ravel().tolist()), T)
        legs = rig._margin(R.tolist(), T)[1]
        assert lengths == [leg[0] for leg in legs]
        J = np.array(rows)
        assert J.tolist() == rig._jacobian_of(legs).tolist()
        B = rng.normal(size=(6, 2))
        assert _solve(J, B).tolist() == scipy.linalg.solve(J, B).tolist()  # the same LAPACK dgesv
    with pytest.raises(np.linalg.LinAlgError):
        _solve(np.zeros((6, 6)), np.ones((6, 2)))
    with pytest.raises(np.linalg.LinAlgError):
        _solve(np.full((6, 6), np.nan), np.ones((6, 2)))


def test_newton_on_a_singular_jacobian_raises_no_solution():
    rig = make_rig()
    legs = rig.inverse(rig.neutral)
    # guess: the platform in the base plane, where every leg lies in z = 0 and the Jacobian's
    # columns for ω_x, ω_y and v_z are exactly zero
    with pytest.raises(NoSolutionError, match="singular"):
        rig.newton(legs, np.array([1.0, 0.0, 0.0, 0.0]), np.array([0.0, 0.0, 0.0]))


def test_the_old_module_path_is_an_alias_that_warns():
    """``hil.stewart`` (where the rig kinematics were) still imports, warns, and gives the same objects."""
    import importlib
    import sys

    import dynamics.stewart as new

    sys.modules.pop("hil.stewart", None)
    with pytest.warns(DeprecationWarning, match=r"hil.stewart is deprecated: use dynamics.stewart"):
        old = importlib.import_module("hil.stewart")
    assert old.StewartRig is new.StewartRig and old.PoseMap is new.PoseMap and set(old.__all__) == set(new.__all__)
