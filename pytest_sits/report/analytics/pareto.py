"""Pareto pruning: keep the points that no other point dominates.

A point *a* dominates *b* when *a* is at least as good as *b* on every
objective and strictly better on one.  Objectives are minimised or
maximised (``"min"`` / ``"max"``).  Identical points do not dominate each
other, so both are kept.  A point with a missing or non-finite objective is
neither kept nor dropped: it is reported as ``unknown``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, List, Sequence, Union

if TYPE_CHECKING:  # numpy is imported by the functions that use it: importing analytics stays cheap
    import numpy as np

SENSES = ("min", "max")


def _as_costs(values: np.ndarray, senses: Sequence[str]) -> np.ndarray:
    import numpy as np

    if values.ndim != 2 or values.shape[1] != len(senses):
        raise ValueError(f"expected an (n, {len(senses)}) array of objectives, got shape {values.shape}")
    for s in senses:
        if s not in SENSES:
            raise ValueError(f"objective sense {s!r}: use 'min' or 'max'")
    sign = np.array([1.0 if s == "min" else -1.0 for s in senses])
    return values.astype(float) * sign  # every column minimised


def non_dominated(values: Union[Sequence[Sequence[float]], np.ndarray], senses: Sequence[str],
                  chunk: int = 256) -> np.ndarray:
    """Boolean mask: True where no other (finite) point dominates the point.

    Rows with a non-finite value are False here and should be reported apart (see :func:`prune`).
    O(n² k) comparisons in blocks of ``chunk`` rows, so memory stays at chunk × n × k.
    """
    import numpy as np

    arr = np.asarray(values, dtype=float)
    if arr.size == 0:
        return np.zeros(0, dtype=bool)
    cost = _as_costs(arr.reshape(len(arr), -1), senses)
    finite = np.all(np.isfinite(cost), axis=1)
    keep = finite.copy()
    pool = cost[finite]
    for start in range(0, len(cost), chunk):
        block = cost[start:start + chunk]
        # le[i, j]: pool point j is no worse than block point i on every objective; lt: strictly better on one.
        le = np.all(pool[None, :, :] <= block[:, None, :], axis=2)
        lt = np.any(pool[None, :, :] < block[:, None, :], axis=2)
        dominated = np.any(le & lt, axis=1)
        keep[start:start + chunk] &= ~dominated
    return keep


def prune(points: List[Dict[str, float]], objectives: Dict[str, str]) -> Dict[str, List[int]]:
    """Indices of ``points`` (dicts) that are kept, dropped (dominated) and unknown (a missing objective)."""
    import numpy as np

    keys = list(objectives)
    rows = []
    for p in points:
        row = []
        for k in keys:
            v = p.get(k)
            row.append(float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else float("nan"))
        rows.append(row)
    arr = np.array(rows, dtype=float).reshape(len(points), len(keys))
    finite = np.all(np.isfinite(arr), axis=1) if len(points) else np.zeros(0, dtype=bool)
    keep = non_dominated(arr, [objectives[k] for k in keys]) if len(points) else np.zeros(0, dtype=bool)
    return {"kept": [int(i) for i in np.flatnonzero(keep)],
            "dropped": [int(i) for i in np.flatnonzero(finite & ~keep)],
            "unknown": [int(i) for i in np.flatnonzero(~finite)]}
