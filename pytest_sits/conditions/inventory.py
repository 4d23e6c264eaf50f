"""Acquire the evidence of INV-DEVICES, MEM-CAPACITY and DEP-DRIVER from the platform's inventory."""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any, Dict, List, Optional

from ..catalogue import CATALOGUE, unsupported_for
from ..checks.inventory import absent_reason, expected_vs_found, is_profiled

NVIDIA, AMD = "10de:", "1002:"


def matching(inventory: Dict[str, Any], expected: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The accelerators present that match the profile's PCI IDs (the ones its requirements judge)."""
    return [a for a in inventory["accelerators"] if is_profiled(a, expected)]


# ---- submitted evidence (the ``evidence`` platform: ``inventory["submitted"]``) ------------------------------

def submitted(inventory: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """What the submitted texts hold beyond the inventory's usual places (None on a machine or a snapshot)."""
    sub = inventory.get("submitted")
    return sub if isinstance(sub, dict) else None


def files_read(inventory: Dict[str, Any], kinds: Optional[List[str]] = None) -> List[str]:
    sub = submitted(inventory) or {}
    return [f["name"] for f in sub.get("files") or [] if f.get("status") == "read"
            and (kinds is None or f.get("kind") in kinds)]


def _listing(inventory: Dict[str, Any]) -> Optional[str]:
    """A submitted text that lists every accelerator of the machine (of a vendor), or None."""
    sub = submitted(inventory) or {}
    lists = [s for v in (sub.get("complete") or {}).values() for s in v]
    return lists[0] if lists else None


def _named(files: List[str], most: int = 3) -> str:
    """The files read, as a reason names them: the first few and how many more."""
    if not files:
        return "none read"
    return ", ".join(files[:most]) + (f" and {len(files) - most} more" if len(files) > most else "")


def unknown_models(inventory: Dict[str, Any], expected: Optional[Dict[str, Any]] = None) -> List[Dict[str, Any]]:
    """The accelerators whose model the texts do not give: no PCI ID, and (given the profile's identity) not named
    as its model either."""
    return [a for a in inventory["accelerators"] if not a.get("pci_id")
            and not (expected is not None and is_profiled(a, expected))]


def accelerators_absent(expected: Dict[str, Any], inventory: Dict[str, Any]) -> Optional[str]:
    """The one rule for "the profile's accelerators are not here": the SKIP reason, or None when they are."""
    return absent_reason(expected, inventory["accelerators"])


def absent_accelerator(expected: Dict[str, Any], inventory: Dict[str, Any]) -> Dict[str, Any]:
    """The evidence of a per-accelerator requirement when there is no accelerator to judge.  Submitted texts
    that list no accelerator and no whole machine cannot tell that there is none: not measured."""
    if submitted(inventory) is not None and not inventory["accelerators"] and _listing(inventory) is None:
        return {"unavailable": f"the submitted texts ({_named(files_read(inventory))}) show no "
                               "accelerator, and none of them lists every device of the machine"}
    return {"absent": accelerators_absent(expected, inventory) or expected_vs_found(expected, inventory["accelerators"])}


def declared_system(inventory: Dict[str, Any], profile_names: Any = ()) -> Optional[Dict[str, Any]]:
    """The system an MLPerf submission's ``systems/<system>.json`` declares (model, count per node, memory, driver),
    or None where none was submitted; ``{"several": [files]}`` where the submitted ones declare different
    systems.  A declaration, never a reading: the readings decide where there are any."""
    sub = submitted(inventory) or {}
    m = sub.get("mlperf") or {}
    systems = m.get("systems") or []
    if not systems:
        return None
    shape = lambda s: (s.get("accelerator_model_name"), s.get("accelerators_per_node_n"))  # noqa: E731
    if len({shape(s) for s in systems}) > 1:
        # a submitter's systems/ folder holds every system of theirs: the one whose results were submitted
        ran = {_results_system(str(f)) for f in [r.get("summary_file") or r.get("detail_file") for r in
                                                 m.get("runs") or []] + [a.get("file") for a in m.get("accuracy") or []]}
        ran.discard(None)
        mine = [s for s in systems if len(ran) == 1 and PurePosixPath(str(s["file"])).stem in ran]
        if len(mine) != 1:
            return {"several": [s["file"] for s in systems]}
        systems = mine
    s = systems[0]
    return {"file": s["file"], "system_name": s.get("system_name"),
            "accelerator_model_name": s.get("accelerator_model_name"),
            "accelerators_per_node": s.get("accelerators_per_node_n"), "number_of_nodes": s.get("number_of_nodes"),
            "memory": s.get("memory_declared"), "driver": s.get("driver_declared"), "cuda": s.get("cuda_declared"),
            "lines": s.get("lines") or {}, "profile_names": list(profile_names)}


def _results_system(path: str) -> Optional[str]:
    """The system a submission tree's result file is of (``.../results/<system>/...``), or None."""
    parts = PurePosixPath(path).parts
    return next((parts[i + 1] for i in range(len(parts) - 2) if parts[i] == "results"), None)


def declaration_contradicts(inventory: Dict[str, Any]) -> Optional[str]:
    """Where the texts hold readings of accelerators and an MLPerf systems JSON declares another model or count:
    what it declares against what they show (the submission's runs are then not this machine's); None where they
    agree, or either says nothing to compare."""
    from ..probes.readers.base import same_model

    decl = declared_system(inventory)
    accs = [a for a in inventory.get("accelerators") or [] if a.get("name")]
    if decl is None or decl.get("several") or not accs:
        return None
    model, n = str(decl.get("accelerator_model_name") or ""), decl.get("accelerators_per_node")
    said = []
    names = sorted({str(a["name"]) for a in accs})
    if all(same_model(model, nm) is False for nm in names):
        said.append(f"the model {model!r} where the readings show {', '.join(names[:3])}")
    sub = submitted(inventory) or {}
    counts = [d["count"] for d in (sub.get("declared") or {}).values() if d.get("count") is not None]
    have = sum(counts) if counts else (len(inventory.get("accelerators") or []) if _listing(inventory) else None)
    if n is not None and have is not None and n != have:
        said.append(f"{n} per node where the readings show {have}")
    if not said:
        return None
    return f"the MLPerf systems JSON {decl['file']} declares " + " and ".join(said)


def _declares_nvidia(decl: Dict[str, Any]) -> bool:
    return bool(decl.get("driver")) or "nvidia" in str(decl.get("accelerator_model_name") or "").lower()


def acquire_devices(inventory: Dict[str, Any], profile_names: Any = ()) -> Dict[str, Any]:
    ev = {"accelerators": inventory["accelerators"], "nvml": inventory["management"]["nvml"]}
    vendors = sorted({str(a.get("vendor")) for a in inventory["accelerators"]
                      if a.get("memory_total_bytes") is None and unsupported_for("INV-DEVICES", a.get("vendor"))})
    if vendors:
        ev["memory_unsupported"] = "; ".join(f"{v} devices are not supported for it in this version "
                                             f"({CATALOGUE['INV-DEVICES'].unsupported[v]})" for v in vendors)
    sub = submitted(inventory)
    if sub is None:
        return ev
    listing = _listing(inventory)
    decl = declared_system(inventory, profile_names)
    if not inventory["accelerators"] and listing is None and not sub.get("declared"):
        if decl is not None:
            return {"accelerators": [], "declared_only": True, "declared_system": decl}
        return {"unavailable": f"the submitted texts ({_named(files_read(inventory))}) show no "
                               "accelerator and none of them lists every device of the machine: how many it has is "
                               "not in the evidence"}
    if decl is not None:
        ev["declared_system"] = decl
        other = declaration_contradicts(inventory)
        if other:
            ev["declaration_contradicts"] = other
    declared = {v: {"count": d["count"], "source": d["source"], "covered": d.get("covered")}
                for v, d in (sub.get("declared") or {}).items()}
    ev["coverage"] = {"declared": declared, "listing": listing, "files": files_read(inventory),
                      "unknown_models": [a["bdf"] for a in unknown_models(inventory)],
                      "rule": "a count the texts declare ('Attached GPUs') or a text that lists every device decides "
                              "the count; models are compared by PCI ID (by vendor and name where the texts give "
                              "none)"}
    return ev


def acquire_capacity(inventory: Dict[str, Any], expected: Dict[str, Any]) -> Dict[str, Any]:
    decl = declared_system(inventory)
    if submitted(inventory) is not None and not inventory["accelerators"] and decl is not None:
        return {"accelerators": [], "declared_only": True, "declared_system": decl}
    absent = accelerators_absent(expected, inventory)
    if absent and submitted(inventory) is not None:
        unknown = unknown_models(inventory, expected)
        if unknown or not inventory["accelerators"]:
            return absent_accelerator(expected, inventory) if not unknown else {
                "unavailable": f"the texts do not give the model (PCI ID) of {', '.join(a['bdf'] for a in unknown[:8])}"
                               f"{' and more' if len(unknown) > 8 else ''}: which of them the profile's workload runs "
                               "on is not in the evidence"}
    if absent:
        return {"absent": absent}
    accs = matching(inventory, expected)
    unread = [a for a in accs if a.get("memory_total_bytes") is None]
    if unread and all(unsupported_for("MEM-CAPACITY", a.get("vendor")) for a in unread):
        return {"absent": str(unsupported_for("MEM-CAPACITY", unread[0].get("vendor")))}
    if submitted(inventory) is not None and all(a.get("memory_total_bytes") is None for a in accs):
        return {"unavailable": f"the memory size of {', '.join(a['bdf'] for a in accs[:8])} is not in the submitted "
                               "texts (nvidia-smi -q 'FB Memory Usage' or amd-smi 'VRAM')"}
    return {"accelerators": accs}


def acquire_driver(inventory: Dict[str, Any]) -> Dict[str, Any]:
    decl = declared_system(inventory)
    if submitted(inventory) is not None and decl is not None and not inventory["management"]["nvml"].get("available") \
            and not inventory["accelerators"] and (decl.get("several") or _declares_nvidia(decl)):
        return {"declared_only": True, "declared_system": decl}
    if not any(str(a.get("pci_id") or "").startswith("10de:") or a.get("vendor") == "NVIDIA"
               for a in inventory["accelerators"]):
        return {"absent": "no NVIDIA device: the NVIDIA driver floor does not apply"}
    nvml = inventory["management"]["nvml"]
    if submitted(inventory) is not None:
        if not nvml.get("available"):
            return {"unavailable": "no nvidia-smi -q text among the submitted files: the driver and CUDA versions "
                                   "are not in the evidence"}
        if not nvml.get("driver_version") and not nvml.get("cuda_driver_version"):
            return {"unavailable": f"the driver and CUDA versions are not in {', '.join(nvml.get('files') or [])} "
                                   "(the lines before the first GPU section were cut)"}
    return {"nvml": nvml}


def management_facts(inventory: Dict[str, Any], acc: Dict[str, Any]) -> Dict[str, Any]:
    """The device's management facts and the library's field errors, or the reason there are none (``absent``:
    no library reads such a device; ``unavailable``: submitted texts that hold no facts of it)."""
    pci = str(acc.get("pci_id") or "")
    vendor = acc.get("vendor")
    lib = "nvml" if pci.startswith(NVIDIA) or (not pci and vendor == "NVIDIA") else \
        "amdsmi" if pci.startswith(AMD) or (not pci and vendor == "AMD") else None
    if lib is None and submitted(inventory) is not None and acc.get("management"):
        # another vendor's tool among the submitted texts (mthreads-gmi, npu-smi info): the facts its text shows
        m = acc["management"]
        return {"facts": m, "errors": [e for e in m.get("errors") or [] if isinstance(e, dict)],
                "source": m.get("source") or "the submitted texts", "library": None, "top": {}}
    if lib is None:
        return {"absent": f"{acc['bdf']}: {acc.get('vendor')} devices' health fields are read by no management "
                          "library in this version (NVML and amdsmi only)"}
    top = (inventory.get("management") or {}).get(lib) or {}
    errors = [e for e in top.get("errors") or [] if isinstance(e, dict)]
    m = acc.get("management")
    if not m and submitted(inventory) is not None:
        tool = "nvidia-smi -q" if lib == "nvml" else "amd-smi / rocm-smi"
        return {"unavailable": f"{acc['bdf']} is in {', '.join(acc.get('sources') or []) or 'the texts'}, but no "
                               f"{tool} text among the submitted files gives its facts"}
    if m:
        errors = errors + [e for e in m.get("errors") or [] if isinstance(e, dict)]
    if not m:
        errors = errors + [{"field": "management", "error": top.get("reason") or f"{lib} reported no facts "
                                                                                    f"for {acc['bdf']}"}]
        m = {}
    return {"facts": m, "errors": errors, "source": top.get("source") or lib, "library": lib, "top": top}


def relevant_errors(errors: List[Dict[str, Any]], fields: List[str]) -> List[Dict[str, Any]]:
    out = [e for e in errors if e.get("field") in fields]
    out += [dict(e, field=f) for e in errors if e.get("field") == "management" for f in fields]
    return out


def not_in_texts(inventory: Dict[str, Any], f: Dict[str, Any], fields: List[str]) -> Optional[Dict[str, Any]]:
    """Submitted evidence whose text shows none of ``fields`` for the device: ``{"unavailable": where}`` (not
    measured); None when one is shown, when one is shown but unreadable (judged INCONCLUSIVE with the error),
    or on a machine."""
    if submitted(inventory) is None:
        return None
    m = f["facts"]
    if any(m.get(k) is not None for k in fields):
        return None
    errs = [e for e in f["errors"] if e.get("field") in fields]
    if any(not e.get("missing") for e in errs):
        return None
    where = "; ".join(dict.fromkeys(e["error"] for e in errs)) or f"not in {m.get('source') or 'the texts'}"
    return {"unavailable": where}
