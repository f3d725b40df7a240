"""``launch.py analyze CASE [--out DIR]``: reproduce the seeds' worked examples.

Cases
-----
``yoshida1992``
    Seed 000 section 6: the planar chain of three uniform rods
    (:func:`dynamics.cases.yoshida_three_rod`). Absolute and projected virtual masses
    m_a*, m_p* and the angle psi (eqs. 16–19, :mod:`dynamics.exgit`) versus the impulse
    direction θ, for joint resistance mu = 0, 0.5·I and I. Printed as a table with a
    summary of the peaks; ``--out`` adds ``yoshida1992.csv`` and ``yoshida1992.png``.
``cyril1998``
    Seed 002 section 4: the 5-body planar system of Tables 1–2 with rigid links
    (:func:`dynamics.cases.cyril_1998_system`) hitting the rigid payload. Pre- and
    post-impact generalized velocities, total momentum and kinetic energy for the plastic
    impact, the elastic one (r_E = 0, r_f = 0) and (r_E, r_f) = (0.5, 0.5), (0.5, 0.8),
    (0.2, 0.5), each with the end-effector (hand) joint free and locked
    (:mod:`dynamics.impact`). ``--out`` adds ``cyril1998.csv`` and ``cyril1998.png``.
``cyril1998 --flexible``
    Seed 002 section 4's post-impact simulations (:func:`cyril1998_flexible`): the links
    as Euler–Bernoulli beams (:mod:`dynamics.beam`, 2 modes each), the cases of Figs 2–10
    (plastic; elastic, r_E/r_f = 0.5/0.5, 0.5/0.8, 0.2/0.5 with the end effector
    locked), each run again with rigid links. Prints the post-impact rates (elastic
    ones included) and, finding by finding, whether the runs show what the paper reports
    (:func:`cyril_findings`); ``--out`` adds ``cyril1998_flexible.csv`` and plots of
    what Figs 2–10 plot (pitch and joint angles, tip deflections, configurations).

``modes CONFIG [--at capture|berthed]``
    The loaded arm's modes (:func:`loaded_modes`, :mod:`dynamics.modal`): the scenario's
    SRMS as a multibody arm with flexible booms (the config's ``[arm]`` values and
    assumptions, ``boom_modes`` per bending plane), its joints springs of the gearbox in
    series with the servo's holding stiffness, holding the scenario's payload. ``capture``
    (default): at the configured initial posture ``arm.q0``, the payload grappled where that
    posture puts the end effector; ``berthed``: at the berthed pose, the payload also
    latched to the orbiter (a closed chain). Scenario instants (a time or the posture of a
    later phase from a run) are not offered: they need the run. Prints a table of the
    first modes (frequency, damping, effective masses with the orbiter held).

Without ``--out`` nothing is written. Exit codes: 0 success, 2 usage (unknown case, a
bad config), 1 a computation failed (the error is printed).
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dynamics import cases, exgit, impact, modal
from dynamics import chain as ch
from dynamics import spatial as sp
from errors import BerthsimError, ConfigError

__all__ = ["main", "yoshida1992", "cyril1998", "cyril1998_flexible", "cyril_run", "cyril_findings", "YoshidaSweep",
           "CyrilRow", "CyrilRun", "CyrilFlexible", "CASES", "CYRIL_RUNS", "loaded_modes", "LoadedModes",
           "MODES_AT"]

Array = NDArray[np.float64]

# ---------------------------------------------------------------- yoshida1992

MU_LEVELS: tuple[float, ...] = (0.0, 0.5, 1.0)


@dataclass(frozen=True)
class YoshidaSweep:
    """Virtual masses over impulse direction for each joint resistance level.

    Attributes
    ----------
    theta_deg : ndarray, shape (k,)
        Impulse direction θ (:func:`dynamics.cases.yoshida_direction`). [deg]
    mu : tuple[float, ...]
        Joint resistance levels (mu = level · I).
    m_a, m_p : ndarray, shape (len(mu), k)
        Absolute and projected virtual masses. [kg]
    psi_deg : ndarray, shape (len(mu), k)
        Signed angle from the impulse to the acceleration direction. [deg]
    total_mass : float
        [kg]
    """

    theta_deg: Array
    mu: tuple[float, ...]
    m_a: Array
    m_p: Array
    psi_deg: Array
    total_mass: float

    def peak(self, i: int) -> tuple[float, float, float]:
        """(θ [deg], m_a* [kg], psi [deg]) at the largest m_a* for level i."""
        k = int(np.argmax(self.m_a[i]))
        return float(self.theta_deg[k]), float(self.m_a[i, k]), float(self.psi_deg[i, k])

    def psi_zero(self, i: int) -> float:
        """θ [deg] of the first sign change of psi from + to − (or − to +), linearly interpolated; NaN if none."""
        s = self.psi_deg[i]
        idx = np.nonzero(np.sign(s[:-1]) * np.sign(s[1:]) < 0)[0]
        if idx.size == 0:
            return float("nan")
        k = int(idx[0])
        t0, t1 = self.theta_deg[k], self.theta_deg[k + 1]
        return float(t0 + (t1 - t0) * s[k] / (s[k] - s[k + 1]))


def yoshida1992(theta_deg: Sequence[float] | None = None, mu: Sequence[float] = MU_LEVELS) -> YoshidaSweep:
    """Sweep the three-rod chain's virtual masses over impulse direction (seed 000 section 6).

    Parameters
    ----------
    theta_deg : sequence of float, optional
        Directions θ [deg]; default 0…180 in 0.5° steps.
    mu : sequence of float
        Joint resistance levels, mu = level · I.

    Returns
    -------
    YoshidaSweep
    """
    th = np.arange(0.0, 180.0 + 1e-9, 0.5) if theta_deg is None else np.asarray(theta_deg, dtype=float)
    case = cases.yoshida_three_rod()
    data = ch.make_data(case.model)
    normal = np.array([0.0, 0.0, 1.0])
    dirs = [cases.yoshida_direction(case, np.radians(t)) for t in th]
    m_a = np.zeros((len(mu), th.size))
    m_p = np.zeros_like(m_a)
    psi = np.zeros_like(m_a)
    for i, level in enumerate(mu):
        G = exgit.exgit(case.model, data, case.q, case.hand_body, case.p_BoHo_B, mu=float(level))
        for k, n in enumerate(dirs):
            m_p[i, k], m_a[i, k], p = exgit.virtual_mass(G, n, normal)
            psi[i, k] = np.degrees(p)
    return YoshidaSweep(th, tuple(float(x) for x in mu), m_a, m_p, psi, float(case.model.total_mass))


def _yoshida_report(sw: YoshidaSweep) -> str:
    lines = ["Yoshida et al. 1992 (seed 000) sec. 6: three rods 1.0 m / 1.0 kg, hand at the end of rod 3",
             f"total mass {sw.total_mass:.3f} kg; mu = level x I; psi signed about +z", ""]
    head = ["theta [deg]"]
    for level in sw.mu:
        head += [f"m_a* mu={level:g} [kg]", f"psi mu={level:g} [deg]"]
    rows = []
    for k, t in enumerate(sw.theta_deg):
        if abs(t / 10.0 - round(t / 10.0)) > 1e-9:
            continue
        row = [f"{t:.0f}"]
        for i in range(len(sw.mu)):
            row += [f"{sw.m_a[i, k]:.4f}", f"{sw.psi_deg[i, k]:+.2f}"]
        rows.append(row)
    lines.append(_table(head, rows))
    lines.append("")
    lines.append("peaks (paper: mu=I at 51 deg with m_a* = total mass and psi = 0; mu=0 at 90 deg, along the end link;")
    lines.append("       mu=0.5I in between)")
    for i, level in enumerate(sw.mu):
        t, m, p = sw.peak(i)
        lines.append(f"  mu={level:g}: max m_a* = {m:.4f} kg at theta = {t:.1f} deg (psi there {p:+.2f} deg); "
                     f"psi = 0 at theta = {sw.psi_zero(i):.2f} deg")
    return "\n".join(lines)


def _yoshida_files(sw: YoshidaSweep, out: Path) -> list[Path]:
    with open(out / "yoshida1992.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        head = ["theta_deg"]
        for level in sw.mu:
            head += [f"m_a_mu{level:g}_kg", f"m_p_mu{level:g}_kg", f"psi_mu{level:g}_deg"]
        w.writerow(head)
        for k, t in enumerate(sw.theta_deg):
            row = [f"{t:g}"]
            for i in range(len(sw.mu)):
                row += [f"{sw.m_a[i, k]:.9g}", f"{sw.m_p[i, k]:.9g}", f"{sw.psi_deg[i, k]:.9g}"]
            w.writerow(row)
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.0, 6.0))
    ax1, ax2 = fig.subplots(2, 1, sharex=True)
    styles = ["-", ":", "--"]
    for i, level in enumerate(sw.mu):
        ls = styles[i % len(styles)]
        ax1.plot(sw.theta_deg, sw.m_a[i], ls, label=f"mu = {level:g} I")
        ax2.plot(sw.theta_deg, sw.psi_deg[i], ls, label=f"mu = {level:g} I")
    ax1.axhline(sw.total_mass, color="grey", lw=0.5)
    ax1.set_ylabel("m_a* [kg]")
    ax2.set_ylabel("psi [deg]")
    ax2.axhline(0.0, color="grey", lw=0.5)
    ax2.set_xlabel("impulse direction theta [deg]")
    ax1.legend()
    ax1.set_title("Yoshida 1992, three-rod chain: virtual mass vs impulse direction")
    fig.savefig(out / "yoshida1992.png", dpi=120)
    return [out / "yoshida1992.csv", out / "yoshida1992.png"]


# ---------------------------------------------------------------- cyril1998

CYRIL_CASES: tuple[tuple[str, float | None, float | None], ...] = (
    ("plastic", None, None),
    ("elastic", 0.0, 0.0),
    ("rE=0.5 rf=0.5", 0.5, 0.5),
    ("rE=0.5 rf=0.8", 0.5, 0.8),
    ("rE=0.2 rf=0.5", 0.2, 0.5),
)


@dataclass(frozen=True)
class CyrilRow:
    """One impact case of the Cyril system (all in W, SI; angles of the table in the seed's degrees).

    Attributes
    ----------
    name : str
        "pre-impact", "plastic", "elastic" or "rE=.. rf=..".
    end_effector : str
        "free" or "locked" ("-" for the pre-impact row).
    v : ndarray, shape (9,)
        Chaser generalized velocity ``[ω_W, v_Bo_W, θ̇2, θ̇3, θ̇4]`` (:mod:`dynamics.chain`). [rad/s, m/s]
    v_p, w_p : ndarray, shape (3,)
        Payload CoM velocity and angular velocity. [m/s, rad/s]
    P_W, L_Wo_W : ndarray, shape (3,)
        Total linear momentum and angular momentum about W's origin, chaser + payload.
    KE : float
        Total kinetic energy. [J]
    v_recede : float
        ``−v_pf·n``, the payload CoM's velocity away from the hand along the line of impact
        (the seed's e, eq. 28, printed as its column ``e``); NaN for the pre-impact row. [m/s]
    impulse_W : ndarray, shape (3,)
        Impulse on the hand. [N·s]
    roots : tuple[float, float]
        Both roots of eq. (49) as normal impulses e* = m_p (v_recede + x), ascending (the larger is
        taken); NaN for the pre-impact row. [N·s]
    x : float
        Pre-impact normal velocity of the payload CoM, ``v_pi·n`` (eq. 28). [m/s]
    """

    name: str
    end_effector: str
    v: Array
    v_p: Array
    w_p: Array
    P_W: Array
    L_Wo_W: Array
    KE: float
    v_recede: float
    impulse_W: Array
    roots: tuple[float, float]
    x: float


def cyril1998() -> list[CyrilRow]:
    """All cases of seed 002 section 4 on the rigid-link system of Tables 1–2.

    Line of impact ``n``: from the payload CoM to the contact point (the hand tip), i.e.
    along the hand axis — **assumed**, the seed gives no geometry for it. "Locked end
    effector": the hand joint θ4 keeps its rate through the impact (``locked``).

    Returns
    -------
    list of CyrilRow
        The pre-impact row first, then each case with the end effector free, then locked.

    Raises
    ------
    NoSolutionError
        If a case's (r_E, r_f) admit no real solution.
    """
    case, pl = cases.cyril_1998_system()
    model, q, v0 = case.model, case.q, case.v
    data = ch.make_data(model)
    X = ch.forward_kinematics(model, data, q)
    hb = case.hand_body
    p_C = X[hb, :3, 3] + X[hb, :3, :3] @ case.p_BoHo_B
    p_cm = p_C - pl.p_BcmC_W
    M = ch.mass_matrix(model, data, q)
    J = ch.frame_jacobian(model, data, q, hb, case.p_BoHo_B)[3:]
    w_pi, v_pi = pl.V_WBcm_W[:3], pl.V_WBcm_W[3:]
    n = pl.p_BcmC_W / np.linalg.norm(pl.p_BcmC_W)
    hand_joint = model.nv - 1

    x = float(v_pi @ n)

    def row(name: str, ee: str, v: Array, v_p: Array, w_p: Array, v_recede: float, imp: Array,
            roots: tuple[float, float] = (float("nan"), float("nan"))) -> CyrilRow:
        P, L = ch.momentum(model, data, q, v)
        P_p = pl.mass * v_p
        L_p = np.cross(p_cm, P_p) + pl.I_Bcm_W @ w_p
        KE = ch.kinetic_energy(model, data, q, v) + 0.5 * pl.mass * v_p @ v_p + 0.5 * w_p @ pl.I_Bcm_W @ w_p
        return CyrilRow(name, ee, v.copy(), v_p.copy(), w_p.copy(), P + P_p, L + L_p, float(KE), v_recede, imp, roots,
                        x)

    rows = [row("pre-impact", "-", v0, v_pi, w_pi, float("nan"), np.zeros(3))]
    args = (M, J, v0, pl.mass, pl.I_Bcm_W, pl.p_BcmC_W, v_pi, w_pi)
    for ee, locked in (("free", ()), ("locked", (hand_joint,))):
        for name, r_E, r_f in CYRIL_CASES:
            if r_E is None or r_f is None:
                res = impact.plastic_impact_payload(*args, n_W=n, locked=locked)
            else:
                res = impact.nonplastic_impact_payload(*args, n, r_E, r_f, locked=locked)
            rows.append(row(name, ee, res.psid_f, res.v_pf, res.w_pf, res.v_recede, res.impulse_W, res.roots))
    return rows


def _cyril_report(rows: list[CyrilRow]) -> str:
    def d(x: float) -> float:  # degrees, with rounding noise shown as 0
        return 0.0 if abs(x) < 1e-12 else float(np.degrees(x))

    pre = rows[0]
    lines = [
        "Cyril et al. 1998 (seed 002) Tables 1-2, rigid links, payload 1000 kg / 500 kg m^2",
        "generalized velocities: spacecraft rate w_sc, base velocity, joint rates th2..th4 [deg/s];"
        " payload v_p [m/s], w_p [deg/s]",
        "momentum: P [N s], L_z about the W origin [N m s]; KE [J]; dKE = KE - KE_pre; e of eq. (28) [m/s]",
        "",
    ]
    head = ["case", "EE", "w_sc", "v_sc_x", "v_sc_y", "th2_dot", "th3_dot", "th4_dot", "v_p_x", "v_p_y",
            "w_p", "P_x", "P_y", "L_z", "KE", "dKE", "e"]
    body = []
    for r in rows:
        body.append([
            r.name, r.end_effector, f"{d(r.v[2]):+.4f}", f"{r.v[3]:+.3e}", f"{r.v[4]:+.3e}",
            f"{d(r.v[6]):+.4f}", f"{d(r.v[7]):+.4f}", f"{d(r.v[8]):+.4f}", f"{r.v_p[0]:+.4e}", f"{r.v_p[1]:+.4e}",
            f"{d(r.w_p[2]):+.4f}", f"{r.P_W[0]:+.6f}", f"{r.P_W[1]:+.6f}", f"{r.L_Wo_W[2]:+.5f}",
            f"{r.KE:.6f}", f"{r.KE - pre.KE:+.6f}", "" if np.isnan(r.v_recede) else f"{r.v_recede:+.5f}",
        ])
    lines.append(_table(head, body))
    dP = max(float(np.linalg.norm(r.P_W - pre.P_W)) for r in rows)
    dL = max(float(np.linalg.norm(r.L_Wo_W - pre.L_Wo_W)) for r in rows)
    lines.append("")
    lines.append(f"momentum conservation over all cases: max |dP| = {dP:.2e} N s, max |dL| = {dL:.2e} N m s")
    for ee in ("free", "locked"):
        sub = {r.name: r for r in rows if r.end_effector == ee}
        loss_p = sub["plastic"].KE - pre.KE
        parts = [f"{k}: {(r.KE - pre.KE) / loss_p:.6f}" for k, r in sub.items() if k != "plastic"]
        lines.append(f"energy loss / plastic loss ({ee} EE): " + ", ".join(parts))
    lines.append("")
    lines.append(f"root choice (eqs. 49-53): x = v_pi.n = {pre.x:+.4f} m/s; e* = m_p (e + x) [N s], larger root taken")
    m_p = cases.cyril_1998_system()[1].mass
    for ee in ("free", "locked"):
        sub = {r.name: r for r in rows if r.end_effector == ee}
        for name, _, _ in CYRIL_CASES[1:]:
            r = sub[name]
            ok50 = (r.v_recede + r.x >= 0.0) if r.x >= 0.0 else (r.v_recede + r.x < 0.0)
            lines.append(f"  {ee:6s} {name:13s} roots ({r.roots[0]:.5f}, {r.roots[1]:.5f}); "
                         f"e + x = {r.roots[1] / m_p:+.6f} m/s; (50)/(51) {'holds' if ok50 else 'VIOLATED'}")

        def ex(name: str, sub: dict[str, CyrilRow] = sub) -> float:
            return abs(sub[name].roots[1]) / m_p

        c52 = ex("rE=0.2 rf=0.5") > ex("rE=0.5 rf=0.5")
        c53 = ex("rE=0.5 rf=0.8") > ex("rE=0.5 rf=0.5")
        lines.append(f"  {ee:6s} (52) |e+x| falls as r_E rises (0.2 -> 0.5): {'holds' if c52 else 'does NOT hold'}; "
                     f"(53) |e+x| rises with r_f (0.5 -> 0.8): {'holds' if c53 else 'does NOT hold'}")
    return "\n".join(lines)


def _cyril_files(rows: list[CyrilRow], out: Path) -> list[Path]:
    with open(out / "cyril1998.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["case", "end_effector", "w_sc_x", "w_sc_y", "w_sc_z", "v_sc_x", "v_sc_y", "v_sc_z",
                    "th2_dot", "th3_dot", "th4_dot", "v_p_x", "v_p_y", "v_p_z", "w_p_x", "w_p_y", "w_p_z",
                    "P_x", "P_y", "P_z", "L_x", "L_y", "L_z", "KE_J", "e", "impulse_x", "impulse_y", "impulse_z",
                    "root1_Ns", "root2_Ns"])
        for r in rows:
            w.writerow([r.name, r.end_effector, *(f"{x:.12g}" for x in r.v), *(f"{x:.12g}" for x in r.v_p),
                        *(f"{x:.12g}" for x in r.w_p), *(f"{x:.12g}" for x in r.P_W),
                        *(f"{x:.12g}" for x in r.L_Wo_W), f"{r.KE:.12g}",
                        "" if np.isnan(r.v_recede) else f"{r.v_recede:.12g}",
                        *(f"{x:.12g}" for x in r.impulse_W), *(f"{x:.12g}" for x in r.roots)])
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9.0, 6.0))
    ax1, ax2 = fig.subplots(2, 1)
    post = rows[1:]
    labels = [f"{r.name}\n{r.end_effector}" for r in post]
    x = np.arange(len(post))
    for j, (k, name) in enumerate(((6, "th2_dot"), (7, "th3_dot"), (8, "th4_dot"))):
        ax1.bar(x + (j - 1) * 0.25, [np.degrees(r.v[k]) for r in post], 0.25, label=name)
    ax1.axhline(0.0, color="grey", lw=0.5)
    ax1.set_ylabel("post-impact joint rate [deg/s]")
    ax1.set_xticks(x, labels, fontsize=7)
    ax1.legend(fontsize=8)
    ax2.bar(x, [r.KE - rows[0].KE for r in post])
    ax2.set_ylabel("KE change [J]")
    ax2.set_xticks(x, labels, fontsize=7)
    fig.suptitle("Cyril et al. 1998, rigid links: post-impact state")
    fig.tight_layout()
    fig.savefig(out / "cyril1998.png", dpi=120)
    return [out / "cyril1998.csv", out / "cyril1998.png"]


# ---------------------------------------------------------------- cyril1998 --flexible

#: The post-impact simulations of seed 002 §4 (Figs 2–10): (name, r_E, r_f, end effector).
#: The plastic case's end effector is free (the captions of Figs 2–4 say nothing), the others
#: are "locked" as their captions say.
CYRIL_RUNS: tuple[tuple[str, float | None, float | None, str], ...] = (
    ("plastic", None, None, "free"),
    ("elastic", 0.0, 0.0, "locked"),
    ("rE=0.5 rf=0.5", 0.5, 0.5, "locked"),
    ("rE=0.5 rf=0.8", 0.5, 0.8, "locked"),
    ("rE=0.2 rf=0.5", 0.2, 0.5, "locked"),
)
#: Shoulder joint from the spacecraft CoM along its x axis [m] — **assumed** (Fig. 1 is not in
#: the OCR): the spacecraft's radius of gyration, sqrt(40000/10000). At the CoM (the rigid
#: table's assumption) free joints could exert no moment on the spacecraft, and the base
#: drift the seed reports could not happen.
CYRIL_MOUNT_X = 2.0
#: Assumed modes per link (in-plane bending, clamped–free) and simulated time [s].
CYRIL_MODES = 2
CYRIL_DURATION = 120.0


@dataclass(frozen=True)
class CyrilRun:
    """One post-impact simulation of the Cyril system (all in W, SI).

    Attributes
    ----------
    name, end_effector : str
        Case (``CYRIL_RUNS``) and "free" / "locked".
    flexible : bool
    t : ndarray, shape (k,)
        [s]
    pitch : ndarray, shape (k,)
        Spacecraft attitude about z (θ1). [rad]
    theta : ndarray, shape (k, 3)
        Joint angles θ2 (shoulder), θ3 (elbow), θ4 (hand). [rad]
    tip_deflection : ndarray, shape (k, 2)
        In-plane tip deflections ``u_y(L)`` of link 1 and link 2 (zero for rigid links). [m]
    p_tip : ndarray, shape (k, 3)
        The hand tip (contact point). [m]
    p_payload : ndarray, shape (k, 3)
        Payload CoM. [m]
    yaw_payload, w_payload : ndarray, shape (k,)
        Payload attitude about z from its initial one [rad] and rate [rad/s].
    psid_f : ndarray, shape (nv,)
        The chaser's post-impact generalized velocity (elastic rates last).
    impulse_W : ndarray, shape (3,)
        Impulse on the hand. [N·s]
    snapshots : list of dict
        Configurations at ``len(snapshots)`` evenly spaced times: ``"t"`` [s] and polylines
        (m, 2) in the xy plane for "spacecraft", "link1", "link2", "hand", "payload".
    n_rhs : int
        Dynamics evaluations of the integration.
    P_W, L_Wo_W : ndarray, shape (k, 3)
        Linear momentum and angular momentum about W's origin of chaser and payload. [N·s, N·m·s]
    """

    name: str
    end_effector: str
    flexible: bool
    t: Array
    pitch: Array
    theta: Array
    tip_deflection: Array
    p_tip: Array
    p_payload: Array
    yaw_payload: Array
    w_payload: Array
    psid_f: Array
    impulse_W: Array
    snapshots: list[dict[str, Any]]
    n_rhs: int
    P_W: Array
    L_Wo_W: Array


def _square(center: Array, angle: float, half: float) -> Array:
    c, s_ = np.cos(angle), np.sin(angle)
    corners = np.array([[1, 1], [-1, 1], [-1, -1], [1, -1], [1, 1]], dtype=float) * half
    return center[:2] + corners @ np.array([[c, s_], [-s_, c]])


def cyril_run(name: str, r_E: float | None, r_f: float | None, end_effector: str, *, n_modes: int = CYRIL_MODES,
              mount_x: float = CYRIL_MOUNT_X, duration: float = CYRIL_DURATION, n_samples: int = 1201,
              n_snapshots: int = 6, rtol: float = 1e-8) -> CyrilRun:
    """Impact and post-impact simulation of one case of seed 002 §4 (rigid links if ``n_modes = 0``).

    The impact (:mod:`dynamics.impact`) acts on every generalized velocity, the links'
    elastic rates included (seed 002 eq. 7), with the hand joint's rate kept when the end
    effector is "locked". Afterwards (seed 002, end of §3) a plastic capture leaves the
    payload hinged to the hand at the contact point (:func:`dynamics.cases.cyril_1998_captured`);
    otherwise the chaser moves alone and the payload flies off at its post-impact
    velocity. A locked end effector keeps its rate (zero acceleration) throughout; the other
    joints are free. Integrated with :func:`dynamics.chain.simulate` (DOP853).

    Raises
    ------
    NoSolutionError
        If (r_E, r_f) admit no post-impact velocity.
    """
    case, pl = cases.cyril_1998_system(n_modes, mount_x=mount_x)
    model, q, v0 = case.model, case.q, case.v
    data = ch.make_data(model)
    hb = case.hand_body
    M = ch.mass_matrix(model, data, q).copy()
    J = ch.frame_jacobian(model, data, q, hb, case.p_BoHo_B)[3:].copy()
    w_pi, v_pi = pl.V_WBcm_W[:3], pl.V_WBcm_W[3:]
    n = pl.p_BcmC_W / np.linalg.norm(pl.p_BcmC_W)
    hand_joint = 6 + model.n - 1
    locked = (hand_joint,) if end_effector == "locked" else ()
    args = (M, J, v0, pl.mass, pl.I_Bcm_W, pl.p_BcmC_W, v_pi, w_pi)
    if r_E is None or r_f is None:
        res = impact.plastic_impact_payload(*args, n_W=n, locked=locked)
    else:
        res = impact.nonplastic_impact_payload(*args, n, r_E, r_f, locked=locked)
    X0 = ch.forward_kinematics(model, data, q)
    p_cm0 = X0[hb, :3, 3] + X0[hb, :3, :3] @ case.p_BoHo_B - pl.p_BcmC_W
    ts = np.linspace(0.0, duration, n_samples)
    if r_E is None:
        cap = cases.cyril_1998_captured(case, pl, q, res.psid_f, res.w_pf)
        sim_model, q0, vs0 = cap.model, cap.q, cap.v
    else:
        sim_model, q0, vs0 = model, q, res.psid_f
    sd = ch.make_data(sim_model)
    tr = ch.simulate(sim_model, sd, q0, vs0, ts, rtol=rtol, atol=rtol * 1e-3, locked=locked)
    k = ts.size
    pitch = np.unwrap(2.0 * np.arctan2(tr.q[:, 6], tr.q[:, 3]))
    theta = tr.q[:, 7:10].copy()
    defl = np.zeros((k, 2))
    p_tip = np.zeros((k, 3))
    p_pay = np.zeros((k, 3))
    yaw = np.zeros(k)
    w_pay = np.zeros(k)
    P = np.zeros((k, 3))
    Lm = np.zeros((k, 3))
    snaps: list[dict[str, Any]] = []
    i_snap = set(np.linspace(0, k - 1, n_snapshots).round().astype(int).tolist())
    e_hand0 = X0[hb, :3, 0]
    for i in range(k):
        qi, vi = tr.q[i], tr.v[i]
        X = ch.forward_kinematics(sim_model, sd, qi)
        p_tip[i] = X[hb, :3, 3] + X[hb, :3, :3] @ case.p_BoHo_B
        if sim_model.ne:
            defl[i] = [ch.tip_deflection(sim_model, qi, b)[0][1] for b in (1, 2)]
        if r_E is None:
            p_pay[i] = p_tip[i] + X[4, :3, :3] @ sim_model.p_BoBcm_B[4]
            e = X[4, :3, 0]
            yaw[i] = np.arctan2(np.cross(e_hand0, e)[2], e_hand0 @ e)
            w_pay[i] = (ch.frame_jacobian(sim_model, sd, qi, 4)[:3] @ vi)[2]
        else:
            p_pay[i] = p_cm0 + res.v_pf * ts[i]
            yaw[i] = res.w_pf[2] * ts[i]
            w_pay[i] = res.w_pf[2]
        P[i], Lm[i] = ch.momentum(sim_model, sd, qi, vi)
        if r_E is not None:  # the payload flies alone
            P[i] += pl.mass * res.v_pf
            Lm[i] += np.cross(p_pay[i], pl.mass * res.v_pf) + pl.I_Bcm_W @ res.w_pf
        if i in i_snap:
            poly: dict[str, Any] = {"t": float(ts[i])}
            poly["spacecraft"] = _square(X[0, :3, 3] + X[0, :3, :3] @ sim_model.p_BoBcm_B[0], pitch[i], 2.0)
            for b, key in ((1, "link1"), (2, "link2")):
                if sim_model.ne:
                    pts = ch.beam_points(sim_model, sd, qi, b, np.linspace(0.0, 8.13, 21))
                else:
                    pts = np.array([X[b, :3, 3], X[b, :3, 3] + 8.13 * X[b, :3, 0]])
                poly[key] = pts[:, :2]
            poly["hand"] = np.array([X[hb, :2, 3], p_tip[i, :2]])
            poly["payload"] = np.vstack([_square(p_pay[i], float(np.arctan2(e_hand0[1], e_hand0[0]) + yaw[i]), 0.7),
                                         [p_tip[i, :2]], [p_pay[i, :2]]])
            snaps.append(poly)
    yaw = np.unwrap(yaw)
    return CyrilRun(name, end_effector, n_modes > 0, ts, pitch, theta, defl, p_tip, p_pay, yaw, w_pay,
                    res.psid_f.copy(), np.asarray(res.impulse_W, dtype=float).copy(), snaps, tr.n_rhs, P, Lm)


@dataclass(frozen=True)
class CyrilFlexible:
    """The cases of seed 002 §4 with flexible links and, for comparison, rigid ones.

    Attributes
    ----------
    flexible, rigid : dict[str, CyrilRun]
        By case name (``CYRIL_RUNS``).
    n_modes : int
    mount_x : float
        [m]
    """

    flexible: dict[str, CyrilRun]
    rigid: dict[str, CyrilRun]
    n_modes: int
    mount_x: float


def cyril1998_flexible(n_modes: int = CYRIL_MODES, duration: float = CYRIL_DURATION,
                       runs: Sequence[str] | None = None, **kw: Any) -> CyrilFlexible:
    """Run the post-impact cases of seed 002 §4 with flexible links, and again with rigid ones.

    Parameters
    ----------
    n_modes : int
        Assumed modes per link.
    duration : float
        Simulated time after the impact. [s]
    runs : sequence of str, optional
        Case names (default: all of ``CYRIL_RUNS``).
    **kw
        Passed to :func:`cyril_run`.

    Returns
    -------
    CyrilFlexible
    """
    want = [r for r in CYRIL_RUNS if runs is None or r[0] in runs]
    flex = {name: cyril_run(name, r_E, r_f, ee, n_modes=n_modes, duration=duration, **kw)
            for name, r_E, r_f, ee in want}
    rigid = {name: cyril_run(name, r_E, r_f, ee, n_modes=0, duration=duration, **kw)
             for name, r_E, r_f, ee in want}
    return CyrilFlexible(flex, rigid, n_modes, float(kw.get("mount_x", CYRIL_MOUNT_X)))


def cyril_findings(res: CyrilFlexible) -> list[tuple[str, bool, str]]:
    """The seed's findings (§4, §5), each checked on our runs: (finding, holds, figures)."""
    out: list[tuple[str, bool, str]] = []
    F, R = res.flexible, res.rigid
    if "plastic" in F:
        p = F["plastic"]
        th3 = np.degrees(p.theta[:, 1])
        k = int(np.argmin(np.abs(th3)))
        out.append(("plastic: the payload's angular momentum stretches the arm to the singular (straight) "
                    "configuration",
                    bool(np.min(np.abs(th3)) < 2.0),
                    f"elbow angle theta3 from {th3[0]:+.1f} deg to {th3[k]:+.2f} deg at t = {p.t[k]:.0f} s "
                    f"(min |theta3| = {np.min(np.abs(th3)):.2f} deg)"))
        w = np.degrees(p.w_payload)
        rev = np.nonzero((w[:-1] < 0) & (w[1:] >= 0))[0]
        w_late = float(np.mean(w[-max(1, w.size // 10):]))
        out.append(("plastic: the payload then reverses its direction of rotation",
                    bool(w[0] < 0 and w_late > 0),
                    f"payload rate {w[0]:+.2f} deg/s after the impact, mean {w_late:+.2f} deg/s over the last "
                    f"10 % of the run; first reversal at t = {p.t[rev[0] + 1]:.0f} s" if rev.size else
                    f"payload rate {w[0]:+.2f} deg/s after the impact, mean {w_late:+.2f} deg/s at the end"))
        pitch = np.degrees(p.pitch)
        early = float(np.max(np.abs(pitch[p.t <= p.t[k]])))
        out.append(("plastic: and the spacecraft drifts in attitude",
                    bool(abs(pitch[-1]) > 5 * max(early, 1e-6) and abs(pitch[-1]) > 1.0),
                    f"pitch {early:.2f} deg at most before the singular configuration, {pitch[-1]:+.2f} deg at "
                    f"t = {p.t[-1]:.0f} s"))
    if "elastic" in F:
        e = F["elastic"]
        th3 = np.degrees(e.theta[:, 1])
        rate0 = np.degrees(e.psid_f[7])
        d_tip = e.p_tip - e.p_payload
        sep = np.linalg.norm(d_tip, axis=1)
        out.append(("elastic (locked end effector): the arm rebounds and folds back on itself",
                    bool(rate0 > 0 and th3[-1] > th3[0] and np.min(np.abs(th3)) > 5.0),
                    f"elbow rate {np.degrees(res.flexible['elastic'].psid_f[7]):+.3f} deg/s after the impact "
                    f"(-1.810 before), theta3 {th3[0]:.1f} -> {th3[-1]:.1f} deg, never near 0 "
                    f"(min {np.min(np.abs(th3)):.1f} deg); hand-payload distance {sep[0]:.2f} -> {sep[-1]:.2f} m"))
    if "rE=0.5 rf=0.5" in F and "rE=0.5 rf=0.8" in F:
        a, b = F["rE=0.5 rf=0.5"], F["rE=0.5 rf=0.8"]
        ang = np.degrees(np.arctan2(np.cross(a.impulse_W, b.impulse_W)[2], a.impulse_W @ b.impulse_W))
        na, nb_ = np.linalg.norm(a.impulse_W), np.linalg.norm(b.impulse_W)
        dtip = float(np.max(np.linalg.norm(a.p_tip - b.p_tip, axis=1)))
        travel = float(np.max(np.linalg.norm(a.p_tip - a.p_tip[0], axis=1)))
        out.append(("friction (Fig. 8 vs 9): a larger r_f changes the impulse's direction and magnitude, and with "
                    "it the tip's x-y path (here: by more than 5 % of the tip's travel)",
                    bool((abs(ang) > 0.1 or abs(nb_ / na - 1.0) > 1e-3) and dtip > 0.05 * travel),
                    f"impulse {na:.3f} N s (r_f 0.5) vs {nb_:.3f} N s (r_f 0.8), {ang:+.2f} deg apart; tip paths up to "
                    f"{dtip:.2f} m apart (the tip travels {travel:.2f} m)"))
    if "rE=0.5 rf=0.5" in F and "rE=0.2 rf=0.5" in F:
        a, b = F["rE=0.5 rf=0.5"], F["rE=0.2 rf=0.5"]
        ta = float(np.max(np.linalg.norm(a.p_tip - a.p_tip[0], axis=1)))
        tb = float(np.max(np.linalg.norm(b.p_tip - b.p_tip[0], axis=1)))
        out.append(("energy loss (Fig. 10 vs 8): with less energy lost (r_E 0.2) the tip moves further",
                    bool(tb > ta),
                    f"largest tip excursion {tb:.2f} m (r_E 0.2) vs {ta:.2f} m (r_E 0.5)"))
    diffs = {}
    for name in F:
        if name in R:
            f_, r_ = F[name], R[name]
            travel = float(np.max(np.linalg.norm(r_.p_tip - r_.p_tip[0], axis=1)))
            dtip = float(np.max(np.linalg.norm(f_.p_tip - r_.p_tip, axis=1)))
            diffs[name] = (dtip, travel)
    if "plastic" in diffs and len(diffs) > 1:
        rel = {k: d / max(t, 1e-12) for k, (d, t) in diffs.items()}
        nonpl = [v for k, v in rel.items() if k != "plastic"]
        fig = "; ".join(f"{k}: {diffs[k][0]:.2f} m of {diffs[k][1]:.2f} m ({100 * rel[k]:.0f} %)" for k in diffs)
        out.append(("flexibility matters most in the non-plastic cases (largest rigid-flexible tip difference, "
                    "relative to the tip's travel)", bool(min(nonpl) > rel["plastic"]), fig))
    return out


def _cyril_flexible_report(res: CyrilFlexible) -> str:
    lines = [f"Cyril et al. 1998 (seed 002) sec. 4, post-impact simulations: two flexible links "
             f"({res.n_modes} clamped-free modes each, EI = {cases.CYRIL_EI:g} N m^2) and rigid ones for comparison",
             f"assumed: shoulder {res.mount_x:g} m from the spacecraft CoM; locked end effector = hand joint keeps "
             "its rate; plastic: payload hinged at the contact point afterwards",
             ""]
    head = ["case", "EE", "links", "w_sc", "th2_dot", "th3_dot", "th4_dot", "eta_dot (link1, link2)", "|impulse|",
            "theta3 end", "pitch end", "w_p end", "n_rhs"]
    body = []
    for group in (res.flexible, res.rigid):
        for r in group.values():
            ed = r.psid_f[9:]
            body.append([r.name, r.end_effector, "flexible" if r.flexible else "rigid",
                         f"{np.degrees(r.psid_f[2]):+.4f}", *(f"{np.degrees(x):+.4f}" for x in r.psid_f[6:9]),
                         " ".join(f"{x:+.4f}" for x in ed) if ed.size else "-",
                         f"{np.linalg.norm(r.impulse_W):.4f}", f"{np.degrees(r.theta[-1, 1]):+.2f}",
                         f"{np.degrees(r.pitch[-1]):+.3f}", f"{np.degrees(r.w_payload[-1]):+.3f}", str(r.n_rhs)])
    lines.append("post-impact rates [deg/s, 1/s for eta_dot], impulse on the hand [N s], end of the run [deg, deg/s]")
    lines.append(_table(head, body))
    drift = max(float(np.max(np.linalg.norm(np.hstack([r.P_W, r.L_Wo_W]) - np.hstack([r.P_W[0], r.L_Wo_W[0]]), axis=1))
                      / np.linalg.norm(np.hstack([r.P_W[0], r.L_Wo_W[0]])))
                for g in (res.flexible, res.rigid) for r in g.values())
    lines.append(f"momentum of chaser and payload along every run: largest relative drift {drift:.1e}")
    lines.append("")
    lines.append("the seed's findings, case by case:")
    for text, holds, fig in cyril_findings(res):
        lines.append(f"  [{'agrees' if holds else 'DIFFERS'}] {text}")
        lines.append(f"      {fig}")
    return "\n".join(lines)


def _cyril_flexible_files(res: CyrilFlexible, out: Path) -> list[Path]:
    from matplotlib.figure import Figure

    paths = []
    with open(out / "cyril1998_flexible.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["case", "links", "t_s", "pitch_deg", "th2_deg", "th3_deg", "th4_deg", "defl1_m", "defl2_m",
                    "tip_x_m", "tip_y_m", "w_payload_deg_s"])
        for group in (res.flexible, res.rigid):
            for r in group.values():
                for i in range(r.t.size):
                    w.writerow([r.name, "flexible" if r.flexible else "rigid", f"{r.t[i]:.6g}",
                                f"{np.degrees(r.pitch[i]):.9g}", *(f"{np.degrees(x):.9g}" for x in r.theta[i]),
                                *(f"{x:.9g}" for x in r.tip_deflection[i]), f"{r.p_tip[i, 0]:.9g}",
                                f"{r.p_tip[i, 1]:.9g}", f"{np.degrees(r.w_payload[i]):.9g}"])
    paths.append(out / "cyril1998_flexible.csv")
    pair: list[str] = [k for k in ("plastic", "elastic") if k in res.flexible]
    if pair:  # Figs 2 and 5: spacecraft pitch and joint angles
        fig = Figure(figsize=(5.0 * len(pair), 6.0))
        axs = np.atleast_1d(fig.subplots(1, len(pair), squeeze=False)[0])
        for ax, k in zip(axs, pair, strict=True):
            for run, ls in ((res.flexible[k], "-"), (res.rigid.get(k), "--")):
                if run is None:
                    continue
                lab = "flexible" if run.flexible else "rigid"
                ax.plot(run.t, np.degrees(run.pitch), "k" + ls, label=f"theta1 (pitch), {lab}")
                for j, c in enumerate(("C0", "C1", "C2")):
                    ax.plot(run.t, np.degrees(run.theta[:, j]), c + ls, label=f"theta{j + 2}, {lab}")
            ax.set_title(f"{k} ({res.flexible[k].end_effector} end effector)")
            ax.set_xlabel("t [s]")
            ax.set_ylabel("angle [deg]")
        axs[0].legend(fontsize=7)
        fig.suptitle("Cyril et al. 1998 Figs 2, 5: spacecraft pitch and joint angles")
        fig.tight_layout()
        fig.savefig(out / "cyril1998_flexible_angles.png", dpi=110)
        paths.append(out / "cyril1998_flexible_angles.png")
        # Figs 3 and 6: link tip deflections
        fig = Figure(figsize=(5.0 * len(pair), 4.0))
        axs = np.atleast_1d(fig.subplots(1, len(pair), squeeze=False)[0])
        for ax, k in zip(axs, pair, strict=True):
            r = res.flexible[k]
            ax.plot(r.t, r.tip_deflection[:, 0], label="link 1")
            ax.plot(r.t, r.tip_deflection[:, 1], label="link 2")
            ax.set_title(k)
            ax.set_xlabel("t [s]")
            ax.set_ylabel("tip deflection [m]")
            ax.legend(fontsize=8)
        fig.suptitle("Cyril et al. 1998 Figs 3, 6: link tip deflections")
        fig.tight_layout()
        fig.savefig(out / "cyril1998_flexible_deflections.png", dpi=110)
        paths.append(out / "cyril1998_flexible_deflections.png")
    names = list(res.flexible)
    fig = Figure(figsize=(4.2 * len(names), 4.6))
    axs = np.atleast_1d(fig.subplots(1, len(names), squeeze=False)[0])
    for ax, k in zip(axs, names, strict=True):  # Figs 4, 7, 8, 9, 10: configurations
        r = res.flexible[k]
        shades = np.linspace(0.25, 1.0, len(r.snapshots))
        for snap, a in zip(r.snapshots, shades, strict=True):
            for key, c in (("spacecraft", "k"), ("link1", "C0"), ("link2", "C1"), ("hand", "C2"), ("payload", "C3")):
                ax.plot(snap[key][:, 0], snap[key][:, 1], color=c, alpha=float(a), lw=1.0)
        ax.plot(r.p_tip[:, 0], r.p_tip[:, 1], "m-", lw=0.8, label="tip, flexible")
        if k in res.rigid:
            ax.plot(res.rigid[k].p_tip[:, 0], res.rigid[k].p_tip[:, 1], "m--", lw=0.8, label="tip, rigid")
        ax.set_aspect("equal", adjustable="datalim")
        ax.set_title(f"{k}\n{r.end_effector} EE, t = 0..{r.t[-1]:.0f} s", fontsize=9)
        ax.set_xlabel("X [m]")
    axs[0].set_ylabel("Y [m]")
    axs[0].legend(fontsize=7)
    fig.suptitle("Cyril et al. 1998 Figs 4, 7-10: configurations after the impact (darker = later)")
    fig.tight_layout()
    fig.savefig(out / "cyril1998_flexible_configurations.png", dpi=110)
    paths.append(out / "cyril1998_flexible_configurations.png")
    return paths


# ---------------------------------------------------------------- modes

MODES_AT = ("capture", "berthed")


@dataclass(frozen=True)
class LoadedModes:
    """The loaded arm's modes at one posture (:func:`loaded_modes`).

    Attributes
    ----------
    at : str
        ``"capture"`` or ``"berthed"``.
    case : ChainCase
        SRMS on the orbiter with the payload welded to B7; ``case.q`` the posture.
    joint_stiffness : ndarray, shape (6,)
        Gearbox in series with the servo's holding stiffness. [N·m/rad]
    free : Modes
        Orbiter free (six zero-frequency rigid-body modes first).
    held : Modes
        Orbiter held (the base is the interface: effective masses).
    """

    at: str
    case: cases.ChainCase
    joint_stiffness: Array
    free: modal.Modes
    held: modal.Modes


def loaded_modes(config: dict[str, Any], at: str = "capture") -> LoadedModes:
    """The scenario's loaded SRMS's modes (module docstring, ``modes``).

    Raises
    ------
    ConfigError
        On an unknown ``at`` or an ``[arm]`` table the arm service refuses.
    SingularityError
        If the berthed posture cannot be solved from ``arm.q0``.
    """
    from dynamics import servo as sv
    from protocol.config import service_module, table_values

    arm = service_module("arm")  # the arm kind's own model and tables, through the registry of kinds

    if at not in MODES_AT:
        raise ConfigError(f"--at: {at!r} not one of {', '.join(MODES_AT)} (scenario instants need a run)")
    table = {**config.get("arm", {}), "model": "multibody", "booms": "flexible"}
    m = arm.build({**config, "arm": table}, "arm", 5_000_000)
    c = m.new_context()                                  # the arm's state: at rest at arm.q0
    m.initial(0, c)
    k = 1.0 / (1.0 / m.joint_stiffness + 1.0 / sv.hold_stiffness(m.servo_p))
    mT, IT = arm.payload_mass_properties(config)
    pay = table_values(config, "payload")  # the payload's keys and defaults, as its owner (contact) reads them
    X_TG = sp.pose_from_vector(pay["X_TG"])
    upper, lower = (m.chain.beams[m.chain.names.index(name)] for name in cases.SRMS_BOOM_LINKS)  # the arm's booms
    assert upper is not None and lower is not None
    booms = (upper, lower)
    loops: tuple[Any, ...] = ()
    if at == "capture":
        case = cases.srms_holding_payload(payload_mass=mT, payload_inertia_T=IT, X_TG=X_TG, X_OS=c.geom.X_OS,
                                          X_OT=m.pose(c).X_OE @ sp.pose_inverse(X_TG), theta_guess=c.theta,
                                          booms=booms)
    else:
        case, loop = cases.srms_latched_and_grappled(
            payload_mass=mT, payload_inertia_T=IT, X_TG=X_TG, X_TB=pay["X_TB"],
            X_OL=table_values(config, "orbiter")["X_OL"], X_OS=c.geom.X_OS, theta_guess=c.theta,
            booms=booms)
        loops = (loop,)
    free = modal.modes(case.model, case.q, joint_stiffness=k, loops=loops)
    held = modal.modes(case.model, case.q, joint_stiffness=k, loops=loops, lock_base=True)
    return LoadedModes(at, case, k, free, held)


def _modes_report(res: LoadedModes, n: int = 8) -> str:
    fr = res.free
    elastic = np.flatnonzero(fr.freq_hz > 0.0)[:n]
    held = res.held
    eff = held.effective_mass
    assert eff is not None  # a floating base
    rows = [[str(i + 1), f"{fr.freq_hz[k]:.5f}", f"{fr.damping_ratio[k]:.2e}", f"{held.freq_hz[i]:.5f}",
             *(f"{x:.3g}" for x in eff[i])]
            for i, k in enumerate(elastic) if i < held.freq_hz.size]
    head = ["mode", "f free [Hz]", "zeta booms", "f held [Hz]", "m_eff wx [kg m2]", "wy", "wz", "vx [kg]", "vy", "vz"]
    what = ("payload grappled at the initial posture arm.q0" if res.at == "capture"
            else "payload grappled and latched at the berthed pose (closed chain)")
    return (f"loaded SRMS modes, {what}; joints: gearbox in series with the servo hold "
            f"({', '.join(f'{x:.3g}' for x in res.joint_stiffness)} N m/rad)\n"
            f"free: orbiter free ({int((fr.freq_hz == 0).sum())} rigid-body modes left out); held: orbiter held, "
            "effective masses in W\n" + _table(head, rows))


# ---------------------------------------------------------------- common


def _table(head: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(head)]
    fmt = "  ".join(f"{{:>{w}}}" for w in widths)
    sep = "  ".join("-" * w for w in widths)
    return "\n".join([fmt.format(*head), sep] + [fmt.format(*r) for r in rows])


# case name -> (compute, report text, write files into a directory and return their paths)
CASES: dict[str, tuple[Callable[[], Any], Callable[[Any], str], Callable[[Any, Path], list[Path]]]] = {
    "yoshida1992": (yoshida1992, _yoshida_report, _yoshida_files),
    "cyril1998": (cyril1998, _cyril_report, _cyril_files),
}


def main(argv: list[str]) -> int:
    """Run ``analyze CASE [--out DIR] [--flexible]``; returns the exit code (0, 1 failure, 2 usage)."""
    parser = argparse.ArgumentParser(prog="launch.py analyze",
                                     description="Reproduce a seed's worked example: " + ", ".join(CASES))
    parser.add_argument("case", help="one of: " + ", ".join(CASES) + ", modes")
    parser.add_argument("config", nargs="?", type=Path, default=None, help="modes: the scenario config")
    parser.add_argument("--at", default="capture", help="modes: " + " or ".join(MODES_AT))
    parser.add_argument("--out", type=Path, default=None, help="directory for CSV and PNG files (default: print only)")
    parser.add_argument("--flexible", action="store_true",
                        help="cyril1998: post-impact simulations with flexible links, against rigid ones "
                             "(a few minutes)")
    try:
        a = parser.parse_args(argv)
    except SystemExit as exc:  # -h or a usage error: argparse has printed the message
        return int(exc.code) if isinstance(exc.code, int) else 2
    if a.case == "modes":
        return _modes_main(a.config, a.at)
    if a.config is not None:
        print(f"analyze: {a.case} takes no config ({str(a.config)!r})", file=sys.stderr)
        return 2
    if a.case not in CASES:
        print(f"analyze: unknown case {a.case!r}; known cases: {', '.join(CASES)}", file=sys.stderr)
        return 2
    if a.flexible and a.case != "cyril1998":
        print(f"analyze: --flexible applies to cyril1998 only, not to {a.case!r}", file=sys.stderr)
        return 2
    if a.out is not None:
        if a.out.exists() and not a.out.is_dir():
            print(f"analyze: --out {str(a.out)!r} exists and is not a directory", file=sys.stderr)
            return 2
        a.out.mkdir(parents=True, exist_ok=True)
    compute, report, files = CASES[a.case]
    if a.flexible:
        compute, report, files = cyril1998_flexible, _cyril_flexible_report, _cyril_flexible_files
    try:
        result = compute()
        print(report(result))
        if a.out is not None:
            print("wrote " + ", ".join(str(p) for p in files(result, a.out)))
    except BerthsimError as err:
        print(f"analyze {a.case}: {type(err).__name__}: {err}", file=sys.stderr)
        return 1
    return 0


def _modes_main(path: Path | None, at: str) -> int:
    from protocol import config as pc

    if path is None:
        print("analyze modes: a scenario config is required (analyze modes CONFIG [--at capture|berthed])",
              file=sys.stderr)
        return 2
    try:
        cfg = pc.load(path)
        if at not in MODES_AT:
            raise ConfigError(f"--at: {at!r} not one of {', '.join(MODES_AT)} (scenario instants need a run)")
    except ConfigError as err:
        print(f"analyze modes: {err}", file=sys.stderr)
        return 2
    try:
        res = loaded_modes(cfg, at)
    except ConfigError as err:
        print(f"analyze modes: {err}", file=sys.stderr)
        return 2
    except BerthsimError as err:
        print(f"analyze modes: {type(err).__name__}: {err}", file=sys.stderr)
        return 1
    print(_modes_report(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
