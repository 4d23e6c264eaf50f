"""Acquire bandwidth evidence: the host's STREAM peak, the DRAM hold, device copies, host<->device copies.

Each measurement repeats until its check's decision rule decides (:mod:`.trials`): device and host<->device
copies in looks of a few copies, the hold by extending itself while the share of windows in band is undecided.

The host's DRAM is reached through the platform (``platform.dram()``): :class:`LiveDram` on this machine (the
STREAM probe, the injector threads), the simulated plant on ``sim:``, none on a snapshot or submitted texts.

One hold or peak measurement per NUMA node at a time, across xdist workers
(a lock named ``dram-node<N>``): two injectors on one node would each see the
other's traffic as theirs.
"""

from __future__ import annotations

import statistics
import time
from contextlib import contextmanager
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple, Union

from .device_bw import all_gated
from .loads import LoadUnavailable
from .locks import exclusive
from .trials import TrialPlan, next_step, sequential

#: The STREAM kernel the peak (the occupancy's denominator) is taken from; see conditions/stream.py.
PEAK_KERNEL = "copy"


def host_node(inventory: Dict[str, Any], accelerators: List[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """The NUMA node measurements bind to: the first given accelerator's, else the host's first node."""
    nodes = inventory["numa"]
    acc = accelerators[0] if accelerators else None
    node = acc["numa_node"] if acc and acc["numa_node"] is not None and acc["numa_node"] >= 0 else None
    return next((n for n in nodes if n["node"] == node), nodes[0] if nodes else None)


def hold_cpus(cpus: List[int]) -> Tuple[List[int], List[int]]:
    """The node's CPUs the hold's injectors run on, and those left to the measurements: on a node of 8 CPUs or more,
    an eighth of them (2 at least, a quarter at most) carry no injector, so the measuring threads (one per device
    measured at once, the environment monitor) find a CPU the injectors do not take turns on; a smaller host keeps
    every CPU for the hold (its measurements share them, and the verdicts say when the hold lost its band)."""
    cpus = sorted(cpus)
    if len(cpus) < 8:
        return cpus, []
    keep = min(len(cpus) // 4, max(2, len(cpus) // 8))
    return cpus[:-keep], cpus[-keep:]


class LiveDram:
    """This machine's DRAM: the STREAM probe and the injector threads, bound to a node."""

    simulated = False

    def peak(self, node: Optional[Dict[str, Any]]) -> Dict[str, Any]:
        from .stream import stream_peak

        cpus = node["cpus"] if node else []
        n = node["node"] if node else None
        with exclusive(f"dram-node{n}", purpose="STREAM peak"):
            return stream_peak(threads=max(1, len(cpus)), cpus=cpus, node=n)

    def remeasure(self, node: Optional[Dict[str, Any]]) -> Dict[str, Any]:
        """A short STREAM run on the node (the hold is paused meanwhile): the peak kernel's median now, and the
        share of its wall time the busiest thread was on a CPU."""
        from .stream import stream_peak

        cpus = node["cpus"] if node else []
        res = stream_peak(threads=max(1, len(cpus)), cpus=cpus, node=node["node"] if node else None, ntimes=4)
        k = res["kernels"][PEAK_KERNEL]
        return {"gbps": float(k["gbps_median"]), "cpu_share": k.get("cpu_share_median")}

    def hold(self, peak_gbps: float, node: Dict[str, Any], th: Dict[str, Any]) -> Any:
        """The hold in a process of its own (conditions/hold_process.py): its injector threads would contend
        with the measuring thread for this process's interpreter lock."""
        from .hold_process import ProcessHold

        cpus, reserved = hold_cpus(node["cpus"])
        hold = ProcessHold(peak_gbps, th["band_low"], th["band_high"], cpus=cpus, node=node["node"],
                           window_s=th["window_ms"] / 1000)
        hold.reserved_cpus = reserved
        hold.kernel = PEAK_KERNEL
        hold.remeasure = lambda: self.remeasure(node)
        return hold


def acquire_host_peak(platform: Any, node: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    """STREAM peak of the host, bound to the measurement node (evidence, or {"unavailable": reason})."""
    dram = platform.dram()
    if dram is None:
        return {"unavailable": f"{platform.host_measurement_reason()}: host DRAM bandwidth is measured on the live "
                               "machine"}
    return dram.peak(node)


def peak_problem(peak: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """The evidence that stands in when the peak is absent or broke, else None."""
    if "absent" in peak or "unavailable" in peak:
        return {"unavailable": peak.get("unavailable") or peak["absent"]}
    if "error" in peak or not peak.get("validated"):
        return {"error": f"the STREAM peak probe failed: {peak.get('error') or 'results did not validate'}",
                "peak": peak}
    return None


def hold_factory(peak: Dict[str, Any], node: Dict[str, Any], th: Dict[str, Any],
                 dram: Optional[Any] = None) -> Callable[[], Any]:
    """``with factory() as hold:`` holds host DRAM occupancy in the band while the block runs."""
    dram = dram or LiveDram()

    @contextmanager
    def make() -> Iterator[Any]:
        hold = dram.hold(peak["kernels"][PEAK_KERNEL]["gbps_median"], node, th)
        # MEM-BW-HOLD's rule, for the measurements taken under the hold to be judged by (TOPO-PCIE-BW)
        hold.min_in_band_share = th.get("min_in_band_share")
        with exclusive(f"dram-node{node['node']}", purpose="DRAM bandwidth hold",
                       simulated=bool(getattr(dram, "simulated", False))):
            with hold:
                yield hold
    return make


#: Re-measurements of the peak during one hold at most (each pauses the injectors for a second or two).
MAX_REMEASURES = 3


def remeasure_peak(node: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    """A short STREAM run on the node: the peak kernel's bandwidth now (GB/s, median) and its CPU share."""
    return LiveDram().remeasure(node)


def _measured(value: Union[float, Dict[str, Any]]) -> Dict[str, Any]:
    return dict(value) if isinstance(value, dict) else {"gbps": float(value), "cpu_share": None}


def acquire_hold(peak: Dict[str, Any], factory: Optional[Callable[[], Any]], duration_s: float,
                 node: Optional[Dict[str, Any]] = None, body: Optional[Callable[[], None]] = None,
                 say: Optional[Callable[[str], None]] = None,
                 remeasure: Optional[Callable[[], Union[float, Dict[str, Any]]]] = None,
                 thresholds: Optional[Dict[str, Any]] = None, plan: Optional[TrialPlan] = None) -> Dict[str, Any]:
    """Hold the band for ``duration_s`` around ``body`` (default: wait), longer while undecided; return the
    hold's evidence.

    The sequential rule: after ``duration_s`` of counted windows, MEM-BW-HOLD's own decision rule
    (:func:`pytest_sits.checks.bandwidth.hold_decision`, given ``thresholds``) says whether the share of windows
    in band is decided; undecided, the hold goes on in steps of half the duration, up to ``plan.cap`` seconds
    (twice the duration by default) or the run's budget.

    The reference is checked, not assumed: the peak is re-measured after the hold, and during it whenever the
    injectors run flat out below the band for several windows (they are paused meanwhile).  The evidence's
    ``reference`` holds every measurement (and the CPU share of each), so the check can tell a machine whose
    bandwidth moved (INCONCLUSIVE) from one that held still and could not be held in band (FAIL).  ``say``
    receives a progress line every 5 s."""
    problem = peak_problem(peak)
    if problem or factory is None:
        return problem or {"unavailable": "the host lists no NUMA node to hold"}
    during: List[Dict[str, Any]] = []
    looks: List[Dict[str, Any]] = []
    with factory() as hold:
        measure = remeasure or getattr(hold, "remeasure", None) or (lambda: remeasure_peak(node))
        start = hold.now()
        target = float(duration_s)
        cap = max(target, float(plan.cap) if plan is not None else 2 * target)
        step = max(1.0, float(plan.step) if plan is not None else target / 2)
        deadline = plan.deadline if plan is not None else None
        if body is not None:
            body()
        next_say = start + 5.0
        paused = 0.0
        while True:
            while hold.now() - start - paused < target:
                hold.wait(0.05)
                if hold.starved.is_set() and len(during) < MAX_REMEASURES:
                    hold.pause()
                    t_pause = hold.now()
                    if say is not None:
                        say(f"[MEM-BW-HOLD] {t_pause - start:.0f} s: the injectors ran flat out below the band for "
                            f"{hold.saturated_windows} windows: load paused, re-measuring the peak (the hold is "
                            "extended by the pause)")
                    try:
                        m = _measured(measure())
                        during.append({"t": round(t_pause - start, 3), **m,
                                       "why": f"injectors saturated below the band for {hold.saturated_windows} "
                                              "windows"})
                    finally:
                        hold.resume()
                    during[-1]["pause_s"] = round(hold.now() - t_pause, 3)
                    paused += during[-1]["pause_s"]  # the hold still gets its full duration of counted windows
                    if say is not None:
                        say(f"[MEM-BW-HOLD] peak re-measured: {during[-1]['gbps']:.1f} GB/s (it was "
                            f"{hold.peak_gbps:.1f} GB/s before the hold); load resumed after a "
                            f"{during[-1]['pause_s']:.1f} s pause")
                if say is not None and hold.now() >= next_say:
                    next_say += 5.0
                    held = hold.now() - start - paused
                    say(f"[MEM-BW-HOLD] {held:.0f}/{target:g} s held"
                        + (f" (+{paused:.0f} s paused for {len(during)} re-measurement(s))" if during else "")
                        + f": {hold.progress()}")
            looks.append({"held_s": round(target, 3)})
            if thresholds is None:
                break
            from ..checks.bandwidth import hold_decision

            ev_now = dict(hold.evidence(), sequential={"looks": len(looks)})
            if not ev_now["windows"]:
                break
            outcome = next_step(hold_decision(ev_now, thresholds))
            looks[-1]["outcome"] = outcome
            if outcome != "undecided" or target >= cap:
                looks[-1]["stopped"] = "decided" if outcome in ("pass", "fail") else (
                    "cap" if outcome == "undecided" else "no further hold would decide")
                break
            if deadline is not None and time.time() >= deadline:
                looks[-1]["stopped"] = "budget"
                break
            target = min(cap, target + step)
            if say is not None:
                say(f"[MEM-BW-HOLD] share of windows in band undecided after {looks[-1]['held_s']:g} s: holding on "
                    f"to {target:g} s")
    if say is not None:
        say("[MEM-BW-HOLD] hold done: re-measuring the peak once more, to tell a machine that moved from one that "
            "did not hold")
    after = _measured(measure())
    ev = hold.evidence()
    ev["peak"] = {k: v for k, v in peak.items() if k != "bindings"}
    before = ev["peak_gbps"]
    measured = [m["gbps"] for m in during] + [after["gbps"]]
    ev["reference"] = {"before_gbps": before, "during": during, "after_gbps": after["gbps"],
                       "after_cpu_share": after.get("cpu_share"),
                       "moved": round(max(abs(g - before) / before for g in measured), 4),
                       "method": f"STREAM {ev.get('peak_kernel', PEAK_KERNEL)} median on the node, before, after, and "
                                 "whenever the injectors starved (paused meanwhile)"}
    stopped = looks[-1].get("stopped", "duration") if looks else "duration"
    ev["sequential"] = {"looks": len(looks), "held_s": [x["held_s"] for x in looks], "stopped": stopped,
                        "duration_s": float(duration_s), "cap_s": cap,
                        "rule": "held for duration_s, then in steps of half of it while the share of windows in band "
                                "was undecided, up to the cap or the run's budget"}
    return ev


def _copy_look(fn: Callable[[int], Dict[str, Any]], keys: List[str], plan: Optional[TrialPlan],
               decide: Callable[[Dict[str, Any], int], str]) -> Dict[str, Any]:
    """Run ``fn(runs)`` in looks until ``decide`` decides; merge the looks' samples (per key of ``keys``; "" for
    the top level) into one evidence with every trial and the ``sequential`` record."""
    plan = plan or TrialPlan.default("bandwidth", initial=7, step=7, cap=7)
    first: Dict[str, Any] = {}
    samples: Dict[str, List[float]] = {k: [] for k in keys}

    def merged() -> Dict[str, Any]:
        ev = dict(first)
        for k in keys:
            s = samples[k]
            part = {"samples_gbps": [round(g, 3) for g in s], "gbps_median": statistics.median(s) if s else None,
                    "gbps_min": min(s) if s else None, "gbps_max": max(s) if s else None}
            if k:
                ev[k] = dict(ev.get(k) or {}, **part)
            else:
                ev.update(part)
        ev["runs"] = len(samples[keys[0]])
        return ev

    def look(k: int, index: int) -> List[Dict[str, Any]]:
        ev = fn(k)
        if not first:
            first.update(ev)
        else:
            first["verified"] = bool(first.get("verified")) and bool(ev.get("verified"))
            if "gated" in first or "gated" in ev:  # every look's gate held, or not
                first["gated"] = all_gated(first.get("gated"), ev.get("gated"))
        for key in keys:
            part = ev[key] if key else ev
            samples[key].extend(float(g) for g in part["samples_gbps"])
        return [{"index": index + i} for i in range(len((ev[keys[0]] if keys[0] else ev)["samples_gbps"]))]

    def judge(trials: List[Dict[str, Any]], looks: int) -> str:
        ev = merged()
        if not ev.get("verified"):
            return "never"
        return decide(dict(ev, sequential={"looks": looks}), looks)

    out = sequential(look, judge, plan)
    ev = merged()
    seq = out["sequential"]
    ev["sequential"] = {k: seq[k] for k in ("looks", "trials", "stopped", "seconds", "plan")}
    ev["sequential"]["trials"] = ev["runs"]
    return ev


def acquire_device_bw(platform: Any, acc: Dict[str, Any], nbytes: int = 1 << 30,
                      thresholds: Optional[Dict[str, Any]] = None, plan: Optional[TrialPlan] = None
                      ) -> Dict[str, Any]:
    """Device copies in looks until MEM-BW-EFFICIENCY's rule decides (every copy kept)."""
    from ..checks.bandwidth import device_bw_decision

    def decide(ev: Dict[str, Any], looks: int) -> str:
        if thresholds is None:
            return "never"  # nothing to decide against: one look
        return next_step(device_bw_decision(ev, thresholds))
    try:
        return _copy_look(lambda k: platform.device_bandwidth(acc, nbytes, runs=max(2, k)), [""], plan, decide)
    except LoadUnavailable as exc:
        return {"unavailable": str(exc)}


#: nvbandwidth's host<->device cases, (host to device, device to host): copy engine first, then SM copies.
NVBANDWIDTH_HOST_TESTS = (("host_to_device_memcpy_ce", "device_to_host_memcpy_ce"),
                          ("host_to_device_memcpy_sm", "device_to_host_memcpy_sm"))


def _host_row_figure(test: Dict[str, Any], index: int) -> Tuple[Optional[float], Optional[int]]:
    """A host<->device case's figure for GPU ``index`` (the CPU row's column) and the case's line."""
    rows: Dict[int, Dict[int, Optional[float]]] = test.get("matrix") or {}
    row = rows[0] if 0 in rows else next(iter(rows.values()), {})
    return row.get(index), test.get("line")


def submitted_pcie_bw(inventory: Dict[str, Any], acc: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """TOPO-PCIE-BW evidence of a submitted ``nvbandwidth`` text for one device: its host-to-device and
    device-to-host figures (the CPU row's column of the device) and the link maximum another text gives (``nvidia-smi
    -q``, ``lspci -vv``); None where no nvbandwidth text with a host<->device case was submitted."""
    sub = inventory.get("submitted") or {}
    for nb in sub.get("nvbandwidth") or []:
        pair = next((p for p in NVBANDWIDTH_HOST_TESTS if any((nb["tests"].get(t) or {}).get("matrix") for t in p)),
                    None)
        if pair is None:
            continue
        index = next((int(i) for i, k in (nb.get("index_to_key") or {}).items() if k == acc["bdf"]), None)
        if index is None:
            return {"unavailable": f"{nb['file']}: none of its devices is matched to {acc['bdf']} (the GPU counts of "
                                   "the texts differ)"}
        (h2d, h2d_line), (d2h, d2h_line) = (_host_row_figure(nb["tests"].get(t) or {}, index) for t in pair)
        cap = ((sub.get("links") or {}).get(acc["bdf"]) or {}).get("capability") or {}
        return {"source": "nvbandwidth", "file": nb["file"], "version": nb.get("version"), "device": acc["bdf"],
                "index": index, "tests": list(pair), "lines": [h2d_line, d2h_line], "h2d_gbps": h2d, "d2h_gbps": d2h,
                "match_rule": nb.get("match_rule"), "cut": bool(nb.get("cuts")),
                "link": {"gen": cap.get("achievable_gen"), "width": cap.get("achievable_width"),
                         "source": "the link maximum the submitted texts give (nvidia-smi -q, lspci -vv)"
                         if cap else None}}
    return None


def acquire_pcie_bw(platform: Any, acc: Dict[str, Any], nbytes: int, peak: Dict[str, Any],
                    factory: Optional[Callable[[], Any]], thresholds: Optional[Dict[str, Any]] = None,
                    plan: Optional[TrialPlan] = None) -> Dict[str, Any]:
    """Pinned copies each way, in looks until TOPO-PCIE-BW's rule decides, under the DRAM hold when the host can be
    measured."""
    from ..checks.bandwidth import pcie_bw_decisions
    from ..checks.interval import combine

    link = acc["link"]
    link_ev = {"gen": link.get("max_gen"), "width": link.get("max_width"), "source": "sysfs max_link_*"}

    def decide(ev: Dict[str, Any], looks: int) -> str:
        if thresholds is None or not link_ev["gen"] or not link_ev["width"]:
            return "never"
        return next_step(combine(pcie_bw_decisions({"bandwidth": ev, "link": link_ev}, thresholds)))

    def copies(k: int) -> Dict[str, Any]:
        return platform.host_device_bandwidth(acc, nbytes, runs=max(2, k))
    try:
        if factory is not None and peak_problem(peak) is None:
            with factory() as hold:
                ev = _copy_look(copies, ["h2d", "d2h"], plan, decide)
            h = hold.evidence()
            ev["hold"] = f"{h['windows_in_band']}/{h['windows']} windows in band"
            ev["hold_evidence"] = h
        else:
            ev = _copy_look(copies, ["h2d", "d2h"], plan, decide)
            ev["hold"] = None
            ev["hold_reason"] = peak.get("unavailable") or peak.get("absent") or peak.get("error")
    except LoadUnavailable as exc:
        return {"unavailable": str(exc)}
    return {"bandwidth": ev, "link": link_ev}
