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

from typing import Any, Dict, List, Optional, cast

from ..checks import REGISTRY, get_version, load_all
from ..checks.environment import apply_environment
from ..verdict import STATUSES, apply_fleet_band, apply_waiver, find_band
from .model import as_object, coverage, plain, revive, summarise

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
    current = REGISTRY.get(chk["name"])
    if current is None:
        return {"why": f"check {chk['name']!r} is not known to this version of pytest-sits"}
    entry = get_version(chk["name"], chk.get("version"))
    if entry is None:
        return {"why": f"decided by version {chk.get('version')} of check {chk['name']!r}; this suite has version "
                       f"{current.version}"}
    if entry.derived_thresholds and profile is not None:
        return {"why": f"decided by version {entry.version} of check {chk['name']!r}, which was given thresholds "
                       "derived per subject: it replays only with its stored thresholds (without --profile)"}
    evidence = stored.get("evidence")
    if not isinstance(evidence, dict):
        return {"why": "the evidence was not stored"}
    thresholds = profile.check_thresholds(entry.requirement) if profile is not None else stored.get("thresholds")
    if not isinstance(thresholds, dict):
        return {"why": "the thresholds were not stored"}
    environment = evidence.get("environment")
    evidence = revive({k: v for k, v in evidence.items()
                       if k not in ("waived_status", "fleet_band", "environment", "environment_status")})
    thresholds = revive(thresholds)
    try:
        v = entry.fn(evidence, thresholds, stored.get("subject") or "")
    except Exception as exc:  # evidence edited into something the check cannot read
        return {"why": f"the check could not read the stored evidence: {type(exc).__name__}: {exc}"}
    if isinstance(environment, dict):  # the environment of the measurement, as read then (checks/environment.py)
        v = apply_environment(v, {k: val for k, val in environment.items() if k != "summary"})
    band = (profile.fleet_band(v.requirement, v.subject, v.unit) if profile is not None
            else find_band(baseline, v.requirement, v.subject, v.unit))
    v = apply_fleet_band(v, band)
    waiver = profile.waiver(entry.requirement) if profile is not None else _waiver(waivers or [], entry.requirement)
    return {"verdict": apply_waiver(v, waiver)}


def _report_profile(report: Dict[str, Any]) -> Any:
    from ..profiles import Profile

    p = as_object(report.get("profile"))
    data = p.get("data")
    if not isinstance(data, dict):
        return None
    return Profile(str(p.get("name")), str(p.get("path")), list(p.get("chain") or []), data)


def _first_difference(a: Any, b: Any, path: str = "") -> str:
    """Where two JSON values first differ, as a dotted path."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b), key=str):
            if k not in a or k not in b or a[k] != b[k]:
                return _first_difference(a.get(k), b.get(k), f"{path}.{k}" if path else str(k))
    return path or "(whole value)"


def threshold_findings(report: Dict[str, Any]) -> Dict[str, List[Dict[str, Any]]]:
    """Every verdict's stored thresholds against what the report's own profile section gives its requirement,
    and a profile section that names a bundled profile against that bundled profile (same suite version).

    A verdict is decided with the thresholds the profile gives its requirement (``Profile.check_thresholds``):
    anything else is a finding, whatever the replayed status says, since a check given looser thresholds
    reproduces a loosened verdict.  Returns ``{"findings": [...], "notes": [...]}``."""
    from .. import __version__

    findings: List[Dict[str, Any]] = []
    notes: List[Dict[str, Any]] = []
    profile = _report_profile(report)
    generator = (report.get("generator") or {}).get("version") if isinstance(report.get("generator"), dict) else None
    if profile is None:
        findings.append({"index": None, "requirement": None, "subject": None, "field": "profile",
                         "why": "the report's profile section holds no profile data to check the thresholds against"})
        return {"findings": findings, "notes": notes}
    expected: Dict[str, Any] = {}
    for i, v in enumerate(report.get("verdicts") or []):
        if not isinstance(v, dict) or not isinstance(v.get("check"), dict) or "thresholds" not in v:
            continue
        req, chk = v.get("requirement"), v["check"]
        entry = get_version(chk.get("name"), chk.get("version")) if isinstance(chk.get("name"), str) else None
        if entry is None or not isinstance(req, str):
            continue  # listed as not replayable already
        where = {"index": i, "requirement": req, "subject": v.get("subject")}
        if entry.derived_thresholds:
            item = dict(where, field="thresholds",
                        why=f"decided by version {entry.version} of check {entry.name!r}, given thresholds derived per "
                            "subject: they cannot be checked against the profile")
            # A report this version wrote never holds such a verdict: one that does was altered.
            (findings if generator == __version__ else notes).append(item)
            continue
        try:
            if req not in expected:
                expected[req] = plain(profile.check_thresholds(req))
        except Exception as exc:  # noqa: BLE001 - a profile section edited into something unreadable
            findings.append(dict(where, field="profile", why=f"the report's profile gives no thresholds for {req} "
                                                             f"({type(exc).__name__}: {exc})"))
            expected[req] = None
            continue
        if expected[req] is not None and plain(v.get("thresholds")) != expected[req]:
            findings.append(dict(where, field="thresholds", stored=v.get("thresholds"), now=expected[req],
                                 why=f"the verdict was decided with other thresholds than the report's profile "
                                     f"gives {req} (first difference: "
                                     f"{_first_difference(plain(v.get('thresholds')), expected[req])})"))
    p = as_object(report.get("profile"))
    if p.get("bundled"):
        from ..profiles import ProfileError, resolve

        if generator != __version__:
            notes.append({"index": None, "requirement": None, "subject": None, "field": "profile",
                          "why": f"the bundled profile {p.get('name')!r} of pytest-sits {generator} is not compared: "
                                 f"this is {__version__}"})
        else:
            try:
                bundled = plain(resolve(str(p.get("name"))).data)
            except ProfileError as exc:
                bundled = None
                findings.append({"index": None, "requirement": None, "subject": None, "field": "profile",
                                 "why": f"the report names the bundled profile {p.get('name')!r}, which this "
                                        f"version does not have ({exc})"})
            if bundled is not None and plain(profile.data) != bundled:
                findings.append({"index": None, "requirement": None, "subject": None, "field": "profile",
                                 "why": f"the profile section differs from the bundled profile {p.get('name')!r} of "
                                        f"pytest-sits {__version__} (first difference: "
                                        f"{_first_difference(plain(profile.data), bundled)})"})
    return {"findings": findings, "notes": notes}


def replay_report(report: Dict[str, Any], profile_path: Optional[str] = None) -> Dict[str, Any]:
    """Replay every verdict of a report; list those that differ and those that cannot be replayed, and check
    every verdict's thresholds against the report's profile (:func:`threshold_findings`)."""
    load_all()
    profile = None
    if profile_path:
        from ..profiles import resolve

        profile = resolve(profile_path)
    waivers = ((report.get("profile") or {}).get("data") or {}).get("waivers") or []
    baseline = ((report.get("profile") or {}).get("data") or {}).get("fleet_baseline")
    differs: List[Dict[str, Any]] = []
    not_replayable: List[Dict[str, Any]] = []
    replayed = 0
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
    checked = threshold_findings(report)
    from .binding import binding_findings

    checked["findings"].extend(binding_findings(report))
    return {"total": len(verdicts), "replayed": replayed, "differs": differs, "not_replayable": not_replayable,
            "unbacked": unbacked, "profile": profile_path, "thresholds": checked["findings"],
            "notes": checked["notes"],
            "summary": _summary_differs(report, [v for v in now_verdicts if isinstance(v, dict)
                                                 and v.get("status") in STATUSES
                                                 and isinstance(v.get("requirement"), str)])}


def _summary_differs(report: Dict[str, Any], now_verdicts: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """The run's result and counts recomputed from the replayed verdicts, where they differ from the stored
    ones; and requirements whose stored coverage does not match the verdicts the report holds."""
    run = as_object(report.get("run"))
    plat = as_object(report.get("platform"))
    stored = as_object(report.get("summary"))
    level: str = run["level"] if run.get("level") in ("quick", "standard", "full") else "quick"
    # Every state kept is one of those strings; a row whose requirement is no catalogue id is never looked up.
    collected = cast(Dict[str, str], {r.get("requirement"): r.get("state") for r in report.get("coverage") or []
                                      if isinstance(r, dict)
                                      and r.get("state") in ("DESELECTED", "COLLECTED", "NOT_SELECTED")})
    rows = coverage(now_verdicts, level, collected, bool(run.get("completed", True)))
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
