"""Host DRAM bandwidth: a STREAM-grade peak probe (numpy, threads, NUMA-bound, first touch).

STREAM rules (McCalpin): each array at least 4× the last-level cache; copy,
scale, add, triad; bytes counted 16/16/24/24 per double element; the first
iteration is a warm-up and not counted; results validated against the
scalar recurrence.  Each thread owns a contiguous chunk that it allocates and
touches itself after binding, so its pages land on the bound node.  numpy
releases the GIL inside large ufuncs and copies, so the threads run in
parallel.  The triad is computed in cache-sized blocks (``a = q*c`` then
``a += b`` on a block that is still in cache), so its DRAM traffic is the
3 arrays STREAM counts, not the 5 a naive two-pass numpy triad moves.
"""

from __future__ import annotations

import os
import re
import statistics
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

from ..probes.sysfs import read_text

KERNELS = ("copy", "scale", "add", "triad")
BYTES_PER_ELEMENT = {"copy": 16, "scale": 16, "add": 24, "triad": 24}
SCALAR = 3.0
TRIAD_BLOCK = 1 << 17  # elements: 1 MiB per array, so the second pass hits cache


def _size_bytes(text: Optional[str]) -> Optional[int]:
    if not text:
        return None
    m = re.match(r"^(\d+)\s*([KMG]?)", text.strip())
    if not m:
        return None
    return int(m.group(1)) * {"": 1, "K": 1024, "M": 1024 ** 2, "G": 1024 ** 3}[m.group(2)]


def cache_info(root: Path = Path("/")) -> List[Dict[str, Any]]:
    out = []
    base = root / "sys/devices/system/cpu/cpu0/cache"
    for d in sorted(base.glob("index*")):
        rel = str(d.relative_to(root))
        out.append({"level": int(read_text(root, f"{rel}/level") or 0), "type": read_text(root, f"{rel}/type"),
                    "size_bytes": _size_bytes(read_text(root, f"{rel}/size")),
                    "shared_cpu_list": read_text(root, f"{rel}/shared_cpu_list")})
    return out


def llc_bytes(root: Path = Path("/")) -> Optional[int]:
    caches = [c for c in cache_info(root) if c["type"] in ("Unified", "Data") and c["size_bytes"]]
    if not caches:
        return None
    return max(caches, key=lambda c: c["level"])["size_bytes"]


def expected_values(ntimes: int) -> Dict[str, float]:
    a, b, c = 1.0, 2.0, 0.0
    for _ in range(ntimes):
        c = a
        b = SCALAR * c
        c = a + b
        a = b + SCALAR * c
    return {"a": a, "b": b, "c": c}


def _triad(np: Any, a: Any, b: Any, c: Any) -> None:
    n = a.shape[0]
    for s in range(0, n, TRIAD_BLOCK):
        e = min(n, s + TRIAD_BLOCK)
        ab = a[s:e]
        np.multiply(c[s:e], SCALAR, out=ab)
        np.add(ab, b[s:e], out=ab)


def stream_peak(*, threads: int, cpus: List[int], node: Optional[int] = None,
                array_bytes: Optional[int] = None, ntimes: int = 10, llc: Optional[int] = None) -> Dict[str, Any]:
    """Run the four STREAM kernels; return per-kernel GB/s (min/median/max over iterations) as evidence."""
    import numpy as np

    from . import numa

    if ntimes < 2:
        raise ValueError("ntimes must be >= 2 (the first iteration is a warm-up)")
    llc = llc if llc is not None else llc_bytes()
    if array_bytes is None:
        array_bytes = max(4 * (llc or 32 * 1024 ** 2), 64 * 1024 ** 2)
    n_total = array_bytes // 8
    per = n_total // threads
    n_total = per * threads
    barrier = threading.Barrier(threads)
    stamps: List[List[tuple]] = [[] for _ in range(threads)]
    errors: List[str] = []
    chunks: List[Optional[Dict[str, Any]]] = [None] * threads
    bindings: List[Optional[Dict[str, Any]]] = [None] * threads
    use_cpus = cpus or sorted(os.sched_getaffinity(0))

    def kernels(i: int) -> None:
        a = np.empty(per)
        b = np.empty(per)
        c = np.empty(per)
        a.fill(1.0)  # first touch by the owning, bound thread
        b.fill(2.0)
        c.fill(0.0)
        chunks[i] = {"a": a, "b": b, "c": c}
        for _ in range(ntimes):
            for kernel in KERNELS:
                barrier.wait()
                t0 = time.perf_counter()
                if kernel == "copy":
                    np.positive(a, out=c)  # a SIMD element copy; faster than copyto's memmove here
                elif kernel == "scale":
                    np.multiply(c, SCALAR, out=b)
                elif kernel == "add":
                    np.add(a, b, out=c)
                else:
                    _triad(np, a, b, c)
                stamps[i].append((t0, time.perf_counter()))
        barrier.wait()

    def worker(i: int) -> None:
        try:
            with numa.pin(node, use_cpus[i % len(use_cpus)]) as binding:
                bindings[i] = binding
                kernels(i)
        except threading.BrokenBarrierError:
            pass
        except Exception as exc:  # recorded; the barrier is broken so the others stop too
            errors.append(f"thread {i}: {type(exc).__name__}: {exc}")
            barrier.abort()

    pool = [threading.Thread(target=worker, args=(i,), name=f"sits-stream-{i}", daemon=True)
            for i in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    if errors:
        return {"error": "; ".join(errors), "threads": threads}
    # A kernel's time is from the first thread's start to the last thread's end (the threads'
    # clocks are the same monotonic clock); a timer thread woken by a barrier would start late.
    times: Dict[str, List[float]] = {k: [] for k in KERNELS}
    for step in range(len(KERNELS), ntimes * len(KERNELS)):
        kernel = KERNELS[step % len(KERNELS)]
        times[kernel].append(max(st[step][1] for st in stamps) - min(st[step][0] for st in stamps))
    want = expected_values(ntimes)
    worst = 0.0
    for ch in chunks:
        for name in ("a", "b", "c"):
            arr = ch[name]
            err = float(np.max(np.abs(arr - want[name]))) / abs(want[name])
            worst = max(worst, err)
    results = {}
    for kernel in KERNELS:
        gbs = [BYTES_PER_ELEMENT[kernel] * n_total / t / 1e9 for t in times[kernel]]
        results[kernel] = {"gbps_min": min(gbs), "gbps_median": statistics.median(gbs), "gbps_max": max(gbs),
                           "samples_gbps": [round(g, 3) for g in gbs], "bytes_per_element": BYTES_PER_ELEMENT[kernel]}
    chunks = []  # the arrays go with it
    return {"method": "STREAM kernels in numpy, one chunk per thread, first touch after binding",
            "threads": threads, "cpus": use_cpus[:threads], "node": node, "array_bytes": n_total * 8,
            "llc_bytes": llc, "array_to_llc": round(n_total * 8 / llc, 2) if llc else None, "ntimes": ntimes,
            "kernels": results, "validated": worst <= 1e-13, "max_relative_error": worst,
            "bindings": bindings, "collected_at": time.time()}
