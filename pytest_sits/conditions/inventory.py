"""Acquire the evidence of INV-DEVICES, MEM-CAPACITY and DEP-DRIVER from the platform's inventory."""

from __future__ import annotations

from typing import Any, Dict, List

from ..checks.inventory import absent_reason


def matching(inventory: Dict[str, Any], expected: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The accelerators present that match the profile's PCI IDs (the ones its requirements judge)."""
    ids = set(expected.get("pci_ids", []))
    return [a for a in inventory["accelerators"] if a["pci_id"] in ids]


def acquire_devices(inventory: Dict[str, Any]) -> Dict[str, Any]:
    return {"accelerators": inventory["accelerators"], "nvml": inventory["management"]["nvml"]}


def acquire_capacity(inventory: Dict[str, Any], expected: Dict[str, Any]) -> Dict[str, Any]:
    absent = absent_reason(expected, inventory["accelerators"])
    if absent:
        return {"absent": absent}
    return {"accelerators": matching(inventory, expected)}


def acquire_driver(inventory: Dict[str, Any]) -> Dict[str, Any]:
    if not any(a["pci_id"].startswith("10de:") for a in inventory["accelerators"]):
        return {"absent": "no NVIDIA device: the NVIDIA driver floor does not apply"}
    return {"nvml": inventory["management"]["nvml"]}
