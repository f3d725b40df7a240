"""launch.py report (in progress)."""

from __future__ import annotations

import argparse
import sys


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``launch.py report``."""
    p.add_argument("log", help="MCAP log")


def main(a: argparse.Namespace) -> int:
    """Not yet available."""
    print("berthsim report: not yet available", file=sys.stderr)
    return 2
