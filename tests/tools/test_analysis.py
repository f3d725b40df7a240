"""tools.analysis: the seed reproductions against the seeds' stated results, and the CLI."""

import csv

import numpy as np
import pytest

from dynamics import cases
from dynamics import chain as ch
from tools import analysis


@pytest.fixture(scope="module")
def sweep():
    return analysis.yoshida1992(theta_deg=np.arange(0.0, 180.01, 0.25))


def test_yoshida_locked_joints_peak_is_total_mass_through_com(sweep):
    # Seed 000 sec. 6: mu = I, the largest virtual mass equals the total mass (3.0 kg) at the
    # direction through the total mass centre (51 deg for this posture), with psi = 0 there.
    i = sweep.mu.index(1.0)
    theta, m_a, psi = sweep.peak(i)
    assert sweep.total_mass == pytest.approx(3.0)
    assert m_a == pytest.approx(3.0, rel=1e-5)
    assert theta == pytest.approx(51.0, abs=0.5)
    assert abs(psi) < 0.5
    assert sweep.psi_zero(i) == pytest.approx(theta, abs=0.5)
    assert np.all(sweep.m_a[i] <= 3.0 * (1 + 1e-9))


def test_yoshida_half_resistance_lies_between(sweep):
    i0, ih, i1 = (sweep.mu.index(x) for x in (0.0, 0.5, 1.0))
    lo = np.minimum(sweep.m_p[i0], sweep.m_p[i1])
    hi = np.maximum(sweep.m_p[i0], sweep.m_p[i1])
    assert np.all(sweep.m_p[ih] >= lo - 1e-12) and np.all(sweep.m_p[ih] <= hi + 1e-12)
    # the mu = 0.5 I peak (and psi zero-cross) lies between the locked and the free one
    t0, t1, th = sweep.peak(i0)[0], sweep.peak(i1)[0], sweep.peak(ih)[0]
    assert min(t0, t1) < th < max(t0, t1)
    # free joints: the peak is near the end-link direction (90 deg), and lighter than the total mass
    assert t0 == pytest.approx(90.0, abs=3.0)
    assert sweep.peak(i0)[1] < 0.5 * sweep.total_mass


@pytest.fixture(scope="module")
def rows():
    return analysis.cyril1998()


def test_cyril_cases_conserve_momentum_and_scale_energy_loss(rows):
    pre = rows[0]
    assert pre.name == "pre-impact"
    assert len(rows) == 1 + 2 * len(analysis.CYRIL_CASES)
    L_scale = np.linalg.norm(pre.L_Wo_W)
    for r in rows[1:]:
        np.testing.assert_allclose(r.P_W, pre.P_W, atol=1e-12 * np.linalg.norm(pre.P_W))
        np.testing.assert_allclose(r.L_Wo_W, pre.L_Wo_W, atol=1e-12 * L_scale)
    for ee in ("free", "locked"):
        sub = {r.name: r for r in rows if r.end_effector == ee}
        loss_p = sub["plastic"].KE - pre.KE
        assert loss_p < 0
        for name, r_E, _ in analysis.CYRIL_CASES[1:]:
            assert sub[name].KE - pre.KE == pytest.approx(r_E * loss_p, rel=1e-9, abs=1e-12 * pre.KE)


def test_cyril_plastic_contact_points_move_together_and_lock_holds(rows):
    case, pl = cases.cyril_1998_system()
    data = ch.make_data(case.model)
    J = ch.frame_jacobian(case.model, data, case.q, case.hand_body, case.p_BoHo_B)[3:]
    for r in rows:
        if r.name == "plastic":
            v_hand = J @ r.v
            v_b = r.v_p + np.cross(r.w_p, pl.p_BcmC_W)
            np.testing.assert_allclose(v_hand, v_b, atol=1e-12)
        if r.end_effector == "locked":
            assert r.v[-1] == case.v[-1]


def test_main_prints_and_writes_only_with_out(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert analysis.main(["cyril1998"]) == 0
    out = capsys.readouterr().out
    assert "rE=0.5 rf=0.8" in out and "locked" in out and "momentum conservation" in out
    assert list(tmp_path.iterdir()) == []
    d = tmp_path / "res"
    assert analysis.main(["cyril1998", "--out", str(d)]) == 0
    assert (d / "cyril1998.png").stat().st_size > 1000
    with open(d / "cyril1998.csv", newline="") as fh:
        table = list(csv.DictReader(fh))
    assert len(table) == 1 + 2 * len(analysis.CYRIL_CASES)
    assert {r["end_effector"] for r in table} == {"-", "free", "locked"}


def test_main_yoshida_writes_plot(tmp_path, capsys):
    assert analysis.main(["yoshida1992", "--out", str(tmp_path)]) == 0
    assert "max m_a*" in capsys.readouterr().out
    assert (tmp_path / "yoshida1992.png").stat().st_size > 1000
    with open(tmp_path / "yoshida1992.csv", newline="") as fh:
        head = next(csv.reader(fh))
    assert head[0] == "theta_deg" and "m_a_mu0.5_kg" in head


def test_main_refuses_unknown_case_and_bad_out(tmp_path, capsys):
    assert analysis.main(["yoshida1993"]) == 2
    err = capsys.readouterr().err
    assert "yoshida1993" in err and "yoshida1992" in err and "cyril1998" in err
    f = tmp_path / "file"
    f.write_text("x")
    assert analysis.main(["cyril1998", "--out", str(f)]) == 2
    assert "not a directory" in capsys.readouterr().err
    assert analysis.main([]) == 2


def test_cyril_root_choice_follows_seed_rules(rows):
    m_p = cases.cyril_1998_system()[1].mass
    for ee in ("free", "locked"):
        sub = {r.name: r for r in rows if r.end_effector == ee}
        # elastic: one root is "no impact" (zero impulse), the other the rebound that is taken
        assert sub["elastic"].roots[0] == pytest.approx(0.0, abs=1e-12)
        for name, _, _ in analysis.CYRIL_CASES[1:]:
            r = sub[name]
            assert r.roots[0] <= r.roots[1]
            assert r.v_recede + r.x == pytest.approx(r.roots[1] / m_p, rel=1e-12)
            assert r.x >= 0 and r.v_recede + r.x >= 0  # seed eq. (50)
        # seed eq. (52): the larger the energy loss, the smaller |e + x|
        lo_loss, hi_loss = sub["rE=0.2 rf=0.5"], sub["rE=0.5 rf=0.5"]
        assert abs(lo_loss.v_recede + lo_loss.x) > abs(hi_loss.v_recede + hi_loss.x)


# ---------------------------------------------------------------- cyril1998 --flexible


@pytest.fixture(scope="module")
def short_flexible():
    """The plastic and one non-plastic case, flexible (1 mode per link) and rigid, over 4 s."""
    return analysis.cyril1998_flexible(n_modes=1, duration=4.0, runs=("plastic", "rE=0.5 rf=0.5"), n_samples=41,
                                       n_snapshots=3, rtol=1e-10)


def test_cyril_flexible_runs_conserve_momentum_and_the_links_vibrate(short_flexible):
    for group in (short_flexible.flexible, short_flexible.rigid):
        for r in group.values():
            h = np.hstack([r.P_W, r.L_Wo_W])
            assert np.max(np.linalg.norm(h - h[0], axis=1)) < 1e-8 * np.linalg.norm(h[0])
    for r in short_flexible.flexible.values():
        assert np.abs(r.psid_f[9:]).max() > 1e-3  # the impact sets elastic rates (seed 002 eq. 7)
        assert np.abs(r.tip_deflection).max() > 1e-3
    for r in short_flexible.rigid.values():
        assert r.psid_f.size == 9 and np.all(r.tip_deflection == 0.0)
    # the locked end effector keeps its rate through the impact and after it
    r = short_flexible.flexible["rE=0.5 rf=0.5"]
    np.testing.assert_allclose(np.diff(r.theta[:, 2]) / np.diff(r.t), np.radians(9.03e-1), rtol=1e-6)


def test_cyril_flexible_files_are_written(short_flexible, tmp_path):
    paths = analysis._cyril_flexible_files(short_flexible, tmp_path)
    assert {p.name for p in paths} == {"cyril1998_flexible.csv", "cyril1998_flexible_angles.png",
                                       "cyril1998_flexible_deflections.png", "cyril1998_flexible_configurations.png"}
    assert all(p.stat().st_size > 1000 for p in paths)
    text = analysis._cyril_flexible_report(short_flexible)
    assert "eta_dot" in text and "largest relative drift" in text


def test_cyril_findings_of_the_seed_hold_for_rigid_links():
    """The seed's qualitative findings on the rigid-link runs (cheap; the flexible ones print with --flexible)."""
    res = analysis.cyril1998_flexible(n_modes=0, n_samples=241, n_snapshots=2)
    found = [(text, holds) for text, holds, _ in analysis.cyril_findings(res) if not text.startswith("flexibility")]
    assert len(found) == 6
    assert all(holds for _, holds in found), found


def test_flexible_flag_only_for_cyril(capsys):
    assert analysis.main(["yoshida1992", "--flexible"]) == 2
    assert "--flexible applies to cyril1998 only" in capsys.readouterr().err
