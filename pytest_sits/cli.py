"""The ``sits`` command: builds the parser from :mod:`pytest_sits.commands` and dispatches.

Each subcommand lives in its own module of ``pytest_sits/commands/`` (its
arguments, help, examples and code); ``sits COMMAND --help`` shows them.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import List, Optional

from . import __version__
from .commands import COMMANDS


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="sits", description="pytest-sits: SITS2026 conformance tools",
                                 epilog="`sits COMMAND --help` shows a command's options and examples; the suite "
                                        "itself runs under pytest: `pytest --sits-profile=NAME`")
    ap.add_argument("--version", action="version", version=f"sits (pytest-sits) {__version__}")
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"{__package__}.commands.{name}").add_parser(sub)
    return ap


def main(argv: Optional[List[str]] = None) -> int:
    from .commands.base import PrintableStream

    args = build_parser().parse_args(argv)
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = PrintableStream(out), PrintableStream(err)
    try:
        return args.func(args)
    except BrokenPipeError:  # `sits ... | head`: the reader left; no traceback
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), out.fileno())
        return 1
    finally:
        sys.stdout, sys.stderr = out, err


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
