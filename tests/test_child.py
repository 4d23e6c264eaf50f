"""A command's pytest child (commands/child.py) gets every signal the command gets and is never left behind:
forwarded SIGTERM/SIGINT, the grace before its group is killed, the timeout, and the command killed outright
(the kernel's parent-death signal)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pytest_sits.commands.child import run_child

from helpers import pid_gone

pytestmark = pytest.mark.slow  # processes that signal each other

#: A child that records the signals it gets in a file, then ends (or, with IGNORE, ignores SIGTERM).
CHILD = textwrap.dedent("""
    import os, signal, sys, time
    out = sys.argv[1]
    def got(signum, frame):
        with open(out, "a") as fh:
            fh.write(signal.Signals(signum).name + "\\n")
        if os.environ.get("IGNORE") != "1":
            sys.exit(2)
    signal.signal(signal.SIGTERM, got)
    signal.signal(signal.SIGINT, got)
    with open(out + ".pid", "w") as fh:
        fh.write(str(os.getpid()))
    while True:
        time.sleep(0.05)
""")

#: The command: runs the child with run_child and prints what it saw.
PARENT = textwrap.dedent("""
    import json, sys
    from pytest_sits.commands.child import run_child
    r = run_child([sys.executable, "-c", sys.argv[1], sys.argv[2]], grace_s=float(sys.argv[3]))
    print(json.dumps({"rc": r.returncode, "signals": r.signals, "killed": r.killed}), flush=True)
""")


def _start(tmp_path: Path, grace: float = 30.0, env: dict | None = None) -> tuple:
    out = tmp_path / "got"
    parent = subprocess.Popen([sys.executable, "-c", PARENT, CHILD, str(out), str(grace)], stdout=subprocess.PIPE,
                              text=True, env=dict(os.environ, **(env or {})))
    deadline = time.monotonic() + 30
    while not Path(str(out) + ".pid").exists():
        assert time.monotonic() < deadline and parent.poll() is None, "the child never started"
        time.sleep(0.05)
    time.sleep(0.1)
    return parent, out, int(Path(str(out) + ".pid").read_text())


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_to_the_command_reaches_the_child_which_ends(tmp_path, sig):
    parent, out, child = _start(tmp_path)
    parent.send_signal(sig)
    seen = json.loads(parent.communicate(timeout=30)[0])
    assert seen == {"rc": 2, "signals": [sig.name], "killed": False}
    assert out.read_text().split() == [sig.name] and pid_gone(child)


def test_a_child_that_ignores_the_signal_is_killed_after_the_grace(tmp_path):
    parent, out, child = _start(tmp_path, grace=1.0, env={"IGNORE": "1"})
    parent.send_signal(signal.SIGTERM)
    seen = json.loads(parent.communicate(timeout=30)[0])
    assert seen["signals"] == ["SIGTERM"] and seen["killed"] and seen["rc"] == -signal.SIGKILL
    assert out.read_text().split() == ["SIGTERM"] and pid_gone(child)


def test_a_command_killed_outright_still_stops_its_child(tmp_path):
    """SIGKILL (``timeout -k``) cannot be forwarded: the kernel sends the child SIGTERM as its parent dies."""
    if not sys.platform.startswith("linux"):
        pytest.skip("PR_SET_PDEATHSIG is Linux's")
    parent, out, child = _start(tmp_path)
    parent.kill()
    parent.wait()
    assert pid_gone(child), "the child ran on after its command was killed"
    assert out.read_text().split() == ["SIGTERM"]


def test_the_timeout_kills_the_group(tmp_path):
    t0 = time.monotonic()
    r = run_child([sys.executable, "-c", "import time; time.sleep(60)"], timeout_s=1.0)
    assert r.timed_out and r.killed and r.returncode == -signal.SIGKILL and time.monotonic() - t0 < 30
