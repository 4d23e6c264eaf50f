"""NVIDIA facts through NVML (the ``nvidia-ml-py`` package, module ``pynvml``).

Imported lazily.  When the module is missing, the library does not load or
NVML does not initialise, the result says so (``available: False`` and the
reason) and the inventory falls back on sysfs alone.  Each field is read on
its own: a field the device does not support is recorded in ``errors`` and
does not lose the others.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Dict, List

from . import health
from .pcie import normalise_bus_id


def _text(value: Any) -> Any:
    return value.decode() if isinstance(value, bytes) else value


def field_reader(errors: List[Dict[str, Any]]) -> Callable[[Dict[str, Any], str, Callable[[], Any]], None]:
    """``get(target, key, fn)``: target[key] = fn(); a field the device does not support is None, and the
    error goes into ``errors`` without losing the other fields.  Shared by the NVML and amdsmi probes."""
    def get(target: Dict[str, Any], key: str, fn: Callable[[], Any]) -> None:
        try:
            target[key] = _text(fn())
        except Exception as exc:
            errors.append({"field": key, "error": str(exc)})
            target[key] = None
    return get


def collect() -> Dict[str, Any]:
    out: Dict[str, Any] = {"available": False, "source": "nvml", "collected_at": time.time(),
                           "devices": [], "errors": []}
    try:
        import pynvml  # type: ignore
    except ImportError:
        out["reason"] = "pynvml not importable (pip install nvidia-ml-py)"
        return out
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
        out["reason"] = f"NVML did not initialise: {exc}"
        return out
    try:
        out["available"] = True
        get = field_reader(out["errors"])

        get(out, "driver_version", pynvml.nvmlSystemGetDriverVersion)
        get(out, "nvml_version", pynvml.nvmlSystemGetNVMLVersion)

        def cuda() -> str:
            v = pynvml.nvmlSystemGetCudaDriverVersion_v2()
            return f"{v // 1000}.{(v % 1000) // 10}"

        get(out, "cuda_driver_version", cuda)
        health.read_nvml_system(pynvml, out, get)
        count = pynvml.nvmlDeviceGetCount()
        for i in range(count):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            dev: Dict[str, Any] = {"index": i}
            get(dev, "name", lambda: pynvml.nvmlDeviceGetName(h))
            get(dev, "uuid", lambda: pynvml.nvmlDeviceGetUUID(h))
            get(dev, "serial", lambda: pynvml.nvmlDeviceGetSerial(h))
            get(dev, "vbios_version", lambda: pynvml.nvmlDeviceGetVbiosVersion(h))
            get(dev, "board_part_number", lambda: pynvml.nvmlDeviceGetBoardPartNumber(h))
            get(dev, "memory_total_bytes", lambda: pynvml.nvmlDeviceGetMemoryInfo(h).total)
            get(dev, "pci_bus_id", lambda: normalise_bus_id(pynvml.nvmlDeviceGetPciInfo(h).busId))
            get(dev, "pcie_current_gen", lambda: pynvml.nvmlDeviceGetCurrPcieLinkGeneration(h))
            get(dev, "pcie_current_width", lambda: pynvml.nvmlDeviceGetCurrPcieLinkWidth(h))
            get(dev, "pcie_max_gen", lambda: pynvml.nvmlDeviceGetMaxPcieLinkGeneration(h))
            get(dev, "pcie_max_width", lambda: pynvml.nvmlDeviceGetMaxPcieLinkWidth(h))
            get(dev, "pcie_gpu_max_gen", lambda: pynvml.nvmlDeviceGetGpuMaxPcieLinkGeneration(h))
            get(dev, "power_limit_mw", lambda: pynvml.nvmlDeviceGetPowerManagementLimit(h))
            get(dev, "temperature_c", lambda: pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU))
            get(dev, "cc_mode", lambda: pynvml.nvmlSystemGetConfComputeState().ccFeature)
            health.read_nvml_device(pynvml, h, dev, get)
            dev["nvlinks"] = _nvlinks(pynvml, h, out["errors"])
            out["devices"].append(dev)
        out["p2p_nvlink"] = _p2p(pynvml, count, out["errors"])
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass
    return out


def _nvlinks(pynvml: Any, h: Any, errors: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    links = []
    max_links = getattr(pynvml, "NVML_NVLINK_MAX_LINKS", 18)
    for link in range(max_links):
        try:
            state = pynvml.nvmlDeviceGetNvLinkState(h, link)
        except Exception:  # NotSupported past the last link, or no NVLink at all
            break
        rec: Dict[str, Any] = {"link": link, "active": bool(state)}
        for key, fn in (("version", lambda: pynvml.nvmlDeviceGetNvLinkVersion(h, link)),
                        ("remote_bus_id", lambda: normalise_bus_id(
                            pynvml.nvmlDeviceGetNvLinkRemotePciInfo_v2(h, link).busId)),
                        ("remote_type", lambda: pynvml.nvmlDeviceGetNvLinkRemoteDeviceType(h, link))):
            try:
                rec[key] = _text(fn())
            except Exception as exc:
                rec[key] = None
                errors.append({"field": f"nvlink[{link}].{key}", "error": str(exc)})
        links.append(rec)
    return links


def _p2p(pynvml: Any, count: int, errors: List[Dict[str, Any]]) -> List[List[Any]]:
    """Matrix of NVLink P2P status: True, False, or None when unreadable."""
    matrix: List[List[Any]] = [[None] * count for _ in range(count)]
    idx = getattr(pynvml, "NVML_P2P_CAPS_INDEX_NVLINK", 3)
    ok = getattr(pynvml, "NVML_P2P_STATUS_OK", 0)
    handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
    for i in range(count):
        for j in range(count):
            if i == j:
                continue
            try:
                matrix[i][j] = pynvml.nvmlDeviceGetP2PStatus(handles[i], handles[j], idx) == ok
            except Exception as exc:
                errors.append({"field": f"p2p[{i}][{j}]", "error": str(exc)})
    return matrix
