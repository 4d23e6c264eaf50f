"""SIGTERM (what Slurm and systemd send) stops a run as Ctrl-C does: an INCOMPLETE report with what was measured,
loads stopped, temporary trees removed; also under xdist, and when the whole process group gets the signal."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

SLOW = """
import time, pathlib, os
import pytest
from pytest_sits.verdict import Verdict
from pytest_sits.conditions.loads import CpuLoad

@pytest.mark.sits_requirement("INV-DEVICES")
def test_first(sits_record):
    sits_record(Verdict("INV-DEVICES", "PASS", "measured before the stop", measured=1))

@pytest.mark.sits_requirement("MEM-CAPACITY")
def test_slow(sits_record):
    with CpuLoad([0], duty=0.2):
        pathlib.Path(os.environ["SITS_TEST_MARK"]).write_text("running")
        time.sleep(60)
"""


def _run_and_term(tmp_path, extra, group):
    (tmp_path / "test_slow.py").write_text(SLOW)
    mark = tmp_path / "mark"
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    env = dict(os.environ, SITS_TEST_MARK=str(mark), TMPDIR=str(tmpdir))
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly",
                             "--sits-platform", "sim:h100", "test_slow.py", *extra], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    deadline = time.monotonic() + 120
    while not mark.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail("the slow test never started:\n" + proc.stdout.read())
        time.sleep(0.1)
    time.sleep(0.5)
    if group:
        os.killpg(proc.pid, signal.SIGTERM)
    else:
        proc.send_signal(signal.SIGTERM)
    try:
        out, _ = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail("the run did not stop within 60 s of SIGTERM")
    return proc.returncode, out, tmp_path / "sits-report" / "sits-report.json", tmpdir


@pytest.mark.parametrize("extra,group", [([], False), (["-n", "2"], False), (["-n", "2"], True)],
                         ids=["serial", "xdist", "xdist-process-group"])
def test_sigterm_writes_incomplete_report(tmp_path, extra, group):
    if extra:
        pytest.importorskip("xdist")
    rc, out, report_path, tmpdir = _run_and_term(tmp_path, extra, group)
    assert rc == pytest.ExitCode.INTERRUPTED, out
    assert report_path.exists(), out
    report = json.loads(report_path.read_text())
    assert report["run"]["completed"] is False
    assert report["summary"]["result"] in ("INCOMPLETE", "SIMULATED")
    assert report["run"]["exit_status_name"] == "INTERRUPTED"
    assert any(v["reason"] == "measured before the stop" for v in report["verdicts"]), out
    assert not list(tmpdir.glob("sits-sim-*")), "the simulated tree was left behind"
    assert not list(report_path.parent.glob(".*.tmp"))
