"""Shared helpers of the HIL tests: the test vectors parsed out of hil/PROTOCOL.md."""

from __future__ import annotations

import json
import re
from pathlib import Path

PROTOCOL_MD = Path(__file__).resolve().parents[2] / "hil" / "PROTOCOL.md"


def protocol_vectors() -> list[dict]:
    """Every JSON line of every ```vectors block of PROTOCOL.md."""
    text = PROTOCOL_MD.read_text(encoding="utf-8")
    blocks = re.findall(r"```vectors\n(.*?)```", text, flags=re.S)
    return [json.loads(line) for block in blocks for line in block.splitlines() if line.strip()]
