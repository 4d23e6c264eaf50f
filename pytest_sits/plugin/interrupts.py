"""Interrupts: SIGINT (Ctrl-C) and SIGTERM (what Slurm, systemd and Kubernetes send) end a run in order,
whatever their timing.

The plugin takes both signals over from the moment pytest starts its main command until the end of the run:

* **While pytest sets the run up** (profile, platform, workers): a signal is recorded and acted on as soon as the
  session runs, so even a run stopped at once writes its INCOMPLETE report (with nothing measured).
* **During the tests**, the first signal raises ``KeyboardInterrupt`` where the run is: loads stop (they are
  context managers), pytest ends the session, and the report is written INCOMPLETE with everything measured so
  far.  A second signal is recorded and announced, not raised: raising it would cut pytest's own handling of the
  first short, and pytest would then call the session finished.  A third abandons the stop at once (this run
  writes no report; the previous pair stays).
* **While the session ends** (every plugin's end, pytest-xdist stopping its workers, the report's write), signals
  are recorded and the end finishes: the folder holds the previous pair or the new one, whole.  The exit status
  then says the run was interrupted.
* **After the report**, a signal is recorded and the run ends as it was about to.

Every signal is recorded, so a run that was interrupted before its report is INCOMPLETE, never "completed".
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from contextlib import contextmanager
from typing import Any, Dict, Iterator, List

SIGNALS = (signal.SIGINT, signal.SIGTERM)
SETUP, TESTS, REPORT, DONE = "setup", "tests", "report", "done"


class Interrupts:
    """The signal policy of one pytest process (controller or xdist worker)."""

    def __init__(self) -> None:
        #: Every signal received: ``{"signal": "SIGTERM", "at": epoch seconds, "during": "setup" | "tests" |
        #: "stopping" | "report" | "done"}``.
        self.received: List[Dict[str, Any]] = []
        self.phase = SETUP
        self._old: Dict[int, Any] = {}

    @property
    def installed(self) -> bool:
        return bool(self._old)

    def install(self) -> bool:
        """Take over SIGINT and SIGTERM (main thread only; a pytest run inside a thread leaves them alone)."""
        if self._old or threading.current_thread() is not threading.main_thread():
            return False
        for sig in SIGNALS:
            self._old[sig] = signal.signal(sig, self._handle)
        return True

    def restore(self) -> None:
        for sig, old in self._old.items():
            try:
                signal.signal(sig, old)
            except (ValueError, TypeError):
                pass
        self._old.clear()

    @property
    def before_report(self) -> List[Dict[str, Any]]:
        """The signals received before the report was written (those make the run INCOMPLETE)."""
        return [r for r in self.received if r["during"] not in (REPORT, DONE)]

    @property
    def during_report(self) -> List[Dict[str, Any]]:
        return [r for r in self.received if r["during"] == REPORT]

    def session_runs(self) -> None:
        """The session has begun (collection): a signal recorded while it was set up stops it now."""
        self.phase = TESTS
        if self.received:
            raise KeyboardInterrupt(f"{self.received[0]['signal']} (received while the run was set up)")

    @contextmanager
    def writing_report(self) -> Iterator[None]:
        """Signals inside the block are recorded, not raised: the session's end (every plugin's, the report's
        write among them) runs whole."""
        before = self.phase
        self.phase = REPORT
        try:
            yield
        finally:
            self.phase = REPORT if before == REPORT else DONE

    def _handle(self, signum: int, frame: Any) -> None:
        name = signal.Signals(signum).name
        stops = len([r for r in self.received if r["during"] in (SETUP, TESTS, "stopping")])
        during = "stopping" if self.phase == TESTS and stops else self.phase
        self.received.append({"signal": name, "at": time.time(), "during": during})
        if self.phase == SETUP:
            _say(f"{name} while the run is set up: it stops as soon as the session begins, with its report")
            return
        if self.phase == REPORT:
            _say(f"{name} while the report is written: the report is finished first, then the run ends")
            return
        if self.phase == DONE:
            _say(f"{name} after the report was written: the run ends now")
            return
        if stops == 0:
            raise KeyboardInterrupt(name)
        if stops == 1:
            _say(f"{name} again: already stopping (loads are being stopped and the report written with what was "
                 "measured); one more interrupt abandons the report")
            return
        raise KeyboardInterrupt(f"{name}: the stop was abandoned")


def _say(line: str) -> None:
    try:
        sys.stderr.write(f"\nsits: {line}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
