"""SVC-SLA: LoadGen Server at the profile's offered load, split between tenants by share, against the built-in
model or an OpenAI-compatible endpoint; per-tenant P99 with LoadGen's early-stopping bound, TTFT, TPOT and ITL,
throughput, goodput and error rate, and whether the client itself was the limit."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, cast

from ...checks.interval import quantile_tail
from ...inference import loadgen_missing
from ..sampler import percentile
from ...catalogue.inference import SIZING_HEADROOM, decidable_duration, requests_needed  # noqa: F401
from .records import MAX_QPS, MAX_SLA_S

def acquire_sla(rig: Any, config: Dict[str, Any], logdir: Path, endpoint: Optional[str] = None,
                endpoint_key: Optional[str] = None, progress: Optional[Any] = None) -> Dict[str, Any]:
    """LoadGen Server at the offered load, tenants by share, against the built-in model or ``endpoint`` (an
    OpenAI-compatible server, asked a pre-flight first: a bad endpoint is an error in seconds, not a slow
    server)."""
    tenants = _tenants(config)
    qps = min(MAX_QPS, max(0.1, float(config["target_qps"])))
    duration, sizing = min(MAX_SLA_S, max(1.0, float(config["duration_s"]))), None
    if config["size_to_decide"]:
        duration, sizing = decidable_duration(tenants, qps, duration)
    if sizing and progress:
        progress(f"SVC-SLA: {sizing}")
    timeout = min(600.0, max(0.1, float(config["timeout_s"])))
    logdir = Path(logdir)
    client = None
    if getattr(rig, "simulated", False):  # no rig: an endpoint on a host without the profile's accelerator
        raw = rig.sim.sla(tenants, qps, duration, config["workload"], timeout)
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
    summary = summarise_sla(raw, tenants, qps, duration, target, endpoint, timeout, client, logdir)
    summary["duration_rule"] = sizing or f"duration_s = {duration:g} s (long enough to decide every tenant's error rate)"
    if raw.get("stopped"):
        # The server went away under the run: the run could not test it (ERROR), not a server that failed its SLA;
        # what was measured before stays in the evidence.
        return dict(summary, error=f"{raw['stopped']}; the requests before it are kept in the evidence, and the "
                                   "run did not decide the SLA", stopped=raw["stopped"])
    return summary


class ServerLoss:
    """Tells a server that went away from one that answers badly: once ``in_a_row`` requests in a row (over at least
    ``seconds``) failed to connect, with no answer of any kind between them, the server is gone."""

    def __init__(self, url: str, in_a_row: int = 20, seconds: float = 2.0):
        import threading

        self.url, self.in_a_row, self.seconds = url, in_a_row, seconds
        self.lock = threading.Lock()
        self.run = 0
        self.first: Optional[float] = None
        self.last_error = ""
        self.answered = 0
        self.t0 = time.monotonic()

    def note(self, rec: Dict[str, Any]) -> None:
        with self.lock:
            if rec.get("error_kind") == "connection":
                self.run += 1
                self.first = self.first or time.monotonic()
                self.last_error = str(rec.get("error") or "")[:160]
            elif rec.get("error_kind") != "interrupted":
                self.run, self.first = 0, None
                self.answered += 1

    def reason(self) -> Optional[str]:
        with self.lock:
            if self.run < self.in_a_row or self.first is None or time.monotonic() - self.first < self.seconds:
                return None
            return (f"the server at {self.url} stopped answering {self.first - self.t0:.1f} s into the run: "
                    f"{self.run} requests in a row failed to connect ({self.last_error}) after {self.answered} "
                    "answers")


def _tenants(config: Dict[str, Any]) -> List[Dict[str, Any]]:
    base = {k: config[k] for k in TENANT_KEYS}
    tenants = config["tenants"]
    return [dict(base, **t) for t in tenants][:16]


#: The SLA keys a tenant may set over the requirement's defaults.
TENANT_KEYS = ("p99_ms", "min_rps", "max_error_rate", "ttft_p99_ms", "tpot_p99_ms")
#: The client's capacity (requests in flight) is sized to the offered rate x the loosest P99 target x this.
CLIENT_HEADROOM = 2.0


def client_capacity(config: Dict[str, Any], tenants: List[Dict[str, Any]], qps: float) -> Dict[str, Any]:
    """How many requests the client may have in flight, and how many a server meeting the SLA needs (Little's
    law: rate x latency; a server within its P99 target keeps fewer than rate x target in flight)."""
    from ...inference.endpoint import MAX_INFLIGHT

    worst = max(float(t.get("p99_ms") or 0) for t in tenants) / 1e3
    need = int(math.ceil(qps * worst * CLIENT_HEADROOM))
    rule = (f"offered {qps:g} req/s x the loosest P99 target {worst * 1e3:g} ms x headroom {CLIENT_HEADROOM:g} = "
            f"{need} in flight")
    if config["max_inflight"]:
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
    from ...inference.endpoint import EndpointClient, preflight
    from ...inference.sut import Workload, run_loadgen

    target_lat = min(float(t["p99_ms"]) for t in tenants) / 1e3
    label = f"SVC-SLA ({qps:g} req/s offered for {duration:g} s)"
    if endpoint:
        from .deployment import served_workload

        cap = client_capacity(config, tenants, qps)
        stream = bool(config["stream"])
        with EndpointClient(endpoint, config["model_name"], api=config["api"], stream=stream,
                            deadline_s=timeout, max_inflight=cap["capacity"], api_key=endpoint_key) as client:
            pf = preflight(client, deadline_s=min(5.0, timeout))
            if not pf["ok"]:
                return {"preflight_failed": True, "preflight": pf}, "", None
            wl = served_workload(client, config["workload"], config.get("dataset"), tenants,
                                 int(config.get("seed", 2026)))
            prompts = wl.texts
            if progress:
                progress(f"SVC-SLA: pre-flight of {endpoint} passed in {pf['seconds']:g} s (model {pf['model']}, "
                         f"{'streaming' if stream else 'not streaming'}); client capacity {cap['capacity']} in flight")

            loss = ServerLoss(endpoint)

            def answered(r: Dict[str, Any], complete: Any) -> None:
                loss.note(r)
                complete(r["tokens"], None if r["ok"] else f"{r['error_kind']}: {r['error']}", _request_detail(r))

            def issue(idx: int, complete: Any) -> None:
                client.submit(prompts[idx], wl.out_tokens[idx], lambda r: answered(r, complete))

            from ..sampler import Sample3D
            from .deployment import deployment_power

            # the power of every accelerator the deployment uses (else the host's packages), sampled with the load
            from .deployment import is_local

            sources, missing, primary = deployment_power(config.get("accelerators") or [], config.get("redfish"),
                                                         local=is_local(endpoint))
            try:
                with Sample3D(sources, 0.1) as sampler:
                    raw = run_loadgen(issue, wl, logdir, scenario="Server", duration_s=duration, target_qps=qps,
                                      latency_target_s=target_lat, deadline_s=timeout + 5.0, progress=progress,
                                      label=label, watch=loss.reason)
            finally:
                for s in sources:
                    s.close()
            raw.update(preflight=pf, model_name=client.model, api=client.api, stream=stream, workload=wl.describe(),
                       power=_run_power(sampler.evidence(), primary, missing, raw))
            used = dict(cap, max_in_flight=client.max_busy)
        return raw, f"OpenAI-compatible endpoint {endpoint}", used
    with rig.engine(config["model"]) as engine:
        engine.warmup()
        wl = Workload.build(config["workload"], engine.cfg.vocab, tenants, seed=engine.cfg.seed)

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


def _run_power(samples: Dict[str, Any], primary: List[str], missing: List[str], raw: Dict[str, Any]) -> Dict[str, Any]:
    """The deployment's power over the run (the primary sources' sum: energy over time), reported beside the SLA
    (not judged by it)."""
    from .records import _sum_sources

    q = raw.get("queries") or []
    if not primary:
        return {"unavailable": "no power sensor for the deployment: " + ("; ".join(missing) or "none found")}
    t0 = min((x[0] for x in q), default=raw.get("t0_ns") or 0)
    t1 = max((x[1] for x in q), default=raw.get("t1_ns") or 0)
    p = _sum_sources(samples, primary, t0, t1)
    return {"sources": primary, "power_w": round(p["power_w"], 3) if p.get("power_w") is not None else None,
            "energy_j": round(p["energy_j"], 3) if p.get("energy_j") is not None else None,
            "method": p.get("method"), "failed_reads": p.get("failed", 0)}


def _request_detail(r: Dict[str, Any]) -> Dict[str, Any]:
    """What a request's record keeps: times relative to its issue (ns), the chunks and how tokens were counted."""
    t0 = r.get("t_issue_ns") or 0
    rel = lambda t: (t - t0) if t else None  # noqa: E731
    return {"sent_ns": rel(r.get("t_send_ns")), "first_ns": rel(r.get("t_first_ns")), "done_ns": rel(r.get("t_done_ns")),
            "chunks": [[c[0] - t0, c[1]] for c in r.get("chunks") or []], "token_count": r.get("token_count"),
            "status": r.get("status"), "prompt_tokens": r.get("prompt_tokens")}


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
    from ...inference.sut import early_stopping_bound

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
        sla: Dict[str, Any] = {key: t.get(key) for key in TENANT_KEYS}
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
            "preflight": raw.get("preflight"), "client": client, "workload": raw.get("workload"),
            "power": raw.get("power"),
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
            "the first chunk with output (text, or a token by the usage); TPOT = (last chunk - first chunk) / "
            "(output tokens - 1) per request; ITL = the gaps between chunks, a chunk of k tokens counting k tokens "
            "(gap / k each); throughput = successful "
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
               f"requests waited in its queue (P99 {cast(float, percentile(queue_waits, 0.99)) * 1e3:.3g} ms), and a server "
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
    from ...files import atomic_write

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
