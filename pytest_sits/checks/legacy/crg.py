"""Earlier versions of the compute-ready graph checks (:mod:`pytest_sits.checks.crg`), kept for replay."""

from __future__ import annotations

from typing import Any, Dict

from ...verdict import FAIL, INCONCLUSIVE, PASS, WARN, Verdict
from .. import check


# Frozen copies of the helpers these versions used: an edit of the current checks never changes an old verdict.

def _simulated(evidence: Dict[str, Any]) -> str:
    return " [simulated figures]" if evidence.get("simulated") else ""


#: The timer step must fit this many times into the ± interval (2 × max_ns) for the bound to be decidable.
STEPS_PER_INTERVAL = 4


@check("CRG-NODE", version=1, legacy=True)
def check_node_v1(evidence: Dict[str, Any], thresholds: Dict[str, Any], subject: str = "") -> Verdict:
    """Version 1, kept so that older reports replay: the median GEMM TFLOPS per dtype (no interval) against the
    profile's floor ``min_tflops`` and B's ceiling ``max_tflops``.

    evidence: ``results`` [{dtype, tflops, size, iterations, verified}], ``method``."""
    req = "CRG-NODE"
    results = evidence.get("results") or []
    lo, hi = thresholds.get("min_tflops"), thresholds.get("max_tflops")
    parts = []
    if lo is not None:
        parts.append(f">= {lo:g} TFLOPS")
    if hi is not None:
        parts.append(f"<= {hi:g} TFLOPS (B §2.5 ceiling)")
    threshold = " and ".join(parts) or "no bound in the profile"
    common: Dict[str, Any] = dict(threshold=threshold, unit="TFLOPS", subject=subject, evidence=evidence,
                  method=(evidence.get("method") or "torch matmul") + _simulated(evidence))
    good = [r for r in results if r.get("tflops") is not None and r.get("verified")]
    if not good:
        why = "; ".join(f"{r.get('dtype')}: {r.get('error') or 'result not verified'}" for r in results) or "no result"
        return Verdict(req, INCONCLUSIVE, f"no verified GEMM measurement ({why})", measured=None, **common)
    shown = ", ".join(f"{r['dtype']} {r['tflops']:.1f}" for r in good)
    low = min(r["tflops"] for r in good)
    high = max(r["tflops"] for r in good)
    measured = round(low, 2)
    if hi is not None and high > hi:
        return Verdict(req, FAIL, f"{high:.1f} TFLOPS exceeds the node ceiling of {hi:g} TFLOPS ({shown})",
                       measured=round(high, 2), **common,
                       remediation="B §2.5 bounds a graph node at this figure, which every current data-centre GPU "
                                   "exceeds: state the bound that fits this device in the profile (CRG-NODE "
                                   "max_tflops: null and a min_tflops floor, with the reason), or partition the "
                                   "graph so that one node is a share of a device")
    if lo is not None and low < lo:
        return Verdict(req, FAIL, f"{low:.1f} TFLOPS is below the profile's floor of {lo:g} TFLOPS ({shown})",
                       measured=measured, **common,
                       remediation="check DEP-THROTTLE (clock events under load) and DEP-POWERCAP, that no other "
                                   "process shares the device (`nvidia-smi`), and the application clocks")
    if lo is None and hi is None:
        return Verdict(req, WARN, f"measured {shown} TFLOPS; the profile sets no bound", measured=measured, **common)
    return Verdict(req, PASS, f"dense GEMM {shown} TFLOPS", measured=measured, **common)


@check("CRG-EDGE", version=1, legacy=True)
def check_edge_v1(evidence: Dict[str, Any], thresholds: Dict[str, Any], subject: str = "") -> Verdict:
    """Version 1, kept so that older reports replay: device-to-device copy bandwidth of one pair (median of the
    runs, no interval, data verified) >= ``min_gbps``.

    evidence: ``pair`` [src, dst], ``gbps_median``, ``samples_gbps``, ``verified``, ``peer_access`` (bool),
    ``nvlink_bytes`` (NVLink counters' delta, when present)."""
    req = "CRG-EDGE"
    floor = thresholds.get("min_gbps")
    g = evidence.get("gbps_median")
    threshold = f">= {floor:g} GB/s" if floor is not None else "no floor in the profile"
    path = "peer access" if evidence.get("peer_access") else "no peer access (staged through the host)"
    nv = evidence.get("nvlink_bytes")
    if nv is not None:
        path += f", {nv} bytes counted on NVLink"
    common: Dict[str, Any] = dict(threshold=threshold, unit="GB/s", subject=subject, evidence=evidence,
                  method=(evidence.get("method") or "torch copy between devices, median") + _simulated(evidence))
    if g is None or not evidence.get("verified"):
        return Verdict(req, INCONCLUSIVE, f"no verified copy measurement ({evidence.get('reason') or 'data differed'})",
                       measured=g, **common)
    text = f"{g:.1f} GB/s ({path})"
    if floor is None:
        return Verdict(req, WARN, f"{text}; the profile sets no floor", measured=round(g, 2), **common)
    if g < floor:
        return Verdict(req, FAIL, f"{text} is below {floor:g} GB/s", measured=round(g, 2), **common,
                       remediation="check `nvidia-smi topo -m` and `nvidia-smi nvlink --status` (inactive links, "
                                   "a pair routed over PCIe), that peer access is enabled (IOMMU/ACS settings can "
                                   "block P2P: `lspci -vvv` ACSCtl), and LINK-NVLINK-MESH")
    return Verdict(req, PASS, text, measured=round(g, 2), **common)


@check("CRG-SYNC", version=1, legacy=True)
def check_sync_v1(evidence: Dict[str, Any], thresholds: Dict[str, Any], subject: str = "") -> Verdict:
    """Version 1, kept so that older reports replay: all-reduce bus bandwidth (nccl-tests' definition: algorithm
    bandwidth × 2(n-1)/n), median of the runs (no interval), result verified, >= ``min_tbps``.

    evidence: ``backend`` (nccl/gloo), ``world_size``, ``bytes``, ``busbw_gbps``, ``algbw_gbps``, ``verified``."""
    req = "CRG-SYNC"
    floor = thresholds.get("min_tbps")
    bus = evidence.get("busbw_gbps")
    threshold = f">= {floor:g} TB/s" if floor is not None else "no floor in the profile"
    how = f"{evidence.get('backend')} all-reduce of {evidence.get('bytes')} bytes across {evidence.get('world_size')} " \
          f"{evidence.get('participants', 'processes')}"
    common: Dict[str, Any] = dict(threshold=threshold, unit="GB/s", subject=subject, evidence=evidence,
                  method=how + ", bus bandwidth = algorithm bandwidth × 2(n-1)/n (nccl-tests)" + _simulated(evidence))
    if bus is None or not evidence.get("verified"):
        return Verdict(req, INCONCLUSIVE, f"no verified all-reduce measurement ({evidence.get('reason') or 'result differed'})",
                       measured=bus, **common)
    text = f"bus bandwidth {bus:.2f} GB/s ({how})"
    if floor is None:
        return Verdict(req, WARN, f"{text}; the profile sets no floor", measured=round(bus, 3), **common)
    if bus < floor * 1000:
        return Verdict(req, FAIL, f"{text} is below {floor:g} TB/s", measured=round(bus, 3), **common,
                       remediation="check CRG-EDGE and LINK-NVLINK-MESH for a slow pair, NCCL's chosen transport "
                                   "(NCCL_DEBUG=INFO: NVLS/P2P vs SHM/NET), and that fabric manager is running on "
                                   "NVSwitch systems")
    return Verdict(req, PASS, text, measured=round(bus, 3), **common)


@check("CRG-JITTER", version=1, legacy=True)
def check_jitter_v1(evidence: Dict[str, Any], thresholds: Dict[str, Any], subject: str = "") -> Verdict:
    """Version 1 (reports of pytest-sits 0.1), kept so that they replay: INCONCLUSIVE where the timer cannot
    resolve the bound.  Node latency jitter within ± ``max_ns``.  Decidable only when the timer's step (the
    larger of its reported resolution and its
    measured granularity, the smallest non-zero difference of two back-to-back readings) fits
    STEPS_PER_INTERVAL times into the ± interval; otherwise INCONCLUSIVE with the timer's figures, never a pass.

    evidence: ``timer`` {clock, implementation, resolution_ns, granularity_ns, read_cost_ns},
    ``latency_ns`` {n, p1, p50, p99, max}, ``workload``."""
    req = "CRG-JITTER"
    bound = float(thresholds.get("max_ns", 2.5))
    timer = evidence.get("timer") or {}
    lat = evidence.get("latency_ns") or {}
    res, gran = timer.get("resolution_ns"), timer.get("granularity_ns")
    steps = [x for x in (res, gran) if x is not None]
    threshold = f"within ±{bound:g} ns"
    common: Dict[str, Any] = dict(threshold=threshold, unit="ns", subject=subject, evidence=evidence,
                  method=f"{timer.get('clock', 'timer')} around {evidence.get('workload') or 'a fixed operation'}")
    if not steps:
        return Verdict(req, INCONCLUSIVE, "the timer's resolution could not be measured", measured=None, **common)
    step = max(steps)
    timer_text = (f"{timer.get('clock')} ({timer.get('implementation')}): reported resolution {res:g} ns, measured "
                  f"granularity {gran:g} ns, one reading costs {timer.get('read_cost_ns', float('nan')):g} ns")
    jitter = None
    if lat.get("n"):
        jitter = max(lat["p99"] - lat["p50"], lat["p50"] - lat["p1"])
    if 2 * bound < STEPS_PER_INTERVAL * step:
        seen = f"; measured jitter ±{jitter:g} ns over {lat['n']} runs" if jitter is not None else ""
        return Verdict(req, INCONCLUSIVE, f"not measurable here: ±{bound:g} ns needs a timer step of at most "
                       f"{2 * bound / STEPS_PER_INTERVAL:g} ns; {timer_text}{seen}", measured=jitter, **common)
    if jitter is None:
        return Verdict(req, INCONCLUSIVE, f"no latency sample; {timer_text}", measured=None, **common)
    text = (f"jitter ±{jitter:g} ns (p1 {lat['p1']:g}, median {lat['p50']:g}, p99 {lat['p99']:g} ns over "
            f"{lat['n']} runs); {timer_text}")
    if jitter > bound:
        return Verdict(req, FAIL, f"{text} exceeds ±{bound:g} ns", measured=jitter, **common,
                       remediation="isolate the measurement CPU (isolcpus/nohz_full), pin it (TOPO-NUMA-BIND), fix "
                                   "the clocks (persistence mode, locked application clocks), and stop competing "
                                   "work on the device")
    return Verdict(req, PASS, text, measured=jitter, **common)
