"""The node runner (pytest_sits/commands/fleet/node.py): what Slurm starts on every node of a fleet run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

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
    assert fleet_node.node_main(["node", str(out), "--", "--sits-platform=sim:h100+switch"]) == 13  # NOT_TESTED
    assert (d / "sits-report.json").read_bytes() == before
    # gpu08 was in the allocation but never wrote anything: the merge counts it
    fl = fleet_merge.merge(out)
    assert {n["node"]: n["result"] for n in fl["nodes"]} == {"gpu07": "PASS", "gpu08": "ERROR"}


#: A plugin that holds the suite in its third test (a mark file says when), as a long measurement would.
SLOW_PLUGIN = """
import os, pathlib, time
_seen = [0]

def pytest_runtest_call(item):
    _seen[0] += 1
    if _seen[0] == 3:
        pathlib.Path(os.environ["SITS_TEST_MARK"]).write_text("held")
        time.sleep(120)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.slow  # the node runner and the suite in subprocesses, signalled
@pytest.mark.parametrize("how", ["SIGTERM", "SIGKILL"])
def test_the_node_runner_signalled_alone_stops_the_suite_and_leaves_no_process(tmp_path, how):
    """SIGTERM to the runner alone (not to the job's processes) is forwarded: the suite writes its INCOMPLETE
    report and node-exit.json says what stopped it. SIGKILL to the runner (no handler can run) still stops the
    suite: the kernel sends it SIGTERM as its parent dies, and it writes its report instead of measuring on."""
    (tmp_path / "slowplug.py").write_text(SLOW_PLUGIN)
    out = tmp_path / "fleet"
    env = dict(os.environ, SLURMD_NODENAME="gpu09", PYTHONPATH=str(tmp_path), SITS_TEST_MARK=str(tmp_path / "mark"))
    env.pop("PYTEST_ADDOPTS", None)
    proc = subprocess.Popen([sys.executable, "-m", "pytest_sits.commands.fleet.node", str(out), "--",
                             "-p", "slowplug", "-p", "no:randomly", "--sits-platform=sim:h100"], env=env,
                            cwd=tmp_path, start_new_session=True)
    deadline = time.monotonic() + 120
    while not (tmp_path / "mark").exists():
        assert proc.poll() is None and time.monotonic() < deadline, "the suite never reached its third test"
        time.sleep(0.05)
    suite = [int(p) for p in subprocess.run(["pgrep", "-f", "--", f"--sits-report-dir={out / 'gpu09'}"],
                                            capture_output=True, text=True).stdout.split()]
    assert suite, "the suite's process was not found"
    proc.send_signal(getattr(signal, how))
    proc.wait(timeout=60)
    deadline = time.monotonic() + 60
    while any(_alive(p) for p in suite) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [p for p in suite if _alive(p)]
    for p in left:
        os.kill(p, signal.SIGKILL)
    assert not left, "the suite was left running after its node runner"
    report = json.loads((out / "gpu09" / "sits-report.json").read_text())
    assert report["run"]["completed"] is False and report["run"]["exit_status_name"] == "INTERRUPTED"
    assert [i["signal"] for i in report["run"]["interrupts"]] == ["SIGTERM"]
    if how == "SIGTERM":
        assert proc.returncode == 2
        exit_record = json.loads((out / "gpu09" / "node-exit.json").read_text())
        assert exit_record["stopped_by"] == "SIGTERM" and exit_record["exit_code"] == 2
