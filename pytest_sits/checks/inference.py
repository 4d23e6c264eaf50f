"""Inference under load: PLP-SAMPLE, PLP-PPL, PLP-POWER, PLP-LATENCY, SVC-SLA, SVC-COLDSTART, SVC-FRAG.

Pure checks on the evidence of :mod:`pytest_sits.conditions.inference`.  The PLP-POWER and PLP-LATENCY
evidence carries the whole sweep (one point per load level: target QPS, ρ, power, P50/P99 latency,
throughput, tokens/s, error rate, energy); the verdicts apply the ceilings to the points whose ρ is at or
below the requirement's bound and name the worst.
"""

from __future__ import annotations

import math

from typing import Any, Dict, List, Optional, Tuple

from ..catalogue import CATALOGUE
from . import Finding, check
from .interval import (AT_LEAST, AT_MOST, FAIL_, PASS_, RUNS_METHOD, UNDECIDED, batch_means, combine, decide,
                       describe, exact, level, mean_interval, percentile_decision, proportion_interval, rate_interval,
                       rule_text, undecided_text)
from ..verdict import FAIL, INCONCLUSIVE, PASS, SKIP, WARN, Verdict, number

#: Above this share of failed sensor reads in a judged interval, power is not decided.
MAX_FAILED_READ_SHARE = 0.05
#: Above this share of missed sampler ticks, the sampling is not decided.
MAX_OVERRUN_SHARE = 0.05
#: ρ above the theoretical peak by more than this means the peak or the work count is wrong.
RHO_TOLERANCE = 0.05
#: A sweep point whose maximum throughput, measured again before and after it, moved by more than this share of the
#: maximum its load level was planned from ran at a load other than planned: its latency cannot FAIL the device.
LOAD_REF_TOLERANCE = 0.03
#: The runs of a sweep point PLP-LATENCY decides on, as its declaration's trials say (two, then one more per look
#: while its interval is undecided, at most four): the sweep's default plan, and the run's plan before a budget
#: cuts it; ``looks``: how many looks reach the cap.
_RUNS = CATALOGUE["PLP-LATENCY"].trials
assert _RUNS is not None and _RUNS.step > 0
LATENCY_RUNS = {"initial": _RUNS.initial, "step": _RUNS.step, "cap": _RUNS.cap, "minimum": _RUNS.minimum,
                "looks": 1 + math.ceil((_RUNS.cap - _RUNS.initial) / _RUNS.step)}


def _load_tolerance(ev: Dict[str, Any], p: Dict[str, Any]) -> float:
    """How far a sweep point's maximum may move before its load is not the planned one: LOAD_REF_TOLERANCE, or the
    resolution of the Offline runs that measured it where that is coarser (1/sqrt(n) for n queries: the spread of
    a mean over queries whose work varies about as much as its mean)."""
    counts = [n for n in list(p.get("max_queries_around") or []) + [(ev.get("max") or {}).get("queries")] if n]
    return max(LOAD_REF_TOLERANCE, 1.0 / math.sqrt(min(counts))) if counts else LOAD_REF_TOLERANCE


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


# --------------------------------------------------------------------------


SLA_KEYS = ("p99_ms", "min_rps", "max_error_rate", "ttft_p99_ms", "tpot_p99_ms")


def tenant_sla(th: Dict[str, Any], name: str) -> Dict[str, Any]:
    """The SLA of tenant ``name``: its own entry in ``tenants``, over the requirement's defaults."""
    base = {k: th[k] for k in SLA_KEYS}
    for t in th["tenants"] or []:
        if t.get("name") == name:
            base.update({k: t[k] for k in SLA_KEYS if k in t})
    return base


def _dist_p99(t: Dict[str, Any], key: str) -> Optional[float]:
    d = t.get(key)
    return d.get("p99_s") if isinstance(d, dict) else None


# --------------------------------------------------------------------------
# Decisions under noise (PLP-SAMPLE, PLP-PPL, PLP-POWER, PLP-LATENCY, SVC-FRAG, SVC-COLDSTART version 2; SVC-SLA
# version 3).  Percentiles are bounded by the binomial order statistics of their samples (the rule LoadGen's early
# stopping applies), powers by the t-interval over the blocks of a point, proportions by Clopper-Pearson, rates by
# Poisson.  The sweep runs once: its queries are the trials, and an undecided verdict says how many more queries
# (and seconds of load) would decide.

def _ms(x: float) -> str:
    return f"{number(x)} ms"


def _us(x: float) -> str:
    return f"{number(x * 1e6)} µs"


def _w(x: float) -> str:
    return f"{number(x)} W"


def _per_query(p: Dict[str, Any]) -> Optional[float]:
    return float(p["duration_s"]) / p["queries"] if p.get("queries") and p.get("duration_s") else None


def sample_decisions(ev: Dict[str, Any], th: Dict[str, Any]) -> List[Dict[str, Any]]:
    """Per judged power source and sweep point: the P99 of the skew (ms) with its order-statistic interval, against
    ``max_skew_periods`` periods."""
    limit = float(th["max_skew_periods"]) * float(ev["period_ms"])
    srcs = ev["sources"]
    out = []
    for name, s in sorted(srcs.items()):
        if not s.get("fast", True) or name not in ev.get("primary_power", srcs):
            continue
        for k, tail in enumerate(s.get("tails") or []):
            d = percentile_decision(tail, limit, AT_MOST, show=_ms, what=f"{name} skew P99")
            d.update(source=name, point=k)
            out.append(d)
    return out


@check("PLP-SAMPLE", version=2, default_subject="host")
def check_sample(ev: Dict[str, Any], th: Dict[str, Any], f: Finding) -> Verdict:
    """Per fast primary power source and sweep point: the P99 of |reading timestamp - the record's tick|, with its
    binomial order-statistic interval, within ``max_skew_periods`` sampling periods: PASS when every interval's
    high end is within, FAIL when one's low end is beyond, else INCONCLUSIVE."""
    period = float(ev["period_ms"])
    limit = float(th["max_skew_periods"]) * period
    threshold = f"skew <= {th['max_skew_periods']:g} period(s) = {limit:g} ms"
    method = ("per power source and sweep point: the P99 over the records of |sensor timestamp (or read time) - the "
              "record's tick|, with its binomial order-statistic interval; the latency and ρ parts of a record refer "
              "to the tick itself. " + ev.get("statement", ""))
    srcs = ev["sources"]
    judged = {n: s for n, s in srcs.items() if s.get("fast", True) and n in ev.get("primary_power", srcs)}
    slow = sorted(n for n, s in srcs.items() if not s.get("fast", True))
    note = f"; slow source(s) {', '.join(slow)} reported, not judged (a BMC updates about once a second)" if slow else ""
    f.set(threshold=threshold, evidence=ev, method=method)
    if not judged:
        return f(SKIP, "no fast power source to judge" + note)
    if ev.get("ticks") and ev.get("overruns", 0) / (ev["ticks"] + ev["overruns"]) > MAX_OVERRUN_SHARE:
        share = ev["overruns"] / (ev["ticks"] + ev["overruns"])
        return f(INCONCLUSIVE, f"the sampler missed {share:.1%} of its {period:g} ms ticks: the machine was too loaded "
                 "to sample at this period")
    for name, s in judged.items():
        if s["readings"] and s["failed"] == s["readings"]:
            return f(INCONCLUSIVE, f"{name}: every one of {s['readings']} readings failed; the skew cannot be measured")
        if s["readings"] and s["failed"] / s["readings"] > MAX_FAILED_READ_SHARE:
            return f(INCONCLUSIVE, f"{name}: {s['failed']} of {s['readings']} readings failed "
                     f"({s['failed'] / s['readings']:.1%}): the sensor dropped out")
    ds = sample_decisions(ev, th)
    if not ds:
        return f(INCONCLUSIVE, "no skew sample of a judged source was kept")
    d = combine(ds)
    worst = max(ds, key=lambda x: x["estimate"] if x["estimate"] is not None else -1.0)
    ev = dict(ev, decisions=ds, decision=d)
    method += f" Decided per source and point: {d['rule']}"
    text = f"{worst['source']} skew P99 {describe(worst, _ms)} at sweep point {worst['point']}"
    unstamped = sorted(n for n, s in judged.items() if not s.get("sensor_stamped"))
    if unstamped:
        note += (f"; {', '.join(unstamped)} give(s) no timestamp of their own: skew measured from the read, the "
                 "value's own age is the sensor's update interval")
    f.set(measured=worst["estimate"], unit="ms", evidence=ev, method=method)
    if d["outcome"] == FAIL_:
        return f(FAIL, f"{d['source']}: skew P99 {describe(d, _ms)} exceeds {limit:g} ms at sweep point "
                 f"{d['point']}{_sim(ev)}{note}",
                 remediation="read the sensor's instantaneous field (NVML_FI_DEV_POWER_INSTANT, not the 1 s average) "
                             "or a faster counter; a lagging sensor cannot be joined with 10 ms latency and load windows")
    if d["outcome"] == PASS_:
        return f(PASS, f"skew within {limit:g} ms: worst {text}{_sim(ev)}{note}")
    return f(INCONCLUSIVE, f"{text}; {d['source']} at point {d['point']}: {undecided_text(d, _ms, 'records')}"
             f"{_sim(ev)}{note}")


@check("PLP-PPL", version=2, default_subject="host")
def check_ppl(ev: Dict[str, Any], th: Dict[str, Any], f: Finding) -> Verdict:
    """ρ over sliding ``window_ms`` windows against the theoretical peak.  FAIL on the wrong window, or when a
    window did more than the peak allows (one such window is impossible, not noise: the peak or the work count
    is wrong); the P99 of ρ at the highest load is reported with its binomial order-statistic interval."""
    want = float(th["window_ms"])
    got = float(ev["window_ms"])
    threshold = f"ρ over sliding {want:g} ms windows, against the theoretical peak"
    method = ev.get("rho_rule")
    peak = ev["peak"]
    pts = [p for p in ev["points"] if p.get("rho") is not None]
    f.set(threshold=threshold, evidence=ev, method=method)
    if abs(got - want) > 0.01 * want:
        return f(FAIL, f"ρ was measured over {got:g} ms windows; the requirement asks {want:g} ms", measured=got,
                 unit="ms", remediation=f"measure again with {f.requirement}.window_ms = {want:g}")
    if not pts or not peak.get("flops_per_s"):
        return f(INCONCLUSIVE, f"no ρ could be computed ({peak.get('source')})")
    top = max(pts, key=lambda p: p.get("rho_max") or 0.0)
    highest = max(pts, key=lambda p: p.get("target_qps") or 0.0)
    rho_max, rho_p99 = top.get("rho_max") or 0.0, top.get("rho_p99") or 0.0
    d = percentile_decision(highest["rho_tail"], None, what="ρ P99 at the highest load") if highest.get(
        "rho_tail") else exact(highest.get("rho_p99"))
    d["rule"] = (f"FAIL when one {want:g} ms window exceeds the theoretical peak by more than {RHO_TOLERANCE:.0%} "
                 "(impossible: the peak or the work count is wrong) or the window is not the one asked; the P99 of ρ "
                 "is reported with its interval")
    steps = sorted(p["step_ms_p50"] for p in pts if p.get("step_ms_p50") is not None)
    summary = ", ".join(f"{p['target_qps']:.4g} QPS: ρ {p['rho']:.3g} (P99 {p['rho_p99']:.3g})" for p in pts)
    derived = dict(ev, derived={"rho_max": rho_max, "rho_p99_at_highest_load": rho_p99}, decision=d)
    shown = f"P99 at {highest['target_qps']:.4g} QPS {describe(d, lambda x: f'{x:.3g}')}"
    f.set(evidence=derived, measured=rho_p99)
    if peak.get("theoretical") and rho_max > 1 + RHO_TOLERANCE:
        return f(FAIL, f"a {got:g} ms window did {rho_max:.2f}x the theoretical peak of "
                 f"{peak['flops_per_s'] / 1e12:.4g} TFLOP/s ({peak['source']}): the peak or the work count is "
                 f"wrong{_sim(ev)}", measured=rho_max,
                 remediation=f"check the profile's peak ({f.requirement}.peak_tflops or hardware.fp16_dense_tflops, for "
                             "the model's dtype) and the FLOPs counted per step")
    if steps and steps[len(steps) // 2] > got:
        return f(INCONCLUSIVE, f"the engine's steps last {steps[len(steps) // 2]:.3g} ms (median), longer than the "
                 f"{got:g} ms window: the window cannot resolve the load")
    if peak.get("unit") == "output tokens/s":  # a served deployment: its FLOPs are not counted
        return f(WARN, f"ρ measured over {got:g} ms windows as the share of the server's saturated output rate "
                 f"({peak['flops_per_s']:.4g} tokens/s) ({summary}; {shown}): a remote server's FLOPs are not "
                 f"counted, so ρ against the theoretical peak is not decided{_sim(ev)}")
    if not peak.get("theoretical"):
        return f(WARN, f"ρ measured over {got:g} ms windows ({summary}; {shown}), but against the measured maximum "
                 f"({peak['flops_per_s'] / 1e9:.4g} GFLOP/s): the profile states no theoretical peak for this device; "
                 f"set {f.requirement}.peak_tflops{_sim(ev)}")
    return f(PASS, f"ρ over {got:g} ms windows against {peak['flops_per_s'] / 1e12:.4g} TFLOP/s ({peak['source']}): "
             f"{summary}; {shown}; highest window {rho_max:.3g}{_sim(ev)}")


def power_decisions(points: List[Dict[str, Any]], ceiling: Optional[float]) -> List[Dict[str, Any]]:
    """Per judged point: its power, the t-interval over the point's blocks of time, against ``ceiling``."""
    out = []
    for p in points:
        blocks = [float(x) for x in p.get("power_blocks_w") or []]
        stat = mean_interval(blocks, method="t-interval over batch means") if blocks else exact(p["power_w"])
        d = decide(stat, float(ceiling) if ceiling is not None else None, AT_MOST, show=_w,
                   what=f"power at {p['target_qps']:.4g} QPS")
        d.update(target_qps=p["target_qps"], rho=p["rho"])
        out.append(d)
    return out


@check("PLP-POWER", version=2, default_subject="host")
def check_power(ev: Dict[str, Any], th: Dict[str, Any], f: Finding) -> Verdict:
    """Per sweep point with ρ at or below ``at_load_max``: its power (energy over time) with the t-interval over the
    point's blocks of time, against ``max_power_w``: PASS when every interval's high end is within, FAIL when one's
    low end is above, else INCONCLUSIVE."""
    at = float(th["at_load_max"])
    ceiling = th["max_power_w"]
    threshold = f"P <= {ceiling:g} W at ρ <= {at:g}" if ceiling is not None else f"no ceiling set (ρ <= {at:g})"
    method = ("P of a point = energy counter difference / time over the point's run (the primary sources' sum); its "
              "interval: the t-interval over the point's blocks of time (batch means)")
    points = ev["sweep"]
    if ev.get("power_judged"):  # a served deployment on several accelerators
        method += "; " + str(ev["power_judged"])
    f.set(threshold=threshold, evidence=ev, method=method)
    if not any(p.get("power_w") is not None for p in points):
        if ev.get("primary_power"):
            return f(INCONCLUSIVE, f"the power sensor(s) {', '.join(ev['primary_power'])} gave no valid reading at any "
                     "sweep point")
        return f(SKIP, ev.get("power_reason") or "no power reading at any sweep point")
    judged = _judged(points, at)
    if not judged:
        lo = min((p["rho"] for p in points if p.get("rho") is not None), default=None)
        return f(INCONCLUSIVE, f"no sweep point had ρ <= {at:g} (lowest {lo}); nothing to judge")
    for p in judged:
        reads = (p.get("power_valid_reads") or 0) + (p.get("power_failed_reads") or 0)
        if p.get("power_w") is None or (reads and p.get("power_failed_reads", 0) / reads > MAX_FAILED_READ_SHARE):
            return f(INCONCLUSIVE, f"at {p['target_qps']:.4g} QPS the power sensor failed "
                     f"{p.get('power_failed_reads', 0)} of {reads} readings: power is not decided")
    ds = power_decisions(judged, ceiling)
    d = combine(ds) if ceiling is not None else max(ds, key=lambda x: x["estimate"])
    worst = max(ds, key=lambda x: x["estimate"])
    ev = dict(ev, decisions=ds, decision=d)
    method += f"; decided per point: {d['rule']}"
    listing = ", ".join(f"{describe(x, _w)} @ ρ {x['rho']:.3g}" for x in ds)
    f.set(measured=worst["estimate"], unit="W", evidence=ev, method=method)
    if ceiling is None:
        return f(WARN, f"measured {listing}; the profile sets no power ceiling{_sim(ev)}")
    if d["outcome"] == FAIL_:
        return f(FAIL, f"{describe(d, _w)} at {d['target_qps']:.4g} QPS (ρ {d['rho']:.3g}) exceeds {float(ceiling):g} W "
                 f"({listing}){_sim(ev)}",
                 remediation="check the enforced power limit and cooling (DEP-POWERCAP, DEP-THROTTLE); the device draws "
                             "more than the profile allows at this load")
    if d["outcome"] == PASS_:
        return f(PASS, f"at most {_w(worst['estimate'])} over {len(judged)} point(s) with ρ <= {at:g} ({listing})"
                 f"{_sim(ev)}")
    return f(INCONCLUSIVE, f"at {d['target_qps']:.4g} QPS: {undecided_text(d, _w, 'blocks')} ({listing}){_sim(ev)}")


def latency_point_decision(p: Dict[str, Any], th: Dict[str, Any], looks: Optional[int] = None) -> Dict[str, Any]:
    """One point's P99 latency (per query, or per output token) against ``max_latency_us``: with two runs or more
    (``latency_runs``), the mean of the runs' P99s and its t-interval (each look at its share of the error rate);
    with one run, its binomial order-statistic interval (``latency_tail``)."""
    token = th["metric"] == "token"
    ceiling = th["max_latency_us"]
    key = "p99_token_latency_s" if token else "p99_latency_s"
    thr = float(ceiling) / 1e6 if ceiling is not None else None
    runs = [r for r in p.get("latency_runs") or [] if isinstance(r, dict) and r.get(key) is not None]
    tail = p.get("token_latency_tail" if token else "latency_tail")
    if len(runs) >= 2:
        looks = looks or int((p.get("latency_sequential") or {}).get("looks") or 1)
        stat = mean_interval([float(r[key]) for r in runs], level(looks), method=RUNS_METHOD, floor=0.0)
        d = decide(stat, thr, AT_MOST, show=_us, what=f"P99 at {p['target_qps']:.4g} QPS",
                   seconds_per_trial=p.get("planned_s"))
    elif tail:
        d = percentile_decision(tail, thr, AT_MOST, show=_us, what=f"P99 at {p['target_qps']:.4g} QPS",
                                seconds_per_sample=_per_query(p))
    else:
        d = decide(exact(p.get(key)), thr, AT_MOST, show=_us)
    d.update(target_qps=p["target_qps"], rho=p.get("rho"))
    return d


def latency_decisions(points: List[Dict[str, Any]], th: Dict[str, Any]) -> List[Dict[str, Any]]:
    """Per judged point: :func:`latency_point_decision`."""
    return [latency_point_decision(p, th) for p in points]


#: Version 3 repeats each point until the rule decides; version 2's reports (one run per point) replay with this
#: same rule (:mod:`.legacy.inference` registers version 2 as a call of it): its decision on a point without
#: ``latency_runs`` must stay version 2's.
@check("PLP-LATENCY", version=3, default_subject="host")
def check_latency(ev: Dict[str, Any], th: Dict[str, Any], f: Finding) -> Verdict:
    """Per sweep point with ρ at or below ``at_load_max``: the P99 latency (per query, or per output token with
    ``metric: token``) against ``max_latency_us``, with the t-interval over the point's runs where it ran more than
    once (version 3's evidence: the sweep repeats each point until this rule decides), else with its binomial
    order-statistic interval over the point's queries: PASS when every interval's high end is within, FAIL when
    one's low end is above, else INCONCLUSIVE (with the runs, or queries, and seconds at that load, that would
    decide).  Version 2's evidence (one run per point) decides as version 2 did."""
    at = float(th["at_load_max"])
    metric = th["metric"]
    what = "P99 latency per output token" if metric == "token" else "P99 query latency"
    ceiling_us = th["max_latency_us"]
    threshold = (f"{what} <= {ceiling_us:g} µs at ρ <= {at:g}" if ceiling_us is not None
                 else f"no ceiling set (ρ <= {at:g})")
    method = (f"{what} of each LoadGen Server point, from the per-query log (issued to completed; per output token: "
              "divided by the query's output tokens), with its binomial order-statistic interval, at the points whose "
              "ρ is at or below the bound")
    key = "p99_token_latency_s" if metric == "token" else "p99_latency_s"
    repeated = [p for p in ev["sweep"] if len(p.get("latency_runs") or []) >= 2]
    if repeated:
        rp = dict(LATENCY_RUNS, **((repeated[0].get("latency_sequential") or {}).get("plan") or {}))
        method += (f"; a point run more than once (the sequential rule: {rp['initial']} runs, then "
                   f"{rp['step']} more per look while undecided, at most {rp['cap']}) is decided "
                   "on the mean of its runs' P99s with the t-interval over the runs, each look at its share of the "
                   "error rate: a run's P99 moves from run to run more than its order-statistic interval says, as "
                   "queries queue behind each other")
    judged = _judged(ev["sweep"], at)
    f.set(threshold=threshold, evidence=ev, method=method)
    if not judged:
        lo = min((p["rho"] for p in ev["sweep"] if p.get("rho") is not None), default=None)
        return f(INCONCLUSIVE, f"no sweep point had ρ <= {at:g} (lowest {lo}); nothing to judge")
    bad = [p for p in judged if (p.get("error_rate") or 0) > MAX_POINT_ERROR_RATE or p.get(key) is None]
    if bad:
        p = bad[0]
        return f(INCONCLUSIVE, f"at {p['target_qps']:.4g} QPS {p.get('error_rate', 1):.1%} of queries failed: the "
                 "latency of the rest does not represent the load")
    ds = latency_decisions(judged, th)
    worst = max(ds, key=lambda x: x["estimate"] if x["estimate"] is not None else -1.0)
    d = combine(ds) if ceiling_us is not None else worst
    ev = dict(ev, decisions=ds, decision=d)
    method += f"; decided per point: {d['rule']}"
    listing = ", ".join(f"{describe(x, _us)} @ ρ {x['rho']:.3g}" for x in ds)
    f.set(measured=round(worst["estimate"] * 1e6, 3), unit="µs", evidence=ev, method=method)
    if ceiling_us is None:
        return f(WARN, f"{what}: {listing}; the profile sets no latency ceiling{_sim(ev)}")
    failed = [(x, p) for x, p in zip(ds, judged) if x["outcome"] == FAIL_]
    moved = [(x, p) for x, p in failed if (p.get("reference_moved") or 0.0) > _load_tolerance(ev, p)]
    if failed and len(moved) == len(failed):
        x, p = moved[0]
        b, a = p["max_qps_around"]
        return f(INCONCLUSIVE, f"{what} {describe(x, _us)} at {x['target_qps']:.4g} QPS exceeds {float(ceiling_us):g} "
                 f"µs, but the device's speed moved under the sweep (its maximum throughput {number(b)} and "
                 f"{number(a)} queries/s before and after that point against the {number(ev['max']['qps'])} the load "
                 f"levels were planned from; more than {LOAD_REF_TOLERANCE:.0%} apart, or than the "
                 f"{_load_tolerance(ev, p):.0%} the maximum's measurement resolves): the point ran at another load than "
                 f"planned; run again when the machine holds still ({listing}){_sim(ev)}")
    if d["outcome"] == FAIL_:
        return f(FAIL, f"{what} {describe(d, _us)} at {d['target_qps']:.4g} QPS (ρ {d['rho']:.3g}) exceeds "
                 f"{float(ceiling_us):g} µs ({listing}){_sim(ev)}",
                 remediation="the device serves this model too slowly at loads the requirement covers: check clocks "
                             "and throttling (DEP-THROTTLE), the host binding (TOPO-NUMA-BIND), and the profile's model "
                             "size")
    if d["outcome"] == PASS_:
        return f(PASS, f"{what} at most {_us(worst['estimate'])} over {len(judged)} point(s) with ρ <= {at:g} "
                 f"({listing}){_sim(ev)}")
    unit = "runs" if d.get("method") == RUNS_METHOD else "queries"
    return f(INCONCLUSIVE, f"at {d['target_qps']:.4g} QPS: {undecided_text(d, _us, unit)} ({listing}){_sim(ev)}")


def sla_decisions(t: Dict[str, Any], sla: Dict[str, Any], span_s: Optional[float]) -> List[Dict[str, Any]]:
    """One tenant's statistics, each with its interval and decision: the P99 latency (and TTFT, TPOT where the SLA
    sets them) by order statistics, the error rate by Clopper-Pearson, the throughput by Poisson."""
    per = 1.0 / t["offered_rps"] if t.get("offered_rps") else None
    out = []

    def pct(name: str, dist: Optional[Dict[str, Any]], target_ms: Any) -> None:
        if target_ms is None:
            return
        tail = (dist or {}).get("tail")
        thr = float(target_ms) / 1e3
        if tail:
            d = percentile_decision(tail, thr, AT_MOST, show=_s, what=f"{name} P99", seconds_per_sample=per)
        elif not dist or dist.get("p99_s") is None:
            # a target the SLA sets and the run could not measure (no stream) is not met
            d = dict(exact(None), threshold=thr, direction=AT_MOST, outcome=FAIL_, rule=rule_text(thr, AT_MOST, _s),
                     why=f"{name} not measured (the run did not stream, or answers had one token) against its "
                         f"{float(target_ms):g} ms target")
        else:
            d = dict(exact(dist["p99_s"]), method="none", threshold=thr, direction=AT_MOST, outcome=UNDECIDED,
                     rule=rule_text(thr, AT_MOST, _s), more_trials=None,
                     why=f"the samples behind the {name} P99 are not in the evidence: it cannot be bounded")
        d["name"] = name
        out.append(d)

    pct("latency", t.get("latency"), sla["p99_ms"])
    pct("TTFT", t.get("ttft"), sla["ttft_p99_ms"])
    pct("TPOT", t.get("tpot"), sla["tpot_p99_ms"])
    if t.get("issued"):
        d = decide(proportion_interval(int(t.get("errors") or 0), int(t["issued"])), float(sla["max_error_rate"]),
                   AT_MOST, show=lambda x: f"{x:.3%}", what="error rate")
        d["name"] = "error rate"
        out.append(d)
    done = int(t.get("completed") or 0)
    secs = span_s or (done / t["throughput_rps"] if t.get("throughput_rps") else None)
    if secs and t.get("offered_rps", 0) >= float(sla["min_rps"]):
        d = decide(rate_interval(done, float(secs)), float(sla["min_rps"]), AT_LEAST,
                   show=lambda x: f"{number(x)} req/s", what="throughput")
        d["name"] = "throughput"
        out.append(d)
    return out


def _s(x: float) -> str:
    return _fmt_s(x)


def _sla_show(name: str) -> Any:
    if name in ("latency", "TTFT", "TPOT"):
        return _s
    if name == "error rate":
        return lambda x: f"{x:.3%}"
    return lambda x: f"{number(x)} req/s"


@check("SVC-SLA", version=3, default_subject="host")
def check_sla(ev: Dict[str, Any], th: Dict[str, Any], f: Finding) -> Verdict:
    """One tenant (``ev["tenant"]``) of an SLA run, each figure with its interval: the P99 of request latency (and
    of TTFT and TPOT where the SLA sets them) by binomial order statistics, the error rate by Clopper-Pearson, the
    throughput by Poisson.  FAIL when an interval lies wholly beyond its target (a client that was the limit makes
    it INCONCLUSIVE instead); PASS when every interval is within its target and LoadGen's early-stopping estimate of
    the P99 is too; otherwise INCONCLUSIVE, with the queries (and seconds) that would decide."""
    t = ev["tenant"]
    sla = tenant_sla(th, t["name"])
    p99_ms, min_rps, max_err = float(sla["p99_ms"]), float(sla["min_rps"]), float(sla["max_error_rate"])
    ttft_ms, tpot_ms = sla["ttft_p99_ms"], sla["tpot_p99_ms"]
    threshold = (f"P99 <= {p99_ms:g} ms" + (f", TTFT P99 <= {float(ttft_ms):g} ms" if ttft_ms is not None else "")
                 + (f", TPOT P99 <= {float(tpot_ms):g} ms" if tpot_ms is not None else "")
                 + f", throughput >= {min_rps:g} req/s, error rate < {max_err:g}")
    es = t.get("early_stopping") or {}
    p99 = (t.get("latency") or {}).get("p99_s", t.get("p99_latency_s"))
    ds = sla_decisions(t, sla, ev.get("span_s"))
    kinds = t.get("error_kinds") or {}
    shown = "; ".join(f"{d['name']} {describe(d, _sla_show(d['name']))}" for d in ds)
    figures = (f"tenant {t['name']}: {shown}; LoadGen's early-stopping estimate of the P99 "
               f"{_fmt_s(es.get('estimate_s'))} (99% confidence); {t['issued']} requests, "
               f"{t['throughput_rps']:.4g} req/s of {t['offered_rps']:.4g} offered"
               + (f", goodput {t['goodput_rps']:.4g} req/s" if t.get("goodput_rps") is not None else "")
               + f", errors {t['errors']} ({kinds or 'none'})")
    client = ev.get("client") or {}
    derived = dict(ev, derived={"p99_s": p99, "early_stopping_estimate_s": es.get("estimate_s"),
                                "ttft_p99_s": _dist_p99(t, "ttft"), "tpot_p99_s": _dist_p99(t, "tpot"),
                                "measured_is": "the P99 of request latency, in ms (not the early-stopping estimate)"},
                   decisions=ds)
    rule = ("per figure: PASS when its interval is within its target, FAIL when it lies wholly beyond; the tenant "
            "PASSes when every figure does and LoadGen's early-stopping estimate of the P99 is within the target too; "
            "a FAIL that a saturated client explains is INCONCLUSIVE")
    f.set(threshold=threshold, evidence=derived, method=f"{ev.get('rule')}; decided: {rule}")
    if not t["issued"]:
        return f(INCONCLUSIVE, f"tenant {t['name']} received no query")
    f.set(measured=round(p99 * 1e3, 3) if p99 is not None else None, unit="ms")
    d = combine(ds)
    derived["decision"] = d
    fails = [x for x in ds if x["outcome"] == FAIL_]
    errors_not_timeouts = (t.get("errors") or 0) - (t.get("timeouts") or kinds.get("timeout", 0))
    client_bound = [x for x in fails if x["name"] != "error rate" or errors_not_timeouts / max(1, t["issued"]) < max_err]
    names = ", ".join(x.get("why") or f"{x['name']} {describe(x, _sla_show(x['name']))} beyond its target" for x in fails)
    if fails and client.get("limited") and len(client_bound) == len(fails):
        return f(INCONCLUSIVE, f"{names}, but {client.get('statement')} — {figures}{_sim(ev)}")
    if fails:
        return f(FAIL, f"{names} — {figures}{_sim(ev)}",
                 remediation="the service does not hold this tenant's SLA at the offered load: lower the load, add "
                             "capacity, or look at the errors in the evidence (requests_file lists every request)")
    if t["offered_rps"] < min_rps:
        return f(INCONCLUSIVE, f"the run offered tenant {t['name']} {t['offered_rps']:.4g} req/s, below its throughput "
                 f"floor of {min_rps:g}: raise {f.requirement}.target_qps — {figures}")
    if d["outcome"] != PASS_:
        unit = "queries" if d["name"] != "throughput" else "completions"
        return f(INCONCLUSIVE, f"{d['name']}: {undecided_text(d, _sla_show(d['name']), unit)}; lengthen "
                 f"{f.requirement}.duration_s — {figures}")
    if es.get("estimate_s") is None:
        return f(INCONCLUSIVE, f"every interval is within its target, but LoadGen's early stopping needs "
                 f"{es.get('queries_needed')} queries and the tenant had {es.get('queries')}: lengthen "
                 f"{f.requirement}.duration_s — {figures}")
    if es["estimate_s"] * 1e3 > p99_ms:
        return f(INCONCLUSIVE, f"every interval is within its target, but the early-stopping estimate "
                 f"{_fmt_s(es['estimate_s'])} is not: too few queries to claim it with 99% confidence — {figures}")
    return f(PASS, f"{figures}{_sim(ev)}")


@check("SVC-COLDSTART", version=2, default_subject="host")
def check_coldstart(ev: Dict[str, Any], th: Dict[str, Any], f: Finding) -> Verdict:
    """Cold start to the first token, the mean of its trials (fresh interpreters) with a t-interval, against
    ``max_s``: PASS when the interval's high end is within, FAIL when its low end is above, else INCONCLUSIVE;
    reported (WARN) without a ceiling."""
    ceiling = th["max_s"]
    threshold = f"<= {ceiling:g} s to the first token" if ceiling is not None else "reported (no ceiling set)"
    samples = [float(x) for x in ev.get("samples_s") or [ev["total_s"]]]
    d = decide(mean_interval(samples, level(int((ev.get("sequential") or {}).get("looks") or 1))),
               float(ceiling) if ceiling is not None else None, AT_MOST, samples=samples, show=lambda x: f"{number(x)} s",
               what="seconds to the first token")
    ev = dict(ev, decision=d)
    how = ev.get("method") or ("fresh interpreter; stages stamped with perf_counter_ns from the parent's spawn to "
                               "the first token")
    method = f"{how}; {len(samples)} cold start(s); decided: {d['rule']}"
    stages = ", ".join(f"{s['stage']} {s['seconds']:.3g} s" for s in ev["stages"])
    phases = ev.get("phases")
    if isinstance(phases, dict):  # a launched server: the phases it printed, or that it printed none
        stages += "; the server printed " + (", ".join(f"{p['phase']} {p['seconds']:.3g} s" for p in
                                                       phases.get("printed") or []) or "no start-up phase")
    cache = (ev.get("page_cache") or {}).get("state", "unknown")
    text = (f"{describe(d, lambda x: f'{number(x)} s')} to the first token (the median trial: {stages}); page cache "
            f"{cache}{_sim(ev)}")
    f.set(measured=round(d["estimate"], 6), threshold=threshold, unit="s", evidence=ev, method=method)
    if len(samples) < 2:
        return f(INCONCLUSIVE, f"{text}: one cold start, an interval needs two or more")
    if ceiling is None:
        return f(WARN, f"{text}; the profile sets no ceiling")
    if d["outcome"] == FAIL_:
        slowest = max(ev["stages"], key=lambda s: s["seconds"])
        return f(FAIL, f"{text}: over {float(ceiling):g} s; slowest stage {slowest['stage']}",
                 remediation=f"the {slowest['stage'].replace('_', ' ')} stage dominates: keep the runtime and weights on "
                             "local fast storage (page cache warm), pre-create the device context")
    if d["outcome"] == PASS_:
        return f(PASS, text)
    return f(INCONCLUSIVE, f"{text}; {undecided_text(d, lambda x: f'{number(x)} s', 'cold starts')}")


#: SVC-FRAG's KV pool: steps at or above this share of the peak's blocks are the loaded part of the run.
FRAG_LOADED_SHARE = 0.5
FRAG_BATCHES = 10


def frag_decision(ev: Dict[str, Any], th: Dict[str, Any]) -> Dict[str, Any]:
    """The KV pool: the mean fragmentation over the loaded steps with the t-interval over FRAG_BATCHES batch means;
    the allocator: its bytes at the peak, a count (exact)."""
    limit = float(th["max_fraction"])
    series = ev.get("step_fractions")
    if ev.get("view") == "kv-pool" and series and len(series) >= 2 * FRAG_BATCHES:
        stat = mean_interval(batch_means(series, FRAG_BATCHES), method="t-interval over batch means")
    elif ev.get("source") == "server" and series and len(series) >= 3:
        # a served deployment's metrics samples, too few for batch means: the t-interval over the samples
        stat = mean_interval([float(x) for x in series], method="t-interval over the metrics samples")
    else:
        stat = exact(float(ev["fraction"]))
    return decide(stat, limit, AT_MOST, show=lambda x: f"{x:.2%}", what=f"{ev.get('view')} fragmentation")


@check("SVC-FRAG", version=2, default_subject="host")
def check_frag(ev: Dict[str, Any], th: Dict[str, Any], f: Finding) -> Verdict:
    """One view.  The paged KV pool: the mean of the fragmentation of every step at or above half of the peak
    occupancy (the loaded part of the run), with the t-interval over batch means of those steps; the device
    allocator: the inactive split bytes at the peak over the reserved bytes (a count).  PASS when the interval's
    high end is within ``max_fraction``, FAIL when its low end is above, else INCONCLUSIVE."""
    limit = float(th["max_fraction"])
    threshold = f"fragmentation <= {limit:.1%}"
    d = frag_decision(ev, th)
    ev = dict(ev, decision=d)
    pct = lambda x: f"{x:.2%}"  # noqa: E731
    if ev["view"] == "kv-pool":
        text = (f"KV pool: {describe(d, pct)} of the allocated slots unused over the loaded steps (at peak occupancy "
                f"{float(ev['fraction']):.2%}: {ev['peak_blocks_used']} of {ev['pool_blocks']} blocks of "
                f"{ev['block_tokens']} tokens; time-weighted {(ev.get('fraction_time_weighted') or 0):.2%})")
        fix = "use smaller KV blocks (model.block_tokens), or a serving stack with a paged KV allocator"
    else:
        text = (f"allocator: {describe(d, pct)} of reserved memory in inactive split blocks at peak "
                f"({ev['inactive_split_peak_bytes'] / 2**20:.4g} of {ev['reserved_peak_bytes'] / 2**20:.4g} MiB); "
                f"{ev.get('unused_reserved_fraction', 0):.2%} reserved but unallocated")
        fix = ("set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, or preallocate the KV cache once at start "
               "(as paged serving stacks do)")
    f.set(measured=round(d["estimate"], 6), threshold=threshold, evidence=ev,
          method=f"{ev.get('method')}; decided: {d['rule']}")
    if d["outcome"] == FAIL_:
        return f(FAIL, f"{text}: over {limit:.1%}{_sim(ev)}", remediation=fix)
    if d["outcome"] == PASS_:
        return f(PASS, f"{text}{_sim(ev)}")
    return f(INCONCLUSIVE, f"{text}; {undecided_text(d, pct, 'batches')}{_sim(ev)}")


# --------------------------------------------------------------------------
# An MLPerf Inference submission's runs (conditions/inference/mlperf.py): SVC-SLA, PLP-LATENCY, PLP-PPL and
# PLP-POWER judged on LoadGen's own figures.  LoadGen prints percentiles of every query of the run, not the
# queries themselves: the P99's 95% order-statistic interval lies between the printed P97 and P99.9 once the run
# has enough queries (the ranks it spans are within theirs), so [P97, P99.9] is the interval used: wider than the
# exact one, never narrower.  ρ (the load) is the Server run's token rate over the same system's Offline run's
# (its maximum); a ceiling that holds at a load heavier than the requirement's bound holds below it (latency and
# power do not fall as load rises), so a PASS needs ρ at or above the bound and a FAIL ρ at or below it.

MLPERF_RULE = ("LoadGen's percentiles of every query of the run: the P99 is bounded by the printed P97 and P99.9 "
               "(its 95% order-statistic interval lies between them once the run has enough queries)")


def _mlperf_count(run: Dict[str, Any]) -> Tuple[Optional[int], str]:
    """The run's completed queries: LoadGen's result_query_count, else a lower bound (its rate over its minimum
    duration, which a VALID run met)."""
    if run.get("query_count"):
        return int(run["query_count"]), "result_query_count"
    rate, dur = run.get("samples_per_s"), run.get("min_duration_ms")
    if rate and dur and run.get("min_duration_met"):
        return int(rate * dur / 1e3), "at least: the completed rate over the run's minimum duration (met)"
    return None, "not in the files"


def mlperf_p99(pcts: Dict[str, Any], n: Optional[int], scale: float) -> Dict[str, Any]:
    """The P99 of LoadGen's printed percentiles (``{"97.00": ns, "99.00": ns, "99.90": ns}``) with its interval
    ([P97, P99.9] where ``n`` queries put the exact interval's ranks within theirs), in ``scale`` units of ns."""
    from .interval import CONFIDENCE, _rank_bounds

    p99 = pcts.get("99.00")
    out: Dict[str, Any] = {"method": "LoadGen percentiles", "confidence": CONFIDENCE, "trials": n,
                           "estimate": p99 / scale if p99 is not None else None, "low": None, "high": None}
    if p99 is None or not n:
        return out
    order = [float(pcts[q]) for q in ("97.00", "99.00", "99.90") if pcts.get(q) is not None]
    if order != sorted(order):  # LoadGen prints them in order: a text that does not is not its own
        out["why"] = (f"the printed percentiles are out of order (P97 {pcts.get('97.00')}, P99 {p99}, P99.9 "
                      f"{pcts.get('99.90')} ns): not as LoadGen writes them")
        return out
    b = _rank_bounds(n, 0.99, CONFIDENCE)
    lo_ok = b["lower"] is not None and b["lower"] / n >= 0.97 and pcts.get("97.00") is not None
    hi_ok = b["upper"] is not None and b["upper"] / n <= 0.999 and pcts.get("99.90") is not None
    out["low"] = pcts["97.00"] / scale if lo_ok else None
    out["high"] = pcts["99.90"] / scale if hi_ok else None
    out["ranks"] = b
    return out


def _mlperf_load(ev: Dict[str, Any]) -> Tuple[Optional[float], str]:
    rho, text = _mlperf_ratio(ev)
    off = ev.get("offline") or {}
    if rho is not None and off.get("result") != "VALID":
        return None, (f"ρ unknown: the Offline run ({off.get('summary_file') or off.get('detail_file')}) is "
                      f"{off.get('result') or 'of no stated result'}, not VALID: not the system's maximum")
    if rho is not None and rho > 1 + RHO_TOLERANCE:
        return None, f"ρ unknown: {text}, above 1: the Offline run is not the system's maximum (see PLP-PPL)"
    return rho, text


def _mlperf_ratio(ev: Dict[str, Any]) -> Tuple[Optional[float], str]:
    run, off = ev.get("run") or {}, ev.get("offline") or {}
    if not off or not off.get("tokens_per_s") or not run.get("tokens_per_s"):
        if off and off.get("samples_per_s") and run.get("samples_per_s"):
            rho = run["samples_per_s"] / off["samples_per_s"]
            return rho, (f"ρ {rho:.3g}: the Server run's {run['samples_per_s']:.4g} samples/s over the Offline run's "
                         f"{off['samples_per_s']:.4g} ({off.get('summary_file') or off.get('detail_file')})")
        return None, "ρ unknown: no Offline run of the same system and benchmark among the files"
    rho = run["tokens_per_s"] / off["tokens_per_s"]
    return rho, (f"ρ {rho:.3g}: the Server run's {run['tokens_per_s']:.6g} tokens/s over the Offline run's "
                 f"{off['tokens_per_s']:.6g} ({off.get('summary_file') or off.get('detail_file')})")


def _where(run: Dict[str, Any], field: str) -> str:
    """Where a run's figure was read: "summary line 30" (the files are the verdict's subject and evidence)."""
    return str((run.get("lines") or {}).get(field) or ("summary" if run.get("summary_file") else "detail log"))


def _loadgen_state(run: Dict[str, Any]) -> Tuple[bool, str]:
    """Whether LoadGen's run is a measurement to decide on (VALID, or INVALID only for its own latency limits), and
    what LoadGen said."""
    said = f"LoadGen: {run.get('result') or 'no result line'}"
    if run.get("conflicts"):
        return False, f"{said}; its summary and detail log are not one run's ({'; '.join(run['conflicts'])})"
    if run.get("inconsistent"):
        return False, f"{said}; {'; '.join(run['inconsistent'])}"
    unmet = [name for key, name in (("min_duration_met", "min duration"), ("min_queries_met", "min queries"),
                                    ("early_stopping_met", "early stopping")) if run.get(key) is False]
    if unmet:
        return False, f"{said} ({', '.join(unmet)} not satisfied)"
    if run.get("result") not in ("VALID", "INVALID"):
        return False, f"{said} (neither VALID nor INVALID)"
    if run.get("perf_constraints_met") is False:
        said += " (its own TTFT/TPOT limits not met; the profile's targets are judged here)"
    return True, said


@check("SVC-SLA/mlperf", requirement="SVC-SLA", version=1, default_subject="MLPerf Server")
def check_mlperf_sla(ev: Dict[str, Any], th: Dict[str, Any], f: Finding) -> Verdict:
    """An MLPerf Server run against the SLA (one tenant: LoadGen runs one query stream, judged against the
    requirement's defaults).  The request-latency P99 and the completed rate are the SLA's figures only for the
    requests its ``workload`` describes: judged where the run's mean output tokens per request (completed tokens
    over completed samples per second) lies within ``workload.output_tokens``, else reported, not judged.  TTFT and
    TPOT P99 are judged where the SLA sets them, whatever the workload; the error rate always (LoadGen's error
    count, Clopper-Pearson).  P99s with the [P97, P99.9] interval, the rate by Poisson over the completed queries.
    PASS when every judged figure is within its target (at least one latency among them) and LoadGen's run is
    VALID with early stopping met; FAIL when one lies wholly beyond; else INCONCLUSIVE."""
    run = ev["run"]
    sla = {k: th[k] for k in SLA_KEYS}
    p99_ms, min_rps, max_err = float(sla["p99_ms"]), float(sla["min_rps"]), float(sla["max_error_rate"])
    lo_out, hi_out = (th.get("workload") or {}).get("output_tokens") or [None, None]
    rate, toks = run.get("samples_per_s"), run.get("tokens_per_s")
    mean_out = toks / rate if toks and rate else None
    comparable = mean_out is None or lo_out is None or float(lo_out) <= mean_out <= float(hi_out)
    workload_note = ("" if comparable else
                     f"the run's requests average {mean_out:.0f} output tokens (completed tokens over samples per "
                     f"second), outside the SLA workload's {lo_out}-{hi_out}: its request P99 and rate are reported, "
                     "not judged")
    threshold = ((f"P99 <= {p99_ms:g} ms, throughput >= {min_rps:g} req/s" if comparable else
                  f"P99 and throughput not judged (workload of {lo_out}-{hi_out} output tokens)")
                 + (f", TTFT P99 <= {float(sla['ttft_p99_ms']):g} ms" if sla["ttft_p99_ms"] is not None else "")
                 + (f", TPOT P99 <= {float(sla['tpot_p99_ms']):g} ms" if sla["tpot_p99_ms"] is not None else "")
                 + f", error rate < {max_err:g}")
    n, n_how = _mlperf_count(run)
    p99 = decide(mlperf_p99(run.get("latency") or {}, n, 1e6), p99_ms if comparable else None, AT_MOST, show=_ms,
                 what="request latency P99") | {"name": "P99", "line": _where(run, "latency 99.00")}
    if n and rate:
        thr = decide(rate_interval(n, n / rate), min_rps if comparable else None, AT_LEAST,
                     show=lambda x: f"{number(x)} req/s", what="completed queries per second")
    else:
        thr = decide({"estimate": rate, "low": None, "high": None, "method": "exact", "trials": n},
                     min_rps if comparable else None, AT_LEAST, what="completed queries per second")
    thr |= {"name": "throughput", "line": _where(run, "samples_per_s")}
    latencies = [p99] if comparable else []
    reported = [] if comparable else [p99, thr]
    ds = list(latencies) + ([thr] if comparable else [])
    for key, name in (("ttft", "TTFT P99"), ("tpot", "TPOT P99")):
        target = sla[f"{key}_p99_ms"]
        if target is not None:
            d = decide(mlperf_p99(run.get(key) or {}, n, 1e6), float(target), AT_MOST, show=_ms, what=name) \
                | {"name": name, "line": _where(run, f"{key} 99.00")}
            latencies.append(d)
            ds.append(d)
    errs = run.get("errors")
    if errs is not None and n:
        ds.append(decide(proportion_interval(int(errs), n), max_err, AT_MOST, show=lambda x: f"{x:.3%}",
                         what="LoadGen's error count over the completed queries")
                  | {"name": "error rate", "line": _where(run, "errors")})
    else:
        ds.append({"name": "error rate", "outcome": UNDECIDED, "estimate": None, "low": None, "high": None,
                   "why": "LoadGen's error count is not in the files", "line": None})
    ok, said = _loadgen_state(run)

    def show(d: Dict[str, Any]) -> str:
        return f"{d['name']} {describe(d, _ms) if 'P99' in d['name'] else describe(d)} ({d['line']})"
    shown = "; ".join(show(d) for d in ds if d.get("estimate") is not None or d["name"] != "error rate")
    figures = (f"{said}; {shown}; {n if n is not None else 'unknown'} queries ({n_how}); "
               f"{rate} samples/s completed of {run.get('target_qps')} targeted")
    if reported:
        figures += f"; {workload_note}: " + "; ".join(show(d) for d in reported)
    if run.get("odd"):
        figures += "; not used: " + "; ".join(run["odd"])
    d = combine(ds)
    derived = dict(ev, decisions=ds, reported=reported, decision=d, count_source=n_how, mean_output_tokens=mean_out,
                   workload_comparable=comparable)
    f.set(threshold=threshold, evidence=derived, measured=round(p99["estimate"], 3) if p99.get("estimate")
          is not None else None, unit="ms",
          method=f"{MLPERF_RULE}; completed rate: Poisson over the completed queries; error rate: LoadGen's errors "
                 "(a response it could not match, a query never completed; a wrong answer is not one it sees) by "
                 "Clopper-Pearson; the request P99 and rate judged only for requests of the SLA's workload; decided "
                 "per figure: PASS within, FAIL wholly beyond")
    if not ok:
        return f(INCONCLUSIVE, f"the run is not a decision: {figures}")
    fails = [x for x in ds if x["outcome"] == FAIL_]
    if fails:
        others = "; ".join(show(x) for x in ds if x not in fails and (x.get("estimate") is not None
                                                                         or x["name"] != "error rate"))
        rest = (f"{said}; {others + '; ' if others else ''}{n if n is not None else 'unknown'} queries ({n_how}); "
                f"{rate} samples/s completed of {run.get('target_qps')} targeted"
                + (f"; {workload_note}: " + "; ".join(show(x) for x in reported) if reported else "")
                + ("; not used: " + "; ".join(run["odd"]) if run.get("odd") else ""))
        return f(FAIL, ", ".join(f"{show(x)} beyond its target" for x in fails) + f" — {rest}",
                 remediation="the server does not hold the profile's SLA under MLPerf's Server load: look at the "
                             "failing figure's load and configuration, or correct the profile's SVC-SLA targets for "
                             "this workload")
    if not latencies:
        return f(INCONCLUSIVE, f"no latency target of the profile applies to this run: {workload_note}; set "
                 f"{f.requirement}.ttft_p99_ms / tpot_p99_ms, or a workload.output_tokens range (with p99_ms and "
                 f"min_rps for it) that covers these requests — {figures}")
    if d["outcome"] != PASS_:
        why = d.get("why") or "its interval straddles its target"
        return f(INCONCLUSIVE, f"{d['name']}: {why} — {figures}")
    if run.get("result") != "VALID" or run.get("early_stopping_met") is not True:
        return f(INCONCLUSIVE, f"every figure is within its target, but LoadGen's run is not VALID with early "
                 f"stopping met — {figures}")
    return f(PASS, figures)


def _mlperf_ceiling_verdict(f: Finding, d: Dict[str, Any], rho: Optional[float], at: float, rho_text: str,
                            what: str, figures: str) -> Verdict:
    """PASS within the ceiling at ρ >= the bound, FAIL beyond it at ρ <= the bound, else INCONCLUSIVE (why)."""
    if d["outcome"] == PASS_ and rho is not None and rho >= at:
        return f(PASS, f"{what} within the ceiling at {rho_text} (at or above the bound {at:g}: it holds below it) — "
                 f"{figures}")
    if d["outcome"] == FAIL_ and rho is not None and rho <= at:
        return f(FAIL, f"{what} beyond the ceiling at {rho_text} (within the bound {at:g}) — {figures}",
                 remediation="the system exceeds the profile's ceiling at a load the requirement covers: check the "
                             "power limits and cooling (DEP-POWERCAP, DEP-THROTTLE) and the serving configuration of "
                             "this run")
    if d["outcome"] == UNDECIDED:
        return f(INCONCLUSIVE, f"{what}: {d.get('why') or 'its interval straddles the ceiling'} — {figures}")
    if rho is None:
        return f(INCONCLUSIVE, f"{what} {'within' if d['outcome'] == PASS_ else 'beyond'} the ceiling, but {rho_text}: "
                 f"the load it was measured at is not known — {figures}")
    if d["outcome"] == FAIL_:
        return f(INCONCLUSIVE, f"{what} beyond the ceiling at {rho_text}, above the bound {at:g}: a lighter load "
                 f"(a Server run at ρ <= {at:g}) decides — {figures}")
    return f(INCONCLUSIVE, f"{what} within the ceiling at {rho_text}, below the bound {at:g}: a heavier load "
             f"decides — {figures}")


@check("PLP-LATENCY/mlperf", requirement="PLP-LATENCY", version=1, default_subject="MLPerf Server")
def check_mlperf_latency(ev: Dict[str, Any], th: Dict[str, Any], f: Finding) -> Verdict:
    """An MLPerf Server run's P99 latency per output token (LoadGen's TPOT; ``metric: token``) or per query
    against ``max_latency_us``, with the [P97, P99.9] interval, at the run's ρ (see the section's comment)."""
    run = ev["run"]
    at, metric, ceiling = float(th["at_load_max"]), th["metric"], th["max_latency_us"]
    what = "P99 latency per output token (TPOT)" if metric == "token" else "P99 query latency"
    key = "tpot" if metric == "token" else "latency"
    n, n_how = _mlperf_count(run)
    stat = mlperf_p99(run.get(key) or {}, n, 1e3)
    rho, rho_text = _mlperf_load(ev)
    ok, said = _loadgen_state(run)
    d = decide(stat, float(ceiling) if ceiling is not None else None, AT_MOST, show=lambda x: f"{number(x)} µs",
               what=what)
    figures = (f"{what} {describe(d, lambda x: f'{number(x)} µs')} ({_where(run, key + ' 99.00')}); {said}; "
               f"{n if n is not None else 'unknown'} queries ({n_how})")
    f.set(threshold=(f"{what} <= {ceiling:g} µs at ρ <= {at:g}" if ceiling is not None else f"no ceiling set "
                     f"(ρ <= {at:g})"), evidence=dict(ev, decision=d, rho=rho),
          measured=round(stat["estimate"], 3) if stat.get("estimate") is not None else None, unit="µs",
          method=f"{MLPERF_RULE}; ρ: the Server run's token rate over the Offline run's; a ceiling that holds at a "
                 "load heavier than the bound holds below it")
    if stat.get("estimate") is None:
        return f(INCONCLUSIVE, f"the run gives no {what} ({'Offline runs have no TTFT/TPOT' if key == 'tpot' else ''}"
                 f"); {said}")
    if not ok:
        return f(INCONCLUSIVE, f"the run is not a decision: {figures}")
    if ceiling is None:
        return f(WARN, f"{figures}; {rho_text}; the profile sets no latency ceiling")
    return _mlperf_ceiling_verdict(f, d, rho, at, rho_text, what, figures)


@check("PLP-PPL/mlperf", requirement="PLP-PPL", version=1, default_subject="MLPerf Server")
def check_mlperf_ppl(ev: Dict[str, Any], th: Dict[str, Any], f: Finding) -> Verdict:
    """The Server run's load over the same system's Offline run (tokens per second, the whole run): FAIL when the
    Server run did more than the Offline maximum by over RHO_TOLERANCE (the Offline run is not the peak);
    otherwise INCONCLUSIVE: the requirement asks ρ over sliding ``window_ms`` windows, which LoadGen's whole-run
    rates cannot give (the ratio is reported)."""
    want = float(th["window_ms"])
    rho, rho_text = _mlperf_ratio(ev)
    run = ev["run"]
    f.set(threshold=f"ρ over sliding {want:g} ms windows, against the peak", evidence=dict(ev, rho=rho),
          measured=round(rho, 4) if rho is not None else None,
          method="ρ of the whole run: the Server run's completed tokens per second over the Offline run's "
                 "(LoadGen's result lines); LoadGen logs no per-window work")
    if rho is None:
        return f(INCONCLUSIVE, f"{rho_text}; the Server run's {run.get('tokens_per_s')} tokens/s "
                 f"({_where(run, 'tokens_per_s')})")
    if rho > 1 + RHO_TOLERANCE:
        return f(FAIL, f"{rho_text}: the Server run did more than the Offline run, which is to be the system's "
                 f"maximum ({_where(run, 'tokens_per_s')})",
                 remediation="submit the Offline run of the same system, software and settings as the Server run")
    return f(INCONCLUSIVE, f"{rho_text} over the whole run ({_where(run, 'tokens_per_s')}); the requirement asks ρ over "
             f"sliding {want:g} ms windows, and LoadGen's logs give whole-run rates only: run the suite on the "
             "machine to decide it")


@check("PLP-POWER/mlperf", requirement="PLP-POWER", version=1, default_subject="MLPerf Server")
def check_mlperf_power(ev: Dict[str, Any], th: Dict[str, Any], f: Finding) -> Verdict:
    """Node wall power from PTDaemon's log over the Server run's window (LoadGen's power_begin / power_end): its
    mean with the t-interval over one-minute blocks, against ``max_node_power_w`` (PASS / FAIL, at the run's ρ as
    PLP-LATENCY), and against ``max_power_w`` per accelerator as an upper bound (every accelerator draws at most the
    node's power: a PASS when the node is within it, never a FAIL).  Tokens per watt reported."""
    at, ceiling, node_ceiling = float(th["at_load_max"]), th["max_power_w"], th.get("max_node_power_w")
    pw, run = ev.get("power"), ev.get("run")
    threshold = ("node P <= " + (f"{node_ceiling:g} W" if node_ceiling is not None else "(no node ceiling set)")
                 + (f"; each accelerator <= {ceiling:g} W" if ceiling is not None else "") + f" at ρ <= {at:g}")
    method = ("node wall power (PTDaemon, 1 Hz) over LoadGen's power_begin..power_end: the mean of every sample, with "
              "the half-width of the t-interval over one-minute blocks (batch means); an accelerator draws at most the "
              "node's power")
    f.set(threshold=threshold, method=method, evidence=ev)
    if run is None or not pw:
        log = ev.get("power_log") or {}
        whole = log.get("whole") or {}
        return f(INCONCLUSIVE, f"the power log {log.get('file', '')} matches no run: no LoadGen power window "
                 f"(submit the run's mlperf_log_detail.txt in its folder); the whole log: mean "
                 f"{whole.get('mean_w')} W, max {whole.get('max_w')} W, min {whole.get('min_w')} W over "
                 f"{whole.get('n')} samples from {log.get('start')} to {log.get('end')}",
                 measured=whole.get("mean_w"), unit="W")
    blocks = pw.get("block_means_w") or []
    window_s, n = pw.get("window_s"), int(pw.get("n") or 0)
    if not n or len(blocks) < 2 or (window_s and n < 0.95 * window_s):
        why = ("no valid sample of the log lies in the run's window" if not n else
               f"{n} valid samples cover {n / window_s:.0%} of the {window_s:.0f} s window (the log is cut, or "
               f"{pw.get('dropped', 0)} readings failed)" if window_s and n < 0.95 * window_s else
               f"{len(blocks)} full one-minute block(s): too few for an interval of the mean")
        return f(INCONCLUSIVE, f"node wall power not decided: {why} ({pw.get('file')}, {pw.get('begin')} .. "
                 f"{pw.get('end')}; mean {pw.get('mean_w')} W of what there is)", measured=pw.get("mean_w"), unit="W")
    # the mean of every sample, its interval's half-width from the one-minute block means
    by_blocks = mean_interval(blocks)
    half = (by_blocks["high"] - by_blocks["low"]) / 2
    stat = dict(by_blocks, estimate=pw["mean_w"], low=pw["mean_w"] - half, high=pw["mean_w"] + half)
    rho, rho_text = _mlperf_load(ev)
    ok, said = _loadgen_state(run)
    toks = run.get("tokens_per_s")
    tpw = f"; {toks / pw['mean_w']:.4g} tokens per joule of the node" if toks and pw.get("mean_w") else ""
    count = next((s.get("accelerators_per_node_n") for s in ev.get("systems") or []
                  if s.get("accelerators_per_node_n")), None)
    figures = (f"node wall power {describe(stat, _w)} over {pw.get('n')} samples ({pw.get('begin')} .. "
               f"{pw.get('end')}, {pw.get('file')}; max {pw.get('max_w')} W){tpw}; {said}; {rho_text}")
    f.set(measured=pw.get("mean_w"), unit="W", evidence=dict(ev, node_power=stat, rho=rho))
    if not ok:
        return f(INCONCLUSIVE, f"the run is not a decision: {figures}")
    if node_ceiling is not None:
        d = decide(stat, float(node_ceiling), AT_MOST, show=_w, what="node wall power")
        return _mlperf_ceiling_verdict(f, d, rho, at, rho_text, "node wall power", figures)
    if ceiling is None:
        return f(WARN, f"{figures}; the profile sets no power ceiling")
    d = decide(stat, float(ceiling), AT_MOST, show=_w, what="node wall power (an upper bound of each accelerator's)")
    if d["outcome"] == PASS_:
        return _mlperf_ceiling_verdict(f, d, rho, at, rho_text, "node wall power (each accelerator draws less)",
                                       figures)
    return f(INCONCLUSIVE, f"{figures}: the node's wall power is above {float(ceiling):g} W, but it is the whole "
             f"node's{f' ({count} accelerators declared)' if count else ''}: the log gives no accelerator's own; "
             f"set PLP-POWER.max_node_power_w for a node ceiling, or measure on the machine")
