"""Topology: TOPO-PCIE-DIRECT, TOPO-PCIE-LINK, TOPO-NUMA-BIND, LINK-NVLINK-MESH."""

import pytest

from pytest_sits.checks.topology import check_numa_bind, check_pcie_direct, check_pcie_link, check_peer_mesh
from pytest_sits.conditions.topology import (acquire_link_under_load, acquire_numa_binding, acquire_pcie_path,
                                             acquire_peer_mesh)


@pytest.mark.sits_requirement("TOPO-PCIE-DIRECT")
def test_pcie_direct_attach(sits_device, sits_inventory, sits_thresholds, sits_record):
    sits_record(check_pcie_direct(acquire_pcie_path(sits_inventory, sits_device), sits_thresholds, sits_device["bdf"]))


@pytest.mark.sits_requirement("TOPO-PCIE-LINK")
def test_pcie_link_under_load(sits_device, sits_platform, sits_inventory, sits_thresholds, sits_at_once, sits_record):
    measured = sits_at_once(sits_device, lambda acc: acquire_link_under_load(sits_platform, sits_inventory, acc,
                                                                             sits_thresholds["samples"]))
    sits_record(check_pcie_link(measured, sits_thresholds, sits_device["bdf"]))


@pytest.mark.sits_requirement("TOPO-NUMA-BIND")
def test_numa_binding(sits_accelerator, sits_platform, sits_inventory, sits_thresholds, sits_at_once, sits_record):
    """Also without an accelerator: the host's own measurements are bound too."""
    if sits_accelerator is None:
        found = acquire_numa_binding(sits_platform, sits_inventory, None)
    else:  # every accelerator's binding tried at once, each in a thread of its own
        found = sits_at_once(sits_accelerator, lambda acc: acquire_numa_binding(sits_platform, sits_inventory, acc))
    sits_record(*[check_numa_bind(ev, sits_thresholds, subject) for ev, subject in found])


@pytest.mark.sits_requirement("LINK-NVLINK-MESH")
def test_peer_link_mesh(sits_inventory, sits_expected, sits_thresholds, sits_record):
    sits_record(check_peer_mesh(acquire_peer_mesh(sits_inventory, sits_expected), sits_thresholds, "accelerators"))
