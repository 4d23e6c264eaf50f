"""Inline SVG line charts for the HTML report (no script, no network).

A verdict's evidence may carry ``series``: a list of
``{"title", "unit", "x": [...], "y": [...], "band": [lo, hi] | None, "mark_from": x | None}``.
Numbers are formatted by this module; titles are escaped.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from markupsafe import Markup, escape

W, H, PAD_L, PAD_R, PAD_T, PAD_B = 640, 200, 56, 12, 22, 28


def _num(v: Any) -> Optional[float]:
    return float(v) if isinstance(v, (int, float)) and v == v else None


def line_chart(series: Dict[str, Any]) -> Markup:
    pts = [(_num(x), _num(y)) for x, y in zip(series.get("x", []), series.get("y", []))]
    pts = [(x, y) for x, y in pts if x is not None and y is not None]
    title = escape(f"{series.get('title', '')} ({series.get('unit', '')})")
    if len(pts) < 2:
        return Markup(f"<p class='small'>{title}: fewer than two points</p>")
    band = series.get("band") or None
    xs = [p[0] for p in pts]
    ys = [p[1] for p in pts] + ([float(b) for b in band] if band else [])
    x0, x1 = min(xs), max(xs)
    y0, y1 = min(ys), max(ys)
    pad = (y1 - y0) * 0.08 or 1.0
    y0, y1 = y0 - pad, y1 + pad
    sx = lambda x: PAD_L + (x - x0) / ((x1 - x0) or 1) * (W - PAD_L - PAD_R)  # noqa: E731
    sy = lambda y: PAD_T + (y1 - y) / ((y1 - y0) or 1) * (H - PAD_T - PAD_B)  # noqa: E731
    parts = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{W}' height='{H}' viewBox='0 0 {W} {H}' "
             f"role='img' aria-label='{title}'>",
             f"<rect x='0' y='0' width='{W}' height='{H}' fill='#fff' stroke='#ccc'/>",
             f"<text x='{PAD_L}' y='14' font-size='12'>{title}</text>"]
    if band:
        lo, hi = float(band[0]), float(band[1])
        parts.append(f"<rect x='{PAD_L}' y='{sy(hi):.1f}' width='{W - PAD_L - PAD_R}' height='{sy(lo) - sy(hi):.1f}' "
                     "fill='#d8f0d8' stroke='#7bbf7b' stroke-dasharray='3,2'/>")
    mark = _num(series.get("mark_from"))
    if mark is not None:
        parts.append(f"<rect x='{sx(mark):.1f}' y='{PAD_T}' width='{sx(x1) - sx(mark):.1f}' "
                     f"height='{H - PAD_T - PAD_B}' fill='#2060c0' fill-opacity='0.07'/>")
    for v in (y0 + pad, (y0 + y1) / 2, y1 - pad):
        parts.append(f"<text x='4' y='{sy(v) + 4:.1f}' font-size='10'>{v:.4g}</text>")
    parts.append(f"<text x='{PAD_L}' y='{H - 8}' font-size='10'>{x0:.4g}</text>"
                 f"<text x='{W - PAD_R - 40}' y='{H - 8}' font-size='10'>{x1:.4g}</text>")
    path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in pts)
    parts.append(f"<polyline fill='none' stroke='#1f4e9a' stroke-width='1.2' points='{path}'/>")
    parts.append("</svg>")
    return Markup("".join(parts))


def charts_for(evidence: Dict[str, Any]) -> List[Dict[str, Any]]:
    return [{"svg": line_chart(s)} for s in evidence.get("series", []) if isinstance(s, dict)]
