"""`sits compare`: the decision matrix across platforms (A §4.1)."""

import json
import os

import pytest

from pytest_sits import cli
from pytest_sits.commands.base import USAGE_ERROR
from pytest_sits.commands import compare as decision
from pytest_sits.files import UntrustedInputError
from pytest_sits.report.model import validate
from pytest_sits.report.store import read_report

from helpers import run_suite
from test_analytics import make_sweep


def _v(req, measured=None, unit=None, status="PASS", evidence=None, subject="gpu0"):
    return {"requirement": req, "status": status, "reason": "r", "measured": measured, "threshold": None,
            "unit": unit, "subject": subject, "remediation": "fix" if status == "FAIL" else None,
            "evidence": evidence or {}, "nodeid": "t", "simulated": False}


def platform_report(name, *, mem_bw, pcie, mesh, cap_w, capacity=80.0, level="full", version="0.1.0",
                    capacity_status="PASS", plp=True):
    verdicts = [_v("MEM-BW-EFFICIENCY", 0.9, "of datasheet", evidence={"gbps_median": mem_bw}),
                _v("MEM-CAPACITY", capacity, "GB", status=capacity_status),
                _v("TOPO-PCIE-BW", 0.85, "of link",
                   evidence={"bandwidth": {"h2d": {"gbps_median": pcie}, "d2h": {"gbps_median": pcie * 1.02}}}),
                _v("LINK-NVLINK-MESH", mesh, None, subject="accelerators"),
                _v("SVC-COLDSTART", None, None, status="SKIP")]
    if plp:
        sweep = make_sweep(cap_w)
        verdicts += [_v("PLP-LATENCY", 0.1, "s", evidence={"sweep": sweep}),
                     _v("PLP-POWER", cap_w, "W", evidence={"sweep": sweep})]
    return {
        "schema": "pytest-sits/report", "schema_version": "1.0", "generator": {"name": "pytest-sits", "version": version},
        "run": {"started_at": "a", "finished_at": "b", "duration_s": 1, "completed": True, "exit_status": 0,
                "level": level},
        "environment": {"hostname": "h", "python": "3.11", "packages": {}},
        "platform": {"kind": "live", "label": f"live: {name}", "simulated": False},
        "profile": {"name": name, "path": "p", "chain": [], "how": "option",
                    "data": {"thresholds": {"SVC-SLA": {"p99_ms": 120, "min_rps": 85, "max_error_rate": 0.003}}}},
        "inventory": {"cpu": {}, "memory": {}, "numa": [], "pci": [], "accelerators": [], "platform": {}},
        "verdicts": verdicts, "coverage": [],
        "summary": {"counts": {}, "result": "NON_CONFORMANT" if capacity_status == "FAIL" else "CONFORMANT",
                    "result_reason": "x"},
    }


# fast: short latency and strong links, little memory bandwidth; wide: the reverse.
FAST = dict(mem_bw=1500.0, pcie=50.0, mesh="28/28 pairs", cap_w=700)
WIDE = dict(mem_bw=3000.0, pcie=25.0, mesh="0/28 pairs", cap_w=350)


def write(tmp_path, name, report):
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(report))
    return str(path)


def test_synthetic_reports_are_valid():
    assert validate(platform_report("fast", **FAST)) == []


def test_each_class_ranks_by_its_own_weights():
    reports = [platform_report("fast", **FAST), platform_report("wide", **WIDE)]
    m = decision.compare(["fast.json", "wide.json"], reports)
    ll, batch = m["rankings"]["low-latency"], m["rankings"]["batch"]
    assert ll["order"] == [0, 1] and batch["order"] == [1, 0]
    assert "from network" in ll["decided_by"][0]
    assert "from memory" in batch["decided_by"][0]
    assert ll["dimensions_left_out"] == ["nvme"] and "renormalised" in ll["note"]  # nothing measured cold start
    assert sum(ll["used_weights"].values()) == pytest.approx(1.0)
    scores = {r["key"]: r for r in m["metrics"]}
    assert scores["mem_bw_gbps"]["scores"] == [0.5, 1.0]
    assert scores["p99_latency_ms"]["compared"] and scores["p99_latency_ms"]["scores"][0] == 1.0
    text = decision.render_text(m)
    assert "ranking for low-latency" in text and "ranking for batch" in text


def test_a_failed_requirement_ranks_below_any_platform_without_one():
    best_but_failing = dict(FAST, mem_bw=9000.0)
    reports = [platform_report("a", **best_but_failing, capacity=48.0, capacity_status="FAIL"),
               platform_report("b", **WIDE)]
    m = decision.compare(["a.json", "b.json"], reports, ["batch"])
    assert m["rankings"]["batch"]["order"] == [1, 0]
    assert "fewer failed requirements" in m["rankings"]["batch"]["decided_by"][0]
    assert m["fails"][0] == ["MEM-CAPACITY"]


def test_reports_of_different_levels_are_compared_only_on_what_both_decided():
    reports = [platform_report("fast", **FAST), platform_report("wide", **WIDE, level="standard", plp=False,
                                                                version="0.2.0")]
    m = decision.compare(["fast.json", "wide.json"], reports)
    assert "level differs (full, standard)" in m["basis_note"] and "suite version differs" in m["basis_note"]
    rows = {r["requirement"]: r for r in m["requirements"]}
    assert not rows["PLP-LATENCY"]["compared"] and "wide (live): not run" in rows["PLP-LATENCY"]["why_not"]
    assert any(x.startswith("PLP-LATENCY") for x in m["left_out"])
    metrics = {r["key"]: r for r in m["metrics"]}
    assert not metrics["p99_latency_ms"]["compared"] and metrics["p99_latency_ms"]["scores"] == [None, None]
    assert "cpu" in m["rankings"]["low-latency"]["dimensions_left_out"]
    md = decision.render_markdown(m)
    assert "Left out of the comparison" in md and "PLP-LATENCY" in md


def test_cli_writes_html_and_markdown(tmp_path, capsys):
    a = write(tmp_path, "fast", platform_report("fast", **FAST))
    b = write(tmp_path, "wide", platform_report("wide", **WIDE))
    rc = cli.main(["compare", a, b, "--class", "batch", "--html", str(tmp_path / "m.html"),
                   "--markdown", str(tmp_path / "m.md")])
    out = capsys.readouterr().out
    assert rc == 0 and "ranking for batch" in out and "ranking for low-latency" not in out
    assert "<table>" in (tmp_path / "m.html").read_text() and "| rank: batch |" in (tmp_path / "m.md").read_text()


@pytest.mark.parametrize("content,expect", [
    ('{"schema": ', "is not valid JSON (line 1"),
    ("[1, 2]", "not a pytest-sits report"),
    ('{"schema": "pytest-sits/report"}', "is not a valid pytest-sits report"),
    (b"\xff\xfe", "is not UTF-8"),
])
def test_cli_bad_report_is_a_usage_error_naming_file_and_fix(tmp_path, capsys, content, expect):
    bad = tmp_path / "bad.json"
    bad.write_bytes(content if isinstance(content, bytes) else content.encode())
    good = write(tmp_path, "fast", platform_report("fast", **FAST))
    assert cli.main(["compare", str(bad), good]) == USAGE_ERROR
    err = capsys.readouterr().err
    assert str(bad) in err and expect in err and "fix:" in err and "Traceback" not in err


def test_untrusted_files_links_size_and_count(tmp_path, capsys):
    good = write(tmp_path, "fast", platform_report("fast", **FAST))
    link = tmp_path / "link.json"
    os.symlink(good, link)
    with pytest.raises(UntrustedInputError, match="symbolic link"):
        read_report(str(link))
    with pytest.raises(UntrustedInputError, match="over the 100-byte limit"):
        read_report(good, limit=100)
    with pytest.raises(UntrustedInputError, match="a folder, not a file"):
        read_report(str(tmp_path))
    assert cli.main(["compare", good]) == USAGE_ERROR
    assert "two reports or more" in capsys.readouterr().err


# ------------------------------------------------------------- the simulated platforms, end to end


#: The requirements whose figures the matrix weighs (the rest of a full run adds rows, not scores).
COMPARED = ("MEM-BW-EFFICIENCY", "MEM-CAPACITY", "TOPO-PCIE-BW", "LINK-NVLINK-MESH", "PLP-LATENCY", "PLP-POWER")


@pytest.fixture(scope="module")
def sim_reports(tmp_path_factory):
    out = {}
    for name in ("h100", "a100", "l40s"):
        d = tmp_path_factory.mktemp(f"sim-{name}")
        run = run_suite(d, f"--sits-platform=sim:{name}", "--sits-level=full", "-m", " or ".join(COMPARED), cwd=d,
                        timeout=900)
        out[name] = str(run.report_dir / "sits-report.json")
    return out


@pytest.mark.slow
def test_compare_sim_h100_a100_l40s_ranks_as_documented(sim_reports, capsys):
    """README: on the simulated platforms H100 > A100 > L40S in both classes; L40S holds its own workload
    (70B in AWQ 4-bit) and ranks last on memory per card; H100 leads A100 on network for low-latency (PCIe Gen5
    against Gen4) and on memory for batch (3.35 against 1.94 TB/s datasheet, 90 % of it simulated)."""
    files = [sim_reports[n] for n in ("h100", "a100", "l40s")]
    m = decision.compare(files, [read_report(f) for f in files])
    for cls in ("low-latency", "batch"):
        assert m["rankings"][cls]["order"] == [0, 1, 2], (cls, m["rankings"][cls])
        assert "from memory" in m["rankings"][cls]["decided_by"][1], m["rankings"][cls]["decided_by"]
    assert m["fails"] == [[], [], []]
    assert "from network" in m["rankings"]["low-latency"]["decided_by"][0]
    assert "from memory" in m["rankings"]["batch"]["decided_by"][0]
    assert all(p["simulated"] for p in m["platforms"])
    assert cli.main(["compare", *files]) == 0
    out = capsys.readouterr().out
    assert "SIMULATED reports among the inputs" in out and "1. h100-sxm5 (sim)" in out


def test_two_reports_of_one_profile_get_distinct_labels_and_the_html_a_chart(tmp_path, capsys):
    (tmp_path / "rack1").mkdir()
    (tmp_path / "rack2").mkdir()
    a = tmp_path / "rack1" / "sits-report.json"
    b = tmp_path / "rack2" / "sits-report.json"
    a.write_text(json.dumps(platform_report("h100", **FAST)))
    b.write_text(json.dumps(platform_report("h100", **WIDE)))
    html = tmp_path / "m.html"
    assert cli.main(["compare", str(a), str(b), f"--html={html}"]) == 0
    out = capsys.readouterr().out
    header = out.splitlines()[1]
    assert "rack1: h100 (live)" in header and "rack2: h100 (live)" in header, header
    page = html.read_text()
    assert page.count("<svg") >= 1 and "weighted score per platform" in page
    assert page.count("<rect") == 4  # one bar per platform and class
    m = decision.compare([str(a), str(a)], [read_report(a), read_report(a)])  # the same file twice: numbered
    assert [p["name"] for p in m["platforms"]] == ["#1 rack1: h100 (live)", "#2 rack1: h100 (live)"]
