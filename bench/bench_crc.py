"""Residual error of the native frames' CRC-16 under random bit flips (prints JSON).

Each trial encodes one SETPOINT_AXES frame (six leg lengths in the stroke, random seq
and time stamp, the host's frame at 250 Hz), flips k distinct random bits, k drawn
uniformly from 2…12, and decodes the result as the rig does. Two places for the flips:

- ``wire``: anywhere in the COBS-encoded frame and its delimiter, decoded by
  :class:`hil.framing.FrameDecoder` (COBS, length, CRC, version, type and payload checks
  together; a flipped delimiter merges the frame with the next one);
- ``raw``: in header ‖ payload ‖ CRC, so that only the CRC and the payload's own checks
  stand between a corrupted frame and the rig.

For every corrupted frame that still decodes: whether it is a setpoint, whether the
rig's stroke check refuses it (a LIMIT fault), whether the step gate refuses it (an axis
farther from the sent value than the hard speed limit covers within the default
watchdog: 1.5 × 0.5 m/s × 20 ms = 15 mm, :meth:`hil.rig.RigCore.plausible`),
whether its seq or time stamp changed, and the largest axis error of those left.

Run from the repository root::

    python bench/bench_crc.py [--frames 2000000] [--seed 1]

Not a test: it prints figures (``hil/PROTOCOL.md`` quotes them).
"""

from __future__ import annotations

import argparse
import json
import random
import struct
import sys
import time
from pathlib import Path

from cobs import cobs

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from errors import FrameError  # noqa: E402
from hil.config import parse  # noqa: E402
from hil.framing import FrameDecoder, SetpointAxes, decode_frame, encode_frame  # noqa: E402


def trial_counts(frames: int, where: str, seed: int) -> dict:
    """Flip 2…12 bits of ``frames`` setpoint frames at ``where`` (wire | raw); what got through."""
    cfg = parse({})
    lo, hi = cfg.limits.lo.tolist(), cfg.limits.hi.tolist()
    reach = 1.5 * 0.5 * 0.020 + 1e-6  # hard speed limit × default watchdog at 250 Hz [m]
    rng = random.Random(seed)
    tried = {k: 0 for k in range(2, 13)}
    passed = {k: 0 for k in range(2, 13)}
    out = {"setpoints": 0, "stroke_refused": 0, "step_refused": 0, "seq_changed": 0, "time_changed": 0,
           "applied_wrong": 0, "applied_wrong_max_m": 0.0, "other_messages": 0}
    t0 = time.monotonic()
    for _ in range(frames):
        sent = struct.unpack("<6f", struct.pack("<6f", *(rng.uniform(0.45, 0.65) for _ in range(6))))
        seq, t_us = rng.randrange(1 << 16), rng.randrange(1 << 32)
        wire = encode_frame(SetpointAxes(sent), seq, t_us)
        buf = bytearray(wire if where == "wire" else cobs.decode(wire[:-1]))
        k = rng.randint(2, 12)
        for bit in rng.sample(range(8 * len(buf)), k):
            buf[bit >> 3] ^= 1 << (bit & 7)
        tried[k] += 1
        if where == "wire":
            got = FrameDecoder().feed(bytes(buf) + b"\x00")  # the next frame's delimiter ends a merged chunk
        else:
            try:
                got = [decode_frame(cobs.encode(bytes(buf)))]
            except FrameError:
                got = []
        passed[k] += len(got)
        for f in got:
            if not isinstance(f.msg, SetpointAxes) or len(f.msg.values) != 6:
                out["other_messages"] += 1
                continue
            out["setpoints"] += 1
            out["seq_changed"] += f.seq != seq
            out["time_changed"] += f.time_us != t_us
            err = [abs(a - b) for a, b in zip(f.msg.values, sent, strict=True)]
            if max(err) > reach:
                out["step_refused"] += 1
            elif any(not lo[i] <= v <= hi[i] for i, v in enumerate(f.msg.values)):
                out["stroke_refused"] += 1
            elif max(err) > 0:
                out["applied_wrong"] += 1
                out["applied_wrong_max_m"] = max(out["applied_wrong_max_m"], max(err))
    total = sum(passed.values())
    return {"where": where, "frames": frames, "seconds": round(time.monotonic() - t0, 1), "passed": total,
            "pass_rate": total / frames, "pass_by_flips": {k: [passed[k], tried[k]] for k in tried}, **out}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--frames", type=int, default=2_000_000)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    print(json.dumps({"crc_residual": [trial_counts(a.frames, w, a.seed) for w in ("wire", "raw")]}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
