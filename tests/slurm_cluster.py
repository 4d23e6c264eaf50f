"""The local Slurm cluster of tools/slurm/local-cluster.sh (n1, n2, n3 on 127.0.0.1) as the tests use it: its
node states, and the test-only plugin a fleet run loads on its nodes. The fixtures that hand it to a test
(``slurm_env``, ``cluster``) are in tests/conftest.py; without the cluster they skip, naming the commands that
install and start it."""

from __future__ import annotations

import os
import subprocess
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLUSTER = ROOT / "tools" / "slurm" / "local-cluster.sh"
SLURM_DIR = Path(os.environ.get("SITS_SLURM_DIR", "/tmp/sits-slurm"))
START = "bash tools/slurm/install.sh && bash tools/slurm/local-cluster.sh start"
NODES = ("n1", "n2", "n3")


def sinfo(env) -> dict:
    out = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %t"], env=env, capture_output=True,
                         text=True, timeout=30)
    if out.returncode:
        raise RuntimeError(out.stderr.strip())
    return dict(line.split() for line in out.stdout.splitlines() if line.strip())


def all_idle(env, timeout: float = 60) -> dict:
    """Bring every node of the local cluster back to idle (restart a killed slurmd, resume a drained node)."""
    deadline = time.monotonic() + timeout
    states = {}
    while time.monotonic() < deadline:
        states = sinfo(env)
        if all(states.get(n) == "idle" for n in NODES):
            return states
        if any(not (SLURM_DIR / "run" / f"slurmd-{n}.pid").exists() or "*" in states.get(n, "*") for n in NODES):
            subprocess.run(["bash", str(CLUSTER), "start"], env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=120)
        stuck = [n for n in NODES if states.get(n, "").rstrip("*~#") in ("drain", "drng", "down", "fail")]
        if stuck:
            subprocess.run(["scontrol", "update", f"nodename={','.join(stuck)}", "state=resume"], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30)
        time.sleep(1)
    return states


def node_state(env, node: str, settle: float = 30) -> tuple:
    """(state, reason) of a node once it has left the transient states (draining, completing)."""
    deadline = time.monotonic() + settle
    while True:
        info = subprocess.run(["sinfo", "-h", "-n", node, "-o", "%t|%E"], env=env, stdout=subprocess.PIPE,
                              text=True, timeout=30).stdout.strip()
        state, reason = info.split("|", 1)
        # a resumed node reads "idle*" (not responding) until slurmctld's next ping reaches it
        if (state.rstrip("*~#") not in ("drng", "comp", "mix", "alloc") and not state.endswith("*")) \
                or time.monotonic() > deadline:
            return state, reason
        time.sleep(0.5)


HARNESS = '''
"""Test-only pytest plugin loaded on every node of a fleet run (-p sits_fleet_harness).

* SITS_HARNESS_PLATFORMS="n3=sim:h100+switch": that node runs that simulated platform (set before the
  suite's plugin reads SITS_PLATFORM), so one node of the fleet carries a fault.
* SITS_HARNESS_PREEMPT_NODE=n2: before its fifth test that node's job is cancelled (scancel: SIGTERM to
  every process of the job, as a pre-emption does).
* SITS_HARNESS_DIE_NODE=n2: that node dies before its fifth test: SIGKILL to its slurmd, to the job
  step's slurmstepd, to the fleet task and to this pytest, all at once. Nothing of the node survives to
  write a report; Slurm sees the node stop answering.
"""
import os
import signal

import subprocess
import time

NODE = os.environ.get("SLURMD_NODENAME", "")
for item in filter(None, os.environ.get("SITS_HARNESS_PLATFORMS", "").split(",")):
    name, _, spec = item.partition("=")
    if name == NODE:
        os.environ["SITS_PLATFORM"] = spec
_seen = [0]


def _comm(pid):
    with open(f"/proc/{pid}/comm") as fh:
        return fh.read().strip()


def _ppid(pid):
    with open(f"/proc/{pid}/stat") as fh:
        return int(fh.read().rsplit(")", 1)[1].split()[1])


def pytest_runtest_setup(item):
    _seen[0] += 1
    if NODE == os.environ.get("SITS_HARNESS_PREEMPT_NODE") and _seen[0] == 5:
        # pre-emption as Slurm does it: the job is cancelled, every process of it gets SIGTERM
        job = os.environ["SLURM_JOB_ID"]
        if os.environ.get("SLURM_ARRAY_TASK_ID"):  # an array element is named ARRAYJOB_TASK
            job = f"{os.environ['SLURM_ARRAY_JOB_ID']}_{os.environ['SLURM_ARRAY_TASK_ID']}"
        subprocess.run(["scancel", job])
        time.sleep(30)
    if NODE != os.environ.get("SITS_HARNESS_DIE_NODE") or _seen[0] < 5:
        return
    with open(os.environ["SITS_HARNESS_SLURMD_PIDFILE"].format(node=NODE)) as fh:
        victims = [int(fh.read().strip())]
    pid = os.getppid()                      # the fleet task, then slurmstepd
    for _ in range(3):
        victims.append(pid)
        if _comm(pid) == "slurmstepd":
            break
        pid = _ppid(pid)
    with open(os.path.join(os.environ["SITS_HARNESS_LOG"], NODE + ".died"), "w") as fh:
        fh.write(f"{_seen[0] - 1} tests run; killed {victims} and {os.getpid()}\\n")
    # All at once, as a node that dies: the SIGTERM the fleet task's death sends this pytest (its parent-death
    # signal) must not get to run its handler before this process's own SIGKILL. Blocking it in this thread is
    # not enough (the kernel hands a process's signal to any thread not blocking it, and Python runs the handler
    # in the main thread all the same); ignored, it is discarded whichever thread it reaches.
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    for pid in victims:
        os.kill(pid, signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)
'''


def harness_env(env, tmp_path: Path, **extra) -> dict:
    hdir = tmp_path / "harness"
    hdir.mkdir(exist_ok=True)
    (hdir / "sits_fleet_harness.py").write_text(textwrap.dedent(HARNESS))
    return dict(env, PYTHONPATH=os.pathsep.join(filter(None, [str(hdir), env.get("PYTHONPATH")])),
                SITS_HARNESS_LOG=str(tmp_path), SITS_HARNESS_SLURMD_PIDFILE=str(SLURM_DIR / "run" / "slurmd-{node}.pid"),
                **extra)
