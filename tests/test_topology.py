"""Topology checks on synthetic sysfs trees (config space included), fake NVML, and this machine's own sysfs."""

import os

import pytest

from pytest_sits.checks.topology import check_numa_bind, check_pcie_direct, check_pcie_link, check_peer_mesh
from pytest_sits.conditions import numa
from pytest_sits.platforms import from_spec
from pytest_sits.platforms.live import LivePlatform
from pytest_sits.platforms.sim.tree import add_pci_function
from pytest_sits.probes import sysfs
from pytest_sits.probes.topology import link_capability, pcie_path, peer_mesh, sample_link
from pytest_sits.verdict import FAIL, INCONCLUSIVE, PASS, SKIP, WARN

BRIDGE = 0x060400
GPU = 0x030200
TH_DIRECT = {"max_switch_ports": 0}
TH_LINK = {"samples": 3, "require_load": True}
TH_NUMA = {"require_known_node": True}


def tree(tmp_path, switches=0, dev_gen=4, dev_width=16, slot_gen=4, slot_width=16, cur_gen=None, cur_width=None,
         config_size=4096, numa_node=0):
    """A root port, `switches` levels of switch (upstream + downstream port), then a GPU."""
    root = tmp_path / "fs"
    parent = add_pci_function(root, "sys/devices/pci0000:00", "0000:00:01.0", 0x8086, 0x1BBE, BRIDGE, 4,
                              slot_gen, slot_width, slot_gen, slot_width, numa_node, config_size=config_size)
    bus = 1
    for _ in range(switches):
        parent = add_pci_function(root, parent, f"0000:{bus:02x}:00.0", 0x1000, 0xC030, BRIDGE, 5, 4, 16, 4, 16,
                                  numa_node, config_size=config_size)
        bus += 1
        parent = add_pci_function(root, parent, f"0000:{bus:02x}:00.0", 0x1000, 0xC030, BRIDGE, 6, slot_gen,
                                  slot_width, slot_gen, slot_width, numa_node, config_size=config_size)
        bus += 1
    add_pci_function(root, parent, f"0000:{bus:02x}:00.0", 0x10DE, 0x2330, GPU, 0, dev_gen, dev_width,
                     cur_gen or dev_gen, cur_width or dev_width, numa_node, "nvidia", config_size=config_size)
    inv = sysfs.collect(root)
    index = {d["bdf"]: d for d in inv["pci"]}
    gpu = next(d for d in inv["pci"] if d["pci_id"] == "10de:2330")
    return root, gpu, index


def test_direct_attach_passes(tmp_path):
    _, gpu, index = tree(tmp_path)
    v = check_pcie_direct({"path": pcie_path(gpu, index)}, TH_DIRECT)
    assert v.status == PASS and "exact" in v.method
    assert v.evidence["path"]["hops"][0]["port_type"] == "root_port"


def test_one_switch_fails_and_names_the_path(tmp_path):
    _, gpu, index = tree(tmp_path, switches=1)
    v = check_pcie_direct({"path": pcie_path(gpu, index)}, TH_DIRECT)
    assert v.status == FAIL and v.measured == 2
    assert ("0000:03:00.0 <- 0000:02:00.0 (switch_downstream) <- 0000:01:00.0 (switch_upstream) <- "
            "0000:00:01.0 (root_port)") in v.reason
    assert "waive" in v.remediation


def test_two_level_switch_tree_fails(tmp_path):
    _, gpu, index = tree(tmp_path, switches=2)
    v = check_pcie_direct({"path": pcie_path(gpu, index)}, TH_DIRECT)
    assert v.status == FAIL and v.measured == 4


def test_switch_within_profile_allowance_passes(tmp_path):
    _, gpu, index = tree(tmp_path, switches=1)
    assert check_pcie_direct({"path": pcie_path(gpu, index)}, {"max_switch_ports": 2}).status == PASS


def test_without_root_the_switch_is_inferred(tmp_path):
    _, gpu, index = tree(tmp_path, switches=1, config_size=64)
    path = pcie_path(gpu, index)
    assert path["method"] == "inferred"
    v = check_pcie_direct({"path": path}, TH_DIRECT)
    assert v.status == FAIL and "inferred" in v.method
    _, gpu, index = tree(tmp_path / "b", switches=0, config_size=64)
    v = check_pcie_direct({"path": pcie_path(gpu, index)}, TH_DIRECT)
    assert v.status == PASS and "inferred" in v.method


def link_evidence(root, gpu, index, loaded=True, reason=None):
    return {"device": gpu["bdf"], "capability": link_capability(gpu, index),
            "samples": sample_link(root, gpu, 3, 0, loaded=loaded), "load": {"reason": reason}}


def test_gen4_x16_trained_at_x8_under_load_fails(tmp_path):
    root, gpu, index = tree(tmp_path, cur_width=8)
    v = check_pcie_link(link_evidence(root, gpu, index), TH_LINK)
    assert v.status == FAIL and "Gen4 x8" in v.reason and "width x8 < x16" in v.reason
    assert f"lspci -vv -s {gpu['bdf']}" in v.remediation


def test_full_link_under_load_passes(tmp_path):
    root, gpu, index = tree(tmp_path, dev_gen=5, slot_gen=5)
    v = check_pcie_link(link_evidence(root, gpu, index), TH_LINK)
    assert v.status == PASS and v.measured == "Gen5 x16"


def test_gen4_card_in_gen5_slot_is_not_degraded(tmp_path):
    root, gpu, index = tree(tmp_path, dev_gen=4, slot_gen=5)
    ev = link_evidence(root, gpu, index)
    assert ev["capability"]["achievable_gen"] == 4
    assert check_pcie_link(ev, TH_LINK).status == PASS


def test_gen5_card_in_gen4_slot_is_not_degraded(tmp_path):
    root, gpu, index = tree(tmp_path, dev_gen=5, slot_gen=4, cur_gen=4)
    assert check_pcie_link(link_evidence(root, gpu, index), TH_LINK).status == PASS


def test_idle_reading_alone_is_never_a_fail(tmp_path):
    root, gpu, index = tree(tmp_path, dev_gen=5, slot_gen=5, cur_gen=1)
    v = check_pcie_link(link_evidence(root, gpu, index, loaded=False, reason="torch missing"), TH_LINK)
    assert v.status == INCONCLUSIVE and "idle" in v.reason and "torch missing" in v.reason
    # the same reading under load is a failure
    v = check_pcie_link(link_evidence(root, gpu, index, loaded=True), TH_LINK)
    assert v.status == FAIL
    # an idle reading already at the full link is proof enough
    root, gpu, index = tree(tmp_path / "b", dev_gen=5, slot_gen=5)
    assert check_pcie_link(link_evidence(root, gpu, index, loaded=False), TH_LINK).status == PASS


def test_sysfs_link_strings_of_older_kernels(tmp_path):
    root, gpu, index = tree(tmp_path, dev_gen=4, slot_gen=4)
    (root / gpu["sysfs_path"].lstrip("/") / "current_link_speed").write_text("16 GT/s\n")
    assert check_pcie_link(link_evidence(root, gpu, index), TH_LINK).status == PASS


NODES2 = [{"node": 0, "cpulist": "0-31", "cpus": list(range(32))},
          {"node": 1, "cpulist": "32-63", "cpus": list(range(32, 64))}]


def bind_evidence(device, nodes, binding):
    """TOPO-NUMA-BIND's evidence: the device, the host's nodes (node, cpulist) and the binding read back."""
    return {"device": device, "host_nodes": [{"node": n["node"], "cpulist": n["cpulist"]} for n in nodes],
            "binding": binding}


def test_numa_unknown_on_two_node_host_fails():
    v = check_numa_bind(bind_evidence({"bdf": "0000:17:00.0", "numa_node": -1}, NODES2, None), TH_NUMA)
    assert v.status == FAIL and "NUMA node -1 on a 2-node host" in v.reason


def test_numa_binding_applied_passes_and_refused_fails():
    ok = {"node": 1, "applied": True, "cpus_in_force": list(range(32, 64)),
          "memory_policy_in_force": {"mode": "bind", "nodes": [1]}}
    v = check_numa_bind(bind_evidence({"bdf": "0000:97:00.0", "numa_node": 1}, NODES2, ok), TH_NUMA)
    assert v.status == PASS and "on node 1" in v.reason
    refused = dict(ok, applied=False, errors=["set_mempolicy(bind, [1]): Operation not permitted"])
    v = check_numa_bind(bind_evidence({"bdf": "0000:97:00.0", "numa_node": 1}, NODES2, refused), TH_NUMA)
    assert v.status == FAIL and "Operation not permitted" in v.reason
    snap = {"node": 1, "applied": None, "reason": "a snapshot cannot bind"}
    v = check_numa_bind(bind_evidence({"bdf": "0000:97:00.0", "numa_node": 1}, NODES2, snap), TH_NUMA)
    assert v.status == INCONCLUSIVE


def test_numa_binding_for_real_on_this_machine():
    nodes = LivePlatform().inventory()["numa"]
    for n in nodes:
        with numa.bind(n["node"], n["cpus"]) as binding:
            assert os.sched_getaffinity(0) == set(n["cpus"])
            v = check_numa_bind(bind_evidence(None, nodes, dict(binding)), TH_NUMA)
        assert v.status == PASS, v.reason
        assert "memory policy bind" in v.reason
    assert numa.get_policy()["mode"] == "default"  # restored


def test_numa_binding_to_a_missing_node_fails_for_real():
    nodes = LivePlatform().inventory()["numa"]
    missing = max(n["node"] for n in nodes) + 7
    with numa.bind(missing, [0]) as binding:
        v = check_numa_bind(bind_evidence(None, nodes, dict(binding)), TH_NUMA)
    assert v.status == FAIL and "Invalid argument" in v.reason


def test_full_nvlink_mesh_passes_and_partial_fails():
    full = from_spec("sim:h100").inventory()
    mesh = peer_mesh(full["accelerators"], full["management"]["nvml"])
    v = check_peer_mesh({"mesh": mesh, "expected_devices": 8}, {"required": True})
    assert v.status == PASS and v.measured == "28/28 pairs"
    part = from_spec("sim:h100+nvlink-partial").inventory()
    mesh = peer_mesh(part["accelerators"], part["management"]["nvml"])
    v = check_peer_mesh({"mesh": mesh, "expected_devices": 8}, {"required": True})
    assert v.status == FAIL and v.measured == "26/28 pairs" and "0000:11:00.0<->0000:21:00.0" in v.reason
    assert check_peer_mesh({"mesh": mesh, "expected_devices": 8}, {"required": False}).status == WARN


def test_mesh_skip_and_inconclusive():
    assert check_peer_mesh({"mesh": {"devices": []}, "expected_devices": 1}, {"required": True}).status == SKIP
    nonvml = from_spec("sim:h100+no-nvml").inventory()
    mesh = peer_mesh(nonvml["accelerators"], nonvml["management"]["nvml"])
    assert check_peer_mesh({"mesh": mesh, "expected_devices": 8}, {"required": True}).status == INCONCLUSIVE


def test_pcie_path_checks_on_this_machines_sysfs():
    """This machine has PCI functions (no GPU): run the path probe and the check on each, for real."""
    inv = LivePlatform().inventory()
    index = {d["bdf"]: d for d in inv["pci"]}
    assert index
    for dev in inv["pci"]:
        path = pcie_path(dev, index)
        v = check_pcie_direct({"path": path}, TH_DIRECT)
        assert v.status in (PASS, FAIL, INCONCLUSIVE)
        # the verdict agrees with the evidence it carries
        n_switch = sum(1 for h in path["hops"] if "switch" in h["port_type"])
        assert (v.status == FAIL) == (n_switch > 0)
    if os.geteuid() == 0:
        assert all(d["config"]["bytes"] >= 256 for d in inv["pci"])


@pytest.mark.slow
def test_topology_end_to_end_on_sim(pytester, conformance_args, report_of):
    pytester.runpytest(*conformance_args, "--sits-platform=sim:h100+switch,link-degraded,nvlink-partial")
    verdicts = report_of(pytester.path)["verdicts"]
    by = {}
    for v in verdicts:
        by.setdefault(v["requirement"], []).append(v["status"])
    assert by["TOPO-PCIE-DIRECT"] == ["FAIL"] * 8
    assert sorted(by["TOPO-PCIE-LINK"]) == ["FAIL"] + ["PASS"] * 7
    assert by["LINK-NVLINK-MESH"] == ["FAIL"]
    pytester.runpytest(*conformance_args, "--sits-platform=sim:h100+link-idle")
    statuses = {v["status"] for v in report_of(pytester.path)["verdicts"] if v["requirement"] == "TOPO-PCIE-LINK"}
    assert statuses == {"INCONCLUSIVE"}


def test_topology_on_this_host_without_accelerators(pytester, conformance_args, report_of):
    result = pytester.runpytest(*conformance_args, "-m", "TOPO-NUMA-BIND or TOPO-PCIE-DIRECT")
    outcomes = result.parseoutcomes()
    assert outcomes["passed"] == 1 and outcomes["skipped"] == 1 and "failed" not in outcomes
    v = next(v for v in report_of(pytester.path)["verdicts"] if v["requirement"] == "TOPO-NUMA-BIND")
    assert v["status"] == "PASS" and v["evidence"]["binding"]["memory_policy_in_force"]["mode"] == "bind"


def test_a_bridged_pcie_card_gets_only_the_links_its_profile_claims():
    """A100 80GB PCIe cards carry NVLink bridges between two cards, not a mesh: the simulated machine links the
    pairs only, LINK-NVLINK-MESH says which pairs have no link, and edges between unbridged cards go over PCIe."""
    from pytest_sits.checks.topology import check_peer_mesh
    from pytest_sits.conditions.topology import acquire_peer_mesh
    from pytest_sits.platforms import from_spec
    from pytest_sits.platforms.sim.crg import SimCrg
    from pytest_sits.verdict import WARN

    plat = from_spec("sim:a100")
    inv = plat.inventory()
    p2p = inv["management"]["nvml"]["p2p_nvlink"]
    assert p2p[0][1] and p2p[2][3] and not p2p[0][2] and not p2p[1][7]
    v = check_peer_mesh(acquire_peer_mesh(inv, plat.profile.expected()),
                        plat.profile.check_thresholds("LINK-NVLINK-MESH"), "accelerators")
    assert v.status == WARN and v.measured == "4/28 pairs"
    accs = inv["accelerators"]
    th_edge = plat.profile.check_thresholds("CRG-EDGE")
    edges = {s: ev["gbps_median"] for ev, s in SimCrg(plat.profile, []).edges(accs, th_edge, None)}
    bridged, unbridged = edges[f"{accs[0]['bdf']}<->{accs[1]['bdf']}"], edges[f"{accs[0]['bdf']}<->{accs[2]['bdf']}"]
    assert bridged > 200 > unbridged
    mesh = from_spec("sim:h100").inventory()["management"]["nvml"]["p2p_nvlink"]
    assert all(mesh[i][j] for i in range(8) for j in range(8) if i != j)
