"""Thermal steady state: THERM-GPU-STEADY and THERM-CPU-STEADY (level full)."""

import pytest

from pytest_sits.checks.thermal import check_cpu_steady, check_gpu_steady
from pytest_sits.conditions.thermal import thermal_rigs


@pytest.mark.sits_requirement("THERM-CPU-STEADY")
def test_cpu_package_steady(sits_platform, sits_thresholds, sits_thermal_steady, sits_record):
    rigs = thermal_rigs(sits_platform, "cpu")
    if isinstance(rigs, dict):  # no package sensor or no load: the evidence says why
        return sits_record(check_cpu_steady(rigs, sits_thresholds, "cpu"))
    verdicts = []
    for rig in rigs:
        with sits_thermal_steady(rig) as evidence:
            verdicts.append(check_cpu_steady(evidence, sits_thresholds, rig.subject))
    sits_record(*verdicts)


@pytest.mark.sits_requirement("THERM-GPU-STEADY")
def test_gpu_die_steady(sits_device, sits_platform, sits_thresholds, sits_thermal_steady, sits_record):
    rigs = thermal_rigs(sits_platform, "gpu", sits_device)
    if isinstance(rigs, dict):  # no die sensor or no load: the evidence says why
        return sits_record(check_gpu_steady(rigs, sits_thresholds, sits_device["bdf"]))
    with sits_thermal_steady(rigs[0]) as evidence:
        sits_record(check_gpu_steady(evidence, sits_thresholds, rigs[0].subject))
