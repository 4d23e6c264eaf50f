"""The report: one JSON document (schema-versioned), rendered to HTML and text.

The JSON is the source of truth.  HTML (Jinja, autoescaped, self-contained)
and the terminal summary render it; ``sits report`` re-renders a stored JSON.
"""

from __future__ import annotations

import json
import os
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional

from . import REPORT_SCHEMA_VERSION, __version__
from .catalogue import CATALOGUE, level_rank
from .verdict import ERROR, FAIL, INCONCLUSIVE, PASS, SKIP, STATUS_MEANING, STATUSES, WAIVED, WARN

RESOURCES = Path(__file__).resolve().parent / "resources"
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


def summarise(verdicts: List[Dict[str, Any]], completed: bool, simulated: bool) -> Dict[str, Any]:
    counts = {s: 0 for s in STATUSES}
    for v in verdicts:
        counts[v["status"]] += 1
    if simulated:
        result, why = "SIMULATED", "a simulated platform can never be reported as conformant"
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
    else:
        # SKIP means the hardware or feature is absent; a missing *expected* device fails INV-DEVICES.
        result, why = "CONFORMANT", (f"{counts[PASS]} PASS, {counts[WARN]} WARN, {counts[WAIVED]} WAIVED, "
                                     f"{counts[SKIP]} SKIP (not applicable)")
    return {"counts": counts, "result": result, "result_reason": why}


def coverage(verdicts: List[Dict[str, Any]], level: str, collected: Dict[str, str]) -> List[Dict[str, Any]]:
    """One row per catalogue requirement: what happened to it in this run."""
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
        rows.append({"requirement": req.id, "title": req.title, "source": req.source, "level": req.level,
                     "extension": req.extension, "state": state, "statuses": by_req.get(req.id, [])})
    return rows


def build(*, run: Dict[str, Any], environment: Dict[str, Any], platform: Dict[str, Any],
          profile: Dict[str, Any], inventory: Dict[str, Any], verdicts: List[Dict[str, Any]],
          collected: Dict[str, str]) -> Dict[str, Any]:
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
        "coverage": coverage(verdicts, run["level"], collected),
        "summary": summarise(verdicts, run["completed"], platform["simulated"]),
        "status_meaning": STATUS_MEANING,
    }


def schema() -> Dict[str, Any]:
    return json.loads((RESOURCES / "report.schema.json").read_text(encoding="utf-8"))


def validate(report: Dict[str, Any]) -> List[str]:
    """Schema errors of a report, as readable lines (empty when valid)."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema())
    return [f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}"
            for e in validator.iter_errors(report)]


def _umask() -> int:
    old = os.umask(0)
    os.umask(old)
    return old


def atomic_write(path: Path, text: str) -> None:
    """Write to a temporary file beside ``path``, then rename over it (mode as a plain open() would give)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=str(path.parent))
    os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; a report is meant to be read by others
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return str(value)


def render_html(report: Dict[str, Any]) -> str:
    from jinja2 import Environment, FileSystemLoader, select_autoescape

    env = Environment(loader=FileSystemLoader(str(RESOURCES)),
                      autoescape=select_autoescape(enabled_extensions=("jinja2", "html"), default=True))
    env.filters["fmt"] = _fmt
    env.filters["pretty"] = lambda v: json.dumps(v, indent=2, sort_keys=True, default=str)
    from .charts import charts_for

    view = dict(report)
    view["verdicts"] = [dict(v, charts=charts_for(v.get("evidence") or {})) for v in report["verdicts"]]
    return env.get_template("report.html.jinja2").render(r=view)


def render_markdown(report: Dict[str, Any]) -> str:
    lines = [f"# SITS2026 conformance report: {report['summary']['result']}", ""]
    if report["platform"]["simulated"]:
        lines += ["**SIMULATED platform: not a conformance result.**", ""]
    lines += [f"- profile: `{report['profile']['name']}` ({report['profile']['how']})",
              f"- platform: {report['platform']['label']}",
              f"- level: {report['run']['level']}; completed: {report['run']['completed']}", "",
              "| requirement | subject | status | measured | threshold | reason |", "|---|---|---|---|---|---|"]
    for v in report["verdicts"]:
        cells = [v["requirement"], v["subject"], v["status"], _fmt(v["measured"]) + (f" {v['unit']}" if v.get("unit") and v["measured"] is not None else ""),
                 _fmt(v["threshold"]), v["reason"]]
        lines.append("| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in cells) + " |")
    return "\n".join(lines) + "\n"


def terminal_lines(report: Dict[str, Any], width: int = 120) -> List[str]:
    rows = [("requirement", "subject", "status", "measured", "threshold")]
    for v in report["verdicts"]:
        measured = _fmt(v["measured"]) + (f" {v['unit']}" if v.get("unit") and v["measured"] is not None else "")
        rows.append((v["requirement"], v["subject"], v["status"], measured, _fmt(v["threshold"])))
    widths = [min(max(len(r[i]) for r in rows), cap) for i, cap in enumerate((22, 24, 12, 24, 60))]

    def cut(text: str, n: int) -> str:
        return text if len(text) <= n else text[: n - 1] + "…"

    out = ["  ".join(cut(c, widths[i]).ljust(widths[i]) for i, c in enumerate(r)).rstrip() for r in rows]
    out.insert(1, "  ".join("-" * w for w in widths))
    s = report["summary"]
    counts = ", ".join(f"{n} {k}" for k, n in s["counts"].items() if n)
    out.append(f"result: {s['result']} ({s['result_reason']}){'; ' + counts if counts else ''}")
    return out
