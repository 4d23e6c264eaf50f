"""``nvidia-smi -q`` text a vendor submitted, read into the same facts as the live NVML probe.

Two generations of the format are read: the current one (driver 535 and
later: "Clocks Event Reasons", "GPU Power Readings", PCIe "Device Max" and
"Host Max") and the older one ("Clocks Throttle Reasons", "Power Readings"
with "Enforced Power Limit", a single PCIe "Max").  The result has the keys of
:func:`pytest_sits.probes.nvml.collect` and :mod:`pytest_sits.probes.health`
(``driver_version``, ``devices`` with ``pcie_*``, ``ecc_*``, ``remapped_rows``,
``power_limit_*``, ``vbios_version``, ...), so the checks that judge live
NVML judge the text too.

The text is untrusted: it is size-limited, never evaluated, and every
problem is a :class:`NvsmiTextError` naming the line.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Tuple

from .health import CLOCK_EVENT_BITS

MAX_BYTES = 8 << 20
MAX_LINES = 200_000

_GPU_HEADER = re.compile(r"^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*$")
_KV = re.compile(r"^(\s*)([^:]+?)\s*:\s?(.*)$")

#: Names of the clock-event reasons in the text -> NVML bit names.
REASON_NAMES = {
    "idle": "gpu_idle",
    "gpu idle": "gpu_idle",
    "applications clocks setting": "applications_clocks_setting",
    "sw power cap": "sw_power_cap",
    "hw slowdown": "hw_slowdown",
    "hw thermal slowdown": "hw_thermal_slowdown",
    "hw power brake slowdown": "hw_power_brake_slowdown",
    "sync boost": "sync_boost",
    "sw thermal slowdown": "sw_thermal_slowdown",
    "display clock setting": "display_clock_setting",
}


class NvsmiTextError(ValueError):
    """The text is not usable ``nvidia-smi -q`` output; the message names the line and the fix."""


Node = Dict[str, Any]  # {"value": str|None, "line": int, "children": {name: Node}}


def _tree(text: str) -> Tuple[Node, List[Tuple[str, Node]]]:
    """Indentation tree of 'Key : value' lines: the top-level node and the GPU sections in order."""
    lines = text.splitlines()
    if len(lines) > MAX_LINES:
        raise NvsmiTextError(f"{len(lines)} lines: more than the {MAX_LINES} any `nvidia-smi -q` output has; "
                             "fix: submit the output of one `nvidia-smi -q` run")
    top: Node = {"value": None, "line": 0, "children": {}}
    gpus: List[Tuple[str, Node]] = []
    stack: List[Tuple[int, Node]] = [(-1, top)]
    for lineno, raw in enumerate(lines, 1):
        line = raw.rstrip()
        if not line.strip() or line.lstrip().startswith("="):
            continue
        m = _GPU_HEADER.match(line)
        if m:
            node: Node = {"value": m.group(1), "line": lineno, "children": {}}
            gpus.append((m.group(1), node))
            stack = [(-1, top), (0, node)]
            continue
        indent = len(line) - len(line.lstrip(" "))
        kv = _KV.match(line)
        if kv:
            key, value = kv.group(2).strip(), kv.group(3).strip()
        else:
            key, value = line.strip(), None
        while len(stack) > 1 and stack[-1][0] >= indent:
            stack.pop()
        parent = stack[-1][1]
        child: Node = {"value": value if value != "" else None, "line": lineno, "children": {}}
        name = key
        k = 2
        while name in parent["children"]:  # repeated names (e.g. two "Processes" entries) keep all
            name = f"{key} #{k}"
            k += 1
        parent["children"][name] = child
        stack.append((indent, child))
    return top, gpus


def _find(node: Node, *path: str) -> Optional[Node]:
    for part in path:
        if node is None:
            return None
        node = next((c for k, c in node["children"].items() if k.lower() == part.lower()), None)
    return node


def _value(node: Node, *path: str) -> Tuple[Optional[str], Optional[int]]:
    n = _find(node, *path)
    if n is None:
        return None, None
    v = n["value"]
    if v is None or v.upper() in ("N/A", "[N/A]", "NOT SUPPORTED", "[NOT SUPPORTED]", "UNKNOWN ERROR"):
        return None, n["line"]
    return v, n["line"]


def _number(node: Node, path: Tuple[str, ...], unit: str = "") -> Optional[float]:
    v, line = _value(node, *path)
    if v is None:
        return None
    text = v
    if unit and text.lower().endswith(unit.lower()):
        text = text[: -len(unit)].strip()
    text = text.rstrip("x").strip() if unit == "x" else text
    try:
        return float(text)
    except ValueError:
        raise NvsmiTextError(f"line {line}: {' / '.join(path)} is {v!r}, not a number"
                             + (f" in {unit}" if unit else "")
                             + "; fix: submit the unedited output of `nvidia-smi -q`") from None


def _int(node: Node, *path: str, unit: str = "") -> Optional[int]:
    x = _number(node, path, unit)
    return int(x) if x is not None else None


def _flag(node: Node, *path: str) -> Optional[bool]:
    v, line = _value(node, *path)
    if v is None:
        return None
    low = v.lower()
    if low in ("enabled", "yes", "active", "on"):
        return True
    if low in ("disabled", "no", "not active", "off", "none"):
        return False
    raise NvsmiTextError(f"line {line}: {' / '.join(path)} is {v!r}; expected Enabled/Disabled, Yes/No or "
                         "Active/Not Active")


def _sum(section: Optional[Node], want_uncorrected: bool) -> Optional[int]:
    """Sum of the correctable (or uncorrectable) counters of an ECC Errors subsection, any generation."""
    if section is None:
        return None
    total, seen = 0, False
    children = section["children"]
    # Pre-Ampere layout: "Single Bit" / "Double Bit" subsections, each with a "Total".
    sub = _find(section, "Double Bit" if want_uncorrected else "Single Bit")
    if sub is not None:
        v = _int(sub, "Total")
        return v
    for name, child in children.items():
        low = name.lower()
        if "threshold" in low or child["value"] is None or child["value"].upper() == "N/A":
            continue
        is_unc = "uncorrectable" in low
        if is_unc != want_uncorrected or ("correctable" not in low):
            continue
        try:
            total += int(child["value"])
            seen = True
        except ValueError:
            raise NvsmiTextError(f"line {child['line']}: {name} is {child['value']!r}, not a count") from None
    return total if seen else None


def _reasons(gpu: Node) -> Tuple[Optional[int], Optional[str]]:
    for title in ("Clocks Event Reasons", "Clocks Throttle Reasons", "Clocks Throttle Reasons #2"):
        sec = _find(gpu, title)
        if sec is None:
            continue
        mask, known = 0, False

        def walk(node: Node) -> None:
            nonlocal mask, known
            for name, child in node["children"].items():
                bit = REASON_NAMES.get(name.lower())
                if bit is not None and child["value"] is not None and child["value"].upper() != "N/A":
                    known = True
                    if child["value"].lower() == "active":
                        mask |= CLOCK_EVENT_BITS[bit]
                walk(child)
        walk(sec)
        return (mask if known else None), title
    return None, None


def _power(gpu: Node) -> Dict[str, Any]:
    sec = _find(gpu, "GPU Power Readings")
    if sec is not None:  # current layout
        enforced = _number(sec, ("Current Power Limit",), "W")
        requested = _number(sec, ("Requested Power Limit",), "W")
        fmt = "GPU Power Readings"
    else:
        sec = _find(gpu, "Power Readings")
        if sec is None:
            return {}
        enforced = _number(sec, ("Enforced Power Limit",), "W")
        requested = _number(sec, ("Power Limit",), "W")
        fmt = "Power Readings"
    mw = lambda w: int(round(w * 1000)) if w is not None else None  # noqa: E731
    lo, hi = _number(sec, ("Min Power Limit",), "W"), _number(sec, ("Max Power Limit",), "W")
    return {"power_limit_enforced_mw": mw(enforced), "power_limit_mw": mw(requested),
            "power_limit_default_mw": mw(_number(sec, ("Default Power Limit",), "W")),
            "power_limit_constraints_mw": [mw(lo), mw(hi)] if lo is not None and hi is not None else None,
            "power_readings_format": fmt}


def _device(bus: str, gpu: Node) -> Dict[str, Any]:
    from .pcie import normalise_bus_id

    dev: Dict[str, Any] = {"pci_bus_id": normalise_bus_id(bus), "source_line": gpu["line"]}
    dev["name"] = _value(gpu, "Product Name")[0]
    did, did_line = _value(gpu, "PCI", "Device Id")
    if did is not None:
        m = re.fullmatch(r"0x([0-9A-Fa-f]{4})([0-9A-Fa-f]{4})", did)
        if not m:
            raise NvsmiTextError(f"line {did_line}: PCI / Device Id is {did!r}, not 0xDDDDVVVV")
        dev["pci_id"] = f"{m.group(2)}:{m.group(1)}".lower()
    else:
        dev["pci_id"] = None
    dev["uuid"] = _value(gpu, "GPU UUID")[0]
    dev["serial"] = _value(gpu, "Serial Number")[0]
    dev["vbios_version"] = _value(gpu, "VBIOS Version")[0]
    dev["board_part_number"] = _value(gpu, "Board Part Number")[0]
    dev["inforom_image_version"] = _value(gpu, "Inforom Version", "Image Version")[0]
    dev["inforom_ecc_version"] = _value(gpu, "Inforom Version", "ECC Object")[0]
    dev["gsp_firmware_version"] = _value(gpu, "GSP Firmware Version")[0]
    dev["persistence_mode"] = _flag(gpu, "Persistence Mode")
    link = ("PCI", "GPU Link Info")
    gen = link + ("PCIe Generation",)
    dev["pcie_current_gen"] = _int(gpu, *gen, "Current")
    dev["pcie_max_gen"] = _int(gpu, *gen, "Max")
    dev["pcie_gpu_max_gen"] = _int(gpu, *gen, "Device Max")
    dev["pcie_host_max_gen"] = _int(gpu, *gen, "Host Max")
    dev["pcie_current_width"] = _int(gpu, *link, "Link Width", "Current", unit="x")
    dev["pcie_max_width"] = _int(gpu, *link, "Link Width", "Max", unit="x")
    dev["pcie_link_format"] = "current (Device Max / Host Max)" if dev["pcie_gpu_max_gen"] or dev[
        "pcie_host_max_gen"] else "older (one Max)"
    dev["pcie_replay_counter"] = _int(gpu, "PCI", "Replays Since Reset")
    dev["utilization_gpu_percent"] = _int(gpu, "Utilization", "Gpu", unit="%")
    dev["performance_state"] = _value(gpu, "Performance State")[0]
    dev["clock_event_reasons"], dev["clock_reasons_section"] = _reasons(gpu)
    dev["ecc_mode_current"] = _flag(gpu, "ECC Mode", "Current")
    dev["ecc_mode_pending"] = _flag(gpu, "ECC Mode", "Pending")
    for scope in ("Volatile", "Aggregate"):
        sec = _find(gpu, "ECC Errors", scope)
        dev[f"ecc_{scope.lower()}_corrected"] = _sum(sec, False)
        dev[f"ecc_{scope.lower()}_uncorrected"] = _sum(sec, True)
    dev["retired_pages_sbe"] = _int(gpu, "Retired Pages", "Single Bit ECC")
    dev["retired_pages_dbe"] = _int(gpu, "Retired Pages", "Double Bit ECC")
    pending = _find(gpu, "Retired Pages", "Pending Page Blacklist") or _find(gpu, "Retired Pages", "Pending")
    dev["retired_pages_pending"] = _flag(pending) if pending is not None and pending["value"] and \
        pending["value"].upper() != "N/A" else None
    rows = _find(gpu, "Remapped Rows")
    if rows is not None and rows["value"] is None and rows["children"]:
        dev["remapped_rows"] = {"correctable": _int(rows, "Correctable Error"),
                                "uncorrectable": _int(rows, "Uncorrectable Error"),
                                "pending": _flag(rows, "Pending"),
                                "failure": _flag(rows, "Remapping Failure Occurred")}
        if all(v is None for v in dev["remapped_rows"].values()):
            dev["remapped_rows"] = None
    else:
        dev["remapped_rows"] = None
    dev.update(_power(gpu))
    return dev


def parse(text: str) -> Dict[str, Any]:
    """NVML-shaped facts from ``nvidia-smi -q`` text: {"available", "source", "driver_version", "devices"}."""
    if len(text.encode("utf-8", "replace")) > MAX_BYTES:
        raise NvsmiTextError(f"more than {MAX_BYTES >> 20} MiB: not the output of one `nvidia-smi -q` run")
    if "\x00" in text:
        raise NvsmiTextError("the text holds NUL bytes: a binary file, not `nvidia-smi -q` output")
    top, gpus = _tree(text)
    if not gpus:
        raise NvsmiTextError("no 'GPU 00000000:BB:DD.F' section: this is not `nvidia-smi -q` output "
                             "(fix: run `nvidia-smi -q > FILE` and submit FILE)")
    declared = _int(top, "Attached GPUs")
    devices = [_device(bus, node) for bus, node in gpus]
    for i, d in enumerate(devices):
        d["index"] = i
    out = {"available": True, "source": "text: nvidia-smi -q", "driver_version": _value(top, "Driver Version")[0],
           "cuda_driver_version": _value(top, "CUDA Version")[0], "timestamp": _value(top, "Timestamp")[0],
           "attached_gpus": declared, "devices": devices, "errors": []}
    if declared is not None and declared != len(devices):
        out["errors"].append({"field": "Attached GPUs",
                              "error": f"declares {declared} GPUs but {len(devices)} GPU sections follow"})
    return out


#: Utilisation at or above which a submitted reading counts as taken under load.
LOADED_UTILISATION = 50


def link_evidence(dev: Dict[str, Any]) -> Dict[str, Any]:
    """TOPO-PCIE-LINK evidence from one device of the text: what the link can reach (the current format's
    Device Max and Host Max; the older format's single Max, which is already the lower of the two) and the one
    reading of Current, counted as under load when the GPU's utilisation was >= LOADED_UTILISATION %."""
    from .pcie import SPEED_GTS, gen_of

    gts = lambda g: SPEED_GTS.get(g) if g else None  # noqa: E731
    dev_max = dev.get("pcie_gpu_max_gen") or dev.get("pcie_max_gen")
    host_max = dev.get("pcie_host_max_gen")
    if dev.get("pcie_gpu_max_gen"):  # current format: the lower of the device's and the host's maximum
        ach = min(dev_max, host_max) if host_max else dev_max
    else:  # older format: its one Max is already the lower of the two
        ach = dev.get("pcie_max_gen")
    util = dev.get("utilization_gpu_percent")
    loaded = util is not None and util >= LOADED_UTILISATION
    cap = {"device_max_speed_gts": gts(dev_max), "device_max_width": dev.get("pcie_max_width"), "slot": "host",
           "slot_max_speed_gts": gts(host_max), "slot_max_width": None, "achievable_speed_gts": gts(ach),
           "achievable_gen": gen_of(gts(ach)), "achievable_width": dev.get("pcie_max_width"),
           "format": dev.get("pcie_link_format")}
    sample = {"speed_gts": gts(dev.get("pcie_current_gen")), "width": dev.get("pcie_current_width"),
              "under_load": loaded, "source": f"nvidia-smi -q (GPU section at line {dev.get('source_line')})"}
    load = ({"kind": "submitted reading", "utilization_gpu_percent": util} if loaded else
            {"kind": None, "reason": f"a submitted text: one reading at {util if util is not None else '?'}% GPU "
                                     f"utilisation (under {LOADED_UTILISATION}% counts as idle)"})
    return {"device": dev["pci_bus_id"], "capability": cap, "samples": [sample], "load": load,
            "nvml_link": {k: dev.get(k) for k in ("pcie_current_gen", "pcie_current_width", "pcie_max_gen",
                                                  "pcie_max_width", "pcie_gpu_max_gen", "pcie_host_max_gen")}}


def inventory_view(facts: Dict[str, Any]) -> Dict[str, Any]:
    """The text's facts in the inventory's shape (``accelerators`` with their ``management`` facts), so that the
    acquire functions of the live run read them unchanged."""
    accs = [{"bdf": d["pci_bus_id"], "pci_id": d.get("pci_id") or "10de:0000", "vendor": "NVIDIA",
             "name": d.get("name"), "display_name": d.get("name") or d["pci_bus_id"], "management": d}
            for d in facts["devices"]]
    return {"accelerators": accs,
            "management": {"nvml": {k: v for k, v in facts.items() if k != "devices"}}}
