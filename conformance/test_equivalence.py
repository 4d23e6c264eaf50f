"""Cross-platform equivalence: EQ-PRECISION, EQ-THROUGHPUT, EQ-LATENCY, EQ-RESOURCE (level standard).

Without a golden set, every torch device present is compared with numpy float64 on the same (rounded)
inputs.  With ``--sits-golden DIR`` the stored inputs are fed byte for byte and the outputs compared with
the stored ones; with ``--sits-golden-record DIR`` the reference device's inputs and outputs are stored.
"""

import math
import statistics
import time

import pytest

from pytest_sits.checks.equivalence import check_golden_coverage, check_precision, check_ratio, check_throughput
from pytest_sits.compare import compare
from pytest_sits.equivalence.corpus import CORPUS
from pytest_sits.equivalence.golden import GoldenError, GoldenSet, key, record_entry
from pytest_sits.equivalence.runner import (Unsupported, comparable, execute, from_storage, prepare,
                                            reference_output, torch_devices)
from pytest_sits.equivalence.tolerance import resolve
from pytest_sits.verdict import ERROR, INCONCLUSIVE, SKIP, Verdict

PAIRS = [(o, d) for o in CORPUS for d in CORPUS[o].dtypes]


@pytest.fixture(scope="session")
def eq_env(sits_run, sits_platform):
    reason = sits_platform.host_measurement_reason()
    if reason:
        return {"skip": f"{reason}: the operators need a live device"}
    try:
        import torch
    except ImportError:
        return {"skip": "torch is not installed: the operator corpus runs on torch (install the build for your "
                        "accelerator: CUDA, ROCm, torch_npu, XPU, or the CPU build)"}
    devices = torch_devices()
    return {"torch": torch, "devices": devices, "under_test": devices[-1],
            "golden": GoldenSet(sits_run.golden) if sits_run.golden else None, "record": sits_run.golden_record}


def _skip(req, eq_env, subject):
    return Verdict(req, SKIP, eq_env["skip"], subject=subject)


@pytest.mark.sits_requirement("EQ-PRECISION")
@pytest.mark.parametrize("op_name,dtype", PAIRS, ids=[f"{o}-{d}" for o, d in PAIRS])
def test_precision(op_name, dtype, eq_env, sits_profile, sits_record):
    subject = f"{op_name} {dtype}"
    if "skip" in eq_env:
        return sits_record(_skip("EQ-PRECISION", eq_env, subject))
    op = CORPUS[op_name]
    tol = resolve(op, dtype, sits_profile.thresholds("EQ-PRECISION"))
    golden, entry, golden_out = eq_env["golden"], None, None
    if golden is not None:
        try:
            loaded = golden.load(op_name, dtype)
        except GoldenError as exc:
            return sits_record(Verdict("EQ-PRECISION", ERROR, str(exc), subject=subject,
                                       evidence={"golden": str(golden.root)}))
        if loaded is None:
            return sits_record(Verdict("EQ-PRECISION", INCONCLUSIVE, f"{key(op_name, dtype)} is not in the golden set "
                                       f"{golden.root} (it holds {len(golden.keys())} other pairs)", subject=subject))
        stored, golden_out, entry = loaded
        exact = None
        reference = f"the golden output recorded on {golden.manifest.get('platform', {}).get('label')}"
    else:
        stored, exact = prepare(op, dtype)
        reference = "numpy float64 on the same inputs"
    verdicts, record_from = [], None
    for dev in eq_env["devices"]:
        where = f"{dev['device']} {subject}"
        try:
            run = execute(op, dtype, stored, dev["device"])
        except Unsupported as exc:
            verdicts.append(Verdict("EQ-PRECISION", SKIP, str(exc), subject=where))
            continue
        expected = golden_out if golden_out is not None else reference_output(op, exact, run["output_dtype"])
        actual, shift = comparable(run["output"], run["output_dtype"])
        want, _ = comparable(expected, run["output_dtype"])
        result = compare(actual, want, rtol=tol["rtol"], atol=tol["atol"], probabilities=op.probabilities,
                         ulp_shift=shift)
        verdicts.append(check_precision(result, tol, where, reference, {
            "device": dev, "latency_s": run["latency_s"], "peak_bytes": run["peak_bytes"],
            "golden_latency_s": entry.get("latency_s") if entry else None}))
        record_from = (dev, run)  # the last device: the accelerator when there is one
    if eq_env["record"] is not None and record_from is not None:
        dev, run = record_from
        record_entry(eq_env["record"], op_name, dtype, stored, run["output"],
                     {"device": dev, "latency_s": run["latency_s"], "peak_bytes": run["peak_bytes"],
                      "output_dtype": run["output_dtype"], "tolerance": tol})
    sits_record(*verdicts)


@pytest.mark.sits_requirement("EQ-PRECISION")
def test_golden_set_matches_corpus(eq_env, sits_record):
    if "skip" in eq_env:
        return sits_record(_skip("EQ-PRECISION", eq_env, "golden set"))
    if eq_env["golden"] is None:
        return sits_record(Verdict("EQ-PRECISION", SKIP, "no golden set given (--sits-golden DIR): compared with "
                                   "numpy float64 instead", subject="golden set"))
    sits_record(check_golden_coverage(eq_env["golden"].keys(), [key(o, d) for o, d in PAIRS],
                                      str(eq_env["golden"].root)))


def _control_cv(rounds=15):
    """Time a fixed host workload: how noisy is this machine right now?"""
    import numpy as np

    x = np.random.default_rng(0).random((192, 192))
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(20):
            np.sin(x, out=x)
        times.append(time.perf_counter() - t0)
    return statistics.pstdev(times) / statistics.mean(times)


@pytest.mark.sits_requirement("EQ-THROUGHPUT")
@pytest.mark.parametrize("op_name", list(CORPUS))
def test_throughput(op_name, eq_env, sits_profile, sits_record, request):
    if "skip" in eq_env:
        return sits_record(_skip("EQ-THROUGHPUT", eq_env, op_name))
    try:
        benchmark = request.getfixturevalue("benchmark")
    except pytest.FixtureLookupError:
        return sits_record(Verdict("EQ-THROUGHPUT", SKIP, "pytest-benchmark is not installed", subject=op_name))
    torch = eq_env["torch"]
    dev = eq_env["under_test"]
    dtype = "float32" if dev["kind"] == "cpu" else "float16"
    op = CORPUS[op_name]
    stored, _ = prepare(op, dtype)
    inputs = {k: from_storage(v, dtype, dev["device"]) for k, v in stored.items()}
    is_cuda = dev["device"].startswith("cuda")

    def fn():
        with torch.no_grad():
            op.torch_fn(**inputs)
        if is_cuda:
            torch.cuda.synchronize()

    t0 = time.perf_counter()
    fn()
    one = max(time.perf_counter() - t0, 1e-6)
    iterations = max(1, math.ceil(0.005 / one))
    before = _control_cv()
    benchmark.pedantic(fn, rounds=25, iterations=iterations, warmup_rounds=3)
    after = _control_cv()
    subject = f"{dev['device']} {op_name} {dtype}"
    stats = getattr(benchmark, "stats", None)
    if getattr(benchmark, "disabled", False) or stats is None:
        return sits_record(Verdict("EQ-THROUGHPUT", INCONCLUSIVE, "pytest-benchmark is disabled in this run "
                                   "(it disables itself under xdist, or --benchmark-disable): no rounds to judge",
                                   subject=subject))
    samples = list(stats.stats.data)
    sits_record(check_throughput(samples, max(before, after), sits_profile.thresholds("EQ-THROUGHPUT"), subject,
                                 f"pytest-benchmark pedantic: 25 rounds of {iterations} iteration(s) after 3 warm-up "
                                 "rounds; a fixed host workload timed before and after as the noise control"))


def _ratios(eq_env, field):
    golden, dev = eq_env["golden"], eq_env["under_test"]
    rows = []
    for k in golden.keys():
        op_name, dtype = k.split("__")
        if op_name not in CORPUS:
            continue
        stored, _, entry = golden.load(op_name, dtype)
        try:
            run = execute(CORPUS[op_name], dtype, stored, dev["device"])
        except Unsupported:
            continue
        ref = entry.get(field)
        rows.append({"op": op_name, "dtype": dtype, "here": run[field], "reference": ref,
                     "ratio": (run[field] / ref) if ref and run[field] is not None else None})
    return rows


def _beside_reference(req, eq_env, sits_profile, field, what, subject):
    """The worst ratio of ``field`` (here / golden) over the golden set's operators, as a verdict."""
    if eq_env["golden"] is None:
        return Verdict(req, SKIP, f"{what} is compared with a reference platform: give its golden set with "
                       "--sits-golden DIR", subject=subject)
    try:
        rows = _ratios(eq_env, field)
    except GoldenError as exc:
        return Verdict(req, ERROR, str(exc), subject=subject)
    return check_ratio(req, rows, sits_profile.thresholds(req)["max_ratio"], eq_env["under_test"]["device"], what)


@pytest.mark.sits_requirement("EQ-LATENCY")
def test_latency_beside_reference(eq_env, sits_profile, sits_record):
    if "skip" in eq_env:
        return sits_record(_skip("EQ-LATENCY", eq_env, "latency"))
    sits_record(_beside_reference("EQ-LATENCY", eq_env, sits_profile, "latency_s", "latency", "latency"))


@pytest.mark.sits_requirement("EQ-RESOURCE")
def test_resource_beside_reference(eq_env, sits_profile, sits_record):
    if "skip" in eq_env:
        return sits_record(_skip("EQ-RESOURCE", eq_env, "memory"))
    dev = eq_env["under_test"]
    if not dev["device"].startswith("cuda"):
        return sits_record(Verdict("EQ-RESOURCE", SKIP, f"peak memory per operator is read from "
                                   f"torch.cuda.max_memory_allocated; {dev['device']} has no such counter",
                                   subject="memory"))
    sits_record(_beside_reference("EQ-RESOURCE", eq_env, sits_profile, "peak_bytes", "peak device memory", "memory"))
