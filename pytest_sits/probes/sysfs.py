"""Host facts from /proc and /sys, read below a root folder.

The live platform reads below ``/``; a snapshot reads the same files below
the folder ``sits capture`` wrote; the sim platform reads a tree it built.
The same code runs in all three, so a check tested on a snapshot is tested
on the code that runs live.

Below any root other than ``/`` the files came from somewhere else and are
untrusted: every read resolves its path and must stay inside the root (the
snapshot's own relative links, such as ``sys/bus/pci/devices/*``, resolve
inside it; a link to ``/etc/shadow`` does not), must be a regular file (not
``/dev/zero``) and at most :data:`FILE_LIMIT` bytes.  A value that cannot be
parsed raises :class:`SysfsValueError` naming the file.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

from ..files import read_resolved, resolve_inside
from .pcie import gen_of, parse_config, parse_sysfs_speed

#: Largest file read below a non-live root (/proc/cpuinfo of a 1,024-CPU host is about 1.5 MB).
FILE_LIMIT = 8 << 20
#: Most CPUs a machine may have: the largest NR_CPUS of a Linux build (x86_64 MAXSMP, arm64: 8192).
MAX_CPUS = 8192
#: Most NUMA nodes a machine may have: 1 << CONFIG_NODES_SHIFT at its largest (10).
MAX_NODES = 1024


class SysfsValueError(ValueError):
    """A file below the root holds a value that cannot be parsed; the message names the file."""

BDF_RE = re.compile(r"^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")

# Vendors whose display-class (0x03) or processing-accelerator-class (0x12)
# functions count as accelerators.
ACCEL_VENDORS = {
    "10de": "NVIDIA",
    "1002": "AMD",
    "19e5": "Huawei",
    "1da3": "Habana (Intel)",
    "8086": "Intel",
    "1e52": "Tenstorrent",
    "1d22": "Baidu",
    "1e3e": "Biren",
    "1ed5": "Moore Threads",
    "1bd4": "Inspur",
}

# What `sits capture` copies: every file the probes read, as globs below /.
CAPTURE_GLOBS = [
    "proc/cpuinfo",
    "proc/meminfo",
    "proc/sys/kernel/hostname",
    "proc/sys/kernel/osrelease",
    "etc/os-release",
    "sys/devices/system/node/online",
    "sys/devices/system/node/node*/cpulist",
    "sys/devices/system/node/node*/meminfo",
    "sys/devices/system/node/node*/distance",
    "sys/devices/system/cpu/online",
    "sys/devices/system/cpu/cpu*/topology/physical_package_id",
    "sys/devices/system/cpu/cpu*/topology/core_id",
    "sys/devices/system/cpu/cpu0/cache/index*/level",
    "sys/devices/system/cpu/cpu0/cache/index*/size",
    "sys/devices/system/cpu/cpu0/cache/index*/type",
    "sys/devices/system/cpu/cpu0/cache/index*/shared_cpu_list",
    "sys/class/hwmon/hwmon*/name",
    "sys/class/hwmon/hwmon*/temp*_input",
    "sys/class/hwmon/hwmon*/temp*_label",
    "sys/class/thermal/thermal_zone*/type",
    "sys/class/thermal/thermal_zone*/temp",
    "sys/module/module/parameters/sig_enforce",
    "sys/module/nvidia/taint",
    "sys/module/nvidia/version",
    "sys/module/amdgpu/taint",
    "sys/module/amdgpu/version",
    "sys/module/kvm_amd/parameters/sev*",
    "sys/module/kvm_intel/parameters/tdx",
]
PCI_ATTRS = [
    "class", "vendor", "device", "subsystem_vendor", "subsystem_device", "revision",
    "numa_node", "local_cpulist", "current_link_speed", "current_link_width",
    "max_link_speed", "max_link_width", "config",
    "aer_dev_correctable", "aer_dev_nonfatal", "aer_dev_fatal",
]


def _live(root: Path) -> bool:
    return str(root) == "/"


def confined_path(root: Path, path: Any) -> str:
    """The real path of ``path`` (below ``root``); below a non-live root it must stay inside the root."""
    return os.path.realpath(path) if _live(root) else resolve_inside(root, path)


def read_bytes(root: Path, rel: str, limit: int = FILE_LIMIT) -> Optional[bytes]:
    """The bytes of ``root/rel``, or None when it is missing or unreadable (confined below a non-live root)."""
    if _live(root):
        try:
            return (Path(root) / rel).read_bytes()
        except OSError:
            return None
    return read_resolved(root, rel, limit)


def read_text(root: Path, rel: str) -> Optional[str]:
    data = read_bytes(root, rel)
    return data.decode("utf-8", errors="replace").strip() if data is not None else None


def parse_cpulist(text: Optional[str], where: str = "cpulist") -> List[int]:
    """'0-3,8,10-11' -> [0, 1, 2, 3, 8, 10, 11]; SysfsValueError for anything else."""
    out: List[int] = []
    for part in (text or "").split(","):
        part = part.strip()
        if not part:
            continue
        m = re.fullmatch(r"(\d{1,6})(?:-(\d{1,6}))?", part)
        if not m:
            raise SysfsValueError(f"{where}: {part[:40]!r} is not a CPU list entry (N or N-M)")
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if hi < lo or hi >= MAX_CPUS or len(out) + hi - lo + 1 > MAX_CPUS:
            raise SysfsValueError(f"{where}: {part[:40]!r} runs backwards or names a CPU beyond {MAX_CPUS - 1} (more "
                                  f"than {MAX_CPUS} CPUs, the most a Linux kernel supports)")
        out.extend(range(lo, hi + 1))
    return out


def cpu_facts(root: Path) -> Dict[str, Any]:
    text = read_text(root, "proc/cpuinfo") or ""
    procs: List[Dict[str, str]] = []
    cur: Dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if cur:
                procs.append(cur)
            cur = {}
            continue
        if ":" in line:
            k, v = line.split(":", 1)
            cur[k.strip()] = v.strip()
    if cur:
        procs.append(cur)
    model = next((p.get("model name") for p in procs if p.get("model name")), None)
    packages = {p.get("physical id") for p in procs if "physical id" in p}
    cores = {(p.get("physical id"), p.get("core id")) for p in procs if "core id" in p}
    if not packages:  # some VMs and non-x86 kernels: fall back to sysfs topology
        for d in sorted((root / "sys/devices/system/cpu").glob("cpu[0-9]*")):
            pkg = read_text(root, str(d.relative_to(root) / "topology/physical_package_id"))
            if pkg is not None:
                packages.add(pkg)
    return {
        "model": model or "unknown",
        "vendor": next((p.get("vendor_id") for p in procs if p.get("vendor_id")), None),
        "sockets": len(packages) or None,
        "cores": len(cores) or None,
        "threads": len(procs),
        "source": "proc/cpuinfo",
    }


def mem_facts(root: Path) -> Dict[str, Any]:
    text = read_text(root, "proc/meminfo") or ""
    m = re.search(r"^MemTotal:\s+(\d{1,19})\s+kB", text, re.M)
    return {"total_bytes": int(m.group(1)) * 1024 if m else None, "source": "proc/meminfo"}


def numa_facts(root: Path) -> List[Dict[str, Any]]:
    """The NUMA nodes, their CPUs, memory and distances.  A tree with more nodes than any Linux kernel supports
    (:data:`MAX_NODES`), a CPU numbered beyond :data:`MAX_CPUS`, or a CPU in two nodes is refused
    (SysfsValueError): such a snapshot was made up, and reading it whole would cost gigabytes."""
    nodes = []
    base = root / "sys/devices/system/node"
    dirs = [d for d in base.glob("node[0-9]*") if re.fullmatch(r"node\d{1,5}", d.name)]
    if len(dirs) > MAX_NODES:
        raise SysfsValueError(f"{base}: {len(dirs)} NUMA nodes, more than a Linux kernel supports ({MAX_NODES}); "
                              "this tree was not captured from a machine")
    seen: set = set()
    for d in sorted(dirs, key=lambda p: int(p.name[4:])):
        rel = d.relative_to(root)
        meminfo = read_text(root, str(rel / "meminfo")) or ""
        m = re.search(r"MemTotal:\s+(\d{1,19})\s+kB", meminfo)
        distance = read_text(root, str(rel / "distance"))
        cpulist = read_text(root, str(rel / "cpulist"))
        cpus = parse_cpulist(cpulist, f"{root}/{rel}/cpulist")
        twice = seen.intersection(cpus)  # CPU numbers below MAX_CPUS, each in one node: MAX_CPUS in all at most
        if twice:
            raise SysfsValueError(f"{root}/{rel}/cpulist: CPU {min(twice)} is in two NUMA nodes; this tree was "
                                  "not captured from a machine")
        seen.update(cpus)
        nodes.append({
            "node": int(d.name[4:]),
            "cpulist": cpulist,
            "cpus": cpus,
            "mem_total_bytes": int(m.group(1)) * 1024 if m else None,
            "distance": [_int(x) for x in distance.split()[:4096]] if distance else None,
        })
    return nodes


def _int(text: Optional[str], base: int = 10) -> Optional[int]:
    try:
        return int(text, base) if text is not None else None
    except ValueError:
        return None


def pci_devices(root: Path) -> List[Dict[str, Any]]:
    """Every PCI function under sys/bus/pci/devices, with its bridge chain."""
    devs: List[Dict[str, Any]] = []
    bus = root / "sys/bus/pci/devices"
    if not bus.is_dir():
        return devs
    root_real = os.path.realpath(root)
    for entry in sorted(bus.iterdir()):
        bdf = entry.name
        real = confined_path(root, entry)
        rel_real = os.path.relpath(real, root_real)
        parts = rel_real.split(os.sep)
        chain = [p for p in parts if BDF_RE.match(p)]
        upstream = list(reversed(chain[:-1]))  # nearest bridge first, root port last
        rel = os.path.relpath(real, root_real)
        attrs = {a: read_text(root, os.path.join(rel, a)) for a in PCI_ATTRS if a != "config"}
        cfg_bytes = read_bytes(root, os.path.join(rel, "config"), limit=4096)
        cfg = parse_config(cfg_bytes) if cfg_bytes is not None else {"bytes": 0, "pcie": None,
                                                                       "reason": "config not readable"}
        driver = None
        try:
            driver = os.path.basename(os.readlink(os.path.join(real, "driver")))
        except OSError:
            pass
        cls = _int(attrs["class"], 16)
        vendor = (attrs["vendor"] or "0x0000")[2:].lower()
        device = (attrs["device"] or "0x0000")[2:].lower()
        cur = parse_sysfs_speed(attrs["current_link_speed"])
        mx = parse_sysfs_speed(attrs["max_link_speed"])
        devs.append({
            "bdf": bdf,
            "sysfs_path": "/" + rel_real,
            "pci_id": f"{vendor}:{device}",
            "vendor_id": vendor,
            "device_id": device,
            "subsystem_id": f"{(attrs['subsystem_vendor'] or '0x')[2:]}:{(attrs['subsystem_device'] or '0x')[2:]}",
            "class": f"0x{cls:06x}" if cls is not None else None,
            "numa_node": _int(attrs["numa_node"]),
            "local_cpulist": attrs["local_cpulist"],
            "driver": driver,
            "upstream": upstream,
            "link": {
                "current_speed_gts": cur, "current_gen": gen_of(cur),
                "current_width": _int(attrs["current_link_width"]),
                "max_speed_gts": mx, "max_gen": gen_of(mx),
                "max_width": _int(attrs["max_link_width"]),
                "raw": {k: attrs[k] for k in ("current_link_speed", "current_link_width",
                                              "max_link_speed", "max_link_width")},
            },
            "config": {k: v for k, v in cfg.items() if k in ("bytes", "pcie", "reason")},
        })
    return devs


def is_accelerator(dev: Dict[str, Any]) -> bool:
    cls = int(dev["class"], 16) if dev.get("class") else 0
    base_class = cls >> 16
    if dev["vendor_id"] not in ACCEL_VENDORS:
        return False
    if dev["vendor_id"] == "8086":  # Intel: data-centre GPUs are 0x0380; iGPUs (0x0300) are not
        return cls >> 8 == 0x0380 or base_class == 0x12
    return base_class in (0x03, 0x12)


def host_facts(root: Path) -> Dict[str, Any]:
    osr = read_text(root, "etc/os-release") or ""
    m = re.search(r'^PRETTY_NAME="?([^"\n]*)"?', osr, re.M)
    return {
        "hostname": read_text(root, "proc/sys/kernel/hostname"),
        "kernel": read_text(root, "proc/sys/kernel/osrelease"),
        "os": m.group(1) if m else None,
    }


def collect(root: Path) -> Dict[str, Any]:
    """Everything the sysfs side of the inventory knows, as evidence."""
    pci = pci_devices(root)
    return {
        "collected_at": time.time(),
        "host": host_facts(root),
        "cpu": cpu_facts(root),
        "memory": mem_facts(root),
        "numa": numa_facts(root),
        "pci": pci,
    }


def ptp_clocks(root: Path) -> List[Dict[str, Any]]:
    """The PTP hardware clocks the kernel lists (``/sys/class/ptp/ptpN``: a NIC's or a platform's timestamp
    clock), with their names and the device file each is read through."""
    base = root / "sys/class/ptp"
    out = []
    for d in sorted(base.glob("ptp[0-9]*"), key=lambda p: p.name) if base.is_dir() else []:
        if not re.fullmatch(r"ptp\d{1,4}", d.name):
            continue
        name = read_text(root, f"sys/class/ptp/{d.name}/clock_name")
        out.append({"device": f"/dev/{d.name}", "name": (name or "")[:64] or None,
                    "source": f"/sys/class/ptp/{d.name}/clock_name"})
    return out[:64]
