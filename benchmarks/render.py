"""JSON -> HTML rendering of a large report: 10,000 verdicts, small evidence and a 300-window timeline each.

    python benchmarks/render.py [--verdicts N] [--reference COMMIT] [--reference-timeline]

Builds two synthetic reports of N verdicts (default 10,000): one with small evidence, one where every
verdict carries a 300-window bandwidth-hold timeline (the hold's evidence and its chart series).  For each
it writes the JSON to a temporary file, then times parsing it (json.load) and rendering it
(report.render_html), and prints the seconds and the HTML's size.  Goal: parse + render <= 2 s, and an
HTML size that does not grow with the evidence (bounded charts and evidence excerpts).

--reference COMMIT renders the same small-evidence report with the renderer of that commit of this
repository (report.py, charts.py and the template, read with `git show`) in the same run, and prints the
ratio; --reference-timeline does the timeline case too (slow: about a minute for 10,000 verdicts before
this renderer).  Exits 1 when the goal is missed.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

GOAL_S = 2.0


def hold_evidence(windows: int, seed: int) -> dict:
    """Evidence shaped like conditions/hold.py's, with the chart series checks/bandwidth.py adds."""
    timeline = []
    for i in range(windows):
        occ = 0.885 + 0.02 * math.sin((i + seed) / 7.0)
        timeline.append({"t": round(i * 0.1, 3), "duty": round(0.9 + 0.01 * math.cos(i / 5), 4),
                         "own_gbps": round(occ * 80, 3), "own_occupancy": round(occ, 4),
                         "phase": "settle" if i < 10 else "hold", "occupancy": round(occ, 4),
                         "in_band": 0.85 <= occ <= 0.92, "saturated": False})
    return {"band": [0.85, 0.92], "peak_gbps": 80.0, "window_s": 0.1, "threads": 16, "cpus": list(range(16)),
            "node": 0, "source": "own accounting (injected bytes only)", "counter_reason": "no resctrl",
            "windows": windows - 10, "windows_in_band": windows - 10, "settle_windows": 10, "errors": [],
            "timeline": timeline,
            "series": [{"title": "host DRAM occupancy per window", "unit": "fraction of peak",
                        "x": [r["t"] for r in timeline], "y": [r["occupancy"] for r in timeline],
                        "band": [0.85, 0.92], "mark_from": 1.0}]}


def make_report(n: int, timeline: bool) -> dict:
    verdicts = []
    for i in range(n):
        status = "FAIL" if i % 997 == 0 else "PASS"
        ev = hold_evidence(300, i) if timeline else {"device": f"0000:{i % 256:02x}:00.0", "gbps_median": 3015.0 + i,
                                                     "runs": 7, "verified": True}
        verdicts.append({"requirement": "MEM-BW-HOLD" if timeline else "MEM-BW-EFFICIENCY", "status": status,
                         "reason": f"verdict {i}: 290/290 windows in band", "measured": 0.97, "threshold": ">= 95%",
                         "unit": "share", "subject": f"node{i // 8}/gpu{i % 8}",
                         "remediation": "raise the injector threads" if status == "FAIL" else None,
                         "evidence": ev, "method": "occupancy from own accounting", "nodeid": f"t.py::test[{i}]",
                         "simulated": True, "waiver": None})
    return {
        "schema": "pytest-sits/report", "schema_version": "1.0", "generator": {"name": "pytest-sits", "version": "b"},
        "run": {"started_at": "2026-01-01T00:00:00", "finished_at": "2026-01-01T01:00:00", "duration_s": 3600,
                "completed": True, "exit_status": 0, "exit_status_name": "OK", "level": "standard"},
        "environment": {"hostname": "bench", "python": "3", "os": "linux", "packages": {}},
        "platform": {"kind": "sim", "label": "sim:h100 (benchmark)", "simulated": True},
        "profile": {"name": "h100-sxm5", "path": "p", "chain": [], "how": "option", "why": "",
                    "data": {"thresholds": {"SVC-SLA": {"p99_ms": 120, "min_rps": 85, "max_error_rate": 0.003}}}},
        "inventory": {"cpu": {"model": "x"}, "memory": {}, "numa": [], "pci": [], "accelerators": [], "platform": {}},
        "verdicts": verdicts, "coverage": [],
        "summary": {"counts": {"PASS": n}, "result": "SIMULATED", "result_reason": "benchmark"},
        "status_meaning": {},
    }


def reference_renderer(commit: str):
    """render_html of ``commit``: its whole package, from `git archive`, imported under another name (the package's
    imports are relative), with the layout of that commit (report.py, or report/render.py)."""
    root = Path(tempfile.mkdtemp(prefix="sits-ref-"))
    archive = subprocess.run(["git", "archive", "--format=tar", commit, "pytest_sits"], cwd=REPO, check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(root)], input=archive, check=True)
    (root / "pytest_sits").rename(root / "sits_reference")
    sys.path.insert(0, str(root))
    module = "sits_reference.report.render" if (root / "sits_reference" / "report" / "render.py").exists() \
        else "sits_reference.report"
    return importlib.import_module(module).render_html


def measure(report: dict, render) -> dict:
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        json.dump(report, fh)
        path = fh.name
    try:
        json_bytes = os.path.getsize(path)
        c0, t0 = time.process_time(), time.perf_counter()
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
        c1, t1 = time.process_time(), time.perf_counter()
        html = render(data)
        c2, t2 = time.process_time(), time.perf_counter()
    finally:
        os.unlink(path)
    return {"json_bytes": json_bytes, "parse_s": t1 - t0, "render_s": t2 - t1, "total_s": t2 - t0,
            "parse_cpu_s": c1 - c0, "render_cpu_s": c2 - c1, "html_bytes": len(html.encode("utf-8"))}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--verdicts", type=int, default=10_000)
    ap.add_argument("--reference", metavar="COMMIT", help="also time this commit's renderer (small evidence)")
    ap.add_argument("--reference-timeline", action="store_true", help="and the timeline case (slow)")
    args = ap.parse_args()
    from pytest_sits.report.render import render_html

    ok = True
    for label, timeline in (("small evidence", False), ("300-window timeline each", True)):
        rep = make_report(args.verdicts, timeline)
        m = measure(rep, render_html)
        good = m["total_s"] <= GOAL_S
        ok &= good
        print(f"{args.verdicts} verdicts, {label}: JSON {m['json_bytes'] / 1e6:.1f} MB; parse {m['parse_s']:.2f} s "
              f"+ render {m['render_s']:.2f} s = {m['total_s']:.2f} s (goal <= {GOAL_S:g} s: "
              f"{'met' if good else 'MISSED'}); HTML {m['html_bytes'] / 1e6:.1f} MB; CPU time: parse "
              f"{m['parse_cpu_s']:.2f} s, render {m['render_cpu_s']:.2f} s; load average {os.getloadavg()[0]:.1f} "
              f"on {os.cpu_count()} CPUs")
        if args.reference and (not timeline or args.reference_timeline):
            ref = measure(rep, reference_renderer(args.reference))
            print(f"  reference {args.reference}: {ref['total_s']:.2f} s, HTML {ref['html_bytes'] / 1e6:.1f} MB; "
                  f"this renderer takes {m['total_s'] / ref['total_s']:.2f}x the time and writes "
                  f"{m['html_bytes'] / ref['html_bytes']:.2f}x the bytes")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
