"""Inventory and deployment: INV-DEVICES, MEM-CAPACITY, DEP-DRIVER."""

import pytest

from pytest_sits.checks.inventory import absent_reason, check_capacity, check_devices, check_driver


@pytest.mark.sits_requirement("INV-DEVICES")
def test_devices_match_profile(sits_inventory, sits_expected, sits_profile, sits_record):
    nvml = sits_inventory["management"]["nvml"]
    sits_record(check_devices(sits_inventory["accelerators"], nvml, sits_expected,
                              sits_profile.thresholds("INV-DEVICES")))


@pytest.mark.sits_requirement("MEM-CAPACITY")
def test_memory_holds_workload(sits_inventory, sits_expected, sits_profile, sits_record):
    accs = [a for a in sits_inventory["accelerators"] if a["pci_id"] in sits_expected["pci_ids"]]
    sits_record(check_capacity(accs, sits_profile.thresholds("MEM-CAPACITY"),
                               absent=absent_reason(sits_expected, sits_inventory["accelerators"])))


@pytest.mark.sits_requirement("DEP-DRIVER")
def test_driver_floor(sits_inventory, sits_profile, sits_record):
    nvidia = any(a["pci_id"].startswith("10de:") for a in sits_inventory["accelerators"])
    sits_record(check_driver(sits_inventory["management"]["nvml"], sits_profile.thresholds("DEP-DRIVER"), nvidia))
