"""What a thermal calibration runs on: a sensor, a load to steer, a clock.

Live rigs read hwmon/thermal zones (CPU) or NVML (GPU) and steer a numpy CPU
load or a torch matmul load in wall time.  Sim rigs are a first-order plant
in simulated time, so a 20-minute calibration replays in milliseconds.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

from .probes.sensors import NvmlTemperature, cpu_package_sensors, no_cpu_sensor_reason
from .probes.sysfs import parse_cpulist, read_text
from .thermal import CpuLoad, PlantRig, ThermalPlant


class ThermalUnavailable(Exception):
    """No sensor or no load here; the message is the SKIP reason."""


class LiveRig:
    def __init__(self, sensor: Any, subject: str, make_load: Any):
        self.sensor = sensor
        self.sensor_info = sensor.describe()
        self.subject = subject
        self._make_load = make_load
        self.read = sensor.read
        self.clock = time.time
        self.sleep = time.sleep

    @contextmanager
    def load(self) -> Iterator[Any]:
        with self._make_load() as load:
            yield load


def _package_cpus(root: Path, package: str) -> List[int]:
    cpus = []
    for d in (root / "sys/devices/system/cpu").glob("cpu[0-9]*"):
        pkg = read_text(root, str(d.relative_to(root) / "topology/physical_package_id"))
        if pkg == package:
            cpus.append(int(d.name[3:]))
    return sorted(cpus) or parse_cpulist(read_text(root, "sys/devices/system/cpu/online"))


def live_cpu_rigs(root: Path) -> List[LiveRig]:
    sensors = cpu_package_sensors(root)
    if not sensors:
        raise ThermalUnavailable(no_cpu_sensor_reason(root))
    rigs = []
    for i, s in enumerate(sensors):
        package = s.label.split()[-1] if s.label.startswith("Package id") else str(i)
        cpus = _package_cpus(root, package)
        rigs.append(LiveRig(s, f"cpu package {package}", lambda cpus=cpus: CpuLoad(cpus, duty=0.5)))
    return rigs


def live_gpu_rig(acc: Dict[str, Any]) -> LiveRig:
    from .probes.load import LoadUnavailable, TorchMatmulLoad, torch_device_for_bdf

    mgmt = acc.get("management") or {}
    if not acc["pci_id"].startswith("10de:"):
        raise ThermalUnavailable(f"{acc['bdf']}: GPU temperature of {acc['vendor']} devices needs amdsmi/vendor "
                                 "tools, not read by this version")
    if "index" not in mgmt:
        raise ThermalUnavailable(f"{acc['bdf']}: NVML unavailable, no GPU temperature sensor")
    try:
        device = torch_device_for_bdf(acc["bdf"])
    except LoadUnavailable as exc:
        raise ThermalUnavailable(f"{acc['bdf']}: no load to steer the temperature: {exc}") from None
    sensor = NvmlTemperature(mgmt["index"], acc["bdf"])
    return LiveRig(sensor, acc["bdf"], lambda: TorchMatmulLoad(device, duty=0.5, size=8192))


def sim_rigs(kind: str, acc: Optional[Dict[str, Any]], faults: List[str], profile: Any) -> List[PlantRig]:
    common: Dict[str, Any] = {}
    if "thermal-hot" in faults:
        common["ambient"] = 72.0  # idle already settles at 78 °C (GPU) / 76 °C (CPU)
    if "thermal-drift" in faults:  # the inlet warms 6 °C every 2 minutes, past what the load can offset
        common["drift_c_per_s"] = 0.05
        common["ambient"] = 64.0
    if "sensor-na" in faults:
        common["fail_after_s"] = 100.0
    if kind == "gpu":
        tdp = float(profile.hardware.get("tdp_w", 700))
        plant = ThermalPlant(p_idle=tdp * 0.1, p_max=tdp, r=60.0 / tdp, step=1.0, noise=0.2,
                             seed=int(acc["bdf"].split(":")[1], 16) if acc else 1, **common)
        return [PlantRig(plant, f"gpu {acc['bdf'] if acc else '?'} (simulated NVML)", "gpu")]
    rigs = []
    for sock in range(2):
        plant = ThermalPlant(p_idle=60.0, p_max=350.0, r=0.11, tau=25.0, step=0.125, noise=0.05, seed=100 + sock,
                             **{k: v for k, v in common.items() if k != "ambient"},
                             ambient=common.get("ambient", 28.0 + sock))
        rigs.append(PlantRig(plant, f"cpu package {sock} (simulated k10temp)", "cpu"))
    return rigs
