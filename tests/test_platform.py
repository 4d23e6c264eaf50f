"""Platforms: the probes read live sysfs, snapshots and simulated trees alike."""

import os

from pathlib import Path

import pytest

from pytest_sits.platforms import PlatformError, from_spec
from pytest_sits.platforms.live import LivePlatform
from pytest_sits.platforms.sim.faults import FAULTS
from pytest_sits.platforms.snapshot import SnapshotPlatform, capture
from pytest_sits.probes import pcie, sysfs


def test_live_platform_reads_this_machine():
    inv = LivePlatform().inventory()
    assert inv["cpu"]["threads"] == os.cpu_count()
    assert inv["memory"]["total_bytes"] > 0
    assert inv["numa"] and all(n["cpus"] for n in inv["numa"])
    # every PCI function under sysfs is there, with its class and chain
    assert len(inv["pci"]) == len(os.listdir("/sys/bus/pci/devices"))
    assert all(d["class"] and d["pci_id"] for d in inv["pci"])
    assert inv["platform"] == {"kind": "live", "label": "live", "simulated": False}
    # no GPU on this machine: NVML missing is a recorded reason, not a crash
    assert inv["management"]["nvml"]["available"] in (True, False)
    if not inv["management"]["nvml"]["available"]:
        assert inv["management"]["nvml"]["reason"]


def test_sim_builds_the_profile_machine():
    plat = from_spec("sim:h100")
    inv = plat.inventory()
    accs = inv["accelerators"]
    assert len(accs) == 8 and {a["pci_id"] for a in accs} == {"10de:2330"}
    assert all(a["upstream"] and a["memory_source"] == "nvml" for a in accs)
    assert plat.simulated and "SIMULATED" in plat.label
    # the NIC beside the GPUs is not an accelerator
    assert any(d["pci_id"] == "15b3:1021" for d in inv["pci"])
    assert inv["cpu"]["sockets"] == 2 and len(inv["numa"]) == 2


def test_sim_faults_change_the_evidence():
    assert len(from_spec("sim:h100+missing-device").inventory()["accelerators"]) == 7
    wrong = from_spec("sim:h100+wrong-model").inventory()["accelerators"]
    assert sorted(a["pci_id"] for a in wrong)[-1] == "10de:2331"
    small = from_spec("sim:h100+small-memory").inventory()["accelerators"]
    assert small[0]["memory_total_bytes"] < 45e9
    sw = from_spec("sim:h100+switch").inventory()
    acc = sw["accelerators"][0]
    by_bdf = {d["bdf"]: d for d in sw["pci"]}
    types = [by_bdf[b]["config"]["pcie"]["port_type"] for b in acc["upstream"]]
    assert types == ["switch_downstream", "switch_upstream", "root_port"]
    nonv = from_spec("sim:h100+no-nvml").inventory()
    assert not nonv["management"]["nvml"]["available"]
    assert all(a["memory_total_bytes"] is None for a in nonv["accelerators"])


def test_unknown_fault_and_platform_are_usage_errors():
    with pytest.raises(PlatformError, match="unknown sim fault 'bogus'; fix: use one of"):
        from_spec("sim:h100+bogus")
    with pytest.raises(PlatformError, match=r"unknown sim fault 'swich'; fix: did you mean 'switch'\?$"):
        from_spec("sim:h100+swich")
    with pytest.raises(PlatformError, match="live, snapshot:DIR, evidence:DIR or sim:PROFILE"):
        from_spec("cloud:x")
    with pytest.raises(PlatformError, match="no such folder"):
        from_spec("snapshot:/nonexistent")
    with pytest.raises(PlatformError, match="not a snapshot"):
        from_spec(f"snapshot:{Path(__file__).parent}")
    assert "switch" in FAULTS


def test_capture_then_snapshot_reproduces_inventory(tmp_path):
    sim = from_spec("sim:h200+switch,numa-unknown")
    capture(tmp_path / "snap", root=sim.root, nvml=sim.nvml())
    snap = SnapshotPlatform(tmp_path / "snap")
    a, b = sim.inventory(), snap.inventory()
    for key in ("cpu", "memory", "numa", "accelerators"):
        assert a[key] == b[key], key
    assert [d["bdf"] for d in a["pci"]] == [d["bdf"] for d in b["pci"]]
    assert snap.kind == "snapshot" and not snap.simulated


def test_capture_of_this_machine(tmp_path):
    manifest = capture(tmp_path / "snap")
    assert manifest["files"] > 10
    snap = from_spec(f"snapshot:{tmp_path / 'snap'}")
    live = LivePlatform().inventory()
    inv = snap.inventory()
    assert inv["cpu"] == live["cpu"]
    assert [d["bdf"] for d in inv["pci"]] == [d["bdf"] for d in live["pci"]]
    assert [d["config"] for d in inv["pci"]] == [d["config"] for d in live["pci"]]
    with pytest.raises(PlatformError, match="already holds a snapshot"):
        capture(tmp_path / "snap")


def test_snapshot_with_corrupt_manifest(tmp_path):
    (tmp_path / "manifest.json").write_text("{not json")
    with pytest.raises(PlatformError, match="not valid JSON"):
        SnapshotPlatform(tmp_path)


@pytest.mark.parametrize("text,want", [("16.0 GT/s PCIe", 16.0), ("16 GT/s", 16.0), ("2.5 GT/s PCIe", 2.5),
                                       ("Unknown", None), (None, None), ("32.0 GT/s PCIe", 32.0)])
def test_sysfs_speed_strings(text, want):
    assert pcie.parse_sysfs_speed(text) == want


@pytest.mark.parametrize("ptype,name", [(0, "endpoint"), (4, "root_port"), (5, "switch_upstream"),
                                        (6, "switch_downstream"), (7, "pcie_to_pci_bridge")])
def test_config_space_port_type(ptype, name):
    cfg = pcie.build_config(0x10DE, 0x2330, 0x030200, ptype, max_gen=5, max_width=16, cur_gen=4, cur_width=8)
    parsed = pcie.parse_config(cfg)
    assert parsed["pcie"]["port_type"] == name
    assert parsed["pcie"]["max_speed_gts"] == 32.0 and parsed["pcie"]["current_width"] == 8


def test_config_space_truncated_without_root():
    cfg = pcie.build_config(0x10DE, 0x2330, 0x030200, 0)[:64]
    parsed = pcie.parse_config(cfg)
    assert parsed["pcie"] is None and "beyond the 64 readable bytes" in parsed["reason"]


def test_cpulist():
    assert sysfs.parse_cpulist("0-3,8,10-11") == [0, 1, 2, 3, 8, 10, 11]
    assert sysfs.parse_cpulist("") == []


def test_nvml_bus_id_normalised():
    from pytest_sits.probes.pcie import normalise_bus_id

    assert normalise_bus_id(b"00000000:17:00.0") == "0000:17:00.0"
    assert normalise_bus_id("00000000:AB:00.0") == "0000:ab:00.0"


def test_cli_inventory_prints_yaml(capsys):
    import yaml

    from pytest_sits.cli import main

    assert main(["inventory", "--platform", "sim:l40s"]) == 0
    data = yaml.safe_load(capsys.readouterr().out)
    assert len(data["accelerators"]) == 8 and data["platform"]["simulated"] is True
    assert main(["inventory"]) == 0
    assert yaml.safe_load(capsys.readouterr().out)["platform"]["kind"] == "live"


def test_amdsmi_enriches_amd_devices(monkeypatch, tmp_path):
    """A fake amdsmi module (the real one ships with ROCm) feeds the same inventory fields as NVML."""
    import sys
    import types

    from pytest_sits.probes import amd

    fake = types.ModuleType("amdsmi")
    fake.AmdSmiMemoryType = types.SimpleNamespace(VRAM=0)
    fake.amdsmi_init = lambda: None
    fake.amdsmi_shut_down = lambda: None
    fake.amdsmi_get_processor_handles = lambda: ["h0"]
    fake.amdsmi_get_gpu_device_bdf = lambda h: "0000:11:00.0"
    fake.amdsmi_get_gpu_asic_info = lambda h: {"market_name": "AMD Instinct MI300X"}
    fake.amdsmi_get_gpu_memory_total = lambda h, t: 192 * 1024 ** 3
    fake.amdsmi_get_gpu_vbios_info = lambda h: {"version": "113-M3000100-102"}

    def broken(h):
        raise RuntimeError("AMDSMI_STATUS_NOT_SUPPORTED")

    fake.amdsmi_get_gpu_board_info = broken
    fake.amdsmi_get_gpu_driver_info = lambda h: {"driver_version": "6.8.5"}
    monkeypatch.setitem(sys.modules, "amdsmi", fake)
    facts = amd.collect()
    assert facts["available"] and facts["devices"][0]["memory_total_bytes"] == 192 * 1024 ** 3
    assert facts["devices"][0]["serial"] is None and facts["errors"][0]["field"] == "serial"
    plat = from_spec("sim:mi300x")
    monkeypatch.setattr(plat, "amdsmi", lambda: facts)
    acc = next(a for a in plat.inventory()["accelerators"] if a["bdf"] == "0000:11:00.0")
    assert acc["name"] == "AMD Instinct MI300X" and acc["memory_source"] == "amdsmi"


def test_amdsmi_missing_is_a_reason():
    import sys

    from pytest_sits.probes import amd

    if "amdsmi" in sys.modules and sys.modules["amdsmi"] is not None:
        pytest.skip("amdsmi present")
    facts = amd.collect()
    assert not facts["available"] and "amdsmi not importable" in facts["reason"]


def test_corrupt_snapshot_is_a_usage_error(pytester, tmp_path):
    sim = from_spec("sim:h100")
    capture(tmp_path / "snap", root=sim.root, nvml=sim.nvml())
    (tmp_path / "snap" / "nvml.json").write_text("{truncated")
    pytester.makepyfile("def test_x():\n    pass\n")
    result = pytester.runpytest(f"--sits-platform=snapshot:{tmp_path / 'snap'}", "--sits-profile=h100")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: bad platform: *nvml.json: not valid JSON*fix: capture the snapshot again"])
    assert "Traceback" not in result.stderr.str()


def test_snapshot_run_end_to_end(pytester, tmp_path, conformance_args, report_of):
    sim = from_spec("sim:h100+switch")
    capture(tmp_path / "snap", root=sim.root, nvml=sim.nvml())
    pytester.runpytest(*conformance_args, f"--sits-platform=snapshot:{tmp_path / 'snap'}")
    report = report_of(pytester.path)
    assert report["platform"]["kind"] == "snapshot" and report["profile"]["name"] == "h100-sxm5"
    by = {}
    for v in report["verdicts"]:
        by.setdefault(v["requirement"], set()).add(v["status"])
    assert by["TOPO-PCIE-DIRECT"] == {"FAIL"}  # the captured tree has switches
    assert by["TOPO-PCIE-LINK"] == {"PASS"}    # captured at full link: proof enough without load
    assert by["TOPO-NUMA-BIND"] == {"SKIP"}  # a snapshot cannot bind processes: not measured (run is PARTIAL)
