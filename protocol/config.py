"""Run configuration: TOML layout, service modules, and validation before anything starts.

Layout
------
::

    [sim]                       # the runtime's own settings (all optional)
    mode = "lockstep"           # "lockstep" | "realtime"
    duration = 10.0             # s of simulation time; 0 = until stopped
    speed = 0.0                 # lockstep pacing, real-time factor (1.0 = wall pace, 0 = max)
    transport = "ipc"           # "ipc" | "tcp" | "inproc" (inproc = every service in one process)
    bus = "tcp://10.0.0.1:5550" # base URL (control port; PUBs on the next ports); required for tcp
    seed = 0                    # for models that draw random numbers (0 … 2**64 - 1)
    base_tick_ns = 1000000      # optional declared base tick (default gcd of the periods)
    overrun_policy = "continue" # realtime: "continue" | "freeze" | "stop" when a service overruns
                                # overrun_limit consecutive steps or its inputs grow older than max_input_age
    overrun_limit = 10          # realtime: consecutive overruns that trigger the policy
    max_input_age = 0.0         # realtime: s; an input older than this triggers the policy (0 = no bound)
    max_lag = 2.0               # realtime: s a service may fall behind the wall clock before it stops (0 = no bound)
    rt_priority = 10            # realtime: SCHED_FIFO priority of the slowest process; faster ones get
                                # higher ones, rate-monotonically (protocol.realtime); 0 = normal scheduling
    freeze_park_after = 2.0     # realtime: s a frozen run's rig holds before it parks
    freeze_stop_after = 5.0     # realtime: s a run frozen by an overload waits for a resume (SIGUSR2)
                                # before it stops, failed (0 = waits for the operator)
    ready_timeout = 60.0        # s to wait for every service to be ready (> 0)
    stats_period = 1.0          # s (wall) between sim/stats messages (> 0)
    heartbeat_timeout = 5.0     # s without the launcher before a service gives up, and without a host
                                # (its services, its launcher) before the master freezes or stops the run (> 0)
    stall_timeout = 10.0        # lockstep: s (wall) a service may wait on an input before it stops the run,
                                # naming the input, its producer and the last sample accepted (> 0)
    clock = "sync"              # several hosts: "sync" follows the master's clock from the control channel's
                                # round trips (protocol.clocksync); "ptp": the hosts share a PTP-disciplined clock
    log = "run.mcap"            # set by ``launch.py run --log``; read by the logger
    overwrite = false           # ``launch.py run --overwrite``: the logger may replace an existing log
    command_line = "..."        # set by ``launch.py``: the command that started the run (the logger records it)
    config_file = "..."         # set by ``launch.py``: the config file (the logger attaches its text)
    hosts = {a = "10.0.0.1", b = "10.0.0.2"}  # tcp, several machines: address of each host label
    processes = {physics = ["orbiter", "arm", "contact"]}  # process groups (or ``process`` per service)

    [security]                  # CurveZMQ, required for tcp on a non-loopback address
    keys_dir = "keys"           # see protocol.security
    server = "server"
    client = "client"
    allowed = ["client"]

    [services.NAME]             # one per service process
    kind = "orbiter"            # services/orbiter.py, or a dotted module path ("testkit.toys")
    rate_hz = 100               # step rate [Hz]; periods must share a base tick and divide the longest
    coupling_hz = 100           # rate at which its outputs are published (protocol.coupling): one number
                                # for every output, or a table {"topic" = Hz}; each a whole divisor of
                                # rate_hz. Default per output: its fastest consumer's rate
    log_full_rate = false       # also publish every step of each state and flow output on TOPIC/full
    cpus = [1]                  # realtime: pin its process to these CPUs (a process group: the same for all)
    process = "physics"         # run in the OS process "physics" with the other services that name it
                                # (a process group: one scheduler, samples handed over in memory);
                                # default: a process of its own, named after the service
    host = "a"                  # optional label of the machine it runs on (informative)
    endpoint = "tcp://10.0.0.2:5560"  # tcp: this service's PUB. Default: port = sim.bus port + 2 + index
                                #      (config order), address = sim.hosts[host] if given, else the bus host
    # ... plus the keys the service module lists in OPTIONS

    [<table>]                   # model parameters, owned by a service module ([orbiter], [arm], ...)

Service modules
---------------
``kind = "X"`` names a kind of :mod:`protocol.registry` (the shipped ones, an installed
entry point's, or a dotted module path), the one place that imports a kind's module. The
kinds the project ships that a tool may rebuild are :data:`KINDS` (:func:`registered_kind`): what a log's
``config.json`` may name when a tool rebuilds a service from it (``replay --resim``), which
imports nothing else. The module provides::

    TABLES: tuple[str, ...]                       # top-level tables it owns / reads
    TABLE_KEYS: dict[str, dict[str, tuple]]      # table -> key -> (kind, default), the tables it owns
    def validate(config: dict, name: str) -> list[str]   # problems, [] if fine
    def build(config: dict, name: str, period_ns: int) -> ServiceModel | Sink | Source

``validate`` checks each table of ``TABLE_KEYS`` with :func:`check_table` — the one validator of
every table, whose problems name the full key (``arm.assumed.boom_damping``) and the
value — and then its rules across keys as plain code, each problem naming its key too.
Optionally ``OPTIONS: dict[str, kind]`` (kinds of :func:`check_value`), the extra keys it
accepts in ``[services.NAME]`` (checked here, with :data:`SERVICE_KEYS`, before the module's
``validate`` runs), and ``def ports(config, name) -> ServicePorts``, the
service's role and ports (:class:`protocol.service.ServicePorts`; called once ``validate``
found nothing). With them, before anything starts: two services producing one topic are
refused, and, when every service's module has ``ports``, each output's coupling period is
computed (:func:`protocol.coupling.coupling_periods`) and checked — the run must not wait on
itself (:func:`protocol.coupling.check_schedule`) and no stiff coupling may be coupled more
slowly than it can bear (``stiff_couplings`` of the module, :mod:`protocol.stability`).
``validate`` must not start anything. ``build`` runs in the service's own process (or thread
with ``--inprocess``); what it returns is run by :mod:`protocol.shell` (a
:class:`protocol.service.ServiceModel`, or a sink / source as documented there).

Validation (:func:`validate`) collects *every* problem — unknown keys, wrong types,
bad enum values, rates that do not divide, times beyond int64 ns (duration, periods,
timeouts), timeouts that are not positive, a seed that is not an unsigned 64-bit int,
two producers of one topic, missing endpoints or keys, tables no service claims,
problems reported by the service modules, ipc endpoint paths longer than a Unix socket
path can be, ``freeze_park_after`` not before ``freeze_stop_after``, empty process groups —
and raises one :class:`errors.ConfigError` whose ``problems`` lists them all, each line cut
to :data:`MAX_PROBLEM_CHARS`. :func:`load` reads only regular UTF-8 files.

Limits
------
Everything a file can ask for is bounded before it is used (:data:`MAX_CONFIG_BYTES`,
:data:`MAX_DEPTH` levels of tables and arrays, :data:`MAX_ARRAY` items per array; a value
is quoted in a problem at most :data:`MAX_VALUE_CHARS` long, a problem at most
:data:`MAX_PROBLEM_CHARS`), and an ipc endpoint's path fits a Unix socket address
(:data:`IPC_PATH_MAX` bytes, with ``$TMPDIR`` as this process sees it when ``sim.bus`` is
not given: :func:`ipc_endpoint_paths`).
"""

from __future__ import annotations

import math
import os
import pickle
import reprlib
import stat
import tempfile
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from errors import ConfigError
from protocol.registry import BUILTIN, kind_module, table_keys
from protocol.service import ServicePorts
from protocol.timebase import MAX_NS, align_up, check_rates, check_seconds, period_ns, seconds_to_ns

if TYPE_CHECKING:
    from protocol.security import Security
# protocol.bus and protocol.security (ZeroMQ, numpy) are imported where they are used, so that
# load() and check_sweep_size() refuse a file at once (launch.py check of a sweep file).

__all__ = ["SIM_KEYS", "SERVICE_KEYS", "INPROCESS", "KINDS", "MAX_SWEEP_RUNS", "ServiceSpec", "RunPlan",
           "check_limits", "check_sweep_size", "check_table", "check_value", "check_values", "cut",
           "ipc_endpoint_paths", "load", "register_schemas", "registered_kind", "service_module", "show",
           "with_overrides", "peers_of", "processes_of", "read_plan", "sim_values", "table_values", "validate",
           "write_plan"]

Num = (int, float)

SIM_KEYS: dict[str, tuple[Any, Any]] = {
    # key: (types, default)
    "mode": (("lockstep", "realtime"), "lockstep"),
    "duration": (Num, 0.0),
    "speed": (Num, 0.0),
    "transport": (("ipc", "tcp", "inproc"), "ipc"),
    "bus": (str, None),
    "seed": (int, 0),
    "base_tick_ns": (int, None),
    "overrun_policy": (("continue", "freeze", "stop"), "continue"),
    "overrun_limit": (int, 10),
    "max_input_age": (Num, 0.0),
    "max_lag": (Num, 2.0),
    "freeze_park_after": (Num, 2.0),
    "freeze_stop_after": (Num, 5.0),
    "ready_timeout": (Num, 60.0),
    "stats_period": (Num, 1.0),
    "heartbeat_timeout": (Num, 5.0),
    "stall_timeout": (Num, 10.0),
    "log": (str, None),
    "overwrite": (bool, False),
    "command_line": (str, None),
    "config_file": (str, None),
    "hosts": (dict, None),
    "rt_priority": (int, 10),
    "processes": (dict, None),
    "clock": (("sync", "ptp"), "sync"),
}

SERVICE_KEYS: dict[str, Any] = {"kind": str, "rate_hz": Num, "host": str, "endpoint": str,
                                "coupling_hz": (int, float, dict), "log_full_rate": bool, "process": str,
                                "cpus": list}
RUNTIME_TABLES = ("sim", "services", "security")


@dataclass(frozen=True)
class ServiceSpec:
    """One configured service."""

    name: str
    kind: str
    module: str
    period_ns: int
    host: str | None = None
    coupling_ns: dict[str, int] = field(default_factory=dict)
    """Configured coupling periods [ns] by output topic, ``"*"`` for every output (``coupling_hz``)."""
    full_rate: bool = False
    """``log_full_rate``: every step of each state and flow output also goes to ``TOPIC/full``."""
    cpus: tuple[int, ...] = ()
    """Realtime: the CPUs its process is pinned to (empty: any)."""


@dataclass
class RunPlan:
    """A validated configuration, ready to launch."""

    config: dict[str, Any]
    path: Path | None
    sim: dict[str, Any]
    services: dict[str, ServiceSpec]
    base_tick_ns: int
    security: Security | None = None
    only: tuple[str, ...] = field(default_factory=tuple)
    processes: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """OS process name -> its services, in config order (:func:`processes_of`)."""

    def process_of(self, service: str) -> str:
        """The name of the process that runs ``service``."""
        return next(p for p, members in self.processes.items() if service in members)

    @property
    def longest_period_ns(self) -> int:
        """The longest service period (every period divides it). [ns]"""
        return max(s.period_ns for s in self.services.values())

    @property
    def duration_ns(self) -> int:
        """``sim.duration`` in ns (0 = until stopped)."""
        return seconds_to_ns(self.sim["duration"], "sim.duration")


PLAN_FILE = "plan.pickle"
"""The name of the run plan a launcher writes for its worker processes (:func:`write_plan`)."""


def write_plan(plan: RunPlan, folder: str | os.PathLike[str]) -> Path:
    """Write ``plan`` once for the worker processes of a launcher: they read it (:func:`read_plan`) instead of
    loading, overriding and validating the config again, so every process runs the one validated plan.

    The file is a pickle, created with mode 0600 (never replaced) in ``folder``, the launcher's private folder
    (mode 0700, :func:`tempfile.mkdtemp`): only the user who runs the launcher can write what its workers
    load, as with the launcher's own code.

    Returns
    -------
    Path
        The file written.

    Raises
    ------
    ConfigError
        If it cannot be written (naming the path and the reason).
    """
    path = Path(folder) / PLAN_FILE
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            pickle.dump(plan, f, protocol=pickle.HIGHEST_PROTOCOL)
    except OSError as err:
        raise ConfigError(f"run plan {str(path)!r}: cannot write: {err.strerror or err}") from err
    return path


def read_plan(path: str | os.PathLike[str]) -> RunPlan:
    """The run plan a launcher wrote for its workers (:func:`write_plan`).

    Raises
    ------
    ConfigError
        If the file cannot be read or does not hold a :class:`RunPlan` (naming the path).
    """
    try:
        with open(path, "rb") as f:
            plan = pickle.load(f)  # noqa: S301 - the launcher's own file, in its private folder (write_plan)
    except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ImportError) as err:
        raise ConfigError(f"run plan {str(path)!r}: cannot read: {type(err).__name__}: {err}") from err
    if not isinstance(plan, RunPlan):
        raise ConfigError(f"run plan {str(path)!r}: holds a {type(plan).__name__}, not a RunPlan")
    return plan


MAX_CONFIG_BYTES = 16 << 20
"""The largest config file :func:`load` reads (a scenario is a few kB). [bytes]"""
MAX_DEPTH = 16
"""Levels of nested tables and arrays a config may have (the scenarios use 4; a 3×3 matrix in a
table of a table is 4)."""
MAX_ARRAY = 100_000
"""Items an array of a config may hold (a sweep's grid of values at most :data:`MAX_ARRAY`
points, as many as its runs)."""
MAX_VALUE_CHARS = 80
"""A value quoted in a problem is cut to this many characters (``reprlib``). [chars]"""
MAX_PROBLEM_CHARS = 300
"""A problem line is cut to this many characters. [chars]"""
IPC_PATH_MAX = 107
"""The longest ipc endpoint path: a Unix socket address's ``sun_path`` is 108 bytes on Linux,
with its terminating NUL. [bytes]"""

_SHORT = reprlib.Repr()  # (keyword arguments only from Python 3.12)
_SHORT.maxlevel, _SHORT.maxlist, _SHORT.maxtuple, _SHORT.maxdict, _SHORT.maxset = 3, 6, 6, 6, 6
_SHORT.maxstring, _SHORT.maxother, _SHORT.maxlong = 60, 60, 40


def show(value: Any) -> str:
    """``repr(value)`` bounded: at most :data:`MAX_VALUE_CHARS` characters, long lists and strings
    elided (``[1.0, 1.0, ...]``), never built in full."""
    return cut(_SHORT.repr(value), MAX_VALUE_CHARS)


def cut(text: str, limit: int = MAX_PROBLEM_CHARS) -> str:
    """``text`` cut to ``limit`` characters (``… (N chars)`` at the end when cut)."""
    if len(text) <= limit:
        return text
    tail = f"… ({len(text)} chars)"
    return text[:max(limit - len(tail), 0)] + tail


def check_limits(data: Any, where: str) -> str | None:
    """The first limit a parsed TOML document exceeds, or None: nesting deeper than
    :data:`MAX_DEPTH`, an array longer than :data:`MAX_ARRAY`. Iterative (no recursion);
    the problem names the dotted key (``orbiter.inertia``) and the limit."""
    stack: list[tuple[Any, str, int]] = [(data, "", 0)]
    while stack:
        node, key, depth = stack.pop()
        if isinstance(node, dict):
            items: Any = ((f"{key}.{k}" if key else str(k), v) for k, v in node.items())
        elif isinstance(node, list):
            if len(node) > MAX_ARRAY:
                return f"{where}: {key or 'the document'}: an array of {len(node)} items, more than {MAX_ARRAY}"
            items = ((f"{key}[{i}]", v) for i, v in enumerate(node))
        else:
            continue
        if depth >= MAX_DEPTH:
            return f"{where}: {cut(key, 60) or 'the document'}: nested deeper than {MAX_DEPTH} levels"
        stack.extend((v, k, depth + 1) for k, v in items if isinstance(v, (dict, list)))
    return None


MAX_SWEEP_RUNS = 100_000
"""The most runs a sweep file may ask for, and the most points of its grid (``[sweep] runs``,
the product of its grid parameters' ``n`` or ``values``). The sweep's process holds a row of
about 2.5 kB per run (measured: 34 figure columns and four parameters), so about 250 MB at
the cap, and the run loop never holds more than the cluster's threads' worth of runs; at
540-1,070 runs per hour on two workers the cap is 4-8 days of runs."""


def check_sweep_size(raw: Mapping[str, Any]) -> list[str]:
    """Problems of a parsed sweep file's size, read from the numbers alone (nothing is
    materialised: a grid of 10⁹ points is refused before it exists): ``sweep.runs``, each
    grid parameter's ``n`` or ``values``, and their product, at most :data:`MAX_SWEEP_RUNS`.
    One line each, naming the key and the limit."""
    out: list[str] = []
    sweep = raw.get("sweep")
    runs = sweep.get("runs") if isinstance(sweep, Mapping) else None
    if isinstance(runs, int) and not isinstance(runs, bool) and runs > MAX_SWEEP_RUNS:
        out.append(f"sweep.runs: {runs} runs, more than {MAX_SWEEP_RUNS} (about 2.5 kB per run in the sweep's "
                   "process; split the sweep)")
    params = raw.get("parameter")
    points = 1
    for i, t in enumerate(params if isinstance(params, list) else []):
        if not isinstance(t, Mapping) or t.get("distribution") != "grid":
            continue
        name = t.get("name")
        where = f"parameter {cut(name, 40)!r}" if isinstance(name, str) else f"parameter[{i}]"
        values, n = t.get("values"), t.get("n")
        size = len(values) if isinstance(values, list) else n if isinstance(n, int) and not isinstance(n, bool) else 1
        if size > MAX_SWEEP_RUNS:
            key = "values" if isinstance(values, list) else "n"
            out.append(f"{where}.{key}: a grid of {size} points, more than {MAX_SWEEP_RUNS}")
        points *= max(size, 1)
    if points > MAX_SWEEP_RUNS and not any(".n:" in p or ".values:" in p for p in out):
        out.append(f"[[parameter]]: the grid parameters span {points} points, more than {MAX_SWEEP_RUNS}")
    return out


def load(path: str | Path) -> dict[str, Any]:
    """Read a TOML config: a regular, readable UTF-8 file of at most :data:`MAX_CONFIG_BYTES`.

    Anything else is refused before it is read: a directory, a device (``/dev/zero``), a
    FIFO (which would wait for a writer), a socket.

    Raises
    ------
    ConfigError
        Naming the file and what is wrong with it (unreadable, not a regular file, too
        large, a byte that is not UTF-8 and where, the TOML error).
    """
    p = Path(path)
    try:  # O_NONBLOCK: opening a FIFO does not wait for a writer; a regular file ignores it
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except OSError as err:
        raise ConfigError(f"config {str(p)!r}: cannot read: {err.strerror or err}") from err
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            what = ("a directory" if stat.S_ISDIR(st.st_mode) else "a FIFO" if stat.S_ISFIFO(st.st_mode)
                    else "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) else "not a file")
            raise ConfigError(f"config {str(p)!r}: not a regular file ({what})")
        if st.st_size > MAX_CONFIG_BYTES:
            raise ConfigError(f"config {str(p)!r}: {st.st_size} bytes, more than {MAX_CONFIG_BYTES} (not a scenario)")
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(MAX_CONFIG_BYTES + 1)
    except OSError as err:
        raise ConfigError(f"config {str(p)!r}: cannot read: {err.strerror or err}") from err
    finally:
        os.close(fd)
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(f"config {str(p)!r}: more than {MAX_CONFIG_BYTES} bytes (not a scenario)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data[:err.start].count(b"\n") + 1
        raise ConfigError(f"config {str(p)!r}: not UTF-8: byte 0x{data[err.start]:02x} at line {line}, "
                          f"offset {err.start}") from err
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"config {str(p)!r}: not valid TOML: {cut(str(err))}") from err
    except RecursionError as err:  # tomllib parses nested arrays and inline tables recursively
        raise ConfigError(f"config {str(p)!r}: nested deeper than {MAX_DEPTH} levels (tables and arrays)") from err
    if (bad := check_limits(doc, f"config {str(p)!r}")) is not None:
        raise ConfigError(bad)
    return doc


KINDS = tuple(k for k, v in BUILTIN.items() if "from_log" in v.capabilities)
"""The service kinds the project ships that run only the project's code (capability ``from_log`` in
:data:`protocol.registry.BUILTIN`): the only kinds a tool builds when the configuration comes from a log
(:func:`registered_kind`). ``fmu`` is not one: it loads the binary its configuration names, so
a logged FMU service is re-run only from a config file the user gives (``--config``)."""


def registered_kind(kind: Any, where: str) -> str | None:
    """The problem with a service kind that does not come from a config file the user gave
    (a log's ``config.json``), or None: it must be one of :data:`KINDS`, so that opening a log
    never imports a module the log names."""
    if isinstance(kind, str) and kind in KINDS:
        return None
    return f"{where}: kind {show(kind)} is not a service kind berthsim ships ({', '.join(KINDS)})"


def service_module(kind: str) -> ModuleType:
    """Import the module of a service kind: :func:`protocol.registry.kind_module` (kept here for the tools).

    Raises
    ------
    ConfigError
        If the kind is unknown, cannot be imported, or its module does not provide the contract.
    """
    return kind_module(kind)


def register_schemas(config: Mapping[str, Any], skip: tuple[str, ...] = ("logger", "replay")) -> None:
    """Make every topic schema of the run known in this process: import each service's kind module
    through the registry (which registers its ``TOPICS``) and call its ``schemas(config, name)`` when it has one
    (the topics a kind makes from its configuration, such as an FMU's output). Called where topics
    are decoded: each worker process before it builds its services, and the logger. A kind that
    cannot be imported is left to :func:`validate` to report.
    """
    services = config.get("services", {})
    mods = []
    for name, svc in services.items():
        kind = svc.get("kind") if isinstance(svc, Mapping) else None
        if not isinstance(kind, str) or kind in skip:
            continue
        try:
            mods.append((name, service_module(kind)))
        except ConfigError:
            continue
    for name, mod in mods:
        hook = getattr(mod, "schemas", None)
        if callable(hook):
            hook(config, name)


def _type_name(types: Any) -> str:
    if isinstance(types, tuple):
        return " or ".join(getattr(t, "__name__", str(t)) for t in types)
    return getattr(types, "__name__", str(types))


def _number(x: Any) -> bool:
    """A finite int or float (not a bool)."""
    return isinstance(x, Num) and not isinstance(x, bool) and math.isfinite(x)


def _is_vec(value: Any, n: int) -> bool:
    return isinstance(value, list) and len(value) == n and all(_number(x) for x in value)


def _bound(x: float) -> str:
    return f"{x:g}" if math.isfinite(x) else ("∞" if x > 0 else "-∞")


def _interval(lo: float, hi: float) -> str:
    """``>= lo``, ``<= hi`` or ``in [lo, hi]``."""
    if math.isinf(hi):
        return f">= {_bound(lo)}"
    return f"<= {_bound(hi)}" if math.isinf(lo) else f"in [{_bound(lo)}, {_bound(hi)}]"


def check_value(where: str, value: Any, kind: Any) -> str | None:
    """The problem with one config value of the given kind, or None.

    Parameters
    ----------
    where : str
        The value's full key (``"arm.assumed.boom_damping"``), named in the problem.
    value : Any
        The value as TOML gave it.
    kind : Any
        What it must be:

        - a type or tuple of types (``int``, ``(int, float)``, ``str``, ``bool``, ``list``, ``dict``):
          a float must be finite, ``bool`` is accepted only where listed;
        - a tuple of allowed strings (an enum): ``("rigid", "flexible")``;
        - ``"positive"`` (a finite number > 0), ``"nonnegative"`` (>= 0),
          ``("range", lo, hi)`` (a finite number in [lo, hi]; a bound may be ±inf),
          ``("int", lo, hi)`` (an integer in [lo, hi]);
        - ``("vec", n)``: a list of n finite numbers; ``("vec", n, item)``: each also of kind ``item``;
        - ``("list", item)``: a list whose every element is of kind ``item``;
        - ``"inertia"`` (3 principal moments or 3×3 rows), ``"list"`` (any list, checked by the
          caller), ``"table"`` (any sub-table, checked by the caller);
        - a mapping key -> (kind, default): a sub-table checked by :func:`check_values` (only
          whether it is a table here).

    Returns
    -------
    str or None
        ``"<where>: expected ..., got <value!r>"``.
    """
    if isinstance(kind, Mapping):
        return None if isinstance(value, dict) else f"{where}: expected a table, got {show(value)}"
    if isinstance(kind, tuple) and kind and kind[0] == "vec":
        n = kind[1]
        if not _is_vec(value, n):
            return f"{where}: expected a list of {n} finite numbers, got {show(value)}"
        if len(kind) > 2 and any(check_value(where, x, kind[2]) for x in value):
            return f"{where}: expected {n} values {_KIND_WORDS.get(kind[2], str(kind[2]))}, got {show(value)}"
        return None
    if isinstance(kind, tuple) and len(kind) == 2 and kind[0] == "list":
        if not isinstance(value, list):
            return f"{where}: expected a list, got {show(value)}"
        return next((p for i, x in enumerate(value) if (p := check_value(f"{where}[{i}]", x, kind[1]))), None)
    if isinstance(kind, tuple) and len(kind) == 3 and kind[0] in ("range", "int"):
        _, lo, hi = kind
        if kind[0] == "int":
            if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
                return f"{where}: expected an integer {_interval(lo, hi)}, got {show(value)}"
        elif not _number(value) or not lo <= value <= hi:
            return f"{where}: expected a finite number {_interval(lo, hi)}, got {show(value)}"
        return None
    if kind in ("positive", "nonnegative"):
        if not _number(value) or not (value > 0 if kind == "positive" else value >= 0):
            return f"{where}: expected a finite number {'> 0' if kind == 'positive' else '>= 0'}, got {show(value)}"
        return None
    if kind == "inertia":
        if not (_is_vec(value, 3) or (isinstance(value, list) and len(value) == 3
                                      and all(_is_vec(r, 3) for r in value))):
            return f"{where}: expected 3 principal moments or 3×3 rows (kg·m²), got {show(value)}"
        return None
    if kind in ("list", "table"):
        typ = list if kind == "list" else dict
        return None if isinstance(value, typ) else f"{where}: expected a {typ.__name__}, got {show(value)}"
    if isinstance(kind, tuple) and kind and all(isinstance(k, str) for k in kind):
        return None if value in kind else f"{where}: expected one of {', '.join(kind)}, got {show(value)}"
    if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
        return f"{where}: expected {_type_name(kind)}, got {show(value)}"
    if not isinstance(value, kind) or (isinstance(value, float) and not math.isfinite(value)):
        numeric = {int, float} & set(kind if isinstance(kind, tuple) else (kind,))
        return f"{where}: expected {'a finite ' if numeric else ''}{_type_name(kind)}, got {show(value)}"
    return None


_KIND_WORDS = {"positive": "> 0", "nonnegative": ">= 0"}


def check_values(values: Mapping[str, Any], where: str, keys: Mapping[str, tuple[Any, Any]],
                 problems: list[str]) -> dict[str, Any]:
    """A table's values with defaults filled in; appends a line to ``problems`` per unknown or bad key.

    Parameters
    ----------
    values : Mapping
        The table as TOML gave it.
    where : str
        Its full key (``"arm"``, ``"contact.surfaces[2]"``), the prefix of every problem.
    keys : Mapping
        key -> (kind, default), ``kind`` as in :func:`check_value`. A mapping kind is a
        sub-table: checked the same way under ``where.key`` (its default is ignored; the
        sub-table's own defaults fill it in).
    problems : list of str
        Appended to: one line per unknown or bad key, naming ``where.key`` and the value.

    Returns
    -------
    dict
        Every key of ``keys``: the given value if good, else the default (so that checks
        across keys after this one run on sound values; the problem is already listed).
    """
    for key in values:
        if key not in keys:
            problems.append(f"{where}.{key}: unknown key (known: {', '.join(keys)})")
    out: dict[str, Any] = {}
    for key, (kind, default) in keys.items():
        if isinstance(kind, Mapping):
            sub = values.get(key, {})
            if key in values and (bad := check_value(f"{where}.{key}", sub, kind)):
                problems.append(bad)
                sub = {}
            out[key] = check_values(sub, f"{where}.{key}", kind, problems)
        elif key not in values:
            out[key] = default
        elif (bad := check_value(f"{where}.{key}", values[key], kind)):
            problems.append(bad)
            out[key] = default
        else:
            out[key] = values[key]
    return out


def sim_values(config: Mapping[str, Any]) -> dict[str, Any]:
    """``[sim]`` with the runtime's defaults (:data:`SIM_KEYS`) where a key is missing: what a service reads of the
    run's settings, never with a default of its own. Not a check: :func:`validate` reports the table's problems."""
    raw = config.get("sim")
    return {**{k: default for k, (_, default) in SIM_KEYS.items()}, **(raw if isinstance(raw, Mapping) else {})}


def table_values(config: Mapping[str, Any], table: str) -> dict[str, Any]:
    """Values of another service's table as its owner reads them: ``[table]`` checked against the owner kind's own
    keys and defaults (:func:`protocol.registry.table_keys`), so that a reader never copies them. Problems are the
    owner's to report (its ``validate``); here a bad value reads as its default.

    Raises
    ------
    ConfigError
        If no service kind declares the table.
    """
    return check_table(config, table, table_keys(table, config)[1], [])


def check_table(config: Mapping[str, Any], table: str, keys: Mapping[str, tuple[Any, Any]],
                problems: list[str]) -> dict[str, Any]:
    """Values of ``[table]`` with defaults filled in; appends a line to ``problems`` per bad key.

    The one validator of every configuration table (the runtime's, each service's): see
    :func:`check_value` for the kinds and :func:`check_values` for the rules.

    Parameters
    ----------
    config : Mapping
        The parsed TOML (or any mapping holding ``table``).
    table : str
        Name of the table to check, dotted for a nested one (``"services.log"``,
        ``"contact.latch"``); missing = empty (every default).
    keys : Mapping
        key -> (kind, default) (:func:`check_value`; a mapping kind is a sub-table).
    problems : list of str
        Appended to: one line per unknown or bad key, naming ``table.key`` and the value.

    Returns
    -------
    dict
        Every key of ``keys``: the given value, or the default when it is missing or bad.
    """
    raw: Any = config
    for part in table.split("."):
        raw = raw.get(part, {}) if isinstance(raw, Mapping) else {}
    if not isinstance(raw, Mapping):
        problems.append(f"[{table}]: expected a table, got {raw!r}")
        raw = {}
    return check_values(raw, table, keys, problems)


def _coupling(where: str, value: Any, step_ns: int, problems: list[str]) -> dict[str, int]:
    """``coupling_hz`` as periods [ns] by output topic (``"*"``: every output); problems appended.

    Each rate must give a whole-ns period that is a whole multiple (≥ 1) of the service's
    period ``step_ns`` (:mod:`protocol.coupling`).
    """
    if value is None:
        return {}
    items = value.items() if isinstance(value, dict) else [("*", value)]
    out: dict[str, int] = {}
    for topic, hz in items:
        key = where if topic == "*" else f"{where}.{topic}"
        if isinstance(hz, bool) or not isinstance(hz, Num):
            problems.append(f"{key}: expected a rate in Hz, got {hz!r}")
            continue
        try:
            H = period_ns(hz, key)
        except ConfigError as err:
            problems.extend(err.problems)
            continue
        if H < step_ns or H % step_ns:
            problems.append(f"{key}: {hz!r} Hz (period {H} ns) is not a whole divisor of the service's rate "
                            f"(period {step_ns} ns): the coupling period must be a whole multiple of the step")
            continue
        out[str(topic)] = H
    return out


INPROCESS = "inprocess"
"""Name of the one process of ``--inprocess`` (every service of the run)."""


def processes_of(config: Mapping[str, Any], problems: list[str] | None = None) -> dict[str, tuple[str, ...]]:
    """Which OS process runs each service: process name -> services, in config order.

    A service's ``process`` key, or ``[sim] processes = {NAME = [services]}``, puts it in a
    process group; every other service is a process of its own, named after it
    (``sim.transport = "inproc"``: one process, :data:`INPROCESS`, for everything). A
    problem (unknown service, a service in two groups, a group named after a service
    outside it, a group spread over two hosts) is appended to ``problems`` when given,
    else raised.

    Raises
    ------
    ConfigError
        If ``problems`` is None and the layout is inadmissible.
    """
    from protocol.bus import LAUNCHER
    found: list[str] = []
    services = config.get("services") or {}
    names = [n for n, svc in services.items() if isinstance(svc, dict)]
    sim = config.get("sim") or {}
    if isinstance(sim, dict) and sim.get("transport") == "inproc":
        return {INPROCESS: tuple(names)}
    of: dict[str, str] = {}
    table = sim.get("processes") if isinstance(sim, dict) else None
    if isinstance(table, dict):
        for proc, members in table.items():
            if not isinstance(members, list) or not all(isinstance(x, str) for x in members):
                found.append(f"sim.processes.{proc}: expected a list of service names, got {show(members)}")
                continue
            if not members:
                found.append(f"sim.processes.{proc}: an empty process group (name its services, or remove it)")
                continue
            for x in members:
                if x not in services:
                    found.append(f"sim.processes.{proc}: unknown service {x!r} (configured: {', '.join(names)})")
                elif x in of and of[x] != proc:
                    found.append(f"sim.processes.{proc}: {x!r} is already in process {of[x]!r}")
                else:
                    of[x] = str(proc)
    for n in names:
        p = services[n].get("process")
        if isinstance(p, str):
            if n in of and of[n] != p:
                found.append(f"services.{n}.process: {p!r}, but sim.processes puts it in {of[n]!r}")
            of[n] = p
        of.setdefault(n, n)
    out: dict[str, list[str]] = {}
    for n in names:
        out.setdefault(of[n], []).append(n)
    for proc, members in out.items():
        if not proc or not proc.replace("_", "").replace("-", "").isalnum() or proc == LAUNCHER:
            found.append(f"process {proc!r}: name must be alphanumeric (- and _ allowed) and not {LAUNCHER!r}")
        if proc in services and members != [proc]:
            found.append(f"process {proc!r}: named after a service it does not hold alone ({', '.join(members)})")
        hosts = {services[m].get("host") for m in members}
        if len(hosts) > 1:
            found.append(f"process {proc!r}: its services are on different hosts ({', '.join(map(str, hosts))})")
    if problems is not None:
        problems.extend(found)
    elif found:
        raise ConfigError("; ".join(found), found)
    return {p: tuple(m) for p, m in out.items()}


def _check_coupling(config: dict[str, Any], specs: Mapping[str, ServiceSpec],
                    declared: Mapping[str, ServicePorts]) -> list[str]:
    """Coupling periods of every output (defaults from the consumers), the schedule (no cycle
    waiting on itself) and the stiff couplings' limits; problems, one line each."""
    from protocol.coupling import check_schedule, coupling_periods
    from protocol.stability import check_stiff

    services = {n: {"role": sp.role, "period_ns": specs[n].period_ns,
                    "inputs": [(p.topic, p.kind) for p in sp.inputs],
                    "outputs": [(p.topic, p.kind) for p in sp.outputs]} for n, sp in declared.items()}
    try:
        periods = coupling_periods(services, {n: s.coupling_ns for n, s in specs.items()})
    except ConfigError as err:
        return err.problems
    out = check_schedule(services, periods)
    for name, spec in specs.items():
        stiff = getattr(service_module(spec.kind), "stiff_couplings", None)
        if callable(stiff):
            try:
                for c in stiff(config, name):
                    out.extend(check_stiff(c, name, periods, services))
            except ConfigError as err:
                out.extend(err.problems)
    return out


def peers_of(config: dict[str, Any], url: str) -> dict[str, str]:
    """PUB endpoint of the launcher and of every configured service (:func:`protocol.bus.mesh_endpoints`).

    The services of one process (:func:`processes_of`) share its endpoint. A tcp process
    without ``endpoint`` whose ``host`` label is in ``sim.hosts`` publishes from that
    address, on the port :func:`protocol.bus.mesh_endpoints` would give it.
    """
    from protocol.bus import LAUNCHER, check_url, mesh_endpoints
    services = config.get("services", {})
    hosts = config.get("sim", {}).get("hosts") or {}
    scheme, _, port = check_url(url)
    procs = processes_of(config, [])
    explicit: dict[str, str | None] = {}
    for i, (proc, members) in enumerate(procs.items()):
        given = [services[m].get("endpoint") for m in members if services[m].get("endpoint")]
        explicit[proc] = given[0] if given else None
        host = services[members[0]].get("host")
        if not explicit[proc] and port is not None and host in hosts:  # tcp
            explicit[proc] = f"tcp://{hosts[host]}:{port + 2 + i}"
    by_proc = mesh_endpoints(url, list(procs), explicit)
    out = {LAUNCHER: by_proc[LAUNCHER]}
    for proc, members in procs.items():
        for m in members:
            out[m] = by_proc[proc]
    return out


def ipc_endpoint_paths(sim: Mapping[str, Any], processes: Mapping[str, tuple[str, ...]],
                       services: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """The socket paths an ipc run binds: ``(key, name, path)`` for the control endpoint, the
    launcher's PUB and each process's PUB (:func:`protocol.bus.mesh_endpoints`; a given ``endpoint`` as it is).

    The base is ``sim.bus``, else the directory the launcher makes under ``$TMPDIR``
    (``tempfile.mkdtemp(prefix="berthsim-")``: 8 random characters) with ``bus`` in it. ``key``
    is the config key that names it (``sim.bus`` for the control endpoint; ``services.NAME``, or
    ``sim.processes.NAME`` for a group); ``name`` the name in the path ("" for the control endpoint).
    """
    from protocol.bus import LAUNCHER
    bus = sim.get("bus")
    if isinstance(bus, str) and bus.startswith("ipc://"):
        base, key = bus[len("ipc://"):], "sim.bus"
    else:
        base, key = os.path.join(tempfile.gettempdir(), "berthsim-" + "x" * 8, "bus"), "$TMPDIR"
    if base.startswith("@"):  # Linux's abstract namespace: no file, the same length limit
        base = base[1:] + "?"
    out = [(key, "", f"{base}.ctl"), (key, LAUNCHER, f"{base}.{LAUNCHER}.pub")]
    given = sim.get("processes")
    table: Mapping[str, Any] = given if isinstance(given, dict) else {}
    for proc, members in processes.items():
        given_ep = [(m, services[m]["endpoint"]) for m in members
                    if isinstance(services.get(m), dict) and isinstance(services[m].get("endpoint"), str)]
        if given_ep:
            m, ep = given_ep[0]
            if ep.startswith("ipc://") and not ep.startswith("ipc://@"):
                out.append((f"services.{m}.endpoint", "", ep[len("ipc://"):]))
            continue
        where = f"sim.processes.{proc}" if proc in table else (
            f"services.{members[0]}.process" if proc not in members else f"services.{proc}")
        out.append((where, proc, f"{base}.{proc}.pub"))
    return out


def _check_ipc_paths(sim: Mapping[str, Any], processes: Mapping[str, tuple[str, ...]],
                     services: Mapping[str, Any]) -> list[str]:
    """Problems of ipc endpoints whose path is longer than :data:`IPC_PATH_MAX` bytes."""
    out: list[str] = []
    for key, name, path in ipc_endpoint_paths(sim, processes, services):
        n = len(os.fsencode(path))
        if n <= IPC_PATH_MAX:
            continue
        room = IPC_PATH_MAX - (n - len(os.fsencode(name)))
        fix = (f"names of at most {room} bytes fit" if name and room > 0 else "a shorter endpoint is needed"
               if key.endswith(".endpoint") else "a shorter sim.bus or $TMPDIR is needed")
        out.append(f"{key}: its ipc endpoint path is {n} bytes, more than the {IPC_PATH_MAX} of a Unix socket "
                   f"path (here {fix})")
    return list(dict.fromkeys(out))


def with_overrides(config: dict[str, Any], overrides: dict[str, Any] | None) -> dict[str, Any]:
    """``config`` with ``[sim]`` values replaced by the non-None ``overrides`` (a new dict)."""
    if not overrides:
        return config
    sim = config.get("sim", {})
    if not isinstance(sim, dict):
        return config
    return {**config, "sim": {**sim, **{k: v for k, v in overrides.items() if v is not None}}}


def validate(config: dict[str, Any], *, path: str | Path | None = None,
             only: tuple[str, ...] | list[str] = (), overrides: dict[str, Any] | None = None) -> RunPlan:
    """Check a whole configuration and return the run plan.

    Parameters
    ----------
    config : dict
        The parsed TOML.
    path : str or Path, optional
        Its file (relative ``keys_dir`` resolves against its directory).
    only : sequence of str
        Services to run on this host (``--only``); all if empty.
    overrides : dict, optional
        ``[sim]`` values from the command line (mode, duration, speed, transport, log).

    Returns
    -------
    RunPlan

    Raises
    ------
    ConfigError
        With ``problems`` listing every problem found.
    """
    from protocol.bus import LAUNCHER, check_url
    from protocol.security import SECURITY_KEYS, Security, is_loopback
    problems: list[str] = []
    config = with_overrides(config, overrides)
    sim = check_table(config, "sim", SIM_KEYS, problems)  # a bad value is reported and replaced by its default
    for key in ("duration", "speed"):
        if sim[key] < 0 or sim[key] != sim[key]:
            problems.append(f"sim.{key}: expected >= 0, got {sim[key]!r}")
    # every time becomes int64 ns; a timeout of 0 would fail the run at once (max_lag 0: no bound)
    for key, positive in (("ready_timeout", True), ("stats_period", True), ("heartbeat_timeout", True),
                          ("stall_timeout", True),
                          ("max_lag", False), ("max_input_age", False), ("freeze_park_after", False),
                          ("freeze_stop_after", False)):
        if (bad := check_seconds(sim[key], f"sim.{key}", positive=positive)):
            problems.append(bad)
    if not 0 <= sim["seed"] < 2**64:
        problems.append(f"sim.seed: expected an unsigned 64-bit int (0 … 2**64 - 1), got {sim['seed']!r}")
    if sim["hosts"] is not None and not all(isinstance(v, str) and v for v in sim["hosts"].values()):
        problems.append(f"sim.hosts: expected a table label -> address (str), got {sim['hosts']!r}")
    if not 0 <= sim["rt_priority"] <= 29:  # the band above it goes to the faster processes (protocol.realtime)
        problems.append(f"sim.rt_priority: expected 0..29 (the slowest process's SCHED_FIFO priority; faster "
                        f"ones get up to 60 more), got {sim['rt_priority']!r}")
    park, stop = sim["freeze_park_after"], sim["freeze_stop_after"]
    if _number(park) and _number(stop) and stop > 0 and park >= stop:
        problems.append(f"sim.freeze_park_after: expected < sim.freeze_stop_after ({stop!r} s), got {park!r} s "
                        "(the rig would not park before the run stops)")
    if sim["overrun_limit"] < 1:
        problems.append(f"sim.overrun_limit: expected >= 1, got {sim['overrun_limit']!r}")
    try:
        seconds_to_ns(max(sim["duration"], 0), "sim.duration")
    except ConfigError as err:
        problems.extend(err.problems)

    # endpoints and security
    security = None
    base_dir = Path(path).parent if path else Path(".")
    if sim["transport"] == "tcp" and not sim["bus"]:
        problems.append("sim.bus: missing endpoint; transport 'tcp' needs bus = \"tcp://HOST:PORT\"")
    if sim["bus"]:
        scheme = sim["bus"].split("://", 1)[0]
        if scheme != sim["transport"]:
            problems.append(f"sim.bus: {sim['bus']!r} does not match transport {sim['transport']!r}")
        else:
            try:
                check_url(sim["bus"])
            except ValueError as err:
                problems.append(f"sim.bus: {err}")
    sec_in = config.get("security")
    if sec_in is not None:
        if not isinstance(sec_in, dict):
            problems.append(f"[security]: expected a table, got {sec_in!r}")
        else:
            before = len(problems)
            check_values(sec_in, "security", {k: (kind, None) for k, kind in SECURITY_KEYS.items()}, problems)
            if len(problems) == before:
                security = Security.from_table(sec_in, base_dir)
    if sim["transport"] == "tcp" and sim["bus"] and not is_loopback(sim["bus"]) and security is None:
        problems.append(f"sim.bus: {sim['bus']!r} is not loopback: a [security] table with CurveZMQ keys is required")
    if security is not None and sim["transport"] == "tcp":
        problems.extend(security.problems(server_side=True))

    # services
    services_in = config.get("services")
    specs: dict[str, ServiceSpec] = {}
    claimed: set[str] = set(RUNTIME_TABLES)
    rates: dict[str, Any] = {}
    if not isinstance(services_in, dict) or not services_in:
        problems.append("[services]: at least one [services.NAME] table is required")
        services_in = {}
    modules: dict[str, ModuleType] = {}
    for name, svc in services_in.items():
        where = f"services.{name}"
        if not isinstance(svc, dict):
            problems.append(f"{where}: expected a table, got {svc!r}")
            continue
        if name == LAUNCHER or not name.replace("_", "").replace("-", "").isalnum():
            problems.append(f"{where}: name must be alphanumeric (- and _ allowed) and not {LAUNCHER!r}")
        hosts = sim["hosts"] or {}
        if not all(isinstance(v, str) for v in hosts.values()):
            hosts = {}
        label = svc.get("host")
        ep = svc.get("endpoint")
        if not ep and sim["transport"] == "tcp" and sim["bus"] and label in hosts:
            ep = f"tcp://{hosts[label]}:1"  # checked for loopback / keys like an explicit endpoint
        elif hosts and sim["transport"] == "tcp" and label is not None and label not in hosts and not ep:
            problems.append(f"{where}.host: {label!r} not in sim.hosts ({', '.join(hosts)})")
        if isinstance(ep, str):
            try:
                check_url(ep)
                if ep.split("://", 1)[0] != sim["transport"]:
                    problems.append(f"{where}.endpoint: {ep!r} does not match transport {sim['transport']!r}")
                elif security is None and not is_loopback(ep):
                    problems.append(f"{where}.endpoint: {ep!r} is not loopback: [security] keys are required")
            except ValueError as err:
                problems.append(f"{where}.endpoint: {err}")
        kind = svc.get("kind")
        if not isinstance(kind, str) or not kind:
            problems.append(f"{where}.kind: missing or not a string, got {kind!r}")
            continue
        try:
            mod = service_module(kind)
        except ConfigError as err:
            problems.append(f"{where}.kind: {err}")
            continue
        modules[name] = mod
        claimed.update(getattr(mod, "TABLES", ()))
        allowed: dict[str, Any] = {**SERVICE_KEYS, **getattr(mod, "OPTIONS", {})}
        check_values(svc, where, {k: (kind, None) for k, kind in allowed.items()}, problems)
        if "rate_hz" not in svc:
            problems.append(f"{where}.rate_hz: missing")
        elif check_value(f"{where}.rate_hz", svc["rate_hz"], Num) is None:
            rates[name] = svc["rate_hz"]
    periods: dict[str, int] = {}
    tick = 0
    if rates:
        try:
            periods = check_rates(rates, sim["base_tick_ns"])
        except ConfigError as err:
            problems.extend(f"services: {p}" for p in err.problems)
            periods = {}
            for n, r in rates.items():
                try:
                    periods[n] = period_ns(r, f"services.{n}.rate_hz")
                except ConfigError:
                    pass
        if periods:
            tick = sim["base_tick_ns"] or math.gcd(*periods.values())
            try:  # the run ends at the first boundary of the longest period at or after the duration
                end = align_up(seconds_to_ns(sim["duration"], "sim.duration"), max(periods.values()))
                if end > MAX_NS:
                    problems.append(f"sim.duration: the run would end at {end} ns, beyond int64 ns ({MAX_NS})")
            except ConfigError:
                pass  # reported above
    made_by: dict[str, str] = {}  # topic -> its producer
    declared: dict[str, ServicePorts] = {}  # service -> its ports, for the modules that say them
    for name, mod in modules.items():
        try:
            found = mod.validate(config, name)
            sp = mod.ports(config, name) if hasattr(mod, "ports") and not found else None
        except Exception as err:  # noqa: BLE001 - a module's crash is reported, not raised
            found, sp = [f"validate raised {type(err).__name__}: {err}"], None
        problems.extend(p if p.startswith(f"services.{name}.") else f"services.{name}: {p}" for p in found or [])
        if sp is not None:
            declared[name] = sp
        outputs = [p.topic for p in sp.outputs] if sp is not None else []
        clash: dict[str, list[str]] = {}  # other producer -> topics this one also produces
        for topic in outputs:
            if topic in made_by:
                clash.setdefault(made_by[topic], []).append(topic)
            made_by.setdefault(topic, name)
        for other, topics in clash.items():
            problems.append(f"services.{name}: {', '.join(map(repr, topics))} also produced by services.{other} "
                            "(one producer per topic)")
        if name in periods:
            svc = services_in[name]
            coupling = _coupling(f"services.{name}.coupling_hz", svc.get("coupling_hz"), periods[name], problems)
            cpus = svc.get("cpus", [])
            if not isinstance(cpus, list) or not all(isinstance(c, int) and not isinstance(c, bool) and c >= 0
                                                     for c in cpus):
                problems.append(f"services.{name}.cpus: expected a list of CPU numbers >= 0, got {cpus!r}")
                cpus = []
            specs[name] = ServiceSpec(name, svc["kind"], mod.__name__, periods[name], svc.get("host"), coupling,
                                      bool(svc.get("log_full_rate", False)), tuple(cpus))
    for key, value in config.items():
        if key not in claimed:
            what = "table" if isinstance(value, dict) else "key"
            problems.append(f"[{key}]: unclaimed top-level {what} (no configured service lists it in TABLES)")
    labels: list[str] = sorted({str(s["host"]) for s in services_in.values()
                                if isinstance(s, dict) and isinstance(s.get("host"), str) and not s.get("endpoint")})
    if sim["transport"] == "tcp" and len(labels) > 1 and not sim["hosts"]:
        example = ", ".join(f'{h} = "ADDRESS"' for h in labels)
        problems.append(f"sim.hosts: services on several hosts ({', '.join(labels)}) need the address of each, "
                        f"sim.hosts = {{{example}}} (or an endpoint per service)")
    if not problems and len(declared) == len(modules) and set(declared) == set(specs):
        problems.extend(_check_coupling(config, specs, declared))
    processes = processes_of(config, problems)
    for proc, members in processes.items():
        eps = {services_in[m].get("endpoint") for m in members if services_in[m].get("endpoint")}
        if len(eps) > 1:
            problems.append(f"process {proc!r}: its services give different endpoints ({', '.join(sorted(eps))})")
    if sim["transport"] == "ipc" and not problems:
        problems.extend(_check_ipc_paths(sim, processes, services_in))
    only = tuple(only)
    unknown = [n for n in only if n not in services_in]
    if unknown:
        problems.append(f"--only: unknown services {', '.join(unknown)} (configured: {', '.join(services_in)})")
    for proc, members in processes.items():
        chosen = [m for m in members if m in only]
        if only and chosen and len(chosen) != len(members):
            problems.append(f"--only: process {proc!r} runs {', '.join(members)} together: name all of them or none")
    if problems:
        problems = [cut(p) for p in problems]
        raise ConfigError(f"{len(problems)} problem(s) in the configuration:\n  " + "\n  ".join(problems), problems)
    return RunPlan(config, Path(path) if path else None, sim, specs, tick, security, only, processes)
