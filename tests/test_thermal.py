"""Thermal: the detector's rule, the controller on a simulated plant, the checks, loads and locks."""

import threading
import time

import pytest

from pytest_sits.checks.thermal import SteadyDetector
from pytest_sits.checks.thermal import check_cpu_steady, check_gpu_steady
from pytest_sits.conditions.loads import CpuLoad
from pytest_sits.conditions.locks import exclusive
from pytest_sits.conditions.thermal import ThermalController, calibrate
from pytest_sits.platforms.sim.thermal import PlantRig, ThermalPlant
from pytest_sits.verdict import ERROR, FAIL, INCONCLUSIVE, PASS

GPU = {"band_low_c": 68, "band_high_c": 72, "window_s": 120, "tolerance_c": 0.3, "timeout_s": 1200}
CPU = {"band_low_c": 62, "band_high_c": 66, "window_s": 120, "tolerance_c": 0.5, "timeout_s": 1200}
NVML_SENSOR = {"id": "gpu", "kind": "gpu", "source": "test", "resolution_c": 1.0, "label": "gpu0"}
K10_SENSOR = {"id": "cpu", "kind": "cpu", "source": "test", "resolution_c": 0.125, "label": "Tdie"}


def trace_of(values, dt=1.0):
    return {"samples": [{"t": i * dt, "value_c": v, "error": None if v is not None else "N/A", "duty": 0.5}
                        for i, v in enumerate(values)], "stopped": "test", "final_duty": 0.5}


def run_plant(th, step, **kw):
    rig = PlantRig(ThermalPlant(step=step, **kw), "dev", "gpu")
    trace = calibrate(rig.read, rig.set_duty, rig.clock, rig.sleep, th, step)
    sensor = dict(NVML_SENSOR, resolution_c=step)
    return trace, check_gpu_steady({"trace": trace, "sensor": sensor}, th, "dev")


def test_settles_in_band_passes():
    trace, v = run_plant(GPU, 1.0)
    assert trace["stopped"] == "steady"
    assert v.status == PASS and 68 <= v.measured <= 72
    assert "coarser than the ±0.3 °C band" in v.reason and "sensor step 1" in v.reason
    assert v.evidence["steady_window"]["end_s"] - v.evidence["steady_window"]["start_s"] >= 119
    assert "least-squares slope" in v.method


def test_progress_is_throttled_on_the_wall_clock(monkeypatch):
    # A real calibration takes minutes: a line every 10 s of wall time, none at the start (a simulated plant
    # settles in milliseconds and would print a line per device for nothing).
    import pytest_sits.conditions.thermal as thermal

    wall = iter(range(0, 10_000, 2))  # each look at the wall clock is 2 s later
    monkeypatch.setattr(thermal.time, "monotonic", lambda: float(next(wall)))
    lines = []
    rig = PlantRig(ThermalPlant(step=1.0), "dev", "gpu")
    trace = calibrate(rig.read, rig.set_duty, rig.clock, rig.sleep, GPU, 1.0, progress=lines.append)
    assert trace["stopped"] == "steady" and lines
    assert all(set(p) == {"elapsed_s", "value_c", "state", "band"} for p in lines)
    looks = len(trace["samples"])  # one or two looks at the wall clock per sample
    assert looks // 10 <= len(lines) <= looks // 2
    assert lines[0]["elapsed_s"] > 0  # nothing at 0 s


def test_settles_at_75_fails():
    trace, v = run_plant(GPU, 1.0, ambient=69.0)  # idle already reaches 75 °C: the cooling is too weak
    assert v.status == FAIL and "settled at 75" in v.reason and "outside the band [68, 72]" in v.reason
    assert v.remediation and len(trace["samples"]) > 1000  # ran to the timeout with the whole trace


def test_drift_never_settles_fails_at_timeout():
    trace, v = run_plant(GPU, 1.0, ambient=64.0, drift_c_per_s=0.015)
    assert trace["stopped"] == "timeout"
    # 0.015 °C/s × 120 s = 1.8 °C, estimated from noisy whole-degree readings
    import re

    m = re.search(r"did not settle within 1200 s: drifted \+(\d\.\d) °C over the last 120 s", v.reason)
    assert v.status == FAIL and m and 1.4 <= float(m.group(1)) <= 2.2, v.reason


def test_quantised_sensor_flipping_between_69_and_70_passes_by_the_dither_rule():
    values = [69.0 if (i * 7) % 10 < 5 else 70.0 for i in range(130)]
    v = check_gpu_steady({"trace": trace_of(values), "sensor": NVML_SENSOR}, GPU, "gpu0")
    assert v.status == PASS and v.evidence["steady_window"]["distinct_values"] == 2
    assert abs(v.measured - 69.5) < 0.1


def test_constant_reading_on_a_coarse_sensor_is_inconclusive():
    v = check_gpu_steady({"trace": trace_of([70.0] * 130), "sensor": NVML_SENSOR}, GPU, "gpu0")
    assert v.status == INCONCLUSIVE and "cannot resolve ±0.3 °C" in v.reason


def test_constant_reading_on_a_fine_sensor_passes():
    v = check_cpu_steady({"trace": trace_of([64.0] * 130), "sensor": K10_SENSOR}, CPU, "cpu package 0")
    assert v.status == PASS and "coarser" not in v.reason


def test_spread_beyond_the_tolerance_is_not_steady():
    values = [63.0 + (1.5 if i % 2 else 0.0) for i in range(300)]  # ±0.75 °C on a 1/8 °C sensor
    v = check_cpu_steady({"trace": trace_of(values), "sensor": K10_SENSOR}, CPU, "cpu package 0")
    assert v.status == FAIL and "spread 1.5" in v.reason


def test_sensor_na_mid_run_is_inconclusive_and_never_a_number():
    values = [70.0, 69.0] * 30 + [None] * 10
    v = check_gpu_steady({"trace": trace_of(values), "sensor": NVML_SENSOR}, GPU, "gpu0")
    assert v.status == INCONCLUSIVE and "stopped answering after 60 valid reading(s)" in v.reason
    assert v.evidence["trace"]["samples"][-1]["value_c"] is None
    trace, v = run_plant(GPU, 1.0, fail_after_s=200.0)
    assert trace["stopped"].startswith("sensor failed") and v.status == INCONCLUSIVE


def test_sensor_never_answering_is_an_error():
    v = check_gpu_steady({"trace": trace_of([None] * 10), "sensor": NVML_SENSOR}, GPU, "gpu0")
    assert v.status == ERROR


def test_a_gap_restarts_the_window():
    values = [70.0, 69.0] * 50 + [None] + [70.0, 69.0] * 70
    v = check_gpu_steady({"trace": trace_of(values), "sensor": NVML_SENSOR}, GPU, "gpu0")
    assert v.status == PASS and v.evidence["steady_window"]["start_s"] >= 101
    assert "1 failed reading(s) earlier" in v.reason


def test_cpu_traces_from_two_sockets():
    verdicts = []
    for sock, ambient in ((0, 28.0), (1, 31.0)):
        rig = PlantRig(ThermalPlant(p_idle=60, p_max=350, r=0.11, tau=25, step=0.125, noise=0.05, ambient=ambient,
                                    seed=sock), f"cpu package {sock}", "cpu")
        trace = calibrate(rig.read, rig.set_duty, rig.clock, rig.sleep, CPU, 0.125)
        verdicts.append(check_cpu_steady({"trace": trace, "sensor": K10_SENSOR}, CPU, rig.subject))
    assert [v.status for v in verdicts] == [PASS, PASS]
    assert [v.subject for v in verdicts] == ["cpu package 0", "cpu package 1"]
    assert verdicts[0].evidence["trace"]["final_duty"] != verdicts[1].evidence["trace"]["final_duty"]


def test_detector_decides_within_one_sample():
    det = SteadyDetector(120, 0.3, (68, 72), 1.0)
    first = None
    for i in range(200):
        st = det.add(float(i), 69.0 if i % 3 else 70.0)
        if st["steady"] and first is None:
            first = i
    assert first == 120  # the first sample at which a full 120 s window exists


def test_detector_window_slides():
    det = SteadyDetector(10, 0.3, (0, 100), 0.01)
    for i in range(50):
        st = det.add(float(i), float(i))  # a ramp: never steady
        assert not st["steady"]
    assert st["samples"] == 11 and st["drift"] == pytest.approx(10.0)


def test_controller_drives_into_band_and_holds_still():
    ctl = ThermalController((68, 72), duty0=0.0)
    plant = ThermalPlant(noise=0.0, step=0.0)
    duties = []
    for _ in range(900):
        plant.duty = ctl.update(plant.temp, 1.0)
        plant.advance(1.0)
        duties.append(ctl.duty)
    assert 69 <= plant.temp <= 71
    assert len(set(round(d, 6) for d in duties[-120:])) == 1  # the load is still while it settles


def test_cpu_load_runs_and_always_stops():
    with pytest.raises(RuntimeError):
        with CpuLoad([0], duty=0.5) as load:
            time.sleep(0.3)
            raise RuntimeError("body failed")
    ev = load.evidence()
    assert ev["alive"] == [] and 0.1 < ev["achieved_duty"] < 0.95
    assert not [t for t in threading.enumerate() if t.name.startswith("sits-cpuload")]


def test_device_lock_serialises_calibrations(tmp_path):
    events = []
    a_holds = threading.Event()

    def worker(name, hold_s):
        with exclusive("device-0000:17:00.0", directory=tmp_path / "locks"):
            events.append(f"{name} in")
            a_holds.set()
            time.sleep(hold_s)
            events.append(f"{name} out")

    a = threading.Thread(target=worker, args=("a", 0.3))
    a.start()
    a_holds.wait()
    b = threading.Thread(target=worker, args=("b", 0.0))
    b.start()
    a.join()
    b.join()
    assert events == ["a in", "a out", "b in", "b out"]


def test_full_level_on_this_host_is_undecided_with_the_reason(pytester, report_of):
    # The CPU package is there but its temperature cannot be read here: undecided, never a SKIP that would let
    # a full run conform without it.
    result = pytester.runpytest("--pyargs", "pytest_sits.conformance", "--sits-level=full",
                                "-m", "THERM-CPU-STEADY", "-rs")
    result.stdout.fnmatch_lines(["*THERM-CPU-STEADY INCONCLUSIVE*no CPU package temperature sensor*"])
    assert report_of(pytester.path)["summary"]["result"] == "UNDECIDED"


@pytest.mark.slow
def test_full_level_on_sim(pytester, conformance_args, report_of):
    result = pytester.runpytest(*conformance_args, "--sits-platform=sim:l40s+thermal-hot", "--sits-level=full",
                                "-m", "THERM-GPU-STEADY or THERM-CPU-STEADY")
    result.stdout.fnmatch_lines(["*THERM-GPU-STEADY FAIL*settled at 78.0 °C, outside the band*"])
    statuses = {v["status"] for v in report_of(pytester.path)["verdicts"]}
    assert statuses == {"FAIL"}
    html = (pytester.path / "sits-report" / "sits-report.html").read_text()
    # The charts are matplotlib SVG embedded in the page (issue: one chart path): a temperature chart is drawn.
    assert '<svg role="img" aria-label="' in html and "temperature (°C)" in html
    pytester.runpytest(*conformance_args, "--sits-platform=sim:l40s", "--sits-level=full",
                       "-m", "THERM-GPU-STEADY or THERM-CPU-STEADY")
    assert {v["status"] for v in report_of(pytester.path)["verdicts"]} == {"PASS"}


def test_a_second_calibration_starts_from_the_settled_duty(pytester, report_of):
    pytester.makepyfile("""
from pytest_sits.platforms.sim.thermal import PlantRig, ThermalPlant

TH = "THERM-GPU-STEADY"

def test_twice(sits_thermal_steady):
    rig = PlantRig(ThermalPlant(), "gpu0", "gpu")
    with sits_thermal_steady(rig, TH) as evidence:
        first = evidence["trace"]
    rig2 = PlantRig(ThermalPlant(), "gpu0", "gpu")
    with sits_thermal_steady(rig2, TH) as evidence:
        second = evidence["trace"]
    assert first["stopped"] == second["stopped"] == "steady"
    assert second["samples"][0]["duty"] == round(first["final_duty"], 4)
    assert second["duration_s"] <= first["duration_s"]
""")
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)


def test_every_device_is_calibrated_at_once_each_with_its_own_controller():
    """steady_all: the devices' calibrations overlap in time (threads), each settles at its own duty, and each
    trace names the devices heated with it; one device whose plant cannot settle fails alone."""
    from pytest_sits.conditions.thermal import steady_all

    started, overlap = [], threading.Event()

    class Rig(PlantRig):
        def read(self):
            if self.subject not in started:
                started.append(self.subject)
            if len(started) == 3:
                overlap.set()
            return super().read()

    rigs = [Rig(ThermalPlant(r=r, seed=i), f"at-once-gpu{i}", "gpu") for i, r in enumerate((0.06, 0.066, 0.063))]
    hot = Rig(ThermalPlant(ambient=72.0, seed=9), "at-once-hot", "gpu")
    duty = {}
    out = steady_all(rigs + [hot], "THERM-GPU-STEADY", GPU, lambda m: None, duty)
    assert overlap.is_set()
    assert set(out) == {"at-once-gpu0", "at-once-gpu1", "at-once-gpu2", "at-once-hot"}
    for rig in rigs:
        ev = out[rig.subject]
        assert ev["trace"]["stopped"] == "steady"
        assert ev["trace"]["at_once"] == ["at-once-gpu0", "at-once-gpu1", "at-once-gpu2", "at-once-hot"]
        assert check_gpu_steady(ev, GPU, rig.subject).status == PASS
    assert len({round(duty[r.subject], 3) for r in rigs}) == 3  # one controller per device: three duties
    assert check_gpu_steady(out["at-once-hot"], GPU, "at-once-hot").status == FAIL


def test_a_stop_ends_every_calibration_at_once():
    """Ctrl-C while the devices calibrate: every calibration stops and its load goes off before it propagates.
    (Each test's devices have names of their own: a device's calibration lock is shared across processes.)"""
    import os
    import signal

    from pytest_sits.conditions.thermal import steady_all

    from contextlib import contextmanager

    loaded = set()

    class Slow(PlantRig):
        def sleep(self, dt):
            time.sleep(0.001)
            super().sleep(dt)

        @contextmanager
        def load(self):
            loaded.add(self.subject)
            try:
                yield self
            finally:
                loaded.discard(self.subject)

    rigs = [Slow(ThermalPlant(ambient=60.0, drift_c_per_s=0.05, seed=i), f"stop-gpu{i}", "gpu") for i in range(3)]
    timer = threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        steady_all(rigs, "THERM-GPU-STEADY", dict(GPU, timeout_s=14400), lambda m: None, {})
    assert time.monotonic() - t0 < 20 and not loaded  # every load off
    assert not [t for t in threading.enumerate() if t.name.startswith("sits-thermal-") and t.is_alive()]


def test_cpu_packages_are_reached_together_with_the_gpu_dies_and_the_first_steady_stays_loaded():
    """``also``: the packages calibrate beside the dies for their own requirement and thresholds; a device steady
    first keeps its load on, still, until the last one has ended."""
    from contextlib import contextmanager

    from pytest_sits.conditions.thermal import steady_all

    events = []

    class Rig(PlantRig):
        @contextmanager
        def load(self):
            yield self
            events.append((self.subject, slow.plant.now))  # where the slow calibration is when this load goes off

    fast = Rig(ThermalPlant(tau=5.0, seed=1), "fast", "gpu")
    slow = Rig(ThermalPlant(tau=80.0, seed=2), "slow", "gpu")
    pkg = Rig(ThermalPlant(p_idle=60.0, p_max=350.0, r=0.11, tau=25.0, step=0.125, noise=0.05, seed=3),
              "package 0", "cpu")
    out = steady_all([fast, slow], "THERM-GPU-STEADY", GPU, lambda m: None, {},
                     also=[(pkg, "THERM-CPU-STEADY", CPU)])
    assert out["fast"]["trace"]["at_once"] == ["fast", "slow", "package 0"]
    assert check_gpu_steady(out["slow"], GPU, "slow").status == PASS
    assert check_cpu_steady(out["package 0"], CPU, "package 0").status == PASS
    assert out["slow"]["trace"]["duration_s"] > out["fast"]["trace"]["duration_s"]
    # the fast die's load went off only once the slow one had ended its calibration (not when it was steady)
    off = dict(events)
    assert off["fast"] == pytest.approx(out["slow"]["trace"]["duration_s"], abs=0.01)
    assert out["fast"]["trace"]["duration_s"] < off["fast"] - 10
