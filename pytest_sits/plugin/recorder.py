"""Recording verdicts on a test item, and turning the worst one into the pytest outcome.

A verdict is kept whole (plain JSON, evidence included) on the item, and the plugin copies the item's verdicts
onto each of its ``TestReport`` objects (``report.sits_verdicts``), which pytest-xdist carries to the controller.  The
item's ``user_properties`` get a compact JSON line per verdict (requirement, subject, status, measured value,
threshold, reason): what pytest's JUnit XML shows, without the evidence.  Waivers and the worst-status rule come
from the verdict layer (:mod:`pytest_sits.verdict`).
"""

from __future__ import annotations

import json
import time
import warnings
from typing import Any, Dict, List, Optional

import pytest

from ..report.model import plain
from ..verdict import ERROR, FAIL, INCONCLUSIVE, SKIP, WAIVED, WARN, Verdict, apply_fleet_band, apply_waiver, worst

PROPERTY = "sits_verdict"
REQUIREMENT_PROPERTY = "sits_requirement"
#: The marker that names a test's requirement: ``@pytest.mark.sits_requirement(ID)``.
MARKER = "sits_requirement"
#: Where the plugin keeps the session's resolved run (:class:`pytest_sits.plugin.session.SitsRun`).
RUN_KEY: pytest.StashKey[Any] = pytest.StashKey()
#: When the test item's setup began (``time.time()``): a verdict's ``seconds`` counts from there.
STARTED_KEY: pytest.StashKey[float] = pytest.StashKey()
WAITS_KEY: pytest.StashKey[List[Dict[str, Any]]] = pytest.StashKey()
#: The test environment around a measured requirement's test (fixtures.py ``_sits_environment``).
ENVIRONMENT_KEY: pytest.StashKey[Dict[str, Any]] = pytest.StashKey()
#: What measured the evidence a test reads (``sits_inference``): it keeps the environment of each measurement.
MEASURED_KEY: pytest.StashKey[Any] = pytest.StashKey()


class SitsWarning(UserWarning):
    """A WARN verdict: conforms, but deserves a look."""


#: The item's verdicts, whole (copied onto its reports by the plugin's makereport hook).
VERDICTS_KEY: pytest.StashKey[List[Dict[str, Any]]] = pytest.StashKey()
#: What a JUnit property of a verdict holds.
JUNIT_FIELDS = ("requirement", "subject", "status", "measured", "unit", "threshold", "reason")


def verdicts_of(item: pytest.Item) -> List[Dict[str, Any]]:
    return item.stash.setdefault(VERDICTS_KEY, [])


def append(item: pytest.Item, verdict: Verdict, simulated: bool, waiver: Optional[str]) -> Dict[str, Any]:
    """Store one verdict on the item (it travels to the xdist controller on the TestReport)."""
    from ..conditions.locks import take_waits

    kept = verdicts_of(item)
    waits = item.stash.setdefault(WAITS_KEY, [])
    waits.extend(take_waits())
    data = verdict.to_json()
    if waits:  # the test waited for a lock over 5 s: who held it, and for how long, belongs to its evidence
        data["evidence"] = dict(data.get("evidence") or {}, lock_waits=list(waits))
    data["nodeid"] = item.nodeid
    data["simulated"] = simulated
    data["waiver"] = waiver
    data["seq"] = len(kept)
    data["recorded_at"] = time.time()
    started = item.stash.get(STARTED_KEY, None)
    # How long the verdict took: its test's wall time up to the verdict (the session fixtures it first needed, such
    # as a STREAM peak, included).
    data["seconds"] = round(data["recorded_at"] - started, 3) if started is not None else None
    data = plain(data)
    kept.append(data)
    item.user_properties.append((PROPERTY, json.dumps({k: data.get(k) for k in JUNIT_FIELDS}, separators=(",", ":"),
                                                      ensure_ascii=False)))
    return data


def requirement_of(item: pytest.Item) -> Optional[str]:
    """The requirement ID of the test's ``sits_requirement`` marker (None: not a requirement test)."""
    mark = item.get_closest_marker(MARKER)
    if mark is None:
        return None
    return mark.args[0] if mark.args else mark.kwargs.get("id")


class RequirementMismatch(Exception):
    """A test recorded a verdict of a requirement other than the one its marker names."""


def _skip(msg: str) -> None:
    """Skip, reported at the test's own location rather than this module's."""
    try:
        raise pytest.skip.Exception(msg, _use_item_location=True)
    except TypeError:  # pragma: no cover - pytest without the keyword
        pytest.skip(msg)


def environment_of(run: Any, state: Dict[str, Any], requirement: str, subject: str,
                   evidence: Dict[str, Any]) -> Dict[str, Any]:
    """The test environment's block of a measurement made in the test whose environment ``state`` is (its window:
    the evidence's ``measured_window``, else the test's call so far)."""
    from ..conditions.environment import measurement_block, remote_reason, rules_from

    return measurement_block(run.environment(), rules_from(run.profile), requirement, subject, evidence,
                             run.platform.inventory(), state, remote_reason(getattr(run, "endpoint", None)))


class Recorder:
    """Records verdicts on the test item and turns the worst one into the pytest outcome."""

    def __init__(self, item: pytest.Item, run: Any):
        self.item, self.run = item, run

    def _environment(self, v: Verdict) -> Verdict:
        """A verdict of a requirement measured under the test environment, with the environment of its
        measurement (PASS/FAIL/WARN measured outside the rules: INCONCLUSIVE)."""
        state = self.item.stash.get(ENVIRONMENT_KEY, None)
        if state is None:
            return v
        from ..catalogue import CATALOGUE
        from ..checks.environment import apply_environment
        from ..conditions.environment import device_of

        req = CATALOGUE.get(v.requirement)
        env = self.run.environment()
        if req is None or not req.environment or env is None:
            return v
        evidence = dict(v.evidence)
        stored = evidence.pop("environment_block", None)
        source = self.item.stash.get(MEASURED_KEY, None)
        block = source.environment_block(v.requirement) if source is not None else None
        if block is None and isinstance(stored, dict):
            block = stored
        inventory = self.run.platform.inventory()
        if block is not None:  # measured earlier (a shared sweep): judged on this verdict's device
            block = dict(block, device=device_of(v.subject, inventory))
        else:
            block = environment_of(self.run, state, v.requirement, v.subject, evidence)
        return apply_environment(Verdict(**{**v.__dict__, "evidence": evidence}), block)

    def __call__(self, *verdicts: Verdict) -> None:
        if not verdicts:
            raise TypeError("sits_record() needs at least one Verdict: a requirement test must decide something "
                            "(an acquire function with nothing to judge returns {'absent': why} evidence)")
        marked = requirement_of(self.item)
        wrong = sorted({v.requirement for v in verdicts if marked is not None and v.requirement != marked})
        if wrong:
            raise RequirementMismatch(f"{self.item.nodeid} is marked {marked} but recorded a verdict of "
                                      f"{', '.join(wrong)}; fix: record {marked} verdicts here, and test "
                                      f"{', '.join(wrong)} in a test marked with it")
        simulated = bool(self.run.platform.simulated)
        recorded = []
        for v in verdicts:
            v = self._environment(v)
            v = apply_fleet_band(v, self.run.profile.fleet_band(v.requirement, v.subject, v.unit))
            waiver = self.run.profile.waiver(v.requirement)
            v = apply_waiver(v, waiver)
            recorded.append(append(self.item, v, simulated, waiver if v.status == WAIVED else None))
        status = worst(d["status"] for d in recorded)
        req = next(d["requirement"] for d in recorded if d["status"] == status)
        msg = "; ".join(f"[{d['subject']}] {d['reason']}" for d in recorded if d["status"] == status)
        sim = " [SIMULATED]" if simulated else ""
        if status == FAIL:
            fixes = {d["remediation"] for d in recorded if d["status"] == FAIL and d["remediation"]}
            pytest.fail(f"{req} FAIL{sim}: {msg}\n  remediation: {' / '.join(sorted(fixes))}", pytrace=False)
        if status == ERROR:
            # One line: the detail (exception text, phase) is in the verdict's evidence and the report.
            pytest.fail(f"{req} ERROR{sim}: {msg}", pytrace=False)
        if status == INCONCLUSIVE or all(d["status"] in (SKIP, WAIVED) for d in recorded):
            _skip(f"{req} {status}{sim}: {msg}")
        if status == WARN:
            # Without its subject, the same finding on every device is one message, which pytest's warnings
            # summary shows once with the tests it came from.
            from ..report.render import subject_free

            first = next(d for d in recorded if d["status"] == WARN)
            warnings.warn(SitsWarning(f"{req} WARN{sim}: {subject_free(first['reason'], first['subject'])}"),
                          stacklevel=2)
