"""The numpy STREAM probe against a C reference (gcc -O3 -fopenmp), in alternating round pairs, one command.

    python benchmarks/stream_vs_c.py [--pairs 10] [--threads N] [--ntimes 10] [--drift 0.10]
                                     [--min-cpu-share 0.75] [--array-mib M] [--json PATH]

Compiles benchmarks/stream_ref.c, then runs the C reference and the probe
(pytest_sits.conditions.stream.stream_peak) in pairs of short rounds over the
same arrays (4x the last-level cache per array, as STREAM requires), the same
thread count and the same binding (thread i on CPU i of the list, one
contiguous chunk each, first touched by its owner).  The order alternates:
C then probe, probe then C, ...  Each round reports its best GB/s per kernel
(the first of its iterations discarded); a pair's ratio is probe / C.

This host's memory bandwidth drifts with other work, so a ratio is trusted
only when the reference held still around the probe.  Pairs 2j and 2j+1 run
C, probe, probe, C: both probe rounds lie between those two reference
rounds.  When the reference moved by more than --drift between them, both
pairs are flagged for that kernel and left out of the median; moves between
back-to-back reference rounds (no probe in between) are reported too.  A
kernel whose busiest thread was on a CPU for less than --min-cpu-share of
its wall time (median over the round's iterations, either side: other
processes had the CPUs) measures the scheduler, not memory: its pair is
flagged as CPU-starved for that kernel.

Prints every pair, then per kernel: the reference's spread over all rounds,
the median and range of the pair ratios over unflagged pairs, the best/best
ratio (best probe round over best C round, unflagged pairs), how many pairs
were flagged, and the median on-CPU ratio over all pairs (GB/s over the CPU
time of each side's busiest thread: what the two implementations do while
they run, whoever else has the CPUs; the probe's GIL waits are not CPU time,
so it flatters the probe a little).  The C reference also times the triad
the way numpy must compute it (two passes per L2-sized block, same block
size as the probe), which splits the triad gap into the cost of two passes
and the cost of Python and numpy.  Goal: median copy and triad ratios
>= 0.95 over at least 3 unflagged pairs.  Exit 0 goal met, 1 missed, 2 could
not run, 3 too few comparable pairs to say.
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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pytest_sits.conditions.stream import KERNELS, l2_bytes, llc_bytes, stream_peak, triad_block  # noqa: E402

GOAL = 0.95
GOAL_KERNELS = ("copy", "triad")
MIN_PAIRS = 3
HERE = Path(__file__).resolve().parent


def cpu_pressure_us() -> Optional[int]:
    """Cumulative µs during which some task waited for a CPU (PSI), or None without PSI."""
    try:
        with open("/proc/pressure/cpu") as f:
            for line in f:
                if line.startswith("some "):
                    return int(line.split("total=")[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def run_reference(exe: Path, n: int, ntimes: int, block: int, env: Dict[str, str], threads: int) -> Dict[str, Any]:
    psi0, t0 = cpu_pressure_us(), time.perf_counter()
    proc = subprocess.run([str(exe), str(n), str(ntimes), str(block)], env=env, capture_output=True, text=True)
    wall, psi1 = time.perf_counter() - t0, cpu_pressure_us()
    if proc.returncode != 0:
        raise RuntimeError(f"C reference exited {proc.returncode}: {proc.stderr.strip()}")
    out = json.loads(proc.stdout)
    if not out.get("validated"):
        raise RuntimeError(f"C reference failed validation: {out}")
    if out.get("threads") != threads:
        raise RuntimeError(f"C reference ran {out.get('threads')} threads, asked for {threads}")
    return {"side": "C", "gbps": {k: out[k] for k in KERNELS}, "on_cpu_gbps": {k: out["on_cpu"][k] for k in KERNELS},
            "triad_2pass_gbps": out["triad_2pass"], "triad_2pass_on_cpu_gbps": out["on_cpu"]["triad_2pass"], "wall_s": wall,
            "cpu_share": {k: out["cpu_share"][k] for k in KERNELS}, "cpu_pressure": _pressure(psi0, psi1, wall)}


def run_probe(n: int, ntimes: int, cpus: List[int], llc: int, threads: int) -> Dict[str, Any]:
    psi0, t0 = cpu_pressure_us(), time.perf_counter()
    res = stream_peak(threads=threads, cpus=cpus, node=None, array_bytes=n * 8, ntimes=ntimes, llc=llc)
    wall, psi1 = time.perf_counter() - t0, cpu_pressure_us()
    if "error" in res:
        raise RuntimeError(f"probe failed: {res['error']}")
    if not res.get("validated"):
        raise RuntimeError(f"probe failed validation: max relative error {res.get('max_relative_error')}")
    return {"side": "probe", "gbps": {k: res["kernels"][k]["gbps_max"] for k in KERNELS},
            "on_cpu_gbps": {k: res["kernels"][k]["gbps_on_cpu_max"] for k in KERNELS}, "wall_s": wall,
            "cpu_share": {k: res["kernels"][k]["cpu_share_median"] for k in KERNELS},
            "cpu_pressure": _pressure(psi0, psi1, wall), "triad_block_elements": res.get("triad_block_elements")}


def _pressure(before: Optional[int], after: Optional[int], wall: float) -> Optional[float]:
    if before is None or after is None or wall <= 0:
        return None
    return min(1.0, (after - before) / 1e6 / wall)


def analyse(pairs: List[Dict[str, Any]], drift: float, min_share: float) -> Dict[str, Any]:
    """Flags, per-kernel statistics and reference moves from the pairs as run (pure: data in, data out)."""
    moves: List[Dict[str, Any]] = []
    # Reference rounds in time order: pair 2j runs C first, pair 2j+1 runs C last.
    refs = []
    for j in range(0, len(pairs), 2):
        refs.append((j, pairs[j]["C"]))
        if j + 1 < len(pairs):
            refs.append((j + 1, pairs[j + 1]["C"]))
    for (pa, ra), (pb, rb) in zip(refs, refs[1:]):
        bracket = pa % 2 == 0 and pb == pa + 1  # both probe rounds of pairs pa, pb lie between these two
        for k in KERNELS:
            move = rb["gbps"][k] / ra["gbps"][k] - 1
            if abs(move) > drift:
                moves.append({"kernel": k, "from_pair": pa, "to_pair": pb, "from_gbps": ra["gbps"][k],
                              "to_gbps": rb["gbps"][k], "move": move,
                              "flags": [pa, pb] if bracket else []})
    for p in pairs:
        p["ratio"] = {k: p["probe"]["gbps"][k] / p["C"]["gbps"][k] for k in KERNELS}
        p["on_cpu_ratio"] = {k: p["probe"]["on_cpu_gbps"][k] / p["C"]["on_cpu_gbps"][k] for k in KERNELS}
        p["flags"] = {k: (["cpu-starved"] if min(p["C"]["cpu_share"][k], p["probe"]["cpu_share"][k]) < min_share
                          else []) for k in KERNELS}
    for m in moves:
        for i in m["flags"]:
            if "reference-moved" not in pairs[i]["flags"][m["kernel"]]:
                pairs[i]["flags"][m["kernel"]].append("reference-moved")
    if len(pairs) % 2:  # the last pair has no second reference round around its probe
        for k in KERNELS:
            pairs[-1]["flags"][k].append("unbracketed")
    summary: Dict[str, Any] = {}
    kept_triad = [p for p in pairs if not p["flags"]["triad"]]
    summary["triad_decomposition"] = {
        "c_2pass_over_c": (statistics.median(p["C"]["triad_2pass_gbps"] / p["C"]["gbps"]["triad"] for p in kept_triad)
                           if kept_triad else None),
        "probe_over_c_2pass": (statistics.median(p["probe"]["gbps"]["triad"] / p["C"]["triad_2pass_gbps"]
                                                 for p in kept_triad) if kept_triad else None),
        "on_cpu_c_2pass_over_c": statistics.median(p["C"]["triad_2pass_on_cpu_gbps"] / p["C"]["on_cpu_gbps"]["triad"]
                                                   for p in pairs),
        "on_cpu_probe_over_c_2pass": statistics.median(p["probe"]["on_cpu_gbps"]["triad"]
                                                       / p["C"]["triad_2pass_on_cpu_gbps"] for p in pairs)}
    for k in KERNELS:
        ref_all = [p["C"]["gbps"][k] for p in pairs]
        kept = [p for p in pairs if not p["flags"][k]]
        ratios = [p["ratio"][k] for p in kept]
        summary[k] = {
            "reference_gbps": {"min": min(ref_all), "median": statistics.median(ref_all), "max": max(ref_all),
                               "spread": (max(ref_all) - min(ref_all)) / statistics.median(ref_all)},
            "pairs_kept": len(kept),
            "flagged_reference_moved": sum("reference-moved" in p["flags"][k] for p in pairs),
            "flagged_cpu_starved": sum("cpu-starved" in p["flags"][k] for p in pairs),
            "median_ratio": statistics.median(ratios) if ratios else None,
            "min_ratio": min(ratios) if ratios else None,
            "max_ratio": max(ratios) if ratios else None,
            "best_ratio": (max(p["probe"]["gbps"][k] for p in kept) / max(p["C"]["gbps"][k] for p in kept)
                           if kept else None),
            # Over CPU time, every pair (other processes taking the CPUs do not lengthen it; the GIL
            # waits of the probe's threads are not in it either, so it flatters the probe slightly).
            "on_cpu_median_ratio": statistics.median(p["on_cpu_ratio"][k] for p in pairs),
        }
    decomposition = summary.pop("triad_decomposition")
    return {"moves": moves, "kernels": summary, "triad_decomposition": decomposition}


def _fmt(x: Optional[float], spec: str = ".3f") -> str:
    return "n/a" if x is None else format(x, spec)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=10, help="round pairs (even; default 10)")
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--ntimes", type=int, default=10, help="iterations per round, the first discarded")
    ap.add_argument("--drift", type=float, default=0.10,
                    help="a reference move larger than this share between the rounds around a probe flags it")
    ap.add_argument("--min-cpu-share", type=float, default=0.75,
                    help="a kernel whose busiest thread was on a CPU for less of its wall time flags the pair "
                    "for that kernel (0 disables)")
    ap.add_argument("--array-mib", type=int, help="MiB per array (default 4x the last-level cache, at least 64; "
                    "smaller arrays measure caches, not DRAM)")
    ap.add_argument("--json", type=Path, help="also write every round and the summary here")
    args = ap.parse_args()
    if args.pairs < 2 or args.ntimes < 2 or args.threads < 1 or (args.array_mib is not None and args.array_mib < 1):
        print("need --pairs >= 2, --ntimes >= 2, --threads >= 1 and --array-mib >= 1", file=sys.stderr)
        return 2
    cpus = sorted(os.sched_getaffinity(0))[: args.threads]
    if len(cpus) < args.threads:
        print(f"--threads {args.threads}: only {len(cpus)} CPU(s) in this process's affinity", file=sys.stderr)
        return 2
    if not shutil.which("gcc"):
        print("gcc not found: cannot build the C reference (install gcc)", file=sys.stderr)
        return 2
    pairs_n = args.pairs + args.pairs % 2
    llc = llc_bytes() or 32 * 1024 ** 2
    array_bytes = args.array_mib * 1024 ** 2 if args.array_mib else max(4 * llc, 64 * 1024 ** 2)
    n = array_bytes // 8 // args.threads * args.threads
    block = triad_block(l2_bytes())
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), OMP_PROC_BIND="true",
               OMP_PLACES=",".join(f"{{{c}}}" for c in cpus))
    print(f"arrays: {n * 8 / 2 ** 20:.0f} MiB each ({n * 8 / llc:.1f}x LLC of {llc / 2 ** 20:.0f} MiB), "
          f"{args.threads} thread(s) on CPUs {cpus}, {pairs_n} pairs of rounds of {args.ntimes} iterations "
          f"(first discarded), order C-probe / probe-C alternating; triad blocks of {block} elements", flush=True)
    pairs: List[Dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        exe = Path(tmp) / "stream_ref"
        build = subprocess.run(["gcc", "-O3", "-fopenmp", "-march=native", str(HERE / "stream_ref.c"), "-o",
                                str(exe)], capture_output=True, text=True)
        if build.returncode != 0:
            print(f"building the C reference failed:\n{build.stderr}", file=sys.stderr)
            return 2
        hdr = "  ".join(f"{k:>17}" for k in KERNELS)
        print(f"{'pair':>4} {'order':>7}  {hdr}  {'triad C 2-pass':>14}   cpu share C/probe  cpu pressure")
        print(f"{'':>4} {'':>7}  " + "  ".join(f"{'C':>5} {'probe':>5} {'ratio':>5}" for _ in KERNELS)
              + f"  {'GB/s':>5} {'probe/':>8}")
        try:
            for i in range(pairs_n):
                pair: Dict[str, Any] = {"pair": i, "order": "C-probe" if i % 2 == 0 else "probe-C"}
                for side in (("C", "probe") if i % 2 == 0 else ("probe", "C")):
                    if side == "C":
                        pair["C"] = run_reference(exe, n, args.ntimes, block, env, args.threads)
                    else:
                        pair["probe"] = run_probe(n, args.ntimes, cpus, llc, args.threads)
                pairs.append(pair)
                c, p = pair["C"], pair["probe"]
                cols = "  ".join(f"{c['gbps'][k]:5.1f} {p['gbps'][k]:5.1f} {p['gbps'][k] / c['gbps'][k]:5.2f}"
                                 for k in KERNELS)
                press = "/".join(_fmt(x["cpu_pressure"], ".2f") for x in (c, p))
                two = c["triad_2pass_gbps"]
                print(f"{i:>4} {pair['order']:>7}  {cols}  {two:5.1f} {p['gbps']['triad'] / two:8.2f}"
                      f"   {min(c['cpu_share'].values()):.2f}/{min(p['cpu_share'].values()):.2f}"
                      f"          {press}", flush=True)
        except (RuntimeError, ValueError, OSError) as exc:
            print(f"round {len(pairs)} failed: {exc}", file=sys.stderr)
            return 2
    result = analyse(pairs, args.drift, args.min_cpu_share)
    groups: Dict[tuple, List[Dict[str, Any]]] = {}
    for m in result["moves"]:
        groups.setdefault((m["from_pair"], m["to_pair"]), []).append(m)
    for (pa, pb), ms in groups.items():
        what = ", ".join(f"{m['kernel']} {m['from_gbps']:.1f}->{m['to_gbps']:.1f} ({m['move']:+.0%})" for m in ms)
        if ms[0]["flags"]:
            print(f"reference moved > {args.drift:.0%} around the probe rounds of pairs {pa} and {pb} "
                  f"(both flagged for these kernels): {what}")
        else:
            print(f"reference moved > {args.drift:.0%} between back-to-back reference rounds of pairs {pa} and {pb} "
                  f"(no probe in between, nothing flagged): {what}")
    print(f"\n{'kernel':7} {'C GB/s min/med/max':>20} {'spread':>7} {'pairs kept':>10} {'ref moved':>9} "
          f"{'cpu-starved':>11} {'median ratio':>12} {'range':>13} {'best/best':>9} {'on-CPU median':>13}")
    for k in KERNELS:
        s = result["kernels"][k]
        r = s["reference_gbps"]
        rng = f"{_fmt(s['min_ratio'], '.2f')}-{_fmt(s['max_ratio'], '.2f')}"
        print(f"{k:7} {r['min']:6.1f}/{r['median']:5.1f}/{r['max']:5.1f} {r['spread']:7.0%} "
              f"{s['pairs_kept']:>5}/{pairs_n:<4} {s['flagged_reference_moved']:>9} {s['flagged_cpu_starved']:>11} "
              f"{_fmt(s['median_ratio']):>12} {rng:>13} {_fmt(s['best_ratio']):>9} {_fmt(s['on_cpu_median_ratio']):>13}")
    d = result["triad_decomposition"]
    print(f"triad, unflagged pairs: C two-pass blocked / C fused {_fmt(d['c_2pass_over_c'])} (what two passes cost "
          f"compiled code), probe / C two-pass {_fmt(d['probe_over_c_2pass'])} (what Python and numpy add); "
          f"on CPU time, all pairs: {_fmt(d['on_cpu_c_2pass_over_c'])} and {_fmt(d['on_cpu_probe_over_c_2pass'])}")
    shares = [v for p in pairs for x in (p["C"], p["probe"]) for v in x["cpu_share"].values()]
    press_all = [x["cpu_pressure"] for p in pairs for x in (p["C"], p["probe"]) if x["cpu_pressure"] is not None]
    print(f"share of a kernel's wall time its busiest thread was on a CPU: median {statistics.median(shares):.2f} "
          f"(min {min(shares):.2f}); some task waiting for a CPU: "
          + (f"median {statistics.median(press_all):.0%} of each round" if press_all else "no PSI on this host"))
    if args.json:
        args.json.write_text(json.dumps({"arrays_bytes": n * 8, "llc_bytes": llc, "threads": args.threads,
                                         "triad_block_elements": block,
                                         "cpus": cpus, "ntimes": args.ntimes, "drift": args.drift,
                                         "min_cpu_share": args.min_cpu_share, "pairs": pairs, **result},
                                        indent=1))
    short = [k for k in GOAL_KERNELS if result["kernels"][k]["pairs_kept"] < MIN_PAIRS]
    if short:
        print(f"goal: not comparable: fewer than {MIN_PAIRS} unflagged pairs for {', '.join(short)} "
              f"(the reference moved or the CPUs were taken); run again when the machine is quieter")
        return 3
    missed = [k for k in GOAL_KERNELS if result["kernels"][k]["median_ratio"] < GOAL]
    print(f"goal: median {' and '.join(GOAL_KERNELS)} ratio >= {GOAL} x C over unflagged pairs: "
          + ("met" if not missed else f"MISSED ({', '.join(missed)})"))
    return 0 if not missed else 1


if __name__ == "__main__":
    sys.exit(main())
