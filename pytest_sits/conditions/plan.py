"""The run's plan: how many trials each measured requirement takes, how long the run should last, and how a time
budget (``--sits-budget MINUTES``) shrinks the trials to fit.

The time of a run is an *estimate*: per requirement, a fixed cost per subject (an accelerator, a pair of them,
a CPU package, the host), plus a cost per trial and per look, and its trial plan, both from the requirement's
declaration (``pytest_sits/catalogue/<family>.py``: ``cost=``, ``trials=``).  The figures are the durations the requirement
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
from typing import Any, Callable, Dict, List, Optional, Tuple

from ..catalogue import CATALOGUE, CONDITIONS, level_rank
from ..catalogue.base import Cost
from .trials import TrialPlan

#: What the estimate assumes when the platform has no accelerator to count.
NODE_ACCELERATORS = 8
#: A simulated run's own cost: starting pytest and the simulated machine, and writing the report (seconds), and
#: each test's (its fixtures, its check, its verdict); the declarations' ``Cost.sim`` adds what a requirement's
#: simulation takes (measured: ``python benchmarks/plan_scaling.py``).
SIM_BASE_S = 0.5
SIM_PER_TEST_S = 0.01


def _seconds(value: Any, th: Dict[str, Any]) -> float:
    return float(value(th) if callable(value) else value)


@dataclass
class Row:
    requirement: str
    subjects: int
    cost: Cost
    thresholds: Dict[str, Any]
    trials: Optional[Dict[str, int]]  # initial, step, cap, minimum (None: one run, no trials to plan)
    parallel: int = 1  # subjects measured at once (per-accelerator work across xdist workers)

    def seconds(self, trials: Optional[int] = None, looks: int = 1, parallel: Optional[int] = None) -> float:
        """The estimate for ``trials`` trials in ``looks`` looks (default: the initial plan), all subjects,
        ``parallel`` of them at once (default: as planned)."""
        per = _seconds(self.cost.fixed, self.thresholds) + looks * self.cost.look
        if self.trials is not None:
            n = self.trials["initial"] if trials is None else trials
            per += n * _seconds(self.cost.trial, self.thresholds)
        if not self.subjects:
            return 0.0
        at_once = self.parallel if parallel is None else parallel
        return per * math.ceil(self.subjects / max(1, at_once)) + self.cost.once

    def looks_for(self, trials: int) -> int:
        if self.trials is None or not self.trials["step"]:
            return 1
        extra = max(0, trials - self.trials["initial"])
        return 1 + int(math.ceil(extra / self.trials["step"]))


class Plan:
    """The trials and the time estimate of one run (its level, its machine's subjects, its budget)."""

    def __init__(self, level: str, profile: Any, accelerators: int,
                 packages: int = 1, budget_min: Optional[float] = None, started_at: Optional[float] = None,
                 requirements: Optional[List[str]] = None, workers: int = 1):
        """``profile``: the resolved profile (its ``check_thresholds(ID)`` and ``condition(name)``)."""
        self.level = level
        self.workers = max(1, int(workers or 1))
        self.accelerators = accelerators
        self.packages = max(1, packages)
        self.budget_min = budget_min
        self.started_at = started_at if started_at is not None else time.time()
        wanted = requirements if requirements is not None else [
            r.id for r in CATALOGUE.values() if r.implemented and level_rank(r.level) <= level_rank(level)]
        pairs = accelerators * (accelerators - 1) // 2
        self._count = {"host": 1, "acc": max(1, accelerators), "pair": pairs, "package": self.packages}
        self._thresholds: Callable[[str], Dict[str, Any]] = profile.check_thresholds
        self.rows: Dict[str, Row] = {rid: self._row(rid) for rid in wanted}
        # A condition shared by several requirements (the health window) costs once per subject, when any of
        # the requirements it serves is planned.
        for name, cond in CONDITIONS.items():
            if any(r in self.rows for r in cond.serves):
                subjects = self._count[cond.cost.per]
                parallel = self._parallel(cond.cost, subjects)
                self.rows[name] = Row(name, subjects, cond.cost, profile.condition(name), None, parallel)
        self.note: Optional[str] = None
        self._fit()

    def _row(self, rid: str) -> Row:
        """The plan of one requirement, from its declaration (cost, trials) and the profile's thresholds."""
        req = CATALOGUE[rid]
        th = self._thresholds(rid)
        trials = req.trials.numbers(th) if req.trials is not None else None
        subjects = self._count[req.cost.per]
        return Row(rid, subjects, req.cost, th, trials, self._parallel(req.cost, subjects))

    def _parallel(self, cost: Cost, subjects: int) -> int:
        """How many subjects are measured at once: all of them where the measurement runs on every device at once
        (``together``; one process does it, so not under xdist, where each worker takes its own devices), the
        xdist workers' count for other per-accelerator work, else one (``apart``: the subjects share something)."""
        if cost.apart:
            return 1
        if cost.together and self.workers == 1:
            return max(1, subjects)
        return min(self.workers, subjects) if cost.per in ("acc", "pair") else 1

    # -- estimates ---------------------------------------------------------------
    def estimate_s(self, which: str = "initial", serial: bool = False) -> float:
        """Seconds for the whole plan: ``initial`` (every requirement decides on its first look), ``cap`` (every
        undecided one measures up to its cap), ``minimum`` (the fewest trials any requirement may take).
        ``serial``: as if every subject were measured one after the other and nothing at the same time (what
        the plan is compared with)."""
        total = 0.0
        groups: Dict[str, float] = {}
        one = 1 if serial else None
        for r in self.rows.values():
            if r.trials is None:
                s = r.seconds(parallel=one)
            else:
                n = r.trials[which]
                s = r.seconds(n, r.looks_for(n), parallel=one)
            if r.cost.group and self.workers == 1 and not serial:  # measured at the same time: the longest counts
                groups[r.cost.group] = max(groups.get(r.cost.group, 0.0), s)
            else:
                total += s
        return total + sum(groups.values())

    def estimate_sim_s(self) -> float:
        """Seconds of wall time the run takes on a simulated platform (every requirement decides on its first
        look): what simulating it costs, not what it measures."""
        total = SIM_BASE_S
        for r in self.rows.values():
            if r.requirement in CATALOGUE:
                total += r.subjects * (SIM_PER_TEST_S + _seconds(r.cost.sim, r.thresholds))
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
        planned = [r.trials for r in self.rows.values() if r.trials is not None]
        if b >= e_init:
            f = (b - e_init) / (e_cap - e_init) if e_cap > e_init else 0.0
            for t in planned:
                t["cap"] = t["initial"] + int(math.floor((t["cap"] - t["initial"]) * f))
            self.note = (f"the budget of {self.budget_min:g} min cuts the repeats of undecided requirements to "
                         f"{f:.0%} of the default: fewer trials, wider intervals, more INCONCLUSIVE")
            return
        g = (b - e_min) / (e_init - e_min) if b >= e_min and e_init > e_min else 0.0
        for t in planned:
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
        row = self.rows.get(requirement) or self._row(requirement)  # a requirement above the level: its own plan
        declared = CATALOGUE[requirement].trials
        if declared is None:
            raise KeyError(f"{requirement} is not measured in trials: its declaration has none")
        # Thresholds under which it does not repeat (PLP-LATENCY without a ceiling) still get the declared plan.
        t = row.trials or {"initial": declared.initial, "step": declared.step, "cap": declared.cap,
                           "minimum": declared.minimum}
        return TrialPlan(requirement, initial=t["initial"], step=t["step"], cap=max(t["cap"], t["initial"]),
                         minimum=t["minimum"], seconds_per_trial=_seconds(row.cost.trial, row.thresholds),
                         deadline=self.deadline(), note=self.note if self.budget_min is not None else None)

    # -- what the run says ------------------------------------------------------------
    def header(self, simulated: bool = False) -> List[str]:
        """The header's lines; ``simulated``: the run is on a simulated platform, whose own cost is not this
        estimate (it measures in simulated time): the estimate is labelled as the real machine's."""
        subj = (f"{self.accelerators} accelerator(s)" if self.accelerators else "no accelerator")
        if self.workers > 1:
            subj += f", {self.workers} xdist workers"
        first, cap = self.estimate_s("initial"), self.estimate_s("cap")
        more = f", up to {_minutes(cap)} if every undecided requirement repeats to its cap" if cap > first + 30 else ""
        what = "time estimate for the real machine the profile describes" if simulated else "time estimate"
        lines = [f"{what}: about {_minutes(first)}{more} (level {self.level}, {subj}; an estimate from the "
                 "planned trials and the durations the profile schedules)"]
        if simulated:
            lines.append(f"this simulated run: about {_minutes(self.estimate_sim_s())} (its devices settle and "
                         "measure in simulated time; an estimate of simulating it)")
        at_once, apart = self.concurrency()
        if at_once:
            grouped = sorted({r.cost.group for r in self.rows.values() if r.cost.group and r.requirement in at_once})
            lines.append("measured on every device at once: " + ", ".join(at_once)
                         + "".join("; at the same time: " + ", ".join(r for r in at_once if self.rows[r].cost.group
                                                                       == g) + f" ({g})"
                                   for g in grouped if self.workers == 1))
        if apart:
            lines.append("measured one subject at a time: " + "; ".join(f"{k} ({v})" for k, v in apart.items()))
        if self.note:
            lines.append(self.note)
        return lines

    def concurrency(self) -> Tuple[List[str], Dict[str, str]]:
        """The planned rows measured on every subject at once, and those kept apart with the reason."""
        at_once = [r.requirement for r in self.rows.values() if r.subjects > 1 and r.parallel >= r.subjects
                   and r.cost.together]
        apart = {r.requirement: r.cost.apart for r in self.rows.values() if r.subjects > 1 and r.cost.apart}
        return at_once, apart

    def to_json(self) -> Dict[str, Any]:
        return {"level": self.level, "accelerators": self.accelerators, "packages": self.packages,
                "workers": self.workers,
                "budget_min": self.budget_min, "note": self.note,
                "estimate_s": {k: round(self.estimate_s(k), 1) for k in ("minimum", "initial", "cap")},
                "simulated_estimate_s": round(self.estimate_sim_s(), 1),
                "statement": "an estimate: the durations each requirement schedules plus typical costs on an "
                             "8-GPU node (pytest_sits/conditions/plan.py)",
                "at_once": self.concurrency()[0], "apart": self.concurrency()[1],
                "trials": {r.requirement: dict(r.trials) for r in self.rows.values() if r.trials is not None}}


def _minutes(seconds: float) -> str:
    m = seconds / 60.0
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{m:.0f} min" if m >= 2 else f"{m:.1f} min"
