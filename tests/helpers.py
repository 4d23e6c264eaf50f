"""Running pytest, the bundled suite or the `sits` command in a fresh interpreter (this one's), for the tests that
need a real process: a report written at session end, a signal, xdist, Slurm.

Every such run goes through :func:`pytest_command`: the same interpreter, the cache provider off.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterator, Mapping, Optional, Union

import pytest

#: The arguments that select the bundled conformance suite from anywhere.
SUITE = ("--pyargs", "pytest_sits.conformance")


def pytest_command(*args: str) -> list:
    """pytest in a fresh interpreter, this one, as the suite's commands start it (the folder it starts in kept off
    sys.path), with the cache provider off (nothing written into the tree)."""
    from pytest_sits.commands.base import pytest_argv

    return [*pytest_argv(), "-p", "no:cacheprovider", *args]


def run_pytest(*args: str, cwd: Union[str, Path], env: Optional[Mapping[str, str]] = None,
               timeout: float = 600) -> subprocess.CompletedProcess:
    """Run pytest to its end; ``stdout`` holds its output and its errors, as text."""
    return subprocess.run(pytest_command(*args), cwd=str(cwd), env=None if env is None else dict(env),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)


def start_pytest(*args: str, cwd: Union[str, Path], env: Optional[Mapping[str, str]] = None,
                 **popen: Any) -> subprocess.Popen:
    """Start pytest and return at once (a test that signals the run while it goes); output as in run_pytest."""
    return subprocess.Popen(pytest_command(*args), cwd=str(cwd), env=None if env is None else dict(env),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **popen)


@contextmanager
def pytest_running(*args: str, cwd: Union[str, Path], env: Optional[Mapping[str, str]] = None,
                   **popen: Any) -> Iterator[subprocess.Popen]:
    """``with pytest_running(...) as run:`` pytest started (start_pytest) for the block, which signals or kills it
    and reads its end; a run still going when the block ends (an assertion inside it failed) is killed and
    reaped, never left behind."""
    run = start_pytest(*args, cwd=cwd, env=env, **popen)
    try:
        yield run
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()


@dataclass
class SuiteRun:
    """One finished run of the bundled suite: its exit status, its output and the folder of its report."""

    returncode: int
    output: str
    report_dir: Path

    @property
    def report(self) -> Dict[str, Any]:
        return json.loads((self.report_dir / "sits-report.json").read_text())


def run_suite(report_dir: Path, *args: str, cwd: Optional[Union[str, Path]] = None, timeout: float = 600,
              junit: bool = False) -> SuiteRun:
    """The bundled conformance suite (``-q``) with its report written into ``report_dir`` (and its JUnit XML,
    ``junit.xml`` there, with ``junit``), from ``cwd`` (default: the folder above ``report_dir``). A run that
    writes no report fails the test, showing the end of its output."""
    report_dir = Path(report_dir)
    extra = [f"--junitxml={report_dir / 'junit.xml'}"] if junit else []
    proc = run_pytest(*SUITE, "-q", f"--sits-report-dir={report_dir}", *extra, *args,
                      cwd=report_dir.parent if cwd is None else cwd, timeout=timeout)
    if not (report_dir / "sits-report.json").is_file():
        pytest.fail(f"the suite ({' '.join(args)}) wrote no report into {report_dir} (exit {proc.returncode}):\n"
                    f"{proc.stdout[-3000:]}")
    return SuiteRun(proc.returncode, proc.stdout, report_dir)


def run_sits(*args: str, cwd: Union[str, Path], env: Optional[Mapping[str, str]] = None,
             timeout: float = 600) -> subprocess.CompletedProcess:
    """The `sits` command in a fresh interpreter; ``stdout`` holds its output and its errors, as text."""
    return subprocess.run([sys.executable, "-m", "pytest_sits.cli", *args], cwd=str(cwd),
                          env=None if env is None else dict(env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=timeout)


def node_dir(out: Path, node: str, src: Optional[Path] = None, started: bool = True) -> Path:
    """A node's folder of a fleet run, as the node runner leaves it: ``node.json`` when ``started``, and with
    ``src`` (a report folder) its files (the report as written on host ``node``) and ``node-exit.json``; without,
    a node that started and wrote nothing."""
    d = out / node
    d.mkdir(parents=True)
    if started:
        (d / "node.json").write_text(json.dumps({"node": node, "started_at": "2026-01-01T00:00:00Z",
                                                 "job_nodelist": None}))
    if src is not None:
        for f in src.iterdir():
            shutil.copy(f, d / f.name)
        report = d / "sits-report.json"
        if report.is_file():  # each node's own run: written on that host (a byte-identical copy is a finding)
            data = json.loads(report.read_text())
            data["environment"]["hostname"] = node
            report.write_text(json.dumps(data, indent=1))
        (d / "node-exit.json").write_text(json.dumps({"node": node, "exit_code": 0}))
    return d


def served_pid(log: Path, seen: str = "ready", seconds: float = 120) -> int:
    """The pid of the simulated serving stack (``pytest_sits.inference.simserve``) whose log is ``log``, once the log
    says ``seen``."""
    import re
    import time

    deadline = time.monotonic() + seconds
    text = ""
    while time.monotonic() < deadline:
        text = log.read_text() if log.is_file() else ""
        if seen in text:
            return int(re.search(r"starting \(pid (\d+)", text).group(1))
        time.sleep(0.1)
    raise AssertionError(f"the server's log never said {seen!r}: {text}")


def pid_gone(pid: int, within: float = 10.0) -> bool:
    """Whether the process ``pid`` is gone (signal 0 no longer reaches it) within ``within`` seconds."""
    import os
    import time

    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def group_gone(pid: int, seconds: float = 30) -> bool:
    """Whether no live process is left in the process group ``pid`` led, within ``seconds``."""
    import time

    from pytest_sits.inference.launch import group_members

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if group_members(pid) == []:
            return True
        time.sleep(0.1)
    return False


#: A profile's ``conditions:`` that turns the test environment's DRAM hold off: the serving tests measure the
#: serving path, and on a 2-core host the hold's injectors and the server share the CPUs, so the hold cannot keep
#: its band (every verdict INCONCLUSIVE, as it should be there); their verdicts then say the occupancy was not
#: measured.  tests/test_environment.py tests the hold itself.
NO_HOLD = "conditions:\n  environment: {dram_hold: false}\n"
#: The bundled ``host`` profile without the hold (the serving tests against a real server).
HOST_SERVED = "name: host-served\nextends: host\n" + NO_HOLD
