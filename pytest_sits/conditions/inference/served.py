"""The PLP-* sweep, SVC-FRAG and SVC-COLDSTART measured on the serving stack under test (``--sits-serve`` or
``--sits-endpoint``) instead of the suite's built-in model.

One lifecycle per deployment: the sweep runs LoadGen against the server (Offline for its saturation throughput at
the client's concurrency, SingleStream, then Server-scenario Poisson load at fractions of that saturation), with the
power of every accelerator the deployment uses and of the host sampled by Sample3D, and the server's own
``/metrics`` polled beside.  From that one run:

* ρ (PLP-PPL, and the load PLP-POWER and PLP-LATENCY are judged at) is the output token rate over sliding
  windows divided by the highest window rate the server reached at saturation (``peak.theoretical`` is false: a
  remote server's FLOPs are not counted, so ρ is a share of the measured saturation, said so);
* SVC-FRAG compares the KV capacity the server says it holds (``kv_cache_usage`` x blocks x block size) with what
  the client knows is held (each open request's prompt tokens, as the server counted them, plus the tokens
  streamed so far), at every metrics sample where client and server agree on the open requests;
* SVC-COLDSTART is measured by the launch (``plugin/serving.py``): launch, ready, first token, repeated.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from ...checks.inference import FRAG_LOADED_SHARE
from ...inference import loadgen_missing
from ..sampler import Sample3D
from .deployment import deployment_power, served_workload
from .records import thinned

#: Requests the client keeps in flight against the server when no other figure is given: saturation is measured at
#: this concurrency (stated in the evidence).
DEFAULT_CONCURRENCY = 64
#: The server's /metrics is polled this often during the sweep.
METRICS_PERIOD_S = 0.1
#: A sample during whose fetch the client's held tokens moved by more than this share of the allocated slots is
#: left out (the server's figure is of an unknown instant of the fetch).
MOVING_SHARE = 0.01


class ServerGone(Exception):
    """The server stopped answering (or restarted) under the sweep; the message says when and how."""


class ServedRunner:
    """LoadGen scenarios against the server under test (what :class:`~.sweep.LiveRunner` does against the built-in
    model): each request's streamed chunks are its work (output tokens), the sampler and the metrics poller run
    beside each scenario."""

    def __init__(self, client: Any, config: Dict[str, Any], logdir: Path, sources: List[Any], workload: Any,
                 prompts: List[str], metrics: Optional[Any], progress: Optional[Any] = None):
        self.client, self.c, self.logdir, self.sources = client, config, logdir, sources
        self.workload, self.prompts, self.metrics, self.progress = workload, prompts, metrics, progress
        self.records: List[Dict[str, Any]] = []
        from .sla import ServerLoss

        #: A server that went away under the sweep ends it (ERROR), as under SVC-SLA.
        self.loss = ServerLoss(str(config.get("url") or "the server"))

    def _issue(self, idx: int, complete: Any) -> None:
        def done(r: Dict[str, Any]) -> None:
            self.records.append(r)
            self.loss.note(r)
            complete(r["tokens"] if r["ok"] else 0, None if r["ok"] else f"{r['error_kind']}: {r['error']}")
        self.client.submit(self.prompts[idx], self.workload.out_tokens[idx], done)

    def calibrate(self) -> float:
        """A rough maximum (queries/s) for LoadGen's Offline expectation: the client's concurrency, twice, at once."""
        import threading

        n = 2 * self.client.capacity
        left = threading.Semaphore(0)
        t = time.perf_counter()
        for i in range(n):
            self.client.submit(self.prompts[i % len(self.prompts)], self.workload.out_tokens[i % len(self.prompts)],
                               lambda r: left.release())
        for _ in range(n):
            left.acquire(timeout=max(60.0, self.client.deadline_s))
        return n / max(1e-6, time.perf_counter() - t)

    def run(self, scenario: str, name: str, **kw: Any) -> Dict[str, Any]:
        from ...inference.sut import run_loadgen

        mark = len(self.records)
        n_metrics = len(self.metrics.samples) if self.metrics is not None else 0
        with Sample3D(self.sources, self.c["period_ms"] / 1e3) as s:
            r = run_loadgen(self._issue, self.workload, self.logdir / name, scenario=scenario,
                            seed=self.c.get("seed", 0), progress=self.progress, label=f"PLP sweep, {name}",
                            deadline_s=kw.pop("deadline_s", None) or self.client.deadline_s + 5.0,
                            watch=self.loss.reason, **kw)
        if r.get("stopped"):
            raise ServerGone(f"{r['stopped']} (during the sweep's {name} run); the sweep did not decide")
        mine = self.records[mark:]
        r["streaming"] = streaming_figures(mine)
        r["work"] = work_of(mine)
        r["samples"] = s.evidence()
        r["device_power"] = device_power(r, r["samples"])
        r["server_metrics"] = self.metrics.samples[n_metrics:] if self.metrics is not None else []
        r["records"] = mine
        return r

    def describe(self) -> Dict[str, Any]:
        return {"server": self.c.get("server"), "model_name": self.client.model, "api": self.client.api,
                "workload": self.workload.describe(), "device": "the server under test",
                "concurrency": self.client.capacity, "load_generator": "MLPerf LoadGen",
                "work": "output tokens as the server streamed them (a remote server's FLOPs are not counted)"}


def device_power(raw: Dict[str, Any], samples: Dict[str, Any]) -> Dict[str, Any]:
    """Each accelerator's own power over a run's span (energy over time) and over its blocks of time: a deployment
    on several accelerators is judged per accelerator, against the per-accelerator ceiling."""
    from .records import energy_between, power_blocks

    q = raw.get("queries") or []
    t0 = min((x[0] for x in q), default=raw.get("t0_ns") or 0)
    t1 = max((x[1] for x in q), default=raw.get("t1_ns") or 0)
    out: Dict[str, Any] = {}
    for name, src in (samples.get("sources") or {}).items():
        if not name.startswith(("nvml:", "amdsmi:")):
            continue
        e = energy_between(src["readings"], t0, t1)
        out[name] = {"power_w": round(e["power_w"], 4) if e.get("power_w") is not None else None,
                     "blocks_w": [round(b, 4) for b in power_blocks(src["readings"], t0, t1)]}
    return out


def per_accelerator(points: List[Dict[str, Any]]) -> Optional[str]:
    """Where the deployment's power came from several accelerators: each point's judged power becomes the highest
    accelerator's (its blocks with it), the deployment's sum kept as ``deployment_power_w``; the statement, or None
    for one accelerator."""
    for p in points:
        devs = {k: v for k, v in (p.get("device_power") or {}).items() if v.get("power_w") is not None}
        if len(devs) < 2:
            return None
        name, top = max(devs.items(), key=lambda kv: kv[1]["power_w"])
        p["deployment_power_w"] = p.get("power_w")
        p["power_w"] = top["power_w"]
        p["power_blocks_w"] = top["blocks_w"] or None
        p["power_judged"] = name
    return ("power judged per accelerator: at each load level the highest of the deployment's accelerators (its own "
            "sensor, energy over time) against the per-accelerator ceiling; the deployment's sum is "
            "deployment_power_w")


def streaming_figures(records: List[Dict[str, Any]]) -> Dict[str, Any]:
    """TTFT, TPOT and ITL of a run's answered requests (SVC-SLA's definitions: from the request's issue to its
    first token; per request (last - first) / (tokens - 1); the gaps between chunks, k tokens of a chunk d/k apart),
    each with P50/P90/P99 and the order statistics of its tail."""
    from .sla import _dist, _itl

    ttft, tpot, itl = [], [], []
    for r in records:
        first, done, issued = r.get("t_first_ns"), r.get("t_done_ns"), r.get("t_issue_ns")
        if not r.get("ok") or first is None or issued is None:
            continue
        ttft.append((first - issued) / 1e9)
        if done is not None and r.get("tokens", 0) > 1:
            tpot.append((done - first) / 1e9 / (r["tokens"] - 1))
        itl.extend(_itl(r.get("chunks") or []))
    return {"ttft": _dist(ttft), "tpot": _dist(tpot), "itl": _dist(itl),
            "rule": "TTFT = issue to the first chunk with output; TPOT = (last chunk - first chunk) / (output tokens "
                    "- 1) per request; ITL = the gaps between chunks, a chunk of k tokens counting k tokens"}


def work_of(records: List[Dict[str, Any]]) -> List[Tuple[int, int, int, float, str]]:
    """Work entries ``(t0, t1, tokens, work, kind)`` from the client's records: each streamed chunk's tokens spread
    over the time since the request's previous chunk (its send, for the first)."""
    out: List[Tuple[int, int, int, float, str]] = []
    for r in records:
        if not r.get("ok"):
            continue
        prev = r.get("t_send_ns") or r.get("t_issue_ns")
        for t, k in r.get("chunks") or []:
            if k > 0 and prev is not None and t >= prev:
                out.append((int(prev), int(max(t, prev + 1)), int(k), float(k), "tokens"))
            prev = t
    out.sort()
    return out


class OpenRequests:
    """The client's requests indexed by when they were sent, for :meth:`at`: only those sent within the longest
    request's span before ``t`` are looked at (a run's samples times its records, scanned whole, grow past
    minutes)."""

    def __init__(self, records: List[Dict[str, Any]]):
        spans = [r for r in records if r.get("t_send_ns") is not None and r.get("t_done_ns") is not None]
        self.records = sorted(spans, key=lambda r: r["t_send_ns"])
        self.sends = [r["t_send_ns"] for r in self.records]
        self.longest = max((r["t_done_ns"] - r["t_send_ns"] for r in self.records), default=0)

    def at(self, t: int) -> Tuple[int, Optional[int], int]:
        """At ``t``: the requests the client had open, the KV tokens they held (prompt tokens as the server counted
        them plus the tokens streamed by ``t``; None when one open request's prompt count is unknown), and how many
        of them had failed."""
        import bisect

        n, held, failed = 0, 0, 0
        known = True
        lo, hi = bisect.bisect_left(self.sends, t - self.longest), bisect.bisect_right(self.sends, t)
        for r in self.records[lo:hi]:
            if not r["t_send_ns"] <= t < r["t_done_ns"]:
                continue
            n += 1
            if not r.get("ok"):
                failed += 1
                continue
            if r.get("prompt_tokens") is None:
                known = False
                continue
            held += int(r["prompt_tokens"]) + sum(k for c, k in r.get("chunks") or [] if c <= t)
        return n, (held if known else None), failed


def held_at(records: List[Dict[str, Any]], t: int) -> Tuple[int, Optional[int], int]:
    """:meth:`OpenRequests.at` of ``records`` (one look)."""
    return OpenRequests(records).at(t)


def served_frag(records: List[Dict[str, Any]], samples: List[Dict[str, Any]], poller: Dict[str, Any]) -> Dict[str, Any]:
    """SVC-FRAG's KV-pool evidence from the server's metrics against what the client held (module docstring)."""
    bt, blocks = poller.get("block_tokens"), poller.get("pool_blocks")
    base = {"view": "kv-pool", "source": "server", "metrics": {k: poller.get(k) for k in
                                                             ("url", "stack", "period_s", "samples", "failed",
                                                              "last_error", "source")}}
    if not bt or not blocks:
        return dict(base, unavailable=f"the server states no KV block layout ({poller.get('source')}): the "
                                      "capacity its usage share refers to is unknown")
    if not samples:
        return dict(base, error=f"no sample of the server's metrics was read during the load "
                                f"({poller.get('failed', 0)} fetches failed: {poller.get('last_error')})")
    open_at = OpenRequests(records).at
    kept: List[Dict[str, Any]] = []
    dropped = {"idle": 0, "queued": 0, "disagree": 0, "unknown_prompt": 0, "failed_open": 0, "moving": 0}
    for s in samples:
        n, held, failed = open_at(s["t_ns"])
        # the server answered of some instant of its fetch: where the client's view moved during it (a chunk arrived,
        # a request opened or ended), the held tokens lie between those at its start and end: kept (at the middle)
        # only when the same requests were open throughout and the two differ by at most MOVING_SHARE of the slots
        edges = [open_at(s[k]) for k in ("t0_ns", "t1_ns") if s.get(k) is not None]
        running = s.get("running")
        slots = s["usage"] * blocks * bt
        same_open = all(e[0] == n and e[2] == failed for e in edges)
        range_held = [int(e[1]) for e in edges if e[1] is not None] + ([held] if held is not None else [])
        spread = (max(range_held) - min(range_held)) / slots if same_open and range_held and slots else None
        if s["usage"] <= 0 or n == 0:
            dropped["idle"] += 1
        elif edges and (spread is None or spread > MOVING_SHARE) and any(e != (n, held, failed) for e in edges):
            dropped["moving"] += 1
        elif (s.get("waiting") or 0) > 0:
            dropped["queued"] += 1
        elif failed:
            dropped["failed_open"] += 1
        elif running is None or int(round(running)) != n:
            dropped["disagree"] += 1
        elif held is None or len(range_held) != len(edges) + 1:
            dropped["unknown_prompt"] += 1
        else:
            mid = (min(range_held) + max(range_held)) / 2
            kept.append({"t_ns": s["t_ns"], "usage": s["usage"], "open": n, "held_tokens": mid,
                         "allocated_slots": round(slots, 1), "fraction": round(1 - mid / slots, 6),
                         "spread": round(spread or 0.0, 6)})
    if not kept:
        return dict(base, block_tokens=bt, pool_blocks=blocks, dropped=dropped,
                    unavailable=f"none of {len(samples)} metrics samples had the server running exactly the "
                                f"requests the client had open with none queued ({dropped}): nothing to compare")
    peak = max(kept, key=lambda k: k["usage"])
    loaded = [k["fraction"] for k in kept if k["usage"] >= FRAG_LOADED_SHARE * peak["usage"]]
    loaded = thinned(loaded)
    peak_blocks = int(round(peak["usage"] * blocks))
    return dict(base, block_tokens=bt, pool_blocks=blocks, step_fractions=loaded, loaded_share=FRAG_LOADED_SHARE,
                peak_blocks_used=peak_blocks, peak_tokens_stored=peak["held_tokens"], peak_sequences=peak["open"],
                fraction=peak["fraction"], peak_occupancy=round(peak["usage"], 6),
                fraction_time_weighted=round(sum(k["fraction"] for k in kept) / len(kept), 6),
                steps=len(kept), samples_read=len(samples), dropped=dropped,
                below_zero=sum(1 for k in kept if k["fraction"] < 0),
                largest_spread=max(k["spread"] for k in kept),
                method=("per sample of the server's /metrics: 1 - (tokens the client's open requests held: prompt "
                        "tokens as the server counted them + tokens streamed by then) / (the server's KV usage share x "
                        f"{blocks} blocks x {bt} tokens); kept only where the server ran exactly the client's open "
                        "requests and queued none, and the client's held tokens moved by at most "
                        f"{MOVING_SHARE:.1%} of the slots during the fetch (the middle kept); judged: the "
                        "mean over the samples at or above half of the peak's usage (step_fractions), with fraction "
                        "the sample of peak usage; a value below zero is the "
                        "client's view ahead of the server's (a metric updated a step late), kept as measured"))


def frag_unavailable(why: str) -> Dict[str, Dict[str, Any]]:
    return {"kv-pool": {"unavailable": why}}


def acquire_served_sweep(target: Dict[str, Any], config: Dict[str, Any], logdir: Path,
                         progress: Optional[Any] = None, plan: Optional[Any] = None) -> Dict[str, Any]:
    """The sweep against the server under test (``target``: url, model, api, stream, key, accelerators, redfish,
    server), with its metrics; ``{"error": ...}`` when the server cannot be used."""
    from ...inference.endpoint import EndpointClient, EndpointError, preflight
    from ...inference.metrics import MetricsPoller
    from .sweep import _clamp_config, _sweep

    why = loadgen_missing()
    if why:
        return {"unavailable": why}
    c = _clamp_config(config)
    c["server"] = target.get("server")
    c["peak_tflops"] = None  # a remote server's FLOPs are not counted: ρ is a share of its measured saturation
    logdir = Path(logdir)
    logdir.mkdir(parents=True, exist_ok=True)
    timeout = min(600.0, max(1.0, float(target.get("timeout_s") or 60.0)))
    concurrency = int(target.get("concurrency") or DEFAULT_CONCURRENCY)
    sources, missing, primary = deployment_power(target.get("accelerators") or [], target.get("redfish"),
                                                 local=bool(target.get("local", True)))
    try:
        with EndpointClient(target["url"], target.get("model"), api=target.get("api", "completions"),
                            stream=True, deadline_s=timeout, max_inflight=concurrency,
                            api_key=target.get("key")) as client:
            pf = preflight(client, deadline_s=min(5.0, timeout))
            if not pf["ok"]:
                return {"error": f"pre-flight of {target['url']}: {pf['error']}", "preflight": pf}
            try:
                wl = served_workload(client, c["workload"], target.get("dataset"), None, int(c.get("seed") or 2026))
            except ValueError as exc:
                return {"error": str(exc), "preflight": pf}
            prompts = wl.texts
            poller = MetricsPoller(target["url"], METRICS_PERIOD_S, target.get("key"))
            metrics_why = poller.probe()
            if progress:
                progress(f"PLP sweep: pre-flight of {target['url']} passed (model {pf['model']}); "
                         f"{concurrency} requests in flight at most; server metrics: "
                         f"{metrics_why or f'{poller.stack} at {poller.url}'}")
            runner = ServedRunner(client, dict(c, url=target["url"]), logdir, sources, wl, prompts,
                                  None if metrics_why else poller, progress)
            rig = _ServedRig(target)
            try:
                if metrics_why:
                    ev = _sweep(rig, c, logdir, (sources, missing), primary, runner, plan)
                else:
                    with poller:
                        ev = _sweep(rig, c, logdir, (sources, missing), primary, runner, plan)
            except ServerGone as exc:
                return {"error": str(exc), "stopped": str(exc), "preflight": pf,
                        "answered_before": sum(1 for r in runner.records if r.get("ok"))}
            restarted = None if metrics_why else poller.restarted()
            if restarted:
                return {"error": f"{restarted}: the sweep measured more than one server lifetime and did not decide",
                        "stopped": restarted, "preflight": pf}
    except EndpointError as exc:
        return {"error": str(exc)}
    finally:
        for s in sources:
            s.close()
    judged = per_accelerator(ev.get("sweep") or [])
    if judged:
        ev["power_judged"] = judged
    ev["peak"] = dict(ev["peak"], unit="output tokens/s")
    ev["rho_rule"] = ("ρ of a window = output tokens streamed in it / (the saturated server's output token rate x "
                      "window); a point's ρ is the mean over its sliding windows: its share of the saturation")
    ev["served"] = True
    ev["preflight"] = pf
    ev["prompt_tokens_counted"] = _prompt_stats(runner.records, wl)
    ev["frag"] = frag_unavailable(metrics_why)["kv-pool"] if metrics_why else \
        served_frag(runner.records, poller.samples, poller.describe())
    ev["server_metrics"] = poller.describe() if not metrics_why else {"unavailable": metrics_why}
    return ev


class _ServedRig:
    """What :func:`~.sweep._sweep` asks of its rig, for a served deployment."""

    simulated = False
    hardware: Dict[str, Any] = {}
    device = "server"

    def __init__(self, target: Dict[str, Any]):
        self.subject = f"endpoint {target['url']}"

    @staticmethod
    def peak_for(mean_rate: Optional[float], highest_window: Optional[float]) -> Dict[str, Any]:
        """ρ's reference: the saturated server's output token rate over the whole Offline run (its throughput), so
        that a point's ρ is its share of the saturation; the highest window rate is kept beside it."""
        return {"flops_per_s": mean_rate, "theoretical": False, "highest_window_per_s": highest_window,
                "source": "measured: the server's output token rate while saturated (LoadGen Offline at the "
                          "client's concurrency)"}


def _prompt_stats(records: List[Dict[str, Any]], wl: Any) -> Dict[str, Any]:
    counted = [int(r["prompt_tokens"]) for r in records if r.get("ok") and r.get("prompt_tokens") is not None]
    src = wl.describe()
    out: Dict[str, Any] = {"planned": src.get("prompt_tokens_planned") or f"the dataset {src.get('file')}",
                           "requests_with_usage": len(counted), "requests": sum(1 for r in records if r.get("ok"))}
    if counted:
        out.update(mean=round(sum(counted) / len(counted), 2), min=min(counted), max=max(counted),
                   source="usage.prompt_tokens: the prompt's length as the server's tokenizer counted it")
    else:
        out["source"] = "the server reported no usage.prompt_tokens"
    return out


def served_target(options: Dict[str, Any], model_name: Optional[str], api: str = "completions",
                  timeout_s: Optional[float] = None) -> Dict[str, Any]:
    """What the served measurements need from the run's options."""
    from .deployment import is_local

    served = options.get("served") or {}
    local = bool(served.get("launched")) or is_local(options["endpoint"])
    return {"url": options["endpoint"], "local": local, "model": model_name or served.get("model"), "api": api,
            "key": options.get("endpoint_key"), "accelerators": options.get("deployment_accelerators") or [],
            "redfish": options.get("redfish"), "timeout_s": timeout_s, "dataset": options.get("dataset"),
            "server": {k: served.get(k) for k in ("command", "url", "models", "version", "log")} if served
            else {"url": options["endpoint"], "launched": False}}
