"""Start-up cost of the plugin: `pytest --co -q` with and without it, in one run.

    python benchmarks/startup.py [--rounds N]

Runs both commands alternately (so machine noise hits both alike) and prints
the medians, the difference and the ratio.  Goal: the plugin adds <= 0.3 s.
Exits 1 when the goal is missed.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GOAL_S = 0.3


def timed(cmd, cwd) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=9)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "test_trivial.py").write_text("def test_a():\n    pass\n")
        base = [sys.executable, "-m", "pytest", "--co", "-q", "-p", "no:cacheprovider"]
        without, with_ = [], []
        timed(base, tmp)  # warm the file cache
        for _ in range(args.rounds):
            without.append(timed(base + ["-p", "no:sits"], tmp))
            with_.append(timed(base + ["--sits-report-dir=none"], tmp))
    a, b = statistics.median(without), statistics.median(with_)
    print(f"pytest --co -q without plugin: median {a:.3f} s (min {min(without):.3f})")
    print(f"pytest --co -q with plugin:    median {b:.3f} s (min {min(with_):.3f})")
    print(f"plugin adds {b - a:+.3f} s; ratio {b / a:.2f}x; goal <= +{GOAL_S} s: "
          f"{'met' if b - a <= GOAL_S else 'MISSED'}")
    return 0 if b - a <= GOAL_S else 1


if __name__ == "__main__":
    sys.exit(main())
