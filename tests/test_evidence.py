"""The evidence platform: submitted texts, each file's kind told from its content, read into one inventory and judged
by the conformance modules (`pytest --sits-platform=evidence:DIR`, `sits audit DIR`, `sits audit-text`).

Every text here is a modelled file of tests/data (see its README): written after the layouts of the tools, with
made-up identities."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_sits.catalogue import CATALOGUE

from pytest_sits.checks.health import check_ecc, check_pcie_errors, check_throttle, check_xid
from pytest_sits.checks.inventory import check_devices
from pytest_sits.checks.topology import check_peer_mesh
from pytest_sits.cli import main
from pytest_sits.conditions.health import submitted_throttle
from pytest_sits.platforms import PlatformError, from_spec
from pytest_sits.platforms.evidence import EvidenceError, EvidencePlatform
from pytest_sits.probes import readers
from pytest_sits.probes.readers import amd_smi, classify, lspci_pp, lspci_tv, nvidia_smi_q, nvidia_smi_topo, rocm_smi
from pytest_sits.probes.readers.amd_common import AmdTextError
from pytest_sits.probes.readers.text import TextEvidenceError
from pytest_sits.probes.submitted import read_evidence
from pytest_sits.profiles import resolve
from pytest_sits.report.replay import replay_report
from pytest_sits.verdict import FAIL, INCONCLUSIVE, PASS, SKIP, WARN

DATA = Path(__file__).resolve().parent / "data"


def base_th(rid, **override):
    """The thresholds a resolved profile gives requirement ``rid`` (the base profile's defaults), with ``override``."""
    return dict(resolve("base").thresholds(rid), **override)

H100 = ("nvidia-smi-q-h100-570.txt", "nvidia-smi-topo-hgx-h100-nic12.txt", "lspci-tv-hgx-h100-nvswitch.txt")


def folder(tmp_path: Path, *names: str) -> Path:
    d = tmp_path / "evidence"
    d.mkdir(exist_ok=True)
    for n in names:
        shutil.copyfile(DATA / n, d / n)
    return d


def by(verdicts, req):
    return {v["subject"]: v for v in verdicts if v["requirement"] == req}


# ---- each file's kind, from its content ----------------------------------------------------------------------

@pytest.mark.parametrize("name, kind", [
    ("nvidia-smi-q-h100-570.txt", "nvidia-smi-q"), ("nvidia-smi-q-a100-525.txt", "nvidia-smi-q"),
    ("nvidia-smi-q-a100-470-i0-crlf.txt", "nvidia-smi-q"), ("nvidia-smi-q-clock-reasons-snippet.txt", "nvidia-smi-q"),
    ("nvidia-smi-q-x-a100-535.xml", "nvidia-smi-q-xml"), ("nvidia-smi-topo-hgx-h100-nic12.txt", "nvidia-smi-topo"),
    ("nvidia-smi-topo-cut-columns.txt", "nvidia-smi-topo"), ("nvidia-smi-topo-old-mlx-soc.txt", "nvidia-smi-topo"),
    ("lspci-tv-hgx-h100-nvswitch.txt", "lspci-tv"), ("lspci-tv-cut-top-elided.txt", "lspci-tv"),
    ("lspci-tv-tabs.txt", "lspci-tv"), ("lspci-vv-hgx-h100-x8.txt", "lspci-vv"), ("lspci-vvv-nvme-only.txt", "lspci-vv"),
    ("lspci-pp-mi300x.txt", "lspci-pp"), ("rocm-smi-showtopo-mi300x.txt", "rocm-smi"),
    ("amd-smi-static-mi300x.txt", "amd-smi"), ("amd-smi-metric-mi300x.json", "amd-smi"),
    ("kernel-log-xid-aer.txt", "kernel-log"),
])
def test_each_kind_is_told_from_its_content(name, kind):
    got, why = classify((DATA / name).read_text(encoding="utf-8"))
    assert got == kind, why


@pytest.mark.parametrize("text, looks", [
    ("Architecture:            x86_64\n  CPU op-mode(s):        32-bit, 64-bit\n", "`lscpu` output"),
    ("+-----+\n| NVIDIA-SMI 550.54.15    Driver Version: 550.54.15    CUDA Version: 12.4 |\n",
     "the nvidia-smi summary table"),
    ('{"schema": "pytest-sits/report", "verdicts": []}', "a pytest-sits report"),
    ("available: 2 nodes (0-1)\nnode 0 cpus: 0 1\n", "`numactl -H` output"),
    ("\x00\x01ELF", "a binary file"),
    ("<?xml version='1.0'?><rss/>", "not `nvidia-smi -q -x` output"),
    ("", "an empty file"),
])
def test_a_file_of_another_tool_is_named_not_read(text, looks):
    kind, why = classify(text)
    assert kind is None and looks in why


# ---- the registry of readers ---------------------------------------------------------------------------------

def test_every_kind_has_one_reader_and_one_option():
    kinds = [k for r in readers.READERS for k in r.kinds]
    assert len(kinds) == len(set(kinds)) and set(kinds) == set(readers.KINDS)
    options = [r.option for r in readers.READERS if r.option]
    assert len(options) == len(set(options))
    assert all(r.steps and readers.reader_of(r.kind) is r for r in readers.READERS)
    assert readers.same_tool("nvidia-smi-q", "nvidia-smi-q-xml") and not readers.same_tool("amd-smi", "rocm-smi")
    steps = [s for s, _ in readers.merge_steps()]
    assert steps == sorted(steps) and readers.reader_of("snapshot") is None


def test_a_new_reader_is_one_module_the_registry_finds():
    """Every module of the readers package with a READER is in the registry, in the order its reader states;
    no other module is (helpers: base, text, pci, amd_common, vendor_smi)."""
    import importlib
    import pkgutil

    modules = {info.name for info in pkgutil.iter_modules(readers.__path__)}
    with_reader = {m for m in modules if hasattr(importlib.import_module(f"{readers.__name__}.{m}"), "READER")}
    assert {type(r).__module__.rsplit(".", 1)[1] for r in readers.READERS} == with_reader
    assert {"nvidia_smi_nvlink", "nvidia_smi_q", "kernel_log"} <= with_reader
    assert modules - with_reader == {"base", "text", "pci", "amd_common", "vendor_smi"}
    orders = [r.order for r in readers.READERS]
    assert orders == sorted(orders) and len(set(orders)) == len(orders)


def test_folder_reading_is_confined(tmp_path):
    d = folder(tmp_path, "kernel-log-xid-aer.txt")
    (d / "outside").symlink_to("/etc/hostname")
    (d / ".hidden").write_text("x")
    os.mkfifo(d / "fifo")
    deep = d.joinpath(*"abcdefghijk")  # eleven folders: past MAX_DEPTH (10; a submission tree is 8 deep)
    deep.mkdir(parents=True)
    (deep / "q.txt").write_text("x")
    ev = read_evidence(d)
    assert [f["name"] for f in ev["files"]] == ["kernel-log-xid-aer.txt"]
    why = {s["name"]: s["why"] for s in ev["skipped"]}
    assert "links are not followed" in why["outside"] and "hidden" in why[".hidden"]
    assert "not a regular file" in why["fifo"] and "folders deep" in why["a/b/c/d/e/f/g/h/i/j/k"]


def test_a_hard_link_to_a_file_outside_is_refused_and_never_read(tmp_path):
    """A hard link is another name of a file that may live anywhere on the file system: refused in a folder and
    when named alone, its content never quoted."""
    secret = tmp_path / "secret.txt"
    secret.write_text("CANARY-7a1e\n")
    d = folder(tmp_path, "kernel-log-xid-aer.txt")
    os.link(secret, d / "dmesg.txt")
    ev = read_evidence(d)
    assert [f["name"] for f in ev["files"]] == ["kernel-log-xid-aer.txt"]
    why = {s["name"]: s["why"] for s in ev["skipped"]}
    assert "a hard link (2 names for one file)" in why["dmesg.txt"] and "copy the file" in why["dmesg.txt"]
    [alone] = read_evidence(d / "dmesg.txt")["files"]
    assert alone["status"] == "refused" and "a hard link" in alone["why"] and "CANARY" not in json.dumps(alone)


def test_nothing_readable_is_refused_naming_each_file(tmp_path):
    d = tmp_path / "e"
    d.mkdir()
    (d / "cpu.txt").write_text("Architecture:            x86_64\n  CPU op-mode(s):        32-bit\n")
    (d / "blob.bin").write_bytes(b"\x00" * 64)
    with pytest.raises(EvidenceError) as exc:
        EvidencePlatform(d)
    text = str(exc.value)
    assert "no submitted file could be read" in text and "cpu.txt: not read: it looks like `lscpu` output" in text
    assert "blob.bin" in text and "fix: submit the unedited output" in text
    with pytest.raises(PlatformError, match="no such file or folder"):
        from_spec(f"evidence:{tmp_path / 'none'}")
    with pytest.raises(PlatformError, match="names no folder"):
        from_spec("evidence:")


# ---- nvidia-smi -q: XML, CRLF and tabs, cut, headerless --------------------------------------------------------

def test_xml_is_read_into_the_facts_the_text_gives():
    facts = nvidia_smi_q.parse((DATA / "nvidia-smi-q-x-a100-535.xml").read_text())
    assert facts["source"] == "nvidia-smi -q -x (XML)" and facts["driver_version"] == "535.183.01"
    assert facts["cuda_driver_version"] == "12.2" and facts["attached_gpus"] == 2 and facts["complete"]
    hot, idle = facts["devices"]
    assert hot["pci_bus_id"] == "0000:61:00.0" and hot["pci_id"] == "10de:20b5" and hot["utilization_gpu_percent"] == 96
    assert hot["clock_event_reasons"] == 0x8 | 0x40 and idle["clock_event_reasons"] == 0x1
    assert (hot["pcie_gpu_max_gen"], hot["pcie_host_max_gen"], hot["pcie_current_width"]) == (4, 4, 16)
    assert idle["remapped_rows"] == {"correctable": 1, "uncorrectable": 0, "pending": True, "failure": False}
    assert hot["power_limit_enforced_mw"] == 300000 and hot["memory_total_bytes"] == 81920 << 20
    assert hot["ecc_aggregate_corrected"] == 9 and hot["inforom_image_version"] == "G262.0220.00.01"


def test_xml_entities_are_refused_and_a_cut_document_keeps_what_was_read():
    bomb = ('<?xml version="1.0"?>\n<!DOCTYPE nvidia_smi_log [<!ENTITY a "aaaaaaaaaa">]>\n'
            "<nvidia_smi_log><driver_version>&a;</driver_version></nvidia_smi_log>")
    with pytest.raises(nvidia_smi_q.NvsmiTextError, match="declares its own entities"):
        nvidia_smi_q.parse(bomb)
    text = (DATA / "nvidia-smi-q-x-a100-535.xml").read_text()
    cut = text[:text.index("<gpu id=\"00000000:E1:00.0\">") + 300]
    facts = nvidia_smi_q.parse(cut)
    assert len(facts["devices"]) == 2 and facts["devices"][0]["clock_event_reasons"] == 0x48
    assert facts["cuts"] and "stops being well-formed" in facts["cuts"][0]["text"]


def test_crlf_tabs_elisions_and_a_declared_count_the_text_does_not_cover():
    facts = nvidia_smi_q.parse((DATA / "nvidia-smi-q-a100-470-i0-crlf.txt").read_bytes().decode())
    (dev,) = facts["devices"]
    assert dev["pci_bus_id"] == "0000:07:00.0" and dev["pci_id"] == "10de:20b2" and dev["persistence_mode"] is False
    assert dev["clock_reasons_section"] == "Clocks Throttle Reasons" and dev["power_limit_enforced_mw"] == 400000
    assert facts["attached_gpus"] == 4 and not facts["complete"] and [c["line"] for c in facts["cuts"]] == [9, 62]


def test_a_headerless_dedented_block_is_one_gpu_and_names_what_is_not_shown():
    facts = nvidia_smi_q.parse((DATA / "nvidia-smi-q-clock-reasons-snippet.txt").read_text())
    (dev,) = facts["devices"]
    assert facts["headerless"] and dev["pci_bus_id"] is None
    assert dev["clock_event_reasons"] == 0x8 | 0x40 | 0x20
    assert dev["clock_reasons_not_shown"] == ["HW Power Brake Slowdown", "Sync Boost"] or \
        "Display Clock Setting" not in dev["clock_reasons_not_shown"]


# ---- topo -m cut by the terminal, lspci cut and elided, -PP, AMD texts, kernel logs -----------------------------

def test_topo_with_cut_columns_reads_the_nic_rows_beyond_the_header():
    mesh = nvidia_smi_topo.parse_nvidia_smi_topo((DATA / "nvidia-smi-topo-cut-columns.txt").read_text())
    assert [d["bdf"] for d in mesh["devices"]] == ["GPU0", "GPU1", "GPU2", "GPU3"]
    assert mesh["pcie_cells"]["GPU2"]["NIC4"] == "PIX" and mesh["pcie_cells"]["GPU3"]["NIC7"] == "PIX"
    assert any("column NIC7 is not in the header (cut)" in c["what"] for c in mesh["cuts"])
    paths = {p["device"]: p for p in nvidia_smi_topo.topo_pcie_paths(mesh)}
    assert all("PIX to NIC" in paths[g]["hops"][0]["bdf"] for g in paths)  # every GPU shares a switch with a NIC


def test_lspci_tv_cut_at_the_top_and_elided_is_read_and_the_cuts_named():
    tree = lspci_tv.read_lspci_tv((DATA / "lspci-tv-cut-top-elided.txt").read_text())
    paths = {p["device"]: p for p in tree["accelerators"]}
    assert [h["port_type"] for h in paths["0000:43:00.0"]["hops"]] == ["switch_port_inferred",
                                                                      "switch_port_inferred", "root_port"]
    assert [h["bdf"] for h in paths["0000:47:00.0"]["hops"]] == ["0000:40:03.1"]  # after the elided line
    orphan = paths["0000:??:00.0"]
    assert orphan["hops"][-1]["port_type"] == "unknown" and "cut" in orphan["note"]
    whats = " ".join(c["what"] for c in tree["cuts"])
    assert "starts below its top" in whats and "branch elided" in whats and "not in the text" in whats


def test_lspci_pp_paths():
    pp = lspci_pp.read_lspci_pp((DATA / "lspci-pp-mi300x.txt").read_text())
    hops = {p["device"]: [h["bdf"] for h in p["hops"]] for p in pp["accelerators"]}
    assert hops["0000:03:00.0"] == ["0000:02:00.0", "0000:01:00.0", "0000:00:01.1"]
    assert hops["0000:61:00.0"] == ["0000:60:03.1"] and {p["pci_id"] for p in pp["accelerators"]} == {"1002:74a1"}
    with pytest.raises(TextEvidenceError, match="not `lspci -PP` output"):
        lspci_pp.read_lspci_pp("hello\n")


def test_rocm_smi_showtopo_gives_the_xgmi_mesh_and_numa_nodes():
    r = rocm_smi.parse_rocm_smi((DATA / "rocm-smi-showtopo-mi300x.txt").read_text())
    assert [d["numa_node"] for d in r["devices"]] == [0, 0, 1, 1]
    mesh = r["mesh"]
    assert mesh["p2p_nvlink"][2][3] is False and mesh["p2p_nvlink"][0][1] is True and mesh["link_name"] == "XGMI"
    v = check_peer_mesh({"mesh": mesh, "expected_devices": 4}, {"required": True})
    assert v.status == FAIL and "GPU2<->GPU3" in v.reason and "XGMI" in v.reason
    mesh["p2p_nvlink"][2][3] = mesh["p2p_nvlink"][3][2] = True
    assert check_peer_mesh({"mesh": mesh, "expected_devices": 4}, {"required": True}).status == PASS


def test_amd_smi_text_and_json():
    st = amd_smi.parse_amd_smi((DATA / "amd-smi-static-mi300x.txt").read_text(encoding="utf-8"))
    d1 = st["devices"][1]
    assert d1["pci_bus_id"] == "0000:23:00.0" and d1["pci_id"] == "1002:74a1" and d1["name"] == "AMD Instinct MI300X"
    assert d1["power_limit_enforced_mw"] == 600000 and d1["power_limit_constraints_mw"] == [0, 750000]
    assert d1["memory_total_bytes"] == 196592 << 20 and d1["ecc_mode_current"] is True and d1["numa_node"] == 0
    assert d1["vbios_version"] == "022.040.003.043.000001" and st["driver_version"] == "6.8.5"
    me = amd_smi.parse_amd_smi((DATA / "amd-smi-metric-mi300x.json").read_text())
    assert me["format"] == "json" and me["devices"][2]["ecc_volatile_uncorrected"] == 2
    assert me["devices"][3]["pcie_current_width"] == 8 and me["devices"][0]["utilization_gpu_percent"] == 0
    with pytest.raises(AmdTextError, match="not valid JSON"):
        amd_smi.parse_amd_smi('[{"gpu": 0, "asic": ')


def test_kernel_log_lines():
    ev = read_evidence(DATA / "kernel-log-xid-aer.txt")
    facts = ev["files"][0]["facts"]
    assert {(x["bdf_prefix"], x["xid"]) for x in facts["xids"]} == {("0000:2a:00", 13), ("0000:4c:00", 79)}
    sev = {(a["device"], a["severity"]) for a in facts["aer"]}
    assert ("0000:19:00.0", "correctable") in sev and ("0000:9b:00.0", "fatal") in sev
    assert {d["bdf"]: d["pci_id"] for d in facts["devices"]} == {
        "0000:19:00.0": "10de:2330", "0000:2a:00.0": None, "0000:4c:00.0": None, "0000:9b:00.0": "10de:2330"}


# ---- one machine from several files ----------------------------------------------------------------------------

def test_the_h100_folder_is_one_machine(tmp_path):
    plat = EvidencePlatform(folder(tmp_path, *H100, "kernel-log-xid-aer.txt"))
    inv = plat.inventory()
    accs = inv["accelerators"]
    assert [a["bdf"] for a in accs] == ["0000:19:00.0", "0000:2a:00.0", "0000:3b:00.0", "0000:4c:00.0",
                                        "0000:9b:00.0", "0000:ac:00.0", "0000:bd:00.0", "0000:ce:00.0"]
    assert {a["pci_id"] for a in accs} == {"10de:2330"} and all(a["management"] for a in accs)
    sub = inv["submitted"]
    assert sub["mesh"]["index_to_bdf"]["0"] == "0000:19:00.0" and "bus order" in sub["mesh"]["mapping_rule"]
    assert sub["paths"]["0000:19:00.0"]["hops"][-1]["port_type"] == "root_port"  # from lspci -tv, not topo -m
    assert [a["numa_node"] for a in accs] == [0, 0, 0, 0, 1, 1, 1, 1] and len(inv["numa"]) == 2
    assert inv["management"]["nvml"]["driver_version"] == "570.124.06" and sub["kernel_log"]["records"] == 14
    assert plat.root is None and plat.kind == "evidence" and "4 files read" in plat.label
    from pytest_sits.conditions.loads import LoadUnavailable

    with pytest.raises(LoadUnavailable, match="no machine to load"):
        plat.accelerator_load(accs[0])


def test_the_amd_folder_is_one_machine_judged_on_xgmi_ecc_power_and_firmware(tmp_path):
    """amd-smi static (text) and metric (--json), rocm-smi --showtopo and lspci -PP of one MI300X host: indices
    matched to PCI addresses, each rule failing where the texts show a fault and passing elsewhere."""
    from pytest_sits.checks.health import check_powercap
    from pytest_sits.checks.security import check_firmware
    from pytest_sits.conditions.health import acquire_ecc, acquire_persistence, acquire_powercap
    from pytest_sits.conditions.security import acquire_firmware
    from pytest_sits.conditions.topology import acquire_peer_mesh

    d = folder(tmp_path, "amd-smi-static-mi300x.txt", "amd-smi-metric-mi300x.json", "rocm-smi-showtopo-mi300x.txt",
               "lspci-pp-mi300x.txt")
    inv = EvidencePlatform(d).inventory()
    accs = {a["bdf"]: a for a in inv["accelerators"]}
    assert list(accs) == ["0000:03:00.0", "0000:23:00.0", "0000:43:00.0", "0000:61:00.0"]
    assert [a["numa_node"] for a in accs.values()] == [0, 0, 1, 1]
    th = base_th("DEP-POWERCAP", tdp_w=750, tolerance=0.03)
    assert check_powercap(acquire_powercap(inv, accs["0000:23:00.0"]), th, "0000:23:00.0").status == FAIL
    assert check_powercap(acquire_powercap(inv, accs["0000:03:00.0"]), th, "0000:03:00.0").status == PASS
    eth = base_th("DEP-ECC", require_enabled=True, max_volatile_uncorrected=0)
    assert check_ecc(acquire_ecc(inv, accs["0000:43:00.0"]), eth, "x").status == FAIL
    assert check_ecc(acquire_ecc(inv, accs["0000:03:00.0"]), eth, "x").status == PASS
    mesh = acquire_peer_mesh(inv, {"pci_ids": ["1002:74a1"]})
    v = check_peer_mesh(mesh, {"required": True})
    assert v.status == FAIL and "0000:43:00.0<->0000:61:00.0" in v.reason
    fw = acquire_firmware(inv, accs["0000:03:00.0"], None)
    assert fw["versions"]["vbios"] == "022.040.003.043.000001" and fw["versions"]["driver"] == "6.8.5"
    allowed = base_th("SEC-FIRMWARE", allowed={"vbios": [{"min": "022.040.003.043.000001", "reason": "OEM 2024 release"}]})
    assert check_firmware(fw, allowed, "x").status == PASS
    assert check_firmware(fw, base_th("SEC-FIRMWARE", allowed={"vbios": [{"version": "022.040.003.042.000000",
                                                                          "reason": "old"}]}), "x").status == FAIL
    assert "NVIDIA driver setting" in acquire_persistence(inv, accs["0000:03:00.0"])["absent"]


def test_two_files_of_different_machines_are_refused(tmp_path):
    d = folder(tmp_path, "nvidia-smi-q-h100-570.txt")
    other = (DATA / "nvidia-smi-q-h100-570.txt").read_text().replace("570.124.06", "550.54.15")
    (d / "later.txt").write_text(other)
    with pytest.raises(PlatformError, match="disagree on driver version .*different machines"):
        EvidencePlatform(d).inventory()


def test_a_snapshot_among_the_texts_is_the_machine_and_the_texts_add_to_it(tmp_path):
    from pytest_sits.conditions.security import acquire_tee
    from pytest_sits.conditions.topology import acquire_link_under_load, acquire_pcie_path, acquire_peer_mesh
    from pytest_sits.platforms.snapshot import capture

    sim = from_spec("sim:h100+switch")
    d = tmp_path / "ev"
    d.mkdir()
    capture(d / "snap", root=sim.root, nvml=sim.nvml())
    shutil.copyfile(DATA / "kernel-log-xid-aer.txt", d / "dmesg.txt")
    plat = EvidencePlatform(d)
    inv = plat.inventory()
    kinds = {f["name"]: f["kind"] for f in inv["submitted"]["files"]}
    assert kinds == {"dmesg.txt": "kernel-log", "snap": "snapshot"}
    assert [a["bdf"] for a in inv["accelerators"]] == [a["bdf"] for a in sim.inventory()["accelerators"]]
    assert inv["numa"] == sim.inventory()["numa"] and plat.root == plat.snapshot.root
    acc = inv["accelerators"][0]
    path = acquire_pcie_path(inv, acc)["path"]
    assert [h["port_type"] for h in path["hops"]] == ["switch_downstream", "switch_upstream", "root_port"]
    link = acquire_link_under_load(plat, inv, acc, 1)
    assert link["samples"][0]["speed_gts"] and not link["samples"][0]["under_load"]
    assert acquire_peer_mesh(inv, {"pci_ids": ["10de:2330"]})["mesh"]["p2p_nvlink"]
    assert "unavailable" not in acquire_tee(plat.root, inv)  # the snapshot's kernel files are read
    assert inv["submitted"]["kernel_log"]["records"] == 14
    alone = EvidencePlatform(d / "snap")  # the snapshot folder itself
    assert [f["kind"] for f in alone.evidence["files"]] == ["snapshot"]
    (d / "snap" / "manifest.json").write_text('{"format": "sits-snapshot/1"}')
    os.rename(d / "snap" / "fs", d / "snap" / "fs-moved")
    assert [f["kind"] for f in EvidencePlatform(d).evidence["files"] if f["status"] == "read"] == ["kernel-log"]


# ---- the rules on text evidence: each fails on bad evidence and passes on good ---------------------------------

EXPECT8 = {"expected": {"count": 8, "pci_ids": ["10de:2330"], "model": "H100 SXM5", "memory_gb": 80,
                        "describe": "8 × H100 SXM5 (10de:2330)", "vendor": "NVIDIA"}, "memory_tolerance": 0.1}


def _accs(n, pci_id="10de:2330", mem=85520809984):
    return [{"bdf": f"0000:{0x19 + i:02x}:00.0", "pci_id": pci_id, "name": "NVIDIA H100 80GB HBM3",
             "display_name": "NVIDIA H100 80GB HBM3", "memory_total_bytes": mem} for i in range(n)]


def _cov(declared=None, listing=None):
    return {"declared": {"nvidia": {"count": declared, "source": f"'Attached GPUs : {declared}' in q.txt"}}
            if declared is not None else {}, "listing": listing, "files": ["q.txt"], "unknown_models": []}


@pytest.mark.parametrize("accs, cov, status, words", [
    (_accs(8), _cov(8), PASS, "8 × H100 SXM5 by the texts' PCI IDs"),
    (_accs(8, "10de:2335"), _cov(8), FAIL, "the texts name 8 × NVIDIA H100 80GB HBM3 (10de:2335)"),
    (_accs(1), _cov(8), INCONCLUSIVE, "nothing is known of the other 7"),
    (_accs(4), _cov(4), FAIL, "the machine has 4 accelerator(s)"),
    (_accs(3), _cov(None, None), INCONCLUSIVE, "none of them says how many the machine has"),
    (_accs(8, mem=40 << 30), _cov(8), FAIL, "less memory than the profile's 80 GB"),
    (_accs(8, mem=None), _cov(8), INCONCLUSIVE, "memory not in the texts"),
])
def test_inv_devices_on_texts(accs, cov, status, words):
    v = check_devices({"accelerators": accs, "nvml": {}, "coverage": cov}, EXPECT8)
    assert v.status == status and words in v.reason, v.reason


@pytest.mark.slow
def test_an_h100_text_judged_with_the_h200_profile_fails(tmp_path, capsys):
    d = folder(tmp_path, "nvidia-smi-q-h100-570.txt")
    rc = main(["audit", str(d), "--profile", "h200", "--json", str(tmp_path / "v.json")])
    assert rc == 10
    inv = by(json.loads((tmp_path / "v.json").read_text()), "INV-DEVICES")["accelerators"]
    assert inv["status"] == FAIL and "10de:2330" in inv["reason"] and "H200" in inv["reason"]
    capsys.readouterr()


def _reading(mask, util, not_shown=()):
    return {"device": "0000:bd:00.0", "samples": [{"t": 0.0, "reasons": mask, "under_load": util >= 50}],
            "load": {"kind": "submitted reading"} if util >= 50 else {"kind": None, "reason": "one reading at 0%"},
            "reasons_not_shown": list(not_shown), "errors": []}


@pytest.mark.parametrize("mask, util, not_shown, status, words", [
    (0x8 | 0x80, 97, (), FAIL, "hw_power_brake_slowdown"),
    (0x0, 97, (), PASS, "active: none"),
    (0x4, 99, (), PASS, "sw_power_cap 100%"),
    (0x4, 0, (), INCONCLUSIVE, "sw_power_cap"),
    (0x8 | 0x40, 0, (), FAIL, "hw_thermal_slowdown active without load"),
    (0x8 | 0x80, 0, (), FAIL, "hw_power_brake_slowdown active without load"),
    (0x20, 0, (), INCONCLUSIVE, "sw_thermal_slowdown active even without load"),
    (0x0, 97, ("SW Thermal Slowdown",), INCONCLUSIVE, "does not show SW Thermal Slowdown"),
])
def test_dep_throttle_on_one_submitted_reading(mask, util, not_shown, status, words):
    v = check_throttle(_reading(mask, util, not_shown), base_th("DEP-THROTTLE", max_fault_share=0.0))
    assert v.status == status and words in v.reason, v.reason


def test_an_idle_reading_with_only_gpu_idle_is_not_measured():
    inv = EvidencePlatform(DATA / "nvidia-smi-q-h100-570.txt").inventory()
    acc = inv["accelerators"][0]
    ev = submitted_throttle(inv, acc)
    assert "only GPU-idle is active" in ev["unavailable"]
    v = check_throttle(ev, base_th("DEP-THROTTLE"))
    assert v.status == SKIP and v.reason.startswith("not measured:")


def test_dep_xid_from_a_submitted_log():
    period = "in the submitted kernel log (k.txt, 14 lines)"
    base = {"history": {"readable": False}, "watch": {"source": "submitted kernel log (k.txt)", "period": period}}
    th = base_th("DEP-XID", critical_xids=[79], max_critical_events=0)
    fail = check_xid(dict(base, watch=dict(base["watch"], events=[{"xid": 79, "line": "NVRM: Xid ...: 79"}])), th)
    assert fail.status == FAIL and period in fail.reason and "fell off the bus" in fail.remediation
    ok = check_xid(dict(base, watch=dict(base["watch"], events=[])), th)
    assert ok.status == PASS and period in ok.reason and "unreadable" not in ok.reason
    app = check_xid(dict(base, watch=dict(base["watch"], events=[{"xid": 13}])), th)
    assert app.status == WARN


def test_dep_pcie_errors_from_a_submitted_log():
    th = base_th("DEP-PCIE-ERRORS", max_new_fatal=0, max_new_nonfatal=0, max_new_correctable=None)
    log = {"files": ["k.txt"], "records": 14, "lines": ["... Uncorrected (Fatal) ..."]}
    bad = check_pcie_errors({"aer_log": dict(log, counts={"fatal": 1, "nonfatal": 0, "correctable": 0})}, th,
                            "0000:9b:00.0")
    assert bad.status == FAIL and "fatal 1 > 0" in bad.reason
    ok = check_pcie_errors({"aer_log": dict(log, counts={"fatal": 0, "nonfatal": 0, "correctable": 3}),
                            "replay_reading": 7}, th, "0000:19:00.0")
    assert ok.status == PASS and "correctable 3" in ok.reason and "replay counter 7" in ok.reason


def test_dep_ecc_counts_over_the_limit_fail_even_with_the_mode_unread():
    th = base_th("DEP-ECC", require_enabled=True, max_volatile_uncorrected=0)
    counts = {"volatile_uncorrected": 1, "aggregate_uncorrected": 5, "volatile_corrected": 0, "aggregate_corrected": 0}
    v = check_ecc({"ecc_mode_current": None, "counts": counts, "errors": []}, th)
    assert v.status == FAIL and "volatile uncorrected 1 > 0" in v.reason
    v = check_ecc({"ecc_mode_current": None, "counts": dict(counts, volatile_uncorrected=0), "errors": []}, th)
    assert v.status == INCONCLUSIVE


def test_peer_mesh_pairs_read_in_neither_direction_are_unknown_not_missing():
    mesh = {"source": "text", "devices": [{"bdf": f"GPU{i}", "links_active": 1} for i in range(3)],
            "p2p_nvlink": [[None, True, None], [True, None, True], [None, True, None]],
            "index_to_bdf": {"0": "GPU0", "1": "GPU1", "2": "GPU2"}}
    v = check_peer_mesh({"mesh": mesh, "expected_devices": 3}, {"required": True})
    assert v.status == INCONCLUSIVE and "GPU0<->GPU2" in v.reason
    mesh["p2p_nvlink"][0][2] = False
    assert check_peer_mesh({"mesh": mesh, "expected_devices": 3}, {"required": True}).status == FAIL


# ---- the whole run -------------------------------------------------------------------------------------------

def test_pytest_on_an_h100_folder_writes_a_full_report_whose_scope_names_the_gaps_and_replays(
        pytester, conformance_args, tmp_path):
    d = folder(tmp_path, *H100)
    pytester.runpytest(*conformance_args, f"--sits-platform=evidence:{d}", "--sits-profile=h100")
    report = json.loads((pytester.path / "sits-report" / "sits-report.json").read_text())
    assert report["platform"]["kind"] == "evidence" and (pytester.path / "sits-report" / "sits-report.html").is_file()
    scope = report["summary"]["scope"]
    assert {"TOPO-NUMA-BIND", "SEC-TEE", "DEP-PCIE-ERRORS", "DEP-XID"} <= set(scope["not_measured"])
    assert {"INV-DEVICES", "TOPO-PCIE-DIRECT", "TOPO-PCIE-LINK", "LINK-NVLINK-MESH", "DEP-DRIVER", "DEP-ECC",
            "DEP-THROTTLE", "DEP-POWERCAP", "MEM-CAPACITY"} <= set(scope["decided"])
    assert report["summary"]["result"] == "NON_CONFORMANT"  # the GPUs sit behind PEX switches, one brakes
    wrong = {v["requirement"] for v in report["verdicts"] if v["status"] in {PASS, FAIL, "WARN", "INCONCLUSIVE"}
             and not CATALOGUE[v["requirement"]].decides_on("evidence")}
    assert wrong == set(), f"decided from texts, but their declarations do not name the evidence platform: {wrong}"
    v = report["verdicts"]
    assert {s["status"] for s in by(v, "TOPO-PCIE-DIRECT").values()} == {FAIL}
    assert by(v, "DEP-THROTTLE")["0000:bd:00.0"]["status"] == FAIL
    assert by(v, "DEP-THROTTLE")["0000:19:00.0"]["status"] == SKIP
    assert by(v, "LINK-NVLINK-MESH")["accelerators"]["status"] == PASS
    out = replay_report(report)
    assert out["differs"] == [] and out["not_replayable"] == [] and out["replayed"] == out["total"] > 60
    rc = main(["replay", str(pytester.path / "sits-report" / "sits-report.json")])
    assert rc == 0
    from pytest_sits.report.model import validate

    assert validate(report) == []


def test_pytest_on_texts_alone_is_partial_at_best(pytester, conformance_args, tmp_path):
    d = folder(tmp_path, "nvidia-smi-q-h100-570.txt")
    text = (d / "nvidia-smi-q-h100-570.txt").read_text()
    healthy = re.sub(r"(HW (?:Power Brake )?Slowdown\s*): Active", r"\1: Not Active", text)
    assert healthy != text
    (d / "nvidia-smi-q-h100-570.txt").write_text(healthy)
    pytester.runpytest(*conformance_args, f"--sits-platform=evidence:{d}", "--sits-profile=h100")
    summary = json.loads((pytester.path / "sits-report" / "sits-report.json").read_text())["summary"]
    assert summary["result"] == "PARTIAL" and "platform evidence" in summary["result_reason"]
    assert "not measured here" in summary["result_reason"]


def test_bundle_of_an_evidence_run_carries_the_texts_and_verifies(pytester, conformance_args, tmp_path, capsys):
    pytest.importorskip("cryptography")
    from pytest_sits.commands import bundle

    d = folder(tmp_path, *H100)
    pytester.runpytest(*conformance_args, f"--sits-platform=evidence:{d}", "--sits-profile=h100")
    key, pub = bundle.keygen(str(tmp_path / "signer"))
    out = tmp_path / "b.tar.gz"
    assert main(["bundle", "create", str(pytester.path / "sits-report"), "-o", str(out), "--key", str(key),
                 "--snapshot", str(d)]) == 0
    capsys.readouterr()
    assert main(["verify", str(out), "--pubkey", str(pub)]) == 0
    assert "verified" in capsys.readouterr().out


@pytest.mark.slow
def test_sits_audit_of_a_text_with_no_accelerator_is_undecided_with_json(tmp_path, capsys):
    out = tmp_path / "v.json"
    rc = main(["audit", str(DATA / "lspci-vvv-nvme-only.txt"), "--json", str(out)])
    text = capsys.readouterr().out
    assert rc == 11 and "no accelerator in the submitted texts" in text  # every verdict SKIP: nothing decided
    verdicts = json.loads(out.read_text())
    assert verdicts and all(v["status"] == SKIP for v in verdicts)
    inv = by(verdicts, "INV-DEVICES")["accelerators"]
    assert "not measured" in inv["reason"] and "lists every device" in inv["reason"]


@pytest.mark.slow
def test_sits_audit_under_load_declaration_and_the_report_folder(tmp_path, capsys):
    d = folder(tmp_path, "lspci-vv-hgx-h100-x8.txt", "lspci-tv-hgx-h100-nvswitch.txt")
    rc = main(["audit", str(d), "--profile", "h100", "--under-load", "--each", "--report-dir",
               str(tmp_path / "r")])
    text = capsys.readouterr().out
    assert rc == 10 and "TOPO-PCIE-LINK     0000:19:00.0   FAIL" in text and "under load as declared" in text
    report = json.loads((tmp_path / "r" / "sits-report.json").read_text())
    (v,) = [x for x in report["verdicts"] if x["requirement"] == "TOPO-PCIE-LINK" and x["subject"] == "0000:19:00.0"]
    assert v["evidence"]["load"]["declared"] and not v["evidence"]["load"]["observed"]
    assert from_spec(f"evidence:{d}+under-load").under_load


@pytest.mark.slow
def test_sits_audit_names_refused_files_beside_the_read_ones(tmp_path, capsys):
    d = folder(tmp_path, "nvidia-smi-q-a100-525.txt")
    (d / "notes.txt").write_text("available: 2 nodes (0-1)\nnode 0 cpus: 0 1\n")
    main(["audit", str(d), "--profile", "a100"])
    out = capsys.readouterr().out
    assert "read:     nvidia-smi-q-a100-525.txt (nvidia-smi -q)" in out
    assert "refused:  notes.txt: not read: it looks like `numactl -H` output" in out


@pytest.mark.slow
def test_the_suite_runs_in_a_clean_subprocess_whatever_the_current_folder(tmp_path, capsys, monkeypatch):
    """A pytest.ini with addopts in the current folder must not change the audit (it runs its own pytest)."""
    (tmp_path / "pytest.ini").write_text("[pytest]\naddopts = --sits-level=full -x\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SITS_PROFILE", "l40s")
    rc = main(["audit", str(DATA / "nvidia-smi-q-h100-570.txt"), "--json", str(tmp_path / "v.json")])
    assert rc == 10  # the braking GPU fails
    text = capsys.readouterr().out
    assert "profile:  h100-sxm5" in text and "THERM-GPU-STEADY" not in text


def test_audit_command_line_is_the_plugin_on_the_evidence_platform():
    from pytest_sits.commands.audit import pytest_command

    cmd = pytest_command("evidence:/x", "h100", "quick", Path("/r"), Path("/t/pytest.ini"))
    assert cmd[:2] == [sys.executable, "-c"] and "console_main" in cmd[2] and "--sits-platform=evidence:/x" in cmd
    assert "--sits-profile=h100" in cmd and "-p" in cmd and "pytest_sits.plugin.hooks" in cmd


@pytest.mark.slow
def test_realdata_benchmark_rules_run_on_a_small_manifest(tmp_path):
    """benchmarks/realdata.py on a folder laid out like realdata/, with a MANIFEST of modelled files."""
    (tmp_path / "q").mkdir()
    shutil.copyfile(DATA / "nvidia-smi-q-x-a100-535.xml", tmp_path / "q" / "a.xml")
    (tmp_path / "MANIFEST.yaml").write_text(
        "files:\n- file: q/a.xml\n  gpu_model: NVIDIA A100 80GB PCIe\n  gpu_count: 2\n  driver: 535.183.01 (CUDA 12.2)\n"
        "  facts:\n    persistence_mode: Enabled\n    remapped_rows: E1:00.0 Correctable 1, Pending Yes\n"
        "    power_limit: 300.00 W\n")
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve().parent.parent / "benchmarks" / "realdata.py"),
                           str(tmp_path), "-v"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "total: 1/1 files agree" in proc.stdout and "0 traceback(s)" in proc.stdout


def test_sits_audit_usage_errors_say_the_fix(tmp_path, capsys):
    assert main(["audit", str(DATA / "nvidia-smi-q-a100-525.txt"), "--profile", "nonexistent"]) == 4
    assert "fix: bundled profiles:" in capsys.readouterr().err
    assert main(["audit", str(tmp_path / "none")]) == 4
    assert "no such file or folder" in capsys.readouterr().err
    (tmp_path / "link").symlink_to(DATA)
    assert main(["audit", str(tmp_path / "link")]) == 4
    assert "not read through links" in capsys.readouterr().err



def _many_gpus(kind: str, n: int) -> str:
    if kind == "topo":
        hdr = "\t".join(f"GPU{i}" for i in range(n)) + "\tCPU Affinity\tNUMA Affinity\n"
        rows = "".join(f"GPU{i}\t" + "\t".join("X" if i == j else "NV18" for j in range(n)) + "\t0-47\t0\n"
                       for i in range(n))
        return "\t" + hdr + rows
    if kind == "q":
        return ("==============NVSMI LOG==============\n\nDriver Version : 550.54.15\nAttached GPUs : "
                f"{n}\n" + "".join(f"GPU 00000000:{i // 8:02X}:{i % 8:02X}.0\n    Product Name : NVIDIA H100 80GB "
                                    "HBM3\n" for i in range(n)))
    return ("==================== ROCm System Management Interface ====================\n"
            + "".join(f"GPU[{i}]\t\t: Device ID: 0x74a1\nGPU[{i}]\t\t: PCI Bus: 0000:{i // 8:02X}:{i % 8:02X}.0\n"
                      for i in range(n))
            + "==================== End of ROCm SMI Log ====================\n")


@pytest.mark.parametrize("kind", ["topo", "q", "rocm"])
def test_a_text_of_more_gpus_than_one_machine_holds_is_refused_in_one_line(tmp_path, kind):
    """Submitted text is one machine's: 1,000 GPUs (a denial of service: 54 s and 840 MB for a topo -m) are
    refused naming the cap, before the devices are parsed; 64 still read."""
    d = tmp_path / "e"
    d.mkdir()
    (d / "big.txt").write_text(_many_gpus(kind, 1000 if kind == "topo" else 200))
    [entry] = read_evidence(d)["files"]
    assert entry["status"] == "refused" and "64" in entry["why"] and "one machine holds" in entry["why"], entry
    assert "fix: submit one machine's output per file" in entry["why"]
    (d / "big.txt").write_text(_many_gpus(kind, 64))
    [entry] = read_evidence(d)["files"]
    assert "one machine holds" not in (entry["why"] or ""), entry["why"]



@pytest.mark.parametrize("bom", [True, False])
def test_a_utf16_capture_says_to_save_it_as_utf8(tmp_path, bom):
    d = tmp_path / "e"
    d.mkdir()
    text = "Driver Version : 550.54.15\nGPU 00000000:11:00.0\n    Product Name : NVIDIA H100 80GB HBM3\n"
    (d / "q.txt").write_bytes(text.encode("utf-16") if bom else text.encode("utf-16-le"))
    [entry] = read_evidence(d)["files"]
    assert entry["status"] == "refused" and "UTF-16" in entry["why"] and "save it as UTF-8" in entry["why"]


@pytest.mark.slow
def test_sits_audit_groups_its_verdicts_as_the_pytest_summary_does(tmp_path, capsys, monkeypatch):
    """One line per requirement (its counts and value), identical findings on several devices as one line naming
    them; `--each` gives one line per subject. An 8-GPU nvidia-smi -q at 120 columns: 105 lines per subject, under
    half of that grouped."""
    monkeypatch.setenv("COLUMNS", "120")
    d = folder(tmp_path, "nvidia-smi-q-h100-570.txt")
    assert main(["audit", str(d), "--profile", "h100"]) == 10
    grouped = capsys.readouterr().out.splitlines()
    assert main(["audit", str(d), "--profile", "h100", "--each"]) == 10
    each = capsys.readouterr().out.splitlines()
    assert len(grouped) * 2 < len(each), (len(grouped), len(each))
    assert sum(1 for ln in grouped if ln.startswith("DEP-ECC ")) == 1
    assert any(ln.startswith("DEP-ECC") and "8 PASS" in ln for ln in grouped)
    assert any("FAIL 0000:bd:00.0: the hardware slowed its clocks" in ln for ln in grouped), grouped
    assert any("8 subjects (0000:19:00.0" in ln for ln in grouped)
    assert sum(1 for ln in each if ln.startswith("DEP-ECC ")) == 8
    assert grouped[-1].startswith("result: NON_CONFORMANT") and each[-1].startswith("result: NON_CONFORMANT")


def test_plain_lspci_nn_gives_each_gpus_pci_id(tmp_path):
    """`lspci -nn` (one line per function, no details) names each function's IDs in its name: the accelerators
    read from it carry their PCI ID, and a profile picks them by it."""
    (tmp_path / "lspci.txt").write_text("".join(
        f"{b}:00.0 3D controller [0302]: NVIDIA Corporation GH100 [H100 SXM5 80GB] [10de:2330] (rev a1)\n"
        for b in ("18", "2a")) + "3b:00.0 Ethernet controller [0200]: Mellanox Technologies MT2910 Family "
                                 "[ConnectX-7] [15b3:1021]\n")
    inv = EvidencePlatform(tmp_path).inventory()
    assert [(a["bdf"], a["pci_id"]) for a in inv["accelerators"]] == [("0000:18:00.0", "10de:2330"),
                                                                      ("0000:2a:00.0", "10de:2330")]
    assert {d["bdf"]: d["pci_id"] for d in inv["pci"]}["0000:3b:00.0"] == "15b3:1021"
