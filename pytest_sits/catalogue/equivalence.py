"""Cross-platform equivalence: EQ-PRECISION, EQ-THROUGHPUT, EQ-LATENCY, EQ-RESOURCE (A §4.4)."""

from .base import POS, Cost, Threshold, Trials, declare, enum, nullable

#: The operator corpus runs on torch devices (the CPU where no accelerator is present), on every platform that
#: has a device to run it; the simulated machine has none of its own, so no sim fault can fail it.
_NO_FAULT = ("the operator corpus runs on torch's devices, not on the simulated machine; its failing cases are "
             "tested on perturbed outputs and rates (tests/test_equivalence.py)")

declare(
    "EQ-PRECISION", "Outputs match the reference platform within tolerance", "A §4.4",
    level="standard", scope="accelerator", family="equivalence",
    thresholds={
        "rtol_fp16": Threshold(POS, 0.003, "A §4.4: FP16 relative error <= 0.3%"),
        "risk_class": Threshold(enum("high", "default", "low"), "default", "the task's risk class picks the atol"),
        "atol": Threshold({"type": "object", "additionalProperties": False,
                           "properties": {"high": POS, "default": POS, "low": POS}},
                          {"high": 1.0e-4, "default": 1.0e-3, "low": 1.0e-2},
                          "A §4.4: absolute tolerance by risk class"),
    },
    cost=Cost("host", fixed=21.0),  # 36 operator/dtype pairs on each device, torch loaded
    # evidence: an MLPerf submission's accuracy.txt against its benchmark's targets
    platforms=("live", "sim", "evidence"), no_fault=_NO_FAULT)

declare(
    "EQ-THROUGHPUT", "Throughput fluctuation (coefficient of variation)", "A §4.4",
    level="standard", scope="accelerator", family="equivalence",
    thresholds={"max_cv": Threshold(POS, 0.05, "A §4.4: throughput fluctuation below 5%")},
    cost=Cost("host", fixed=11 * 1.5, trial=11 * 0.01),  # 11 operators
    trials=Trials("one benchmark round", initial=25, step=0, cap=25, minimum=10),
    environment=True, platforms=("live", "sim"), no_fault=_NO_FAULT)

declare(
    "EQ-LATENCY", "Latency beside the reference platform", "A §4.4",
    level="standard", scope="accelerator", family="equivalence",
    thresholds={"max_ratio": Threshold(nullable(POS), None, "the documents set none: reported unless a profile "
                                                            "sets the allowed ratio")},
    cost=Cost("host", fixed=10.0), platforms=("live", "sim"), no_fault=_NO_FAULT)

declare(
    "EQ-RESOURCE", "Resource use beside the reference platform", "A §4.4",
    level="standard", scope="accelerator", family="equivalence",
    thresholds={"max_ratio": Threshold(nullable(POS), None, "the documents set none: reported unless a profile "
                                                            "sets the allowed ratio")},
    cost=Cost("host", fixed=10.0), platforms=("live", "sim"), no_fault=_NO_FAULT)
