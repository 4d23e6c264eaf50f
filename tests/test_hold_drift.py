"""MEM-BW-HOLD on a machine whose bandwidth moves: the peak is re-measured after the hold and whenever the
injectors starve; a reference that moved by more than the band's width is INCONCLUSIVE, a machine that held
still and could not be held in band is FAIL."""

import threading
from contextlib import contextmanager

from pytest_sits.checks.bandwidth import check_hold
from pytest_sits.conditions.bandwidth import acquire_hold
from pytest_sits.verdict import FAIL, INCONCLUSIVE, PASS

TH = {"band_low": 0.85, "band_high": 0.92, "window_ms": 100, "min_in_band_share": 0.95}
PEAK = {"validated": True, "kernels": {"copy": {"gbps_median": 30.0}}}


def _ev(occupancy, reference=None):
    tl = [{"t": i * 0.1, "occupancy": occupancy, "phase": "hold", "in_band": 0.85 <= occupancy <= 0.92}
          for i in range(100)]
    ev = {"band": [0.85, 0.92], "peak_gbps": 30.0, "source": "own accounting", "windows": 100,
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
        self.starved = threading.Event()
        self.starved.set()
        self.saturated_windows = 5
        self.calls = []

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
