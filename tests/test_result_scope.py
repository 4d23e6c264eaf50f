"""The run result never claims more than was decided (CONFORMANT only for the whole catalogue)."""

import json

from pytest_sits.report import model as rep
from pytest_sits.catalogue import CATALOGUE


def _rows(state="RUN", statuses=("PASS",), **override):
    rows = []
    for rid in CATALOGUE:
        st = override.get(rid, state)
        rows.append({"requirement": rid, "state": st, "statuses": list(statuses) if st == "RUN" else []})
    return rows


def _verdicts(rows):
    return [{"requirement": r["requirement"], "status": s} for r in rows for s in r["statuses"]]


def test_whole_catalogue_decided_at_full_on_live_is_conformant():
    rows = _rows()
    s = rep.summarise(_verdicts(rows), True, False, rows, "full", "live")
    assert s["result"] == "CONFORMANT" and s["scope"]["decided"] == list(CATALOGUE)


def test_one_requirement_above_level_makes_it_partial():
    first = next(iter(CATALOGUE))
    rows = _rows(**{first: "NOT_AT_LEVEL_STANDARD"})
    s = rep.summarise(_verdicts(rows), True, False, rows, "standard", "live")
    assert s["result"] == "PARTIAL" and "1 above level standard" in s["result_reason"]
    assert s["scope"]["above_level"] == [first]


def test_deselected_and_not_implemented_are_named():
    ids = list(CATALOGUE)
    rows = _rows(**{ids[0]: "DESELECTED", ids[1]: "NOT_IMPLEMENTED"})
    s = rep.summarise(_verdicts(rows), True, False, rows, "full", "live")
    assert s["result"] == "PARTIAL"
    assert "1 deselected (-m/-k)" in s["result_reason"] and "1 not implemented" in s["result_reason"]


def test_snapshot_is_partial_at_best():
    rows = _rows()
    s = rep.summarise(_verdicts(rows), True, False, rows, "full", "snapshot")
    assert s["result"] == "PARTIAL" and "platform snapshot" in s["result_reason"]


def test_fail_and_inconclusive_decide_whatever_the_scope():
    rows = _rows(statuses=("PASS", "FAIL"))
    assert rep.summarise(_verdicts(rows), True, False, rows, "quick", "live")["result"] == "NON_CONFORMANT"
    rows = _rows(statuses=("PASS", "INCONCLUSIVE"))
    assert rep.summarise(_verdicts(rows), True, False, rows, "quick", "live")["result"] == "UNDECIDED"


def test_single_requirement_run_is_partial_end_to_end(pytester, conformance_args):
    res = pytester.runpytest(*conformance_args, "-m", "TOPO-NUMA-BIND")
    res.stdout.fnmatch_lines(["result: PARTIAL (conforms in what was decided: 1 of * requirements (*verdicts*); not decided: *deselected*"])
    report = json.loads((pytester.path / "sits-report" / "sits-report.json").read_text())
    scope = report["summary"]["scope"]
    assert scope["decided"] == ["TOPO-NUMA-BIND"] and scope["deselected"]
    html = (pytester.path / "sits-report" / "sits-report.html").read_text()
    assert "PARTIAL" in html
