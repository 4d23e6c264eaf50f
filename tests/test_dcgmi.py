"""NVIDIA DCGM's dcgmi diag as submitted evidence: the table (whole, fragments, wrapped messages) and the -j JSON
read; DEP-PERSIST, DEP-ROWREMAP and DEP-ECC judged on DCGM's results per GPU; a skip is never a pass."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_sits.checks.health import check_ecc_dcgmi, check_persistence_dcgmi, check_rowremap_dcgmi
from pytest_sits.cli import main
from pytest_sits.conditions.health import submitted_dcgmi
from pytest_sits.platforms.evidence import EvidencePlatform
from pytest_sits.probes.readers import classify
from pytest_sits.probes.readers.dcgmi_diag import parse_dcgmi_json, parse_dcgmi_text
from pytest_sits.profiles import resolve
from pytest_sits.verdict import FAIL, INCONCLUSIVE, PASS

W1, W2 = 27, 48


def row(name: str, value: str, close: bool = True) -> str:
    return f"| {name:<{W1 - 2}}| {value:<{W2 - 1}}" + ("|" if close else "")


def table(memory: str = "Pass - All", persistence: str = "Pass", error: str = "", devices: str = "2330,2330",
          level3: str = "Pass - All") -> str:
    """A dcgmi diag -r 3 table written for these tests (DCGM 3.x layout)."""
    bar = "+" + "-" * W1 + "+" + "-" * W2 + "+"
    lines = [bar, row("Diagnostic", "Result"), "+" + "=" * W1 + "+" + "=" * W2 + "+",
             "|-----  Metadata  ----------+------------------------------------------------|",
             row("DCGM Version", "3.3.9"), row("Driver Version Detected", "570.172.08"),
             row("GPU Device IDs Detected", devices),
             "|-----  Deployment  --------+------------------------------------------------|",
             row("Denylist", "Pass"), row("Persistence Mode", persistence),
             row("Page Retirement/Row Remap", "Pass")]
    if error:  # wrapped at a space over two rows, as dcgmi prints it
        first, rest = error[:45], error[45:]
        lines += [row("Error", first), row("", " " + rest.lstrip() if error[45:46] == " " else rest)]
    lines += ["+-----  Hardware  ----------+------------------------------------------------+"]
    lines += [row("GPU Memory" if i == 0 else "", part) for i, part in enumerate(memory.split(";"))]
    lines += ["+-----  Stress  ------------+------------------------------------------------+",
              row("Targeted Stress", level3), bar]
    return "\n".join(lines) + "\n"


def th(req: str, **over):
    return dict(resolve("h100").thresholds(req), **over)


def at(tmp_path: Path, text: str, name: str = "dcgmi.txt"):
    (tmp_path / name).write_text(text)
    inv = EvidencePlatform(tmp_path).inventory()
    return inv, {a["bdf"]: a for a in inv["accelerators"]}


def test_the_table_is_read_with_its_gpus_and_wrapped_messages():
    text = table(memory="Pass - GPUs: 1;Fail - GPU: 0",
                 error="GPU 1 has uncorrectable memory errors and row remappings are pending")
    assert classify(text)[0] == "dcgmi-diag"
    facts = parse_dcgmi_text(text)
    assert facts["version"] == "3.3.9" and facts["driver"] == "570.172.08" and facts["device_ids"] == ["2330", "2330"]
    mem = next(t for t in facts["tests"] if t["name"] == "GPU Memory")
    assert mem["results"] == [{"status": "pass", "gpus": [1]}, {"status": "fail", "gpus": [0]}]
    assert facts["errors"][0]["gpu"] == 1 and "row remappings are pending" in facts["errors"][0]["text"]


def test_a_fragment_without_the_header_is_still_dcgmi():
    text = row("GPU Memory", "Pass - GPUs: 1, 2, 3") + "\n" + row("", "Fail - GPU: 0") + "\n" + row("Warning", "GPU 0 Thermal", close=False)
    assert classify(text)[0] == "dcgmi-diag"
    facts = parse_dcgmi_text(text)
    assert facts["tests"][0]["results"][1] == {"status": "fail", "gpus": [0]} and facts["cuts"]


def test_json_results_per_gpu():
    doc = {"DCGM GPU Diagnostic": {"test_categories": [
        {"category": "Deployment", "tests": [{"name": "Persistence Mode", "results": [{"status": "Pass"}]}]},
        {"category": "Hardware", "tests": [{"name": "GPU Memory", "results": [
            {"gpu_ids": "0", "status": "Fail", "warnings": "GPU 0 memory error"}, {"gpu_ids": "1", "status": "Pass"}]}]}]}}
    text = json.dumps(doc, indent=2)
    assert classify(text)[0] == "dcgmi-diag-json"
    facts = parse_dcgmi_json(text)
    assert facts["tests"][1]["results"][0] == {"status": "fail", "gpus": [0], "info": ""}


def test_a_memory_fail_fails_that_gpu_and_a_pass_is_not_an_ecc_pass(tmp_path):
    inv, accs = at(tmp_path, table(memory="Pass - GPUs: 1;Fail - GPU: 0"))
    fail = check_ecc_dcgmi(submitted_dcgmi(inv, accs["GPU0"], "DEP-ECC"), th("DEP-ECC"), "GPU0")
    ok = check_ecc_dcgmi(submitted_dcgmi(inv, accs["GPU1"], "DEP-ECC"), th("DEP-ECC"), "GPU1")
    assert fail.status == FAIL and "GPU Memory: fail" in fail.reason
    assert ok.status == INCONCLUSIVE and "ECC mode and error counts are not in DCGM's result" in ok.reason


def test_an_error_naming_pending_remaps_fails_that_gpu_only(tmp_path):
    inv, accs = at(tmp_path, table(error="GPU 1 has uncorrectable memory errors and row remappings are pending"))
    v1 = check_rowremap_dcgmi(submitted_dcgmi(inv, accs["GPU1"], "DEP-ROWREMAP"), th("DEP-ROWREMAP"), "GPU1")
    v0 = check_rowremap_dcgmi(submitted_dcgmi(inv, accs["GPU0"], "DEP-ROWREMAP"), th("DEP-ROWREMAP"), "GPU0")
    assert v1.status == FAIL and "remappings are pending" in v1.reason and v0.status == PASS


def test_persistence_and_a_skip_that_is_never_a_pass(tmp_path):
    inv, accs = at(tmp_path, table(persistence="Fail", memory="Skip - All"))
    assert check_persistence_dcgmi(submitted_dcgmi(inv, accs["GPU0"], "DEP-PERSIST"), th("DEP-PERSIST"),
                                   "GPU0").status == FAIL
    v = check_ecc_dcgmi(submitted_dcgmi(inv, accs["GPU0"], "DEP-ECC"), th("DEP-ECC"), "GPU0")
    assert v.status == INCONCLUSIVE and "a skip is not a pass" in v.reason


@pytest.mark.parametrize("text, says", [
    ("| Diagnostic | Result |\nsomething else\n", "not a row"),
    ('{"DCGM GPU Diagnostic": {"test_categories": 3}}', "test_categories"),
    ('{"DCGM GPU Diagnostic": ', "not JSON"),
])
def test_broken_output_is_refused_naming_the_line(text, says):
    parse = parse_dcgmi_json if text.startswith("{") else parse_dcgmi_text
    with pytest.raises(ValueError, match=says):
        parse(text)


@pytest.mark.slow
def test_audit_with_the_profile_of_the_gpus(tmp_path, capsys):
    (tmp_path / "e").mkdir()
    (tmp_path / "e" / "dcgmi.txt").write_text(table(memory="Pass - GPUs: 1;Fail - GPU: 0"))
    rc = main(["audit", str(tmp_path / "e"), "--profile=h100", "--each", f"--json={tmp_path / 'v.json'}"])
    capsys.readouterr()
    vs = {(v["requirement"], v["subject"]): v for v in json.loads((tmp_path / "v.json").read_text())}
    assert vs[("DEP-ECC", "GPU0")]["status"] == FAIL and vs[("DEP-PERSIST", "GPU1")]["status"] == PASS
    assert vs[("DEP-DRIVER", "driver")]["status"] == INCONCLUSIVE  # dcgmi gives no CUDA version
    assert rc == 10
