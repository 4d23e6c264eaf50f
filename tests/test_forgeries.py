"""Edits of a stored report that would improve its result, each made as consistently as a forger would (the
summary and coverage recomputed to match), and what replay says of each (report/binding.py): every one here is
a finding, so `sits replay` exits 1 naming it.  docs/trust.md lists what replay cannot catch."""

from __future__ import annotations

import copy
import json

import pytest

from pytest_sits.report.model import coverage, summarise
from pytest_sits.report.replay import replay_report


@pytest.fixture(scope="module")
def switch_report(tmp_path_factory):
    """A simulated 8-GPU run where a PCIe switch sits in every GPU's path: TOPO-PCIE-DIRECT FAILs per GPU."""
    import subprocess
    import sys

    out = tmp_path_factory.mktemp("forge")
    subprocess.run([sys.executable, "-m", "pytest", "--pyargs", "pytest_sits.conformance", "-p", "no:cacheprovider",
                    "-p", "no:randomly", "-q", "--sits-platform=sim:h100+switch", f"--sits-report-dir={out}"],
                   cwd=out, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False, timeout=600)
    return json.loads((out / "sits-report.json").read_text())


def _consistent(report):
    """What a careful forger does after editing verdicts: the summary and coverage made to match them."""
    run, plat = report["run"], report["platform"]
    collected = {r["requirement"]: r["state"] for r in report["coverage"]
                 if r["state"] in ("DESELECTED", "COLLECTED", "NOT_SELECTED")}
    rows = coverage(report["verdicts"], run["level"], collected, run["completed"])
    report["coverage"] = [dict(old, statuses=new["statuses"], state=collected.get(new["requirement"], new["state"]))
                          for old, new in zip(report["coverage"], rows)]
    report["summary"] = dict(report["summary"], **{k: v for k, v in summarise(
        report["verdicts"], run["completed"], plat["simulated"], rows, run["level"], plat["kind"]).items()
        if k in ("result", "counts")})
    return report


def _findings(report):
    out = replay_report(report)
    return [f["field"] for f in out["thresholds"]], out


pytestmark = pytest.mark.slow  # one simulated run in a subprocess


def test_the_untouched_report_has_no_finding(switch_report):
    fields, out = _findings(copy.deepcopy(switch_report))
    assert fields == [] and out["differs"] == [] and out["summary"] == [], out


def test_one_gpus_fail_deleted(switch_report):
    r = copy.deepcopy(switch_report)
    fails = [v for v in r["verdicts"] if v["requirement"] == "TOPO-PCIE-DIRECT" and v["status"] == "FAIL"]
    assert len(fails) == 8
    r["verdicts"].remove(fails[3])
    fields, out = _findings(_consistent(r))
    assert "verdicts" in fields and out["summary"] == [], out["thresholds"]


@pytest.mark.parametrize("how", ["interrupted", "selected-by-keyword"])
def test_a_run_that_stopped_or_was_narrowed_mid_requirement_is_not_taken_for_deleted_verdicts(switch_report, how):
    """An interrupted run (INCOMPLETE, never conformant) stops between two devices of a requirement, and -k on a
    device's test id selects devices: some devices then have no verdict, and nothing was removed."""
    r = copy.deepcopy(switch_report)
    fails = [v for v in r["verdicts"] if v["requirement"] == "TOPO-PCIE-DIRECT" and v["status"] == "FAIL"]
    for v in fails[4:]:
        r["verdicts"].remove(v)
    if how == "interrupted":
        r["run"]["interrupts"] = [{"signal": "SIGTERM", "at": r["run"]["started_at"], "during": "tests"}]
        r["run"]["completed"] = False
    else:
        r["run"]["args"] = list(r["run"]["args"]) + ["-k", "0000:1 or 0000:2 or 0000:3 or 0000:4"]
    fields, out = _findings(_consistent(r))
    assert "verdicts" not in fields, out["thresholds"]


def test_every_verdict_of_a_requirement_deleted_and_marked_deselected(switch_report):
    r = copy.deepcopy(switch_report)
    r["verdicts"] = [v for v in r["verdicts"] if v["requirement"] != "TOPO-PCIE-DIRECT"]
    for row in r["coverage"]:
        if row["requirement"] == "TOPO-PCIE-DIRECT":
            row["state"] = "DESELECTED"
    fields, out = _findings(_consistent(r))
    assert "coverage" in fields, out["thresholds"]


def test_a_simulated_run_relabelled_live(switch_report):
    r = copy.deepcopy(switch_report)
    r["platform"] = {"kind": "live", "label": "live host", "simulated": False}
    for v in r["verdicts"]:
        v["simulated"] = False
    fields, out = _findings(_consistent(r))
    assert "platform.simulated" in fields and "platform.kind" in fields, out["thresholds"]


def test_an_interrupted_run_flipped_to_completed(switch_report):
    r = copy.deepcopy(switch_report)
    r["run"]["interrupts"] = [{"signal": "SIGTERM", "at": r["run"]["started_at"]}]
    r["run"]["completed"] = True
    fields, _ = _findings(_consistent(r))
    assert "run.completed" in fields


def test_a_legacy_check_version_swapped_in(switch_report):
    from pytest_sits.checks import LEGACY, REGISTRY, load_all

    load_all()
    r = copy.deepcopy(switch_report)
    old = [(req, ver) for (req, ver) in LEGACY if any(v["requirement"] == req for v in r["verdicts"])]
    assert old, "no legacy version of a requirement this run decided"
    req, ver = old[0]
    for v in r["verdicts"]:
        if v["requirement"] == req:
            v["check"]["version"] = ver
    fields, out = _findings(r)
    assert "check.version" in fields and REGISTRY[LEGACY[(req, ver)].name].version != ver, out["thresholds"]


@pytest.mark.parametrize("folder", [None, "/opt/venv/lib/python3.11/site-packages/pytest_sits/bundled",
                                    "/home/lab/pytest-sits/profiles"],
                         ids=["this-install", "installed-wheel", "checkout"])
def test_a_bundled_profile_loosened_under_bundled_false(switch_report, folder):
    r = copy.deepcopy(switch_report)
    assert r["profile"]["bundled"] is True
    if folder:  # the report was written by an install whose bundled folder lies elsewhere
        r["profile"]["path"] = f"{folder}/{r['profile']['name']}.yaml"
    r["profile"]["bundled"] = False
    r["profile"]["data"]["thresholds"]["TOPO-PCIE-DIRECT"] = dict(
        r["profile"]["data"]["thresholds"].get("TOPO-PCIE-DIRECT") or {}, max_switch_hops=9)
    fields, out = _findings(r)
    assert "profile" in fields, out["thresholds"]
