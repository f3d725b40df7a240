"""The compiled soft limits (dynamics.safety_kernels) against their Python-float reference.

:func:`dynamics.safety_kernels.rate_limit` is :func:`hil.safety.rate_limit_rows` on arrays, and
:func:`dynamics.safety_kernels.follow` the engaged step of :meth:`hil.safety.SafetySupervisor.tick` (the
finiteness check, the command's difference quotient, the rate limit). Compiled without fast-math, they must agree
with the references bit for bit (``==`` on every number, NaN where the reference gives NaN), over random axes,
speeds and commands that take every branch of the reference: the command's speed clipped either way, the error
positive, negative and zero, the stop speed below and above the one-step speed, the desired speed clipped, the
stroke ends' stop speeds skipped, taken without clipping and clipping, the acceleration clipped either way and
the position clipped to either stroke end. A supervisor with the kernel loaded gives the reference supervisor's
setpoints, states, faults and counts over command streams with jumps, clamps and non-finite commands.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dynamics import safety_kernels as sk
from dynamics.stewart import RigLimits
from hil.framing import Hello, RigState
from hil.safety import SafetySupervisor, _rate_constants, rate_limit_rows

DT = 0.004


def _limits(rng: np.random.Generator, n: int) -> RigLimits:
    lo = rng.uniform(-0.5, 0.3, n)
    return RigLimits(lo, lo + rng.uniform(0.05, 0.8, n), rng.uniform(0.05, 1.0, n), rng.uniform(0.5, 10.0, n),
                     rng.uniform(5.0, 200.0, n))


def _same(a: list[float], b: np.ndarray) -> bool:
    """Bit for bit (NaN where NaN)."""
    return len(a) == b.size and all(x == y or (math.isnan(x) and math.isnan(y)) for x, y in zip(a, b.tolist(),
                                                                                                strict=True))


def _branches(xc: float, xi: float, vi: float, vc: float, row: tuple[float, ...], dt: float) -> set[str]:
    """The branches of rate_limit_rows one axis takes (the reference's arithmetic, traced)."""
    lo, hi, vm, am, adt, adt2, am8, margin, k, k2 = row
    out = set()
    if -vm > vc:
        vc, _ = -vm, out.add("vc<-vm")
    if vm < vc:
        vc, _ = vm, out.add("vc>vm")
    e = xc - xi - vc * dt
    out.add("e>0" if e > 0 else "e<0" if e < 0 else "e=0")
    ae = abs(e)
    v_stop = 0.5 * (-adt + math.sqrt(adt2 + am8 * ae))
    out.add("stop<step" if v_stop < ae / dt else "step<=stop")
    step = min(ae / dt, v_stop) if v_stop < ae / dt else ae / dt
    v_des = vc + (step if e > 0 else -step if e < 0 else 0.0)
    if -vm > v_des or vm < v_des:
        out.add("vdes clipped")
    v_des = max(-vm, min(vm, v_des))
    if v_des != 0.0:
        d = (xi - lo - margin) if v_des < 0 else (hi - xi - margin)
        w = 1e-12 * k + abs(v_des)
        if (w * w + k * w) * (1.0 + 1e-9) < 0.25 * am8 * d:
            out.add("end skipped")
        else:
            v_end = 0.5 * (-k + math.sqrt(k2 + am8 * max(0.0, d)))
            out.add("end clips" if v_end < abs(v_des) else "end taken")
    ai = (v_des - vi) / dt
    if abs(ai) > am:
        out.add("a clipped")
    xn = xi + (vi + max(-am, min(am, ai)) * dt) * dt
    if xn < lo:
        out.add("x<lo")
    if xn > hi:
        out.add("x>hi")
    return out


def test_rate_limit_kernel_is_the_reference_bit_for_bit_on_every_branch():
    rng = np.random.default_rng(7)
    seen: set[str] = set()
    for trial in range(4000):
        n = int(rng.integers(1, 8))
        lim = _limits(rng, n)
        dt = float(rng.choice([DT, 0.001, 0.02]))
        lo, hi = lim.lo, lim.hi
        span = hi - lo
        # the limited command anywhere in the stroke (near its ends too), its speed up to beyond v_max
        x = lo + span * rng.choice([rng.uniform(0, 1, n), rng.uniform(0, 0.02, n), rng.uniform(0.98, 1, n)])
        v = lim.v_max * rng.uniform(-1.2, 1.2, n)
        scale = rng.choice([1e-6, 1e-3, 0.05, 1.0])  # followed exactly, a little, a jump, far beyond the stroke
        x_cmd = x + span * scale * rng.normal(size=n)
        if trial % 7 == 0:
            x_cmd = x.copy()  # no error at all
        v_cmd = lim.v_max * rng.uniform(-2.0, 2.0, n) * rng.choice([0.0, 0.3, 1.0])
        ref = rate_limit_rows(x_cmd.tolist(), x.tolist(), v.tolist(), lim, dt, v_cmd.tolist())
        c = np.array(_rate_constants(lim, dt))
        got = np.full((3, n), np.nan)
        hit = sk.rate_limit(x_cmd, x, v, c, dt, v_cmd, got)
        assert all(_same(r, g) for r, g in zip(ref[:3], got, strict=True)), (trial, ref, got)
        assert ref[3] == hit
        if trial % 5 == 0:  # into x and v's own storage (as the supervisor may): the same numbers
            xs, vs = x.copy(), v.copy()
            same = np.stack([xs, vs, np.zeros(n)])
            assert sk.rate_limit(x_cmd, same[0], same[1], c, dt, v_cmd, same) == hit and _same(ref[0], same[0])
            assert _same(ref[1], same[1]) and _same(ref[2], same[2])
        rows = _rate_constants(lim, dt)
        for i in range(n):
            seen |= _branches(float(x_cmd[i]), float(x[i]), float(v[i]), float(v_cmd[i]), rows[i], dt)
    for trial in range(400):  # at v_max, just short of a stroke end's stop speed: its square root taken, no clip
        lim = _limits(rng, 1)
        (lo, hi, vm, am, _, _, am8, margin, k, _), = _rate_constants(lim, DT)
        v_end = vm * (1.0 + float(rng.uniform(1e-13, 1e-10)))
        d = 4.0 * (v_end * v_end + k * v_end) / am8  # the distance whose stop speed is v_end
        up = trial % 2 == 0
        xi = hi - margin - d if up else lo + margin + d
        if not lo < xi < hi:
            continue
        x, v = np.array([xi]), np.array([vm if up else -vm])
        x_cmd, v_cmd = np.array([hi if up else lo]), np.zeros(1)
        ref = rate_limit_rows(x_cmd.tolist(), x.tolist(), v.tolist(), lim, DT, v_cmd.tolist())
        got = np.empty((3, 1))
        hit = sk.rate_limit(x_cmd, x, v, np.array(_rate_constants(lim, DT)), DT, v_cmd, got)
        assert all(_same(r, g) for r, g in zip(ref[:3], got, strict=True)) and ref[3] == hit
        seen |= _branches(hi if up else lo, xi, vm if up else -vm, 0.0, _rate_constants(lim, DT)[0], DT)
    every = {"vc<-vm", "vc>vm", "e>0", "e<0", "e=0", "stop<step", "step<=stop", "vdes clipped", "end skipped",
             "end clips", "end taken", "a clipped", "x<lo", "x>hi"}
    assert every <= seen, every - seen


def test_follow_checks_finiteness_and_takes_the_commands_difference_quotient():
    rng = np.random.default_rng(3)
    lim = _limits(rng, 6)
    c = np.array(_rate_constants(lim, DT))
    x, v = (lim.lo + lim.hi) / 2, np.zeros(6)
    for k in range(2000):
        cmd = x + rng.normal(size=6) * rng.choice([1e-5, 1e-3, 0.1])
        prev = x + rng.normal(size=6) * 1e-3
        has_prev = bool(k % 3)
        out = np.empty((3, 6))
        finite, hit = sk.follow(cmd, prev, has_prev, x, v, c, DT, out)
        xo, vo, ao = out
        v_cmd = [(a - b) / DT for a, b in zip(cmd.tolist(), prev.tolist(), strict=True)] if has_prev else [0.0] * 6
        ref = rate_limit_rows(cmd.tolist(), x.tolist(), v.tolist(), lim, DT, v_cmd)
        assert finite and all(_same(r, g) for r, g in zip(ref[:3], (xo, vo, ao), strict=True)) and hit == ref[3]
        x, v = xo, vo
    for bad in (math.nan, math.inf, -math.inf):
        cmd = x.copy()
        cmd[int(rng.integers(0, 6))] = bad
        out = np.zeros((3, 6))
        assert sk.follow(cmd, x, True, x, v, c, DT, out) == (False, False) and not out.any()


def _supervisor(lim: RigLimits, neutral: np.ndarray, compiled: bool) -> SafetySupervisor:
    s = SafetySupervisor(lim, neutral, DT, 7, clamp_fault_after=5)
    if compiled:
        s.load_kernels()
    assert s.compiled == compiled
    s.request_arm()
    s.on_hello(Hello(7, neutral.size, 0))
    s.engage()
    return s


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_supervisor_with_the_kernel_is_the_reference_supervisor(seed):
    rng = np.random.default_rng(seed)
    lim = _limits(rng, 6)
    neutral = (lim.lo + lim.hi) / 2
    ref, fast = _supervisor(lim, neutral, False), _supervisor(lim, neutral, True)
    for k in range(1500):
        t = k * DT
        if k % 400 == 399:  # re-engage after the faults below
            for s in (ref, fast):
                if s.state == RigState.FAULT and s.at_neutral:
                    s.reset()
                    s.request_arm()
                    s.on_hello(Hello(7, 6, 0))
                    s.engage()
        cmd = neutral + 0.02 * math.sin(0.01 * k) + (0.3 if k % 97 < 3 else 0.0) * rng.normal(size=6)
        if k % 331 == 330:
            cmd[2] = math.nan  # faults NAN
        clamped = k % 250 < 6 and k > 500  # six in a row: LIMIT on the fifth
        a, b = ref.tick(t, cmd, t, t, clamped=clamped), fast.tick(t, cmd.copy(), t, t, clamped=clamped)
        assert (a is None) == (b is None) and (a is None or _same(a.tolist(), b)), k
        assert ref.state == fast.state and ref.faults == fast.faults and ref.limit_hits == fast.limit_hits, k
        assert _same(ref.x.tolist(), fast.x) and _same(ref.v.tolist(), fast.v) and _same(ref.a.tolist(), fast.a)
    assert ref.limit_hits > 0 and ref.fault_t is not None
