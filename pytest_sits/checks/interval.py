"""Decisions under noise: an estimate, its confidence interval, and the rule that turns them into PASS, FAIL or
undecided.

Every measured requirement decides on repeated trials through this module, and the acquire functions ask the
same rule whether to measure again (:mod:`pytest_sits.conditions.trials`), so a verdict and the sequential
rule that produced its evidence never disagree.  The rule, for a threshold ``thr``:

* PASS only when the whole interval lies on the right side of ``thr``;
* FAIL only when the whole interval lies on the wrong side;
* otherwise undecided: the acquire function measures again (up to its cap or the run's time budget), and what
  stays undecided is INCONCLUSIVE, with the interval and how many more trials (or seconds) would decide.

A figure that moved during its trials (a significant trend, larger than :data:`MOVE_TOLERANCE` of the
estimate) is the machine moving, not a property of the device: it never FAILs, and it PASSes only when every
one of its trials cleared the threshold.

Methods, each named in the verdicts it decides:

* ``t-interval``: Student's t on the mean of independent trials;
* ``t-interval over batch means``: the same on the means of consecutive batches of a time series (the
  batch-means method for autocorrelated series: a hold's 100 ms windows, an engine's steps);
* ``binomial order statistics``: the distribution-free interval of a percentile (the rule LoadGen's early
  stopping applies to P99 latency): the ranks whose binomial probability brackets the percentile;
* ``t-interval over the point's runs``: Student's t on the mean of a statistic over repeated runs (a sweep
  point's P99, run again until decided: the multi-run interval serving benchmarks report, for a figure whose
  spread between runs one run's own interval does not show);
* ``Clopper-Pearson``: the exact binomial interval of a proportion (an error rate);
* ``bootstrap percentile``: for statistics with no closed form (a coefficient of variation), resampled with a
  fixed seed and this module's own generator, so a replay draws the same resamples on any machine;
* ``exact``: a count with no sampling error (bytes, a deterministic figure), stated as such.

Several looks at the same figure (the sequential rule) share the error rate: each look is decided at
confidence ``1 - (1 - CONFIDENCE) / looks`` (Bonferroni), so the chance of a wrong decision over all the
looks stays within ``1 - CONFIDENCE``.

Pure and self-contained: the special functions (regularised incomplete beta, Student's t, the normal quantile)
are computed here to double precision, with no scipy, so every machine and every replay computes the same
numbers (tests/test_interval.py checks them against scipy).
"""

from __future__ import annotations

import math
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence

from ..verdict import number

#: The confidence level of every interval (two-sided).
CONFIDENCE = 0.95
#: A trend over the trials larger than this share of the estimate (and significant) means the figure moved.
MOVE_TOLERANCE = 0.05
#: Bisection steps of the quantile functions (each halves the bracket: 200 reach any double's precision).
_BISECT = 200

AT_LEAST, AT_MOST = "at_least", "at_most"
#: The method of a statistic measured by repeated runs (a sweep point's P99, one value per run).
RUNS_METHOD = "t-interval over the point's runs"
PASS_, FAIL_, UNDECIDED = "pass", "fail", "undecided"


# --------------------------------------------------------------------------
# Special functions


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 10_000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """The regularised incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    ln = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    front = math.exp(ln)
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """Student's t distribution function."""
    tail = 0.5 * betainc(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t > 0 else tail


def _invert(cdf: Callable[[float], float], p: float, lo: float, hi: float) -> float:
    """The x in [lo, hi] where the increasing function ``cdf`` reaches ``p``, by bisection to the last bit."""
    for _ in range(_BISECT):
        mid = (lo + hi) / 2.0
        if mid in (lo, hi):
            break
        if cdf(mid) < p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2.0


def t_ppf(p: float, df: float) -> float:
    """Student's t quantile (bisection on :func:`t_cdf`)."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"t quantile of {p}: p must lie in (0, 1)")
    if p < 0.5:
        return -t_ppf(1.0 - p, df)
    hi = 1.0
    while t_cdf(hi, df) < p:
        hi *= 2.0
    lo = 0.0
    return _invert(lambda x: t_cdf(x, df), p, lo, hi)


def norm_ppf(p: float) -> float:
    """The standard normal quantile (bisection on the error function)."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"normal quantile of {p}: p must lie in (0, 1)")
    lo, hi = -40.0, 40.0
    return _invert(lambda x: 0.5 * math.erfc(-x / math.sqrt(2.0)), p, lo, hi)


def gammainc(a: float, x: float) -> float:
    """The regularised lower incomplete gamma function P(a, x) (series below a + 1, continued fraction above)."""
    if x <= 0.0:
        return 0.0
    ln = -x + a * math.log(x) - math.lgamma(a)
    if x < a + 1.0:
        term = total = 1.0 / a
        ap = a
        for _ in range(100_000):
            ap += 1.0
            term *= x / ap
            total += term
            if abs(term) < abs(total) * 1e-16:
                break
        return total * math.exp(ln)
    tiny = 1e-300
    b = x + 1.0 - a
    c = 1.0 / tiny
    d = 1.0 / b
    h = d
    for i in range(1, 100_000):
        an = -i * (i - a)
        b += 2.0
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1.0 / d
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-16:
            break
    return 1.0 - math.exp(ln) * h


def gamma_ppf(q: float, a: float) -> float:
    """The quantile of the Gamma(a, 1) distribution (bisection on :func:`gammainc`)."""
    lo, hi = 0.0, max(1.0, a)
    while gammainc(a, hi) < q:
        hi *= 2.0
    return _invert(lambda x: gammainc(a, x), q, lo, hi)


def binom_cdf(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p)."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    return betainc(n - k, k + 1, 1.0 - p)


def beta_ppf(q: float, a: float, b: float) -> float:
    """The quantile of the Beta(a, b) distribution (bisection on :func:`betainc`)."""
    lo, hi = 0.0, 1.0
    return _invert(lambda x: betainc(a, b, x), q, lo, hi)


# --------------------------------------------------------------------------
# Intervals


def level(looks: int = 1, confidence: float = CONFIDENCE) -> float:
    """The confidence each of ``looks`` looks is decided at, so that all of them together keep ``confidence``."""
    return 1.0 - (1.0 - confidence) / max(1, int(looks))


def _clean(values: Iterable[Any]) -> List[float]:
    return [float(v) for v in values if v is not None and math.isfinite(float(v))]


def mean_interval(samples: Sequence[float], confidence: float = CONFIDENCE,
                  method: str = "t-interval", floor: Optional[float] = None) -> Dict[str, Any]:
    """The mean of independent trials and its Student-t interval (its low end at least ``floor``, for a figure
    that cannot go below it: a latency is not negative)."""
    xs = _clean(samples)
    n = len(xs)
    out: Dict[str, Any] = {"method": method, "confidence": round(confidence, 6), "trials": n,
                           "estimate": None, "low": None, "high": None, "sd": None}
    if not n:
        return out
    mean = math.fsum(xs) / n
    out["estimate"] = mean
    if n == 1:
        return out  # one trial: no interval (not decidable by this rule)
    sd = math.sqrt(math.fsum((x - mean) ** 2 for x in xs) / (n - 1))
    half = t_ppf(0.5 + confidence / 2.0, n - 1) * sd / math.sqrt(n)
    out.update(low=mean - half if floor is None else max(floor, mean - half), high=mean + half, sd=sd)
    return out


def batch_means(series: Sequence[Any], batches: int) -> List[float]:
    """Means of ``batches`` consecutive equal batches of ``series`` (missing values skipped; the remainder of an
    uneven split goes to the last batch)."""
    xs = _clean(series)
    if not xs or batches < 1:
        return []
    size = max(1, len(xs) // batches)
    out = []
    for k in range(min(batches, len(xs))):
        chunk = xs[k * size:] if k == min(batches, len(xs)) - 1 else xs[k * size:(k + 1) * size]
        if chunk:
            out.append(math.fsum(chunk) / len(chunk))
    return out


def nearest_rank(n: int, q: float) -> int:
    """The 1-based rank of the nearest-rank q-quantile of n values (LoadGen's: index floor(n q) of the sorted
    list, 0-based)."""
    return min(n, int(n * q) + 1)


def _rank_bounds(n: int, q: float, confidence: float) -> Dict[str, Optional[int]]:
    """1-based ranks (lower, upper) of the order statistics bracketing the q-quantile with ``confidence``
    (two-sided, distribution-free); None where n is too small to bound that side."""
    a = (1.0 - confidence) / 2.0
    # lower: the largest l with P(B <= l - 1) <= a, B ~ Binomial(n, q) values below the quantile
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if binom_cdf(mid - 1, n, q) <= a:
            lo = mid
        else:
            hi = mid - 1
    lower = lo if lo >= 1 else None
    # upper: the smallest u with P(B <= u - 1) >= 1 - a
    lo, hi = 1, n + 1
    while lo < hi:
        mid = (lo + hi) // 2
        if binom_cdf(mid - 1, n, q) >= 1.0 - a:
            hi = mid
        else:
            lo = mid + 1
    upper = lo if lo <= n else None
    return {"lower": lower, "upper": upper}


def min_samples(q: float, confidence: float = CONFIDENCE) -> int:
    """The fewest samples whose order statistics bound the q-quantile from above at ``confidence`` (two-sided):
    below it a percentile can be shown too high, never shown within a ceiling (368 for P99 at 95%: 0.99^368 < 0.025 <= 0.99^367)."""
    a = (1.0 - confidence) / 2.0
    return int(math.ceil(math.log(a) / math.log(q)))


def quantile_tail(values: Sequence[float], q: float, confidence: float = CONFIDENCE) -> Dict[str, Any]:
    """What a check needs to bound the q-quantile of ``values`` (stored in evidence instead of every value):
    ``n``, and the sorted values from rank ``from_rank`` (1-based) up, which holds the estimate's rank and both
    ranks of the interval at ``confidence`` and at the stricter levels of up to 4 looks."""
    xs = sorted(_clean(values))
    n = len(xs)
    if not n:
        return {"n": 0, "q": q, "from_rank": 1, "tail": []}
    ranks = [nearest_rank(n, q)]
    for looks in (1, 2, 3, 4):
        b = _rank_bounds(n, q, level(looks, confidence))
        ranks += [r for r in b.values() if r is not None]
    start = max(1, min(ranks) - 1)
    return {"n": n, "q": q, "from_rank": start, "tail": [round(x, 9) for x in xs[start - 1:]]}


def quantile_interval(tail: Dict[str, Any], confidence: float = CONFIDENCE) -> Dict[str, Any]:
    """The nearest-rank q-quantile and its order-statistic interval, from :func:`quantile_tail`'s record."""
    n, q, start, vals = int(tail.get("n") or 0), float(tail["q"]), int(tail.get("from_rank", 1)), tail.get("tail") or []
    out: Dict[str, Any] = {"method": "binomial order statistics", "confidence": round(confidence, 6), "trials": n,
                           "quantile": q, "estimate": None, "low": None, "high": None}
    if not n:
        return out

    def at(rank: Optional[int]) -> Optional[float]:
        if rank is None or not start <= rank <= start + len(vals) - 1:
            return None
        return float(vals[rank - start])

    b = _rank_bounds(n, q, confidence)
    out.update(estimate=at(nearest_rank(n, q)), low=at(b["lower"]), high=at(b["upper"]),
               ranks={"estimate": nearest_rank(n, q), **b})
    return out


def proportion_interval(k: int, n: int, confidence: float = CONFIDENCE) -> Dict[str, Any]:
    """The proportion k/n and its exact (Clopper-Pearson) interval."""
    out: Dict[str, Any] = {"method": "Clopper-Pearson", "confidence": round(confidence, 6), "trials": n,
                           "count": k, "estimate": None, "low": None, "high": None}
    if n <= 0:
        return out
    a = (1.0 - confidence) / 2.0
    out.update(estimate=k / n, low=0.0 if k <= 0 else beta_ppf(a, k, n - k + 1),
               high=1.0 if k >= n else beta_ppf(1.0 - a, k + 1, n - k))
    return out


def rate_interval(count: int, seconds: float, confidence: float = CONFIDENCE) -> Dict[str, Any]:
    """A rate (events per second) from ``count`` events in ``seconds`` and its exact Poisson interval (the gamma
    quantiles of Garwood's interval)."""
    out: Dict[str, Any] = {"method": "Poisson (exact)", "confidence": round(confidence, 6), "trials": count,
                           "count": count, "seconds": seconds, "estimate": None, "low": None, "high": None}
    if seconds <= 0:
        return out
    a = (1.0 - confidence) / 2.0
    out.update(estimate=count / seconds, low=(gamma_ppf(a, count) / seconds) if count > 0 else 0.0,
               high=gamma_ppf(1.0 - a, count + 1) / seconds)
    return out


def percentile_decision(tail: Dict[str, Any], threshold: Optional[float], direction: str = AT_MOST,
                        confidence: float = CONFIDENCE, show: Callable[[float], str] = lambda x: f"{x:g}",
                        what: str = "", seconds_per_sample: Optional[float] = None) -> Dict[str, Any]:
    """A percentile of the samples :func:`quantile_tail` kept, its order-statistic interval, decided against
    ``threshold`` (with how many more samples would decide, if the share under the threshold held still)."""
    stat = quantile_interval(tail, confidence)
    if threshold is not None:
        stat["share_within"] = share_within(tail, threshold)
    return decide(stat, threshold, direction, show=show, what=what, seconds_per_trial=seconds_per_sample)


class _SplitMix64:
    """A tiny, fixed pseudo-random generator (SplitMix64): the same stream on every machine and version, so a
    bootstrap is replayable."""

    def __init__(self, seed: int):
        self.state = seed & 0xFFFFFFFFFFFFFFFF

    def next(self) -> int:
        self.state = (self.state + 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
        return z ^ (z >> 31)

    def below(self, n: int) -> int:
        return self.next() % n


def cv(xs: Sequence[float]) -> float:
    """Coefficient of variation (population standard deviation over the mean), inf for a non-positive mean."""
    n = len(xs)
    mean = math.fsum(xs) / n
    if mean <= 0:
        return float("inf")
    return math.sqrt(math.fsum((x - mean) ** 2 for x in xs) / n) / mean


def bootstrap_interval(samples: Sequence[float], statistic: Callable[[Sequence[float]], float] = cv,
                       confidence: float = CONFIDENCE, resamples: int = 2000, seed: int = 2026) -> Dict[str, Any]:
    """``statistic`` of the samples and its bootstrap percentile interval (fixed seed, own generator)."""
    xs = _clean(samples)
    n = len(xs)
    out: Dict[str, Any] = {"method": "bootstrap percentile", "confidence": round(confidence, 6), "trials": n,
                           "resamples": resamples, "seed": seed, "estimate": None, "low": None, "high": None}
    if n < 2:
        if n:
            out["estimate"] = statistic(xs)
        return out
    rng = _SplitMix64(seed)
    stats = sorted(statistic([xs[rng.below(n)] for _ in range(n)]) for _ in range(resamples))
    a = (1.0 - confidence) / 2.0
    out.update(estimate=statistic(xs), low=stats[int(math.floor(a * (resamples - 1)))],
               high=stats[int(math.ceil((1.0 - a) * (resamples - 1)))])
    return out


def exact(value: Optional[float], trials: int = 1) -> Dict[str, Any]:
    """A figure with no sampling error (a count): its interval is the value itself."""
    return {"method": "exact", "confidence": 1.0, "trials": trials, "estimate": value, "low": value, "high": value}


def trend(samples: Sequence[float], confidence: float = CONFIDENCE,
          tolerance: float = MOVE_TOLERANCE) -> Dict[str, Any]:
    """Did the figure move during its trials?  The least-squares slope over the trials' order, its t-interval,
    and the change it implies from the first trial to the last, as a share of the mean.  ``moved`` when the
    slope's interval excludes 0 and the change exceeds ``tolerance``."""
    xs = _clean(samples)
    n = len(xs)
    out: Dict[str, Any] = {"trials": n, "moved": False, "tolerance": tolerance,
                           "rule": f"moved when the least-squares slope over the trials' order is significant "
                                   f"({confidence:.0%}, t) and changes the figure by more than {tolerance:.0%} "
                                   "of its mean from the first trial to the last"}
    if n < 4:
        out["why"] = "fewer than 4 trials: no trend test"
        return out
    mx = (n - 1) / 2.0
    my = math.fsum(xs) / n
    sxx = math.fsum((i - mx) ** 2 for i in range(n))
    slope = math.fsum((i - mx) * (x - my) for i, x in enumerate(xs)) / sxx
    resid = math.fsum((x - (my + slope * (i - mx))) ** 2 for i, x in enumerate(xs))
    se = math.sqrt(resid / (n - 2) / sxx)
    half = t_ppf(0.5 + confidence / 2.0, n - 2) * se
    change = slope * (n - 1) / my if my else 0.0
    out.update(slope=slope, slope_low=slope - half, slope_high=slope + half, change=round(change, 6),
               moved=bool((slope - half > 0 or slope + half < 0) and abs(change) > tolerance))
    return out


# --------------------------------------------------------------------------
# The decision


def rule_text(threshold: float, direction: str, show: Callable[[float], str] = lambda x: f"{x:g}") -> str:
    t = show(threshold)
    if direction == AT_LEAST:
        return (f"PASS when the interval's low end >= {t}; FAIL when its high end < {t}; otherwise measure again, "
                "then INCONCLUSIVE")
    return (f"PASS when the interval's high end <= {t}; FAIL when its low end > {t}; otherwise measure again, "
            "then INCONCLUSIVE")


def decide(stat: Dict[str, Any], threshold: Optional[float], direction: str, *,
           samples: Optional[Sequence[float]] = None, seconds_per_trial: Optional[float] = None,
           show: Callable[[float], str] = lambda x: f"{x:g}", what: str = "") -> Dict[str, Any]:
    """The decision on one statistic (from :func:`mean_interval`, :func:`quantile_interval`, ...) against
    ``threshold`` (``direction``: the value must be AT_LEAST or AT_MOST it; None: no threshold, reported).

    ``samples``: the trials in order, for the movement test (and the every-trial-clears rule of a figure that
    moved).  Returns the statistic with ``threshold``, ``direction``, ``rule``, ``outcome`` (pass, fail,
    undecided), ``moved`` (the trend record, when tested) and, when undecided, ``more_trials`` (how many more
    trials would decide if the figure held still, None when none would) and ``more_seconds``."""
    d = dict(stat, what=what, threshold=threshold, direction=direction)
    lo, hi = stat.get("low"), stat.get("high")
    if threshold is None:
        d.update(outcome=UNDECIDED, rule="no threshold set: the figure is reported, not judged", more_trials=None)
        return d
    d["rule"] = rule_text(threshold, direction, show)
    if direction == AT_LEAST:
        ok = lo is not None and lo >= threshold
        bad = hi is not None and hi < threshold
    else:
        ok = hi is not None and hi <= threshold
        bad = lo is not None and lo > threshold
    outcome = PASS_ if ok else FAIL_ if bad else UNDECIDED
    if samples is not None and len(_clean(samples)) >= 4:
        mv = trend(samples, stat.get("confidence", CONFIDENCE))
        d["moved"] = mv
        if mv["moved"]:
            xs = _clean(samples)
            every = all(x >= threshold for x in xs) if direction == AT_LEAST else all(x <= threshold for x in xs)
            if outcome == FAIL_ or (outcome == PASS_ and not every):
                outcome = UNDECIDED
                d["why"] = (f"the figure moved by {mv['change']:+.1%} over its {len(xs)} trials (a significant trend): "
                            "the machine moved under the measurement")
    d["outcome"] = outcome
    if outcome == UNDECIDED and "why" not in d:
        d["more_trials"] = more_trials(d)
        if d["more_trials"] is None and (lo is None or hi is None):
            d["why"] = "too few trials to bound the figure"
    if outcome == UNDECIDED:
        d.setdefault("more_trials", None)
        if d["more_trials"] is not None and seconds_per_trial:
            d["more_seconds"] = round(d["more_trials"] * seconds_per_trial, 1)
    return d


def more_trials(d: Dict[str, Any], limit: int = 100_000) -> Optional[int]:
    """How many more trials would make an undecided statistic decide, if its estimate and spread held still
    (None when no number would: the estimate sits on the threshold, or the method cannot say)."""
    thr, est, n = d.get("threshold"), d.get("estimate"), int(d.get("trials") or 0)
    if thr is None or est is None:
        return None
    gap = abs(est - thr)
    conf = float(d.get("confidence", CONFIDENCE))
    method = d.get("method", "")
    if method.startswith("t-interval"):
        sd = d.get("sd")
        if not sd or gap <= 0:
            return None if gap <= 0 else max(0, 2 - n)
        m = max(n + 1, 2)
        while m <= limit:
            if t_ppf(0.5 + conf / 2.0, m - 1) * sd / math.sqrt(m) < gap:
                return m - n
            m = m + 1 if m < 64 else int(m * 1.1) + 1
        return None
    if method == "bootstrap percentile" and d.get("low") is not None and d.get("high") is not None and n:
        half = (d["high"] - d["low"]) / 2.0
        if gap <= 0:
            return None
        need = int(math.ceil(n * (half / gap) ** 2))  # the interval narrows as 1/sqrt(n)
        return max(1, need - n) if need <= limit else None
    if method == "binomial order statistics" and d.get("share_within") is not None:
        return _quantile_more(d, limit)
    if method == "Poisson (exact)" and d.get("seconds"):
        rate, secs = est, float(d["seconds"])
        if gap <= 0:
            return None
        span = 2.0 * secs
        while span <= secs * 1000:
            c = rate_interval(int(round(rate * span)), span, conf)
            if (c["low"] >= thr) if rate > thr else (c["high"] < thr):
                return int(round(rate * span)) - n
            span *= 1.25
        return None
    if method == "Clopper-Pearson" and n:
        k = d.get("count", 0)
        p = k / n
        m = n + 1
        while m <= limit:
            c = proportion_interval(int(round(p * m)), m, conf)
            if (c["high"] < thr) if p < thr else (c["low"] >= thr):
                return m - n
            m = m + 1 if m < 64 else int(m * 1.2) + 1
        return None
    return None


def _quantile_more(d: Dict[str, Any], limit: int) -> Optional[int]:
    """Samples needed for a percentile's interval to clear its ceiling, if the share of samples at or under the
    ceiling (``share_within``) held still."""
    q, n, share = float(d["quantile"]), int(d["trials"]), float(d["share_within"])
    conf = float(d.get("confidence", CONFIDENCE))
    if abs(share - q) < 1e-12:
        return None
    m = n + 1
    while m <= limit:
        b = _rank_bounds(m, q, conf)
        below = int(math.floor(share * m))  # samples at or under the ceiling
        if share > q and b["upper"] is not None and b["upper"] <= below:
            return m - n
        if share < q and b["lower"] is not None and b["lower"] > below:
            return m - n
        m = m + 1 if m < 64 else int(m * 1.1) + 1
    return None


def share_within(tail: Dict[str, Any], ceiling: float) -> Optional[float]:
    """The share of all samples at or under ``ceiling``, when the stored tail can tell (None otherwise)."""
    n, start, vals = int(tail.get("n") or 0), int(tail.get("from_rank", 1)), tail.get("tail") or []
    if not n:
        return None
    above = sum(1 for x in vals if x > ceiling)
    if vals and vals[0] > ceiling and start > 1:
        return None  # the ceiling lies below the stored tail: the tail cannot count the samples under it
    return (n - above) / n


def combine(decisions: List[Dict[str, Any]]) -> Dict[str, Any]:
    """The decision of several statistics that must all hold (directions, dtypes, sweep points): FAIL when any
    fails, PASS when all pass, else undecided.  The one returned is the deciding one: the first failing, else the
    first undecided, else the one with the smallest margin."""
    if not decisions:
        raise ValueError("combine() needs at least one decision")
    for want in (FAIL_, UNDECIDED):
        hit = [d for d in decisions if d["outcome"] == want]
        if hit:
            return hit[0]

    def margin(d: Dict[str, Any]) -> float:
        thr = d.get("threshold")
        if thr is None:
            return math.inf
        side = d["low"] if d["direction"] == AT_LEAST else d["high"]
        return abs(side - thr) / (abs(thr) or 1.0)
    return min(decisions, key=margin)


def describe(d: Dict[str, Any], show: Callable[[float], str] = number) -> str:
    """``0.901 [0.895, 0.907] (95% t-interval, 7 trials)``: the estimate, its interval, how it was made."""
    est = show(d["estimate"]) if d.get("estimate") is not None else "n/a"
    lo = show(d["low"]) if d.get("low") is not None else "unbounded"
    hi = show(d["high"]) if d.get("high") is not None else "unbounded"
    conf = d.get("confidence", CONFIDENCE)
    pct = f"{conf:.1%}" if round(conf * 100) != conf * 100 else f"{conf:.0%}"
    unit = "samples" if d.get("method") in ("binomial order statistics", "Clopper-Pearson") else "trials"
    if d.get("method") == "t-interval over batch means":
        unit = "batches"
    if d.get("method") == RUNS_METHOD:
        unit = "runs"
    if d.get("method") == "exact":
        return f"{est} (exact)" if d.get("estimate") is not None else "not measured"
    return f"{est} [{lo}, {hi}] ({pct} {d.get('method')}, {d.get('trials')} {unit})"


def undecided_text(d: Dict[str, Any], show: Callable[[float], str] = number,
                   unit: str = "trials") -> str:
    """Why an undecided statistic did not decide, and what would."""
    if d.get("why"):
        return d["why"]
    thr = show(d["threshold"]) if d.get("threshold") is not None else "the threshold"
    text = f"the interval contains {thr}"
    more = d.get("more_trials")
    if more:
        text += f": about {more} more {unit} would decide if the figure held still"
        if d.get("more_seconds"):
            text += f" (about {d['more_seconds']:g} s)"
    else:
        text += ": no practical number of further trials would decide (the estimate sits on the threshold)"
    return text
