"""OpenAI-compatible completions: a client (the interface vLLM, TGI, SGLang and Triton's OpenAI front end
serve) and a loopback server around the built-in model, for tests.

The client POSTs ``{base}/v1/completions`` with ``{"model", "prompt", "max_tokens", "temperature": 0}`` and
checks the answer: HTTP 200, a JSON object with ``choices[0].text`` a string; a timeout, an HTTP error or a
malformed answer is an error of that kind (never a success).  Output tokens come from ``usage`` when the
server reports it, else one per character (and the evidence says which).

The loopback server binds 127.0.0.1 only, answers from an :class:`~pytest_sits.inference.model.Engine`, and
can inject a delay, HTTP errors and malformed answers (every k-th request, deterministic).
"""

from __future__ import annotations

import http.client
import json
import threading
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Dict, Optional

MAX_RESPONSE_BYTES = 1 << 20
MAX_INFLIGHT = 512


class EndpointError(ValueError):
    """A bad endpoint URL; the message says the fix."""


def parse_url(url: str) -> urllib.parse.SplitResult:
    u = urllib.parse.urlsplit(url)
    if u.scheme not in ("http", "https") or not u.hostname:
        raise EndpointError(f"endpoint {url!r} is not an http(s) URL; fix: --sits-endpoint http://HOST:PORT "
                            "(the server's base, without /v1/completions)")
    return u


class CompletionsClient:
    """Blocking calls on a pool of threads (each with its own keep-alive connection); ``submit`` never blocks."""

    def __init__(self, url: str, model: Optional[str] = None, timeout_s: float = 30.0, max_inflight: int = 64):
        self.url = parse_url(url)
        self.model = model
        self.timeout_s = float(timeout_s)
        self.base_path = self.url.path.rstrip("/")
        if self.base_path.endswith("/v1"):
            self.base_path = self.base_path[:-3]
        self._local = threading.local()
        self._pool = ThreadPoolExecutor(max_workers=max(1, min(int(max_inflight), MAX_INFLIGHT)),
                                        thread_name_prefix="sits-endpoint")
        self.token_source = "usage.completion_tokens"

    def __enter__(self) -> "CompletionsClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    def _conn(self) -> http.client.HTTPConnection:
        c = getattr(self._local, "conn", None)
        if c is None:
            cls = http.client.HTTPSConnection if self.url.scheme == "https" else http.client.HTTPConnection
            c = cls(self.url.hostname, self.url.port, timeout=self.timeout_s)
            self._local.conn = c
        return c

    def discover_model(self) -> Optional[str]:
        """The first model the server lists at ``/v1/models`` (None when it lists none)."""
        try:
            status, body = self._request("GET", "/v1/models", None)
            data = json.loads(body)
            return data["data"][0]["id"] if status == 200 and data.get("data") else None
        except Exception:
            return None

    def _request(self, method: str, path: str, payload: Optional[Dict[str, Any]]) -> Any:
        body = json.dumps(payload).encode() if payload is not None else None
        headers = {"Content-Type": "application/json"} if body else {}
        for attempt in (0, 1):  # one retry on a stale keep-alive connection, never on a timeout
            conn = self._conn()
            try:
                conn.request(method, self.base_path + path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read(MAX_RESPONSE_BYTES + 1)
                return resp.status, data
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                conn.close()
                self._local.conn = None
                if attempt:
                    raise
            except Exception:
                conn.close()
                self._local.conn = None
                raise
        raise RuntimeError("unreachable")

    def complete(self, prompt: str, max_tokens: int) -> Dict[str, Any]:
        """One completion: ``{"ok", "tokens", "error_kind", "error", "latency_s"}``."""
        t0 = time.perf_counter()
        payload = {"model": self.model or "default", "prompt": prompt, "max_tokens": int(max_tokens),
                   "temperature": 0}
        try:
            status, data = self._request("POST", "/v1/completions", payload)
        except (TimeoutError, OSError) as exc:
            kind = "timeout" if isinstance(exc, TimeoutError) or "timed out" in str(exc) else "connection"
            return _fail(kind, f"{type(exc).__name__}: {exc}", t0)
        if status != 200:
            return _fail("http", f"HTTP {status}: {data[:200].decode('utf-8', 'replace')}", t0)
        if len(data) > MAX_RESPONSE_BYTES:
            return _fail("malformed", f"answer larger than {MAX_RESPONSE_BYTES} bytes", t0)
        try:
            doc = json.loads(data)
            text = doc["choices"][0]["text"]
            if not isinstance(text, str):
                raise TypeError("choices[0].text is not a string")
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            return _fail("malformed", f"not an OpenAI completions answer ({type(exc).__name__}: {exc})", t0)
        usage = doc.get("usage") if isinstance(doc.get("usage"), dict) else {}
        tokens = usage.get("completion_tokens")
        if not isinstance(tokens, int):
            tokens = len(text)
            self.token_source = "characters of choices[0].text (the server reports no usage)"
        return {"ok": True, "tokens": tokens, "error_kind": None, "error": None,
                "latency_s": time.perf_counter() - t0}

    def submit(self, prompt: str, max_tokens: int, done: Callable[[Dict[str, Any]], None]) -> None:
        def run() -> None:
            try:
                r = self.complete(prompt, max_tokens)
            except Exception as exc:  # never leave a query unanswered
                r = _fail("client", f"{type(exc).__name__}: {exc}", time.perf_counter())
            done(r)
        self._pool.submit(run)


def _fail(kind: str, error: str, t0: float) -> Dict[str, Any]:
    return {"ok": False, "tokens": 0, "error_kind": kind, "error": error, "latency_s": time.perf_counter() - t0}


# --------------------------------------------------------------------------
# Loopback server (tests, and SVC-SLA against the built-in model)


class LoopbackServer:
    """``with LoopbackServer(engine, delay_s=0, error_every=0, malformed_every=0) as url:`` serves the engine on
    127.0.0.1 at a free port.  ``error_every=k`` answers every k-th completion with HTTP 500,
    ``malformed_every=k`` every k-th with a body that is not a completions answer."""

    def __init__(self, engine: Any, model_name: str = "sits-tiny-decoder", delay_s: float = 0.0,
                 error_every: int = 0, malformed_every: int = 0, timeout_s: float = 60.0):
        from .model import decode_tokens, encode

        self.engine, self.model_name = engine, model_name
        self.delay_s, self.error_every, self.malformed_every = float(delay_s), int(error_every), int(malformed_every)
        self.count = 0
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                return None

            def _send(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                if self.path.rstrip("/") == "/v1/models":
                    return self._send(200, json.dumps({"object": "list", "data": [
                        {"id": outer.model_name, "object": "model"}]}).encode())
                self._send(404, b'{"error": "not found"}')

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if self.path.rstrip("/") != "/v1/completions" or length > MAX_RESPONSE_BYTES:
                    return self._send(404, b'{"error": "not found"}')
                try:
                    req = json.loads(self.rfile.read(length))
                    prompt, max_tokens = str(req["prompt"]), int(req.get("max_tokens", 16))
                except (ValueError, KeyError, TypeError) as exc:
                    return self._send(400, json.dumps({"error": f"bad request: {exc}"}).encode())
                with outer._lock:
                    outer.count += 1
                    n = outer.count
                if outer.delay_s:
                    time.sleep(outer.delay_s)
                if outer.error_every and n % outer.error_every == 0:
                    return self._send(500, b'{"error": "injected server error"}')
                r = outer.engine.generate(encode(prompt, outer.engine.cfg.vocab), max_tokens, timeout_s)
                if r.error:
                    return self._send(503, json.dumps({"error": r.error}).encode())
                if outer.malformed_every and n % outer.malformed_every == 0:
                    return self._send(200, b'{"choices": [{"txt": 1}]}')
                text = decode_tokens(r.output)
                self._send(200, json.dumps({
                    "id": f"cmpl-{n}", "object": "text_completion", "created": int(time.time()),
                    "model": outer.model_name,
                    "choices": [{"index": 0, "text": text, "finish_reason": "length", "logprobs": None}],
                    "usage": {"prompt_tokens": len(prompt.encode()), "completion_tokens": len(r.output),
                              "total_tokens": len(prompt.encode()) + len(r.output)}}).encode())

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread: Optional[threading.Thread] = None

    def __enter__(self) -> str:
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="sits-loopback", daemon=True)
        self._thread.start()
        return self.url

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)
