"""Recorded platforms: evidence taken on a machine earlier (a snapshot, submitted texts), with no machine here to
load, bind or measure.

Every condition that would act on the machine says why it cannot; that reason becomes the verdict's "not
measured" reason.  A subclass names what it holds in its messages.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Dict, Iterator, List, Optional

from .base import Platform


class RecordedPlatform(Platform):
    """A platform whose readings were recorded elsewhere: files never change, and nothing can act on them."""

    link_sample_interval_s = 0.0
    #: What the platform holds, as the subject of its messages ("a snapshot", "submitted texts").
    recorded: str = "recorded evidence"
    #: Why no load can run (the link readings are the recorded ones).
    no_load: str = "recorded evidence cannot apply load"
    #: Why nothing can be measured on the host, and on a device.
    no_host: str = "recorded evidence holds readings, not a machine to measure"
    no_device: str = "recorded evidence holds no device to measure"
    #: Why no process can be bound to a NUMA node.
    no_binding: str = "recorded evidence cannot bind processes on the machine it came from"

    def accelerator_load(self, acc: Dict[str, Any]) -> Any:
        from ..conditions.loads import LoadUnavailable

        raise LoadUnavailable(self.no_load)

    def host_measurement_reason(self) -> Optional[str]:
        return self.no_host

    def device_bandwidth(self, acc: Dict[str, Any], nbytes: int, runs: int = 7) -> Dict[str, Any]:
        from ..conditions.loads import LoadUnavailable

        raise LoadUnavailable(self.no_device)

    def host_device_bandwidth(self, acc: Dict[str, Any], nbytes: int, runs: int = 7) -> Dict[str, Any]:
        return self.device_bandwidth(acc, nbytes, runs)

    def inference_rig(self, acc: Optional[Dict[str, Any]], profile: Any, options: Dict[str, Any]) -> Any:
        from ..conditions.inference import InferenceUnavailable

        raise InferenceUnavailable(f"{self.recorded} cannot run an inference workload")

    def environment(self) -> Any:
        """None: the texts were taken on another machine, at another time; nothing is read around a measurement."""
        return None

    def thermal_rigs(self, kind: str, acc: Optional[Dict[str, Any]] = None) -> List[Any]:
        from ..conditions.thermal import ThermalUnavailable

        raise ThermalUnavailable(f"{self.recorded} cannot run a thermal calibration", present=False)

    @contextmanager
    def numa_binding(self, node: int, cpus: List[int]) -> Iterator[Dict[str, Any]]:
        yield {"node": node, "requested_cpus": sorted(cpus), "applied": None, "reason": self.no_binding}
