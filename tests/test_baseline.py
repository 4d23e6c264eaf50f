"""Baselines learned from the fleet (pytest_sits/commands/baseline.py) and their effect on a run."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import yaml

from pytest_sits.cli import main
from pytest_sits.commands import baseline as bl
from pytest_sits.commands.fleet import merge as fleet_merge
from pytest_sits.profiles import resolve
from pytest_sits.verdict import FAIL, PASS, WARN, Verdict, apply_fleet_band

from helpers import run_sits, run_suite


def standard_run(dest: Path, platform: str, *extra: str) -> dict:
    """The report of a standard-level run of the bundled suite on ``platform``."""
    return run_suite(dest, f"--sits-platform={platform}", "--sits-level=standard", *extra).report


@pytest.fixture(scope="module")
def fleet20(tmp_path_factory):
    """A merged fleet of 20 simulated H100 nodes at standard level: 19 healthy ones, whose measured values
    spread by ±0.4% (seeded) as real nodes do, and n07 with slow device memory (sim fault membw-slow: 80% of
    the datasheet bandwidth, above the profile's 75% floor)."""
    base = tmp_path_factory.mktemp("baseline")
    healthy = standard_run(base / "pass", "sim:h100")
    slow = standard_run(base / "slow", "sim:h100+membw-slow")
    rng = random.Random(24)
    out = base / "fleet"
    for i in range(1, 21):
        d = out / f"n{i:02d}"
        d.mkdir(parents=True)
        rep = json.loads(json.dumps(slow if i == 7 else healthy))
        for v in rep["verdicts"]:
            if isinstance(v.get("measured"), float):
                v["measured"] *= 1 + rng.uniform(-0.004, 0.004)
        (d / "sits-report.json").write_text(json.dumps(rep))
        (d / "node.json").write_text(json.dumps({"node": d.name}))
    # The spread is written into the reports, not measured: replayed, their values are not their evidence's and
    # every node would be an ERROR. The baseline is what is tested here, on a merge that takes them as written.
    fleet_merge.merge(out, replay="none")
    return base


@pytest.mark.slow
def test_baseline_flags_the_slow_node_and_writes_a_valid_overlay(fleet20, capsys):
    out = fleet20 / "overlays"
    assert main(["baseline", str(fleet20 / "fleet" / "fleet-report.json"), f"--out={out}"]) == 1
    text = capsys.readouterr().out
    flagged = [line for line in text.splitlines() if line.startswith("  outside its band:")]
    assert flagged and all(" n07 MEM-BW-EFFICIENCY " in line for line in flagged), text
    assert "of 20 h100-sxm5 nodes" in flagged[0] and "1 node(s) outside" in text
    overlay = out / "h100-sxm5-fleet.yaml"
    data = yaml.safe_load(overlay.read_text())
    assert data["extends"] == "h100-sxm5" and data["fleet_baseline"]["nodes"] == 20
    prof = resolve(str(overlay))                      # the profile loader accepts it
    b = prof.fleet_band("MEM-BW-EFFICIENCY", "0000:11:00.0", "of datasheet")
    assert b["low"] < 0.9 < b["high"] and b["nodes"] == 20 and 0.8 < b["low"]
    # the datasheet floor is the parent's
    assert prof.thresholds("MEM-BW-EFFICIENCY") == resolve("h100-sxm5").thresholds("MEM-BW-EFFICIENCY")


@pytest.mark.slow
def test_a_run_with_the_overlay_warns_on_the_slow_node_and_replays(fleet20):
    out = fleet20 / "overlays2"
    main(["baseline", str(fleet20 / "fleet" / "fleet-report.json"), f"--out={out}"])
    prof = f"--sits-profile={out / 'h100-sxm5-fleet.yaml'}"
    slow = standard_run(fleet20 / "slow-run", "sim:h100+membw-slow", prof)
    bw = [v for v in slow["verdicts"] if v["requirement"] == "MEM-BW-EFFICIENCY"]
    assert bw and all(v["status"] == WARN and "outside the fleet band" in v["reason"] and "20 h100-sxm5 nodes"
                      in v["reason"] for v in bw)
    healthy = standard_run(fleet20 / "healthy-run", "sim:h100", prof)
    assert all(v["status"] == PASS for v in healthy["verdicts"] if v["requirement"] == "MEM-BW-EFFICIENCY")
    proc = run_sits("replay", str(fleet20 / "slow-run" / "sits-report.json"), cwd=fleet20)
    assert proc.returncode == 0 and "0 differ" in proc.stdout, proc.stdout


def test_the_band_never_loosens_a_threshold_and_only_warns():
    band = {"low": 0.88, "high": 0.92, "median": 0.9, "nodes": 20, "sku": "h100-sxm5"}
    ok = Verdict("MEM-BW-EFFICIENCY", PASS, "ok", 0.9, 0.75, "of datasheet", "gpu0")
    assert apply_fleet_band(ok, band) is ok
    low = Verdict("MEM-BW-EFFICIENCY", PASS, "ok", 0.8, 0.75, "of datasheet", "gpu0")
    warned = apply_fleet_band(low, band)
    assert warned.status == WARN and "[0.88, 0.92]" in warned.reason and "20 h100-sxm5 nodes" in warned.reason
    assert warned.evidence["fleet_band"]["median"] == 0.9
    failed = Verdict("MEM-BW-EFFICIENCY", FAIL, "below", 0.5, 0.75, "of datasheet", "gpu0", remediation="fix")
    assert apply_fleet_band(failed, band) is failed     # the floor decides; the band never turns FAIL to WARN
    inside_but_failing = Verdict("MEM-BW-EFFICIENCY", FAIL, "below", 0.9, 0.95, "of datasheet", "gpu0",
                                 remediation="fix")
    assert apply_fleet_band(inside_but_failing, band).status == FAIL


def test_band_rule_median_mad_and_floor():
    b = bl.band([100.0, 101.0, 99.0, 100.0, 100.5, 60.0], k=3.5, rel_floor=0.0)
    assert b["median"] == 100.0 and b["mad"] == 0.75 and b["low"] == pytest.approx(100 - 3.5 * 1.4826 * 0.75)
    same = bl.band([5.0] * 6, k=3.5, rel_floor=0.02)      # MAD 0: the relative floor keeps a width
    assert same["low"] == pytest.approx(4.9) and same["high"] == pytest.approx(5.1)


def test_bad_fleet_reports_are_usage_errors(tmp_path, capsys):
    assert main(["baseline", str(tmp_path / "none.json")]) == 4
    assert "no such file" in capsys.readouterr().err
    (tmp_path / "x.json").write_text(json.dumps({"schema": "pytest-sits/report"}))
    assert main(["baseline", str(tmp_path / "x.json")]) == 4
    assert "not a fleet report" in capsys.readouterr().err
    (tmp_path / "old.json").write_text(json.dumps({"schema": "pytest-sits/fleet-report"}))
    assert main(["baseline", str(tmp_path / "old.json")]) == 4
    assert "merge the fleet folder again" in capsys.readouterr().err


@pytest.mark.slow
def test_too_few_nodes_give_no_band(fleet20, tmp_path, capsys):
    fl = json.loads((fleet20 / "fleet" / "fleet-report.json").read_text())
    fl["nodes"] = fl["nodes"][:2]
    fl["measurements"] = [dict(m, nodes=m["nodes"][:2], values=m["values"][:2]) for m in fl["measurements"]]
    (tmp_path / "two.json").write_text(json.dumps(fl))
    assert main(["baseline", str(tmp_path / "two.json"), f"--out={tmp_path / 'o'}"]) == 4
    text = capsys.readouterr()
    assert "fewer than --min-nodes=3" in text.out and "no SKU has 3 nodes" in text.err


@pytest.mark.slow
@pytest.mark.parametrize("sku", ["../../escape", "/tmp/abs-escape", "a/b", ".hidden"])
def test_a_sku_that_is_not_a_plain_name_writes_nothing_anywhere(fleet20, tmp_path, capsys, sku):
    """The SKU comes from node reports (untrusted): a name that is a path is refused before anything is written."""
    fl = json.loads((fleet20 / "fleet" / "fleet-report.json").read_text())
    for n in fl["nodes"]:
        n["profile"] = sku
    for m in fl["measurements"]:
        m["profile"] = sku
    src = tmp_path / "in" / "fleet.json"
    src.parent.mkdir()
    src.write_text(json.dumps(fl))
    out = tmp_path / "deep" / "o"
    before = sorted(p for p in tmp_path.rglob("*"))
    assert main(["baseline", str(src), f"--out={out}", "--extends=h100-sxm5"]) == 4
    assert "is not a plain name" in capsys.readouterr().err
    assert sorted(p for p in tmp_path.rglob("*")) == before and not Path("/tmp/abs-escape-fleet.yaml").exists()


@pytest.mark.slow
def test_a_folder_in_the_way_of_the_overlay_is_a_one_line_error(fleet20, tmp_path, capsys):
    out = tmp_path / "o"
    (out / "h100-sxm5-fleet.yaml").mkdir(parents=True)
    assert main(["baseline", str(fleet20 / "fleet" / "fleet-report.json"), f"--out={out}"]) == 4
    err = capsys.readouterr().err.strip()
    assert "a folder is in the way" in err and len(err.splitlines()) == 1


@pytest.mark.slow
def test_an_overlay_refused_as_a_profile_is_not_left_behind(fleet20, tmp_path, capsys):
    out = tmp_path / "o"
    assert main(["baseline", str(fleet20 / "fleet" / "fleet-report.json"), f"--out={out}",
                 "--extends=no-such-profile.yaml"]) == 4
    assert "is not a valid profile" in capsys.readouterr().err
    assert not (out / "h100-sxm5-fleet.yaml").exists()
