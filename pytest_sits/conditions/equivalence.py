"""Acquire equivalence evidence: the operator corpus on every torch device, against numpy float64 or a
golden set recorded on a reference platform; throughput with a host noise control; latency and memory
beside the golden set's."""

from __future__ import annotations

import math
import statistics
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from ..equivalence.comparator import compare
from ..equivalence.corpus import CORPUS
from ..equivalence.golden import GoldenError, GoldenSet, key, record_entry, record_unsupported
from ..equivalence.tolerance import operator_facts, resolve
from ..equivalence.runner import (Unsupported, comparable, execute, from_storage, prepare, reference_output,
                                  torch_devices)

PAIRS = [(o, d) for o in CORPUS for d in CORPUS[o].dtypes]


def environment(platform: Any, golden: Optional[Path], record: Optional[Path]) -> Dict[str, Any]:
    """The devices the corpus runs on, and the golden set (or {"absent": reason})."""
    reason = platform.host_measurement_reason()
    if reason:
        return {"unavailable": f"{reason}: the operator corpus runs on live devices"}
    try:
        import torch
    except ImportError:
        return {"unavailable": "torch is not installed: the operator corpus runs on torch (install the build for "
                               "your accelerator: CUDA, ROCm, torch_npu, XPU, or the CPU build)"}
    devices = torch_devices()
    return {"torch": torch, "devices": devices, "under_test": devices[-1],
            "golden": GoldenSet(golden) if golden else None, "record": record}


def acquire_precision(env: Dict[str, Any], op_name: str, dtype: str,
                      thresholds: Dict[str, Any]) -> List[Tuple[Dict[str, Any], str]]:
    """Run one operator/dtype on every device and compare within the tolerance the profile's EQ-PRECISION
    ``thresholds`` give it; record it when recording a golden set.

    Returns (evidence, subject) pairs, one per device (or one absent/error evidence); the evidence carries the
    operator's facts the tolerance depends on."""
    subject = f"{op_name} {dtype}"
    if "unavailable" in env:
        return [({"unavailable": env["unavailable"]}, subject)]
    op = CORPUS[op_name]
    tol = resolve(op, dtype, thresholds)
    golden, entry, golden_out = env["golden"], None, None
    if golden is not None:
        try:
            loaded = golden.load(op_name, dtype)
        except GoldenError as exc:
            return [({"error": str(exc), "golden": str(golden.root)}, subject)]
        if loaded is None:
            return [({"not_in_golden": f"{key(op_name, dtype)} is not in the golden set {golden.root} (it holds "
                                       f"{len(golden.keys())} other pairs)", "golden": str(golden.root)}, subject)]
        stored, golden_out, entry = loaded
        label = (golden.manifest.get("platform") or {}).get("label") if isinstance(golden.manifest.get("platform"),
                                                                                   dict) else None
        if entry.get("unsupported"):
            return [({"absent": f"the reference platform ({label}) could not run {subject} either: "
                                f"{str(entry['unsupported'])[:300]}"}, subject)]
        mismatch = _input_mismatch(op, dtype, stored)
        if mismatch:
            return [({"error": f"golden set {golden.root}: {mismatch}", "golden": str(golden.root)}, subject)]
        exact = None
        reference = f"the golden output recorded on {label}"
    else:
        stored, exact = prepare(op, dtype)
        reference = "numpy float64 on the same inputs"
    out: List[Tuple[Dict[str, Any], str]] = []
    record_from = None
    unsupported: List[str] = []
    for dev in env["devices"]:
        where = f"{dev['device']} {subject}"
        try:
            run = execute(op, dtype, stored, dev["device"])
        except Unsupported as exc:
            out.append(({"absent": str(exc)}, where))
            unsupported.append(f"{dev['device']}: {exc}")
            continue
        if golden_out is not None:
            expected = golden_out
        else:
            assert exact is not None  # computed above whenever there is no golden output
            expected = reference_output(op, exact, run["output_dtype"])
        actual, shift = comparable(run["output"], run["output_dtype"])
        want, _ = comparable(expected, run["output_dtype"])
        result = compare(actual, want, rtol=tol["rtol"], atol=tol["atol"], probabilities=op.probabilities,
                         ulp_shift=shift)
        out.append(({"comparison": result, "reference": reference, "operator": operator_facts(op, dtype),
                     "device": dev, "latency_s": run["latency_s"],
                     "peak_bytes": run["peak_bytes"],
                     "golden_latency_s": entry.get("latency_s") if entry else None}, where))
        record_from = (dev, run)  # the last device: the accelerator when there is one
    if env["record"] is not None and record_from is not None:
        dev, run = record_from
        record_entry(env["record"], op_name, dtype, stored, run["output"],
                     {"device": dev, "latency_s": run["latency_s"], "peak_bytes": run["peak_bytes"],
                      "output_dtype": run["output_dtype"], "tolerance": tol})
    elif env["record"] is not None:
        record_unsupported(env["record"], op_name, dtype, "; ".join(unsupported) or "no device ran it")
    return out


def _input_mismatch(op: Any, dtype: str, stored: Dict[str, Any]) -> Optional[str]:
    """Why stored golden inputs cannot feed this corpus operator (names, dtypes, shapes), or None."""
    want, _ = prepare(op, dtype)
    if set(stored) != set(want):
        return (f"{op.name} {dtype} takes inputs {sorted(want)}, the golden set holds {sorted(stored)[:10]}: it was "
                "recorded with another version of the operator")
    for name, arr in want.items():
        got = stored[name]
        if got.shape != arr.shape or got.dtype != arr.dtype:
            return (f"{op.name} {dtype} input {name!r} is {got.dtype} {tuple(got.shape)} in the golden set; the "
                    f"operator takes {arr.dtype} {tuple(arr.shape)}: it was recorded with another version of the "
                    "operator")
    return None


def acquire_golden_coverage(env: Dict[str, Any]) -> Dict[str, Any]:
    if "unavailable" in env:
        return {"unavailable": env["unavailable"]}
    if env["golden"] is None:
        return {"absent": "no golden set given (--sits-golden DIR): compared with numpy float64 instead"}
    return {"golden": env["golden"].keys(), "corpus": [key(o, d) for o, d in PAIRS],
            "source": str(env["golden"].root)}


def control_rounds(rounds: int = 15) -> List[float]:
    """Time a fixed host workload ``rounds`` times: how noisy is this machine right now?"""
    import numpy as np

    x = np.random.default_rng(0).random((192, 192))
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(20):
            np.sin(x, out=x)
        times.append(time.perf_counter() - t0)
    return times


def control_cv(rounds: int = 15) -> float:
    """The coefficient of variation of :func:`control_rounds`."""
    times = control_rounds(rounds)
    return statistics.pstdev(times) / statistics.mean(times)


def acquire_throughput(env: Dict[str, Any], op_name: str, benchmark: Any,
                       plan: Optional[Any] = None) -> Tuple[Dict[str, Any], str]:
    """Time the operator with pytest-benchmark (the plan's rounds, 25 by default: pytest-benchmark runs once per
    test, so this is one look) between two timings of a fixed host workload (the control)."""
    if "unavailable" in env:
        return {"unavailable": env["unavailable"]}, op_name
    if benchmark is None:
        return {"unavailable": "pytest-benchmark is not installed (pip install pytest-benchmark)"}, op_name
    torch = env["torch"]
    dev = env["under_test"]
    dtype = "float32" if dev["kind"] == "cpu" else "float16"
    op = CORPUS[op_name]
    stored, _ = prepare(op, dtype)
    inputs = {k: from_storage(v, dtype, dev["device"]) for k, v in stored.items()}
    is_cuda = dev["device"].startswith("cuda")

    def call() -> None:
        with torch.no_grad():
            op.torch_fn(**inputs)

    def sync() -> None:
        if is_cuda:
            torch.cuda.synchronize()

    for _ in range(3):  # warm-up: kernel selection, caches, the first allocation
        call()
        sync()
    t0 = time.perf_counter()
    for _ in range(5):
        call()
    sync()
    one = max((time.perf_counter() - t0) / 5, 1e-7)
    # One round is ``calls`` back-to-back calls and one synchronise (at least 10 ms of work): a synchronise per call
    # would time the host's round trip to the device, not the operator (seen on an H200: a 0.07 ms GEMM's rounds
    # spread over 0.07..1.15 ms).
    calls = max(1, math.ceil(0.010 / one))

    def fn() -> None:
        for _ in range(calls):
            call()
        sync()

    rounds = max(3, int(plan.initial)) if plan is not None else 25
    before = control_rounds()
    benchmark.pedantic(fn, rounds=rounds, iterations=1, warmup_rounds=3)
    after = control_rounds()
    cv = lambda t: statistics.pstdev(t) / statistics.mean(t)  # noqa: E731
    subject = f"{dev['device']} {op_name} {dtype}"
    stats = getattr(benchmark, "stats", None)
    if getattr(benchmark, "disabled", False) or stats is None:
        return {"disabled": "pytest-benchmark is disabled in this run (it disables itself under xdist, or "
                            "--benchmark-disable): no rounds to judge"}, subject
    return {"samples_s": list(stats.stats.data), "control_cv": max(cv(before), cv(after)),
            "control": {"before_s": [round(t, 9) for t in before], "after_s": [round(t, 9) for t in after],
                        "workload": "20 x numpy sin over a 192x192 float64 array, 15 rounds"},
            "calls_per_round": calls,
            "method": f"pytest-benchmark pedantic: {rounds} rounds after 3 warm-up rounds, each round {calls} call(s) "
                      f"back to back and one synchronise{' with the device' if is_cuda else ''}; a fixed host "
                      "workload timed before and after as the noise control"}, subject


def acquire_ratios(env: Dict[str, Any], field: str, what: str) -> Tuple[Dict[str, Any], str]:
    """``field`` (latency_s or peak_bytes) here and in the golden set, per operator."""
    if "unavailable" in env:
        return {"unavailable": env["unavailable"]}, what
    golden, dev = env["golden"], env["under_test"]
    if golden is None:
        return {"unavailable": f"{what} is compared with a reference platform: give its golden set with "
                               "--sits-golden DIR"}, what
    if field == "peak_bytes" and not dev["device"].startswith("cuda"):
        return {"unavailable": f"peak memory per operator is read from torch.cuda.max_memory_allocated; "
                               f"{dev['device']} has no such counter"}, what
    rows = []
    try:
        for k in golden.keys():
            op_name, dtype = k.split("__")
            if op_name not in CORPUS:
                continue
            stored, _, entry = golden.load(op_name, dtype)
            try:
                run = execute(CORPUS[op_name], dtype, stored, dev["device"])
            except Unsupported:
                continue
            if entry.get("unsupported"):
                continue
            ref = entry.get(field)
            if not isinstance(ref, (int, float)) or isinstance(ref, bool) or not ref > 0:
                ref = None
            row = {"op": op_name, "dtype": dtype, "here": run[field], "reference": ref,
                   "ratio": (run[field] / ref) if ref and run[field] is not None else None}
            if field == "latency_s":
                row["samples"] = [round(t, 9) for t in run.get("latency_samples_s") or []]
            rows.append(row)
    except GoldenError as exc:
        return {"error": str(exc)}, what
    return {"operators": rows, "device": dev["device"]}, dev["device"]
