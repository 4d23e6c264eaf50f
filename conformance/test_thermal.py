"""Thermal steady state: THERM-GPU-STEADY and THERM-CPU-STEADY (level full).

Every device of a kind is calibrated at once, each with its own controller and load (``sits_thermal_all``): the
chassis is in steady state as it serves, and the calibration costs one device's time for all of them."""

import pytest

from pytest_sits.checks.thermal import check_cpu_steady, check_gpu_steady
from pytest_sits.conditions.thermal import thermal_rigs


@pytest.mark.sits_requirement("THERM-CPU-STEADY")
def test_cpu_package_steady(sits_platform, sits_thresholds, sits_thermal_all, sits_record):
    rigs = thermal_rigs(sits_platform, "cpu")
    if isinstance(rigs, dict):  # no package sensor or no load: the evidence says why
        return sits_record(check_cpu_steady(rigs, sits_thresholds, "cpu"))
    evidence = sits_thermal_all(rigs)
    sits_record(*[check_cpu_steady(evidence[rig.subject], sits_thresholds, rig.subject) for rig in rigs])


@pytest.mark.sits_requirement("THERM-GPU-STEADY")
def test_gpu_die_steady(sits_device, sits_platform, sits_thresholds, sits_thermal_all, sits_record):
    rigs = thermal_rigs(sits_platform, "gpu", sits_device)
    if isinstance(rigs, dict):  # no die sensor or no load: the evidence says why
        return sits_record(check_gpu_steady(rigs, sits_thresholds, sits_device["bdf"]))

    def others():  # every other GPU of the machine that can be calibrated, heated with this one
        found = []
        for acc in sits_platform.inventory()["accelerators"]:
            if acc["bdf"] != sits_device["bdf"]:
                r = thermal_rigs(sits_platform, "gpu", acc)
                found += [] if isinstance(r, dict) else r[:1]
        return found

    evidence = sits_thermal_all(rigs[:1], others)
    sits_record(check_gpu_steady(evidence[rigs[0].subject], sits_thresholds, rigs[0].subject))
