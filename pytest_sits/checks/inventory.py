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


#: Vendors a declared accelerator name can carry ("NVIDIA H200-SXM-141GB", "AMD Instinct MI300X ...").
_VENDOR_WORDS = {"nvidia": "NVIDIA", "amd": "AMD", "intel": "Intel", "huawei": "Huawei", "habana": "Intel",
                 "qualcomm": "Qualcomm", "google": "Google", "metax": "MetaX", "iluvatar": "Iluvatar",
                 "cambricon": "Cambricon", "biren": "Biren", "enflame": "Enflame"}
_FORM = re.compile(r"^(sxm\d*|pcie|nvl|oam)$")
_SIZE = re.compile(r"^\d+(?:gb|gib|g|tb)$|^hbm\d*e?$|^gddr\d*x?$|^\d+w$")


def model_tokens(text: str) -> Tuple[set, set, set]:
    """(vendors, model numbers, form factors) named in an accelerator's name: a model number holds letters and
    digits ("h200", "mi300x", "b60"), not a memory size, memory type or power; SXM5 is form factor SXM."""
    words = re.findall(r"[a-z0-9]+", text.lower())
    vendors = {_VENDOR_WORDS[w] for w in words if w in _VENDOR_WORDS}
    forms = {("sxm" if w.startswith("sxm") else w) for w in words if _FORM.match(w)}
    numbers = {w for w in words if re.search(r"[a-z]", w) and re.search(r"\d", w) and not _FORM.match(w)
               and not _SIZE.match(w)}
    return vendors, numbers, forms


def declared_model(name: str, expected: Dict[str, Any], hints: Any = ()) -> Tuple[Optional[bool], str]:
    """Whether an accelerator name a submitter declared (an MLPerf systems JSON's ``accelerator_model_name``) is
    the profile's model: False when it names another vendor, another model number or another form factor; True
    when it names the profile's model number (and form factor, where the profile names one: in its model's name,
    else in its names and aliases, ``hints``: "h200-sxm"); None when it does not say (the reason)."""
    d_vendors, d_numbers, d_forms = model_tokens(name)
    p_vendors, p_numbers, p_forms = model_tokens(str(expected.get("model") or ""))
    if not p_forms:
        p_forms = set().union(*(model_tokens(str(h))[2] for h in hints)) if hints else set()
    vendor = expected.get("vendor")
    if d_vendors and vendor and vendor != "any" and vendor not in d_vendors:
        return False, f"it names {', '.join(sorted(d_vendors))}, not {vendor}"
    if p_numbers and d_numbers and not p_numbers <= d_numbers:
        return False, f"its model {', '.join(sorted(d_numbers))} is not {', '.join(sorted(p_numbers))}"
    if p_forms and d_forms and not p_forms & d_forms:
        return False, f"its form factor {', '.join(sorted(d_forms)).upper()} is not {', '.join(sorted(p_forms)).upper()}"
    if not p_numbers or not d_numbers:
        return None, "it names no model number to compare with the profile's"
    if p_forms and not d_forms:
        return None, f"it does not say the form factor ({', '.join(sorted(p_forms)).upper()})"
    return True, "the profile's model"


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
    if evidence.get("declared_only"):
        return _declared_devices(evidence["declared_system"], thresholds, f, want_n, threshold)
    if evidence.get("coverage") is not None:
        verdict = _submitted_devices(evidence, thresholds, f, matching, others, want_n, threshold)
        other = evidence.get("declaration_contradicts")
        if other:
            verdict.reason += (f"; but {other}: the submission's runs are not judged as this machine's (the readings "
                               "decide)")
            if verdict.status == PASS:
                verdict.status = WARN
        return verdict
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


def declared_where(decl: Dict[str, Any], key: str) -> str:
    """Where a declared fact was read: "systems/X.json line 12 (accelerator_model_name)"."""
    line = (decl.get("lines") or {}).get(key)
    return f"{decl['file']}{f' line {line}' if line else ''} ({key})"


def _several(decl: Dict[str, Any], f: Finding) -> Optional[Verdict]:
    if decl.get("several"):
        return f(INCONCLUSIVE, "the submitted systems JSONs declare different systems ("
                 + ", ".join(decl["several"][:6]) + "): which one is the machine under audit is not in the evidence; "
                 "audit one system's folder")
    return None


def _declared_devices(decl: Dict[str, Any], thresholds: Dict[str, Any], f: Finding, want_n: int,
                      threshold: str) -> Verdict:
    """INV-DEVICES on an MLPerf systems JSON alone: the submitter's declaration, never a reading.  FAIL where it
    declares another model, count or a smaller memory than the profile's (the submitter's own statement); WARN
    where it declares the profile's (stated as declared); INCONCLUSIVE where it does not say."""
    several = _several(decl, f)
    if several is not None:
        return several
    expected = thresholds["expected"]
    model, n = str(decl.get("accelerator_model_name") or ""), decl.get("accelerators_per_node")
    f.set(threshold=threshold, unit="devices", measured=n,
          method="as declared in the MLPerf systems JSON (accelerator_model_name, accelerators_per_node, "
                 "accelerator_memory_capacity): the submitter's statement, not a reading of the machine")
    match, why = declared_model(model, expected, decl.get("profile_names") or ())
    fails, gaps = [], []
    if match is False:
        fails.append(f"it declares {model!r} ({declared_where(decl, 'accelerator_model_name')}): {why}")
    elif match is None:
        gaps.append(f"the declared model {model!r} does not say whether it is the profile's {expected.get('model')} "
                    f"({why})")
    if n is None:
        gaps.append(f"accelerators_per_node is not a count ({declared_where(decl, 'accelerators_per_node')})")
    elif n != want_n:
        fails.append(f"it declares {n} per node ({declared_where(decl, 'accelerators_per_node')}); the profile "
                     f"expects {want_n}")
    mem, mem_gb = decl.get("memory"), expected.get("memory_gb")
    tol = float(thresholds["memory_tolerance"])
    if mem and mem_gb and mem["gb"] < mem_gb * (1 - tol):
        fails.append(f"it declares {mem['text']} per accelerator ({declared_where(decl, mem['key'])}); the profile's "
                     f"model has {mem_gb} GB")
    if fails:
        return f(FAIL, f"the MLPerf systems JSON {decl['file']} declares another system than the profile's: "
                 + "; ".join(fails),
                 remediation="audit the submission with the profile of the system it declares (sits profile init "
                             "--from=DIR writes one), or check that the files are of the machine under audit")
    if gaps:
        return f(INCONCLUSIVE, "; ".join(gaps) + f" — as declared in {decl['file']}")
    return f(WARN, f"{n} × {model}" + (f", {mem['text']} each" if mem else "")
             + f" as declared in {decl['file']} (the submitter's declaration, not a reading of the machine): the "
               "profile's model and count; submit nvidia-smi -q (or amd-smi / rocm-smi) of the machine to decide")


def declared_capacity(decl: Dict[str, Any], required: float, f: Finding) -> Verdict:
    """MEM-CAPACITY on a systems JSON's declared memory per accelerator ("141 GB"): a declared GB may be 10^9 or
    2^30 bytes, so FAIL only where even 2^30 falls short, WARN (as declared) where even 10^9 suffices, else
    INCONCLUSIVE."""
    several = _several(decl, f)
    if several is not None:
        return several
    mem = decl.get("memory")
    if not mem:
        return f(INCONCLUSIVE, f"the systems JSON {decl['file']} declares no accelerator memory size "
                 "(accelerator_memory_capacity)")
    low, high = mem["gb"] * GB, mem["gb"] * GIB
    f.set(measured=round(mem["gb"], 2),
          method="as declared in the MLPerf systems JSON (accelerator_memory_capacity, read as 10^9 to 2^30 bytes "
                 "per GB): the submitter's statement, not a reading")
    where = declared_where(decl, mem["key"])
    if high < required:
        return f(FAIL, f"the systems JSON declares {mem['text']} per accelerator ({where}), less than the "
                 f"{required / GB:.1f} GB a card needs even read as GiB",
                 remediation="raise tensor_parallel in the workload (more cards share the model), use a smaller dtype, "
                             "or use cards with more memory")
    if low >= required:
        return f(WARN, f"{mem['text']} per accelerator as declared ({where}; the submitter's declaration, not a "
                 f"reading) holds the {required / GB:.1f} GB a card needs; submit nvidia-smi -q (or amd-smi) to decide")
    return f(INCONCLUSIVE, f"{mem['text']} per accelerator as declared ({where}): the {required / GB:.1f} GB a card "
             "needs lies between the size read as 10^9 and as 2^30 bytes per GB; submit nvidia-smi -q (or amd-smi)")


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
    if evidence.get("declared_only"):
        return declared_capacity(evidence["declared_system"], required, f)
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
    min_drv, min_cuda = thresholds["min_nvidia_driver"], thresholds["min_cuda"]
    threshold = f"driver >= {min_drv}, CUDA >= {min_cuda}"
    if evidence.get("declared_only"):
        return _declared_driver(evidence["declared_system"], min_drv, min_cuda, threshold, f)
    nvml = evidence["nvml"]
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


#: The CUDA driver API each NVIDIA driver branch carries (the CUDA toolkit release notes' minimum drivers): a
#: declared driver's API is the one of the highest branch at or below it (a lower bound between branches).
DRIVER_CUDA = ((535, "12.2"), (545, "12.3"), (550, "12.4"), (555, "12.5"), (560, "12.6"), (565, "12.7"),
               (570, "12.8"), (575, "12.9"), (580, "13.0"))


def _declared_driver(decl: Dict[str, Any], min_drv: str, min_cuda: str, threshold: str, f: Finding) -> Verdict:
    """DEP-DRIVER on a systems JSON's declared driver ("Driver 570.86.15" in other_software_stack): its CUDA driver
    API from the branch it belongs to (:data:`DRIVER_CUDA`).  FAIL below a floor, WARN (as declared) at or above
    both, INCONCLUSIVE where the declaration does not say."""
    f.set(threshold=threshold, evidence={"declared_system": decl},
          method="as declared in the MLPerf systems JSON (the driver named in other_software_stack, sw_notes or "
                 "framework), its CUDA driver API from the driver's branch: the submitter's statement, not a reading")
    several = _several(decl, f)
    if several is not None:
        return several
    drv = (decl.get("driver") or {}).get("version")
    if not drv:
        return f(INCONCLUSIVE, f"the systems JSON {decl['file']} declares no NVIDIA driver version (other_software_stack, "
                 "sw_notes, framework); submit nvidia-smi -q to decide")
    where = declared_where(decl, decl["driver"]["key"])
    have = cast(Tuple[int, ...], _version_tuple(drv))
    branch = have[0]
    api = next((c for b, c in reversed(DRIVER_CUDA) if b <= branch), None)
    exact = any(b == branch for b, _ in DRIVER_CUDA)
    measured = f"driver {drv} (declared), CUDA {api or '?'} (its branch's)"
    f.set(measured=measured)
    low = []
    if min_drv and have < cast(Tuple[int, ...], _version_tuple(min_drv)):
        low.append(f"driver {drv} < {min_drv}")
    cuda_ok = api is not None and cast(Tuple[int, ...], _version_tuple(api)) >= \
        cast(Tuple[int, ...], _version_tuple(min_cuda))
    if api is not None and not cuda_ok and exact:
        low.append(f"CUDA {api} (the {branch} branch's driver API) < {min_cuda}")
    if low:
        return f(FAIL, "; ".join(low) + f", as declared in {where}",
                 remediation=f"install NVIDIA driver {min_drv} or newer carrying the CUDA {min_cuda} driver API, or "
                             "submit nvidia-smi -q of the machine if the declaration is out of date")
    if not cuda_ok:
        return f(INCONCLUSIVE, f"driver {drv} as declared ({where}): which CUDA driver API it carries is not known "
                 f"from its branch; submit nvidia-smi -q (its 'CUDA Version')")
    return f(WARN, f"driver {drv} as declared in {where} (the submitter's declaration, not a reading), carrying CUDA "
             f"{api}: meets the floor; submit nvidia-smi -q of the machine to decide")
