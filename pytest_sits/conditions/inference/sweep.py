"""The sweep (PLP-SAMPLE, PLP-PPL, PLP-POWER, PLP-LATENCY): LoadGen Offline measures the maximum throughput,
SingleStream the unloaded latency, then LoadGen Server at each fraction of that maximum with Sample3D sampling
power; each point's Server run is repeated until PLP-LATENCY's rule decides.  PLP-POWER, PLP-SAMPLE and PLP-PPL
read their evidence from the same run."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from ...checks.inference import LATENCY_RUNS
from ...checks.interval import min_samples
from ...inference import loadgen_missing
from ..sampler import Sample3D, percentile, skew
from ..trials import TrialPlan, next_step, sequential
from .records import (MAX_POINT_S, MAX_POINTS, MAX_QPS, _lg_brief, _write_records, efficiency, peak_of, rho_series,
                      run_latency, summarise_point)

RHO_RULE = ("ρ of a window = work done in it (FLOPs from the model's shape; each engine step's work spread "
            "evenly over the step) / (peak FLOP/s x window); a point's ρ is the mean over its sliding windows, "
            "rho_p99 and rho_max the high ones")


def _clamp_config(config: Dict[str, Any]) -> Dict[str, Any]:
    c = dict(config)
    fr = [float(f) for f in c["sweep_fractions"]][:MAX_POINTS]
    c["sweep_fractions"] = [min(1.5, max(0.01, f)) for f in fr]
    c["point_s"] = min(MAX_POINT_S, max(1.0, float(c["point_s"])))
    c["period_ms"] = min(1000.0, max(1.0, float(c["period_ms"])))
    c["window_ms"] = min(10_000.0, max(1.0, float(c["window_ms"])))
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
        from ...inference.sut import Workload

        self.engine, self.c, self.logdir, self.sources, self.progress = engine, config, logdir, sources, progress
        self.workload = Workload.build(config["workload"], engine.cfg.vocab, seed=engine.cfg.seed)
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
        from ...inference.sut import run_loadgen

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
    peak_for = getattr(rig, "peak_for", None)  # a served deployment: ρ against its measured saturation
    peak = peak_for(mean_flops, measured_flops) if peak_for else \
        peak_of(c, getattr(rig, "hardware", {}), measured_flops, getattr(rig, "device", "cpu"))
    ss = runner.run("SingleStream", "singlestream", duration_s=max(1.0, c["point_s"] / 2),
                    expected_latency_s=span / max(1, len(ok)))
    ss_lat = [(q[1] - q[0]) / 1e9 for q in ss["queries"] if q[4] is None]
    from ...inference.sut import early_stopping_bound

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
    from ...checks.inference import latency_point_decision

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


def sweep_config(th: Dict[str, Dict[str, Any]]) -> Dict[str, Any]:
    """The sweep's configuration from the thresholds of the requirements it serves."""
    ppl, lat, smp = th["PLP-PPL"], th["PLP-LATENCY"], th["PLP-SAMPLE"]
    return {"model": ppl["model"], "workload": ppl["workload"], "peak_tflops": ppl["peak_tflops"],
            "window_ms": ppl["window_ms"], "period_ms": smp["period_ms"],
            "sweep_fractions": lat["sweep_fractions"], "point_s": lat["point_s"],
            "min_queries": min_samples(0.99) + 10 if lat["max_latency_us"] is not None else None,
            # what PLP-LATENCY decides a point with: its runs are repeated until that rule decides
            "latency_thresholds": {k: lat[k] for k in ("max_latency_us", "metric", "at_load_max")}}
