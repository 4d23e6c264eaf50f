"""The Slurm launcher (pytest_sits/commands/fleet/launch.py): `sits fleet run` on the local three-node cluster
of tools/slurm/local-cluster.sh (tests/slurm_cluster.py); without it those tests skip, naming the commands that
install and start it."""

from __future__ import annotations

import importlib.util
import json
import subprocess

import pytest

from pytest_sits.cli import main
from pytest_sits.commands.fleet import common, merge as fleet_merge

from helpers import run_sits
from slurm_cluster import NODES, harness_env


def test_fleet_run_without_slurm_names_the_install(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert main(["fleet", "run", "--nodes", "2", "--out", str(tmp_path / "o")]) == 4
    assert "`srun` not found" in capsys.readouterr().err and "apt-get install slurm-client" in common.SLURM_INSTALL


@pytest.mark.slow
def test_fleet_run_on_slurm_faulty_node_fails_dead_node_has_no_result(cluster, tmp_path):
    env = harness_env(cluster, tmp_path, SITS_PLATFORM="sim:h100", SITS_HARNESS_PLATFORMS="n3=sim:h100+switch",
                       SITS_HARNESS_DIE_NODE="n2")
    out = tmp_path / "fleet"
    proc = run_sits("fleet", "run", "--nodelist", "n[1-3]", "--out", str(out), "--", "-p", "sits_fleet_harness",
                    env=env, cwd=tmp_path)
    assert proc.returncode == 10, proc.stdout  # n3 FAILs
    # n2 really died mid-run (after some of its tests), killed with its slurmd and job step
    assert "tests run; killed" in (tmp_path / "n2.died").read_text()
    assert (out / "n2" / "node.json").is_file() and not (out / "n2" / "sits-report.json").exists()
    fl = json.loads((out / "fleet-report.json").read_text())
    assert fleet_merge.validate(fl) == []
    by = {n["node"]: n for n in fl["nodes"]}
    assert by["n1"]["result"] == "PASS", by["n1"]
    assert by["n3"]["result"] == "FAIL" and by["n3"]["platform"] == "SIMULATED sim:h100+switch"
    assert by["n2"]["result"] == "ERROR" and by["n2"]["reason"].startswith("no result")
    assert fl["run"]["mode"] == "srun" and fl["summary"]["counts"] == {"PASS": 1, "FAIL": 1, "UNDECIDED": 0,
                                                                        "ERROR": 1}
    direct = next(r for r in fl["requirements"] if r["requirement"] == "TOPO-PCIE-DIRECT")
    assert direct["by_status"] == {"ERROR": ["n2"], "FAIL": ["n3"], "PASS": ["n1"]}
    assert (out / "fleet-report.html").is_file()
    if fl["junit"]["path"]:
        assert fl["junit"]["errors"] >= 1 and fl["junit"]["failures"] >= 1
    assert "n2  ERROR      no result" in proc.stdout
    if importlib.util.find_spec("cryptography") is not None:
        # each node's folder of this live fleet run, signed, verifies (a FAIL is evidence as much as a PASS)
        from pytest_sits.commands import bundle

        key, pub = bundle.keygen(str(tmp_path / "lab"))
        for node in ("n1", "n3"):
            bundle.create(out / node, tmp_path / f"{node}.tar.gz", key)
            res = bundle.verify(tmp_path / f"{node}.tar.gz", pub)
            assert res.ok and res.replayed == res.verdicts > 0, res.problems


@pytest.mark.slow
def test_fleet_run_as_a_job_array(cluster, tmp_path):
    out = tmp_path / "fleet"
    proc = run_sits("fleet", "run", "--array", "--nodes", "3", "--out", str(out), "--", "--sits-platform=sim:h100",
                    env=cluster, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout
    fl = json.loads((out / "fleet-report.json").read_text())
    assert fl["run"]["mode"] == "array" and "--array=0-2" in fl["run"]["slurm_command"]
    assert {n["node"]: n["result"] for n in fl["nodes"]} == {"n1": "PASS", "n2": "PASS", "n3": "PASS"}
    tasks = sorted(json.loads((out / n / "node.json").read_text())["array_task_id"] for n in NODES)
    assert tasks == ["0", "1", "2"]


@pytest.mark.slow
def test_job_array_keeps_partial_results(cluster, tmp_path):
    """A job array of 3 elements while n3 is drained: the element on n2 is pre-empted mid-run (its report says
    INCOMPLETE), one element never gets a node of its own; n1's result is kept and the fleet says what is
    missing."""
    subprocess.run(["scontrol", "update", "nodename=n3", "state=drain", "reason=test: out of service"],
                   env=cluster, timeout=30, check=True)
    try:
        env = harness_env(cluster, tmp_path, SITS_PLATFORM="sim:h100", SITS_HARNESS_PREEMPT_NODE="n2")
        out = tmp_path / "fleet"
        proc = run_sits("fleet", "run", "--array", "--nodes=3", "--pending-limit=60", f"--out={out}", "--",
                        "-p", "sits_fleet_harness", env=env, cwd=tmp_path)
        assert proc.returncode == 13, proc.stdout  # no FAIL, but nodes that never reported: NOT_TESTED
        fl = json.loads((out / "fleet-report.json").read_text())
        by = {n["node"]: n for n in fl["nodes"]}
        assert by["n1"]["result"] == "PASS", by["n1"]
        assert by["n2"]["result"] == "ERROR" and "did not complete" in by["n2"]["reason"], by["n2"]
        assert "stopped by SIGTERM" in by["n2"]["reason"]
        assert "n3" not in by and fl["summary"]["missing_nodes"] == 1 and fl["summary"]["nodes"] == 3
        assert fl["summary"]["result"] == "ERROR" and fl["summary"]["counts"] == {"PASS": 1, "FAIL": 0,
                                                                                "UNDECIDED": 0, "ERROR": 2}
    finally:
        subprocess.run(["scontrol", "update", "nodename=n3", "state=resume"], env=cluster, timeout=30)


@pytest.mark.slow
def test_fleet_run_that_slurm_refuses_says_why(cluster, tmp_path):
    proc = run_sits("fleet", "run", "--nodes", "1", "--partition", "nosuchpartition", "--out", str(tmp_path / "o"),
                    "--", "--sits-platform=sim:h100", env=cluster, cwd=tmp_path, timeout=120)
    assert proc.returncode == 4
    assert "srun failed" in proc.stdout and "no node ran" in proc.stdout and "partition" in proc.stdout
