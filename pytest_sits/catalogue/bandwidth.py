"""Bandwidth: MEM-BW-HOLD, MEM-BW-EFFICIENCY, TOPO-PCIE-BW."""

import math

from .base import BYTES, NUM01, SECONDS, Cost, Threshold, Trials, bounded, declare, nullable


def _hold_trials(th):
    """The hold's trials are seconds of hold (its windows are decided in batch means)."""
    d = int(math.ceil(float(th["duration_s"])))
    return {"initial": d, "step": max(1, d // 2), "cap": 2 * d, "minimum": d}


declare(
    "MEM-BW-HOLD", "Host DRAM bandwidth occupancy held at 85-92% during measurements", "A §2.4",
    level="standard", scope="host", family="bandwidth",
    thresholds={
        "band_low": Threshold(NUM01, 0.85, "A §2.4"),
        "band_high": Threshold(NUM01, 0.92, "A §2.4"),
        "window_ms": Threshold(bounded("number", 10, 10000), 100, "one occupancy reading per window"),
        "min_in_band_share": Threshold(NUM01, 0.95, "share of windows that must be in the band"),
        "duration_s": Threshold(SECONDS, 30, "how long the hold is judged"),
    },
    cost=Cost("host", fixed=8.0, trial=1.0, sim=2.0),  # the STREAM peak and its re-measurements; simulated: its windows
    trials=Trials("one second of hold (windows decided in batch means)", derive=_hold_trials),
    platforms=("live", "sim"), faults=("hold-weak",))

declare(
    "MEM-BW-EFFICIENCY", "Device memory bandwidth as a share of the datasheet peak", "A §2.2",
    level="standard", scope="accelerator", family="bandwidth",
    thresholds={"min_efficiency": Threshold(nullable(NUM01), None, "the documents set none (A reports H20 at "
                                                                   "57%); profiles set the floor")},
    facts=lambda p: {"datasheet_gbps": p.hardware.get("memory_bandwidth_gbps")},
    cost=Cost("acc", fixed=2.0, trial=0.01, together=True),
    trials=Trials("one on-device copy", initial=7, step=7, cap=21, minimum=3),
    environment=True, platforms=("live", "sim"), faults=("membw-low",))

declare(
    "TOPO-PCIE-BW", "Host<->device bandwidth against the link's theoretical rate, under the hold",
    "suite extension (bandwidth)", level="standard", scope="accelerator", family="bandwidth", extension=True,
    note="Suite extension: pinned host<->device copies reach this share of the link's rate after line encoding "
         "(Gen4 x16: 31.5 GB/s, Gen5 x16: 63.0 GB/s), measured under MEM-BW-HOLD.",
    thresholds={"min_efficiency": Threshold(NUM01, 0.70, "share of the link's rate after line encoding"),
                "bytes": Threshold(BYTES, 268435456, "per copy")},
    cost=Cost("acc", fixed=3.0, trial=0.02,
              apart="host<->device copies of devices on one root complex share its uplink and the host's memory: "
                    "measured one device at a time, or each would measure a share"),
    trials=Trials("one pinned copy each way", initial=7, step=7, cap=21, minimum=3),
    # evidence: a submitted nvbandwidth text's host<->device figures (FAIL below the floor, never PASS)
    platforms=("live", "sim", "evidence"), faults=("pcie-bw-low",))
