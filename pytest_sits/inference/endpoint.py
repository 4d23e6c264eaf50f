"""An OpenAI-compatible client (the interface vLLM, TGI, SGLang, llama.cpp and Triton's OpenAI front end serve),
as LLM users measure a server: streaming, time to first token, the time of every token after it.

Requests: ``POST {base}/v1/completions`` (``{"model", "prompt", "max_tokens", "temperature": 0}``) or
``POST {base}/v1/chat/completions`` (``"messages"``), streamed by default (``"stream": true``, server-sent
events, with ``stream_options.include_usage`` and ``continuous_usage_stats`` (usage in every chunk, as vLLM and
SGLang give it) when the server accepts them).  Each request keeps its timestamps (monotonic clock): issued (handed
to the client), sent (a worker started it: the wait between the two is the client's own queue), every chunk that
carries output (and how many tokens it carries), done.

A chunk carries output when it carries text, when the usage in it counts more tokens than before, or (completions,
without usage per chunk) when it is a choice not yet finished: a token's text may be empty (part of a character
split over tokens, a special token), and vLLM streams such tokens as chunks of empty text; counting only chunks
with text would start the first token late and put too few gaps between the rest.  A chat answer's first chunk
that only names the role is no output.

* **Deadline**: a request has ``deadline_s`` of wall-clock time from its issue, for everything (queue, connect,
  TLS, headers, the whole stream).  A watcher shuts the socket at the deadline, so a server that trickles a
  never-ending stream cannot hold a request longer.  A request past its deadline is a ``timeout``.
* **Error kinds**: ``timeout``; ``connection`` (refused, reset, DNS, TLS); ``http`` (a status other than 200);
  ``server`` (an error the server reported inside a 200 answer or stream); ``protocol`` (an answer that is not
  HTTP, not server-sent events, not JSON or not an OpenAI answer, a truncated body or stream); ``client`` (a
  fault of this client).  A connection is reused only after an answer was read whole.
* **Tokens per chunk**: from ``usage.completion_tokens`` when the server puts it in every chunk (exact); from
  the final usage chunk when the server sends one (exact total; when it differs from the number of chunks the
  total is spread over the chunks by their text length, and the record says so); else one token per chunk
  that carries text (said so: the server reports no usage).

:func:`preflight` asks ``GET /v1/models`` and one short completion before any load, and names the cause and
the fix of whatever is wrong (connection refused, DNS, TLS, 401/403, 404, an answer that is not OpenAI's).

Servers for tests and benchmarks are in :mod:`pytest_sits.inference.servers`.
"""

from __future__ import annotations

import heapq
import http.client
import itertools
import json
import os
import socket
import ssl
import threading
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Dict, List, Optional, Tuple

MAX_RESPONSE_BYTES = 1 << 20
MAX_LINE = 1 << 16
MAX_INFLIGHT = 512
ERROR_KINDS = ("timeout", "connection", "http", "server", "protocol", "client", "interrupted")
APIS = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}
KEY_ENV = "OPENAI_API_KEY"


class EndpointError(ValueError):
    """A bad endpoint URL; the message says the fix."""


class _Failure(Exception):
    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind, self.message = kind, message


def parse_url(url: str) -> urllib.parse.SplitResult:
    u = urllib.parse.urlsplit(url)
    if u.scheme not in ("http", "https") or not u.hostname:
        raise EndpointError(f"endpoint {url!r} is not an http(s) URL; fix: --sits-endpoint http://HOST:PORT "
                            "(the server's base, without /v1/completions)")
    return u


def _printable(data: bytes, n: int = 200) -> str:
    text = data[:n].decode("utf-8", "replace")
    return "".join(c if c.isprintable() else " " for c in text).strip()


# --------------------------------------------------------------------------
# Deadlines: one watcher shuts a request's socket when its time is up


class _Handle:
    """One request's hold on its connection: the watcher may shut the socket only while ``active``."""

    __slots__ = ("lock", "fd", "active", "expired")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.fd: Optional[int] = None
        self.active = True
        self.expired = False

    def attach(self, sock: Any) -> None:
        with self.lock:
            try:
                self.fd = sock.fileno()
            except (OSError, AttributeError):
                self.fd = None

    def finish(self) -> None:
        with self.lock:  # the watcher cannot touch the descriptor after this (it may be reused)
            self.active = False

    def cut(self) -> None:
        with self.lock:
            if not self.active:
                return
            self.expired = True
            if self.fd is not None and self.fd >= 0:
                try:  # shutdown acts on the connection, whichever descriptor names it (TLS wraps the same fd)
                    s = socket.socket(fileno=os.dup(self.fd))
                    try:
                        s.shutdown(socket.SHUT_RDWR)
                    finally:
                        s.close()
                except OSError:
                    pass


class _Watcher:
    def __init__(self) -> None:
        self.cv = threading.Condition()
        self.heap: List[Tuple[float, int, _Handle]] = []
        self.seq = itertools.count()
        self.closed = False
        self.thread = threading.Thread(target=self._loop, name="sits-endpoint-deadlines", daemon=True)
        self.thread.start()

    def watch(self, deadline: float, handle: _Handle) -> None:
        with self.cv:
            heapq.heappush(self.heap, (deadline, next(self.seq), handle))
            self.cv.notify()

    def close(self) -> None:
        with self.cv:
            self.closed = True
            self.cv.notify()
        self.thread.join(timeout=5)

    def cut_all(self) -> None:
        with self.cv:
            handles = [h for _, _, h in self.heap]
        for h in handles:
            h.cut()

    def _loop(self) -> None:
        while True:
            with self.cv:
                while not self.closed:
                    now = time.monotonic()
                    while self.heap and not self.heap[0][2].active:
                        heapq.heappop(self.heap)
                    if self.heap and self.heap[0][0] <= now:
                        break
                    self.cv.wait(min(0.5, self.heap[0][0] - now) if self.heap else 0.5)
                if self.closed:
                    return
                _, _, h = heapq.heappop(self.heap)
            h.cut()


def _connection_classes() -> Tuple[type, type]:
    class Plain(http.client.HTTPConnection):
        handle: Optional[_Handle] = None

        def connect(self) -> None:
            self.sock = socket.create_connection((self.host, self.port), self.timeout,
                                                 self.source_address)  # type: ignore[attr-defined]
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.handle is not None:
                self.handle.attach(self.sock)

    class Tls(Plain):
        def __init__(self, host: str, port: Optional[int], timeout: float, context: ssl.SSLContext):
            super().__init__(host, port, timeout)
            self.context = context
            self.default_port = 443

        def connect(self) -> None:
            super().connect()
            self.sock = self.context.wrap_socket(self.sock, server_hostname=self.host)

    return Plain, Tls


_PLAIN, _TLS = _connection_classes()


# --------------------------------------------------------------------------
# The client


def _fail(kind: str, error: str, rec: Dict[str, Any]) -> Dict[str, Any]:
    rec.update(ok=False, error_kind=kind, error=error, t_done_ns=time.monotonic_ns())
    return rec


class EndpointClient:
    """Requests on a pool of ``max_inflight`` worker threads (each with its own keep-alive connection);
    :meth:`submit` never blocks.  Use as a context manager: :meth:`close` cuts what is still in flight."""

    def __init__(self, url: str, model: Optional[str] = None, *, api: str = "completions", stream: bool = True,
                 deadline_s: float = 30.0, max_inflight: int = 64, api_key: Optional[str] = None,
                 stream_options: Optional[Dict[str, Any]] = None):
        self.url = parse_url(url)
        if api not in APIS:
            raise EndpointError(f"api {api!r}: use one of {', '.join(APIS)}")
        self.model, self.api, self.stream = model, api, bool(stream)
        self.deadline_s = float(deadline_s)
        self.api_key = api_key
        self.stream_options = ({"include_usage": True, "continuous_usage_stats": True} if stream_options is None
                               else stream_options)
        #: Ask the server to run every answer to ``max_tokens`` (vLLM's, SGLang's and llama.cpp's ``ignore_eos``), so
        #: a model that would stop early still returns the planned tokens; the pre-flight drops it where the server
        #: refuses it (then the tokens actually returned are what is judged, as always).
        self.ignore_eos = True
        self.base_path = self.url.path.rstrip("/")
        if self.base_path.endswith("/v1"):
            self.base_path = self.base_path[:-3]
        self.capacity = max(1, min(int(max_inflight), MAX_INFLIGHT))
        self._local = threading.local()
        self._ctx = ssl.create_default_context() if self.url.scheme == "https" else None
        self._pool = ThreadPoolExecutor(max_workers=self.capacity, thread_name_prefix="sits-endpoint")
        self._watcher = _Watcher()
        self._lock = threading.Lock()
        self.busy = self.max_busy = 0
        self.closing = False

    def __enter__(self) -> EndpointClient:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close(cut=exc[0] is not None)

    def close(self, cut: bool = True) -> None:
        """Stop: with ``cut``, every request in flight ends now (its socket is shut) instead of running on."""
        self.closing = True
        if cut:
            self._watcher.cut_all()
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._watcher.close()

    # -- connections
    def _conn(self, handle: _Handle, timeout: float) -> Tuple[Any, bool]:
        c = getattr(self._local, "conn", None)
        fresh = c is None
        if c is None:
            port = self.url.port
            c = _TLS(self.url.hostname, port, timeout, self._ctx) if self._ctx else _PLAIN(self.url.hostname, port,
                                                                                          timeout)
            self._local.conn = c
        c.timeout = timeout
        c.handle = handle
        if c.sock is not None:
            c.sock.settimeout(timeout)
            handle.attach(c.sock)
        return c, fresh

    def _drop(self) -> None:
        c = getattr(self._local, "conn", None)
        self._local.conn = None
        if c is not None:
            try:
                c.close()
            except OSError:
                pass

    def _headers(self, body: bool) -> Dict[str, str]:
        h = {"Accept": "text/event-stream" if self.stream else "application/json"}
        if body:
            h["Content-Type"] = "application/json"
        if self.api_key:
            h["Authorization"] = f"Bearer {self.api_key}"
        return h

    def _open(self, method: str, path: str, payload: Optional[Dict[str, Any]], handle: _Handle,
              deadline: float) -> Tuple[Any, Any]:
        """Send the request; return the connection and the response (headers read)."""
        body = json.dumps(payload).encode() if payload is not None else None
        for attempt in (0, 1):  # one retry when a reused keep-alive connection turns out closed by the server
            left = deadline - time.monotonic()
            if left <= 0:
                raise _Failure("timeout", "the deadline passed before the request was sent")
            conn, fresh = self._conn(handle, left)
            try:
                conn.request(method, self.base_path + path, body=body, headers=self._headers(body is not None))
                return conn, conn.getresponse()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError) as exc:
                self._drop()
                if fresh or attempt or handle.expired:
                    raise _classify(exc, handle) from None
            except Exception as exc:
                self._drop()
                raise _classify(exc, handle) from None
        raise _Failure("client", "unreachable")  # pragma: no cover

    def get(self, path: str, deadline_s: float) -> Tuple[int, Dict[str, str], bytes]:
        """A GET with its own deadline (model discovery, pre-flight)."""
        handle = _Handle()
        deadline = time.monotonic() + deadline_s
        self._watcher.watch(deadline, handle)
        try:
            conn, resp = self._open("GET", path, None, handle, deadline)
            data = _read_body(resp, handle)
            if not resp.isclosed():
                self._drop()
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data
        except _Failure:
            self._drop()
            raise
        except Exception as exc:
            self._drop()
            raise _classify(exc, handle) from None
        finally:
            handle.finish()

    def discover_model(self, deadline_s: float = 5.0) -> Optional[str]:
        """The first model the server lists at ``/v1/models`` (None when it lists none or cannot be asked)."""
        try:
            status, _, body = self.get("/v1/models", deadline_s)
            data = json.loads(body)
            return data["data"][0]["id"] if status == 200 and data.get("data") else None
        except (_Failure, ValueError, KeyError, IndexError, TypeError):
            return None

    # -- one request
    def payload(self, prompt: str, max_tokens: int, stream: Optional[bool] = None,
                stream_options: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        stream = self.stream if stream is None else stream
        p: Dict[str, Any] = {"model": self.model or "default", "max_tokens": int(max_tokens), "temperature": 0}
        if self.ignore_eos:
            p["ignore_eos"] = True
        if self.api == "chat":
            p["messages"] = [{"role": "user", "content": prompt}]
        else:
            p["prompt"] = prompt
        if stream:
            p["stream"] = True
            opts = self.stream_options if stream_options is None else stream_options
            if opts:
                p["stream_options"] = opts
        return p

    def request(self, prompt: str, max_tokens: int, t_issue_ns: Optional[int] = None,
                payload: Optional[Dict[str, Any]] = None, deadline_s: Optional[float] = None) -> Dict[str, Any]:
        """One request, blocking: a record with ``ok``, ``error_kind``, ``error``, ``tokens``, ``token_count``
        (how tokens were counted), the timestamps and the chunks (``[t_ns, tokens]``)."""
        t_issue_ns = t_issue_ns or time.monotonic_ns()
        payload = payload or self.payload(prompt, max_tokens)
        stream = bool(payload.get("stream"))
        deadline = t_issue_ns / 1e9 + (self.deadline_s if deadline_s is None else deadline_s)
        rec: Dict[str, Any] = {"ok": False, "error_kind": None, "error": None, "tokens": 0, "token_count": None,
                               "t_issue_ns": t_issue_ns, "t_send_ns": time.monotonic_ns(), "t_first_ns": None,
                               "t_done_ns": None, "chunks": [], "stream": stream, "status": None}
        handle = _Handle()
        self._watcher.watch(deadline, handle)
        with self._lock:
            self.busy += 1
            self.max_busy = max(self.max_busy, self.busy)
        try:
            if self.closing:
                raise _Failure("interrupted", "the client was closed before the request was sent")
            conn, resp = self._open("POST", APIS[self.api], payload, handle, deadline)
            rec["status"] = resp.status
            if resp.status != 200:
                data = _read_body(resp, handle, limit=4096)
                self._drop()
                return _fail("http", f"HTTP {resp.status}: {_printable(data) or resp.reason}", rec)
            if stream:
                self._read_stream(resp, handle, rec)
                _drain(conn, resp)
            else:
                self._read_whole(resp, handle, rec)
            if not resp.isclosed():  # not read to its end: never reuse the connection
                self._drop()
            rec.update(ok=True, t_done_ns=rec["t_done_ns"] or time.monotonic_ns())
            return rec
        except _Failure as f:
            self._drop()
            return _fail(f.kind, f.message, rec)
        except Exception as exc:
            self._drop()
            failure = _classify(exc, handle)
            return _fail(failure.kind, failure.message, rec)
        finally:
            handle.finish()
            with self._lock:
                self.busy -= 1

    def _read_whole(self, resp: Any, handle: _Handle, rec: Dict[str, Any]) -> None:
        data = _read_body(resp, handle)
        now = time.monotonic_ns()
        try:
            doc = json.loads(data)
            choice = doc["choices"][0]
            text = choice["message"]["content"] if self.api == "chat" else choice["text"]
            if not isinstance(text, str):
                raise TypeError("the answer's text is not a string")
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            if isinstance(doc_error := _error_of(data), str):
                raise _Failure("server", doc_error) from None
            raise _Failure("protocol", f"not an OpenAI {self.api} answer ({type(exc).__name__}: {exc})") from None
        usage = doc.get("usage") if isinstance(doc.get("usage"), dict) else {}
        _prompt_tokens(usage, rec)
        tokens = usage.get("completion_tokens")
        if isinstance(tokens, int) and tokens >= 0:
            rec["token_count"] = "usage.completion_tokens"
        else:
            tokens = len(text)
            rec["token_count"] = "characters of the text (the server reports no usage)"
        rec.update(tokens=tokens, t_first_ns=now, t_done_ns=now, chunks=[[now, tokens]])

    def _read_stream(self, resp: Any, handle: _Handle, rec: Dict[str, Any]) -> None:
        ctype = (resp.getheader("Content-Type") or "").lower()
        if "text/event-stream" not in ctype:
            data = _read_body(resp, handle, limit=4096)
            raise _Failure("protocol", f"asked for a stream (server-sent events), got Content-Type {ctype or 'none'}"
                                       f": {_printable(data)}")
        chunks: List[List[Any]] = []  # [t_ns, chars, cumulative usage or None]
        final_usage: Optional[int] = None
        last_cum = 0
        finish = None
        data_lines: List[bytes] = []
        total = 0
        while True:
            line = resp.readline(MAX_LINE + 1)
            now = time.monotonic_ns()
            if handle.expired:
                raise _Failure("timeout", "the deadline passed during the stream")
            if not line:  # end of the body
                if finish is None:
                    raise _Failure("protocol", f"the stream ended before 'data: [DONE]' (after {len(chunks)} "
                                               "chunks with text)")
                break
            total += len(line)
            if len(line) > MAX_LINE or total > 64 * MAX_RESPONSE_BYTES:
                raise _Failure("protocol", "a server-sent event line or the stream is too long")
            line = line.rstrip(b"\r\n")
            if line.startswith(b"data:"):
                data_lines.append(line[5:].lstrip(b" "))
                continue
            if line or not data_lines:  # a comment, another field, or a blank line without data
                continue
            payload, data_lines = b"\n".join(data_lines), []
            if payload.strip() == b"[DONE]":
                break
            try:
                doc = json.loads(payload)
            except ValueError:
                raise _Failure("protocol", f"a stream chunk is not JSON: {_printable(payload)}") from None
            if not isinstance(doc, dict):
                raise _Failure("protocol", f"a stream chunk is not a JSON object: {_printable(payload)}")
            if doc.get("error") is not None:
                raise _Failure("server", f"the server reported an error in the stream: {_printable(payload, 300)}")
            usage = doc.get("usage") if isinstance(doc.get("usage"), dict) else None
            if usage:
                _prompt_tokens(usage, rec)
            cum = usage.get("completion_tokens") if usage else None
            cum = cum if isinstance(cum, int) and cum >= 0 else None
            choices = doc.get("choices")
            if not isinstance(choices, list):
                raise _Failure("protocol", f"a stream chunk has no 'choices' list: {_printable(payload)}")
            text = ""
            pending = False  # a completions choice not yet finished: a token, whatever its text
            for ch in choices[:1]:
                if not isinstance(ch, dict):
                    raise _Failure("protocol", f"a stream chunk's choice is not an object: {_printable(payload)}")
                if self.api == "chat":
                    d = ch.get("delta")
                    delta = d if isinstance(d, dict) else {}
                    text = "".join(v for v in (delta.get("content"), delta.get("reasoning_content"))
                                   if isinstance(v, str))
                else:
                    t = ch.get("text")
                    text = t if isinstance(t, str) else ""
                    pending = "text" in ch and ch.get("finish_reason") is None
                finish = ch.get("finish_reason") or finish
            grew = bool(choices) and cum is not None and cum > last_cum  # a usage-only chunk carries no token
            if text or grew or (pending and cum is None):
                chunks.append([now, len(text), cum])
                if rec["t_first_ns"] is None:
                    rec["t_first_ns"] = now
            elif cum is not None:
                final_usage = cum
            if cum is not None:
                last_cum = max(last_cum, cum)
        rec["t_done_ns"] = time.monotonic_ns()
        rec["chunks"], rec["tokens"], rec["token_count"] = _count_tokens(chunks, final_usage)

    # -- asynchronous use (LoadGen)
    def submit(self, prompt: str, max_tokens: int, done: Callable[[Dict[str, Any]], None]) -> None:
        t_issue = time.monotonic_ns()

        def run() -> None:
            try:
                r = self.request(prompt, max_tokens, t_issue_ns=t_issue)
            except Exception as exc:  # never leave a query unanswered
                r = {"ok": False, "error_kind": "client", "error": f"{type(exc).__name__}: {exc}", "tokens": 0,
                     "t_issue_ns": t_issue, "t_send_ns": None, "t_first_ns": None, "t_done_ns": time.monotonic_ns(),
                     "chunks": []}
            done(r)
        try:
            self._pool.submit(run)
        except RuntimeError:  # the pool is shut: the client was closed
            done({"ok": False, "error_kind": "interrupted", "error": "the client was closed", "tokens": 0,
                  "t_issue_ns": t_issue, "t_send_ns": None, "t_first_ns": None, "t_done_ns": time.monotonic_ns(),
                  "chunks": []})


#: The name the client had before it streamed.
CompletionsClient = EndpointClient


#: After ``data: [DONE]``, the end of the body (the chunked encoding's last chunk) is waited for this long, so the
#: connection is kept for the next request instead of a new one (a TCP, perhaps TLS, handshake in the next TTFT).
DRAIN_S = 0.2


def _drain(conn: Any, resp: Any) -> None:
    """Read what follows ``[DONE]`` in a stream (nothing but the body's end, from a server that ends it); a server
    that sends more, or keeps the body open, leaves the response unclosed: the connection is then not reused."""
    if resp.isclosed():
        return
    try:
        if conn.sock is not None:
            conn.sock.settimeout(DRAIN_S)
        rest = resp.read(256)
        if rest:
            resp.close()  # data after [DONE]: this connection's state is not trusted for another request
            conn.close()
    except Exception:  # a slow end: the connection is dropped by the caller
        return


def _prompt_tokens(usage: Dict[str, Any], rec: Dict[str, Any]) -> None:
    """The prompt's length as the server counted it (``usage.prompt_tokens``), where it says."""
    n = usage.get("prompt_tokens")
    if isinstance(n, int) and not isinstance(n, bool) and 0 <= n < 1 << 31:
        rec["prompt_tokens"] = n


def _count_tokens(chunks: List[List[Any]], final_usage: Optional[int]) -> Tuple[List[List[int]], int, str]:
    """``[[t_ns, tokens], ...]`` for the chunks that carried output, the total, and how it was counted."""
    if chunks and all(c[2] is not None for c in chunks):
        out, prev = [], 0
        for t, _, cum in chunks:
            out.append([t, max(0, cum - prev)])
            prev = max(prev, cum)
        total = max(prev, final_usage or 0)
        if total > prev and out:
            out[-1][1] += total - prev
        return out, total, "usage.completion_tokens in every chunk"
    if final_usage is not None:
        if final_usage == len(chunks) or not chunks:
            return [[t, 1] for t, _, _ in chunks], final_usage, "usage.completion_tokens of the final chunk (one token " \
                "per chunk: the count matches the chunks)"
        chars = sum(c[1] for c in chunks) or len(chunks)
        shares = [final_usage * (c[1] or 1) / chars for c in chunks]
        ks = [int(s) for s in shares]
        for i in sorted(range(len(ks)), key=lambda i: shares[i] - ks[i], reverse=True)[: final_usage - sum(ks)]:
            ks[i] += 1
        return [[c[0], k] for c, k in zip(chunks, ks)], final_usage, (
            "usage.completion_tokens of the final chunk, spread over the chunks by their text length (the server "
            "does not say how many tokens each chunk carries)")
    return [[t, 1] for t, _, _ in chunks], len(chunks), "one token per chunk with output (the server reports no usage)"


def _read_body(resp: Any, handle: _Handle, limit: int = MAX_RESPONSE_BYTES) -> bytes:
    try:
        data = resp.read(limit + 1)
    except Exception as exc:
        raise _classify(exc, handle) from None
    if handle.expired:
        raise _Failure("timeout", "the deadline passed while the answer was read")
    if len(data) > limit:
        if limit == MAX_RESPONSE_BYTES:
            raise _Failure("protocol", f"answer larger than {MAX_RESPONSE_BYTES} bytes")
        return data[:limit]
    return data


def _error_of(data: bytes) -> Optional[str]:
    try:
        doc = json.loads(data)
    except ValueError:
        return None
    if isinstance(doc, dict) and doc.get("error") is not None:
        return f"the server reported an error: {_printable(data, 300)}"
    return None


def _classify(exc: BaseException, handle: _Handle) -> _Failure:
    """The kind of a failure, from the exception and whether the deadline cut the socket."""
    if isinstance(exc, _Failure):
        return exc
    name = f"{type(exc).__name__}: {exc}"
    if handle.expired or isinstance(exc, (TimeoutError, socket.timeout)):
        return _Failure("timeout", f"the deadline passed ({name})")
    if isinstance(exc, socket.gaierror):
        return _Failure("connection", f"the host name does not resolve ({name})")
    if isinstance(exc, ssl.SSLError):
        return _Failure("connection", f"TLS failed ({name})")
    if isinstance(exc, http.client.RemoteDisconnected):
        return _Failure("connection", f"the server closed the connection without an answer ({name})")
    if isinstance(exc, (http.client.IncompleteRead, http.client.BadStatusLine,
                        http.client.LineTooLong, http.client.ResponseNotReady, http.client.ImproperConnectionState)):
        return _Failure("protocol", f"the server's answer broke off or is not HTTP ({name})")
    if isinstance(exc, (ConnectionError, OSError)):
        return _Failure("connection", name)
    return _Failure("client", name)


# --------------------------------------------------------------------------
# Pre-flight


def _fix_for_base(client: EndpointClient) -> str:
    path = client.url.path.rstrip("/")
    base = f"{client.url.scheme}://{client.url.netloc}"
    for suffix in ("/v1/chat/completions", "/v1/completions", "/chat/completions", "/completions"):
        if path.endswith(suffix):
            return (f"the URL ends in {suffix}: give the server's base instead, --sits-endpoint "
                    f"{base}{path[: -len(suffix)] or ''}")
    return f"--sits-endpoint must be the server's base URL (e.g. {base}), the one whose /v1/models lists the model"


def preflight(client: EndpointClient, deadline_s: float = 5.0) -> Dict[str, Any]:
    """``GET /v1/models`` and one short request, each within ``deadline_s``; sets ``client.model`` and the
    stream options the server accepts.  ``{"ok": True, ...}`` or ``{"ok": False, "cause", "error"}`` (the
    error names the cause and the fix)."""
    t0 = time.monotonic()
    where = f"{client.url.scheme}://{client.url.netloc}{client.base_path}"
    out: Dict[str, Any] = {"ok": False, "endpoint": where, "api": client.api, "stream": client.stream}

    def bad(cause: str, message: str) -> Dict[str, Any]:
        out.update(cause=cause, error=message, seconds=round(time.monotonic() - t0, 3))
        return out

    try:
        status, headers, body = client.get("/v1/models", deadline_s)
    except _Failure as f:
        host = f"{client.url.hostname}:{client.url.port or (443 if client.url.scheme == 'https' else 80)}"
        low = f.message.lower()
        if f.kind == "timeout":
            return bad("timeout", f"{where}/v1/models gave no answer within {deadline_s:g} s ({f.message}); fix: "
                                  "check that the server is up and reachable from this host (firewall, proxy)")
        if "resolve" in low:
            return bad("dns", f"{client.url.hostname!r} does not resolve ({f.message}); fix: correct the host in "
                              "--sits-endpoint")
        if "tls" in low or "ssl" in low:
            return bad("tls", f"TLS with {host} failed ({f.message}); fix: use http:// for a plain server, or give "
                              "the server a certificate this host trusts (SSL_CERT_FILE)")
        if "refused" in low:
            return bad("connection-refused", f"nothing listens at {host} (connection refused); fix: start the "
                                             "server, or correct the port in --sits-endpoint")
        return bad(f.kind, f"{where}/v1/models failed: {f.message}; fix: check --sits-endpoint and the server")
    if status in (401, 403):
        how = "the key given was refused" if client.api_key else "no key was given"
        return bad("auth", f"{where}/v1/models answered HTTP {status} ({how}: {_printable(body)}); fix: give the "
                           f"server's API key with --sits-endpoint-key KEY or ${KEY_ENV}")
    if status == 404:
        return bad("not-found", f"{where}/v1/models answered HTTP 404; fix: {_fix_for_base(client)}")
    if status != 200:
        return bad("http", f"{where}/v1/models answered HTTP {status}: {_printable(body)}; fix: check the server's "
                           "log")
    try:
        doc = json.loads(body)
        models = [m["id"] for m in doc["data"] if isinstance(m, dict) and isinstance(m.get("id"), str)]
    except (ValueError, KeyError, TypeError):
        kind = headers.get("content-type", "no content type")
        return bad("not-openai", f"{where}/v1/models did not answer an OpenAI model list ({kind}: "
                                 f"{_printable(body, 120)!r}); fix: point --sits-endpoint at an OpenAI-compatible "
                                 "server (vLLM, TGI, SGLang, llama.cpp, Triton's OpenAI front end)")
    out["models"] = models[:20]
    if client.model is None:
        if not models:
            return bad("no-model", f"{where}/v1/models lists no model; fix: load a model in the server, or set "
                                   "SVC-SLA.model_name")
        client.model = models[0]
    elif models and client.model not in models:
        return bad("no-model", f"the model {client.model!r} is not served at {where} (it lists "
                               f"{', '.join(models[:5])}); fix: set SVC-SLA.model_name to one of those")
    out["model"] = client.model
    # One short request, with the options the server accepts (some refuse what they do not know): the stream
    # options, then ignore_eos.
    failed_5xx = 0
    while True:
        ladders = [client.stream_options, {"include_usage": True}, {}] if client.stream else [None]
        tried: List[Any] = []
        for opts in ladders:
            if opts is not None and opts in tried:
                continue
            tried.append(opts)
            while True:  # a server or protocol error may be passing (a loaded or flaky server, one malformed
                # answer): three tries before it counts
                r = client.request("Say hello.", 2, payload=client.payload("Say hello.", 2, stream_options=opts),
                                   deadline_s=deadline_s)
                passing = (r["error_kind"] in ("server", "protocol")
                           or (r["error_kind"] == "http" and (r["status"] or 500) >= 500))
                if r["ok"] or not passing or failed_5xx >= 2:
                    break
                failed_5xx += 1
            if r["ok"] or not (r["error_kind"] == "http" and r["status"] in (400, 422) and opts):
                break
        if r["ok"] or not (r["error_kind"] == "http" and r["status"] in (400, 422) and client.ignore_eos):
            break
        client.ignore_eos = False  # refused: ask again without it
    out["server_errors_retried"] = failed_5xx
    out["ignore_eos"] = (True if client.ignore_eos else
                         "refused by the server: an answer may stop before max_tokens (the tokens it returns are "
                         "what is judged)")
    if not r["ok"]:
        kind, err = r["error_kind"], r["error"]
        if kind == "http" and r["status"] in (401, 403):
            return bad("auth", f"{APIS[client.api]} answered {err}; fix: give the server's API key with "
                               f"--sits-endpoint-key KEY or ${KEY_ENV}")
        if kind == "http" and r["status"] in (404, 405):
            other = "chat" if client.api == "completions" else "completions"
            return bad("not-found", f"POST {where}{APIS[client.api]} answered {err}; fix: {_fix_for_base(client)}, "
                                    f"or set SVC-SLA.api: {other} if the server only serves that one")
        return bad(kind, f"the pre-flight request POST {where}{APIS[client.api]} failed ({kind}: {err}); fix: check "
                         "the server's log; the load would fail the same way")
    if client.stream:
        client.stream_options = tried[-1] or {}
    out.update(ok=True, stream_options=client.stream_options if client.stream else None,
               tokens=r["tokens"], token_count=r["token_count"], seconds=round(time.monotonic() - t0, 3))
    return out
