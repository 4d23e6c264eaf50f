"""Every public ``sits_*`` fixture, in one place, usable from a lab's own test modules.

Each is a thin factory over objects of the session (:mod:`pytest_sits.plugin.session`)
and of the conditions layer (:mod:`pytest_sits.conditions`).  The plugin
loads this module (``pytest_plugins``), so ``-p no:sits`` disables both.

A lab's test can, for example, measure under the DRAM bandwidth hold::

    def test_my_kernel_under_hold(sits_bandwidth_hold, sits_host_peak):
        with sits_bandwidth_hold() as hold:
            run_my_kernel()
        assert hold.evidence()["windows"] > 0
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional

import pytest

from .recorder import RUN_KEY, Recorder, requirement_of
from .session import SitsRun


@pytest.fixture(scope="session")
def sits_run(pytestconfig: pytest.Config) -> SitsRun:
    """The resolved session: profile, platform, level, golden set."""
    run = pytestconfig.stash.get(RUN_KEY, None)
    if run is None:
        raise pytest.UsageError("the sits plugin is not active in this run; fix: run without `-p no:sits`")
    return run


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


@pytest.fixture(scope="session")
def sits_accelerators(sits_run: SitsRun) -> List[Dict[str, Any]]:
    """The accelerators present that match the profile (the ones its requirements judge)."""
    return sits_run.expected_accelerators()


@pytest.fixture
def sits_record(request: pytest.FixtureRequest, sits_run: SitsRun) -> Recorder:
    """Call with one or more Verdicts: they go into the report; the worst decides the test's outcome.  In a test
    marked ``@pytest.mark.sits_requirement(ID)``, a verdict of another requirement is refused."""
    return Recorder(request.node, sits_run)


def _requirement(request: pytest.FixtureRequest, fixture: str) -> str:
    req = requirement_of(request.node)
    if req is None:
        raise pytest.UsageError(f"{request.node.nodeid}: the fixture {fixture} reads the test's requirement from "
                                "its marker; fix: mark the test @pytest.mark.sits_requirement(\"ID\")")
    return req


@pytest.fixture
def sits_thresholds(request: pytest.FixtureRequest, sits_profile: Any) -> Dict[str, Any]:
    """The thresholds the profile sets for this test's requirement (the ID of its ``sits_requirement`` marker),
    resolved: the profile's values over the SITS2026 defaults."""
    return sits_profile.check_thresholds(_requirement(request, "sits_thresholds"))


@pytest.fixture
def sits_trials(request: pytest.FixtureRequest, sits_run: SitsRun) -> Any:
    """The trial plan of this test's requirement (from its marker): how many trials the first look measures, how
    many more each further look while the interval is undecided, the cap, and the run's deadline
    (``--sits-budget``).  Acquire functions take it as ``plan``."""
    return sits_run.plan().trials_for(_requirement(request, "sits_trials"))


@pytest.fixture
def sits_device(request: pytest.FixtureRequest, sits_accelerator: Optional[Dict[str, Any]], sits_run: SitsRun,
                sits_thresholds: Dict[str, Any], sits_record: Recorder) -> Dict[str, Any]:
    """The accelerator this test judges (one test per accelerator, like ``sits_accelerator``).  Where there is
    none, the requirement's own check decides on the absence evidence (SKIP with what the profile expected and
    what was found), the verdict is recorded, and the test ends there: a requirement module needs no branch
    of its own for an absent accelerator."""
    if sits_accelerator is not None:
        return sits_accelerator
    from ..checks import get
    from ..conditions.inventory import absent_accelerator

    req = _requirement(request, "sits_device")
    check = get(req)
    if check is None:  # pragma: no cover - every catalogue requirement has a check named after it (tested)
        raise pytest.UsageError(f"{request.node.nodeid}: no check is registered as {req!r}")
    sits_record(check.fn(absent_accelerator(sits_run.expected(), sits_run.platform.inventory()), sits_thresholds,
                         "accelerators"))
    raise AssertionError("unreachable: recording a SKIP verdict ends the test")  # pragma: no cover


@pytest.fixture
def sits_progress(pytestconfig: pytest.Config) -> Callable[[str], None]:
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


# --------------------------------------------------------------------------
# Thermal calibration


@pytest.fixture(scope="session")
def sits_calibrated_duty() -> Dict[str, float]:
    """The load duty at which each device last settled in this session (a later calibration starts there)."""
    return {}


@pytest.fixture
def sits_thermal_steady(request: pytest.FixtureRequest, sits_profile: Any, sits_progress: Any,
                        sits_calibrated_duty: Dict[str, float]) -> Any:
    """Factory: ``with sits_thermal_steady(rig) as evidence:`` calibrates the rig's load until its temperature is
    steady in the profile's band for the test's requirement (THERM-GPU-STEADY or THERM-CPU-STEADY, from its
    marker, or given as the second argument) or the timeout, and keeps the load on inside the block.  One
    calibration per device at a time, across xdist workers (a lock per device)."""
    from ..conditions.thermal import steady

    def make(rig: Any, requirement: Optional[str] = None) -> Any:
        requirement = requirement or _requirement(request, "sits_thermal_steady")
        return steady(rig, requirement, sits_profile.thresholds(requirement), sits_progress, sits_calibrated_duty)
    return make


@pytest.fixture(scope="session")
def sits_thermal_calibrations() -> Dict[str, Dict[str, Any]]:
    """The calibrations run at once in this session, by requirement: ``{subject: evidence or exception}``."""
    return {}


@pytest.fixture
def sits_thermal_all(request: pytest.FixtureRequest, sits_run: SitsRun, sits_profile: Any, sits_progress: Any,
                     sits_calibrated_duty: Dict[str, float],
                     sits_thermal_calibrations: Dict[str, Dict[str, Any]]) -> Any:
    """``sits_thermal_all(rigs, others=None, also=None)`` -> ``{subject: evidence}``: the test's requirement
    (THERM-GPU-STEADY or THERM-CPU-STEADY) calibrated on every device at once (conditions/thermal.py
    ``steady_all``).  ``rigs``: the devices this test judges; ``others``: a callable giving the machine's other
    devices of the kind, calibrated with them; ``also``: ``{requirement: callable giving rigs}``, devices of
    another requirement reached together with these (the CPU packages beside the GPU dies).  The first test
    calibrates them all, the later tests take their devices' results.  Under xdist each worker calibrates only the
    devices of its own tests (they are shared out among the workers)."""
    from ..conditions.thermal import steady_all

    requirement = _requirement(request, "sits_thermal_all")

    def get(rigs: List[Any], others: Optional[Callable[[], List[Any]]] = None,
            also: Optional[Dict[str, Callable[[], List[Any]]]] = None) -> Dict[str, Any]:
        done = sits_thermal_calibrations.setdefault(requirement, {})
        todo = [r for r in rigs if r.subject not in done]
        extra: List[Any] = []
        if todo and sits_run.workers == 1:
            if others is not None:
                todo += [r for r in others() if r.subject not in done and r.subject not in {t.subject for t in todo}]
            for req, more in (also or {}).items():
                theirs = sits_thermal_calibrations.setdefault(req, {})
                extra += [(r, req, sits_profile.thresholds(req)) for r in more() if r.subject not in theirs]
        if todo:
            got = steady_all(todo, requirement, sits_profile.thresholds(requirement), sits_progress,
                             sits_calibrated_duty, also=extra)
            for r, req in [(r, requirement) for r in todo] + [(r, req) for r, req, _ in extra]:
                sits_thermal_calibrations[req][r.subject] = got[r.subject]
        result = {}
        for r in rigs:
            found = done[r.subject]
            if isinstance(found, BaseException):
                raise found
            result[r.subject] = found
        return result
    return get


# --------------------------------------------------------------------------
# Host DRAM bandwidth


@pytest.fixture(scope="session")
def sits_host_node(sits_run: SitsRun) -> Optional[Dict[str, Any]]:
    """The NUMA node host measurements bind to: the first expected accelerator's, else the first node."""
    from ..conditions.bandwidth import host_node

    return host_node(sits_run.platform.inventory(), sits_run.expected_accelerators())


@pytest.fixture(scope="session")
def sits_host_peak(sits_platform: Any, sits_host_node: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    """STREAM peak of the host on the measurement node (evidence, or ``{"absent": reason}``), measured once."""
    from ..conditions.bandwidth import acquire_host_peak

    return acquire_host_peak(sits_platform, sits_host_node)


@pytest.fixture
def sits_bandwidth_hold(sits_host_peak: Dict[str, Any], sits_host_node: Optional[Dict[str, Any]],
                        sits_profile: Any, sits_platform: Any) -> Optional[Callable[[], Any]]:
    """Factory: ``with sits_bandwidth_hold() as hold:`` keeps host DRAM occupancy in the profile's band while the
    block runs (``hold.evidence()`` afterwards).  Where the host cannot be measured, calling it skips the test
    with the reason (``sits_host_peak`` holds it too)."""
    from ..conditions.bandwidth import hold_factory, peak_problem

    problem = peak_problem(sits_host_peak)
    if problem is not None or sits_host_node is None:
        why = (problem or {}).get("unavailable") or (problem or {}).get("error") or "the host lists no NUMA node"

        def cannot() -> Any:
            pytest.skip(f"no bandwidth hold here: {why}")
        return cannot
    return hold_factory(sits_host_peak, sits_host_node, sits_profile.thresholds("MEM-BW-HOLD"),
                        sits_platform.dram())


# --------------------------------------------------------------------------
# Equivalence


@pytest.fixture(scope="session")
def sits_equivalence(sits_run: SitsRun) -> Dict[str, Any]:
    """The torch devices the operator corpus runs on and the golden set (or ``{"absent": reason}``)."""
    from ..conditions.equivalence import environment

    return environment(sits_run.platform, sits_run.golden, sits_run.golden_record)


@pytest.fixture
def sits_benchmark(request: pytest.FixtureRequest) -> Any:
    """pytest-benchmark's ``benchmark`` fixture, or None when pytest-benchmark is not installed."""
    try:
        return request.getfixturevalue("benchmark")
    except pytest.FixtureLookupError:
        return None


# --------------------------------------------------------------------------
# Health, security, compute-ready graph


@pytest.fixture(scope="session")
def sits_health_window(sits_platform: Any, sits_profile: Any, sits_run: SitsRun,
                       request: pytest.FixtureRequest) -> Callable[[Dict[str, Any]], Dict[str, Any]]:
    """Factory: ``sits_health_window(acc)`` runs one health window on the accelerator (clock-event reasons sampled
    under load, AER, replay and ECC counters before and after, XID events watched, the kernel log's XID
    history) once per device per session, and returns its evidence; DEP-ECC, DEP-THROTTLE, DEP-PCIE-ERRORS and
    DEP-XID share it.  The load is the suite's accelerator load, or with ``--sits-health-load=inference`` the
    inference load of PLP-* (the load the node serves)."""
    from ..conditions.health import HealthWindows

    inference = None
    if sits_run.health_load == "inference":
        from ..conditions.inference import inference_for

        logs, cache = request.getfixturevalue("sits_inference_logs"), request.getfixturevalue("sits_inference_cache")

        def inference(acc: Dict[str, Any]) -> Any:
            return inference_for(sits_run.platform, sits_run.profile, acc, None, sits_run.inference_options(),
                                 logs, cache,
                                 run_id=f"{sits_run.started_at!r}" if sits_run.report_dir is not None else None)
    return HealthWindows(sits_platform, sits_profile.condition("health_window"), sits_platform.health_reader(),
                         inference)


@pytest.fixture(scope="session")
def sits_crg(sits_platform: Any) -> Any:
    """The compute-ready graph's acquirer: ``node(acc, th)``, ``edges(accs, th, absent)``,
    ``sync(accs, expected_count, th, absent)``, ``jitter(acc, th)`` measure this machine (torch,
    torch.distributed); on a simulated platform the figures come from the profile, labelled simulated."""
    return sits_platform.crg()


# Inference under load


@pytest.fixture(scope="session")
def sits_inference_logs(sits_run: SitsRun, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Where LoadGen's logs and the Sample3D records go: ``<report dir>/inference`` (kept beside the report),
    else a temporary folder."""
    if sits_run.report_dir is not None:
        path = sits_run.report_dir / "inference"
        path.mkdir(parents=True, exist_ok=True)
        return path
    return tmp_path_factory.mktemp("sits-inference")


@pytest.fixture(scope="session")
def sits_inference_cache() -> Dict[str, Any]:
    """Evidence of the inference runs already made in this session (the sweep serves four requirements)."""
    return {}


@pytest.fixture
def sits_inference(sits_accelerator: Optional[Dict[str, Any]], sits_run: SitsRun, sits_inference_logs: Any,
                   sits_inference_cache: Dict[str, Any], sits_progress: Callable[[str], None]) -> Any:
    """The inference-under-load runs of this test's accelerator (the CPU when the profile expects none):
    ``.sweep()``, ``.sla()``, ``.coldstart()``, ``.frag()`` return evidence, each run once per session, with
    progress lines (load level, elapsed, completed) on the terminal."""
    from ..conditions.inference import inference_for
    from ..conditions.inventory import absent_accelerator

    missing: Dict[str, Any] = {}
    if sits_accelerator is None and sits_run.profile.expected_count:
        # {"absent": why} where the machine lacks them; {"unavailable": why} where submitted texts cannot tell
        missing = absent_accelerator(sits_run.expected(), sits_run.platform.inventory())
    inference = inference_for(sits_run.platform, sits_run.profile, sits_accelerator, missing.get("absent"),
                              sits_run.inference_options(), sits_inference_logs, sits_inference_cache,
                              run_id=f"{sits_run.started_at!r}" if sits_run.report_dir is not None else None,
                              unavailable=missing.get("unavailable"))
    inference.progress = sits_progress
    inference.latency_plan = sits_run.plan().trials_for("PLP-LATENCY")
    return inference
