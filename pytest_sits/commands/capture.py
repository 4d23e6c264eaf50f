"""``sits capture DIR``: a snapshot of this machine's evidence, to run the suite on elsewhere."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from .base import add, err

EXAMPLES = """\
  sudo sits capture node7-snapshot       as root, PCI config space beyond 64 bytes is captured too
  pytest --sits-platform=snapshot:node7-snapshot --sits-profile=h100
"""


def add_parser(sub: Any) -> None:
    p = add(sub, "capture", "store this machine's evidence as a snapshot", EXAMPLES)
    p.add_argument("dir", help="a new folder (or an empty one of yours)")
    p.add_argument("--root", default="/", help=argparse.SUPPRESS)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..platforms import PlatformError
    from ..platforms.snapshot import capture

    try:
        manifest = capture(Path(args.dir), Path(args.root))
    except PlatformError as exc:
        return err(str(exc))
    print(f"captured {manifest['files']} files into {args.dir} "
          f"({len(manifest['unreadable'])} unreadable); run the suite on it with "
          f"--sits-platform snapshot:{args.dir}")
    if manifest.get("euid") not in (0, None):
        print("note: not root, so PCI config space beyond 64 bytes was not readable; topology checks on this "
              "snapshot will infer port types from class codes", file=sys.stderr)
    return 0
