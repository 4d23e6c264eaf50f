"""Repeat until decided: the sequential rule every measured requirement's acquire function runs.

One *look* measures a batch of trials; after each look the requirement's own decision rule (the pure function
its check decides with, from :mod:`pytest_sits.checks`) says whether the interval decides.  Undecided, another
look runs, until the cap of trials or the run's time budget is reached.  Every trial is kept, with how long it
took, and the evidence says why the measurement stopped (decided, cap, budget, or that no number of trials
would decide), so the check that replays it sees exactly what the rule saw.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any, Callable, Dict, List, Optional


@dataclass
class TrialPlan:
    """How many trials a requirement measures: ``initial`` in the first look, then ``step`` more per look while
    undecided, at most ``cap`` (and at most ``looks`` looks); none started after ``deadline`` (a ``time.time()``
    instant: the run's budget), none when ``deadline`` has passed before the first look beyond ``minimum``."""

    requirement: str
    initial: int
    step: int
    cap: int
    looks: int = 3
    minimum: int = 2
    seconds_per_trial: float = 1.0
    deadline: Optional[float] = None
    #: Why the plan differs from the default (the budget), or None.
    note: Optional[str] = None

    def to_json(self) -> Dict[str, Any]:
        return asdict(self)

    @classmethod
    def default(cls, requirement: str, initial: int = 5, step: int = 5, cap: int = 15, **kw: Any) -> TrialPlan:
        return cls(requirement, initial, step, cap, **kw)


def next_step(decision: Dict[str, Any]) -> str:
    """What the sequential rule makes of a check's decision (:func:`pytest_sits.checks.interval.decide`): "pass" or
    "fail" (decided: stop), "undecided" (measure again), or "never": nothing to decide against (no threshold: one
    look is the measurement), the figure moved under the measurement (more trials of a moving machine do not
    decide), or no number of trials would."""
    if decision.get("threshold") is None:
        return "never"
    if decision["outcome"] != "undecided":
        return decision["outcome"]
    moved = (decision.get("moved") or {}).get("moved")
    if moved or decision.get("more_trials") is None:
        return "never"
    return "undecided"


def sequential(look: Callable[[int, int], List[Dict[str, Any]]], decide: Callable[[List[Dict[str, Any]], int], str],
               plan: TrialPlan, say: Optional[Callable[[str], None]] = None,
               clock: Callable[[], float] = time.time) -> Dict[str, Any]:
    """Run looks until ``decide(trials, looks)`` returns "pass" or "fail", or the plan stops it.

    ``look(k, index)`` measures ``k`` trials (``index``: the number of trials before this look) and returns one
    record per trial (each gets ``look`` and ``seconds`` added when it has none).  Returns ``{"trials": [...],
    "sequential": {...}}``: the plan, the looks taken, the outcome of the last decision and why it stopped."""
    trials: List[Dict[str, Any]] = []
    looks = 0
    outcome = "undecided"
    stopped = "cap"
    t_start = clock()
    while True:
        k = plan.initial if not looks else min(plan.step, plan.cap - len(trials))
        t0 = clock()
        got = look(max(1, k), len(trials))
        dt = (clock() - t0) / max(1, len(got))
        for rec in got:
            rec.setdefault("seconds", round(dt, 4))
            rec["look"] = looks
        trials.extend(got)
        looks += 1
        outcome = decide(trials, looks)
        if outcome in ("pass", "fail"):
            stopped = "decided"
            break
        if outcome == "never":
            stopped = "no further trial would decide (no threshold, a figure that moved, or one on the threshold)"
            break
        if len(trials) >= plan.cap or looks >= plan.looks:
            stopped = "cap"
            break
        if plan.deadline is not None and clock() >= plan.deadline:
            stopped = "budget"
            break
        if say is not None:
            say(f"[{plan.requirement}] undecided after {len(trials)} trial(s): measuring {min(plan.step, plan.cap - len(trials))} more")
    return {"trials": trials,
            "sequential": {"looks": looks, "trials": len(trials), "outcome": outcome, "stopped": stopped,
                           "seconds": round(clock() - t_start, 3), "plan": plan.to_json()}}
