"""The watchdog (``--sits-watchdog=SECONDS``): a test that has not returned in time ends the run.

A hung probe (an NVML call stuck in the driver, a sensor read that never
returns) cannot be interrupted from Python.  The watchdog does what can be
done: when a test has run for longer than the limit, a timer thread records an
ERROR verdict for the test's requirement (saying that it hung and after how
long), writes the report as INCOMPLETE with every verdict recorded so far, and
ends the process with exit status 2 (interrupted).  A hung run reports; it
decides nothing about the hardware and acts on nothing.  Under pytest-xdist a
worker's watchdog ends that worker (the controller reports the crash).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any, Optional

import pytest

from ..report.model import plain
from ..verdict import ERROR, Verdict
from .recorder import requirement_of

#: The exit status of a run the watchdog ended (pytest's own "interrupted").
WATCHDOG_EXIT = int(pytest.ExitCode.INTERRUPTED)


class Watchdog:
    def __init__(self, seconds: float, reporter: Optional[Any], simulated: bool):
        self.seconds, self.reporter, self.simulated = seconds, reporter, simulated
        self.session: Optional[pytest.Session] = None
        self.fired = threading.Event()

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.session = session

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: Optional[pytest.Item]) -> Any:
        timer = threading.Timer(self.seconds, self.fire, args=(item, time.monotonic()))
        timer.daemon = True
        timer.name = "sits-watchdog"
        timer.start()
        try:
            yield
        finally:
            timer.cancel()

    def fire(self, item: pytest.Item, started: float) -> None:
        self.fired.set()
        capman = item.config.pluginmanager.getplugin("capturemanager")
        try:  # the hung test's output capture would swallow what follows
            if capman is not None:
                capman.suspend_global_capture(in_=False)
        except Exception:
            pass
        req = requirement_of(item)
        what = f"{item.nodeid}" + (f" ({req})" if req else "")
        reason = (f"watchdog: the test did not return within {self.seconds:g} s (a probe or load hung); nothing "
                  "was decided and the run was ended")
        print(f"\nsits: watchdog: {what} has not returned after {time.monotonic() - started:.0f} s; the report "
              "is written INCOMPLETE and the run ends", file=sys.stderr, flush=True)
        try:
            if self.reporter is not None and self.session is not None:
                if req:
                    v = Verdict(req, ERROR, reason, subject="watchdog",
                                evidence={"watchdog": {"limit_s": self.seconds, "nodeid": item.nodeid, "hung": True}},
                                method="watchdog")
                    data = plain(dict(v.to_json(), nodeid=item.nodeid, simulated=self.simulated, waiver=None,
                                      seq=1000, recorded_at=time.time()))
                    self.reporter.verdicts[(item.nodeid, 1000)] = data
                # the report as the session's end writes it (not through its signal handling: this is a thread)
                self.reporter._finish(int(pytest.ExitCode.INTERRUPTED))
                for p in self.reporter.paths:
                    print(f"sits report: {p}", file=sys.stderr, flush=True)
                cleanup = getattr(self.reporter.run, "cleanup", None)
                if cleanup is not None:
                    cleanup()  # the simulated machine's trees: os._exit skips pytest_unconfigure
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(WATCHDOG_EXIT)
