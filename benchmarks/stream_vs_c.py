"""The numpy STREAM probe against a C reference (gcc -O3 -fopenmp), same machine, same run.

    python benchmarks/stream_vs_c.py [--rounds 5] [--threads N]

Compiles benchmarks/stream_ref.c, then alternates C and numpy runs over the
same array size (4x the last-level cache per array, as STREAM requires) and
prints, per kernel, the best GB/s of each and the ratio probe / C.
Goal: triad and copy ratios >= 0.95.  Exits 1 when the goal is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pytest_sits.conditions.stream import KERNELS, llc_bytes, stream_peak  # noqa: E402

GOAL = 0.95
HERE = Path(__file__).resolve().parent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--ntimes", type=int, default=10)
    args = ap.parse_args()
    if not shutil.which("gcc"):
        print("gcc not found: cannot build the C reference", file=sys.stderr)
        return 2
    llc = llc_bytes() or 32 * 1024 ** 2
    array_bytes = max(4 * llc, 64 * 1024 ** 2)
    n = array_bytes // 8 // args.threads * args.threads
    cpus = sorted(os.sched_getaffinity(0))[: args.threads]
    with tempfile.TemporaryDirectory() as tmp:
        exe = Path(tmp) / "stream_ref"
        subprocess.run(["gcc", "-O3", "-fopenmp", "-march=native", str(HERE / "stream_ref.c"), "-o", str(exe)],
                       check=True)
        env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), OMP_PROC_BIND="close", OMP_PLACES="cores")
        c_best = {k: 0.0 for k in KERNELS}
        py_best = {k: 0.0 for k in KERNELS}
        py_median = {k: [] for k in KERNELS}
        for r in range(args.rounds):
            out = subprocess.run([str(exe), str(n), str(args.ntimes)], env=env, check=True, capture_output=True,
                                 text=True).stdout
            c = json.loads(out)
            res = stream_peak(threads=args.threads, cpus=cpus, node=None, array_bytes=n * 8, ntimes=args.ntimes,
                              llc=llc)
            if not res.get("validated"):
                print(f"probe failed validation: {res}", file=sys.stderr)
                return 1
            for k in KERNELS:
                c_best[k] = max(c_best[k], c[k])
                py_best[k] = max(py_best[k], res["kernels"][k]["gbps_max"])
                py_median[k].append(res["kernels"][k]["gbps_median"])
    print(f"arrays: {n * 8 / 2 ** 20:.0f} MiB each ({n * 8 / llc:.1f}x LLC of {llc / 2 ** 20:.0f} MiB), "
          f"{args.threads} thread(s), {args.rounds} alternating rounds of {args.ntimes} iterations")
    print(f"{'kernel':8} {'C GB/s':>9} {'probe GB/s':>11} {'ratio':>7}")
    ok = True
    for k in KERNELS:
        ratio = py_best[k] / c_best[k]
        print(f"{k:8} {c_best[k]:9.2f} {py_best[k]:11.2f} {ratio:7.3f}")
        if k in ("copy", "triad") and ratio < GOAL:
            ok = False
    print(f"goal: copy and triad >= {GOAL} x C: {'met' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
