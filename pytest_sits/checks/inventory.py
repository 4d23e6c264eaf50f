"""INV-DEVICES, MEM-CAPACITY and DEP-DRIVER: what is installed, and is it enough."""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Tuple, cast

from . import Finding, check
from ..verdict import FAIL, INCONCLUSIVE, PASS, WARN, Verdict

GIB = 1024 ** 3
GB = 1000 ** 3


def _group(accs: List[Dict[str, Any]]) -> str:
    counts: Dict[str, int] = {}
    for a in accs:
        pid = a.get("pci_id") or "PCI ID not in the texts"
        key = f"{a.get('display_name') or pid} ({pid})" if a.get("name") else (a.get("display_name") or pid)
        counts[key] = counts.get(key, 0) + 1
    return ", ".join(f"{n} × {k}" for k, n in counts.items())


def found_text(accs: List[Dict[str, Any]], vendor: Optional[str] = None) -> str:
    if accs:
        return "found " + _group(accs)
    return f"found no {vendor} device" if vendor and vendor not in ("any",) else "found no accelerator"


def expected_vs_found(expected: Dict[str, Any], accs: List[Dict[str, Any]]) -> str:
    """'profile expects 8 × H100 SXM5 (10de:2330); found no NVIDIA device' - the reason an accelerator
    requirement cannot run, and the start of INV-DEVICES's mismatch message."""
    return f"profile expects {expected['describe']}; {found_text(accs, expected.get('vendor'))}"


def is_profiled(acc: Dict[str, Any], expected: Dict[str, Any]) -> bool:
    """Whether an accelerator is the profile's model: its PCI ID among the profile's; where no text gives its PCI
    ID (``npu-smi info`` and ``mthreads-gmi`` print a name only), its vendor and model name exactly as the
    profile's identity names them."""
    if acc.get("pci_id"):
        return acc["pci_id"] in (expected.get("pci_ids") or [])
    return (bool(acc.get("name")) and acc.get("name") == expected.get("model")
            and bool(acc.get("vendor")) and acc.get("vendor") == expected.get("vendor"))


def named_only(acc: Dict[str, Any]) -> bool:
    """An accelerator whose tool names its model but gives no PCI ID (``npu-smi info``, ``mthreads-gmi``): its
    name is its model.  An NVIDIA or AMD GPU without a PCI ID is one a partial text names (``nvidia-smi nvlink
    -s``): its model is not known from it."""
    return not acc.get("pci_id") and bool(acc.get("name")) and acc.get("vendor") not in (None, "NVIDIA", "AMD")


def absent_reason(expected: Dict[str, Any], accs: List[Dict[str, Any]]) -> Optional[str]:
    """The SKIP reason for accelerator requirements, or None when devices are there."""
    matching = [a for a in accs if is_profiled(a, expected)]
    if matching:
        return None
    if not expected.get("count"):
        return "the profile expects no accelerator; " + found_text(accs)
    return expected_vs_found(expected, accs)


@check("INV-DEVICES", default_subject="accelerators")
def check_devices(evidence: Dict[str, Any], thresholds: Dict[str, Any], f: Finding) -> Verdict:
    """INV-DEVICES: the accelerators present are the profile's model, count and memory.

    evidence: ``accelerators`` (the inventory's), ``nvml`` (facts); thresholds: ``expected`` (the profile's
    identity: count, pci_ids, model, memory_gb, describe) and ``memory_tolerance``."""
    accelerators, nvml, expected = evidence["accelerators"], evidence.get("nvml") or {}, thresholds["expected"]
    want_n = int(expected.get("count", 0))
    ids = set(expected.get("pci_ids", []))
    matching = [a for a in accelerators if is_profiled(a, expected)]
    others = [a for a in accelerators if not is_profiled(a, expected)]
    ev = {"expected": expected, "found": [{k: a.get(k) for k in ("bdf", "pci_id", "name", "memory_total_bytes",
                                                                 "memory_source")} for a in accelerators],
          "coverage": evidence.get("coverage"),
          "nvml": {k: nvml.get(k) for k in ("available", "reason", "driver_version")}}
    threshold = f"{want_n} × {expected.get('model', '?')}"
    f.set(unit="devices", evidence=ev)
    if evidence.get("coverage") is not None:
        return _submitted_devices(evidence, thresholds, f, matching, others, want_n, threshold)
    if want_n == 0:
        if not accelerators:
            return f(PASS, "the profile expects no accelerator and none was found", measured=0, threshold=0)
        return f(FAIL, f"the profile expects no accelerator; {found_text(accelerators)}", measured=len(accelerators),
                 threshold=0, remediation="run with the profile of these accelerators (--sits-profile NAME), or write "
                                          "one that extends `base` with their PCI IDs")
    f.set(threshold=threshold, measured=len(matching))
    if len(matching) != want_n or others:
        problems = []
        if len(matching) != want_n:
            problems.append(f"{len(matching)} of {want_n} expected")
        if others:
            problems.append(f"unexpected: {_group(others)}")
        return f(FAIL, f"{expected_vs_found(expected, accelerators)} ({'; '.join(problems)})",
                 remediation="check that every card is seated and enumerated (`lspci -d "
                             f"{sorted(ids)[0] if ids else ''}`), that the profile is the right one, or set "
                             "identity.count for this system in a profile that extends it")
    mem_gb = expected.get("memory_gb")
    if not mem_gb:
        return f(PASS, f"{want_n} × {expected.get('model')} present (the profile gives no memory size to compare)")
    tol = float(thresholds["memory_tolerance"])
    floor = mem_gb * GIB * (1 - tol)
    unknown = [a for a in matching if a.get("memory_total_bytes") is None]
    small = [a for a in matching if a.get("memory_total_bytes") is not None and a["memory_total_bytes"] < floor]
    sizes = [a["memory_total_bytes"] for a in matching if a.get("memory_total_bytes") is not None]
    measured_mem = round(min(sizes) / GIB, 2) if sizes else None
    f.set(threshold=f">= {mem_gb} GiB - {tol:.0%} = {floor / GIB:.1f} GiB")
    if small:
        detail = ", ".join(f"{a['bdf']} {a['memory_total_bytes'] / GIB:.1f} GiB" for a in small)
        return f(FAIL, f"{len(small)} card(s) report less memory than the profile's {mem_gb} GB: {detail}",
                 measured=measured_mem, unit="GiB",
                 remediation="check the model and SKU (a smaller-memory variant), MIG or vGPU partitioning, and ECC "
                             "settings; or correct hardware.memory_gb in the profile")
    if unknown and evidence.get("memory_unsupported"):
        return f(WARN, f"{want_n} × {expected.get('model')} present; memory not compared: "
                 f"{evidence['memory_unsupported']}")
    if unknown:
        why = nvml.get("reason") or "the management library reported no memory size"
        return f(INCONCLUSIVE, f"{want_n} × {expected.get('model')} present, but the memory of {len(unknown)} card(s) "
                 f"could not be read: {why}")
    return f(PASS, f"{want_n} × {expected.get('model')} present, each with at least {measured_mem} GiB",
             measured=measured_mem, unit="GiB")


def _memory_verdict(expected: Dict[str, Any], thresholds: Dict[str, Any], matching: List[Dict[str, Any]],
                    f: Finding, prefix: str) -> Optional[Verdict]:
    """FAIL when a matching card has less memory than the profile's size (within the tolerance); None else."""
    mem_gb = expected.get("memory_gb")
    if not mem_gb:
        return None
    tol = float(thresholds["memory_tolerance"])
    floor = mem_gb * GIB * (1 - tol)
    small = [a for a in matching if a.get("memory_total_bytes") is not None and a["memory_total_bytes"] < floor]
    if not small:
        return None
    detail = ", ".join(f"{a['bdf']} {a['memory_total_bytes'] / GIB:.1f} GiB" for a in small)
    return f(FAIL, f"{prefix}{len(small)} card(s) report less memory than the profile's {mem_gb} GB: {detail}",
             measured=round(min(a["memory_total_bytes"] for a in small) / GIB, 2),
             threshold=f">= {mem_gb} GiB - {tol:.0%} = {floor / GIB:.1f} GiB", unit="GiB", method=None,
             remediation="check the model and SKU (a smaller-memory variant), MIG or vGPU partitioning; or correct "
                         "hardware.memory_gb in the profile")


def _submitted_devices(evidence: Dict[str, Any], thresholds: Dict[str, Any], f: Finding,
                       matching: List[Dict[str, Any]], others: List[Dict[str, Any]], want_n: int,
                       threshold: str) -> Verdict:
    """INV-DEVICES on submitted texts: the models the texts name (PCI ID) against the profile's; the machine's
    count from a declaration ('Attached GPUs : 8') or a text that lists every device; what the texts do not
    cover is said, and never passes."""
    expected = thresholds["expected"]
    cov = evidence["coverage"]
    accs = evidence["accelerators"]
    unknown = [a for a in accs if not a.get("pci_id") and not is_profiled(a, expected) and not named_only(a)]
    wrong = [a for a in others if a.get("pci_id") or named_only(a)]
    declared = [d for d in (cov.get("declared") or {}).values() if d.get("count") is not None]
    n_declared = sum(d["count"] for d in declared) if declared else None
    count = n_declared if n_declared is not None else (len(accs) if cov.get("listing") else None)
    how = ("; ".join(d["source"] for d in declared) if declared else
           f"the count of {cov.get('listing')}" if cov.get("listing") else "no text says how many the machine has")
    measured = count if count is not None else len(accs)
    f.set(threshold=threshold, unit="devices", method="models by the PCI IDs the submitted texts give; count by " + how)
    uncovered = (f"; the texts cover {len(accs)} of the {count} ({how}): nothing is known of the other "
                 f"{count - len(accs)}" if count is not None and len(accs) < count else "")
    fix = ("run with the profile of these accelerators (--profile NAME / --sits-profile NAME), or check that the "
           "texts are of the machine under audit")
    if wrong:
        want = (f"the profile expects {expected['describe']}" if want_n else "the profile expects no accelerator")
        return f(FAIL, f"the texts name {_group(wrong)}; {want}{uncovered}", measured=len(matching), remediation=fix)
    if count is not None and count != want_n:
        return f(FAIL, f"the machine has {count} accelerator(s) ({how}); the profile expects "
                 f"{want_n} × {expected.get('model', '?')}{uncovered}", measured=count, remediation=fix)
    small = _memory_verdict(expected, thresholds, matching, f, "")
    if small is not None:
        return small
    gaps = []
    if unknown:
        gaps.append(f"the model (PCI ID) of {', '.join(a['bdf'] for a in unknown[:8])}"
                    f"{' and more' if len(unknown) > 8 else ''} is not in the texts")
    if count is None:
        gaps.append(f"the texts cover {len(accs)} accelerator(s) and none of them says how many the machine has")
    elif len(accs) < count:
        gaps.append(f"{how}, and the texts cover {len(accs)}: nothing is known of the other {count - len(accs)}")
    mem_unknown = [a for a in matching if a.get("memory_total_bytes") is None]
    f.set(measured=measured)
    if gaps:
        return f(INCONCLUSIVE, f"{_group(accs) or 'no accelerator'} in the texts; " + "; ".join(gaps))
    mem = (" (memory not in the texts for " + ", ".join(a["bdf"] for a in mem_unknown[:8]) + ")"
           if mem_unknown and expected.get("memory_gb") else "")
    if want_n == 0:
        return f(PASS, f"the profile expects no accelerator and the texts list none ({how})", measured=0)
    if mem:
        return f(INCONCLUSIVE, f"{want_n} × {expected.get('model')} by the texts' PCI IDs and {how}{mem}")
    return f(PASS, f"{want_n} × {expected.get('model')} by the texts' PCI IDs and {how}"
             + (f", each with the profile's {expected.get('memory_gb')} GB" if expected.get("memory_gb") else ""))


def workload_need(workload: Dict[str, Any]) -> Dict[str, float]:
    """Bytes one card needs for the workload: weights and the full KV cache, split by tensor parallelism.

    KV cache = 2 (K and V) × layers × kv_heads × head_dim × context × batch × bytes per element.
    """
    weights = float(workload["params_billion"]) * 1e9 * float(workload["dtype_bytes"])
    kv = (2 * int(workload["layers"]) * int(workload["kv_heads"]) * int(workload["head_dim"])
          * int(workload["context_tokens"]) * int(workload["batch"])
          * float(workload.get("kv_dtype_bytes", workload["dtype_bytes"])))
    tp = int(workload.get("tensor_parallel", 1))
    overhead = float(workload.get("overhead_fraction", 0.0))
    per_card = (weights + kv) / tp * (1 + overhead)
    return {"weights_bytes": weights, "kv_cache_bytes": kv, "tensor_parallel": tp,
            "overhead_fraction": overhead, "per_card_bytes": per_card}


@check("MEM-CAPACITY", default_subject="accelerators")
def check_capacity(evidence: Dict[str, Any], thresholds: Dict[str, Any], f: Finding) -> Verdict:
    """MEM-CAPACITY: each card holds its share of the weights and full KV cache (GB = 10^9 bytes), computed from
    the profile's workload; a flat floor (``min_gb_per_card``) only where the profile sets one.

    evidence: ``accelerators`` (those matching the profile)."""
    accelerators = evidence["accelerators"]
    need = workload_need(thresholds["workload"])
    name = thresholds["workload"].get("name", "workload")
    at = f"{name} need {need['per_card_bytes'] / GB:.1f} GB at TP={need['tensor_parallel']}"
    if thresholds["min_gb_per_card"] is None:
        required = need["per_card_bytes"]
        threshold = f">= {required / GB:.1f} GB per card ({at})"
    else:
        floor = float(thresholds["min_gb_per_card"]) * GB
        required = max(floor, need["per_card_bytes"])
        threshold = f">= {required / GB:.1f} GB per card (max of the profile's floor {floor / GB:.0f} GB and {at})"
    ev = {"workload": thresholds["workload"], "need": need, "min_gb_per_card": thresholds["min_gb_per_card"],
          "cards": [{"bdf": a["bdf"], "memory_total_bytes": a.get("memory_total_bytes"),
                     "memory_source": a.get("memory_source")} for a in accelerators]}
    f.set(threshold=threshold, unit="GB", evidence=ev)
    known = [a for a in accelerators if a.get("memory_total_bytes") is not None]
    if not known:
        return f(INCONCLUSIVE, "no card reported its memory size (management library unavailable)")
    worst = min(known, key=lambda a: a["memory_total_bytes"])
    measured = round(worst["memory_total_bytes"] / GB, 2)
    f.set(measured=measured)
    short = [a for a in known if a["memory_total_bytes"] < required]
    if short:
        return f(FAIL, f"{len(short)} card(s) hold less than the {required / GB:.1f} GB a card needs; smallest "
                 f"{worst['bdf']} with {measured} GB",
                 remediation="raise tensor_parallel in the workload (more cards share the model), use a smaller dtype, "
                             "or use cards with more memory")
    if len(known) < len(accelerators):
        return f(INCONCLUSIVE, f"{len(accelerators) - len(known)} card(s) did not report their memory size")
    return f(PASS, f"every card holds at least {measured} GB; the workload needs {required / GB:.1f} GB per card")


def _version_tuple(text: Optional[str]) -> Optional[Tuple[int, ...]]:
    if not text:
        return None
    nums = re.findall(r"\d+", str(text))
    return tuple(int(n) for n in nums) if nums else None


@check("DEP-DRIVER", version=2, default_subject="driver")
def check_driver(evidence: Dict[str, Any], thresholds: Dict[str, Any], f: Finding) -> Verdict:
    """DEP-DRIVER: NVIDIA driver and CUDA driver API at or above the floor.  evidence: ``nvml`` (facts).  A version
    the evidence does not give (a dcgmi diag names no CUDA version) leaves the verdict INCONCLUSIVE unless the
    other is below its floor (version 1 failed it)."""
    nvml = evidence["nvml"]
    min_drv, min_cuda = thresholds["min_nvidia_driver"], thresholds["min_cuda"]
    threshold = f"driver >= {min_drv}, CUDA >= {min_cuda}"
    f.set(threshold=threshold, evidence={k: nvml.get(k) for k in ("available", "reason", "driver_version",
                                                                  "cuda_driver_version", "source")})
    if not nvml.get("available"):
        return f(INCONCLUSIVE, f"NVIDIA devices present but the driver version cannot be read: {nvml.get('reason')}")
    drv, cuda = nvml.get("driver_version"), nvml.get("cuda_driver_version")
    measured = f"driver {drv}, CUDA {cuda}"
    low, unknown = [], []
    # The floors are version texts (the profile's schema): compared as the tuples of their numbers.
    have_drv, have_cuda = _version_tuple(drv), _version_tuple(cuda)
    if have_drv is None:
        unknown.append("the driver version")
    elif min_drv and have_drv < cast(Tuple[int, ...], _version_tuple(min_drv)):
        low.append(f"driver {drv} < {min_drv}")
    if have_cuda is None:
        unknown.append("the CUDA driver API version")
    elif min_cuda and have_cuda < cast(Tuple[int, ...], _version_tuple(min_cuda)):
        low.append(f"CUDA {cuda} < {min_cuda}")
    if low:
        return f(FAIL, "; ".join(low), measured=measured,
                 remediation=f"install NVIDIA driver {min_drv} or newer (it carries the CUDA {min_cuda} driver API)")
    if unknown:
        return f(INCONCLUSIVE, f"{measured}: {' and '.join(unknown)} not in the evidence"
                 + (f" ({nvml['source']})" if nvml.get("source") else ""), measured=measured)
    return f(PASS, f"{measured} meets the floor", measured=measured)
