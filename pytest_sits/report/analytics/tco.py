"""TCO per card (A §4.2) and tokens per watt.

A §4.2: TCO per card = hardware depreciation (3 years) + yearly cooling energy × electricity price
+ the card's share of the rack's power redundancy + its share of operations staff (0.15 person per
16 cards).  The inputs are the site's, declared in the profile's ``site:`` section (never measured);
the power is the measured P99 power when a sweep measured it, else the profile's TDP (declared).
A's formula counts the cooling energy, not the card's own energy; the card's energy cost is shown
beside the total, not added to it.
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Mapping, Optional, Sequence

#: Defaults that A §4.2 itself states (the rest has no default: a site declares it).
SITE_DEFAULTS: Dict[str, Any] = {"depreciation_years": 3, "operators": 0.15, "operator_cards": 16,
                                 "hours_per_year": 8760, "utilisation": 1.0, "currency": "USD"}

def _num(v: Any) -> Optional[float]:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return None
    return float(v)


def tco_per_card(site: Mapping[str, Any], power_w: float, power_source: str) -> Dict[str, Any]:
    """Yearly TCO of one card, term by term, with the formula and inputs of each term.

    A term whose inputs the site did not declare is ``None`` and named in ``missing``; the total then
    sums the declared terms only and says that it is partial."""
    s = dict(SITE_DEFAULTS, **{k: v for k, v in site.items() if k != "sla"})
    cur = s["currency"]
    hours = _num(s["hours_per_year"]) or 0.0
    util = _num(s["utilisation"]) or 0.0
    terms: List[Dict[str, Any]] = []
    missing: List[str] = []

    def term(name: str, needs: List[str], compute, formula: str) -> None:
        vals = {k: _num(s.get(k)) for k in needs}
        absent = [k for k, v in vals.items() if v is None]
        value = None
        if absent:
            missing.extend(absent)
        else:
            value = compute(vals)
        terms.append({"term": name, "value": None if value is None else round(value, 2), "formula": formula,
                      "inputs": {k: s.get(k) for k in needs}, "not_declared": absent})

    term("hardware depreciation", ["card_price", "depreciation_years"],
         lambda v: v["card_price"] / v["depreciation_years"], "card_price / depreciation_years")
    cooling_kwh = power_w * (_num(s.get("cooling_overhead")) or 0.0) * hours * util / 1000.0
    term("cooling energy", ["cooling_overhead", "electricity_price_per_kwh"],
         lambda v: power_w * v["cooling_overhead"] * hours * util / 1000.0 * v["electricity_price_per_kwh"],
         f"power {power_w:g} W x cooling_overhead x {hours:g} h x utilisation {util:g} / 1000 x price per kWh")
    term("rack power-redundancy share", ["rack_redundancy_cost_per_year", "cards_per_rack"],
         lambda v: v["rack_redundancy_cost_per_year"] / v["cards_per_rack"],
         "rack_redundancy_cost_per_year / cards_per_rack")
    term("operations staff share", ["operator_cost_per_year", "operators", "operator_cards"],
         lambda v: v["operator_cost_per_year"] * v["operators"] / v["operator_cards"],
         "operator_cost_per_year x operators / operator_cards")
    declared = [t["value"] for t in terms if t["value"] is not None]
    total = round(sum(declared), 2) if declared else None
    price = _num(s.get("electricity_price_per_kwh"))
    card_kwh = power_w * hours * util / 1000.0
    years = _num(s.get("depreciation_years"))
    return {
        "currency": cur,
        "power_w": power_w,
        "power_source": power_source,
        "terms": terms,
        "total_per_year": total,
        "total_over_depreciation": round(total * years, 2) if total is not None and years else None,
        "partial": bool(missing),
        "missing": sorted(set(missing)),
        "cooling_kwh_per_year": round(cooling_kwh, 1),
        "card_energy_kwh_per_year": round(card_kwh, 1),
        "card_energy_cost_per_year": round(card_kwh * price, 2) if price is not None else None,
        "note": "A §4.2 counts cooling energy only; the card's own energy cost is shown beside, not added.",
        "declared": "site inputs are declared in the profile, not measured",
    }


def sweep_tokens_per_joule(points: Sequence[Mapping[str, Any]]) -> Optional[Dict[str, Any]]:
    """Tokens per joule (tokens/s per W) at the sweep point where it is highest, from tokens/s and power.

    A stand-in, labelled as such, for A's P99 figure when the evidence does not carry
    ``tokens_per_watt_p99``: it divides each point's token rate by its power reading."""
    usable = [p for p in points if (_num(p.get("power_w")) or 0) > 0 and _num(p.get("tokens_per_s")) is not None]
    if not usable:
        return None
    best = max(usable, key=lambda p: p["tokens_per_s"] / p["power_w"])
    return {"value": round(best["tokens_per_s"] / best["power_w"], 4), "rho": best.get("rho"),
            "power_w": best["power_w"], "tokens_per_s": best["tokens_per_s"],
            "source": "sweep: tokens/s / power at the best point (not A's P99 1 s window figure)"}
