"""SVC-FRAG: the fragmentation of the paged KV pool and of the device allocator under a mixed-length workload
(LoadGen Offline)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from ...checks.inference import FRAG_LOADED_SHARE
from ...inference import loadgen_missing
from .records import _lg_brief, thinned

def acquire_frag(rig: Any, config: Dict[str, Any], logdir: Path,
                 progress: Optional[Any] = None) -> Dict[str, Dict[str, Any]]:
    """``{"kv-pool": evidence, "allocator": evidence}`` under a mixed-length workload (LoadGen Offline)."""
    if rig.simulated:
        return rig.sim.frag()
    why = rig.missing() or loadgen_missing()
    if why:
        return {"kv-pool": {"unavailable": why}, "allocator": {"unavailable": why}}
    from ...inference.sut import Workload, run_loadgen

    n = int(min(100_000, max(8, config["queries"])))
    try:
        engine = rig.engine(config["model"])
    except ValueError as exc:
        return {"kv-pool": {"error": str(exc)}, "allocator": {"error": str(exc)}}
    before = rig.allocator_stats()
    with engine:
        engine.warmup()
        wl_spec = dict(config["workload"], samples=n)
        wl = Workload.build(wl_spec, engine.cfg.vocab, seed=engine.cfg.seed)
        mark = len(engine.pool_trace)

        def issue(idx: int, complete: Any) -> None:
            engine.submit(wl.prompts[idx], wl.out_tokens[idx],
                          lambda r: complete(len(r.output or []), r.error))

        run = run_loadgen(issue, wl, Path(logdir) / "frag-offline", scenario="Offline", duration_s=1.0,
                          expected_qps=n / 1.1, progress=progress, label=f"SVC-FRAG ({n} mixed-length queries)")
        trace = engine.pool_trace[mark:]
        work = engine.work[mark:]
        after = rig.allocator_stats()
        pool = pool_fragmentation(trace, work, engine.cfg, engine.pool.failed_allocations, engine.rejected)
    pool.update(workload=wl.describe(), queries=len(run["queries"]),
                errors=sum(1 for x in run["queries"] if x[4] is not None), loadgen=_lg_brief(run))
    return {"kv-pool": pool, "allocator": allocator_fragmentation(before, after, rig.device)}


def pool_fragmentation(trace: List[Tuple[int, int, int, int]], work: List[Any], cfg: Any, failed: int,
                       rejected: int) -> Dict[str, Any]:
    """Internal fragmentation of the paged pool: slots held in allocated blocks but not filled, over the slots
    of allocated blocks; at the peak of occupancy and time-weighted over the run."""
    bt = cfg.block_tokens
    busy = [(t, b, s, n) for (t, b, s, n) in trace if b]
    if not busy:
        return {"error": "the workload never held a KV block (no step recorded)"}
    peak = max(busy, key=lambda r: r[1])
    durations = [max(1, w[1] - w[0]) for w in work][: len(trace)]
    num = den = 0.0
    for (_t, b, s, _n), d in zip(trace, durations):
        if b:
            num += (b * bt - s) * d
            den += b * bt * d
    loaded = [round((b * bt - s) / (b * bt), 6) for (t, b, s, n) in busy if b >= FRAG_LOADED_SHARE * peak[1]]
    loaded = thinned(loaded)
    return {"view": "kv-pool", "block_tokens": bt, "pool_blocks": cfg.pool_blocks,
            "step_fractions": loaded, "loaded_share": FRAG_LOADED_SHARE,
            "peak_blocks_used": peak[1], "peak_tokens_stored": peak[2], "peak_sequences": peak[3],
            "fraction": round((peak[1] * bt - peak[2]) / (peak[1] * bt), 6),
            "fraction_time_weighted": round(num / den, 6) if den else None,
            "peak_occupancy": round(peak[1] / cfg.pool_blocks, 6), "steps": len(trace),
            "failed_allocations": failed, "rejected_requests": rejected,
            "external_fragmentation": 0.0,
            "method": "per step: (slots of allocated blocks - tokens stored) / slots of allocated blocks; judged: "
                      "the mean over the steps holding at least half of the peak's blocks (step_fractions), with "
                      "fraction the step of peak occupancy; external fragmentation is 0 by construction (blocks "
                      "are fixed-size and any free block serves any sequence)"}


def allocator_fragmentation(before: Optional[Dict[str, Any]], after: Optional[Dict[str, Any]],
                            device: str) -> Dict[str, Any]:
    if after is None:
        return {"absent": f"the device allocator's view needs CUDA (torch.cuda.memory_stats); on {device} only "
                          "the KV pool is measured"}
    g = lambda k: after.get(k, 0)  # noqa: E731
    reserved = g("reserved_bytes.all.peak")
    if not reserved:
        return {"error": "torch.cuda.memory_stats reported no reserved memory"}
    return {"view": "allocator", "device": device, "reserved_peak_bytes": reserved,
            "allocated_peak_bytes": g("allocated_bytes.all.peak"),
            "inactive_split_peak_bytes": g("inactive_split_bytes.all.peak"),
            "reserved_current_bytes": g("reserved_bytes.all.current"),
            "allocated_current_bytes": g("allocated_bytes.all.current"),
            "inactive_split_current_bytes": g("inactive_split_bytes.all.current"),
            "num_alloc_retries": g("num_alloc_retries"), "num_ooms": g("num_ooms"),
            "fraction": round(g("inactive_split_bytes.all.peak") / reserved, 6),
            "unused_reserved_fraction": round(1 - g("allocated_bytes.all.peak") / reserved, 6),
            "method": "fraction = peak inactive split bytes / peak reserved bytes (the caching allocator's "
                      "fragmentation); reserved but unallocated memory is reported beside it"}
