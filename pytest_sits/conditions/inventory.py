"""Acquire the evidence of INV-DEVICES, MEM-CAPACITY and DEP-DRIVER from the platform's inventory."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from ..checks.inventory import absent_reason, expected_vs_found

NVIDIA, AMD = "10de:", "1002:"


def matching(inventory: Dict[str, Any], expected: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The accelerators present that match the profile's PCI IDs (the ones its requirements judge)."""
    ids = set(expected.get("pci_ids", []))
    return [a for a in inventory["accelerators"] if a["pci_id"] in ids]


def accelerators_absent(expected: Dict[str, Any], inventory: Dict[str, Any]) -> Optional[str]:
    """The one rule for "the profile's accelerators are not here": the SKIP reason, or None when they are."""
    return absent_reason(expected, inventory["accelerators"])


def absent_accelerator(expected: Dict[str, Any], inventory: Dict[str, Any]) -> Dict[str, Any]:
    """The evidence of a per-accelerator requirement when there is no accelerator to judge."""
    return {"absent": accelerators_absent(expected, inventory) or expected_vs_found(expected, inventory["accelerators"])}


def acquire_devices(inventory: Dict[str, Any]) -> Dict[str, Any]:
    return {"accelerators": inventory["accelerators"], "nvml": inventory["management"]["nvml"]}


def acquire_capacity(inventory: Dict[str, Any], expected: Dict[str, Any]) -> Dict[str, Any]:
    absent = accelerators_absent(expected, inventory)
    if absent:
        return {"absent": absent}
    return {"accelerators": matching(inventory, expected)}


def acquire_driver(inventory: Dict[str, Any]) -> Dict[str, Any]:
    if not any(a["pci_id"].startswith("10de:") for a in inventory["accelerators"]):
        return {"absent": "no NVIDIA device: the NVIDIA driver floor does not apply"}
    return {"nvml": inventory["management"]["nvml"]}


def management_facts(inventory: Dict[str, Any], acc: Dict[str, Any]) -> Dict[str, Any]:
    """The device's management facts and the library's field errors, or the reason there are none."""
    pci = str(acc.get("pci_id", ""))
    lib = "nvml" if pci.startswith(NVIDIA) else "amdsmi" if pci.startswith(AMD) else None
    if lib is None:
        return {"absent": f"{acc['bdf']}: {acc.get('vendor')} devices' health fields are read by no management "
                          "library in this version (NVML and amdsmi only)"}
    top = (inventory.get("management") or {}).get(lib) or {}
    errors = [e for e in top.get("errors") or [] if isinstance(e, dict)]
    m = acc.get("management")
    if not m:
        errors = errors + [{"field": "management", "error": top.get("reason") or f"{lib} reported no facts "
                                                                                    f"for {acc['bdf']}"}]
        m = {}
    return {"facts": m, "errors": errors, "source": top.get("source") or lib, "library": lib, "top": top}


def relevant_errors(errors: List[Dict[str, Any]], fields: List[str]) -> List[Dict[str, Any]]:
    out = [e for e in errors if e.get("field") in fields]
    out += [dict(e, field=f) for e in errors if e.get("field") == "management" for f in fields]
    return out
