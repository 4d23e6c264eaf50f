"""Bandwidth: MEM-BW-HOLD (host DRAM held in band), MEM-BW-EFFICIENCY, TOPO-PCIE-BW."""

import pytest

from pytest_sits.checks.bandwidth import check_device_bw, check_hold, check_pcie_bw
from pytest_sits.conditions.bandwidth import acquire_device_bw, acquire_hold, acquire_pcie_bw
from pytest_sits.conditions.inventory import absent_accelerator


@pytest.mark.sits_requirement("MEM-BW-HOLD")
def test_dram_bandwidth_hold(sits_host_peak, sits_host_node, sits_bandwidth_hold, sits_profile, sits_progress,
                             sits_record):
    th = sits_profile.check_thresholds("MEM-BW-HOLD")
    sits_record(check_hold(acquire_hold(sits_host_peak, sits_bandwidth_hold, th["duration_s"], sits_host_node,
                                        say=sits_progress), th, "host"))


@pytest.mark.sits_requirement("MEM-BW-EFFICIENCY")
def test_device_memory_bandwidth(sits_accelerator, sits_platform, sits_inventory, sits_expected, sits_profile,
                                 sits_record):
    th = sits_profile.check_thresholds("MEM-BW-EFFICIENCY")
    if sits_accelerator is None:
        return sits_record(check_device_bw(absent_accelerator(sits_expected, sits_inventory), th, "accelerators"))
    sits_record(check_device_bw(acquire_device_bw(sits_platform, sits_accelerator), th, sits_accelerator["bdf"]))


@pytest.mark.sits_requirement("TOPO-PCIE-BW")
def test_host_device_bandwidth_under_hold(sits_accelerator, sits_platform, sits_inventory, sits_expected,
                                          sits_profile, sits_host_peak, sits_bandwidth_hold, sits_record):
    th = sits_profile.check_thresholds("TOPO-PCIE-BW")
    if sits_accelerator is None:
        return sits_record(check_pcie_bw(absent_accelerator(sits_expected, sits_inventory), th, "accelerators"))
    sits_record(check_pcie_bw(acquire_pcie_bw(sits_platform, sits_accelerator, th["bytes"], sits_host_peak,
                                              sits_bandwidth_hold), th, sits_accelerator["bdf"]))
