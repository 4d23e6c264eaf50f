"""The node runner: what Slurm starts on every node of a fleet run.

``python -m pytest_sits.commands.fleet.node OUT -- <pytest args>`` runs the
suite on this node with its report and JUnit XML in ``OUT/<node>/``, and
records when it started (``node.json``) and how it ended (``node-exit.json``),
so the merge can tell a node that never started from one that died.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from pathlib import Path
from typing import List, Optional, Sequence

from ... import exitcodes
from ...files import open_new
from ..base import pytest_argv
from ..child import GRACE_S, run_child
from .common import (JUNIT_NAME, NODE_EXIT_FILE, NODE_FILE, NODE_LOG, NODE_NAME, equals_form, node_name, now_iso,
                     write_json)


def node_command(out: Path, node: str, pytest_args: Sequence[str], python: str = sys.executable) -> List[str]:
    """The suite's command line on one node: its report and JUnit XML go to OUT/<node>/."""
    dest = out / node
    return [*pytest_argv(python), "--pyargs", "pytest_sits.conformance", *equals_form(list(pytest_args)),
            f"--sits-report-dir={dest}", f"--junitxml={dest / JUNIT_NAME}", "-p", "no:cacheprovider"]


def node_main(argv: Optional[Sequence[str]] = None) -> int:
    """Run on each node by Slurm: ``python -m pytest_sits.commands.fleet.node OUT -- <pytest args>``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["node"]:
        argv = argv[1:]
    if not argv:
        print("usage: python -m pytest_sits.commands.fleet.node OUT -- <pytest args>", file=sys.stderr)
        return exitcodes.USAGE_ERROR
    out, rest = Path(argv[0]), argv[1:]
    if rest[:1] == ["--"]:
        rest = rest[1:]
    node = node_name()
    if not NODE_NAME.match(node):
        print(f"sits fleet: node name {node!r} cannot name a directory; fix: use Slurm node names made of "
              "letters, digits, '.', '_' and '-'", file=sys.stderr)
        return exitcodes.USAGE_ERROR
    dest = out / node
    run_id = os.environ.get("SITS_FLEET_RUN_ID", "")
    try:
        dest.mkdir(parents=True, exist_ok=False)
    except FileExistsError:
        # Two elements of one job array placed on the same node: the second must not overwrite the first.
        print(f"sits fleet: {dest} exists: node {node} already ran in this fleet run; this task stops",
              file=sys.stderr)
        return exitcodes.NOT_TESTED
    command = node_command(out, node, rest)
    marker = {"node": node, "hostname": socket.gethostname(), "run_id": run_id,
              "job_id": os.environ.get("SLURM_JOB_ID"), "step_id": os.environ.get("SLURM_STEP_ID"),
              "array_task_id": os.environ.get("SLURM_ARRAY_TASK_ID"),
              "job_nodelist": os.environ.get("SLURM_JOB_NODELIST"), "started_at": now_iso(),
              "command": command}
    write_json(dest / NODE_FILE, marker)
    started = time.monotonic()
    # Slurm's stop (pre-emption, scancel, time limit) signals the job's processes; the runner forwards the first
    # signal to the suite's group (which may have had it already: a second SIGTERM while it stops is announced,
    # not raised) and gives it GRACE_S to write its INCOMPLETE report. A runner killed outright takes the suite
    # with it (commands/child.py): no suite measures on, unowned, on a node Slurm has given to someone else.
    with open_new(dest / NODE_LOG) as log:
        res = run_child(command, stdout=log)
    record = {"node": node, "exit_code": res.returncode, "finished_at": now_iso(),
              "duration_s": round(time.monotonic() - started, 3)}
    if res.signals:
        record["stopped_by"] = res.signals[0]
    if res.killed:
        record["killed"] = f"the suite did not end within {GRACE_S:g} s of the signal; its process group was killed"
    write_json(dest / NODE_EXIT_FILE, record)
    return res.returncode if res.returncode >= 0 else exitcodes.INTERRUPTED


if __name__ == "__main__":  # pragma: no cover - the per-node entry point Slurm runs
    sys.exit(node_main())
