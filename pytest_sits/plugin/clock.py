"""When the run began: the start of the pytest process, so that the report's ``duration_s`` covers the whole run
(the interpreter, the imports and plugin loading before the suite is configured included)."""

from __future__ import annotations

import os
import time
from typing import Optional


def process_started_at(now: Optional[float] = None, proc: str = "/proc") -> float:
    """The wall-clock time this process started (Linux: its start in ``/proc/self/stat`` against
    ``/proc/uptime``, to 1/100 s); ``now`` where that cannot be read or makes no sense (another system, a
    process older than a day: a forked worker's parent, a container's odd clock)."""
    now = time.time() if now is None else now
    try:
        with open(os.path.join(proc, "self", "stat"), "rb") as f:
            stat = f.read(4096).decode("ascii", "replace")
        with open(os.path.join(proc, "uptime"), "rb") as f:
            uptime = float(f.read(256).split()[0])
        fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) ": field 3 onwards
        ticks = os.sysconf("SC_CLK_TCK")
        age = uptime - int(fields[19]) / ticks  # field 22: start time, clock ticks after boot
    except (OSError, ValueError, IndexError):
        return now
    if not 0.0 <= age <= 86400.0:
        return now
    return now - age
