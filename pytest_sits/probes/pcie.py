"""PCI configuration space: the PCI Express capability and its link fields.

Layout from the PCI Express Base Specification: the capability list pointer
is at 0x34 when bit 4 of the status register (0x06) is set; the PCI Express
capability has ID 0x10; its Capabilities Register (offset +2) carries the
Device/Port Type in bits 7:4; Link Capabilities is at +0x0C (max speed in
bits 3:0, max width in bits 9:4) and Link Status at +0x12 (current speed in
bits 3:0, negotiated width in bits 9:4).
"""

from __future__ import annotations

import re
from typing import Any, Dict, Optional

PORT_TYPES = {
    0: "endpoint",
    1: "legacy_endpoint",
    4: "root_port",
    5: "switch_upstream",
    6: "switch_downstream",
    7: "pcie_to_pci_bridge",
    8: "pci_to_pcie_bridge",
    9: "rc_integrated_endpoint",
    10: "rc_event_collector",
}
SWITCH_TYPES = {"switch_upstream", "switch_downstream"}

# Link speed encodings (Supported Link Speeds vector index) -> GT/s and generation.
SPEED_GTS = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}
GTS_TO_GEN = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}
# Usable bandwidth per lane and direction, MB/s, after line encoding
# (8b/10b for Gen1-2, 128b/130b for Gen3-5; Gen6 FLIT before FLIT overhead).
LANE_MBPS = {1: 250.0, 2: 500.0, 3: 984.6, 4: 1969.2, 5: 3938.5, 6: 8000.0}

# Anchored, bounded: a kernel writes "16.0 GT/s PCIe" (or "16 GT/s", "2.5 GT/s"); anything else is unknown.
_SPEED_RE = re.compile(r"\s*([0-9]{1,3}(?:\.[0-9]{1,3})?) ?GT/s")


def link_theoretical_gbps(gen: int, width: int) -> float:
    """Per-direction rate of a PCIe link after line encoding, before protocol (TLP/FLIT) overhead."""
    return LANE_MBPS[gen] * width / 1000.0


def parse_sysfs_speed(text: Optional[str]) -> Optional[float]:
    """'16.0 GT/s PCIe' or '16 GT/s' (older kernels) -> 16.0; 'Unknown' -> None."""
    if not text:
        return None
    m = _SPEED_RE.match(text[:64])
    return float(m.group(1)) if m else None


def gen_of(gts: Optional[float]) -> Optional[int]:
    if gts is None:
        return None
    return GTS_TO_GEN.get(round(gts, 1))


def parse_config(config: bytes) -> Dict[str, Any]:
    """Parse the header and the PCI Express capability of a config-space dump.

    Returns ``{"bytes": n, "class": ..., "header_type": ..., "pcie": {...} or None,
    "reason": ...}``.  With fewer than 256 bytes (no root: the kernel shows
    only the first 64) the capability list usually cannot be walked; the
    result says so instead of guessing.
    """
    out: Dict[str, Any] = {"bytes": len(config), "pcie": None, "reason": None}
    if len(config) < 64:
        out["reason"] = f"config space truncated to {len(config)} bytes"
        return out
    out["vendor"] = int.from_bytes(config[0:2], "little")
    out["device"] = int.from_bytes(config[2:4], "little")
    out["class"] = int.from_bytes(config[9:12], "little")
    out["header_type"] = config[0x0E] & 0x7F
    status = int.from_bytes(config[6:8], "little")
    if not status & 0x10:
        out["reason"] = "no capability list"
        return out
    ptr = config[0x34] & 0xFC
    seen = set()
    while ptr and ptr not in seen:
        seen.add(ptr)
        if ptr + 0x14 > len(config):
            out["reason"] = (f"capability at 0x{ptr:02x} lies beyond the {len(config)} readable bytes "
                             "(reading the full config space needs root)")
            return out
        cap_id, nxt = config[ptr], config[ptr + 1] & 0xFC
        if cap_id == 0x10:
            flags = int.from_bytes(config[ptr + 2:ptr + 4], "little")
            ptype = (flags & 0xF0) >> 4
            lnkcap = int.from_bytes(config[ptr + 0x0C:ptr + 0x10], "little")
            lnksta = int.from_bytes(config[ptr + 0x12:ptr + 0x14], "little")
            out["pcie"] = {
                "offset": ptr,
                "port_type_code": ptype,
                "port_type": PORT_TYPES.get(ptype, f"type_{ptype}"),
                "max_speed_gts": SPEED_GTS.get(lnkcap & 0xF),
                "max_width": (lnkcap >> 4) & 0x3F,
                "current_speed_gts": SPEED_GTS.get(lnksta & 0xF),
                "current_width": (lnksta >> 4) & 0x3F,
            }
            return out
        ptr = nxt
    out["reason"] = "no PCI Express capability"
    return out


def build_config(vendor: int, device: int, class_code: int, port_type: Optional[int],
                 max_gen: int = 4, max_width: int = 16, cur_gen: Optional[int] = None,
                 cur_width: Optional[int] = None, size: int = 256) -> bytes:
    """Build a config-space image (for snapshots of simulated machines and tests)."""
    cfg = bytearray(size)
    cfg[0:2] = vendor.to_bytes(2, "little")
    cfg[2:4] = device.to_bytes(2, "little")
    cfg[9:12] = class_code.to_bytes(3, "little")
    cfg[0x0E] = 0x01 if (class_code >> 8) == 0x0604 else 0x00
    if port_type is not None and size >= 0x60:
        cfg[6:8] = (0x10).to_bytes(2, "little")
        cfg[0x34] = 0x40
        cfg[0x40] = 0x01  # power management capability first, to make the walk real
        cfg[0x41] = 0x60
        ptr = 0x60
        cfg[ptr] = 0x10
        cfg[ptr + 1] = 0x00
        cfg[ptr + 2:ptr + 4] = ((port_type << 4) | 0x2).to_bytes(2, "little")
        lnkcap = (max_gen & 0xF) | ((max_width & 0x3F) << 4)
        cfg[ptr + 0x0C:ptr + 0x10] = lnkcap.to_bytes(4, "little")
        lnksta = ((cur_gen or max_gen) & 0xF) | (((cur_width or max_width) & 0x3F) << 4)
        cfg[ptr + 0x12:ptr + 0x14] = lnksta.to_bytes(2, "little")
    return bytes(cfg)


def normalise_bus_id(bus_id: Any) -> str:
    """NVML writes '00000000:17:00.0'; sysfs writes '0000:17:00.0'."""
    if isinstance(bus_id, bytes):
        bus_id = bus_id.decode()
    bus_id = str(bus_id).strip().lower()
    dom, rest = bus_id.split(":", 1)
    return f"{int(dom, 16):04x}:{rest}"
