"""The coupling's wrench transports (protocol imports nothing of dynamics: twins of the spatial module's)
equal to the bit to :func:`dynamics.spatial.refer_wrench_rows` and :func:`dynamics.spatial.shift_wrench_rows`,
and through them to the np.cross specification, signed zeros included."""

from __future__ import annotations

import itertools
import struct

import numpy as np

from dynamics import spatial as sp
from protocol import coupling as cp


def bits(x) -> bytes:
    return struct.pack(f"{len(x)}d", *[float(v) for v in x])


def test_twins_equal_the_spatial_kernels_to_the_bit():
    rng = np.random.default_rng(3)
    cases = [(rng.normal(size=6) * 10.0 ** rng.integers(-3, 6, size=6), rng.normal(size=3) * 10.0)
             for _ in range(200)]
    vals = (0.0, -0.0, 1.5, -2.5)
    cases += [(np.array(F), np.array(p)) for F in itertools.product(*[vals[:3]] * 3, *[vals] * 3)
              for p in ([0.0, 0.0, 0.0], [-0.0, 0.0, 2.0], [1.0, -0.0, 0.0])]
    for F, p in cases:
        Fl, pl = F.tolist(), p.tolist()
        refer, shift = cp._refer_wrench_rows(Fl, pl), cp._shift_wrench_rows(Fl, pl)
        assert bits(refer) == bits(sp.refer_wrench_rows(Fl, pl))
        assert bits(shift) == bits(sp.shift_wrench_rows(Fl, pl))
        assert bits(refer) == bits(np.concatenate([F[:3] + np.cross(p, F[3:]), F[3:]]))
        assert bits(shift) == bits(np.concatenate([F[:3] - np.cross(p, F[3:]), F[3:]]))
