"""The faults a simulated machine can carry (``sim:PROFILE+fault,...``), each with what it does, and the drift
that fault ``drift`` puts on the simulated machine's figures."""

import os
import random
from typing import Dict, Optional

from .health import FAULTS as HEALTH_FAULTS

FAULTS: Dict[str, str] = {
    "missing-device": "one accelerator fewer than the profile expects",
    "wrong-model": "the last accelerator has another PCI device ID",
    "small-memory": "every accelerator reports half of its datasheet memory",
    "no-nvml": "NVML is not available (driver not loaded)",
    "switch": "a PCIe switch (upstream + downstream port) between each accelerator and its root port",
    "switch2": "two levels of PCIe switch between each accelerator and its root port",
    "link-degraded": "the first accelerator trained at one generation lower and half width, under load",
    "link-idle": "every accelerator link reads 2.5 GT/s (idle power saving)",
    "numa-unknown": "accelerators report NUMA node -1 on a two-node host",
    "nvlink-partial": "two accelerator pairs have no NVLink P2P path",
    "old-driver": "NVIDIA driver 535.104.05 with CUDA 12.2",
    "hostile-name": "accelerator names contain HTML (<script>) to test escaping",
    "membw-low": "device memory copies reach 40% of the datasheet bandwidth",
    "membw-slow": "device memory copies reach 80% of the datasheet bandwidth: above the bundled profiles' floors, "
                  "below the 90% of a healthy simulated node (a slow node of a fleet)",
    "hold-weak": "the host DRAM cannot be held in the band: STREAM reaches its peak, but the bandwidth injectors' "
                 "traffic tops out at 75% of it (MEM-BW-HOLD)",
    "thermal-hot": "cooling too weak: even idle, the simulated temperature settles above the band",
    "thermal-drift": "inlet temperature keeps rising: the simulated temperature never settles",
    "sensor-na": "the simulated temperature sensors return N/A after 100 s",
    "pcie-bw-low": "host<->device copies reach 30% of the link's rate",
    "ecc-uncorrectable": "the first accelerator reports 2 uncorrected ECC errors (volatile and aggregate)",
    "row-remap-pending": "the first accelerator has a row remap pending (it needs a reset)",
    "throttle-power-brake": "the first accelerator asserts HW slowdown and power brake while the load runs",
    "persistence-off": "persistence mode is off on every accelerator",
    "powercap-low": "the first accelerator's power limit was lowered to 70% of the profile's TDP",
    "aer-fatal": "the first accelerator logs one fatal AER error during the health window",
    "xid-79": "the first accelerator reports XID 79 (fallen off the bus) during the run and in the kernel log",
    "firmware-unlisted": "the first accelerator's VBIOS (96.00.00.00.99) is on no allow-list",
    "crg-slow": "GEMM at 30% of the simulated figure, device-to-device copies and all-reduce at 2%",
    "power-high": "the simulated device draws 125% of its TDP under load",
    "latency-high": "every simulated engine step is 20 times slower",
    "latency-marginal": "every simulated engine step is twice as slow: the P99 per token at 80% of the maximum sits "
                        "on the h100 profile's ceiling, above or below it from run to run",
    "sensor-lag": "the simulated power sensor's values are 5 sampling periods old",
    "sensor-dropout": "the simulated power sensor stops answering 40% into each run",
    "frag-high": "the simulated KV allocator leaves 12% of its slots (and 9% of reserved memory) unused",
    "sla-miss": "the first tenant's queries are slow (3x its P99 SLA) and 2% of them fail",
    "ttft-high": "the first tenant's first token arrives 400 ms late (SVC-SLA's TTFT target, where set)",
    "tpot-high": "the first tenant's tokens after the first come 50 ms apart (SVC-SLA's TPOT target, where set)",
    "peak-understated": "the simulated work counter reports 20 times the work done (ρ above the peak)",
    "coldstart-slow": "loading the weights takes 10 minutes on the simulated cold start",
    "probe-hang": "the first accelerator's health reads block for an hour, as a hung NVML call does",
    "drift": "the simulated machine's figures move between trials (the machine, not the devices): host DRAM "
             "bandwidth wanders up to -30%/+15% during a hold, every device, link and serving figure within "
             "+-5% from trial to trial (a new random walk each run)",
    **HEALTH_FAULTS,
}


class Drift:
    """The figures of a machine that moves under the measurement (fault ``drift``): a bounded random walk of the
    relative level, one step per trial, plus a little noise of its own.  Seeded from the operating system, so
    every run moves differently; without the fault every figure is the simulated machine's own (factor 1)."""

    def __init__(self, on: bool, bound: float = 0.05, step: float = 0.015, noise: float = 0.004,
                 seed: Optional[int] = None):
        self.on, self.bound, self.step, self.noise = on, bound, step, noise
        self.rng = random.Random(seed if seed is not None else int.from_bytes(os.urandom(8), "little"))
        self.level = 0.0

    def factor(self) -> float:
        """The machine's relative level for the next trial (1.0 without the fault)."""
        if not self.on:
            return 1.0
        self.level = max(-self.bound, min(self.bound, self.level + self.rng.gauss(0.0, self.step)))
        return 1.0 + self.level + self.rng.gauss(0.0, self.noise)
