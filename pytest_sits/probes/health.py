"""Health facts of each accelerator: what DCGM's deployment level and node health checks read.

Read-only, never decides.  From NVML (``nvidia-ml-py``): ECC mode and
counts, remapped rows, retired pages, clock-event reasons, persistence mode,
power limits and their constraints, the PCIe replay counter, firmware
versions (VBIOS is read by :mod:`.nvml`; InfoROM, GSP here) and the
confidential-computing state.  From amdsmi: ECC counts and bad pages.  From
the kernel's own files below a root folder (``/`` live, a snapshot or a
simulated tree): AER counters, the kernel log's XID history and the driver
module's signature state.  Each field is read on its own; a field that fails
is ``None`` and its error is recorded, never a made-up number.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

Getter = Callable[[Dict[str, Any], str, Callable[[], Any]], None]

#: NVML clock-event reason bits (``nvmlClocksEventReason*``; the same bits as the older ``...ThrottleReason*``).
CLOCK_EVENT_BITS: Dict[str, int] = {
    "gpu_idle": 0x1,
    "applications_clocks_setting": 0x2,
    "sw_power_cap": 0x4,
    "hw_slowdown": 0x8,
    "sync_boost": 0x10,
    "sw_thermal_slowdown": 0x20,
    "hw_thermal_slowdown": 0x40,
    "hw_power_brake_slowdown": 0x80,
    "display_clock_setting": 0x100,
}

#: The fields :func:`read_nvml_device` adds to a device's NVML facts.
NVML_HEALTH_FIELDS = (
    "ecc_mode_current", "ecc_mode_pending", "ecc_volatile_corrected", "ecc_volatile_uncorrected",
    "ecc_aggregate_corrected", "ecc_aggregate_uncorrected", "remapped_rows", "retired_pages_sbe",
    "retired_pages_dbe", "retired_pages_pending", "clock_event_reasons", "persistence_mode",
    "power_limit_enforced_mw", "power_limit_default_mw", "power_limit_constraints_mw", "pcie_replay_counter",
    "inforom_image_version", "inforom_ecc_version", "gsp_firmware_version", "gsp_firmware_mode",
)

MAX_FILE_BYTES = 1 << 16
MAX_LOG_BYTES = 16 << 20


def decode_reasons(mask: Optional[int]) -> Optional[List[str]]:
    """The names of the clock-event reason bits set in ``mask`` (None when unread)."""
    if mask is None:
        return None
    return [name for name, bit in CLOCK_EVENT_BITS.items() if int(mask) & bit]


# --------------------------------------------------------------------------
# NVML


def clock_event_reasons(pynvml: Any, h: Any) -> int:
    """Current clock-event reasons; drivers before 535 name the call ``...ThrottleReasons``."""
    fn = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
    try:
        if fn is None:
            raise AttributeError
        return int(fn(h))
    except Exception:
        return int(pynvml.nvmlDeviceGetCurrentClocksThrottleReasons(h))


def read_nvml_device(pynvml: Any, h: Any, dev: Dict[str, Any], get: Getter) -> None:
    """Add the health fields of one device (handle ``h``) to its facts ``dev``."""
    vol, agg = pynvml.NVML_VOLATILE_ECC, pynvml.NVML_AGGREGATE_ECC
    cor, unc = pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED, pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
    get(dev, "ecc_mode_current", lambda: bool(pynvml.nvmlDeviceGetEccMode(h)[0]))
    get(dev, "ecc_mode_pending", lambda: bool(pynvml.nvmlDeviceGetEccMode(h)[1]))
    get(dev, "ecc_volatile_corrected", lambda: int(pynvml.nvmlDeviceGetTotalEccErrors(h, cor, vol)))
    get(dev, "ecc_volatile_uncorrected", lambda: int(pynvml.nvmlDeviceGetTotalEccErrors(h, unc, vol)))
    get(dev, "ecc_aggregate_corrected", lambda: int(pynvml.nvmlDeviceGetTotalEccErrors(h, cor, agg)))
    get(dev, "ecc_aggregate_uncorrected", lambda: int(pynvml.nvmlDeviceGetTotalEccErrors(h, unc, agg)))

    def rows() -> Dict[str, Any]:
        c, u, pending, failure = pynvml.nvmlDeviceGetRemappedRows(h)
        return {"correctable": int(c), "uncorrectable": int(u), "pending": bool(pending), "failure": bool(failure)}

    get(dev, "remapped_rows", rows)
    sbe = pynvml.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS
    dbe = pynvml.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR
    get(dev, "retired_pages_sbe", lambda: len(pynvml.nvmlDeviceGetRetiredPages(h, sbe)))
    get(dev, "retired_pages_dbe", lambda: len(pynvml.nvmlDeviceGetRetiredPages(h, dbe)))
    get(dev, "retired_pages_pending", lambda: bool(pynvml.nvmlDeviceGetRetiredPagesPendingStatus(h)))
    get(dev, "clock_event_reasons", lambda: clock_event_reasons(pynvml, h))
    get(dev, "persistence_mode", lambda: bool(pynvml.nvmlDeviceGetPersistenceMode(h)))
    get(dev, "power_limit_enforced_mw", lambda: int(pynvml.nvmlDeviceGetEnforcedPowerLimit(h)))
    get(dev, "power_limit_default_mw", lambda: int(pynvml.nvmlDeviceGetPowerManagementDefaultLimit(h)))
    get(dev, "power_limit_constraints_mw",
        lambda: [int(x) for x in pynvml.nvmlDeviceGetPowerManagementLimitConstraints(h)])
    get(dev, "pcie_replay_counter", lambda: int(pynvml.nvmlDeviceGetPcieReplayCounter(h)))
    get(dev, "inforom_image_version", lambda: pynvml.nvmlDeviceGetInforomImageVersion(h))
    get(dev, "inforom_ecc_version", lambda: pynvml.nvmlDeviceGetInforomVersion(h, pynvml.NVML_INFOROM_ECC))
    get(dev, "gsp_firmware_version", lambda: pynvml.nvmlDeviceGetGspFirmwareVersion(h))

    def gsp_mode() -> Dict[str, bool]:
        enabled, default = pynvml.nvmlDeviceGetGspFirmwareMode(h)
        return {"enabled": bool(enabled), "default": bool(default)}

    get(dev, "gsp_firmware_mode", gsp_mode)


def read_nvml_system(pynvml: Any, out: Dict[str, Any], get: Getter) -> None:
    """Confidential-computing state, capabilities and settings of the system (NVML)."""
    def state() -> Dict[str, Any]:
        s = pynvml.nvmlSystemGetConfComputeState()
        return {"environment": int(s.environment), "cc_feature": int(s.ccFeature),
                "devtools_mode": int(s.devToolsMode)}

    def caps() -> Dict[str, Any]:
        c = pynvml.nvmlSystemGetConfComputeCapabilities()
        return {"cpu_caps": int(c.cpuCaps), "gpus_caps": int(c.gpusCaps)}

    def settings() -> Dict[str, Any]:
        s = pynvml.c_nvmlSystemConfComputeSettings_v1_t()
        ret = pynvml.nvmlSystemGetConfComputeSettings(pynvml.byref(s))
        if ret != pynvml.NVML_SUCCESS:
            raise pynvml.NVMLError(ret)
        return {"multi_gpu_mode": int(s.multiGpuMode)}

    cc: Dict[str, Any] = {}
    get(cc, "state", state)
    get(cc, "capabilities", caps)
    get(cc, "settings", settings)
    get(cc, "gpus_ready", lambda: int(pynvml.nvmlSystemGetConfComputeGpusReadyState()))
    out["conf_compute"] = cc


def nvml_handle_for_bdf(pynvml: Any, bdf: str) -> Any:
    """The NVML handle of the device at PCI address ``bdf`` (sysfs spelling)."""
    from .pcie import normalise_bus_id

    for i in range(pynvml.nvmlDeviceGetCount()):
        h = pynvml.nvmlDeviceGetHandleByIndex(i)
        if normalise_bus_id(pynvml.nvmlDeviceGetPciInfo(h).busId) == bdf:
            return h
    raise LookupError(f"NVML lists no device at {bdf}")


# --------------------------------------------------------------------------
# amdsmi


def read_amd_device(amdsmi: Any, h: Any, dev: Dict[str, Any], get: Getter) -> None:
    """ECC counts and bad pages through amdsmi (counts since the driver loaded: recorded as volatile)."""
    def ecc() -> Dict[str, Any]:
        return dict(amdsmi.amdsmi_get_gpu_total_ecc_count(h))

    counts: Dict[str, Any] = {}
    get(counts, "total", ecc)
    total = counts.get("total") or {}
    dev["ecc_volatile_corrected"] = total.get("correctable_count")
    dev["ecc_volatile_uncorrected"] = total.get("uncorrectable_count")
    dev["ecc_deferred"] = total.get("deferred_count")
    get(dev, "ecc_mode_current", lambda: bool(amdsmi.amdsmi_get_gpu_ecc_enabled(h)))

    def bad_pages() -> Dict[str, Any]:
        pages = amdsmi.amdsmi_get_gpu_bad_page_info(h) or []
        status = [str(p.get("status", "")).upper() for p in pages if isinstance(p, dict)]
        return {"total": len(status), "pending": sum("PENDING" in s for s in status),
                "unreservable": sum("UNRESERVABLE" in s for s in status)}

    info: Dict[str, Any] = {}
    get(info, "bad_pages", bad_pages)
    bp = info.get("bad_pages")
    dev["retired_pages_total"] = bp["total"] if bp else None
    dev["retired_pages_pending"] = bool(bp["pending"]) if bp else None
    dev["retired_pages_unreservable"] = bp["unreservable"] if bp else None


# --------------------------------------------------------------------------
# Kernel files


def _read_small(root: Path, path: Path) -> Optional[str]:
    """A small kernel file below ``root``: confined to a snapshot's folder when ``root`` is not ``/``."""
    from .sysfs import read_bytes

    data = read_bytes(Path(root), os.path.relpath(path, root), limit=MAX_FILE_BYTES)
    return data.decode("utf-8", "replace") if data is not None else None


AER_FILES = {"correctable": "aer_dev_correctable", "nonfatal": "aer_dev_nonfatal", "fatal": "aer_dev_fatal"}


def parse_aer(text: str) -> Dict[str, int]:
    """``RxErr 0\\nBadTLP 1\\n...\\nTOTAL_ERR_COR 1`` -> {name: count}; lines that are not 'name count' are skipped."""
    out: Dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit():
            out[parts[0]] = int(parts[1])
    return out


def read_aer(root: Path, bdf: str) -> Dict[str, Any]:
    """AER counters of one PCI function: {"correctable": {...}, "nonfatal": {...}, "fatal": {...}, "totals": {...}}.

    ``available`` is False with the reason when the kernel exposes no AER files for it (no AER capability,
    AER handled by firmware, or a kernel built without PCIEAER)."""
    base = Path(root) / "sys/bus/pci/devices" / bdf
    out: Dict[str, Any] = {"device": bdf, "source": f"/sys/bus/pci/devices/{bdf}/aer_dev_*", "available": False}
    totals: Dict[str, Optional[int]] = {}
    for kind, name in AER_FILES.items():
        text = _read_small(root, base / name)
        if text is None:
            out[kind] = None
            totals[kind] = None
            continue
        counts = parse_aer(text)
        out[kind] = counts
        total_key = next((k for k in counts if k.startswith("TOTAL_ERR")), None)
        totals[kind] = counts[total_key] if total_key else sum(counts.values())
    out["totals"] = totals
    out["available"] = any(v is not None for v in totals.values())
    if not out["available"]:
        out["reason"] = (f"no AER counters for {bdf} (aer_dev_* absent: the device has no AER capability, the "
                         "firmware owns AER (firmware-first), or the kernel lacks CONFIG_PCIEAER)")
    return out


XID_RE = re.compile(r"NVRM: Xid \((?:PCI:)?([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})(?:\.\d)?\): (\d{1,4})")


def parse_xids(lines: List[str]) -> List[Dict[str, Any]]:
    """NVRM Xid lines of a kernel log: [{"bdf_prefix", "xid", "line"}]."""
    out = []
    for line in lines:
        m = XID_RE.search(line)
        if m:
            msg = line.split(";", 1)[1] if ";" in line.split("NVRM", 1)[0] else line
            out.append({"bdf_prefix": m.group(1).lower(), "xid": int(m.group(2)), "line": msg.strip()[:300]})
    return out


#: AER lines of the kernel (drivers/pci/pcie/aer.c): "<dev>: PCIe Bus Error: severity=..." per device, and the
#: root port's "AER: [Multiple ]<Severity> error received: <dev>".
AER_BUS_ERROR = re.compile(r"(?P<dev>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]):? (?:AER: )?PCIe Bus Error: "
                           r"severity=(?P<sev>Corrected|Uncorrected(?: \((?:Non-Fatal|Fatal)\))?|Uncorrectable|"
                           r"Fatal|Non-Fatal)", re.I)
AER_RECEIVED = re.compile(r"AER: (?:Multiple )?(?P<sev>Corrected|Uncorrected \((?:Non-Fatal|Fatal)\)) error "
                          r"(?:message )?received: (?:id=[0-9a-fA-F]{4}|(?P<dev>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:"
                          r"[0-9a-fA-F]{2}\.[0-7]))", re.I)


def _severity(text: str) -> str:
    low = text.lower()
    if "non-fatal" in low:
        return "nonfatal"
    if "fatal" in low:
        return "fatal"
    if "uncorrect" in low:
        return "nonfatal"
    return "correctable"


def parse_aer_lines(lines: List[str]) -> List[Dict[str, Any]]:
    """AER lines of a kernel log: [{"device", "severity" (correctable|nonfatal|fatal), "kind", "line"}]."""
    out = []
    for line in lines:
        m = AER_BUS_ERROR.search(line)
        if m:
            out.append({"device": m.group("dev").lower(), "severity": _severity(m.group("sev")), "kind": "bus error",
                        "line": line.strip()[:300]})
            continue
        m = AER_RECEIVED.search(line)
        if m and m.group("dev"):
            out.append({"device": m.group("dev").lower(), "severity": _severity(m.group("sev")), "kind": "received",
                        "line": line.strip()[:300]})
    return out


def aer_counts(events: List[Dict[str, Any]], bdf: str) -> Dict[str, int]:
    """Errors per severity of one function in a kernel log: the device's own "PCIe Bus Error" lines, or where
    the log has none of those, the root port's "error received" lines naming it (one event prints both)."""
    mine = [e for e in events if e["device"] == bdf]
    own = [e for e in mine if e["kind"] == "bus error"] or mine
    counts = {"correctable": 0, "nonfatal": 0, "fatal": 0}
    for e in own:
        counts[e["severity"]] += 1
    return counts


def _read_kmsg(path: Path) -> List[str]:
    """Every record of /dev/kmsg (each read returns one record) or the lines of a file standing in for it."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    lines: List[str] = []
    size = 0
    try:
        while size < MAX_LOG_BYTES:
            try:
                chunk = os.read(fd, 8192)
            except BlockingIOError:
                break
            except BrokenPipeError:  # records overwritten while reading: carry on with the next one
                continue
            if not chunk:
                break
            size += len(chunk)
            lines.extend(chunk.decode("utf-8", "replace").splitlines())
    finally:
        os.close(fd)
    return lines


def xid_history(root: Path) -> Dict[str, Any]:
    """The XID lines in the kernel log since boot; ``readable`` False with the reason when it could not be read."""
    root = Path(root)
    kmsg = root / "dev/kmsg"
    reasons = []
    try:
        if str(root) != "/":  # a snapshot's stand-in for the kernel log: a plain file, confined and bounded
            from .sysfs import read_bytes

            data = read_bytes(root, "dev/kmsg", limit=MAX_LOG_BYTES)
            if data is None:
                raise FileNotFoundError(2, "not in the snapshot")
            lines = data.decode("utf-8", "replace").splitlines()
        else:
            lines = _read_kmsg(kmsg)
        return {"readable": True, "source": "/dev/kmsg", "records": len(lines), "xids": parse_xids(lines)}
    except OSError as exc:
        reasons.append(f"/dev/kmsg: {exc.strerror or exc}")
    if str(root) == "/":
        try:
            proc = subprocess.run(["journalctl", "-k", "-b", "-o", "cat", "--no-pager", "-q"],
                                  capture_output=True, timeout=20, check=False)
            if proc.returncode == 0:
                text = proc.stdout[:MAX_LOG_BYTES].decode("utf-8", "replace")
                lines = text.splitlines()
                return {"readable": True, "source": "journalctl -k -b", "records": len(lines),
                        "xids": parse_xids(lines)}
            reasons.append(f"journalctl -k: exit {proc.returncode}: "
                           f"{proc.stderr.decode('utf-8', 'replace').strip()[:200]}")
        except (OSError, subprocess.TimeoutExpired) as exc:
            reasons.append(f"journalctl -k: {exc}")
    return {"readable": False, "source": None, "xids": None,
            "reason": "the kernel log is not readable here (" + "; ".join(reasons)
                      + "); run as root, or with kernel.dmesg_restrict=0, to read the XID history"}


def module_signature(root: Path, module: str) -> Dict[str, Any]:
    """The signature state of a loaded kernel module, as far as the kernel exposes it.

    ``state``: ``signed`` (the kernel checks module signatures and did not taint for this module),
    ``unsigned`` (taint flag E: unsigned, or a signature the kernel could not verify), or ``unknown``
    (the module is not loaded, or the kernel was built without module signing: no
    /sys/module/module/parameters/sig_enforce)."""
    root = Path(root)
    base = root / "sys/module" / module
    out: Dict[str, Any] = {"module": module, "loaded": base.is_dir()}
    taint = _read_small(root, base / "taint")
    enforce = _read_small(root, root / "sys/module/module/parameters/sig_enforce")
    version = _read_small(root, base / "version")
    out["taint"] = taint.strip() if taint is not None else None
    out["sig_enforce"] = enforce.strip() if enforce is not None else None
    out["version"] = version.strip() if version is not None else None
    if not out["loaded"]:
        out.update(state="unknown", reason=f"module {module} is not loaded (no /sys/module/{module})")
    elif taint is None:
        out.update(state="unknown", reason=f"/sys/module/{module}/taint is not readable")
    elif "E" in out["taint"]:
        out.update(state="unsigned", reason=f"taint flags {out['taint']!r} include E: the module is unsigned or "
                                            "its signature could not be verified")
    elif enforce is None:
        out.update(state="unknown", reason="the kernel exposes no module signature checking "
                                           "(no /sys/module/module/parameters/sig_enforce)")
    else:
        out.update(state="signed", reason=f"the kernel checks module signatures (sig_enforce={out['sig_enforce']}) "
                                          f"and {module} carries no E taint (taint {out['taint']!r})")
    return out
