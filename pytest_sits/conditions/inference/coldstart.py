"""SVC-COLDSTART: cold starts (each a fresh interpreter) repeated until the requirement's rule decides."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from ..trials import TrialPlan, next_step, sequential

def acquire_coldstart(rig: Any, config: Dict[str, Any], plan: Optional[TrialPlan] = None) -> Dict[str, Any]:
    """Cold starts (each a fresh interpreter) until SVC-COLDSTART's rule decides; the evidence is the median trial's
    stages with every trial's total (``samples_s``) and stages (``trials``)."""
    how = {"asis": "none", "evict_files": "files", "drop_all": "all"}.get(config["page_cache"], "none")
    timeout = min(1800.0, max(5.0, float(config["timeout_s"])))
    if rig.simulated:
        one = rig.sim.coldstart
    else:
        why = rig.missing()
        if why:
            return {"unavailable": why}
        one = lambda: rig.coldstart(config["model"], how, timeout)  # noqa: E731
    return coldstart_trials(one, config, plan)


def coldstart_trials(one: Any, config: Dict[str, Any], plan: Optional[TrialPlan] = None) -> Dict[str, Any]:
    from ...checks.inference import check_coldstart

    plan = plan or TrialPlan.default("SVC-COLDSTART", initial=3, step=2, cap=5)
    runs: List[Dict[str, Any]] = []

    def evidence(looks: int) -> Dict[str, Any]:
        good = [r for r in runs if r.get("total_s") is not None and not r.get("error")]
        if not good:
            return dict(runs[0]) if runs else {"error": "no cold start ran"}
        mid = sorted(good, key=lambda r: r["total_s"])[len(good) // 2]
        return dict(mid, samples_s=[r["total_s"] for r in good],
                    trials=[{k: r.get(k) for k in ("total_s", "stages")} for r in good],
                    failed_trials=[r.get("error") for r in runs if r.get("error")],
                    sequential={"looks": looks})

    def look(k: int, index: int) -> List[Dict[str, Any]]:
        out = []
        for i in range(k):
            r = one()
            runs.append(r)
            out.append({"index": index + i, "total_s": r.get("total_s")})
            if r.get("error") or r.get("unavailable"):
                break
        return out

    def judge(trials: List[Dict[str, Any]], looks: int) -> str:
        ev = evidence(looks)
        if ev.get("error") or ev.get("unavailable") or len(ev.get("samples_s") or []) < 2:
            return "never"
        return next_step(check_coldstart(ev, {"max_s": config["max_s"]}, "").evidence["decision"])

    out = sequential(look, judge, plan)
    ev = evidence(out["sequential"]["looks"])
    if "samples_s" in ev:
        ev["sequential"] = dict(out["sequential"], trials=len(ev["samples_s"]))
    return ev
