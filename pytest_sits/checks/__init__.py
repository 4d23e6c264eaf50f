"""Checks: pure functions ``(evidence, thresholds, subject) -> Verdict``.

A check never touches hardware, a clock or a file, so every verdict can be
recomputed from stored evidence (``sits replay``, ``sits verify``).  Every
check is registered here with :func:`check`, which also expresses absence
and breakage one way for all of them:

* evidence ``{"absent": reason}``: the hardware or feature is not there -> SKIP (not applicable);
* evidence ``{"unavailable": reason}``: it is there, but this platform or installation cannot measure it
  (a snapshot, a missing load generator or library) -> SKIP with the reason, and the run's result counts
  the requirement as not measured (PARTIAL at best), never as not applicable;
* evidence ``{"error": what}``: the probe broke -> ERROR.

The verdict keeps its input evidence (plus what the check derived from it),
the thresholds it was given and the check's name and version, which is what
replay needs.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Tuple

from ..verdict import ERROR, SKIP, Verdict

CheckFn = Callable[[Dict[str, Any], Dict[str, Any], str], Verdict]


@dataclass(frozen=True)
class Check:
    name: str
    requirement: str
    version: int
    fn: CheckFn
    #: The thresholds it was given were derived per subject (an operator's tolerance), not the profile's for its
    #: requirement as they stand: replay cannot check them against a profile, nor take them from one.
    derived_thresholds: bool = False


#: Every registered check, by name.
REGISTRY: Dict[str, Check] = {}
#: Earlier versions of checks, kept so that `sits replay` recomputes the verdicts of older reports: (name, version)
#: -> Check.  New verdicts never use them; they live in :mod:`.legacy`.
LEGACY: Dict[Tuple[str, int], Check] = {}



def check(name: str, *, requirement: Optional[str] = None, version: int = 1,
          legacy: bool = False, derived_thresholds: bool = False) -> Callable[[Any], CheckFn]:
    """Register ``fn`` as the check ``name`` for ``requirement`` (default: ``name``).

    Bump ``version`` whenever the rule changes what it decides, or what it is given: replay names a verdict
    decided by another version of its check, unless that version is kept with ``legacy=True`` (replay only).
    ``derived_thresholds``: the check was given thresholds derived per subject, not the profile's as they stand.
    """
    req = requirement or name

    def deco(fn: CheckFn) -> CheckFn:
        @functools.wraps(fn)
        def run(evidence: Dict[str, Any], thresholds: Dict[str, Any], subject: str = "") -> Verdict:
            if not isinstance(evidence, dict):
                raise TypeError(f"check {name}: evidence must be a dict, not {type(evidence).__name__}")
            if evidence.get("absent"):
                v = Verdict(req, SKIP, str(evidence["absent"]), subject=subject, evidence=evidence)
            elif evidence.get("unavailable"):
                v = Verdict(req, SKIP, f"not measured: {evidence['unavailable']}", subject=subject,
                            evidence=evidence)
            elif evidence.get("error"):
                v = Verdict(req, ERROR, str(evidence["error"]), subject=subject, evidence=evidence)
            else:
                v = fn(evidence, thresholds, subject)
            if subject:
                v.subject = subject
            # The verdict keeps its input evidence (what replay feeds back in), plus what the check derived.
            v.evidence = {**v.evidence, **evidence}
            v.check = {"name": name, "version": version}
            v.thresholds = thresholds
            return v

        if legacy:
            LEGACY[(name, version)] = Check(name, req, version, run, derived_thresholds)
            return run
        if name in REGISTRY and REGISTRY[name].fn.__qualname__ != fn.__qualname__:
            raise ValueError(f"two checks registered as {name!r}")
        REGISTRY[name] = Check(name, req, version, run, derived_thresholds)
        return run

    return deco


def load_all() -> Dict[str, Check]:
    """Import every check module, the earlier versions in :mod:`.legacy` too (their decorators fill REGISTRY and
    LEGACY), and return the registry."""
    for info in pkgutil.walk_packages(__path__, prefix=f"{__name__}."):
        importlib.import_module(info.name)
    return REGISTRY


def get(name: str) -> Optional[Check]:
    if name not in REGISTRY:
        load_all()
    return REGISTRY.get(name)


def get_version(name: str, version: Any) -> Optional[Check]:
    """The check ``name`` at ``version``: the current one, or a legacy one kept for replay."""
    current = get(name)
    if current is not None and current.version == version:
        return current
    if not isinstance(version, int):
        return None
    if (name, version) not in LEGACY:  # the current module may be imported without the legacy package
        load_all()
    return LEGACY.get((name, version))
