"""The offline tools: they read logs and configurations and run scenarios, and run as no service.

Each is a ``launch.py`` subcommand or sits beside one. They read logs with
:mod:`protocol.logfile`, may import each other (the sweep takes the run's figures from the
report) and reach a service kind only through the registry of kinds
(:func:`protocol.config.service_module`), never by importing its module; nothing in
:mod:`services`, :mod:`protocol`, :mod:`dynamics` or :mod:`hil` imports them
(``tests/test_imports.py``).

- :mod:`tools.resim` — ``replay``: the configuration of a run made from a log, re-simulation of one service;
- :mod:`tools.report` — ``report``: the run's figures (the main job's summary) and its plots;
- :mod:`tools.export` — ``export``: a log as Parquet or CSV tables, or as a Foxglove or ROS 2 MCAP
  (:mod:`services.export_foxglove`, shared with the live viewer, and :mod:`tools.export_ros2`);
- :mod:`tools.sweep` — ``sweep``: many runs of a scenario over dispersed parameters on Dask, a
  Parquet table and plots; :mod:`tools.dispersion` (the distributions and every run's values)
  and :mod:`tools.envelope` (the envelope edge, sensitivity ranking, plots) beside it;
- :mod:`tools.analysis` — ``analyze``: the source papers' worked examples and the loaded arm's modes;
- :mod:`tools.fmu_export` — ``fmu export``: a service as an FMI 2.0 co-simulation FMU.
"""
