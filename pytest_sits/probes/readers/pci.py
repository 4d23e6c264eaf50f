"""What the ``lspci`` readers share: which PCI functions of a text are accelerators, and how the PCIe paths of a
text are added to the machine.

Which functions are accelerators (the rule, in order)
    1. With a class code - ``[cccc]`` of ``lspci -nn``, the class words of an
       ``lspci -vv`` header ("3D controller", "VGA compatible controller",
       "Display controller", "Processing accelerators", ...) -  the sysfs rule
       applies unchanged (:func:`pytest_sits.probes.sysfs.is_accelerator`):
       a vendor of :data:`~pytest_sits.probes.sysfs.ACCEL_VENDORS` and class
       0x03 or 0x12 (Intel: 0x0380 or 0x12 only).  An HDMI audio function
       (0x0403) or an NVSwitch (bridge, 0x0680) is never an accelerator.
    2. Otherwise by vendor and device ID - ``[vvvv:dddd]`` (``-nn``), a bare
       ``vvvv:dddd`` (``-n``), or the vendor's pci.ids name followed by
       ``Device dddd`` (an old pci.ids that lacks the device): an ID of the
       profile's ``pci_ids`` or of :data:`ACCEL_IDS` is an accelerator, one of
       :data:`NOT_ACCEL_IDS` (HDMI/DP audio, USB/UCSI, NVSwitch) is not.
    3. Otherwise by name: the vendor named as in pci.ids must be an
       accelerator vendor; a device name with a non-accelerator word (audio,
       USB, UCSI, switch, bridge, SMBus, IOMMU, ...) is not one; for vendors
       that make little but accelerators (NVIDIA, AMD/ATI, Habana,
       Tenstorrent, Biren, Moore Threads) any other named function is one;
       for the others (Intel, Huawei, Baidu, Inspur) only a name with an
       accelerator word (Data Center GPU, Gaudi, Ascend, Kunlun, accelerator).
    4. A function of an accelerator vendor that none of these decides is
       reported as *unidentified* (with why), never silently dropped and never
       judged as an accelerator.
"""

from __future__ import annotations

import re
from typing import Any, Dict, Iterable, List, Optional, Tuple

from ..sysfs import ACCEL_VENDORS, is_accelerator
from .base import VENDORS, Entry, Machine, new_accelerator

#: Accelerator device IDs (pci.ids names), used when the text has no class code.
ACCEL_IDS: Dict[str, str] = {
    "10de:1db1": "GV100GL [Tesla V100 SXM2 16GB]", "10de:1db4": "GV100GL [Tesla V100 PCIe 16GB]",
    "10de:1db5": "GV100GL [Tesla V100 SXM2 32GB]", "10de:1db6": "GV100GL [Tesla V100 PCIe 32GB]",
    "10de:1df6": "GV100GL [Tesla V100S PCIe 32GB]", "10de:1eb8": "TU104GL [Tesla T4]",
    "10de:20b0": "GA100 [A100 SXM4 40GB]", "10de:20b2": "GA100 [A100 SXM4 80GB]",
    "10de:20b5": "GA100 [A100 PCIe 80GB]", "10de:20f1": "GA100 [A100 PCIe 40GB]", "10de:20b7": "GA100GL [A30 PCIe]",
    "10de:2321": "GH100 [H100 NVL]", "10de:2322": "GH100 [H800 PCIe]", "10de:2324": "GH100 [H800]",
    "10de:2329": "GH100 [H20]", "10de:2330": "GH100 [H100 SXM5 80GB]", "10de:2331": "GH100 [H100 PCIe]",
    "10de:2335": "GH100 [H200 SXM 141GB]", "10de:2342": "GH100 [GH200]",
    "10de:26b5": "AD102GL [L40]", "10de:26b9": "AD102GL [L40S]", "10de:27b8": "AD104GL [L4]",
    "10de:26b1": "AD102GL [RTX 6000 Ada Generation]", "10de:2235": "GA102GL [A40]", "10de:2236": "GA102GL [A10]",
    "10de:2237": "GA102GL [A10G]",
    "10de:2901": "GB100 [B200]",
    "1002:66a1": "Vega 20 [Instinct MI50/MI60]", "1002:738c": "Arcturus GL-XL [Instinct MI100]",
    "1002:7408": "Aldebaran/MI200 [Instinct MI250X]", "1002:740c": "Aldebaran/MI200 [Instinct MI250X/MI250]",
    "1002:740f": "Aldebaran/MI200 [Instinct MI210]", "1002:74a1": "Aqua Vanjaram [Instinct MI300X]",
    "1002:74a0": "Aqua Vanjaram [Instinct MI300A]",
    "1da3:1000": "Gaudi", "1da3:1020": "Gaudi2", "1da3:1060": "Gaudi3",
    "8086:0bd5": "Ponte Vecchio XT [Data Center GPU Max 1550]", "8086:0bda": "Ponte Vecchio XT [Data Center GPU Max 1100]",
    "8086:56c0": "ATS-M [Data Center GPU Flex 170]", "8086:56c1": "ATS-M [Data Center GPU Flex 140]",
    "19e5:d801": "Ascend 910", "19e5:d802": "Ascend 910B",
}
#: Functions of accelerator vendors that are not accelerators (no class code needed to exclude them).
NOT_ACCEL_IDS: Dict[str, str] = {
    "10de:1ac1": "NVSwitch (GV100 generation)", "10de:1af1": "GA100 [A100 NVSwitch]",
    "10de:22a3": "GH100 [H100 NVSwitch]",
    "10de:10f0": "GP104 HDMI audio", "10de:10f1": "GP106 HDMI audio", "10de:10f7": "TU102 HDMI audio",
    "10de:10f8": "TU104 HDMI audio", "10de:10f9": "TU106 HDMI audio", "10de:1aeb": "TU116 HDMI audio",
    "10de:1aef": "GA102 HDMI audio", "10de:228b": "GA104 HDMI audio", "10de:228e": "GA106 HDMI audio",
    "10de:22ba": "AD102 HDMI audio", "10de:22bb": "AD103 HDMI audio", "10de:22bc": "AD104 HDMI audio",
    "10de:1ad6": "TU102 USB 3.1 host controller", "10de:1ad7": "TU102 USB Type-C UCSI controller",
    "10de:1ad8": "TU104 USB 3.1 host controller", "10de:1ad9": "TU104 USB Type-C UCSI controller",
    "1002:aaf8": "Vega 10 HDMI audio", "1002:ab38": "Navi 10 HDMI audio", "1002:ab28": "Navi 21/23 HDMI/DP audio",
    "1002:ab30": "Navi 31 HDMI/DP audio",
    "1002:1470": "Vega 10 PCIe bridge (on-card switch port)", "1002:1471": "Vega 10 PCIe bridge (on-card switch port)",
    "1002:1478": "Navi 10 XL upstream port of PCI Express switch (on-card)",
    "1002:1479": "Navi 10 XL downstream port of PCI Express switch (on-card)",
}
#: pci.ids vendor names -> vendor ID (anchored at the start of the name).
_VENDOR_NAMES: List[Tuple[str, re.Pattern[str]]] = [
    ("10de", re.compile(r"n?vidia corporation\b", re.I)),
    ("1002", re.compile(r"advanced micro devices, inc\. \[amd/ati\]|ati technologies", re.I)),
    ("1022", re.compile(r"advanced micro devices, inc\. \[amd\]", re.I)),
    ("19e5", re.compile(r"huawei technologies", re.I)),
    ("1da3", re.compile(r"habana labs", re.I)),
    ("8086", re.compile(r"intel corporation", re.I)),
    ("1e52", re.compile(r"tenstorrent", re.I)),
    ("1d22", re.compile(r"baidu", re.I)),
    ("1e3e", re.compile(r"(?:shanghai )?biren", re.I)),
    ("1ed5", re.compile(r"moore threads", re.I)),
    ("1bd4", re.compile(r"inspur", re.I)),
    ("15b3", re.compile(r"mellanox technologies", re.I)),
]
#: Vendors that make little but accelerators: any named function without a non-accelerator word is one.
_ACCEL_ONLY_VENDORS = {"10de", "1002", "1da3", "1e52", "1e3e", "1ed5"}
_NOT_ACCEL_WORDS = re.compile(
    r"\b(?:audio|azalia|hdmi|usb|ucsi|nvswitch|switch|bridge|root (?:port|complex)|smbus|sata|ide|lpc|iommu|"
    r"memory management|ethernet|network|nvme|ssd|raid|serial|i2c|dummy|security processor|crypto\w*|"
    r"sb[0-9x]{2,}|rd[0-9]{3}|mcp[0-9]+|nforce)\b", re.I)
_ACCEL_WORDS = re.compile(r"data center gpu|ponte vecchio|gaudi|ascend|kunlun|accelerat|\binstinct\b|\btesla\b",
                          re.I)
_ID_BRACKET = re.compile(r"\[([0-9a-f]{4}):([0-9a-f]{4})\]", re.I)
_ID_BARE = re.compile(r"([0-9a-f]{4}):([0-9a-f]{4})(?:\s|$)", re.I)
_DEVICE_NUM = re.compile(r"\bDevice (?:\[?([0-9a-f]{4}):)?([0-9a-f]{4})\]?(?:\s|$)", re.I)
_REV = re.compile(r"\s*\((?:rev [0-9a-f]{2}|prog-if [0-9a-f]{2}(?: \[[^\]]{0,80}\])?)\)\s*$", re.I)

#: lspci class names (pci.ids) -> class code, for `lspci -vv` headers without ``-nn``.
CLASS_WORDS: Dict[str, int] = {
    "vga compatible controller": 0x0300, "xga compatible controller": 0x0301, "3d controller": 0x0302,
    "display controller": 0x0380, "processing accelerators": 0x1200, "sn processing accelerator": 0x1201,
    "audio device": 0x0403, "multimedia audio controller": 0x0401, "multimedia controller": 0x0480,
    "host bridge": 0x0600, "isa bridge": 0x0601, "pci bridge": 0x0604, "bridge": 0x0680,
    "ethernet controller": 0x0200, "network controller": 0x0280, "infiniband controller": 0x0207,
    "non-volatile memory controller": 0x0108, "raid bus controller": 0x0104, "sata controller": 0x0106,
    "usb controller": 0x0c03, "serial bus controller": 0x0c80, "smbus": 0x0c05, "system peripheral": 0x0880,
    "iommu": 0x0806, "signal processing controller": 0x1180, "co-processor": 0x0b40,
    "encryption controller": 0x1080, "unassigned class": 0xff00,
}
_CLASS_NUM = re.compile(r"(?:\[([0-9a-f]{4})\]|^(?:class |unclassified device )?\[?([0-9a-f]{4})\]?)$", re.I)


def strip_rev(name: str) -> str:
    """The name without lspci's trailing "(rev xx)" and "(prog-if xx [...])"."""
    name = name.strip()
    for _ in range(2):
        name = _REV.sub("", name)
    return name


def ids_of(name: str) -> Tuple[Optional[str], Optional[str]]:
    """(vendor, device) IDs the name carries: ``[vvvv:dddd]`` (-nn), a bare ``vvvv:dddd`` (-n),
    ``Device vvvv:dddd`` (vendor unknown to pci.ids) or ``<vendor> Device dddd`` (device unknown)."""
    found = _ID_BRACKET.findall(name)
    if found:
        return found[-1][0].lower(), found[-1][1].lower()
    m = _ID_BARE.match(name)
    if m:
        return m.group(1).lower(), m.group(2).lower()
    m = _DEVICE_NUM.search(name)
    if m:
        return (m.group(1).lower() if m.group(1) else None), m.group(2).lower()
    return None, None


def vendor_of(name: str) -> Tuple[Optional[str], str]:
    """(vendor ID, the rest of the name) from a pci.ids vendor name at the start of ``name``."""
    for vid, rx in _VENDOR_NAMES:
        m = rx.match(name)
        if m:
            return vid, name[m.end():].strip()
    return None, name


def class_of(words: str) -> Optional[int]:
    """The 16-bit class code of an lspci class field ("3D controller", "3D controller [0302]", "0302")."""
    w = words.strip()
    m = _CLASS_NUM.search(w)
    if m:
        return int(m.group(1) or m.group(2), 16)
    return CLASS_WORDS.get(re.sub(r"\s+", " ", w).lower())


def identify(name: str, class_code: Optional[int] = None, known_ids: Iterable[str] = ()) -> Dict[str, Any]:
    """Whether a function named ``name`` is an accelerator: ``{"accelerator": True/False/None, "why", "pci_id",
    "vendor_id"}`` (None: a function of an accelerator vendor that neither class, ID nor name decides)."""
    name = strip_rev(name)
    vid, did = ids_of(name)
    named_vid, rest = vendor_of(name)
    vid = vid or named_vid
    pci_id = f"{vid}:{did}" if vid and did else None
    out: Dict[str, Any] = {"pci_id": pci_id, "vendor_id": vid, "name": name}
    if vid is None:
        return dict(out, accelerator=False, why="no accelerator vendor named (pci.ids name or vendor ID)")
    if vid not in ACCEL_VENDORS:
        return dict(out, accelerator=False, why=f"vendor {vid} is not an accelerator vendor")
    if pci_id is None and did is None:  # lspci without -n: the pci.ids name of a known accelerator gives its ID
        by_name = [k for k, v in ACCEL_IDS.items() if k.startswith(f"{vid}:") and v.lower() == rest.lower()]
        if len(by_name) == 1:
            pci_id = by_name[0]
            out["pci_id"] = pci_id
    if class_code is not None:
        ok = is_accelerator({"vendor_id": vid, "class": f"0x{class_code:04x}00"})
        return dict(out, accelerator=ok, why=f"class 0x{class_code:04x} of vendor {vid} (the sysfs rule: "
                                             f"{'display/processing-accelerator class' if ok else 'not an accelerator class'})")
    known = {k.lower() for k in known_ids}
    if pci_id and (pci_id in known or pci_id in ACCEL_IDS):
        return dict(out, accelerator=True, why=f"device ID {pci_id} is a known accelerator "
                                               f"({ACCEL_IDS.get(pci_id) or 'the profile names it'})")
    if pci_id and pci_id in NOT_ACCEL_IDS:
        return dict(out, accelerator=False, why=f"device ID {pci_id} is {NOT_ACCEL_IDS[pci_id]}")
    dev_name = _ID_BRACKET.sub("", rest).strip()
    if _NOT_ACCEL_WORDS.search(dev_name):
        return dict(out, accelerator=False, why=f"named as a non-accelerator function ({dev_name!r})")
    unnamed = (not dev_name or dev_name.lower() == "device" or _DEVICE_NUM.fullmatch(dev_name + " ") is not None
               or _ID_BARE.fullmatch(dev_name + " ") is not None)
    if not unnamed and (vid in _ACCEL_ONLY_VENDORS or _ACCEL_WORDS.search(dev_name)):
        return dict(out, accelerator=True, why=f"named by pci.ids as a device of accelerator vendor {vid} "
                                               f"({dev_name!r})")
    if vid == "8086" or (not unnamed and vid not in _ACCEL_ONLY_VENDORS):
        return dict(out, accelerator=False, why=f"vendor {vid} makes other devices too, and neither the ID "
                                                f"{pci_id or '?'} nor the name marks an accelerator")
    return dict(out, accelerator=None,
                why=f"a function of accelerator vendor {vid} whose device ID {pci_id or '?'} is not in the known "
                    "tables and whose name pci.ids did not give; submit `lspci -nn`/`lspci -vv` text (class code) "
                    "or a profile that names the ID")


def pci_id_of(name: Optional[str]) -> Optional[str]:
    """``vvvv:dddd`` of a function's name, when it carries both IDs."""
    if not name:
        return None
    v, d = ids_of(name)
    return f"{v}:{d}" if v and d else None


def vendor_of_name(name: Optional[str]) -> Optional[str]:
    """NVIDIA or AMD, when a function's name starts with that vendor's pci.ids name."""
    vid, _ = vendor_of(str(name or ""))
    return VENDORS.get(vid or "")


def merge_paths(machine: Machine, f: Entry, lists_all: Optional[str]) -> None:
    """Add the functions and accelerator paths of an ``lspci`` tree or path list to ``machine``;
    ``lists_all``: how the file lists every accelerator of the machine (None when it may not)."""
    facts = f["facts"]
    machine.unidentified.extend(facts.get("unidentified") or [])
    for fn in facts.get("functions") or []:
        machine.pci.setdefault(fn["bdf"], {"bdf": fn["bdf"], "pci_id": fn.get("pci_id"), "class": None,
                                           "name": fn.get("name"), "source": f["name"]})
    for path in facts["accelerators"]:
        bdf = path["device"]
        path = dict(path, source=f"{path.get('source')} of {f['name']}")
        machine.paths.setdefault(bdf, path)
        pid = path.get("pci_id")
        machine.add(bdf, new_accelerator(bdf, pid, VENDORS.get(str(pid or "")[:4]) or vendor_of_name(path.get("name")),
                                         path.get("name"), f["name"]))
    if lists_all is not None:
        vendors = {VENDORS.get(str(p.get("pci_id") or "")[:4]) or vendor_of_name(p.get("name"))
                   for p in facts["accelerators"]}
        for v in vendors - {None}:
            machine.complete.setdefault(str(v).lower(), []).append(f"{f['name']} ({lists_all})")
