"""The simulated inference rig: a batching engine, its power and its sensors, in simulated time.

It produces the same raw records as a live run (per-query log, engine steps, Sample3D readings), so the
acquire functions' summaries and the checks run unchanged on them.  No LoadGen runs here: arrivals are
Poisson (Server), all at once (Offline) or one after another (SingleStream), from a fixed seed.

Faults: ``power-high`` (power above the ceiling under load), ``latency-high`` (every step 20x slower),
``latency-marginal`` (2x slower: the P99 at 80% load on the h100 ceiling), ``sensor-lag`` (the power sensor's
values are 5 periods old), ``sensor-dropout`` (the power sensor stops answering part-way through each run),
``frag-high`` (a KV allocator wasting 12% of its slots), ``sla-miss`` (the first tenant's queries are slow and
2% of them fail), ``ttft-high`` (the first tenant's first token comes 400 ms late), ``tpot-high`` (the first
tenant's tokens after the first come 50 ms apart), ``peak-understated`` (the work counter reports 20 times the
work done, so ρ exceeds the peak), ``coldstart-slow`` (weights take 10 minutes).
"""

from __future__ import annotations

import heapq
import random
from contextlib import contextmanager
from typing import Any, Dict, Iterator, List, Optional, Tuple, cast

#: The faults this module implements, with what each does (``faults.FAULTS`` gathers every module's).
FAULTS = {
    "power-high": "the simulated device draws 125% of its TDP under load",
    "latency-high": "every simulated engine step is 20 times slower",
    "latency-marginal": "every simulated engine step is twice as slow: the P99 per token at 80% of the maximum "
                        "sits on the h100 profile's ceiling, above or below it from run to run",
    "sensor-lag": "the simulated power sensor's values are 5 sampling periods old",
    "sensor-dropout": "the simulated power sensor stops answering 40% into each run",
    "frag-high": "the simulated KV allocator leaves 12% of its slots (and 9% of reserved memory) unused",
    "sla-miss": "the first tenant's queries are slow (3x its P99 SLA) and 2% of them fail",
    "ttft-high": "the first tenant's first token arrives 400 ms late (SVC-SLA's TTFT target, where set)",
    "tpot-high": "the first tenant's tokens after the first come 50 ms apart (SVC-SLA's TPOT target, where set)",
    "peak-understated": "the simulated work counter reports 20 times the work done (ρ above the peak)",
    "coldstart-slow": "loading the weights takes 10 minutes on the simulated cold start",
}


T0_NS = 1_000_000_000_000
#: The share of its dense FP16 peak a simulated GPU sustains in a decode step.
SUSTAINED = 0.6


class _SimSource:
    def __init__(self, name: str, kind: str):
        self.name, self.kind, self.fast, self.min_interval_s = name, kind, True, 0.0

    def describe(self) -> Dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "fast": True, "min_interval_s": 0.0,
                "resolution": "simulated: power in mW, energy counter in mJ"}

    def close(self) -> None:
        return None


class SimInference:
    def __init__(self, profile: Any, faults: List[str], acc: Optional[Dict[str, Any]], drift: Any = None):
        from .drift import Drift

        self.faults = set(faults)
        self.drift = drift or Drift(False)
        self.acc = acc
        hw = profile.hardware
        self.gpu = acc is not None
        self.tdp = float(hw.get("tdp_w", 700 if self.gpu else 0)) or (700.0 if self.gpu else 205.0)
        self.idle_w = self.tdp * (0.12 if self.gpu else 0.25)
        self.load_w = self.tdp * 0.85
        ppl = profile.thresholds("PLP-PPL")
        from ...inference.model import ModelConfig

        self.cfg = ModelConfig.from_thresholds(ppl["model"])
        self.max_batch = self.cfg.max_batch
        # one decode step at batch 1: at 80% of its maximum the simulated H100 serves a token in about 9 ms at P99,
        # half the h100 profile's 18.3 ms ceiling (a healthy device; fault latency-high: twenty times slower)
        self.step_s = 0.002
        self.per_seq_s = self.step_s / 16
        if "latency-high" in self.faults:
            self.step_s *= 20
            self.per_seq_s *= 20
        if "latency-marginal" in self.faults:
            self.step_s *= 2
            self.per_seq_s *= 2
        # A step never does its work faster than the device can: at most SUSTAINED of the profile's dense FP16
        # peak (a slower GPU serves the same batch in longer steps, as a real one does).
        peak = float(hw.get("fp16_dense_tflops") or 0) * 1e12
        self.max_flops_per_s = peak * SUSTAINED if self.gpu and peak else None
        self.now = T0_NS
        self.rng = random.Random(2026)
        self.source = _SimSource("nvml:0" if self.gpu else "rapl:0:package-0", "nvml" if self.gpu else "rapl")

    @contextmanager
    def moved(self) -> Iterator[None]:
        """One run of the machine as it is now (fault drift: its speed and power moved since the last run)."""
        f = self.drift.factor()
        saved = (self.step_s, self.per_seq_s, self.load_w)
        self.step_s, self.per_seq_s, self.load_w = self.step_s / f, self.per_seq_s / f, self.load_w * f
        try:
            yield
        finally:
            self.step_s, self.per_seq_s, self.load_w = saved

    # -- what the acquire functions ask a rig for
    def power_sources(self) -> Tuple[List[Any], List[str]]:
        return [self.source], ["simulated platform: one simulated power sensor, no BMC"]

    def primary(self) -> List[str]:
        return [self.source.name]

    def runner(self, config: Dict[str, Any]) -> SimRunner:
        return SimRunner(self, config)

    # -- the engine, in simulated time
    def serve(self, arrivals: List[Tuple[int, int, int, int]], t_start: int,
              extra_delay: Optional[Dict[int, float]] = None,
              detail: bool = False) -> Tuple[List[List[Any]], List[Tuple], int]:
        """``arrivals``: (t_ns, prompt_tokens, out_tokens, tenant).  Returns queries, work and the end time.

        Continuous batching: each step admits waiting queries (prefill, their first token) up to the batch
        limit and decodes one token for every running one.  Running sums keep a step O(log batch)."""
        arrivals = sorted(arrivals)
        pending: List[Tuple[int, int, int, int]] = []
        heap: List[Tuple[int, int, int, int, int, int]] = []  # (finish step, n, arrival, prompt, out, tenant)
        queries, work = [], []
        t, i, step, n = t_start, 0, 0, 0
        sum_prompt = sum_start = 0
        first_at: Dict[int, int] = {}
        two_p = 2.0 * self.cfg.matmul_params()
        att = 4.0 * self.cfg.n_layers * self.cfg.d_model
        scale = 20.0 if "peak-understated" in self.faults else 1.0
        while i < len(arrivals) or pending or heap:
            while i < len(arrivals) and arrivals[i][0] <= t:
                pending.append(arrivals[i])
                i += 1
            if not pending and not heap:
                t = arrivals[i][0]
                continue
            b = len(heap)
            admit = pending[: max(0, self.max_batch - b)]
            pending = pending[len(admit):]
            dt = self.step_s + self.per_seq_s * (b + len(admit))
            dt += sum(a[1] for a in admit) * self.step_s / 256  # prefill cost
            flops = sum(self.cfg.flops_prefill(a[1]) for a in admit)
            flops += two_p * b + att * (sum_prompt + b * step - sum_start + b)  # context = prompt + produced + 1
            if self.max_flops_per_s:
                dt = max(dt, flops / self.max_flops_per_s)
            dt *= 1.0 + self.rng.uniform(-0.05, 0.05)
            dt_ns = int(dt * 1e9)
            work.append((t, t + dt_ns, len(admit) + b, flops * scale, "step"))
            for a in admit:  # the prefill makes the first token in this step
                n += 1
                heapq.heappush(heap, (step + a[2] - 1, n, a[0], a[1], a[2], a[3]))
                if detail:
                    first_at[n] = t + dt_ns - a[0]
                sum_prompt += a[1]
                sum_start += step
            t += dt_ns
            while heap and heap[0][0] <= step:
                fin, k, arr, prompt, out, tenant = heapq.heappop(heap)
                sum_prompt -= prompt
                sum_start -= fin - out + 1
                delay = int((extra_delay or {}).get(tenant, 0.0) * 1e9)
                queries.append([arr, t + delay, out, tenant, None] +
                               ([{"first_ns": first_at.pop(k, 0) + delay}] if detail else []))
            step += 1
        return queries, work, t

    def sample(self, work: List[Tuple], t0: int, t1: int, period_s: float) -> Dict[str, Any]:
        """Sample3D's records of the simulated sensor: power from the engine's busy share, energy integrated."""
        from ...conditions.sampler import CumulativeWork

        per = int(period_s * 1e9)
        ticks = list(range(t0, t1 + 1, per))
        busy_w = CumulativeWork([(w[0], w[1], 0, w[1] - w[0]) for w in work])
        marks = [busy_w.at(t) for t in ticks] + [busy_w.at(t1 + per)]
        busy = [(marks[k + 1] - marks[k]) / per for k in range(len(ticks))]
        lag = 5 if "sensor-lag" in self.faults else 0
        drop_from = t0 + int((t1 - t0) * 0.4) if "sensor-dropout" in self.faults else None
        load_w = self.tdp * 1.25 if "power-high" in self.faults else self.load_w
        powers = [self.idle_w + (load_w - self.idle_w) * min(1.0, b) + self.rng.gauss(0, self.tdp * 0.005)
                  for b in busy]
        energy, acc = [], 0.0
        for p in powers:
            acc += p * period_s
            energy.append(acc)
        readings: List[Dict[str, Any]] = []
        for k, t in enumerate(ticks):
            if drop_from is not None and t >= drop_from:
                readings.append({"t_ns": t + 20_000, "read_ns": 40_000, "sensor_t_ns": None, "power_w": None,
                                 "energy_j": None, "error": "simulated: sensor stopped answering"})
                continue
            src = max(0, k - lag)
            readings.append({"t_ns": t + 20_000, "read_ns": 40_000, "sensor_t_ns": ticks[src] - 1_000_000 + 20_000,
                             "power_w": round(powers[src], 3), "energy_j": round(energy[src], 6), "error": None})
        return {"period_s": period_s, "ticks": ticks, "overruns": 0, "thread_cpu_s": 0.0,
                "duration_s": (t1 - t0) / 1e9,
                "sources": {self.source.name: dict(self.source.describe(), readings=readings)}}

    def arrivals(self, scenario: str, duration_s: float, qps: float, tenants: int = 1,
                 mix: Tuple[Tuple[int, int], Tuple[int, int]] = ((32, 128), (8, 32))) -> List[Tuple[int, int, int, int]]:
        out, t = [], self.now
        end = self.now + int(duration_s * 1e9)
        (p_lo, p_hi), (o_lo, o_hi) = mix
        n = 0
        while t < end and n < 1_000_000:
            out.append((t, self.rng.randint(p_lo, p_hi), self.rng.randint(o_lo, o_hi), n % tenants))
            n += 1
            if scenario == "Offline":
                if n >= qps * duration_s:
                    break
                continue
            t += int(self.rng.expovariate(qps) * 1e9)
        return out

    # -- SLA, cold start, fragmentation
    def sla(self, tenants: List[Dict[str, Any]], qps: float, duration_s: float,
            workload: Optional[Dict[str, Any]] = None, timeout_s: float = 30.0) -> Dict[str, Any]:
        with self.moved():
            return self._sla(tenants, qps, duration_s, workload)

    def _sla(self, tenants: List[Dict[str, Any]], qps: float, duration_s: float,
             workload: Optional[Dict[str, Any]]) -> Dict[str, Any]:
        total = sum(float(t.get("share", 1.0)) for t in tenants) or 1.0
        wl = workload or {}
        mix = (tuple(wl.get("prompt_tokens", [16, 128])), tuple(wl.get("output_tokens", [1, 4])))
        arr = self.arrivals("Server", min(duration_s, 120.0), qps, mix=mix)
        edges, acc = [], 0.0
        for t in tenants:
            acc += float(t.get("share", 1.0)) / total
            edges.append(acc)
        arr = [(a[0], a[1], a[2], next((k for k, e in enumerate(edges) if (j % 1000 + 0.5) / 1000 <= e),
                                       len(edges) - 1)) for j, a in enumerate(arr)]
        delay = {}
        if "sla-miss" in self.faults:
            delay[0] = 3.0 * float(tenants[0]["p99_ms"]) / 1e3
        queries, work, end = self.serve(arr, self.now, delay, detail=True)
        for q in queries:  # the stream as a client sees it: first token, then the rest evenly to the end
            first = q[5]["first_ns"]
            if q[3] == 0 and "ttft-high" in self.faults:
                first += int(0.4e9)
            done = max(first, q[1] - q[0])
            if q[3] == 0 and "tpot-high" in self.faults and q[2] > 1:
                done = first + (q[2] - 1) * int(0.05e9)
            q[1] = q[0] + done
            step = (done - first) // max(1, q[2] - 1)
            q[5] = {"sent_ns": 0, "first_ns": first, "done_ns": done, "token_count": "simulated: one token per chunk",
                    "chunks": [[first + i * step, 1] for i in range(q[2])]}
        if "sla-miss" in self.faults:
            k = 0
            for q in queries:
                if q[3] == 0:
                    k += 1
                    if k % 50 == 0:
                        q[4] = "http: HTTP 500 (simulated)"
        self.now = end + 1
        return {"queries": queries, "simulated": True, "t0_ns": arr[0][0] if arr else self.now, "t1_ns": end}

    def coldstart(self) -> Dict[str, Any]:
        """One simulated cold start: fixed stage times (a little scatter from trial to trial, more with fault drift)."""
        f = self.drift.factor() / (1.0 + self.rng.uniform(-0.02, 0.02))
        stages = [("interpreter", 0.04), ("torch_import", 2.1), ("device_context", 1.3 if self.gpu else 0.01),
                  ("weights", 600.0 if "coldstart-slow" in self.faults else 4.2), ("kv_prealloc", 0.6),
                  ("first_token", 0.9)]
        stages = [(name, round(v / f, 4)) for name, v in stages]
        return {"simulated": True, "device": "simulated", "stages": [{"stage": s, "seconds": v} for s, v in stages],
                "total_s": round(sum(v for _, v in stages), 6), "clock": "simulated",
                "page_cache": {"state": "simulated", "before": {"measured": False, "reason": "simulated platform"},
                               "eviction": {"requested": "none", "applied": False}}}

    def frag(self) -> Dict[str, Dict[str, Any]]:
        high = "frag-high" in self.faults
        bt = self.cfg.block_tokens
        blocks = int(self.cfg.pool_blocks * 0.9)
        waste = (0.12 if high else 0.021) / self.drift.factor()
        # the loaded steps of a simulated run: each step's fragmentation scatters around the pool's (a sequence's last
        # block is half full on average, and the mix of sequences changes from step to step)
        steps = [round(max(0.0, waste * (1.0 + self.rng.gauss(0.0, 0.15))), 6) for _ in range(400)]
        pool = {"simulated": True, "view": "kv-pool", "block_tokens": bt, "pool_blocks": self.cfg.pool_blocks,
                "peak_blocks_used": blocks, "peak_tokens_stored": int(blocks * bt * (1 - waste)),
                "fraction": round(waste, 6), "fraction_time_weighted": round(waste * 0.95, 6), "peak_occupancy": 0.9,
                "step_fractions": steps, "loaded_share": 0.5,
                "external_fragmentation": 0.0, "failed_allocations": 0, "rejected_requests": 0,
                "method": "simulated paged pool: per step, (slots of allocated blocks - tokens stored) / slots; judged: "
                          "the mean over the loaded steps (step_fractions)"}
        if not self.gpu:
            return {"kv-pool": pool, "allocator": {"absent": "the device allocator's view needs CUDA "
                                                             "(torch.cuda.memory_stats); the simulated host has none"}}
        reserved = 8 << 30
        split = int(reserved * (0.09 if high else 0.008))
        alloc = {"simulated": True, "view": "allocator", "device": "simulated cuda", "reserved_peak_bytes": reserved,
                 "allocated_peak_bytes": int(reserved * 0.93), "inactive_split_peak_bytes": split,
                 "fraction": round(split / reserved, 6), "unused_reserved_fraction": 0.07,
                 "method": "simulated torch.cuda.memory_stats"}
        return {"kv-pool": pool, "allocator": alloc}


class SimRunner:
    """The simulated counterpart of the live LoadGen runner."""

    def __init__(self, sim: SimInference, config: Dict[str, Any]):
        self.sim, self.c = sim, config
        wl = config["workload"]
        self.mix = (tuple(wl.get("prompt_tokens", [32, 128])), tuple(wl.get("output_tokens", [8, 32])))

    def calibrate(self) -> float:
        return self.sim.max_batch / (self.sim.step_s * 2 * 24)

    def run(self, scenario: str, name: str, duration_s: float, target_qps: Optional[float] = None,
            expected_qps: Optional[float] = None, expected_latency_s: Optional[float] = None,
            latency_target_s: Optional[float] = None) -> Dict[str, Any]:
        if name.startswith("offline-after"):
            # the maximum measured again between sweep points draws from the simulator's random stream without
            # consuming it: the points that follow see the draws of a sweep that did not re-measure
            state = self.sim.rng.getstate()
            try:
                with self.sim.moved():
                    return self._run(scenario, duration_s, target_qps, expected_qps)
            finally:
                self.sim.rng.setstate(state)
        with self.sim.moved():
            return self._run(scenario, duration_s, target_qps, expected_qps)

    def _run(self, scenario: str, duration_s: float, target_qps: Optional[float],
             expected_qps: Optional[float]) -> Dict[str, Any]:
        sim = self.sim
        t0 = sim.now
        if scenario == "SingleStream":
            queries: List[Any] = []
            work: List[Any] = []
            t = t0
            while t < t0 + int(duration_s * 1e9) and len(queries) < 100_000:
                a = sim.arrivals("Server", 1e-9, 1.0, mix=self.mix)[:1] or [(t, 64, 16, 0)]
                q, w, t = sim.serve([(t,) + a[0][1:]], t)
                queries += q
                work += w
        else:
            qps = cast(float, target_qps) if scenario == "Server" else (expected_qps or 100.0) * 1.1
            arr = sim.arrivals(scenario, duration_s, qps, mix=self.mix)
            queries, work, t = sim.serve(arr, t0)
        sim.now = t + 1
        samples = sim.sample(work, t0, t, self.c["period_ms"] / 1e3)
        return {"scenario": scenario, "queries": queries, "work": work, "samples": samples, "t0_ns": t0, "t1_ns": t,
                "loadgen": None, "simulated": True}

    def describe(self) -> Dict[str, Any]:
        return {"model": self.sim.cfg.describe(), "device": "simulated",
                "load_generator": "simulated arrivals (LoadGen does not run on a simulated platform)"}


class SimInferenceRig:
    simulated = True

    def __init__(self, profile: Any, faults: List[str], acc: Optional[Dict[str, Any]], drift: Any = None):
        self.sim = SimInference(profile, faults, acc, drift)
        self.subject = acc["bdf"] if acc else "cpu"
        self.device = "cuda (simulated)" if acc else "cpu (simulated)"
        self.hardware = dict(profile.hardware)
