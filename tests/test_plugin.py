"""The plugin end to end, through pytester."""

import json

import pytest

from pytest_sits import files
from pytest_sits.report import model as rep

SITS_TESTS = """
import pytest
from pytest_sits.verdict import Verdict

@pytest.mark.sits_requirement("{rid}")
@pytest.mark.parametrize("i", range({n}))
def test_req(i, sits_record):
    sits_record(Verdict("{rid}", "{status}", "case %d" % i, measured=i, threshold=0, unit="x",
                        remediation="fix it" if "{status}" == "FAIL" else None))
"""


def test_default_run_picks_host_profile_and_writes_reports(pytester, conformance_args, report_of):
    result = pytester.runpytest(*conformance_args)
    result.stdout.fnmatch_lines([
        "sits: profile host (auto: no accelerator found) from *host.yaml",
        "sits: platform live: *",
        "sits: level quick (default); report */sits-report",
        "*SITS2026 conformance summary*",
        "INV-DEVICES *1 PASS*0 devices*",
        "MEM-CAPACITY *1 SKIP: the profile expects no accelerator*",
        "sits report: */sits-report/sits-report.json",
        "sits report: */sits-report/sits-report.html",
        "=* 3 passed*",
        "result: PARTIAL (conforms in what was decided: * not decided: * above level quick*",
    ])
    assert result.outlines[-1].startswith("result: PARTIAL")  # the result is the last line
    assert result.ret == 0
    report = report_of(pytester.path)
    assert rep.validate(report) == []
    assert report["run"]["completed"] is True and report["profile"]["how"] == "auto"
    assert {"INV-DEVICES", "MEM-CAPACITY", "DEP-DRIVER", "TOPO-NUMA-BIND"} <= {
        v["requirement"] for v in report["verdicts"]}
    html = (pytester.path / "sits-report" / "sits-report.html").read_text()
    assert "SITS2026 conformance report" in html and "http://" not in html.replace("http://www.w3.org", "")
    assert not list((pytester.path / "sits-report").glob(".*tmp"))


def test_h100_profile_on_cpu_host_skips_with_reason(pytester, conformance_args, report_of):
    result = pytester.runpytest(*conformance_args, "--sits-profile=h100.yaml", "-rs")
    result.stdout.fnmatch_lines([
        "sits: profile h100-sxm5 (option: --sits-profile=h100.yaml) from *h100-sxm5.yaml",
        "*MEM-CAPACITY SKIP: * profile expects 8 × H100 SXM5 (10de:2330); found no NVIDIA device*",
        "result: NON_CONFORMANT*",
    ])
    assert result.ret == 10  # NON_CONFORMANT
    by_req = {v["requirement"]: v for v in report_of(pytester.path)["verdicts"]}
    assert by_req["INV-DEVICES"]["status"] == "FAIL"
    assert by_req["MEM-CAPACITY"]["status"] == "SKIP"


def test_profile_from_env_and_ini(pytester, conformance_args, monkeypatch):
    monkeypatch.setenv("SITS_PROFILE", "l40s")
    result = pytester.runpytest(*conformance_args, "--sits-report-dir=none")
    result.stdout.fnmatch_lines(["sits: profile l40s (env: $SITS_PROFILE=l40s) *", "*report not written*"])
    assert not (pytester.path / "sits-report").exists()
    monkeypatch.delenv("SITS_PROFILE")
    pytester.makeini("[pytest]\nsits_profile = mi300x\n")
    result = pytester.runpytest(*conformance_args)
    result.stdout.fnmatch_lines(["sits: profile mi300x (ini: sits_profile=mi300x) *"])


def test_sim_faults_make_inventory_requirements_fail(pytester, conformance_args, report_of):
    result = pytester.runpytest(*conformance_args, "--sits-platform=sim:h100+small-memory")
    result.stdout.fnmatch_lines(["sits: SIMULATED platform*", "*INV-DEVICES FAIL ?SIMULATED?:*",
                                 "*MEM-CAPACITY FAIL ?SIMULATED?:*", "result: SIMULATED*"])
    report = report_of(pytester.path)
    assert rep.validate(report) == []
    assert report["summary"]["result"] == "SIMULATED"
    assert all(v["simulated"] for v in report["verdicts"])
    statuses = {v["requirement"]: v["status"] for v in report["verdicts"]}
    assert statuses["INV-DEVICES"] == "FAIL" and statuses["MEM-CAPACITY"] == "FAIL"
    assert statuses["DEP-DRIVER"] == "PASS" and statuses["TOPO-PCIE-DIRECT"] == "PASS"
    html = (pytester.path / "sits-report" / "sits-report.html").read_text()
    assert html.count("SIMULATED") >= 3


@pytest.mark.slow
def test_clean_sim_passes_but_is_never_conformant(pytester, conformance_args, report_of):
    result = pytester.runpytest(*conformance_args, "--sits-platform=sim:h200")
    assert result.ret == 0
    report = report_of(pytester.path)
    summary = report["summary"]
    assert summary["result"] == "SIMULATED" and summary["counts"]["FAIL"] == 0
    # Everything passes but SEC-FIRMWARE, which WARNs by design: the bundled profiles carry no firmware allow-list.
    others = {(v["requirement"], v["status"]) for v in report["verdicts"] if v["status"] != "PASS"}
    assert others <= {("SEC-FIRMWARE", "WARN")}
    assert summary["counts"]["PASS"] + summary["counts"]["WARN"] == sum(summary["counts"].values())


@pytest.mark.slow
@pytest.mark.parametrize("fault,req", [("missing-device", "INV-DEVICES"), ("wrong-model", "INV-DEVICES"),
                                       ("old-driver", "DEP-DRIVER")])
def test_each_sim_fault_fails_its_requirement(pytester, conformance_args, report_of, fault, req):
    pytester.runpytest(*conformance_args, f"--sits-platform=sim:h100+{fault}")
    statuses = {v["requirement"]: v["status"] for v in report_of(pytester.path)["verdicts"]}
    assert statuses[req] == "FAIL"


@pytest.mark.slow
def test_interrupted_session_leaves_a_valid_incomplete_report(pytester, report_of):
    pytester.makepyfile(test_a=SITS_TESTS.format(rid="INV-DEVICES", n=2, status="PASS") + """
def test_zz_interrupt():
    raise KeyboardInterrupt
""")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    report = report_of(pytester.path)
    assert rep.validate(report) == []
    assert report["run"]["completed"] is False and report["summary"]["result"] == "INCOMPLETE"
    assert len(report["verdicts"]) == 2
    assert "INCOMPLETE RUN" in (pytester.path / "sits-report" / "sits-report.html").read_text()


@pytest.mark.slow
def test_xdist_one_report_no_verdict_lost_or_doubled(pytester, report_of):
    pytest.importorskip("xdist")
    pytester.makepyfile(test_a=SITS_TESTS.format(rid="INV-DEVICES", n=15, status="PASS"),
                        test_b=SITS_TESTS.format(rid="MEM-CAPACITY", n=15, status="FAIL"))
    result = pytester.runpytest_subprocess("-n", "2", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=15, failed=15)
    report = report_of(pytester.path)
    assert rep.validate(report) == []
    keys = [(v["nodeid"], v["seq"]) for v in report["verdicts"]]
    assert len(keys) == 30 and len(set(keys)) == 30
    assert report["run"]["xdist_workers"] == 2
    assert len(list((pytester.path / "sits-report").iterdir())) == 2  # one JSON, one HTML


def test_hostile_device_names_are_escaped(pytester, conformance_args):
    pytester.runpytest(*conformance_args, "--sits-platform=sim:h100+hostile-name")
    html = (pytester.path / "sits-report" / "sits-report.html").read_text()
    assert "<script>" not in html
    assert "&lt;script&gt;alert(" in html


def test_select_by_requirement_id(pytester, conformance_args, report_of):
    result = pytester.runpytest(*conformance_args, "-m", "MEM-CAPACITY", "--strict-markers")
    outcomes = result.parseoutcomes()
    assert outcomes["skipped"] == 1 and "passed" not in outcomes and outcomes["deselected"] >= 6
    result = pytester.runpytest(*conformance_args, "-k", "INV-DEVICES or DEP-DRIVER")
    outcomes = result.parseoutcomes()
    assert outcomes["passed"] == 1 and outcomes["skipped"] == 1 and outcomes["deselected"] >= 5
    cov = {c["requirement"]: c["state"] for c in report_of(pytester.path)["coverage"]}
    assert cov["INV-DEVICES"] == "RUN" and cov["MEM-CAPACITY"] == "DESELECTED"
    assert cov["TOPO-PCIE-DIRECT"] == "DESELECTED" and cov["SVC-SLA"] == "NOT_AT_LEVEL_QUICK"


def test_levels(pytester):
    pytester.makepyfile("""
import pytest
from pytest_sits.verdict import Verdict

@pytest.mark.sits_requirement("INV-DEVICES")
def test_quick(sits_record):
    sits_record(Verdict("INV-DEVICES", "PASS", "ok"))

@pytest.mark.sits_requirement("MEM-CAPACITY", level="standard")
def test_standard(sits_record):
    sits_record(Verdict("MEM-CAPACITY", "PASS", "ok"))

@pytest.mark.sits_requirement("THERM-GPU-STEADY")
def test_full(sits_record):
    sits_record(Verdict("THERM-GPU-STEADY", "PASS", "ok"))
""")
    pytester.runpytest().assert_outcomes(passed=1, deselected=2)
    pytester.runpytest("--sits-level=standard").assert_outcomes(passed=2, deselected=1)
    pytester.runpytest("--sits-level=full").assert_outcomes(passed=3)
    result = pytester.runpytest("--sits-level=deep")
    assert result.ret == pytest.ExitCode.USAGE_ERROR


@pytest.mark.slow
def test_waiver_turns_fail_into_waived(pytester, report_of):
    prof = pytester.path / "mine.yaml"
    prof.write_text("name: mine\nextends: h100\nwaivers:\n  - id: INV-DEVICES\n"
                    "    reason: one GPU is out for RMA until 2026-12-15 (ticket 4711)\n")
    result = pytester.runpytest("--pyargs", "pytest_sits.conformance", f"--sits-profile={prof}",
                                "--sits-platform=sim:h100+missing-device", "-rs")
    result.stdout.fnmatch_lines(["INV-DEVICES *1 WAIVED*", "    WAIVED *: FAIL waived by profile*"])
    v = next(v for v in report_of(pytester.path)["verdicts"] if v["requirement"] == "INV-DEVICES")
    assert v["status"] == "WAIVED" and "RMA" in v["waiver"] and v["evidence"]["waived_status"] == "FAIL"
    assert "RMA" in (pytester.path / "sits-report" / "sits-report.html").read_text()


def test_probe_exception_is_an_error_verdict(pytester, report_of):
    pytester.makepyfile("""
import pytest

@pytest.mark.sits_requirement("INV-DEVICES")
def test_broken():
    raise OSError("sensor read failed: /sys/class/hwmon/hwmon3/temp1_input")
""")
    result = pytester.runpytest()
    result.assert_outcomes(failed=1)
    v = report_of(pytester.path)["verdicts"][0]
    assert v["status"] == "ERROR" and "sensor read failed" in v["reason"]
    assert report_of(pytester.path)["summary"]["result"] == "NON_CONFORMANT"


def test_unknown_requirement_in_marker(pytester):
    pytester.makepyfile("""
import pytest
@pytest.mark.sits_requirement("NOT-A-REQ")
def test_x():
    pass
""")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*names no SITS2026 requirement*"])


def test_warn_and_inconclusive_outcomes(pytester, report_of):
    pytester.makepyfile(test_w=SITS_TESTS.format(rid="INV-DEVICES", n=1, status="WARN"),
                        test_i=SITS_TESTS.format(rid="MEM-CAPACITY", n=1, status="INCONCLUSIVE"))
    result = pytester.runpytest("-rs")
    # pytest's own warning count is left out: the plugin files a WARN verdict's SitsWarning under an "ignore"
    # filter (the summary lists it), and how an in-process run counts it depends on the tests run before it
    outcomes = result.parseoutcomes()
    assert (outcomes.get("passed"), outcomes.get("skipped"), outcomes.get("failed", 0)) == (1, 1, 0), outcomes
    result.stdout.fnmatch_lines(["INV-DEVICES *1 WARN  0 x", "    WARN host: case 0", "*MEM-CAPACITY INCONCLUSIVE*"])
    assert report_of(pytester.path)["summary"]["result"] == "UNDECIDED"


def test_bad_platform_is_usage_error(pytester):
    pytester.makepyfile("def test_x():\n    pass\n")
    result = pytester.runpytest("--sits-platform=sim:h100+melted")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: bad platform: unknown sim fault 'melted'; fix: use one of *"])


def test_atomic_write_keeps_old_file_on_failure(tmp_path):
    target = tmp_path / "r.json"
    files.atomic_write(target, "old")

    class Boom:
        def __str__(self):
            raise RuntimeError

    with pytest.raises(TypeError):
        files.atomic_write(target, Boom())
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_cli_report_render_and_validate(pytester, conformance_args, tmp_path):
    from pytest_sits.cli import main

    pytester.runpytest(*conformance_args, "--sits-platform=sim:l40s")
    j = pytester.path / "sits-report" / "sits-report.json"
    assert main(["report", "validate", str(j)]) == 0
    assert main(["report", "render", str(j), "--markdown", str(tmp_path / "r.md"), "--html",
                 str(tmp_path / "r.html")]) == 0
    md = (tmp_path / "r.md").read_text()
    assert "SIMULATED platform" in md and "| INV-DEVICES |" in md
    broken = tmp_path / "broken.json"
    broken.write_text(j.read_text()[:100])
    assert main(["report", "validate", str(broken)]) == 4
    bad = json.loads(j.read_text())
    bad["verdicts"][0]["status"] = "OK"
    broken.write_text(json.dumps(bad))
    assert main(["report", "validate", str(broken)]) == 1


def test_conftest_can_enrich_the_inventory(pytester, conformance_args, report_of):
    pytester.makeconftest("""
def pytest_sits_update_inventory(config, inventory):
    inventory["lab"] = {"rack": "B12", "asset": "SRV-0042"}
""")
    pytester.runpytest(*conformance_args, "-m", "INV-DEVICES")
    assert report_of(pytester.path)["inventory"]["lab"] == {"rack": "B12", "asset": "SRV-0042"}


def test_report_files_are_readable_like_any_written_file(tmp_path):
    import os
    import stat

    old = os.umask(0o022)
    try:
        files.atomic_write(tmp_path / "r.json", "{}")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "r.json").stat().st_mode) == 0o644


def test_an_option_value_after_a_space_that_pytest_took_for_a_path_is_a_usage_error(pytester, tmp_path):
    """`--sits-profile /elsewhere/x.yaml` moved pytest's rootdir and ignored the lab's ini file; now it stops and
    names the `=` form, which works."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "x.yaml").write_text("name: x\nextends: host\n")
    pytester.makeini("[pytest]\nsits_report_dir = none\n")
    pytester.makepyfile("def test_x():\n    pass\n")
    result = pytester.runpytest("--sits-profile", str(elsewhere / "x.yaml"))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: --sits-profile {elsewhere / 'x.yaml'}: pytest took the value given after a "
                                 f"space for a test path when it chose its rootdir*; fix: write "
                                 f"--sits-profile={elsewhere / 'x.yaml'}"])
    result = pytester.runpytest(f"--sits-profile={elsewhere / 'x.yaml'}")
    assert result.ret == 0
    result = pytester.runpytest("--sits-level=quick")  # not a path: pytest parses it right
    assert result.ret == 0


def test_an_option_value_after_a_space_below_the_start_folder_is_read_when_pytest_chose_the_same_rootdir(pytester):
    """`pytest --sits-profile profiles/x.yaml`, the ini file above: pytest chose the rootdir and ini file it chooses
    without the value, so the value is read as the option's; a folder with an ini file of its own still stops it."""
    (pytester.path / "profiles").mkdir()
    (pytester.path / "profiles" / "x.yaml").write_text("name: x\nextends: host\n")
    pytester.makeini("[pytest]\nsits_report_dir = none\n")
    pytester.makepyfile("def test_x():\n    pass\n")
    result = pytester.runpytest("--sits-profile", "profiles/x.yaml")
    assert result.ret == 0, result.stderr.str()
    result.stdout.fnmatch_lines(["*profile*x*"])
    (pytester.path / "own").mkdir()
    (pytester.path / "own" / "pytest.ini").write_text("[pytest]\n")
    (pytester.path / "own" / "x.yaml").write_text("name: x\nextends: host\n")
    result = pytester.runpytest("--sits-profile", "own/x.yaml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --sits-profile own/x.yaml: pytest took the value given after a space*"])


@pytest.mark.slow
@pytest.mark.parametrize("args,status", [
    (["--sits-platform=sim:h100"], 0),                       # quick, every verdict conforms (SIMULATED, PARTIAL)
    (["--sits-platform=sim:h100+switch"], 10),               # a FAIL: NON_CONFORMANT
    (["--sits-platform=sim:h100", "-m", "THERM-GPU-STEADY", "--sits-level=full", "--sits-report-dir=none",
      "-k", "11:00"], 0),
    (["--sits-profile=h100", "-m", "DEP-ECC"], 11),          # every verdict SKIP (no GPU here): nothing decided
    (["--sits-platform=sim:h100", "--collect-only"], 0),
])
def test_exit_statuses_ci_can_gate_on(pytester, conformance_args, args, status, report_of):
    result = pytester.runpytest(*conformance_args, *args)
    assert result.ret == status, result.stdout.str()[-2000:]
    if "--collect-only" in args:
        assert not (pytester.path / "sits-report").exists()  # nothing ran: no report written over the last one
    elif "--sits-report-dir=none" not in args:
        run = report_of(pytester.path)["run"]
        assert run["exit_status"] == status and run["pytest_exit_status"] in (0, 1)


@pytest.mark.slow
def test_a_report_that_cannot_be_written_is_its_own_exit_status(pytester, conformance_args, tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    result = pytester.runpytest(*conformance_args, "--sits-platform=sim:h100", f"--sits-report-dir={blocked / 'r'}")
    assert result.ret == 12
    result.stdout.fnmatch_lines([f"*could not write the report into {blocked / 'r'}*fix: give a writable folder*"])
