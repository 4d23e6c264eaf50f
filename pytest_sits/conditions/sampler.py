"""Sample3D: power P, latency D and load ρ on one time base.

One sampler thread reads the fast power sources at a fixed period (default 10 ms, on an absolute schedule:
a late tick is recorded as an overrun, never silently stretched), every reading stamped with the monotonic
clock.  Slow sources (a BMC) are polled by a companion thread at their own interval and joined with their
own, older timestamps, so their lag shows up as skew instead of being hidden.

The latency and load parts come from the system under test, which stamps every completed query and every
step of work with the same monotonic clock; :func:`join` attaches them to the sampler's ticks afterwards
(the queries completed in each period, ρ over the window ending at each tick).  Joining afterwards, by
timestamp, needs no lock between the engine and the sampler, so sampling does not perturb the load.

No sensor samples "in the same hardware cycle" as another, and none offers it: the skew between the
three timestamps of each record is measured (:func:`skew`) and judged against the period (PLP-SAMPLE).
"""

from __future__ import annotations

import bisect
import threading
import time
from typing import Any, Dict, List, Optional, Sequence

from ..checks.interval import quantile_tail

#: Bounds, so that an absurd period or duration cannot exhaust memory.
MIN_PERIOD_S = 0.001
MAX_TICKS = 2_000_000


class Sample3D:
    """Context manager: samples ``sources`` every ``period_s`` until it exits (on every exit path)."""

    def __init__(self, sources: Sequence[Any], period_s: float = 0.01, max_ticks: int = MAX_TICKS):
        self.period_ns = int(max(MIN_PERIOD_S, float(period_s)) * 1e9)
        self.fast = [s for s in sources if getattr(s, "fast", True)]
        self.slow = [s for s in sources if not getattr(s, "fast", True)]
        self.max_ticks = max_ticks
        self.ticks: List[int] = []
        self.readings: Dict[str, List[Dict[str, Any]]] = {s.name: [] for s in sources}
        self._latest: Dict[str, Optional[Dict[str, Any]]] = {s.name: None for s in self.slow}
        self.overruns = 0
        self.thread_cpu_s = 0.0
        self._stop = threading.Event()
        self._threads: List[threading.Thread] = []
        self.started_ns = self.stopped_ns = 0
        self.sources = list(sources)

    def __enter__(self) -> Sample3D:
        self._stop.clear()
        self.started_ns = time.monotonic_ns()
        self._threads = [threading.Thread(target=self._run, name="sits-sample3d", daemon=True)]
        self._threads += [threading.Thread(target=self._poll, args=(s,), name=f"sits-poll-{s.name}", daemon=True)
                          for s in self.slow]
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=10)
        self.stopped_ns = time.monotonic_ns()

    def _poll(self, src: Any) -> None:
        interval = max(self.period_ns / 1e9, float(src.min_interval_s))
        while not self._stop.is_set():
            self._latest[src.name] = src.read()
            self._stop.wait(interval)

    def _run(self) -> None:
        cpu0 = time.thread_time()
        nxt = time.monotonic_ns()
        try:
            while not self._stop.is_set() and len(self.ticks) < self.max_ticks:
                tick = time.monotonic_ns()
                self.ticks.append(tick)
                for s in self.fast:
                    self.readings[s.name].append(s.read())
                for s in self.slow:
                    self.readings[s.name].append(self._latest[s.name] or {
                        "t_ns": tick, "read_ns": 0, "sensor_t_ns": None, "power_w": None, "energy_j": None,
                        "error": "no reading yet from the slow source"})
                nxt += self.period_ns
                now = time.monotonic_ns()
                if now > nxt:  # late: skip the missed ticks, and say so
                    missed = (now - nxt) // self.period_ns + 1
                    self.overruns += int(missed)
                    nxt += int(missed) * self.period_ns
                # a plain sleep (cheaper than Event.wait); the stop flag is seen within one period
                time.sleep(max(0.0, (nxt - time.monotonic_ns()) / 1e9))
        finally:
            self.thread_cpu_s = time.thread_time() - cpu0

    def evidence(self) -> Dict[str, Any]:
        """The raw samples (JSON), aligned with ``ticks``: ``readings[name][i]`` belongs to ``ticks[i]``."""
        return {"period_s": self.period_ns / 1e9, "ticks": list(self.ticks), "overruns": self.overruns,
                "sources": {s.name: dict(s.describe(), readings=self.readings[s.name]) for s in self.sources},
                "thread_cpu_s": round(self.thread_cpu_s, 6),
                "duration_s": round((self.stopped_ns - self.started_ns) / 1e9, 6)}


# --------------------------------------------------------------------------
# Joining, windows, skew (pure functions of the recorded timestamps)


class CumulativeWork:
    """W(t): work done by time ``t``, from step records ``(start_ns, end_ns, tokens, flops, ...)`` (column
    ``col``), each step's work spread evenly over its duration.  The engine runs one step at a time, so
    steps do not overlap; W is exact at step boundaries and linear inside a step."""

    def __init__(self, work: Sequence[Sequence[Any]], col: int = 3):
        recs = sorted((int(w[0]), max(int(w[1]), int(w[0]) + 1), float(w[col])) for w in work)
        self.starts = [r[0] for r in recs]
        self.ends = [r[1] for r in recs]
        self.amounts = [r[2] for r in recs]
        self.prefix = [0.0]
        for a in self.amounts:
            self.prefix.append(self.prefix[-1] + a)

    def at(self, t: int) -> float:
        k = bisect.bisect_right(self.ends, t)
        done = self.prefix[k]
        if k < len(self.starts) and self.starts[k] < t:
            done += self.amounts[k] * (t - self.starts[k]) / (self.ends[k] - self.starts[k])
        return done


def rho_at(work: Sequence[Sequence[Any]], ticks: Sequence[int], window_ns: int, peak_per_s: float,
           col: int = 3) -> List[float]:
    """ρ over the window ending at each tick: work in [t - window, t] / (peak x window)."""
    w = CumulativeWork(work, col)
    denom = peak_per_s * window_ns / 1e9
    return [(w.at(t) - w.at(t - window_ns)) / denom for t in ticks]


def percentile(values: Sequence[float], q: float) -> Optional[float]:
    """Nearest-rank percentile (as LoadGen reports them: the value at index floor(n * q) of the sorted list)."""
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s) - 1, int(len(s) * q))]


def skew(samples: Dict[str, Any], tick_range: Optional[tuple] = None) -> Dict[str, Any]:
    """Per source: how far each reading's timestamps lie from its record's tick (the time the latency and
    load parts of the record refer to), and the spread across sources within one record."""
    ticks = samples["ticks"]
    lo, hi = tick_range or (0, len(ticks))
    out: Dict[str, Any] = {}
    spreads: List[int] = []
    per_tick: List[List[int]] = [[] for _ in range(hi - lo)]
    for name, src in samples["sources"].items():
        reads = src["readings"]
        skews, failed = [], 0
        for i in range(lo, min(hi, len(reads))):
            r = reads[i]
            if r.get("error"):
                failed += 1
                continue
            stamp = r["sensor_t_ns"] if r.get("sensor_t_ns") is not None else r["t_ns"]
            # the value is at least as old as the read (a sensor without its own stamp: the read's window)
            s = max(abs(ticks[i] - stamp), abs(ticks[i] - r["t_ns"]) + r.get("read_ns", 0) // 2)
            skews.append(s)
            per_tick[i - lo].append(stamp)
        n = len(skews)
        out[name] = {"kind": src.get("kind"), "fast": src.get("fast", True), "readings": hi - lo,
                     "failed": failed, "sensor_stamped": any(r.get("sensor_t_ns") is not None for r in reads[lo:hi]),
                     "p50_ms": _ms(percentile(skews, 0.5)), "p99_ms": _ms(percentile(skews, 0.99)),
                     "max_ms": _ms(max(skews) if n else None),
                     # what PLP-SAMPLE's check needs to bound the P99 (the largest skews, in ms)
                     "p99_tail_ms": quantile_tail([x / 1e6 for x in skews], 0.99)}
    for i, stamps in enumerate(per_tick):
        if stamps:
            spreads.append(max(stamps + [ticks[lo + i]]) - min(stamps + [ticks[lo + i]]))
    return {"sources": out, "record_spread_p99_ms": _ms(percentile(spreads, 0.99)),
            "record_spread_max_ms": _ms(max(spreads) if spreads else None)}


def _ms(ns: Optional[float]) -> Optional[float]:
    return None if ns is None else round(ns / 1e6, 4)


def join(samples: Dict[str, Any], queries: Sequence[Sequence[Any]], rho: List[float]) -> List[Dict[str, Any]]:
    """Records of (tick, each source's reading, latencies completed in the period ending at the tick, ρ of the
    window ending at the tick).  ``rho[i]`` belongs to ``ticks[i]``; ``queries`` are
    ``(issued_ns, done_ns, tokens, tenant, error)``."""
    ticks = samples["ticks"]
    done = sorted((q[1], (q[1] - q[0]) / 1e9) for q in queries if q[4] is None)
    out, j = [], 0
    prev = ticks[0] - int(samples["period_s"] * 1e9) if ticks else 0
    for i, t in enumerate(ticks):
        lat = []
        while j < len(done) and done[j][0] <= t:
            if done[j][0] > prev:
                lat.append(round(done[j][1], 6))
            j += 1
        out.append({"t_ns": t, "rho": rho[i] if i < len(rho) else None, "latencies_s": lat,
                    "power": {n: {k: s["readings"][i].get(k) for k in ("t_ns", "sensor_t_ns", "power_w", "energy_j",
                                                                        "error")}
                              for n, s in samples["sources"].items() if i < len(s["readings"])}})
        prev = t
    return out
