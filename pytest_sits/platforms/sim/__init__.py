"""The simulated platform: a machine built from a profile with faults injected.

Everything simulated lives in this package: the fault list (``faults``), the
``/proc`` + ``/sys`` tree and NVML facts (``tree``), the thermal plant
(``thermal``) and the stand-in loads (``loads``).  Everything it produces is
labelled SIMULATED, and a simulated run is never conformant.
"""

from __future__ import annotations

import atexit
import json
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

from ..base import Platform, PlatformError
from .drift import Drift
from .faults import FAULTS
from .tree import build_sim_tree


class SimPlatform(Platform):
    kind = "sim"
    simulated = True
    link_sample_interval_s = 0.0

    def __init__(self, profile: Any, faults: List[str], spec: str, workdir: Optional[Path] = None):
        unknown = [f for f in faults if f not in FAULTS]
        if unknown:
            import difflib

            near = difflib.get_close_matches(unknown[0], list(FAULTS), n=1)
            fix = (f"did you mean {near[0]!r}?" if near
                   else f"use one of the {len(FAULTS)} faults: " + ", ".join(sorted(FAULTS)))
            raise PlatformError(f"unknown sim fault {unknown[0]!r}; fix: {fix}")
        self.profile = profile
        self.faults = list(faults)
        tmp = Path(tempfile.mkdtemp(prefix="sits-sim-", dir=str(workdir) if workdir else None))
        atexit.register(shutil.rmtree, tmp, True)
        facts = build_sim_tree(tmp, profile, self.faults)
        self._amd: Dict[str, Any] = {"available": False, "reason": "simulated platform: no AMD device",
                                     "devices": [], "errors": []}
        if facts.get("vendor") == "amd":
            self._amd, facts = facts, {"available": False, "reason": "simulated AMD devices have no NVML",
                                       "devices": [], "errors": []}
        self._nvml = facts
        #: The machine's movement between trials (fault ``drift``; factor 1 without it).
        self.drift = Drift("drift" in self.faults)
        self._dram: Optional[Any] = None
        super().__init__(tmp, f"SIMULATED sim:{spec}")

    def nvml(self) -> Dict[str, Any]:
        return json.loads(json.dumps(self._nvml))

    def amdsmi(self) -> Dict[str, Any]:
        return json.loads(json.dumps(self._amd))

    def health_reader(self) -> Any:
        from .health import SimHealthReader

        return SimHealthReader

    def crg(self) -> Any:
        from .crg import SimCrg

        return SimCrg(self.profile, self.faults, self.drift)

    def host_measurement_reason(self) -> Optional[str]:
        return "a simulated platform has no machine to measure"

    def thermal_rigs(self, kind: str, acc: Optional[Dict[str, Any]] = None) -> List[Any]:
        from .thermal import sim_rigs

        return sim_rigs(kind, acc, self.faults, self.profile)

    def inference_rig(self, acc: Optional[Dict[str, Any]], profile: Any, options: Dict[str, Any]) -> Any:
        from .inference import SimInferenceRig

        return SimInferenceRig(self.profile, self.faults, acc, self.drift)

    def environment(self) -> Any:
        """The simulated sensors around a measurement (steady in the rules; fault ``die-drift``)."""
        from .environment import SimEnvironment

        return SimEnvironment(self)

    def dram(self) -> Any:
        """The simulated host DRAM plant (steady, or drifting with fault ``drift``)."""
        if self._dram is None:
            from .bandwidth import SimDram

            self._dram = SimDram(self.faults)
        return self._dram

    def _copies(self, g: float, runs: int) -> Dict[str, Any]:
        s = [round(g * self.drift.factor(), 3) for _ in range(runs)]
        return {"gbps_median": sorted(s)[len(s) // 2], "gbps_min": min(s), "gbps_max": max(s), "samples_gbps": s}

    def device_bandwidth(self, acc: Dict[str, Any], nbytes: int, runs: int = 7) -> Dict[str, Any]:
        eff = 0.40 if "membw-low" in self.faults else 0.80 if "membw-slow" in self.faults else 0.90
        g = float(self.profile.hardware.get("memory_bandwidth_gbps", 0)) * eff
        return {"device": acc["bdf"], "bytes": nbytes, "runs": runs, "verified": True, "simulated": True,
                "method": "simulated on-device copies" + (" (fault drift: the machine moves between copies)"
                                                          if self.drift.on else ""), **self._copies(g, runs)}

    def host_device_bandwidth(self, acc: Dict[str, Any], nbytes: int, runs: int = 7) -> Dict[str, Any]:
        from ...probes.pcie import link_theoretical_gbps

        link = acc["link"]
        theo = link_theoretical_gbps(link["current_gen"], link["current_width"])
        g = theo * (0.30 if "pcie-bw-low" in self.faults else 0.85)
        self.dram().spend(0.5 + 2 * runs * nbytes / (g * 1e9))  # pinning and copies, while a hold runs
        return {"device": acc["bdf"], "bytes": nbytes, "runs": runs, "pinned": True, "verified": True,
                "simulated": True, "method": "simulated pinned copies" + (" (fault drift: the machine moves between "
                                                                           "copies)" if self.drift.on else ""),
                "h2d": self._copies(g, runs), "d2h": self._copies(g, runs)}

    def accelerator_load(self, acc: Dict[str, Any]) -> Any:
        from ...conditions.loads import LoadUnavailable
        from .loads import SimulatedLoad

        if "link-idle" in self.faults:
            raise LoadUnavailable("simulated: no load generator (fault link-idle)")
        return SimulatedLoad(acc["bdf"])

    @contextmanager
    def numa_binding(self, node: int, cpus: List[int]) -> Iterator[Dict[str, Any]]:
        yield {"node": node, "requested_cpus": sorted(cpus), "applied": True, "simulated": True,
               "method": "simulated", "cpus_in_force": sorted(cpus),
               "memory_policy_in_force": {"mode": "bind", "nodes": [node]}, "errors": []}
