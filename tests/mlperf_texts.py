"""MLPerf Inference submission files written for the tests, in LoadGen's and PTDaemon's layouts (the figures are
these tests' own): a summary, a detail log, a systems JSON and a power log, and a submission tree of them."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Dict, Optional

BAR = "=" * 48


def summary(scenario: str = "Server", result: str = "VALID", samples_per_s: float = 50.0,
            tokens_per_s: float = 5000.0, p99_ns: int = 900_000_000, ttft_p99_ns: int = 300_000_000,
            tpot_p99_ns: int = 40_000_000, min_duration_met: str = "Yes", errors: int = 0,
            min_duration_ms: int = 600_000) -> str:
    """A LoadGen ``mlperf_log_summary.txt``; percentiles spread around the P99 given."""
    def pct(name: str, p99: int) -> str:
        return "\n".join(f"{q} percentile {name} (ns)   : {int(p99 * f)}"
                         for q, f in (("50.00", 0.5), ("90.00", 0.8), ("95.00", 0.9), ("97.00", 0.95),
                                      ("99.00", 1.0), ("99.90", 1.05)))
    server = scenario == "Server"
    head = [BAR, "MLPerf Results Summary", BAR, "SUT name : TestSUT", f"Scenario : {scenario}",
            "Mode     : PerformanceOnly"]
    if server:
        head += [f"Completed samples per second    : {samples_per_s}", f"Completed tokens per second: {tokens_per_s}"]
    else:
        head += [f"Samples per second: {samples_per_s}", f"Tokens per second: {tokens_per_s}"]
    head += [f"Result is : {result}"]
    if server:
        head += ["  Performance constraints satisfied : Yes"]
    head += [f"  Min duration satisfied : {min_duration_met}", "  Min queries satisfied : Yes",
             "  Early stopping satisfied: Yes"]
    if server:
        head += ["TTFT Early Stopping Result:", " * Run successful.", "TPOT Early Stopping Result:", " * Run successful."]
    stats = ["", BAR, "Additional Stats", BAR]
    if server:
        stats += [f"Scheduled samples per second : {samples_per_s * 1.004:.2f}"]
    stats += ["Min latency (ns)                : 1000", pct("latency", p99_ns), ""]
    if server:
        stats += [f"Completed tokens per second                 : {tokens_per_s}", pct("first token latency", ttft_p99_ns),
                  "", pct("time to output token", tpot_p99_ns), ""]
    params = [BAR, "Test Parameters Used", BAR, "samples_per_query : 1" if server else "samples_per_query : 24576",
              f"target_qps : {samples_per_s}", "ttft_latency (ns): 2000000000", "tpot_latency (ns): 200000000",
              f"min_duration (ms): {min_duration_ms}", "min_query_count : 100", "performance_sample_count : 24576",
              "WARNING: sample_concatenate_permutation was set to true. ",
              "Generated samples per query might be different as the one in the setting.", "",
              "No warnings encountered during test.", "",
              "No errors encountered during test." if not errors else f"{errors} ERRORS encountered. See detailed log."]
    return "\n".join(head + stats + params) + "\n"


def _mllog(key: str, value: Any, error: bool = False) -> str:
    return ":::MLLOG " + json.dumps({"key": key, "value": value, "time_ms": 1.0, "namespace": "mlperf::logging",
                                     "event_type": "POINT_IN_TIME",
                                     "metadata": {"is_error": error, "is_warning": False, "file": "loadgen.cc",
                                                  "line_no": 1, "pid": 1, "tid": 1}})


def detail(scenario: str = "Server", samples_per_s: float = 50.0, tokens_per_s: float = 5000.0,
           queries: int = 30_000, p99_ns: int = 900_000_000, tpot_p99_ns: int = 40_000_000,
           begin: str = "01-02-2026 10:00:00.000", end: str = "01-02-2026 10:10:00.000", result: str = "VALID",
           min_duration_met: str = "Yes") -> str:
    """A LoadGen ``mlperf_log_detail.txt`` (``:::MLLOG`` lines, one of them 200 KB long as the QSL set is)."""
    lines = [_mllog("loadgen_version", "5.1.0 @ 0123456789"), _mllog("test_datetime", "2026-01-02T10:00:00Z"),
             _mllog("sut_name", "TestSUT"), _mllog("effective_scenario", scenario),
             _mllog("effective_test_mode", "PerformanceOnly"), _mllog("effective_target_qps", samples_per_s),
             _mllog("effective_min_duration_ms", 600000), _mllog("effective_min_query_count", 100),
             _mllog("requested_server_ttft_latency", 2000000000), _mllog("requested_server_tpot_latency", 200000000),
             _mllog("loaded_qsl_set", list(range(40000))), _mllog("generated_query_count", queries),
             _mllog("power_begin", begin), _mllog("power_end", end), _mllog("result_validity", result),
             _mllog("result_perf_constraints_met", True), _mllog("result_min_duration_met", min_duration_met == "Yes"),
             _mllog("result_min_queries_met", True), _mllog("early_stopping_met", True),
             _mllog("result_query_count", queries), _mllog("result_overlatency_query_count", queries),
             _mllog("result_completed_samples_per_sec", samples_per_s),
             _mllog("result_completed_tokens_per_second", tokens_per_s), _mllog("result_token_throughput", 4.2e-09)]
    for q, f in (("50.00", 0.5), ("97.00", 0.95), ("99.00", 1.0), ("99.90", 1.05)):
        lines.append(_mllog(f"result_{q}_percentile_latency_ns", int(p99_ns * f)))
        lines.append(_mllog(f"result_time_per_output_token_{q}_percentile_ns", int(tpot_p99_ns * f)))
    return "\n".join(lines) + "\n"


def system(count: Any = 8, model: str = "NVIDIA H100-SXM-80GB", memory: Optional[str] = None,
           stack: Optional[str] = None) -> str:
    """A systems JSON; ``memory`` (accelerator_memory_capacity, "80 GB") and ``stack`` (other_software_stack,
    "TensorRT 10.8, CUDA 12.8, Driver 570.124.06") where given."""
    data: Dict[str, Any] = {"system_name": "Test system (8x H100)", "submitter": "Tests", "division": "closed",
                            "accelerator_model_name": model, "accelerators_per_node": count,
                            "accelerator_interconnect": "NVLink", "cooling": "air", "status": "available"}
    if memory is not None:
        data["accelerator_memory_capacity"] = memory
    if stack is not None:
        data["other_software_stack"] = stack
    return json.dumps(data, indent=4)


#: An accuracy run's scores for llama2-70b (values of our own, near the reference's).
ACCURACY = {"rouge1": 44.4517, "rouge2": 22.0731, "rougeL": 28.6402, "rougeLsum": 42.0977, "gen_len": 28915362,
            "gen_num": 24576, "gen_tok_len": 7231119, "tokens_per_sample": 294.2}


def accuracy(scores: Optional[Dict[str, Any]] = None, with_hash: bool = True, preamble: str = "") -> str:
    """accuracy.txt as the llama2-70b accuracy script writes it: "Results", the Python dict of the scores, the hash
    of the accuracy log."""
    text = preamble + "\nResults\n\n" + repr(dict(scores if scores is not None else ACCURACY)) + "\n\n"
    return text + ("hash=" + "3c" * 32 + "\n" if with_hash else "")


def power(start: str = "01-02-2026 09:58:00.000", seconds: int = 900, idle_w: float = 3000.0,
          load_w: float = 9000.0, load_from: str = "01-02-2026 10:00:00.000",
          load_to: str = "01-02-2026 10:10:00.000") -> str:
    """PTDaemon's ``spl.txt``: one sample a second, ``load_w`` within [load_from, load_to], ``idle_w`` outside."""
    fmt = "%m-%d-%Y %H:%M:%S.%f"
    t0, lo, hi = (datetime.strptime(x, fmt) for x in (start, load_from, load_to))
    out = []
    for i in range(seconds):
        t = t0 + timedelta(seconds=i)
        w = load_w + (i % 7) if lo <= t <= hi else idle_w
        stamp = t.strftime(fmt)[:-3]
        out.append(f"Time,{stamp},Watts,{w:.6f},Volts,230.0,Amps,{w / 230:.3f},PF,0.98,Mark,test_run,"
                   f"Ch1,Watts,{w / 3:.6f},Volts,230.0,Amps,1.0,PF,0.98,Ch2,Watts,{w / 3:.6f},Volts,230.0,Amps,1.0,"
                   f"PF,0.98,Ch3,Watts,{w / 3:.6f},Volts,230.0,Amps,1.0,PF,0.98")
    return "\n".join(out) + "\n\n"


def submission(root: Path, server: Optional[Dict[str, Any]] = None, offline: Optional[Dict[str, Any]] = None,
               with_power: bool = True, with_offline: bool = True, accuracy_text: Optional[str] = None,
               system_text: Optional[str] = None) -> Path:
    """A submission tree under ``root``: ``closed/Tests/results/SYS/llama2-70b-99/{Server,Offline}/performance/
    run_1`` with each run's summary and detail log, the Server run's ``spl.txt``, ``systems/SYS.json``
    (``system_text`` where given) and, where given, ``Server/accuracy/accuracy.txt``."""
    server, offline = dict(server or {}), dict(offline or {})
    base = root / "closed" / "Tests" / "results" / "SYS" / "llama2-70b-99"
    s = base / "Server" / "performance" / "run_1"
    s.mkdir(parents=True)
    dkeys = ("samples_per_s", "tokens_per_s", "p99_ns", "tpot_p99_ns", "result", "min_duration_met")
    (s / "mlperf_log_summary.txt").write_text(summary("Server", **server))
    (s / "mlperf_log_detail.txt").write_text(detail("Server", **{k: v for k, v in server.items() if k in dkeys}))
    if with_power:
        (s / "spl.txt").write_text(power())
    if with_offline:
        o = base / "Offline" / "performance" / "run_1"
        o.mkdir(parents=True)
        offline = dict({"samples_per_s": 60.0, "tokens_per_s": 6000.0, "p99_ns": 2_000_000_000_000}, **offline)
        (o / "mlperf_log_summary.txt").write_text(summary("Offline", **offline))
        (o / "mlperf_log_detail.txt").write_text(detail("Offline", **{k: v for k, v in offline.items() if k in dkeys}))
    (root / "closed" / "Tests" / "systems").mkdir(parents=True)
    (root / "closed" / "Tests" / "systems" / "SYS.json").write_text(system_text or system())
    if accuracy_text is not None:
        (base / "Server" / "accuracy").mkdir(parents=True)
        (base / "Server" / "accuracy" / "accuracy.txt").write_text(accuracy_text)
    return root
