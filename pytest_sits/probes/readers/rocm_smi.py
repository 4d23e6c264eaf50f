"""``rocm-smi``: ``--showtopo`` (the XGMI mesh, hops, weights and each GPU's NUMA node), the concise table, and
the ``GPU[i] : key: value`` lines of its other options (``-a``), read into the facts the live amdsmi probe
gives.

``rocm-smi --showtopo`` prints three GPU x GPU matrices (weight, hops, link
type) and each GPU's NUMA node; a pair whose link type is ``XGMI`` has a
peer link.
"""

from __future__ import annotations

import re
from typing import Any, Dict, Iterable, List, Optional, Tuple

from .amd_common import AmdTextError, amd_lines, finish_driver, gpu_index, hex_id, index_gpus, merge_gpus, num_unit
from .base import AMD_DEVICES, AMD_MESH, AMD_NUMBERING, Detection, Entry, Machine, Reader, is_bdf, mapped_mesh
from .base import new_accelerator

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
    lines = amd_lines(text, "`rocm-smi`")
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
    for body in sections.values():
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
                d["pci_id"] = f"1002:{hex_id(value)}" if hex_id(value) else None
            elif key in ("card series", "card model", "device name", "marketing name", "card sku"):
                d.setdefault("name", value or None)
            elif key == "vbios version":
                d["vbios_version"] = value or None
            elif key.startswith("max graphics package power"):
                v = num_unit(value)[0]
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
                v = num_unit(value)[0]
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
    mats: Dict[str, Optional[Dict[str, Any]]] = {}
    for sec, body in sections.items():
        low = sec.lower()
        for key in ("weight", "hops", "link type"):
            if low.startswith(key):
                mats[key] = _matrix(body)
    lt = mats.get("link type")
    if lt:
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
        for i in range(len(names)):
            dev(i)
    if not devs and mesh is None:
        raise AmdTextError("no 'GPU[i] : ...' line, concise table or topology matrix: this is not rocm-smi output")
    out_devs = [devs[i] for i in sorted(devs)]
    return {"available": True, "source": "rocm-smi (text)", "format": "text", "driver_version": driver,
            "devices": out_devs, "errors": [], "cuts": cuts, "mesh": mesh,
            "complete": True}


_ROCM = re.compile(r"ROCm System Management Interface|End of ROCm SMI Log|^GPU\[\d{1,4}\]\s*:|"
                   r"between two GPUs", re.M)
_MESH = "rocm-smi mesh"  # the machine's scratch: the last rocm-smi text's mesh, and that file


class RocmSmi(Reader):
    kinds = {"rocm-smi": "rocm-smi"}
    steps = (AMD_NUMBERING, AMD_DEVICES, AMD_MESH)
    order = 30
    option = "--rocm-smi"
    option_help = "`rocm-smi` output (--showtopo, the concise table, -a)"

    def detect(self, head: str) -> Optional[Detection]:
        if _ROCM.search(head):
            return "rocm-smi", "rocm-smi banners or 'GPU[i] :' lines"
        return None

    def parse(self, kind: str, text: str, known_ids: Iterable[str] = ()) -> Dict[str, Any]:
        return parse_rocm_smi(text)

    def merge(self, machine: Machine, entry: Entry, step: int) -> None:
        if step == AMD_NUMBERING:
            index_gpus(machine, entry)
        elif step == AMD_DEVICES:
            merge_gpus(machine, entry, "rocm-smi lists every GPU")
        elif entry["facts"].get("mesh") is not None:
            machine.scratch[_MESH] = (entry["facts"]["mesh"], entry)

    def finish(self, machine: Machine, step: int) -> None:
        if step == AMD_DEVICES:
            finish_driver(machine)
        elif step == AMD_MESH and machine.scratch.get(_MESH) is not None and machine.mesh is None:
            self._mesh(machine, *machine.scratch[_MESH])

    @staticmethod
    def _mesh(machine: Machine, rmesh: Dict[str, Any], f: Entry) -> None:
        """The XGMI mesh, where no `nvidia-smi topo -m` gave one: its GPUs named by the PCI addresses the AMD
        numbering gives them, or else by the AMD GPUs' addresses in bus order when the counts agree."""
        gpus = [d["bdf"] for d in rmesh["devices"]]
        by_index = gpu_index(machine)
        mapping = {g: by_index.get(i, g) for i, g in enumerate(gpus)}
        amd_keys = machine.keys_of("AMD")
        if all(not is_bdf(v) for v in mapping.values()) and len(amd_keys) == len(gpus):
            mapping = dict(zip(gpus, amd_keys))
        machine.mesh = mapped_mesh(rmesh, mapping)
        machine.mesh_file = f["name"]
        for _g, key in mapping.items():
            if key not in machine.accs:
                a = machine.add(key, new_accelerator(key, None, "AMD", None, f["name"]))
                a["note"] = "named by its index in rocm-smi; no text gives its PCI address"


READER = RocmSmi()
