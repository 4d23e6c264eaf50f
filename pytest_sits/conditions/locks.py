"""Exclusive locks between processes (xdist workers, parallel runs on one machine).

A lock guards a resource of the machine, named neutrally (``dram-node0``,
``device-0000:17:00.0``): two calibrations or two bandwidth holds never run on
it at once.  The lock files live in a private directory (``$XDG_RUNTIME_DIR``
or ``/tmp/pytest-sits-<uid>``, mode 0700, owned by the caller, never a link),
are opened with ``O_NOFOLLOW`` and never truncated before they are held, and
are removed on release.  A lock that cannot be had within the timeout raises
:class:`LockTimeout`, which names the holder (pid, command, host, purpose, since when).

A wait is seen: one longer than :data:`WAIT_NOTICE_S` is announced once while it lasts (who holds the lock,
through the notice function the run sets, :func:`set_wait_notice`; stderr by default), and every such wait is
kept (:func:`take_waits`) for the verdicts of the test that waited, which carry it in their evidence.

A simulated resource (``simulated=True``) belongs to its run, never to the machine: its lock name carries the
run's scope (:func:`scope_simulated`, set once per run, the same in every xdist worker of it), so two simulated
runs on one host never wait on each other, while the workers of one run still take turns.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import stat
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional

DEFAULT_TIMEOUT_S = 3600.0
#: A wait longer than this is announced and recorded.
WAIT_NOTICE_S = 5.0
#: The scope of this run's simulated resources (None: this process's own).
_SIM_SCOPE: Optional[str] = None
_NOTICE: Optional[Callable[[str], None]] = None
_WAITS: List[Dict[str, Any]] = []


def set_wait_notice(fn: Optional[Callable[[str], None]]) -> None:
    """Where a long wait is announced (the plugin's terminal line; None: stderr)."""
    global _NOTICE
    _NOTICE = fn


def _notice(message: str) -> None:
    if _NOTICE is not None:
        _NOTICE(message)
    else:
        print(f"sits: {message}", file=sys.stderr, flush=True)


def take_waits() -> List[Dict[str, Any]]:
    """The waits over :data:`WAIT_NOTICE_S` since the last call (and forget them)."""
    out = list(_WAITS)
    _WAITS.clear()
    return out


def _cmdline(pid: int) -> Optional[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return " ".join(f.read(4096).replace(b"\0", b" ").decode("utf-8", "replace").split())  # one line
    except OSError:
        return None


def _command() -> str:
    """This process's command line, for the lock's holder record (at most 400 characters); an xdist worker
    names the run it works for (its parent's command line) and itself."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:
        parent = _cmdline(os.getppid())
        if parent:
            return f"xdist worker {worker} of: {parent}"[:400]
    return (_cmdline(os.getpid()) or " ".join(sys.argv))[:400]


def scope_simulated(token: str) -> None:
    """Name this run's simulated resources after ``token`` (the run's start, shared with its xdist workers)."""
    global _SIM_SCOPE
    _SIM_SCOPE = _safe_name(token)[:40]


def resource_name(resource: str, simulated: bool = False) -> str:
    """The lock name of ``resource``: machine-wide, or the run's own for a simulated one."""
    return f"sim-{_SIM_SCOPE or os.getpid()}-{resource}" if simulated else resource


class LockTimeout(TimeoutError):
    """The resource stayed held by someone else for the whole timeout; the message names the holder."""


class LockDirError(OSError):
    """The lock directory is not private (not ours, a link, or open to others)."""


def lock_dir(base: Optional[Path] = None) -> Path:
    """The private directory for lock files, created 0700 when missing and checked when present."""
    uid = os.geteuid()
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if base is None:
        base = Path(runtime) / "pytest-sits" if runtime else Path(tempfile.gettempdir()) / f"pytest-sits-{uid}"
    try:
        os.mkdir(base, 0o700)
    except FileExistsError:
        pass
    st = os.lstat(base)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise LockDirError(f"{base} is not a directory (a link or a file): refusing to put lock files there; "
                           "fix: remove it, or set XDG_RUNTIME_DIR to a private directory")
    if st.st_uid != uid:
        raise LockDirError(f"{base} belongs to uid {st.st_uid}, not to this user ({uid}); fix: remove it, or set "
                           "XDG_RUNTIME_DIR to a private directory")
    if st.st_mode & 0o077:
        os.chmod(base, 0o700)
    return base


def _safe_name(resource: str) -> str:
    return "".join(c if c.isalnum() or c in "-." else "_" for c in resource)[:120] or "_"


def _holder_info(fd: int) -> Dict[str, Any]:
    try:
        data = os.pread(fd, 4096, 0).decode("utf-8", "replace")
        info = json.loads(data) if data.strip() else {}
    except (OSError, ValueError):
        info = {}
    return info if isinstance(info, dict) else {}


def describe_holder(info: Dict[str, Any]) -> str:
    """'pid 123 (`pytest --sits-...`) on host (purpose, since 12:00:01)', or 'an unknown holder'."""
    if not info:
        return "an unknown holder"
    since = time.strftime("%H:%M:%S", time.localtime(float(info.get("since") or 0)))
    command = f" (`{info['command']}`)" if info.get("command") else ""
    return f"pid {info.get('pid')}{command} on {info.get('host')} ({info.get('purpose')}, since {since})"


def _holder(fd: int) -> str:
    return describe_holder(_holder_info(fd))


@contextmanager
def exclusive(resource: str, purpose: str = "", timeout_s: float = DEFAULT_TIMEOUT_S,
              poll_s: float = 0.2, directory: Optional[Path] = None,
              simulated: bool = False) -> Iterator[Dict[str, Any]]:
    """Hold ``resource`` exclusively; yield what was done (path, waited_s, who held it before).  ``simulated``:
    the resource is the run's own (see the module's docstring)."""
    resource = resource_name(resource, simulated)
    path = lock_dir(Path(directory) if directory else None) / f"{_safe_name(resource)}.lock"
    t0 = time.monotonic()
    held_by: Optional[str] = None
    holder: Dict[str, Any] = {}
    announced = False
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    while True:
        fd = os.open(path, flags, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder_info(fd) or holder
            held_by = describe_holder(holder)
            os.close(fd)
            if not announced and time.monotonic() - t0 > WAIT_NOTICE_S:
                announced = True
                _notice(f"waiting for {resource} ({purpose or 'exclusive use'}): held by {held_by}")
            if time.monotonic() - t0 >= timeout_s:
                raise LockTimeout(f"{resource} is held by {held_by}: waited {timeout_s:g} s; fix: wait for that "
                                  "run to finish, or stop it") from None
            time.sleep(poll_s)
            continue
        # The file may have been removed by its previous holder between our open and our lock.
        try:
            same = os.fstat(fd).st_ino == os.stat(path, follow_symlinks=False).st_ino
        except FileNotFoundError:
            same = False
        if not same:
            os.close(fd)
            continue
        break
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "purpose": purpose,
                                  "command": _command(), "since": time.time()}).encode(), 0)
        waited = round(time.monotonic() - t0, 3)
        record = {"lock": str(path), "resource": resource, "waited_s": waited, "waited_for": held_by}
        if waited > WAIT_NOTICE_S:
            _WAITS.append({"resource": resource, "purpose": purpose, "waited_s": waited, "held_by": held_by,
                           "holder": {k: holder.get(k) for k in ("pid", "command", "host", "purpose", "since")}})
            _notice(f"{resource}: waited {waited:.1f} s for {held_by}")
        yield record
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass
        os.close(fd)
