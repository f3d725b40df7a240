"""The ``[hil]`` table: one parser shared by the bridge and the emulator.

Both ends are built from the same table, so they agree on the geometry, the limits
and hence the rig fingerprint. :class:`HilParams` declares the table (one field per key, each
with its unit, :mod:`protocol.params`; ``hil.bridge``'s ``PARAMS``); :func:`parse` gives its
values as :attr:`HilConfig.params` beside the checked table and what is built from it (the rig,
the pose map, the frames). Every key is optional; the defaults describe a small
electric Stewart platform (assumed, not a particular product)::

    [hil]
    url = "emulator"              # pyserial URL or path; "emulator" starts the built-in one on a pty
    baud = 921600
    format = "native"             # the rig protocol (hil.rigproto): native | binary6 | ascii, or one registered
    setpoint = "legs"             # native only: legs | pose
    ascii_bits = 10
    rig = "stewart"               # stewart | servo
    fingerprint = 0               # 0: computed from the geometry
    bad_frames_max = 5
    clamp_fault_after = 0         # host fault after this many consecutive clamped commands; 0: never
    watchdog = 0.0                # s; 0: max(3 periods, 20 ms)
    reply_timeout = 1.0           # s; lockstep: the longest wait for one step's reply, resends included
                                  # (then the step goes on with the previous reply)
    resend_after = 0.5            # s; lockstep: resend a frame the rig has not answered within this
                                  # (a NAK from the rig resends at once); at most bad_frames_max times
    pipeline = false              # lockstep: send each step's frame and take its reply at the next step
                                  # (the rig works while the simulation steps; its measurement is one
                                  # link period older, as over a real line); false: wait within the step
    start_timeout = 30.0          # s; url = "emulator": wait this long for the emulator process to serve
    X_OL = [0, 0, 0, 0, 0, 0]     # latch L in orbiter body O: [x, y, z, θx, θy, θz] (m, rotation vector rad);
                                  # absent: [orbiter] X_OL, else identity (see hil_table)
    X_TB = [0, 0, 0, 0, 0, 0]     # berthing interface B in payload body T; absent: [payload] X_TB

    [dynamics.stewart]
    r_base = 0.30                 # m
    r_platform = 0.20             # m
    base_pair_angle = 0.349       # rad (20°)
    platform_pair_angle = 0.349   # rad
    neutral_height = 0.50         # m
    cond_max = 50.0
    joint_cone_base = 0.785       # rad (45°): largest leg angle to its base joint's axis (the neutral leg)
    joint_cone_platform = 1.047   # rad (60°): the same at the platform joint; π: no limit

    [hil.servo]                   # rig = "servo"
    component = [0, 1, 2]         # pose component per axis (x, y, z, θx, θy, θz)
    scale = [1.0, 1.0, 1.0]
    offset = [0.0, 0.0, 0.0]

    [hil.limits]                  # per axis, scalars or lists
    lo = 0.40                     # m (leg stroke) or axis unit
    hi = 0.70
    v_max = 0.5                   # m/s
    a_max = 5.0                   # m/s²
    j_max = 100.0                 # m/s³

    [hil.map]
    neutral = [0, 0, 0, 0, 0, 0]  # rig pose offset from the rig's neutral when X_LB = I
    scale = 1.0
    rot_scale = 1.0
    axis_map = ["x", "y", "z"]

    [hil.compensation]
    predict = true                # predict the command ahead by the measured round trip
    predict_accel_hz = 0.0        # Hz: extrapolate the relative acceleration too (its step difference, low-passed
                                  # at this cutoff), x + v τ + a τ²/2; 0: at the constant relative twist, whose
                                  # τ²/2 a error is a negative mass k τ²/2 on a contact of stiffness k
    predict_accel_beyond = 0.0    # s: with predict_accel_hz > 0, extrapolate the acceleration only over the
                                  # horizon τ's part beyond this τ0: x + v τ + a (τ² - τ0²)/2 (none if τ <= τ0),
                                  # which caps the negative mass at k τ0²/2, the loop's at horizon τ0
    passivity = true              # passivity observer + controller on the contact port
    restitution_max = 1.0         # budget of the passivity controller
    length = 1.0                  # m, weights rotation against translation
    lag = 1                       # steps until the fed-back wrench acts on the body: 1 between
                                  # lockstep services (0 if the caller integrates the body itself)
    gravity = true                # remove the mock-up's weight and inertial load ([hil.mockup]) from the
                                  # sensed wrench, at the rig pose and acceleration commanded for the reading
    tare = 0.0                    # s after engaging over which the (compensated) reading is averaged and
                                  # then subtracted as the sensor's bias (before contact); 0: no taring
    filter_hz = 0.0               # Hz, first-order low-pass on the sensed wrench (match the sensor's noise
                                  # and cutoff); 0: none. Its lag is added to the prediction horizon
    deadband = 0.0                # N: a contact starts when the compensated force exceeds it, or 5 times the
                                  # noise floor measured while taring if that is more (hil.delay.ContactGate);
                                  # out of contact the force is fed back as none; 0 (and no tare): no gate
    release = 0.5                 # a contact ends when the force falls below this fraction of that threshold

    [hil.guides]                  # [hil.emulator] contact = "guides": trunnions on the platform against the
                                  # latch guides' walls, with the law of [contact] (dynamics.contact); an
                                  # absent key is taken from [contact] (law, surfaces) and [payload] (points_B)
    points = []                   # trunnions in B (= P), m
    surfaces = []                 # walls in L (mapped to R by X_RP0): {point, p_LoSo_L, n_L, radius, depth}
    k = 2.0e5                     # N/m^exponent, exponent, alpha (s/m), mu_s, mu_k, v_stick (m/s)

    [hil.mockup]                  # the docking-interface mock-up on the F/T sensor (both ends know it)
    mass = 0.0                    # kg
    com = [0, 0, 0]               # m, its centre of mass from the sensor's origin Po, in P
    inertia = [0, 0, 0]           # kg·m², principal moments about the CoM along P's axes
    gravity = 9.81                # m/s², along -z of the rig frame R

    [hil.emulator]                # the built-in rig emulator
    delay = 0.0                   # s, one-way transport delay (each direction)
    drop = 0.0                    # probability a byte is dropped (host → rig)
    bit_error = 0.0               # probability a byte gets one bit flipped (host → rig)
    contact = "plane"             # plane: a spring-damper plane (below) | guides: the docking mock-ups,
                                  # [hil.guides]
    stiffness = 2.0e5             # N/m, contact spring between the docking halves
    damping = 0.0                 # N·s/m
    plane_normal = [0, 0, 1]      # in R, pointing into the fixed half
    plane_offset = 0.51           # m: the fixed half's face is n·y = offset (in R)
    probe_radius = 0.0            # m: contact points on the platform (0: its origin only)
    bandwidth = 0.0               # Hz actuator servo bandwidth; 0: ideal within the limits
    ft_rate = 0.0                 # Hz, the F/T sensor's own sample rate; 0: an ideal sensor, read with each
                                  # telemetry frame (no mock-up load, noise, bias or filter)
    ft_cutoff = 0.0               # Hz, the sensor's internal first-order low-pass; 0: none
    ft_noise = [0.0, 0.0]         # N, N·m: standard deviation of each force and torque component
    ft_bias = [0, 0, 0, 0, 0, 0]  # [τ; f] N·m, N: offset at power-up
    ft_drift = [0, 0, 0, 0, 0, 0] # [τ; f] N·m/s, N/s: the offset's drift
    ft_range = [0.0, 0.0]         # N, N·m: each component saturates there; 0: no limit
    hard_limits = 1.5             # actuator speed/acceleration limits over the host's soft limits
    rate = 500.0                  # Hz internal step
    seed = 0
    rt_priority = 0               # run the emulator under SCHED_FIFO at this priority (0: normal)
    stats = ""                    # path: the emulator writes its statistics there at exit (JSON: state,
                                  # faults, fault log, axes, the setpoints it applied); "": none
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from dynamics.stewart import (
    PoseMap,
    RigLimits,
    ServoRig,
    StewartRig,
    axis_map_matrix,
    pose_from_vector,
)
from errors import BerthsimError, ConfigError
from hil.rigproto import protocol_names
from protocol.config import check_table
from protocol.params import from_values, param
from protocol.timebase import check_seconds

__all__ = ["HilConfig", "HilParams", "DEFAULTS", "HIL_KEYS", "parse", "hil_table"]

DEFAULTS: dict[str, Any] = {
    "url": "emulator",
    "baud": 921600,
    "format": "native",
    "setpoint": "legs",
    "ascii_bits": 10,
    "rig": "stewart",
    "fingerprint": 0,
    "bad_frames_max": 5,
    "clamp_fault_after": 0,
    "watchdog": 0.0,
    "reply_timeout": 1.0,
    "resend_after": 0.5,
    "pipeline": False,
    "start_timeout": 30.0,
    "X_OL": [0.0] * 6,
    "X_TB": [0.0] * 6,
    "stewart": {
        "r_base": 0.30,
        "r_platform": 0.20,
        "base_pair_angle": math.radians(20.0),
        "platform_pair_angle": math.radians(20.0),
        "neutral_height": 0.50,
        "cond_max": 50.0,
        "joint_cone_base": math.radians(45.0),
        "joint_cone_platform": math.radians(60.0),
    },
    "servo": {"component": [0, 1, 2], "scale": [1.0, 1.0, 1.0], "offset": [0.0, 0.0, 0.0]},
    "limits": {"lo": 0.40, "hi": 0.70, "v_max": 0.5, "a_max": 5.0, "j_max": 100.0},
    "map": {"neutral": [0.0] * 6, "scale": 1.0, "rot_scale": 1.0, "axis_map": ["x", "y", "z"]},
    "compensation": {"predict": True, "predict_accel_hz": 0.0, "predict_accel_beyond": 0.0, "passivity": True,
                     "restitution_max": 1.0, "length": 1.0, "lag": 1,
                     "gravity": True, "tare": 0.0, "filter_hz": 0.0, "deadband": 0.0, "release": 0.5},
    "guides": {"points": [], "surfaces": [], "k": 2.0e5, "exponent": 1.0, "alpha": 0.5, "mu_s": 0.3, "mu_k": 0.2,
               "v_stick": 0.002},
    "mockup": {"mass": 0.0, "com": [0.0, 0.0, 0.0], "inertia": [0.0, 0.0, 0.0], "gravity": 9.81},
    "emulator": {
        "delay": 0.0,
        "drop": 0.0,
        "bit_error": 0.0,
        "contact": "plane",
        "stiffness": 2.0e5,
        "damping": 0.0,
        "plane_normal": [0.0, 0.0, 1.0],
        "plane_offset": 0.51,
        "probe_radius": 0.0,
        "bandwidth": 0.0,
        "ft_rate": 0.0,
        "ft_cutoff": 0.0,
        "ft_noise": [0.0, 0.0],
        "ft_bias": [0.0] * 6,
        "ft_drift": [0.0] * 6,
        "ft_range": [0.0, 0.0],
        "hard_limits": 1.5,
        "rate": 500.0,
        "seed": 0,
        "rt_priority": 0,
        "stats": "",
    },
}


_N = (int, float)
_INF = math.inf
_KINDS: dict[str, Any] = {
    "url": str, "baud": ("int", 1, _INF), "format": str, "setpoint": ("legs", "pose"), "ascii_bits": int,
    "rig": ("stewart", "servo"), "fingerprint": ("int", 0, 0xFFFFFFFF), "bad_frames_max": ("int", 1, _INF),
    "clamp_fault_after": ("int", 0, _INF), "watchdog": _N, "reply_timeout": _N, "resend_after": _N, "pipeline": bool,
    "start_timeout": _N, "X_OL": ("vec", 6), "X_TB": ("vec", 6),
    "stewart": dict.fromkeys(DEFAULTS["stewart"], _N),  # the rig checks its geometry
    "servo": {"component": ("list", int), "scale": ("list", _N), "offset": ("list", _N)},
    "limits": dict.fromkeys(DEFAULTS["limits"], (int, float, list)),  # per axis: a number or one per axis
    "map": {"neutral": ("vec", 6), "scale": _N, "rot_scale": _N, "axis_map": "list"},
    "compensation": {"predict": bool, "predict_accel_hz": "nonnegative", "predict_accel_beyond": "nonnegative",
                     "passivity": bool,
                     "restitution_max": ("range", 0.0, 1.0), "length": "positive", "lag": ("int", 0, 2),
                     "gravity": bool, "tare": "nonnegative",
                     "filter_hz": "nonnegative", "deadband": "nonnegative", "release": ("range", 0.0, 1.0)},
    "guides": {"points": "list", "surfaces": "list", "k": "positive", "exponent": ("range", 1.0, _INF),
               "alpha": "nonnegative", "mu_s": "nonnegative", "mu_k": "nonnegative", "v_stick": "positive"},
    "mockup": {"mass": "nonnegative", "com": ("vec", 3), "inertia": ("vec", 3), "gravity": "nonnegative"},
    "emulator": {"delay": _N, "drop": _N, "bit_error": _N, "contact": ("plane", "guides"), "stiffness": "positive",
                 "damping": "nonnegative",
                 "plane_normal": ("vec", 3), "plane_offset": _N, "probe_radius": "nonnegative",
                 "bandwidth": "nonnegative", "ft_rate": "nonnegative", "ft_cutoff": "nonnegative",
                 "ft_noise": ("vec", 2), "ft_bias": ("vec", 6), "ft_drift": ("vec", 6), "ft_range": ("vec", 2),
                 "hard_limits": ("range", 1.0, _INF), "rate": "positive", "seed": int,
                 "rt_priority": ("int", 0, 99), "stats": str},
}


def _keys(defaults: Mapping[str, Any], kinds: Mapping[str, Any]) -> dict[str, tuple[Any, Any]]:
    return {k: (_keys(d, kinds[k]), None) if isinstance(d, dict) else (kinds[k], d) for k, d in defaults.items()}


HIL_KEYS: dict[str, tuple[Any, Any]] = _keys(DEFAULTS, _KINDS)
"""``[hil]``: key -> (kind, default) (:func:`protocol.config.check_value`); its sub-tables nested."""


_Axes = float | tuple[float, ...]
"""A per-axis limit: one number for every axis, or one per axis."""


@dataclass(frozen=True)
class HilStewart:
    """``[dynamics.stewart]``: the Stewart platform's geometry (the rig checks it)."""

    r_base: float = param("m")
    r_platform: float = param("m")
    base_pair_angle: float = param("rad")
    platform_pair_angle: float = param("rad")
    neutral_height: float = param("m")
    cond_max: float = param("1")                      # largest condition number of the Jacobian
    joint_cone_base: float = param("rad")             # largest leg angle to its base joint's axis
    joint_cone_platform: float = param("rad")         # the same at the platform joint; π: no limit


@dataclass(frozen=True)
class HilServo:
    """``[hil.servo]`` (``rig = "servo"``): one axis per driven pose component."""

    component: tuple[int, ...] = param("-")           # pose component per axis (x, y, z, θx, θy, θz)
    scale: tuple[float, ...] = param("axis unit/(m or rad)")
    offset: tuple[float, ...] = param("axis unit")


@dataclass(frozen=True)
class HilLimits:
    """``[hil.limits]``: per axis, a number for every axis or one per axis (m of leg stroke, or the axis unit)."""

    lo: _Axes = param("m")
    hi: _Axes = param("m")
    v_max: _Axes = param("m/s")
    a_max: _Axes = param("m/s²")
    j_max: _Axes = param("m/s³")


@dataclass(frozen=True)
class HilMap:
    """``[hil.map]``: the berthing pose X_LB to the rig pose."""

    neutral: tuple[float, ...] = param("m, rad")      # (6,) rig pose offset from its neutral when X_LB = I
    scale: float = param("1")
    rot_scale: float = param("1")
    axis_map: tuple[str, ...] = param("-")            # (3,) L's axis per rig axis, e.g. ("x", "y", "z")


@dataclass(frozen=True)
class HilCompensation:
    """``[hil.compensation]``: the prediction, passivity, mock-up load, tare, filter and contact gate."""

    predict: bool = param("-")
    predict_accel_hz: float = param("Hz")             # 0: at the constant relative twist
    predict_accel_beyond: float = param("s")
    passivity: bool = param("-")
    restitution_max: float = param("1")
    length: float = param("m")                        # weights rotation against translation
    lag: int = param("-")                             # steps until the fed-back wrench acts on the body
    gravity: bool = param("-")
    tare: float = param("s")                          # 0: no taring
    filter_hz: float = param("Hz")                    # 0: no filter
    deadband: float = param("N")
    release: float = param("1")                       # fraction of the contact threshold


@dataclass(frozen=True)
class HilGuides:
    """``[hil.guides]``: the mock-ups' trunnions and walls (checked with ``[hil.emulator] contact = "guides"``,
    passed as configured) and their contact law."""

    points: tuple[Any, ...] = param("m")              # trunnions [x, y, z] in B (= P)
    surfaces: tuple[Any, ...] = param("-")            # walls in L: {point, p_LoSo_L [m], n_L, radius [m], depth [m]}
    k: float = param("N/m^exponent")
    exponent: float = param("1")
    alpha: float = param("s/m")
    mu_s: float = param("1")
    mu_k: float = param("1")
    v_stick: float = param("m/s")


@dataclass(frozen=True)
class HilMockup:
    """``[hil.mockup]``: the docking-interface mock-up on the F/T sensor."""

    mass: float = param("kg")
    com: tuple[float, ...] = param("m")               # (3,) from the sensor's origin Po, in P
    inertia: tuple[float, ...] = param("kg·m²")       # (3,) principal moments about the CoM along P's axes
    gravity: float = param("m/s²")                    # along -z of the rig frame R


@dataclass(frozen=True)
class HilEmulator:
    """``[hil.emulator]``: the built-in rig emulator."""

    delay: float = param("s")                         # one way, each direction
    drop: float = param("1")                          # probability per byte (host -> rig)
    bit_error: float = param("1")                     # probability per byte
    contact: str = param("-")                         # "plane" | "guides"
    stiffness: float = param("N/m")
    damping: float = param("N·s/m")
    plane_normal: tuple[float, ...] = param("1")      # (3,) unit, in R
    plane_offset: float = param("m")
    probe_radius: float = param("m")
    bandwidth: float = param("Hz")                    # 0: ideal within the limits
    ft_rate: float = param("Hz")                      # 0: an ideal sensor
    ft_cutoff: float = param("Hz")
    ft_noise: tuple[float, ...] = param("N, N·m")     # (2,) standard deviations
    ft_bias: tuple[float, ...] = param("N·m, N")      # (6,) [τ; f]
    ft_drift: tuple[float, ...] = param("N·m/s, N/s")  # (6,) [τ; f]
    ft_range: tuple[float, ...] = param("N, N·m")     # (2,) 0: no limit
    hard_limits: float = param("1")                   # over the host's soft limits
    rate: float = param("Hz")
    seed: int = param("-")
    rt_priority: int = param("-")
    stats: str = param("-")                           # a path; "": none


@dataclass(frozen=True)
class HilParams:
    """``[hil]``, declared (:data:`HIL_KEYS`, defaults :data:`DEFAULTS`; the module docstring says what each key
    does): one field per key, each with its unit (:func:`protocol.params.units`), the sub-tables nested. Built by
    :func:`parse` from the checked table (:attr:`HilConfig.params`)."""

    url: str = param("-")
    baud: int = param("bit/s")
    format: str = param("-")
    setpoint: str = param("-")
    ascii_bits: int = param("-")
    rig: str = param("-")                             # "stewart" | "servo"
    fingerprint: int = param("-")                     # 0: computed from the geometry
    bad_frames_max: int = param("-")
    clamp_fault_after: int = param("-")               # 0: never
    watchdog: float = param("s")                      # 0: max(3 periods, 20 ms)
    reply_timeout: float = param("s")
    resend_after: float = param("s")
    pipeline: bool = param("-")
    start_timeout: float = param("s")
    X_OL: tuple[float, ...] = param("m, rad")         # (6,) latch L in the orbiter body O
    X_TB: tuple[float, ...] = param("m, rad")         # (6,) berthing interface B in the payload body T
    stewart: HilStewart = param("-")
    servo: HilServo = param("-")
    limits: HilLimits = param("-")
    map: HilMap = param("-")
    compensation: HilCompensation = param("-")
    guides: HilGuides = param("-")
    mockup: HilMockup = param("-")
    emulator: HilEmulator = param("-")


@dataclass(frozen=True)
class HilConfig:
    """The parsed ``[hil]`` table: its values, and what is built from them.

    Attributes
    ----------
    table : dict
        The table with defaults filled in (nested dicts).
    rig : StewartRig or ServoRig
    pose_map : PoseMap
    X_OL, X_TB : ndarray, shape (4, 4)
        Latch L in the orbiter body, berthing interface B in the payload body.
    fingerprint : int
        The configured fingerprint, else the rig's.
    params : HilParams
        The table's values, declared (units per field).
    """

    table: dict[str, Any]
    rig: StewartRig | ServoRig
    pose_map: PoseMap
    X_OL: np.ndarray
    X_TB: np.ndarray
    fingerprint: int
    params: HilParams

    @property
    def limits(self) -> RigLimits:
        """The rig's axis limits."""
        return self.rig.limits


def _axes(value: Any, n: int, name: str, problems: list[str]) -> np.ndarray:
    a = np.asarray(value, dtype=np.float64)
    if a.shape == ():
        a = np.full(n, float(a))
    if a.shape != (n,) or not np.all(np.isfinite(a)):
        problems.append(f"{name}: expected a number or {n} numbers, got {value!r}")
        return np.zeros(n)
    return a


def _pose6(value: Any, name: str, problems: list[str]) -> np.ndarray:
    try:
        return pose_from_vector(value)
    except (BerthsimError, ValueError, TypeError):
        problems.append(f"{name}: expected [x, y, z, θx, θy, θz] (m, rad), got {value!r}")
        return np.eye(4)


#: Keys of ``[hil]`` that, when absent, are taken from another table of the configuration.
FRAME_SOURCES = {"X_OL": "orbiter", "X_TB": "payload"}
#: Keys of ``[hil.guides]`` that, when absent, are taken from ``[contact]`` (``points``: ``[payload] points_B``).
GUIDE_SOURCES = {"points": ("payload", "points_B"), "surfaces": ("contact", "surfaces"),
                 **{k: ("contact", k) for k in ("k", "exponent", "alpha", "mu_s", "mu_k", "v_stick")}}


def hil_table(config: Mapping[str, Any]) -> dict[str, Any]:
    """The ``[hil]`` table of a whole configuration, with the two frames filled in.

    ``X_OL`` (the latch in the orbiter body) and ``X_TB`` (the berthing interface in the
    payload body) are the frames ``[orbiter]`` and ``[payload]`` already define; where
    ``[hil]`` leaves one out it is taken from there. A value given in ``[hil]`` wins. So, with
    ``[hil.emulator] contact = "guides"``, are the mock-ups' law and geometry (:data:`GUIDE_SOURCES`):
    the rig's contact is the simulated one.
    """
    out = dict(config.get("hil", {}) or {})
    for key, source in FRAME_SOURCES.items():
        other = config.get(source, {})
        if key not in out and isinstance(other, Mapping) and key in other:
            out[key] = other[key]
    em = out.get("emulator", {})
    if isinstance(em, Mapping) and em.get("contact") == "guides":
        guides = dict(out.get("guides", {}) or {})
        for key, (table, name) in GUIDE_SOURCES.items():
            other = config.get(table, {})
            if key not in guides and isinstance(other, Mapping) and name in other:
                guides[key] = other[name]
        out["guides"] = guides
    return out


SURFACE_KEYS = ("point", "p_LoSo_L", "n_L", "radius", "depth")


def _check_guides(t: Mapping[str, Any], problems: list[str]) -> None:
    """``[hil.guides]`` when the emulator's contact is the mock-ups': points, walls (each naming a point), the law,
    and a map that keeps lengths (the law's penetrations would scale)."""
    if t["emulator"]["contact"] != "guides":
        return
    g = t["guides"]
    pts = g["points"]
    if not pts or not all(isinstance(p, list) and len(p) == 3 and all(isinstance(x, (int, float)) for x in p)
                          for p in pts):
        problems.append(f"hil.guides.points: expected a list of [x, y, z] trunnion points (m), got {pts!r}")
        return
    if not g["surfaces"]:
        problems.append("hil.guides.surfaces: expected the guides' walls, got none")
    for i, w in enumerate(g["surfaces"]):
        if not isinstance(w, Mapping) or set(w) - {"point", "p_LoSo_L", "n_L", "radius", "depth"} \
                or not {"point", "p_LoSo_L", "n_L"} <= set(w):
            problems.append(f"hil.guides.surfaces[{i}]: expected {{point, p_LoSo_L, n_L, radius, depth}}, got {w!r}")
        elif not (isinstance(w["point"], int) and 0 <= w["point"] < len(pts)):
            problems.append(f"hil.guides.surfaces[{i}].point: expected an index into hil.guides.points "
                            f"(0..{len(pts) - 1}), got {w['point']!r}")
        elif not np.linalg.norm(np.asarray(w["n_L"], dtype=np.float64)) > 1e-9:
            problems.append(f"hil.guides.surfaces[{i}].n_L: zero normal {w['n_L']!r}")
    if g["mu_s"] < g["mu_k"]:
        problems.append(f"hil.guides.mu_s: must be >= mu_k ({g['mu_k']!r}), got {g['mu_s']!r}")
    if t["map"]["scale"] != 1.0 or t["map"]["rot_scale"] != 1.0:
        problems.append(f"hil.map.scale: the guides' mock-ups are full size: scale and rot_scale must be 1, got "
                        f"{t['map']['scale']!r} and {t['map']['rot_scale']!r}")


def parse(table: Mapping[str, Any] | None) -> HilConfig:
    """Parse and check a ``[hil]`` table (missing keys take :data:`DEFAULTS`).

    Raises
    ------
    ConfigError
        With ``problems`` listing every problem found, each naming the key and value.
    """
    problems: list[str] = []
    t = check_table({"hil": table or {}}, "hil", HIL_KEYS, problems)  # a bad value: listed, then its default
    for key, positive in (("start_timeout", True), ("reply_timeout", True), ("resend_after", True),
                          ("watchdog", False)):
        if (bad := check_seconds(t[key], f"hil.{key}", positive=positive)):
            problems.append(bad)
    if t["watchdog"] > 0xFFFF * 1e-3:
        problems.append(f"hil.watchdog: at most 65.535 s (ARM carries it in ms, u16), got {t['watchdog']!r}")
    if t["reply_timeout"] > 0 and not 0 < t["resend_after"] <= t["reply_timeout"]:
        problems.append(f"hil.resend_after: must be > 0 and <= hil.reply_timeout ({t['reply_timeout']!r}), "
                        f"got {t['resend_after']!r}")
    if t["format"] not in protocol_names():
        problems.append(f"hil.format: unknown rig protocol {t['format']!r}, expected one of {protocol_names()}")
    em = t["emulator"]
    for key in ("drop", "bit_error"):
        if not 0.0 <= em[key] < 1.0:
            problems.append(f"hil.emulator.{key}: probability must be in [0, 1), got {em[key]!r}")
    if (bad := check_seconds(em["delay"], "hil.emulator.delay")):
        problems.append(bad)
    for key in ("ft_noise", "ft_range"):
        if min(em[key]) < 0.0:
            problems.append(f"hil.emulator.{key}: expected two numbers >= 0, got {em[key]!r}")
    _check_guides(t, problems)
    if min(t["mockup"]["inertia"]) < 0.0:
        problems.append(f"hil.mockup.inertia: expected three moments >= 0, got {t['mockup']['inertia']!r}")
    if not np.isclose(np.linalg.norm(em["plane_normal"]), 1.0, atol=1e-6):
        problems.append(f"hil.emulator.plane_normal: expected a unit 3-vector, got {em['plane_normal']!r}")

    n = 6 if t["rig"] != "servo" else len(t["servo"]["component"])
    lim_t = t["limits"]
    rig: StewartRig | ServoRig | None = None
    try:
        limits = RigLimits(*(_axes(lim_t[k], n, f"hil.limits.{k}", problems)
                             for k in ("lo", "hi", "v_max", "a_max", "j_max")))
        if t["rig"] == "servo":
            s = t["servo"]
            rig = ServoRig(tuple(int(c) for c in s["component"]), tuple(map(float, s["scale"])),
                           tuple(map(float, s["offset"])), limits)
        else:
            s = t["stewart"]
            rig = StewartRig(s["r_base"], s["r_platform"], s["base_pair_angle"], s["platform_pair_angle"],
                             s["neutral_height"], limits, s["cond_max"], s["joint_cone_base"],
                             s["joint_cone_platform"])
    except ConfigError as err:
        problems.extend(q if q.startswith("hil.") else f"hil.{q}" for q in err.problems)
    except (TypeError, ValueError) as err:
        problems.append(f"hil.{t['rig']}: {err}")
    pm = None
    if rig is not None:
        m = t["map"]
        try:
            M = axis_map_matrix(m["axis_map"])
            pm = PoseMap(rig, rig.neutral @ _pose6(m["neutral"], "hil.map.neutral", problems), float(m["scale"]),
                         float(m["rot_scale"]), M)
        except ConfigError as err:
            problems.extend(err.problems)
    X_OL = _pose6(t["X_OL"], "hil.X_OL", problems)
    X_TB = _pose6(t["X_TB"], "hil.X_TB", problems)
    if problems or rig is None or pm is None:
        raise ConfigError(f"[hil]: {len(problems)} problem(s): " + "; ".join(problems), problems)
    fp = int(t["fingerprint"]) or rig.fingerprint
    return HilConfig(t, rig, pm, X_OL, X_TB, fp, from_values(HilParams, t))
