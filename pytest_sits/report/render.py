"""Renderings of a report: the self-contained HTML page (Jinja, autoescaped), Markdown and terminal lines.

Each renders the JSON report (:mod:`pytest_sits.report.model`) and nothing
else; text from the hardware or from other people passes through
:func:`printable` before it reaches a terminal or a Markdown cell.
"""

from __future__ import annotations

import functools
import gc
import json
import re
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from ..verdict import ERROR, FAIL, INCONCLUSIVE, SEVERITY, number  # noqa: F401 (number: also imported from here)
from .model import analytics_section

TEMPLATES = Path(__file__).resolve().parent / "templates"

#: Timelines drawn per HTML page at most (verdicts needing attention first); the rest link to the JSON.
MAX_TIMELINE_CHARTS = 10
#: Characters of each verdict's evidence shown in the HTML page; the JSON report keeps all of it.
EVIDENCE_EXCERPT_CHARS = 400
_FMT_CAP = 300


def fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        return number(value)
    if isinstance(value, (dict, list)):
        return _excerpt(value, _FMT_CAP)
    return str(value)


#: Units whose value is a share of something: shown in percent, as their thresholds are.
SHARE_UNITS = {"share": "", "CV": " CV", "share of samples": " of samples", "of datasheet": " of datasheet",
               "of link": " of link", "fraction": "", "share of windows": " of windows"}


def quantity(value: Any, unit: Optional[str]) -> str:
    """A measured value with its unit, in the unit its threshold is written in: shares in percent (0.0399 CV ->
    "3.99% CV"), the rest as they were measured."""
    if value is None:
        return "-"
    if unit in SHARE_UNITS and isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{number(value * 100)}%{SHARE_UNITS[unit]}"
    if unit == "GiB" and isinstance(value, (int, float)) and not isinstance(value, bool):
        # memory sizes elsewhere are GB (10^9 bytes, MEM-CAPACITY's): a GiB figure says its GB beside it
        return f"{fmt(value)} GiB = {number(value * 1.073741824)} GB"
    return fmt(value) + (f" {unit}" if unit else "")


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


#: A coverage state in words (the report's JSON keeps the code).
STATE_TEXT = {"RUN": "run", "NOT_SELECTED": "not selected", "DESELECTED": "deselected (-m/-k)",
              "NOT_IMPLEMENTED": "not implemented", "NOT_RUN": "not run (the run stopped before it)",
              "COLLECTED": "collected, no verdict"}


def state_text(state: Any) -> str:
    """``NOT_AT_LEVEL_STANDARD`` -> 'above level standard'; the other coverage states in words."""
    text = str(state)
    if text.startswith("NOT_AT_LEVEL_"):
        return f"above level {text[len('NOT_AT_LEVEL_'):].lower()}"
    return STATE_TEXT.get(text, text.replace("_", " ").lower())


def platform_text(platform: Dict[str, Any]) -> str:
    """The platform's kind and label, the kind said once ('live', not 'live: live')."""
    kind, label = str(platform.get("kind") or ""), str(platform.get("label") or "")
    if not label or label == kind:
        return kind or label
    return label if kind and kind in label else f"{kind}: {label}"


def _measured(v: Dict[str, Any]) -> str:
    return quantity(v.get("measured"), v.get("unit"))


@functools.lru_cache(maxsize=1)
def environment():
    from jinja2 import Environment, FileSystemLoader, select_autoescape

    env = Environment(loader=FileSystemLoader(str(TEMPLATES)),
                      autoescape=select_autoescape(enabled_extensions=("jinja2", "html"), default=True))
    env.filters["fmt"] = fmt
    env.filters["state_text"] = state_text
    env.filters["platform_text"] = platform_text
    env.filters["pretty"] = lambda v: json.dumps(v, indent=2, sort_keys=True, default=str)
    env.filters["quantity"] = quantity
    env.filters["anchor"] = lambda text: "".join(c if c.isalnum() or c in "-_" else "-" for c in str(text))[:80]
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

    stored = report.get("analytics")
    a: Dict[str, Any]
    if not recompute and isinstance(stored, dict) and stored.get("version") == ANALYTICS_VERSION:
        a, computed_now = stored, False
    else:
        a, computed_now = analytics_section(report["verdicts"], report.get("profile") or {}), True
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


def _merged(rows: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """One row for the verdicts of a requirement that say the same (status, reason with its subject aside,
    measured value, threshold, remediation, waiver) and draw no chart: its subjects listed, each keeping its
    anchor.  Every other row stands alone (``subjects`` holds its own)."""
    out: List[Dict[str, Any]] = []
    by_key: Dict[Tuple[str, ...], Dict[str, Any]] = {}
    for row in rows:
        v = row["v"]
        subject = str(v.get("subject", ""))
        key = (str(v.get("status")), finding_key(str(v.get("reason", "")), subject), str(row["measured"]),
               str(row["threshold"]), str(v.get("remediation")), str(v.get("waiver")), str(v.get("method")))
        if row["charts"] or row["charts_left_out"] or key not in by_key:
            merged = dict(row, subjects=[(subject, row["index"])], reason=str(v.get("reason", "")),
                          reasons=[(subject, str(v.get("reason", "")))])
            out.append(merged)
            if not (row["charts"] or row["charts_left_out"]):
                by_key[key] = merged
            continue
        merged = by_key[key]
        merged["subjects"].append((subject, row["index"]))
        merged["reasons"].append((subject, str(v.get("reason", ""))))
        merged["reason"] = grouped_reason(merged["reasons"])
    return out


def _by_requirement(rows: List[Dict[str, Any]], coverage_rows: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """The verdict rows grouped by requirement, in catalogue order (then any other), each with its counts."""
    titles = {c.get("requirement"): c.get("title") for c in coverage_rows if isinstance(c, dict)}
    groups: Dict[str, Dict[str, Any]] = {}
    for row in rows:
        req = str(row["v"].get("requirement"))
        g = groups.setdefault(req, {"requirement": req, "title": titles.get(req, ""), "rows": [], "counts": {}})
        g["rows"].append(row)
        status = row["v"].get("status")
        g["counts"][status] = g["counts"].get(status, 0) + 1
    order: List[str] = [c["requirement"] for c in coverage_rows
                        if isinstance(c, dict) and c.get("requirement") in groups]
    order += [r for r in groups if r not in order]
    out = []
    for req in order:
        g = groups[req]
        g["counts"] = [(s, g["counts"][s]) for s in SEVERITY if s in g["counts"]]
        g["worst"] = g["counts"][0][0]
        methods = {str(row["v"].get("method") or "") for row in g["rows"]}
        g["method"] = methods.pop() if len(methods) == 1 else None  # said once when every verdict shares it
        values = sorted({row["measured"] for row in g["rows"] if row["v"].get("measured") is not None})
        g["shown"] = (values[0] if len(values) == 1 else f"{values[0]} to {values[-1]}") if values else ""
        g["rows"] = _merged(g["rows"])
        out.append(g)
    return out


def _attention(rows: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """FAIL, ERROR, INCONCLUSIVE and WARN verdicts, worst first, those of one requirement that share a status and a
    reason (their subject aside) in one entry that lists and links every subject."""
    out: Dict[Tuple[str, str, str, str], Dict[str, Any]] = {}
    for row in rows:
        v = row["v"]
        if v.get("status") not in ("FAIL", "ERROR", "INCONCLUSIVE", "WARN"):
            continue
        key = (str(v.get("status")), str(v.get("requirement")),
               finding_key(str(v.get("reason", "")), str(v.get("subject", ""))), str(v.get("remediation")))
        e = out.setdefault(key, {"status": key[0], "requirement": key[1], "subjects": [], "reasons": [],
                                 "remediation": v.get("remediation")})
        e["subjects"].append((v.get("subject"), row["index"]))
        e["reasons"].append((str(v.get("subject", "")), str(v.get("reason", ""))))
    entries = sorted(out.values(), key=lambda e: SEVERITY.index(e["status"]))
    for e in entries:
        e["reason"] = e["reasons"][0][1] if len(e["subjects"]) == 1 else grouped_reason(e["reasons"])
    return entries


def environment_line(v: Dict[str, Any]) -> str:
    """The test environment of a measured verdict in one line (its evidence's ``environment`` summary), or ""."""
    env = (v.get("evidence") or {}).get("environment") if isinstance(v.get("evidence"), dict) else None
    if not isinstance(env, dict) or not isinstance(env.get("summary"), dict):
        return ""
    summary = env["summary"]
    held = summary.get("held")
    head = ("held the rules" if held is True else "outside the rules: " + "; ".join(map(str, summary.get("moved") or []))
            if held is False else "not measured in part")
    parts = []
    for s in (summary.get("sensors") or {}).values():
        if isinstance(s, dict) and s.get("judged") and s.get("min_c") is not None:
            slope = s.get("slope_c_per_min")
            parts.append(f"{s.get('label')} {fmt(s['min_c'])}-{fmt(s['max_c'])} °C"
                         + (f" ({slope:+.2f} °C/min)" if isinstance(slope, (int, float)) else ""))
    dram = summary.get("dram") or {}
    if dram.get("windows"):
        parts.append(f"DRAM occupancy in band in {dram['windows_in_band']} of {dram['windows']} windows")
    numa = summary.get("numa") or {}
    if numa.get("bound") is not None:
        parts.append(f"NUMA {'bound' if numa['bound'] else 'not bound'}"
                     + (f" to node {numa['node']}" if numa.get("node") is not None else ""))
    parts += [f"not measured: {m}" for m in summary.get("not_measured") or []]
    window = env.get("window") or {}
    secs = window.get("seconds")
    return (head + (f" over {fmt(secs)} s" if isinstance(secs, (int, float)) and not env.get("simulated") else "")
            + (" — " + "; ".join(parts) if parts else ""))


def _render_html(report: Dict[str, Any]) -> str:
    verdicts = report["verdicts"]
    charts = _timeline_charts(verdicts)
    rows = []
    for i, v in enumerate(verdicts):
        has_series = isinstance(v.get("evidence"), dict) and bool(v["evidence"].get("series"))
        rows.append({"v": v, "index": i, "measured": _measured(v), "threshold": fmt(v.get("threshold")),
                     "charts": charts.get(i, []), "charts_left_out": has_series and i not in charts,
                     "excerpt": _excerpt(v.get("evidence") or {}), "environment": environment_line(v)})
    view = dict(report)
    view["rows"] = rows
    view["groups"] = _by_requirement(rows, report.get("coverage") or [])
    view["statuses"] = [s for s in SEVERITY if any(row["v"].get("status") == s for row in rows)]
    view["attention"] = _attention(rows)
    view["analytics_view"] = _analytics_view(report)
    view["limits"] = {"charts": MAX_TIMELINE_CHARTS, "excerpt": EVIDENCE_EXCERPT_CHARS}
    template = environment().get_template("report.html.jinja2")
    try:
        return template.render(r=view)
    except Exception as exc:  # jinja2's UndefinedError and any shape error of an altered analytics section
        if view["analytics_view"]["computed_now"]:
            raise
        # The stored analytics section is not what this version writes (an altered file): recompute it.
        view["analytics_view"] = _analytics_view(report, recompute=True)
        view["analytics_view"]["stored_unreadable"] = f"{type(exc).__name__}: {exc}"
        return template.render(r=view)


def markdown_cell(text: Any) -> str:
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
        lines.append(f"- tokens per watt at P99: {fmt(tpw.get('median_tokens_per_watt_p99'))} (median over cards)")
    elif tpw.get("status") == "derived":
        lines.append(f"- tokens per joule: {fmt(tpw.get('value'))} ({tpw.get('source')})")
    else:
        lines.append(f"- tokens per watt: {tpw.get('reason', 'not computed')}")
    return lines


def render_markdown(report: Dict[str, Any]) -> str:
    lines = [f"# SITS2026 conformance report: {report['summary']['result']}", ""]
    if report["platform"]["simulated"]:
        lines += ["**SIMULATED platform: not a conformance result.**", ""]
    lines += [f"- result: {markdown_cell(report['summary']['result'])}: {markdown_cell(report['summary'].get('result_reason', ''))}",
              f"- profile: `{markdown_cell(report['profile']['name'])}` ({markdown_cell(report['profile']['how'])})",
              f"- platform: {markdown_cell(report['platform']['label'])}",
              f"- level: {report['run']['level']}; completed: {report['run']['completed']}", "",
              "| requirement | subject | status | measured | threshold | reason |", "|---|---|---|---|---|---|"]
    for v in report["verdicts"]:
        cells = [v["requirement"], v["subject"], v["status"], _measured(v), fmt(v["threshold"]), v["reason"]]
        lines.append("| " + " | ".join(markdown_cell(c) for c in cells) + " |")
    lines += ["", "## Coverage of the SITS2026 catalogue", "", "| requirement | level | state | statuses |",
              "|---|---|---|---|"]
    for row in report.get("coverage") or []:
        cells = [row.get("requirement"), row.get("level"), row.get("state"), ", ".join(row.get("statuses") or [])]
        lines.append("| " + " | ".join(markdown_cell(c) for c in cells) + " |")
    from .analytics import ANALYTICS_VERSION

    a = report.get("analytics")
    if not (isinstance(a, dict) and a.get("version") == ANALYTICS_VERSION):
        a = analytics_section(report["verdicts"], report.get("profile") or {})
    if a.get("error"):
        return "\n".join(lines + ["", f"Analytics: {a['error']}"]) + "\n"
    try:
        lines += _markdown_analytics(a)
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
        lines += ["", f"Analytics: the section could not be read ({type(exc).__name__}: {exc})"]
    return "\n".join(lines) + "\n"


PCI_ADDRESS = re.compile(r"\b[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]\b")


def finding_key(reason: str, subject: str) -> str:
    """What makes two verdicts' findings the same: the reason with its subject and any PCI address aside (the
    same switch in front of eight GPUs names eight different bridges)."""
    return PCI_ADDRESS.sub("[address]", subject_free(reason, subject))


def grouped_reason(reasons: List[Tuple[str, str]]) -> str:
    """The reason of a group of (subject, reason): the shared text when only the subject differs, else the first
    subject's reason saying the others are alike."""
    free = {subject_free(r, s) for s, r in reasons}
    if len(free) == 1:
        return free.pop()
    return f"{reasons[0][1]} (shown for {reasons[0][0]}; the others alike, with their own addresses)"


def subject_free(reason: str, subject: str) -> str:
    """A reason with its subject taken out, so that the same finding on eight devices reads as one."""
    return reason.replace(subject, "[subject]") if subject and len(subject) > 2 else reason


#: Subject lines shown under a requirement at most (the rest are counted; the report has every one).
TERMINAL_GROUPS = 3
#: At most this many lines of one reason on the terminal (the report holds it whole).
TERMINAL_REASON_LINES = 8


def terminal_rows(report: Dict[str, Any], width: int = 120) -> List[Tuple[str, Optional[str]]]:
    """The terminal summary as (line, status to colour it by): one line per requirement (its counts by status, and
    the verdicts' measured value with the threshold), then, indented, one line per group of non-PASS subjects that
    share a status and a reason.  Reasons wrap to ``width`` (continuation lines indented further), never cut
    mid-word; a reason longer than :data:`TERMINAL_REASON_LINES` lines ends saying the rest is in the report."""
    import textwrap

    from ..catalogue import CATALOGUE
    from ..verdict import SEVERITY

    def clean(text: Any) -> str:
        return printable(str(text), keep="\n\t").replace("\n", " ").replace("\t", " ")

    def wrapped(text: str, status: Optional[str], indent: str, cont: str) -> List[Tuple[str, Optional[str]]]:
        lines = textwrap.wrap(text, width=max(40, width), initial_indent=indent, subsequent_indent=cont,
                              break_on_hyphens=False) or [indent.rstrip()]
        if len(lines) > TERMINAL_REASON_LINES:
            lines = lines[:TERMINAL_REASON_LINES] + [f"{cont}(the rest is in the report)"]
        return [(line, status) for line in lines]

    def listed(subjects: List[str]) -> str:
        if len(subjects) == 1:
            return subjects[0]
        shown = ", ".join(subjects[:3])
        return f"{len(subjects)} subjects ({shown}{f' and {len(subjects) - 3} more' if len(subjects) > 3 else ''})"

    by_req: Dict[str, List[Dict[str, Any]]] = {}
    for v in report["verdicts"]:
        by_req.setdefault(str(v.get("requirement")), []).append(v)
    order = [r for r in CATALOGUE if r in by_req] + sorted(r for r in by_req if r not in CATALOGUE)
    w_req = max([len(r) for r in order] + [11])
    rows: List[Tuple[str, Optional[str]]] = []
    for req in order:
        vs = by_req[req]
        statuses = [v["status"] for v in vs]
        worst_status = min(statuses, key=SEVERITY.index)
        counts = ", ".join(f"{statuses.count(s)} {s}" for s in SEVERITY if s in statuses)
        # The value shown is the verdicts' own measured value (never a figure taken from inside a reason).
        shown_from = [v for v in vs if v["status"] in ("PASS", "WARN", "WAIVED")] or \
            [v for v in vs if v["status"] in ("FAIL", "INCONCLUSIVE")]
        measured = sorted({_measured(v) for v in shown_from if v.get("measured") is not None})
        shown = (measured[0] if len(measured) == 1 else f"{measured[0]} to {measured[-1]}") if measured else ""
        threshold = next((fmt(v.get("threshold")) for v in shown_from if v.get("threshold")), "")
        detail = f"{shown} ({threshold})" if shown and threshold else shown
        groups: Dict[Tuple[str, str], List[str]] = {}
        first_reason: Dict[Tuple[str, str], str] = {}
        reasons: Dict[Tuple[str, str], List[Tuple[str, str]]] = {}
        for v in vs:
            if v["status"] != "PASS":
                reason = clean(v.get("reason", ""))
                key = (v["status"], finding_key(reason, clean(v.get("subject", ""))))
                groups.setdefault(key, []).append(clean(v.get("subject", "")))
                first_reason.setdefault(key, reason)
                reasons.setdefault(key, []).append((clean(v.get("subject", "")), reason))
        head = f"{req.ljust(w_req)}  {counts}"
        if not detail and len(groups) == 1 and len(next(iter(groups.values()))) == len(vs):
            # one finding for every verdict, and no value to show: it goes on the requirement's line
            key, subjects = next(iter(groups.items()))
            reason = first_reason[key] if len(subjects) == 1 else f"{grouped_reason(reasons[key])} ({listed(subjects)})"
            rows += wrapped(f"{head}: {reason}", worst_status, "", " " * (w_req + 4))
            continue
        rows += wrapped(f"{head}  {clean(detail)}" if detail else head, worst_status, "", " " * (w_req + 4))
        for k, (key, subjects) in enumerate(sorted(groups.items(), key=lambda g: SEVERITY.index(g[0][0]))):
            if k == TERMINAL_GROUPS:
                rows.append((f"    and {len(groups) - TERMINAL_GROUPS} more finding(s): every one is in the report",
                             None))
                break
            reason = first_reason[key] if len(subjects) == 1 else grouped_reason(reasons[key])
            rows += wrapped(f"{key[0]} {listed(subjects)}: {reason}", key[0], "    ", "        ")
    return rows


def result_line(report: Dict[str, Any]) -> str:
    """``result: CONFORMANT (why); counts`` - a simulated run says what it would be: ``result: SIMULATED:
    NON_CONFORMANT (a simulated platform is never conformant; why)``."""
    s = report["summary"]
    counts = ", ".join(f"{n} {k}" for k, n in s["counts"].items() if n)
    reason = str(s["result_reason"])
    if s["result"] == "SIMULATED" and s.get("simulated_as"):
        why = reason.split(": ", 1)[1].rsplit("; a simulated platform", 1)[0] if reason.startswith("would be ") \
            else reason
        head = f"SIMULATED: {s['simulated_as']} (a simulated platform is never conformant; {why})"
    else:
        head = f"{s['result']} ({reason})"
    return printable(f"result: {head}{'; ' + counts if counts else ''}")


def terminal_lines(report: Dict[str, Any], width: int = 120) -> List[str]:
    """The terminal summary as plain lines (``sits report render``), the result line last."""
    return [line for line, _ in terminal_rows(report, width)] + [result_line(report)]
