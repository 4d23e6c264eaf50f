"""``sits requirements``: the SITS2026 catalogue."""

from __future__ import annotations

import argparse
from typing import Any

from .base import add

EXAMPLES = """\
  sits requirements                      every requirement: ID, level, platforms that decide it, title, source
  sits requirements | grep standard      those a standard run adds
  sits requirements --id=DEP-ECC         one requirement whole: its thresholds with defaults, cost, faults
"""


def add_parser(sub: Any) -> None:
    p = add(sub, "requirements", "list the SITS2026 requirement catalogue", EXAMPLES)
    p.add_argument("--id", metavar="ID", help="show one requirement's whole declaration")
    p.set_defaults(func=run)


def _platforms(r: Any) -> str:
    from ..catalogue import PLATFORMS

    return ",".join(p for p in PLATFORMS if p in r.platforms)


def run(args: argparse.Namespace) -> int:
    from ..catalogue import CATALOGUE
    from ..catalogue.generate import flow
    from .base import err

    if args.id:
        r = CATALOGUE.get(args.id)
        if r is None:
            import difflib

            near = difflib.get_close_matches(args.id.upper(), list(CATALOGUE), n=1)
            return err(f"no requirement {args.id!r}; fix: " + (f"did you mean {near[0]}?" if near
                                                               else "`sits requirements` lists them"))
        print(f"{r.id}: {r.title} ({r.source}){' [suite extension]' if r.extension else ''}")
        print(f"  level {r.level}, one verdict per {r.scope}, family {r.family}; decided on {_platforms(r)}")
        print(f"  fails on sim faults: {', '.join(r.faults) or 'none: ' + str(r.no_fault)}")
        if r.trials is not None:
            print(f"  measured in trials: {r.trials.trial}")
        for key, t in r.threshold_keys.items():
            print(f"  {key}: {flow(t.default)}" + (f"    # {t.help}" if t.help else ""))
        return 0
    for r in CATALOGUE.values():
        state = "implemented" if r.implemented else "not implemented"
        ext = " [suite extension]" if r.extension else ""
        print(f"{r.id:18} {r.level:8} {_platforms(r):26} {state:16} {r.title} ({r.source}){ext}")
    return 0
