"""The report: one JSON document (schema-versioned), rendered to HTML and text.

The JSON is the source of truth.  HTML (Jinja, autoescaped, self-contained)
and the terminal summary render it; ``sits report`` re-renders a stored JSON.
"""

from __future__ import annotations

import functools
import gc
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
            st = {"NOT_IMPLEMENTED": "not_implemented", "DESELECTED": "deselected"}.get(st, "not_selected")
        by_state.setdefault(st, []).append(row["requirement"])
    keys = ("decided", "skipped", "not_measured", "above_level", "deselected", "not_selected", "not_implemented")
    out: Dict[str, Any] = {"level": level, "platform": kind, "catalogue": len(coverage_rows)}
    out.update({k: by_state.get(k, []) for k in keys})
    return out


def _scope_gaps(scope: Dict[str, Any]) -> List[str]:
    gaps = []
    if scope["not_measured"]:
        gaps.append(f"{len(scope['not_measured'])} not measured here ({', '.join(scope['not_measured'][:6])}"
                    f"{', ...' if len(scope['not_measured']) > 6 else ''})")
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
    if scope is not None:
        out["scope"] = scope
    return out


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
    rows = coverage(verdicts, run["level"], collected)
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
        "analytics": _analytics(verdicts, profile),
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
    """The process umask, read without changing it (threads may be creating files meanwhile)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o022


def atomic_write(path: Path, text: str) -> None:
    """Write to a temporary file beside ``path``, then rename over it (mode as a plain open() would give)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _write_temp(path, text)
    try:
        os.replace(tmp, path)
    except BaseException:
        _unlink(tmp)
        raise


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _write_temp(path: Path, text: str) -> str:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=str(path.parent))
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; a report is meant to be read by others
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException:
        _unlink(tmp)
        raise
    return tmp


def write_pair(json_path: Path, json_text: str, html_path: Path, html_text: str, started_at: float) -> None:
    """Write the JSON report and its HTML rendering so that a kill at any moment leaves a consistent pair.

    Both are written to temporary files first; then the old HTML is removed, the JSON renamed into place,
    and the HTML last.  Killed in between, the folder holds the old JSON alone or the new JSON alone
    (``sits report render`` makes its HTML), never a JSON beside another run's HTML.  Temporary files that
    a killed earlier run left behind (older than this run) are removed first."""
    folder = json_path.parent
    folder.mkdir(parents=True, exist_ok=True)
    for name in os.listdir(folder):
        if name.startswith((f".{json_path.name}.", f".{html_path.name}.")) and name.endswith(".tmp"):
            stale = folder / name
            try:
                if os.lstat(stale).st_mtime < started_at:
                    os.unlink(stale)
            except OSError:
                pass
    jtmp = _write_temp(json_path, json_text)
    try:
        htmp = _write_temp(html_path, html_text)
    except BaseException:
        _unlink(jtmp)
        raise
    try:
        _unlink(str(html_path))
        os.replace(jtmp, json_path)
        os.replace(htmp, html_path)
    except BaseException:
        _unlink(jtmp)
        _unlink(htmp)
        raise


def _analytics(verdicts: List[Dict[str, Any]], profile: Dict[str, Any]) -> Dict[str, Any]:
    """The report's ``analytics`` section (A §2.5, §4.1, §4.2).  Derived data, never a verdict: when the
    evidence breaks it, the section says why and the report is still written."""
    from .analytics import ANALYTICS_VERSION, analyse

    try:
        return analyse({"verdicts": verdicts, "profile": profile})
    except Exception as exc:  # noqa: BLE001 - the report must be written whatever the evidence holds
        return {"version": ANALYTICS_VERSION, "error": f"analytics not computed: {type(exc).__name__}: {exc}"}


#: Timelines drawn per HTML page at most (verdicts needing attention first); the rest link to the JSON.
MAX_TIMELINE_CHARTS = 10
#: Characters of each verdict's evidence shown in the HTML page; the JSON report keeps all of it.
EVIDENCE_EXCERPT_CHARS = 400
_FMT_CAP = 300


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (dict, list)):
        return _excerpt(value, _FMT_CAP)
    return str(value)


class _Full(Exception):
    pass


_LITERALS = {True: "true", False: "false", None: "null"}


def _excerpt(obj: Any, limit: int = EVIDENCE_EXCERPT_CHARS) -> str:
    """A JSON-like excerpt of ``obj`` of at most about ``limit`` characters, in time proportional to the excerpt
    (not to ``obj``): long lists show their first items and how many more there are, long strings are cut."""
    from json.encoder import encode_basestring  # the C string encoder json.dumps uses, without its set-up

    parts: List[str] = []
    left = limit

    def emit(text: str) -> None:
        nonlocal left
        parts.append(text)
        left -= len(text)
        if left <= 0:
            raise _Full

    def walk(o: Any) -> None:
        if isinstance(o, str):
            emit(encode_basestring(o if len(o) <= 200 else o[:200] + "..."))
        elif o is None or isinstance(o, bool):
            emit(_LITERALS[o])
        elif isinstance(o, float):
            emit(f"{o:.6g}")
        elif isinstance(o, int):
            emit(str(o))
        elif isinstance(o, dict):
            emit("{")
            first = True
            for k, v in o.items():
                emit(("" if first else ", ") + encode_basestring(str(k)) + ": ")
                first = False
                walk(v)
            emit("}")
        elif isinstance(o, (list, tuple)):
            emit("[")
            shown = o if len(o) <= 6 else o[:3]
            for i, v in enumerate(shown):
                if i:
                    emit(", ")
                walk(v)
            if len(o) > len(shown):
                emit(f", ... {len(o) - len(shown)} more")
            emit("]")
        else:
            emit(encode_basestring(str(o)))

    try:
        walk(obj)
    except _Full:
        return "".join(parts)[:limit] + " ..."
    return "".join(parts)


def _measured(v: Dict[str, Any]) -> str:
    unit = v.get("unit")
    return _fmt(v.get("measured")) + (f" {unit}" if unit and v.get("measured") is not None else "")


@functools.lru_cache(maxsize=1)
def _environment():
    from jinja2 import Environment, FileSystemLoader, select_autoescape

    env = Environment(loader=FileSystemLoader(str(RESOURCES)),
                      autoescape=select_autoescape(enabled_extensions=("jinja2", "html"), default=True))
    env.filters["fmt"] = _fmt
    env.filters["pretty"] = lambda v: json.dumps(v, indent=2, sort_keys=True, default=str)
    return env


def _timeline_charts(verdicts: List[Dict[str, Any]]) -> Dict[int, Any]:
    """verdict index -> its charts, for at most MAX_TIMELINE_CHARTS timelines: FAIL/ERROR/INCONCLUSIVE first."""
    from .charts import charts_for

    with_series = [i for i, v in enumerate(verdicts)
                   if isinstance(v.get("evidence"), dict) and v["evidence"].get("series")]
    urgent = [i for i in with_series if verdicts[i].get("status") in (FAIL, ERROR, INCONCLUSIVE)]
    order = urgent + [i for i in with_series if verdicts[i].get("status") not in (FAIL, ERROR, INCONCLUSIVE)]
    out: Dict[int, Any] = {}
    drawn = 0
    for i in order:
        series = verdicts[i]["evidence"]["series"]
        n = len(series) if isinstance(series, list) else 0
        if drawn + n > MAX_TIMELINE_CHARTS:
            continue
        out[i] = charts_for(verdicts[i]["evidence"])
        drawn += n
    return out


def _analytics_view(report: Dict[str, Any], recompute: bool = False) -> Dict[str, Any]:
    """The analytics section (the report's own, else computed now from its verdicts) and its charts."""
    from . import charts
    from .analytics import ANALYTICS_VERSION

    a = report.get("analytics")
    computed_now = recompute or not (isinstance(a, dict) and a.get("version") == ANALYTICS_VERSION)
    if computed_now:
        a = _analytics(report["verdicts"], report.get("profile") or {})
    view: Dict[str, Any] = {"a": a, "computed_now": computed_now}
    if a.get("error"):
        return view
    hm = a.get("heatmap") or {}
    points = (a.get("sweep") or {}).get("points") or []
    try:
        view["heatmap_svg"] = charts.heatmap_chart(hm, points)
        view["pareto_svg"] = charts.pareto_chart(hm, points, (a.get("pareto") or {}).get("front") or [])
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
        view["chart_error"] = f"the analytics section could not be drawn ({type(exc).__name__}: {exc})"
    return view


def render_html(report: Dict[str, Any]) -> str:
    """The self-contained HTML page of a report.  Its size is bounded per verdict (an evidence excerpt, at most
    MAX_TIMELINE_CHARTS timelines per page), whatever the evidence holds; the JSON keeps everything."""
    # Rendering allocates many short-lived objects next to a report that may hold millions; the cyclic
    # collector would walk that whole heap again and again (measured: 18 s against 11 s for 10,000 verdicts
    # with 300-window timelines). It is paused while rendering and restored after.
    paused = gc.isenabled()
    gc.disable()
    try:
        return _render_html(report)
    finally:
        if paused:
            gc.enable()


def _render_html(report: Dict[str, Any]) -> str:
    verdicts = report["verdicts"]
    charts = _timeline_charts(verdicts)
    rows = []
    for i, v in enumerate(verdicts):
        has_series = isinstance(v.get("evidence"), dict) and bool(v["evidence"].get("series"))
        rows.append({"v": v, "index": i, "measured": _measured(v), "threshold": _fmt(v.get("threshold")),
                     "charts": charts.get(i, []), "charts_left_out": has_series and i not in charts,
                     "excerpt": _excerpt(v.get("evidence") or {})})
    view = dict(report)
    view["rows"] = rows
    view["analytics_view"] = _analytics_view(report)
    view["limits"] = {"charts": MAX_TIMELINE_CHARTS, "excerpt": EVIDENCE_EXCERPT_CHARS}
    template = _environment().get_template("report.html.jinja2")
    try:
        return template.render(r=view)
    except Exception as exc:  # jinja2's UndefinedError and any shape error of an altered analytics section
        if view["analytics_view"]["computed_now"]:
            raise
        # The stored analytics section is not what this version writes (an altered file): recompute it.
        view["analytics_view"] = _analytics_view(report, recompute=True)
        view["analytics_view"]["stored_unreadable"] = f"{type(exc).__name__}: {exc}"
        return template.render(r=view)


def _md(text: Any) -> str:
    """A table cell of Markdown: no raw HTML (Markdown renderers pass it through), no column breaks."""
    t = printable(str(text), keep="\n\t").replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return t.replace("|", "\\|").replace("\n", " ")


def printable(text: str, keep: str = "") -> str:
    """Text from the hardware or from other people, without terminal escape codes or other control characters
    (those in ``keep`` pass through); each one is shown as ``\\xNN``."""
    return "".join(c if c.isprintable() or c in keep else f"\\x{ord(c):02x}" for c in text)


def _markdown_analytics(a: Dict[str, Any]) -> List[str]:
    lines = ["", "## Analytics (SITS2026 A §2.5, §4.1, §4.2; not pass/fail)", ""]
    sw = a.get("sweep") or {}
    hm = a.get("heatmap") or {}
    if sw.get("status") != "measured":
        lines.append(f"- sweep: {sw.get('reason', 'no sweep measured')}")
    else:
        lines.append(f"- sweep: {len(sw.get('points') or [])} points over {len(sw.get('subjects') or [])} subject(s)")
    if hm.get("status") == "drawn":
        grid, par = hm["interpolation"], hm["pareto"]
        lines.append(f"- heat map (power x P99 latency x load): {grid['scheme']}")
        lines.append(f"- Pareto pruning: {par['kept']} grid points kept, {par['dropped']} dominated")
        if hm.get("best"):
            b = hm["best"]
            lines.append(f"- best SLA-weighted score {b['score']:.4g} at load {b['rho']:.3g}, {b['power_w']:.4g} W, "
                         f"P99 {b['latency_ms']:.4g} ms, error {b['error_rate_pct']:.3g} %, {b['throughput_qps']:.4g} req/s")
    else:
        lines.append(f"- heat map: not drawn ({hm.get('reason', 'no data')})")
    sla = a.get("sla") or {}
    if sla:
        w = ", ".join(f"{k} {sla['targets'][k]:g} -> {sla['weights'][k]:.4g}" for k in sla.get("weights", {}))
        lines.append(f"- SLA weights {sla.get('formula')} ({sla.get('source')}): {w}")
        lines.append(f"- {sla.get('discrepancy')}")
    tco = a.get("tco") or {}
    if tco.get("status") == "computed":
        lines.append(f"- TCO per card per year (site inputs declared, not measured; power {tco['power_w']:.4g} W, "
                     f"{tco['power_source']}): {tco['total_per_year']} {tco['currency']}"
                     + (f" (partial: not declared {', '.join(tco['missing'])})" if tco.get("partial") else ""))
    else:
        lines.append(f"- TCO: {tco.get('reason', 'not computed')}")
    tpw = a.get("tokens_per_watt") or {}
    if tpw.get("status") == "measured":
        lines.append(f"- tokens per watt at P99: {_fmt(tpw.get('median_tokens_per_watt_p99'))} (median over cards)")
    elif tpw.get("status") == "derived":
        lines.append(f"- tokens per joule: {_fmt(tpw.get('value'))} ({tpw.get('source')})")
    else:
        lines.append(f"- tokens per watt: {tpw.get('reason', 'not computed')}")
    return lines


def render_markdown(report: Dict[str, Any]) -> str:
    lines = [f"# SITS2026 conformance report: {report['summary']['result']}", ""]
    if report["platform"]["simulated"]:
        lines += ["**SIMULATED platform: not a conformance result.**", ""]
    lines += [f"- result: {_md(report['summary']['result'])}: {_md(report['summary'].get('result_reason', ''))}",
              f"- profile: `{_md(report['profile']['name'])}` ({_md(report['profile']['how'])})",
              f"- platform: {_md(report['platform']['label'])}",
              f"- level: {report['run']['level']}; completed: {report['run']['completed']}", "",
              "| requirement | subject | status | measured | threshold | reason |", "|---|---|---|---|---|---|"]
    for v in report["verdicts"]:
        cells = [v["requirement"], v["subject"], v["status"], _measured(v), _fmt(v["threshold"]), v["reason"]]
        lines.append("| " + " | ".join(_md(c) for c in cells) + " |")
    lines += ["", "## Coverage of the SITS2026 catalogue", "", "| requirement | level | state | statuses |",
              "|---|---|---|---|"]
    for row in report.get("coverage") or []:
        cells = [row.get("requirement"), row.get("level"), row.get("state"), ", ".join(row.get("statuses") or [])]
        lines.append("| " + " | ".join(_md(c) for c in cells) + " |")
    from .analytics import ANALYTICS_VERSION

    a = report.get("analytics")
    if not (isinstance(a, dict) and a.get("version") == ANALYTICS_VERSION):
        a = _analytics(report["verdicts"], report.get("profile") or {})
    if a.get("error"):
        return "\n".join(lines + ["", f"Analytics: {a['error']}"]) + "\n"
    try:
        lines += _markdown_analytics(a)
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
        lines += ["", f"Analytics: the section could not be read ({type(exc).__name__}: {exc})"]
    return "\n".join(lines) + "\n"


def terminal_lines(report: Dict[str, Any], width: int = 120) -> List[str]:
    rows = [("requirement", "subject", "status", "measured", "threshold")]
    for v in report["verdicts"]:
        measured = _fmt(v["measured"]) + (f" {v['unit']}" if v.get("unit") and v["measured"] is not None else "")
        rows.append((v["requirement"], v["subject"], v["status"], measured, _fmt(v["threshold"])))
    rows = [tuple(printable(c, keep="\n\t").replace("\n", " ") for c in r) for r in rows]
    widths = [min(max(len(r[i]) for r in rows), cap) for i, cap in enumerate((22, 24, 12, 24, 60))]

    def cut(text: str, n: int) -> str:
        return text if len(text) <= n else text[: n - 1] + "…"

    out = ["  ".join(cut(c, widths[i]).ljust(widths[i]) for i, c in enumerate(r)).rstrip() for r in rows]
    out.insert(1, "  ".join("-" * w for w in widths))
    s = report["summary"]
    counts = ", ".join(f"{n} {k}" for k, n in s["counts"].items() if n)
    out.append(f"result: {s['result']} ({s['result_reason']}){'; ' + counts if counts else ''}")
    return out
