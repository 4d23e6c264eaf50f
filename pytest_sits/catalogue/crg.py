"""Compute-ready graph: CRG-NODE, CRG-EDGE, CRG-SYNC, CRG-JITTER (B §2.5)."""

from .base import BYTES, COUNT, POS, Cost, Threshold, Trials, bounded, declare, nullable


def _sync_trials(th):
    """One trial is one all-reduce: the profile's iteration count per look."""
    it = int(th["iterations"])
    return {"initial": it, "step": it, "cap": 3 * it, "minimum": min(it, 3)}


declare(
    "CRG-NODE", "Compute-graph node: dense GEMM TFLOPS per device (B: at most 128)", "B §2.5",
    level="standard", scope="accelerator", family="crg",
    thresholds={
        "max_tflops": Threshold(nullable(POS), 128, 'B §2.5: a graph node is "at most 128 TFLOPS-equivalent"; every '
                                                    "current data-centre GPU exceeds it, so GPU profiles state their "
                                                    "own bound"),
        "min_tflops": Threshold(nullable(POS), None, "a floor, where a profile sets one"),
        "size": Threshold(bounded("integer", 64, 32768), 8192,
                          "GEMM edge (8192^3: large enough to saturate tensor cores)"),
        "iterations": Threshold(COUNT, 20, "GEMMs per timed loop"),
        "dtypes": Threshold({"type": "array", "items": {"type": "string", "enum": ["float16", "bfloat16"]},
                             "minItems": 1}, ["float16", "bfloat16"], "the dtypes measured"),
    },
    facts=lambda p: {"datasheet_tflops": p.hardware.get("fp16_dense_tflops")},
    cost=Cost("acc", fixed=3.0, trial=0.06, together=True),
    trials=Trials("one timed loop of GEMMs per dtype", initial=5, step=5, cap=15, minimum=3),
    environment=True, platforms=("live", "sim"), faults=("crg-slow",))

declare(
    "CRG-EDGE", "Device-to-device edge bandwidth", "B §2.5",
    level="standard", scope="accelerator", family="crg",
    thresholds={
        "min_gbps": Threshold(nullable(POS), 2000, "B §2.5 (NVLink 5 class; B's 3.2 TB/s on H100 is a claim)"),
        "bytes": Threshold(BYTES, 268435456, "per copy"),
    },
    cost=Cost("pair", fixed=0.5, trial=0.003,
              apart="peer copies share the devices' links and switches: one pair at a time, or each pair would "
                    "measure a share"),
    trials=Trials("one copy each way of a pair", initial=7, step=7, cap=21, minimum=3),
    environment=True, platforms=("live", "sim", "evidence"), faults=("crg-slow",))

declare(
    "CRG-SYNC", "Cross-GPU memory synchronisation throughput (all-reduce bus bandwidth)", "B §2.5",
    level="standard", scope="accelerator", family="crg",
    thresholds={
        "min_tbps": Threshold(nullable(POS), 2.0, "B §2.5"),
        "bytes": Threshold(BYTES, 268435456, "per all-reduce between GPUs (NCCL)"),
        "host_bytes": Threshold(BYTES, 33554432, "per all-reduce between processes on a CPU host (gloo)"),
        "iterations": Threshold(COUNT, 5, "all-reduces per look"),
    },
    cost=Cost("host", trial=0.05, look=15.0),  # each look spawns the ranks
    trials=Trials("one all-reduce", derive=_sync_trials),
    environment=True, platforms=("live", "sim"), faults=("crg-slow",))

declare(
    "CRG-JITTER", "Node latency jitter", "B §2.5",
    level="standard", scope="accelerator", family="crg",
    thresholds={
        "max_ns": Threshold(POS, 2.5, "B §2.5: below any software timer's step: report-only unless a PTP clock "
                                      "resolves it"),
        "samples": Threshold(bounded("integer", 1, 100_000), 2000, "timer readings"),
    },
    cost=Cost("acc", fixed=1.0, apart="timer readings against the host's clock: another device's work would show as this one's jitter"),
    environment=True, platforms=("live", "sim"),
    no_fault="report-only where no hardware timestamp source resolves ±2.5 ns (every simulated and CPU host): its "
             "FAIL on a resolving clock is tested on data (tests/test_crg.py)")
