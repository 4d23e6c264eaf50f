"""The run's plan: how many trials each measured requirement takes, how long the run should last, and how a time
budget (``--sits-budget MINUTES``) shrinks the trials to fit.

The time of a run is an *estimate*: per requirement, a fixed cost per subject (an accelerator, a pair of them,
a CPU package, the host), plus a cost per trial and per look.  The figures are the durations the requirement
itself schedules (a hold's ``duration_s``, the sweep's ``point_s`` per load level, the SLA run's
``duration_s``, the thermal window) and the typical cost of what surrounds them on an 8-GPU node: loading torch
and a device context, allocating buffers, a thermal calibration's settling (taken from the simulated thermal
plant: 2 to 7 minutes from idle to the start of the steady window).  They are stated as estimates everywhere
they are shown.

Fewer trials give wider intervals, so a tight budget leaves more verdicts INCONCLUSIVE; the plan says so when
it cuts.  The fixed costs (a calibration, a hold of the profile's ``duration_s``, a LoadGen run) are the
requirement itself and are never cut: a budget below the shortest plan is reported, not obeyed by measuring
less than the requirement asks.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional

from ..catalogue import CATALOGUE, level_rank
from ..checks.inference import LATENCY_RUNS
from .trials import TrialPlan

#: Requirements whose acquire functions repeat until decided: (initial, step, cap, minimum) trials, and what one
#: trial is.  The hold's trials are seconds of hold (its windows are decided in batches of BATCH_S).
TRIALS: Dict[str, Dict[str, Any]] = {
    "MEM-BW-HOLD": {"initial": None, "step": None, "cap": None, "minimum": None,
                    "trial": "one second of hold (windows decided in batch means)"},
    "MEM-BW-EFFICIENCY": {"initial": 7, "step": 7, "cap": 21, "minimum": 3, "trial": "one on-device copy"},
    "TOPO-PCIE-BW": {"initial": 7, "step": 7, "cap": 21, "minimum": 3, "trial": "one pinned copy each way"},
    "CRG-NODE": {"initial": 5, "step": 5, "cap": 15, "minimum": 3, "trial": "one timed loop of GEMMs per dtype"},
    "CRG-EDGE": {"initial": 7, "step": 7, "cap": 21, "minimum": 3, "trial": "one copy each way of a pair"},
    "CRG-SYNC": {"initial": 5, "step": 5, "cap": 15, "minimum": 3, "trial": "one all-reduce"},
    "EQ-THROUGHPUT": {"initial": 25, "step": 0, "cap": 25, "minimum": 10, "trial": "one benchmark round"},
    "SVC-COLDSTART": {"initial": 3, "step": 2, "cap": 5, "minimum": 2, "trial": "one cold start"},
    # where the profile sets a latency ceiling (else one run per point, nothing to decide)
    "PLP-LATENCY": dict({k: LATENCY_RUNS[k] for k in ("initial", "step", "cap", "minimum")},
                        trial="one Server run of every sweep point"),
}

def _fractions(th: Dict[str, Any]) -> int:
    return len(th.get("sweep_fractions") or [0.2, 0.4, 0.6, 0.8])


#: Per requirement: the subject kind (``per``), seconds per subject (``fixed``), per trial (``trial``), per look
#: (``look``) and once a run (``once``).  Estimates for an 8-GPU node (see the module's docstring); callables take
#: the requirement's thresholds.
Cost = Dict[str, Any]
COSTS: Dict[str, Cost] = {
    "INV-DEVICES": {"per": "host", "fixed": 0.5}, "MEM-CAPACITY": {"per": "host", "fixed": 0.2},
    "DEP-DRIVER": {"per": "host", "fixed": 0.2}, "LINK-NVLINK-MESH": {"per": "host", "fixed": 0.2},
    "SEC-TEE": {"per": "host", "fixed": 0.5}, "TOPO-PCIE-DIRECT": {"per": "acc", "fixed": 0.1},
    "TOPO-NUMA-BIND": {"per": "acc", "fixed": 0.3}, "SEC-FIRMWARE": {"per": "acc", "fixed": 0.1},
    "DEP-ECC": {"per": "acc", "fixed": 0.1}, "DEP-ROWREMAP": {"per": "acc", "fixed": 0.1},
    "DEP-PERSIST": {"per": "acc", "fixed": 0.1}, "DEP-POWERCAP": {"per": "acc", "fixed": 0.1},
    "DEP-PCIE-ERRORS": {"per": "acc", "fixed": 0.1}, "DEP-XID": {"per": "acc", "fixed": 0.1},
    # the first load imports torch (once a run); each device's load then starts in about half a second
    "TOPO-PCIE-LINK": {"per": "acc", "once": 3.0, "fixed": lambda th: 0.5 + 0.1 * th.get("samples", 5)},
    # the health window (shared with DEP-PCIE-ERRORS and DEP-XID): a load start, the warm-up, the samples
    "DEP-THROTTLE": {"per": "acc", "fixed": lambda th: 0.5 + th.get("warmup_s", 1.0)
                     + th.get("samples", 12) * th.get("interval_s", 0.25)},
    "MEM-BW-HOLD": {"per": "host", "fixed": 8.0, "trial": 1.0},  # the STREAM peak and its re-measurements
    "MEM-BW-EFFICIENCY": {"per": "acc", "fixed": 2.0, "trial": 0.01},
    "TOPO-PCIE-BW": {"per": "acc", "fixed": 3.0, "trial": 0.02},
    "THERM-GPU-STEADY": {"per": "acc", "fixed": lambda th: 300.0 + th.get("window_s", 120)},
    "THERM-CPU-STEADY": {"per": "package", "fixed": lambda th: 120.0 + th.get("window_s", 120)},
    # the sweep serves PLP-SAMPLE/PPL/POWER/LATENCY: model and LoadGen start, Offline and SingleStream (half a
    # point each), the maximum measured again after each point (an Offline run of half a point, at least 2 s),
    # and each point's Server runs: one without a latency ceiling, else PLP-LATENCY's trials (a trial: one run of
    # every point)
    "PLP-LATENCY": {"per": "acc", "fixed": lambda th: 8.0 + th.get("point_s", 5)
                    * (1 + (0 if th.get("max_latency_us") is not None else _fractions(th)))
                    + max(2.0, th.get("point_s", 5) / 2) * _fractions(th),
                    "trial": lambda th: th.get("point_s", 5) * _fractions(th)},
    "PLP-SAMPLE": {"per": "acc", "fixed": 0.1}, "PLP-PPL": {"per": "acc", "fixed": 0.1},
    "PLP-POWER": {"per": "acc", "fixed": 0.1},
    "EQ-PRECISION": {"per": "host", "fixed": 21.0},  # 36 operator/dtype pairs on each device, torch loaded
    "EQ-THROUGHPUT": {"per": "host", "fixed": 11 * 1.5, "trial": 11 * 0.01},  # 11 operators
    "EQ-LATENCY": {"per": "host", "fixed": 10.0}, "EQ-RESOURCE": {"per": "host", "fixed": 10.0},
    "CRG-NODE": {"per": "acc", "fixed": 3.0, "trial": 0.06},
    "CRG-EDGE": {"per": "pair", "fixed": 0.5, "trial": 0.003},
    "CRG-SYNC": {"per": "host", "fixed": 0.0, "trial": 0.05, "look": 15.0},  # each look spawns the ranks
    "CRG-JITTER": {"per": "acc", "fixed": 1.0},
    "SVC-SLA": {"per": "acc", "fixed": lambda th: 5.0 + th.get("duration_s", 60)},
    "SVC-FRAG": {"per": "acc", "fixed": 10.0},
    "SVC-COLDSTART": {"per": "acc", "fixed": 0.0, "trial": 10.0},
}

#: What the estimate assumes when the platform has no accelerator to count.
NODE_ACCELERATORS = 8


def _hold_trials(th: Dict[str, Any]) -> Dict[str, int]:
    d = int(math.ceil(float(th.get("duration_s", 30))))
    return {"initial": d, "step": max(1, d // 2), "cap": 2 * d, "minimum": d}


@dataclass
class Row:
    requirement: str
    subjects: int
    cost: Cost
    thresholds: Dict[str, Any]
    trials: Optional[Dict[str, int]]  # initial, step, cap, minimum (None: one run, no trials to plan)
    parallel: int = 1  # subjects measured at once (per-accelerator work across xdist workers)

    def _fixed(self) -> float:
        f = self.cost.get("fixed", 0.0)
        return float(f(self.thresholds) if callable(f) else f)

    def seconds(self, trials: Optional[int] = None, looks: int = 1) -> float:
        """The estimate for ``trials`` trials in ``looks`` looks (default: the initial plan), all subjects."""
        per = self._fixed() + looks * float(self.cost.get("look", 0.0))
        if self.trials is not None:
            n = self.trials["initial"] if trials is None else trials
            trial = self.cost.get("trial", 0.0)
            per += n * float(trial(self.thresholds) if callable(trial) else trial)
        if not self.subjects:
            return 0.0
        return per * math.ceil(self.subjects / max(1, self.parallel)) + float(self.cost.get("once", 0.0))

    def looks_for(self, trials: int) -> int:
        if self.trials is None or not self.trials["step"]:
            return 1
        extra = max(0, trials - self.trials["initial"])
        return 1 + int(math.ceil(extra / self.trials["step"]))


class Plan:
    """The trials and the time estimate of one run (its level, its machine's subjects, its budget)."""

    def __init__(self, level: str, thresholds: Callable[[str], Dict[str, Any]], accelerators: int,
                 packages: int = 1, budget_min: Optional[float] = None, started_at: Optional[float] = None,
                 requirements: Optional[List[str]] = None, workers: int = 1):
        self.level = level
        self.workers = max(1, int(workers or 1))
        self.accelerators = accelerators
        self.packages = max(1, packages)
        self.budget_min = budget_min
        self.started_at = started_at if started_at is not None else time.time()
        wanted = requirements if requirements is not None else [
            r.id for r in CATALOGUE.values() if r.implemented and level_rank(r.level) <= level_rank(level)]
        pairs = accelerators * (accelerators - 1) // 2
        count = {"host": 1, "acc": max(1, accelerators), "pair": pairs, "package": self.packages}
        self.rows: Dict[str, Row] = {}
        for rid in wanted:
            cost = COSTS.get(rid, {"per": "host", "fixed": 0.5})
            th = thresholds(rid)
            trials: Optional[Dict[str, int]] = None
            if rid == "MEM-BW-HOLD":
                trials = _hold_trials(th)
            elif rid in TRIALS and not (rid == "PLP-LATENCY" and th.get("max_latency_us") is None):
                t = TRIALS[rid]
                trials = {k: int(t[k]) for k in ("initial", "step", "cap", "minimum")}
                if rid == "CRG-SYNC":
                    it = int(th.get("iterations", 5))
                    trials.update(initial=it, step=it, cap=3 * it, minimum=min(it, 3))
            subjects = count[cost["per"]]
            if rid in ("CRG-EDGE",) and accelerators < 2:
                subjects = 0
            parallel = min(self.workers, subjects) if cost["per"] in ("acc", "pair") else 1
            self.rows[rid] = Row(rid, subjects, cost, th, trials, parallel)
        self.note: Optional[str] = None
        self._fit()

    # -- estimates ---------------------------------------------------------------
    def estimate_s(self, which: str = "initial") -> float:
        """Seconds for the whole plan: ``initial`` (every requirement decides on its first look), ``cap`` (every
        undecided one measures up to its cap), ``minimum`` (the fewest trials any requirement may take)."""
        total = 0.0
        for r in self.rows.values():
            if r.trials is None:
                total += r.seconds()
            else:
                n = r.trials[which]
                total += r.seconds(n, r.looks_for(n))
        return total

    def _fit(self) -> None:
        """Shrink the trials to the budget: first the repeats (the cap), then the first look, never below the
        minimum; a budget below the shortest plan is reported."""
        if self.budget_min is None:
            return
        b = self.budget_min * 60.0
        e_cap, e_init, e_min = self.estimate_s("cap"), self.estimate_s("initial"), self.estimate_s("minimum")
        if b >= e_cap:
            self.note = f"the budget of {self.budget_min:g} min holds the whole plan (every cap)"
            return
        planned = [r for r in self.rows.values() if r.trials is not None]
        if b >= e_init:
            f = (b - e_init) / (e_cap - e_init) if e_cap > e_init else 0.0
            for r in planned:
                t = r.trials
                t["cap"] = t["initial"] + int(math.floor((t["cap"] - t["initial"]) * f))
            self.note = (f"the budget of {self.budget_min:g} min cuts the repeats of undecided requirements to "
                         f"{f:.0%} of the default: fewer trials, wider intervals, more INCONCLUSIVE")
            return
        g = (b - e_min) / (e_init - e_min) if b >= e_min and e_init > e_min else 0.0
        for r in planned:
            t = r.trials
            t["initial"] = t["minimum"] + int(math.floor((t["initial"] - t["minimum"]) * g))
            t["cap"] = t["initial"]
        if b >= e_min:
            self.note = (f"the budget of {self.budget_min:g} min leaves no repeats and cuts the first look of each "
                         "measured requirement: fewer trials, wider intervals, more INCONCLUSIVE")
        else:
            self.note = (f"the budget of {self.budget_min:g} min is below the shortest plan (about "
                         f"{_minutes(e_min)}: calibrations, holds and LoadGen runs of the profile's durations are "
                         "not cut): every measured requirement takes its fewest trials, and the run will overrun")

    # -- what the acquire functions get -------------------------------------------
    def deadline(self) -> Optional[float]:
        return self.started_at + self.budget_min * 60.0 if self.budget_min is not None else None

    def trials_for(self, requirement: str) -> TrialPlan:
        row = self.rows.get(requirement)
        t = row.trials if row is not None and row.trials is not None else None
        if t is None:
            d = TRIALS.get(requirement) or {"initial": 5, "step": 5, "cap": 15, "minimum": 3}
            t = {k: int(d[k] or 1) for k in ("initial", "step", "cap", "minimum")}
        cost = (row.cost if row is not None else {}).get("trial", 1.0)
        if callable(cost):
            cost = cost(row.thresholds)
        return TrialPlan(requirement, initial=t["initial"], step=t["step"], cap=max(t["cap"], t["initial"]),
                         minimum=t["minimum"], seconds_per_trial=float(cost), deadline=self.deadline(),
                         note=self.note if self.budget_min is not None else None)

    # -- what the run says ------------------------------------------------------------
    def header(self) -> List[str]:
        subj = (f"{self.accelerators} accelerator(s)" if self.accelerators else "no accelerator")
        if self.workers > 1:
            subj += f", {self.workers} xdist workers"
        first, cap = self.estimate_s("initial"), self.estimate_s("cap")
        more = f", up to {_minutes(cap)} if every undecided requirement repeats to its cap" if cap > first + 30 else ""
        lines = [f"time estimate: about {_minutes(first)}{more} (level {self.level}, {subj}; an estimate from the "
                 "planned trials and the durations the profile schedules)"]
        if self.note:
            lines.append(self.note)
        return lines

    def to_json(self) -> Dict[str, Any]:
        return {"level": self.level, "accelerators": self.accelerators, "packages": self.packages,
                "workers": self.workers,
                "budget_min": self.budget_min, "note": self.note,
                "estimate_s": {k: round(self.estimate_s(k), 1) for k in ("minimum", "initial", "cap")},
                "statement": "an estimate: the durations each requirement schedules plus typical costs on an "
                             "8-GPU node (pytest_sits/conditions/plan.py)",
                "trials": {r.requirement: dict(r.trials) for r in self.rows.values() if r.trials is not None}}


def _minutes(seconds: float) -> str:
    m = seconds / 60.0
    return f"{m:.0f} min" if m >= 2 else f"{m:.1f} min"
