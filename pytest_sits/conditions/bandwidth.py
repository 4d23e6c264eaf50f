"""Acquire bandwidth evidence: the host's STREAM peak, the DRAM hold, device copies, host<->device copies.

One hold or peak measurement per NUMA node at a time, across xdist workers
(a lock named ``dram-node<N>``): two injectors on one node would each see the
other's traffic as theirs.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Any, Callable, Dict, Iterator, List, Optional

from .hold import BandwidthHold, find_counter
from .loads import LoadUnavailable
from .locks import exclusive


def host_node(inventory: Dict[str, Any], accelerators: List[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """The NUMA node measurements bind to: the first given accelerator's, else the host's first node."""
    nodes = inventory["numa"]
    acc = accelerators[0] if accelerators else None
    node = acc["numa_node"] if acc and acc["numa_node"] is not None and acc["numa_node"] >= 0 else None
    return next((n for n in nodes if n["node"] == node), nodes[0] if nodes else None)


def acquire_host_peak(platform: Any, node: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    """STREAM peak of the host, bound to the measurement node (evidence, or {"absent": reason})."""
    reason = platform.host_measurement_reason()
    if reason:
        return {"unavailable": f"{reason}: host DRAM bandwidth is measured on the live machine"}
    from .stream import stream_peak

    cpus = node["cpus"] if node else []
    n = node["node"] if node else None
    with exclusive(f"dram-node{n}", purpose="STREAM peak"):
        return stream_peak(threads=max(1, len(cpus)), cpus=cpus, node=n)


def peak_problem(peak: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """The evidence that stands in when the peak is absent or broke, else None."""
    if "absent" in peak or "unavailable" in peak:
        return {"unavailable": peak.get("unavailable") or peak["absent"]}
    if "error" in peak or not peak.get("validated"):
        return {"error": f"the STREAM peak probe failed: {peak.get('error') or 'results did not validate'}",
                "peak": peak}
    return None


def hold_factory(peak: Dict[str, Any], node: Dict[str, Any], th: Dict[str, Any]) -> Callable[[], Any]:
    """``with factory() as hold:`` holds host DRAM occupancy in the band while the block runs."""

    @contextmanager
    def make() -> Iterator[BandwidthHold]:
        found = find_counter()
        hold = BandwidthHold(peak["kernels"]["copy"]["gbps_median"], th["band_low"], th["band_high"],
                             cpus=node["cpus"], node=node["node"], window_s=th["window_ms"] / 1000,
                             counter=found["counter"], counter_reason=found["reason"])
        with exclusive(f"dram-node{node['node']}", purpose="DRAM bandwidth hold"):
            with hold:
                yield hold
    return make


#: Re-measurements of the peak during one hold at most (each pauses the injectors for a second or two).
MAX_REMEASURES = 3


def remeasure_peak(node: Optional[Dict[str, Any]]) -> float:
    """A short STREAM run on the node: the copy bandwidth the machine delivers now (GB/s, median)."""
    from .stream import stream_peak

    cpus = node["cpus"] if node else []
    res = stream_peak(threads=max(1, len(cpus)), cpus=cpus, node=node["node"] if node else None, ntimes=4)
    return float(res["kernels"]["copy"]["gbps_median"])


def acquire_hold(peak: Dict[str, Any], factory: Optional[Callable[[], Any]], duration_s: float,
                 node: Optional[Dict[str, Any]] = None, body: Optional[Callable[[], None]] = None,
                 say: Optional[Callable[[str], None]] = None,
                 remeasure: Optional[Callable[[], float]] = None) -> Dict[str, Any]:
    """Hold the band for ``duration_s`` around ``body`` (default: wait); return the hold's evidence.

    The reference is checked, not assumed: the peak is re-measured after the hold, and during it whenever
    the injectors run flat out below the band for several windows (they are paused meanwhile).  The
    evidence's ``reference`` holds every measurement, so the check can tell a machine whose bandwidth moved
    (INCONCLUSIVE) from one that held still and could not be held in band (FAIL).  ``say`` receives a
    progress line every 5 s."""
    problem = peak_problem(peak)
    if problem or factory is None:
        return problem or {"unavailable": "the host lists no NUMA node to hold"}
    remeasure = remeasure or (lambda: remeasure_peak(node))
    during: List[Dict[str, Any]] = []
    with factory() as hold:
        start = time.monotonic()
        end = start + duration_s
        if body is not None:
            body()
        next_say = start + 5.0
        while time.monotonic() < end:
            time.sleep(0.05)
            if hold.starved.is_set() and len(during) < MAX_REMEASURES:
                hold.pause()
                t_pause = time.monotonic()
                if say is not None:
                    say(f"[MEM-BW-HOLD] {t_pause - start:.0f} s: the injectors ran flat out below the band for "
                        f"{hold.saturated_windows} windows: load paused, re-measuring the peak (the hold is "
                        "extended by the pause)")
                try:
                    during.append({"t": round(t_pause - start, 3), "gbps": remeasure(),
                                   "why": f"injectors saturated below the band for {hold.saturated_windows} windows"})
                finally:
                    hold.resume()
                during[-1]["pause_s"] = round(time.monotonic() - t_pause, 3)
                end += during[-1]["pause_s"]  # the hold still gets its full duration of counted windows
                if say is not None:
                    say(f"[MEM-BW-HOLD] peak re-measured: {during[-1]['gbps']:.1f} GB/s (it was "
                        f"{hold.peak_gbps:.1f} GB/s before the hold); load resumed after a "
                        f"{during[-1]['pause_s']:.1f} s pause")
            if say is not None and time.monotonic() >= next_say:
                next_say += 5.0
                paused = sum(m.get("pause_s", 0.0) for m in during)
                held = time.monotonic() - start - paused
                say(f"[MEM-BW-HOLD] {held:.0f}/{duration_s:g} s held"
                    + (f" (+{paused:.0f} s paused for {len(during)} re-measurement(s))" if during else "")
                    + f": {hold.progress()}")
    if say is not None:
        say("[MEM-BW-HOLD] hold done: re-measuring the peak once more, to tell a machine that moved from one that "
            "did not hold")
    after = remeasure()
    ev = hold.evidence()
    ev["peak"] = {k: v for k, v in peak.items() if k != "bindings"}
    before = ev["peak_gbps"]
    measured = [m["gbps"] for m in during] + [after]
    ev["reference"] = {"before_gbps": before, "during": during, "after_gbps": after,
                       "moved": round(max(abs(g - before) / before for g in measured), 4),
                       "method": "STREAM copy median on the node, before, after, and whenever the injectors "
                                 "starved (paused meanwhile)"}
    return ev


def acquire_device_bw(platform: Any, acc: Dict[str, Any], nbytes: int = 1 << 30) -> Dict[str, Any]:
    try:
        return platform.device_bandwidth(acc, nbytes)
    except LoadUnavailable as exc:
        return {"unavailable": str(exc)}


def acquire_pcie_bw(platform: Any, acc: Dict[str, Any], nbytes: int, peak: Dict[str, Any],
                    factory: Optional[Callable[[], Any]]) -> Dict[str, Any]:
    """Pinned copies each way, under the DRAM hold when the host can be measured."""
    link = acc["link"]
    link_ev = {"gen": link.get("max_gen"), "width": link.get("max_width"), "source": "sysfs max_link_*"}
    try:
        if factory is not None and peak_problem(peak) is None:
            with factory() as hold:
                ev = platform.host_device_bandwidth(acc, nbytes)
            h = hold.evidence()
            ev["hold"] = f"{h['windows_in_band']}/{h['windows']} windows in band"
            ev["hold_evidence"] = h
        else:
            ev = platform.host_device_bandwidth(acc, nbytes)
            ev["hold"] = None
            ev["hold_reason"] = peak.get("unavailable") or peak.get("absent") or peak.get("error")
    except LoadUnavailable as exc:
        return {"unavailable": str(exc)}
    return {"bandwidth": ev, "link": link_ev}
