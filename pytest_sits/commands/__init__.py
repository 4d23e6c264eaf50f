"""The ``sits`` subcommands, one module each (as pip's ``commands/``).

Each module has ``add_parser(subparsers)``, which declares its arguments,
help and examples and sets ``func`` to the function that runs it; that
function returns the exit status.  :mod:`pytest_sits.cli` only builds the
parser from :data:`COMMANDS` and dispatches.  Heavy imports stay inside the
functions, so ``sits --help`` is quick.
"""

#: The modules of this package that add subcommands, in the order ``sits --help`` lists them.
COMMANDS = ("profile", "requirements", "inventory", "capture", "audit", "report", "replay", "compare", "fleet", "baseline",
            "health", "bundle")
