"""``amd-smi`` (``static``, ``metric``, ``list``; text or ``--json``), read into the facts the live amdsmi probe
gives (:mod:`pytest_sits.probes.amd`) plus link, power and NUMA facts.

``amd-smi`` prints one ``GPU: N`` block per device with nested ``KEY: value``
sections (the human-readable form of its JSON); ``--json`` is a list of
objects (``{"gpu": N, "asic": {...}}``), or ``{"gpu_data": [...]}``, whose
values may be ``{"value": 750, "unit": "W"}``.
"""

from __future__ import annotations

import json
import re
from typing import Any, Dict, Iterable, List, Optional, Tuple

from .amd_common import (MAX_DEPTH, UNREAD, AmdTextError, amd_lines, finish_driver, hex_id, index_gpus, merge_gpus,
                         mib_bytes, num_unit)
from .base import AMD_DEVICES, AMD_NUMBERING, Detection, Entry, Machine, Reader

Tree = Dict[str, Any]  # {KEY: value or Tree}; KEYS upper case


def _amd_smi_text_blocks(lines: List[str]) -> List[Tuple[int, Tree, int]]:
    """(GPU index, tree, line) for every ``GPU: N`` block of amd-smi's human-readable output."""
    blocks: List[Tuple[int, Tree, int]] = []
    stack: List[Tuple[int, Tree]] = []
    for n, raw in enumerate(lines, 1):
        line = raw.rstrip()
        body = line.strip()
        if not body:
            continue
        m = re.match(r"^GPU:\s*(\d{1,4})\s*$", body)
        if m and not line.startswith(" "):
            tree: Tree = {}
            blocks.append((int(m.group(1)), tree, n))
            stack = [(len(line) - len(line.lstrip()), tree)]
            continue
        if not stack:
            continue
        indent = len(line) - len(line.lstrip())
        if body.startswith("- "):
            body, indent = body[2:], indent + 2
        key, sep, value = body.partition(":")
        if not sep:
            continue
        key = key.strip().upper()
        while len(stack) > 1 and stack[-1][0] >= indent:
            stack.pop()
        if indent <= stack[0][0]:  # back at the top: the block ended
            stack = []
            continue
        parent = stack[-1][1]
        value = value.strip()
        if value == "" and len(stack) < MAX_DEPTH:
            child: Tree = {}
            parent.setdefault(key, child)
            stack.append((indent, parent[key] if isinstance(parent[key], dict) else child))
        else:
            parent.setdefault(key, value)
    return blocks


def _upper(obj: Any, depth: int = 0) -> Any:
    if depth > MAX_DEPTH:
        return None
    if isinstance(obj, dict):
        if set(obj) <= {"value", "unit"} and "value" in obj:
            return obj
        return {str(k).upper(): _upper(v, depth + 1) for k, v in list(obj.items())[:4096]}
    if isinstance(obj, list):
        return [_upper(v, depth + 1) for v in obj[:4096]]
    return obj


def _amd_smi_json_blocks(data: Any) -> List[Tuple[int, Tree, int]]:
    if isinstance(data, dict) and isinstance(data.get("gpu_data"), list):
        data = data["gpu_data"]
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list):
        return []
    out = []
    for i, item in enumerate(data[:1024]):
        if isinstance(item, dict) and "gpu" in item:
            idx = item.get("gpu")
            out.append((int(idx) if isinstance(idx, int) else i, _upper(item), 0))
    return out


def _get(tree: Tree, *path: str) -> Any:
    node: Any = tree
    for p in path:
        if not isinstance(node, dict):
            return None
        node = node.get(p.upper())
    if isinstance(node, str) and UNREAD.match(node.strip()):
        return None
    return node


def _first(tree: Tree, *paths: Tuple[str, ...]) -> Any:
    for p in paths:
        v = _get(tree, *p)
        if v is not None:
            return v
    return None


def _whole(value: Any) -> Optional[int]:
    """The number of a value, its fraction cut (a count, a width, a percentage)."""
    v = num_unit(value)[0]
    return int(v) if v is not None else None


def _milli(value: Any) -> Optional[int]:
    """Thousandths of the number of a value (mW of W)."""
    v = num_unit(value)[0]
    return int(round(v * 1000)) if v is not None else None


def _amd_device(index: int, tree: Tree, line: int) -> Dict[str, Any]:
    """One GPU's facts in the shape of the live amdsmi probe (plus link, power and NUMA facts)."""
    dev: Dict[str, Any] = {"index": index, "source_line": line, "errors": []}
    bdf = _first(tree, ("BUS", "BDF"), ("BDF",))
    dev["pci_bus_id"] = str(bdf).lower() if bdf and re.fullmatch(r"[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}"
                                                                 r"\.[0-7]", str(bdf)) else None
    dev["name"] = _first(tree, ("ASIC", "MARKET_NAME"), ("BOARD", "PRODUCT_NAME"))
    vid = hex_id(_get(tree, "ASIC", "VENDOR_ID"))
    did = hex_id(_get(tree, "ASIC", "DEVICE_ID"))
    dev["pci_id"] = f"{vid or '1002'}:{did}" if did else None
    dev["vbios_version"] = _first(tree, ("VBIOS", "VERSION"), ("VBIOS", "VBIOS_VERSION"))
    drv = _get(tree, "DRIVER", "VERSION")
    dev["driver_version"] = str(drv) if drv is not None else None
    dev["serial"] = _first(tree, ("BOARD", "PRODUCT_SERIAL"), ("ASIC", "ASIC_SERIAL"))
    dev["memory_total_bytes"] = mib_bytes(_first(tree, ("VRAM", "SIZE"), ("MEM_USAGE", "TOTAL_VRAM")))
    node = _get(tree, "NUMA", "NODE")
    dev["numa_node"] = int(node) if isinstance(node, (int, str)) and str(node).lstrip("-").isdigit() else None
    cap = _first(tree, ("LIMIT", "SOCKET_POWER"), ("LIMIT", "POWER_CAP"), ("LIMIT", "PPT0", "SOCKET_POWER"),
                 ("POWER", "POWER_CAP"))
    lo, hi = _milli(_get(tree, "LIMIT", "MIN_POWER")), _milli(_get(tree, "LIMIT", "MAX_POWER"))
    dev["power_limit_enforced_mw"] = _milli(cap)
    dev["power_limit_constraints_mw"] = [lo, hi] if lo is not None and hi is not None else None
    dev["power_limit_default_mw"] = None
    dev["power_limit_mw"] = None
    tot_c = _first(tree, ("ECC", "TOTAL_CORRECTABLE_COUNT"), ("ECC", "CORRECTABLE_COUNT"))
    tot_u = _first(tree, ("ECC", "TOTAL_UNCORRECTABLE_COUNT"), ("ECC", "UNCORRECTABLE_COUNT"))
    dev["ecc_volatile_corrected"] = _whole(tot_c)
    dev["ecc_volatile_uncorrected"] = _whole(tot_u)
    deferred = _get(tree, "ECC", "TOTAL_DEFERRED_COUNT")
    dev["ecc_deferred"] = _whole(deferred)
    blocks = _get(tree, "RAS", "ECC_BLOCK_STATE")
    if isinstance(blocks, dict) and blocks:
        states = {k: str(v).upper() for k, v in blocks.items() if isinstance(v, str)}
        umc = states.get("UMC")
        dev["ecc_mode_current"] = (umc == "ENABLED") if umc else any(s == "ENABLED" for s in states.values())
        dev["ecc_blocks"] = states
    else:
        dev["ecc_mode_current"] = None
    dev["ecc_mode_pending"] = None
    width_max, speed_max = _get(tree, "BUS", "MAX_PCIE_WIDTH"), _get(tree, "BUS", "MAX_PCIE_SPEED")
    width_cur, speed_cur = _get(tree, "PCIE", "WIDTH"), _get(tree, "PCIE", "SPEED")
    dev["pcie_max_width"] = _whole(width_max)
    dev["pcie_max_speed_gts"] = num_unit(speed_max)[0]
    dev["pcie_current_width"] = _whole(width_cur)
    dev["pcie_current_speed_gts"] = num_unit(speed_cur)[0]
    replay = _get(tree, "PCIE", "REPLAY_COUNT")
    dev["pcie_replay_counter"] = _whole(replay)
    act = _first(tree, ("USAGE", "GFX_ACTIVITY"), ("GFX_ACTIVITY",))
    dev["utilization_gpu_percent"] = _whole(act)
    dev["throttle_status"] = _get(tree, "POWER", "THROTTLE_STATUS")
    return dev


def parse_amd_smi(text: str) -> Dict[str, Any]:
    """Facts of ``amd-smi static`` / ``metric`` / ``list`` output, text or ``--json``."""
    stripped = text.lstrip("\ufeff \t\r\n")
    fmt = "text"
    if stripped[:1] in "[{":
        try:
            blocks = _amd_smi_json_blocks(json.loads(stripped, parse_constant=lambda c: None))
            fmt = "json"
        except (ValueError, RecursionError):
            raise AmdTextError("the text starts like JSON but is not valid JSON (cut or edited); fix: submit the "
                               "unedited output of `amd-smi static --json`") from None
    else:
        blocks = _amd_smi_text_blocks(amd_lines(text, "`amd-smi`"))
    if not blocks:
        raise AmdTextError("no 'GPU: N' block (text) or object with a \"gpu\" key (--json): this is not amd-smi "
                           "output")
    devices = [_amd_device(i, tree, line) for i, tree, line in blocks]
    # one device may appear twice (static and metric in one file): merge by index
    merged: Dict[int, Dict[str, Any]] = {}
    for d in devices:
        cur = merged.setdefault(d["index"], {})
        for k, v in d.items():
            if v is not None and (cur.get(k) is None or k == "errors"):
                cur[k] = v
            cur.setdefault(k, v)
    devs = [merged[i] for i in sorted(merged)]
    drivers = {d.get("driver_version") for d in devs if d.get("driver_version")}
    return {"available": True, "source": f"amd-smi ({'--json' if fmt == 'json' else 'text'})", "format": fmt,
            "driver_version": next(iter(drivers)) if len(drivers) == 1 else None, "devices": devs, "errors": [],
            "cuts": [], "complete": True}


_AMDSMI = re.compile(r"^GPU:\s*\d{1,4}\s*\n[ \t]+[A-Z][A-Z_]{1,40}:", re.M)
_JSON_GPU = re.compile(r'"(?:gpu|gpu_data)"\s*:')
_JSON_FACT = re.compile(r'"(?:asic|bus|vbios|limit|usage|power|pcie|ecc|vram|bdf|numa|driver)"\s*:', re.I)


class AmdSmi(Reader):
    kinds = {"amd-smi": "amd-smi"}
    steps = (AMD_NUMBERING, AMD_DEVICES)
    order = 20
    option = "--amd-smi"
    option_help = "`amd-smi static` / `metric` output, text or --json"
    link_load = "read"

    def detect_document(self, head: str) -> Optional[Detection]:
        if head.lstrip("\ufeff \t\r\n")[:1] in "[{" and _JSON_GPU.search(head) and _JSON_FACT.search(head):
            return "amd-smi", "amd-smi --json (objects with a \"gpu\" key)"
        return None

    def detect(self, head: str) -> Optional[Detection]:
        if _AMDSMI.search(head):
            return "amd-smi", "'GPU: N' blocks with upper-case sections"
        return None

    def parse(self, kind: str, text: str, known_ids: Iterable[str] = ()) -> Dict[str, Any]:
        return parse_amd_smi(text)

    def merge(self, machine: Machine, entry: Entry, step: int) -> None:
        if step == AMD_NUMBERING:
            index_gpus(machine, entry)
        else:
            merge_gpus(machine, entry, "amd-smi lists every GPU")

    def finish(self, machine: Machine, step: int) -> None:
        if step == AMD_DEVICES:
            finish_driver(machine)


READER = AmdSmi()
