"""Earlier versions of the deployment-health checks (:mod:`pytest_sits.checks.health`), kept for replay."""

from __future__ import annotations

from typing import Any, Dict, List

from ...verdict import FAIL, INCONCLUSIVE, PASS, WARN, Verdict
from ...probes.health import CLOCK_EVENT_BITS, decode_reasons
from .. import Finding, check


# Frozen copies of the helpers these versions used: an edit of the current checks never changes an old verdict.

COUNT_KEYS = ("volatile_uncorrected", "aggregate_uncorrected", "volatile_corrected", "aggregate_corrected")


def _errors_text(evidence: Dict[str, Any], fields: List[str]) -> str:
    errs = [f"{e['field']}: {e['error']}" for e in evidence.get("errors") or [] if e.get("field") in fields]
    return "; ".join(errs) or "not reported"


@check("DEP-ECC", version=1, legacy=True)
def check_ecc_v1(evidence: Dict[str, Any], thresholds: Dict[str, Any], subject: str = "") -> Verdict:
    """Version 1 (reports of pytest-sits 0.1), kept so that they replay.

    ECC on where the profile requires it; each error count within its limit (None: reported, not judged).

    evidence: ``ecc_mode_current``/``ecc_mode_pending`` (bool or None), ``counts`` {volatile|aggregate}_
    {corrected|uncorrected} (int or None), ``source``, ``errors`` (fields the probe could not read)."""
    req = "DEP-ECC"
    counts = evidence.get("counts") or {}
    required = bool(thresholds.get("require_enabled", True))
    limits = {k: thresholds.get(f"max_{k}") for k in COUNT_KEYS}
    shown = ", ".join(f"{k.replace('_', ' ')} {counts.get(k) if counts.get(k) is not None else 'n/a'}"
                      for k in COUNT_KEYS)
    threshold = ("ECC enabled; " if required else "") + ", ".join(
        f"{k.replace('_', ' ')} <= {limits[k]}" for k in COUNT_KEYS if limits[k] is not None)
    measured = counts.get("volatile_uncorrected")
    mode = evidence.get("ecc_mode_current")
    pending = evidence.get("ecc_mode_pending")
    common: Dict[str, Any] = dict(measured=measured, threshold=threshold, unit="errors", subject=subject, evidence=evidence,
                  method=f"{evidence.get('source') or 'management library'}: ECC mode and total error counts")
    if mode is None and required:
        return Verdict(req, INCONCLUSIVE, "the ECC mode could not be read: "
                       + _errors_text(evidence, ["ecc_mode_current"]), **common)
    if mode is False and required:
        if pending:
            return Verdict(req, FAIL, "ECC is disabled now; enabling is pending a GPU reset", **common,
                           remediation="reset the GPU (`nvidia-smi -r -i <index>` with no process on it) or reboot "
                                       "so the pending ECC mode takes effect")
        return Verdict(req, FAIL, "ECC is disabled and the profile requires it", **common,
                       remediation="enable ECC (`nvidia-smi -e 1`), then reset the GPU or reboot; the suite only "
                                   "reads the setting")
    over = [f"{k.replace('_', ' ')} {counts[k]} > {limits[k]}" for k in COUNT_KEYS
            if limits[k] is not None and counts.get(k) is not None and counts[k] > limits[k]]
    if over:
        return Verdict(req, FAIL, f"ECC error counts over the profile's limits: {'; '.join(over)} ({shown})",
                       **common, remediation="drain the node; reset the GPU and watch whether the volatile count "
                                             "returns (`nvidia-smi -q -d ECC,ROW_REMAPPER`); check DEP-ROWREMAP; an "
                                             "uncorrectable error that recurs after a reset means an RMA")
    unread = [k for k in COUNT_KEYS if limits[k] is not None and counts.get(k) is None]
    if unread and mode is not False:
        return Verdict(req, INCONCLUSIVE, f"limited count(s) not readable: {', '.join(unread)} ("
                       + _errors_text(evidence, [f"ecc_{k}" for k in unread]) + ")", **common)
    notes = []
    if mode is False:
        notes.append("ECC is disabled (the profile does not require it)")
    if pending is not None and mode is not None and pending != mode:
        notes.append(f"ECC mode change pending a reset ({'on' if pending else 'off'} after reset)")
    unc = [k for k in ("volatile_uncorrected", "aggregate_uncorrected")
           if limits[k] is None and (counts.get(k) or 0) > 0]
    if unc:
        notes.append("uncorrected errors, not limited by the profile: "
                     + ", ".join(f"{k.replace('_', ' ')} {counts[k]}" for k in unc))
    if notes:
        return Verdict(req, WARN, f"{'; '.join(notes)} ({shown})", **common)
    return Verdict(req, PASS, f"ECC {'enabled' if mode else 'state n/a'}; {shown}", **common)


_FAULT_REASONS_V1 = ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "sw_thermal_slowdown")


def _share(samples: List[Dict[str, Any]], name: str) -> float:
    bit = CLOCK_EVENT_BITS[name]
    return sum(1 for s in samples if int(s["reasons"]) & bit) / len(samples)


def _fixes(faults: List[str]) -> List[str]:
    fixes = []
    if "hw_power_brake_slowdown" in faults:
        fixes.append("power brake is asserted by the board or chassis: check PSU redundancy and input power, "
                     "BMC power capping, and the baseboard's power-brake signal")
    if "hw_thermal_slowdown" in faults or "sw_thermal_slowdown" in faults:
        fixes.append("thermal slowdown: check inlet temperature, fan profile, airflow and heatsink contact")
    if "hw_slowdown" in faults and not fixes:
        fixes.append("HW slowdown without a thermal or brake cause: check the power supply and the board's "
                     "external slowdown signal (`nvidia-smi -q -d PERFORMANCE`)")
    return fixes


@check("DEP-THROTTLE", version=1, legacy=True)
def check_throttle_v1(evidence: Dict[str, Any], thresholds: Dict[str, Any], subject: str = "") -> Verdict:
    """Clock-event reasons sampled while the suite's load runs: the share of loaded samples in which HW
    slowdown, HW thermal, HW power brake or SW thermal slowdown was active stays within ``max_fault_share``
    (default 0); SW power cap is reported, and judged when the profile sets ``max_sw_power_cap_share``.  A
    sample with the GPU-idle reason set does not count as loaded, and an idle reading never decides.

    evidence: ``samples`` [{t, reasons (bitmask or None), under_load}], ``load`` (what the load did).  Version 1,
    kept so that its reports replay: a fault reason active in an idle reading never decided."""
    f = Finding("DEP-THROTTLE", subject)
    samples = evidence.get("samples") or []
    max_fault = float(thresholds["max_fault_share"])
    max_cap = thresholds["max_sw_power_cap_share"]
    valid = [s for s in samples if s.get("reasons") is not None]
    loaded = [s for s in valid if s.get("under_load") and not int(s["reasons"]) & CLOCK_EVENT_BITS["gpu_idle"]]
    threshold = (f"share of loaded samples with {', '.join(_FAULT_REASONS_V1)} <= {max_fault:g}"
                 + (f"; SW power cap <= {max_cap:g}" if max_cap is not None else ""))
    rule = ("clock-event reasons read while the suite's load ran; samples with the GPU-idle reason are not "
            "loaded; shares are over loaded samples")
    shares = {name: round(_share(loaded, name), 4) for name in CLOCK_EVENT_BITS} if loaded else {}
    ev = dict(evidence, loaded_samples=len(loaded), shares=shares)
    f.set(threshold=threshold, unit="share of samples", evidence=ev, method=rule)
    if not valid:
        why = (evidence.get("errors") or [{}])[0].get("error") if evidence.get("errors") else None
        return f(INCONCLUSIVE, f"no clock-event reading ({why or 'the field is not reported'})")
    if not loaded:
        seen = sorted({n for s in valid for n in decode_reasons(s["reasons"]) or []})
        load = evidence.get("load") or {}
        why = load.get("reason") or load.get("error") or ("the GPU reported itself idle in every sample"
                                                         if any(s.get("under_load") for s in valid) else "no load")
        faults = [n for n in _FAULT_REASONS_V1 if n in seen]
        look = (f"; {', '.join(faults)} active even without load: {'; '.join(_fixes(faults))}" if faults else "")
        return f(INCONCLUSIVE, f"no reading under load ({why}); idle readings showed {', '.join(seen) or 'no reason'}, "
                 f"and an idle reading never decides{look}")
    fault_share = sum(1 for s in loaded if any(int(s["reasons"]) & CLOCK_EVENT_BITS[n] for n in _FAULT_REASONS_V1)) \
        / len(loaded)
    ev["fault_share"] = round(fault_share, 4)
    active = ", ".join(f"{n} {shares[n]:.0%}" for n in CLOCK_EVENT_BITS if shares.get(n)) or "none"
    text = f"{len(loaded)} loaded samples; active: {active}"
    f.set(measured=round(fault_share, 4))
    if fault_share > max_fault:
        return f(FAIL, f"the hardware slowed its clocks under load in {fault_share:.0%} of samples: {text}",
                 remediation="; ".join(_fixes([n for n in _FAULT_REASONS_V1 if shares.get(n)])))
    hidden = [n for n in evidence.get("reasons_not_shown") or [] if n.lower().replace(" ", "_") in _FAULT_REASONS_V1]
    if hidden:  # a text cut before some reasons: what it does not show cannot pass
        return f(INCONCLUSIVE, f"{text}; but the text does not show {', '.join(hidden)} (cut), so a slowdown cannot be "
                 "ruled out")
    if max_cap is not None and shares.get("sw_power_cap", 0) > float(max_cap):
        return f(FAIL, f"SW power cap active in {shares['sw_power_cap']:.0%} of loaded samples (> {float(max_cap):.0%}): "
                 f"{text}", measured=shares["sw_power_cap"],
                 remediation="the enforced power limit holds the clocks down: see DEP-POWERCAP and `nvidia-smi -q -d "
                             "POWER`")
    return f(PASS, text)
