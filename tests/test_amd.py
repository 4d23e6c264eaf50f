"""AMD at parity with NVIDIA: the amdsmi probe reads the power cap, replay counter, throttle status, firmware and
XGMI links (a fake amdsmi module here: the real one ships with ROCm), and the simulated MI300X has the same facts,
so its health, inventory and peer-link requirements are decided on sim as on a live machine."""

import sys
import types

import pytest

from pytest_sits.conditions.topology import acquire_peer_mesh
from pytest_sits.platforms import from_spec
from pytest_sits.probes import amd
from pytest_sits.probes.health import CLOCK_EVENT_BITS


def fake_amdsmi(n=2, link="XGMI", throttle=0):
    fake = types.ModuleType("amdsmi")
    fake.AmdSmiMemoryType = types.SimpleNamespace(VRAM=0)
    fake.amdsmi_init = lambda: None
    fake.amdsmi_shut_down = lambda: None
    fake.amdsmi_get_processor_handles = lambda: list(range(n))
    fake.amdsmi_get_gpu_device_bdf = lambda h: f"0000:{0x11 + h:02x}:00.0"
    fake.amdsmi_get_gpu_asic_info = lambda h: {"market_name": "AMD Instinct MI300X"}
    fake.amdsmi_get_gpu_memory_total = lambda h, t: 192 * 1024 ** 3
    fake.amdsmi_get_gpu_vbios_info = lambda h: {"version": "113-M3000100-102"}
    fake.amdsmi_get_gpu_board_info = lambda h: {"product_serial": f"S{h}"}
    fake.amdsmi_get_gpu_driver_info = lambda h: {"driver_version": "6.8.5"}
    fake.amdsmi_get_gpu_total_ecc_count = lambda h: {"correctable_count": 0, "uncorrectable_count": 0,
                                                     "deferred_count": 0}
    fake.amdsmi_get_gpu_ecc_enabled = lambda h: 1
    fake.amdsmi_get_gpu_bad_page_info = lambda h: []
    fake.amdsmi_get_power_cap_info = lambda h: {"power_cap": 750_000_000, "default_power_cap": 750_000_000,
                                                "min_power_cap": 0, "max_power_cap": 750_000_000}
    fake.amdsmi_get_gpu_pci_replay_counter = lambda h: 0
    fake.amdsmi_get_gpu_metrics_info = lambda h: {"indep_throttle_status": throttle, "throttle_status": 0}
    fake.amdsmi_get_fw_info = lambda h: {"fw_list": [{"fw_name": "SMC", "fw_version": "85.114.0"}]}
    fake.amdsmi_topo_get_link_type = lambda a, b: {"hops": 1, "type": link}
    return fake


def test_amdsmi_probe_reads_cap_replay_throttle_firmware_and_xgmi(monkeypatch):
    monkeypatch.setitem(sys.modules, "amdsmi", fake_amdsmi())
    facts = amd.collect()
    dev = facts["devices"][0]
    assert facts["available"] and not facts["errors"], facts["errors"]
    assert dev["power_limit_enforced_mw"] == 750_000 and dev["power_limit_constraints_mw"] == [0, 750_000]
    assert dev["pcie_replay_counter"] == 0 and dev["clock_event_reasons"] == 0
    assert dev["firmware"] == {"SMC": "85.114.0"} and dev["ecc_mode_current"] is True
    assert facts["p2p_xgmi"] == [[None, True], [True, None]]


def test_amdsmi_throttle_and_other_links(monkeypatch):
    # PPT0 (bit 0) and TEMP_HOTSPOT (bit 36): a software power cap and a thermal slowdown, in NVML's names
    monkeypatch.setitem(sys.modules, "amdsmi", fake_amdsmi(link="PCIE", throttle=(1 << 0) | (1 << 36)))
    facts = amd.collect()
    assert facts["devices"][0]["clock_event_reasons"] == (CLOCK_EVENT_BITS["sw_power_cap"]
                                                          | CLOCK_EVENT_BITS["hw_thermal_slowdown"])
    assert facts["p2p_xgmi"] == [[None, False], [False, None]]


def test_amdsmi_unsupported_field_is_recorded_not_invented(monkeypatch):
    fake = fake_amdsmi()

    def broken(h):
        raise RuntimeError("AMDSMI_STATUS_NOT_SUPPORTED")

    fake.amdsmi_get_power_cap_info = broken
    fake.amdsmi_topo_get_link_type = lambda a, b: broken(a)
    monkeypatch.setitem(sys.modules, "amdsmi", fake)
    facts = amd.collect()
    assert facts["devices"][0]["power_limit_enforced_mw"] is None
    assert facts["p2p_xgmi"] == [[None, None], [None, None]]
    assert {"power_cap", "p2p_xgmi[0][1]"} <= {e["field"] for e in facts["errors"]}


@pytest.mark.parametrize("spec, status", [("sim:mi300x", "PASS"), ("sim:mi300x+nvlink-partial", "FAIL")])
def test_simulated_mi300x_xgmi_mesh(spec, status):
    from pytest_sits.checks.topology import check_peer_mesh

    plat = from_spec(spec)
    prof = plat.profile
    ev = acquire_peer_mesh(plat.inventory(), prof.expected())
    assert ev["mesh"]["link_name"] == "XGMI" and ev["mesh"]["source"].startswith("amdsmi")
    assert check_peer_mesh(ev, prof.check_thresholds("LINK-NVLINK-MESH")).status == status


def test_simulated_mi300x_has_amdsmi_facts_and_no_nvml():
    inv = from_spec("sim:mi300x").inventory()
    acc = inv["accelerators"][0]
    assert acc["memory_source"] == "amdsmi" and acc["memory_total_bytes"] > 190e9
    m = acc["management"]
    assert m["power_limit_enforced_mw"] == 750_000 and "persistence_mode" not in m and "remapped_rows" not in m
    assert not inv["management"]["nvml"]["available"] and inv["management"]["amdsmi"]["available"]


def test_ascend_requirements_no_library_reads_are_unsupported_never_inconclusive():
    """Huawei devices: what no library of this version reads is marked unsupported in the catalogue, and the
    verdict says so (SKIP; INV-DEVICES compares model and count and WARNs that memory was not compared)."""
    from pytest_sits.catalogue import CATALOGUE
    from pytest_sits.checks.health import check_throttle
    from pytest_sits.checks.inventory import check_capacity, check_devices
    from pytest_sits.conditions.health import throttle_evidence
    from pytest_sits.conditions.inventory import acquire_capacity, acquire_devices

    assert {"MEM-CAPACITY", "DEP-THROTTLE", "INV-DEVICES"} <= {r.id for r in CATALOGUE.values()
                                                               if "Huawei" in r.unsupported}
    plat = from_spec("sim:ascend-910c")
    prof, inv = plat.profile, plat.inventory()
    v = check_capacity(acquire_capacity(inv, prof.expected()), prof.check_thresholds("MEM-CAPACITY"), "accelerators")
    assert v.status == "SKIP" and "not supported for Huawei devices" in v.reason and "npu-smi" in v.reason
    th = dict(prof.check_thresholds("INV-DEVICES"), expected=prof.expected())
    v = check_devices(acquire_devices(inv), th, "accelerators")
    assert v.status == "WARN" and "memory not compared" in v.reason and "Huawei" in v.reason
    acc = inv["accelerators"][0]
    window = {"device": acc["bdf"], "samples": [{"t": 0, "reasons": None, "under_load": True}], "load": {},
              "sample_errors": [], "reader": "simulated"}
    v = check_throttle(throttle_evidence(window, acc), prof.check_thresholds("DEP-THROTTLE"), acc["bdf"])
    assert v.status == "SKIP" and "DEP-THROTTLE is not supported for Huawei" in v.reason
    # a Huawei device that did report a reading is judged on it: unsupported never hides evidence
    seen = dict(window, samples=[{"t": 0, "reasons": 0x80, "under_load": True}])
    assert check_throttle(throttle_evidence(seen, acc), prof.check_thresholds("DEP-THROTTLE"), acc["bdf"]).status \
        == "FAIL"
    # wrong count still fails, unsupported memory or not
    missing = from_spec("sim:ascend-910c+missing-device").inventory()
    assert check_devices(acquire_devices(missing), th, "accelerators").status == "FAIL"


def test_a_live_amd_device_is_sampled_afresh_through_amdsmi(monkeypatch):
    """On a live machine the health window reads the throttle status at each sample (never the inventory's one
    reading from before the load)."""
    from pytest_sits.conditions.health import LiveAmdReader, reader_for

    statuses = iter([0, 1 << 36])  # idle, then a thermal limit under load
    fake = fake_amdsmi()
    fake.amdsmi_get_gpu_metrics_info = lambda h: {"indep_throttle_status": next(statuses)}
    monkeypatch.setitem(sys.modules, "amdsmi", fake)
    platform = types.SimpleNamespace(kind="live")
    acc = {"bdf": "0000:12:00.0", "pci_id": "1002:74a1", "management": {"index": 1}}
    reader = reader_for(platform, acc)
    assert isinstance(reader, LiveAmdReader)
    with reader:
        first, second = reader.fields(), reader.fields()
        assert first["clock_event_reasons"] == 0 and first["error"] is None
        assert second["clock_event_reasons"] == CLOCK_EVENT_BITS["hw_thermal_slowdown"]
        assert reader.ecc()["volatile_uncorrected"] == 0
    with pytest.raises(LookupError):
        with reader_for(platform, dict(acc, bdf="0000:99:00.0")):
            pass
