"""The repository stands alone: every file it reads ships inside it, and no file points outside.

A fresh clone with no sibling folders must run and test: the robot models are package
data (:func:`dynamics.cases.reference_path`), and no tracked file refers to a folder
beside the checkout.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from dynamics.cases import reference_path

ROOT = Path(__file__).resolve().parents[1]
# Written in two pieces so that this file does not match itself.
OUTSIDE = ("../" + "shared", "/work/" + "shared")
SKIP_DIRS = {".git", ".venv", "venv", "__pycache__", ".pytest_cache", "runs", "build", "dist"}


def tracked_files(root: Path) -> list[Path]:
    """The files of the checkout: ``git ls-files`` in a git work tree, else a walk of the tree."""
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        out = None
    if out is not None and out.returncode == 0 and out.stdout:
        return [root / p for p in out.stdout.decode().split("\0") if p]
    files = []
    for d, dirs, names in os.walk(root):
        dirs[:] = [x for x in dirs if x not in SKIP_DIRS and not x.endswith(".egg-info")]
        files += [Path(d) / n for n in names if not n.endswith((".pyc", ".mcap"))]
    return files


def outside_references(root: Path) -> list[str]:
    """``path:line`` of every line of a tracked file that names a folder outside the checkout."""
    hits = []
    for path in tracked_files(root):
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue  # binary or vanished: nothing a reader follows
        for i, line in enumerate(text.splitlines(), 1):
            if any(o in line for o in OUTSIDE):
                hits.append(f"{path.relative_to(root)}:{i}: {line.strip()[:100]}")
    return hits


def test_no_tracked_file_refers_outside_the_repo():
    hits = outside_references(ROOT)
    assert not hits, "files that refer to a folder beside the repo:\n" + "\n".join(hits)


def test_the_check_finds_a_reference(tmp_path):
    """The scan itself can fail: a planted reference in a walked tree is found, by file and line."""
    (tmp_path / "a.py").write_text('"""Docs."""\nX = 1\n')
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.toml").write_text("# see " + OUTSIDE[0] + "/reference/README.md\n")
    assert outside_references(tmp_path) == ["sub/b.toml:1: # see " + OUTSIDE[0] + "/reference/README.md"]


@pytest.mark.parametrize("name", ["SRMS_Canadarm.urdf", "ETSVII.urdf", "README.md"])
def test_reference_files_are_package_data_with_their_source(name):
    path = reference_path(name)
    assert path.is_file() and path.is_relative_to(ROOT / "dynamics")
    head = path.read_text(encoding="utf-8")[:2000]
    assert any(word in head for word in ("after:", "after Nguyen", "Yoshida")), f"{name}: no source in its header"


def test_package_data_is_declared():
    """pyproject ships dynamics/data/ with the package (an install from a wheel has it too)."""
    import tomllib
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())
    globs = cfg["tool"]["setuptools"]["package-data"]["dynamics"]
    data = ROOT / "dynamics" / "data"
    shipped = {p.name for g in globs for p in data.glob(g.removeprefix("data/"))}
    assert {"SRMS_Canadarm.urdf", "ETSVII.urdf", "README.md"} <= shipped
