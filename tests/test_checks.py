"""Every registered check (pytest_sits/checks/) passes on its passing evidence and fails on its failing evidence,
the samples of tests/samples.py, given its requirement's thresholds as a profile resolves them."""

import pytest

from pytest_sits.checks import load_all
from pytest_sits.verdict import FAIL, PASS

from samples import BASE, NO_FAIL, NO_PASS, REGISTRY, SAMPLES


@pytest.mark.parametrize("name", sorted(load_all()))
def test_check_passes_good_evidence_and_fails_bad(name):
    chk = REGISTRY[name]
    samples = SAMPLES.get(name, [])
    best, _ = NO_PASS.get(name, (PASS, ""))  # a check that cannot PASS on its evidence: its best decision, and why
    passing = [(sid, build) for sid, build, status in samples if status == best]
    worst, _ = NO_FAIL.get(name, (FAIL, ""))  # a check that cannot FAIL: its worst decision, and why
    failing = [(sid, build) for sid, build, status in samples if status == worst]
    assert passing, f"{name}: no {best} sample (add one to SAMPLES in tests/samples.py)"
    assert failing, f"{name}: no {worst} sample (add one to SAMPLES in tests/samples.py)"
    for want, cases in ((best, passing), (worst, failing)):
        for sid, build in cases:
            evidence, thresholds, subject = build()
            missing = set(BASE.check_thresholds(chk.requirement)) - set(thresholds)
            assert not missing, f"{name}:{sid}: the sample's thresholds lack {sorted(missing)} (build them with th())"
            v = chk.fn(evidence, thresholds, subject)
            assert v.status == want, f"{name}:{sid} decided {v.status}, not {want}: {v.reason}"
            assert v.requirement == chk.requirement
            if want == FAIL:
                assert v.remediation, f"{name}:{sid}: a FAIL without a remediation"
