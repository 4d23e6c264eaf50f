"""The DRAM hold in the measuring process against the hold in a process of its own, side by side.

    python benchmarks/hold_process.py [--rounds 3] [--seconds 8]

Both hold the same band (85-92% of this host's STREAM copy peak) while the measuring side does what a measurement
does between its device calls: a short numpy operation, then a 2 ms sleep, timing how late each wake-up is.  The
two are run in alternating rounds (in process, own process, in process, ...), so a machine that drifts during the
run drifts under both.  Printed per round and as medians: the measuring loop's wake-up lateness (p50, p99, ms), its
iterations, and the hold's windows in band; then the ratios own-process / in-process.  The lateness is what a
host-timed measurement inherits (on an H200 host, the in-process injectors' interpreter lock made a fixed device
operation's P99 2.0 ms); the share in band is what the hold is for.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pytest_sits.conditions.bandwidth import hold_cpus  # noqa: E402
from pytest_sits.conditions.hold import BandwidthHold, find_counter  # noqa: E402
from pytest_sits.conditions.hold_process import ProcessHold  # noqa: E402
from pytest_sits.conditions.stream import stream_peak  # noqa: E402


def measuring_loop(seconds: float) -> dict:
    import numpy as np

    x = np.random.default_rng(0).random(4096)
    late = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        np.sort(x)
        t0 = time.perf_counter()
        time.sleep(0.002)
        late.append((time.perf_counter() - t0 - 0.002) * 1e3)
    late.sort()
    return {"p50_ms": late[len(late) // 2], "p99_ms": late[int(len(late) * 0.99)], "iterations": len(late)}


def one_round(kind: str, peak: float, cpus: list, seconds: float) -> dict:
    if kind == "in process":
        found = find_counter()
        hold = BandwidthHold(peak, 0.85, 0.92, cpus=cpus, node=0, counter=found["counter"],
                             counter_reason=found["reason"])
    else:
        hold = ProcessHold(peak, 0.85, 0.92, cpus=cpus, node=0)
    with hold:
        loop = measuring_loop(seconds)
    ev = hold.evidence()
    return dict(loop, in_band=ev["windows_in_band"] / max(1, ev["windows"]), windows=ev["windows"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=8.0)
    args = ap.parse_args()
    cpus = sorted(os.sched_getaffinity(0))
    injectors, left = hold_cpus(cpus)
    peak = stream_peak(threads=len(cpus), cpus=cpus, node=0)["kernels"]["copy"]["gbps_median"]
    print(f"host: {len(cpus)} CPUs, injectors on {len(injectors)} (left to the measurement: {left or 'none'}), "
          f"STREAM copy peak {peak:.1f} GB/s; {args.rounds} alternating rounds of {args.seconds:g} s")
    results: dict = {"in process": [], "own process": []}
    for r in range(args.rounds):
        for kind in ("in process", "own process"):
            res = one_round(kind, peak, injectors, args.seconds)
            results[kind].append(res)
            print(f"round {r + 1} {kind:>11}: wake-up late p50 {res['p50_ms']:.3f} ms, p99 {res['p99_ms']:.3f} ms, "
                  f"{res['iterations']} iterations; hold {res['in_band']:.0%} of {res['windows']} windows in band")
    med = {k: {m: statistics.median(x[m] for x in v) for m in ("p50_ms", "p99_ms", "iterations", "in_band")}
           for k, v in results.items()}
    a, b = med["in process"], med["own process"]
    print(f"medians   in process: p50 {a['p50_ms']:.3f} ms, p99 {a['p99_ms']:.3f} ms, {a['iterations']:.0f} it, "
          f"{a['in_band']:.0%} in band")
    print(f"medians  own process: p50 {b['p50_ms']:.3f} ms, p99 {b['p99_ms']:.3f} ms, {b['iterations']:.0f} it, "
          f"{b['in_band']:.0%} in band")
    print(f"ratios own/in: p99 lateness {b['p99_ms'] / max(a['p99_ms'], 1e-9):.2f}, "
          f"p50 lateness {b['p50_ms'] / max(a['p50_ms'], 1e-9):.2f}, iterations "
          f"{b['iterations'] / max(a['iterations'], 1):.2f}, share in band {b['in_band'] / max(a['in_band'], 1e-9):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
