"""Accelerator load generators.  Each is a context manager that always stops.

``TorchMatmulLoad`` runs a matmul loop on one torch device in a background
thread, with an adjustable duty cycle, and records what it really did (busy
time, iterations, achieved duty per period).  On every exit path the thread
is stopped and joined and the device memory is freed.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Dict, List, Optional


class LoadUnavailable(Exception):
    """No load can be applied here; the message is the reason (for SKIP/INCONCLUSIVE)."""


def torch_device_for_bdf(bdf: str) -> str:
    """Map a PCI address to a torch device string ("cuda:N"), or raise LoadUnavailable."""
    try:
        import torch
    except ImportError:
        raise LoadUnavailable("torch is not installed: no load can be applied on the accelerator") from None

    if not torch.cuda.is_available():
        raise LoadUnavailable(f"torch {torch.__version__} sees no CUDA/ROCm device (a CPU build, or no driver)")
    want = bdf.lower()
    for i in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(i)
        dom = getattr(props, "pci_domain_id", 0)
        bus = getattr(props, "pci_bus_id", None)
        dev = getattr(props, "pci_device_id", None)
        if bus is None or dev is None:
            continue
        if f"{dom:04x}:{bus:02x}:{dev:02x}.0" == want:
            return f"cuda:{i}"
    raise LoadUnavailable(f"no torch device has PCI address {bdf}")


class TorchMatmulLoad:
    def __init__(self, device: str, duty: float = 1.0, size: int = 4096, dtype: str = "float16",
                 period_s: float = 0.1):
        if not 0.0 <= duty <= 1.0:
            raise ValueError("duty must be within [0, 1]")
        self.device, self.duty, self.size, self.dtype, self.period_s = device, duty, size, dtype, period_s
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._error: Optional[str] = None
        self.timeline: List[Dict[str, float]] = []
        self.started_at = self.stopped_at = 0.0
        self.iterations = 0

    def set_duty(self, duty: float) -> None:
        self.duty = min(1.0, max(0.0, duty))

    def _run(self) -> None:
        import torch

        try:
            dt = getattr(torch, self.dtype)
            a = torch.randn(self.size, self.size, device=self.device, dtype=dt)
            b = torch.randn(self.size, self.size, device=self.device, dtype=dt)
            dev = torch.device(self.device)
            while not self._stop.is_set():
                t0 = time.perf_counter()
                busy_until = t0 + self.period_s * self.duty
                while time.perf_counter() < busy_until and not self._stop.is_set():
                    a @ b
                    if dev.type == "cuda":
                        torch.cuda.synchronize(dev)
                    self.iterations += 1
                busy = time.perf_counter() - t0
                rest = self.period_s - busy
                if rest > 0:
                    self._stop.wait(rest)
                self.timeline.append({"t": t0, "busy_s": busy, "period_s": time.perf_counter() - t0})
            del a, b
        except Exception as exc:  # recorded, never lost
            self._error = f"{type(exc).__name__}: {exc}"

    def __enter__(self) -> "TorchMatmulLoad":
        self.started_at = time.time()
        self._thread = threading.Thread(target=self._run, name=f"sits-load-{self.device}", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.stopped_at = time.time()
        try:
            import torch

            if torch.device(self.device).type == "cuda":
                torch.cuda.empty_cache()
        except Exception:
            pass

    def evidence(self) -> Dict[str, Any]:
        busy = sum(p["busy_s"] for p in self.timeline)
        total = sum(p["period_s"] for p in self.timeline)
        return {"kind": "torch-matmul", "device": self.device, "dtype": self.dtype, "size": self.size,
                "duty_requested": self.duty, "achieved_duty": round(busy / total, 4) if total else 0.0,
                "iterations": self.iterations, "periods": len(self.timeline),
                "duration_s": round(self.stopped_at - self.started_at, 3), "error": self._error,
                "thread_alive": bool(self._thread and self._thread.is_alive())}


class SimulatedLoad:
    """Stands in for a load on a simulated platform (labelled as such)."""

    def __init__(self, device: str):
        self.device = device

    def __enter__(self) -> "SimulatedLoad":
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    def evidence(self) -> Dict[str, Any]:
        return {"kind": "simulated", "device": self.device, "error": None}
