"""The server under test, launched by the suite (``--sits-serve``): vLLM, llama.cpp's server, SGLang, TGI or any
OpenAI-compatible stack started from its own command line.

* The command is split as a shell would (``shlex``), never run through a shell; ``{port}`` in it is replaced by the
  port.  Its environment is the run's plus ``--sits-serve-env KEY=VALUE``.
* The port must be free before the start: a port in use is refused (another server would be measured).
* It runs in a process group of its own, with its output in ``serving/server.log`` of the report folder; if the
  suite is killed outright, the kernel sends the server SIGTERM (Linux ``PR_SET_PDEATHSIG``).
* Ready means: the process runs, HTTP answers, and ``/v1/models`` lists the model (the one named, or any).  A
  process that ends first, or a deadline passed, is a :class:`ServeError` naming the exit status and the log's
  last lines.
* :meth:`LaunchedServer.stop` ends the group: SIGTERM, then SIGKILL after a grace; it is idempotent and safe from
  any cleanup path (the run's end, Ctrl-C, a failed start).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

#: Seconds the server gets between SIGTERM and SIGKILL.
GRACE_S = 15.0
#: The default deadline for the server to be ready (vLLM loads a 70B model in minutes).
READY_TIMEOUT_S = 900.0
#: At most this many bytes of an answer are read while waiting for readiness.
MAX_ANSWER = 1 << 20
#: Log lines quoted in an error.
TAIL_LINES = 15


class ServeError(RuntimeError):
    """The launched server could not be started, never became ready, or ended."""


@dataclass
class ServeSpec:
    """What to launch (``--sits-serve*`` options)."""

    command: List[str]
    port: int
    env: Dict[str, str] = field(default_factory=dict)
    model: Optional[str] = None
    ready_timeout_s: float = READY_TIMEOUT_S
    accelerators: List[str] = field(default_factory=list)
    grace_s: float = GRACE_S

    @classmethod
    def parse(cls, command: str, port: Any = None, env: Optional[List[str]] = None, model: Optional[str] = None,
              ready_timeout_s: Any = None, accelerators: Optional[str] = None) -> ServeSpec:
        """Check the options now; a bad value is a :class:`ValueError` naming the option, the value and the fix."""
        try:
            argv = shlex.split(command)
        except ValueError as exc:
            raise ValueError(f"--sits-serve={command!r} cannot be split into arguments ({exc}); fix: close the "
                             "quotes") from None
        if not argv:
            raise ValueError("--sits-serve is empty; fix: give the command that starts the server, e.g. "
                             "--sits-serve='python -m vllm.entrypoints.openai.api_server --model DIR --port {port}'")
        if port in (None, ""):
            p = _free_port()
        else:
            try:
                p = int(port)
            except (TypeError, ValueError):
                p = -1
            if not 1 <= p <= 65535:
                raise ValueError(f"--sits-serve-port={port!r} is not a port (1-65535); fix: --sits-serve-port=8000, "
                                 "or leave it out for a free one")
        if "{port}" not in command and port in (None, ""):
            raise ValueError(f"--sits-serve={command!r} does not say where the server listens: the command holds no "
                             "{port} and no --sits-serve-port was given; fix: write --port {port} in the command, or "
                             "give --sits-serve-port=P matching the command's own port")
        environ: Dict[str, str] = {}
        for item in env or []:
            key, eq, value = str(item).partition("=")
            if not eq or not key or not key.replace("_", "a").isalnum():
                raise ValueError(f"--sits-serve-env={item!r} is not KEY=VALUE; fix: e.g. "
                                 "--sits-serve-env=VLLM_CPU_KVCACHE_SPACE=1")
            environ[key] = value
        timeout = READY_TIMEOUT_S
        if ready_timeout_s not in (None, ""):
            try:
                timeout = float(ready_timeout_s)
            except (TypeError, ValueError):
                timeout = float("nan")
            if not 0 < timeout <= 86400:
                raise ValueError(f"--sits-serve-timeout={ready_timeout_s!r}: must be seconds in (0, 86400]; fix: "
                                 "e.g. --sits-serve-timeout=600")
        accs = [a.strip() for a in (accelerators or "").split(",") if a.strip()]
        return cls(command=[a.replace("{port}", str(p)) for a in argv], port=p, env=environ, model=model or None,
                   ready_timeout_s=timeout, accelerators=accs)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def to_json(self) -> Dict[str, Any]:
        return {"command": self.command, "port": self.port, "env": self.env, "model": self.model,
                "ready_timeout_s": self.ready_timeout_s, "accelerators": self.accelerators}


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_in_use(port: int) -> bool:
    """Whether something answers, or holds, 127.0.0.1:``port``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        if s.connect_ex(("127.0.0.1", port)) == 0:
            return True
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        # as servers bind (uvicorn, llama.cpp): a connection of a server stopped a moment ago, left in TIME_WAIT,
        # does not hold the port
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM), 0, 0, 0)  # PR_SET_PDEATHSIG
    except Exception:  # noqa: BLE001 - not Linux: stop() still ends the group
        pass


def _get(url: str, timeout: float) -> Any:
    """(status, parsed JSON or None) of GET ``url``; (None, reason) when nothing answered."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:  # noqa: S310 - 127.0.0.1, http only
            body = resp.read(MAX_ANSWER)
            status = resp.status
    except urllib.error.HTTPError as exc:
        return exc.code, None
    except (OSError, ValueError) as exc:
        return None, str(getattr(exc, "reason", exc))
    try:
        return status, json.loads(body)
    except ValueError:
        return status, None


class LaunchedServer:
    """One launched server for the run (see the module's docstring)."""

    def __init__(self, spec: ServeSpec, logdir: Path):
        self.spec = spec
        self.log_path = Path(logdir) / "server.log"
        self.proc: Optional[subprocess.Popen] = None
        self.started_at: Optional[float] = None
        self.ready_s: Optional[float] = None
        self.models: List[str] = []
        self.version: Optional[str] = None
        self.stopped: Optional[Dict[str, Any]] = None
        #: Seconds from the start to the first HTTP answer of any kind (the server listening), once seen.
        self.first_answer_s: Optional[float] = None
        self._log: Any = None

    # -- lifecycle ------------------------------------------------------------------------------------------------

    def start(self) -> None:
        if port_in_use(self.spec.port):
            raise ServeError(f"port {self.spec.port} is already in use on 127.0.0.1: another process listens there, "
                             "and the suite would measure it instead of the server it starts; fix: stop that "
                             "process, or give --sits-serve-port a free port (or leave it out for a free one)")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed by stop()
        env = dict(os.environ, **self.spec.env)
        linux = sys.platform.startswith("linux")
        self.started_at = time.monotonic()
        try:
            self.proc = subprocess.Popen(self.spec.command, stdin=subprocess.DEVNULL, stdout=self._log,
                                         stderr=subprocess.STDOUT, env=env, start_new_session=True,
                                         preexec_fn=_die_with_parent if linux else None)
        except OSError as exc:
            self._log.close()
            raise ServeError(f"the server command {shlex.join(self.spec.command)!r} could not be started: "
                             f"{exc.strerror or exc}; fix: check the program's path (--sits-serve)") from None

    def wait_ready(self, should_stop: Optional[Callable[[], Optional[str]]] = None,
                   progress: Optional[Callable[[str], None]] = None) -> None:
        """Wait until the server runs and ``/v1/models`` lists the model; a :class:`ServeError` otherwise (the
        server is stopped first).  ``should_stop()``: a reason to give up now (a signal), or None."""
        assert self.proc is not None and self.started_at is not None
        deadline = self.started_at + self.spec.ready_timeout_s
        last = "no answer yet"
        said = 0.0
        while True:
            code = self.proc.poll()
            if code is not None:
                self.stop()
                raise ServeError(f"the server exited with {_status(code)} before it was ready "
                                 f"({time.monotonic() - self.started_at:.1f} s after its start); last lines of "
                                 f"{self.log_path}:\n{self.tail()}")
            reason = should_stop() if should_stop else None
            if reason:
                self.stop()
                raise ServeError(f"{reason} while the server was starting; it was stopped")
            status, doc = _get(f"{self.spec.url}/v1/models", 2.0)
            if status is not None and self.first_answer_s is None:
                self.first_answer_s = round(time.monotonic() - self.started_at, 3)
            if status == 200 and isinstance(doc, dict) and isinstance(doc.get("data"), list):
                models = [str(m["id"]) for m in doc["data"] if isinstance(m, dict) and isinstance(m.get("id"), str)]
                if models and (self.spec.model is None or self.spec.model in models):
                    self.models = models[:20]
                    break
                last = (f"/v1/models lists {', '.join(models[:5]) or 'no model'}"
                        + (f", not {self.spec.model!r}" if self.spec.model else ""))
            elif status is not None:
                last = f"/v1/models answered HTTP {status}"
            else:
                last = f"nothing answers at {self.spec.url} ({doc})"
            now = time.monotonic()
            if now >= deadline:
                self.stop()
                raise ServeError(f"the server was not ready within {self.spec.ready_timeout_s:g} s ({last}); it was "
                                 f"stopped; last lines of {self.log_path}:\n{self.tail()}\nfix: see the log, or give "
                                 "it longer with --sits-serve-timeout=SECONDS")
            if progress and now - said >= 30:
                said = now
                progress(f"waiting for the server at {self.spec.url} ({now - self.started_at:.0f} s; {last})")
            time.sleep(0.25)
        self.ready_s = round(time.monotonic() - self.started_at, 3)
        status, doc = _get(f"{self.spec.url}/version", 2.0)
        if status == 200 and isinstance(doc, dict) and isinstance(doc.get("version"), str):
            self.version = doc["version"][:80]

    def alive(self) -> Optional[str]:
        """None while the server runs; else how it ended."""
        if self.proc is None:
            return "never started"
        code = self.proc.poll()
        return None if code is None else f"the server exited with {_status(code)}"

    def stop(self) -> Dict[str, Any]:
        """End the server's process group: SIGTERM, SIGKILL after the grace.  Idempotent."""
        if self.stopped is not None or self.proc is None:
            return self.stopped or {}
        proc, how = self.proc, "exited by itself"
        code = proc.poll()
        if code is None:
            _killpg(proc.pid, signal.SIGTERM)
            how = "SIGTERM"
            try:
                code = proc.wait(timeout=self.spec.grace_s)
            except subprocess.TimeoutExpired:
                how = f"SIGKILL after {self.spec.grace_s:g} s"
        # The group may hold children (vLLM's engine core) still: they go with it.
        _killpg(proc.pid, signal.SIGKILL)
        try:
            code = proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover - a process in uninterruptible sleep
            pass
        # The members signalled may take a moment to go (a process tearing down a large mapping).
        deadline = time.monotonic() + 10
        while group_members(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if self._log is not None:
            self._log.close()
        self.stopped = {"how": how, "exit": _status(code) if code is not None else "unknown",
                        "left": len(group_members(proc.pid))}
        return self.stopped

    def tail(self, n: int = TAIL_LINES) -> str:
        return log_tail(self.log_path, n)

    def describe(self) -> Dict[str, Any]:
        """What the report and the header say of the stack under test."""
        return {"launched": True, "command": self.spec.command, "url": self.spec.url, "port": self.spec.port,
                "env": sorted(self.spec.env), "models": self.models, "model": self.spec.model or
                (self.models[0] if self.models else None), "version": self.version, "ready_s": self.ready_s,
                "accelerators": self.spec.accelerators, "log": str(self.log_path),
                "pid": self.proc.pid if self.proc else None, "stopped": self.stopped}


def _killpg(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _status(code: int) -> str:
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit status {code}"


def log_tail(path: Any, n: int = TAIL_LINES) -> str:
    """The last ``n`` lines of a server's log (its last 16 KiB at most, unprintable characters replaced; a link
    is not followed)."""
    try:
        fd = os.open(str(path), os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(fd, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - 16384))
            lines = fh.read().decode("utf-8", "replace").splitlines()[-n:]
    except OSError:
        return "  (no log)"
    printable = ("".join(c if c.isprintable() else "?" for c in line)[:300] for line in lines)
    return "\n".join(f"  | {line}" for line in printable) or "  (the log is empty)"


def group_members(pgid: int) -> List[int]:
    """The live processes (zombies aside) of process group ``pgid``, from /proc (empty where there is none)."""
    out: List[int] = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return out
    for name in entries:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                stat = fh.read(4096).decode("ascii", "replace")
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[-1].split()
        if len(fields) > 2 and fields[0] != "Z" and fields[2] == str(pgid):
            out.append(int(name))
    return out


#: Phases serving stacks print while they start (name, pattern whose group is the seconds), read from the log where
#: printed: vLLM's weight loading, model loading, engine initialisation (memory profiling, KV cache allocation,
#: warm-up) and CUDA graph capture; llama.cpp's model load.
PHASES = (
    ("weights loaded", re.compile(r"Loading weights took ([0-9]+(?:\.[0-9]+)?) ?s"), 1.0),
    ("model loaded", re.compile(r"Model loading took [0-9.]+ ?GiB(?: memory)? and ([0-9]+(?:\.[0-9]+)?) ?s"), 1.0),
    ("engine initialised (memory profile, KV cache allocated, warm-up)",
     re.compile(r"init engine \(profile, create kv cache, warmup model\) took ([0-9]+(?:\.[0-9]+)?) ?s"), 1.0),
    ("graphs captured", re.compile(r"Graph capturing finished in ([0-9]+(?:\.[0-9]+)?) ?sec"), 1.0),
    ("model loaded (llama.cpp)", re.compile(r"llama_model_load: .*?([0-9]+(?:\.[0-9]+)?) ms"), 1e-3),
)
#: At most this many bytes of a server's log are read for its phases.
MAX_LOG_READ = 8 << 20


def log_phases(path: Any) -> Dict[str, Any]:
    """The start-up phases the server printed in its log (the last of each), and those it did not print."""
    try:
        with open(path, "rb") as fh:
            text = fh.read(MAX_LOG_READ).decode("utf-8", "replace")
    except OSError as exc:
        return {"printed": [], "not_printed": [p[0] for p in PHASES], "error": str(exc)}
    printed, missing = [], []
    for name, rx, scale in PHASES:
        found = None
        for m in rx.finditer(text):
            found = m
        if found is None:
            missing.append(name)
            continue
        end = text.find("\n", found.end())
        line = text[text.rfind("\n", 0, found.start()) + 1: end if end >= 0 else len(text)]
        printed.append({"phase": name, "seconds": round(float(found.group(1)) * scale, 6), "line": line.strip()[:240]})
    return {"printed": printed, "not_printed": missing,
            "note": "as the server printed them (its own clocks; phases may overlap the suite's stages)"}


def first_token(url: str, model: Optional[str], timeout_s: float) -> Dict[str, Any]:
    """One streamed request of one token: seconds to its first token, or the error."""
    from .endpoint import EndpointClient

    with EndpointClient(url, model, stream=True, deadline_s=timeout_s, max_inflight=1) as client:
        t0 = time.monotonic_ns()
        r = client.request("Hello", 4, t_issue_ns=t0)
    if not r["ok"]:
        return {"error": f"the first request failed ({r['error_kind']}: {r['error']})"}
    # an answer whose text is empty (no chunk with text) has its first token when it is done
    first = int(r.get("t_first_ns") or r.get("t_done_ns") or time.monotonic_ns())
    return {"seconds": (first - t0) / 1e9, "t_ns": first}


def cold_start(spec: ServeSpec, logdir: Path, should_stop: Optional[Callable[[], Optional[str]]] = None,
               evict: Optional[Callable[[], Dict[str, Any]]] = None) -> Dict[str, Any]:
    """One cold start of the server: launch, ready (``/v1/models`` lists the model), first token of a first request,
    then stop.  Stages from the suite's clock (the start of the process to its first HTTP answer, to ready, to the
    first token) and the phases the server printed; ``{"error": ...}`` when it could not start."""
    eviction = evict() if evict else {"requested": "none", "applied": False}
    server = LaunchedServer(spec, logdir)
    try:
        server.start()
        assert server.started_at is not None
        t_start = time.monotonic()
        server.wait_ready(should_stop)
        ready = time.monotonic()
        tok = first_token(spec.url, spec.model or (server.models[0] if server.models else None),
                          max(5.0, spec.ready_timeout_s))
        if tok.get("error"):
            return {"error": f"{tok['error']}; last lines of {server.log_path}:\n{server.tail()}",
                    "log": str(server.log_path)}
        total = tok["t_ns"] / 1e9 - server.started_at
    except ServeError as exc:
        return {"error": str(exc), "log": str(server.log_path)}
    finally:
        stopped = server.stop()
    listening = server.first_answer_s if server.first_answer_s is not None else ready - server.started_at
    stages = [{"stage": "start_to_listening", "seconds": round(listening, 4)},
              {"stage": "listening_to_ready", "seconds": round(ready - server.started_at - listening, 4)},
              {"stage": "ready_to_first_token", "seconds": round(total - (ready - server.started_at), 4)}]
    return {"total_s": round(total, 4), "stages": stages, "phases": log_phases(server.log_path),
            "log": str(server.log_path), "stopped": stopped, "spawn_s": round(t_start - server.started_at, 4),
            "page_cache": {"state": "evicted" if eviction.get("applied") else "as found (not evicted)",
                           "eviction": eviction},
            "clock": "time.monotonic in the suite's process; ready polled every 0.25 s (the ready stamp is up to "
                     "0.25 s late)"}
