"""Security: SEC-FIRMWARE (versions on the profile's allow-list, driver module signature) and SEC-TEE (the
trusted-execution matrix, report only unless the profile requires capabilities)."""

import pytest

from pytest_sits.checks.security import check_firmware, check_tee
from pytest_sits.conditions.health import acquire_firmware, acquire_tee
from pytest_sits.conditions.inventory import absent_accelerator


@pytest.mark.sits_requirement("SEC-FIRMWARE")
def test_firmware_allow_list(sits_accelerator, sits_platform, sits_inventory, sits_expected, sits_profile,
                             sits_record):
    th = sits_profile.check_thresholds("SEC-FIRMWARE")
    if sits_accelerator is None:
        return sits_record(check_firmware(absent_accelerator(sits_expected, sits_inventory), th, "accelerators"))
    sits_record(check_firmware(acquire_firmware(sits_inventory, sits_accelerator, sits_platform.root), th,
                               sits_accelerator["bdf"]))


@pytest.mark.sits_requirement("SEC-TEE")
def test_trusted_execution_matrix(sits_platform, sits_inventory, sits_profile, sits_record):
    sits_record(check_tee(acquire_tee(sits_platform.root, sits_inventory), sits_profile.check_thresholds("SEC-TEE"),
                          "host"))
