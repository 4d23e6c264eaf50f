"""`sits fleet merge` of a large fleet: time and peak memory, beside a reference commit's merge, in one command.

    python benchmarks/fleet_merge.py [--nodes 1000] [--level quick] [--reference main] [--jobs N] [--keep DIR]

Builds a fleet folder of N nodes from a few real simulated runs: the suite runs (pytest, at --level) on
sim:h100, sim:h100+switch, sim:h100+ecc-uncorrectable and sim:h100+membw-slow; each node's folder gets one
of those reports (mostly the healthy one) with every numeric measured value varied by a seeded ±0.5%
(node-to-node spread), its JUnit XML and HTML, node.json and node-exit.json.  2 nodes of every 100 left
only node.json (died mid-run) and 1 in 100 never started (named in fleet-run.json, no folder).

Then it merges the folder twice, each in its own process: with the merge of --reference (that commit's
pytest_sits, extracted with `git archive`; address space capped at --reference-limit GiB so that a merge
that keeps every report in memory cannot take the machine down) and with this checkout's.  For each it
prints the wall time and the peak memory of the merging process tree (the sum of the resident sets of the
process and its worker processes, sampled every 20 ms), and the ratio.  Goal: <= 10 s and <= 1 GiB for
1,000 nodes (taking the reports as written, as the reference does: ``--replay=none``).  Then this checkout's
merge once more with every report replayed from its evidence (``--replay=full``, the default of `sits fleet
merge`), its cost per node printed.  Exits 1 when this checkout's merge misses the goal.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

REPO = Path(__file__).resolve().parent.parent
GOAL_S, GOAL_BYTES = 10.0, 1 << 30
SEEDS = {"pass": "sim:h100", "switch": "sim:h100+switch", "ecc": "sim:h100+ecc-uncorrectable",
         "slow": "sim:h100+membw-slow"}


def seed_runs(base: Path, level: str) -> Dict[str, Path]:
    out = {}
    for name, spec in SEEDS.items():
        dest = base / name
        cmd = [sys.executable, "-m", "pytest", "--pyargs", "pytest_sits.conformance", "-q", "-p", "no:cacheprovider",
               f"--sits-platform={spec}", f"--sits-level={level}", f"--sits-report-dir={dest}",
               f"--junitxml={dest / 'junit.xml'}"]
        proc = subprocess.run(cmd, cwd=str(base), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if not (dest / "sits-report.json").is_file():
            sys.exit(f"seed run {spec} wrote no report:\n{proc.stdout[-2000:]}")
        out[name] = dest
    return out


def build_fleet(out: Path, seeds: Dict[str, Path], nodes: int) -> Dict[str, int]:
    rng = random.Random(2026)
    reports = {k: json.loads((p / "sits-report.json").read_text()) for k, p in seeds.items()}
    names = [f"node{i:04d}" for i in range(1, nodes + 1)]
    kinds: Dict[str, int] = {}
    for i, node in enumerate(names):
        if i % 100 == 99:
            kinds["never started"] = kinds.get("never started", 0) + 1
            continue
        d = out / node
        d.mkdir(parents=True)
        (d / "node.json").write_text(json.dumps({"node": node, "started_at": "2026-06-01T00:00:00Z",
                                                 "job_nodelist": None}))
        if i % 100 in (97, 98):
            kinds["died"] = kinds.get("died", 0) + 1
            continue
        kind = "switch" if i % 50 == 7 else "ecc" if i % 50 == 11 else "slow" if i % 50 == 13 else "pass"
        kinds[kind] = kinds.get(kind, 0) + 1
        rep = reports[kind]
        saved = [v.get("measured") for v in rep["verdicts"]]
        for v in rep["verdicts"]:
            x = v.get("measured")
            if isinstance(x, float):
                v["measured"] = x * (1 + rng.uniform(-0.005, 0.005))
        rep["environment"]["hostname"] = node
        (d / "sits-report.json").write_text(json.dumps(rep))
        for v, x in zip(rep["verdicts"], saved):
            v["measured"] = x
        for f in ("sits-report.html", "junit.xml"):
            os.link(seeds[kind] / f, d / f)
        (d / "node-exit.json").write_text(json.dumps({"node": node, "exit_code": 0}))
    (out / "fleet-run.json").write_text(json.dumps({"run_id": "bench", "mode": "srun", "requested_nodes": nodes,
                                                    "expected_nodes": names}))
    return kinds


def reference_tree(rev: str, dest: Path) -> Path:
    dest.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", rev, "pytest_sits", "profiles", "conformance"],
                             stdout=subprocess.PIPE, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    # the installed package maps pytest_sits.bundled and .conformance to these folders: do the same
    shutil.copytree(dest / "profiles", dest / "pytest_sits" / "bundled", dirs_exist_ok=True)
    shutil.copytree(dest / "conformance", dest / "pytest_sits" / "conformance", dirs_exist_ok=True)
    return dest


def _tree_rss(pid: int) -> int:
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/status") as fh:
                for line in fh:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) * 1024
            for t in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{t}/children") as fh:
                    todo.extend(int(c) for c in fh.read().split())
        except (OSError, ValueError):
            continue
    return total


MERGE = """
import sys, time
from pathlib import Path
from pytest_sits.commands.fleet import merge as m
t = time.perf_counter()
kw = {"jobs": int(sys.argv[2])} if sys.argv[2] != "-" else {}
if sys.argv[3] != "-":
    kw["replay"] = sys.argv[3]
fl = m.merge(Path(sys.argv[1]), **kw)
print("RESULT", time.perf_counter() - t, fl["summary"]["result"], fl["summary"]["nodes"], len(fl["outliers"]["flagged"]))
"""


def measure(label: str, pythonpath: Optional[Path], out: Path, jobs: Optional[int],
            limit_bytes: Optional[int], replay: Optional[str] = None) -> Dict[str, Any]:
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)

    def cap() -> None:
        if limit_bytes:
            resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, limit_bytes))
    for f in ("fleet-report.json", "fleet-report.html", "fleet-junit.xml"):
        (out / f).unlink(missing_ok=True)
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", MERGE, str(out), str(jobs) if jobs else "-", replay or "-"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, preexec_fn=cap,
                            cwd=str(pythonpath or REPO))
    peak = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], _tree_rss(proc.pid))
            done.wait(0.02)
    t = threading.Thread(target=sample, daemon=True)
    t.start()
    text, _ = proc.communicate()
    wall = time.perf_counter() - started
    done.set()
    t.join()
    line = next((x for x in text.splitlines() if x.startswith("RESULT")), None)
    res = {"label": label, "rc": proc.returncode, "wall_s": wall, "peak_bytes": peak[0],
           "html_bytes": (out / "fleet-report.html").stat().st_size if (out / "fleet-report.html").exists() else None,
           "json_bytes": (out / "fleet-report.json").stat().st_size if (out / "fleet-report.json").exists() else None}
    if line:
        _, merge_s, result, nodes, flagged = line.split()
        res.update(merge_s=float(merge_s), result=result, nodes=int(nodes), outliers=int(flagged))
    else:
        res["error"] = text.strip().splitlines()[-1] if text.strip() else f"exit {proc.returncode}"
    return res


def show(r: Dict[str, Any]) -> None:
    if "error" in r:
        print(f"{r['label']:>10}: FAILED after {r['wall_s']:.1f} s, peak {r['peak_bytes'] / 2**20:.0f} MiB: {r['error']}")
        return
    print(f"{r['label']:>10}: {r['wall_s']:6.2f} s wall ({r['merge_s']:.2f} s in merge), peak "
          f"{r['peak_bytes'] / 2**20:7.0f} MiB; result {r['result']} over {r['nodes']} nodes, {r['outliers']} "
          f"outliers; JSON {(r['json_bytes'] or 0) / 2**20:.1f} MiB, HTML {(r['html_bytes'] or 0) / 2**20:.2f} MiB")


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--level", default="quick", choices=("quick", "standard"))
    ap.add_argument("--reference", default="main", help="the commit whose merge is the reference ('none': skip)")
    ap.add_argument("--reference-limit", type=float, default=6.0, metavar="GIB")
    ap.add_argument("--jobs", type=int, default=None, help="worker processes of this checkout's merge")
    ap.add_argument("--keep", metavar="DIR", help="build the fleet folder here and keep it")
    ap.add_argument("--no-replay", action="store_true", help="skip the third merge, with every report replayed")
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="sits-fleet-bench-"))
    try:
        out = Path(args.keep) if args.keep else work / "fleet"
        t = time.perf_counter()
        seeds = seed_runs(work, args.level)
        kinds = build_fleet(out, seeds, args.nodes)
        print(f"fleet of {args.nodes} nodes ({args.level} level, {', '.join(f'{n} {k}' for k, n in kinds.items())}) "
              f"built in {time.perf_counter() - t:.1f} s from {len(seeds)} simulated runs")
        results = []
        if args.reference != "none":
            rev = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", args.reference],
                                 stdout=subprocess.PIPE, text=True, check=True).stdout.strip()
            ref = reference_tree(args.reference, work / "reference")
            results.append(measure(f"ref {rev}", ref, out, None, int(args.reference_limit * 2**30)))
            show(results[-1])
        # The reference merge takes the reports as written; this one does the same with --replay=none, and then
        # replays every report (the default, what a certification merges), reported apart.
        results.append(measure("this", REPO, out, args.jobs, None, "none"))
        show(results[-1])
        this = results[-1]
        if len(results) == 2 and "error" not in results[0] and "error" not in this:
            ref = results[0]
            print(f"     ratio: time {this['wall_s'] / ref['wall_s']:.2f}, peak memory "
                  f"{this['peak_bytes'] / ref['peak_bytes']:.2f} (this / reference)")
        ok = "error" not in this and this["wall_s"] <= GOAL_S and this["peak_bytes"] <= GOAL_BYTES
        print(f"goal (<= {GOAL_S:g} s, <= 1 GiB, --replay=none): {'met' if ok else 'MISSED'} on {os.cpu_count()} CPUs")
        if not args.no_replay:
            full = measure("replayed", REPO, out, args.jobs, None, "full")
            show(full)
            if "error" not in full:
                print(f"     --replay=full (the default): {full['wall_s'] / max(args.nodes, 1) * 1000:.0f} ms per "
                      f"node, {full['wall_s'] / this['wall_s']:.1f} x the merge that takes reports as written; "
                      "the fleet's values are varied from their evidence here, so every replayed node is an ERROR")
        return 0 if ok else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
