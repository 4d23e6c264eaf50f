"""Acquire the evidence of SEC-FIRMWARE (versions and the driver module's signature state) and SEC-TEE (the
trusted-execution matrix).

Firmware versions come from the device's management facts in the inventory
(live NVML/amdsmi, a snapshot's captured facts, the simulated ones, or
``nvidia-smi -q`` text); the module signature and the TEE matrix from the
kernel's files below the platform's root.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Optional

from ..probes import health as hp
from .inventory import management_facts, relevant_errors


DRIVER_MODULES = {"nvml": "nvidia", "amdsmi": "amdgpu"}


def acquire_firmware(inventory: Dict[str, Any], acc: Dict[str, Any], root: Optional[Path]) -> Dict[str, Any]:
    """Driver, VBIOS, InfoROM and GSP versions; the driver module's signature state when ``root`` is given
    (None: text evidence, no kernel to read)."""
    f = management_facts(inventory, acc)
    if "absent" in f or "unavailable" in f:
        return f
    m, top = f["facts"], f["top"]
    versions = {"driver": m.get("driver_version") or top.get("driver_version"), "vbios": m.get("vbios_version"),
                "inforom": m.get("inforom_image_version"), "gsp": m.get("gsp_firmware_version")}
    sig = hp.module_signature(root, DRIVER_MODULES[f["library"]]) if root is not None else \
        {"state": "unknown", "reason": "text evidence: no kernel to read the module's signature state from"}
    return {"device": acc["bdf"], "source": f["source"], "versions": versions, "module_signature": sig,
            "errors": relevant_errors(f["errors"], ["driver_version", "vbios_version", "inforom_image_version",
                                              "gsp_firmware_version"])}


def acquire_tee(root: Optional[Path], inventory: Dict[str, Any]) -> Dict[str, Any]:
    from ..probes import security

    if root is None:  # submitted texts: no kernel, CPU flags or device nodes to read
        return {"unavailable": "submitted texts show no CPU trusted-execution state (no /proc/cpuinfo, KVM module "
                               "parameters or /dev/sev*, /dev/tdx_guest of the machine)"}

    return security.collect(root, (inventory.get("management") or {}).get("nvml") or {}, inventory["accelerators"])
