"""Kernel logs (``dmesg``, ``journalctl -k``, ``/var/log/kern.log``): the NVRM Xid and PCIe AER lines, read by
the parsers the live probe uses (:mod:`pytest_sits.probes.health`), and the accelerators the lines name."""

from __future__ import annotations

import re
from typing import Any, Dict, Iterable, List, Optional

from ..health import parse_aer_lines, parse_xids
from .base import EVENTS, Detection, Entry, Machine, Reader, new_accelerator
from .pci import ACCEL_IDS

#: Vendor names of the accelerator vendors a boot log may enumerate.
VENDOR_NAMES = {"10de": "NVIDIA", "1002": "AMD", "8086": "Intel", "19e5": "Huawei", "1da3": "Habana", "1e52": "Tenstorrent"}

_KLOG = re.compile(r"NVRM: Xid|PCIe Bus Error|AER: (?:Multiple )?(?:Corrected|Uncorrected)|"
                   r"^\s*\[\s*\d{1,8}\.\d{3,6}\]|^\w{3} [ \d]\d \d\d:\d\d:\d\d \S+ kernel:|^\d{4}-\d\d-\d\dT\S+ \S+ kernel:",
                   re.M)
#: Line prefixes of the other ways a kernel log is printed, each recognised where a few lines of it agree:
#: ``dmesg --time-format iso``, ``dmesg -x`` (facility and level), ``dmesg -T``, ``journalctl -k -o short-precise``.
_KLOG_LINES = re.compile(r"^(?:\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[,.]\d{1,9}[+-]\d\d:?\d\d |"
                         r"(?:kern|user|daemon|syslog)\s{0,4}:\s{0,2}(?:emerg|alert|crit|err|warn|notice|info|debug)\s{0,2}: |"
                         r"\[(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4}\] |"
                         r"\w{3} [ \d]\d \d\d:\d\d:\d\d\.\d{1,9} \S{1,64} kernel: )", re.M)
_STAMP = re.compile(r"^\s*\[\s*(\d{1,8}\.\d{3,6})\]")
MAX_LINES = 2_000_000


def parse_kernel_log(text: str) -> Dict[str, Any]:
    """The Xid and AER events of a kernel log, the accelerators it names and the span of its timestamps."""
    lines = text.splitlines()[:MAX_LINES]
    xids = parse_xids(lines)
    aer = parse_aer_lines(lines)
    stamps = [m.group(1) for m in (_STAMP.match(ln) for ln in lines) if m]
    driver = next((n for n, ln in enumerate(lines, 1) if _NVIDIA_DRIVER.search(ln)), None)
    # Firmware-first AER: the platform keeps AER from the OS (errors go to the firmware / BMC, not this log).
    denied = [n for n, ln in enumerate(lines, 1) if _AER_DENIED.search(ln)]
    granted = [n for n, ln in enumerate(lines, 1) if _AER_GRANTED.search(ln)]
    # A log of several boots: the devices are the last boot's (an earlier boot's enumeration is another state)
    boots = [n for n, ln in enumerate(lines) if _BOOT.search(ln)]
    last = boots[-1] if boots else 0
    return {"records": len(lines), "xids": xids, "aer": aer, "devices": log_devices(lines, xids, last),
            "boots": len(boots),
            "span_s": [float(stamps[0]), float(stamps[-1])] if stamps else None, "nvidia_driver_line": driver,
            # any host bridge kept from the OS: a log without AER lines cannot show that a device had none
            "aer_firmware_first_line": denied[0] if denied else None, "aer_os_owned_lines": granted[:4],
            "boot_enumeration": _boot_enumeration(lines)}


_BOOT = re.compile(r"\bLinux version \d")


def _boot_enumeration(lines: List[str]) -> Optional[int]:
    """The line the log's (last) boot starts at, where it holds the kernel's PCI enumeration from that boot and
    goes on past it (then it lists every PCI function of the machine); None otherwise: a log cut inside the
    enumeration lists only part of it."""
    starts = [n for n, ln in enumerate(lines, 1) if _BOOT.search(ln)]
    if not starts:
        return None
    start = starts[-1]
    enum = [n for n, ln in enumerate(lines[start - 1:], start) if _ENUM.search(ln)]
    if not enum:
        return None
    # the enumeration ended: a later line of the boot that is not PCI set-up (pci/pci_bus/acpi lines)
    after = [ln for ln in lines[enum[-1]:] if ln.strip() and not re.search(r"\bpci(?:_bus|eport)? |\bacpi\b|PCI:", ln)]
    return start if len(after) >= 5 else None


#: The kernel's PCI enumeration at boot: ``pci 0000:e1:00.0: [10de:2321] type 00 class 0x030200 PCIe Endpoint``.
_ENUM = re.compile(r"\bpci (?P<bdf>[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]): \[(?P<vid>[0-9a-f]{4}):(?P<did>[0-9a-f]{4})\] "
                   r"type [0-9a-f]{2} class 0x(?P<cls>[0-9a-f]{6})\b", re.I)
#: A line of the NVIDIA driver (NVRM, or one of its modules naming itself): the driver ran within the log.
_NVIDIA_DRIVER = re.compile(r"NVRM: |\bnvidia(?:-modeset|-uvm|-drm|-nvlink|-peermem)?: |\bnvidia [0-9a-f]{4}:[0-9a-f]{2}:")
_AER_DENIED = re.compile(r"_OSC: platform does not support \[[^\]]{0,200}\bAER\b|HEST: Enabling Firmware First mode")
_AER_GRANTED = re.compile(r"_OSC: OS now controls \[[^\]]{0,200}\bAER\b")
_LOG_DEVICE = re.compile(r"\b(?P<drv>nvidia|amdgpu) (?P<bdf>[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]):.{0,80}?"
                         r"device \[(?P<vid>[0-9a-f]{4}):(?P<did>[0-9a-f]{4})\]", re.I)


def log_devices(lines: List[str], xids: List[Dict[str, Any]], boot_index: int = 0) -> List[Dict[str, Any]]:
    """The accelerators a kernel log names: the GPU of each NVRM Xid line (its bus; function 0), the functions the
    kernel enumerated at boot with an accelerator's vendor and class (``pci BDF: [vvvv:dddd] type 00 class
    0x030200``, the sysfs rule), and functions of the nvidia or amdgpu driver whose AER detail line gives an
    accelerator's [vendor:device] ID."""
    out: Dict[str, Dict[str, Any]] = {}
    for x in xids:
        bdf = f"{x['bdf_prefix']}.0"
        out.setdefault(bdf, {"bdf": bdf, "vendor": "NVIDIA", "pci_id": None, "why": "an NVRM Xid line names it"})
    from ..sysfs import is_accelerator

    for n, line in enumerate(lines, 1):
        e = _ENUM.search(line) if n > boot_index else None
        if e:
            vid, cls = e.group("vid").lower(), e.group("cls").lower()
            if is_accelerator({"vendor_id": vid, "class": f"0x{cls}"}):
                bdf = e.group("bdf").lower()
                pci_id = f"{vid}:{e.group('did').lower()}"
                vendor = VENDOR_NAMES.get(vid, vid)
                out.setdefault(bdf, {"bdf": bdf, "vendor": vendor, "pci_id": pci_id,
                                     "name": f"{vendor} {ACCEL_IDS[pci_id]}" if pci_id in ACCEL_IDS else None,
                                     "why": f"the kernel enumerated it (line {n}: {pci_id}, class 0x{cls})"})
            continue
        m = _LOG_DEVICE.search(line)
        if not m:
            continue
        pci_id = f"{m.group('vid').lower()}:{m.group('did').lower()}"
        if pci_id not in ACCEL_IDS:
            continue
        bdf = m.group("bdf").lower()
        prev = out.get(bdf) or out.get(bdf.rsplit(".", 1)[0] + ".0")
        if prev is not None and prev["bdf"].rsplit(".", 1)[0] == bdf.rsplit(".", 1)[0]:
            prev["pci_id"] = prev["pci_id"] or pci_id
            continue
        out[bdf] = {"bdf": bdf, "vendor": "NVIDIA" if pci_id.startswith("10de") else "AMD", "pci_id": pci_id,
                    "why": f"the {m.group('drv')} driver reports {ACCEL_IDS[pci_id]} ({pci_id}) at it"}
    return sorted(out.values(), key=lambda d: d["bdf"])


class KernelLog(Reader):
    kinds = {"kernel-log": "kernel log (dmesg / journalctl -k)"}
    steps = (EVENTS,)
    order = 90
    option = "--kernel-log"
    option_help = "`dmesg` / `journalctl -k` with NVRM Xid and AER lines"

    def detect(self, head: str) -> Optional[Detection]:
        if _KLOG.search(head):
            return "kernel-log", "kernel log lines"
        lines = [ln for ln in head[:65536].splitlines() if ln.strip()][:50]
        hits = sum(1 for ln in lines if _KLOG_LINES.match(ln))
        if lines and hits >= min(3, len(lines)) and hits * 2 >= len(lines):
            return "kernel-log", "kernel log lines (dmesg --time-format iso / -x / -T, or journalctl -k)"
        return None

    def parse(self, kind: str, text: str, known_ids: Iterable[str] = ()) -> Dict[str, Any]:
        return parse_kernel_log(text)

    def merge(self, machine: Machine, entry: Entry, step: int) -> None:
        """The events, and the GPUs they name (an Xid names an NVIDIA GPU; an AER line of the nvidia or amdgpu
        driver with an accelerator's [vendor:device] ID names one) when no other text lists the machine's."""
        f, facts = entry, entry["facts"]
        if machine.kernel_log is None:
            machine.kernel_log = {"files": [], "records": 0, "xids": [], "aer": [], "spans": [], "nvidia_driver": None}
        klog = machine.kernel_log
        klog["files"].append(f["name"])
        klog["records"] += facts["records"]
        if facts.get("nvidia_driver_line") and not klog.get("nvidia_driver"):
            klog["nvidia_driver"] = f"{f['name']} line {facts['nvidia_driver_line']}"
        if facts.get("aer_firmware_first_line"):
            klog.setdefault("aer_firmware_first", []).append(f"{f['name']} line {facts['aer_firmware_first_line']}")
        klog["xids"].extend(dict(x, file=f["name"]) for x in facts["xids"])
        klog["aer"].extend(dict(x, file=f["name"]) for x in facts["aer"])
        if facts.get("span_s"):
            klog["spans"].append({"file": f["name"], "from_s": facts["span_s"][0], "to_s": facts["span_s"][1]})
        boot = facts.get("boot_enumeration")
        lists_all = bool(boot) and not any(machine.complete.get(v) for v in ("nvidia", "amd"))
        for dev in facts.get("devices") or []:
            known = [k for k in machine.order if k.rsplit(".", 1)[0] == dev["bdf"].rsplit(".", 1)[0]]
            if known or (dev["vendor"] == "NVIDIA" and machine.complete.get("nvidia")) or \
                    (dev["vendor"] == "AMD" and machine.complete.get("amd")):
                continue  # another text lists the machine's GPUs: the log adds events, not devices
            a = machine.add(dev["bdf"], new_accelerator(dev["bdf"], dev.get("pci_id"), dev["vendor"], dev.get("name"),
                                                        f["name"]))
            a["note"] = f"named by the kernel log ({dev['why']}); no other text gives its facts"
        if lists_all:  # after its devices: a listing of every function, from boot, where no other text lists them
            for vendor in sorted({str(d["vendor"]).lower() for d in facts.get("devices") or []} | {"nvidia"}):
                machine.complete.setdefault(vendor, []).append(
                    f"{f['name']} (the kernel's PCI enumeration from boot, line {boot}: every function)")


READER = KernelLog()
