"""Load generators.  Each is a context manager that always stops.

One duty-cycle loop (:class:`DutyCycleLoad`) serves every load: each worker
thread works for ``duty × period`` then rests for the rest of the period,
records what it really did (busy time per period), and is stopped and joined
on every exit path.  CPU workers pin themselves through
:func:`pytest_sits.conditions.numa.pin`, the one way a suite thread pins.

* :class:`TorchMatmulLoad` - a matmul loop on one torch device (GPU burner);
  device memory is freed on exit.
* :class:`CpuLoad` - numpy work on a set of CPUs (CPU burner).
"""

from __future__ import annotations

import threading
import time
from contextlib import ExitStack
from typing import Any, Callable, Dict, List, Optional


class LoadUnavailable(Exception):
    """No load can be applied here; the message is the reason (for SKIP/INCONCLUSIVE)."""


#: Why a measurement that needs torch was not made, and how to get it (docs/running.md, "Installing torch").
TORCH_MISSING = ("torch is not installed: install the build for this machine (CUDA, ROCm or CPU only; see "
                 "\"Installing torch\" in docs/running.md)")


def torch_device_for_bdf(bdf: str) -> str:
    """Map a PCI address to a torch device string ("cuda:N"), or raise LoadUnavailable."""
    try:
        import torch
    except ImportError:
        raise LoadUnavailable(f"{TORCH_MISSING}; no load can be applied on the accelerator") from None

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


class DutyCycleLoad:
    """Worker threads that each run ``step()`` for duty × period_s of every period, then rest."""

    kind = "duty-cycle"

    def __init__(self, workers: int, duty: float = 1.0, period_s: float = 0.1):
        if not 0.0 <= duty <= 1.0:
            raise ValueError("duty must be within [0, 1]")
        self.workers, self.duty, self.period_s = workers, duty, period_s
        self._stop = threading.Event()
        self._threads: List[threading.Thread] = []
        self.busy_s = [0.0] * workers
        self.periods = [0] * workers
        self.iterations = 0
        self.timeline: List[Dict[str, float]] = []  # worker 0's periods
        self.errors: List[str] = []
        self.started_at = self.stopped_at = 0.0

    def set_duty(self, duty: float) -> None:
        self.duty = min(1.0, max(0.0, duty))

    # Subclasses: a context for worker i (pinning, device buffers) that yields its step function.
    def worker(self, i: int) -> Any:
        raise NotImplementedError

    def _run(self, i: int) -> None:
        try:
            with ExitStack() as stack:
                step: Callable[[], None] = stack.enter_context(self.worker(i))
                while not self._stop.is_set():
                    t0 = time.perf_counter()
                    busy_until = t0 + self.period_s * self.duty
                    while time.perf_counter() < busy_until and not self._stop.is_set():
                        step()
                        if i == 0:
                            self.iterations += 1
                    busy = time.perf_counter() - t0
                    rest = self.period_s - busy
                    if rest > 0:
                        self._stop.wait(rest)
                    self.busy_s[i] += busy
                    self.periods[i] += 1
                    if i == 0:
                        self.timeline.append({"t": t0, "busy_s": busy, "period_s": time.perf_counter() - t0})
        except Exception as exc:  # recorded, never lost
            self.errors.append(f"worker {i}: {type(exc).__name__}: {exc}")

    def __enter__(self) -> DutyCycleLoad:
        self.started_at = time.time()
        self._threads = [threading.Thread(target=self._run, args=(i,), name=f"sits-{self.kind}-{i}", daemon=True)
                         for i in range(self.workers)]
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=10)
        self.stopped_at = time.time()

    def achieved_duty(self) -> Optional[float]:
        dur = (self.stopped_at or time.time()) - self.started_at
        return round(sum(self.busy_s) / (dur * self.workers), 4) if dur > 0 and self.workers else None

    def evidence(self) -> Dict[str, Any]:
        return {"kind": self.kind, "duty_requested": self.duty, "achieved_duty": self.achieved_duty(),
                "iterations": self.iterations, "periods": sum(self.periods),
                "duration_s": round((self.stopped_at or time.time()) - self.started_at, 3),
                "error": "; ".join(self.errors) or None,
                "alive": [t.name for t in self._threads if t.is_alive()],
                "thread_alive": any(t.is_alive() for t in self._threads)}


class TorchMatmulLoad(DutyCycleLoad):
    kind = "torch-matmul"

    def __init__(self, device: str, duty: float = 1.0, size: int = 4096, dtype: str = "float16",
                 period_s: float = 0.1):
        super().__init__(1, duty, period_s)
        self.device, self.size, self.dtype = device, size, dtype

    def worker(self, i: int) -> Any:
        from contextlib import contextmanager

        import torch

        @contextmanager
        def ctx() -> Any:
            dt = getattr(torch, self.dtype)
            dev = torch.device(self.device)
            a: Any = torch.randn(self.size, self.size, device=dev, dtype=dt)
            b: Any = torch.randn(self.size, self.size, device=dev, dtype=dt)

            def step() -> None:
                a @ b
                if dev.type == "cuda":
                    torch.cuda.synchronize(dev)
            try:
                yield step
            finally:
                a = b = None  # frees the device memory before empty_cache
                if dev.type == "cuda":
                    torch.cuda.empty_cache()
        return ctx()

    def evidence(self) -> Dict[str, Any]:
        return dict(super().evidence(), device=self.device, dtype=self.dtype, size=self.size)


class CpuLoad(DutyCycleLoad):
    """Numpy work in one thread per CPU, each pinned to its CPU, duty-cycled in 100 ms periods."""

    kind = "cpu-numpy"

    def __init__(self, cpus: List[int], duty: float = 0.5, period_s: float = 0.1, node: Optional[int] = None):
        super().__init__(len(cpus), duty, period_s)
        self.cpus, self.node = cpus, node
        self.bindings: List[Dict[str, Any]] = []

    def worker(self, i: int) -> Any:
        from contextlib import contextmanager

        import numpy as np

        from .numa import pin

        @contextmanager
        def ctx() -> Any:
            with pin(self.node, self.cpus[i]) as binding:
                self.bindings.append({"cpu": self.cpus[i], "cpus_in_force": binding.get("cpus_in_force")})
                x = np.random.default_rng(i).random(1 << 16)
                yield lambda: np.sin(x, out=x)
        return ctx()

    def evidence(self) -> Dict[str, Any]:
        return dict(super().evidence(), cpus=self.cpus, duty_final=self.duty, bindings=self.bindings)
