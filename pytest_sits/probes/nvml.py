"""NVIDIA facts through NVML (the ``nvidia-ml-py`` package, module ``pynvml``).

Imported lazily.  When the module is missing, the library does not load or
NVML does not initialise, the result says so (``available: False`` and the
reason) and the inventory falls back on sysfs alone.  Each field is read on
its own: a field the device does not support is recorded in ``errors`` and
does not lose the others.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Dict, List, Optional

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


def _device(pynvml: Any, h: Any, i: int, get: Callable[[Dict[str, Any], str, Callable[[], Any]], None],
            errors: List[Dict[str, Any]]) -> Dict[str, Any]:
    """One device's facts, each read on its own (a failed read is recorded against its field)."""
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
    dev["nvlinks"] = _nvlinks(pynvml, h, errors)
    dev["nvlink_errors"] = nvlink_error_counts(pynvml, h)
    return dev


def collect() -> Dict[str, Any]:
    out: Dict[str, Any] = {"available": False, "source": "nvml", "collected_at": time.time(),
                           "devices": [], "errors": []}
    try:
        import pynvml
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
            out["devices"].append(_device(pynvml, pynvml.nvmlDeviceGetHandleByIndex(i), i, get, out["errors"]))
        out["p2p_nvlink"] = _p2p(pynvml, count, out["errors"])
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass
    return out


def _nvlink(pynvml: Any, h: Any, link: int, active: bool, errors: List[Dict[str, Any]]) -> Dict[str, Any]:
    rec: Dict[str, Any] = {"link": link, "active": active}
    for key, fn in (("version", lambda: pynvml.nvmlDeviceGetNvLinkVersion(h, link)),
                    ("remote_bus_id", lambda: normalise_bus_id(
                        pynvml.nvmlDeviceGetNvLinkRemotePciInfo_v2(h, link).busId)),
                    ("remote_type", lambda: pynvml.nvmlDeviceGetNvLinkRemoteDeviceType(h, link))):
        try:
            rec[key] = _text(fn())
        except Exception as exc:
            rec[key] = None
            errors.append({"field": f"nvlink[{link}].{key}", "error": str(exc)})
    return rec


def _nvlinks(pynvml: Any, h: Any, errors: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    links = []
    max_links = getattr(pynvml, "NVML_NVLINK_MAX_LINKS", 18)
    for link in range(max_links):
        try:
            state = pynvml.nvmlDeviceGetNvLinkState(h, link)
        except Exception:  # NotSupported past the last link, or no NVLink at all
            break
        links.append(_nvlink(pynvml, h, link, bool(state), errors))
    return links


#: The NVLink data-link error counters NVML keeps per link (``nvmlDeviceGetNvLinkErrorCounter``): replays of a
#: flit that failed its CRC, link recoveries (retraining), and the CRC errors of flits and of data.
NVLINK_COUNTERS = {"replay": "NVML_NVLINK_ERROR_DL_REPLAY", "recovery": "NVML_NVLINK_ERROR_DL_RECOVERY",
                   "crc_flit": "NVML_NVLINK_ERROR_DL_CRC_FLIT", "crc_data": "NVML_NVLINK_ERROR_DL_CRC_DATA"}
#: The counters' values in nvml.h, for an nvidia-ml-py that does not name them.
_NVLINK_COUNTER_CODES = {"replay": 0, "recovery": 1, "crc_flit": 2, "crc_data": 3}


def nvlink_error_counts(pynvml: Any, h: Any) -> Dict[str, Any]:
    """Every active NVLink's error counters now: ``links`` {link: {counter: count or None}} (None: the driver
    does not report that counter on this device, the reason in ``unread``; never a made-up zero).  A device
    without NVLink has no links."""
    links: Dict[str, Dict[str, Optional[int]]] = {}
    unread: List[str] = []
    for link in range(getattr(pynvml, "NVML_NVLINK_MAX_LINKS", 18)):
        try:
            active = pynvml.nvmlDeviceGetNvLinkState(h, link)
        except Exception:  # NotSupported past the last link, or no NVLink at all
            break
        if not active:
            continue
        rec: Dict[str, Optional[int]] = {}
        for name, const in NVLINK_COUNTERS.items():
            try:
                code = getattr(pynvml, const, _NVLINK_COUNTER_CODES[name])
                rec[name] = int(pynvml.nvmlDeviceGetNvLinkErrorCounter(h, link, code))
            except Exception as exc:
                rec[name] = None
                if len(unread) < 16:
                    unread.append(f"link {link} {name}: {exc}")
        links[str(link)] = rec
    return {"links": links, "unread": unread, "source": "NVML nvmlDeviceGetNvLinkErrorCounter"}


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


def importable() -> bool:
    """Whether ``pynvml`` imports (the ``nvidia-ml-py`` package is installed)."""
    try:
        import pynvml  # noqa: F401
    except ImportError:
        return False
    return True


class NvmlEventError(Exception):
    """Waiting for an NVML event failed (other than by timing out); the message is NVML's."""


class NvmlXidEvents:
    """The XID critical-error events of one device, registered with NVML (raises when they cannot be)."""

    def __init__(self, pynvml: Any, handle: Any):
        self.nv = pynvml
        self.evset = pynvml.nvmlEventSetCreate()
        pynvml.nvmlDeviceRegisterEvents(handle, pynvml.nvmlEventTypeXidCriticalError, self.evset)

    def wait(self, timeout_ms: int) -> Optional[int]:
        """The next event's XID, or None when none came within ``timeout_ms``; :class:`NvmlEventError` when the
        wait failed."""
        nv = self.nv
        try:
            data = nv.nvmlEventSetWait_v2(self.evset, timeout_ms)
        except nv.NVMLError as exc:
            if getattr(exc, "value", None) == getattr(nv, "NVML_ERROR_TIMEOUT", -1):
                return None
            raise NvmlEventError(str(exc)) from exc
        return int(data.eventData)

    def free(self) -> None:
        try:
            self.nv.nvmlEventSetFree(self.evset)
        except Exception:
            pass


class NvmlDevice:
    """One device through NVML for a window of readings: NVML is initialised and the device's handle found on
    enter, NVML shut down on exit.  Each reading returns plain evidence."""

    def __init__(self, bdf: str):
        self.bdf = bdf

    def __enter__(self) -> NvmlDevice:
        import pynvml

        self.nvml = pynvml
        pynvml.nvmlInit()
        try:
            self.handle = health.nvml_handle_for_bdf(pynvml, self.bdf)
        except Exception:
            pynvml.nvmlShutdown()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self.nvml.nvmlShutdown()
        except Exception:
            pass

    def fields(self) -> Dict[str, Any]:
        """The clock-event reasons and the PCIe replay counter now (None when unread, the reason in ``error``)."""
        out: Dict[str, Any] = {"error": None}
        errors: List[Dict[str, Any]] = []
        get = field_reader(errors)
        get(out, "clock_event_reasons", lambda: health.clock_event_reasons(self.nvml, self.handle))
        get(out, "pcie_replay_counter", lambda: int(self.nvml.nvmlDeviceGetPcieReplayCounter(self.handle)))
        if errors:
            out["error"] = "; ".join(f"{e['field']}: {e['error']}" for e in errors)
        return out

    def ecc(self) -> Dict[str, Any]:
        """The ECC error counts now (None where ECC is off or unsupported: unread, never a made-up zero)."""
        nv = self.nvml
        out: Dict[str, Optional[int]] = {}
        kinds = {"volatile_uncorrected": ("NVML_MEMORY_ERROR_TYPE_UNCORRECTED", "NVML_VOLATILE_ECC"),
                 "aggregate_uncorrected": ("NVML_MEMORY_ERROR_TYPE_UNCORRECTED", "NVML_AGGREGATE_ECC"),
                 "volatile_corrected": ("NVML_MEMORY_ERROR_TYPE_CORRECTED", "NVML_VOLATILE_ECC"),
                 "aggregate_corrected": ("NVML_MEMORY_ERROR_TYPE_CORRECTED", "NVML_AGGREGATE_ECC")}
        for key, (etype, counter) in kinds.items():
            try:
                out[key] = int(nv.nvmlDeviceGetTotalEccErrors(self.handle, getattr(nv, etype), getattr(nv, counter)))
            except Exception:  # ECC off or not supported: unread, never a made-up zero
                out[key] = None
        return out

    def nvlink_errors(self) -> Dict[str, Any]:
        """The NVLink error counters of every active link now (:func:`nvlink_error_counts`)."""
        return nvlink_error_counts(self.nvml, self.handle)

    def xid_events(self) -> NvmlXidEvents:
        """The device's XID events, registered now (raises when NVML cannot register them)."""
        return NvmlXidEvents(self.nvml, self.handle)


def nvlink_tx_kib(bdf: str) -> Optional[int]:
    """Sum of NVLink data TX counters (KiB) of the device over its links, or None when NVML has none."""
    try:
        import pynvml
    except ImportError:
        return None
    field = getattr(pynvml, "NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX", None)
    if field is None:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:
        return None
    try:
        h = health.nvml_handle_for_bdf(pynvml, bdf)
        total, seen = 0, False
        values = pynvml.nvmlDeviceGetFieldValues(h, [(field, link) for link in range(18)])
        for v in values:
            if v.nvmlReturn == pynvml.NVML_SUCCESS:
                total += int(v.value.ullVal)
                seen = True
        return total if seen else None
    except Exception:
        return None
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass
