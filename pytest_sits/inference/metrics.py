"""The serving stack's own metrics (Prometheus text at ``/metrics``), sampled while the suite loads it: what the
server says of its KV cache (the share of its blocks in use, the block size and count), of the requests it runs
and queues, and of its preemptions.  SVC-FRAG sets these beside what the client knows is held.

Read as the stacks publish them:

* vLLM: ``vllm:kv_cache_usage_perc`` (a fraction, 0..1, despite its name), ``vllm:num_requests_running``,
  ``vllm:num_requests_waiting``, ``vllm:num_preemptions_total`` and ``vllm:cache_config_info`` (labels
  ``block_size`` and ``num_gpu_blocks``);
* SGLang: ``sglang:token_usage``, ``sglang:num_running_reqs``, ``sglang:num_queue_reqs`` (no block size: its KV
  pool is token-granular, page size 1 unless set);
* llama.cpp's server (``--metrics``): ``llamacpp:kv_cache_usage_ratio``, ``llamacpp:requests_processing``,
  ``llamacpp:requests_deferred`` (no block layout).

Only the lines of these metrics are parsed (with ``prometheus_client``'s parser); an answer is read up to
:data:`MAX_BODY` bytes and a fetch waits at most :data:`FETCH_TIMEOUT_S`.  The server's text is untrusted: a value
that is not a finite number, or a label that is not an integer where one is expected, is left out, never guessed.
"""

from __future__ import annotations

import math
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Dict, List, Optional, Tuple

#: At most this many bytes of one /metrics answer are read.
MAX_BODY = 8 << 20
#: A fetch of /metrics waits at most this long.
FETCH_TIMEOUT_S = 2.0
#: At most this many samples are kept per run (a poller at 4 Hz covers 2 h).
MAX_SAMPLES = 30_000

#: Per stack: the metric of KV usage (a fraction of the pool), running and waiting requests, preemptions, and the
#: info metric that gives the block layout.
STACKS: Dict[str, Dict[str, Optional[str]]] = {
    "vllm": {"usage": "vllm:kv_cache_usage_perc", "running": "vllm:num_requests_running",
             "waiting": "vllm:num_requests_waiting", "preemptions": "vllm:num_preemptions_total",
             "config": "vllm:cache_config_info"},
    "sglang": {"usage": "sglang:token_usage", "running": "sglang:num_running_reqs",
               "waiting": "sglang:num_queue_reqs", "preemptions": None, "config": None},
    "llama.cpp": {"usage": "llamacpp:kv_cache_usage_ratio", "running": "llamacpp:requests_processing",
                  "waiting": "llamacpp:requests_deferred", "preemptions": None, "config": None},
}
#: The server process's start time (prometheus_client's process collector, which vLLM's server exports): a
#: value that changes between two samples is a server that restarted under the load.
START = "process_start_time_seconds"
#: The metrics SVC-FRAG needs from a server, for the message where they are missing.
NEEDED = ("vllm:kv_cache_usage_perc with vllm:cache_config_info (block_size, num_gpu_blocks), as vLLM publishes "
          "them at /metrics")


class MetricsUnavailable(Exception):
    """The server's metrics cannot be read; the message says why."""


def _names() -> List[str]:
    return sorted({n for s in STACKS.values() for n in s.values() if n} | {START})


def parse(text: str) -> Dict[str, List[Tuple[Dict[str, str], float]]]:
    """The samples of the known metrics in a Prometheus text: ``{name: [(labels, value), ...]}``."""
    try:
        from prometheus_client.parser import text_string_to_metric_families
    except ImportError:
        raise MetricsUnavailable("prometheus_client is not installed (pip install 'pytest-sits[load]'): the "
                                 "server's /metrics cannot be read") from None
    wanted = tuple(_names())
    keep = [line for line in text.splitlines() if line.startswith(wanted)
            or (line.startswith("# TYPE ") and line[7:].startswith(wanted))]
    out: Dict[str, List[Tuple[Dict[str, str], float]]] = {}
    try:
        for fam in text_string_to_metric_families("\n".join(keep) + "\n"):
            for s in fam.samples:
                if s.name in wanted and isinstance(s.value, float) and math.isfinite(s.value):
                    out.setdefault(s.name, []).append((dict(s.labels), float(s.value)))
    except (ValueError, TypeError, IndexError) as exc:
        raise MetricsUnavailable(f"the server's /metrics is not Prometheus text ({exc})") from None
    return out


def stack_of(samples: Dict[str, List[Tuple[Dict[str, str], float]]]) -> Optional[str]:
    """The stack whose KV usage metric the text carries."""
    return next((k for k, s in STACKS.items() if s["usage"] in samples), None)


def _sum(samples: Dict[str, List[Tuple[Dict[str, str], float]]], name: Optional[str]) -> Optional[float]:
    vals = [v for _, v in samples.get(name or "", [])]
    return sum(vals) if vals else None


def cache_layout(samples: Dict[str, List[Tuple[Dict[str, str], float]]], stack: str) -> Dict[str, Any]:
    """The KV pool's layout the server states: block size (tokens) and block count, summed over its engines."""
    name = STACKS[stack]["config"]
    rows = samples.get(name or "", [])
    if not rows:
        return {"block_tokens": None, "pool_blocks": None,
                "source": f"not stated: {stack} publishes no block layout at /metrics"}
    sizes, blocks = set(), 0
    for labels, _ in rows:
        try:
            sizes.add(int(labels.get("block_size", "")))
            blocks += int(labels.get("num_gpu_blocks", ""))
        except ValueError:
            return {"block_tokens": None, "pool_blocks": None,
                    "source": f"{name}: block_size={labels.get('block_size')!r}, "
                              f"num_gpu_blocks={labels.get('num_gpu_blocks')!r} are not integers"}
    if len(sizes) != 1 or min(sizes) <= 0 or blocks <= 0:
        return {"block_tokens": None, "pool_blocks": None, "source": f"{name}: block sizes {sorted(sizes)}, "
                                                                    f"{blocks} blocks: no single layout"}
    return {"block_tokens": sizes.pop(), "pool_blocks": blocks,
            "source": f"{name} (labels block_size and num_gpu_blocks)"}


class MetricsPoller:
    """Fetches ``<base>/metrics`` every ``period_s`` on a thread of its own while a run loads the server; each sample
    is stamped with the start, end and middle of its fetch (``time.monotonic_ns``, the clock of the client's
    records): the server's figures are of some instant between the first two."""

    def __init__(self, base_url: str, period_s: float = 0.25, api_key: Optional[str] = None):
        u = urllib.parse.urlsplit(base_url)
        path = u.path.rstrip("/")
        if path.endswith("/v1"):
            path = path[:-3]
        self.url = urllib.parse.urlunsplit((u.scheme, u.netloc, path + "/metrics", "", ""))
        self.period_s, self.api_key = max(0.05, float(period_s)), api_key
        self.samples: List[Dict[str, Any]] = []
        self.failed = 0
        self.last_error: Optional[str] = None
        self.stack: Optional[str] = None
        self.layout: Dict[str, Any] = {}
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def fetch(self) -> Dict[str, List[Tuple[Dict[str, str], float]]]:
        req = urllib.request.Request(self.url, headers={"Authorization": f"Bearer {self.api_key}"}
                                     if self.api_key else {})
        try:
            with urllib.request.urlopen(req, timeout=FETCH_TIMEOUT_S) as resp:  # noqa: S310 - the server under test
                body = resp.read(MAX_BODY + 1)
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise MetricsUnavailable(f"{self.url}: {getattr(exc, 'reason', exc)}") from None
        if len(body) > MAX_BODY:
            raise MetricsUnavailable(f"{self.url}: the answer is larger than {MAX_BODY >> 20} MiB")
        return parse(body.decode("utf-8", "replace"))

    def probe(self) -> Optional[str]:
        """Read /metrics once: None when the server publishes KV usage (``stack`` and ``layout`` set), else why not."""
        try:
            samples = self.fetch()
        except MetricsUnavailable as exc:
            return f"the server's metrics could not be read ({exc}); SVC-FRAG needs {NEEDED}"
        self.stack = stack_of(samples)
        if self.stack is None:
            return f"{self.url} publishes no KV-cache usage the suite reads (it needs {NEEDED})"
        self.layout = cache_layout(samples, self.stack)
        return None

    def sample_once(self) -> None:
        t0 = time.monotonic_ns()
        try:
            s = self.fetch()
        except MetricsUnavailable as exc:
            self.failed += 1
            self.last_error = str(exc)[:200]
            return
        t1 = time.monotonic_ns()
        names = STACKS[self.stack or "vllm"]
        usage = _sum(s, names["usage"])
        if usage is None:
            self.failed += 1
            self.last_error = f"{names['usage']} missing from an answer"
            return
        engines = max(1, len(s.get(names["usage"] or "", [])))
        if len(self.samples) < MAX_SAMPLES:
            self.samples.append({"t_ns": (t0 + t1) // 2, "t0_ns": t0, "t1_ns": t1, "fetch_ms": round((t1 - t0) / 1e6, 3),
                                 "usage": usage / engines,
                                 "running": _sum(s, names["running"]), "waiting": _sum(s, names["waiting"]),
                                 "preemptions": _sum(s, names["preemptions"]), "started": _sum(s, START)})

    def _loop(self) -> None:
        nxt = time.monotonic()
        while not self._stop.is_set():
            self.sample_once()
            nxt += self.period_s
            self._stop.wait(max(0.0, nxt - time.monotonic()))

    def __enter__(self) -> MetricsPoller:
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="sits-server-metrics", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=FETCH_TIMEOUT_S + 1)

    def restarted(self) -> Optional[str]:
        """How the server's start time moved between samples (a restart under the load), or None."""
        starts = [x["started"] for x in self.samples if x.get("started") is not None]
        for a, b in zip(starts, starts[1:]):
            if abs(b - a) > 0.5:
                return (f"the server restarted under the load: its {START} moved from {a:.1f} to {b:.1f} between "
                        f"two samples of {self.url}")
        return None

    def describe(self) -> Dict[str, Any]:
        return {"url": self.url, "stack": self.stack, "period_s": self.period_s, "samples": len(self.samples),
                "failed": self.failed, "last_error": self.last_error, **self.layout}
