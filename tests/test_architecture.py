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
    ("probes/sysfs.py", "from ..commands import fleet as _violation  # noqa: F401"),
    ("report/model.py", "from ..plugin import session as _violation  # noqa: F401"),
    ("report/render.py", "import pytest as _violation  # noqa: F401"),
    ("files.py", "from . import verdict as _violation  # noqa: F401"),
    ("commands/compare.py", "from ..plugin import recorder as _violation  # noqa: F401"),
    ("conditions/health.py", "import pynvml as _violation  # noqa: F401"),
    ("platforms/live.py", "import amdsmi as _violation  # noqa: F401"),
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


def _contract_layers():
    import tomllib

    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    layers = next(c for c in contracts if c["type"] == "layers")["layers"]
    return [sorted(m.strip() for m in row.split("|")) for row in layers]


def test_contracts_cover_every_top_level_module():
    """Every module and package at the top of pytest_sits/ has a place in the layers (data folders aside)."""
    named = {m for row in _contract_layers() for m in row}
    data = {"resources", "__init__"}
    top = {p.stem for p in (ROOT / "pytest_sits").iterdir()
           if (p.suffix == ".py" or (p.is_dir() and (p / "__init__.py").exists())) and p.stem not in data}
    missing = sorted(f"pytest_sits.{m}" for m in top if f"pytest_sits.{m}" not in named)
    assert not missing, f"add to the layers contract in pyproject.toml (and docs/architecture.md): {missing}"


def test_only_the_probes_may_import_the_management_libraries():
    """The contract that keeps pynvml and amdsmi in the probes names every other top-level module and package."""
    import tomllib

    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    vendor = next(c for c in contracts if c["type"] == "forbidden" and "pynvml" in c["forbidden_modules"])
    assert sorted(vendor["forbidden_modules"]) == ["amdsmi", "pynvml"]
    others = {m for row in _contract_layers() for m in row} - {"pytest_sits.probes"}
    assert sorted(others - set(vendor["source_modules"])) == []
    assert "pytest_sits.probes" not in vendor["source_modules"]


def test_top_level_holds_at_most_eight_modules():
    modules = sorted(p.name for p in (ROOT / "pytest_sits").glob("*.py"))
    assert len(modules) <= 8, f"pytest_sits/ holds {len(modules)} modules beside its packages: {modules}"


def test_docs_architecture_table_matches_the_contracts():
    import re

    text = (ROOT / "docs" / "architecture.md").read_text()
    table = text.split("| layer (top to bottom) |", 1)[1].split("\n\n", 1)[0]
    rows = [line for line in table.splitlines()[2:] if line.startswith("|")]
    first_cells = [re.split(r"(?<!\\)\|", row)[1] for row in rows]
    documented = [sorted(re.findall(r"`(pytest_sits[.\w]*)`", cell)) for cell in first_cells]
    assert documented == _contract_layers()


def test_no_import_cycle():
    """No cycle among the package's modules, counting imports made inside functions too."""
    grimp = pytest.importorskip("grimp")
    graph = grimp.build_graph("pytest_sits")
    edges = {m: {d for d in graph.find_modules_directly_imported_by(m) if d.startswith("pytest_sits")}
             for m in graph.modules}
    index, low, stack, on, cycles = {}, {}, [], set(), []

    def visit(v):  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for m in sorted(edges):
        if m not in index:
            visit(m)
    assert not cycles, f"import cycles: {cycles}"


def test_every_implemented_requirement_has_a_check_named_after_it():
    """sits_device decides an absent accelerator with the check registered under the requirement's ID."""
    from pytest_sits.catalogue import CATALOGUE
    from pytest_sits.checks import load_all

    registry = load_all()
    missing = [r.id for r in CATALOGUE.values() if r.implemented and registry.get(r.id) is None]
    assert missing == []
    assert all(registry[r.id].requirement == r.id for r in CATALOGUE.values() if r.implemented)


def test_conformance_modules_name_each_requirement_once():
    """The ID is in the marker only: thresholds come from sits_thresholds, absence from sits_device."""
    import re

    for path in sorted((ROOT / "conformance").glob("test_*.py")):
        text = path.read_text()
        body = text.split('"""', 2)[-1]  # past the module docstring
        ids = re.findall(r'"((?:[A-Z]+-)+[A-Z0-9]+)"', body)
        marked = re.findall(r'sits_requirement\("([A-Z0-9-]+)"\)', body)
        assert sorted(ids) == sorted(marked), f"{path.name}: IDs outside markers: {sorted(set(ids) - set(marked))}"
        assert "check_thresholds(" not in body and "absent_accelerator(" not in body, path.name
