"""Other rig formats, selectable instead of the native protocol (``hil/PROTOCOL.md`` §3–4).

Both map axis values (Stewart leg lengths [m] or servo positions) linearly from a
configured range ``[lo, hi]`` per axis onto unsigned integers:

- :class:`BinaryAxisEncoder` — the fixed binary 6-axis frame hobby Stewart platforms
  take: two start bytes, six u16 big-endian axis values, an 8-bit additive checksum;
- :class:`AsciiAxisEncoder` — the ASCII axis strings motion-platform software sends
  (``A512B512C512D512E512F512\\n`` style: a letter per axis, a decimal value).

These formats carry no sequence number, time or CRC: no round-trip delay can be
measured and a corrupted frame is detected only by its checksum or syntax.
Pure functions of their arguments; no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from errors import ConfigError, FrameError, ShapeError

__all__ = ["AxisRange", "BinaryAxisEncoder", "AsciiAxisEncoder", "make_encoder", "ENCODERS"]


@dataclass(frozen=True)
class AxisRange:
    """Linear map of axis values from ``[lo, hi]`` (per axis) onto ``0 … full``.

    Raises
    ------
    ConfigError
        If ``lo`` and ``hi`` differ in length or some ``hi <= lo``.
    """

    lo: tuple[float, ...]
    hi: tuple[float, ...]
    full: int

    def __post_init__(self) -> None:
        if len(self.lo) != len(self.hi) or not self.lo:
            raise ConfigError(f"axis range: lo {list(self.lo)} and hi {list(self.hi)} differ in length")
        bad = [i for i, (a, b) in enumerate(zip(self.lo, self.hi, strict=True)) if not b > a]
        if bad:
            raise ConfigError(f"axis range: hi must exceed lo on axes {bad}: lo {list(self.lo)}, hi {list(self.hi)}")

    @property
    def n(self) -> int:
        """Number of axes."""
        return len(self.lo)

    def to_counts(self, values: ArrayLike) -> NDArray[np.int64]:
        """Axis values → integer counts, clipped into ``0 … full``.

        Raises
        ------
        ShapeError
            If ``values`` is not (n,) or not finite.
        """
        v = np.asarray(values, dtype=np.float64)
        if v.shape != (self.n,) or not np.all(np.isfinite(v)):
            raise ShapeError(f"axis values: expected {self.n} finite values, got {v.tolist()}")
        lo, hi = np.asarray(self.lo), np.asarray(self.hi)
        return np.clip(np.rint((v - lo) / (hi - lo) * self.full), 0, self.full).astype(np.int64)

    def from_counts(self, counts: ArrayLike) -> NDArray[np.float64]:
        """Integer counts → axis values (the inverse map, up to one count of resolution)."""
        c = np.asarray(counts, dtype=np.float64)
        lo, hi = np.asarray(self.lo), np.asarray(self.hi)
        return lo + c / self.full * (hi - lo)


@dataclass(frozen=True)
class BinaryAxisEncoder:
    """Fixed binary frame: ``start ‖ n × u16 big-endian ‖ checksum``.

    The checksum is the sum of the 2n value bytes modulo 256 (PROTOCOL.md §3).
    """

    axes: AxisRange
    start: bytes = b"\xAA\x55"

    def encode(self, values: ArrayLike) -> bytes:
        """Axis values (n,) → one frame."""
        body = b"".join(int(c).to_bytes(2, "big") for c in self.axes.to_counts(values))
        return self.start + body + bytes([sum(body) & 0xFF])

    def decode(self, frame: bytes) -> NDArray[np.float64]:
        """One frame → axis values (n,).

        Raises
        ------
        FrameError
            On wrong start bytes, length or checksum.
        """
        n = self.axes.n
        size = len(self.start) + 2 * n + 1
        if len(frame) != size or not frame.startswith(self.start):
            raise FrameError(f"binary axis frame: expected {size} bytes starting {self.start.hex()}, got {frame.hex()}")
        body = frame[len(self.start) : -1]
        if sum(body) & 0xFF != frame[-1]:
            raise FrameError(f"binary axis frame: checksum 0x{frame[-1]:02X} != 0x{sum(body) & 0xFF:02X}")
        return self.axes.from_counts([int.from_bytes(body[2 * i : 2 * i + 2], "big") for i in range(n)])

    @property
    def frame_size(self) -> int:
        """Bytes per frame on the wire."""
        return len(self.start) + 2 * self.axes.n + 1


@dataclass(frozen=True)
class AsciiAxisEncoder:
    """ASCII axis string: ``<letter><decimal>`` per axis, separated, terminated (PROTOCOL.md §4).

    Attributes
    ----------
    axes : AxisRange
        ``full`` is ``2**bits − 1`` (e.g. 1023 for 10-bit values).
    letters : str
        One letter per axis (default ``ABCDEF``).
    separator, terminator : str
    """

    axes: AxisRange
    letters: str = "ABCDEF"
    separator: str = ""
    terminator: str = "\n"

    def __post_init__(self) -> None:
        if len(self.letters) != self.axes.n or len(set(self.letters)) != self.axes.n:
            raise ConfigError(f"ascii encoder: letters {self.letters!r} must be {self.axes.n} distinct characters")

    def encode(self, values: ArrayLike) -> bytes:
        """Axis values (n,) → one ASCII line."""
        counts = self.axes.to_counts(values)
        text = self.separator.join(f"{a}{int(c)}" for a, c in zip(self.letters, counts, strict=True))
        return (text + self.terminator).encode("ascii")

    def decode(self, line: bytes) -> NDArray[np.float64]:
        """One ASCII line → axis values (n,).

        Raises
        ------
        FrameError
            If the line does not match the format or a value exceeds the range.
        """
        sep = re.escape(self.separator)
        pat = sep.join(f"{re.escape(a)}([0-9]{{1,6}})" for a in self.letters) + re.escape(self.terminator)
        m = re.fullmatch(pat.encode("ascii"), line)
        if m is None:
            raise FrameError(f"ascii axis line: does not match the format: {line!r}")
        counts = [int(g) for g in m.groups()]
        if max(counts) > self.axes.full:
            raise FrameError(f"ascii axis line: value {max(counts)} exceeds {self.axes.full}")
        return self.axes.from_counts(counts)

    @property
    def frame_size(self) -> int:
        """Longest line in bytes."""
        digits = len(str(self.axes.full))
        return self.axes.n * (1 + digits) + (self.axes.n - 1) * len(self.separator) + len(self.terminator)


ENCODERS = ("native", "binary6", "ascii")


def make_encoder(kind: str, lo: ArrayLike, hi: ArrayLike, *, bits: int = 10) -> BinaryAxisEncoder | AsciiAxisEncoder:
    """The axis encoder named ``kind`` (``binary6`` or ``ascii``) over the range ``[lo, hi]``.

    Raises
    ------
    ConfigError
        If ``kind`` is not known, or the range is invalid.
    """
    rng_lo = tuple(float(x) for x in np.ravel(lo))
    rng_hi = tuple(float(x) for x in np.ravel(hi))
    if kind == "binary6":
        return BinaryAxisEncoder(AxisRange(rng_lo, rng_hi, 0xFFFF))
    if kind == "ascii":
        if not 4 <= bits <= 16:
            raise ConfigError(f"hil.ascii_bits: must be 4..16, got {bits}")
        return AsciiAxisEncoder(AxisRange(rng_lo, rng_hi, (1 << bits) - 1), letters="ABCDEFGHIJKLMNOP"[: len(rng_lo)])
    raise ConfigError(f"hil.format: unknown encoder {kind!r}, expected one of {ENCODERS}")
