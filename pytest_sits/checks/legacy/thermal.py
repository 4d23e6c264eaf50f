"""Earlier versions of THERM-GPU-STEADY and THERM-CPU-STEADY (:mod:`pytest_sits.checks.thermal`), kept for
replay."""

from __future__ import annotations

from collections import deque
from typing import Any, Deque, Dict, List, Optional, Tuple

from ...verdict import ERROR, FAIL, INCONCLUSIVE, PASS, Verdict
from .. import check


# Frozen copies of the helpers these versions used: an edit of the current checks never changes an old verdict.

SUBWINDOWS = 4

MIN_SAMPLES = 8

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


def _unreadable(req: str, evidence: Dict[str, Any], subject: str) -> Optional[Verdict]:
    """The device is there but its temperature cannot be read or steered: undecided, never a SKIP."""
    if not evidence.get("unreadable"):
        return None
    return Verdict(req, INCONCLUSIVE, f"{evidence['unreadable']}; the requirement cannot be decided here",
                   subject=subject, evidence=evidence)


def _steady(req: str, trace: Dict[str, Any], sensor: Dict[str, Any], th: Dict[str, Any], subject: str) -> Verdict:
    """The steady rule as version 1 decided it (no interval: the window mean against the band)."""
    step = float(sensor["resolution_c"])
    rule = rule_text(th, step)
    band = (th["band_low_c"], th["band_high_c"])
    threshold = f"[{band[0]:g}, {band[1]:g}] °C, steady ±{th['tolerance_c']:g} °C for {th['window_s']:g} s"
    samples = trace["samples"]
    ev = {"sensor": sensor, "rule": rule, "sensor_step_c": step, "trace": trace}
    valid = [s for s in samples if s["value_c"] is not None]
    failed = len(samples) - len(valid)
    series = {"title": f"{sensor['label']} temperature", "unit": "°C", "x": [s["t"] for s in valid],
              "y": [s["value_c"] for s in valid], "band": list(band), "mark_from": None}
    ev["series"] = [series]
    if not valid:
        return Verdict(req, ERROR, f"the sensor never gave a reading ({samples[0]['error'] if samples else 'no sample'})",
                       threshold=threshold, subject=subject, evidence=ev, method=rule)
    det = SteadyDetector(th["window_s"], th["tolerance_c"], band, step)
    state: Dict[str, Any] = {}
    decided = None
    for s in samples:
        state = det.add(s["t"], s["value_c"])
        if state.get("in_band") and (state.get("steady") or state.get("stable_constant")):
            decided = (s, dict(state))
            break
    resolution = (f"sensor step {step:g} °C" + (f" is coarser than the ±{th['tolerance_c']:g} °C band: decided on "
                                                 "slope and sub-window means of dithering readings"
                                                 if step > 2 * th["tolerance_c"] else ""))
    if decided:
        s, st = decided
        series["mark_from"] = round(st["window_start"], 3)
        ev["steady_window"] = {"start_s": series["mark_from"], "end_s": s["t"], "mean_c": round(st["mean"], 3),
                               "drift_c": round(st["drift"], 3), "spread_c": st["spread"],
                               "sub_means_c": [round(m, 3) for m in st["sub_means"]],
                               "distinct_values": st["distinct_values"]}
        text = (f"steady at {st['mean']:.2f} °C from {series['mark_from']:.0f} s to {s['t']:.0f} s: drift "
                f"{st['drift']:+.2f} °C, spread {st['spread']:g} °C; {resolution}")
        if st.get("steady"):
            if failed:
                text += f"; {failed} failed reading(s) earlier in the run (recorded in the trace)"
            return Verdict(req, PASS, text, measured=round(st["mean"], 2), threshold=threshold, unit="°C",
                           subject=subject, evidence=ev, method=rule)
        return Verdict(req, INCONCLUSIVE, f"one constant reading of {st['mean']:g} °C for {th['window_s']:g} s: "
                       f"steady only within ±{step / 2:g} °C, and the sensor (step {step:g} °C) cannot resolve "
                       f"±{th['tolerance_c']:g} °C", measured=round(st["mean"], 2), threshold=threshold, unit="°C",
                       subject=subject, evidence=ev, method=rule)
    tail_na = 0
    for s in reversed(samples):
        if s["value_c"] is not None:
            break
        tail_na += 1
    if tail_na:
        last_err = samples[-1].get("error")
        return Verdict(req, INCONCLUSIVE, f"the sensor stopped answering after {len(valid)} valid reading(s) "
                       f"({tail_na} failed in a row: {last_err}); nothing can be decided",
                       threshold=threshold, subject=subject, evidence=ev, method=rule)
    last = state if state.get("samples") else {}
    if last.get("ready") and not (abs(last["drift"]) <= th["tolerance_c"]):
        text = (f"did not settle within {th['timeout_s']:g} s: drifted {last['drift']:+.1f} °C over the last "
                f"{th['window_s']:g} s (now {last['last']:g} °C)")
    elif last.get("ready") and (last.get("steady") or last.get("stable_constant")) and not last.get("in_band"):
        text = (f"settled at {last['mean']:.1f} °C, outside the band [{band[0]:g}, {band[1]:g}] °C, with the load "
                f"at duty {trace.get('final_duty', 0):.2f}")
    elif last.get("ready"):
        text = (f"did not settle within {th['timeout_s']:g} s: spread {last['spread']:g} °C, sub-window means "
                f"{', '.join(f'{m:.2f}' for m in last['sub_means'])} °C (now {last['last']:g} °C)")
    else:
        text = f"the run ended ({trace.get('stopped')}) before a full {th['window_s']:g} s window of readings"
    mean = last.get("mean")
    return Verdict(req, FAIL, text, measured=round(mean, 2) if mean is not None else None, threshold=threshold,
                   unit="°C", subject=subject, evidence=ev, method=rule,
                   remediation="check the cooling (fan curves, airflow, inlet temperature, liquid loop flow) and "
                               "the power limits; if the cooling cannot reach the band, record it and adjust "
                               "band_low_c/band_high_c in the profile with the reason")


@check("THERM-GPU-STEADY", version=1, legacy=True)
def check_gpu_steady_v1(evidence: Dict[str, Any], thresholds: Dict[str, Any], subject: str = "") -> Verdict:
    """Version 1, kept so that older reports replay: the window mean against the band, no interval.
    evidence: ``trace`` (the calibration's samples), ``sensor`` (id, resolution_c, label)."""
    return _unreadable("THERM-GPU-STEADY", evidence, subject) or _steady(
        "THERM-GPU-STEADY", evidence["trace"], evidence["sensor"], thresholds, subject)


@check("THERM-CPU-STEADY", version=1, legacy=True)
def check_cpu_steady_v1(evidence: Dict[str, Any], thresholds: Dict[str, Any], subject: str = "") -> Verdict:
    """Version 1, kept so that older reports replay; evidence as for THERM-GPU-STEADY."""
    return _unreadable("THERM-CPU-STEADY", evidence, subject) or _steady(
        "THERM-CPU-STEADY", evidence["trace"], evidence["sensor"], thresholds, subject)
