"""Shipped configs: every one passes ``launch.py check``; the default scenario's geometry holds.

The geometry checks are independent of the services: they re-derive, from the scenario's
numbers alone, what the operator script should achieve, with the SVDS kinematics of the
arm (:mod:`dynamics.rms`), free rigid bodies in the orbit (:mod:`dynamics.rigid_body`) and
the capture envelope test (:func:`dynamics.contact.capture_check`):

- the manual augmented rate commands of the approach, resolved through ``J^-1`` from the
  arm's initial angles, bring the end effector into the capture envelope of the drifting
  grapple fixture at the capture command, with margin, and keep every joint in its range;
- every auto-sequence waypoint is reachable inside the joint ranges, away from the
  singularity threshold, and places the berthing interface where the script says
  (pre-berth above the seats, then into them);
- the tables that repeat a frame (``hil.X_OL``/``orbiter.X_OL``, ``hil.X_TB``/``payload.X_TB``)
  agree, the latch seats sit under the trunnions at the berthed pose, and the realtime and
  two-host configs run the same scenario.
"""

from __future__ import annotations

import copy
import json
import re
import tomllib
from pathlib import Path

import numpy as np
import pytest
from scipy.integrate import solve_ivp
from scipy.optimize import least_squares
from scipy.spatial.transform import Rotation

import launch
from dynamics import rigid_body as rb
from dynamics import rms
from dynamics.cases import reference_path
from dynamics.contact import CaptureEnvelope, capture_check
from dynamics.orbit import CircularOrbit
from dynamics.spatial import (
    pose,
    pose_from_vector,
    pose_inverse,
    quat_to_rotation,
    shift_twist,
)
from dynamics.urdf import chain_from_urdf

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = sorted((ROOT / "configs").glob("*.toml"))
DEFAULT = ROOT / "configs" / "srms_berthing.toml"
SCENARIO_TABLES = ("orbiter", "arm", "payload", "contact", "operator")


def _load(path: Path) -> dict:
    with path.open("rb") as f:
        return tomllib.load(f)


@pytest.fixture(scope="module")
def cfg() -> dict:
    return _load(DEFAULT)


def arm_geometry(cfg: dict) -> rms.RmsGeometry:
    """The SRMS on the orbiter as the scenario's ``[arm]`` places it (SVDS kinematics)."""
    arm = cfg["arm"]
    R_OS = Rotation.from_euler("xyz", arm["rpy_OS"]).as_matrix()  # URDF roll-pitch-yaw, as services.arm
    chain = chain_from_urdf(reference_path("SRMS_Canadarm.urdf"), floating_base=False)
    return rms.rms_geometry(chain, pose(R_OS, arm["p_OoSo_O"]))


@pytest.fixture(scope="module")
def geom(cfg: dict) -> rms.RmsGeometry:
    return arm_geometry(cfg)


# ---------------------------------------------------------------- every config passes check
@pytest.mark.parametrize("path", CONFIGS, ids=[p.name for p in CONFIGS])
def test_shipped_config_passes_check(path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if "security" in _load(path):
        # CurveZMQ keys are made per installation (README: launch.py keys configs/keys), never shipped
        (tmp_path / path.name).write_text(path.read_text())
        path = tmp_path / path.name
        assert launch.main(["check", str(path)]) == 2          # refused without its keys
        capsys.readouterr()
        assert launch.main(["keys", str(tmp_path / _load(path)["security"]["keys_dir"])]) == 0
        capsys.readouterr()
    assert launch.main(["check", str(path)]) == 0
    plan = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert plan["ok"] is True and plan["services"]


def test_default_config_is_the_embedded_default() -> None:
    assert Path(launch.DEFAULT_CONFIG).resolve() == DEFAULT.resolve()


def test_default_scenario_rates_are_the_issue_rates(cfg: dict) -> None:
    rates = {n: s["rate_hz"] for n, s in cfg["services"].items()}
    assert rates["orbiter"] == 100 and rates["arm"] == 500 and rates["contact"] == 1000 and rates["hil"] == 250
    assert cfg["sim"]["mode"] == "lockstep" and cfg["sim"]["duration"] <= 120.0


def test_check_rejects_a_broken_copy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The check is not vacuous: a wrong rate and a joint angle out of range are both reported."""
    bad = re.sub(r"q0 = \[[-0-9.]+,", "q0 = [3.5,", DEFAULT.read_text().replace("rate_hz = 250", "rate_hz = 333"))
    p = tmp_path / "bad.toml"
    p.write_text(bad)
    assert launch.main(["check", str(p)]) == 2
    err = capsys.readouterr().err
    assert "hil" in err and "arm.q0[0]" in err


# ---------------------------------------------------------------- frames repeated across tables
def test_hil_relates_the_latch_and_the_berthing_interface(cfg: dict) -> None:
    from hil.config import hil_table

    hil = hil_table(cfg)
    assert hil["X_OL"] == cfg["orbiter"]["X_OL"]
    assert hil["X_TB"] == cfg["payload"]["X_TB"]


def test_guides_hold_the_trunnions_when_berthed(cfg: dict) -> None:
    """Every latch guide wall passes through its trunnion's berthed position, faces up out of
    the bay, and together they hold the payload: at the berthed pose, small displacements of B
    in x, y and z (down) and small rotations all push some trunnion into some wall."""
    X_LB = pose_from_vector(cfg["contact"]["latch"]["X_LB"])
    X_OL = pose_from_vector(cfg["orbiter"]["X_OL"])
    pts = np.asarray(cfg["payload"]["points_B"], dtype=float)
    surfaces = cfg["contact"]["surfaces"]
    assert sorted({s["point"] for s in surfaces}) == list(range(len(pts)))
    for s in surfaces:
        np.testing.assert_allclose(s["p_LoSo_L"], X_LB[:3, :3] @ pts[s["point"]] + X_LB[:3, 3], atol=1e-12)
        n_O = X_OL[:3, :3] @ np.asarray(s["n_L"]) / np.linalg.norm(s["n_L"])
        assert n_O[2] < -0.5                                  # up, out of the bay (O z down)

    def penetrates(dX: np.ndarray) -> bool:
        X = X_LB @ dX
        for s in surfaces:
            p = X[:3, :3] @ pts[s["point"]] + X[:3, 3]
            if np.dot(np.asarray(s["n_L"]), p - np.asarray(s["p_LoSo_L"])) < -1e-6:
                return True
        return False

    for k in range(6):
        for sign in (1.0, -1.0):
            d = np.zeros(6)
            d[k] = sign * (0.01 if k < 3 else 0.005)
            if k == 2 and sign < 0:
                continue                                       # lifting off the guides is free
            assert penetrates(pose_from_vector(d)), f"B free to move along {d} when berthed"


def test_payload_starts_above_the_bay_clear_of_the_sill(cfg: dict) -> None:
    X_WO = pose_from_vector(cfg["orbiter"]["X_WO"])
    X_OT = pose_inverse(X_WO) @ pose_from_vector(cfg["payload"]["X_WT"])
    X_OT_berthed = pose_from_vector(cfg["orbiter"]["X_OL"]) @ pose_from_vector(
        cfg["contact"]["latch"]["X_LB"]) @ pose_inverse(pose_from_vector(cfg["payload"]["X_TB"]))
    lift = X_OT_berthed[2, 3] - X_OT[2, 3]          # O z points down, into the bay
    assert 1.0 < lift < 5.0
    # its residual rates are small (SRMS capture envelope rates, reference README)
    assert np.linalg.norm(cfg["payload"]["w_WT_T"]) < np.radians(0.1)
    assert np.linalg.norm(cfg["payload"]["v_WTo_W"]) < 0.01


# ---------------------------------------------------------------- kinematic helpers
def _script(cfg: dict, cmd: str) -> list[dict]:
    return [c for c in cfg["operator"]["script"] if c["cmd"] == cmd]


def _bodies(cfg: dict) -> tuple:
    orb, pay = cfg["orbiter"], cfg["payload"]
    m_O = rb.RigidBodyModel("orbiter", orb["mass"], np.diag(orb["inertia"]))
    m_T = rb.RigidBodyModel("payload", pay["mass"], np.diag(pay["inertia"]))

    def state(X, v, w):
        Xm = pose_from_vector(X)
        return rb.RigidBodyState(Xm[:3, 3], Rotation.from_matrix(Xm[:3, :3]).as_quat(scalar_first=True), v, w)

    s_O = state(orb["X_WO"], orb["v_WOo_W"], orb["w_WO_O"])
    s_T = state(pay["X_WT"], pay["v_WTo_W"], pay["w_WT_T"])
    orbit = CircularOrbit.from_altitude(orb["orbit_altitude"], gravity_gradient=orb["gravity_gradient"]) \
        if orb["orbit_altitude"] > 0 else None
    return m_O, s_O, m_T, s_T, orbit


def _X(s: rb.RigidBodyState) -> np.ndarray:
    return pose(quat_to_rotation(s.quat_WB), s.p_WoBo_W)


def _ik(geom: rms.RmsGeometry, X_OE: np.ndarray, q_start: np.ndarray) -> np.ndarray:
    def residual(q):
        X = rms.rms_kinematics(geom, q).X_OE
        dR = Rotation.from_matrix(X_OE[:3, :3] @ X[:3, :3].T).as_rotvec()
        return np.r_[dR, X_OE[:3, 3] - X[:3, 3]]
    r = least_squares(residual, q_start, bounds=(geom.q_lower, geom.q_upper), xtol=1e-14, ftol=1e-14, gtol=1e-14)
    assert np.linalg.norm(r.fun) < 1e-8, f"waypoint {X_OE[:3, 3]} not reachable inside the joint ranges"
    return r.x


def approach(cfg: dict, geom: rms.RmsGeometry, t_end: float) -> tuple:
    """Integrate the scripted manual rates from q0, and the free orbiter and payload, to ``t_end``.

    Returns q(t_end), the joint path's min distance to the limits, X_WO, X_WT, and the
    two bodies' states at t_end.
    """
    m_O, s_O, m_T, s_T, orbit = _bodies(cfg)
    segments = []                                          # (t, [w; v], frame)
    frame = "orbiter"
    for c in cfg["operator"]["script"]:
        if c["t"] >= t_end:
            break
        if c["cmd"] == "mode":
            frame = c.get("frame", frame)
            segments.append((c["t"], np.zeros(6), frame))
        elif c["cmd"] == "rate":
            frame = c.get("frame", frame)
            segments.append((c["t"], np.r_[c.get("w", [0.0] * 3), c.get("v", [0.0] * 3)], frame))
        elif c["cmd"] in ("stop", "brakes"):
            segments.append((c["t"], np.zeros(6), frame))
    q = np.asarray(cfg["arm"]["q0"], dtype=float)
    margin = np.inf
    bounds = [s[0] for s in segments] + [t_end]

    def qdot(_t, q, V, fr):
        P = rms.rms_kinematics(geom, q)
        if fr == "end_effector":
            R = P.X_OE[:3, :3]
            V = np.r_[R @ V[:3], R @ V[3:]]
        return np.linalg.solve(rms.rms_jacobian(P), V)

    for (t0, V, fr), t1 in zip(segments, bounds[1:]):
        if t1 > t0 and np.any(V):
            sol = solve_ivp(qdot, (t0, t1), q, args=(V, fr), rtol=1e-10, atol=1e-12, dense_output=True)
            assert sol.success
            qs = sol.sol(np.linspace(t0, t1, 200))
            margin = min(margin, np.min(qs - geom.q_lower[:, None]), np.min(geom.q_upper[:, None] - qs))
            q = sol.y[:, -1]
    n = int(np.ceil(t_end / 0.05))                     # RK4 at <= 50 ms: free bodies, CW and gravity gradient
    for _ in range(n):
        s_O = rb.step(m_O, s_O, np.zeros(6), t_end / n, orbit)
        s_T = rb.step(m_T, s_T, np.zeros(6), t_end / n, orbit)
    return q, margin, _X(s_O), _X(s_T), s_O, s_T


# ---------------------------------------------------------------- approach and capture
def test_scripted_approach_meets_the_grapple_fixture_inside_the_envelope(cfg: dict, geom: rms.RmsGeometry) -> None:
    t_cap = _script(cfg, "capture")[0]["t"]
    q, margin, X_WO, X_WT, s_O, s_T = approach(cfg, geom, t_cap)
    assert margin > 0.01, "a joint comes within 0.01 rad of its limit during the approach"
    X_WE = X_WO @ rms.rms_kinematics(geom, q).X_OE
    X_WG = X_WT @ pose_from_vector(cfg["payload"]["X_TG"])
    # E at rest on the orbiter (stopped, brakes on); the payload's twist at the point Eo
    R_WO = X_WO[:3, :3]
    V_WE_W = shift_twist(np.r_[R_WO @ s_O.w_WB_B, s_O.v_WBo_W], X_WE[:3, 3] - X_WO[:3, 3])
    V_WG_W = shift_twist(np.r_[X_WT[:3, :3] @ s_T.w_WB_B, s_T.v_WBo_W], X_WE[:3, 3] - X_WT[:3, 3])
    env = CaptureEnvelope(**cfg["contact"]["envelope"])
    ok, reason, m = capture_check(X_WE, X_WG, V_WE_W, V_WG_W, env)
    assert ok, reason
    # with margin: a quarter of the lateral and axial envelope, a tenth of the angles
    assert m["lateral"] < 0.25 * env.lateral and m["axial"] < 0.25 * env.axial
    assert m["tilt"] < 0.1 * env.tilt and m["roll"] < 0.1 * env.roll
    assert m["rate_lin"] < 0.5 * env.rate_lin and m["rate_ang"] < 0.5 * env.rate_ang


def test_approach_starts_outside_the_envelope(cfg: dict, geom: rms.RmsGeometry) -> None:
    """The approach phase is real: at t = 0 the end effector is well away from the fixture."""
    X_WO = pose_from_vector(cfg["orbiter"]["X_WO"])
    X_WE = X_WO @ rms.rms_kinematics(geom, cfg["arm"]["q0"]).X_OE
    X_WG = pose_from_vector(cfg["payload"]["X_WT"]) @ pose_from_vector(cfg["payload"]["X_TG"])
    ok, _, m = capture_check(X_WE, X_WG, np.zeros(6), np.zeros(6), CaptureEnvelope(**cfg["contact"]["envelope"]))
    assert not ok and m["axial"] > 0.5


def test_approach_rates_within_the_unloaded_limits(cfg: dict) -> None:
    from services.arm import DEFAULTS
    v_max = cfg["arm"].get("v_max", DEFAULTS["v_max"])
    w_max = cfg["arm"].get("w_max", DEFAULTS["w_max"])
    for c in _script(cfg, "rate"):
        assert np.linalg.norm(c.get("v", [0.0] * 3)) <= v_max
        assert np.linalg.norm(c.get("w", [0.0] * 3)) <= w_max


# ---------------------------------------------------------------- berthing waypoints
def test_auto_waypoints_reachable_and_place_the_interface(cfg: dict, geom: rms.RmsGeometry) -> None:
    (auto,) = _script(cfg, "auto")
    wps = auto["waypoints"]
    X_TG = pose_from_vector(cfg["payload"]["X_TG"])
    X_TB = pose_from_vector(cfg["payload"]["X_TB"])
    X_OL = pose_from_vector(cfg["orbiter"]["X_OL"])
    X_LB_berthed = pose_from_vector(cfg["contact"]["latch"]["X_LB"])
    q = np.asarray(cfg["arm"]["q0"], dtype=float)
    heights = []
    for wp in wps:
        X_OE = pose(quat_to_rotation(wp["quat"]), wp["p"])
        q = _ik(geom, X_OE, q)
        margin = min(np.min(q - geom.q_lower), np.min(geom.q_upper - q))
        assert margin > 0.02
        sigma = np.linalg.svd(rms.rms_jacobian(rms.rms_kinematics(geom, q)), compute_uv=False)[-1]
        assert sigma > 2 * cfg["arm"].get("sigma_min", 0.05)
        # with E at G (nominal capture, X_EG = I): the interface B relative to its berthed pose
        X_LB = pose_inverse(X_OL) @ X_OE @ pose_inverse(X_TG) @ X_TB
        dX = pose_inverse(X_LB_berthed) @ X_LB
        assert np.linalg.norm(dX[:2, 3]) < 1e-9 and Rotation.from_matrix(dX[:3, :3]).magnitude() < 1e-9
        heights.append(-dX[2, 3])                       # height above the seats (L z down)
    assert 0.1 < heights[0] < 0.5, "pre-berth pose 0.1…0.5 m above the seats"
    assert -0.06 < heights[-1] < 0.0, "last waypoint presses the trunnions into the seats by at most 6 cm"
    assert all(wp["v"] <= cfg["arm"].get("v_max_loaded", 0.06) for wp in wps)


# ---------------------------------------------------------------- variants run the same scenario
def _scenario(c: dict) -> dict:
    c = copy.deepcopy({k: c[k] for k in SCENARIO_TABLES})
    return c


@pytest.mark.parametrize("name", ["srms_berthing_realtime.toml", "two_hosts.toml"])
def test_variants_run_the_default_scenario(cfg: dict, name: str) -> None:
    other = _load(ROOT / "configs" / name)
    assert _scenario(other) == _scenario(cfg)
    assert set(other["services"]) == set(cfg["services"])
    for n, s in cfg["services"].items():
        assert other["services"][n]["kind"] == s["kind"] and other["services"][n]["rate_hz"] == s["rate_hz"]


def test_realtime_variant_is_realtime(cfg: dict) -> None:
    rt = _load(ROOT / "configs" / "srms_berthing_realtime.toml")
    assert rt["sim"]["mode"] == "realtime"


def test_two_hosts_variant_is_curve_tcp() -> None:
    th = _load(ROOT / "configs" / "two_hosts.toml")
    assert th["sim"]["transport"] == "tcp" and "security" in th
    hosts = {s.get("host") for s in th["services"].values()}
    assert len(hosts) == 2 and None not in hosts
