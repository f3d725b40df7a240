"""The contact service's strategies: the registry keyed by the config values, the stiff couplings each declares,
and the worked example of docs/contact_models.md run as written.

Independent references: the linear oscillator's coefficient of restitution ``e = exp(−ζπ/√(1 − ζ²))`` and
contact time ``π/ω_d`` (a Kelvin–Voigt contact that may pull, from δ = 0 back to δ = 0); the stiff couplings'
figures from the config (``k_lin``, ``c_rot``, ``m β²``, ``2 β m``) and the least principal moments.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from errors import ConfigError
from protocol.service import BoundModel, Sample
from protocol.stepping import StepInputs
from services import contact as sc

ROOT = Path(__file__).resolve().parents[2]
H_C, H_O = 1_000_000, 10_000_000


def _config(**contact: Any) -> dict[str, Any]:
    """A payload 1 mm above four latch walls (one per trunnion, symmetric about its CoM), falling at 2 cm/s."""
    pts = [[1.5, 0.0, 0.0], [-1.5, 0.0, 0.0], [0.0, 1.5, 0.0], [0.0, -1.5, 0.0]]
    return {
        "orbiter": {"mass": 1.0e5, "inertia": [1.2e6, 8.0e6, 8.5e6], "X_OL": [0.0, 0.0, 2.0, 0.0, 0.0, 0.0]},
        "payload": {"mass": 12000.0, "inertia": [2.0e4, 3.0e4, 3.5e4], "X_WT": [0.0, 0.0, 3.001, 0.0, 0.0, 0.0],
                    "v_WTo_W": [0.0, 0.0, -0.02], "X_TB": [0.0, 0.0, -1.0, 0.0, 0.0, 0.0], "points_B": pts},
        "contact": {"latch": {"position": 1e-9},  # the latches stay open
                    "surfaces": [{"point": i, "p_LoSo_L": p, "n_L": [0.0, 0.0, 1.0], "radius": 0.2, "depth": 0.1}
                                 for i, p in enumerate(pts)], **contact},
    }


def _orbiter_at_rest() -> Sample:
    z = np.zeros(3)
    return Sample(0, H_O, "orbiter", 0, {"p_WoOo_W": z, "quat_WO": np.array([1.0, 0.0, 0.0, 0.0]), "w_WO_O": z,
                                         "v_WOo_W": z, "a_WOo_W": z, "wdot_WO_O": z})


@pytest.fixture
def registry():
    """The registries and the keys they fill, restored after the test (a test may register a model)."""
    saved = [(d, dict(d)) for d in (sc.CAPTURE_MODELS, sc.BERTHING_CONTACTS, sc.IMPULSIVE_LAWS, sc.LATCH_MODELS,
                                    sc.CONTACT_KEYS, sc.LATCH_KEYS)]
    yield
    for d, copy in saved:
        d.clear()
        d.update(copy)


def test_the_registries_hold_todays_values_and_the_service_picks_by_them():
    assert sc.CONTACT_KEYS["capture"] == (("impulsive", "compliant"), "impulsive")
    assert sc.CONTACT_KEYS["berthing"] == (("compliant", "impulsive"), "compliant")
    assert sc.CONTACT_KEYS["impulsive_law"] == (("restitution", "cyril"), "restitution")
    assert sc.LATCH_KEYS["model"] == (("spring", "constraint"), "spring")
    m = sc.build(_config(), "contact", H_C)
    assert (type(m.capture), type(m.berthing), type(m.latch)) == (sc.ImpulsiveCapture, sc.CompliantContact,
                                                                  sc.LatchSpring)
    m = sc.build(_config(capture="compliant", berthing="impulsive", impulsive_law="cyril",
                         latch={"position": 1e-9, "model": "constraint"}), "contact", H_C)
    assert (type(m.capture), type(m.berthing), type(m.latch)) == (sc.CompliantCapture, sc.ImpulsiveContact,
                                                                  sc.LatchConstraint)
    assert m.berthing.impulsive and m.berthing.impulse is sc.IMPULSIVE_LAWS["cyril"]
    assert any("contact.berthing" in p and "'linear'" in p for p in sc.validate(_config(berthing="linear"), "c"))


@pytest.mark.parametrize("capture", ["impulsive", "compliant"])
@pytest.mark.parametrize("latch", ["spring", "constraint"])
def test_each_strategy_declares_its_stiff_couplings(capture, latch):
    cfg = _config(capture=capture, latch={"model": latch, "baumgarte": 30.0, "k_lin": 3e7, "c_rot": 4e6},
                  snare={"k_lin": 5e5, "c_rot": 6e5})
    got = {c.what: c for c in sc.stiff_couplings(cfg, "contact")}
    names = ([f"latch spring, {w}" for w in ("translation", "rotation")] if latch == "spring" else
             [f"latch constraint, {w}" for w in ("translation", "rotation")])
    names += [f"snare spring, {w}" for w in ("translation", "rotation")] if capture == "compliant" else []
    assert list(got) == names
    I_T_min, I_O_min = 2.0e4, 1.2e6  # the least principal moments of inertia of the payload and the orbiter
    if latch == "spring":
        assert got["latch spring, translation"].k == 3e7 and got["latch spring, rotation"].c == 4e6
        rot = got["latch spring, rotation"]
        assert (rot.m_producer, rot.m_consumer) == (I_T_min, I_O_min)
    else:
        rot = got["latch constraint, rotation"]
        assert (rot.k, rot.c, rot.feedforward) == (I_T_min * 900.0, 60.0 * I_T_min, True)
    if capture == "compliant":
        assert got["snare spring, translation"].k == 5e5 and got["snare spring, rotation"].c == 6e5


def test_register_refuses_an_unknown_choice_and_a_taken_value(registry):
    with pytest.raises(ConfigError, match="'glue'"):
        sc.register("glue", "x", object)
    with pytest.raises(ConfigError, match="'compliant'"):
        sc.register("berthing", "compliant", object)
    with pytest.raises(ConfigError, match="'latch'"):
        sc.register("berthing", "latch", object, keys={"k": ("nonnegative", 1.0)})


def _docs_example() -> str:
    """The code of docs/contact_models.md's worked example, as written there."""
    text = (ROOT / "docs" / "contact_models.md").read_text()
    part = text[text.index("### The example: a linear spring–damper berthing contact"):]
    code = re.search(r"```python\n(.*?)```", part, re.S)
    assert code
    return code.group(1)


def test_the_docs_example_registers_a_linear_contact_that_rebounds_as_the_linear_oscillator(registry):
    assert sc.validate(_config(berthing="linear"), "contact")  # not a value before it is registered
    exec(compile(_docs_example(), "docs/contact_models.md", "exec"), {})
    k, c = 2.0e5, 2.0e4
    cfg = _config(berthing="linear", linear={"k": k, "c": c})
    assert sc.validate(cfg, "contact") == []
    bad = sc.validate(_config(berthing="linear", linear={"k": -1.0}), "contact")
    assert any("contact.linear.k" in p and "-1.0" in p for p in bad), bad
    m = BoundModel(sc.build(cfg, "contact", H_C))
    assert isinstance(m.berthing, sc.CompliantContact)
    orb = _orbiter_at_rest()
    m.initial(0)
    t, kinds = 0, []
    while "rebound" not in [k_ for k_, _ in kinds] and t < 2_000_000_000:
        out = m.step(t, H_C, StepInputs(t, H_C, {"orbiter/state": orb}, {}, {}))
        kinds += [(e["kind"], e["t"]) for e in out["contact/event"]["events"]]
        t += H_C
    # four walls in parallel on the payload's mass, the orbiter held (its sample at rest)
    m_T, k_t, c_t = 12000.0, 4 * k, 4 * c
    w_n = math.sqrt(k_t / m_T)
    zeta = c_t / (2.0 * math.sqrt(k_t * m_T))
    w_d = w_n * math.sqrt(1.0 - zeta * zeta)
    e = math.exp(-zeta * math.pi / math.sqrt(1.0 - zeta * zeta))
    (first, t0), (rebound, t1) = kinds
    assert (first, rebound) == ("first_contact", "rebound")
    assert t1 - t0 == pytest.approx(math.pi / w_d, abs=3e-3)  # 0.42 s, to the step
    v = m.ctx.body.v_WBo_W
    assert v[2] == pytest.approx(0.02 * e, rel=0.02)  # 0.0055 m/s: ζ = 0.41
    assert abs(v[0]) < 1e-12 and abs(v[1]) < 1e-12 and np.max(np.abs(m.ctx.body.w_WB_B)) < 1e-12
    assert m.ctx.dissipated == pytest.approx(0.5 * m_T * 0.02**2 * (1.0 - e * e), rel=0.02)
