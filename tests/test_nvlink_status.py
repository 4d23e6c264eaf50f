"""`nvidia-smi nvlink -s` as submitted evidence (pytest_sits/probes/readers/nvidia_smi_nvlink_status.py): each GPU's
link states, and LINK-NVLINK-MESH where they decide a pair (a GPU with no active NVLink reaches no peer over it)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pytest_sits.cli import main
from pytest_sits.platforms.evidence import EvidencePlatform
from pytest_sits.probes.readers import classify
from pytest_sits.probes.readers.nvidia_smi_nvlink_status import parse_nvlink_status
from pytest_sits.probes.readers.text import TextEvidenceError

DATA = Path(__file__).resolve().parent / "data"
Q8 = DATA / "nvidia-smi-q-h100-570.txt"


def _uuids():
    return re.findall(r"GPU UUID\s+: (GPU-[0-9a-f-]+)", Q8.read_text())


def status_text(dead=(), links=18, indent="         ", names="NVIDIA H100 80GB HBM3", inactive_links=()):
    """An 8-GPU `nvidia-smi nvlink -s` of the machine of Q8 (its UUIDs): the GPUs in ``dead`` with every link
    inactive (the NVML line), the links in ``inactive_links`` shown <inactive>."""
    out = []
    for i, uuid in enumerate(_uuids()):
        out.append(f"GPU {i}: {names} (UUID: {uuid})")
        if i in dead:
            out.append("NVML: Unable to retrieve NVLink information as all links are inactive")
            continue
        for n in range(links):
            out.append(f"{indent}Link {n}: " + ("<inactive>" if n in inactive_links else "26.562 GB/s"))
    return "\n".join(out) + "\n"


def test_the_layouts_read():
    facts = parse_nvlink_status("    GPU 0: NVIDIA H100 PCIe (UUID: GPU-6968dfc2-0000-0000-0000-000000000000)\n"
                                "               Link 0: 26.562 GB/s\n               Link 4: <inactive>\n"
                                "    GPU 1: NVIDIA A100-PCIE-40GB (UUID: GPU-14ac2834-0000-0000-0000-000000000000)\n"
                                "    NVML: Unable to retrieve NVLink information as all links are inActive\n"
                                "GPU 2: NVIDIA A100-SXM4-80GB\n\t Link 0: 25 GB/s\n\t [...]\n\t Link 11: 25 GB/s\n")
    g0, g1, g2 = facts["gpus"]
    assert g0["links"] == {"0": 26.562, "4": None} and not g0["all_inactive"]
    assert g1["links"] == {} and g1["all_inactive"] and g1["uuid"].startswith("GPU-14ac2834")
    assert g2["links"] == {"0": 25.0, "11": 25.0} and g2["cut"] and facts["cuts"][0]["line"] == 8
    assert classify(status_text()[:4096])[0] == "nvidia-smi-nvlink-s"


@pytest.mark.parametrize("text,words", [
    ("Link 0: 25 GB/s\n", "before any `GPU N: ...` header"),
    ("GPU 0: X\n  Link 0: fast\n", "line 2"),
    ("GPU 0: X\n  Link 0: 25 GB/s\nNVML: Unable to retrieve NVLink information as all links are inactive\n",
     "also says all its links are inactive"),
    ("GPU 0: X\n" + "".join(f"  Link {n}: 25 GB/s\n" for n in range(40)), "more than 36 links"),
])
def test_bad_texts_are_refused_naming_the_line(text, words):
    with pytest.raises(TextEvidenceError) as exc:
        parse_nvlink_status(text)
    assert words in str(exc.value), str(exc.value)


def _folder(tmp_path, status):
    d = tmp_path / "evidence"
    d.mkdir()
    (d / "nvidia-smi-q.txt").write_bytes(Q8.read_bytes())
    (d / "nvlink-s.txt").write_text(status)
    return d


def _mesh_verdict(tmp_path, d):
    out = tmp_path / "v.json"
    rc = main(["audit", str(d), "--profile", "h100", "--json", str(out)])
    verdicts = json.loads(out.read_text())
    return rc, [v for v in verdicts if v["requirement"] == "LINK-NVLINK-MESH"]


@pytest.mark.slow  # runs the suite on the texts
def test_a_gpu_with_every_nvlink_inactive_fails_the_mesh_naming_its_pairs(tmp_path, capsys):
    d = _folder(tmp_path, status_text(dead=(6,)))
    plat = EvidencePlatform(d)
    accs = {a["bdf"]: a for a in plat.inventory()["accelerators"]}
    sixth = sorted(accs)[6]
    assert accs[sixth]["nvlink_status"]["active"] == 0 and accs[sorted(accs)[0]]["nvlink_status"]["active"] == 18
    assert "line" in accs[sixth]["nvlink_status"]["source"] and "matched by its UUID" in accs[sixth]["nvlink_status"]["source"]
    rc, mesh = _mesh_verdict(tmp_path, d)
    assert [v["status"] for v in mesh] == ["FAIL"], mesh
    assert "7 of 28 pairs" in mesh[0]["reason"] and sixth in mesh[0]["reason"], mesh[0]["reason"]
    assert rc == 10
    capsys.readouterr()


@pytest.mark.slow
def test_every_gpu_up_leaves_the_pairs_unknown_and_a_topo_matrix_decides_them(tmp_path, capsys):
    """-s names no peer: with every GPU's links up, no pair is decided from it (INCONCLUSIVE, never PASS); with the
    machine's topo -m beside it, the matrix is the mesh (PASS) and each GPU still carries its link states."""
    d = _folder(tmp_path, status_text())
    _, mesh = _mesh_verdict(tmp_path, d)
    assert [v["status"] for v in mesh] == ["INCONCLUSIVE"] and "could not be read" in mesh[0]["reason"]
    (d / "topo.txt").write_bytes((DATA / "nvidia-smi-topo-hgx-h100-nic12.txt").read_bytes())
    _, mesh = _mesh_verdict(tmp_path, d)
    assert [v["status"] for v in mesh] == ["PASS"], mesh
    accs = EvidencePlatform(d).inventory()["accelerators"]
    assert all(a["nvlink_status"]["active"] == 18 for a in accs)
    capsys.readouterr()


def test_audit_text_names_the_file_with_its_option(tmp_path, capsys):
    f = tmp_path / "s.txt"
    f.write_text(status_text(dead=(0, 1, 2, 3, 4, 5, 6, 7)))
    rc = main(["audit-text", "--nvidia-smi-nvlink-s", str(f), "--json", str(tmp_path / "v.json")])
    verdicts = json.loads((tmp_path / "v.json").read_text())
    mesh = [v for v in verdicts if v["requirement"] == "LINK-NVLINK-MESH"]
    assert len(mesh) == 1 and mesh[0]["status"] in ("FAIL", "WARN"), (rc, mesh)  # WARN: a mesh not required
    assert "28" in mesh[0]["reason"] and "pair" in mesh[0]["reason"], mesh[0]["reason"]
    capsys.readouterr()


# ---- look-alikes of NVIDIA's tools: refused naming the vendor, never read as NVIDIA's ---------------------------

def _q_of(product: str, banner: str = "") -> str:
    """An nvidia-smi -q-shaped text of another vendor's tool (modelled: same fields, their product name)."""
    text = Q8.read_text()
    text = re.sub(r"(Product Name\s+:) NVIDIA H100 80GB HBM3", rf"\1 {product}", text)
    return banner + text


@pytest.mark.parametrize("text,vendor", [
    (_q_of("Iluvatar BI-V150"), "Iluvatar CoreX"),
    (_q_of("MetaX C500", banner="mx-smi  version: 2.1.9\n"), "MetaX"),
    (_q_of("MTT S4000"), "Moore Threads"),  # an -q-shaped text of mthreads-gmi (its table form is read: test_vendor_smi)
    ("        GPU0    GPU1    CPU Affinity\nGPU0     X      MX8     0-63\nGPU1    MX8      X      0-63\n"
     "mx-smi topo -m legend: MX# = MetaXLink\n", "MetaX"),
])
def test_a_look_alike_of_nvidias_tools_is_refused_naming_its_vendor(text, vendor, tmp_path, capsys):
    kind, why = classify(text)
    assert kind is None and vendor in why and "look-alike" in why, why
    f = tmp_path / "t.txt"
    f.write_text(text)
    assert main(["audit", str(f)]) == 4
    err = capsys.readouterr().err
    assert vendor in err and "NVIDIA H100" not in err, err


def test_an_lspci_listing_naming_such_a_vendor_is_still_lspci():
    text = (DATA / "lspci-vv-workstation-idle.txt").read_text()
    text += ("\n0000:41:00.0 Processing accelerators: Shanghai Iluvatar CoreX Semiconductor Co., Ltd. Device 0001\n"
             "\tSubsystem: Shanghai Iluvatar CoreX Semiconductor Co., Ltd. Device 0000\n")
    assert classify(text)[0] == classify((DATA / "lspci-vv-workstation-idle.txt").read_text())[0] is not None
