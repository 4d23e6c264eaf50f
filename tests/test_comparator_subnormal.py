"""The comparator's greatest relative difference is exact: |a - b| / |b| on rationals, rounded once, subnormals
included, |b| = 0 explicit (0 for an equal zero, inf otherwise)."""

import math
from fractions import Fraction

import numpy as np
import pytest

from pytest_sits.checks.equivalence import describe
from pytest_sits.equivalence.comparator import compare

TINY32 = float(np.finfo(np.float32).smallest_subnormal)  # 1.4e-45
TINY64 = float(np.finfo(np.float64).smallest_subnormal)  # 4.9e-324


def exact_greatest(a, b):
    """(value, first flat index) of max |a-b|/|b| over finite pairs, by brute force on rationals."""
    best, at = -1.0, -1
    for k, (x, y) in enumerate(zip(a.ravel().tolist(), b.ravel().tolist())):
        if not (math.isfinite(x) and math.isfinite(y)):
            continue
        fx, fy = Fraction(x), Fraction(y)
        if fy == 0:
            v = 0.0 if fx == 0 else math.inf
        else:
            try:
                v = float(abs(fx - fy) / abs(fy))
            except OverflowError:
                v = math.inf
        if v > best:
            best, at = v, k
    return best, at


def rel(a, b, dtype=np.float32, **kw):
    r = compare(np.array(a, dtype), np.array(b, dtype), rtol=0, atol=0, **kw)
    return r["max_rel_diff"], r["max_rel_index"]


def test_smallest_subnormals():
    assert rel([2 * TINY32], [TINY32]) == (1.0, [0])  # (|b| + tiny) in the denominator gave 0.5
    assert rel([3 * TINY32, 1.0], [TINY32, 1.0]) == (2.0, [0])
    assert rel([1.0], [TINY32]) == (float(1 / Fraction(TINY32) - 1), [0])  # finite (7.1e44), not inf
    h = float(np.finfo(np.float16).smallest_subnormal)
    assert rel([2 * h, 1.0], [h, 1.0], np.float16) == (1.0, [0])


def test_zero_expected_is_explicit():
    assert rel([0.0, -0.0, 1.0], [0.0, 0.0, 1.0]) == (0.0, [0])  # 0/0 is no difference, either sign
    assert rel([0.0, TINY32, 5.0], [0.0, 0.0, 1.0]) == (math.inf, [1])  # any value where 0 was expected
    assert rel([0.0, 0.0], [TINY32, 2 * TINY32]) == (1.0, [0])  # ties keep the first


def test_float64_subnormals_and_overflow():
    assert rel([2 * TINY64], [TINY64], np.float64) == (1.0, [0])
    assert rel([1.0], [TINY64], np.float64) == (math.inf, [0])  # 2.0e323 is beyond float64: rounds to inf
    assert rel([1e8], [1e-300], np.float64)[0] == float(abs(Fraction(1e8) - Fraction(1e-300)) / Fraction(1e-300))
    big = np.finfo(np.float64).max
    assert rel([big, 1.0], [-big, 1.0], np.float64) == (2.0, [0])  # a - b overflows; the quotient does not


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_matches_rational_arithmetic_on_mixed_data(seed, dtype):
    rng = np.random.default_rng(seed)
    n = 3000
    info = np.finfo(dtype)
    kinds = rng.integers(0, 5, n)
    b = np.where(kinds == 0, 0.0,
                 np.where(kinds == 1, rng.integers(1, 64, n) * float(info.smallest_subnormal),
                          rng.standard_normal(n) * 10.0 ** rng.integers(-3, 3, n))).astype(dtype)
    a = (b.astype(np.float64) * (1 + rng.normal(0, 1e-3, n))).astype(dtype)
    sub = rng.random(n) < 0.2
    a[sub] = (rng.integers(0, 64, sub.sum()) * float(info.smallest_subnormal)).astype(dtype)
    a[rng.integers(0, n, 3)] = b[rng.integers(0, n, 3)]
    r = compare(a, b, rtol=1e-3, atol=0, chunk=512, threads=3)
    want, at = exact_greatest(a, b)
    assert r["max_rel_diff"] == want
    if math.isfinite(want):
        assert r["max_rel_index"] == [at]
    else:
        assert math.isinf(exact_greatest(a.ravel()[r["max_rel_index"]], b.ravel()[r["max_rel_index"]])[0])


def test_zero_expected_everywhere_but_equal_and_many_exact_ties():
    b = np.zeros(10_000, np.float32)
    assert compare(b.copy(), b, rtol=0, atol=0)["max_rel_diff"] == 0.0
    b = np.full(300_000, 3 * TINY32, np.float32)
    a = b * 2  # every element exactly 1.0 apart in relative terms
    r = compare(a, b, rtol=0, atol=0, chunk=4096, threads=2)
    assert r["max_rel_diff"] == 1.0 and r["max_rel_index"] == [0]


def test_message_reports_the_exact_value():
    r = compare(np.array([2 * TINY32], np.float32), np.array([TINY32], np.float32), rtol=0.5, atol=0)
    assert "Greatest relative difference: 1 at index (0,)" in describe(r)
