"""The services of a run, one module each, and the offline tools that work on their logs.

A service module provides ``TABLES``, ``OPTIONS``, ``validate(config, name)`` and
``build(config, name, period_ns)`` (:mod:`protocol.config`); what ``build`` returns is run
by :mod:`protocol.shell`. Services use :mod:`dynamics` and :mod:`protocol` and do not import
each other; the offline tools read logs with :mod:`protocol.logfile`, may share their
computations (the sweep takes the run's figures from the report) and import no service module.

Services (``kind = "NAME"``):

- :mod:`services.orbiter` — the orbiter, a 6-DOF rigid body in LVLH, free drift or attitude hold;
- :mod:`services.arm` — the Shuttle RMS: the SVDS massless arm, or a multibody arm;
- :mod:`services.contact` — the payload: capture, rigidize, berthing contact, latches, HIL contact;
- :mod:`services.operator` — the scenario's script as ``operator/command`` events;
- :mod:`services.logger` — the recorder: every message into one MCAP file;
- :mod:`services.replay` — the replay source: a log published back onto the bus.

Offline tools (``launch.py`` subcommands):

- :mod:`services.resim` — ``replay``: the configuration of a run made from a log, re-simulation of one service;
- :mod:`services.report` — ``report``: the run's figures (the main job's summary) and its plots;
- :mod:`services.export` — ``export``: a log as Parquet or CSV tables;
- :mod:`services.sweep` — ``sweep``: many runs of a scenario over dispersed parameters on Dask, a
  Parquet table and plots; :mod:`services.dispersion` (the distributions and every run's values)
  and :mod:`services.envelope` (the envelope edge, sensitivity ranking, plots) beside it;
- :mod:`services.analysis` — ``analyze``: the source papers' worked examples.
"""
