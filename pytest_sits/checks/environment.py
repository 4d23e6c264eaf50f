"""The SITS2026 test environment during a measurement (document A §2.4), and what it does to the verdict.

A measured verdict (PLP-*, SVC-*, CRG-*, MEM-BW-EFFICIENCY, EQ-THROUGHPUT: the requirements declared
``environment=True``) carries the environment of its measurement: every GPU die and CPU package temperature read
during it, the host DRAM occupancy the hold kept (its windows), and the NUMA binding of the process that measured.
:func:`summarise` turns those readings into the block the report shows, and :func:`apply_environment` applies the
rule: a figure taken while the environment was outside the rules is not the SITS2026 figure, so a PASS, FAIL or
WARN measured then is INCONCLUSIVE, naming what moved.  What could not be read (no sensor, no hold) is "not
measured", stated in the verdict's reason, and does not change its status: the run cannot tell.

Both are pure: replay recomputes the block from the stored readings and applies the same rule.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from ..verdict import FAIL, INCONCLUSIVE, PASS, WARN, Verdict

#: The statuses a measurement outside the rules turns INCONCLUSIVE (ERROR, SKIP, WAIVED say nothing measured).
DECIDED = (PASS, FAIL, WARN)
#: Readings kept per sensor and measurement (1 Hz: an hour); beyond it the earliest are dropped, never thinned.
MAX_SAMPLES = 3600

RULE = ("during the measurement: every reading of a GPU die in [{g0:g}, {g1:g}] °C and of a CPU package in "
        "[{c0:g}, {c1:g}] °C, each sensor's spread (max - min) within max(2 x tolerance, one sensor step) "
        "(±{gt:g} °C die, ±{ct:g} °C package); host DRAM occupancy in [{d0:g}, {d1:g}] of the STREAM peak in at least "
        "{ds:.0%} of the hold's windows; the measuring process bound to the accelerator's NUMA node (document A "
        "§2.4). A figure taken outside these rules is INCONCLUSIVE; what has no sensor is stated as not measured")


def rule_text(rules: Dict[str, Any]) -> str:
    g, c, d = rules["gpu_die"], rules["cpu_package"], rules["dram"]
    return RULE.format(g0=g["band_c"][0], g1=g["band_c"][1], c0=c["band_c"][0], c1=c["band_c"][1],
                       gt=g["tolerance_c"], ct=c["tolerance_c"], d0=d["band"][0], d1=d["band"][1],
                       ds=d["min_in_band_share"])


def _slope_per_min(samples: List[List[float]]) -> Optional[float]:
    n = len(samples)
    if n < 2:
        return None
    mt = sum(t for t, _ in samples) / n
    my = sum(v for _, v in samples) / n
    den = sum((t - mt) ** 2 for t, _ in samples)
    if den <= 1e-12:
        return None
    return 60.0 * sum((t - mt) * (v - my) for t, v in samples) / den


def _sensor(name: str, s: Dict[str, Any], rule: Dict[str, Any]) -> Dict[str, Any]:
    """One sensor's readings during the measurement against its rule."""
    raw = s.get("samples") or []
    valid = [[float(t), float(v)] for t, v in raw if isinstance(v, (int, float)) and not isinstance(v, bool)]
    failed = len(raw) - len(valid)
    out: Dict[str, Any] = {"kind": s.get("kind"), "label": s.get("label") or name, "samples": len(valid),
                           "failed_readings": failed, "step_c": s.get("step_c")}
    if not valid:
        out.update(held=None, why=f"no reading during the measurement ({s.get('error') or 'no sample'})")
        return out
    ys = [v for _, v in valid]
    lo, hi = min(ys), max(ys)
    slope = _slope_per_min(valid)
    band = rule["band_c"]
    step = float(s.get("step_c") or 0.0)
    spread_max = max(2 * float(rule["tolerance_c"]), step)
    out.update(min_c=round(lo, 2), max_c=round(hi, 2), mean_c=round(sum(ys) / len(ys), 2),
               slope_c_per_min=None if slope is None else round(slope, 3), spread_c=round(hi - lo, 2),
               band_c=list(band), spread_max_c=spread_max)
    moved = []
    if lo < band[0] or hi > band[1]:
        moved.append(f"{out['label']} {lo:g}-{hi:g} °C outside [{band[0]:g}, {band[1]:g}] °C")
    elif hi - lo > spread_max + 1e-9:
        moved.append(f"{out['label']} moved {hi - lo:.2f} °C ({lo:g}-{hi:g} °C; at most {spread_max:g} °C)")
    out["held"] = not moved
    if moved:
        out["why"] = moved[0]
    return out


def summarise(block: Dict[str, Any], device: Optional[str] = None) -> Dict[str, Any]:
    """What held during the measurement: per sensor (min/max/mean/slope/spread), the DRAM hold's share of windows
    in band, the NUMA binding; ``held`` True (every rule measured and held), False (a rule was broken: ``moved``
    names each), None (nothing broken, but something not measured: ``not_measured`` names it).  ``device``: the
    verdict's accelerator, whose own die is judged (the other dies are shown); None: every die is judged."""
    rules = block.get("rules") or {}
    moved: List[str] = []
    not_measured: List[str] = list((block.get("not_measured") or {}).values())
    sensors = {}
    for name, s in sorted((block.get("sensors") or {}).items()):
        if not isinstance(s, dict):
            continue
        kind = s.get("kind")
        rule = rules.get(kind)
        if rule is None:
            continue
        judged = kind != "gpu_die" or device is None or s.get("device") in (None, device)
        if not judged and "samples" not in s:  # stored without its readings: shown by the summary it was kept with
            continue
        one = _sensor(name, s, rule)
        one["judged"] = judged
        sensors[name] = one
        if not judged:
            continue
        if one["held"] is False:
            moved.append(one["why"])
        elif one["held"] is None:
            not_measured.append(f"{one['label']}: {one['why']}")
    dram = block.get("dram")
    dram_out: Dict[str, Any]
    if isinstance(dram, dict) and dram.get("windows"):
        share = dram["windows_in_band"] / dram["windows"]
        need = rules.get("dram", {}).get("min_in_band_share", 0.95)
        dram_out = {"windows": dram["windows"], "windows_in_band": dram["windows_in_band"],
                    "share_in_band": round(share, 4), "min_in_band_share": need, "source": dram.get("source"),
                    "held": share >= need}
        if share < need:
            moved.append(f"host DRAM occupancy in band in {share:.0%} of {dram['windows']} windows (at least "
                         f"{need:.0%})")
    else:
        why = (dram or {}).get("not_measured") if isinstance(dram, dict) else None
        dram_out = {"held": None, "why": why or "no DRAM hold ran during the measurement"}
        not_measured.append(f"host DRAM occupancy: {dram_out['why']}")
    numa = block.get("numa")
    numa_out: Dict[str, Any] = dict(numa) if isinstance(numa, dict) else {}
    if numa_out.get("bound") is False:
        moved.append(f"not bound to NUMA node {numa_out.get('node')}: {numa_out.get('why')}")
    elif numa_out.get("bound") is None:
        not_measured.append(f"NUMA binding: {numa_out.get('why') or 'not recorded'}")
    held: Optional[bool] = False if moved else (None if not_measured else True)
    return {"held": held, "moved": moved, "not_measured": not_measured, "sensors": sensors, "dram": dram_out,
            "numa": numa_out, "rule": rule_text(rules) if {"gpu_die", "cpu_package", "dram"} <= set(rules) else None}


def apply_environment(verdict: Verdict, block: Optional[Dict[str, Any]]) -> Verdict:
    """The verdict under the environment of its measurement: ``block`` (the readings, :func:`summarise`'s input)
    goes into its evidence with its summary; a PASS, FAIL or WARN measured outside the rules becomes INCONCLUSIVE
    naming what moved; what was not measured is stated in the reason.  No block: the verdict unchanged."""
    if not isinstance(block, dict):
        return verdict
    device = block.get("device")
    summary = summarise(block, device if isinstance(device, str) else None)
    # the dies not judged for this verdict (another device's) keep their summary, not every reading
    sensors = {name: ({k: v for k, v in s.items() if k != "samples"} if isinstance(s, dict)
                      and not summary["sensors"].get(name, {}).get("judged", True) else s)
               for name, s in (block.get("sensors") or {}).items()}
    env = dict(block, sensors=sensors, summary=summary)
    evidence = dict(verdict.evidence, environment=env)
    if verdict.status not in DECIDED:
        return Verdict(verdict.requirement, verdict.status, verdict.reason, verdict.measured, verdict.threshold,
                       verdict.unit, verdict.subject, verdict.remediation, evidence, verdict.method, verdict.check,
                       verdict.thresholds)
    if summary["moved"]:
        reason = (f"measured outside the SITS2026 test environment ({'; '.join(summary['moved'])}): the figure is "
                  f"not the one the rules define; it read: {verdict.status} {verdict.reason}")
        return Verdict(verdict.requirement, INCONCLUSIVE, reason, verdict.measured, verdict.threshold, verdict.unit,
                       verdict.subject, None, dict(evidence, environment_status=verdict.status), verdict.method,
                       verdict.check, verdict.thresholds)
    reason = verdict.reason
    if summary["not_measured"]:
        reason += ("; test environment not measured (" + "; ".join(summary["not_measured"])
                   + "): the figure was not shown to be taken within A §2.4's rules")
    return Verdict(verdict.requirement, verdict.status, reason, verdict.measured, verdict.threshold, verdict.unit,
                   verdict.subject, verdict.remediation, evidence, verdict.method, verdict.check, verdict.thresholds)
