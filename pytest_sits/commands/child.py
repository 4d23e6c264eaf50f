"""The pytest child of a command (``sits audit``, ``sits health``, the fleet node): started in a process group of
its own, sent every SIGINT, SIGTERM and SIGHUP the command receives, and never left behind.

* A signal to the command is forwarded to the child's whole group, once; the command then waits (``grace_s``) for
  the child to write its INCOMPLETE report pair, and kills the group if it does not end by then.
* Where the command itself is killed outright (SIGKILL, ``timeout -k``), the kernel sends the child SIGTERM as its
  parent dies (Linux ``PR_SET_PDEATHSIG``), so the child writes its report and ends instead of measuring on.
* A ``timeout_s`` kills the group (SIGKILL) when it passes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

#: Seconds a signalled child gets to write its INCOMPLETE report before its group is killed.
GRACE_S = 30.0
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@dataclass
class ChildResult:
    returncode: int
    output: str = ""
    #: The signals the command received and forwarded, by name.
    signals: List[str] = field(default_factory=list)
    timed_out: bool = False
    #: The group was killed (SIGKILL): the grace after a signal, or the timeout, passed.
    killed: bool = False


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGTERM), 0, 0, 0)  # PR_SET_PDEATHSIG
    except Exception:  # noqa: BLE001 - not Linux: the forwarding handlers still apply
        pass


def _killpg(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def run_child(cmd: Sequence[str], *, cwd: Optional[Union[str, os.PathLike]] = None,
              env: Optional[Mapping[str, str]] = None, stdout: Any = subprocess.PIPE,
              timeout_s: Optional[float] = None, grace_s: float = GRACE_S,
              on_signal: Optional[Any] = None) -> ChildResult:
    """Run ``cmd`` to its end (see the module's docstring).  ``stdout``: PIPE (the output is returned, stderr with
    it) or a file; ``on_signal(name)``: called when a signal is forwarded (to record it)."""
    linux = sys.platform.startswith("linux")
    proc = subprocess.Popen(list(cmd), cwd=cwd, env=None if env is None else dict(env), stdout=stdout,
                            stderr=subprocess.STDOUT, text=stdout is subprocess.PIPE, start_new_session=True,
                            preexec_fn=_die_with_parent if linux else None)
    result = ChildResult(returncode=0)
    killer: Dict[str, Optional[threading.Timer]] = {"timer": None}

    def kill_group() -> None:
        result.killed = True
        _killpg(proc.pid, signal.SIGKILL)

    def forward(signum: int, frame: object) -> None:
        name = signal.Signals(signum).name
        result.signals.append(name)
        if on_signal is not None:
            on_signal(name)
        if len(result.signals) == 1:
            _killpg(proc.pid, signum)
            timer = threading.Timer(grace_s, kill_group)
            timer.daemon = True
            timer.start()
            killer["timer"] = timer
        else:  # a second signal: the user wants it over now
            kill_group()

    main = threading.current_thread() is threading.main_thread()
    old = {s: signal.signal(s, forward) for s in FORWARDED} if main else {}
    try:
        try:
            out, _ = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            result.timed_out = True
            kill_group()
            out, _ = proc.communicate()
    except BaseException:
        kill_group()
        proc.wait()
        raise
    finally:
        if killer["timer"] is not None:
            killer["timer"].cancel()
        for s, h in old.items():
            signal.signal(s, h)
    result.returncode = proc.returncode
    result.output = out or ""
    return result
