"""Thermal steady state: THERM-GPU-STEADY and THERM-CPU-STEADY (level full)."""

import pytest

from pytest_sits.checks.inventory import expected_vs_found
from pytest_sits.checks.thermal import check_steady
from pytest_sits.thermalrig import ThermalUnavailable


@pytest.mark.sits_requirement("THERM-CPU-STEADY")
def test_cpu_package_steady(sits_platform, sits_profile, sits_thermal_steady, sits_record):
    th = sits_profile.thresholds("THERM-CPU-STEADY")
    try:
        rigs = sits_platform.thermal_rigs("cpu")
    except ThermalUnavailable as exc:
        return sits_record(check_steady("THERM-CPU-STEADY", None, None, th, "cpu", absent=str(exc)))
    verdicts = []
    for rig in rigs:
        with sits_thermal_steady(rig, "THERM-CPU-STEADY") as trace:
            verdicts.append(check_steady("THERM-CPU-STEADY", trace, rig.sensor_info, th, rig.subject))
    sits_record(*verdicts)


@pytest.mark.sits_requirement("THERM-GPU-STEADY")
def test_gpu_die_steady(sits_accelerator, sits_platform, sits_profile, sits_expected, sits_inventory,
                        sits_thermal_steady, sits_record):
    th = sits_profile.thresholds("THERM-GPU-STEADY")
    if sits_accelerator is None:
        return sits_record(check_steady("THERM-GPU-STEADY", None, None, th, "accelerators",
                                        absent=expected_vs_found(sits_expected, sits_inventory["accelerators"])))
    try:
        rig = sits_platform.thermal_rigs("gpu", sits_accelerator)[0]
    except ThermalUnavailable as exc:
        return sits_record(check_steady("THERM-GPU-STEADY", None, None, th, sits_accelerator["bdf"], absent=str(exc)))
    with sits_thermal_steady(rig, "THERM-GPU-STEADY") as trace:
        sits_record(check_steady("THERM-GPU-STEADY", trace, rig.sensor_info, th, rig.subject))
