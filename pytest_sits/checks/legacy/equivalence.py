"""Earlier versions of the equivalence checks (:mod:`pytest_sits.checks.equivalence`), kept for replay."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from ...verdict import FAIL, INCONCLUSIVE, PASS, SKIP, WARN, Verdict
from .. import check


# Frozen copies of the helpers these versions used: an edit of the current checks never changes an old verdict.

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


def _precision(evidence: Dict[str, Any], tol: Dict[str, Any], subject: str) -> Verdict:
    result, reference = evidence["comparison"], evidence["reference"]
    ev = dict(evidence, tolerance=tol)
    threshold = f"|x - ref| <= {tol['atol']:g} + {tol['rtol']:.3g} * |ref| ({tol['source']})"
    measured = f"{result['mismatches']} / {result['n']} mismatched"
    if result["passed"]:
        why = (f"all {result['n']} elements within tolerance of {reference}; max rel "
               f"{result.get('max_rel_diff', 0):.3g}, max abs {result.get('max_abs_diff', 0):.3g}, ULP max "
               f"{result.get('ulp_max', 0)}") if not result.get("exact") else f"all {result['n']} elements equal"
        return Verdict("EQ-PRECISION", PASS, why, measured=measured, threshold=threshold, subject=subject, evidence=ev)
    return Verdict("EQ-PRECISION", FAIL, f"against {reference}: " + describe(result), measured=measured,
                   threshold=threshold, subject=subject, evidence=ev,
                   remediation="compare the kernel (library versions, math modes such as TF32 or fast-math, "
                               "reduced-precision reductions) with the reference platform's; if the task's risk "
                               "class allows it, set EQ-PRECISION.risk_class in the profile")


def _golden_coverage(evidence: Dict[str, Any], thresholds: Dict[str, Any], subject: str = "golden set") -> Verdict:
    """The golden set holds the same operator/dtype pairs as this corpus (the rule of versions 1 and 2)."""
    golden, here, source = evidence["golden"], evidence["corpus"], evidence["source"]
    missing = sorted(set(here) - set(golden))
    extra = sorted(set(golden) - set(here))
    ev = {"golden": golden, "corpus": here, "not_in_golden": missing, "only_in_golden": extra, "source": source}
    if not missing and not extra:
        return Verdict("EQ-PRECISION", PASS, f"the golden set and this corpus hold the same {len(here)} "
                       "operator/dtype pairs", measured=len(here), subject="golden set", evidence=ev)
    parts = []
    if missing:
        parts.append(f"{len(missing)} pair(s) of this corpus are not in the golden set: {', '.join(missing)}")
    if extra:
        parts.append(f"{len(extra)} pair(s) of the golden set are not in this corpus: {', '.join(extra)}")
    return Verdict("EQ-PRECISION", INCONCLUSIVE, "; ".join(parts) + f" (golden set {source} was recorded with "
                   "another operator list)", measured=len(here) - len(missing), subject="golden set", evidence=ev)


@check("EQ-PRECISION", version=1, legacy=True, derived_thresholds=True)
def check_precision_v1(evidence: Dict[str, Any], tol: Dict[str, Any], subject: str = "") -> Verdict:
    """Version 1 (reports of pytest-sits 0.1): the same rule, given the operator's resolved tolerance as its
    thresholds.  Kept so that older reports replay."""
    if evidence.get("not_in_golden"):
        return Verdict("EQ-PRECISION", INCONCLUSIVE, evidence["not_in_golden"], subject=subject, evidence=evidence)
    return _precision(evidence, tol, subject)


@check("EQ-THROUGHPUT", version=1, legacy=True)
def check_throughput_v1(evidence: Dict[str, Any], thresholds: Dict[str, Any], subject: str = "") -> Verdict:
    """Version 1, kept so that older reports replay: the coefficient of variation of the per-round times (no
    interval) below max_cv; undecidable when the host itself is noisy.

    evidence: ``samples_s`` (per-round times), ``control_cv`` (a fixed host workload's CV), ``method``."""
    import statistics

    if evidence.get("disabled"):
        return Verdict("EQ-THROUGHPUT", INCONCLUSIVE, evidence["disabled"], subject=subject, evidence=evidence)
    samples_s, control_cv, method = evidence["samples_s"], evidence.get("control_cv"), evidence.get("method")

    max_cv = float(thresholds["max_cv"])
    mean = statistics.mean(samples_s)
    cv = statistics.pstdev(samples_s) / mean if mean > 0 else float("inf")
    ev = {"rounds": len(samples_s), "min_s": min(samples_s), "median_s": statistics.median(samples_s),
          "max_s": max(samples_s), "mean_s": mean, "cv": cv, "control_cv": control_cv,
          "samples_s": samples_s}
    text = (f"CV {cv:.2%} over {len(samples_s)} rounds (min {min(samples_s) * 1e3:.3f} ms, median "
            f"{statistics.median(samples_s) * 1e3:.3f} ms, max {max(samples_s) * 1e3:.3f} ms)")
    threshold = f"CV < {max_cv:.0%}"
    if cv < max_cv:
        return Verdict("EQ-THROUGHPUT", PASS, text, measured=round(cv, 4), threshold=threshold, unit="CV",
                       subject=subject, evidence=ev, method=method)
    if control_cv is not None and control_cv >= max_cv / 2:
        return Verdict("EQ-THROUGHPUT", INCONCLUSIVE, f"{text}; a fixed host workload timed beside it varied by "
                       f"{control_cv:.2%}: this machine is too noisy to tell the device's fluctuation from its own",
                       measured=round(cv, 4), threshold=threshold, unit="CV", subject=subject, evidence=ev,
                       method=method)
    return Verdict("EQ-THROUGHPUT", FAIL, text + (f"; the host control varied only {control_cv:.2%}"
                                                  if control_cv is not None else ""),
                   measured=round(cv, 4), threshold=threshold, unit="CV", subject=subject, evidence=ev,
                   method=method,
                   remediation="look for clock or power throttling (clocks-event reasons), thermal state (run "
                               "after THERM-*-STEADY), background work and frequency scaling on the host")


@check("EQ-LATENCY", version=1, legacy=True)
def check_latency_ratio_v1(evidence: Dict[str, Any], thresholds: Dict[str, Any], subject: str = "") -> Verdict:
    """Version 1, kept so that older reports replay: the worst ratio, no interval.  evidence: ``operators`` (op,
    dtype, here, reference, ratio); thresholds: ``max_ratio``."""
    return _ratio("EQ-LATENCY", evidence["operators"], thresholds.get("max_ratio"), subject, "latency")


@check("EQ-RESOURCE", version=1, legacy=True)
def check_resource_ratio_v1(evidence: Dict[str, Any], thresholds: Dict[str, Any], subject: str = "") -> Verdict:
    """Version 1, kept so that older reports replay: EQ-RESOURCE on peak device memory, no interval."""
    return _ratio("EQ-RESOURCE", evidence["operators"], thresholds.get("max_ratio"), subject, "peak device memory")


def _ratio(req: str, rows: List[Dict[str, Any]], max_ratio: Optional[float], subject: str, what: str) -> Verdict:
    """The worst ratio (here / reference) over the operators."""
    rows = [r for r in rows if r.get("ratio") is not None]
    ev = {"operators": rows, "max_ratio": max_ratio}
    if not rows:
        return Verdict(req, SKIP, f"no {what} was recorded beside a reference", subject=subject, evidence=ev)
    worst = max(rows, key=lambda r: r["ratio"])
    text = (f"worst {what} ratio {worst['ratio']:.2f}x ({worst['op']} {worst['dtype']}) over {len(rows)} operators "
            "against the golden reference")
    if max_ratio is None:
        return Verdict(req, WARN, text + "; the profile sets no allowed ratio", measured=round(worst["ratio"], 3),
                       threshold="none set", unit="x reference", subject=subject, evidence=ev)
    if worst["ratio"] > max_ratio:
        return Verdict(req, FAIL, text + f", above {max_ratio:g}x", measured=round(worst["ratio"], 3),
                       threshold=f"<= {max_ratio:g}x", unit="x reference", subject=subject, evidence=ev,
                       remediation=f"profile the slow operators on this platform; check the {what} of the "
                                   "library versions against the reference platform's")
    return Verdict(req, PASS, text, measured=round(worst["ratio"], 3), threshold=f"<= {max_ratio:g}x",
                   unit="x reference", subject=subject, evidence=ev)


@check("EQ-PRECISION/golden-coverage", requirement="EQ-PRECISION", version=1, legacy=True,
       derived_thresholds=True)
def check_golden_coverage_v1(evidence: Dict[str, Any], thresholds: Dict[str, Any], subject: str = "golden set"
                             ) -> Verdict:
    """Version 1 (reports of pytest-sits 0.1): the same rule, given no thresholds.  Kept so that older reports
    replay."""
    return _golden_coverage(evidence, thresholds, subject)
