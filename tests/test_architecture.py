"""The layering (import-linter contracts in pyproject.toml) and the tree's lint state (ruff)."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def _tool(name):
    exe = BIN / name
    if not exe.exists():
        found = shutil.which(name)
        if not found:
            pytest.skip(f"{name} is not installed: pip install -e '.[test]'")
        exe = Path(found)
    return str(exe)


def _lint_imports(cwd, pythonpath, config=None):
    env = dict(os.environ, PYTHONPATH=str(pythonpath))
    cmd = [_tool("lint-imports"), "--no-cache"] + (["--config", str(config)] if config else [])
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_layer_contracts_hold():
    res = _lint_imports(ROOT, ROOT)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "BROKEN" not in res.stdout and "0 broken" in res.stdout


@pytest.mark.parametrize("module,line", [
    ("probes/sysfs.py", "from ..checks import inventory as _violation  # noqa: F401"),
    ("probes/pcie.py", "from .. import plugin as _violation  # noqa: F401"),
    ("checks/inventory.py", "from ..conditions import loads as _violation  # noqa: F401"),
    ("checks/topology.py", "import pytest as _violation  # noqa: F401"),
    ("checks/bandwidth.py", "import time as _violation  # noqa: F401"),
    ("probes/sysfs.py", "from .. import fleet as _violation  # noqa: F401"),
    ("report.py", "from . import session as _violation  # noqa: F401"),
])
def test_layer_contracts_fail_on_a_violation(tmp_path, module, line):
    shutil.copytree(ROOT / "pytest_sits", tmp_path / "pytest_sits",
                    ignore=shutil.ignore_patterns("__pycache__"))
    target = tmp_path / "pytest_sits" / module
    target.write_text(target.read_text() + "\n" + line + "\n")
    config = tmp_path / "pyproject.toml"
    config.write_text((ROOT / "pyproject.toml").read_text())
    res = _lint_imports(tmp_path, tmp_path, config)
    assert res.returncode != 0, res.stdout
    assert "BROKEN" in res.stdout


def test_tree_is_clean_under_ruff():
    res = subprocess.run([_tool("ruff"), "check", "pytest_sits", "conformance", "tests", "benchmarks"], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout[-4000:]


def test_every_package_is_shipped():
    """A non-editable install ships only the packages pyproject.toml lists: every folder of the code is there."""
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "pytest_sits").rglob("__init__.py")
             if "__pycache__" not in p.parts}
    assert found - listed == set(), f"add to [tool.setuptools] packages: {sorted(found - listed)}"


def test_conformance_modules_are_declarative():
    """A conformance module imports checks and acquire functions, never a probe, and defines no fixture."""
    import ast

    for path in sorted((ROOT / "conformance").glob("test_*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert ".probes" not in node.module and ".platforms" not in node.module, f"{path.name}: {node.module}"
            if isinstance(node, ast.FunctionDef):
                names = {ast.unparse(d) for d in node.decorator_list}
                assert not any(n.startswith("pytest.fixture") for n in names), f"{path.name}: fixture {node.name}"


def test_readme_lists_every_sim_fault():
    from pytest_sits.platforms.sim.faults import FAULTS

    text = (ROOT / "README.md").read_text()
    missing = [f for f in FAULTS if f"`{f}`" not in text]
    assert not missing, f"README's Platforms section does not list: {missing}"
