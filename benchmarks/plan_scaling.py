"""The plan's estimate against the accelerator count, and the simulated run's own cost, in one command.

    python benchmarks/plan_scaling.py [--profile h100-sxm5] [--counts 1,2,4,8,16] [--level full] [--no-sim]

For each level and count it prints the real machine's estimate (the plan, without xdist: first look / every cap)
beside what the same plan would be with every device measured one after the other (no measurement at once): the
rows the catalogue declares ``together`` stay flat as the count grows. Then, unless ``--no-sim``, it runs the
conformance suite on a simulated node of each count (``sim:`` a profile extending the given one with that count)
at ``--level`` and prints its wall time, the report's ``duration_s`` and the header's estimate of the simulated run
(``Plan.estimate_sim_s``) with its ratio to the wall time: what the simulated run itself costs.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pytest_sits.conditions.plan import Plan  # noqa: E402
from pytest_sits.profiles import resolve  # noqa: E402


def estimates(profile: str, level: str, n: int, serial: bool) -> tuple:
    plan = Plan(level, resolve(profile), n, packages=2)
    # serial: every device one after the other, nothing at the same time (the plan before measurements ran at once)
    return plan.estimate_s("initial", serial) / 60, plan.estimate_s("cap", serial) / 60


def sim_run(profile: str, level: str, n: int, tmp: Path) -> tuple:
    prof = tmp / f"{profile}-x{n}.yaml"
    prof.write_text(f"name: {profile}-x{n}\nextends: {profile}\ndescription: {n} accelerators\n"
                    f"identity:\n  count: {n}\n")
    out = tmp / f"report-{n}"
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--sits-platform=sim:{prof}",
           f"--sits-profile={prof}", f"--sits-level={level}", f"--sits-report-dir={out}", str(ROOT / "conformance")]
    t0 = time.perf_counter()
    subprocess.run(cmd, cwd=tmp, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    try:
        run = json.loads((out / "sits-report.json").read_text())["run"]
    except (OSError, ValueError, KeyError):
        return wall, None, None, None
    return wall, run.get("duration_s"), run["plan"]["estimate_s"]["initial"] / 60, run["plan"].get("simulated_estimate_s")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default="h100-sxm5")
    ap.add_argument("--counts", default="1,2,4,8,16")
    ap.add_argument("--level", default="full", help="the level of the simulated runs")
    ap.add_argument("--no-sim", action="store_true", help="the plan's estimates only")
    args = ap.parse_args()
    counts = [int(c) for c in args.counts.split(",")]
    print(f"plan estimate for {args.profile}, no xdist, in min: first look / every cap "
          "(at once: as planned; serial: every device one after the other)")
    print(f"{'level':9} {'':7}" + "".join(f"{n:>14}" for n in counts))
    for level in ("quick", "standard", "full"):
        for serial in (False, True):
            cells = [estimates(args.profile, level, n, serial) for n in counts]
            print(f"{level:9} {'serial' if serial else 'at once':7}"
                  + "".join(f"{a:8.1f}/{b:5.1f}" for a, b in cells))
    if args.no_sim:
        return 0
    print(f"\nsimulated run, level {args.level} (wall: the pytest process; duration_s: the report's; the header's "
          "estimate of the simulated run and its ratio to the wall time)")
    print(f"{'accelerators':>12} {'wall s':>8} {'duration_s':>11} {'sim estimate s':>15} {'ratio':>6} "
          f"{'real-machine estimate min':>26}")
    with tempfile.TemporaryDirectory() as tmp:
        for n in counts:
            wall, dur, est, sim = sim_run(args.profile, args.level, n, Path(tmp))
            ratio = f"{sim / wall:.2f}" if sim else "-"
            print(f"{n:>12} {wall:8.1f} {dur if dur is not None else 'none':>11} {sim if sim is not None else '-':>15} "
                  f"{ratio:>6} {est if est is None else round(est, 1):>26}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
