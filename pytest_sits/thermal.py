"""Thermal steady state (SITS2026 THERM-GPU-STEADY, THERM-CPU-STEADY).

* :class:`SteadyDetector` - online, O(1) amortised per sample, decides within
  one sample of the criterion holding.
* :class:`ThermalController` - drives a load's duty cycle so that the
  temperature moves into the band, then holds the load still so it can settle.
* :func:`calibrate` - the loop: read, detect, control, until steady or timeout.
* :class:`ThermalPlant` - a first-order thermal model (heat from load,
  cooling, ambient, sensor quantisation and noise) in simulated time, for the
  tests and the sim platform.

The steady rule (stated in every verdict):
  over the last ``window_s`` of contiguous valid readings,
  (1) drift: |least-squares slope × window| <= tolerance;
  (2) sub-window means: each of 4 sub-window means within ± tolerance of the window mean;
  (3) spread: max - min <= max(2 × tolerance, one sensor step);
  (4) band: the window mean lies in [band_low, band_high].
A sensor whose step is coarser than 2 × tolerance (NVML and coretemp: 1 °C
against ±0.3 °C) cannot show the tolerance directly: the rule then holds
only when the readings dither between adjacent steps (the sub-window means
of a dithering signal resolve finer than a step).  A reading that stays on
one value for the whole window says "steady within ± half a step" and
nothing finer: that is INCONCLUSIVE, never a silent PASS.
"""

from __future__ import annotations

import fcntl
import math
import os
import random
import tempfile
import threading
import time
from collections import deque
from contextlib import contextmanager
from typing import Any, Callable, Deque, Dict, Iterator, List, Optional, Tuple

SUBWINDOWS = 4
MIN_SAMPLES = 8
MAX_NA_RUN = 10

RULE = ("over the last {w:g} s of contiguous valid readings: |least-squares slope × {w:g} s| <= {tol:g} °C; "
        "each of 4 sub-window means within ±{tol:g} °C of the window mean; max - min <= max({tol2:g} °C, one "
        "sensor step of {step:g} °C); window mean in [{lo:g}, {hi:g}] °C. With a step coarser than {tol2:g} °C "
        "the readings must dither between adjacent steps; one constant value is INCONCLUSIVE.")


def rule_text(th: Dict[str, Any], step: float) -> str:
    return RULE.format(w=th["window_s"], tol=th["tolerance_c"], tol2=2 * th["tolerance_c"], step=step,
                       lo=th["band_low_c"], hi=th["band_high_c"])


class SteadyDetector:
    """Sliding-window statistics over (t, value) samples; every update is amortised O(1)."""

    def __init__(self, window_s: float, tolerance_c: float, band: Tuple[float, float], step_c: float):
        self.w, self.tol, self.band, self.step = window_s, tolerance_c, band, step_c
        self.reset()

    def reset(self) -> None:
        self.t: List[float] = []
        self.y: List[float] = []
        self.cum: List[float] = [0.0]
        self.start = 0
        self.bounds = [0] * (SUBWINDOWS - 1)
        self.n = 0
        self.st = self.sy = self.stt = self.sty = 0.0
        self.t0: Optional[float] = None
        self.maxq: Deque[int] = deque()
        self.minq: Deque[int] = deque()
        self.counts: Dict[float, int] = {}

    def add(self, t: float, value: Optional[float]) -> Dict[str, Any]:
        if value is None:  # a failed reading breaks contiguity: the window starts again
            self.reset()
            return {"ready": False, "steady": False, "reason": "sensor reading failed"}
        if self.t0 is None:
            self.t0 = t
        x = t - self.t0
        i = len(self.t)
        self.t.append(x)
        self.y.append(value)
        self.cum.append(self.cum[-1] + value)
        self.n += 1
        self.st += x
        self.sy += value
        self.stt += x * x
        self.sty += x * value
        self.counts[value] = self.counts.get(value, 0) + 1
        while self.maxq and self.y[self.maxq[-1]] <= value:
            self.maxq.pop()
        self.maxq.append(i)
        while self.minq and self.y[self.minq[-1]] >= value:
            self.minq.pop()
        self.minq.append(i)
        full = x - self.t[self.start] >= self.w
        while self.start < i and x - self.t[self.start + 1] >= self.w:  # keep exactly one sample at/over the edge
            self._drop(self.start)
            self.start += 1
            full = True
        while self.maxq[0] < self.start:
            self.maxq.popleft()
        while self.minq[0] < self.start:
            self.minq.popleft()
        return self.state(full)

    def _drop(self, j: int) -> None:
        x, v = self.t[j], self.y[j]
        self.n -= 1
        self.st -= x
        self.sy -= v
        self.stt -= x * x
        self.sty -= x * v
        self.counts[v] -= 1
        if not self.counts[v]:
            del self.counts[v]

    def state(self, full: bool) -> Dict[str, Any]:
        n = self.n
        end = len(self.t)
        mean = self.sy / n
        denom = n * self.stt - self.st * self.st
        slope = (n * self.sty - self.st * self.sy) / denom if denom > 1e-12 else 0.0
        drift = slope * self.w
        spread = self.y[self.maxq[0]] - self.y[self.minq[0]]
        # sub-window boundaries move forward only: amortised O(1)
        t_first = self.t[self.start]
        span = self.t[end - 1] - t_first
        sub_means = []
        prev = self.start
        for k in range(SUBWINDOWS - 1):
            edge = t_first + span * (k + 1) / SUBWINDOWS
            b = max(self.bounds[k], prev)
            while b < end and self.t[b] < edge:
                b += 1
            self.bounds[k] = b
            if b > prev:
                sub_means.append((self.cum[b] - self.cum[prev]) / (b - prev))
            prev = b
        if end > prev:
            sub_means.append((self.cum[end] - self.cum[prev]) / (end - prev))
        sub_ok = all(abs(m - mean) <= self.tol + 1e-9 for m in sub_means)
        coarse = self.step > 2 * self.tol
        spread_ok = spread <= max(2 * self.tol, self.step) + 1e-9
        distinct = len(self.counts)
        ready = full and n >= MIN_SAMPLES
        stable = ready and abs(drift) <= self.tol and sub_ok and spread_ok
        in_band = self.band[0] <= mean <= self.band[1]
        constant = coarse and distinct == 1
        return {"ready": ready, "steady": stable and not constant, "stable_constant": stable and constant,
                "in_band": in_band, "mean": mean, "drift": drift, "spread": spread, "sub_means": sub_means,
                "distinct_values": distinct, "samples": n, "window_start": self.t[self.start] + (self.t0 or 0.0),
                "last": self.y[-1]}


class ThermalController:
    """PI on the load's duty towards the band centre; inside a dead band the duty is held still."""

    def __init__(self, band: Tuple[float, float], kp: float = 0.02, ki: float = 0.0015, duty0: float = 0.5,
                 deadband_c: Optional[float] = None):
        self.target = (band[0] + band[1]) / 2
        self.deadband = deadband_c if deadband_c is not None else (band[1] - band[0]) / 4
        self.kp, self.ki, self.duty = kp, ki, duty0
        self._prev: Optional[float] = None

    def update(self, value: float, dt: float) -> float:
        err = self.target - value
        if abs(err) <= self.deadband:
            self._prev = err
            return self.duty
        d = 0.0 if self._prev is None else err - self._prev
        self._prev = err
        self.duty = min(1.0, max(0.0, self.duty + self.kp * d + self.ki * err * dt))
        return self.duty


class ThermalPlant:
    """First-order thermal model in simulated time, with a quantised, noisy sensor.

    T_ss(duty) = ambient + r * (p_idle + duty * (p_max - p_idle)); dT/dt = (T_ss - T) / tau.
    """

    def __init__(self, ambient: float = 30.0, r: float = 0.06, p_idle: float = 100.0, p_max: float = 700.0,
                 tau: float = 40.0, step: float = 1.0, noise: float = 0.15, drift_c_per_s: float = 0.0,
                 fail_after_s: Optional[float] = None, seed: int = 7, t0: float = 0.0):
        self.ambient, self.r, self.p_idle, self.p_max, self.tau = ambient, r, p_idle, p_max, tau
        self.step, self.noise, self.drift = step, noise, drift_c_per_s
        self.fail_after = fail_after_s
        self.rng = random.Random(seed)
        self.now = t0
        self.t_start = t0
        self.duty = 0.0
        self.temp = ambient + r * p_idle

    def steady_temp(self, duty: float) -> float:
        return self.ambient + self.r * (self.p_idle + duty * (self.p_max - self.p_idle))

    def advance(self, dt: float) -> None:
        self.ambient += self.drift * dt
        target = self.steady_temp(self.duty)
        self.temp = target + (self.temp - target) * math.exp(-dt / self.tau)
        self.now += dt

    def read(self) -> Dict[str, Any]:
        if self.fail_after is not None and self.now - self.t_start >= self.fail_after:
            return {"t": self.now, "value_c": None, "error": "simulated: sensor returned N/A"}
        raw = self.temp + self.rng.gauss(0.0, self.noise)
        value = round(raw / self.step) * self.step if self.step else raw
        return {"t": self.now, "value_c": round(value, 6), "error": None}


class PlantRig:
    """A plant seen as sensor + load + clock, in simulated time (sleep advances the plant)."""

    def __init__(self, plant: ThermalPlant, sid: str, kind: str):
        self.plant = plant
        self.subject = sid
        self.sensor_info = {"id": sid, "kind": kind, "source": "simulated first-order thermal plant",
                            "resolution_c": plant.step, "label": sid}

    def read(self) -> Dict[str, Any]:
        return self.plant.read()

    def set_duty(self, duty: float) -> None:
        self.plant.duty = duty

    def clock(self) -> float:
        return self.plant.now

    def sleep(self, dt: float) -> None:
        self.plant.advance(dt)

    def evidence(self) -> Dict[str, Any]:
        return {"kind": "simulated", "duty_final": self.plant.duty}

    @contextmanager
    def load(self) -> Iterator["PlantRig"]:
        yield self


def calibrate(read: Callable[[], Dict[str, Any]], set_duty: Callable[[float], None], clock: Callable[[], float],
              sleep: Callable[[float], None], th: Dict[str, Any], step_c: float, sample_s: float = 1.0,
              progress: Optional[Callable[[Dict[str, Any]], None]] = None, progress_every_s: float = 10.0,
              duty0: float = 0.5) -> Dict[str, Any]:
    """Drive the load until the temperature is steady in band, or the timeout; return the trace."""
    band = (th["band_low_c"], th["band_high_c"])
    det = SteadyDetector(th["window_s"], th["tolerance_c"], band, step_c)
    ctl = ThermalController(band, duty0=duty0)
    set_duty(ctl.duty)
    t_start = clock()
    samples: List[Dict[str, Any]] = []
    na_run = 0
    stopped = "timeout"
    last_progress = -progress_every_s  # throttled on the wall clock: simulated time runs much faster
    last_t = t_start
    state: Dict[str, Any] = {}
    while clock() - t_start <= th["timeout_s"]:
        r = read()
        now = r["t"]
        state = det.add(now, r["value_c"])
        if r["value_c"] is None:
            na_run += 1
        else:
            na_run = 0
            set_duty(ctl.update(r["value_c"], now - last_t))
        last_t = now
        samples.append({"t": round(now - t_start, 3), "value_c": r["value_c"], "error": r.get("error"),
                        "duty": round(ctl.duty, 4)})
        if progress and time.monotonic() - last_progress >= progress_every_s:
            last_progress = time.monotonic()
            progress({"elapsed_s": now - t_start, "value_c": r["value_c"], "state": state, "band": band})
        if state.get("in_band") and (state.get("steady") or state.get("stable_constant")):
            stopped = "steady" if state["steady"] else "constant reading (sensor too coarse)"
            break
        if na_run >= MAX_NA_RUN:
            stopped = f"sensor failed {na_run} times in a row"
            break
        sleep(sample_s)
    return {"samples": samples, "stopped": stopped, "sample_s": sample_s, "step_c": step_c,
            "duration_s": round(clock() - t_start, 3), "final_duty": ctl.duty}


# --------------------------------------------------------------------------
# Loads and locks


class CpuLoad:
    """Numpy work in one thread per CPU, duty-cycled in 100 ms periods; always stops."""

    def __init__(self, cpus: List[int], duty: float = 0.5, period_s: float = 0.1):
        self.cpus, self.duty, self.period_s = cpus, duty, period_s
        self._stop = threading.Event()
        self._threads: List[threading.Thread] = []
        self.busy_s = [0.0] * len(cpus)
        self.started_at = self.stopped_at = 0.0

    def set_duty(self, duty: float) -> None:
        self.duty = min(1.0, max(0.0, duty))

    def _run(self, i: int) -> None:
        import numpy as np

        try:
            os.sched_setaffinity(0, [self.cpus[i]])
        except OSError:
            pass
        x = np.random.default_rng(i).random(1 << 16)
        while not self._stop.is_set():
            t0 = time.perf_counter()
            while time.perf_counter() - t0 < self.period_s * self.duty and not self._stop.is_set():
                np.sin(x, out=x)
            self.busy_s[i] += time.perf_counter() - t0
            rest = self.period_s - (time.perf_counter() - t0)
            if rest > 0:
                self._stop.wait(rest)

    def __enter__(self) -> "CpuLoad":
        self.started_at = time.time()
        self._threads = [threading.Thread(target=self._run, args=(i,), name=f"sits-cpuload-{i}", daemon=True)
                         for i in range(len(self.cpus))]
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=5)
        self.stopped_at = time.time()

    def evidence(self) -> Dict[str, Any]:
        dur = (self.stopped_at or time.time()) - self.started_at
        return {"kind": "cpu-numpy", "cpus": self.cpus, "duty_final": self.duty,
                "achieved_duty": round(sum(self.busy_s) / (dur * len(self.cpus)), 4) if dur > 0 else None,
                "alive": [t.name for t in self._threads if t.is_alive()]}


@contextmanager
def device_lock(device_id: str, directory: Optional[str] = None) -> Iterator[Dict[str, Any]]:
    """An exclusive lock per device across processes (xdist workers): two calibrations never overlap."""
    safe = "".join(c if c.isalnum() else "_" for c in device_id)
    path = os.path.join(directory or tempfile.gettempdir(), f"sits-thermal-{safe}.lock")
    t0 = time.time()
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield {"lock": path, "waited_s": round(time.time() - t0, 3)}
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
