"""What the tests, the benchmarks and the toy scenarios share (installed, so configs and ``bench/`` may use it).

Nothing outside ``tests/`` imports ``tests``; what they and ``bench/`` both need lives here.
It builds on :mod:`protocol` and :mod:`dynamics` only, as a service would.

Modules (one concept each):

- :mod:`testkit.toys` — toy services: a chain of point masses joined by springs, one mass
  per service (``kind = "testkit.toys"``, ``configs/toy_*.toml``), with sink, source,
  malformed-message injector and sample-forger roles;
- :mod:`testkit.ports` — fresh bus URLs: free tcp ports on the loopback, new ipc/inproc names;
- :mod:`testkit.procs` — a run's processes as ``/proc`` shows them: command lines (a worker
  forked from the zygote shows its own as a title) and parents;
- :mod:`testkit.pin_oracle` — Pinocchio (the ``test`` extra) as an independent oracle for the
  chain dynamics: models from the same data, conversions between its conventions and ours.
"""
