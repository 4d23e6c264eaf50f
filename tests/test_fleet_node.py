"""The node runner (pytest_sits/commands/fleet/node.py): what Slurm starts on every node of a fleet run."""

from __future__ import annotations

import json

import pytest

from pytest_sits.commands.fleet import merge as fleet_merge, node as fleet_node


@pytest.mark.slow  # runs the suite twice in a subprocess
def test_node_entry_writes_its_folder_once(tmp_path, monkeypatch):
    monkeypatch.setenv("SLURMD_NODENAME", "gpu07")
    monkeypatch.setenv("SLURM_JOB_NODELIST", "gpu[07-08]")
    out = tmp_path / "fleet"
    assert fleet_node.node_main(["node", str(out), "--", "--sits-platform=sim:h100"]) == 0
    d = out / "gpu07"
    marker = json.loads((d / "node.json").read_text())
    assert marker["node"] == "gpu07" and marker["job_nodelist"] == "gpu[07-08]"
    # every option the suite builds is --opt=value (a value after a space can be taken for a test path, which
    # moves pytest's rootdir away from the lab's ini); the user's `--sits-platform sim:h100` is joined too
    assert "--pyargs" in marker["command"] and f"--sits-report-dir={d}" in marker["command"]
    assert f"--junitxml={d / 'junit.xml'}" in marker["command"] and "--sits-platform=sim:h100" in marker["command"]
    assert str(d) not in marker["command"] and "sim:h100" not in marker["command"]
    assert json.loads((d / "node-exit.json").read_text())["exit_code"] == 0
    assert (d / "sits-report.json").is_file() and (d / "junit.xml").is_file() and (d / "pytest.log").is_file()
    # a second task on the same node (two array elements placed together) must not overwrite the first
    before = (d / "sits-report.json").read_bytes()
    assert fleet_node.node_main(["node", str(out), "--", "--sits-platform=sim:h100+switch"]) == 3
    assert (d / "sits-report.json").read_bytes() == before
    # gpu08 was in the allocation but never wrote anything: the merge counts it
    fl = fleet_merge.merge(out)
    assert {n["node"]: n["result"] for n in fl["nodes"]} == {"gpu07": "PASS", "gpu08": "ERROR"}
