"""The comparator against numpy.testing.assert_allclose and torch.testing.assert_close, in one run.

    python benchmarks/compare_vs_numpy.py [--n 100000000]

Two float32 arrays of N elements (a rounding-level perturbation everywhere,
plus a few real mismatches).  Times each comparison (best of 3), then
measures the comparator's peak extra memory with tracemalloc in a separate,
untimed call.  Goals: >= 5x faster than assert_allclose while computing every
metric; peak extra memory <= 64 MiB.
"""

from __future__ import annotations

import argparse
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pytest_sits.checks.equivalence import describe
from pytest_sits.equivalence.comparator import compare  # noqa: E402

RTOL, ATOL = 1.3e-6, 1e-5


def best_of(fn, repeat=3):
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        try:
            fn()
        except AssertionError:
            pass
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000_000)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    expected = rng.standard_normal(args.n, dtype=np.float32)
    actual = (expected * np.float32(1 + 2e-7)).astype(np.float32)
    for i in rng.integers(0, args.n, 5):
        actual[i] += 0.5
    t_np = best_of(lambda: np.testing.assert_allclose(actual, expected, rtol=RTOL, atol=ATOL))
    t_ours = best_of(lambda: compare(actual, expected, rtol=RTOL, atol=ATOL))
    try:
        import torch

        ta, te = torch.from_numpy(actual), torch.from_numpy(expected)
        t_torch = best_of(lambda: torch.testing.assert_close(ta, te, rtol=RTOL, atol=ATOL))
    except ImportError:
        t_torch = None
    tracemalloc.start()
    result = compare(actual, expected, rtol=RTOL, atol=ATOL)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(f"{args.n:,} float32 elements, {result['mismatches']} real mismatches")
    print(f"numpy.testing.assert_allclose  {t_np:7.3f} s")
    if t_torch is not None:
        print(f"torch.testing.assert_close     {t_torch:7.3f} s")
    print(f"pytest_sits.equivalence.comparator            {t_ours:7.3f} s  (all metrics)")
    print(f"speed-up vs assert_allclose: {t_np / t_ours:.1f}x" +
          (f"; vs assert_close: {t_torch / t_ours:.1f}x" if t_torch else ""))
    print(f"peak extra memory (tracemalloc): {peak / 2 ** 20:.1f} MiB")
    print(describe(result))
    ok = t_np / t_ours >= 5 and peak <= 64 * 2 ** 20
    print(f"goal: >= 5x and <= 64 MiB: {'met' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
