"""Accelerator memory bandwidth and host<->device bandwidth, through torch (a measurement that loads the
device: it allocates buffers and runs copies, so it lives with the conditions).

Device-generic: a torch device string ("cuda:0" for CUDA and ROCm, "cpu"
for the host, which the tests use).  On CUDA devices the copies are timed
with CUDA events, queued behind a gate (:func:`_timed`), elsewhere with
perf_counter after a synchronise.  Every
copy's data is verified afterwards (as nvbandwidth does): a bandwidth figure
from a copy that corrupted data is not reported as a bandwidth.
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable, Dict, List, Optional, Tuple



#: The gate's length in GPU clock cycles (about 50 ms at 2 GHz): every timed copy is queued behind it.
GATE_CYCLES = 100_000_000


def _timed(torch: Any, device: Any, fn: Callable[[], Any], runs: int) -> Tuple[List[float], Optional[bool]]:
    """Seconds of each of ``runs`` calls of ``fn`` and whether the timing is the device's alone.

    On CUDA (and ROCm) each call is timed by a pair of events, and every pair and call is queued behind a gate (a
    spin kernel, ``torch.cuda._sleep``, about 50 ms) before the device reaches them: a host thread delayed between
    launches (a busy machine, another thread holding the interpreter lock) would otherwise leave the device idle
    between the events, and the idle time would be counted as copy time.  The second value says whether the gate
    was still closed when the last call was queued (None where there is no gate: no CUDA, or a torch without
    ``_sleep``).  Elsewhere each call is timed with perf_counter after a synchronise."""
    if device.type == "cuda":
        gate = getattr(torch.cuda, "_sleep", None)
        with torch.cuda.device(device):
            torch.cuda.synchronize(device)
            opened = None
            if gate is not None:
                gate(GATE_CYCLES)
                opened = torch.cuda.Event()
                opened.record()
            pairs = []
            for _ in range(runs):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                fn()
                end.record()
                pairs.append((start, end))
            held = None if opened is None else not opened.query()
            torch.cuda.synchronize(device)
        return [s.elapsed_time(e) / 1000.0 for s, e in pairs], held

    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out, None


def all_gated(*gated: Optional[bool]) -> Optional[bool]:
    """Whether every look (or direction) was timed behind a gate that held: None where one had no gate."""
    return None if any(g is None for g in gated) else all(gated)


def _how(gated: Optional[bool]) -> str:
    if gated is None:
        return "each copy timed on the host after a synchronise, median of runs"
    return ("each copy timed by CUDA events, queued behind a gate so host delays between launches are not counted "
            + ("(the gate held until the last copy was queued)" if gated else
               "(the gate opened before the last copy was queued: a host delay may be counted)"))


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
    dst.copy_(src)  # warm-up
    times, gated = _timed(torch, dev, lambda: dst.copy_(src), runs)
    verified = bool(torch.equal(dst, src))
    out = {"device": device, "bytes": n * 4, "runs": runs, "counted_bytes_per_copy": 2 * n * 4,
           "method": "tensor.copy_ on the device, read + write counted, " + _how(gated) + ", data verified",
           "gated": gated, "verified": verified, **_stats([2 * n * 4 / t / 1e9 for t in times])}
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
    on_dev.copy_(host, non_blocking=pinned)
    h2d, gated_h2d = _timed(torch, dev, lambda: on_dev.copy_(host, non_blocking=pinned), runs)
    d2h, gated_d2h = _timed(torch, dev, lambda: back.copy_(on_dev, non_blocking=pinned), runs)
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    verified = bool(torch.equal(back, host))
    gated = all_gated(gated_h2d, gated_d2h)
    out = {"device": device, "bytes": n * 4, "runs": runs, "pinned": pinned, "verified": verified, "gated": gated,
           "method": "pinned host tensor copy_ each way, " + _how(gated) + ", data verified",
           "h2d": _stats([n * 4 / t / 1e9 for t in h2d]), "d2h": _stats([n * 4 / t / 1e9 for t in d2h])}
    host = back = on_dev = None  # frees the buffers before empty_cache
    if dev.type == "cuda":
        torch.cuda.empty_cache()
    return out
