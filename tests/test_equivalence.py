"""Equivalence: tolerance policy, operator corpus on this CPU, golden record/compare, failing cases."""

import json
import sys

import numpy as np
import pytest

from pytest_sits.checks.equivalence import check_golden_coverage, check_latency_ratio, check_precision, check_throughput
from pytest_sits.equivalence.comparator import compare
from pytest_sits.equivalence.corpus import CORPUS
from pytest_sits.equivalence.tolerance import operator_facts, resolve
from pytest_sits.profiles import resolve as resolve_profile
from pytest_sits.verdict import FAIL, INCONCLUSIVE, PASS, SKIP, WARN

torch = pytest.importorskip("torch")

TH = resolve_profile("base").thresholds("EQ-PRECISION")


def test_tolerance_policy():
    t = resolve(CORPUS["gelu"], "float16", TH)
    assert t["rtol"] == 0.003 and t["atol"] == 1e-3 and "SITS2026" in t["source"]
    g = resolve(CORPUS["gemm"], "float32", TH)
    assert g["rtol"] == pytest.approx(1.3e-6 + 512 ** 0.5 * 2 ** -24) and "sqrt(K=512)" in g["source"]
    assert resolve(CORPUS["gelu"], "float16", TH, risk_class="high")["atol"] == 1e-4
    assert resolve(CORPUS["gelu"], "float16", TH, risk_class="low")["atol"] == 1e-2
    d = resolve(CORPUS["decoder_layer"], "float16", TH)
    assert d["rtol"] == 1e-2 and "operator override" in d["source"]
    assert resolve(CORPUS["gemm"], "int8", TH)["rtol"] == 0.0


def test_the_check_resolves_the_tolerance_from_the_profile_thresholds_and_the_operator():
    """The verdict records the profile's thresholds (what replay checks against the report's profile) and the
    tolerance the check resolved from them and the operator's facts."""
    out, ref, tol = _gemm_fp16()
    v = check_precision(_ev(compare(out, ref, rtol=tol["rtol"], atol=tol["atol"])), TH, "cpu gemm float16")
    assert v.thresholds == TH and v.evidence["tolerance"] == tol
    strict = dict(TH, rtol_fp16=1e-9)
    assert check_precision(_ev(compare(out, ref, rtol=tol["rtol"], atol=tol["atol"])), strict, "x").evidence[
        "tolerance"]["rtol"] < tol["rtol"]


def test_version_1_verdicts_of_older_reports_still_replay():
    from pytest_sits.checks import get_version

    out, ref, tol = _gemm_fp16()
    v1 = get_version("EQ-PRECISION", 1)
    old = v1.fn({"comparison": compare(out, ref, rtol=tol["rtol"], atol=tol["atol"]), "reference": "f64"}, tol, "x")
    assert old.status == PASS and old.check == {"name": "EQ-PRECISION", "version": 1} and old.thresholds == tol
    assert get_version("EQ-PRECISION", 2).fn is check_precision


def _gemm_fp16():
    from pytest_sits.equivalence.runner import comparable, execute, prepare, reference_output

    op = CORPUS["gemm"]
    stored, exact = prepare(op, "float16")
    run = execute(op, "float16", stored, "cpu")
    ref = reference_output(op, exact, "float16")
    return comparable(run["output"], "float16")[0].copy(), comparable(ref, "float16")[0], resolve(op, "float16", TH)


GEMM16 = operator_facts(CORPUS["gemm"], "float16")


def _ev(result):
    return {"comparison": result, "reference": "f64", "operator": GEMM16}


def test_real_gemm_passes_and_perturbations_fail():
    out, ref, tol = _gemm_fp16()
    ok = check_precision(_ev(compare(out, ref, rtol=tol["rtol"], atol=tol["atol"])), TH,
                         "cpu gemm float16")
    assert ok.status == PASS
    # just over the tolerance on one element
    bad = out.copy()
    i = int(np.argmax(np.abs(ref)))
    bad.flat[i] = np.float16(float(ref.flat[i]) * (1 + 1.5 * tol["rtol"]) + np.sign(float(ref.flat[i])) * tol["atol"])
    v = check_precision(_ev(compare(bad, ref, rtol=tol["rtol"], atol=tol["atol"])), TH,
                        "cpu gemm float16")
    assert v.status == FAIL and "Mismatched elements: 1 / 65536" in v.reason
    assert f"at index ({i // 256}, {i % 256})" in v.reason
    # a single NaN
    bad = out.copy()
    bad[3, 7] = np.nan
    v = check_precision(_ev(compare(bad, ref, rtol=tol["rtol"], atol=tol["atol"])), TH,
                        "x")
    assert v.status == FAIL and "NaN in one output only: 1" in v.reason
    # a swapped pair of rows
    bad = out.copy()
    bad[[5, 6]] = bad[[6, 5]]
    r = compare(bad, ref, rtol=tol["rtol"], atol=tol["atol"])
    assert check_precision(_ev(r), TH, "x").status == FAIL
    assert r["first_mismatch_index"][0] == 5
    # an fp16 overflow to inf
    bad = out.copy()
    bad[0, 0] = np.float16(np.inf)
    r = compare(bad, ref, rtol=tol["rtol"], atol=tol["atol"])
    assert check_precision(_ev(r), TH, "x").status == FAIL and r["inf_mismatching"] == 1


QUIET = [0.02, 0.0201, 0.0199, 0.02, 0.0202, 0.0198, 0.02, 0.0201, 0.0199, 0.02]
NOISY = [0.02, 0.026, 0.016, 0.022, 0.014, 0.024, 0.02, 0.03, 0.017, 0.021]


def _rounds(samples, before, after):
    return {"samples_s": samples, "control": {"before_s": before, "after_s": after}, "control_cv": 0.0, "method": "m"}


def test_throughput_check():
    steady = [1.0, 1.01, 0.99, 1.0, 1.02, 0.98] * 4
    v = check_throughput(_rounds(steady, QUIET, QUIET), {"max_cv": 0.05}, "cpu gemm")
    assert v.status == PASS and "bootstrap percentile, 24 trials" in v.reason
    jumpy = [1.0, 1.3, 0.8, 1.1, 0.7, 1.2] * 4
    v = check_throughput(_rounds(jumpy, QUIET, QUIET), {"max_cv": 0.05}, "cpu gemm")
    assert v.status == FAIL and "the host control varied only" in v.reason
    v = check_throughput(_rounds(jumpy, NOISY, NOISY), {"max_cv": 0.05}, "cpu gemm")
    assert v.status == INCONCLUSIVE and "machine moved under the measurement" in v.reason
    assert v.evidence["median_s"] == pytest.approx(1.05)
    v = check_throughput(_rounds(jumpy, QUIET, [x * 1.5 for x in QUIET]), {"max_cv": 0.05}, "cpu gemm")
    assert v.status == INCONCLUSIVE and "+50.0%" in v.reason  # the host's median moved between before and after
    near = [1.0, 1.05, 0.95, 1.02, 0.98] * 2
    v = check_throughput(_rounds(near, QUIET, QUIET), {"max_cv": 0.04}, "cpu gemm")
    assert v.status == INCONCLUSIVE and "more rounds would decide" in v.reason


def test_ratio_and_coverage_checks():
    rows = [{"op": "gemm", "dtype": "float16", "ratio": 1.4}, {"op": "gelu", "dtype": "float16", "ratio": 0.9}]
    assert check_latency_ratio({"operators": rows}, {"max_ratio": None}, "cuda:0").status == WARN
    assert check_latency_ratio({"operators": rows}, {"max_ratio": 1.2}, "cuda:0").status == FAIL
    assert check_latency_ratio({"operators": rows}, {"max_ratio": 2.0}, "cuda:0").status == PASS
    assert check_latency_ratio({"operators": []}, {"max_ratio": 2.0}, "cuda:0").status == SKIP
    v = check_golden_coverage({"golden": ["gemm__float16"], "corpus": ["gemm__float16", "gelu__float16"],
                               "source": "/g"}, TH)
    assert v.status == INCONCLUSIVE and "gelu__float16" in v.reason
    assert check_golden_coverage({"golden": ["a"], "corpus": ["a"], "source": "/g"}, TH).status == PASS


@pytest.mark.slow
def test_corpus_on_this_cpu(pytester, report_of):
    result = pytester.runpytest("--pyargs", "pytest_sits.conformance", "--sits-level=standard",
                                "-m", "EQ-PRECISION", "-p", "no:cacheprovider")
    verdicts = report_of(pytester.path)["verdicts"]
    statuses = {v["subject"]: v["status"] for v in verdicts}
    assert "FAIL" not in statuses.values(), [v["reason"] for v in verdicts if v["status"] == "FAIL"]
    assert statuses["cpu decoder_layer float32"] == "PASS"
    assert statuses["cpu gemm float8_e4m3fn"] == "SKIP"
    assert sum(s == "PASS" for s in statuses.values()) >= 30
    assert result.ret == 0


def test_golden_record_then_compare(pytester, report_of, monkeypatch):
    gold = pytester.path / "golden"
    args = ["--pyargs", "pytest_sits.conformance", "--sits-level=standard", "-p", "no:cacheprovider"]
    pytester.runpytest(*args, "-m", "EQ-PRECISION", "-k", "gemm or softmax", f"--sits-golden-record={gold}")
    manifest = json.loads((gold / "golden.json").read_text())
    assert manifest["format"] == "sits-golden/1" and "gemm__float16" in manifest["entries"]
    entry = json.loads((gold / "entries" / "gemm__float16" / "entry.json").read_text())
    assert len(entry["arrays"]["a"]["sha256"]) == 64 and entry["arrays"]["a"]["dtype"] == "float16"
    assert manifest["versions"]["torch"]
    # compare: the stored inputs are used byte for byte, not regenerated from the seed
    from pytest_sits.equivalence import runner

    monkeypatch.setattr(runner, "SEED", 1)
    pytester.runpytest(*args, "-m", "EQ-PRECISION or EQ-LATENCY", "-k", "gemm or softmax or golden or latency",
                       f"--sits-golden={gold}")
    verdicts = report_of(pytester.path)["verdicts"]
    by = {v["subject"]: v for v in verdicts}
    assert by["cpu gemm float16"]["status"] == "PASS"
    assert "golden output recorded on" in by["cpu gemm float16"]["reason"] or "all" in by["cpu gemm float16"]["reason"]
    assert by["golden set"]["status"] == "INCONCLUSIVE" and "gelu__float16" in by["golden set"]["reason"]
    lat = next(v for v in verdicts if v["requirement"] == "EQ-LATENCY")
    assert lat["status"] == "WARN" and lat["measured"] > 0
    # a golden set recorded with another operator list: what is missing is said
    pytester.runpytest(*args, "-m", "EQ-PRECISION", "-k", "gelu", f"--sits-golden={gold}")
    v = next(v for v in report_of(pytester.path)["verdicts"] if v["subject"] == "gelu float16")
    assert v["status"] == "INCONCLUSIVE" and "not in the golden set" in v["reason"]
    # one flipped byte: corrupted golden data is an ERROR, never a comparison
    f = gold / "entries" / "gemm__float16" / "__output__.npy"
    data = bytearray(f.read_bytes())
    data[-1] ^= 0xFF
    f.write_bytes(bytes(data))
    pytester.runpytest(*args, "-m", "EQ-PRECISION", "-k", "gemm and float16", f"--sits-golden={gold}")
    v = next(v for v in report_of(pytester.path)["verdicts"] if v["subject"] == "gemm float16")
    assert v["status"] == "ERROR" and "corrupted golden data" in v["reason"] and "__output__.npy" in v["reason"]


def test_golden_usage_errors(pytester):
    pytester.makepyfile("def test_x():\n    pass\n")
    r = pytester.runpytest(f"--sits-golden={pytester.path / 'nowhere'}")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines(["*bad golden set*no golden.json*fix: record a golden set*"])
    r = pytester.runpytest("--sits-golden=a", "--sits-golden-record=b")
    assert r.ret == pytest.ExitCode.USAGE_ERROR


def test_without_torch_it_skips_with_the_reason(pytester, report_of, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)
    pytester.runpytest("--pyargs", "pytest_sits.conformance", "--sits-level=standard", "-m", "EQ-PRECISION",
                       "-k", "gelu", "-p", "no:cacheprovider")
    v = report_of(pytester.path)["verdicts"][0]
    assert v["status"] == "SKIP" and "torch is not installed" in v["reason"]


def test_sim_platform_skips_equivalence(pytester, conformance_args, report_of):
    pytester.runpytest(*conformance_args, "--sits-platform=sim:h100", "--sits-level=standard",
                       "-m", "EQ-PRECISION", "-k", "gelu")
    assert {v["status"] for v in report_of(pytester.path)["verdicts"]} == {"SKIP"}
