"""The simulated machine's ``/proc`` + ``/sys`` tree and NVML facts, built from a profile and its faults."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

from ...probes.pcie import build_config
from .health import sim_health

#: The faults this module implements, with what each does (``faults.FAULTS`` gathers every module's).
FAULTS = {
    "missing-device": "one accelerator fewer than the profile expects",
    "wrong-model": "the last accelerator has another PCI device ID",
    "small-memory": "every accelerator reports half of its datasheet memory",
    "no-nvml": "NVML is not available (driver not loaded)",
    "switch": "a PCIe switch (upstream + downstream port) between each accelerator and its root port",
    "switch2": "two levels of PCIe switch between each accelerator and its root port",
    "link-degraded": "the first accelerator trained at one generation lower and half width, under load",
    "link-idle": "every accelerator link reads 2.5 GT/s (idle power saving)",
    "numa-unknown": "accelerators report NUMA node -1 on a two-node host",
    "nvlink-partial": "two accelerator pairs have no NVLink P2P path",
    "old-driver": "NVIDIA driver 535.104.05 with CUDA 12.2",
    "hostile-name": "accelerator names contain HTML (<script>) to test escaping",
}



def _write(path: Path, content: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(str(content) + "\n", encoding="utf-8")


def _speed_text(gen: int) -> str:
    return {1: "2.5 GT/s PCIe", 2: "5.0 GT/s PCIe", 3: "8.0 GT/s PCIe", 4: "16.0 GT/s PCIe",
            5: "32.0 GT/s PCIe", 6: "64.0 GT/s PCIe"}[gen]


def add_pci_function(root: Path, parent_rel: str, bdf: str, vendor: int, device: int, class_code: int,
                  port_type: Optional[int], max_gen: int, max_width: int, cur_gen: int, cur_width: int,
                  numa: int, driver: Optional[str] = None, config_size: int = 4096) -> str:
    """Write one PCI function below ``parent_rel`` (a sysfs tree under ``root``); return its path."""
    rel = f"{parent_rel}/{bdf}"
    d = root / rel
    _write(d / "vendor", f"0x{vendor:04x}")
    _write(d / "device", f"0x{device:04x}")
    _write(d / "subsystem_vendor", f"0x{vendor:04x}")
    _write(d / "subsystem_device", "0x0000")
    _write(d / "class", f"0x{class_code:06x}")
    _write(d / "numa_node", numa)
    _write(d / "current_link_speed", _speed_text(cur_gen))
    _write(d / "current_link_width", cur_width)
    _write(d / "max_link_speed", _speed_text(max_gen))
    _write(d / "max_link_width", max_width)
    _write(d / "config", build_config(vendor, device, class_code, port_type, max_gen, max_width,
                                      cur_gen, cur_width, size=config_size))
    if driver:
        os.symlink(f"../../../../bus/pci/drivers/{driver}", d / "driver")
    link = root / "sys/bus/pci/devices" / bdf
    link.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(os.path.relpath(d, link.parent), link)
    return rel


def _sim_amdsmi(profile: Any, faults: List[str], accel: List[Any], gen: int, width: int) -> Dict[str, Any]:
    """The amdsmi facts of simulated AMD devices, in the live probe's shape (:mod:`pytest_sits.probes.amd`):
    memory, ECC and bad pages, power cap, replay counter, throttle status, firmware and the XGMI matrix.  The
    health fields (and their faults) come in through the same ``finish`` as NVML's; what only NVIDIA has is
    dropped there (:data:`.health.NVIDIA_ONLY`)."""
    hw, ident = profile.hardware, profile.identity
    mem = int(float(hw.get("memory_gb", 0)) * 1024 ** 3 * 0.995)
    if "small-memory" in faults:
        mem //= 2
    peer = hw.get("peer_link", {})
    xgmi = peer.get("type") == "xgmi" and int(peer.get("links", 0)) > 0
    n = len(accel)
    matrix = [[None if i == j else xgmi for j in range(n)] for i in range(n)]
    if "nvlink-partial" in faults and n >= 4 and xgmi:
        for a, b in ((0, 1), (2, 3)):
            matrix[a][b] = matrix[b][a] = False
    devices = [{"index": i, "pci_bus_id": bdf, "name": f"{ident.get('vendor', '')} {ident.get('model', '')} "
                "(simulated)".strip(), "memory_total_bytes": mem, "vbios_version": "113-M3000100-102",
                "serial": f"SIM{i:010d}", "driver_version": "6.8.5", "pcie_current_gen": cur_gen,
                "pcie_current_width": cur_width, "pcie_max_gen": gen, "pcie_max_width": width,
                "firmware": {"SMC": "85.114.0", "PSP_SOSDRV": "0.0.0.0"}, "xgmi_links": int(peer.get("links", 0))}
               for i, (bdf, _dev_id, cur_gen, cur_width) in enumerate(accel)]
    return {"available": True, "source": "amdsmi (simulated)", "collected_at": time.time(), "vendor": "amd",
            "driver_version": "6.8.5", "devices": devices, "p2p_xgmi": matrix, "errors": []}


def build_sim_tree(root: Path, profile: Any, faults: List[str]) -> Dict[str, Any]:
    """Write a /proc + /sys tree for the profile's machine; return its NVML facts."""
    ident, hw = profile.identity, profile.hardware
    count = profile.expected_count
    sockets = 2
    cores_per_socket = 32
    # CPU
    lines = []
    for s in range(sockets):
        for c in range(cores_per_socket):
            cpu = s * cores_per_socket + c
            lines.append(f"processor\t: {cpu}\nvendor_id\t: SimulatedVendor\nmodel name\t: Simulated CPU "
                         f"(pytest-sits sim)\nphysical id\t: {s}\ncore id\t\t: {c}\n")
    _write(root / "proc/cpuinfo", "\n".join(lines))
    _write(root / "proc/meminfo", f"MemTotal:       {2 * 1024 ** 3} kB")  # 2 TiB
    _write(root / "proc/sys/kernel/hostname", "sits-sim")
    _write(root / "proc/sys/kernel/osrelease", "6.8.0-sim")
    for s in range(sockets):
        lo, hi = s * cores_per_socket, (s + 1) * cores_per_socket - 1
        _write(root / f"sys/devices/system/node/node{s}/cpulist", f"{lo}-{hi}")
        _write(root / f"sys/devices/system/node/node{s}/meminfo",
               f"Node {s} MemTotal:       {1024 ** 3} kB")
        _write(root / f"sys/devices/system/node/node{s}/distance", "10 21" if s == 0 else "21 10")
    _write(root / "sys/devices/system/node/online", f"0-{sockets - 1}")
    # PCI
    pci_id = (profile.pci_ids or ["10de:0000"])[0]
    vendor, device = (int(x, 16) for x in pci_id.split(":"))
    gen = int(hw.get("pcie_gen", 4))
    width = int(hw.get("pcie_width", 16))
    n = max(0, count - 1) if "missing-device" in faults else count
    driver = {0x10DE: "nvidia", 0x1002: "amdgpu", 0x19E5: "devdrv_device_driver"}.get(vendor)
    accel_class = 0x030200 if vendor in (0x10DE,) else 0x120000
    accel = []
    for i in range(n):
        sock = i * sockets // max(n, 1)
        # 15 root complexes per PCI domain (buses 0x10..0xf0): a profile's count of up to 64 stays valid.
        dom, domain_bus = i // 15, 0x10 * (i % 15 + 1)
        rc = f"sys/devices/pci{dom:04x}:{domain_bus:02x}"
        rp = f"{dom:04x}:{domain_bus:02x}:01.0"
        parent = add_pci_function(root, rc, rp, 0x8086, 0x1BBE, 0x060400, 4, gen, 16, gen, 16, sock)
        bus = domain_bus + 1
        levels = 2 if "switch2" in faults else 1 if "switch" in faults else 0
        for _lvl in range(levels):
            up = f"{dom:04x}:{bus:02x}:00.0"
            parent = add_pci_function(root, parent, up, 0x1000, 0xC030, 0x060400, 5, gen, 16, gen, 16, sock)
            bus += 1
            down = f"{dom:04x}:{bus:02x}:00.0"
            parent = add_pci_function(root, parent, down, 0x1000, 0xC030, 0x060400, 6, gen, 16, gen, 16, sock)
            bus += 1
        dev_id = device
        if "wrong-model" in faults and i == n - 1:
            dev_id = (device + 1) & 0xFFFF
        cur_gen, cur_width = gen, width
        if "link-degraded" in faults and i == 0:
            cur_gen, cur_width = max(1, gen - 1), max(1, width // 2)
        if "link-idle" in faults:
            cur_gen = 1
        numa = -1 if "numa-unknown" in faults else sock
        bdf = f"{dom:04x}:{bus:02x}:00.0"
        add_pci_function(root, parent, bdf, vendor, dev_id, accel_class, 0, gen, width, cur_gen, cur_width,
                      numa, driver)
        accel.append((bdf, dev_id, cur_gen, cur_width))
    # A NIC beside them, so that the accelerator filter is exercised.
    add_pci_function(root, "sys/devices/pci0000:00", "0000:00:03.0", 0x15B3, 0x1021, 0x020000, 0, 5, 16, 5, 16, 0,
                  "mlx5_core")
    finish = sim_health(root, profile, faults, [a[0] for a in accel])  # health files; health fields of NVML
    # NVML
    if vendor == 0x1002:
        return finish(_sim_amdsmi(profile, faults, accel, gen, width))
    if vendor != 0x10DE:
        return {"available": False, "reason": f"simulated {ident.get('vendor')} devices have no NVML",
                "devices": [], "errors": []}
    if "no-nvml" in faults:
        return {"available": False, "reason": "NVML did not initialise: Driver Not Loaded (simulated)",
                "devices": [], "errors": []}
    mem = int(float(hw.get("memory_gb", 0)) * 1024 ** 3 * 0.995)
    if "small-memory" in faults:
        mem //= 2
    name = f"{ident.get('vendor', '')} {ident.get('model', '')} (simulated)".strip()
    if "hostile-name" in faults:
        name = "<script>alert('sits')</script> " + name
    peer = hw.get("peer_link", {})
    links = int(peer.get("links", 0)) if peer.get("type") == "nvlink" else 0
    pairs = peer.get("topology") == "pairs"  # bridged cards: each one linked to its neighbour only

    def linked(i: int, j: int) -> bool:
        return links > 0 and i != j and (not pairs or i // 2 == j // 2)

    def remote(i: int) -> str:
        return accel[i ^ 1][0] if pairs and (i ^ 1) < len(accel) else "0000:00:00.0"
    devices = []
    for i, (bdf, _dev_id, cur_gen, cur_width) in enumerate(accel):
        devices.append({
            "index": i, "name": name, "uuid": f"GPU-00000000-0000-0000-0000-{i:012d}",
            "serial": f"SIM{i:010d}", "vbios_version": "96.00.00.00.01", "board_part_number": "SIM",
            "memory_total_bytes": mem, "pci_bus_id": bdf,
            "pcie_current_gen": cur_gen, "pcie_current_width": cur_width,
            "pcie_max_gen": gen, "pcie_max_width": width, "pcie_gpu_max_gen": gen,
            "power_limit_mw": int(float(hw.get("tdp_w", 0)) * 1000), "temperature_c": 45,
            "cc_mode": 0,
            "nvlinks": [{"link": k, "active": True, "version": int(peer.get("version", 4)),
                         "remote_bus_id": remote(i), "remote_type": 0 if pairs else 2}
                        for k in range(links if not pairs or (i ^ 1) < len(accel) else 0)],
        })
    p2p = [[(None if i == j else linked(i, j)) for j in range(len(accel))] for i in range(len(accel))]
    if "nvlink-partial" in faults and len(accel) >= 4:
        for a, b in ((0, 1), (2, 3)):
            p2p[a][b] = p2p[b][a] = False
    old = "old-driver" in faults
    return finish({"available": True, "source": "nvml (simulated)", "collected_at": time.time(),
            "driver_version": "535.104.05" if old else "560.35.03",
            "cuda_driver_version": "12.2" if old else "12.6",
            "nvml_version": "12.535.104.05" if old else "12.560.35.03",
            "devices": devices, "p2p_nvlink": p2p, "errors": []})
