"""Prometheus textfiles of a run (--sits-prometheus) and of a fleet (sits fleet merge --prometheus)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

prometheus_client = pytest.importorskip("prometheus_client", reason="pip install 'pytest-sits[prometheus]'")
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from pytest_sits.report import prometheus as prom  # noqa: E402

from helpers import SUITE, node_dir, run_pytest, run_suite  # noqa: E402

NAME = re.compile(r"^sits_[a-z][a-z0-9_]*$")
BASE_UNITS = ("seconds", "bytes", "bytes_per_second", "watts", "celsius", "ratio", "flops", "transfers_per_second")


def families(text: str) -> dict:
    return {f.name: f for f in text_string_to_metric_families(text)}


@pytest.fixture(scope="module")
def full_run(tmp_path_factory):
    base = tmp_path_factory.mktemp("prom")
    run = run_suite(base / "report", "--sits-platform=sim:h100", "--sits-level=full",
                    f"--sits-prometheus={base / 'sits.prom'}", timeout=900)
    assert (base / "sits.prom").is_file(), run.output[-3000:]
    assert f"sits report: {base / 'sits.prom'}" in run.output
    return base, run.report, (base / "sits.prom").read_text()


@pytest.mark.slow
def test_full_sim_run_textfile_parses_and_follows_conventions(full_run):
    _, report, text = full_run
    fams = families(text)
    for name, fam in fams.items():
        assert NAME.match(name) and fam.type == "gauge" and fam.documentation, name
        for s in fam.samples:
            assert s.timestamp is None                      # node_exporter's textfile collector refuses them
            assert "unit" not in s.labels                   # units go in the name, in base units
        if name.startswith("sits_verdict_measured_"):
            assert name[len("sits_verdict_measured_"):] in BASE_UNITS
    status = fams["sits_verdict_status"].samples
    assert len(status) == len(report["verdicts"])           # one series per verdict
    assert all(set(s.labels) == {"requirement", "subject", "status"} and s.value == 1 for s in status)
    got = {(s.labels["requirement"], s.labels["subject"]): s.labels["status"] for s in status}
    assert got == {(v["requirement"], v["subject"]): v["status"] for v in report["verdicts"]}
    # a measured value, converted to base units: GB/s -> bytes per second, µs -> seconds
    v = next(v for v in report["verdicts"] if v["unit"] == "GB/s" and isinstance(v["measured"], float))
    bw = {(s.labels["requirement"], s.labels["subject"]): s.value for s in fams["sits_verdict_measured_bytes_per_second"].samples}
    assert bw[(v["requirement"], v["subject"])] == pytest.approx(v["measured"] * 1e9)
    lat = next(v for v in report["verdicts"] if v["unit"] == "µs" and isinstance(v["measured"], float))
    secs = {(s.labels["requirement"], s.labels["subject"]): s.value for s in fams["sits_verdict_measured_seconds"].samples}
    assert secs[(lat["requirement"], lat["subject"])] == pytest.approx(lat["measured"] * 1e-6)
    # the run: result, time, profile and suite version
    assert [s.labels["result"] for s in fams["sits_run_result"].samples] == [report["summary"]["result"]]
    info = fams["sits_run_info"].samples[0].labels
    assert info["profile"] == report["profile"]["name"] and info["suite_version"] == report["generator"]["version"]
    assert info["level"] == "full" and info["platform"].startswith("SIMULATED")
    assert fams["sits_run_simulated"].samples[0].value == 1 and fams["sits_run_completed"].samples[0].value == 1
    assert fams["sits_run_finished_timestamp_seconds"].samples[0].value > 1.7e9
    counts = {s.labels["status"]: s.value for s in fams["sits_verdicts"].samples}
    assert sum(counts.values()) == len(report["verdicts"])


def test_units_map_to_base_units():
    assert prom.metric_unit("GB/s") == ("bytes_per_second", 1e9)
    assert prom.metric_unit("ms") == ("seconds", 1e-3) and prom.metric_unit("%") == ("ratio", 0.01)
    assert prom.metric_unit("errors") == ("", 1.0) and prom.metric_unit(None) == ("", 1.0)


def test_hostile_label_values_stay_one_line():
    report = {"verdicts": [{"requirement": "INV-DEVICES", "subject": 'gpu"0\n} evil 1', "status": "PASS",
                            "measured": 1.0, "unit": None}], "summary": {"result": "SIMULATED"}}
    fams = families(prom.report_text(report))
    assert fams["sits_verdict_status"].samples[0].labels["subject"] == 'gpu"0 } evil 1'
    assert "evil" not in fams


@pytest.mark.slow
def test_fleet_textfile(tmp_path):
    from pytest_sits.commands.fleet import merge as fleet_merge

    rep = run_suite(tmp_path / "pass", "--sits-platform=sim:h100", junit=True).report_dir
    out = tmp_path / "fleet"
    node_dir(out, "n1", rep)
    node_dir(out, "n2")
    fleet_merge.merge(out, prometheus=tmp_path / "fleet.prom")
    fams = families((tmp_path / "fleet.prom").read_text())
    assert [s.labels["result"] for s in fams["sits_fleet_result"].samples] == ["ERROR"]
    assert {s.labels["node"]: s.labels["result"] for s in fams["sits_fleet_node_result"].samples} == {
        "n1": "PASS", "n2": "ERROR"}
    assert all(0 <= s.value <= 1 for s in fams["sits_fleet_requirement_pass_ratio"].samples)


def test_missing_client_is_a_clear_usage_error(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "prometheus_client", None)
    with pytest.raises(prom.PrometheusUnavailable, match=r"pip install 'pytest-sits\[prometheus\]'"):
        prom.require_client()
    from pytest_sits.plugin.session import SitsRun, SitsUsageError

    run = SitsRun.resolve(profile_opt=None, profile_ini=None, platform_opt="sim:h100", platform_ini=None,
                          level_opt=None, level_ini=None, report_dir_opt="none", report_dir_ini=None)
    with pytest.raises(SitsUsageError, match="--sits-prometheus=x.prom: prometheus_client is not installed"):
        run.set_operations("x.prom", None, None)


@pytest.mark.slow
def test_the_textfile_replaces_a_planted_link(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious")
    link = tmp_path / "sits.prom"
    link.symlink_to(victim)
    proc = run_pytest(*SUITE, "-q", "--sits-platform=sim:h100", "--sits-report-dir=none", f"--sits-prometheus={link}",
                      cwd=tmp_path)
    assert victim.read_text() == "precious" and not link.is_symlink(), proc.stdout[-2000:]
    assert "sits_run_result" in Path(link).read_text()
