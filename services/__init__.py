"""The services of a run, one module each: what ``kind = "NAME"`` runs (:mod:`protocol.registry`).

A service module provides ``TABLES``, ``validate(config, name)`` and
``build(config, name, period_ns)`` and optional hooks (:mod:`protocol.registry`); what ``build``
returns is run by :mod:`protocol.shell`. Services use :mod:`dynamics` and :mod:`protocol`, do
not import each other and never import :mod:`tools` (the offline tools: report, export,
replay's re-simulation, sweep, analysis).

Services (``kind = "NAME"``):

- :mod:`services.orbiter` — the orbiter, a 6-DOF rigid body in LVLH, free drift or attitude hold;
- :mod:`services.arm` — the Shuttle RMS: the SVDS massless arm, or a multibody arm;
- :mod:`services.contact` — the payload: capture, rigidize, berthing contact, latches, HIL contact;
- :mod:`services.operator` — the scenario's script as ``operator/command`` events;
- :mod:`services.logger` — the recorder: every message into one MCAP file;
- :mod:`services.replay` — the replay source: a log published back onto the bus;
- :mod:`services.viewer` — the live view: a Foxglove WebSocket;
- :mod:`services.fmu` — an FMI 2.0 co-simulation FMU as a service.

Shared, with no ``build``: :mod:`services.commands` (the operator's command vocabulary, for
the operator, arm and contact services), and, for the live view and the tools,
:mod:`services.export_foxglove` (the Foxglove channels), :mod:`services.export_scene` (the 3D
scene) and :mod:`services.ros2_encoding` (the ROS 2 messages and their CDR encoding).
"""
