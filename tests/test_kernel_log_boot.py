"""A kernel log of a whole boot: the accelerators the kernel enumerated (every PCI function of the machine), the
NVIDIA driver's absence (no Xid could be logged), and firmware-first AER (no AER line can reach the log)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_sits.cli import main
from pytest_sits.probes.readers import classify
from pytest_sits.probes.readers.kernel_log import parse_kernel_log

GPUS = ("0000:c1:00.0", "0000:e1:00.0")


def boot_log(gpus=GPUS, aer="platform does not support [AER LTR DPC]", driver=False, xid_on=None) -> str:
    """A plain-dmesg boot, written for these tests: the kernel's banner, _OSC lines, the PCI enumeration of a NIC,
    a bridge and ``gpus`` (10de:2321, class 0x030200), optionally the NVIDIA driver's load and an Xid."""
    lines = ["[    0.000000] Linux version 5.14.0-570.23.1.el9_6.x86_64 (mockbuild@build) #1 SMP PREEMPT_DYNAMIC",
             "[    0.000000] Command line: BOOT_IMAGE=(hd0,gpt2)/vmlinuz root=/dev/sda3 ro",
             f"[    1.262729] acpi PNP0A08:00: _OSC: {aer}",
             "[    1.263004] acpi PNP0A08:00: _OSC: OS now controls [PCIeHotplug SHPCHotplug PME PCIeCapability]",
             "[    1.270000] pci 0000:20:03.1: [1022:14a5] type 01 class 0x060400 PCIe Root Port",
             "[    1.270100] pci 0000:21:00.0: [8086:1572] type 00 class 0x020000 PCIe Endpoint"]
    for i, bdf in enumerate(gpus):
        lines += [f"[    1.29{i}998] pci {bdf}: [10de:2321] type 00 class 0x030200 PCIe Endpoint",
                  f"[    1.29{i}999] pci {bdf}: BAR 0 [mem 0x68042000000-0x68042ffffff 64bit pref]"]
    lines += ["[    9.100000] i40e 0000:21:00.0: NIC Link is Up, 10 Gbps Full Duplex",
              "[    9.200000] EXT4-fs (sda3): mounted filesystem with ordered data mode",
              "[    9.300000] systemd[1]: Detected architecture x86-64.",
              "[    9.400000] systemd[1]: Hostname set to <node7>.",
              "[    9.500000] audit: type=1400 audit(1700000000.000:2): apparmor=\"STATUS\"",
              "[    9.600000] bond0: (slave eno1): Enslaving as a backup interface"]
    if driver:
        lines += ["[   12.000000] nvidia: loading out-of-tree module taints kernel.",
                  "[   12.400000] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  570.133.20  Release Build"]
    if xid_on:
        lines += [f"[  300.000000] NVRM: Xid (PCI:{xid_on[:-2]}): 79, pid=0, GPU has fallen off the bus."]
    return "\n".join(lines) + "\n"


def test_the_boot_enumeration_names_the_accelerators_with_their_model():
    facts = parse_kernel_log(boot_log())
    assert [d["bdf"] for d in facts["devices"]] == list(GPUS)
    assert facts["devices"][0]["name"] == "NVIDIA GH100 [H100 NVL]" and facts["devices"][0]["pci_id"] == "10de:2321"
    assert facts["boot_enumeration"] == 1 and facts["nvidia_driver_line"] is None
    assert facts["aer_firmware_first_line"] == 3
    assert classify(boot_log())[0] == "kernel-log"


def test_aer_granted_to_the_os_is_not_firmware_first():
    facts = parse_kernel_log(boot_log(aer="OS now controls [PCIeHotplug PME AER PCIeCapability LTR DPC]"))
    assert facts["aer_firmware_first_line"] is None


def _audit(tmp_path: Path, text: str, count: int, capsys) -> dict:
    import json

    log = tmp_path / "dmesg.txt"
    log.write_text(text)
    prof = tmp_path / "p.yaml"
    if not prof.exists():
        assert main(["profile", "init", f"--from={log}", f"--out={prof}"]) == 0
    prof.write_text(prof.read_text().replace("count: 2", f"count: {count}"))
    out = tmp_path / "v.json"
    main(["audit", str(log), f"--profile={prof}", "--each", f"--json={out}"])
    capsys.readouterr()
    return {(v["requirement"], v["subject"]): v for v in json.loads(out.read_text())}


def test_inv_devices_passes_on_a_boot_listing_and_fails_when_one_is_missing(tmp_path, capsys):
    got = _audit(tmp_path, boot_log(), 2, capsys)
    assert got[("INV-DEVICES", "accelerators")]["status"] == "PASS"
    got = _audit(tmp_path, boot_log(gpus=GPUS[:1]), 2, capsys)  # the profile expects 2, the boot shows 1
    assert got[("INV-DEVICES", "accelerators")]["status"] == "FAIL"


def test_no_xid_pass_before_the_driver_ran_and_no_aer_pass_under_firmware_first(tmp_path, capsys):
    got = _audit(tmp_path, boot_log(), 2, capsys)
    xid = got[("DEP-XID", GPUS[0])]
    assert xid["status"] == "SKIP" and "driver did not run" in xid["reason"]
    aer = got[("DEP-PCIE-ERRORS", GPUS[0])]
    assert aer["status"] == "SKIP" and "firmware-first" in aer["reason"]


def test_with_the_driver_and_os_owned_aer_the_log_decides(tmp_path, capsys):
    text = boot_log(aer="OS now controls [PCIeHotplug PME AER PCIeCapability]", driver=True, xid_on=GPUS[1])
    got = _audit(tmp_path, text, 2, capsys)
    assert got[("DEP-XID", GPUS[0])]["status"] == "PASS"
    assert got[("DEP-XID", GPUS[1])]["status"] == "FAIL"
    assert got[("DEP-PCIE-ERRORS", GPUS[0])]["status"] == "PASS"


@pytest.mark.parametrize("prefix", [
    lambda i: f"2026-01-02T10:00:{i:02d},123456+00:00 ",          # dmesg --time-format iso
    lambda i: f"kern  :info  : [    {i}.000000] ",                 # dmesg -x
    lambda i: f"[Fri Jan  2 10:00:{i:02d} 2026] ",                 # dmesg -T
    lambda i: f"Jan 02 10:00:{i:02d}.123456 node7 kernel: ",       # journalctl -k -o short-precise
])
def test_a_clean_log_in_each_print_format_is_read(prefix):
    body = ["Linux version 5.14.0-570.23.1.el9_6.x86_64 (mockbuild@build) #1 SMP",
            "pci 0000:e1:00.0: [10de:2321] type 00 class 0x030200 PCIe Endpoint",
            "i40e 0000:21:00.0: NIC Link is Up, 10 Gbps Full Duplex", "EXT4-fs (sda3): mounted filesystem",
            "systemd[1]: Detected architecture x86-64.", "systemd[1]: Hostname set to <node7>.",
            "bond0: (slave eno1): Enslaving as a backup interface", "random: crng init done"]
    text = "\n".join(prefix(i) + ln for i, ln in enumerate(body)) + "\n"
    assert classify(text)[0] == "kernel-log"
    facts = parse_kernel_log(text)
    assert facts["xids"] == [] and [d["bdf"] for d in facts["devices"]] == ["0000:e1:00.0"]
    assert facts["boot_enumeration"] == 1


def test_one_timestamped_line_in_prose_is_not_a_kernel_log():
    text = "2026-01-02T10:00:00,123456+00:00 the deploy started\nthen we looked at it\nand more\nand more\n"
    assert classify(text)[0] is None


def test_a_log_cut_inside_the_enumeration_is_no_listing_and_only_the_last_boot_counts():
    whole = boot_log()
    cut = "\n".join(whole.splitlines()[:9]) + "\n"  # ends inside the PCI enumeration
    assert parse_kernel_log(cut)["boot_enumeration"] is None
    two = boot_log() + boot_log(gpus=GPUS[:1])  # a second boot that no longer enumerates the other GPU
    facts = parse_kernel_log(two)
    assert facts["boots"] == 2 and [d["bdf"] for d in facts["devices"]] == [GPUS[0]]


def test_firmware_first_on_any_bridge_leaves_aer_undecided():
    text = boot_log().replace("[    1.263004] acpi PNP0A08:00: _OSC: OS now controls [PCIeHotplug SHPCHotplug PME "
                              "PCIeCapability]", "[    1.263004] acpi PNP0A08:01: _OSC: OS now controls [PCIeHotplug "
                              "PME AER PCIeCapability]")
    assert parse_kernel_log(text)["aer_firmware_first_line"] == 3
