"""``nvidia-smi nvlink -s`` (``--status``): each GPU's NVLink links, up with their speed or inactive
(LINK-NVLINK-MESH).

The layout (every driver since NVLink 2; some captures are indented as a whole)::

    GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-...)
             Link 0: 26.562 GB/s
             Link 4: <inactive>
    GPU 6: NVIDIA A100-SXM4-80GB (UUID: GPU-...)
    NVML: Unable to retrieve NVLink information as all links are inactive

A GPU whose every link is inactive prints the NVML line instead of its links ("inActive" on some drivers).  The
text names no peer: a link that is up says nothing of which GPU (or NVSwitch) it reaches.  So this text decides a
pair only where it can: a GPU with no active NVLink cannot reach any peer over NVLink (the pairs it is in have no
NVLink P2P), and the other pairs stay unknown (``nvidia-smi topo -m`` or ``nvidia-smi nvlink -R`` tells them).
A matrix of ``topo -m`` among the submitted files is the mesh; this text then only adds each GPU's link states.

GPUs are matched to the other texts' GPUs by UUID, else by their index in bus order when the counts agree.
"""

from __future__ import annotations

import re
from typing import Any, Dict, Iterable, List, Optional

from .base import Detection, Entry, Machine, Reader, new_accelerator
from .nvidia_smi_nvlink import _ELIDED, MAX_GPUS, MAX_LINKS
from .text import TextEvidenceError, text_lines

#: After the devices, the topology and the error counters.
NVLINK_STATUS_STEP = 46

_GPU = re.compile(r"^GPU (\d{1,4}): (.{1,120}?)(?: \(UUID: (GPU-[0-9A-Fa-f-]{8,64})\))?\s*$")
_LINK = re.compile(r"^Link (\d{1,3}): (?:(\d{1,4}(?:\.\d{1,6})?) GB/s|<inactive>|inactive)\s*$", re.I)
_ALL_INACTIVE = re.compile(r"^NVML: Unable to retrieve NVLink information as all links are inactive\s*$", re.I)
_NOT_SUPPORTED = re.compile(r"^NVML: .{0,120}(?:not supported|Not Supported).{0,40}$")


def parse_nvlink_status(text: str) -> Dict[str, Any]:
    """{gpus: [{index, name, uuid, line, links: {link: GB/s or None (inactive)}, all_inactive, cut}], cuts}."""
    gpus: List[Dict[str, Any]] = []
    cuts: List[Dict[str, Any]] = []
    cur: Optional[Dict[str, Any]] = None
    for n, raw in enumerate(text_lines(text, "nvidia-smi nvlink -s"), 1):
        line = raw.strip()
        if not line:
            continue
        g = _GPU.match(line)
        if g:
            if len(gpus) >= MAX_GPUS:
                raise TextEvidenceError(f"line {n}: more than {MAX_GPUS} GPUs; fix: submit one machine's output")
            cur = {"index": int(g.group(1)), "name": g.group(2).strip(), "uuid": g.group(3), "line": n, "links": {},
                   "all_inactive": False, "not_supported": False, "cut": False}
            gpus.append(cur)
            continue
        if _ELIDED.match(line):
            cuts.append({"line": n, "text": line[:80], "gpu": cur["index"] if cur else None})
            if cur is not None:
                cur["cut"] = True
            continue
        if cur is None:
            raise TextEvidenceError(f"line {n}: {line[:80]!r} before any `GPU N: ...` header; fix: submit the whole "
                                    "output of `nvidia-smi nvlink -s`, from its first line")
        m = _LINK.match(line)
        if m:
            link = m.group(1)
            if link not in cur["links"] and len(cur["links"]) >= MAX_LINKS:
                raise TextEvidenceError(f"line {n}: more than {MAX_LINKS} links on GPU {cur['index']}")
            cur["links"][link] = float(m.group(2)) if m.group(2) else None
            continue
        if _ALL_INACTIVE.match(line):
            cur["all_inactive"] = True
            continue
        if _NOT_SUPPORTED.match(line):
            cur["not_supported"] = True
            continue
        raise TextEvidenceError(f"line {n}: {line[:80]!r} is neither a GPU header (`GPU 0: NAME (UUID: ...)`) nor a "
                                "link state (`Link 0: 26.562 GB/s`, `Link 4: <inactive>`); fix: submit the output of "
                                "`nvidia-smi nvlink -s` as printed")
    if not gpus:
        raise TextEvidenceError("line 1: no `GPU N: ...` header: not the output of `nvidia-smi nvlink -s`")
    for gpu in gpus:
        if gpu["links"] and gpu["all_inactive"]:
            raise TextEvidenceError(f"line {gpu['line']}: GPU {gpu['index']} lists links and also says all its links "
                                    "are inactive; fix: submit one run's output")
    return {"gpus": gpus, "cuts": cuts}


def _active(g: Dict[str, Any]) -> Optional[int]:
    """Active links of a GPU as printed; None where the text cannot say (links elided, NVLink not supported)."""
    if g["all_inactive"]:
        return 0
    if g["not_supported"] or (g["cut"] and not any(v is not None for v in g["links"].values())):
        return None
    return sum(1 for v in g["links"].values() if v is not None)


class NvidiaSmiNvlinkStatus(Reader):
    kinds = {"nvidia-smi-nvlink-s": "nvidia-smi nvlink -s"}
    steps = (NVLINK_STATUS_STEP,)
    order = 46
    option = "--nvidia-smi-nvlink-s"
    option_help = "`nvidia-smi nvlink -s` (--status): each GPU's NVLink links, up with their speed or inactive"

    def detect(self, head: str) -> Optional[Detection]:
        if re.search(r"^\s*GPU \d{1,4}: .{1,120}\n\s*(?:Link \d{1,3}: (?:\d[\d.]* GB/s|<inactive>)|"
                     r"NVML: Unable to retrieve NVLink information as all links are inactive)", head, re.M | re.I):
            return "nvidia-smi-nvlink-s", "GPU headers followed by `Link N: <speed> GB/s` / `<inactive>` lines"
        return None

    def parse(self, kind: str, text: str, known_ids: Iterable[str] = ()) -> Dict[str, Any]:
        return parse_nvlink_status(text)

    def merge(self, machine: Machine, entry: Entry, step: int) -> None:
        """Each GPU's link states onto the accelerator it is; the mesh from them when no text gave one."""
        f, gpus = entry, entry["facts"]["gpus"]
        nv_keys = machine.keys_of("NVIDIA")
        by_uuid = {str((machine.accs[k].get("management") or {}).get("uuid") or ""): k for k in nv_keys}
        by_index = dict(zip(sorted(g["index"] for g in gpus), nv_keys)) if len(nv_keys) == len(gpus) else {}
        matched: List[Dict[str, Any]] = []
        for g in gpus:
            key = by_uuid.get(str(g["uuid"])) if g["uuid"] else None
            rule = "its UUID" if key else None
            if key is None and g["index"] in by_index:
                key, rule = by_index[g["index"]], "its index in bus order (the counts agree)"
            if key is None:
                if nv_keys:
                    machine.notes.append(f"{f['name']}: GPU {g['index']} (line {g['line']}) matches no GPU of the "
                                         "other texts by UUID, and the GPU counts differ: its link states are not "
                                         "used")
                    continue
                key = f"GPU{g['index']}"
                a = machine.add(key, new_accelerator(key, None, "NVIDIA", g["name"], f["name"]))
                a["note"] = "named by its index in nvidia-smi nvlink -s; no text gives its PCI address"
                rule = "no other text names the machine's GPUs"
            acc = machine.accs[key]
            acc["sources"] = sorted(set(acc["sources"]) | {f["name"]})
            if acc.get("nvlink_status") is not None:
                continue  # the first reading of a device is the one kept
            active = _active(g)
            acc["nvlink_status"] = {
                "links": g["links"], "active": active, "all_inactive": g["all_inactive"], "cut": g["cut"],
                "source": f"{f['name']} line {g['line']} (nvidia-smi nvlink -s, GPU {g['index']}, matched by {rule})"}
            matched.append({"key": key, "gpu": g, "active": active})
        if machine.mesh is not None or len(matched) < 2:
            return
        n = len(matched)
        dead = [i for i, d in enumerate(matched) if d["active"] == 0]
        p2p: List[List[Optional[bool]]] = [[None if i == j else (False if (i in dead or j in dead) else None)
                                            for j in range(n)] for i in range(n)]
        machine.mesh = {
            "source": "text: nvidia-smi nvlink -s", "link_name": "NVLink", "p2p_nvlink": p2p,
            "index_to_bdf": {str(i): d["key"] for i, d in enumerate(matched)},
            "devices": [{"bdf": d["key"], "index": i, "links_active": d["active"],
                         "links_total": len(d["gpu"]["links"]) or None, "versions": [], "remote_types": [],
                         "text_name": f"GPU {d['gpu']['index']}"} for i, d in enumerate(matched)],
            "reason": ("nvidia-smi nvlink -s names no peer: a GPU with no active NVLink has no NVLink P2P to any "
                       "other; the other pairs are unknown (submit `nvidia-smi topo -m` or `nvidia-smi nvlink -R`)"),
            "cuts": entry["facts"].get("cuts") or [],
        }
        machine.mesh_file = f["name"]


READER = NvidiaSmiNvlinkStatus()
