"""``sits health``: a quick-level run for Slurm's HealthCheckProgram or a prolog; exit 0 healthy, 1 not.

With ``--drain`` an unhealthy node is drained through ``scontrol`` with the
reason (the requirements that failed).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict, List

from .base import add
from .fleet.common import REPORT_NAME, FleetError, node_name, which

EXAMPLES = """\
  sits health                                 exit 0 healthy, 1 not (Slurm: HealthCheckProgram)
  sits health --drain --profile=h100          drain this node through scontrol when it is unhealthy
  sits health --platform=sim:h100+ecc-uncorrected --report-dir=/tmp/h
"""


def add_parser(sub: Any) -> None:
    p = add(sub, "health", "quick-level run for Slurm's HealthCheckProgram or a prolog (exit 0/1)", EXAMPLES)
    p.add_argument("--drain", action="store_true", help="when unhealthy, drain this node (scontrol) with the reason")
    p.add_argument("--node", help="the node to drain (default: $SLURMD_NODENAME, else the short host name)")
    p.add_argument("--platform", help="--sits-platform for the run (default: live)")
    p.add_argument("--profile", help="--sits-profile for the run (default: picked from the hardware)")
    p.add_argument("--report-dir", help="keep the report there (default: a temporary folder)")
    p.add_argument("--timeout", type=float, default=600, help="seconds before the run counts as failed")
    p.add_argument("pytest_args", nargs=argparse.REMAINDER, help="after --: more pytest arguments")
    p.set_defaults(func=health)


def health(args: Any) -> int:
    """A quick-level run of the suite on this node; 0 healthy, 1 not (and, with --drain, the node drained)."""
    node = args.node or node_name()
    keep = Path(args.report_dir) if args.report_dir else None
    tmp = None if keep else tempfile.mkdtemp(prefix="sits-health-")
    rdir = keep or Path(tmp)
    cmd = [sys.executable, "-m", "pytest", "--pyargs", "pytest_sits.conformance", "--sits-level=quick", "-q",
           "-p", "no:cacheprovider", f"--sits-report-dir={rdir}"]
    if args.platform:
        cmd.append(f"--sits-platform={args.platform}")
    if args.profile:
        cmd.append(f"--sits-profile={args.profile}")
    extra = list(args.pytest_args or [])
    cmd += extra[1:] if extra[:1] == ["--"] else extra
    problems: List[str] = []
    try:
        try:
            proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  timeout=args.timeout)
            tail = proc.stdout.strip().splitlines()[-1:] if proc.stdout.strip() else []
        except subprocess.TimeoutExpired:
            proc, tail = None, []
            problems.append(f"the quick run did not finish within {args.timeout} s")
        if proc is not None:
            from ..report.store import read_report

            try:
                report = read_report(REPORT_NAME, root=rdir)
            except (OSError, ValueError):
                report = None
                problems.append(f"no report (pytest exit {proc.returncode}{': ' + tail[0] if tail else ''})")
            if report is not None:
                bad: Dict[str, int] = {}
                for v in report.get("verdicts", []):
                    if v.get("status") in ("FAIL", "ERROR"):
                        key = f"{v.get('requirement')} {v.get('status')}"
                        bad[key] = bad.get(key, 0) + 1
                problems += [f"{k} x{n}" if n > 1 else k for k, n in bad.items()]
                if not report.get("run", {}).get("completed", False):
                    problems.append("the run did not complete")
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    if not problems:
        print(f"sits health: {node}: healthy (quick level)")
        return 0
    reason = "sits health: " + "; ".join(problems)
    print(f"sits health: {node}: unhealthy: {'; '.join(problems)}")
    if args.drain:
        reason = reason[:200]
        try:
            res = subprocess.run([which("scontrol"), "update", f"nodename={node}", "state=drain",
                                  f"reason={reason}"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                 timeout=60)
            if res.returncode == 0:
                print(f"sits health: drained {node} (reason: {reason})")
            else:
                print(f"sits health: could not drain {node}: scontrol said: {res.stdout.strip()}", file=sys.stderr)
        except (FleetError, subprocess.TimeoutExpired, OSError) as exc:
            print(f"sits health: could not drain {node}: {exc}", file=sys.stderr)
    return 1

