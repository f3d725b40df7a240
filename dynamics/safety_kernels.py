"""Compiled kernel of the hil safety supervisor's soft limits (numba), used by :class:`hil.safety.SafetySupervisor`.

:func:`follow` is the engaged step of :meth:`hil.safety.SafetySupervisor.tick`: the command's finiteness
check, its speed (the difference quotient of two commands), and :func:`hil.safety.rate_limit_rows` (the
readable reference, on Python floats) on arrays, the limits given as :func:`hil.safety._rate_constants`'
rows. Written with the reference's operations in the same order; numba compiles without fast-math (no
reassociation, no fused multiply-add) and ``sqrt`` is the C library's (correctly rounded), so the results
are bit for bit the reference's; tests/dynamics/test_safety_kernels.py holds them so. In the ``hil``
bridge's 250 Hz step it costs a couple of microseconds instead of the reference's tens (Python float
arithmetic over six axes, and the conversions to and from lists around it).

Loaded by :meth:`hil.safety.SafetySupervisor.load_kernels` (the bridge calls it when it is built; a
configuration check does not, so it imports no numba). Compiled on first use and cached on disk
(``cache=True``).

No I/O, clock or globals.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit
from numpy.typing import NDArray

__all__ = ["rate_limit", "follow"]

Array = NDArray[np.float64]


@njit(cache=True)
def rate_limit(x_cmd: Array, x: Array, v: Array, c: Array, dt: float, v_cmd: Array, out: Array) -> bool:
    """:func:`hil.safety.rate_limit_rows` (same operations) on arrays (n,): ``c`` (n, 10) the limits' constants
    per axis (:func:`hil.safety._rate_constants`: ``lo, hi, v_max, a_max, a_max dt, (a_max dt)², 8 a_max,
    2 v_max dt, k, k²``). The limited command's ``x, v, a`` into the rows of ``out`` (3, n) (the caller's: a
    new array numba made would cost its return more than the arithmetic); returns whether a limit made it
    differ. ``out`` may be ``x`` and ``v``'s own storage (each axis is read before it is written)."""
    n = x.shape[0]
    xo = out[0]
    vo = out[1]
    ao = out[2]
    hit = False
    for i in range(n):
        xi, vi, xc, vc = x[i], v[i], x_cmd[i], v_cmd[i]
        lo, hi, vm, am, adt, adt2, am8, margin, k, k2 = (c[i, 0], c[i, 1], c[i, 2], c[i, 3], c[i, 4], c[i, 5],
                                                        c[i, 6], c[i, 7], c[i, 8], c[i, 9])
        if -vm > vc:
            vc = -vm
        if vm < vc:
            vc = vm
        e = xc - xi - vc * dt
        ae = abs(e)
        v_stop = 0.5 * (-adt + math.sqrt(adt2 + am8 * ae))
        step = ae / dt
        if v_stop < step:
            step = v_stop
        v_des = vc + (step if e > 0 else -step if e < 0 else 0.0)
        if -vm > v_des:
            v_des = -vm
        if vm < v_des:
            v_des = vm
        if v_des < 0.0:
            d_lo = xi - lo - margin
            w = 1e-12 * k - v_des
            if not (w * w + k * w) * (1.0 + 1e-9) < 0.25 * am8 * d_lo:
                v_lo = 0.5 * (-k + math.sqrt(k2 + am8 * (0.0 if 0.0 > d_lo else d_lo)))
                if -v_lo > v_des:
                    v_des = -v_lo
        elif v_des > 0.0:
            d_hi = hi - xi - margin
            w = 1e-12 * k + v_des
            if not (w * w + k * w) * (1.0 + 1e-9) < 0.25 * am8 * d_hi:
                v_hi = 0.5 * (-k + math.sqrt(k2 + am8 * (0.0 if 0.0 > d_hi else d_hi)))
                if v_hi < v_des:
                    v_des = v_hi
        ai = (v_des - vi) / dt
        if -am > ai:
            ai = -am
        if am < ai:
            ai = am
        vn = vi + ai * dt
        xn = xi + vn * dt
        if lo > xn:
            xn = lo
        if hi < xn:
            xn = hi
        hit = hit or abs(xn - xc) > 1e-9
        xo[i] = xn
        vo[i] = vn
        ao[i] = ai
    return hit


@njit(cache=True)
def follow(x_cmd: Array, prev: Array, has_prev: bool, x: Array, v: Array, c: Array, h: float,
           out: Array) -> tuple[bool, bool]:
    """The engaged step of :meth:`hil.safety.SafetySupervisor.tick` on the command ``x_cmd`` (n,): whether it is
    finite (if not, nothing else is computed and ``out`` is left as it is), then :func:`rate_limit` into ``out``
    (3, n) with the command's speed ``(x_cmd − prev) / h`` (0 without a previous command, ``has_prev`` False).
    Returns ``(finite, hit)``."""
    n = x_cmd.shape[0]
    for i in range(n):
        if not math.isfinite(x_cmd[i]):
            return False, False
    v_cmd = np.zeros(n)
    if has_prev:
        for i in range(n):
            v_cmd[i] = (x_cmd[i] - prev[i]) / h
    return True, rate_limit(x_cmd, x, v, c, h, v_cmd, out)
