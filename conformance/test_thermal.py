"""Thermal steady state: THERM-GPU-STEADY and THERM-CPU-STEADY (level full).

Every GPU die and every CPU package is calibrated at once, each with its own controller and load
(``sits_thermal_all``): the chassis is in steady state as it serves, and the calibration costs the longest
device's time for all of them."""

import pytest

from pytest_sits.checks.thermal import check_cpu_steady, check_gpu_steady
from pytest_sits.conditions.thermal import thermal_rigs


def _cpu_rigs(platform):
    rigs = thermal_rigs(platform, "cpu")
    return [] if isinstance(rigs, dict) else rigs


def _gpu_rigs(platform, but=None):
    found = []
    for acc in platform.inventory()["accelerators"]:
        if acc["bdf"] != but:
            r = thermal_rigs(platform, "gpu", acc)
            found += [] if isinstance(r, dict) else r[:1]
    return found


@pytest.mark.sits_requirement("THERM-CPU-STEADY")
def test_cpu_package_steady(sits_platform, sits_thresholds, sits_thermal_all, sits_record, request):
    rigs = thermal_rigs(sits_platform, "cpu")
    if isinstance(rigs, dict):  # no package sensor or no load: the evidence says why
        return sits_record(check_cpu_steady(rigs, sits_thresholds, "cpu"))
    gpu = _runs(request, "test_gpu_die_steady")
    also = {gpu: lambda: _gpu_rigs(sits_platform)} if gpu else None
    evidence = sits_thermal_all(rigs, also=also)
    sits_record(*[check_cpu_steady(evidence[rig.subject], sits_thresholds, rig.subject) for rig in rigs])


@pytest.mark.sits_requirement("THERM-GPU-STEADY")
def test_gpu_die_steady(sits_device, sits_platform, sits_thresholds, sits_thermal_all, sits_record, request):
    rigs = thermal_rigs(sits_platform, "gpu", sits_device)
    if isinstance(rigs, dict):  # no die sensor or no load: the evidence says why
        return sits_record(check_gpu_steady(rigs, sits_thresholds, sits_device["bdf"]))
    cpu = _runs(request, "test_cpu_package_steady")
    also = {cpu: lambda: _cpu_rigs(sits_platform)} if cpu else None
    evidence = sits_thermal_all(rigs[:1], lambda: _gpu_rigs(sits_platform, but=sits_device["bdf"]), also=also)
    sits_record(check_gpu_steady(evidence[rigs[0].subject], sits_thresholds, rigs[0].subject))


def _runs(request, name):
    """The requirement of this module's test ``name`` where the session runs it (selected by -m/-k, at this
    level), else None: its devices are calibrated with this test's."""
    for item in request.session.items:
        if item.originalname == name and item.module is request.module:
            return item.get_closest_marker("sits_requirement").args[0]
    return None
