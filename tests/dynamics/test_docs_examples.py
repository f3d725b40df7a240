"""docs/dynamics.md: every worked example runs as written and prints what the page shows (doctest).

Each ``## `` section is one test, run from the repository's root with the page's imports made
beforehand (a section may use what an earlier one imported, as a reader would).
"""

import doctest
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "dynamics.md"
PREAMBLE = ("import numpy as np\nfrom dynamics import cases, exgit, impact, modal\nfrom dynamics import chain as ch\n"
            "from dynamics import closed_chain as cc\nfrom protocol import config\n")


def sections() -> dict[str, str]:
    parts = re.split(r"^## ", PAGE.read_text(encoding="utf-8"), flags=re.M)[1:]
    return {p.splitlines()[0].strip(): p for p in parts}


def test_the_page_has_the_five_examples():
    names = list(sections())
    assert len(names) == 5, names
    for text in sections().values():
        assert ">>> " in text


@pytest.mark.parametrize("title", list(sections()))
def test_example_runs_and_prints_what_the_page_shows(title, monkeypatch):
    monkeypatch.chdir(ROOT)
    globs: dict = {}
    exec(PREAMBLE, globs)
    test = doctest.DocTestParser().get_doctest(sections()[title], globs, title, str(PAGE), 0)
    assert test.examples, title
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    out: list[str] = []
    runner.run(test, out=out.append)
    assert runner.failures == 0, "".join(out)
