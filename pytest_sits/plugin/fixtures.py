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

from .recorder import ENVIRONMENT_KEY, MEASURED_KEY, RUN_KEY, Recorder, environment_of, requirement_of
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


@pytest.fixture(autouse=True)
def _sits_environment(request: pytest.FixtureRequest) -> Any:
    """Around the test of a requirement measured under the SITS2026 test environment (declared
    ``environment=True``): the environment sensors are read from its start, and on the live machine host DRAM
    occupancy is held in MEM-BW-HOLD's band while it runs (the ``environment`` condition's ``dram_hold``).  Each
    of its verdicts then carries the environment of its measurement (:meth:`Recorder.__call__`)."""
    import time

    from ..catalogue import CATALOGUE

    item = request.node
    run = item.config.stash.get(RUN_KEY, None)
    req = requirement_of(item)
    if run is None or req not in CATALOGUE or not CATALOGUE[req].environment:
        yield None
        return
    env = run.environment()
    if env is None:
        yield None
        return
    state: Dict[str, Any] = {"started": time.time(), "hold": None}
    item.stash[ENVIRONMENT_KEY] = state
    if env.simulated:
        yield state
        return
    if not run.profile.condition("environment")["dram_hold"]:
        state["hold"] = {"not_measured": "the profile turns the hold off (conditions: environment: dram_hold: false)"}
        yield state
        return
    from ..conditions.environment import remote_reason

    if remote_reason(run.endpoint):
        yield state  # the server measured runs elsewhere: this host's DRAM is not its environment
        return
    from ..conditions.bandwidth import hold_factory, peak_problem

    peak = request.getfixturevalue("sits_host_peak")
    node = request.getfixturevalue("sits_host_node")
    problem = peak_problem(peak)
    if problem is not None or node is None:
        why = (problem or {}).get("unavailable") or (problem or {}).get("error") or "the host lists no NUMA node"
        state["hold"] = {"not_measured": f"no DRAM hold here: {why}"}
        yield state
        return
    from contextlib import ExitStack

    stack = ExitStack()

    def hold_on() -> None:
        """Start the hold (once per test): at the test's start, or, for a test whose measurement may already have
        been made at once by an earlier test (``sits_at_once``, ``sits_inference``), when it measures."""
        if state.get("hold_object") is None:
            hold = stack.enter_context(hold_factory(peak, node, run.profile.thresholds("MEM-BW-HOLD"),
                                                    run.platform.dram())())
            state["hold_object"] = hold
            stack.callback(env.keep, hold)

    state["hold_on"] = hold_on
    with stack:
        if not ({"sits_at_once", "sits_inference"} & set(request.fixturenames)):
            hold_on()
        state["started"] = time.time()
        yield state


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
    others = sits_run.expected_accelerators if sits_run.workers == 1 else None
    return HealthWindows(sits_platform, sits_profile.condition("health_window"), sits_platform.health_reader(),
                         inference, others)


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
def sits_inference(request: pytest.FixtureRequest, sits_accelerator: Optional[Dict[str, Any]], sits_run: SitsRun,
                   sits_inference_logs: Any, sits_inference_cache: Dict[str, Any],
                   sits_progress: Callable[[str], None]) -> Any:
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
    block = _environment_of(request, sits_run)

    def dress(inf: Any, acc: Optional[Dict[str, Any]]) -> Any:
        inf.progress = sits_progress
        inf.latency_plan = sits_run.plan().trials_for("PLP-LATENCY")
        inf.device = acc["bdf"] if acc else None
        inf.before = (request.node.stash.get(ENVIRONMENT_KEY, None) or {}).get("hold_on")
        if block is not None:
            device = acc["bdf"] if acc else "-"
            inf.environment = lambda t0, t1, requirement: block(requirement, device, t0, t1)
        return inf
    dress(inference, sits_accelerator)
    if block is not None:
        request.node.stash[MEASURED_KEY] = inference
    if sits_accelerator is not None and sits_run.workers == 1:
        # the other accelerators' runs, measured at once with this one's (Inference._at_once)
        inference.child_run = _absolute(sits_run.to_workerinput())
        inference.peers = lambda: [
            dress(inference_for(sits_run.platform, sits_run.profile, acc, None, sits_run.inference_options(),
                                sits_inference_logs, sits_inference_cache, run_id=inference.run_id), acc)
            for acc in sits_run.expected_accelerators() if acc["bdf"] != sits_accelerator["bdf"]]
    return inference


def _environment_of(request: pytest.FixtureRequest, run: SitsRun) -> Optional[Callable[..., Dict[str, Any]]]:
    """``block(requirement, subject, t0, t1)``: the test environment's readings over a measurement's window, taken
    in the test that measures (its DRAM hold, this process's sensors); None outside a measured requirement's test."""
    state = request.node.stash.get(ENVIRONMENT_KEY, None)
    if state is None:
        return None

    def block(requirement: str, subject: str, t0: float, t1: float) -> Dict[str, Any]:
        return environment_of(run, state, requirement, subject, {"measured_window": [t0, t1]})
    return block


def _absolute(handover: Dict[str, Any]) -> Dict[str, Any]:
    """The run's hand-over with its paths made absolute: a child process runs in a folder of its own."""
    import os

    out = dict(handover)
    for key in ("profile_path", "report_dir", "golden_record", "golden", "workdir", "prometheus", "dataset"):
        value = out.get(key)
        if isinstance(value, str) and value and not os.path.isabs(value) and os.path.exists(value):
            out[key] = os.path.abspath(value)
    return out


class _Measured:
    """The test environment of the evidence a test read (``MEASURED_KEY``): one measurement's block."""

    def __init__(self, block: Optional[Dict[str, Any]]):
        self.block = block

    def environment_block(self, requirement: str) -> Optional[Dict[str, Any]]:
        return self.block if isinstance(self.block, dict) else None


@pytest.fixture(scope="session")
def sits_at_once_results() -> Dict[str, Dict[str, Any]]:
    """The per-device measurements made at once in this session, by requirement: ``{bdf: evidence or exception}``."""
    return {}


@pytest.fixture
def sits_at_once(request: pytest.FixtureRequest, sits_run: SitsRun, sits_progress: Callable[[str], None],
                 sits_at_once_results: Dict[str, Dict[str, Any]]) -> Callable[..., Any]:
    """``sits_at_once(acc, measure)`` -> ``measure(acc)``'s evidence: the test's requirement measured on every
    expected accelerator at once (:mod:`pytest_sits.conditions.atonce`) by the first of its tests, each device in
    a thread of its own; the later tests take their device's evidence.  Under xdist each worker measures only its
    own test's device (the devices are shared out among the workers)."""
    from ..conditions.atonce import measure_all

    req = _requirement(request, "sits_at_once")
    block = _environment_of(request, sits_run)
    after = None
    if block is not None:
        def after(acc: Dict[str, Any], t0: float, t1: float, ev: Dict[str, Any]) -> None:
            ev["environment_block"] = block(req, acc["bdf"], t0, t1)

    def get(acc: Dict[str, Any], measure: Callable[[Dict[str, Any]], Any]) -> Any:
        done = sits_at_once_results.setdefault(req, {})
        if acc["bdf"] not in done:
            todo = [acc]
            if sits_run.workers == 1:
                todo += [a for a in sits_run.expected_accelerators() if a["bdf"] not in done and a["bdf"] != acc["bdf"]]
            if len(todo) > 1:
                sits_progress(f"{req}: {len(todo)} accelerators measured at once")
            hold_on = (request.node.stash.get(ENVIRONMENT_KEY, None) or {}).get("hold_on")
            if hold_on is not None:
                hold_on()
            done.update(measure_all(todo, measure, after))
        got = done[acc["bdf"]]
        if isinstance(got, BaseException):
            raise got
        if isinstance(got, dict):
            request.node.stash[MEASURED_KEY] = _Measured(got.get("environment_block"))
        return got
    return get
