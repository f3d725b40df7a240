"""Report: pages from a synthetic log with known motion, skipped pages, bad input.

The synthetic run: orbiter and payload drift with constant velocities (no forces),
so the relative distance, speed and the total momentum are known in closed form;
a contact wrench with a known peak; two events.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

import testkit.toys  # noqa: F401  (registers the toy topics)
from errors import LogError
from protocol.codec import encode
from services.logger import McapLogger
from tests.services.test_logger import cli
from tools.report import decimate, make_report

MS = 1_000_000
M_O, M_T = 1.0e5, 1.2e4
V_O, V_T = np.array([0.01, 0.0, 0.0]), np.array([-0.02, 0.005, 0.0])
P0_T = np.array([10.0, 0.0, 0.0])


def pdf_pages(path) -> int:
    return len(re.findall(rb"/Type\s*/Page[^s]", path.read_bytes()))


@pytest.fixture()
def physics_log(tmp_path):
    cfg = {"sim": {"seed": 1}, "services": {},
           "orbiter": {"mass": M_O, "inertia": [1.2e6, 8.0e6, 8.5e6]},
           "payload": {"mass": M_T, "inertia": [[1.0e5, 0, 0], [0, 1.5e5, 0], [0, 0, 1.5e5]]}}
    path = tmp_path / "phys.mcap"
    lg = McapLogger(path, config=cfg)
    one = np.array([1.0, 0.0, 0.0, 0.0])
    z = np.zeros(3)
    for i in range(101):  # 1 s at 100 Hz
        t = i * 10 * MS
        ts = t * 1e-9
        o = {"p_WoOo_W": V_O * ts, "quat_WO": one, "w_WO_O": z, "v_WOo_W": V_O, "a_WOo_W": z, "wdot_WO_O": z}
        p = {"p_WoTo_W": P0_T + V_T * ts, "quat_WT": one, "w_WT_T": z, "v_WTo_W": V_T, "a_WTo_W": z,
             "wdot_WT_T": z, "grappled": False, "berthed": False}
        F = np.array([0.0, 0.0, 30.0 * np.sin(np.pi * ts), 400.0 * np.sin(np.pi * ts), 0.0, 0.0])
        lg.on_message("orbiter/state", encode("orbiter/state", o, sender="orbiter", seq=i, t_ns=t, h_ns=10 * MS))
        lg.on_message("payload/state", encode("payload/state", p, sender="contact", seq=i, t_ns=t, h_ns=10 * MS))
        # F_peak: the largest |τ|, |f| inside the coupling interval (here above the mean, as in a run whose
        # contact spikes between coupling instants): 500 N and 45 N·m in the interval at t = 0.7 s
        peak = [45.0, 500.0] if i == 70 else [abs(F[2]), abs(F[3])]
        lg.on_message("contact/wrench", encode("contact/wrench", {"F_Lo_W": F, "p_WoLo_W": z, "active": 30 < i < 70,
                                                                  "F_peak": np.array(peak)},
                                               sender="contact", seq=i, t_ns=t, h_ns=10 * MS))
        ev = [{"kind": "capture"}] if i == 40 else [{"kind": "latch", "id": 2}] if i == 60 else []
        lg.on_message("contact/event", encode("contact/event", {"events": ev}, sender="contact", seq=i, t_ns=t,
                                              h_ns=10 * MS))
    lg.close()
    return path


def test_pages_peaks_and_events_of_a_known_motion(physics_log, tmp_path):
    rep = make_report(physics_log, tmp_path / "r")
    assert set(rep.pngs) == {"summary", "relative_pose", "relative_rates", "contact", "momentum_energy"}
    assert all(p.stat().st_size > 10_000 and p.read_bytes()[:4] == b"\x89PNG" for p in rep.pngs.values())
    assert pdf_pages(rep.pdf) == 5
    assert set(rep.skipped) == {"joints", "timing"}
    # closed forms of the drift: r(t) = P0_T + (V_T - V_O) t
    r1 = np.linalg.norm(P0_T + (V_T - V_O) * 1.0)
    assert rep.peaks["relative distance max [m]"] == pytest.approx(10.0, rel=1e-12)
    assert rep.peaks["relative distance min [m]"] == pytest.approx(r1, rel=1e-12)
    assert rep.peaks["relative speed max [m/s]"] == pytest.approx(np.linalg.norm(V_T - V_O), rel=1e-12)
    # the peaks inside the coupling intervals (F_peak), not the largest interval mean (400 N, 30 N·m at 0.5 s)
    assert rep.peaks["F_Lo_W |force| max [N]"] == pytest.approx(500.0, rel=1e-12)
    assert rep.peaks["F_Lo_W |moment| max [N·m]"] == pytest.approx(45.0, rel=1e-12)
    assert rep.peaks["linear momentum drift max [N·s]"] < 1e-9 * M_O * np.linalg.norm(V_O)  # no force: constant
    assert rep.peaks["kinetic energy change max [J]"] < 1e-9
    assert rep.events == [(0.4, "contact/event", "capture"), (0.6, "contact/event", "latch")]


def test_a_log_without_physics_topics_gives_notes_not_errors(tmp_path, capsys):
    path = tmp_path / "toy.mcap"
    lg = McapLogger(path)
    for i in range(10):
        lg.on_message("toy/state0", encode("toy/state0", {"x": 0.0, "v": 0.0}, sender="a", seq=i, t_ns=i * MS, h_ns=MS))
    lg.close()
    rc, out, err = cli(capsys, "report", str(path), "--out", str(tmp_path / "r"))
    assert rc == 0, err
    info = json.loads(out.strip().splitlines()[-1])
    assert list(info["png"]) == ["summary"] and pdf_pages(tmp_path / "r" / "report.pdf") == 1
    assert set(info["skipped"]) == {"relative_pose", "relative_rates", "contact", "joints", "momentum_energy",
                                    "timing"}
    assert "skipped" in err


def test_bad_log_is_one_line_naming_the_file(tmp_path, capsys):
    bad = tmp_path / "bad.mcap"
    bad.write_bytes(b"\x89MCAP0\r\n" + b"\x00" * 50)
    with pytest.raises(LogError, match="truncated"):
        make_report(bad, tmp_path / "r")
    rc, _, err = cli(capsys, "report", str(bad))
    assert rc == 2 and str(bad) in err and len(err.strip().splitlines()) == 1


def test_decimate_keeps_every_peak_within_its_pixel_column():
    n, width = 100_000, 800
    t = np.arange(n) * 1e-3
    y = np.column_stack([np.sin(t), np.cos(3 * t)])
    y[31_337, 0], y[77_001, 1] = 5.0, -7.0  # one-sample spikes
    td, yd = decimate(t, y, width)
    assert td.shape == (2 * width,) and yd.shape == (2 * width, 2)
    assert np.all(np.diff(td) >= 0) and td[0] == t[0] and td[-1] == t[-1]
    assert yd[:, 0].max() == 5.0 and yd[:, 1].min() == -7.0
    assert yd[:, 0].min() == y[:, 0].min() and yd[:, 1].max() == y[:, 1].max()
    # each column's envelope holds the true min and max of its run of samples
    edges = np.linspace(0, n, width + 1).astype(int)
    k = int(np.searchsorted(edges, 31_337, side="right")) - 1
    assert yd[2 * k + 1, 0] == y[edges[k]:edges[k + 1], 0].max() == 5.0
    short_t, short_y = t[:1000], y[:1000]
    assert decimate(short_t, short_y, width)[0] is short_t  # few samples: unchanged


def test_momentum_uses_the_models_masses_when_the_config_leaves_them_out(tmp_path):
    """No [orbiter] or [payload] table: the models run with their default masses, and the
    summary's momentum must use the same ones (not 0 kg)."""
    from protocol.config import check_table
    from services.contact import PAYLOAD_KEYS
    from services.orbiter import ORBITER_KEYS
    from tools.report import run_figures

    cfg = {"sim": {}, "services": {}}
    path = tmp_path / "bare.mcap"
    lg = McapLogger(path, config=cfg)
    one, z = np.array([1.0, 0.0, 0.0, 0.0]), np.zeros(3)
    for i in range(3):
        o = {"p_WoOo_W": z, "quat_WO": one, "w_WO_O": z, "v_WOo_W": V_O, "a_WOo_W": z, "wdot_WO_O": z}
        p = {"p_WoTo_W": P0_T, "quat_WT": one, "w_WT_T": z, "v_WTo_W": V_T, "a_WTo_W": z, "wdot_WT_T": z,
             "grappled": False, "berthed": False}
        lg.on_message("orbiter/state", encode("orbiter/state", o, sender="orbiter", seq=i, t_ns=i * MS, h_ns=MS))
        lg.on_message("payload/state", encode("payload/state", p, sender="contact", seq=i, t_ns=i * MS, h_ns=MS))
    lg.close()
    m_O = check_table(cfg, "orbiter", ORBITER_KEYS, [])["mass"]  # what the models take
    m_T = check_table(cfg, "payload", PAYLOAD_KEYS, [])["mass"]
    fig = run_figures(path, cfg)
    assert m_O > 0 and m_T > 0
    assert fig["momentum_P0_Ns"] == pytest.approx(np.linalg.norm(m_O * V_O + m_T * V_T), rel=1e-12)
