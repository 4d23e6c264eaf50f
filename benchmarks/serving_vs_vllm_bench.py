"""The suite's serving figures beside vLLM's own benchmark (``vllm bench serve``), against one real vLLM server,
in alternating rounds.

    python benchmarks/serving_vs_vllm_bench.py [--rounds 3] [--rate 20] [--prompts 400] [--input 40] [--output 16]

vLLM's CPU build and its tiny local model come from ``tools/vllm/install.sh`` (``$SITS_VLLM_DIR``, default
``~/.cache/pytest-sits/vllm``).  The script starts the server once (the suite's launcher: a process group of its
own, stopped at the end), then runs, ``--rounds`` times each and alternating, (a) the suite's SVC-SLA client under
MLPerf LoadGen (Poisson arrivals at ``--rate``, ``--prompts / --rate`` seconds, prompts of ``--input`` tokens as
the server counts them, ``--output`` tokens with ``ignore_eos``) and (b) vLLM's benchmark
(``vllm.benchmarks.serve``, random dataset of the same lengths, Poisson arrivals at the same rate, the same
number of prompts, ``--ignore-eos``), in vLLM's own virtual environment.  For each metric (TTFT, TPOT, ITL and
request latency) it prints each tool's median (the mean of the rounds' medians, with their range) and the ratio
suite / vLLM.  The machine is shared and its speed drifts, which the alternation spreads over both tools; a ratio
is not a verdict about either tool.

Definitions: both tools take TTFT from the request's send to the first streamed token, TPOT per request as (latency
- TTFT) / (output tokens - 1), ITL as the gaps between streamed chunks, latency from the send to the last byte
(the suite from LoadGen's issue, which includes any wait for a client slot: none at these rates).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict, List

STATE = Path(os.environ.get("SITS_VLLM_DIR") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
             / "pytest-sits" / "vllm")
METRICS = ("ttft", "tpot", "itl", "latency")

VLLM_BENCH = r"""
import json, sys
from vllm.benchmarks import serve
from vllm.utils.argparse_utils import FlexibleArgumentParser
p = FlexibleArgumentParser()
serve.add_cli_args(p)
args = p.parse_args(sys.argv[1:])
serve.main(args)
"""


#: The server's own histograms (vLLM's /metrics): their sums and counts over a round give the server's means.
SERVER_HISTOGRAMS = {"ttft": "vllm:time_to_first_token_seconds", "tpot": "vllm:request_time_per_output_token_seconds",
                     "itl": "vllm:inter_token_latency_seconds", "latency": "vllm:e2e_request_latency_seconds"}


def server_totals(url: str) -> Dict[str, List[float]]:
    """[sum, count] of each of the server's latency histograms now."""
    import urllib.request

    with urllib.request.urlopen(f"{url}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    out: Dict[str, List[float]] = {}
    for m, name in SERVER_HISTOGRAMS.items():
        tot = [0.0, 0.0]
        for line in text.splitlines():
            for k, suffix in ((0, "_sum{"), (1, "_count{")):
                if line.startswith(name + suffix):
                    tot[k] += float(line.rsplit(" ", 1)[1])
        out[m] = tot
    return out


def server_means(before: Dict[str, List[float]], after: Dict[str, List[float]]) -> Dict[str, float]:
    return {m: (after[m][0] - before[m][0]) / max(1.0, after[m][1] - before[m][1]) * 1e3 for m in SERVER_HISTOGRAMS}


def suite_means(requests_file: str) -> Dict[str, float]:
    """The means of the suite's per-request records (its own definitions: from LoadGen's issue)."""
    ttft, tpot, itl, lat = [], [], [], []
    for line in Path(requests_file).read_text().splitlines():
        r = json.loads(line)
        if r.get("error") or r.get("first_ns") is None:
            continue
        ttft.append(r["first_ns"] / 1e6)
        lat.append((r["completed_ns"] - r["issued_ns"]) / 1e6)
        if r["tokens"] > 1:
            tpot.append((r["done_ns"] - r["first_ns"]) / 1e6 / (r["tokens"] - 1))
        ch = r.get("chunks") or []
        itl.extend((b[0] - a[0]) / 1e6 / max(1, b[1]) for a, b in zip(ch, ch[1:]) for _ in range(max(1, b[1])))
    return {"ttft": statistics.mean(ttft), "tpot": statistics.mean(tpot), "itl": statistics.mean(itl),
            "latency": statistics.mean(lat)}


def suite(url: str, rate: float, prompts: int, n_in: int, n_out: int, logdir: Path, seed: int) -> Dict[str, Any]:
    from pytest_sits.conditions.inference import InferenceRig, acquire_sla
    from pytest_sits.profiles import resolve

    cfg = dict(resolve("base").thresholds("SVC-SLA"), p99_ms=60_000, min_rps=0.1, max_error_rate=0.5,
               target_qps=rate, duration_s=prompts / rate, size_to_decide=False, timeout_s=60,
               tenants=[{"name": "bench", "share": 1.0}], model_name="tiny", seed=seed,
               workload={"samples": max(64, prompts), "prompt_tokens": [n_in, n_in], "output_tokens": [n_out, n_out]})
    ev = acquire_sla(InferenceRig("cpu", "cpu"), cfg, logdir, endpoint=url)
    if ev.get("error"):
        raise SystemExit(f"the suite's run failed: {ev['error']}")
    t = ev["tenants"][0]
    return {"requests": t["completed"], "errors": t["errors"], "ttft": t["ttft"]["p50_s"] * 1e3,
            "tpot": t["tpot"]["p50_s"] * 1e3, "itl": t["itl"]["p50_s"] * 1e3, "latency": t["latency"]["p50_s"] * 1e3,
            "mean": suite_means(ev["requests_file"])}


def vllm_bench(url: str, rate: float, prompts: int, n_in: int, n_out: int, out: Path, seed: int) -> Dict[str, Any]:
    py = STATE / "venv" / "bin" / "python"
    cmd = [str(py), "-c", VLLM_BENCH, "--backend=vllm", f"--base-url={url}", "--model=tiny",
           f"--tokenizer={STATE / 'model'}", "--dataset-name=random", f"--random-input-len={n_in}",
           f"--random-output-len={n_out}", "--random-range-ratio=0", f"--num-prompts={prompts}",
           f"--request-rate={rate:g}", "--ignore-eos", "--save-result", f"--result-dir={out.parent}",
           f"--result-filename={out.name}", "--percentile-metrics=ttft,tpot,itl,e2el", "--metric-percentiles=50,99",
           f"--seed={seed}"]
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    if r.returncode != 0 or not out.is_file():
        raise SystemExit(f"vLLM's benchmark failed ({r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}")
    doc = json.loads(out.read_text())
    return {"requests": doc.get("completed"), "errors": doc.get("failed", 0), "ttft": doc["median_ttft_ms"],
            "tpot": doc["median_tpot_ms"], "itl": doc["median_itl_ms"], "latency": doc["median_e2el_ms"],
            "mean": {"ttft": doc["mean_ttft_ms"], "tpot": doc["mean_tpot_ms"], "itl": doc["mean_itl_ms"],
                     "latency": doc["mean_e2el_ms"]}}


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rate", type=float, default=20.0)
    ap.add_argument("--prompts", type=int, default=400)
    ap.add_argument("--input", type=int, default=40)
    ap.add_argument("--output", type=int, default=16)
    args = ap.parse_args(argv)
    from pytest_sits.inference.launch import LaunchedServer, ServeError, ServeSpec

    if not (STATE / "venv" / "bin" / "python").exists() or not (STATE / "model" / "config.json").exists():
        print(f"vLLM's CPU server is not built in {STATE}: run tools/vllm/install.sh", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="sits-vs-vllm-"))
    command = (f"{STATE / 'venv' / 'bin' / 'python'} -m vllm.entrypoints.openai.api_server --model={STATE / 'model'} "
               "--host=127.0.0.1 --port={port} --dtype=float32 --max-model-len=1024 --served-model-name=tiny")
    spec = ServeSpec.parse(command, env=["VLLM_CPU_KVCACHE_SPACE=1", "HF_HUB_OFFLINE=1"], model="tiny",
                           ready_timeout_s=600)
    server = LaunchedServer(spec, work)
    rows: Dict[str, List[Dict[str, Any]]] = {"suite": [], "vllm": []}
    try:
        server.start()
        server.wait_ready(progress=lambda line: print(line, file=sys.stderr))
        print(f"vLLM {server.version} ready at {spec.url} in {server.ready_s} s; {args.rounds} rounds of each tool, "
              f"alternating, {args.prompts} prompts at {args.rate:g} req/s, {args.input} -> {args.output} tokens",
              file=sys.stderr)
        for i in range(args.rounds):
            for tool in (("suite", "vllm") if i % 2 == 0 else ("vllm", "suite")):
                before = server_totals(spec.url)
                if tool == "suite":
                    r = suite(spec.url, args.rate, args.prompts, args.input, args.output, work / f"suite-{i}", 2026 + i)
                else:
                    r = vllm_bench(spec.url, args.rate, args.prompts, args.input, args.output,
                                   work / f"vllm-{i}.json", 2026 + i)
                # the server's own means over the round (the calibration and pre-flight requests included)
                r["server"] = server_means(before, server_totals(spec.url))
                rows[tool].append(r)
                print(f"round {i + 1} {tool:5s}: " + ", ".join(f"{m} {r[m]:.3f} ms" for m in METRICS)
                      + f" ({r['requests']} requests, {r['errors']} errors)", file=sys.stderr)
    except ServeError as exc:
        print(f"the server could not be started: {exc}", file=sys.stderr)
        return 1
    finally:
        server.stop()
    print(f"\nmedians over {args.rounds} alternating rounds (mean of the rounds' medians [range]), "
          f"{args.prompts} prompts at {args.rate:g} req/s, {args.input} -> {args.output} tokens, vLLM {server.version}")
    print(f"{'metric':10s} {'suite ms':>24s} {'vllm bench ms':>24s} {'suite/vllm':>11s}")
    for m in METRICS:
        a = [r[m] for r in rows["suite"]]
        b = [r[m] for r in rows["vllm"]]
        ma, mb = statistics.mean(a), statistics.mean(b)
        print(f"{m:10s} {ma:9.3f} [{min(a):.3f}-{max(a):.3f}] {mb:9.3f} [{min(b):.3f}-{max(b):.3f}] "
              f"{ma / mb:11.3f}")
    print("\nmeans over the rounds, each tool's beside the server's own for the same rounds (vLLM's histograms at "
          "/metrics: from the request's arrival in the server to its first token / its end)")
    print(f"{'metric':10s} {'suite':>9s} {'server':>9s} {'suite/srv':>9s} {'vllm':>9s} {'server':>9s} "
          f"{'vllm/srv':>9s} {'suite/vllm':>10s}")
    for m in METRICS:
        sa = statistics.mean(r["mean"][m] for r in rows["suite"])
        ss = statistics.mean(r["server"][m] for r in rows["suite"])
        va = statistics.mean(r["mean"][m] for r in rows["vllm"])
        vs = statistics.mean(r["server"][m] for r in rows["vllm"])
        print(f"{m:10s} {sa:9.3f} {ss:9.3f} {sa / ss:9.3f} {va:9.3f} {vs:9.3f} {va / vs:9.3f} {sa / va:10.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
