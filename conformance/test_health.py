"""Deployment health, one verdict per accelerator: DEP-ECC, DEP-ROWREMAP, DEP-THROTTLE, DEP-PERSIST,
DEP-POWERCAP, DEP-PCIE-ERRORS, DEP-XID (suite extensions)."""

import pytest

from pytest_sits.checks.health import (check_ecc, check_pcie_errors, check_persistence, check_powercap,
                                       check_rowremap, check_throttle, check_xid)
from pytest_sits.conditions.health import (acquire_ecc, acquire_persistence, acquire_powercap, acquire_rowremap,
                                           pcie_errors_evidence, throttle_evidence, xid_evidence)
from pytest_sits.conditions.inventory import absent_accelerator


@pytest.mark.sits_requirement("DEP-ECC")
def test_ecc(sits_accelerator, sits_inventory, sits_expected, sits_profile, sits_record):
    th = sits_profile.check_thresholds("DEP-ECC")
    if sits_accelerator is None:
        return sits_record(check_ecc(absent_accelerator(sits_expected, sits_inventory), th, "accelerators"))
    sits_record(check_ecc(acquire_ecc(sits_inventory, sits_accelerator), th, sits_accelerator["bdf"]))


@pytest.mark.sits_requirement("DEP-ROWREMAP")
def test_row_remapping(sits_accelerator, sits_inventory, sits_expected, sits_profile, sits_record):
    th = sits_profile.check_thresholds("DEP-ROWREMAP")
    if sits_accelerator is None:
        return sits_record(check_rowremap(absent_accelerator(sits_expected, sits_inventory), th, "accelerators"))
    sits_record(check_rowremap(acquire_rowremap(sits_inventory, sits_accelerator), th, sits_accelerator["bdf"]))


@pytest.mark.sits_requirement("DEP-THROTTLE")
def test_clock_events_under_load(sits_accelerator, sits_inventory, sits_expected, sits_profile, sits_health_window,
                                 sits_record):
    th = sits_profile.check_thresholds("DEP-THROTTLE")
    if sits_accelerator is None:
        return sits_record(check_throttle(absent_accelerator(sits_expected, sits_inventory), th, "accelerators"))
    sits_record(check_throttle(throttle_evidence(sits_health_window(sits_accelerator)), th,
                               sits_accelerator["bdf"]))


@pytest.mark.sits_requirement("DEP-PERSIST")
def test_persistence_mode(sits_accelerator, sits_inventory, sits_expected, sits_profile, sits_record):
    th = sits_profile.check_thresholds("DEP-PERSIST")
    if sits_accelerator is None:
        return sits_record(check_persistence(absent_accelerator(sits_expected, sits_inventory), th, "accelerators"))
    sits_record(check_persistence(acquire_persistence(sits_inventory, sits_accelerator), th,
                                  sits_accelerator["bdf"]))


@pytest.mark.sits_requirement("DEP-POWERCAP")
def test_power_limit(sits_accelerator, sits_inventory, sits_expected, sits_profile, sits_record):
    th = sits_profile.check_thresholds("DEP-POWERCAP")
    if sits_accelerator is None:
        return sits_record(check_powercap(absent_accelerator(sits_expected, sits_inventory), th, "accelerators"))
    sits_record(check_powercap(acquire_powercap(sits_inventory, sits_accelerator), th, sits_accelerator["bdf"]))


@pytest.mark.sits_requirement("DEP-PCIE-ERRORS")
def test_pcie_errors_during_run(sits_accelerator, sits_inventory, sits_expected, sits_profile, sits_health_window,
                                sits_record):
    th = sits_profile.check_thresholds("DEP-PCIE-ERRORS")
    if sits_accelerator is None:
        return sits_record(check_pcie_errors(absent_accelerator(sits_expected, sits_inventory), th, "accelerators"))
    sits_record(check_pcie_errors(pcie_errors_evidence(sits_health_window(sits_accelerator)), th,
                                  sits_accelerator["bdf"]))


@pytest.mark.sits_requirement("DEP-XID")
def test_no_critical_xid(sits_accelerator, sits_inventory, sits_expected, sits_profile, sits_health_window,
                         sits_record):
    th = sits_profile.check_thresholds("DEP-XID")
    if sits_accelerator is None:
        return sits_record(check_xid(absent_accelerator(sits_expected, sits_inventory), th, "accelerators"))
    sits_record(check_xid(xid_evidence(sits_health_window(sits_accelerator)), th, sits_accelerator["bdf"]))
