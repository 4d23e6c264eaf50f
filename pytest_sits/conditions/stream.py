"""Host DRAM bandwidth: a STREAM-grade peak probe (numpy, threads, NUMA-bound, first touch).

STREAM rules (McCalpin): each array at least 4× the last-level cache; copy,
scale, add, triad; bytes counted 16/16/24/24 per double element; the first
iteration is a warm-up and not counted; results validated against the
scalar recurrence.  Each thread owns a contiguous chunk that it allocates and
touches itself after binding, so its pages land on the bound node.  numpy
releases the GIL inside large ufuncs and copies, so the threads run in
parallel.  The arrays start on a page boundary: numpy's AVX-512 loops on
the 16-byte-aligned buffers a plain ``np.empty`` returns split every vector
across two cache lines, which costs add and scale about a quarter of their
bandwidth.  numpy has no fused multiply-add ufunc, so the triad is computed
in blocks sized from the per-core L2 cache (``a = q*c`` then ``a += b`` on a
block that is still in L2): its DRAM traffic is the 3 arrays STREAM counts,
not the 5 a naive two-pass numpy triad moves, but the core still makes two
passes where compiled code makes one.
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
ALIGN_BYTES = 4096  # arrays start on a page (hence cache-line) boundary
TRIAD_BLOCK_DEFAULT = 1 << 14  # elements, when sysfs does not say how large L2 is
TRIAD_BLOCK_MIN, TRIAD_BLOCK_MAX = 1 << 12, 1 << 17


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


def l2_bytes(root: Path = Path("/")) -> Optional[int]:
    """Size of one core's level-2 data (or unified) cache, from sysfs; None when not listed."""
    sizes = [c["size_bytes"] for c in cache_info(root)
             if c["level"] == 2 and c["type"] in ("Unified", "Data") and c["size_bytes"]]
    return sizes[0] if sizes else None


def triad_block(l2: Optional[int]) -> int:
    """Elements per triad block: the largest power of two whose three blocks (a, b, c) fill
    at most 3/4 of L2, so the second pass over ``a`` hits L2; 4096..131072."""
    if not l2:
        return TRIAD_BLOCK_DEFAULT
    block = TRIAD_BLOCK_MIN
    while block * 2 <= TRIAD_BLOCK_MAX and 3 * 8 * block * 2 <= l2 * 3 // 4:
        block *= 2
    return block


def _aligned_empty(np: Any, n: int) -> Any:
    """A float64 array of ``n`` elements starting on an ALIGN_BYTES boundary (untouched: the caller
    touches it first, from the thread that owns it)."""
    raw = np.empty(n * 8 + ALIGN_BYTES, dtype=np.uint8)
    off = (-raw.__array_interface__["data"][0]) % ALIGN_BYTES
    return raw[off:off + n * 8].view(np.float64)


def expected_values(ntimes: int) -> Dict[str, float]:
    a, b, c = 1.0, 2.0, 0.0
    for _ in range(ntimes):
        c = a
        b = SCALAR * c
        c = a + b
        a = b + SCALAR * c
    return {"a": a, "b": b, "c": c}


def _triad_blocks(np: Any, a: Any, b: Any, c: Any, block: int) -> Any:
    """The triad ``a = b + q*c`` as a function over precomputed block views (no slicing, no
    keyword parsing and no scalar conversion inside the timed loop)."""
    views = [(a[s:s + block], b[s:s + block], c[s:s + block]) for s in range(0, a.shape[0], block)]
    q = np.array(SCALAR)
    multiply, add = np.multiply, np.add

    def triad() -> None:
        for ab, bb, cb in views:
            multiply(cb, q, ab)
            add(ab, bb, ab)
    return triad


def stream_peak(*, threads: int, cpus: List[int], node: Optional[int] = None,
                array_bytes: Optional[int] = None, ntimes: int = 10, llc: Optional[int] = None) -> Dict[str, Any]:
    """Run the four STREAM kernels; return per-kernel GB/s (min/median/max over iterations) as evidence,
    with the best GB/s over the busiest thread's CPU time and the median share of the wall time that
    thread was on a CPU (below 1 when other processes took the CPUs during the measurement)."""
    import numpy as np

    from . import numa

    if ntimes < 2:
        raise ValueError("ntimes must be >= 2 (the first iteration is a warm-up)")
    llc = llc if llc is not None else llc_bytes()
    block = triad_block(l2_bytes())
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
        a = _aligned_empty(np, per)
        b = _aligned_empty(np, per)
        c = _aligned_empty(np, per)
        a.fill(1.0)  # first touch by the owning, bound thread
        b.fill(2.0)
        c.fill(0.0)
        chunks[i] = {"a": a, "b": b, "c": c}
        triad = _triad_blocks(np, a, b, c, block)
        for _ in range(ntimes):
            for kernel in KERNELS:
                barrier.wait()
                t0 = time.perf_counter()
                c0 = time.thread_time()
                if kernel == "copy":
                    # A SIMD element copy with plain stores, like compiled STREAM and the hold's injectors;
                    # copyto's memmove switches to non-temporal stores on large copies (no read for
                    # ownership), a different and about twice as fast measurement.
                    np.positive(a, out=c)
                elif kernel == "scale":
                    np.multiply(c, SCALAR, out=b)
                elif kernel == "add":
                    np.add(a, b, out=c)
                else:
                    triad()
                t1 = time.perf_counter()
                stamps[i].append((t0, t1, time.thread_time() - c0))
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
    # Each thread also reads its own CPU time around its part: the busiest thread's CPU time is the
    # kernel's time had no other process taken the CPUs, and its share of the wall time says how
    # much they did.
    times: Dict[str, List[float]] = {k: [] for k in KERNELS}
    busiest: Dict[str, List[float]] = {k: [] for k in KERNELS}
    for step in range(len(KERNELS), ntimes * len(KERNELS)):
        kernel = KERNELS[step % len(KERNELS)]
        times[kernel].append(max(st[step][1] for st in stamps) - min(st[step][0] for st in stamps))
        busiest[kernel].append(max(st[step][2] for st in stamps))
    want = expected_values(ntimes)
    worst = 0.0
    for ch in chunks:
        assert ch is not None  # every thread filled its part (a failed thread returned above)
        for name in ("a", "b", "c"):
            arr = ch[name]
            err = float(np.max(np.abs(arr - want[name]))) / abs(want[name])
            worst = max(worst, err)
    results = {}
    for kernel in KERNELS:
        gbs = [BYTES_PER_ELEMENT[kernel] * n_total / t / 1e9 for t in times[kernel]]
        on_cpu = [BYTES_PER_ELEMENT[kernel] * n_total / c / 1e9 for c in busiest[kernel] if c > 0]
        results[kernel] = {"gbps_min": min(gbs), "gbps_median": statistics.median(gbs), "gbps_max": max(gbs),
                           "samples_gbps": [round(g, 3) for g in gbs], "bytes_per_element": BYTES_PER_ELEMENT[kernel],
                           "gbps_on_cpu_max": max(on_cpu) if on_cpu else None,
                           "cpu_share_median": round(statistics.median(
                               min(1.0, c / t) for c, t in zip(busiest[kernel], times[kernel])), 3)}
    chunks = []  # the arrays go with it
    return {"method": "STREAM kernels in numpy, one page-aligned chunk per thread, first touch after binding",
            "threads": threads, "cpus": use_cpus[:threads], "node": node, "array_bytes": n_total * 8,
            "llc_bytes": llc, "array_to_llc": round(n_total * 8 / llc, 2) if llc else None, "ntimes": ntimes,
            "alignment_bytes": ALIGN_BYTES, "triad_block_elements": block,
            "kernels": results, "validated": worst <= 1e-13, "max_relative_error": worst,
            "bindings": bindings, "collected_at": time.time()}
