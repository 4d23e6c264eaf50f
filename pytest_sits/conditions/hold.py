"""Hold host DRAM bandwidth occupancy inside a band (SITS2026 MEM-BW-HOLD: 85-92%).

:class:`BandwidthHold` is a context manager: background threads copy memory
in short duty-cycled periods; a monitor thread closes the loop every window
(100 ms by default), measuring the bandwidth achieved and steering the duty
cycle with :class:`DutyController`.  Open-loop delay settings do not hold a
level (the same delay gives different bandwidth under different contention),
so the controller measures and corrects.

What it measures: its own byte accounting (STREAM copy convention, 16 bytes
per element, the same convention as the peak it divides by) and, when the
host has them, real DRAM counters (resctrl MBM ``mbm_total_bytes``), which
also count the traffic of everything else on the machine.  The evidence says
which source decided.  On every exit path the threads stop and are joined.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

RESCTRL = Path("/sys/fs/resctrl")


class DutyController:
    """PI controller (velocity form) on the injection command, scaled by an estimate of the plant gain.

    The command is the fraction of the peak the injectors are asked to move
    (their duty cycle); the plant answers with an occupancy.  Pure and
    deterministic: tests drive it with a simulated plant.  The gain estimate
    g = occupancy / command (an exponential average) lets one tuning work
    whether the plant gives 0.5x or 1.5x of what is asked.  The injectors'
    token buckets already hold the commanded rate within milliseconds; this
    outer loop removes the bias they cannot see (other traffic on real DRAM
    counters, a plant that delivers less than asked).
    """

    def __init__(self, low: float, high: float, kp: float = 0.1, ki: float = 0.35, duty0: float = 0.885,
                 max_duty: float = 1.2, max_step: float = 0.05):
        if not 0 < low < high <= 1.5:
            raise ValueError(f"band [{low}, {high}] is not a band within (0, 1.5]")
        self.low, self.high = low, high
        self.target = (low + high) / 2
        self.kp, self.ki = kp, ki
        self.duty = duty0
        self.max_duty = max_duty
        self.max_step = max_step
        self.gain = 1.0
        self._prev_err: Optional[float] = None
        self._recent: List[float] = []

    def update(self, occupancy: float, saturated: bool = False) -> float:
        """One window: ``occupancy`` measured; ``saturated`` when the injectors could not deliver
        what was commanded (anti-windup: the command is then not raised further)."""
        # A saturated window (the injectors could not deliver what was commanded: a capacity dip)
        # says nothing about the command, so it neither moves the command nor enters the history.
        # Otherwise the median of the last three windows: a single window's dip is ridden out by
        # the injectors' token buckets and must not move the command, or the next windows
        # overshoot the band while the correction unwinds.
        if saturated:
            return self.duty
        self._recent = (self._recent + [occupancy])[-3:]
        occupancy = sorted(self._recent)[len(self._recent) // 2]
        if self.duty > 0.05 and occupancy > 0:
            self.gain = min(5.0, max(0.1, 0.7 * self.gain + 0.3 * (occupancy / self.duty)))
        err = self.target - occupancy
        d_err = 0.0 if self._prev_err is None else err - self._prev_err
        self._prev_err = err
        # A bounded step: one window's dip (a stalled thread) must not swing the next window out of band.
        step = max(-self.max_step, min(self.max_step, (self.ki * err + self.kp * d_err) / self.gain))
        self.duty = min(self.max_duty, max(0.0, self.duty + step))
        return self.duty


class ResctrlCounter:
    """Total DRAM bytes from resctrl MBM (``mon_data/mon_L3_*/mbm_total_bytes`` of the root group)."""

    source = "resctrl MBM mbm_total_bytes"

    def __init__(self, root: Path = RESCTRL):
        self.files = sorted(root.glob("mon_data/mon_L3_*/mbm_total_bytes"))

    @property
    def available(self) -> bool:
        return bool(self.files) and self.read_bytes() is not None

    def read_bytes(self) -> Optional[int]:
        total = 0
        try:
            for f in self.files:
                text = f.read_text().strip()
                if text == "Unavailable":
                    return None
                total += int(text)
        except (OSError, ValueError):
            return None
        return total


def find_counter() -> Dict[str, Any]:
    """The best DRAM traffic counter on this host, or the reason there is none."""
    mbm = ResctrlCounter()
    if mbm.available:
        return {"counter": mbm, "source": mbm.source, "reason": None}
    if not RESCTRL.exists():
        why = "no resctrl mounted (/sys/fs/resctrl missing: kernel without RDT, a VM, or not mounted)"
    else:
        why = "resctrl has no MBM total-bytes monitoring on this host"
    return {"counter": None, "source": None, "reason": why + "; perf uncore IMC counters are not read by this "
                                                          "version"}


class BandwidthHold:
    """Keep host DRAM traffic at a fraction of ``peak_gbps`` while the body of the ``with`` runs."""

    #: Measures the peak again: set by the platform that made the hold, where it has a way (declared only: a hold
    #: without one has no such attribute, and the hold's user falls back on its own re-measurement).
    remeasure: Callable[[], Any]

    def __init__(self, peak_gbps: float, low: float = 0.85, high: float = 0.92, *, threads: int = 0,
                 cpus: Optional[List[int]] = None, node: Optional[int] = None, window_s: float = 0.1,
                 period_s: float = 0.005, buffer_bytes: int = 64 * 1024 ** 2, chunk_elems: int = 1 << 17,
                 settle_windows: int = 3, settle_timeout_s: float = 10.0, burst_s: float = 0.02,
                 counter: Optional[Any] = None, counter_reason: Optional[str] = None,
                 clock: Callable[[], float] = time.perf_counter):
        if peak_gbps <= 0:
            raise ValueError("peak_gbps must be positive (measure it with stream_peak first)")
        self.peak_gbps = peak_gbps
        self.controller = DutyController(low, high)
        self.low, self.high = low, high
        self.cpus = cpus or sorted(os.sched_getaffinity(0))
        self.threads = threads or len(self.cpus)
        self.node = node
        self.window_s, self.period_s, self.burst_s = window_s, period_s, burst_s
        self.buffer_bytes, self.chunk_elems = buffer_bytes, chunk_elems
        self.settle_windows, self.settle_timeout_s = settle_windows, settle_timeout_s
        self.counter, self.counter_reason = counter, counter_reason
        self.clock = clock
        self._stop = threading.Event()
        self._settled = threading.Event()
        self._paused = threading.Event()
        #: Set by the monitor when the injectors ran flat out below the band for ``saturated_windows``
        #: windows in a row: the machine may deliver less than the peak measured before (re-measure it).
        self.starved = threading.Event()
        self.saturated_windows = 5
        self._bytes = [0] * self.threads
        self._workers: List[threading.Thread] = []
        self._monitor: Optional[threading.Thread] = None
        self.timeline: List[Dict[str, Any]] = []
        self.errors: List[str] = []
        self.bindings: List[Any] = [None] * self.threads
        self.body_started: Optional[float] = None
        self.body_ended: Optional[float] = None
        self.stop_latency_s: Optional[float] = None
        self.counter_scale: Optional[float] = None
        self._in_band_run = 0
        self._starved_run = 0
        #: The injector threads' kernel task ids (their run-queue wait is read per window).
        self._tids: List[Optional[int]] = [None] * self.threads
        #: The STREAM kernel of the peak this hold divides by (the injectors run the same kernel).
        self.kernel = "copy"

    # -- threads --------------------------------------------------------
    def _inject(self, i: int) -> None:
        from . import numa

        try:
            with numa.pin(self.node, self.cpus[i % len(self.cpus)]) as binding:
                self.bindings[i] = binding
                self._tids[i] = threading.get_native_id()
                self._copy_at_rate(i)
        except Exception as exc:
            self.errors.append(f"injector {i}: {type(exc).__name__}: {exc}")

    def _copy_at_rate(self, i: int) -> None:
        import numpy as np

        n = max(self.chunk_elems, self.buffer_bytes // 8 // self.threads)
        src = np.ones(n)
        dst = np.zeros(n)
        step = self.chunk_elems
        chunk_bytes = 16 * step
        peak_bps = self.peak_gbps * 1e9 / self.threads
        pos = 0
        credit = 0.0
        last = self.clock()
        # Token bucket: bytes are earned at the commanded rate and spent by copying chunks.
        # A thread that falls behind (contention, a stolen core) catches up at once, within a
        # burst cap (20 ms by default; measured side by side with 2 and 10 ms: a smaller cap loses
        # the catch-up after brief interruptions, a larger one spills into the next window), so the
        # level holds at a far finer grain than the window.
        while not self._stop.is_set():
            if self._paused.is_set():  # the peak is being re-measured: move nothing, earn nothing
                self._stop.wait(0.01)
                last = self.clock()
                credit = 0.0
                continue
            rate = self.controller.duty * peak_bps
            now = self.clock()
            credit = min(credit + (now - last) * rate, max(rate * self.burst_s, 2 * chunk_bytes))
            last = now
            if credit >= chunk_bytes:
                e = min(n, pos + step)
                np.positive(src[pos:e], out=dst[pos:e])
                moved = 16 * (e - pos)
                self._bytes[i] += moved
                credit -= moved
                pos = 0 if e >= n else e
            elif rate > 0:
                self._stop.wait(max((chunk_bytes - credit) / rate, 0.001))
            else:
                self._stop.wait(self.period_s)

    def _run_wait_s(self) -> Optional[List[float]]:
        """Seconds each injector thread has waited on a run queue for a CPU (the kernel's schedstat of the task), or
        None where the kernel does not say (no CONFIG_SCHED_INFO, a thread not started)."""
        out = []
        for tid in self._tids:
            if tid is None:
                return None
            try:
                with open(f"/proc/self/task/{tid}/schedstat", "rb") as f:
                    out.append(int(f.read(256).split()[1]) / 1e9)
            except (OSError, ValueError, IndexError):
                return None
        return out

    def _monitor_loop(self) -> None:
        last_t = self.clock()
        last_b = sum(self._bytes)
        last_c = self.counter.read_bytes() if self.counter else None
        last_w = self._run_wait_s()
        while not self._stop.wait(self.window_s):
            now = self.clock()
            b = sum(self._bytes)
            c = self.counter.read_bytes() if self.counter and not self._paused.is_set() else None
            w = self._run_wait_s()
            wait = (max(x - y for x, y in zip(w, last_w)) / (now - last_t)
                    if w is not None and last_w is not None and now > last_t else None)
            self.record_window(now, now - last_t, b - last_b,
                               (c - last_c) if c is not None and last_c is not None else None, cpu_wait=wait)
            last_t, last_b, last_w = now, b, w
            last_c = self.counter.read_bytes() if self.counter and self._paused.is_set() else c

    def record_window(self, now: float, dt: float, own_bytes: float, counter_bytes: Optional[float],
                      cpu_wait: Optional[float] = None) -> None:
        """One window: ``own_bytes`` injected and ``counter_bytes`` counted (None: no counter) over ``dt`` seconds
        ending at ``now``; measured, recorded, and the controller corrected (the simulated hold calls this too).
        ``cpu_wait``: the largest share of the window an injector thread waited for a CPU (None: not known)."""
        if self._paused.is_set():
            self.timeline.append({"t": now, "phase": "paused", "duty": round(self.controller.duty, 4),
                                  "own_gbps": None, "own_occupancy": None, "occupancy": None,
                                  "in_band": None, "saturated": None})
            self._starved_run = 0
            return
        own_gbps = own_bytes / dt / 1e9
        rec: Dict[str, Any] = {"t": now, "duty": round(self.controller.duty, 4),
                               "own_gbps": round(own_gbps, 3), "own_occupancy": round(own_gbps / self.peak_gbps, 4),
                               "phase": "hold" if self._settled.is_set() else "settle"}
        occ = rec["own_occupancy"]
        if counter_bytes is not None:
            dram_gbps = counter_bytes / dt / 1e9
            if self.counter_scale is None and own_gbps > 0:
                # First window: how many counted DRAM bytes one accounted byte costs here
                # (write-allocate, prefetch), so the counter is read on the peak's scale.
                self.counter_scale = dram_gbps / own_gbps
            rec["dram_gbps"] = round(dram_gbps, 3)
            if self.counter_scale:
                occ = dram_gbps / self.counter_scale / self.peak_gbps
                rec["dram_occupancy"] = round(occ, 4)
        rec["occupancy"] = round(occ, 4)
        if cpu_wait is not None:
            rec["cpu_wait"] = round(min(1.0, max(0.0, cpu_wait)), 3)
        rec["in_band"] = self.low <= occ <= self.high
        self.timeline.append(rec)
        self._in_band_run = self._in_band_run + 1 if rec["in_band"] else 0
        if not self._settled.is_set() and self._in_band_run >= self.settle_windows:
            self._settled.set()
        # Saturated: the token buckets delivered clearly less than commanded (no spare capacity).
        rec["saturated"] = rec["own_occupancy"] < 0.97 * self.controller.duty
        starved = rec["saturated"] and occ < self.low and rec["phase"] == "hold"
        self._starved_run = self._starved_run + 1 if starved else 0
        if self._starved_run >= self.saturated_windows:
            self.starved.set()
        self.controller.update(occ, saturated=rec["saturated"])

    # -- context manager ------------------------------------------------
    def __enter__(self) -> BandwidthHold:
        self._stop.clear()
        self.started_at = time.time()
        self._workers = [threading.Thread(target=self._inject, args=(i,), name=f"sits-hold-{i}", daemon=True)
                         for i in range(self.threads)]
        for t in self._workers:
            t.start()
        self._monitor = threading.Thread(target=self._monitor_loop, name="sits-hold-monitor", daemon=True)
        self._monitor.start()
        try:
            self._settled.wait(self.settle_timeout_s)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        self._settled.set()  # after the timeout the windows count anyway, and the verdict shows it
        self.body_started = self.clock()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.body_ended = self.clock()
        t0 = time.perf_counter()
        self._stop.set()
        for t in self._workers + ([self._monitor] if self._monitor else []):
            t.join(timeout=5)
        self.stop_latency_s = time.perf_counter() - t0
        self.alive_after_stop = [t.name for t in self._workers + [self._monitor] if t and t.is_alive()]

    def now(self) -> float:
        """The clock the hold's duration is counted on (the simulated hold counts simulated time)."""
        return time.monotonic()

    def wait(self, seconds: float) -> None:
        """Let the hold run for ``seconds`` (the simulated hold advances its plant instead of sleeping)."""
        time.sleep(seconds)

    def pause(self) -> None:
        """Stop injecting (the peak is re-measured meanwhile); paused windows are recorded, never counted."""
        self._paused.set()

    def resume(self) -> None:
        self.starved.clear()
        self._paused.clear()

    # -- evidence ---------------------------------------------------------
    def progress(self) -> str:
        """One line for the terminal: windows in band so far, the last occupancy."""
        return progress_line(self.timeline, self.peak_gbps)

    def evidence(self) -> Dict[str, Any]:
        return {
            "band": [self.low, self.high], "peak_gbps": self.peak_gbps, "peak_kernel": self.kernel,
            "window_s": self.window_s,
            "threads": self.threads, "cpus": self.cpus, "node": self.node, "bindings": self.bindings,
            "source": self.counter.source if self.counter is not None else "own accounting (injected bytes only)",
            "counter_reason": self.counter_reason, "counter_scale": self.counter_scale,
            "stop_latency_s": self.stop_latency_s, "errors": self.errors,
            "remeasure_after_windows": self.saturated_windows,
            "min_in_band_share": getattr(self, "min_in_band_share", None),
            **windows_summary(self.timeline),
        }


def progress_line(timeline: List[Dict[str, Any]], peak_gbps: float) -> str:
    """A hold's line for the terminal: its windows in band so far and the last occupancy (``settling`` before)."""
    hold = [r for r in list(timeline) if r.get("phase") == "hold"]
    if not hold:
        return "settling"
    inb = sum(1 for r in hold if r.get("in_band"))
    return (f"{inb}/{len(hold)} windows in band ({inb / len(hold):.0%}), occupancy now "
            f"{hold[-1]['occupancy']:.3f} of the {peak_gbps:.1f} GB/s peak")


def windows_summary(timeline: List[Dict[str, Any]]) -> Dict[str, Any]:
    """A hold's window counts and its timeline from its first window (the evidence of a hold in process, and of one
    in its own process while it runs)."""
    rows = list(timeline)
    hold = [r for r in rows if r.get("phase") == "hold"]
    t0 = rows[0]["t"] if rows else 0.0
    return {"windows": len(hold), "windows_in_band": sum(1 for r in hold if r.get("in_band")),
            "settle_windows": sum(1 for r in rows if r.get("phase") == "settle"),
            "timeline": [dict(r, t=round(r["t"] - t0, 3)) for r in rows]}
