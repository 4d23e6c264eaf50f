"""What binds a stored report together, beyond each verdict's own replay (``sits replay``).

Every verdict replays from its own evidence; these checks hold the verdicts to the rest of the report, so that
an edit that improves the result must be made consistently in several places, each of which is named here:

* **the platform**: ``platform.simulated`` and ``platform.kind`` against the inventory's own record of the
  platform, every verdict's ``simulated`` mark and the recorded arguments (``--sits-platform=sim:...``): a
  simulated run relabelled live is a finding;
* **completion**: ``run.completed`` against the interrupts the run recorded;
* **check versions**: in a report of this version of pytest-sits, every verdict was decided by the current
  version of its check (an older one, kept for replaying older reports, is never used by a new run);
* **the verdict set**: every accelerator of the inventory has a verdict of each accelerator-scoped requirement
  that was decided for any accelerator (a deleted FAIL of one GPU), and a requirement at or below the run's
  level is recorded as deselected only when the recorded arguments select (``-m``, ``-k``, ``--deselect``, a test
  path): a requirement whose verdicts were all deleted is a finding;
* **the profile**: a profile section that names a bundled profile and was read from the bundled profile's file is
  compared with it whatever its ``bundled`` flag says.

What no check here can catch (a lab that edits evidence, inventory and verdicts consistently) is stated in
docs/trust.md: a signature by someone other than the lab covers it.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from .model import as_object

#: Arguments that select tests: with none of them, every requirement at or below the level was collected.
SELECTING = ("-m", "-k", "--deselect", "--lf", "--last-failed", "--ff", "--sw", "--stepwise")


def _finding(field: str, why: str, requirement: Optional[str] = None, subject: Optional[str] = None) -> Dict[str, Any]:
    return {"index": None, "requirement": requirement, "subject": subject, "field": field, "why": why}


def _args(report: Dict[str, Any]) -> List[str]:
    args = as_object(report.get("run")).get("args")
    return [str(a) for a in args] if isinstance(args, list) else []


def _selects(args: List[str]) -> bool:
    """Whether the recorded command line selects tests (a marker, a keyword, a deselection or a test path)."""
    takes_value = {"-p", "-c", "-o", "--rootdir", "--pyargs", "-n", "--numprocesses", "--dist", "--tb",
                   "--sits-profile", "--sits-platform", "--sits-level", "--sits-report-dir", "--sits-golden",
                   "--sits-golden-record", "--sits-endpoint", "--sits-endpoint-key", "--sits-redfish",
                   "--sits-serve", "--sits-serve-port", "--sits-serve-env", "--sits-serve-model",
                   "--sits-serve-timeout", "--sits-serve-accelerators",
                   "--sits-prometheus", "--sits-watchdog", "--sits-health-load", "--sits-budget", "--junitxml",
                   "--basetemp", "-W", "--confcutdir", "--log-file", "--timeout"}
    skip = False
    for a in args:
        if skip:
            skip = False
            continue
        if a in SELECTING or any(a.startswith(f"{s}=") for s in SELECTING if s.startswith("--")):
            return True
        if a.startswith("-m") and len(a) > 2 or a.startswith("-k") and len(a) > 2:
            return True
        if a in takes_value:
            skip = True
            continue
        if a.startswith("-"):
            continue
        if a not in ("pytest_sits.conformance",):  # a test path or node id given by the user
            return True
    return False


def _platform_findings(report: Dict[str, Any]) -> List[Dict[str, Any]]:
    out: List[Dict[str, Any]] = []
    plat = as_object(report.get("platform"))
    inv_plat = as_object(as_object(report.get("inventory")).get("platform"))
    simulated = plat.get("simulated") is True
    marks = []
    if inv_plat.get("simulated") is True or inv_plat.get("kind") == "sim":
        marks.append("the inventory records a simulated platform")
    if any(isinstance(v, dict) and v.get("simulated") is True for v in report.get("verdicts") or []):
        marks.append("verdicts are marked simulated")
    if any(a.startswith("--sits-platform=sim:") or a == "sim:" or a.startswith("sim:") for a in _args(report)):
        marks.append("the recorded arguments name a sim: platform")
    if not simulated and marks:
        out.append(_finding("platform.simulated", "the report says the platform was not simulated, but "
                            + "; ".join(marks) + ": a simulated run relabelled"))
    if inv_plat.get("kind") and plat.get("kind") and inv_plat.get("kind") != plat.get("kind"):
        out.append(_finding("platform.kind", f"the report says platform kind {plat.get('kind')!r}, its inventory "
                                             f"{inv_plat.get('kind')!r}"))
    return out


def _completion_findings(report: Dict[str, Any]) -> List[Dict[str, Any]]:
    run = as_object(report.get("run"))
    interrupts = run.get("interrupts")
    if run.get("completed") is True and isinstance(interrupts, list) and interrupts:
        first = interrupts[0]
        what = first.get("signal") or first.get("name") if isinstance(first, dict) else first
        return [_finding("run.completed", f"the run records {len(interrupts)} interrupt(s) ({what}) but says it "
                                          "completed: an interrupted run is INCOMPLETE")]
    return []


def _version_findings(report: Dict[str, Any]) -> List[Dict[str, Any]]:
    from .. import __version__
    from ..checks import REGISTRY, load_all

    generator = as_object(report.get("generator")).get("version")
    if generator != __version__:
        return []  # replay names the versions it cannot compare
    load_all()
    out = []
    for i, v in enumerate(report.get("verdicts") or []):
        chk = v.get("check") if isinstance(v, dict) else None
        if not isinstance(chk, dict) or chk.get("name") not in REGISTRY:
            continue
        current = REGISTRY[chk["name"]].version
        if chk.get("version") != current:
            out.append(dict(_finding("check.version", f"decided by version {chk.get('version')} of check "
                                                      f"{chk['name']!r}, but pytest-sits {__version__} decides "
                                                      f"with version {current}: an older check swapped in",
                                     v.get("requirement"), v.get("subject")), index=i))
    return out


def _verdict_set_findings(report: Dict[str, Any]) -> List[Dict[str, Any]]:
    from ..catalogue import CATALOGUE, LEVELS

    out: List[Dict[str, Any]] = []
    verdicts = [v for v in report.get("verdicts") or [] if isinstance(v, dict)]
    accs: List[str] = [str(a["bdf"]) for a in as_object(report.get("inventory")).get("accelerators") or []
                       if isinstance(a, dict) and isinstance(a.get("bdf"), str)]
    run = as_object(report.get("run"))
    # An interrupted run stops in the middle of a requirement (its report is INCOMPLETE, never conformant), and
    # arguments that select tests (-k on a device's test id) select devices: neither has every device's verdict.
    partial = run.get("completed") is not True or _selects(_args(report))
    by_req: Dict[str, List[str]] = {}
    for v in verdicts if not partial else []:
        if isinstance(v.get("requirement"), str):
            by_req.setdefault(v["requirement"], []).append(str(v.get("subject") or ""))
    for req, subjects in sorted(by_req.items()):
        decl = CATALOGUE.get(req)
        if decl is None or decl.scope != "accelerator" or not accs:
            continue
        per_device = [s for s in subjects if any(s == b or s.startswith(b + " ") for b in accs)]
        if not per_device:
            continue  # judged as a whole (an endpoint, the accelerators absent)
        missing = [b for b in accs if not any(s == b or s.startswith(b + " ") for s in subjects)]
        if missing:
            out.append(_finding("verdicts", f"{req} has verdicts for {len(accs) - len(missing)} of the inventory's "
                                            f"{len(accs)} accelerators; none for {', '.join(missing[:4])}"
                                            + ("..." if len(missing) > 4 else "") + ": verdicts were removed", req))
    level = run.get("level") if run.get("level") in LEVELS else None
    if level is not None and not _selects(_args(report)):
        for row in report.get("coverage") or []:
            if not isinstance(row, dict) or row.get("state") not in ("DESELECTED", "NOT_SELECTED"):
                continue
            decl = CATALOGUE.get(str(row.get("requirement")))
            if decl is not None and LEVELS.index(decl.level) <= LEVELS.index(level):
                out.append(_finding("coverage", f"{decl.id} is recorded as {row['state'].lower()}, but the recorded "
                                                "arguments select no tests (no -m, -k, --deselect or test path): its "
                                                "verdicts were removed", decl.id))
    return out


def _profile_findings(report: Dict[str, Any]) -> List[Dict[str, Any]]:
    """A profile section read from a bundled profile's own file, compared whatever its ``bundled`` flag says (the
    flag set when the bundled comparison runs is compared by :func:`~.replay.threshold_findings`)."""
    from pathlib import Path

    from .. import __version__
    from ..profiles import ProfileError, bundled_names, resolve
    from .model import plain

    p = as_object(report.get("profile"))
    name, path = p.get("name"), p.get("path")
    if p.get("bundled") or not isinstance(name, str) or name not in set(bundled_names()) or not isinstance(path, str):
        return []
    where = Path(path)
    # The bundled folder is profiles/ in a checkout and pytest_sits/bundled/ installed (pyproject's package-dir).
    in_bundled_folder = (where.parent.name == "profiles"
                         or (where.parent.name == "bundled" and where.parent.parent.name == "pytest_sits"))
    if where.name != f"{name}.yaml" or not in_bundled_folder:
        return []  # a lab's own file of that name: its section is what the run read
    try:
        bundled = plain(resolve(name).data)
    except ProfileError:
        return []
    if plain(p.get("data")) != bundled:
        gen = as_object(report.get("generator")).get("version")
        return [_finding("profile", f"the profile section was read from the bundled profile {name!r} ({path}) but "
                                    f"differs from it"
                                    + (f" (the report says pytest-sits {gen}, this is {__version__})"
                                       if gen != __version__ else "")
                                    + "; the report's 'bundled: false' does not exempt it")]
    return []


def binding_findings(report: Dict[str, Any]) -> List[Dict[str, Any]]:
    """Every way the report's parts disagree (see the module's docstring); each a finding with its field."""
    out: List[Dict[str, Any]] = []
    for part in (_platform_findings, _completion_findings, _version_findings, _verdict_set_findings,
                 _profile_findings):
        out.extend(part(report))
    return out
