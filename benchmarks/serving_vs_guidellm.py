"""The suite's streaming figures and GuideLLM's, side by side, against one scripted server whose timing is known.

    python benchmarks/serving_vs_guidellm.py [--rate 4] [--duration 20] [--ttft 0.2] [--itl 0.02] [--tokens 32]
        [--guidellm PATH] [--tokenizer DIR]

The server (:class:`pytest_sits.inference.servers.ScriptedServer`, 127.0.0.1) sends the first token ``ttft``
after a request starts and one token every ``itl`` after it, ``tokens`` tokens per answer, and a final usage
chunk when asked (as OpenAI does).  The suite measures it with SVC-SLA's client under LoadGen (Poisson arrivals
at ``rate``); GuideLLM (``guidellm`` on PyPI, not a dependency of pytest-sits: it pulls CUDA torch) measures it
at the same constant rate, for the same time.  Each tool's median TTFT, ITL, TPOT and request latency are
compared with the truth under that tool's own definitions (they differ: GuideLLM's time per output token counts
the first token, the suite's does not).

GuideLLM is found as ``--guidellm``, ``$GUIDELLM`` or on ``PATH``; it needs a Hugging Face tokenizer folder for
its synthetic prompts (``--tokenizer`` or ``$GUIDELLM_TOKENIZER``; any tokenizer will do: the server ignores the
prompt).  Without them the GuideLLM column says why it was skipped.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional


def suite(url: str, rate: float, duration: float, tokens: int, logdir: Path) -> Dict[str, Any]:
    from pytest_sits.conditions.inference import InferenceRig, acquire_sla
    from pytest_sits.profiles import resolve

    cfg = dict(resolve("base").thresholds("SVC-SLA"), p99_ms=60_000, min_rps=0.1, max_error_rate=0.5,
               target_qps=rate, duration_s=duration, timeout_s=60, tenants=[{"name": "bench", "share": 1.0}],
               workload={"samples": 256, "prompt_tokens": [64, 64], "output_tokens": [tokens, tokens]})
    ev = acquire_sla(InferenceRig("cpu", "cpu"), cfg, logdir, endpoint=url)
    if ev.get("error"):
        raise SystemExit(f"the suite's run failed: {ev['error']}")
    t = ev["tenants"][0]
    return {"requests": t["completed"], "ttft": t["ttft"]["p50_s"], "itl": t["itl"]["p50_s"],
            "tpot": t["tpot"]["p50_s"], "latency": t["latency"]["p50_s"]}


def guidellm(exe: Optional[str], tokenizer: Optional[str], url: str, rate: float, duration: float, tokens: int,
             out: Path) -> Dict[str, Any]:
    exe = exe or os.environ.get("GUIDELLM") or shutil.which("guidellm")
    tokenizer = tokenizer or os.environ.get("GUIDELLM_TOKENIZER")
    if not exe:
        return {"skipped": "GuideLLM is not installed (pip install guidellm, in a virtual environment of its own: it "
                           "pulls CUDA torch); give --guidellm PATH"}
    if not tokenizer:
        return {"skipped": "GuideLLM needs a tokenizer folder for its synthetic prompts: give --tokenizer DIR"}
    cmd = [exe, "run", f"--backend=kind=openai_http,target={url},model=scripted,request_format=/v1/completions,"
                       "validate_backend=false",
           f"--profile=kind=constant,rate={rate:g}", f"--constraint=kind=max_duration,seconds={duration:g}",
           f"--data=kind=synthetic_text,prompt_tokens=64,output_tokens={tokens}",
           f"--tokenizer=kind=hf_auto,model={tokenizer}", f"--output=kind=json,path={out}", "--disable-progress"]
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=duration * 4 + 300)
    if p.returncode != 0 or not out.is_file():
        return {"skipped": f"GuideLLM failed (exit {p.returncode}): {(p.stderr or p.stdout)[-600:]}"}
    doc = json.loads(out.read_text())
    reqs: List[Dict[str, Any]] = doc["benchmarks"][0]["requests"]["successful"]
    med = lambda key, scale: statistics.median(r[key] * scale for r in reqs if r.get(key) is not None)  # noqa: E731
    return {"requests": len(reqs), "ttft": med("time_to_first_token_ms", 1e-3),
            "itl": med("inter_token_latency_ms", 1e-3), "tpot": med("time_per_output_token_ms", 1e-3),
            "latency": med("request_latency", 1.0), "command": " ".join(cmd)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rate", type=float, default=4.0)
    ap.add_argument("--duration", type=float, default=20.0)
    ap.add_argument("--ttft", type=float, default=0.2)
    ap.add_argument("--itl", type=float, default=0.02)
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--guidellm", default=None)
    ap.add_argument("--tokenizer", default=None)
    a = ap.parse_args()
    from pytest_sits.inference.servers import ScriptedServer

    n, first, gap = a.tokens, a.ttft, a.itl
    latency = first + (n - 1) * gap
    truth = {  # under each tool's definitions
        "suite": {"ttft": first, "itl": gap, "tpot": gap, "latency": latency},
        "guidellm": {"ttft": first, "itl": gap, "tpot": latency / n, "latency": latency},
    }
    with tempfile.TemporaryDirectory(prefix="sits-vs-guidellm-") as tmp, ScriptedServer(ttft_s=first, itl_s=gap) as url:
        t0 = time.monotonic()
        ours = suite(url, a.rate, a.duration, n, Path(tmp) / "suite")
        t1 = time.monotonic()
        theirs = guidellm(a.guidellm, a.tokenizer, url, a.rate, a.duration, n, Path(tmp) / "guidellm.json")
        t2 = time.monotonic()
    print(f"scripted server: TTFT {first * 1e3:g} ms, then a token every {gap * 1e3:g} ms, {n} tokens per answer; "
          f"{a.rate:g} requests/s for {a.duration:g} s")
    print("definitions: suite TPOT = (last token - first token) / (tokens - 1); GuideLLM TPOT = request latency / "
          "tokens (the first token included); ITL = the mean gap between tokens after the first, for both")
    print(f"{'metric':<10} {'truth (suite)':>14} {'suite':>10} {'error':>8} | {'truth (GuideLLM)':>17} "
          f"{'GuideLLM':>10} {'error':>8}")
    for m in ("ttft", "itl", "tpot", "latency"):
        ts, tg = truth["suite"][m], truth["guidellm"][m]
        line = f"{m:<10} {ts * 1e3:>11.3f} ms {ours[m] * 1e3:>7.3f} ms {(ours[m] / ts - 1):>+8.2%} | {tg * 1e3:>14.3f} ms"
        if "skipped" in theirs:
            line += f" {'-':>10} {'-':>8}"
        else:
            line += f" {theirs[m] * 1e3:>7.3f} ms {(theirs[m] / tg - 1):>+8.2%}"
        print(line)
    print(f"requests: suite {ours['requests']} in {t1 - t0:.1f} s"
          + (f"; GuideLLM {theirs['requests']} in {t2 - t1:.1f} s" if "skipped" not in theirs else ""))
    if "skipped" in theirs:
        print(f"GuideLLM skipped: {theirs['skipped']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
