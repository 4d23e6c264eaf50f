"""Why PLP-LATENCY repeats its sweep points: how far one run's P99 moves from run to run, beside how wide one
run's own (binomial order-statistic) interval says it is.

Seeded sweeps of the simulated H100 with fault ``latency-marginal`` (its P99 per output token at 80% of the
maximum sits on the h100 profile's 18.3 ms ceiling) and, beside them, of the healthy one.  For the top sweep
point it prints every run's P99 and the 95% interval width of the first run, and the ratio of the spread
between runs (max - min) to the median interval width: far above 1 means one run's interval does not show
what the next run will measure.  Then PLP-LATENCY's verdict on each sweep (goal: no FAIL on the marginal
device, PASS on the healthy one).

    python benchmarks/latency_runs.py [--seeds 10]
"""

import argparse
import random
import statistics
import tempfile
from collections import Counter

from pytest_sits.checks.inference import check_latency
from pytest_sits.checks.interval import percentile_decision
from pytest_sits.conditions.inference import acquire_sweep, sweep_config
from pytest_sits.platforms.sim.inference import SimInferenceRig
from pytest_sits.profiles import resolve

GPU = {"bdf": "0000:11:00.0"}


def measure(faults, seeds):
    prof = resolve("h100")
    th = prof.thresholds("PLP-LATENCY")
    cfg = sweep_config({r: prof.thresholds(r) for r in ("PLP-PPL", "PLP-LATENCY", "PLP-SAMPLE")})
    ceiling = th["max_latency_us"] / 1e6
    p99s, widths, verdicts = [], [], Counter()
    for seed in range(seeds):
        rig = SimInferenceRig(prof, faults, GPU)
        rig.sim.rng = random.Random(seed)
        with tempfile.TemporaryDirectory() as tmp:
            ev = acquire_sweep(rig, cfg, tmp)
        top = ev["sweep"][-1]
        p99s += [r["p99_token_latency_s"] for r in top["latency_runs"]]
        d = percentile_decision(top["token_latency_tail"], ceiling)
        if d["low"] is not None and d["high"] is not None:
            widths.append(d["high"] - d["low"])
        verdicts[check_latency(ev, th, "g").status] += 1
    return p99s, widths, verdicts


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=10)
    a = ap.parse_args()
    for name, faults in (("latency-marginal", ["latency-marginal"]), ("healthy", [])):
        p99s, widths, verdicts = measure(faults, a.seeds)
        spread = max(p99s) - min(p99s)
        width = statistics.median(widths) if widths else float("nan")
        print(f"sim:h100+{name}" if faults else "sim:h100", f"({a.seeds} sweeps, top point):")
        print(f"  P99 per token over {len(p99s)} runs: {min(p99s) * 1e3:.1f} to {max(p99s) * 1e3:.1f} ms "
              f"(ceiling 18.3 ms)")
        print(f"  first run's own 95% interval: {min(widths) * 1e3:.2f} to {max(widths) * 1e3:.2f} ms wide "
              f"(median {width * 1e3:.2f})")
        print(f"  spread between runs / one run's interval width: {spread / width:.1f}")
        print(f"  PLP-LATENCY: {dict(verdicts)}")


if __name__ == "__main__":
    main()
