"""What the readers of other vendors' management tools that look like ``nvidia-smi`` share (:mod:`.npu_smi`,
:mod:`.mthreads_gmi`): Huawei Ascend ``npu-smi info`` and Moore Threads
``mthreads-gmi``, read as those vendors' accelerators (never as NVIDIA's).

What their device tables give is what the inventory needs: each device's name, PCI address and memory size, its
health, power and temperature readings, and the tool's (driver's) version.  They give no PCI ID, ECC counters,
clock-event reasons or power limit: the requirements that read those say so (``not read for this vendor``).

``npu-smi info`` prints, per NPU, a name row (``| 0  910B1 | OK | 327.1  54  0 / 0 |``) and a chip row with the
Bus-Id, AICore use, memory and HBM use (``used/ total`` MB), then a process table.  ``mthreads-gmi`` prints, per
GPU, ``ID  Name |PCIe |%GPU  Mem`` rows where memory reads ``used(total)`` MiB.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional

from .base import OTHER_DEVICES, Entry, Machine, Reader, new_accelerator
from .text import check_device_count, text_lines

_NPU_BANNER = re.compile(r"^\|?\s*npu-smi\s+(\S{1,40})\s+Version:\s*(\S{1,40})", re.M)
_NPU_NAME = re.compile(r"^\|\s*(\d{1,3})\s+(\S[^|]{0,40}?)\s*\|\s*(\S[^|]{0,20}?)\s*\|\s*([-\d.]+|NA|N/A)\s+"
                       r"([-\d.]+|NA|N/A)\b")
_NPU_CHIP = re.compile(r"^\|\s*(\d{1,3})\s*\|\s*([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*\|\s*"
                       r"(\d{1,3}|NA|N/A)\s+(\d{1,9})\s*/\s*(\d{1,9})\s+(\d{1,9})\s*/\s*(\d{1,9})\s*\|")
_MT_BANNER = re.compile(r"mthreads-gmi:\s*(\S{1,40})\s+Driver Version:\s*(\S{1,40})")
_MT_ROW = re.compile(r"^(\d{1,3})\s+(\S.{0,40}?)\s*\|\s*([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*\|"
                     r"\s*(\d{1,3})%\s+(\d{1,9})MiB\((\d{1,9})MiB\)")
_MT_ROW2 = re.compile(r"^\s+(\S.{0,30}?)\s*\|\s*(\d{1,2})x\((\d{1,2})x\)\s*\|\s*(\d{1,3})C\s+(\S{1,8})")
MIB = 1024 ** 2


def _bdf(text: str) -> str:
    """A PCI address as the inventory writes one (a 4-digit domain, lower case)."""
    dom, rest = text.lower().split(":", 1)
    return f"{int(dom, 16):04x}:{rest}"


def _num(text: str) -> Optional[float]:
    try:
        return float(text)
    except ValueError:
        return None


def parse_npu_smi(text: str) -> Dict[str, Any]:
    """Facts of ``npu-smi info``: the version, and per NPU its name, health, power (W), temperature (°C), Bus-Id,
    AICore use, memory and HBM use and total (MB); an elided row (``...``) is recorded as a cut."""
    lines = text_lines(text, "`npu-smi info`")
    m = _NPU_BANNER.search(text[:4096])
    devices: List[Dict[str, Any]] = []
    cuts: List[Dict[str, Any]] = []
    pending: Optional[Dict[str, Any]] = None
    for n, ln in enumerate(lines, 1):
        s = ln.rstrip()
        if s.strip() == "...":
            cuts.append({"line": n, "what": "rows elided by the author ('...')"})
            continue
        nm = _NPU_NAME.match(s)
        if nm and not _NPU_CHIP.match(s) and "Process" not in s:
            pending = {"index": int(nm.group(1)), "name": f"Ascend {nm.group(2).strip()}", "health": nm.group(3),
                       "power_w": _num(nm.group(4)), "temperature_c": _num(nm.group(5)), "source_line": n}
            continue
        cm = _NPU_CHIP.match(s)
        if cm and pending is not None:
            check_device_count(len(devices) + 1, "npu-smi info", n)
            dev = dict(pending, chip=int(cm.group(1)), pci_bus_id=_bdf(cm.group(2)),
                       aicore_percent=_num(cm.group(3)), memory_used_mb=int(cm.group(4)),
                       memory_total_mb=int(cm.group(5)), hbm_used_mb=int(cm.group(6)), hbm_total_mb=int(cm.group(7)),
                       chip_line=n)
            dev["memory_total_bytes"] = dev["hbm_total_mb"] * MIB if dev["hbm_total_mb"] else None
            devices.append(dev)
            pending = None
    if not devices:
        raise ValueError("no NPU row with its chip row (Bus-Id, memory, HBM) in the text: is it `npu-smi info`?")
    return {"tool_version": m.group(1) if m else None, "driver_version": m.group(2) if m else None,
            "devices": devices, "cuts": cuts, "vendor": "Huawei"}


def parse_mthreads_gmi(text: str) -> Dict[str, Any]:
    """Facts of ``mthreads-gmi``: the tool and driver versions, and per GPU its name, PCI address, use (%), memory
    used and total (MiB: ``used(total)``), link width and its maximum, temperature, MPC capability and ECC mode.
    Memory used above the total is kept as read, with a note (the card's firmware shows a smaller total with the
    IOMMU off)."""
    lines = text_lines(text, "`mthreads-gmi`")
    m = _MT_BANNER.search(text[:4096])
    devices: List[Dict[str, Any]] = []
    last: Optional[Dict[str, Any]] = None
    for n, ln in enumerate(lines, 1):
        s = ln.rstrip()
        rm = _MT_ROW.match(s)
        if rm:
            check_device_count(len(devices) + 1, "mthreads-gmi", n)
            used, total = int(rm.group(5)), int(rm.group(6))
            last = {"index": int(rm.group(1)), "name": rm.group(2).strip(), "pci_bus_id": _bdf(rm.group(3)),
                    "utilization_gpu_percent": int(rm.group(4)), "memory_used_mib": used, "memory_total_mib": total,
                    "memory_total_bytes": total * MIB, "source_line": n, "notes": []}
            if used > total:
                last["notes"].append(f"line {n}: memory used {used} MiB exceeds the total shown, {total} MiB (the "
                                     "total may be what the card exposes with the IOMMU off): the size is read as "
                                     "shown")
            devices.append(last)
            continue
        r2 = _MT_ROW2.match(s)
        if r2 and last is not None and "device_type" not in last:
            last.update(device_type=r2.group(1).strip(), pcie_current_width=int(r2.group(2)),
                        pcie_max_width=int(r2.group(3)), temperature_c=float(r2.group(4)), mpc_capable=r2.group(5))
            continue
        if last is not None and "ecc_mode" not in last and "device_type" in last and s.strip() and "|" in s:
            last["ecc_mode"] = s.split("|")[-1].strip() or None
    if not devices:
        raise ValueError("no GPU row (ID, Name |PCIe |%GPU Mem) in the text: is it `mthreads-gmi`?")
    return {"tool_version": m.group(1) if m else None, "driver_version": m.group(2) if m else None,
            "devices": devices, "cuts": [], "vendor": "Moore Threads"}


def _ecc_mode(text: Optional[str]) -> Optional[bool]:
    """The ECC mode a tool's column shows: Enabled/On -> True; Disabled/Off, or N/A (the card offers none) -> False;
    not shown -> None."""
    if text is None:
        return None
    low = text.strip().lower()
    if low in ("enabled", "enable", "on", "yes"):
        return True
    if low in ("disabled", "disable", "off", "no", "n/a", "na"):
        return False
    return None


def merge_devices(machine: Machine, f: Entry) -> None:
    facts = f["facts"]
    vendor, tool = facts["vendor"], f["tool"]
    for dev in facts["devices"]:
        bdf = dev["pci_bus_id"]
        a = new_accelerator(bdf, None, vendor, dev["name"], f["name"])
        a["memory_total_bytes"] = dev.get("memory_total_bytes")
        a["memory_source"] = f"submitted {tool} ({f['name']}, line {dev.get('chip_line') or dev['source_line']})"
        a["display_name"] = dev["name"]
        # the facts the tool's text shows (a health requirement whose field it does not show says so)
        a["management"] = {"source": f"submitted {tool} ({f['name']})", "source_line": dev["source_line"],
                           "ecc_mode_current": _ecc_mode(dev.get("ecc_mode")), "ecc_mode_text": dev.get("ecc_mode"),
                           "health": dev.get("health"), "power_draw_w": dev.get("power_w"),
                           "temperature_c": dev.get("temperature_c"),
                           "utilization_gpu_percent": dev.get("utilization_gpu_percent", dev.get("aicore_percent")),
                           "driver_version": facts.get("driver_version"), "errors": []}
        a["declared"] = {"tool": tool, "tool_version": facts.get("tool_version"),
                         "driver_version": facts.get("driver_version"),
                         **{k: v for k, v in dev.items() if k not in ("pci_bus_id", "name")}}
        if dev.get("pcie_current_width") is not None:
            a["link"] = {"current_width": dev["pcie_current_width"], "max_width": dev.get("pcie_max_width")}
        machine.add(bdf, a)
        machine.notes.extend(dev.get("notes") or [])
    if facts["devices"] and not facts.get("cuts"):
        machine.complete.setdefault(vendor.lower(), []).append(f"{f['name']} ({tool} lists every device)")


class VendorTable(Reader):
    """A reader of one of these tables: its module gives the kind, its place, its ``detect`` and ``parse``; the
    devices are merged alike (:func:`merge_devices`), in their own step."""

    steps = (OTHER_DEVICES,)

    def merge(self, machine: Machine, entry: Entry, step: int) -> None:
        merge_devices(machine, entry)
