"""EQ-PRECISION, EQ-THROUGHPUT, EQ-LATENCY, EQ-RESOURCE."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from ..verdict import FAIL, INCONCLUSIVE, PASS, SKIP, WARN, Verdict
from . import Finding, check
from .interval import (AT_MOST, FAIL_, PASS_, bootstrap_interval, combine, decide, exact, mean_interval,
                       undecided_text)
from .interval import describe as interval_text


def describe(r: Dict[str, Any]) -> str:
    """The mismatch message of a comparison (:func:`pytest_sits.equivalence.comparator.compare`), in the manner
    of torch.testing.assert_close."""
    if r.get("exact"):
        return f"Mismatched elements: {r['mismatches']} / {r['n']} ({r['mismatch_fraction']:.1%}) (exact match required)"
    idx = lambda v: "(" + ", ".join(map(str, v)) + (",)" if len(v) == 1 else ")") if v else "()"  # noqa: E731
    text = (f"Mismatched elements: {r['mismatches']} / {r['n']} ({r['mismatch_fraction']:.1%})\n"
            f"Greatest absolute difference: {r['max_abs_diff']:.6g} at index {idx(r['max_abs_index'])} "
            f"(up to {r['atol']:g} allowed)\n"
            f"Greatest relative difference: {r['max_rel_diff']:.6g} at index {idx(r['max_rel_index'])} "
            f"(up to {r['rtol']:g} allowed)\n"
            f"ULP distance: max {r['ulp_max']}, p99 {r['ulp_p99']:g}; cosine similarity {r['cosine_similarity']:.9f}; "
            f"SNR {r['snr_db']:.1f} dB")
    if r.get("kl_divergence") is not None:
        text += f"; KL divergence {r['kl_divergence']:.3g}"
    if r["nan_in_one"] or r["inf_mismatching"]:
        text += f"\nNaN in one output only: {r['nan_in_one']}; infinities that differ: {r['inf_mismatching']}"
    if r["signed_zero_differences"]:
        text += f"\nSigned zeros that differ (equal under the rule): {r['signed_zero_differences']}"
    return text


#: Per-dtype relative tolerance for one rounding: torch.testing.assert_close's defaults (float16 comes from the
#: profile: SITS2026 A §4.4's 0.3 %).
DTYPE_RTOL = {"float32": 1.3e-6, "bfloat16": 1.6e-2, "float64": 1e-7}
U_ACCUMULATE = 2.0 ** -24


def resolve_tolerance(operator: Dict[str, Any], thresholds: Dict[str, Any], risk_class: str = "") -> Dict[str, Any]:
    """The tolerance of one operator and dtype under the profile's EQ-PRECISION thresholds (the policy:
    pytest_sits/equivalence/tolerance.py).  ``operator``: ``dtype``, ``accumulation`` (K of the longest dot
    product, 0 element-wise), ``override`` ([rtol, atol] or None) and ``why`` (the override's reason)."""
    import math

    dtype = operator["dtype"]
    risk = risk_class or thresholds["risk_class"]
    atol = float(thresholds["atol"][risk])
    if operator.get("override"):
        rtol, atol = operator["override"]
        return {"rtol": rtol, "atol": atol, "source": f"operator override: {operator.get('why', '')}",
                "risk_class": risk}
    if dtype in ("int8",):
        return {"rtol": 0.0, "atol": 0.0, "source": "integer GEMM: exact", "risk_class": risk}
    if dtype.startswith("float8"):
        return {"rtol": 0.125, "atol": atol, "source": "float8 e4m3: 3 mantissa bits (one rounding = 1/16)",
                "risk_class": risk}
    base = float(thresholds["rtol_fp16"]) if dtype == "float16" else DTYPE_RTOL[dtype]
    k = int(operator.get("accumulation") or 0)
    widen = math.sqrt(k) * U_ACCUMULATE if k else 0.0
    source = "SITS2026 fp16 rtol" if dtype == "float16" else "torch.testing default for the dtype"
    if widen:
        source += f" + sqrt(K={k}) x 2^-24 for the accumulation"
    return {"rtol": base + widen, "atol": atol, "source": source + f"; atol of risk class '{risk}'",
            "risk_class": risk}


@check("EQ-PRECISION", version=2)
def check_precision(evidence: Dict[str, Any], thresholds: Dict[str, Any], f: Finding) -> Verdict:
    """Every element within atol + rtol * |reference|; the message says everything about the worst.

    evidence: ``comparison`` (the comparator's result), ``reference`` (what was compared with), ``operator``
    (the operator's facts that the tolerance depends on); thresholds: the profile's EQ-PRECISION thresholds,
    from which the tolerance of this operator and dtype is resolved here (:func:`resolve_tolerance`)."""
    if evidence.get("not_in_golden"):
        return f(INCONCLUSIVE, evidence["not_in_golden"], evidence=evidence)
    return _precision(evidence, resolve_tolerance(evidence["operator"], thresholds), f)


def _precision(evidence: Dict[str, Any], tol: Dict[str, Any], f: Finding) -> Verdict:
    result, reference = evidence["comparison"], evidence["reference"]
    ev = dict(evidence, tolerance=tol)
    threshold = f"|x - ref| <= {tol['atol']:g} + {tol['rtol']:.3g} * |ref| ({tol['source']})"
    f.set(measured=f"{result['mismatches']} / {result['n']} mismatched", threshold=threshold, evidence=ev)
    if result["passed"]:
        why = (f"all {result['n']} elements within tolerance of {reference}; max rel "
               f"{result.get('max_rel_diff', 0):.3g}, max abs {result.get('max_abs_diff', 0):.3g}, ULP max "
               f"{result.get('ulp_max', 0)}") if not result.get("exact") else f"all {result['n']} elements equal"
        return f(PASS, why)
    return f(FAIL, f"against {reference}: " + describe(result),
             remediation="compare the kernel (library versions, math modes such as TF32 or fast-math, reduced-precision "
                         "reductions) with the reference platform's; if the task's risk class allows it, set "
                         f"{f.requirement}.risk_class in the profile")


@check("EQ-PRECISION/golden-coverage", requirement="EQ-PRECISION", version=2, default_subject="golden set")
def check_golden_coverage(evidence: Dict[str, Any], thresholds: Dict[str, Any], f: Finding) -> Verdict:
    """The golden set holds the same operator/dtype pairs as this corpus.  Given the profile's EQ-PRECISION
    thresholds (version 1 was given none), which the rule does not use.

    evidence: ``golden`` and ``corpus`` (pair keys), ``source`` (the golden set's folder)."""
    golden, here, source = evidence["golden"], evidence["corpus"], evidence["source"]
    missing = sorted(set(here) - set(golden))
    extra = sorted(set(golden) - set(here))
    f.set(evidence={"golden": golden, "corpus": here, "not_in_golden": missing, "only_in_golden": extra,
                    "source": source})
    if not missing and not extra:
        return f(PASS, f"the golden set and this corpus hold the same {len(here)} operator/dtype pairs",
                 measured=len(here))
    parts = []
    if missing:
        parts.append(f"{len(missing)} pair(s) of this corpus are not in the golden set: {', '.join(missing)}")
    if extra:
        parts.append(f"{len(extra)} pair(s) of the golden set are not in this corpus: {', '.join(extra)}")
    return f(INCONCLUSIVE, "; ".join(parts) + f" (golden set {source} was recorded with another operator list)",
             measured=len(here) - len(missing))


# --------------------------------------------------------------------------
# Decisions under noise (EQ-THROUGHPUT, EQ-LATENCY, EQ-RESOURCE version 2)

#: The host control's median round time moving by more than this between before and after means the machine moved.
CONTROL_MOVE = 0.10


@check("EQ-PRECISION/mlperf", requirement="EQ-PRECISION", version=1, default_subject="MLPerf accuracy")
def check_mlperf_accuracy(evidence: Dict[str, Any], thresholds: Dict[str, Any], f: Finding) -> Verdict:
    """An MLPerf accuracy run's scores (``accuracy.txt``) against its benchmark's accuracy targets, as MLPerf's
    submission checker holds them: each quality score at least its fraction (99 % or 99.9 %) of the reference
    implementation's, each length within its range, every line that gives a score held to it.  FAIL when a score
    misses its target.  INCONCLUSIVE when the benchmark, a score or the ``hash=`` line the accuracy script ends with
    is not in the text, when the text scored another number of samples than the benchmark's dataset, or when a
    quality score lies far above the reference (another unit or format than the benchmark's).  Every target met:
    PASS where each quality score is within the profile's ``rtol_fp16`` of the reference; WARN where one falls further
    below it (the benchmark's target allows up to 1 %): a task score is not the element-wise comparison of A §4.4,
    which the operator corpus makes on the machine.

    evidence: ``benchmark``, ``metrics`` ({name: {value, line, others}}), ``hash_line``, ``targets`` and
    ``dataset_samples`` (resolved from :mod:`pytest_sits.catalogue.mlperf` when it was acquired), ``file``."""
    rtol = float(thresholds["rtol_fp16"])
    bench, metrics, targets = evidence.get("benchmark"), evidence.get("metrics") or {}, evidence.get("targets") or []
    name = evidence.get("file")

    def readings(metric: str) -> List[Dict[str, Any]]:
        m = metrics[metric]
        return [{"value": m["value"], "line": m["line"]}] + list(m.get("others") or [])

    def where(metric: str) -> str:
        lines = sorted({r["line"] for r in readings(metric)})
        return f"{name} line{'s' if len(lines) > 1 else ''} {', '.join(map(str, lines))}"

    def span(t: Dict[str, Any]) -> str:
        if t.get("reference") is not None and t.get("quality"):
            return f"{t['metric']} >= {t['low']:.6g} ({t['fraction']:.1%} of the reference {t['reference']:g})"
        return f"{t['metric']} in [{t['low']:.6g}, {t['high']:.6g}]" if t.get("high") is not None else \
            f"{t['metric']} >= {t['low']:.6g}"
    f.set(threshold=("; ".join(span(t) for t in targets) if targets else "the benchmark's accuracy targets")
          + f"; quality within {rtol:.1%} of the reference for a PASS",
          unit="% of reference", evidence=evidence,
          method="accuracy.txt's scores (every line that gives one) against the benchmark's targets, as MLPerf's "
                 "submission checker holds them; each quality score's shortfall from the reference against the "
                 "profile's rtol_fp16")
    if not bench:
        return f(INCONCLUSIVE, f"{name}: which benchmark these scores are of is not in the file's path; submit it in "
                 "its submission folder (<system>/<benchmark>/<scenario>/accuracy/accuracy.txt) or with the benchmark "
                 "in its name (llama2-70b-99, ...)")
    if not targets:
        return f(INCONCLUSIVE, f"{name}: no accuracy target is known here for the benchmark {bench}; its scores: "
                 + ", ".join(f"{k} {v['value']:g}" for k, v in list(metrics.items())[:8]))
    got = [t for t in targets if t["metric"] in metrics]
    missing = [t["metric"] for t in targets if t["metric"] not in metrics]
    low = [(t, r) for t in got for r in readings(t["metric"]) if r["value"] < t["low"]]
    high = [(t, r) for t in got for r in readings(t["metric"]) if t.get("high") is not None and r["value"] > t["high"]]
    ratios = [(t, min(r["value"] for r in readings(t["metric"])) / t["reference"]) for t in got
              if t.get("quality") and t.get("reference")]
    worst = min(ratios, key=lambda tr: tr[1]) if ratios else None
    if worst is not None:
        f.set(measured=round(worst[1] * 100, 3))

    def values(metric: str) -> str:
        return ", ".join(f"{r['value']:g}" for r in readings(metric))
    shown = "; ".join(f"{t['metric']} {values(t['metric'])} ({where(t['metric'])})" for t in got)
    # Scores that are not this benchmark's whole accuracy run decide nothing, either way.
    plausible = float(evidence.get("plausible_ratio") or 1.05)
    odd = [(t, r) for t in got if t.get("quality") and t.get("reference") for r in readings(t["metric"])
           if r["value"] / t["reference"] > plausible]
    if odd:
        return f(INCONCLUSIVE, f"{bench}: " + ", ".join(f"{t['metric']} {r['value']:g} ({name} line {r['line']}) at "
                                                        f"{r['value'] / t['reference']:.3g} × the reference "
                                                        f"{t['reference']:g}" for t, r in odd)
                 + f": not a score of this benchmark's (another unit or format); not judged — scores: {shown}")
    want = evidence.get("dataset_samples")
    counts = [(k, r) for k in ("gen_num", "total") if k in metrics for r in readings(k)]
    short = [(k, r) for k, r in counts if want and int(r["value"]) != int(want)]
    if short:
        return f(INCONCLUSIVE, f"{bench}: the scores are of "
                 + ", ".join(f"{int(r['value'])} samples ({k}, {name} line {r['line']})" for k, r in short)
                 + f"; the benchmark's accuracy run covers its {want}: they decide nothing; submit the whole accuracy "
                   "run's accuracy.txt")
    if low or high:
        bad = [f"{t['metric']} {r['value']:g} below its target {t['low']:.6g} ({name} line {r['line']})" for t, r in low] + \
              [f"{t['metric']} {r['value']:g} above its limit {t['high']:.6g} ({name} line {r['line']})"
               for t, r in high]
        if evidence.get("division") == "open":
            return f(INCONCLUSIVE, f"{bench}: " + "; ".join(bad) + " — an open-division submission, whose model may "
                     "differ from the reference's (MLPerf holds it to no accuracy target): not judged against the "
                     f"closed targets — scores: {shown}")
        return f(FAIL, f"{bench}: " + "; ".join(bad) + f" — scores: {shown}",
                 remediation="the outputs under test fall short of the benchmark's reference accuracy: compare the "
                             "quantisation, kernels and serving settings with the reference implementation's, or "
                             "submit the accuracy run of the configuration the performance runs used")
    if missing:
        return f(INCONCLUSIVE, f"{bench}: {', '.join(missing)} not in {name}; the benchmark's targets need every one "
                 f"(found: {shown or 'none of them'})")
    if evidence.get("hash_line") is None:
        return f(INCONCLUSIVE, f"{bench}: every target met ({shown}), but {name} has no `hash=` line: the accuracy "
                 "script ends accuracy.txt with the hash of its accuracy log, and MLPerf's checker refuses it "
                 "without; submit accuracy.txt as the script wrote it")
    below = [(t, r) for t, r in ratios if r < 1 - rtol]
    if below:
        return f(WARN, f"{bench}: every MLPerf accuracy target met ({shown}); "
                 + ", ".join(f"{t['metric']} {(1 - r):.2%} below the reference" for t, r in below)
                 + f", beyond the profile's {rtol:.1%}: a task score, not A §4.4's element-wise comparison, which "
                   "the operator corpus makes on the machine")
    return f(PASS, f"{bench}: every MLPerf accuracy target met, each quality score within {rtol:.1%} of the reference "
             f"({shown})")


def _pct(x: float) -> str:
    return f"{x:.2%}"


def throughput_decision(evidence: Dict[str, Any], thresholds: Dict[str, Any]) -> Dict[str, Any]:
    """The CV of the rounds' times with its bootstrap interval, against ``max_cv``."""
    return decide(bootstrap_interval(evidence["samples_s"]), float(thresholds["max_cv"]), AT_MOST, show=_pct,
                  what="coefficient of variation of the rounds")


def control_state(evidence: Dict[str, Any], max_cv: float) -> Dict[str, Any]:
    """Was the host quiet?  The control's CV (bootstrap interval over its rounds before and after the benchmark)
    and how far its median moved from before to after; ``quiet`` when the CV's high end stays below half of
    ``max_cv`` and the median moved by less than CONTROL_MOVE."""
    import statistics

    c = evidence.get("control") or {}
    before, after = list(c.get("before_s") or []), list(c.get("after_s") or [])
    out: Dict[str, Any] = {"quiet": False}
    if len(before) < 2 or len(after) < 2:
        cv = evidence.get("control_cv")
        out["why"] = (f"the host control's rounds are not in the evidence (its CV: {cv:.2%})" if cv is not None
                      else "no host control was timed")
        return out
    stat = bootstrap_interval(before + after)
    moved = statistics.median(after) / statistics.median(before) - 1.0
    out.update(cv=stat, moved=round(moved, 4),
               quiet=bool(stat["high"] is not None and stat["high"] < max_cv / 2 and abs(moved) < CONTROL_MOVE))
    if not out["quiet"]:
        out["why"] = (f"a fixed host workload timed before and after varied by {interval_text(stat, _pct)} and its median "
                      f"moved {moved:+.1%} between the two: this machine moved under the measurement")
    return out


@check("EQ-THROUGHPUT", version=2)
def check_throughput(evidence: Dict[str, Any], thresholds: Dict[str, Any], f: Finding) -> Verdict:
    """The coefficient of variation of the per-round times, with its bootstrap interval (fixed seed), against
    ``max_cv``: PASS when the interval's high end stays below; FAIL when its low end lies above it and the host
    was quiet (a fixed host workload timed before and after the rounds: its CV's high end below half of
    ``max_cv`` and its median moved less than 10%); otherwise INCONCLUSIVE: a noisy host is the machine, not the
    device.

    evidence: ``samples_s`` (per-round times), ``control`` {``before_s``, ``after_s``: the host workload's rounds},
    ``control_cv``, ``method``."""
    import statistics

    if evidence.get("disabled"):
        return f(INCONCLUSIVE, evidence["disabled"], evidence=evidence)
    samples_s = evidence["samples_s"]
    max_cv = float(thresholds["max_cv"])
    d = throughput_decision(evidence, thresholds)
    host = control_state(evidence, max_cv)
    ev = dict(evidence, decision=d, control_state=host, rounds=len(samples_s), min_s=min(samples_s),
              median_s=statistics.median(samples_s), max_s=max(samples_s), cv=d["estimate"])
    text = (f"CV {interval_text(d, _pct)} over {len(samples_s)} rounds (min {min(samples_s) * 1e3:.3f} ms, median "
            f"{statistics.median(samples_s) * 1e3:.3f} ms, max {max(samples_s) * 1e3:.3f} ms)")
    f.set(measured=round(d["estimate"], 4), threshold=f"CV < {max_cv:.0%}", unit="CV", evidence=ev,
          method=f"{evidence.get('method')}; decided: {d['rule']}; FAIL only on a quiet host")
    if d["outcome"] == PASS_:
        return f(PASS, text)
    if d["outcome"] == FAIL_ and host["quiet"]:
        return f(FAIL, f"{text}; the host control varied only {interval_text(host['cv'], _pct)}",
                 remediation="look for clock or power throttling (clocks-event reasons), thermal state (run after "
                             "THERM-*-STEADY), background work and frequency scaling on the host")
    if d["outcome"] == FAIL_:
        return f(INCONCLUSIVE, f"{text}; but {host['why']}: the device's fluctuation cannot be told from the host's")
    return f(INCONCLUSIVE, f"{text}; {undecided_text(d, _pct, 'rounds')}")


def ratio_decisions(rows: List[Dict[str, Any]], max_ratio: Optional[float], what: str) -> List[Dict[str, Any]]:
    """Per operator: the ratio here / reference with its interval (the samples' t-interval over the reference's
    stored figure, which is taken as exact; a count with no samples is exact), against ``max_ratio``."""
    out = []
    for r in rows:
        ref = r.get("reference")
        samples = r.get("samples")
        if samples and ref:
            stat = mean_interval([float(x) / float(ref) for x in samples])
        else:
            stat = exact(float(r["ratio"]))
        d = decide(stat, max_ratio, AT_MOST, show=lambda x: f"{x:.3g}x", what=f"{r['op']} {r['dtype']} {what} ratio")
        d.update(op=r["op"], dtype=r["dtype"])
        out.append(d)
    return out


@check("EQ-LATENCY", version=2)
def check_latency_ratio(evidence: Dict[str, Any], thresholds: Dict[str, Any], f: Finding) -> Verdict:
    """EQ-LATENCY: per operator, the latency here over the golden set's (the runs' t-interval over the stored
    figure), against ``max_ratio``; the worst decides.  evidence: ``operators`` (op, dtype, here, reference, ratio,
    samples)."""
    return _ratio_v2(f, evidence["operators"], thresholds["max_ratio"], "latency")


@check("EQ-RESOURCE", version=2)
def check_resource_ratio(evidence: Dict[str, Any], thresholds: Dict[str, Any], f: Finding) -> Verdict:
    """EQ-RESOURCE, on peak device memory (a count: exact); evidence as for EQ-LATENCY."""
    return _ratio_v2(f, evidence["operators"], thresholds["max_ratio"], "peak device memory")


def _ratio_v2(f: Finding, rows: List[Dict[str, Any]], max_ratio: Optional[float], what: str) -> Verdict:
    rows = [r for r in rows if r.get("ratio") is not None]
    ev: Dict[str, Any] = {"operators": rows, "max_ratio": max_ratio}
    f.set(evidence=ev)
    if not rows:
        return f(SKIP, f"no {what} was recorded beside a reference")
    ds = ratio_decisions(rows, max_ratio, what)
    worst = max(ds, key=lambda d: d["estimate"])
    d = combine(ds) if max_ratio is not None else worst
    ev.update(decisions=ds, decision=d)
    show = lambda x: f"{x:.3g}x"  # noqa: E731
    text = (f"worst {what} ratio {interval_text(worst, show)} ({worst['op']} {worst['dtype']}) over {len(rows)} operators "
            "against the golden reference")
    f.set(measured=round(worst["estimate"], 3), unit="x reference",
          method=f"here / the golden set's stored figure, per operator; decided: {d['rule']}")
    if max_ratio is None:
        return f(WARN, text + "; the profile sets no allowed ratio", threshold="none set")
    f.set(threshold=f"<= {max_ratio:g}x")
    if d["outcome"] == FAIL_:
        return f(FAIL, f"{text}; {d['op']} {d['dtype']} {interval_text(d, show)} is above {max_ratio:g}x",
                 remediation=f"profile the slow operators on this platform; check the {what} of the library versions "
                             "against the reference platform's")
    if d["outcome"] == PASS_:
        return f(PASS, text)
    return f(INCONCLUSIVE, f"{text}; {d['op']} {d['dtype']}: {undecided_text(d, show, 'runs')}")
