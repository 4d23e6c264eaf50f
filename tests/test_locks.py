"""Locks between processes: a private directory, files opened without following links, a timeout that names
the holder (and becomes an ERROR verdict), files removed on release."""

import os
import subprocess
import sys
import time

import pytest

from pytest_sits.conditions.locks import LockDirError, LockTimeout, exclusive, lock_dir
from pytest_sits.conditions.topology import acquire_numa_binding


def test_lock_dir_is_private_and_created_0700(tmp_path):
    d = lock_dir(tmp_path / "locks")
    assert d.is_dir() and (d.stat().st_mode & 0o777) == 0o700


def test_lock_dir_that_is_a_link_is_refused(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "locks").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(LockDirError, match="link"):
        lock_dir(tmp_path / "locks")


def test_planted_link_is_not_followed_nor_truncated(tmp_path):
    d = lock_dir(tmp_path / "locks")
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (d / "device-x.lock").symlink_to(victim)
    with pytest.raises(OSError):
        with exclusive("device-x", directory=d, timeout_s=1):
            pass
    assert victim.read_text() == "precious"


def test_timeout_names_the_holder(tmp_path):
    d = tmp_path / "locks"
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time\n"
        "from pytest_sits.conditions.locks import exclusive\n"
        f"with exclusive('dram-node0', purpose='DRAM bandwidth hold', directory={str(d)!r}):\n"
        "    print('held', flush=True)\n"
        "    time.sleep(30)\n")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        t0 = time.monotonic()
        with pytest.raises(LockTimeout) as exc:
            with exclusive("dram-node0", directory=d, timeout_s=0.5, poll_s=0.05):
                pass
        assert time.monotonic() - t0 < 10
        assert f"pid {holder.pid}" in str(exc.value) and "DRAM bandwidth hold" in str(exc.value)
    finally:
        holder.kill()
        holder.wait()


def test_lock_file_removed_on_release(tmp_path):
    d = lock_dir(tmp_path / "locks")
    with exclusive("device-y", directory=d) as info:
        assert os.path.exists(info["lock"])
    assert not os.path.exists(info["lock"])


def test_numa_binding_with_no_numa_nodes_is_skip_not_a_crash():
    class P:
        pass
    [(ev, subject)] = acquire_numa_binding(P(), {"numa": [], "accelerators": []}, None)
    assert "absent" in ev and "no NUMA node" in ev["absent"] and subject == "host"


def test_a_simulated_resource_belongs_to_its_run(tmp_path, monkeypatch):
    """Two runs' simulated devices of one name never share a lock; the workers of one run (one scope) do; a
    machine-wide resource is the same for every run."""
    from pytest_sits.conditions import locks

    monkeypatch.setattr(locks, "_SIM_SCOPE", None)
    locks.scope_simulated("1764752400.25")
    mine = locks.resource_name("device-0000:11:00.0", simulated=True)
    assert locks.resource_name("device-0000:11:00.0") == "device-0000:11:00.0"
    with exclusive("device-0000:11:00.0", "another run's health window", simulated=True, directory=tmp_path):
        locks.scope_simulated("1764752401.5")  # the other run, started a second later
        assert locks.resource_name("device-0000:11:00.0", simulated=True) != mine
        with exclusive("device-0000:11:00.0", "health window", simulated=True, directory=tmp_path,
                       timeout_s=0.5) as got:
            assert got["waited_for"] is None
        locks.scope_simulated("1764752400.25")  # a worker of the first run: waits for its sibling
        with pytest.raises(LockTimeout, match="another run's health window"):
            with exclusive("device-0000:11:00.0", simulated=True, directory=tmp_path, timeout_s=0.3, poll_s=0.05):
                pass


@pytest.mark.slow
def test_a_simulated_run_does_not_wait_for_a_lock_of_the_machine(pytester, conformance_args):
    """Another run holds every simulated accelerator's machine-wide lock name (as a live run of a machine with
    those addresses would): a simulated run takes its own and finishes (a wait would trip the watchdog)."""
    from contextlib import ExitStack

    from pytest_sits.platforms import from_spec

    bdfs = [a["bdf"] for a in from_spec("sim:h100-pcie").inventory()["accelerators"]]
    with ExitStack() as held:
        for bdf in bdfs:
            held.enter_context(exclusive(f"device-{bdf}", "another run"))
        res = pytester.runpytest(*conformance_args, "--sits-platform=sim:h100-pcie", "--sits-watchdog=120",
                                 "-k", "health")
    assert res.ret in (0, 10) and "INCOMPLETE" not in res.stdout.str()
    res.assert_outcomes(passed=len(bdfs) * 8)


def test_a_long_wait_names_the_holder_its_command_and_is_kept_for_the_evidence(tmp_path, monkeypatch):
    """A wait over WAIT_NOTICE_S (5 s; shortened here) is announced once with who holds the lock (pid, command,
    since when) and kept for the verdicts of the test that waited."""
    import threading

    from pytest_sits.conditions import locks

    monkeypatch.setattr(locks, "WAIT_NOTICE_S", 0.2)
    said = []
    locks.set_wait_notice(said.append)
    locks.take_waits()
    d = tmp_path / "locks"
    held, release = threading.Event(), threading.Event()

    def hold():
        with exclusive("device-0000:17:00.0", purpose="health window", directory=d):
            held.set()
            release.wait(10)
    t = threading.Thread(target=hold)
    t.start()
    try:
        assert held.wait(10)
        threading.Timer(0.6, release.set).start()
        with exclusive("device-0000:17:00.0", purpose="PLP-POWER", directory=d, poll_s=0.05) as got:
            pass
    finally:
        release.set()
        t.join(10)
        locks.set_wait_notice(None)
    assert got["waited_s"] > 0.2 and f"pid {os.getpid()}" in got["waited_for"]
    assert "health window" in got["waited_for"] and "since " in got["waited_for"]
    assert said[0].startswith("waiting for device-0000:17:00.0 (PLP-POWER): held by pid ")
    assert "`" in said[0]  # the holder's command line
    [wait] = locks.take_waits()
    assert wait["holder"]["pid"] == os.getpid() and wait["holder"]["command"] and wait["waited_s"] > 0.2
    assert locks.take_waits() == []


def test_a_short_wait_is_neither_announced_nor_kept(tmp_path):
    from pytest_sits.conditions import locks

    said = []
    locks.set_wait_notice(said.append)
    try:
        locks.take_waits()
        with exclusive("dram-node0", directory=tmp_path / "locks"):
            pass
    finally:
        locks.set_wait_notice(None)
    assert said == [] and locks.take_waits() == []


LAB_WAIT = '''
import pytest
from pytest_sits.conditions import locks
from pytest_sits.verdict import Verdict

@pytest.mark.sits_requirement("DEP-ECC")
def test_waited(sits_record):
    locks._WAITS.append({"resource": "device-x", "purpose": "health window", "waited_s": 7.5,
                         "held_by": "pid 1 (`pytest`) on h (health window, since 12:00:00)",
                         "holder": {"pid": 1, "command": "pytest"}})
    sits_record(Verdict("DEP-ECC", "PASS", "ok", subject="gpu0"))
'''


def test_the_wait_is_in_the_verdict_evidence(pytester, report_of):
    pytester.makepyfile(test_lab=LAB_WAIT)
    pytester.runpytest("--sits-platform=sim:h100", "-p", "no:cacheprovider")
    [v] = report_of(pytester.path)["verdicts"]
    assert v["evidence"]["lock_waits"][0]["waited_s"] == 7.5
    assert v["evidence"]["lock_waits"][0]["holder"]["command"] == "pytest"


XDIST_WAIT = '''
import threading
from pytest_sits.conditions import locks

def test_wait(tmp_path):
    locks.WAIT_NOTICE_S = 0.2
    held, release = threading.Event(), threading.Event()
    def hold():
        with locks.exclusive("device-x", purpose="other run", directory=tmp_path):
            held.set()
            release.wait(5)
    t = threading.Thread(target=hold)
    t.start()
    held.wait(5)
    threading.Timer(0.6, release.set).start()
    with locks.exclusive("device-x", purpose="mine", directory=tmp_path, poll_s=0.05):
        pass
    t.join()

def test_other():
    pass
'''


@pytest.mark.slow
def test_an_xdist_worker_announces_its_wait_on_the_terminal(tmp_path):
    from helpers import run_pytest

    (tmp_path / "test_w.py").write_text(XDIST_WAIT)
    proc = run_pytest("-n", "2", "--sits-report-dir=none", "test_w.py", cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:]
    line = next(x for x in proc.stdout.splitlines() if "sits: waiting for device-x (mine): held by pid" in x)
    assert "(`xdist worker gw" in line and "-n 2" in line and "other run, since" in line, line
