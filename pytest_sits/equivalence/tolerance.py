"""The tolerance policy: per-dtype rtol, atol from the risk class, per-operator overrides, accumulation widening.

* float16: rtol 0.003 (SITS2026 A §4.4: FP16 relative error <= 0.3%), from the profile (EQ-PRECISION.rtol_fp16).
* float32: 1.3e-6 and bfloat16: 1.6e-2, float64: 1e-7 - torch.testing.assert_close's defaults.
  SITS2026 gives no figure for them; these are the values the PyTorch test-suite uses for one rounding.
* atol: the risk class's (high 1e-4, default 1e-3, low 1e-2), from the profile or per test.
* Accumulating operators (a dot product of length K): rounding error of a sum of K products grows
  like sqrt(K) * u with high probability (Higham & Mary, "A new approach to probabilistic rounding
  error analysis", 2019), with u the unit roundoff of the accumulator (float32: 2^-24, what
  GPUs and CPUs accumulate half-precision GEMMs in).  The per-dtype rtol is calibrated for one
  rounding, so it is widened by sqrt(K) * u_accumulate.
* An operator's own override (see corpus.py) replaces the defaults for that dtype, with its reason.
"""

from __future__ import annotations

import math
from typing import Any, Dict

DTYPE_RTOL = {"float32": 1.3e-6, "bfloat16": 1.6e-2, "float64": 1e-7}
U_ACCUMULATE = 2.0 ** -24


def resolve(op: Any, dtype: str, thresholds: Dict[str, Any], risk_class: str = "") -> Dict[str, Any]:
    risk = risk_class or thresholds.get("risk_class", "default")
    atol = float(thresholds["atol"][risk])
    if dtype in op.tolerance:
        rtol, atol = op.tolerance[dtype]
        return {"rtol": rtol, "atol": atol, "source": f"operator override: {op.why}", "risk_class": risk}
    if dtype in ("int8",):
        return {"rtol": 0.0, "atol": 0.0, "source": "integer GEMM: exact", "risk_class": risk}
    if dtype.startswith("float8"):
        return {"rtol": 0.125, "atol": atol, "source": "float8 e4m3: 3 mantissa bits (one rounding = 1/16)",
                "risk_class": risk}
    base = float(thresholds["rtol_fp16"]) if dtype == "float16" else DTYPE_RTOL[dtype]
    widen = math.sqrt(op.accumulation) * U_ACCUMULATE if op.accumulation else 0.0
    source = "SITS2026 fp16 rtol" if dtype == "float16" else "torch.testing default for the dtype"
    if widen:
        source += f" + sqrt(K={op.accumulation}) x 2^-24 for the accumulation"
    return {"rtol": base + widen, "atol": atol, "source": source + f"; atol of risk class '{risk}'",
            "risk_class": risk}
