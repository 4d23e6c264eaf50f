"""One exit-status scheme for pytest and every sits command: a FAIL, an ERROR (could not test) and an
INCONCLUSIVE each exit with their own status, whatever the front."""

import pytest

from pytest_sits import exitcodes
from pytest_sits.commands.fleet.common import fleet_exit
from pytest_sits.commands.health import UNCHECKED, UNDECIDED, UNHEALTHY, judge


@pytest.mark.parametrize("counts, pytest_status, expected", [
    ({"PASS": 3, "SKIP": 2}, 0, exitcodes.OK),
    ({"PASS": 3, "FAIL": 1}, 1, exitcodes.NON_CONFORMANT),
    ({"PASS": 3, "ERROR": 1}, 1, exitcodes.NOT_TESTED),              # could not test: not a FAIL
    ({"FAIL": 1, "ERROR": 1, "INCONCLUSIVE": 1}, 1, exitcodes.NON_CONFORMANT),  # a FAIL wins
    ({"ERROR": 1, "INCONCLUSIVE": 1}, 1, exitcodes.NOT_TESTED),      # then an ERROR
    ({"PASS": 3, "INCONCLUSIVE": 1}, 0, exitcodes.UNDECIDED),
    ({"SKIP": 4}, 0, exitcodes.UNDECIDED),                           # nothing decided
    ({"PASS": 1, "FAIL": 1}, 2, exitcodes.INTERRUPTED),              # pytest's own outcome first
    ({"PASS": 1}, 4, exitcodes.USAGE_ERROR),
    ({}, 5, exitcodes.NO_TESTS),
    ({}, 1, exitcodes.DOES_NOT_HOLD),                                # a lab's own test failed, no requirement ran
])
def test_run_status(counts, pytest_status, expected):
    assert exitcodes.run_status(counts, pytest_status) == expected


def test_the_table_is_one_scheme_with_distinct_statuses():
    codes = [c for c, _, _ in exitcodes.EXIT_STATUSES]
    assert len(set(codes)) == len(codes) and codes == sorted(codes)
    assert {0, 1, 2, 3, 4, 5} <= set(codes)  # pytest's own keep their meaning
    assert exitcodes.NAMES[exitcodes.NOT_TESTED] == "NOT_TESTED" != exitcodes.NAMES[exitcodes.NON_CONFORMANT]
    assert [int(pytest.ExitCode[n]) for n in ("OK", "TESTS_FAILED", "INTERRUPTED", "INTERNAL_ERROR",
                                             "USAGE_ERROR", "NO_TESTS_COLLECTED")] == [0, 1, 2, 3, 4, 5]


def test_health_and_fleet_use_the_scheme():
    ok = {"run": {"completed": True}}
    v = {"requirement": "DEP-ECC", "subject": "gpu0", "evidence": {}}
    assert judge(dict(ok, verdicts=[dict(v, status="FAIL")]), [])[0] == UNHEALTHY == exitcodes.NON_CONFORMANT
    assert judge(dict(ok, verdicts=[dict(v, status="ERROR")]), [])[0] == UNCHECKED == exitcodes.NOT_TESTED
    assert judge(dict(ok, verdicts=[dict(v, status="INCONCLUSIVE")]), [])[0] == UNDECIDED == exitcodes.UNDECIDED
    assert judge(dict(ok, verdicts=[dict(v, status="PASS")]), [])[0] == exitcodes.OK
    assert [fleet_exit(r) for r in ("PASS", "FAIL", "ERROR", "UNDECIDED")] == [0, 10, 13, 11]


def test_audit_exits_by_the_scheme(monkeypatch, capsys):
    import argparse

    from pytest_sits.commands import audit as audit_mod

    def fake(statuses):
        report = {"verdicts": [{"requirement": "DEP-ECC", "subject": f"gpu{i}", "status": s, "reason": "r",
                                "evidence": {}} for i, s in enumerate(statuses)],
                  "summary": {"result": "x", "result_reason": "y"}, "run": {}, "inventory": {},
                  "platform": {"label": "evidence"}, "profile": {"name": "h100"}}
        return lambda spec, profile, level, report_dir: (report, "")

    args = argparse.Namespace(profile=None, report_dir=None, level="standard", json=None)
    for statuses, status in ((["PASS"], 0), (["PASS", "FAIL"], 10), (["PASS", "ERROR"], 13),
                             (["FAIL", "ERROR"], 10), (["INCONCLUSIVE"], 11), (["SKIP"], 11)):
        monkeypatch.setattr(audit_mod, "run_suite", fake(statuses))
        assert audit_mod.audit("spec", args) == status, statuses


LAB_MODULE = '''
import pytest

@pytest.mark.sits_requirement("DEP-ECC")
def test_probe_breaks():
    raise RuntimeError("the ECC counter read failed: device is lost")
'''


@pytest.mark.slow
def test_a_run_that_could_not_test_exits_apart_from_a_failing_one(pytester, report_of):
    pytester.makepyfile(test_lab=LAB_MODULE)
    result = pytester.runpytest("--sits-platform=sim:h100", "-p", "no:cacheprovider")
    assert result.ret == exitcodes.NOT_TESTED, result.stdout.str()[-2000:]
    run = report_of(pytester.path)["run"]
    assert run["exit_status"] == 13 and run["exit_status_name"] == "NOT_TESTED" and run["pytest_exit_status"] == 1


@pytest.mark.slow
def test_nothing_listening_at_the_endpoint_exits_not_tested(pytester, conformance_args, report_of):
    """A wrong port is not a failing service: SVC-SLA's pre-flight finds nothing listening, an ERROR, exit 13."""
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    result = pytester.runpytest(*conformance_args, "--sits-profile=host", "--sits-level=full", "-m", "SVC-SLA",
                                f"--sits-endpoint=http://127.0.0.1:{port}")
    assert result.ret == exitcodes.NOT_TESTED, result.stdout.str()[-2000:]
    [v] = report_of(pytester.path)["verdicts"]
    assert v["status"] == "ERROR" and "nothing listens" in v["reason"]
