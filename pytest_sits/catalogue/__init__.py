"""The SITS2026 requirement catalogue: every requirement the suite knows, each declared once.

One :func:`~pytest_sits.catalogue.base.declare` call per requirement, in the module of its family (the file stem
it has in every layer: ``checks/<family>.py``, ``conditions/<family>.py``, ``conformance/test_<family>.py``),
holds its ID, title, source section, level, subject kind, threshold keys with their schemas, defaults and
comments, the plan's time cost and trial plan, the platforms that can decide it, the profile facts its check
compares against, and the sim faults that must make it fail.  ``profiles/base.yaml``, the profile schema, the
plan, ``sits requirements`` and the reference pages are generated from these declarations or checked against
them (``base.py`` says how).

``implemented`` is honest: a requirement whose conformance test does not exist yet is listed in every report as
NOT_IMPLEMENTED, never as passed.
"""

from __future__ import annotations

from typing import Any, Dict, List

from .base import (BOOL, BYTES, CATALOGUE, CEILING, CONDITIONS, Condition, CELSIUS, COUNT, INT0, INT1, INT_CEILING, LEVELS, NONNEG, NUM,
                   NUM01, PLATFORMS, POS, SECONDS, STR, TIMEOUT_S, Cost, DeclarationError, Requirement, Threshold,
                   Trials, declare, declare_condition, level_rank, unsupported_for)

# The families, in the order reports and `sits requirements` list them.
from . import inventory, topology, bandwidth, thermal, inference, equivalence, security, crg, health  # noqa: E402,F401

declare_condition(
    "environment", "The SITS2026 test environment around every measured requirement (A §2.4): die and package "
                   "temperatures read, host DRAM occupancy held in MEM-BW-HOLD's band, the NUMA binding recorded",
    settings={"dram_hold": Threshold(BOOL, True, "hold host DRAM occupancy in MEM-BW-HOLD's band while each measured "
                                                 "requirement runs on the live machine (A §2.4); false: the "
                                                 "verdicts say the occupancy was not measured")},
    serves=tuple(r.id for r in CATALOGUE.values() if r.environment),
    # the hold's settling (a few 100 ms windows) before each measurement: once per requirement measured at once,
    # once per test of the others
    cost=Cost("host", fixed=lambda th: 8.0 if th["dram_hold"] else 0.0))

__all__ = ["BOOL", "BYTES", "CATALOGUE", "CEILING", "CELSIUS", "COUNT", "INT0", "INT1", "INT_CEILING", "LEVELS",
           "NONNEG", "NUM", "NUM01", "PLATFORMS", "POS", "SECONDS", "STR", "TIMEOUT_S", "Cost", "DeclarationError",
           "Requirement", "Threshold", "Trials", "declare", "level_rank", "unsupported_for", "THRESHOLD_REQUIREMENTS",
           "threshold_schema", "defaults", "CONDITIONS", "Condition", "condition_schema", "condition_defaults"]

THRESHOLD_REQUIREMENTS: List[str] = list(CATALOGUE)


def defaults() -> Dict[str, Dict[str, Any]]:
    """Every requirement's default thresholds: the ``thresholds:`` section of ``profiles/base.yaml``."""
    return {rid: req.defaults() for rid, req in CATALOGUE.items()}


def threshold_schema() -> Dict[str, Any]:
    """JSON schema of the ``thresholds:`` section of a profile."""
    props = {}
    for req in CATALOGUE.values():
        props[req.id] = {
            "type": "object",
            "additionalProperties": False,
            "properties": dict(req.thresholds),
            "description": f"{req.title} ({req.source})",
        }
    return {"type": "object", "additionalProperties": False, "properties": props}


def condition_defaults() -> Dict[str, Dict[str, Any]]:
    """Every condition's default settings: the ``conditions:`` section of ``profiles/base.yaml``."""
    return {name: c.defaults() for name, c in CONDITIONS.items()}


def condition_schema() -> Dict[str, Any]:
    """JSON schema of the ``conditions:`` section of a profile."""
    props = {name: {"type": "object", "additionalProperties": False,
                    "properties": {k: t.schema for k, t in c.settings.items()},
                    "description": f"{c.title} (serves {', '.join(c.serves)})"} for name, c in CONDITIONS.items()}
    return {"type": "object", "additionalProperties": False, "properties": props}
