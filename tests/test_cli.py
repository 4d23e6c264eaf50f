"""The `sits` command: one module per subcommand, `--version`, an example in every subcommand's help."""

import argparse

import pytest

from pytest_sits import __version__
from pytest_sits.cli import build_parser, main
from pytest_sits.commands import COMMANDS


def _subparsers(parser):
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices


def test_version(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0 and capsys.readouterr().out.strip() == f"sits (pytest-sits) {__version__}"


def test_every_subcommand_help_has_an_example():
    for name, sub in _subparsers(build_parser()).items():
        text = sub.format_help()
        assert "examples:" in text and "sits " in text.split("examples:", 1)[1], name


def test_every_command_module_adds_its_parser():
    import importlib

    names = set(_subparsers(build_parser()))
    for module in COMMANDS:
        mod = importlib.import_module(f"pytest_sits.commands.{module}")
        assert callable(mod.add_parser), module
    assert {"profile", "replay", "compare", "fleet", "health", "bundle", "verify", "keygen", "audit-text",
            "report", "capture", "inventory", "requirements"} <= names
