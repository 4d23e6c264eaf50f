"""The Sample3D sampler's own cost at 100 Hz, as a share of one core (goal: <= 1%).

Side by side in one command: the sampler reading a RAPL-shaped energy counter (a file in a temporary sysfs
tree, read the way the real probe reads /sys/class/powercap) and, as the reference floor, a bare thread that
only wakes at the same period.  The cost is the sampling thread's CPU time (time.thread_time) over wall time.

    python benchmarks/sampler_cost.py [--seconds 10] [--period-ms 10] [--sources 2]
"""

import argparse
import tempfile
import threading
import time
from pathlib import Path

from pytest_sits.conditions.sampler import Sample3D
from pytest_sits.probes.power import rapl_zones


def bare(period_s: float, seconds: float) -> float:
    out = {}

    def run():
        c0, stop = time.thread_time(), time.monotonic() + seconds
        nxt = time.monotonic()
        while time.monotonic() < stop:
            nxt += period_s
            time.sleep(max(0.0, nxt - time.monotonic()))
        out["cpu"] = time.thread_time() - c0

    t = threading.Thread(target=run)
    t.start()
    t.join()
    return out["cpu"] / seconds


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--period-ms", type=float, default=10.0)
    ap.add_argument("--sources", type=int, default=2, help="RAPL-shaped zones (package, dram)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(a.sources):
            d = Path(tmp) / f"sys/class/powercap/intel-rapl:{i}"
            d.mkdir(parents=True)
            (d / "name").write_text(f"package-{i}\n")
            (d / "energy_uj").write_text("123456789\n")
            (d / "max_energy_range_uj").write_text("262143328850\n")
        zones, _ = rapl_zones(Path(tmp))
        with Sample3D(zones, a.period_ms / 1e3) as s:
            time.sleep(a.seconds)
        ev = s.evidence()
    ref = bare(a.period_ms / 1e3, a.seconds)
    share = ev["thread_cpu_s"] / ev["duration_s"]
    ticks = len(ev["ticks"])
    print(f"sampler: {ticks} ticks in {ev['duration_s']:.2f} s ({ticks / ev['duration_s']:.1f} Hz), "
          f"{len(zones)} source(s), {ev['overruns']} overrun(s)")
    print(f"sampler thread CPU: {share:.3%} of one core ({ev['thread_cpu_s'] * 1e6 / max(1, ticks):.1f} µs per tick)")
    print(f"bare wake-up loop at the same period (floor): {ref:.3%} of one core")
    print(f"ratio sampler / floor: {share / ref if ref else float('inf'):.2f}x; goal <= 1% of one core: "
          f"{'met' if share <= 0.01 else 'NOT met'}")


if __name__ == "__main__":
    main()
