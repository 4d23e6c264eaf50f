"""Topology evidence from text a vendor submitted: ``lspci -tv`` and ``nvidia-smi topo -m``.

For audit without the machine.  The parsed evidence has the same shape as the
live probes' (PCIe path, peer mesh), so the same checks decide; the method
says it came from text.  From ``lspci -tv`` the port types are inferred (the
tree shows bridges and their bus ranges, not their Device/Port Type): the
topmost bridge above a device is its root port, every bridge below it a
switch port - exactly SITS2026 A's reading of the tree ("only one root-port
level above the GPU").
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional

_SEG = re.compile(r"([0-9a-f]{2}\.[0-7])(?:-\[([0-9a-f]{2,4})(?:-([0-9a-f]{2,4}))?\])?", re.I)
_ROOT = re.compile(r"\[([0-9a-f]{4}):([0-9a-f]{2})\]", re.I)
_ID = re.compile(r"\[([0-9a-f]{4}):([0-9a-f]{4})\]", re.I)
DEFAULT_MATCH = re.compile(r"NVIDIA|Instinct|Huawei|Habana|\[(10de|1002|19e5|1da3):", re.I)


class TextEvidenceError(ValueError):
    """The text is not the output it claims to be; the message names the line."""


def parse_lspci_tv(text: str, match: Optional[re.Pattern] = None) -> List[Dict[str, Any]]:
    """Paths of the matching devices: [{"device": bdf, "name", "pci_id", "hops": [...], "method"}]."""
    match = match or DEFAULT_MATCH
    stack: List[Dict[str, Any]] = []  # open nodes: column, bus of their children, is-bridge
    domain, root_bus = "0000", "00"
    found = []
    saw_tree = False
    for lineno, line in enumerate(text.splitlines(), 1):
        m = _ROOT.search(line)
        segs = list(_SEG.finditer(line))
        if m and (not segs or m.start() < segs[0].start()):
            domain, root_bus = m.group(1).lower(), m.group(2).lower()
            stack = [{"col": m.start(), "child_bus": root_bus, "bdf": None, "bridge": False}]
            saw_tree = True
        if not segs:
            continue
        if not saw_tree:
            raise TextEvidenceError(f"line {lineno}: a device before any [domain:bus] root; is this `lspci -tv` output?")
        col = segs[0].start()
        while len(stack) > 1 and stack[-1]["col"] >= col:
            stack.pop()
        for k, s in enumerate(segs):
            parent = stack[-1]
            bdf = f"{domain}:{parent['child_bus']}:{s.group(1).lower()}"
            node = {"col": s.start(), "bdf": bdf, "bridge": s.group(2) is not None,
                    "child_bus": (s.group(2) or "").lower()[-2:] or None}
            if k == len(segs) - 1:
                name = line[s.end():].strip(" -")
                if name and match.search(name):
                    chain = [n for n in stack if n["bdf"]]
                    hops = []
                    for pos, n in enumerate(reversed(chain)):
                        top = pos == len(chain) - 1
                        hops.append({"bdf": n["bdf"], "class": "0x0604" if n["bridge"] else None, "pci_id": None,
                                     "port_type": ("root_port" if top else "switch_port_inferred") if n["bridge"]
                                     else "unknown", "type_source": "inferred (lspci -tv text)", "link": {}})
                    ids = _ID.search(name)
                    found.append({"device": bdf, "name": name, "pci_id": f"{ids.group(1)}:{ids.group(2)}".lower()
                                  if ids else None, "hops": hops, "method": "inferred",
                                  "note": None if hops else "no bridge above the device in the tree",
                                  "source": f"lspci -tv line {lineno}"})
            stack.append(node)
    if not saw_tree:
        raise TextEvidenceError("no `[domain:bus]` root found: this is not `lspci -tv` output")
    return found


def parse_nvidia_smi_topo(text: str) -> Dict[str, Any]:
    """The GPU x GPU matrix of ``nvidia-smi topo -m`` as peer-mesh evidence (NV# cells are NVLink)."""
    lines = [ln.rstrip() for ln in text.splitlines() if ln.strip()]
    header_idx = next((i for i, ln in enumerate(lines) if re.match(r"^\s+GPU0\b", ln)), None)
    if header_idx is None:
        raise TextEvidenceError("no header line starting with GPU0: this is not `nvidia-smi topo -m` output")
    cols = lines[header_idx].split()
    gpus = [c for c in cols if re.fullmatch(r"GPU\d+", c)]
    rows = {}
    for ln in lines[header_idx + 1:]:
        parts = ln.split()
        if not parts or not re.fullmatch(r"GPU\d+", parts[0]):
            continue
        if len(parts) < len(gpus) + 1:
            raise TextEvidenceError(f"row {parts[0]}: {len(parts) - 1} cells for {len(gpus)} GPUs")
        rows[parts[0]] = parts[1:len(gpus) + 1]
    missing = [g for g in gpus if g not in rows]
    if missing:
        raise TextEvidenceError(f"no row for {', '.join(missing)}")
    n = len(gpus)
    p2p = [[None if i == j else rows[gpus[i]][j].upper().startswith("NV") for j in range(n)] for i in range(n)]
    devices = []
    for i, g in enumerate(gpus):
        counts = [int(c[2:]) for c in rows[g] if re.fullmatch(r"NV\d+", c, re.I)]
        devices.append({"bdf": g, "index": i, "links_active": max(counts) if counts else 0,
                        "links_total": None, "versions": [], "remote_types": []})
    return {"source": "text: nvidia-smi topo -m", "devices": devices, "p2p_nvlink": p2p,
            "index_to_bdf": {str(i): g for i, g in enumerate(gpus)}, "cells": rows, "reason": None}
