"""Trusted-execution capabilities of the host, from the kernel's own files (read-only, never decides).

CPU side: AMD SEV / SEV-ES / SEV-SNP and Intel TDX, both as a host (the KVM
module's parameters, ``/dev/sev``) and as a guest (CPU flags the kernel sets
inside a confidential VM, ``/dev/sev-guest``, ``/dev/tdx_guest``).  GPU side:
NVML's confidential-computing state, read by :mod:`.health` into the NVML
facts.  Every answer is ``yes``, ``no`` or ``unknown``: ``no`` only on a
positive sign of absence (a parameter reading N, a CPU of the other vendor),
``unknown`` whenever the platform cannot tell (an older kernel without the
flag, a file that is not there).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional

YES, NO, UNKNOWN = "yes", "no", "unknown"

#: NVML's CPU capability codes (``NVML_CC_SYSTEM_CPU_CAPS_*``).
NVML_CPU_CAPS = {0: "none", 1: "AMD SEV", 2: "Intel TDX", 3: "AMD SEV-SNP", 4: "AMD SEV-SNP vTOM"}
NVML_ENVIRONMENT = {0: "unavailable", 1: "simulation", 2: "production"}


def _read(root: Path, rel: str) -> Optional[str]:
    from .sysfs import read_text

    return read_text(Path(root), rel)


def _exists(root: Path, rel: str) -> bool:
    """A device file is there (a link out of a snapshot is not followed: it proves nothing)."""
    from ..files import exists_inside

    return exists_inside(root, rel)


def cpu_flags(root: Path) -> Dict[str, Any]:
    """The CPU vendor and the flags of the first processor in /proc/cpuinfo."""
    text = _read(root, "proc/cpuinfo")
    if text is None:
        return {"readable": False, "vendor": None, "flags": []}
    vendor: Optional[str] = None
    flags: List[str] = []
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "vendor_id" and vendor is None:
            vendor = value.strip()
        elif key == "flags" and not flags:
            flags = value.split()
        if vendor and flags:
            break
    return {"readable": True, "vendor": vendor, "flags": flags}


def _param(root: Path, module: str, name: str) -> Optional[str]:
    value = _read(root, f"sys/module/{module}/parameters/{name}")
    if value is None:
        return None
    return YES if value.upper() in ("Y", "1") else NO if value.upper() in ("N", "0") else None


def _row(capability: str, role: str, value: str, source: str, detail: str = "") -> Dict[str, Any]:
    return {"capability": capability, "role": role, "value": value, "source": source, "detail": detail}


def cpu_matrix(root: Path) -> List[Dict[str, Any]]:
    """Rows for AMD SEV, SEV-ES, SEV-SNP and Intel TDX, each as host (can launch such guests) and as guest
    (this system runs inside one).  The ``hypervisor`` CPU flag tells a virtual machine from a host."""
    cpu = cpu_flags(root)
    if not cpu["readable"]:
        return [_row(cap, role, UNKNOWN, "/proc/cpuinfo", "not readable")
                for cap in ("AMD SEV", "AMD SEV-ES", "AMD SEV-SNP", "Intel TDX") for role in ("host", "guest")]
    flags = set(cpu["flags"])
    vendor = cpu["vendor"] or "?"
    vm = "hypervisor" in flags
    rows = []
    specs = (("AMD SEV", "AuthenticAMD", "sev", "kvm_amd", "sev", None, "dev/sev"),
             ("AMD SEV-ES", "AuthenticAMD", "sev_es", "kvm_amd", "sev_es", None, "dev/sev"),
             ("AMD SEV-SNP", "AuthenticAMD", "sev_snp", "kvm_amd", "sev_snp", "dev/sev-guest", "dev/sev"),
             ("Intel TDX", "GenuineIntel", "tdx_guest", "kvm_intel", "tdx", "dev/tdx_guest", None))
    for cap, want_vendor, flag, module, param, guest_dev, host_dev in specs:
        if vendor != want_vendor and vendor in ("AuthenticAMD", "GenuineIntel"):
            rows.append(_row(cap, "host", NO, "/proc/cpuinfo vendor_id", f"{vendor} CPU"))
            rows.append(_row(cap, "guest", NO, "/proc/cpuinfo vendor_id", f"{vendor} CPU"))
            continue
        # host
        kvm = _param(root, module, param)
        host_flag = "tdx_host_platform" if cap == "Intel TDX" else flag
        if vm:
            rows.append(_row(cap, "host", NO, "/proc/cpuinfo flags", "a virtual machine (hypervisor flag)"))
        elif kvm is not None:
            rows.append(_row(cap, "host", kvm, f"/sys/module/{module}/parameters/{param}",
                             "KVM can launch such guests" if kvm == YES else "KVM has it disabled"))
        elif host_flag in flags:
            extra = "" if host_dev is None or _exists(root, host_dev) else f"; /{host_dev} absent"
            rows.append(_row(cap, "host", YES, "/proc/cpuinfo flags",
                             f"CPU flag {host_flag}: the CPU and firmware enable it ({module} not loaded{extra})"))
        else:
            rows.append(_row(cap, "host", UNKNOWN, "/proc/cpuinfo flags",
                             f"no CPU flag {host_flag} and no {module} parameter {param}: a kernel too old to "
                             "report it, the feature off in firmware, and a CPU without it look the same"))
        # guest
        if guest_dev and _exists(root, guest_dev):
            rows.append(_row(cap, "guest", YES, f"/{guest_dev}", "this system runs as such a guest"))
        elif vm and flag in flags:
            rows.append(_row(cap, "guest", YES, "/proc/cpuinfo flags", f"CPU flag {flag} inside a virtual machine"))
        elif not vm:
            rows.append(_row(cap, "guest", NO, "/proc/cpuinfo flags", "not a virtual machine (no hypervisor flag)"))
        else:
            rows.append(_row(cap, "guest", UNKNOWN, "/proc/cpuinfo flags",
                             f"a virtual machine without flag {flag}: a guest kernel too old to report it cannot "
                             "be told apart"))
    return rows


def gpu_matrix(nvml: Dict[str, Any], accelerators: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Rows for GPU confidential computing from NVML's system state (read into the NVML facts)."""
    nvidia = [a for a in accelerators if str(a.get("pci_id", "")).startswith("10de:")]
    others = [a for a in accelerators if a not in nvidia]
    rows = []
    for a in others:
        rows.append(_row("GPU confidential computing", a["bdf"], UNKNOWN, "none",
                         f"{a.get('vendor')} devices: not read by this version"))
    if not nvidia:
        return rows
    if not nvml.get("available"):
        rows.append(_row("GPU confidential computing", "NVIDIA GPUs", UNKNOWN, "NVML",
                         nvml.get("reason") or "NVML unavailable"))
        return rows
    cc = nvml.get("conf_compute") or {}
    state, caps = cc.get("state"), cc.get("capabilities")
    if caps is None:
        rows.append(_row("GPU confidential computing capable", "NVIDIA GPUs", UNKNOWN, "nvmlSystemGetConfComputeCapabilities",
                         "not readable (driver before 535, or not supported)"))
    else:
        rows.append(_row("GPU confidential computing capable", "NVIDIA GPUs", YES if caps["gpus_caps"] else NO,
                         "nvmlSystemGetConfComputeCapabilities", f"gpusCaps={caps['gpus_caps']}"))
        rows.append(_row("CPU confidential computing (NVML's view)", "host",
                         YES if caps["cpu_caps"] else NO, "nvmlSystemGetConfComputeCapabilities",
                         NVML_CPU_CAPS.get(caps["cpu_caps"], f"code {caps['cpu_caps']}")))
    if state is None:
        rows.append(_row("GPU confidential computing on", "NVIDIA GPUs", UNKNOWN, "nvmlSystemGetConfComputeState",
                         "not readable"))
    else:
        env = NVML_ENVIRONMENT.get(state["environment"], f"code {state['environment']}")
        rows.append(_row("GPU confidential computing on", "NVIDIA GPUs", YES if state["cc_feature"] else NO,
                         "nvmlSystemGetConfComputeState",
                         f"environment {env}, devtools mode {'on' if state['devtools_mode'] else 'off'}"))
    settings = cc.get("settings")
    if settings is not None:
        rows.append(_row("GPU multi-GPU protected mode", "NVIDIA GPUs",
                         YES if settings["multi_gpu_mode"] else NO, "nvmlSystemGetConfComputeSettings",
                         {0: "none", 1: "protected PCIe", 2: "NVLink encryption"}.get(settings["multi_gpu_mode"],
                                                                                       "other")))
    return rows


def collect(root: Path, nvml: Dict[str, Any], accelerators: List[Dict[str, Any]]) -> Dict[str, Any]:
    """The trusted-execution matrix: CPU rows from the kernel's files, GPU rows from the NVML facts."""
    return {"cpu": cpu_matrix(root), "gpu": gpu_matrix(nvml, accelerators),
            "sources": ["/proc/cpuinfo", "/sys/module/kvm_amd/parameters", "/sys/module/kvm_intel/parameters",
                        "/dev/sev", "/dev/sev-guest", "/dev/tdx_guest", "NVML conf-compute"]}
