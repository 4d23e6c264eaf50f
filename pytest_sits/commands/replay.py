"""``sits replay REPORT.json``: recompute every verdict of a stored report from its evidence."""

from __future__ import annotations

import argparse
from typing import Any

from .base import add, err

EXAMPLES = """\
  sits replay sits-report/sits-report.json               exit 0: every verdict reproduced
  sits replay sits-report/sits-report.json --profile=strict.yaml   what a stricter profile would have said
  exit: 0 reproduced, 1 a verdict or the summary differs, a verdict better than ERROR cannot be replayed, or a
        verdict's thresholds are not what the report's profile gives its requirement; 4 not a readable report
"""


def add_parser(sub: Any) -> None:
    p = add(sub, "replay", "recompute every verdict of a report from its stored evidence", EXAMPLES)
    p.add_argument("json", metavar="REPORT.json")
    p.add_argument("--profile", metavar="FILE", help="judge with this profile's thresholds and waivers instead")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Recompute every verdict of a stored report; exit 1 when one would now differ."""
    from ..files import UntrustedInputError
    from ..profiles import ProfileError
    from ..report.replay import replay_report
    from ..report.store import read_report

    try:
        data = read_report(args.json)  # schema-checked: a structurally broken report is a usage error (exit 4)
    except UntrustedInputError as exc:
        return err(str(exc))
    except OSError as exc:
        return err(f"{args.json}: {exc.strerror}; fix: give the path of a sits-report.json")
    try:
        out = replay_report(data, args.profile)
    except ProfileError as exc:
        return err(f"bad profile: {exc}")
    for d in out["differs"]:
        print(f"DIFFERS  #{d['index']} {d['requirement']} [{d['subject']}] {d['field']}: stored {d['stored']!r} -> "
              f"now {d['now']!r}")
    for n in out["not_replayable"]:
        print(f"NOT REPLAYABLE  #{n['index']} {n['requirement']} [{n['subject']}]: {n['why']}")
    for d in out["summary"]:
        print(f"DIFFERS  {d['field']}: stored {d['stored']!r} -> now {d['now']!r}")
    for f in out["thresholds"]:
        where = f"#{f['index']} {f['requirement']} [{f['subject']}]" if f["index"] is not None else f["field"]
        print(f"THRESHOLDS  {where}: {f['why']}")
    for n in out["notes"]:
        where = f"#{n['index']} {n['requirement']} [{n['subject']}]" if n["index"] is not None else n["field"]
        print(f"note  {where}: {n['why']}")
    changed = len({d["index"] for d in out["differs"]})
    print(f"replayed {out['replayed']} of {out['total']} verdicts: {out['replayed'] - changed} reproduced, "
          f"{changed} differ, {len(out['not_replayable'])} not replayable"
          + (f" ({len(out['unbacked'])} of them claim more than ERROR)" if out["unbacked"] else "")
          + (f"; the run's summary differs in {len(out['summary'])} field(s)" if out["summary"] else "")
          + (f"; {len(out['thresholds'])} verdict(s) or profile section(s) disagree with the report's profile"
             if out["thresholds"] else "")
          + (f" (thresholds and waivers of {args.profile})" if args.profile else ""))
    return 1 if changed or out["unbacked"] or out["summary"] or out["thresholds"] else 0
