"""Do verdicts survive noise?  Run a level of the suite N times and count, per requirement, each status and the
PASS<->FAIL flips between runs, on this host and on a simulated machine that drifts.

    python benchmarks/flips.py [--level standard] [--runs 10] [--platforms live,sim:h100+drift]
                               [--budget MINUTES] [--out DIR] [--json PATH] [-- PYTEST-ARGS...]

Each run is a separate `pytest --pyargs pytest_sits.conformance` process (the level's requirements, the
platform's default profile, its own report folder under --out), one after the other.  Per platform and
requirement it prints how many verdicts of each status the runs gave, and:

* flips: for each subject (a device, a pair, the host), the statuses of the runs in order, INCONCLUSIVE and the
  other undecided statuses left out; every change between PASS and FAIL is one flip.  Goal: 0.
* subjects that were PASS in one run and FAIL in another (0 when flips is 0).
* the INCONCLUSIVE rate (INCONCLUSIVE verdicts over all verdicts of the requirement): allowed, reported.

On a simulated platform with fault `drift` the machine moves between trials and every FAIL is one "from drift
alone" (the same platform without the fault has none at these levels): goal 0, counted apart.  A simulated
platform that carries other faults is counted the same way and is meant to FAIL.

Exit 0 when every platform had 0 flips and the drifting ones 0 FAIL; 1 otherwise; 2 when a run wrote no report.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Dict, List, Optional

STATUSES = ("PASS", "FAIL", "INCONCLUSIVE", "WARN", "SKIP", "ERROR", "WAIVED")


def run_once(platform: str, level: str, out: Path, budget: Optional[float], extra: List[str]) -> Dict[str, Any]:
    """One run of the suite: its report, how long it took, pytest's exit status."""
    out.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pytest", "--pyargs", "pytest_sits.conformance", f"--sits-level={level}",
           f"--sits-report-dir={out}", "-p", "no:cacheprovider", "-q", "-p", "no:randomly"]
    if platform != "live":
        cmd.append(f"--sits-platform={platform}")
    if budget is not None:
        cmd.append(f"--sits-budget={budget:g}")
    cmd += extra
    t0 = time.monotonic()
    proc = subprocess.run(cmd, cwd=str(out), capture_output=True, text=True)
    seconds = time.monotonic() - t0
    (out / "pytest-output.txt").write_text(proc.stdout + proc.stderr, encoding="utf-8")
    path = out / "sits-report.json"
    if not path.is_file():
        raise RuntimeError(f"{platform} run wrote no report (exit {proc.returncode}); its output: "
                           f"{out / 'pytest-output.txt'}")
    return {"report": json.loads(path.read_text(encoding="utf-8")), "seconds": seconds, "exit": proc.returncode}


def flips(sequence: List[str]) -> int:
    """PASS<->FAIL changes along one subject's statuses, the undecided ones left out."""
    decided = [s for s in sequence if s in ("PASS", "FAIL")]
    return sum(1 for a, b in zip(decided, decided[1:]) if a != b)


def analyse(runs: List[Dict[str, Any]]) -> Dict[str, Any]:
    """Per requirement: status counts, flips, subjects that both passed and failed, INCONCLUSIVE rate."""
    by_subject: Dict[str, Dict[str, List[str]]] = defaultdict(lambda: defaultdict(list))
    counts: Dict[str, Counter] = defaultdict(Counter)
    for run in runs:
        for v in run["report"]["verdicts"]:
            by_subject[v["requirement"]][v["subject"]].append(v["status"])
            counts[v["requirement"]][v["status"]] += 1
    rows = {}
    for req in sorted(counts):
        subjects = by_subject[req]
        total = sum(counts[req].values())
        rows[req] = {"counts": dict(counts[req]), "verdicts": total,
                     "flips": sum(flips(seq) for seq in subjects.values()),
                     "subjects_pass_and_fail": sum(1 for seq in subjects.values()
                                                   if "PASS" in seq and "FAIL" in seq),
                     "inconclusive_rate": counts[req]["INCONCLUSIVE"] / total if total else 0.0}
    return rows


def print_table(platform: str, rows: Dict[str, Any], runs: List[Dict[str, Any]]) -> None:
    secs = [r["seconds"] for r in runs]
    print(f"\n== {platform}: {len(runs)} runs, {min(secs) / 60:.1f} to {max(secs) / 60:.1f} min each "
          f"(median {sorted(secs)[len(secs) // 2] / 60:.1f})")
    head = "".join(f"{s[:6]:>7}" for s in STATUSES)
    print(f"{'requirement':<18}{head}{'flips':>7}{'P&F':>5}{'INC rate':>9}")
    for req, r in rows.items():
        cells = "".join(f"{r['counts'].get(s, 0):>7}" for s in STATUSES)
        print(f"{req:<18}{cells}{r['flips']:>7}{r['subjects_pass_and_fail']:>5}{r['inconclusive_rate']:>9.0%}")
    total = {s: sum(r["counts"].get(s, 0) for r in rows.values()) for s in STATUSES}
    n = sum(total.values())
    print(f"{'all':<18}" + "".join(f"{total[s]:>7}" for s in STATUSES)
          + f"{sum(r['flips'] for r in rows.values()):>7}{sum(r['subjects_pass_and_fail'] for r in rows.values()):>5}"
          + f"{(total['INCONCLUSIVE'] / n if n else 0):>9.0%}")
    plans = [r["report"]["run"].get("plan") or {} for r in runs]
    est = [p.get("estimate_s", {}).get("initial") for p in plans if p.get("estimate_s")]
    if est:
        print(f"the runs' own time estimate (header): about {est[0] / 60:.1f} min; they took "
              f"{sorted(secs)[len(secs) // 2] / 60:.1f} min (median)")


def main(argv: Optional[List[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: List[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--level", default="standard", choices=("quick", "standard", "full"))
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--platforms", default="live,sim:h100+drift",
                    help="comma-separated --sits-platform values; 'live' is this host (default: live,sim:h100+drift)")
    ap.add_argument("--budget", type=float, help="--sits-budget for every run (minutes)")
    ap.add_argument("--out", type=Path, help="keep every run's report here (default: a temporary folder)")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args(argv)
    if args.runs < 2:
        print("--runs must be 2 or more: a flip is a change between runs", file=sys.stderr)
        return 2
    platforms = [p.strip() for p in args.platforms.split(",") if p.strip()]
    out_root = args.out or Path(tempfile.mkdtemp(prefix="sits-flips-"))
    print(f"{args.runs} runs of level {args.level} on {', '.join(platforms)}; reports under {out_root}", flush=True)
    result: Dict[str, Any] = {"level": args.level, "runs": args.runs, "platforms": {}}
    ok = True
    for platform in platforms:
        runs = []
        for k in range(args.runs):
            slug = platform.replace(":", "-").replace("+", "_").replace(",", "_")
            try:
                run = run_once(platform, args.level, out_root / slug / f"run-{k:02d}", args.budget, extra)
            except RuntimeError as exc:
                print(f"run {k} failed: {exc}", file=sys.stderr)
                return 2
            runs.append(run)
            c = Counter(v["status"] for v in run["report"]["verdicts"])
            print(f"  {platform} run {k + 1}/{args.runs}: {run['seconds'] / 60:.1f} min, "
                  + ", ".join(f"{c[s]} {s}" for s in STATUSES if c[s]), flush=True)
        rows = analyse(runs)
        print_table(platform, rows, runs)
        total_flips = sum(r["flips"] for r in rows.values())
        fails = sum(r["counts"].get("FAIL", 0) for r in rows.values())
        drifting = "+drift" in platform or ",drift" in platform
        verdict = f"{total_flips} PASS<->FAIL flips (goal 0)"
        if drifting:
            verdict += f"; {fails} FAIL with drift injected (goal 0: the same machine without drift fails nothing)"
            ok = ok and fails == 0
        ok = ok and total_flips == 0
        print(verdict)
        result["platforms"][platform] = {"rows": rows, "seconds": [round(r["seconds"], 1) for r in runs],
                                         "flips": total_flips, "fails": fails}
    if args.json:
        args.json.write_text(json.dumps(result, indent=1), encoding="utf-8")
    print("\ngoal met" if ok else "\ngoal missed")
    return 0 if ok else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
