"""``sits profile validate|list|show|schema``: hardware profiles."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from .base import USAGE_ERROR, add, err, yaml_text

EXAMPLES = """\
  sits profile list                      the bundled profiles
  sits profile validate my-server.yaml   check a profile (exit 4 naming the file, line and fix)
  sits profile show h100                 the resolved profile (its extends chain merged), as YAML
  sits profile schema > profile.schema.json
"""


def add_parser(sub: Any) -> None:
    p = add(sub, "profile", "validate, list, show profiles", EXAMPLES)
    p.add_argument("action", choices=["validate", "list", "show", "schema"])
    p.add_argument("files", nargs="*", metavar="NAME|FILE")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from .. import profiles

    if args.action == "list":
        for name in profiles.bundled_names():
            p = profiles.resolve(name)
            print(f"{name:16} {p.data.get('description', '')}")
        return 0
    if args.action == "schema":
        print(json.dumps(profiles.profile_schema(), indent=2, sort_keys=True))
        return 0
    if not args.files:
        return err(f"`sits profile {args.action}` needs a profile name or file")
    status = 0
    for spec in args.files:
        try:
            p = profiles.resolve(spec)
        except profiles.ProfileError as exc:
            print(f"sits: {exc}", file=sys.stderr)
            status = USAGE_ERROR
            continue
        if args.action == "validate":
            print(f"{spec}: ok (profile {p.name}, chain {' -> '.join(Path(c).name for c in p.chain)})")
        else:
            print(yaml_text(p.data), end="")
    return status
