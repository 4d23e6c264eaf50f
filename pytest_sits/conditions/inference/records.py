"""The records of an inference run and their summaries, shared by live and simulated runs: the peak ρ is taken
against, ρ over sliding windows, energy and power from the sampled sources, a Server run's latency figures, one
sweep point, efficiency, the downsampled timeline and the joined records written to the log folder."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, cast

from ...checks.interval import quantile_tail
from ..sampler import join, percentile, rho_at

#: Hard limits on what a profile may ask for (an absurd value cannot hang a run).
MAX_POINTS = 10
MAX_POINT_S = 600.0
from ...catalogue.inference import MAX_SLA_S  # noqa: E402,F401 - one bound, declared with SVC-SLA
MAX_QPS = 100_000.0
MAX_TIMELINE = 600
#: SVC-FRAG keeps at most this many per-step fractions in its evidence (evenly thinned).
MAX_STEP_FRACTIONS = 2000


def thinned(values: List[Any], limit: int = MAX_STEP_FRACTIONS) -> List[Any]:
    """At most ``limit`` of ``values``, evenly spaced (a report stays small)."""
    if len(values) <= limit:
        return values
    return [values[int(i * len(values) / limit)] for i in range(limit)]


def peak_of(config: Dict[str, Any], hardware: Dict[str, Any], measured_flops_s: Optional[float],
            device: str) -> Dict[str, Any]:
    """The theoretical peak ρ is taken against: the profile's ``peak_tflops``, else its datasheet
    ``fp16_dense_tflops`` for a half-precision model on an accelerator, else the measured maximum (said so)."""
    if config["peak_tflops"]:
        return {"flops_per_s": float(config["peak_tflops"]) * 1e12, "source": "profile PLP-PPL.peak_tflops",
                "theoretical": True}
    dtype = config["model"].get("dtype", "float32")
    if not str(device).startswith("cpu") and hardware.get("fp16_dense_tflops") and dtype in ("float16", "bfloat16"):
        return {"flops_per_s": float(hardware["fp16_dense_tflops"]) * 1e12,
                "source": "profile hardware.fp16_dense_tflops (datasheet, dense)", "theoretical": True}
    if measured_flops_s:
        return {"flops_per_s": measured_flops_s, "theoretical": False,
                "source": "measured: the highest FLOP rate of a window during LoadGen Offline saturation (the profile "
                          "states no theoretical peak for this device and dtype)"}
    return {"flops_per_s": None, "source": "none: no theoretical peak and no measured maximum", "theoretical": False}


def rho_series(work: Sequence[Sequence[Any]], t0: int, t1: int, period_ns: int, window_ms: float,
               peak_flops_s: float) -> List[float]:
    """ρ over sliding windows of ``window_ms`` stepped by the sampling period, inside [t0, t1]."""
    w = int(window_ms * 1e6)
    return rho_at(work, range(t0 + w, t1 + 1, max(1, period_ns)), w, peak_flops_s)


def energy_between(readings: List[Dict[str, Any]], t0: int, t1: int) -> Dict[str, Any]:
    """Energy from a counter between the first and last valid readings inside [t0, t1], and the power it
    implies; without a counter, the mean of instantaneous readings (said so) and no energy."""
    valid = [r for r in readings if not r.get("error") and t0 <= r["t_ns"] <= t1]
    failed = sum(1 for r in readings if r.get("error") and t0 <= r["t_ns"] <= t1)
    counter = [r for r in valid if r.get("energy_j") is not None]
    if len(counter) >= 2 and counter[-1]["t_ns"] > counter[0]["t_ns"]:
        e = counter[-1]["energy_j"] - counter[0]["energy_j"]
        dt = (counter[-1]["t_ns"] - counter[0]["t_ns"]) / 1e9
        return {"energy_j": e, "power_w": e / dt, "seconds": dt, "method": "energy counter", "failed": failed,
                "readings": len(valid)}
    inst = [r["power_w"] for r in valid if r.get("power_w") is not None]
    if inst:
        return {"energy_j": None, "power_w": sum(inst) / len(inst), "seconds": (t1 - t0) / 1e9, "failed": failed,
                "method": "mean of instantaneous readings (no energy counter)", "readings": len(valid)}
    return {"energy_j": None, "power_w": None, "failed": failed, "readings": 0,
            "method": "no valid reading in the interval"}


def power_windows(readings: List[Dict[str, Any]], t0: int, t1: int, window_s: float = 1.0) -> List[float]:
    """Power over every 1 s window (sliding reading by reading) from the energy counter."""
    pts = [(r["t_ns"], r["energy_j"]) for r in readings
           if not r.get("error") and r.get("energy_j") is not None and t0 <= r["t_ns"] <= t1]
    out, j = [], 0
    w = int(window_s * 1e9)
    for i in range(len(pts)):
        while j < len(pts) and pts[j][0] - pts[i][0] < w:
            j += 1
        if j >= len(pts):
            break
        out.append((pts[j][1] - pts[i][1]) / ((pts[j][0] - pts[i][0]) / 1e9))
    return out


def _sum_sources(samples: Dict[str, Any], names: List[str], t0: int, t1: int) -> Dict[str, Any]:
    parts = [energy_between(samples["sources"][n]["readings"], t0, t1) for n in names if n in samples["sources"]]
    if not parts or any(p["power_w"] is None for p in parts):
        bad = [p["method"] for p in parts if p["power_w"] is None]
        return {"power_w": None, "energy_j": None, "method": "; ".join(bad) or "no power source",
                "failed": sum(p["failed"] for p in parts)}
    energy = None if any(p["energy_j"] is None for p in parts) else sum(p["energy_j"] for p in parts)
    return {"power_w": sum(p["power_w"] for p in parts), "energy_j": energy,
            "method": ", ".join(sorted({p["method"] for p in parts})), "failed": sum(p["failed"] for p in parts),
            "readings": sum(p["readings"] for p in parts)}


def run_latency(raw: Dict[str, Any]) -> Dict[str, Any]:
    """One Server run's latency figures (a sweep point's, and each repeated run's): P99 per query (LoadGen's figure
    where it gave one, else the per-query log's) and per output token, the queries and errors."""
    q = raw["queries"]
    ok = [x for x in q if x[4] is None]
    lat = [(x[1] - x[0]) / 1e9 for x in ok]
    tok_lat = [(x[1] - x[0]) / 1e9 / x[2] for x in ok if x[2]]
    lg = raw.get("loadgen") or {}
    return {"p99_latency_s": lg.get("p99_latency_s") if lg.get("p99_latency_s") is not None else percentile(lat, 0.99),
            "p99_token_latency_s": percentile(tok_lat, 0.99), "queries": len(q), "errors": len(q) - len(ok),
            "error_rate": round((len(q) - len(ok)) / len(q), 6) if q else 1.0}


def summarise_point(raw: Dict[str, Any], peak_flops_s: Optional[float], config: Dict[str, Any],
                    primary: List[str]) -> Dict[str, Any]:
    """One sweep point from one Server run: the shape the report analytics read, plus details."""
    q = raw["queries"]
    ok = [x for x in q if x[4] is None]
    t0 = min((x[0] for x in q), default=raw["t0_ns"])
    t1 = max((x[1] for x in q), default=raw["t1_ns"])
    span = max(1e-9, (t1 - t0) / 1e9)
    lat = [(x[1] - x[0]) / 1e9 for x in ok]
    tok_lat = [(x[1] - x[0]) / 1e9 / x[2] for x in ok if x[2]]
    lg = raw.get("loadgen") or {}
    samples = raw.get("samples")
    period_ns = int((samples or {}).get("period_s", config["period_ms"] / 1e3) * 1e9)
    rho = rho_series(raw["work"], t0, t1, period_ns, config["window_ms"], peak_flops_s) if peak_flops_s \
        else []
    power: Dict[str, Any] = _sum_sources(samples, primary, t0, t1) if samples and primary else {
        "power_w": None, "energy_j": None, "method": "no power source"}
    steps = sorted((w[1] - w[0]) / 1e6 for w in raw["work"] if t0 <= w[0] <= t1)
    figures = run_latency(raw)
    point = {
        "target_qps": float(raw.get("target_qps") or 0.0),
        "rho": round(sum(rho) / len(rho), 6) if rho else None,
        "power_w": round(power["power_w"], 4) if power["power_w"] is not None else None,
        "p50_latency_s": lg.get("p50_latency_s") if lg.get("p50_latency_s") is not None else percentile(lat, 0.5),
        "p99_latency_s": figures["p99_latency_s"],
        "throughput_qps": round(len(ok) / span, 4),
        "tokens_per_s": round(sum(x[2] for x in ok) / span, 4),
        "error_rate": figures["error_rate"],
        "energy_j": round(power["energy_j"], 6) if power.get("energy_j") is not None else None,
        # details beyond the analytics' shape
        "rho_p99": round(cast(float, percentile(rho, 0.99)), 6) if rho else None,
        "rho_max": round(max(rho), 6) if rho else None,
        "p99_token_latency_s": figures["p99_token_latency_s"],
        "queries": figures["queries"], "errors": figures["errors"], "duration_s": round(span, 4),
        "output_tokens": sum(x[2] for x in ok),
        "step_ms_p50": round(cast(float, percentile(steps, 0.5)), 4) if steps else None,
        # what the checks need for their intervals: the largest latencies (P99's order statistics), ρ's, and the
        # point's power over ten blocks of its time (batch means)
        "latency_tail": quantile_tail(lat, 0.99), "token_latency_tail": quantile_tail(tok_lat, 0.99),
        "rho_tail": quantile_tail(rho, 0.99) if rho else None,
        "power_method": power.get("method"), "power_failed_reads": power.get("failed", 0),
        "power_valid_reads": power.get("readings", 0),
        "latency_source": "LoadGen (scheduled to completed)" if lg.get("p99_latency_s") is not None
        else "per-query log (issued to completed)",
        "loadgen": {k: lg.get(k) for k in ("valid", "throughput_qps", "early_stopping_met",
                                           "early_stopping_result", "summary_file", "errors")} if lg else None,
    }
    if raw.get("streaming"):  # a served deployment's run: TTFT, TPOT and ITL of its streamed answers
        point["streaming"] = raw["streaming"]
    if raw.get("device_power"):  # ... and each of its accelerators' power
        point["device_power"] = raw["device_power"]
    if samples and primary:
        pw = []
        for n in primary:
            if n in samples["sources"]:
                pw.append(power_windows(samples["sources"][n]["readings"], t0, t1))
        if pw and all(pw):
            m = min(map(len, pw))
            point["power_1s_windows_w"] = [round(sum(p[i] for p in pw), 4) for i in range(m)][:: max(1, m // 200)]
            point["power_p99_1s_w"] = round(cast(float, percentile([sum(p[i] for p in pw) for i in range(m)], 0.99)), 4)
        point["power_by_source"] = {n: _round(energy_between(s["readings"], t0, t1))
                                    for n, s in samples["sources"].items()}
        blocks = [power_blocks(samples["sources"][n]["readings"], t0, t1) for n in primary if n in samples["sources"]]
        if blocks and all(blocks):
            m = min(map(len, blocks))
            point["power_blocks_w"] = [round(sum(b[i] for b in blocks), 4) for i in range(m)]
    return point


POWER_BLOCKS = 10


def power_blocks(readings: List[Dict[str, Any]], t0: int, t1: int, blocks: int = POWER_BLOCKS) -> List[float]:
    """The power of each of ``blocks`` equal blocks of [t0, t1] (energy over time within the block; the mean of
    instantaneous readings without a counter): the batch means of PLP-POWER's interval."""
    out = []
    step = (t1 - t0) / blocks
    for k in range(blocks):
        a, b = int(t0 + k * step), int(t0 + (k + 1) * step)
        e = energy_between(readings, a, b)
        if e["power_w"] is None:
            return []
        out.append(e["power_w"])
    return out


def _round(d: Dict[str, Any]) -> Dict[str, Any]:
    return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in d.items()}


def efficiency(points: List[Dict[str, Any]], power_reason: Optional[str]) -> Dict[str, Any]:
    """Tokens per joule (all output tokens of the sweep over the counters' energy) and tokens per watt at P99
    (the sweep's token rate over the P99 of its 1 s sliding power windows)."""
    tokens = sum(p.get("output_tokens", 0) for p in points)
    seconds = sum(p.get("duration_s", 0) for p in points)
    energies: List[Any] = [p.get("energy_j") for p in points]
    out: Dict[str, Any] = {
        "tokens_per_joule": None, "tokens_per_watt_p99": None,
        "definition": "tokens_per_joule = output tokens / energy from counters, over every sweep point; "
                      "tokens_per_watt_p99 = (output tokens / seconds) / P99 of the 1 s sliding power windows"}
    if points and all(e is not None for e in energies) and sum(energies) > 0:
        out["tokens_per_joule"] = round(tokens / sum(energies), 6)
    windows = [w for p in points for w in p.get("power_1s_windows_w", [])]
    p99 = percentile(windows, 0.99)
    if p99 and seconds:
        out["tokens_per_watt_p99"] = round(tokens / seconds / p99, 6)
        out["power_p99_1s_w"] = p99
    if out["tokens_per_joule"] is None or out["tokens_per_watt_p99"] is None:
        out["reason"] = power_reason or "no energy counter covered every sweep point"
    return out


def timeline(samples: Dict[str, Any], queries: List[List[Any]], rho: List[float], primary: List[str],
             limit: int = MAX_TIMELINE) -> List[Dict[str, Any]]:
    """A downsampled view of the joined records (the whole set is written to the log directory)."""
    recs = join(samples, queries, rho)
    step = max(1, len(recs) // limit)
    out = []
    for r in recs[::step]:
        p = [r["power"].get(n, {}).get("power_w") for n in primary]
        out.append({"t_s": round((r["t_ns"] - recs[0]["t_ns"]) / 1e9, 4), "rho": r["rho"],
                    "power_w": sum(p) if p and all(v is not None for v in p) else None,
                    "latencies": len(r["latencies_s"]),
                    "p_max_latency_s": max(r["latencies_s"]) if r["latencies_s"] else None})
    return out


def _lg_brief(run: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    lg = run.get("loadgen")
    if not lg:
        return None
    return {k: lg.get(k) for k in ("valid", "throughput_qps", "p50_latency_s", "p99_latency_s", "early_stopping_met",
                                   "early_stopping_p99_s", "early_stopping_result", "summary_file", "detail_file",
                                   "version", "errors", "warnings")}


def _write_records(path: Path, raws: List[Dict[str, Any]], peak: Optional[float], c: Dict[str, Any],
                   primary: List[str]) -> List[Dict[str, Any]]:
    tl: List[Dict[str, Any]] = []
    with open(path, "w", encoding="utf-8") as fh:
        for raw in raws:
            s = raw["samples"]
            if not s or not s["ticks"]:
                continue
            rho = rho_at(raw["work"], s["ticks"], int(c["window_ms"] * 1e6), peak) if peak else []
            for rec in join(s, raw["queries"], rho):
                rec["target_qps"] = raw.get("target_qps")
                fh.write(json.dumps(rec) + "\n")
            tl.extend(dict(x, target_qps=raw.get("target_qps"))
                      for x in timeline(s, raw["queries"], rho, primary, MAX_TIMELINE // max(1, len(raws))))
    return tl
