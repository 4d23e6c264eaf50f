"""MEM-BW-HOLD on a machine whose bandwidth moves: the peak is re-measured after the hold and whenever the
injectors starve; a reference that moved by more than the band's width is INCONCLUSIVE, a machine that held
still and could not be held in band is FAIL."""

import threading
from contextlib import contextmanager

from pytest_sits.checks.bandwidth import check_hold
from pytest_sits.conditions.bandwidth import acquire_hold
from pytest_sits.verdict import FAIL, INCONCLUSIVE, PASS

TH = {"band_low": 0.85, "band_high": 0.92, "window_ms": 100, "min_in_band_share": 0.95, "duration_s": 30}
PEAK = {"validated": True, "kernels": {"copy": {"gbps_median": 30.0}}}


def _ev(occupancy, reference=None):
    tl = [{"t": i * 0.1, "occupancy": occupancy, "phase": "hold", "in_band": 0.85 <= occupancy <= 0.92}
          for i in range(100)]
    ev = {"band": [0.85, 0.92], "peak_gbps": 30.0, "source": "own accounting", "windows": 100, "window_s": 0.1,
          "windows_in_band": sum(r["in_band"] for r in tl), "timeline": tl, "errors": []}
    if reference is not None:
        ev["reference"] = reference
    return ev


def _ref(*peaks):
    before, during, after = peaks[0], peaks[1:-1], peaks[-1]
    moved = max(abs(g - before) / before for g in peaks[1:])
    return {"before_gbps": before, "during": [{"gbps": g} for g in during], "after_gbps": after, "moved": moved}


def test_reference_moved_is_inconclusive_with_both_peaks():
    v = check_hold(_ev(0.55, _ref(30.0, 16.0, 15.0)), TH)
    assert v.status == INCONCLUSIVE
    assert "30.0 GB/s before" in v.reason and "16.0, 15.0" in v.reason and "moved under the measurement" in v.reason
    assert v.evidence["series"][0]["y"]  # the timeline is kept


def test_machine_that_held_still_and_missed_the_band_fails():
    v = check_hold(_ev(0.55, _ref(30.0, 29.6)), TH)
    assert v.status == FAIL and "re-measured" in v.method


def test_in_band_but_reference_moved_is_not_a_pass():
    assert check_hold(_ev(0.88, _ref(30.0, 40.0)), TH).status == INCONCLUSIVE
    assert check_hold(_ev(0.88, _ref(30.0, 30.5)), TH).status == PASS


class _StarvingHold:
    """Stands in for BandwidthHold: starves once, records pause/resume."""

    def __init__(self):
        import time

        self.starved = threading.Event()
        self.starved.set()
        self.saturated_windows = 5
        self.calls = []
        self.now = time.monotonic
        self.wait = time.sleep

    def pause(self):
        self.calls.append("pause")

    def resume(self):
        self.calls.append("resume")
        self.starved.clear()

    def progress(self):
        return "-"

    def evidence(self):
        return dict(_ev(0.6), peak_gbps=30.0)


def test_acquire_remeasures_when_starved_and_after():
    hold = _StarvingHold()

    @contextmanager
    def factory():
        yield hold
    peaks = iter([12.0, 11.0])
    ev = acquire_hold(PEAK, factory, 0.3, remeasure=lambda: next(peaks))
    assert hold.calls == ["pause", "resume"]
    ref = ev["reference"]
    assert [m["gbps"] for m in ref["during"]] == [12.0] and ref["after_gbps"] == 11.0
    assert ref["moved"] == round((30.0 - 11.0) / 30.0, 4)
    assert check_hold(ev, TH).status == INCONCLUSIVE


# -- the simulated DRAM plant: the same acquire function and check, in simulated time ----------------------------

SIM_TH = dict(TH, duration_s=30)
NODE = {"node": 0, "cpus": [0, 1]}


def _sim_hold(faults, seed):
    from pytest_sits.conditions.bandwidth import hold_factory
    from pytest_sits.platforms.sim.bandwidth import SimDram

    plant = SimDram(faults, seed=seed)
    peak = plant.peak(NODE)
    ev = acquire_hold(peak, hold_factory(peak, NODE, SIM_TH, plant), 30, NODE, thresholds=SIM_TH)
    return check_hold(ev, SIM_TH), ev


def test_a_steady_plant_holds_95_percent_of_windows_in_band():
    for seed in range(5):
        v, ev = _sim_hold([], seed)
        assert v.status == PASS, v.reason
        d = v.evidence["decision"]
        assert d["low"] >= 0.95 and d["method"] == "t-interval over batch means" and ev["windows"] >= 300


def test_a_drifting_plant_is_inconclusive_never_fail():
    statuses = {_sim_hold(["drift"], seed)[0].status for seed in range(20)}
    assert FAIL not in statuses and INCONCLUSIVE in statuses


def test_a_peak_measured_while_other_processes_held_the_cpus_is_not_a_reference():
    ev = _ev(0.55, _ref(30.0, 29.6))
    ev["peak"] = {"kernels": {"copy": {"gbps_median": 30.0, "cpu_share_median": 0.24}}}
    v = check_hold(ev, TH)
    assert v.status == INCONCLUSIVE and "other processes held the CPUs" in v.reason and "24%" in v.reason
    ev["peak"]["kernels"]["copy"]["cpu_share_median"] = 0.97
    assert check_hold(ev, TH).status == FAIL


def test_an_undecided_hold_is_extended_up_to_its_cap():
    """A hold whose share of windows in band sits near the threshold goes on in steps of half its duration."""
    from pytest_sits.conditions.trials import TrialPlan

    class Flaky(_StarvingHold):
        def __init__(self):
            super().__init__()
            self.starved.clear()
            self.t = 0.0
            self.now = lambda: self.t
            self.wait = self.step
            self.peak_gbps = 30.0
            self.rows = []

        def step(self, dt):
            self.t += dt
            if int(self.t * 10) > len(self.rows):  # one 100 ms window, 94% of them in band
                k = len(self.rows)
                occ = 0.80 if k % 50 in (7, 19, 33) else 0.88
                self.rows.append({"t": k * 0.1, "occupancy": occ, "phase": "hold", "in_band": 0.85 <= occ <= 0.92})

        def evidence(self):
            return {"band": [0.85, 0.92], "peak_gbps": 30.0, "source": "test", "windows": len(self.rows),
                    "window_s": 0.1, "windows_in_band": sum(r["in_band"] for r in self.rows),
                    "timeline": list(self.rows), "errors": []}
    hold = Flaky()

    @contextmanager
    def factory():
        yield hold
    ev = acquire_hold(PEAK, factory, 10, thresholds=dict(TH, duration_s=10), remeasure=lambda: 30.0,
                      plan=TrialPlan("MEM-BW-HOLD", initial=10, step=5, cap=20))
    assert ev["sequential"]["held_s"] == [10.0, 15.0, 20.0] and ev["sequential"]["stopped"] == "cap"
    v = check_hold(ev, TH)
    assert v.status == INCONCLUSIVE and "batches" in v.reason
