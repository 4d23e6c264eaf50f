"""Earlier versions of the checks, kept so that ``sits replay`` (and ``sits verify``) recompute the verdicts of
reports written by earlier releases.

Every verdict names the check that decided it and that check's version.  When a check's rule changes (or what it
is given changes), its version is bumped and the earlier version moves here, one module per family (the stem of
its current module), registered with ``@check(NAME, version=N, legacy=True)``: replay finds it by name and
version (:func:`pytest_sits.checks.get_version`), and nothing else does.

The rules of this package:

* A legacy version is never used for a new verdict: the current module's check decides those.
* A legacy version is never edited: its body is the rule that decided the stored verdicts.  The helpers it calls
  are frozen beside it (a copy, not an import of the current code), so that no later edit of a current check can
  change an old verdict.  It keeps the threshold defaults it had (``thresholds.get(key, default)``): an old
  report's stored thresholds may lack a key that today's profiles always carry.
* A version whose rule the current check still applies (PLP-LATENCY version 2) is registered here as a call of
  the current check, and the current check says so where its rule is defined.
* No module outside this package registers a legacy version (tested in tests/test_replayable.py).
"""
