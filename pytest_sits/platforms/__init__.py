"""Platforms: where a session's hardware evidence comes from.

* ``live`` - this machine (:mod:`.live`).
* ``snapshot:DIR`` - files and NVML facts captured earlier by ``sits capture DIR`` (:mod:`.snapshot`).
* ``evidence:PATH[+under-load]`` - texts a vendor submitted (nvidia-smi, lspci, rocm-smi, amd-smi, kernel logs),
  each file's kind told from its content (:mod:`.evidence`).
* ``sim:PROFILE[+fault,...]`` - a machine built from a profile, with faults injected; everything it
  produces is labelled SIMULATED (:mod:`.sim`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from .base import Platform, PlatformError, build_inventory

__all__ = ["Platform", "PlatformError", "build_inventory", "from_spec"]


def from_spec(spec: str, profile_loader: Any = None, workdir: Optional[Path] = None) -> Platform:
    """``live``, ``snapshot:DIR``, ``evidence:PATH[+under-load]`` or ``sim:PROFILE[+fault,...]``.  ``workdir``:
    where a simulated machine's tree is built (default: a new temporary folder)."""
    if spec in ("", "live"):
        from .live import LivePlatform

        return LivePlatform()
    if spec.startswith("snapshot:"):
        from .snapshot import SnapshotPlatform

        return SnapshotPlatform(Path(spec[len("snapshot:"):]))
    if spec.startswith("evidence:"):
        from .evidence import EvidencePlatform, parse_spec

        path, under_load = parse_spec(spec[len("evidence:"):])
        return EvidencePlatform(path, under_load=under_load)
    if spec.startswith("sim:"):
        body = spec[len("sim:"):]
        name, _, fault_text = body.partition("+")
        faults = [f.strip() for f in fault_text.split(",") if f.strip()] if fault_text else []
        if profile_loader is None:
            from ..profiles import resolve as profile_loader
        from .sim import SimPlatform

        return SimPlatform(profile_loader(name), faults, body, workdir)
    raise PlatformError(f"unknown platform {spec!r}; fix: use live, snapshot:DIR, evidence:DIR or "
                        "sim:PROFILE[+fault,...]")
