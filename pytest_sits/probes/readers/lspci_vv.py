"""``lspci -vv`` (and plain ``lspci``): every function's class and name, and the PCIe link readings of the
accelerators, in the shape of the live probe's; the bounds of :mod:`.text`.

``lspci -vv`` (pciutils' ``ls-caps.c``)
    Per function: the header (slot, class, name), the Express capability's
    port type, ``Bus: primary=.. secondary=.. subordinate=..`` of bridges,
    ``LnkCap`` (maximum speed and width), ``LnkSta`` (the trained speed and
    width; "(downgraded)", "(ok)" suffixes tolerated), ``LnkCap2``
    (supported speeds) and ``LnkCtl2`` (target speed).  The port above a
    device is the bridge of its domain whose secondary bus is the device's
    bus; its LnkCap is the slot's maximum.  The text is one reading: whether a
    load ran is the submitter's declaration (``under_load=True``), never an
    observation of the suite.
"""

from __future__ import annotations

import re
from typing import Any, Dict, Iterable, List, Optional

from ..pcie import gen_of
from .base import PCI, Detection, Entry, Machine, Reader, new_accelerator
from .pci import class_of, identify, pci_id_of, strip_rev, vendor_of_name
from .text import TextEvidenceError, text_lines

_VV_HEADER = re.compile(r"(?:(?P<dom>[0-9a-f]{4,8}):)?(?P<bus>[0-9a-f]{2}):(?P<slot>[0-9a-f]{2}\.[0-7]) "
                        r"(?P<cls>[^:]{1,80}): (?P<name>.*)$", re.I)
_SPEED = r"(?P<speed>[0-9.]{1,4}) ?GT/s|(?P<unknown>unknown)"
_LNKCAP = re.compile(r"LnkCap:\s*Port #\d{1,3}, Speed (?:" + _SPEED + r"), Width x(?P<width>\d{1,2})")
_LNKSTA = re.compile(r"LnkSta:\s*Speed (?:" + _SPEED + r")(?: \((?P<sflag>\w{1,12})\))?, Width x(?P<width>\d{1,2})"
                     r"(?: \((?P<wflag>\w{1,12})\))?")
_LNKCAP2 = re.compile(r"LnkCap2: Supported Link Speeds: (?:[0-9.]{1,4}-)?(?P<speed>[0-9.]{1,4}) ?GT/s")
_LNKCTL2 = re.compile(r"LnkCtl2: Target Link Speed: (?P<speed>[0-9.]{1,4}) ?GT/s")
_BUSLINE = re.compile(r"Bus: primary=(?P<pri>[0-9a-f]{2}), secondary=(?P<sec>[0-9a-f]{2}), "
                      r"subordinate=(?P<sub>[0-9a-f]{2})", re.I)
_EXPRESS = re.compile(r"Capabilities: \[[0-9a-f]{1,3}\] Express \(v\d\) (?P<type>[A-Za-z/ -]{3,60}?)"
                      r"(?: \(Slot[+-]\))?, (?:MSI|IntMsgNum)", re.I)
_PORT_WORDS = {"endpoint": "endpoint", "legacy endpoint": "legacy_endpoint", "root port": "root_port",
               "upstream port": "switch_upstream", "downstream port": "switch_downstream",
               "pci-express to pci/pci-x bridge": "pcie_to_pci_bridge",
               "pci/pci-x to pci-express bridge": "pci_to_pcie_bridge",
               "root complex integrated endpoint": "rc_integrated_endpoint",
               "root complex event collector": "rc_event_collector"}


def _gts(m: re.Match[str]) -> Optional[float]:
    return float(m.group("speed")) if m.group("speed") else None


def parse_lspci_vv(text: str) -> List[Dict[str, Any]]:
    """Every function of an ``lspci -vv`` text: slot, class, name, port type, bus range, LnkCap, LnkSta
    readings, LnkCap2/LnkCtl2 speeds.  A function printed more than once (several captures in one file) is
    one entry with several LnkSta readings."""
    lines = text_lines(text, "`lspci -vv`")
    funcs: Dict[str, Dict[str, Any]] = {}
    cur: Optional[Dict[str, Any]] = None
    for n, raw in enumerate(lines, 1):
        s = raw.strip()
        if not s:
            continue
        m = _VV_HEADER.match(s)
        if m:
            bdf = f"{(m.group('dom') or '0000').lower()}:{m.group('bus').lower()}:{m.group('slot').lower()}"
            cur = funcs.get(bdf)
            if cur is None:
                cur = funcs[bdf] = {"bdf": bdf, "class_words": m.group("cls").strip(),
                                    "class_code": class_of(m.group("cls")), "name": strip_rev(m.group("name")),
                                    "line": n, "port_type": None, "bus": None, "lnkcap": None, "lnksta": [],
                                    "lnkcap2_max_gts": None, "lnkctl2_target_gts": None, "notes": [],
                                    "numa_node": None}
            continue
        if cur is None:
            continue
        if "LnkCap:" in s:
            mm = _LNKCAP.search(s)
            if not mm:
                raise TextEvidenceError(f"line {n}: cannot read the speed and width of {s[:60]!r}")
            cur["lnkcap"] = {"speed_gts": _gts(mm), "width": int(mm.group("width")), "line": n, "raw": s[:120]}
        elif "LnkSta:" in s:
            mm = _LNKSTA.search(s)
            if not mm:
                raise TextEvidenceError(f"line {n}: cannot read the speed and width of {s[:60]!r}")
            cur["lnksta"].append({"speed_gts": _gts(mm), "width": int(mm.group("width")), "line": n,
                                  "raw": s[:120]})
        elif "LnkCap2:" in s:
            mm = _LNKCAP2.search(s)
            cur["lnkcap2_max_gts"] = float(mm.group("speed")) if mm else None
        elif "LnkCtl2:" in s:
            mm = _LNKCTL2.search(s)
            cur["lnkctl2_target_gts"] = float(mm.group("speed")) if mm else None
        elif s.startswith("NUMA node:"):
            mm = re.match(r"NUMA node:\s*(-?\d{1,5})$", s)
            cur["numa_node"] = int(mm.group(1)) if mm else None
        elif s.startswith("Bus:"):
            mm = _BUSLINE.match(s)
            if mm:
                cur["bus"] = {k: mm.group(k).lower() for k in ("pri", "sec", "sub")}
        elif s.startswith("Capabilities:"):
            mm = _EXPRESS.match(s)
            if mm:
                cur["port_type"] = _PORT_WORDS.get(mm.group("type").strip().lower(), mm.group("type").strip())
            elif "access denied" in s:
                cur["notes"].append(f"line {n}: capabilities not readable (`lspci -vv` run without root)")
    if not funcs:
        raise TextEvidenceError("no function header (bb:dd.f class: name) found: this is not `lspci -vv` output")
    return list(funcs.values())


def classes_by_bdf(funcs: List[Dict[str, Any]]) -> Dict[str, Dict[str, Any]]:
    """Class code and name of every function of an ``lspci -vv`` text, by BDF (``read_lspci_tv``'s ``classes``)."""
    return {f["bdf"]: {"class_code": f["class_code"], "name": f["name"]} for f in funcs}


def _port_above(dev: Dict[str, Any], funcs: List[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    dom, bus = dev["bdf"].rsplit(":", 2)[0], dev["bdf"].rsplit(":", 2)[1]
    for f in funcs:
        if f["bus"] and f["bdf"].rsplit(":", 2)[0] == dom and f["bus"]["sec"] == bus:
            return f
    return None


def link_evidence_vv(funcs: List[Dict[str, Any]], under_load: bool = False,
                     known_ids: Iterable[str] = ()) -> Dict[str, Any]:
    """TOPO-PCIE-LINK evidence for every accelerator of an ``lspci -vv`` text (the shape of
    ``conditions.topology.acquire_link_under_load``), and the functions that could not be identified.

    The device's LnkCap is its maximum, the LnkCap of the port above it (the bridge whose secondary bus is the
    device's bus) the slot's; the achievable link is the lower of the two (the device's alone when the port is
    not in the text, as the live probe does).  Every LnkSta of the device is one sample, counted under load only
    when the submitter declares that a load ran (``under_load``)."""
    out, unidentified = [], []
    for f in funcs:
        ident = identify(f["name"], f["class_code"], known_ids)
        if ident["accelerator"] is None:
            unidentified.append({"device": f["bdf"], "name": f["name"], "why": ident["why"],
                                 "source": f"lspci -vv line {f['line']}"})
        if not ident["accelerator"]:
            continue
        port = _port_above(f, funcs)
        dcap = f["lnkcap"] or {}
        pcap = (port or {}).get("lnkcap") or {}
        dmax = dcap.get("speed_gts") or f["lnkcap2_max_gts"]
        pmax = pcap.get("speed_gts") or (port or {}).get("lnkcap2_max_gts")
        speeds = [s for s in (dmax, pmax) if s]
        widths = [w for w in (dcap.get("width"), pcap.get("width")) if w]
        ach = min(speeds) if speeds else None
        cap = {"device_max_speed_gts": dmax, "device_max_width": dcap.get("width"),
               "slot": port["bdf"] if port else None, "slot_max_speed_gts": pmax, "slot_max_width": pcap.get("width"),
               "achievable_speed_gts": ach, "achievable_gen": gen_of(ach),
               "achievable_width": min(widths) if widths else None,
               "device_target_speed_gts": f["lnkctl2_target_gts"],
               "slot_target_speed_gts": (port or {}).get("lnkctl2_target_gts"),
               "slot_port_type": (port or {}).get("port_type"),
               "source": "LnkCap/LnkCap2/LnkCtl2 of the submitted `lspci -vv`"
                         + ("" if port else "; the port above the device is not in the text, so the slot's "
                                            "maximum is unknown and the device's own is the target")}
        samples = [{"speed_gts": r["speed_gts"], "gen": gen_of(r["speed_gts"]), "width": r["width"],
                    "under_load": bool(under_load), "raw": r["raw"], "source": f"lspci -vv line {r['line']}"}
                   for r in f["lnksta"]]
        if under_load:
            load = {"kind": "declared", "declared": True, "observed": False,
                    "reason": "the submitter declared that a load ran on the device while `lspci -vv` was captured; "
                              "the suite did not observe it"}
        else:
            load = {"kind": None, "declared": False,
                    "reason": "a submitted `lspci -vv` text with no declaration that a load ran (give --under-load "
                              "when it was captured under load)"}
        ev = {"device": f["bdf"], "capability": cap, "samples": samples, "load": load,
              "identified_by": ident["why"], "name": f["name"], "pci_id": ident["pci_id"],
              "method_text": ("LnkSta read from the submitted `lspci -vv` text; the load is declared by the "
                              "submitter, not observed" if under_load else
                              "LnkSta read from the submitted `lspci -vv` text, with no load declared (an idle "
                              "reading)")}
        if f["notes"]:
            ev["notes"] = f["notes"]
        out.append(ev)
    return {"links": out, "unidentified": unidentified}


_LSPCI_HEAD = re.compile(r"^(?:[0-9a-f]{4,8}:)?[0-9a-f]{2}:[0-9a-f]{2}\.[0-7] [^:\n]{1,80}: ", re.M | re.I)
_VV_DETAIL = re.compile(r"^\s+(?:Subsystem|Control|Capabilities|LnkCap|LnkSta|Kernel driver in use|NUMA node|"
                        r"Physical Slot|Flags|Region \d)\b", re.M)
_FUNCS = "lspci-vv functions"  # the machine's scratch: every function of the -vv texts, for the step's end


class LspciVv(Reader):
    kinds = {"lspci-vv": "lspci -vv"}
    steps = (PCI,)
    order = 70
    option = "--lspci-vv"
    option_help = "`lspci -vv` output: TOPO-PCIE-LINK from LnkCap/LnkSta (and the class of each function)"
    link_load = "declared"

    def detect(self, head: str) -> Optional[Detection]:
        if _LSPCI_HEAD.search(head):
            if _VV_DETAIL.search(head):
                return "lspci-vv", "function headers with indented details"
            return "lspci-vv", "function headers ('bb:dd.f Class: Name': plain lspci)"
        return None

    def parse(self, kind: str, text: str, known_ids: Iterable[str] = ()) -> Dict[str, Any]:
        return {"functions": parse_lspci_vv(text)}

    def merge(self, machine: Machine, entry: Entry, step: int) -> None:
        funcs = entry["facts"]["functions"]
        machine.scratch.setdefault(_FUNCS, []).extend(funcs)
        for fn in funcs:
            machine.pci.setdefault(fn["bdf"], {"bdf": fn["bdf"], "pci_id": pci_id_of(fn["name"]),
                                               "class": f"0x{fn['class_code']:04x}00"
                                               if fn.get("class_code") is not None else None, "name": fn["name"],
                                               "source": entry["name"]})

    def finish(self, machine: Machine, step: int) -> None:
        """The link readings of every accelerator of the -vv texts (a port above a device may be in another)."""
        vv_funcs: List[Dict[str, Any]] = machine.scratch.get(_FUNCS) or []
        if not vv_funcs:
            return
        vv = link_evidence_vv(vv_funcs, under_load=machine.under_load)
        machine.unidentified.extend(vv["unidentified"])
        for ev in vv["links"]:
            bdf = ev["device"]
            vendor = vendor_of_name(ev.get("name"))
            a = machine.add(bdf, new_accelerator(bdf, ev.get("pci_id"), vendor, ev.get("name"), "lspci -vv"))
            fn = next((x for x in vv_funcs if x["bdf"] == bdf), {})
            if fn.get("numa_node") is not None and fn["numa_node"] >= 0:
                a["numa_node"] = a["numa_node"] if a["numa_node"] is not None else fn["numa_node"]
                machine.numa_cpus.setdefault(fn["numa_node"], None)
            links = machine.links
            if bdf not in links or not any(s.get("under_load") for s in links[bdf]["samples"]):
                links[bdf] = ev  # a -vv reading knows the slot's maximum; an idle -q reading does not


READER = LspciVv()
