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

# Every number a profile may set has an upper bound, so that no profile the schema accepts can hang or exhaust a
# run (tests/test_fuzz_profiles.py checks that none is unbounded).  The general types carry a ceiling far above
# any real figure; counts, durations and sizes, which decide how long a run takes and how much it allocates,
# carry their own (COUNT, SECONDS, TIMEOUT_S, BYTES).
CEILING = 1e12
INT_CEILING = 2**31 - 1
NUM = {"type": "number", "minimum": -CEILING, "maximum": CEILING}
NUM01 = {"type": "number", "minimum": 0, "maximum": 1}
POS = {"type": "number", "exclusiveMinimum": 0, "maximum": CEILING}
NONNEG = {"type": "number", "minimum": 0, "maximum": CEILING}
INT0 = {"type": "integer", "minimum": 0, "maximum": INT_CEILING}
INT1 = {"type": "integer", "minimum": 1, "maximum": INT_CEILING}
BOOL = {"type": "boolean"}
STR = {"type": "string", "minLength": 1, "maxLength": 1000}
COUNT = {"type": "integer", "minimum": 1, "maximum": 1000}             # samples, iterations, repetitions
SECONDS = {"type": "number", "exclusiveMinimum": 0, "maximum": 3600}    # a measurement's duration or window
TIMEOUT_S = {"type": "number", "exclusiveMinimum": 0, "maximum": 14400}  # how long a condition may take to settle
BYTES = {"type": "integer", "minimum": 1, "maximum": 64 << 30}          # a buffer the suite allocates
CELSIUS = {"type": "number", "minimum": -40, "maximum": 150}


def _nullable(schema: Dict[str, Any]) -> Dict[str, Any]:
    out = dict(schema)
    out["type"] = [schema["type"], "null"]
    return out


#: One component's firmware allow-list: entries of an exact ``version`` or a ``min``/``max`` range, each with
#: the reason it is trusted.
ALLOW_LIST: Dict[str, Any] = {
    "type": "array",
    "items": {"type": "object", "additionalProperties": False, "required": ["reason"],
              "properties": {"version": STR, "min": STR, "max": STR, "reason": {"type": "string", "minLength": 10}},
              "anyOf": [{"required": ["version"]}, {"required": ["min"]}, {"required": ["max"]}]},
}


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

def _bounded(kind: str, lo: float, hi: float, exclusive_lo: bool = False) -> Dict[str, Any]:
    out: Dict[str, Any] = {"type": kind, "maximum": hi}
    out["exclusiveMinimum" if exclusive_lo else "minimum"] = lo
    return out


#: The built-in model of the inference-under-load requirements (bounded: an absurd size cannot be asked for).
MODEL_SCHEMA: Dict[str, Any] = {
    "type": "object", "additionalProperties": False,
    "properties": {
        "vocab": _bounded("integer", 16, 262144), "d_model": _bounded("integer", 16, 16384),
        "n_layers": _bounded("integer", 1, 128), "n_heads": _bounded("integer", 1, 256),
        "d_ff": _bounded("integer", 16, 65536), "max_seq_tokens": _bounded("integer", 16, 32768),
        "block_tokens": _bounded("integer", 1, 1024), "pool_blocks": _bounded("integer", 8, 4194304),
        "max_batch": _bounded("integer", 1, 4096), "dtype": {"type": "string", "enum": ["float32", "float16", "bfloat16"]},
        "seed": INT0, "threads": _nullable(_bounded("integer", 1, 1024)),
    },
}
_TOKEN_RANGE = {"type": "array", "items": _bounded("integer", 1, 32768), "minItems": 2, "maxItems": 2}
#: The query mix LoadGen draws from (prompt and output lengths, seeded).
INFER_WORKLOAD_SCHEMA: Dict[str, Any] = {
    "type": "object", "additionalProperties": False,
    "properties": {"samples": _bounded("integer", 8, 100000), "prompt_tokens": _TOKEN_RANGE,
                   "output_tokens": _TOKEN_RANGE},
}
TENANT_SCHEMA: Dict[str, Any] = {
    "type": "object", "additionalProperties": False, "required": ["name", "share"],
    "properties": {"name": STR, "share": _bounded("number", 0, 1, exclusive_lo=True), "p99_ms": POS, "min_rps": POS,
                   "max_error_rate": NUM01, "ttft_p99_ms": _nullable(POS), "tpot_p99_ms": _nullable(POS)},
}

CATALOGUE: Dict[str, Requirement] = {r.id: r for r in [
    Requirement("INV-DEVICES", "Accelerators present match the profile (model, count, memory)",
                "suite extension (inventory)", "quick", "accelerator",
                {"memory_tolerance": NUM01}, implemented=True, extension=True),
    Requirement("TOPO-PCIE-DIRECT", "Accelerators attach directly to a CPU root port (no PCIe switch)",
                "A §2.4", "quick", "accelerator", {"max_switch_ports": {"type": "integer", "minimum": 0, "maximum": 64}}, implemented=True),
    Requirement("TOPO-PCIE-LINK", "PCIe link under load trains at the achievable speed and width",
                "suite extension (topology)", "quick", "accelerator",
                {"samples": COUNT, "require_load": BOOL}, extension=True, implemented=True),
    Requirement("TOPO-PCIE-BW", "Host<->device bandwidth against the link's theoretical rate, under the hold",
                "suite extension (bandwidth)", "standard", "accelerator",
                {"min_efficiency": NUM01, "bytes": BYTES}, implemented=True, extension=True),
    Requirement("TOPO-NUMA-BIND", "Load and measurement bound to the accelerator's NUMA node",
                "A §2.4", "quick", "accelerator", {"require_known_node": BOOL}, implemented=True),
    Requirement("MEM-BW-HOLD", "Host DRAM bandwidth occupancy held at 85-92% during measurements",
                "A §2.4", "standard", "host",
                {"band_low": NUM01, "band_high": NUM01, "window_ms": {"type": "number", "minimum": 10, "maximum": 10000},
                 "min_in_band_share": NUM01, "duration_s": SECONDS}, implemented=True),
    Requirement("THERM-GPU-STEADY", "GPU die temperature in band and steady before measuring",
                "A §2.4", "full", "accelerator",
                {"band_low_c": CELSIUS, "band_high_c": CELSIUS, "window_s": SECONDS,
                 "tolerance_c": {"type": "number", "exclusiveMinimum": 0, "maximum": 10}, "timeout_s": TIMEOUT_S}, implemented=True),
    Requirement("THERM-CPU-STEADY", "CPU package temperature in band and steady before measuring",
                "A §2.4", "full", "host",
                {"band_low_c": CELSIUS, "band_high_c": CELSIUS, "window_s": SECONDS,
                 "tolerance_c": {"type": "number", "exclusiveMinimum": 0, "maximum": 10}, "timeout_s": TIMEOUT_S}, implemented=True),
    Requirement("PLP-SAMPLE", "Power, latency and load sampled together", "A §1, §2.1",
                "standard", "accelerator", {"max_skew_periods": POS, "period_ms": _bounded("number", 1, 1000)},
                implemented=True),
    Requirement("PLP-PPL", "Peak processing load over a sliding window", "A §2.1",
                "standard", "accelerator",
                {"window_ms": _bounded("number", 1, 10000), "peak_tflops": _nullable(POS), "model": MODEL_SCHEMA,
                 "workload": INFER_WORKLOAD_SCHEMA}, implemented=True),
    Requirement("PLP-POWER", "Power ceiling while load stays under a bound", "A §2.2",
                "standard", "accelerator", {"max_power_w": _nullable(POS), "at_load_max": NUM01}, implemented=True),
    Requirement("PLP-LATENCY", "Latency ceiling while load stays under a bound", "A §2.2",
                "standard", "accelerator",
                {"max_latency_us": _nullable(POS), "at_load_max": NUM01,
                 "metric": {"type": "string", "enum": ["query", "token"]},
                 "sweep_fractions": {"type": "array", "items": _bounded("number", 0, 1.5, exclusive_lo=True),
                                     "minItems": 1, "maxItems": 10},
                 "point_s": _bounded("number", 1, 600)}, implemented=True),
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
    Requirement("SEC-FIRMWARE", "Driver, VBIOS, InfoROM and GSP firmware versions on an allow-list", "A §4.4",
                "quick", "accelerator",
                {"allowed": {"type": "object", "additionalProperties": False,
                             "properties": {c: ALLOW_LIST for c in ("driver", "vbios", "inforom", "gsp")}},
                 "require_signed_module": BOOL}, implemented=True),
    Requirement("SEC-TEE", "Trusted-execution capability matrix (report only)", "A §4.4",
                "quick", "report", {"required": {"type": "array", "items": STR}}, implemented=True),
    Requirement("CRG-NODE", "Compute-graph node: dense GEMM TFLOPS per device (B: at most 128)", "B §2.5",
                "standard", "accelerator",
                {"max_tflops": _nullable(POS), "min_tflops": _nullable(POS),
                 "size": {"type": "integer", "minimum": 64, "maximum": 32768}, "iterations": COUNT,
                 "dtypes": {"type": "array", "items": {"type": "string", "enum": ["float16", "bfloat16"]},
                            "minItems": 1}}, implemented=True),
    Requirement("CRG-EDGE", "Device-to-device edge bandwidth", "B §2.5",
                "standard", "accelerator", {"min_gbps": _nullable(POS), "bytes": BYTES}, implemented=True),
    Requirement("CRG-SYNC", "Cross-GPU memory synchronisation throughput (all-reduce bus bandwidth)", "B §2.5",
                "standard", "accelerator",
                {"min_tbps": _nullable(POS), "bytes": BYTES, "host_bytes": BYTES, "iterations": COUNT},
                implemented=True),
    Requirement("CRG-JITTER", "Node latency jitter", "B §2.5", "standard", "accelerator",
                {"max_ns": POS, "samples": {"type": "integer", "minimum": 1, "maximum": 100_000}}, implemented=True),
    Requirement("SVC-SLA", "Per-tenant P99 latency, throughput and error rate", "B §3.2",
                "full", "accelerator",
                {"p99_ms": POS, "min_rps": POS, "max_error_rate": NUM01, "ttft_p99_ms": _nullable(POS),
                 "tpot_p99_ms": _nullable(POS),
                 "tenants": {"type": "array", "items": TENANT_SCHEMA, "minItems": 1, "maxItems": 16},
                 "target_qps": _bounded("number", 0.1, 100000), "duration_s": _bounded("number", 1, 3600),
                 "timeout_s": _bounded("number", 0.1, 600), "max_inflight": _nullable(_bounded("integer", 1, 512)),
                 "api": {"type": "string", "enum": ["completions", "chat"]}, "stream": BOOL,
                 "model_name": _nullable(STR), "workload": INFER_WORKLOAD_SCHEMA}, implemented=True),
    Requirement("SVC-FRAG", "Device-memory fragmentation under paged KV cache", "B §3.2; A §1",
                "standard", "accelerator",
                {"max_fraction": NUM01, "queries": _bounded("integer", 8, 100000), "workload": INFER_WORKLOAD_SCHEMA},
                implemented=True),
    Requirement("SVC-COLDSTART", "Cold start: model load to first token", "A §4.3",
                "standard", "accelerator",
                {"max_s": _nullable(POS), "page_cache": {"type": "string", "enum": ["asis", "evict_files", "drop_all"]},
                 "timeout_s": _bounded("number", 5, 1800)}, implemented=True),
    Requirement("DEP-DRIVER", "Driver and runtime version floor", "B §4.1", "quick", "accelerator",
                {"min_nvidia_driver": STR, "min_cuda": STR}, implemented=True),
    Requirement("DEP-ECC", "ECC enabled; corrected and uncorrected error counts within limits",
                "suite extension (health)", "quick", "accelerator",
                {"require_enabled": BOOL, "max_volatile_uncorrected": _nullable(INT0),
                 "max_aggregate_uncorrected": _nullable(INT0), "max_volatile_corrected": _nullable(INT0),
                 "max_aggregate_corrected": _nullable(INT0)}, implemented=True, extension=True),
    Requirement("DEP-ROWREMAP", "No pending row remap or page retirement, no remap failure",
                "suite extension (health)", "quick", "accelerator",
                {"max_uncorrectable_remaps": _nullable(INT0), "max_correctable_remaps": _nullable(INT0),
                 "max_retired_pages": _nullable(INT0)}, implemented=True, extension=True),
    Requirement("DEP-THROTTLE", "No HW slowdown, thermal or power-brake clock events under load",
                "suite extension (health)", "quick", "accelerator",
                {"samples": COUNT, "interval_s": {"type": "number", "exclusiveMinimum": 0, "maximum": 60},
                 "warmup_s": {"type": "number", "minimum": 0, "maximum": 600}, "max_fault_share": NUM01,
                 "max_sw_power_cap_share": _nullable(NUM01)}, implemented=True, extension=True),
    Requirement("DEP-PERSIST", "Persistence mode as the profile expects", "suite extension (health)", "quick",
                "accelerator", {"expected": BOOL}, implemented=True, extension=True),
    Requirement("DEP-POWERCAP", "Enforced power limit equals the profile's TDP (read only)",
                "suite extension (health)", "quick", "accelerator", {"tolerance": NUM01},
                implemented=True, extension=True),
    Requirement("DEP-PCIE-ERRORS", "No new fatal/non-fatal AER errors or replays during the run",
                "suite extension (health)", "quick", "accelerator",
                {"max_new_fatal": _nullable(INT0), "max_new_nonfatal": _nullable(INT0),
                 "max_new_correctable": _nullable(INT0), "max_new_replays": _nullable(INT0)},
                implemented=True, extension=True),
    Requirement("DEP-XID", "No critical XID event during the run", "suite extension (health)", "quick",
                "accelerator",
                {"critical_xids": {"type": "array", "items": INT1}, "max_critical_events": INT0,
                 "fail_on_history": BOOL}, implemented=True, extension=True),
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
