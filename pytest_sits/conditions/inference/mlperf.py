"""The evidence an MLPerf Inference submission gives the inference requirements (read by
:mod:`pytest_sits.probes.readers.mlperf` into ``inventory["submitted"]["mlperf"]``).

* SVC-SLA and PLP-LATENCY: each Server run (its latency, TTFT and TPOT percentiles, completed samples per second,
  LoadGen's validity, early stopping and error count);
* PLP-PPL: each Server run with the same system's Offline run of the same benchmark (its maximum);
* PLP-POWER: each Server run with the power log of its folder over the run's window, or a power log alone;
* EQ-PRECISION: each accuracy run's ``accuracy.txt`` with its benchmark's accuracy targets
  (:func:`accuracy_evidence`).

A Server run and an Offline run are of one system and benchmark when they sit in one submission tree under the
same ``<system>/<benchmark>`` folders (``.../<benchmark>/Server/performance/run_1`` and ``.../Offline/...``), or
side by side in one folder.  A compliance audit's runs (``compliance/``, ``TEST01``...) and accuracy runs are not the
result and are never judged.  Every evidence dict is self-contained (replay judges it again without the files).
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Any, Dict, List, Optional, Tuple

from ...catalogue.mlperf import DATASET, PLAUSIBLE_RATIO, SCENARIOS, TARGETS, benchmark_in

#: The run fields a verdict's evidence carries.
RUN_FIELDS = ("id", "scenario", "mode", "sut_name", "result", "perf_constraints_met", "min_duration_met",
              "min_queries_met", "early_stopping_met", "early_stopping_ttft", "early_stopping_tpot", "samples_per_s",
              "tokens_per_s", "scheduled_samples_per_s", "target_qps", "samples_per_query", "query_count",
              "min_duration_ms", "min_query_count", "ttft_limit_ns", "tpot_limit_ns", "latency", "ttft", "tpot",
              "errors", "warnings", "loadgen_version", "test_datetime", "power_begin", "power_end", "summary_file",
              "detail_file", "lines", "odd", "conflicts", "inconsistent")
REQUIREMENTS = ("SVC-SLA", "PLP-LATENCY", "PLP-PPL", "PLP-POWER")


def submitted(inventory: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """The MLPerf files of a submission (None where there are none)."""
    m = (inventory.get("submitted") or {}).get("mlperf")
    return m if m and (m.get("runs") or m.get("power")) else None


def _bench_key(run: Dict[str, Any]) -> str:
    """The folder a run's benchmark is under: the parent of its scenario folder in a submission tree, else the
    run's own folder."""
    name = run.get("summary_file") or run.get("detail_file") or ""
    parts = PurePosixPath(name).parent.parts
    scen = str(run.get("scenario") or "").lower()
    for i in range(len(parts) - 1, -1, -1):
        if parts[i].lower() == scen:
            return "/".join(parts[:i]) or "."
    return "/".join(parts) or "."


def _subset(run: Dict[str, Any]) -> Dict[str, Any]:
    return {k: run.get(k) for k in RUN_FIELDS}


def _subject(run: Dict[str, Any]) -> str:
    """The run as a verdict names it: its folder (a submission's ``.../Server/performance/run_1``), or its file
    where it came alone."""
    name = str(run.get("summary_file") or run.get("detail_file"))
    folder = str(PurePosixPath(name).parent)
    return f"MLPerf {run.get('scenario')} {folder if folder not in ('.', '') and '/' in name else name}"


def compliance_run(run: Dict[str, Any]) -> bool:
    """A run of a submission's compliance audits (``compliance/.../TEST01``, ``TEST04``, ``TEST06``...) or a power
    submission's ``ranging`` run (it sets the analyser's range): not the result; never judged here."""
    name = str(run.get("summary_file") or run.get("detail_file") or "")
    parts = PurePosixPath(name).parts
    return "compliance" in parts or "ranging" in parts or any(re.fullmatch(r"TEST\d{2}", p) for p in parts)


def _result_runs(m: Dict[str, Any], scenario: str) -> List[Dict[str, Any]]:
    return [r for r in m.get("runs") or [] if str(r.get("scenario")).lower() == scenario
            and str(r.get("mode") or "PerformanceOnly").lower() == "performanceonly" and not compliance_run(r)]


def _server_runs(m: Dict[str, Any]) -> List[Dict[str, Any]]:
    return _result_runs(m, "server")


def _offline_of(m: Dict[str, Any], run: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    key = _bench_key(run)
    offline = [r for r in _result_runs(m, "offline") if _bench_key(r) == key and r.get("tokens_per_s")]
    return _subset(offline[0]) if len(offline) == 1 else None


def _systems(m: Dict[str, Any]) -> List[Dict[str, Any]]:
    return [{k: s.get(k) for k in ("file", "system_name", "accelerator_model_name", "accelerators_per_node_n",
                                   "hw_notes")} for s in m.get("systems") or []]


def _not_this_machine(inventory: Dict[str, Any]) -> Optional[str]:
    """Why the submission's runs are not judged as the machine's: its systems JSON declares another model or count
    than the readings among the texts show; None where they agree or there is nothing to compare."""
    from ..inventory import declaration_contradicts

    other = declaration_contradicts(inventory)
    return (f"{other}: the submission's runs are of another system than the machine the readings show; submit "
            "one machine's texts per folder") if other else None


def evidence(inventory: Dict[str, Any], req: str) -> List[Tuple[str, Dict[str, Any]]]:
    """(subject, evidence) for each run ``req`` is judged on; one ``unavailable`` entry where none is."""
    m = submitted(inventory)
    if m is None:
        return []
    other = _not_this_machine(inventory)
    if other:
        return [("MLPerf", {"unavailable": other})]
    runs = _server_runs(m)
    scen = sorted({str(r.get("scenario")) for r in m.get("runs") or []})
    none = (f"the MLPerf files hold no Server run in performance mode (scenarios: {', '.join(scen) or 'none'}): "
            f"{req} is judged on a Server run's latency under its load")
    out: List[Tuple[str, Dict[str, Any]]] = []
    if req == "PLP-POWER":
        matched = set()
        for r in runs:
            pw = r.get("power")
            if not pw:
                out.append((_subject(r), {"unavailable": "no PTDaemon power log (spl.txt) in the run's folder: "
                                                         "LoadGen's performance run records no power"}))
                continue
            matched.add(pw["file"])
            out.append((_subject(r), {"source": "mlperf", "run": _subset(r), "offline": _offline_of(m, r),
                                      "power": pw, "systems": _systems(m)}))
        for p in m.get("power") or []:
            if p["file"] not in matched and not compliance_run({"summary_file": p["file"]}):
                out.append((f"MLPerf power log {p['file']}", {"source": "mlperf", "run": None, "offline": None,
                                                              "power_log": p, "systems": _systems(m)}))
        return out or [("MLPerf", {"unavailable": none})]
    for r in runs:
        ev: Dict[str, Any] = {"source": "mlperf", "run": _subset(r), "systems": _systems(m)}
        if req in ("PLP-PPL", "PLP-LATENCY"):
            ev["offline"] = _offline_of(m, r)
        out.append((_subject(r), ev))
    return out or [("MLPerf", {"unavailable": none})]


def _scenario_in(path: str) -> Optional[str]:
    parts = PurePosixPath(path).parts
    for part in reversed(parts[:-1]):
        if part in SCENARIOS:
            return part
    low = parts[-1].lower() if parts else ""
    return next((s for s in SCENARIOS if re.search(rf"(?<![a-z]){s.lower()}(?![a-z])", low)), None)


def _division(path: str) -> Optional[str]:
    """The MLPerf division a submission tree's file is in (``closed``, ``open``, ``network``), or None."""
    parts = PurePosixPath(path).parts
    return next((p for p in parts if p in ("closed", "open", "network")), None)


def accuracy_evidence(inventory: Dict[str, Any]) -> Optional[List[Tuple[str, Dict[str, Any]]]]:
    """(subject, evidence) for each accuracy run's ``accuracy.txt`` among the submitted files (a compliance
    audit's, ``TEST06/accuracy``, is not the result and is not judged); None where there is none.  The evidence
    carries the benchmark's targets (:data:`pytest_sits.catalogue.mlperf.TARGETS`), so that replay judges it on
    the targets it was judged on."""
    m = (inventory.get("submitted") or {}).get("mlperf") or {}
    files = [a for a in m.get("accuracy") or [] if not compliance_run({"summary_file": a["file"]})]
    if not files:
        return None
    other = _not_this_machine(inventory)
    if other:
        return [("MLPerf accuracy", {"unavailable": other})]
    out = []
    folders = [str(PurePosixPath(a["file"]).parent) for a in files]
    for a in files:
        bench, named_by = benchmark_in(a["file"])
        folder = str(PurePosixPath(a["file"]).parent)
        if folders.count(folder) > 1:
            folder = a["file"]
        ev = {"source": "mlperf-accuracy", "file": a["file"], "benchmark": bench, "benchmark_named_by": named_by,
              "scenario": _scenario_in(a["file"]), "metrics": a["metrics"], "hash_line": a.get("hash_line"),
              "targets": [dict(t) for t in TARGETS.get(bench or "", [])], "dataset_samples": DATASET.get(bench or ""),
              "plausible_ratio": PLAUSIBLE_RATIO, "division": _division(a["file"]),
              "targets_source": "MLPerf Inference's accuracy targets (rules and submission checker, v5.0-v6.0)"}
        out.append((f"MLPerf accuracy {folder if folder not in ('.', '') else a['file']}", ev))
    return out
