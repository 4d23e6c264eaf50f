"""NVIDIA's nvbandwidth as submitted evidence: its devices, driver and matrices read; CRG-EDGE judged on its
device-to-device copy-engine figures (each pair, each direction), DEP-DRIVER on its versions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_sits.checks.crg import check_edge_nvbandwidth
from pytest_sits.cli import main
from pytest_sits.conditions.crg import submitted_edges
from pytest_sits.platforms.evidence import EvidencePlatform
from pytest_sits.probes.readers import classify
from pytest_sits.probes.readers.nvbandwidth import cuda_version, parse_nvbandwidth
from pytest_sits.profiles import resolve
from pytest_sits.verdict import FAIL, INCONCLUSIVE, PASS, SKIP


def nvbandwidth(n: int = 4, d2d: float = 370.0, slow_pair=None, driver: str = "570.133.20", cut: bool = False,
                host: bool = True) -> str:
    """An nvbandwidth v0.4 text written for these tests: ``n`` GPUs, a device-to-device read matrix at ``d2d``
    GB/s (``slow_pair`` (i, j): that direction at 90 GB/s), a host-to-device row."""
    out = ["nvbandwidth Version: v0.4", "Built from Git version: v0.4", "",
           "NOTE: This tool reports current measured bandwidth on your system.",
           "Additional system-specific tuning may be required to achieve maximal peak bandwidth.", "",
           "CUDA Runtime Version: 12020", "CUDA Driver Version: 12080", f"Driver Version: {driver}", ""]
    out += [f"Device {i}: NVIDIA H100 80GB HBM3" for i in range(n)] + [""]
    if host:
        out += ["Running host_to_device_memcpy_ce.", "memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)",
                "".join(f"{i:>10}" for i in range(n)), "0" + "".join(f"{55.3:>10.2f}" for _ in range(n)), "",
                f"SUM host_to_device_memcpy_ce {55.3 * n:.2f}", ""]
    out += ["Running device_to_device_memcpy_read_ce.", "memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)",
            "".join(f"{i:>10}" for i in range(n))]
    total = 0.0
    for i in range(n):
        cells = []
        for j in range(n):
            v = None if i == j else (90.0 if slow_pair == (i, j) else d2d)
            total += v or 0.0
            cells.append(f"{'N/A' if v is None else f'{v:.2f}':>10}")
        out.append(f"{i}" + "".join(cells))
        if cut and i == 1:
            out.append("[...]")
            break
    out += ["", f"SUM device_to_device_memcpy_read_ce {total:.2f}", ""]
    return "\n".join(out)


def th(**over):
    return dict(resolve("h100").thresholds("CRG-EDGE"), **over)


def edges(tmp_path: Path, text: str, count: int = 8):
    (tmp_path / "nvbandwidth.txt").write_text(text)
    return submitted_edges(EvidencePlatform(tmp_path).inventory(), count)


def test_read_devices_versions_and_matrices():
    facts = parse_nvbandwidth(nvbandwidth())
    assert classify(nvbandwidth())[0] == "nvbandwidth"
    assert [d["name"] for d in facts["devices"]] == ["NVIDIA H100 80GB HBM3"] * 4
    assert facts["driver"] == "570.133.20" and cuda_version(facts["cuda_driver"]) == "12.8"
    t = facts["tests"]["device_to_device_memcpy_read_ce"]
    assert t["matrix"][0][0] is None and t["matrix"][2][3] == 370.0 and t["sum"] == pytest.approx(370.0 * 12)
    assert facts["tests"]["host_to_device_memcpy_ce"]["matrix"][0][3] == 55.3


def test_each_pair_passes_at_the_floor_and_a_slow_direction_fails(tmp_path):
    got = edges(tmp_path, nvbandwidth())
    assert len(got) == 6 and [s for _, s in got][:2] == ["GPU0<->GPU1", "GPU0<->GPU2"]
    assert all(check_edge_nvbandwidth(ev, th(), s).status == PASS for ev, s in got)  # h100: 300 GB/s
    (tmp_path / "b").mkdir()
    got = edges(tmp_path / "b", nvbandwidth(slow_pair=(2, 1)))
    v = {s: check_edge_nvbandwidth(ev, th(), s) for ev, s in got}
    assert v["GPU1<->GPU2"].status == FAIL and "GPU2->GPU1 90 GB/s" in v["GPU1<->GPU2"].reason
    assert v["GPU0<->GPU1"].status == PASS


def test_a_cut_matrix_leaves_the_missing_directions_undecided(tmp_path):
    got = edges(tmp_path, nvbandwidth(cut=True))
    v = {s: check_edge_nvbandwidth(ev, th(), s).status for ev, s in got}
    assert v["GPU0<->GPU1"] == PASS and v["GPU2<->GPU3"] == INCONCLUSIVE


def test_no_profile_for_the_devices_judges_none(tmp_path):
    [(ev, subject)] = edges(tmp_path, nvbandwidth(), count=0)
    assert check_edge_nvbandwidth(ev, th(), subject).status == SKIP


@pytest.mark.parametrize("text, says", [
    (nvbandwidth().replace("    370.00", "    370.00    1.00", 1), "figures under"),
    ("nvbandwidth Version: v0.4\n0    12.0\n", "before any `Running"),
    (nvbandwidth() + "garbage at the end\n", "not a line of nvbandwidth"),
])
def test_broken_output_is_refused_naming_the_line(text, says):
    with pytest.raises(ValueError, match=says.replace("`", ".")):
        parse_nvbandwidth(text)


@pytest.mark.slow
def test_audit_decides_crg_edge_and_the_driver(tmp_path, capsys):
    (tmp_path / "e").mkdir()
    (tmp_path / "e" / "nvbandwidth.txt").write_text(nvbandwidth(n=8, slow_pair=(5, 6), driver="525.105.17"))
    rc = main(["audit", str(tmp_path / "e"), "--profile=h100", "--level=standard", "--each",
               f"--json={tmp_path / 'v.json'}"])
    capsys.readouterr()
    vs = json.loads((tmp_path / "v.json").read_text())
    edge = {v["subject"]: v["status"] for v in vs if v["requirement"] == "CRG-EDGE"}
    assert len(edge) == 28 and edge["GPU5<->GPU6"] == FAIL and edge["GPU0<->GPU1"] == PASS
    drv = [v for v in vs if v["requirement"] == "DEP-DRIVER"]
    assert drv and drv[0]["status"] == FAIL and "525.105.17" in str(drv[0]["measured"])
    assert rc == 10


# ---- host<->device: TOPO-PCIE-BW -----------------------------------------------------------------------------

def test_host_to_device_figures_are_matched_to_the_gpus_and_their_link(tmp_path):
    """With nvidia-smi -q of the same eight GPUs (Gen5 x16), each GPU's figures of the CPU row are judged against its
    link: 55.3 GB/s one way, and only one direction in the text, so not decided; never a PASS."""
    from pytest_sits.checks.bandwidth import check_pcie_bw_nvbandwidth
    from pytest_sits.conditions.bandwidth import submitted_pcie_bw

    data = Path(__file__).resolve().parent / "data"
    (tmp_path / "q.txt").write_text((data / "nvidia-smi-q-h100-570.txt").read_text())
    (tmp_path / "nvbandwidth.txt").write_text(nvbandwidth(n=8, driver="570.124.06"))
    inv = EvidencePlatform(tmp_path).inventory()
    acc = inv["accelerators"][0]
    ev = submitted_pcie_bw(inv, acc)
    assert ev is not None and ev["index"] == 0 and ev["h2d_gbps"] == 55.3 and ev["d2h_gbps"] is None
    assert ev["link"]["gen"] == 5 and ev["link"]["width"] == 16 and ev["match_rule"].startswith("its CUDA index")
    v = check_pcie_bw_nvbandwidth(ev, resolve("h100").thresholds("TOPO-PCIE-BW"), acc["bdf"])
    assert v.status == INCONCLUSIVE and "a direction is not in the text" in v.reason


@pytest.mark.slow
def test_audit_judges_host_device_figures_without_a_pass(tmp_path, capsys):
    (tmp_path / "nvbandwidth.txt").write_text(nvbandwidth(n=8))
    rc = main(["audit", str(tmp_path), "--profile=h100-sxm5", "--level=standard", f"--json={tmp_path / 'v.json'}"])
    capsys.readouterr()
    bw = [v for v in json.loads((tmp_path / "v.json").read_text()) if v["requirement"] == "TOPO-PCIE-BW"]
    assert len(bw) == 8 and all(v["status"] == INCONCLUSIVE for v in bw), bw
    assert rc in (10, 11)


def test_an_nvbandwidth_of_another_model_than_the_other_texts_show_is_refused(tmp_path):
    """nvidia-smi -q of eight H100 and an nvbandwidth text of eight H800: matched in bus order they would be one
    machine's; their model names say they are not."""
    from pytest_sits.platforms.base import PlatformError

    data = Path(__file__).resolve().parent / "data"
    (tmp_path / "q.txt").write_text((data / "nvidia-smi-q-h100-570.txt").read_text())
    (tmp_path / "nvbandwidth.txt").write_text(nvbandwidth(n=8, driver="570.124.06").replace(
        "NVIDIA H100 80GB HBM3", "NVIDIA H800"))
    with pytest.raises(PlatformError, match="disagree on the model of GPU 0"):
        EvidencePlatform(tmp_path).inventory()


def test_gpus_not_in_bus_order_are_matched_model_by_model():
    """CUDA's default order puts the fastest first: an nvbandwidth of two H100 and a display card, the H100 first,
    matched onto nvidia-smi's bus order (the display card first) by model."""
    from pytest_sits.probes.readers.base import Machine, new_accelerator

    m = Machine([], False)
    for bdf, name in (("0000:01:00.0", "NVIDIA RTX A400"), ("0000:18:00.0", "NVIDIA H100 80GB HBM3"),
                      ("0000:2a:00.0", "NVIDIA H100 80GB HBM3")):
        m.add(bdf, new_accelerator(bdf, None, "NVIDIA", name, "q.txt"))
    got = m.by_bus_order([0, 1, 2], names={0: "NVIDIA H100 80GB HBM3", 1: "NVIDIA H100 80GB HBM3",
                                          2: "NVIDIA RTX A400"}, source="nvbandwidth.txt")
    assert got == {0: "0000:18:00.0", 1: "0000:2a:00.0", 2: "0000:01:00.0"}
    assert any("matched model by model" in n for n in m.notes)
