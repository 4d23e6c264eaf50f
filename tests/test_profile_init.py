"""Accelerators of a model no bundled profile is for: refused with the fix, and ``sits profile init`` writing
that profile from the submitted texts (every value with the file and line it came from)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from pytest_sits.cli import main
from pytest_sits.profiles import resolve

DATA = Path(__file__).parent / "data"


def a10_texts(tmp_path: Path) -> Path:
    """A folder with one nvidia-smi -q of two NVIDIA A10 (10de:2236): the L40S capture with its name, device ID,
    memory and power limit changed to the A10's."""
    text = (DATA / "nvidia-smi-q-l40s-560.txt").read_text()
    text = (text.replace("NVIDIA L40S", "NVIDIA A10").replace("0x26B910DE", "0x223610DE")
            .replace("46068 MiB", "23028 MiB").replace("350.00 W", "150.00 W"))
    d = tmp_path / "texts"
    d.mkdir()
    (d / "nvidia-smi-q.txt").write_text(text)
    return d


def test_an_unprofiled_model_is_refused_naming_it_and_the_fix(tmp_path, capsys):
    d = a10_texts(tmp_path)
    rc = main(["audit", str(d), "--json", str(tmp_path / "v.json")])
    err = capsys.readouterr().err
    assert rc == 4
    assert "NVIDIA A10 (10de:2236)" in err and "no bundled profile is for that model" in err
    assert f"sits profile init --from={d}" in err and "--sits-profile=FILE" in err
    assert not (tmp_path / "v.json").exists()


def test_a_known_model_still_picks_its_profile(tmp_path, capsys):
    rc = main(["audit", str(DATA / "nvidia-smi-q-l40s-560.txt"), "--json", str(tmp_path / "v.json")])
    assert rc in (0, 10, 11, 13), capsys.readouterr().err
    assert "no bundled profile" not in capsys.readouterr().err


def test_profile_init_writes_a_profile_that_resolves_with_each_value_sourced(tmp_path, capsys):
    d = a10_texts(tmp_path)
    out = tmp_path / "a10.yaml"
    assert main(["profile", "init", f"--from={d}", f"--out={out}"]) == 0
    assert "check every value against the datasheet" in capsys.readouterr().out
    text = out.read_text()
    data = yaml.safe_load(text)
    assert data["extends"] == "base" and data["name"] == "nvidia-a10"
    assert data["identity"]["pci_ids"] == ["10de:2236"] and data["identity"]["model"] == "NVIDIA A10"
    assert data["identity"]["count"] == 2
    assert data["hardware"]["memory_gb"] == round(23028 * 2**20 / 1e9, 1)
    assert data["hardware"]["tdp_w"] == 150 and data["hardware"]["pcie_gen"] == 4
    assert data["hardware"]["pcie_width"] == 16
    for line in text.splitlines():  # every identity and hardware value says where it was read
        if line.startswith("  ") and not line.strip().startswith(("kind:", "count:")):
            assert "(nvidia-smi-q.txt) line " in line, line
    p = resolve(str(out))
    assert p.data["identity"]["pci_ids"] == ["10de:2236"]


def test_the_written_profile_lets_the_audit_judge_the_texts(tmp_path, capsys):
    d = a10_texts(tmp_path)
    out = tmp_path / "a10.yaml"
    assert main(["profile", "init", f"--from={d}", f"--out={out}"]) == 0
    rc = main(["audit", str(d), f"--profile={out}", "--json", str(tmp_path / "v.json")])
    capsys.readouterr()
    assert rc in (0, 10, 11, 13)
    verdicts = json.loads((tmp_path / "v.json").read_text())
    rows = verdicts if isinstance(verdicts, list) else verdicts.get("verdicts", [])
    assert rows, verdicts


def test_profile_init_prints_without_out_and_never_overwrites(tmp_path, capsys):
    d = a10_texts(tmp_path)
    assert main(["profile", "init", f"--from={d}"]) == 0
    assert "pci_ids: [\"10de:2236\"]" in capsys.readouterr().out
    out = tmp_path / "a10.yaml"
    out.write_text("mine\n")
    assert main(["profile", "init", f"--from={d}", f"--out={out}"]) == 4
    assert "exists" in capsys.readouterr().err and out.read_text() == "mine\n"


@pytest.mark.parametrize("case", ["no-from", "two-models", "no-accelerator"])
def test_profile_init_refuses_what_it_cannot_write_one_profile_from(tmp_path, capsys, case):
    if case == "no-from":
        args, says = ["profile", "init"], "needs --from=PATH"
    elif case == "two-models":
        d = a10_texts(tmp_path)
        (d / "l40s.txt").write_text((DATA / "nvidia-smi-q-l40s-560.txt").read_text()
                                    .replace("Bus Id", "Bus Id").replace("00000000:", "00000001:"))
        args, says = ["profile", "init", f"--from={d}"], "one profile per model"
    else:
        args, says = ["profile", "init", f"--from={DATA / 'lspci-vvv-nvme-only.txt'}"], "no accelerator"
    assert main(args) == 4
    err = capsys.readouterr().err
    assert says in err, err


def test_the_profile_init_writes_is_taken_by_a_relative_path(tmp_path, capsys, monkeypatch):
    d = a10_texts(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main(["profile", "init", f"--from={d}", "--out=a10.yaml"]) == 0
    rc = main(["audit", str(d), "--profile=a10.yaml", "--json", str(tmp_path / "v.json")])
    err = capsys.readouterr().err
    assert rc in (0, 10, 11, 13), err
    assert "unknown profile" not in err
