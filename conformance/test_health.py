"""Deployment health, one verdict per accelerator: DEP-ECC, DEP-ROWREMAP, DEP-THROTTLE, DEP-PERSIST,
DEP-POWERCAP, DEP-PCIE-ERRORS, DEP-XID, DEP-NVLINK-ERRORS (suite extensions)."""

import pytest

from pytest_sits.checks.health import (check_ecc, check_ecc_dcgmi, check_nvlink_errors, check_pcie_errors,
                                       check_persistence, check_persistence_dcgmi, check_powercap, check_rowremap,
                                       check_rowremap_dcgmi, check_throttle, check_xid)
from pytest_sits.conditions.health import (acquire_ecc, acquire_persistence, acquire_powercap, acquire_rowremap,
                                           dcgmi_verdict, nvlink_errors_evidence, pcie_errors_evidence,
                                           throttle_evidence, xid_evidence)


@pytest.mark.sits_requirement("DEP-ECC")
def test_ecc(sits_device, sits_inventory, sits_health_window, sits_thresholds, sits_record):
    dcgmi = dcgmi_verdict(sits_inventory, sits_device, check_ecc_dcgmi, sits_thresholds)  # a submitted dcgmi diag
    if dcgmi is not None:
        return sits_record(dcgmi)
    sits_record(check_ecc(acquire_ecc(sits_inventory, sits_device, sits_health_window(sits_device)), sits_thresholds,
                          sits_device["bdf"]))


@pytest.mark.sits_requirement("DEP-ROWREMAP")
def test_row_remapping(sits_device, sits_inventory, sits_thresholds, sits_record):
    dcgmi = dcgmi_verdict(sits_inventory, sits_device, check_rowremap_dcgmi, sits_thresholds)
    if dcgmi is not None:
        return sits_record(dcgmi)
    sits_record(check_rowremap(acquire_rowremap(sits_inventory, sits_device), sits_thresholds, sits_device["bdf"]))


@pytest.mark.sits_requirement("DEP-THROTTLE")
def test_clock_events_under_load(sits_device, sits_health_window, sits_thresholds, sits_record):
    sits_record(check_throttle(throttle_evidence(sits_health_window(sits_device), sits_device), sits_thresholds,
                               sits_device["bdf"]))


@pytest.mark.sits_requirement("DEP-PERSIST")
def test_persistence_mode(sits_device, sits_inventory, sits_thresholds, sits_record):
    dcgmi = dcgmi_verdict(sits_inventory, sits_device, check_persistence_dcgmi, sits_thresholds)
    if dcgmi is not None:
        return sits_record(dcgmi)
    sits_record(check_persistence(acquire_persistence(sits_inventory, sits_device), sits_thresholds,
                                  sits_device["bdf"]))


@pytest.mark.sits_requirement("DEP-POWERCAP")
def test_power_limit(sits_device, sits_inventory, sits_thresholds, sits_record):
    sits_record(check_powercap(acquire_powercap(sits_inventory, sits_device), sits_thresholds, sits_device["bdf"]))


@pytest.mark.sits_requirement("DEP-PCIE-ERRORS")
def test_pcie_errors_during_run(sits_device, sits_health_window, sits_thresholds, sits_record):
    sits_record(check_pcie_errors(pcie_errors_evidence(sits_health_window(sits_device)), sits_thresholds,
                                  sits_device["bdf"]))


@pytest.mark.sits_requirement("DEP-XID")
def test_no_critical_xid(sits_device, sits_health_window, sits_thresholds, sits_record):
    sits_record(check_xid(xid_evidence(sits_health_window(sits_device)), sits_thresholds, sits_device["bdf"]))


@pytest.mark.sits_requirement("DEP-NVLINK-ERRORS")
def test_no_nvlink_errors_during_run(sits_device, sits_health_window, sits_thresholds, sits_record):
    sits_record(check_nvlink_errors(nvlink_errors_evidence(sits_health_window(sits_device), sits_device),
                                    sits_thresholds, sits_device["bdf"]))
