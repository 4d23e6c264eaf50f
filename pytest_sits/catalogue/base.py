"""What one requirement declaration holds, and the one call that declares it.

Imitates pytest's ``Parser.addini(name, help, type, default)``: :func:`declare` states everything the suite
knows of a requirement in one place, and everything else is generated from it or checked against it:

* ``profiles/base.yaml`` (the defaults, with their comments) and the profile schema's ``thresholds`` section
  are generated (``python tools/docs_reference.py``; ``--check`` in the tests);
* the run's plan reads the time ``cost`` and the ``trials`` (there is no fallback: an undeclared cost is an
  error at import, not "half a second");
* ``sits requirements`` and the generated requirement reference list the ``platforms`` that can decide it;
* the tests run every declared sim ``fault`` and require the requirement to FAIL on it, and require a passing
  and a failing sample of its check (tests/samples.py).

A requirement missing any part is refused here, at import, naming the part; the parts that live elsewhere
(the check, the conformance test, the samples) are held to the declaration by tests/test_declarations.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, FrozenSet, Mapping, Optional, Tuple, Union

LEVELS: Tuple[str, ...] = ("quick", "standard", "full")
#: Where evidence comes from (DESIGN.md §3): the machine itself, a capture of it, texts people submit, a simulation.
PLATFORMS: Tuple[str, ...] = ("live", "snapshot", "evidence", "sim")
#: Subject kinds: what a verdict is about.
SCOPES: Tuple[str, ...] = ("host", "accelerator", "report")
#: What the plan counts a cost per: the host, each accelerator, each pair of them, each CPU package.
PER: Tuple[str, ...] = ("host", "acc", "pair", "package")

# Every number a profile may set has an upper bound, so that no profile the schema accepts can hang or exhaust a
# run (tests/test_fuzz_profiles.py checks that none is unbounded).  The general types carry a ceiling far above
# any real figure; counts, durations and sizes, which decide how long a run takes and how much it allocates,
# carry their own (COUNT, SECONDS, TIMEOUT_S, BYTES).
CEILING = 1e12
INT_CEILING = 2**31 - 1
Schema = Dict[str, Any]
NUM: Schema = {"type": "number", "minimum": -CEILING, "maximum": CEILING}
NUM01: Schema = {"type": "number", "minimum": 0, "maximum": 1}
POS: Schema = {"type": "number", "exclusiveMinimum": 0, "maximum": CEILING}
NONNEG: Schema = {"type": "number", "minimum": 0, "maximum": CEILING}
INT0: Schema = {"type": "integer", "minimum": 0, "maximum": INT_CEILING}
INT1: Schema = {"type": "integer", "minimum": 1, "maximum": INT_CEILING}
BOOL: Schema = {"type": "boolean"}
STR: Schema = {"type": "string", "minLength": 1, "maxLength": 1000}
COUNT: Schema = {"type": "integer", "minimum": 1, "maximum": 1000}             # samples, iterations, repetitions
SECONDS: Schema = {"type": "number", "exclusiveMinimum": 0, "maximum": 3600}    # a measurement's duration or window
TIMEOUT_S: Schema = {"type": "number", "exclusiveMinimum": 0, "maximum": 14400}  # how long a condition may settle
BYTES: Schema = {"type": "integer", "minimum": 1, "maximum": 64 << 30}          # a buffer the suite allocates
CELSIUS: Schema = {"type": "number", "minimum": -40, "maximum": 150}


def nullable(schema: Schema) -> Schema:
    out = dict(schema)
    out["type"] = [schema["type"], "null"]
    return out


def bounded(kind: str, lo: float, hi: float, exclusive_lo: bool = False) -> Schema:
    out: Schema = {"type": kind, "maximum": hi}
    out["exclusiveMinimum" if exclusive_lo else "minimum"] = lo
    return out


def enum(*values: str) -> Schema:
    return {"type": "string", "enum": list(values)}


@dataclass(frozen=True)
class Threshold:
    """One threshold key: its JSON schema, its default (the documents' figure, or the suite's where they give
    none) and the comment that explains it in ``profiles/base.yaml``.  ``items``: comments of a mapping
    default's keys."""

    schema: Schema
    default: Any
    help: str = ""
    items: Mapping[str, str] = field(default_factory=dict)


#: A cost figure: seconds, or a function of the requirement's resolved thresholds.
Seconds = Union[float, Callable[[Dict[str, Any]], float]]


@dataclass(frozen=True)
class Cost:
    """What the run's plan estimates for a requirement: seconds per subject (``fixed``), per trial, per look
    (a sequential look that restarts something), once a run; ``per``: what a subject is (see :data:`PER`).
    ``together``: the measurement is per subject and independent, and the suite runs it on every subject at once
    (one subject's time for all of them); ``apart``: why its subjects are measured one after the other (what they
    share).  A cost with neither is measured one subject after the other.  ``group``: requirements of one group
    are measured at the same time (the thermal calibrations of GPU dies and CPU packages): the plan counts the
    longest.  Estimates for an 8-GPU node; conditions/plan.py states how they are used."""

    per: str
    fixed: Seconds = 0.0
    trial: Seconds = 0.0
    look: float = 0.0
    once: float = 0.0
    together: bool = False
    apart: str = ""
    group: str = ""
    #: Wall seconds per subject of simulating it (a simulated platform measures in simulated time; only the
    #: requirements whose simulation takes noticeable time declare it): the simulated run's own estimate.
    sim: Seconds = 0.0


@dataclass(frozen=True)
class Trials:
    """The sequential plan of a measured requirement: ``initial`` trials, ``step`` more per look while undecided,
    at most ``cap``, never fewer than ``minimum`` (a budget cuts towards it); ``trial``: what one trial is.
    ``derive`` computes the four numbers from the thresholds instead (a hold's seconds, an iteration count);
    ``when`` says whether the requirement repeats at all under those thresholds."""

    trial: str
    initial: int = 0
    step: int = 0
    cap: int = 0
    minimum: int = 0
    derive: Optional[Callable[[Dict[str, Any]], Dict[str, int]]] = None
    when: Optional[Callable[[Dict[str, Any]], bool]] = None

    def numbers(self, th: Dict[str, Any]) -> Optional[Dict[str, int]]:
        """initial/step/cap/minimum under these thresholds, or None where the requirement does not repeat."""
        if self.when is not None and not self.when(th):
            return None
        if self.derive is not None:
            return dict(self.derive(th))
        return {"initial": self.initial, "step": self.step, "cap": self.cap, "minimum": self.minimum}


@dataclass(frozen=True)
class Requirement:
    """One SITS2026 requirement (or suite extension), declared once by :func:`declare`."""

    id: str
    title: str
    source: str
    level: str
    scope: str
    threshold_keys: Mapping[str, Threshold]
    cost: Cost
    trials: Optional[Trials]
    platforms: FrozenSet[str]
    faults: Tuple[str, ...]
    no_fault: Optional[str] = None
    #: Threshold overrides its faults are shown under (a sim:h100 run extended with them), where the defaults
    #: cannot fail on any simulated machine (SEC-FIRMWARE without a site's allow-list only WARNs).
    fault_thresholds: Mapping[str, Any] = field(default_factory=dict)
    facts: Optional[Callable[[Any], Dict[str, Any]]] = None
    note: str = ""
    implemented: bool = True
    extension: bool = False
    #: Vendors whose devices this version cannot decide it for, with why: their verdict is a SKIP naming it.
    unsupported: Mapping[str, str] = field(default_factory=dict)
    #: Measured under the SITS2026 test environment (A §2.4): its verdicts carry the environment of their
    #: measurement, and one taken outside the rules is INCONCLUSIVE (conditions/environment.py).
    environment: bool = False

    @property
    def thresholds(self) -> Dict[str, Schema]:
        """The JSON schema of each threshold key (what the profile schema's section holds)."""
        return {k: t.schema for k, t in self.threshold_keys.items()}

    def decides_on(self, platform_kind: str) -> bool:
        """Whether a platform of this kind can decide it (elsewhere its verdict says it was not measured)."""
        return platform_kind in self.platforms

    def defaults(self) -> Dict[str, Any]:
        return {k: t.default for k, t in self.threshold_keys.items()}

    #: The file stem of its family in every layer (checks/<family>.py, conditions/<family>.py, ...).
    family: str = ""


#: Every requirement, in declaration order (families in the order ``catalogue/__init__`` imports them).
CATALOGUE: Dict[str, Requirement] = {}


@dataclass(frozen=True)
class Condition:
    """A condition several requirements are measured under, with settings of its own (the ``conditions:``
    section of a profile): what it is, its settings with their defaults, the requirements it serves, and what it
    costs the plan per subject."""

    name: str
    title: str
    settings: Mapping[str, Threshold]
    serves: Tuple[str, ...]
    cost: Cost

    def defaults(self) -> Dict[str, Any]:
        return {k: t.default for k, t in self.settings.items()}


#: Every condition with settings of its own, by name.
CONDITIONS: Dict[str, Condition] = {}


def declare_condition(name: str, title: str, *, settings: Mapping[str, Threshold], serves: Tuple[str, ...],
                      cost: Cost) -> Condition:
    """Declare a condition shared by several requirements (its settings are read with no fallback, as a
    requirement's thresholds are)."""
    if name in CONDITIONS or not re.fullmatch(r"[a-z][a-z0-9_]{1,40}", name):
        raise DeclarationError(f"condition {name!r}: declared twice, or not a lower-case name")
    missing = [s for s in serves if s not in CATALOGUE]
    if missing:
        raise DeclarationError(f"condition {name}: serves: {', '.join(missing)} not declared (declare them first)")
    for key, t in settings.items():
        if not isinstance(t, Threshold) or not t.help:
            raise DeclarationError(f"condition {name}: setting {key}: declare it as Threshold(schema, default, help)")
    if cost.per not in PER:
        raise DeclarationError(f"condition {name}: cost: per={cost.per!r} is not one of {', '.join(PER)}")
    if _concurrency_error(cost):
        raise DeclarationError(f"condition {name}: cost: {_concurrency_error(cost)}")
    cond = Condition(name, title, dict(settings), tuple(serves), cost)
    CONDITIONS[name] = cond
    return cond


def _concurrency_error(cost: Cost) -> str:
    """What is wrong with a cost's ``together``/``apart``, or ""."""
    if cost.together and cost.apart:
        return "together=True and apart=... both given: a measurement runs on every subject at once, or apart"
    if cost.group and not cost.together:
        return f"group={cost.group!r} without together=True: only what runs on every device at once runs in a group"
    if cost.together and cost.per not in ("acc", "package"):
        return f"together=True on per={cost.per!r}: only a per-accelerator or per-package measurement runs at once"
    if cost.apart and cost.per not in ("acc", "pair", "package"):
        return f"apart=... on per={cost.per!r}: there is one subject, nothing to keep apart"
    return ""


class DeclarationError(ValueError):
    """A requirement declared with a part missing or wrong: raised at import, naming the part."""


def declare(id: str, title: str, source: str, *, level: str, scope: str, family: str,
            thresholds: Mapping[str, Threshold], cost: Cost, platforms: Tuple[str, ...],
            faults: Tuple[str, ...] = (), no_fault: Optional[str] = None,
            fault_thresholds: Optional[Mapping[str, Any]] = None, trials: Optional[Trials] = None,
            facts: Optional[Callable[[Any], Dict[str, Any]]] = None, note: str = "", extension: bool = False,
            implemented: bool = True, unsupported: Optional[Mapping[str, str]] = None,
            environment: bool = False) -> Requirement:
    """Declare one requirement: everything the suite knows of it, in one call.

    ``faults``: the sim faults (``sim:PROFILE+fault``) that must make it FAIL; ``no_fault`` says why there is
    none instead (a report-only requirement).  ``platforms``: those that can decide it (the others record it as
    not measured).  ``facts``: profile facts its check compares against, added to its thresholds.
    ``unsupported``: {vendor: why} - devices no library of this version reads for it (a SKIP naming it, never an
    INCONCLUSIVE that no run could decide).  ``environment``: measured under the SITS2026 test environment (A §2.4):
    its verdicts carry the environment of their measurement (:mod:`pytest_sits.conditions.environment`).
    """
    def bad(part: str, why: str) -> DeclarationError:
        return DeclarationError(f"requirement {id}: {part}: {why}")

    if id in CATALOGUE:
        raise bad("id", "declared twice")
    if not title or not source:
        raise bad("title" if not title else "source", "missing")
    if level not in LEVELS:
        raise bad("level", f"{level!r} is not one of {', '.join(LEVELS)}")
    if scope not in SCOPES:
        raise bad("scope", f"{scope!r} is not one of {', '.join(SCOPES)}")
    if not family:
        raise bad("family", "missing")
    for key, t in thresholds.items():
        if not isinstance(t, Threshold):
            raise bad(f"threshold {key}", "declare it as Threshold(schema, default, help)")
        if not t.help and not isinstance(t.default, dict):
            raise bad(f"threshold {key}", "no help text (it is the comment of profiles/base.yaml)")
    if cost.per not in PER:
        raise bad("cost", f"per={cost.per!r} is not one of {', '.join(PER)}")
    if _concurrency_error(cost):
        raise bad("cost", _concurrency_error(cost))
    if not platforms or set(platforms) - set(PLATFORMS):
        raise bad("platforms", f"{platforms!r}: name some of {', '.join(PLATFORMS)}")
    unknown = set(fault_thresholds or {}) - set(thresholds)
    if unknown:
        raise bad("fault_thresholds", f"{', '.join(sorted(unknown))} is not one of its thresholds")
    if implemented and not faults and not no_fault:
        raise bad("faults", "no sim fault makes it fail; name one, or say why none can (no_fault=...)")
    req = Requirement(id=id, title=title, source=source, level=level, scope=scope, threshold_keys=dict(thresholds),
                      cost=cost, trials=trials, platforms=frozenset(platforms), faults=tuple(faults),
                      no_fault=no_fault, fault_thresholds=dict(fault_thresholds or {}), facts=facts, note=note,
                      implemented=implemented, extension=extension, family=family,
                      unsupported=dict(unsupported or {}), environment=environment)
    CATALOGUE[id] = req
    return req


def unsupported_for(req_id: str, vendor: Any) -> Optional[str]:
    """Why requirement ``req_id`` is not supported for devices of ``vendor`` in this version, or None."""
    why = CATALOGUE[req_id].unsupported.get(str(vendor)) if req_id in CATALOGUE else None
    return f"{req_id} is not supported for {vendor} devices in this version: {why}" if why else None


def level_rank(level: str) -> int:
    return LEVELS.index(level)
