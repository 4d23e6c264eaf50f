"""The Slurm launcher: ``sits fleet run`` starts the node runner on every node, waits, then merges.

``srun`` runs one task per node (``--nodelist`` or ``--nodes N``); ``--array``
submits an ``sbatch`` job array instead (one element per node, ``--exclusive``).
Every Slurm command is an argument list, never a shell line.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Dict, List

from .common import RUN_FILE, FleetError, expand_hostlist, fleet_exit, now_iso, which, write_json
from .merge import discover_nodes, merge, print_summary


def _slurm_common(args: Any) -> List[str]:
    opts: List[str] = [f"--job-name={args.job_name}"]
    if args.partition:
        opts.append(f"--partition={args.partition}")
    if args.time:
        opts.append(f"--time={args.time}")
    for extra in args.slurm_arg or []:
        opts.append(extra)
    return opts


def run_fleet(args: Any) -> int:
    """``sits fleet run``: launch, wait, merge; 0 when every node passes, 1 otherwise, 4 on usage errors."""
    if not args.nodes and not args.nodelist:
        raise FleetError("give the nodes: --nodes N (Slurm picks N nodes) or --nodelist n[1-3]")
    expected = expand_hostlist(args.nodelist) if args.nodelist else []
    count = args.nodes or len(expected)
    if count < 1:
        raise FleetError("--nodes must be at least 1")
    if args.array and args.nodelist:
        raise FleetError("--array with --nodelist: the elements of a job array go wherever Slurm places them, so "
                         "they cannot be tied to named nodes; fix: drop --array (srun runs one task on each named "
                         "node) or give --nodes N")
    out = Path(args.out or f"sits-fleet-{time.strftime('%Y%m%d-%H%M%S')}").resolve()
    if out.exists() and any(out.iterdir()):
        raise FleetError(f"{out}: not empty; fix: give a new --out directory (each node writes OUT/<node>/)")
    out.mkdir(parents=True, exist_ok=True)
    pytest_args = list(args.pytest_args or [])
    if pytest_args[:1] == ["--"]:
        pytest_args = pytest_args[1:]
    run_id = uuid.uuid4().hex
    env = dict(os.environ, SITS_FLEET_RUN_ID=run_id)
    node_entry = [args.python, "-m", "pytest_sits.commands.fleet.node", str(out), "--", *pytest_args]
    if args.array:
        cmd = [which("sbatch"), *_slurm_common(args), f"--array=0-{count - 1}", "--nodes=1", "--ntasks=1",
               "--exclusive", "--no-requeue", "--parsable", f"--output={out / 'slurm-%A_%a.out'}",
               str(_array_script(out, args.python)), str(out), "--", *pytest_args]
    else:
        cmd = [which("srun"), *_slurm_common(args), f"--nodes={count}", f"--ntasks={count}",
               "--ntasks-per-node=1", "--no-kill", "--kill-on-bad-exit=0", f"--output={out / 'slurm-%j.%t.out'}"]
        if args.nodelist:
            cmd += [f"--nodelist={args.nodelist}"]
        cmd += node_entry
    record = {"run_id": run_id, "mode": "array" if args.array else "srun", "requested_nodes": count,
              "nodelist": args.nodelist, "partition": args.partition, "expected_nodes": expected,
              "pytest_args": pytest_args, "slurm_command": cmd, "started_at": now_iso()}
    write_json(out / RUN_FILE, record)
    print(f"sits fleet: {record['mode']} on {count} node(s){' ' + args.nodelist if args.nodelist else ''}, "
          f"reports in {out}", flush=True)
    started = time.monotonic()
    proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if args.array and proc.returncode == 0:
        job_id = proc.stdout.strip().splitlines()[-1].split(";")[0] if proc.stdout.strip() else ""
        record["job_id"] = job_id
        record["cancelled_pending"] = _wait_for_job(job_id, env, pending_limit=args.pending_limit)
    record.update(slurm_exit_code=proc.returncode, slurm_output=proc.stdout[-20000:], finished_at=now_iso(),
                  duration_s=round(time.monotonic() - started, 3))
    write_json(out / RUN_FILE, record)
    for line in proc.stdout.strip().splitlines()[-50:]:
        print(f"{Path(cmd[0]).name}: {line}" if not line.startswith(("srun:", "sbatch:")) else line, file=sys.stderr)
    if proc.returncode != 0 and not discover_nodes(out, record):
        last = (proc.stdout.strip().splitlines() or ["(no output)"])[-1]
        raise FleetError(f"{Path(cmd[0]).name} failed (exit {proc.returncode}) and no node ran: {last}; fix: check "
                         "the Slurm options (partition, node names, account) and that `sinfo` reaches the cluster")
    fleet = merge(out, k=args.k, jobs=args.jobs, prometheus=Path(args.prometheus) if args.prometheus else None,
                  strict=args.strict, replay=args.replay)
    print_summary(fleet, out)
    return fleet_exit(fleet["summary"]["result"])


def _wait_for_job(job_id: str, env: Dict[str, str], poll_s: float = 1.0, pending_limit: float = 900) -> int:
    """Until no element of the job is pending, running or completing (``sbatch --wait`` polls ever more slowly:
    a job that ends after 20 s is seen to end some 20 s later).  Elements still pending after ``pending_limit``
    seconds while none runs are cancelled (they never started: the merge counts them), so that the nodes that
    ran are merged instead of waiting for ever; returns how many were cancelled."""
    if not re.fullmatch(r"\d+", job_id):
        raise FleetError(f"sbatch did not print a job id (got {job_id!r})")
    squeue = which("squeue")
    failures = 0
    started = time.monotonic()
    try:
        while True:
            res = subprocess.run([squeue, "-h", "-r", "-j", job_id, "-o", "%i %T"], env=env, capture_output=True,
                                 text=True)
            if res.returncode != 0 and "Invalid job id" in res.stderr:
                return 0  # already purged: finished
            if res.returncode == 0 and not res.stdout.strip():
                return 0
            states = [line.split()[-1] for line in res.stdout.splitlines() if line.strip()]
            if (res.returncode == 0 and states and all(s == "PENDING" for s in states)
                    and time.monotonic() - started > pending_limit):
                subprocess.run([which("scancel"), "--state=PENDING", job_id], env=env)
                print(f"sits fleet: {len(states)} element(s) of job {job_id} still pending after {pending_limit:g} s: "
                      "cancelled; they count as nodes that never started", file=sys.stderr)
                return len(states)
            failures = failures + 1 if res.returncode else 0
            if failures > 120:
                raise FleetError(f"squeue has failed for 2 minutes while job {job_id} ran ({res.stderr.strip()}); "
                                 f"the job may still run: see `squeue -j {job_id}`, merge later with "
                                 "`sits fleet merge OUT`")
            time.sleep(poll_s)
    except KeyboardInterrupt:
        subprocess.run([which("scancel"), job_id], env=env)
        print(f"sits fleet: interrupted: cancelled job {job_id}", file=sys.stderr)
        raise


def _array_script(out: Path, python: str) -> Path:
    """sbatch needs a script file; this one is Python (no shell), and only calls node_main."""
    from ...files import write_new

    script = out / ".sits-fleet-node.py"
    write_new(script, f"#!{python}\nimport sys\nfrom pytest_sits.commands.fleet.node import node_main\n"
                      "sys.exit(node_main(sys.argv[1:]))\n", mode=0o755)
    return script
