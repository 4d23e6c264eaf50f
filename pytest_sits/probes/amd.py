"""AMD facts through amdsmi (the ROCm SMI library's Python binding), imported lazily.

Same shape as the NVML facts: ``{"available", "reason", "driver_version", "devices": [...]}``; every
field is read on its own, and a field that fails is recorded in ``errors``.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Dict

from . import health
from .nvml import field_reader


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
    return dev


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

        for i, h in enumerate(amdsmi.amdsmi_get_processor_handles()):
            out["devices"].append(_device(amdsmi, h, i, get))
        if out["devices"]:
            out["driver_version"] = out["devices"][0].get("driver_version")
    finally:
        try:
            amdsmi.amdsmi_shut_down()
        except Exception:
            pass
    return out
