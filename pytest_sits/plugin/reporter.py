"""The reporter: collects verdicts on the controller and writes the JSON/HTML report and the terminal summary.

Created only on the controller (never on an xdist worker), registered as a
plugin in ``pytest_configure`` and removed in ``pytest_unconfigure``, as
pytest's own junitxml reporter is.  The report is written in
``pytest_sessionfinish``, which pytest calls also after Ctrl-C (and after
SIGTERM, which the plugin turns into the same orderly stop).
"""

from __future__ import annotations

import json
import platform as _pyplatform
import socket
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, cast

import pytest

from .. import exitcodes
from ..report.model import EXIT_NO_REPORT, exit_status, plain
from .recorder import MARKER, REQUIREMENT_PROPERTY
from .session import SitsRun, redact_args



class SitsReporter:
    def __init__(self, config: pytest.Config, run: SitsRun):
        self.config, self.run = config, run
        self.verdicts: Dict[Tuple[str, int], Dict[str, Any]] = {}
        self.collected: Dict[str, str] = {}
        self.outcomes: Dict[str, int] = {}
        self.workers = 0
        self.paths: List[Path] = []
        self.terminal: Any = None
        self.write_error: Optional[str] = None
        self.report: Optional[Dict[str, Any]] = None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        for value in getattr(report, "sits_verdicts", None) or []:
            self.verdicts.setdefault((report.nodeid, value["seq"]), value)
        for key, value in report.user_properties:
            if key == REQUIREMENT_PROPERTY:  # the requirement ID (a str) that the collection recorded
                self.collected.setdefault(cast(str, value), "COLLECTED")
        if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
            self.outcomes[report.outcome] = self.outcomes.get(report.outcome, 0) + 1

    def pytest_deselected(self, items: List[pytest.Item]) -> None:
        for item in items:
            mark = item.get_closest_marker(MARKER)
            if mark is not None and mark.args:
                self.collected.setdefault(mark.args[0], "DESELECTED")

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        self.workers += 1

    def build_report(self, exitstatus: int) -> Dict[str, Any]:
        from ..report import model as rep

        now = time.time()
        try:
            name = pytest.ExitCode(exitstatus).name
        except ValueError:
            name = str(exitstatus)
        # A signal is recorded whatever pytest made of it: a second Ctrl-C can cut pytest's own handling of the
        # first short, and pytest then passes "OK" here. A run that received one did not complete.
        completed = (exitstatus not in (pytest.ExitCode.INTERRUPTED, pytest.ExitCode.INTERNAL_ERROR)
                     and not self.run.interrupts.before_report)
        try:
            inventory = self.run.platform.inventory()
        except Exception as exc:  # a broken probe must not lose the verdicts
            inventory = {"cpu": {}, "memory": {}, "numa": [], "pci": [], "accelerators": [],
                         "platform": {}, "error": f"{type(exc).__name__}: {exc}"}
        iso = lambda t: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))  # noqa: E731
        verdicts = sorted(self.verdicts.values(), key=lambda v: (v["recorded_at"], v["nodeid"], v["seq"]))
        return rep.build(
            run={"started_at": iso(self.run.started_at), "finished_at": iso(now),
                 "duration_s": round(now - self.run.started_at, 3), "completed": completed,
                 "exit_status": int(exitstatus), "exit_status_name": name, "level": self.run.level,
                 "args": redact_args(self.config.invocation_params.args),
                 "interrupts": [dict(r) for r in self.run.interrupts.before_report],
                 "xdist_workers": self.workers, "tests": self.outcomes, "plan": self._plan(),
                 "under_test": self.run.under_test(),
                 **({"serving": self.run.served} if self.run.served is not None else {})},
            environment={"hostname": socket.gethostname(), "python": _pyplatform.python_version(),
                         "os": _pyplatform.platform(), "packages": rep.package_versions()},
            platform={"kind": self.run.platform.kind, "label": self.run.platform.label,
                      "simulated": self.run.platform.simulated},
            profile=self.run.profile.to_json(), inventory=inventory, verdicts=verdicts,
            collected=self.collected)

    def _plan(self) -> Dict[str, Any]:
        try:
            return self.run.plan().to_json()
        except Exception as exc:  # noqa: BLE001 - the report must be written whatever the plan's inputs hold
            return {"error": f"the plan could not be computed: {type(exc).__name__}: {exc}"}

    def _finalize_golden(self, record: Path, exitstatus: int) -> None:
        """Write the golden set's manifest; a failure is an ERROR verdict in the report, never a lost report."""
        from ..report import model as rep
        from ..equivalence.golden import finalize
        from ..verdict import ERROR, Verdict

        try:
            inv = self.run.platform.inventory()
            finalize(record, {
                "platform": {"label": self.run.platform.label, "cpu": inv["cpu"].get("model"),
                             "accelerators": [a["display_name"] for a in inv["accelerators"]]},
                "profile": self.run.profile.name, "versions": rep.package_versions(),
                "complete": exitstatus not in (pytest.ExitCode.INTERRUPTED, pytest.ExitCode.INTERNAL_ERROR)})
        except Exception as exc:  # the report must still be written
            v = Verdict("EQ-PRECISION", ERROR, f"the golden set {record} could not be finalised: "
                        f"{type(exc).__name__}: {exc}", subject="golden set",
                        evidence={"golden_record": str(record)})
            data = plain(dict(v.to_json(), nodeid="(session finish)", simulated=self.run.platform.simulated,
                              waiver=None, seq=0, recorded_at=time.time()))
            self.verdicts[("(session finish)", 0)] = data

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.run.interrupts.before_report and exitstatus != pytest.ExitCode.INTERNAL_ERROR:
            # A second Ctrl-C can cut pytest's handling of the first short: pytest then says "OK". It was not.
            exitstatus = session.exitstatus = pytest.ExitCode.INTERRUPTED
        if session.config.getoption("collectonly", False):
            return  # nothing ran: the last real report stays as it is
        # A signal now is recorded, not raised: the report pair is written whole (interrupts.py).
        with self.run.interrupts.writing_report():
            self._finish(exitstatus)
        if self.run.interrupts.during_report:
            session.exitstatus = pytest.ExitCode.INTERRUPTED
        elif self.write_error:
            session.exitstatus = EXIT_NO_REPORT
        elif self.report is not None:
            session.exitstatus = self.report["run"]["exit_status"]

    def _finish(self, exitstatus: int) -> None:
        from ..report.render import render_html
        from ..report.store import HTML_NAME, JSON_NAME, write_pair

        if self.run.golden_record is not None and (self.run.golden_record / "entries").is_dir():
            self._finalize_golden(self.run.golden_record, exitstatus)
        self.report = self.build_report(exitstatus)
        # The status the run ends with (pytest's own for pytest's outcomes, else what the verdicts decided), in the
        # report as well: CI gates on either.
        run = self.report["run"]
        run["pytest_exit_status"] = run["exit_status"]
        run["exit_status"] = exit_status(self.report["summary"], int(exitstatus))
        if run["exit_status"] != run["pytest_exit_status"]:
            run["exit_status_name"] = exitcodes.NAMES.get(run["exit_status"], run["exit_status_name"])
        html = render_html(self.report) if self.run.report_dir is not None else None
        # The run ends when its report is ready: the page's rendering (seconds on a run with many charts) counted.
        now = time.time()
        run["finished_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))
        run["duration_s"] = round(now - self.run.started_at, 3)
        self._write_prometheus()
        if self.run.report_dir is None or html is None:
            return
        try:
            jpath = self.run.report_dir / JSON_NAME
            hpath = self.run.report_dir / HTML_NAME
            text = json.dumps(plain(self.report), indent=2, sort_keys=False, allow_nan=False) + "\n"
            write_pair(jpath, text, hpath, html, self.run.started_at)
            self.paths = [jpath, hpath, *self.paths]
        except OSError as exc:
            self.write_error = (f"could not write the report into {self.run.report_dir}: {exc}; fix: give a writable "
                                "folder with --sits-report-dir DIR (or 'none' to write no report)")

    def _write_prometheus(self) -> None:
        """The run's metrics for node_exporter's textfile collector (--sits-prometheus), replaced whole."""
        if self.run.prometheus is None or self.report is None:
            return
        from ..files import atomic_write
        from ..report.prometheus import report_text

        try:
            atomic_write(self.run.prometheus, report_text(plain(self.report)))
            self.paths.append(self.run.prometheus)
        except OSError as exc:
            self.write_error = (f"could not write the Prometheus textfile {self.run.prometheus}: {exc}; fix: give a "
                                "writable path with --sits-prometheus=FILE")

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        from ..report.render import terminal_rows

        if self.report is None:
            return
        tr = terminalreporter
        width = max(60, min(tr._tw.fullwidth, 160))  # noqa: SLF001 - the terminal's width, as pytest measured it
        tr.write_sep("=", "SITS2026 conformance summary" + (" (SIMULATED)" if self.run.platform.simulated else ""))
        for line, status in terminal_rows(self.report, width):
            tr.write_line(line, **COLOURS.get(status or "", {}))
        for p in self.paths:
            tr.write_line(f"sits report: {p}")
        if self.write_error:
            tr.write_line(f"sits: {self.write_error}", red=True)
        self.terminal = tr

    def print_result(self) -> None:
        """The run's result, as the very last line of the output (after pytest's own summary line)."""
        from ..report.render import result_line

        tr = self.terminal
        if tr is None or self.report is None:
            return
        result = self.report["summary"]["result"]
        tr.write_line(result_line(self.report), bold=True, **COLOURS.get(RESULT_STATUS.get(result, ""), {}))


#: Terminal colours by status (pytest's markup): problems red, doubts yellow, passes green.
COLOURS = {"PASS": {"green": True}, "FAIL": {"red": True}, "ERROR": {"red": True}, "INCONCLUSIVE": {"yellow": True},
           "WARN": {"yellow": True}, "WAIVED": {"cyan": True}}
RESULT_STATUS = {"CONFORMANT": "PASS", "PARTIAL": "WARN", "NON_CONFORMANT": "FAIL", "UNDECIDED": "INCONCLUSIVE",
                 "INCOMPLETE": "INCONCLUSIVE", "SIMULATED": "WAIVED"}
