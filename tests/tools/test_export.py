"""Export: flattened columns with units, values read back with pyarrow and csv, bad input."""

from __future__ import annotations

import csv
import json

import numpy as np
import pyarrow.parquet as pq
import pytest

import testkit.toys  # noqa: F401  (registers the toy topics)
from errors import ConfigError, LogError
from protocol.codec import encode
from services.logger import McapLogger
from tests.services.test_logger import cli
from tools.export import export, field_columns

MS = 1_000_000


def orbiter(i: int) -> dict:
    rng = np.random.default_rng(i)
    q = rng.normal(size=4)
    return {"p_WoOo_W": rng.normal(size=3), "quat_WO": q / np.linalg.norm(q), "w_WO_O": rng.normal(size=3),
            "v_WOo_W": rng.normal(size=3), "a_WOo_W": rng.normal(size=3), "wdot_WO_O": rng.normal(size=3)}


@pytest.fixture()
def log(tmp_path):
    path = tmp_path / "e.mcap"
    lg = McapLogger(path)
    for i in range(200):
        lg.on_message("orbiter/state", encode("orbiter/state", orbiter(i), sender="orbiter", seq=i, t_ns=i * 10 * MS,
                                              h_ns=10 * MS, wall_ns=5 + i))
        lg.on_message("hil/status", encode("hil/status", {"state": "armed", "faults": i, "link": {"rtt_s": 0.5}},
                                           sender="hil", seq=i, t_ns=i * 10 * MS, h_ns=10 * MS))
    lg.on_message("contact/event", encode("contact/event", {"events": [{"kind": "capture", "n": 1}]},
                                          sender="contact", seq=0, t_ns=50 * MS, h_ns=MS))
    lg.close()
    return path


def test_column_names_carry_units():
    assert [c for c, _ in field_columns("p_WoOo_W", "f8", (3,))] == ["p_WoOo_W_x_m", "p_WoOo_W_y_m", "p_WoOo_W_z_m"]
    assert [c for c, _ in field_columns("quat_WO", "f8", (4,))] == [f"quat_WO_{c}_1" for c in "wxyz"]
    assert [c for c, _ in field_columns("F_Lo_W", "f8", (6,))] == [
        "F_Lo_W_tx_Nm", "F_Lo_W_ty_Nm", "F_Lo_W_tz_Nm", "F_Lo_W_fx_N", "F_Lo_W_fy_N", "F_Lo_W_fz_N"]
    assert [c for c, _ in field_columns("V_LB_L", "f8", (6,))][::3] == ["V_LB_L_wx_rad_s", "V_LB_L_vx_m_s"]
    assert [c for c, _ in field_columns("q", "f8", (6,))][0] == "q_1_rad"
    assert [c for c, _ in field_columns("tau", "f8", (6,))][-1] == "tau_6_Nm"
    x = [c for c, _ in field_columns("X_LB", "f8", (4, 4))]
    assert x[3] == "X_LB_03_m" and x[0] == "X_LB_00_1" and len(x) == 16
    assert field_columns("delay_s", "f8", ()) == [("delay_s", "s")]
    assert field_columns("w_WT_T", "f8", (3,))[0] == ("w_WT_T_x_rad_s", "rad_s")
    assert field_columns("wdot_WT_T", "f8", (3,))[0] == ("wdot_WT_T_x_rad_s2", "rad_s2")


def test_parquet_values_equal_what_was_sent(log, tmp_path):
    out = export(log, "parquet", tmp_path / "pq")
    assert set(out) == {"orbiter/state", "hil/status", "contact/event"}
    t = pq.read_table(out["orbiter/state"][0]).to_pydict()
    assert out["orbiter/state"][1] == 200 and len(t["t_ns"]) == 200
    assert t["t_ns"] == [i * 10 * MS for i in range(200)] and t["wall_ns"] == [5 + i for i in range(200)]
    assert t["sender"] == ["orbiter"] * 200 and t["seq"] == list(range(200))
    for i in (0, 77, 199):
        ref = orbiter(i)
        assert [t[f"p_WoOo_W_{c}_m"][i] for c in "xyz"] == ref["p_WoOo_W"].tolist()
        assert [t[f"quat_WO_{c}_1"][i] for c in "wxyz"] == ref["quat_WO"].tolist()
        assert [t[f"wdot_WO_O_{c}_rad_s2"][i] for c in "xyz"] == ref["wdot_WO_O"].tolist()
    h = pq.read_table(out["hil/status"][0]).to_pydict()
    assert h["faults"] == list(range(200)) and h["state"][3] == "armed" and json.loads(h["link"][0]) == {"rtt_s": 0.5}
    e = pq.read_table(out["contact/event"][0]).to_pydict()
    assert json.loads(e["events"][0]) == [{"kind": "capture", "n": 1}]


def test_csv_round_trips_floats_and_filters_topics(log, tmp_path):
    out = export(log, "csv", tmp_path / "csv", ["orbiter/*"])
    assert list(out) == ["orbiter/state"]
    with out["orbiter/state"][0].open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 200
    assert float(rows[42]["v_WOo_W_y_m_s"]) == orbiter(42)["v_WOo_W"][1]  # repr round trip, bit exact


def test_bad_input(log, tmp_path, capsys):
    with pytest.raises(ConfigError, match="arm/\\*"):
        export(log, "csv", tmp_path / "x", ["arm/*"])
    with pytest.raises(ConfigError, match="xml"):
        export(log, "xml", tmp_path / "x")
    with pytest.raises(LogError, match="no such file"):
        export(tmp_path / "nope.mcap", "csv")
    rc, _, err = cli(capsys, "export", str(tmp_path / "nope.mcap"), "--format", "csv")
    assert rc == 2 and "nope.mcap" in err and len(err.strip().splitlines()) == 1
    rc, out, err = cli(capsys, "export", str(log), "--format", "parquet", "--topics", "hil/*", "--out",
                       str(tmp_path / "cli"))
    assert rc == 0, err
    info = json.loads(out.strip().splitlines()[-1])
    assert info["rows"] == 200 and list(info["files"]) == ["hil/status"]
