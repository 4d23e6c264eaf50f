"""THERM-GPU-STEADY and THERM-CPU-STEADY, decided by replaying the trace through the detector."""

from __future__ import annotations

from typing import Any, Dict, Optional

from . import check
from ..verdict import ERROR, FAIL, INCONCLUSIVE, PASS, Verdict
from .steady import SteadyDetector, rule_text


@check("THERM-GPU-STEADY")
def check_gpu_steady(evidence: Dict[str, Any], thresholds: Dict[str, Any], subject: str = "") -> Verdict:
    """THERM-GPU-STEADY.  evidence: ``trace`` (the calibration's samples), ``sensor`` (id, resolution_c, label)."""
    return _unreadable("THERM-GPU-STEADY", evidence, subject) or _steady(
        "THERM-GPU-STEADY", evidence["trace"], evidence["sensor"], thresholds, subject)


@check("THERM-CPU-STEADY")
def check_cpu_steady(evidence: Dict[str, Any], thresholds: Dict[str, Any], subject: str = "") -> Verdict:
    """THERM-CPU-STEADY, one verdict per package; evidence as for THERM-GPU-STEADY."""
    return _unreadable("THERM-CPU-STEADY", evidence, subject) or _steady(
        "THERM-CPU-STEADY", evidence["trace"], evidence["sensor"], thresholds, subject)


def _unreadable(req: str, evidence: Dict[str, Any], subject: str) -> Optional[Verdict]:
    """The device is there but its temperature cannot be read or steered: undecided, never a SKIP."""
    if not evidence.get("unreadable"):
        return None
    return Verdict(req, INCONCLUSIVE, f"{evidence['unreadable']}; the requirement cannot be decided here",
                   subject=subject, evidence=evidence)


def _steady(req: str, trace: Dict[str, Any], sensor: Dict[str, Any], th: Dict[str, Any], subject: str) -> Verdict:
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
