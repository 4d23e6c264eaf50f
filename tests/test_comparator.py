"""The comparator agrees with a direct, full-array computation of every metric."""

import math

import numpy as np
import pytest

from pytest_sits.checks.equivalence import describe
from pytest_sits.equivalence.comparator import compare


def reference(a, b, rtol, atol):
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    both_nan = np.isnan(a64) & np.isnan(b64)
    same_inf = np.isinf(a64) & (a64 == b64)
    finite = np.isfinite(a64) & np.isfinite(b64)
    d = np.abs(a.astype(np.float32 if a.dtype != np.float64 else np.float64)
               - b.astype(np.float32 if a.dtype != np.float64 else np.float64)).astype(np.float64)
    ok = (finite & (d <= atol + rtol * np.abs(b64))) | both_nan | same_inf
    return int((~ok).sum())


def ulps_f32(a, b):
    def ordered(x):
        i = x.view(np.int32).astype(np.int64)
        return np.where(i < 0, -(i & 0x7FFFFFFF), i)
    return np.abs(ordered(a) - ordered(b))


@pytest.mark.parametrize("seed", range(5))
def test_metrics_match_a_direct_computation(seed):
    rng = np.random.default_rng(seed)
    shape = (37, 1000, 7)
    b = rng.standard_normal(shape).astype(np.float32)
    a = (b * (1 + rng.normal(0, 2e-6, shape))).astype(np.float32)
    a.flat[rng.integers(0, a.size, 20)] += 0.01
    r = compare(a, b, rtol=1.3e-6, atol=1e-5, chunk=4096, threads=3)
    assert r["mismatches"] == reference(a, b, 1.3e-6, 1e-5)
    d = np.abs(a.astype(np.float32) - b.astype(np.float32))
    assert r["max_abs_diff"] == pytest.approx(float(d.max()))
    assert tuple(r["max_abs_index"]) == np.unravel_index(int(np.argmax(d)), shape)
    rel = d / np.abs(b)
    assert r["max_rel_diff"] == pytest.approx(float(rel.max()), rel=1e-6)
    assert tuple(r["max_rel_index"]) == np.unravel_index(int(np.argmax(rel)), shape)
    u = ulps_f32(a.reshape(-1), b.reshape(-1))
    assert r["ulp_max"] == int(u.max())
    assert r["ulp_p99"] == float(np.sort(u)[math.ceil(0.99 * u.size) - 1])
    a64, b64 = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    cos = a64 @ b64 / math.sqrt((a64 @ a64) * (b64 @ b64))
    assert r["cosine_similarity"] == pytest.approx(cos, abs=1e-6)
    snr = 10 * math.log10((b64 @ b64) / ((a64 - b64) @ (a64 - b64)))
    assert r["snr_db"] == pytest.approx(snr, abs=0.05)


def test_agrees_with_torch_assert_close_count():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    b = rng.standard_normal(50_000).astype(np.float32)
    a = (b + rng.normal(0, 3e-5, b.shape)).astype(np.float32)
    r = compare(a, b, rtol=1.3e-6, atol=1e-5, chunk=2048)
    with pytest.raises(AssertionError, match=f"Mismatched elements: {r['mismatches']} / 50000"):
        torch.testing.assert_close(torch.from_numpy(a), torch.from_numpy(b), rtol=1.3e-6, atol=1e-5)


def test_single_nan_is_a_mismatch_and_nan_in_both_is_not():
    b = np.ones((4, 5), np.float32)
    a = b.copy()
    a[2, 3] = np.nan
    r = compare(a, b, rtol=1e-3, atol=1e-3)
    assert r["mismatches"] == 1 and r["nan_in_one"] == 1 and r["max_abs_index"] == [2, 3]
    assert "NaN in one output only: 1" in describe(r)
    b[2, 3] = np.nan
    r = compare(a, b, rtol=1e-3, atol=1e-3)
    assert r["passed"] and r["nan_in_both"] == 1


def test_fp16_overflow_to_inf_is_caught():
    b = np.array([60000.0, 1.0, -2.0], np.float16)
    a = b.copy()
    a[0] = np.float16(np.inf)
    r = compare(a, b, rtol=3e-3, atol=1e-3)
    assert r["mismatches"] == 1 and r["inf_mismatching"] == 1 and r["max_abs_diff"] == math.inf
    r = compare(a, a.copy(), rtol=3e-3, atol=1e-3)
    assert r["passed"] and r["inf_matching"] == 1


def test_swapped_rows_are_reported_where_they_are():
    rng = np.random.default_rng(1)
    b = rng.standard_normal((64, 32)).astype(np.float32)
    a = b.copy()
    a[[10, 11]] = a[[11, 10]]
    r = compare(a, b, rtol=1.3e-6, atol=1e-5)
    assert r["mismatches"] > 50 and r["max_abs_index"][0] in (10, 11)
    assert r["first_mismatch_index"][0] == 10


def test_just_over_the_tolerance():
    b = np.full(1000, 1.0, np.float32)
    a = b * np.float32(1 + 0.0031)  # fp16 rule: 0.3% relative plus atol 1e-3... 0.31% of 1.0 = 0.0031 > 0.0030 + 0.0001
    r = compare(a, b, rtol=0.003, atol=1e-4)
    assert r["mismatches"] == 1000
    r = compare(b * np.float32(1 + 0.0029), b, rtol=0.003, atol=1e-4)
    assert r["passed"]


def test_signed_zeros_are_equal_but_counted():
    a = np.array([0.0, -0.0, 1.0], np.float32)
    b = np.array([-0.0, 0.0, 1.0], np.float32)
    r = compare(a, b, rtol=0, atol=0)
    assert r["passed"] and r["signed_zero_differences"] == 2 and r["ulp_max"] == 0


def test_ulps_across_zero_and_in_fp16_and_bf16_units():
    a = np.array([np.nextafter(np.float32(0), np.float32(1))], np.float32)
    b = np.array([-np.nextafter(np.float32(0), np.float32(1))], np.float32)
    assert compare(a, b, rtol=0, atol=1)["ulp_max"] == 2
    h = np.array([1.0], np.float16)
    assert compare(np.nextafter(h, np.float16(2)), h, rtol=1, atol=1)["ulp_max"] == 1
    bf = np.array([1.0], np.float32)
    bf_next = (bf.view(np.int32) + (1 << 16)).view(np.float32)  # the next bfloat16 after 1.0
    assert compare(bf_next, bf, rtol=1, atol=1, ulp_shift=16)["ulp_max"] == 1


def test_kl_divergence_for_probabilities():
    p = np.array([[0.5, 0.5], [0.9, 0.1]], np.float32)
    q = np.array([[0.6, 0.4], [0.9, 0.1]], np.float32)
    r = compare(q, p, rtol=0.5, atol=0.5, probabilities=True)
    want = (0.5 * math.log(0.5 / 0.6) + 0.5 * math.log(0.5 / 0.4)) / 2
    assert r["kl_divergence"] == pytest.approx(want, rel=1e-5)


def test_message_in_the_manner_of_assert_close():
    b = np.zeros((3, 4), np.float32)
    a = b.copy()
    a[1, 2] = 0.5
    text = describe(compare(a, b, rtol=0.003, atol=1e-3))
    assert "Mismatched elements: 1 / 12 (8.3%)" in text
    assert "Greatest absolute difference: 0.5 at index (1, 2) (up to 0.001 allowed)" in text
    assert "Greatest relative difference: inf at index (1, 2) (up to 0.003 allowed)" in text


def test_integers_compare_exactly_and_bad_input_is_refused():
    r = compare(np.array([1, 2, 3], np.int8), np.array([1, 2, 4], np.int8), rtol=0, atol=0)
    assert r["mismatches"] == 1 and r["exact"]
    with pytest.raises(ValueError, match="shapes differ"):
        compare(np.zeros(3), np.zeros(4), rtol=0, atol=0)
    with pytest.raises(ValueError, match="dtypes differ"):
        compare(np.zeros(3, np.float32), np.zeros(3), rtol=0, atol=0)


def test_no_full_size_temporaries():
    import tracemalloc

    n = 16_000_000
    a = np.ones(n, np.float32)
    b = a.copy()
    tracemalloc.start()
    compare(a, b, rtol=1e-6, atol=1e-6)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 16 * 2 ** 20  # a fixed set of per-thread buffers, far below one 64 MB array


def test_first_mismatch_is_the_earliest_of_nan_and_tolerance():
    b = np.zeros(10, np.float32)
    a = b.copy()
    a[2] = 1.0
    a[7] = np.nan
    assert compare(a, b, rtol=0, atol=0.5)["first_mismatch_index"] == [2]
