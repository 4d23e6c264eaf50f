"""``nvidia-smi -q`` output a vendor submitted, text or ``-q -x`` XML, read into the same facts as the live probe.

Both generations of the text are read: the current one (driver 535 and later:
"Clocks Event Reasons", "GPU Power Readings", PCIe "Device Max" and "Host
Max") and the older one ("Clocks Throttle Reasons", "Power Readings" with
"Enforced Power Limit", a single PCIe "Max"), and the XML of ``nvidia-smi -q
-x`` (DTD v11 and v12: ``clocks_throttle_reasons`` or ``clocks_event_reasons``,
``power_readings`` or ``gpu_power_readings``).  The XML is turned into the
tree the text gives (each tag named as the text names it), so one reader
serves both.  The result has the keys of :func:`pytest_sits.probes.nvml.collect`
and :mod:`pytest_sits.probes.health` (``driver_version``, ``devices`` with
``pcie_*``, ``ecc_*``, ``remapped_rows``, ``power_limit_*``,
``clock_event_reasons``, ``memory_total_bytes``, ...), so the checks that
judge live NVML judge the text too.

Texts as people paste them: CRLF, tabs, a common left margin, lines the
author elided (``[...]``), a block copied without its ``GPU 0000...`` header
or dedented (one GPU "without a header"), XML cut before its end (what was
read before the cut is kept).  What could not be read is recorded in
``errors`` (field, line, value) and in ``cuts``; the file is refused
(:class:`NvsmiTextError`) only when nothing of ``nvidia-smi -q`` is in it.

The text is untrusted: size-limited, never evaluated, no XML entity is
declared or expanded (a DOCTYPE with an internal subset is refused), the tree
is at most :data:`MAX_DEPTH` deep.
"""

from __future__ import annotations

import re
from typing import Any, Dict, Iterable, List, Optional, Tuple

from ..health import CLOCK_EVENT_BITS
from .base import NVIDIA_DEVICES, Detection, Entry, Machine, Reader, missing_errors, new_accelerator
from .text import MAX_ACCELERATORS

MAX_BYTES = 8 << 20
MAX_LINES = 200_000
MAX_DEPTH = 48

_GPU_HEADER = re.compile(r"^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*$")
_KV = re.compile(r"^([^:]{1,120}?)\s*:\s?(.*)$")
#: A line the author cut: "[...]", "...", "…", "<snip>", "[ ... 40 lines removed ... ]".
_ELIDED = re.compile(r"^(?:\[\s*(?:\.\.\.|…|snip)[^\]]{0,80}\]|\.{3,}|…|<snip>|\(\.\.\.\)|#\s*\.\.\.)$", re.I)
#: Values nvidia-smi prints for a field it could not read.
_UNREAD = re.compile(r"^\[?(?:N/A|not supported|unknown error|insufficient permissions|requested functionality has "
                     r"been deprecated|unknown|not available|gpu is lost)\]?$", re.I)

#: Names of the clock-event reasons in the text -> NVML bit names.
REASON_NAMES = {
    "idle": "gpu_idle",
    "gpu idle": "gpu_idle",
    "applications clocks setting": "applications_clocks_setting",
    "sw power cap": "sw_power_cap",
    "hw slowdown": "hw_slowdown",
    "hw thermal slowdown": "hw_thermal_slowdown",
    "hw power brake slowdown": "hw_power_brake_slowdown",
    "sync boost": "sync_boost",
    "sw thermal slowdown": "sw_thermal_slowdown",
    "display clock setting": "display_clock_setting",
}
#: The label nvidia-smi -q prints for each clock-event bit.
REASON_LABELS = {"gpu_idle": "Idle", "applications_clocks_setting": "Applications Clocks Setting",
                 "sw_power_cap": "SW Power Cap", "hw_slowdown": "HW Slowdown",
                 "hw_thermal_slowdown": "HW Thermal Slowdown", "hw_power_brake_slowdown": "HW Power Brake Slowdown",
                 "sync_boost": "Sync Boost", "sw_thermal_slowdown": "SW Thermal Slowdown",
                 "display_clock_setting": "Display Clock Setting"}
#: Keys that only a GPU section of ``nvidia-smi -q`` has: a text holding one of them without a GPU header is a
#: GPU section copied without it.
GPU_KEYS = ("product name", "ecc errors", "ecc mode", "clocks throttle reasons", "clocks event reasons",
            "remapped rows", "retired pages", "fb memory usage", "persistence mode", "gpu power readings",
            "power readings", "vbios version", "gpu uuid", "performance state")


class NvsmiTextError(ValueError):
    """Nothing in the text is ``nvidia-smi -q`` output; the message says what was found and the fix."""


Node = Dict[str, Any]  # {"value": str|None, "line": int, "children": {name: Node}}


def _node(value: Optional[str], line: int) -> Node:
    return {"value": value if value not in ("", None) else None, "line": line, "children": {}}


def _add(parent: Node, name: str, child: Node) -> str:
    """Add ``child`` under ``name``; a repeated name (two "Processes" entries) becomes "name #2", "name #3"."""
    children = parent["children"]
    if name in children:
        seen = parent.setdefault("repeats", {})
        seen[name] = seen.get(name, 1) + 1
        name = f"{name} #{seen[name]}"
    children[name] = child
    return name


# ---- text -------------------------------------------------------------------------------------------------

def _text_tree(text: str) -> Tuple[Node, List[Tuple[str, Node]], List[Dict[str, Any]]]:
    """Indentation tree of 'Key : value' lines: the top-level node, the GPU sections in order, and the lines the
    author elided."""
    lines = text.splitlines()
    if len(lines) > MAX_LINES:
        raise NvsmiTextError(f"{len(lines)} lines: more than the {MAX_LINES} any `nvidia-smi -q` output has; "
                             "fix: submit the output of one `nvidia-smi -q` run")
    top = _node(None, 0)
    gpus: List[Tuple[str, Node]] = []
    cuts: List[Dict[str, Any]] = []
    stack: List[Tuple[int, Node]] = [(-1, top)]
    for lineno, raw in enumerate(lines, 1):
        line = raw.expandtabs(8).rstrip()
        body = line.strip()
        if not body or body.startswith("=") or body.startswith("```"):
            continue
        if _ELIDED.match(body):
            cuts.append({"line": lineno, "text": body[:40]})
            continue
        indent = len(line) - len(line.lstrip(" "))
        m = _GPU_HEADER.match(body)
        if m:
            node = _node(m.group(1), lineno)
            gpus.append((m.group(1), node))
            if len(gpus) > MAX_ACCELERATORS:
                raise NvsmiTextError(f"line {lineno}: more than {MAX_ACCELERATORS} GPU sections in one "
                                     "`nvidia-smi -q` text, more than one machine holds; fix: submit one "
                                     "machine's output per file")
            stack = [(-1, top), (indent, node)]
            continue
        kv = _KV.match(body)
        key, value = (kv.group(1).strip(), kv.group(2).strip()) if kv else (body, None)
        while len(stack) > 1 and stack[-1][0] >= indent:
            stack.pop()
        while len(stack) > MAX_DEPTH:
            stack.pop()
        child = _node(value, lineno)
        _add(stack[-1][1], key, child)
        stack.append((indent, child))
    return top, gpus, cuts


# ---- XML (nvidia-smi -q -x) ----------------------------------------------------------------------------------

#: XML tags -> the label the text prints (tags not listed are their own name with spaces for underscores).
_XML_LABELS = {
    "timestamp": "Timestamp", "driver_version": "Driver Version", "cuda_version": "CUDA Version",
    "attached_gpus": "Attached GPUs", "product_name": "Product Name", "persistence_mode": "Persistence Mode",
    "uuid": "GPU UUID", "serial": "Serial Number", "vbios_version": "VBIOS Version",
    "board_part_number": "Board Part Number", "inforom_version": "Inforom Version", "img_version": "Image Version",
    "ecc_object": "ECC Object", "gsp_firmware_version": "GSP Firmware Version", "pci": "PCI",
    "pci_device_id": "Device Id", "pci_bus_id": "Bus Id", "pci_gpu_link_info": "GPU Link Info",
    "pcie_gen": "PCIe Generation", "max_link_gen": "Max", "current_link_gen": "Current",
    "device_current_link_gen": "Device Current", "max_device_link_gen": "Device Max",
    "max_host_link_gen": "Host Max", "link_widths": "Link Width", "max_link_width": "Max",
    "current_link_width": "Current", "replay_counter": "Replays Since Reset",
    "performance_state": "Performance State", "clocks_throttle_reasons": "Clocks Throttle Reasons",
    "clocks_event_reasons": "Clocks Event Reasons", "fb_memory_usage": "FB Memory Usage", "total": "Total",
    "utilization": "Utilization", "gpu_util": "Gpu", "ecc_mode": "ECC Mode", "current_ecc": "Current",
    "pending_ecc": "Pending", "ecc_errors": "ECC Errors", "volatile": "Volatile", "aggregate": "Aggregate",
    "single_bit": "Single Bit", "double_bit": "Double Bit", "retired_pages": "Retired Pages",
    "multiple_single_bit_retirement": "Single Bit ECC", "double_bit_retirement": "Double Bit ECC",
    "pending_blacklist": "Pending Page Blacklist", "pending_retirement": "Pending",
    "remapped_rows": "Remapped Rows", "remapped_row_corr": "Correctable Error",
    "remapped_row_unc": "Uncorrectable Error", "remapped_row_pending": "Pending",
    "remapped_row_failure": "Remapping Failure Occurred", "power_readings": "Power Readings",
    "gpu_power_readings": "GPU Power Readings", "power_limit": "Power Limit",
    "current_power_limit": "Current Power Limit", "requested_power_limit": "Requested Power Limit",
    "default_power_limit": "Default Power Limit", "enforced_power_limit": "Enforced Power Limit",
    "min_power_limit": "Min Power Limit", "max_power_limit": "Max Power Limit",
}
_XML_REASON = re.compile(r"clocks?_(?:throttle|event)_reasons?_(\w{1,60})$")
_XML_REASON_LABELS = {"gpu_idle": "Idle", "applications_clocks_setting": "Applications Clocks Setting",
                      "sw_power_cap": "SW Power Cap", "hw_slowdown": "HW Slowdown",
                      "hw_thermal_slowdown": "HW Thermal Slowdown",
                      "hw_power_brake_slowdown": "HW Power Brake Slowdown", "sync_boost": "Sync Boost",
                      "sw_thermal_slowdown": "SW Thermal Slowdown", "display_clocks_setting": "Display Clock Setting",
                      "display_clock_setting": "Display Clock Setting"}


def looks_like_xml(text: str) -> bool:
    head = text[:4096].lstrip("\ufeff \t\r\n")
    return head.startswith("<?xml") or "<nvidia_smi_log" in head


def _xml_tree(text: str) -> Tuple[Node, List[Tuple[str, Node]], List[Dict[str, Any]]]:
    """The XML as the text's tree.  No entity is declared or expanded; a document cut before its end keeps what
    was read (the cut is recorded)."""
    import xml.parsers.expat as expat

    parser = expat.ParserCreate()
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    top = _node(None, 0)
    gpus: List[Tuple[str, Node]] = []
    cuts: List[Dict[str, Any]] = []
    # (tag, node, text parts); the root <nvidia_smi_log> is the top node
    stack: List[Tuple[str, Node, List[str]]] = []

    def doctype(name: str, sysid: Any, pubid: Any, has_internal_subset: int) -> None:
        if has_internal_subset:
            raise NvsmiTextError(f"line {parser.CurrentLineNumber}: the DOCTYPE declares its own entities; "
                                 "`nvidia-smi -q -x` never does, and they are not expanded here; fix: submit the "
                                 "unedited output")

    def entity(*args: Any) -> None:
        raise NvsmiTextError(f"line {parser.CurrentLineNumber}: an XML entity declaration; `nvidia-smi -q -x` has "
                             "none; fix: submit the unedited output")

    def start(tag: str, attrs: Dict[str, str]) -> None:
        line = parser.CurrentLineNumber
        if not stack:
            stack.append((tag, top, []))
            return
        if len(stack) > MAX_DEPTH:
            raise NvsmiTextError(f"line {line}: elements nested more than {MAX_DEPTH} deep; not `nvidia-smi -q -x`")
        if tag == "gpu" and len(stack) == 1:
            bus = str(attrs.get("id") or "")
            node = _node(bus or None, line)
            gpus.append((bus, node))
            if len(gpus) > MAX_ACCELERATORS:
                raise NvsmiTextError(f"line {line}: more than {MAX_ACCELERATORS} <gpu> elements in one "
                                     "`nvidia-smi -q -x` text, more than one machine holds; fix: submit one "
                                     "machine's output per file")
            stack.append((tag, node, []))
            return
        m = _XML_REASON.match(tag)
        label = _XML_REASON_LABELS.get(m.group(1), m.group(1).replace("_", " ")) if m else \
            _XML_LABELS.get(tag, tag.replace("_", " "))
        node = _node(None, line)
        _add(stack[-1][1], label, node)
        stack.append((tag, node, []))

    def end(tag: str) -> None:
        t, node, parts = stack.pop()
        text_value = "".join(parts).strip()
        if not node["children"] and text_value and t != "gpu":
            node["value"] = text_value[:4096]
        if t in ("multiple_single_bit_retirement", "double_bit_retirement"):  # the count is a child in XML
            count = node["children"].get("retired count")
            node["value"] = count["value"] if count else None

    def chars(data: str) -> None:
        if stack and len(stack[-1][2]) < 64:
            stack[-1][2].append(data)

    parser.StartDoctypeDeclHandler = doctype
    parser.EntityDeclHandler = entity
    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = chars
    try:
        parser.Parse(text.encode("utf-8", "replace"), True)
    except expat.ExpatError as exc:
        if not stack and not gpus:
            raise NvsmiTextError(f"line {exc.lineno}: not well-formed XML ({expat.ErrorString(exc.code)}) and no "
                                 "element read before it: this is not `nvidia-smi -q -x` output") from None
        open_tags = "/".join(t for t, _, _ in stack) or "none"
        cuts.append({"line": exc.lineno, "text": f"the XML stops being well-formed here "
                                                  f"({expat.ErrorString(exc.code)}; open: {open_tags[:120]})"})
    if not stack and not top["children"] and not gpus:
        raise NvsmiTextError("no element in the XML: this is not `nvidia-smi -q -x` output")
    return top, gpus, cuts


# ---- reading fields ---------------------------------------------------------------------------------------

def _find(node: Optional[Node], *path: str) -> Optional[Node]:
    for part in path:
        if node is None:
            return None
        want = part.lower()
        node = next((c for k, c in node["children"].items() if k.lower() == want), None)
    return node


class _Fields:
    """Reads the fields of one GPU section; a value that is not what the field holds is recorded, not raised."""

    def __init__(self, gpu: Node):
        self.gpu = gpu
        self.errors: List[Dict[str, Any]] = []

    def err(self, field: str, line: Optional[int], value: str, want: str) -> None:
        self.errors.append({"field": field, "line": line, "error": f"line {line}: {value!r} is not {want}"})

    def value(self, *path: str, node: Optional[Node] = None) -> Tuple[Optional[str], Optional[int]]:
        n = _find(node if node is not None else self.gpu, *path)
        if n is None:
            return None, None
        v = n["value"]
        if v is None or _UNREAD.match(v):
            return None, n["line"]
        return v, n["line"]

    def number(self, field: str, *path: str, unit: str = "", node: Optional[Node] = None) -> Optional[float]:
        v, line = self.value(*path, node=node)
        if v is None:
            return None
        text = v.strip()
        if unit and text.lower().endswith(unit.lower()):
            text = text[: -len(unit)].strip()
        m = re.fullmatch(r"[-+]?\d{1,12}(?:\.\d{1,6})?", text)
        if not m:
            self.err(field, line, v, f"a number{' in ' + unit if unit else ''} ({' / '.join(path)})")
            return None
        return float(text)

    def int(self, field: str, *path: str, unit: str = "", node: Optional[Node] = None) -> Optional[int]:
        x = self.number(field, *path, unit=unit, node=node)
        return int(x) if x is not None else None

    def flag(self, field: str, *path: str, node: Optional[Node] = None) -> Optional[bool]:
        v, line = self.value(*path, node=node)
        if v is None:
            return None
        low = v.lower()
        if low in ("enabled", "yes", "active", "on", "true"):
            return True
        if low in ("disabled", "no", "not active", "off", "none", "false"):
            return False
        self.err(field, line, v, f"Enabled/Disabled, Yes/No or Active/Not Active ({' / '.join(path)})")
        return None


def _sum(r: _Fields, section: Optional[Node], want_uncorrected: bool, field: str) -> Optional[int]:
    """Sum of the correctable (or uncorrectable) counters of an ECC Errors subsection, any generation."""
    if section is None:
        return None
    # Pre-Ampere layout: "Single Bit" / "Double Bit" subsections, each with a "Total".
    sub = _find(section, "Double Bit" if want_uncorrected else "Single Bit")
    if sub is not None:
        return r.int(field, "Total", node=sub)
    total, seen = 0, False
    for name, child in section["children"].items():
        low = name.lower()
        if "threshold" in low or child["value"] is None or _UNREAD.match(child["value"]):
            continue
        if ("uncorrectable" in low) != want_uncorrected or "correctable" not in low:
            continue
        if not re.fullmatch(r"\d{1,12}", child["value"].strip()):
            r.err(field, child["line"], child["value"], f"an error count ({name})")
            continue
        total += int(child["value"])
        seen = True
    return total if seen else None


def _reasons(gpu: Node) -> Dict[str, Any]:
    """The clock-event reasons: the bit mask (None when none was read), the section's title, the reasons read
    and those the section does not show (cut, or not printed by this driver)."""
    for title in ("Clocks Event Reasons", "Clocks Throttle Reasons", "Clocks Throttle Reasons #2"):
        sec = _find(gpu, title)
        if sec is None:
            continue
        mask, read = 0, []
        todo = [sec]
        while todo:
            node = todo.pop()
            for name, child in node["children"].items():
                bit = REASON_NAMES.get(name.lower())
                if bit is not None and child["value"] is not None and not _UNREAD.match(child["value"]):
                    read.append(bit)
                    if child["value"].strip().lower() == "active":
                        mask |= CLOCK_EVENT_BITS[bit]
                todo.append(child)
        missing = [REASON_LABELS[b] for b in REASON_LABELS if b not in read and b != "display_clock_setting"]
        return {"clock_event_reasons": mask if read else None, "clock_reasons_section": title,
                "clock_reasons_line": sec["line"], "clock_reasons_read": sorted(set(read)),
                "clock_reasons_not_shown": missing}
    return {"clock_event_reasons": None, "clock_reasons_section": None, "clock_reasons_read": [],
            "clock_reasons_not_shown": list(REASON_LABELS.values())}


def _power(r: _Fields) -> Dict[str, Any]:
    sec = _find(r.gpu, "GPU Power Readings")
    if sec is not None:  # current layout
        enforced = r.number("power_limit_enforced_mw", "Current Power Limit", unit="W", node=sec)
        requested = r.number("power_limit_mw", "Requested Power Limit", unit="W", node=sec)
        fmt = "GPU Power Readings"
    else:
        sec = _find(r.gpu, "Power Readings")
        if sec is None:
            return {}
        enforced = r.number("power_limit_enforced_mw", "Enforced Power Limit", unit="W", node=sec)
        requested = r.number("power_limit_mw", "Power Limit", unit="W", node=sec)
        fmt = "Power Readings"
    mw = lambda w: int(round(w * 1000)) if w is not None else None  # noqa: E731
    lo = r.number("power_limit_constraints_mw", "Min Power Limit", unit="W", node=sec)
    hi = r.number("power_limit_constraints_mw", "Max Power Limit", unit="W", node=sec)
    return {"power_limit_enforced_mw": mw(enforced), "power_limit_mw": mw(requested),
            "power_limit_default_mw": mw(r.number("power_limit_default_mw", "Default Power Limit", unit="W",
                                                  node=sec)),
            "power_limit_constraints_mw": [mw(lo), mw(hi)] if lo is not None and hi is not None else None,
            "power_readings_format": fmt}


def _device(bus: Optional[str], gpu: Node) -> Dict[str, Any]:
    from ..pcie import normalise_bus_id

    r = _Fields(gpu)
    dev: Dict[str, Any] = {"pci_bus_id": normalise_bus_id(bus) if bus else None, "source_line": gpu["line"]}
    if dev["pci_bus_id"] is None:
        text_bus, _ = r.value("PCI", "Bus Id")
        if text_bus and re.fullmatch(r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]", text_bus):
            dev["pci_bus_id"] = normalise_bus_id(text_bus)
    dev["name"] = r.value("Product Name")[0]
    did, did_line = r.value("PCI", "Device Id")
    dev["pci_id"] = None
    if did is not None:
        m = re.fullmatch(r"(?:0x)?([0-9A-Fa-f]{4})([0-9A-Fa-f]{4})", did.strip())
        if not m:
            r.err("pci_id", did_line, did, "a PCI device ID (0xDDDDVVVV)")
        elif m.group(2).lower() != "10de":
            r.errors.append({"field": "pci_id", "line": did_line,
                             "error": f"line {did_line}: Device Id {did!r} names vendor {m.group(2).lower()}, not "
                                      "NVIDIA (10de): an altered or anonymised ID; the model is known by its name "
                                      "only"})
        else:
            dev["pci_id"] = f"10de:{m.group(1).lower()}"
    dev["uuid"] = r.value("GPU UUID")[0]
    dev["serial"] = r.value("Serial Number")[0]
    dev["vbios_version"] = r.value("VBIOS Version")[0]
    dev["board_part_number"] = r.value("Board Part Number")[0]
    dev["inforom_image_version"] = r.value("Inforom Version", "Image Version")[0]
    dev["inforom_ecc_version"] = r.value("Inforom Version", "ECC Object")[0]
    dev["gsp_firmware_version"] = r.value("GSP Firmware Version")[0]
    dev["persistence_mode"] = r.flag("persistence_mode", "Persistence Mode")
    mem = r.number("memory_total_bytes", "FB Memory Usage", "Total", unit="MiB")
    dev["memory_total_bytes"] = int(mem) * (1 << 20) if mem is not None else None
    link = ("PCI", "GPU Link Info")
    gen = link + ("PCIe Generation",)
    dev["pcie_current_gen"] = r.int("pcie_current_gen", *gen, "Current")
    dev["pcie_max_gen"] = r.int("pcie_max_gen", *gen, "Max")
    dev["pcie_gpu_max_gen"] = r.int("pcie_gpu_max_gen", *gen, "Device Max")
    dev["pcie_host_max_gen"] = r.int("pcie_host_max_gen", *gen, "Host Max")
    dev["pcie_current_width"] = r.int("pcie_current_width", *link, "Link Width", "Current", unit="x")
    dev["pcie_max_width"] = r.int("pcie_max_width", *link, "Link Width", "Max", unit="x")
    dev["pcie_link_format"] = "current (Device Max / Host Max)" if (
        _find(gpu, *gen, "Device Max") is not None or _find(gpu, *gen, "Host Max") is not None) else "older (one Max)"
    dev["pcie_replay_counter"] = r.int("pcie_replay_counter", "PCI", "Replays Since Reset")
    dev["utilization_gpu_percent"] = r.int("utilization_gpu_percent", "Utilization", "Gpu", unit="%")
    dev["performance_state"] = r.value("Performance State")[0]
    dev.update(_reasons(gpu))
    dev["ecc_mode_current"] = r.flag("ecc_mode_current", "ECC Mode", "Current")
    dev["ecc_mode_pending"] = r.flag("ecc_mode_pending", "ECC Mode", "Pending")
    for scope in ("Volatile", "Aggregate"):
        sec = _find(gpu, "ECC Errors", scope)
        dev[f"ecc_{scope.lower()}_corrected"] = _sum(r, sec, False, f"ecc_{scope.lower()}_corrected")
        dev[f"ecc_{scope.lower()}_uncorrected"] = _sum(r, sec, True, f"ecc_{scope.lower()}_uncorrected")
    dev["retired_pages_sbe"] = r.int("retired_pages_sbe", "Retired Pages", "Single Bit ECC")
    dev["retired_pages_dbe"] = r.int("retired_pages_dbe", "Retired Pages", "Double Bit ECC")
    pending = _find(gpu, "Retired Pages", "Pending Page Blacklist") or _find(gpu, "Retired Pages", "Pending")
    dev["retired_pages_pending"] = r.flag("retired_pages_pending", node=pending) if pending is not None else None
    rows = _find(gpu, "Remapped Rows")
    dev["remapped_rows"] = None
    if rows is not None and rows["value"] is None and rows["children"]:
        remap = {"correctable": r.int("remapped_rows", "Correctable Error", node=rows),
                 "uncorrectable": r.int("remapped_rows", "Uncorrectable Error", node=rows),
                 "pending": r.flag("remapped_rows", "Pending", node=rows),
                 "failure": r.flag("remapped_rows", "Remapping Failure Occurred", node=rows)}
        if any(v is not None for v in remap.values()):
            dev["remapped_rows"] = remap
    dev.update(_power(r))
    dev["errors"] = r.errors
    return dev


def _anonymous_gpu(top: Node) -> Optional[Node]:
    """The top of a text copied without its ``GPU 0000...`` header, when it holds GPU-section keys."""
    names = {k.lower() for k in top["children"]}
    if any(k in names for k in GPU_KEYS):
        return top
    return None


def parse(text: str) -> Dict[str, Any]:
    """NVML-shaped facts from ``nvidia-smi -q`` text or ``-q -x`` XML: {"available", "source", "driver_version",
    "cuda_driver_version", "attached_gpus", "devices", "errors", "cuts", "complete", "format"}."""
    if len(text.encode("utf-8", "replace")) > MAX_BYTES:
        raise NvsmiTextError(f"more than {MAX_BYTES >> 20} MiB: not the output of one `nvidia-smi -q` run")
    if "\x00" in text:
        raise NvsmiTextError("the text holds NUL bytes: a binary file, not `nvidia-smi -q` output")
    xml = looks_like_xml(text)
    top, gpus, cuts = _xml_tree(text) if xml else _text_tree(text)
    headerless = False
    if not gpus:
        anon = _anonymous_gpu(top)
        if anon is None:
            raise NvsmiTextError("no 'GPU 00000000:BB:DD.F' section and no field of one (Product Name, ECC Errors, "
                                 "Clocks Event Reasons, ...): this is not `nvidia-smi -q` output (fix: run "
                                 "`nvidia-smi -q > FILE` and submit FILE)")
        gpus, headerless = [("", anon)], True
    r = _Fields(top)
    declared = r.int("attached_gpus", "Attached GPUs")
    devices = [_device(bus or None, node) for bus, node in gpus]
    for i, d in enumerate(devices):
        d["index"] = i
    driver, drv_line = r.value("Driver Version")
    cuda, _ = r.value("CUDA Version")
    out: Dict[str, Any] = {"available": True, "source": "nvidia-smi -q -x (XML)" if xml else "nvidia-smi -q (text)",
                           "format": "xml" if xml else "text", "driver_version": driver, "cuda_driver_version": cuda,
                           "driver_line": drv_line, "timestamp": r.value("Timestamp")[0], "attached_gpus": declared,
                           "devices": devices, "errors": list(r.errors), "cuts": cuts, "headerless": headerless}
    if headerless:
        out["cuts"].insert(0, {"line": gpus[0][1]["line"] or 1,
                               "text": "no 'GPU 0000:BB:DD.F' header: one GPU section copied without it"})
    if declared is not None and declared != len(devices):
        out["errors"].append({"field": "attached_gpus",
                              "error": f"'Attached GPUs' declares {declared} GPUs; {len(devices)} GPU section(s) "
                                       "follow"})
    # Every NVIDIA GPU of the machine is in the text when the declared count is met (a full `nvidia-smi -q`).
    out["complete"] = declared is not None and declared == len(devices) and not headerless
    return out


#: Utilisation at or above which a submitted reading counts as taken under load.
LOADED_UTILISATION = 50


def load_of(dev: Dict[str, Any]) -> Dict[str, Any]:
    """Whether the text's one reading was taken under load: the GPU's utilisation >= LOADED_UTILISATION %."""
    util = dev.get("utilization_gpu_percent")
    if util is not None and util >= LOADED_UTILISATION:
        return {"kind": "submitted reading", "under_load": True, "utilization_gpu_percent": util,
                "performance_state": dev.get("performance_state")}
    shown = f"{util}% GPU utilisation" if util is not None else "no utilisation in the text"
    pstate = f", {dev['performance_state']}" if dev.get("performance_state") else ""
    return {"kind": None, "under_load": False, "utilization_gpu_percent": util,
            "reason": f"{shown}{pstate}; under {LOADED_UTILISATION}% counts as idle"}


def link_evidence(dev: Dict[str, Any]) -> Dict[str, Any]:
    """TOPO-PCIE-LINK evidence from one device of the text: what the link can reach (the current format's
    Device Max and Host Max; the older format's single Max, which is already the lower of the two) and the one
    reading of Current, counted as under load when the GPU's utilisation was >= LOADED_UTILISATION %."""
    from ..pcie import SPEED_GTS, gen_of

    gts = lambda g: SPEED_GTS.get(g) if g else None  # noqa: E731
    dev_max = dev.get("pcie_gpu_max_gen") or dev.get("pcie_max_gen")
    host_max = dev.get("pcie_host_max_gen")
    if dev.get("pcie_gpu_max_gen"):  # current format: the lower of the device's and the host's maximum
        ach = min(dev_max, host_max) if host_max else dev_max
    else:  # older format: its one Max is already the lower of the two
        ach = dev.get("pcie_max_gen")
    load = load_of(dev)
    cap = {"device_max_speed_gts": gts(dev_max), "device_max_width": dev.get("pcie_max_width"), "slot": "host",
           "slot_max_speed_gts": gts(host_max), "slot_max_width": None, "achievable_speed_gts": gts(ach),
           "achievable_gen": gen_of(gts(ach)), "achievable_width": dev.get("pcie_max_width"),
           "format": dev.get("pcie_link_format")}
    sample = {"speed_gts": gts(dev.get("pcie_current_gen")), "width": dev.get("pcie_current_width"),
              "under_load": load["under_load"],
              "source": f"nvidia-smi -q (GPU section at line {dev.get('source_line')})"}
    load_ev = ({"kind": "submitted reading", "utilization_gpu_percent": load["utilization_gpu_percent"]}
               if load["under_load"] else {"kind": None, "reason": f"one submitted reading ({load['reason']})"})
    errors = [e for e in dev.get("errors") or [] if str(e.get("field", "")).startswith("pcie_") and not e.get("missing")]
    return {"device": dev["pci_bus_id"], "capability": cap, "samples": [sample], "load": load_ev, "errors": errors,
            "nvml_link": {k: dev.get(k) for k in ("pcie_current_gen", "pcie_current_width", "pcie_max_gen",
                                                  "pcie_max_width", "pcie_gpu_max_gen", "pcie_host_max_gen")}}


# ---- the reader ---------------------------------------------------------------------------------------------

_NVSMI_KEYS = re.compile(r"^\s*(?:Product Name|Persistence Mode|Clocks (?:Event|Throttle) Reasons|ECC Errors|"
                         r"Remapped Rows|Retired Pages|FB Memory Usage|GPU UUID|VBIOS Version|Performance State|"
                         r"Attached GPUs)\s*(?::|$)", re.M)
_NVSMI_SECTION = re.compile(r"^([ \t]*)(?:ECC Errors|Clocks (?:Event|Throttle) Reasons|Remapped Rows|Retired Pages|"
                            r"FB Memory Usage|GPU Power Readings|Power Readings|ECC Mode)[ \t]*\r?\n"
                            r"(?:\1[ \t]+[A-Za-z][^\n:]{0,60}\r?\n){0,2}\1[ \t]+"
                            r"[A-Za-z][^:\n]{0,60}?[ \t]:[ \t]", re.M)
_GPU_SECTION = re.compile(r"^GPU [0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]\s*$", re.M)


class NvidiaSmiQ(Reader):
    kinds = {"nvidia-smi-q": "nvidia-smi -q", "nvidia-smi-q-xml": "nvidia-smi -q -x (XML)"}
    steps = (NVIDIA_DEVICES,)
    order = 10
    option = "--nvidia-smi-q"
    option_help = ("`nvidia-smi -q` output, text or `-q -x` XML (any driver generation): identity, driver, link, "
                   "ECC, row remapping, clock events, persistence, power limit, firmware")
    link_load = "read"

    def detect_document(self, head: str) -> Optional[Detection]:
        if looks_like_xml(head):
            if "<nvidia_smi_log" in head:
                return "nvidia-smi-q-xml", "an <nvidia_smi_log> XML document"
            return None, "an XML document that is not `nvidia-smi -q -x` output (no <nvidia_smi_log>)"
        return None

    def detect(self, head: str) -> Optional[Detection]:
        if _GPU_SECTION.search(head) or "NVSMI LOG" in head or len(_NVSMI_KEYS.findall(head)) >= 2 or \
                _NVSMI_SECTION.search(head):
            return "nvidia-smi-q", "'GPU 0000:BB:DD.F' sections or nvidia-smi -q fields"
        return None

    def parse(self, kind: str, text: str, known_ids: Iterable[str] = ()) -> Dict[str, Any]:
        return parse(text)

    def merge(self, machine: Machine, entry: Entry, step: int) -> None:
        """The driver (two files that disagree describe two machines), every GPU section (the first reading of a
        GPU is kept; a snapshot's NVML facts come first) and its PCIe link reading."""
        f, facts, nvml = entry, entry["facts"], machine.nvml
        for key in ("driver_version", "cuda_driver_version"):
            if facts.get(key):
                if nvml.get(key) and nvml[key] != facts[key]:
                    machine.conflict(key.replace("_", " "), nvml[key], facts[key], nvml["files"][0], f["name"])
                nvml[key] = facts[key]
        nvml.update(available=True, source=f"submitted {f['tool']}", reason=None)
        nvml["files"].append(f["name"])
        nvml["errors"].extend(e for e in facts.get("errors") or [] if e.get("field") not in ("attached_gpus",))
        if facts.get("attached_gpus") is not None:
            machine.declared["nvidia"] = {"count": facts["attached_gpus"],
                                          "source": f"'Attached GPUs : {facts['attached_gpus']}' in {f['name']}"}
        if facts.get("complete"):
            machine.complete.setdefault("nvidia", []).append(f"{f['name']} (nvidia-smi -q: every GPU it declares)")
        accs = machine.accs
        for i, dev in enumerate(facts["devices"]):
            bdf = dev.get("pci_bus_id") or f"GPU section {i + 1} of {f['name']} (no PCI address)"
            missing_errors(dev, f)
            dev["source"] = f"submitted {f['tool']} ({f['name']})"
            dev["load"] = load_of(dev)
            a = new_accelerator(bdf, dev.get("pci_id"), "NVIDIA", dev.get("name"), f["name"])
            a["memory_total_bytes"] = dev.get("memory_total_bytes")
            a["memory_source"] = "nvml" if dev.get("memory_total_bytes") is not None else None
            if bdf in accs and accs[bdf].get("management"):
                old = accs[bdf]["management"]
                if machine.snapshot is not None and "source" not in old:
                    machine.notes.append(f"{bdf}: the snapshot's NVML facts are kept; {f['name']} is not used for it")
                    continue
                for k in ("uuid", "serial"):
                    if old.get(k) and dev.get(k) and old[k] != dev[k]:
                        machine.conflict(f"the {k} of {bdf}", old[k], dev[k], old.get("source"), f["name"])
                machine.notes.append(f"{bdf} is in {f['name']} and in an earlier file: the first reading is kept")
                continue
            a["management"] = dev
            machine.add(bdf, a)
            pcie_seen = dev.get("pcie_current_gen") is not None or any(
                str(e.get("field", "")).startswith("pcie_") and not e.get("missing") for e in dev["errors"])
            if pcie_seen and dev.get("pci_bus_id"):
                ev = link_evidence(dev)
                ev["method_text"] = (f"PCIe link of the submitted `nvidia-smi -q` ({f['name']}): Current against "
                                     "Device Max / Host Max (or the older single Max)")
                machine.links.setdefault(bdf, ev)

    def finish(self, machine: Machine, step: int) -> None:
        machine.nvml["attached_gpus"] = (machine.declared.get("nvidia") or {}).get("count")


READER = NvidiaSmiQ()
