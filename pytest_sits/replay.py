"""``sits replay``: recompute every verdict of a stored report from its evidence, with the same checks.

A verdict records the check that decided it (name and version), the
thresholds it was given and its evidence; replay calls the registered check
again on exactly that, applies the profile's waiver, and compares status,
measured value and reason.  With ``--profile FILE`` the thresholds and waivers
come from that profile instead (what would a stricter profile have said?).
A verdict that was not decided by a check (the test raised first) is listed
as not replayable, with why.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from .checks import REGISTRY, load_all
from .verdict import apply_waiver

COMPARED = ("status", "measured", "reason", "subject")


_NON_FINITE = {"inf": float("inf"), "-inf": float("-inf"), "nan": float("nan")}


def revive(value: Any) -> Any:
    """Undo the report's JSON-safe encoding of non-finite numbers ("inf", "-inf", "nan" strings, which strict
    JSON cannot hold as numbers), so a check sees the numbers it saw when it decided."""
    if isinstance(value, str):
        return _NON_FINITE.get(value, value)
    if isinstance(value, dict):
        return {k: revive(v) for k, v in value.items()}
    if isinstance(value, list):
        return [revive(v) for v in value]
    return value


def _waiver(waivers: List[Dict[str, Any]], req: str) -> Optional[str]:
    for w in waivers or []:
        if isinstance(w, dict) and w.get("id") == req:
            return w.get("reason")
    return None


def replay_verdict(stored: Dict[str, Any], profile: Any = None,
                   waivers: Optional[List[Dict[str, Any]]] = None) -> Dict[str, Any]:
    """Recompute one stored verdict: {"verdict": Verdict} or {"why": reason it cannot be replayed}."""
    chk = stored.get("check")
    if not isinstance(chk, dict) or not chk.get("name"):
        why = (stored.get("evidence") or {}).get("replayable") if isinstance(stored.get("evidence"), dict) else None
        return {"why": why or "no check recorded: the verdict was not decided by a registered check"}
    entry = REGISTRY.get(chk["name"])
    if entry is None:
        return {"why": f"check {chk['name']!r} is not known to this version of pytest-sits"}
    if entry.version != chk.get("version"):
        return {"why": f"decided by version {chk.get('version')} of check {chk['name']!r}; this suite has version "
                       f"{entry.version}"}
    evidence = stored.get("evidence")
    if not isinstance(evidence, dict):
        return {"why": "the evidence was not stored"}
    thresholds = profile.check_thresholds(entry.requirement) if profile is not None else stored.get("thresholds")
    if not isinstance(thresholds, dict):
        return {"why": "the thresholds were not stored"}
    evidence = revive({k: v for k, v in evidence.items() if k != "waived_status"})
    thresholds = revive(thresholds)
    try:
        v = entry.fn(evidence, thresholds, stored.get("subject") or "")
    except Exception as exc:  # evidence edited into something the check cannot read
        return {"why": f"the check could not read the stored evidence: {type(exc).__name__}: {exc}"}
    waiver = profile.waiver(entry.requirement) if profile is not None else _waiver(waivers or [], entry.requirement)
    return {"verdict": apply_waiver(v, waiver)}


def replay_report(report: Dict[str, Any], profile_path: Optional[str] = None) -> Dict[str, Any]:
    """Replay every verdict of a report; list those that differ and those that cannot be replayed."""
    from .recorder import plain

    load_all()
    profile = None
    if profile_path:
        from .profiles import resolve

        profile = resolve(profile_path)
    waivers = ((report.get("profile") or {}).get("data") or {}).get("waivers") or []
    differs, not_replayable, replayed = [], [], 0
    verdicts = report.get("verdicts") or []
    for i, stored in enumerate(verdicts):
        if not isinstance(stored, dict):
            not_replayable.append({"index": i, "requirement": None, "subject": None, "why": "not a verdict object"})
            continue
        out = replay_verdict(stored, profile, waivers)
        if "why" in out:
            not_replayable.append({"index": i, "requirement": stored.get("requirement"),
                                   "subject": stored.get("subject"), "why": out["why"]})
            continue
        replayed += 1
        now = plain(out["verdict"].to_json())
        for f in COMPARED:
            if now.get(f) != stored.get(f):
                differs.append({"index": i, "requirement": stored.get("requirement"),
                                "subject": stored.get("subject"), "field": f, "stored": stored.get(f),
                                "now": now.get(f)})
    return {"total": len(verdicts), "replayed": replayed, "differs": differs, "not_replayable": not_replayable,
            "profile": profile_path}
