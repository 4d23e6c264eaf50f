"""THERM-GPU-STEADY and THERM-CPU-STEADY: the steady-state rule as a pure online detector, and the checks,
which decide by replaying the trace through it.

:class:`SteadyDetector` is online, O(1) amortised per sample, and decides
within one sample of the criterion holding.  The calibration (a condition)
runs it while it steers a load; the check runs the same rule on the trace.

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

from collections import deque
from typing import Any, Deque, Dict, List, Optional, Tuple

from . import Finding, check
from .interval import AT_LEAST, AT_MOST, FAIL_, PASS_, combine, decide, describe, mean_interval
from ..verdict import ERROR, FAIL, INCONCLUSIVE, PASS, Verdict


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


def _unreadable(f: Finding, evidence: Dict[str, Any]) -> Optional[Verdict]:
    """The device is there but its temperature cannot be read or steered: undecided, never a SKIP."""
    if not evidence.get("unreadable"):
        return None
    return f(INCONCLUSIVE, f"{evidence['unreadable']}; the requirement cannot be decided here", evidence=evidence)


def _steady(f: Finding, trace: Dict[str, Any], sensor: Dict[str, Any], th: Dict[str, Any]) -> Verdict:
    """The steady rule on the trace, and the steady window's mean with its interval against the band."""
    step = float(sensor["resolution_c"])
    rule = rule_text(th, step)
    band = (th["band_low_c"], th["band_high_c"])
    samples = trace["samples"]
    ev: Dict[str, Any] = {"sensor": sensor, "rule": rule, "sensor_step_c": step, "trace": trace}
    valid = [s for s in samples if s["value_c"] is not None]
    failed = len(samples) - len(valid)
    series = {"title": f"{sensor['label']} temperature", "unit": "°C", "x": [s["t"] for s in valid],
              "y": [s["value_c"] for s in valid], "band": list(band), "mark_from": None}
    ev["series"] = [series]
    f.set(threshold=f"[{band[0]:g}, {band[1]:g}] °C, steady ±{th['tolerance_c']:g} °C for {th['window_s']:g} s",
          evidence=ev, method=rule)
    if not valid:
        return f(ERROR, f"the sensor never gave a reading ({samples[0]['error'] if samples else 'no sample'})")
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
        f.set(measured=round(st["mean"], 2), unit="°C")
        d = band_decision(st, th)
        ev["decision"] = d
        text += f"; window mean {describe(d, _c)}"
        if st.get("steady") and d["outcome"] != PASS_:
            return f(INCONCLUSIVE, f"{text}: the mean is in the band, its interval reaches beyond "
                     f"[{band[0]:g}, {band[1]:g}] °C", method=rule + " " + d["rule"])
        if st.get("steady"):
            if failed:
                text += f"; {failed} failed reading(s) earlier in the run (recorded in the trace)"
            return f(PASS, text)
        return f(INCONCLUSIVE, f"one constant reading of {st['mean']:g} °C for {th['window_s']:g} s: steady only "
                 f"within ±{step / 2:g} °C, and the sensor (step {step:g} °C) cannot resolve ±{th['tolerance_c']:g} °C")
    tail_na = 0
    for s in reversed(samples):
        if s["value_c"] is not None:
            break
        tail_na += 1
    if tail_na:
        last_err = samples[-1].get("error")
        return f(INCONCLUSIVE, f"the sensor stopped answering after {len(valid)} valid reading(s) ({tail_na} failed in "
                 f"a row: {last_err}); nothing can be decided")
    last = state if state.get("samples") else {}
    f.set(unit="°C")
    if last.get("ready") and not (abs(last["drift"]) <= th["tolerance_c"]):
        text = (f"did not settle within {th['timeout_s']:g} s: drifted {last['drift']:+.1f} °C over the last "
                f"{th['window_s']:g} s (now {last['last']:g} °C)")
    elif last.get("ready") and (last.get("steady") or last.get("stable_constant")) and not last.get("in_band"):
        text = (f"settled at {last['mean']:.1f} °C, outside the band [{band[0]:g}, {band[1]:g}] °C, with the load "
                f"at duty {trace.get('final_duty', 0):.2f}")
        d = band_decision(last, th)
        ev["decision"] = d
        text += f"; window mean {describe(d, _c)}"
        if d["outcome"] != FAIL_:
            return f(INCONCLUSIVE, f"{text}: the interval of the mean reaches into the band",
                     measured=round(last["mean"], 2), method=rule + " " + d["rule"])
    elif last.get("ready"):
        text = (f"did not settle within {th['timeout_s']:g} s: spread {last['spread']:g} °C, sub-window means "
                f"{', '.join(f'{m:.2f}' for m in last['sub_means'])} °C (now {last['last']:g} °C)")
    else:
        text = f"the run ended ({trace.get('stopped')}) before a full {th['window_s']:g} s window of readings"
    mean = last.get("mean")
    if "decision" not in ev and last.get("sub_means"):
        ev["decision"] = band_decision(last, th)
        text += f"; the last window's mean {describe(ev['decision'], _c)}"
    return f(FAIL, text, measured=round(mean, 2) if mean is not None else None,
             remediation="check the cooling (fan curves, airflow, inlet temperature, liquid loop flow) and the power "
                         "limits; if the cooling cannot reach the band, record it and adjust band_low_c/band_high_c in "
                         "the profile with the reason")


# --------------------------------------------------------------------------
# Decisions under noise (version 2)


def _c(x: float) -> str:
    return f"{x:.2f} °C"


def band_decision(state: Dict[str, Any], th: Dict[str, Any]) -> Dict[str, Any]:
    """The steady window's mean with the t-interval over its 4 sub-window means (batch means), decided against the
    band: within only when the whole interval is, outside only when the whole interval is."""
    stat = mean_interval(state.get("sub_means") or [], method="t-interval over batch means")
    ds = [decide(stat, float(th["band_low_c"]), AT_LEAST, show=_c, what="window mean"),
          decide(stat, float(th["band_high_c"]), AT_MOST, show=_c, what="window mean")]
    d = combine(ds)
    if any(x["outcome"] == FAIL_ for x in ds):
        d = next(x for x in ds if x["outcome"] == FAIL_)
    d["rule"] = (f"in band when the interval of the window mean lies within [{th['band_low_c']:g}, "
                 f"{th['band_high_c']:g}] °C, outside when it lies wholly beyond; otherwise INCONCLUSIVE")
    return d


@check("THERM-GPU-STEADY", version=2)
def check_gpu_steady(evidence: Dict[str, Any], thresholds: Dict[str, Any], f: Finding) -> Verdict:
    """THERM-GPU-STEADY: the steady rule, and the steady window's mean, with the t-interval over its sub-window
    means, inside the band (PASS), wholly outside it (FAIL), or neither (INCONCLUSIVE).  evidence: ``trace`` (the
    calibration's samples), ``sensor`` (id, resolution_c, label)."""
    return _unreadable(f, evidence) or _steady(f, evidence["trace"], evidence["sensor"], thresholds)


@check("THERM-CPU-STEADY", version=2)
def check_cpu_steady(evidence: Dict[str, Any], thresholds: Dict[str, Any], f: Finding) -> Verdict:
    """THERM-CPU-STEADY, one verdict per package; the rule and evidence as for THERM-GPU-STEADY."""
    return _unreadable(f, evidence) or _steady(f, evidence["trace"], evidence["sensor"], thresholds)
