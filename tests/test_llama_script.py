"""tools/llama/llama_sla.sh tells a running server from a dead one: a zombie (kill -0 succeeds on it) and a pid
reused by another program are "stopped", so `start` starts a server instead of saying "already running"."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # bash, ps and python in subprocesses

SCRIPT = Path(__file__).resolve().parents[1] / "tools" / "llama" / "llama_sla.sh"


def _status(state: Path) -> str:
    out = subprocess.run(["bash", str(SCRIPT), "status"], env=dict(os.environ, SITS_LLAMA_DIR=str(state)),
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=30)
    return out.stdout.strip()


def test_a_zombie_server_is_stopped_not_running(tmp_path):
    # a parent that does not reap its child: the child stays a zombie while the parent sleeps
    parent = subprocess.Popen([sys.executable, "-c", "import os, time\npid = os.fork()\nif pid == 0:\n"
                               "    os._exit(0)\nprint(pid, flush=True)\ntime.sleep(30)"], stdout=subprocess.PIPE,
                              text=True)
    try:
        zombie = int(parent.stdout.readline())
        time.sleep(0.3)
        os.kill(zombie, 0)  # the trap: the zombie answers kill -0
        (tmp_path / "server-8088.pid").write_text(f"{zombie}\n")
        assert _status(tmp_path) == "stopped"
    finally:
        parent.kill()
        parent.wait()


def test_a_pid_reused_by_another_program_is_stopped_and_the_server_is_running(tmp_path):
    other = subprocess.Popen(["sleep", "30"])
    fake = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", "-m", "llama_cpp.server"])
    try:
        (tmp_path / "server-8088.pid").write_text(f"{other.pid}\n")
        assert _status(tmp_path) == "stopped"
        (tmp_path / "server-8088.pid").write_text(f"{fake.pid}\n")
        assert _status(tmp_path) == f"running (pid {fake.pid}) at http://127.0.0.1:8088"
    finally:
        for p in (other, fake):
            p.kill()
            p.wait()
