"""The merge: ``sits fleet merge OUT`` folds the nodes' reports into one fleet report.

Writes ``fleet-report.json`` (schema ``resources/fleet.schema.json``),
``fleet-report.html`` and ``fleet-junit.xml``.  Every file read from the
shared folder is untrusted: read confined below OUT (no link followed), size
limited, reports through the one report reader; every file written goes
through the one safe writer.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from ... import __version__
from ...files import atomic_write, load_json
from ...files import read_bytes as read_confined
from ...report.model import RESOURCES
from ...report.render import environment
from ...report.store import read_report
from ...verdict import STATUSES, worst
from .common import (DEFAULT_K, FLEET_HTML, FLEET_JSON, FLEET_JUNIT, FLEET_SCHEMA_VERSION, JUNIT_INSTALL,
                     JUNIT_NAME, MAD_SCALE, MAX_JUNIT_BYTES, MAX_SMALL_JSON, MIN_GROUP, NODE_ERROR, NODE_EXIT_FILE,
                     NODE_FAIL, NODE_FILE, NODE_LOG, NODE_NAME, NODE_PASS, NODE_RESULTS, NODE_UNDECIDED,
                     OUTLIER_RULE, PASS_RATE_RULE, PASSING, REPORT_NAME, RUN_FILE, FleetError, expand_hostlist, now_iso,
                     write_json)


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


def _load_node(out: Path, node: str) -> Dict[str, Any]:
    base = out / node
    entry: Dict[str, Any] = {"node": node, "result": NODE_ERROR, "reason": "", "report": None, "junit": None,
                             "report_result": None, "simulated": None, "profile": None, "level": None,
                             "hostname": None, "platform": None, "log": None, "started_at": None, "exit_code": None,
                             "counts": {}}
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
    except (OSError, ValueError):
        pass
    if (base / JUNIT_NAME).is_file() and not (base / JUNIT_NAME).is_symlink():
        entry["junit"] = f"{node}/{JUNIT_NAME}"
    if (base / NODE_LOG).is_file() and not (base / NODE_LOG).is_symlink():
        entry["log"] = f"{node}/{NODE_LOG}"
    try:
        report = read_report(f"{node}/{REPORT_NAME}", root=out)
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
    except (OSError, ValueError) as exc:  # ReportInputError names the file and what is wrong with it
        entry["reason"] = f"no result: {exc}"
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
            marker = read_json(out, f"{n}/{NODE_FILE}", MAX_SMALL_JSON)
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
                xml = JUnitXml.fromstring(read_confined(out, f"{node}/{JUNIT_NAME}", MAX_JUNIT_BYTES))
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
    atomic_write(out / FLEET_JUNIT, merged.tostring())
    return {"path": FLEET_JUNIT, "tests": merged.tests, "failures": merged.failures, "errors": merged.errors,
            "skipped": merged.skipped, "unreadable": unreadable}


def merge(out: Path, k: float = DEFAULT_K) -> Dict[str, Any]:
    """Read OUT/<node>/ of a fleet run, write the fleet report (JSON, HTML, JUnit XML) into OUT, return it."""
    out = Path(out)
    if not out.is_dir():
        raise FleetError(f"{out}: not a directory; fix: give the --out directory of `sits fleet run`")
    if not (k > 0):
        raise FleetError(f"outlier k = {k}: must be positive")
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
        "generator": {"name": "pytest-sits", "version": __version__}, "created_at": now_iso(),
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
    write_json(out / FLEET_JSON, fleet)
    atomic_write(out / FLEET_HTML, render_html(fleet))
    return fleet


def schema() -> Dict[str, Any]:
    return json.loads((RESOURCES / "fleet.schema.json").read_text(encoding="utf-8"))


def validate(fleet: Dict[str, Any]) -> List[str]:
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema())
    return [f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}" for e in validator.iter_errors(fleet)]


def render_html(fleet: Dict[str, Any]) -> str:
    return environment().get_template("fleet.html.jinja2").render(f=fleet)


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
