"""The simulated host DRAM: a bandwidth plant in simulated time, its STREAM peak and the MEM-BW-HOLD injectors.

The plant delivers ``capacity(t)`` GB/s.  A steady plant (no fault) holds its capacity still, and the hold's
controller (the live :class:`~pytest_sits.conditions.hold.DutyController`, through the live hold's own window
rule) keeps the windows in band; fault ``drift`` makes the capacity wander (a trend of 0.5 to 1% per simulated
second, up or down, with a random walk on top, bounded to -35%/+20%: other work ramping up or down on the
machine), so a peak measured before the hold is no longer the machine's peak during it: the hold's
re-measurements see it move, and the verdict is INCONCLUSIVE, never FAIL.  Fault ``hold-weak`` is DRAM that
cannot be held: STREAM still reaches the plant's capacity, but the injectors' traffic tops out at
:data:`WEAK_INJECTION` of it (a memory controller that throttles sustained background traffic), below the band.

The hold runs in simulated time: ``wait`` advances the plant window by window, so a 30 s hold takes
milliseconds.  Everything it produces is labelled simulated.
"""

from __future__ import annotations

import random
from typing import Any, Dict, List, Optional

from ...conditions.bandwidth import PEAK_KERNEL
from ...conditions.hold import BandwidthHold

#: The faults this module implements, with what each does (``faults.FAULTS`` gathers every module's).
FAULTS = {
    "hold-weak": "the host DRAM cannot be held in the band: STREAM reaches its peak, but the bandwidth injectors'"
                 " traffic tops out at 75% of it (MEM-BW-HOLD)",
}


#: The simulated node's STREAM bandwidth (GB/s) when the plant holds still; per kernel, as STREAM counts them.
NODE_GBPS = 150.0
KERNEL_SHARE = {"copy": 1.0, "scale": 1.0, "add": 1.04, "triad": 1.04}
#: The share of the plant's capacity the injectors reach: a healthy plant nearly all of it, fault ``hold-weak``
#: less than the band's lower edge.
INJECTION = 0.98
WEAK_INJECTION = 0.75


class SimDram:
    """One simulated host's DRAM (every node alike), in simulated seconds."""

    simulated = True

    def __init__(self, faults: List[str], seed: Optional[int] = None):
        self.drifting = "drift" in faults
        self.injection = WEAK_INJECTION if "hold-weak" in faults else INJECTION
        self.rng = random.Random(seed if seed is not None else (random.SystemRandom().getrandbits(64)
                                                                 if self.drifting else 2026))
        self.t = 0.0
        self.level = 0.0
        self._stepped = 0.0
        self.trend = self.rng.choice((-1.0, 1.0)) * self.rng.uniform(0.005, 0.010) if self.drifting else 0.0
        self.active: Optional[SimHold] = None

    # -- the plant -----------------------------------------------------------
    def advance(self, dt: float) -> None:
        """Move simulated time on by ``dt``; a drifting plant takes one random-walk step per second."""
        self.t += dt
        while self.drifting and self.t - self._stepped >= 1.0:
            self._stepped += 1.0
            self.level = max(-0.35, min(0.20, self.level + self.trend + self.rng.gauss(0.0, 0.01)))

    def spend(self, seconds: float) -> None:
        """Simulated time taken by a measurement made while a hold runs (its windows go on meanwhile)."""
        if self.active is not None:
            self.active.wait(seconds)
        else:
            self.advance(seconds)

    def capacity(self) -> float:
        """The node's copy bandwidth now (GB/s)."""
        return NODE_GBPS * (1.0 + self.level)

    # -- what the acquire functions ask (conditions.bandwidth.LiveDram's interface) -----------------------------
    def peak(self, node: Optional[Dict[str, Any]], ntimes: int = 10) -> Dict[str, Any]:
        """A simulated STREAM run: each kernel's GB/s over ``ntimes - 1`` counted iterations."""
        kernels: Dict[str, Any] = {}
        samples: Dict[str, List[float]] = {k: [] for k in KERNEL_SHARE}
        for _ in range(ntimes - 1):
            for k, share in KERNEL_SHARE.items():
                samples[k].append(self.capacity() * share * (1.0 + self.rng.gauss(0.0, 0.005)))
                self.advance(0.05)
        for k, s in samples.items():
            s_sorted = sorted(s)
            kernels[k] = {"gbps_min": s_sorted[0], "gbps_median": s_sorted[len(s) // 2], "gbps_max": s_sorted[-1],
                          "samples_gbps": [round(g, 3) for g in s], "bytes_per_element": 16 if k in ("copy", "scale")
                          else 24, "gbps_on_cpu_max": s_sorted[-1], "cpu_share_median": 1.0}
        cpus = node["cpus"] if node else [0]
        return {"method": "simulated STREAM on the simulated DRAM plant", "simulated": True, "threads": len(cpus),
                "cpus": cpus, "node": node["node"] if node else 0, "ntimes": ntimes, "kernels": kernels,
                "validated": True, "max_relative_error": 0.0}

    def remeasure(self, node: Optional[Dict[str, Any]]) -> Dict[str, Any]:
        k = self.peak(node, ntimes=4)["kernels"][PEAK_KERNEL]
        return {"gbps": float(k["gbps_median"]), "cpu_share": k["cpu_share_median"]}

    def hold(self, peak_gbps: float, node: Dict[str, Any], th: Dict[str, Any]) -> SimHold:
        return SimHold(self, peak_gbps, node, th)


class SimHold(BandwidthHold):
    """The hold on the simulated plant: the live hold's window rule and controller, no threads, simulated time."""

    def __init__(self, plant: SimDram, peak_gbps: float, node: Dict[str, Any], th: Dict[str, Any]):
        super().__init__(peak_gbps, th["band_low"], th["band_high"], cpus=list(node.get("cpus") or [0]),
                         node=node.get("node"), window_s=th["window_ms"] / 1000,
                         counter_reason="simulated: the plant's own accounting (no DRAM counter)")
        self.plant = plant
        self.kernel = PEAK_KERNEL
        self.clock = lambda: self.plant.t
        self._pending = 0.0

    def __enter__(self) -> SimHold:
        self.started_at = 0.0
        waited = 0.0
        while not self._settled.is_set() and waited < self.settle_timeout_s:
            self.wait(self.window_s)
            waited += self.window_s
        self._settled.set()
        self.body_started = self.plant.t
        self.plant.active = self
        return self

    def __exit__(self, *exc: Any) -> None:
        self.plant.active = None
        self.body_ended = self.plant.t
        self.stop_latency_s = 0.0
        self.alive_after_stop = []

    def now(self) -> float:
        return self.plant.t

    def wait(self, seconds: float) -> None:
        """Advance the plant, one window at a time: the injectors deliver what is commanded, at most what the
        DRAM lets them (a little under its capacity; fault ``hold-weak``: under the band), with 1% of noise per
        window."""
        self._pending += seconds
        while self._pending >= self.window_s - 1e-12:
            self._pending -= self.window_s
            commanded = self.controller.duty * self.peak_gbps
            delivered = min(commanded, self.plant.injection * self.plant.capacity()) * (1.0 + self.plant.rng.gauss(0.0, 0.01))
            self.plant.advance(self.window_s)
            self.record_window(self.plant.t, self.window_s, max(0.0, delivered) * self.window_s * 1e9, None)

    def remeasure(self) -> Dict[str, Any]:
        """A short STREAM run while the hold is paused: the paused windows are recorded as such."""
        self.wait(1.0)
        return self.plant.remeasure({"node": self.node, "cpus": self.cpus})

    def evidence(self) -> Dict[str, Any]:
        ev = super().evidence()
        ev["simulated"] = True
        ev["source"] = "simulated plant: the injectors' own accounting"
        return ev
