"""The fleet report (pytest_sits/commands/fleet/merge.py): `sits fleet merge` folds the nodes' reports into one
JSON, HTML page and JUnit XML; the outlier rule; untrusted node folders."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_sits.cli import main
from pytest_sits.commands.fleet import merge as fleet_merge

from helpers import node_dir, run_suite


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """Real reports: a conforming simulated node and one with a PCIe switch in every accelerator's path."""
    base = tmp_path_factory.mktemp("reports")
    return {name: run_suite(base / name, f"--sits-platform={platform}", junit=True).report_dir
            for name, platform in (("pass", "sim:h100"), ("switch", "sim:h100+switch"))}


def _nodes(values, profile="h100-sxm5"):
    return [{"node": f"n{i}", "profile": profile,
             "_sum": fleet_merge._summarise({"verdicts": [{"requirement": "MEM-BW-EFFICIENCY", "subject": "gpu0",
                                                           "unit": "GB/s", "status": "PASS", "measured": v}]})}
            for i, v in enumerate(values, 1)]


def test_outlier_rule_median_and_mad():
    values = [3000, 3010, 2990, 3005, 2995, 3000, 2400]
    got = fleet_merge.outliers(_nodes(values), k=3.5)
    assert [o["node"] for o in got["flagged"]] == ["n7"]
    o = got["flagged"][0]
    assert o["median"] == 3000 and o["mad"] == 5
    assert o["low"] == pytest.approx(3000 - 3.5 * 1.4826 * 5) and o["high"] == pytest.approx(3000 + 3.5 * 1.4826 * 5)
    assert "1.4826 x MAD" in got["rule"] and got["k"] == 3.5 and got["groups_judged"] == 1
    # a wide k accepts the same value; a node within the spread is never flagged
    assert fleet_merge.outliers(_nodes(values), k=200)["flagged"] == []
    assert fleet_merge.outliers(_nodes(values[:6] + [3012]))["flagged"] == []


def test_outlier_rule_zero_mad_small_groups_and_profiles():
    # MAD = 0: every value that differs from the median stands out
    assert [o["node"] for o in fleet_merge.outliers(_nodes([0, 0, 0, 2]))["flagged"]] == ["n4"]
    # fewer than 3 nodes: not judged
    small = fleet_merge.outliers(_nodes([1, 100]))
    assert small["flagged"] == [] and small["groups_too_small"] == 1 and small["groups_judged"] == 0
    # nodes of different profiles are never compared
    mixed = _nodes([1, 1]) + [dict(n, node=f"m{i}", profile="mi300x") for i, n in enumerate(_nodes([50, 50]))]
    assert fleet_merge.outliers(mixed)["flagged"] == []
    # booleans and strings are not measured numbers
    nodes = _nodes([True, True, False])
    assert fleet_merge.outliers(nodes)["groups_judged"] == 0


@pytest.mark.slow
def test_merge_pass_fail_and_no_result(reports, tmp_path, capsys):
    out = tmp_path / "fleet"
    node_dir(out, "n1", reports["pass"])
    node_dir(out, "n2", reports["switch"])
    node_dir(out, "n3")                       # started, then nothing: died mid-run
    (out / "fleet-run.json").write_text(json.dumps({"run_id": "x", "mode": "srun", "requested_nodes": 4,
                                                    "expected_nodes": ["n1", "n2", "n3", "n4"]}))
    assert main(["fleet", "merge", str(out)]) == 10  # a node FAILs: NON_CONFORMANT wins over the ERROR of n3
    text = capsys.readouterr().out
    fl = json.loads((out / "fleet-report.json").read_text())
    assert fleet_merge.validate(fl) == []
    by = {n["node"]: n for n in fl["nodes"]}
    assert by["n1"]["result"] == "PASS" and by["n1"]["report_result"] == "SIMULATED"
    assert by["n2"]["result"] == "FAIL" and by["n2"]["counts"]["FAIL"] > 0
    assert by["n3"]["result"] == "ERROR" and by["n3"]["reason"].startswith("no result: started at")
    assert by["n4"]["result"] == "ERROR" and "never started" in by["n4"]["reason"]
    assert fl["summary"] == dict(fl["summary"], result="FAIL", nodes=4, pass_rate=0.25, simulated=True,
                                 counts={"PASS": 1, "FAIL": 1, "UNDECIDED": 0, "ERROR": 2})
    direct = next(r for r in fl["requirements"] if r["requirement"] == "TOPO-PCIE-DIRECT")
    assert direct["by_status"] == {"PASS": ["n1"], "FAIL": ["n2"], "ERROR": ["n3", "n4"]}
    assert direct["pass_rate"] == 0.25 and "no report counts as ERROR" in fl["pass_rate_rule"]
    assert "n3  ERROR      no result" in text and "SIMULATED" in text
    html = (out / "fleet-report.html").read_text()
    assert "SIMULATED" in html and "no result" in html and "1.4826" in html


@pytest.mark.slow
def test_merged_junit_has_every_node(reports, tmp_path):
    junitparser = pytest.importorskip("junitparser", reason="pip install 'pytest-sits[fleet]'")
    out = tmp_path / "fleet"
    node_dir(out, "n1", reports["pass"])
    node_dir(out, "n2", reports["switch"])
    node_dir(out, "n3")
    fl = fleet_merge.merge(out)
    xml = junitparser.JUnitXml.fromfile(str(out / "fleet-junit.xml"))
    suites = {s.name: s for s in xml}
    assert set(suites) == {"n1", "n2", "n3"}
    one = junitparser.JUnitXml.fromfile(str(reports["switch"] / "junit.xml"))
    assert suites["n2"].failures == sum(s.failures for s in one) > 0
    assert suites["n1"].failures == 0 and suites["n1"].tests == sum(s.tests for s in one)
    assert suites["n3"].errors == 1
    case = next(iter(suites["n3"]))
    assert case.result[0].type == "no result"
    assert all(c.classname.startswith("n2.") for c in suites["n2"])
    assert fl["junit"]["errors"] == 1 and fl["junit"]["failures"] == suites["n2"].failures


@pytest.mark.slow
def test_merge_needs_no_junit_library(reports, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "junitparser", None)
    out = tmp_path / "fleet"
    node_dir(out, "n1", reports["pass"])
    fl = fleet_merge.merge(out)
    assert fl["junit"]["path"] == "fleet-junit.xml" and fl["junit"]["tests"] > 0
    from xml.etree import ElementTree

    root = ElementTree.parse(out / "fleet-junit.xml").getroot()
    assert root.tag == "testsuites" and int(root.get("tests")) == fl["junit"]["tests"]


@pytest.mark.slow
def test_merge_never_writes_through_a_planted_link(reports, tmp_path):
    """Every file the merge writes replaces its path whole: a link planted at fleet-junit.xml (or the JSON, the
    HTML, the Prometheus file) is replaced, and its target is untouched."""
    out = tmp_path / "fleet"
    node_dir(out, "n1", reports["pass"])
    victims = {}
    for name in ("fleet-junit.xml", "fleet-report.json", "fleet-report.html", "fleet.prom"):
        victim = tmp_path / f"victim-{name}"
        victim.write_text("precious")
        os.symlink(victim, out / name)
        victims[name] = victim
    pytest.importorskip("prometheus_client", reason="pip install 'pytest-sits[prometheus]'")
    fleet_merge.merge(out, prometheus=out / "fleet.prom")
    for name, victim in victims.items():
        assert victim.read_text() == "precious", name
        assert not (out / name).is_symlink() and (out / name).stat().st_size > 0, name
    assert "<testsuites" in (out / "fleet-junit.xml").read_text()


def test_a_report_copied_into_another_nodes_folder_is_no_result_of_that_node(reports, tmp_path):
    """A fleet merge trusts no folder: a byte-identical report on two nodes, a report written on another host
    than the node runner ran on, and a node.json of another node are each an ERROR naming why (never a PASS)."""
    out = tmp_path / "fleet"
    node_dir(out, "n1", reports["pass"])
    node_dir(out, "n2", reports["pass"])
    shutil.copy(out / "n1" / "sits-report.json", out / "n2" / "sits-report.json")  # n1's report, byte for byte
    d3 = node_dir(out, "n3", reports["pass"])
    marker = json.loads((d3 / "node.json").read_text())
    (d3 / "node.json").write_text(json.dumps(dict(marker, hostname="n3.cluster")))  # ran on n3, report says n3
    d4 = node_dir(out, "n4", reports["pass"])
    (d4 / "node.json").write_text(json.dumps(dict(marker, node="n9", hostname="n4")))
    fleet = fleet_merge.merge(out)
    by = {n["node"]: n for n in fleet["nodes"]}
    assert by["n1"]["result"] == "PASS", by["n1"]
    assert by["n2"]["result"] == "ERROR" and "byte-identical to node n1's" in by["n2"]["reason"]
    assert by["n3"]["result"] == "ERROR" and "written on host 'n3'" in by["n3"]["reason"] \
        and "ran on 'n3.cluster'" in by["n3"]["reason"]
    assert by["n4"]["result"] == "ERROR" and "is for node 'n9', not 'n4'" in by["n4"]["reason"]
    assert fleet["summary"]["result"] != "PASS" and fleet["summary"]["counts"]["ERROR"] == 3
    # the copies' values do not enter the fleet's statistics
    assert all(set(m["nodes"]) <= {"n1"} for m in fleet["measurements"])


@pytest.mark.parametrize("name", ["fleet-report.json", "fleet-report.html", "fleet-junit.xml"])
def test_a_folder_in_the_way_of_the_fleet_report_is_a_one_line_error(tmp_path, capsys, name):
    out = tmp_path / "fleet"
    node_dir(out, "n1")
    (out / name / "inside").mkdir(parents=True)
    assert main(["fleet", "merge", str(out)]) == 4
    err = capsys.readouterr().err.strip()
    assert "a folder is in the way of the fleet report" in err and "Traceback" not in err, err
    assert (out / name / "inside").is_dir()


@pytest.mark.slow
def test_outliers_in_a_merged_fleet(reports, tmp_path):
    out = tmp_path / "fleet"
    for n in ("n1", "n2", "n3"):
        node_dir(out, n, reports["pass"])
    d = node_dir(out, "n4", reports["pass"])
    rep = json.loads((d / "sits-report.json").read_text())
    v = next(v for v in rep["verdicts"] if v["requirement"] == "INV-DEVICES")
    v["measured"] = v["measured"] - 8
    (d / "sits-report.json").write_text(json.dumps(rep))
    fl = fleet_merge.merge(out, k=3.5, replay="none")  # an edited value: replayed, n4 would be an ERROR
    flagged = [(o["node"], o["requirement"]) for o in fl["outliers"]["flagged"]]
    assert flagged == [("n4", "INV-DEVICES")]
    assert fl["outliers"]["k"] == 3.5 and "MAD" in fl["outliers"]["rule"]


@pytest.mark.slow
def test_untrusted_node_reports(reports, tmp_path):
    out = tmp_path / "fleet"
    node_dir(out, "n1", reports["pass"])
    (node_dir(out, "n2") / "sits-report.json").write_text("{not json")
    d = node_dir(out, "n3")
    (d / "sits-report.json").write_text(json.dumps({"schema": "pytest-sits/report"}))
    d = node_dir(out, "n4")
    os.symlink(reports["pass"] / "sits-report.json", d / "sits-report.json")
    (out / "evil").mkdir()
    os.symlink("/etc", out / "n5")             # a linked node folder is not followed
    fl = fleet_merge.merge(out)
    by = {n["node"]: n for n in fl["nodes"]}
    assert set(by) == {"n1", "n2", "n3", "n4"}
    assert by["n2"]["result"] == "ERROR" and "not valid JSON" in by["n2"]["reason"]
    assert by["n3"]["result"] == "ERROR" and "is not a valid pytest-sits report" in by["n3"]["reason"]
    assert by["n4"]["result"] == "ERROR" and "symbolic link" in by["n4"]["reason"]
    assert all(by[n]["reason"].startswith("no result") for n in ("n2", "n3", "n4"))


def _fleet_of(reports, out: Path, kinds: dict) -> Path:
    for node, kind in kinds.items():
        if kind is None:
            node_dir(out, node)
        else:
            node_dir(out, node, reports[kind])
    return out


@pytest.mark.slow
def test_headline_is_the_worst_node_result(reports, tmp_path):
    undecided = tmp_path / "u"
    _fleet_of(reports, undecided, {"n1": "pass", "n2": "pass"})
    rep = json.loads((undecided / "n2" / "sits-report.json").read_text())
    v = next(v for v in rep["verdicts"] if v["status"] == "PASS")
    v["status"] = "INCONCLUSIVE"
    (undecided / "n2" / "sits-report.json").write_text(json.dumps(rep))
    fl = fleet_merge.merge(undecided, replay="none")  # an edited status: replayed, n2 would be an ERROR
    assert fl["summary"]["result"] == "UNDECIDED" and fl["summary"]["counts"]["UNDECIDED"] == 1
    assert 'class="badge UNDECIDED"' in (undecided / "fleet-report.html").read_text()   # never a red FAIL
    err = _fleet_of(reports, tmp_path / "e", {"n1": "pass", "n2": None})
    assert fleet_merge.merge(err)["summary"]["result"] == "ERROR"
    fail = _fleet_of(reports, tmp_path / "f", {"n1": "switch", "n2": None, "n3": "pass"})
    assert fleet_merge.merge(fail)["summary"]["result"] == "FAIL"
    ok = _fleet_of(reports, tmp_path / "p", {"n1": "pass", "n2": "pass"})
    assert fleet_merge.merge(ok)["summary"]["result"] == "PASS"


@pytest.mark.slow
def test_array_elements_that_never_started_are_counted(reports, tmp_path):
    out = _fleet_of(reports, tmp_path / "a", {"x1": "pass", "x2": "pass"})
    (out / "fleet-run.json").write_text(json.dumps({"run_id": "r", "mode": "array", "requested_nodes": 4}))
    fl = fleet_merge.merge(out)
    s = fl["summary"]
    assert s["result"] == "ERROR" and s["missing_nodes"] == 2 and s["nodes"] == 4 and s["counts"]["ERROR"] == 2
    assert s["counts"]["PASS"] == 2 and "2 never started" in s["result_reason"]
    assert {n["node"] for n in fl["nodes"]} == {"x1", "x2"}          # the results that exist are kept


@pytest.mark.slow
def test_a_report_missing_what_the_merge_reads_is_no_result(reports, tmp_path):
    out = _fleet_of(reports, tmp_path / "v", {"n1": "pass", "n2": "pass"})
    rep = json.loads((out / "n2" / "sits-report.json").read_text())
    rep["verdicts"][0]["status"] = "GREAT"
    (out / "n2" / "sits-report.json").write_text(json.dumps(rep))
    by = {n["node"]: n for n in fleet_merge.merge(out)["nodes"]}
    assert by["n2"]["result"] == "ERROR" and "'GREAT' is not a status" in by["n2"]["reason"]
    strict = {n["node"]: n for n in fleet_merge.merge(out, strict=True)["nodes"]}
    assert strict["n2"]["result"] == "ERROR" and "is not a valid pytest-sits report" in strict["n2"]["reason"]


@pytest.mark.slow
def test_merge_in_worker_processes_equals_in_process(reports, tmp_path, monkeypatch):
    kinds = {f"n{i:03d}": ("switch" if i % 7 == 0 else "pass") for i in range(1, 71)}
    kinds["n050"] = None
    out = _fleet_of(reports, tmp_path / "w", kinds)
    one = fleet_merge.merge(out, jobs=1)
    two = fleet_merge.merge(out, jobs=2)
    for k in ("summary", "nodes", "requirements", "outliers", "measurements", "junit"):
        assert one[k] == two[k], k


@pytest.mark.slow
def test_fleet_page_failing_first_linked_and_bounded(reports, tmp_path):
    kinds = {f"gpu-node-{i:04d}.cluster.example": ("switch" if i in (5, 40) else "pass") for i in range(1, 61)}
    kinds["gpu-node-0007.cluster.example"] = None
    out = _fleet_of(reports, tmp_path / "h", kinds)
    fleet_merge.merge(out)
    html = (out / "fleet-report.html").read_text()
    attention = html.split('id="attention"')[1].split('id="requirements"')[0]
    assert attention.index("gpu-node-0005") < attention.index("gpu-node-0040") < attention.index("gpu-node-0007")
    assert 'href="gpu-node-0005.cluster.example/sits-report.html"' in attention
    assert 'class="st FAIL"' in attention and "gpu-node-0012" not in attention   # passing nodes are folded
    assert html.count('href="gpu-node-0012.cluster.example/sits-report.html"') == 1
    req = html.split('id="requirements"')[1].split('id="outliers"')[0]
    assert req.index("TOPO-PCIE-DIRECT") < req.index("INV-DEVICES")           # lowest pass rate first
    assert len(html) < 400_000


def _browser():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    return None


@pytest.mark.slow
def test_fleet_page_has_no_horizontal_overflow_at_420px(reports, tmp_path):
    browser = _browser()
    if browser is None:
        pytest.skip("no headless Chromium (apt-get install chromium): the 420 px layout check needs a browser")
    kinds = {f"gpu-node-{i:04d}.a-very-long-cluster-domain.example": ("switch" if i % 9 == 0 else "pass")
             for i in range(1, 31)}
    kinds["gpu-node-0003.a-very-long-cluster-domain.example"] = None
    out = _fleet_of(reports, tmp_path / "b", kinds)
    fleet_merge.merge(out)
    page = (out / "fleet-report.html").read_text()
    probe = page.replace("</body>", "<script>document.title = 'W=' + document.documentElement.scrollWidth + "
                                     "' V=' + window.innerWidth;</script></body>")
    (out / "probe.html").write_text(probe)
    for width in (420, 1400):
        proc = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                               f"--window-size={width},900", "--dump-dom", (out / "probe.html").as_uri()],
                              capture_output=True, text=True, timeout=120)
        m = re.search(r"<title>W=(\d+) V=(\d+)</title>", proc.stdout)
        assert m, proc.stderr[-2000:]
        scroll, view = int(m.group(1)), int(m.group(2))
        assert scroll <= view, f"{width} px: the page is {scroll} px wide in a {view} px window"


@pytest.mark.slow
def test_a_node_report_that_does_not_replay_is_that_nodes_error(reports, tmp_path, capsys):
    """A node's FAIL edited into a PASS (summary and counts made to match): by default the merge replays every
    node report, so the node is an ERROR naming the verdict; --replay=none takes it as written and says so."""
    out = tmp_path / "fleet"
    node_dir(out, "n1", reports["pass"])
    d = node_dir(out, "n2", reports["switch"])
    rep = json.loads((d / "sits-report.json").read_text())
    for v in rep["verdicts"]:
        if v["status"] == "FAIL":
            v["status"] = "PASS"
    from pytest_sits.report.model import summarise

    s = summarise(rep["verdicts"], rep["run"]["completed"], rep["platform"]["simulated"], rep["coverage"],
                  rep["run"]["level"], rep["platform"]["kind"])
    rep["summary"].update(result=s["result"], result_reason=s["result_reason"], counts=s["counts"])
    (d / "sits-report.json").write_text(json.dumps(rep))
    assert main(["fleet", "merge", str(out)]) == 13
    fl = json.loads((out / "fleet-report.json").read_text())
    by = {n["node"]: n for n in fl["nodes"]}
    assert by["n2"]["result"] == "ERROR" and "does not replay" in by["n2"]["reason"], by["n2"]
    assert "TOPO-PCIE-DIRECT" in by["n2"]["reason"] and "'PASS' in the report" in by["n2"]["reason"]
    assert by["n1"]["result"] == "PASS" and by["n1"]["replayed"] > 0
    assert fl["summary"]["replay"] == "full"
    capsys.readouterr()
    assert main(["fleet", "merge", str(out), "--replay=none"]) == 0
    fl = json.loads((out / "fleet-report.json").read_text())
    assert {n["node"]: n["result"] for n in fl["nodes"]} == {"n1": "PASS", "n2": "PASS"}
    assert fl["summary"]["replay"] == "none" and "NOT replayed" in fl["summary"]["result_reason"]
    assert "NOT replayed" in capsys.readouterr().out
