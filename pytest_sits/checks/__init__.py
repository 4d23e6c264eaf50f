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

Writing a check
---------------

A check's body is ``(evidence, thresholds, f) -> Verdict``, where ``f`` is a :class:`Finding` the decorator
makes for each call: it knows the check's requirement and the subject, and holds what every verdict of the call
shares (threshold, unit, method, the evidence with what the check derived, a measured value).  Calling it
returns one verdict, so a body never names its requirement::

    @check("DEP-PERSIST")
    def check_persistence(evidence, thresholds, f: Finding) -> Verdict:
        want = bool(thresholds["expected"])
        f.set(threshold="enabled" if want else "disabled", method="nvmlDeviceGetPersistenceMode")
        got = evidence.get("persistence_mode")
        if got is None:
            return f(INCONCLUSIVE, "persistence mode could not be read")
        if bool(got) != want:
            return f(FAIL, "...", measured=..., remediation=f"... or set {f.requirement} expected: ...")
        return f(PASS, "...", measured=...)

``f(status, reason, measured=..., remediation=...)`` is one verdict: the fields set with :meth:`Finding.set`,
``measured`` and ``remediation`` for this verdict, and any other field (``threshold``, ``unit``, ``method``,
``evidence``, ``subject``) changed for this verdict only.  The registered function keeps the form
``(evidence, thresholds, subject="") -> Verdict``; on every verdict the decorator stamps the check's name and
version, the thresholds it was given, the input evidence (over what the check derived) and the subject it was
given.  Where the caller gives none, the verdict names the check's ``default_subject`` (or what the body set).

A body reads ``thresholds[key]`` for the keys its requirement declares in the catalogue: a resolved profile
carries every one (profiles/base.yaml gives the defaults).  The profile facts it compares against (a datasheet
figure, the expected devices) are not declared keys: ``Profile.check_thresholds`` adds them.

Earlier versions of a check, kept for replay only, live in :mod:`.legacy`: written in the form
``(evidence, thresholds, subject) -> Verdict`` and registered with ``legacy=True``.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Literal, Optional, Tuple, TypeVar, Union, overload

from ..verdict import ERROR, SKIP, Verdict

#: A registered check, and the body of a legacy version: ``(evidence, thresholds, subject) -> Verdict``.
CheckFn = Callable[[Dict[str, Any], Dict[str, Any], str], Verdict]
#: The body of a current check: ``(evidence, thresholds, finding) -> Verdict``.
CheckBody = Callable[[Dict[str, Any], Dict[str, Any], "Finding"], Verdict]

T = TypeVar("T")


class Unset:
    """A field not given for this verdict (None is a value: a verdict may measure None)."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET = Unset()


def _given(value: Union[T, Unset], default: T) -> T:
    return default if isinstance(value, Unset) else value


@dataclass
class Finding:
    """The verdicts of one call of a current check: its requirement and subject (set by :func:`check`), and the
    fields every verdict of the call shares (:meth:`set`).  Calling it returns one verdict."""

    requirement: str
    subject: str
    threshold: Any = None
    unit: Optional[str] = None
    method: Optional[str] = None
    #: What the check derived, with the input evidence or without it (the decorator merges the input over it).
    evidence: Dict[str, Any] = field(default_factory=dict)
    measured: Any = None

    def set(self, *, threshold: Any = UNSET, unit: Union[str, None, Unset] = UNSET,
            method: Union[str, None, Unset] = UNSET, evidence: Union[Dict[str, Any], Unset] = UNSET,
            measured: Any = UNSET, subject: Union[str, Unset] = UNSET) -> Finding:
        """Set the fields given, for every verdict of this call from now on; returns the finding."""
        self.threshold = _given(threshold, self.threshold)
        self.unit = _given(unit, self.unit)
        self.method = _given(method, self.method)
        self.evidence = _given(evidence, self.evidence)
        self.measured = _given(measured, self.measured)
        self.subject = _given(subject, self.subject)
        return self

    def __call__(self, status: str, reason: str, *, measured: Any = UNSET, remediation: Optional[str] = None,
                 threshold: Any = UNSET, unit: Union[str, None, Unset] = UNSET,
                 method: Union[str, None, Unset] = UNSET, evidence: Union[Dict[str, Any], Unset] = UNSET,
                 subject: Union[str, Unset] = UNSET) -> Verdict:
        """The verdict ``status`` with ``reason``: the fields set, ``measured`` and ``remediation`` (a FAIL needs
        one), and any other field given, for this verdict only."""
        return Verdict(self.requirement, status, reason, measured=_given(measured, self.measured),
                       threshold=_given(threshold, self.threshold), unit=_given(unit, self.unit),
                       subject=_given(subject, self.subject), remediation=remediation,
                       evidence=_given(evidence, self.evidence), method=_given(method, self.method))


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


@overload
def check(name: str, *, requirement: Optional[str] = None, version: int = 1, legacy: Literal[False] = False,
          derived_thresholds: bool = False, default_subject: str = "") -> Callable[[CheckBody], CheckFn]: ...


@overload
def check(name: str, *, requirement: Optional[str] = None, version: int = 1, legacy: Literal[True],
          derived_thresholds: bool = False) -> Callable[[CheckFn], CheckFn]: ...


def check(name: str, *, requirement: Optional[str] = None, version: int = 1, legacy: bool = False,
          derived_thresholds: bool = False, default_subject: str = "") -> Callable[[Any], CheckFn]:
    """Register the check ``name`` for ``requirement`` (default: ``name``).

    A current check's body takes a :class:`Finding` as its third argument; ``default_subject`` is the subject
    its verdicts name when the caller gives none.  Bump ``version`` whenever the rule changes what it decides,
    or what it is given: replay names a verdict decided by another version of its check, unless that version is
    kept in :mod:`.legacy` with ``legacy=True`` (replay only; its body takes the subject, as checks did before
    :class:`Finding`).  ``derived_thresholds``: the check was given thresholds derived per subject, not the
    profile's as they stand.
    """
    req = requirement or name

    def deco(fn: Any) -> CheckFn:
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
            elif legacy:
                v = fn(evidence, thresholds, subject)
            else:
                v = fn(evidence, thresholds, Finding(req, subject or default_subject))
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
