"""The simulated machine's health: NVML health fields, AER files, the kernel log, the driver module's
signature state, the health window's reader and the compute-ready graph's figures, with the faults' effects.

Defaults describe a healthy machine of the profile; each fault below breaks one thing on the first
accelerator (or all, where it says so).  Figures of the compute-ready graph come from the profile's datasheet
facts, scaled by fixed factors, and are labelled simulated.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from ...conditions.health import HealthReader, XidWatch
from ...probes.health import CLOCK_EVENT_BITS

#: The faults this module implements, with what each does (``faults.FAULTS`` gathers every module's).
FAULTS = {
    "ecc-uncorrectable": "the first accelerator reports 2 uncorrected ECC errors (volatile and aggregate)",
    "row-remap-pending": "the first accelerator has a row remap pending (it needs a reset)",
    "throttle-power-brake": "the first accelerator asserts HW slowdown and power brake while the load runs",
    "persistence-off": "persistence mode is off on every accelerator",
    "powercap-low": "the first accelerator's power limit was lowered to 70% of the profile's TDP",
    "aer-fatal": "the first accelerator logs one fatal AER error during the health window",
    "xid-79": "the first accelerator reports XID 79 (fallen off the bus) during the run and in the kernel log",
    "firmware-unlisted": "the first accelerator's VBIOS (96.00.00.00.99) is on no allow-list",
    "probe-hang": "the first accelerator's health reads block for an hour, as a hung NVML call does",
    "nvlink-crc": "the first accelerator's NVLink 3 counts 40 CRC errors and 40 replays during the health window "
                  "(DEP-NVLINK-ERRORS)",
}
#: The link and the counts of fault nvlink-crc.
CRC_LINK, CRC_COUNT = "3", 40
#: How long a read blocks under the fault probe-hang (the watchdog ends the run long before).
HANG_S = 3600.0

SIM_VBIOS = "96.00.00.00.01"
SIM_VBIOS_UNLISTED = "96.00.00.00.99"
SIM_INFOROM = "G520.0200.00.05"

AER_CORRECTABLE = ("RxErr", "BadTLP", "BadDLLP", "Rollover", "Timeout", "NonFatalErr", "CorrIntErr", "HeaderOF")
AER_UNCORRECTABLE = ("Undefined", "DLP", "SDES", "TLP", "FCP", "CmpltTO", "CmpltAbrt", "UnxCmplt", "RxOF",
                     "MalfTLP", "ECRC", "UnsupReq", "ACSViol", "UncorrIntErr", "BlockedTLP", "AtomicOpBlocked",
                     "TLPBlockedErr", "PoisonTLPBlocked")


def aer_text(names: Tuple[str, ...], total_key: str, counts: Optional[Dict[str, int]] = None) -> str:
    """The text of one ``aer_dev_*`` file, as the kernel writes it."""
    counts = counts or {}
    lines = [f"{n} {counts.get(n, 0)}" for n in names]
    lines.append(f"{total_key} {sum(counts.values())}")
    return "\n".join(lines)


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n", encoding="utf-8")


#: NVIDIA-only fields of the simulated health facts: an AMD device's amdsmi facts have none of them.
NVIDIA_ONLY = ("persistence_mode", "inforom_image_version", "inforom_ecc_version", "gsp_firmware_version",
               "gsp_firmware_mode", "remapped_rows", "retired_pages_sbe", "retired_pages_dbe", "nvlink_errors",
               "ecc_mode_pending", "ecc_aggregate_corrected", "ecc_aggregate_uncorrected")


def device_fields(profile: Any, faults: List[str], i: int) -> Dict[str, Any]:
    """The NVML health fields of simulated device ``i`` (the probe's keys), faults applied."""
    hw = profile.hardware
    tdp_mw = int(float(hw.get("tdp_w", 0)) * 1000)
    first = i == 0
    f: Dict[str, Any] = {
        "ecc_mode_current": True, "ecc_mode_pending": True,
        "ecc_volatile_corrected": 0, "ecc_volatile_uncorrected": 0,
        "ecc_aggregate_corrected": 3, "ecc_aggregate_uncorrected": 0,
        "remapped_rows": {"correctable": 0, "uncorrectable": 0, "pending": False, "failure": False},
        "retired_pages_sbe": None, "retired_pages_dbe": None, "retired_pages_pending": None,
        "clock_event_reasons": CLOCK_EVENT_BITS["gpu_idle"], "persistence_mode": True,
        "power_limit_enforced_mw": tdp_mw, "power_limit_default_mw": tdp_mw,
        "power_limit_constraints_mw": [tdp_mw // 3, tdp_mw], "pcie_replay_counter": 0,
        "inforom_image_version": SIM_INFOROM, "inforom_ecc_version": "7.16",
        "gsp_firmware_version": "560.35.03", "gsp_firmware_mode": {"enabled": True, "default": True},
    }
    if first and "ecc-uncorrectable" in faults:
        f.update(ecc_volatile_uncorrected=2, ecc_aggregate_uncorrected=2)
    if first and "row-remap-pending" in faults:
        f["remapped_rows"] = {"correctable": 0, "uncorrectable": 1, "pending": True, "failure": False}
    if "persistence-off" in faults:
        f["persistence_mode"] = False
    if first and "powercap-low" in faults:
        f["power_limit_enforced_mw"] = int(tdp_mw * 0.7)
        f["power_limit_mw"] = int(tdp_mw * 0.7)
    if first and "firmware-unlisted" in faults:
        f["vbios_version"] = SIM_VBIOS_UNLISTED
    peer = hw.get("peer_link") or {}
    if peer.get("type") == "nvlink":
        f["nvlink_errors"] = {"links": {str(k): {"replay": 0, "recovery": 0, "crc_flit": 0, "crc_data": 0}
                                        for k in range(int(peer.get("links", 0)))},
                              "unread": [], "source": "simulated NVML link error counters"}
    return f


def sim_health(root: Path, profile: Any, faults: List[str],
               bdfs: List[str]) -> Callable[[Dict[str, Any]], Dict[str, Any]]:
    """Write the health files of the simulated tree (AER per accelerator, kernel log, driver module) and return
    the function that adds the health fields to the NVML facts."""
    root = Path(root)
    for _i, bdf in enumerate(bdfs):
        base = root / "sys/bus/pci/devices" / bdf
        _write(base / "aer_dev_correctable", aer_text(AER_CORRECTABLE, "TOTAL_ERR_COR"))
        _write(base / "aer_dev_nonfatal", aer_text(AER_UNCORRECTABLE, "TOTAL_ERR_NONFATAL"))
        _write(base / "aer_dev_fatal", aer_text(AER_UNCORRECTABLE, "TOTAL_ERR_FATAL"))
    log = ["6,1,0,-;Linux version 6.8.0-sim (simulated)"]
    if bdfs and "xid-79" in faults:
        prefix = bdfs[0].rsplit(".", 1)[0]
        log.append(f"4,812,912345678,-;NVRM: Xid (PCI:{prefix}): 79, pid='<unknown>', name=<unknown>, "
                   "GPU has fallen off the bus.")
    _write(root / "dev/kmsg", "\n".join(log))
    vendor = (profile.pci_ids or ["10de:0000"])[0][:4]
    module = {"10de": "nvidia", "1002": "amdgpu"}.get(vendor)
    if module:
        _write(root / "sys/module" / module / "taint", "PO")
        _write(root / "sys/module" / module / "version", "560.35.03" if module == "nvidia" else "6.8.5")
    _write(root / "sys/module/module/parameters/sig_enforce", "N")

    def finish(nvml: Dict[str, Any]) -> Dict[str, Any]:
        if not nvml.get("available"):
            return nvml
        if nvml.get("vendor") == "amd":  # amdsmi's fields: ECC counts since load, bad pages, no NVIDIA settings
            for i, dev in enumerate(nvml.get("devices", [])):
                fields = device_fields(profile, faults, i)
                pending = bool(fields["remapped_rows"]["pending"])
                dev.update({k: v for k, v in fields.items() if k not in NVIDIA_ONLY})
                dev.update(ecc_deferred=0, retired_pages_total=1 if pending else 0,
                           retired_pages_pending=pending, retired_pages_unreservable=0)
            return nvml
        for i, dev in enumerate(nvml.get("devices", [])):
            dev.update(device_fields(profile, faults, i))
        nvml["conf_compute"] = {"state": {"environment": 0, "cc_feature": 0, "devtools_mode": 0},
                                "capabilities": {"cpu_caps": 0, "gpus_caps": 1},
                                "settings": {"multi_gpu_mode": 0}, "gpus_ready": 0}
        return nvml
    return finish


class SimHealthReader(HealthReader):
    """The health window on a simulated device: the clock-event reasons follow the stand-in load, and the
    faults add a power brake under load, a fatal AER error or an XID 79 during the window."""

    kind = "simulated"

    def __init__(self, platform: Any, acc: Dict[str, Any]):
        super().__init__(platform, acc)
        self.faults = list(getattr(platform, "faults", []))
        self.first = bool(platform.inventory()["accelerators"]) and \
            platform.inventory()["accelerators"][0]["bdf"] == acc["bdf"]
        self.loaded = False
        self.load_ran = False
        self.aer_reads = 0

    def sleep(self, seconds: float) -> None:
        return None

    def wait(self, seconds: float) -> None:
        import time

        time.sleep(min(seconds, 0.02))

    def load(self, inner: Any = None) -> Any:
        inner = super().load(inner)
        reader = self

        class Tracked:
            def __enter__(self) -> Any:
                inner.__enter__()
                reader.loaded = True
                return inner

            def __exit__(self, *exc: Any) -> None:
                reader.loaded = False
                reader.load_ran = True
                inner.__exit__(*exc)

            def evidence(self) -> Dict[str, Any]:
                return inner.evidence()
        return Tracked()

    def _hang(self) -> None:
        if self.first and "probe-hang" in self.faults:
            import time

            time.sleep(HANG_S)  # as a read stuck in the driver: the watchdog must end the run

    def ecc(self) -> Dict[str, Any]:
        self._hang()
        return super().ecc()

    def fields(self) -> Dict[str, Any]:
        self._hang()
        out = super().fields()
        if out.get("clock_event_reasons") is None:
            return out
        if self.loaded:
            mask = 0
            if self.first and "throttle-power-brake" in self.faults:
                mask |= CLOCK_EVENT_BITS["hw_slowdown"] | CLOCK_EVENT_BITS["hw_power_brake_slowdown"]
            out["clock_event_reasons"] = mask
        return out

    def nvlink_errors(self) -> Optional[Dict[str, Any]]:
        """The facts' counters; under fault nvlink-crc, once the load has run, link 3 of the first accelerator
        has counted CRC errors and replays."""
        out = super().nvlink_errors()
        if out is None or not (self.first and "nvlink-crc" in self.faults and self.load_ran):
            return out
        links = {k: dict(v) for k, v in out["links"].items()}
        if CRC_LINK in links:
            links[CRC_LINK].update(crc_flit=CRC_COUNT, replay=CRC_COUNT)
        return dict(out, links=links)

    def aer(self) -> Dict[str, Any]:
        out = super().aer()
        self.aer_reads += 1
        if self.aer_reads > 1 and self.first and "aer-fatal" in self.faults and out.get("available"):
            out = dict(out, fatal=dict(out["fatal"] or {}, SDES=1), totals=dict(out["totals"], fatal=1))
        return out

    @contextmanager
    def xid_watch(self) -> Iterator[XidWatch]:
        if not (self.acc.get("management") or {}):
            yield XidWatch(None, "simulated: no NVML, no event watch")
            return
        watch = XidWatch("simulated NVML XID events")
        try:
            yield watch
        finally:
            if self.first and "xid-79" in self.faults:
                watch.events.append({"xid": 79, "t": 0.5})
            watch.window_s = 1.0
