"""The run's start is the process's: the report's duration_s covers the imports before the suite is configured."""

import os
import time

from pytest_sits.plugin.clock import process_started_at


def _proc(tmp_path, start_ticks, uptime, comm="python (x) y"):
    (tmp_path / "self").mkdir()
    fields = ["S"] + ["0"] * 18 + [str(start_ticks)] + ["0"] * 30
    (tmp_path / "self" / "stat").write_text(f"123 ({comm}) " + " ".join(fields) + "\n")
    (tmp_path / "uptime").write_text(f"{uptime} 0.0\n")
    return str(tmp_path)


def test_the_process_start_is_read_from_proc(tmp_path):
    ticks = os.sysconf("SC_CLK_TCK")
    proc = _proc(tmp_path, start_ticks=1000 * ticks, uptime=1012.5)  # started 12.5 s ago
    assert process_started_at(now=5000.0, proc=proc) == 5000.0 - 12.5


def test_an_unreadable_or_senseless_start_is_now(tmp_path):
    assert process_started_at(now=7.0, proc=str(tmp_path / "none")) == 7.0
    older = _proc(tmp_path, start_ticks=0, uptime=10 * 86400)  # a process ten days old: not this run's
    assert process_started_at(now=7.0, proc=older) == 7.0


def test_this_process_started_before_its_tests():
    """pytest has imported itself and collected before any test runs: this process is older than that."""
    assert os.path.exists("/proc/self/stat")
    assert time.time() - process_started_at() > 0.2
