"""Topology: TOPO-PCIE-DIRECT, TOPO-PCIE-LINK, TOPO-NUMA-BIND, LINK-NVLINK-MESH."""

import pytest

from pytest_sits.checks.inventory import expected_vs_found
from pytest_sits.checks.topology import check_numa_bind, check_pcie_direct, check_pcie_link, check_peer_mesh
from pytest_sits.probes.load import LoadUnavailable
from pytest_sits.probes.topology import link_capability, pcie_path, peer_mesh, sample_link
from pytest_sits.verdict import SKIP, Verdict


@pytest.fixture(scope="session")
def pci_index(sits_inventory):
    return {d["bdf"]: d for d in sits_inventory["pci"]}


def _absent(req, sits_expected, inventory):
    return Verdict(req, SKIP, expected_vs_found(sits_expected, inventory["accelerators"]), subject="accelerators")


@pytest.mark.sits_requirement("TOPO-PCIE-DIRECT")
def test_pcie_direct_attach(sits_accelerator, pci_index, sits_profile, sits_expected, sits_inventory, sits_record):
    if sits_accelerator is None:
        return sits_record(_absent("TOPO-PCIE-DIRECT", sits_expected, sits_inventory))
    path = pcie_path(pci_index[sits_accelerator["bdf"]], pci_index)
    sits_record(check_pcie_direct(path, sits_profile.thresholds("TOPO-PCIE-DIRECT")))


@pytest.mark.sits_requirement("TOPO-PCIE-LINK")
def test_pcie_link_under_load(sits_accelerator, pci_index, sits_platform, sits_profile, sits_expected,
                              sits_inventory, sits_record):
    if sits_accelerator is None:
        return sits_record(_absent("TOPO-PCIE-LINK", sits_expected, sits_inventory))
    th = sits_profile.thresholds("TOPO-PCIE-LINK")
    dev = pci_index[sits_accelerator["bdf"]]
    evidence = {"device": dev["bdf"], "capability": link_capability(dev, pci_index)}
    try:
        load = sits_platform.accelerator_load(sits_accelerator)
    except LoadUnavailable as exc:
        evidence["load"] = {"kind": None, "reason": str(exc)}
        evidence["samples"] = sample_link(sits_platform.root, dev, th["samples"], sits_platform.link_sample_interval_s,
                                         loaded=False)
    else:
        with load:
            evidence["samples"] = sample_link(sits_platform.root, dev, th["samples"], sits_platform.link_sample_interval_s,
                                             loaded=True)
        evidence["load"] = load.evidence()
    mgmt = sits_accelerator.get("management") or {}
    evidence["nvml_link"] = {k: mgmt.get(k) for k in ("pcie_current_gen", "pcie_current_width", "pcie_max_gen",
                                                      "pcie_max_width", "pcie_gpu_max_gen")} if mgmt else None
    sits_record(check_pcie_link(evidence, th))


@pytest.mark.sits_requirement("TOPO-NUMA-BIND")
def test_numa_binding(sits_accelerator, sits_platform, sits_profile, sits_inventory, sits_record):
    th = sits_profile.thresholds("TOPO-NUMA-BIND")
    nodes = sits_inventory["numa"]
    if sits_accelerator is None:
        verdicts = []
        for n in nodes:
            with sits_platform.numa_binding(n["node"], n["cpus"]) as binding:
                verdicts.append(check_numa_bind(None, nodes, dict(binding), th))
        return sits_record(*verdicts)
    node = sits_accelerator.get("numa_node")
    target = node if node is not None and node >= 0 else (nodes[0]["node"] if len(nodes) == 1 else None)
    if target is None:
        return sits_record(check_numa_bind(sits_accelerator_view(sits_accelerator), nodes, None, th))
    cpus = next(n["cpus"] for n in nodes if n["node"] == target)
    with sits_platform.numa_binding(target, cpus) as binding:
        sits_record(check_numa_bind(sits_accelerator_view(sits_accelerator), nodes, dict(binding), th))


def sits_accelerator_view(acc):
    return {k: acc.get(k) for k in ("bdf", "pci_id", "numa_node")}


@pytest.mark.sits_requirement("LINK-NVLINK-MESH")
def test_peer_link_mesh(sits_inventory, sits_profile, sits_expected, sits_record):
    accs = [a for a in sits_inventory["accelerators"] if a["pci_id"] in sits_expected["pci_ids"]]
    mesh = peer_mesh(accs, sits_inventory["management"]["nvml"])
    if accs and not accs[0]["pci_id"].startswith("10de:"):
        mesh = {"source": None, "devices": [], "p2p_nvlink": None,
                "reason": f"peer links of {accs[0]['vendor']} devices need amdsmi/vendor tools, not read by this "
                          "version"}
    link_type = sits_profile.hardware.get("peer_link", {}).get("type")
    sits_record(check_peer_mesh(mesh, sits_profile.thresholds("LINK-NVLINK-MESH"), len(accs), link_type))
