"""Acquire the compute-ready graph's evidence (document B §2.5) on this machine.

* CRG-NODE: dense GEMM TFLOPS per device in float16 and bfloat16 (torch; a block of the product is checked
  against a float32 product of the same inputs).
* CRG-EDGE: device-to-device copy bandwidth of every ordered pair (torch copies; peer access recorded; NVLink
  data counters read before and after when NVML offers them).
* CRG-SYNC: all-reduce bus bandwidth through ``torch.distributed``: NCCL with one spawned process per GPU,
  or gloo with two forked processes on the CPU when the host has no accelerator (nothing of a device context
  is inherited, and forking saves re-importing torch).  Processes meet through a file store in a private
  temporary folder (no network port), are joined with a timeout and killed if they hang.
* CRG-JITTER: the timer's reported resolution (``time.get_clock_info``) and measured granularity (smallest
  non-zero step between back-to-back ``perf_counter_ns`` readings), and the latency distribution of a fixed
  small operation on the node.

Every function returns evidence, or ``{"absent": reason}`` when the thing to measure is not there.
"""

from __future__ import annotations

import functools
import os
import statistics
import tempfile
import time
from typing import Any, Dict, List, Optional, Tuple

from ..checks.crg import busbw, percentiles
from ..probes.nvml import nvlink_tx_kib
from .loads import TORCH_MISSING, LoadUnavailable, torch_device_for_bdf
from .trials import TrialPlan, next_step, sequential


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        raise LoadUnavailable(TORCH_MISSING) from None
    return torch


def _sync(torch: Any, dev: Any) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def gemm_tflops(device: str, dtype: str, size: int = 8192, iterations: int = 20, repeats: int = 3) -> Dict[str, Any]:
    """Dense ``size``³ GEMM throughput on ``device`` (median of ``repeats`` timed loops of ``iterations``)."""
    torch = _torch()
    dev = torch.device(device)
    dt = getattr(torch, dtype)
    out: Dict[str, Any] = {"dtype": dtype, "size": size, "iterations": iterations, "repeats": repeats,
                           "device": device, "tflops": None, "verified": False}
    try:
        gen = torch.Generator(device=dev).manual_seed(1234)
        a = torch.randn(size, size, device=dev, dtype=dt, generator=gen)
        b = torch.randn(size, size, device=dev, dtype=dt, generator=gen)
        c = a @ b  # warm-up (kernel selection)
        _sync(torch, dev)
        k = min(64, size)
        ref = a[:k].float() @ b[:, :k].float()
        err = (c[:k, :k].float() - ref).abs().max().item()
        scale = ref.abs().max().item() or 1.0
        tol = {"float16": 2e-2, "bfloat16": 6e-2}.get(dtype, 1e-3)
        out["max_rel_error"] = err / scale
        out["verified"] = bool(err / scale <= tol)
        rates = []
        for _ in range(repeats):
            _sync(torch, dev)
            t0 = time.perf_counter()
            for _ in range(iterations):
                c = a @ b
            _sync(torch, dev)
            dt_s = time.perf_counter() - t0
            rates.append(2.0 * size ** 3 * iterations / dt_s / 1e12)
        out["samples_tflops"] = [round(r, 6) for r in rates]
        out["tflops"] = round(statistics.median(rates), 6)
        del a, b, c, ref
    except Exception as exc:  # out of memory, a dtype the device lacks: recorded, never a number
        out["error"] = f"{type(exc).__name__}: {exc}"[:300]
    finally:
        if dev.type == "cuda":
            torch.cuda.empty_cache()
    return out


def _merge_samples(into: Dict[str, Any], new: Dict[str, Any], key: str) -> None:
    """Add a look's samples (``key``) to the first look's record; a look that broke is recorded, not merged."""
    if new.get("error") or new.get("reason"):
        into.setdefault("later_errors", []).append(new.get("error") or new.get("reason"))
        return
    into[key] = list(into.get(key) or []) + list(new.get(key) or [])
    into["verified"] = bool(into.get("verified")) and bool(new.get("verified"))


def measure_node(acc: Dict[str, Any], th: Dict[str, Any], gemm: Any, plan: Optional[TrialPlan] = None,
                 method: str = "") -> Dict[str, Any]:
    """CRG-NODE's evidence: ``gemm(dtype, k)`` (one look: ``k`` timed loops of one dtype) repeated per dtype until
    the check's rule decides every dtype (:func:`pytest_sits.checks.crg.node_decisions`), every loop kept."""
    from ..checks.crg import node_decisions
    from ..checks.interval import combine

    dtypes = list(th["dtypes"])
    plan = plan or TrialPlan.default("CRG-NODE")
    results: Dict[str, Dict[str, Any]] = {}

    def evidence(looks: int) -> Dict[str, Any]:
        rs = []
        for d in dtypes:
            r = dict(results[d])
            if r.get("samples_tflops"):
                r["tflops"] = round(statistics.median(r["samples_tflops"]), 6)
                r["repeats"] = len(r["samples_tflops"])
            rs.append(r)
        return {"device": acc["bdf"], "results": rs, "method": method, "sequential": {"looks": looks}}

    def look(k: int, index: int) -> List[Dict[str, Any]]:
        for d in dtypes:
            r = gemm(d, k)
            if d not in results:
                results[d] = r
            else:
                _merge_samples(results[d], r, "samples_tflops")
        return [{"index": index + i} for i in range(k)]

    def judge(trials: List[Dict[str, Any]], looks: int) -> str:
        ds = node_decisions(evidence(looks), th)
        return next_step(combine(ds)) if ds else "never"

    out = sequential(look, judge, plan)
    ev = evidence(out["sequential"]["looks"])
    ev["sequential"] = out["sequential"]
    ev["sequential"]["trials"] = max((len(r.get("samples_tflops") or []) for r in ev["results"]), default=0)
    return ev


def acquire_node(acc: Dict[str, Any], th: Dict[str, Any], plan: Optional[TrialPlan] = None) -> Dict[str, Any]:
    try:
        device = torch_device_for_bdf(acc["bdf"])
    except LoadUnavailable as exc:
        return {"unavailable": f"{acc['bdf']}: {exc}"}
    size, iters = int(th["size"]), int(th["iterations"])
    ev = measure_node(acc, th, lambda d, k: gemm_tflops(device, d, size, iters, repeats=max(2, k)), plan,
                      method=f"torch matmul {size}×{size}×{size}, {iters} per timed loop, 2·n³ flops each; the mean "
                             "of the timed loops per dtype, repeated until decided")
    ev["torch_device"] = device
    return ev


def peer_copy(src: Tuple[str, str], dst: Tuple[str, str], nbytes: int, runs: int = 7) -> Dict[str, Any]:
    """Copy ``nbytes`` from device ``src`` to ``dst`` ((bdf, torch device) each); median GB/s, data verified."""
    torch = _torch()
    s, d = torch.device(src[1]), torch.device(dst[1])
    out: Dict[str, Any] = {"pair": [src[0], dst[0]], "bytes": nbytes, "runs": runs, "gbps_median": None,
                           "verified": False, "peer_access": None}
    try:
        if s.type == "cuda" and d.type == "cuda":
            out["peer_access"] = bool(torch.cuda.can_device_access_peer(s.index, d.index))
        x = torch.randint(0, 255, (nbytes,), dtype=torch.uint8, device=s)
        y = torch.empty(nbytes, dtype=torch.uint8, device=d)
        y.copy_(x)
        _sync(torch, s)
        _sync(torch, d)
        before = nvlink_tx_kib(src[0]) if s.type == "cuda" else None
        rates = []
        for _ in range(runs):
            _sync(torch, s)
            _sync(torch, d)
            t0 = time.perf_counter()
            y.copy_(x)
            _sync(torch, d)
            _sync(torch, s)
            rates.append(nbytes / (time.perf_counter() - t0) / 1e9)
        after = nvlink_tx_kib(src[0]) if before is not None else None
        out["nvlink_bytes"] = (after - before) * 1024 if before is not None and after is not None else None
        out["verified"] = bool(torch.equal(y, x.to(d)))
        out["samples_gbps"] = [round(r, 3) for r in rates]
        out["gbps_median"] = round(statistics.median(rates), 3)
        del x, y
    except Exception as exc:
        out["reason"] = f"{type(exc).__name__}: {exc}"[:300]
    finally:
        for dev in (s, d):
            if dev.type == "cuda":
                torch.cuda.empty_cache()
    out["method"] = f"torch tensor copy {src[1]} -> {dst[1]}, median of {runs}, data compared afterwards"
    return out


def _devices(accs: List[Dict[str, Any]]) -> Tuple[List[Tuple[str, str]], Optional[str]]:
    out = []
    for a in accs:
        try:
            out.append((a["bdf"], torch_device_for_bdf(a["bdf"])))
        except LoadUnavailable as exc:
            return [], f"{a['bdf']}: {exc}"
    return out, None


def measure_edge(a: str, b: str, th: Dict[str, Any], copy: Any, plan: Optional[TrialPlan] = None,
                 method: str = "") -> Dict[str, Any]:
    """CRG-EDGE's evidence for the pair (a, b): ``copy(src, dst, k)`` (one look: ``k`` copies one way) each way,
    repeated until the check's rule decides both directions, every copy kept."""
    from ..checks.crg import edge_decisions
    from ..checks.interval import combine

    plan = plan or TrialPlan.default("CRG-EDGE", initial=7, step=7, cap=21)
    ways: Dict[str, Dict[str, Any]] = {}

    def evidence(looks: int) -> Dict[str, Any]:
        fwd, rev = (dict(ways[w]) for w in ("forward", "reverse"))
        for w in (fwd, rev):
            if w.get("samples_gbps"):
                w["gbps_median"] = round(statistics.median(w["samples_gbps"]), 3)
                w["runs"] = len(w["samples_gbps"])
        both = [x["gbps_median"] for x in (fwd, rev) if x.get("gbps_median") is not None]
        return {"pair": [a, b], "forward": fwd, "reverse": rev,
                "gbps_median": min(both) if len(both) == 2 else None,
                "verified": bool(fwd.get("verified")) and bool(rev.get("verified")),
                "peer_access": fwd.get("peer_access") and rev.get("peer_access"),
                "nvlink_bytes": fwd.get("nvlink_bytes"), "reason": fwd.get("reason") or rev.get("reason"),
                "method": method, "sequential": {"looks": looks}}

    def look(k: int, index: int) -> List[Dict[str, Any]]:
        for name, (src, dst) in (("forward", (a, b)), ("reverse", (b, a))):
            r = copy(src, dst, k)
            if name not in ways:
                ways[name] = r
            else:
                _merge_samples(ways[name], r, "samples_gbps")
        return [{"index": index + i} for i in range(k)]

    def judge(trials: List[Dict[str, Any]], looks: int) -> str:
        ev = evidence(looks)
        if ev["gbps_median"] is None or not ev["verified"]:
            return "never"
        return next_step(combine(edge_decisions(ev, th)))

    out = sequential(look, judge, plan)
    ev = evidence(out["sequential"]["looks"])
    ev["sequential"] = out["sequential"]
    ev["sequential"]["trials"] = min(len(ev[w].get("samples_gbps") or []) for w in ("forward", "reverse"))
    return ev


def acquire_edges(accs: List[Dict[str, Any]], th: Dict[str, Any], absent: Optional[str] = None,
                  plan: Optional[TrialPlan] = None) -> List[Tuple[Dict[str, Any], str]]:
    """(evidence, subject) for every pair of the accelerators, both directions measured."""
    if absent:
        return [({"absent": absent}, "accelerators")]
    if len(accs) < 2:
        return [({"absent": f"a device-to-device edge needs 2 accelerators; found {len(accs)}"}, "accelerators")]
    devs, why = _devices(accs)
    if why:  # the devices are there, this installation cannot drive them: not measured, not "not applicable"
        return [({"unavailable": why}, "accelerators")]
    nbytes = int(th["bytes"])
    torch_of = dict(devs)
    out = []
    for i, a in enumerate(devs):
        for b in devs[i + 1:]:
            ev = measure_edge(a[0], b[0], th, lambda s, d, k: peer_copy((s, torch_of[s]), (d, torch_of[d]), nbytes,
                                                                        runs=max(2, k)), plan,
                              method="torch tensor copy each way, data compared; the mean of the copies each way, "
                                     "repeated until decided; the slower direction decides")
            out.append((ev, f"{a[0]}<->{b[0]}"))
    return out


# --------------------------------------------------------------------------
# All-reduce


def _allreduce_worker(rank: int, world: int, backend: str, init: str, nbytes: int, iters: int,
                      devices: List[str], queue: Any) -> None:
    """One rank of the all-reduce (runs in its own process)."""
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    try:
        dist.init_process_group(backend, init_method=init, rank=rank, world_size=world,
                                timeout=timedelta(seconds=120))
        dev = torch.device(devices[rank]) if devices else torch.device("cpu")
        if dev.type == "cuda":
            torch.cuda.set_device(dev)
        n = max(1, nbytes // 4)
        x = torch.empty(n, dtype=torch.float32, device=dev)
        times = []
        ok = True
        for i in range(iters + 2):  # two warm-up rounds
            x.fill_(float(rank + 1))
            _sync(torch, dev)
            dist.barrier()
            t0 = time.perf_counter()
            dist.all_reduce(x)
            _sync(torch, dev)
            dt = time.perf_counter() - t0
            ok = ok and bool(torch.all(x == world * (world + 1) / 2).item())
            if i >= 2:
                times.append(dt)
        queue.put({"rank": rank, "times": times, "verified": ok})
    except Exception as exc:
        queue.put({"rank": rank, "error": f"{type(exc).__name__}: {exc}"[:300]})
    finally:
        try:
            dist.destroy_process_group()
        except Exception:
            pass


def allreduce(backend: str, world: int, nbytes: int, iters: int = 5, devices: Optional[List[str]] = None,
              timeout_s: float = 180.0) -> Dict[str, Any]:
    """All-reduce ``nbytes`` of float32 across ``world`` spawned processes; bus bandwidth of the median run
    (each run's time is the slowest rank's)."""
    import multiprocessing as mp

    _torch()
    ctx: Any = mp.get_context("spawn" if devices else "fork")
    queue = ctx.Queue()
    out: Dict[str, Any] = {"backend": backend, "world_size": world, "bytes": nbytes, "iterations": iters,
                           "participants": "GPUs" if devices else "processes on the CPU",
                           "busbw_gbps": None, "verified": False}
    with tempfile.TemporaryDirectory(prefix="sits-allreduce-") as tmp:
        init = f"file://{os.path.join(tmp, 'store')}"
        procs = [ctx.Process(target=_allreduce_worker, args=(r, world, backend, init, nbytes, iters,
                                                             list(devices or []), queue), daemon=True)
                 for r in range(world)]
        t0 = time.monotonic()
        for p in procs:
            p.start()
        results: List[Dict[str, Any]] = []
        try:
            while len(results) < world and time.monotonic() - t0 < timeout_s:
                try:
                    results.append(queue.get(timeout=1.0))
                except Exception:
                    if all(not p.is_alive() for p in procs) and queue.empty():
                        break
        finally:
            for p in procs:
                p.join(timeout=max(1.0, timeout_s - (time.monotonic() - t0)) if len(results) == world else 1.0)
                if p.is_alive():
                    p.kill()
                    p.join(timeout=5)
        out["wall_s"] = round(time.monotonic() - t0, 3)
    errors = [r["error"] for r in results if "error" in r]
    if errors or len(results) < world:
        out["reason"] = "; ".join(errors) or f"{world - len(results)} rank(s) gave no result within {timeout_s:g} s"
        return out
    per_iter = [max(r["times"][i] for r in results) for i in range(iters)]
    t = statistics.median(per_iter)
    alg = nbytes / t / 1e9
    out.update(samples_s=[round(x, 6) for x in per_iter], algbw_gbps=round(alg, 3),
               busbw_gbps=round(busbw(alg, world), 3), verified=all(r["verified"] for r in results))
    return out


def measure_sync(th: Dict[str, Any], run: Any, plan: Optional[TrialPlan] = None) -> Dict[str, Any]:
    """CRG-SYNC's evidence: ``run(k)`` (one look: an all-reduce run of ``k`` timed iterations) repeated until the
    check's rule decides, every iteration's time kept."""
    from ..checks.crg import busbw, sync_decision

    iters = int(th["iterations"])
    plan = plan or TrialPlan.default("CRG-SYNC", initial=iters, step=iters, cap=3 * iters)
    first: Dict[str, Any] = {}

    def evidence(looks: int) -> Dict[str, Any]:
        ev = dict(first, sequential={"looks": looks})
        if ev.get("samples_s"):
            t = statistics.median(ev["samples_s"])
            alg = ev["bytes"] / t / 1e9
            ev.update(algbw_gbps=round(alg, 3), busbw_gbps=round(busbw(alg, ev["world_size"]), 3),
                      iterations=len(ev["samples_s"]))
        return ev

    def look(k: int, index: int) -> List[Dict[str, Any]]:
        r = run(k)
        if not first:
            first.update(r)
        else:
            _merge_samples(first, r, "samples_s")
        return [{"index": index + i} for i in range(k)]

    def judge(trials: List[Dict[str, Any]], looks: int) -> str:
        ev = evidence(looks)
        if ev.get("busbw_gbps") is None or not ev.get("verified"):
            return "never"
        return next_step(sync_decision(ev, th))

    out = sequential(look, judge, plan)
    ev = evidence(out["sequential"]["looks"])
    ev["sequential"] = out["sequential"]
    ev["sequential"]["trials"] = len(ev.get("samples_s") or [])
    return ev


def acquire_sync(accs: List[Dict[str, Any]], expected_count: int, th: Dict[str, Any],
                 absent: Optional[str] = None, plan: Optional[TrialPlan] = None) -> Dict[str, Any]:
    """NCCL across the accelerators (one process each), or gloo with 2 processes on a host without any; repeated
    until CRG-SYNC's rule decides."""
    if absent:
        return {"absent": absent}
    try:
        if not accs and not expected_count:
            return measure_sync(th, lambda k: allreduce("gloo", 2, int(th["host_bytes"]), max(2, k)),
                                plan)
        if len(accs) < 2:
            return {"absent": f"an all-reduce between devices needs 2 accelerators; found {len(accs)}"}
        devs, why = _devices(accs)
        if why:
            return {"unavailable": why}
        torch = _torch()
    except LoadUnavailable as exc:  # no torch: not measured here (the run is PARTIAL at best), never an ERROR
        return {"unavailable": str(exc)}
    if not torch.distributed.is_available() or not torch.distributed.is_nccl_available():
        return {"absent": f"torch {torch.__version__} has no NCCL backend"}
    out = measure_sync(th, lambda k: allreduce("nccl", len(devs), int(th["bytes"]), max(2, k),
                                               [d for _, d in devs]), plan)
    out["devices"] = [b for b, _ in devs]
    return out


# --------------------------------------------------------------------------
# Timer and jitter


def _read_steps(read: Any, reads: int) -> Dict[str, Any]:
    """The smallest non-zero step between two back-to-back readings (granularity) and the median one (cost)."""
    steps = []
    prev = read()
    for _ in range(reads):
        now = read()
        if now != prev:
            steps.append(now - prev)
        prev = now
    return {"reads": reads, "granularity_ns": float(min(steps)) if steps else None,
            "read_cost_ns": float(statistics.median(steps)) if steps else None, "zero_steps": reads - len(steps)}


def timer_info(reads: int = 200_000) -> Dict[str, Any]:
    """perf_counter's reported resolution and its measured granularity (smallest non-zero step between two
    back-to-back ``perf_counter_ns`` readings) and cost (median non-zero step)."""
    info = time.get_clock_info("perf_counter")
    return {"clock": "time.perf_counter_ns", "implementation": info.implementation,
            "resolution_ns": info.resolution * 1e9, "monotonic": info.monotonic,
            **_read_steps(time.perf_counter_ns, reads)}


def _phc_clockid(fd: int) -> int:
    """The dynamic POSIX clock of an open PTP device (the kernel's FD_TO_CLOCKID)."""
    return ((~fd) << 3) | 3


def hardware_clocks(root: Any, reads: int = 20_000) -> List[Dict[str, Any]]:
    """Every PTP hardware clock of the machine, opened read-only and read back to back: its measured granularity
    and read cost (a clock that cannot be opened or read says why)."""
    from pathlib import Path

    from ..probes.sysfs import ptp_clocks

    out = []
    for clock in ptp_clocks(Path(root)):
        entry = dict(clock, clock=f"clock_gettime({clock['device']})", implementation="PTP hardware clock",
                     resolution_ns=1.0)
        try:
            fd = os.open(clock["device"], os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except OSError as exc:
            out.append(dict(entry, error=f"cannot open {clock['device']}: {exc.strerror}"))
            continue
        try:
            cid = _phc_clockid(fd)
            entry.update(_read_steps(functools.partial(time.clock_gettime_ns, cid), reads))
        except (OSError, OverflowError) as exc:
            entry["error"] = f"cannot read {clock['device']}: {exc}"
        finally:
            os.close(fd)
        out.append(entry)
    return out


def acquire_jitter(acc: Optional[Dict[str, Any]], th: Dict[str, Any], root: Any = "/") -> Dict[str, Any]:
    """The timestamp sources' figures and the latency distribution of a fixed small operation on the node (the
    device, or the host CPU when there is no accelerator), timed with the finest source: a PTP hardware clock
    whose reads resolve the bound, else ``perf_counter_ns``."""
    from ..checks.crg import STEPS_PER_INTERVAL

    n = int(th["samples"])
    bound = float(th["max_ns"])
    timer = timer_info()
    f = time.perf_counter_ns
    clocks = hardware_clocks(root)
    fine = [c for c in clocks if c.get("granularity_ns") and STEPS_PER_INTERVAL * c["granularity_ns"] <= 2 * bound]
    fd = None
    if fine:
        best = min(fine, key=lambda c: c["granularity_ns"])
        try:
            fd = os.open(best["device"], os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
            cid = _phc_clockid(fd)
            f = lambda: time.clock_gettime_ns(cid)  # noqa: E731
            timer = {k: v for k, v in best.items() if k not in ("device", "name", "source")}
        except OSError:
            fd = None
    try:
        lat, workload, subject_dev = _latencies(acc, n, f)
    finally:
        if fd is not None:
            os.close(fd)
    if lat is None:
        return workload  # why the device cannot be timed here
    return {"device": subject_dev, "timer": timer, "hardware_clocks": clocks, "latency_ns": percentiles(lat),
            "workload": workload}


def _latencies(acc: Optional[Dict[str, Any]], n: int, f: Any) -> Tuple[Any, Any, str]:
    lat: List[float] = []
    if acc is None:
        import numpy as np

        a = np.random.default_rng(0).random((64, 64))
        for _ in range(20):
            a @ a
        for _ in range(n):
            t0 = f()
            a @ a
            lat.append(float(f() - t0))
        return lat, "a 64×64 float64 matmul on the host CPU (numpy)", "host"
    try:
        device = torch_device_for_bdf(acc["bdf"])
    except LoadUnavailable as exc:
        return None, {"unavailable": f"{acc['bdf']}: {exc}"}, acc["bdf"]
    torch = _torch()
    dev = torch.device(device)
    x = torch.ones(1024, device=dev)
    for _ in range(50):
        x.add_(1.0)
    _sync(torch, dev)
    for _ in range(n):
        t0 = f()
        x.add_(1.0)
        _sync(torch, dev)
        lat.append(float(f() - t0))
    return lat, f"a 1024-element add on {device} with synchronize (torch)", acc["bdf"]


#: nvbandwidth's device-to-device test cases CRG-EDGE is judged on, in order of preference (copy engine first: what
#: a peer copy uses).
NVBANDWIDTH_EDGE_TESTS = ("device_to_device_memcpy_read_ce", "device_to_device_memcpy_write_ce",
                          "device_to_device_memcpy_read_sm", "device_to_device_memcpy_write_sm")


def submitted_edges(inventory: Dict[str, Any], expected_count: int) -> Optional[List[Tuple[Dict[str, Any], str]]]:
    """CRG-EDGE evidence of a submitted ``nvbandwidth`` text: (evidence, subject) for each device pair of its
    first device-to-device test case (both directions, as printed); None where no such text was submitted."""
    runs = (inventory.get("submitted") or {}).get("nvbandwidth") or []
    for nb in runs:
        name = next((t for t in NVBANDWIDTH_EDGE_TESTS if (nb["tests"].get(t) or {}).get("matrix")), None)
        if name is None:
            continue
        if not expected_count:
            return [({"absent": f"the profile expects no accelerator: the devices of {nb['file']} are not judged "
                                "against it (give the profile of these GPUs)"}, "accelerators")]
        t = nb["tests"][name]
        m = t["matrix"]
        idx = sorted({int(k) for k in m} | {int(c) for row in m.values() for c in row})
        key = {i: nb["index_to_key"].get(str(i), f"GPU{i}") for i in idx}
        out = []
        for x, i in enumerate(idx):
            for j in idx[x + 1:]:
                fwd, rev = (m.get(i) or {}).get(j), (m.get(j) or {}).get(i)
                ev = {"source": "nvbandwidth", "file": nb["file"], "test": name, "label": t.get("label"),
                      "line": t["line"], "version": nb.get("version"), "pair": [key[i], key[j]],
                      "indices": [i, j], "forward_gbps": fwd, "reverse_gbps": rev, "match_rule": nb.get("match_rule"),
                      "cut": bool(nb.get("cuts"))}
                out.append((ev, f"{key[i]}<->{key[j]}"))
        return out or [({"unavailable": f"{nb['file']}: the {name} matrix holds fewer than 2 devices"},
                        "accelerators")]
    return None


class Crg:
    """The compute-ready graph's acquire functions on the platform's machine (a snapshot has none to measure;
    the simulated platform brings its own figures)."""

    def __init__(self, platform: Any):
        self.platform = platform

    def submitted_edges(self, expected_count: int) -> Optional[List[Tuple[Dict[str, Any], str]]]:
        """CRG-EDGE evidence of a submitted nvbandwidth text (evidence platform), else None."""
        if getattr(self.platform, "kind", None) != "evidence":
            return None
        return submitted_edges(self.platform.inventory(), expected_count)

    def _absent(self) -> Optional[str]:
        why = self.platform.host_measurement_reason()
        return f"{why}: the compute-ready graph is measured on the machine itself" if why else None

    def node(self, acc: Dict[str, Any], th: Dict[str, Any], plan: Optional[TrialPlan] = None) -> Dict[str, Any]:
        why = self._absent()
        return {"unavailable": why} if why else acquire_node(acc, th, plan)

    def edges(self, accs: List[Dict[str, Any]], th: Dict[str, Any], absent: Optional[str] = None,
              plan: Optional[TrialPlan] = None) -> List[Tuple[Dict[str, Any], str]]:
        why = self._absent()
        if why and not absent:  # the devices are there (or not known absent); this platform measures nothing
            return [({"unavailable": why}, "accelerators")]
        return acquire_edges(accs, th, absent, plan)

    def sync(self, accs: List[Dict[str, Any]], expected_count: int, th: Dict[str, Any],
             absent: Optional[str] = None, plan: Optional[TrialPlan] = None) -> Dict[str, Any]:
        why = self._absent()
        if why and not absent:
            return {"unavailable": why}
        return acquire_sync(accs, expected_count, th, absent, plan)

    def jitter(self, acc: Optional[Dict[str, Any]], th: Dict[str, Any]) -> Dict[str, Any]:
        why = self._absent()
        return {"unavailable": why} if why else acquire_jitter(acc, th, self.platform.root)
