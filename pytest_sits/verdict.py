"""Verdicts: what a check decided, with the evidence it decided on."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Dict, Optional

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

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown verdict status {self.status!r}")
        if self.status == FAIL and not self.remediation:
            raise ValueError(f"{self.requirement}: a FAIL verdict needs a remediation hint")

    def to_json(self) -> Dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Dict[str, Any]) -> "Verdict":
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        return cls(**known)
