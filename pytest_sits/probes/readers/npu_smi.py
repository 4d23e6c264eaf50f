"""``npu-smi info`` (Huawei Ascend): read as Huawei Ascend's accelerators, never as NVIDIA's (:mod:`.vendor_smi`)."""

from __future__ import annotations

from typing import Any, Dict, Iterable, Optional

from .base import Detection
from .vendor_smi import _NPU_BANNER, VendorTable, parse_npu_smi


class NpuSmi(VendorTable):
    kinds = {"npu-smi": "npu-smi info"}
    order = 8  # its banner is its own: before nvidia-smi -q, whose look-alike it is
    option = "--npu-smi"
    option_help = "`npu-smi info` output (Huawei Ascend)"

    def detect(self, head: str) -> Optional[Detection]:
        if _NPU_BANNER.search(head[:65536]) and "Bus-Id" in head[:65536]:
            return "npu-smi", "an `npu-smi` banner and its NPU/Chip table (Huawei Ascend)"
        return None

    def parse(self, kind: str, text: str, known_ids: Iterable[str] = ()) -> Dict[str, Any]:
        return parse_npu_smi(text)


READER = NpuSmi()
