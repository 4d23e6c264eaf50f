"""Earlier versions of the inference-under-load checks (:mod:`pytest_sits.checks.inference`), kept for replay."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from ...verdict import FAIL, INCONCLUSIVE, PASS, SKIP, WARN, Verdict
from .. import check
from ..inference import check_latency


# Frozen copies of the helpers these versions used: an edit of the current checks never changes an old verdict.

#: Above this share of failed sensor reads in a judged interval, power is not decided.
MAX_FAILED_READ_SHARE = 0.05

#: Above this share of missed sampler ticks, the sampling is not decided.
MAX_OVERRUN_SHARE = 0.05

#: ρ above the theoretical peak by more than this means the peak or the work count is wrong.
RHO_TOLERANCE = 0.05

#: Above this error rate at a judged point, the latency of the remaining queries does not represent the load.
MAX_POINT_ERROR_RATE = 0.01


def _fmt_s(seconds: Optional[float]) -> str:
    if seconds is None:
        return "n/a"
    return f"{seconds * 1e3:.3g} ms" if seconds < 1 else f"{seconds:.3g} s"


def _judged(points: List[Dict[str, Any]], at: float) -> List[Dict[str, Any]]:
    return [p for p in points if p.get("rho") is not None and p["rho"] <= at]


def _sim(ev: Dict[str, Any]) -> str:
    return " [simulated]" if ev.get("simulated") else ""


SLA_KEYS = ("p99_ms", "min_rps", "max_error_rate", "ttft_p99_ms", "tpot_p99_ms")


def tenant_sla(th: Dict[str, Any], name: str) -> Dict[str, Any]:
    """The SLA of tenant ``name``: its own entry in ``tenants``, over the requirement's defaults."""
    base = {k: th.get(k) for k in SLA_KEYS}
    for t in th.get("tenants") or []:
        if t.get("name") == name:
            base.update({k: t[k] for k in SLA_KEYS if k in t})
    return base


def _dist_p99(t: Dict[str, Any], key: str) -> Optional[float]:
    d = t.get(key)
    return d.get("p99_s") if isinstance(d, dict) else None


@check("PLP-SAMPLE", version=1, legacy=True)
def check_sample_v1(ev: Dict[str, Any], th: Dict[str, Any], subject: str) -> Verdict:
    """Version 1, kept so that older reports replay: the largest P99 skew, no interval."""
    req = "PLP-SAMPLE"
    period = float(ev["period_ms"])
    limit = float(th.get("max_skew_periods", 1.0)) * period
    threshold = f"skew <= {th.get('max_skew_periods', 1.0):g} period(s) = {limit:g} ms"
    method = ("per power source: P99 over the records of |sensor timestamp (or read time) - the record's tick|; "
              "the latency and ρ parts of a record refer to the tick itself. " + ev.get("statement", ""))
    srcs = ev["sources"]
    judged = {n: s for n, s in srcs.items() if s.get("fast", True) and n in ev.get("primary_power", srcs)}
    slow = sorted(n for n, s in srcs.items() if not s.get("fast", True))
    note = f"; slow source(s) {', '.join(slow)} reported, not judged (a BMC updates about once a second)" if slow else ""
    if not judged:
        return Verdict(req, SKIP, "no fast power source to judge" + note, threshold=threshold, evidence=ev,
                       method=method)
    if ev.get("ticks") and ev.get("overruns", 0) / (ev["ticks"] + ev["overruns"]) > MAX_OVERRUN_SHARE:
        share = ev["overruns"] / (ev["ticks"] + ev["overruns"])
        return Verdict(req, INCONCLUSIVE, f"the sampler missed {share:.1%} of its {period:g} ms ticks: the machine "
                       "was too loaded to sample at this period", threshold=threshold, evidence=ev, method=method)
    for name, s in judged.items():
        if s["readings"] and s["failed"] == s["readings"]:
            return Verdict(req, INCONCLUSIVE, f"{name}: every one of {s['readings']} readings failed; the skew "
                           "cannot be measured", threshold=threshold, evidence=ev, method=method)
        if s["readings"] and s["failed"] / s["readings"] > MAX_FAILED_READ_SHARE:
            return Verdict(req, INCONCLUSIVE, f"{name}: {s['failed']} of {s['readings']} readings failed "
                           f"({s['failed'] / s['readings']:.1%}): the sensor dropped out", threshold=threshold,
                           evidence=ev, method=method)
    worst_name = max(judged, key=lambda n: judged[n]["p99_ms"] or 0.0)
    worst = judged[worst_name]["p99_ms"] or 0.0
    text = ", ".join(f"{n} P99 {s['p99_ms']:g} ms (max {s['max_ms']:g})" for n, s in sorted(judged.items()))
    unstamped = sorted(n for n, s in judged.items() if not s.get("sensor_stamped"))
    if unstamped:
        note += (f"; {', '.join(unstamped)} give(s) no timestamp of their own: skew measured from the read, the "
                 "value's own age is the sensor's update interval")
    if worst > limit:
        return Verdict(req, FAIL, f"{worst_name}: skew P99 {worst:g} ms exceeds {limit:g} ms ({text}){_sim(ev)}{note}",
                       measured=worst, threshold=threshold, unit="ms", evidence=ev, method=method,
                       remediation="read the sensor's instantaneous field (NVML_FI_DEV_POWER_INSTANT, not the 1 s "
                                   "average) or a faster counter; a lagging sensor cannot be joined with 10 ms "
                                   "latency and load windows")
    return Verdict(req, PASS, f"skew within {limit:g} ms: {text}{_sim(ev)}{note}", measured=worst,
                   threshold=threshold, unit="ms", evidence=ev, method=method)


@check("PLP-PPL", version=1, legacy=True)
def check_ppl_v1(ev: Dict[str, Any], th: Dict[str, Any], subject: str) -> Verdict:
    """Version 1, kept so that older reports replay."""
    req = "PLP-PPL"
    want = float(th.get("window_ms", 10))
    got = float(ev["window_ms"])
    threshold = f"ρ over sliding {want:g} ms windows, against the theoretical peak"
    method = ev.get("rho_rule")
    peak = ev["peak"]
    pts = [p for p in ev["points"] if p.get("rho") is not None]
    if abs(got - want) > 0.01 * want:
        return Verdict(req, FAIL, f"ρ was measured over {got:g} ms windows; the requirement asks {want:g} ms",
                       measured=got, threshold=threshold, unit="ms", evidence=ev, method=method,
                       remediation=f"measure again with PLP-PPL.window_ms = {want:g}")
    if not pts or not peak.get("flops_per_s"):
        return Verdict(req, INCONCLUSIVE, f"no ρ could be computed ({peak.get('source')})", threshold=threshold,
                       evidence=ev, method=method)
    top = max(pts, key=lambda p: p.get("rho_max") or 0.0)
    rho_max, rho_p99 = top.get("rho_max") or 0.0, top.get("rho_p99") or 0.0
    steps = sorted(p["step_ms_p50"] for p in pts if p.get("step_ms_p50") is not None)
    summary = ", ".join(f"{p['target_qps']:.4g} QPS: ρ {p['rho']:.3g} (P99 {p['rho_p99']:.3g})" for p in pts)
    derived = dict(ev, derived={"rho_max": rho_max, "rho_p99_at_highest_load": rho_p99})
    if peak.get("theoretical") and rho_max > 1 + RHO_TOLERANCE:
        return Verdict(req, FAIL, f"a {got:g} ms window did {rho_max:.2f}x the theoretical peak of "
                       f"{peak['flops_per_s'] / 1e12:.4g} TFLOP/s ({peak['source']}): the peak or the work count is "
                       f"wrong{_sim(ev)}", measured=rho_max, threshold=threshold, evidence=derived, method=method,
                       remediation="check the profile's peak (PLP-PPL.peak_tflops or hardware.fp16_dense_tflops, "
                                   "for the model's dtype) and the FLOPs counted per step")
    if steps and steps[len(steps) // 2] > got:
        return Verdict(req, INCONCLUSIVE, f"the engine's steps last {steps[len(steps) // 2]:.3g} ms (median), longer "
                       f"than the {got:g} ms window: the window cannot resolve the load", measured=rho_p99,
                       threshold=threshold, evidence=derived, method=method)
    if not peak.get("theoretical"):
        return Verdict(req, WARN, f"ρ measured over {got:g} ms windows ({summary}), but against the measured maximum "
                       f"({peak['flops_per_s'] / 1e9:.4g} GFLOP/s): the profile states no theoretical peak for this "
                       f"device; set PLP-PPL.peak_tflops{_sim(ev)}", measured=rho_p99, threshold=threshold,
                       evidence=derived, method=method)
    return Verdict(req, PASS, f"ρ over {got:g} ms windows against {peak['flops_per_s'] / 1e12:.4g} TFLOP/s "
                   f"({peak['source']}): {summary}; highest window {rho_max:.3g}{_sim(ev)}", measured=rho_p99,
                   threshold=threshold, evidence=derived, method=method)


@check("PLP-POWER", version=1, legacy=True)
def check_power_v1(ev: Dict[str, Any], th: Dict[str, Any], subject: str) -> Verdict:
    """Version 1, kept so that older reports replay: the largest point power, no interval."""
    req = "PLP-POWER"
    at = float(th.get("at_load_max", 0.85))
    ceiling = th.get("max_power_w")
    threshold = f"P <= {ceiling:g} W at ρ <= {at:g}" if ceiling is not None else f"no ceiling set (ρ <= {at:g})"
    method = "P of a point = energy counter difference / time over the point's run (the primary sources' sum)"
    points = ev["sweep"]
    if not any(p.get("power_w") is not None for p in points):
        if ev.get("primary_power"):  # a sensor was there and never gave a valid reading: not an absence
            return Verdict(req, INCONCLUSIVE, f"the power sensor(s) {', '.join(ev['primary_power'])} gave no valid "
                           "reading at any sweep point", threshold=threshold, evidence=ev, method=method)
        return Verdict(req, SKIP, ev.get("power_reason") or "no power reading at any sweep point",
                       threshold=threshold, evidence=ev, method=method)
    judged = _judged(points, at)
    if not judged:
        lo = min((p["rho"] for p in points if p.get("rho") is not None), default=None)
        return Verdict(req, INCONCLUSIVE, f"no sweep point had ρ <= {at:g} (lowest {lo}); nothing to judge",
                       threshold=threshold, evidence=ev, method=method)
    for p in judged:
        reads = (p.get("power_valid_reads") or 0) + (p.get("power_failed_reads") or 0)
        if p.get("power_w") is None or (reads and p.get("power_failed_reads", 0) / reads > MAX_FAILED_READ_SHARE):
            return Verdict(req, INCONCLUSIVE, f"at {p['target_qps']:.4g} QPS the power sensor failed "
                           f"{p.get('power_failed_reads', 0)} of {reads} readings: power is not decided",
                           threshold=threshold, evidence=ev, method=method)
    worst = max(judged, key=lambda p: p["power_w"])
    listing = ", ".join(f"{p['power_w']:.4g} W @ ρ {p['rho']:.3g}" for p in judged)
    if ceiling is None:
        return Verdict(req, WARN, f"measured {listing}; the profile sets no power ceiling{_sim(ev)}",
                       measured=worst["power_w"], threshold=threshold, unit="W", evidence=ev, method=method)
    if worst["power_w"] > float(ceiling):
        return Verdict(req, FAIL, f"{worst['power_w']:.4g} W at {worst['target_qps']:.4g} QPS (ρ {worst['rho']:.3g}) "
                       f"exceeds {float(ceiling):g} W ({listing}){_sim(ev)}", measured=worst["power_w"],
                       threshold=threshold, unit="W", evidence=ev, method=method,
                       remediation="check the enforced power limit and cooling (DEP-POWERCAP, DEP-THROTTLE); the "
                                   "device draws more than the profile allows at this load")
    return Verdict(req, PASS, f"at most {worst['power_w']:.4g} W over {len(judged)} point(s) with ρ <= {at:g} "
                   f"({listing}){_sim(ev)}", measured=worst["power_w"], threshold=threshold, unit="W", evidence=ev,
                   method=method)


#: The threshold defaults version 2 read its thresholds with (``th.get(key, default)``): a stored report's
#: thresholds may lack a key that the current check, given a resolved profile's, reads without a default.
LATENCY_V2_DEFAULTS = {"at_load_max": 0.70, "metric": "query", "max_latency_us": None}


@check("PLP-LATENCY", version=2, legacy=True)
def check_latency_v2(ev: Dict[str, Any], th: Dict[str, Any], subject: str) -> Verdict:
    """Version 2 (one run per point), replayed by the current rule (version 3): on a point without
    ``latency_runs`` it decides as version 2 did, on the point's binomial order-statistic interval.  Not frozen:
    version 3 keeps version 2's decision for such points (the note at
    :data:`pytest_sits.checks.inference.check_latency`).  The verdict records the thresholds as given."""
    return check_latency(ev, dict(LATENCY_V2_DEFAULTS, **th), subject)


@check("PLP-LATENCY", version=1, legacy=True)
def check_latency_v1(ev: Dict[str, Any], th: Dict[str, Any], subject: str) -> Verdict:
    """Version 1, kept so that older reports replay: the largest P99, no interval."""
    req = "PLP-LATENCY"
    at = float(th.get("at_load_max", 0.70))
    metric = th.get("metric", "query")
    key = "p99_token_latency_s" if metric == "token" else "p99_latency_s"
    what = "P99 latency per output token" if metric == "token" else "P99 query latency"
    ceiling_us = th.get("max_latency_us")
    threshold = (f"{what} <= {ceiling_us:g} µs at ρ <= {at:g}" if ceiling_us is not None
                 else f"no ceiling set (ρ <= {at:g})")
    method = (f"{what} of each LoadGen Server point (LoadGen's own percentile for queries; the per-query log "
              "divided by output tokens per token), at the points whose ρ is at or below the bound")
    judged = _judged(ev["sweep"], at)
    if not judged:
        lo = min((p["rho"] for p in ev["sweep"] if p.get("rho") is not None), default=None)
        return Verdict(req, INCONCLUSIVE, f"no sweep point had ρ <= {at:g} (lowest {lo}); nothing to judge",
                       threshold=threshold, evidence=ev, method=method)
    bad = [p for p in judged if (p.get("error_rate") or 0) > MAX_POINT_ERROR_RATE or p.get(key) is None]
    if bad:
        p = bad[0]
        return Verdict(req, INCONCLUSIVE, f"at {p['target_qps']:.4g} QPS {p.get('error_rate', 1):.1%} of queries failed: "
                       "the latency of the rest does not represent the load", threshold=threshold, evidence=ev,
                       method=method)
    worst = max(judged, key=lambda p: p[key])
    listing = ", ".join(f"{_fmt_s(p[key])} @ ρ {p['rho']:.3g}" for p in judged)
    if ceiling_us is None:
        return Verdict(req, WARN, f"{what}: {listing}; the profile sets no latency ceiling{_sim(ev)}",
                       measured=round(worst[key] * 1e6, 3), threshold=threshold, unit="µs", evidence=ev,
                       method=method)
    if worst[key] * 1e6 > float(ceiling_us):
        return Verdict(req, FAIL, f"{what} {_fmt_s(worst[key])} at {worst['target_qps']:.4g} QPS (ρ {worst['rho']:.3g}) "
                       f"exceeds {float(ceiling_us):g} µs ({listing}){_sim(ev)}", measured=round(worst[key] * 1e6, 3),
                       threshold=threshold, unit="µs", evidence=ev, method=method,
                       remediation="the device serves this model too slowly at loads the requirement covers: check "
                                   "clocks and throttling (DEP-THROTTLE), the host binding (TOPO-NUMA-BIND), and the "
                                   "profile's model size")
    return Verdict(req, PASS, f"{what} at most {_fmt_s(worst[key])} over {len(judged)} point(s) with ρ <= {at:g} "
                   f"({listing}){_sim(ev)}", measured=round(worst[key] * 1e6, 3), threshold=threshold, unit="µs",
                   evidence=ev, method=method)


@check("SVC-SLA", version=2, legacy=True)
def check_sla_v2(ev: Dict[str, Any], th: Dict[str, Any], subject: str) -> Verdict:
    """Version 2, kept so that older reports replay (no interval beside LoadGen's early stopping).  One tenant
    (``ev["tenant"]``) of an SLA run: request latency P99 (with LoadGen's early-stopping estimate),
    time to first token and time per output token P99 where the SLA sets them, throughput, error rate.  A run
    where the client was the limit is INCONCLUSIVE, never FAIL."""
    req = "SVC-SLA"
    t = ev["tenant"]
    sla = tenant_sla(th, t["name"])
    p99_ms, min_rps, max_err = float(sla["p99_ms"]), float(sla["min_rps"]), float(sla["max_error_rate"])
    ttft_ms, tpot_ms = sla.get("ttft_p99_ms"), sla.get("tpot_p99_ms")
    threshold = (f"P99 <= {p99_ms:g} ms" + (f", TTFT P99 <= {float(ttft_ms):g} ms" if ttft_ms is not None else "")
                 + (f", TPOT P99 <= {float(tpot_ms):g} ms" if tpot_ms is not None else "")
                 + f", throughput >= {min_rps:g} req/s, error rate < {max_err:g}")
    method = ev.get("rule")
    es = t.get("early_stopping") or {}
    p99 = (t.get("latency") or {}).get("p99_s", t.get("p99_latency_s"))
    ttft, tpot = _dist_p99(t, "ttft"), _dist_p99(t, "tpot")
    kinds = t.get("error_kinds") or {}
    figures = (f"tenant {t['name']}: P99 {_fmt_s(p99)} (the measured 99th percentile of {t['issued']} requests"
               f"{', timeouts censored at the deadline' if t.get('timeouts') else ''}); early-stopping estimate "
               f"{_fmt_s(es.get('estimate_s'))} (LoadGen's 99%-confidence bound on the P99)")
    if ttft is not None:
        figures += f"; TTFT P99 {_fmt_s(ttft)}, TPOT P99 {_fmt_s(tpot)}"
    if t.get("output_tokens_per_s") is not None:
        figures += f"; {t['output_tokens_per_s']:.4g} output tokens/s"
    figures += (f"; {t['throughput_rps']:.4g} req/s of {t['offered_rps']:.4g} offered"
                + (f", goodput {t['goodput_rps']:.4g} req/s" if t.get("goodput_rps") is not None else "")
                + f"; error rate {(t.get('error_rate') or 0):.3%} ({t['errors']} of {t['issued']}: "
                f"{kinds or 'none'})")
    client = ev.get("client") or {}
    derived = dict(ev, derived={"p99_s": p99, "early_stopping_estimate_s": es.get("estimate_s"),
                                "ttft_p99_s": ttft, "tpot_p99_s": tpot,
                                "measured_is": "the P99 of request latency, in ms (not the early-stopping estimate)"})
    kw: Dict[str, Any] = dict(threshold=threshold, evidence=derived, method=method)
    measured = round(p99 * 1e3, 3) if p99 is not None else None
    if not t["issued"]:
        return Verdict(req, INCONCLUSIVE, f"tenant {t['name']} received no query", **kw)
    fails, client_bound = [], []
    errors_not_timeouts = (t.get("errors") or 0) - (t.get("timeouts") or kinds.get("timeout", 0))
    if (t.get("error_rate") or 0) >= max_err:
        fails.append(f"error rate {t['error_rate']:.3%} >= {max_err:.3%}")
        if errors_not_timeouts / max(1, t["issued"]) < max_err:
            client_bound.append(fails[-1])  # timeouts alone: queueing in a saturated client can cause them
    if p99 is None or p99 * 1e3 > p99_ms:
        fails.append(f"P99 {_fmt_s(p99)} > {p99_ms:g} ms")
        client_bound.append(fails[-1])
    if ttft_ms is not None and (ttft is None or ttft * 1e3 > float(ttft_ms)):
        fails.append(f"TTFT P99 {_fmt_s(ttft)} > {float(ttft_ms):g} ms" if ttft is not None else
                     f"TTFT not measured (the run did not stream) against its {float(ttft_ms):g} ms target")
        client_bound.append(fails[-1])
    if tpot_ms is not None and (tpot is None or tpot * 1e3 > float(tpot_ms)):
        fails.append(f"TPOT P99 {_fmt_s(tpot)} > {float(tpot_ms):g} ms" if tpot is not None else
                     f"TPOT not measured (the run did not stream, or answers had one token) against its "
                     f"{float(tpot_ms):g} ms target")
        client_bound.append(fails[-1])
    if t["throughput_rps"] < min_rps and t["offered_rps"] >= min_rps:
        fails.append(f"throughput {t['throughput_rps']:.4g} < {min_rps:g} req/s")
        client_bound.append(fails[-1])
    if fails and client.get("limited") and len(client_bound) == len(fails):
        return Verdict(req, INCONCLUSIVE, f"{'; '.join(fails)}, but {client.get('statement')} — {figures}{_sim(ev)}",
                       measured=measured, unit="ms", **kw)
    if fails:
        return Verdict(req, FAIL, f"{'; '.join(fails)} — {figures}{_sim(ev)}", measured=measured, unit="ms",
                       remediation="the service does not hold this tenant's SLA at the offered load: lower the load, "
                                   "add capacity, or look at the errors in the evidence (requests_file lists every "
                                   "request)", **kw)
    if t["offered_rps"] < min_rps:
        return Verdict(req, INCONCLUSIVE, f"the run offered tenant {t['name']} {t['offered_rps']:.4g} req/s, below its "
                       f"throughput floor of {min_rps:g}: raise SVC-SLA.target_qps — {figures}", **kw)
    if es.get("estimate_s") is None:
        return Verdict(req, INCONCLUSIVE, f"P99 {_fmt_s(p99)} is within {p99_ms:g} ms, but LoadGen's early stopping "
                       f"needs {es.get('queries_needed')} queries and the tenant had {es.get('queries')}: lengthen "
                       f"SVC-SLA.duration_s — {figures}", measured=measured, unit="ms", **kw)
    if es["estimate_s"] * 1e3 > p99_ms:
        return Verdict(req, INCONCLUSIVE, f"P99 {_fmt_s(p99)} is within {p99_ms:g} ms but its early-stopping "
                       f"estimate {_fmt_s(es['estimate_s'])} is not: too few queries to claim it with 99% confidence "
                       f"— {figures}", measured=measured, unit="ms", **kw)
    return Verdict(req, PASS, f"{figures}{_sim(ev)}", measured=measured, unit="ms", **kw)


@check("SVC-COLDSTART", version=1, legacy=True)
def check_coldstart_v1(ev: Dict[str, Any], th: Dict[str, Any], subject: str) -> Verdict:
    """Version 1, kept so that older reports replay: one cold start, no interval."""
    req = "SVC-COLDSTART"
    ceiling = th.get("max_s")
    threshold = f"<= {ceiling:g} s to the first token" if ceiling is not None else "reported (no ceiling set)"
    method = "fresh interpreter; stages stamped with perf_counter_ns from the parent's spawn to the first token"
    stages = ", ".join(f"{s['stage']} {s['seconds']:.3g} s" for s in ev["stages"])
    cache = (ev.get("page_cache") or {}).get("state", "unknown")
    text = f"{ev['total_s']:.3g} s to the first token ({stages}); page cache {cache}{_sim(ev)}"
    if ceiling is None:
        return Verdict(req, WARN, f"{text}; the profile sets no ceiling", measured=ev["total_s"], threshold=threshold,
                       unit="s", evidence=ev, method=method)
    if ev["total_s"] > float(ceiling):
        slowest = max(ev["stages"], key=lambda s: s["seconds"])
        return Verdict(req, FAIL, f"{text}: over {float(ceiling):g} s; slowest stage {slowest['stage']}",
                       measured=ev["total_s"], threshold=threshold, unit="s", evidence=ev, method=method,
                       remediation=f"the {slowest['stage'].replace('_', ' ')} stage dominates: keep the runtime and "
                                   "weights on local fast storage (page cache warm), pre-create the device context")
    return Verdict(req, PASS, text, measured=ev["total_s"], threshold=threshold, unit="s", evidence=ev, method=method)


@check("SVC-FRAG", version=1, legacy=True)
def check_frag_v1(ev: Dict[str, Any], th: Dict[str, Any], subject: str) -> Verdict:
    """Version 1, kept so that older reports replay: the KV pool's fragmentation at the step of peak occupancy (one
    sample), or the device allocator's (``ev["view"]``)."""
    req = "SVC-FRAG"
    limit = float(th.get("max_fraction", 0.03))
    threshold = f"fragmentation <= {limit:.1%}"
    frac = float(ev["fraction"])
    if ev["view"] == "kv-pool":
        text = (f"KV pool: {frac:.2%} of the allocated slots unused at peak occupancy ({ev['peak_blocks_used']} of "
                f"{ev['pool_blocks']} blocks of {ev['block_tokens']} tokens; time-weighted "
                f"{(ev.get('fraction_time_weighted') or 0):.2%})")
        fix = "use smaller KV blocks (model.block_tokens), or a serving stack with a paged KV allocator"
    else:
        text = (f"allocator: {frac:.2%} of reserved memory in inactive split blocks at peak "
                f"({ev['inactive_split_peak_bytes'] / 2**20:.4g} of {ev['reserved_peak_bytes'] / 2**20:.4g} MiB); "
                f"{ev.get('unused_reserved_fraction', 0):.2%} reserved but unallocated")
        fix = ("set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, or preallocate the KV cache once at start "
               "(as paged serving stacks do)")
    if frac > limit:
        return Verdict(req, FAIL, f"{text}: over {limit:.1%}{_sim(ev)}", measured=frac, threshold=threshold,
                       evidence=ev, method=ev.get("method"), remediation=fix)
    return Verdict(req, PASS, f"{text}{_sim(ev)}", measured=frac, threshold=threshold, evidence=ev,
                   method=ev.get("method"))


@check("SVC-SLA", version=1, legacy=True)
def check_sla_v1(ev: Dict[str, Any], th: Dict[str, Any], subject: str) -> Verdict:
    """Version 1 (reports of pytest-sits 0.1), kept so that they replay.

    One tenant (``ev["tenant"]``) of an SLA run."""
    req = "SVC-SLA"
    t = ev["tenant"]
    sla = tenant_sla(th, t["name"])
    p99_ms, min_rps, max_err = float(sla["p99_ms"]), float(sla["min_rps"]), float(sla["max_error_rate"])
    threshold = f"P99 <= {p99_ms:g} ms, throughput >= {min_rps:g} req/s, error rate < {max_err:g}"
    method = ev.get("rule")
    es = t.get("early_stopping") or {}
    p99 = t.get("p99_latency_s")
    figures = (f"tenant {t['name']}: P99 {_fmt_s(p99)} (early-stopping estimate {_fmt_s(es.get('estimate_s'))}), "
               f"{t['throughput_rps']:.4g} req/s of {t['offered_rps']:.4g} offered, error rate "
               f"{(t.get('error_rate') or 0):.3%} ({t['errors']} of {t['issued']}: {t.get('error_kinds') or 'none'})")
    if not t["issued"]:
        return Verdict(req, INCONCLUSIVE, f"tenant {t['name']} received no query", threshold=threshold, evidence=ev,
                       method=method)
    fails = []
    if (t.get("error_rate") or 0) >= max_err:
        fails.append(f"error rate {t['error_rate']:.3%} >= {max_err:.3%}")
    if p99 is None or p99 * 1e3 > p99_ms:
        fails.append(f"P99 {_fmt_s(p99)} > {p99_ms:g} ms")
    if t["throughput_rps"] < min_rps and t["offered_rps"] >= min_rps:
        fails.append(f"throughput {t['throughput_rps']:.4g} < {min_rps:g} req/s")
    if fails:
        return Verdict(req, FAIL, f"{'; '.join(fails)} — {figures}{_sim(ev)}", measured=p99 and round(p99 * 1e3, 3),
                       threshold=threshold, unit="ms", evidence=ev, method=method,
                       remediation="the service does not hold this tenant's SLA at the offered load: lower the load, "
                                   "add capacity, or look at the errors in the evidence")
    if t["offered_rps"] < min_rps:
        return Verdict(req, INCONCLUSIVE, f"the run offered tenant {t['name']} {t['offered_rps']:.4g} req/s, below its "
                       f"throughput floor of {min_rps:g}: raise SVC-SLA.target_qps — {figures}", threshold=threshold,
                       evidence=ev, method=method)
    if es.get("estimate_s") is None:
        return Verdict(req, INCONCLUSIVE, f"P99 {_fmt_s(p99)} is within {p99_ms:g} ms, but LoadGen's early stopping "
                       f"needs {es.get('queries_needed')} queries and the tenant had {es.get('queries')}: lengthen "
                       f"SVC-SLA.duration_s — {figures}", measured=round(p99 * 1e3, 3), threshold=threshold,
                       unit="ms", evidence=ev, method=method)
    if es["estimate_s"] * 1e3 > p99_ms:
        return Verdict(req, INCONCLUSIVE, f"P99 {_fmt_s(p99)} is within {p99_ms:g} ms but its early-stopping "
                       f"estimate {_fmt_s(es['estimate_s'])} is not: too few queries to claim it with 99% confidence "
                       f"— {figures}", measured=round(p99 * 1e3, 3), threshold=threshold, unit="ms", evidence=ev,
                       method=method)
    return Verdict(req, PASS, f"{figures}{_sim(ev)}", measured=round(es["estimate_s"] * 1e3, 3), threshold=threshold,
                   unit="ms", evidence=ev, method=method)
