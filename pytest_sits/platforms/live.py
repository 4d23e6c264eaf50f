"""The live platform: this machine (``/proc``, ``/sys``, NVML, amdsmi)."""

from __future__ import annotations

from pathlib import Path

from .base import Platform


class LivePlatform(Platform):
    kind = "live"

    def __init__(self) -> None:
        super().__init__(Path("/"), "live")
