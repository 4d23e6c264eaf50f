"""Inventory: INV-DEVICES, MEM-CAPACITY, DEP-DRIVER."""

from .base import INT1, NONNEG, NUM01, POS, STR, Cost, Threshold, bounded, declare, nullable

#: The workload whose weights and KV cache must fit (MEM-CAPACITY).
WORKLOAD_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "name": STR,
        "params_billion": POS,
        "layers": INT1,
        "kv_heads": INT1,
        "head_dim": INT1,
        "context_tokens": INT1,
        "batch": INT1,
        "dtype_bytes": {"type": "number", "enum": [0.5, 1, 2, 4]},
        "kv_dtype_bytes": {"type": "number", "enum": [0.5, 1, 2, 4]},
        "tensor_parallel": INT1,
        "overhead_fraction": bounded("number", 0, 2),
    },
}

declare(
    "INV-DEVICES", "Accelerators present match the profile (model, count, memory)", "suite extension (inventory)",
    level="quick", scope="accelerator", family="inventory", extension=True,
    thresholds={"memory_tolerance": Threshold(
        NUM01, 0.10, "NVML reports usable memory: ECC and the driver's reservation take a few percent (an L40S "
                     "with ECC on shows 46068 MiB of its 48 GiB, -6.3%)")},
    facts=lambda p: {"expected": p.expected()},
    cost=Cost("host", fixed=0.5), platforms=("live", "snapshot", "evidence", "sim"),
    faults=("missing-device", "wrong-model", "small-memory"),
    # the memory part only: model and count come from sysfs for every vendor
    unsupported={"Huawei": "the memory size: no library of this version reads it from an Ascend NPU on the machine "
                           "(a submitted `npu-smi info` text is read for it)"})

declare(
    "MEM-CAPACITY", "Accelerator memory holds the workload's weights and full KV cache", "A §2.2",
    level="quick", scope="accelerator", family="inventory",
    thresholds={
        "min_gb_per_card": Threshold(nullable(NONNEG), None,
                                     "the workload's need decides; a flat floor per card only where a profile sets "
                                     "one"),
        "workload": Threshold(WORKLOAD_SCHEMA, {
            "name": "Llama-3-70B", "params_billion": 70.55, "layers": 80, "kv_heads": 8, "head_dim": 128,
            "context_tokens": 4096, "batch": 1, "dtype_bytes": 2, "kv_dtype_bytes": 2, "tensor_parallel": 2,
            "overhead_fraction": 0.125},
            "Llama-3-70B (config.json of meta-llama/Meta-Llama-3-70B) in FP16 on two cards: A §2.2's workload, "
            "whose need is its 80 GB per card",
            items={"context_tokens": "A's table is for batch 1, 4K context", "dtype_bytes": "FP16",
                   "overhead_fraction": "activations, runtime context, allocator slack: with it the FP16 70B "
                                        "workload at TP=2 needs 80.1 GB, A §2.2's \"at least 80 GB of VRAM per card\""}),
    },
    cost=Cost("host", fixed=0.2), platforms=("live", "snapshot", "evidence", "sim"), faults=("small-memory",),
    unsupported={"Huawei": "the memory size: no library of this version reads it from an Ascend NPU on the machine "
                           "(a submitted `npu-smi info` text is read for it)"})

declare(
    "DEP-DRIVER", "Driver and runtime version floor", "B §4.1",
    level="quick", scope="accelerator", family="inventory",
    thresholds={"min_nvidia_driver": Threshold(STR, "550", "B §4.1"),
                "min_cuda": Threshold(STR, "12.6", "B §4.1")},
    cost=Cost("host", fixed=0.2), platforms=("live", "snapshot", "evidence", "sim"), faults=("old-driver",))
