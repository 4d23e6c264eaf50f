"""Earlier versions of the inventory checks (:mod:`pytest_sits.checks.inventory`), kept for replay."""

from __future__ import annotations

import re
from typing import Any, Dict, Optional, Tuple, cast

from ...verdict import FAIL, INCONCLUSIVE, PASS, Verdict
from .. import Finding, check


# Frozen copy of the helper this version used.

def _version_tuple(text: Optional[str]) -> Optional[Tuple[int, ...]]:
    if not text:
        return None
    nums = re.findall(r"\d+", str(text))
    return tuple(int(n) for n in nums) if nums else None


@check("DEP-DRIVER", version=1, legacy=True)
def check_driver_v1(evidence: Dict[str, Any], thresholds: Dict[str, Any], subject: str = "") -> Verdict:
    """Version 1, kept so that its reports replay: NVIDIA driver and CUDA driver API at or above the floor; a
    version the evidence does not give counts as below it."""
    f = Finding("DEP-DRIVER", subject or "driver")
    nvml = evidence["nvml"]
    min_drv, min_cuda = thresholds["min_nvidia_driver"], thresholds["min_cuda"]
    threshold = f"driver >= {min_drv}, CUDA >= {min_cuda}"
    f.set(threshold=threshold, evidence={k: nvml.get(k) for k in ("available", "reason", "driver_version",
                                                                  "cuda_driver_version")})
    if not nvml.get("available"):
        return f(INCONCLUSIVE, f"NVIDIA devices present but the driver version cannot be read: {nvml.get('reason')}")
    drv, cuda = nvml.get("driver_version"), nvml.get("cuda_driver_version")
    measured = f"driver {drv}, CUDA {cuda}"
    low = []
    # The floors are version texts (the profile's schema): compared as the tuples of their numbers.
    have_drv, have_cuda = _version_tuple(drv), _version_tuple(cuda)
    if have_drv is None or (min_drv and have_drv < cast(Tuple[int, ...], _version_tuple(min_drv))):
        low.append(f"driver {drv} < {min_drv}")
    if have_cuda is None or (min_cuda and have_cuda < cast(Tuple[int, ...], _version_tuple(min_cuda))):
        low.append(f"CUDA {cuda} < {min_cuda}")
    if low:
        return f(FAIL, "; ".join(low), measured=measured,
                 remediation=f"install NVIDIA driver {min_drv} or newer (it carries the CUDA {min_cuda} driver API)")
    return f(PASS, f"{measured} meets the floor", measured=measured)
