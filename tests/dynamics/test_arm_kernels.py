"""The arm's compiled kernels (dynamics.arm_kernels) against their Python-float references, bit for bit.

Each kernel is written with its reference's operations in its order; compiled without fast-math
(no reassociation, no fused multiply-add) and with the C library's ``sin``, ``cos``, ``acos``,
``tanh``, it must return the very same floats (``==``, not a tolerance) over many random inputs
that go through every branch: the servo braked (holding, slipping, gripping again), in direct
drive (within and beyond the current limit), saturated (with and without the anti-windup),
loaded and not, substepped; the kinematics with joints about the frame axes and about any axis,
with and without a fixed rotation; the rate limits scaling and clipping; the auto-sequence step
on both sides of the log map's small-angle branch, with its limits active or not, and where it
must hand over to the reference; the state prediction; the station loads (and their reference against the
array function, to round-off). The SVD inverse of the step against the checked one. Then: the arm's
build loads every kernel for the argument types its step passes (a step never compiles), and a configuration
check imports no numba.
"""

from __future__ import annotations

import collections
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dynamics import arm_kernels as ak
from dynamics import flexibility as fx
from dynamics import loads as ld
from dynamics import rigid_body as rb
from dynamics import rms
from dynamics import servo as sv
from dynamics import spatial as sp
from dynamics.cases import reference_path
from dynamics.urdf import chain_from_urdf
from errors import ModelError, ShapeError
from protocol.service import BoundModel, Sample
from protocol.stepping import StepInputs
from services import arm

ROOT = Path(__file__).resolve().parents[2]
TAU_MAX = np.array([1570.0, 1570.0, 1074.0, 470.0, 470.0, 470.0])
RATE = np.array([0.03997, 0.03997, 0.0560, 0.0831, 0.0831, 0.0831])


# ---------------------------------------------------------------- the servos


def _pick(rng: np.random.Generator, values: list[float], n: int = 6) -> np.ndarray:
    return np.array([values[i] for i in rng.integers(0, len(values), n)], dtype=float)


def _servo_case(rng: np.random.Generator) -> tuple:
    """Random servo parameters, state and inputs, scaled to reach every branch of the substep."""
    p = sv.srms_servo_params(TAU_MAX * rng.uniform(0.5, 2.0, 6), RATE * rng.uniform(0.5, 2.0, 6),
                             bandwidth=float(rng.uniform(10.0, 100.0)),
                             coulomb_fraction=float(rng.choice([0.0, 0.02, 0.1])),
                             viscous_fraction=float(rng.choice([0.0, 0.05])),
                             slip_fraction=float(rng.uniform(0.5, 2.0)))
    tm = rng.uniform(-1.0, 1.0, 6)
    # rates at rest (exactly, within and beyond the brake's 1e-9), slow and fast, signed zeros
    w = _pick(rng, [0.0, -0.0, 1e-12, -1e-12, 2e-9, -2e-9]) * rng.integers(0, 2, 6) + \
        _pick(rng, [0.0, 1.0]) * rng.normal(0.0, 0.05, 6)
    integ = rng.normal(0.0, 1.0, 6) * _pick(rng, [0.0, 1e-5, 1e-3, 1e-2])    # 1e-3 rad saturates the current
    cmd = rng.normal(0.0, 1.0, 6) * p.rate_limit * rng.choice([0.1, 1.0, 3.0])
    brakes = rng.random(6) < 0.3
    h = float(rng.choice([1e-3, 2e-3, 1e-2]))
    n_sub = int(rng.integers(1, 5))
    loaded = None
    if rng.random() < 0.7:
        k = rng.uniform(1e4, 3e5, 6)
        c = k * rng.choice([0.0, 0.02, 0.2])
        # spring torques within and beyond the slip torque
        theta = tm + rng.normal(0.0, 1.0, 6) * _pick(rng, [0.0, 1e-4, 3e-3, 3e-2])
        theta_dot = rng.normal(0.0, 0.01, 6) * rng.integers(0, 2, 6)
        loaded = (k, c, theta, theta_dot)
    direct = None
    if rng.random() < 0.3:
        i_max = p.current_limit
        direct = [float(x) if use else None for x, use in
                  zip(rng.normal(0.0, 1.0, 6) * i_max * rng.choice([0.5, 2.0]), rng.random(6) < 0.5, strict=True)]
        if rng.random() < 0.2:       # Python's min/max of a NaN, of an infinity: the kernel's helpers the same
            direct[int(rng.integers(0, 6))] = float(rng.choice([math.nan, math.inf, -math.inf]))
    return p, sv.ServoState(tm, w, integ, np.zeros(6)), cmd, brakes, h, n_sub, loaded, direct


def _servo_ref(p, s, cmd, brakes, h, n_sub, loaded, direct):
    lists = None if loaded is None else tuple(a.tolist() for a in loaded)
    return sv.servo_step_rows(p, s.theta_m.tolist(), s.omega.tolist(), s.integ.tolist(), cmd.tolist(),
                              brakes.tolist(), h, n_sub, lists, direct)


def test_servo_kernel_equals_the_reference_bit_for_bit_over_every_branch():
    rng = np.random.default_rng(20261128)
    seen = {"held": 0, "slipping": 0, "gripped": 0, "direct": 0, "direct_clipped": 0, "saturated": 0,
            "windup_stopped": 0, "rate_loop": 0}
    for _ in range(3000):
        p, s, cmd, brakes, h, n_sub, loaded, direct = _servo_case(rng)
        ref = _servo_ref(p, s, cmd, brakes, h, n_sub, loaded, direct)
        got, tau = sv.servo_step_arrays(p, s, cmd, brakes, h, n_sub, loaded, direct)
        assert [got.theta_m.tolist(), got.omega.tolist(), got.integ.tolist(), got.current.tolist(),
                tau.tolist()] == list(ref), (p, s, cmd, brakes, h, n_sub, loaded, direct)
        # which branch each joint took (its result says, independently of the kernel)
        tm, w, integ, cur, _ = ref
        for j in range(6):
            i_max = float(p.current_limit[j])
            if brakes[j]:
                if w[j] == 0.0 and abs(s.omega[j]) < 1e-9:
                    seen["held"] += 1
                elif w[j] == 0.0:
                    seen["gripped"] += 1
                else:
                    seen["slipping"] += 1
            elif direct is not None and direct[j] is not None:
                seen["direct"] += 1
                seen["direct_clipped"] += abs(cur[j]) == i_max
            elif abs(cur[j]) == i_max:
                seen["saturated"] += 1
                seen["windup_stopped"] += integ[j] == s.integ[j]
            else:
                seen["rate_loop"] += 1
    assert min(seen.values()) >= 20, seen


def test_servo_step_runs_the_kernel_and_checks_its_inputs():
    """The public ``servo_step`` takes the kernel's path (a reverted dispatch would leave the test above comparing
    the reference with itself) and gives the reference's numbers, the motor torque ``N K_t i`` with them."""
    rng = np.random.default_rng(3)
    p, s, cmd, brakes, h, n_sub, loaded, _ = _servo_case(rng)
    k, c, theta, theta_dot = loaded if loaded is not None else (None, None, None, None)
    direct = [None, 0.5 * float(p.current_limit[1]), None, None, None, None]
    got, tau, tau_m = sv.servo_step(p, s, cmd, list(brakes), h, k=k, c=c, theta=theta, theta_dot=theta_dot,
                                    n_sub=n_sub, direct=direct)
    assert ak.servo_step.signatures, "servo_step never ran the compiled kernel"
    ref = _servo_ref(p, s, cmd, brakes, h, n_sub, loaded, direct)
    assert [got.theta_m.tolist(), got.omega.tolist(), got.integ.tolist(), got.current.tolist(),
            tau.tolist()] == list(ref)
    assert tau_m.tolist() == [g * i for g, i in zip((p.gear_ratio * p.torque_constant).tolist(), ref[3], strict=True)]
    with pytest.raises(ShapeError, match="brakes"):
        sv.servo_step(p, s, cmd, [False] * 5, h)
    with pytest.raises(ShapeError, match="direct"):
        sv.servo_step(p, s, cmd, brakes, h, direct=[None] * 5)


# ---------------------------------------------------------------- the kinematics and the Jacobian


def _rotation(rng: np.random.Generator) -> np.ndarray:
    return sp.quat_to_rotation(sp.quat_normalize(rng.normal(size=4)))


def _random_geometry(rng: np.random.Generator) -> rms.RmsGeometry:
    """Six joints about a frame axis, its opposite or any axis, with or without a fixed rotation in the parent."""
    a = rng.normal(size=3)
    axes = [np.eye(3)[0], np.eye(3)[1], np.eye(3)[2], -np.eye(3)[1], a / np.linalg.norm(a)]
    X_PJ = np.array([sp.pose(np.eye(3) if rng.random() < 0.5 else _rotation(rng), rng.normal(0.0, 2.0, 3))
                     for _ in range(6)])
    z = np.zeros(6)
    return rms.RmsGeometry(X_OS=sp.pose(_rotation(rng), rng.normal(0.0, 5.0, 3)), X_PJ=X_PJ,
                           axis_J=np.array([axes[i] for i in rng.integers(0, len(axes), 6)]),
                           p_B6oEo_B6=rng.normal(0.0, 1.0, 3), q_lower=z - 3.0, q_upper=z + 3.0, qd_max=z + 1.0,
                           tau_max=z + 1.0)


def test_kinematics_kernel_equals_the_reference_bit_for_bit():
    rng = np.random.default_rng(11)
    srms = rms.rms_geometry(chain_from_urdf(reference_path("SRMS_Canadarm.urdf"), floating_base=False),
                            sp.pose(_rotation(rng), [10.7, -2.74, -1.70]))
    kinds: set[tuple[int, bool]] = set()
    for g in range(60):
        geom = srms if g == 0 else _random_geometry(rng)
        kinds |= {(kind, R_PJ is None) for kind, R_PJ, *_ in geom.fixed[3]}
        for n in range(40):
            theta = rng.uniform(-4.0, 4.0, 6) * rng.choice([0.0, 1e-9, 1.0])
            R_OB, p, u, J, J_inv = rms.rms_kinematics_arrays(geom, theta, invert=n % 2 == 0)
            Rs, ps, us, pE = rms.rms_kinematics_rows(geom, theta.tolist())
            assert R_OB.tolist() == [list(r) for r in Rs]
            assert p.tolist() == [*(list(x) for x in ps), list(pE)]
            assert u.tolist() == [list(x) for x in us]
            assert J.tolist() == rms.rms_jacobian_rows(ps, us, pE)
            if n % 2:
                assert J_inv is None
            else:        # LU by the same LAPACK routines: the same numbers, in the same memory order (matmul's sums)
                ref = rms.regular_inverse(J)
                assert (J_inv is None and ref is None) or (J_inv is not None and ref is not None
                                                            and J_inv.tolist() == ref.tolist()
                                                            and J_inv.flags.f_contiguous == ref.flags.f_contiguous)
    assert {k for k, _ in kinds} == {-1, 0, 1, 2} and {identity for _, identity in kinds} == {True, False}


def test_kinematics_kernel_leaves_a_singular_jacobian_to_the_reference():
    """Six joints about one axis through one point: J's columns are equal, LU meets an exactly zero pivot, the
    reference returns None, and the kernel gives no inverse (the arm then runs the reference, then the SVD)."""
    geom = _random_geometry(np.random.default_rng(2))
    geom = rms.RmsGeometry(X_OS=geom.X_OS, X_PJ=np.tile(np.eye(4), (6, 1, 1)), axis_J=np.tile(np.eye(3)[2], (6, 1)),
                           p_B6oEo_B6=geom.p_B6oEo_B6, q_lower=geom.q_lower, q_upper=geom.q_upper,
                           qd_max=geom.qd_max, tau_max=geom.tau_max)
    R_OB, p, u, J, J_inv = rms.rms_kinematics_arrays(geom, np.zeros(6), invert=True)
    assert rms.regular_inverse(J) is None and J_inv is None


# ---------------------------------------------------------------- the rate limits


def test_rate_limit_kernel_equals_the_reference_bit_for_bit():
    rng = np.random.default_rng(5)
    scaled = clipped = tied = 0
    for _ in range(3000):
        qd_max = RATE * rng.uniform(0.5, 2.0, 6)
        lower, upper = rng.uniform(-3.0, -1.0, 6), rng.uniform(1.0, 3.0, 6)
        # rates within and beyond their limits, zeros of both signs
        qd = rng.normal(0.0, 1.0, 6) * qd_max * rng.choice([0.3, 1.0, 3.0]) * rng.integers(0, 2, 6)
        qd[rng.random(6) < 0.1] = -0.0
        if rng.random() < 0.2:                 # two joints at the same ratio: the first one is named
            a, b = rng.choice(6, 2, replace=False)
            qd[b] = -qd[a] * qd_max[b] / qd_max[a]
            tied += 1
        # angles well inside, near a stop and beyond it
        theta = np.where(rng.random(6) < 0.5, rng.uniform(-0.5, 0.5, 6),
                         np.where(rng.random(6) < 0.5, lower, upper) + rng.normal(0.0, 0.01, 6))
        gain = float(rng.choice([0.5, 2.0]))
        ref = rms.limit_joint_rates_rows(qd.tolist(), theta.tolist(), qd_max.tolist(), lower.tolist(),
                                         upper.tolist(), gain)
        s, lim, r_max, j, bits = rms.limit_joint_rates(qd, theta, np.array([qd_max, lower, upper]), gain)
        assert (s.tolist(), lim.tolist(), r_max, j, bits) == ref, (qd, theta, qd_max, lower, upper, gain)
        scaled += j >= 0
        clipped += bits != 0
    assert scaled > 300 and clipped > 300 and tied > 300


# ---------------------------------------------------------------- the auto sequence's step


def _rotvec(rng: np.random.Generator, scale: float) -> np.ndarray:
    return rng.normal(size=3) * scale


def _auto_case(rng: np.random.Generator, error: float) -> tuple:
    p0, dp = rng.normal(0.0, 3.0, 3), rng.normal(0.0, 1.0, 3) * rng.integers(0, 2)
    R0 = _rotation(rng)
    rot = _rotvec(rng, float(rng.choice([0.0, 1e-13, 1e-3, 0.5, 2.0])))
    s0 = float(rng.choice([0.0, rng.random(), 1.0]))
    s1 = min(1.0, s0 + float(rng.choice([0.0, 1e-4, 1e-2])))
    R_ref = sp.quat_to_rotation(sp.quat_integrate([1.0, 0.0, 0.0, 0.0], rot, s0)) @ R0
    # the pose flown: on the reference, off it a little, or far (the log map's branches)
    axis = rng.normal(size=3)
    R_m = sp.quat_to_rotation(sp.quat_integrate([1.0, 0.0, 0.0, 0.0], axis / np.linalg.norm(axis), error)) @ R_ref
    p_m = p0 + s0 * dp + rng.normal(0.0, 1.0, 3) * rng.choice([0.0, 1e-3, 1.0])
    lims = [float(x) for x in rng.choice([1e-3, 0.05, 10.0], 2)]
    return p0, dp, R0.ravel(), rot, s0, s1, float(rng.choice([1e-3, 2e-3])), p_m, R_m.ravel(), \
        float(rng.choice([0.0, 0.05, 1.0])), *lims


def test_auto_step_kernel_equals_the_reference_bit_for_bit():
    rng = np.random.default_rng(29)
    limited = 0
    for n in range(3000):
        # attitude errors φ = 0 and < 1e-6 (the log map's first order), larger, and within 1e-3 of π (where the
        # reference goes through numpy: the kernel hands over, the wrapper runs the reference)
        error = [0.0, 1e-8, 1e-4, 0.3, 3.0, math.pi - 1e-4][n % 6]
        p0, dp, R0, rot, s0, s1, h, p_m, R_m, gain, v_lim, w_lim = _auto_case(rng, error)
        seg = np.concatenate([p0, dp, R0, rot])
        ref = rms.auto_rates_rows(p0.tolist(), dp.tolist(), R0.tolist(), rot.tolist(), s0, s1, h, p_m.tolist(),
                                  R_m.tolist(), gain, v_lim, w_lim)
        V = np.empty(6)
        code, e_p, e_r = ak.auto_rates(seg, s0, s1, h, p_m, R_m, gain, v_lim, w_lim, V)
        assert code == (error > 3.0)
        if code == 0:
            assert (e_p, e_r, V.tolist()) == ref
        assert rms.auto_rates(seg, s0, s1, h, p_m, R_m, gain, v_lim, w_lim) == ref
        nv, nw = sp.norm3(ref[2][3:]), sp.norm3(ref[2][:3])
        limited += abs(nv - v_lim) <= 1e-12 * v_lim or abs(nw - w_lim) <= 1e-12 * w_lim
    assert limited > 300


def test_auto_command_kernel_equals_its_steps_bit_for_bit():
    """:func:`dynamics.arm_kernels.auto_command` against what the arm's controller does step by step: the auto step
    (:func:`dynamics.rms.auto_rates`) at E's pose (the motor angles' kinematics, or the pose given), the waypoint's
    tolerances, the point of resolution's speed and rate clipped (limits below the segment's too, which the arm
    never sets, so that the clip is reached), ``J_inv @ V`` (C and Fortran order) and the joint limits (scaled,
    stopped at an angle limit)."""
    rng = np.random.default_rng(43)
    geom = rms.rms_geometry(chain_from_urdf(reference_path("SRMS_Canadarm.urdf"), floating_base=False),
                            sp.pose(np.eye(3), [10.0, -2.0, -1.0]))
    limits = np.array([RATE, geom.q_lower + 0.1, geom.q_upper - 0.1])
    seen: collections.Counter = collections.Counter()
    for n in range(3000):
        error = [0.0, 1e-4, 0.3, math.pi - 1e-4][n % 4]
        p0, dp, R0, rot, s0, s1, h, p_m, R_m, gain, v_lim, w_lim = _auto_case(rng, error)
        seg = np.concatenate([p0, dp, R0, rot])
        theta_m = rng.uniform(geom.q_lower, geom.q_upper)
        motor = bool(rng.random() < 0.5)
        if motor:                                   # E at the motor angles, the reference's way
            R_OB, p, _, _, _ = rms.rms_kinematics_arrays(geom, theta_m)
            R_E, p_E = R_OB[rms.N_JOINTS], p[rms.N_JOINTS]
        else:
            R_E, p_E = R_m, p_m
        tol_p, tol_r = float(rng.choice([1e-6, 1e3])), float(rng.choice([1e-6, 1e3]))
        v_max, w_max = v_lim * float(rng.choice([0.5, 1.0, 2.0])), w_lim * float(rng.choice([0.5, 1.0, 2.0]))
        J_inv = rng.normal(0.0, 1.0, (6, 6)) * float(rng.choice([1e-3, 1.0, 30.0]))
        if rng.random() < 0.5:
            J_inv = np.asfortranarray(J_inv)
        theta = rng.uniform(geom.q_lower, geom.q_upper)
        out = np.empty((4, 6))
        code, e_p, e_r, nv, nw, r_max, j, clipped = rms.auto_command_arrays(
            geom.kernel_rows, theta_m, motor, R_m, p_m, seg, s0, s1, h, gain, v_lim, w_lim, tol_p, tol_r, v_max,
            w_max, J_inv, theta, limits, 2.0, out)
        seen[code] += 1
        Vk = np.empty(6)
        if ak.auto_rates(seg, s0, s1, h, p_E, R_E, gain, v_lim, w_lim, Vk)[0]:    # the step's kernel hands over
            assert code == 1
            continue
        k = rms.auto_rates(seg, s0, s1, h, p_E, R_E, gain, v_lim, w_lim)
        assert (e_p, e_r) == k[:2]
        if s0 >= 1.0 and e_p <= tol_p and e_r <= tol_r:
            assert code == 2
            continue
        assert code == 0
        V = k[2]
        ref_nv = math.sqrt(V[3] * V[3] + V[4] * V[4] + V[5] * V[5])
        ref_nw = math.sqrt(V[0] * V[0] + V[1] * V[1] + V[2] * V[2])
        if ref_nv > v_max * (1 + 1e-12):
            V[3:] = [x * (v_max / ref_nv) for x in V[3:]]
            seen["v clipped"] += 1
        if ref_nw > w_max * (1 + 1e-12):
            V[:3] = [x * (w_max / ref_nw) for x in V[:3]]
            seen["w clipped"] += 1
        qd = J_inv @ np.array(V)
        scaled, limited, ref_r, ref_j, ref_clipped = rms.limit_joint_rates(qd, theta, limits, 2.0)
        assert (nv, nw, r_max, j, clipped) == (ref_nv, ref_nw, ref_r, ref_j, ref_clipped)
        assert out.tobytes() == np.array([V, qd, scaled, limited]).tobytes()
        seen["scaled"] += j >= 0
        seen["stopped"] += clipped != 0
    assert min(seen[k] for k in (0, 1, 2, "v clipped", "w clipped", "scaled", "stopped")) > 20, seen


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_auto_step_refuses_what_the_reference_refuses(bad):
    """A slew that is not finite: the reference raises (ShapeError, or ValueError from math.sin(inf)); the kernel
    says so and the wrapper raises the same."""
    seg = np.concatenate([np.zeros(6), np.eye(3).ravel(), [bad, 0.0, 0.0]])
    eye = np.eye(3).ravel()
    with pytest.raises((ShapeError, ValueError)) as err:
        rms.auto_rates_rows([0.0] * 3, [0.0] * 3, eye.tolist(), [bad, 0.0, 0.0], 0.5, 0.5, 1e-3, [0.0] * 3,
                            eye.tolist(), 1.0, 1.0, 1.0)
    assert ak.auto_rates(seg, 0.5, 0.5, 1e-3, np.zeros(3), eye, 1.0, 1.0, 1.0, np.empty(6))[0] == 1
    with pytest.raises(err.type) as got:
        rms.auto_rates(seg, 0.5, 0.5, 1e-3, np.zeros(3), eye, 1.0, 1.0, 1.0)
    assert str(got.value) == str(err.value)


# ---------------------------------------------------------------- the state prediction


def test_prediction_kernel_equals_the_reference_bit_for_bit():
    rng = np.random.default_rng(13)
    for _ in range(3000):
        p, v, a = rng.normal(0.0, 100.0, 3), rng.normal(0.0, 1.0, 3), rng.normal(0.0, 1e-2, 3) * rng.integers(0, 2)
        q = sp.quat_normalize(rng.normal(size=4))
        # body rates from zero (the quaternion exponential's first-order branch) to fast
        w = rng.normal(size=3) * rng.choice([0.0, 1e-14, 1e-3, 1.0])
        wdot = rng.normal(size=3) * rng.choice([0.0, 1e-3])
        dt = float(rng.choice([1e-4, 2e-3, 0.02, 1.0]))
        rp, rq, rv, rw = rb.predict_rows(p.tolist(), q.tolist(), v.tolist(), w.tolist(), a.tolist(), wdot.tolist(), dt)
        x = rms.predict_state_arrays(p, q, v, w, a, wdot, dt)
        assert x is not None and x.tolist() == [*rp, *rq, *rv, *rw]
        ro = [f.copy() for f in (p, q, v, w, a, wdot)]        # read-only, as the bus decodes them
        for f in ro:
            f.flags.writeable = False
        assert rms.predict_state_arrays(*ro, dt).tolist() == x.tolist()


def test_prediction_hands_over_to_the_reference_what_it_does_not_follow():
    """Not arrays, another size or number of dimensions, a quaternion not finite: None (the arm's ``_held`` then
    runs the reference, which raises what it raises)."""
    z, q = np.zeros(3), np.array([1.0, 0.0, 0.0, 0.0])
    assert rms.predict_state_arrays(z, q.tolist(), z, z, z, z, 0.1) is None
    assert rms.predict_state_arrays(z, np.array([math.nan, 0.0, 0.0, 0.0]), z, z, z, z, 0.1) is None
    assert rms.predict_state_arrays(np.zeros(2), q, z, z, z, z, 0.1) is None
    assert rms.predict_state_arrays(z, q.reshape(2, 2), z, z, z, z, 0.1) is None


# ---------------------------------------------------------------- the station loads (RMLOAD)


def _loads_case(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Random points, link rotations and wrench; a third of the wrenches zero (a free arm's) or of signed zeros, and
    some rotations with zero entries (the sums' zero signs)."""
    pts = rng.normal(0.0, 5.0, (7, 3))
    R = np.array([_rotation(rng) for _ in range(7)])
    F = rng.normal(0.0, 100.0, 6)
    kind = rng.integers(0, 4)
    if kind == 1:
        F = np.zeros(6)
    elif kind == 2:
        F = np.zeros(6) * rng.choice([1.0, -1.0], 6)             # signed zeros
    elif kind == 3:
        F[rng.random(6) < 0.5] = 0.0
        R = np.where(rng.random((7, 3, 3)) < 0.3, 0.0, R) * rng.choice([1.0, -1.0])
    return pts, R, F


def test_station_loads_reference_equals_the_array_function_to_round_off():
    """The float reference and numpy's einsum and matmul (which may fuse multiply-adds, by CPU) agree to the
    round-off of their three-term sums: within 16 ε of each station's ‖M_e‖₁ + ‖r‖₁ ‖F_e‖₁ + ‖F_e‖₁ (an index or
    sign slip is off by the terms themselves)."""
    rng = np.random.default_rng(17)
    eps = np.finfo(float).eps
    for _ in range(3000):
        pts, R, F = _loads_case(rng)
        ref = np.array(ld.static_loads_rows(pts.tolist(), R.reshape(7, 9).tolist(), F.tolist()))
        arr = ld.static_loads(pts, R, F)
        r = np.abs(pts[6] - pts[list(ld.STATION_POINT)]).sum(axis=1)          # (9,) station → Eo
        m, f = np.abs(F[:3]).sum(), np.abs(F[3:]).sum()
        tol = 16.0 * eps * (m + r * f + f)
        assert np.all(np.abs(ref - arr) <= tol[:, None]), np.max(np.abs(ref - arr) - tol[:, None])


def test_station_loads_kernel_equals_the_reference_bit_for_bit():
    assert (ak._STATION_POINT, ak._STATION_LINK, ak._STATION_SIGN) == (
        ld.STATION_POINT, ld.STATION_LINK, ld.STATION_SIGN)
    rng = np.random.default_rng(19)
    for _ in range(3000):
        pts, R, F = _loads_case(rng)
        ref = ld.static_loads_rows(pts.tolist(), R.reshape(7, 9).tolist(), F.tolist())
        assert ld.static_loads_arrays(pts, R.reshape(7, 9), F).tobytes() == np.array(ref).tobytes()



# ---------------------------------------------------------------- the grappled twist and the massless arm's wrenches


def _body(rng: np.random.Generator) -> np.ndarray:
    """A rigid body's ``[p, quat, v, w]`` (13,): body rates from zero (the quaternion step's first-order branch),
    signed zeros and tiny to fast."""
    w = rng.normal(size=3) * rng.choice([0.0, -0.0, 1e-14, 1e-3, 1.0])
    return np.array([*rng.normal(0.0, 20.0, 3), *sp.quat_normalize(rng.normal(size=4)), *rng.normal(0.0, 0.1, 3), *w])


def test_grappled_twist_kernel_equals_the_reference_bit_for_bit():
    rng = np.random.default_rng(23)
    for _ in range(3000):
        orb, pay, e = _body(rng), _body(rng), rng.normal(0.0, 3.0, 3) * rng.choice([0.0, 1.0])
        ref = rms.grappled_twist_rows(orb.tolist(), pay.tolist(), e.tolist())
        assert rms.grappled_twist_arrays(orb, pay, e).tobytes() == np.array(ref).tobytes()


def test_grappled_twist_reference_is_the_relative_twist_of_the_frozen_grasp():
    """The reference against the checked array function (:func:`dynamics.rms.relative_twist`) with Eo's position in O
    composed from the poses: the same twist to round-off."""
    rng = np.random.default_rng(29)
    for _ in range(200):
        orb, pay, e = _body(rng), _body(rng), rng.normal(0.0, 3.0, 3)
        R_WO, R_WT = sp.quat_to_rotation(orb[3:7]), sp.quat_to_rotation(pay[3:7])
        p_OoEo_O = R_WO.T @ (pay[0:3] + R_WT @ e - orb[0:3])
        V = rms.relative_twist(R_WO, orb[10:13], orb[7:10], p_OoEo_O, R_WT, pay[10:13], pay[7:10], e)
        np.testing.assert_allclose(rms.grappled_twist_rows(orb.tolist(), pay.tolist(), e.tolist()), V,
                                   rtol=1e-12, atol=1e-12)


def test_massless_wrench_kernel_equals_the_reference_bit_for_bit():
    rng = np.random.default_rng(31)
    for _ in range(3000):
        orb = _body(rng)
        pE, pS, F = rng.normal(0.0, 10.0, 3), rng.normal(0.0, 10.0, 3), rng.normal(0.0, 1e3, 6)
        if rng.random() < 0.2:
            F = np.zeros(6) * rng.choice([1.0, -1.0], 6)             # a free arm's (signed zeros)
        h, propagate = float(rng.choice([0.0, 2e-3, 0.1])), bool(rng.random() < 0.8)
        ref = rms.massless_wrench_rows(orb.tolist(), h, propagate, pE.tolist(), pS.tolist(), F.tolist())
        k = rms.massless_wrench_arrays(orb, h, propagate, pE, pS, F)
        assert ref is not None and k is not None and k.tobytes() == np.array(ref).tobytes()
    bad = _body(rng)
    bad[12] = np.nan                                                 # the reference's quat_integrate_rows raises
    assert rms.massless_wrench_rows(bad.tolist(), 2e-3, True, [0.0] * 3, [0.0] * 3, [0.0] * 6) is None
    assert rms.massless_wrench_arrays(bad, 2e-3, True, np.zeros(3), np.zeros(3), np.zeros(6)) is None


def test_the_massless_arms_compiled_outputs_are_its_general_ones():
    """A massless arm's step publishes, through the compiled kernel, what its general path (any plant's: the
    orbiter propagated by its quaternion step, the plant's wrenches) gives: the same messages bit for bit, at
    coupling instants and between them, grappled and free."""
    m = arm.build({"arm": {"model": "massless"}, "sim": {}}, "arm", 2_000_000)
    m.set_coupling({arm.STATE: 10_000_000})
    c = m.new_context()
    rng = np.random.default_rng(37)
    h = 2e-3
    for i in range(40):
        c.orb_x = _body(rng)
        x = c.orb_x.tolist()
        c.orb_f = (x[0:3], tuple(x[3:7]), x[10:13], x[7:10])
        c.F_Eo_O = rng.normal(0.0, 100.0, 6) if i % 3 else np.zeros(6)
        c.grappled = bool(i % 2)
        t = i * 2_000_000
        k = rms.massless_wrench_arrays(c.orb_x, h, True, c.rows[1][arm.N_JOINTS], m._p_OS_a, c.F_Eo_O)
        fast = m._outputs(c, None, t, k)
        p, q, w, v = c.orb_f
        slow = m._outputs(c, ([p[0] + v[0] * h, p[1] + v[1] * h, p[2] + v[2] * h],
                              sp.quat_integrate_rows(q, w[0], w[1], w[2], h), w, v), t)
        assert fast.keys() == slow.keys()
        for topic in fast:
            assert fast[topic].keys() == slow[topic].keys()
            for key, a in fast[topic].items():
                b = slow[topic][key]
                if isinstance(a, np.ndarray):
                    assert a.tobytes() == b.tobytes() and a.shape == b.shape, (topic, key)
                else:
                    assert a == b, (topic, key)



def _same(a: object, b: object) -> bool:
    """Equal to the bit: arrays by bytes, shape and layout; containers and dataclasses field by field."""
    if isinstance(a, np.ndarray):
        return (isinstance(b, np.ndarray) and a.shape == b.shape and a.dtype == b.dtype
                and a.tobytes(order="A") == b.tobytes(order="A") and a.flags.f_contiguous == b.flags.f_contiguous)
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if hasattr(a, "__dataclass_fields__"):
        return type(a) is type(b) and all(_same(getattr(a, f), getattr(b, f)) for f in a.__dataclass_fields__)
    if isinstance(a, float) and isinstance(b, float):
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b) or (a != a and b != b)
    return bool(a == b)


@pytest.mark.parametrize("table", [{}, {"sigma_min": 2.0}, {"servo_substeps": 3}],
                         ids=["default", "damped", "substeps"])
def test_the_fused_arm_steps_equal_the_separate_kernels_bit_for_bit(table, monkeypatch):
    """The massless arm's one-call steps, grappled (:func:`dynamics.arm_kernels.grappled_step`), of an auto segment
    (:func:`dynamics.arm_kernels.auto_command`) and RMSFLX's terms each tenth (:func:`dynamics.arm_kernels.flex_terms`),
    against the same steps made of the separate kernels and numpy (``plant.fused = controller.fused = kin.fused =
    False``): the whole context and every message equal to the bit after each step. The arm flies auto segments free
    and grappled (waypoints reached, the next begun), the bodies move and turn (predicted between their samples),
    direct drive and the brakes; ``sigma_min`` above the arm's smallest singular value keeps every step damped (the
    SVD's inverse, the caller's to make), the default mostly Weyl's LU. Every outcome of both step kernels is
    reached."""
    codes: dict[str, collections.Counter] = {"step": collections.Counter(), "auto": collections.Counter()}
    step, auto = rms.grappled_step_arrays, rms.auto_command_arrays

    def counted_step(*a):
        r = step(*a)
        codes["step"][r[0], r[8] is not None] += 1
        return r

    def counted_auto(*a):
        r = auto(*a)
        codes["auto"][r[0]] += 1
        return r

    monkeypatch.setattr(rms, "grappled_step_arrays", counted_step)
    monkeypatch.setattr(rms, "auto_command_arrays", counted_auto)
    rng = np.random.default_rng(41)
    models = [BoundModel(arm.build({"arm": table}, "arm", 2_000_000)) for _ in range(2)]
    models[1].obj.plant.fused = models[1].obj.controller.fused = models[1].obj.kin.fused = False
    X_OE = models[0].obj.pose(models[0].ctx).X_OE
    p_E = X_OE[:3, 3]
    p_T = p_E + X_OE[:3, :3] @ [3.0, 0.0, 0.0]
    w_T, v_T = rng.normal(0.0, 2e-3, 3), rng.normal(0.0, 5e-3, 3)
    w_O, v_O = rng.normal(0.0, 5e-4, 3), rng.normal(0.0, 1e-3, 3)

    def fly(*offsets: list[float]) -> list[dict]:
        return [{"kind": "auto", "waypoints": [{"p": (p_E + o).tolist(), "v": 0.05} for o in offsets]}]

    cmds = {0: fly([0.002, 0.0, 0.0], [0.002, 0.003, 0.0]), 200: [{"kind": "capture"}],
            220: fly([0.3, 0.1, -0.2]), 400: [{"kind": "direct", "joint": "wrist_pitch", "drive": 0.3}],
            450: [{"kind": "brakes", "on": True}], 480: [{"kind": "brakes", "on": False}],
            500: fly([0.0, 0.0, 0.001], [0.0, 0.0, 0.0])}
    for m in models:
        m.initial(0)
    grappled = 0
    for k in range(900):
        t = k * 2_000_000
        ts = t - t % 10_000_000                                      # samples at 100 Hz, predicted to each step
        a_O, a_T = rng.normal(0.0, 1e-5, 3), rng.normal(0.0, 1e-4, 3)
        orb = Sample(ts, 10_000_000, "orbiter", 0, {
            "p_WoOo_W": v_O * ts * 1e-9, "quat_WO": sp.quat_normalize([1.0, *(w_O * ts * 5e-10)]), "w_WO_O": w_O,
            "v_WOo_W": v_O, "a_WOo_W": a_O, "wdot_WO_O": np.zeros(3)})
        pay = Sample(ts, 10_000_000, "contact", 0, {
            "p_WoTo_W": p_T + v_T * ts * 1e-9, "quat_WT": sp.quat_normalize([1.0, *(w_T * ts * 5e-10)]),
            "w_WT_T": w_T, "v_WTo_W": v_T, "a_WTo_W": a_T, "wdot_WT_T": rng.normal(0.0, 1e-5, 3), "grappled": True,
            "berthed": False})
        ev = {}
        if k in cmds:
            key = "contact/event" if cmds[k][0]["kind"] == "capture" else "operator/command"
            ev[key] = [Sample(t, 2_000_000, "x", 0, {"events": cmds[k]})]
        outs = [m.step(t, 2_000_000, StepInputs(t, 2_000_000, {"orbiter/state": orb, "payload/state": pay}, {}, ev))
                for m in models]
        assert _same(outs[0], outs[1]), k
        assert _same(models[0].ctx, models[1].ctx), k
        grappled += models[0].ctx.grappled
    assert grappled > 600 and models[0].ctx.grappled
    assert codes["auto"][0] > 100 and codes["auto"][2] >= 1, codes         # a waypoint reached, the next begun
    if "sigma_min" in table:                                                 # every step the SVD's: status 1
        assert models[0].ctx.damped and codes["step"][1, False] > 600, codes
    else:                                                                    # Weyl's LU, and the SVD's each tick
        assert codes["step"][0, True] > 100 and codes["step"][1, False] > 10, codes



@pytest.mark.parametrize("flexibility", ["active", "joints"])
def test_flex_terms_kernel_equals_the_reference_bit_for_bit(flexibility):
    """RMSFLX's compiled terms against :func:`dynamics.flexibility.arm_flexibility`, ``J⁻¹ γ J⁻ᵀ`` symmetrized,
    :func:`dynamics.rms.regular_inverse` and its diagonal (:meth:`services.arm.ArmKinematics.flex_terms`'s steps), at
    random configurations of the SRMS (the inverse in LU's Fortran order and in C order); where the reference finds
    a spring not positive or γ_J singular, the kernel hands over (None)."""
    m = arm.build({"arm": {"flexibility": flexibility}}, "arm", 2_000_000)
    kin, geom = m.kin, m.geometry
    beams = () if flexibility == "joints" else kin.beams
    rng = np.random.default_rng(47)
    agree = handed = 0
    for n in range(1500):
        theta = rng.uniform(geom.q_lower, geom.q_upper)
        R_OB, p, u, J, J_inv = rms.rms_kinematics_arrays(geom, theta, True)
        if J_inv is None:
            continue
        if n % 2:
            J_inv = np.ascontiguousarray(J_inv)
        k_joint = kin.joint_stiffness * (rng.choice([1.0, -1.0]) if n % 50 == 0 else 1.0)   # now and then refused
        got = rms.flex_terms_arrays(p, u, kin._beam_rows, k_joint, J_inv)
        try:
            g = fx.arm_flexibility(p, u, beams, k_joint)
        except ModelError:
            assert got is None
            handed += 1
            continue
        X = J_inv @ g @ J_inv.T
        gamma_J = 0.5 * (X + X.T)
        K = rms.regular_inverse(gamma_J)
        k = None if K is None else np.diagonal(K).copy()
        if k is None or not np.all(np.isfinite(k) & (k > 0.0)):
            assert got is None
            handed += 1
            continue
        assert got is not None
        assert got[0].tobytes() == gamma_J.tobytes() and got[1].tobytes() == k.tobytes()
        agree += 1
    assert agree > 1000 and handed >= 10, (agree, handed)


# ---------------------------------------------------------------- the Jacobian's SVD inverse


def test_svd_inverse_of_the_step_equals_the_checked_one_bit_for_bit():
    """``jacobian_inverse_arrays`` (numpy's SVD gufunc, the damping's scale on floats) is ``jacobian_inverse``:
    regular, damped near a singularity, exactly singular without damping (its infinities and NaN), and it refuses a
    matrix that is not finite."""
    rng = np.random.default_rng(23)
    for n in range(2000):
        J = rng.normal(size=(6, 6))
        if n % 3 == 1:                                   # near a singularity: σ_6 below sigma_min
            U, s, Vt = np.linalg.svd(J)
            s[-1] = float(rng.choice([0.0, 1e-9, 1e-3, 0.04]))
            J = (U * s) @ Vt
        damping = float(rng.choice([0.0, 0.05])) if n % 3 == 2 else 0.05
        expected = rms.jacobian_inverse(J, 0.05, damping)
        got = rms.jacobian_inverse_arrays(J, 0.05, damping)
        assert got[0].tobytes() == expected[0].tobytes() and got[1:] == expected[1:]
    J = np.zeros((6, 6))
    J[:5, :5] = np.eye(5)                                # σ_6 exactly 0, no damping: 1/0 as numpy gives it
    with np.errstate(divide="ignore", invalid="ignore"):
        expected = rms.jacobian_inverse(J, 0.05, 0.0)
        got = rms.jacobian_inverse_arrays(J, 0.05, 0.0)
    assert got[0].tobytes() == expected[0].tobytes() and got[1:] == expected[1:]
    for bad in (math.nan, math.inf):
        J = np.eye(6)
        J[2, 3] = bad
        with pytest.raises(ShapeError, match="finite"):
            rms.jacobian_inverse_arrays(J, 0.05, 0.05)
    J = np.full((6, 6), 1e308)                           # finite, its sum overflows: still inverted
    with np.errstate(over="ignore", invalid="ignore"):
        expected = rms.jacobian_inverse(J, 0.05, 0.05)
    assert rms.jacobian_inverse_arrays(J, 0.05, 0.05)[0].tobytes() == expected[0].tobytes()


# ---------------------------------------------------------------- loading


KERNELS = ("servo_step", "rms_kinematics", "limit_joint_rates", "auto_rates", "predict_state", "static_loads",
           "grappled_twist", "massless_wrench", "grappled_step", "auto_command", "flex_terms")


def _step(m: BoundModel, k: int, state: dict, ev: dict | None = None) -> None:
    m.step(k * 2_000_000, 2_000_000, StepInputs(k * 2_000_000, 2_000_000, state, {}, ev or {}))


def _events(*evs: dict) -> list[Sample]:
    return [Sample(0, 2_000_000, "x", 0, {"events": list(evs)})]


@pytest.mark.parametrize("model,decoded", [("massless", False), ("massless", True), ("multibody", False)])
def test_the_build_loads_every_kernel_the_step_runs(model, decoded):
    """After ``build`` a step of any mode compiles nothing: the loaders ran each kernel for the argument types the
    step passes (a new signature would be compiled, seconds, in a realtime step), with its inputs' arrays the
    producers' own (a run in one process) or read-only (as the bus decodes them)."""
    m = BoundModel(arm.build({"arm": {"model": model}}, "arm", 2_000_000))
    before = {k: len(getattr(ak, k).signatures) for k in KERNELS}
    assert min(before.values()) >= 1, before
    def z() -> np.ndarray:
        return np.zeros(3)

    orb = Sample(0, 10_000_000, "orbiter", 0, {"p_WoOo_W": z(), "quat_WO": np.array([1.0, 0, 0, 0]), "w_WO_O": z(),
                                                "v_WOo_W": z(), "a_WOo_W": z(), "wdot_WO_O": z()})
    pay = Sample(0, 10_000_000, "contact", 0, {
        "p_WoTo_W": np.array([27.0, -2.74, -0.44]), "quat_WT": np.array([1.0, 0, 0, 0]), "w_WT_T": z(),
        "v_WTo_W": np.array([0.01, 0.0, 0.0]), "a_WTo_W": z(), "wdot_WT_T": z(), "grappled": False,
        "berthed": False})
    if decoded:
        for smp in (orb, pay):
            for x in smp.body.values():
                if isinstance(x, np.ndarray):
                    x.flags.writeable = False
    free, held = {"orbiter/state": orb}, {"orbiter/state": orb, "payload/state": pay}
    m.initial(0)
    k = 0
    for state, cmds, contact in (
            (free, [{"kind": "mode", "mode": "manual"}, {"kind": "rate", "v": [0.05, 0.0, 0.0]}], None),
            (free, [{"kind": "joint", "joint": "elbow_pitch", "rate": 0.01}], None),
            (free, [{"kind": "direct", "joint": "wrist_roll", "drive": 0.5}], None),
            (free, [{"kind": "auto", "waypoints": [{"p": [20.0, -2.0, 1.0]}]}], None),
            (held, [], [{"kind": "capture"}]),
            (held, [{"kind": "auto", "waypoints": [{"p": [20.0, -2.0, 1.0]}]}], None),
            (held, [{"kind": "brakes", "on": True}], None)):
        ev = {"operator/command": _events(*cmds)} if cmds else {}
        if contact:
            ev["contact/event"] = _events(*contact)
        for n in range(30):
            _step(m, k, state, ev if n == 0 else None)
            k += 1
    assert {k: len(getattr(ak, k).signatures) for k in KERNELS} == before


def test_a_configuration_check_imports_no_numba():
    code = ("import runpy, sys\nsys.argv = ['launch.py', 'check', 'configs/srms_berthing.toml']\n"
            "try:\n    runpy.run_path('launch.py', run_name='__main__')\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in ('numba', 'dynamics.arm_kernels') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]"
