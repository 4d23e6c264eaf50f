"""Fleet runs on Slurm, and the fleet report that merges the nodes' reports.

``sits fleet run`` starts the suite on every node through Slurm (``srun``, one
task per node, or an ``sbatch`` job array); each node writes its report into
``OUT/<node>/`` of a directory all nodes see.  ``sits fleet merge OUT`` then
writes ``fleet-report.json`` (schema ``resources/fleet.schema.json``),
``fleet-report.html`` and ``fleet-junit.xml``.  ``sits health`` is a
quick-level run for Slurm's HealthCheckProgram or a prolog.

Every Slurm command is run with an argument list, never through a shell.
Reports read from the shared directory are untrusted: confined reads (no
links followed), size limits, schema validation.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

FLEET_SCHEMA_VERSION = "1.0"
RUN_FILE = "fleet-run.json"
NODE_FILE = "node.json"
NODE_EXIT_FILE = "node-exit.json"
NODE_LOG = "pytest.log"
REPORT_NAME = "sits-report.json"
JUNIT_NAME = "junit.xml"
FLEET_JSON, FLEET_HTML, FLEET_JUNIT = "fleet-report.json", "fleet-report.html", "fleet-junit.xml"
MAX_REPORT_BYTES = 64 * 1024 * 1024
MAX_JUNIT_BYTES = 64 * 1024 * 1024
MAX_SMALL_JSON = 1024 * 1024
DEFAULT_K = 3.5
MIN_GROUP = 3
MAD_SCALE = 1.4826  # MAD × 1.4826 estimates σ for normally distributed values
NODE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
SLURM_INSTALL = ("apt-get install slurm-client (Debian/Ubuntu; the cluster itself needs slurmctld, slurmd and munge: "
                 "tools/slurm/install.sh and tools/slurm/local-cluster.sh start a local one)")
JUNIT_INSTALL = "pip install 'pytest-sits[fleet]'  (or: pip install junitparser)"

#: Node results: the node's own verdicts folded into one word.
NODE_PASS, NODE_FAIL, NODE_UNDECIDED, NODE_ERROR = "PASS", "FAIL", "UNDECIDED", "ERROR"
NODE_RESULTS = (NODE_PASS, NODE_FAIL, NODE_UNDECIDED, NODE_ERROR)
PASSING = ("PASS", "WARN", "WAIVED")

OUTLIER_RULE = ("per profile and per (requirement, subject, unit), over the nodes whose verdict has a numeric "
                "measured value: a value x is an outlier when |x - median| > k x 1.4826 x MAD, MAD being the "
                "median of |x_i - median| (1.4826 x MAD estimates the standard deviation of normal data); when "
                "MAD = 0 every value that differs from the median is an outlier; groups of fewer than "
                f"{MIN_GROUP} nodes are not judged")
PASS_RATE_RULE = ("per requirement: nodes whose worst verdict for it is PASS, WARN or WAIVED, divided by the nodes "
                  "where it was not skipped; a node that produced no report counts as ERROR for every requirement "
                  "the other nodes ran")


class FleetError(Exception):
    """A usage or environment problem, with its fix in the message."""


# --------------------------------------------------------------------------------------------- helpers

def expand_hostlist(spec: str) -> List[str]:
    """Slurm's hostlist syntax, expanded: ``n[1-3,7],gpu[01-02]x`` -> n1 n2 n3 n7 gpu01x gpu02x."""
    names: List[str] = []
    for part in _split_top(spec.strip()):
        if not part:
            continue
        expanded = [""]
        for text, ranges in re.findall(r"([^\[\]]*)(?:\[([^\]]*)\])?", part):
            if text == "" and ranges == "":
                continue
            choices = [text]
            if ranges:
                choices = [text + v for v in _expand_ranges(ranges, spec)]
            expanded = [e + c for e in expanded for c in choices]
        names.extend(expanded)
    seen: Dict[str, None] = {}
    for n in names:
        seen.setdefault(n, None)
    return list(seen)


def _split_top(spec: str) -> List[str]:
    out, depth, cur = [], 0, ""
    for ch in spec:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise FleetError(f"node list {spec!r}: unbalanced ']'; fix: write it as Slurm does, e.g. n[1-3],gpu7")
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    if depth:
        raise FleetError(f"node list {spec!r}: unbalanced '['; fix: write it as Slurm does, e.g. n[1-3],gpu7")
    out.append(cur)
    return out


def _expand_ranges(ranges: str, spec: str) -> List[str]:
    values: List[str] = []
    for item in ranges.split(","):
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", item.strip())
        if not m:
            raise FleetError(f"node list {spec!r}: bad range {item!r}; fix: ranges are numbers, e.g. n[1-3,5]")
        lo, hi = m.group(1), m.group(2) or m.group(1)
        if int(hi) < int(lo) or int(hi) - int(lo) > 100000:
            raise FleetError(f"node list {spec!r}: bad range {item!r}; fix: write low-high with low <= high")
        width = len(lo) if lo.startswith("0") else 0
        values.extend(str(i).zfill(width) for i in range(int(lo), int(hi) + 1))
    return values


def _read_bytes(root: Path, rel: str, limit: int) -> bytes:
    """Bytes of ROOT/REL, confined below ROOT: no link followed, regular files only, at most ``limit`` bytes."""
    from .untrusted import read_bytes

    return read_bytes(root, rel, limit)


def _read_json(root: Path, rel: str, limit: int) -> Any:
    from .untrusted import load_json

    return load_json(rel, limit, what="file", root=root)


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _write_json(path: Path, data: Any) -> None:
    from .report import atomic_write

    atomic_write(path, json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")


def node_name() -> str:
    """This node's name as Slurm knows it (SLURMD_NODENAME in jobs), else the short host name."""
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]


def which(cmd: str) -> str:
    path = shutil.which(cmd)
    if not path:
        raise FleetError(f"`{cmd}` not found on PATH; install the Slurm client: {SLURM_INSTALL}")
    return path


# --------------------------------------------------------------------------------------------- node side

def node_command(out: Path, node: str, pytest_args: Sequence[str], python: str = sys.executable) -> List[str]:
    """The suite's command line on one node: its report and JUnit XML go to OUT/<node>/."""
    dest = out / node
    return [python, "-m", "pytest", "--pyargs", "pytest_sits.conformance", *pytest_args,
            "--sits-report-dir", str(dest), "--junitxml", str(dest / JUNIT_NAME), "-p", "no:cacheprovider"]


def node_main(argv: Optional[Sequence[str]] = None) -> int:
    """Run on each node by Slurm: ``python -m pytest_sits.fleet node OUT -- <pytest args>``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["node"]:
        argv = argv[1:]
    if not argv:
        print("usage: python -m pytest_sits.fleet node OUT -- <pytest args>", file=sys.stderr)
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
    marker = {"node": node, "hostname": socket.gethostname(), "run_id": run_id,
              "job_id": os.environ.get("SLURM_JOB_ID"), "step_id": os.environ.get("SLURM_STEP_ID"),
              "array_task_id": os.environ.get("SLURM_ARRAY_TASK_ID"),
              "job_nodelist": os.environ.get("SLURM_JOB_NODELIST"), "started_at": _now(),
              "command": node_command(out, node, rest)}
    _write_json(dest / NODE_FILE, marker)
    started = time.monotonic()
    with open(dest / NODE_LOG, "wb") as log:
        rc = subprocess.call(marker["command"], stdout=log, stderr=subprocess.STDOUT)
    _write_json(dest / NODE_EXIT_FILE, {"node": node, "exit_code": rc, "finished_at": _now(),
                                        "duration_s": round(time.monotonic() - started, 3)})
    return rc


# --------------------------------------------------------------------------------------------- run

def _slurm_common(args: Any) -> List[str]:
    opts: List[str] = ["--job-name", args.job_name]
    if args.partition:
        opts += ["--partition", args.partition]
    if args.time:
        opts += ["--time", str(args.time)]
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
    node_entry = [args.python, "-m", "pytest_sits.fleet", "node", str(out), "--", *pytest_args]
    if args.array:
        cmd = [which("sbatch"), *_slurm_common(args), f"--array=0-{count - 1}", "--nodes=1", "--ntasks=1",
               "--exclusive", "--parsable", "--output", str(out / "slurm-%A_%a.out"),
               str(_array_script(out, args.python)), str(out), "--", *pytest_args]
    else:
        cmd = [which("srun"), *_slurm_common(args), f"--nodes={count}", f"--ntasks={count}",
               "--ntasks-per-node=1", "--no-kill", "--kill-on-bad-exit=0", "--output", str(out / "slurm-%j.%t.out")]
        if args.nodelist:
            cmd += [f"--nodelist={args.nodelist}"]
        cmd += node_entry
    record = {"run_id": run_id, "mode": "array" if args.array else "srun", "requested_nodes": count,
              "nodelist": args.nodelist, "partition": args.partition, "expected_nodes": expected,
              "pytest_args": pytest_args, "slurm_command": cmd, "started_at": _now()}
    _write_json(out / RUN_FILE, record)
    print(f"sits fleet: {record['mode']} on {count} node(s){' ' + args.nodelist if args.nodelist else ''}, "
          f"reports in {out}", flush=True)
    started = time.monotonic()
    proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if args.array and proc.returncode == 0:
        job_id = proc.stdout.strip().splitlines()[-1].split(";")[0] if proc.stdout.strip() else ""
        record["job_id"] = job_id
        _wait_for_job(job_id, env)
    record.update(slurm_exit_code=proc.returncode, slurm_output=proc.stdout[-20000:], finished_at=_now(),
                  duration_s=round(time.monotonic() - started, 3))
    _write_json(out / RUN_FILE, record)
    for line in proc.stdout.strip().splitlines()[-50:]:
        print(f"{Path(cmd[0]).name}: {line}" if not line.startswith(("srun:", "sbatch:")) else line, file=sys.stderr)
    if proc.returncode != 0 and not discover_nodes(out, record):
        last = (proc.stdout.strip().splitlines() or ["(no output)"])[-1]
        raise FleetError(f"{Path(cmd[0]).name} failed (exit {proc.returncode}) and no node ran: {last}; fix: check "
                         "the Slurm options (partition, node names, account) and that `sinfo` reaches the cluster")
    fleet = merge(out, k=args.k)
    print_summary(fleet, out)
    return 0 if fleet["summary"]["result"] == "PASS" else 1


def _wait_for_job(job_id: str, env: Dict[str, str], poll_s: float = 1.0) -> None:
    """Until no element of the job is pending, running or completing (``sbatch --wait`` polls ever more slowly:
    a job that ends after 20 s is seen to end some 20 s later)."""
    if not re.fullmatch(r"\d+", job_id):
        raise FleetError(f"sbatch did not print a job id (got {job_id!r})")
    squeue = which("squeue")
    failures = 0
    try:
        while True:
            res = subprocess.run([squeue, "-h", "-j", job_id, "-o", "%i %T"], env=env, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
            if res.returncode != 0 and "Invalid job id" in res.stderr:
                return  # already purged: finished
            if res.returncode == 0 and not res.stdout.strip():
                return
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
    script = out / ".sits-fleet-node.py"
    script.write_text(f"#!{python}\nimport sys\nfrom pytest_sits.fleet import node_main\n"
                      "sys.exit(node_main(sys.argv[1:]))\n", encoding="utf-8")
    script.chmod(0o755)
    return script


# --------------------------------------------------------------------------------------------- merge

def _node_result(report: Dict[str, Any]) -> Tuple[str, str, Dict[str, int]]:
    from .verdict import STATUSES

    counts = {s: 0 for s in STATUSES}
    for v in report["verdicts"]:
        counts[v["status"]] += 1
    completed = report["run"]["completed"]
    if counts["FAIL"]:
        return NODE_FAIL, f"{counts['FAIL']} FAIL" + ("" if completed else "; the run did not complete"), counts
    if not completed:
        return NODE_ERROR, "the run did not complete (INCOMPLETE report)", counts
    if counts["ERROR"]:
        return NODE_ERROR, f"{counts['ERROR']} ERROR: a probe broke", counts
    if counts["INCONCLUSIVE"]:
        return NODE_UNDECIDED, f"{counts['INCONCLUSIVE']} INCONCLUSIVE", counts
    if not (counts["PASS"] or counts["WARN"] or counts["WAIVED"]):
        return NODE_UNDECIDED, "nothing decided (no verdict, or every requirement skipped)", counts
    return NODE_PASS, ", ".join(f"{n} {k}" for k, n in counts.items() if n), counts


def _load_node(out: Path, node: str) -> Dict[str, Any]:
    from . import report as rep

    base = out / node
    entry: Dict[str, Any] = {"node": node, "result": NODE_ERROR, "reason": "", "report": None, "junit": None,
                             "report_result": None, "simulated": None, "profile": None, "level": None,
                             "hostname": None, "platform": None, "log": None, "started_at": None, "exit_code": None,
                             "counts": {}}
    marker = exit_info = None
    try:
        marker = _read_json(out, f"{node}/{NODE_FILE}", MAX_SMALL_JSON)
        entry["started_at"] = marker.get("started_at") if isinstance(marker, dict) else None
    except (OSError, ValueError):
        pass
    try:
        exit_info = _read_json(out, f"{node}/{NODE_EXIT_FILE}", MAX_SMALL_JSON)
        if isinstance(exit_info, dict) and isinstance(exit_info.get("exit_code"), int):
            entry["exit_code"] = exit_info["exit_code"]
    except (OSError, ValueError):
        pass
    if (base / JUNIT_NAME).is_file() and not (base / JUNIT_NAME).is_symlink():
        entry["junit"] = f"{node}/{JUNIT_NAME}"
    if (base / NODE_LOG).is_file() and not (base / NODE_LOG).is_symlink():
        entry["log"] = f"{node}/{NODE_LOG}"
    try:
        report = _read_json(out, f"{node}/{REPORT_NAME}", MAX_REPORT_BYTES)
    except FileNotFoundError:
        if marker is None:
            why = "the node never started its task (no node.json, no report)"
        elif exit_info is None:
            why = (f"started at {entry['started_at']} but stopped before writing its report and exit record: "
                   "the node or its task died")
        else:
            why = f"the suite exited with code {entry['exit_code']} without writing a report"
        entry["reason"] = f"no result: {why}"
        return entry
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        entry["reason"] = f"no result: {node}/{REPORT_NAME} unreadable ({exc})"
        return entry
    errors = rep.validate(report) if isinstance(report, dict) else ["(top): not a JSON object"]
    if errors:
        entry["reason"] = f"no result: {node}/{REPORT_NAME} is not a valid report ({errors[0]})"
        return entry
    result, why, counts = _node_result(report)
    entry.update(result=result, reason=why, counts=counts, report=f"{node}/{REPORT_NAME}",
                 report_result=report["summary"]["result"], simulated=report["platform"]["simulated"],
                 profile=report["profile"]["name"], level=report["run"]["level"],
                 hostname=report["environment"]["hostname"], platform=report["platform"]["label"])
    entry["_report"] = report
    return entry


def discover_nodes(out: Path, run: Optional[Dict[str, Any]]) -> List[str]:
    """The nodes of a fleet run: those asked for, those in the job's allocation, and those that wrote a folder."""
    names: Dict[str, None] = {}
    for n in (run or {}).get("expected_nodes") or []:
        if isinstance(n, str):
            names.setdefault(n, None)
    found = []
    with os.scandir(out) as it:
        for e in it:
            if e.is_dir(follow_symlinks=False) and NODE_NAME.match(e.name) and (
                    os.path.lexists(os.path.join(e.path, NODE_FILE))
                    or os.path.lexists(os.path.join(e.path, REPORT_NAME))):
                found.append(e.name)
    for n in sorted(found):
        try:
            marker = _read_json(out, f"{n}/{NODE_FILE}", MAX_SMALL_JSON)
            alloc = marker.get("job_nodelist") if isinstance(marker, dict) else None
            if isinstance(alloc, str) and alloc and not (run or {}).get("mode") == "array":
                for m in expand_hostlist(alloc):
                    names.setdefault(m, None)
        except (OSError, ValueError, FleetError):
            pass
    for n in sorted(found):
        names.setdefault(n, None)
    return sorted((n for n in names if NODE_NAME.match(n)), key=_natural)


def _natural(name: str) -> List[Any]:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def requirement_rates(nodes: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    from .verdict import worst

    per_node: Dict[str, Dict[str, str]] = {}
    for n in nodes:
        rep = n.get("_report")
        if rep is None:
            continue
        by_req: Dict[str, List[str]] = {}
        for v in rep["verdicts"]:
            by_req.setdefault(v["requirement"], []).append(v["status"])
        per_node[n["node"]] = {r: worst(s) for r, s in by_req.items()}
    reqs = sorted({r for d in per_node.values() for r in d})
    rows = []
    for r in reqs:
        statuses: Dict[str, str] = {}
        for n in nodes:
            if n["node"] in per_node:
                if r in per_node[n["node"]]:
                    statuses[n["node"]] = per_node[n["node"]][r]
            else:
                statuses[n["node"]] = "ERROR"  # no report: nothing decided on that node
        counted = {k: s for k, s in statuses.items() if s != "SKIP"}
        passed = [k for k, s in counted.items() if s in PASSING]
        rows.append({"requirement": r, "nodes": len(statuses), "counted": len(counted), "passed": len(passed),
                     "pass_rate": round(len(passed) / len(counted), 4) if counted else None,
                     "by_status": {s: sorted((k for k, v in statuses.items() if v == s), key=_natural)
                                   for s in sorted(set(statuses.values()))}})
    return rows


def _number(value: Any) -> Optional[float]:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if value == value and abs(value) != float("inf") else None


def outliers(nodes: List[Dict[str, Any]], k: float = DEFAULT_K) -> Dict[str, Any]:
    """Nodes whose measured values stand out among the nodes of the same profile (rule: OUTLIER_RULE)."""
    groups: Dict[Tuple[str, str, str, str], List[Tuple[str, float]]] = {}
    for n in nodes:
        rep = n.get("_report")
        if rep is None:
            continue
        for v in rep["verdicts"]:
            x = _number(v.get("measured"))
            if x is None:
                continue
            key = (n["profile"], v["requirement"], v["subject"], v.get("unit") or "")
            groups.setdefault(key, []).append((n["node"], x))
    flagged, judged, small = [], 0, 0
    for (profile, req, subject, unit), values in sorted(groups.items()):
        if len({node for node, _ in values}) < MIN_GROUP:
            small += 1
            continue
        judged += 1
        xs = [x for _, x in values]
        med = statistics.median(xs)
        mad = statistics.median(abs(x - med) for x in xs)
        limit = k * MAD_SCALE * mad
        for node, x in values:
            if abs(x - med) > limit:
                flagged.append({"profile": profile, "requirement": req, "subject": subject, "unit": unit or None,
                                "node": node, "value": x, "median": med, "mad": mad,
                                "low": med - limit, "high": med + limit,
                                "why": (f"{x:g} is outside median {med:g} ± {k:g} × 1.4826 × MAD {mad:g}"
                                        f" = [{med - limit:g}, {med + limit:g}]")})
    return {"rule": OUTLIER_RULE, "k": k, "mad_scale": MAD_SCALE, "min_group": MIN_GROUP,
            "groups_judged": judged, "groups_too_small": small, "flagged": flagged}


def merge_junit(out: Path, nodes: List[Dict[str, Any]]) -> Dict[str, Any]:
    """Every node's JUnit XML in one file, each suite named by its node; a node without one gets an error case."""
    try:
        from junitparser import Error, JUnitXml, TestCase, TestSuite
    except ImportError:
        return {"path": None, "absent": f"junitparser is not installed; {JUNIT_INSTALL}"}
    merged = JUnitXml(name="sits fleet")
    unreadable = []
    for n in nodes:
        node = n["node"]
        xml, why = None, n["reason"] if n["result"] == NODE_ERROR else f"{node}: no {JUNIT_NAME} written"
        if n.get("junit"):
            try:
                xml = JUnitXml.fromstring(_read_bytes(out, f"{node}/{JUNIT_NAME}", MAX_JUNIT_BYTES))
            except Exception as exc:  # any parse failure of untrusted XML: recorded, never raised
                unreadable.append(node)
                why = f"{node}/{JUNIT_NAME} unreadable: {type(exc).__name__}: {exc}"
        if xml is not None:
            suites = list(xml) if isinstance(xml, JUnitXml) else [xml]
            for suite in suites:
                suite.name = node if len(suites) == 1 else f"{node}:{suite.name}"
                suite.hostname = node
                for case in suite:
                    case.classname = f"{node}.{case.classname}" if case.classname else node
                merged.add_testsuite(suite)
            continue
        suite = TestSuite(node)
        case = TestCase("fleet node result", classname=f"{node}.fleet")
        case.result = [Error(why, "no result")]
        suite.add_testcase(case)
        suite.update_statistics()
        merged.add_testsuite(suite)
    merged.update_statistics()
    merged.write(str(out / FLEET_JUNIT))
    return {"path": FLEET_JUNIT, "tests": merged.tests, "failures": merged.failures, "errors": merged.errors,
            "skipped": merged.skipped, "unreadable": unreadable}


def merge(out: Path, k: float = DEFAULT_K) -> Dict[str, Any]:
    """Read OUT/<node>/ of a fleet run, write the fleet report (JSON, HTML, JUnit XML) into OUT, return it."""
    from . import __version__

    out = Path(out)
    if not out.is_dir():
        raise FleetError(f"{out}: not a directory; fix: give the --out directory of `sits fleet run`")
    if not (k > 0):
        raise FleetError(f"outlier k = {k}: must be positive")
    run = None
    try:
        run = _read_json(out, RUN_FILE, MAX_SMALL_JSON)
        if not isinstance(run, dict):
            run = None
    except FileNotFoundError:
        pass
    except (OSError, ValueError) as exc:
        raise FleetError(f"{out / RUN_FILE}: unreadable ({exc}); fix: restore it from the run, or remove it to "
                         "merge the node folders alone") from None
    names = discover_nodes(out, run)
    if not names:
        raise FleetError(f"{out}: no node folder (OUT/<node>/ with {NODE_FILE} or {REPORT_NAME}) and no expected "
                         "node; fix: give the directory a fleet run wrote")
    nodes = [_load_node(out, n) for n in names]
    counts = {r: sum(1 for n in nodes if n["result"] == r) for r in NODE_RESULTS}
    simulated = any(n.get("simulated") for n in nodes)
    if counts[NODE_PASS] == len(nodes):
        result, why = "PASS", f"all {len(nodes)} nodes pass"
    else:
        result = "FAIL"
        why = ", ".join(f"{c} {r}" for r, c in counts.items() if c) + f" of {len(nodes)} nodes"
    reported: Dict[str, int] = {}
    for n in nodes:
        if n["report_result"]:
            reported[n["report_result"]] = reported.get(n["report_result"], 0) + 1
    if reported:  # a node that passes what it decided may not have decided everything: say what the nodes said
        why += "; node reports: " + ", ".join(f"{c} {r}" for r, c in sorted(reported.items()))
    if run and run.get("requested_nodes") and len(nodes) < run["requested_nodes"]:
        result = "FAIL"
        why += f"; {run['requested_nodes']} nodes were requested, {len(nodes)} known"
    fleet = {
        "schema": "pytest-sits/fleet-report", "schema_version": FLEET_SCHEMA_VERSION,
        "generator": {"name": "pytest-sits", "version": __version__}, "created_at": _now(),
        "directory": str(out),
        "run": {k2: run.get(k2) for k2 in ("run_id", "mode", "requested_nodes", "nodelist", "partition",
                                           "pytest_args", "slurm_command", "slurm_exit_code", "started_at",
                                           "finished_at", "duration_s")} if run else None,
        "summary": {"result": result, "result_reason": why, "nodes": len(nodes), "counts": counts,
                    "pass_rate": round(counts[NODE_PASS] / len(nodes), 4), "simulated": simulated},
        "nodes": [{k2: v for k2, v in n.items() if not k2.startswith("_")} for n in nodes],
        "requirements": requirement_rates(nodes), "pass_rate_rule": PASS_RATE_RULE,
        "outliers": outliers(nodes, k), "junit": merge_junit(out, nodes),
    }
    errors = validate(fleet)
    if errors:  # our own output: a schema mismatch is a defect, say where
        raise AssertionError(f"fleet report does not match its schema: {errors[:3]}")
    _write_json(out / FLEET_JSON, fleet)
    from .report import atomic_write

    atomic_write(out / FLEET_HTML, render_html(fleet))
    return fleet


def schema() -> Dict[str, Any]:
    from .report import RESOURCES

    return json.loads((RESOURCES / "fleet.schema.json").read_text(encoding="utf-8"))


def validate(fleet: Dict[str, Any]) -> List[str]:
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema())
    return [f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}" for e in validator.iter_errors(fleet)]


def render_html(fleet: Dict[str, Any]) -> str:
    from jinja2 import Environment, FileSystemLoader, select_autoescape

    from .report import RESOURCES, _fmt

    env = Environment(loader=FileSystemLoader(str(RESOURCES)),
                      autoescape=select_autoescape(enabled_extensions=("jinja2", "html"), default=True))
    env.filters["fmt"] = _fmt
    return env.get_template("fleet.html.jinja2").render(f=fleet)


def print_summary(fleet: Dict[str, Any], out: Path, file: Any = None) -> None:
    file = file or sys.stdout
    width = max(len(n["node"]) for n in fleet["nodes"])
    for n in fleet["nodes"]:
        print(f"  {n['node']:{width}}  {n['result']:9}  {n['reason']}", file=file)
    s = fleet["summary"]
    sim = " (SIMULATED: not a conformance result)" if s["simulated"] else ""
    print(f"fleet: {s['result']}{sim}: {s['result_reason']}", file=file)
    for o in fleet["outliers"]["flagged"][:20]:
        print(f"  outlier: {o['node']} {o['requirement']} {o['subject']}: {o['why']}", file=file)
    print(f"fleet report: {out / FLEET_JSON}\nfleet report: {out / FLEET_HTML}", file=file)
    if fleet["junit"].get("path"):
        print(f"fleet junit: {out / FLEET_JUNIT}", file=file)
    else:
        print(f"fleet junit: not merged: {fleet['junit']['absent']}", file=file)


# --------------------------------------------------------------------------------------------- health

def health(args: Any) -> int:
    """A quick-level run of the suite on this node; 0 healthy, 1 not (and, with --drain, the node drained)."""
    node = args.node or node_name()
    keep = Path(args.report_dir) if args.report_dir else None
    tmp = None if keep else tempfile.mkdtemp(prefix="sits-health-")
    rdir = keep or Path(tmp)
    cmd = [sys.executable, "-m", "pytest", "--pyargs", "pytest_sits.conformance", "--sits-level", "quick", "-q",
           "-p", "no:cacheprovider", "--sits-report-dir", str(rdir)]
    if args.platform:
        cmd += ["--sits-platform", args.platform]
    if args.profile:
        cmd += ["--sits-profile", args.profile]
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
            try:
                report = _read_json(rdir, REPORT_NAME, MAX_REPORT_BYTES)
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


if __name__ == "__main__":  # pragma: no cover - the per-node entry point Slurm runs
    sys.exit(node_main())
