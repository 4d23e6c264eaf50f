"""The merge: ``sits fleet merge OUT`` folds the nodes' reports into one fleet report.

Writes ``fleet-report.json`` (schema ``resources/fleet.schema.json``),
``fleet-report.html``, ``fleet-junit.xml`` and, when asked, a Prometheus
textfile.  Every file read from the shared folder is untrusted: read confined
below OUT (no link followed), size limited, reports through the one report
reader (validated against the report schema); every file written goes through
the one safe writer.

It scales to thousands of nodes: each node's report is read, validated and
folded into a small summary (its worst status per requirement, its numeric
measured values, its JUnit suites as text) by a pool of worker processes, and
dropped; only the summaries stay in memory, and the merged JUnit XML is
spooled to a temporary file.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from ... import __version__
from ...files import atomic_write, load_json, replacing
from ...files import read_bytes as read_confined
from ...report.model import RESOURCES
from ...report.render import environment
from ...report.store import HTML_NAME, ReportInputError, read_report
from ...verdict import STATUSES, worst
from .common import (DEFAULT_K, FLEET_HTML, FLEET_JSON, FLEET_JUNIT, FLEET_SCHEMA_VERSION,
                     JUNIT_NAME, MAD_SCALE, MAX_JUNIT_BYTES, MAX_SMALL_JSON, MIN_GROUP, NODE_ERROR, NODE_EXIT_FILE,
                     NODE_FAIL, NODE_FILE, NODE_LOG, NODE_NAME, NODE_PASS, NODE_RESULTS, NODE_UNDECIDED,
                     OUTLIER_RULE, PASS_RATE_RULE, PASSING, REPORT_NAME, RUN_FILE, FleetError, expand_hostlist, now_iso,
                     write_json)

#: The fleet's headline is its worst node result, in this order (a FAIL is decided evidence, so it heads an
#: ERROR, as it does within one node; UNDECIDED stays UNDECIDED and never reads as FAIL).
HEADLINE_ORDER = (NODE_FAIL, NODE_ERROR, NODE_UNDECIDED, NODE_PASS)
#: Nodes from which on the reports are read by worker processes (below it, in this process).
POOL_FROM = 64


def read_json(root: Path, rel: str, limit: int) -> Any:
    """A small JSON file of the fleet folder (node.json, node-exit.json, fleet-run.json), confined below it."""
    return load_json(rel, limit, what="file", root=root)


def _node_result(report: Dict[str, Any]) -> Tuple[str, str, Dict[str, int]]:
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


def check_view(report: Dict[str, Any]) -> Optional[str]:
    """What is wrong with the fields of a report that the merge reads (None: nothing).  The report schema has
    the same rules; this check is the part of it the merge depends on, in a fraction of the time of a full
    validation (``--strict`` runs the full one)."""
    def obj(key: str) -> Dict[str, Any]:
        v = report.get(key)
        if not isinstance(v, dict):
            raise ValueError(f"{key}: not an object")
        return v
    try:
        summary, run, plat, prof, env = (obj(k) for k in ("summary", "run", "platform", "profile", "environment"))
        if not isinstance(summary.get("result"), str):
            return "summary/result: not a string"
        if not isinstance(run.get("completed"), bool):
            return "run/completed: not a boolean"
        if run.get("level") not in ("quick", "standard", "full"):
            return "run/level: not quick, standard or full"
        if not isinstance(plat.get("simulated"), bool) or not isinstance(plat.get("label"), str):
            return "platform: simulated (boolean) and label (string) required"
        if not isinstance(prof.get("name"), str) or not isinstance(env.get("hostname"), str):
            return "profile/name and environment/hostname: strings required"
    except ValueError as exc:
        return str(exc)
    verdicts = report.get("verdicts")
    if not isinstance(verdicts, list):
        return "verdicts: not an array"
    for i, v in enumerate(verdicts):
        if not isinstance(v, dict):
            return f"verdicts/{i}: not an object"
        if not isinstance(v.get("requirement"), str) or not isinstance(v.get("subject"), str):
            return f"verdicts/{i}: requirement and subject must be strings"
        if v.get("status") not in STATUSES:
            return f"verdicts/{i}/status: {str(v.get('status'))[:40]!r} is not a status"
        if not isinstance(v.get("unit"), (str, type(None))):
            return f"verdicts/{i}/unit: not a string or null"
    return None


def _number(value: Any) -> Optional[float]:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if value == value and abs(value) != float("inf") else None


def _summarise(report: Dict[str, Any]) -> Dict[str, Any]:
    """What the merge keeps of one report: the worst status per requirement and the numeric measured values."""
    by_req: Dict[str, List[str]] = {}
    values: List[Tuple[str, str, str, float]] = []
    for v in report["verdicts"]:
        by_req.setdefault(v["requirement"], []).append(v["status"])
        x = _number(v.get("measured"))
        if x is not None:
            values.append((v["requirement"], v["subject"], v.get("unit") or "", x))
    return {"worst": {r: worst(s) for r, s in by_req.items()}, "values": values}


#: ``--replay``: every node report replayed from its evidence before it counts (``full``, the default: what a
#: certification merges), or taken as written (``none``: a quick look, said in the fleet report's summary).
REPLAY_MODES = ("full", "none")


def replay_problem(report: Dict[str, Any]) -> Tuple[Optional[str], int]:
    """Why a node report does not replay (what `sits replay` exits 1 on: a verdict or the summary its evidence
    does not give, a verdict better than ERROR that cannot be recomputed, thresholds that are not its profile's,
    a report whose parts disagree), or None; and how many verdicts were replayed."""
    from ...report.replay import replay_report

    try:
        out = replay_report(report)
    except Exception as exc:  # a report that breaks replay is no evidence of anything
        return f"replay failed on it ({type(exc).__name__}: {str(exc)[:200]})", 0
    found: List[str] = []
    for d in out["differs"]:
        found.append(f"verdict #{d['index']} {d['requirement']} [{d['subject']}] {d['field']}: {d['stored']!r} in "
                     f"the report, its evidence gives {d['now']!r}")
    for n in out["unbacked"]:
        found.append(f"verdict #{n['index']} {n['requirement']} [{n['subject']}] cannot be recomputed from its "
                     f"evidence: {n['why']}")
    for d in out["summary"]:
        found.append(f"{d['field']}: {d['stored']!r} in the report, its verdicts give {d['now']!r}")
    for f in out["thresholds"]:
        where = f"verdict #{f['index']} {f['requirement']} [{f['subject']}]" if f["index"] is not None else f["field"]
        found.append(f"{where}: {f['why']}")
    if not found:
        return None, int(out["replayed"])
    more = f" (and {len(found) - 1} more; `sits replay` lists them)" if len(found) > 1 else ""
    return f"its report does not replay: {found[0][:400]}{more}", int(out["replayed"])


def _load_node(out: Path, node: str, junit: bool = True, strict: bool = False,
               replay: str = "full") -> Dict[str, Any]:
    """One node's entry of the fleet report, with its summary (``_sum``) and JUnit suites (``_junit``)."""
    base = out / node
    entry: Dict[str, Any] = {"node": node, "result": NODE_ERROR, "reason": "", "report": None, "report_html": None,
                             "junit": None, "report_result": None, "simulated": None, "profile": None,
                             "level": None, "hostname": None, "platform": None, "log": None, "started_at": None,
                             "exit_code": None, "counts": {}, "replayed": None}
    marker = exit_info = None
    try:
        marker = read_json(out, f"{node}/{NODE_FILE}", MAX_SMALL_JSON)
        entry["started_at"] = marker.get("started_at") if isinstance(marker, dict) else None
    except (OSError, ValueError):
        pass
    try:
        exit_info = read_json(out, f"{node}/{NODE_EXIT_FILE}", MAX_SMALL_JSON)
        if isinstance(exit_info, dict) and isinstance(exit_info.get("exit_code"), int):
            entry["exit_code"] = exit_info["exit_code"]
        stopped = exit_info.get("stopped_by") if isinstance(exit_info, dict) else None
    except (OSError, ValueError):
        stopped = None
    if (base / JUNIT_NAME).is_file() and not (base / JUNIT_NAME).is_symlink():
        entry["junit"] = f"{node}/{JUNIT_NAME}"
    if (base / NODE_LOG).is_file() and not (base / NODE_LOG).is_symlink():
        entry["log"] = f"{node}/{NODE_LOG}"
    try:
        report = read_report(f"{node}/{REPORT_NAME}", root=out, check_schema=strict)
        problem = None if strict else check_view(report)
        if problem:
            raise ReportInputError(out / node / REPORT_NAME, f"is not a valid pytest-sits report: {problem}",
                                   "check it with `sits report validate FILE`; re-run the suite on that node")
    except FileNotFoundError:
        if marker is None:
            why = "the node never started its task (no node.json, no report)"
        elif exit_info is None:
            why = (f"started at {entry['started_at']} but stopped before writing its report and exit record: "
                   "the node or its task died (pre-empted, killed, or the node failed)")
        else:
            why = f"the suite exited with code {entry['exit_code']} without writing a report"
        entry["reason"] = f"no result: {why}"
    except (OSError, ValueError) as exc:  # ReportInputError names the file and what is wrong with it
        entry["reason"] = f"no result: {exc}"
    else:
        result, why, counts = _node_result(report)
        entry.update(result=result, reason=why, counts=counts, report=f"{node}/{REPORT_NAME}",
                     report_result=report["summary"]["result"], simulated=report["platform"]["simulated"],
                     profile=report["profile"]["name"], level=report["run"]["level"],
                     hostname=report["environment"]["hostname"], platform=report["platform"]["label"])
        foreign = _not_this_node(node, marker, report)
        if not foreign and replay == "full":
            foreign, entry["replayed"] = replay_problem(report)
        if foreign:
            entry.update(result=NODE_ERROR, reason=f"no result: {foreign}", counts={})
        entry["_digest"] = _digest(base / REPORT_NAME)
        if isinstance(stopped, str) and stopped in ("SIGTERM", "SIGINT"):
            entry["reason"] += f"; stopped by {stopped} (pre-empted, cancelled or out of time)"
        if (base / HTML_NAME).is_file() and not (base / HTML_NAME).is_symlink():
            entry["report_html"] = f"{node}/{HTML_NAME}"
        if not foreign:
            entry["_sum"] = _summarise(report)
        del report
    if junit:
        entry["_junit"] = _node_junit(out, entry)
    return entry


def _not_this_node(node: str, marker: Any, report: Dict[str, Any]) -> Optional[str]:
    """Why a report in a node's folder is not that node's, or None: the node runner's record (node.json: the
    node it ran for, the host it ran on) must agree with the folder and with the host the report was written
    on.  A report copied into another node's folder is not a result of that node."""
    if not isinstance(marker, dict):
        return None
    host = report["environment"]["hostname"]
    if isinstance(marker.get("node"), str) and marker["node"] != node:
        return (f"the node runner's record (node.json) is for node {marker['node']!r}, not {node!r}: a folder "
                "copied from another node")
    ran_on = marker.get("hostname")
    if isinstance(ran_on, str) and ran_on and host != ran_on:
        return (f"the report was written on host {host!r}, but this node's task ran on {ran_on!r} (node.json): "
                "a report copied from another machine is not this node's result")
    return None


def _digest(path: Path) -> Optional[str]:
    import hashlib

    try:
        h = hashlib.sha256()
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
        return h.hexdigest()
    except OSError:
        return None


def mark_duplicates(nodes: List[Dict[str, Any]]) -> int:
    """A report byte-identical to another node's is a copy (two runs never write the same timestamps and
    measurements): every node but the first that holds it is an ERROR naming the first.  Returns how many."""
    first: Dict[str, str] = {}
    copies = 0
    for n in nodes:
        d = n.pop("_digest", None)
        if d is None:
            continue
        if d in first:
            copies += 1
            n.update(result=NODE_ERROR, counts={}, reason=f"no result: its report is byte-identical to node "
                                                          f"{first[d]}'s: a copy, not a run of this node")
            n.pop("_sum", None)
        else:
            first[d] = n["node"]
    return copies


def _load_node_task(args: Tuple[str, str, bool, bool, str]) -> Dict[str, Any]:
    return _load_node(Path(args[0]), args[1], args[2], args[3], args[4])


def load_nodes(out: Path, names: List[str], jobs: Optional[int] = None, junit: bool = True,
               strict: bool = False, replay: str = "full") -> List[Dict[str, Any]]:
    """Every node's entry, in the order of ``names``; read by ``jobs`` worker processes (default: one per CPU)
    when there are many nodes."""
    jobs = jobs if jobs is not None else (os.cpu_count() or 1)
    if jobs <= 1 or len(names) < POOL_FROM:
        return [_load_node(out, n, junit, strict, replay) for n in names]
    from concurrent.futures import ProcessPoolExecutor

    tasks = [(str(out), n, junit, strict, replay) for n in names]
    with ProcessPoolExecutor(max_workers=min(jobs, len(names))) as pool:
        return list(pool.map(_load_node_task, tasks, chunksize=max(1, min(32, len(names) // (jobs * 4)))))


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
    allocations: Dict[str, None] = {}
    if not (run or {}).get("mode") == "array":
        for n in sorted(found):
            try:
                marker = read_json(out, f"{n}/{NODE_FILE}", MAX_SMALL_JSON)
            except (OSError, ValueError):
                continue
            alloc = marker.get("job_nodelist") if isinstance(marker, dict) else None
            if isinstance(alloc, str) and alloc and alloc not in allocations:
                allocations[alloc] = None
                try:
                    for m in expand_hostlist(alloc):
                        names.setdefault(m, None)
                except FleetError:
                    pass
    for n in sorted(found):
        names.setdefault(n, None)
    return sorted((n for n in names if NODE_NAME.match(n)), key=_natural)


def _natural(name: str) -> List[Any]:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def requirement_rates(nodes: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    per_node = {n["node"]: n["_sum"]["worst"] for n in nodes if n.get("_sum") is not None}
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


def value_groups(nodes: List[Dict[str, Any]]) -> Dict[Tuple[str, str, str, str], List[Tuple[str, float]]]:
    """Numeric measured values grouped per (profile, requirement, subject, unit): [(node, value)]."""
    groups: Dict[Tuple[str, str, str, str], List[Tuple[str, float]]] = {}
    for n in nodes:
        if n.get("_sum") is None:
            continue
        for req, subject, unit, x in n["_sum"]["values"]:
            groups.setdefault((n["profile"], req, subject, unit), []).append((n["node"], x))
    return groups


def robust_band(xs: List[float], k: float) -> Tuple[float, float, float, float]:
    """(median, MAD, low, high) of ``xs`` with the band median ± k × 1.4826 × MAD."""
    med = statistics.median(xs)
    mad = statistics.median(abs(x - med) for x in xs)
    limit = k * MAD_SCALE * mad
    return med, mad, med - limit, med + limit


def outliers(nodes: List[Dict[str, Any]], k: float = DEFAULT_K,
             groups: Optional[Dict[Tuple[str, str, str, str], List[Tuple[str, float]]]] = None) -> Dict[str, Any]:
    """Nodes whose measured values stand out among the nodes of the same profile (rule: OUTLIER_RULE)."""
    groups = value_groups(nodes) if groups is None else groups
    flagged: List[Dict[str, Any]] = []
    judged, small = 0, 0
    for (profile, req, subject, unit), values in sorted(groups.items()):
        if len({node for node, _ in values}) < MIN_GROUP:
            small += 1
            continue
        judged += 1
        med, mad, low, high = robust_band([x for _, x in values], k)
        for node, x in values:
            if not (low <= x <= high) and x != med:
                flagged.append({"profile": profile, "requirement": req, "subject": subject, "unit": unit or None,
                                "node": node, "value": x, "median": med, "mad": mad, "low": low, "high": high,
                                "why": (f"{x:g} is outside median {med:g} ± {k:g} × 1.4826 × MAD {mad:g}"
                                        f" = [{low:g}, {high:g}]")})
    flagged.sort(key=lambda o: (_natural(o["node"]), o["requirement"], o["subject"]))
    return {"rule": OUTLIER_RULE, "k": k, "mad_scale": MAD_SCALE, "min_group": MIN_GROUP,
            "groups_judged": judged, "groups_too_small": small, "flagged": flagged}


def measurements(groups: Dict[Tuple[str, str, str, str], List[Tuple[str, float]]]) -> List[Dict[str, Any]]:
    """Every numeric measured value of the fleet, per (profile, requirement, subject, unit): the input of
    ``sits baseline``."""
    return [{"profile": p, "requirement": r, "subject": s, "unit": u or None,
             "nodes": [n for n, _ in vals], "values": [x for _, x in vals]}
            for (p, r, s, u), vals in sorted(groups.items())]


# --------------------------------------------------------------------------------------------- JUnit XML

def _node_junit(out: Path, entry: Dict[str, Any]) -> Dict[str, Any]:
    """The node's JUnit suites as XML text (suites named by the node, classes prefixed with it), or an error
    case when it has none; with the counts.  Runs in the worker that read the node.  The XML is untrusted:
    read confined and size-limited, parsed by the standard library's expat parser (no external entity is
    fetched, entity expansion is bounded)."""
    from xml.etree import ElementTree as ET

    node = entry["node"]
    why = entry["reason"] if entry["result"] == NODE_ERROR else f"{node}: no {JUNIT_NAME} written"
    unreadable = False
    suites: List[Any] = []
    if entry.get("junit"):
        try:
            root = ET.fromstring(read_confined(out, f"{node}/{JUNIT_NAME}", MAX_JUNIT_BYTES))
            if root.tag == "testsuite":
                suites = [root]
            elif root.tag == "testsuites":
                suites = [e for e in root if e.tag == "testsuite"]
            else:
                raise ValueError(f"root element <{root.tag[:40]}> is neither <testsuites> nor <testsuite>")
        except Exception as exc:  # any parse failure of untrusted XML: recorded, never raised
            unreadable, suites = True, []
            why = f"{node}/{JUNIT_NAME} unreadable: {type(exc).__name__}: {exc}"
    if not suites:
        suite = ET.Element("testsuite", name=node)
        case = ET.SubElement(suite, "testcase", name="fleet node result", classname=f"{node}.fleet")
        err = ET.SubElement(case, "error", message=why, type="no result")
        err.text = why
        suites = [suite]
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    parts = []
    for suite in suites:
        own = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
        for case in suite.iter("testcase"):
            cls = case.get("classname")
            case.set("classname", f"{node}.{cls}" if cls else node)
            own["tests"] += 1
            kinds = {child.tag for child in case}
            own["failures"] += "failure" in kinds
            own["errors"] += "error" in kinds
            own["skipped"] += "skipped" in kinds
        suite.set("name", node if len(suites) == 1 else f"{node}:{suite.get('name', '')}")
        suite.set("hostname", node)
        for k, n in own.items():
            suite.set(k, str(n))
            counts[k] += n
        suite.tail = "\n"
        parts.append(ET.tostring(suite, encoding="unicode").encode("utf-8"))
    return {"xml": b"".join(parts), "unreadable": unreadable, **counts}


def merge_junit(out: Path, nodes: List[Dict[str, Any]]) -> Dict[str, Any]:
    """Every node's JUnit XML in one file, each suite named by its node; a node without one gets an error case.
    Written through the safe writer (a link planted at ``fleet-junit.xml`` is replaced, never written through);
    the suites are spooled to a temporary file, so memory does not grow with the fleet."""
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    unreadable = []
    with tempfile.TemporaryFile() as spool:
        for n in nodes:
            j = n.pop("_junit")
            spool.write(j["xml"])
            for k in totals:
                totals[k] += j[k]
            if j["unreadable"]:
                unreadable.append(n["node"])
        spool.seek(0)
        from xml.sax.saxutils import quoteattr

        head = ('<?xml version="1.0" encoding="utf-8"?>\n<testsuites name=' + quoteattr("sits fleet")
                + "".join(f' {k}="{v}"' for k, v in totals.items()) + ">")
        with replacing(out / FLEET_JUNIT) as fh:
            fh.write(head.encode("utf-8"))
            while True:
                chunk = spool.read(1 << 20)
                if not chunk:
                    break
                fh.write(chunk)
            fh.write(b"</testsuites>\n")
    return {"path": FLEET_JUNIT, **totals, "unreadable": unreadable}


# --------------------------------------------------------------------------------------------- the merge

def headline(counts: Dict[str, int], total: int) -> Tuple[str, str]:
    """The fleet's result: its worst node result (HEADLINE_ORDER), and why."""
    if counts[NODE_PASS] == total:
        return NODE_PASS, f"all {total} nodes pass"
    result = next(r for r in HEADLINE_ORDER if counts.get(r))
    return result, ", ".join(f"{c} {r}" for r, c in counts.items() if c) + f" of {total} nodes"


def merge(out: Path, k: float = DEFAULT_K, jobs: Optional[int] = None,
          prometheus: Optional[Path] = None, strict: bool = False, replay: str = "full") -> Dict[str, Any]:
    """Read OUT/<node>/ of a fleet run, write the fleet report (JSON, HTML, JUnit XML; a Prometheus textfile
    when ``prometheus`` names one) into OUT, return it.  ``strict``: validate every node report against the
    whole report schema (by default, the fields the merge reads: :func:`check_view`).  ``replay``: ``full``
    replays every node report from its evidence, and one that does not replay is that node's ERROR; ``none``
    takes the reports as written (the summary says so)."""
    out = Path(out)
    if replay not in REPLAY_MODES:
        raise FleetError(f"--replay={replay}: not one of {', '.join(REPLAY_MODES)}")
    if not out.is_dir():
        raise FleetError(f"{out}: not a directory; fix: give the --out directory of `sits fleet run`")
    if not (k > 0):
        raise FleetError(f"outlier k = {k}: must be positive")
    for name in (FLEET_JSON, FLEET_HTML, FLEET_JUNIT):  # said before the merge's work, not as a traceback after
        if (out / name).is_dir() and not (out / name).is_symlink():
            raise FleetError(f"{out / name}: a folder is in the way of the fleet report; fix: move it out of {out}")
    if prometheus is not None:
        from ...report.prometheus import require_client

        require_client()
    run = None
    try:
        run = read_json(out, RUN_FILE, MAX_SMALL_JSON)
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
    nodes = load_nodes(out, names, jobs, True, strict, replay)
    mark_duplicates(nodes)
    requested = (run or {}).get("requested_nodes")
    missing = 0
    if isinstance(requested, int) and len(nodes) < requested:
        missing = requested - len(nodes)  # job-array elements that never started and left no folder
    counts = {r: sum(1 for n in nodes if n["result"] == r) for r in NODE_RESULTS}
    counts[NODE_ERROR] += missing
    total = len(nodes) + missing
    simulated = any(n.get("simulated") for n in nodes)
    result, why = headline(counts, total)
    reported: Dict[str, int] = {}
    for n in nodes:
        if n["report_result"]:
            reported[n["report_result"]] = reported.get(n["report_result"], 0) + 1
    if reported:  # a node that passes what it decided may not have decided everything: say what the nodes said
        why += "; node reports: " + ", ".join(f"{c} {r}" for r, c in sorted(reported.items()))
    if missing:
        why += (f"; {requested} nodes were requested, {len(nodes)} known: {missing} never started and left no "
                "folder (counted as ERROR)")
    if replay == "none":
        why += "; the node reports were NOT replayed (--replay=none): taken as written"
    groups = value_groups(nodes)
    fleet = {
        "schema": "pytest-sits/fleet-report", "schema_version": FLEET_SCHEMA_VERSION,
        "generator": {"name": "pytest-sits", "version": __version__}, "created_at": now_iso(),
        "directory": str(out),
        "run": {k2: run.get(k2) for k2 in ("run_id", "mode", "requested_nodes", "nodelist", "partition",
                                           "pytest_args", "slurm_command", "slurm_exit_code", "started_at",
                                           "finished_at", "duration_s")} if run else None,
        "summary": {"result": result, "result_reason": why, "nodes": total, "counts": counts,
                    "pass_rate": round(counts[NODE_PASS] / total, 4), "simulated": simulated,
                    "missing_nodes": missing, "replay": replay},
        "nodes": [{k2: v for k2, v in n.items() if not k2.startswith("_")} for n in nodes],
        "requirements": requirement_rates(nodes), "pass_rate_rule": PASS_RATE_RULE,
        "outliers": outliers(nodes, k, groups), "measurements": measurements(groups),
        "junit": merge_junit(out, nodes),
    }
    del groups
    for n in nodes:
        n.pop("_sum", None)
    errors = validate(_skeleton(fleet))
    if errors:  # our own output: a schema mismatch is a defect, say where
        raise AssertionError(f"fleet report does not match its schema: {errors[:3]}")
    write_json(out / FLEET_JSON, fleet)
    atomic_write(out / FLEET_HTML, render_html(fleet))
    if prometheus is not None:
        from ...report.prometheus import fleet_text

        atomic_write(prometheus, fleet_text(fleet))
        fleet["prometheus"] = str(prometheus)
    return fleet


def _skeleton(fleet: Dict[str, Any], keep: int = 20) -> Dict[str, Any]:
    """The fleet report with its long lists cut to their first entries (and every node that does not pass):
    the structure this merge produced, checked against the schema without walking 100,000 values."""
    def cut(items: List[Any]) -> List[Any]:
        return items[:keep]
    nodes = fleet["nodes"][:keep] + [n for n in fleet["nodes"][keep:] if n["result"] != NODE_PASS]
    return dict(fleet, nodes=nodes, requirements=[dict(r, by_status={s: cut(v) for s, v in r["by_status"].items()})
                                                  for r in fleet["requirements"]],
                outliers=dict(fleet["outliers"], flagged=cut(fleet["outliers"]["flagged"])),
                measurements=[dict(m, nodes=cut(m["nodes"]), values=cut(m["values"]))
                              for m in cut(fleet["measurements"])])


def schema() -> Dict[str, Any]:
    return json.loads((RESOURCES / "fleet.schema.json").read_text(encoding="utf-8"))


def validate(fleet: Dict[str, Any]) -> List[str]:
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema())
    return [f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}" for e in validator.iter_errors(fleet)]


#: Node names listed per requirement and status in the HTML before "and N more".
HTML_NAMES = 24
#: Outlier rows in the HTML (all of them are in the JSON).
HTML_OUTLIERS = 200


def _view(fleet: Dict[str, Any]) -> Dict[str, Any]:
    """What the fleet page shows: failing nodes first, passing nodes folded, long lists cut with a count."""
    order = {r: i for i, r in enumerate(HEADLINE_ORDER)}
    nodes = sorted(fleet["nodes"], key=lambda n: (order[n["result"]], _natural(n["node"])))
    links = {n["node"]: n.get("report_html") or n.get("report") for n in fleet["nodes"]}
    reqs = []
    for r in sorted(fleet["requirements"], key=lambda r: (r["pass_rate"] if r["pass_rate"] is not None else 2,
                                                          r["requirement"])):
        bad = [(s, names) for s, names in r["by_status"].items() if s not in PASSING and s != "SKIP"]
        reqs.append(dict(r, bad=[(s, names[:HTML_NAMES], len(names) - HTML_NAMES) for s, names in bad],
                         counts={s: len(names) for s, names in r["by_status"].items()}))
    return {"attention": [n for n in nodes if n["result"] != NODE_PASS],
            "passing": [n for n in nodes if n["result"] == NODE_PASS], "links": links, "requirements": reqs,
            "outliers": fleet["outliers"]["flagged"][:HTML_OUTLIERS],
            "outliers_more": max(0, len(fleet["outliers"]["flagged"]) - HTML_OUTLIERS)}


def render_html(fleet: Dict[str, Any]) -> str:
    return environment().get_template("fleet.html.jinja2").render(f=fleet, v=_view(fleet))


def print_summary(fleet: Dict[str, Any], out: Path, file: Any = None, limit: int = 40) -> None:
    """The fleet on the terminal: the nodes that need attention (all of them up to ``limit``), then the result."""
    file = file or sys.stdout
    order = {r: i for i, r in enumerate(HEADLINE_ORDER)}
    nodes = sorted(fleet["nodes"], key=lambda n: (order[n["result"]], _natural(n["node"])))
    shown = [n for n in nodes if n["result"] != NODE_PASS] if len(nodes) > limit else nodes
    width = max(len(n["node"]) for n in nodes)
    for n in shown[:limit]:
        print(f"  {n['node']:{width}}  {n['result']:9}  {n['reason']}", file=file)
    if len(shown) > limit:
        print(f"  ... and {len(shown) - limit} more not passing (all in {out / FLEET_JSON})", file=file)
    if len(shown) < len(nodes):
        print(f"  ({len(nodes) - len(shown)} passing nodes not listed)", file=file)
    s = fleet["summary"]
    sim = " (SIMULATED: not a conformance result)" if s["simulated"] else ""
    print(f"fleet: {s['result']}{sim}: {s['result_reason']}", file=file)
    for o in fleet["outliers"]["flagged"][:20]:
        print(f"  outlier: {o['node']} {o['requirement']} {o['subject']}: {o['why']}", file=file)
    if len(fleet["outliers"]["flagged"]) > 20:
        print(f"  ... {len(fleet['outliers']['flagged']) - 20} more outliers in {out / FLEET_JSON}", file=file)
    print(f"fleet report: {out / FLEET_JSON}\nfleet report: {out / FLEET_HTML}", file=file)
    if fleet["junit"].get("path"):
        print(f"fleet junit: {out / FLEET_JUNIT}", file=file)
    else:
        print(f"fleet junit: not merged: {fleet['junit']['absent']}", file=file)
    if fleet.get("prometheus"):
        print(f"fleet prometheus: {fleet['prometheus']}", file=file)
