"""The SITS2026 requirement catalogue: every requirement ID the suite knows.

Each entry says where the requirement comes from, at which run depth
(``quick``, ``standard``, ``full``) it runs, whether it concerns the host or
the accelerators, and the threshold keys a profile may set for it (with
their JSON-schema types).  The default *values* live in the bundled
``base`` profile, so that a lab reads and overrides them in one place.

``implemented`` is honest: a requirement whose conformance test does not
exist yet is listed in every report as NOT_IMPLEMENTED, never as passed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Tuple

LEVELS: Tuple[str, ...] = ("quick", "standard", "full")

NUM = {"type": "number"}
NUM01 = {"type": "number", "minimum": 0, "maximum": 1}
POS = {"type": "number", "exclusiveMinimum": 0}
NONNEG = {"type": "number", "minimum": 0}
INT0 = {"type": "integer", "minimum": 0}
INT1 = {"type": "integer", "minimum": 1}
BOOL = {"type": "boolean"}
STR = {"type": "string", "minLength": 1}


def _nullable(schema: Dict[str, Any]) -> Dict[str, Any]:
    out = dict(schema)
    out["type"] = [schema["type"], "null"]
    return out


@dataclass(frozen=True)
class Requirement:
    id: str
    title: str
    source: str
    level: str
    scope: str  # "host", "accelerator", "report"
    thresholds: Dict[str, Dict[str, Any]] = field(default_factory=dict)
    implemented: bool = False
    extension: bool = False  # a suite extension, not in the SITS2026 documents


WORKLOAD_SCHEMA: Dict[str, Any] = {
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
        "overhead_fraction": {"type": "number", "minimum": 0, "maximum": 2},
    },
}

CATALOGUE: Dict[str, Requirement] = {r.id: r for r in [
    Requirement("INV-DEVICES", "Accelerators present match the profile (model, count, memory)",
                "suite extension (inventory)", "quick", "accelerator",
                {"memory_tolerance": NUM01}, implemented=True, extension=True),
    Requirement("TOPO-PCIE-DIRECT", "Accelerators attach directly to a CPU root port (no PCIe switch)",
                "A §2.4", "quick", "accelerator", {"max_switch_ports": INT0}, implemented=True),
    Requirement("TOPO-PCIE-LINK", "PCIe link under load trains at the achievable speed and width",
                "suite extension (topology)", "quick", "accelerator",
                {"samples": INT1, "require_load": BOOL}, extension=True, implemented=True),
    Requirement("TOPO-PCIE-BW", "Host<->device bandwidth against the link's theoretical rate, under the hold",
                "suite extension (bandwidth)", "standard", "accelerator",
                {"min_efficiency": NUM01, "bytes": INT1}, implemented=True, extension=True),
    Requirement("TOPO-NUMA-BIND", "Load and measurement bound to the accelerator's NUMA node",
                "A §2.4", "quick", "accelerator", {"require_known_node": BOOL}, implemented=True),
    Requirement("MEM-BW-HOLD", "Host DRAM bandwidth occupancy held at 85-92% during measurements",
                "A §2.4", "standard", "host",
                {"band_low": NUM01, "band_high": NUM01, "window_ms": POS,
                 "min_in_band_share": NUM01, "duration_s": POS}, implemented=True),
    Requirement("THERM-GPU-STEADY", "GPU die temperature in band and steady before measuring",
                "A §2.4", "full", "accelerator",
                {"band_low_c": NUM, "band_high_c": NUM, "window_s": POS,
                 "tolerance_c": POS, "timeout_s": POS}, implemented=True),
    Requirement("THERM-CPU-STEADY", "CPU package temperature in band and steady before measuring",
                "A §2.4", "full", "host",
                {"band_low_c": NUM, "band_high_c": NUM, "window_s": POS,
                 "tolerance_c": POS, "timeout_s": POS}, implemented=True),
    Requirement("PLP-SAMPLE", "Power, latency and load sampled together", "A §1, §2.1",
                "standard", "accelerator", {"max_skew_periods": POS}),
    Requirement("PLP-PPL", "Peak processing load over a sliding window", "A §2.1",
                "standard", "accelerator", {"window_ms": POS}),
    Requirement("PLP-POWER", "Power ceiling while load stays under a bound", "A §2.2",
                "standard", "accelerator", {"max_power_w": POS, "at_load_max": NUM01}),
    Requirement("PLP-LATENCY", "Latency ceiling while load stays under a bound", "A §2.2",
                "standard", "accelerator", {"max_latency_us": POS, "at_load_max": NUM01}),
    Requirement("MEM-CAPACITY", "Accelerator memory holds the workload's weights and full KV cache",
                "A §2.2", "quick", "accelerator",
                {"min_gb_per_card": NONNEG, "workload": WORKLOAD_SCHEMA}, implemented=True),
    Requirement("MEM-BW-EFFICIENCY", "Device memory bandwidth as a share of the datasheet peak",
                "A §2.2", "standard", "accelerator", {"min_efficiency": _nullable(NUM01)}, implemented=True),
    Requirement("LINK-NVLINK-MESH", "NVLink/XGMI full mesh between accelerators", "A §2.2",
                "quick", "accelerator", {"required": BOOL}, implemented=True),
    Requirement("EQ-PRECISION", "Outputs match the reference platform within tolerance", "A §4.4",
                "standard", "accelerator",
                {"rtol_fp16": POS, "risk_class": {"type": "string", "enum": ["high", "default", "low"]},
                 "atol": {"type": "object", "additionalProperties": False,
                          "properties": {"high": POS, "default": POS, "low": POS}}}, implemented=True),
    Requirement("EQ-THROUGHPUT", "Throughput fluctuation (coefficient of variation)", "A §4.4",
                "standard", "accelerator", {"max_cv": POS}, implemented=True),
    Requirement("EQ-LATENCY", "Latency beside the reference platform", "A §4.4",
                "standard", "accelerator", {"max_ratio": _nullable(POS)}, implemented=True),
    Requirement("EQ-RESOURCE", "Resource use beside the reference platform", "A §4.4",
                "standard", "accelerator", {"max_ratio": _nullable(POS)}, implemented=True),
    Requirement("SEC-FIRMWARE", "Driver, VBIOS and firmware versions on an allow-list", "A §4.4",
                "quick", "accelerator",
                {"allowed_driver": {"type": "array", "items": STR},
                 "allowed_vbios": {"type": "array", "items": STR}}),
    Requirement("SEC-TEE", "Trusted-execution capability matrix (report only)", "A §4.4",
                "quick", "report", {}),
    Requirement("CRG-NODE", "Compute-graph node at most 128 TFLOPS-equivalent", "B §2.5",
                "standard", "accelerator", {"max_tflops": POS}),
    Requirement("CRG-EDGE", "Device-to-device edge bandwidth", "B §2.5",
                "standard", "accelerator", {"min_gbps": POS}),
    Requirement("CRG-SYNC", "Cross-GPU memory synchronisation throughput", "B §2.5",
                "standard", "accelerator", {"min_tbps": POS}),
    Requirement("CRG-JITTER", "Node latency jitter", "B §2.5", "standard", "accelerator",
                {"max_ns": POS}),
    Requirement("SVC-SLA", "Per-tenant P99 latency, throughput and error rate", "B §3.2",
                "full", "accelerator", {"p99_ms": POS, "min_rps": POS, "max_error_rate": NUM01}),
    Requirement("SVC-FRAG", "Device-memory fragmentation under paged KV cache", "B §3.2; A §1",
                "standard", "accelerator", {"max_fraction": NUM01}),
    Requirement("SVC-COLDSTART", "Cold start: model load to first token", "A §4.3",
                "standard", "accelerator", {"max_s": _nullable(POS)}),
    Requirement("DEP-DRIVER", "Driver and runtime version floor", "B §4.1", "quick", "accelerator",
                {"min_nvidia_driver": STR, "min_cuda": STR}, implemented=True),
]}

THRESHOLD_REQUIREMENTS: List[str] = list(CATALOGUE)


def level_rank(level: str) -> int:
    return LEVELS.index(level)


def threshold_schema() -> Dict[str, Any]:
    """JSON schema of the ``thresholds:`` section of a profile."""
    props = {}
    for req in CATALOGUE.values():
        props[req.id] = {
            "type": "object",
            "additionalProperties": False,
            "properties": dict(req.thresholds),
            "description": f"{req.title} ({req.source})",
        }
    return {"type": "object", "additionalProperties": False, "properties": props}
