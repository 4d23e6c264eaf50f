"""Weights: SLA-weighted normalisation (A §2.5) and the service-class tier weights (A §4.1).

A §2.5 defines the weight of metric *i* from its SLA target as

    w_i = (1 / SLA_i) / Σ_j (1 / SLA_j)

and gives the example {latency 200 ms, error rate 0.5 %, throughput 1000 qps} → {0.42, 0.42, 0.16}.
That example does not follow from the formula: with the targets in the document's own units (ms, %,
qps) the formula gives ≈ {0.0025, 0.997, 0.0005}.  The suite implements the formula and says so
wherever the weights are shown.  The weights depend on the units the targets are written in; the suite
uses the document's (ms, %, req/s).
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Mapping, Optional, Tuple, cast

#: The SLA metrics, in the units A §2.5 writes them in (the weights depend on the units).
SLA_METRICS: Dict[str, Dict[str, str]] = {
    "latency_ms": {"label": "P99 latency", "unit": "ms", "sense": "min"},
    "error_rate_pct": {"label": "error rate", "unit": "%", "sense": "min"},
    "throughput_qps": {"label": "throughput", "unit": "req/s", "sense": "max"},
}
DOCUMENT_EXAMPLE_SLA = {"latency_ms": 200.0, "error_rate_pct": 0.5, "throughput_qps": 1000.0}
DOCUMENT_EXAMPLE_CLAIMED = {"latency_ms": 0.42, "error_rate_pct": 0.42, "throughput_qps": 0.16}
FORMULA = "w_i = (1/SLA_i) / sum_j (1/SLA_j)"
DISCREPANCY = ("A §2.5's worked example {latency 200 ms, error 0.5 %, throughput 1000 qps} -> {0.42, 0.42, 0.16} "
               "does not follow from its own formula w_i = (1/SLA_i) / sum_j (1/SLA_j), which gives about "
               "{0.0025, 0.997, 0.0005}; the suite implements the formula.")

#: A §4.1: resource weights per service class.  A names the dimensions CPU, memory, NVMe and network.
TIER_WEIGHTS: Dict[str, Dict[str, float]] = {
    "low-latency": {"cpu": 0.45, "memory": 0.15, "nvme": 0.10, "network": 0.30},
    "batch": {"cpu": 0.12, "memory": 0.38, "nvme": 0.40, "network": 0.10},
}
TIER_LABELS = {"low-latency": "low-latency API service", "batch": "high-throughput offline batch"}
DIMENSIONS: Dict[str, str] = {
    "cpu": "compute (A: CPU): the accelerator's latency and token rate under load",
    "memory": "memory: device-memory bandwidth and capacity",
    "nvme": "NVMe (storage): cold start, model load to first token",
    "network": "network: peer links (NVLink/XGMI mesh) and host<->device PCIe bandwidth",
}


def sla_weights(targets: Mapping[str, float]) -> Dict[str, float]:
    """w_i = (1/SLA_i) / Σ_j (1/SLA_j) over the given targets (each > 0 and finite)."""
    if not targets:
        raise ValueError("no SLA target given")
    for k, v in targets.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
            raise ValueError(f"SLA target {k} = {v!r}: must be a finite number > 0")
    inv = {k: 1.0 / float(v) for k, v in targets.items()}
    total = sum(inv.values())
    return {k: x / total for k, x in inv.items()}


def sla_ratio(metric: str, value: float, target: float) -> float:
    """How a measured value stands against its SLA target: 1 = at the target, below 1 = better than it.

    value / target for a metric to minimise (latency, error rate), target / value for one to maximise
    (throughput); a throughput of 0 is infinitely far from its target."""
    if SLA_METRICS[metric]["sense"] == "min":
        return value / target
    return target / value if value > 0 else math.inf


def sla_score(measured: Mapping[str, float], targets: Mapping[str, float],
              weights: Optional[Mapping[str, float]] = None) -> float:
    """Σ_i w_i · r_i with r_i = :func:`sla_ratio` (lower is better; 1 = every metric exactly at its target)."""
    w = dict(weights) if weights is not None else sla_weights(targets)
    return sum(w[k] * sla_ratio(k, float(measured[k]), float(targets[k])) for k in w)


def tier_score(dimension_scores: Mapping[str, Optional[float]], tier: str) -> Tuple[Optional[float], Dict[str, float],
                                                                                      List[str]]:
    """A §4.1 weighted score over the dimensions that have a score.

    Returns (score, the weights used — renormalised to sum 1 over the dimensions with data —, the dimensions
    left out for want of data).  A dimension with no measurement cannot be scored; its weight is not
    spread silently: it is named in the left-out list."""
    weights = TIER_WEIGHTS[tier]
    have = {d: w for d, w in weights.items() if dimension_scores.get(d) is not None}
    left = [d for d in weights if d not in have]
    if not have:
        return None, {}, left
    total = sum(have.values())
    used = {d: w / total for d, w in have.items()}
    # Every dimension in ``used`` has a score (``have`` keeps only those).
    return sum(used[d] * float(cast(float, dimension_scores[d])) for d in used), used, left


def weights_table() -> List[Dict[str, Any]]:
    """A §4.1's table, one row per dimension, for the reports."""
    return [{"dimension": d, "meaning": DIMENSIONS[d], **{t: TIER_WEIGHTS[t][d] for t in TIER_WEIGHTS}}
            for d in DIMENSIONS]
