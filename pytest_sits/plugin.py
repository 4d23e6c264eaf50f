"""The pytest plugin: options, markers, fixtures, verdict collection and reports.

Registered through the ``pytest11`` entry point ``sits``; disable it with
``-p no:sits``.  Imports here stay light: the hardware libraries are
imported by the probes that need them.
"""

from __future__ import annotations

import json
import platform as _pyplatform
import socket
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest

from .catalogue import CATALOGUE, LEVELS, level_rank
from .session import SitsRun, SitsUsageError
from .verdict import ERROR, FAIL, INCONCLUSIVE, PASS, SKIP, WAIVED, WARN, Verdict

RUN_KEY = pytest.StashKey[SitsRun]()
PROPERTY = "sits_verdict"
MARKER = "sits_requirement"


class SitsProbeError(Exception):
    """A probe broke, so nothing could be decided (an ERROR verdict)."""


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("sits", "SITS2026 conformance (pytest-sits)")
    group.addoption("--sits-profile", dest="sits_profile", default=None, metavar="NAME|FILE",
                    help="hardware profile: a bundled name (h100, h200, l40s, host, ...) or a YAML file. "
                         "Default: $SITS_PROFILE, ini sits_profile, else picked from the PCI IDs found.")
    group.addoption("--sits-platform", dest="sits_platform", default=None, metavar="SPEC",
                    help="where the evidence comes from: live (default), snapshot:DIR, or "
                         "sim:PROFILE[+fault,...] (simulated; never conformant).")
    group.addoption("--sits-level", dest="sits_level", default=None, choices=LEVELS,
                    help="run depth: quick (inventory, topology; seconds), standard (adds measurements; "
                         "minutes), full (thermal calibration, long holds). Default: quick.")
    group.addoption("--sits-report-dir", dest="sits_report_dir", default=None, metavar="DIR",
                    help="folder for sits-report.json and sits-report.html (default ./sits-report; "
                         "'none' writes no report).")
    group.addoption("--sits-golden-record", dest="sits_golden_record", default=None, metavar="DIR",
                    help="record the operator corpus' inputs and outputs here (on the reference platform).")
    group.addoption("--sits-golden", dest="sits_golden", default=None, metavar="DIR",
                    help="compare with a golden set recorded elsewhere (stored inputs, SHA-256 checked).")
    parser.addini("sits_profile", "default hardware profile (name or file)", default=None)
    parser.addini("sits_platform", "default platform spec", default=None)
    parser.addini("sits_level", "default run depth: quick, standard or full", default=None)
    parser.addini("sits_report_dir", "default report folder", default=None)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from . import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(id, level=None): the test applies SITS2026 requirement `id`; it runs at the catalogue's "
        "level (quick/standard/full) unless `level` is given.")
    for req in CATALOGUE.values():
        config.addinivalue_line("markers", f"{req.id}: SITS2026 requirement — {req.title} (level {req.level}).")
    try:
        run = SitsRun.resolve(
            profile_opt=config.getoption("sits_profile"), profile_ini=config.getini("sits_profile"),
            platform_opt=config.getoption("sits_platform"), platform_ini=config.getini("sits_platform"),
            level_opt=config.getoption("sits_level"), level_ini=config.getini("sits_level"),
            report_dir_opt=config.getoption("sits_report_dir"), report_dir_ini=config.getini("sits_report_dir"))
    except SitsUsageError as exc:
        raise pytest.UsageError(str(exc)) from None
    rec, gold = config.getoption("sits_golden_record"), config.getoption("sits_golden")
    if rec and gold:
        raise pytest.UsageError("--sits-golden-record and --sits-golden are exclusive; fix: record on the "
                                "reference platform, compare on the platform under test")
    if gold:
        from .equivalence.golden import GoldenError, GoldenSet

        try:
            GoldenSet(Path(gold))
        except GoldenError as exc:
            raise pytest.UsageError(f"bad golden set: {exc}") from None
    run.golden_record = Path(rec).resolve() if rec else None
    run.golden = Path(gold).resolve() if gold else None
    config.stash[RUN_KEY] = run
    config.hook.pytest_sits_update_inventory(config=config, inventory=run.platform.inventory())
    if not _is_worker(config):
        config.pluginmanager.register(SitsReporter(config, run), "sits-reporter")


def pytest_report_header(config: pytest.Config) -> List[str]:
    run = config.stash.get(RUN_KEY, None)
    if run is None:
        return []
    lines = [f"sits: profile {run.profile.name} ({run.profile.how}: {run.profile.why}) from {run.profile.path}",
             f"sits: platform {run.platform.describe()}",
             f"sits: level {run.level} ({run.level_how}); report "
             f"{run.report_dir if run.report_dir else 'not written'}"]
    if run.platform.simulated:
        lines.append("sits: SIMULATED platform: this run can never be reported as conformant")
    return lines


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: List[pytest.Item]) -> None:
    """Mark each conformance test with its requirement ID (for -m/-k) and drop those above the level."""
    run = config.stash.get(RUN_KEY, None)
    if run is None:
        return
    keep, drop = [], []
    for item in items:
        mark = item.get_closest_marker(MARKER)
        if mark is None:
            keep.append(item)
            continue
        req_id = mark.args[0] if mark.args else mark.kwargs.get("id")
        if req_id not in CATALOGUE:
            raise pytest.UsageError(f"{item.nodeid}: @{MARKER}({req_id!r}) names no SITS2026 requirement; "
                                    f"fix: use one of {', '.join(CATALOGUE)}")
        level = mark.kwargs.get("level") or CATALOGUE[req_id].level
        item.add_marker(req_id)
        item.user_properties.append(("sits_requirement", req_id))
        (keep if level_rank(level) <= level_rank(run.level) else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Any:
    """A requirement whose test raised before deciding gets an ERROR verdict, not silence."""
    if call.excinfo is not None and call.when in ("setup", "call"):
        req = next((v for k, v in item.user_properties if k == "sits_requirement"), None)
        decided = any(k == PROPERTY for k, _ in item.user_properties)
        outcome_exc = (pytest.skip.Exception, pytest.fail.Exception, KeyboardInterrupt)
        if req and not decided and not call.excinfo.errisinstance(outcome_exc):
            run = item.config.stash.get(RUN_KEY, None)
            verdict = Verdict(req, ERROR, f"the probe or test raised {call.excinfo.typename}: "
                              f"{str(call.excinfo.value)[:500]}", subject="-",
                              evidence={"phase": call.when, "exception": call.excinfo.exconly()[:2000]})
            _append(item, verdict, run, waiver=None)
    yield


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """`sits_accelerator` parametrizes a test over every accelerator found (by PCI address)."""
    if "sits_accelerator" not in metafunc.fixturenames:
        return
    run = metafunc.config.stash.get(RUN_KEY, None)
    accs = run.platform.inventory()["accelerators"] if run else []
    if accs:
        metafunc.parametrize("sits_accelerator", accs, ids=[a["bdf"] for a in accs])
    else:
        metafunc.parametrize("sits_accelerator", [None], ids=["no-accelerator"])


# --------------------------------------------------------------------------
# Fixtures


@pytest.fixture(scope="session")
def sits_run(pytestconfig: pytest.Config) -> SitsRun:
    """The resolved session: profile, platform, level."""
    return pytestconfig.stash[RUN_KEY]


@pytest.fixture(scope="session")
def sits_profile(sits_run: SitsRun) -> Any:
    """The resolved hardware profile."""
    return sits_run.profile


@pytest.fixture(scope="session")
def sits_platform(sits_run: SitsRun) -> Any:
    """The platform the evidence comes from (live, snapshot or sim)."""
    return sits_run.platform


@pytest.fixture(scope="session")
def sits_inventory(sits_run: SitsRun) -> Dict[str, Any]:
    """The platform's hardware inventory (evidence)."""
    return sits_run.platform.inventory()


@pytest.fixture(scope="session")
def sits_expected(sits_run: SitsRun) -> Dict[str, Any]:
    """What the profile says should be installed."""
    return sits_run.expected()


def _append(item: pytest.Item, verdict: Verdict, run: Optional[SitsRun], waiver: Optional[str]) -> Dict[str, Any]:
    data = verdict.to_json()
    data["nodeid"] = item.nodeid
    data["simulated"] = bool(run and run.platform.simulated)
    data["waiver"] = waiver
    data["seq"] = sum(1 for k, _ in item.user_properties if k == PROPERTY)
    data["recorded_at"] = time.time()
    # user_properties travel inside the TestReport, across xdist, as plain JSON.
    item.user_properties.append((PROPERTY, json.loads(json.dumps(data, default=str))))
    return data


_SEVERITY = [ERROR, FAIL, INCONCLUSIVE, WARN, PASS, WAIVED, SKIP]


class Recorder:
    """Records verdicts on the test item and turns the worst one into the pytest outcome."""

    def __init__(self, item: pytest.Item, run: SitsRun):
        self.item, self.run = item, run

    def __call__(self, *verdicts: Verdict) -> None:
        recorded = []
        for v in verdicts:
            waiver = self.run.profile.waiver(v.requirement)
            if waiver and v.status in (FAIL, INCONCLUSIVE, WARN, ERROR):
                v.evidence = dict(v.evidence, waived_status=v.status)
                v = Verdict(v.requirement, WAIVED, f"{v.status} waived by profile: {v.reason}", v.measured,
                            v.threshold, v.unit, v.subject, None, v.evidence, v.method)
            recorded.append(_append(self.item, v, self.run, waiver if v.status == WAIVED else None))
        worst = min(recorded, key=lambda d: _SEVERITY.index(d["status"]))
        msg = "; ".join(f"[{d['subject']}] {d['reason']}" for d in recorded if d["status"] == worst["status"])
        sim = " [SIMULATED]" if self.run.platform.simulated else ""
        if worst["status"] == FAIL:
            fixes = {d["remediation"] for d in recorded if d["status"] == FAIL and d["remediation"]}
            pytest.fail(f"{worst['requirement']} FAIL{sim}: {msg}\n  remediation: {' / '.join(sorted(fixes))}",
                        pytrace=False)
        if worst["status"] == ERROR:
            raise SitsProbeError(f"{worst['requirement']} ERROR{sim}: {msg}")
        if worst["status"] == INCONCLUSIVE or all(d["status"] in (SKIP, WAIVED) for d in recorded):
            _skip(f"{worst['requirement']} {worst['status']}{sim}: {msg}")
        if worst["status"] == WARN:
            import warnings

            warnings.warn(SitsWarning(f"{worst['requirement']} WARN{sim}: {msg}"), stacklevel=2)


def _skip(msg: str) -> None:
    """Skip, reported at the test's own location rather than this module's."""
    try:
        raise pytest.skip.Exception(msg, _use_item_location=True)
    except TypeError:  # pragma: no cover - pytest without the keyword
        pytest.skip(msg)


class SitsWarning(UserWarning):
    """A WARN verdict: conforms, but deserves a look."""


@pytest.fixture
def sits_record(request: pytest.FixtureRequest, sits_run: SitsRun) -> Recorder:
    """Call with one or more Verdicts: they go into the report; the worst decides the test's outcome."""
    return Recorder(request.node, sits_run)


@pytest.fixture
def sits_progress(pytestconfig: pytest.Config) -> Any:
    """Call with a line of progress: shown on the terminal at once, around pytest's output capture."""
    capman = pytestconfig.pluginmanager.getplugin("capturemanager")
    tr = pytestconfig.pluginmanager.getplugin("terminalreporter")

    def say(message: str) -> None:
        if tr is None:  # an xdist worker has no terminal
            return
        if capman is not None:
            with capman.global_and_fixture_disabled():
                tr.write_line(f"sits: {message}")
        else:
            tr.write_line(f"sits: {message}")
    return say


@pytest.fixture(scope="session")
def sits_calibrated_duty() -> Dict[str, float]:
    """The load duty at which each device last settled in this session (a later calibration starts there)."""
    return {}


@pytest.fixture
def sits_thermal_steady(sits_profile: Any, sits_progress: Any, sits_calibrated_duty: Dict[str, float]) -> Any:
    """Factory: ``with sits_thermal_steady(rig, "THERM-GPU-STEADY") as trace:`` calibrates the rig's load until
    its temperature is steady in the profile's band (or the timeout), and keeps the load on inside the block.
    One calibration per device at a time, across xdist workers (a file lock per device)."""
    from contextlib import contextmanager

    from .thermal import calibrate, device_lock

    @contextmanager
    def steady(rig: Any, requirement: str) -> Any:
        th = sits_profile.thresholds(requirement)

        def progress(p: Dict[str, Any]) -> None:
            st = p["state"]
            where = "in band" if st.get("in_band") else f"band {p['band'][0]:g}-{p['band'][1]:g}"
            window = (f"window {min(p['elapsed_s'], th['window_s']):.0f}/{th['window_s']:g} s, drift "
                      f"{st['drift']:+.2f} °C") if st.get("samples") else "reading failed"
            sits_progress(f"[{requirement} {rig.subject}] {p['elapsed_s']:.0f} s: {p['value_c']} °C ({where}), {window}")

        with device_lock(rig.subject) as lock:
            with rig.load() as load:
                trace = calibrate(rig.read, load.set_duty, rig.clock, rig.sleep, th,
                                  float(rig.sensor_info["resolution_c"]), progress=progress,
                                  duty0=sits_calibrated_duty.get(rig.subject, 0.5))
                if trace["stopped"] == "steady":
                    sits_calibrated_duty[rig.subject] = trace["final_duty"]
                trace["lock"] = lock
                trace["load"] = load.evidence()
                yield trace
    return steady


# --------------------------------------------------------------------------
# Reporting (controller only)


class SitsReporter:
    def __init__(self, config: pytest.Config, run: SitsRun):
        self.config, self.run = config, run
        self.verdicts: Dict[Tuple[str, int], Dict[str, Any]] = {}
        self.collected: Dict[str, str] = {}
        self.outcomes: Dict[str, int] = {}
        self.workers = 0
        self.paths: List[Path] = []
        self.write_error: Optional[str] = None
        self.report: Optional[Dict[str, Any]] = None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        for key, value in report.user_properties:
            if key == PROPERTY:
                self.verdicts.setdefault((report.nodeid, value["seq"]), value)
            elif key == "sits_requirement":
                self.collected.setdefault(value, "COLLECTED")
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
        from . import report as rep

        now = time.time()
        try:
            name = pytest.ExitCode(exitstatus).name
        except ValueError:
            name = str(exitstatus)
        completed = exitstatus not in (pytest.ExitCode.INTERRUPTED, pytest.ExitCode.INTERNAL_ERROR)
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
                 "args": [str(a) for a in self.config.invocation_params.args],
                 "xdist_workers": self.workers, "tests": self.outcomes},
            environment={"hostname": socket.gethostname(), "python": _pyplatform.python_version(),
                         "os": _pyplatform.platform(), "packages": rep.package_versions()},
            platform={"kind": self.run.platform.kind, "label": self.run.platform.label,
                      "simulated": self.run.platform.simulated},
            profile=self.run.profile.to_json(), inventory=inventory, verdicts=verdicts,
            collected=self.collected)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        from . import report as rep

        if self.run.golden_record is not None and (self.run.golden_record / "entries").is_dir():
            from .equivalence.golden import finalize

            inv = self.run.platform.inventory()
            finalize(self.run.golden_record, {
                "platform": {"label": self.run.platform.label, "cpu": inv["cpu"].get("model"),
                             "accelerators": [a["display_name"] for a in inv["accelerators"]]},
                "profile": self.run.profile.name, "versions": rep.package_versions(),
                "complete": exitstatus not in (pytest.ExitCode.INTERRUPTED, pytest.ExitCode.INTERNAL_ERROR)})
        self.report = self.build_report(exitstatus)
        if self.run.report_dir is None:
            return
        try:
            jpath = self.run.report_dir / "sits-report.json"
            hpath = self.run.report_dir / "sits-report.html"
            rep.atomic_write(jpath, json.dumps(self.report, indent=2, sort_keys=False, default=str) + "\n")
            rep.atomic_write(hpath, rep.render_html(self.report))
            self.paths = [jpath, hpath]
        except OSError as exc:
            self.write_error = f"could not write the report into {self.run.report_dir}: {exc}"

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        from . import report as rep

        if self.report is None:
            return
        tr = terminalreporter
        tr.write_sep("=", "SITS2026 conformance summary" + (" (SIMULATED)" if self.run.platform.simulated else ""))
        for line in rep.terminal_lines(self.report):
            tr.write_line(line)
        for p in self.paths:
            tr.write_line(f"sits report: {p}")
        if self.write_error:
            tr.write_line(f"sits: {self.write_error}", red=True)
