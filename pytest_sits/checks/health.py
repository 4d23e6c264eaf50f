"""Deployment health, one verdict per device: DEP-ECC, DEP-ROWREMAP, DEP-THROTTLE, DEP-PERSIST, DEP-POWERCAP,
DEP-PCIE-ERRORS, DEP-XID, DEP-NVLINK-ERRORS (suite extensions: what DCGM's deployment level and node health checks
look at).

Every rule is stated in its verdict.  A field the device could not report is
never read as "fine": a limit that cannot be checked makes the verdict
INCONCLUSIVE with the reason the probe recorded.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from ..probes.health import CLOCK_EVENT_BITS, decode_reasons
from ..verdict import FAIL, INCONCLUSIVE, PASS, WARN, Verdict
from . import Finding, check

COUNT_KEYS = ("volatile_uncorrected", "aggregate_uncorrected", "volatile_corrected", "aggregate_corrected")

#: Clock-event reasons that mean the hardware is protecting itself (DEP-THROTTLE fails on them).
FAULT_REASONS = ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "sw_thermal_slowdown")
#: Fault reasons the board asserts whatever the load (an external power brake, the hardware's thermal alarm): one
#: active in an idle reading is a fault, not the load's effect.
IDLE_FAULTS = ("hw_power_brake_slowdown", "hw_thermal_slowdown")


def _errors_text(evidence: Dict[str, Any], fields: List[str]) -> str:
    errs = [f"{e['field']}: {e['error']}" for e in evidence.get("errors") or [] if e.get("field") in fields]
    return "; ".join(errs) or "not reported"


@check("DEP-ECC", version=2)
def check_ecc(evidence: Dict[str, Any], thresholds: Dict[str, Any], f: Finding) -> Verdict:
    """ECC on where the profile requires it; each error count within its limit (None: reported, not judged).
    A count over its limit fails even when the mode could not be read (version 2).

    evidence: ``ecc_mode_current``/``ecc_mode_pending`` (bool or None), ``counts`` {volatile|aggregate}_
    {corrected|uncorrected} (int or None), ``source``, ``errors`` (fields the probe could not read)."""
    counts = evidence.get("counts") or {}
    required = bool(thresholds["require_enabled"])
    limits = {k: thresholds[f"max_{k}"] for k in COUNT_KEYS}
    shown = ", ".join(f"{k.replace('_', ' ')} {counts.get(k) if counts.get(k) is not None else 'n/a'}"
                      for k in COUNT_KEYS)
    threshold = ("ECC enabled; " if required else "") + ", ".join(
        f"{k.replace('_', ' ')} <= {limits[k]}" for k in COUNT_KEYS if limits[k] is not None)
    measured = counts.get("volatile_uncorrected")
    mode = evidence.get("ecc_mode_current")
    pending = evidence.get("ecc_mode_pending")
    f.set(measured=measured, threshold=threshold, unit="errors", evidence=evidence,
          method=f"{evidence.get('source') or 'management library'}: ECC mode and total error counts")
    # Counted errors over a limit fail whatever else is unread: the count is the evidence.
    over = [f"{k.replace('_', ' ')} {counts[k]} > {limits[k]}" for k in COUNT_KEYS
            if limits[k] is not None and counts.get(k) is not None and counts[k] > limits[k]]
    if over:
        return f(FAIL, f"ECC error counts over the profile's limits: {'; '.join(over)} ({shown})",
                 remediation="drain the node; reset the GPU and watch whether the volatile count returns (`nvidia-smi "
                             "-q -d ECC,ROW_REMAPPER`); check DEP-ROWREMAP; an uncorrectable error that recurs after "
                             "a reset means an RMA")
    if mode is None and required:
        return f(INCONCLUSIVE, "the ECC mode could not be read: " + _errors_text(evidence, ["ecc_mode_current"]))
    if mode is False and required:
        if pending:
            return f(FAIL, "ECC is disabled now; enabling is pending a GPU reset",
                     remediation="reset the GPU (`nvidia-smi -r -i <index>` with no process on it) or reboot so the "
                                 "pending ECC mode takes effect")
        mode_text = evidence.get("ecc_mode_text")
        if mode_text is not None and str(evidence.get("source") or "").startswith("submitted ") \
                and "nvidia-smi" not in str(evidence.get("source")):
            # another vendor's tool: its own words, and its own fix
            return f(FAIL, f"ECC is disabled and the profile requires it ({evidence.get('source')} shows ECC Mode "
                           f"{mode_text})",
                     remediation="enable ECC with the vendor's tool where the card offers it; a card without ECC "
                                 "cannot meet the requirement (waive it in the profile with the reason)")
        return f(FAIL, "ECC is disabled and the profile requires it",
                 remediation="enable ECC (`nvidia-smi -e 1`), then reset the GPU or reboot; the suite only reads the "
                             "setting")
    unread = [k for k in COUNT_KEYS if limits[k] is not None and counts.get(k) is None]
    if unread and mode is not False:
        return f(INCONCLUSIVE, f"limited count(s) not readable: {', '.join(unread)} ("
                 + _errors_text(evidence, [f"ecc_{k}" for k in unread]) + ")")
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
        return f(WARN, f"{'; '.join(notes)} ({shown})")
    return f(PASS, f"ECC {'enabled' if mode else 'state n/a'}; {shown}")


@check("DEP-ROWREMAP")
def check_rowremap(evidence: Dict[str, Any], thresholds: Dict[str, Any], f: Finding) -> Verdict:
    """No pending row remap or page retirement (both need a reset), no remap failure, counts within limits.

    evidence: ``remapped_rows`` {correctable, uncorrectable, pending, failure} or None (pre-Ampere parts),
    ``retired_pages`` {sbe, dbe, total, pending} or None (Ampere and later remap rows instead)."""
    rows = evidence.get("remapped_rows")
    pages = evidence.get("retired_pages")
    lim_unc = thresholds["max_uncorrectable_remaps"]
    lim_cor = thresholds["max_correctable_remaps"]
    lim_pages = thresholds["max_retired_pages"]
    parts = []
    if rows:
        parts.append(f"remapped rows: {rows.get('correctable')} correctable, {rows.get('uncorrectable')} "
                     f"uncorrectable, pending {'yes' if rows.get('pending') else 'no'}, failure "
                     f"{'yes' if rows.get('failure') else 'no'}")
    total_pages = None
    if pages:
        total_pages = pages.get("total")
        if total_pages is None and (pages.get("sbe") is not None or pages.get("dbe") is not None):
            total_pages = (pages.get("sbe") or 0) + (pages.get("dbe") or 0)
        parts.append(f"retired pages: {total_pages if total_pages is not None else 'n/a'}, pending "
                     f"{'yes' if pages.get('pending') else 'no' if pages.get('pending') is False else 'n/a'}")
    shown = "; ".join(parts)
    threshold = "no pending remap or retirement, no remap failure" + "".join(
        f", {name} <= {lim}" for name, lim in (("uncorrectable remaps", lim_unc), ("correctable remaps", lim_cor),
                                               ("retired pages", lim_pages)) if lim is not None)
    f.set(threshold=threshold, evidence=dict(evidence, retired_pages_total=total_pages),
          method=evidence.get("source") or "management library")
    if not rows and not pages:
        return f(INCONCLUSIVE, "neither remapped rows nor retired pages could be read: "
                 + _errors_text(evidence, ["remapped_rows", "retired_pages_sbe", "retired_pages_dbe",
                                           "retired_pages_pending", "bad_pages"]))
    f.set(measured=(rows or {}).get("uncorrectable") if rows else total_pages)
    reset = ("reset the GPU (`nvidia-smi -r -i <index>` with no process on it, or reboot) so the pending "
             "remap/retirement takes effect; until then the bad memory stays in use")
    if rows and rows.get("failure"):
        return f(FAIL, f"row remapping failed: a bank ran out of spare rows ({shown})",
                 remediation="drain the node and RMA the GPU: a remapping failure is not recoverable in the field")
    if rows and rows.get("pending"):
        return f(FAIL, f"a row remap is pending ({shown})", remediation=reset)
    if pages and pages.get("pending"):
        return f(FAIL, f"a page retirement is pending ({shown})", remediation=reset)
    over = []
    if rows and lim_unc is not None and (rows.get("uncorrectable") or 0) > lim_unc:
        over.append(f"uncorrectable remaps {rows['uncorrectable']} > {lim_unc}")
    if rows and lim_cor is not None and (rows.get("correctable") or 0) > lim_cor:
        over.append(f"correctable remaps {rows['correctable']} > {lim_cor}")
    if lim_pages is not None and total_pages is not None and total_pages > lim_pages:
        over.append(f"retired pages {total_pages} > {lim_pages}")
    if over:
        return f(FAIL, f"{'; '.join(over)} ({shown})",
                 remediation="drain the node; the memory has used up the spares the profile allows: RMA the GPU "
                             "(attach `nvidia-smi -q -d ROW_REMAPPER,PAGE_RETIREMENT`)")
    return f(PASS, shown)


def _share(samples: List[Dict[str, Any]], name: str) -> float:
    bit = CLOCK_EVENT_BITS[name]
    return sum(1 for s in samples if int(s["reasons"]) & bit) / len(samples)


def _fixes(faults: List[str]) -> List[str]:
    """What to look at for the fault reasons named."""
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


@check("DEP-THROTTLE", version=2)
def check_throttle(evidence: Dict[str, Any], thresholds: Dict[str, Any], f: Finding) -> Verdict:
    """Clock-event reasons sampled while the suite's load runs: the share of loaded samples in which HW
    slowdown, HW thermal, HW power brake or SW thermal slowdown was active stays within ``max_fault_share``
    (default 0); SW power cap is reported, and judged when the profile sets ``max_sw_power_cap_share``.  A
    sample with the GPU-idle reason set does not count as loaded, and an idle reading decides only a fault the
    board asserts whatever the load (IDLE_FAULTS: the power brake, HW thermal slowdown): active idle, it FAILs
    (version 1: an idle reading never decided).

    evidence: ``samples`` [{t, reasons (bitmask or None), under_load}], ``load`` (what the load did)."""
    samples = evidence.get("samples") or []
    max_fault = float(thresholds["max_fault_share"])
    max_cap = thresholds["max_sw_power_cap_share"]
    valid = [s for s in samples if s.get("reasons") is not None]
    loaded = [s for s in valid if s.get("under_load") and not int(s["reasons"]) & CLOCK_EVENT_BITS["gpu_idle"]]
    threshold = (f"share of loaded samples with {', '.join(FAULT_REASONS)} <= {max_fault:g}"
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
        faults = [n for n in FAULT_REASONS if n in seen]
        idle_faults = [n for n in IDLE_FAULTS if n in seen]
        if idle_faults:
            lines = [s for s in valid if any(int(s["reasons"]) & CLOCK_EVENT_BITS[n] for n in idle_faults)]
            also = [n for n in faults if n not in idle_faults]
            return f(FAIL, f"{', '.join(idle_faults)} active without load ({len(lines)} of {len(valid)} idle "
                     f"reading(s); {why}): the board asserts it whatever the load, a fault, not the load's effect"
                     + (f"; also active: {', '.join(also)}" if also else ""),
                     measured=round(len(lines) / len(valid), 4), remediation="; ".join(_fixes(idle_faults)))
        look = (f"; {', '.join(faults)} active even without load: {'; '.join(_fixes(faults))}" if faults else "")
        return f(INCONCLUSIVE, f"no reading under load ({why}); idle readings showed {', '.join(seen) or 'no reason'}, "
                 f"and an idle reading never decides{look}")
    fault_share = sum(1 for s in loaded if any(int(s["reasons"]) & CLOCK_EVENT_BITS[n] for n in FAULT_REASONS)) \
        / len(loaded)
    ev["fault_share"] = round(fault_share, 4)
    active = ", ".join(f"{n} {shares[n]:.0%}" for n in CLOCK_EVENT_BITS if shares.get(n)) or "none"
    text = f"{len(loaded)} loaded samples; active: {active}"
    f.set(measured=round(fault_share, 4))
    if fault_share > max_fault:
        return f(FAIL, f"the hardware slowed its clocks under load in {fault_share:.0%} of samples: {text}",
                 remediation="; ".join(_fixes([n for n in FAULT_REASONS if shares.get(n)])))
    hidden = [n for n in evidence.get("reasons_not_shown") or [] if n.lower().replace(" ", "_") in FAULT_REASONS]
    if hidden:  # a text cut before some reasons: what it does not show cannot pass
        return f(INCONCLUSIVE, f"{text}; but the text does not show {', '.join(hidden)} (cut), so a slowdown cannot be "
                 "ruled out")
    if max_cap is not None and shares.get("sw_power_cap", 0) > float(max_cap):
        return f(FAIL, f"SW power cap active in {shares['sw_power_cap']:.0%} of loaded samples (> {float(max_cap):.0%}): "
                 f"{text}", measured=shares["sw_power_cap"],
                 remediation="the enforced power limit holds the clocks down: see DEP-POWERCAP and `nvidia-smi -q -d "
                             "POWER`")
    return f(PASS, text)


@check("DEP-PERSIST")
def check_persistence(evidence: Dict[str, Any], thresholds: Dict[str, Any], f: Finding) -> Verdict:
    """Persistence mode is what the profile expects (``expected``, default on).

    evidence: ``persistence_mode`` (bool or None), ``errors``."""
    want = bool(thresholds["expected"])
    got = evidence.get("persistence_mode")
    threshold = "enabled" if want else "disabled"
    f.set(threshold=threshold, evidence=evidence, method="nvmlDeviceGetPersistenceMode")
    if got is None:
        return f(INCONCLUSIVE, "persistence mode could not be read: " + _errors_text(evidence, ["persistence_mode"]))
    state = "enabled" if got else "disabled"
    if bool(got) != want:
        fix = ("run the persistence daemon: `systemctl enable --now nvidia-persistenced` (the suite only reads the "
               "setting); without it the driver tears the GPU state down whenever no client holds it, adding "
               "seconds to every start and losing clocks/ECC state" if want else
               f"stop nvidia-persistenced, or set {f.requirement} expected: true in the profile")
        return f(FAIL, f"persistence mode is {state}; the profile expects it {threshold}", measured=state,
                 remediation=fix)
    return f(PASS, f"persistence mode {state}", measured=state)


def _w(mw: Optional[float]) -> Optional[float]:
    return round(mw / 1000.0, 1) if mw is not None else None


@check("DEP-POWERCAP")
def check_powercap(evidence: Dict[str, Any], thresholds: Dict[str, Any], f: Finding) -> Verdict:
    """The enforced power limit is the profile's TDP within ``tolerance`` (read only: the suite never sets it).

    evidence: ``enforced_mw``, ``requested_mw``, ``default_mw``, ``constraints_mw`` [min, max]; thresholds:
    ``tdp_w`` (profile fact), ``tolerance`` (share)."""
    tdp = thresholds.get("tdp_w")
    tol = float(thresholds["tolerance"])
    enforced, requested, default = (_w(evidence.get(k)) for k in ("enforced_mw", "requested_mw", "default_mw"))
    cons = evidence.get("constraints_mw") or [None, None]
    lo, hi = _w(cons[0]), _w(cons[1])
    known = [f"{k} {v} W" for k, v in (("requested", requested), ("default", default)) if v is not None]
    if lo is not None and hi is not None:
        known.append(f"settable {lo}-{hi} W")
    shown = f"enforced {enforced} W" + (f" ({', '.join(known)})" if known else "")
    threshold = f">= {tdp} W × (1 - {tol:g})" if tdp else "the profile's TDP"
    f.set(threshold=threshold, unit="W", evidence=evidence,
          method="nvmlDeviceGetEnforcedPowerLimit against the profile's hardware.tdp_w")
    if enforced is None:
        return f(INCONCLUSIVE, "the enforced power limit could not be read: "
                 + _errors_text(evidence, ["power_limit_enforced_mw"]))
    f.set(measured=enforced)
    if not tdp:
        return f(WARN, f"the profile gives no TDP to compare with; {shown}")
    if enforced < tdp * (1 - tol):
        if requested is not None and default is not None and requested < default * (1 - tol):
            why = f"someone lowered the limit to {requested} W (default {default} W)"
            fix = f"restore the default limit (`nvidia-smi -i <index> -pl {default:g}`, as root) and find what set it"
        elif hi is not None and hi < tdp * (1 - tol):
            why = f"the board allows at most {hi} W: a lower-power SKU or a baseboard cap"
            fix = "check the SKU and the baseboard/OEM power configuration, or set hardware.tdp_w for this board"
        else:
            why = "an external cap is in force (BMC or chassis power capping, or a module limit)"
            fix = "check the BMC/chassis power policy (Redfish PowerControl, `ipmitool dcmi power get_limit`)"
        return f(FAIL, f"enforced limit {enforced} W is below the profile's TDP {tdp} W: {why}; {shown}", remediation=fix)
    if enforced > tdp * (1 + tol):
        return f(WARN, f"enforced limit {enforced} W is above the profile's TDP {tdp} W; {shown}")
    return f(PASS, shown)


def _delta(before: Optional[Dict[str, Any]], after: Optional[Dict[str, Any]], key: str) -> Optional[int]:
    if not before or not after or before.get(key) is None or after.get(key) is None:
        return None
    return int(after[key]) - int(before[key])


@check("DEP-PCIE-ERRORS")
def check_pcie_errors(evidence: Dict[str, Any], thresholds: Dict[str, Any], f: Finding) -> Verdict:
    """No new fatal or non-fatal AER errors and no new PCIe replays during the run (limits from the profile);
    errors counted since boot are reported, and make the verdict WARN.

    evidence: ``aer_before``/``aer_after`` (totals per kind, or None with ``aer_reason``), ``replay_before``/
    ``replay_after`` (NVML replay counter, or None with ``replay_reason``), ``window_s``."""
    if evidence.get("aer_log") is not None:
        return _pcie_errors_in_log(evidence, thresholds, f)
    before, after = evidence.get("aer_before"), evidence.get("aer_after")
    limits = {"fatal": thresholds["max_new_fatal"], "nonfatal": thresholds["max_new_nonfatal"],
              "correctable": thresholds["max_new_correctable"]}
    max_replays = thresholds["max_new_replays"]
    new = {k: _delta(before, after, k) for k in limits}
    rb, ra = evidence.get("replay_before"), evidence.get("replay_after")
    new_replays = ra - rb if ra is not None and rb is not None else None
    ev = dict(evidence, new_aer=new, new_replays=new_replays)
    threshold = ", ".join([f"new {k} <= {v}" for k, v in limits.items() if v is not None]
                          + ([f"new replays <= {max_replays}"] if max_replays is not None else []))
    f.set(threshold=threshold, unit="errors", evidence=ev,
          method=f"AER counters (sysfs) and the NVML replay counter before and after a {evidence.get('window_s', '?')} "
                 "s loaded window")
    if all(v is None for v in new.values()) and new_replays is None:
        return f(INCONCLUSIVE, f"no PCIe error counter readable: AER: {evidence.get('aer_reason')}; replay counter: "
                 f"{evidence.get('replay_reason')}")
    shown = ", ".join(f"{k} +{v}" for k, v in new.items() if v is not None)
    shown += (", " if shown else "") + (f"replays +{new_replays}" if new_replays is not None else "replays n/a")
    over = [f"{k} +{new[k]} > {lim}" for k, lim in limits.items() if lim is not None and new[k] is not None
            and new[k] > lim]
    if max_replays is not None and new_replays is not None and new_replays > max_replays:
        over.append(f"replays +{new_replays} > {max_replays}")
    if over:
        return f(FAIL, f"PCIe errors during the run: {'; '.join(over)} (new: {shown})",
                 measured=sum(v for v in new.values() if v) + (new_replays or 0),
                 remediation="reseat the card and its riser/retimer cables, check the slot's signal integrity settings "
                             "in the BIOS; `lspci -vvv -s <bdf>` shows the AER status, and the kernel log names the "
                             "failing TLPs")
    since_boot = after or before or {}
    serious = {k: since_boot.get(k) for k in ("fatal", "nonfatal") if since_boot.get(k)}
    missing = [] if after else [f"AER ({evidence.get('aer_reason')})"]
    if new_replays is None:
        missing.append(f"replays ({evidence.get('replay_reason')})")
    tail = f"; not read: {', '.join(missing)}" if missing else ""
    if serious:
        return f(WARN, f"no new errors during the run (new: {shown}), but since boot: "
                 + ", ".join(f"{k} {v}" for k, v in serious.items()) + tail, measured=0)
    return f(PASS, f"no PCIe errors during the run (new: {shown}){tail}", measured=0)


def _pcie_errors_in_log(evidence: Dict[str, Any], thresholds: Dict[str, Any], f: Finding) -> Verdict:
    """DEP-PCIE-ERRORS on a submitted kernel log: the AER errors its lines record for the device are the errors
    of the period it covers, held to the same limits; the replay counter is one reading (since the GPU's reset)
    and is reported, not judged."""
    subject = f.subject
    log = evidence["aer_log"]
    counts = log.get("counts") or {}
    limits = {"fatal": thresholds["max_new_fatal"], "nonfatal": thresholds["max_new_nonfatal"],
              "correctable": thresholds["max_new_correctable"]}
    threshold = ", ".join(f"{k} <= {v}" for k, v in limits.items() if v is not None) + " in the log"
    files = ", ".join(log.get("files") or [])
    replay = evidence.get("replay_reading")
    tail = f"; replay counter {replay} since the GPU's reset (one reading, not judged)" if replay is not None else ""
    f.set(threshold=threshold, unit="errors", evidence=evidence,
          method=f"AER lines (PCIe Bus Error / error received) naming the device in the submitted kernel log ({files}, "
                 f"{log.get('records')} lines)")
    shown = ", ".join(f"{k} {counts.get(k, 0)}" for k in ("fatal", "nonfatal", "correctable"))
    over = [f"{k} {counts.get(k, 0)} > {lim}" for k, lim in limits.items() if lim is not None
            and counts.get(k, 0) > lim]
    if over:
        first = (log.get("lines") or [""])[0][:160]
        return f(FAIL, f"the submitted kernel log records PCIe errors of {subject}: {'; '.join(over)} ({shown}; first: "
                 f"{first}){tail}", measured=sum(counts.values()),
                 remediation="reseat the card and its riser/retimer cables, check the slot's signal integrity settings "
                             f"in the BIOS; the log's lines name the failing TLPs (`lspci -vvv -s {subject}` shows the "
                             "AER status)")
    return f(PASS, f"no fatal or non-fatal AER error of {subject} in the submitted kernel log ({shown}){tail}", measured=0)


XID_HINTS = {
    79: "the GPU fell off the bus: reseat it, check its power cables and slot; drain and RMA if it recurs",
    48: "double-bit ECC error: see DEP-ECC and DEP-ROWREMAP, reset the GPU",
    63: "a row remap or page retirement was recorded: reset the GPU (DEP-ROWREMAP)",
    64: "a row remap or page retirement failed: drain the node and RMA the GPU",
    74: "NVLink error: check `nvidia-smi nvlink -e`, the baseboard and fabric manager",
    92: "high single-bit ECC error rate: watch DEP-ECC, plan an RMA",
    94: "contained ECC error: the application was stopped; reset the GPU",
    95: "uncontained ECC error: reset the GPU (or reboot) before any further use",
    119: "GSP firmware timeout: update the driver, reset the GPU",
    120: "GSP firmware error: update the driver, reset the GPU",
}


@check("DEP-XID")
def check_xid(evidence: Dict[str, Any], thresholds: Dict[str, Any], f: Finding) -> Verdict:
    """No critical XID during the run (NVML events while the load ran); the kernel log's history since boot is
    reported (WARN on a critical XID there, FAIL when the profile says ``fail_on_history``).  Either source
    alone can pass the run: the kernel log since boot also covers the run.

    evidence: ``watch`` {source, reason, events [{xid}]}; ``history`` {readable, source, reason, xids [{xid}]}."""
    critical = set(int(x) for x in thresholds["critical_xids"])
    limit = int(thresholds["max_critical_events"])
    watch = evidence.get("watch") or {}
    hist = evidence.get("history") or {}
    events = watch.get("events") if watch.get("source") else None
    hist_xids = hist.get("xids") if hist.get("readable") else None
    threshold = f"<= {limit} critical XID(s) during the run (critical: {', '.join(map(str, sorted(critical)))})"
    f.set(threshold=threshold, unit="events", evidence=evidence,
          method=f"{watch.get('source') or 'no event watch'}; kernel log: {hist.get('source') or 'unreadable'}")
    if events is None and hist_xids is None:
        return f(INCONCLUSIVE, f"no XID source: event watch: {watch.get('reason')}; kernel log: {hist.get('reason')}")
    period = watch.get("period") or "during the run"  # submitted evidence: the period its kernel log covers
    during = [e for e in events or [] if int(e["xid"]) in critical]
    if len(during) > limit:
        xids = sorted({int(e["xid"]) for e in during})
        hint = "; ".join(XID_HINTS.get(x, f"XID {x}: see NVIDIA's XID catalogue") for x in xids)
        first = f" (first: {str(during[0]['line'])[:160]})" if during[0].get("line") else ""
        return f(FAIL, f"{len(during)} critical XID event(s) {period}: {', '.join(f'XID {x}' for x in xids)}{first}",
                 measured=len(during), remediation=hint)
    past = [x for x in hist_xids or [] if int(x["xid"]) in critical]
    other = sorted({int(e["xid"]) for e in events or [] if int(e["xid"]) not in critical})
    if past:
        xids = sorted({int(x["xid"]) for x in past})
        text = (f"no critical XID during the run, but the kernel log since boot holds {len(past)}: "
                f"{', '.join(f'XID {x}' for x in xids)} (first: {past[0].get('line', '')[:160]})")
        if thresholds["fail_on_history"]:
            return f(FAIL, text, measured=len(past),
                     remediation="; ".join(XID_HINTS.get(x, f"XID {x}: see NVIDIA's XID catalogue") for x in xids))
        return f(WARN, text, measured=0)
    sources = []
    if events is not None and watch.get("period"):
        sources.append(f"{len(events)} XID line(s) for this device {period}")
    elif events is not None:
        sources.append(f"NVML events during {watch.get('window_s', '?')} s: {len(events)} XID(s)")
    else:
        sources.append(f"no event watch ({watch.get('reason')})")
    if hist_xids is not None:
        sources.append(f"kernel log since boot: {len(hist_xids)} XID line(s) for this device, none critical")
    elif not watch.get("period"):  # a submitted log is the watch itself
        sources.append(f"kernel log unreadable ({hist.get('reason')})")
    if other:
        return f(WARN, f"non-critical XID(s) {period}: {', '.join(map(str, other))}; " + "; ".join(sources), measured=0)
    return f(PASS, "no critical XID: " + "; ".join(sources), measured=0)


#: The NVLink counters DEP-NVLINK-ERRORS judges, each against its threshold key: CRC errors of flits and of data
#: together, replays, recoveries.
NVLINK_JUDGED = {"crc": ("crc_flit", "crc_data"), "replay": ("replay",), "recovery": ("recovery",)}


def _nvlink_totals(reading: Optional[Dict[str, Any]]) -> Dict[str, Dict[str, Optional[int]]]:
    """Per link, each judged total (None where no counter of it was read)."""
    out: Dict[str, Dict[str, Optional[int]]] = {}
    for link, counters in ((reading or {}).get("links") or {}).items():
        row: Dict[str, Optional[int]] = {}
        for name, parts in NVLINK_JUDGED.items():
            got = [int(c) for c in (counters.get(p) for p in parts if isinstance(counters, dict)) if c is not None]
            row[name] = sum(got) if got else None
        out[str(link)] = row
    return out


def _nvlink_shown(per_link: Dict[str, Dict[str, Optional[int]]], sign: str = "") -> str:
    nonzero = [f"link {k}: " + ", ".join(f"{n} {sign}{v}" for n, v in row.items() if v)
               for k, row in per_link.items() if any(row.values())]
    return "; ".join(nonzero[:6]) + ("; ..." if len(nonzero) > 6 else "") if nonzero else "every count 0"


@check("DEP-NVLINK-ERRORS")
def check_nvlink_errors(evidence: Dict[str, Any], thresholds: Dict[str, Any], f: Finding) -> Verdict:
    """No NVLink CRC, replay or recovery error counter grows during the health window.

    evidence: ``before`` and ``after`` ({links: {link: {replay, recovery, crc_flit, crc_data}}}) around the
    window's load; or ``reading``: one reading (a submitted ``nvidia-smi nvlink -e``, a snapshot), counts since
    the counters were last reset."""
    limits = {name: thresholds[f"max_new_{name}"] for name in NVLINK_JUDGED}
    judged = {n: lim for n, lim in limits.items() if lim is not None}
    threshold = ", ".join(f"new {n} <= {lim}" for n, lim in judged.items()) or "reported, not judged"
    source = evidence.get("source")
    if "reading" in evidence:
        now = _nvlink_totals(evidence["reading"])
        total = {n: sum(r[n] or 0 for r in now.values()) for n in judged}
        f.set(threshold=threshold, unit="errors", evidence=dict(evidence, per_link=now, totals=total),
              measured=sum(total.values()),
              method="one reading: counts since the counters were last reset; all zero shows that none grew, any "
                     "count cannot tell when it grew")
        unread = [n for n in judged if all(r[n] is None for r in now.values())]
        if unread:
            return f(INCONCLUSIVE, f"{', '.join(unread)} counters are not in {source}; {_nvlink_shown(now)}")
        if any(total.values()):
            return f(INCONCLUSIVE, f"{_nvlink_shown(now)} since the counters were last reset ({source}): one reading "
                     "cannot tell whether they grew during the run; submit `nvidia-smi nvlink -e` captured before "
                     "and after a load (or reset the counters with `nvidia-smi nvlink -r`, run, and capture again)")
        if evidence["reading"].get("cut"):
            return f(INCONCLUSIVE, f"{source} was elided: the links it hides are not known (the {len(now)} shown: "
                     f"{_nvlink_shown(now)})")
        return f(PASS, f"{len(now)} active link(s), every judged counter 0 since the last reset ({source})")
    before, after = _nvlink_totals(evidence.get("before")), _nvlink_totals(evidence.get("after"))
    new: Dict[str, Dict[str, Optional[int]]] = {}
    for link, row in after.items():
        was = before.get(link) or {}
        new[link] = {}
        for n, v in row.items():
            w = was.get(n)
            new[link][n] = v - w if v is not None and w is not None else None
    totals = {n: sum(r[n] or 0 for r in new.values()) for n in NVLINK_JUDGED}
    f.set(threshold=threshold, unit="errors", evidence=dict(evidence, new_per_link=new, new_totals=totals),
          measured=sum(totals[n] for n in judged),
          method="each active link's counters read before and after the health window's load; growth is judged")
    over = [f"{n} +{totals[n]} (> {lim})" for n, lim in judged.items() if totals[n] > lim]
    if over:
        return f(FAIL, f"NVLink errors during the health window: {'; '.join(over)} ({_nvlink_shown(new, '+')})",
                 remediation="inspect the NVLink path of the named links (baseboard, NVSwitch, bridge): "
                             "`nvidia-smi nvlink -e` and `dcgmi diag -r 3`; growing recovery errors, or CRC errors "
                             "that persist after a reseat, warrant an RMA")
    unread = [n for n in judged if all(r[n] is None for r in new.values())]
    if unread:
        why = "; ".join(((evidence.get("after") or {}).get("unread") or [])[:3])
        return f(INCONCLUSIVE, f"{', '.join(unread)} counters not readable on this device ({why})")
    return f(PASS, f"{len(new)} active link(s): no judged counter grew "
             f"(new: {', '.join(f'{n} {v}' for n, v in totals.items())})")


# --------------------------------------------------------------------------
# A submitted ``dcgmi diag`` (conditions/health.py submitted_dcgmi): DCGM's own result of the diagnostic that reads
# the requirement's subject, for one GPU.  A Fail (or an Error message naming the GPU) is a FAIL; a Skip is not a
# pass; a Pass decides only where DCGM checks what the requirement asks.

def _dcgmi(ev: Dict[str, Any], f: Finding, pass_means: Optional[str], why_not: str, fix: str) -> Verdict:
    where = f"{ev['file']} (dcgmi diag{' ' + ev['version'] if ev.get('version') else ''}, GPU {ev['gpu']})"
    shown = "; ".join(f"{t['name']}: {'/'.join(t['status'])} (line {t['line']})" for t in ev["tests"])
    msgs = [m for m in ev["messages"] if m["kind"] == "errors"]
    warns = [m for m in ev["messages"] if m["kind"] == "warnings"]
    f.set(evidence=ev, method="DCGM's own diagnostic result for the GPU, as dcgmi diag printed it"
                              + (f"; GPU matched by {ev['match_rule']}" if ev.get("match_rule") else ""))
    statuses = {s for t in ev["tests"] for s in t["status"]}
    if msgs or "fail" in statuses:
        text = "; ".join([f"{m['text']} (line {m['line']})" for m in msgs] + ([shown] if shown else []))
        return f(FAIL, f"DCGM reports {text} — {where}", measured="fail", remediation=fix)
    if "warn" in statuses or warns:
        return f(INCONCLUSIVE, f"DCGM warns: {'; '.join(m['text'] for m in warns) or shown} — {where}",
                 measured="warn")
    if statuses and statuses <= {"skip"}:
        return f(INCONCLUSIVE, f"DCGM skipped it ({shown}): a skip is not a pass — {where}", measured="skip")
    if "pass" in statuses:
        if pass_means is None:
            return f(INCONCLUSIVE, f"DCGM's {shown} — {where}; {why_not}", measured="pass")
        return f(PASS, f"{pass_means} ({shown}) — {where}", measured="pass")
    return f(INCONCLUSIVE, f"no result of DCGM for this GPU ({shown or 'none'}) — {where}")


@check("DEP-PERSIST/dcgmi", requirement="DEP-PERSIST", version=1)
def check_persistence_dcgmi(evidence: Dict[str, Any], thresholds: Dict[str, Any], f: Finding) -> Verdict:
    """DCGM's "Persistence Mode" check passes when persistence mode is enabled: a PASS where the profile expects it
    enabled, a FAIL where it expects it disabled; a Fail is a FAIL where the profile expects it enabled."""
    want = bool(thresholds["expected"])
    f.set(threshold="enabled" if want else "disabled")
    if not want:
        statuses = {s for t in evidence["tests"] for s in t["status"]}
        if "pass" in statuses and "fail" not in statuses:
            return f(FAIL, f"DCGM's Persistence Mode check passed (persistence enabled) on {evidence['file']}; the "
                     "profile expects it disabled", evidence=evidence, measured="enabled",
                     remediation=f"stop nvidia-persistenced, or set {f.requirement} expected: true in the profile")
        return f(INCONCLUSIVE, "DCGM's Persistence Mode check did not pass: the profile expects it disabled, and "
                 "DCGM fails it for other reasons too", evidence=evidence)
    return _dcgmi(evidence, f, "persistence mode enabled", "",
                  "run the persistence daemon: `systemctl enable --now nvidia-persistenced`")


@check("DEP-ROWREMAP/dcgmi", requirement="DEP-ROWREMAP", version=1)
def check_rowremap_dcgmi(evidence: Dict[str, Any], thresholds: Dict[str, Any], f: Finding) -> Verdict:
    """DCGM's "Page Retirement/Row Remap" check (pending remaps or retirements, remap failures) and its Error
    messages naming them: a FAIL on either; a Pass is a PASS only where the profile sets no count limit (DCGM's
    result gives no counts)."""
    limits = [k for k in ("max_uncorrectable_remaps", "max_correctable_remaps", "max_retired_pages")
              if thresholds.get(k) is not None]
    f.set(threshold="no pending remap or retirement, no remap failure" + (f"; {', '.join(limits)}" if limits else ""))
    return _dcgmi(evidence, f, None if limits else "no pending row remap or page retirement, no remap failure",
                  f"DCGM's result gives no counts to hold against the profile's {', '.join(limits)}",
                  "reset the GPU (`nvidia-smi -r`, or reboot) so that the pending remap/retirement takes effect; "
                  "drain the node and RMA the GPU if a remap failed")


@check("DEP-ECC/dcgmi", requirement="DEP-ECC", version=1)
def check_ecc_dcgmi(evidence: Dict[str, Any], thresholds: Dict[str, Any], f: Finding) -> Verdict:
    """DCGM's memory test ("GPU Memory", "Memtest") and Error messages naming uncorrectable memory errors: a FAIL
    on either; a Pass never passes DEP-ECC (the ECC mode and counts are not in DCGM's result)."""
    f.set(threshold="ECC enabled, error counts within the profile's limits")
    return _dcgmi(evidence, f, None, "the ECC mode and error counts are not in DCGM's result (submit "
                                     "`nvidia-smi -q -d ECC`)",
                  "drain the node; read `nvidia-smi -q -d ECC,ROW_REMAPPER` and RMA the GPU if uncorrectable errors "
                  "recur")

