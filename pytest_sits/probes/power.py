"""Power and energy readers: NVML field values, amdsmi, Linux powercap RAPL, Redfish (BMC wall power).

Read-only.  Every :meth:`read` returns one reading with its own timestamps and never raises::

    {"t_ns": monotonic ns at the middle of the read, "read_ns": how long the read took,
     "sensor_t_ns": the sensor's own timestamp mapped onto the monotonic clock (None when it gives none),
     "power_w": float | None, "energy_j": float | None (cumulative, wraparound corrected), "error": str | None}

A failed read has ``error`` set and its values None - never 0.  Energy comes from the hardware counters
(NVML total energy, amdsmi energy accumulator, RAPL ``energy_uj``, a Redfish energy sensor); instantaneous
power is kept beside it.  No sensor samples "in the same hardware cycle" as another: each reading carries the
time it was taken (and, where the driver gives one, the time the value was produced), so the skew between
sources is measured, not assumed.

:func:`discover` finds the readable sources of this machine and says why each missing one is missing.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

REDFISH_INSTALL = "pip install redfish"


def _reading(t0: int, t1: int, power_w: Optional[float] = None, energy_j: Optional[float] = None,
             sensor_t_ns: Optional[int] = None, error: Optional[str] = None) -> Dict[str, Any]:
    return {"t_ns": (t0 + t1) // 2, "read_ns": t1 - t0, "sensor_t_ns": sensor_t_ns,
            "power_w": power_w, "energy_j": energy_j, "error": error}


def wall_to_monotonic_ns(wall_ns: int) -> int:
    """Map a wall-clock (epoch) timestamp onto the monotonic clock, at the current offset."""
    return wall_ns - (time.time_ns() - time.monotonic_ns())


class PowerSource:
    """One sensor.  ``fast``: it can be read at the sampler's period; slow sources (a BMC) are read by a
    poller at ``min_interval_s`` and their readings keep their own (older) timestamps."""

    name = "power"
    kind = "unknown"
    fast = True
    min_interval_s = 0.0
    resolution = ""

    def read(self) -> Dict[str, Any]:  # pragma: no cover - interface
        raise NotImplementedError

    def describe(self) -> Dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "fast": self.fast, "min_interval_s": self.min_interval_s,
                "resolution": self.resolution}

    def close(self) -> None:
        return None


# --------------------------------------------------------------------------
# RAPL (powercap)


class RaplZone(PowerSource):
    """``/sys/class/powercap/intel-rapl:N[:M]/energy_uj``, wraparound corrected with ``max_energy_range_uj``."""

    kind = "rapl"
    resolution = "energy counter in µJ, updated by the hardware about every 1 ms"

    def __init__(self, path: Path, label: str, max_range_uj: int):
        self.path = Path(path)
        self.name = f"rapl:{label}"
        self.max_range_uj = max_range_uj
        self._last: Optional[int] = None
        self._wraps = 0
        self._fd: Optional[int] = None

    def read(self) -> Dict[str, Any]:
        """``pread`` at offset 0 of a descriptor kept open (sysfs regenerates the value on every read): a
        fraction of a microsecond, where opening the file each time costs tens."""
        t0 = time.monotonic_ns()
        try:
            if self._fd is None:
                self._fd = os.open(self.path / "energy_uj", os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
            raw = int(os.pread(self._fd, 32, 0).strip())
        except (OSError, ValueError) as exc:
            self.close()
            return _reading(t0, time.monotonic_ns(), error=f"{self.path}/energy_uj: {exc}")
        t1 = time.monotonic_ns()
        if self._last is not None and raw < self._last:
            self._wraps += 1
        self._last = raw
        return _reading(t0, t1, energy_j=(raw + self._wraps * (self.max_range_uj + 1)) / 1e6)

    def close(self) -> None:
        if self._fd is not None:
            try:
                os.close(self._fd)
            except OSError:
                pass
            self._fd = None


def rapl_zones(root: Path = Path("/")) -> Tuple[List[RaplZone], Optional[str]]:
    base = Path(root) / "sys/class/powercap"
    if not base.is_dir():
        return [], f"no RAPL: {base} does not exist (no powercap driver, or a VM without RAPL)"
    zones, problems = [], []
    for zone in sorted(base.glob("intel-rapl:*")):
        name = _read(zone / "name") or zone.name
        rng = _read(zone / "max_energy_range_uj")
        try:
            with open(zone / "energy_uj", "rb") as fh:
                int(fh.read().strip())
        except (OSError, ValueError) as exc:
            problems.append(f"{zone}/energy_uj unreadable ({exc}; since Linux 5.10 it needs root)")
            continue
        zones.append(RaplZone(zone, f"{zone.name.split(':', 1)[1]}:{name}", int(rng) if rng and rng.isdigit() else 2**32 - 1))
    if not zones:
        return [], "; ".join(problems) or f"no RAPL: no intel-rapl:* zone under {base}"
    return zones, None


def _read(path: Path) -> Optional[str]:
    try:
        return path.read_text().strip()
    except OSError:
        return None


# --------------------------------------------------------------------------
# NVML


class NvmlPower(PowerSource):
    """``nvmlDeviceGetFieldValues`` for instant power (mW) and the total-energy counter (mJ), each with the
    driver's own timestamp (µs since the epoch), mapped onto the monotonic clock."""

    kind = "nvml"
    resolution = "power in mW, energy in mJ; each field value stamped by the driver"

    def __init__(self, pynvml: Any, index: int):
        self.nv = pynvml
        self.index = index
        self.handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        self.name = f"nvml:{index}"
        self.fields = [getattr(pynvml, "NVML_FI_DEV_POWER_INSTANT", 186),
                       getattr(pynvml, "NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION", 83)]

    def read(self) -> Dict[str, Any]:
        t0 = time.monotonic_ns()
        try:
            vals = self.nv.nvmlDeviceGetFieldValues(self.handle, self.fields)
        except Exception as exc:
            return _reading(t0, time.monotonic_ns(), error=f"nvmlDeviceGetFieldValues: {exc}")
        t1 = time.monotonic_ns()
        out: Dict[str, Any] = {"power_w": None, "energy_j": None}
        errors, stamps = [], []
        for key, v, scale in (("power_w", vals[0], 1e-3), ("energy_j", vals[1], 1e-3)):
            if getattr(v, "nvmlReturn", 0) != 0:
                errors.append(f"{key}: NVML return {v.nvmlReturn}")
                continue
            out[key] = _field_value(v) * scale
            if getattr(v, "timestamp", 0):
                stamps.append(wall_to_monotonic_ns(int(v.timestamp) * 1000))
        return _reading(t0, t1, out["power_w"], out["energy_j"], min(stamps) if stamps else None,
                        "; ".join(errors) if len(errors) == 2 else None)

    def close(self) -> None:
        try:
            self.nv.nvmlShutdown()
        except Exception:
            pass


def _field_value(v: Any) -> float:
    """The value of an nvmlFieldValue_t by its valueType (double, uint, ulong, ulonglong, slonglong)."""
    name = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal"}.get(getattr(v, "valueType", 3), "ullVal")
    return float(getattr(v.value, name))


def nvml_sources(index: Optional[int] = None) -> Tuple[List[PowerSource], Optional[str]]:
    try:
        import pynvml
    except ImportError:
        return [], "no NVML: pynvml not importable (pip install nvidia-ml-py)"
    try:
        pynvml.nvmlInit()
    except Exception as exc:
        return [], f"no NVML: did not initialise ({exc})"
    try:
        indices = [index] if index is not None else list(range(pynvml.nvmlDeviceGetCount()))
        sources: List[PowerSource] = [NvmlPower(pynvml, i) for i in indices]
    except Exception as exc:
        return [], f"no NVML power: {exc}"
    if not sources:
        return [], "no NVML power: NVML sees no device"
    return sources, None


# --------------------------------------------------------------------------
# amdsmi


class AmdsmiPower(PowerSource):
    kind = "amdsmi"
    resolution = "power in W; energy accumulator x counter_resolution µJ"

    def __init__(self, amdsmi: Any, handle: Any, index: int):
        self.amd, self.handle, self.name = amdsmi, handle, f"amdsmi:{index}"

    def read(self) -> Dict[str, Any]:
        t0 = time.monotonic_ns()
        power = energy = None
        errors = []
        try:
            info = self.amd.amdsmi_get_power_info(self.handle)
            for key in ("current_socket_power", "average_socket_power", "socket_power"):
                if isinstance(info.get(key), (int, float)):
                    power = float(info[key])
                    break
        except Exception as exc:
            errors.append(f"amdsmi_get_power_info: {exc}")
        try:
            e = self.amd.amdsmi_get_energy_count(self.handle)
            acc = e.get("energy_accumulator", e.get("power"))
            energy = float(acc) * float(e.get("counter_resolution", 15.3)) * 1e-6
        except Exception as exc:
            errors.append(f"amdsmi_get_energy_count: {exc}")
        t1 = time.monotonic_ns()
        return _reading(t0, t1, power, energy, None, "; ".join(errors) if len(errors) == 2 else None)


def amdsmi_sources() -> Tuple[List[PowerSource], Optional[str]]:
    try:
        import amdsmi
    except ImportError:
        return [], "no amdsmi: not importable (it ships with ROCm)"
    try:
        amdsmi.amdsmi_init()
        handles = amdsmi.amdsmi_get_processor_handles()
    except Exception as exc:
        return [], f"no amdsmi: did not initialise ({exc})"
    if not handles:
        return [], "no amdsmi power: no AMD GPU"
    return [AmdsmiPower(amdsmi, h, i) for i, h in enumerate(handles)], None


# --------------------------------------------------------------------------
# Redfish (BMC)


class RedfishPower(PowerSource):
    """Wall power from the BMC: ``Chassis/{id}/Power`` (PowerControl PowerConsumedWatts) and, when the BMC has
    one, an energy sensor under ``Chassis/{id}/Sensors`` (ReadingType EnergyJoules or EnergykWh).  BMC readings
    update about once a second: this source is slow and polled, its readings keep their own time."""

    kind = "redfish"
    fast = False
    min_interval_s = 1.0
    resolution = "BMC sensor, typically 1 W and ~1 s"

    def __init__(self, client: Any, chassis: str, power_path: Optional[str], energy_path: Optional[str],
                 energy_unit: Optional[str]):
        self.client, self.chassis = client, chassis
        self.power_path, self.energy_path, self.energy_unit = power_path, energy_path, energy_unit
        self.name = f"redfish:{chassis.rstrip('/').rsplit('/', 1)[-1]}"

    def read(self) -> Dict[str, Any]:
        t0 = time.monotonic_ns()
        power = energy = None
        errors = []
        if self.power_path:
            try:
                doc = _get(self.client, self.power_path)
                vals = [c.get("PowerConsumedWatts") for c in doc.get("PowerControl", [])]
                vals = [float(v) for v in vals if isinstance(v, (int, float))]
                if vals:
                    power = sum(vals)
                else:
                    errors.append(f"{self.power_path}: no PowerConsumedWatts")
            except Exception as exc:
                errors.append(f"{self.power_path}: {exc}")
        if self.energy_path:
            try:
                doc = _get(self.client, self.energy_path)
                r = doc.get("Reading")
                if isinstance(r, (int, float)):
                    energy = float(r) * (3.6e6 if self.energy_unit == "EnergykWh" else 1.0)
                else:
                    errors.append(f"{self.energy_path}: no numeric Reading")
            except Exception as exc:
                errors.append(f"{self.energy_path}: {exc}")
        t1 = time.monotonic_ns()
        failed = power is None and energy is None
        return _reading(t0, t1, power, energy, None, "; ".join(errors) if failed else None)

    def close(self) -> None:
        try:
            self.client.logout()
        except Exception:
            pass


def _get(client: Any, path: str) -> Dict[str, Any]:
    resp = client.get(path)
    if resp.status != 200:
        raise OSError(f"HTTP {resp.status}")
    return resp.dict


def redfish_sources(url: Optional[str], user: Optional[str] = None, password: Optional[str] = None,
                    timeout_s: float = 5.0) -> Tuple[List[PowerSource], Optional[str]]:
    if not url:
        return [], "no Redfish: no BMC configured (--sits-redfish URL)"
    try:
        import redfish
    except ImportError:
        return [], f"no Redfish: the redfish library is not installed ({REDFISH_INSTALL})"
    try:
        client = redfish.redfish_client(base_url=url, username=user or "", password=password or "",
                                        timeout=timeout_s, max_retry=1)
        if user:
            client.login(auth="session")
        chassis = [m["@odata.id"] for m in _get(client, "/redfish/v1/Chassis").get("Members", [])]
    except Exception as exc:
        return [], f"no Redfish: {url} did not answer ({type(exc).__name__}: {exc})"
    sources: List[PowerSource] = []
    for ch in chassis:
        try:
            doc = _get(client, ch)
        except Exception:
            continue
        power = (doc.get("Power") or {}).get("@odata.id")
        energy = unit = None
        sensors = (doc.get("Sensors") or {}).get("@odata.id")
        if sensors:
            try:
                for m in _get(client, sensors).get("Members", []):
                    s = _get(client, m["@odata.id"])
                    if s.get("ReadingType") in ("EnergyJoules", "EnergykWh"):
                        energy, unit = m["@odata.id"], s["ReadingType"]
                        break
            except Exception:
                pass
        if power or energy:
            sources.append(RedfishPower(client, ch, power, energy, unit))
    if not sources:
        return [], f"no Redfish power: no chassis of {url} has a Power resource or an energy sensor"
    return sources, None


# --------------------------------------------------------------------------


def discover(root: Path = Path("/"), accelerator_kind: Optional[str] = None, device_index: Optional[int] = None,
             redfish: Optional[Dict[str, Any]] = None) -> Tuple[List[PowerSource], List[str]]:
    """The readable power sources for a device (NVML/amdsmi) and its host (RAPL, BMC); the reasons for the
    missing ones."""
    sources: List[PowerSource] = []
    missing: List[str] = []
    finders: List[Callable[[], Tuple[Sequence[PowerSource], Optional[str]]]] = []
    if accelerator_kind in (None, "nvidia"):
        finders.append(lambda: nvml_sources(device_index))
    if accelerator_kind in (None, "amd"):
        finders.append(amdsmi_sources)
    finders.append(lambda: rapl_zones(root))
    finders.append(lambda: redfish_sources(**(redfish or {"url": None})))
    for find in finders:
        found, why = find()
        sources.extend(found)
        if why:
            missing.append(why)
    return sources, missing


def euid_is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0
