"""The live rig: what the inference acquire functions need from a live platform (the built-in model on one
device, its power sources, its allocator); the simulated platform brings its own
(:class:`pytest_sits.platforms.sim.inference.SimInferenceRig`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ...inference import torch_missing


class InferenceUnavailable(Exception):
    """The platform cannot run an inference workload; the message says why."""


class InferenceRig:
    """The built-in model on one device of this machine, its power sources, and where the logs go."""

    simulated = False

    def __init__(self, subject: str, device: str, accelerator_kind: Optional[str] = None,
                 device_index: Optional[int] = None, root: Path = Path("/"),
                 redfish: Optional[Dict[str, Any]] = None, hardware: Optional[Dict[str, Any]] = None):
        self.subject, self.device = subject, device
        self.accelerator_kind, self.device_index = accelerator_kind, device_index
        self.root, self.redfish = Path(root), redfish
        self.hardware = dict(hardware or {})

    def missing(self) -> Optional[str]:
        return torch_missing()

    def engine(self, model: Dict[str, Any]) -> Any:
        from ...inference.model import Engine, ModelConfig

        return Engine(ModelConfig.from_thresholds(model), self.device)

    def power_sources(self) -> Tuple[List[Any], List[str]]:
        from ...probes.power import discover

        return discover(self.root, self.accelerator_kind, self.device_index, self.redfish)

    def primary(self, sources: Sequence[Any]) -> List[str]:
        """The sources whose sum is the device's power P: the accelerator's own sensor, else the CPU packages
        (RAPL top-level zones, without psys) plus DRAM."""
        dev = device_sources(sources)
        return dev[:1] if dev else rapl_packages(sources)

    def coldstart(self, model: Dict[str, Any], evict_how: str, timeout_s: float) -> Dict[str, Any]:
        from ...inference.coldstart import measure

        return measure(model, self.device, evict_how, timeout_s)

    def allocator_stats(self) -> Optional[Dict[str, Any]]:
        if not str(self.device).startswith("cuda"):
            return None
        import torch

        return torch.cuda.memory_stats(self.device)


def device_sources(sources: Sequence[Any]) -> List[str]:
    """The names of the accelerators' own power sensors (NVML, amdsmi) among ``sources``."""
    return [s.name for s in sources if s.name.startswith(("nvml:", "amdsmi:"))]


def rapl_packages(sources: Sequence[Any]) -> List[str]:
    """The RAPL sources whose sum is the host's power: the top-level package zones and DRAM, without psys (which
    holds them)."""
    return [s.name for s in sources if s.kind == "rapl" and "psys" not in s.name
            and (s.name.count(":") == 2 or s.name.endswith(":dram"))]


def live_rig(acc: Optional[Dict[str, Any]], options: Dict[str, Any], hardware: Dict[str, Any]) -> InferenceRig:
    """The rig for an accelerator (its torch device) or, with none, for the CPU."""
    if acc is None:
        return InferenceRig("cpu", "cpu", None, None, redfish=options.get("redfish"), hardware=hardware)
    from ..loads import LoadUnavailable, torch_device_for_bdf

    try:
        device = torch_device_for_bdf(acc["bdf"])
    except LoadUnavailable as exc:
        raise InferenceUnavailable(str(exc)) from None
    kind = {"NVIDIA": "nvidia", "AMD": "amd"}.get(str(acc.get("vendor")), None)
    idx = (acc.get("management") or {}).get("index")
    return InferenceRig(acc["bdf"], device, kind, idx, redfish=options.get("redfish"), hardware=hardware)
