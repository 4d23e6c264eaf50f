"""Prometheus metrics of a report or a fleet report, as a textfile for node_exporter's textfile collector.

The text is produced with ``prometheus_client`` (an optional dependency: ``pip install
'pytest-sits[prometheus]'``), in the Prometheus text exposition format 0.0.4 that the textfile collector
reads; the caller writes it through the safe writer (whole file replaced at once, never written through a
link).  Names follow Prometheus' conventions: a ``sits_`` prefix, base units in the name (``_seconds``,
``_bytes``, ``_bytes_per_second``, ``_watts``, ``_celsius``, ``_ratio``), labels for what varies
(``requirement``, ``subject``, ``status``), no timestamps (the collector refuses them: the run's time is
the value of ``sits_run_finished_timestamp_seconds``).

Metrics of one run (:func:`report_text`):

* ``sits_verdict_status{requirement,subject,status}`` 1 per verdict (alert on ``status="FAIL"``);
* ``sits_verdict_measured_<unit>{requirement,subject}`` the measured value in base units, where the verdict
  has a numeric one (``sits_verdict_measured`` with no suffix when the check states no unit or a count);
* ``sits_verdicts{status}`` verdicts per status; ``sits_run_result{result}`` 1;
  ``sits_run_info{profile,platform,level,suite_version,hostname}`` 1; ``sits_run_completed`` 0/1;
  ``sits_run_simulated`` 0/1; ``sits_run_duration_seconds``; ``sits_run_finished_timestamp_seconds``.

Metrics of a fleet (:func:`fleet_text`): ``sits_fleet_result{result}``, ``sits_fleet_nodes{result}``,
``sits_fleet_node_result{node,result}``, ``sits_fleet_requirement_pass_ratio{requirement}``,
``sits_fleet_outliers``, ``sits_fleet_info{suite_version}``, ``sits_fleet_created_timestamp_seconds``.
"""

from __future__ import annotations

import calendar
import re
import time
from typing import Any, Dict, Iterable, List, Optional, Tuple

INSTALL = "pip install 'pytest-sits[prometheus]'  (or: pip install prometheus-client)"

#: Report units -> (metric suffix, factor to the base unit).  A unit not listed (a count: errors, events, ports;
#: or none stated) goes to the suffix-less ``sits_verdict_measured``.
UNITS: Dict[str, Tuple[str, float]] = {
    "s": ("seconds", 1.0), "ms": ("seconds", 1e-3), "µs": ("seconds", 1e-6), "us": ("seconds", 1e-6),
    "ns": ("seconds", 1e-9),
    "B": ("bytes", 1.0), "KiB": ("bytes", 1024.0), "MiB": ("bytes", 1024.0 ** 2), "GiB": ("bytes", 1024.0 ** 3),
    "kB": ("bytes", 1e3), "MB": ("bytes", 1e6), "GB": ("bytes", 1e9), "TB": ("bytes", 1e12),
    "GB/s": ("bytes_per_second", 1e9), "MB/s": ("bytes_per_second", 1e6), "TB/s": ("bytes_per_second", 1e12),
    "W": ("watts", 1.0), "mW": ("watts", 1e-3), "°C": ("celsius", 1.0), "C": ("celsius", 1.0),
    "TFLOPS": ("flops", 1e12), "GFLOPS": ("flops", 1e9),
    "%": ("ratio", 0.01), "share of samples": ("ratio", 1.0), "of datasheet": ("ratio", 1.0),
    "of link": ("ratio", 1.0), "ratio": ("ratio", 1.0),
    "GT/s": ("transfers_per_second", 1e9),
}


class PrometheusUnavailable(RuntimeError):
    """prometheus_client is not installed; the message says how to install it."""


def require_client() -> Any:
    """The ``prometheus_client`` module, or :class:`PrometheusUnavailable` naming the install command."""
    try:
        import prometheus_client
        import prometheus_client.core  # noqa: F401
        import prometheus_client.exposition  # noqa: F401
    except ImportError:
        raise PrometheusUnavailable(f"prometheus_client is not installed, so no Prometheus textfile can be "
                                    f"written; fix: {INSTALL}") from None
    return prometheus_client


def metric_unit(unit: Optional[str]) -> Tuple[str, float]:
    """(suffix, factor) of a report unit; ("", 1) for a count or no unit."""
    return UNITS.get((unit or "").strip(), ("", 1.0))


def _number(value: Any) -> Optional[float]:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if value == value and abs(value) != float("inf") else None


def _epoch(iso: Optional[str]) -> Optional[float]:
    if not isinstance(iso, str):
        return None
    try:
        return float(calendar.timegm(time.strptime(iso, "%Y-%m-%dT%H:%M:%SZ")))
    except ValueError:
        return None


def _label(value: Any) -> str:
    """A label value: printable, bounded (the report's strings are untrusted)."""
    text = re.sub(r"[\x00-\x1f\x7f]", " ", str(value if value is not None else ""))
    return text[:200]


class _Collector:
    def __init__(self, families: List[Any]):
        self.families = families

    def collect(self) -> Iterable[Any]:
        return iter(self.families)


def _render(families: List[Any]) -> str:
    pc = require_client()
    registry = pc.CollectorRegistry(auto_describe=False)
    registry.register(_Collector(families))
    return pc.exposition.generate_latest(registry).decode("utf-8")


def report_text(report: Dict[str, Any]) -> str:
    """The metrics of one run's report (module docstring), as Prometheus text."""
    require_client()
    from prometheus_client.core import GaugeMetricFamily as G

    status = G("sits_verdict_status", "SITS2026 verdict: 1 for the status of each verdict of the run "
               "(requirement, subject)", labels=["requirement", "subject", "status"])
    measured: Dict[str, Any] = {}
    counts: Dict[str, int] = {}
    seen: Dict[Tuple[str, str, str], int] = {}
    for v in report.get("verdicts") or []:
        req, subj, st = _label(v.get("requirement")), _label(v.get("subject")), _label(v.get("status"))
        key = (req, subj, st)
        seen[key] = seen.get(key, 0) + 1
        counts[st] = counts.get(st, 0) + 1
        if seen[key] == 1:
            status.add_metric(list(key), 1.0)
        x = _number(v.get("measured"))
        if x is None:
            continue
        suffix, factor = metric_unit(v.get("unit"))
        name = "sits_verdict_measured" + (f"_{suffix}" if suffix else "")
        if name not in measured:
            what = f"in {suffix.replace('_', ' ')}" if suffix else "(a count, or no unit stated by the check)"
            measured[name] = (G(name, f"SITS2026 verdict: the measured value {what}", labels=["requirement",
                                                                                             "subject"]), set())
        fam, keys = measured[name]
        if (req, subj) not in keys:
            keys.add((req, subj))
            fam.add_metric([req, subj], x * factor)
    by_status = G("sits_verdicts", "SITS2026 verdicts of the run by status", labels=["status"])
    for st, n in sorted(counts.items()):
        by_status.add_metric([st], float(n))
    summary = report.get("summary") or {}
    run = report.get("run") or {}
    plat = report.get("platform") or {}
    result = G("sits_run_result", "SITS2026 run result: 1 for the result of the run", labels=["result"])
    result.add_metric([_label(summary.get("result"))], 1.0)
    info = G("sits_run_info", "SITS2026 run: profile, platform, level, suite version and host (value 1)",
             labels=["profile", "platform", "level", "suite_version", "hostname"])
    info.add_metric([_label((report.get("profile") or {}).get("name")), _label(plat.get("label")),
                     _label(run.get("level")), _label((report.get("generator") or {}).get("version")),
                     _label((report.get("environment") or {}).get("hostname"))], 1.0)
    fams: List[Any] = [status, *[f for f, _ in measured.values()], by_status, result, info,
                       G("sits_run_completed", "1 when the run completed, 0 when it was interrupted",
                         value=1.0 if run.get("completed") else 0.0),
                       G("sits_run_simulated", "1 when the run was on a simulated platform (never conformant)",
                         value=1.0 if plat.get("simulated") else 0.0)]
    if _number(run.get("duration_s")) is not None:
        fams.append(G("sits_run_duration_seconds", "duration of the run", value=float(run["duration_s"])))
    finished = _epoch(run.get("finished_at"))
    if finished is not None:
        fams.append(G("sits_run_finished_timestamp_seconds", "when the run finished (Unix time)", value=finished))
    return _render(fams)


def fleet_text(fleet: Dict[str, Any]) -> str:
    """The metrics of a fleet report (module docstring), as Prometheus text."""
    require_client()
    from prometheus_client.core import GaugeMetricFamily as G

    s = fleet["summary"]
    result = G("sits_fleet_result", "SITS2026 fleet result (the worst node result): 1", labels=["result"])
    result.add_metric([_label(s["result"])], 1.0)
    nodes = G("sits_fleet_nodes", "nodes of the fleet run by node result", labels=["result"])
    for r, n in s["counts"].items():
        nodes.add_metric([_label(r)], float(n))
    per_node = G("sits_fleet_node_result", "SITS2026 node result: 1 for the result of each node",
                 labels=["node", "result"])
    for n in fleet["nodes"]:
        per_node.add_metric([_label(n["node"]), _label(n["result"])], 1.0)
    rates = G("sits_fleet_requirement_pass_ratio", "nodes whose worst verdict passes, over the nodes where the "
              "requirement was not skipped", labels=["requirement"])
    for r in fleet["requirements"]:
        if r["pass_rate"] is not None:
            rates.add_metric([_label(r["requirement"])], float(r["pass_rate"]))
    info = G("sits_fleet_info", "the suite that merged the fleet report (value 1)", labels=["suite_version"])
    info.add_metric([_label(fleet["generator"]["version"])], 1.0)
    fams = [result, nodes, per_node, rates, info,
            G("sits_fleet_outliers", "measured values flagged as outliers among nodes of the same profile",
              value=float(len(fleet["outliers"]["flagged"]))),
            G("sits_fleet_simulated", "1 when a node ran on a simulated platform", value=1.0 if s["simulated"] else 0.0)]
    created = _epoch(fleet.get("created_at"))
    if created is not None:
        fams.append(G("sits_fleet_created_timestamp_seconds", "when the fleet report was merged (Unix time)",
                      value=created))
    return _render(fams)
