"""The steady-state detector costs O(1) per sample: time per sample at two window lengths.

    python benchmarks/detector.py

Feeds 200,000 dithering samples through SteadyDetector with a 120-sample
window and with a 12,000-sample window, in one run, and prints the time per
sample of each and their ratio (about 1 when the cost does not grow with the
window; an O(window) detector would show about 100).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pytest_sits.checks.thermal import SteadyDetector  # noqa: E402

N = 200_000


def per_sample(window: float) -> float:
    det = SteadyDetector(window, 0.3, (68, 72), 1.0)
    t0 = time.perf_counter()
    for i in range(N):
        det.add(float(i), 69.0 if (i * 7) % 10 < 5 else 70.0)
    return (time.perf_counter() - t0) / N


def main() -> int:
    small, large = per_sample(120), per_sample(12_000)
    print(f"window 120 samples:    {small * 1e6:.2f} us/sample")
    print(f"window 12000 samples:  {large * 1e6:.2f} us/sample")
    ratio = large / small
    print(f"ratio {ratio:.2f} (O(1) per sample: well under 2; O(window) would be ~100)")
    return 0 if ratio < 2 else 1


if __name__ == "__main__":
    sys.exit(main())
