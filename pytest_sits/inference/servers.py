"""OpenAI-compatible servers on 127.0.0.1, for tests and benchmarks (never for a verdict about a real server).

* :class:`ScriptedServer`: a server whose timing is known exactly: the first chunk ``ttft_s`` after a request
  starts, then one chunk of ``tokens_per_chunk`` tokens every ``tokens_per_chunk * itl_s`` (absolute schedule,
  so jitter does not accumulate); at most ``capacity`` requests generate at once, the others wait (a server
  far slower than the offered load).  Faults: ``drip`` (a stream that never ends, one byte at a time; ``drip-models``: the model list),
  ``truncate`` (the connection drops mid-stream), ``no-done`` (a stream that ends without ``[DONE]``),
  ``bad-json`` (a chunk that is not JSON), ``half-body`` (a body shorter than its Content-Length),
  ``not-openai`` (an HTML page everywhere),
  ``not-ready`` (``/v1/models`` answers 503: a model never loaded); ``fault_first=n`` limits the fault to the first n requests.  It
  records when each chunk was written (the truth a client is measured against).
* :class:`LoopbackServer`: the built-in model (:class:`~pytest_sits.inference.model.Engine`) behind the same
  interface, streaming its tokens as they are produced; it can inject a delay, HTTP errors and malformed
  answers (every k-th request, deterministic).

Both answer ``GET /v1/models``, ``POST /v1/completions`` and ``POST /v1/chat/completions`` (streamed when the
request asks), 404 elsewhere, 405 for a GET on a POST path, and 401 without the key when one is required.
"""

from __future__ import annotations

import json
import math
import queue
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List, Optional

MAX_BODY = 1 << 20
POST_PATHS = ("/v1/completions", "/v1/chat/completions")


class _Base(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_obj: Any = None

    def setup(self) -> None:
        super().setup()
        live = getattr(self.server_obj, "connections", None)
        if live is not None:
            live.add(self.connection)

    def finish(self) -> None:
        live = getattr(self.server_obj, "connections", None)
        if live is not None:
            live.discard(self.connection)
        super().finish()

    def log_message(self, *args: Any) -> None:
        return None

    def send_json(self, status: int, doc: Any, ctype: str = "application/json") -> None:
        body = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def start_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()

    def chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def event(self, doc: Any) -> None:
        self.chunk(b"data: " + (doc if isinstance(doc, bytes) else json.dumps(doc).encode()) + b"\n\n")

    def end_stream(self) -> None:
        self.event(b"[DONE]")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def authorised(self) -> bool:
        key = self.server_obj.require_key
        if key and self.headers.get("Authorization") != f"Bearer {key}":
            self.send_json(401, {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error",
                                           "code": "invalid_api_key"}})
            return False
        return True

    def do_GET(self) -> None:
        s = self.server_obj
        if getattr(s, "fault", None) == "not-openai":
            return self.send_json(200, b"<html><body>It works!</body></html>", "text/html")
        if not self.authorised():
            return None
        path = self.path.split("?")[0].rstrip("/")
        if path == "/v1/models" and getattr(s, "fault", None) == "drip-models":
            self.start_stream()
            while True:  # a model list that never ends, one byte every 0.1 s
                self.chunk(b" ")
                time.sleep(0.1)
        if path == "/v1/models" and getattr(s, "fault", None) == "not-ready":  # up, model never loaded
            return self.send_json(503, {"detail": "model is loading"})
        if path == "/metrics" and getattr(s, "kv_block_tokens", None):
            return self.send_json(200, s.metrics_text().encode(), "text/plain; version=0.0.4")
        if path == "/version" and getattr(s, "version", None):
            return self.send_json(200, {"version": s.version})
        if path == "/v1/models":
            return self.send_json(200, {"object": "list", "data": [{"id": s.model_name, "object": "model"}]})
        if path in POST_PATHS:
            return self.send_json(405, {"detail": "Method Not Allowed"})
        return self.send_json(404, {"detail": "Not Found"})

    def read_request(self) -> Optional[Dict[str, Any]]:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            self.send_json(413, {"error": "request too large"})
            return None
        try:
            req = json.loads(self.rfile.read(length))
            if not isinstance(req, dict):
                raise TypeError("not an object")
            if self.path.rstrip("/") == "/v1/chat/completions":
                req["_prompt"] = " ".join(str(m.get("content", "")) for m in req["messages"])
            else:
                req["_prompt"] = str(req["prompt"])
            req["_max"] = max(1, int(req.get("max_tokens") or 16))
        except (ValueError, KeyError, TypeError) as exc:
            self.send_json(400, {"error": {"message": f"bad request: {exc}"}})
            return None
        return req

    def chunk_doc(self, chat: bool, n: int, text: str, finish: Optional[str] = None,
                  usage: Optional[Dict[str, int]] = None) -> Dict[str, Any]:
        name = self.server_obj.model_name
        if chat:
            choice = {"index": 0, "delta": {"content": text} if text else {}, "finish_reason": finish}
            doc = {"id": f"chatcmpl-{n}", "object": "chat.completion.chunk", "model": name, "choices": [choice]}
        else:
            choice = {"index": 0, "text": text, "finish_reason": finish, "logprobs": None}
            doc = {"id": f"cmpl-{n}", "object": "text_completion", "model": name, "choices": [choice]}
        if usage is not None:
            doc["usage"] = usage
        return doc

    def whole_doc(self, chat: bool, n: int, text: str, tokens: int, prompt_tokens: int) -> Dict[str, Any]:
        name = self.server_obj.model_name
        usage: Optional[Dict[str, int]] = {"prompt_tokens": prompt_tokens, "completion_tokens": tokens,
                                           "total_tokens": prompt_tokens + tokens}
        if getattr(self.server_obj, "usage", None) == "never":
            usage = None
        if chat:
            return {"id": f"chatcmpl-{n}", "object": "chat.completion", "created": int(time.time()), "model": name,
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                 "finish_reason": "length"}], "usage": usage}
        return {"id": f"cmpl-{n}", "object": "text_completion", "created": int(time.time()), "model": name,
                "choices": [{"index": 0, "text": text, "finish_reason": "length", "logprobs": None}], "usage": usage}


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024

    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):  # a client that hung up is normal
            super().handle_error(request, client_address)


class _Serving:
    """Start and stop a handler on 127.0.0.1 at a free port: ``with server as url:``."""

    def _serve(self, handler: type, port: int = 0) -> None:
        handler = type(handler.__name__, (handler,), {"server_obj": self})
        self.httpd = _QuietServer(("127.0.0.1", int(port)), handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread: Optional[threading.Thread] = None
        #: The connections open now (a keep-alive connection outlives its request).
        self.connections: set = set()

    def kill(self) -> None:
        """Die as a process does: stop listening and cut every open connection (keep-alive ones included)."""
        self.httpd.shutdown()
        self.httpd.server_close()
        import socket

        for c in list(self.connections):
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def __enter__(self) -> str:
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="sits-test-server", daemon=True)
        self._thread.start()
        return self.url

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)


# --------------------------------------------------------------------------


class ScriptedServer(_Serving):
    """``with ScriptedServer(ttft_s=0.2, itl_s=0.02) as url:`` (see the module's docstring).  ``usage``:
    ``"requested"`` (a final usage chunk when ``stream_options.include_usage`` asks, as OpenAI does),
    ``"every"`` (cumulative usage in every chunk), ``"never"``.  ``records`` holds, per request, when it
    arrived, when its generation started (after waiting for capacity) and when each chunk was written."""

    def __init__(self, ttft_s: float = 0.05, itl_s: float = 0.01, tokens_per_chunk: int = 1,
                 usage: str = "requested", model_name: str = "scripted", require_key: Optional[str] = None,
                 fault: Optional[str] = None, capacity: Optional[int] = None, reject_stream_options: bool = False,
                 fault_first: int = 0, reject_ignore_eos: bool = False, port: int = 0,
                 kv_block_tokens: Optional[int] = None, kv_blocks: int = 4096):
        self.ttft_s, self.itl_s, self.k = float(ttft_s), float(itl_s), max(1, int(tokens_per_chunk))
        self.usage, self.model_name, self.require_key, self.fault = usage, model_name, require_key, fault
        self.reject_stream_options = reject_stream_options
        self.reject_ignore_eos = reject_ignore_eos  # as OpenAI's own API: 400 for an argument it does not know
        self.ignore_eos_seen: List[bool] = []
        self.fault_first = int(fault_first)  # >0: the fault hits only the first n requests
        self.slots = threading.BoundedSemaphore(capacity) if capacity else None
        self.lock = threading.Lock()
        self.count = 0
        self.records: List[Dict[str, Any]] = []
        #: With ``kv_block_tokens``: a paged KV cache of ``kv_blocks`` blocks, each request holding its prompt and
        #: the tokens sent so far, published at GET /metrics as vLLM names it (kv_cache_usage_perc,
        #: num_requests_running/waiting, cache_config_info); its chunks then leave at step boundaries (multiples of
        #: ``itl_s``), every running request's together, as a batching engine's do.
        self.kv_block_tokens, self.kv_blocks = kv_block_tokens, int(kv_blocks)
        self.held: Dict[int, List[int]] = {}
        self.waiting = 0
        self.started = time.time()
        self._serve(_ScriptedHandler, port)

    def metrics_text(self) -> str:
        bt = int(self.kv_block_tokens or 1)
        with self.lock:
            used = sum(-(-(p + g) // bt) for p, g in self.held.values())
            running, waiting = len(self.held), self.waiting
        lab = f'engine="0",model_name="{self.model_name}"'
        return (f"# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{{{lab}}} {running:.1f}\n"
                f"# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{{{lab}}} {waiting:.1f}\n"
                f"# TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc{{{lab}}} "
                f"{min(1.0, used / self.kv_blocks)!r}\n"
                f"# TYPE vllm:num_preemptions_total counter\nvllm:num_preemptions_total{{{lab}}} 0.0\n"
                f"# TYPE vllm:cache_config_info gauge\nvllm:cache_config_info{{block_size=\"{bt}\",engine=\"0\","
                f"num_gpu_blocks=\"{self.kv_blocks}\"}} 1.0\n"
                f"# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds {self.started!r}\n")


class _ScriptedHandler(_Base):
    def do_POST(self) -> None:
        s: ScriptedServer = self.server_obj
        t_arrive = time.monotonic_ns()
        if s.fault == "not-openai":
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            return self.send_json(200, b"<html><body>It works!</body></html>", "text/html")
        path = self.path.rstrip("/")
        if path not in POST_PATHS:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            return self.send_json(404, {"detail": "Not Found"})
        if not self.authorised():
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            return None
        req = self.read_request()
        if req is None:
            return None
        if req.get("stream_options") and s.reject_stream_options:
            return self.send_json(422, {"detail": "stream_options: extra fields not permitted"})
        with s.lock:
            s.ignore_eos_seen.append(bool(req.get("ignore_eos")))
        if "ignore_eos" in req and s.reject_ignore_eos:
            return self.send_json(400, {"error": {"message": "Unrecognized request argument supplied: ignore_eos"}})
        chat = path.endswith("chat/completions")
        with s.lock:
            s.count += 1
            n = s.count
        self.fault = s.fault if not s.fault_first or n <= s.fault_first else None
        with s.lock:
            s.waiting += 1
        if s.slots:
            s.slots.acquire()
        with s.lock:
            s.waiting -= 1
            s.held[n] = [len(req["_prompt"].split()), 0]
        try:
            self._generate(s, req, chat, n, t_arrive)
        finally:
            with s.lock:
                s.held.pop(n, None)
            if s.slots:
                s.slots.release()

    def _generate(self, s: ScriptedServer, req: Dict[str, Any], chat: bool, n: int, t_arrive: int) -> None:
        t0 = time.monotonic_ns()
        rec: Dict[str, Any] = {"n": n, "arrived_ns": t_arrive, "start_ns": t0, "tokens": req["_max"], "chunks": []}
        total = req["_max"]
        prompt_tokens = len(req["_prompt"].split())

        def at(seconds: float) -> None:
            target = t0 / 1e9 + seconds
            if s.kv_block_tokens and s.itl_s > 0:  # a stepped engine: every request's chunk leaves at a step boundary
                target = math.ceil(target / s.itl_s) * s.itl_s
            delay = target - time.monotonic()
            if delay > 0:
                time.sleep(delay)

        if not req.get("stream"):
            at(s.ttft_s + (total - 1) * s.itl_s)
            if self.fault == "half-body":
                body = json.dumps(self.whole_doc(chat, n, " tok" * total, total, prompt_tokens)).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body[:10])
                self.wfile.flush()
                self.close_connection = True
                return None
            self.send_json(200, self.whole_doc(chat, n, " tok" * total, total, prompt_tokens))
            rec["chunks"].append([time.monotonic_ns(), total])
            with s.lock:
                s.records.append(rec)
            return None
        self.start_stream()
        if self.fault == "drip":
            while True:  # a never-ending stream: a comment byte every 0.1 s
                self.chunk(b":")
                time.sleep(0.1)
        include = bool((req.get("stream_options") or {}).get("include_usage"))
        sent, j = 0, 0
        while sent < total:
            k = min(s.k, total - sent)
            at(s.ttft_s + (sent + k - 1) * s.itl_s)
            sent += k
            usage = {"prompt_tokens": prompt_tokens, "completion_tokens": sent,
                     "total_tokens": prompt_tokens + sent} if s.usage == "every" else None
            if self.fault == "bad-json" and j == 1:
                self.event(b"{not json")
            else:
                self.event(self.chunk_doc(chat, n, " tok" * k, None, usage))
            with s.lock:
                if n in s.held:
                    s.held[n][1] = sent
            rec["chunks"].append([time.monotonic_ns(), k])
            j += 1
            if self.fault == "truncate" and j == 2:
                self.close_connection = True
                self.wfile.flush()
                self.connection.shutdown(2)
                return None
        if self.fault == "no-done":
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
            return None
        self.event(self.chunk_doc(chat, n, "", "length"))
        if s.usage == "every" or (s.usage == "requested" and include):
            self.event(dict(self.chunk_doc(chat, n, "", None), choices=[],
                            usage={"prompt_tokens": prompt_tokens, "completion_tokens": total,
                                   "total_tokens": prompt_tokens + total}))
        self.end_stream()
        with s.lock:
            s.records.append(rec)
        return None


# --------------------------------------------------------------------------


class LoopbackServer(_Serving):
    """``with LoopbackServer(engine, delay_s=0, error_every=0, malformed_every=0) as url:`` serves the engine.
    ``error_every=k`` answers every k-th request with HTTP 500, ``malformed_every=k`` every k-th with a body
    that is not an OpenAI answer."""

    def __init__(self, engine: Any, model_name: str = "sits-tiny-decoder", delay_s: float = 0.0,
                 error_every: int = 0, malformed_every: int = 0, timeout_s: float = 60.0,
                 require_key: Optional[str] = None):
        self.engine, self.model_name = engine, model_name
        self.delay_s, self.error_every, self.malformed_every = float(delay_s), int(error_every), int(malformed_every)
        self.timeout_s, self.require_key, self.fault = float(timeout_s), require_key, None
        self.count = 0
        self.lock = threading.Lock()
        self._serve(_EngineHandler)


class _EngineHandler(_Base):
    def do_POST(self) -> None:
        from .model import decode_tokens, encode

        s: LoopbackServer = self.server_obj
        path = self.path.rstrip("/")
        if path not in POST_PATHS:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            return self.send_json(404, {"detail": "Not Found"})
        if not self.authorised():
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            return None
        req = self.read_request()
        if req is None:
            return None
        chat = path.endswith("chat/completions")
        with s.lock:
            s.count += 1
            n = s.count
        if s.delay_s:
            time.sleep(s.delay_s)
        if s.error_every and n % s.error_every == 0:
            return self.send_json(500, {"error": "injected server error"})
        if s.malformed_every and n % s.malformed_every == 0:
            return self.send_json(200, {"choices": [{"txt": 1}]})
        prompt = encode(req["_prompt"], s.engine.cfg.vocab)
        if not req.get("stream"):
            r = s.engine.generate(prompt, req["_max"], s.timeout_s)
            if r.error:
                return self.send_json(503, {"error": r.error})
            return self.send_json(200, self.whole_doc(chat, n, decode_tokens(r.output), len(r.output), len(prompt)))
        q: queue.Queue[Any] = queue.Queue()
        s.engine.submit(prompt, req["_max"], on_done=lambda r: q.put(("done", r)),
                        on_first=lambda r: q.put(("token", r.output[0])), on_token=lambda r, t: q.put(("token", t)))
        self.start_stream()
        produced = 0
        deadline = time.monotonic() + s.timeout_s
        while True:
            try:
                what, val = q.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                self.event({"error": {"message": f"no token within {s.timeout_s:g} s"}})
                break
            if what == "token":
                produced += 1
                self.event(self.chunk_doc(chat, n, decode_tokens([val])))
                continue
            if val.error:
                self.event({"error": {"message": val.error}})
                break
            self.event(self.chunk_doc(chat, n, "", "length"))
            if (req.get("stream_options") or {}).get("include_usage"):
                self.event(dict(self.chunk_doc(chat, n, "", None), choices=[],
                                usage={"prompt_tokens": len(prompt), "completion_tokens": produced,
                                       "total_tokens": len(prompt) + produced}))
            break
        self.end_stream()
        return None
