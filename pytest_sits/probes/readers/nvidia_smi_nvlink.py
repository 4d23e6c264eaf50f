"""``nvidia-smi nvlink -e``: each GPU's NVLink error counters, per link (DEP-NVLINK-ERRORS).

The layout (nvidia-smi's ``nvlink -e``, every driver since NVLink 2)::

    GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-...)
             Link 0: Replay Errors: 0
             Link 0: Recovery Errors: 0
             Link 0: CRC Errors: 0

A GPU header line, then one line per link and counter.  "CRC Errors" is NVML's flit CRC counter
(``NVML_NVLINK_ERROR_DL_CRC_FLIT``); drivers that print the data CRC and the data ECC counters as well name them
"CRC Data Errors" and "ECC Data Errors".  Any other ``Link N: label: value`` line (newer drivers add receive,
symbol and bit-error-rate lines) is kept under ``other`` as printed and not judged.
Only active links are printed.  A text elided by hand (``[...]``, ``...``) hides links: that is recorded as a
cut, and the check does not take the links it shows for all of them.

GPUs are matched to the PCI addresses the other texts give by UUID (``nvidia-smi -q``'s GPU UUID), else by
their index in bus order when the counts agree (the order nvidia-smi numbers GPUs in), as ``topo -m`` is.
"""

from __future__ import annotations

import re
from typing import Any, Dict, Iterable, List, Optional

from .base import Detection, Entry, Machine, Reader
from .text import TextEvidenceError, text_lines

#: After the devices (``nvidia-smi -q``) and the topology: the GPUs are known by then.
NVLINK_COUNTERS_STEP = 45
#: More GPUs or links than any NVLink system has is not a capture of one machine.
MAX_GPUS = 576
MAX_LINKS = 36

_GPU = re.compile(r"^GPU (\d{1,4}): (.{1,120}?)(?: \(UUID: (GPU-[0-9A-Fa-f-]{8,64})\))?\s*$")
_LINK = re.compile(r"^Link (\d{1,3}): ([A-Za-z][A-Za-z ]{0,40}?) Errors?: (\d{1,20}|N/A)\s*$")
_LINK_OTHER = re.compile(r"^Link (\d{1,3}): ([^:]{1,60}): (.{0,80})$")
_ELIDED = re.compile(r"^(?:\[\s*(?:\.\.\.|…|snip)[^\]]{0,80}\]|\.{3,}|…|<snip>)$", re.I)
#: The counter names nvidia-smi prints, as NVML names them.
_NAMES = {"replay": "replay", "recovery": "recovery", "crc": "crc_flit", "crc flit": "crc_flit",
          "crc data": "crc_data", "ecc data": "ecc_data"}


def parse_nvlink_errors(text: str) -> Dict[str, Any]:
    """{gpus: [{index, name, uuid, line, links: {link: {counter: count or None}}}], cuts: [{line, text}]}."""
    gpus: List[Dict[str, Any]] = []
    cuts: List[Dict[str, Any]] = []
    cur: Optional[Dict[str, Any]] = None
    for n, raw in enumerate(text_lines(text, "nvidia-smi nvlink -e"), 1):
        line = raw.strip()
        if not line:
            continue
        g = _GPU.match(line)
        if g:
            if len(gpus) >= MAX_GPUS:
                raise TextEvidenceError(f"line {n}: more than {MAX_GPUS} GPUs; fix: submit one machine's output")
            cur = {"index": int(g.group(1)), "name": g.group(2).strip(), "uuid": g.group(3), "line": n, "links": {}}
            gpus.append(cur)
            continue
        m = _LINK.match(line)
        if (m or _LINK_OTHER.match(line)) and cur is None:
            raise TextEvidenceError(f"line {n}: a link counter before any `GPU N: ...` header; fix: submit the whole "
                                    "output of `nvidia-smi nvlink -e`, from its first line")
        if m and cur is not None:
            link, name, value = m.group(1), m.group(2).strip().lower(), m.group(3)
            if link not in cur["links"] and len(cur["links"]) >= MAX_LINKS:
                raise TextEvidenceError(f"line {n}: more than {MAX_LINKS} links on GPU {cur['index']}")
            cur["links"].setdefault(link, {})[_NAMES.get(name, name.replace(" ", "_"))] = \
                None if value == "N/A" else int(value)
            continue
        o = _LINK_OTHER.match(line)
        if o and cur is not None:
            link = o.group(1)
            if link not in cur["links"] and len(cur["links"]) >= MAX_LINKS:
                raise TextEvidenceError(f"line {n}: more than {MAX_LINKS} links on GPU {cur['index']}")
            other = cur["links"].setdefault(link, {}).setdefault("other", {})
            if len(other) < 16:
                other[o.group(2).strip()] = o.group(3).strip()
            continue
        if _ELIDED.match(line):
            cuts.append({"line": n, "text": line[:80], "gpu": cur["index"] if cur else None})
            if cur is not None:
                cur["cut"] = True
            continue
        raise TextEvidenceError(f"line {n}: {line[:80]!r} is neither a GPU header (`GPU 0: NAME (UUID: ...)`) nor a "
                                "link counter (`Link 0: Replay Errors: 0`); fix: submit the output of "
                                "`nvidia-smi nvlink -e` as printed")
    if not gpus:
        raise TextEvidenceError("line 1: no `GPU N: ...` header: not the output of `nvidia-smi nvlink -e`")
    return {"gpus": gpus, "cuts": cuts}


class NvidiaSmiNvlink(Reader):
    kinds = {"nvidia-smi-nvlink-e": "nvidia-smi nvlink -e"}
    steps = (NVLINK_COUNTERS_STEP,)
    order = 45
    option = "--nvidia-smi-nvlink-e"
    option_help = "`nvidia-smi nvlink -e`: each GPU's NVLink error counters per link"

    def detect(self, head: str) -> Optional[Detection]:
        if re.search(r"^GPU \d{1,4}: .{1,120}\n\s+Link \d{1,3}: [A-Za-z ]{1,40} Errors?: (?:\d|N/A)", head, re.M):
            return "nvidia-smi-nvlink-e", "GPU headers followed by `Link N: ... Errors: N` counters"
        return None

    def parse(self, kind: str, text: str, known_ids: Iterable[str] = ()) -> Dict[str, Any]:
        return parse_nvlink_errors(text)

    def merge(self, machine: Machine, entry: Entry, step: int) -> None:
        """Each GPU's counters onto the accelerator it is (by UUID, else by index in bus order), as one reading."""
        f, gpus = entry, entry["facts"]["gpus"]
        nv_keys = machine.keys_of("NVIDIA")
        by_uuid = {str((machine.accs[k].get("management") or {}).get("uuid") or ""): k for k in nv_keys}
        by_index = machine.by_bus_order([g["index"] for g in gpus], names={g["index"]: g["name"] for g in gpus},
                                        source=f["name"])
        for g in gpus:
            key = by_uuid.get(str(g["uuid"])) if g["uuid"] else None
            rule = "its UUID" if key else None
            if key is None and g["index"] in by_index:
                key, rule = by_index[g["index"]], "its index in bus order (the counts agree)"
            if key is None:
                if nv_keys:
                    machine.notes.append(f"{f['name']}: GPU {g['index']} (line {g['line']}) matches no GPU of the "
                                         "other texts by UUID, and the GPU counts differ: its counters are not used")
                    continue
                key = machine.named_gpu(g["index"], None, g["name"], f["name"], "index in nvidia-smi nvlink -e")
                rule = "no other text names the machine's GPUs"
            acc = machine.accs[key]
            if acc.get("nvlink_errors") is not None:
                continue  # the first reading of a device is the one kept
            acc["nvlink_errors"] = {
                "links": g["links"], "unread": [], "cut": bool(g.get("cut")),
                "source": f"{f['name']} line {g['line']} (nvidia-smi nvlink -e, GPU {g['index']}, matched by {rule})"}
            acc["sources"] = sorted(set(acc["sources"]) | {f["name"]})


READER = NvidiaSmiNvlink()
