"""A simulated serving stack: an OpenAI-compatible server in a process of its own, started by the suite as it
starts vLLM or llama.cpp (``--sits-serve="python -m pytest_sits.inference.simserve --port={port}"``), so that the
launched server's lifecycle and its faults are tested without a real stack.  Never evidence about a real server.

Faults (``--fault``, repeatable):

* ``start-fails``: prints a few log lines and exits with status 3 before listening;
* ``never-ready``: listens, but ``/v1/models`` answers 503 (a model that never loads);
* ``dies-after=S``: the process ends (SIGKILL of itself) S seconds after its first completion request (under
  the load, however long the run took to reach it);
* ``slow-start=S``: waits S seconds before it listens (a slow cold start);
* ``ttft-high``: the first token comes 2 s after each request;
* ``frag-high``: KV blocks of 512 tokens (most of each block a short request holds stays empty);
* ``restarts-after=S``: S seconds after it became ready the serving engine restarts in the same process: every
  connection is cut, nothing listens for a second, then a fresh engine serves (a new start time at /metrics).

It publishes vLLM's KV-cache metrics at ``/metrics`` (blocks of ``--kv-block-tokens``, 1 token by default: a token-granular pool).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from typing import List, Optional


def _log(line: str) -> None:
    sys.stdout.write(f"simserve: {line}\n")
    sys.stdout.flush()


def main(argv: Optional[List[str]] = None) -> int:
    from .servers import ScriptedServer

    ap = argparse.ArgumentParser(prog="python -m pytest_sits.inference.simserve")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--model", default="sim-model")
    ap.add_argument("--ttft", type=float, default=0.02, help="seconds to the first token")
    ap.add_argument("--itl", type=float, default=0.002, help="seconds between tokens")
    ap.add_argument("--kv-block-tokens", type=int, default=1, help="tokens per KV block (/metrics; 1: token-granular)")
    ap.add_argument("--fault", action="append", default=[])
    args = ap.parse_args(argv)
    faults = {f.split("=", 1)[0]: (f.split("=", 1)[1] if "=" in f else "") for f in args.fault}
    unknown = set(faults) - {"start-fails", "never-ready", "dies-after", "slow-start", "ttft-high", "frag-high",
                            "restarts-after"}
    if unknown:
        ap.error(f"unknown fault {sorted(unknown)[0]!r}")
    _log(f"starting (pid {os.getpid()}, model {args.model}, port {args.port})")
    if "start-fails" in faults:
        _log("loading weights")
        _log("error: CUDA out of memory while allocating the KV cache")
        return 3
    if "slow-start" in faults:
        time.sleep(float(faults["slow-start"] or 5))
    ttft = 2.0 if "ttft-high" in faults else args.ttft
    def engine() -> ScriptedServer:
        s = ScriptedServer(ttft_s=ttft, itl_s=args.itl, model_name=args.model, port=args.port,
                           fault="not-ready" if "never-ready" in faults else None,
                           kv_block_tokens=512 if "frag-high" in faults else max(1, args.kv_block_tokens))
        s.version = "sim-0"  # type: ignore[attr-defined]
        return s

    server = engine()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *a: stop.set())
    signal.signal(signal.SIGINT, lambda *a: stop.set())
    server.__enter__()
    _log("weights loaded; KV cache allocated; ready")
    dies = float(faults["dies-after"] or 1) if "dies-after" in faults else None
    restarts = float(faults["restarts-after"] or 1) if "restarts-after" in faults else None
    t0 = time.monotonic()
    loaded: Optional[float] = None  # when the first completion request came
    try:
        while not stop.wait(0.05):
            if loaded is None and server.records:
                loaded = time.monotonic()
            if dies is not None and loaded is not None and time.monotonic() - loaded >= dies:
                _log("fatal: engine core died")
                os.kill(os.getpid(), signal.SIGKILL)
            if restarts is not None and time.monotonic() - t0 >= restarts:
                restarts = None
                _log("engine core restarting")
                server.kill()
                time.sleep(1.0)
                server = engine()
                server.__enter__()
                _log("engine core restarted; ready")
    finally:
        server.__exit__(None, None, None)
    _log("stopped")
    return 0


if __name__ == "__main__":  # pragma: no cover - run as a command
    sys.exit(main())
