"""The decision module (pytest_sits/checks/interval.py): its special functions against scipy, its intervals' coverage,
the decision rule, the movement test, the sequential rule and the run's plan."""

import math

import numpy as np
import pytest

from pytest_sits.checks import interval as iv
from pytest_sits.conditions.plan import Plan
from pytest_sits.conditions.trials import TrialPlan, next_step, sequential
from pytest_sits.profiles import resolve

stats = pytest.importorskip("scipy.stats")


@pytest.mark.parametrize("df", [1, 2, 3, 4, 6, 9, 24, 120, 2000])
@pytest.mark.parametrize("p", [0.5, 0.6, 0.9, 0.95, 0.975, 0.99, 0.995, 0.9995, 0.025])
def test_t_quantile_matches_scipy(df, p):
    assert iv.t_ppf(p, df) == pytest.approx(stats.t.ppf(p, df), rel=1e-10, abs=1e-12)


@pytest.mark.parametrize("n", [1, 5, 50, 600, 6000, 60000])
@pytest.mark.parametrize("p", [0.01, 0.5, 0.99])
def test_binomial_cdf_matches_scipy(n, p):
    for k in sorted({0, 1, n // 3, max(0, n - 2), int(n * 0.99), n}):
        assert iv.binom_cdf(k, n, p) == pytest.approx(stats.binom.cdf(k, n, p), abs=1e-10)


def test_normal_beta_gamma_quantiles_match_scipy():
    for p in (1e-6, 0.01, 0.025, 0.5, 0.975, 0.999999):
        assert iv.norm_ppf(p) == pytest.approx(stats.norm.ppf(p), abs=1e-9)
    for a, b, q in ((3, 998, 0.025), (4, 997, 0.975), (0.5, 0.5, 0.3), (50, 2, 0.9)):
        assert iv.beta_ppf(q, a, b) == pytest.approx(stats.beta.ppf(q, a, b), rel=1e-9)
    for a, x in ((0.5, 0.1), (3, 2), (50, 60), (6000, 5900)):
        assert iv.gammainc(a, x) == pytest.approx(stats.gamma.cdf(x, a), abs=1e-10)


def test_intervals_match_their_textbook_forms():
    m = iv.mean_interval([1.0, 2.0, 3.0, 4.0, 5.0])
    lo, hi = stats.t.interval(0.95, 4, loc=3.0, scale=stats.sem([1, 2, 3, 4, 5]))
    assert (m["low"], m["high"]) == (pytest.approx(lo), pytest.approx(hi)) and m["method"] == "t-interval"
    cp = iv.proportion_interval(3, 1000)
    assert cp["low"] == pytest.approx(stats.beta.ppf(0.025, 3, 998)) and cp["high"] == pytest.approx(
        stats.beta.ppf(0.975, 4, 997))
    r = iv.rate_interval(100, 10.0)
    assert r["low"] == pytest.approx(stats.chi2.ppf(0.025, 200) / 2 / 10) and r["high"] == pytest.approx(
        stats.chi2.ppf(0.975, 202) / 2 / 10)
    assert iv.mean_interval([2.0])["low"] is None  # one trial: no interval


def test_percentile_interval_covers_the_true_p99():
    """Coverage: over many samples of a known distribution, the order-statistic interval holds the true P99 at
    least as often as it says (it is distribution-free and conservative)."""
    rng = np.random.default_rng(1)
    true = -math.log(0.01)  # the P99 of Exp(1)
    hits = 0
    for _ in range(300):
        tail = iv.quantile_tail(rng.exponential(size=1000), 0.99)
        q = iv.quantile_interval(tail)
        hits += q["low"] <= true <= q["high"]
    assert hits / 300 >= 0.93
    assert iv.min_samples(0.99) == 368
    few = iv.quantile_interval(iv.quantile_tail(rng.exponential(size=100), 0.99))
    assert few["high"] is None and few["low"] is not None  # 100 samples cannot bound a P99 from above


def test_t_interval_covers_the_mean():
    rng = np.random.default_rng(2)
    cover = 0
    for _ in range(1000):
        m = iv.mean_interval(list(rng.normal(10.0, 2.0, 7)))
        cover += m["low"] <= 10.0 <= m["high"]
    assert 0.93 <= cover / 1000 <= 0.97


def test_the_bootstrap_is_the_same_on_every_call_and_machine():
    xs = [1.0, 1.01, 0.99, 1.0, 1.02, 0.98, 1.03, 0.97]
    a, b = iv.bootstrap_interval(xs), iv.bootstrap_interval(list(xs))
    assert a == b and a["low"] < a["estimate"] < a["high"] and a["seed"] == 2026
    # the generator is the module's own (SplitMix64): its first outputs are fixed forever
    g = iv._SplitMix64(0)
    assert [g.next() for _ in range(2)] == [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4]


def test_the_rule_passes_fails_or_says_what_would_decide():
    floor = 0.8
    ok = iv.decide(iv.mean_interval([0.90, 0.91, 0.89, 0.90]), floor, iv.AT_LEAST)
    bad = iv.decide(iv.mean_interval([0.70, 0.71, 0.69, 0.70]), floor, iv.AT_LEAST)
    near = iv.decide(iv.mean_interval([0.82, 0.78, 0.83, 0.79]), floor, iv.AT_LEAST, seconds_per_trial=2.0)
    assert (ok["outcome"], bad["outcome"], near["outcome"]) == ("pass", "fail", "undecided")
    assert near["more_trials"] > 0 and near["more_seconds"] == pytest.approx(2.0 * near["more_trials"])
    assert "PASS when the interval's low end >= 0.8" in ok["rule"]
    ceiling = iv.decide(iv.mean_interval([5.0, 5.1, 4.9]), 6.0, iv.AT_MOST)
    assert ceiling["outcome"] == "pass"
    on = iv.decide(iv.mean_interval([0.79, 0.81, 0.80, 0.80]), 0.8, iv.AT_LEAST)
    assert on["outcome"] == "undecided" and on["more_trials"] is None  # on the threshold: nothing would decide
    assert "no practical number" in iv.undecided_text(on)


def test_a_figure_that_moved_never_fails_and_passes_only_if_every_trial_cleared():
    falling = [0.75, 0.73, 0.71, 0.69, 0.67, 0.65]
    d = iv.decide(iv.mean_interval(falling), 0.8, iv.AT_LEAST, samples=falling)
    assert d["outcome"] == "undecided" and d["moved"]["moved"] and "moved" in d["why"]
    rising = [0.85, 0.88, 0.91, 0.94, 0.97, 1.0]
    assert iv.decide(iv.mean_interval(rising), 0.8, iv.AT_LEAST, samples=rising)["outcome"] == "pass"
    crossing = [0.78, 0.84, 0.9, 0.96, 1.02, 1.08]
    assert iv.decide(iv.mean_interval(crossing), 0.8, iv.AT_LEAST, samples=crossing)["outcome"] == "undecided"
    steady = [0.70, 0.71, 0.69, 0.70, 0.71, 0.69]
    assert iv.decide(iv.mean_interval(steady), 0.8, iv.AT_LEAST, samples=steady)["outcome"] == "fail"


def test_looks_share_the_error_rate():
    assert iv.level(1) == 0.95 and iv.level(3) == pytest.approx(1 - 0.05 / 3)


def test_combine_picks_the_deciding_statistic():
    a = dict(iv.decide(iv.mean_interval([1.0, 1.1]), 0.5, iv.AT_LEAST), name="a")
    b = dict(iv.decide(iv.mean_interval([0.1, 0.11]), 0.5, iv.AT_LEAST), name="b")
    assert iv.combine([a, b])["name"] == "b" and iv.combine([a])["name"] == "a"


def test_sequential_stops_when_decided_at_the_cap_or_when_nothing_would_decide():
    calls = []

    def look(k, index):
        calls.append(k)
        return [{"x": 1.0} for _ in range(k)]
    out = sequential(look, lambda trials, looks: "pass" if len(trials) >= 6 else "undecided",
                     TrialPlan("X", initial=3, step=3, cap=12))
    assert calls == [3, 3] and out["sequential"]["stopped"] == "decided" and out["sequential"]["looks"] == 2
    calls.clear()
    out = sequential(look, lambda trials, looks: "undecided", TrialPlan("X", initial=3, step=3, cap=7))
    assert calls == [3, 3, 1] and out["sequential"]["stopped"] == "cap"
    calls.clear()
    out = sequential(look, lambda trials, looks: "undecided", TrialPlan("X", initial=3, step=3, cap=12,
                                                                         deadline=0.0))
    assert calls == [3] and out["sequential"]["stopped"] == "budget"
    assert next_step({"threshold": None, "outcome": "undecided"}) == "never"
    assert next_step({"threshold": 1, "outcome": "undecided", "more_trials": None}) == "never"
    assert next_step({"threshold": 1, "outcome": "undecided", "more_trials": 4}) == "undecided"


def _plan(level, budget=None, accs=8, workers=1):
    prof = resolve("h100")
    return Plan(level, prof, accs, packages=2, budget_min=budget, workers=workers)


def test_the_plan_estimates_each_level_and_shrinks_the_trials_to_a_budget():
    quick, standard, full = (_plan(lvl).estimate_s() / 60 for lvl in ("quick", "standard", "full"))
    assert quick < standard < full
    p = _plan("standard")
    assert p.trials_for("MEM-BW-EFFICIENCY").cap == 21 and p.note is None
    e_init, e_cap = p.estimate_s("initial"), p.estimate_s("cap")
    cut = _plan("standard", budget=(e_init + (e_cap - e_init) / 2) / 60)
    t = cut.trials_for("MEM-BW-EFFICIENCY")
    assert t.initial == 7 and 7 < t.cap < 21 and "wider intervals" in cut.note and t.deadline is not None
    tight = _plan("standard", budget=(p.estimate_s("minimum") + 1) / 60)
    t = tight.trials_for("MEM-BW-EFFICIENCY")
    assert 3 <= t.initial < 7 and t.cap == t.initial
    below = _plan("standard", budget=0.5)
    assert below.trials_for("CRG-NODE").initial == 3 and "below the shortest plan" in below.note
    assert "about" in below.header()[0] and "an estimate" in below.header()[0]
    # per-accelerator work runs in parallel across xdist workers
    x8, x1 = _plan("full", workers=8), _plan("full")
    assert x8.rows["TOPO-PCIE-DIRECT"].seconds() == pytest.approx(x1.rows["TOPO-PCIE-DIRECT"].seconds() / 8)
    # what runs on every device at once costs one device's time either way
    assert x8.rows["PLP-LATENCY"].seconds() == pytest.approx(x1.rows["PLP-LATENCY"].seconds())


def test_what_runs_on_every_device_at_once_costs_one_device_and_what_shares_a_resource_is_measured_apart():
    one, eight = _plan("full", accs=1), _plan("full", accs=8)
    g1, g8 = one.rows["THERM-GPU-STEADY"], eight.rows["THERM-GPU-STEADY"]
    assert g8.parallel == 8 and g8.seconds() == g1.seconds() > 0  # flat: every GPU calibrated together
    pcie1, pcie8 = one.rows["TOPO-PCIE-BW"].seconds(), eight.rows["TOPO-PCIE-BW"].seconds()
    assert pcie8 == pytest.approx(8 * (pcie1 - one.rows["TOPO-PCIE-BW"].cost.once) + one.rows["TOPO-PCIE-BW"].cost.once)
    assert eight.rows["CRG-EDGE"].parallel == 1 and _plan("full", accs=8, workers=8).rows["CRG-EDGE"].parallel == 1
    at_once, apart = eight.concurrency()
    assert {"THERM-GPU-STEADY", "THERM-CPU-STEADY", "PLP-LATENCY", "SVC-SLA", "SVC-COLDSTART", "SVC-FRAG", "CRG-NODE",
            "MEM-BW-EFFICIENCY", "TOPO-PCIE-LINK", "health_window"} <= set(at_once)
    assert set(apart) == {"TOPO-PCIE-BW", "CRG-EDGE", "CRG-JITTER"}
    header = "\n".join(eight.header())
    assert "measured on every device at once: " in header and "TOPO-PCIE-BW (host<->device copies" in header
    assert eight.to_json()["apart"]["CRG-EDGE"].startswith("peer copies")
    # under xdist each worker calibrates its own devices: the workers' count, not every device
    assert _plan("full", accs=8, workers=2).rows["THERM-GPU-STEADY"].parallel == 2


def test_requirements_of_one_group_run_at_the_same_time_and_the_longest_counts():
    p = _plan("full", accs=8)
    gpu, cpu = p.rows["THERM-GPU-STEADY"].seconds(), p.rows["THERM-CPU-STEADY"].seconds()
    assert gpu > cpu > 0
    assert p.estimate_s() == pytest.approx(p.estimate_s(serial=True) - 7 * gpu - 2 * cpu
                                           - sum(r.seconds(r.trials["initial"] if r.trials else None,
                                                           parallel=1) - r.seconds(r.trials["initial"] if r.trials
                                                                                   else None)
                                                 for k, r in p.rows.items() if not k.startswith("THERM")))
    assert "at the same time: THERM-GPU-STEADY, THERM-CPU-STEADY (thermal)" in p.header()[1]
    x = _plan("full", accs=8, workers=2)  # under xdist the two tests may run on different workers: the sum
    assert "at the same time" not in "\n".join(x.header())


def test_on_a_simulated_platform_the_estimate_is_labelled_the_real_machines():
    p = _plan("full", accs=8)
    real, sim = p.header(), p.header(simulated=True)
    assert real[0].startswith("time estimate: about ") and "real machine" not in "\n".join(real)
    assert sim[0].startswith("time estimate for the real machine the profile describes: about ")
    assert sim[1].startswith("this simulated run: about ") and "simulated time" in sim[1]
    assert p.to_json()["simulated_estimate_s"] == pytest.approx(p.estimate_sim_s(), abs=0.1)
