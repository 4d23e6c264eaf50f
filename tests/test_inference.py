"""Inference under load, on data: the checks (pass and fail), the simulated rig with each fault, the sampler's
windows and skew, and the power probes on fake sysfs trees, a fake NVML and a loopback Redfish service."""

import json
import sys
import threading
import time
import types
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from pytest_sits.checks.interval import quantile_tail

from pytest_sits.checks.inference import (check_coldstart, check_frag, check_latency, check_power, latency_point_decision, check_ppl,
                                        check_sample, check_sla, tenant_sla)
from pytest_sits.conditions.inference import (acquire_coldstart, acquire_frag, acquire_ppl, acquire_sample_skew,
                                              acquire_sla, acquire_sweep, efficiency, energy_between, per_tenant,
                                              power_windows, sweep_config)
from pytest_sits.conditions.sampler import CumulativeWork, Sample3D, join, rho_at, skew
from pytest_sits.inference.model import KVBlockPool, ModelConfig, ModelConfigError
from pytest_sits.inference.sut import Workload, early_stopping_bound
from pytest_sits.platforms.sim.inference import SimInferenceRig
from pytest_sits.probes import power
from pytest_sits.profiles import resolve
from pytest_sits.plugin.session import SitsRun, SitsUsageError
from pytest_sits.verdict import FAIL, INCONCLUSIVE, PASS, SKIP, WARN

def base_th(rid, **override):
    """The thresholds a resolved profile gives requirement ``rid`` (the base profile's defaults), with ``override``."""
    return dict(resolve("base").thresholds(rid), **override)


SWEEP_KEYS = {"target_qps": float, "rho": float, "power_w": (float, type(None)), "p50_latency_s": float,
              "p99_latency_s": float, "throughput_qps": float, "tokens_per_s": float, "error_rate": float,
              "energy_j": (float, type(None))}
H100_GPU = {"bdf": "0000:11:00.0"}


def point(rho, power_w=400.0, p99=0.05, **kw):
    p = {"target_qps": 10.0 * rho, "rho": rho, "power_w": power_w, "p50_latency_s": p99 / 2, "p99_latency_s": p99,
         "throughput_qps": 10.0 * rho, "tokens_per_s": 100.0 * rho, "error_rate": 0.0, "energy_j": 100.0,
         "p99_token_latency_s": p99 / 10, "power_valid_reads": 100, "power_failed_reads": 0}
    p.update(kw)
    return p


# -- checks on data --------------------------------------------------------------------------------------------


def test_power_ceiling_applies_only_at_or_below_the_load_bound():
    ev = {"sweep": [point(0.3, 500.0), point(0.8, 650.0), point(0.95, 900.0)], "power_reason": None}
    v = check_power(ev, {"max_power_w": 700, "at_load_max": 0.85}, "gpu0")
    assert v.status == PASS and v.measured == 650.0  # the 900 W point is above ρ 0.85: not judged
    v = check_power(ev, {"max_power_w": 600, "at_load_max": 0.85}, "gpu0")
    assert v.status == FAIL and "650 W" in v.reason and v.remediation
    assert check_power(ev, {"max_power_w": None, "at_load_max": 0.85}, "gpu0").status == WARN


def test_power_without_a_sensor_skips_with_the_missing_sensor_named():
    ev = {"sweep": [point(0.3, None)], "power_reason": "no power sensor for this device: no RAPL: /sys/class/powercap "
                                                      "does not exist"}
    v = check_power(ev, {"max_power_w": 700, "at_load_max": 0.85}, "cpu")
    assert v.status == SKIP and "powercap" in v.reason


def test_power_with_a_dropped_out_sensor_is_not_decided():
    th = {"max_power_w": 700, "at_load_max": 0.85}
    ev = {"sweep": [point(0.3, 300.0, power_valid_reads=40, power_failed_reads=60)]}
    assert check_power(ev, th, "g").status == INCONCLUSIVE
    silent = {"sweep": [point(0.3, None, power_valid_reads=0, power_failed_reads=90)], "primary_power": ["nvml:0"]}
    assert check_power(silent, th, "g").status == INCONCLUSIVE  # a sensor that never answered is not an absence


def test_latency_ceiling_by_query_and_by_token():
    ev = {"sweep": [point(0.2, p99=0.004), point(0.6, p99=0.030), point(0.9, p99=2.0)]}
    assert check_latency(ev, base_th("PLP-LATENCY", max_latency_us=50_000, at_load_max=0.7), "g").status == PASS
    v = check_latency(ev, base_th("PLP-LATENCY", max_latency_us=320, at_load_max=0.7), "g")
    assert v.status == FAIL and v.measured == pytest.approx(30_000)
    v = check_latency(ev, base_th("PLP-LATENCY", max_latency_us=3500, at_load_max=0.7, metric="token"), "g")
    assert v.status == PASS and v.measured == pytest.approx(3000)
    assert check_latency({"sweep": [point(0.9)]}, base_th("PLP-LATENCY", max_latency_us=320, at_load_max=0.7), "g").status == \
        INCONCLUSIVE


def _runs(*p99s, looks=1):
    """A point run once per P99 given (the sequential rule's record of it)."""
    return {"latency_runs": [{"p99_latency_s": x, "p99_token_latency_s": x / 10, "queries": 400} for x in p99s],
            "latency_sequential": {"looks": looks, "trials": len(p99s)}, "planned_s": 30.0}


def test_latency_of_a_repeated_point_is_decided_on_its_runs():
    th = base_th("PLP-LATENCY", max_latency_us=18_300, at_load_max=0.7)
    ok = {"sweep": [point(0.2, p99=0.004, **_runs(0.0040, 0.0042)), point(0.6, p99=0.009, **_runs(0.009, 0.0095))]}
    v = check_latency(ok, th, "g")
    assert v.status == PASS and "t-interval over the point's runs, 2 runs" in v.reason and "runs' P99s" in v.method
    bad = {"sweep": [point(0.2, p99=0.004, **_runs(0.004, 0.0041)), point(0.6, p99=0.030, **_runs(0.030, 0.031))]}
    v = check_latency(bad, th, "g")
    assert v.status == FAIL and "30,500 µs" in v.reason
    # the runs straddle the ceiling: one run's tight binomial interval would have decided either way
    straddle = {"sweep": [point(0.6, p99=0.012, **_runs(0.012, 0.024, 0.016, 0.021, looks=3))]}
    v = check_latency(straddle, th, "g")
    assert v.status == INCONCLUSIVE and "more runs would decide" in v.reason and "98.3% t-interval" in v.reason
    # a latency's interval never goes below zero
    wide = latency_point_decision(point(0.6, **_runs(0.001, 0.012)), th)
    assert wide["low"] == 0.0 and wide["outcome"] == "undecided"


@pytest.mark.slow
def test_sim_sweep_repeats_a_point_until_its_latency_decides(tmp_path):
    prof = resolve("h100")
    th = prof.thresholds("PLP-LATENCY")
    cfg = sweep_config({r: prof.thresholds(r) for r in ("PLP-PPL", "PLP-LATENCY", "PLP-SAMPLE")})
    ev = acquire_sweep(SimInferenceRig(prof, [], H100_GPU), cfg, tmp_path / "ok")
    assert all(2 <= len(p["latency_runs"]) <= 4 for p in ev["sweep"])
    assert all(p["latency_sequential"]["stopped"] == "decided" for p in ev["sweep"])
    assert check_latency(ev, th, "g").status == PASS
    # a device whose P99 at 80% load sits on the ceiling, above it in some runs and below in others: the runs
    # disagree by more than any one run's interval says, so the point is undecided after its cap, never FAILed
    ev = acquire_sweep(SimInferenceRig(prof, ["latency-marginal"], H100_GPU), cfg, tmp_path / "marginal")
    top = ev["sweep"][-1]
    p99s = [r["p99_token_latency_s"] for r in top["latency_runs"]]
    assert len(p99s) == 4 and min(p99s) < th["max_latency_us"] / 1e6 < max(p99s), p99s
    v = check_latency(ev, th, "g")
    assert v.status == INCONCLUSIVE and "4 runs" in v.reason, v.reason
    # twenty times slower: the first look's two runs already FAIL it
    ev = acquire_sweep(SimInferenceRig(prof, ["latency-high"], H100_GPU), cfg, tmp_path / "slow")
    assert check_latency(ev, th, "g").status == FAIL
    assert any(len(p["latency_runs"]) == 2 and p["latency_sequential"]["stopped"] == "decided" for p in ev["sweep"])


def test_ppl_fails_when_a_window_exceeds_the_theoretical_peak_and_warns_on_a_measured_one():
    pts = [{"target_qps": 5.0, "rho": 0.4, "rho_p99": 0.6, "rho_max": 0.7, "step_ms_p50": 2.0}]
    theo = {"flops_per_s": 1e15, "theoretical": True, "source": "datasheet"}
    ev = {"window_ms": 10, "period_ms": 10, "peak": theo, "points": pts}
    assert check_ppl(ev, base_th("PLP-PPL", window_ms=10), "g").status == PASS
    over = dict(ev, points=[dict(pts[0], rho_max=1.4)])
    assert check_ppl(over, base_th("PLP-PPL", window_ms=10), "g").status == FAIL
    assert check_ppl(ev, base_th("PLP-PPL", window_ms=20), "g").status == FAIL  # measured over other windows than asked
    coarse = dict(ev, points=[dict(pts[0], step_ms_p50=25.0)])
    assert check_ppl(coarse, base_th("PLP-PPL", window_ms=10), "g").status == INCONCLUSIVE
    measured = dict(ev, peak={"flops_per_s": 1e9, "theoretical": False, "source": "measured"})
    assert check_ppl(measured, base_th("PLP-PPL", window_ms=10), "g").status == WARN


def _values(p99, n=1000, seed=0):
    """``n`` values whose 99th percentile is about ``p99`` (uniform below p99 / 0.99)."""
    return list(np.random.default_rng(seed).uniform(0.0, p99 / 0.99, n))


def _dist(p99_s, n=1000, seed=0):
    return {"p99_s": p99_s, "tail": quantile_tail(_values(p99_s, n, seed), 0.99)}


def test_sample_skew_against_the_period():
    src = {"kind": "nvml", "fast": True, "readings": 1000, "failed": 0, "p99_ms": 1.2, "max_ms": 3.0,
           "sensor_stamped": True, "tails": [quantile_tail(_values(1.2), 0.99)]}
    ev = {"period_ms": 10, "sources": {"nvml:0": src}, "primary_power": ["nvml:0"], "ticks": 1000, "overruns": 0}
    v = check_sample(ev, base_th("PLP-SAMPLE", max_skew_periods=1.0), "g")
    assert v.status == PASS and "binomial order statistics, 1000 samples" in v.reason
    lag = dict(ev, sources={"nvml:0": dict(src, p99_ms=48.0, tails=[quantile_tail(_values(48.0), 0.99)])})
    assert check_sample(lag, base_th("PLP-SAMPLE", max_skew_periods=1.0), "g").status == FAIL
    near = dict(ev, sources={"nvml:0": dict(src, p99_ms=10.0, tails=[quantile_tail(_values(10.0), 0.99)])})
    v = check_sample(near, base_th("PLP-SAMPLE", max_skew_periods=1.0), "g")
    assert v.status == INCONCLUSIVE and "more records would decide" in v.reason
    drop = dict(ev, sources={"nvml:0": dict(src, failed=300)})
    assert check_sample(drop, base_th("PLP-SAMPLE", max_skew_periods=1.0), "g").status == INCONCLUSIVE
    busy = dict(ev, overruns=200)
    assert check_sample(busy, base_th("PLP-SAMPLE", max_skew_periods=1.0), "g").status == INCONCLUSIVE


def _tenant(p99_s=0.06, **kw):
    t = {"name": "chat", "share": 1.0, "offered_rps": 100.0, "issued": 2000, "completed": 2000, "errors": 0,
         "error_kinds": {}, "error_rate": 0.0, "throughput_rps": 99.0, "p50_latency_s": 0.02, "p99_latency_s": p99_s,
         "latency": _dist(p99_s), "early_stopping": {"queries": 1000, "estimate_s": 0.07, "discarded": 2,
                                                     "queries_needed": None}}
    t.update(kw)
    return {"tenant": t, "rule": "r"}


def test_sla_per_tenant_from_the_tenants_list_over_the_defaults():
    th = base_th("SVC-SLA", p99_ms=120, min_rps=85, max_error_rate=0.003,
                 tenants=[{"name": "chat", "share": 0.5, "p99_ms": 50}, {"name": "batch", "share": 0.5}])
    assert tenant_sla(th, "chat")["p99_ms"] == 50 and tenant_sla(th, "batch")["p99_ms"] == 120
    assert check_sla(_tenant(), th, "g").status == FAIL  # 60 ms > chat's 50 ms
    ok = dict(th, tenants=[{"name": "chat", "share": 1.0}])
    assert check_sla(_tenant(), ok, "g").status == PASS
    assert check_sla(_tenant(error_rate=0.01, errors=20), ok, "g").status == FAIL
    # no error in 1000 requests: the error rate's interval reaches 0.37%, over the 0.3% ceiling: undecided
    few = _tenant(issued=1000, completed=1000)
    v = check_sla(few, ok, "g")
    assert v.status == INCONCLUSIVE and "error rate: the interval contains 0.300%" in v.reason
    assert check_sla(_tenant(throughput_rps=50.0), ok, "g").status == FAIL
    assert check_sla(_tenant(0.05), dict(ok, p99_ms=50), "g").status == INCONCLUSIVE  # P99 on the target
    too_few = _tenant(early_stopping={"queries": 300, "estimate_s": None, "queries_needed": 662})
    assert check_sla(too_few, ok, "g").status == INCONCLUSIVE
    under_offered = _tenant(offered_rps=40.0, throughput_rps=40.0)
    assert check_sla(under_offered, ok, "g").status == INCONCLUSIVE


def test_sla_ttft_and_tpot_targets_fail_and_pass_on_data():
    th = base_th("SVC-SLA", p99_ms=500, min_rps=85, max_error_rate=0.003, ttft_p99_ms=200, tpot_p99_ms=30,
                 tenants=[{"name": "chat", "share": 1.0}])
    fast = {"ttft": _dist(0.15, seed=1), "tpot": _dist(0.02, seed=2)}
    assert check_sla(_tenant(**fast), th, "g").status == PASS
    v = check_sla(_tenant(**dict(fast, ttft=_dist(0.45, seed=1))), th, "g")
    assert v.status == FAIL and v.reason.startswith("TTFT 4") and "] (95% binomial order statistics" in v.reason
    assert "beyond its target" in v.reason
    v = check_sla(_tenant(**dict(fast, tpot=_dist(0.05, seed=2))), th, "g")
    assert v.status == FAIL and v.reason.startswith("TPOT ") and "beyond its target" in v.reason
    v = check_sla(_tenant(**dict(fast, ttft=None, tpot=None)), th, "g")  # not streamed: a target set is not met
    assert v.status == FAIL and "TTFT not measured" in v.reason
    assert check_sla(_tenant(**dict(fast, ttft=None)), dict(th, ttft_p99_ms=None), "g").status == PASS
    assert tenant_sla(dict(th, tenants=[{"name": "chat", "share": 1, "ttft_p99_ms": 500}]), "chat")["ttft_p99_ms"] == 500


def test_sla_a_client_that_was_the_limit_makes_latency_failures_inconclusive_never_errors():
    th = base_th("SVC-SLA", p99_ms=120, min_rps=85, max_error_rate=0.003, tenants=[{"name": "chat", "share": 1.0}])
    limited = {"limited": True, "statement": "the client was the limit: all 64 slots busy"}
    slow = dict(_tenant(11.8, early_stopping={"estimate_s": 12.0}), client=limited)
    v = check_sla(slow, th, "g")
    assert v.status == INCONCLUSIVE and "the client was the limit" in v.reason
    assert check_sla(dict(slow, client={"limited": False}), th, "g").status == FAIL
    http = dict(_tenant(error_rate=0.05, errors=50, error_kinds={"http": 50}), client=limited)
    assert check_sla(http, th, "g").status == FAIL  # HTTP errors are the server's, whatever the client did


@pytest.mark.parametrize("fault, key", [("ttft-high", "TTFT"), ("tpot-high", "TPOT")])
def test_sim_stream_faults_fail_their_target_and_pass_without(tmp_path, fault, key):
    prof, rig, _ = _sim([])
    th = dict(prof.thresholds("SVC-SLA"), p99_ms=2000, ttft_p99_ms=200, tpot_p99_ms=30)
    ok = per_tenant(acquire_sla(rig, th, tmp_path))[0]
    assert ok["tenant"]["ttft"]["p99_s"] is not None and check_sla(ok, th, "t").status == PASS
    _, bad, _ = _sim([fault])
    v = check_sla(per_tenant(acquire_sla(bad, th, tmp_path))[0], th, "t")
    assert v.status == FAIL and key in v.reason, v.reason


def test_coldstart_and_frag_on_data():
    cs = {"stages": [{"stage": "torch_import", "seconds": 2.0}, {"stage": "first_token", "seconds": 0.5}],
          "total_s": 2.5, "samples_s": [2.5, 2.45, 2.55], "page_cache": {"state": "warm"}}
    v = check_coldstart(cs, base_th("SVC-COLDSTART", max_s=10), "c")
    assert v.status == PASS and "t-interval, 3 trials" in v.reason
    v = check_coldstart(cs, base_th("SVC-COLDSTART", max_s=1), "c")
    assert v.status == FAIL and "torch_import" in v.reason
    assert check_coldstart(cs, base_th("SVC-COLDSTART", max_s=None), "c").status == WARN
    assert check_coldstart(dict(cs, samples_s=[2.4, 2.6, 2.5]), base_th("SVC-COLDSTART", max_s=2.5), "c").status == INCONCLUSIVE
    assert check_coldstart(dict(cs, samples_s=[2.5]), base_th("SVC-COLDSTART", max_s=10), "c").status == INCONCLUSIVE  # one trial
    steps = list(np.random.default_rng(3).normal(0.021, 0.003, 300))
    pool = {"view": "kv-pool", "fraction": 0.021, "peak_blocks_used": 900, "pool_blocks": 1024, "block_tokens": 16,
            "fraction_time_weighted": 0.02, "step_fractions": steps}
    v = check_frag(pool, base_th("SVC-FRAG", max_fraction=0.03), "c")
    assert v.status == PASS and "batch means, 10 batches" in v.reason
    high = dict(pool, fraction=0.08, step_fractions=[x + 0.06 for x in steps])
    assert check_frag(high, base_th("SVC-FRAG", max_fraction=0.03), "c").status == FAIL
    near = dict(pool, step_fractions=list(np.random.default_rng(3).normal(0.03, 0.01, 300)))
    assert check_frag(near, base_th("SVC-FRAG", max_fraction=0.03), "c").status == INCONCLUSIVE


def test_efficiency_needs_counters_at_every_point():
    pts = [dict(point(0.3), output_tokens=1000, duration_s=10.0, energy_j=2000.0, power_1s_windows_w=[190, 200, 210]),
           dict(point(0.6), output_tokens=3000, duration_s=10.0, energy_j=4000.0, power_1s_windows_w=[390, 400])]
    e = efficiency(pts, None)
    assert e["tokens_per_joule"] == pytest.approx(4000 / 6000)
    assert e["tokens_per_watt_p99"] == pytest.approx(200 / 400)  # 200 tokens/s over the P99 window of 400 W
    e = efficiency([dict(pts[0], energy_j=None, power_1s_windows_w=[])], "no RAPL")
    assert e["tokens_per_joule"] is None and e["tokens_per_watt_p99"] is None and e["reason"] == "no RAPL"


# -- the simulated rig: every requirement fails on bad evidence -----------------------------------------------

SIM_CFG = {"sweep_fractions": [0.3, 0.6], "point_s": 2}


def _sim(faults, acc=H100_GPU, profile="h100"):
    prof = resolve(profile)
    rig = SimInferenceRig(prof, faults, acc)
    cfg = dict(sweep_config({r: prof.thresholds(r) for r in ("PLP-PPL", "PLP-LATENCY", "PLP-SAMPLE")}), **SIM_CFG)
    return prof, rig, cfg


def test_sim_sweep_has_the_analytics_shape_and_passes(tmp_path):
    prof, rig, cfg = _sim([])
    ev = acquire_sweep(rig, cfg, tmp_path)
    assert len(ev["sweep"]) == 2
    for p in ev["sweep"]:
        for key, typ in SWEEP_KEYS.items():
            assert isinstance(p[key], typ), (key, p[key])
    assert ev["tokens_per_joule"] > 0 and ev["tokens_per_watt_p99"] > 0
    assert check_power(ev, prof.thresholds("PLP-POWER"), "g").status == PASS
    assert check_latency(ev, prof.thresholds("PLP-LATENCY"), "g").status == PASS
    assert check_ppl(acquire_ppl(ev), prof.thresholds("PLP-PPL"), "g").status == PASS
    assert check_sample(acquire_sample_skew(ev), prof.thresholds("PLP-SAMPLE"), "g").status == PASS
    assert (tmp_path / "sample3d.jsonl").stat().st_size > 0


@pytest.mark.parametrize("fault, req, want", [
    ("power-high", "PLP-POWER", FAIL), pytest.param("latency-high", "PLP-LATENCY", FAIL, marks=pytest.mark.slow),
    ("sensor-lag", "PLP-SAMPLE", FAIL),
    ("sensor-dropout", "PLP-SAMPLE", INCONCLUSIVE), ("sensor-dropout", "PLP-POWER", INCONCLUSIVE),
    ("peak-understated", "PLP-PPL", FAIL)])
def test_sim_sweep_faults(tmp_path, fault, req, want):
    prof, rig, cfg = _sim([fault])
    ev = acquire_sweep(rig, cfg, tmp_path)
    chk = {"PLP-POWER": (check_power, lambda e: e), "PLP-LATENCY": (check_latency, lambda e: e),
           "PLP-SAMPLE": (check_sample, acquire_sample_skew), "PLP-PPL": (check_ppl, acquire_ppl)}[req]
    v = chk[0](chk[1](ev), prof.thresholds(req), "g")
    assert v.status == want, v.reason


def test_sim_sla_frag_coldstart_pass_and_fail(tmp_path):
    prof, rig, _ = _sim([])
    th = prof.thresholds("SVC-SLA")
    assert [check_sla(e, th, "t").status for e in per_tenant(acquire_sla(rig, th, tmp_path))] == [PASS]
    _, bad, _ = _sim(["sla-miss"])
    v = check_sla(per_tenant(acquire_sla(bad, th, tmp_path))[0], th, "t")
    assert v.status == FAIL and "error rate" in v.reason
    frag = acquire_frag(rig, prof.thresholds("SVC-FRAG"), tmp_path)
    assert {k: check_frag(e, base_th("SVC-FRAG", max_fraction=0.03), k).status for k, e in frag.items()} == {
        "kv-pool": PASS, "allocator": PASS}
    _, bad, _ = _sim(["frag-high"])
    frag = acquire_frag(bad, prof.thresholds("SVC-FRAG"), tmp_path)
    assert {check_frag(e, base_th("SVC-FRAG", max_fraction=0.03), k).status for k, e in frag.items()} == {FAIL}
    _, slow, _ = _sim(["coldstart-slow"])
    cs = prof.thresholds("SVC-COLDSTART")
    assert check_coldstart(acquire_coldstart(rig, cs), base_th("SVC-COLDSTART", max_s=60), "c").status == PASS
    assert check_coldstart(acquire_coldstart(slow, cs), base_th("SVC-COLDSTART", max_s=60), "c").status == FAIL


# -- sampler, windows, skew ------------------------------------------------------------------------------------


def test_rho_spreads_each_step_over_its_duration():
    work = [(0, 10_000_000, 1, 100.0), (10_000_000, 30_000_000, 1, 100.0)]  # 100 FLOPs in 10 ms, then in 20 ms
    w = CumulativeWork(work)
    assert w.at(5_000_000) == pytest.approx(50.0) and w.at(20_000_000) == pytest.approx(150.0)
    rho = rho_at(work, [10_000_000, 20_000_000, 30_000_000], 10_000_000, peak_per_s=10_000.0)
    assert rho == pytest.approx([1.0, 0.5, 0.5])


class FakeSource:
    kind, fast, min_interval_s = "fake", True, 0.0

    def __init__(self, name="fake:0", fail_every=0, lag_ns=0):
        self.name, self.fail_every, self.lag_ns, self.n, self.e = name, fail_every, lag_ns, 0, 0.0

    def read(self):
        self.n += 1
        t = time.monotonic_ns()
        if self.fail_every and self.n % self.fail_every == 0:
            return {"t_ns": t, "read_ns": 1000, "sensor_t_ns": None, "power_w": None, "energy_j": None,
                    "error": "fake failure"}
        self.e += 1.0
        return {"t_ns": t, "read_ns": 1000, "sensor_t_ns": t - self.lag_ns, "power_w": 100.0, "energy_j": self.e,
                "error": None}

    def describe(self):
        return {"name": self.name, "kind": self.kind, "fast": True, "min_interval_s": 0.0, "resolution": "fake"}


def test_sampler_records_failures_as_failures_and_stops_on_an_exception():
    src = FakeSource(fail_every=4)
    with pytest.raises(RuntimeError):
        with Sample3D([src], period_s=0.005) as s:
            time.sleep(0.2)
            raise RuntimeError("the workload broke")
    assert not any(t.is_alive() for t in s._threads)
    ev = s.evidence()
    reads = ev["sources"]["fake:0"]["readings"]
    assert len(ev["ticks"]) == len(reads) >= 10
    failed = [r for r in reads if r["error"]]
    assert failed and all(r["power_w"] is None and r["energy_j"] is None for r in failed)


def test_skew_and_join_use_each_readings_own_time():
    lagging = FakeSource("lag:0", lag_ns=50_000_000)
    with Sample3D([FakeSource(), lagging], period_s=0.01) as s:
        time.sleep(0.25)
    ev = s.evidence()
    sk = skew(ev)["sources"]
    assert sk["fake:0"]["p99_ms"] < 10 and sk["lag:0"]["p99_ms"] > 45
    t0 = ev["ticks"][0]
    queries = [[t0 - 1000, t0 + 5_000_000, 3, 0, None], [t0, t0 + 5_000_000, 3, 0, "http: 500"]]
    recs = join(ev, queries, [0.5] * len(ev["ticks"]))
    assert sum(len(r["latencies_s"]) for r in recs) == 1  # the failed query has no latency
    assert energy_between(ev["sources"]["fake:0"]["readings"], t0, ev["ticks"][-1])["method"] == "energy counter"
    assert power_windows(ev["sources"]["fake:0"]["readings"], t0, ev["ticks"][-1], window_s=0.1)


# -- model shape, pool, workload, early stopping ---------------------------------------------------------------


def test_model_config_limits_name_the_fix():
    with pytest.raises(ModelConfigError, match="n_heads"):
        ModelConfig(d_model=100, n_heads=3).validate()
    with pytest.raises(ModelConfigError, match="pool_blocks"):
        ModelConfig(d_model=8192, n_layers=64, pool_blocks=4_000_000).validate()
    cfg = ModelConfig()
    assert cfg.flops_decode(100) > 2 * cfg.matmul_params()
    assert cfg.flops_prefill(10) > 10 * 2 * cfg.matmul_params()


def test_paged_pool_grows_block_by_block_and_frees():
    pytest.importorskip("torch")
    cfg = ModelConfig(pool_blocks=8, block_tokens=4)
    pool = KVBlockPool(cfg, "cpu", __import__("torch").float32)
    pool.admit(1, 10)
    slots = pool.grow(1, 5)
    assert len(pool.tables[1]) == 2 and slots[4] == pool.tables[1][1] * 4
    assert pool.stats() == {"blocks_used": 2, "tokens_stored": 5, "sequences": 1}
    assert not pool.can_admit(21)  # 3 reserved + 6 > 8
    pool.release(1)
    assert pool.stats()["blocks_used"] == 0 and pool.reserved == 0


def test_workload_splits_tenants_by_share():
    wl = Workload.build({"samples": 400, "prompt_tokens": [4, 8], "output_tokens": [1, 2]}, 256,
                        [{"name": "a", "share": 0.75}, {"name": "b", "share": 0.25}])
    assert wl.describe()["tenants"] == {"a": 0.75, "b": 0.25}
    assert all(4 <= len(p) <= 8 for p in wl.prompts)


def test_early_stopping_matches_loadgen():
    # loadgen/results.cc, SingleStream at the 99th percentile: at least 662 queries; 1175 discard 3
    assert early_stopping_bound([0.0] * 661)["queries_needed"] == 662
    es = early_stopping_bound([i / 1000 for i in range(1175)])
    assert es["discarded"] == 3 and es["estimate_s"] == pytest.approx(1.171)


# -- power probes ----------------------------------------------------------------------------------------------


def _rapl(tmp_path, zone, name, energy, rng="262143328850"):
    d = tmp_path / "sys/class/powercap" / zone
    d.mkdir(parents=True, exist_ok=True)
    (d / "name").write_text(name + "\n")
    (d / "energy_uj").write_text(f"{energy}\n")
    (d / "max_energy_range_uj").write_text(rng + "\n")
    return d


def test_rapl_wraps_around_with_max_energy_range(tmp_path):
    d = _rapl(tmp_path, "intel-rapl:0", "package-0", 999_000, rng="999999")
    zones, why = power.rapl_zones(tmp_path)
    assert why is None and zones[0].name == "rapl:0:package-0"
    assert zones[0].read()["energy_j"] == pytest.approx(0.999)
    (d / "energy_uj").write_text("1000\n")  # the counter wrapped
    r = zones[0].read()
    assert r["energy_j"] == pytest.approx((1000 + 1_000_000) / 1e6) and r["error"] is None
    (d / "energy_uj").write_text("N/A\n")  # an unreadable value is a failed read, never 0
    r = zones[0].read()
    assert r["energy_j"] is None and "energy_uj" in r["error"]


def test_rapl_absent_says_why(tmp_path):
    zones, why = power.rapl_zones(tmp_path)
    assert zones == [] and "powercap" in why


def test_nvml_field_values_keep_their_own_timestamps(monkeypatch):
    now_us = time.time_ns() // 1000

    class Val:
        def __init__(self, v, ret=0, ts=now_us - 2000):
            self.nvmlReturn, self.timestamp, self.valueType = ret, ts, 3
            self.value = types.SimpleNamespace(ullVal=v)

    fake = types.SimpleNamespace(
        NVML_FI_DEV_POWER_INSTANT=186, NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION=83,
        nvmlInit=lambda: None, nvmlShutdown=lambda: None, nvmlDeviceGetCount=lambda: 1,
        nvmlDeviceGetHandleByIndex=lambda i: f"h{i}",
        nvmlDeviceGetFieldValues=lambda h, f: [Val(412_000), Val(5_000_000)])
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    sources, why = power.nvml_sources()
    r = sources[0].read()
    assert why is None and r["power_w"] == pytest.approx(412.0) and r["energy_j"] == pytest.approx(5000.0)
    assert 0 < r["t_ns"] - r["sensor_t_ns"] < 1e9  # the driver's stamp, 2 ms before the read
    fake.nvmlDeviceGetFieldValues = lambda h, f: [Val(0, ret=3), Val(0, ret=3)]
    r = sources[0].read()
    assert r["power_w"] is None and r["energy_j"] is None and "NVML return 3" in r["error"]


class RedfishMock(BaseHTTPRequestHandler):
    energy = [1000.0]

    def log_message(self, *a):
        return None

    def _json(self, code, doc, headers=()):
        body = json.dumps(doc).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        p = self.path.rstrip("/")
        docs = {
            "/redfish/v1": {"@odata.id": "/redfish/v1", "RedfishVersion": "1.15.0",
                            "Chassis": {"@odata.id": "/redfish/v1/Chassis"},
                            "SessionService": {"@odata.id": "/redfish/v1/SessionService"},
                            "Links": {"Sessions": {"@odata.id": "/redfish/v1/SessionService/Sessions"}}},
            "/redfish/v1/Chassis": {"Members": [{"@odata.id": "/redfish/v1/Chassis/1U"}]},
            "/redfish/v1/Chassis/1U": {"@odata.id": "/redfish/v1/Chassis/1U",
                                       "Power": {"@odata.id": "/redfish/v1/Chassis/1U/Power"},
                                       "Sensors": {"@odata.id": "/redfish/v1/Chassis/1U/Sensors"}},
            "/redfish/v1/Chassis/1U/Power": {"PowerControl": [{"PowerConsumedWatts": 612}]},
            "/redfish/v1/Chassis/1U/Sensors": {"Members": [{"@odata.id": "/redfish/v1/Chassis/1U/Sensors/Energy"}]},
        }
        if p == "/redfish/v1/Chassis/1U/Sensors/Energy":
            self.energy[0] += 612.0
            return self._json(200, {"ReadingType": "EnergyJoules", "Reading": self.energy[0]})
        if p in docs:
            return self._json(200, docs[p])
        self._json(404, {"error": "not found"})

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._json(201, {"@odata.id": "/redfish/v1/SessionService/Sessions/1"},
                   [("X-Auth-Token", "t0k"), ("Location", "/redfish/v1/SessionService/Sessions/1")])

    def do_DELETE(self):
        self._json(204, {})


@pytest.fixture
def redfish_url():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), RedfishMock)
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_redfish_wall_power_and_energy_from_a_bmc(redfish_url):
    pytest.importorskip("redfish")
    sources, why = power.redfish_sources(redfish_url, "admin", "secret")
    assert why is None and len(sources) == 1 and not sources[0].fast
    r1, r2 = sources[0].read(), sources[0].read()
    assert r1["power_w"] == 612 and r2["energy_j"] - r1["energy_j"] == pytest.approx(612.0)
    sources[0].close()


def test_redfish_unreachable_or_unconfigured_says_why():
    assert "no BMC configured" in power.redfish_sources(None)[1]
    pytest.importorskip("redfish")
    assert "did not answer" in power.redfish_sources("http://127.0.0.1:9", timeout_s=1)[1]


def test_session_rejects_a_bad_endpoint_with_the_fix(monkeypatch):
    run = SitsRun(profile=resolve("host"), platform=None, level="full", level_how="option", report_dir=None)
    with pytest.raises(SitsUsageError, match="fix: --sits-endpoint http://HOST:PORT"):
        run.set_inference("localhost:8000", None)
    monkeypatch.setenv("SITS_REDFISH_USER", "admin")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    run.set_inference("http://127.0.0.1:8000", "https://bmc.example")
    assert run.inference_options() == {"endpoint": "http://127.0.0.1:8000", "redfish": {
        "url": "https://bmc.example", "user": "admin", "password": None}, "endpoint_key": None, "served": None,
        "serve_error": None, "deployment_accelerators": [], "dataset": None}
    monkeypatch.setenv("OPENAI_API_KEY", "from-env")
    run.set_inference("http://127.0.0.1:8000", None)
    assert run.inference_options()["endpoint_key"] == "from-env"
    run.set_inference("http://127.0.0.1:8000", None, "from-option")
    assert run.inference_options()["endpoint_key"] == "from-option"
    assert "from-option" not in repr(run)  # the key never shows in a repr


def test_the_endpoint_key_never_reaches_the_recorded_command_line():
    from pytest_sits.plugin.session import redact_args

    assert redact_args(["-q", "--sits-endpoint-key", "k1", "--sits-endpoint-key=k2", "--sits-level=full"]) == [
        "-q", "--sits-endpoint-key", "***", "--sits-endpoint-key=***", "--sits-level=full"]


def test_snapshot_platform_cannot_run_a_workload(tmp_path):
    from pytest_sits.conditions.inference import InferenceUnavailable
    from pytest_sits.platforms.snapshot import SnapshotPlatform

    with pytest.raises(InferenceUnavailable, match="snapshot"):
        SnapshotPlatform.inference_rig(object.__new__(SnapshotPlatform), None, resolve("host"), {})


def test_an_endpoint_the_run_would_not_measure_is_refused_with_the_reason():
    """--sits-endpoint on a platform that is not the live host, or below SVC-SLA's level, would get no request: a
    usage error saying why and the fix, never a run that passes SVC-SLA against a port where nothing listens."""
    from types import SimpleNamespace

    url = "http://127.0.0.1:9"
    for kind, simulated, said in (("sim", True, "a simulated platform"), ("snapshot", False, "a snapshot platform")):
        run = SitsRun(profile=resolve("host"), platform=SimpleNamespace(kind=kind, simulated=simulated), level="full",
                      level_how="option", report_dir=None, platform_spec=f"{kind}:h100")
        with pytest.raises(SitsUsageError, match=f"platform {kind}:h100 is {said}.*fix: run on the live host"):
            run.set_inference(url, None)
    run = SitsRun(profile=resolve("host"), platform=None, level="quick", level_how="option", report_dir=None)
    with pytest.raises(SitsUsageError, match="run at level standard and above .* this run is level quick.*"
                                             "fix: add --sits-level=standard"):
        run.set_inference(url, None)
    for level in ("standard", "full"):  # the PLP-* sweep measures it at standard, SVC-SLA too at full
        run = SitsRun(profile=resolve("host"), platform=SimpleNamespace(kind="live", simulated=False), level=level,
                      level_how="option", report_dir=None)
        run.set_inference(url, None)
        assert run.endpoint == url


@pytest.mark.slow
def test_a_simulated_run_with_an_endpoint_is_a_usage_error(pytester, conformance_args):
    result = pytester.runpytest(*conformance_args, "--sits-platform=sim:h100", "--sits-level=full",
                                "--sits-endpoint=http://127.0.0.1:9")
    assert result.ret == 4, result.stdout.str()[-2000:]
    assert "never sends a request to a server" in result.stderr.str() + result.stdout.str()
