"""The DRAM hold in a process of its own (conditions/hold_process.py): its windows reach the measuring process, it
pauses and resumes, and it never outlives the block or its parent."""

import json
import os
import subprocess
import sys
import time
from contextlib import contextmanager

import pytest

from pytest_sits.conditions.bandwidth import hold_cpus
from pytest_sits.conditions.hold_process import HoldError, ProcessHold

from helpers import pid_gone


@contextmanager
def hold_child(peak_gbps, **kw):
    """The hold's child process as ProcessHold starts it (its spec), driven by hand; never left behind."""
    spec = ProcessHold(peak_gbps, cpus=sorted(os.sched_getaffinity(0))[:1], window_s=0.1, **kw).spec()
    proc = subprocess.Popen([sys.executable, "-m", "pytest_sits.conditions.hold_process", json.dumps(spec)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd="/")
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_the_hold_runs_in_a_child_and_its_windows_reach_the_measuring_process():
    hold = ProcessHold(2.0, 0.85, 0.92, cpus=sorted(os.sched_getaffinity(0))[:1], node=None, window_s=0.1)
    hold.min_in_band_share, hold.reserved_cpus = 0.95, [3]
    # what the measurements and the recorder use of a hold (conditions/bandwidth.py, conditions/environment.py)
    for name in ("evidence", "now", "wait", "starved", "timeline", "saturated_windows", "pause", "resume", "kernel",
                 "window_s", "progress", "peak_gbps", "clock"):
        assert hasattr(hold, name), name
    with hold:
        pid = hold._proc.pid
        assert pid != os.getpid() and not pid_gone(pid, 0.1)
        deadline = time.monotonic() + 20.0  # the child's interpreter starts first: slow on a loaded host
        running = hold.evidence()
        while time.monotonic() < deadline and running["windows"] < 3:
            time.sleep(0.1)
            running = hold.evidence()
        assert running["windows"] >= 3 and running["threads"] == 1 and "bindings" in running
        assert all(r["t"] >= 0 for r in running["timeline"])
        assert hold.timeline[-1]["t"] <= hold.clock()  # the child's window times are on the parent's clock
        hold.pause()
        time.sleep(0.4)
        hold.resume()
        time.sleep(0.4)
    assert pid_gone(pid)
    ev = hold.evidence()
    assert ev["windows"] >= running["windows"] and ev["stop_latency_s"] is not None
    assert any(r["phase"] == "paused" for r in ev["timeline"])
    assert ev["process"]["pid"] == pid and ev["min_in_band_share"] == 0.95 and ev["reserved_cpus"] == [3]
    # 2 GB/s asked of one thread: held in band, as the hold in process holds it
    assert ev["windows_in_band"] >= 0.5 * ev["windows"]


def test_an_exception_in_the_block_stops_the_child_and_keeps_its_windows():
    hold = ProcessHold(2.0, cpus=sorted(os.sched_getaffinity(0))[:1], window_s=0.1)
    with pytest.raises(KeyboardInterrupt):
        with hold:
            pid = hold._proc.pid
            time.sleep(0.5)
            raise KeyboardInterrupt
    assert pid_gone(pid) and hold.evidence()["windows"] >= 1


def test_a_child_that_cannot_hold_is_an_error_naming_why():
    with pytest.raises(ValueError):
        ProcessHold(0.0)
    hold = ProcessHold(2.0, 0.9, 0.5, cpus=[0])  # not a band: the child's BandwidthHold refuses it
    with pytest.raises(HoldError, match="ended before it held: the hold failed: ValueError: band"):
        with hold:
            pass
    assert hold._proc.poll() is not None


def test_the_child_stops_when_its_input_ends():
    """The parent gone (its end of the pipe closed, as when it is killed outright): the child stops the injectors
    and exits at once (SIGTERM to itself: 143), saying nothing more, since nobody reads it."""
    with hold_child(2.0, settle_timeout_s=2.0) as proc:
        first = json.loads(proc.stdout.readline())
        while "entered" not in first:
            first = json.loads(proc.stdout.readline())
        t0 = time.monotonic()
        proc.stdin.close()
        proc.stdout.read()
        assert proc.wait(10) == 143 and time.monotonic() - t0 < 5


def test_a_large_node_leaves_cpus_to_the_measurements():
    assert hold_cpus([0, 1]) == ([0, 1], [])
    assert hold_cpus(list(range(7))) == (list(range(7)), [])
    assert hold_cpus(list(range(16))) == (list(range(14)), [14, 15])
    cpus, left = hold_cpus(list(range(112)))
    assert len(left) == 14 and len(cpus) == 98 and not set(cpus) & set(left)
    assert hold_cpus(list(range(8))) == (list(range(6)), [6, 7])


def test_a_starved_hold_in_its_process_is_paused_re_measured_and_resumed():
    """Asked for far more than the DRAM gives, the injectors run flat out below the band: the child says so, the
    measuring side pauses it, re-measures the peak and resumes it (each re-measurement in the evidence), as with a
    hold in process."""
    from pytest_sits.conditions.bandwidth import MAX_REMEASURES, acquire_hold
    from contextlib import contextmanager

    peak = {"kernels": {"copy": {"gbps_median": 10_000.0}}, "validated": True}
    made = []

    @contextmanager
    def factory():
        hold = ProcessHold(10_000.0, cpus=sorted(os.sched_getaffinity(0))[:1], window_s=0.1, settle_timeout_s=0.5)
        made.append(hold)
        with hold:
            yield hold
    measured = []

    def remeasure():
        measured.append(time.monotonic())
        return {"gbps": 10_000.0, "cpu_share": 1.0}
    ev = acquire_hold(peak, factory, 2.0, remeasure=remeasure)
    hold = made[0]
    assert hold.saturated_windows == 5 and 2 <= len(measured) <= MAX_REMEASURES + 1  # during it, and after it
    assert "injectors saturated below the band for 5 windows" in json.dumps(ev)
    assert pid_gone(hold._proc.pid)


def _hold_children(parent):
    """The hold processes whose parent is ``parent`` (from /proc)."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{d}/cmdline", "rb") as f:
                cmd = f.read()
        except (OSError, ValueError, IndexError):
            continue
        if ppid == parent and b"pytest_sits.conditions.hold_process" in cmd:
            out.append(int(d))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("how", ["SIGTERM", "SIGINT", "SIGKILL"])
def test_a_run_stopped_during_the_live_hold_leaves_no_hold_process(tmp_path, how):
    """MEM-BW-HOLD on this machine, stopped while its hold runs: the run stops the hold's process (it ignores
    SIGINT itself) and writes its report; killed outright, the hold dies with it (the parent-death signal)."""
    import signal

    from helpers import SUITE, pytest_running

    with pytest_running(*SUITE, "--sits-level=standard", "-m", "MEM-BW-HOLD", f"--sits-report-dir={tmp_path / 'r'}",
                        cwd=tmp_path) as run:
        deadline = time.monotonic() + 120
        kids = []
        while not kids and time.monotonic() < deadline and run.poll() is None:
            time.sleep(0.2)
            kids = _hold_children(run.pid)
        assert kids, "the hold's process never started"
        time.sleep(1.0)
        run.send_signal(getattr(signal, how))
        out, _ = run.communicate(timeout=120)
    assert all(pid_gone(k) for k in kids), f"a hold process outlived the run ({how})"
    if how != "SIGKILL":
        report = json.loads((tmp_path / "r" / "sits-report.json").read_text())
        assert report["run"]["completed"] is False and report["run"]["interrupts"][0]["signal"] == how, out[-2000:]


def test_a_child_killed_while_it_settles_exits_at_once():
    """SIGTERM while the hold cannot reach its band (settling, up to its settle timeout): the child exits at once."""
    import signal

    with hold_child(10_000.0, settle_timeout_s=30.0) as proc:
        proc.stdout.readline()  # the first window: it runs, settling
        time.sleep(0.5)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 143 and time.monotonic() - t0 < 5


def test_the_windows_of_a_short_measurement_are_there_when_its_evidence_is_built():
    """The child streams its windows a window or so behind: the environment's block waits for them (caught_up)."""
    from pytest_sits.conditions.environment import hold_state

    hold = ProcessHold(2.0, cpus=sorted(os.sched_getaffinity(0))[:1], window_s=0.1)
    with hold:
        t0 = time.time()
        time.sleep(0.15)
        t1 = time.time()
        state = hold_state(hold)
        assert [w for w in state["windows"] if t0 <= w[0] <= t1 + 0.5]
    t = time.monotonic()
    hold.caught_up(5.0)  # a hold that ended has nothing more to wait for: no wait
    assert time.monotonic() - t < 0.5
