"""Topology and link evidence from text a vendor submitted: ``lspci -tv``, ``lspci -vv``, ``nvidia-smi topo -m``.

For audit without the machine.  The parsed evidence has the same shape as the
live probes' (PCIe path, link capability and samples, peer mesh), so the same
checks decide; the method says it came from text.  The text is untrusted: at
most :data:`MAX_BYTES` bytes, :data:`MAX_LINES` lines of at most
:data:`MAX_LINE` characters, anchored regular expressions without nested
repetition (linear time), and every error names the line.

``lspci -tv`` (layout of pciutils' ``ls-tree.c``)
    A bus is printed ``[dddd:bb]`` (the domain with ``%04x``, so an Intel VMD
    domain is ``[10000:e0]``); a device ``dd.f``; a bridge ``dd.f-[ss]-`` or
    ``dd.f-[ss-uu]-`` (secondary-subordinate; ``dd.f-`` when the secondary bus
    is 0); the children of a bus or bridge follow after ``--`` (one) or
    ``+-``/``\\-`` (several, continued on later lines at the same column with
    ``|`` for the open branches); a name follows a device after two spaces
    (``-v``), and only leaves are named.  The parser follows exactly that:
    each token's parent is the token before it on the line, or on a
    continuation line the open node whose children start at that column.
    Tabs are expanded to 8 columns; a common left margin, a shell prompt
    before the tree and lines without tree tokens (``...``, blank) are
    skipped.  The tree shows bridges and their bus ranges, not their
    Device/Port Type, so port types are inferred: the topmost bridge above a
    device is its root port, every bridge below it a switch port - exactly
    SITS2026 A's reading of the tree ("only one root-port level above the
    GPU").  A bridge printed without a bus range on top of the chain is a
    parent the OS reports (an Intel VMD controller hosting its own domain) and
    counts as the host bridge.

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
from typing import Any, Dict, Iterable, List, Optional, Tuple

from .pcie import gen_of
from .sysfs import ACCEL_VENDORS, is_accelerator

#: Largest text accepted (an `lspci -vv` of a 1,000-function host is about 3 MB).
MAX_BYTES = 16 << 20
MAX_LINES = 400_000
#: pciutils cuts tree lines at 1,024 characters; a `topo -m` row with 64 NICs is about 600.
MAX_LINE = 16_384


class TextEvidenceError(ValueError):
    """The text is not the output it claims to be; the message names the line."""


# ---- identification ---------------------------------------------------------------------------------------

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
_VENDOR_NAMES: List[Tuple[str, "re.Pattern[str]"]] = [
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


def _strip_rev(name: str) -> str:
    """The name without lspci's trailing "(rev xx)" and "(prog-if xx [...])"."""
    name = name.strip()
    for _ in range(2):
        name = _REV.sub("", name)
    return name


def _ids(name: str) -> Tuple[Optional[str], Optional[str]]:
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
    name = _strip_rev(name)
    vid, did = _ids(name)
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


# ---- common ----------------------------------------------------------------------------------------------

def _lines(text: str, what: str) -> List[str]:
    if len(text) > MAX_BYTES:
        raise TextEvidenceError(f"{len(text)} characters, over the {MAX_BYTES >> 20} MiB limit for {what} text; "
                                "fix: submit the output of one run")
    lines = text.splitlines()
    if len(lines) > MAX_LINES:
        raise TextEvidenceError(f"{len(lines)} lines, over the {MAX_LINES}-line limit for {what} text")
    for n, ln in enumerate(lines, 1):
        if len(ln) > MAX_LINE:
            raise TextEvidenceError(f"line {n}: {len(ln)} characters, over the {MAX_LINE}-character limit; "
                                    f"no {what} line is that long")
    return lines


# ---- lspci -tv -------------------------------------------------------------------------------------------

_TOKEN = re.compile(r"\[(?P<dom>[0-9a-f]{4,8}):(?P<bus>[0-9a-f]{2})\]"
                    r"|(?P<slot>[0-9a-f]{2}\.[0-7])(?:-\[(?P<sec>[0-9a-f]{2})(?:-(?P<sub>[0-9a-f]{2}))?\])?", re.I)
_TREE_LINE = re.compile(r"[ |]*[-+\\]")


def _tree_tokens(line: str, lineno: int) -> Tuple[List[Dict[str, Any]], Optional[str]]:
    """The bus and device tokens of one tree line (with their columns) and the name after the last one."""
    pos = len(line) - len(line.lstrip(" |"))
    tokens: List[Dict[str, Any]] = []
    name = None
    while pos < len(line):
        c = line[pos]
        if c in "-+\\":
            pos += 1
            continue
        if line.startswith("...", pos):  # pciutils cuts lines at 1,024 characters with "..."
            break
        m = _TOKEN.match(line, pos)
        if m is None:
            raise TextEvidenceError(f"line {lineno}, column {pos + 1}: {line[pos:pos + 12]!r} is not part of an "
                                    "`lspci -t` tree (expected [domain:bus], dd.f or a branch)")
        tok: Dict[str, Any] = {"col": pos, "line": lineno}
        if m.group("dom"):
            tok.update(kind="bus", domain=m.group("dom").lower(), bus=m.group("bus").lower())
        else:
            tok.update(kind="dev", slot=m.group("slot").lower(), sec=(m.group("sec") or "").lower() or None,
                       sub=(m.group("sub") or m.group("sec") or "").lower() or None)
        tokens.append(tok)
        pos = m.end()
        if tok["kind"] == "dev" and pos < len(line) and line[pos] == " ":
            name = line[pos:].strip() or None
            break
    return tokens, name


def read_lspci_tv(text: str, classes: Optional[Dict[str, int]] = None, known_ids: Iterable[str] = (),
                  match: Optional["re.Pattern[str]"] = None) -> Dict[str, Any]:
    """Every accelerator's PCIe path in an ``lspci -tv`` text, and the functions that could not be identified.

    ``classes``: class codes by BDF, or ``{"class_code", "name"}`` by BDF (:func:`classes_by_bdf` of an
    ``lspci -vv`` text of the same host); ``known_ids``: the
    profile's accelerator IDs; ``match``: a regular expression on the name that replaces the rule (legacy).
    Returns ``{"accelerators": [path, ...], "unidentified": [...], "not_accelerators": n, "skipped_lines": [...],
    "cuts": [...], "functions": [...]}``.

    A snippet cut at the top (its first line ``+-[0000:20]-...`` or ``|  +-...``) and branches whose parent
    line was elided (``+-...``, ``[... removed ...]``) are read: the device and the bridges on its own line
    are known, what was above them is recorded as cut (``cuts``), and the path above is unknown there.
    """
    lines = _lines(text, "`lspci -tv`")
    root: Dict[str, Any] = {"kind": "root", "child_col": None}
    stack: List[Dict[str, Any]] = []
    margin: Optional[int] = None
    leaves: List[Tuple[Dict[str, Any], List[Dict[str, Any]]]] = []
    skipped: List[int] = []
    cuts: List[Dict[str, Any]] = []
    for lineno, raw in enumerate(lines, 1):
        line = raw.expandtabs(8).rstrip()
        if margin is None:
            m = re.match(r"[ \t]*-(?:\+-)?\[", line)
            cut = re.match(r"([ \t|]*)[+\\]-\[[0-9a-f]{4,8}:[0-9a-f]{2}\]", line, re.I)
            if m:
                margin = line.index("-")
            elif cut:  # a tree cut above its first line: "+-[0000:20]-..." (another domain came before it)
                col = len(cut.group(1))
                if col == 0:  # no column left for the root's "-": shift every line right by one
                    lines = [" " + ln for ln in lines]
                    line, col = " " + line, 1
                margin = col - 1
                root = {"kind": "root", "child_col": None}
                stack = [root]
                cuts.append({"line": lineno, "what": "the tree starts below its top: the lines above "
                                                     f"{line.strip()[:24]!r} (other domains) are not in the text"})
            elif re.match(r"[ \t|]*[+\\]-[0-9a-f]{2}\.[0-7]", line, re.I):  # starts in the middle of a bus
                margin = 0
                root = {"kind": "root", "child_col": None}
                stack = [root]
                cuts.append({"line": lineno, "what": "the tree starts in the middle of a bus: its domain and the "
                                                     "lines above are not in the text"})
            else:
                if line.strip():
                    skipped.append(lineno)
                continue
        if line[:margin].strip():
            skipped.append(lineno)
            continue
        line = line[margin:]
        if not _TREE_LINE.match(line):
            if line.strip():
                skipped.append(lineno)
                if "..." in line or "removed" in line.lower() or "\u2026" in line:
                    cuts.append({"line": lineno, "what": f"lines elided ({line.strip()[:60]!r})"})
            continue
        tokens, name = _tree_tokens(line, lineno)
        if not tokens:
            if "..." in line:
                cuts.append({"line": lineno, "what": f"a branch elided ({line.strip()[:60]!r})"})
            continue
        if line.startswith("-"):  # a new top-level domain (show_forest starts each at column 0)
            root = {"kind": "root", "child_col": None}
            stack = [root]
        else:
            col = tokens[0]["col"]
            kept = list(stack)
            while stack and stack[-1]["child_col"] != col:
                stack.pop()
            if not stack:
                if tokens[0]["kind"] == "bus" and kept and kept[0]["kind"] == "root" and \
                        kept[0]["child_col"] is None:
                    kept[0]["child_col"] = col
                    stack = [kept[0]]
                else:
                    # Its parent's line was cut: the branch hangs from an unknown parent.
                    cuts.append({"line": lineno, "what": f"the branch at column {col + margin + 1} hangs from a line "
                                                         "that is not in the text (elided or cut)"})
                    orphan = {"kind": "cut", "child_col": col, "line": lineno, "domain": _domain_of(kept),
                              "sec": None}
                    # the branches to its left are still open: a later line at their column continues them
                    left = []
                    for n in kept:
                        if n.get("child_col") is None or n["child_col"] >= col:
                            break
                        left.append(n)
                    stack = (left or [root]) + [orphan]
        for tok in tokens:
            parent = stack[-1]
            if parent["child_col"] is None:
                parent["child_col"] = tok["col"]
            tok["child_col"] = None
            if tok["kind"] == "bus":
                if parent["kind"] == "bus":
                    raise TextEvidenceError(f"line {lineno}: bus [{tok['domain']}:{tok['bus']}] directly below "
                                            "another bus; not `lspci -t` layout")
            else:
                if parent["kind"] == "root":
                    raise TextEvidenceError(f"line {lineno}: device {tok['slot']} before any [domain:bus]; "
                                            "is this `lspci -tv` output?")
                if parent["kind"] == "bus":
                    tok["domain"], bus = parent["domain"], parent["bus"]
                elif parent["kind"] == "cut":  # the bus of a device below a cut is unknown
                    tok["domain"], bus = parent.get("domain"), None
                else:  # on the secondary bus of the bridge above (printed "-" only when it is bus 00)
                    tok["domain"], bus = parent["domain"], parent["sec"] or "00"
                    if parent["domain"] is None:  # below a bridge whose own place was cut: its bus is known
                        tok["domain"] = _domain_of(stack)
                tok["bdf"] = f"{tok['domain'] or '????'}:{bus or '??'}:{tok['slot']}"
                tok["parent"] = parent
                parent["bridge"] = True
            stack.append(tok)
        last = tokens[-1]
        if last["kind"] == "dev":
            leaves.append((last, list(stack)))
            last["name"] = name
    if margin is None:
        raise TextEvidenceError("no `[domain:bus]` root found: this is not `lspci -tv` output")
    accelerators, unidentified, others, functions = [], [], 0, []
    for leaf, chain in leaves:
        if leaf.get("bridge") or leaf.get("sec"):
            continue  # a bridge (with or without devices below it), never a leaf function
        name = leaf.get("name")
        cls = (classes or {}).get(leaf["bdf"])
        if isinstance(cls, dict):  # from `lspci -vv`: the class, and the name where the tree has none (-t)
            name, cls = name or cls.get("name"), cls.get("class_code")
        if match is not None:
            ident = {"accelerator": bool(name and match.search(name)), "why": f"name matches {match.pattern!r}",
                     "pci_id": _pci_id_of(name)}
        elif name is None:
            ident = {"accelerator": False, "why": "no name (`lspci -t` without -v)", "pci_id": None}
        else:
            ident = identify(name, cls, known_ids)
        functions.append({"bdf": leaf["bdf"], "name": name, "pci_id": ident.get("pci_id"),
                          "accelerator": ident["accelerator"], "line": leaf["line"]})
        if ident["accelerator"] is None:
            unidentified.append({"device": leaf["bdf"], "name": name, "why": ident["why"],
                                 "source": f"lspci -tv line {leaf['line']}"})
            continue
        if not ident["accelerator"]:
            others += 1
            continue
        accelerators.append(_tree_path(leaf, chain, name, ident))
    return {"accelerators": accelerators, "unidentified": unidentified, "not_accelerators": others,
            "skipped_lines": skipped, "cuts": cuts, "functions": functions}


def _domain_of(stack: List[Dict[str, Any]]) -> Optional[str]:
    return next((n.get("domain") for n in reversed(stack) if n.get("domain")), None)


def _pci_id_of(name: Optional[str]) -> Optional[str]:
    if not name:
        return None
    v, d = _ids(name)
    return f"{v}:{d}" if v and d else None


def _tree_path(leaf: Dict[str, Any], chain: List[Dict[str, Any]], name: str, ident: Dict[str, Any]) -> Dict[str, Any]:
    nodes = [n for n in chain[:-1] if n.get("kind") in ("dev", "cut")]  # root first
    notes = []
    cut_nodes = [n for n in nodes if n["kind"] == "cut"]
    cut = bool(cut_nodes)
    if cut:  # only what is below the cut is known
        nodes = nodes[max(i for i, n in enumerate(nodes) if n["kind"] == "cut") + 1:]
    bridges = nodes
    while not cut and bridges and not bridges[0].get("sec"):  # a rangeless parent on top: the OS's host bridge
        notes.append(f"{bridges[0]['bdf']} has no bus range: a parent the OS reports (such as an Intel VMD "
                     "controller), taken as the host bridge")
        bridges.pop(0)
    hops = []
    for pos, n in enumerate(reversed(bridges)):
        top = pos == len(bridges) - 1
        if top and cut:  # the topmost bridge left below a cut: a root port or a switch port, the text cannot say
            ptype, src = "unknown", "the line above it was cut: root port or switch port"
        else:
            ptype = "root_port" if top else "switch_port_inferred"
            src = "inferred (lspci -tv text: the topmost bridge is the root port)"
        hops.append({"bdf": n["bdf"], "class": "0x0604", "pci_id": None, "port_type": ptype, "type_source": src,
                     "link": {}})
    if cut:
        hops.append({"bdf": f"the bridges above line {cut_nodes[-1]['line']} (cut from the text)",
                     "class": None, "pci_id": None, "port_type": "unknown",
                     "type_source": "not in the text", "link": {}})
        notes.append("the tree was cut above this branch: bridges above it are unknown")
    if not hops:
        notes.append("no bridge above the device in the tree")
    return {"device": leaf["bdf"], "name": name, "pci_id": ident.get("pci_id"), "hops": hops, "method": "inferred",
            "identified_by": ident["why"], "note": "; ".join(notes) or None,
            "method_text": "port types inferred from the submitted `lspci -tv` tree (the topmost bridge above "
                           "the device is its root port, every bridge below it a switch port: SITS2026 A's "
                           "reading); not read from the devices' PCI Express capability",
            "source": f"lspci -tv line {leaf['line']}"}


def parse_lspci_tv(text: str, match: Optional["re.Pattern[str]"] = None, classes: Optional[Dict[str, int]] = None,
                   known_ids: Iterable[str] = ()) -> List[Dict[str, Any]]:
    """Paths of the accelerators: [{"device": bdf, "name", "pci_id", "hops": [...], "method", ...}]."""
    return read_lspci_tv(text, classes=classes, known_ids=known_ids, match=match)["accelerators"]


# ---- nvidia-smi topo -m ----------------------------------------------------------------------------------

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
    lines = [_ANSI.sub("", ln) for ln in _lines(text, "`nvidia-smi topo -m`")]
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
    p2p = [[None if i == j or gcells[gpus[i]][j] is None else gcells[gpus[i]][j].startswith("NV")
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


# ---- lspci -PP / -P --------------------------------------------------------------------------------------

_PP_LINE = re.compile(r"(?:(?P<dom>[0-9a-f]{4,8}):)?(?P<path>[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]"
                      r"(?:/(?:[0-9a-f]{2}:)?[0-9a-f]{2}\.[0-7]){1,31}) (?P<cls>[^:]{1,80}): (?P<name>.{0,400})$", re.I)


def read_lspci_pp(text: str, known_ids: Iterable[str] = ()) -> Dict[str, Any]:
    """Paths of ``lspci -PP`` (``00:01.1/01:00.0/02:00.0 Class: Name``, the form AMD's acceptance guides use) or
    ``lspci -P`` (``00:01.1/00.0/00.0``: the buses below the first are not printed).

    The first element of a path is on a root bus: the root port above the device; every bridge after it, down
    to the device, is a switch port (PCIe places nothing else between a root port and an endpoint).  Returns
    ``{"accelerators": [path, ...], "functions": [...], "unidentified": [...], "not_accelerators": n}``."""
    lines = _lines(text, "`lspci -PP`")
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
        name = _strip_rev(m.group("name"))
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
        hops = []
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


# ---- lspci -vv -------------------------------------------------------------------------------------------

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


def _gts(m: "re.Match[str]") -> Optional[float]:
    return float(m.group("speed")) if m.group("speed") else None


def parse_lspci_vv(text: str) -> List[Dict[str, Any]]:
    """Every function of an ``lspci -vv`` text: slot, class, name, port type, bus range, LnkCap, LnkSta
    readings, LnkCap2/LnkCtl2 speeds.  A function printed more than once (several captures in one file) is
    one entry with several LnkSta readings."""
    lines = _lines(text, "`lspci -vv`")
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
                                    "class_code": class_of(m.group("cls")), "name": _strip_rev(m.group("name")),
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
              "identified_by": ident["why"], "name": f["name"],
              "method_text": ("LnkSta read from the submitted `lspci -vv` text; the load is declared by the "
                              "submitter, not observed" if under_load else
                              "LnkSta read from the submitted `lspci -vv` text, with no load declared (an idle "
                              "reading)")}
        if f["notes"]:
            ev["notes"] = f["notes"]
        out.append(ev)
    return {"links": out, "unidentified": unidentified}
