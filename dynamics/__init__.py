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
- :mod:`dynamics.closed_chain` — closed kinematic chains: loop closure, constraint forces, drift correction (seed 004);
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
  and :func:`~dynamics.cases.reference_path` to the package data in ``dynamics/data/``.
"""
