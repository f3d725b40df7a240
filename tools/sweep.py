"""Sweeps: many lockstep runs of a scenario over dispersed parameters, on Dask (``launch.py sweep``).

Berthing analysts ask how often capture and latching succeed over the dispersions of the
capture conditions and the impact parameters, where the envelope's edges are, and which
peak loads the arm and the latches see. A sweep answers with one lockstep run of the
scenario per set of parameter values, each a task on a ``dask.distributed`` cluster (a
LocalCluster with one worker per core by default, or an existing cluster's scheduler),
one row per run in a Parquet table, and plots (:mod:`tools.envelope`).

Sweep file
----------
::

    [sweep]
    scenario = "../srms_berthing.toml"   # the base scenario (relative to this file)
    runs = 200                           # at most protocol.config.MAX_SWEEP_RUNS (100,000; so is the grid)
    seed = 1                             # every run's values and seed derive from it (tools.dispersion)
    start = 6.0                          # s: the window's start; 0 (default) runs from the scenario's t0
    end = 40.0                           # s: the window's end (default: the scenario's sim.duration)
    require = ["capture", "rigidize", "first_contact", "latch"]
                                         # contact events a successful run shows, in this order (default:
                                         # what the script expects in the window, report.expected_events)
    figures = ["capture.*", "latch.*"]   # figure columns kept (fnmatch patterns; default all, FIGURE_COLUMNS)

    [set]                                # fixed changes to the scenario, for every run
    "contact.berthing" = "impulsive"

    [[parameter]]                        # a scenario value ...
    name = "r_E"                         # the table's column
    key = "contact.r_E"                  # dotted path into the scenario, [i] for a list item
    add = false                          # true: the value is added to the scenario's
    unit = ""                            # for the plots
    distribution = "uniform"             # tools.dispersion: uniform, normal, truncnorm, grid
    low = 0.0
    high = 1.0

    [[parameter]]                        # ... or a change of a body's state at the window's start
    name = "lateral_offset"
    body = "payload"                     # payload | orbiter
    change = "position"                  # position | velocity | rotation | angular_velocity
    frame = "G"                          # W, or a frame of the body: payload T, G, B; orbiter O, L
    axis = "y"                           # x, y, z, -x, -y, -z of that frame
    unit = "m"
    distribution = "normal"
    mean = 0.0
    std = 0.04

A run leaves out the scenario's sinks (the logger) and its rig (``kind = "hil.bridge"``):
runs are independent and cheap, and the physics does not depend on them (with
``contact.source = "model"``; the tables only they read are dropped). Every run is a
lockstep run in one process (:func:`protocol.scheduler.simulate`'s engine), so it
computes what ``launch.py run`` computes.

Windows and snapshots
---------------------
With ``start > 0`` the scenario runs once from ``t0`` to ``start`` and the whole run is
saved there (:func:`protocol.scheduler.snapshot`: every model, its input buffer, its
couplers; ``start`` must be a coupling instant of every port). Each run restores it
(:func:`protocol.scheduler.restore`) in its worker and goes on to ``end``; a restored
run continues bit-identically to the run it was taken from. At the start instant:

- a scenario value (``key``) replaces the restored models' *parameters*: a model whose
  state is its context (orbiter, arm, contact, operator) and whose tables (its kind's
  ``TABLES``, the tables it declares it reads) hold a changed key is replaced by the model
  built from the run's scenario, given the restored model's context; nothing is diffed.
  A model without a context (an FMU, a toy) takes every attribute that a model built
  from the run's scenario holds differently from one built from the base scenario, the
  rest (the state) from the snapshot (:func:`transplant`). A parameter that acts before
  ``start`` would make this wrong, so the sweep first proves it exact for each such
  parameter at both ends of its range (:func:`check_parameter`: the transplanted run equals, attribute by attribute
  and buffer by buffer, a run from ``t0`` with that value) and refuses the sweep if it
  is not;
- a body change (``body``) is added to that body's state (position, attitude by a
  rotation about the axis through the frame's origin — through G for ``frame = "G"``, so
  that the fixture turns in place —, velocity of its CoM, angular velocity), in the given
  frame (``W``: its axes, at the body's CoM).
  The other services see it from the next coupling instant of the body's state port
  (they hold the sample of ``start``, published before the change).

Without a window (``start = 0``) a run is built from its scenario and the body changes
are applied before its initial outputs.

Table (``OUT/runs.parquet``, one row per run, by ``run``)
--------------------------------------------------------
``run``, ``seed`` (the run's ``sim.seed``), every parameter's value, ``outcome``
(``ok``; ``miss`` — the capture missed its envelope; ``no <event>`` — the first required
event it did not show; ``error``, ``diverged`` — a non-finite value —, ``died`` — its
worker died), ``ok``, ``error`` (the exception, one line), the figures
(:data:`FIGURE_COLUMNS`, computed from the run's frames by
:func:`tools.report.figures`, the same computation as a run's summary), ``t_end_s``
(the simulation time every model reached), and the wall-time columns
:data:`WALL_COLUMNS` (``wall_s`` of the run in its worker, ``sim_s`` of it stepping the
models, ``worker``). The file's
metadata holds the sweep's fingerprint (its scenario, window, parameters, seed,
required events and figures; not the number of runs): a sweep whose fingerprint
differs refuses to add to it (``--overwrite`` starts over).

Robustness: a run that raises or diverges is a row with its error; a run whose worker
dies is a ``died`` row, and so is a run that was waiting on that worker (the sweep keeps
only as many runs in flight as the cluster has threads, so that few do; the LocalCluster
fails a task on the first death of its worker, an external scheduler may first retry it
elsewhere, as its ``allowed-failures`` says); the sweep always finishes. The table is rewritten
(atomically) every few seconds and at the end;
a sweep resumes from it: runs with a row are not run again, except ``died`` ones (they
have no result). Ctrl-C cancels the runs in flight and writes the table so far.

``--rerun K --log PATH`` re-creates run ``K`` alone, in this process, with a logger: its
full MCAP log (from ``t0``; the body changes at ``start``), and prints its row.

Limits: ``runs`` and the grid's points (the product of the grid parameters' sizes) are at most
:data:`protocol.config.MAX_SWEEP_RUNS`, checked from the numbers before any grid exists
(:func:`protocol.config.check_sweep_size`); ``--scheduler`` names a scheme Dask knows
(:data:`SCHEDULER_SCHEMES`). Results come back from the cluster as pickles: a cluster can run
code in this process, so trust it as you trust the code.

Exit codes: 0 every run has its row; 3 the same, but some rows are errors (``error``,
``diverged``, ``died``); 2 a bad sweep file or table, or ``--scheduler``; 1 the cluster failed;
130 interrupted.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import fnmatch
import hashlib
import json
import math
import os
import pickle
import re
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from errors import ConfigError, LifecycleError, MessageError, ShapeError
from protocol.config import check_sweep_size, check_table, cut, load, service_module, validate
from protocol.coupling import coupling_periods
from protocol.logfile import decode_bodies
from protocol.scheduler import Member, Scheduler, advance, ports_of, restore, snapshot, start
from protocol.service import BoundModel
from protocol.timebase import seconds_to_ns
from tools import dispersion
from tools.report import FIGURE_TOPICS, PHASES, expected_events, figures

__all__ = ["FIGURE_COLUMNS", "OUTCOMES", "WALL_COLUMNS", "Parameter", "SweepPlan", "SweepResult", "add_arguments",
           "build_models", "check", "check_parameter", "execute", "figure_row", "get_key", "is_sweep_file",
           "load_sweep", "local_cluster", "main", "outcome", "parameter_config", "perturb", "plots", "prefix",
           "read_table", "rerun", "run_config", "run_sweep", "set_key", "sweep_config", "transplant", "write_table"]

LEFT_OUT = ("logger", "hil.bridge")
"""Service kinds a sweep run leaves out: the recorder and the rig."""
EVENTS = ("first_contact", "rebound", "capture", "miss", "rigidize", "latch_start", "latch", "release")
"""Contact events ``require`` may name."""
ERROR_OUTCOMES = ("error", "diverged", "died")
OUTCOMES = ("ok", "miss", "no <event>", *ERROR_OUTCOMES)
"""What ``outcome`` can say."""
WALL_COLUMNS = ("wall_s", "sim_s", "worker")
"""Columns that depend on the machine and the moment, not on the run."""

_PHASE_COLS = [p.replace(" ", "_") for p in PHASES]
N_JOINTS = 6
FIGURE_COLUMNS: dict[str, str] = {
    # column: its type ("f8" NaN when the run has none, "bool", "str")
    "capture.t": "f8", "capture.v_rel_m_s": "f8", "capture.w_rel_deg_s": "f8", "capture.lateral": "f8",
    "capture.axial": "f8", "capture.tilt": "f8", "capture.roll": "f8", "miss.reason": "str",
    "latch_start.t": "f8", "latch_start.misalignment_m": "f8", "latch_start.misalignment_deg": "f8",
    "latch.t": "f8", "latch.misalignment_m": "f8", "latch.misalignment_deg": "f8",
    "interface_peak.force_N": "f8", "interface_peak.moment_Nm": "f8",
    **{f"joint_peak_Nm.j{i + 1}": "f8" for i in range(N_JOINTS)}, "joint_peak_Nm.max": "f8",
    "momentum_drift_Ns": "f8",
    **{f"phases.{p}": "f8" for p in _PHASE_COLS}, **{f"reached.{p}": "bool" for p in _PHASE_COLS},
}
"""Every figure column a sweep can keep (``[sweep] figures``), from :func:`tools.report.figures`:
capture (time [s], relative speed [m/s] and rate [deg/s], envelope metrics [m, rad]), the miss's
reason (the ``capture.*`` columns are those of the capture attempt: of the ``miss`` event
when it missed), the latches closing on B (``latch_start``: time, misalignment [m, deg]) and
closed (``latch``, after their stroke), peak interface force [N] and moment [N·m] from the
first berthing contact, peak joint torques [N·m], momentum drift [N·s], each phase's start [s] and
whether it was reached."""

SWEEP_KEYS: dict[str, tuple[Any, Any]] = {
    "scenario": (str, None), "runs": (int, None), "seed": (int, 0), "start": ((int, float), 0.0),
    "end": ((int, float), None), "require": ("list", None), "figures": ("list", None), "name": (str, None),
}
PARAMETER_KEYS = ("name", "key", "add", "body", "change", "frame", "axis", "unit", *dispersion.KEYS)
CHANGES = ("position", "velocity", "rotation", "angular_velocity")
BODIES: dict[str, tuple[str, str, dict[str, str | None]]] = {
    # body: (its state topic, its config table, frames: name -> pose key in that table (None: the body frame))
    "payload": ("payload/state", "payload", {"T": None, "G": "X_TG", "B": "X_TB"}),
    "orbiter": ("orbiter/state", "orbiter", {"O": None, "L": "X_OL"}),
}
_AXES = {"x": 0, "y": 1, "z": 2}
_PATH = re.compile(r"[A-Za-z_][\w-]*(\[\d+\])*(\.[A-Za-z_][\w-]*(\[\d+\])*)*\Z")


# ---------------------------------------------------------------- the sweep file
@dataclass(frozen=True)
class Parameter:
    """One dispersed parameter (module docstring, ``[[parameter]]``)."""

    name: str
    dispersion: dispersion.Dispersion
    key: str | None = None
    add: bool = False
    body: str | None = None
    change: str | None = None
    frame: str | None = None
    axis: str | None = None
    unit: str = ""

    @property
    def label(self) -> str:
        """Axis label: name and unit."""
        return f"{self.name} [{self.unit}]" if self.unit else self.name


@dataclass(frozen=True)
class SweepPlan:
    """A validated sweep file (:func:`load_sweep`).

    Attributes
    ----------
    base : dict
        The runs' scenario: ``[set]`` applied, :data:`LEFT_OUT` services and the tables
        only they read removed.
    coupling : dict
        Per service, its configured coupling periods [ns] (as :func:`protocol.scheduler.simulate` takes them).
    start_ns, end_ns : int
        The window. [ns]
    columns : tuple of str
        The figure columns kept.
    fingerprint : str
        sha256 of what makes a run's result (module docstring, Table).
    """

    name: str
    path: str | None
    scenario: str
    base: dict[str, Any]
    left_out: tuple[str, ...]
    runs: int
    seed: int
    start_ns: int
    end_ns: int
    parameters: tuple[Parameter, ...]
    require: tuple[str, ...]
    columns: tuple[str, ...]
    coupling: dict[str, dict[str, int]]
    fingerprint: str
    text: str = field(default="", repr=False)
    services: tuple[tuple[str, str, int], ...] = ()
    """The runs' services: (name, kind, period_ns), in config order."""

    @property
    def names(self) -> list[str]:
        """The parameters' names (their columns), in file order."""
        return [p.name for p in self.parameters]

    @property
    def config_parameters(self) -> list[int]:
        """Indices of the parameters that are scenario values."""
        return [i for i, p in enumerate(self.parameters) if p.key is not None]


def _tokens(path: str) -> list[str | int]:
    out: list[str | int] = []
    for part in path.split("."):
        name, *idx = part.split("[")
        out.append(name)
        out.extend(int(i.rstrip("]")) for i in idx)
    return out


def get_key(config: Mapping[str, Any], path: str) -> Any:
    """The value at a dotted path (``contact.latch.position``, ``payload.X_WT[1]``).

    Raises
    ------
    KeyError
        Naming the path, if it is not in ``config``.
    """
    node: Any = config
    for t in _tokens(path):
        try:
            node = node[t]
        except (KeyError, IndexError, TypeError):
            raise KeyError(f"{path}: not in the scenario (no {t!r})") from None
    return node


def set_key(config: dict[str, Any], path: str, value: Any, add: bool = False) -> None:
    """Set (or, with ``add``, add to) the value at a dotted path; a new key of an existing table may be set.

    Raises
    ------
    KeyError
        Naming the path, if its table or list item does not exist (or, with ``add``,
        there is no number to add to).
    """
    toks = _tokens(path)
    parent: Any = config
    for t in toks[:-1]:
        try:
            parent = parent[t]
        except (KeyError, IndexError, TypeError):
            raise KeyError(f"{path}: not in the scenario (no {t!r})") from None
    last = toks[-1]
    if isinstance(last, int) and not (isinstance(parent, list) and last < len(parent)):
        raise KeyError(f"{path}: no list item {last}")
    if isinstance(last, str) and not isinstance(parent, dict):
        raise KeyError(f"{path}: {toks[-2]!r} is not a table")
    if add:
        old = parent[last] if (isinstance(last, int) or last in parent) else None
        if isinstance(old, bool) or not isinstance(old, (int, float)):
            raise KeyError(f"{path}: add = true needs a number in the scenario, got {old!r}")
        value = old + value
    parent[last] = value


def sweep_config(scenario: Mapping[str, Any], changes: Mapping[str, Any]) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The runs' scenario: ``changes`` set, sinks and the rig left out (:data:`LEFT_OUT`), one process.

    Returns the config and the names of the services left out.
    """
    cfg = copy.deepcopy(dict(scenario))
    for path, value in changes.items():
        set_key(cfg, path, copy.deepcopy(value))
    services = cfg.get("services") or {}
    out = tuple(n for n, s in services.items() if isinstance(s, dict) and s.get("kind") in LEFT_OUT)
    for n in out:
        del services[n]
    claimed = {"sim", "services", "security"}
    for s in services.values():
        if isinstance(s, dict) and isinstance(s.get("kind"), str):
            s.pop("process", None)
            try:
                claimed.update(getattr(service_module(s["kind"]), "TABLES", ()))
            except ConfigError:
                pass  # reported by validate
    for key in [k for k in cfg if k not in claimed]:
        del cfg[key]
    sim = cfg.setdefault("sim", {})
    if isinstance(sim, dict):
        sim.pop("processes", None)
        sim["transport"] = "inproc"  # one process (nothing is opened: runs have no bus)
        sim["mode"] = "lockstep"
        for k in ("log", "overwrite", "bus", "hosts"):
            sim.pop(k, None)
    cfg.pop("security", None)
    return cfg, out


def build_models(config: dict[str, Any], services: Sequence[tuple[str, str, int]] | None = None) -> list[Any]:
    """The models of a run's scenario, in config order.

    Parameters
    ----------
    config : dict
    services : sequence of (name, kind, period_ns), optional
        The scenario's services as the sweep validated them (:attr:`SweepPlan.services`):
        then only each service module checks its tables (a run's values change model
        parameters, not the runtime's layout, whose whole check costs ~0.1 s a run).

    Raises
    ------
    ConfigError
        If the scenario is not valid.
    """
    if services is None:
        plan = validate(config)
        services = [(n, s.kind, s.period_ns) for n, s in plan.services.items()]
    out = []
    for name, kind, period in services:
        mod = service_module(kind)
        problems = mod.validate(config, name)
        if problems:
            raise ConfigError(f"services.{name}: {problems[0]}", [f"services.{name}: {p}" for p in problems])
        out.append(mod.build(config, name, period))
    return out


_BASE: dict[str, list[Any]] = {}
"""The base scenario's models freshly built, by sweep fingerprint (one entry): what :func:`transplant`
compares a run's against, the same for every run of a sweep in this process, and only read."""


def _fresh_base(plan: SweepPlan) -> list[Any]:
    if plan.fingerprint not in _BASE:
        _BASE.clear()
        _BASE[plan.fingerprint] = build_models(plan.base, plan.services)
    return _BASE[plan.fingerprint]


def _parameter(table: Any, i: int, base: dict[str, Any], problems: list[str]) -> Parameter | None:
    where = f"parameter[{i}]"
    if not isinstance(table, dict):
        problems.append(f"{where}: expected a table, got {table!r}")
        return None
    n0 = len(problems)
    for k in table:
        if k not in PARAMETER_KEYS:
            problems.append(f"{where}.{k}: unknown key (known: {', '.join(PARAMETER_KEYS)})")
    name = table.get("name")
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][\w]*", name):
        problems.append(f"{where}.name: expected an identifier (letters, digits, _), got {name!r}")
    elif name in FIGURE_COLUMNS or name in ("run", "seed", "outcome", "ok", "error", "t_end_s", *WALL_COLUMNS):
        problems.append(f"{where}.name: {name!r} is a column of the table already")
    where = f"parameter {name!r}" if isinstance(name, str) else where
    disp = dispersion.parse(table, where, problems)
    key, body = table.get("key"), table.get("body")
    unit = table.get("unit", "")
    if not isinstance(unit, str):
        problems.append(f"{where}.unit: expected a string, got {unit!r}")
    if (key is None) == (body is None):
        problems.append(f"{where}: give either key (a scenario value) or body (a body's state), not "
                        f"{'both' if key is not None else 'neither'}")
        return None
    if key is not None:
        extra = [k for k in ("change", "frame", "axis") if k in table]
        if extra:
            problems.append(f"{where}.{extra[0]}: only for a body's state (body = ...)")
        add = table.get("add", False)
        if not isinstance(add, bool):
            problems.append(f"{where}.add: expected true or false, got {add!r}")
        if not isinstance(key, str) or not _PATH.match(key):
            problems.append(f"{where}.key: expected a dotted path like 'contact.r_E' or 'payload.X_WT[1]', got {key!r}")
        elif disp is not None:
            for v in disp.extremes:
                try:
                    set_key(copy.deepcopy(base), key, v, add is True)
                except KeyError as err:
                    problems.append(f"{where}.key: {err.args[0]}")
                    break
        if len(problems) > n0 or not isinstance(name, str) or disp is None:  # (each has its problem listed)
            return None
        return Parameter(name, disp, key=key, add=add, unit=unit)
    if "add" in table:
        problems.append(f"{where}.add: a body's change is always added to its state")
    if body not in BODIES:
        problems.append(f"{where}.body: expected one of {', '.join(BODIES)}, got {body!r}")
        return None
    change, frame, axis = table.get("change"), table.get("frame", "W"), table.get("axis")
    if change not in CHANGES:
        problems.append(f"{where}.change: expected one of {', '.join(CHANGES)}, got {change!r}")
    frames = ("W", *BODIES[body][2])
    if frame not in frames:
        problems.append(f"{where}.frame: expected one of {', '.join(frames)} for the {body}, got {frame!r}")
    if not isinstance(axis, str) or axis.lstrip("-") not in _AXES or axis.count("-") > 1:
        problems.append(f"{where}.axis: expected x, y, z, -x, -y or -z, got {axis!r}")
    if len(problems) > n0 or disp is None or not isinstance(name, str):  # (each has its problem listed)
        return None
    return Parameter(name, disp, body=body, change=change, frame=frame, axis=axis, unit=unit)


def load_sweep(path: str | Path) -> SweepPlan:
    """Read and validate a sweep file (module docstring); every problem at once.

    Each scenario value is checked at both ends of its range (the scenario's validation
    with that value); the window against the runs' periods and coupling periods.

    Raises
    ------
    ConfigError
        With ``problems`` naming each key and value.
    """
    path = Path(path)
    raw = load(path)
    too_big = check_sweep_size(raw)  # before any grid is made (a grid of 10⁹ points would fill the memory)
    if too_big:
        raise ConfigError(f"sweep {str(path)!r}: " + "; ".join(too_big), too_big)
    problems: list[str] = []
    for key in raw:
        if key not in ("sweep", "set", "parameter"):
            problems.append(f"[{key}]: unknown table of a sweep file (known: sweep, set, parameter)")
    sw = check_table(raw, "sweep", SWEEP_KEYS, problems)
    if sw["scenario"] is None:
        problems.append("sweep.scenario: missing (the base scenario's TOML file, relative to the sweep file)")
        raise ConfigError(f"sweep {str(path)!r}: " + "; ".join(problems), problems)
    runs = sw["runs"]
    if runs is None or isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:
        problems.append(f"sweep.runs: expected a whole number >= 1, got {runs!r}")
        runs = 1
    seed = sw["seed"]
    if not isinstance(seed, int) or not 0 <= seed < 2**64:
        problems.append(f"sweep.seed: expected an unsigned 64-bit int (0 … 2**64 - 1), got {seed!r}")
        seed = 0
    scenario = (path.parent / sw["scenario"]) if not Path(sw["scenario"]).is_absolute() else Path(sw["scenario"])
    try:
        scenario_cfg = load(scenario)
    except ConfigError as err:
        problems.append(f"sweep.scenario: {err}")
        raise ConfigError(f"sweep {str(path)!r}: " + "; ".join(problems), problems) from err
    changes = raw.get("set", {})
    if not isinstance(changes, dict):
        problems.append(f"[set]: expected a table of dotted keys, got {changes!r}")
        changes = {}
    for k in changes:
        if not _PATH.match(k):
            problems.append(f"set.{k}: expected a dotted path like \"contact.berthing\"")
    try:
        base, left_out = sweep_config(scenario_cfg, changes)
    except KeyError as err:
        problems.append(f"[set]: {err.args[0]}")
        base, left_out = sweep_config(scenario_cfg, {})
    params = raw.get("parameter", [])
    if not isinstance(params, list):
        problems.append(f"[[parameter]]: expected an array of tables, got {params!r}")
        params = []
    parsed = [_parameter(t, i, base, problems) for i, t in enumerate(params)]
    parameters = tuple(p for p in parsed if p is not None)
    names = [p.name for p in parameters]
    for n in sorted({n for n in names if names.count(n) > 1}):
        problems.append(f"parameter {n!r}: named twice")
    grid = dispersion.grid_size([p.dispersion for p in parameters])
    if runs % grid:
        problems.append(f"sweep.runs: {runs} is not a whole multiple of the grid's {grid} points")
    # the scenario, at both ends of every value's range
    coupling: dict[str, dict[str, int]] = {}
    duration_ns = 0
    models: list[Any] = []
    services: tuple[tuple[str, str, int], ...] = ()
    try:
        rp = validate(base, path=scenario)
        services = tuple((n, s.kind, s.period_ns) for n, s in rp.services.items())
        coupling = {n: dict(s.coupling_ns) for n, s in rp.services.items()}
        duration_ns = rp.duration_ns
        models = build_models(base)
    except ConfigError as err:
        problems.extend(f"scenario {str(scenario)!r} (with [set]): {p}" for p in err.problems)
    except Exception as err:  # noqa: BLE001 - a model that cannot be built is a problem of the file
        problems.append(f"scenario {str(scenario)!r}: cannot build its models: {type(err).__name__}: {err}")
    for p in parameters:
        if p.key is None:
            assert p.body is not None  # a parameter has a key or a body (_parameter)
            if BODIES[p.body][0] not in {o.topic for m in models for o in getattr(m, "outputs", ())} and models:
                problems.append(f"parameter {p.name!r}.body: no service of the scenario publishes "
                                f"{BODIES[p.body][0]}")
            continue
        for v in p.dispersion.extremes:
            cfg = copy.deepcopy(base)
            try:
                set_key(cfg, p.key, v, p.add)
                validate(cfg)
            except KeyError:
                break  # reported above
            except ConfigError as err:
                problems.append(f"parameter {p.name!r} = {v:g} ({p.key}): {err.problems[0]}")
                break
    # window
    start_s, end_s = sw["start"], sw["end"]
    start_ns = end_ns = 0
    try:
        start_ns = seconds_to_ns(start_s, "sweep.start")
        end_ns = seconds_to_ns(end_s if end_s is not None else duration_ns * 1e-9, "sweep.end")
    except ConfigError as err:
        problems.extend(err.problems)
    if end_ns <= start_ns:
        problems.append(f"sweep.end: expected after sweep.start ({start_s!r} s), got "
                        f"{end_s if end_s is not None else duration_ns * 1e-9!r} s")
    if models:
        members = [Member(m) for m in models]
        H = coupling_periods(ports_of(members), coupling)
        periods = [m.period_ns for m in members if m.period_ns]
        grid_ns = math.lcm(*periods, *H.values())
        if start_ns % grid_ns:
            problems.append(f"sweep.start: {start_s!r} s is not a coupling instant of every port (every "
                            f"{grid_ns * 1e-9:g} s: e.g. {start_ns // grid_ns * grid_ns * 1e-9:g} s)")
        step = math.lcm(*periods)
        if end_ns % step:
            problems.append(f"sweep.end: {end_s!r} s is not a whole step of every service (every {step * 1e-9:g} s)")
    require = sw["require"]
    if require is None:
        require = expected_events(base, end_ns * 1e-9, start_ns * 1e-9)
    elif not all(isinstance(e, str) and e in EVENTS for e in require):
        problems.append(f"sweep.require: expected contact events among {', '.join(EVENTS)}, got {require!r}")
    pats = sw["figures"]
    if pats is None:
        columns = tuple(FIGURE_COLUMNS)
    elif not all(isinstance(p, str) for p in pats):
        problems.append(f"sweep.figures: expected a list of column names or patterns, got {pats!r}")
        columns = ()
    else:
        for p in pats:
            if not fnmatch.filter(FIGURE_COLUMNS, p):
                problems.append(f"sweep.figures: {p!r} matches no figure (known: {', '.join(FIGURE_COLUMNS)})")
        columns = tuple(c for c in FIGURE_COLUMNS if any(fnmatch.fnmatchcase(c, p) for p in pats))
    if problems:
        raise ConfigError(f"sweep {str(path)!r}: {len(problems)} problem(s):\n  " + "\n  ".join(problems), problems)
    what = {"base": base, "parameters": [_param_dict(p) for p in parameters], "seed": seed,
            "window": [start_ns, end_ns], "require": list(require), "columns": list(columns)}
    fingerprint = hashlib.sha256(json.dumps(what, sort_keys=True, default=str).encode()).hexdigest()
    return SweepPlan(sw["name"] or path.stem, str(path), str(scenario), base, left_out, runs, seed, start_ns, end_ns,
                     parameters, tuple(require), columns, coupling, fingerprint, path.read_text(), services)


def _param_dict(p: Parameter) -> dict[str, Any]:
    d = {k: getattr(p, k) for k in ("name", "key", "add", "body", "change", "frame", "axis", "unit")}
    disp = p.dispersion
    d["dispersion"] = {k: v for k, v in (("distribution", disp.distribution), ("low", disp.low), ("high", disp.high),
                                         ("mean", disp.mean), ("std", disp.std), ("values", list(disp.values)))
                       if not (isinstance(v, float) and math.isnan(v)) and v != []}  # NaN and empty: not given
    return d


# ---------------------------------------------------------------- one run
def run_config(plan: SweepPlan, values: Sequence[float], run_seed: int) -> dict[str, Any]:
    """Run ``values``' scenario: the base with every scenario value set and ``sim.seed`` the run seed."""
    cfg = copy.deepcopy(plan.base)
    for p, v in zip(plan.parameters, values, strict=True):
        if p.key is not None:
            set_key(cfg, p.key, float(v), p.add)
    cfg["sim"]["seed"] = int(run_seed)
    return cfg


def _fields(obj: Any) -> dict[str, Any]:
    out = dict(getattr(obj, "__dict__", {}))
    for cls in type(obj).__mro__:
        for s in getattr(cls, "__slots__", ()):
            if hasattr(obj, s) and s not in ("__dict__", "__weakref__"):
                out[s] = getattr(obj, s)
    return out


def _dump(x: Any) -> bytes:
    return pickle.dumps(x, protocol=pickle.HIGHEST_PROTOCOL)


def _same_attr(x: Any, y: Any) -> bool:
    """Whether two attribute values are the same, byte for byte pickled; a dataclass (a kind's declared
    parameters) field by field, since equal values built apart share sub-objects differently, which pickling
    shows (its memo) although no field differs."""
    if dataclasses.is_dataclass(x) and not isinstance(x, type) and type(x) is type(y):
        return all(_same_attr(getattr(x, f.name), getattr(y, f.name)) for f in dataclasses.fields(x))
    return _dump(x) == _dump(y)


def _changed_keys(a: Any, b: Any, path: str = "") -> list[str]:
    """Dotted keys whose values differ between two config tables (nested tables walked)."""
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return [k for key in sorted(set(a) | set(b), key=str)
                for k in _changed_keys(a.get(key), b.get(key), f"{path}.{key}" if path else str(key))]
    return [] if _dump(a) == _dump(b) else [path]


def transplant(sched: Scheduler, base: Mapping[str, Any], run: Mapping[str, Any], fresh_base: Sequence[Any],
               fresh_run: Sequence[Any], t_ns: int = 0) -> list[str]:
    """Give a restored run the parameters of another scenario, keeping its state (module docstring).

    A model whose state is its context (:mod:`protocol.service`) whose tables differ between
    the two scenarios is replaced by its model built from the run's scenario, which goes on
    with the run's context (:meth:`protocol.scheduler.Scheduler.replace_model`): its
    parameters are what that scenario declares, nothing is diffed. A model without a context
    (an FMU, a toy) gets every attribute that ``fresh_run`` holds differently from
    ``fresh_base`` instead; its other attributes are its state and stay.

    Parameters
    ----------
    sched : Scheduler
        The restored run (:func:`protocol.scheduler.restore`).
    base, run : mapping
        The base scenario and the run's.
    fresh_base, fresh_run : sequence
        Models just built from the base scenario and from the run's.
    t_ns : int
        The instant of the snapshot (for the message). [ns]

    Returns
    -------
    list of str
        ``service: table.key`` of every changed key of a replaced model's tables, and
        ``service.attribute`` of every attribute set on a model without a context.

    Raises
    ------
    LifecycleError
        If such an attribute also changed in the restored model since it was built (it
        is state, so the parameter acted before the snapshot), naming it.
    """
    members = {m.name: m for m in sched.models}
    fresh = {m.name: m for m in fresh_base}
    done = []
    for r in fresh_run:
        member, b = members[r.name], fresh[r.name]
        obj = member.obj
        if member.ctx is not None:
            tables = getattr(service_module(base["services"][r.name]["kind"]), "TABLES", ())
            changed = [k for t in tables for k in _changed_keys(base.get(t), run.get(t), t)]
            if changed:
                sched.replace_model(r.name, r)  # the member's context stays
                done += [f"{r.name}: {k}" for k in changed]
            continue
        bf = _fields(b)
        for attr, value in _fields(r).items():
            pb = _dump(bf.get(attr))
            if _dump(value) == pb:
                continue
            if _dump(getattr(obj, attr, None)) != pb:
                raise LifecycleError(f"{r.name}.{attr} depends on the parameter and changed before the window's "
                                     f"start (t = {t_ns * 1e-9:g} s): the parameter acts before it")
            setattr(obj, attr, value)
            done.append(f"{r.name}.{attr}")
    return done


def _frame(plan_cfg: Mapping[str, Any], p: Parameter, R_WB: np.ndarray,
           p_WoBo_W: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``R_WF`` and ``p_WoFo_W`` of the parameter's frame F (W: its axes at the body's CoM)."""
    from dynamics.spatial import pose_from_vector
    assert p.body is not None and p.frame is not None  # a body parameter (perturb)
    key = BODIES[p.body][2].get(p.frame) if p.frame != "W" else None
    if key is None:
        return (np.eye(3) if p.frame == "W" else R_WB), p_WoBo_W
    X = pose_from_vector(plan_cfg.get(BODIES[p.body][1], {}).get(key, [0.0] * 6))
    return R_WB @ X[:3, :3], p_WoBo_W + R_WB @ X[:3, 3]


def perturb(models: Iterable[Any], plan: SweepPlan, values: Sequence[float], config: Mapping[str, Any]) -> None:
    """Add the body changes of ``values`` to the bodies' states (module docstring).

    ``models`` are a run's members, or models bound to their contexts
    (:class:`protocol.service.BoundModel`). A body's state is its producer's context's ``body``
    (:class:`dynamics.rigid_body.RigidBodyState`), or a model without a context's ``state``.

    Raises
    ------
    LifecycleError
        If no model publishes the body's state topic, or its model has no rigid-body ``state``.
    """
    from scipy.spatial.transform import Rotation

    from dynamics.rigid_body import RigidBodyState
    from dynamics.spatial import quat_multiply, quat_to_rotation, rotation_to_quat

    models = list(models)
    for p, v in zip(plan.parameters, values, strict=True):
        if p.body is None:
            continue
        assert p.axis is not None  # set with the body (_parameter)
        topic = BODIES[p.body][0]
        bound = next((m for m in models if topic in {o.topic for o in getattr(m, "outputs", ())}), None)
        if bound is not None and not hasattr(bound, "ctx") and callable(getattr(bound, "new_context", None)):
            raise LifecycleError(f"parameter {p.name!r}: {bound.name}'s state is its context: pass the run's "
                                 "members or the models bound to their contexts (protocol.service.BoundModel)")
        ctx = getattr(bound, "ctx", None)
        owner, field = (ctx, "body") if ctx is not None else (getattr(bound, "obj", bound), "state")
        st = getattr(owner, field, None)
        if owner is None or not isinstance(st, RigidBodyState):
            raise LifecycleError(f"parameter {p.name!r}: no model with a rigid-body state publishes {topic}")
        R_WB = quat_to_rotation(st.quat_WB)
        e = np.zeros(3)
        e[_AXES[p.axis.lstrip("-")]] = -1.0 if p.axis.startswith("-") else 1.0
        R_WF, p_F = _frame(config, p, R_WB, st.p_WoBo_W)
        d_W = R_WF @ e * float(v)
        pos, quat, vel, w_B = st.p_WoBo_W, st.quat_WB, st.v_WBo_W, st.w_WB_B
        if p.change == "position":
            pos = pos + d_W
        elif p.change == "velocity":
            vel = vel + d_W
        elif p.change == "angular_velocity":
            w_B = w_B + R_WB.T @ d_W
        else:  # rotation by v rad about the axis through the frame's origin (G, B: the fixture moves not)
            R = Rotation.from_rotvec(d_W).as_matrix()
            quat = quat_multiply(rotation_to_quat(R), quat)
            pos = p_F + R @ (pos - p_F)
        setattr(owner, field, RigidBodyState(pos, quat, vel, w_B))


def prefix(plan: SweepPlan, sinks: Sequence[Any] = (), config: dict[str, Any] | None = None,
           on_frame: Callable[[bytes], None] | None = None) -> bytes:
    """The snapshot at the window's start of a run of ``config`` (default: the base scenario) from t0."""
    sched = start([*build_models(config or plan.base, plan.services), *sinks], coupling=plan.coupling)
    advance(sched, plan.start_ns, on_frame)
    return snapshot(sched)


def _error(err: BaseException) -> tuple[str, str]:
    text = " ".join(f"{type(err).__name__}: {err}".split())[:500]
    finite = isinstance(err, (MessageError, ShapeError, FloatingPointError)) and "finite" in str(err)
    return ("diverged" if finite else "error"), text


def outcome(fig: Mapping[str, Any], require: Sequence[str]) -> str:
    """``ok``, ``miss`` or ``no <event>`` (module docstring) from a run's figures."""
    seen = [k for _, k in fig["events"]]
    if "miss" in seen and "capture" in require:
        return "miss"
    it = iter(seen)
    for e in require:
        if e not in it:
            return f"no {e}"
    return "ok"


def figure_row(fig: Mapping[str, Any], columns: Iterable[str] = FIGURE_COLUMNS) -> dict[str, Any]:
    """A run's figures (:func:`tools.report.figures`) as table columns (:data:`FIGURE_COLUMNS`)."""
    nan = math.nan
    cap, ls, lat = fig.get("capture", fig.get("miss", {})), fig.get("latch_start", {}), fig.get("latch", {})
    jp = list(fig.get("joint_peak_Nm", []))
    row: dict[str, Any] = {
        "capture.t": cap.get("t", nan), "capture.v_rel_m_s": cap.get("v_rel_m_s", nan),
        "capture.w_rel_deg_s": cap.get("w_rel_deg_s", nan), "capture.lateral": cap.get("lateral", nan),
        "capture.axial": cap.get("axial", nan), "capture.tilt": cap.get("tilt", nan),
        "capture.roll": cap.get("roll", nan), "miss.reason": fig["miss"]["reason"] if "miss" in fig else None,
        "latch_start.t": ls.get("t", nan), "latch_start.misalignment_m": ls.get("misalignment_m", nan),
        "latch_start.misalignment_deg": ls.get("misalignment_deg", nan),
        "latch.t": lat.get("t", nan), "latch.misalignment_m": lat.get("misalignment_m", nan),
        "latch.misalignment_deg": lat.get("misalignment_deg", nan),
        "interface_peak.force_N": fig["interface_peak"]["force_N"],
        "interface_peak.moment_Nm": fig["interface_peak"]["moment_Nm"],
        **{f"joint_peak_Nm.j{i + 1}": (jp[i] if i < len(jp) else nan) for i in range(N_JOINTS)},
        "joint_peak_Nm.max": max(jp) if jp else nan,
        "momentum_drift_Ns": fig["momentum_drift_Ns"],
    }
    for ph, col in zip(PHASES, _PHASE_COLS, strict=True):
        t = fig["phases"].get(ph)
        row[f"phases.{col}"] = nan if t is None else float(t)
        row[f"reached.{col}"] = t is not None
    return {c: row[c] for c in columns}


def _worker() -> str:
    try:
        from distributed import get_worker
        return str(get_worker().address)
    except (ImportError, ValueError):
        return "local"


def execute(plan: SweepPlan, k: int, blob: bytes | None = None, sinks: Sequence[Any] = ()) -> dict[str, Any]:
    """Run ``k`` of the sweep in this process (from the window's snapshot ``blob`` when the sweep has a
    window); its row. Never raises for what the run does: an exception is the row's ``error``."""
    t0 = time.perf_counter()
    values, run_seed = dispersion.run_values([p.dispersion for p in plan.parameters], plan.seed, k)
    row: dict[str, Any] = {"run": int(k), "seed": run_seed, **dict(zip(plan.names, values, strict=True))}
    keep: dict[bytes, list[bytes]] = {t.encode(): [] for t in FIGURE_TOPICS}

    def on_frame(f: bytes) -> None:
        i = f.find(b"\0")
        got = keep.get(f[:i])
        if got is not None:
            got.append(f[i + 1:])

    sched = None
    try:
        cfg = run_config(plan, values, run_seed)
        if blob is None:
            bound = [BoundModel(m) for m in build_models(cfg, plan.services)]
            perturb(bound, plan, values, cfg)
            sched = start([*(b.obj for b in bound), *sinks], coupling=plan.coupling,
                          contexts={b.name: b.ctx for b in bound if b.ctx is not None})
        else:
            sched = restore(blob, sinks)
            if plan.config_parameters:
                transplant(sched, plan.base, cfg, _fresh_base(plan), build_models(cfg, plan.services), plan.start_ns)
            perturb(sched.models, plan, values, cfg)
        t_sim = time.perf_counter()
        advance(sched, plan.end_ns, on_frame)
        row["sim_s"] = time.perf_counter() - t_sim
        fig = figures({t.decode(): decode_bodies(t.decode(), b) for t, b in keep.items() if b}, cfg)
        row.update(outcome=outcome(fig, plan.require), error=None, **figure_row(fig, plan.columns))
    except Exception as err:  # noqa: BLE001 - a run's failure is its row, never the sweep's
        kind, text = _error(err)
        row.update(outcome=kind, error=text)
    row["ok"] = row["outcome"] == "ok"
    row["t_end_s"] = round(min((m.t_ns for m in sched.models), default=0) * 1e-9, 9) if sched is not None else math.nan
    row["wall_s"] = time.perf_counter() - t0
    row["worker"] = _worker()
    return row


def parameter_config(plan: SweepPlan, index: int, value: float) -> dict[str, Any]:
    """The base scenario with only parameter ``index`` (a scenario value) set to ``value``."""
    p = plan.parameters[index]
    assert p.key is not None  # a scenario value (SweepPlan.config_parameters)
    cfg = copy.deepcopy(plan.base)
    set_key(cfg, p.key, float(value), p.add)
    return cfg


def check_parameter(plan: SweepPlan, blob: bytes, index: int, value: float, ref: bytes | None = None) -> str | None:
    """Is setting parameter ``index`` to ``value`` at the window's start exact? None if it is, else why not.

    Compares the snapshot ``blob`` restored with :func:`transplant` against the snapshot
    of a run from t0 with that value (``ref``, :func:`prefix` of :func:`parameter_config`;
    made here when not given): every member's time, context, input buffer and outputs, and
    every attribute of every model, byte for byte (pickled).
    """
    p = plan.parameters[index]
    cfg = parameter_config(plan, index, value)
    got = restore(blob)
    try:
        transplant(got, plan.base, cfg, _fresh_base(plan), build_models(cfg, plan.services), plan.start_ns)
    except LifecycleError as err:
        return f"parameter {p.name!r} ({p.key} = {value:g}): {err}"
    snap = restore(ref if ref is not None else prefix(plan, config=cfg))
    acts = (f"parameter {p.name!r} ({p.key} = {value:g}) acts before the window's start "
            f"(t = {plan.start_ns * 1e-9:g} s)")
    for a, b in zip(got.models, snap.models, strict=True):  # the models' attributes first: they name the cause
        fa, fb = _fields(a.obj), _fields(b.obj)
        for attr in sorted(set(fa) | set(fb)):
            if not _same_attr(fa.get(attr), fb.get(attr)):
                return f"{acts}: {a.name}.{attr} differs there"
        ca, cb = _fields(a.ctx) if a.ctx is not None else {}, _fields(b.ctx) if b.ctx is not None else {}
        for attr in sorted(set(ca) | set(cb)):
            if not _same_attr(ca.get(attr), cb.get(attr)):
                return f"{acts}: {a.name}'s context.{attr} differs there"
    for a, b in zip(got.models, snap.models, strict=True):
        for what, x, y in (("time", a.t_ns, b.t_ns), ("input buffer", a.buf, b.buf),
                           ("outputs", [(o.topic, o.seq, o.full_seq, o.coupler) for o in a.outs],
                            [(o.topic, o.seq, o.full_seq, o.coupler) for o in b.outs])):
            if _dump(x) != _dump(y):
                return f"{acts}: {a.name}'s {what} differs there"
    return None


# ---------------------------------------------------------------- the table
def _schema(plan: SweepPlan) -> Any:
    import pyarrow as pa
    types = {"f8": pa.float64(), "bool": pa.bool_(), "str": pa.string()}
    cols = [("run", pa.int64()), ("seed", pa.uint64())] + [(n, pa.float64()) for n in plan.names]
    cols += [("outcome", pa.string()), ("ok", pa.bool_()), ("error", pa.string())]
    cols += [(c, types[FIGURE_COLUMNS[c]]) for c in plan.columns]
    cols += [("t_end_s", pa.float64()), ("wall_s", pa.float64()), ("sim_s", pa.float64()), ("worker", pa.string())]
    meta = {"berthsim.sweep": json.dumps({"fingerprint": plan.fingerprint, "name": plan.name, "runs": plan.runs,
                                          "scenario": plan.scenario, "parameters": plan.names}),
            "berthsim.sweep_file": plan.text}
    return pa.schema(cols, metadata=meta)


def write_table(plan: SweepPlan, rows: Iterable[Mapping[str, Any]], path: str | Path) -> None:
    """Write the rows (sorted by run) as Parquet, atomically (a temporary file renamed over ``path``)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    schema = _schema(plan)
    rows = sorted(rows, key=lambda r: r["run"])
    data = {f.name: [r.get(f.name) for r in rows] for f in schema}
    for f in schema:
        if pa.types.is_floating(f.type):
            data[f.name] = [math.nan if v is None else v for v in data[f.name]]
        elif pa.types.is_boolean(f.type) and f.name.startswith("reached."):
            data[f.name] = [bool(v) if v is not None else None for v in data[f.name]]
    table = pa.table(data, schema=schema)
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    pq.write_table(table, tmp)
    os.replace(tmp, path)


def read_table(path: str | Path, plan: SweepPlan | None = None) -> list[dict[str, Any]]:
    """The rows of a sweep's table ([] if there is none).

    Raises
    ------
    ConfigError
        If the file is not a sweep table, or (with ``plan``) one of another sweep.
    """
    import pyarrow.parquet as pq
    path = Path(path)
    if not path.exists():
        return []
    try:
        table = pq.read_table(path)
    except Exception as err:
        raise ConfigError(f"table {str(path)!r}: not readable as Parquet ({type(err).__name__}: {err})") from err
    meta = (table.schema.metadata or {}).get(b"berthsim.sweep")
    if meta is None:
        raise ConfigError(f"table {str(path)!r}: not a berthsim sweep table")
    fp = json.loads(meta)["fingerprint"]
    if plan is not None and fp != plan.fingerprint:
        raise ConfigError(f"table {str(path)!r}: made by a different sweep (its scenario, window, parameters, seed, "
                          "required events or figures differ): --out elsewhere, or --overwrite to start over")
    return table.to_pylist()


# ---------------------------------------------------------------- on Dask
def local_cluster(workers: int | None = None) -> Any:
    """A LocalCluster for sweeps: one single-threaded worker process per core (or ``workers``); a task
    fails on the first death of its worker (``allowed-failures`` 0: the run is reported, not retried
    on the next worker); no dashboard, and no statistical profiler in the workers (it is read only by the
    dashboard; it samples the running task's stack every 10 ms, and took 0.03–0.7 s of CPU a run besides
    the run's own on this 2-core host: bench/bench_sweep.py)."""
    import logging
    import warnings

    import dask
    from distributed import LocalCluster
    n = int(workers) if workers else (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                                      else os.cpu_count() or 1)
    with dask.config.set({"distributed.scheduler.allowed-failures": 0, "distributed.worker.profile.enabled": False}), \
            warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Port 8787 is already in use")  # its status page moves
        return LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None,
                            silence_logs=logging.ERROR)


_READY: list[str] = []
"""The sweep (fingerprint) this process was made ready for by :func:`_ready`, if any."""


def _ready(plan: SweepPlan) -> None:
    """Make this worker process ready for the sweep's runs, once per sweep: what a run imports and builds
    the first time (the models' modules, the dispersions' ``scipy.stats``, the base models of
    :func:`transplant`: 0.6–1.5 s), then everything the process holds so far collected and frozen
    (:func:`gc.freeze`), so that the collector's full passes walk the runs' objects only, not the
    ~10⁵ long-lived objects of a Dask worker (one such pass a run took 0.13 s of a 9 s run here). Called
    by the tasks, so that the set-up tasks (the window's snapshot, the parameter checks) pay it, not the
    first runs. Nothing a run computes depends on it (the collector frees only unreachable objects)."""
    import gc

    if _READY == [plan.fingerprint]:
        return
    try:
        from scipy.spatial.transform import Rotation  # noqa: F401 - perturb's

        from dynamics.rigid_body import RigidBodyState  # noqa: F401 - perturb's
        dispersion.run_values([p.dispersion for p in plan.parameters], plan.seed, 0)
        _fresh_base(plan)
    except Exception:  # noqa: BLE001, S110 - the run meets the same failure and reports it as its row
        pass
    gc.unfreeze()  # a worker of an earlier sweep: its objects may be garbage now
    gc.collect()
    gc.freeze()
    _READY[:] = [plan.fingerprint]


def _prefix_task(plan: SweepPlan) -> bytes:
    _ready(plan)
    return prefix(plan)


def _reference_task(plan: SweepPlan, index: int, value: float) -> bytes:
    _ready(plan)
    return prefix(plan, config=parameter_config(plan, index, value))


def _run_task(plan: SweepPlan, k: int, blob: bytes | None) -> dict[str, Any]:
    _ready(plan)
    return execute(plan, k, blob)


def _died(plan: SweepPlan, k: int, err: BaseException) -> dict[str, Any]:
    values, run_seed = dispersion.run_values([p.dispersion for p in plan.parameters], plan.seed, k)
    row: dict[str, Any] = {"run": k, "seed": run_seed, **dict(zip(plan.names, values, strict=True))}
    row.update(outcome="died", ok=False, error=" ".join(f"{type(err).__name__}: {err}".split())[:500],
               t_end_s=math.nan, wall_s=math.nan, sim_s=math.nan, worker=None)
    return row


@dataclass
class SweepResult:
    """What :func:`run_sweep` did."""

    table: Path
    rows: list[dict[str, Any]]
    ran: int = 0
    skipped: int = 0
    interrupted: bool = False
    wall_s: float = 0.0
    """The whole call. [s]"""
    runs_wall_s: float = 0.0
    """From the first run submitted to the last row (after the cluster, the snapshot and the checks). [s]"""
    workers: int = 0
    """Threads of the cluster when the runs started."""

    def counts(self) -> dict[str, int]:
        """Rows per outcome."""
        out: dict[str, int] = {}
        for r in self.rows:
            out[r["outcome"]] = out.get(r["outcome"], 0) + 1
        return dict(sorted(out.items()))

    def runs_with(self, outcomes: Iterable[str]) -> list[int]:
        """The runs whose outcome is one of ``outcomes``."""
        want = set(outcomes)
        return [r["run"] for r in self.rows if r["outcome"] in want]


def run_sweep(plan: SweepPlan, out_dir: str | Path, *, scheduler: str | None = None, workers: int | None = None,
              client: Any = None, overwrite: bool = False, progress: Any = None,
              on_result: Callable[[dict[str, Any]], None] | None = None, flush_s: float = 2.0) -> SweepResult:
    """Run the sweep's missing runs on Dask and write its table (module docstring).

    Parameters
    ----------
    plan : SweepPlan
    out_dir : str or Path
        Where ``runs.parquet`` goes (made if missing).
    scheduler : str, optional
        An existing cluster's scheduler (``tcp://host:8786``); default a :func:`local_cluster`.
    workers : int, optional
        The LocalCluster's workers (default one per core).
    client : distributed.Client, optional
        Use this client (and its cluster) instead.
    overwrite : bool
        Start over: the runs already in the table are run again.
    progress : file, optional
        Where the progress bar goes (``tqdm``: runs done, failures, errors, ETA; drawn on
        a terminal only).
    on_result : callable, optional
        Called with each new row, as it arrives.
    flush_s : float
        The table is rewritten at most this often while runs arrive, and at the end. [s]

    Raises
    ------
    ConfigError
        A table of another sweep, or a scenario value that acts before the window's start.
    """
    from distributed import Client, as_completed
    from tqdm import tqdm

    t_start = time.monotonic()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    table = out / "runs.parquet"
    rows = {r["run"]: r for r in ([] if overwrite else read_table(table, plan)) if r["run"] < plan.runs}
    todo = [k for k in range(plan.runs) if k not in rows or rows[k]["outcome"] == "died"]
    res = SweepResult(table, [], skipped=plan.runs - len(todo))
    own = None
    futures: dict[Any, int] = {}
    bar = None
    try:
        if todo:
            if client is None:
                if scheduler:
                    client = own = Client(scheduler, timeout="30s")
                    n_wait = 1  # at least one of a cluster's workers before the runs are placed
                else:
                    cluster = local_cluster(workers)
                    client = own = Client(cluster)
                    n_wait = len(cluster.workers)  # every worker of our LocalCluster
                own.wait_for_workers(n_wait, timeout=120)
            # every task carries the plan (~12 kB) and the window's snapshot (~35 kB) itself: nothing a run
            # needs lives only in a worker's memory, so a worker's death loses the runs it holds, no others
            # (data scattered to the workers, even broadcast to all, was lost with a killed worker)
            blob = None
            if plan.start_ns:
                # the window's snapshot, and those of runs from t0 with each scenario value at both ends of
                # its range (the references of check_parameter), all at once
                todo_checks = [(i, v) for i in plan.config_parameters for v in plan.parameters[i].dispersion.extremes]
                blob_task = client.submit(_prefix_task, plan, pure=False,
                                          key=f"berthsim-prefix-{plan.fingerprint[:12]}")
                refs = [client.submit(_reference_task, plan, i, v, pure=False) for i, v in todo_checks]
                blob = blob_task.result()
                bad = [c for (i, v), r in zip(todo_checks, client.gather(refs), strict=True)
                       if (c := check_parameter(plan, blob, i, v, r)) is not None]
                del refs
                if bad:
                    raise ConfigError("; ".join(bad) + ": start the window earlier (sweep.start) or at 0", bad)
            tag = plan.fingerprint[:12]
            queue = list(reversed(todo))

            def submit() -> Any:
                k = queue.pop()
                fut = client.submit(_run_task, plan, k, blob, pure=False, key=f"berthsim-run-{tag}-{k}")
                futures[fut] = k
                return fut

            # as many runs in flight as the cluster has threads: few runs wait on a worker (its death
            # affects the runs it holds), and Ctrl-C has little to cancel
            slots = res.workers = max(1, sum(client.nthreads().values()))
            t_runs = time.monotonic()
            ac = as_completed([submit() for _ in range(min(slots, len(queue)))])
            bar = tqdm(total=len(todo), unit="run", file=progress or sys.stderr, disable=None, dynamic_ncols=True)
            failed = errors = 0
            last = time.monotonic() - flush_s  # the first row is written at once (the table shows the sweep began)
            for fut in ac:
                k = futures.pop(fut)
                try:
                    row = fut.result()
                except Exception as err:  # noqa: BLE001 - the worker died (KilledWorker) or the task was lost
                    row = _died(plan, k, err)
                rows[k] = row
                res.ran += 1
                slots = max(1, sum(client.nthreads().values()))
                while queue and len(futures) < slots:
                    ac.add(submit())
                failed += not row["ok"] and row["outcome"] not in ERROR_OUTCOMES
                errors += row["outcome"] in ERROR_OUTCOMES
                bar.set_postfix_str(f"failed {failed}, errors {errors}", refresh=False)
                bar.update(1)
                if on_result is not None:
                    on_result(row)
                if time.monotonic() - last >= flush_s:
                    write_table(plan, rows.values(), table)
                    last = time.monotonic()
            res.runs_wall_s = time.monotonic() - t_runs
    except KeyboardInterrupt:
        res.interrupted = True
        if client is not None and futures:
            client.cancel(list(futures))
    finally:
        if bar is not None:
            bar.close()
        if rows or todo:
            write_table(plan, rows.values(), table)
        if own is not None:
            cluster = own.cluster
            own.close()
            if cluster is not None:
                cluster.close()
    res.rows = sorted(rows.values(), key=lambda r: r["run"])
    res.wall_s = time.monotonic() - t_start
    return res


def plots(plan: SweepPlan, rows: Sequence[Mapping[str, Any]], out_dir: str | Path) -> dict[str, Any]:
    """The sweep's plots (:func:`tools.envelope.plot_sweep`) from its rows."""
    from tools.envelope import plot_sweep
    cols: dict[str, Any] = {}
    for c in rows[0] if rows else ():
        values = [r.get(c) for r in rows]
        numeric = c in plan.names or FIGURE_COLUMNS.get(c) == "f8"
        cols[c] = np.array([math.nan if v is None else v for v in values], dtype=np.float64) if numeric else values
    return plot_sweep(cols, plan.names, out_dir, labels={p.name: p.label for p in plan.parameters}, title=plan.name)


# ---------------------------------------------------------------- rerun
def rerun(plan: SweepPlan, k: int, log: str | Path, overwrite: bool = False) -> dict[str, Any]:
    """Re-create run ``k`` alone in this process, with a logger writing its full MCAP log; its row.

    The logger records from t0 (with a window: the base scenario up to ``start``, then the
    run from the same snapshot as in the sweep).

    Raises
    ------
    ConfigError
        If ``k`` is not a run of the sweep or the log cannot be written (an existing log
        without ``overwrite``).
    """
    if not 0 <= k < plan.runs:
        raise ConfigError(f"--rerun: expected a run of the sweep, 0 … {plan.runs - 1}, got {k}")
    values, run_seed = dispersion.run_values([p.dispersion for p in plan.parameters], plan.seed, k)
    cfg = run_config(plan, values, run_seed)
    cfg["services"]["logger"] = {"kind": "logger", "rate_hz": 1000}
    cfg["sim"].update(log=str(log), overwrite=overwrite, command_line=f"launch.py sweep {plan.path} --rerun {k}")
    rp = validate(cfg)  # checks the log's path
    logger = service_module("logger").build(cfg, "logger", rp.services["logger"].period_ns)
    try:
        blob = prefix(plan, sinks=[logger]) if plan.start_ns else None
        row = execute(plan, k, blob, sinks=[logger])
    finally:
        logger.close()
    return row


# ---------------------------------------------------------------- CLI
def check(path: str | Path) -> dict[str, Any]:
    """``launch.py check SWEEP.toml``: the sweep's plan as a dict (raises ConfigError like :func:`load_sweep`)."""
    plan = load_sweep(path)
    return {"ok": True, "sweep": plan.name, "scenario": plan.scenario, "runs": plan.runs, "seed": plan.seed,
            "window_s": [round(plan.start_ns * 1e-9, 9), round(plan.end_ns * 1e-9, 9)], "left_out": list(plan.left_out),
            "parameters": [_param_dict(p) for p in plan.parameters], "require": list(plan.require),
            "figures": list(plan.columns), "fingerprint": plan.fingerprint}


def is_sweep_file(config: Mapping[str, Any]) -> bool:
    """Does a parsed TOML file look like a sweep file (a ``[sweep]`` table)?"""
    return isinstance(config.get("sweep"), dict)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``launch.py sweep``."""
    p.add_argument("sweep", help="sweep file (TOML: [sweep], [set], [[parameter]])")
    p.add_argument("--out", help="output directory (default: sweeps/<sweep name>)")
    p.add_argument("--scheduler", metavar="URL", help="an existing Dask cluster's scheduler (tcp://host:8786); "
                                                      "default: a LocalCluster on this machine")
    p.add_argument("--workers", type=int, help="LocalCluster workers (default: one per core)")
    p.add_argument("--overwrite", action="store_true", help="start over: run again the runs already in the table "
                                                           "(with --rerun: replace the log)")
    p.add_argument("--rerun", type=int, metavar="K", help="re-create run K alone and write its full log (--log)")
    p.add_argument("--log", help="with --rerun: the MCAP log to write")
    p.add_argument("--no-plots", action="store_true", help="only the table")
    p.add_argument("--json", action="store_true", help="print the JSON summary on stdout")


def main(a: argparse.Namespace) -> int:
    """``launch.py sweep``: exit codes in the module docstring."""
    if (bad := check_scheduler(a.scheduler)) is not None:
        print(f"berthsim sweep: {bad}", file=sys.stderr)
        return 2
    try:
        plan = load_sweep(a.sweep)
    except ConfigError as err:
        return _problems(err)
    try:
        import distributed  # noqa: F401
        import pyarrow  # noqa: F401
    except ImportError as err:
        print(f"berthsim sweep: needs dask.distributed and pyarrow ({err}): pip install -e '.[sweep]'", file=sys.stderr)
        return 2
    out = Path(a.out) if a.out else Path("sweeps") / plan.name
    if a.rerun is not None:
        if not a.log:
            print("berthsim sweep: --rerun K needs --log PATH", file=sys.stderr)
            return 2
        try:
            row = rerun(plan, a.rerun, a.log, overwrite=a.overwrite)
        except ConfigError as err:
            return _problems(err)
        same = None
        try:
            old = {r["run"]: r for r in read_table(out / "runs.parquet", plan)}.get(a.rerun)
        except ConfigError:
            old = None
        if old is not None:
            same = [c for c in row if c not in WALL_COLUMNS and not _same(row[c], old.get(c))]
        print(json.dumps({"event": "rerun", "run": a.rerun, "log": str(a.log), "row": row,
                          "same_as_table": (not same) if same is not None else None,
                          **({"differs": same} if same else {})}, default=str))
        return 0 if row["outcome"] not in ERROR_OUTCOMES else 3
    try:
        res = run_sweep(plan, out, scheduler=a.scheduler, workers=a.workers, overwrite=a.overwrite)
    except ConfigError as err:
        return _problems(err)
    except OSError as err:
        print(f"berthsim sweep: the cluster failed: {type(err).__name__}: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # Ctrl-C outside the run loop (starting or closing the cluster, the last write)
        print("berthsim sweep: interrupted; the table holds the runs done (the same command resumes)", file=sys.stderr)
        return 130
    summary: dict[str, Any] = {"event": "sweep", "sweep": plan.name, "table": str(res.table), "runs": plan.runs,
                               "rows": len(res.rows), "ran": res.ran, "from_table": res.skipped,
                               "interrupted": res.interrupted, "wall_s": round(res.wall_s, 3),
                               "outcomes": res.counts(), "died": res.runs_with(["died"]),
                               "errors": res.runs_with(["error", "diverged"])}
    if res.rows and not a.no_plots:
        try:
            info = plots(plan, res.rows, out)
            summary.update(pdf=info["pdf"], png=info["png"], edge=info["edge"],
                           ranking=[[n, {k: round(v, 4) for k, v in s.items()}] for n, s in info["ranking"]])
        except Exception as err:  # noqa: BLE001 - the table stands without its plots
            print(f"berthsim sweep: plots failed: {type(err).__name__}: {err}", file=sys.stderr)
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    ok = summary["outcomes"].get("ok", 0)
    print(f"berthsim sweep: {plan.name}: {len(res.rows)} of {plan.runs} runs in {res.table} ({res.ran} run now, "
          f"{res.skipped} from the table); "
          + ", ".join([f"ok {ok}"] + [f"{k} {v}" for k, v in summary["outcomes"].items() if k != "ok"])
          + (f"; runs whose worker died: {summary['died']}" if summary["died"] else "")
          + (f"; runs that raised: {summary['errors']}" if summary["errors"] else "")
          + (f"; plots {summary['pdf']}" if "pdf" in summary else ""), flush=True)
    if a.json:
        print(json.dumps(summary, default=str), flush=True)
    if res.interrupted:
        print("berthsim sweep: interrupted; the table holds the runs done (the same command resumes)", file=sys.stderr)
        return 130
    return 3 if summary["died"] or summary["errors"] else 0


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    return a == b


def _problems(err: ConfigError) -> int:
    for p in err.problems:
        print(f"berthsim sweep: {cut(p)}", file=sys.stderr)
    return 2


SCHEDULER_SCHEMES = ("tcp", "tls", "inproc", "ucx", "ws", "wss")
"""The URL schemes of a Dask scheduler's address (``distributed.comm``'s backends); an address
without a scheme is tcp."""


def check_scheduler(url: str | None) -> str | None:
    """The problem with ``--scheduler``, or None: a ``SCHEME://HOST:PORT`` with a scheme of
    :data:`SCHEDULER_SCHEMES`, or ``HOST:PORT``."""
    if url is None:
        return None
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "tcp", url
    if scheme not in SCHEDULER_SCHEMES or not rest:
        return (f"--scheduler {cut(url, 80)!r}: expected SCHEME://HOST:PORT with a scheme among "
                f"{', '.join(SCHEDULER_SCHEMES)}")
    return None
