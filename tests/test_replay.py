"""`sits replay`: every verdict of a report is recomputed from its stored evidence with the same checks."""

import json

import pytest

from pytest_sits.catalogue import CATALOGUE, level_rank
from pytest_sits.cli import main
from pytest_sits.platforms.sim.faults import FAULTS
from pytest_sits.report.replay import replay_report

#: The faults that fail no requirement: what each shows instead, and the level that shows it.
NOT_A_FAILURE = {
    "no-nvml": "quick",            # the management library absent: ERROR/SKIP, never a verdict on the hardware
    "hostile-name": "quick",       # HTML in device names: the report escapes it
    "link-idle": "quick",          # an idle link cannot decide its speed: INCONCLUSIVE
    "membw-slow": "standard",      # above the profiles' floors: a fleet outlier (sits baseline), not a failure
    "sensor-na": "full",           # the calibration cannot decide: INCONCLUSIVE
    "latency-marginal": "standard",  # the P99 sits on the ceiling: INCONCLUSIVE
    "sensor-dropout": "standard",  # the power sensor stops: INCONCLUSIVE
    "drift": "standard",           # the machine moves: INCONCLUSIVE, never FAIL
    "die-drift": "standard",       # a die out of its band during the sweep: that GPU's PLP-* INCONCLUSIVE
}


def _failing(fault):
    """The requirements whose declarations say ``fault`` makes them FAIL."""
    return [r for r in CATALOGUE.values() if fault in r.faults]


def _level(fault):
    reqs = _failing(fault)
    if not reqs:
        return NOT_A_FAILURE[fault]
    return max((r.level for r in reqs), key=level_rank)


def _run(pytester, conformance_args, *args):
    pytester.runpytest(*conformance_args, "-p", "no:randomly", *args)
    return json.loads((pytester.path / "sits-report" / "sits-report.json").read_text())


#: Statuses that say something was decided on the platform's evidence.
DECIDED = {"PASS", "FAIL", "WARN", "INCONCLUSIVE"}


def assert_decided_where_declared(report):
    """No requirement is decided on a platform its declaration does not name (pytest_sits/catalogue/)."""
    kind = report["platform"]["kind"]
    wrong = sorted({v["requirement"] for v in report["verdicts"]
                    if v["status"] in DECIDED and not CATALOGUE[v["requirement"]].decides_on(kind)})
    assert wrong == [], f"decided on platform {kind}, which their declarations do not name: {wrong}"


def _assert_all_reproduced(report):
    assert_decided_where_declared(report)
    out = replay_report(report)
    assert out["total"] == len(report["verdicts"]) > 0
    assert out["differs"] == [], out["differs"][:3]
    assert out["not_replayable"] == [], out["not_replayable"][:3]
    assert out["replayed"] == out["total"]
    assert out["thresholds"] == [], out["thresholds"][:3]  # every verdict decided with its profile's thresholds
    return out


@pytest.mark.slow
def test_sim_full_run_replays(pytester, conformance_args):
    report = _run(pytester, conformance_args, "--sits-platform=sim:h100", "--sits-level=full")
    assert {"THERM-GPU-STEADY", "THERM-CPU-STEADY", "MEM-BW-EFFICIENCY"} <= {v["requirement"] for v in report["verdicts"]}
    _assert_all_reproduced(report)


#: probe-hang blocks a health read for an hour: its run is ended by the watchdog, in a process of its own
#: (tests/test_health_command.py: sits health), and its watchdog verdict was decided by no check.
HANGS = {"probe-hang"}


@pytest.mark.slow
@pytest.mark.parametrize("fault", sorted(set(FAULTS) - HANGS))
def test_every_sim_fault_fails_what_it_declares_and_replays(pytester, conformance_args, fault):
    """Each requirement that declares ``fault`` FAILs on ``sim:h100+fault`` (under its declared fault thresholds),
    a fault no requirement declares is listed with what it shows instead, and every verdict replays."""
    reqs = _failing(fault)
    assert reqs or fault in NOT_A_FAILURE, f"fault {fault}: no requirement declares it (pytest_sits/catalogue/)"
    profile, args = "h100", []
    overrides = {r.id: r.fault_thresholds for r in reqs if r.fault_thresholds}
    if overrides:
        profile = str(pytester.path / "faults.yaml")
        (pytester.path / "faults.yaml").write_text(json.dumps({"name": "faults", "extends": "h100",
                                                               "thresholds": overrides}))
        args = [f"--sits-profile={profile}"]
    report = _run(pytester, conformance_args, f"--sits-platform=sim:{profile}+{fault}", "--sits-level",
                  _level(fault), *args)
    statuses = {}
    for v in report["verdicts"]:
        statuses.setdefault(v["requirement"], set()).add(v["status"])
    assert [r.id for r in reqs if "FAIL" not in statuses.get(r.id, ())] == [], statuses
    _assert_all_reproduced(report)


def test_snapshot_run_replays(pytester, conformance_args, tmp_path):
    snap = tmp_path / "snap"
    assert main(["capture", str(snap)]) == 0
    report = _run(pytester, conformance_args, f"--sits-platform=snapshot:{snap}")
    _assert_all_reproduced(report)


def test_live_quick_run_replays(pytester, conformance_args):
    _assert_all_reproduced(_run(pytester, conformance_args))


def test_edited_measurement_is_named_and_exits_1(pytester, conformance_args, tmp_path, capsys):
    report = _run(pytester, conformance_args, "--sits-platform=sim:h100+switch")
    # Edit one measured number of the evidence: the first accelerator's path loses its switch ports.
    i, v = next((i, v) for i, v in enumerate(report["verdicts"]) if v["requirement"] == "TOPO-PCIE-DIRECT")
    assert v["status"] == "FAIL"
    v["evidence"]["path"]["hops"] = [h for h in v["evidence"]["path"]["hops"]
                                     if h["port_type"] not in ("switch_upstream", "switch_downstream")]
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(report))
    assert main(["replay", str(edited)]) == 1
    out = capsys.readouterr().out
    assert f"DIFFERS  #{i} TOPO-PCIE-DIRECT [{v['subject']}] status: stored 'FAIL' -> now 'PASS'" in out
    assert "1 differ" in out


@pytest.mark.slow
def test_edited_hold_share_is_caught(pytester, conformance_args):
    report = _run(pytester, conformance_args, "--sits-platform=sim:h100+membw-low", "--sits-level=standard")
    v = next(v for v in report["verdicts"] if v["requirement"] == "MEM-BW-EFFICIENCY")
    assert v["status"] == "FAIL"
    v["evidence"]["samples_gbps"] = [g * 3 for g in v["evidence"]["samples_gbps"]]  # someone "improves" the copies
    out = replay_report(report)
    assert {d["field"] for d in out["differs"]} >= {"status", "measured"}


def test_verdict_without_check_is_listed_not_replayable():
    report = {"verdicts": [{"requirement": "INV-DEVICES", "status": "ERROR", "reason": "raised", "subject": "-",
                            "evidence": {"replayable": "no: the test raised before a check decided"}}]}
    out = replay_report(report)
    assert out["replayed"] == 0 and out["not_replayable"][0]["why"].startswith("no: the test raised")


def test_profile_option_rejudges_with_other_thresholds(pytester, conformance_args, tmp_path):
    report = _run(pytester, conformance_args, "--sits-platform=sim:h100+switch")
    prof = tmp_path / "lenient.yaml"
    prof.write_text("name: lenient\nextends: h100\nthresholds:\n  TOPO-PCIE-DIRECT:\n    max_switch_ports: 2\n")
    out = replay_report(report, str(prof))
    changed = [d for d in out["differs"] if d["requirement"] == "TOPO-PCIE-DIRECT" and d["field"] == "status"]
    assert changed and all(d["stored"] == "FAIL" and d["now"] == "PASS" for d in changed)


@pytest.mark.parametrize("content,msg", [
    ("{not json", "not valid JSON"),
    ('{"schema": "other"}', "not a pytest-sits report"),
    ('{"verdicts": [NaN]}', "not valid JSON"),
])
def test_unreadable_report_is_a_usage_error(tmp_path, capsys, content, msg):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    assert main(["replay", str(bad)]) == 4
    assert msg in capsys.readouterr().err


def test_report_link_is_refused(tmp_path, capsys):
    (tmp_path / "real.json").write_text("{}")
    (tmp_path / "link.json").symlink_to(tmp_path / "real.json")
    assert main(["replay", str(tmp_path / "link.json")]) == 4
    assert "link" in capsys.readouterr().err


def test_edited_summary_and_deleted_verdicts_are_caught(pytester, conformance_args, tmp_path, capsys):
    report = _run(pytester, conformance_args, "--sits-platform=sim:h100+switch")
    edited = dict(report, summary=dict(report["summary"], result="CONFORMANT"))
    p = tmp_path / "e.json"
    p.write_text(json.dumps(edited))
    assert main(["replay", str(p)]) == 1
    assert "DIFFERS  summary.result: stored 'CONFORMANT' -> now 'SIMULATED'" in capsys.readouterr().out
    pruned = dict(report, verdicts=[v for v in report["verdicts"] if v["status"] != "FAIL"])
    out = replay_report(pruned)
    assert any(d["field"] == "coverage.TOPO-PCIE-DIRECT" for d in out["summary"])


def test_a_pass_stripped_of_its_check_is_not_taken_on_trust(pytester, conformance_args, tmp_path):
    report = _run(pytester, conformance_args, "--sits-platform=sim:h100")
    v = next(v for v in report["verdicts"] if v["status"] == "PASS")
    v["check"] = None
    out = replay_report(report)
    assert out["unbacked"] and out["unbacked"][0]["requirement"] == v["requirement"]
    p = tmp_path / "s.json"
    p.write_text(json.dumps(report))
    assert main(["replay", str(p)]) == 1



def _loosen(report):
    """A forger's edit: every FAIL made PASS by loosening the thresholds stored in the verdict, the verdict
    recomputed with the same check (so it replays), the summary and coverage made to match, the profile
    section left as it was."""
    from pytest_sits.checks import get
    from pytest_sits.report.model import coverage, plain, summarise

    loosened = {"MEM-BW-EFFICIENCY": {"min_efficiency": 0.01}, "TOPO-PCIE-BW": {"min_efficiency": 0.01}}
    forged = []
    for i, v in enumerate(report["verdicts"]):
        if v["status"] != "FAIL":
            continue
        th = dict(v["thresholds"], **loosened[v["requirement"]])
        now = get(v["check"]["name"]).fn(v["evidence"], th, v["subject"])
        assert now.status == "PASS", (v["requirement"], now.reason)
        report["verdicts"][i] = dict(v, **plain(now.to_json()))
        forged.append(i)
    collected = {r["requirement"]: r["state"] for r in report["coverage"] if r["state"] in ("DESELECTED",)}
    report["coverage"] = coverage(report["verdicts"], report["run"]["level"], collected)
    report["summary"] = summarise(report["verdicts"], True, True, report["coverage"], report["run"]["level"], "sim")
    return forged


@pytest.mark.slow
def test_a_report_whose_thresholds_were_loosened_fails_replay_without_a_profile(pytester, conformance_args, tmp_path,
                                                                                capsys):
    report = _run(pytester, conformance_args, "--sits-platform=sim:h100+membw-low,pcie-bw-low",
                  "--sits-level=standard")
    forged = _loosen(report)
    assert len(forged) == 16
    path = tmp_path / "forged.json"
    path.write_text(json.dumps(report))
    out = replay_report(report)
    assert out["differs"] == [] and out["summary"] == []  # the forgery replays: status and summary agree
    assert sorted(f["index"] for f in out["thresholds"]) == forged
    assert main(["replay", str(path)]) == 1
    text = capsys.readouterr().out
    assert text.count("THRESHOLDS  #") == 16 and "MEM-BW-EFFICIENCY" in text and "first difference: min_efficiency" in text


@pytest.mark.slow
def test_a_verdict_of_an_earlier_check_version_is_checked_against_the_profile_too(pytester, conformance_args):
    """A report an earlier release wrote (PLP-LATENCY 2, given the profile's thresholds as they stand) replays
    clean, and the same verdict with a loosened ceiling is a finding; in a report of this version, where no run
    decides with version 2, that verdict is a legacy check swapped in.  Only a version
    given thresholds derived per subject (EQ-PRECISION 1) cannot be checked against the profile."""
    from pytest_sits.checks import LEGACY, load_all
    from pytest_sits.report.model import plain, revive

    load_all()  # the earlier versions are registered by the legacy package, which load_all imports
    report = _run(pytester, conformance_args, "--sits-platform=sim:h100", "--sits-level=standard")
    idx = [i for i, v in enumerate(report["verdicts"]) if v["requirement"] == "PLP-LATENCY"]
    assert idx
    for i in idx:
        v = report["verdicts"][i]
        v["check"]["version"] = 2
        now = LEGACY[("PLP-LATENCY", 2)].fn(revive(v["evidence"]), revive(v["thresholds"]), v["subject"])
        report["verdicts"][i] = dict(v, **plain(now.to_json()))
    # Written by this version, an earlier check version is a forgery (a new run never uses it) ...
    out = replay_report(report)
    assert sorted(f["index"] for f in out["thresholds"] if f["field"] == "check.version") == sorted(idx)
    # ... written by an earlier release, which decided with version 2, it replays clean
    report["generator"]["version"] = "0.1.0"
    out = replay_report(report)
    assert out["differs"] == [] and out["thresholds"] == [], out["thresholds"]
    report["verdicts"][idx[0]]["thresholds"]["max_latency_us"] = 99_000
    out = replay_report(report)
    assert [f["index"] for f in out["thresholds"]] == [idx[0]] and "max_latency_us" in out["thresholds"][0]["why"]
    assert LEGACY[("EQ-PRECISION", 1)].derived_thresholds and not LEGACY[("PLP-LATENCY", 2)].derived_thresholds


def test_a_profile_section_that_differs_from_its_bundled_profile_is_a_finding(pytester, conformance_args):
    report = _run(pytester, conformance_args, "--sits-platform=sim:h100")
    assert report["profile"]["bundled"] is True
    # Loosen the profile section and every verdict's thresholds to match it: consistent with itself, but not
    # the bundled profile of that name.
    report["profile"]["data"]["thresholds"]["DEP-POWERCAP"]["tolerance"] = 0.5
    for v in report["verdicts"]:
        if v["requirement"] == "DEP-POWERCAP":
            v["thresholds"]["tolerance"] = 0.5
    out = replay_report(report)
    assert [f["field"] for f in out["thresholds"]] == ["profile"]
    assert "differs from the bundled profile 'h100-sxm5'" in out["thresholds"][0]["why"]
    assert "thresholds.DEP-POWERCAP.tolerance" in out["thresholds"][0]["why"]


@pytest.mark.parametrize("edit", [
    lambda r: r["verdicts"][0].__setitem__("evidence", [1, 2]),
    lambda r: r["verdicts"][0].__setitem__("check", "TOPO-PCIE-DIRECT"),
    lambda r: r["verdicts"][0].__setitem__("status", "GREAT"),
    lambda r: r.__setitem__("verdicts", {"0": r["verdicts"][0]}),
    lambda r: r["run"].__setitem__("level", 3),
    lambda r: r.__setitem__("coverage", "all"),
    lambda r: r["profile"].__setitem__("data", []),
    lambda r: r.pop("summary"),
    lambda r: r["coverage"][1].__setitem__("statuses", -1),
    lambda r: r["coverage"][1].__setitem__("requirement", []),
], ids=["evidence-list", "check-string", "status", "verdicts-object", "level", "coverage", "profile-data",
        "no-summary", "coverage-statuses", "coverage-requirement"])
def test_a_structurally_broken_report_is_one_line_and_exit_4(pytester, conformance_args, tmp_path, capsys, edit):
    report = _run(pytester, conformance_args, "--sits-platform=sim:h100")
    edit(report)
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(report))
    capsys.readouterr()
    assert main(["replay", str(path)]) == 4
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.strip().splitlines()) == 1, captured.err
    assert str(path) in captured.err and "fix:" in captured.err and "Traceback" not in captured.err


def test_every_check_version_a_release_shipped_still_replays():
    """Reports of an earlier release replay: a check whose rule or inputs changed keeps its earlier versions
    (registered legacy). tests/data/shipped-checks.json lists what each release shipped; add this release's
    versions to it when it ships."""
    from pathlib import Path

    from pytest_sits.checks import get_version, load_all

    load_all()
    shipped = json.loads((Path(__file__).parent / "data" / "shipped-checks.json").read_text())
    missing = [f"{name} v{v} ({release})" for release, checks in shipped.items() for name, versions in checks.items()
               for v in versions if get_version(name, v) is None]
    assert missing == [], "keep these versions with @check(..., legacy=True)"
