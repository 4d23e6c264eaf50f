"""Stage 1 of the heat map: cubic interpolation between sparse sweep points.

The sweep points are scattered in the load × power plane (each sweep step
gives one load ρ and one power reading), not laid on a rectangular grid, so
a bicubic spline on a grid does not apply without first inventing the grid
values.  The scheme used is Clough–Tocher
(``scipy.interpolate.CloughTocher2DInterpolator``): a piecewise cubic on a
Delaunay triangulation of the measured points, C1 (continuous gradient, as
A §2.5 asks of its bicubic spline), exact at the measured points, and with
no value outside their convex hull: the map is left blank there rather than
extrapolated.  A smoothing spline (``SmoothBivariateSpline``) would not pass
through the measurements, and a spline on a grid would need the grid first.

When the points do not span an area (one device swept along one load axis
gives points on one curve of the plane), there is nothing to interpolate
across: the values are then interpolated along the load axis with PCHIP
(``scipy.interpolate.PchipInterpolator``, a C1 piecewise cubic that keeps
the data's monotonicity, so no overshoot between points), and the map shows
that curve.

scipy is imported here, lazily; :class:`MissingDependency` says how to
install it.
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Mapping, Optional, Sequence

import numpy as np  # surface is imported only when a sweep is interpolated

SURFACE_SCHEME = (
    "Clough-Tocher (scipy.interpolate.CloughTocher2DInterpolator): piecewise cubic on a Delaunay triangulation "
    "of the measured points, C1, exact at the points, blank (not extrapolated) outside their convex hull. "
    "Chosen over a bicubic spline because sweep points are scattered in the load x power plane, not on a grid.")
CURVE_SCHEME = (
    "PCHIP along load (scipy.interpolate.PchipInterpolator): the points lie on one curve of the load x power "
    "plane (a one-dimensional sweep), so there is no area to interpolate across; PCHIP is C1 and keeps the "
    "data's monotonicity (no overshoot between points).")
#: Below this share of the (rescaled) bounding box, the points' convex hull is a curve, not an area.
MIN_HULL_SHARE = 0.05
INSTALL = "pip install 'pytest-sits[analytics]'  (scipy and matplotlib)"


class MissingDependency(Exception):
    """An optional library is not installed; ``str()`` says which and how to install it."""


def _scipy():
    try:
        import scipy.interpolate  # noqa: F401
        import scipy.spatial  # noqa: F401
    except ImportError:
        raise MissingDependency(f"scipy is not installed: {INSTALL}") from None
    import scipy

    return scipy


def _nan_to_none(a: np.ndarray, digits: int = 6) -> List[Any]:
    """A (nested) list of floats rounded to ``digits`` significant digits, None where not finite."""
    def one(v: float) -> Optional[float]:
        if not math.isfinite(v):
            return None
        return float(f"{v:.{digits}g}")

    if a.ndim == 1:
        return [one(float(v)) for v in a]
    return [_nan_to_none(row, digits) for row in a]


def _hull_share(xs: np.ndarray, ys: np.ndarray) -> float:
    """Area of the points' convex hull as a share of their bounding box (0 for collinear points)."""
    scipy = _scipy()
    pts = np.column_stack([(xs - xs.min()) / (np.ptp(xs) or 1.0), (ys - ys.min()) / (np.ptp(ys) or 1.0)])
    if np.ptp(xs) == 0 or np.ptp(ys) == 0 or len(np.unique(pts, axis=0)) < 3:
        return 0.0
    try:
        return float(scipy.spatial.ConvexHull(pts).volume)  # in 2-D, "volume" is the area
    except scipy.spatial.QhullError:
        return 0.0


def interpolate(x: Sequence[float], y: Sequence[float], values: Mapping[str, Sequence[float]],
                nx: int = 41, ny: int = 41, clip_min: Optional[Dict[str, float]] = None) -> Dict[str, Any]:
    """Interpolate ``values`` (each one number per point) measured at scattered (x, y) points.

    Returns ``mode`` ("surface", "curve" or "none"), the ``scheme`` used, and the grid: for a surface,
    ``x`` (nx) and ``y`` (ny) axes with ``values[name][iy][ix]`` (None outside the hull); for a curve,
    ``x`` samples with ``y`` and ``values[name][i]`` along it.  ``clip_min`` floors values that cannot go
    below a bound (a cubic may overshoot below 0 for an error rate); how many cells were clipped is said.
    """
    xs = np.asarray(x, dtype=float)
    ys = np.asarray(y, dtype=float)
    names = list(values)
    vs = np.column_stack([np.asarray(values[n], dtype=float) for n in names]) if names else np.zeros((len(xs), 0))
    ok = np.isfinite(xs) & np.isfinite(ys) & np.all(np.isfinite(vs), axis=1)
    xs, ys, vs = xs[ok], ys[ok], vs[ok]
    out: Dict[str, Any] = {"points": int(len(xs)), "left_out_points": int((~ok).sum())}
    if len(np.unique(xs)) < 2:
        return dict(out, mode="none", scheme=None,
                    reason=f"{len(xs)} usable point(s) at {len(np.unique(xs))} distinct load(s): nothing to "
                           "interpolate between (need at least two loads)")
    scipy = _scipy()
    share = _hull_share(xs, ys)
    out["hull_share"] = round(share, 4)
    clipped = 0
    if share >= MIN_HULL_SHARE and len(xs) >= 3:
        gx = np.linspace(xs.min(), xs.max(), nx)
        gy = np.linspace(ys.min(), ys.max(), ny)
        GX, GY = np.meshgrid(gx, gy)  # GX[iy, ix]
        interp = scipy.interpolate.CloughTocher2DInterpolator(np.column_stack([xs, ys]), vs, rescale=True)
        grid = interp(GX, GY)  # (ny, nx, m), NaN outside the hull
        res: Dict[str, Any] = {}
        for j, name in enumerate(names):
            g = grid[..., j]
            if clip_min and name in clip_min:
                low = np.isfinite(g) & (g < clip_min[name])
                clipped += int(low.sum())
                g = np.where(low, clip_min[name], g)
            res[name] = _nan_to_none(g)
        inside = int(np.isfinite(grid[..., 0]).sum()) if names else 0
        return dict(out, mode="surface", scheme=SURFACE_SCHEME, x=_nan_to_none(gx), y=_nan_to_none(gy),
                    values=res, cells=nx * ny, cells_inside=inside, clipped_cells=clipped)
    # A curve: average repeated loads, then PCHIP along load for power and every value.
    order = np.argsort(xs, kind="stable")
    ux, inv = np.unique(xs[order], return_inverse=True)
    counts = np.bincount(inv)
    mean = lambda col: np.bincount(inv, weights=col[order]) / counts  # noqa: E731
    uy = mean(ys)
    samples = np.linspace(ux.min(), ux.max(), max(nx * 2, len(ux)))
    curve_y = scipy.interpolate.PchipInterpolator(ux, uy)(samples)
    res = {}
    for j, name in enumerate(names):
        c = scipy.interpolate.PchipInterpolator(ux, mean(vs[:, j]))(samples)
        if clip_min and name in clip_min:
            low = c < clip_min[name]
            clipped += int(low.sum())
            c = np.where(low, clip_min[name], c)
        res[name] = _nan_to_none(c)
    return dict(out, mode="curve", scheme=CURVE_SCHEME, x=_nan_to_none(samples), y=_nan_to_none(curve_y),
                values=res, cells=len(samples), cells_inside=len(samples), clipped_cells=clipped,
                reason=f"the points span {share:.1%} of their load x power bounding box (below "
                       f"{MIN_HULL_SHARE:.0%}): a curve, not an area")
