"""One exit-status scheme for ``pytest --sits-...`` and every ``sits`` subcommand.

A CI job, a Slurm prolog or a fleet script gates on one set of numbers, whatever the front: pytest's own
statuses (0 to 5) keep their meaning, and the outcomes of a conformance decision have statuses of their own
above pytest's.  A run that found the hardware or service failing (a FAIL: :data:`NON_CONFORMANT`) exits
differently from one that could not test it (an ERROR verdict, a probe that broke, nothing listening at the
endpoint: :data:`NOT_TESTED`), and both differently from one that measured but could not decide
(:data:`UNDECIDED`).  ``docs/reference/exit-statuses.md`` is generated from :data:`EXIT_STATUSES`
(``tools/docs_reference.py``).
"""

from __future__ import annotations

from typing import Dict, Iterable, Tuple

OK = 0
#: pytest: a test that is not a SITS2026 requirement failed; a ``sits`` check of a stored file: it does not hold.
DOES_NOT_HOLD = 1
INTERRUPTED = 2
INTERNAL_ERROR = 3
USAGE_ERROR = 4
NO_TESTS = 5
NON_CONFORMANT = 10
UNDECIDED = 11
NO_REPORT = 12
NOT_TESTED = 13

#: (status, name, when) - the one table, in the order of the docs.
EXIT_STATUSES: Tuple[Tuple[int, str, str], ...] = (
    (OK, "OK", "pytest: every decided verdict conforms (PASS, WARN, WAIVED, SKIP) - CONFORMANT, or PARTIAL "
               "naming what was not decided; a simulated run with no FAIL, ERROR or INCONCLUSIVE. `sits audit`, "
               "`health`, `fleet`: the same for what they decided. `replay`, `verify`, `report validate`, "
               "`baseline`: everything held. Other commands: done"),
    (DOES_NOT_HOLD, "DOES_NOT_HOLD", "pytest: a test that is not a SITS2026 requirement failed (a lab's own test). "
                                     "`replay`: a verdict or the summary differs, or cannot be replayed; `verify`: "
                                     "a bundle's signature, hash or verdict does not hold; `report validate`: "
                                     "schema errors; `baseline`: a value outside its band"),
    (INTERRUPTED, "INCOMPLETE", "interrupted (Ctrl-C, SIGTERM) or a probe hung past the watchdog: the report "
                                "holds what was measured"),
    (INTERNAL_ERROR, "INTERNAL_ERROR", "pytest or a plugin broke; the report, if written, is INCOMPLETE"),
    (USAGE_ERROR, "USAGE_ERROR", "a bad option, profile, platform, golden set or file: the message names the fix"),
    (NO_TESTS, "NO_TESTS", "pytest collected nothing (a -m/-k that selects nothing)"),
    (NON_CONFORMANT, "NON_CONFORMANT", "a FAIL: the hardware or service was measured and does not conform (also on "
                                       "a simulated platform; `health`: a health requirement FAILs, `fleet`: a "
                                       "node FAILs). A FAIL wins over an ERROR and an INCONCLUSIVE"),
    (UNDECIDED, "UNDECIDED", "no FAIL and no ERROR, but an INCONCLUSIVE verdict, or nothing decided (every verdict "
                             "SKIP; `health`: a requirement not measured); a run with no verdict at all (no "
                             "SITS2026 requirement selected) keeps pytest's status"),
    (NO_REPORT, "NO_REPORT", "the run ended, but its report could not be written (the message names the folder)"),
    (NOT_TESTED, "NOT_TESTED", "no FAIL, but an ERROR: the suite could not test (a probe broke, nothing listens at "
                               "the endpoint; the report's result is NON_CONFORMANT all the same: nothing that "
                               "broke conforms). `health`: an ERROR, or the run did not finish or wrote no report; "
                               "`fleet`: a node that never reported"),
)

NAMES: Dict[int, str] = {code: name for code, name, _ in EXIT_STATUSES}


def by_statuses(statuses: Iterable[str]) -> int:
    """The status of a set of verdict statuses: FAIL, then ERROR, then INCONCLUSIVE decide; otherwise OK.

    (Nothing decided - an empty set or only SKIPs - is for the caller to judge: :func:`run_status`.)"""
    seen = set(statuses)
    if "FAIL" in seen:
        return NON_CONFORMANT
    if "ERROR" in seen:
        return NOT_TESTED
    if "INCONCLUSIVE" in seen:
        return UNDECIDED
    return OK


def run_status(counts: Dict[str, int], pytest_status: int) -> int:
    """A suite run's status from its verdict counts and what pytest said: pytest's own for interrupted, broken,
    misused or empty runs and for a run of no SITS2026 requirement; otherwise what the verdicts decided, whatever
    the platform (a simulated run with a FAIL is NON_CONFORMANT here, SIMULATED in the report)."""
    if pytest_status not in (OK, DOES_NOT_HOLD) or not sum(counts.values()):
        return pytest_status
    worst = by_statuses(s for s, n in counts.items() if n)
    if worst != OK:
        return worst
    decided = counts.get("PASS", 0) + counts.get("WARN", 0) + counts.get("WAIVED", 0)
    if not decided:  # as the report's summary: nothing decided is UNDECIDED
        return UNDECIDED
    return pytest_status
