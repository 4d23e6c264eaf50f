"""Bind the calling thread's CPUs and memory to a NUMA node, and read back what is in force.

CPU affinity through ``sched_setaffinity``; memory through the
``set_mempolicy(MPOL_BIND)`` system call (what ``numactl --membind`` does),
read back with ``get_mempolicy``.  Both are per thread and inherited by the
threads started while they are in force, so a load generator started inside
:func:`bind` runs bound.  On exit the previous affinity and policy return.
:func:`pin` is the one way a load or measurement thread pins itself.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform as _pyplatform
from contextlib import contextmanager
from typing import Any, Dict, Iterator, List, Optional

from ..probes.numa import _MASK_LONGS, _MAXNODE, MPOL_BIND, MPOL_DEFAULT, MPOL_NAMES, _libc, _numbers, get_policy


class NumaError(OSError):
    pass


def set_policy(mode: int, nodes: List[int]) -> None:
    nums = _numbers()
    if nums is None:
        raise NumaError(errno.ENOSYS, f"set_mempolicy: unknown syscall number on {_pyplatform.machine()}")
    mask = (ctypes.c_ulong * _MASK_LONGS)()
    for n in nodes:
        mask[n // 64] |= 1 << (n % 64)
    maxnode = ctypes.c_ulong(_MAXNODE if nodes else 0)
    rc = _libc().syscall(nums[0], ctypes.c_int(mode), mask if nodes else None, maxnode)
    if rc != 0:
        err = ctypes.get_errno()
        raise NumaError(err, f"set_mempolicy({MPOL_NAMES.get(mode)}, {nodes}): {os.strerror(err)}")


@contextmanager
def bind(node: int, cpus: List[int]) -> Iterator[Dict[str, Any]]:
    """Bind this thread to ``cpus`` and its memory to ``node``; yield the binding read back."""
    evidence: Dict[str, Any] = {"node": node, "requested_cpus": sorted(cpus), "method": "sched_setaffinity + "
                                "set_mempolicy(MPOL_BIND)", "applied": False, "errors": []}
    old_cpus = os.sched_getaffinity(0)
    old_policy = get_policy()
    try:
        usable = sorted(set(cpus) & set(range(os.cpu_count() or 1)))
        try:
            os.sched_setaffinity(0, usable)
        except OSError as exc:
            evidence["errors"].append(f"sched_setaffinity({usable}): {exc.strerror}")
        try:
            set_policy(MPOL_BIND, [node])
        except OSError as exc:
            evidence["errors"].append(str(exc))
        evidence["cpus_in_force"] = sorted(os.sched_getaffinity(0))
        evidence["memory_policy_in_force"] = get_policy()
        pol = evidence["memory_policy_in_force"]
        evidence["applied"] = (evidence["cpus_in_force"] == sorted(cpus)
                               and pol.get("mode") == "bind" and pol.get("nodes") == [node])
        yield evidence
    finally:
        try:
            os.sched_setaffinity(0, old_cpus)
        except OSError:
            pass
        try:
            if old_policy.get("mode") in (None, "default"):
                set_policy(MPOL_DEFAULT, [])
            else:
                modes = {v: k for k, v in MPOL_NAMES.items()}
                set_policy(modes[old_policy["mode"]], old_policy["nodes"] or [])
        except (OSError, KeyError):
            pass


@contextmanager
def pin(node: Optional[int], cpu: int) -> Iterator[Dict[str, Any]]:
    """Pin this thread to one CPU and, when ``node`` is given, bind its memory there; yield what is in force.

    The pattern of every load and measurement thread (one thread per CPU of the node)."""
    if node is not None:
        with bind(node, [cpu]) as evidence:
            yield evidence
        return
    old = os.sched_getaffinity(0)
    os.sched_setaffinity(0, [cpu])
    try:
        yield {"cpus_in_force": sorted(os.sched_getaffinity(0)), "node": None}
    finally:
        os.sched_setaffinity(0, old)
