"""Every registered check is replayable: run again on its verdict's evidence, thresholds and subject, it decides
the same status, measured value and reason (what `sits replay` relies on); and every implemented requirement of
the catalogue has a registered check.

The samples (tests/samples.py) are the other unit tests' evidence: for each check at least one that passes (or
decides another non-FAIL status) and one that fails.
"""

import json
from pathlib import Path

import pytest

from pytest_sits.catalogue import CATALOGUE
from pytest_sits.checks import load_all
from pytest_sits.report.model import plain
from pytest_sits.report.replay import replay_verdict
from pytest_sits.verdict import FAIL, Verdict

from samples import LEGACY_SAMPLES, NO_FAIL, REGISTRY, SAMPLES

#: Stored-form replays known not to reproduce the verdict (sample id -> why); strict, so a fix shows up.
STORED_FORM_BROKEN: dict = {}

CASES = [pytest.param(name, build, status, id=f"{name}:{sid}")
         for name, samples in SAMPLES.items() for sid, build, status in samples]


def test_every_registered_check_has_a_failing_and_a_non_failing_sample():
    problems = []
    registry = load_all()
    for name in sorted(registry):
        statuses = [status for _, _, status in SAMPLES.get(name, [])]
        bad = NO_FAIL.get(name, (FAIL, ""))[0]
        if bad not in statuses:
            problems.append(f"{name}: no {bad} sample")
        if not [s for s in statuses if s not in (FAIL, bad)]:
            problems.append(f"{name}: no PASS-or-other sample")
    assert not problems, "; ".join(problems) + " (add them to SAMPLES in tests/samples.py)"
    assert not set(SAMPLES) - set(registry), f"samples for unregistered checks: {sorted(set(SAMPLES) - set(registry))}"


@pytest.mark.parametrize("name, build, status", CASES)
def test_check_replays_from_its_verdict(name, build, status):
    chk = REGISTRY[name]
    evidence, thresholds, subject = build()
    v = chk.fn(evidence, thresholds, subject)
    assert v.status == status, v.reason
    assert v.requirement == chk.requirement
    assert v.check == {"name": name, "version": chk.version}
    assert v.thresholds == thresholds
    for key, value in evidence.items():  # the input evidence is kept as given
        assert v.evidence[key] == value, key
    again = chk.fn(v.evidence, v.thresholds, v.subject)
    assert (again.status, again.measured, again.reason) == (v.status, v.measured, v.reason)
    assert again.subject == v.subject


STORED_CASES = [pytest.param(*c.values, id=c.id, marks=[pytest.mark.xfail(strict=True, reason=STORED_FORM_BROKEN[c.id])]
                             if c.id in STORED_FORM_BROKEN else []) for c in CASES]


@pytest.mark.parametrize("name, build, status", STORED_CASES)
def test_check_replays_from_its_stored_verdict(name, build, status):
    """The same through the report's JSON (what `sits replay` reads back): NaN/inf as strings, tuples as lists."""
    chk = REGISTRY[name]
    evidence, thresholds, subject = build()
    stored = json.loads(json.dumps(plain(chk.fn(evidence, thresholds, subject).to_json()), allow_nan=False))
    v = Verdict.from_json(stored)
    out = replay_verdict(stored)
    assert "verdict" in out, out.get("why")
    again = plain(out["verdict"].to_json())
    assert (again["status"], again["measured"], again["reason"]) == (v.status, v.measured, v.reason)


LEGACY_CASES = [pytest.param(name, version, build, status, id=f"{name}@v{version}:{sid}")
                for (name, version), samples in LEGACY_SAMPLES.items() for sid, build, status in samples]


@pytest.mark.parametrize("name, version, build, status", LEGACY_CASES)
def test_earlier_check_versions_still_replay(name, version, build, status):
    """A report written before a check's rule changed names the earlier version: kept registered (legacy), it
    decides the stored verdict again, through the report's JSON, the same way."""
    from pytest_sits.checks import get_version

    chk = get_version(name, version)
    assert chk is not None and chk.version == version and REGISTRY[name].version > version
    evidence, thresholds, subject = build()
    v = chk.fn(evidence, thresholds, subject)
    assert v.status == status, v.reason
    assert v.check == {"name": name, "version": version}
    stored = json.loads(json.dumps(plain(v.to_json()), allow_nan=False))
    out = replay_verdict(stored)
    assert "verdict" in out, out.get("why")
    again = plain(out["verdict"].to_json())
    assert (again["status"], again["measured"], again["reason"]) == (v.status, v.measured, v.reason)


def test_every_legacy_version_has_samples():
    from pytest_sits.checks import LEGACY

    load_all()
    assert set(LEGACY) - {("CRG-JITTER", 1), ("EQ-PRECISION", 1), ("EQ-PRECISION/golden-coverage", 1)} == set(
        LEGACY_SAMPLES)


def test_every_implemented_requirement_has_a_registered_check():
    implemented = sorted(rid for rid, req in CATALOGUE.items() if req.implemented)
    covered = {c.requirement for c in load_all().values()}
    missing = [rid for rid in implemented if rid not in covered]
    assert implemented
    assert not missing, f"implemented requirements without a registered check: {', '.join(missing)}"


def test_earlier_versions_live_in_the_legacy_package():
    """Every earlier check version is defined in a module of pytest_sits.checks.legacy, and no other module of the
    checks registers one (``legacy=True``): the current modules hold only today's rules."""
    import ast

    import pytest_sits.checks as checks
    from pytest_sits.checks import LEGACY

    load_all()
    assert LEGACY
    outside = sorted(f"{name}@v{version}: {c.fn.__module__}" for (name, version), c in LEGACY.items()
                     if not c.fn.__module__.startswith("pytest_sits.checks.legacy."))
    assert not outside, f"earlier versions defined outside pytest_sits.checks.legacy: {outside}"
    root = Path(checks.__file__).parent
    registering = []
    for path in sorted(root.rglob("*.py")):
        if "legacy" in path.relative_to(root).parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.keyword) and node.arg == "legacy"
                    and not (isinstance(node.value, ast.Constant) and node.value.value is False)):
                registering.append(f"{path.relative_to(root)}:{node.value.lineno}")
    assert not registering, f"legacy versions registered outside pytest_sits.checks.legacy: {registering}"
