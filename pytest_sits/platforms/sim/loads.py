"""Stand-in loads of the simulated platform (labelled as such in the evidence)."""

from __future__ import annotations

from typing import Any, Dict


class SimulatedLoad:
    """Stands in for a load on a simulated platform (labelled as such)."""

    def __init__(self, device: str):
        self.device = device

    def __enter__(self) -> SimulatedLoad:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    def evidence(self) -> Dict[str, Any]:
        return {"kind": "simulated", "device": self.device, "error": None}
