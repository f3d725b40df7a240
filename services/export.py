"""launch.py export (in progress)."""

from __future__ import annotations

import argparse
import sys


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``launch.py export``."""
    p.add_argument("log", help="MCAP log")


def main(a: argparse.Namespace) -> int:
    """Not yet available."""
    print("berthsim export: not yet available", file=sys.stderr)
    return 2
