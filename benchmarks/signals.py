"""Interrupt runs of the suite at random moments and count what each one leaves behind.

    python benchmarks/signals.py [--runs 20] [--level standard] [--platform live] [--seed 2026]

Each run starts the bundled suite in a folder of its own (its own TMPDIR and lock directory) and, at a moment
drawn at random over the run's expected length, sends one of: SIGTERM, SIGINT, two SIGINTs 0.2 s apart,
SIGTERM to the whole process group (what Slurm and systemd do), or SIGTERM while the report is being written
(when its temporary file appears), SIGTERM to the group the moment pytest-xdist has started a worker process
("at worker start", the run forced under xdist), or SIGTERM within the first 0.4 s of the process ("at start-up":
Python and pytest still loading, maybe before pytest-sits has taken the signals over); a share of the other runs
use pytest-xdist (-n 2).  After the run ends it checks:

* a valid INCOMPLETE pair: ``sits-report.json`` that the one report reader accepts (schema included), with
  ``run.completed`` false, and ``sits-report.html`` of the same run (a run that finished before the signal
  counts apart, as "finished first", with a valid completed pair);
* no process of the run left (workers, the cold-start subprocess, gloo peers), no lock file, no temporary file
  in the report folder, no scratch folder (sits-run-*, sits-sim-*) in its TMPDIR;
* the run ended within 120 s of the signal, without a traceback.

A run that Python's default action ended (exit -15: the signal came before pytest-sits took it over, which it does
before the conftests are imported and long before anything is measured) has no report by design; it counts as
"before the plugin", and must still leave no process, lock or temporary file.

It prints one line per run and the totals; the exit status is 1 when any run missed a check.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List

KINDS = ("SIGTERM", "SIGINT", "SIGINT x2", "SIGTERM group", "SIGTERM while writing", "SIGTERM group at worker start",
         "SIGTERM at start-up")


def _processes_with(marker: str) -> List[str]:
    """Command lines of live processes whose command line or environment names ``marker`` (the run's folder)."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
            env = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
        if marker in cmd or marker.encode() in env:
            found.append(f"{pid}: {cmd[:120]}")
    return found


def _workers(pid: int) -> List[int]:
    """pytest-xdist's workers of ``pid`` once started: its children running execnet's bootstrap (``python -c
    "import sys;exec(eval(sys.stdin.readline()))"``); not the short-lived commands plugins run at import (git)."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
                cmd = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid and b"sys.stdin" in cmd:
                out.append(int(entry))
    return out


def one_run(i: int, kind: str, xdist: bool, when: float, args: argparse.Namespace) -> Dict[str, Any]:
    from pytest_sits.files import UntrustedInputError
    from pytest_sits.report.store import read_report

    work = Path(tempfile.mkdtemp(prefix=f"sits-signal-{i:02d}-"))
    tmp, runtime, report_dir = work / "tmp", work / "runtime", work / "report"
    for d in (tmp, runtime):
        d.mkdir(mode=0o700)
    env = dict(os.environ, TMPDIR=str(tmp), XDG_RUNTIME_DIR=str(runtime), SITS_SIGNAL_RUN=str(work),
               PYTHONUNBUFFERED="1")
    env.pop("PYTEST_ADDOPTS", None)
    cmd = [sys.executable, "-m", "pytest", "--pyargs", "pytest_sits.conformance", f"--sits-level={args.level}",
           f"--sits-report-dir={report_dir}", "-p", "no:cacheprovider", "-q"]
    if args.platform != "live":
        cmd.append(f"--sits-platform={args.platform}")
    if xdist:
        cmd += ["-n", "2"]
    started = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    sent_at = None
    if kind == "SIGTERM while writing":
        deadline = started + args.expected * 3
        while proc.poll() is None and time.monotonic() < deadline:
            if report_dir.is_dir() and any(p.name.endswith(".tmp") for p in report_dir.iterdir()):
                break
            time.sleep(0.002)
    elif kind == "SIGTERM group at worker start":
        deadline = started + args.expected * 3
        while proc.poll() is None and time.monotonic() < deadline and not _workers(proc.pid):
            time.sleep(0.002)
        time.sleep(when)
    elif kind == "SIGTERM at start-up":
        time.sleep(when)
    else:
        while proc.poll() is None and time.monotonic() - started < when:
            time.sleep(0.05)
    sent_wall = None
    if proc.poll() is None:
        sent_at, sent_wall = time.monotonic() - started, time.time()
        if kind in ("SIGTERM group", "SIGTERM group at worker start"):
            os.killpg(proc.pid, signal.SIGTERM)
        elif kind == "SIGINT x2":
            proc.send_signal(signal.SIGINT)
            time.sleep(0.2)
            proc.send_signal(signal.SIGINT)
        else:
            proc.send_signal(signal.SIGINT if kind == "SIGINT" else signal.SIGTERM)
    hung = False
    try:
        out, _ = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        hung = True
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
    time.sleep(1.0)  # let killed children be reaped before looking for them
    jpath, hpath = report_dir / "sits-report.json", report_dir / "sits-report.html"
    # The run had written its report before the signal came (the process was only exiting): it finished first.
    finished_first = sent_at is None or (jpath.exists() and jpath.stat().st_mtime < sent_wall
                                         and kind != "SIGTERM while writing")
    # Python's default action ended it: the signal came before pytest-sits took SIGINT/SIGTERM over.
    before_plugin = proc.returncode in (-signal.SIGTERM, -signal.SIGINT) and not jpath.exists()
    problems: List[str] = []
    left = _processes_with(str(work))
    if left:
        problems.append(f"{len(left)} process(es) left: {left[0]}")
        for line in left:
            try:
                os.kill(int(line.split(":")[0]), signal.SIGKILL)
            except (OSError, ValueError):
                pass
    locks = [p.name for p in runtime.rglob("*") if p.is_file()]
    if locks:
        problems.append(f"lock file(s) left: {locks[:3]}")
    temps = [p.name for p in report_dir.glob(".*.tmp")] if report_dir.is_dir() else []
    if temps:
        problems.append(f"temporary file(s) left: {temps[:3]}")
    scratch = [p.name for p in tmp.glob("sits-*")] + [p.name for p in tmp.glob("*/sits-sim-*")]
    if scratch:
        problems.append(f"scratch folder(s) left: {scratch[:3]}")
    if hung:
        problems.append("did not end within 120 s of the signal")
    if "Traceback (most recent call last)" in out and not finished_first:
        problems.append("a traceback: " + out[out.index("Traceback"):][:300].replace("\n", " | "))
    if proc.returncode in (-signal.SIGSEGV, -signal.SIGABRT, 134, 139):
        problems.append(f"crashed (exit {proc.returncode})")
    report = None
    if before_plugin and kind == "SIGTERM at start-up":
        pass  # documented: no report, nothing measured (the checks above still apply)
    else:
        try:
            report = read_report(jpath)
        except (UntrustedInputError, OSError) as exc:
            problems.append(f"no valid JSON report ({str(exc)[:160]})")
    if report is not None:
        completed = report["run"]["completed"]
        # A signal that lands while the report is written leaves this run's whole, completed pair (interrupts.py).
        while_writing = kind == "SIGTERM while writing" or "while the report is written" in out
        if not finished_first and completed and not while_writing:
            problems.append("the report says completed although the run was interrupted")
        if finished_first and not completed:
            problems.append("finished before the signal, but the report says incomplete")
        try:
            html = hpath.read_text(encoding="utf-8")
        except OSError:
            problems.append("no HTML report beside the JSON")
        else:
            if report["run"]["started_at"] not in html or not html.rstrip().endswith("</html>"):
                problems.append("the HTML is not the rendering of this JSON, or it is cut")
    result = {"run": i, "kind": kind, "xdist": xdist, "before_plugin": before_plugin,
              "signal_at_s": None if sent_at is None else round(sent_at, 2),
              "exit": proc.returncode, "finished_first": finished_first,
              "completed": None if report is None else report["run"]["completed"],
              "result": None if report is None else report["summary"]["result"], "problems": problems,
              "duration_s": round(time.monotonic() - started, 1)}
    if problems and args.failures:
        Path(args.failures).mkdir(parents=True, exist_ok=True)
        (Path(args.failures) / f"run-{i:02d}.log").write_text(out)
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return result


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--level", default="standard", choices=["quick", "standard", "full"])
    ap.add_argument("--platform", default="live", help="live (default) or sim:PROFILE[+fault,...]")
    ap.add_argument("--expected", type=float, default=90.0,
                    help="seconds an uninterrupted run takes here (signals are sent within 5%%..95%% of it)")
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--keep", action="store_true", help="keep each run's folder")
    ap.add_argument("--json", metavar="OUT", help="also write the results as JSON")
    ap.add_argument("--failures", metavar="DIR", help="keep the whole output of every run that missed a check here")
    ap.add_argument("--kind", action="append", choices=KINDS, help="only these signals (repeatable; default: all, "
                                                                     "in turn)")
    ap.add_argument("--xdist", choices=["share", "always", "never"], default="share",
                    help="run under pytest-xdist -n 2: every fourth run (default), always or never")
    ap.add_argument("--window", type=float, nargs=2, default=(0.05, 0.95), metavar=("FROM", "TO"),
                    help="signal between these shares of --expected (default 0.05 0.95)")
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    results = []
    kinds = args.kind or list(KINDS)
    for i in range(args.runs):
        kind = kinds[i % len(kinds)]
        xdist = {"share": i % 4 == 3, "always": True, "never": False}[args.xdist]
        when = rng.uniform(*args.window) * args.expected
        if kind == "SIGTERM group at worker start":
            xdist, when = True, rng.uniform(0.0, 0.1)
        elif kind == "SIGTERM at start-up":
            when = rng.uniform(0.0, 0.4)
        r = one_run(i, kind, xdist, when, args)
        results.append(r)
        state = "ok" if not r["problems"] else "MISSED: " + "; ".join(r["problems"])
        print(f"run {i:2d} {kind:22s} {'xdist' if xdist else 'serial':6s} signal at "
              f"{'-' if r['signal_at_s'] is None else r['signal_at_s']:>6} s, exit {r['exit']}, "
              f"{'before the plugin' if r['before_plugin'] else 'finished first' if r['finished_first'] else r['result']}"
              f": {state}", flush=True)
    good = sum(1 for r in results if not r["problems"])
    early = [r for r in results if r["before_plugin"]]
    interrupted = [r for r in results if not r["finished_first"] and not r["before_plugin"]]
    pairs = sum(1 for r in interrupted if not r["problems"])
    print(f"\n{good} of {len(results)} runs met every check; {pairs} of {len(interrupted)} interrupted runs left a "
          f"valid INCOMPLETE (or, signalled while writing, whole) JSON+HTML pair; "
          f"{sum(1 for r in results if any('process' in p for p in r['problems']))} left processes, "
          f"{sum(1 for r in results if any('lock' in p for p in r['problems']))} locks, "
          f"{sum(1 for r in results if any('temporary' in p or 'scratch' in p for p in r['problems']))} temp files; "
          f"{sum(1 for r in results if r['finished_first'] and not r['before_plugin'])} finished before their signal; "
          f"{len(early)} signalled before pytest-sits took the signals over (no report by design, "
          f"{sum(1 for r in early if r['problems'])} left anything)")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0 if good == len(results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
