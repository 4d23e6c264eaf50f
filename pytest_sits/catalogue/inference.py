"""Inference under load: PLP-SAMPLE, PLP-PPL, PLP-POWER, PLP-LATENCY, SVC-SLA, SVC-FRAG, SVC-COLDSTART."""

import math
from typing import Any, Dict, List, Optional, Tuple

from .base import BOOL, INT0, NUM01, POS, STR, Cost, Threshold, Trials, bounded, declare, enum, nullable

#: The built-in model of the inference-under-load requirements (bounded: an absurd size cannot be asked for).
MODEL_SCHEMA = {
    "type": "object", "additionalProperties": False,
    "properties": {
        "vocab": bounded("integer", 16, 262144), "d_model": bounded("integer", 16, 16384),
        "n_layers": bounded("integer", 1, 128), "n_heads": bounded("integer", 1, 256),
        "d_ff": bounded("integer", 16, 65536), "max_seq_tokens": bounded("integer", 16, 32768),
        "block_tokens": bounded("integer", 1, 1024), "pool_blocks": bounded("integer", 8, 4194304),
        "max_batch": bounded("integer", 1, 4096), "dtype": enum("float32", "float16", "bfloat16"),
        "seed": INT0, "threads": nullable(bounded("integer", 1, 1024)),
    },
}
_TOKEN_RANGE = {"type": "array", "items": bounded("integer", 1, 32768), "minItems": 2, "maxItems": 2}
#: The query mix LoadGen draws from (prompt and output lengths, seeded).
INFER_WORKLOAD_SCHEMA = {
    "type": "object", "additionalProperties": False,
    "properties": {"samples": bounded("integer", 8, 100000), "prompt_tokens": _TOKEN_RANGE,
                   "output_tokens": _TOKEN_RANGE},
}
TENANT_SCHEMA = {
    "type": "object", "additionalProperties": False, "required": ["name", "share"],
    "properties": {"name": STR, "share": bounded("number", 0, 1, exclusive_lo=True), "p99_ms": POS, "min_rps": POS,
                   "max_error_rate": NUM01, "ttft_p99_ms": nullable(POS), "tpot_p99_ms": nullable(POS)},
}

#: The longest SVC-SLA run (conditions/inference/records.py holds the same bound for the run itself).
MAX_SLA_S = 3600.0


#: Headroom over the error-free requests a tenant needs: a healthy server may still fail a request or two.
SIZING_HEADROOM = 1.25


def requests_needed(max_error_rate: float, confidence: float = 0.95) -> Optional[int]:
    """Error-free requests for the error rate's Clopper-Pearson interval (SVC-SLA's check, two-sided at
    ``confidence``) to lie wholly under ``max_error_rate``: with no error the upper bound is 1 - (a/2)^(1/n)."""
    if not 0 < max_error_rate < 1:
        return None
    return int(math.ceil(math.log((1 - confidence) / 2) / math.log(1 - max_error_rate))) + 1


def decidable_duration(tenants: List[Dict[str, Any]], qps: float, duration: float) -> Tuple[float, Optional[str]]:
    """The run's duration, lengthened where the profile's would end before a perfect server could PASS: each
    tenant needs :func:`requests_needed` requests (x :data:`SIZING_HEADROOM`) at its share of the offered rate.
    Returns (duration, what was lengthened and why, or None)."""
    total = sum(float(t.get("share", 1.0)) for t in tenants) or 1.0
    need_s, why = 0.0, None
    for t in tenants:
        n = requests_needed(float(t["max_error_rate"]))
        rate = qps * float(t.get("share", 1.0)) / total
        if n is None or rate <= 0:
            continue
        secs = n * SIZING_HEADROOM / rate
        if secs > need_s:
            need_s = secs
            why = (f"tenant {t.get('name', '?')} needs {n} error-free requests to show an error rate under "
                   f"{float(t['max_error_rate']):g} (95% Clopper-Pearson), x{SIZING_HEADROOM:g} headroom at "
                   f"{rate:.4g} req/s")
    if need_s <= duration:
        return duration, None
    sized = min(MAX_SLA_S, float(math.ceil(need_s)))
    return sized, (f"duration {duration:g} s lengthened to {sized:g} s: {why}"
                   + (f" (capped at {MAX_SLA_S:g} s: the run may not decide it)" if need_s > MAX_SLA_S else ""))


def sla_seconds(th: Dict[str, Any]) -> float:
    """SVC-SLA's run length for the plan: its duration, lengthened as the run will lengthen it."""
    duration = min(MAX_SLA_S, max(1.0, float(th["duration_s"])))
    if not th.get("size_to_decide", True):
        return duration
    base = {k: th[k] for k in ("max_error_rate",)}
    tenants = [dict(base, **t) for t in th["tenants"]][:16]
    return decidable_duration(tenants, min(100000.0, max(0.1, float(th["target_qps"]))), duration)[0]


#: Wall seconds of simulating one second of the sweep and of the SLA run on one device (their queries are
#: simulated one by one: ``python benchmarks/plan_scaling.py`` measures the simulated runs).
SIM_SWEEP = 0.022
SIM_SLA = 0.0027


def _fractions(th):
    return len(th["sweep_fractions"])


def _sweep_fixed(th):
    """Model and LoadGen start, Offline and SingleStream (half a point each), the maximum measured again after
    each point (an Offline run of half a point, at least 2 s), and each point's Server runs: one without a
    latency ceiling, else PLP-LATENCY's trials (a trial: one run of every point)."""
    points = 0 if th["max_latency_us"] is not None else _fractions(th)
    return 8.0 + th["point_s"] * (1 + points) + max(2.0, th["point_s"] / 2) * _fractions(th)


declare(
    "PLP-SAMPLE", "Power, latency and load sampled together", "A §1, §2.1",
    level="standard", scope="accelerator", family="inference",
    thresholds={
        "max_skew_periods": Threshold(POS, 1.0, "A's Sample3D: P, D and ρ together; the skew is measured, no sensor "
                                                'offers "one cycle"'),
        "period_ms": Threshold(bounded("number", 1, 1000), 10, "the sampler's period (Sample3D records)"),
    },
    cost=Cost("acc", fixed=0.1), environment=True, platforms=("live", "sim"), faults=("sensor-lag",))

declare(
    "PLP-PPL", "Peak processing load over a sliding window", "A §2.1",
    level="standard", scope="accelerator", family="inference",
    thresholds={
        "window_ms": Threshold(bounded("number", 1, 10000), 10, "A §2.1: ρ over a sliding 10 ms window"),
        "peak_tflops": Threshold(nullable(POS), None, "null: hardware.fp16_dense_tflops for a half-precision model, "
                                                      "else the measured maximum"),
        "model": Threshold(MODEL_SCHEMA, {
            "d_model": 128, "n_layers": 2, "n_heads": 4, "d_ff": 512, "max_seq_tokens": 1024, "block_tokens": 16,
            "pool_blocks": 1024, "max_batch": 16, "dtype": "float32"},
            "the built-in decoder (random seeded weights); profiles size it for their device",
            items={"block_tokens": "KV block size (vLLM's default)"}),
        "workload": Threshold(INFER_WORKLOAD_SCHEMA, {"samples": 512, "prompt_tokens": [16, 64],
                                                      "output_tokens": [8, 24]},
                              "LoadGen's query mix: prompt and output lengths in tokens (seeded)"),
    },
    cost=Cost("acc", fixed=0.1), environment=True, platforms=("live", "sim", "evidence"), faults=("peak-understated",))

declare(
    "PLP-POWER", "Power ceiling while load stays under a bound", "A §2.2",
    level="standard", scope="accelerator", family="inference",
    thresholds={
        "max_power_w": Threshold(nullable(POS), 0.120, "A's table: a SoC-level figure; accelerator profiles "
                                                       "override"),
        "at_load_max": Threshold(NUM01, 0.85, "A's table: while ρ stays under 85%"),
        "max_node_power_w": Threshold(nullable(POS), None, "the node's wall power, judged on submitted MLPerf "
                                                          "power logs (they measure the node at the wall; the "
                                                          "suite's own runs read each accelerator); null: not judged"),
    },
    cost=Cost("acc", fixed=0.1), environment=True, platforms=("live", "sim", "evidence"), faults=("power-high",))

declare(
    "PLP-LATENCY", "Latency ceiling while load stays under a bound", "A §2.2",
    level="standard", scope="accelerator", family="inference",
    thresholds={
        "max_latency_us": Threshold(nullable(POS), 320, "A's table: a SoC-level D; accelerator profiles override"),
        "at_load_max": Threshold(NUM01, 0.70, "A's table: while ρ stays under 70%"),
        "metric": Threshold(enum("query", "token"), "query",
                            "query: P99 query latency; token: P99 latency per output token"),
        "sweep_fractions": Threshold({"type": "array", "items": bounded("number", 0, 1.5, exclusive_lo=True),
                                      "minItems": 1, "maxItems": 10}, [0.2, 0.4, 0.6, 0.8],
                                     "LoadGen Server target QPS as fractions of the Offline maximum"),
        "point_s": Threshold(bounded("number", 1, 600), 5, "seconds per sweep point"),
    },
    cost=Cost("acc", fixed=_sweep_fixed, trial=lambda th: th["point_s"] * _fractions(th), together=True,
               sim=lambda th: SIM_SWEEP * (_sweep_fixed(th) + 2 * th["point_s"] * _fractions(th))),
    # each sweep point's Server run is repeated until decided, where the profile sets a ceiling (else one run
    # per point: nothing to decide)
    trials=Trials("one Server run of every sweep point", initial=2, step=1, cap=4, minimum=2,
                  when=lambda th: th["max_latency_us"] is not None),
    environment=True, platforms=("live", "sim", "evidence"), faults=("latency-high",))

declare(
    "SVC-SLA", "Per-tenant P99 latency, throughput and error rate", "B §3.2",
    level="full", scope="accelerator", family="inference",
    thresholds={
        "p99_ms": Threshold(POS, 120, "B §3.2, the default of every tenant"),
        "min_rps": Threshold(POS, 85, "B §3.2"),
        "max_error_rate": Threshold(NUM01, 0.003, "B §3.2"),
        "tenants": Threshold({"type": "array", "items": TENANT_SCHEMA, "minItems": 1, "maxItems": 16},
                             [{"name": "default", "share": 1.0}], "each tenant's share of the offered load and "
                                                                  "its own targets over the defaults above"),
        "target_qps": Threshold(bounded("number", 0.1, 100000), 100,
                                "offered load (LoadGen Server), split between tenants by share"),
        "duration_s": Threshold(bounded("number", 1, 3600), 60, "the run's length (at least: see size_to_decide)"),
        "size_to_decide": Threshold(BOOL, True, "lengthen the run to what every tenant's error-rate ceiling needs to "
                                                "be decidable (0.3% needs 1,229 error-free requests)"),
        "ttft_p99_ms": Threshold(nullable(POS), None, "time to first token, P99 (streaming); no source gives one: "
                                                      "reported, not judged"),
        "tpot_p99_ms": Threshold(nullable(POS), None, "time per output token after the first, P99; reported, not "
                                                      "judged"),
        "timeout_s": Threshold(bounded("number", 0.1, 600), 30, "per-request deadline from its issue: a request "
                                                                "past it is a timeout, censored"),
        "max_inflight": Threshold(nullable(bounded("integer", 1, 512)), None,
                                  "the client's requests in flight; null: sized from the SLA (rate x P99 x 2)"),
        "api": Threshold(enum("completions", "chat"), "completions",
                         "/v1/completions, or chat (/v1/chat/completions)"),
        "stream": Threshold(BOOL, True, "server-sent events: TTFT, ITL and TPOT are measured"),
        "model_name": Threshold(nullable(STR), None, "null: the first model the endpoint lists at /v1/models"),
        "workload": Threshold(INFER_WORKLOAD_SCHEMA, {"samples": 1000, "prompt_tokens": [16, 128],
                                                      "output_tokens": [1, 4]},
                              "short completions: B's 120 ms is a request's budget, which holds a few tokens"),
    },
    cost=Cost("acc", fixed=lambda th: 5.0 + sla_seconds(th), together=True,
               sim=lambda th: SIM_SLA * sla_seconds(th)),
    environment=True, platforms=("live", "sim", "evidence"), faults=("sla-miss", "ttft-high", "tpot-high"))

declare(
    "SVC-FRAG", "Device-memory fragmentation under paged KV cache", "B §3.2; A §1",
    level="standard", scope="accelerator", family="inference",
    thresholds={
        "max_fraction": Threshold(NUM01, 0.03, "B: 2.3% (PagedAttention v2); A: < 3% with vLLM"),
        "queries": Threshold(bounded("integer", 8, 100000), 256, "mixed-length queries, all at once (LoadGen "
                                                                 "Offline)"),
        "workload": Threshold(INFER_WORKLOAD_SCHEMA, {"samples": 256, "prompt_tokens": [16, 512],
                                                      "output_tokens": [8, 128]},
                              "the query mix (prompt and output lengths in tokens)"),
    },
    cost=Cost("acc", fixed=10.0, together=True), environment=True, platforms=("live", "sim"), faults=("frag-high",))

declare(
    "SVC-COLDSTART", "Cold start: model load to first token", "A §4.3",
    level="standard", scope="accelerator", family="inference",
    thresholds={
        "max_s": Threshold(nullable(POS), None, "A §4.3 measures it and sets no ceiling: reported unless a profile "
                                                "sets one"),
        "page_cache": Threshold(enum("asis", "evict_files", "drop_all"), "asis",
                                "asis (measured, reported); evict_files (fadvise torch's libraries); drop_all (root)"),
        "timeout_s": Threshold(bounded("number", 5, 1800), 300, "one cold start's deadline"),
    },
    cost=Cost("acc", trial=10.0, together=True),
    trials=Trials("one cold start", initial=3, step=2, cap=5, minimum=2),
    environment=True, platforms=("live", "sim"), faults=("coldstart-slow",), fault_thresholds={"max_s": 60})


#: What is measured on the server under test when one is given (--sits-serve, --sits-endpoint): once per run, on the
#: deployment, instead of the suite's built-in model on each accelerator.
SERVED_REQUIREMENTS = ("PLP-SAMPLE", "PLP-PPL", "PLP-POWER", "PLP-LATENCY", "SVC-SLA", "SVC-COLDSTART", "SVC-FRAG")
