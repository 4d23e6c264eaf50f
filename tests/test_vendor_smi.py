"""Other vendors' tools that look like nvidia-smi, read as those vendors' accelerators: Huawei Ascend `npu-smi info`
and Moore Threads `mthreads-gmi` (texts modelled on their published layouts, values of our own)."""

import json

import pytest

from pytest_sits.cli import main
from pytest_sits.probes.readers import classify, parse_as

NPU = """\
+------------------------------------------------------------------------------------------------+
| npu-smi 24.1.0                   Version: 24.1.0                                               |
+---------------------------+---------------+----------------------------------------------------+
| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|
| Chip                      | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |
+===========================+===============+====================================================+
| 2     910B3               | OK            | 201.5       47                0    / 0             |
| 0                         | 0000:81:00.0  | 12          0    / 0          3100 / 65536         |
+===========================+===============+====================================================+
| 3     910B3               | Warning       | 188.0       49                0    / 0             |
| 0                         | 0000:82:00.0  | 0           0    / 0          2900/ 65536          |
+===========================+===============+====================================================+
+---------------------------+---------------+----------------------------------------------------+
| NPU     Chip              | Process id    | Process name             | Process memory(MB)      |
+===========================+===============+====================================================+
| No running processes found in NPU 2                                                            |
+===========================+===============+====================================================+
"""

MT = """\
Wed Jan  8 09:12:44 2025
---------------------------------------------------------------
    mthreads-gmi:1.14.0          Driver Version:2.0.1
---------------------------------------------------------------
ID   Name           |PCIe                |%GPU  Mem
     Device Type    |Pcie Lane Width     |Temp  MPC Capable
                                         |      ECC Mode
+-------------------------------------------------------------+
0    MTT S4000      |00000000:3B:00.0    |5%    1200MiB(49152MiB)
     Physical       |16x(16x)            |41C   YES
                                         |      Enabled
+-------------------------------------------------------------+
1    MTT S4000      |00000000:3C:00.0    |97%   51000MiB(49152MiB)
     Physical       |8x(16x)             |70C   YES
                                         |      N/A
+-------------------------------------------------------------+
"""


def test_npu_smi_info_is_read_as_huawei_npus():
    kind, why = classify(NPU)
    assert kind == "npu-smi" and "Huawei Ascend" in why
    facts = parse_as(kind, NPU)
    assert facts["vendor"] == "Huawei" and facts["driver_version"] == "24.1.0"
    assert [(d["index"], d["name"], d["pci_bus_id"], d["health"], d["power_w"], d["temperature_c"],
             d["hbm_total_mb"], d["memory_total_bytes"]) for d in facts["devices"]] == [
        (2, "Ascend 910B3", "0000:81:00.0", "OK", 201.5, 47.0, 65536, 65536 * 1024 ** 2),
        (3, "Ascend 910B3", "0000:82:00.0", "Warning", 188.0, 49.0, 65536, 65536 * 1024 ** 2)]
    assert not facts["cuts"]


def test_an_elided_npu_table_is_read_with_its_cut():
    text = NPU.replace("| 3     910B3", "...\n| 3     910B3", 1)
    facts = parse_as("npu-smi", text)
    assert len(facts["devices"]) == 2 and facts["cuts"] and facts["cuts"][0]["line"] == 10


def test_mthreads_gmi_is_read_as_moore_threads_gpus_with_used_above_total_said():
    kind, why = classify(MT)
    assert kind == "mthreads-gmi" and "Moore Threads" in why
    facts = parse_as(kind, MT)
    a, b = facts["devices"]
    assert (a["name"], a["pci_bus_id"], a["memory_total_bytes"], a["ecc_mode"], a["pcie_current_width"],
            a["temperature_c"]) == ("MTT S4000", "0000:3b:00.0", 49152 * 1024 ** 2, "Enabled", 16, 41.0)
    assert (b["pcie_current_width"], b["pcie_max_width"], b["ecc_mode"]) == (8, 16, "N/A")
    assert not a["notes"] and "memory used 51000 MiB exceeds the total shown, 49152 MiB" in b["notes"][0]


@pytest.mark.parametrize("text,what", [("| npu-smi 24.1.0   Version: 24.1.0 |\n| Chip | Bus-Id |\n", "no NPU row"),
                                       ("    mthreads-gmi:1.14.0          Driver Version:2.0.1\nID   Name\n",
                                        "no GPU row")])
def test_a_table_without_devices_is_refused_naming_what_is_missing(text, what):
    kind, _ = classify(text)
    with pytest.raises(ValueError, match=what):
        parse_as(kind, text)


def test_more_devices_than_one_machine_holds_is_refused():
    row = ("| {i}     910B3               | OK            | 201.5       47                0    / 0             |\n"
           "| 0                         | 0000:{b:02x}:00.0  | 12          0    / 0          3100 / 65536         |\n")
    head = NPU.split("+===", 1)[0]
    text = head + "".join(row.format(i=i, b=i) for i in range(70))
    with pytest.raises(ValueError, match="more than the 64 one machine holds"):
        parse_as("npu-smi", text)


def test_an_mthreads_gmi_q_shaped_text_is_still_refused_as_a_look_alike():
    text = "==============NVSMI LOG==============\nAttached GPUs : 1\nGPU 00000000:3B:00.0\n    Product Name : MTT S4000\n"
    kind, why = classify(text)
    assert kind is None and "Moore Threads" in why and "look-alike" in why


def _audit(tmp_path, name, text, *args):
    f = tmp_path / name
    f.write_text(text)
    return main(["audit", str(f), *args]), f


def test_with_no_profile_for_the_model_audit_names_it_and_profile_init_writes_one(tmp_path, capsys):
    rc, f = _audit(tmp_path, "npu.txt", NPU)
    err = capsys.readouterr().err
    assert rc == 4 and "2 × Ascend 910B3 (Huawei, no PCI ID in the texts)" in err and "sits profile init" in err
    prof = tmp_path / "p.yaml"
    assert main(["profile", "init", f"--from={f}", f"--out={prof}"]) == 0
    text = prof.read_text()
    assert 'model: "Ascend 910B3"' in text and "pci_ids: []" in text and "kind: npu" in text and "count: 2" in text
    assert "memory_gb: 68.7" in text
    out = tmp_path / "r"
    assert main(["audit", str(f), f"--profile={prof}", f"--report-dir={out}"]) in (0, 10, 11)
    by = {v["requirement"]: v for v in json.loads((out / "sits-report.json").read_text())["verdicts"]}
    assert by["INV-DEVICES"]["status"] == "PASS"  # matched by vendor and name: the text gives no PCI ID
    assert by["MEM-CAPACITY"]["status"] == "FAIL" and "68.72 GB" in by["MEM-CAPACITY"]["reason"]


def test_a_profile_for_another_model_does_not_take_these_devices(tmp_path, capsys):
    prof = tmp_path / "other.yaml"
    prof.write_text('name: other\nextends: base\nidentity:\n  vendor: "Huawei"\n  model: "Ascend 910C"\n'
                    '  kind: npu\n  pci_ids: []\n  count: 2\n')
    out = tmp_path / "r"
    rc, _ = _audit(tmp_path, "npu.txt", NPU, f"--profile={prof}", f"--report-dir={out}")
    by = {v["requirement"]: v for v in json.loads((out / "sits-report.json").read_text())["verdicts"]}
    assert rc == 10 and by["INV-DEVICES"]["status"] == "FAIL"


def test_ecc_mode_of_mthreads_gmi_decides_dep_ecc_in_its_own_words(tmp_path, capsys):
    f = tmp_path / "mt.txt"
    f.write_text(MT)
    prof = tmp_path / "p.yaml"
    assert main(["profile", "init", f"--from={f}", f"--out={prof}"]) == 0
    out = tmp_path / "r"
    main(["audit", str(f), f"--profile={prof}", f"--report-dir={out}"])
    ecc = {v["subject"]: v for v in json.loads((out / "sits-report.json").read_text())["verdicts"]
           if v["requirement"] == "DEP-ECC"}
    assert ecc["0000:3c:00.0"]["status"] == "FAIL" and "shows ECC Mode N/A" in ecc["0000:3c:00.0"]["reason"]
    assert "nvidia-smi" not in (ecc["0000:3c:00.0"]["remediation"] or "")
    # ECC on, but its error counts are not in the text: not a PASS
    assert ecc["0000:3b:00.0"]["status"] in ("INCONCLUSIVE", "SKIP")
