"""The platform interface: what every source of hardware evidence offers, and the inventory built from it.

All platforms read files through the same probes (below a root folder), so a
snapshot or a simulated tree exercises the code that runs live.  A platform
also says which conditions it can apply (loads, bindings, measurements) and,
when it cannot, why: that reason becomes the verdict's SKIP reason.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

from ..probes import nvml as nvml_probe
from ..probes import sysfs


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
        from ..probes import amd

        return amd.collect()

    def accelerator_load(self, acc: Dict[str, Any]) -> Any:
        """A load generator on the accelerator (context manager); raises LoadUnavailable with the reason."""
        from ..conditions.loads import TorchMatmulLoad, torch_device_for_bdf

        return TorchMatmulLoad(torch_device_for_bdf(acc["bdf"]), duty=1.0, size=4096)

    @contextmanager
    def numa_binding(self, node: int, cpus: List[int]) -> Iterator[Dict[str, Any]]:
        """Bind this thread (and the threads it starts) to a NUMA node; yield the binding read back."""
        from ..conditions import numa

        with numa.bind(node, cpus) as evidence:
            yield evidence

    def host_measurement_reason(self) -> Optional[str]:
        """None when host measurements (DRAM bandwidth, timing) can run here; else why not."""
        return None

    def dram(self) -> Any:
        """The host's DRAM to measure and hold (STREAM peak, injectors), or None where there is no machine to
        measure (``host_measurement_reason`` says why)."""
        if self.host_measurement_reason():
            return None
        from ..conditions.bandwidth import LiveDram

        return LiveDram()

    def device_bandwidth(self, acc: Dict[str, Any], nbytes: int, runs: int = 7) -> Dict[str, Any]:
        from ..conditions.device_bw import device_memory_bandwidth
        from ..conditions.loads import torch_device_for_bdf

        return device_memory_bandwidth(torch_device_for_bdf(acc["bdf"]), nbytes, runs=runs)

    def host_device_bandwidth(self, acc: Dict[str, Any], nbytes: int, runs: int = 7) -> Dict[str, Any]:
        from ..conditions.device_bw import host_device_bandwidth
        from ..conditions.loads import torch_device_for_bdf

        return host_device_bandwidth(torch_device_for_bdf(acc["bdf"]), nbytes, runs=runs)

    def thermal_rigs(self, kind: str, acc: Optional[Dict[str, Any]] = None) -> List[Any]:
        """Sensor + load pairs for THERM-*-STEADY; raises ThermalUnavailable with the reason."""
        from ..conditions.thermal import live_cpu_rigs, live_gpu_rig

        if kind == "cpu":
            return live_cpu_rigs(self.root)
        if acc is None:
            from ..conditions.thermal import ThermalUnavailable

            raise ThermalUnavailable("a GPU calibration needs the accelerator to calibrate")
        return [live_gpu_rig(acc)]

    def environment(self) -> Any:
        """The environment sensors read around measured requirements (:mod:`pytest_sits.conditions.environment`):
        every die and CPU package temperature, the NUMA binding; None where the platform measures nothing."""
        from ..conditions.environment import LiveEnvironment

        return LiveEnvironment(self)

    def health_reader(self) -> Any:
        """The factory of per-device health readers (NVML/amdsmi/sysfs here; simulated on sim)."""
        from ..conditions.health import reader_for

        return reader_for

    def crg(self) -> Any:
        """The compute-ready graph's acquirer (torch and torch.distributed on this machine)."""
        from ..conditions.crg import Crg

        return Crg(self)

    def set_inventory(self, inventory: Dict[str, Any]) -> None:
        """Use an inventory built elsewhere (the xdist controller's) instead of probing again."""
        self._inventory = inventory

    def inference_rig(self, acc: Optional[Dict[str, Any]], profile: Any, options: Dict[str, Any]) -> Any:
        """The built-in model on ``acc`` (None: the CPU) with its power sources, for the inference-under-load
        requirements; raises InferenceUnavailable with the reason."""
        from ..conditions.inference import live_rig

        return live_rig(acc, options, profile.hardware)

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


def build_inventory(platform: Platform) -> Dict[str, Any]:
    inv = sysfs.collect(platform.root)
    # NVML is loaded only where sysfs shows an NVIDIA function (a GPU, or an NVSwitch bridge): importing and
    # initialising it costs a tenth of a second at start-up on hosts that have none.
    if platform.kind != "live" or any(d["vendor_id"] == "10de" for d in inv["pci"]):
        nv: Dict[str, Any] = platform.nvml()
    else:
        nv = {"available": False, "reason": "no NVIDIA PCI function in sysfs: NVML not queried", "devices": [],
              "errors": []}
    amd: Dict[str, Any] = platform.amdsmi() if any(d["vendor_id"] == "1002" and sysfs.is_accelerator(d) for d in inv["pci"]) else {
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


