"""The DRAM hold in a process of its own: :class:`ProcessHold` runs a :class:`~.hold.BandwidthHold` in a child
(``python -m pytest_sits.conditions.hold_process SPEC``) and mirrors it in the measuring process.

Why a process: the hold's injectors are Python threads (numpy copies between token-bucket steps).  In the process
that measures they contend for its interpreter lock with the measuring thread, so a measurement taken under the
hold measured the lock, not the DRAM: on a 16-CPU H200 host the device copies of MEM-BW-EFFICIENCY read 591 to
4,226 GB/s, a host timer's jitter grew to milliseconds, and the injectors themselves fell out of the band.  In a
child they share only the DRAM (and the CPUs, which the kernel schedules), which is what the rule asks.

The protocol is JSON lines: the child writes ``{"entered": ...}`` once the hold settled, one ``{"rec": window}``
per window, ``{"starved": true}`` when the injectors ran flat out below the band (the peak is then re-measured by
the parent, as for a hold in process), and ``{"evidence": ...}`` after it stopped; the parent writes ``pause``,
``resume`` and ``stop``.  The child stops on ``stop`` (and says its evidence), and at once on SIGTERM or at the end
of its input: the parent is gone, killed outright too, since its end of the pipe closes with it (the end of input,
not the parent-death signal: that one follows the thread that started the child, which may end before the hold
should).  It ignores SIGINT, so a Ctrl-C reaches the run, which stops it and keeps its windows.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any, Callable, Dict, IO, List, Optional

from .hold import BandwidthHold, find_counter, progress_line, windows_summary


class HoldError(RuntimeError):
    """The hold's process could not start or hold."""


class ProcessHold:
    """A :class:`BandwidthHold` in a child process, with the same surface the measurements use."""

    #: Measures the peak again (set by the platform that made the hold).
    remeasure: Callable[[], Any]

    def __init__(self, peak_gbps: float, low: float = 0.85, high: float = 0.92, *, cpus: Optional[List[int]] = None,
                 node: Optional[int] = None, window_s: float = 0.1, settle_timeout_s: float = 10.0,
                 start_timeout_s: float = 60.0):
        if peak_gbps <= 0:
            raise ValueError("peak_gbps must be positive (measure it with stream_peak first)")
        self.peak_gbps, self.low, self.high = peak_gbps, low, high
        self.cpus = cpus or sorted(os.sched_getaffinity(0))
        self.threads = len(self.cpus)
        self.node, self.window_s = node, window_s
        self.settle_timeout_s, self.start_timeout_s = settle_timeout_s, start_timeout_s
        self.kernel = "copy"
        self.clock = time.perf_counter  # CLOCK_MONOTONIC: the child's window times are on this clock too
        self.timeline: List[Dict[str, Any]] = []
        self.starved = threading.Event()
        self._entered = threading.Event()
        self._done = threading.Event()
        self._final: Optional[Dict[str, Any]] = None
        self._static: Dict[str, Any] = {}
        self._lines: List[str] = []  # what the child said that is not protocol (its errors)
        self._proc: Optional[subprocess.Popen] = None
        self._reader: Optional[threading.Thread] = None
        self._lock = threading.Lock()
        self.stop_latency_s: Optional[float] = None
        #: Windows flat out below the band before the hold says it starved (the child's, once it held).
        self.saturated_windows = 5
        self._resumes = 0  # resumes sent: a starvation the child said before the last one is stale
        #: CPUs of the node left without an injector, for the measurements (set by the platform that made the hold)
        self.reserved_cpus: List[int] = []
        #: MEM-BW-HOLD's share of windows in band, for measurements under the hold to be judged by
        self.min_in_band_share: Optional[float] = None

    def spec(self) -> Dict[str, Any]:
        return {"peak_gbps": self.peak_gbps, "low": self.low, "high": self.high, "cpus": self.cpus,
                "node": self.node, "window_s": self.window_s, "settle_timeout_s": self.settle_timeout_s,
                "kernel": self.kernel}

    # -- the child --------------------------------------------------------
    def _read(self, out: IO[str]) -> None:
        for line in out:
            try:
                msg = json.loads(line)
            except ValueError:
                self._lines.append(line.rstrip()[:500])
                continue
            if not isinstance(msg, dict):
                continue
            if "rec" in msg:
                self.timeline.append(msg["rec"])
            elif msg.get("starved"):
                if int(msg.get("resumes") or 0) >= self._resumes:
                    self.starved.set()
            elif "entered" in msg:
                self._static = msg["entered"]
                self.saturated_windows = int(self._static.get("remeasure_after_windows") or self.saturated_windows)
                self._entered.set()
            elif "evidence" in msg:
                self._final = msg["evidence"]
        self._done.set()
        self._entered.set()  # a child that ended before it held: __enter__ stops waiting and says why

    def _send(self, word: str) -> None:
        proc = self._proc
        if proc is None or proc.stdin is None or proc.poll() is not None:
            return
        with self._lock:
            try:
                proc.stdin.write(word + "\n")
                proc.stdin.flush()
            except (BrokenPipeError, ValueError, OSError):
                pass

    def __enter__(self) -> ProcessHold:
        # its own session: a Ctrl-C reaches the run, which stops the child and keeps what it measured; the pipe to
        # its input is this process's alone (close_fds), so it closes when this process ends, however it ends
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "pytest_sits.conditions.hold_process", json.dumps(self.spec())],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
            start_new_session=True, cwd="/", close_fds=True)
        self.started_at = time.time()
        assert self._proc.stdout is not None
        self._reader = threading.Thread(target=self._read, args=(self._proc.stdout,), name="sits-hold-reader",
                                        daemon=True)
        self._reader.start()
        try:
            if not self._entered.wait(self.start_timeout_s + self.settle_timeout_s):
                raise HoldError(f"the DRAM hold's process did not start within "
                                f"{self.start_timeout_s + self.settle_timeout_s:.0f} s")
            if not self._static:
                raise HoldError("the DRAM hold's process ended before it held: "
                                + (" | ".join(self._lines[-5:]) or f"exit status {self._proc.wait(5)}"))
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        t0 = time.perf_counter()
        proc = self._proc
        if proc is None:
            return
        self._send("stop")
        try:
            if proc.stdin is not None:
                proc.stdin.close()
        except OSError:
            pass
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.terminate()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self._reader is not None:
            self._reader.join(5)
        self.stop_latency_s = time.perf_counter() - t0

    def caught_up(self, timeout_s: float = 1.0) -> bool:
        """Wait until the child's windows up to now have arrived (they are streamed, a window or so behind), at most
        ``timeout_s``: a block of evidence built right after a short measurement sees the windows it spanned.
        False when they did not come in time (the child stopped, or is late)."""
        target = self.clock() - self.window_s
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.timeline and self.timeline[-1].get("t", 0.0) >= target:
                return True
            if self._done.is_set():
                return False
            time.sleep(0.01)
        return False

    # -- what the measurements use ----------------------------------------------
    def now(self) -> float:
        return time.monotonic()

    def wait(self, seconds: float) -> None:
        time.sleep(seconds)

    def pause(self) -> None:
        self._send("pause")

    def resume(self) -> None:
        self._resumes += 1
        self.starved.clear()
        self._send("resume")

    def progress(self) -> str:
        return progress_line(self.timeline, self.peak_gbps)

    def evidence(self) -> Dict[str, Any]:
        """The child's own evidence once it stopped; while it runs, the same shape from the windows received."""
        if self._final is not None:
            ev = dict(self._final)
        else:
            ev = dict(self._static, band=[self.low, self.high], peak_gbps=self.peak_gbps, peak_kernel=self.kernel,
                      window_s=self.window_s, **windows_summary(self.timeline))
        ev["process"] = {"pid": self._proc.pid if self._proc else None, "stop_latency_s": self.stop_latency_s,
                         "why": "the injectors run in a process of their own: in the measuring process they would "
                                "contend for its interpreter lock with the measurement",
                         "messages": self._lines[-10:]}
        ev["min_in_band_share"] = self.min_in_band_share
        ev["reserved_cpus"] = self.reserved_cpus
        return ev


# -- the child's side ------------------------------------------------------------

def _child(spec: Dict[str, Any]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    def term(signum: int, frame: Any) -> None:
        # at once, wherever the main thread is (settling too): the injectors stop as the hold's block unwinds
        raise SystemExit(128 + signum)
    signal.signal(signal.SIGTERM, term)
    stop = threading.Event()
    out_lock = threading.Lock()

    def say(msg: Dict[str, Any]) -> None:
        with out_lock:
            sys.stdout.write(json.dumps(msg, default=str) + "\n")
            sys.stdout.flush()

    found = find_counter()
    hold = BandwidthHold(float(spec["peak_gbps"]), float(spec["low"]), float(spec["high"]), cpus=spec["cpus"],
                         node=spec["node"], window_s=float(spec["window_s"]),
                         settle_timeout_s=float(spec["settle_timeout_s"]), counter=found["counter"],
                         counter_reason=found["reason"])
    hold.kernel = spec.get("kernel") or "copy"

    resumes = [0]

    def commands() -> None:
        for line in sys.stdin:
            word = line.strip()
            if word == "pause":
                hold.pause()
            elif word == "resume":
                resumes[0] += 1
                hold.resume()
            elif word == "stop":
                stop.set()
                return
        # the end of input without "stop": the parent is gone (killed, maybe): stop at once
        os.kill(os.getpid(), signal.SIGTERM)
    threading.Thread(target=commands, name="sits-hold-commands", daemon=True).start()

    sent = 0
    starved_said = False

    def flush() -> None:
        nonlocal sent, starved_said
        rows = hold.timeline[sent:]
        for r in rows:
            say({"rec": r})
        sent += len(rows)
        if hold.starved.is_set() and not starved_said:
            say({"starved": True, "resumes": resumes[0]})
        starved_said = hold.starved.is_set()

    with hold:
        ev = hold.evidence()
        flush()
        say({"entered": {k: ev[k] for k in ("threads", "cpus", "node", "bindings", "source", "counter_reason",
                                             "remeasure_after_windows")}})
        while not stop.wait(hold.window_s / 2):
            flush()
    flush()
    say({"evidence": hold.evidence()})
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m pytest_sits.conditions.hold_process SPEC-JSON", file=sys.stderr)
        return 4
    try:
        return _child(json.loads(args[0]))
    except Exception as exc:  # noqa: BLE001 - said on the protocol's stream, for the parent to report
        print(f"the hold failed: {type(exc).__name__}: {exc}", flush=True)
        return 1


if __name__ == "__main__":  # pragma: no cover - run as a module
    sys.exit(main())
