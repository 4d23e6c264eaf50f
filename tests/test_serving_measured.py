"""The PLP-* sweep, SVC-FRAG and SVC-COLDSTART measured on the server under test (--sits-serve, --sits-endpoint):
the server's /metrics read as vLLM publishes it, fragmentation from its KV usage against what the client held,
the phases a server prints while it starts, and whole runs against the simulated serving stack."""

from __future__ import annotations

import json
import sys

import pytest

from pytest_sits.checks.inference import check_coldstart, check_frag
from pytest_sits.conditions.inference.served import held_at, served_frag, work_of
from pytest_sits.inference.launch import log_phases
from pytest_sits.inference.metrics import MetricsPoller, MetricsUnavailable, cache_layout, parse, stack_of
from pytest_sits.inference.servers import ScriptedServer

from helpers import run_pytest

# one engine step every 20 ms: the client's view holds still between steps, as a batching engine's does
SIM = f"{sys.executable} -m pytest_sits.inference.simserve --port={{port}} --model=sim-model --itl=0.02"

# A /metrics answer in the layout vLLM's OpenAI server writes (histograms and other families around the gauges).
VLLM_METRICS = """# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m"} 0.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.0029296875
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{engine="0",model_name="m"} 2.0
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.001",model_name="m"} 0.0
vllm:time_to_first_token_seconds_count{engine="0",model_name="m"} 10.0
# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="128",cache_dtype="auto",enable_prefix_caching="True",engine="0",\
kv_cache_dtype_skip_layers="[]",num_cpu_blocks="None",num_gpu_blocks="4096"} 1.0
"""


def test_vllm_metrics_are_read_with_the_block_layout():
    s = parse(VLLM_METRICS)
    assert stack_of(s) == "vllm"
    assert s["vllm:kv_cache_usage_perc"][0][1] == pytest.approx(0.0029296875)
    assert s["vllm:num_requests_running"][0][1] == 3.0 and s["vllm:num_preemptions_total"][0][1] == 2.0
    assert cache_layout(s, "vllm")["block_tokens"] == 128 and cache_layout(s, "vllm")["pool_blocks"] == 4096


@pytest.mark.parametrize("text, said", [
    (VLLM_METRICS.replace('num_gpu_blocks="4096"', 'num_gpu_blocks="lots"'), "are not integers"),
    ("\n".join(line for line in VLLM_METRICS.splitlines() if "cache_config" not in line), "publishes no block layout"),
])
def test_a_block_layout_that_is_not_stated_is_never_guessed(text, said):
    layout = cache_layout(parse(text), "vllm")
    assert layout["block_tokens"] is None and said in layout["source"]


def test_metrics_that_are_not_prometheus_text_are_a_clear_error():
    with pytest.raises(MetricsUnavailable, match="not Prometheus text"):
        parse("vllm:kv_cache_usage_perc{engine=\"0\" 0.5\n")
    assert parse("<html>It works!</html>") == {}


def test_a_server_without_kv_metrics_names_the_metrics_it_would_need():
    with ScriptedServer() as url:  # no /metrics: 404
        why = MetricsPoller(url).probe()
    assert "could not be read" in why and "/metrics" in why
    with ScriptedServer(kv_block_tokens=16) as url:
        poller = MetricsPoller(url + "/v1")
        assert poller.probe() is None and poller.stack == "vllm" and poller.layout["block_tokens"] == 16
        poller.sample_once()
    assert poller.samples[0]["usage"] == 0.0 and poller.samples[0]["running"] == 0.0


def _record(send, done, prompt, chunks, ok=True):
    return {"ok": ok, "t_send_ns": send, "t_issue_ns": send, "t_done_ns": done, "prompt_tokens": prompt,
            "chunks": chunks, "tokens": sum(k for _, k in chunks)}


def test_held_tokens_are_the_prompt_plus_what_was_streamed_by_then():
    recs = [_record(0, 100, 10, [[20, 1], [40, 1], [60, 2]]), _record(50, 200, 5, [[70, 1]])]
    assert held_at(recs, 45) == (1, 12, 0)
    assert held_at(recs, 65) == (2, 10 + 4 + 5, 0)
    assert held_at(recs, 150) == (1, 6, 0)
    assert held_at(recs + [_record(10, 300, None, [], ok=False)], 150) == (2, 6, 1)
    assert work_of(recs)[0] == (0, 20, 1, 1.0, "tokens") and sum(w[2] for w in work_of(recs)) == 5


def _frag(block_tokens, n=30):
    """n requests held one at a time, each of 20 prompt tokens + 10 streamed; the server's usage in blocks."""
    recs, samples = [], []
    for i in range(n):
        t = i * 1000
        recs.append(_record(t, t + 900, 20, [[t + 100 + 10 * j, 1] for j in range(10)]))
        blocks = -(-30 // block_tokens)
        samples.append({"t_ns": t + 500, "usage": blocks / 1000, "running": 1.0, "waiting": 0.0})
    return served_frag(recs, samples, {"block_tokens": block_tokens, "pool_blocks": 1000, "url": "u",
                                       "stack": "vllm", "samples": n, "failed": 0})


def test_served_fragmentation_passes_a_token_granular_pool_and_fails_large_blocks():
    good = _frag(1)
    assert good["fraction"] == 0.0 and good["steps"] == 30
    assert check_frag(good, {"max_fraction": 0.03}, "endpoint").status == "PASS"
    bad = _frag(128)  # 30 tokens in a 128-token block: 77% of it empty
    assert bad["fraction"] == pytest.approx(1 - 30 / 128, abs=1e-6)
    v = check_frag(bad, {"max_fraction": 0.03}, "endpoint")
    assert v.status == "FAIL" and "76.56%" in v.reason


def test_a_sample_during_which_the_client_view_moved_is_left_out():
    recs = [_record(0, 900, 20, [[100, 1], [505, 1]])]
    moving = {"t_ns": 500, "t0_ns": 495, "t1_ns": 510, "usage": 0.5, "running": 1.0, "waiting": 0.0}
    still = dict(moving, t_ns=300, t0_ns=290, t1_ns=310)
    out = served_frag(recs, [moving, still], {"block_tokens": 1, "pool_blocks": 42})
    assert out["dropped"]["moving"] == 1 and out["steps"] == 1 and out["peak_tokens_stored"] == 21
    # the same movement in a large allocation is within its spread: kept at the middle of what the client held
    big = served_frag(recs, [moving], {"block_tokens": 1, "pool_blocks": 10_000})
    assert big["dropped"]["moving"] == 0 and big["peak_tokens_stored"] == 21.5 and big["largest_spread"] == 0.0002


def test_samples_where_server_and_client_disagree_are_left_out_and_counted():
    ev = _frag(1)
    recs = [_record(0, 900, 20, [[100, 1]])]
    samples = [{"t_ns": 500, "usage": 0.5, "running": 3.0, "waiting": 0.0},   # the server runs others too
               {"t_ns": 600, "usage": 0.5, "running": 1.0, "waiting": 2.0},   # some queued: not held yet
               {"t_ns": 5000, "usage": 0.0, "running": 0.0, "waiting": 0.0}]  # idle
    out = served_frag(recs, samples, {"block_tokens": 16, "pool_blocks": 10})
    assert "unavailable" in out and out["dropped"] == {"idle": 1, "queued": 1, "disagree": 1, "unknown_prompt": 0,
                                                       "failed_open": 0, "moving": 0}
    assert ev["dropped"]["disagree"] == 0
    assert "states no KV block layout" in served_frag(recs, samples, {"source": "x"})["unavailable"]


VLLM_LOG = """(APIServer pid=1) INFO 12-04 05:11:19 [core.py:133] Initializing a V1 LLM engine (v0.32.0) with config
(Worker pid=3) INFO 12-04 05:11:23 [default_loader.py:501] Loading weights took 12.25 seconds
(Worker pid=3) INFO 12-04 05:11:24 [gpu_model_runner.py:2000] Model loading took 131.5 GiB and 14.02 seconds
(EngineCore pid=2) INFO 12-04 05:11:40 [gpu_model_runner.py:3000] Graph capturing finished in 21 secs, took 1.2 GiB
(EngineCore pid=2) INFO 12-04 05:11:41 [core.py:402] init engine (profile, create kv cache, warmup model) took 35.10 s
"""


def test_start_up_phases_are_read_where_the_server_prints_them(tmp_path):
    log = tmp_path / "server.log"
    log.write_text(VLLM_LOG)
    ph = log_phases(log)
    got = {p["phase"]: p["seconds"] for p in ph["printed"]}
    assert got["weights loaded"] == 12.25 and got["model loaded"] == 14.02 and got["graphs captured"] == 21.0
    assert got["engine initialised (memory profile, KV cache allocated, warm-up)"] == 35.1
    assert ph["not_printed"] == ["model loaded (llama.cpp)"]
    log.write_text("simserve: ready\n")
    assert log_phases(log)["printed"] == []


def _coldstart(totals):
    return {"total_s": sorted(totals)[len(totals) // 2], "samples_s": totals, "phases": {"printed": []},
            "stages": [{"stage": "start_to_listening", "seconds": 1.0}, {"stage": "listening_to_ready", "seconds": 0.5},
                       {"stage": "ready_to_first_token", "seconds": 0.1}],
            "method": "each trial launches the server's command afresh"}


def test_served_cold_start_is_judged_on_its_launches():
    assert check_coldstart(_coldstart([30.0, 31.0, 29.5]), {"max_s": 60}, "endpoint").status == "PASS"
    v = check_coldstart(_coldstart([90.0, 92.0, 91.0]), {"max_s": 60}, "endpoint")
    assert v.status == "FAIL" and "the server printed no start-up phase" in v.reason
    assert "launches the server's command afresh" in v.method


PROFILE = """
name: tiny-served
extends: host
thresholds:
  PLP-LATENCY: {{point_s: 2, sweep_fractions: [0.3, 0.6]}}
  PLP-PPL: {{window_ms: 100}}  # windows longer than the simulated engine's 20 ms steps
  SVC-FRAG: {{max_fraction: 0.05}}
  SVC-COLDSTART: {{max_s: {max_s}}}
conditions:
  environment: {{dram_hold: false}}  # the serving path is tested here (tests/helpers.py NO_HOLD says why)
"""


def _served_run(tmp_path, *opts, max_s=30, k="peak or latency or fragmentation or cold_start"):
    (tmp_path / "p.yaml").write_text(PROFILE.format(max_s=max_s))
    out = run_pytest("--sits", "--sits-profile=p.yaml", "--sits-level=standard", "-p", "no:randomly",
                     "-k", k, f"--sits-report-dir={tmp_path / 'r'}", *opts, cwd=tmp_path, timeout=400)
    report = json.loads((tmp_path / "r" / "sits-report.json").read_text())
    by = {}
    for v in report["verdicts"]:
        by.setdefault(v["requirement"], []).append(v)
    return out, report, by


@pytest.mark.slow
def test_a_launched_server_is_swept_its_kv_pool_judged_and_its_cold_start_measured(tmp_path):
    out, report, by = _served_run(tmp_path, f"--sits-serve={SIM}")
    assert "measure the server under test" in out.stdout
    for req in ("PLP-PPL", "PLP-LATENCY", "SVC-FRAG", "SVC-COLDSTART"):
        assert len(by[req]) == 1 and by[req][0]["subject"].startswith("endpoint http://127.0.0.1:"), by[req]
    assert by["SVC-FRAG"][0]["status"] == "PASS", by["SVC-FRAG"][0]["reason"]
    cold = by["SVC-COLDSTART"][0]
    assert cold["status"] == "PASS" and len(cold["evidence"]["samples_s"]) >= 3, cold["reason"]
    assert cold["evidence"]["server"]["models"] == ["sim-model"]
    ppl = by["PLP-PPL"][0]
    assert ppl["status"] == "WARN" and "share of the server's saturated output rate" in ppl["reason"]
    # the environment of the sweep is stated: what was read, and the hold the profile turned off
    assert "host DRAM occupancy: the profile turns the hold off" in ppl["reason"], ppl["reason"]
    assert ppl["evidence"]["environment"]["window"]["seconds"] > 1  # the sweep's own window, not the test's call
    sweep = by["PLP-LATENCY"][0]["evidence"]
    assert sweep["served"] and sweep["runner"]["model_name"] == "sim-model"
    assert [round(p["fraction_of_max"], 1) for p in sweep["sweep"]] == [0.3, 0.6]
    for p in sweep["sweep"]:  # each load level's streamed figures: the scripted TTFT is 20 ms, a step 20 ms
        st = p["streaming"]
        assert 0.015 < st["ttft"]["p50_s"] < 0.5 and 0.015 < st["itl"]["p50_s"] < 0.1, st
        assert st["ttft"]["samples"] == p["queries"] - p["errors"]
    assert sweep["server_metrics"]["stack"] == "vllm" and sweep["server_metrics"]["samples"] > 10
    assert (tmp_path / "r" / "serving" / "coldstart-1" / "server.log").is_file()


@pytest.mark.slow
def test_high_fragmentation_and_a_slow_cold_start_fail(tmp_path):
    out, report, by = _served_run(tmp_path, f"--sits-serve={SIM} --fault=frag-high --fault=slow-start=1.5",
                                  max_s=1.0)
    frag = by["SVC-FRAG"][0]
    assert frag["status"] == "FAIL" and "512 tokens" in frag["reason"], frag["reason"]
    assert by["SVC-COLDSTART"][0]["status"] == "FAIL", by["SVC-COLDSTART"][0]["reason"]


@pytest.mark.slow
def test_an_endpoint_run_by_someone_else_is_swept_and_its_cold_start_not_measured(tmp_path):
    with ScriptedServer(ttft_s=0.01, itl_s=0.002, model_name="m") as url:  # no /metrics
        out, report, by = _served_run(tmp_path, f"--sits-endpoint={url}")
    cold, frag = by["SVC-COLDSTART"][0], by["SVC-FRAG"][0]
    assert cold["status"] == "SKIP" and "--sits-serve=COMMAND" in cold["reason"]
    assert frag["status"] == "SKIP" and "vllm:kv_cache_usage_perc" in frag["reason"], frag["reason"]
    assert by["PLP-LATENCY"][0]["status"] == "WARN" and by["PLP-LATENCY"][0]["evidence"]["served"]


@pytest.mark.slow
def test_a_server_that_dies_under_the_sweep_is_an_error_and_nothing_is_left(tmp_path):
    from pytest_sits.inference.launch import group_members

    out, report, by = _served_run(tmp_path, f"--sits-serve={SIM} --fault=dies-after=4",
                                  k="peak or latency or fragmentation")
    assert set(by) >= {"PLP-PPL", "PLP-LATENCY", "SVC-FRAG"} and "MEM-BW-HOLD" not in by, sorted(by)
    for r in ("PLP-PPL", "PLP-LATENCY", "SVC-FRAG"):
        (v,) = by[r]
        assert v["status"] == "ERROR" and "stopped answering" in v["reason"], (r, v["reason"])
        assert "engine core died" in v["reason"]  # the server's log, quoted
    served = report["run"]["serving"]
    assert served["stopped"]["before_the_end"] and group_members(served["pid"]) == []


@pytest.mark.slow
def test_a_server_that_restarts_under_the_sweep_is_an_error(tmp_path):
    out, report, by = _served_run(tmp_path, f"--sits-serve={SIM} --fault=restarts-after=4", k="peak or latency")
    for r in ("PLP-PPL", "PLP-LATENCY"):
        (v,) = by[r]
        assert v["status"] == "ERROR" and "the server restarted under the load" in v["reason"], (r, v["reason"])


# -- workloads -----------------------------------------------------------------------------------------------------

from pytest_sits.inference.endpoint import EndpointClient  # noqa: E402
from pytest_sits.inference.workloads import DatasetError, calibrate, load_dataset, synthetic  # noqa: E402


def test_prompt_lengths_are_set_in_the_server_own_tokens():
    with ScriptedServer() as url, EndpointClient(url, "scripted") as client:  # the server counts one token a word
        cal = calibrate(client)
    assert cal["tokens_per_word"] == 1.0 and cal["overhead_tokens"] == 0, cal
    wl = synthetic({"samples": 20, "prompt_tokens": [50, 50], "output_tokens": [4, 4]}, cal)
    assert all(len(t.split()) == 50 for t in wl.texts) and wl.out_tokens == [4] * 20
    # a tokenizer that counts two tokens a word and a BOS: half the words
    wl = synthetic({"samples": 5, "prompt_tokens": [101, 101]}, {"tokens_per_word": 2.0, "overhead_tokens": 1})
    assert all(len(t.split()) == 50 for t in wl.texts)


def test_a_server_reporting_no_usage_leaves_prompts_at_a_word_a_token_and_says_so():
    with ScriptedServer(usage="never") as url, EndpointClient(url, "scripted") as client:
        cal = calibrate(client)
    assert cal["tokens_per_word"] is None and "reports no usage.prompt_tokens" in cal["why"]


def test_a_jsonl_and_a_sharegpt_dataset_are_read(tmp_path):
    f = tmp_path / "d.jsonl"
    f.write_text('{"prompt": "Tell me about GPUs", "output_tokens": 64}\n\n{"prompt": "Hi"}\n')
    wl = load_dataset(f, {"output_tokens": [8, 8]}, {"tokens_per_word": 1.5})
    assert wl.texts == ["Tell me about GPUs", "Hi"] and wl.out_tokens == [64, 8]
    assert wl.describe()["output_tokens_from"] == {"dataset": 1, "the profile's range": 1}
    g = tmp_path / "share.json"
    g.write_text(json.dumps([{"conversations": [{"from": "human", "value": "What is HBM?"},
                                                {"from": "gpt", "value": "High bandwidth memory stacked near dies"}]},
                             {"conversations": [{"from": "gpt", "value": "orphan reply"}]}]))
    wl = load_dataset(g, {}, {"tokens_per_word": 1.5})
    assert wl.texts == ["What is HBM?"] and wl.out_tokens == [9] and wl.describe()["layout"] == "ShareGPT"


@pytest.mark.parametrize("content, said", [
    ('{"prompt": "ok"}\nnot json\n', "d.jsonl:2: not JSON"),
    ('{"prompt": "   "}\n', "d.jsonl:1: the prompt is empty"),
    ('{"text": "x"}\n', 'd.jsonl:1: a JSON object with a "prompt" is expected'),
    ('{"prompt": "x", "output_tokens": -3}\n', "output_tokens = -3 is not a whole number"),
    ("", "the file is empty"),
    ("[1, 2]", 'record 0: no "conversations" list'),
])
def test_a_bad_dataset_is_refused_naming_the_line_and_the_fix(tmp_path, content, said):
    f = tmp_path / "d.jsonl"
    f.write_text(content)
    with pytest.raises(DatasetError, match="fix:") as err:
        load_dataset(f, {}, {})
    assert said in str(err.value)


def test_a_huge_or_linked_dataset_is_refused_before_it_is_read(tmp_path):
    big = tmp_path / "big.jsonl"
    with open(big, "wb") as fh:
        fh.truncate(200 << 20)  # sparse: nothing is read to refuse it
    with pytest.raises(DatasetError, match="over the 128 MiB limit; fix: take a subset"):
        load_dataset(big, {}, {})
    real = tmp_path / "real.jsonl"
    real.write_text('{"prompt": "x"}\n')
    (tmp_path / "link.jsonl").symlink_to(real)
    with pytest.raises(DatasetError, match="symbolic link"):
        load_dataset(tmp_path / "link.jsonl", {}, {})


def test_a_dataset_without_a_server_under_test_is_a_usage_error(tmp_path):
    from types import SimpleNamespace

    from pytest_sits.plugin.session import SitsRun, SitsUsageError
    from pytest_sits.profiles import resolve

    f = tmp_path / "d.jsonl"
    f.write_text('{"prompt": "x"}\n')
    run = SitsRun(profile=resolve("host"), platform=SimpleNamespace(kind="live", simulated=False), level="standard",
                  level_how="option", report_dir=None)
    with pytest.raises(SitsUsageError, match="none is given, so the file would not be used"):
        run.set_dataset(str(f))
    run.set_inference("http://127.0.0.1:9", None)
    f.write_text('{"prompt": ""}\n')
    with pytest.raises(SitsUsageError, match="d.jsonl:1: the prompt is empty"):
        run.set_dataset(str(f))


@pytest.mark.slow
def test_the_sla_and_the_sweep_send_the_dataset_prompts(tmp_path):
    f = tmp_path / "chat.jsonl"
    f.write_text("".join(json.dumps({"prompt": f"question {i} about memory bandwidth", "output_tokens": 5}) + "\n"
                         for i in range(40)))
    out, report, by = _served_run(tmp_path, f"--sits-serve={SIM}", f"--sits-dataset={f}", k="peak or latency")
    sweep = by["PLP-LATENCY"][0]["evidence"]
    assert sweep["runner"]["workload"]["kind"] == "dataset" and sweep["runner"]["workload"]["samples"] == 40
    counted = sweep["prompt_tokens_counted"]
    assert counted["min"] == counted["max"] == 5, counted  # five words each, counted by the server


def test_a_server_on_another_machine_is_never_given_this_machine_power():
    """An endpoint elsewhere: this machine's GPUs and CPU packages say nothing of its power (a client box's idle GPUs
    would make PLP-POWER pass); only the serving node's BMC, when given, is read."""
    import socket

    from pytest_sits.conditions.inference.deployment import deployment_power, is_local

    assert is_local("http://localhost:8000") and is_local("http://127.0.0.1:8000") and is_local("http://[::1]:8000")
    try:
        own = socket.gethostbyname(socket.gethostname())
    except OSError:
        own = "127.0.0.1"
    assert is_local(f"http://{own}:8000")
    assert not is_local("http://192.0.2.7:8000")  # TEST-NET-1: never this machine's
    assert not is_local("http://no-such-host.invalid:8000")
    sources, missing, primary = deployment_power([{"vendor": "NVIDIA", "management": {"index": 0}}], None,
                                                 local=False)
    assert sources == [] and primary == []
    assert "runs on another machine" in missing[0] and "--sits-redfish" in missing[0]


def test_a_deployment_on_several_gpus_is_judged_per_gpu_not_on_its_sum():
    """Eight GPUs at 600 W each are 4.8 kW together: the per-accelerator ceiling (700 W) is held against each GPU's
    own power, so the sum never FAILs a healthy node, and one GPU over it FAILs whatever the others draw."""
    from pytest_sits.checks.inference import check_power
    from pytest_sits.conditions.inference.served import per_accelerator

    def point(watts):
        return {"target_qps": 10.0, "rho": 0.5, "power_w": sum(watts), "power_valid_reads": 100,
                "power_failed_reads": 0, "power_blocks_w": [sum(watts)] * 10,
                "device_power": {f"nvml:{i}": {"power_w": w, "blocks_w": [w - 1, w, w + 1] * 3 + [w]}
                                 for i, w in enumerate(watts)}}

    th = {"max_power_w": 700, "at_load_max": 0.7}
    healthy = [point([600.0] * 8)]
    assert per_accelerator(healthy) and healthy[0]["deployment_power_w"] == 4800 and healthy[0]["power_w"] == 600
    v = check_power({"sweep": healthy, "primary_power": ["nvml:0"], "power_judged": "per accelerator"}, th, "ep")
    assert v.status == "PASS" and "per accelerator" in v.method, v.reason
    hot = [point([600.0] * 7 + [760.0])]
    per_accelerator(hot)
    assert hot[0]["power_judged"] == "nvml:7"
    assert check_power({"sweep": hot, "primary_power": ["nvml:0"]}, th, "ep").status == "FAIL"
    one = [point([650.0])]
    assert per_accelerator(one) is None and one[0]["power_w"] == 650.0  # one GPU: its own power, unchanged


@pytest.mark.slow
def test_a_signal_during_a_cold_start_trial_stops_the_trial_server_and_writes_the_report(tmp_path):
    """SIGTERM while a cold-start trial's server is starting: the trial's whole process group is stopped, the run
    ends INCOMPLETE with its report pair, and no server process is left."""
    import signal

    from helpers import group_gone, pytest_running, served_pid

    (tmp_path / "p.yaml").write_text(PROFILE.format(max_s=30))
    log = tmp_path / "r" / "serving" / "coldstart-1" / "server.log"
    with pytest_running("--sits", "--sits-profile=p.yaml", "--sits-level=standard", "-p", "no:randomly",
                        "-k", "cold_start", f"--sits-report-dir={tmp_path / 'r'}",
                        f"--sits-serve={SIM} --fault=slow-start=20", cwd=tmp_path) as run:
        pid = served_pid(log, seen="starting (pid")
        run.send_signal(signal.SIGTERM)
        out, _ = run.communicate(timeout=120)
    report = json.loads((tmp_path / "r" / "sits-report.json").read_text())
    assert report["run"]["completed"] is False and (tmp_path / "r" / "sits-report.html").is_file(), out[-2000:]
    assert "SIGTERM" in (report["run"].get("serving") or {}).get("error", ""), report["run"].get("serving")
    assert group_gone(pid), "the cold-start trial's server outlived the run"
