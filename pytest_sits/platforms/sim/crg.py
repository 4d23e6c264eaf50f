"""The compute-ready graph of a simulated machine (CRG-NODE, CRG-EDGE, CRG-SYNC, CRG-JITTER): figures derived
from the profile's datasheet facts, labelled simulated; fault ``crg-slow`` scales them down."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from ...conditions.crg import measure_edge, measure_node, measure_sync
from ...conditions.trials import TrialPlan
from .drift import Drift

#: The faults this module implements, with what each does (``faults.FAULTS`` gathers every module's).
FAULTS = {
    "crg-slow": "GEMM at 30% of the simulated figure, device-to-device copies and all-reduce at 2%",
}



class SimCrg:
    """Compute-ready graph figures of a simulated machine, from the profile's datasheet facts."""

    NODE_SHARE = {"float16": 0.70, "bfloat16": 0.68}

    def __init__(self, profile: Any, faults: List[str], drift: Optional[Drift] = None):
        self.profile, self.faults = profile, list(faults)
        self.slow = "crg-slow" in self.faults
        self.drift = drift or Drift(False)

    def _samples(self, value: float, k: int, ndigits: int = 3) -> List[float]:
        return [round(value * self.drift.factor(), ndigits) for _ in range(k)]

    def _moving(self) -> str:
        return " (fault drift: the machine moves between trials)" if self.drift.on else ""

    def node(self, acc: Dict[str, Any], th: Dict[str, Any], plan: Optional[TrialPlan] = None) -> Dict[str, Any]:
        peak = self.profile.hardware.get("fp16_dense_tflops")
        if not peak:
            return {"absent": f"{acc['bdf']}: simulated, and the profile gives no fp16_dense_tflops to "
                              "simulate the GEMM from"}
        k = 0.3 if self.slow else 1.0
        share = dict(self.NODE_SHARE)

        def gemm(dtype: str, n: int) -> Dict[str, Any]:
            samples = self._samples(float(peak) * share.get(dtype, 0.68) * k, n, 4)
            return {"dtype": dtype, "tflops": sorted(samples)[n // 2], "samples_tflops": samples,
                    "size": int(th["size"]), "iterations": int(th["iterations"]), "repeats": n,
                    "verified": True}
        ev = measure_node(acc, th, gemm, plan,
                          method=f"simulated: {', '.join(f'{s:.0%}' for s in share.values())} of the datasheet's "
                                 f"{peak} dense FP16 TFLOPS" + (" × 0.3 (fault crg-slow)" if self.slow else "")
                                 + self._moving())
        ev["simulated"] = True
        return ev

    def _edge_gbps(self, i: int = 0, j: int = 1) -> float:
        """The simulated copy rate between devices i and j: over the peer link where the profile says one joins
        them (every pair of a mesh, the two cards of a bridge), else over PCIe."""
        link = self.profile.hardware.get("peer_link") or {}
        if link.get("topology") == "pairs" and i // 2 != j // 2:
            link = {"type": "none"}  # no bridge between these two cards: host PCIe
        if link.get("type") == "nvlink":
            g = float(link.get("bandwidth_gbps", 0)) / 2 * 0.85  # each way, through NVSwitch or a bridge
        elif link.get("type") in ("xgmi", "hccs"):
            g = float(link.get("bandwidth_gbps", 0)) / max(1, int(link.get("links", 1))) / 2 * 0.85
        else:
            from ...probes.pcie import link_theoretical_gbps

            g = link_theoretical_gbps(int(self.profile.hardware.get("pcie_gen", 4)),
                                      int(self.profile.hardware.get("pcie_width", 16))) * 0.8
        return g * (0.02 if self.slow else 1.0)

    def submitted_edges(self, expected_count: int) -> None:
        """A simulated machine has no submitted nvbandwidth text: its edges are simulated (:meth:`edges`)."""
        return None

    def edges(self, accs: List[Dict[str, Any]], th: Dict[str, Any], absent: Optional[str] = None,
              plan: Optional[TrialPlan] = None) -> List[Tuple[Dict[str, Any], str]]:
        if absent:
            return [({"absent": absent}, "accelerators")]
        if len(accs) < 2:
            return [({"absent": f"a device-to-device edge needs 2 accelerators; found {len(accs)}"}, "accelerators")]
        out = []
        peer = (self.profile.hardware.get("peer_link") or {}).get("type") != "none"
        nbytes = int(th["bytes"])
        for i, a in enumerate(accs):
            for j, b in enumerate(accs[i + 1:], start=i + 1):
                g = round(self._edge_gbps(i, j), 2)

                def copy(src: str, dst: str, k: int, g: float = g) -> Dict[str, Any]:
                    s = self._samples(g, k)
                    return {"pair": [src, dst], "bytes": nbytes, "runs": k, "samples_gbps": s,
                            "gbps_median": sorted(s)[k // 2], "verified": True, "peer_access": peer,
                            "nvlink_bytes": None}
                ev = measure_edge(a["bdf"], b["bdf"], th, copy, plan,
                                  method="simulated from the profile's peer link"
                                         + (" × 0.02 (fault crg-slow)" if self.slow else "") + self._moving())
                ev.update(bytes=nbytes, simulated=True)
                out.append((ev, f"{a['bdf']}<->{b['bdf']}"))
        return out

    def sync(self, accs: List[Dict[str, Any]], expected_count: int, th: Dict[str, Any],
             absent: Optional[str] = None, plan: Optional[TrialPlan] = None) -> Dict[str, Any]:
        if absent:
            return {"absent": absent}
        if len(accs) < 2:
            return {"absent": f"an all-reduce between devices needs 2 accelerators; found {len(accs)}"}
        link = self.profile.hardware.get("peer_link") or {}
        bridged_only = link.get("topology") == "pairs" and len(accs) > 2  # the ring crosses PCIe between pairs
        if link.get("type") in ("nvlink", "xgmi", "hccs") and not bridged_only:
            bus = float(link.get("bandwidth_gbps", 0)) / 2 * 0.8  # the whole fabric, each way
        else:
            from ...probes.pcie import link_theoretical_gbps

            bus = link_theoretical_gbps(int(self.profile.hardware.get("pcie_gen", 4)),
                                        int(self.profile.hardware.get("pcie_width", 16))) * 0.7
        bus = round(bus * (0.02 if self.slow else 1.0), 3)
        n = len(accs)
        nbytes = int(th["bytes"])
        alg = bus * n / (2 * (n - 1))

        def run(k: int) -> Dict[str, Any]:
            times = [round(nbytes / (alg * f) / 1e9, 9) for f in (self.drift.factor() for _ in range(k))]
            return {"backend": "nccl (simulated)", "world_size": n, "bytes": nbytes, "participants": "GPUs",
                    "samples_s": times, "busbw_gbps": bus, "algbw_gbps": round(alg, 3), "verified": True}
        ev = measure_sync(th, run, plan)
        ev.update(simulated=True, devices=[a["bdf"] for a in accs])
        if self.drift.on:
            ev["method_note"] = "fault drift: the machine moves between trials"
        return ev

    def jitter(self, acc: Optional[Dict[str, Any]], th: Dict[str, Any]) -> Dict[str, Any]:
        return {"device": acc["bdf"] if acc else "host", "simulated": True,
                "timer": {"clock": "time.perf_counter_ns", "implementation": "simulated", "resolution_ns": 1.0,
                          "granularity_ns": 30.0, "read_cost_ns": 35.0},
                "hardware_clocks": [],
                "latency_ns": {"n": 2000, "min": 9000.0, "p1": 9100.0, "p50": 9400.0, "p99": 11800.0,
                               "max": 30000.0},
                "workload": "simulated 1024-element add with synchronize"}
