"""``mthreads-gmi`` (Moore Threads): read as Moore Threads's accelerators, never as NVIDIA's (:mod:`.vendor_smi`)."""

from __future__ import annotations

from typing import Any, Dict, Iterable, Optional

from .base import Detection
from .vendor_smi import _MT_BANNER, VendorTable, parse_mthreads_gmi


class MthreadsGmi(VendorTable):
    kinds = {"mthreads-gmi": "mthreads-gmi"}
    order = 9  # its banner is its own: before nvidia-smi -q, whose look-alike it is
    option = "--mthreads-gmi"
    option_help = "`mthreads-gmi` output (Moore Threads)"

    def detect(self, head: str) -> Optional[Detection]:
        if _MT_BANNER.search(head[:65536]):
            return "mthreads-gmi", "an `mthreads-gmi` banner (Moore Threads)"
        return None

    def parse(self, kind: str, text: str, known_ids: Iterable[str] = ()) -> Dict[str, Any]:
        return parse_mthreads_gmi(text)


READER = MthreadsGmi()
