"""A lab's own test module uses the public fixtures as documented (sits_bandwidth_hold, sits_host_peak,
sits_thermal_steady), without defining any of them."""

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
    with sits_thermal_steady(rig, "THERM-GPU-STEADY") as evidence:
        assert evidence["trace"]["stopped"] == "steady"
        assert evidence["sensor"]["resolution_c"] == 1.0
'''


def test_lab_module_uses_public_fixtures(pytester, monkeypatch):
    pytester.makepyfile(test_lab=LAB_MODULE)
    pytester.makeini("[pytest]\nsits_report_dir = none\n")
    # The hold runs on this machine (live); the thermal calibration on a simulated GPU in simulated time.
    res = pytester.runpytest("-p", "no:randomly", "-k", "hold", "--sits-profile", "host")
    res.assert_outcomes(passed=1)
    res = pytester.runpytest("-p", "no:randomly", "-k", "thermal", "--sits-platform", "sim:h100")
    res.assert_outcomes(passed=1)
