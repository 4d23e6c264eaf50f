"""`sits audit-text` on real-world shapes of `lspci -tv`, `lspci -vv` and `nvidia-smi topo -m` output.

The data in tests/data/ is modelled on real outputs (see tests/data/README.md); the tree files were printed by
the port of pciutils' own tree printer below, and a property test feeds generated trees through that printer.
"""

import random
import re
from pathlib import Path

import pytest

from pytest_sits.checks.topology import check_pcie_direct, check_pcie_link, check_peer_mesh
from pytest_sits.cli import main
from pytest_sits.probes.readers.lspci_tv import parse_lspci_tv, read_lspci_tv
from pytest_sits.probes.readers.lspci_vv import link_evidence_vv, parse_lspci_vv
from pytest_sits.probes.readers.nvidia_smi_topo import parse_nvidia_smi_topo, topo_pcie_paths
from pytest_sits.probes.readers.pci import identify
from pytest_sits.probes.readers.text import MAX_LINE, TextEvidenceError
from pytest_sits.verdict import FAIL, INCONCLUSIVE, PASS

DATA = Path(__file__).resolve().parent / "data"


def data(name):
    return (DATA / name).read_text()


# ---- a port of pciutils' ls-tree.c printer (show_forest, show_tree_bridge/bus/dev, print_it) -------------

LINE_BUF_SIZE = 1024


class _Printer:
    def __init__(self, verbose=True):
        self.line = [" "] * (LINE_BUF_SIZE + 8)
        self.out = []
        self.verbose = verbose

    def put(self, p, text):  # tree_printf
        space = LINE_BUF_SIZE - 1 - p
        if space <= 0:
            return p
        text = text[:space]
        self.line[p:p + len(text)] = list(text)
        return p + len(text)

    def print_it(self, p):
        self.out.append("".join(self.line[:p]) + ("..." if p >= LINE_BUF_SIZE - 1 else ""))
        for i in range(p):
            self.line[i] = "|" if self.line[i] in "+|" else " "

    def dev(self, d, p):
        p = self.put(p, f"{d['dev']:02x}.{d['func']:x}")
        b = d.get("bridge")
        if b is not None:
            if b["sec"] == 0:
                p = self.put(p, "-")
            elif b["sec"] == b["sub"]:
                p = self.put(p, f"-[{b['sec']:02x}]-")
            else:
                p = self.put(p, f"-[{b['sec']:02x}-{b['sub']:02x}]-")
            self.bridge(b, p, host=False)
            return
        if self.verbose and d.get("name") is not None:
            p = self.put(p, f"  {d['name']}")
        self.print_it(p)

    def bus(self, bus, p):
        devs = bus["devs"]
        if not devs:
            self.print_it(p)
        elif len(devs) == 1:
            p = self.put(p, "--")
            self.dev(devs[0], p)
        else:
            for i, d in enumerate(devs):
                p2 = self.put(p, "\\-" if i == len(devs) - 1 else "+-")
                self.dev(d, p2)

    def bridge(self, b, p, host):
        p = self.put(p, "-")
        buses = b["buses"]
        if len(buses) == 1:
            if host:
                p = self.put(p, f"[{buses[0]['domain']:04x}:{buses[0]['number']:02x}]-")
            self.bus(buses[0], p)
        else:
            for i, u in enumerate(buses):
                fmt = "\\-[{:04x}:{:02x}]-" if i == len(buses) - 1 else "+-[{:04x}:{:02x}]-"
                k = self.put(p, fmt.format(u["domain"], u["number"]))
                self.bus(u, k)


def render(forest, verbose=True):
    """The text `lspci -t[v]` prints for ``forest``."""
    pr = _Printer(verbose)
    for host in forest:
        pr.bridge(host, 0, host=True)
    return "\n".join(pr.out) + "\n"


def dev(slot, name=None, bridge=None):
    d, f = slot.split(".")
    return {"dev": int(d, 16), "func": int(f, 16), "name": name, "bridge": bridge}


def bridge_dev(slot, sec, sub, devs, domain=0):
    return dev(slot, bridge={"sec": sec, "sub": sub, "buses": [{"domain": domain, "number": sec, "devs": devs}]})


def bus(domain, number, devs):
    return {"domain": domain, "number": number, "devs": devs}


# ---- lspci -tv: which functions are accelerators ---------------------------------------------------------

def test_hgx_nvswitch_bridges_and_bmc_vga_are_not_accelerators():
    r = read_lspci_tv(data("lspci-tv-hgx-h100-nvswitch.txt"))
    gpus = {p["device"]: p for p in r["accelerators"]}
    assert len(gpus) == 8 and all("H100 SXM5" in p["name"] for p in gpus.values())
    assert not any(d.startswith("0000:d") for d in gpus)  # the four NVSwitches (10de:22a3) are not GPUs
    assert r["unidentified"] == [] and r["not_accelerators"] > 30
    p = gpus["0000:19:00.0"]
    assert [h["bdf"] for h in p["hops"]] == ["0000:17:01.0", "0000:16:00.0", "0000:15:01.0"]
    v = check_pcie_direct({"path": p}, {"max_switch_ports": 0})
    assert v.status == FAIL and v.measured == 2


def test_old_pci_ids_with_device_ids_only_and_numeric_ids_find_the_same_gpus():
    named = {p["device"]: p for p in parse_lspci_tv(data("lspci-tv-hgx-h100-nvswitch.txt"))}
    for name in ("lspci-tv-old-pciids.txt", "lspci-tv-nn-ids.txt"):
        r = read_lspci_tv(data(name))
        found = {p["device"]: p for p in r["accelerators"]}
        assert set(found) == set(named), name
        assert {p["pci_id"] for p in found.values()} == {"10de:2330"}
        assert all([h["bdf"] for h in found[d]["hops"]] == [h["bdf"] for h in named[d]["hops"]] for d in found)
        assert r["unidentified"] == []


def test_workstation_gpu_with_hdmi_audio_and_an_igpu():
    r = read_lspci_tv(data("lspci-tv-workstation-hdmi-audio.txt"))
    (p,) = r["accelerators"]
    assert p["device"] == "0000:01:00.0" and "RTX 6000 Ada" in p["name"]  # not 01:00.1 (audio), not the iGPU
    assert [h["port_type"] for h in p["hops"]] == ["root_port"]
    assert check_pcie_direct({"path": p}, {"max_switch_ports": 0}).status == PASS


def test_tab_indented_and_quoted_tree_parses_like_the_original():
    a = read_lspci_tv(data("lspci-tv-workstation-hdmi-audio.txt"))
    b = read_lspci_tv(data("lspci-tv-tabs.txt"))
    assert "\t" in data("lspci-tv-tabs.txt") and b["skipped_lines"] == [1]  # the shell prompt
    assert [(p["device"], p["hops"]) for p in a["accelerators"]] == [(p["device"], p["hops"]) for p in b["accelerators"]]
    assert a["not_accelerators"] == b["not_accelerators"]


def test_amd_instinct_behind_the_on_board_switch():
    from pytest_sits.profiles import resolve

    r = read_lspci_tv(data("lspci-tv-mi300x-onboard-switch.txt"))
    assert len(r["accelerators"]) == 8  # the [AMD] root complex / dummy functions (vendor 1022) are not
    th = resolve("mi300x").check_thresholds("TOPO-PCIE-DIRECT")
    for p in r["accelerators"]:
        assert [h["port_type"] for h in p["hops"]] == ["switch_port_inferred", "switch_port_inferred", "root_port"]
        v = check_pcie_direct({"path": p}, th, p["device"])
        assert v.status == FAIL and v.measured == 2  # the profile's stated rule: a switch on the card counts
    mi250 = read_lspci_tv(data("lspci-tv-mi250-onboard-switch.txt"))["accelerators"]
    assert [p["device"] for p in mi250] == ["0000:c3:00.0", "0000:c4:00.0"]
    assert check_pcie_direct({"path": mi250[0]}, {"max_switch_ports": 2}).status == PASS


def test_vmd_domains_with_five_hex_digits():
    text = data("lspci-tv-vmd-domains.txt")
    (gpu,) = parse_lspci_tv(text)
    assert gpu["device"] == "0000:17:00.0"
    nvme = {p["device"]: p for p in parse_lspci_tv(text, match=re.compile("SSD"))}
    assert set(nvme) == {"10000:e1:00.0", "10000:e2:00.0", "10001:01:00.0"}
    assert [h["bdf"] for h in nvme["10000:e1:00.0"]["hops"]] == ["10000:e0:02.0"]
    assert [h["port_type"] for h in nvme["10001:01:00.0"]["hops"]] == ["root_port"]


def test_filtered_and_elided_tree_with_a_cut_name():
    r = read_lspci_tv(data("lspci-tv-elided.txt"))
    assert [p["device"] for p in r["accelerators"]] == ["0000:19:00.0", "0000:2a:00.0", "0000:3b:00.0", "0000:4c:00.0"]
    assert r["skipped_lines"] == [5] and r["not_accelerators"] == 2  # the "[... removed ...]" line; 2 NVSwitches
    assert r["accelerators"][1]["name"].endswith("8...")


def test_only_lspci_t_without_names_judges_nothing_without_classes():
    forest = [{"buses": [bus(0, 0, [bridge_dev("01.0", 1, 1, [dev("00.0", None), dev("00.1", None)])])]}]
    text = render(forest, verbose=False)
    assert read_lspci_tv(text)["accelerators"] == []
    funcs = {"0000:01:00.0": {"class_code": 0x0302, "name": "NVIDIA Corporation Device 2bff"},
             "0000:01:00.1": {"class_code": 0x0403, "name": "NVIDIA Corporation Device 22e8"}}
    (p,) = read_lspci_tv(text, classes=funcs)["accelerators"]
    assert p["device"] == "0000:01:00.0"


@pytest.mark.parametrize("name,cls,expect", [
    ("NVIDIA Corporation GH100 [H100 SXM5 80GB]", None, True),
    ("NVIDIA Corporation GA102 High Definition Audio Controller", None, False),
    ("NVIDIA Corporation GH100 [H100 NVSwitch]", None, False),
    ("NVIDIA Corporation Device 22a3", None, False),
    ("NVIDIA Corporation Device 2330", None, True),
    ("NVIDIA Corporation Device 2bff", None, None),          # an ID in no table, no name: unidentified
    ("NVIDIA Corporation Device 2bff", 0x0302, True),         # ... which the class decides
    ("NVIDIA Corporation Device [10de:2bff]", 0x0403, False),
    ("NVIDIA Corporation TU104 USB Type-C UCSI Controller", None, False),
    ("10de:2331", None, True),
    ("Device [1da3:1060]", None, True),
    ("Advanced Micro Devices, Inc. [AMD/ATI] Aqua Vanjaram [Instinct MI300X]", None, True),
    ("Advanced Micro Devices, Inc. [AMD/ATI] Navi 31 HDMI/DP Audio", None, False),
    ("Advanced Micro Devices, Inc. [AMD] Genoa/Bergamo Root Complex", None, False),
    ("Intel Corporation Raptor Lake-S GT1 [UHD Graphics 770]", None, False),
    ("Intel Corporation Raptor Lake-S GT1 [UHD Graphics 770]", 0x0300, False),
    ("Intel Corporation Ponte Vecchio XT (2 Tile) [Data Center GPU Max 1550]", None, True),
    ("Intel Corporation Device 0bd5", 0x0380, True),
    ("Huawei Technologies Co., Ltd. Hi1822 Family (2*100GE)", None, False),
    ("Huawei Technologies Co., Ltd. Device d802", None, True),
    ("Habana Labs Ltd. Gaudi2 AI Training Accelerator (rev 01)", None, True),
    ("Mellanox Technologies MT2910 Family [ConnectX-7]", None, False),
    ("ASPEED Technology, Inc. ASPEED Graphics Family", 0x0300, False),
])
def test_identification_rule(name, cls, expect):
    assert identify(name, cls)["accelerator"] is expect


def test_profile_ids_identify_what_the_tables_do_not():
    assert identify("NVIDIA Corporation Device 2bff", None, ["10de:2bff"])["accelerator"] is True


# ---- lspci -tv: the layout rules, on generated trees -------------------------------------------------------

def _random_forest(rng):
    counter = [0]
    expected = {}

    def make_bus(domain, number, depth, chain):
        devs = []
        slots = sorted(rng.sample(range(32), rng.randint(0, 4)))
        for s in slots:
            for fn in sorted(rng.sample(range(8), rng.randint(1, 2))):
                slot = f"{s:02x}.{fn:x}"
                bdf = f"{domain:04x}:{number:02x}:{slot}"
                if depth < 4 and rng.random() < 0.35 and counter[0] < 200:
                    counter[0] += 1
                    sec = (number + counter[0]) % 256 or 1
                    child = make_bus(domain, sec, depth + 1, chain + [bdf])
                    devs.append(dev(slot, bridge={"sec": sec, "sub": min(255, sec + rng.randint(0, 3)),
                                                  "buses": [child]}))
                else:
                    counter[0] += 1
                    name = f"GPU{counter[0]}  Example Corp. model {rng.randint(1, 99)}"
                    expected[bdf] = list(reversed(chain))
                    devs.append(dev(slot, name=name))
        return bus(domain, number, devs)

    forest = []
    for d in rng.sample([0, 1, 0x10000, 0x10001, 0x2], rng.randint(1, 3)):
        buses = [make_bus(d, n, 0, []) for n in sorted(rng.sample(range(256), rng.randint(1, 3)))]
        forest.append({"buses": buses})
    return forest, expected


def _unexpand(line):
    out, col, i = [], 0, 0
    while i < len(line):
        if line[i] != " ":
            out.append(line[i])
            col, i = col + 1, i + 1
            continue
        j = i
        while j < len(line) and line[j] == " ":
            j += 1
        start, end = col, col + j - i
        while (start // 8 + 1) * 8 <= end:
            stop = (start // 8 + 1) * 8
            out.append("\t" if stop - start >= 2 else " ")
            start = stop
        out.append(" " * (end - start))
        col, i = end, j
    return "".join(out)


@pytest.mark.parametrize("seed", range(40))
def test_generated_trees_round_trip(seed):
    rng = random.Random(seed)
    forest, expected = _random_forest(rng)
    text = render(forest)
    if seed % 3 == 1:  # a left margin, then runs of spaces turned into tabs at 8-column stops (unexpand -a)
        tabbed = "\n".join(_unexpand("    " + ln) for ln in text.splitlines())
        assert tabbed.expandtabs(8).splitlines() == ["    " + ln for ln in text.splitlines()]
        text = tabbed
    found = {p["device"]: [h["bdf"] for h in p["hops"]]
             for p in parse_lspci_tv(text, match=re.compile("^GPU"))}
    assert found == expected


def test_tree_errors_name_the_line():
    good = data("lspci-tv-workstation-hdmi-audio.txt").splitlines()
    cut = "\n".join(good[:1] + ["               \\-00.1  NVIDIA Corporation AD102 High Definition Audio"])
    tree = read_lspci_tv(cut)  # a branch whose parent line was cut is read, and the cut named
    assert any(c["line"] == 2 and "hangs from a line that is not in the text" in c["what"] for c in tree["cuts"])
    with pytest.raises(TextEvidenceError, match=r"line 2, column 14: .*not part of an `lspci -t` tree"):
        read_lspci_tv(good[0] + "\n           +-zz.0  Bogus\n")
    with pytest.raises(TextEvidenceError, match=f"line 2: .*over the {MAX_LINE}-character limit"):
        read_lspci_tv(good[0] + "\n" + "x" * (MAX_LINE + 1))
    with pytest.raises(TextEvidenceError, match="not `lspci -tv` output"):
        read_lspci_tv("00:01.0 PCI bridge: Intel\n")


# ---- nvidia-smi topo -m ----------------------------------------------------------------------------------

def test_topo_hgx_with_twelve_nics_fails_every_gpu_behind_a_shared_switch():
    mesh = parse_nvidia_smi_topo(data("nvidia-smi-topo-hgx-h100-nic12.txt"))
    assert len(mesh["devices"]) == 8 and mesh["nics"] == [f"NIC{i}" for i in range(12)]
    assert mesh["nic_legend"]["NIC11"] == "mlx5_11"
    assert check_peer_mesh({"mesh": mesh, "expected_devices": 8}, {"required": True}).status == PASS
    paths = topo_pcie_paths(mesh)
    assert [p["device"] for p in paths] == [f"GPU{i}" for i in range(8)]
    for i, p in enumerate(paths):
        v = check_pcie_direct({"path": p}, {"max_switch_ports": 0}, p["device"])
        assert v.status == FAIL and v.measured == 2 and f"PIX to NIC{i} (mlx5_{i})" in v.reason


def test_topo_without_shared_switch_cannot_pass_and_says_so():
    for name, n in (("nvidia-smi-topo-hgx-noswitch.txt", 8), ("nvidia-smi-topo-noleading-cut.txt", 2)):
        paths = topo_pcie_paths(parse_nvidia_smi_topo(data(name)))
        assert len(paths) == n
        for p in paths:
            v = check_pcie_direct({"path": p}, {"max_switch_ports": 0}, p["device"])
            assert v.status == INCONCLUSIVE and "no switch seen" in v.reason and "could not be judged" in v.reason


def test_topo_header_without_leading_whitespace_and_a_cut_legend():
    mesh = parse_nvidia_smi_topo(data("nvidia-smi-topo-noleading-cut.txt"))
    assert [d["bdf"] for d in mesh["devices"]] == ["GPU0", "GPU1"] and mesh["cells"]["GPU0"] == ["X", "PHB"]
    assert check_peer_mesh({"mesh": mesh, "expected_devices": 2}, {"required": False}).status == "WARN"


def test_topo_older_driver_named_nic_columns_soc_and_terminal_escapes():
    mesh = parse_nvidia_smi_topo(data("nvidia-smi-topo-old-mlx-soc.txt"))
    assert mesh["nics"] == ["mlx5_0", "mlx5_1"]
    verdicts = {p["device"]: check_pcie_direct({"path": p}, {"max_switch_ports": 0}, p["device"])
                for p in topo_pcie_paths(mesh)}
    assert {d: v.status for d, v in verdicts.items()} == {"GPU0": FAIL, "GPU1": FAIL, "GPU2": FAIL, "GPU3": FAIL}
    assert "PXB to mlx5_0" in verdicts["GPU0"].reason and "PIX to GPU1" in verdicts["GPU0"].reason


def test_topo_single_gpu_or_nvlink_only_could_not_be_judged():
    text = "\tGPU0\tCPU Affinity\tNUMA Affinity\nGPU0\t X \t0-63\t0\n"
    (p,) = topo_pcie_paths(parse_nvidia_smi_topo(text))
    v = check_pcie_direct({"path": p}, {"max_switch_ports": 0}, p["device"])
    assert v.status == INCONCLUSIVE and "could not be judged" in v.reason


def test_topo_cut_row_is_read_from_the_symmetric_cells_and_named():
    text = data("nvidia-smi-topo-hgx-h100-nic12.txt").splitlines()
    text[3] = "\t".join(text[3].split("\t")[:6])  # GPU2's row cut after 5 cells
    mesh = parse_nvidia_smi_topo("\n".join(text))
    assert {"line": 4, "what": "row GPU2 has 5 of 20 cells (cut); the missing ones are read from the other rows"} \
        in mesh["cuts"]
    assert mesh["pcie_cells"]["GPU2"]["NIC2"] == "PIX"  # from NIC2's row
    assert check_peer_mesh({"mesh": mesh, "expected_devices": 8}, {"required": True}).status == PASS
    with pytest.raises(TextEvidenceError, match="line 2: a column name appears twice"):
        parse_nvidia_smi_topo("x\n\tGPU0\tGPU0\tCPU Affinity\nGPU0\t X \t X \t0-3\n")


# ---- lspci -vv: the link, declared load ------------------------------------------------------------------

def _links(name, under_load=False):
    return {e["device"]: e for e in link_evidence_vv(parse_lspci_vv(data(name)), under_load)["links"]}


def test_lspci_vv_trained_down_link_width_fails_idle_or_under_a_declared_load():
    idle = _links("lspci-vv-hgx-h100-x8.txt")
    assert set(idle) == {"0000:19:00.0", "0000:2a:00.0"}  # not the NVSwitch (class 0680) at Gen4 x2
    ev = idle["0000:19:00.0"]
    assert ev["capability"]["slot"] == "0000:17:01.0" and ev["capability"]["achievable_speed_gts"] == 32.0
    assert ev["capability"]["slot_port_type"] == "switch_downstream" and ev["capability"]["slot_target_speed_gts"] == 32.0
    v = check_pcie_link(ev, {"require_load": True})  # x8 of x16: idle lowers the speed, never the width
    assert v.status == FAIL and "width x8 < x16 (read idle" in v.reason and "speed" not in v.reason.split(":")[1]
    assert check_pcie_link(idle["0000:2a:00.0"], {"require_load": True}).status == PASS
    loaded = _links("lspci-vv-hgx-h100-x8.txt", under_load=True)["0000:19:00.0"]
    v = check_pcie_link(loaded, {"require_load": True})
    assert v.status == FAIL and "width x8 < x16" in v.reason and loaded["load"]["declared"] and not loaded["load"]["observed"]


def test_lspci_vv_idle_downshift_is_inconclusive_and_audio_is_not_judged():
    links = _links("lspci-vv-workstation-idle.txt")
    assert set(links) == {"0000:01:00.0"}
    v = check_pcie_link(links["0000:01:00.0"], {"require_load": True})
    assert v.status == INCONCLUSIVE and "idle" in v.reason


def test_lspci_vv_older_format_numeric_ids_repeated_capture_and_no_root():
    links = _links("lspci-vv-nn-old-a100.txt")
    ok = links["0000:03:00.0"]
    assert ok["capability"]["achievable_speed_gts"] == 8.0 and len(ok["samples"]) == 2  # a Gen4 card in a Gen3 slot
    assert check_pcie_link(ok, {"require_load": True}).status == PASS
    denied = links["0000:04:00.0"]
    assert denied["samples"] == [] and "without root" in denied["notes"][0]
    assert check_pcie_link(denied, {"require_load": True}).status == INCONCLUSIVE


def test_lspci_vv_errors():
    with pytest.raises(TextEvidenceError, match="not `lspci -vv` output"):
        parse_lspci_vv("hello\n")
    bad = data("lspci-vv-workstation-idle.txt").replace("LnkSta:\tSpeed 2.5GT/s (downgraded), Width x16",
                                                         "LnkSta:\tSpeed fast, Width wide", 1)
    with pytest.raises(TextEvidenceError, match=r"line \d+: cannot read the speed and width"):
        parse_lspci_vv(bad)


# ---- the command -----------------------------------------------------------------------------------------

@pytest.mark.slow
def test_cli_matrix_alone_judges_topo_pcie_direct_never_omits_it(capsys):
    rc = main(["audit-text", "--nvidia-smi-topo", str(DATA / "nvidia-smi-topo-hgx-h100-nic12.txt"),
               "--profile", "h100", "--each"])
    out = capsys.readouterr().out
    assert rc == 10 and out.count("TOPO-PCIE-DIRECT") == 8 and "LINK-NVLINK-MESH" in out
    main(["audit-text", "--nvidia-smi-topo", str(DATA / "nvidia-smi-topo-noleading-cut.txt"), "--each"])
    out = capsys.readouterr().out
    assert out.count("TOPO-PCIE-DIRECT") == 2 and "INCONCLUSIVE" in out and "could not be judged" in out


@pytest.mark.slow
def test_cli_applies_the_profile_waiver(tmp_path, capsys):
    prof = tmp_path / "p.yaml"
    prof.write_text("name: mine\nextends: h100\nwaivers:\n  - id: TOPO-PCIE-DIRECT\n"
                    "    reason: the HGX baseboard pairs each GPU with a NIC on one PCIe switch by design\n")
    rc = main(["audit-text", "--lspci-tv", str(DATA / "lspci-tv-hgx-h100-nvswitch.txt"), "--profile", str(prof),
               "--each", "--json", str(tmp_path / "v.json")])
    out = capsys.readouterr().out
    # the tree names 8 x H100 SXM5 by PCI ID; their memory is not in it: INV-DEVICES INCONCLUSIVE (exit 2)
    assert rc == 11 and out.count("WAIVED") == 8 and "FAIL waived by profile" in out
    assert "INV-DEVICES        accelerators   INCONCLUSIVE 8 × H100 SXM5 by the texts' PCI IDs" in out
    assert (tmp_path / "v.json").read_text().count('"waived_status": "FAIL"') == 8


@pytest.mark.slow
def test_cli_lspci_vv_width_idle_and_under_load(tmp_path, capsys):
    vv = str(DATA / "lspci-vv-hgx-h100-x8.txt")
    # x8 of x16 read idle: the width FAILs (idle lowers the speed, not the width), the speed is not judged
    assert main(["audit-text", "--lspci-vv", vv, "--profile", "h100", "--each"]) == 10
    out = capsys.readouterr().out
    assert "TOPO-PCIE-LINK     0000:19:00.0   FAIL" in out and "width x8 < x16 (read idle" in out
    assert "0000:de:00.0" not in out
    assert main(["audit-text", "--lspci-vv", vv, "--under-load", "--profile", "h100", "--each", "--json",
                 str(tmp_path / "v.json")]) == 10
    out = capsys.readouterr().out
    assert "TOPO-PCIE-LINK     0000:19:00.0   FAIL" in out
    import json

    (v,) = [v for v in json.loads((tmp_path / "v.json").read_text())
            if v["subject"] == "0000:19:00.0" and v["requirement"] == "TOPO-PCIE-LINK"]
    assert "declared by the submitter, not observed" in v["method"]
    assert check_pcie_link(v["evidence"], v["thresholds"] or {"require_load": True}).status == FAIL  # replayable
    assert main(["audit-text", "--nvidia-smi-topo", str(DATA / "nvidia-smi-topo-partial.txt"), "--under-load"]) == 4
    assert "give --lspci-vv FILE" in capsys.readouterr().err


@pytest.mark.slow
def test_cli_tree_with_classes_from_lspci_vv_and_errors_name_the_file(tmp_path, capsys):
    prof = tmp_path / "ws.yaml"
    prof.write_text("name: workstation\nextends: base\nidentity:\n  vendor: NVIDIA\n  model: RTX 6000 Ada\n"
                    "  kind: gpu\n  pci_ids: ['10de:26b1']\n  count: 1\nhardware:\n  memory_gb: 48\n")
    rc = main(["audit-text", "--lspci-tv", str(DATA / "lspci-tv-workstation-hdmi-audio.txt"), "--lspci-vv",
               str(DATA / "lspci-vv-workstation-idle.txt"), "--profile", str(prof), "--each"])
    out = capsys.readouterr().out
    assert rc == 11 and "TOPO-PCIE-DIRECT   0000:01:00.0   PASS" in out  # the idle link is INCONCLUSIVE
    assert "TOPO-PCIE-LINK     0000:01:00.0   INCONCLUSIVE" in out and "0000:01:00.1" not in out
    cut = tmp_path / "topo.txt"
    cut.write_text("GPU0 GPU1\nGPU0 X\n")  # a matrix cut after one cell: read, and the cut listed
    main(["audit-text", "--nvidia-smi-topo", str(cut)])
    out = capsys.readouterr().out
    assert "read:     topo.txt (nvidia-smi topo -m); cut:" in out and "no row for GPU1 (cut)" in out
    nothing = tmp_path / "nothing.txt"
    nothing.write_text("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)\n")
    assert main(["audit-text", "--nvidia-smi-topo", str(nothing)]) == 4
    assert f"{nothing}: not read: it looks like none of the tools" in capsys.readouterr().err
    unknown = tmp_path / "tree.txt"
    unknown.write_text("-[0000:00]-+-01.0-[01]----00.0  NVIDIA Corporation Device 2bff\n")
    main(["audit-text", "--lspci-tv", str(unknown)])
    assert "not judged: 0000:01:00.0 NVIDIA Corporation Device 2bff" in capsys.readouterr().out
