"""Float kernels live in ``dynamics/``: ``.tolist()`` outside the message boundary only shrinks.

A ``.tolist()`` in a service, the hil package or the runtime is one of two things: a message body,
an event or a file record made of an array (the *message boundary*, allowed), or an array turned
into Python floats for arithmetic unrolled by hand, a float kernel that belongs in ``dynamics/``
beside its ndarray specification and tested against it (issue "one declared service contract",
item 5). The modules of the first kind are listed in :data:`BOUNDARY`. Every other module has a
budget, its count when this test was written: a new use fails the test, and so does a module whose
uses fell without its budget lowered with it (the budget only moves down).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

BOUNDARY = frozenset({
    # what the bus, the logs and the exporters carry: arrays to message bodies, records and files
    "protocol/bus.py", "protocol/codec.py", "protocol/logfile.py",
    "services/logger.py", "services/replay.py", "services/viewer.py",
    "services/export_foxglove.py", "services/export_scene.py", "services/ros2_encoding.py",
    "hil/emulator.py",  # the emulator's statistics (JSON)
})

BUDGET = {
    "services/arm.py": 30,
    "hil/rig.py": 17,
    "services/contact.py": 9,
    "hil/bridge.py": 9,
    "hil/safety.py": 8,
    "services/orbiter.py": 7,
    "hil/delay.py": 5,
    "protocol/coupling.py": 4,
    "hil/rigproto.py": 2,
    "hil/encoders.py": 1,
}
"""Uses outside the boundary, per module, when the test was written (154; 111 once the rig kinematics moved to
``dynamics.stewart`` and the mock-ups' contact, load and F/T sensor to ``dynamics.mockup``); lower a budget
when a kernel moves to ``dynamics/``."""


def count_tolist(source: str) -> int:
    """``.tolist()`` calls in Python source (its syntax tree: not a name, an attribute read or a string)."""
    return sum(1 for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Call)
               and isinstance(node.func, ast.Attribute) and node.func.attr == "tolist")


def tolist_counts() -> dict[str, int]:
    """``.tolist()`` calls per module of ``services/``, ``hil/`` and ``protocol/``."""
    out: dict[str, int] = {}
    for pkg in ("services", "hil", "protocol"):
        for path in sorted((ROOT / pkg).glob("*.py")):
            n = count_tolist(path.read_text(encoding="utf-8"))
            if n:
                out[path.relative_to(ROOT).as_posix()] = n
    return out


def test_tolist_outside_the_message_boundary_only_shrinks() -> None:
    counts = {m: n for m, n in tolist_counts().items() if m not in BOUNDARY}
    grown = {m: (n, BUDGET.get(m, 0)) for m, n in counts.items() if n > BUDGET.get(m, 0)}
    assert not grown, (f".tolist() beyond its module's budget (uses, budget): {grown}. Put the float kernel in "
                       "dynamics/ beside its ndarray specification (tested against it), or, for a message body, "
                       "in a module of the message boundary")
    fell = {m: (counts.get(m, 0), b) for m, b in BUDGET.items() if counts.get(m, 0) < b}
    assert not fell, f"uses fell below the budget (uses, budget): {fell}; lower the budget in this test to match"


def test_the_count_sees_a_use() -> None:
    """The counter finds a call, not a name or a string (so that the budget test can fail)."""
    assert count_tolist("a.tolist()\nb = 'x.tolist()'\nc = d.tolist\ne = f(g.tolist())\n") == 2
