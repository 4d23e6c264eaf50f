"""AMD text a vendor submitted: ``rocm-smi`` (``--showtopo``, the concise table, ``-a`` style ``GPU[i] : key:
value`` lines) and ``amd-smi`` (``static``, ``metric``, ``list``, text or ``--json``), read into the facts the
live amdsmi probe gives (:mod:`pytest_sits.probes.amd`) plus the XGMI mesh and NUMA nodes.

``rocm-smi --showtopo`` prints three GPU x GPU matrices (weight, hops, link
type) and each GPU's NUMA node; a pair whose link type is ``XGMI`` has a
peer link.  ``amd-smi`` prints one ``GPU: N`` block per device with nested
``KEY: value`` sections (the human-readable form of its JSON); ``--json`` is a
list of objects (``{"gpu": N, "asic": {...}}``), or ``{"gpu_data": [...]}``,
whose values may be ``{"value": 750, "unit": "W"}``.  ECC counts of amdsmi
are counted since the driver loaded: recorded as volatile, as the live probe
does.

The text is untrusted: bounded in size, lines and depth; a value that is not
what its field holds is recorded in ``errors``, never raised.
"""

from __future__ import annotations

import json
import re
from typing import Any, Dict, List, Optional, Tuple

MAX_BYTES = 8 << 20
MAX_LINES = 200_000
MAX_DEPTH = 32


class AmdTextError(ValueError):
    """Nothing in the text is rocm-smi or amd-smi output; the message says what was found and the fix."""


def _lines(text: str, what: str) -> List[str]:
    if len(text) > MAX_BYTES:
        raise AmdTextError(f"{len(text)} characters, over the {MAX_BYTES >> 20} MiB limit for {what} text")
    if "\x00" in text:
        raise AmdTextError(f"the text holds NUL bytes: a binary file, not {what} output")
    lines = text.splitlines()
    if len(lines) > MAX_LINES:
        raise AmdTextError(f"{len(lines)} lines, over the {MAX_LINES}-line limit for {what} text")
    return [ln.expandtabs(8)[:4096] for ln in lines]


_NUM = re.compile(r"^\s*([-+]?\d{1,12}(?:\.\d{1,6})?)\s*([A-Za-z/%°]{0,8})")
_UNREAD = re.compile(r"^\[?(?:N/A|NA|not supported|unsupported|unknown)\]?$", re.I)


def _num(value: Any) -> Tuple[Optional[float], Optional[str]]:
    """(number, unit) of '750 W', '32 GT/s', '196592 MB', {"value": 750, "unit": "W"}, 750; (None, None)."""
    if isinstance(value, dict) and "value" in value:
        unit = value.get("unit")
        v, _ = _num(value["value"])
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


def _mib(value: Any) -> Optional[int]:
    """Bytes of a memory size in MB/MiB/GB (amdsmi's "MB" are MiB)."""
    v, unit = _num(value)
    if v is None:
        return None
    u = (unit or "MB").lower()
    scale = {"b": 1, "kb": 1 << 10, "kib": 1 << 10, "mb": 1 << 20, "mib": 1 << 20, "gb": 1 << 30, "gib": 1 << 30}
    return int(v * scale[u]) if u in scale else None


def _hex_id(value: Any) -> Optional[str]:
    s = str(value).strip().lower() if value is not None else ""
    m = re.fullmatch(r"(?:0x)?([0-9a-f]{1,4})", s)
    return m.group(1).rjust(4, "0") if m else None


# ---- amd-smi ----------------------------------------------------------------------------------------------

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
    if isinstance(node, str) and _UNREAD.match(node.strip()):
        return None
    return node


def _first(tree: Tree, *paths: Tuple[str, ...]) -> Any:
    for p in paths:
        v = _get(tree, *p)
        if v is not None:
            return v
    return None


def _amd_device(index: int, tree: Tree, line: int) -> Dict[str, Any]:
    """One GPU's facts in the shape of the live amdsmi probe (plus link, power and NUMA facts)."""
    dev: Dict[str, Any] = {"index": index, "source_line": line, "errors": []}
    bdf = _first(tree, ("BUS", "BDF"), ("BDF",))
    dev["pci_bus_id"] = str(bdf).lower() if bdf and re.fullmatch(r"[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}"
                                                                 r"\.[0-7]", str(bdf)) else None
    dev["name"] = _first(tree, ("ASIC", "MARKET_NAME"), ("BOARD", "PRODUCT_NAME"))
    vid = _hex_id(_get(tree, "ASIC", "VENDOR_ID"))
    did = _hex_id(_get(tree, "ASIC", "DEVICE_ID"))
    dev["pci_id"] = f"{vid or '1002'}:{did}" if did else None
    dev["vbios_version"] = _first(tree, ("VBIOS", "VERSION"), ("VBIOS", "VBIOS_VERSION"))
    drv = _get(tree, "DRIVER", "VERSION")
    dev["driver_version"] = str(drv) if drv is not None else None
    dev["serial"] = _first(tree, ("BOARD", "PRODUCT_SERIAL"), ("ASIC", "ASIC_SERIAL"))
    dev["memory_total_bytes"] = _mib(_first(tree, ("VRAM", "SIZE"), ("MEM_USAGE", "TOTAL_VRAM")))
    node = _get(tree, "NUMA", "NODE")
    dev["numa_node"] = int(node) if isinstance(node, (int, str)) and str(node).lstrip("-").isdigit() else None
    cap = _first(tree, ("LIMIT", "SOCKET_POWER"), ("LIMIT", "POWER_CAP"), ("LIMIT", "PPT0", "SOCKET_POWER"),
                 ("POWER", "POWER_CAP"))
    lo, hi = _get(tree, "LIMIT", "MIN_POWER"), _get(tree, "LIMIT", "MAX_POWER")
    w = lambda v: int(round(_num(v)[0] * 1000)) if _num(v)[0] is not None else None  # noqa: E731
    dev["power_limit_enforced_mw"] = w(cap)
    dev["power_limit_constraints_mw"] = [w(lo), w(hi)] if w(lo) is not None and w(hi) is not None else None
    dev["power_limit_default_mw"] = None
    dev["power_limit_mw"] = None
    tot_c = _first(tree, ("ECC", "TOTAL_CORRECTABLE_COUNT"), ("ECC", "CORRECTABLE_COUNT"))
    tot_u = _first(tree, ("ECC", "TOTAL_UNCORRECTABLE_COUNT"), ("ECC", "UNCORRECTABLE_COUNT"))
    dev["ecc_volatile_corrected"] = int(_num(tot_c)[0]) if _num(tot_c)[0] is not None else None
    dev["ecc_volatile_uncorrected"] = int(_num(tot_u)[0]) if _num(tot_u)[0] is not None else None
    deferred = _get(tree, "ECC", "TOTAL_DEFERRED_COUNT")
    dev["ecc_deferred"] = int(_num(deferred)[0]) if _num(deferred)[0] is not None else None
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
    dev["pcie_max_width"] = int(_num(width_max)[0]) if _num(width_max)[0] is not None else None
    dev["pcie_max_speed_gts"] = _num(speed_max)[0]
    dev["pcie_current_width"] = int(_num(width_cur)[0]) if _num(width_cur)[0] is not None else None
    dev["pcie_current_speed_gts"] = _num(speed_cur)[0]
    replay = _get(tree, "PCIE", "REPLAY_COUNT")
    dev["pcie_replay_counter"] = int(_num(replay)[0]) if _num(replay)[0] is not None else None
    act = _first(tree, ("USAGE", "GFX_ACTIVITY"), ("GFX_ACTIVITY",))
    dev["utilization_gpu_percent"] = int(_num(act)[0]) if _num(act)[0] is not None else None
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
        blocks = _amd_smi_text_blocks(_lines(text, "`amd-smi`"))
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
            "driver_version": sorted(drivers)[0] if len(drivers) == 1 else None, "devices": devs, "errors": [],
            "cuts": [], "complete": True}


# ---- rocm-smi ---------------------------------------------------------------------------------------------

_BANNER = re.compile(r"^=+\s*(.*?)\s*=+$")
_GPU_LINE = re.compile(r"^GPU\[(\d{1,4})\]\s*:\s*(.*)$")


def _matrix(lines: List[Tuple[int, str]]) -> Optional[Dict[str, Any]]:
    """A GPU x GPU matrix of rocm-smi --showtopo: {"names", "rows": {name: [cells]}, "line"}."""
    header, rows, first = None, {}, None
    for n, ln in lines:
        toks = ln.split()
        if not toks:
            continue
        if header is None and toks[0] == "GPU0" and (len(toks) == 1 or re.fullmatch(r"GPU\d{1,4}", toks[1])):
            header, first = toks, n
            continue
        if header is not None and re.fullmatch(r"GPU\d{1,4}", toks[0]):
            rows[toks[0]] = toks[1:1 + len(header)]
    if header is None:
        return None
    return {"names": header, "rows": rows, "line": first}


def parse_rocm_smi(text: str) -> Dict[str, Any]:
    """Facts of rocm-smi output: ``--showtopo`` (XGMI mesh, hops, weights, NUMA nodes), the concise table, and
    ``GPU[i] : key: value`` lines of the other options (device ID, VBIOS, power cap, PCI bus, replays, serial,
    NUMA node, use)."""
    lines = _lines(text, "`rocm-smi`")
    sections: Dict[str, List[Tuple[int, str]]] = {}
    current = "(top)"
    cuts: List[Dict[str, Any]] = []
    for n, ln in enumerate(lines, 1):
        m = _BANNER.match(ln.strip())
        if m and ln.strip().startswith("==="):
            current = m.group(1) or current
            continue
        sections.setdefault(current, []).append((n, ln))
    devs: Dict[int, Dict[str, Any]] = {}

    def dev(i: int) -> Dict[str, Any]:
        return devs.setdefault(i, {"index": i, "errors": []})

    driver = None
    for sec, body in sections.items():
        for n, ln in body:
            s = ln.strip()
            m = _GPU_LINE.match(s)
            if not m:
                dm = re.match(r"^Driver version:\s*(\S{1,40})$", s, re.I)
                if dm:
                    driver = dm.group(1)
                continue
            i, rest = int(m.group(1)), m.group(2)
            key, _, value = rest.rpartition(": ")
            key, value = key.strip().lower(), value.strip()
            d = dev(i)
            d.setdefault("source_line", n)
            if key.endswith("numa node"):
                d["numa_node"] = int(value) if value.lstrip("-").isdigit() else None
            elif key == "device id":
                d["pci_id"] = f"1002:{_hex_id(value)}" if _hex_id(value) else None
            elif key in ("card series", "card model", "device name", "marketing name", "card sku"):
                d.setdefault("name", value or None)
            elif key == "vbios version":
                d["vbios_version"] = value or None
            elif key.startswith("max graphics package power"):
                v = _num(value)[0]
                d["power_limit_enforced_mw"] = int(round(v * 1000)) if v is not None else None
            elif key == "pci bus":
                d["pci_bus_id"] = value.lower() if re.fullmatch(r"[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}"
                                                                r"\.[0-7]", value) else None
            elif key == "pcie replay count":
                d["pcie_replay_counter"] = int(value) if value.isdigit() else None
            elif key == "serial number":
                d["serial"] = value or None
            elif key == "gpu use (%)":
                d["utilization_gpu_percent"] = int(value) if value.isdigit() else None
            elif key.startswith("vram total memory"):
                v = _num(value)[0]
                d["memory_total_bytes"] = int(v) if v is not None else None
    # the concise table
    for sec, body in sections.items():
        if "concise" not in sec.lower():
            continue
        for n, ln in body:
            toks = ln.split()
            if not toks or not toks[0].isdigit():
                continue
            d = dev(int(toks[0]))
            d.setdefault("source_line", n)
            did = re.search(r"0x([0-9a-fA-F]{4})\b", ln)
            if did and not d.get("pci_id"):
                d["pci_id"] = f"1002:{did.group(1).lower()}"
            watts = re.findall(r"(\d{1,5}(?:\.\d{1,3})?)\s?W\b", ln)
            if len(watts) >= 2 and d.get("power_limit_enforced_mw") is None:
                d["power_limit_enforced_mw"] = int(round(float(watts[1]) * 1000))
            pct = re.findall(r"(\d{1,3})%", ln)
            if pct and d.get("utilization_gpu_percent") is None:
                d["utilization_gpu_percent"] = int(pct[-1])
            d["partitions"] = ", ".join(re.findall(r"\b(NPS\d|[SDQC]PX)\b", ln)) or None
    mesh = None
    mats = {}
    for sec, body in sections.items():
        low = sec.lower()
        for key in ("weight", "hops", "link type"):
            if low.startswith(key):
                mats[key] = _matrix(body)
    if mats.get("link type"):
        lt = mats["link type"]
        names = [g for g in lt["names"] if re.fullmatch(r"GPU\d{1,4}", g)]
        n = len(names)
        missing = [g for g in names if g not in lt["rows"]]
        for g in missing:
            cuts.append({"line": lt["line"], "what": f"no row for {g} in the link-type matrix (cut)"})

        def cell(a: int, b: int) -> Optional[str]:
            ra, rb = lt["rows"].get(names[a]) or [], lt["rows"].get(names[b]) or []
            if b < len(ra):
                return ra[b].upper()
            if a < len(rb):
                return rb[a].upper()
            return None

        p2p = [[None if i == j or cell(i, j) is None else cell(i, j) == "XGMI" for j in range(n)] for i in range(n)]
        hops = mats.get("hops")
        weights = mats.get("weight")
        devices = []
        for i, g in enumerate(names):
            links = sum(1 for j in range(n) if p2p[i][j])
            devices.append({"bdf": g, "index": i, "links_active": links, "links_total": None, "versions": [],
                            "remote_types": []})
        mesh = {"source": "text: rocm-smi --showtopo", "devices": devices, "p2p_nvlink": p2p,
                "index_to_bdf": {str(i): g for i, g in enumerate(names)},
                "cells": {g: [cell(i, j) or "?" for j in range(n)] for i, g in enumerate(names)},
                "hops": {g: hops["rows"].get(g) for g in names} if hops else None,
                "weights": {g: weights["rows"].get(g) for g in names} if weights else None,
                "reason": None, "link_name": "XGMI", "row_lines": {g: lt["line"] for g in names}, "cuts": cuts}
        for i, g in enumerate(names):
            dev(i)
    if not devs and mesh is None:
        raise AmdTextError("no 'GPU[i] : ...' line, concise table or topology matrix: this is not rocm-smi output")
    out_devs = [devs[i] for i in sorted(devs)]
    return {"available": True, "source": "rocm-smi (text)", "format": "text", "driver_version": driver,
            "devices": out_devs, "errors": [], "cuts": cuts, "mesh": mesh,
            "complete": True}
