"""The SITS2026 test environment around measured requirements (A §2.4): the pure rule (checks/environment.py),
the monitor and blocks (conditions/environment.py), and what a run records: a drifting die makes that GPU's
PLP verdicts INCONCLUSIVE (sim fault die-drift) while the others decide, replay reproduces it, and the live host
records its DRAM occupancy and says the CPU package temperature is not measured."""

from __future__ import annotations

import json
import time

import pytest

from pytest_sits.catalogue import CATALOGUE
from pytest_sits.checks.environment import apply_environment, summarise
from pytest_sits.conditions.environment import EnvironmentMonitor, dram_in, numa_binding, rules_from
from pytest_sits.profiles import resolve
from pytest_sits.report.replay import replay_report
from pytest_sits.verdict import FAIL, INCONCLUSIVE, PASS, SKIP, Verdict

RULES = rules_from(resolve("h100"))
DEV = "0000:11:00.0"


def _series(values, step=1.0):
    return [[i * step, v] for i, v in enumerate(values)]


def _block(die=None, other=None, package=None, dram=(600, 600), numa=True, device=DEV):
    sensors = {f"die {DEV}": {"kind": "gpu_die", "label": f"{DEV} die", "device": DEV, "step_c": 1.0,
                              "samples": _series(die or [70, 70, 71, 70, 71, 70])}}
    if other is not None:
        sensors["die 0000:21:00.0"] = {"kind": "gpu_die", "label": "0000:21:00.0 die", "device": "0000:21:00.0",
                                       "step_c": 1.0, "samples": _series(other)}
    if package is not None:
        sensors["cpu package 0"] = {"kind": "cpu_package", "label": "Package id 0", "step_c": 1.0,
                                    "samples": _series(package)}
    not_measured = {} if package is not None else {"cpu_package": "CPU package temperature: no sensor"}
    return {"window": {"start": 0, "end": 5, "seconds": 5}, "device": device, "rules": RULES, "sensors": sensors,
            "not_measured": not_measured,
            "dram": {"windows": dram[0], "windows_in_band": dram[1], "source": "own accounting"} if dram else None,
            "numa": {"node": 0, "bound": numa, "why": "test"}}


def _verdict(status=PASS):
    return Verdict("PLP-LATENCY", status, "P99 9 ms <= 18 ms", 9.0, 18.0, "ms", DEV,
                   remediation="fix it" if status == FAIL else None, evidence={"points": 4})


def test_every_measured_requirement_is_declared_so():
    measured = {r.id for r in CATALOGUE.values() if r.environment}
    assert measured == {"PLP-SAMPLE", "PLP-PPL", "PLP-POWER", "PLP-LATENCY", "SVC-SLA", "SVC-COLDSTART", "SVC-FRAG",
                        "CRG-NODE", "CRG-EDGE", "CRG-SYNC", "CRG-JITTER", "MEM-BW-EFFICIENCY", "EQ-THROUGHPUT"}
    # the thermal calibrations and the hold are the environment's own verdicts, not measured under it
    assert not ({"THERM-GPU-STEADY", "THERM-CPU-STEADY", "MEM-BW-HOLD"} & measured)


def test_held_environment_keeps_the_verdict_and_says_so():
    v = apply_environment(_verdict(), _block(package=[63, 64, 64, 63, 64, 64]))
    env = v.evidence["environment"]["summary"]
    assert v.status == PASS and env["held"] is True and env["moved"] == [] and env["not_measured"] == []
    die = env["sensors"][f"die {DEV}"]
    assert (die["min_c"], die["max_c"], die["spread_c"], die["held"]) == (70.0, 71.0, 1.0, True)
    assert isinstance(die["slope_c_per_min"], float)
    assert env["dram"]["share_in_band"] == 1.0 and v.reason == "P99 9 ms <= 18 ms"


@pytest.mark.parametrize("status", [PASS, FAIL])
def test_die_outside_its_band_makes_pass_and_fail_inconclusive(status):
    v = apply_environment(_verdict(status), _block(die=[70, 71, 72, 73, 74, 75], package=[64] * 6))
    assert v.status == INCONCLUSIVE and v.remediation is None
    assert f"{DEV} die 70-75 °C outside [68, 72] °C" in v.reason and f"it read: {status}" in v.reason
    assert v.evidence["environment_status"] == status


def test_die_that_moves_within_its_band_is_outside_the_rules():
    v = apply_environment(_verdict(), _block(die=[68, 69, 70, 71, 72, 71], package=[64] * 6))
    assert v.status == INCONCLUSIVE and "moved 4.00 °C" in v.reason


def test_another_device_die_is_shown_not_judged_for_a_device_verdict():
    v = apply_environment(_verdict(), _block(other=[80] * 6, package=[64] * 6))
    assert v.status == PASS
    other = v.evidence["environment"]["summary"]["sensors"]["die 0000:21:00.0"]
    assert other["judged"] is False and other["held"] is False
    # a host verdict (no device) is judged on every die
    assert apply_environment(_verdict(), _block(other=[80] * 6, package=[64] * 6, device=None)).status == INCONCLUSIVE


def test_dram_out_of_band_and_unbound_numa_are_outside_the_rules():
    weak = apply_environment(_verdict(), _block(package=[64] * 6, dram=(100, 60)))
    assert weak.status == INCONCLUSIVE and "host DRAM occupancy in band in 60% of 100 windows" in weak.reason
    unbound = apply_environment(_verdict(), _block(package=[64] * 6, numa=False))
    assert unbound.status == INCONCLUSIVE and "not bound to NUMA node 0" in unbound.reason


def test_what_has_no_sensor_is_stated_not_measured_and_the_status_stays():
    v = apply_environment(_verdict(), _block(dram=None))
    summary = v.evidence["environment"]["summary"]
    assert v.status == PASS and summary["held"] is None
    assert "test environment not measured (CPU package temperature: no sensor; host DRAM occupancy: no DRAM hold" \
        in v.reason


def test_undecided_statuses_keep_their_reason_and_carry_the_block():
    v = apply_environment(Verdict("PLP-POWER", SKIP, "no power sensor", subject=DEV), _block(die=[90] * 6))
    assert v.status == SKIP and v.reason == "no power sensor" and "environment" in v.evidence


def test_a_sensor_that_never_answered_is_not_measured():
    block = _block(package=[64] * 6)
    block["sensors"][f"die {DEV}"]["samples"] = [[0, None], [1, None]]
    summary = summarise(block, DEV)
    assert summary["held"] is None and any("no reading during the measurement" in m for m in summary["not_measured"])


def test_monitor_reads_on_its_clock_and_a_broken_sensor_is_kept_as_an_error():
    now = [100.0]
    values = iter([70.0, 70.5, 71.0, 71.5])

    def broken():
        raise OSError("EIO")

    mon = EnvironmentMonitor({"die a": (lambda: next(values), {"kind": "gpu_die", "label": "a"}),
                              "die b": (broken, {"kind": "gpu_die", "label": "b"})}, period_s=1.0,
                             clock=lambda: now[0])
    for _ in range(3):
        mon.sample()
        now[0] += 1.0
    got = mon.window(100.2, 102.5)
    assert [v for _, v in got["die a"]["samples"]] == [70.0, 70.5, 71.0]  # the reading before the window, then in it
    assert got["die b"]["error"] == "OSError: EIO" and all(v is None for _, v in got["die b"]["samples"])


def test_monitor_thread_stops():
    mon = EnvironmentMonitor({"x": (lambda: 1.0, {"kind": "cpu_package"})}, period_s=0.01).start()
    time.sleep(0.05)
    mon.stop()
    n = len(mon.readings["x"])
    time.sleep(0.05)
    assert n >= 2 and len(mon.readings["x"]) == n


def test_dram_windows_are_taken_inside_the_measurement_only():
    hold = {"windows": [[10.0, True], [10.1, False], [11.0, True], [20.0, True]], "source": "own accounting"}
    assert dram_in(hold, 10.05, 11.0) == {"windows": 2, "windows_in_band": 1, "source": "own accounting",
                                         "band": None, "peak_gbps": None}
    assert dram_in({"not_measured": "off"}, 0, 1) == {"not_measured": "off"}


def test_numa_binding_on_one_node_and_on_two():
    assert numa_binding({"numa": [{"node": 0, "cpus": [0, 1]}]}, 0)["bound"] is True
    two = {"numa": [{"node": 0, "cpus": [0]}, {"node": 1, "cpus": [1]}]}
    got = numa_binding(two, 1)
    assert got["bound"] is False and "numactl --cpunodebind=1 --membind=1" in got["why"]


# ----------------------------------------------------------------------------------------------- runs

def _run(pytester, conformance_args, *args):
    result = pytester.runpytest(*conformance_args, "-p", "no:randomly", *args)
    report = json.loads((pytester.path / "sits-report" / "sits-report.json").read_text())
    report["_stdout"] = result.stdout.str()
    return report


@pytest.mark.slow
def test_drifting_die_makes_its_gpu_plp_verdicts_inconclusive_and_replays(pytester, conformance_args):
    report = _run(pytester, conformance_args, "--sits-platform=sim:h100+die-drift", "--sits-level=standard",
                  "-k", "PLP or CRG-NODE")
    drifting = report["inventory"]["accelerators"][1]["bdf"]
    plp = [v for v in report["verdicts"] if v["requirement"].startswith("PLP-")]
    assert plp and all("environment" in v["evidence"] for v in report["verdicts"])
    mine = [v for v in plp if v["subject"] == drifting]
    assert {v["requirement"] for v in mine} == {"PLP-SAMPLE", "PLP-PPL", "PLP-POWER", "PLP-LATENCY"}
    for v in mine:
        assert v["status"] == INCONCLUSIVE and f"{drifting} die 70" in v["reason"] and "outside [68, 72] °C" in v["reason"]
    others = [v for v in plp if v["subject"] != drifting]
    assert others and all(v["status"] != INCONCLUSIVE and v["evidence"]["environment"]["summary"]["held"]
                          for v in others)
    # the drift is the inference sweep's: the same GPU's CRG-NODE decides
    crg = next(v for v in report["verdicts"] if v["requirement"] == "CRG-NODE" and v["subject"] == drifting)
    assert crg["status"] == PASS
    out = replay_report(report)
    assert out["differs"] == [] and out["replayed"] == out["total"]
    # an edited reading is caught: the die said to have stayed at 70 °C replays to a decided verdict
    v = mine[0]
    for s in v["evidence"]["environment"]["sensors"].values():
        if s["kind"] == "gpu_die" and "samples" in s:  # its own die (the others are kept as a summary)
            s["samples"] = [[t, 70.0] for t, _ in s["samples"]]
    assert any(d["field"] == "status" for d in replay_report(report)["differs"])


@pytest.mark.slow
def test_live_standard_records_dram_occupancy_and_no_package_sensor(pytester, conformance_args):
    report = _run(pytester, conformance_args, "--sits-level=standard", "-k", "EQ-THROUGHPUT")
    measured = [v for v in report["verdicts"] if v["requirement"] == "EQ-THROUGHPUT"]
    assert measured
    for v in measured:
        env = v["evidence"]["environment"]
        dram = env["summary"]["dram"]
        assert dram["windows"] > 0 and 0 <= dram["share_in_band"] <= 1, dram  # the hold ran during the measurement
        assert env["summary"]["numa"]["bound"] is True  # this host has one NUMA node
        if not any(s["kind"] == "cpu_package" for s in env["sensors"].values()):  # no package sensor here
            assert "CPU package temperature" in " ".join(env["summary"]["not_measured"])
            if v["status"] in ("PASS", "FAIL", "WARN"):
                assert "test environment not measured (CPU package temperature" in v["reason"]


# ----------------------------------------------------------------------------------------- at once

def _sim_runs(tmp_path, n=3):
    """Inference runs of the first ``n`` accelerators of a simulated h100 node, sharing one cache and log folder
    as a run's tests do, each with the run's hand-over for a child process."""
    from pytest_sits.conditions.inference import inference_for
    from pytest_sits.platforms import from_spec
    from pytest_sits.plugin.session import SitsRun

    profile = resolve("h100")
    run = SitsRun(profile=profile, platform=from_spec("sim:h100"), level="standard", level_how="option",
                  report_dir=tmp_path / "report", platform_spec="sim:h100")
    cache, logs = {}, tmp_path / "inference"
    runs = []
    for acc in run.platform.inventory()["accelerators"][:n]:
        inf = inference_for(run.platform, profile, acc, None, run.inference_options(), logs, cache, run_id="run-1")
        inf.device, inf.child_run = acc["bdf"], run.to_workerinput()
        inf.environment = lambda t0, t1, req, bdf=acc["bdf"]: {"window": [t0, t1], "device": bdf, "requirement": req}
        runs.append(inf)
    return runs, cache


@pytest.mark.slow
def test_loadgen_runs_of_the_other_devices_run_in_processes_of_their_own(tmp_path):
    """The path a real node takes for LoadGen's runs (one test per process): each peer's sweep in a child
    process, its evidence read back with the environment of its own window; a child that fails leaves its
    device to its own test, and says so."""
    runs, cache = _sim_runs(tmp_path)
    said = []
    runs[0].progress = said.append
    broken = runs[2]
    broken.device = "0000:ff:00.0"  # not in the run's inventory: its child exits 4
    own = runs[0]._in_processes("sweep", runs[1:], lambda: runs[0]._once("sweep", lambda: {"points": "mine"}))
    assert own["points"] == "mine" and own["environment_block"]["device"] == runs[0].device
    peer = cache[f"{runs[1].subject}/sweep"]
    assert peer["sweep"] and peer["simulated"] is True  # measured by the child, read back from its shared file
    t0, t1 = peer["measured_window"]
    assert peer["environment_block"] == {"window": [t0, t1], "device": runs[1].device, "requirement": "PLP-SAMPLE"}
    shared = json.loads((runs[1].logdir / "sweep.evidence.json").read_text())
    assert shared["run"] == "run-1" and shared["evidence"]["environment_block"]["device"] == runs[1].device
    assert "measured: evidence written" in (runs[1].logdir / "sweep.child.log").read_text()
    assert f"{broken.subject}/sweep" not in cache
    assert any("exited 4 without evidence" in line and "its own test measures it alone" in line for line in said)


@pytest.mark.slow
def test_every_device_measured_at_once_by_the_first_test(pytester, conformance_args):
    """On a simulated 8-GPU node the first test of a per-device requirement measures every device; each verdict
    carries the window of that one measurement and the environment of it."""
    report = _run(pytester, conformance_args, "--sits-platform=sim:h100", "--sits-level=standard", "-k",
                  "CRG-NODE or MEM-BW-EFFICIENCY or PLP-PPL or SVC-COLDSTART")
    for req in ("CRG-NODE", "MEM-BW-EFFICIENCY", "PLP-PPL", "SVC-COLDSTART"):
        vs = [v for v in report["verdicts"] if v["requirement"] == req]
        assert len(vs) == 8, req
        windows = [v["evidence"]["environment"]["window"] for v in vs]
        starts = sorted(w["start"] for w in windows)
        # measured together: every device's window starts before the first one has ended
        assert starts[-1] <= min(w["end"] for w in windows) + 1.0, (req, windows)
        assert all(v["evidence"]["environment"]["summary"]["held"] is True for v in vs), req
    assert "CRG-NODE: 8 accelerators measured at once" in report["_stdout"]
    assert "inference sweep: 8 accelerators measured at once" in report["_stdout"]
