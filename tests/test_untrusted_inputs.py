"""Evidence other people send: snapshots confined to their folder, capture never writes through planted links,
no raw HTML in Markdown, no terminal escape codes from device names."""

import json
import os
import re

import pytest

from pytest_sits.report import render as rep
from pytest_sits.platforms import PlatformError, from_spec
from pytest_sits.platforms.snapshot import capture


@pytest.fixture
def snapshot(tmp_path):
    sim = from_spec("sim:h100")
    dest = tmp_path / "snap"
    capture(dest, root=sim.root, nvml=sim.nvml())
    return dest


def _inventory(snap):
    return from_spec(f"snapshot:{snap}").inventory()


def test_clean_snapshot_reads(snapshot):
    assert len(_inventory(snapshot)["accelerators"]) == 8


def test_link_to_a_file_outside_is_refused_and_never_read(snapshot, tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("root:CANARY-6f1d:19000:0:99999:7:::\n")
    host = snapshot / "fs/proc/sys/kernel/hostname"
    host.unlink()
    host.symlink_to(secret)
    with pytest.raises(PlatformError) as exc:
        _inventory(snapshot)
    assert "outside the evidence folder" in str(exc.value) and "CANARY" not in str(exc.value)


def test_config_linked_to_dev_zero_is_refused(snapshot):
    cfg = next((snapshot / "fs/sys/devices").rglob("config"))
    cfg.unlink()
    cfg.symlink_to("/dev/zero")
    with pytest.raises(PlatformError, match="outside the evidence folder"):
        _inventory(snapshot)


def test_oversized_file_is_refused(snapshot):
    big = snapshot / "fs/proc/cpuinfo"
    with open(big, "wb") as fh:
        fh.truncate(64 << 20)
    with pytest.raises(PlatformError, match="over the .*-byte limit"):
        _inventory(snapshot)


@pytest.mark.parametrize("facts,msg", [('{"devices": "x"}', "not a list of objects"),
                                       ('{"devices": [{"pci_bus_id": 5}]}', "pci_bus_id is not a string"),
                                       ('{"devices": [], "p2p_nvlink": 3}', "not a matrix"),
                                       ("[1, 2]", "not a JSON object"),
                                       ('{"devices": [], "x": NaN}', "not valid JSON")])
def test_garbage_management_facts_are_a_usage_error(snapshot, facts, msg):
    (snapshot / "nvml.json").write_text(facts)
    with pytest.raises(PlatformError, match=msg):
        _inventory(snapshot)


@pytest.mark.parametrize("cpulist", ["0-99999999", "a-b", "3-1", "0,,x"])
def test_garbage_cpulist_names_the_file(snapshot, cpulist):
    (snapshot / "fs/sys/devices/system/node/node0/cpulist").write_text(cpulist)
    with pytest.raises(PlatformError, match="node0/cpulist"):
        _inventory(snapshot)


def test_capture_refuses_a_folder_that_is_not_new(tmp_path):
    sim = from_spec("sim:host")
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "x").write_text("")
    with pytest.raises(PlatformError, match="not empty"):
        capture(tmp_path / "used", root=sim.root, nvml={})
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    with pytest.raises(PlatformError, match="not a folder"):
        capture(tmp_path / "link", root=sim.root, nvml={})


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a folder to another user")
def test_capture_refuses_a_folder_of_another_user(tmp_path):
    sim = from_spec("sim:host")
    d = tmp_path / "theirs"
    d.mkdir()
    os.chown(d, 4321, 4321)
    with pytest.raises(PlatformError, match="belongs to uid 4321"):
        capture(d, root=sim.root, nvml={})


def test_capture_never_writes_through_a_planted_link(tmp_path, monkeypatch):
    sim = from_spec("sim:host")
    victim = tmp_path / "victim"
    victim.write_text("precious")
    dest = tmp_path / "snap"
    real_mkdirs = __import__("pytest_sits.platforms.snapshot", fromlist=["_mkdirs"])._mkdirs

    def plant(base, rel):  # another user plants a link where capture is about to write
        out = real_mkdirs(base, rel)
        target = out / "hostname"
        if rel.name == "kernel" and not os.path.lexists(target):
            target.symlink_to(victim)
        return out
    monkeypatch.setattr("pytest_sits.platforms.snapshot._mkdirs", plant)
    with pytest.raises(OSError):
        capture(dest, root=sim.root, nvml={})
    assert victim.read_text() == "precious"


def test_markdown_carries_no_raw_html():
    r = {"verdicts": [{"requirement": "INV-DEVICES", "subject": "<script>alert(1)</script>", "status": "PASS",
                       "reason": "<img src=x onerror=alert(1)>", "measured": 1, "unit": None, "threshold": 0,
                       "evidence": {}}]}
    text = rep.markdown_cell(r["verdicts"][0]["reason"]) + rep.markdown_cell(r["verdicts"][0]["subject"])
    assert "<" not in text and "&lt;script&gt;" in text


def test_terminal_lines_carry_no_escape_codes():
    report = {"verdicts": [{"requirement": "INV-DEVICES", "subject": "\x1b[2J\x1b]0;pwned\x07gpu", "status": "PASS",
                            "measured": "x\x1b[31m", "unit": None, "threshold": 0}],
              "summary": {"result": "PARTIAL", "result_reason": "r", "counts": {"PASS": 1}}}
    text = "\n".join(rep.terminal_lines(report))
    assert "\x1b" not in text and "\x07" not in text and "\\x1b" in text


def test_header_carries_no_escape_codes(pytester, snapshot):
    facts = json.loads((snapshot / "nvml.json").read_text())
    for d in facts["devices"]:
        d["name"] = "\x1b]0;pwned\x07\x1b[2JGPU"
    (snapshot / "nvml.json").write_text(json.dumps(facts))
    res = pytester.runpytest(f"--sits-platform=snapshot:{snapshot}", "--sits-profile=h100", "--co",
                             "--sits-report-dir=none")
    out = res.stdout.str()
    assert "sits: platform snapshot:" in out and "\x1b" not in out and "\\x1b]0;pwned" in out


def _nodes(snap, count, cpulist):
    base = snap / "fs/sys/devices/system/node"
    for d in base.glob("node*"):
        for f in d.iterdir():
            f.unlink()
        d.rmdir()
    for i in range(count):
        (base / f"node{i}").mkdir(parents=True)
        (base / f"node{i}" / "cpulist").write_text(cpulist(i) + "\n")


@pytest.mark.parametrize("count,cpulist,msg", [
    (1000, lambda i: "0-65535", "beyond 8191"),        # 8 KB of text that would list 65 million CPUs
    (2000, lambda i: "0-4095", re.escape("2000 NUMA nodes, more than a Linux kernel supports (1024)")),
    (2, lambda i: "0-3", "CPU 0 is in two NUMA nodes"),
])
def test_numa_node_and_cpu_counts_are_bounded(snapshot, count, cpulist, msg):
    """A made-up tree is a usage error naming the file, before it costs gigabytes of memory or report."""
    _nodes(snapshot, count, cpulist)
    with pytest.raises(PlatformError, match=msg) as exc:
        _inventory(snapshot)
    assert "fix: capture the snapshot again" in str(exc.value)


def test_the_largest_real_topology_still_reads(snapshot):
    _nodes(snapshot, 32, lambda i: f"{i * 256}-{i * 256 + 255}")  # 8192 CPUs in 32 nodes
    inv = _inventory(snapshot)
    assert len(inv["numa"]) == 32 and sum(len(n["cpus"]) for n in inv["numa"]) == 8192


@pytest.mark.parametrize("kind", ["snapshot", "evidence"])
def test_a_linked_evidence_folder_says_so_without_showing_where_it_points(snapshot, tmp_path, kind):
    link = tmp_path / "link"
    link.symlink_to(snapshot)
    with pytest.raises(PlatformError) as exc:
        from_spec(f"{kind}:{link}")
    text = str(exc.value)
    assert "a symbolic link" in text and "not a link to it" in text, text
    assert str(snapshot) not in text  # the link's target is not told to whoever sent it
    assert "capture" not in text  # nothing is wrong with the snapshot itself


@pytest.mark.parametrize("depth", [65, 500, 900])
def test_json_nested_deeper_than_any_report_is_refused_without_a_traceback(tmp_path, capsys, depth):
    """A report or a snapshot's JSON nested hundreds deep (under json's own limit) would make any recursive walk
    of it raise RecursionError: refused at reading, naming the file."""
    from pytest_sits.cli import main
    from pytest_sits.files import UntrustedInputError, load_json

    deep: list = []
    for _ in range(depth):
        deep = [deep]
    (tmp_path / "facts.json").write_text(json.dumps({"a": deep}))
    with pytest.raises(UntrustedInputError, match="nested more than 64 levels deep"):
        load_json(tmp_path / "facts.json")
    report = {"schema": "pytest-sits/report", "verdicts": [{"evidence": {"deep": deep}}]}
    (tmp_path / "r.json").write_text(json.dumps(report))
    for argv in (["replay", str(tmp_path / "r.json")], ["report", "validate", str(tmp_path / "r.json")],
                 ["report", "render", str(tmp_path / "r.json"), f"--html={tmp_path / 'r.html'}"]):
        assert main(argv) == 4, argv
        err = capsys.readouterr().err
        assert "nested more than 64 levels deep" in err and "Traceback" not in err, err


def test_a_report_nested_as_deep_as_a_real_one_reads():
    from pytest_sits.files import nesting_depth

    assert nesting_depth({"a": [{"b": 1}]}) == 3 and nesting_depth(5) == 0 and nesting_depth([[[[]]]], stop=2) == 3


@pytest.mark.parametrize("junk,entries", [(600, False), (5000, True)], ids=["files-over-the-cap", "entries"])
def test_a_folder_padded_with_junk_is_refused_whole_not_read_in_part(tmp_path, capsys, junk, entries):
    """Names that sort first ("!000…") once pushed the real capture past the file cap, so it was silently left
    out; now a folder over the cap is refused in one line, unread, whatever the names."""
    from pathlib import Path

    from pytest_sits.cli import main
    from pytest_sits.platforms.evidence import EvidenceError, EvidencePlatform

    d = tmp_path / "evidence"
    d.mkdir()
    data = Path(__file__).resolve().parent / "data"
    (d / "nvidia-smi-q.txt").write_bytes((data / "nvidia-smi-q-h100-570.txt").read_bytes())
    for i in range(junk):
        (d / f"!{i:05d}.txt").write_text("junk\n")
    with pytest.raises(EvidenceError) as exc:
        EvidencePlatform(d)
    text = str(exc.value)
    assert ("entries" in text) if entries else (f"{junk + 1} files, more than the 512" in text), text
    assert "fix: submit a folder holding only the machine's captures" in text
    assert main(["audit", str(d)]) == 4
    err = capsys.readouterr().err
    assert "Traceback" not in err and "the folder was not read" in err, err


TWO_GPU_TOPO = """\
\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID
GPU0\t X \tNV12\t0-63\t0\t\tN/A
GPU1\tNV12\t X \t0-63\t0\t\tN/A

Legend:

  X    = Self
  NV#  = Connection traversing a bonded set of # NVLinks
"""


def test_another_machines_topo_beside_an_8_gpu_q_is_refused_as_two_machines(tmp_path, capsys):
    """A 2-GPU `topo -m` beside an 8-GPU `nvidia-smi -q` (each listing every GPU of its machine) once gave a false
    LINK-NVLINK-MESH FAIL; it is refused, naming both files, and judges nothing."""
    from pathlib import Path

    from pytest_sits.cli import main
    from pytest_sits.platforms.evidence import EvidencePlatform

    d = tmp_path / "evidence"
    d.mkdir()
    data = Path(__file__).resolve().parent / "data"
    (d / "nvidia-smi-q.txt").write_bytes((data / "nvidia-smi-q-h100-570.txt").read_bytes())
    (d / "topo.txt").write_text(TWO_GPU_TOPO)
    with pytest.raises(PlatformError) as exc:
        EvidencePlatform(d).inventory()
    text = str(exc.value)
    assert "topo.txt" in text and "nvidia-smi-q.txt" in text and "(2 and 8)" in text, text
    assert "different machines" in text
    assert main(["audit", str(d)]) == 4
    assert "different machines" in capsys.readouterr().err
    # the same machine's matrix (all 8 GPUs) is read
    (d / "topo.txt").write_bytes((data / "nvidia-smi-topo-hgx-h100-nic12.txt").read_bytes())
    assert len(EvidencePlatform(d).inventory()["accelerators"]) == 8
