"""Accelerator memory bandwidth and host<->device bandwidth, through torch (a measurement that loads the
device: it allocates buffers and runs copies, so it lives with the conditions).

Device-generic: a torch device string ("cuda:0" for CUDA and ROCm, "cpu"
for the host, which the tests use).  On CUDA devices the copies are timed
with CUDA events, elsewhere with perf_counter after a synchronise.  Every
copy's data is verified afterwards (as nvbandwidth does): a bandwidth figure
from a copy that corrupted data is not reported as a bandwidth.
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable, Dict, List



def _timer(torch: Any, device: Any) -> Callable[[Callable[[], Any]], float]:
    if device.type == "cuda":
        def run(fn: Callable[[], Any]) -> float:
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / 1000.0
        return run

    def run_cpu(fn: Callable[[], Any]) -> float:
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0
    return run_cpu


def _stats(gbps: List[float]) -> Dict[str, Any]:
    return {"gbps_median": statistics.median(gbps), "gbps_min": min(gbps), "gbps_max": max(gbps),
            "samples_gbps": [round(g, 3) for g in gbps]}


def device_memory_bandwidth(device: str, nbytes: int = 1 << 30, runs: int = 7) -> Dict[str, Any]:
    """Large on-device copies; bandwidth counts read + write (2 × bytes) per copy."""
    import torch

    dev = torch.device(device)
    n = nbytes // 4
    src: Any = torch.arange(n, dtype=torch.int32, device=dev)
    dst: Any = torch.empty_like(src)
    timer = _timer(torch, dev)
    dst.copy_(src)  # warm-up
    times = [timer(lambda: dst.copy_(src)) for _ in range(runs)]
    verified = bool(torch.equal(dst, src))
    out = {"device": device, "bytes": n * 4, "runs": runs, "counted_bytes_per_copy": 2 * n * 4,
           "method": "tensor.copy_ on the device, read + write counted, median of runs, data verified",
           "verified": verified, **_stats([2 * n * 4 / t / 1e9 for t in times])}
    src = dst = None  # frees the device memory before empty_cache
    if dev.type == "cuda":
        torch.cuda.empty_cache()
    return out


def host_device_bandwidth(device: str, nbytes: int = 256 << 20, runs: int = 7) -> Dict[str, Any]:
    """Pinned host memory to device and back; each direction's median, data verified."""
    import torch

    dev = torch.device(device)
    n = nbytes // 4
    pinned = dev.type == "cuda"
    host: Any = torch.arange(n, dtype=torch.int32).pin_memory() if pinned else torch.arange(n, dtype=torch.int32)
    back: Any = torch.empty(n, dtype=torch.int32, pin_memory=pinned)
    on_dev: Any = torch.empty(n, dtype=torch.int32, device=dev)
    timer = _timer(torch, dev)
    on_dev.copy_(host, non_blocking=pinned)
    h2d = [timer(lambda: on_dev.copy_(host, non_blocking=pinned)) for _ in range(runs)]
    d2h = [timer(lambda: back.copy_(on_dev, non_blocking=pinned)) for _ in range(runs)]
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    verified = bool(torch.equal(back, host))
    out = {"device": device, "bytes": n * 4, "runs": runs, "pinned": pinned, "verified": verified,
           "method": "pinned host tensor copy_ each way, median of runs, data verified",
           "h2d": _stats([n * 4 / t / 1e9 for t in h2d]), "d2h": _stats([n * 4 / t / 1e9 for t in d2h])}
    host = back = on_dev = None  # frees the buffers before empty_cache
    if dev.type == "cuda":
        torch.cuda.empty_cache()
    return out
