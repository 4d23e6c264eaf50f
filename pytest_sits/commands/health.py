"""``sits health``: this node's health for Slurm, with actions that follow from the outcome, never from doubt.

The quick level of the suite runs on this node (in a child pytest, under a
watchdog that bounds every test, and an overall timeout), its report is read
back, and the outcome decides the action:

=====================================  ======  =================  ======================  ==========================
outcome                                 exit    ``--drain``        ``--mode=prolog|epilog``  ``--resume`` (drained node)
=====================================  ======  =================  ======================  ==========================
every health requirement passes          0      nothing            exit 0                  resumed, after the re-check
                                                                                            under the inference load
FAIL of a health requirement             10     drained, reason    exit 10: Slurm drains   stays drained
                                                names it           the node (no scontrol)
INCONCLUSIVE or not measured             11     nothing            exit 0                  stays drained
ERROR, a probe hung (watchdog) or the    13     nothing            exit 0                  stays drained
tool failed (no report, crash, timeout)
=====================================  ======  =================  ======================  ==========================

(exit 4: a usage error; the statuses are the suite's own: :mod:`pytest_sits.exitcodes`.)
``--mode=healthcheck`` (Slurm's HealthCheckProgram)
acts as ``--drain`` and always exits 0: Slurm does not act on the program's
status, kills it after 60 s (the default limits keep within that), and some
versions hold slurmd's registration until it exits 0.  A prolog or epilog must
not call Slurm commands, so those modes never run ``scontrol``; a non-zero
exit makes slurmd drain the node itself (and requeue the job of a prolog).

``--resume`` re-checks a drained node under the load it will serve: the health
requirements with their health window (clock-event reasons, PCIe errors, ECC
counts, XID events) sampled while the inference load of PLP-* runs, and the
PLP-* requirements themselves.  Only when all of that passes is the node
resumed; idle checks alone never return a node to service.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from .. import exitcodes
from .base import add, pytest_argv
from .fleet.common import REPORT_NAME, FleetError, node_name, which

EXAMPLES = """\
  sits health                                       exit 0 healthy, 10 FAIL, 11 undecided, 13 could not check
  sits health --drain --profile=h100                drain this node (scontrol) when a health requirement FAILs
  sits health --mode=healthcheck                    for slurm.conf HealthCheckProgram (drains itself, exits 0)
  sits health --mode=prolog                         for slurm.conf Prolog/Epilog (exit 10 on FAIL, no scontrol)
  sits health --resume --node=gpu07                 re-check a drained node under the inference load, then resume
  sits health --platform=sim:h100+ecc-uncorrectable --report-dir=/tmp/h
"""

HEALTHY, UNHEALTHY, UNDECIDED, UNCHECKED = exitcodes.OK, exitcodes.NON_CONFORMANT, exitcodes.UNDECIDED, exitcodes.NOT_TESTED
OUTCOME_NAMES = {HEALTHY: "healthy", UNHEALTHY: "unhealthy", UNDECIDED: "undecided", UNCHECKED: "could not check"}
#: The requirements of the inference load that --resume re-checks the node under.
LOAD_REQUIREMENTS = ("PLP-SAMPLE", "PLP-PPL", "PLP-POWER", "PLP-LATENCY")
REASON_PREFIX = "sits health: "
#: Defaults per mode: (seconds a test may take, seconds the whole run may take).
LIMITS = {"check": (120.0, 600.0), "healthcheck": (40.0, 50.0), "prolog": (120.0, 300.0), "epilog": (120.0, 300.0),
          "resume": (900.0, 3600.0)}


def add_parser(sub: Any) -> None:
    p = add(sub, "health", "this node's health for Slurm: check, drain on a FAIL, prolog/epilog and "
            "HealthCheckProgram modes, return to service after a re-check under load", EXAMPLES)
    p.add_argument("--drain", action="store_true", help="drain this node (scontrol) when a health requirement FAILs")
    p.add_argument("--mode", choices=("check", "healthcheck", "prolog", "epilog"), default="check",
                   help="check (default); healthcheck: Slurm's HealthCheckProgram (drains itself, exits 0); "
                        "prolog/epilog: exit 10 only on a FAIL, never call scontrol")
    p.add_argument("--resume", action="store_true",
                   help="re-check this drained node under the inference load and resume it when all passes")
    p.add_argument("--any-reason", action="store_true",
                   help="--resume a node drained for another reason than sits health's")
    p.add_argument("--node", help="the node (default: $SLURMD_NODENAME, else the short host name)")
    p.add_argument("--platform", help="--sits-platform for the run (default: live)")
    p.add_argument("--profile", help="--sits-profile for the run (default: picked from the hardware)")
    p.add_argument("--report-dir", help="keep the report there (default: a temporary folder)")
    p.add_argument("--watchdog", type=float, default=None, metavar="S",
                   help="seconds one test (its probes) may take before the run ends as hung (default per mode: "
                        "120; healthcheck 40; resume 900)")
    p.add_argument("--timeout", type=float, default=None, metavar="S",
                   help="seconds the whole run may take (default per mode: 600; healthcheck 50; resume 3600)")
    p.add_argument("pytest_args", nargs=argparse.REMAINDER, help="after --: more pytest arguments")
    p.set_defaults(func=health)


# --------------------------------------------------------------------------------------------- the run

def run_suite(args: Any, rdir: Path, mode: str) -> Tuple[Optional[Dict[str, Any]], List[str]]:
    """The child pytest: (its report or None, problems of the tool itself)."""
    from .fleet.common import equals_form

    watchdog = args.watchdog if args.watchdog is not None else LIMITS[mode][0]
    timeout = args.timeout if args.timeout is not None else LIMITS[mode][1]
    cmd = [*pytest_argv(), "--pyargs", "pytest_sits.conformance", "-q", "-p", "no:cacheprovider",
           f"--sits-report-dir={rdir}", f"--sits-watchdog={watchdog:g}"]
    if mode == "resume":
        cmd += ["--sits-level=standard", "--sits-health-load=inference", "-m", resume_selection()]
    else:
        cmd += ["--sits-level=quick"]
    if args.platform:
        cmd.append(f"--sits-platform={args.platform}")
    if args.profile:
        cmd.append(f"--sits-profile={args.profile}")
    extra = list(args.pytest_args or [])
    cmd += equals_form(extra[1:] if extra[:1] == ["--"] else extra)
    problems: List[str] = []
    from .child import run_child

    try:
        proc = run_child(cmd, timeout_s=timeout)
    except OSError as exc:
        return None, [f"the suite could not start: {exc}"]
    if proc.timed_out:
        problems.append(f"the run did not finish within {timeout:g} s (killed)")
    if proc.signals:
        problems.append(f"interrupted: {proc.signals[0]} forwarded to the suite")
    out = proc.output
    tail = [ln for ln in (out or "").strip().splitlines() if ln.strip()][-1:]
    from ..report.store import read_report

    try:
        report = read_report(REPORT_NAME, root=rdir)
    except (OSError, ValueError):
        report = None
        if not problems:
            problems.append(f"no report (pytest exit {proc.returncode}{': ' + tail[0] if tail else ''})")
    return report, problems


def resume_selection() -> str:
    """The ``-m`` expression of a return-to-service run: the quick-level (health) requirements and PLP-*."""
    from ..catalogue import CATALOGUE

    ids = [r.id for r in CATALOGUE.values() if r.level == "quick"] + list(LOAD_REQUIREMENTS)
    return " or ".join(ids)


def judge(report: Optional[Dict[str, Any]], problems: List[str]) -> Tuple[int, List[str], List[str]]:
    """(outcome, the FAILs as 'REQ FAIL (subject)' lines, other findings) of a health run."""
    if report is None:
        return UNCHECKED, [], problems
    fails: Dict[str, List[str]] = {}
    undecided: Dict[str, int] = {}
    hung: List[str] = []
    broke: List[str] = []
    for v in report.get("verdicts", []):
        st = v.get("status")
        if st == "FAIL":
            fails.setdefault(str(v.get("requirement")), []).append(str(v.get("subject")))
        elif st == "ERROR" and isinstance(v.get("evidence"), dict) and (v["evidence"].get("watchdog") or {}).get("hung"):
            hung.append(f"{v.get('requirement')} hung (watchdog: {v['evidence']['watchdog'].get('limit_s')} s)")
        elif st == "ERROR":
            broke.append(f"{v.get('requirement')} ERROR ({v.get('subject')})")
        elif st == "INCONCLUSIVE":
            key = f"{v.get('requirement')} {st}"
            undecided[key] = undecided.get(key, 0) + 1
        elif st == "SKIP" and str(v.get("reason", "")).startswith("not measured"):
            key = f"{v.get('requirement')} not measured"
            undecided[key] = undecided.get(key, 0) + 1
    fail_lines = [f"{r} FAIL ({', '.join(s[:3])}{' +' + str(len(s) - 3) if len(s) > 3 else ''})"
                  for r, s in fails.items()]
    other = list(problems) + hung + broke + [f"{k} x{n}" if n > 1 else k for k, n in undecided.items()]
    if not report.get("run", {}).get("completed", False) and not hung:
        other.append("the run did not complete")
    if fails:
        return UNHEALTHY, fail_lines, other
    if hung or broke or problems or not report.get("run", {}).get("completed", False):
        return UNCHECKED, [], other
    if undecided:
        return UNDECIDED, [], other
    return HEALTHY, [], other


# --------------------------------------------------------------------------------------------- Slurm

def _scontrol(args: List[str]) -> Tuple[bool, str]:
    try:
        res = subprocess.run([which("scontrol"), *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, timeout=60)
    except (FleetError, subprocess.TimeoutExpired, OSError) as exc:
        return False, str(exc)
    return res.returncode == 0, res.stdout.strip()


def node_state(node: str) -> Tuple[Optional[str], Optional[str], str]:
    """(state, reason, error) of a node from ``scontrol show node -o``."""
    ok, text = _scontrol(["show", "node", node, "-o"])
    if not ok:
        return None, None, text
    state = re.search(r"\bState=(\S+)", text)
    reason = re.search(r"\bReason=(.*?)(?: \[[^\]]*\])?(?=\s+\w+=|$)", text)
    return (state.group(1) if state else None, reason.group(1).strip() if reason else None, "")


def drain(node: str, fail_lines: List[str]) -> bool:
    reason = (REASON_PREFIX + "; ".join(fail_lines))[:200]
    ok, text = _scontrol(["update", f"nodename={node}", "state=drain", f"reason={reason}"])
    if ok:
        print(f"sits health: drained {node} (reason: {reason})")
    else:
        print(f"sits health: could not drain {node}: {text}", file=sys.stderr)
    return ok


# --------------------------------------------------------------------------------------------- the command

def health(args: Any) -> int:
    """Check this node and act on the outcome (module docstring: the table of outcomes and actions)."""
    from .base import err

    if args.resume and (args.drain or args.mode != "check"):
        return err("--resume re-checks a drained node and resumes it; it goes with neither --drain nor --mode")
    node = args.node or node_name()
    mode = "resume" if args.resume else args.mode
    if args.resume:
        state, reason, problem = node_state(node)
        if state is None:
            return err(f"cannot read the state of node {node}: {problem}; fix: run it where scontrol reaches the "
                       "cluster, and name the node with --node")
        if "DRAIN" not in state.upper():
            print(f"sits health: {node} is {state}, not drained: nothing to resume")
            return HEALTHY
        if not (reason or "").startswith(REASON_PREFIX.strip()) and not args.any_reason:
            print(f"sits health: {node} was drained for another reason ({reason!r}); it stays drained (--any-reason "
                  "re-checks it anyway)")
            return UNCHECKED
    tmp: Optional[str] = None
    if args.report_dir:
        rdir = Path(args.report_dir).resolve()
    else:
        tmp = tempfile.mkdtemp(prefix="sits-health-")
        rdir = Path(tmp).resolve()
    try:
        report, problems = run_suite(args, rdir, mode)
        outcome, fail_lines, other = judge(report, problems)
        if args.resume:
            outcome, other = _under_load(report, outcome, other)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    what = "; ".join(fail_lines + other)
    print(f"sits health: {node}: {OUTCOME_NAMES[outcome]}" + (f": {what}" if what else "")
          + (" (quick level)" if mode != "resume" else " (re-checked under the inference load of PLP-*)"))
    if args.resume:
        if outcome != HEALTHY:
            print(f"sits health: {node} stays drained: the re-check under load did not pass")
            return outcome
        ok, text = _scontrol(["update", f"nodename={node}", "state=resume"])
        if not ok:
            print(f"sits health: could not resume {node}: {text}", file=sys.stderr)
            return UNCHECKED
        print(f"sits health: resumed {node}")
        return HEALTHY
    if mode in ("prolog", "epilog"):
        if outcome == UNHEALTHY:
            print(f"sits health: {mode} fails: slurmd drains {node}: {REASON_PREFIX}{'; '.join(fail_lines)}",
                  file=sys.stderr)
            return UNHEALTHY
        return 0
    if outcome == UNHEALTHY and (args.drain or mode == "healthcheck"):
        drain(node, fail_lines)
    elif outcome in (UNDECIDED, UNCHECKED) and (args.drain or mode == "healthcheck"):
        print(f"sits health: {node} not drained: only a FAIL of a health requirement drains a node")
    return 0 if mode == "healthcheck" else outcome


def _under_load(report: Optional[Dict[str, Any]], outcome: int, other: List[str]) -> Tuple[int, List[str]]:
    """The return-to-service rule on top of :func:`judge`: the health window of every accelerator ran under the
    inference load and sampled during it, and the load's requirements (PLP-*) were decided."""
    if report is None or outcome != HEALTHY:
        return outcome, other
    windows = [v for v in report.get("verdicts", []) if v.get("requirement") == "DEP-THROTTLE"]
    load_ok = bool(windows)
    for v in windows:
        ev = v.get("evidence")
        ev = ev if isinstance(ev, dict) else {}
        load = ev.get("load")
        load = load if isinstance(load, dict) else {}
        under = [s for s in ev.get("samples") or [] if isinstance(s, dict) and s.get("under_load")]
        if load.get("kind") != "inference" or not load.get("completed") or not under:
            load_ok = False
            other = other + [f"{v.get('subject')}: the health window did not run under the inference load "
                             f"({load.get('reason') or 'no loaded sample'})"]
    plp = [v for v in report.get("verdicts", []) if v.get("requirement") in LOAD_REQUIREMENTS]
    if not plp:
        load_ok = False
        other = other + ["no PLP-* verdict: the inference load did not run"]
    if not load_ok:
        return UNDECIDED, other + ["idle checks alone never return a node to service"]
    return outcome, other
