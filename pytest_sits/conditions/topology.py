"""Acquire topology evidence: PCIe paths, the link sampled under load, NUMA binding, the peer-link mesh."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from ..probes.topology import link_capability, pcie_path, peer_mesh, sample_link
from .inventory import files_read, matching, submitted
from .loads import LoadUnavailable


def pci_index(inventory: Dict[str, Any]) -> Dict[str, Dict[str, Any]]:
    return {d["bdf"]: d for d in inventory["pci"]}


def acquire_pcie_path(inventory: Dict[str, Any], acc: Dict[str, Any]) -> Dict[str, Any]:
    sub = submitted(inventory)
    if sub is not None:  # the path as the submitted lspci -tv / -PP or topo -m shows it
        path = (sub.get("paths") or {}).get(acc["bdf"])
        if path is not None:
            return {"path": path}
        why = (sub.get("path_reasons") or {}).get(acc["bdf"])
        return {"unavailable": f"{acc['bdf']}: " + (why or "no submitted text shows its PCIe path (submit `lspci -tv` "
                                                           f"or `lspci -PP`; read: {', '.join(files_read(inventory)) or 'none'})")}
    index = pci_index(inventory)
    return {"path": pcie_path(index[acc["bdf"]], index)}


def acquire_link_under_load(platform: Any, inventory: Dict[str, Any], acc: Dict[str, Any],
                            samples: int) -> Dict[str, Any]:
    """Sample the link while a load runs on the device (or idle, saying why no load could run).  Submitted
    evidence: the readings of its texts (``lspci -vv`` LnkSta, ``nvidia-smi -q`` link, ``amd-smi metric``)."""
    sub = submitted(inventory)
    if sub is not None:
        ev = (sub.get("links") or {}).get(acc["bdf"])
        if ev is not None:
            return ev
        return {"unavailable": f"{acc['bdf']}: no submitted text shows its PCIe link (`lspci -vv`, the PCI section "
                               f"of `nvidia-smi -q`, `amd-smi static` and `metric`; read: "
                               f"{', '.join(files_read(inventory)) or 'none'})"}
    index = pci_index(inventory)
    dev = index[acc["bdf"]]
    evidence: Dict[str, Any] = {"device": dev["bdf"], "capability": link_capability(dev, index)}
    interval = platform.link_sample_interval_s
    try:
        load = platform.accelerator_load(acc)
    except LoadUnavailable as exc:
        evidence["load"] = {"kind": None, "reason": str(exc)}
        evidence["samples"] = sample_link(platform.root, dev, samples, interval, loaded=False)
    else:
        with load:
            evidence["samples"] = sample_link(platform.root, dev, samples, interval, loaded=True)
        evidence["load"] = load.evidence()
    mgmt = acc.get("management") or {}
    evidence["nvml_link"] = {k: mgmt.get(k) for k in ("pcie_current_gen", "pcie_current_width", "pcie_max_gen",
                                                      "pcie_max_width", "pcie_gpu_max_gen")} if mgmt else None
    return evidence


def _nodes_view(nodes: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    return [{"node": n["node"], "cpulist": n["cpulist"]} for n in nodes]


def acquire_numa_binding(platform: Any, inventory: Dict[str, Any],
                         acc: Optional[Dict[str, Any]]) -> List[Tuple[Dict[str, Any], str]]:
    """Bind to the accelerator's node (or, with no accelerator, to every node) and read the binding back.

    Returns (evidence, subject) pairs: one per accelerator, or one per node of an accelerator-less host."""
    nodes = inventory["numa"]
    if submitted(inventory) is not None:  # texts can show a device's node, never a binding
        node = acc.get("numa_node") if acc is not None else None
        where = (f"the texts put {acc['bdf']} on NUMA node {node}" if node is not None and acc is not None else
                 (f"no submitted text gives the NUMA node of {acc['bdf']}" if acc is not None else
                  f"the texts show NUMA node(s) {', '.join(str(n['node']) for n in nodes) or 'none'}"))
        return [({"unavailable": f"{where}; a binding of load and memory to it cannot be tried on submitted texts"},
                 acc["bdf"] if acc is not None else "host")]
    if not nodes:
        return [({"absent": "the host reports no NUMA node (/sys/devices/system/node is missing): nothing to "
                            "bind to"}, "host")]
    if acc is None:
        out = []
        for n in nodes:
            with platform.numa_binding(n["node"], n["cpus"]) as binding:
                out.append((_bound(None, nodes, binding), "host"))
        return out
    device = {k: acc.get(k) for k in ("bdf", "pci_id", "numa_node")}
    node = acc.get("numa_node")
    target = node if node is not None and node >= 0 else (nodes[0]["node"] if len(nodes) == 1 else None)
    if target is None:
        return [({"device": device, "host_nodes": _nodes_view(nodes), "binding": None}, acc["bdf"])]
    cpus = next((n["cpus"] for n in nodes if n["node"] == target), None)
    if cpus is None:
        return [({"error": f"{acc['bdf']} reports NUMA node {target}, which the host does not list "
                           f"({', '.join(str(n['node']) for n in nodes)})"}, acc["bdf"])]
    with platform.numa_binding(target, cpus) as binding:
        return [(_bound(device, nodes, binding), acc["bdf"])]


def _bound(device: Optional[Dict[str, Any]], nodes: List[Dict[str, Any]], binding: Dict[str, Any]) -> Dict[str, Any]:
    """The evidence of one binding read back; a platform that binds nothing (a snapshot) has not measured it."""
    if binding.get("applied") is None:
        return {"unavailable": binding.get("reason") or "this platform cannot bind processes"}
    return {"device": device, "host_nodes": _nodes_view(nodes), "binding": dict(binding)}


def acquire_peer_mesh(inventory: Dict[str, Any], expected: Dict[str, Any]) -> Dict[str, Any]:
    sub = submitted(inventory)
    if sub is not None:
        return _submitted_mesh(inventory, sub, expected)
    accs = matching(inventory, expected)
    mesh = peer_mesh(accs, inventory["management"]["nvml"])
    if accs and accs[0]["pci_id"].startswith("1002:"):
        mesh = xgmi_mesh(accs, inventory["management"].get("amdsmi") or {})
    elif accs and not accs[0]["pci_id"].startswith("10de:"):
        mesh = {"source": None, "devices": [], "p2p_nvlink": None,
                "reason": f"peer links of {accs[0]['vendor']} devices are read by no management library in this "
                          "version (NVML and amdsmi only)"}
    return {"mesh": mesh, "expected_devices": len(accs)}


def xgmi_mesh(accs: List[Dict[str, Any]], amd: Dict[str, Any]) -> Dict[str, Any]:
    """The peer-link evidence of AMD devices: amdsmi's XGMI matrix (one hop between each pair), in the shape of
    NVML's (``p2p_nvlink`` holds the matrix the check reads; ``link_name`` says XGMI)."""
    matrix = amd.get("p2p_xgmi")
    devs = [a for a in accs if a.get("management")]
    if not amd.get("available") or matrix is None:
        return {"source": None, "devices": [], "p2p_nvlink": None, "link_name": "XGMI",
                "reason": amd.get("reason") or "amdsmi gave no XGMI link matrix"}
    per_device = []
    for a in devs:
        i = a["management"]["index"]
        row = matrix[i] if i < len(matrix) else []
        per_device.append({"bdf": a["bdf"], "index": i, "links_active": sum(1 for x in row if x),
                           "links_total": sum(1 for x in row if x is not None), "versions": [], "remote_types": []})
    return {"source": str(amd.get("source") or "amdsmi"), "devices": per_device, "p2p_nvlink": matrix,
            "index_to_bdf": {str(a["management"]["index"]): a["bdf"] for a in devs}, "reason": None,
            "link_name": "XGMI"}


def _submitted_mesh(inventory: Dict[str, Any], sub: Dict[str, Any], expected: Dict[str, Any]) -> Dict[str, Any]:
    """The peer-link matrix of a submitted ``nvidia-smi topo -m`` or ``rocm-smi --showtopo``."""
    declared = [d.get("count") for d in (sub.get("declared") or {}).values() if d.get("count") is not None]
    count = max(declared + [len(inventory["accelerators"])])
    mesh = sub.get("mesh")
    if mesh is None:
        if count < 2:
            return {"absent": f"fewer than 2 accelerators in the submitted texts ({count})"}
        return {"unavailable": "no nvidia-smi topo -m or rocm-smi --showtopo among the submitted files: the peer "
                               "links are not in the evidence"}
    accs = matching(inventory, expected)
    return {"mesh": dict(mesh, source=f"{mesh.get('source')} ({sub.get('mesh_file')})"),
            "expected_devices": max(len(accs), len(mesh.get("devices") or []))}
