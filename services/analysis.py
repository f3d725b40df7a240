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

Without ``--out`` nothing is written. Exit codes: 0 success, 2 usage (unknown case),
1 a computation failed (the error is printed).
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

from dynamics import cases, exgit, impact
from dynamics import chain as ch
from errors import BerthsimError

__all__ = ["main", "yoshida1992", "cyril1998", "YoshidaSweep", "CyrilRow", "CASES"]

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
    e : float
        Seed 002's e (eq. 28), NaN for the pre-impact row. [m/s]
    impulse_W : ndarray, shape (3,)
        Impulse on the hand. [N·s]
    roots : tuple[float, float]
        Both roots of eq. (49) as normal impulses e* = m_p (e + x), ascending (the larger is
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
    e: float
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

    def row(name: str, ee: str, v: Array, v_p: Array, w_p: Array, e: float, imp: Array,
            roots: tuple[float, float] = (float("nan"), float("nan"))) -> CyrilRow:
        P, L = ch.momentum(model, data, q, v)
        P_p = pl.mass * v_p
        L_p = np.cross(p_cm, P_p) + pl.I_Bcm_W @ w_p
        KE = ch.kinetic_energy(model, data, q, v) + 0.5 * pl.mass * v_p @ v_p + 0.5 * w_p @ pl.I_Bcm_W @ w_p
        return CyrilRow(name, ee, v.copy(), v_p.copy(), w_p.copy(), P + P_p, L + L_p, float(KE), e, imp, roots, x)

    rows = [row("pre-impact", "-", v0, v_pi, w_pi, float("nan"), np.zeros(3))]
    args = (M, J, v0, pl.mass, pl.I_Bcm_W, pl.p_BcmC_W, v_pi, w_pi)
    for ee, locked in (("free", ()), ("locked", (hand_joint,))):
        for name, r_E, r_f in CYRIL_CASES:
            if r_E is None or r_f is None:
                res = impact.plastic_impact_payload(*args, n_W=n, locked=locked)
            else:
                res = impact.nonplastic_impact_payload(*args, n, r_E, r_f, locked=locked)
            rows.append(row(name, ee, res.psid_f, res.v_pf, res.w_pf, res.e, res.impulse_W, res.roots))
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
            f"{r.KE:.6f}", f"{r.KE - pre.KE:+.6f}", "" if np.isnan(r.e) else f"{r.e:+.5f}",
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
            ok50 = (r.e + r.x >= 0.0) if r.x >= 0.0 else (r.e + r.x < 0.0)
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
                        *(f"{x:.12g}" for x in r.L_Wo_W), f"{r.KE:.12g}", "" if np.isnan(r.e) else f"{r.e:.12g}",
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
    """Run ``analyze CASE [--out DIR]``; returns the exit code (0, 1 failure, 2 usage)."""
    parser = argparse.ArgumentParser(prog="launch.py analyze",
                                     description="Reproduce a seed's worked example: " + ", ".join(CASES))
    parser.add_argument("case", help="one of: " + ", ".join(CASES))
    parser.add_argument("--out", type=Path, default=None, help="directory for CSV and PNG files (default: print only)")
    try:
        a = parser.parse_args(argv)
    except SystemExit as exc:  # -h or a usage error: argparse has printed the message
        return int(exc.code) if isinstance(exc.code, int) else 2
    if a.case not in CASES:
        print(f"analyze: unknown case {a.case!r}; known cases: {', '.join(CASES)}", file=sys.stderr)
        return 2
    if a.out is not None:
        if a.out.exists() and not a.out.is_dir():
            print(f"analyze: --out {str(a.out)!r} exists and is not a directory", file=sys.stderr)
            return 2
        a.out.mkdir(parents=True, exist_ok=True)
    compute, report, files = CASES[a.case]
    try:
        result = compute()
        print(report(result))
        if a.out is not None:
            print("wrote " + ", ".join(str(p) for p in files(result, a.out)))
    except BerthsimError as err:
        print(f"analyze {a.case}: {type(err).__name__}: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
