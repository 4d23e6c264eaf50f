"""What the AMD readers (``amd-smi``, ``rocm-smi``) share: the bounds of a text, its numbers and IDs, and how a
text's GPUs are added to the machine.

Both tools number GPUs in the order the driver enumerates them, so their indices are one numbering: a file that
gives an index its PCI address names that GPU for every file (:data:`AMD_NUMBERING`, before any GPU is added).
ECC counts of amdsmi are counted since the driver loaded: recorded as volatile, as the live probe does.  The
text is untrusted: bounded in size, lines and depth; a value that is not what its field holds is recorded in
``errors``, never raised.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Tuple

from .base import Entry, Machine, missing_errors, new_accelerator

MAX_BYTES = 8 << 20
MAX_LINES = 200_000
MAX_DEPTH = 32


class AmdTextError(ValueError):
    """Nothing in the text is rocm-smi or amd-smi output; the message says what was found and the fix."""


def amd_lines(text: str, what: str) -> List[str]:
    if len(text) > MAX_BYTES:
        raise AmdTextError(f"{len(text)} characters, over the {MAX_BYTES >> 20} MiB limit for {what} text")
    if "\x00" in text:
        raise AmdTextError(f"the text holds NUL bytes: a binary file, not {what} output")
    lines = text.splitlines()
    if len(lines) > MAX_LINES:
        raise AmdTextError(f"{len(lines)} lines, over the {MAX_LINES}-line limit for {what} text")
    return [ln.expandtabs(8)[:4096] for ln in lines]


_NUM = re.compile(r"^\s*([-+]?\d{1,12}(?:\.\d{1,6})?)\s*([A-Za-z/%°]{0,8})")
UNREAD = re.compile(r"^\[?(?:N/A|NA|not supported|unsupported|unknown)\]?$", re.I)


def num_unit(value: Any) -> Tuple[Optional[float], Optional[str]]:
    """(number, unit) of '750 W', '32 GT/s', '196592 MB', {"value": 750, "unit": "W"}, 750; (None, None)."""
    if isinstance(value, dict) and "value" in value:
        unit = value.get("unit")
        v, _ = num_unit(value["value"])
        return v, str(unit) if unit is not None else None
    if isinstance(value, bool):
        return None, None
    if isinstance(value, (int, float)):
        return float(value), None
    if isinstance(value, str):
        m = _NUM.match(value)
        if m:
            return float(m.group(1)), (m.group(2) or None)
    return None, None


def mib_bytes(value: Any) -> Optional[int]:
    """Bytes of a memory size in MB/MiB/GB (amdsmi's "MB" are MiB)."""
    v, unit = num_unit(value)
    if v is None:
        return None
    u = (unit or "MB").lower()
    scale = {"b": 1, "kb": 1 << 10, "kib": 1 << 10, "mb": 1 << 20, "mib": 1 << 20, "gb": 1 << 30, "gib": 1 << 30}
    return int(v * scale[u]) if u in scale else None


def hex_id(value: Any) -> Optional[str]:
    s = str(value).strip().lower() if value is not None else ""
    m = re.fullmatch(r"(?:0x)?([0-9a-f]{1,4})", s)
    return m.group(1).rjust(4, "0") if m else None


# ---- merging ------------------------------------------------------------------------------------------------

_INDEX = "amd index"  # the machine's scratch: GPU index -> PCI address (or the name it goes by)


def gpu_index(machine: Machine) -> Dict[int, str]:
    """The numbering both tools share: GPU index -> the PCI address a file gives it (or the name it goes by)."""
    by_index: Dict[int, str] = machine.scratch.setdefault(_INDEX, {})
    return by_index


def index_gpus(machine: Machine, f: Entry) -> None:
    """Record the PCI address of every GPU index the file gives one."""
    by_index = gpu_index(machine)
    for dev in f["facts"]["devices"]:
        if dev.get("index") is not None and dev.get("pci_bus_id"):
            by_index.setdefault(dev["index"], dev["pci_bus_id"])


def merge_gpus(machine: Machine, f: Entry, lists_all: str) -> None:
    """Add the file's GPUs and their management facts (one already known gains the facts it lacks), their NUMA
    nodes and PCIe link readings; ``lists_all``: why the file lists every AMD GPU of the machine."""
    facts, amdsmi, accs, by_index = f["facts"], machine.amdsmi, machine.accs, gpu_index(machine)
    amdsmi.update(available=True, source=f"submitted {f['tool']}", reason=None)
    amdsmi["files"].append(f["name"])
    if facts.get("driver_version"):
        amdsmi["driver_version"] = facts["driver_version"]
    for dev in facts["devices"]:
        idx = dev.get("index")
        bdf = dev.get("pci_bus_id") or (by_index.get(idx) if idx is not None else None)
        if bdf is None:
            bdf = f"GPU{idx}" if idx is not None else f"AMD GPU in {f['name']}"
        if idx is not None:
            by_index.setdefault(idx, bdf)
        dev = dict(dev)
        dev["source"] = f"submitted {f['tool']} ({f['name']})"
        missing_errors(dev, f)
        a = new_accelerator(bdf, dev.get("pci_id"), "AMD", dev.get("name"), f["name"])
        a["numa_node"] = dev.get("numa_node")
        a["memory_total_bytes"] = dev.get("memory_total_bytes")
        a["memory_source"] = "amdsmi" if dev.get("memory_total_bytes") is not None else None
        cur = accs.get(bdf)
        if cur is not None and cur.get("management"):
            for k, v in dev.items():
                if v is not None and cur["management"].get(k) is None:
                    cur["management"][k] = v
            cur["management"]["errors"] = [e for e in cur["management"].get("errors") or []
                                           if not (e.get("missing") and cur["management"].get(e.get("field"))
                                                   is not None)]
            machine.add(bdf, a)
        else:
            a["management"] = dev
            machine.add(bdf, a)
        if dev.get("numa_node") is not None:
            machine.numa_cpus.setdefault(dev["numa_node"], None)
        if dev.get("pcie_current_width") is not None and dev.get("pcie_max_width") is not None:
            machine.links.setdefault(bdf, _link(bdf, dev, f))
    if facts["devices"]:
        machine.complete.setdefault("amd", []).append(f"{f['name']} ({lists_all})")


def finish_driver(machine: Machine) -> None:
    """The driver version of the AMD GPUs, when no file gave one but every GPU's facts agree on it (the same
    whichever AMD reader finishes first)."""
    amdsmi = machine.amdsmi
    if amdsmi["available"]:
        drivers = {(a.get("management") or {}).get("driver_version") for a in machine.accs.values()
                   if a["vendor"] == "AMD"} - {None}
        if len(drivers) == 1 and not amdsmi.get("driver_version"):
            amdsmi["driver_version"] = drivers.pop()


def _link(bdf: str, dev: Dict[str, Any], f: Entry) -> Dict[str, Any]:
    from ..pcie import gen_of

    util = dev.get("utilization_gpu_percent")
    loaded = util is not None and util >= 50
    return {"device": bdf, "capability": {"device_max_speed_gts": dev.get("pcie_max_speed_gts"),
                                          "device_max_width": dev.get("pcie_max_width"), "slot": None,
                                          "slot_max_speed_gts": None, "slot_max_width": None,
                                          "achievable_speed_gts": dev.get("pcie_max_speed_gts"),
                                          "achievable_gen": gen_of(dev.get("pcie_max_speed_gts")),
                                          "achievable_width": dev.get("pcie_max_width")},
            "samples": [{"speed_gts": dev.get("pcie_current_speed_gts"), "width": dev.get("pcie_current_width"),
                         "under_load": loaded, "source": f"submitted {f['tool']} ({f['name']})"}],
            "load": ({"kind": "submitted reading", "utilization_gpu_percent": util} if loaded else
                     {"kind": None, "reason": f"one submitted reading ({util if util is not None else '?'}% GFX "
                                              "activity; under 50% counts as idle)"}),
            "method_text": f"PCIe link of the submitted {f['tool']} ({f['name']}): PCIE WIDTH/SPEED against BUS "
                           "MAX_PCIE_WIDTH/MAX_PCIE_SPEED"}
