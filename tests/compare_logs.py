"""Are two runs' logs bit-identical, message by message, apart from the wall clock?

For refactors that must not change results (a model's state moved into an explicit object,
a hot path rewritten): run the default scenario before and after, then

    python -m tests.compare_logs before.mcap after.mcap

Every topic but ``sim/*`` (the runtime's statistics), every message's envelope and body
byte for byte with ``wall_ns`` set to 0 (:func:`tests.test_main_job._messages`). Prints the
first difference per topic and exits 1, or ``identical`` and 0.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tests.test_main_job import _messages


def by_topic(frames: list[bytes]) -> dict[bytes, list[bytes]]:
    """Frames (``topic\\0body``, as published) grouped by topic, bodies in publication order."""
    out: dict[bytes, list[bytes]] = {}
    for f in frames:
        i = f.index(b"\0")
        out.setdefault(f[:i], []).append(f[i + 1:])
    return out


def differences(a: Path, b: Path) -> list[str]:
    """One line per topic that differs (missing on one side, message count, first differing message)."""
    ma, mb = _messages(a), _messages(b)
    out = [f"{t}: only in {a if t in ma else b}" for t in sorted(set(ma) ^ set(mb))]
    for t in sorted(set(ma) & set(mb)):
        x, y = ma[t], mb[t]
        if len(x) != len(y):
            out.append(f"{t}: {len(x)} messages against {len(y)}")
            continue
        for i, (u, v) in enumerate(zip(x, y, strict=True)):
            if u != v:
                out.append(f"{t}: message {i} (t = {u[0]} ns) differs")
                break
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m tests.compare_logs A.mcap B.mcap", file=sys.stderr)
        return 2
    diff = differences(Path(argv[0]), Path(argv[1]))
    print("\n".join(diff) if diff else "identical")
    return 1 if diff else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
