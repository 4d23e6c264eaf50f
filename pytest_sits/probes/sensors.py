"""Temperature sensors: CPU package (hwmon coretemp / k10temp, thermal zones) and GPU (NVML).

Every reading carries its sensor's resolution.  A failed read (N/A, EIO,
a vanished file) is a reading with ``value_c: None`` and the error: recorded,
never fatal, and never turned into a number.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any, Dict, List

from .sysfs import read_text

PACKAGE_ZONE_TYPES = ("x86_pkg_temp", "cpu-thermal", "cpu_thermal", "soc_thermal", "cpu0-thermal")


class Sensor:
    """One temperature source.  ``read()`` returns {"t", "value_c", "error"}."""

    def __init__(self, sid: str, kind: str, source: str, resolution_c: float, label: str,
                 clock: Any = time.time):
        self.id, self.kind, self.source, self.resolution_c, self.label = sid, kind, source, resolution_c, label
        self.clock = clock

    def describe(self) -> Dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "source": self.source, "resolution_c": self.resolution_c,
                "label": self.label}

    def read(self) -> Dict[str, Any]:  # pragma: no cover - overridden
        raise NotImplementedError


class FileSensor(Sensor):
    """A sysfs file in millidegrees Celsius."""

    def __init__(self, root: Path, rel: str, **kw: Any):
        super().__init__(**kw)
        self.root, self.rel = root, rel

    def read(self) -> Dict[str, Any]:
        t = self.clock()
        try:
            text = (self.root / self.rel).read_text().strip()
            return {"t": t, "value_c": int(text) / 1000.0, "error": None}
        except (OSError, ValueError) as exc:
            return {"t": t, "value_c": None, "error": f"{self.source}: {getattr(exc, 'strerror', None) or exc}"}


def cpu_package_sensors(root: Path) -> List[Sensor]:
    """One sensor per CPU package: coretemp 'Package id N' (1 °C), k10temp Tdie/Tctl (1/8 °C), else thermal zones."""
    sensors: List[Sensor] = []
    hwmon = root / "sys/class/hwmon"
    for d in sorted(hwmon.glob("hwmon*"), key=lambda p: int(re.sub(r"\D", "", p.name) or 0)):
        rel = str(d.relative_to(root))
        name = read_text(root, f"{rel}/name")
        labels = {}
        for lab in sorted(d.glob("temp*_label")):
            labels[lab.name.split("_")[0]] = read_text(root, str(lab.relative_to(root)))
        if name == "coretemp":
            for temp, label in labels.items():
                if label and label.startswith("Package id"):
                    sensors.append(FileSensor(root, f"{rel}/{temp}_input", sid=f"cpu-package-{label.split()[-1]}",
                                              kind="cpu", source=f"/{rel}/{temp}_input (coretemp {label})",
                                              resolution_c=1.0, label=label))
        elif name == "k10temp":
            pick = next((t for t, lab in labels.items() if lab == "Tdie"), None) or \
                next((t for t, lab in labels.items() if lab == "Tctl"), None) or ("temp1" if not labels else None)
            if pick:
                n = sum(1 for s in sensors if s.source.find("k10temp") >= 0)
                sensors.append(FileSensor(root, f"{rel}/{pick}_input", sid=f"cpu-package-{n}", kind="cpu",
                                          source=f"/{rel}/{pick}_input (k10temp {labels.get(pick, pick)})",
                                          resolution_c=0.125, label=labels.get(pick, pick) or pick))
    if sensors:
        return sensors
    for z in sorted((root / "sys/class/thermal").glob("thermal_zone*")):
        rel = str(z.relative_to(root))
        ztype = read_text(root, f"{rel}/type")
        if ztype in PACKAGE_ZONE_TYPES:
            sensors.append(FileSensor(root, f"{rel}/temp", sid=f"cpu-{z.name}", kind="cpu",
                                      source=f"/{rel}/temp ({ztype})", resolution_c=1.0, label=ztype))
    return sensors


def no_cpu_sensor_reason(root: Path) -> str:
    hw = sorted(read_text(root, str(p.relative_to(root))) or "?" for p in (root / "sys/class/hwmon").glob("hwmon*/name"))
    zones = sorted(read_text(root, str(p.relative_to(root))) or "?"
                   for p in (root / "sys/class/thermal").glob("thermal_zone*/type"))
    return ("no CPU package temperature sensor: no hwmon coretemp/k10temp (hwmon present: "
            f"{', '.join(hw) or 'none'}) and no package thermal zone (zones: {', '.join(zones) or 'none'}); "
            "virtual machines usually expose none")


class AmdsmiTemperature(Sensor):
    """AMD GPU temperature from amdsmi (whole degrees): the junction (hotspot) sensor, else the edge sensor."""

    def __init__(self, bdf: str, clock: Any = time.time):
        import amdsmi

        amdsmi.amdsmi_init()
        self._amd = amdsmi
        self._h = amdsmi.amdsmi_get_processor_handle_from_bdf(bdf)
        kinds = amdsmi.AmdSmiTemperatureType
        self._type = None
        for name in ("HOTSPOT", "JUNCTION", "EDGE"):
            t = getattr(kinds, name, None)
            if t is None:
                continue
            try:
                amdsmi.amdsmi_get_temp_metric(self._h, t, amdsmi.AmdSmiTemperatureMetric.CURRENT)
            except Exception:
                continue
            self._type, self._type_name = t, name.lower()
            break
        if self._type is None:
            raise RuntimeError("amdsmi reports no readable temperature sensor (hotspot, junction or edge)")
        super().__init__(sid=f"gpu-{bdf}", kind="gpu", resolution_c=1.0, label=bdf, clock=clock,
                         source=f"amdsmi amdsmi_get_temp_metric({self._type_name}, CURRENT)")

    def read(self) -> Dict[str, Any]:
        t = self.clock()
        try:
            value = self._amd.amdsmi_get_temp_metric(self._h, self._type, self._amd.AmdSmiTemperatureMetric.CURRENT)
            return {"t": t, "value_c": float(value), "error": None}
        except Exception as exc:
            return {"t": t, "value_c": None, "error": f"amdsmi: {exc}"}

    def close(self) -> None:
        try:
            self._amd.amdsmi_shut_down()
        except Exception:
            pass


class NvmlTemperature(Sensor):
    """GPU die temperature from NVML (whole degrees)."""

    def __init__(self, index: int, bdf: str, clock: Any = time.time):
        super().__init__(sid=f"gpu-{bdf}", kind="gpu", source=f"NVML nvmlDeviceGetTemperature(index {index}, GPU)",
                         resolution_c=1.0, label=bdf, clock=clock)
        import pynvml

        pynvml.nvmlInit()
        self._nvml = pynvml
        self._h = pynvml.nvmlDeviceGetHandleByIndex(index)

    def read(self) -> Dict[str, Any]:
        t = self.clock()
        rec: Dict[str, Any] = {"t": t, "value_c": None, "error": None}
        try:
            rec["value_c"] = float(self._nvml.nvmlDeviceGetTemperature(self._h, self._nvml.NVML_TEMPERATURE_GPU))
        except Exception as exc:
            rec["error"] = f"NVML: {exc}"
        try:
            rec["clocks_event_reasons"] = int(self._nvml.nvmlDeviceGetCurrentClocksEventReasons(self._h))
        except Exception:
            pass
        return rec

    def close(self) -> None:
        try:
            self._nvml.nvmlShutdown()
        except Exception:
            pass
