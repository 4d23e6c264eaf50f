"""Topology: TOPO-PCIE-DIRECT, TOPO-PCIE-LINK, TOPO-NUMA-BIND, LINK-NVLINK-MESH."""

import pytest

from pytest_sits.checks.topology import check_numa_bind, check_pcie_direct, check_pcie_link, check_peer_mesh
from pytest_sits.conditions.topology import (acquire_link_under_load, acquire_numa_binding, acquire_pcie_path,
                                             acquire_peer_mesh)


@pytest.mark.sits_requirement("TOPO-PCIE-DIRECT")
def test_pcie_direct_attach(sits_device, sits_inventory, sits_thresholds, sits_record):
    sits_record(check_pcie_direct(acquire_pcie_path(sits_inventory, sits_device), sits_thresholds, sits_device["bdf"]))


@pytest.mark.sits_requirement("TOPO-PCIE-LINK")
def test_pcie_link_under_load(sits_device, sits_platform, sits_inventory, sits_thresholds, sits_record):
    sits_record(check_pcie_link(acquire_link_under_load(sits_platform, sits_inventory, sits_device,
                                                        sits_thresholds["samples"]), sits_thresholds,
                                sits_device["bdf"]))


@pytest.mark.sits_requirement("TOPO-NUMA-BIND")
def test_numa_binding(sits_accelerator, sits_platform, sits_inventory, sits_thresholds, sits_record):
    """Also without an accelerator: the host's own measurements are bound too."""
    sits_record(*[check_numa_bind(ev, sits_thresholds, subject)
                  for ev, subject in acquire_numa_binding(sits_platform, sits_inventory, sits_accelerator)])


@pytest.mark.sits_requirement("LINK-NVLINK-MESH")
def test_peer_link_mesh(sits_inventory, sits_expected, sits_thresholds, sits_record):
    sits_record(check_peer_mesh(acquire_peer_mesh(sits_inventory, sits_expected), sits_thresholds, "accelerators"))
