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

from typing import Any, Dict

from ..checks.equivalence import DTYPE_RTOL, U_ACCUMULATE, resolve_tolerance

__all__ = ["DTYPE_RTOL", "U_ACCUMULATE", "operator_facts", "resolve"]


def operator_facts(op: Any, dtype: str) -> Dict[str, Any]:
    """What the tolerance of ``op`` at ``dtype`` depends on, as plain data (kept in the verdict's evidence, so the
    check resolves the tolerance itself from the profile's thresholds, and replay can recompute it)."""
    override = op.tolerance.get(dtype)
    return {"name": op.name, "dtype": dtype, "accumulation": int(op.accumulation or 0),
            "override": list(override) if override else None, "why": op.why if override else ""}


def resolve(op: Any, dtype: str, thresholds: Dict[str, Any], risk_class: str = "") -> Dict[str, Any]:
    return resolve_tolerance(operator_facts(op, dtype), thresholds, risk_class)
