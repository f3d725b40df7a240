"""dynamics.modal: linearised modes against closed forms, Pinocchio and the constrained eigenproblem's invariants.

References: the clamped–free Euler–Bernoulli beam with a tip mass (the transcendental frequency
equation, solved here with scipy.optimize), the clamped–free eigenfunctions written out here,
Pinocchio's mass matrix (crba) with scipy's generalized eigensolver for joint springs, and
Rayleigh's separation theorem (constraints raise every frequency) for locks and loops.
"""

import numpy as np
import pinocchio as pin
import pytest
import scipy.linalg as sla
import scipy.optimize as so
from conftest import base_T, pin_from_chain, pin_q, random_chain, random_state, sym_upper
from test_closed_chain import latched

from dynamics import beam as bm
from dynamics import cases, modal
from dynamics import chain as ch
from dynamics import closed_chain as cc
from errors import ModelError, ShapeError

# a clamped-free beam (fixed base, its root joint locked) with a point mass on its tip
L, RHO_A, EI, M_TIP = 10.0, 50.0, 2.0e6, 1000.0


def beam_with_tip_mass(n_modes: int, shape: str = "clamped_free", tip: float = M_TIP) -> ch.ChainModel:
    X = np.tile(np.eye(4), (3, 1, 1))
    X[2, 0, 3] = L
    m = ch.chain_from_table(["ground", "beam", "tip"], [-1, 0, 1], ["fixed_base", "revolute", "revolute"], X,
                            [[0.0, 0.0, 1.0]] * 3, [0.0, 1.0, tip], np.zeros((3, 3)), np.zeros((3, 3, 3)))
    return ch.with_beams(m, {1: bm.BeamLink(L, RHO_A, EI, modes_y=n_modes, shape=shape)})


def tip_mass_roots(ratio: float, k: int) -> np.ndarray:
    """The first k roots βL of 1 + cos βL cosh βL + r βL (cos βL sinh βL − sin βL cosh βL) = 0, r = M_tip/(ρAL)."""
    def f(b: float) -> float:
        return 1.0 + np.cos(b) * np.cosh(b) + ratio * b * (np.cos(b) * np.sinh(b) - np.sin(b) * np.cosh(b))
    grid = np.linspace(0.05, 4.0 * k + 4.0, 20000)
    vals = np.array([f(b) for b in grid])
    roots = [so.brentq(f, grid[i], grid[i + 1], xtol=1e-15)
             for i in np.flatnonzero(np.sign(vals[:-1]) != np.sign(vals[1:]))]
    return np.array(roots[:k])


def test_beam_with_tip_mass_within_0p1_percent_of_the_transcendental_roots_at_N6():
    """Default (clamped–free) basis, N = 6: modes 1 and 2 within 0.1 % (measured 0.0075 %, 0.082 %)."""
    md = modal.modes(beam_with_tip_mass(6), ch.neutral(beam_with_tip_mass(6)), locked=[0, 1])
    bl = tip_mass_roots(M_TIP / (RHO_A * L), 2)
    omega = bl ** 2 / L ** 2 * np.sqrt(EI / RHO_A)
    assert md.omega.size == 6
    err = md.omega[:2] / omega - 1.0
    assert np.all(err >= -1e-12), err            # Rayleigh–Ritz: from above
    assert np.all(err < 1e-3), err
    # the polynomial basis (admissible, free tip slope and shear) converges faster here: mode 1 to round-off
    mp = modal.modes(beam_with_tip_mass(6, "polynomial"), ch.neutral(beam_with_tip_mass(6)), locked=[0, 1])
    assert abs(mp.omega[0] / omega[0] - 1.0) < 1e-10
    assert abs(mp.omega[1] / omega[1] - 1.0) < 1e-5


def test_beam_without_tip_mass_is_exact_in_the_default_basis():
    """No tip mass (a 1 mg point): the clamped–free shapes are the modes: βL roots of 1 + cos cosh = 0 to 1e-9."""
    model = beam_with_tip_mass(4, tip=1e-6)
    md = modal.modes(model, ch.neutral(model), locked=["beam", "tip"])
    bl = tip_mass_roots(0.0, 4)
    omega = bl ** 2 / L ** 2 * np.sqrt(EI / RHO_A)
    assert np.abs(md.omega / omega - 1.0).max() < 1e-8


def test_mode_shape_sign_convention_phi_k_of_L_is_2_times_minus_1_to_the_k_plus_1():
    """The default basis is the textbook eigenfunction cosh − cos − σ(sinh − sin), ∫φ² = L: φ_k(L) = 2(−1)^(k+1)."""
    x = np.linspace(0.0, L, 201)
    phi, _, _ = bm.shape_functions(x, L, 5)
    bl = tip_mass_roots(0.0, 5)
    for k in range(5):
        b = bl[k] / L
        sig = (np.cosh(bl[k]) + np.cos(bl[k])) / (np.sinh(bl[k]) + np.sin(bl[k]))
        ref = np.cosh(b * x) - np.cos(b * x) - sig * (np.sinh(b * x) - np.sin(b * x))
        assert np.abs(phi[k] - ref).max() < 1e-7             # (this form has ∫φ² dx = L as it stands)
        assert phi[k, -1] == pytest.approx(2.0 * (-1) ** k, rel=1e-9)   # k from 0: φ_{k+1}(L)


@pytest.mark.parametrize("floating", [False, True])
def test_rigid_joint_modes_with_joint_springs_match_pinocchio(rng, floating):
    """Random 5-joint chain, random joint springs: frequencies of eigh(K, M_pin) (Pinocchio's crba) to 1e-9,
    the base free (six zero modes) or held, and one joint locked (its row and column removed)."""
    model = random_chain(rng, 5, floating=floating, prismatic=False)
    q, _ = random_state(rng, model)
    k = rng.uniform(1e2, 1e4, model.n)
    pm = pin_from_chain(model)
    Ti = np.linalg.inv(base_T(model, q))
    M = Ti.T @ sym_upper(pin.crba(pm, pm.createData(), pin_q(pm, model, q))) @ Ti
    off = 6 if floating else 0
    K = np.zeros_like(M)
    K[off:, off:] = np.diag(k)
    every = list(range(model.nv))
    variants = [({}, every), ({"locked": [2]}, [i for i in every if i != off + 2])]
    if floating:
        variants.append(({"lock_base": True}, every[6:]))
    for kw, keep in variants:
        lam = sla.eigh(K[np.ix_(keep, keep)], M[np.ix_(keep, keep)], eigvals_only=True)
        f_ref = np.sqrt(np.clip(lam, 0.0, None)) / (2 * np.pi)
        f_ref[lam < 1e-9 * lam.max()] = 0.0
        md = modal.modes(model, q, joint_stiffness=k, **kw)
        assert np.abs(md.freq_hz - f_ref).max() <= 1e-9 * f_ref.max(), kw
        Phi = md.shapes
        assert np.abs(Phi.T @ M @ Phi - np.eye(Phi.shape[1])).max() < 1e-9
        assert np.abs(Phi.T @ K @ Phi - np.diag(md.omega ** 2)).max() < 1e-9 * md.omega.max() ** 2
    assert int((modal.modes(model, q, joint_stiffness=k).freq_hz == 0.0).sum()) == (6 if floating else 0)


def test_locks_and_loops_raise_every_frequency_and_shapes_respect_the_loop():
    """The latched SRMS (booms 1+1 modes): grappled modes ≤ latched ones pairwise (Rayleigh's separation theorem),
    latched shapes satisfy J_C φ = 0; with the orbiter held, Σ L_kᵀL_k = M_bf M_ff⁻¹ M_fb; free base: L = 0."""
    case, loop = latched(cases.srms_booms(1))
    k = np.full(6, 2e5)
    free = modal.modes(case.model, case.q, joint_stiffness=k)
    closed = modal.modes(case.model, case.q, joint_stiffness=k, loops=[loop])
    assert closed.omega.size == case.model.nv - 6
    J = cc.constraint_jacobian(case.model, ch.make_data(case.model), case.q, loop)
    assert np.abs(J @ closed.shapes).max() < 1e-9
    assert np.all(closed.omega >= free.omega[:closed.omega.size] * (1 - 1e-9))
    assert np.all(closed.omega[6:] <= free.omega[12:] * (1 + 1e-9))      # interlacing, the other side
    held = modal.modes(case.model, case.q, joint_stiffness=k, lock_base=True)
    M = held.linearization.M
    ref = M[:6, 6:] @ np.linalg.solve(M[6:, 6:], M[6:, :6])
    assert held.participation is not None and free.participation is not None
    assert np.abs(held.participation.T @ held.participation - ref).max() < 1e-8 * np.abs(ref).max()
    assert np.abs(free.participation[6:]).max() < 1e-8 * np.abs(held.participation).max()
    assert np.all(held.damping_ratio > 0.0)


def test_srms_loaded_first_mode_is_the_quoted_0p04278_hz():
    """The scenario's loaded arm (tools.analysis.loaded_modes: the booms 2 + 2 modes, gear springs in series with
    the servos' holding stiffness, payload grappled at arm.q0): 0.04278 Hz, the frequency the split run oscillates
    at (tests/services/test_arm_flexible.py measures it to 0.002 %)."""
    import tomllib
    from pathlib import Path

    from tools import analysis

    cfg = tomllib.loads((Path(__file__).resolve().parents[2] / "configs" / "srms_berthing.toml").read_text())
    res = analysis.loaded_modes(cfg)
    assert res.free.freq_hz[:6].tolist() == [0.0] * 6
    assert res.free.freq_hz[6] == pytest.approx(0.04278, abs=5e-6)
    assert 0.027 <= res.held.freq_hz[0] <= 0.047          # the published loaded band
    with pytest.raises(Exception, match="--at"):
        analysis.loaded_modes(cfg, "12.5")


def test_bad_input_is_refused_by_name():
    model = beam_with_tip_mass(2)
    q = ch.neutral(model)
    with pytest.raises(ModelError, match="'elbow'"):
        modal.modes(model, q, locked=["elbow"])
    with pytest.raises(ModelError, match="index"):
        modal.modes(model, q, locked=[5])
    with pytest.raises(ModelError, match="joint_stiffness"):
        modal.linearize(model, q, joint_stiffness=[1.0, -1.0])
    with pytest.raises(ShapeError, match="joint_damping"):
        modal.linearize(model, q, joint_damping=[1.0, 1.0, 1.0])
    with pytest.raises(ShapeError, match="q"):
        modal.linearize(model, np.zeros(3))


def test_analyze_modes_command_prints_the_loaded_modes_and_refuses_an_instant():
    """``launch.py analyze modes CONFIG``: exit 0 and the first loaded mode; ``--at 12.5`` and no CONFIG exit 2."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    cfg = str(root / "configs" / "srms_berthing.toml")
    run = [sys.executable, str(root / "launch.py"), "analyze", "modes"]
    ok = subprocess.run(run + [cfg], capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert "0.04278" in ok.stdout.splitlines()[4], ok.stdout
    bad = subprocess.run(run + [cfg, "--at", "12.5"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "--at" in bad.stderr, bad.stderr
    none = subprocess.run(run, capture_output=True, text=True, timeout=120)
    assert none.returncode == 2 and "config" in none.stderr, none.stderr
