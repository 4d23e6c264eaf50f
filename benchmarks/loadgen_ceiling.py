"""How many queries per second MLPerf LoadGen can drive here, against a null SUT, beside a plain Python issue
loop and beside the built-in model's own maximum: the load generator must not be the bottleneck.

* LoadGen Server (Poisson arrivals) at rising target QPS against a SUT that completes every query inline;
  the ceiling is the highest target whose completed rate stays within 5% of it.
* A plain Python loop issuing Poisson arrivals to the same null SUT (spin until each arrival, call, record),
  at the same targets.
* The built-in model's maximum (LoadGen Offline), for the ratio.

    python benchmarks/loadgen_ceiling.py [--seconds 2] [--model host]
"""

import argparse
import random
import tempfile
import time
from pathlib import Path

from pytest_sits.inference.sut import Workload, run_loadgen

TARGETS = [1000, 2000, 5000, 10000, 20000, 50000]


def loadgen_rate(target: float, seconds: float, tmp: Path) -> float:
    wl = Workload.build({"samples": 64, "prompt_tokens": [4, 8], "output_tokens": [1, 1]}, 256)
    r = run_loadgen(lambda idx, complete: complete(1, None), wl, tmp / f"lg-{target}", scenario="Server",
                    duration_s=seconds, target_qps=target)
    q = r["queries"]
    span = (max(x[1] for x in q) - min(x[0] for x in q)) / 1e9
    return len(q) / span


def python_rate(target: float, seconds: float) -> float:
    rng = random.Random(0)
    log = []

    def sut(i: int) -> None:
        log.append((i, time.monotonic_ns()))

    t0 = time.monotonic()
    nxt, n = t0, 0
    while nxt < t0 + seconds:
        nxt += rng.expovariate(target)
        while time.monotonic() < nxt:
            pass
        sut(n)
        n += 1
    return n / (time.monotonic() - t0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--model", default="host", help="profile whose PLP-PPL.model is timed for the ratio")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        lg_ceiling = py_ceiling = 0.0
        print(f"{'target QPS':>10}  {'LoadGen':>10}  {'Python loop':>11}")
        for t in TARGETS:
            lg, py = loadgen_rate(t, a.seconds, tmp), python_rate(t, a.seconds)
            print(f"{t:>10}  {lg:>10.0f}  {py:>11.0f}")
            if lg >= 0.95 * t:
                lg_ceiling = t
            if py >= 0.95 * t:
                py_ceiling = t
        from pytest_sits.conditions.inference import InferenceRig, acquire_sweep
        from pytest_sits.profiles import resolve

        prof = resolve(a.model)
        ppl = prof.thresholds("PLP-PPL")
        ev = acquire_sweep(InferenceRig("cpu", "cpu"), {"model": ppl["model"], "workload": ppl["workload"],
                                                        "peak_tflops": ppl["peak_tflops"], "window_ms": ppl["window_ms"],
                                                        "period_ms": prof.thresholds("PLP-SAMPLE")["period_ms"],
                                                        "sweep_fractions": [0.5], "point_s": 2}, tmp / "model")
        model_max = ev["max"]["qps"]
    print(f"LoadGen ceiling (within 5% of target): {lg_ceiling:g} QPS; plain Python loop: {py_ceiling:g} QPS")
    print(f"built-in model ({a.model} profile) maximum, LoadGen Offline: {model_max:.1f} QPS")
    print(f"headroom LoadGen ceiling / model maximum: {lg_ceiling / model_max:.0f}x")


if __name__ == "__main__":
    main()
