"""Bandwidth: MEM-BW-HOLD (host DRAM held in band), MEM-BW-EFFICIENCY, TOPO-PCIE-BW; each measured until its
interval decides (or its trial plan ends).  On submitted texts, an nvbandwidth text's host<->device figures are
judged for TOPO-PCIE-BW (taken without the hold: they can FAIL, never PASS)."""

import pytest

from pytest_sits.checks.bandwidth import check_device_bw, check_hold, check_pcie_bw, check_pcie_bw_nvbandwidth
from pytest_sits.conditions.bandwidth import acquire_device_bw, acquire_hold, acquire_pcie_bw, submitted_pcie_bw


@pytest.mark.sits_requirement("MEM-BW-HOLD")
def test_dram_bandwidth_hold(sits_host_peak, sits_host_node, sits_bandwidth_hold, sits_thresholds, sits_trials,
                             sits_progress, sits_record):
    sits_record(check_hold(acquire_hold(sits_host_peak, sits_bandwidth_hold, sits_thresholds["duration_s"],
                                        sits_host_node, say=sits_progress, thresholds=sits_thresholds,
                                        plan=sits_trials), sits_thresholds, "host"))


@pytest.mark.sits_requirement("MEM-BW-EFFICIENCY")
def test_device_memory_bandwidth(sits_device, sits_platform, sits_thresholds, sits_trials, sits_at_once, sits_record):
    measured = sits_at_once(sits_device, lambda acc: acquire_device_bw(sits_platform, acc, thresholds=sits_thresholds,
                                                                       plan=sits_trials))
    sits_record(check_device_bw(measured, sits_thresholds, sits_device["bdf"]))


@pytest.mark.sits_requirement("TOPO-PCIE-BW")
def test_host_device_bandwidth_under_hold(sits_device, sits_platform, sits_thresholds, sits_trials, sits_host_peak,
                                          sits_bandwidth_hold, sits_record):
    submitted = submitted_pcie_bw(sits_platform.inventory(), sits_device) if sits_platform.kind == "evidence" else None
    if submitted is not None:  # a submitted nvbandwidth text's host<->device figures
        return sits_record(check_pcie_bw_nvbandwidth(submitted, sits_thresholds, sits_device["bdf"]))
    sits_record(check_pcie_bw(acquire_pcie_bw(sits_platform, sits_device, sits_thresholds["bytes"], sits_host_peak,
                                              sits_bandwidth_hold, sits_thresholds, sits_trials), sits_thresholds,
                              sits_device["bdf"]))
