"""The compiled workspace check and clamp (dynamics.stewart_kernels) against their Python-float references.

Once :meth:`dynamics.stewart.StewartRig.load_kernels` ran, :meth:`~dynamics.stewart.StewartRig.assess` runs
:func:`dynamics.stewart_kernels.assess` and :meth:`dynamics.stewart.PoseMap.to_rig` the search
:func:`dynamics.stewart_kernels.clamp_search`; the references are :meth:`~dynamics.stewart.StewartRig._margin`,
:meth:`~dynamics.stewart.StewartRig._conditioned` and :func:`dynamics.stewart.last_feasible` on
:class:`dynamics.stewart.GeodesicPath`, the same operations on Python floats. Compiled without fast-math, the
two must agree bit for bit: margins, leg lengths, Jacobians, verdicts (the singular values computed at the same
poses), the clamped poses and fractions, over poses inside the workspace and outside it by the stroke, by a
joint cone and by the conditioning, and a pose that is not finite must be refused with the reference's error.
The kinematics themselves (closed forms, finite differences) are test_stewart's.
"""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dynamics import stewart_kernels as sk
from dynamics.spatial import pose, quat_to_rotation
from dynamics.stewart import (
    LAST_FEASIBLE_MAX_ITER,
    LAST_FEASIBLE_TOL,
    GeodesicPath,
    PoseMap,
    RigLimits,
    StewartRig,
    _geodesic_theta,
    axis_map_matrix,
    last_feasible,
    pose_from_vector,
)
from errors import ShapeError

ROOT = Path(__file__).resolve().parents[2]
LIM = RigLimits.uniform(6, 0.40, 0.70, 0.5, 5.0, 100.0)
RIGS = {
    "stroke": {},
    "cones": {"joint_cone_base": 0.5, "joint_cone_platform": 0.35},
    "conditioning": {"cond_max": 13.6},  # neutral: cond 13.0 (13.3 tilted): the bound and the SVD both decide
}


TILT = pose_from_vector([0.01, -0.02, 0.01, 0.05, -0.04, 0.1])
"""A neutral pose of the map off the rig's (inside the workspace): the geodesic then starts from a rotation, so that
every term of its expansion counts."""


def _twins(kind: str) -> tuple[StewartRig, StewartRig]:
    """Two rigs of the same geometry: the reference (Python floats) and the compiled one."""
    ref, fast = (StewartRig(0.3, 0.2, math.radians(20), math.radians(20), 0.5, LIM, **RIGS[kind]) for _ in range(2))
    fast.load_kernels()
    assert fast.compiled and not ref.compiled
    return ref, fast


def _stream(rng: np.random.Generator, n: int) -> list[np.ndarray]:
    """Relative poses: a random walk (consecutive poses close, as a bridge's stream) with jumps, from within a few
    millimetres of neutral to far outside the stroke (0.3 m, 1.5 rad), and now and then a half turn."""
    out, x = [], np.zeros(6)
    for i in range(n):
        if i % 5 == 0:
            x = rng.normal(size=6) * np.r_[0.1, 0.1, 0.1, 0.5, 0.5, 0.5] * rng.choice([0.02, 0.3, 1.0, 3.0])
        else:
            x = x + rng.normal(size=6) * 0.003
        X = pose_from_vector(x)
        if i % 97 == 0:  # a rotation by π (the geodesic's rotation vector through the quaternion)
            X = pose(quat_to_rotation(_half_turn(rng)), x[:3])
        out.append(X)
    return out


def _half_turn(rng: np.random.Generator) -> np.ndarray:
    """A unit quaternion of a rotation by π about a random axis (scalar part 0)."""
    k = rng.normal(size=3)
    return np.r_[0.0, k / np.linalg.norm(k)]


@pytest.mark.parametrize("kind", list(RIGS))
def test_assess_equals_the_reference_bit_for_bit(kind):
    ref, fast = _twins(kind)
    rng = np.random.default_rng(20261128)
    inside = outside = 0
    for X_LB in _stream(rng, 1500):
        X = ref.neutral @ X_LB
        a_ref, m_ref, in_ref = ref.assess(X)
        a, m, ok = fast.assess(X)
        assert (a.tolist(), m, ok) == (a_ref.tolist(), m_ref, in_ref), X.tolist()
        inside += ok
        outside += not ok
        # the same singular values computed at the same poses: the bound's reference Jacobians equal
        assert (fast._cond_ref is None) == (ref._cond_ref is None)
        if ref._cond_ref is not None:
            assert fast._cond_ref[0].tolist() == ref._cond_ref[0].tolist()
            assert fast._cond_ref[1:] == ref._cond_ref[1:]
    assert inside > 100 and outside > 100


@pytest.mark.parametrize("kind", list(RIGS))
def test_the_margin_and_jacobian_equal_the_references(kind):
    """The kernel's margin, lengths and Jacobian rows against :meth:`_margin` and :meth:`_jacobian_of`."""
    ref, fast = _twins(kind)
    rng = np.random.default_rng(3)
    J0, s_max, s_min = np.zeros((6, 6)), 0.0, 0.0
    for X_LB in _stream(rng, 400):
        X = np.ascontiguousarray(ref.neutral @ X_LB)
        m_ref, legs = ref._margin(X[:3, :3].tolist(), X[:3, 3].tolist())
        lengths, J = np.full(6, np.nan), np.full((6, 6), np.nan)
        verdict, m = sk.assess(X, fast._rows_array, fast._cone_scale, fast._cos_base, fast._cos_platform, False, J0,
                               s_max, s_min, float(fast.cond_max), lengths, J)
        assert m == m_ref and lengths.tolist() == [leg[0] for leg in legs]
        assert J.tolist() == ref._jacobian_of(legs).tolist()
        assert verdict == (sk.UNDECIDED if m >= 0.0 else sk.OUTSIDE)


@pytest.mark.parametrize("kind", list(RIGS))
def test_the_clamp_search_equals_last_feasible_on_the_geodesic(kind):
    """:func:`clamp_search`'s edge, and the pose, lengths and Jacobian there, against the reference search."""
    ref, fast = _twins(kind)
    rng = np.random.default_rng(4)
    X_a = ref.neutral @ TILT
    g0 = ref.assess(X_a)[1]
    assert g0 > 0.0
    searched = 0
    for X_LB in _stream(rng, 400):
        X_b = X_a @ X_LB
        g1 = ref.assess(X_b)[1]
        path, seen = GeodesicPath(X_a, X_b), {}

        def g(s, path=path, seen=seen):
            R, p = path.floats(s)
            seen[s] = (R, p, *ref._margin(R, p))
            return seen[s][2]

        s_ref = last_feasible(g, g0=g0, g1=g1)
        tx, ty, tz = _geodesic_theta(X_a, X_b)  # (numpy's product and rotation_vector: the path's own)
        X, lengths, J = np.full((4, 4), np.nan), np.full(6, np.nan), np.full((6, 6), np.nan)
        s, verdict, m = sk.clamp_search(
            X_a, np.ascontiguousarray(X_b), tx, ty, tz, fast._rows_array, fast._cone_scale, fast._cos_base,
            fast._cos_platform, g0, g1, LAST_FEASIBLE_TOL, LAST_FEASIBLE_MAX_ITER, False, np.zeros((6, 6)), 0.0, 0.0,
            float(fast.cond_max), X, lengths, J)
        assert s == s_ref
        assert (verdict != sk.NOT_FINITE) == (s in seen)
        if s in seen:
            searched += 1
            R, p, m_ref, legs = seen[s]
            assert X.tolist() == [R[0] + [p[0]], R[1] + [p[1]], R[2] + [p[2]], [0.0, 0.0, 0.0, 1.0]]
            assert m == m_ref and lengths.tolist() == [leg[0] for leg in legs]
            assert J.tolist() == ref._jacobian_of(legs).tolist()
    assert searched > 100


@pytest.mark.parametrize("kind", list(RIGS))
@pytest.mark.parametrize("mapping", ["plain", "tilted neutral", "axis map, scale, rot_scale"])
def test_to_rig_equals_the_reference_bit_for_bit(kind, mapping, monkeypatch):
    ref, fast = _twins(kind)
    kw = {"scale": 0.8, "rot_scale": 0.7, "M": axis_map_matrix(("y", "-x", "z"))} if mapping.startswith("axis") else {}
    X0 = ref.neutral @ TILT if mapping == "tilted neutral" else ref.neutral
    pm_ref, pm = PoseMap(ref, X0, **kw), PoseMap(fast, X0.copy(), **kw)
    bisected = 0
    in_workspace = StewartRig.in_workspace

    def counting(self, X):
        nonlocal bisected
        bisected += 1
        return in_workspace(self, X)

    monkeypatch.setattr(StewartRig, "in_workspace", counting)
    rng = np.random.default_rng(20261129)
    clamped = 0
    assert pm._fast == (not mapping.startswith("axis")) and not pm_ref._fast  # (the short way on a plain map)
    for i, X_LB in enumerate(_stream(rng, 1200)):
        a, b = pm_ref.to_rig(X_LB), pm.to_rig(X_LB, finite=i % 2 == 0)
        assert b.X_RP.tolist() == a.X_RP.tolist() and b.axes.tolist() == a.axes.tolist(), X_LB.tolist()
        assert b.fraction == a.fraction and b.requested.tolist() == a.requested.tolist()
        clamped += a.clamped
    assert 200 < clamped < 1100
    if kind == "conditioning":  # poses at the stroke's edge that are ill-conditioned: the bisection ran
        assert bisected > 0


def test_a_pose_that_is_not_finite_is_refused_as_by_the_reference():
    ref, fast = _twins("stroke")
    X = ref.neutral.copy()
    X[1, 3] = math.nan
    with pytest.raises(ShapeError) as want:
        ref.assess(X)
    with pytest.raises(ShapeError) as got:
        fast.assess(X)
    assert str(got.value) == str(want.value)
    X_LB = np.eye(4)
    X_LB[0, 0] = math.inf
    with pytest.raises(ShapeError) as want:
        PoseMap(ref, ref.neutral).to_rig(X_LB)
    with pytest.raises(ShapeError) as got:
        PoseMap(fast, fast.neutral).to_rig(X_LB)
    assert str(got.value) == str(want.value)
    for i in range(16):  # told it is finite, the short way still finds it is not, wherever the number is
        X_LB = np.eye(4)
        X_LB.flat[i] = math.nan if i % 2 else -math.inf
        with pytest.raises(ShapeError) as got, np.errstate(invalid="ignore"):
            PoseMap(fast, fast.neutral).to_rig(X_LB, finite=True)
        assert str(got.value) == str(want.value)


def test_to_rig_runs_the_compiled_kernels(monkeypatch):
    """The compiled rig takes the kernels' path (a reverted dispatch would leave the tests above comparing the
    reference with itself), and the reference rig does not."""
    ref, fast = _twins("stroke")  # (loaded: the kernels ran once)
    calls = {"assess": 0, "clamp_search": 0}
    for name in calls:
        kernel = getattr(sk, name)

        def counting(*a, _k=kernel, _n=name):
            calls[_n] += 1
            return _k(*a)

        monkeypatch.setattr(sk, name, counting)
    far = pose(np.eye(3), [0.0, 0.0, 0.4])  # beyond the stroke: clamped
    PoseMap(ref, ref.neutral).to_rig(far)
    assert calls == {"assess": 0, "clamp_search": 0}
    res = PoseMap(fast, fast.neutral).to_rig(far)
    assert res.clamped and calls["assess"] >= 1 and calls["clamp_search"] == 1


def test_the_bridge_loads_the_kernels_and_a_check_does_not():
    """The ``hil`` bridge's model loads them when it is built; checking ``[hil]`` (which builds the rig and its
    pose map, and assesses the neutral pose) imports no numba."""
    code = ("import sys\n"
            "from hil import bridge\n"
            "from hil.config import hil_table, parse\n"
            "from protocol.config import load\n"
            "config = load('configs/srms_berthing.toml')\n"
            "cfg = parse(hil_table(config))\n"
            "assert not cfg.rig.compiled and 'numba' not in sys.modules, 'numba imported by a check'\n"
            "b = bridge.HilBridge(cfg, 'hil', 4_000_000, None)\n"
            "assert cfg.rig.compiled and 'numba' in sys.modules\n")
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
