"""Thermal steady state: THERM-GPU-STEADY and THERM-CPU-STEADY (level full)."""

import pytest

from pytest_sits.checks.thermal import check_cpu_steady, check_gpu_steady
from pytest_sits.conditions.thermal import thermal_rigs
from pytest_sits.conditions.inventory import absent_accelerator


@pytest.mark.sits_requirement("THERM-CPU-STEADY")
def test_cpu_package_steady(sits_platform, sits_profile, sits_thermal_steady, sits_record):
    th = sits_profile.check_thresholds("THERM-CPU-STEADY")
    rigs = thermal_rigs(sits_platform, "cpu")
    if isinstance(rigs, dict):
        return sits_record(check_cpu_steady(rigs, th, "cpu"))
    verdicts = []
    for rig in rigs:
        with sits_thermal_steady(rig, "THERM-CPU-STEADY") as evidence:
            verdicts.append(check_cpu_steady(evidence, th, rig.subject))
    sits_record(*verdicts)


@pytest.mark.sits_requirement("THERM-GPU-STEADY")
def test_gpu_die_steady(sits_accelerator, sits_platform, sits_inventory, sits_expected, sits_profile,
                        sits_thermal_steady, sits_record):
    th = sits_profile.check_thresholds("THERM-GPU-STEADY")
    if sits_accelerator is None:
        return sits_record(check_gpu_steady(absent_accelerator(sits_expected, sits_inventory), th, "accelerators"))
    rigs = thermal_rigs(sits_platform, "gpu", sits_accelerator)
    if isinstance(rigs, dict):
        return sits_record(check_gpu_steady(rigs, th, sits_accelerator["bdf"]))
    with sits_thermal_steady(rigs[0], "THERM-GPU-STEADY") as evidence:
        sits_record(check_gpu_steady(evidence, th, rigs[0].subject))
