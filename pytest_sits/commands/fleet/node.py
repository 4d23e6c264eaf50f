"""The node runner: what Slurm starts on every node of a fleet run.

``python -m pytest_sits.commands.fleet.node OUT -- <pytest args>`` runs the
suite on this node with its report and JUnit XML in ``OUT/<node>/``, and
records when it started (``node.json``) and how it ended (``node-exit.json``),
so the merge can tell a node that never started from one that died.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import List, Optional, Sequence

from ...files import open_new
from ..base import pytest_argv
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
        return 4
    out, rest = Path(argv[0]), argv[1:]
    if rest[:1] == ["--"]:
        rest = rest[1:]
    node = node_name()
    if not NODE_NAME.match(node):
        print(f"sits fleet: node name {node!r} cannot name a directory; fix: use Slurm node names made of "
              "letters, digits, '.', '_' and '-'", file=sys.stderr)
        return 4
    dest = out / node
    run_id = os.environ.get("SITS_FLEET_RUN_ID", "")
    try:
        dest.mkdir(parents=True, exist_ok=False)
    except FileExistsError:
        # Two elements of one job array placed on the same node: the second must not overwrite the first.
        print(f"sits fleet: {dest} exists: node {node} already ran in this fleet run; this task stops",
              file=sys.stderr)
        return 3
    command = node_command(out, node, rest)
    marker = {"node": node, "hostname": socket.gethostname(), "run_id": run_id,
              "job_id": os.environ.get("SLURM_JOB_ID"), "step_id": os.environ.get("SLURM_STEP_ID"),
              "array_task_id": os.environ.get("SLURM_ARRAY_TASK_ID"),
              "job_nodelist": os.environ.get("SLURM_JOB_NODELIST"), "started_at": now_iso(),
              "command": command}
    write_json(dest / NODE_FILE, marker)
    started = time.monotonic()
    stopped: List[str] = []
    with open_new(dest / NODE_LOG) as log:
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)

        def record_stop(signum: int, frame: object) -> None:
            # Slurm's stop (pre-emption, scancel, time limit) signals every process of the job, the suite
            # too, which turns SIGTERM into an INCOMPLETE report: record it and wait for the suite (a second
            # signal would interrupt the suite while it writes that report).
            stopped.append(signal.Signals(signum).name)

        old = {s: signal.signal(s, record_stop) for s in (signal.SIGTERM, signal.SIGINT)}
        try:
            rc = proc.wait()
        finally:
            for s, h in old.items():
                signal.signal(s, h)
    record = {"node": node, "exit_code": rc, "finished_at": now_iso(),
              "duration_s": round(time.monotonic() - started, 3)}
    if stopped:
        record["stopped_by"] = stopped[0]
    write_json(dest / NODE_EXIT_FILE, record)
    return rc


if __name__ == "__main__":  # pragma: no cover - the per-node entry point Slurm runs
    sys.exit(node_main())
