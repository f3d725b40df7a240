"""Hardware in the loop: the ``hil`` service, its serial protocol, its device and the rig emulator.

Modules (one concept each):

- :mod:`hil.framing` — the native protocol: COBS frames, CRC-16/CCITT-FALSE, messages,
  the incremental decoder (``PROTOCOL.md`` is the byte-exact description);
- :mod:`hil.encoders` — other rig formats: a binary 6-axis frame, ASCII axis strings;
- :mod:`hil.link` — :class:`~hil.link.SerialLink` over any pyserial URL, line budget,
  link statistics;
- rig kinematics (the Stewart platform, the servo rig, the pose map and its clamp) are pure
  float kernels and live in :mod:`dynamics.stewart` (``hil.stewart`` is a deprecated alias);
- :mod:`hil.safety` — the rig state machine, watchdogs, guards, the ramp to neutral;
- :mod:`hil.delay` — delay estimate, prediction, passivity controller, impact restitution;
- :mod:`hil.config` — the ``[hil]`` table, shared by the bridge and the emulator;
- :mod:`hil.bridge` — the service model (``kind = "hil.bridge"``);
- :mod:`hil.device` — the rig as the bridge's device: the link, the protocol backend on it,
  the lockstep wait for replies with its resends (the service's waits on the wall clock);
- :mod:`hil.rig` — the emulated rig: firmware state machine, actuators, force/torque sensor
  on a contact plane, stepped by explicit times (no I/O);
- :mod:`hil.emulator` — the rig emulator's plumbing: transport channel, lockstep port,
  realtime loop, the process (``python -m hil.emulator``).
"""
