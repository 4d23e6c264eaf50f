"""SVC-COLDSTART: the stages of a cold start, timed in a fresh interpreter with ``perf_counter_ns``.

The parent stamps ``perf_counter_ns`` (CLOCK_MONOTONIC on Linux, shared by every process) just before it
starts ``python -c ...``; the child stamps the end of each stage:

1. interpreter - until the child's first statement runs (interpreter start-up and site imports);
2. torch import;
3. device context - the runtime and its context on the device (CUDA context creation on a GPU);
4. weights - the model's weights on the device (random from a seed here; a serving stack reads them from
   disk instead, so this stage is a lower bound of a real one);
5. KV pre-allocation - the paged KV pool;
6. first token - prefill of a fixed prompt to its first token (first kernel launches and JIT included).

Whether the page cache held torch's libraries matters as much as any stage: :func:`page_cache_residency`
measures it (``mincore``) before the start, and :func:`evict` can drop them first (``posix_fadvise``
DONTNEED on the files, no root needed, pages mapped by a running process stay; or, as root, the whole page
cache through ``/proc/sys/vm/drop_caches``) - only when the profile asks for it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

STAGES = ("interpreter", "torch_import", "device_context", "weights", "kv_prealloc", "first_token")
MAX_FILES = 64


def child() -> None:
    """Runs in the fresh interpreter: reads the config from argv, prints one JSON line of stage stamps."""
    t_first = time.perf_counter_ns()
    cfg = json.loads(sys.argv[1])
    stamps: Dict[str, Any] = {"interpreter": t_first}
    try:
        import torch

        stamps["torch_import"] = time.perf_counter_ns()
        device = cfg["device"]
        if device.startswith("cuda"):
            torch.cuda.init()
            torch.zeros(1, device=device).sum().item()
            torch.cuda.synchronize(device)
        else:
            torch.zeros(1, device=device).sum().item()
        stamps["device_context"] = time.perf_counter_ns()
        from pytest_sits.inference.model import KVBlockPool, ModelConfig, TinyDecoder

        mc = ModelConfig.from_thresholds(cfg["model"])
        model = TinyDecoder(mc, device)
        sync = (lambda: torch.cuda.synchronize(device)) if device.startswith("cuda") else (lambda: None)
        sync()
        stamps["weights"] = time.perf_counter_ns()
        pool = KVBlockPool(mc, model.device, model.dtype)
        sync()
        stamps["kv_prealloc"] = time.perf_counter_ns()
        prompt = list(range(1, int(cfg.get("prompt_tokens", 32)) + 1))
        with torch.inference_mode():
            pool.admit(1, len(prompt) + 1)
            model.prefill(pool, prompt, pool.grow(1, len(prompt)))
        sync()
        stamps["first_token"] = time.perf_counter_ns()
        stamps["torch_version"] = torch.__version__
    except Exception as exc:
        stamps["error"] = f"{type(exc).__name__}: {exc}"
    print("SITS-COLDSTART " + json.dumps(stamps), flush=True)


def torch_library_files() -> List[Path]:
    """torch's shared libraries (found without importing torch), largest first."""
    import importlib.util

    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.origin:
        return []
    lib = Path(spec.origin).parent / "lib"
    files = [p for p in lib.glob("*.so*") if p.is_file() and not p.is_symlink()] if lib.is_dir() else []
    return sorted(files, key=lambda p: p.stat().st_size, reverse=True)[:MAX_FILES]


def page_cache_residency(files: List[Path]) -> Dict[str, Any]:
    """Share of each file's pages in the page cache (``mincore`` on a private read mapping)."""
    import ctypes
    import mmap

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        mincore = libc.mincore
    except (OSError, AttributeError) as exc:
        return {"measured": False, "reason": f"mincore unavailable: {exc}"}
    page = mmap.PAGESIZE
    total = resident = 0
    per_file: List[Dict[str, Any]] = []
    for f in files:
        try:
            size = f.stat().st_size
            if not size:
                continue
            with open(f, "rb") as fh, mmap.mmap(fh.fileno(), size, access=mmap.ACCESS_COPY) as mm:
                pages = (size + page - 1) // page
                vec = (ctypes.c_ubyte * pages)()
                addr = ctypes.addressof(ctypes.c_char.from_buffer(mm))
                rc = mincore(ctypes.c_void_p(addr), ctypes.c_size_t(size), vec)
                if rc != 0:
                    raise OSError(ctypes.get_errno(), "mincore failed")
                res = sum(1 for v in vec if v & 1)
                del addr
        except (OSError, ValueError, TypeError, BufferError) as exc:
            per_file.append({"file": f.name, "error": str(exc)})
            continue
        total += pages
        resident += res
        per_file.append({"file": f.name, "bytes": size, "resident_share": round(res / pages, 4)})
    return {"measured": bool(total), "resident_share": round(resident / total, 4) if total else None,
            "bytes": sum(p.get("bytes", 0) for p in per_file), "files": per_file[:8],
            "method": "mincore() on a private mapping of each of torch's shared libraries"}


def evict(how: str, files: List[Path]) -> Dict[str, Any]:
    """Drop page-cache pages before the cold start: ``files`` (posix_fadvise DONTNEED on torch's libraries)
    or ``all`` (root only: ``sync`` then ``3 > /proc/sys/vm/drop_caches``, which affects the whole machine)."""
    if how == "files":
        done, errors = 0, []
        for f in files:
            try:
                fd = os.open(f, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
                try:
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                    done += 1
                finally:
                    os.close(fd)
            except (OSError, AttributeError) as exc:
                errors.append(f"{f.name}: {exc}")
        return {"requested": how, "applied": done > 0, "files": done, "errors": errors[:5],
                "note": "pages mapped by a running process (this one, if it imported torch) stay cached"}
    if how == "all":
        if os.geteuid() != 0:
            return {"requested": how, "applied": False, "reason": "dropping the page cache needs root"}
        try:
            os.sync()
            with open("/proc/sys/vm/drop_caches", "w") as fh:
                fh.write("3\n")
        except OSError as exc:
            return {"requested": how, "applied": False, "reason": f"/proc/sys/vm/drop_caches: {exc}"}
        return {"requested": how, "applied": True}
    return {"requested": "none", "applied": False}


def measure(model: Dict[str, Any], device: str = "cpu", evict_how: str = "none", timeout_s: float = 300.0,
            prompt_tokens: int = 32, python: Optional[str] = None) -> Dict[str, Any]:
    """Start a fresh interpreter and time its stages; the evidence of SVC-COLDSTART."""
    files = torch_library_files()
    eviction = evict(evict_how, files) if evict_how != "none" else {"requested": "none", "applied": False}
    before: Dict[str, Any] = (page_cache_residency(files) if files
                              else {"measured": False, "reason": "torch's libraries not found"})
    cfg = json.dumps({"device": device, "model": model, "prompt_tokens": prompt_tokens})
    env = dict(os.environ)
    src = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    cmd = [python or sys.executable, "-c", "from pytest_sits.inference.coldstart import child; child()", cfg]
    t0 = time.perf_counter_ns()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=env)
    except subprocess.TimeoutExpired:
        return {"error": f"the cold start did not reach its first token within {timeout_s:g} s"}
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("SITS-COLDSTART ")), None)
    if line is None:
        return {"error": f"the cold-start interpreter exited {proc.returncode} without a result: "
                         f"{(proc.stderr or '')[-800:]}"}
    stamps = json.loads(line[len("SITS-COLDSTART "):])
    if stamps.get("error"):
        return {"error": f"cold start failed in the fresh interpreter: {stamps['error']}"}
    stages, prev = [], t0
    for name in STAGES:
        stages.append({"stage": name, "seconds": round((stamps[name] - prev) / 1e9, 6)})
        prev = stamps[name]
    warm = before.get("resident_share")
    return {"device": device, "stages": stages, "total_s": round((stamps["first_token"] - t0) / 1e9, 6),
            "clock": "time.perf_counter_ns (CLOCK_MONOTONIC, shared by parent and child)",
            "page_cache": {"before": before, "eviction": eviction,
                           "state": ("unknown" if warm is None else "warm" if warm >= 0.9
                                     else "cold" if warm <= 0.1 else "partly warm")},
            "torch_version": stamps.get("torch_version"), "python": sys.version.split()[0],
            "weights_note": "random weights from a seed (no file read): a lower bound of a served model's load"}
