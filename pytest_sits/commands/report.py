"""``sits report validate|render``: check a stored report against its schema, or render it again."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from .base import add, err

EXAMPLES = """\
  sits report validate sits-report/sits-report.json     exit 0 valid, 1 schema errors (listed), 4 not a report
  sits report render sits-report/sits-report.json --html=report.html --markdown=report.md
  sits report render sits-report/sits-report.json       the terminal summary
"""


def add_parser(sub: Any) -> None:
    p = add(sub, "report", "validate or re-render a stored JSON report", EXAMPLES)
    p.add_argument("action", choices=["validate", "render"])
    p.add_argument("json", metavar="REPORT.json")
    p.add_argument("--html", metavar="OUT")
    p.add_argument("--markdown", metavar="OUT")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..files import UntrustedInputError, atomic_write
    from ..report.model import validate
    from ..report.render import render_html, render_markdown, terminal_lines
    from ..report.store import read_report

    try:
        data = read_report(args.json, check_schema=False)
    except UntrustedInputError as exc:
        return err(str(exc))
    except OSError as exc:
        return err(f"{args.json}: {exc.strerror}; fix: give the path of a sits-report.json")
    errors = validate(data)
    if errors:
        for e in errors[:20]:
            print(f"{args.json}: {e}", file=sys.stderr)
        if args.action == "render":
            return err(f"{args.json}: does not match the report schema, so it is not rendered; fix: give the "
                       "sits-report.json a run wrote")
        return 1
    if args.action == "validate":
        print(f"{args.json}: valid report (schema {data['schema_version']}), result {data['summary']['result']}")
        return 0
    if args.html:
        atomic_write(Path(args.html), render_html(data))
    if args.markdown:
        atomic_write(Path(args.markdown), render_markdown(data))
    if not args.html and not args.markdown:
        print("\n".join(terminal_lines(data)))
    return 0
