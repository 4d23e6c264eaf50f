"""The compute-ready graph of document B §2.5: CRG-NODE (GEMM TFLOPS per device), CRG-EDGE (device-to-device
copy bandwidth per pair), CRG-SYNC (all-reduce bus bandwidth), CRG-JITTER (node latency jitter, or why a
software timer cannot resolve the bound).

B's figures are claims (128 TFLOPS per node "at most", 2 TB/s edges, 2 TB/s synchronisation, ±2.5 ns
jitter): the checks apply whatever the profile states, and every verdict says which figure it applied.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from ..verdict import FAIL, INCONCLUSIVE, PASS, SKIP, WARN, Verdict, number
from . import Finding, check
from .interval import (AT_LEAST, AT_MOST, FAIL_, PASS_, combine, decide, describe, level, mean_interval,
                       undecided_text)


def _simulated(evidence: Dict[str, Any]) -> str:
    return " [simulated figures]" if evidence.get("simulated") else ""


#: The timer step must fit this many times into the ± interval (2 × max_ns) for the bound to be decidable.
STEPS_PER_INTERVAL = 4


@check("CRG-JITTER", version=2)
def check_jitter(evidence: Dict[str, Any], thresholds: Dict[str, Any], f: Finding) -> Verdict:
    """Node latency jitter (max of p99 - median and median - p1 of a fixed operation's latency) within
    ± ``max_ns``, decided where a timestamp source resolves the bound: its step (the larger of its reported
    resolution and its measured granularity, the smallest non-zero difference of two back-to-back readings) fits
    STEPS_PER_INTERVAL times into the ± interval (a PTP hardware clock read fast enough; no software timer does).

    Where no source resolves it, the requirement is report-only (SITS2026: B's ±2.5 ns is below any software
    timer's step, and no machine could conform otherwise): SKIP, not a pass, with the timer's figures and the
    jitter it could see, and the hardware clocks found and why they did not resolve it.

    evidence: ``timer`` {clock, implementation, resolution_ns, granularity_ns, read_cost_ns} (the source used),
    ``hardware_clocks`` [{device, name, granularity_ns, ...}] (PTP clocks found), ``latency_ns`` {n, p1, p50,
    p99, max}, ``workload``."""
    bound = float(thresholds["max_ns"])
    timer = evidence.get("timer") or {}
    lat = evidence.get("latency_ns") or {}
    res, gran = timer.get("resolution_ns"), timer.get("granularity_ns")
    steps = [x for x in (res, gran) if x is not None]
    threshold = f"within ±{bound:g} ns"
    f.set(threshold=threshold, unit="ns", evidence=evidence,
          method=f"{timer.get('clock', 'timer')} around {evidence.get('workload') or 'a fixed operation'}")
    if not steps:
        return f(INCONCLUSIVE, "the timer's resolution could not be measured")
    step = max(steps)
    timer_text = (f"{timer.get('clock')} ({timer.get('implementation')}): reported resolution {res:g} ns, measured "
                  f"granularity {gran:g} ns, one reading costs {timer.get('read_cost_ns', float('nan')):g} ns")
    jitter = None
    if lat.get("n"):
        jitter = max(lat["p99"] - lat["p50"], lat["p50"] - lat["p1"])
    if 2 * bound < STEPS_PER_INTERVAL * step:
        seen = f"; the jitter this timer sees: ±{jitter:g} ns over {lat['n']} runs" if jitter is not None else ""
        clocks = evidence.get("hardware_clocks") or []
        found = ("; PTP hardware clocks found, too coarse to read here: " + ", ".join(
            f"{c.get('device')} ({c.get('name')}, granularity {c.get('granularity_ns')} ns)" for c in clocks)
                 if clocks else "; no PTP hardware clock (/dev/ptp*) on this machine")
        return f(SKIP, f"report only: no timestamp source here resolves ±{bound:g} ns (a step of at most "
                 f"{2 * bound / STEPS_PER_INTERVAL:g} ns is needed); {timer_text}{seen}{found}", measured=jitter)
    if jitter is None:
        return f(INCONCLUSIVE, f"no latency sample; {timer_text}")
    text = (f"jitter ±{jitter:g} ns (p1 {lat['p1']:g}, median {lat['p50']:g}, p99 {lat['p99']:g} ns over "
            f"{lat['n']} runs); {timer_text}")
    f.set(measured=jitter)
    if jitter > bound:
        return f(FAIL, f"{text} exceeds ±{bound:g} ns",
                 remediation="isolate the measurement CPU (isolcpus/nohz_full), pin it (TOPO-NUMA-BIND), fix the "
                             "clocks (persistence mode, locked application clocks), and stop competing work on the "
                             "device")
    return f(PASS, text)


def busbw(algbw_gbps: float, world_size: int) -> float:
    """nccl-tests' all-reduce bus bandwidth: algorithm bandwidth × 2(n-1)/n."""
    return algbw_gbps * 2 * (world_size - 1) / world_size if world_size > 0 else 0.0


def percentiles(values: List[float]) -> Dict[str, Any]:
    """{n, p1, p50, p99, max, min} of ``values`` (nearest-rank)."""
    xs = sorted(values)
    n = len(xs)
    if not n:
        return {"n": 0}
    pick = lambda q: xs[min(n - 1, max(0, int(round(q * (n - 1)))))]  # noqa: E731
    return {"n": n, "min": xs[0], "p1": pick(0.01), "p50": pick(0.5), "p99": pick(0.99), "max": xs[-1]}


# --------------------------------------------------------------------------
# Decisions under noise (CRG-NODE, CRG-EDGE, CRG-SYNC version 2)


def _looks(ev: Dict[str, Any]) -> int:
    return int((ev.get("sequential") or {}).get("looks") or 1)


def _per_trial(ev: Dict[str, Any]) -> Optional[float]:
    seq = ev.get("sequential") or {}
    return float(seq["seconds"]) / seq["trials"] if seq.get("trials") and seq.get("seconds") else None


def _g(x: float) -> str:
    return number(x)


def node_decisions(evidence: Dict[str, Any], thresholds: Dict[str, Any]) -> List[Dict[str, Any]]:
    """Per verified dtype: the mean TFLOPS of its timed loops with a t-interval, decided against the floor
    ``min_tflops`` and the ceiling ``max_tflops`` (each where the profile sets it; neither: reported)."""
    lo, hi = thresholds["min_tflops"], thresholds["max_tflops"]
    out = []
    for r in evidence.get("results") or []:
        if r.get("tflops") is None or not r.get("verified"):
            continue
        samples = [float(x) for x in r.get("samples_tflops") or [r["tflops"]]]
        stat = mean_interval(samples, level(_looks(evidence)))
        bounds = [(lo, AT_LEAST)] if lo is not None else []
        bounds += [(hi, AT_MOST)] if hi is not None else []
        for thr, direction in bounds or [(None, AT_LEAST)]:
            d = decide(stat, thr, direction, samples=samples, show=_g, seconds_per_trial=_per_trial(evidence),
                       what=f"{r['dtype']} TFLOPS")
            d["dtype"] = r["dtype"]
            out.append(d)
    return out


@check("CRG-NODE", version=2)
def check_node(evidence: Dict[str, Any], thresholds: Dict[str, Any], f: Finding) -> Verdict:
    """Dense GEMM TFLOPS per dtype (fp16, bf16), the mean of its timed loops with a t-interval, against the
    profile's floor ``min_tflops`` and, where it keeps one, B's ceiling ``max_tflops`` (B: a graph node is at most
    128 TFLOPS-equivalent): PASS when every interval clears every bound, FAIL when one lies wholly beyond one,
    else INCONCLUSIVE.

    evidence: ``results`` [{dtype, tflops, samples_tflops, size, iterations, verified}], ``method``,
    ``sequential``."""
    results = evidence.get("results") or []
    lo, hi = thresholds["min_tflops"], thresholds["max_tflops"]
    parts = []
    if lo is not None:
        parts.append(f">= {lo:g} TFLOPS")
    if hi is not None:
        parts.append(f"<= {hi:g} TFLOPS (B §2.5 ceiling)")
    threshold = " and ".join(parts) or "no bound in the profile"
    good = [r for r in results if r.get("tflops") is not None and r.get("verified")]
    ds = node_decisions(evidence, thresholds)
    ev = dict(evidence, decisions=ds)
    method = (evidence.get("method") or "torch matmul") + _simulated(evidence)
    f.set(threshold=threshold, unit="TFLOPS", evidence=ev, method=method)
    if not good:
        why = "; ".join(f"{r.get('dtype')}: {r.get('error') or 'result not verified'}" for r in results) or "no result"
        return f(INCONCLUSIVE, f"no verified GEMM measurement ({why})")
    d = combine(ds)
    ev["decision"] = d
    f.set(method=f"{method}; decided per dtype and bound: {d['rule']}")
    first: Dict[str, Dict[str, Any]] = {}
    for x in ds:  # one interval per dtype (the floor's and the ceiling's decisions share it)
        first.setdefault(x["dtype"], x)
    shown = ", ".join(f"{k} {describe(x, _g)}" for k, x in first.items())
    if any(x["trials"] < 2 for x in ds):
        return f(INCONCLUSIVE, f"one timed loop per dtype ({shown}): an interval needs two or more",
                 measured=round(min(r["tflops"] for r in good), 2))
    if d["outcome"] == FAIL_ and d["direction"] == AT_MOST:
        return f(FAIL, f"{d['dtype']} {describe(d, _g)} TFLOPS exceeds the node ceiling of {hi:g} TFLOPS ({shown})",
                 measured=round(d["estimate"], 2),
                 remediation="B §2.5 bounds a graph node at this figure, which every current data-centre GPU exceeds: "
                             f"state the bound that fits this device in the profile ({f.requirement} max_tflops: null "
                             "and a min_tflops floor, with the reason), or partition the graph so that one node is a "
                             "share of a device")
    if d["outcome"] == FAIL_:
        return f(FAIL, f"{d['dtype']} {describe(d, _g)} TFLOPS is below the profile's floor of {lo:g} TFLOPS ({shown})",
                 measured=round(d["estimate"], 2),
                 remediation="check DEP-THROTTLE (clock events under load) and DEP-POWERCAP, that no other process "
                             "shares the device (`nvidia-smi`), and the application clocks")
    f.set(measured=round(min(x["estimate"] for x in ds), 2))
    if lo is None and hi is None:
        return f(WARN, f"measured {shown} TFLOPS; the profile sets no bound")
    if d["outcome"] == PASS_:
        return f(PASS, f"dense GEMM {shown} TFLOPS")
    return f(INCONCLUSIVE, f"dense GEMM {shown} TFLOPS; {d['dtype']}: {undecided_text(d, _g)}")


def _edge_directions(evidence: Dict[str, Any]) -> List[tuple]:
    if isinstance(evidence.get("forward"), dict) and isinstance(evidence.get("reverse"), dict):
        return [("forward", evidence["forward"].get("samples_gbps") or []),
                ("reverse", evidence["reverse"].get("samples_gbps") or [])]
    return [("both ways", evidence.get("samples_gbps") or [])]


def edge_decisions(evidence: Dict[str, Any], thresholds: Dict[str, Any]) -> List[Dict[str, Any]]:
    """Per direction of the pair: the mean GB/s of its copies with a t-interval, against ``min_gbps``."""
    out = []
    for name, samples in _edge_directions(evidence):
        samples = [float(x) for x in samples]
        d = decide(mean_interval(samples, level(_looks(evidence))), thresholds["min_gbps"], AT_LEAST,
                   samples=samples, show=_g, seconds_per_trial=_per_trial(evidence), what=f"{name} GB/s")
        d["way"] = name
        out.append(d)
    return out


@check("CRG-EDGE", version=2)
def check_edge(evidence: Dict[str, Any], thresholds: Dict[str, Any], f: Finding) -> Verdict:
    """Device-to-device copy bandwidth of one pair, each direction the mean of its copies with a t-interval (data
    verified), against ``min_gbps``: PASS when both intervals clear it, FAIL when one lies wholly below, else
    INCONCLUSIVE.

    evidence: ``pair`` [src, dst], ``forward``/``reverse`` (each with ``samples_gbps``; or ``samples_gbps`` of the
    pair), ``gbps_median``, ``verified``, ``peer_access`` (bool), ``nvlink_bytes``, ``sequential``."""
    floor = thresholds["min_gbps"]
    threshold = f">= {floor:g} GB/s" if floor is not None else "no floor in the profile"
    path = "peer access" if evidence.get("peer_access") else "no peer access (staged through the host)"
    nv = evidence.get("nvlink_bytes")
    if nv is not None:
        path += f", {nv} bytes counted on NVLink"
    method = (evidence.get("method") or "torch copy between devices") + _simulated(evidence)
    f.set(threshold=threshold, unit="GB/s", evidence=evidence, method=method)
    if evidence.get("gbps_median") is None or not evidence.get("verified"):
        return f(INCONCLUSIVE, f"no verified copy measurement ({evidence.get('reason') or 'data differed'})",
                 measured=evidence.get("gbps_median"))
    ds = edge_decisions(evidence, thresholds)
    d = combine(ds)
    f.set(evidence=dict(evidence, decisions=ds, decision=d), method=f"{method}; decided per direction: {d['rule']}",
          measured=round(min(x["estimate"] for x in ds), 2))
    ways = "; ".join(f"{x['way']} {describe(x, _g)}" for x in ds)
    text = f"{ways} GB/s ({path})"
    if any(x["trials"] < 2 for x in ds):
        return f(INCONCLUSIVE, f"{text}: an interval needs two or more copies each way")
    if floor is None:
        return f(WARN, f"{text}; the profile sets no floor")
    if d["outcome"] == FAIL_:
        return f(FAIL, f"{text}: {d['way']} is below {floor:g} GB/s",
                 remediation="check `nvidia-smi topo -m` and `nvidia-smi nvlink --status` (inactive links, a pair "
                             "routed over PCIe), that peer access is enabled (IOMMU/ACS settings can block P2P: `lspci "
                             "-vvv` ACSCtl), and LINK-NVLINK-MESH")
    if d["outcome"] == PASS_:
        return f(PASS, text)
    return f(INCONCLUSIVE, f"{text}; {d['way']}: {undecided_text(d, _g, 'copies')}")


def sync_samples(evidence: Dict[str, Any]) -> List[float]:
    """Bus bandwidth (GB/s) of each all-reduce: bytes over its time (the slowest rank's), × 2(n-1)/n."""
    n, nbytes = int(evidence.get("world_size") or 0), float(evidence.get("bytes") or 0)
    return [busbw(nbytes / float(t) / 1e9, n) for t in evidence.get("samples_s") or [] if t and float(t) > 0]


def sync_decision(evidence: Dict[str, Any], thresholds: Dict[str, Any]) -> Dict[str, Any]:
    samples = sync_samples(evidence)
    floor = thresholds["min_tbps"]
    return decide(mean_interval(samples, level(_looks(evidence))), floor * 1000 if floor is not None else None,
                  AT_LEAST, samples=samples, show=_g, seconds_per_trial=_per_trial(evidence), what="bus GB/s")


@check("CRG-SYNC", version=2)
def check_sync(evidence: Dict[str, Any], thresholds: Dict[str, Any], f: Finding) -> Verdict:
    """All-reduce bus bandwidth (nccl-tests' definition: algorithm bandwidth × 2(n-1)/n), the mean over the
    all-reduces (each timed by its slowest rank) with a t-interval, result verified, against ``min_tbps``: PASS
    when the interval clears it, FAIL when it lies wholly below, else INCONCLUSIVE.

    evidence: ``backend`` (nccl/gloo), ``world_size``, ``bytes``, ``samples_s``, ``busbw_gbps``, ``verified``,
    ``sequential``."""
    floor = thresholds["min_tbps"]
    bus = evidence.get("busbw_gbps")
    threshold = f">= {floor:g} TB/s" if floor is not None else "no floor in the profile"
    how = f"{evidence.get('backend')} all-reduce of {evidence.get('bytes')} bytes across {evidence.get('world_size')} " \
          f"{evidence.get('participants', 'processes')}"
    method = how + ", bus bandwidth = algorithm bandwidth × 2(n-1)/n (nccl-tests)" + _simulated(evidence)
    f.set(threshold=threshold, unit="GB/s", evidence=evidence, method=method)
    if bus is None or not evidence.get("verified"):
        return f(INCONCLUSIVE, f"no verified all-reduce measurement ({evidence.get('reason') or 'result differed'})",
                 measured=bus)
    d = sync_decision(evidence, thresholds)
    f.set(evidence=dict(evidence, decision=d), method=f"{method}; decided: {d['rule']}")
    if d["estimate"] is None or d["trials"] < 2:
        return f(INCONCLUSIVE, f"bus bandwidth {bus:.2f} GB/s from {d['trials']} timed all-reduce(s): an interval needs "
                 "two or more", measured=round(bus, 3))
    text = f"bus bandwidth {describe(d, _g)} GB/s ({how})"
    f.set(measured=round(d["estimate"], 3))
    if floor is None:
        return f(WARN, f"{text}; the profile sets no floor")
    if d["outcome"] == FAIL_:
        return f(FAIL, f"{text} is below {floor:g} TB/s",
                 remediation="check CRG-EDGE and LINK-NVLINK-MESH for a slow pair, NCCL's chosen transport "
                             "(NCCL_DEBUG=INFO: NVLS/P2P vs SHM/NET), and that fabric manager is running on NVSwitch "
                             "systems")
    if d["outcome"] == PASS_:
        return f(PASS, text)
    return f(INCONCLUSIVE, f"{text}; {undecided_text(d, _g, 'all-reduces')}")


@check("CRG-EDGE/nvbandwidth", requirement="CRG-EDGE", version=1, default_subject="accelerators")
def check_edge_nvbandwidth(evidence: Dict[str, Any], thresholds: Dict[str, Any], f: Finding) -> Verdict:
    """One device pair of a submitted ``nvbandwidth`` text: each direction's figure as nvbandwidth printed it
    (its mean over its own iterations; the text gives no spread, so the figure is taken as exact) against
    ``min_gbps``: PASS when both directions reach it, FAIL when one is below, INCONCLUSIVE when a direction is not
    in the text (cut, or N/A)."""
    floor = thresholds["min_gbps"]
    fwd, rev = evidence.get("forward_gbps"), evidence.get("reverse_gbps")
    a, b = evidence["pair"]
    where = f"{evidence['file']} line {evidence['line']} ({evidence['test']}, nvbandwidth {evidence.get('version') or '?'})"
    f.set(threshold=f">= {floor:g} GB/s" if floor is not None else "no floor in the profile", unit="GB/s",
          evidence=evidence, method=f"nvbandwidth's figure of each direction ({where}); one figure each, no interval"
                                    + (f"; devices matched by {evidence['match_rule']}" if evidence.get("match_rule")
                                       else "; devices named by their CUDA index (no text gives their PCI address)"))
    if fwd is None or rev is None:
        return f(INCONCLUSIVE, f"{a}->{b} {fwd} GB/s, {b}->{a} {rev} GB/s: a direction is not in the text ({where})",
                 measured=fwd if rev is None else rev)
    low = min(fwd, rev)
    f.set(measured=low)
    text = f"{a}->{b} {fwd:g} GB/s, {b}->{a} {rev:g} GB/s ({where})"
    if floor is None:
        return f(WARN, f"{text}; the profile sets no floor")
    if low < float(floor):
        return f(FAIL, f"{text}: {'forward' if fwd < rev else 'reverse'} is below {float(floor):g} GB/s",
                 remediation="check `nvidia-smi topo -m` and `nvidia-smi nvlink --status` (inactive links, a pair "
                             "routed over PCIe), that peer access is enabled (IOMMU/ACS), and LINK-NVLINK-MESH")
    return f(PASS, text)

