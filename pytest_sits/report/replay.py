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

from ..checks import REGISTRY, load_all
from ..verdict import STATUSES, apply_fleet_band, apply_waiver, find_band
from .model import coverage, plain, revive, summarise

COMPARED = ("status", "measured", "reason", "subject")


def _waiver(waivers: List[Dict[str, Any]], req: str) -> Optional[str]:
    for w in waivers or []:
        if isinstance(w, dict) and w.get("id") == req:
            return w.get("reason")
    return None


def replay_verdict(stored: Dict[str, Any], profile: Any = None,
                   waivers: Optional[List[Dict[str, Any]]] = None, baseline: Any = None) -> Dict[str, Any]:
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
    evidence = revive({k: v for k, v in evidence.items() if k not in ("waived_status", "fleet_band")})
    thresholds = revive(thresholds)
    try:
        v = entry.fn(evidence, thresholds, stored.get("subject") or "")
    except Exception as exc:  # evidence edited into something the check cannot read
        return {"why": f"the check could not read the stored evidence: {type(exc).__name__}: {exc}"}
    band = (profile.fleet_band(v.requirement, v.subject, v.unit) if profile is not None
            else find_band(baseline, v.requirement, v.subject, v.unit))
    v = apply_fleet_band(v, band)
    waiver = profile.waiver(entry.requirement) if profile is not None else _waiver(waivers or [], entry.requirement)
    return {"verdict": apply_waiver(v, waiver)}


def replay_report(report: Dict[str, Any], profile_path: Optional[str] = None) -> Dict[str, Any]:
    """Replay every verdict of a report; list those that differ and those that cannot be replayed."""
    load_all()
    profile = None
    if profile_path:
        from ..profiles import resolve

        profile = resolve(profile_path)
    waivers = ((report.get("profile") or {}).get("data") or {}).get("waivers") or []
    baseline = ((report.get("profile") or {}).get("data") or {}).get("fleet_baseline")
    differs, not_replayable, replayed = [], [], 0
    verdicts = report.get("verdicts") or []
    # The verdicts as they stand now: replayed ones recomputed, the others as stored.
    now_verdicts: List[Any] = list(verdicts)
    for i, stored in enumerate(verdicts):
        if not isinstance(stored, dict):
            not_replayable.append({"index": i, "requirement": None, "subject": None, "why": "not a verdict object"})
            continue
        out = replay_verdict(stored, profile, waivers, baseline)
        if "why" in out:
            not_replayable.append({"index": i, "requirement": stored.get("requirement"),
                                   "subject": stored.get("subject"), "why": out["why"]})
            continue
        replayed += 1
        now = plain(out["verdict"].to_json())
        now_verdicts[i] = now
        for f in COMPARED:
            if now.get(f) != stored.get(f):
                differs.append({"index": i, "requirement": stored.get("requirement"),
                                "subject": stored.get("subject"), "field": f, "stored": stored.get(f),
                                "now": now.get(f)})
    # A verdict that claims anything better than ERROR must be replayable: stripping the check record from a
    # PASS would otherwise have it taken on trust.
    unbacked = [n for n in not_replayable
                if isinstance(verdicts[n["index"]], dict) and verdicts[n["index"]].get("status") != "ERROR"]
    return {"total": len(verdicts), "replayed": replayed, "differs": differs, "not_replayable": not_replayable,
            "unbacked": unbacked, "profile": profile_path,
            "summary": _summary_differs(report, [v for v in now_verdicts if isinstance(v, dict)
                                                 and v.get("status") in STATUSES
                                                 and isinstance(v.get("requirement"), str)])}


def _summary_differs(report: Dict[str, Any], now_verdicts: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """The run's result and counts recomputed from the replayed verdicts, where they differ from the stored
    ones; and requirements whose stored coverage does not match the verdicts the report holds."""
    run = report.get("run") if isinstance(report.get("run"), dict) else {}
    plat = report.get("platform") if isinstance(report.get("platform"), dict) else {}
    stored = report.get("summary") if isinstance(report.get("summary"), dict) else {}
    level = run.get("level") if run.get("level") in ("quick", "standard", "full") else "quick"
    collected = {r.get("requirement"): r.get("state") for r in report.get("coverage") or []
                 if isinstance(r, dict) and r.get("state") in ("DESELECTED", "COLLECTED", "NOT_SELECTED")}
    rows = coverage(now_verdicts, level, collected)
    now = summarise(now_verdicts, bool(run.get("completed", True)), bool(plat.get("simulated")), rows, level,
                    str(plat.get("kind", "live")))
    out = []
    for f in ("result", "counts"):
        if stored.get(f) != now.get(f):
            out.append({"field": f"summary.{f}", "stored": stored.get(f), "now": now.get(f)})
    stored_rows = {r.get("requirement"): r for r in report.get("coverage") or [] if isinstance(r, dict)}
    for r in rows:
        old = stored_rows.get(r["requirement"], {})
        if sorted(old.get("statuses") or []) != sorted(r["statuses"]):
            out.append({"field": f"coverage.{r['requirement']}", "stored": old.get("statuses"), "now": r["statuses"]})
    return out
