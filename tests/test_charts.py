"""Charts (matplotlib, inline SVG) and the HTML/Markdown renderings of a report."""

import copy
import json
import re

import pytest

from pytest_sits.report import charts
from pytest_sits.report import render as report
from pytest_sits.report.analytics import analyse

from test_analytics import SITE, make_report, make_sweep


def series(n, title="occupancy"):
    return {"title": title, "unit": "share", "x": [i * 0.1 for i in range(n)],
            "y": [0.88 + (0.05 if i == n // 2 else 0.0) for i in range(n)], "band": [0.85, 0.92], "mark_from": 1.0}


def full_report(verdicts, analytics_of=None):
    r = make_report()
    r.update({"verdicts": verdicts, "summary": {"result": "SIMULATED", "result_reason": "sim",
                                                "counts": {"PASS": len(verdicts)}},
              "platform": {"kind": "sim", "label": "sim:h100", "simulated": True},
              "run": {"level": "full", "completed": True, "started_at": "a", "finished_at": "b", "duration_s": 1,
                      "exit_status": 0},
              "environment": {"hostname": "h", "python": "3", "os": "linux"},
              "generator": {"version": "0"}, "coverage": [], "status_meaning": {},
              "inventory": {"accelerators": [], "cpu": {}, "memory": {}, "numa": [], "pci": []}})
    r["profile"].update(how="option", why="", path="p")
    if analytics_of is not None:
        r["analytics"] = analyse(analytics_of)
    return r


def verdict(req="MEM-BW-HOLD", status="PASS", evidence=None, i=0):
    return {"requirement": req, "status": status, "subject": f"s{i}", "measured": 0.97, "unit": "share",
            "reason": "ok", "threshold": ">= 95%", "remediation": "fix it" if status == "FAIL" else None,
            "nodeid": f"t::{i}", "simulated": True, "evidence": evidence or {}, "method": None, "waiver": None}


def test_downsample_keeps_the_envelope_and_at_most_max_points():
    xs = list(range(10000))
    ys = [0.0] * 10000
    ys[4321] = 9.0
    ys[777] = -3.0
    dx, dy = charts.downsample(xs, ys, 600)
    assert len(dx) <= 600 and max(dy) == 9.0 and min(dy) == -3.0 and dx == sorted(dx)
    assert charts.downsample([1, 2], [3, 4], 600) == ([1, 2], [3, 4])


def test_line_chart_is_svg_with_its_title_escaped_and_the_json_untouched():
    s = series(3000, title="<script>alert(1)</script> occupancy")
    before = copy.deepcopy(s)
    svg = str(charts.line_chart(s))
    assert svg.startswith("<svg") and svg.rstrip().endswith("</svg>")
    assert "<script>" not in svg and "&lt;script&gt;" in svg
    assert "3000 points, 600 drawn" in svg or "3000 points" in svg
    assert s == before  # the picture is downsampled, the evidence is not


@pytest.mark.parametrize("title", ["$\\frac{$ broken", "cost $5 and $6", "$x^$"])
def test_a_dollar_in_a_title_is_drawn_as_written_never_parsed_as_a_formula(title):
    svg = str(charts.line_chart(dict(series(50, title=title), unit="W")))
    assert svg.startswith("<svg") and title.replace("$", "") in svg.replace("$", "")


def test_line_chart_with_too_few_points_says_so():
    assert "fewer than two points" in charts.line_chart({"title": "t", "unit": "u", "x": [1], "y": [2]})


def test_each_chart_has_its_own_ids():
    a, b = str(charts.line_chart(series(50))), str(charts.line_chart(series(50)))
    ids_a = set(re.findall(r'id="([^"]+)"', a))
    ids_b = set(re.findall(r'id="([^"]+)"', b))
    assert ids_a and not (ids_a & ids_b)


def test_without_matplotlib_a_chart_is_a_note_with_the_install_command(monkeypatch):
    def missing():
        raise charts._NoMatplotlib()

    monkeypatch.setattr(charts, "_mpl", missing)
    assert "matplotlib is not installed (pip install" in charts.line_chart(series(10))
    assert "pytest-sits[analytics]" in charts.line_chart(series(10))
    hm = analyse(make_report([make_sweep(c) for c in (350, 700)]))["heatmap"]
    assert "not installed" in charts.heatmap_chart(hm)


@pytest.mark.parametrize("caps", [(350, 450, 550, 700), (700,)])
def test_heatmap_and_pareto_charts_draw_surface_and_curve(caps):
    a = analyse(make_report([make_sweep(c) for c in caps]))
    assert a["heatmap"]["interpolation"]["mode"] == ("surface" if len(caps) > 1 else "curve")
    hm = str(charts.heatmap_chart(a["heatmap"], a["sweep"]["points"]))
    par = str(charts.pareto_chart(a["heatmap"], a["sweep"]["points"], a["pareto"]["front"]))
    assert hm.startswith("<svg") and "P99 latency (ms)" in hm and "Pareto kept" in hm
    assert par.startswith("<svg") and "Pareto front" in par


def test_html_report_shows_heatmap_pareto_weights_and_tco():
    r = full_report([], analytics_of=make_report([make_sweep(c) for c in (350, 450, 550, 700)], site=SITE))
    html = report.render_html(r)
    assert "heat map: power x P99 latency x load" in html and "Pareto front" in html
    assert "Clough-Tocher" in html and "does not follow from its own formula" in html
    assert "declared, not measured" in html and "11" in html
    md = report.render_markdown(r)
    assert "does not follow from its own formula" in md and "Pareto pruning" in md


def test_html_report_without_sweep_says_no_sweep_measured():
    r = full_report([verdict()])
    html = report.render_html(r)  # no analytics section stored: computed at render time
    assert "no sweep measured" in html and "<svg" not in html.split("Analytics")[1].split("Coverage")[0]
    assert "Computed when this page was rendered" in html


def test_html_bounds_charts_and_evidence_but_keeps_the_json():
    big = {"timeline": [{"t": i, "occupancy": 0.88} for i in range(300)], "series": [series(300)]}
    vs = [verdict(evidence=big, i=i, status="FAIL" if i == 25 else "PASS") for i in range(30)]
    r = full_report(vs)
    before = json.dumps(r, sort_keys=True)
    html = report.render_html(r)
    assert html.count("<svg") == report.MAX_TIMELINE_CHARTS
    assert html.count("Timeline not drawn here") == 30 - report.MAX_TIMELINE_CHARTS
    assert 'id="v25"' in html and "verdicts[25].evidence.series" not in html  # the FAIL is drawn first
    excerpt = report._excerpt(big)
    assert len(excerpt) <= report.EVIDENCE_EXCERPT_CHARS + 4 and "more" in excerpt
    assert json.dumps(r, sort_keys=True) == before


def test_a_stored_analytics_section_that_is_malformed_is_recomputed():
    r = full_report([verdict()])
    from pytest_sits.report.analytics import ANALYTICS_VERSION

    r["analytics"] = {"version": ANALYTICS_VERSION, "sweep": {"status": "measured"}, "heatmap": {"status": "drawn"}}
    html = report.render_html(r)
    assert "could not be read" in html and "no sweep measured" in html


def test_excerpt_is_bounded_whatever_the_evidence():
    deep = {"a": [{"b": "x" * 10000}] * 1000, "c": {"d": list(range(100000))}}
    assert len(report._excerpt(deep, 500)) <= 504
    assert report.fmt({"k": list(range(1000))}).endswith("more]}")


def test_a_timeline_gap_is_drawn_as_a_gap():
    """The hold pauses while the peak is re-measured: no line joins the windows either side of the pause."""
    xs = [0.1 * i for i in range(40)] + [10 + 0.1 * i for i in range(40)]
    ys = [0.88] * 40 + [0.89] * 40
    ys[20] = None  # a window without a reading
    svg = str(charts.line_chart({"title": "occupancy", "unit": "fraction of peak", "x": xs, "y": ys,
                                 "gap_label": "load paused"}))
    assert "2 gap(s)" in svg and "load paused" in svg
    runs = charts._runs(list(zip(xs, ys)))
    assert [len(r) for r in runs] == [20, 19, 40]  # split at the missing reading and at the 6 s jump


def test_axis_limits_show_a_flat_quantity_flat():
    lo, hi = charts.meaningful_limits(594.4, 594.7)  # 0.3 W around 600 W
    assert hi - lo == pytest.approx(59.47) and lo < 594.4 and hi > 594.7
    assert charts.meaningful_limits(100.0, 700.0) == (100.0, 700.0)
