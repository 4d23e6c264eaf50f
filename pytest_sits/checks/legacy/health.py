"""Earlier versions of the deployment-health checks (:mod:`pytest_sits.checks.health`), kept for replay."""

from __future__ import annotations

from typing import Any, Dict, List

from ...verdict import FAIL, INCONCLUSIVE, PASS, WARN, Verdict
from .. import check


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
