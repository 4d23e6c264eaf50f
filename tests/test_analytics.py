"""Report analytics (A §2.5, §4.1, §4.2): Pareto pruning, interpolation, weights, TCO, analyse()."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_sits.report.analytics import NO_SWEEP, analyse
from pytest_sits.report.analytics.pareto import non_dominated, prune
from pytest_sits.report.analytics.surface import interpolate
from pytest_sits.report.analytics.tco import tco_per_card
from pytest_sits.report.analytics.weights import (DOCUMENT_EXAMPLE_CLAIMED, DOCUMENT_EXAMPLE_SLA, TIER_WEIGHTS, sla_score,
                                           sla_weights, tier_score)

# ---------------------------------------------------------------- synthetic sweeps, shaped like PLP evidence


def make_sweep(cap_w, loads=(0.1, 0.25, 0.4, 0.55, 0.7, 0.85, 0.95), power=True):
    """A card's load sweep: power rises with load towards its cap, P99 latency and errors with queueing."""
    out = []
    for rho in loads:
        p = 90 + (cap_w - 90) * rho ** 0.9
        lat = 0.018 / (1 - 0.9 * rho) * (700 / cap_w) ** 0.5
        out.append({"target_qps": round(60 * rho, 3), "rho": rho, "power_w": p if power else None,
                    "p50_latency_s": lat * 0.6, "p99_latency_s": lat, "throughput_qps": 54 * rho * (cap_w / 700) ** 0.3,
                    "tokens_per_s": 54 * rho * 256, "error_rate": 0.0005 + 0.01 * max(0.0, rho - 0.8),
                    "energy_j": p * 10 if power else None})
    return out


def make_report(sweeps=None, site=None, extra_verdicts=()):
    verdicts = []
    for i, sweep in enumerate(sweeps or []):
        for req in ("PLP-POWER", "PLP-LATENCY"):
            verdicts.append({"requirement": req, "status": "PASS", "subject": f"gpu{i}", "measured": 1.0,
                             "unit": None, "reason": "r", "threshold": None, "remediation": None, "nodeid": "t",
                             "simulated": True, "evidence": {"sweep": sweep}})
    verdicts.extend(extra_verdicts)
    data = {"thresholds": {"SVC-SLA": {"p99_ms": 120, "min_rps": 85, "max_error_rate": 0.003},
                           "PLP-LATENCY": {"at_load_max": 0.7}},
            "hardware": {"tdp_w": 700}}
    if site is not None:
        data["site"] = site
    return {"verdicts": verdicts, "profile": {"name": "h100-sxm5", "data": data}}


# ---------------------------------------------------------------- Pareto


def brute_force(points, senses):
    cost = [[v if s == "min" else -v for v, s in zip(p, senses)] for p in points]
    keep = []
    for i, a in enumerate(cost):
        dominated = any(all(b[k] <= a[k] for k in range(len(a))) and any(b[k] < a[k] for k in range(len(a)))
                        for j, b in enumerate(cost) if j != i)
        keep.append(not dominated)
    return keep


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 4).flatmap(lambda k: st.tuples(
    st.lists(st.tuples(*[st.integers(-5, 5) | st.floats(-1e3, 1e3, allow_nan=False)] * k), min_size=0, max_size=60),
    st.lists(st.sampled_from(["min", "max"]), min_size=k, max_size=k))))
def test_pareto_equals_brute_force_dominance(case):
    points, senses = case
    got = non_dominated(np.array(points, dtype=float).reshape(len(points), len(senses)), senses, chunk=7)
    assert got.tolist() == brute_force(points, senses)


def test_pareto_keeps_ties_and_reports_missing_values():
    pts = [{"lat": 1, "err": 1, "thr": 5}, {"lat": 1, "err": 1, "thr": 5}, {"lat": 2, "err": 1, "thr": 5},
           {"lat": None, "err": 0, "thr": 9}, {"lat": 0.5, "err": 2, "thr": float("nan")}]
    res = prune(pts, {"lat": "min", "err": "min", "thr": "max"})
    assert res == {"kept": [0, 1], "dropped": [2], "unknown": [3, 4]}


def test_pareto_rejects_an_unknown_sense():
    with pytest.raises(ValueError, match="use 'min' or 'max'"):
        non_dominated([[1.0, 2.0]], ["min", "most"])


# ---------------------------------------------------------------- interpolation


def smooth(x, y):
    return np.sin(2 * x) * np.cos(1.5 * y) + 0.5 * x * y


@pytest.mark.parametrize("seed", range(5))
def test_clough_tocher_reproduces_a_smooth_surface(seed):
    """200 scattered points of a smooth surface (range about 2): on the 41 x 41 grid the interpolant is within
    0.01 of the surface inside [0.1, 0.9]^2 and within 0.02 RMS over the whole hull (measured: 0.003, 0.008)."""
    rng = np.random.default_rng(seed)
    x = np.r_[rng.uniform(0, 1, 200), [0, 1, 0, 1]]
    y = np.r_[rng.uniform(0, 1, 200), [0, 0, 1, 1]]
    g = interpolate(x, y, {"f": smooth(x, y)})
    assert g["mode"] == "surface" and "Clough-Tocher" in g["scheme"]
    gx, gy = np.meshgrid(g["x"], g["y"])
    v = np.array([[np.nan if a is None else a for a in row] for row in g["values"]["f"]])
    err = np.abs(v - smooth(gx, gy))
    inner = (gx >= 0.1) & (gx <= 0.9) & (gy >= 0.1) & (gy <= 0.9)
    assert np.nanmax(err[inner]) <= 0.01
    assert math.sqrt(np.nanmean(err ** 2)) <= 0.02
    assert g["cells_inside"] == 41 * 41  # the corners are measured: the hull is the whole box


def test_no_extrapolation_outside_the_measured_hull():
    x = np.array([0.0, 1.0, 0.0, 0.5])
    y = np.array([0.0, 0.0, 1.0, 0.5])
    g = interpolate(x, y, {"f": x + y}, nx=11, ny=11)
    assert g["values"]["f"][10][10] is None  # (1, 1) lies outside the triangle
    assert g["values"]["f"][0][0] == pytest.approx(0.0, abs=1e-9)


def test_a_one_dimensional_sweep_is_interpolated_along_load():
    """Points on one curve of the load x power plane: PCHIP along load, within 5 % of a queueing curve."""
    x = np.linspace(0.05, 0.95, 8)
    g = interpolate(x, 100 + 500 * x, {"lat": 20 / (1 - 0.9 * x)})
    assert g["mode"] == "curve" and "PCHIP" in g["scheme"] and "curve, not an area" in g["reason"]
    xs = np.array(g["x"])
    truth = 20 / (1 - 0.9 * xs)
    assert np.max(np.abs(np.array(g["values"]["lat"]) - truth) / truth) <= 0.05
    assert np.allclose(g["y"], 100 + 500 * xs)


def test_one_load_is_not_interpolated():
    g = interpolate([0.5, 0.5], [100, 200], {"lat": [1, 2]})
    assert g["mode"] == "none" and "at least two loads" in g["reason"]


# ---------------------------------------------------------------- weights


@given(st.dictionaries(st.sampled_from(["latency_ms", "error_rate_pct", "throughput_qps", "x", "y"]),
                       st.floats(1e-6, 1e6), min_size=1))
def test_sla_weights_sum_to_one_and_follow_the_formula(targets):
    w = sla_weights(targets)
    assert math.isclose(sum(w.values()), 1.0, rel_tol=1e-9)
    total = sum(1 / v for v in targets.values())
    for k, v in targets.items():
        assert math.isclose(w[k], (1 / v) / total, rel_tol=1e-12)


def test_document_example_does_not_follow_from_its_formula():
    w = sla_weights(DOCUMENT_EXAMPLE_SLA)  # 200 ms, 0.5 %, 1000 qps
    assert w["latency_ms"] == pytest.approx(0.0025, abs=5e-5)
    assert w["error_rate_pct"] == pytest.approx(0.997, abs=5e-4)
    assert w["throughput_qps"] == pytest.approx(0.0005, abs=5e-6)
    assert w["latency_ms"] != pytest.approx(DOCUMENT_EXAMPLE_CLAIMED["latency_ms"], abs=0.1)


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), "200", True])
def test_sla_weights_refuse_a_target_that_is_not_positive(bad):
    with pytest.raises(ValueError, match="must be a finite number > 0"):
        sla_weights({"latency_ms": bad, "throughput_qps": 10})


def test_sla_score_is_one_at_the_targets_and_lower_when_better():
    t = {"latency_ms": 120, "error_rate_pct": 0.3, "throughput_qps": 85}
    assert sla_score(t, t) == pytest.approx(1.0)
    assert sla_score({"latency_ms": 60, "error_rate_pct": 0.15, "throughput_qps": 170}, t) == pytest.approx(0.5)


def test_tier_weights_are_a_s_and_renormalise_over_measured_dimensions():
    assert TIER_WEIGHTS["low-latency"] == {"cpu": 0.45, "memory": 0.15, "nvme": 0.10, "network": 0.30}
    assert TIER_WEIGHTS["batch"] == {"cpu": 0.12, "memory": 0.38, "nvme": 0.40, "network": 0.10}
    for w in TIER_WEIGHTS.values():
        assert sum(w.values()) == pytest.approx(1.0)
    score, used, left = tier_score({"cpu": None, "memory": 1.0, "nvme": None, "network": 0.5}, "batch")
    assert left == ["cpu", "nvme"]
    assert used == pytest.approx({"memory": 0.38 / 0.48, "network": 0.10 / 0.48})
    assert score == pytest.approx(0.38 / 0.48 + 0.5 * 0.10 / 0.48)
    assert tier_score({}, "batch") == (None, {}, ["cpu", "memory", "nvme", "network"])


# ---------------------------------------------------------------- TCO


SITE = {"currency": "USD", "card_price": 30000, "depreciation_years": 3, "electricity_price_per_kwh": 0.10,
        "cooling_overhead": 0.28, "rack_redundancy_cost_per_year": 6000, "cards_per_rack": 32,
        "operator_cost_per_year": 120000}


def test_tco_per_card_by_hand():
    """A §4.2's air-cooled card (780 W P99, 28 % cooling overhead), a year of 8760 h:
    depreciation 30000/3 = 10000; cooling 780 W x 0.28 x 8760 h = 1913.184 kWh x 0.10 = 191.32;
    rack 6000/32 = 187.50; staff 120000 x 0.15/16 = 1125.00; total 11503.82 per year, 34511.46 over 3 years."""
    t = tco_per_card(SITE, 780.0, "measured")
    values = {x["term"]: x["value"] for x in t["terms"]}
    assert values == {"hardware depreciation": 10000.0, "cooling energy": 191.32,
                      "rack power-redundancy share": 187.5, "operations staff share": 1125.0}
    assert t["total_per_year"] == pytest.approx(11503.82)
    assert t["total_over_depreciation"] == pytest.approx(34511.46)
    assert t["cooling_kwh_per_year"] == pytest.approx(1913.2)
    assert t["card_energy_cost_per_year"] == pytest.approx(683.28)  # shown beside, not in A's total
    assert not t["partial"]


def test_tco_names_what_the_site_did_not_declare():
    t = tco_per_card({"card_price": 30000, "electricity_price_per_kwh": 0.1, "cooling_overhead": 0.09}, 810.0, "x")
    assert t["partial"] and t["missing"] == ["cards_per_rack", "operator_cost_per_year",
                                             "rack_redundancy_cost_per_year"]
    assert t["total_per_year"] == pytest.approx(10000 + round(810 * 0.09 * 8760 / 1000 * 0.1, 2))


# ---------------------------------------------------------------- analyse()


def test_analyse_without_a_sweep_draws_nothing_and_says_why():
    a = analyse(make_report())
    assert a["sweep"]["status"] == "none" and a["sweep"]["reason"] == NO_SWEEP
    assert a["heatmap"] == {"status": "not drawn", "reason": NO_SWEEP}
    assert a["pareto"]["status"] == "not computed"
    assert a["tco"]["status"] == "not computed" and "site:" in a["tco"]["reason"]
    assert a["tokens_per_watt"]["status"] == "not computed"
    assert "0.0025" in a["sla"]["discrepancy"]


def test_analyse_runs_the_three_stages_on_a_sweep():
    a = analyse(make_report([make_sweep(c) for c in (350, 450, 550, 700)], site=SITE))
    assert a["sweep"]["status"] == "measured" and len(a["sweep"]["points"]) == 28  # PLP-POWER/LATENCY once
    hm = a["heatmap"]
    assert hm["status"] == "drawn" and hm["interpolation"]["mode"] == "surface"
    mask = [m for row in hm["pareto"]["mask"] for m in row]
    assert mask.count(True) == hm["pareto"]["kept"] > 0 and mask.count(False) == hm["pareto"]["dropped"] > 0
    scores = [s for row in hm["score"] for s in row]
    assert all((s is not None) == (m is True) for s, m in zip(scores, mask))  # scored exactly where kept
    # No grid point of this sweep meets the SVC-SLA defaults (P99 <= 120 ms, >= 85 req/s): no best point, said so.
    assert hm["best"] is None and "meets every SLA target (P99 <= 120 ms" in hm["best_reason"]
    assert a["sla"]["weights"] == pytest.approx(sla_weights({"latency_ms": 120, "error_rate_pct": 0.3,
                                                             "throughput_qps": 85}))
    assert a["tco"]["status"] == "computed" and "measured" in a["tco"]["power_source"]
    assert a["tokens_per_watt"]["status"] == "derived"
    metrics = {m["key"]: m for m in a["tiers"]["metrics"]}
    assert metrics["p99_latency_ms"]["value"] is not None and metrics["p99_latency_ms"]["dimension"] == "cpu"


def test_the_best_point_is_chosen_only_among_points_that_meet_the_sla():
    loose = dict(SITE, sla={"latency_ms": 100_000, "error_rate_pct": 100, "throughput_qps": 1})
    hm = analyse(make_report([make_sweep(c) for c in (350, 450, 550, 700)], site=loose))["heatmap"]
    scores = [s for row in hm["score"] for s in row if s is not None]
    assert hm["best"]["score"] == min(scores) and "meet every SLA target" in hm["best"]["rule"]
    strict_latency = dict(SITE, sla={"latency_ms": 1e-6, "error_rate_pct": 100, "throughput_qps": 1})
    hm = analyse(make_report([make_sweep(c) for c in (350, 450, 550, 700)], site=strict_latency))["heatmap"]
    assert hm["best"] is None and "P99 <= 1e-06 ms" in hm["best_reason"]


def test_analyse_site_sla_overrides_svc_sla():
    a = analyse(make_report(site={"sla": {"latency_ms": 200, "error_rate_pct": 0.5, "throughput_qps": 1000}}))
    assert a["sla"]["source"].startswith("profile site.sla")
    assert a["sla"]["weights"]["error_rate_pct"] == pytest.approx(0.997, abs=5e-4)
    assert a["tco"]["status"] == "not computed"  # an sla alone declares no cost


def test_analyse_without_power_says_so_and_rejects_bad_points():
    sweep = make_sweep(700, power=False) + [{"rho": "high"}, "junk", {"rho": 0.5, "p99_latency_s": -1,
                                                                       "error_rate": 0, "throughput_qps": 1}]
    a = analyse(make_report([sweep]))
    assert a["sweep"]["rejected_points"] == 6  # 3 bad entries, seen in both PLP verdicts
    assert a["heatmap"]["status"] == "not drawn" and "no power reading" in a["heatmap"]["reason"]
    assert a["pareto"]["status"] == "computed"
    assert a["tco"]["status"] == "not computed"


def test_analyse_uses_measured_tokens_per_watt_when_the_evidence_has_it():
    r = make_report([make_sweep(700)])
    for v in r["verdicts"]:
        if v["requirement"] == "PLP-POWER":
            v["evidence"] = dict(v["evidence"], tokens_per_watt_p99=12.4, tokens_per_joule=0.0034)
    t = analyse(r)["tokens_per_watt"]
    assert t["status"] == "measured" and t["median_tokens_per_watt_p99"] == 12.4


def test_site_section_is_validated_with_file_line_and_fix(tmp_path):
    from pytest_sits.profiles import ProfileError, resolve

    good = tmp_path / "good.yaml"
    good.write_text("name: lab\nextends: h100\nsite:\n  card_price: 30000\n  cooling_overhead: 0.28\n"
                    "  sla:\n    latency_ms: 200\n")
    assert resolve(str(good)).data["site"]["card_price"] == 30000
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: lab\nextends: h100\nsite:\n  card_prise: 30000\n")
    with pytest.raises(ProfileError) as exc:
        resolve(str(bad))
    assert "bad.yaml:4" in str(exc.value) and "card_price" in str(exc.value)
    neg = tmp_path / "neg.yaml"
    neg.write_text("name: lab\nextends: h100\nsite:\n  card_price: -5\n")
    with pytest.raises(ProfileError, match="neg.yaml:4: site.card_price = -5 is out of range"):
        resolve(str(neg))
