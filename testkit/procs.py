"""Processes of a run as ``/proc`` shows them: their command lines and parents (Linux).

A worker forked from the zygote (:mod:`protocol.zygote`) shows its ``launch.py _worker …`` command line as its
title, the words separated by spaces; a started process shows its argv, separated by NULs. :func:`argv_of`
reads either as words. Its parent is the zygote, whose parent is the launcher: :func:`descends_from`.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["argv_of", "descends_from", "parent_of"]


def argv_of(pid: int | str) -> list[bytes]:
    """The command line of process ``pid`` as words ([] if it is gone)."""
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").split()
    except OSError:
        return []


def parent_of(pid: int | str) -> int:
    """The parent pid of ``pid`` (0 if it is gone)."""
    try:
        return int((Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def descends_from(pid: int | str, ancestor: int, depth: int = 3) -> bool:
    """Whether ``ancestor`` is the parent of ``pid``, or its parent's, within ``depth`` generations."""
    p = int(pid)
    for _ in range(depth):
        p = parent_of(p)
        if p == ancestor:
            return True
        if p <= 1:
            return False
    return False
