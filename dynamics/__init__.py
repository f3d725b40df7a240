"""Pure physics on numpy/scipy: no I/O, no ZeroMQ, no clock, no globals; imports nothing of the project but ``errors``.

Pinocchio-style: frozen models built once, scratch data per owner, free functions over
both; shapes are checked on entry (:class:`errors.ShapeError`). Sources (seed NNN) are
listed in ``docs/architecture.md``.

Modules (one concept each):

- :mod:`dynamics.spatial` — rotations, quaternions, poses and spatial-vector algebra;
- :mod:`dynamics.rigid_body` — 6-DOF rigid bodies in LVLH: model, state, equations of motion, integrator;
- :mod:`dynamics.orbit` — the circular reference orbit: Clohessy–Wiltshire, gravity gradient;
- :mod:`dynamics.chain` — free-floating or ground-based serial chains: kinematics, mass matrix, dynamics;
- :mod:`dynamics.urdf` — URDF files to chain models;
- :mod:`dynamics.udu` — Saha's UDU^T decomposition and the O(n) solve (seed 001);
- :mod:`dynamics.beam` — Euler–Bernoulli beam links by assumed modes: shapes, inertia invariants, stiffness;
- :mod:`dynamics.flexible` — chains with beam links: elastic coordinates in the chain algorithms (seeds 002, 004);
- :mod:`dynamics.closed_chain` — closed kinematic chains: loops closed by a weld, a point, a revolute or a planar
  pin; constraint forces, drift correction (seed 004);
- :mod:`dynamics.multirate` — a multibody arm between two moving bodies, its mass matrix held over several steps
  (multi-rate, seed 004), the linear stiffness and damping implicit;
- :mod:`dynamics.exgit` — generalized Jacobian J*, H*, Ex-GIT G*, virtual masses (seed 000);
- :mod:`dynamics.impact` — impulsive impact: multibody systems and rigid bodies, r_E and r_f (seed 002), an arm tip
  striking a free body;
- :mod:`dynamics.contact` — compliant contact (Hunt–Crossley, Coulomb), capture envelope, plastic lock;
- :mod:`dynamics.rms` — the Shuttle RMS as the SVDS massless arm (seed 003): kinematics, Jacobian, RMSFM;
- :mod:`dynamics.flexibility` — arm and joint flexibility (RMSFLX) and linearized modes (seed 003);
- :mod:`dynamics.servo` — the SRMS joint servo: rate loop, current limit, motor and gear;
- :mod:`dynamics.loads` — static loads at the nine arm stations (RMLOAD, seed 003);
- :mod:`dynamics.cases` — the seed and reference systems (three rods, Cyril's five bodies, SRMS, ETS-VII)
  and :func:`~dynamics.cases.reference_path` to the package data in ``dynamics/data/``;
- :mod:`dynamics.stewart` — rig kinematics: the 6-6 Stewart platform and a generic servo rig (inverse and forward
  kinematics, limits, workspace), the pose map from two simulated frames to the rig and its clamp toward neutral;
- :mod:`dynamics.mockup` — a rig's mock-ups and their sensing: the docking halves' contact on the rig (a plane, the
  latch guides), the mock-up's weight and inertial load, the 6-axis F/T sensor;
- :mod:`dynamics.modal` — linearised M, K, D at rest about a configuration; modes with joints locked, the
  base held, loops closed: frequencies, mode shapes, modal damping and participation.

Public API
----------
The public names are the modules listed in :data:`__all__` and, in each, the names in that
module's ``__all__``; anything else (a leading underscore, a helper not listed) may change
without notice. :data:`__version__` is the version of this API: a name removed or renamed
keeps a deprecated alias for one minor release that warns (:class:`DeprecationWarning`)
and names its replacement; the changes are listed in ``CHANGELOG.md``. Worked examples:
``docs/dynamics.md``. Submodules are imported when first used (``import dynamics`` alone
imports none).
"""

from __future__ import annotations

import importlib
import sys
import warnings
from types import ModuleType

__version__ = "0.2.0"

__all__ = [
    "__version__",
    "beam",
    "cases",
    "chain",
    "closed_chain",
    "contact",
    "exgit",
    "flexibility",
    "flexible",
    "impact",
    "loads",
    "mockup",
    "modal",
    "multirate",
    "orbit",
    "rigid_body",
    "rms",
    "servo",
    "spatial",
    "stewart",
    "udu",
    "urdf",
]


def __getattr__(name: str) -> ModuleType:
    """``dynamics.chain`` etc. without importing the submodule first (PEP 562)."""
    if name in __all__ and name != "__version__":
        return importlib.import_module(f"dynamics.{name}")
    raise AttributeError(f"module 'dynamics' has no attribute {name!r}")


def kernel_module(name: str) -> ModuleType:
    """The compiled-kernel module ``dynamics.<name>`` (numba), imported on first use and then looked up in
    ``sys.modules``: importing numba takes ~0.5 s, which a process that never steps the kernel's model (a
    configuration check) should not pay, and an import statement's own lookup costs more than a kernel's call.

    A module another thread is still importing (in ``sys.modules`` but not yet whole: a device's build runs in a
    thread while the models build, :func:`protocol.registry.build_members`, and one kernel module imports another)
    is waited for, as an import statement waits: through :func:`importlib.import_module`, which takes the module's
    import lock.

    Raises
    ------
    ImportError
        If there is no such module (or numba is missing).
    """
    mod = sys.modules.get(f"dynamics.{name}")
    if mod is None or getattr(getattr(mod, "__spec__", None), "_initializing", False):
        return importlib.import_module(f"dynamics.{name}")
    return mod


def _deprecated(old: str, new: str) -> None:
    """Warn that the public name ``old`` is deprecated in favour of ``new`` (removed in the next minor release)."""
    warnings.warn(f"{old} is deprecated since dynamics {__version__}: use {new} (the alias goes in the next minor "
                  "release)", DeprecationWarning, stacklevel=3)
