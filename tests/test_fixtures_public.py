"""A lab's own test module uses the public fixtures as documented (sits_bandwidth_hold, sits_host_peak,
sits_thermal_steady), without defining any of them."""

import pytest

LAB_MODULE = '''
from pytest_sits.conditions.thermal import thermal_rigs

def test_kernel_under_hold(sits_host_peak, sits_bandwidth_hold):
    assert sits_host_peak["validated"] and sits_host_peak["kernels"]["copy"]["gbps_median"] > 0
    with sits_bandwidth_hold() as hold:
        sum(range(10000))
    ev = hold.evidence()
    assert ev["peak_gbps"] == sits_host_peak["kernels"]["copy"]["gbps_median"]
    assert ev["timeline"], "the hold measured no window"

def test_after_thermal_steady(sits_platform, sits_thermal_steady):
    rig = thermal_rigs(sits_platform, "gpu", sits_platform.inventory()["accelerators"][0])[0]
    with sits_thermal_steady(rig, "THERM-GPU-STEADY") as evidence:  # outside a marked test: named
        assert evidence["trace"]["stopped"] == "steady"
        assert evidence["sensor"]["resolution_c"] == 1.0
'''


@pytest.mark.slow
def test_lab_module_uses_public_fixtures(pytester, monkeypatch):
    pytester.makepyfile(test_lab=LAB_MODULE)
    pytester.makeini("[pytest]\nsits_report_dir = none\n")
    # The hold runs on this machine (live); the thermal calibration on a simulated GPU in simulated time.
    res = pytester.runpytest("-p", "no:randomly", "-k", "hold", "--sits-profile=host")
    res.assert_outcomes(passed=1)
    res = pytester.runpytest("-p", "no:randomly", "-k", "thermal", "--sits-platform=sim:h100")
    res.assert_outcomes(passed=1)


REQUIREMENT_MODULE = '''
import pytest
from pytest_sits.checks.health import check_ecc, check_xid
from pytest_sits.conditions.health import acquire_ecc


@pytest.mark.sits_requirement("DEP-ECC")
def test_ecc(sits_device, sits_inventory, sits_thresholds, sits_record):
    sits_record(check_ecc(acquire_ecc(sits_inventory, sits_device), sits_thresholds, sits_device["bdf"]))


@pytest.mark.sits_requirement("DEP-ECC")
def test_wrong_requirement(sits_device, sits_inventory, sits_profile, sits_record):
    sits_record(check_xid({"events": [], "source": "nvml", "history": {"events": []}},
                          sits_profile.check_thresholds("DEP-XID"), sits_device["bdf"]))


def test_unmarked(sits_thresholds):
    pass
'''


def test_thresholds_come_from_the_marker(pytester):
    """sits_thresholds is the profile's resolved thresholds of the marker's requirement, and nothing else."""
    pytester.makepyfile(test_lab='''
import pytest

@pytest.mark.sits_requirement("DEP-POWERCAP")
def test_x(sits_thresholds, sits_profile):
    assert sits_thresholds == sits_profile.check_thresholds("DEP-POWERCAP")
    assert "tolerance" in sits_thresholds
''')
    res = pytester.runpytest("--sits-platform=sim:h100", "--sits-report-dir=none")
    res.assert_outcomes(passed=1)


@pytest.mark.slow
def test_device_records_the_absence_verdict_and_the_recorder_refuses_another_requirement(pytester, report_of):
    pytester.makepyfile(test_lab=REQUIREMENT_MODULE)
    # No accelerator where the profile expects eight: sits_device records the check's SKIP and ends each test.
    res = pytester.runpytest("--sits-profile=h100", "-k", "not unmarked", "-rs")
    res.assert_outcomes(skipped=2)
    verdicts = report_of(pytester.path)["verdicts"]
    assert [(v["requirement"], v["status"], v["subject"]) for v in verdicts] == [
        ("DEP-ECC", "SKIP", "accelerators"), ("DEP-ECC", "SKIP", "accelerators")]
    assert all(v["check"]["name"] == "DEP-ECC" and "found no NVIDIA device" in v["reason"] for v in verdicts)
    # With accelerators: the right requirement passes, a verdict of another requirement is refused (ERROR).
    res = pytester.runpytest("--sits-platform=sim:h100", "-k", "not unmarked")
    outcomes = res.parseoutcomes()
    assert outcomes["passed"] == 8 and outcomes["failed"] == 8, outcomes
    errors = [v for v in report_of(pytester.path)["verdicts"] if v["status"] == "ERROR"]
    assert len(errors) == 8 and all(v["requirement"] == "DEP-ECC" for v in errors)
    assert "is marked DEP-ECC but recorded a verdict of DEP-XID" in errors[0]["reason"]
    assert not any(v["requirement"] == "DEP-XID" for v in report_of(pytester.path)["verdicts"])


def test_a_fixture_that_reads_the_marker_names_the_fix_in_an_unmarked_test(pytester):
    pytester.makepyfile(test_lab=REQUIREMENT_MODULE)
    res = pytester.runpytest("--sits-platform=sim:h100", "--sits-report-dir=none", "-k", "unmarked")
    assert res.ret != 0
    res.stdout.fnmatch_lines(["*the fixture sits_thresholds reads the test's requirement from its marker; fix: "
                              "mark the test @pytest.mark.sits_requirement(\"ID\")*"])
