"""``nvidia-smi topo -m``: the GPU x GPU matrix as peer-mesh evidence, each GPU's cells to the other devices as
PCIe switch evidence, and the CPU and NUMA affinity of each GPU; the bounds of :mod:`.text`.

``nvidia-smi topo -m`` (the legend)
    X = self; NV# = a bonded set of # NVLinks; PIX = at most one PCIe switch
    (older legend: "a single PCIe switch"); PXB = several PCIe switches, not
    the host bridge; PHB = through a PCIe host bridge (the CPU); NODE = between
    host bridges of one NUMA node; SYS (older: SOC) = across NUMA nodes.  The
    header needs no leading whitespace; GPU, NIC (``NIC0`` .. ``NIC11`` and
    more) and older named columns (``mlx5_0``) are read up to ``CPU
    Affinity``; the legends may be cut or missing.  PIX/PXB between a GPU and
    another GPU or NIC is evidence of a switch above the GPU (two distinct
    devices share a bridge below the host bridge only through a switch): at
    least one switch, two switch ports.  PHB/NODE/SYS only means no switch is
    *shared*; a switch serving the GPU alone does not show in the matrix, so
    that cannot pass the requirement: it is judged INCONCLUSIVE, saying so.
"""

from __future__ import annotations

import re
from typing import Any, Dict, Iterable, List, Optional, Tuple

from .base import TOPOLOGY, Detection, Entry, Machine, Reader, mapped_mesh, new_accelerator
from .text import TextEvidenceError, check_device_count, text_lines

#: Cell codes of the `topo -m` legend (SOC: the older name of SYS).
TOPO_CODES = {"X", "SYS", "SOC", "NODE", "PHB", "PXB", "PIX"}
_NV = re.compile(r"NV\d{1,3}", re.I)
_SWITCH_CELLS = {"PIX", "PXB"}
_HOST_CELLS = {"PHB", "NODE", "SYS", "SOC"}


_ANSI = re.compile(r"\x1b?\[[0-9]{0,2}(?:;[0-9]{1,2}){0,4}m")


def _summary(cells: List[Tuple[str, str]]) -> str:
    """'PHB to GPU1, GPU2; SYS to NIC0' for [(peer, cell), ...] (at most 8 peers named per cell)."""
    by: Dict[str, List[str]] = {}
    for peer, cell in cells:
        by.setdefault(cell, []).append(peer)
    return "; ".join(f"{c} to {', '.join(p[:8])}{f' and {len(p) - 8} more' if len(p) > 8 else ''}"
                     for c, p in sorted(by.items()))


def _is_cell(tok: str) -> bool:
    return tok.upper() in TOPO_CODES or _NV.fullmatch(tok) is not None


_CPULIST = re.compile(r"\d{1,5}(?:-\d{1,5})?(?:,\d{1,5}(?:-\d{1,5})?){0,255}$")
_ROW_NAME = re.compile(r"(?:GPU|NIC)\d{1,4}$|mlx\d_\w{1,24}$|[a-z][a-z0-9]{0,7}_\w{1,24}$|ib\w{1,16}$", re.I)


def parse_nvidia_smi_topo(text: str) -> Dict[str, Any]:
    """The matrix of ``nvidia-smi topo -m``: the GPU x GPU part as peer-mesh evidence (NV# cells are NVLink),
    and every GPU's cells to the other GPUs and the NICs (``pcie_cells``) for the switch evidence; the CPU and
    NUMA affinity of each GPU.

    Rows and columns list the same devices in the same order, so a matrix whose header or rows were cut by the
    terminal is read from what is left: a cell missing from one row is taken from the symmetric one, a row
    whose column was cut from the header still gives its cells to the GPUs.  What was cut is listed in
    ``cuts``."""
    # nvidia-smi underlines the header on a terminal; copies keep the escapes, or their text without ESC
    lines = [_ANSI.sub("", ln) for ln in text_lines(text, "`nvidia-smi topo -m`")]
    header_idx, cols = None, []
    for i, ln in enumerate(lines):
        toks = ln.split()
        if toks and toks[0] == "GPU0" and (len(toks) == 1 or not _is_cell(toks[1])):
            header_idx, cols = i, toks
            break
    if header_idx is None:
        raise TextEvidenceError("no header line starting with GPU0: this is not `nvidia-smi topo -m` output")
    end = cols.index("CPU") if "CPU" in cols else len(cols)
    devcols = cols[:end]
    check_device_count(sum(1 for c in devcols if c.startswith("GPU")), "`nvidia-smi topo -m`", header_idx + 1)
    if len(set(devcols)) != len(devcols):
        raise TextEvidenceError(f"line {header_idx + 1}: a column name appears twice in the header")
    cuts: List[Dict[str, Any]] = []
    if "CPU" not in cols:
        cuts.append({"line": header_idx + 1, "what": "the header ends before 'CPU Affinity': columns were cut"})
    rows: Dict[str, List[str]] = {}
    extra: Dict[str, List[str]] = {}  # what follows the cells: CPU affinity, NUMA affinity, GPU NUMA ID
    row_line: Dict[str, int] = {}
    order: List[str] = []
    for n, ln in enumerate(lines[header_idx + 1:], header_idx + 2):
        parts = ln.split()
        if not parts:
            continue
        if parts[0].rstrip(":") in ("Legend", "NIC"):  # the legends follow the matrix
            break
        name = parts[0]
        if name not in devcols and not (_ROW_NAME.match(name) and len(parts) > 1 and _is_cell(parts[1])):
            continue
        cells: List[str] = []
        for c in parts[1:]:
            if _is_cell(c) or (c.upper() == "N/A" and len(cells) < len(devcols)):
                cells.append(c.upper())
            else:
                break
        if name in rows:
            raise TextEvidenceError(f"line {n}: a second row {name} (first at line {row_line[name]})")
        rows[name] = cells
        extra[name] = parts[1 + len(cells):]
        row_line[name] = n
        order.append(name)
    # The device order: the rows' (the header may have lost its right end); the header's where rows are missing.
    if order[:len(devcols)] == devcols[:len(order)]:
        names = order + [c for c in devcols if c not in order]
    else:
        names = devcols + [r for r in order if r not in devcols]
    for r in order:
        if r not in devcols:
            cuts.append({"line": row_line[r], "what": f"column {r} is not in the header (cut), its row is"})
    for r in devcols:
        if r not in rows:
            cuts.append({"line": header_idx + 1, "what": f"no row for {r} (cut)"})
        elif len(rows[r]) < len(names):
            cuts.append({"line": row_line[r], "what": f"row {r} has {len(rows[r])} of {len(names)} cells (cut); "
                                                      "the missing ones are read from the other rows"})
    gpus = [c for c in names if re.fullmatch(r"GPU\d{1,4}", c)]
    if not gpus:
        raise TextEvidenceError(f"line {header_idx + 1}: no GPU column: this is not `nvidia-smi topo -m` output")
    pos = {name: i for i, name in enumerate(names)}

    def cell(a: str, b: str) -> Optional[str]:
        if a == b:
            return "X"
        ra, rb = rows.get(a) or [], rows.get(b) or []
        if pos[b] < len(ra) and ra[pos[b]] != "N/A":
            return ra[pos[b]]
        if pos[a] < len(rb) and rb[pos[a]] != "N/A":
            return rb[pos[a]]
        return None

    nic_legend = {}
    for ln in lines[header_idx + 1:]:
        m = re.match(r"\s*(NIC\d{1,4})\s*:\s*(\S{1,64})\s*$", ln)
        if m:
            nic_legend[m.group(1)] = m.group(2)
    n = len(gpus)
    gcells = {g: [cell(g, h) for h in gpus] for g in gpus}
    p2p = [[None if i == j or gcells[gpus[i]][j] is None else str(gcells[gpus[i]][j]).startswith("NV")
            for j in range(n)] for i in range(n)]
    devices = []
    for i, g in enumerate(gpus):
        counts = [int(c[2:]) for c in gcells[g] if c and _NV.fullmatch(c)]
        devices.append({"bdf": g, "index": i, "links_active": max(counts) if counts else 0,
                        "links_total": None, "versions": [], "remote_types": []})
    others = [c for c in names if c not in gpus]
    pcie = {g: {c: v for c in names if c != g for v in [cell(g, c)] if v is not None} for g in gpus}
    unknown = {g: [c for c in names if c != g and cell(g, c) is None] for g in gpus}
    cpu_aff: Dict[str, Optional[str]] = {}
    numa: Dict[str, Optional[int]] = {}
    for g in gpus:
        rest = extra.get(g) or []
        cpu = rest[0] if rest and _CPULIST.match(rest[0]) else None
        cpu_aff[g] = cpu
        node = rest[1] if cpu is not None and len(rest) > 1 else None
        numa[g] = int(node) if node is not None and node.isdigit() and len(node) <= 5 else None
    return {"source": "text: nvidia-smi topo -m", "devices": devices, "p2p_nvlink": p2p,
            "index_to_bdf": {str(i): g for i, g in enumerate(gpus)}, "cells": gcells, "reason": None,
            "nics": others, "nic_legend": nic_legend, "pcie_cells": pcie, "unknown_cells": unknown,
            "row_lines": {g: row_line.get(g, header_idx + 1) for g in gpus}, "cuts": cuts,
            "cpu_affinity": cpu_aff, "numa_affinity": numa, "link_name": "NVLink"}


def topo_pcie_paths(mesh: Dict[str, Any]) -> List[Dict[str, Any]]:
    """TOPO-PCIE-DIRECT evidence per GPU from a ``topo -m`` matrix alone (no ``lspci -tv``).

    PIX/PXB to another GPU or a NIC: a switch above the GPU (at least one: an upstream and a downstream port),
    the rest of the path unknown.  Otherwise the path is unknown, and the hop says what the matrix did show."""
    out = []
    legend = mesh.get("nic_legend") or {}
    for g, peers in mesh["pcie_cells"].items():
        named = {p: (f"{p} ({legend[p]})" if p in legend else p)
                 for p in list(peers) + list((mesh.get("unknown_cells") or {}).get(g) or [])}
        shared = _summary([(named[p], c) for p, c in peers.items() if c in _SWITCH_CELLS])
        host = _summary([(named[p], c) for p, c in peers.items() if c in _HOST_CELLS])
        src = "inferred (nvidia-smi topo -m)"
        hops: List[Dict[str, Any]]
        if shared:
            hops = [{"bdf": f"downstream port of a PCIe switch above {g} (shared: {shared})",
                     "class": None, "pci_id": None, "port_type": "switch_port_inferred", "type_source": src,
                     "link": {}},
                    {"bdf": "that switch's upstream port", "class": None, "pci_id": None,
                     "port_type": "switch_port_inferred", "type_source": src, "link": {}},
                    {"bdf": "the rest of the path up to the root port (not shown by `nvidia-smi topo -m`)",
                     "class": None, "pci_id": None, "port_type": "unknown", "type_source": src, "link": {}}]
            note = ("PIX = at most one PCIe switch, PXB = several, between two distinct devices: at least one "
                    "switch (two switch ports) is above the GPU; more may be")
        elif host:
            hops = [{"bdf": f"the bridges above {g} (no switch seen: {host}; a switch serving {g} alone does not "
                            "show in the matrix, so the path could not be judged: submit `lspci -tv`)",
                     "class": None, "pci_id": None, "port_type": "unknown", "type_source": src, "link": {}}]
            note = "no switch seen"
        else:
            cut = (mesh.get("unknown_cells") or {}).get(g) or []
            what = (f"its cells to {', '.join(named.get(c, c) for c in cut[:8])} were cut from the text" if cut
                    else f"the matrix has no PCIe cell for {g}, only NVLink or none")
            hops = [{"bdf": f"the bridges above {g} ({what}: the path could not be judged; submit `lspci -tv`)",
                     "class": None, "pci_id": None, "port_type": "unknown", "type_source": src, "link": {}}]
            note = "cells cut from the text" if cut else "nothing in the matrix"
        out.append({"device": g, "pci_id": None, "hops": hops, "method": "inferred", "note": note,
                    "method_text": "read from the PIX/PXB/PHB/NODE/SYS cells of the submitted `nvidia-smi topo "
                                   "-m` matrix (legend: PIX/PXB = through PCIe switches); the path itself is not "
                                   "in the matrix",
                    "source": f"nvidia-smi topo -m line {mesh.get('row_lines', {}).get(g, '?')}"})
    return out


_TOPO_ROW = re.compile(r"^\s*GPU\d{1,4}\s+(?:X|NV\d{1,3}|SYS|SOC|NODE|PHB|PXB|PIX)\s", re.M)


class NvidiaSmiTopo(Reader):
    kinds = {"nvidia-smi-topo": "nvidia-smi topo -m"}
    steps = (TOPOLOGY,)
    order = 40
    option = "--nvidia-smi-topo"

    def detect(self, head: str) -> Optional[Detection]:
        if _TOPO_ROW.search(head) and re.search(r"^\s*GPU0\b", head, re.M):
            return "nvidia-smi-topo", "a GPU0.. header and rows of X/NV#/SYS/NODE/PHB/PXB/PIX cells"
        return None

    def parse(self, kind: str, text: str, known_ids: Iterable[str] = ()) -> Dict[str, Any]:
        return parse_nvidia_smi_topo(text)

    def merge(self, machine: Machine, entry: Entry, step: int) -> None:
        """The mesh (the first file's), NUMA affinity and PCIe cells; the matrix's GPUs are matched to the PCI
        addresses of the NVIDIA GPUs the other texts give, in bus order, when the counts agree."""
        f, m = entry, entry["facts"]
        gpus = [d["bdf"] for d in m["devices"]]
        nv_keys = machine.keys_of("NVIDIA")
        mapping: Dict[str, str] = {}
        if len(nv_keys) == len(gpus):
            mapping = dict(zip(gpus, nv_keys))
        elif nv_keys:
            whole = machine.complete.get("nvidia")
            if whole:  # both list every GPU of their machine, and the counts differ: two machines
                machine.conflict("the number of NVIDIA GPUs", len(gpus), len(nv_keys), f["name"], whole[0])
            machine.notes.append(f"{f['name']} lists {len(gpus)} GPUs, the other texts {len(nv_keys)} NVIDIA GPU(s) "
                                 "by PCI address: its rows could not be matched to addresses, so neither its mesh "
                                 "nor its per-GPU cells are used")
            return
        else:
            for g in gpus:
                a = machine.add(g, new_accelerator(g, None, "NVIDIA", None, f["name"]))
                a["note"] = "named by its index in nvidia-smi topo -m; no text gives its PCI address or model"
            mapping = {g: g for g in gpus}
        if machine.mesh is None:
            machine.mesh = mapped_mesh(m, mapping)
            machine.mesh_file = f["name"]
        accs, numa_cpus = machine.accs, machine.numa_cpus
        for g, key in mapping.items():
            node = (m.get("numa_affinity") or {}).get(g)
            if node is not None:
                accs[key]["numa_node"] = accs[key]["numa_node"] if accs[key]["numa_node"] is not None else node
                if numa_cpus.get(node) is None:
                    numa_cpus[node] = (m.get("cpu_affinity") or {}).get(g)
        topo_paths = {p["device"]: p for p in topo_pcie_paths(m)}
        for g, key in mapping.items():
            p = topo_paths.get(g)
            if p is None or key in machine.paths:
                continue
            if p["note"] == "nothing in the matrix":  # no PCIe cell at all: the matrix says nothing of the path
                machine.path_reasons.setdefault(key, f"{f['name']} (nvidia-smi topo -m) has no PCIe cell for {g}, "
                                                     "only NVLink: the PCIe path is not in it; submit `lspci -tv` or "
                                                     "`lspci -PP`")
                continue
            machine.paths[key] = dict(p, device=key, source=f"{p['source']} of {f['name']}")
        machine.complete.setdefault("nvidia", []).append(f"{f['name']} (nvidia-smi topo -m lists every GPU)")


READER = NvidiaSmiTopo()
