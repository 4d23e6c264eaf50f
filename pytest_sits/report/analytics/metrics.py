"""The measured figures of one report that a platform decision weighs, by A §4.1 dimension.

Each metric names the requirement whose verdicts it comes from, the evidence key it reads, the
direction that is better and how several subjects (cards) are combined (median).  Reports are
untrusted input: every value is type-checked, and a value that is not a finite number is no value.
"""

from __future__ import annotations

import math
import re
import statistics
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional

#: Statuses that decided a requirement (a measurement was made and judged).
DECIDED = ("PASS", "FAIL", "WARN", "WAIVED")
SWEEP_REQUIREMENTS = ("PLP-POWER", "PLP-LATENCY")
MAX_SWEEP_POINTS = 5000


def num(v: Any) -> Optional[float]:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return None
    return float(v)


def decided_verdicts(report: Mapping[str, Any], requirement: str) -> List[Dict[str, Any]]:
    return [v for v in report.get("verdicts") or [] if isinstance(v, dict) and v.get("requirement") == requirement
            and v.get("status") in DECIDED]


def decided_requirements(report: Mapping[str, Any]) -> Dict[str, str]:
    """requirement -> how it ended in this report: 'decided' or the statuses it had (e.g. 'SKIP')."""
    out: Dict[str, set] = {}
    for v in report.get("verdicts") or []:
        if isinstance(v, dict) and isinstance(v.get("requirement"), str):
            out.setdefault(v["requirement"], set()).add(str(v.get("status")))
    return {r: "decided" if s & set(DECIDED) else "/".join(sorted(s)) for r, s in out.items()}


def sweep_points(report: Mapping[str, Any]) -> Dict[str, Any]:
    """The measured (load, power, latency, error, throughput) points of the PLP verdicts' ``sweep`` evidence.

    The same sweep appears in PLP-POWER and PLP-LATENCY of one subject: points are keyed by
    (subject, target_qps, rho) and kept once.  A point without a finite load, P99 latency, error rate and
    throughput is rejected (counted); power and energy may be missing (None)."""
    seen = set()
    points: List[Dict[str, Any]] = []
    rejected = 0
    truncated = False
    for req in SWEEP_REQUIREMENTS:
        for v in decided_verdicts(report, req):
            ev = v.get("evidence")
            sweep = ev.get("sweep") if isinstance(ev, dict) else None
            if not isinstance(sweep, list):
                continue
            for p in sweep:
                if not isinstance(p, dict):
                    rejected += 1
                    continue
                rho, lat, err, thr = (num(p.get(k)) for k in ("rho", "p99_latency_s", "error_rate", "throughput_qps"))
                if rho is None or lat is None or err is None or thr is None or rho < 0 or lat < 0 or err < 0:
                    rejected += 1
                    continue
                key = (str(v.get("subject")), num(p.get("target_qps")), rho)
                if key in seen:
                    continue
                if len(points) >= MAX_SWEEP_POINTS:
                    truncated = True
                    continue
                seen.add(key)
                points.append({"subject": key[0], "target_qps": key[1], "rho": rho, "power_w": num(p.get("power_w")),
                               "p50_latency_s": num(p.get("p50_latency_s")), "p99_latency_s": lat,
                               "throughput_qps": thr, "tokens_per_s": num(p.get("tokens_per_s")), "error_rate": err,
                               "energy_j": num(p.get("energy_j"))})
    return {"points": points, "rejected": rejected, "truncated": truncated,
            "subjects": sorted({p["subject"] for p in points})}


def _median(values: Iterable[Optional[float]]) -> Optional[float]:
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


def _evidence_median(report: Mapping[str, Any], req: str, get: Callable[[Dict[str, Any]], Any]) -> Dict[str, Any]:
    vals = []
    for v in decided_verdicts(report, req):
        ev = v.get("evidence")
        ev = ev if isinstance(ev, dict) else {}
        try:
            vals.append(num(get(ev)))
        except (KeyError, TypeError, AttributeError, IndexError):
            vals.append(None)
    got = [x for x in vals if x is not None]
    return {"value": _median(got), "subjects": len(got)}


def _measured_median(report: Mapping[str, Any], req: str) -> Dict[str, Any]:
    got = [num(v.get("measured")) for v in decided_verdicts(report, req)]
    got = [x for x in got if x is not None]
    return {"value": _median(got), "subjects": len(got)}


def _mesh_share(report: Mapping[str, Any], req: str) -> Dict[str, Any]:
    for v in decided_verdicts(report, req):
        m = re.match(r"^\s*(\d+)\s*/\s*(\d+)", str(v.get("measured")))
        if m and int(m.group(2)) > 0:
            return {"value": int(m.group(1)) / int(m.group(2)), "subjects": 1}
    return {"value": None, "subjects": 0}


def _pcie(ev: Dict[str, Any]) -> Optional[float]:
    bw = ev["bandwidth"]
    vals = [num(bw[d]["gbps_median"]) for d in ("h2d", "d2h") if isinstance(bw.get(d), dict)]
    known = [x for x in vals if x is not None]
    return min(known) if known else None


def _latency_at_load(report: Mapping[str, Any], points: List[Dict[str, Any]]) -> Dict[str, Any]:
    th = ((report.get("profile") or {}).get("data") or {}).get("thresholds", {}).get("PLP-LATENCY", {})
    bound = num(th.get("at_load_max")) if isinstance(th, dict) else None
    bound = 0.70 if bound is None else bound
    per_subject: Dict[str, float] = {}
    for p in points:
        if p["rho"] <= bound:
            per_subject[p["subject"]] = max(per_subject.get(p["subject"], 0.0), p["p99_latency_s"] * 1000.0)
    return {"value": _median(per_subject.values()), "subjects": len(per_subject), "at_load_max": bound}


def _peak_tokens(points: List[Dict[str, Any]]) -> Dict[str, Any]:
    per_subject: Dict[str, float] = {}
    for p in points:
        if p["tokens_per_s"] is not None:
            per_subject[p["subject"]] = max(per_subject.get(p["subject"], 0.0), p["tokens_per_s"])
    return {"value": _median(per_subject.values()), "subjects": len(per_subject)}


#: key -> (label, A §4.1 dimension, requirement, unit, better, how it is read)
METRICS: Dict[str, Dict[str, str]] = {
    "p99_latency_ms": {"label": "P99 latency at load <= PLP-LATENCY's bound", "dimension": "cpu",
                       "requirement": "PLP-LATENCY", "unit": "ms", "better": "lower",
                       "source": "evidence.sweep: highest p99_latency_s at rho <= at_load_max, median over cards"},
    "peak_tokens_per_s": {"label": "peak token rate", "dimension": "cpu", "requirement": "PLP-LATENCY",
                          "unit": "tokens/s", "better": "higher",
                          "source": "evidence.sweep: highest tokens_per_s, median over cards"},
    "mem_bw_gbps": {"label": "device-memory bandwidth", "dimension": "memory", "requirement": "MEM-BW-EFFICIENCY",
                    "unit": "GB/s", "better": "higher", "source": "evidence.gbps_median, median over cards"},
    "mem_capacity_gb": {"label": "memory per card", "dimension": "memory", "requirement": "MEM-CAPACITY",
                        "unit": "GB", "better": "higher", "source": "measured, median over cards"},
    "coldstart_s": {"label": "cold start", "dimension": "nvme", "requirement": "SVC-COLDSTART", "unit": "s",
                    "better": "lower", "source": "measured, median over cards"},
    "peer_mesh_share": {"label": "peer-link pairs with P2P", "dimension": "network", "requirement": "LINK-NVLINK-MESH",
                        "unit": "share", "better": "higher", "source": "measured 'a/b pairs' as a/b"},
    "pcie_bw_gbps": {"label": "host<->device PCIe bandwidth", "dimension": "network", "requirement": "TOPO-PCIE-BW",
                     "unit": "GB/s", "better": "higher",
                     "source": "evidence.bandwidth: lower of h2d and d2h gbps_median, median over cards"},
}


def platform_metrics(report: Mapping[str, Any], sweep: Optional[Dict[str, Any]] = None) -> Dict[str, Dict[str, Any]]:
    """Every metric of :data:`METRICS` read from one report: key -> dict(METRICS[key], value, subjects)."""
    pts = (sweep or sweep_points(report))["points"]
    read = {
        "p99_latency_ms": _latency_at_load(report, pts) if decided_verdicts(report, "PLP-LATENCY") else
        {"value": None, "subjects": 0},
        "peak_tokens_per_s": _peak_tokens(pts) if decided_verdicts(report, "PLP-LATENCY") else
        {"value": None, "subjects": 0},
        "mem_bw_gbps": _evidence_median(report, "MEM-BW-EFFICIENCY", lambda ev: ev["gbps_median"]),
        "mem_capacity_gb": _measured_median(report, "MEM-CAPACITY"),
        "coldstart_s": _measured_median(report, "SVC-COLDSTART"),
        "peer_mesh_share": _mesh_share(report, "LINK-NVLINK-MESH"),
        "pcie_bw_gbps": _evidence_median(report, "TOPO-PCIE-BW", _pcie),
    }
    return {k: dict(METRICS[k], key=k, **read[k]) for k in METRICS}
