"""Inference under load: the acquire functions of PLP-SAMPLE, PLP-PPL, PLP-POWER, PLP-LATENCY, SVC-SLA,
SVC-COLDSTART and SVC-FRAG.

Each returns evidence (plain JSON), or ``{"unavailable": reason}`` when LoadGen, torch or the platform's means
are missing.  The runs:

* **sweep** (:func:`acquire_sweep`): LoadGen Offline measures the maximum throughput; SingleStream the
  unloaded latency (with LoadGen's early-stopping estimate of P99); then LoadGen Server (Poisson arrivals)
  at each fraction of that maximum, with Sample3D sampling power at a fixed period.  Each point gives
  (ρ, P, D): ρ from the engine's work over sliding windows, P from energy counters, D from LoadGen.
  PLP-SAMPLE (:func:`acquire_sample_skew`) and PLP-PPL (:func:`acquire_ppl`) read the same run.
* **SLA** (:func:`acquire_sla`): LoadGen Server at the profile's offered load, split between tenants by
  share, against the built-in model or an OpenAI-compatible endpoint; per-tenant P99 with LoadGen's
  early-stopping bound, throughput, error rate.
* **cold start** (:func:`acquire_coldstart`) and **fragmentation** (:func:`acquire_frag`).

The same summaries are computed from live runs and from the simulated platform's runs
(:mod:`pytest_sits.platforms.sim.inference`), which produce the same raw records in simulated time.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..checks.inference import FRAG_LOADED_SHARE, LATENCY_RUNS
from ..checks.interval import min_samples, quantile_tail
from ..inference import loadgen_missing, torch_missing
from .sampler import Sample3D, join, percentile, rho_at, skew
from .trials import TrialPlan, next_step, sequential

#: Hard limits on what a profile may ask for (an absurd value cannot hang a run).
MAX_POINTS = 10
MAX_POINT_S = 600.0
MAX_SLA_S = 3600.0
MAX_QPS = 100_000.0
MAX_TIMELINE = 600
#: SVC-FRAG keeps at most this many per-step fractions in its evidence (evenly thinned).
MAX_STEP_FRACTIONS = 2000
RHO_RULE = ("ρ of a window = work done in it (FLOPs from the model's shape; each engine step's work spread "
            "evenly over the step) / (peak FLOP/s x window); a point's ρ is the mean over its sliding windows, "
            "rho_p99 and rho_max the high ones")


class InferenceUnavailable(Exception):
    """The platform cannot run an inference workload; the message says why."""


# --------------------------------------------------------------------------
# The live rig: what the acquire functions need from a live platform


class InferenceRig:
    """The built-in model on one device of this machine, its power sources, and where the logs go."""

    simulated = False

    def __init__(self, subject: str, device: str, accelerator_kind: Optional[str] = None,
                 device_index: Optional[int] = None, root: Path = Path("/"),
                 redfish: Optional[Dict[str, Any]] = None, hardware: Optional[Dict[str, Any]] = None):
        self.subject, self.device = subject, device
        self.accelerator_kind, self.device_index = accelerator_kind, device_index
        self.root, self.redfish = Path(root), redfish
        self.hardware = dict(hardware or {})

    def missing(self) -> Optional[str]:
        return torch_missing()

    def engine(self, model: Dict[str, Any]) -> Any:
        from ..inference.model import Engine, ModelConfig

        return Engine(ModelConfig.from_thresholds(model), self.device)

    def power_sources(self) -> Tuple[List[Any], List[str]]:
        from ..probes.power import discover

        return discover(self.root, self.accelerator_kind, self.device_index, self.redfish)

    def primary(self, sources: Sequence[Any]) -> List[str]:
        """The sources whose sum is the device's power P: the accelerator's own sensor, else the CPU packages
        (RAPL top-level zones, without psys) plus DRAM."""
        names = [s.name for s in sources]
        dev = [n for n in names if n.startswith(("nvml:", "amdsmi:"))]
        if dev:
            return dev[:1]
        rapl = [s.name for s in sources if s.kind == "rapl" and "psys" not in s.name
                and (s.name.count(":") == 2 or s.name.endswith(":dram"))]
        return rapl

    def coldstart(self, model: Dict[str, Any], evict_how: str, timeout_s: float) -> Dict[str, Any]:
        from ..inference.coldstart import measure

        return measure(model, self.device, evict_how, timeout_s)

    def allocator_stats(self) -> Optional[Dict[str, Any]]:
        if not str(self.device).startswith("cuda"):
            return None
        import torch

        return torch.cuda.memory_stats(self.device)


def live_rig(acc: Optional[Dict[str, Any]], options: Dict[str, Any], hardware: Dict[str, Any]) -> InferenceRig:
    """The rig for an accelerator (its torch device) or, with none, for the CPU."""
    if acc is None:
        return InferenceRig("cpu", "cpu", None, None, redfish=options.get("redfish"), hardware=hardware)
    from .loads import LoadUnavailable, torch_device_for_bdf

    try:
        device = torch_device_for_bdf(acc["bdf"])
    except LoadUnavailable as exc:
        raise InferenceUnavailable(str(exc)) from None
    kind = {"NVIDIA": "nvidia", "AMD": "amd"}.get(str(acc.get("vendor")), None)
    idx = (acc.get("management") or {}).get("index")
    return InferenceRig(acc["bdf"], device, kind, idx, redfish=options.get("redfish"), hardware=hardware)


# --------------------------------------------------------------------------
# Summaries (shared by live and simulated runs)


def peak_of(config: Dict[str, Any], hardware: Dict[str, Any], measured_flops_s: Optional[float],
            device: str) -> Dict[str, Any]:
    """The theoretical peak ρ is taken against: the profile's ``peak_tflops``, else its datasheet
    ``fp16_dense_tflops`` for a half-precision model on an accelerator, else the measured maximum (said so)."""
    if config.get("peak_tflops"):
        return {"flops_per_s": float(config["peak_tflops"]) * 1e12, "source": "profile PLP-PPL.peak_tflops",
                "theoretical": True}
    dtype = (config.get("model") or {}).get("dtype", "float32")
    if not str(device).startswith("cpu") and hardware.get("fp16_dense_tflops") and dtype in ("float16", "bfloat16"):
        return {"flops_per_s": float(hardware["fp16_dense_tflops"]) * 1e12,
                "source": "profile hardware.fp16_dense_tflops (datasheet, dense)", "theoretical": True}
    if measured_flops_s:
        return {"flops_per_s": measured_flops_s, "theoretical": False,
                "source": "measured: the highest FLOP rate of a window during LoadGen Offline saturation (the profile "
                          "states no theoretical peak for this device and dtype)"}
    return {"flops_per_s": None, "source": "none: no theoretical peak and no measured maximum", "theoretical": False}


def rho_series(work: Sequence[Sequence[Any]], t0: int, t1: int, period_ns: int, window_ms: float,
               peak_flops_s: float) -> List[float]:
    """ρ over sliding windows of ``window_ms`` stepped by the sampling period, inside [t0, t1]."""
    w = int(window_ms * 1e6)
    return rho_at(work, range(t0 + w, t1 + 1, max(1, period_ns)), w, peak_flops_s)


def energy_between(readings: List[Dict[str, Any]], t0: int, t1: int) -> Dict[str, Any]:
    """Energy from a counter between the first and last valid readings inside [t0, t1], and the power it
    implies; without a counter, the mean of instantaneous readings (said so) and no energy."""
    valid = [r for r in readings if not r.get("error") and t0 <= r["t_ns"] <= t1]
    failed = sum(1 for r in readings if r.get("error") and t0 <= r["t_ns"] <= t1)
    counter = [r for r in valid if r.get("energy_j") is not None]
    if len(counter) >= 2 and counter[-1]["t_ns"] > counter[0]["t_ns"]:
        e = counter[-1]["energy_j"] - counter[0]["energy_j"]
        dt = (counter[-1]["t_ns"] - counter[0]["t_ns"]) / 1e9
        return {"energy_j": e, "power_w": e / dt, "seconds": dt, "method": "energy counter", "failed": failed,
                "readings": len(valid)}
    inst = [r["power_w"] for r in valid if r.get("power_w") is not None]
    if inst:
        return {"energy_j": None, "power_w": sum(inst) / len(inst), "seconds": (t1 - t0) / 1e9, "failed": failed,
                "method": "mean of instantaneous readings (no energy counter)", "readings": len(valid)}
    return {"energy_j": None, "power_w": None, "failed": failed, "readings": 0,
            "method": "no valid reading in the interval"}


def power_windows(readings: List[Dict[str, Any]], t0: int, t1: int, window_s: float = 1.0) -> List[float]:
    """Power over every 1 s window (sliding reading by reading) from the energy counter."""
    pts = [(r["t_ns"], r["energy_j"]) for r in readings
           if not r.get("error") and r.get("energy_j") is not None and t0 <= r["t_ns"] <= t1]
    out, j = [], 0
    w = int(window_s * 1e9)
    for i in range(len(pts)):
        while j < len(pts) and pts[j][0] - pts[i][0] < w:
            j += 1
        if j >= len(pts):
            break
        out.append((pts[j][1] - pts[i][1]) / ((pts[j][0] - pts[i][0]) / 1e9))
    return out


def _sum_sources(samples: Dict[str, Any], names: List[str], t0: int, t1: int) -> Dict[str, Any]:
    parts = [energy_between(samples["sources"][n]["readings"], t0, t1) for n in names if n in samples["sources"]]
    if not parts or any(p["power_w"] is None for p in parts):
        bad = [p["method"] for p in parts if p["power_w"] is None]
        return {"power_w": None, "energy_j": None, "method": "; ".join(bad) or "no power source",
                "failed": sum(p["failed"] for p in parts)}
    energy = None if any(p["energy_j"] is None for p in parts) else sum(p["energy_j"] for p in parts)
    return {"power_w": sum(p["power_w"] for p in parts), "energy_j": energy,
            "method": ", ".join(sorted({p["method"] for p in parts})), "failed": sum(p["failed"] for p in parts),
            "readings": sum(p["readings"] for p in parts)}


def run_latency(raw: Dict[str, Any]) -> Dict[str, Any]:
    """One Server run's latency figures (a sweep point's, and each repeated run's): P99 per query (LoadGen's figure
    where it gave one, else the per-query log's) and per output token, the queries and errors."""
    q = raw["queries"]
    ok = [x for x in q if x[4] is None]
    lat = [(x[1] - x[0]) / 1e9 for x in ok]
    tok_lat = [(x[1] - x[0]) / 1e9 / x[2] for x in ok if x[2]]
    lg = raw.get("loadgen") or {}
    return {"p99_latency_s": lg.get("p99_latency_s") if lg.get("p99_latency_s") is not None else percentile(lat, 0.99),
            "p99_token_latency_s": percentile(tok_lat, 0.99), "queries": len(q), "errors": len(q) - len(ok),
            "error_rate": round((len(q) - len(ok)) / len(q), 6) if q else 1.0}


def summarise_point(raw: Dict[str, Any], peak_flops_s: Optional[float], config: Dict[str, Any],
                    primary: List[str]) -> Dict[str, Any]:
    """One sweep point from one Server run: the shape the report analytics read, plus details."""
    q = raw["queries"]
    ok = [x for x in q if x[4] is None]
    t0 = min((x[0] for x in q), default=raw["t0_ns"])
    t1 = max((x[1] for x in q), default=raw["t1_ns"])
    span = max(1e-9, (t1 - t0) / 1e9)
    lat = [(x[1] - x[0]) / 1e9 for x in ok]
    tok_lat = [(x[1] - x[0]) / 1e9 / x[2] for x in ok if x[2]]
    lg = raw.get("loadgen") or {}
    samples = raw.get("samples")
    period_ns = int((samples or {}).get("period_s", config.get("period_ms", 10) / 1e3) * 1e9)
    rho = rho_series(raw["work"], t0, t1, period_ns, config.get("window_ms", 10), peak_flops_s) if peak_flops_s \
        else []
    power = _sum_sources(samples, primary, t0, t1) if samples and primary else {
        "power_w": None, "energy_j": None, "method": "no power source"}
    steps = sorted((w[1] - w[0]) / 1e6 for w in raw["work"] if t0 <= w[0] <= t1)
    figures = run_latency(raw)
    point = {
        "target_qps": float(raw.get("target_qps") or 0.0),
        "rho": round(sum(rho) / len(rho), 6) if rho else None,
        "power_w": round(power["power_w"], 4) if power["power_w"] is not None else None,
        "p50_latency_s": lg.get("p50_latency_s") if lg.get("p50_latency_s") is not None else percentile(lat, 0.5),
        "p99_latency_s": figures["p99_latency_s"],
        "throughput_qps": round(len(ok) / span, 4),
        "tokens_per_s": round(sum(x[2] for x in ok) / span, 4),
        "error_rate": figures["error_rate"],
        "energy_j": round(power["energy_j"], 6) if power.get("energy_j") is not None else None,
        # details beyond the analytics' shape
        "rho_p99": round(percentile(rho, 0.99), 6) if rho else None,
        "rho_max": round(max(rho), 6) if rho else None,
        "p99_token_latency_s": figures["p99_token_latency_s"],
        "queries": figures["queries"], "errors": figures["errors"], "duration_s": round(span, 4),
        "output_tokens": sum(x[2] for x in ok),
        "step_ms_p50": round(percentile(steps, 0.5), 4) if steps else None,
        # what the checks need for their intervals: the largest latencies (P99's order statistics), ρ's, and the
        # point's power over ten blocks of its time (batch means)
        "latency_tail": quantile_tail(lat, 0.99), "token_latency_tail": quantile_tail(tok_lat, 0.99),
        "rho_tail": quantile_tail(rho, 0.99) if rho else None,
        "power_method": power.get("method"), "power_failed_reads": power.get("failed", 0),
        "power_valid_reads": power.get("readings", 0),
        "latency_source": "LoadGen (scheduled to completed)" if lg.get("p99_latency_s") is not None
        else "per-query log (issued to completed)",
        "loadgen": {k: lg.get(k) for k in ("valid", "throughput_qps", "early_stopping_met",
                                           "early_stopping_result", "summary_file", "errors")} if lg else None,
    }
    if samples and primary:
        pw = []
        for n in primary:
            if n in samples["sources"]:
                pw.append(power_windows(samples["sources"][n]["readings"], t0, t1))
        if pw and all(pw):
            m = min(map(len, pw))
            point["power_1s_windows_w"] = [round(sum(p[i] for p in pw), 4) for i in range(m)][:: max(1, m // 200)]
            point["power_p99_1s_w"] = round(percentile([sum(p[i] for p in pw) for i in range(m)], 0.99), 4)
        point["power_by_source"] = {n: _round(energy_between(s["readings"], t0, t1))
                                    for n, s in samples["sources"].items()}
        blocks = [power_blocks(samples["sources"][n]["readings"], t0, t1) for n in primary if n in samples["sources"]]
        if blocks and all(blocks):
            m = min(map(len, blocks))
            point["power_blocks_w"] = [round(sum(b[i] for b in blocks), 4) for i in range(m)]
    return point


POWER_BLOCKS = 10


def power_blocks(readings: List[Dict[str, Any]], t0: int, t1: int, blocks: int = POWER_BLOCKS) -> List[float]:
    """The power of each of ``blocks`` equal blocks of [t0, t1] (energy over time within the block; the mean of
    instantaneous readings without a counter): the batch means of PLP-POWER's interval."""
    out = []
    step = (t1 - t0) / blocks
    for k in range(blocks):
        a, b = int(t0 + k * step), int(t0 + (k + 1) * step)
        e = energy_between(readings, a, b)
        if e["power_w"] is None:
            return []
        out.append(e["power_w"])
    return out


def _round(d: Dict[str, Any]) -> Dict[str, Any]:
    return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in d.items()}


def efficiency(points: List[Dict[str, Any]], power_reason: Optional[str]) -> Dict[str, Any]:
    """Tokens per joule (all output tokens of the sweep over the counters' energy) and tokens per watt at P99
    (the sweep's token rate over the P99 of its 1 s sliding power windows)."""
    tokens = sum(p.get("output_tokens", 0) for p in points)
    seconds = sum(p.get("duration_s", 0) for p in points)
    energies = [p.get("energy_j") for p in points]
    out: Dict[str, Any] = {
        "tokens_per_joule": None, "tokens_per_watt_p99": None,
        "definition": "tokens_per_joule = output tokens / energy from counters, over every sweep point; "
                      "tokens_per_watt_p99 = (output tokens / seconds) / P99 of the 1 s sliding power windows"}
    if points and all(e is not None for e in energies) and sum(energies) > 0:
        out["tokens_per_joule"] = round(tokens / sum(energies), 6)
    windows = [w for p in points for w in p.get("power_1s_windows_w", [])]
    p99 = percentile(windows, 0.99)
    if p99 and seconds:
        out["tokens_per_watt_p99"] = round(tokens / seconds / p99, 6)
        out["power_p99_1s_w"] = p99
    if out["tokens_per_joule"] is None or out["tokens_per_watt_p99"] is None:
        out["reason"] = power_reason or "no energy counter covered every sweep point"
    return out


def timeline(samples: Dict[str, Any], queries: List[List[Any]], rho: List[float], primary: List[str],
             limit: int = MAX_TIMELINE) -> List[Dict[str, Any]]:
    """A downsampled view of the joined records (the whole set is written to the log directory)."""
    recs = join(samples, queries, rho)
    step = max(1, len(recs) // limit)
    out = []
    for r in recs[::step]:
        p = [r["power"].get(n, {}).get("power_w") for n in primary]
        out.append({"t_s": round((r["t_ns"] - recs[0]["t_ns"]) / 1e9, 4), "rho": r["rho"],
                    "power_w": sum(p) if p and all(v is not None for v in p) else None,
                    "latencies": len(r["latencies_s"]),
                    "p_max_latency_s": max(r["latencies_s"]) if r["latencies_s"] else None})
    return out


# --------------------------------------------------------------------------
# Acquire: the sweep (PLP-SAMPLE, PLP-PPL, PLP-POWER, PLP-LATENCY)


def _clamp_config(config: Dict[str, Any]) -> Dict[str, Any]:
    c = dict(config)
    fr = [float(f) for f in c.get("sweep_fractions", [0.2, 0.4, 0.6, 0.8])][:MAX_POINTS]
    c["sweep_fractions"] = [min(1.5, max(0.01, f)) for f in fr]
    c["point_s"] = min(MAX_POINT_S, max(1.0, float(c.get("point_s", 5))))
    c["period_ms"] = min(1000.0, max(1.0, float(c.get("period_ms", 10))))
    c["window_ms"] = min(10_000.0, max(1.0, float(c.get("window_ms", 10))))
    return c


def acquire_sweep(rig: Any, config: Dict[str, Any], logdir: Path, progress: Optional[Any] = None,
                  plan: Optional[TrialPlan] = None) -> Dict[str, Any]:
    """Run the sweep; the evidence every PLP-* check reads (``{"unavailable": ...}`` when it cannot run).
    ``progress`` gets a line per load level and every few seconds of a level; ``plan``: PLP-LATENCY's runs of each
    point (default :data:`~pytest_sits.checks.inference.LATENCY_RUNS`, no deadline)."""
    c = _clamp_config(config)
    if rig.simulated:
        return _sweep(rig, c, Path(logdir), rig.sim.power_sources(), rig.sim.primary(), rig.sim.runner(c), plan)
    why = rig.missing() or loadgen_missing()
    if why:  # the device is there; this installation cannot load it: not measured (never "not applicable")
        return {"unavailable": why}
    sources, missing = rig.power_sources()
    try:
        engine = rig.engine(c["model"])
    except ValueError as exc:
        return {"error": f"the profile's model cannot be built: {exc}"}
    try:
        with engine:
            return _sweep(rig, c, Path(logdir), (sources, missing), rig.primary(sources),
                          LiveRunner(engine, c, Path(logdir), sources, progress), plan)
    finally:
        for s in sources:
            s.close()


class LiveRunner:
    """Runs LoadGen scenarios against the engine (what the simulated runner imitates in simulated time)."""

    def __init__(self, engine: Any, config: Dict[str, Any], logdir: Path, sources: List[Any],
                 progress: Optional[Any] = None):
        from ..inference.sut import Workload

        self.engine, self.c, self.logdir, self.sources, self.progress = engine, config, logdir, sources, progress
        self.workload = Workload.build(config.get("workload", {}), engine.cfg.vocab, seed=engine.cfg.seed)
        self.flops_per_query = None

    def _issue(self, idx: int, complete: Any) -> None:
        wl = self.workload
        self.engine.submit(wl.prompts[idx], wl.out_tokens[idx],
                           lambda r: complete(len(r.output or []) if not r.error else 0, r.error))

    def _work(self, t0: int, t1: int) -> List[Any]:
        return [w for w in self.engine.work if w[1] >= t0 and w[0] <= t1]

    def calibrate(self) -> float:
        """A rough maximum (queries/s) for LoadGen's Offline expectation: two batches submitted at once."""
        import threading

        self.engine.warmup()
        n = max(8, 2 * self.engine.cfg.max_batch)
        left = threading.Semaphore(0)
        t = time.perf_counter()
        for i in range(n):
            self._issue(i % len(self.workload.prompts), lambda tok, err: left.release())
        for _ in range(n):
            left.acquire(timeout=120)
        return n / max(1e-6, time.perf_counter() - t)

    def run(self, scenario: str, name: str, **kw: Any) -> Dict[str, Any]:
        from ..inference.sut import run_loadgen

        with Sample3D(self.sources, self.c["period_ms"] / 1e3) as s:
            r = run_loadgen(self._issue, self.workload, self.logdir / name, scenario=scenario,
                            seed=self.c.get("seed", 0), progress=self.progress, label=f"PLP sweep, {name}", **kw)
        r["work"] = self._work(r["t0_ns"], r["t1_ns"])
        r["samples"] = s.evidence()
        return r

    def describe(self) -> Dict[str, Any]:
        return {"model": self.engine.cfg.describe(), "workload": self.workload.describe(),
                "device": str(self.engine.device), "load_generator": "MLPerf LoadGen"}


def _sweep(rig: Any, c: Dict[str, Any], logdir: Path, found: Tuple[List[Any], List[str]], primary: List[str],
           runner: Any, plan: Optional[TrialPlan] = None) -> Dict[str, Any]:
    sources, missing = found
    logdir.mkdir(parents=True, exist_ok=True)
    guess = runner.calibrate()
    off = runner.run("Offline", "offline", duration_s=max(2.0, c["point_s"] / 2), expected_qps=guess)
    ok = [q for q in off["queries"] if q[4] is None]
    span = _span(off)
    max_qps = _offline_qps(off)
    mean_flops = sum(w[3] for w in off["work"]) / span if off["work"] else None
    t_lo = min((q[0] for q in off["queries"]), default=off["t0_ns"])
    rates = rho_series(off["work"], t_lo, t_lo + int(span * 1e9), int(c["period_ms"] * 1e6), c["window_ms"], 1.0)
    measured_flops = max(rates) if rates else mean_flops
    peak = peak_of(c, getattr(rig, "hardware", {}), measured_flops, getattr(rig, "device", "cpu"))
    ss = runner.run("SingleStream", "singlestream", duration_s=max(1.0, c["point_s"] / 2),
                    expected_latency_s=span / max(1, len(ok)))
    ss_lat = [(q[1] - q[0]) / 1e9 for q in ss["queries"] if q[4] is None]
    from ..inference.sut import early_stopping_bound

    points, raws = [], []
    after_qps, before_n = max_qps, len(off["queries"])
    for f in c["sweep_fractions"]:
        qps = min(MAX_QPS, max(0.1, f * max_qps))
        # With a latency ceiling to decide, a point lasts long enough for its P99 to be bounded from above
        # (PLP-LATENCY's interval needs min_queries queries), up to MAX_POINT_S.
        duration = c["point_s"]
        if c.get("min_queries"):
            duration = min(MAX_POINT_S, max(duration, 1.1 * c["min_queries"] / qps))
        raw = runner.run("Server", f"server-{f:g}", duration_s=duration, target_qps=qps,
                         latency_target_s=c.get("latency_target_s", 1.0))
        raw["target_qps"] = qps
        p = summarise_point(raw, peak["flops_per_s"], c, primary)
        p["fraction_of_max"] = f
        p["planned_s"] = round(duration, 3)
        if (c.get("latency_thresholds") or {}).get("max_latency_us") is not None:
            _repeat_point(runner, p, raw, f, qps, duration, c, plan)
        if c.get("recheck_max", True):
            # The load levels are fractions of the maximum measured before the sweep: measured again after each
            # point, so a device whose speed moved under the sweep is told from one that is slow at that load.
            before = after_qps
            # the same measurement as the first (same duration, same expectation, so the same number of queries)
            again = runner.run("Offline", f"offline-after-{f:g}", duration_s=max(2.0, c["point_s"] / 2),
                               expected_qps=guess)
            after_qps = _offline_qps(again)
            p["max_qps_around"] = [round(before, 4), round(after_qps, 4)]
            p["max_queries_around"] = [before_n, len(again["queries"])]
            before_n = len(again["queries"])
            p["reference_moved"] = round(max(abs(before - max_qps), abs(after_qps - max_qps)) / max_qps, 4)
        points.append(p)
        raws.append(raw)
    power_reason = None if primary else ("no power sensor for this device: " + "; ".join(missing)
                                         if missing else "no power sensor for this device")
    records_file = logdir / "sample3d.jsonl"
    tl = _write_records(records_file, raws, peak["flops_per_s"], c, primary)
    ev: Dict[str, Any] = {
        "simulated": bool(rig.simulated), "subject": rig.subject, "sweep": points,
        "max": {"qps": round(max_qps, 4), "scenario": "Offline", "queries": len(off["queries"]),
                "tokens_per_s": round(sum(q[2] for q in ok) / span, 4),
                "flops_per_s": mean_flops, "peak_window_flops_per_s": measured_flops, "loadgen": _lg_brief(off)},
        "single_stream": {"p50_latency_s": percentile(ss_lat, 0.5), "p99_latency_s": percentile(ss_lat, 0.99),
                          "early_stopping": early_stopping_bound(ss_lat), "queries": len(ss["queries"]),
                          "loadgen": _lg_brief(ss)},
        "peak": peak, "rho_rule": RHO_RULE, "window_ms": c["window_ms"], "period_ms": c["period_ms"],
        "power_sources": [s.describe() for s in sources], "missing_sources": missing, "primary_power": primary,
        "power_reason": power_reason, "logdir": str(logdir), "records_file": str(records_file),
        "timeline": tl, "runner": runner.describe(),
        "sample_skew": _skew_evidence(raws, c),
    }
    ev.update(efficiency(points, power_reason))
    return ev


def _repeat_point(runner: Any, p: Dict[str, Any], first: Dict[str, Any], f: float, qps: float, duration: float,
                  c: Dict[str, Any], plan: Optional[TrialPlan] = None) -> None:
    """Repeat a sweep point's Server run until PLP-LATENCY's rule decides on the mean of the runs' P99s (the
    sequential rule, capped by :data:`LATENCY_RUNS`).  A run's P99 moves from run to run far more than its own
    order-statistic interval says (queries queue behind each other: their latencies are not independent), so the
    runs are the trials.  The point's other figures (ρ, power, the first run's latencies) stay its first run's."""
    from ..checks.inference import latency_point_decision

    runs = [dict(run_latency(first), seconds=round(duration, 3))]
    plan = plan or TrialPlan.default("PLP-LATENCY", seconds_per_trial=duration, **LATENCY_RUNS)
    p["latency_runs"] = runs  # the list the looks append to: the rule judges the point with every run so far

    def look(k: int, index: int) -> List[Dict[str, Any]]:
        out = []
        for i in range(k):
            if index + i == 0:
                out.append(runs[0])
                continue
            raw = runner.run("Server", f"server-{f:g}-run{index + i + 1}", duration_s=duration, target_qps=qps,
                             latency_target_s=c.get("latency_target_s", 1.0))
            runs.append(dict(run_latency(raw), seconds=round(duration, 3)))
            out.append(runs[-1])
        return out

    def judge(trials: List[Dict[str, Any]], looks: int) -> str:
        return next_step(latency_point_decision(p, c["latency_thresholds"], looks))

    out = sequential(look, judge, plan)
    p["latency_sequential"] = dict({k: v for k, v in out["sequential"].items() if k != "plan"},
                                   plan={k: getattr(plan, k) for k in ("initial", "step", "cap", "deadline")})


def _span(run: Dict[str, Any]) -> float:
    """Seconds from a run's first query issued to its last completed (the run's bounds without queries)."""
    q = run["queries"]
    return max(1e-9, (max((x[1] for x in q), default=run["t1_ns"]) - min((x[0] for x in q), default=run["t0_ns"])) / 1e9)


def _offline_qps(off: Dict[str, Any]) -> float:
    """The throughput of an Offline run (LoadGen's figure where it gave one, else completed queries over the span)."""
    lg = off.get("loadgen") or {}
    return float(lg.get("throughput_qps") or sum(1 for q in off["queries"] if q[4] is None) / _span(off))


def _lg_brief(run: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    lg = run.get("loadgen")
    if not lg:
        return None
    return {k: lg.get(k) for k in ("valid", "throughput_qps", "p50_latency_s", "p99_latency_s", "early_stopping_met",
                                   "early_stopping_p99_s", "early_stopping_result", "summary_file", "detail_file",
                                   "version", "errors", "warnings")}


def _write_records(path: Path, raws: List[Dict[str, Any]], peak: Optional[float], c: Dict[str, Any],
                   primary: List[str]) -> List[Dict[str, Any]]:
    tl: List[Dict[str, Any]] = []
    with open(path, "w", encoding="utf-8") as fh:
        for raw in raws:
            s = raw["samples"]
            if not s or not s["ticks"]:
                continue
            rho = rho_at(raw["work"], s["ticks"], int(c["window_ms"] * 1e6), peak) if peak else []
            for rec in join(s, raw["queries"], rho):
                rec["target_qps"] = raw.get("target_qps")
                fh.write(json.dumps(rec) + "\n")
            tl.extend(dict(x, target_qps=raw.get("target_qps"))
                      for x in timeline(s, raw["queries"], rho, primary, MAX_TIMELINE // max(1, len(raws))))
    return tl


def _skew_evidence(raws: List[Dict[str, Any]], c: Dict[str, Any]) -> Dict[str, Any]:
    per_point = []
    for raw in raws:
        s = raw.get("samples")
        if s and s["ticks"]:
            per_point.append({"target_qps": raw.get("target_qps"), "ticks": len(s["ticks"]),
                              "overruns": s.get("overruns", 0), "thread_cpu_s": s.get("thread_cpu_s"),
                              "duration_s": s.get("duration_s"), **skew(s)})
    return {"period_ms": c["period_ms"], "points": per_point}


def acquire_power(sweep: Dict[str, Any]) -> Dict[str, Any]:
    """PLP-POWER's evidence: the sweep, or ``{"unavailable": why}`` when no power sensor answered for this device
    (the requirement is then not measured here, which a run's result counts as a gap)."""
    if sweep.get("absent") or sweep.get("unavailable") or sweep.get("error"):
        return sweep
    if not sweep.get("primary_power") and not any(p.get("power_w") is not None for p in sweep.get("sweep", [])):
        return {"unavailable": sweep.get("power_reason") or "no power sensor answered for this device",
                "missing_sources": sweep.get("missing_sources")}
    return sweep


def acquire_sample_skew(sweep: Dict[str, Any]) -> Dict[str, Any]:
    """PLP-SAMPLE's evidence, from the sweep's sampler: the skew of every source against each record's tick."""
    if sweep.get("absent") or sweep.get("unavailable") or sweep.get("error"):
        return sweep
    if not sweep["primary_power"]:
        return {"unavailable": f"{sweep['power_reason']}: with no power reading there is no P to sample with D "
                               "and ρ", "missing_sources": sweep["missing_sources"]}
    src: Dict[str, Dict[str, Any]] = {}
    for p in sweep["sample_skew"]["points"]:
        for name, s in p["sources"].items():
            agg = src.setdefault(name, {"kind": s["kind"], "fast": s["fast"], "readings": 0, "failed": 0,
                                        "p99_ms": 0.0, "max_ms": 0.0, "sensor_stamped": False})
            agg["readings"] += s["readings"]
            agg["failed"] += s["failed"]
            if s.get("p99_tail_ms"):
                agg.setdefault("tails", []).append(s["p99_tail_ms"])
            agg["sensor_stamped"] = agg["sensor_stamped"] or s["sensor_stamped"]
            for k in ("p99_ms", "max_ms"):
                if s[k] is not None:
                    agg[k] = max(agg[k], s[k])
    pts = sweep["sample_skew"]["points"]
    return {"simulated": sweep.get("simulated", False), "period_ms": sweep["sample_skew"]["period_ms"],
            "sources": src, "primary_power": sweep["primary_power"],
            "ticks": sum(p["ticks"] for p in pts), "overruns": sum(p["overruns"] for p in pts),
            "sampler_cpu_share": round(sum(p["thread_cpu_s"] or 0 for p in pts)
                                       / max(1e-9, sum(p["duration_s"] or 0 for p in pts)), 6),
            "statement": "no sensor samples 'in the same hardware cycle' as another, and none offers it: each reading "
                         "keeps its own timestamp (the driver's where it gives one) and the skew to the record's tick "
                         "is measured",
            "records_file": sweep.get("records_file")}


def acquire_ppl(sweep: Dict[str, Any]) -> Dict[str, Any]:
    """PLP-PPL's evidence, from the sweep: ρ per point over sliding windows, the peak it is taken against."""
    if sweep.get("absent") or sweep.get("unavailable") or sweep.get("error"):
        return sweep
    return {"simulated": sweep.get("simulated", False), "window_ms": sweep["window_ms"],
            "period_ms": sweep["period_ms"], "peak": sweep["peak"], "rho_rule": sweep["rho_rule"],
            "points": [{k: p.get(k) for k in ("target_qps", "rho", "rho_p99", "rho_max", "step_ms_p50", "tokens_per_s",
                                              "duration_s", "rho_tail")} for p in sweep["sweep"]],
            "max": sweep["max"]}


# --------------------------------------------------------------------------
# Acquire: SLA


def acquire_sla(rig: Any, config: Dict[str, Any], logdir: Path, endpoint: Optional[str] = None,
                endpoint_key: Optional[str] = None, progress: Optional[Any] = None) -> Dict[str, Any]:
    """LoadGen Server at the offered load, tenants by share, against the built-in model or ``endpoint`` (an
    OpenAI-compatible server, asked a pre-flight first: a bad endpoint is an error in seconds, not a slow
    server)."""
    tenants = _tenants(config)
    qps = min(MAX_QPS, max(0.1, float(config.get("target_qps", 100))))
    duration = min(MAX_SLA_S, max(1.0, float(config.get("duration_s", 60))))
    timeout = min(600.0, max(0.1, float(config.get("timeout_s", 30))))
    logdir = Path(logdir)
    client = None
    if rig.simulated:
        raw = rig.sim.sla(tenants, qps, duration, config.get("workload"), timeout)
        target = f"simulated {rig.subject}"
    else:
        why = loadgen_missing() or (None if endpoint else rig.missing())
        if why:
            return {"unavailable": why}
        try:
            raw, target, client = _live_sla(rig, config, tenants, qps, duration, timeout, logdir, endpoint,
                                            endpoint_key, progress)
        except ValueError as exc:
            return {"error": str(exc)}
        if raw.get("preflight_failed"):
            return {"error": f"pre-flight of {endpoint}: {raw['preflight']['error']}", "preflight": raw["preflight"],
                    "endpoint": endpoint}
    return summarise_sla(raw, tenants, qps, duration, target, endpoint, timeout, client, logdir)


def _tenants(config: Dict[str, Any]) -> List[Dict[str, Any]]:
    base = {k: config[k] for k in TENANT_KEYS if k in config}
    tenants = config.get("tenants") or [{"name": "all", "share": 1.0}]
    return [dict(base, **t) for t in tenants][:16]


#: The SLA keys a tenant may set over the requirement's defaults.
TENANT_KEYS = ("p99_ms", "min_rps", "max_error_rate", "ttft_p99_ms", "tpot_p99_ms")
#: The client's capacity (requests in flight) is sized to the offered rate x the loosest P99 target x this.
CLIENT_HEADROOM = 2.0


def client_capacity(config: Dict[str, Any], tenants: List[Dict[str, Any]], qps: float) -> Dict[str, Any]:
    """How many requests the client may have in flight, and how many a server meeting the SLA needs (Little's
    law: rate x latency; a server within its P99 target keeps fewer than rate x target in flight)."""
    from ..inference.endpoint import MAX_INFLIGHT

    worst = max(float(t.get("p99_ms") or 0) for t in tenants) / 1e3
    need = int(math.ceil(qps * worst * CLIENT_HEADROOM))
    rule = (f"offered {qps:g} req/s x the loosest P99 target {worst * 1e3:g} ms x headroom {CLIENT_HEADROOM:g} = "
            f"{need} in flight")
    if config.get("max_inflight"):
        cap = int(config["max_inflight"])
        return {"capacity": cap, "need": need, "source": f"SVC-SLA.max_inflight = {cap} (stated); a server meeting "
                                                         f"the SLA needs {rule}"}
    cap = min(MAX_INFLIGHT, max(8, need))
    src = f"sized from the SLA: {rule}"
    if need > MAX_INFLIGHT:
        src += f", capped at the client's limit of {MAX_INFLIGHT}"
    return {"capacity": cap, "need": need, "source": src}


def _live_sla(rig: Any, config: Dict[str, Any], tenants: List[Dict[str, Any]], qps: float, duration: float,
              timeout: float, logdir: Path, endpoint: Optional[str], endpoint_key: Optional[str],
              progress: Optional[Any]) -> Tuple[Dict[str, Any], str, Optional[Dict[str, Any]]]:
    from ..inference.endpoint import EndpointClient, preflight
    from ..inference.model import decode_tokens
    from ..inference.sut import Workload, run_loadgen

    target_lat = min(float(t["p99_ms"]) for t in tenants) / 1e3
    label = f"SVC-SLA ({qps:g} req/s offered for {duration:g} s)"
    if endpoint:
        wl = Workload.build(config.get("workload", {}), 95, tenants, seed=int(config.get("seed", 2026)))
        prompts = [decode_tokens(p) for p in wl.prompts]
        cap = client_capacity(config, tenants, qps)
        stream = bool(config.get("stream", True))
        with EndpointClient(endpoint, config.get("model_name"), api=config.get("api", "completions"), stream=stream,
                            deadline_s=timeout, max_inflight=cap["capacity"], api_key=endpoint_key) as client:
            pf = preflight(client, deadline_s=min(5.0, timeout))
            if not pf["ok"]:
                return {"preflight_failed": True, "preflight": pf}, "", None
            if progress:
                progress(f"SVC-SLA: pre-flight of {endpoint} passed in {pf['seconds']:g} s (model {pf['model']}, "
                         f"{'streaming' if stream else 'not streaming'}); client capacity {cap['capacity']} in flight")

            def issue(idx: int, complete: Any) -> None:
                client.submit(prompts[idx], wl.out_tokens[idx], lambda r: complete(
                    r["tokens"], None if r["ok"] else f"{r['error_kind']}: {r['error']}", _request_detail(r)))

            raw = run_loadgen(issue, wl, logdir, scenario="Server", duration_s=duration, target_qps=qps,
                              latency_target_s=target_lat, deadline_s=timeout + 5.0, progress=progress, label=label)
            raw.update(preflight=pf, model_name=client.model, api=client.api, stream=stream)
            used = dict(cap, max_in_flight=client.max_busy)
        return raw, f"OpenAI-compatible endpoint {endpoint}", used
    with rig.engine(config["model"]) as engine:
        engine.warmup()
        wl = Workload.build(config.get("workload", {}), engine.cfg.vocab, tenants, seed=engine.cfg.seed)

        def issue(idx: int, complete: Any) -> None:
            t_issue = time.monotonic_ns()
            times: List[int] = []

            def done(r: Any) -> None:
                if r.error:
                    return complete(0, f"engine: {r.error}", None)
                chunks = [[r.first_ns, 1]] + [[t, 1] for t in times] if r.first_ns else []
                complete(len(r.output or []), None, _request_detail(
                    {"t_issue_ns": t_issue, "t_send_ns": t_issue, "t_first_ns": r.first_ns, "t_done_ns": r.done_ns,
                     "tokens": len(r.output or []), "chunks": chunks, "token_count": "the engine's tokens"}))
            engine.submit(wl.prompts[idx], wl.out_tokens[idx], done,
                          on_token=lambda r, tok: times.append(time.monotonic_ns()))

        raw = run_loadgen(issue, wl, logdir, scenario="Server", duration_s=duration, target_qps=qps,
                          latency_target_s=target_lat, deadline_s=timeout, progress=progress, label=label)
        raw.update(stream=True, token_source="the engine's tokens")
    return raw, f"built-in model on {rig.device}", None


def _request_detail(r: Dict[str, Any]) -> Dict[str, Any]:
    """What a request's record keeps: times relative to its issue (ns), the chunks and how tokens were counted."""
    t0 = r.get("t_issue_ns") or 0
    rel = lambda t: (t - t0) if t else None  # noqa: E731
    return {"sent_ns": rel(r.get("t_send_ns")), "first_ns": rel(r.get("t_first_ns")), "done_ns": rel(r.get("t_done_ns")),
            "chunks": [[c[0] - t0, c[1]] for c in r.get("chunks") or []], "token_count": r.get("token_count"),
            "status": r.get("status")}


def _dist(values: Sequence[float], censored: int = 0) -> Dict[str, Any]:
    """P50/P90/P99/max (nearest rank, as LoadGen) of a sample; ``censored`` of them are at a deadline; ``tail``: the
    largest values, what SVC-SLA's check bounds the P99 with."""
    return {"p50_s": percentile(values, 0.5), "p90_s": percentile(values, 0.9), "p99_s": percentile(values, 0.99),
            "max_s": max(values) if values else None, "samples": len(values), "censored": censored,
            "tail": quantile_tail(values, 0.99)}


def _itl(chunks: Sequence[Sequence[int]]) -> List[float]:
    """Inter-token latencies of one request: a chunk that carries k tokens after a gap of d is k tokens d/k apart;
    the tokens that came with the first one arrived with it (0)."""
    out: List[float] = []
    for i, (t, k) in enumerate(chunks):
        if k <= 0:
            continue
        if i == 0:
            out.extend([0.0] * (k - 1))
        else:
            out.extend([(t - chunks[i - 1][0]) / 1e9 / k] * k)
    return out


def summarise_sla(raw: Dict[str, Any], tenants: List[Dict[str, Any]], qps: float, duration: float, target: str,
                  endpoint: Optional[str], timeout: float = 30.0, client: Optional[Dict[str, Any]] = None,
                  logdir: Optional[Path] = None) -> Dict[str, Any]:
    from ..inference.sut import early_stopping_bound

    q = raw["queries"]
    span = max(1e-9, (max((x[1] for x in q), default=1) - min((x[0] for x in q), default=0)) / 1e9) if q else duration
    total_share = sum(float(t.get("share", 1.0)) for t in tenants) or 1.0
    out = []
    queue_waits: List[float] = []
    server_times: List[float] = []
    for x in q:
        d = x[5] if len(x) > 5 and isinstance(x[5], dict) else {}
        if d.get("sent_ns") is not None:
            queue_waits.append(d["sent_ns"] / 1e9)
            if x[4] is None and d.get("done_ns") is not None:
                server_times.append((d["done_ns"] - d["sent_ns"]) / 1e9)
    for k, t in enumerate(tenants):
        mine = [x for x in q if x[3] == k]
        ok = [x for x in mine if x[4] is None]
        kinds: Dict[str, int] = {}
        for x in mine:
            if x[4] is not None:
                kind = str(x[4]).split(":", 1)[0] if ":" in str(x[4]) else "error"
                kinds[kind] = kinds.get(kind, 0) + 1
        timeouts = kinds.get("timeout", 0)
        lat = [(x[1] - x[0]) / 1e9 for x in ok]
        censored_lat = lat + [timeout] * timeouts  # a request past its deadline counts, at the deadline
        ttft, tpot, itl = [], [], []
        good = 0
        sla = {key: t.get(key) for key in TENANT_KEYS}
        for x in ok:
            d = x[5] if len(x) > 5 and isinstance(x[5], dict) else {}
            first, done, chunks = d.get("first_ns"), d.get("done_ns"), d.get("chunks") or []
            r_ttft = first / 1e9 if first is not None else None
            r_tpot = (done - first) / 1e9 / (x[2] - 1) if first is not None and done is not None and x[2] > 1 else None
            if r_ttft is not None:
                ttft.append(r_ttft)
            if r_tpot is not None:
                tpot.append(r_tpot)
            itl.extend(_itl(chunks))
            meets = (x[1] - x[0]) / 1e9 * 1e3 <= float(sla["p99_ms"])
            if sla.get("ttft_p99_ms") is not None:
                meets = meets and r_ttft is not None and r_ttft * 1e3 <= float(sla["ttft_p99_ms"])
            if sla.get("tpot_p99_ms") is not None and r_tpot is not None:
                meets = meets and r_tpot * 1e3 <= float(sla["tpot_p99_ms"])
            good += meets
        streamed = bool(raw.get("stream", True)) and bool(ttft)
        out.append({
            "name": t.get("name", f"tenant{k}"), "share": float(t.get("share", 1.0)) / total_share, "sla": sla,
            "offered_rps": round(qps * float(t.get("share", 1.0)) / total_share, 4),
            "issued": len(mine), "completed": len(ok), "errors": len(mine) - len(ok), "error_kinds": kinds,
            "timeouts": timeouts, "error_rate": round((len(mine) - len(ok)) / len(mine), 6) if mine else None,
            "throughput_rps": round(len(ok) / span, 4),
            "output_tokens": sum(x[2] for x in ok), "output_tokens_per_s": round(sum(x[2] for x in ok) / span, 4),
            "goodput_rps": round(good / span, 4), "goodput_share": round(good / len(mine), 6) if mine else None,
            "latency": _dist(censored_lat, timeouts),
            "p50_latency_s": percentile(censored_lat, 0.5), "p99_latency_s": percentile(censored_lat, 0.99),
            "early_stopping": dict(early_stopping_bound(censored_lat), what=ES_WHAT),
            "ttft": _dist(ttft) if streamed else None, "tpot": _dist(tpot) if streamed else None,
            "itl": _dist(itl) if streamed else None,
            "first_errors": [str(x[4])[:200] for x in mine if x[4] is not None][:3]})
    lg = raw.get("loadgen") or {}
    if client is not None:
        client = _client_evidence(client, queue_waits)
    records = None
    if logdir is not None and q and not raw.get("simulated"):
        records = _write_requests(Path(logdir) / "requests.jsonl", q, tenants)
    return {"simulated": bool(raw.get("simulated")), "target": target, "endpoint": endpoint,
            "offered_qps": qps, "duration_s": duration, "span_s": round(span, 4), "tenants": out,
            "deadline_s": timeout, "deadline_expired": raw.get("deadline_expired", 0),
            "late_answers": raw.get("late_answers", 0), "token_source": raw.get("token_source") or _token_source(q),
            "model_name": raw.get("model_name"), "api": raw.get("api"), "stream": raw.get("stream", True),
            "preflight": raw.get("preflight"), "client": client,
            "server_time": _dist(server_times) if server_times else None, "requests_file": records,
            "loadgen": {k: lg.get(k) for k in ("valid", "throughput_qps", "p99_latency_s", "early_stopping_met",
                                               "early_stopping_result", "summary_file", "detail_file", "version")}
            if lg else None,
            "rule": SLA_RULE}


ES_WHAT = ("LoadGen's early-stopping estimate of the P99: the latency that the true 99th percentile stays under "
           "with 99% confidence, given the number of requests (an upper bound, not the P99)")
SLA_RULE = ("per tenant: latency = issued to completed (LoadGen's issue to the last byte); P99 = the 99th "
            "percentile (nearest rank) of the successful requests and of the timeouts, each censored at the "
            "deadline; the early-stopping estimate (LoadGen's rule) must also be within the target; TTFT = issue to "
            "the first chunk with text; TPOT = (last chunk - first chunk) / (output tokens - 1) per request; ITL = "
            "the gaps between chunks, a chunk of k tokens counting k tokens (gap / k each); throughput = successful "
            "requests / run span; output tokens/s = their tokens / span; goodput = requests meeting every SLO of the "
            "tenant / span; error rate = (timeouts + connection, HTTP, server, protocol, client errors) / issued")


def _token_source(q: List[List[Any]]) -> Optional[str]:
    kinds: Dict[str, int] = {}
    for x in q:
        d = x[5] if len(x) > 5 and isinstance(x[5], dict) else {}
        if d.get("token_count"):
            kinds[d["token_count"]] = kinds.get(d["token_count"], 0) + 1
    return "; ".join(f"{k} ({n} requests)" for k, n in sorted(kinds.items(), key=lambda kv: -kv[1])) or None


def _client_evidence(c: Dict[str, Any], queue_waits: List[float]) -> Dict[str, Any]:
    waited = [w for w in queue_waits if w > CLIENT_QUEUE_S]
    saturated = c.get("max_in_flight", 0) >= c["capacity"] and bool(waited)
    limited = saturated and c["capacity"] < c["need"]
    if limited:
        why = (f"the client was the limit: all {c['capacity']} of its request slots were busy and {len(waited)} "
               f"requests waited in its queue (P99 {percentile(queue_waits, 0.99) * 1e3:.3g} ms), and a server "
               f"meeting the SLA needs {c['need']} in flight: the latencies measure the client, not the server")
    elif saturated:
        why = (f"all {c['capacity']} request slots were busy and {len(waited)} requests waited in the client's "
               f"queue; a server meeting the SLA needs {c['need']} in flight, so the server's own latency exceeded "
               "the target (the client was not the limit)")
    else:
        why = (f"the client never ran out of request slots (at most {c.get('max_in_flight', 0)} of {c['capacity']} "
               "in flight)")
    return dict(c, queue_wait=_dist(queue_waits), queued_requests=len(waited), saturated=saturated, limited=limited,
                statement=why)


#: A request that waited longer than this for a free client slot was queued by the client.
CLIENT_QUEUE_S = 0.001


def _write_requests(path: Path, q: List[List[Any]], tenants: List[Dict[str, Any]]) -> Optional[str]:
    from ..files import atomic_write

    lines = []
    for x in q:
        d = x[5] if len(x) > 5 and isinstance(x[5], dict) else {}
        lines.append(json.dumps({"issued_ns": x[0], "completed_ns": x[1], "tokens": x[2],
                                 "tenant": tenants[x[3]].get("name") if x[3] < len(tenants) else x[3],
                                 "error": x[4], **{k: v for k, v in d.items() if v is not None}}))
    try:
        atomic_write(path, "\n".join(lines) + "\n")
    except OSError:
        return None
    return str(path)


def per_tenant(ev: Dict[str, Any]) -> List[Dict[str, Any]]:
    """One evidence per tenant (the run's facts plus ``tenant``), for SVC-SLA's per-tenant verdicts."""
    if ev.get("absent") or ev.get("unavailable") or ev.get("error"):
        return [ev]
    run = {k: v for k, v in ev.items() if k != "tenants"}
    return [dict(run, tenant=t) for t in ev["tenants"]]


# --------------------------------------------------------------------------
# Acquire: cold start, fragmentation


def acquire_coldstart(rig: Any, config: Dict[str, Any], plan: Optional[TrialPlan] = None) -> Dict[str, Any]:
    """Cold starts (each a fresh interpreter) until SVC-COLDSTART's rule decides; the evidence is the median trial's
    stages with every trial's total (``samples_s``) and stages (``trials``)."""
    how = {"asis": "none", "evict_files": "files", "drop_all": "all"}.get(config.get("page_cache", "asis"), "none")
    timeout = min(1800.0, max(5.0, float(config.get("timeout_s", 300))))
    if rig.simulated:
        one = rig.sim.coldstart
    else:
        why = rig.missing()
        if why:
            return {"unavailable": why}
        one = lambda: rig.coldstart(config["model"], how, timeout)  # noqa: E731
    return coldstart_trials(one, config, plan)


def coldstart_trials(one: Any, config: Dict[str, Any], plan: Optional[TrialPlan] = None) -> Dict[str, Any]:
    from ..checks.inference import check_coldstart

    plan = plan or TrialPlan.default("SVC-COLDSTART", initial=3, step=2, cap=5)
    runs: List[Dict[str, Any]] = []

    def evidence(looks: int) -> Dict[str, Any]:
        good = [r for r in runs if r.get("total_s") is not None and not r.get("error")]
        if not good:
            return dict(runs[0]) if runs else {"error": "no cold start ran"}
        mid = sorted(good, key=lambda r: r["total_s"])[len(good) // 2]
        return dict(mid, samples_s=[r["total_s"] for r in good],
                    trials=[{k: r.get(k) for k in ("total_s", "stages")} for r in good],
                    failed_trials=[r.get("error") for r in runs if r.get("error")],
                    sequential={"looks": looks})

    def look(k: int, index: int) -> List[Dict[str, Any]]:
        out = []
        for i in range(k):
            r = one()
            runs.append(r)
            out.append({"index": index + i, "total_s": r.get("total_s")})
            if r.get("error") or r.get("unavailable"):
                break
        return out

    def judge(trials: List[Dict[str, Any]], looks: int) -> str:
        ev = evidence(looks)
        if ev.get("error") or ev.get("unavailable") or len(ev.get("samples_s") or []) < 2:
            return "never"
        return next_step(check_coldstart(ev, {"max_s": config.get("max_s")}, "").evidence["decision"])

    out = sequential(look, judge, plan)
    ev = evidence(out["sequential"]["looks"])
    if "samples_s" in ev:
        ev["sequential"] = dict(out["sequential"], trials=len(ev["samples_s"]))
    return ev


def acquire_frag(rig: Any, config: Dict[str, Any], logdir: Path,
                 progress: Optional[Any] = None) -> Dict[str, Dict[str, Any]]:
    """``{"kv-pool": evidence, "allocator": evidence}`` under a mixed-length workload (LoadGen Offline)."""
    if rig.simulated:
        return rig.sim.frag()
    why = rig.missing() or loadgen_missing()
    if why:
        return {"kv-pool": {"unavailable": why}, "allocator": {"unavailable": why}}
    from ..inference.sut import Workload, run_loadgen

    n = int(min(100_000, max(8, config.get("queries", 256))))
    try:
        engine = rig.engine(config["model"])
    except ValueError as exc:
        return {"kv-pool": {"error": str(exc)}, "allocator": {"error": str(exc)}}
    before = rig.allocator_stats()
    with engine:
        engine.warmup()
        wl_spec = dict(config.get("workload") or {}, samples=n)
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
    for (t, b, s, n), d in zip(trace, durations):
        if b:
            num += (b * bt - s) * d
            den += b * bt * d
    loaded = [round((b * bt - s) / (b * bt), 6) for (t, b, s, n) in busy if b >= FRAG_LOADED_SHARE * peak[1]]
    if len(loaded) > MAX_STEP_FRACTIONS:  # evenly thinned: the report stays small
        loaded = [loaded[int(i * len(loaded) / MAX_STEP_FRACTIONS)] for i in range(MAX_STEP_FRACTIONS)]
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


def sweep_config(th: Dict[str, Dict[str, Any]]) -> Dict[str, Any]:
    """The sweep's configuration from the thresholds of the requirements it serves."""
    ppl, lat, smp = th.get("PLP-PPL", {}), th.get("PLP-LATENCY", {}), th.get("PLP-SAMPLE", {})
    return {"model": ppl.get("model", {}), "workload": ppl.get("workload", {}), "peak_tflops": ppl.get("peak_tflops"),
            "window_ms": ppl.get("window_ms", 10), "period_ms": smp.get("period_ms", 10),
            "sweep_fractions": lat.get("sweep_fractions", [0.2, 0.4, 0.6, 0.8]), "point_s": lat.get("point_s", 5),
            "min_queries": min_samples(0.99) + 10 if lat.get("max_latency_us") is not None else None,
            # what PLP-LATENCY decides a point with: its runs are repeated until that rule decides
            "latency_thresholds": {k: lat.get(k) for k in ("max_latency_us", "metric", "at_load_max")}}


# --------------------------------------------------------------------------
# One device's inference runs in a session (what the fixture hands to the conformance tests)


class Inference:
    """The inference-under-load runs of one device: each acquire runs once per session (the sweep serves the
    four PLP-* requirements) under an exclusive lock on the device, so xdist workers never load it twice."""

    def __init__(self, rig: Any, profile: Any, options: Dict[str, Any], logdir: Path, cache: Dict[str, Any],
                 absent: Optional[str] = None, run_id: Optional[str] = None, unavailable: Optional[str] = None):
        self.rig, self.profile, self.options, self.cache, self.absent = rig, profile, options, cache, absent
        #: Why this platform cannot run the workload at all (a snapshot): not measured, never "not applicable".
        self.unavailable = unavailable
        self.subject = rig.subject if rig is not None else "accelerators"
        self.logdir = Path(logdir) / self.subject.replace(":", "-").replace("/", "-")
        self.run_id = run_id
        #: Called with a line of progress during the runs (``sits_progress``); None: silent.
        self.progress: Optional[Any] = None
        #: PLP-LATENCY's runs of each sweep point (the run's plan and budget); None: the default, no deadline
        self.latency_plan: Optional[TrialPlan] = None

    def _once(self, key: str, fn: Any) -> Any:
        """Run ``fn`` once per session and device.  Under xdist the workers share the log folder: the first
        to take the device's lock runs it and leaves the evidence there (tagged with the run), the others
        read it back instead of loading the device again."""
        if self.absent:
            return {"absent": self.absent}
        if self.unavailable:
            return {"unavailable": self.unavailable}
        k = f"{self.subject}/{key}"
        if k not in self.cache:
            from .locks import exclusive

            shared = self.logdir / f"{key}.evidence.json"
            with exclusive(f"device-{self.subject}", purpose=f"inference {key}"):
                self.cache[k] = self._shared(shared) or fn()
                if self.run_id is not None and not self.cache[k].get("absent"):
                    from ..files import atomic_write

                    atomic_write(shared, json.dumps({"run": self.run_id, "evidence": self.cache[k]}, default=str))
        return self.cache[k]

    def _shared(self, path: Path) -> Optional[Dict[str, Any]]:
        if self.run_id is None or not path.is_file() or path.is_symlink():
            return None
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return data.get("evidence") if data.get("run") == self.run_id else None

    def th(self, req: str) -> Dict[str, Any]:
        return self.profile.thresholds(req)

    def sweep(self) -> Dict[str, Any]:
        cfg = sweep_config({r: self.th(r) for r in ("PLP-PPL", "PLP-LATENCY", "PLP-SAMPLE")})
        return self._once("sweep", lambda: acquire_sweep(self.rig, cfg, self.logdir / "sweep", self.progress,
                                                         self.latency_plan))

    def sla(self) -> Dict[str, Any]:
        cfg = dict(self.th("SVC-SLA"), model=self.th("PLP-PPL").get("model", {}))
        return self._once("sla", lambda: acquire_sla(self.rig, cfg, self.logdir / "sla", self.options.get("endpoint"),
                                                     self.options.get("endpoint_key"), self.progress))

    def coldstart(self, plan: Optional[TrialPlan] = None) -> Dict[str, Any]:
        cfg = dict(self.th("SVC-COLDSTART"), model=self.th("PLP-PPL").get("model", {}))
        return self._once("coldstart", lambda: acquire_coldstart(self.rig, cfg, plan))

    def frag(self) -> Dict[str, Dict[str, Any]]:
        cfg = dict(self.th("SVC-FRAG"), model=self.th("PLP-PPL").get("model", {}))
        if self.absent:
            return {"kv-pool": {"absent": self.absent}}
        if self.unavailable:
            return {"kv-pool": {"unavailable": self.unavailable}}
        return self._once("frag", lambda: acquire_frag(self.rig, cfg, self.logdir / "frag", self.progress))


def inference_for(platform: Any, profile: Any, acc: Optional[Dict[str, Any]], expected_absent: Optional[str],
                  options: Dict[str, Any], logdir: Path, cache: Dict[str, Any],
                  run_id: Optional[str] = None) -> Inference:
    """The runs for ``acc``; with no accelerator, the CPU when the profile expects none, else absent."""
    if acc is None and expected_absent:
        return Inference(None, profile, options, logdir, cache, absent=expected_absent)
    try:
        rig = platform.inference_rig(acc, profile, options)
    except InferenceUnavailable as exc:
        return Inference(None, profile, options, logdir, cache, unavailable=str(exc))
    return Inference(rig, profile, options, logdir, cache, run_id=run_id)
