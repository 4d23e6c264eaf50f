"""Verdicts: what a check decided, with the evidence it decided on.

This is the verdict layer: the statuses, the :class:`Verdict` record, the
waiver rule and the worst-status rule.  The plugin, ``sits audit-text`` and
``sits replay`` all apply waivers and pick the worst verdict through the
functions below, so a verdict means the same wherever it is decided.
"""

from __future__ import annotations

import math

from dataclasses import asdict, dataclass, field
from typing import Any, Dict, Iterable, List, Optional

PASS, FAIL, WARN, SKIP, INCONCLUSIVE, WAIVED, ERROR = (
    "PASS", "FAIL", "WARN", "SKIP", "INCONCLUSIVE", "WAIVED", "ERROR")
STATUSES = (PASS, FAIL, WARN, SKIP, INCONCLUSIVE, WAIVED, ERROR)

STATUS_MEANING = {
    PASS: "measured and within the threshold",
    FAIL: "measured and outside the threshold: the hardware does not conform",
    WARN: "conforms, but something deserves a look (e.g. no threshold set by the profile)",
    SKIP: "the hardware or feature is absent; the reason says what was expected and found",
    INCONCLUSIVE: "measured, but too noisy or too coarse to decide; never a silent pass",
    WAIVED: "would not pass, and the profile waives it with a written reason",
    ERROR: "a probe broke: nothing could be decided",
}

#: Worst first: the status that decides a test recording several verdicts.
SEVERITY = (ERROR, FAIL, INCONCLUSIVE, WARN, PASS, WAIVED, SKIP)
#: The statuses a profile waiver turns into WAIVED: a decided non-conformance.  A probe that broke (ERROR) or a
#: measurement that could not decide (INCONCLUSIVE) is never waived: that would let a run conform unmeasured.
WAIVABLE = (FAIL, WARN)


@dataclass
class Verdict:
    requirement: str
    status: str
    reason: str
    measured: Any = None
    threshold: Any = None
    unit: Optional[str] = None
    subject: str = "host"
    remediation: Optional[str] = None
    evidence: Dict[str, Any] = field(default_factory=dict)
    method: Optional[str] = None
    #: ``{"name": ..., "version": ...}`` of the registered check that decided it (None: not replayable).
    check: Optional[Dict[str, Any]] = None
    #: The thresholds the check was given (what the profile demanded), kept for replay.
    thresholds: Optional[Dict[str, Any]] = None

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown verdict status {self.status!r}")
        if self.status == FAIL and not self.remediation:
            raise ValueError(f"{self.requirement}: a FAIL verdict needs a remediation hint")

    def to_json(self) -> Dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Dict[str, Any]) -> Verdict:
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        return cls(**known)


def apply_waiver(verdict: Verdict, waiver: Optional[str]) -> Verdict:
    """The verdict as recorded under a profile waiver (``waiver``: its written reason, or None)."""
    if not waiver or verdict.status not in WAIVABLE:
        return verdict
    return Verdict(verdict.requirement, WAIVED, f"{verdict.status} waived by profile: {verdict.reason}",
                   verdict.measured, verdict.threshold, verdict.unit, verdict.subject, None,
                   dict(verdict.evidence, waived_status=verdict.status), verdict.method, verdict.check,
                   verdict.thresholds)


def find_band(baseline: Any, requirement: str, subject: str, unit: Optional[str]) -> Optional[Dict[str, Any]]:
    """The band of a profile's ``fleet_baseline`` section (``sits baseline``) for one measured value, or None."""
    if not isinstance(baseline, dict):
        return None
    for b in baseline.get("bands") or []:
        if (isinstance(b, dict) and b.get("requirement") == requirement and b.get("subject") == subject
                and (b.get("unit") or None) == (unit or None)):
            return dict(b, sku=baseline.get("sku"), fleet_nodes=baseline.get("nodes"), source=baseline.get("source"))
    return None


def apply_fleet_band(verdict: Verdict, band: Optional[Dict[str, Any]]) -> Verdict:
    """The verdict under the fleet's band for its measured value (``sits baseline``): a PASS whose value lies
    outside the band of the nodes of its SKU becomes WARN, with the band and the fleet size.  The absolute
    thresholds stay the floor: a FAIL stays FAIL, and no other status changes."""
    x = verdict.measured
    if not band or verdict.status != PASS or isinstance(x, bool) or not isinstance(x, (int, float)):
        return verdict
    lo, hi = band.get("low"), band.get("high")
    if not isinstance(lo, (int, float)) or not isinstance(hi, (int, float)) or lo <= x <= hi:
        return verdict
    unit = f" {verdict.unit}" if verdict.unit else ""
    why = (f"{verdict.reason}; but {x:g}{unit} is outside the fleet band [{lo:g}, {hi:g}] of the "
           f"{band.get('nodes')} {band.get('sku')} nodes of its baseline (median {band.get('median'):g}); the "
           "absolute threshold is met, this node is unlike its fleet")
    return Verdict(verdict.requirement, WARN, why, verdict.measured, verdict.threshold, verdict.unit,
                   verdict.subject, None, dict(verdict.evidence, fleet_band=band), verdict.method, verdict.check,
                   verdict.thresholds)


def worst(statuses: Iterable[str]) -> str:
    """The status that decides: ERROR > FAIL > INCONCLUSIVE > WARN > PASS > WAIVED > SKIP."""
    return min(statuses, key=SEVERITY.index)


def worst_verdicts(verdicts: List[Verdict]) -> List[Verdict]:
    """The verdicts that carry the worst status among ``verdicts``."""
    w = worst(v.status for v in verdicts)
    return [v for v in verdicts if v.status == w]


def number(value: float) -> str:
    """A number as people read it: up to 4 significant digits, never in exponent form between 1e-4 and 1e12
    (309,600 rather than 3.096e+05), thousands separated."""
    a = abs(value)
    if value != value or a in (float("inf"),):
        return str(value)
    if a == 0:
        return "0"
    if a >= 1e12 or a < 1e-4:
        return f"{value:.4g}"
    if a >= 1000:
        return f"{value:,.0f}"
    digits = max(0, 3 - int(math.floor(math.log10(a))))
    text = f"{value:.{digits}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text
