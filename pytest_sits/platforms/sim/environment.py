"""The simulated machine's test environment: what its sensors read while a requirement is measured.

Every GPU die reads steady at 70 °C and every CPU package at 64 °C (a tenth of a degree of dither, 0.1 °C steps),
host DRAM occupancy is held at 0.885 of the peak in every 100 ms window, and the measuring process is bound to the
accelerator's node: the rules of document A §2.4 hold.  The readings are made for the window of the measurement on
the simulated clock (one a second, over at least :data:`MIN_SECONDS`: a simulated measurement takes next to no
wall time), so a report replays them as they were.
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Optional

FAULTS = {
    "die-drift": "the second GPU's die drifts out of its band during the inference sweep (PLP-*): from 70 °C up "
                 "0.1 °C a second, past 72 °C; its PLP verdicts are INCONCLUSIVE, every other device decides",
}

#: The simulated length of a measurement's window, at least (seconds; one reading a second).
MIN_SECONDS = 60
DIE_C, PACKAGE_C = 70.0, 64.0
DRIFT_C_PER_S = 0.1


class SimEnvironment:
    simulated = True

    def __init__(self, platform: Any):
        self.platform = platform
        accs = platform.inventory().get("accelerators", [])
        self.dies = [a["bdf"] for a in accs]
        self.nodes = {a["bdf"]: a.get("numa_node") for a in accs}
        self.packages = sorted({n["node"] for n in platform.inventory().get("numa") or []}) or [0]
        self.drifting = self.dies[1] if "die-drift" in platform.faults and len(self.dies) > 1 else None

    def _series(self, base: float, seconds: int, phase: int, drift: float = 0.0) -> List[List[Any]]:
        return [[float(i), round(base + 0.1 * math.sin(i * 0.7 + phase) + drift * i, 1)] for i in range(seconds + 1)]

    def trace(self, t0: float, t1: float, requirement: str, device: Optional[str]) -> Dict[str, Any]:
        seconds = int(max(MIN_SECONDS, min(3600, math.ceil(t1 - t0))))
        sensors: Dict[str, Any] = {}
        for i, bdf in enumerate(self.dies):
            drift = DRIFT_C_PER_S if (bdf == self.drifting and requirement.startswith("PLP-")
                                      and device == bdf) else 0.0
            sensors[f"die {bdf}"] = {"kind": "gpu_die", "label": f"{bdf} die", "device": bdf, "step_c": 0.1,
                                     "source": "simulated die sensor", "samples": self._series(DIE_C, seconds, i, drift)}
        for p in self.packages:
            sensors[f"cpu package {p}"] = {"kind": "cpu_package", "label": f"package {p}", "step_c": 0.1,
                                           "source": "simulated package sensor",
                                           "samples": self._series(PACKAGE_C, seconds, 10 + p)}
        windows = seconds * 10
        node = self.nodes.get(device) if device else None
        return {"sensors": sensors, "not_measured": {},
                "dram": {"windows": windows, "windows_in_band": windows, "source": "simulated DRAM hold (0.885)"},
                "numa": {"node": node, "bound": True, "why": "simulated: the measurement runs on the device's node",
                         "source": "simulated"}}

    def numa(self, node: Optional[int]) -> Dict[str, Any]:
        return {"node": node, "bound": True, "why": "simulated", "source": "simulated"}

    def close(self) -> None:
        pass
