"""What every subcommand shares: the usage-error exit status, error lines, YAML output, help with examples."""

from __future__ import annotations

import argparse
import io
import sys
from typing import Any, List

from .. import exitcodes

#: Exit status of a usage error: a bad option, or a file that cannot be what it should be.
USAGE_ERROR = exitcodes.USAGE_ERROR

#: What a child interpreter runs to be pytest: ``python -m pytest`` puts the folder it starts in first on
#: ``sys.path``, where a checkout's source tree would shadow the installed package; this leaves it off.
_RUN_PYTEST = ("import sys\nif sys.path and sys.path[0] in ('', '.'):\n    del sys.path[0]\n"
               "import pytest\nraise SystemExit(pytest.console_main())")


def pytest_argv(python: str = sys.executable) -> List[str]:
    """The start of a command line that runs pytest in a child interpreter (``python``), wherever it starts."""
    return [python, "-c", _RUN_PYTEST]


def err(msg: str) -> int:
    """Print ``sits: error: MSG`` on stderr; return :data:`USAGE_ERROR`."""
    print(f"sits: error: {msg}", file=sys.stderr)
    return USAGE_ERROR


def yaml_text(data: Any) -> str:
    import yaml

    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False, allow_unicode=True, width=110)


def add(sub: Any, name: str, help: str, examples: str, **kw: Any) -> argparse.ArgumentParser:
    """A subcommand parser whose help ends with its examples (``sits NAME --help``)."""
    return sub.add_parser(name, help=help, description=help[:1].upper() + help[1:] + ".",
                          epilog="examples:\n" + examples.rstrip("\n"),
                          formatter_class=argparse.RawDescriptionHelpFormatter, **kw)


class PrintableStream(io.TextIOBase):
    """A text stream that shows control characters as ``\\xNN`` (newlines and tabs pass): the one filter
    between everything a ``sits`` command prints (names, reasons and labels that came from hardware or from
    other people's reports) and the terminal, so no escape sequence in a report can move the cursor, set the
    window title or hide text."""

    def __init__(self, raw: Any):
        self.raw = raw

    def write(self, text: str) -> int:
        from ..report.render import printable

        self.raw.write(printable(text, keep="\n\t"))
        return len(text)

    def flush(self) -> None:
        self.raw.flush()

    def fileno(self) -> int:
        return self.raw.fileno()

    def isatty(self) -> bool:
        return self.raw.isatty()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.raw, "encoding", "utf-8")
