"""``sits requirements``: the SITS2026 catalogue."""

from __future__ import annotations

import argparse
from typing import Any

from .base import add

EXAMPLES = """\
  sits requirements                      every requirement: ID, level, implemented, title, source
  sits requirements | grep standard      those a standard run adds
"""


def add_parser(sub: Any) -> None:
    add(sub, "requirements", "list the SITS2026 requirement catalogue", EXAMPLES).set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..catalogue import CATALOGUE

    for r in CATALOGUE.values():
        state = "implemented" if r.implemented else "not implemented"
        ext = " [suite extension]" if r.extension else ""
        print(f"{r.id:18} {r.level:8} {state:16} {r.title} ({r.source}){ext}")
    return 0
