"""``lspci -PP`` (and ``lspci -P``): each function's path from its root port, one line each; the bounds of
:mod:`.text`."""

from __future__ import annotations

import re
from typing import Any, Dict, Iterable, List, Optional

from .base import PCI, Detection, Entry, Machine, Reader
from .pci import class_of, identify, merge_paths, strip_rev
from .text import TextEvidenceError, text_lines

_PP_LINE = re.compile(r"(?:(?P<dom>[0-9a-f]{4,8}):)?(?P<path>[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]"
                      r"(?:/(?:[0-9a-f]{2}:)?[0-9a-f]{2}\.[0-7]){1,31}) (?P<cls>[^:]{1,80}): (?P<name>.{0,400})$", re.I)


def read_lspci_pp(text: str, known_ids: Iterable[str] = ()) -> Dict[str, Any]:
    """Paths of ``lspci -PP`` (``00:01.1/01:00.0/02:00.0 Class: Name``, the form AMD's acceptance guides use) or
    ``lspci -P`` (``00:01.1/00.0/00.0``: the buses below the first are not printed).

    The first element of a path is on a root bus: the root port above the device; every bridge after it, down
    to the device, is a switch port (PCIe places nothing else between a root port and an endpoint).  Returns
    ``{"accelerators": [path, ...], "functions": [...], "unidentified": [...], "not_accelerators": n}``."""
    lines = text_lines(text, "`lspci -PP`")
    accelerators, functions, unidentified, others = [], [], [], 0
    for n, raw in enumerate(lines, 1):
        m = _PP_LINE.match(raw.strip())
        if not m:
            continue
        dom = (m.group("dom") or "0000").lower()
        parts = m.group("path").lower().split("/")
        full = [parts[0]] + parts[1:]
        bus_known = all(":" in x for x in full)
        bdfs = [f"{dom}:{x}" if ":" in x else f"{dom}:??:{x}" for x in full]
        cls = class_of(m.group("cls"))
        name = strip_rev(m.group("name"))
        ident = identify(name, cls, known_ids)
        dev = bdfs[-1]
        functions.append({"bdf": dev, "name": name, "class_code": cls, "pci_id": ident.get("pci_id"),
                          "accelerator": ident["accelerator"], "line": n, "path": bdfs})
        if ident["accelerator"] is None:
            unidentified.append({"device": dev, "name": name, "why": ident["why"], "source": f"lspci -PP line {n}"})
            continue
        if not ident["accelerator"]:
            others += 1
            continue
        hops: List[Dict[str, Any]] = []
        bridges = bdfs[:-1]
        for pos, b in enumerate(reversed(bridges)):
            top = pos == len(bridges) - 1
            hops.append({"bdf": b, "class": "0x0604", "pci_id": None,
                         "port_type": "root_port" if top else "switch_port_inferred",
                         "type_source": "inferred (lspci -PP path: its first element is on a root bus)", "link": {}})
        accelerators.append({
            "device": dev, "name": name, "pci_id": ident.get("pci_id"), "hops": hops, "method": "inferred",
            "identified_by": ident["why"], "path_text": m.group("path"),
            "note": None if bus_known else "`lspci -P` prints no bus below the root port: the bridges are named "
                                           "by device and function only",
            "method_text": "port types inferred from the submitted `lspci -PP` path (its first element is the root "
                           "port, every bridge after it a switch port); not read from the devices' PCI Express "
                           "capability",
            "source": f"lspci -PP line {n}"})
    if not functions:
        raise TextEvidenceError("no 'bb:dd.f/bb:dd.f Class: Name' line: this is not `lspci -PP` output")
    return {"accelerators": accelerators, "functions": functions, "unidentified": unidentified,
            "not_accelerators": others}


_PP = re.compile(r"^(?:[0-9a-f]{4,8}:)?[0-9a-f]{2}:[0-9a-f]{2}\.[0-7](?:/(?:[0-9a-f]{2}:)?[0-9a-f]{2}\.[0-7])+ [^:\n]{1,80}:",
                 re.M | re.I)


class LspciPp(Reader):
    kinds = {"lspci-pp": "lspci -PP"}
    steps = (PCI,)
    order = 50
    option = "--lspci-pp"
    option_help = "`lspci -PP` paths"

    def detect(self, head: str) -> Optional[Detection]:
        if _PP.search(head):
            return "lspci-pp", "'bb:dd.f/bb:dd.f Class: Name' paths"
        return None

    def parse(self, kind: str, text: str, known_ids: Iterable[str] = ()) -> Dict[str, Any]:
        return read_lspci_pp(text, known_ids=known_ids)

    def merge(self, machine: Machine, entry: Entry, step: int) -> None:
        merge_paths(machine, entry, entry["tool"])  # taken to list every accelerator of the vendors it names


READER = LspciPp()
