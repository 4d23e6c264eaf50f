"""`sits compare`: the decision matrix across platforms (SITS2026 A §4.1).

Each input is a stored JSON report of one platform.  The matrix has one column per platform and
rows for every requirement's status and measured value, the figures A §4.1's dimensions weigh
(compute, memory, NVMe, network), their normalised scores, the tier weights of the chosen service
class, and the ranking with what decided it.

Rules, stated in every output:

- Reports are compared only on what all of them decided (a requirement with a PASS, FAIL, WARN or
  WAIVED verdict in every report).  Reports of different suite versions or levels are common, and
  what one of them did not decide is listed as left out, never scored as zero.
- A figure is normalised across the platforms: value / best for a figure where higher is better,
  best / value where lower is better (1 = the best platform).  A dimension's score is the mean of its
  figures; a dimension with no figure in common is left out and the tier weights of the others are
  renormalised to sum 1 (said in the output).
- Ranking: a platform that FAILs a compared requirement ranks below every platform that does not;
  then by the weighted score, higher first.

Reports are untrusted input, read by the one report reader (:func:`pytest_sits.report.store.read_report`:
no link followed, size-limited, strict JSON, checked against the report schema); a bad file is a usage
error naming the file and the fix.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..report.analytics.metrics import DECIDED, decided_requirements, platform_metrics
from ..report.analytics.weights import DIMENSIONS, TIER_LABELS, TIER_WEIGHTS, tier_score
from ..catalogue import CATALOGUE
from ..report.render import environment, fmt, markdown_cell, printable
from ..verdict import FAIL, SEVERITY
from .base import add, err

CLASSES = tuple(TIER_WEIGHTS)
RULE = ("a platform that FAILs a requirement all reports decided ranks below every platform that does not; "
        "then by the A §4.1 weighted score (higher first); each figure normalised across the platforms "
        "(value/best when higher is better, best/value when lower is better), a dimension's score the mean "
        "of its figures")


#: Longest text a report contributes to one cell of the matrix (names, labels, units); the outputs stay bounded
#: whatever the reports hold, as the HTML report is.
MAX_TEXT = 80
#: Most lines of "left out" the outputs list (the rest are counted).
MAX_LEFT_OUT = 40


def _clip(text: Any, n: int = MAX_TEXT) -> str:
    text = str(text)
    return text if len(text) <= n else text[: n - 1] + "…"


def _names(files: Sequence[str], reports: Sequence[Dict[str, Any]]) -> List[str]:
    """One distinct label per report: its profile and platform kind; where two would read the same, each of them
    starts with the folder its report is in (and, were those equal too, its position), so that even a column cut
    to its width tells them apart."""
    base = [_clip(f"{_clip(r['profile']['name'], 40)} ({_clip(r['platform']['kind'], 20)})") for r in reports]
    same = {n for n in base if base.count(n) > 1}
    names = [f"{_clip(Path(files[i]).parent.name or Path(files[i]).name, 24)}: {n}" if n in same else n
             for i, n in enumerate(base)]
    dup = {n for n in names if names.count(n) > 1}
    return [f"#{i + 1} {n}" if n in dup else n for i, n in enumerate(names)]


def score_chart(m: Dict[str, Any]) -> str:
    """The weighted score of each platform per service class as horizontal bars (inline SVG, no library): the
    ranking's figures, drawn; a platform with no score has no bar and says so."""
    from markupsafe import escape

    names = [p["name"] for p in m["platforms"]]
    bar_h, gap, left, width = 16, 6, 230, 300
    parts: List[str] = []
    y = 0
    for cls, rk in m["rankings"].items():
        parts.append(f'<text x="0" y="{y + 13}" font-weight="bold">{escape(cls)} ({escape(rk["label"])})</text>')
        y += bar_h + gap
        for i in rk["order"]:
            s = rk["scores"][i]
            label = escape(_clip(names[i], 34))
            parts.append(f'<text x="0" y="{y + 12}">{label}</text>')
            if s is None:
                parts.append(f'<text x="{left}" y="{y + 12}" fill="#888">no score</text>')
            else:
                w = max(1, round(width * max(0.0, min(1.0, float(s)))))
                parts.append(f'<rect x="{left}" y="{y}" width="{w}" height="{bar_h}" fill="#4a7bb7">'
                             f'<title>{label}: {float(s):.3f}</title></rect>'
                             f'<text x="{left + w + 4}" y="{y + 12}">{float(s):.3f}</text>')
            y += bar_h + gap
        y += gap
    return (f'<svg xmlns="http://www.w3.org/2000/svg" role="img" viewBox="0 0 {left + width + 60} {y}" '
            f'width="100%" style="max-width:{left + width + 60}px" font-size="12" font-family="sans-serif">'
            f'<title>weighted score per platform (A §4.1; 1 is the best of these platforms)</title>'
            + "".join(parts) + "</svg>")


def _by_requirement(report: Dict[str, Any]) -> Dict[str, List[Dict[str, Any]]]:
    out: Dict[str, List[Dict[str, Any]]] = {}
    for v in report["verdicts"]:
        out.setdefault(v.get("requirement"), []).append(v)
    return out


def _status_cell(vs: List[Dict[str, Any]]) -> Dict[str, Any]:
    if not vs:
        return {"status": None, "measured": "-", "verdicts": 0}
    status = min((v["status"] for v in vs), key=SEVERITY.index)
    nums = [v["measured"] for v in vs if isinstance(v.get("measured"), (int, float))
            and not isinstance(v.get("measured"), bool)]
    unit = next((_clip(v.get("unit"), 16) for v in vs if v.get("unit")), None)
    if len(vs) == 1:
        text = fmt(vs[0].get("measured")) + (f" {unit}" if unit and vs[0].get("measured") is not None else "")
    elif nums:
        lo, hi = min(nums), max(nums)
        text = (fmt(lo) if lo == hi else f"{fmt(lo)}..{fmt(hi)}") + (f" {unit}" if unit else "")
    else:
        text = fmt(next((v.get("measured") for v in vs if v["status"] == status), None))
    return {"status": status, "measured": text, "verdicts": len(vs)}


def _normalise(values: List[float], better: str) -> List[float]:
    if better == "higher":
        best = max(values)
        return [1.0 if v == best else (v / best if best > 0 else 0.0) for v in values]
    best = min(values)
    return [1.0 if v == best else (best / v if v > 0 else 0.0) for v in values]


def _analytics_of(report: Dict[str, Any]) -> Dict[str, Any]:
    from ..report.analytics import ANALYTICS_VERSION, analyse

    a = report.get("analytics")
    if isinstance(a, dict) and a.get("version") == ANALYTICS_VERSION and not a.get("error"):
        return a
    try:
        return analyse(report)
    except Exception as exc:  # noqa: BLE001 - informational rows only; the matrix is still made
        return {"error": f"{type(exc).__name__}: {exc}"}


def compare(files: Sequence[str], reports: Sequence[Dict[str, Any]],
            classes: Sequence[str] = CLASSES) -> Dict[str, Any]:
    """The decision matrix of ``reports`` (``files`` name them) for each service class in ``classes``."""
    names = _names(files, reports)
    n = len(reports)
    platforms = [{"name": names[i], "file": _clip(files[i], 200), "profile": _clip(r["profile"]["name"]),
                  "platform": _clip(r["platform"]["label"]), "simulated": bool(r["platform"]["simulated"]),
                  "level": r["run"]["level"], "schema_version": _clip(r["schema_version"], 16),
                  "suite_version": _clip(r["generator"]["version"], 24), "result": _clip(r["summary"]["result"], 24)}
                 for i, r in enumerate(reports)]
    basis: List[str] = []
    for key, label in (("suite_version", "suite version"), ("schema_version", "report schema"), ("level", "level")):
        vals = sorted({p[key] for p in platforms})
        if len(vals) > 1:
            basis.append(f"{label} differs ({', '.join(vals)})")
    decided = [decided_requirements(r) for r in reports]
    # The matrix has a row per requirement of the catalogue; IDs a report holds beyond it (another version's, or
    # made up) are counted, not drawn.
    unknown = sorted({req for d in decided for req in d if req not in CATALOGUE})
    if unknown:
        basis.append(f"{len(unknown)} requirement ID(s) not in this version's catalogue left out "
                     f"({', '.join(_clip(u, 30) for u in unknown[:5])}{', ...' if len(unknown) > 5 else ''})")
    all_reqs = [req for req in CATALOGUE if any(req in d for d in decided)]
    grouped = [_by_requirement(r) for r in reports]
    common = {req for req in all_reqs if all(d.get(req) == "decided" for d in decided)}
    left_out: List[str] = []
    req_rows = []
    for req in all_reqs:
        cells = [_status_cell(g.get(req, [])) for g in grouped]
        row: Dict[str, Any] = {"requirement": req, "cells": cells, "compared": req in common}
        if req not in common:
            undecided = [f"{names[i]}: {decided[i].get(req, 'not run')}" for i in range(n)
                         if decided[i].get(req) != "decided"]
            row["why_not"] = "not decided in " + "; ".join(undecided)
            if any(decided[i].get(req) == "decided" for i in range(n)):
                left_out.append(f"{req}: {row['why_not']}")
        req_rows.append(row)
    # Figures by A §4.1 dimension, compared only where every report decided the requirement and has a value.
    per = [platform_metrics(r) for r in reports]
    metric_rows = []
    for key, meta in per[0].items():
        values = [p[key]["value"] for p in per]
        row = {k: meta[k] for k in ("key", "label", "dimension", "unit", "better", "requirement", "source")}
        row["values"] = values
        if meta["requirement"] not in common:
            row.update(compared=False, scores=[None] * n, why_not=f"{meta['requirement']} not decided in every report")
        elif any(v is None for v in values):
            missing = [names[i] for i, v in enumerate(values) if v is None]
            row.update(compared=False, scores=[None] * n, why_not=f"no value in {', '.join(missing)}")
            left_out.append(f"{meta['label']} ({meta['requirement']}): {row['why_not']}")
        else:
            row.update(compared=True, scores=[round(s, 4) for s in _normalise(values, meta["better"])])
        metric_rows.append(row)
    dims: Dict[str, List[Optional[float]]] = {}
    for d in DIMENSIONS:
        rows = [m for m in metric_rows if m["dimension"] == d and m["compared"]]
        dims[d] = [round(sum(m["scores"][i] for m in rows) / len(rows), 4) if rows else None for i in range(n)]
    fails = [sorted(req for req in common if any(v.get("requirement") == req and v.get("status") == FAIL
                                                 for v in r["verdicts"])) for r in reports]
    rankings = {}
    for cls in classes:
        scored = [tier_score({d: dims[d][i] for d in DIMENSIONS}, cls) for i in range(n)]
        scores = [s[0] for s in scored]
        used, left = scored[0][1], scored[0][2]
        ranked = [s if s is not None else -1 for s in scores]
        order = sorted(range(n), key=lambda i: (len(fails[i]), -ranked[i], names[i]))
        decided_by = [_why(order[k], order[k + 1], names, fails, scores, dims, used, metric_rows)
                      for k in range(n - 1)]
        rankings[cls] = {"label": TIER_LABELS[cls], "weights": TIER_WEIGHTS[cls], "used_weights": used,
                         "dimensions_left_out": left, "scores": [None if s is None else round(s, 4) for s in scores],
                         "order": order, "decided_by": decided_by}
        if left:
            rankings[cls]["note"] = (f"no figure in common for {', '.join(left)}: "
                                     f"{'that weight is' if len(left) == 1 else 'those weights are'} left out and "
                                     "the others renormalised to sum 1")
    info = []
    for _i, r in enumerate(reports):
        a = _analytics_of(r)
        tco = a.get("tco") or {}
        tpw = a.get("tokens_per_watt") or {}
        info.append({"tco_per_year": tco.get("total_per_year") if tco.get("status") == "computed" else None,
                     "tco_partial": tco.get("partial"), "currency": tco.get("currency"),
                     "tco_power_source": tco.get("power_source"),
                     "tokens_per_watt_p99": tpw.get("median_tokens_per_watt_p99") if tpw.get("status") == "measured"
                     else None, "analytics_error": a.get("error")})
    if len(left_out) > MAX_LEFT_OUT:
        left_out = left_out[:MAX_LEFT_OUT] + [f"... and {len(left_out) - MAX_LEFT_OUT} more"]
    return {"platforms": platforms, "basis": basis,
            "basis_note": ("reports differ: " + "; ".join(basis) + ". Compared only on the requirements every "
                           "report decided." if basis else "same suite version, schema and level"),
            "requirements": req_rows, "metrics": metric_rows, "dimensions": dims, "dimension_meaning": DIMENSIONS,
            "fails": fails, "rankings": rankings, "rule": RULE, "left_out": left_out, "informational": info,
            "informational_note": "TCO (site inputs declared in each profile) and tokens per watt are shown beside "
                                  "the ranking; A §4.1's weights do not include them",
            "decided_statuses": list(DECIDED)}


def _why(a: int, b: int, names, fails, scores, dims, used, metric_rows) -> str:
    if len(fails[a]) != len(fails[b]):
        return (f"{names[a]} ahead of {names[b]}: fewer failed requirements ({len(fails[a])}: "
                f"{', '.join(fails[a]) or 'none'}; against {len(fails[b])}: {', '.join(fails[b])})")
    sa, sb = scores[a], scores[b]
    if sa is None or sb is None:
        return f"{names[a]} ahead of {names[b]}: no weighted score to compare (no figure in common); ordered by name"
    if abs(sa - sb) < 1e-9:
        return f"{names[a]} and {names[b]} tie at {sa:.3f}; ordered by name"
    contrib = {d: w * ((dims[d][a] or 0) - (dims[d][b] or 0)) for d, w in used.items()}
    d = max(contrib, key=lambda k: contrib[k])
    figures = [m for m in metric_rows if m["dimension"] == d and m["compared"]]
    fig = max(figures, key=lambda m: m["scores"][a] - m["scores"][b]) if figures else None
    detail = (f": {fig['label']} {fig['values'][a]:.4g} against {fig['values'][b]:.4g} {fig['unit']}"
              if fig else "")
    return (f"{names[a]} ahead of {names[b]}: score {sa:.3f} against {sb:.3f}; the largest part of the difference "
            f"({contrib[d]:+.3f}) from {d} (weight {used[d]:.2f}){detail}")


# --------------------------------------------------------------------------
# Renderings


def _cell(v: Any) -> str:
    return fmt(v)


def matrix_rows(m: Dict[str, Any]) -> List[Tuple[str, List[str], str]]:
    """(row label, one cell per platform, note) for every row of the matrix, in display order."""
    rows: List[Tuple[str, List[str], str]] = []
    rows.append(("result", [p["result"] + (" (SIMULATED)" if p["simulated"] and p["result"] != "SIMULATED" else "")
                            for p in m["platforms"]], ""))
    rows.append(("level / suite", [f"{p['level']} / {p['suite_version']}" for p in m["platforms"]], ""))
    for r in m["requirements"]:
        cells = [f"{c['status'] or 'not run'} {c['measured']}" if c["status"] else "not run" for c in r["cells"]]
        rows.append((r["requirement"], cells, "" if r["compared"] else "not compared: " + r["why_not"]))
    for f in m["metrics"]:
        cells = [("-" if v is None else f"{_cell(v)} {f['unit']}") + ("" if s is None else f" -> {s:.3f}")
                 for v, s in zip(f["values"], f["scores"])]
        note = f"[{f['dimension']}] {f['better']} is better" + ("" if f["compared"] else f"; not compared: {f['why_not']}")
        rows.append((f"{f['label']}", cells, note))
    for d, vals in m["dimensions"].items():
        rows.append((f"score: {d}", ["-" if v is None else f"{v:.3f}" for v in vals],
                     " / ".join(f"{c} weight {rk['weights'][d]:g}" for c, rk in m["rankings"].items())))
    for cls, rk in m["rankings"].items():
        rows.append((f"weighted score: {cls}", ["-" if s is None else f"{s:.3f}" for s in rk["scores"]],
                     ", ".join(f"{d} {w:.3f}" for d, w in rk["used_weights"].items())))
        ranks = [0] * len(rk["order"])
        for pos, i in enumerate(rk["order"]):
            ranks[i] = pos + 1
        rows.append((f"rank: {cls}", [str(x) for x in ranks], ""))
    for key, label in (("tco_per_year", "TCO per card per year (declared site inputs)"),
                       ("tokens_per_watt_p99", "tokens per watt at P99")):
        cells = []
        for x in m["informational"]:
            v = x.get(key)
            cells.append("-" if v is None else f"{_cell(v)}" + (f" {x.get('currency')}" if key == "tco_per_year" else "")
                         + (" (partial)" if key == "tco_per_year" and x.get("tco_partial") else ""))
        rows.append((label, cells, "not in the ranking"))
    return rows


def _ranking_lines(m: Dict[str, Any]) -> List[str]:
    names = [p["name"] for p in m["platforms"]]
    out = []
    for cls, rk in m["rankings"].items():
        out.append(f"ranking for {cls} ({rk['label']}; A §4.1 weights "
                   + ", ".join(f"{d} {w:g}" for d, w in rk["weights"].items()) + "):")
        for pos, i in enumerate(rk["order"]):
            s = rk["scores"][i]
            out.append(f"  {pos + 1}. {names[i]}  score {'-' if s is None else f'{s:.3f}'}"
                       + (f"  FAIL: {', '.join(m['fails'][i])}" if m["fails"][i] else ""))
        for why in rk["decided_by"]:
            out.append(f"  - {why}")
        if rk.get("note"):
            out.append(f"  note: {rk['note']}")
    return out


def render_text(m: Dict[str, Any]) -> str:
    names = [p["name"] for p in m["platforms"]]
    rows = matrix_rows(m)
    w0 = min(max(len(r[0]) for r in rows), 44)
    widths = [min(max([len(names[i])] + [len(r[1][i]) for r in rows]), 30) for i in range(len(names))]

    def cut(t: str, k: int) -> str:
        return t if len(t) <= k else t[: k - 1] + "…"

    lines = [f"SITS2026 decision matrix ({len(names)} platforms): {m['basis_note']}"]
    if any(p["simulated"] for p in m["platforms"]):
        lines.append("SIMULATED reports among the inputs: figures from a simulated platform, not a measurement.")
    lines.append("  ".join([cut("", w0).ljust(w0)] + [cut(nm, widths[i]).ljust(widths[i]) for i, nm in enumerate(names)]))
    for label, cells, note in rows:
        text = "  ".join([cut(label, w0).ljust(w0)] + [cut(c, widths[i]).ljust(widths[i])
                                                        for i, c in enumerate(cells)])
        lines.append((text + (f"  # {note}" if note else "")).rstrip())
    lines.append("")
    lines += _ranking_lines(m)
    lines.append(f"rule: {m['rule']}")
    if m["left_out"]:
        lines.append("left out of the comparison:")
        lines += [f"  - {x}" for x in m["left_out"]]
    lines.append(m["informational_note"])
    # Names, labels and units come from the reports: no control character reaches the terminal.
    return "\n".join(printable(line) for line in lines) + "\n"


def render_markdown(m: Dict[str, Any]) -> str:
    """The matrix as Markdown: every text from the reports escaped (no raw HTML, no control characters, no
    column breaks)."""
    esc = markdown_cell
    names = [p["name"] for p in m["platforms"]]
    lines = ["# SITS2026 decision matrix", "", esc(m["basis_note"]), ""]
    if any(p["simulated"] for p in m["platforms"]):
        lines += ["**SIMULATED reports among the inputs: not measurements.**", ""]
    lines.append("| | " + " | ".join(esc(n) for n in names) + " | note |")
    lines.append("|---" * (len(names) + 2) + "|")
    for label, cells, note in matrix_rows(m):
        lines.append("| " + " | ".join(esc(x) for x in [label] + cells + [note]) + " |")
    lines += ["", *[esc(x.strip()) for x in _ranking_lines(m)], "", f"Rule: {esc(m['rule'])}.", ""]
    if m["left_out"]:
        lines += ["Left out of the comparison:", ""] + [f"- {esc(x)}" for x in m["left_out"]] + [""]
    lines.append(esc(m["informational_note"]) + ".")
    return "\n".join(lines) + "\n"


def render_html(m: Dict[str, Any]) -> str:
    from markupsafe import Markup

    return environment().get_template("compare.html.jinja2").render(
        m=m, rows=matrix_rows(m), ranking=_ranking_lines(m), chart=Markup(score_chart(m)))


EXAMPLES = """\
  sits compare h100/sits-report.json a100/sits-report.json l40s/sits-report.json
  sits compare a.json b.json --class=low-latency --html=matrix.html --markdown=matrix.md
"""


def add_parser(sub: Any) -> None:
    p = add(sub, "compare", "decision matrix across platforms from their reports (A §4.1)", EXAMPLES)
    p.add_argument("reports", nargs="+", metavar="REPORT.json", help="one report per platform")
    p.add_argument("--class", dest="service_class", choices=["low-latency", "batch"],
                   help="service class whose A §4.1 tier weights rank the platforms (default: both)")
    p.add_argument("--html", metavar="OUT", help="also write the matrix as self-contained HTML")
    p.add_argument("--markdown", metavar="OUT", help="also write the matrix as Markdown")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """The decision matrix across platforms (A §4.1) from their stored reports."""
    from ..files import UntrustedInputError, atomic_write
    from ..report.store import read_report

    if len(args.reports) < 2:
        return err("`sits compare` needs two reports or more (one per platform), e.g. "
                   "`sits compare h100/sits-report.json a100/sits-report.json`")
    try:
        reports = [read_report(path) for path in args.reports]
    except UntrustedInputError as exc:
        return err(str(exc))
    except OSError as exc:
        return err(f"{exc.filename}: cannot be read ({exc.strerror}); fix: check the path; a report is the "
                   "sits-report.json of a run")
    classes = [args.service_class] if args.service_class else list(CLASSES)
    matrix = compare(args.reports, reports, classes)
    try:
        if args.html:
            atomic_write(Path(args.html), render_html(matrix))
        if args.markdown:
            atomic_write(Path(args.markdown), render_markdown(matrix))
    except OSError as exc:
        return err(f"{exc.filename}: cannot write ({exc.strerror}); choose a writable path")
    print(render_text(matrix), end="")
    return 0
