"""The pytest plugin: hooks only.

Registered through the ``pytest11`` entry point ``sits``; disable it with
``-p no:sits``.  Options are resolved by :class:`pytest_sits.plugin.session.SitsRun`,
the public fixtures live in :mod:`pytest_sits.plugin.fixtures`, verdicts are
recorded by :mod:`pytest_sits.plugin.recorder` and the report is written by
:mod:`pytest_sits.plugin.reporter` (controller only).  Imports here stay light: the
hardware libraries are imported by the probes that need them.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Dict, List, Optional, cast

import pytest

from ..catalogue import CATALOGUE, LEVELS, level_rank
from .recorder import MARKER, REQUIREMENT_PROPERTY, RUN_KEY, STARTED_KEY, append, requirement_of, verdicts_of
from .interrupts import Interrupts
from .session import SitsRun, SitsUsageError
from ..verdict import ERROR, Verdict

pytest_plugins = ("pytest_sits.plugin.fixtures",)



def did_you_mean(value: str, choices: Any) -> str:
    """' did you mean 'full'?' for a value near one of ``choices`` (else '')."""
    import difflib

    near = difflib.get_close_matches(str(value), [str(c) for c in choices], n=1, cutoff=0.6)
    return f" did you mean {near[0]!r}?" if near else ""


def _level(value: str) -> str:
    """``--sits-level``'s value: one of the levels, or argparse's error with a did-you-mean."""
    import argparse

    if value in LEVELS:
        return value
    raise argparse.ArgumentTypeError(f"{value!r} is not a level;{did_you_mean(value, LEVELS) or ''} "
                                     f"(use one of {', '.join(LEVELS)})")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("sits", "SITS2026 conformance (pytest-sits)")
    group.addoption("--sits", dest="sits_suite", action="store_true", default=False,
                    help="run the bundled SITS2026 conformance suite from any folder (with no test path, any "
                         "--sits-* option does too where the folder holds no test module of its own); give paths "
                         "to run your own tests instead, and add --pyargs pytest_sits.conformance to run both.")
    group.addoption("--sits-profile", dest="sits_profile", default=None, metavar="NAME|FILE",
                    help="hardware profile: a bundled name (h100, h200, l40s, host, ...) or a YAML file. "
                         "Default: $SITS_PROFILE, ini sits_profile, else picked from the PCI IDs found.")
    group.addoption("--sits-platform", dest="sits_platform", default=None, metavar="SPEC",
                    help="where the evidence comes from: live (default), snapshot:DIR, evidence:DIR (texts a "
                         "vendor submitted: nvidia-smi, lspci, rocm-smi, amd-smi, kernel logs; partial at best), "
                         "or sim:PROFILE[+fault,...] (simulated; never conformant).")
    group.addoption("--sits-level", dest="sits_level", default=None, type=_level, metavar="|".join(LEVELS),
                    help="run depth: quick (inventory, topology; seconds), standard (adds measurements; "
                         "minutes), full (thermal calibration, long holds). Default: quick.")
    group.addoption("--sits-report-dir", dest="sits_report_dir", default=None, metavar="DIR",
                    help="folder for sits-report.json and sits-report.html (default ./sits-report; "
                         "'none' writes no report).")
    group.addoption("--sits-golden-record", dest="sits_golden_record", default=None, metavar="DIR",
                    help="record the operator corpus' inputs and outputs here (on the reference platform).")
    group.addoption("--sits-golden", dest="sits_golden", default=None, metavar="DIR",
                    help="compare with a golden set recorded elsewhere (stored inputs, SHA-256 checked).")
    group.addoption("--sits-endpoint", dest="sits_endpoint", default=None, metavar="URL",
                    help="an OpenAI-compatible server (vLLM, TGI, SGLang, llama.cpp, Triton) held to SVC-SLA: its "
                         "base URL, e.g. http://127.0.0.1:8000 (asked GET /v1/models and one short request "
                         "before any load); default: the built-in model.")
    group.addoption("--sits-serve", dest="sits_serve", default=None, metavar="COMMAND",
                    help="start the server under test with COMMAND ('profile': the command of the profile's "
                         "serving: section, whose other settings the --sits-serve-* options override; split as "
                         "a shell would, run without one; "
                         "{port} is replaced by the port), e.g. --sits-serve='python -m "
                         "vllm.entrypoints.openai.api_server --model DIR --port {port}': the suite waits until "
                         "/v1/models answers, measures it as --sits-endpoint does, keeps its log in the report "
                         "folder (serving/server.log) and stops it at the end (SIGTERM, then SIGKILL). "
                         "Exclusive with --sits-endpoint.")
    group.addoption("--sits-serve-port", dest="sits_serve_port", default=None, metavar="PORT",
                    help="the port the launched server listens on, on 127.0.0.1 (default: a free one, given to the "
                         "command as {port}); a port already in use is refused.")
    group.addoption("--sits-serve-env", dest="sits_serve_env", action="append", default=None,
                    metavar="KEY=VALUE", help="an environment variable of the launched server (repeatable); "
                                             "its value is never written to the report.")
    group.addoption("--sits-serve-model", dest="sits_serve_model", default=None, metavar="NAME",
                    help="the model the launched server must list in /v1/models before it counts as ready "
                         "(default: any model it lists).")
    group.addoption("--sits-serve-timeout", dest="sits_serve_timeout", default=None, metavar="SECONDS",
                    help="how long the launched server may take to be ready (default 900 s); past it, the server "
                         "is stopped and the run ends with a usage error quoting its log.")
    group.addoption("--sits-serve-accelerators", dest="sits_serve_accelerators", default=None, metavar="LIST",
                    help="the accelerators the launched server uses (comma-separated addresses or indices), "
                         "recorded in the report.")
    group.addoption("--sits-dataset", dest="sits_dataset", default=None, metavar="FILE",
                    help="the prompts sent to the server under test (--sits-serve / --sits-endpoint): JSON Lines "
                         "with a \"prompt\" (and optionally \"output_tokens\") per line, or a ShareGPT JSON "
                         "array; default: English-word prompts sized in the server's own tokens.")
    group.addoption("--sits-endpoint-key", dest="sits_endpoint_key", default=None, metavar="KEY",
                    help="the endpoint's API key, sent as 'Authorization: Bearer KEY' (default: $OPENAI_API_KEY; "
                         "prefer the variable: a key on the command line shows in the process list). Never "
                         "written to the report.")
    group.addoption("--sits-redfish", dest="sits_redfish", default=None, metavar="URL",
                    help="the BMC's Redfish service for wall power (credentials from $SITS_REDFISH_USER and "
                         "$SITS_REDFISH_PASSWORD).")
    group.addoption("--sits-prometheus", dest="sits_prometheus", default=None, metavar="FILE",
                    help="also write the run's metrics as a Prometheus textfile (for node_exporter's textfile "
                         "collector: a .prom file in its directory), replaced atomically; needs prometheus-client.")
    group.addoption("--sits-watchdog", dest="sits_watchdog", default=None, type=float, metavar="SECONDS",
                    help="a test (its probes and loads) that has not returned after SECONDS ends the run: the "
                         "report is written INCOMPLETE, naming the hung requirement, and pytest exits 2 (interrupted). "
                         "Default: no watchdog (sits health sets one).")
    group.addoption("--sits-health-load", dest="sits_health_load", default=None, choices=("suite", "inference"),
                    help="the load of the health window (DEP-THROTTLE, DEP-PCIE-ERRORS, DEP-XID, ECC counts): "
                         "'suite' (default, the accelerator burner) or 'inference' (the inference load of PLP-*, "
                         "the load a node serves; sits health --resume uses it).")
    group.addoption("--sits-budget", dest="sits_budget", default=None, metavar="MINUTES",
                    help="time budget of the run in minutes: the trials of measured requirements are planned to fit "
                         "(fewer trials, wider intervals, more INCONCLUSIVE); the header states the plan's estimate. "
                         "Default: no budget (the default trials).")
    parser.addini("sits_profile", "default hardware profile (name or file)", default=None)
    parser.addini("sits_platform", "default platform spec", default=None)
    parser.addini("sits_level", "default run depth: quick, standard or full", default=None)
    parser.addini("sits_report_dir", "default report folder", default=None)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from . import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


_INTERRUPTS = pytest.StashKey[Interrupts]()
#: The folder of the bundled conformance suite, when the run collects it because no test path was given.
_BUNDLED = pytest.StashKey[str]()


def bundled_suite() -> str:
    """The folder of the installed conformance modules (``pytest_sits.conformance``)."""
    from .. import conformance  # type: ignore[attr-defined]

    return str(Path(conformance.__file__).parent)


#: Folders never searched for a project's own test modules (environments, caches, version control).
_SKIP_DIRS = {".git", ".hg", ".tox", ".nox", ".venv", "venv", "node_modules", "__pycache__", "sits-report",
              ".pytest_cache", "site-packages", "build", "dist"}


def _holds_tests(folder: Path, limit: int = 5000) -> bool:
    """Whether ``folder`` holds a test module of its own (``test_*.py``/``*_test.py``), looked for in at most
    ``limit`` entries, without following links."""
    import os

    seen = 0
    for _root, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if d not in _SKIP_DIRS and not d.startswith(".")]
        seen += len(files) + len(dirs)
        if any(f.endswith(".py") and (f.startswith("test_") or f.endswith("_test.py")) for f in files):
            return True
        if seen > limit:
            return False
    return False


def _take_signals_over(config: pytest.Config) -> None:
    if config.stash.get(_INTERRUPTS, None) is not None:
        return
    interrupts = Interrupts()
    if interrupts.install():
        config.add_cleanup(interrupts.restore)
    config.stash[_INTERRUPTS] = interrupts


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: List[str]) -> None:
    """Installed means runnable: with no test path given, ``--sits`` runs the bundled conformance suite wherever
    pytest is started, and so does any ``--sits-*`` option in a folder that holds no test module of its own (a
    lab's own tests there run as pytest finds them).  A path given runs that instead; a project run from its
    rootdir whose ini file names ``testpaths`` keeps them (this checkout's own).

    SIGINT and SIGTERM are taken over here, before the conftests are imported (a lab's may import torch, seconds):
    from this moment a signal leaves an INCOMPLETE report (interrupts.py)."""
    _take_signals_over(early_config)
    ns = early_config.known_args_namespace
    if ns.file_or_dir or getattr(ns, "pyargs", False):
        return
    here = Path(early_config.invocation_params.dir)
    if early_config.getini("testpaths") and here == early_config.rootpath:
        return
    if not getattr(ns, "sits_suite", False):
        if not any(str(a).startswith("--sits-") for a in args) or _holds_tests(here):
            return
    suite = bundled_suite()
    args.append(suite)
    early_config.stash[_BUNDLED] = suite


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """Take SIGINT and SIGTERM over before the run is set up, if pytest_load_initial_conftests has not (see
    interrupts.py); given back at the end."""
    _take_signals_over(config)
    _benchmark_storage_aside(config)
    if not _benchmark_asked(config) and not config.pluginmanager.has_plugin("sits-benchmark-banner"):
        config.pluginmanager.register(_BenchmarkBanner(), "sits-benchmark-banner")


def _benchmark_asked(config: pytest.Config) -> bool:
    return any(str(a).startswith("--benchmark") for a in config.invocation_params.args)


def _benchmark_storage_aside(config: pytest.Config) -> None:
    """pytest-benchmark makes its storage folder (``./.benchmarks``) at start-up, in every folder a run starts
    from: unless an option that reads or writes it was given, it goes into a temporary folder removed at the end."""
    stored = ("--benchmark-save", "--benchmark-autosave", "--benchmark-compare", "--benchmark-storage",
              "--benchmark-histogram")
    if any(str(a).startswith(stored) for a in config.invocation_params.args) or \
            not hasattr(config.option, "benchmark_storage"):
        return
    import shutil
    import tempfile

    tmp = tempfile.mkdtemp(prefix="sits-benchmarks-")
    config.option.benchmark_storage = f"file://{tmp}"
    config.add_cleanup(lambda: shutil.rmtree(tmp, ignore_errors=True))


class _BenchmarkBanner:
    """pytest-benchmark's banner in the header only when a ``--benchmark-*`` option was given."""

    @pytest.hookimpl(wrapper=True)
    def pytest_report_header(self, config: pytest.Config) -> Any:
        lines = yield

        def keep(line: Any) -> bool:
            return not (isinstance(line, str) and line.startswith("benchmark:"))
        return [[x for x in line if keep(x)] if isinstance(line, list) else line for line in lines if keep(line)]


def _values_taken_as_paths(config: pytest.Config) -> List[str]:
    """``--sits-X VALUE`` given as two arguments whose VALUE exists on disk: pytest's first look at the command
    line, which chooses the rootdir and the ini file, does not know the plugin's options yet and takes VALUE as a
    test path (so a lab's pytest.ini is ignored, or a checkout's own tests are collected)."""
    args = [str(a) for a in config.invocation_params.args]
    here = Path(config.invocation_params.dir)
    takes_value = {opt for opt in _option_names(config)}
    out = []
    for flag, value in zip(args, args[1:]):
        if flag in takes_value and not value.startswith("-") and (here / value).exists():
            target = (here / value).resolve()
            # A file in the folder pytest was started in (`--sits-profile h100.yaml`) leads pytest to the same
            # rootdir and ini file as no path at all: only a value elsewhere can change them.
            if (target.parent if target.is_file() else target) != here.resolve():
                out.append(f"{flag} {value}")
    if out and _setup_unchanged(config):
        return []
    return out


def _setup_unchanged(config: pytest.Config) -> bool:
    """Whether pytest's own choice of rootdir and ini file, made again from the test paths alone (the values now
    read as the options' values), is the one it made: then a value taken for a path changed nothing (a profile in
    a folder below the one pytest was started in, under the same ini file).  False where it cannot be told."""
    import inspect

    try:
        from _pytest.config.findpaths import determine_setup
    except ImportError:  # pragma: no cover - another pytest
        return False
    opt = config.option
    given: Dict[str, Any] = {"inifile": getattr(opt, "inifilename", None), "override_ini": getattr(opt, "override_ini", None),
             "args": [str(a) for a in (getattr(opt, "file_or_dir", None) or [])],
             "rootdir_cmd_arg": getattr(opt, "rootdir", None) or None,
             "invocation_dir": Path(config.invocation_params.dir), "config": None}
    try:
        params = inspect.signature(determine_setup).parameters
        kwargs = {name: given[name] for name in params if name in given}
        if any(p.default is inspect.Parameter.empty and name not in kwargs for name, p in params.items()):
            return False  # pragma: no cover - a signature this code does not know
        rootpath, inipath = determine_setup(**kwargs)[:2]
    except Exception:  # pragma: no cover - a pytest whose internals moved: refuse as before
        return False
    return (Path(rootpath).resolve() == Path(config.rootpath).resolve()
            and (Path(inipath).resolve() if inipath else None) == (config.inipath.resolve() if config.inipath else None))


def _option_names(config: pytest.Config) -> List[str]:
    """The plugin's options that take a value."""
    try:
        group = config._parser.getgroup("sits")  # noqa: SLF001 - pytest exposes no public view of a group
        return [name for opt in group.options for name in opt.names() if name.startswith("--")
                and opt.attrs().get("action", "store") == "store"]
    except Exception:  # pragma: no cover - another pytest: every --sits- option takes a value
        return [a for a in map(str, config.invocation_params.args) if a.startswith("--sits-")]


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(id, level=None): the test applies SITS2026 requirement `id`; it runs at the catalogue's "
        "level (quick/standard/full) unless `level` is given.")
    for req in CATALOGUE.values():
        config.addinivalue_line("markers", f"{req.id}: SITS2026 requirement — {req.title} (level {req.level}).")
    # A WARN verdict is also a SitsWarning; the summary already lists it with its reason, so pytest's warnings
    # section does not repeat it, unless asked: `-W error::pytest_sits.plugin.recorder.SitsWarning` fails on it.
    config.addinivalue_line("filterwarnings", "ignore::pytest_sits.plugin.recorder.SitsWarning")
    if not _is_worker(config):
        spaced = _values_taken_as_paths(config)
        if spaced:
            fixed = ", ".join("=".join(s.split(" ", 1)) for s in spaced)
            raise pytest.UsageError(
                f"{', '.join(spaced)}: pytest took the value given after a space for a test path when it chose its "
                f"rootdir ({config.rootpath}) and ini file ({config.inipath or 'none'}); fix: write {fixed}")
    try:
        run = SitsRun.from_config(config)
    except SitsUsageError as exc:
        raise pytest.UsageError(str(exc)) from None
    if not _is_worker(config):  # the run began with the process: the report's duration_s covers it whole
        from .clock import process_started_at

        run.started_at = min(run.started_at, process_started_at())
    config.stash[RUN_KEY] = run
    _announce_lock_waits(config)
    if run.platform.simulated:  # simulated devices belong to this run: no lock of another run's is theirs
        from ..conditions.locks import scope_simulated

        scope_simulated(f"{run.started_at!r}")
    # SIGTERM ends the run as Ctrl-C does; a signal while the run is set up stops it once the session runs, a
    # second one while stopping or one while the report is written does not cut the stop short (interrupts.py).
    interrupts = config.stash.get(_INTERRUPTS, None)
    if interrupts is None:  # pytest_cmdline_main did not run (pytest started another way)
        interrupts = config.stash[_INTERRUPTS] = Interrupts()
        if interrupts.install():
            config.add_cleanup(interrupts.restore)
    run.interrupts = interrupts
    if _is_worker(config):
        if run.watchdog_s is not None:
            from .watchdog import Watchdog

            config.pluginmanager.register(Watchdog(run.watchdog_s, None, run.platform.simulated), "sits-watchdog")
        return
    config.hook.pytest_sits_update_inventory(config=config, inventory=run.platform.inventory())
    if run.serve is not None and not config.getoption("collectonly", False):
        from .serving import launch

        launch(config, run)
    from .reporter import SitsReporter

    reporter = SitsReporter(config, run)
    config.pluginmanager.register(reporter, "sits-reporter")
    if run.watchdog_s is not None:
        from .watchdog import Watchdog

        config.pluginmanager.register(Watchdog(run.watchdog_s, reporter, run.platform.simulated), "sits-watchdog")


def pytest_unconfigure(config: pytest.Config) -> None:
    watchdog = config.pluginmanager.get_plugin("sits-watchdog")
    if watchdog is not None:
        config.pluginmanager.unregister(watchdog)
    reporter = config.pluginmanager.get_plugin("sits-reporter")
    if reporter is not None:
        reporter.print_result()
        config.pluginmanager.unregister(reporter)
    run = config.stash.get(RUN_KEY, None)
    if run is not None:
        run.close_environment()
        run.cleanup()


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """pytest-xdist: hand each worker the run the controller resolved (profile, platform, inventory)."""
    run = node.config.stash.get(RUN_KEY, None)
    if run is not None:
        node.workerinput["sits"] = run.to_workerinput()


def pytest_report_header(config: pytest.Config) -> List[str]:
    run = config.stash.get(RUN_KEY, None)
    if run is None:
        return []
    lines = [f"sits: profile {run.profile.name} ({run.profile.how}: {run.profile.why}) from {run.profile.path}",
             f"sits: platform {_printable(run.platform.describe())}",
             f"sits: level {run.level} ({run.level_how}); report "
             f"{run.report_dir if run.report_dir else 'not written'}"]
    if run.platform.simulated:
        lines.append("sits: SIMULATED platform: this run can never be reported as conformant")
    if run.serve is not None:
        served = run.served or {}
        if run.serve_error:
            lines.append(f"sits: server under test NOT READY: {_printable(run.serve_error.splitlines()[0])} (its "
                         "requirements are ERROR)")
        else:
            lines.append(f"sits: server under test launched by the suite at {_printable(run.endpoint or '')}: models "
                         f"{_printable(', '.join(served.get('models') or []))}"
                         f"{', version ' + _printable(served['version']) if served.get('version') else ''}; ready after "
                         f"{served.get('ready_s')} s; log {served.get('log')}")
        lines.append("sits: the PLP-* sweep, SVC-SLA, SVC-FRAG (from the server's /metrics) and SVC-COLDSTART (the "
                     "launches) measure the server under test")
    elif run.profile.serving.get("command"):
        lines.append("sits: the profile's serving section is NOT used: the suite runs no command from a profile "
                     "unless asked; add --sits-serve=profile to launch it")
    if run.serve is None and not run.endpoint and run.level != "quick":
        lines.append(f"sits: inference requirements measure {run.under_test()}")
    if run.serve is None and run.endpoint:
        lines.append(f"sits: serving endpoint {_printable(run.endpoint)}: the PLP-* sweep, SVC-SLA and SVC-FRAG (from "
                     "its /metrics) measure it; its cold start is not measured (the suite does not start it: "
                     "--sits-serve would)")
    suite = config.stash.get(_BUNDLED, None)
    if suite:
        lines.append(f"sits: running the bundled conformance suite ({suite}); give test paths to run your own")
    lines += [f"sits: {line}" for line in run.plan().header(simulated=run.platform.simulated)]
    return lines


def _printable(text: str) -> str:
    """Device names come from the hardware: no terminal escape codes reach the terminal."""
    from ..report.render import printable

    return printable(text)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> Any:
    """pytest-benchmark's table only when asked for (a --benchmark-* option): EQ-THROUGHPUT's figures are in the
    report, and a 220-column table would push the result off the screen.

    A signal to the whole process group while pytest-xdist starts its workers kills a worker before it can take
    the signal over; xdist's start-up then fails on the closed pipe (an INTERNALERROR) before the session runs, and
    pytest would end no session and write no report. When this run had received a signal by then, the failure is
    that signal's doing: the INCOMPLETE report (nothing measured) is written here and the run ends interrupted."""
    bs = getattr(session.config, "_benchmarksession", None)
    asked = _benchmark_asked(session.config)
    if bs is not None and not asked and hasattr(bs, "quiet"):
        bs.quiet = True
    try:
        return (yield)
    except Exception as exc:
        run = session.config.stash.get(RUN_KEY, None)
        reporter = session.config.pluginmanager.get_plugin("sits-reporter")
        if run is None or reporter is None or not run.interrupts.before_report:
            raise
        name = run.interrupts.received[0]["signal"]
        from .interrupts import _say

        _say(f"{name} while the run was set up; the start-up then failed ({type(exc).__name__}: "
             f"{str(exc)[:160]}): the report is written with nothing measured")
        reporter.pytest_sessionfinish(session, pytest.ExitCode.INTERRUPTED)
        raise KeyboardInterrupt(f"{name} (received while the run was set up)") from None


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> Any:
    """From here on a signal is recorded, not raised, until every plugin has ended the session: one raised
    inside another plugin's end (pytest-xdist stopping its workers) would skip the report's write."""
    run = session.config.stash.get(RUN_KEY, None)
    if run is None:
        yield
        return
    with run.interrupts.writing_report():
        yield


@pytest.hookimpl(tryfirst=True)
def pytest_collection(session: pytest.Session) -> None:
    """The session runs: a signal received while it was set up stops it here, so the report is written."""
    run = session.config.stash.get(RUN_KEY, None)
    if run is not None:
        run.interrupts.session_runs()


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: List[pytest.Item]) -> None:
    """Mark each conformance test with its requirement ID (for -m/-k), drop those above the level, and run the
    levels in order: every quick test first, then standard, then full (stable: in the order collected within a
    level), so a run cut short by a time limit or a signal has decided the cheap, fundamental requirements."""
    run = config.stash.get(RUN_KEY, None)
    if run is None:
        return
    keep: List[pytest.Item] = []
    drop: List[pytest.Item] = []
    rank: Dict[str, int] = {}
    for item in items:
        mark = item.get_closest_marker(MARKER)
        if mark is None:
            keep.append(item)
            continue
        req_id = requirement_of(item)
        if req_id not in CATALOGUE:
            raise pytest.UsageError(f"{item.nodeid}: @{MARKER}({req_id!r}) names no SITS2026 requirement; "
                                    f"fix: use one of {', '.join(CATALOGUE)}")
        level = mark.kwargs.get("level") or CATALOGUE[req_id].level
        item.add_marker(req_id)
        item.user_properties.append((REQUIREMENT_PROPERTY, req_id))
        rank[item.nodeid] = level_rank(level)
        (keep if level_rank(level) <= level_rank(run.level) else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
    items[:] = sorted(keep, key=lambda it: rank.get(it.nodeid, 0))


def _announce_lock_waits(config: pytest.Config) -> None:
    """A wait for a lock over 5 s is announced on the terminal, around pytest's output capture (an xdist worker,
    which has no terminal, says it on stderr)."""
    from ..conditions.locks import set_wait_notice

    import sys

    tr = config.pluginmanager.getplugin("terminalreporter")

    def write(message: str) -> None:
        if tr is not None:
            tr.write_line(f"sits: {message}", yellow=True)
        else:  # an xdist worker: its stderr is the terminal's, once pytest's capture is set aside
            print(f"sits: {message}", file=sys.stderr, flush=True)

    def say(message: str) -> None:
        capman = config.pluginmanager.getplugin("capturemanager")
        if capman is not None:
            with capman.global_and_fixture_disabled():
                write(message)
        else:
            write(message)
    set_wait_notice(say)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """When the test started: each verdict records how long its test had run when it was recorded (and the lock
    waits it records are its own: those of earlier tests are dropped)."""
    from ..conditions.locks import take_waits

    take_waits()
    item.stash[STARTED_KEY] = time.time()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Any:
    """A requirement whose test raised before deciding gets an ERROR verdict, not silence; the terminal shows
    one line (the traceback goes into the verdict's evidence) unless --tb asks for more."""
    one_line = None
    if call.excinfo is not None and call.when in ("setup", "call"):
        # The requirement ID (a str) that pytest_collection_modifyitems recorded.
        req = cast(Optional[str], next((v for k, v in item.user_properties if k == REQUIREMENT_PROPERTY), None))
        decided = bool(verdicts_of(item))
        outcome_exc = (pytest.skip.Exception, pytest.fail.Exception, KeyboardInterrupt)
        if req and not decided and not call.excinfo.errisinstance(outcome_exc):
            run = item.config.stash.get(RUN_KEY, None)
            reason = f"the probe or test raised {call.excinfo.typename}: {_printable(str(call.excinfo.value))[:500]}"
            try:
                trace = str(call.excinfo.getrepr(style="short"))[-6000:]
            except Exception:  # pragma: no cover - a repr that itself fails
                trace = call.excinfo.exconly()[:2000]
            verdict = Verdict(req, ERROR, reason, subject="-",
                              evidence={"phase": call.when, "exception": call.excinfo.exconly()[:2000],
                                        "traceback": trace,
                                        "replayable": "no: the test raised before a check decided"})
            append(item, verdict, bool(run and run.platform.simulated), waiver=None)
            if item.config.getoption("tbstyle", "auto") == "auto":
                one_line = f"{req} ERROR: {reason} (traceback in the report's evidence; --tb=short shows it here)"
    outcome = yield
    rep = outcome.get_result()
    rep.sits_verdicts = list(verdicts_of(item))  # whole verdicts, carried to the xdist controller with the report
    if one_line is not None:
        rep.longrepr = one_line


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """`sits_accelerator` parametrizes a test over every accelerator found (by PCI address)."""
    if "sits_accelerator" not in metafunc.fixturenames:
        return
    run = metafunc.config.stash.get(RUN_KEY, None)
    accs = run.platform.inventory()["accelerators"] if run else []
    marker = metafunc.definition.get_closest_marker(MARKER)
    from ..conditions.inference.mlperf import REQUIREMENTS as MLPERF_REQUIREMENTS, submitted as mlperf_submitted

    req = marker.args[0] if marker is not None and marker.args else None
    from ..catalogue.inference import SERVED_REQUIREMENTS

    if run is not None and run.endpoint and req in SERVED_REQUIREMENTS:
        # The endpoint is one deployment: what is measured on it is measured and judged once, not once per
        # accelerator.
        metafunc.parametrize("sits_accelerator", accs[:1] or [None], ids=["endpoint"])
    elif run is not None and req in MLPERF_REQUIREMENTS and run.platform.kind == "evidence" and \
            mlperf_submitted(run.platform.inventory()) is not None:
        # An MLPerf submission's runs are the system's: judged once per run, not once per accelerator.
        metafunc.parametrize("sits_accelerator", accs[:1] or [None], ids=["mlperf"])
    elif accs:
        metafunc.parametrize("sits_accelerator", accs, ids=[a["bdf"] for a in accs])
    else:
        metafunc.parametrize("sits_accelerator", [None], ids=["no-accelerator"])
