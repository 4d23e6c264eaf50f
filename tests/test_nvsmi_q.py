"""`nvidia-smi -q` text (current and older format) read into NVML-shaped facts and judged by the live checks;
`sits audit-text --nvidia-smi-q`."""

import json
import re
from pathlib import Path

import pytest

from pytest_sits.checks.topology import check_pcie_link
from pytest_sits.cli import main
from pytest_sits.probes.readers.nvidia_smi_q import MAX_BYTES, NvsmiTextError, link_evidence, parse
from pytest_sits.verdict import FAIL, INCONCLUSIVE, PASS

DATA = Path(__file__).resolve().parent / "data"
CURRENT = (DATA / "nvidia-smi-q-l40s-560.txt").read_text()
OLDER = (DATA / "nvidia-smi-q-a100-525.txt").read_text()


def test_current_format():
    facts = parse(CURRENT)
    assert facts["driver_version"] == "560.35.03" and len(facts["devices"]) == 2 and not facts["errors"]
    idle, busy = facts["devices"]
    assert idle["pci_bus_id"] == "0000:4f:00.0" and idle["pci_id"] == "10de:26b9"
    assert (idle["pcie_current_gen"], idle["pcie_gpu_max_gen"], idle["pcie_host_max_gen"]) == (1, 4, 5)
    assert idle["clock_event_reasons"] == 0x1 and busy["clock_event_reasons"] == 0x4
    assert idle["ecc_aggregate_corrected"] == 4 and idle["ecc_volatile_uncorrected"] == 0
    assert busy["power_limit_enforced_mw"] == 350000 and busy["power_limit_constraints_mw"] == [100000, 350000]
    assert idle["inforom_image_version"] == "G133.0242.00.03" and idle["gsp_firmware_version"] == "560.35.03"
    assert busy["remapped_rows"] == {"correctable": 0, "uncorrectable": 0, "pending": False, "failure": False}


def test_older_format():
    dev, = parse(OLDER)["devices"]
    assert dev["clock_reasons_section"] == "Clocks Throttle Reasons" and dev["clock_event_reasons"] == 0x4
    assert dev["pcie_gpu_max_gen"] is None and dev["pcie_max_gen"] == 4 and dev["pcie_current_width"] == 8
    assert dev["power_limit_enforced_mw"] == 250000 and dev["power_limit_default_mw"] == 300000
    assert dev["persistence_mode"] is False and dev["gsp_firmware_version"] is None
    assert (dev["ecc_volatile_uncorrected"], dev["ecc_volatile_corrected"]) == (1, 12)
    assert dev["remapped_rows"]["pending"] is True and dev["pcie_replay_counter"] == 17


TH_LINK = {"samples": 1, "require_load": True}


def test_link_idle_downshift_is_not_a_fault_and_gen4_device_in_gen5_slot_is_not_degraded():
    idle, busy = parse(CURRENT)["devices"]
    v = check_pcie_link(link_evidence(idle), TH_LINK, idle["pci_bus_id"])
    assert v.status == INCONCLUSIVE and "idle" in v.reason
    v = check_pcie_link(link_evidence(busy), TH_LINK, busy["pci_bus_id"])
    assert v.status == PASS, v.reason


def test_link_narrow_under_load_fails_in_the_older_format():
    dev, = parse(OLDER)["devices"]
    v = check_pcie_link(link_evidence(dev), TH_LINK, dev["pci_bus_id"])
    assert v.status == FAIL and "x8" in v.reason


def test_a_bad_value_is_recorded_with_its_line_and_the_rest_is_read():
    """A value that is not what its field holds makes that field unread (with the line), never the file refused."""
    bad = CURRENT.replace("Current                   : 1\n", "Current                   : one\n", 1)
    idle, busy = parse(bad)["devices"]
    assert idle["pcie_current_gen"] is None and busy["pcie_current_gen"] is not None
    (err,) = [e for e in idle["errors"] if e["field"] == "pcie_current_gen"]
    assert re.search(r"line \d+: 'one' is not a number \(PCI / GPU Link Info / PCIe Generation / Current\)",
                     err["error"])
    assert idle["ecc_mode_current"] is True  # the other fields are read
    v = check_pcie_link(link_evidence(idle), TH_LINK, idle["pci_bus_id"])
    assert v.status == INCONCLUSIVE and "'one' is not a number" in v.reason
    maybe = parse(CURRENT.replace("Persistence Mode                      : Enabled", "Persistence Mode : Maybe", 1))
    assert maybe["devices"][0]["persistence_mode"] is None
    assert "Enabled/Disabled" in maybe["devices"][0]["errors"][0]["error"]


def test_not_nvidia_smi_q_is_refused_with_what_was_found():
    with pytest.raises(NvsmiTextError, match="not `nvidia-smi -q` output"):
        parse("hello\nworld\n")
    with pytest.raises(NvsmiTextError, match="MiB"):
        parse("x" * (MAX_BYTES + 1))


def test_declared_count_mismatch_is_recorded():
    facts = parse(CURRENT.replace("Attached GPUs                             : 2", "Attached GPUs : 3"))
    assert facts["errors"] and "declares 3" in facts["errors"][0]["error"]


@pytest.mark.slow
def test_audit_text_current_format_passes(capsys, tmp_path):
    """Two L40S of one machine (the profile expects eight): identity and capacity fail by the profile, every
    health field passes, the idle link is INCONCLUSIVE, what the text cannot show is not measured."""
    out = tmp_path / "v.json"
    rc = main(["audit-text", "--nvidia-smi-q", str(DATA / "nvidia-smi-q-l40s-560.txt"), "--profile", "l40s",
               "--each", "--json", str(out)])
    text = capsys.readouterr().out
    assert rc == 10, text
    verdicts = json.loads(out.read_text())
    by = {(v["requirement"], v["subject"]): v["status"] for v in verdicts}
    assert by[("DEP-ECC", "0000:4f:00.0")] == "PASS" and by[("DEP-POWERCAP", "0000:d5:00.0")] == "PASS"
    assert by[("TOPO-PCIE-LINK", "0000:4f:00.0")] == "INCONCLUSIVE" and by[("SEC-FIRMWARE", "0000:d5:00.0")] == "WARN"
    assert by[("INV-DEVICES", "accelerators")] == "FAIL" and by[("DEP-DRIVER", "driver")] == "PASS"
    # the loaded reading of 0000:d5:00.0 passes and names the SW power cap; the idle one is not measured
    assert by[("DEP-THROTTLE", "0000:d5:00.0")] == "PASS" and "sw_power_cap" in text
    assert by[("DEP-THROTTLE", "0000:4f:00.0")] == "SKIP" and "not measured: DEP-THROTTLE 0000:4f:00.0" in text
    assert "result: NON_CONFORMANT" in text


@pytest.mark.slow
def test_audit_text_older_format_fails_each_fault(capsys):
    rc = main(["audit-text", "--nvidia-smi-q", str(DATA / "nvidia-smi-q-a100-525.txt"), "--profile", "a100"])
    text = capsys.readouterr().out
    assert rc == 10
    for req in ("TOPO-PCIE-LINK", "DEP-ECC", "DEP-ROWREMAP", "DEP-PERSIST", "DEP-POWERCAP", "DEP-DRIVER"):
        assert any(line.startswith(req) and " FAIL " in line for line in text.splitlines()), (req, text)


def test_audit_text_of_no_nvidia_smi_output_is_a_usage_error_saying_what_it_is(capsys, tmp_path):
    bad = tmp_path / "q.txt"
    bad.write_text("Architecture:            x86_64\n  CPU op-mode(s):        32-bit, 64-bit\nCPU(s): 64\n")
    assert main(["audit-text", "--nvidia-smi-q", str(bad)]) == 4
    err = capsys.readouterr().err
    assert "no submitted file could be read" in err and "looks like `lscpu` output" in err and str(bad) in err
