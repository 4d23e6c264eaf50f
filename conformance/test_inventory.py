"""Inventory and deployment: INV-DEVICES, MEM-CAPACITY, DEP-DRIVER."""

import pytest

from pytest_sits.checks.inventory import check_capacity, check_devices, check_driver
from pytest_sits.conditions.inventory import acquire_capacity, acquire_devices, acquire_driver


@pytest.mark.sits_requirement("INV-DEVICES")
def test_devices_match_profile(sits_inventory, sits_profile, sits_thresholds, sits_record):
    sits_record(check_devices(acquire_devices(sits_inventory, sits_profile.lineage_names()), sits_thresholds,
                              "accelerators"))


@pytest.mark.sits_requirement("MEM-CAPACITY")
def test_memory_holds_workload(sits_inventory, sits_expected, sits_thresholds, sits_record):
    sits_record(check_capacity(acquire_capacity(sits_inventory, sits_expected), sits_thresholds, "accelerators"))


@pytest.mark.sits_requirement("DEP-DRIVER")
def test_driver_floor(sits_inventory, sits_thresholds, sits_record):
    sits_record(check_driver(acquire_driver(sits_inventory), sits_thresholds, "driver"))
