"""berthsim's co-simulation runtime (DESIGN §2–4); imports nothing of the project but ``errors``.

- :mod:`protocol.service`  the service contract: ports, Sample, Inputs, ServiceModel
- :mod:`protocol.messages` envelope, frame layout and the topic schema table
- :mod:`protocol.codec`    validating msgpack encode / decode
- :mod:`protocol.timebase` integer-ns time, rates -> periods, base tick
- :mod:`protocol.stepping` the multi-rate input rule (lockstep) and realtime selection
- :mod:`protocol.coupling` coupling steps: what an output port publishes, at which instants
- :mod:`protocol.provenance` which samples a run accepts (producer, coupling grid, order)
- :mod:`protocol.stability` the stiff couplings' stability limits for ``check``
- :mod:`protocol.scheduler` the members of one process: lockstep stepping, publishing, snapshots
- :mod:`protocol.realtime` real-time scheduling: priorities, affinity, admission check
- :mod:`protocol.bus`      the bus interface and its backends (ZeroMQ PUB/SUB mesh and ROUTER/DEALER, in memory)
- :mod:`protocol.security` CurveZMQ keys and the allow list
- :mod:`protocol.shell`    runs one model / sink / source: handshake, lifecycle, stepping, stats
- :mod:`protocol.config`   the TOML layout and validation, the run plan handed to the workers
- :mod:`protocol.registry` the service kinds: kind -> module, the contract, capabilities, table owners
- :mod:`protocol.params`   a kind's declared parameters: a frozen dataclass, units per field, parsed once
- :mod:`protocol.clocksync` a follower host's estimate of the master's clock
- :mod:`protocol.launcher` starts, supervises and stops the services of a run
- :mod:`protocol.logfile`  the MCAP log format and its one reader (logs hold wire bytes)
- :mod:`protocol.logrecover` rebuilds the log of a killed run
"""
