"""MLPerf Inference submissions: LoadGen's summary (``mlperf_log_summary.txt``) and detail log
(``mlperf_log_detail.txt``, ``:::MLLOG`` JSON lines), the system description (``systems/<system>.json``),
PTDaemon's power log (``spl.txt``) and the accuracy run's scores (``accuracy/accuracy.txt``).

What they decide (:mod:`pytest_sits.conditions.inference.mlperf`): SVC-SLA and PLP-LATENCY from a Server run's
latency, TTFT and TPOT percentiles, PLP-PPL from the Server run's throughput over the same system's Offline run,
PLP-POWER from the power log over the run's window (``power_begin`` / ``power_end`` of the detail log), EQ-PRECISION
from ``accuracy.txt`` against the benchmark's accuracy target (:mod:`pytest_sits.catalogue.mlperf`).  The system
description is the submitter's *declaration* (INV-DEVICES, MEM-CAPACITY, DEP-DRIVER as declared,
:mod:`pytest_sits.conditions.inventory`): never taken for a reading.

A summary and a detail log of one run are one run: files in one folder with the same scenario are merged (the
detail log's figures fill what the summary lacks; where both give a figure they must agree).  A power log goes
with the run in its folder.

LoadGen figures that read oddly are kept as printed and noted, never used: an LLM Server run's
``result_overlatency_query_count`` equals its query count (its ``target_latency_ns`` is 0: the TTFT and TPOT
limits are the constraints), and ``result_token_throughput`` is printed in a unit of its own (1e-08);
``result_completed_tokens_per_second`` is the token rate used.
"""

from __future__ import annotations

import json
import math
import re
from datetime import datetime
from pathlib import PurePosixPath
from typing import Any, Dict, Iterable, List, Optional, Tuple

from .base import Detection, Entry, Machine, Reader
from .text import TextEvidenceError, text_lines

#: After every device, topology and event step: nothing here names a device.
MLPERF_STEP = 60

#: The most lines of a detail log (a v5.1 log has about 120) and of a power log (a day at 1 Hz).
MAX_DETAIL_LINES = 20_000
MAX_POWER_LINES = 200_000
#: A detail log line's longest (``loaded_qsl_set`` and ``loadgen_file_sha1`` are 100-300 KB); longer is refused.
MAX_DETAIL_LINE = 4 << 20
#: The longest line of a summary or power log.
MAX_LINE = 4096
#: Power-log block length for the interval of the mean (batch means).
POWER_BLOCK_S = 60.0

_SUMMARY = re.compile(r"^=+\s*\nMLPerf Results Summary\s*\n=+", re.M)
_MLLOG = re.compile(r'^:::MLLOG \{"key": "([A-Za-z0-9_.\-]{1,120})"')
_POWER = re.compile(r"^Time,(\d\d-\d\d-\d{4} \d\d:\d\d:\d\d\.\d{1,6}),Watts,")
_PERCENTILE = re.compile(r"^(\d{1,2}\.\d{2}) percentile (latency|first token latency|time to output token) \(ns\)\s*:\s*"
                         r"(\d{1,20})\s*$", re.I)
#: accuracy.txt: the ``hash=<sha256 of the accuracy log>`` line, the scores' Python dict (LLMs, SDXL), and the
#: one-line forms of the other benchmarks (as MLPerf's submission checker reads them).
_ACC_HASH = re.compile(r"^hash=([0-9A-Fa-f]{16,128})\s*$", re.M)
_ACC_DICT = re.compile(r"\{'(?:rouge1|rougeL|exact_match|gsm8k|CLIP_SCORE|FID_SCORE|tokens_per_sample|gen_len)'\s*:")
_ACC_PAIR = re.compile(r"'([A-Za-z_][A-Za-z0-9_]{0,40})':\s+(?:np\.float\d{0,3}\()?'?"
                       r"(-?(?:\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|nan|inf))'?\)?")
_ACC_ONE = (("accuracy", re.compile(r"^accuracy=(\d+(?:\.\d+)?)")),
            ("mAP", re.compile(r"^mAP=(\d+(?:\.\d+)?)")),
            ("AUC", re.compile(r"^AUC=(\d+(?:\.\d+)?)")),
            ("f1", re.compile(r"""^\{["']exact_match["']:\s*[\d.]+,\s*["']f1["']:\s*(\d+(?:\.\d+)?)\}""")),
            ("DICE", re.compile(r"Accuracy:\s*mean\s*=\s*(\d+(?:\.\d+)?)")),
            ("ACCURACY", re.compile(r"Word Error Rate:.*, accuracy=(\d+(?:\.\d+)?)%")),
            ("total", re.compile(r"^accuracy=[\d.]+%?, good=\d+, total=(\d+)")))
#: accuracy.txt's size: a few hundred bytes, some with per-category lines before the scores.
MAX_ACCURACY_LINES = 5000
_KV = re.compile(r"^\s*([A-Za-z][A-Za-z0-9 _().\-]{0,80}?)\s*:\s*(.{0,200}?)\s*$")
#: The summary's keys, as printed, and the field each is read into.
_SUMMARY_KEYS = {
    "sut name": "sut_name", "scenario": "scenario", "mode": "mode",
    "samples per second": "samples_per_s", "tokens per second": "tokens_per_s",
    "completed samples per second": "samples_per_s", "completed tokens per second": "tokens_per_s",
    "scheduled samples per second": "scheduled_samples_per_s", "result is": "result",
    "performance constraints satisfied": "perf_constraints_met", "min duration satisfied": "min_duration_met",
    "min queries satisfied": "min_queries_met", "early stopping satisfied": "early_stopping_met",
    "target_qps": "target_qps", "samples_per_query": "samples_per_query",
    "ttft_latency (ns)": "ttft_limit_ns", "tpot_latency (ns)": "tpot_limit_ns",
    "min_duration (ms)": "min_duration_ms", "min_query_count": "min_query_count",
    "performance_sample_count": "performance_sample_count", "max_async_queries": "max_async_queries",
    "min latency (ns)": "latency_min_ns", "max latency (ns)": "latency_max_ns", "mean latency (ns)": "latency_mean_ns",
    "min first token latency (ns)": "ttft_min_ns", "max first token latency (ns)": "ttft_max_ns",
    "mean first token latency (ns)": "ttft_mean_ns", "min time to output token (ns)": "tpot_min_ns",
    "max time to output token (ns)": "tpot_max_ns", "mean time to output token (ns)": "tpot_mean_ns",
}
_PCT_FIELD = {"latency": "latency", "first token latency": "ttft", "time to output token": "tpot"}
#: The detail log's keys and the field each is read into (percentiles by pattern below).
_DETAIL_KEYS = {
    "loadgen_version": "loadgen_version", "test_datetime": "test_datetime", "sut_name": "sut_name",
    "effective_scenario": "scenario", "effective_test_mode": "mode", "effective_target_qps": "target_qps",
    "effective_samples_per_query": "samples_per_query", "effective_min_duration_ms": "min_duration_ms",
    "effective_min_query_count": "min_query_count", "effective_performance_sample_count": "performance_sample_count",
    "requested_server_ttft_latency": "ttft_limit_ns", "requested_server_tpot_latency": "tpot_limit_ns",
    "generated_query_count": "generated_query_count", "generated_samples_per_query": "generated_samples_per_query",
    "power_begin": "power_begin", "power_end": "power_end", "result_validity": "result",
    "result_perf_constraints_met": "perf_constraints_met", "result_min_duration_met": "min_duration_met",
    "result_min_queries_met": "min_queries_met", "early_stopping_met": "early_stopping_met",
    "early_stopping_ttft_result": "early_stopping_ttft", "early_stopping_tpot_result": "early_stopping_tpot",
    "result_query_count": "query_count", "result_overlatency_query_count": "overlatency_query_count",
    "result_scheduled_samples_per_sec": "scheduled_samples_per_s",
    "result_completed_samples_per_sec": "samples_per_s", "result_samples_per_second": "samples_per_s",
    "result_completed_tokens_per_second": "tokens_per_s", "result_tokens_per_second": "tokens_per_s",
    "result_token_throughput": "token_throughput_odd",
    "result_token_throughput_with_loadgen_overhead": "token_throughput_with_overhead",
    "result_min_latency_ns": "latency_min_ns", "result_max_latency_ns": "latency_max_ns",
    "result_mean_latency_ns": "latency_mean_ns",
}
_DETAIL_PCT = re.compile(r"^result_(?:(first_token)_|(time_per_output_token)_)?(\d{1,2}\.\d{2})_percentile"
                         r"(?:_latency)?_ns$")
#: The systems JSON keys kept (the submitter's declaration).
SYSTEM_KEYS = ("system_name", "submitter", "division", "status", "system_type", "number_of_nodes",
               "accelerator_model_name", "accelerators_per_node", "accelerator_memory_capacity",
               "accelerator_memory_configuration", "accelerator_host_interconnect", "accelerator_interconnect",
               "accelerator_interconnect_topology",
               "host_processor_model_name", "host_processors_per_node", "host_processor_core_count",
               "host_memory_capacity", "operating_system", "framework", "other_software_stack", "cooling",
               "hw_notes", "sw_notes", "power_supply_quantity_and_rating_watts", "power_supply_details")


def _yes(v: str) -> Optional[bool]:
    low = v.strip().lower()
    return True if low in ("yes", "true") else False if low in ("no", "false") else None


def _num(v: Any) -> Optional[float]:
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v)
    try:
        return float(str(v).strip())
    except ValueError:
        return None


def _note_odd(run: Dict[str, Any]) -> None:
    """LoadGen figures that read oddly: kept as printed, named, not used."""
    odd = run.setdefault("odd", [])
    q, over = run.get("query_count"), run.get("overlatency_query_count")
    if q and over is not None and over == q and str(run.get("scenario")).lower() == "server":
        odd.append(f"result_overlatency_query_count {int(over)} = every query: an LLM Server run's "
                   "target_latency_ns is 0 (its TTFT and TPOT limits are the constraints); not a failure, not used")
    tt = run.get("token_throughput_odd")
    if tt is not None and tt < 1e-3:
        odd.append(f"result_token_throughput {tt:g} is not tokens per second (LoadGen prints it in another unit); "
                   "result_completed_tokens_per_second is the token rate used")


def parse_summary(text: str) -> Dict[str, Any]:
    """A LoadGen ``mlperf_log_summary.txt``: {"run": {...fields, "lines": {field: line}}}."""
    lines = text_lines(text, "MLPerf LoadGen summary", 5000, MAX_LINE)
    run: Dict[str, Any] = {"source": "summary", "lines": {}, "latency": {}, "ttft": {}, "tpot": {}, "errors": None,
                           "warnings": None}
    for n, raw in enumerate(lines, 1):
        line = raw.rstrip()
        m = _PERCENTILE.match(line.strip())
        if m:
            field = _PCT_FIELD[m.group(2).lower()]
            run[field][m.group(1)] = int(m.group(3))
            run["lines"].setdefault(f"{field} {m.group(1)}", n)
            continue
        low = line.strip().lower()
        if low.startswith("no errors encountered"):
            run["errors"], run["lines"]["errors"] = 0, n
            continue
        if low.startswith("no warnings encountered"):
            run["warnings"], run["lines"]["warnings"] = 0, n
            continue
        e = re.match(r"^(\d{1,9}) errors? encountered", low)
        if e:
            run["errors"], run["lines"]["errors"] = int(e.group(1)), n
            continue
        w = re.match(r"^(\d{1,9}) warnings? encountered", low)
        if w:
            run["warnings"], run["lines"]["warnings"] = int(w.group(1)), n
            continue
        kv = _KV.match(line)
        if not kv:
            continue
        key, value = kv.group(1).strip().lower(), kv.group(2).strip()
        found = _SUMMARY_KEYS.get(key)
        if found is None:
            continue
        field = found
        if field in run:
            continue  # the first reading is kept ("Completed tokens per second" appears in results and stats)
        if field in ("sut_name", "scenario", "mode"):
            run[field] = value
        elif field == "result":
            run[field] = value.upper()
        elif field.endswith("_met"):
            run[field] = _yes(value)
        else:
            run[field] = _num(value)
        run["lines"][field] = n
    if not _SUMMARY.search(text) or not run.get("scenario") or not run.get("result"):
        raise TextEvidenceError("line 1: no `MLPerf Results Summary` header with its `Scenario :` and `Result is :` "
                                "lines; fix: submit LoadGen's mlperf_log_summary.txt as written")
    for which in ("TTFT", "TPOT"):
        em = re.search(rf"^{which} Early Stopping Result:\s*\n\s*(.{{0,200}})$", text, re.M)
        if em:
            run[f"early_stopping_{which.lower()}"] = em.group(1).strip()
    _note_odd(run)
    return {"run": run, "cuts": []}


def parse_detail(text: str) -> Dict[str, Any]:
    """A LoadGen ``mlperf_log_detail.txt`` (``:::MLLOG`` JSON lines): {"run": {...}}.  Only the keys read here
    are decoded; every line's error and warning flags are counted."""
    lines = text_lines(text, "MLPerf LoadGen detail log", MAX_DETAIL_LINES, MAX_DETAIL_LINE)
    run: Dict[str, Any] = {"source": "detail", "lines": {}, "latency": {}, "ttft": {}, "tpot": {}, "errors": 0,
                           "warnings": 0, "error_lines": []}
    seen = 0
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        m = _MLLOG.match(line)
        if not m:
            raise TextEvidenceError(f"line {n}: {line[:60]!r} is not a `:::MLLOG {{...}}` line; fix: submit LoadGen's "
                                    "mlperf_log_detail.txt as written")
        seen += 1
        key = m.group(1)
        tail = line[-400:]
        if '"is_error": true' in tail:
            run["errors"] += 1
            run["error_lines"].append(n)
        if '"is_warning": true' in tail:
            run["warnings"] += 1
        pct = _DETAIL_PCT.match(key)
        field = _DETAIL_KEYS.get(key)
        if field is None and pct is None:
            continue
        try:
            value = json.loads(line[len(":::MLLOG "):]).get("value")
        except (ValueError, RecursionError, AttributeError):
            raise TextEvidenceError(f"line {n}: the `{key}` record is not JSON; fix: submit the log as LoadGen "
                                    "wrote it") from None
        if pct is not None:
            which = "ttft" if pct.group(1) else "tpot" if pct.group(2) else "latency"
            if _num(value) is not None:
                run[which][pct.group(3)] = int(float(value))
                run["lines"].setdefault(f"{which} {pct.group(3)}", n)
            continue
        assert field is not None
        if field in run and field not in ("errors", "warnings"):
            continue
        if field in ("loadgen_version", "test_datetime", "sut_name", "scenario", "mode", "power_begin",
                     "power_end", "early_stopping_ttft", "early_stopping_tpot"):
            run[field] = str(value).strip()[:200]
        elif field == "result":
            run[field] = str(value).upper()[:40]
        elif field.endswith("_met"):
            run[field] = value if isinstance(value, bool) else _yes(str(value))
        else:
            run[field] = _num(value)
        run["lines"][field] = n
    if not seen or not run.get("scenario"):
        raise TextEvidenceError("line 1: no `effective_scenario` record: not a LoadGen detail log, or cut before "
                                "its settings; fix: submit mlperf_log_detail.txt whole")
    _note_odd(run)
    return {"run": run, "cuts": []}


def parse_system(text: str) -> Dict[str, Any]:
    """A submission's ``systems/<system>.json``: the submitter's declaration of the system."""
    if len(text) > 1 << 20:
        raise TextEvidenceError("over 1 MiB for an MLPerf system description; fix: submit systems/<system>.json")
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        line = getattr(exc, "lineno", 1)
        raise TextEvidenceError(f"line {line}: not JSON ({exc}); fix: submit systems/<system>.json as "
                                "published") from None
    if not isinstance(data, dict) or "system_name" not in data:
        raise TextEvidenceError("line 1: no `system_name`: not an MLPerf system description")
    out: Dict[str, Any] = {}
    lines = text.splitlines()
    for key in SYSTEM_KEYS:
        v = data.get(key)
        if isinstance(v, (str, int, float)) and not isinstance(v, bool):
            out[key] = v.strip()[:300] if isinstance(v, str) else v
            ln = next((i for i, t in enumerate(lines, 1) if f'"{key}"' in t), None)
            out.setdefault("lines", {})[key] = ln
    count = data.get("accelerators_per_node")
    out["accelerators_per_node_n"] = int(count) if isinstance(count, int) and not isinstance(count, bool) else (
        int(count.strip()) if isinstance(count, str) and count.strip().isdigit() else None)
    out["accelerators_per_node_is_text"] = isinstance(count, str)
    mem = re.search(r"(\d+(?:\.\d+)?)\s*(GB|GiB|G|TB)\b", str(out.get("accelerator_memory_capacity") or ""), re.I)
    if mem:
        scale = 1000.0 if mem.group(2).upper() == "TB" else 1.0
        out["memory_declared"] = {"gb": float(mem.group(1)) * scale, "unit": mem.group(2),
                                  "text": out["accelerator_memory_capacity"], "key": "accelerator_memory_capacity"}
    for key in ("other_software_stack", "sw_notes", "framework", "hw_notes"):
        text = str(out.get(key) or "")
        drv = _DECLARED_DRIVER.search(text)
        if drv and "driver_declared" not in out:
            out["driver_declared"] = {"version": drv.group(1), "key": key, "text": drv.group(0).strip()}
        cuda = _DECLARED_CUDA.search(text)
        if cuda and "cuda_declared" not in out:
            out["cuda_declared"] = {"version": cuda.group(1), "key": key, "text": cuda.group(0).strip()}
    return {"system": out, "cuts": []}


#: A driver and a CUDA version as submitters write them in a systems JSON ("TensorRT 10.8, CUDA 12.9, cuDNN 8.9.7,
#: Driver 575.57"): the CUDA named there is the toolkit the run was built with.
_DECLARED_DRIVER = re.compile(r"\b(?:NVIDIA\s+)?driver(?:\s+version)?\s*[:=]?\s*v?(\d{3,4}(?:\.\d{1,3}){1,2})\b", re.I)
_DECLARED_CUDA = re.compile(r"\bCUDA(?:\s+(?:toolkit|version))?\s*[:=]?\s*v?(\d{1,2}\.\d{1,2})\b", re.I)


def parse_accuracy(text: str) -> Dict[str, Any]:
    """MLPerf's ``accuracy.txt`` (the accuracy script's output, then ``hash=``): {"accuracy": {"metrics": {name:
    {"value", "line"}}, "hash_line"}}.  The scores are read as MLPerf's submission checker reads them: each metric
    from the first line that gives it (the Python dict of an LLM's scores, or a benchmark's one-line form)."""
    lines = text_lines(text, "MLPerf accuracy.txt", MAX_ACCURACY_LINES, MAX_LINE)
    metrics: Dict[str, Dict[str, Any]] = {}
    hash_line = None

    def add(key: str, value: str, n: int) -> None:
        v = float(value)
        if not math.isfinite(v):
            raise TextEvidenceError(f"line {n}: {key} {value[:30]} is not a finite score; fix: submit accuracy.txt as "
                                    "its accuracy script wrote it")
        if key in metrics:  # every line that gives a score is held to the target (as MLPerf's checker holds them)
            metrics[key]["others"].append({"value": v, "line": n})
        else:
            metrics[key] = {"value": v, "line": n, "others": []}
    for n, raw in enumerate(lines, 1):
        line = raw.strip()
        if _ACC_HASH.match(line):
            hash_line = hash_line or n
            continue
        at = line.find("{'")
        if at >= 0:  # the Python dict of the scores, alone or after a prefix ("Accuracy Results: {...}")
            for key, value in _ACC_PAIR.findall(line[at:]):
                add(key, value, n)
            continue
        for key, rx in _ACC_ONE:
            m = rx.search(line)
            if m:
                add(key, m.group(1), n)
    if not metrics:
        raise TextEvidenceError("line 1: no score (`{'rouge1': ...}`, `accuracy=`, `mAP=`, ...) in the text; fix: "
                                "submit the accuracy run's accuracy.txt as its accuracy script wrote it")
    return {"accuracy": {"metrics": metrics, "hash_line": hash_line, "lines": len(lines)}, "cuts": []}


def _ts(text: str) -> datetime:
    return datetime.strptime(text.strip(), "%m-%d-%Y %H:%M:%S.%f")


def parse_power(text: str) -> Dict[str, Any]:
    """PTDaemon's ``spl.txt``: one line per second, ``Time,<MM-DD-YYYY HH:MM:SS.mmm>,Watts,<W>,...,Mark,<mark>``,
    then per-channel blocks.  {"samples": [[seconds since the first, watts]], "start", "mark", "channels_max"}."""
    lines = text_lines(text, "PTDaemon power log", MAX_POWER_LINES, MAX_LINE)
    samples: List[List[float]] = []
    start: Optional[datetime] = None
    mark = None
    channels: Dict[str, float] = {}
    first = last = None
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        parts = line.split(",")
        if len(parts) < 4 or parts[0] != "Time" or parts[2] != "Watts":
            raise TextEvidenceError(f"line {n}: {line[:60]!r} is not a `Time,<date time>,Watts,<W>,...` sample; fix: "
                                    "submit PTDaemon's spl.txt as written")
        try:
            t = _ts(parts[1])
            w = float(parts[3])
        except ValueError:
            raise TextEvidenceError(f"line {n}: time {parts[1][:30]!r} or watts {parts[3][:20]!r} cannot be read; "
                                    "fix: submit PTDaemon's spl.txt as written") from None
        if start is None:
            start, first = t, parts[1]
        last = parts[1]
        if "Mark" in parts:
            i = parts.index("Mark")
            mark = parts[i + 1][:120] if i + 1 < len(parts) else None
        for i, p in enumerate(parts):
            if p.startswith("Ch") and i + 2 < len(parts) and parts[i + 1] == "Watts":
                cw = _num(parts[i + 2])
                if cw is not None:
                    channels[p] = max(channels.get(p, cw), cw)
        samples.append([round((t - start).total_seconds(), 3), w])
    if not samples:
        raise TextEvidenceError("line 1: no `Time,...,Watts,...` sample; not a PTDaemon power log")
    return {"samples": samples, "start": first, "end": last, "mark": mark, "channels_max": channels, "cuts": []}


def power_stats(samples: List[List[float]], lo: Optional[float] = None, hi: Optional[float] = None) -> Dict[str, Any]:
    """Mean, max, min and the count of the samples within [lo, hi] seconds (all when None), with the means of
    :data:`POWER_BLOCK_S` blocks (for the mean's interval)."""
    inside = [(t, w) for t, w in samples if (lo is None or t >= lo) and (hi is None or t <= hi)]
    # PTDaemon writes -1 (or 0) for a reading that failed: dropped, counted (as MLPerf's checker drops them)
    sel = [(t, w) for t, w in inside if w > 0]
    dropped = len(inside) - len(sel)
    window = round(hi - lo, 3) if lo is not None and hi is not None else None
    if not sel:
        return {"n": 0, "dropped": dropped, "window_s": window}
    ws = [w for _, w in sel]
    blocks: Dict[int, List[float]] = {}
    for t, w in sel:
        blocks.setdefault(int((t - sel[0][0]) // POWER_BLOCK_S), []).append(w)
    full = [sum(b) / len(b) for b in blocks.values() if len(b) >= POWER_BLOCK_S * 0.9]
    return {"n": len(ws), "mean_w": round(sum(ws) / len(ws), 3), "max_w": max(ws), "min_w": min(ws),
            "span_s": round(sel[-1][0] - sel[0][0], 3), "block_s": POWER_BLOCK_S, "dropped": dropped,
            "window_s": window, "block_means_w": [round(b, 3) for b in full]}


class MLPerf(Reader):
    kinds = {"mlperf-summary": "MLPerf LoadGen summary (mlperf_log_summary.txt)",
             "mlperf-detail": "MLPerf LoadGen detail log (mlperf_log_detail.txt)",
             "mlperf-system": "MLPerf system description (systems/<system>.json)",
             "mlperf-power": "MLPerf power log (PTDaemon spl.txt)",
             "mlperf-accuracy": "MLPerf accuracy scores (accuracy.txt)"}
    steps = (MLPERF_STEP,)
    order = 7  # its banners are its own: tried before the device tools
    option = "--mlperf"
    option_help = ("an MLPerf Inference file: LoadGen's mlperf_log_summary.txt or mlperf_log_detail.txt, a "
                   "systems/<system>.json, PTDaemon's spl.txt, or an accuracy run's accuracy.txt (the kind is told "
                   "from the content)")

    def detect_document(self, head: str) -> Optional[Detection]:
        s = head.lstrip()
        if s.startswith("{") and re.search(r'^\s*"system_name"\s*:', s, re.M) and \
                re.search(r'^\s*"accelerators_per_node"\s*:', s, re.M):
            return "mlperf-system", "a JSON object with `system_name` and `accelerators_per_node` (systems/*.json)"
        return None

    def detect(self, head: str) -> Optional[Detection]:
        if _SUMMARY.search(head[:4096]):
            return "mlperf-summary", "the `MLPerf Results Summary` banner"
        if head.lstrip().startswith(":::MLLOG {"):
            return "mlperf-detail", "`:::MLLOG {...}` JSON lines"
        if _POWER.match(head.lstrip()):
            return "mlperf-power", "`Time,<date time>,Watts,...` samples (PTDaemon)"
        if _ACC_DICT.search(head[:65536]):
            return "mlperf-accuracy", "a `{'rouge1': ...}` line of scores (accuracy.txt)"
        if _ACC_HASH.search(head[:65536]) and any(rx.search(ln) for ln in head[:65536].splitlines()
                                                  for _, rx in _ACC_ONE):
            return "mlperf-accuracy", "a score line and a `hash=` line (accuracy.txt)"
        return None

    def parse(self, kind: str, text: str, known_ids: Iterable[str] = ()) -> Dict[str, Any]:
        if kind == "mlperf-summary":
            return parse_summary(text)
        if kind == "mlperf-detail":
            return parse_detail(text)
        if kind == "mlperf-system":
            return parse_system(text)
        if kind == "mlperf-accuracy":
            return parse_accuracy(text)
        return parse_power(text)

    def merge(self, machine: Machine, entry: Entry, step: int) -> None:
        mine = machine.scratch.setdefault("mlperf", {"runs": [], "systems": [], "power": [], "accuracy": []})
        folder = str(PurePosixPath(entry["name"]).parent)
        facts = entry["facts"]
        if entry["kind"] == "mlperf-accuracy":
            mine["accuracy"].append(dict(facts["accuracy"], file=entry["name"], folder=folder))
        elif entry["kind"] == "mlperf-system":
            mine["systems"].append(dict(facts["system"], file=entry["name"]))
        elif entry["kind"] == "mlperf-power":
            mine["power"].append(dict(facts, file=entry["name"], folder=folder))
        else:
            mine["runs"].append(dict(facts["run"], file=entry["name"], folder=folder))

    def finish(self, machine: Machine, step: int) -> None:
        mine = machine.scratch.get("mlperf")
        if not mine:
            return
        runs = _combine(mine["runs"], machine)
        power = []
        for p in mine["power"]:
            rec = {"file": p["file"], "start": p["start"], "end": p["end"], "mark": p["mark"],
                   "channels_max_w": p["channels_max"], "whole": power_stats(p["samples"]), "window": None,
                   "run": None}
            mates = [r for r in runs if r["folder"] == p["folder"] and r.get("power_begin") and r.get("power_end")]
            if len(mates) == 1:
                r = mates[0]
                lo: Optional[float] = None
                hi: Optional[float] = None
                try:
                    t0 = _ts(p["start"])
                    lo, hi = (_ts(r["power_begin"]) - t0).total_seconds(), (_ts(r["power_end"]) - t0).total_seconds()
                except ValueError:
                    machine.notes.append(f"{p['file']}: the run's power window cannot be read as times")
                if lo is not None and hi is not None:
                    rec["window"] = dict(power_stats(p["samples"], lo, hi), begin=r["power_begin"],
                                         end=r["power_end"], source=f"power_begin / power_end of {r['detail_file']}")
                    rec["run"] = r["id"]
                    r["power"] = {"file": p["file"], **rec["window"]}
            elif len(mates) > 1:
                machine.notes.append(f"{p['file']}: several runs with a power window in its folder; the power log "
                                     "is not matched to a run (one run per folder)")
            power.append(rec)
        machine.scratch["mlperf_out"] = {"runs": runs, "systems": mine["systems"], "power": power,
                                         "accuracy": mine["accuracy"]}
        owners = sorted({o for o in (_owner(f["file"]) for f in mine["runs"] + mine["systems"] + mine["accuracy"])
                         if o})
        if len(owners) > 1:
            machine.notes.append(
                f"the files hold the submissions of {len(owners)} systems ({', '.join(owners[:6])}"
                f"{', ...' if len(owners) > 6 else ''}): each verdict names its run's folder, but a report is about one "
                "machine; audit one system's folder (<division>/<organisation>/results/<system>) to certify it")


def _owner(path: str) -> Optional[str]:
    """``<organisation>/<system>`` of a file in a submission tree (``<division>/<org>/results/<system>/...`` or
    ``<division>/<org>/systems/<system>.json``), or None outside one."""
    parts = PurePosixPath(path).parts
    for i, part in enumerate(parts[:-1]):
        if part in ("results", "systems") and i >= 1:
            system = parts[i + 1]
            if part == "systems":
                system = system[:-5] if system.endswith(".json") else system
            return f"{parts[i - 1]}/{system}"
    return None


def _combine(items: List[Dict[str, Any]], machine: Machine) -> List[Dict[str, Any]]:
    """A summary and a detail log of one run (one folder, one scenario) as one run."""
    groups: Dict[Tuple[str, str], List[Dict[str, Any]]] = {}
    for it in items:
        groups.setdefault((it["folder"], str(it.get("scenario")).lower()), []).append(it)
    runs: List[Dict[str, Any]] = []
    for (folder, scenario), its in groups.items():
        summaries = [i for i in its if i["source"] == "summary"]
        details = [i for i in its if i["source"] == "detail"]
        if len(summaries) > 1 or len(details) > 1:
            for i in its:
                runs.append(_one(i, None, len(runs)))
            machine.notes.append(f"{folder}: several {scenario} runs in one folder: each file is its own run")
            continue
        s = summaries[0] if summaries else None
        d = details[0] if details else None
        first = s if s is not None else d
        assert first is not None  # a group holds at least one file
        runs.append(_one(first, d if s is not None else None, len(runs), machine))
    return runs


def _one(a: Dict[str, Any], d: Optional[Dict[str, Any]], index: int, machine: Optional[Machine] = None
         ) -> Dict[str, Any]:
    """A run from its summary ``a`` (or detail log), with the detail log ``d`` filling what it lacks."""
    run = {k: v for k, v in a.items() if k not in ("source",)}
    run["id"] = f"run{index + 1}"
    run["summary_file"] = a["file"] if a["source"] == "summary" else None
    run["detail_file"] = a["file"] if a["source"] == "detail" else (d["file"] if d else None)
    a_what = "summary" if a["source"] == "summary" else "detail log"
    run["lines"] = {k: f"{a_what} line {v}" for k, v in (a.get("lines") or {}).items()}
    if d is not None:
        conflicts = []
        for k in ("scenario", "sut_name", "result", "early_stopping_met", "min_duration_met", "samples_per_s",
                  "target_qps"):
            a_v, d_v = a.get(k), d.get(k)
            if a_v is None or d_v is None:
                continue
            same = (abs(float(a_v) - float(d_v)) <= 0.01 * abs(float(a_v)) if isinstance(a_v, (int, float))
                    and not isinstance(a_v, bool) and isinstance(d_v, (int, float)) else
                    str(a_v).lower() == str(d_v).lower())
            if not same:
                conflicts.append(f"{k}: {a_v!r} in {a['file']}, {d_v!r} in {d['file']}")
        if conflicts:
            run["conflicts"] = conflicts
            if machine is not None:
                machine.notes.append(f"{a['file']} and {d['file']} are not one run's: " + "; ".join(conflicts))
        for k, v in d.items():
            if k in ("source", "file", "folder", "lines", "odd"):
                continue
            if isinstance(v, dict):
                merged = dict(v)
                merged.update(run.get(k) or {})
                run[k] = merged
            elif run.get(k) is None:
                run[k] = v
            elif k in ("samples_per_s", "tokens_per_s") and v and run[k] and abs(v - run[k]) > 0.01 * abs(run[k]) \
                    and machine is not None:
                machine.notes.append(f"{a['file']} and {d['file']} disagree on {k} ({run[k]:g} and {v:g}): the "
                                     "summary's figure is used")
        for k, v in (d.get("lines") or {}).items():
            run["lines"].setdefault(k, f"detail log line {v}")
        run["odd"] = sorted(set((a.get("odd") or []) + (d.get("odd") or [])))
        if a.get("errors") is not None and d.get("errors"):
            run["errors"] = max(a["errors"], d["errors"])
    why = _count_rate_mismatch(run)
    if why:
        run["inconsistent"] = [why]
        if machine is not None:
            machine.notes.append(f"{run['summary_file'] or run['detail_file']}: {why}")
    return run


def _count_rate_mismatch(run: Dict[str, Any]) -> Optional[str]:
    """A Server run's completed queries over its completed rate is the time it ran: shorter than the minimum duration
    it says it met, the count and the rate are not one run's (a figure edited, or two runs' lines mixed)."""
    q, rate, mind = run.get("query_count"), run.get("samples_per_s"), run.get("min_duration_ms")
    if str(run.get("scenario")).lower() != "server" or run.get("min_duration_met") is not True:
        return None
    if not q or not rate or not mind or rate <= 0:
        return None
    ran = float(q) / float(rate)
    if ran < 0.99 * float(mind) / 1e3:
        return (f"{int(q)} queries at {float(rate):g} completed per second is {ran:.4g} s of running, shorter than the "
                f"{float(mind) / 1e3:g} s minimum duration the run says it met: the query count and the rate are not "
                "one run's")
    return None


READER = MLPerf()
