"""Text evidence (`lspci -tv`, `nvidia-smi topo -m`) parsed into the live probes' shape, judged by the same checks."""

import json
from pathlib import Path

import pytest

from pytest_sits.checks.topology import check_pcie_direct, check_peer_mesh
from pytest_sits.cli import main
from pytest_sits.probes.readers.lspci_tv import parse_lspci_tv
from pytest_sits.probes.readers.nvidia_smi_topo import parse_nvidia_smi_topo
from pytest_sits.probes.readers.text import TextEvidenceError
from pytest_sits.verdict import FAIL, PASS

DATA = Path(__file__).resolve().parent / "data"


def test_lspci_tree_paths_and_switch_detection():
    paths = {p["device"]: p for p in parse_lspci_tv((DATA / "lspci-tv-switch.txt").read_text())}
    assert set(paths) == {"0000:c3:00.0", "0000:c4:00.0", "0000:01:00.0"}  # the NIC and the NVMe are not GPUs
    behind = paths["0000:c4:00.0"]
    assert [h["bdf"] for h in behind["hops"]] == ["0000:c2:01.0", "0000:c1:00.0", "0000:c0:01.1"]
    v = check_pcie_direct({"path": behind}, {"max_switch_ports": 0})
    assert v.status == FAIL and "inferred" in v.method
    assert check_pcie_direct({"path": paths["0000:01:00.0"]}, {"max_switch_ports": 0}).status == PASS


def test_lspci_with_numeric_ids():
    text = "-[0000:00]-+-00.0  Intel Corporation Device [8086:09a2]\n" \
           "           \\-01.0-[17]----00.0  NVIDIA Corporation GH100 [H100 SXM5 80GB] [10de:2330] (rev a1)\n"
    (p,) = parse_lspci_tv(text)
    assert p["device"] == "0000:17:00.0" and p["pci_id"] == "10de:2330"


def test_nvidia_smi_topo_partial_and_full_mesh():
    mesh = parse_nvidia_smi_topo((DATA / "nvidia-smi-topo-partial.txt").read_text())
    v = check_peer_mesh({"mesh": mesh, "expected_devices": 4}, {"required": True})
    assert v.status == FAIL and "GPU0<->GPU2" in v.reason and v.measured == "5/6 pairs"
    full = (DATA / "nvidia-smi-topo-partial.txt").read_text().replace("PXB", "NV18")
    assert check_peer_mesh({"mesh": parse_nvidia_smi_topo(full), "expected_devices": 4},
                           {"required": True}).status == PASS


def test_not_the_claimed_output():
    with pytest.raises(TextEvidenceError, match="not `lspci -tv` output"):
        parse_lspci_tv("hello\nworld\n")
    with pytest.raises(TextEvidenceError, match="not `nvidia-smi topo -m` output"):
        parse_nvidia_smi_topo("GPU 0: NVIDIA H100\n")


#: The matrix of the machine of lspci-tv-switch.txt: its three H100s, all joined by NVLink.
TOPO3 = """\
\tGPU0\tGPU1\tGPU2\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID
GPU0\t X \tNV18\tNV18\t0-47\t0\t\tN/A
GPU1\tNV18\t X \tNV18\t48-95\t1\t\tN/A
GPU2\tNV18\tNV18\t X \t48-95\t1\t\tN/A
"""


@pytest.mark.slow
def test_cli_audit_text(tmp_path, capsys):
    # a 4-GPU matrix beside a tree of 3 GPUs: two machines, refused naming both files
    assert main(["audit-text", "--lspci-tv", str(DATA / "lspci-tv-switch.txt"), "--nvidia-smi-topo",
                 str(DATA / "nvidia-smi-topo-partial.txt"), "--profile", "h100"]) == 4
    err = capsys.readouterr().err
    assert "different machines" in err and "(4 and 3)" in err, err
    (tmp_path / "topo3.txt").write_text(TOPO3)
    rc = main(["audit-text", "--lspci-tv", str(DATA / "lspci-tv-switch.txt"), "--nvidia-smi-topo",
               str(tmp_path / "topo3.txt"), "--profile", "h100", "--each", "--json", str(tmp_path / "v.json")])
    out = capsys.readouterr().out
    assert rc == 10 and "TOPO-PCIE-DIRECT   0000:c3:00.0   FAIL" in out and "LINK-NVLINK-MESH" in out
    verdicts = json.loads((tmp_path / "v.json").read_text())
    direct = {v["subject"]: v["status"] for v in verdicts if v["requirement"] == "TOPO-PCIE-DIRECT"}
    assert direct["0000:c3:00.0"] == "FAIL" and direct["0000:01:00.0"] == "PASS"
    assert [v["requirement"] for v in verdicts].count("LINK-NVLINK-MESH") == 1
    assert main(["audit-text", "--lspci-tv", str(tmp_path / "missing.txt")]) == 4
    bad = tmp_path / "bad.txt"
    bad.write_text("not lspci\n")
    assert main(["audit-text", "--lspci-tv", str(bad)]) == 4
    assert "none of the tools this suite reads (first line: 'not lspci')" in capsys.readouterr().err
