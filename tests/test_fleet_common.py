"""What the fleet's processes share (pytest_sits/commands/fleet/common.py, the `sits fleet` front): Slurm host
lists, usage errors, and files written only through the safe writer."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pytest_sits.cli import main
from pytest_sits.commands.fleet import common

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("spec,names", [
    ("n1", ["n1"]), ("n[1-3]", ["n1", "n2", "n3"]), ("n[1-2,5],gpu7", ["n1", "n2", "n5", "gpu7"]),
    ("r[1-2]n[08-09]", ["r1n08", "r1n09", "r2n08", "r2n09"]), ("a,a", ["a"])])
def test_expand_hostlist(spec, names):
    assert common.expand_hostlist(spec) == names


@pytest.mark.parametrize("spec", ["n[1-3", "n1-3]", "n[3-1]", "n[a-b]"])
def test_bad_hostlist_names_the_fix(spec):
    with pytest.raises(common.FleetError, match="fix:"):
        common.expand_hostlist(spec)


@pytest.mark.parametrize("spec", ["n[0-2999][0-2999]", "a[0-60000],b[0-60000]", "n[0-99999]x[0-1]"])
def test_a_hostlist_is_bounded_in_total_before_any_name_is_made(spec):
    """Each range is bounded, and so is the whole list: 9 million names are refused at once, not built."""
    with pytest.raises(common.FleetError, match="more than 100,000 names.*fix:"):
        common.expand_hostlist(spec)
    assert len(common.expand_hostlist("n[0-99999]")) == 100_000  # the largest clusters still expand


def test_fleet_code_writes_only_through_the_safe_writer():
    """No file of the fleet code or sits health opens a file for writing itself (files.py does it)."""
    for path in sorted((ROOT / "pytest_sits" / "commands" / "fleet").glob("*.py")) + [
            ROOT / "pytest_sits" / "commands" / "health.py", ROOT / "pytest_sits" / "commands" / "baseline.py",
            ROOT / "pytest_sits" / "report" / "prometheus.py"]:
        text = path.read_text()
        assert not re.search(r"\.write_text\(|\.write_bytes\(|open\([^)]*[\"'][wax]b?[\"']|\.write\(\s*JUnitXml", text), path


def test_fleet_usage_errors_exit_4(tmp_path, capsys):
    assert main(["fleet", "merge", str(tmp_path / "nowhere")]) == 4
    assert "fix:" in capsys.readouterr().err
    assert main(["fleet", "merge", str(tmp_path)]) == 4
    assert "no node folder" in capsys.readouterr().err
    assert main(["fleet", "run", "--out", str(tmp_path / "o"), "--", "-q"]) == 4
    assert "--nodes N" in capsys.readouterr().err
    assert main(["fleet", "run", "--array", "--nodelist", "n[1-2]", "--out", str(tmp_path / "o")]) == 4
    assert "drop --array" in capsys.readouterr().err
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("")
    assert main(["fleet", "run", "--nodes", "2", "--out", str(tmp_path / "full")]) == 4
    assert "not empty" in capsys.readouterr().err
