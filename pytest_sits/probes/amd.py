"""AMD facts through amdsmi (the ROCm SMI library's Python binding), imported lazily.

Same shape as the NVML facts: ``{"available", "reason", "driver_version", "devices": [...]}``; every
field is read on its own, and a field that fails is recorded in ``errors``.  Beside the identity and the ECC
and bad-page counts (:func:`pytest_sits.probes.health.read_amd_device`): the power cap (enforced, default and
range, in mW as NVML's), the PCIe replay counter, the throttle status translated to NVML's clock-event reason
names (:data:`THROTTLE_TO_REASON`), the firmware versions, and ``p2p_xgmi``: the XGMI matrix between the
devices (True: one XGMI hop; False: another link type or more hops; None: not read).
"""

from __future__ import annotations

import time
from typing import Any, Callable, Dict, List, Optional

from . import health
from .nvml import field_reader

#: amdgpu's SMU throttler bits (linux drivers/gpu/drm/amd/pm/inc/amdgpu_smu.h, the gpu_metrics
#: ``indep_throttle_status``) by the NVML clock-event reason that means the same: power limits are a software
#: power cap, temperature limits a thermal slowdown, PROCHOT/VRHOT a hardware slowdown.
THROTTLE_TO_REASON = {
    **{bit: "sw_power_cap" for bit in range(0, 8)},            # PPT0-3, SPL, FPPT, SPPT, SPPT_APU
    **{bit: "hw_slowdown" for bit in range(16, 24)},           # TDC (current) and EDC limits, APCC
    **{bit: "hw_thermal_slowdown" for bit in range(32, 44)},   # TEMP_* limits
    **{bit: "hw_slowdown" for bit in range(44, 48)},           # VRHOT, PROCHOT
}


def throttle_to_reasons(status: Any) -> int:
    """An amdgpu throttle status as an NVML clock-event reason mask (bits not in the table are ignored)."""
    mask, value = 0, int(status)
    for bit, name in THROTTLE_TO_REASON.items():
        if value >> bit & 1:
            mask |= health.CLOCK_EVENT_BITS[name]
    return mask


def _throttle(amdsmi: Any, h: Any) -> int:
    metrics = amdsmi.amdsmi_get_gpu_metrics_info(h)
    status = metrics.get("indep_throttle_status")
    if status in (None, "N/A") or int(status) >= 0xFFFFFFFFFFFFFFFF:
        status = metrics.get("throttle_status")
    if status in (None, "N/A"):
        raise ValueError("the GPU metrics give no throttle status")
    return throttle_to_reasons(status)


def _power_cap(amdsmi: Any, h: Any) -> Dict[str, Any]:
    info = amdsmi.amdsmi_get_power_cap_info(h)  # microwatts
    return {"enforced": int(info["power_cap"]) // 1000, "default": int(info["default_power_cap"]) // 1000,
            "range": [int(info["min_power_cap"]) // 1000, int(info["max_power_cap"]) // 1000]}


def _firmware(amdsmi: Any, h: Any) -> Dict[str, str]:
    info = amdsmi.amdsmi_get_fw_info(h)
    return {str(fw.get("fw_name") or fw.get("fw_id")): str(fw.get("fw_version")) for fw in info.get("fw_list") or []}


def _device(amdsmi: Any, h: Any, i: int, get: Callable[[Dict[str, Any], str, Callable[[], Any]], None]) -> Dict[str, Any]:
    """One device's facts, each read on its own (a failed read is recorded against its field)."""
    dev: Dict[str, Any] = {"index": i}
    get(dev, "pci_bus_id", lambda: str(amdsmi.amdsmi_get_gpu_device_bdf(h)).lower())
    get(dev, "name", lambda: amdsmi.amdsmi_get_gpu_asic_info(h)["market_name"])
    get(dev, "memory_total_bytes", lambda: amdsmi.amdsmi_get_gpu_memory_total(h, amdsmi.AmdSmiMemoryType.VRAM))
    get(dev, "vbios_version", lambda: amdsmi.amdsmi_get_gpu_vbios_info(h)["version"])
    get(dev, "serial", lambda: amdsmi.amdsmi_get_gpu_board_info(h)["product_serial"])
    get(dev, "driver_version", lambda: amdsmi.amdsmi_get_gpu_driver_info(h)["driver_version"])
    health.read_amd_device(amdsmi, h, dev, get)
    cap: Dict[str, Any] = {}
    get(cap, "power_cap", lambda: _power_cap(amdsmi, h))
    if cap.get("power_cap"):
        dev["power_limit_enforced_mw"] = dev["power_limit_mw"] = cap["power_cap"]["enforced"]
        dev["power_limit_default_mw"] = cap["power_cap"]["default"]
        dev["power_limit_constraints_mw"] = cap["power_cap"]["range"]
    else:
        dev["power_limit_enforced_mw"] = None
    get(dev, "pcie_replay_counter", lambda: int(amdsmi.amdsmi_get_gpu_pci_replay_counter(h)))
    get(dev, "clock_event_reasons", lambda: _throttle(amdsmi, h))
    get(dev, "firmware", lambda: _firmware(amdsmi, h))
    return dev


def xgmi_matrix(amdsmi: Any, handles: List[Any], errors: List[Dict[str, Any]]) -> List[List[Optional[bool]]]:
    """``[i][j]``: True when devices i and j are one XGMI hop apart, False when linked otherwise, None unread."""
    n = len(handles)
    out: List[List[Optional[bool]]] = [[None] * n for _ in range(n)]
    for i in range(n):
        for j in range(n):
            if i == j:
                continue
            try:
                link = amdsmi.amdsmi_topo_get_link_type(handles[i], handles[j])
                kind = getattr(link.get("type"), "name", link.get("type"))
                out[i][j] = "XGMI" in str(kind).upper() and int(link.get("hops", 1)) == 1
            except Exception as exc:
                errors.append({"field": f"p2p_xgmi[{i}][{j}]", "error": str(exc)})
    return out


def collect() -> Dict[str, Any]:
    out: Dict[str, Any] = {"available": False, "source": "amdsmi", "collected_at": time.time(), "devices": [],
                           "errors": []}
    try:
        import amdsmi
    except ImportError:
        out["reason"] = "amdsmi not importable (it ships with ROCm: /opt/rocm/share/amd_smi)"
        return out
    try:
        amdsmi.amdsmi_init()
    except Exception as exc:
        out["reason"] = f"amdsmi did not initialise: {exc}"
        return out
    try:
        out["available"] = True

        get = field_reader(out["errors"])

        handles = list(amdsmi.amdsmi_get_processor_handles())
        for i, h in enumerate(handles):
            out["devices"].append(_device(amdsmi, h, i, get))
        out["p2p_xgmi"] = xgmi_matrix(amdsmi, handles, out["errors"])
        if out["devices"]:
            out["driver_version"] = out["devices"][0].get("driver_version")
    finally:
        try:
            amdsmi.amdsmi_shut_down()
        except Exception:
            pass
    return out


def importable() -> bool:
    try:
        import amdsmi  # noqa: F401
    except ImportError:
        return False
    return True


class AmdDevice:
    """One AMD device through amdsmi for the samples of a health window: the throttle status and the PCIe replay
    counter read afresh at each call, the ECC counts now (amdsmi initialised on entry, shut down on exit)."""

    def __init__(self, bdf: str):
        self.bdf = bdf.lower()
        self.amdsmi: Any = None
        self.h: Any = None

    def __enter__(self) -> AmdDevice:
        import amdsmi

        amdsmi.amdsmi_init()
        self.amdsmi = amdsmi
        try:
            self.h = next((h for h in amdsmi.amdsmi_get_processor_handles()
                           if str(amdsmi.amdsmi_get_gpu_device_bdf(h)).lower() == self.bdf), None)
        except Exception:
            self.__exit__()
            raise
        if self.h is None:
            self.__exit__()
            raise LookupError(f"amdsmi lists no device at {self.bdf}")
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self.amdsmi.amdsmi_shut_down()
        except Exception:
            pass

    def fields(self) -> Dict[str, Any]:
        errors: List[Dict[str, Any]] = []
        get = field_reader(errors)
        out: Dict[str, Any] = {}
        get(out, "clock_event_reasons", lambda: _throttle(self.amdsmi, self.h))
        get(out, "pcie_replay_counter", lambda: int(self.amdsmi.amdsmi_get_gpu_pci_replay_counter(self.h)))
        out["error"] = "; ".join(f"{e['field']}: {e['error']}" for e in errors) or None
        return out

    def ecc(self) -> Dict[str, Any]:
        counts = dict(self.amdsmi.amdsmi_get_gpu_total_ecc_count(self.h))
        return {"volatile_uncorrected": counts.get("uncorrectable_count"),
                "volatile_corrected": counts.get("correctable_count"),
                "aggregate_uncorrected": None, "aggregate_corrected": None}
