"""MLPerf LoadGen around a system under test, with its logs kept as evidence.

:func:`run_loadgen` runs one LoadGen test (Server: Poisson arrivals at a target QPS; Offline: every query at
once; SingleStream: one query at a time) against ``issue(sample_index, complete)``, where the system under
test calls ``complete(tokens, error, detail=None)`` exactly once per query, from any thread.  It returns
LoadGen's own results (read back from ``mlperf_log_summary.txt`` and ``mlperf_log_detail.txt``, which stay in
``logdir``) and a per-query log stamped with the monotonic clock (issue, completion, output tokens, tenant,
error, detail), which the sampler joins with power and load.

One lifecycle for every LoadGen run in a process:

* LoadGen is driven by two long-lived threads of this module: ``sits-mlperf-loadgen`` constructs the SUT and
  the QSL, runs ``StartTest`` (LoadGen calls ``issue`` on it) and destroys them; ``sits-mlperf-complete`` is the
  only caller of ``QuerySamplesComplete``.  Neither exits while the process can still run a test: LoadGen's logger
  keeps a log buffer per thread that calls it, and a thread that exits while LoadGen's IO thread still reads
  that buffer crashes the process (SIGSEGV).  The threads end when the main thread has ended and no run is in
  flight.  A system under test never calls LoadGen itself, so its own threads may come and go.
* Queries are completed only while their run's SUT and QSL exist: a completion that arrives after the run
  (or after its query was already answered) is counted as late and dropped.
* Every query has a deadline from its issue (``deadline_s``): a query still open then is answered at once as a
  ``timeout``, censored at the deadline (its latency is the deadline, never dropped), so a system that falls
  far behind or never answers cannot hang the run.
* The main thread waits in Python, so Ctrl-C or SIGTERM reaches it during a run: the run stops issuing to the
  system under test (LoadGen's further queries, and the open ones, are answered as ``interrupted``), waits a
  little for LoadGen to end, and the interrupt goes on (the report is written INCOMPLETE).  A Server run whose
  schedule has more than that left ends in the background; the process waits for it before it exits.
"""

from __future__ import annotations

import heapq
import json
import random
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from . import loadgen_missing

Complete = Callable[..., None]
Issue = Callable[[int, Complete], None]
Progress = Callable[[str], None]

MAX_LOG_BYTES = 16 << 20
SCENARIOS = ("Server", "Offline", "SingleStream")
#: How long an interrupted run waits for LoadGen to end before the interrupt goes on.
STOP_WAIT_S = 10.0
#: Seconds between progress lines.
PROGRESS_EVERY_S = 10.0


class LoadgenUnavailable(RuntimeError):
    pass


def tenant_split(n: int, tenants: Optional[Sequence[Dict[str, Any]]]) -> Tuple[List[int], List[str]]:
    """Each of ``n`` samples' tenant (tenants hold contiguous sample ranges in proportion to their share), and the
    tenants' names (one tenant, "all", without any)."""
    shares = [float(t.get("share", 1.0)) for t in tenants] if tenants else [1.0]
    names = [str(t.get("name", f"tenant{i}")) for i, t in enumerate(tenants)] if tenants else ["all"]
    total = sum(shares) or 1.0
    edges, acc = [], 0.0
    for s in shares:
        acc += s / total
        edges.append(acc)
    tenant_of = [next((k for k, e in enumerate(edges) if (i + 0.5) / n <= e), len(edges) - 1) for i in range(n)]
    return tenant_of, names


@dataclass
class Workload:
    """The query sample library: a prompt, an output length and a tenant per sample (seeded)."""

    prompts: List[List[int]]
    out_tokens: List[int]
    tenant_of: List[int]
    tenants: List[str]

    @classmethod
    def build(cls, spec: Dict[str, Any], vocab: int, tenants: Optional[Sequence[Dict[str, Any]]] = None,
              seed: int = 2026) -> Workload:
        rng = random.Random(seed)
        n = int(spec.get("samples", 512))
        p_lo, p_hi = spec.get("prompt_tokens", [32, 128])
        o_lo, o_hi = spec.get("output_tokens", [8, 32])
        tenant_of, names = tenant_split(n, tenants)
        prompts = [[rng.randrange(vocab) for _ in range(rng.randint(int(p_lo), int(p_hi)))] for _ in range(n)]
        outs = [rng.randint(int(o_lo), int(o_hi)) for _ in range(n)]
        return cls(prompts, outs, tenant_of, names)

    def describe(self) -> Dict[str, Any]:
        n = len(self.prompts)
        return {"samples": n, "prompt_tokens_mean": round(sum(map(len, self.prompts)) / n, 2),
                "prompt_tokens_range": [min(map(len, self.prompts)), max(map(len, self.prompts))],
                "output_tokens_mean": round(sum(self.out_tokens) / n, 2),
                "output_tokens_range": [min(self.out_tokens), max(self.out_tokens)],
                "tenants": {name: round(self.tenant_of.count(k) / n, 4) for k, name in enumerate(self.tenants)}}


# --------------------------------------------------------------------------
# One run: its open queries, their deadlines, its per-query log


class _Run:
    """The state of one LoadGen test; every method is safe from any thread."""

    def __init__(self, issue: Issue, workload: Workload, deadline_s: float, kick: threading.Event):
        self.issue, self.workload, self.kick = issue, workload, kick
        self.deadline_ns = int(deadline_s * 1e9)
        self.deadline_s = deadline_s
        self.lock = threading.Lock()
        self.open: Dict[int, Any] = {}
        self.heap: List[Any] = []
        self.queries: List[List[Any]] = []
        self.pending: List[int] = []  # answered, not yet handed to LoadGen
        self.expired = self.late = self.issued = 0
        self.errors = 0
        self.stopping: Optional[str] = None
        self.done = threading.Event()
        self.failure: Optional[BaseException] = None
        self.t0 = self.t1 = 0

    # -- LoadGen's issue callback (runs on the sits-mlperf-loadgen thread; never raises into LoadGen)
    def issue_query(self, samples: List[Any]) -> None:
        for qs in samples:
            t = time.monotonic_ns()
            qid, idx = qs.id, qs.index
            with self.lock:
                self.issued += 1
                self.open[qid] = (t, idx)
                heapq.heappush(self.heap, (t + self.deadline_ns, qid))
                stopping = self.stopping
            if stopping is not None:
                self._answer(qid, 0, f"interrupted: {stopping}", None)
                continue

            def complete(tokens: int, error: Optional[str], detail: Optional[Dict[str, Any]] = None,
                         qid: int = qid) -> None:
                self._answer(qid, tokens, error, detail)

            try:
                self.issue(idx, complete)
            except BaseException as exc:  # the SUT refused the query: it still counts, as an error
                self._answer(qid, 0, f"client: issue failed: {type(exc).__name__}: {exc}", None)

    def _answer(self, qid: int, tokens: int, error: Optional[str], detail: Optional[Dict[str, Any]],
                at_ns: Optional[int] = None) -> None:
        now = at_ns or time.monotonic_ns()
        with self.lock:
            rec = self.open.pop(qid, None)
            if rec is None:  # already answered (deadline, interrupt) or after the run: counted, dropped
                self.late += 1
                return
            self.queries.append([rec[0], now, int(tokens or 0), self.workload.tenant_of[rec[1]], error, detail])
            self.errors += error is not None
            self.pending.append(qid)
        self.kick.set()

    def expire(self, now_ns: int) -> None:
        """Answer every open query past its deadline as a timeout, censored at the deadline."""
        due = []
        with self.lock:
            while self.heap and self.heap[0][0] <= now_ns:
                d, qid = heapq.heappop(self.heap)
                if qid in self.open:
                    due.append((d, qid))
        for d, qid in due:
            self.expired += 1
            self._answer(qid, 0, f"timeout: no answer within the {self.deadline_s:g} s deadline (censored at the "
                                 "deadline)", {"censored": True}, at_ns=d)

    def stop(self, why: str) -> None:
        """Stop using the system under test: the open queries and every later one are answered as interrupted."""
        with self.lock:
            self.stopping = why
            left = list(self.open)
        for qid in left:
            self._answer(qid, 0, f"interrupted: {why}", None)

    def take_pending(self) -> List[int]:
        with self.lock:
            out, self.pending = self.pending, []
        return out

    def counts(self) -> Dict[str, int]:
        with self.lock:
            return {"issued": self.issued, "answered": len(self.queries), "errors": self.errors,
                    "open": len(self.open)}


class _LoadgenThreads:
    """The two long-lived threads that drive LoadGen in this process (see the module's docstring)."""

    def __init__(self) -> None:
        self.cv = threading.Condition()
        self.jobs: List[Callable[[], None]] = []
        self.run: Optional[_Run] = None
        self.calling = threading.Lock()  # held around QuerySamplesComplete
        self.kick = threading.Event()  # an answer waits for LoadGen
        self.started = False
        self.serial = threading.Lock()  # one LoadGen test at a time in a process

    def start(self) -> None:
        with self.cv:
            if self.started:
                return
            self.started = True
        # Not daemon threads: an interpreter that exits waits for a run still in flight instead of tearing
        # LoadGen down under it; they end by themselves once the main thread has ended and nothing is in flight.
        threading.Thread(target=self._driver, name="sits-mlperf-loadgen", daemon=False).start()
        threading.Thread(target=self._completer, name="sits-mlperf-complete", daemon=False).start()

    def _idle_and_orphaned(self) -> bool:
        return not threading.main_thread().is_alive() and self.run is None and not self.jobs

    def _driver(self) -> None:
        while True:
            with self.cv:
                while not self.jobs:
                    if self._idle_and_orphaned():
                        self.started = False
                        self.cv.notify_all()
                        return
                    self.cv.wait(0.25)
                job = self.jobs.pop(0)
            job()

    def _completer(self) -> None:
        import mlperf_loadgen as lg

        while True:
            run = self.run
            if run is None:
                with self.cv:
                    if self._idle_and_orphaned():
                        return
                self.kick.wait(0.25)
                self.kick.clear()
                continue
            self.kick.wait(0.01)  # an answer, or the next look at the deadlines
            self.kick.clear()
            run.expire(time.monotonic_ns())
            ids = run.take_pending()
            if ids:
                with self.calling:
                    if self.run is run:
                        lg.QuerySamplesComplete([lg.QuerySampleResponse(q, 0, 0) for q in ids])

    def wake(self) -> None:
        self.kick.set()

    def submit(self, job: Callable[[], None]) -> None:
        self.start()
        with self.cv:
            self.jobs.append(job)
            self.cv.notify_all()


_THREADS = _LoadgenThreads()


def run_loadgen(issue: Issue, workload: Workload, logdir: Path, *, scenario: str, duration_s: float,
                target_qps: Optional[float] = None, latency_target_s: Optional[float] = None,
                expected_qps: Optional[float] = None, expected_latency_s: Optional[float] = None,
                seed: int = 0, grace_s: float = 30.0, deadline_s: Optional[float] = None,
                progress: Optional[Progress] = None, label: Optional[str] = None,
                watch: Optional[Callable[[], Optional[str]]] = None) -> Dict[str, Any]:
    """One LoadGen performance run; raises :class:`LoadgenUnavailable` when LoadGen does not import.

    ``deadline_s``: how long a query may stay open after its issue (default: the run's duration, three times
    that for Offline, plus ``grace_s``); ``progress``: called with a line every few seconds (load, elapsed,
    completed); ``watch``: asked five times a second whether to stop using the system under test (a reason, or
    None): once it gives one, the open queries and every later one are answered as interrupted, and the reason is
    the result's ``stopped``."""
    missing = loadgen_missing()
    if missing:
        raise LoadgenUnavailable(missing)
    import mlperf_loadgen as lg

    if scenario not in SCENARIOS:
        raise ValueError(f"scenario {scenario!r}; use one of {SCENARIOS}")
    logdir = Path(logdir)
    logdir.mkdir(parents=True, exist_ok=True)
    if deadline_s is None:
        deadline_s = duration_s * (3.0 if scenario == "Offline" else 1.0) + grace_s
    run = _Run(issue, workload, float(deadline_s), _THREADS.kick)

    ts = lg.TestSettings()
    ts.scenario = getattr(lg.TestScenario, scenario)
    ts.mode = lg.TestMode.PerformanceOnly
    ts.min_duration_ms = int(duration_s * 1000)
    ts.max_duration_ms = int(duration_s * 2000) + 10_000  # a safety bound only: min_duration decides the schedule
    ts.min_query_count = 1
    ts.performance_sample_count_override = len(workload.prompts)
    ts.qsl_rng_seed = ts.sample_index_rng_seed = ts.schedule_rng_seed = int(seed)
    if scenario == "Server":
        ts.server_target_qps = float(target_qps or 1.0)
        ts.server_target_latency_ns = int((latency_target_s or 1.0) * 1e9)
        ts.server_target_latency_percentile = 0.99
    elif scenario == "Offline":
        ts.offline_expected_qps = float(expected_qps or 1.0)
    else:
        ts.single_stream_expected_latency_ns = int((expected_latency_s or 0.01) * 1e9)
        ts.single_stream_target_latency_percentile = 0.99
    out = lg.LogOutputSettings()
    out.outdir = str(logdir)
    out.copy_summary_to_stdout = False
    out.copy_detail_to_stdout = False
    lset = lg.LogSettings()
    lset.log_output = out
    lset.log_mode = lg.LoggingMode.AsyncPoll
    lset.enable_trace = False
    n_samples = len(workload.prompts)

    def job() -> None:  # on the sits-mlperf-loadgen thread: construct, run, destroy
        try:
            sut = lg.ConstructSUT(run.issue_query, lambda: None)
            qsl = lg.ConstructQSL(n_samples, n_samples, lambda s: None, lambda s: None)
            try:
                with _THREADS.cv:
                    _THREADS.run = run
                run.t0 = time.monotonic_ns()
                lg.StartTestWithLogSettings(sut, qsl, ts, lset)
                run.t1 = time.monotonic_ns()
            finally:
                with _THREADS.calling:  # the completer is out of LoadGen before its objects go
                    _THREADS.run = None
                    lg.DestroyQSL(qsl)
                    lg.DestroySUT(sut)
        except BaseException as exc:  # pragma: no cover - LoadGen itself failed
            run.failure = exc
        finally:
            run.done.set()

    what = label or f"LoadGen {scenario}"
    with _THREADS.serial:
        _THREADS.submit(job)
        start = time.monotonic()
        next_line = start + PROGRESS_EVERY_S
        if progress:
            progress(f"{what}: started ({_load_text(scenario, target_qps, expected_qps)}, {duration_s:g} s)")
        stopped: Optional[str] = None
        try:
            while not run.done.wait(0.2):
                if watch is not None and stopped is None:
                    stopped = watch()
                    if stopped:
                        run.stop(stopped)
                        _THREADS.wake()
                        if progress:
                            progress(f"{what}: stopped using the system under test: {stopped}; LoadGen's schedule "
                                     "runs to its end with every later query answered as interrupted")
                if progress and time.monotonic() >= next_line:
                    next_line += PROGRESS_EVERY_S
                    c = run.counts()
                    progress(f"{what}: {time.monotonic() - start:.0f} s of {duration_s:g} s, {c['answered']} "
                             f"completed ({c['errors']} errors), {c['open']} open")
        except BaseException as exc:  # Ctrl-C, SIGTERM (raised as KeyboardInterrupt), SystemExit
            why = f"{type(exc).__name__}{': ' + str(exc) if str(exc) else ''}"
            run.stop(why)
            _THREADS.wake()
            left = max(0.0, duration_s - (time.monotonic() - start)) if scenario == "Server" else 0.0
            if not run.done.wait(min(STOP_WAIT_S, left + 2.0)):
                print(f"sits: LoadGen's {scenario} schedule has {left:.0f} s left and cannot be cut short; it "
                      "runs on without the system under test (every query answered as interrupted), and the "
                      "process exits when it ends. The report does not wait for it.", file=sys.stderr)
            raise
    if run.failure is not None:
        raise run.failure
    if progress:
        c = run.counts()
        progress(f"{what}: done in {time.monotonic() - start:.1f} s, {c['answered']} completed ({c['errors']} "
                 f"errors" + (f", {run.expired} answered by the run's {deadline_s:g} s deadline" if run.expired else "")
                 + ")")
    parsed = parse_logs(logdir)
    return {"scenario": scenario, "target_qps": target_qps, "duration_s": duration_s, "t0_ns": run.t0,
            "t1_ns": run.t1, "queries": sorted(run.queries, key=lambda q: (q[0], q[1])),
            "deadline_s": deadline_s, "deadline_expired": run.expired, "late_answers": run.late,
            "loadgen": parsed, "logdir": str(logdir), "stopped": stopped}


def _load_text(scenario: str, target_qps: Optional[float], expected_qps: Optional[float]) -> str:
    if scenario == "Server":
        return f"Server, {target_qps or 1.0:.4g} queries/s offered"
    if scenario == "Offline":
        return f"Offline, all queries at once (expected {expected_qps or 1.0:.4g}/s)"
    return "SingleStream, one query at a time"


def parse_logs(logdir: Path) -> Dict[str, Any]:
    """LoadGen's results from its logs: the summary text whole, and the result/early-stopping keys of the
    detail log (plus its errors and warnings).  The files stay where LoadGen wrote them."""
    logdir = Path(logdir)
    out: Dict[str, Any] = {"summary_file": str(logdir / "mlperf_log_summary.txt"),
                           "detail_file": str(logdir / "mlperf_log_detail.txt"), "results": {}, "errors": [],
                           "warnings": []}
    try:
        with open(logdir / "mlperf_log_summary.txt", encoding="utf-8", errors="replace") as fh:
            out["summary"] = fh.read(64 << 10)
    except OSError as exc:
        out["summary"] = None
        out["errors"].append(f"no summary log: {exc}")
    try:
        with open(logdir / "mlperf_log_detail.txt", encoding="utf-8", errors="replace") as fh:
            text = fh.read(MAX_LOG_BYTES)
    except OSError as exc:
        out["errors"].append(f"no detail log: {exc}")
        return out
    for line in text.splitlines():
        if not line.startswith(":::MLLOG "):
            continue
        try:
            rec = json.loads(line[len(":::MLLOG "):])
        except ValueError:
            continue
        key, meta = rec.get("key", ""), rec.get("metadata") or {}
        if meta.get("is_error"):
            out["errors"].append(str(rec.get("value"))[:500])
        elif meta.get("is_warning"):
            out["warnings"].append(str(rec.get("value"))[:500])
        if key.startswith(("result_", "early_stopping", "effective_", "loadgen_version")) or key == "num_errors":
            out["results"][key] = rec.get("value")
    r = out["results"]
    pct = lambda q: r.get(f"result_{q:.2f}_percentile_latency_ns")  # noqa: E731
    out["valid"] = r.get("result_validity") == "VALID"
    out["p50_latency_s"] = pct(50) / 1e9 if pct(50) is not None else None
    out["p90_latency_s"] = pct(90) / 1e9 if pct(90) is not None else None
    out["p99_latency_s"] = pct(99) / 1e9 if pct(99) is not None else None
    es = r.get("early_stopping_latency_ss") or r.get("early_stopping_latency_ms")
    out["early_stopping_p99_s"] = es / 1e9 if isinstance(es, (int, float)) else None
    out["early_stopping_met"] = r.get("early_stopping_met")
    out["early_stopping_result"] = (r.get("early_stopping_result") or "").strip() or None
    out["throughput_qps"] = (r.get("result_completed_samples_per_sec") or r.get("result_samples_per_second")
                             or r.get("result_qps_with_loadgen_overhead"))
    out["version"] = r.get("loadgen_version")
    return out


# --------------------------------------------------------------------------
# Early stopping, as LoadGen computes it (loadgen/early_stopping.cc), for per-tenant latencies.


def _log_binom_cdf(t: int, n: int, q: float) -> float:
    """log P(X <= t) for X ~ Binomial(n, q)."""
    import math

    if t >= n:
        return 0.0
    terms = [math.lgamma(n + 1) - math.lgamma(x + 1) - math.lgamma(n - x + 1) + x * math.log(q)
             + (n - x) * math.log1p(-q) for x in range(t + 1)]
    m = max(terms)
    return m + math.log(sum(math.exp(v - m) for v in terms))


def early_stopping_bound(latencies: Sequence[float], percentile: float = 0.99,
                         confidence: float = 0.99) -> Dict[str, Any]:
    """LoadGen's early-stopping estimate of a percentile (its SingleStream rule, loadgen/results.cc): the
    largest ``t >= 1`` such that at most ``t`` of ``n`` queries above the true percentile would have had
    probability below ``1 - confidence``; the estimate is the ``t``-th highest latency (``t - 1`` discarded).
    With too few queries there is no estimate, and the result says how many are needed."""
    import math

    n = len(latencies)
    q = 1.0 - percentile
    limit = math.log(1.0 - confidence)
    rule = f"LoadGen early stopping (percentile {percentile}, confidence {confidence})"
    if n < 2 or _log_binom_cdf(1, n, q) >= limit:
        need = 2
        while _log_binom_cdf(1, need, q) >= limit and need < 10_000_000:
            need *= 2
        lo, hi = need // 2, need
        while lo < hi:
            mid = (lo + hi) // 2
            if _log_binom_cdf(1, mid, q) < limit:
                hi = mid
            else:
                lo = mid + 1
        return {"queries": n, "estimate_s": None, "discarded": None, "queries_needed": lo, "rule": rule}
    lo, hi = 1, n - 1
    while lo < hi:  # the largest t with P(X <= t) < 1 - confidence (monotone in t)
        mid = (lo + hi + 1) // 2
        if _log_binom_cdf(mid, n, q) < limit:
            lo = mid
        else:
            hi = mid - 1
    s = sorted(latencies)
    return {"queries": n, "estimate_s": s[n - lo], "discarded": lo - 1, "queries_needed": None, "rule": rule}
