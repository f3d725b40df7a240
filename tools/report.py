"""The report of a run: its figures (the main job's summary) and ``launch.py report LOG [--out DIR]``,
its plots as PNG files and one multi-page PDF.

Figures (:func:`figures`, one computation; :func:`run_figures` reads them from a log, a
sweep from a run's frames): the phases of a berthing run (:data:`PHASES`,
:func:`phase_after`) and the events a script expects (:func:`expected_events`), the
capture, the peak berthing-interface load and the rig's sensed peak (:func:`wrench_peaks`,
also behind the contact page's peaks), the peak joint torques (:func:`joint_peaks`, also
behind the joints page's), the misalignment at latch, the momentum drift and the rig
link's counters; :func:`summary_table` is their table, printed by ``launch.py run``.

Pages (each only when its topics are in the log; otherwise the summary notes it as
skipped, never an error — a log of the toy services has none of them):

``summary``
    Log, duration, message counts and losses; peaks (contact force and moment,
    relative speed, joint torques, timing) and every event with its time.
``relative_pose``
    At the berthing interface, B relative to the latch L (``hil/command`` ``X_LB``):
    position [m] and rotation angle [deg]; without ``hil/command``, the payload CoM
    relative to the orbiter CoM in W (``payload/state``, ``orbiter/state``).
``relative_rates``
    ``V_LB_L`` (ω [deg/s], v [m/s]); or, from the states, ``v_WTo_W − v_WOo_W`` [m/s]
    and ``ω_WT − ω_WO`` expressed in W [deg/s].
``contact``
    Contact moment [N·m] and force [N] on the orbiter at Lo (``contact/wrench``,
    active intervals shaded), and the rig's sensed wrench at Bo (``hil/feedback``).
``joints``
    Joint angles [deg], rates [deg/s] and torques [N·m] (``arm/state``).
``momentum_energy``
    Linear momentum [N·s], angular momentum about Wo [N·m·s] and kinetic energy [J]
    of orbiter + payload, from their states and the masses and inertias of the logged
    configuration (``[orbiter]``, ``[payload]``: ``mass``, ``inertia``); the arm is
    not included (massless in the SVDS model, seed 003 eqs. 2-4…2-9).
``timing``
    Per service, from ``sim/stats``: step-start jitter p50/p99 [ms], overruns,
    input age [ms], messages dropped.

Events (every topic whose schema kind is ``event``: ``contact/event``,
``operator/command``, ...) are marked as vertical lines on every time axis.

PNG files ``DIR/<page>.png`` and ``DIR/report.pdf`` (default DIR ``<LOG stem>_report``).

Cost: the log is read once (:func:`protocol.logfile.read_topics`: per-topic arrays
decoded in bulk); every series is drawn decimated to its min/max envelope per pixel
column (:func:`decimate`: the peaks stay); figures have fixed margins (no layout
engine), few ticks and one legend per group of axes; PNGs are written with zlib level 1;
and, where the process can fork, a child draws the PNGs while the PDF is written.
Exit codes: 0 written, 2 a missing, truncated or non-MCAP log (one line naming it).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from dynamics.spatial import pose_from_vector, quat_angle, quat_rotate
from errors import LogError
from protocol.config import table_values
from protocol.logfile import LogFile, open_log, read_topics

__all__ = ["FIGURE_TOPICS", "PAGES", "PHASES", "Report", "add_arguments", "decimate", "expected_events", "figures",
           "joint_peaks", "main", "make_report", "mark_diverged", "phase_after", "run_figures", "summary_table",
           "wrench_peaks"]

PAGES = ("summary", "relative_pose", "relative_rates", "contact", "joints", "momentum_energy", "timing")


@dataclass
class Report:
    """What :func:`make_report` wrote and found.

    Attributes
    ----------
    out_dir : Path
    pngs : dict[str, Path]
        Page name -> PNG file.
    pdf : Path
    skipped : dict[str, str]
        Page name -> why it was skipped (topics absent).
    peaks : dict[str, float]
        Peak values named with their units.
    events : list of (t_s, topic, kind)
    foreign : str
        The log's line about the channels that are not berthsim's, skipped
        (:meth:`protocol.logfile.LogFile.foreign_note`).
    """

    out_dir: Path
    pngs: dict[str, Path] = field(default_factory=dict)
    pdf: Path | None = None
    skipped: dict[str, str] = field(default_factory=dict)
    peaks: dict[str, float] = field(default_factory=dict)
    events: list[tuple[float, str, str]] = field(default_factory=list)
    foreign: str = ""


# ---------------------------------------------------------------- data
_NEEDED = ("hil/command", "orbiter/state", "payload/state", "contact/wrench", "hil/feedback", "arm/state", "sim/stats")


def _event_topics(log: LogFile) -> list[str]:
    """Logged topics whose schema kind is ``event`` (``sim/*`` left out)."""
    out = []
    for topic, data in log.schema_data.items():
        try:
            kind = json.loads(data).get("x-berthsim-kind")
        except (ValueError, AttributeError):
            continue
        if kind == "event" and not topic.startswith("sim/"):
            out.append(topic)
    return sorted(out)


class _Tables:
    """The report's topics as per-field arrays (:func:`protocol.logfile.read_topics`), read in one pass."""

    def __init__(self, log: LogFile, extra: list[str]) -> None:
        self.log = log
        self.topics = log.topics
        self._cols = read_topics(log, [t for t in (*_NEEDED, *extra) if t in log.topics])
        for cols in self._cols.values():
            cols["t_s"] = cols["t_ns"] * 1e-9

    def __getitem__(self, topic: str) -> dict[str, Any]:
        return self._cols[topic]

    def config(self) -> dict[str, Any] | None:
        return self.log.config()


def _table(log: _Tables, topic: str) -> dict[str, Any]:
    return log[topic]


def _vec(cols: dict[str, Any], name: str) -> np.ndarray:
    """Field ``name`` as (rows, k) (an f8 field's elements in C order)."""
    return cols[name].reshape(len(cols["t_ns"]), -1)


def _events(tables: _Tables, topics: list[str]) -> list[tuple[float, str, str]]:
    out = []
    for topic in topics:
        c = tables[topic]
        for t, evs in zip(c["t_ns"].tolist(), c["events"].tolist() if "events" in c else [], strict=False):
            for ev in evs if isinstance(evs, list) else []:
                if isinstance(ev, dict):
                    out.append((t / 1e9, topic, str(ev.get("kind", "?"))))
    return sorted(out)


def _common(a: dict[str, Any], b: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Indices of samples of a and b at the same t_ns."""
    t, ia, ib = np.intersect1d(a["t_ns"], b["t_ns"], assume_unique=False, return_indices=True)
    return t, ia, ib


def _inertia(value: Any) -> np.ndarray | None:
    try:
        a = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        return None
    if a.shape == (3,):
        return np.diag(a)
    return a if a.shape == (3, 3) else None


# ---------------------------------------------------------------- drawing
def decimate(t: np.ndarray, y: np.ndarray, width_px: int) -> tuple[np.ndarray, np.ndarray]:
    """A time series reduced to its min/max envelope per pixel column (what a plot of it shows).

    Parameters
    ----------
    t : ndarray, shape (n,)
        Increasing sample times.
    y : ndarray, shape (n,) or (n, k)
        Samples (each column reduced on its own).
    width_px : int
        Pixel columns of the plot.

    Returns
    -------
    t_d : ndarray, shape (m,)
    y_d : ndarray, shape (m,) or (m, k)
        The input if ``n <= 2 * width_px``; else ``m = 2 * width_px``: for each of
        ``width_px`` equal runs of samples, its minimum at the run's first time and its
        maximum at its last, so every peak of the full series is drawn.
    """
    n = len(t)
    if n <= 2 * width_px:
        return t, y
    starts = np.linspace(0, n, width_px + 1).astype(np.int64)[:-1]
    ends = np.r_[starts[1:], n] - 1
    lo = np.minimum.reduceat(y, starts, axis=0)
    hi = np.maximum.reduceat(y, starts, axis=0)
    t_d = np.column_stack([t[starts], t[ends]]).ravel()
    y_d = np.stack([lo, hi], axis=1).reshape(2 * width_px, *y.shape[1:])
    return t_d, y_d


_WIDTH_IN = 8.27
_DPI = 110
_PX = int(_WIDTH_IN * _DPI)


def _figure(title: str, n: int) -> tuple[Any, list[Any]]:
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator
    height = 2.3 * n + 0.8
    fig = Figure(figsize=(_WIDTH_IN, height))
    # fixed margins (inches) instead of a layout engine: the layout pass cost as much as the drawing
    fig.subplots_adjust(left=1.05 / _WIDTH_IN, right=1 - 0.25 / _WIDTH_IN, top=1 - 0.55 / height,
                        bottom=0.5 / height, hspace=0.12 * 2.3 / 2.0)
    axes = fig.subplots(n, 1, sharex=True, squeeze=False)[:, 0]
    for ax in axes:  # fewer ticks: tick marks, grid lines and labels were half of the drawing
        ax.yaxis.set_major_locator(MaxNLocator(nbins=4))
    axes[-1].xaxis.set_major_locator(MaxNLocator(nbins=8))
    fig.suptitle(title)
    axes[-1].set_xlabel("simulation time t [s]")
    return fig, list(axes)


def _mark(axes: list[Any], events: list[tuple[float, str, str]]) -> None:
    if not events or not axes:
        return
    ts = [t for t, _, _ in events]
    for ax in axes:  # one collection per axis, not a line per event
        ax.vlines(ts, 0, 1, transform=ax.get_xaxis_transform(), colors="tab:red", lw=0.7, linestyles="--",
                  alpha=0.6)
    top = axes[0]
    for t, _, kind in events[:30]:
        top.annotate(kind, (t, 1.0), xycoords=("data", "axes fraction"), rotation=90, fontsize=6,
                     va="top", ha="right", color="tab:red")


def _plot(ax: Any, t: np.ndarray, y: np.ndarray, labels: list[str], ylabel: str, legend: bool = True) -> None:
    """Lines of ``y`` (n, k) against ``t``, decimated to the pixel width; a legend when asked and
    there is more than one line (a page's later axes with the same labels and colours leave it out)."""
    td, yd = decimate(t, y.reshape(len(t), -1), _PX)
    for j in range(yd.shape[1]):
        ax.plot(td, yd[:, j], lw=0.9, label=labels[j] if j < len(labels) else None)
    ax.set_ylabel(ylabel)
    ax.grid(True, lw=0.3)
    if legend and len(labels) > 1:
        ax.legend(fontsize=7, loc="upper right", ncols=min(len(labels), 6))


def _shade(ax: Any, t: np.ndarray, active: np.ndarray) -> None:
    """Shade the intervals where ``active`` holds, from its first to its last sample (drawn from the
    samples next to a change only: the same patches as from every sample)."""
    if not active.any():
        return
    edges = np.flatnonzero(np.diff(active.astype(np.int8))) + 1
    idx = np.unique(np.r_[0, edges - 1, edges, len(t) - 1])
    ax.fill_between(t[idx], 0, 1, where=active[idx], transform=ax.get_xaxis_transform(), color="tab:orange",
                    alpha=0.15, step="post", lw=0)


def _page_relative_pose(log: _Tables, rep: Report) -> Any:
    if "hil/command" in log.topics:
        c = _table(log, "hil/command")
        t = c["t_s"]
        X = _vec(c, "X_LB").reshape(-1, 4, 4)
        p = X[:, :3, 3]
        tr = np.clip((np.trace(X[:, :3, :3], axis1=1, axis2=2) - 1.0) / 2.0, -1.0, 1.0)
        ang = np.degrees(np.arccos(tr))
        title, what = "Berthing interface B relative to latch L (hil/command X_LB)", "p_LoBo_L"
    elif "orbiter/state" in log.topics and "payload/state" in log.topics:
        o, q = _table(log, "orbiter/state"), _table(log, "payload/state")
        tc, io, ip = _common(o, q)
        t = tc * 1e-9
        p = _vec(q, "p_WoTo_W")[ip] - _vec(o, "p_WoOo_W")[io]
        qo, qt = _vec(o, "quat_WO")[io], _vec(q, "quat_WT")[ip]
        ang = np.degrees([quat_angle(a, b) for a, b in zip(qo, qt, strict=True)])
        title, what = "Payload CoM relative to orbiter CoM, in W (payload/state, orbiter/state)", "p_OoTo_W"
    else:
        rep.skipped["relative_pose"] = "no hil/command, and not both orbiter/state and payload/state"
        return None
    fig, axes = _figure(title, 3)
    _plot(axes[0], t, p, ["x", "y", "z"], f"{what} [m]")
    _plot(axes[1], t, np.linalg.norm(p, axis=1), ["|p|"], "distance [m]")
    _plot(axes[2], t, ang, ["angle"], "relative rotation [deg]")
    if len(t):
        rep.peaks["relative distance max [m]"] = float(np.linalg.norm(p, axis=1).max())
        rep.peaks["relative distance min [m]"] = float(np.linalg.norm(p, axis=1).min())
        rep.peaks["relative rotation max [deg]"] = float(np.max(ang))
    return fig, axes


def _page_relative_rates(log: _Tables, rep: Report) -> Any:
    if "hil/command" in log.topics:
        c = _table(log, "hil/command")
        t = c["t_s"]
        V = _vec(c, "V_LB_L")
        w, v = np.degrees(V[:, :3]), V[:, 3:]
        title = "Relative rates of B in L, expressed in L (hil/command V_LB_L)"
    elif "orbiter/state" in log.topics and "payload/state" in log.topics:
        o, q = _table(log, "orbiter/state"), _table(log, "payload/state")
        tc, io, ip = _common(o, q)
        t = tc * 1e-9
        v = _vec(q, "v_WTo_W")[ip] - _vec(o, "v_WOo_W")[io]
        qo, qt = _vec(o, "quat_WO")[io], _vec(q, "quat_WT")[ip]
        wo, wt = _vec(o, "w_WO_O")[io], _vec(q, "w_WT_T")[ip]
        w = np.degrees(np.array([quat_rotate(b, y) - quat_rotate(a, x)
                                 for a, x, b, y in zip(qo, wo, qt, wt, strict=True)]).reshape(-1, 3))
        title = "Payload relative to orbiter: v_WTo_W - v_WOo_W and w_WT - w_WO, in W"
    else:
        rep.skipped["relative_rates"] = "no hil/command, and not both orbiter/state and payload/state"
        return None
    fig, axes = _figure(title, 2)
    _plot(axes[0], t, w, ["x", "y", "z"], "angular rate [deg/s]")
    _plot(axes[1], t, v, ["x", "y", "z"], "velocity [m/s]", legend=False)
    if len(t):
        rep.peaks["relative speed max [m/s]"] = float(np.linalg.norm(v, axis=1).max())
        rep.peaks["relative angular rate max [deg/s]"] = float(np.linalg.norm(w, axis=1).max())
    return fig, axes


def _page_contact(log: _Tables, rep: Report) -> Any:
    have_c, have_h = "contact/wrench" in log.topics, "hil/feedback" in log.topics
    if not (have_c or have_h):
        rep.skipped["contact"] = "no contact/wrench or hil/feedback"
        return None
    n = 2 * (have_c + have_h)
    fig, axes = _figure("Contact wrench", n)
    k = 0
    for topic, name, where in (("contact/wrench", "F_Lo_W", "on the orbiter at Lo, in W"),
                               ("hil/feedback", "F_Bo_B", "rig sensor at Bo, in B")):
        if topic not in log.topics:
            continue
        c = _table(log, topic)
        t, F = c["t_s"], _vec(c, name)
        _plot(axes[k], t, F[:, :3], ["x", "y", "z"], f"moment [N·m]\n{where}", legend=k == 0)
        _plot(axes[k + 1], t, F[:, 3:], ["x", "y", "z"], f"force [N]\n{where}", legend=False)
        if "active" in c and len(t):
            for ax in axes[k:k + 2]:
                _shade(ax, t, c["active"].astype(bool))
        if len(t):  # the peaks inside each coupling interval travel in F_peak
            rep.peaks[f"{name} |force| max [N]"], rep.peaks[f"{name} |moment| max [N·m]"] = wrench_peaks(
                F, peaks=_vec(c, "F_peak") if "F_peak" in c else None)
        k += 2
    return fig, axes


def _page_joints(log: _Tables, rep: Report) -> Any:
    if "arm/state" not in log.topics:
        rep.skipped["joints"] = "no arm/state"
        return None
    c = _table(log, "arm/state")
    t = c["t_s"]
    q, qd, tau = _vec(c, "q"), _vec(c, "qd"), _vec(c, "tau")
    labels = [f"j{i + 1}" for i in range(q.shape[1])]
    fig, axes = _figure("SRMS joints (arm/state)", 3)
    _plot(axes[0], t, np.degrees(q), labels, "angle q [deg]")
    _plot(axes[1], t, np.degrees(qd), labels, "rate qd [deg/s]", legend=False)
    _plot(axes[2], t, tau, labels, "torque tau [N·m]", legend=False)
    if len(t):  # the largest |tau| inside each coupling interval travels in tau_peak
        for lab, peak in zip(labels, joint_peaks(c).tolist(), strict=True):
            rep.peaks[f"joint {lab} |tau| max [N·m]"] = peak
    return fig, axes


def _page_momentum(log: _Tables, rep: Report) -> Any:
    if not ("orbiter/state" in log.topics and "payload/state" in log.topics):
        rep.skipped["momentum_energy"] = "not both orbiter/state and payload/state"
        return None
    cfg = log.config() or {}
    bodies = []
    for table in ("orbiter", "payload"):
        t = cfg.get(table, {}) if isinstance(cfg.get(table), dict) else {}
        m, inertia = t.get("mass"), _inertia(t.get("inertia"))
        if not isinstance(m, (int, float)) or inertia is None:
            rep.skipped["momentum_energy"] = f"no [{table}] mass and inertia in the logged configuration"
            return None
        bodies.append((float(m), inertia))
    o, q = _table(log, "orbiter/state"), _table(log, "payload/state")
    tc, io, ip = _common(o, q)
    P = np.zeros((len(tc), 3))
    H = np.zeros((len(tc), 3))
    T = np.zeros(len(tc))
    for (m, I_B), cols, idx, (pn, qn, wn, vn) in (
            (bodies[0], o, io, ("p_WoOo_W", "quat_WO", "w_WO_O", "v_WOo_W")),
            (bodies[1], q, ip, ("p_WoTo_W", "quat_WT", "w_WT_T", "v_WTo_W"))):
        p, quat, w, v = (_vec(cols, n)[idx] for n in (pn, qn, wn, vn))
        h_B = w @ I_B.T
        P += m * v
        H += np.array([quat_rotate(a, b) for a, b in zip(quat, h_B, strict=True)]).reshape(-1, 3) + m * np.cross(p, v)
        T += 0.5 * m * np.einsum("ij,ij->i", v, v) + 0.5 * np.einsum("ij,ij->i", w, h_B)
    fig, axes = _figure("Momentum and energy of orbiter + payload (arm not included)", 3)
    t = tc * 1e-9
    _plot(axes[0], t, P, ["x", "y", "z"], "linear momentum in W [N·s]")
    _plot(axes[1], t, H, ["x", "y", "z"], "angular momentum about Wo [N·m·s]", legend=False)
    _plot(axes[2], t, T, ["T"], "kinetic energy [J]")
    if len(t):
        rep.peaks["linear momentum drift max [N·s]"] = float(np.linalg.norm(P - P[0], axis=1).max())
        rep.peaks["kinetic energy change max [J]"] = float(np.abs(T - T[0]).max())
    return fig, axes


def _page_timing(log: _Tables, rep: Report) -> Any:
    if "sim/stats" not in log.topics:
        rep.skipped["timing"] = "no sim/stats"
        return None
    c = _table(log, "sim/stats")
    senders = sorted(set(c["sender"]))
    sender = np.asarray(c["sender"])
    fig, axes = _figure("Per-service timing (sim/stats)", 4)
    for s in senders:
        k = sender == s
        t = c["t_s"][k]
        axes[0].plot(t, c["jitter_p99_ns"][k] * 1e-6, lw=0.9, label=f"{s} p99")
        axes[0].plot(t, c["jitter_p50_ns"][k] * 1e-6, lw=0.6, ls=":", label=f"{s} p50")
        axes[1].step(t, c["overruns"][k], where="post", lw=0.9, label=s)
        axes[2].plot(t, c["input_age_ns"][k] * 1e-6, lw=0.9, label=s)
        axes[3].step(t, c["msgs_dropped"][k], where="post", lw=0.9, label=s)
        if k.any():
            rep.peaks[f"{s} jitter p99 max [ms]"] = float(c["jitter_p99_ns"][k].max() * 1e-6)
            rep.peaks[f"{s} overruns"] = float(c["overruns"][k].max())
    for i, (ax, lab) in enumerate(zip(axes, ("step-start jitter [ms]", "overruns [count]", "input age [ms]",
                                             "messages dropped [count]"), strict=True)):
        ax.set_ylabel(lab)
        ax.grid(True, lw=0.3)
        if i < 2:  # the last two axes: one line per service in the colours of the second
            ax.legend(fontsize=6, loc="upper left", ncols=3)
    return fig, axes


def _summary_page(log: LogFile, rep: Report) -> Any:
    from matplotlib.figure import Figure
    fig = Figure(figsize=(8.27, 11.69))
    meta = log.metadata()
    close = meta.get("berthsim.close", {})
    run = meta.get("berthsim.run", {})
    lines = [f"berthsim run report: {log.path.name}", "",
             (f"simulation time {log.start_ns * 1e-9:.3f} .. {log.end_ns * 1e-9:.3f} s, "
              f"{log.message_count} messages, {log.chunk_count} chunks"),
             (f"git {run.get('git_commit', '?')}, seed {run.get('seed', '?')}, mode {run.get('mode', '?')}, "
              f"host {run.get('logger_host', '?')}"),
             f"lost (sequence gaps) {close.get('lost', '?' if 'aborted' in close else '? (log not closed)')}, "
             f"invalid {close.get('invalid', '?')}"]
    if "aborted" in close:  # the logger died; its writer process finished the file
        lines.append(f"aborted: {close['aborted']}")
    lines += ["", "Topics:"]
    lines += [f"  {t:<20s} {n:>9d}" for t, n in sorted(log.topics.items())]
    div = _divergence(read_topics(log, ["sim/control"])["sim/control"]) if "sim/control" in log.topics else None
    if div:
        lines += ["", f"DIVERGED at t = {div['t']:.3f} s in {div['service']}: {div['reason']}",
                  "Peaks: none (the states diverged; the plots show them up to then)"]
    else:
        lines += ["", "Peaks:"]
        lines += [f"  {k:<44s} {v:12.6g}" for k, v in rep.peaks.items()] or ["  (none)"]
    lines += ["", f"Events ({len(rep.events)}):"]
    lines += [f"  t={t:10.4f} s  {topic:<18s} {kind}" for t, topic, kind in rep.events[:40]] or ["  (none)"]
    if len(rep.events) > 40:
        lines.append(f"  ... and {len(rep.events) - 40} more")
    lines += ["", "Skipped pages:"]
    lines += [f"  {k}: {why}" for k, why in rep.skipped.items()] or ["  (none)"]
    fig.text(0.05, 0.97, "\n".join(lines), va="top", ha="left", family="monospace", fontsize=7.5)
    return fig


# ---------------------------------------------------------------- the run's figures (the main job's summary)
PHASES = ("approach", "capture", "berthing move", "berthing contact", "release")
"""The five phases of a berthing run, entered on the contact events of :func:`phase_after`."""
_ENTERS = {"capture": 1, "rigidize": 2, "first_contact": 3, "release": 4}


def phase_after(phase: int, event: str) -> int:
    """Phase index after a ``contact/event`` kind: capture → capture, rigidize → berthing move,
    first_contact (once grappled) → berthing contact, release → release; never backwards."""
    nxt = _ENTERS.get(event, phase)
    if event == "first_contact" and phase < 2:
        return phase
    return max(phase, nxt)


def expected_events(config: dict[str, Any], t_end_s: float, t_start_s: float = 0.0) -> list[str]:
    """Contact events a run from ``t_start_s`` to ``t_end_s`` must show to have gone as scripted.

    A scripted ``capture`` in the window must give ``capture`` (and ``rigidize`` once
    ``contact.rigidize_delay`` has passed); a scripted ``release`` must find the payload
    berthed first (``first_contact``, ``latch``) and give ``release``.
    """
    delay = float(table_values(config, "contact")["rigidize_delay"])
    out: list[str] = []
    for c in config.get("operator", {}).get("script", []):
        t = float(c.get("t", 0.0))
        if not t_start_s <= t < t_end_s:
            continue
        if c.get("cmd") == "capture":
            out += ["capture"] + (["rigidize"] if t + delay < t_end_s else [])
        elif c.get("cmd") == "release":
            out += ["first_contact", "latch", "release"]
    return out


def wrench_peaks(F: np.ndarray, where: np.ndarray | None = None,
                 peaks: np.ndarray | None = None) -> tuple[float, float]:
    """Peak force and moment magnitudes of a series of wrenches: the one peak computation.

    Used by :func:`run_figures` (the peak berthing-interface load, the rig's sensed peak)
    and by the report's contact page.

    Parameters
    ----------
    F : ndarray, shape (n, 6)
        Wrenches ``[τ; f]`` (any one point and frame, the same for every row). [N·m, N]
    where : ndarray of bool, shape (n,), optional
        The rows to take (default all).
    peaks : ndarray, shape (n, 2), optional
        Each row's ``F_peak``, ``[max |τ|, max |f|]`` over its coupling interval
        (:mod:`protocol.coupling`): then the peaks are taken from it, not from ``F`` (a
        coupled sample's ``F`` is the interval's mean).

    Returns
    -------
    force, moment : float
        ``max |f|`` and ``max |τ|`` over the rows taken; 0 when none is. [N, N·m]
    """
    if peaks is not None:
        pk = np.asarray(peaks, dtype=np.float64).reshape(-1, 2)
        if where is not None:
            pk = pk[np.asarray(where, dtype=bool)]
        return (float(pk[:, 1].max()), float(pk[:, 0].max())) if len(pk) else (0.0, 0.0)
    F = np.asarray(F, dtype=np.float64).reshape(-1, 6)
    if where is not None:
        F = F[np.asarray(where, dtype=bool)]
    if not len(F):
        return 0.0, 0.0
    return float(np.linalg.norm(F[:, 3:], axis=1).max()), float(np.linalg.norm(F[:, :3], axis=1).max())


FIGURE_TOPICS = ("contact/event", "contact/wrench", "hil/feedback", "hil/status", "orbiter/state", "payload/state",
                 "arm/state", "sim/control")
"""The topics :func:`figures` reads (each only when present)."""


def joint_peaks(cols: dict[str, Any]) -> np.ndarray:
    """Largest ``|tau|`` of each joint over ``arm/state`` rows: the one joint-load peak computation.

    Used by :func:`figures` and by the report's joints page.

    Parameters
    ----------
    cols : dict
        ``arm/state`` columns (:func:`protocol.logfile.read_topics`); its ``tau_peak`` (the
        largest ``|tau|`` inside each coupling interval) when present, else ``tau``.

    Returns
    -------
    ndarray, shape (n_joints,)
        [N·m]; empty when there is no row.
    """
    tau = cols["tau_peak"] if "tau_peak" in cols else cols["tau"]
    tau = np.abs(np.asarray(tau, dtype=np.float64).reshape(len(cols["t_ns"]), -1))
    return tau.max(axis=0) if len(tau) else np.zeros(0)


def run_figures(log_path: str | Path, config: dict[str, Any] | None = None) -> dict[str, Any]:
    """The main job's figures from a run's log (:func:`figures` of its topics).

    Raises
    ------
    LogError
        If the log is missing, truncated or not MCAP.
    """
    with open_log(log_path) as log:
        cfg = config if config is not None else (log.config() or {})
        d = read_topics(log, [t for t in FIGURE_TOPICS if t in log.topics])
    return figures(d, cfg)


def figures(d: dict[str, dict[str, Any]], cfg: dict[str, Any]) -> dict[str, Any]:
    """A berthing run's figures from its topics' columns: the one computation of them.

    Phase start times, the capture (relative velocity before the snare, the envelope
    metrics; of the ``miss`` when it missed), peak berthing-interface force and moment on the orbiter at Lo (from the
    first contact on; the snare's one-step impulse is not an interface load) and the
    rig's sensed peak, the peak joint torques (:func:`joint_peaks`), the misalignment of
    B from its berthed pose in L when the latches closed on it (``latch_start``) and when
they hold it (``latch``, after their stroke), the drift of the total linear
    momentum of orbiter + payload (the SVDS arm is massless, seed 003 2-4…2-9) and the
    rig link's counters.

    Parameters
    ----------
    d : dict
        Topic -> columns, as :func:`protocol.logfile.read_topics` gives them from a log
        and :func:`protocol.logfile.decode_bodies` from frames held in memory (a sweep's
        run); any of :data:`FIGURE_TOPICS` may be missing.
    cfg : dict
        The run's configuration (``[orbiter]``, ``[payload]`` masses, ``[contact.latch]``).
    """
    empty: dict[str, Any] = {}
    m_O = float(table_values(cfg, "orbiter")["mass"])  # the owners' defaults, not 0 kg
    m_T = float(table_values(cfg, "payload")["mass"])
    events: list[dict[str, Any]] = []
    t_contact = None
    ce = d.get("contact/event", empty)
    for t_ns, evs in zip(ce.get("t_ns", ()), ce.get("events", ()), strict=True):
        for ev in evs:
            events.append(dict(ev))
            if ev["kind"] == "first_contact" and t_contact is None and any(e["kind"] == "rigidize" for e in events):
                t_contact = int(t_ns)
    F_peak = M_peak = F_rig = 0.0
    cw = d.get("contact/wrench", empty)
    if t_contact is not None and len(cw.get("t_ns", ())):
        # samples whose coupling interval [t, t + h) reaches the first contact
        F_peak, M_peak = wrench_peaks(cw["F_Lo_W"], (cw["t_ns"] + cw["h_ns"] > t_contact) & cw["active"],
                                      cw.get("F_peak"))
    fb = d.get("hil/feedback", empty)
    if len(fb.get("t_ns", ())):
        F_rig, _ = wrench_peaks(fb["F_Bo_B"], fb["valid"], fb.get("F_peak"))
    st = d.get("hil/status", empty)
    link, hil_state = (dict(st["link"][-1]), st["state"][-1]) if len(st.get("t_ns", ())) else ({}, None)
    # total linear momentum where an orbiter and a payload sample share a time stamp
    P0, dP, dP_end, t_dP = None, 0.0, 0.0, 0.0
    orb, pay = d.get("orbiter/state", empty), d.get("payload/state", empty)
    if len(orb.get("t_ns", ())) and len(pay.get("t_ns", ())):
        _, i_o, i_p = np.intersect1d(orb["t_ns"], pay["t_ns"], return_indices=True)
        if len(i_o):
            P = m_O * orb["v_WOo_W"][i_o] + m_T * pay["v_WTo_W"][i_p]
            P0 = P[0]
            drift = np.linalg.norm(P - P0, axis=1)
            k = int(drift.argmax())
            dP, dP_end, t_dP = float(drift[k]), float(drift[-1]), float(orb["t_ns"][i_o][k]) * 1e-9
    first: dict[str, dict[str, Any]] = {}
    for ev in events:
        first.setdefault(ev["kind"], ev)
    phase, starts = 0, {PHASES[0]: 0.0}
    for ev in events:
        nxt = phase_after(phase, ev["kind"])
        if nxt != phase:
            phase = nxt
            starts.setdefault(PHASES[phase], float(ev["t"]))
    out: dict[str, Any] = {"phases": starts, "events": [[round(float(e["t"]), 4), e["kind"]] for e in events],
                           "phases_completed": len(starts)}
    if "capture" in first:
        V = np.asarray(first["capture"]["V_rel_pre_W"], dtype=np.float64)
        out["capture"] = {"t": first["capture"]["t"], "v_rel_m_s": float(np.linalg.norm(V[3:])),
                          "w_rel_deg_s": float(np.degrees(np.linalg.norm(V[:3]))),
                          **{k: first["capture"][k] for k in ("lateral", "axial", "tilt", "roll")
                             if k in first["capture"]}}
    if "miss" in first:
        m = first["miss"]
        V = np.asarray(m["V_rel_pre_W"], dtype=np.float64)
        out["miss"] = {"t": m["t"], "reason": m.get("reason", ""), "v_rel_m_s": float(np.linalg.norm(V[3:])),
                       "w_rel_deg_s": float(np.degrees(np.linalg.norm(V[:3]))),
                       **{k: m[k] for k in ("lateral", "axial", "tilt", "roll") if k in m}}
    Xb = pose_from_vector(cfg.get("contact", {}).get("latch", {}).get("X_LB", [0.0] * 6))
    for kind in ("latch_start", "latch"):  # where the latches closed on B, and where they hold it
        if kind in first and "X_LB" in first[kind]:
            X = np.asarray(first[kind]["X_LB"], dtype=np.float64)
            dR = Xb[:3, :3].T @ X[:3, :3]
            out[kind] = {"t": first[kind]["t"],
                         "misalignment_m": float(np.linalg.norm(X[:3, 3] - Xb[:3, 3])),
                         "misalignment_deg": float(np.degrees(np.arccos(np.clip((np.trace(dR) - 1) / 2, -1, 1))))}
    out["interface_peak"] = {"force_N": F_peak, "moment_Nm": M_peak, "rig_force_N": F_rig}
    arm = d.get("arm/state", empty)
    out["joint_peak_Nm"] = joint_peaks(arm).tolist() if len(arm.get("t_ns", ())) else []
    out["momentum_drift_Ns"] = dP
    out["momentum_drift_t"] = t_dP
    out["momentum_drift_end_Ns"] = dP_end
    out["orbit_on"] = float(cfg.get("orbiter", {}).get("orbit_altitude", 0.0)) > 0.0
    out["momentum_P0_Ns"] = float(np.linalg.norm(P0)) if P0 is not None else 0.0
    out["rig"] = {"state": hil_state, **{k: link[k] for k in ("crc_errors", "bad_frames", "seq_lost", "rx_fps",
                                                           "rtt_p99_s", "tx_frames", "rx_frames", "rig_rejected",
                                                           "resent", "reply_timeouts", "replies_missed")
                                         if k in link}}
    fault = _rig_fault(st)
    if fault:
        out["rig"]["fault"] = fault
    div = _divergence(d.get("sim/control", empty))
    return mark_diverged(out, div) if div else out


def _rig_fault(st: dict[str, Any]) -> dict[str, Any] | None:
    """The rig's first fault in a log's ``hil/status`` table: ``{"t", "faults", "reason"}`` (the bridge's
    ``fault_t`` and ``fault_reason`` when it sent them, else the first FAULT sample's time and bits), or None."""
    for t_ns, state, bits, link in zip(st.get("t_ns", ()), st.get("state", ()), st.get("faults", ()),
                                       st.get("link", ()), strict=True):
        if state == "FAULT":
            t = float(link.get("fault_t", -1.0))
            return {"t": t if t >= 0.0 else int(t_ns) * 1e-9, "faults": int(bits),
                    "reason": str(link.get("fault_reason", "")) or f"fault bits {int(bits):#x}"}
    return None


def _divergence(ctl: dict[str, Any]) -> dict[str, Any] | None:
    """The launcher's ``diverged`` word in a log's ``sim/control`` table (:mod:`protocol.launcher`), or None."""
    for cmd, info in zip(ctl.get("cmd", ()), ctl.get("info", ()), strict=True):
        if cmd == "diverged":
            return {"service": str(info.get("service", "?")), "t": float(info.get("t", 0.0)),
                    "reason": str(info.get("reason", ""))}
    return None


_PHYSICAL = ("capture", "miss", "latch_start", "latch", "interface_peak", "joint_peak_Nm", "momentum_drift_Ns",
             "momentum_drift_t", "momentum_drift_end_Ns", "momentum_P0_Ns")


def mark_diverged(fig: dict[str, Any], diverged: dict[str, Any]) -> dict[str, Any]:
    """``fig`` (:func:`run_figures`) of a run that diverged: ``fig["diverged"]`` = ``{"service", "t",
    "reason"}`` and no physical figure left in it (what the states did on the way there is no result)."""
    for key in _PHYSICAL:
        fig.pop(key, None)
    fig["diverged"] = dict(diverged)
    return fig


def summary_table(fig: dict[str, Any], stats: dict[str, dict[str, Any]], ok: bool) -> str:
    """The end-of-run table (text) from :func:`run_figures` and the services' final statistics.

    A run that diverged (``fig["diverged"]``: a model's output was not finite) shows its phases
    up to then and ``diverged at t = … s in <service>`` instead of its physical figures: what
    the states did on the way to the divergence is not a result.
    """
    rows: list[tuple[str, str]] = []
    for name in PHASES:
        t = fig["phases"].get(name)
        rows.append((f"phase: {name}", "—" if t is None else f"from t = {t:7.2f} s"))
    div = fig.get("diverged")
    if div:
        rows.append(("DIVERGED", f"at t = {div['t']:.3f} s in {div['service']}: {div.get('reason', '')}"))
        rows.append(("figures", "none: the states diverged (the log holds them up to then)"))
    else:
        rows += _figure_rows(fig)
    over = {n: (int(s.get("overruns", 0)), int(s.get("steps", 0))) for n, s in stats.items() if s and "steps" in s}
    rows.append(("overruns", ", ".join(f"{n} {o}" + (f" of {k} steps" if o else "")
                                       for n, (o, k) in over.items() if k) or "—"))
    r = fig["rig"]
    if r.get("state") is not None:
        link = (f"{r.get('tx_frames', 0)} frames out, {r.get('rx_frames', 0)} in, CRC errors "
                f"{r.get('crc_errors', 0)}, bad frames {r.get('bad_frames', 0)}, lost {r.get('seq_lost', 0)}; "
                f"rejected by the rig {r.get('rig_rejected', 0)}, resent {r.get('resent', 0)}, reply timeouts "
                f"{r.get('reply_timeouts', 0)}, replies missed {r.get('replies_missed', 0)}; rig {r['state']}")
        rows.append(("rig link", link))
    if r.get("fault"):  # a rig that faulted did not run the scenario: the run did not go as scripted
        rows.append(("rig FAULT", f"at t = {r['fault']['t']:.3f} s: {r['fault']['reason']}"))
    rows.append(("completed as scripted", "yes" if ok else "NO"))
    w = max(len(k) for k, _ in rows)
    return "\n".join(f"  {k:<{w}}  {v}" for k, v in rows)


def _figure_rows(fig: dict[str, Any]) -> list[tuple[str, str]]:
    """The physical figures of :func:`summary_table` (a run that did not diverge)."""
    rows: list[tuple[str, str]] = []
    if "latch" in fig:
        rows.append(("latches closed", f"t = {fig['latch']['t']:7.2f} s"))
    c = fig.get("capture")
    if c:
        rows.append(("capture relative velocity", f"{c['v_rel_m_s'] * 1e3:.1f} mm/s, {c['w_rel_deg_s']:.3f} °/s"))
    if "miss" in fig:
        rows.append(("capture MISSED", f"t = {fig['miss']['t']:.2f} s: {fig['miss']['reason']}"))
    p = fig["interface_peak"]
    rig = f" (rig sensed {p['rig_force_N']:.0f} N)" if p["rig_force_N"] else ""
    rows.append(("peak interface force / moment", f"{p['force_N']:.0f} N / {p['moment_Nm']:.0f} N·m{rig}"))
    if "latch" in fig:
        lat = fig["latch"]
        rows.append(("misalignment at latch", f"{lat['misalignment_m'] * 1e3:.1f} mm, {lat['misalignment_deg']:.2f}°"))
    orbit = " (orbital terms on: not an invariant)" if fig.get("orbit_on") else ""
    end = fig.get("momentum_drift_end_Ns")
    when = (f" at t = {fig['momentum_drift_t']:.2f} s, {end:.3g} N·s at the end" if end is not None
            and "momentum_drift_t" in fig else "")
    rows.append(("momentum drift (orbiter + payload)",
                 f"{fig['momentum_drift_Ns']:.3g} N·s{when}, of {fig['momentum_P0_Ns']:.3g} N·s{orbit}"))
    return rows


# ---------------------------------------------------------------- entry
def make_report(log_path: str | Path, out_dir: str | Path | None = None) -> Report:
    """Write the report of a log (see the module docstring).

    Raises
    ------
    LogError
        A missing, truncated or non-MCAP log, or a malformed ``config.json`` attachment (named).
    """
    from matplotlib.backends.backend_pdf import PdfPages
    log_path = Path(log_path)
    out = Path(out_dir) if out_dir else log_path.with_name(log_path.stem + "_report")
    with open_log(log_path) as log:
        log.config()  # a malformed attachment is refused here, named, before any page reads it
        rep = Report(out, foreign=log.foreign_note())
        events = _event_topics(log)
        tables = _Tables(log, events)
        rep.events = _events(tables, events)
        figs = []
        for name, page in (("relative_pose", _page_relative_pose), ("relative_rates", _page_relative_rates),
                           ("contact", _page_contact), ("joints", _page_joints),
                           ("momentum_energy", _page_momentum), ("timing", _page_timing)):
            made = page(tables, rep)
            if made is not None:
                fig, axes = made
                _mark(axes, rep.events)
                figs.append((name, fig))
        summary = _summary_page(log, rep)
    out.mkdir(parents=True, exist_ok=True)
    rep.pdf = out / "report.pdf"
    pages = [("summary", summary)] + figs
    rep.pngs = {name: out / f"{name}.png" for name, _ in pages}
    # PNG and PDF each draw every page again; with a second core, a forked child draws the PNGs
    # while this process writes the PDF (only with no other Python thread: fork copies one)
    child = os.fork() if hasattr(os, "fork") and threading.active_count() == 1 else -1
    if child == 0:
        code = 1
        try:
            _write_pngs(pages, rep.pngs)
            code = 0
        finally:
            os._exit(code)
    with PdfPages(rep.pdf) as pdf:
        for _, fig in pages:
            pdf.savefig(fig)
    if child < 0 or os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]) != 0:
        _write_pngs(pages, rep.pngs)  # no fork, or the child failed: here (its error is raised here)
    return rep


def _write_pngs(pages: list[tuple[str, Any]], paths: dict[str, Path]) -> None:
    for name, fig in pages:
        fig.savefig(paths[name], dpi=_DPI, pil_kwargs={"compress_level": 1})  # zlib level 6: a third of the time


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``launch.py report``."""
    p.add_argument("log", help="MCAP log")
    p.add_argument("--out", help="output directory (default: <LOG stem>_report)")


def main(a: argparse.Namespace) -> int:
    """``launch.py report``: 0 written (a JSON line: files, skipped pages), 2 bad log (one line)."""
    try:
        rep = make_report(a.log, a.out)
    except LogError as err:
        print(f"berthsim report: {err}", file=sys.stderr)
        return 2
    if rep.foreign:
        print(f"berthsim report: note: {rep.foreign}", file=sys.stderr)
    for page, why in rep.skipped.items():
        print(f"berthsim report: note: page {page} skipped: {why}", file=sys.stderr)
    print(json.dumps({"event": "report", "pdf": str(rep.pdf), "png": {k: str(v) for k, v in rep.pngs.items()},
                      "skipped": rep.skipped, "events": len(rep.events)}))
    return 0
