"""Topology evidence: the PCIe path of each accelerator, its link under load, NUMA, peer links."""

from __future__ import annotations

import time
from typing import Any, Dict, List

from .pcie import SWITCH_TYPES, gen_of, parse_sysfs_speed
from .sysfs import read_text


def pcie_path(dev: Dict[str, Any], pci_index: Dict[str, Dict[str, Any]]) -> Dict[str, Any]:
    """The chain from the device up to its root port, each hop with its port type and link.

    ``method`` is ``exact`` when every hop's type was read from its PCI Express
    capability, ``inferred`` when some config space was unreadable (no root:
    64 bytes only) and the type was inferred from class codes and position.
    """
    hops = []
    method = "exact"
    chain = dev.get("upstream", [])
    for pos, bdf in enumerate(chain):
        hop = pci_index.get(bdf, {"bdf": bdf, "class": None, "config": {"pcie": None, "reason": "not in sysfs"},
                                  "link": {}})
        cap = (hop.get("config") or {}).get("pcie")
        topmost = pos == len(chain) - 1
        if cap is not None:
            ptype, how = cap["port_type"], "config"
        else:
            method = "inferred"
            is_bridge = (hop.get("class") or "").startswith("0x0604")
            if topmost:
                ptype = "root_port" if is_bridge else "unknown"
            else:
                ptype = "switch_port_inferred" if is_bridge else "unknown"
            how = f"inferred ({(hop.get('config') or {}).get('reason')})"
        hops.append({"bdf": bdf, "class": hop.get("class"), "pci_id": hop.get("pci_id"), "port_type": ptype,
                     "type_source": how, "link": hop.get("link", {})})
    own = (dev.get("config") or {}).get("pcie")
    return {"device": dev["bdf"], "pci_id": dev.get("pci_id"), "hops": hops, "method": method,
            # the device's own port type: an endpoint with no port above it is a virtual machine's view
            "device_port_type": own["port_type"] if own else None,
            "note": None if chain else "no bridge above the device: it sits on a root bus "
                                       "(root-complex integrated, or a virtual machine's passthrough)"}


def switch_ports(path: Dict[str, Any]) -> List[Dict[str, Any]]:
    return [h for h in path["hops"] if h["port_type"] in SWITCH_TYPES or h["port_type"] == "switch_port_inferred"
            or h["port_type"] in ("pcie_to_pci_bridge", "pci_to_pcie_bridge")]


def read_link(root: Any, sysfs_path: str) -> Dict[str, Any]:
    rel = sysfs_path.lstrip("/")
    speed_txt = read_text(root, f"{rel}/current_link_speed")
    width_txt = read_text(root, f"{rel}/current_link_width")
    speed = parse_sysfs_speed(speed_txt)
    try:
        width = int(width_txt) if width_txt is not None else None
    except ValueError:
        width = None
    return {"t": time.time(), "speed_gts": speed, "gen": gen_of(speed), "width": width,
            "raw": [speed_txt, width_txt]}


def link_capability(dev: Dict[str, Any], pci_index: Dict[str, Dict[str, Any]]) -> Dict[str, Any]:
    """What the link can reach: the minimum of the device's and the slot's (port above) maximum."""
    dl = dev.get("link", {})
    slot = pci_index.get(dev["upstream"][0], {}).get("link", {}) if dev.get("upstream") else {}
    speeds = [s for s in (dl.get("max_speed_gts"), slot.get("max_speed_gts")) if s]
    widths = [w for w in (dl.get("max_width"), slot.get("max_width")) if w]
    achievable_speed = min(speeds) if speeds else None
    return {"device_max_speed_gts": dl.get("max_speed_gts"), "device_max_width": dl.get("max_width"),
            "slot": dev["upstream"][0] if dev.get("upstream") else None,
            "slot_max_speed_gts": slot.get("max_speed_gts"), "slot_max_width": slot.get("max_width"),
            "achievable_speed_gts": achievable_speed, "achievable_gen": gen_of(achievable_speed),
            "achievable_width": min(widths) if widths else None}


def sample_link(root: Any, dev: Dict[str, Any], samples: int, interval_s: float, loaded: bool) -> List[Dict[str, Any]]:
    out = []
    for i in range(samples):
        rec = read_link(root, dev["sysfs_path"])
        rec["under_load"] = loaded
        out.append(rec)
        if i + 1 < samples and interval_s > 0:
            time.sleep(interval_s)
    return out


def peer_mesh(accelerators: List[Dict[str, Any]], nvml: Dict[str, Any]) -> Dict[str, Any]:
    """NVLink evidence per device and the P2P matrix between the accelerators NVML sees."""
    devs = [a for a in accelerators if a.get("management")]
    index_of = {a["management"]["index"]: a["bdf"] for a in devs}
    matrix = nvml.get("p2p_nvlink")
    per_device = []
    for a in devs:
        links = a["management"].get("nvlinks") or []
        per_device.append({"bdf": a["bdf"], "index": a["management"]["index"],
                           "links_active": sum(1 for link in links if link.get("active")),
                           "links_total": len(links),
                           "versions": sorted({link.get("version") for link in links if link.get("version")}),
                           "remote_types": sorted({str(link.get("remote_type")) for link in links
                                                   if link.get("remote_type") is not None})})
    return {"source": "nvml" if nvml.get("available") else None, "devices": per_device, "p2p_nvlink": matrix,
            "index_to_bdf": {str(k): v for k, v in index_of.items()}, "reason": nvml.get("reason")}
