"""Charts for the HTML report, drawn with matplotlib as inline SVG (no script, no network).

matplotlib is imported here, lazily, only when a report is rendered (``matplotlib.use("Agg")``, no
pyplot state); without it each chart is a one-line note with the install command.

- :func:`line_chart` draws one evidence ``series``: ``{"title", "unit", "x": [...], "y": [...],
  "band": [lo, hi] | None, "mark_from": x | None}`` (the hold's occupancy, a thermal trace).  A long
  series is downsampled for the picture only (:func:`downsample`); the JSON keeps every point.
- :func:`heatmap_chart` and :func:`pareto_chart` draw the report's ``analytics.heatmap``.

Text stays text in the SVG (``svg.fonttype: none``), titles are escaped by matplotlib's SVG writer,
and each chart gets its own id salt so that several inline SVGs in one page do not share ids.
"""

from __future__ import annotations

import io
import itertools
import math
import re
from typing import Any, Dict, List, Optional, Sequence, Tuple

from markupsafe import Markup, escape

INSTALL = "pip install 'pytest-sits[analytics]'"
#: Points drawn per timeline at most (min and max of each bucket are kept, so spikes stay visible).
MAX_POINTS = 600
_ids = itertools.count()


class _NoMatplotlib(Exception):
    pass


def _mpl():
    try:
        import matplotlib
    except ImportError:
        raise _NoMatplotlib() from None
    if matplotlib.get_backend().lower() != "agg":
        matplotlib.use("Agg")
    from matplotlib.figure import Figure

    return matplotlib, Figure


def _note(text: str) -> Markup:
    return Markup("<p class='small'>{}</p>").format(text)


def _missing(what: str) -> Markup:
    return _note(f"{what}: not drawn, matplotlib is not installed ({INSTALL})")


def _num(v: Any) -> Optional[float]:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


_XML_HEAD = re.compile(r"^.*?(?=<svg)", re.S)


def _svg(fig, title: str, tight: bool = True) -> Markup:
    """The figure as an inline ``<svg>`` element.  ``tight=False`` keeps the figure's own margins (a
    tight bounding box draws the figure twice: timelines, drawn by the dozen, set their margins instead)."""
    matplotlib, _ = _mpl()
    from matplotlib.text import Text

    # Every text is drawn as written: titles and labels carry names from reports and profiles, and a `$` in one
    # would be parsed as mathtext (a broken formula raises while the figure is drawn).
    for t in fig.findobj(Text):
        t.set_parse_math(False)
    buf = io.StringIO()
    n = next(_ids)
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": f"sits-chart-{n}"}):
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None},
                    bbox_inches="tight" if tight else None)
    text = _XML_HEAD.sub("", buf.getvalue(), count=1)
    # matplotlib numbers its groups per figure (axes_1, line2d_1, ...): prefix every id and reference so that
    # the charts of one page never share one.
    prefix = f"sc{n}-"
    text = text.replace(' id="', f' id="{prefix}').replace('href="#', f'href="#{prefix}').replace(
        "url(#", f"url(#{prefix}")
    text = text.replace("<svg ", f"<svg role=\"img\" aria-label=\"{escape(title)}\" ", 1)
    return Markup(text)


def downsample(xs: Sequence[float], ys: Sequence[float], max_points: int = MAX_POINTS) -> Tuple[List[float], List[float]]:
    """At most ``max_points`` points: the series cut into max_points/2 buckets, each giving its lowest and
    highest point in time order.  The picture keeps the envelope (spikes, excursions out of a band)."""
    n = len(xs)
    if n <= max_points:
        return list(xs), list(ys)
    import numpy as np

    x = np.asarray(xs, dtype=float)
    y = np.asarray(ys, dtype=float)
    buckets = max(1, max_points // 2)
    edges = np.linspace(0, n, buckets + 1).astype(int)
    keep: List[int] = []
    for a, b in zip(edges[:-1], edges[1:]):
        if b <= a:
            continue
        seg = y[a:b]
        i, j = a + int(np.argmin(seg)), a + int(np.argmax(seg))
        keep.extend(sorted({i, j}))
    return x[keep].tolist(), y[keep].tolist()


def _runs(pts: List[Tuple[float, Optional[float]]]) -> List[List[Tuple[float, float]]]:
    """The points split into runs: at a point without a value, and where time jumps by more than five times the
    usual step (a pause in the recording). Each run is drawn alone: a gap stays a gap."""
    steps = sorted(b[0] - a[0] for a, b in zip(pts, pts[1:]) if b[0] > a[0])
    jump = 5 * steps[len(steps) // 2] if steps else float("inf")
    runs: List[List[Tuple[float, float]]] = [[]]
    prev_x = None
    for x, y in pts:
        if y is None or (prev_x is not None and x - prev_x > jump):
            if runs[-1]:
                runs.append([])
        if y is not None:
            runs[-1].append((x, y))
        prev_x = x
    return [r for r in runs if r]


def line_chart(series: Dict[str, Any]) -> Markup:
    """One timeline with its band (green), the measured part (blue shade from ``mark_from``) and its gaps (grey:
    no reading, e.g. the load paused while its reference was re-measured)."""
    raw = [(_num(x), _num(y) if y is not None else None) for x, y in zip(series.get("x") or [], series.get("y") or [])]
    pts = [(x, y) for x, y in raw if x is not None]
    runs = _runs(pts)
    title = f"{series.get('title', '')} ({series.get('unit', '')})"
    if sum(len(r) for r in runs) < 2:
        return _note(f"{title}: fewer than two points")
    try:
        _, Figure = _mpl()
    except _NoMatplotlib:
        return _missing(title)
    fig = Figure(figsize=(6.6, 2.1), dpi=100)
    ax = fig.add_subplot()
    band = series.get("band")
    if isinstance(band, (list, tuple)) and len(band) == 2 and _num(band[0]) is not None and _num(band[1]) is not None:
        ax.axhspan(float(band[0]), float(band[1]), color="#7bbf7b", alpha=0.25, lw=0, label="band")
    last_x = pts[-1][0]
    mark = _num(series.get("mark_from"))
    if mark is not None:
        ax.axvspan(mark, last_x, color="#2060c0", alpha=0.08, lw=0, label="measured")
    gap_label = series.get("gap_label") or "no reading"
    for a, b in zip(runs, runs[1:]):
        ax.axvspan(a[-1][0], b[0][0], color="#999999", alpha=0.25, lw=0, label=gap_label)
        gap_label = None  # one legend entry
    total = drawn = 0
    for run in runs:
        xs, ys = downsample([p[0] for p in run], [p[1] for p in run])
        total, drawn = total + len(run), drawn + len(xs)
        ax.plot(xs, ys, color="#1f4e9a", lw=1.0)
    ax.set_title(title + (f" — {total} points, {drawn} drawn" if drawn < total else "")
                 + (f", {len(runs) - 1} gap(s)" if len(runs) > 1 else ""), fontsize=9, loc="left")
    ax.set_xlabel("time (s)", fontsize=8)
    ax.tick_params(labelsize=7)
    # Few ticks: tick objects are most of a small chart's drawing time, and a dozen are drawn per page.
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(6))
    ax.yaxis.set_major_locator(MaxNLocator(4))
    ax.grid(True, lw=0.3, alpha=0.5)
    if len(runs) > 1:
        ax.legend(fontsize=7, loc="lower right", framealpha=0.6)
    fig.subplots_adjust(left=0.08, right=0.98, top=0.87, bottom=0.2)
    return _svg(fig, title, tight=False)


def meaningful_limits(lo: float, hi: float, min_share: float = 0.1) -> Tuple[float, float]:
    """Axis limits that show a range worth reading: data spanning less than ``min_share`` of its magnitude (a
    power axis of 0.3 W around 600 W) is shown over that share, centred, so a flat quantity looks flat."""
    span, mag = hi - lo, max(abs(lo), abs(hi))
    need = min_share * mag
    if mag == 0 or span >= need:
        return lo, hi
    mid = (lo + hi) / 2
    return mid - need / 2, mid + need / 2


def charts_for(evidence: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The evidence's timelines as charts: ``[{"svg": Markup}]``."""
    series = evidence.get("series") if isinstance(evidence, dict) else None
    return [{"svg": line_chart(s)} for s in series or [] if isinstance(s, dict)]


def _grid(rows: List[List[Any]]):
    import numpy as np

    return np.array([[float("nan") if v is None else float(v) for v in row] for row in rows], dtype=float)


def heatmap_chart(hm: Dict[str, Any], points: Sequence[Dict[str, Any]] = ()) -> Markup:
    """A §2.5's heat map: (left) interpolated P99 latency over load × power with the measured points;
    (right) the SLA-weighted score of the grid points the Pareto pruning kept, dominated ones grey."""
    title = "heat map: power x P99 latency x load"
    if hm.get("status") != "drawn":
        return _note(f"{title}: not drawn ({hm.get('reason', 'no data')})")
    try:
        _, Figure = _mpl()
    except _NoMatplotlib:
        return _missing(title)
    import numpy as np

    grid = hm["interpolation"]
    from matplotlib.ticker import MaxNLocator

    fig = Figure(figsize=(11.5, 3.8), dpi=100, layout="constrained")
    ax1, ax2 = fig.subplots(1, 2)
    px = [p["rho"] for p in points if p.get("power_w") is not None]
    py = [p["power_w"] for p in points if p.get("power_w") is not None]
    if grid["mode"] == "surface":
        x, y = grid["x"], grid["y"]
        ext = (x[0], x[-1], y[0], y[-1])
        lat = _grid(grid["values"]["latency_ms"])
        im = ax1.imshow(lat, origin="lower", extent=ext, aspect="auto", cmap="viridis", interpolation="nearest")
        fig.colorbar(im, ax=ax1, label="P99 latency (ms)")
        mask = np.array([[m is False for m in row] for row in hm["pareto"]["mask"]])
        grey = np.where(mask, 1.0, np.nan)
        ax2.imshow(grey, origin="lower", extent=ext, aspect="auto", cmap="Greys", vmin=0, vmax=3,
                   interpolation="nearest")
        sc = _grid(hm["score"])
        im2 = ax2.imshow(sc, origin="lower", extent=ext, aspect="auto", cmap="RdYlGn_r", interpolation="nearest")
        fig.colorbar(im2, ax=ax2, label="SLA-weighted score (lower is better)")
    else:
        x, y = grid["x"], grid["y"]
        s1 = ax1.scatter(x, y, c=grid["values"]["latency_ms"], cmap="viridis", s=14, lw=0)
        fig.colorbar(s1, ax=ax1, label="P99 latency (ms)")
        kept = [i for i, m in enumerate(hm["pareto"]["mask"]) if m]
        drop = [i for i, m in enumerate(hm["pareto"]["mask"]) if m is False]
        ax2.scatter([x[i] for i in drop], [y[i] for i in drop], color="#bbbbbb", s=10, lw=0, label="dominated")
        s2 = ax2.scatter([x[i] for i in kept], [y[i] for i in kept], c=[hm["score"][i] for i in kept],
                         cmap="RdYlGn_r", s=14, lw=0)
        fig.colorbar(s2, ax=ax2, label="SLA-weighted score (lower is better)")
    ys = [v for v in py + list(grid["y"]) if v is not None]
    ylim = meaningful_limits(min(ys), max(ys)) if ys else None
    for ax in (ax1, ax2):
        ax.scatter(px, py, s=12, facecolor="none", edgecolor="black", lw=0.7, label="measured")
        if ylim is not None:
            ax.set_ylim(*ylim)  # a power that hardly moved is shown as flat, not blown up to fill the axis
        ax.set_xlabel("load ρ (share of peak)", fontsize=8)
        ax.set_ylabel("power (W)", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.xaxis.set_major_locator(MaxNLocator(5))
        ax.yaxis.set_major_locator(MaxNLocator(6))
    best = hm.get("best")
    if best:
        ax2.plot([best["rho"]], [best["power_w"]], marker="*", color="black", ms=11, ls="none",
                 label="best score meeting the SLA")
    ax1.set_title(f"1. interpolated ({'Clough-Tocher' if grid['mode'] == 'surface' else 'PCHIP along load'})",
                  fontsize=9, loc="left")
    ax2.set_title(f"2-3. Pareto kept {hm['pareto']['kept']}, dropped {hm['pareto']['dropped']}; SLA score",
                  fontsize=9, loc="left")
    ax2.legend(fontsize=7, loc="upper left")
    return _svg(fig, title)


def pareto_chart(hm: Dict[str, Any], points: Sequence[Dict[str, Any]] = (),
                 front: Sequence[int] = ()) -> Markup:
    """The Pareto front: P99 latency against throughput, error rate as colour; dominated grid points grey,
    measured points as crosses, the measured points on the front ringed."""
    title = "Pareto front: P99 latency, error rate, throughput"
    if hm.get("status") != "drawn":
        return _note(f"{title}: not drawn ({hm.get('reason', 'no data')})")
    try:
        _, Figure = _mpl()
    except _NoMatplotlib:
        return _missing(title)
    grid = hm["interpolation"]
    vals = grid["values"]
    cells: List[Tuple[float, float, float, Any]] = []
    if grid["mode"] == "surface":
        for iy, row in enumerate(hm["pareto"]["mask"]):
            for ix, m in enumerate(row):
                if m is not None:
                    cells.append((vals["latency_ms"][iy][ix], vals["throughput_qps"][iy][ix],
                                  vals["error_rate_pct"][iy][ix], m))
    else:
        for i, m in enumerate(hm["pareto"]["mask"]):
            if m is not None:
                cells.append((vals["latency_ms"][i], vals["throughput_qps"][i], vals["error_rate_pct"][i], m))
    fig = Figure(figsize=(6.6, 3.4), dpi=100)
    ax = fig.add_subplot()
    drop = [c for c in cells if c[3] is False]
    kept = [c for c in cells if c[3] is True]
    ax.scatter([c[0] for c in drop], [c[1] for c in drop], color="#cccccc", s=8, lw=0, rasterized=True,
               label=f"dominated grid points ({len(drop)})")
    errs = [c[2] for c in kept]
    s = ax.scatter([c[0] for c in kept], [c[1] for c in kept], c=errs, cmap="plasma", s=14, lw=0,
                   vmin=0.0, vmax=max(errs + [1e-3]), rasterized=True, label=f"kept grid points ({len(kept)})")
    fig.colorbar(s, ax=ax, label="error rate (%)")
    mx = [p["p99_latency_s"] * 1000 for p in points]
    my = [p["throughput_qps"] for p in points]
    ax.scatter(mx, my, marker="x", color="black", s=18, lw=0.8, label=f"measured ({len(mx)})")
    ax.scatter([mx[i] for i in front if i < len(mx)], [my[i] for i in front if i < len(my)], s=70,
               facecolor="none", edgecolor="#d00000", lw=1.0, label="measured, on the front")
    ax.set_xlabel("P99 latency (ms, lower is better)", fontsize=8)
    ax.set_ylabel("throughput (req/s, higher is better)", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.grid(True, lw=0.3, alpha=0.5)
    ax.legend(fontsize=7, loc="lower right")
    ax.set_title(title, fontsize=9, loc="left")
    return _svg(fig, title)
