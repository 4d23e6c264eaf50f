"""Deployment health (suite extensions, as DCGM's deployment level and cloud GPU health checks read it):
DEP-ECC, DEP-ROWREMAP, DEP-THROTTLE, DEP-PERSIST, DEP-POWERCAP, DEP-PCIE-ERRORS, DEP-XID, DEP-NVLINK-ERRORS, and
the health window several of them are judged over."""

from .base import BOOL, COUNT, INT0, INT1, NUM01, Cost, Threshold, bounded, declare, declare_condition, nullable

_ALL = ("live", "snapshot", "evidence", "sim")
_WINDOW = ("live", "evidence", "sim")  # judged over the health window (or the period a submitted log covers)

declare(
    "DEP-ECC", "ECC enabled; corrected and uncorrected error counts within limits", "suite extension (health)",
    level="quick", scope="accelerator", family="health", extension=True,
    note="Suite extensions: node health, as DCGM's deployment level and cloud GPU health checks read it.",
    thresholds={
        "require_enabled": Threshold(BOOL, True, "ECC on"),
        "max_volatile_uncorrected": Threshold(nullable(INT0), 0, "any uncorrected error since the driver loaded is "
                                                                 "a fault (DCGM's ECC watch)"),
        "max_aggregate_uncorrected": Threshold(nullable(INT0), None, "lifetime count: reported (WARN above 0); row "
                                                                     "remapping retires the memory"),
        "max_volatile_corrected": Threshold(nullable(INT0), None, "corrected errors are reported, not judged, "
                                                                  "unless a profile sets a limit"),
        "max_aggregate_corrected": Threshold(nullable(INT0), None, "lifetime corrected count: reported"),
    },
    cost=Cost("acc", fixed=0.1), platforms=_ALL, faults=("ecc-uncorrectable",))

declare(
    "DEP-ROWREMAP", "No pending row remap or page retirement, no remap failure", "suite extension (health)",
    level="quick", scope="accelerator", family="health", extension=True,
    note="A pending remap/retirement or a remap failure always fails (a reset, or an RMA, is due).",
    thresholds={
        "max_uncorrectable_remaps": Threshold(nullable(INT0), None, "rows remapped for uncorrectable errors"),
        "max_correctable_remaps": Threshold(nullable(INT0), None, "rows remapped for correctable errors"),
        "max_retired_pages": Threshold(nullable(INT0), None, "pre-Ampere page retirement: set the RMA limit of your "
                                                            "support contract"),
    },
    cost=Cost("acc", fixed=0.1), platforms=_ALL, faults=("row-remap-pending",))

declare(
    "DEP-THROTTLE", "No HW slowdown, thermal or power-brake clock events under load", "suite extension (health)",
    level="quick", scope="accelerator", family="health", extension=True,
    thresholds={
        "max_fault_share": Threshold(NUM01, 0.0, "HW slowdown, HW thermal, HW power brake, SW thermal: none under "
                                                 "load"),
        "max_sw_power_cap_share": Threshold(nullable(NUM01), None, "hitting the power limit under a full GEMM load "
                                                                   "is normal: reported"),
    },
    cost=Cost("acc", fixed=0.1),  # its readings are the health window's (declared below)
    platforms=_WINDOW, faults=("throttle-power-brake",),
    unsupported={"Huawei": "the frequency-reduction reasons: no library of this version reads them from an Ascend NPU, "
                           "and `npu-smi info` does not show them"})

declare(
    "DEP-PERSIST", "Persistence mode as the profile expects", "suite extension (health)",
    level="quick", scope="accelerator", family="health", extension=True,
    thresholds={"expected": Threshold(BOOL, True, "persistence mode on (nvidia-persistenced), NVIDIA's data-centre "
                                                  "guidance")},
    cost=Cost("acc", fixed=0.1), platforms=_ALL, faults=("persistence-off",))

declare(
    "DEP-POWERCAP", "Enforced power limit equals the profile's TDP (read only)", "suite extension (health)",
    level="quick", scope="accelerator", family="health", extension=True,
    thresholds={"tolerance": Threshold(NUM01, 0.03, "enforced limit within 3% below the profile's TDP "
                                                    "(hardware.tdp_w)")},
    facts=lambda p: {"tdp_w": p.hardware.get("tdp_w")},
    cost=Cost("acc", fixed=0.1), platforms=_ALL, faults=("powercap-low",))

declare(
    "DEP-PCIE-ERRORS", "No new fatal/non-fatal AER errors or replays during the run", "suite extension (health)",
    level="quick", scope="accelerator", family="health", extension=True,
    thresholds={
        "max_new_fatal": Threshold(nullable(INT0), 0, "during the health window"),
        "max_new_nonfatal": Threshold(nullable(INT0), 0, "during the health window"),
        "max_new_correctable": Threshold(nullable(INT0), None, "correctable errors are reported, not judged"),
        "max_new_replays": Threshold(nullable(INT0), 0, "the link's replay counter"),
    },
    cost=Cost("acc", fixed=0.1), platforms=_WINDOW, faults=("aer-fatal",))

declare(
    "DEP-XID", "No critical XID event during the run", "suite extension (health)",
    level="quick", scope="accelerator", family="health", extension=True,
    note="XIDs that point at the hardware (NVIDIA's XID catalogue): 48 DBE, 61/62 microcontroller, 63/64 row "
         "remap / page retirement, 74 NVLink, 79 fallen off the bus, 92 high SBE rate, 94/95 contained / "
         "uncontained ECC, 119/120 GSP, 140 unrecovered ECC. Application XIDs (13, 31, 43, 45) are not critical.",
    thresholds={
        "critical_xids": Threshold({"type": "array", "items": INT1},
                                   [48, 61, 62, 63, 64, 74, 79, 92, 94, 95, 119, 120, 140], "see above"),
        "max_critical_events": Threshold(INT0, 0, "during the run"),
        "fail_on_history": Threshold(BOOL, False, "critical XIDs since boot but before the run: WARN"),
    },
    cost=Cost("acc", fixed=0.1), platforms=_WINDOW, faults=("xid-79",))

declare(
    "DEP-NVLINK-ERRORS", "No NVLink CRC, replay or recovery error counter grows during the health window",
    "suite extension (health)", level="quick", scope="accelerator", family="health", extension=True,
    note="Each active link's data-link error counters (NVML nvmlDeviceGetNvLinkErrorCounter; a submitted "
         "`nvidia-smi nvlink -e`), read before and after the health window's load. A single reading (submitted "
         "text, snapshot) shows counts since the counters were last reset: all zero passes, any other count cannot "
         "tell growth and is INCONCLUSIVE.",
    thresholds={
        "max_new_crc": Threshold(nullable(INT0), 0, "CRC errors of flits and of data, over all links"),
        "max_new_replay": Threshold(nullable(INT0), 0, "replays (a flit resent after its CRC failed)"),
        "max_new_recovery": Threshold(nullable(INT0), 0, "link recoveries (the link retrained)"),
    },
    cost=Cost("acc", fixed=0.1), platforms=_ALL, faults=("nvlink-crc",))

declare_condition(
    "health_window", "The health window: one loaded period per accelerator, clock-event reasons sampled under the "
                     "load, AER, replay and ECC counters read before and after, XID events watched",
    settings={
        "samples": Threshold(COUNT, 12, "clock-event reasons read 12 times, 0.25 s apart, after 1 s of load"),
        "interval_s": Threshold(bounded("number", 0, 60, exclusive_lo=True), 0.25, "seconds between readings"),
        "warmup_s": Threshold(bounded("number", 0, 600), 1.0, "load before the first reading"),
    },
    serves=("DEP-ECC", "DEP-THROTTLE", "DEP-PCIE-ERRORS", "DEP-XID", "DEP-NVLINK-ERRORS"),
    # a load start, the warm-up, the samples
    cost=Cost("acc", fixed=lambda th: 0.5 + th["warmup_s"] + th["samples"] * th["interval_s"], together=True))
