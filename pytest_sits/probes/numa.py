"""Read the calling thread's NUMA memory policy (``get_mempolicy``); binding is a condition
(:mod:`pytest_sits.conditions.numa`)."""

from __future__ import annotations

import ctypes
import os
import platform as _pyplatform
from typing import Any, Dict, Optional

MPOL_DEFAULT, MPOL_PREFERRED, MPOL_BIND, MPOL_INTERLEAVE, MPOL_LOCAL = 0, 1, 2, 3, 4
MPOL_NAMES = {0: "default", 1: "preferred", 2: "bind", 3: "interleave", 4: "local", 5: "preferred_many",
              6: "weighted_interleave"}
_SYSCALLS = {"x86_64": (238, 239), "aarch64": (237, 236), "ppc64le": (261, 260), "s390x": (270, 269)}
_MASK_LONGS = 16  # 1024 nodes
_MAXNODE = _MASK_LONGS * 64 + 1


def _libc() -> Any:
    return ctypes.CDLL(None, use_errno=True)


def _numbers() -> Optional[tuple]:
    return _SYSCALLS.get(_pyplatform.machine())


def get_policy() -> Dict[str, Any]:
    """The calling thread's memory policy: {"mode": "bind", "nodes": [0]} (or an error)."""
    nums = _numbers()
    if nums is None:
        return {"mode": None, "nodes": None, "error": f"get_mempolicy: unknown syscall number on "
                                                      f"{_pyplatform.machine()}"}
    mode = ctypes.c_int(0)
    mask = (ctypes.c_ulong * _MASK_LONGS)()
    rc = _libc().syscall(nums[1], ctypes.byref(mode), mask, ctypes.c_ulong(_MAXNODE), None, ctypes.c_ulong(0))
    if rc != 0:
        err = ctypes.get_errno()
        return {"mode": None, "nodes": None, "error": f"get_mempolicy: {os.strerror(err)}"}
    nodes = [i * 64 + b for i, word in enumerate(mask) for b in range(64) if word >> b & 1]
    return {"mode": MPOL_NAMES.get(mode.value, str(mode.value)), "nodes": nodes}
