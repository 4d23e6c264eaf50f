"""Run a corpus operator on a torch device and produce what the comparator needs."""

from __future__ import annotations

import statistics
import time
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from .corpus import Arrays, Operator

SEED = 20260


class Unsupported(Exception):
    """The device or the torch build cannot run this operator in this dtype (a SKIP reason)."""


def torch_devices() -> List[Dict[str, Any]]:
    """Every torch device present: the CPU always, then CUDA/ROCm, NPU (torch_npu), XPU and MPS."""
    import torch

    devs = [{"device": "cpu", "kind": "cpu", "name": "CPU"}]
    if torch.cuda.is_available():
        kind = "rocm" if getattr(torch.version, "hip", None) else "cuda"
        for i in range(torch.cuda.device_count()):
            devs.append({"device": f"cuda:{i}", "kind": kind, "name": torch.cuda.get_device_name(i)})
    try:
        import torch_npu  # noqa: F401

        npu = getattr(torch, "npu")  # noqa: B009 (registered on torch by importing torch_npu: unknown to its types)
        for i in range(npu.device_count()):
            devs.append({"device": f"npu:{i}", "kind": "npu", "name": npu.get_device_name(i)})
    except Exception:
        pass
    if hasattr(torch, "xpu") and torch.xpu.is_available():
        for i in range(torch.xpu.device_count()):
            devs.append({"device": f"xpu:{i}", "kind": "xpu", "name": torch.xpu.get_device_name(i)})
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        devs.append({"device": "mps", "kind": "mps", "name": "Apple MPS"})
    return devs


def master_inputs(op: Operator) -> Arrays:
    return op.make(np.random.default_rng([SEED, sum(map(ord, op.name))]))


def _tdtype(dtype: str) -> Any:
    import torch

    return getattr(torch, dtype)


def to_storage(t: Any, dtype: str) -> np.ndarray:
    """A tensor as the numpy array stored in a golden set (bit patterns for bfloat16 and float8)."""
    import torch

    t = t.detach().cpu()
    if dtype == "bfloat16":
        return t.view(torch.int16).numpy().view(np.uint16).copy()
    if dtype.startswith("float8"):
        return t.view(torch.uint8).numpy().copy()
    return t.numpy().copy()


def from_storage(a: np.ndarray, dtype: str, device: str) -> Any:
    import torch

    t = torch.from_numpy(np.ascontiguousarray(a))
    if dtype == "bfloat16":
        t = t.view(torch.int16).view(torch.bfloat16)
    elif dtype.startswith("float8"):
        t = t.view(_tdtype(dtype))
    return t.to(device)


def prepare(op: Operator, dtype: str, stored: Optional[Arrays] = None) -> Tuple[Arrays, Arrays]:
    """(stored form of the inputs in ``dtype``, the same values upcast to float64 for the reference)."""
    import torch

    if stored is None:
        master = master_inputs(op)
        if dtype == "int8":
            stored = {k: np.clip(np.rint(v * 32), -127, 127).astype(np.int8) for k, v in master.items()}
        else:
            stored = {k: to_storage(torch.from_numpy(v).to(_tdtype(dtype)), dtype) for k, v in master.items()}
    exact = {k: (v.astype(np.float64) if dtype == "int8" else
                 from_storage(v, dtype, "cpu").to(torch.float64).numpy()) for k, v in stored.items()}
    return stored, exact


def execute(op: Operator, dtype: str, stored: Arrays, device: str, runs: int = 5) -> Dict[str, Any]:
    """Run the operator on ``device``; return its output (stored form), latency and peak memory."""
    import torch

    inputs = {k: from_storage(v, dtype, device) for k, v in stored.items()}
    dev = torch.device(device)

    def fn() -> Any:
        if dtype == "int8":
            if not hasattr(torch, "_int_mm"):
                raise Unsupported("this torch build has no torch._int_mm (int8 GEMM)")
            return torch._int_mm(inputs["a"], inputs["b"])
        if dtype.startswith("float8"):
            if dev.type != "cuda":
                raise Unsupported(f"float8 GEMM needs torch._scaled_mm on a CUDA device with FP8 (Hopper or newer); "
                                  f"this is {device}")
            one = torch.tensor(1.0, device=dev)
            return torch._scaled_mm(inputs["a"], inputs["b"].t().contiguous().t(), scale_a=one, scale_b=one,
                                    out_dtype=torch.float32)
        return op.torch_fn(**inputs)

    def sync() -> None:
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)

    try:
        with torch.no_grad():
            out = fn()
            sync()
            if dev.type == "cuda":
                torch.cuda.reset_peak_memory_stats(dev)
            times = []
            for _ in range(runs):
                t0 = time.perf_counter()
                out = fn()
                sync()
                times.append(time.perf_counter() - t0)
            peak = torch.cuda.max_memory_allocated(dev) if dev.type == "cuda" else None
    except Unsupported:
        raise
    except (RuntimeError, NotImplementedError, TypeError) as exc:
        raise Unsupported(f"{op.name} in {dtype} does not run on {device}: {str(exc).splitlines()[0][:300]}") from None
    out_dtype = "float32" if dtype.startswith("float8") else ("int32" if dtype == "int8" else dtype)
    return {"output": to_storage(out, out_dtype), "output_dtype": out_dtype, "latency_s": statistics.median(times),
            "latency_samples_s": times, "peak_bytes": peak}


def comparable(output: np.ndarray, out_dtype: str) -> Tuple[np.ndarray, int]:
    """The array the comparator reads, and the ULP shift (bfloat16 compared as float32)."""
    if out_dtype == "bfloat16":
        return (output.astype(np.uint32) << 16).view(np.float32), 16
    return output, 0


def reference_output(op: Operator, exact: Arrays, out_dtype: str) -> np.ndarray:
    """The float64 reference rounded once to the output dtype (stored form)."""
    import torch

    ref = op.ref_fn(exact)
    if out_dtype == "int32":
        return ref.astype(np.int64).astype(np.int32)
    return to_storage(torch.from_numpy(np.ascontiguousarray(ref)).to(_tdtype(out_dtype)), out_dtype)
