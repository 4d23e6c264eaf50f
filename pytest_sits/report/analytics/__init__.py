"""Report analytics (SITS2026 A §2.5, §4.1, §4.2): pure functions on a report's data.

:func:`analyse` builds the report's ``analytics`` section from the verdicts' evidence:

- the 3-D heat map of power × latency × load in A's three stages: cubic interpolation between the
  sweep points (:mod:`.surface`), Pareto pruning of the grid points dominated at once on P99 latency
  and error rate (minimised) and throughput (maximised) (:mod:`.pareto`), and the SLA-weighted
  normalisation w_i = (1/SLA_i) / Σ_j (1/SLA_j) (:mod:`.weights`);
- A §4.1's tier weights and the measured figures that feed each dimension (:mod:`.metrics`);
- TCO per card from the profile's ``site:`` section (declared, not measured) and tokens per watt
  (:mod:`.tco`).

Not pass/fail.  Nothing here touches hardware, a clock or a file; scipy is imported only when a
sweep is there to interpolate.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional

from .metrics import decided_verdicts, num, platform_metrics, sweep_points
from .pareto import prune
from .tco import sweep_tokens_per_joule, tco_per_card
from .weights import (DISCREPANCY, DOCUMENT_EXAMPLE_CLAIMED, DOCUMENT_EXAMPLE_SLA, FORMULA, SLA_METRICS,
                      sla_ratio, sla_weights, weights_table)

ANALYTICS_VERSION = 2  # 2: the best point only among points that meet the SLA
NO_SWEEP = "no sweep measured"
#: Objectives of the Pareto pruning (A §2.5), on the SLA metrics in the document's units.
OBJECTIVES = {k: m["sense"] for k, m in SLA_METRICS.items()}


def _profile_data(report: Mapping[str, Any]) -> Dict[str, Any]:
    data = (report.get("profile") or {}).get("data") if isinstance(report.get("profile"), dict) else None
    return data if isinstance(data, dict) else {}


def sla_targets(report: Mapping[str, Any]) -> Dict[str, Any]:
    """The SLA targets (ms, %, req/s) and where they come from: site.sla, else SVC-SLA's thresholds."""
    prof = _profile_data(report)
    site = prof.get("site")
    site = site if isinstance(site, dict) else {}
    sla = site.get("sla") if isinstance(site.get("sla"), dict) else None
    if sla and all(num(sla.get(k)) for k in SLA_METRICS):
        return {"targets": {k: float(sla[k]) for k in SLA_METRICS}, "source": "profile site.sla (declared)"}
    th = (prof.get("thresholds") or {}).get("SVC-SLA") or {}
    p99, rps, err = num(th.get("p99_ms")), num(th.get("min_rps")), num(th.get("max_error_rate"))
    if p99 and rps and err:
        return {"targets": {"latency_ms": p99, "error_rate_pct": err * 100.0, "throughput_qps": rps},
                "source": "profile thresholds SVC-SLA (p99_ms, max_error_rate as %, min_rps)"}
    return {"targets": dict(DOCUMENT_EXAMPLE_SLA), "source": "A §2.5's example (the profile sets no SLA)"}


def sla_section(report: Mapping[str, Any]) -> Dict[str, Any]:
    t = sla_targets(report)
    return {"targets": t["targets"], "source": t["source"],
            "units": {k: m["unit"] for k, m in SLA_METRICS.items()}, "weights": sla_weights(t["targets"]),
            "formula": FORMULA, "score": "sum_i w_i * r_i, r_i = measured/target (target/measured for throughput): "
                                         "1 = exactly at the targets, lower is better",
            "document_example": {"targets": DOCUMENT_EXAMPLE_SLA, "claimed": DOCUMENT_EXAMPLE_CLAIMED,
                                 "formula_gives": {k: round(v, 4) for k, v in sla_weights(DOCUMENT_EXAMPLE_SLA).items()}},
            "discrepancy": DISCREPANCY}


def _sla_point(p: Mapping[str, Any]) -> Dict[str, float]:
    return {"latency_ms": p["p99_latency_s"] * 1000.0, "error_rate_pct": p["error_rate"] * 100.0,
            "throughput_qps": p["throughput_qps"]}


def _meets(point: Mapping[str, float], targets: Mapping[str, float]) -> bool:
    """The point meets every SLA target (latency and error rate at most, throughput at least)."""
    return all((point[k] >= targets[k]) if m["sense"] == "max" else (point[k] <= targets[k])
               for k, m in SLA_METRICS.items())


def _score(point: Mapping[str, float], targets: Mapping[str, float], weights: Mapping[str, float]) -> Optional[float]:
    s = sum(weights[k] * sla_ratio(k, point[k], targets[k]) for k in weights)
    return round(s, 6) if s == s and s != float("inf") else None


def heatmap(points: List[Dict[str, Any]], sla: Mapping[str, Any]) -> Dict[str, Any]:
    """A §2.5's three stages on the sweep points that carry a power reading."""
    powered = [p for p in points if p["power_w"] is not None]
    if not points:
        return {"status": "not drawn", "reason": NO_SWEEP}
    if not powered:
        return {"status": "not drawn", "reason": f"{len(points)} sweep point(s) but no power reading: the heat map "
                                                 "needs power (PLP-POWER) beside latency and load"}
    from .surface import MissingDependency, interpolate  # numpy and scipy: only when there is a surface to draw
    axes = {"x": {"key": "rho", "label": "load ρ", "unit": "share of peak"},
            "y": {"key": "power_w", "label": "power", "unit": "W"},
            "colour": {"key": "latency_ms", "label": "P99 latency", "unit": "ms"}}
    vals = {k: [_sla_point(p)[k] for p in powered] for k in SLA_METRICS}
    try:
        grid = interpolate([p["rho"] for p in powered], [p["power_w"] for p in powered], vals,
                           clip_min={"error_rate_pct": 0.0, "throughput_qps": 0.0, "latency_ms": 0.0})
    except MissingDependency as exc:
        return {"status": "not drawn", "reason": str(exc), "axes": axes}
    if grid["mode"] == "none":
        return {"status": "not drawn", "reason": grid["reason"], "axes": axes}
    # Stage 2: Pareto pruning of the grid points; stage 3: SLA-weighted score of the points kept.
    surface = grid["mode"] == "surface"
    cells: List[Dict[str, float]] = []
    where: List[Any] = []
    if surface:
        for iy in range(len(grid["y"])):
            for ix in range(len(grid["x"])):
                c = {k: grid["values"][k][iy][ix] for k in SLA_METRICS}
                if all(v is not None for v in c.values()):
                    cells.append(c)
                    where.append((iy, ix))
    else:
        for i in range(len(grid["x"])):
            cells.append({k: grid["values"][k][i] for k in SLA_METRICS})
            where.append(i)
    pr = prune(cells, OBJECTIVES)
    targets, weights = sla["targets"], sla["weights"]
    if surface:
        mask: List[Any] = [[None] * len(grid["x"]) for _ in grid["y"]]
        score: List[Any] = [[None] * len(grid["x"]) for _ in grid["y"]]
    else:
        mask = [None] * len(grid["x"])
        score = [None] * len(grid["x"])

    def put(arr, w, value):
        if surface:
            arr[w[0]][w[1]] = value
        else:
            arr[w] = value

    for i in pr["kept"]:
        put(mask, where[i], True)
        put(score, where[i], _score(cells[i], targets, weights))
    for i in pr["dropped"]:
        put(mask, where[i], False)
    # The best point is the lowest score among the kept points that meet every SLA target: a point that misses
    # one (a P99 of seconds against 120 ms) is no recommendation, whatever its score.
    meeting = [i for i in pr["kept"] if _meets(cells[i], targets)]
    kept_scores = [(s, i) for s, i in ((_score(cells[i], targets, weights), i) for i in meeting) if s is not None]
    best, best_reason = None, None
    if kept_scores:
        s, i = min(kept_scores)
        w = where[i]
        best = {"score": s, "rho": grid["x"][w[1] if surface else w],
                "power_w": grid["y"][w[0]] if surface else grid["y"][w], **cells[i],
                "rule": "the lowest score among the Pareto-kept points that meet every SLA target"}
    else:
        best_reason = (f"none of the {len(pr['kept'])} Pareto-kept grid points meets every SLA target (P99 <= "
                       f"{targets['latency_ms']:g} ms, error rate <= {targets['error_rate_pct']:g} %, throughput >= "
                       f"{targets['throughput_qps']:g} req/s)")
    return {"status": "drawn", "axes": axes, "interpolation": grid,
            "pareto": {"objectives": OBJECTIVES, "kept": len(pr["kept"]), "dropped": len(pr["dropped"]),
                       "unknown": len(pr["unknown"]), "mask": mask,
                       "rule": "a grid point is dropped when another is no worse on P99 latency, error rate (both "
                               "minimised) and throughput (maximised) and better on one"},
            "score": score, "best": best, "best_reason": best_reason}


def measured_pareto(points: List[Dict[str, Any]]) -> Dict[str, Any]:
    if not points:
        return {"status": "not computed", "reason": NO_SWEEP}
    pr = prune([_sla_point(p) for p in points], OBJECTIVES)
    return {"status": "computed", "objectives": OBJECTIVES, "front": pr["kept"], "dominated": pr["dropped"],
            "unknown": pr["unknown"]}


def _p99_power(points: List[Dict[str, Any]], report: Mapping[str, Any]) -> Dict[str, Any]:
    powers = [p["power_w"] for p in points if p["power_w"] is not None]
    for req in ("PLP-POWER",):
        vals = [num((v.get("evidence") or {}).get("power_p99_w")) for v in decided_verdicts(report, req)
                if isinstance(v.get("evidence"), dict)]
        known = [x for x in vals if x is not None]
        if known:
            return {"power_w": max(known), "source": "measured: PLP-POWER evidence power_p99_w (highest card)"}
    if powers:
        return {"power_w": max(powers), "source": "measured: highest power reading of the sweep"}
    tdp = num((_profile_data(report).get("hardware") or {}).get("tdp_w"))
    if tdp:
        return {"power_w": tdp, "source": "declared: the profile's hardware.tdp_w (no power was measured)"}
    return {"power_w": None, "source": "no power measured and no TDP in the profile"}


def tco_section(report: Mapping[str, Any], points: List[Dict[str, Any]]) -> Dict[str, Any]:
    site = _profile_data(report).get("site")
    if not isinstance(site, dict) or not {k for k in site if k != "sla"}:
        return {"status": "not computed",
                "reason": "the profile declares no site: section (card price, electricity price, cooling overhead, "
                          "rack redundancy, operator cost); add one to see TCO per card"}
    power = _p99_power(points, report)
    if power["power_w"] is None:
        return {"status": "not computed", "reason": power["source"]}
    return dict(tco_per_card(site, power["power_w"], power["source"]), status="computed")


def tokens_per_watt(report: Mapping[str, Any], points: List[Dict[str, Any]]) -> Dict[str, Any]:
    rows = []
    for v in decided_verdicts(report, "PLP-POWER"):
        ev = v.get("evidence")
        ev = ev if isinstance(ev, dict) else {}
        tpw, tpj = num(ev.get("tokens_per_watt_p99")), num(ev.get("tokens_per_joule"))
        if tpw is not None or tpj is not None:
            rows.append({"subject": str(v.get("subject")), "tokens_per_watt_p99": tpw, "tokens_per_joule": tpj})
    if rows:
        vals = sorted(r["tokens_per_watt_p99"] for r in rows if r["tokens_per_watt_p99"] is not None)
        return {"status": "measured", "per_subject": rows,
                "median_tokens_per_watt_p99": vals[len(vals) // 2] if vals else None,
                "source": "PLP-POWER evidence: output tokens over the energy integrated with a P99 1 s power window",
                "document_example": "A §4.2: air cooling 780 W P99, 12.4 tokens/W; single-phase immersion 810 W, "
                                    "18.7 tokens/W"}
    derived = sweep_tokens_per_joule(points)
    if derived:
        return dict(derived, status="derived")
    return {"status": "not computed", "reason": NO_SWEEP if not points else "no power reading in the sweep"}


def analyse(report: Mapping[str, Any]) -> Dict[str, Any]:
    """The report's ``analytics`` section, built from its verdicts' evidence and its profile."""
    sw = sweep_points(report)
    points = sw["points"]
    sla = sla_section(report)
    sweep_info: Dict[str, Any] = {"status": "measured" if points else "none",
                                  "requirements": ["PLP-POWER", "PLP-LATENCY"], "points": points,
                                  "subjects": sw["subjects"], "rejected_points": sw["rejected"],
                                  "truncated": sw["truncated"]}
    if not points:
        sweep_info["reason"] = NO_SWEEP
    metrics = platform_metrics(report, sw)
    return {
        "version": ANALYTICS_VERSION,
        "note": "Analytics of SITS2026 A §2.5, §4.1, §4.2: computed from the evidence, not pass/fail.",
        "sweep": sweep_info,
        "sla": sla,
        "heatmap": heatmap(points, sla),
        "pareto": measured_pareto(points),
        "tiers": {"weights": weights_table(), "metrics": list(metrics.values()),
                  "note": "weights from A §4.1; the figures of one report are scored against other platforms "
                          "by `sits compare`"},
        "tco": tco_section(report, points),
        "tokens_per_watt": tokens_per_watt(report, points),
    }
