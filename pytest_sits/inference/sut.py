"""MLPerf LoadGen around a system under test, with its logs kept as evidence.

:func:`run_loadgen` runs one LoadGen test (Server: Poisson arrivals at a target QPS; Offline: every query at
once; SingleStream: one query at a time) against ``issue(sample_index, complete)``, where the system under
test calls ``complete(tokens, error)`` exactly once per query, from any thread.  It returns LoadGen's own
results (read back from ``mlperf_log_summary.txt`` and ``mlperf_log_detail.txt``, which stay in ``logdir``)
and a per-query log stamped with the monotonic clock (issue, completion, output tokens, tenant, error),
which the sampler joins with power and load.

A system that never answers cannot hang the run: a watchdog answers every query still open at the deadline
with an error (counted as such), so LoadGen can finish.
"""

from __future__ import annotations

import json
import random
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

from . import loadgen_missing

Complete = Callable[[int, Optional[str]], None]
Issue = Callable[[int, Complete], None]

MAX_LOG_BYTES = 16 << 20
SCENARIOS = ("Server", "Offline", "SingleStream")


class LoadgenUnavailable(RuntimeError):
    pass


@dataclass
class Workload:
    """The query sample library: a prompt, an output length and a tenant per sample (seeded)."""

    prompts: List[List[int]]
    out_tokens: List[int]
    tenant_of: List[int]
    tenants: List[str]

    @classmethod
    def build(cls, spec: Dict[str, Any], vocab: int, tenants: Optional[Sequence[Dict[str, Any]]] = None,
              seed: int = 2026) -> "Workload":
        rng = random.Random(seed)
        n = int(spec.get("samples", 512))
        p_lo, p_hi = spec.get("prompt_tokens", [32, 128])
        o_lo, o_hi = spec.get("output_tokens", [8, 32])
        shares = [float(t.get("share", 1.0)) for t in tenants] if tenants else [1.0]
        names = [str(t.get("name", f"tenant{i}")) for i, t in enumerate(tenants)] if tenants else ["all"]
        total = sum(shares) or 1.0
        edges, acc = [], 0.0
        for s in shares:
            acc += s / total
            edges.append(acc)
        tenant_of = []
        for i in range(n):  # tenants hold contiguous sample ranges in proportion to their share
            x = (i + 0.5) / n
            tenant_of.append(next((k for k, e in enumerate(edges) if x <= e), len(edges) - 1))
        prompts = [[rng.randrange(vocab) for _ in range(rng.randint(int(p_lo), int(p_hi)))] for _ in range(n)]
        outs = [rng.randint(int(o_lo), int(o_hi)) for _ in range(n)]
        return cls(prompts, outs, tenant_of, names)

    def describe(self) -> Dict[str, Any]:
        n = len(self.prompts)
        return {"samples": n, "prompt_tokens_mean": round(sum(map(len, self.prompts)) / n, 2),
                "prompt_tokens_range": [min(map(len, self.prompts)), max(map(len, self.prompts))],
                "output_tokens_mean": round(sum(self.out_tokens) / n, 2),
                "output_tokens_range": [min(self.out_tokens), max(self.out_tokens)],
                "tenants": {name: round(self.tenant_of.count(k) / n, 4) for k, name in enumerate(self.tenants)}}


def run_loadgen(issue: Issue, workload: Workload, logdir: Path, *, scenario: str, duration_s: float,
                target_qps: Optional[float] = None, latency_target_s: Optional[float] = None,
                expected_qps: Optional[float] = None, expected_latency_s: Optional[float] = None,
                seed: int = 0, grace_s: float = 30.0) -> Dict[str, Any]:
    """One LoadGen performance run; raises :class:`LoadgenUnavailable` when LoadGen does not import."""
    missing = loadgen_missing()
    if missing:
        raise LoadgenUnavailable(missing)
    import mlperf_loadgen as lg

    if scenario not in SCENARIOS:
        raise ValueError(f"scenario {scenario!r}; use one of {SCENARIOS}")
    logdir = Path(logdir)
    logdir.mkdir(parents=True, exist_ok=True)
    lock = threading.Lock()
    open_q: Dict[int, Any] = {}
    queries: List[List[Any]] = []

    def issue_query(samples: List[Any]) -> None:
        for qs in samples:
            t = time.monotonic_ns()
            qid, idx = qs.id, qs.index
            with lock:
                open_q[qid] = (t, idx)

            def complete(tokens: int, error: Optional[str], qid: int = qid) -> None:
                with lock:
                    rec = open_q.pop(qid, None)
                if rec is None:  # already answered (by the watchdog)
                    return
                queries.append([rec[0], time.monotonic_ns(), int(tokens), workload.tenant_of[rec[1]], error])
                lg.QuerySamplesComplete([lg.QuerySampleResponse(qid, 0, 0)])

            try:
                issue(idx, complete)
            except Exception as exc:  # the SUT refused the query: it still counts, as an error
                complete(0, f"issue failed: {type(exc).__name__}: {exc}")

    def flush() -> None:
        return None

    ts = lg.TestSettings()
    ts.scenario = getattr(lg.TestScenario, scenario)
    ts.mode = lg.TestMode.PerformanceOnly
    ts.min_duration_ms = int(duration_s * 1000)
    ts.max_duration_ms = int(duration_s * 2000) + 10_000  # a safety bound only: min_duration decides the schedule
    ts.min_query_count = 1
    ts.performance_sample_count_override = len(workload.prompts)
    ts.qsl_rng_seed = ts.sample_index_rng_seed = ts.schedule_rng_seed = int(seed)
    if scenario == "Server":
        ts.server_target_qps = float(target_qps or 1.0)
        ts.server_target_latency_ns = int((latency_target_s or 1.0) * 1e9)
        ts.server_target_latency_percentile = 0.99
    elif scenario == "Offline":
        ts.offline_expected_qps = float(expected_qps or 1.0)
    else:
        ts.single_stream_expected_latency_ns = int((expected_latency_s or 0.01) * 1e9)
        ts.single_stream_target_latency_percentile = 0.99
    out = lg.LogOutputSettings()
    out.outdir = str(logdir)
    out.copy_summary_to_stdout = False
    out.copy_detail_to_stdout = False
    lset = lg.LogSettings()
    lset.log_output = out
    lset.log_mode = lg.LoggingMode.AsyncPoll
    lset.enable_trace = False

    deadline_s = duration_s * (3.0 if scenario == "Offline" else 1.0) + grace_s
    stop = threading.Event()
    expired: List[int] = []

    def watchdog() -> None:
        if stop.wait(deadline_s):
            return
        with lock:
            left = list(open_q.items())
            open_q.clear()
        now = time.monotonic_ns()
        for qid, (t, idx) in left:
            queries.append([t, now, 0, workload.tenant_of[idx], f"no answer within the {deadline_s:g} s deadline"])
            expired.append(qid)
        lg.QuerySamplesComplete([lg.QuerySampleResponse(q, 0, 0) for q in expired])

    sut = lg.ConstructSUT(issue_query, flush)
    qsl = lg.ConstructQSL(len(workload.prompts), len(workload.prompts), lambda s: None, lambda s: None)
    dog = threading.Thread(target=watchdog, name="sits-loadgen-watchdog", daemon=True)
    t0 = time.monotonic_ns()
    dog.start()
    try:
        lg.StartTestWithLogSettings(sut, qsl, ts, lset)
    finally:
        stop.set()
        dog.join(timeout=5)
        lg.DestroyQSL(qsl)
        lg.DestroySUT(sut)
    t1 = time.monotonic_ns()
    parsed = parse_logs(logdir)
    return {"scenario": scenario, "target_qps": target_qps, "duration_s": duration_s, "t0_ns": t0, "t1_ns": t1,
            "queries": sorted(queries), "watchdog_expired": len(expired), "loadgen": parsed, "logdir": str(logdir)}


def parse_logs(logdir: Path) -> Dict[str, Any]:
    """LoadGen's results from its logs: the summary text whole, and the result/early-stopping keys of the
    detail log (plus its errors and warnings).  The files stay where LoadGen wrote them."""
    logdir = Path(logdir)
    out: Dict[str, Any] = {"summary_file": str(logdir / "mlperf_log_summary.txt"),
                           "detail_file": str(logdir / "mlperf_log_detail.txt"), "results": {}, "errors": [],
                           "warnings": []}
    try:
        with open(logdir / "mlperf_log_summary.txt", "r", encoding="utf-8", errors="replace") as fh:
            out["summary"] = fh.read(64 << 10)
    except OSError as exc:
        out["summary"] = None
        out["errors"].append(f"no summary log: {exc}")
    try:
        with open(logdir / "mlperf_log_detail.txt", "r", encoding="utf-8", errors="replace") as fh:
            text = fh.read(MAX_LOG_BYTES)
    except OSError as exc:
        out["errors"].append(f"no detail log: {exc}")
        return out
    for line in text.splitlines():
        if not line.startswith(":::MLLOG "):
            continue
        try:
            rec = json.loads(line[len(":::MLLOG "):])
        except ValueError:
            continue
        key, meta = rec.get("key", ""), rec.get("metadata") or {}
        if meta.get("is_error"):
            out["errors"].append(str(rec.get("value"))[:500])
        elif meta.get("is_warning"):
            out["warnings"].append(str(rec.get("value"))[:500])
        if key.startswith(("result_", "early_stopping", "effective_", "loadgen_version")) or key == "num_errors":
            out["results"][key] = rec.get("value")
    r = out["results"]
    pct = lambda q: r.get(f"result_{q:.2f}_percentile_latency_ns")  # noqa: E731
    out["valid"] = r.get("result_validity") == "VALID"
    out["p50_latency_s"] = pct(50) / 1e9 if pct(50) is not None else None
    out["p90_latency_s"] = pct(90) / 1e9 if pct(90) is not None else None
    out["p99_latency_s"] = pct(99) / 1e9 if pct(99) is not None else None
    es = r.get("early_stopping_latency_ss") or r.get("early_stopping_latency_ms")
    out["early_stopping_p99_s"] = es / 1e9 if isinstance(es, (int, float)) else None
    out["early_stopping_met"] = r.get("early_stopping_met")
    out["early_stopping_result"] = (r.get("early_stopping_result") or "").strip() or None
    out["throughput_qps"] = (r.get("result_completed_samples_per_sec") or r.get("result_samples_per_second")
                             or r.get("result_qps_with_loadgen_overhead"))
    out["version"] = r.get("loadgen_version")
    return out


# --------------------------------------------------------------------------
# Early stopping, as LoadGen computes it (loadgen/early_stopping.cc), for per-tenant latencies.


def _log_binom_cdf(t: int, n: int, q: float) -> float:
    """log P(X <= t) for X ~ Binomial(n, q)."""
    import math

    if t >= n:
        return 0.0
    terms = [math.lgamma(n + 1) - math.lgamma(x + 1) - math.lgamma(n - x + 1) + x * math.log(q)
             + (n - x) * math.log1p(-q) for x in range(t + 1)]
    m = max(terms)
    return m + math.log(sum(math.exp(v - m) for v in terms))


def early_stopping_bound(latencies: Sequence[float], percentile: float = 0.99,
                         confidence: float = 0.99) -> Dict[str, Any]:
    """LoadGen's early-stopping estimate of a percentile (its SingleStream rule, loadgen/results.cc): the
    largest ``t >= 1`` such that at most ``t`` of ``n`` queries above the true percentile would have had
    probability below ``1 - confidence``; the estimate is the ``t``-th highest latency (``t - 1`` discarded).
    With too few queries there is no estimate, and the result says how many are needed."""
    import math

    n = len(latencies)
    q = 1.0 - percentile
    limit = math.log(1.0 - confidence)
    rule = f"LoadGen early stopping (percentile {percentile}, confidence {confidence})"
    if n < 2 or _log_binom_cdf(1, n, q) >= limit:
        need = 2
        while _log_binom_cdf(1, need, q) >= limit and need < 10_000_000:
            need *= 2
        lo, hi = need // 2, need
        while lo < hi:
            mid = (lo + hi) // 2
            if _log_binom_cdf(1, mid, q) < limit:
                hi = mid
            else:
                lo = mid + 1
        return {"queries": n, "estimate_s": None, "discarded": None, "queries_needed": lo, "rule": rule}
    lo, hi = 1, n - 1
    while lo < hi:  # the largest t with P(X <= t) < 1 - confidence (monotone in t)
        mid = (lo + hi + 1) // 2
        if _log_binom_cdf(mid, n, q) < limit:
            lo = mid
        else:
            hi = mid - 1
    s = sorted(latencies)
    return {"queries": n, "estimate_s": s[n - lo], "discarded": lo - 1, "queries_needed": None, "rule": rule}
