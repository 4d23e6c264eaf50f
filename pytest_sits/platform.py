"""Platforms: where a session's hardware evidence comes from.

* ``live`` - this machine (``/proc``, ``/sys``, NVML).
* ``snapshot:DIR`` - files and NVML facts captured earlier by ``sits capture DIR``.
* ``sim:PROFILE[+fault,...]`` - a machine built from a profile, with faults
  injected; everything it produces is labelled SIMULATED.

All three read files through the same probes (below a root folder), so a
snapshot or a simulated tree exercises the code that runs live.
"""

from __future__ import annotations

import atexit
import json
from contextlib import contextmanager
import os
import shutil
import socket
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

from . import __version__
from .probes import nvml as nvml_probe
from .probes import sysfs
from .probes.pcie import build_config

SNAPSHOT_FORMAT = "sits-snapshot/1"


class PlatformError(Exception):
    """A platform spec or snapshot cannot be used; the message says the fix."""


class Platform:
    kind = "live"
    simulated = False
    link_sample_interval_s = 0.1  # between link-state readings; files that never change need no wait

    def __init__(self, root: Path, label: str):
        self.root = Path(root)
        self.label = label
        self._inventory: Optional[Dict[str, Any]] = None

    # Management-library facts; subclasses read them from elsewhere.
    def nvml(self) -> Dict[str, Any]:
        return nvml_probe.collect()

    def amdsmi(self) -> Dict[str, Any]:
        from .probes import amd

        return amd.collect()

    def accelerator_load(self, acc: Dict[str, Any]) -> Any:
        """A load generator on the accelerator (context manager); raises LoadUnavailable with the reason."""
        from .probes.load import TorchMatmulLoad, torch_device_for_bdf

        return TorchMatmulLoad(torch_device_for_bdf(acc["bdf"]), duty=1.0, size=4096)

    @contextmanager
    def numa_binding(self, node: int, cpus: List[int]) -> Iterator[Dict[str, Any]]:
        """Bind this thread (and the threads it starts) to a NUMA node; yield the binding read back."""
        from .probes import numa

        with numa.bind(node, cpus) as evidence:
            yield evidence

    def host_measurement_reason(self) -> Optional[str]:
        """None when host measurements (DRAM bandwidth, timing) can run here; else why not."""
        return None

    def device_bandwidth(self, acc: Dict[str, Any], nbytes: int) -> Dict[str, Any]:
        from .probes.device_bw import device_memory_bandwidth
        from .probes.load import torch_device_for_bdf

        return device_memory_bandwidth(torch_device_for_bdf(acc["bdf"]), nbytes)

    def host_device_bandwidth(self, acc: Dict[str, Any], nbytes: int) -> Dict[str, Any]:
        from .probes.device_bw import host_device_bandwidth
        from .probes.load import torch_device_for_bdf

        return host_device_bandwidth(torch_device_for_bdf(acc["bdf"]), nbytes)

    def thermal_rigs(self, kind: str, acc: Optional[Dict[str, Any]] = None) -> List[Any]:
        """Sensor + load pairs for THERM-*-STEADY; raises ThermalUnavailable with the reason."""
        from .thermalrig import live_cpu_rigs, live_gpu_rig

        if kind == "cpu":
            return live_cpu_rigs(self.root)
        return [live_gpu_rig(acc)]

    def inventory(self) -> Dict[str, Any]:
        if self._inventory is None:
            self._inventory = build_inventory(self)
        return self._inventory

    def describe(self) -> str:
        inv = self.inventory()
        accs = inv["accelerators"]
        if accs:
            counts: Dict[str, int] = {}
            for a in accs:
                counts[a["display_name"]] = counts.get(a["display_name"], 0) + 1
            acc = ", ".join(f"{n} × {name}" for name, n in counts.items())
        else:
            acc = "no accelerator"
        cpu = inv["cpu"]
        return (f"{self.label}: {cpu.get('sockets') or '?'} socket(s) {cpu.get('model')}, "
                f"{len(inv['numa'])} NUMA node(s), {acc}")


class LivePlatform(Platform):
    kind = "live"

    def __init__(self) -> None:
        super().__init__(Path("/"), "live")


class SnapshotPlatform(Platform):
    kind = "snapshot"
    link_sample_interval_s = 0.0

    def __init__(self, directory: Path):
        directory = Path(directory)
        manifest_path = directory / "manifest.json"
        if not manifest_path.is_file():
            raise PlatformError(f"{directory}: not a snapshot (no manifest.json); "
                                "fix: make one with `sits capture DIR` on the machine to audit")
        try:
            self.manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise PlatformError(f"{manifest_path}: not valid JSON ({exc}); fix: capture the snapshot again")
        if self.manifest.get("format") != SNAPSHOT_FORMAT:
            raise PlatformError(f"{manifest_path}: format {self.manifest.get('format')!r} is not "
                                f"{SNAPSHOT_FORMAT!r}; fix: capture it again with this version of pytest-sits")
        self.directory = directory
        label = f"snapshot:{directory} (captured on {self.manifest.get('hostname')} at {self.manifest.get('captured_at_iso')})"
        super().__init__(directory / "fs", label)

    def _facts(self, name: str, what: str) -> Dict[str, Any]:
        path = self.directory / name
        if not path.is_file():
            return {"available": False, "reason": f"snapshot holds no {what} facts", "devices": [], "errors": []}
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise PlatformError(f"{path}: not valid JSON ({exc}); fix: capture the snapshot again")

    def nvml(self) -> Dict[str, Any]:
        return self._facts("nvml.json", "NVML")

    def amdsmi(self) -> Dict[str, Any]:
        return self._facts("amdsmi.json", "amdsmi")

    def accelerator_load(self, acc: Dict[str, Any]) -> Any:
        from .probes.load import LoadUnavailable

        raise LoadUnavailable("a snapshot cannot apply load: the link readings are the captured ones")

    def host_measurement_reason(self) -> Optional[str]:
        return "a snapshot holds captured files, not a machine to measure"

    def device_bandwidth(self, acc: Dict[str, Any], nbytes: int) -> Dict[str, Any]:
        from .probes.load import LoadUnavailable

        raise LoadUnavailable("a snapshot holds no device to measure")

    host_device_bandwidth = device_bandwidth

    def thermal_rigs(self, kind: str, acc: Optional[Dict[str, Any]] = None) -> List[Any]:
        from .thermalrig import ThermalUnavailable

        raise ThermalUnavailable("a snapshot cannot run a thermal calibration")

    @contextmanager
    def numa_binding(self, node: int, cpus: List[int]) -> Iterator[Dict[str, Any]]:
        yield {"node": node, "requested_cpus": sorted(cpus), "applied": None,
               "reason": "a snapshot cannot bind processes on the machine it was captured on"}


# --------------------------------------------------------------------------
# Simulation

FAULTS: Dict[str, str] = {
    "missing-device": "one accelerator fewer than the profile expects",
    "wrong-model": "the last accelerator has another PCI device ID",
    "small-memory": "every accelerator reports half of its datasheet memory",
    "no-nvml": "NVML is not available (driver not loaded)",
    "switch": "a PCIe switch (upstream + downstream port) between each accelerator and its root port",
    "switch2": "two levels of PCIe switch between each accelerator and its root port",
    "link-degraded": "the first accelerator trained at one generation lower and half width, under load",
    "link-idle": "every accelerator link reads 2.5 GT/s (idle power saving)",
    "numa-unknown": "accelerators report NUMA node -1 on a two-node host",
    "nvlink-partial": "two accelerator pairs have no NVLink P2P path",
    "old-driver": "NVIDIA driver 535.104.05 with CUDA 12.2",
    "hostile-name": "accelerator names contain HTML (<script>) to test escaping",
    "membw-low": "device memory copies reach 40% of the datasheet bandwidth",
    "thermal-hot": "cooling too weak: even idle, the simulated temperature settles above the band",
    "thermal-drift": "inlet temperature keeps rising: the simulated temperature never settles",
    "sensor-na": "the simulated temperature sensors return N/A after 100 s",
    "pcie-bw-low": "host<->device copies reach 30% of the link's rate",
}


class SimPlatform(Platform):
    kind = "sim"
    simulated = True
    link_sample_interval_s = 0.0

    def __init__(self, profile: Any, faults: List[str], spec: str):
        unknown = [f for f in faults if f not in FAULTS]
        if unknown:
            raise PlatformError(f"unknown sim fault {unknown[0]!r}; fix: use one of "
                                + ", ".join(sorted(FAULTS)))
        self.profile = profile
        self.faults = list(faults)
        tmp = Path(tempfile.mkdtemp(prefix="sits-sim-"))
        atexit.register(shutil.rmtree, tmp, True)
        self._nvml = build_sim_tree(tmp, profile, self.faults)
        super().__init__(tmp, f"SIMULATED sim:{spec}")

    def nvml(self) -> Dict[str, Any]:
        return json.loads(json.dumps(self._nvml))

    def amdsmi(self) -> Dict[str, Any]:
        return {"available": False, "reason": "simulated platform: no amdsmi", "devices": [], "errors": []}

    def host_measurement_reason(self) -> Optional[str]:
        return "simulated platform: host DRAM measurements need the live machine"

    def thermal_rigs(self, kind: str, acc: Optional[Dict[str, Any]] = None) -> List[Any]:
        from .thermalrig import sim_rigs

        return sim_rigs(kind, acc, self.faults, self.profile)

    def device_bandwidth(self, acc: Dict[str, Any], nbytes: int) -> Dict[str, Any]:
        eff = 0.40 if "membw-low" in self.faults else 0.90
        g = float(self.profile.hardware.get("memory_bandwidth_gbps", 0)) * eff
        return {"device": acc["bdf"], "bytes": nbytes, "runs": 7, "verified": True, "simulated": True,
                "method": "simulated", "gbps_median": g, "gbps_min": g * 0.98, "gbps_max": g * 1.01,
                "samples_gbps": [g] * 7}

    def host_device_bandwidth(self, acc: Dict[str, Any], nbytes: int) -> Dict[str, Any]:
        from .probes.device_bw import link_theoretical_gbps

        link = acc["link"]
        theo = link_theoretical_gbps(link["current_gen"], link["current_width"])
        g = theo * (0.30 if "pcie-bw-low" in self.faults else 0.85)
        one = {"gbps_median": g, "gbps_min": g * 0.98, "gbps_max": g * 1.01, "samples_gbps": [g] * 7}
        return {"device": acc["bdf"], "bytes": nbytes, "runs": 7, "pinned": True, "verified": True,
                "simulated": True, "method": "simulated", "h2d": one, "d2h": dict(one)}

    def accelerator_load(self, acc: Dict[str, Any]) -> Any:
        from .probes.load import LoadUnavailable, SimulatedLoad

        if "link-idle" in self.faults:
            raise LoadUnavailable("simulated: no load generator (fault link-idle)")
        return SimulatedLoad(acc["bdf"])

    @contextmanager
    def numa_binding(self, node: int, cpus: List[int]) -> Iterator[Dict[str, Any]]:
        yield {"node": node, "requested_cpus": sorted(cpus), "applied": True, "simulated": True,
               "method": "simulated", "cpus_in_force": sorted(cpus),
               "memory_policy_in_force": {"mode": "bind", "nodes": [node]}, "errors": []}


def _write(path: Path, content: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(str(content) + "\n", encoding="utf-8")


def _speed_text(gen: int) -> str:
    return {1: "2.5 GT/s PCIe", 2: "5.0 GT/s PCIe", 3: "8.0 GT/s PCIe", 4: "16.0 GT/s PCIe",
            5: "32.0 GT/s PCIe", 6: "64.0 GT/s PCIe"}[gen]


def add_pci_function(root: Path, parent_rel: str, bdf: str, vendor: int, device: int, class_code: int,
                  port_type: Optional[int], max_gen: int, max_width: int, cur_gen: int, cur_width: int,
                  numa: int, driver: Optional[str] = None, config_size: int = 4096) -> str:
    """Write one PCI function below ``parent_rel`` (a sysfs tree under ``root``); return its path."""
    rel = f"{parent_rel}/{bdf}"
    d = root / rel
    _write(d / "vendor", f"0x{vendor:04x}")
    _write(d / "device", f"0x{device:04x}")
    _write(d / "subsystem_vendor", f"0x{vendor:04x}")
    _write(d / "subsystem_device", "0x0000")
    _write(d / "class", f"0x{class_code:06x}")
    _write(d / "numa_node", numa)
    _write(d / "current_link_speed", _speed_text(cur_gen))
    _write(d / "current_link_width", cur_width)
    _write(d / "max_link_speed", _speed_text(max_gen))
    _write(d / "max_link_width", max_width)
    _write(d / "config", build_config(vendor, device, class_code, port_type, max_gen, max_width,
                                      cur_gen, cur_width, size=config_size))
    if driver:
        os.symlink(f"../../../../bus/pci/drivers/{driver}", d / "driver")
    link = root / "sys/bus/pci/devices" / bdf
    link.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(os.path.relpath(d, link.parent), link)
    return rel


def build_sim_tree(root: Path, profile: Any, faults: List[str]) -> Dict[str, Any]:
    """Write a /proc + /sys tree for the profile's machine; return its NVML facts."""
    ident, hw = profile.identity, profile.hardware
    count = profile.expected_count
    sockets = 2
    cores_per_socket = 32
    # CPU
    lines = []
    for s in range(sockets):
        for c in range(cores_per_socket):
            cpu = s * cores_per_socket + c
            lines.append(f"processor\t: {cpu}\nvendor_id\t: SimulatedVendor\nmodel name\t: Simulated CPU "
                         f"(pytest-sits sim)\nphysical id\t: {s}\ncore id\t\t: {c}\n")
    _write(root / "proc/cpuinfo", "\n".join(lines))
    _write(root / "proc/meminfo", f"MemTotal:       {2 * 1024 ** 3} kB")  # 2 TiB
    _write(root / "proc/sys/kernel/hostname", "sits-sim")
    _write(root / "proc/sys/kernel/osrelease", "6.8.0-sim")
    for s in range(sockets):
        lo, hi = s * cores_per_socket, (s + 1) * cores_per_socket - 1
        _write(root / f"sys/devices/system/node/node{s}/cpulist", f"{lo}-{hi}")
        _write(root / f"sys/devices/system/node/node{s}/meminfo",
               f"Node {s} MemTotal:       {1024 ** 3} kB")
        _write(root / f"sys/devices/system/node/node{s}/distance", "10 21" if s == 0 else "21 10")
    _write(root / "sys/devices/system/node/online", f"0-{sockets - 1}")
    # PCI
    pci_id = (profile.pci_ids or ["10de:0000"])[0]
    vendor, device = (int(x, 16) for x in pci_id.split(":"))
    gen = int(hw.get("pcie_gen", 4))
    width = int(hw.get("pcie_width", 16))
    n = max(0, count - 1) if "missing-device" in faults else count
    driver = {0x10DE: "nvidia", 0x1002: "amdgpu", 0x19E5: "devdrv_device_driver"}.get(vendor)
    accel_class = 0x030200 if vendor in (0x10DE,) else 0x120000
    accel = []
    for i in range(n):
        sock = i * sockets // max(n, 1)
        domain_bus = 0x10 * (i + 1)
        rc = f"sys/devices/pci0000:{domain_bus:02x}"
        rp = f"0000:{domain_bus:02x}:01.0"
        parent = add_pci_function(root, rc, rp, 0x8086, 0x1BBE, 0x060400, 4, gen, 16, gen, 16, sock)
        bus = domain_bus + 1
        levels = 2 if "switch2" in faults else 1 if "switch" in faults else 0
        for lvl in range(levels):
            up = f"0000:{bus:02x}:00.0"
            parent = add_pci_function(root, parent, up, 0x1000, 0xC030, 0x060400, 5, gen, 16, gen, 16, sock)
            bus += 1
            down = f"0000:{bus:02x}:00.0"
            parent = add_pci_function(root, parent, down, 0x1000, 0xC030, 0x060400, 6, gen, 16, gen, 16, sock)
            bus += 1
        dev_id = device
        if "wrong-model" in faults and i == n - 1:
            dev_id = (device + 1) & 0xFFFF
        cur_gen, cur_width = gen, width
        if "link-degraded" in faults and i == 0:
            cur_gen, cur_width = max(1, gen - 1), max(1, width // 2)
        if "link-idle" in faults:
            cur_gen = 1
        numa = -1 if "numa-unknown" in faults else sock
        bdf = f"0000:{bus:02x}:00.0"
        add_pci_function(root, parent, bdf, vendor, dev_id, accel_class, 0, gen, width, cur_gen, cur_width,
                      numa, driver)
        accel.append((bdf, dev_id, cur_gen, cur_width))
    # A NIC beside them, so that the accelerator filter is exercised.
    add_pci_function(root, "sys/devices/pci0000:00", "0000:00:03.0", 0x15B3, 0x1021, 0x020000, 0, 5, 16, 5, 16, 0,
                  "mlx5_core")
    # NVML
    if vendor != 0x10DE:
        return {"available": False, "reason": f"simulated {ident.get('vendor')} devices have no NVML",
                "devices": [], "errors": []}
    if "no-nvml" in faults:
        return {"available": False, "reason": "NVML did not initialise: Driver Not Loaded (simulated)",
                "devices": [], "errors": []}
    mem = int(float(hw.get("memory_gb", 0)) * 1024 ** 3 * 0.995)
    if "small-memory" in faults:
        mem //= 2
    name = f"{ident.get('vendor', '')} {ident.get('model', '')} (simulated)".strip()
    if "hostile-name" in faults:
        name = "<script>alert('sits')</script> " + name
    links = int(hw.get("peer_link", {}).get("links", 0)) if hw.get("peer_link", {}).get("type") == "nvlink" else 0
    devices = []
    for i, (bdf, dev_id, cur_gen, cur_width) in enumerate(accel):
        devices.append({
            "index": i, "name": name, "uuid": f"GPU-00000000-0000-0000-0000-{i:012d}",
            "serial": f"SIM{i:010d}", "vbios_version": "96.00.00.00.01", "board_part_number": "SIM",
            "memory_total_bytes": mem, "pci_bus_id": bdf,
            "pcie_current_gen": cur_gen, "pcie_current_width": cur_width,
            "pcie_max_gen": gen, "pcie_max_width": width, "pcie_gpu_max_gen": gen,
            "power_limit_mw": int(float(hw.get("tdp_w", 0)) * 1000), "temperature_c": 45,
            "cc_mode": 0,
            "nvlinks": [{"link": k, "active": True, "version": int(hw.get("peer_link", {}).get("version", 4)),
                         "remote_bus_id": "0000:00:00.0", "remote_type": 2} for k in range(links)],
        })
    p2p = [[(None if i == j else links > 0) for j in range(len(accel))] for i in range(len(accel))]
    if "nvlink-partial" in faults and len(accel) >= 4:
        for a, b in ((0, 1), (2, 3)):
            p2p[a][b] = p2p[b][a] = False
    old = "old-driver" in faults
    return {"available": True, "source": "nvml (simulated)", "collected_at": time.time(),
            "driver_version": "535.104.05" if old else "560.35.03",
            "cuda_driver_version": "12.2" if old else "12.6",
            "nvml_version": "12.535.104.05" if old else "12.560.35.03",
            "devices": devices, "p2p_nvlink": p2p, "errors": []}


# --------------------------------------------------------------------------
# Inventory


def build_inventory(platform: Platform) -> Dict[str, Any]:
    inv = sysfs.collect(platform.root)
    nv = platform.nvml()
    amd = platform.amdsmi() if any(d["vendor_id"] == "1002" and sysfs.is_accelerator(d) for d in inv["pci"]) else {
        "available": False, "reason": "no AMD accelerator", "devices": [], "errors": []}
    by_bus = {d.get("pci_bus_id"): d for d in nv.get("devices", []) if d.get("pci_bus_id")}
    amd_by_bus = {d.get("pci_bus_id"): d for d in amd.get("devices", []) if d.get("pci_bus_id")}
    accelerators = []
    for dev in inv["pci"]:
        if not sysfs.is_accelerator(dev):
            continue
        acc = {
            "bdf": dev["bdf"],
            "pci_id": dev["pci_id"],
            "vendor": sysfs.ACCEL_VENDORS.get(dev["vendor_id"], dev["vendor_id"]),
            "class": dev["class"],
            "numa_node": dev["numa_node"],
            "driver": dev["driver"],
            "upstream": dev["upstream"],
            "link": dev["link"],
            "name": None,
            "memory_total_bytes": None,
            "memory_source": None,
            "management": None,
        }
        mgmt, source = by_bus.pop(dev["bdf"], None), "nvml"
        if mgmt is None:
            mgmt, source = amd_by_bus.pop(dev["bdf"], None), "amdsmi"
        if mgmt is not None:
            acc["management"] = mgmt
            acc["name"] = mgmt.get("name")
            acc["memory_total_bytes"] = mgmt.get("memory_total_bytes")
            acc["memory_source"] = source
        acc["display_name"] = acc["name"] or f"{acc['vendor']} {acc['pci_id']}"
        accelerators.append(acc)
    inv["accelerators"] = accelerators
    inv["management"] = {
        "nvml": {k: v for k, v in nv.items() if k not in ("devices",)},
        "amdsmi": {k: v for k, v in amd.items() if k not in ("devices",)},
        "nvml_devices_without_sysfs": sorted(k for k in by_bus if k),
    }
    inv["platform"] = {"kind": platform.kind, "label": platform.label, "simulated": platform.simulated}
    return inv


# --------------------------------------------------------------------------
# Specs and capture


def from_spec(spec: str, profile_loader: Any = None) -> Platform:
    """``live``, ``snapshot:DIR`` or ``sim:PROFILE[+fault,...]``."""
    if spec in ("", "live"):
        return LivePlatform()
    if spec.startswith("snapshot:"):
        return SnapshotPlatform(Path(spec[len("snapshot:"):]))
    if spec.startswith("sim:"):
        body = spec[len("sim:"):]
        name, _, fault_text = body.partition("+")
        faults = [f.strip() for f in fault_text.split(",") if f.strip()] if fault_text else []
        if profile_loader is None:
            from .profiles import resolve as profile_loader
        return SimPlatform(profile_loader(name), faults, body)
    raise PlatformError(f"unknown platform {spec!r}; fix: use live, snapshot:DIR or sim:PROFILE[+fault,...]")


def capture(dest: Path, root: Path = Path("/"), nvml: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """Copy what the probes read below ``root`` into ``dest`` (a snapshot)."""
    dest = Path(dest)
    fs = dest / "fs"
    if fs.exists():
        raise PlatformError(f"{dest}: already holds a snapshot; fix: choose an empty folder")
    fs.mkdir(parents=True)
    copied, skipped = 0, []
    for pattern in sysfs.CAPTURE_GLOBS:
        for src in sorted(root.glob(pattern)):
            rel = src.relative_to(root)
            try:
                data = src.read_bytes()
            except OSError as exc:
                skipped.append({"path": "/" + str(rel), "error": exc.strerror})
                continue
            _write(fs / rel, data)
            copied += 1
    bus = root / "sys/bus/pci/devices"
    root_real = os.path.realpath(root)
    for entry in sorted(bus.iterdir()) if bus.is_dir() else []:
        real = os.path.realpath(entry)
        rel = os.path.relpath(real, root_real)
        target = fs / rel
        target.mkdir(parents=True, exist_ok=True)
        for attr in sysfs.PCI_ATTRS:
            try:
                data = (Path(real) / attr).read_bytes()
            except OSError:
                continue
            (target / attr).write_bytes(data)
            copied += 1
        try:
            drv = os.path.basename(os.readlink(os.path.join(real, "driver")))
            os.symlink(f"../../../../bus/pci/drivers/{drv}", target / "driver")
        except OSError:
            pass
        link = fs / "sys/bus/pci/devices" / entry.name
        link.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(os.path.relpath(target, link.parent), link)
    nv = nvml if nvml is not None else nvml_probe.collect()
    (dest / "nvml.json").write_text(json.dumps(nv, indent=2, sort_keys=True), encoding="utf-8")
    if nvml is None:
        from .probes import amd

        (dest / "amdsmi.json").write_text(json.dumps(amd.collect(), indent=2, sort_keys=True, default=str),
                                          encoding="utf-8")
    now = time.time()
    manifest = {
        "format": SNAPSHOT_FORMAT, "sits_version": __version__,
        "hostname": socket.gethostname() if str(root) == "/" else sysfs.read_text(root, "proc/sys/kernel/hostname"),
        "captured_at": now, "captured_at_iso": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)),
        "root": str(root), "files": copied, "unreadable": skipped,
        "euid": os.geteuid() if hasattr(os, "geteuid") else None,
    }
    (dest / "manifest.json").write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    return manifest
