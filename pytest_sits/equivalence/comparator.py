"""A one-pass, chunked comparator for large outputs: everything a lab asks about a mismatch.

``compare(actual, expected, rtol=, atol=)`` walks both arrays once, in
cache-sized chunks (128 Ki elements), on several threads (numpy releases the
GIL inside ufuncs), and computes: the mismatch count under
``|actual - expected| <= atol + rtol * |expected|`` (the rule of
``torch.testing.assert_close``; NaN equals NaN at the same place, infinities
must match exactly), the greatest absolute and relative differences and
where they are (the relative one exact: |actual - expected| / |expected| on
rationals, rounded once, with |expected| = 0 giving 0 for an equal zero and inf
otherwise; subnormals are not biased), the ULP distance (max and p99, exact below 1024 ULP), the
cosine similarity, the SNR in dB, the KL divergence when the outputs are
probabilities, NaN/inf agreement and signed-zero differences.  It never
allocates a full-size temporary: its working memory is a few buffers per
thread (about 4 MiB each).
"""

from __future__ import annotations

import math
import os
import threading
from fractions import Fraction
from typing import Any, Dict, List, Optional

import numpy as np

CHUNK = 1 << 17
ULP_EXACT = 1024
_INT_FOR = {np.dtype(np.float16): (np.int16, 15), np.dtype(np.float32): (np.int32, 31),
            np.dtype(np.float64): (np.int64, 63)}


class _Acc:
    """What one thread accumulates over its chunks."""

    def __init__(self) -> None:
        self.n = self.mismatches = 0
        self.max_abs, self.max_abs_at = -1.0, -1
        self.max_rel, self.max_rel_at = -1.0, -1
        self.first_mismatch = -1
        self.dot = self.aa = self.bb = self.dd = 0.0
        self.kl = 0.0
        self.ulp_hist = np.zeros(ULP_EXACT, dtype=np.int64)
        self.ulp_big: Dict[int, int] = {}
        self.ulp_max = 0
        self.nan_both = self.nan_only = self.inf_both = self.inf_mismatch = 0
        self.signed_zero = 0
        self.finite_pairs = 0


def _ordered(i: np.ndarray, bits: int) -> np.ndarray:
    """Map sign-magnitude float bits to integers that order like the floats (+0 and -0 both 0)."""
    i64 = i.astype(np.int64)
    mag = i64 & ((1 << bits) - 1)
    return np.where(i64 < 0, -mag, mag)


def _chunk(a: np.ndarray, b: np.ndarray, off: int, acc: _Acc, rtol: float, atol: float, probs: bool,
           ulp_shift: int, buf: Dict[str, np.ndarray]) -> None:
    m = a.shape[0]
    ftype = buf["d"].dtype
    if a.dtype != ftype:
        a32, b32 = buf["a"][:m], buf["b"][:m]
        np.copyto(a32, a)
        np.copyto(b32, b)
    else:
        a32, b32 = a, b
    d = buf["d"][:m]
    np.subtract(a32, b32, out=d)
    ad = np.abs(d, out=d)
    i = int(np.argmax(ad))  # argmax stops at the first NaN: a non-finite maximum means NaN or inf here
    valid: Optional[np.ndarray] = None
    if not math.isfinite(float(ad[i])):  # rare: NaN or inf somewhere in this chunk
        na, nb = np.isnan(a32), np.isnan(b32)
        ia, ib = np.isinf(a32), np.isinf(b32)
        both_nan = na & nb
        acc.nan_both += int(both_nan.sum())
        nan_only = na ^ nb
        acc.nan_only += int(nan_only.sum())
        inf_any = (ia | ib) & ~(na | nb)
        inf_eq = inf_any & (a32 == b32)
        acc.inf_both += int(inf_eq.sum())
        inf_bad = inf_any & ~inf_eq
        acc.inf_mismatch += int(inf_bad.sum())
        bad = nan_only | inf_bad
        valid = ~(na | nb | ia | ib)
        nbad = int(bad.sum())
        if nbad:
            acc.mismatches += nbad
            first = int(np.argmax(bad))
            if acc.first_mismatch < 0 or off + first < acc.first_mismatch:
                acc.first_mismatch = off + first
            acc.max_abs, acc.max_abs_at = math.inf, off + first if acc.max_abs != math.inf else acc.max_abs_at
            acc.max_rel, acc.max_rel_at = math.inf, off + first if acc.max_rel != math.inf else acc.max_rel_at
        a32 = np.where(valid, a32, 0).astype(ftype, copy=False)
        b32 = np.where(valid, b32, 0).astype(ftype, copy=False)
        np.subtract(a32, b32, out=d)
        ad = np.abs(d, out=d)
        i = int(np.argmax(ad))
    ab = np.abs(b32, out=buf["ab"][:m])
    tol = buf["tol"][:m]
    np.multiply(ab, rtol, out=tol)
    np.add(tol, atol, out=tol)
    over = np.greater(ad, tol, out=buf["mask"][:m])
    k = int(np.count_nonzero(over))
    if k:
        acc.mismatches += k
        first = off + int(np.argmax(over))
        if acc.first_mismatch < 0 or first < acc.first_mismatch:
            acc.first_mismatch = first
    if ad[i] > acc.max_abs:
        acc.max_abs, acc.max_abs_at = float(ad[i]), off + i
    rj, j = _greatest_rel(a32, b32, ad, ab, buf["rel"][:m], buf["mask"][:m])
    if rj > acc.max_rel:
        acc.max_rel, acc.max_rel_at = rj, off + j
    # energy terms for the cosine similarity and the SNR (float64 accumulators across chunks)
    acc.dot += float(np.dot(a32, b32))
    acc.aa += float(np.dot(a32, a32))
    acc.bb += float(np.dot(b32, b32))
    acc.dd += float(np.dot(ad, ad))
    if probs:
        with np.errstate(divide="ignore", invalid="ignore"):
            p = b32.astype(np.float64)
            q = a32.astype(np.float64)
            term = np.where(p > 0, p * (np.log(p) - np.log(np.maximum(q, 1e-300))), 0.0)
        acc.kl += float(term.sum())
    # ULP distance in the original element type (exact integers)
    itype, bits = _INT_FOR[a.dtype] if a.dtype in _INT_FOR else _INT_FOR[np.dtype(np.float32)]
    src_a = a if a.dtype in _INT_FOR else a32
    src_b = b if b.dtype in _INT_FOR else b32
    ia, ib = src_a.view(itype), src_b.view(itype)
    if valid is not None:
        ia = np.where(valid, ia, 0)
        ib = np.where(valid, ib, 0)
    xi = np.bitwise_xor(ia, ib, out=buf["i"][:m].view(ia.dtype) if ia.dtype.itemsize == 4 else None)
    if int(xi.min()) < 0:  # some signs differ: the exact, slower mapping
        oa, ob = _ordered(ia, bits), _ordered(ib, bits)
        ul = np.abs(oa - ob)
        zero_mask = (1 << bits) - 1
        acc.signed_zero += int(np.count_nonzero(((ia & zero_mask) == 0) & ((ib & zero_mask) == 0) & (ia != ib)))
    else:
        # same signs: the magnitudes' bit patterns order like the values, and their difference
        # cannot overflow the integer type
        ul = np.subtract(ia, ib, out=xi)
        np.abs(ul, out=ul)
    if ulp_shift:
        ul = ul >> ulp_shift
    top = int(ul.max())
    acc.ulp_max = max(acc.ulp_max, top)
    small = ul if top < ULP_EXACT else np.minimum(ul, ULP_EXACT - 1)
    counts = np.bincount(small, minlength=ULP_EXACT)
    acc.ulp_hist += counts
    if top >= ULP_EXACT - 1:
        big = ul[ul >= ULP_EXACT - 1]
        if big.size:
            acc.ulp_hist[ULP_EXACT - 1] -= big.size
            for e, c in zip(*np.unique(np.floor(np.log2(big.astype(np.float64))).astype(int), return_counts=True)):
                acc.ulp_big[int(e)] = acc.ulp_big.get(int(e), 0) + int(c)
    acc.n += m


#: Near-ties of the float64 estimate resolved exactly (rational arithmetic) per chunk; beyond that, the first.
EXACT_CANDIDATES = 64


def _exact_rel(a: float, b: float) -> float:
    """|a - b| / |b| of two finite floats, computed on rationals and rounded once (0/0 = 0, x/0 = inf)."""
    fa, fb = Fraction(a), Fraction(b)
    if fb == 0:
        return 0.0 if fa == 0 else math.inf
    try:
        return float(abs(fa - fb) / abs(fb))  # int/int true division: correctly rounded
    except OverflowError:  # beyond the float64 range
        return math.inf


def _greatest_rel(a: np.ndarray, b: np.ndarray, ad: np.ndarray, ab: np.ndarray, rel: np.ndarray,
                  mask: np.ndarray) -> tuple[float, int]:
    """The greatest relative difference |a - b| / |b| of a chunk and its first index, exactly.

    |b| = 0 is explicit: 0 when a is 0 too (either sign), inf otherwise; nothing is added to |b|, so subnormal
    expected values are judged on their own value.  A float64 estimate ranks the elements (|a - b| as the
    chunk already has it, divided by |b|: for float16/float32 inputs it cannot overflow, since |a - b| <= 6.8e38
    and |b| >= 1.4e-45); the elements within its error of the greatest are ranked again in float64 from a and
    b, and at most :data:`EXACT_CANDIDATES` of those are compared on rationals (more than that: the first).
    The value reported is the exact quotient rounded once to float64 (inf beyond its range)."""
    np.divide(ad, ab, out=rel, dtype=np.float64)  # x/0 -> inf, 0/0 -> nan (both zero: no difference)
    top = float(np.fmax.reduce(rel))  # fmax skips the nan of 0/0
    if not top > 0:
        return 0.0, 0
    if math.isinf(top):
        zero_b = np.flatnonzero(np.isinf(rel) & (ab == 0))
        if zero_b.size:  # a non-zero value where zero was expected: infinitely far, exactly
            return math.inf, int(zero_b[0])
        cand = np.flatnonzero(np.isinf(rel))  # |a - b| overflowed (opposite huge values)
    else:
        np.greater_equal(rel, top * (1 - 2.0 ** -21), out=mask)  # |a - b| may be rounded to float32
        cand = np.flatnonzero(mask)
    if cand.size > EXACT_CANDIDATES:  # near-ties: rank again from a and b in float64
        x, y = a[cand].astype(np.float64), np.abs(b[cand].astype(np.float64))
        est = np.abs(x - b[cand].astype(np.float64)) / y
        est = np.where(np.isinf(est), np.abs(x * 0.5 - b[cand] * 0.5) / y * 2, est)
        cand = cand[est >= est.max() * (1 - 2.0 ** -48)]
        if cand.size > EXACT_CANDIDATES:
            cand = cand[:1]
    best, at = -1.0, int(cand[0])
    for k in cand:  # ascending: ties keep the first
        v = _exact_rel(float(a[k]), float(b[k]))
        if v > best:
            best, at = v, int(k)
    return best, at


def _buffers(chunk: int, ftype: Any) -> Dict[str, np.ndarray]:
    return {"a": np.empty(chunk, ftype), "b": np.empty(chunk, ftype), "d": np.empty(chunk, ftype),
            "i": np.empty(chunk, np.int32),
            "ab": np.empty(chunk, ftype), "tol": np.empty(chunk, ftype),
            "rel": np.empty(chunk, np.float64), "mask": np.empty(chunk, bool)}


def _p99(hist: np.ndarray, big: Dict[int, int], n: int) -> Optional[float]:
    if n == 0:
        return None
    rank = math.ceil(0.99 * n)
    cum = np.cumsum(hist)
    idx = int(np.searchsorted(cum, rank))
    if idx < ULP_EXACT - 1:
        return float(idx)
    seen = int(cum[-1])
    for e in sorted(big):
        seen += big[e]
        if seen >= rank:
            return float(2 ** e)  # a lower bound: the bucket [2^e, 2^(e+1))
    return float(ULP_EXACT)


def compare(actual: Any, expected: Any, *, rtol: float, atol: float, probabilities: bool = False,
            ulp_shift: int = 0, chunk: int = CHUNK, threads: Optional[int] = None) -> Dict[str, Any]:
    """Compare ``actual`` with ``expected`` (same shape); return every metric as a plain dict."""
    a = np.asarray(actual)
    b = np.asarray(expected)
    if a.shape != b.shape:
        raise ValueError(f"shapes differ: actual {a.shape}, expected {b.shape}")
    if a.dtype != b.dtype:
        raise ValueError(f"dtypes differ: actual {a.dtype}, expected {b.dtype} (compare like with like)")
    if a.dtype.kind in "iub":
        diff = int(np.count_nonzero(a != b)) if a.size <= (1 << 24) else sum(
            int(np.count_nonzero(a.reshape(-1)[s:s + chunk] != b.reshape(-1)[s:s + chunk]))
            for s in range(0, a.size, chunk))
        return {"n": int(a.size), "shape": list(a.shape), "dtype": str(a.dtype), "mismatches": diff,
                "mismatch_fraction": diff / max(a.size, 1), "rtol": 0.0, "atol": 0.0, "passed": diff == 0,
                "exact": True}
    fa, fb = a.reshape(-1), b.reshape(-1)
    if not (fa.flags.c_contiguous and fb.flags.c_contiguous):
        fa, fb = np.ascontiguousarray(fa), np.ascontiguousarray(fb)
    ftype = np.float64 if a.dtype == np.float64 else np.float32
    n = fa.shape[0]
    nthreads = threads or min(len(os.sched_getaffinity(0)), max(1, n // (4 * chunk)))
    bounds = [(n * t // nthreads) // chunk * chunk for t in range(nthreads)] + [n]
    accs = [_Acc() for _ in range(nthreads)]

    def work(t: int) -> None:
        buf = _buffers(chunk, ftype)
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            for s in range(bounds[t], bounds[t + 1], chunk):
                e = min(s + chunk, bounds[t + 1])
                _chunk(fa[s:e], fb[s:e], s, accs[t], rtol, atol, probabilities, ulp_shift, buf)

    if nthreads == 1:
        work(0)
    else:
        pool = [threading.Thread(target=work, args=(t,), name=f"sits-compare-{t}") for t in range(nthreads)]
        for th in pool:
            th.start()
        for th in pool:
            th.join()
    return _merge(accs, a, rtol, atol, probabilities, ulp_shift)


def _merge(accs: List[_Acc], a: np.ndarray, rtol: float, atol: float, probs: bool, ulp_shift: int) -> Dict[str, Any]:
    tot = _Acc()
    for x in accs:
        for f in ("n", "mismatches", "dot", "aa", "bb", "dd", "kl", "nan_both", "nan_only", "inf_both",
                  "inf_mismatch", "signed_zero"):
            setattr(tot, f, getattr(tot, f) + getattr(x, f))
        if x.max_abs > tot.max_abs:
            tot.max_abs, tot.max_abs_at = x.max_abs, x.max_abs_at
        if x.max_rel > tot.max_rel:
            tot.max_rel, tot.max_rel_at = x.max_rel, x.max_rel_at
        if x.first_mismatch >= 0 and (tot.first_mismatch < 0 or x.first_mismatch < tot.first_mismatch):
            tot.first_mismatch = x.first_mismatch
        tot.ulp_hist += x.ulp_hist
        for e, c in x.ulp_big.items():
            tot.ulp_big[e] = tot.ulp_big.get(e, 0) + c
        tot.ulp_max = max(tot.ulp_max, x.ulp_max)
    shape = a.shape

    def where(flat: int) -> Optional[List[int]]:
        return [int(v) for v in np.unravel_index(flat, shape)] if flat >= 0 and shape else ([] if flat >= 0 else None)

    cos = tot.dot / math.sqrt(tot.aa * tot.bb) if tot.aa > 0 and tot.bb > 0 else (1.0 if tot.aa == tot.bb else 0.0)
    snr = 10 * math.log10(tot.bb / tot.dd) if tot.dd > 0 and tot.bb > 0 else (math.inf if tot.dd == 0 else -math.inf)
    rows = int(np.prod(shape[:-1])) if len(shape) > 1 else 1
    return {
        "n": tot.n, "shape": list(shape), "dtype": str(a.dtype) + (" (bfloat16 ULPs)" if ulp_shift == 16 else ""),
        "rtol": rtol, "atol": atol,
        "mismatches": tot.mismatches, "mismatch_fraction": tot.mismatches / max(tot.n, 1),
        "first_mismatch_index": where(tot.first_mismatch),
        "max_abs_diff": tot.max_abs if tot.max_abs >= 0 else 0.0, "max_abs_index": where(tot.max_abs_at),
        "max_rel_diff": tot.max_rel if tot.max_rel >= 0 else 0.0, "max_rel_index": where(tot.max_rel_at),
        "ulp_max": tot.ulp_max, "ulp_p99": _p99(tot.ulp_hist, tot.ulp_big, tot.n),
        "cosine_similarity": cos, "snr_db": snr,
        "kl_divergence": tot.kl / rows if probs else None,
        "nan_in_both": tot.nan_both, "nan_in_one": tot.nan_only, "inf_matching": tot.inf_both,
        "inf_mismatching": tot.inf_mismatch, "signed_zero_differences": tot.signed_zero,
        "passed": tot.mismatches == 0,
    }
