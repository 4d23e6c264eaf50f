"""Security: SEC-FIRMWARE (versions on the profile's allow-list, driver module signature) and SEC-TEE (the
trusted-execution matrix, report only unless the profile requires capabilities)."""

import pytest

from pytest_sits.checks.security import check_firmware, check_tee
from pytest_sits.conditions.security import acquire_firmware, acquire_tee


@pytest.mark.sits_requirement("SEC-FIRMWARE")
def test_firmware_allow_list(sits_device, sits_platform, sits_inventory, sits_thresholds, sits_record):
    sits_record(check_firmware(acquire_firmware(sits_inventory, sits_device, sits_platform.root), sits_thresholds,
                               sits_device["bdf"]))


@pytest.mark.sits_requirement("SEC-TEE")
def test_trusted_execution_matrix(sits_platform, sits_inventory, sits_thresholds, sits_record):
    sits_record(check_tee(acquire_tee(sits_platform.root, sits_inventory), sits_thresholds, "host"))
