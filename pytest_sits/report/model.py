"""The report model: one JSON document (schema-versioned), the source of truth of a run.

:func:`build` assembles it, :func:`summarise` and :func:`coverage` decide what
the run may claim, :func:`plain` and :func:`revive` encode non-finite numbers
for strict JSON and back.  Reading and writing report files is
:mod:`pytest_sits.report.store`; HTML, Markdown and terminal renderings are
:mod:`pytest_sits.report.render`.
"""

from __future__ import annotations

import json
import math
from importlib import metadata
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional

from .. import REPORT_SCHEMA_VERSION, __version__, exitcodes
from ..catalogue import CATALOGUE, level_rank
from ..verdict import ERROR, FAIL, INCONCLUSIVE, PASS, SKIP, STATUS_MEANING, STATUSES, WAIVED, WARN

RESOURCES = Path(__file__).resolve().parent.parent / "resources"
PACKAGES = ("pytest", "pytest-xdist", "numpy", "scipy", "torch", "nvidia-ml-py", "amdsmi", "pyyaml",
            "jinja2", "jsonschema", "pytest-benchmark")


def package_versions(names: Iterable[str] = PACKAGES) -> Dict[str, Optional[str]]:
    out: Dict[str, Optional[str]] = {}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


#: What a run must have covered to call itself CONFORMANT without qualification.
CERTIFICATION = ("level full, every catalogue requirement implemented and selected (no -m/-k), on the live "
                 "machine, completed, and every verdict PASS, WARN, WAIVED or SKIP (not applicable)")


def scope_of(coverage_rows: List[Dict[str, Any]], level: str, kind: str,
             verdicts: Optional[List[Dict[str, Any]]] = None) -> Dict[str, Any]:
    """What the run decided and what it did not, requirement by requirement (from the coverage table).

    A requirement all of whose verdicts are SKIP is "skipped" (not applicable: the hardware is absent) unless a
    verdict says it was not measured (evidence ``unavailable``): then it is "not_measured", a gap."""
    unmeasured = {v["requirement"] for v in verdicts or []
                  if v.get("status") == SKIP and isinstance(v.get("evidence"), dict) and v["evidence"].get("unavailable")}
    by_state: Dict[str, List[str]] = {}
    for row in coverage_rows:
        st = row["state"]
        if st == "RUN":
            if row["statuses"] and all(x == SKIP for x in row["statuses"]):
                st = "not_measured" if row["requirement"] in unmeasured else "skipped"
            else:
                st = "decided"
        elif st.startswith("NOT_AT_LEVEL"):
            st = "above_level"
        else:
            st = {"NOT_IMPLEMENTED": "not_implemented", "DESELECTED": "deselected", "NOT_RUN": "not_run"}.get(
                st, "not_selected")
        by_state.setdefault(st, []).append(row["requirement"])
    keys = ("decided", "skipped", "not_measured", "not_run", "above_level", "deselected", "not_selected",
            "not_implemented")
    out: Dict[str, Any] = {"level": level, "platform": kind, "catalogue": len(coverage_rows)}
    out.update({k: by_state.get(k, []) for k in keys})
    return out


def _scope_gaps(scope: Dict[str, Any]) -> List[str]:
    gaps = []
    if scope["not_measured"]:
        gaps.append(f"{len(scope['not_measured'])} not measured here ({', '.join(scope['not_measured'][:6])}"
                    f"{', ...' if len(scope['not_measured']) > 6 else ''})")
    if scope.get("not_run"):
        gaps.append(f"{len(scope['not_run'])} not run (the run stopped before them)")
    if scope["above_level"]:
        gaps.append(f"{len(scope['above_level'])} above level {scope['level']}")
    if scope["deselected"]:
        gaps.append(f"{len(scope['deselected'])} deselected (-m/-k)")
    if scope["not_selected"]:
        gaps.append(f"{len(scope['not_selected'])} not selected")
    if scope["not_implemented"]:
        gaps.append(f"{len(scope['not_implemented'])} not implemented")
    if scope["platform"] != "live":
        gaps.append(f"platform {scope['platform']} (no measurement of a live machine)")
    return gaps


def summarise(verdicts: List[Dict[str, Any]], completed: bool, simulated: bool,
              coverage_rows: Optional[List[Dict[str, Any]]] = None, level: str = "quick",
              kind: str = "live") -> Dict[str, Any]:
    """The run's result: it never claims more than was decided.

    NON_CONFORMANT (any FAIL or ERROR) and UNDECIDED (INCONCLUSIVE, or nothing decided) whatever the scope;
    CONFORMANT only for a run that covered the whole catalogue (see CERTIFICATION); a run that conforms in
    what it decided but covered less is PARTIAL, and its reason names what it did not decide."""
    counts = {s: 0 for s in STATUSES}
    for v in verdicts:
        counts[v["status"]] += 1
    scope = scope_of(coverage_rows, level, kind, verdicts) if coverage_rows is not None else None
    decided = f"{counts[PASS]} PASS, {counts[WARN]} WARN, {counts[WAIVED]} WAIVED, {counts[SKIP]} SKIP"
    simulated_as = None
    if simulated:
        # What the verdicts would make of a real machine, said beside it (the exit status follows it too).
        simulated_as = summarise(verdicts, completed, False, coverage_rows, level, kind)
        result, why = "SIMULATED", (f"would be {simulated_as['result']}: {simulated_as['result_reason']}; a "
                                    "simulated platform is never conformant")
    elif not completed:
        result, why = "INCOMPLETE", "the run did not complete; the verdicts below are what was measured"
    elif counts[FAIL] or counts[ERROR]:
        result, why = "NON_CONFORMANT", f"{counts[FAIL]} FAIL, {counts[ERROR]} ERROR"
    elif not verdicts:
        result, why = "UNDECIDED", "no requirement was run"
    elif counts[INCONCLUSIVE]:
        result, why = "UNDECIDED", f"{counts[INCONCLUSIVE]} INCONCLUSIVE: measured but not decidable"
    elif not (counts[PASS] or counts[WARN] or counts[WAIVED]):
        result, why = "UNDECIDED", "every requirement was skipped"
    elif scope is None or _scope_gaps(scope):
        gaps = _scope_gaps(scope) if scope is not None else ["the scope of the run is unknown"]
        n = len(scope["decided"]) + len(scope["skipped"]) if scope is not None else "?"
        total = scope["catalogue"] if scope is not None else "?"
        result, why = "PARTIAL", (f"conforms in what was decided: {n} of {total} requirements ({len(verdicts)} "
                                  f"verdicts: {decided}); not decided: {', '.join(gaps)}")
    else:
        # SKIP means the hardware or feature is absent; a missing *expected* device fails INV-DEVICES.
        result, why = "CONFORMANT", f"every requirement of the catalogue decided: {decided}"
    out = {"counts": counts, "result": result, "result_reason": why}
    if simulated_as is not None:
        out["simulated_as"] = simulated_as["result"]
    if scope is not None:
        out["scope"] = scope
    return out


#: The exit statuses of a run (one scheme for pytest and every ``sits`` command: :mod:`pytest_sits.exitcodes`).
EXIT_STATUSES = exitcodes.EXIT_STATUSES
EXIT_NON_CONFORMANT, EXIT_UNDECIDED, EXIT_NO_REPORT = exitcodes.NON_CONFORMANT, exitcodes.UNDECIDED, exitcodes.NO_REPORT


def exit_status(summary: Dict[str, Any], pytest_status: int) -> int:
    """The run's exit status (:func:`pytest_sits.exitcodes.run_status` of the summary's counts)."""
    return exitcodes.run_status(summary.get("counts") or {}, pytest_status)


def coverage(verdicts: List[Dict[str, Any]], level: str, collected: Dict[str, str],
             completed: bool = True) -> List[Dict[str, Any]]:
    """One row per catalogue requirement: what happened to it in this run.  In a run that did not complete, a
    requirement in scope with no verdict is NOT_RUN (the run stopped before it), never "not selected"."""
    rows = []
    by_req: Dict[str, List[str]] = {}
    for v in verdicts:
        by_req.setdefault(v["requirement"], []).append(v["status"])
    for req in CATALOGUE.values():
        if req.id in by_req:
            state = "RUN"
        elif not req.implemented:
            state = "NOT_IMPLEMENTED"
        elif level_rank(req.level) > level_rank(level):
            state = f"NOT_AT_LEVEL_{level.upper()}"
        else:
            state = collected.get(req.id, "NOT_SELECTED")
            if not completed and state == "NOT_SELECTED":
                state = "NOT_RUN"
        rows.append({"requirement": req.id, "title": req.title, "source": req.source, "level": req.level,
                     "extension": req.extension, "state": state, "statuses": by_req.get(req.id, [])})
    return rows


def build(*, run: Dict[str, Any], environment: Dict[str, Any], platform: Dict[str, Any],
          profile: Dict[str, Any], inventory: Dict[str, Any], verdicts: List[Dict[str, Any]],
          collected: Dict[str, str]) -> Dict[str, Any]:
    rows = coverage(verdicts, run["level"], collected, run["completed"])
    return {
        "schema": "pytest-sits/report",
        "schema_version": REPORT_SCHEMA_VERSION,
        "generator": {"name": "pytest-sits", "version": __version__},
        "run": run,
        "environment": environment,
        "platform": platform,
        "profile": profile,
        "inventory": inventory,
        "verdicts": verdicts,
        "coverage": rows,
        "summary": summarise(verdicts, run["completed"], platform["simulated"], rows, run["level"], platform["kind"]),
        "status_meaning": STATUS_MEANING,
        "analytics": analytics_section(verdicts, profile),
    }


def schema() -> Dict[str, Any]:
    return json.loads((RESOURCES / "report.schema.json").read_text(encoding="utf-8"))


def validate(report: Dict[str, Any]) -> List[str]:
    """Schema errors of a report, as readable lines (empty when valid)."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema())
    return [f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}"
            for e in validator.iter_errors(report)]


def analytics_section(verdicts: List[Dict[str, Any]], profile: Dict[str, Any]) -> Dict[str, Any]:
    """The report's ``analytics`` section (A §2.5, §4.1, §4.2).  Derived data, never a verdict: when the
    evidence breaks it, the section says why and the report is still written."""
    from .analytics import ANALYTICS_VERSION, analyse

    try:
        return analyse({"verdicts": verdicts, "profile": profile})
    except Exception as exc:  # noqa: BLE001 - the report must be written whatever the evidence holds
        return {"version": ANALYTICS_VERSION, "error": f"analytics not computed: {type(exc).__name__}: {exc}"}




def plain(value: Any) -> Any:
    """JSON-safe data: NaN and infinities become strings (strict JSON parsers reject bare NaN/Infinity)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if value is None or isinstance(value, (str, int, bool)):
        return value
    return plain(json.loads(json.dumps(value, default=str)))


_NON_FINITE = {"inf": float("inf"), "-inf": float("-inf"), "nan": float("nan")}


def revive(value: Any) -> Any:
    """Undo :func:`plain`'s encoding of non-finite numbers ("inf", "-inf", "nan" strings, which strict JSON
    cannot hold as numbers), so a check sees the numbers it saw when it decided."""
    if isinstance(value, str):
        return _NON_FINITE.get(value, value)
    if isinstance(value, dict):
        return {k: revive(v) for k, v in value.items()}
    if isinstance(value, list):
        return [revive(v) for v in value]
    return value


def as_object(value: Any) -> Dict[str, Any]:
    """``value`` if it is a JSON object, else an empty one: a report read from disk may hold anything where an
    object is expected, and a missing or malformed section reads as an empty one."""
    return value if isinstance(value, dict) else {}
