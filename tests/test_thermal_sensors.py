"""A device the profile expects whose temperature cannot be read is undecided (INCONCLUSIVE), never a SKIP;
AMD GPU temperatures are read through amdsmi."""

import sys
import types

import pytest

from pytest_sits.checks.thermal import check_cpu_steady, check_gpu_steady
from pytest_sits.conditions import thermal as cond
from pytest_sits.conditions.thermal import ThermalUnavailable, thermal_rigs
from pytest_sits.verdict import INCONCLUSIVE, SKIP

TH = {"band_low_c": 68, "band_high_c": 72, "window_s": 120, "tolerance_c": 0.3, "timeout_s": 1200}


class _Platform:
    def __init__(self, exc):
        self.exc = exc

    def thermal_rigs(self, kind, acc=None):
        raise self.exc


def test_present_device_without_sensor_is_inconclusive():
    ev = thermal_rigs(_Platform(ThermalUnavailable("cpu package 0: no sensor")), "cpu")
    v = check_cpu_steady(ev, TH, "cpu")
    assert v.status == INCONCLUSIVE and "cannot be decided" in v.reason


def test_platform_that_measures_nothing_is_skip():
    ev = thermal_rigs(_Platform(ThermalUnavailable("a snapshot cannot run a thermal calibration", present=False)),
                      "gpu")
    assert check_gpu_steady(ev, TH, "0000:01:00.0").status == SKIP


def test_live_cpu_without_sensors_is_inconclusive(tmp_path):
    from pytest_sits.platforms.live import LivePlatform

    p = LivePlatform()
    p.root = tmp_path  # a host with no hwmon and no thermal zone
    v = check_cpu_steady(thermal_rigs(p, "cpu"), TH, "cpu")
    assert v.status == INCONCLUSIVE and "no CPU package temperature sensor" in v.reason


def _fake_amdsmi(monkeypatch, temps):
    m = types.ModuleType("amdsmi")
    m.AmdSmiTemperatureType = types.SimpleNamespace(EDGE="edge", HOTSPOT="hotspot", JUNCTION="junction")
    m.AmdSmiTemperatureMetric = types.SimpleNamespace(CURRENT="current")
    m.amdsmi_init = lambda: None
    m.amdsmi_shut_down = lambda: None
    m.amdsmi_get_processor_handle_from_bdf = lambda bdf: ("h", bdf)

    def metric(h, kind, which):
        if kind not in temps:
            raise RuntimeError("AMDSMI_STATUS_NOT_SUPPORTED")
        return temps[kind].pop(0)
    m.amdsmi_get_temp_metric = metric
    monkeypatch.setitem(sys.modules, "amdsmi", m)


def test_amd_gpu_temperature_through_amdsmi(monkeypatch):
    from pytest_sits.probes.sensors import AmdsmiTemperature

    _fake_amdsmi(monkeypatch, {"hotspot": [70, 71, 72]})
    s = AmdsmiTemperature("0000:05:00.0")
    assert s.describe()["resolution_c"] == 1.0 and "hotspot" in s.describe()["source"]
    assert s.read()["value_c"] == 71.0
    r = s.read()
    assert r["value_c"] == 72.0 and r["error"] is None
    r = s.read()  # the sensor stops answering: recorded as failed, never as a number
    assert r["value_c"] is None and "amdsmi" in r["error"]


def test_amd_gpu_with_no_readable_sensor_is_inconclusive(monkeypatch):
    _fake_amdsmi(monkeypatch, {})
    monkeypatch.setattr(cond, "torch_device_for_bdf", lambda bdf: "cuda:0", raising=False)
    import pytest_sits.conditions.loads as loads

    monkeypatch.setattr(loads, "torch_device_for_bdf", lambda bdf: "cuda:0")
    acc = {"bdf": "0000:05:00.0", "pci_id": "1002:74a1", "vendor": "AMD", "management": {}}

    class P:
        def thermal_rigs(self, kind, a=None):
            return [cond.live_gpu_rig(a)]
    v = check_gpu_steady(thermal_rigs(P(), "gpu", acc), TH, acc["bdf"])
    assert v.status == INCONCLUSIVE and "no readable temperature sensor" in v.reason


def test_gpu_without_load_is_inconclusive_not_skip():
    pytest.importorskip("torch")
    acc = {"bdf": "0000:05:00.0", "pci_id": "10de:2330", "vendor": "NVIDIA", "management": {"index": 0}}

    class P:
        def thermal_rigs(self, kind, a=None):
            return [cond.live_gpu_rig(a)]
    v = check_gpu_steady(thermal_rigs(P(), "gpu", acc), TH, acc["bdf"])
    assert v.status == INCONCLUSIVE and "no load to steer" in v.reason
