"""MLPerf Inference submissions as evidence: the readers (LoadGen summary and detail log, systems JSON, PTDaemon
power log), the runs they make, and SVC-SLA, PLP-LATENCY, PLP-PPL and PLP-POWER judged on them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mlperf_texts import ACCURACY, accuracy, detail, power, submission, summary, system
from pytest_sits.checks.inference import check_mlperf_latency, check_mlperf_power, check_mlperf_ppl, check_mlperf_sla
from pytest_sits.cli import main
from pytest_sits.conditions.inference.mlperf import evidence
from pytest_sits.platforms.evidence import EvidencePlatform
from pytest_sits.probes.readers import classify
from pytest_sits.probes.readers.mlperf import parse_detail, parse_power, parse_summary, parse_system
from pytest_sits.profiles import resolve
from pytest_sits.verdict import FAIL, INCONCLUSIVE, PASS, SKIP, WARN


def th(req: str, **over):
    return dict(resolve("h100").thresholds(req), **over)


def wl(out=(1, 512)):
    """SVC-SLA's workload with output lengths that cover the test runs' requests (100 tokens on average)."""
    return dict(resolve("h100").thresholds("SVC-SLA")["workload"], output_tokens=list(out))


def runs_of(root: Path, req: str):
    return evidence(EvidencePlatform(root).inventory(), req)


# ---- reading -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, kind", [(summary(), "mlperf-summary"), (detail(), "mlperf-detail"),
                                        (system(), "mlperf-system"), (power(seconds=5), "mlperf-power")])
def test_each_file_is_told_from_its_content(text, kind):
    assert classify(text)[0] == kind


def test_summary_figures_and_their_lines():
    run = parse_summary(summary(samples_per_s=74.42, tokens_per_s=21589.17, p99_ns=156_240_596_202))["run"]
    assert run["scenario"] == "Server" and run["result"] == "VALID" and run["samples_per_s"] == 74.42
    assert run["tokens_per_s"] == 21589.17  # the first "Completed tokens per second", not the stats' repeat
    assert run["latency"]["99.00"] == 156_240_596_202 and run["tpot"]["99.00"] == 40_000_000
    assert run["errors"] == 0 and run["early_stopping_met"] is True and run["ttft_limit_ns"] == 2e9
    assert run["lines"]["samples_per_s"] == 7


def test_detail_log_with_a_long_line_and_its_odd_figures():
    run = parse_detail(detail(queries=196608))["run"]
    assert run["query_count"] == 196608 and run["power_begin"] == "01-02-2026 10:00:00.000"
    assert run["latency"]["99.00"] == 900_000_000 and run["tpot"]["99.90"] == 42_000_000
    odd = " ".join(run["odd"])
    assert "result_overlatency_query_count 196608 = every query" in odd and "result_token_throughput 4.2e-09" in odd


def test_system_json_is_a_declaration_with_its_count_as_written():
    s = parse_system(system(count="4"))["system"]
    assert s["accelerators_per_node_n"] == 4 and s["accelerators_per_node_is_text"] is True
    assert parse_system(system(count=8))["system"]["accelerators_per_node_is_text"] is False


def test_power_log_samples_and_channels():
    p = parse_power(power(seconds=120))
    assert len(p["samples"]) == 120 and p["mark"] == "test_run" and p["start"] == "01-02-2026 09:58:00.000"
    assert set(p["channels_max"]) == {"Ch1", "Ch2", "Ch3"}


@pytest.mark.parametrize("parse, text, says", [
    (parse_summary, summary().replace("Result is : VALID\n", ""), "Result is"),
    (parse_detail, detail() + "a line of something else\n", "line 33"),
    (parse_detail, detail().replace('"key": "result_validity", "value": "VALID"', '"key": "result_validity", "value": '),
     "not JSON"),
    (parse_power, power(seconds=3) + "Time,13-45-2026 99:00:00.000,Watts,1.0\n", "line 5"),
    (parse_system, "{\"system_name\": ", "not JSON"),
])
def test_a_broken_file_is_refused_naming_the_line(parse, text, says):
    with pytest.raises(ValueError, match=says.replace("(", r"\(")):
        parse(text)


def test_a_summary_and_a_detail_log_in_one_folder_are_one_run_with_its_power_window(tmp_path):
    root = submission(tmp_path)
    inv = EvidencePlatform(root).inventory()
    runs = inv["submitted"]["mlperf"]["runs"]
    server = next(r for r in runs if r["scenario"] == "Server")
    assert server["summary_file"].endswith("Server/performance/run_1/mlperf_log_summary.txt")
    assert server["detail_file"].endswith("Server/performance/run_1/mlperf_log_detail.txt")
    assert server["query_count"] == 30000  # from the detail log
    w = server["power"]
    assert w["n"] == 601 and 9000 <= w["mean_w"] <= 9006  # the load, not the idle minutes around it
    assert inv["submitted"]["mlperf"]["power"][0]["whole"]["min_w"] == 3000.0


# ---- the checks: each passes on good evidence and fails on bad ------------------------------------------------

def test_sla_passes_within_the_profiles_targets(tmp_path):
    [(subject, ev)] = runs_of(submission(tmp_path), "SVC-SLA")
    v = check_mlperf_sla(ev, th("SVC-SLA", p99_ms=2000, min_rps=40, workload=wl()), subject)
    assert v.status == PASS, v.reason
    assert "summary line" in v.reason and "LoadGen: VALID" in v.reason and v.measured == 900.0
    assert subject == "MLPerf Server closed/Tests/results/SYS/llama2-70b-99/Server/performance/run_1"


def test_sla_fails_beyond_and_names_the_figure(tmp_path):
    [(subject, ev)] = runs_of(submission(tmp_path), "SVC-SLA")
    v = check_mlperf_sla(ev, th("SVC-SLA", workload=wl()), subject)  # B §3.2's 120 ms and 85 req/s
    assert v.status == FAIL and "P99" in v.reason and "throughput" in v.reason
    assert "overlatency" not in v.reason.split(" — ")[0]  # LoadGen's odd count is not a failure


def test_sla_is_inconclusive_when_loadgens_run_is_not_a_decision(tmp_path):
    root = submission(tmp_path, server={"min_duration_met": "No", "result": "INVALID"})
    [(subject, ev)] = runs_of(root, "SVC-SLA")
    v = check_mlperf_sla(ev, th("SVC-SLA", p99_ms=2000, min_rps=40, workload=wl()), subject)
    assert v.status == INCONCLUSIVE and "min duration not satisfied" in v.reason


def test_sla_counts_loadgens_errors(tmp_path):
    (tmp_path / "s.txt").write_text(summary(errors=900))
    [(subject, ev)] = runs_of(tmp_path, "SVC-SLA")
    v = check_mlperf_sla(ev, th("SVC-SLA", p99_ms=2000, min_rps=40), subject)  # the error rate: any workload
    assert v.status == FAIL and "error rate" in v.reason


def test_sla_request_figures_of_another_workload_are_reported_not_judged(tmp_path):
    [(subject, ev)] = runs_of(submission(tmp_path), "SVC-SLA")
    v = check_mlperf_sla(ev, th("SVC-SLA"), subject)  # B §3.2's 120 ms is for completions of 1-4 tokens
    assert v.status == INCONCLUSIVE and "average 100 output tokens" in v.reason and "ttft_p99_ms" in v.reason
    ttft = check_mlperf_sla(ev, th("SVC-SLA", ttft_p99_ms=500), subject)  # TTFT is judged whatever the workload
    assert ttft.status == PASS and "TTFT P99" in ttft.reason
    late = check_mlperf_sla(ev, th("SVC-SLA", tpot_p99_ms=20), subject)
    assert late.status == FAIL and "TPOT P99" in late.reason


def test_latency_passes_at_a_load_above_the_bound(tmp_path):
    [(subject, ev)] = runs_of(submission(tmp_path), "PLP-LATENCY")  # ρ 5000/6000 = 0.83 >= 0.70
    v = check_mlperf_latency(ev, th("PLP-LATENCY", max_latency_us=50_000), subject)
    assert v.status == PASS and "ρ 0.833" in v.reason


def test_latency_fails_beyond_the_ceiling_within_the_bound(tmp_path):
    root = submission(tmp_path, server={"tokens_per_s": 3000.0})  # ρ 0.5
    [(subject, ev)] = runs_of(root, "PLP-LATENCY")
    v = check_mlperf_latency(ev, th("PLP-LATENCY", max_latency_us=18_300), subject)
    assert v.status == FAIL and "TPOT" in v.reason


def test_latency_beyond_the_ceiling_above_the_bound_decides_nothing(tmp_path):
    [(subject, ev)] = runs_of(submission(tmp_path), "PLP-LATENCY")
    v = check_mlperf_latency(ev, th("PLP-LATENCY", max_latency_us=18_300), subject)
    assert v.status == INCONCLUSIVE and "a lighter load" in v.reason


def test_latency_without_the_offline_run_cannot_place_the_load(tmp_path):
    [(subject, ev)] = runs_of(submission(tmp_path, with_offline=False), "PLP-LATENCY")
    v = check_mlperf_latency(ev, th("PLP-LATENCY", max_latency_us=50_000), subject)
    assert v.status == INCONCLUSIVE and "no Offline run" in v.reason


def test_ppl_fails_when_the_server_run_outdid_the_offline_maximum(tmp_path):
    [(subject, ev)] = runs_of(submission(tmp_path, server={"tokens_per_s": 7000.0}), "PLP-PPL")
    v = check_mlperf_ppl(ev, th("PLP-PPL"), subject)
    assert v.status == FAIL and "ρ 1.17" in v.reason


def test_ppl_reports_the_whole_run_ratio_and_does_not_claim_the_10_ms_window(tmp_path):
    [(subject, ev)] = runs_of(submission(tmp_path), "PLP-PPL")
    v = check_mlperf_ppl(ev, th("PLP-PPL"), subject)
    assert v.status == INCONCLUSIVE and "10 ms windows" in v.reason and v.measured == pytest.approx(0.8333, abs=1e-3)


def test_power_node_ceiling_passes_and_fails(tmp_path):
    [(subject, ev)] = runs_of(submission(tmp_path), "PLP-POWER")
    ok = check_mlperf_power(ev, th("PLP-POWER", max_node_power_w=10_000, at_load_max=0.8), subject)
    assert ok.status == PASS and "tokens per joule" in ok.reason
    lowload = submission(tmp_path / "b", server={"tokens_per_s": 3000.0})
    [(subject, ev)] = runs_of(lowload, "PLP-POWER")
    bad = check_mlperf_power(ev, th("PLP-POWER", max_node_power_w=8_000), subject)
    assert bad.status == FAIL and "node wall power" in bad.reason


def test_power_per_accelerator_ceiling_is_only_an_upper_bound_from_the_node(tmp_path):
    [(subject, ev)] = runs_of(submission(tmp_path), "PLP-POWER")
    v = check_mlperf_power(ev, th("PLP-POWER"), subject)  # 700 W per GPU, node 9 kW: not an accelerator's figure
    assert v.status == INCONCLUSIVE and "8 accelerators declared" in v.reason


def test_power_log_alone_and_a_run_without_one(tmp_path):
    (tmp_path / "spl.txt").write_text(power())
    [(subject, ev)] = runs_of(tmp_path, "PLP-POWER")
    v = check_mlperf_power(ev, th("PLP-POWER", max_node_power_w=10_000), subject)
    assert v.status == INCONCLUSIVE and "matches no run" in v.reason and "max 9006.0 W" in v.reason
    [(subject, ev)] = runs_of(submission(tmp_path / "b", with_power=False), "PLP-POWER")
    assert check_mlperf_power(ev, th("PLP-POWER"), subject).status == SKIP


def test_latency_without_a_ceiling_is_reported(tmp_path):
    [(subject, ev)] = runs_of(submission(tmp_path), "PLP-LATENCY")
    assert check_mlperf_latency(ev, th("PLP-LATENCY", max_latency_us=None), subject).status == WARN


# ---- end to end ----------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_audit_of_a_submission_tree_decides_and_replays(tmp_path, capsys):
    root = submission(tmp_path / "sub", accuracy_text=accuracy(),
                      system_text=system(memory="80 GB", stack="TensorRT 10.8, CUDA 12.8, Driver 570.124.06"))
    prof = tmp_path / "lab.yaml"
    prof.write_text("name: lab\nextends: h100-sxm5\nthresholds:\n  SVC-SLA:\n    p99_ms: 2000\n    min_rps: 40\n"
                    "    workload: {samples: 1000, prompt_tokens: [16, 128], output_tokens: [1, 512]}\n"
                    "  PLP-LATENCY:\n    metric: token\n    max_latency_us: 50000\n"
                    "  PLP-POWER:\n    max_node_power_w: 10000\n    at_load_max: 0.8\n")
    rc = main(["audit", str(root), f"--profile={prof}", f"--report-dir={tmp_path / 'rep'}"])
    out = capsys.readouterr().out
    report = json.loads((tmp_path / "rep" / "sits-report.json").read_text())
    by = {v["requirement"]: v for v in report["verdicts"] if v["subject"].startswith("MLPerf")}
    assert by["SVC-SLA"]["status"] == PASS and by["PLP-LATENCY"]["status"] == PASS
    assert by["PLP-POWER"]["status"] == PASS and by["PLP-PPL"]["status"] == INCONCLUSIVE
    assert "SVC-SLA" in out and rc == 11  # PLP-PPL undecided: the run is not conformant on this evidence alone
    # the systems JSON's declaration: the profile's model and count, the driver's floor, as declared (WARN), never
    # a PASS; 80 GB declared against an 80.1 GB need lies between GB read as 10^9 and as 2^30 bytes
    declared = {v["requirement"]: v for v in report["verdicts"]
                if v["requirement"] in ("INV-DEVICES", "MEM-CAPACITY", "DEP-DRIVER")}
    assert declared["INV-DEVICES"]["status"] == WARN and "as declared in closed/Tests/systems/SYS.json" in \
        declared["INV-DEVICES"]["reason"], declared["INV-DEVICES"]
    assert declared["DEP-DRIVER"]["status"] == WARN and "570.124.06" in declared["DEP-DRIVER"]["reason"]
    assert declared["MEM-CAPACITY"]["status"] in (WARN, INCONCLUSIVE), declared["MEM-CAPACITY"]
    # the accuracy run's scores against llama2-70b-99's targets, naming the file's line
    [acc] = [v for v in report["verdicts"] if v["subject"].startswith("MLPerf accuracy")]
    assert acc["requirement"] == "EQ-PRECISION" and acc["status"] == PASS and "llama2-70b-99" in acc["reason"]
    assert "Server/accuracy/accuracy.txt line 4" in acc["reason"], acc["reason"]
    assert main(["replay", str(tmp_path / "rep" / "sits-report.json")]) == 0, capsys.readouterr()


@pytest.mark.slow
def test_texts_without_accelerators_leave_inference_not_measured_not_an_error(tmp_path, capsys):
    """A profile expecting accelerators and texts that show none and list no machine: the inference requirements
    are not measured (the texts cannot tell), never an ERROR of the fixture."""
    (tmp_path / "dmesg.txt").write_text("[    5.000000] EXT4-fs (sda3): mounted filesystem\n"
                                        "[    6.000000] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  570.133.20\n"
                                        "[    7.000000] systemd[1]: started\n")
    rc = main(["audit", str(tmp_path / "dmesg.txt"), "--profile=h100", "--level=standard",
               f"--json={tmp_path / 'v.json'}"])
    capsys.readouterr()
    verdicts = json.loads((tmp_path / "v.json").read_text())
    assert not [v for v in verdicts if v["status"] == "ERROR"], [v["reason"] for v in verdicts if v["status"] == "ERROR"]
    sample = [v for v in verdicts if v["requirement"] == "PLP-SAMPLE"]
    assert sample and all(v["status"] == "SKIP" and "not measured" in v["reason"] for v in sample), sample
    assert rc == 11


def test_compliance_audit_runs_are_not_judged(tmp_path):
    root = submission(tmp_path)
    audit = root / "closed" / "Tests" / "compliance" / "SYS" / "llama2-70b-99" / "Server" / "TEST06"
    audit.mkdir(parents=True)
    (audit / "mlperf_log_summary.txt").write_text(summary(p99_ns=10))
    runs = runs_of(root, "SVC-SLA")
    assert [s for s, _ in runs] == ["MLPerf Server closed/Tests/results/SYS/llama2-70b-99/Server/performance/run_1"]


def test_percentiles_out_of_order_decide_nothing(tmp_path):
    text = summary().replace("99.90 percentile latency (ns)   : 945000000", "99.90 percentile latency (ns)   : 800000000")
    assert "800000000" in text
    (tmp_path / "s.txt").write_text(text)
    [(subject, ev)] = runs_of(tmp_path, "SVC-SLA")
    v = check_mlperf_sla(ev, th("SVC-SLA", p99_ms=2000, min_rps=40, workload=wl()), subject)
    assert v.status == INCONCLUSIVE and "out of order" in v.reason


def test_failed_power_readings_are_dropped_and_a_cut_log_decides_nothing(tmp_path):
    root = submission(tmp_path)
    spl = root / "closed" / "Tests" / "results" / "SYS" / "llama2-70b-99" / "Server" / "performance" / "run_1" / "spl.txt"
    lines = [ln for ln in spl.read_text().splitlines() if ln]

    def fail(ln: str) -> str:
        parts = ln.split(",")
        parts[3] = "-1.000000"
        return ",".join(parts)
    failed = [fail(ln) if i % 3 == 0 else ln for i, ln in enumerate(lines)]
    spl.write_text("\n".join(failed) + "\n")
    [(subject, ev)] = runs_of(root, "PLP-POWER")
    assert ev["power"]["dropped"] > 100 and ev["power"]["min_w"] > 0  # -1 W is a failed reading, not a figure
    v = check_mlperf_power(ev, th("PLP-POWER", max_node_power_w=10_000, at_load_max=0.8), subject)
    assert v.status == INCONCLUSIVE and "cover" in v.reason  # a third of the window's readings failed
    spl.write_text("\n".join(lines[:300]) + "\n")  # cut 3 minutes into the 10-minute window
    [(subject, ev)] = runs_of(root, "PLP-POWER")
    v = check_mlperf_power(ev, th("PLP-POWER", max_node_power_w=10_000, at_load_max=0.8), subject)
    assert v.status == INCONCLUSIVE and "cover" in v.reason


def test_an_invalid_offline_run_gives_no_load(tmp_path):
    root = submission(tmp_path, offline={"result": "INVALID", "min_duration_met": "No"})
    [(subject, ev)] = runs_of(root, "PLP-LATENCY")
    v = check_mlperf_latency(ev, th("PLP-LATENCY", max_latency_us=50_000), subject)
    assert v.status == INCONCLUSIVE and "not VALID" in v.reason


def test_a_power_submissions_ranging_run_is_not_judged(tmp_path):
    root = submission(tmp_path)
    run = root / "closed" / "Tests" / "results" / "SYS" / "llama2-70b-99" / "Server" / "performance"
    (run / "ranging").mkdir()
    for f in (run / "run_1").iterdir():
        (run / "ranging" / f.name).write_bytes(f.read_bytes())
    assert len(runs_of(root, "SVC-SLA")) == 1 and len(runs_of(root, "PLP-POWER")) == 1


def test_a_summary_and_a_detail_log_of_different_runs_decide_nothing(tmp_path):
    (tmp_path / "mlperf_log_summary.txt").write_text(summary())
    (tmp_path / "mlperf_log_detail.txt").write_text(detail(samples_per_s=80.0))  # another run's rate
    [(subject, ev)] = runs_of(tmp_path, "SVC-SLA")
    v = check_mlperf_sla(ev, th("SVC-SLA", p99_ms=2000, min_rps=40, workload=wl()), subject)
    assert v.status == INCONCLUSIVE and "not one run's" in v.reason


def test_a_query_count_and_rate_that_cannot_be_one_run_decide_nothing(tmp_path):
    """30,000 queries at 80 completed per second ran 375 s, shorter than the 600 s minimum the run says it met: the
    rate (or the count) was edited, or two runs' lines mixed; consistent in both files, still not one run."""
    root = submission(tmp_path, server={"samples_per_s": 80.0})
    [(subject, ev)] = runs_of(root, "SVC-SLA")
    v = check_mlperf_sla(ev, th("SVC-SLA", p99_ms=2000, min_rps=40, workload=wl()), subject)
    assert v.status == INCONCLUSIVE and "is 375 s of running, shorter than the 600 s minimum" in v.reason, v.reason
    (tmp_path / "ok").mkdir()
    [(subject, ev)] = runs_of(submission(tmp_path / "ok"), "SVC-SLA")  # 30,000 at 50/s: 600 s, consistent
    assert not ev["run"].get("inconsistent")
    assert check_mlperf_sla(ev, th("SVC-SLA", p99_ms=2000, min_rps=40, workload=wl()), subject).status == PASS


def test_a_tree_of_several_organisations_says_a_report_is_about_one_machine(tmp_path):
    one = submission(tmp_path / "a")
    notes = EvidencePlatform(one).inventory()["submitted"]["notes"]
    assert not any("submissions of" in n for n in notes), notes
    both = tmp_path / "b"
    submission(both)
    other = both / "closed" / "OtherOrg"
    (both / "closed" / "Tests").rename(both / "closed" / "Tmp")
    submission(both)  # closed/Tests again, beside it the same files under another organisation
    (both / "closed" / "Tmp").rename(other)
    notes = EvidencePlatform(both).inventory()["submitted"]["notes"]
    said = [n for n in notes if "submissions of 2 systems" in n]
    assert said and "OtherOrg/SYS" in said[0] and "Tests/SYS" in said[0] and "audit one system's folder" in said[0]


# ---- accuracy.txt (EQ-PRECISION) -----------------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    accuracy(),
    accuracy(preamble="Processed 5000 in 130.3s\n 59.90% pass@1\n{'typescript': 443, 'ruby': 400}\n"),
    "accuracy=76.214%, good=38107, total=50000\nhash=" + "ab" * 32 + "\n",
    "{\"exact_match\": 83.912, \"f1\": 90.903}\nhash=" + "cd" * 32 + "\n",
    "Accuracy: mean = 0.86311, kidney = 0.9352, tumor = 0.7910\nhash=" + "ef" * 32 + "\n",
    "Word Error Rate: 2.1102%, accuracy=97.8898%\nhash=" + "01" * 32 + "\n",
])
def test_accuracy_txt_is_told_from_its_content_and_its_scores_read(text):
    from pytest_sits.probes.readers.mlperf import parse_accuracy

    assert classify(text)[0] == "mlperf-accuracy"
    facts = parse_accuracy(text)["accuracy"]
    assert facts["hash_line"] is not None and facts["metrics"]
    if "rouge1" in text:
        assert facts["metrics"]["rouge1"] == {"value": ACCURACY["rouge1"], "line": text.splitlines().index(
            repr(ACCURACY)) + 1, "others": []}


def test_a_text_with_a_hash_and_no_score_is_not_taken_for_accuracy():
    assert classify("some log\nhash=" + "ab" * 32 + "\n")[0] is None


@pytest.mark.parametrize("path, bench", [
    ("closed/X/results/S/llama2-70b-99.9/Server/accuracy/accuracy.txt", "llama2-70b-99.9"),
    ("closed/X/results/S/llama2-70b-99/Offline/accuracy/accuracy.txt", "llama2-70b-99"),
    ("closed/X/results/S/llama3_1-8b/Offline/accuracy/accuracy.txt", "llama3.1-8b"),
    ("vendor-llama2-70b-99-server-accuracy.txt", "llama2-70b-99"),
    ("vendor-mixtral-8x7b-offline-accuracy.txt", "mixtral-8x7b"),
    ("accuracy.txt", None),
])
def test_the_benchmark_of_an_accuracy_file_is_told_from_its_path(path, bench):
    from pytest_sits.catalogue.mlperf import benchmark_in

    assert benchmark_in(path)[0] == bench


def test_a_compliance_audits_accuracy_is_not_judged(tmp_path):
    from pytest_sits.conditions.inference.mlperf import accuracy_evidence

    root = submission(tmp_path / "s", accuracy_text=accuracy())
    t06 = root / "closed" / "Tests" / "compliance" / "SYS" / "llama2-70b-99" / "Server" / "TEST06" / "accuracy"
    t06.mkdir(parents=True)
    (t06 / "accuracy.txt").write_text(accuracy({"rouge1": 10.0}))
    runs = accuracy_evidence(EvidencePlatform(root).inventory())
    assert runs is not None and [ev["file"] for _, ev in runs] == [
        "closed/Tests/results/SYS/llama2-70b-99/Server/accuracy/accuracy.txt"]


# ---- the systems JSON's declaration (INV-DEVICES, MEM-CAPACITY, DEP-DRIVER) -----------------------------------

@pytest.mark.parametrize("name, model, vendor, says", [
    ("NVIDIA H100-SXM-80GB", "H100 SXM5", "NVIDIA", True),
    ("NVIDIA H200-SXM-141GB", "H200", "NVIDIA", True),
    ("NVIDIA H100-SXM-80GB", "H200", "NVIDIA", False),
    ("NVIDIA H100-PCIe-80GB", "H100 SXM5", "NVIDIA", False),
    ("NVIDIA H100 80GB HBM3", "H100 SXM5", "NVIDIA", None),
    ("AMD Instinct MI300X-NPS1-SPX-192GB-750W", "Instinct MI300X", "AMD", True),
    ("AMD Instinct MI300X 192GB", "H100 SXM5", "NVIDIA", False),
    ("NVIDIA H20", "H200", "NVIDIA", False),
    ("GPU accelerator", "H200", "NVIDIA", None),
    ("NVIDIA H200-NVL-141GB", "H200", "NVIDIA", True),  # no form factor in the model alone (see the aliases below)
    ("NVIDIA L40S-PCIe-48GB", "L40S", "NVIDIA", True),
    ("AMD Instinct MI300X-OAM-192GB", "Instinct MI300X", "AMD", True),
    ("NVIDIA GH200-GraceHopper-Superchip", "H100 SXM5", "NVIDIA", False),
    ("NVIDIA L40S", "L40S", "NVIDIA", True),
])
def test_a_declared_model_is_compared_by_vendor_model_number_and_form_factor(name, model, vendor, says):
    from pytest_sits.checks.inventory import declared_model

    assert declared_model(name, {"model": model, "vendor": vendor})[0] is says


@pytest.mark.parametrize("name, says", [("NVIDIA H200-SXM-141GB", True), ("NVIDIA H200-NVL-141GB", False)])
def test_the_profiles_aliases_give_the_form_factor_its_model_does_not(name, says):
    from pytest_sits.checks.inventory import declared_model

    names = resolve("h200").lineage_names()
    assert "h200-sxm" in names
    assert declared_model(name, {"model": "H200", "vendor": "NVIDIA"}, names)[0] is says


def test_readings_decide_and_a_declaration_of_another_system_is_named_and_its_runs_not_judged(tmp_path):
    """nvidia-smi -q of eight H100 beside a submission whose systems JSON declares H200: INV-DEVICES keeps the
    readings' decision, lowered to WARN naming the declaration; the submission's runs are not judged as this
    machine's."""
    from pytest_sits.checks.inventory import check_devices
    from pytest_sits.conditions.inference.mlperf import accuracy_evidence
    from pytest_sits.conditions.inventory import acquire_devices
    from samples import _profile

    data = Path(__file__).resolve().parent / "data"
    root = submission(tmp_path / "s", system_text=system(model="NVIDIA H200-SXM-141GB"), accuracy_text=accuracy())
    (root / "q.txt").write_text((data / "nvidia-smi-q-h100-570.txt").read_text())
    inv = EvidencePlatform(root).inventory()
    exp, prof = _profile("h100")
    v = check_devices(acquire_devices(inv), dict(prof.thresholds("INV-DEVICES"), expected=exp), "accelerators")
    assert v.status == WARN, v.reason
    assert "the MLPerf systems JSON closed/Tests/systems/SYS.json declares the model 'NVIDIA H200-SXM-141GB'" in v.reason
    assert "(the readings decide)" in v.reason
    [(_, ev)] = evidence(inv, "SVC-SLA")
    assert "of another system than the machine the readings show" in ev["unavailable"]
    [(_, acc)] = accuracy_evidence(inv)
    assert "unavailable" in acc
    # the same readings beside a declaration of their own model: nothing said, the runs judged
    root2 = submission(tmp_path / "t", system_text=system(model="NVIDIA H100-SXM-80GB"))
    (root2 / "q.txt").write_text((data / "nvidia-smi-q-h100-570.txt").read_text())
    inv2 = EvidencePlatform(root2).inventory()
    v2 = check_devices(acquire_devices(inv2), dict(prof.thresholds("INV-DEVICES"), expected=exp), "accelerators")
    assert v2.status == PASS and "systems JSON" not in v2.reason, v2.reason
    assert "unavailable" not in evidence(inv2, "SVC-SLA")[0][1]


@pytest.mark.slow
def test_audit_picks_the_declared_models_profile_or_names_it_and_profile_init_writes_one(tmp_path, capsys):
    h200 = submission(tmp_path / "h200", system_text=system(model="NVIDIA H200-SXM-141GB", memory="141 GB",
                                                              stack="CUDA 12.8, Driver 570.124.06"))
    rc = main(["audit", str(h200), f"--json={tmp_path / 'v.json'}"])
    out = capsys.readouterr().out
    assert "profile:  h200 (the MLPerf systems JSON declares 8 × NVIDIA H200-SXM-141GB" in out, out[:600]
    inv = [v for v in json.loads((tmp_path / "v.json").read_text()) if v["requirement"] == "INV-DEVICES"]
    assert [v["status"] for v in inv] == [WARN] and rc in (0, 10, 11)
    other = submission(tmp_path / "b60", system_text=system(model="Intel Arc Pro B60", count=4, memory="24 GB"))
    assert main(["audit", str(other)]) == 4
    err = capsys.readouterr().err
    assert "declares 4 × Intel Arc Pro B60" in err and "no bundled profile is for that model" in err, err
    assert f"sits profile init --from={other}" in err
    assert main(["profile", "init", f"--from={other}", f"--out={tmp_path / 'b60.yaml'}"]) == 0
    text = (tmp_path / "b60.yaml").read_text()
    assert 'model: "Intel Arc Pro B60"' in text and "count: 4" in text and "memory_gb: 24" in text
    assert "as DECLARED in the" in text and "systems/SYS.json line" in text
    capsys.readouterr()
    rc = main(["audit", str(other), f"--profile={tmp_path / 'b60.yaml'}", f"--json={tmp_path / 'w.json'}"])
    inv = [v for v in json.loads((tmp_path / "w.json").read_text()) if v["requirement"] == "INV-DEVICES"]
    assert [v["status"] for v in inv] == [WARN], inv
    # a model a bundled profile is for: the profile written extends it (its PCI IDs match a reading)
    assert main(["profile", "init", f"--from={h200}", f"--out={tmp_path / 'h200x8.yaml'}"]) == 0
    assert "extends: h200\n" in (tmp_path / "h200x8.yaml").read_text()
    # a sibling system's JSON in the submitter's systems/ folder: the one whose results were submitted declares
    (h200 / "closed" / "Tests" / "systems" / "OTHER.json").write_text(system(model="NVIDIA H100-SXM-80GB"))
    capsys.readouterr()
    main(["audit", str(h200), f"--json={tmp_path / 'v2.json'}"])
    assert "profile:  h200 (the MLPerf systems JSON declares 8 × NVIDIA H200-SXM-141GB" in capsys.readouterr().out
    # two systems JSONs of different systems and no result to tell which: no profile is picked from them
    both = tmp_path / "both" / "closed" / "Tests" / "systems"
    both.mkdir(parents=True)
    (both / "A.json").write_text(system(model="NVIDIA H100-SXM-80GB"))
    (both / "B.json").write_text(system(model="NVIDIA H200-SXM-141GB"))
    assert main(["audit", str(tmp_path / "both")]) == 4
    assert "declare different systems in" in capsys.readouterr().err
    # a CPU-only system: the host profile
    cpu = submission(tmp_path / "cpu", system_text=system(model="N/A", count=0))
    assert main(["audit", str(cpu), f"--json={tmp_path / 'c.json'}"]) in (0, 10, 11)
    assert "profile:  host (the MLPerf systems JSON declares no accelerator" in capsys.readouterr().out


def test_the_load_of_a_benchmark_without_tokens_is_its_samples_per_second(tmp_path):
    """A non-LLM benchmark (ResNet, BERT...) logs no token rate: ρ is the Server run's completed samples per second
    over the Offline run's, and PLP-LATENCY decides on the request P99 at that load."""
    [(subject, ev)] = runs_of(submission(tmp_path), "PLP-LATENCY")
    ev["run"]["tokens_per_s"] = ev["offline"]["tokens_per_s"] = None
    v = check_mlperf_latency(ev, th("PLP-LATENCY", metric="query", max_latency_us=2_000_000, at_load_max=0.8),
                             subject)
    assert "ρ 0.833: the Server run's 50 samples/s over the Offline run's 60" in v.reason, v.reason
    assert v.status == PASS and v.evidence["rho"] == pytest.approx(50 / 60)


@pytest.mark.parametrize("text, path, status", [
    ("accuracy=76.402%, good=38201, total=50000", "r/S/resnet/Offline/accuracy/accuracy.txt", PASS),
    ("accuracy=75.102%, good=37551, total=50000", "r/S/resnet/Offline/accuracy/accuracy.txt", FAIL),
    ("Accuracy: mean = 0.86102, kidney = 0.9339, tumor = 0.7881", "r/S/3d-unet-99.9/Offline/accuracy/accuracy.txt",
     PASS),
    ("Accuracy: mean = 0.86002, kidney = 0.9329, tumor = 0.7871", "r/S/3d-unet-99.9/Offline/accuracy/accuracy.txt",
     FAIL),
])
def test_one_line_scores_of_other_benchmarks_are_held_to_their_targets(text, path, status):
    from pytest_sits.checks.equivalence import check_mlperf_accuracy
    from pytest_sits.conditions.inference.mlperf import accuracy_evidence
    from pytest_sits.probes.readers.mlperf import parse_accuracy

    facts = parse_accuracy(text + "\nhash=" + "9a" * 32 + "\n")["accuracy"]
    [(subject, ev)] = accuracy_evidence({"submitted": {"mlperf": {"accuracy": [dict(facts, file=path)]}}})
    v = check_mlperf_accuracy(ev, resolve("h100").thresholds("EQ-PRECISION"), subject)
    assert v.status == status, v.reason


def _judge_accuracy(text, path):
    from pytest_sits.checks.equivalence import check_mlperf_accuracy
    from pytest_sits.conditions.inference.mlperf import accuracy_evidence
    from pytest_sits.probes.readers.mlperf import parse_accuracy

    facts = parse_accuracy(text)["accuracy"]
    [(subject, ev)] = accuracy_evidence({"submitted": {"mlperf": {"accuracy": [dict(facts, file=path)]}}})
    return check_mlperf_accuracy(ev, resolve("h100").thresholds("EQ-PRECISION"), subject)


HASH = "\nhash=" + "5e" * 32 + "\n"
LLAMA = "r/S/llama2-70b-99.9/Server/accuracy/accuracy.txt"


def test_rgats_percentage_is_held_to_its_reference_as_a_percentage():
    path = "r/S/rgat/Offline/accuracy/accuracy.txt"
    assert _judge_accuracy("accuracy=72.911%, good=574823, total=788379" + HASH, path).status == PASS
    assert _judge_accuracy("accuracy=5.000%, good=39418, total=788379" + HASH, path).status == FAIL


def test_a_score_that_is_not_a_finite_number_is_refused_naming_the_line():
    from pytest_sits.probes.readers.mlperf import parse_accuracy
    from pytest_sits.probes.readers.text import TextEvidenceError

    with pytest.raises(TextEvidenceError, match="line 2: rouge1 1e999 is not a finite score"):
        parse_accuracy("Results\n" + repr(ACCURACY).replace("44.4517", "1e999") + HASH)
    with pytest.raises(TextEvidenceError, match="line 1: rouge2 nan is not a finite score"):
        parse_accuracy(repr(ACCURACY).replace("22.0731", "nan") + HASH)
    # numpy 2 prints a score as np.float64(...): read as the number
    facts = parse_accuracy(repr(ACCURACY).replace("44.4517", "np.float64(44.4517)") + HASH)["accuracy"]
    assert facts["metrics"]["rouge1"]["value"] == 44.4517


def test_a_score_far_above_the_reference_is_not_judged():
    v = _judge_accuracy(repr(dict(ACCURACY, rouge1=4445.17)) + HASH, LLAMA)
    assert v.status == INCONCLUSIVE and "another unit or format" in v.reason, v.reason


def test_scores_of_fewer_samples_than_the_dataset_decide_nothing():
    v = _judge_accuracy(repr(dict(ACCURACY, gen_num=10)) + HASH, LLAMA)
    assert v.status == INCONCLUSIVE and "10 samples (gen_num" in v.reason and "covers its 24576" in v.reason
    v = _judge_accuracy("accuracy=77.000%, good=77, total=100" + HASH, "r/S/resnet/Offline/accuracy/accuracy.txt")
    assert v.status == INCONCLUSIVE and "100 samples (total" in v.reason, v.reason
    # nor against it: a partial run's low score is no FAIL
    v = _judge_accuracy("accuracy=70.000%, good=70, total=100" + HASH, "r/S/resnet/Offline/accuracy/accuracy.txt")
    assert v.status == INCONCLUSIVE, v.reason
    # every line's count and score is looked at, not the first one's
    v = _judge_accuracy(repr(ACCURACY) + "\n" + repr(dict(ACCURACY, gen_num=100)) + HASH, LLAMA)
    assert v.status == INCONCLUSIVE and "100 samples (gen_num" in v.reason, v.reason
    v = _judge_accuracy(repr(ACCURACY) + "\n" + repr(dict(ACCURACY, rouge1=4444.65)) + HASH, LLAMA)
    assert v.status == INCONCLUSIVE and "another unit or format" in v.reason, v.reason


def test_an_open_division_score_below_the_closed_target_is_not_judged_against_it():
    v = _judge_accuracy(repr(dict(ACCURACY, rouge1=40.0)) + HASH, "open/Org/results/S/llama2-70b-99/Offline/accuracy/"
                                                                 "accuracy.txt")
    assert v.status == INCONCLUSIVE and "open-division" in v.reason, v.reason
    v = _judge_accuracy(repr(dict(ACCURACY, rouge1=40.0)) + HASH, "closed/Org/results/S/llama2-70b-99/Offline/"
                                                                 "accuracy/accuracy.txt")
    assert v.status == FAIL


def test_every_line_that_gives_a_score_is_held_to_its_target():
    text = repr(ACCURACY) + "\n" + repr(dict(ACCURACY, rouge1=30.0)) + HASH
    v = _judge_accuracy(text, LLAMA)
    assert v.status == FAIL and "rouge1 30 below its target" in v.reason and "line 2" in v.reason, v.reason


def test_sdxls_scores_after_a_prefix_are_read_and_held_to_their_ranges():
    path = "r/S/stable-diffusion-xl/Offline/accuracy/accuracy.txt"
    good = "Accuracy Results: {'FID_SCORE': '23.4187', 'CLIP_SCORE': '31.7512'}" + HASH
    assert classify(good)[0] == "mlperf-accuracy"
    assert _judge_accuracy(good, path).status == PASS
    assert _judge_accuracy(good.replace("23.4187", "24.9102"), path).status == FAIL


def test_whisper_is_held_to_its_target():
    path = "r/S/whisper/Offline/accuracy/accuracy.txt"
    assert _judge_accuracy("Word Error Rate: 2.1102%, accuracy=97.8898%" + HASH, path).status == PASS
    assert _judge_accuracy("Word Error Rate: 4.9102%, accuracy=95.0898%" + HASH, path).status == FAIL


def test_the_benchmark_is_the_folder_above_the_scenario_whatever_the_system_is_called():
    from pytest_sits.catalogue.mlperf import benchmark_in

    assert benchmark_in("results/8xH200_bert-99_tuned/yolo-99/Offline/accuracy/accuracy.txt") == ("yolo-99", "yolo-99")
    v = _judge_accuracy("mAP=53.100%" + HASH, "results/8xH200_bert-99_tuned/yolo-99/Offline/accuracy/accuracy.txt")
    assert v.status == INCONCLUSIVE and "no accuracy target is known here for the benchmark yolo-99" in v.reason


@pytest.mark.parametrize("a, b, same", [
    ("NVIDIA H100-SXM-80GB", "GH100 [H100 SXM5 80GB]", True),
    ("NVIDIA H100 NVL", "GH100 [H100L 94GB]", True),
    ("NVIDIA B200-SXM-180GB", "GB100 [B200]", True),
    ("NVIDIA H800", "NVIDIA H100 80GB HBM3", False),
    ("NVIDIA H200-SXM-141GB", "GH100", None),
    ("NVIDIA GeForce RTX 4090", "AD102 [GeForce RTX 4090]", None),
])
def test_two_texts_names_of_a_gpu_are_one_model_unless_their_model_numbers_differ(a, b, same):
    from pytest_sits.probes.readers.base import same_model

    assert same_model(a, b) is same


def test_an_lspci_reading_of_the_declared_model_is_no_contradiction(tmp_path):
    from pytest_sits.conditions.inventory import declaration_contradicts

    root = submission(tmp_path / "s", system_text=system(model="NVIDIA H100-SXM-80GB"))
    (root / "lspci.txt").write_text("".join(f"{b}:00.0 3D controller [0302]: NVIDIA Corporation GH100 [H100 SXM5 80GB] "
                                            f"[10de:2330] (rev a1)\n" for b in ("18", "2a", "3a", "5d")))
    inv = EvidencePlatform(root).inventory()
    assert len(inv["accelerators"]) == 4 and declaration_contradicts(inv) is None
    assert "unavailable" not in evidence(inv, "SVC-SLA")[0][1]
